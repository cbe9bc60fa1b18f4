#!/bin/bash
# cpu_per_req.sh - the server's CPU per request, kvd against redis-server,
# for durable writes and for reads: kvd --durability sync on its RESP port
# and redis-server --appendonly yes --appendfsync always, both on loopback,
# each started once on a new data directory, then redis-benchmark run
# against one and the other in turn (alternated, REPEAT times).  Around
# every run the server's utime+stime is read from /proc/PID/stat; the
# figure is that delta over the run's requests, in microseconds.
#
#   bench/cpu_per_req.sh [KVD_BINARY [KVD_ARGS...]]
#   N=200000 REPEAT=3 bench/cpu_per_req.sh build/kvd/kvd
#
# Rows (ROWS, default all): set-P1 (SET, -c 50 -P 1), set-P16, get-P1
# (after the SET runs, keys of the same range), hset-P1 (HSET of one field
# of 100 bytes in hash:RAND, 1,000,000 hashes: redis-benchmark's own -t
# hset puts every field in one hash, which kvd rewrites whole on every
# HSET, docs/architecture.md section 14).  Every request is 100 bytes of
# value, keys from -r 1000000.  Prints every run (req/s, CPU us/request)
# and then the medians and the ratio kvd / redis of the medians (below 1:
# kvd spends less CPU per request), with the client's own CPU a request
# (redis-benchmark's user + system time, bash's `times`), and the cores
# that 1.5x redis-server's rate would take at those costs (issue 36's
# goal; more than the machine has means the goal needs less CPU a request
# than measured).  bench/RESULTS.md ("Write CPU") quotes it.  Load:
# loopback only, N requests per run (default 200,000).
set -eu

KVD=${1:-build/kvd/kvd}
[ $# -gt 0 ] && shift
N=${N:-200000}
ROWS=${ROWS:-set-P1 set-P16 get-P1 hset-P1}
VAL=$(head -c 100 /dev/zero | tr '\0' v)
REPEAT=${REPEAT:-3}
TICK=$(getconf CLK_TCK)
DIR=$(mktemp -d "${TMPDIR:-/tmp}/cpu_per_req.XXXXXX")
KP=
RP=

cleanup() {
	[ -n "$KP" ] && kill "$KP" 2>/dev/null && wait "$KP" 2>/dev/null
	[ -n "$RP" ] && kill "$RP" 2>/dev/null && wait "$RP" 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ping() { # port log
	for _ in $(seq 1 100); do
		redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	cat "$2" >&2
	exit 1
}

# utime + stime of a process, in clock ticks (fields 14 and 15; the comm
# field is in parentheses and has no spaces for these two servers)
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

KPORT=$(free_port)
KRESP=$(free_port)
RPORT=$(free_port)
mkdir -p "$DIR/kvd" "$DIR/redis"
"$KVD" --bind 127.0.0.1 --port "$KPORT" --resp-port "$KRESP" \
	--data-dir "$DIR/kvd" --threads 2 --durability sync "$@" \
	>"$DIR/kvd.log" 2>&1 &
KP=$!
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$DIR/redis" --save '' \
	--daemonize no --appendonly yes --appendfsync always \
	>"$DIR/redis.log" 2>&1 &
RP=$!
wait_ping "$KRESP" "$DIR/kvd.log"
wait_ping "$RPORT" "$DIR/redis.log"

echo "# kvd: $KVD --threads 2 --durability sync $*"
echo "# redis: $(redis-server --version | cut -d' ' -f1-3) --appendonly yes --appendfsync always"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), N=$N, REPEAT=$REPEAT"
echo "# test server run req/s cpu_us_per_req client_cpu_us_per_req"

# bash's `times` lines (the shell's, then its children's user and system
# time, as 0m1.230s) -> the children's CPU seconds
child_secs() {
	tail -1 | tr 'ms' '  ' | awk '{ print $1 * 60 + $2 + $3 * 60 + $4 }'
}

# one redis-benchmark run: prints "req/s us/request client_us/request"
# (the client's: redis-benchmark's own CPU, user + system, per request)
run() { # pid port row
	local before after out rps test=${3%-P*} p=${3#*-P} what cl
	if [ "$test" = hset ]; then
		what="hset hash:__rand_int__ f1 $VAL"
	else
		what="-t $test"
	fi
	before=$(cpu_ticks "$1")
	# shellcheck disable=SC2086
	out=$(
		redis-benchmark -h 127.0.0.1 -p "$2" -n "$N" -r 1000000 \
			-d 100 -c 50 -P "$p" --csv $what | tail -1
		times
	)
	after=$(cpu_ticks "$1")
	rps=$(echo "$out" | head -1 | cut -d, -f2 | tr -d '"')
	cl=$(echo "$out" | child_secs)
	awk -v b="$before" -v a="$after" -v t="$TICK" -v n="$N" -v r="$rps" \
		-v c="$cl" 'BEGIN { printf "%.0f %.2f %.2f\n", r,
			(a - b) / t * 1e6 / n, c * 1e6 / n }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

RES=$DIR/results
: >"$RES"
for row in $ROWS; do
	for r in $(seq 1 "$REPEAT"); do
		# alternate which server goes first
		if [ $((r % 2)) -eq 1 ]; then order="kvd redis"; else order="redis kvd"; fi
		for s in $order; do
			if [ "$s" = kvd ]; then
				res=$(run "$KP" "$KRESP" "$row")
			else
				res=$(run "$RP" "$RPORT" "$row")
			fi
			echo "$row $s $r $res"
			echo "$row $s $res" >>"$RES"
		done
	done
done

echo
# the median of column c of server s's runs of test t
col() { awk -v t="$1" -v s="$2" -v c="$3" '$1 == t && $2 == s { print $c }' "$RES" | median; }

# cores_1.5x: what 1.5x redis-server's rate would take of the machine's
# cores, at kvd's CPU a request and its client's as measured
echo "# medians: test kvd_req/s redis_req/s kvd_us redis_us kvd/redis_us client_us_kvd client_us_redis cores_1.5x (of $(nproc))"
for t in $ROWS; do
	awk -v t="$t" -v kr="$(col "$t" kvd 3)" -v rr="$(col "$t" redis 3)" \
		-v ku="$(col "$t" kvd 4)" -v ru="$(col "$t" redis 4)" \
		-v kc="$(col "$t" kvd 5)" -v rc="$(col "$t" redis 5)" \
		'BEGIN { printf "%s %s %s %s %s %.2f %s %s %.2f\n", t, kr, rr, ku,
			ru, ku / ru, kc, rc, 1.5 * rr * (ku + kc) / 1e6 }'
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
