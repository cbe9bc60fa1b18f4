#!/usr/bin/env bash
# bench/redis-benchmark.sh - redis-benchmark against redis-server and against
# kvd's RESP port, side by side in one run, on loopback, with temp dirs.
#
#   bench/redis-benchmark.sh            -n 1000000, one run per figure
#   bench/redis-benchmark.sh --quick    -n 100000 (a smoke run: a minute)
#   bench/redis-benchmark.sh --full     -n 1000000, median of three runs
#
# Every server gets the same command:
#   redis-benchmark -t set,get -n N -r 1000000 -d 100 -c 50 -P {1,16}
# Peers: redis-server with persistence off, appendfsync everysec and
# appendfsync always; kvd with durability async and sync.  The pairs compared
# are the ones issue 8 sets targets for: GET against redis without
# persistence, SET in sync mode against appendfsync always, SET in async mode
# against appendfsync everysec.  Server and load generator share the machine,
# so only the ratios mean something.
#
# Prints the tables and writes them into bench/RESULTS.md between
# <!-- redis-benchmark:begin --> and <!-- redis-benchmark:end --> (the rest
# of that file is left as it is).  KVD_BIN picks the kvd binary (default:
# build/kvd/kvd, brought up to date first; KVD_REV then names its source
# revision); BENCH_DIR where the data directories go.
# Not part of `make test`.
set -euo pipefail

cd "$(dirname "$0")/.."
N=1000000
REPS=1
MODE=default
case "${1:-}" in
--quick) N=100000 MODE=quick ;;
--full) REPS=3 MODE=full ;;
"") ;;
*)
	echo "usage: $0 [--quick|--full]" >&2
	exit 2
	;;
esac

for t in redis-server redis-benchmark redis-cli python3; do
	command -v "$t" >/dev/null || {
		echo "redis-benchmark.sh: $t is missing (scripts/deps.sh test)" >&2
		exit 1
	}
done

if [ -z "${KVD_BIN:-}" ]; then # the Release build `make build` uses
	[ -f build/CMakeCache.txt ] ||
		cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j"$(nproc)" --target kvd >/dev/null
	KVD_BIN=build/kvd/kvd
fi

WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/kvd-redis-bench.XXXXXX")
SERVER_PID=""
cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ready() { # port
	for _ in $(seq 1 100); do
		if redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; then
			return 0
		fi
		sleep 0.1
	done
	echo "redis-benchmark.sh: server on port $1 did not start" >&2
	exit 1
}

stop_server() {
	kill "$SERVER_PID"
	wait "$SERVER_PID" || true
	SERVER_PID=""
}

start_redis() { # name extra-args...
	local name=$1 dir="$WORK/$1"
	shift
	mkdir -p "$dir"
	PORT=$(free_port)
	redis-server --port "$PORT" --bind 127.0.0.1 --dir "$dir" --save "" \
		--logfile "$dir/log" --daemonize no "$@" &
	SERVER_PID=$!
	wait_ready "$PORT"
}

start_kvd() { # name durability
	local dir="$WORK/$1"
	mkdir -p "$dir"
	PORT=$(free_port)
	"$KVD_BIN" --bind 127.0.0.1 --port "$(free_port)" --resp-port "$PORT" \
		--data-dir "$dir/data" --durability "$2" \
		--log-file "$dir/log" &
	SERVER_PID=$!
	wait_ready "$PORT"
}

# rps of one run: prints "SET GET" requests per second.
bench_once() { # pipeline
	local out
	out=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -n "$N" \
		-r 1000000 -d 100 -c 50 -P "$1" --csv 2>&1)
	if grep -qi "error" <<<"$out"; then
		echo "redis-benchmark reported errors:" >&2
		echo "$out" >&2
		exit 1
	fi
	awk -F'"' '$2 == "SET" { s = $4 } $2 == "GET" { g = $4 }
		END { if (s == "" || g == "") exit 1; print s, g }' <<<"$out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A RPS
measure() { # name
	local p runs s g
	for p in 1 16; do
		runs=""
		for _ in $(seq 1 "$REPS"); do
			runs+="$(bench_once "$p")"$'\n'
		done
		s=$(awk 'NF { print $1 }' <<<"$runs" | median)
		g=$(awk 'NF { print $2 }' <<<"$runs" | median)
		RPS["$1,SET,$p"]=$s
		RPS["$1,GET,$p"]=$g
		printf '  %-16s -P %-2s  SET %12s  GET %12s\n' "$1" "$p" "$s" "$g" >&2
	done
}

echo "redis-benchmark -t set,get -n $N -r 1000000 -d 100 -c 50, -P 1 and 16 ($MODE)" >&2
start_redis redis-off --appendonly no
measure redis-off
stop_server
start_redis redis-everysec --appendonly yes --appendfsync everysec
measure redis-everysec
stop_server
start_redis redis-always --appendonly yes --appendfsync always
measure redis-always
stop_server
start_kvd kvd-async async
measure kvd-async
stop_server
start_kvd kvd-sync sync
measure kvd-sync
stop_server

# ---- report ----

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'; }
fmt() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }

LABEL_kvd_sync="kvd sync"
LABEL_kvd_async="kvd async"
LABEL_redis_off="redis, persistence off"
LABEL_redis_everysec="redis, appendfsync everysec"
LABEL_redis_always="redis, appendfsync always"
label() { local v="LABEL_${1//-/_}"; echo "${!v}"; }

PAIRS="GET kvd-sync redis-off 1.2
GET kvd-async redis-off 1.2
SET kvd-sync redis-always 1.5
SET kvd-async redis-everysec 1.0"

TABLE="| test | -P | kvd | kvd req/s | peer | peer req/s | kvd / peer | target |
|---|---|---|---:|---|---:|---:|---:|"
while read -r test k peer target; do
	for p in 1 16; do
		a=${RPS["$k,$test,$p"]}
		b=${RPS["$peer,$test,$p"]}
		TABLE+=$'\n'"| $test | $p | $(label "$k") | $(fmt "$a") | $(label "$peer") | $(fmt "$b") | $(ratio "$a" "$b") | >= ${target}x |"
	done
done <<<"$PAIRS"

ALL="| server | SET -P 1 | GET -P 1 | SET -P 16 | GET -P 16 |
|---|---:|---:|---:|---:|"
for s in redis-off redis-everysec redis-always kvd-async kvd-sync; do
	ALL+=$'\n'"| $(label "$s") | $(fmt "${RPS[$s,SET,1]}") | $(fmt "${RPS[$s,GET,1]}") | $(fmt "${RPS[$s,SET,16]}") | $(fmt "${RPS[$s,GET,16]}") |"
done

CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
# KVD_REV names the source of a KVD_BIN built elsewhere.
REV=${KVD_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
KVD_VER=$("$KVD_BIN" --version | head -1)
REDIS_VER=$(redis-server --version | awk '{ sub("v=", "", $3); print $3 }')
SECTION="## redis-benchmark: kvd's RESP port against redis-server

\`bench/redis-benchmark.sh${1:+ $1}\`, $(date -u +%Y-%m-%d), $(nproc) cores ($CPU),
$(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $KVD_VER
at $REV ($(nproc) io threads); redis-server $REDIS_VER (redis-benchmark from
the same package). $REPS run(s) per figure (median).
Every server was measured with:

    redis-benchmark -h 127.0.0.1 -p PORT -t set,get -n $N -r 1000000 -d 100 -c 50 -P 1   (and -P 16)

Server and load generator share this machine, so compare the ratios, not the
absolute figures. Targets are issue 8's.

$TABLE

All figures, requests per second:

$ALL"

echo
echo "$SECTION"

RESULTS=bench/RESULTS.md SECTION="$SECTION" python3 - <<'EOF'
import os
path, body = os.environ["RESULTS"], os.environ["SECTION"]
begin, end = "<!-- redis-benchmark:begin -->", "<!-- redis-benchmark:end -->"
block = begin + "\n" + body + "\n" + end
try:
    text = open(path).read()
except FileNotFoundError:
    text = "# kvd benchmark results\n"
if begin in text and end in text:
    head, rest = text.split(begin, 1)
    text = head + block + rest.split(end, 1)[1]
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
with open(path + ".tmp", "w") as f:
    f.write(text)
os.replace(path + ".tmp", path)
EOF
echo "written to bench/RESULTS.md" >&2
