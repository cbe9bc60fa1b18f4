#!/bin/bash
# write_modes.sh - kvd sync against itself, one io-thread-flush mode after
# another (no, ring, inline, auto), alternated REPEAT times: for each run, a new
# kvd on a new data directory, 30,000 SETs to warm it, then N SETs with
# redis-benchmark on its RESP port, and around them the server's
# utime+stime (/proc/PID/stat), its threads' voluntary context switches
# (/proc/PID/task/*/status) and its STATS commits, inline_commits and
# ring_flushes.
#
#   bench/write_modes.sh [KVD_BINARY [PIPELINE]]
#   N=200000 REPEAT=3 MODES="no ring inline auto" bench/write_modes.sh build/kvd/kvd 1
#
# Prints one line per run: mode, req/s, CPU us per request, voluntary
# context switches per request, writes per commit, the share of commits
# an io thread made itself, and the share of those whose flush went
# through its ring (the rest: its own fdatasync); then the medians per
# mode.
# bench/RESULTS.md ("Write CPU") quotes it.  Loopback only, bounded by N.
set -eu

KVD=${1:-build/kvd/kvd}
P=${2:-1}
N=${N:-200000}
REPEAT=${REPEAT:-3}
MODES=${MODES:-no ring inline auto}
TICK=$(getconf CLK_TCK)
KVCLI=${KVCLI:-$(dirname "$KVD")/../kvcli/kvcli}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/write_modes.XXXXXX")
KP=

cleanup() {
	[ -n "$KP" ] && kill "$KP" 2>/dev/null && wait "$KP" 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
switches() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }'
}
stat_of() { "$KVCLI" -p "$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }

one() { # mode
	local port resp before after cs0 cs1 c0 c1 i0 i1 r0 r1 out rps
	port=$(free_port)
	resp=$(free_port)
	rm -rf "$DIR/data"
	"$KVD" --bind 127.0.0.1 --port "$port" --resp-port "$resp" \
		--data-dir "$DIR/data" --threads 2 --durability sync \
		--io-thread-flush "$1" >"$DIR/kvd.log" 2>&1 &
	KP=$!
	for _ in $(seq 1 100); do
		redis-cli -p "$resp" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	redis-benchmark -h 127.0.0.1 -p "$resp" -t set -n 30000 -r 1000000 \
		-d 100 -c 50 -P "$P" --csv >/dev/null
	before=$(cpu "$KP")
	cs0=$(switches "$KP")
	c0=$(stat_of "$port" commits)
	i0=$(stat_of "$port" inline_commits)
	r0=$(stat_of "$port" ring_flushes)
	out=$(redis-benchmark -h 127.0.0.1 -p "$resp" -t set -n "$N" \
		-r 1000000 -d 100 -c 50 -P "$P" --csv | tail -1)
	after=$(cpu "$KP")
	cs1=$(switches "$KP")
	c1=$(stat_of "$port" commits)
	i1=$(stat_of "$port" inline_commits)
	r1=$(stat_of "$port" ring_flushes)
	kill "$KP"
	wait "$KP" || true
	KP=
	rps=$(echo "$out" | cut -d, -f2 | tr -d '"')
	awk -v m="$1" -v r="$rps" -v b="$before" -v a="$after" -v t="$TICK" \
		-v n="$N" -v s0="$cs0" -v s1="$cs1" -v c0="$c0" -v c1="$c1" \
		-v i0="$i0" -v i1="$i1" -v r0="$r0" -v r1="$r1" 'BEGIN {
		printf "%s %.0f %.2f %.2f %.1f %.2f %.2f\n", m, r,
		    (a - b) / t * 1e6 / n, (s1 - s0) / n, n / (c1 - c0),
		    (i1 - i0) / (c1 - c0),
		    (i1 > i0 ? (r1 - r0) / (i1 - i0) : 0) }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "# $KVD, SET -P $P -c 50, N=$N, REPEAT=$REPEAT, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# mode req/s cpu_us_per_req switches_per_req writes_per_commit inline_share ring_share"
RES=$DIR/results
: >"$RES"
for r in $(seq 1 "$REPEAT"); do
	for m in $MODES; do
		line=$(one "$m")
		echo "$line"
		echo "$line" >>"$RES"
	done
done
echo "# medians: mode req/s cpu_us_per_req switches_per_req"
for m in $MODES; do
	echo "$m $(awk -v m="$m" '$1 == m { print $2 }' "$RES" | median)" \
		"$(awk -v m="$m" '$1 == m { print $3 }' "$RES" | median)" \
		"$(awk -v m="$m" '$1 == m { print $4 }' "$RES" | median)"
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
