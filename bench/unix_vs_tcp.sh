#!/bin/sh
# unix_vs_tcp.sh - kvbench against one kvd over its Unix socket and over
# TCP on loopback, in the same run, in the order TCP, Unix, Unix, TCP for
# each pipeline depth (so that a drift of the machine's load during the run
# weighs on both alike), and the ratio Unix / TCP of the mean ops/s.
# bench/RESULTS.md's "Unix socket against TCP" section comes from it.
#
#   bench/unix_vs_tcp.sh [BUILD_DIR]      (default build/)
#   SECS=20 RECORDS=100000 PIPELINES="1 16" WORKLOAD=c bench/unix_vs_tcp.sh
set -eu

BUILD=${1:-build}
KVD=$BUILD/kvd/kvd
KVBENCH=$BUILD/bench/kvbench
SECS=${SECS:-20}
RECORDS=${RECORDS:-100000}
PIPELINES=${PIPELINES:-"1 16"}
WORKLOAD=${WORKLOAD:-c}
# 16 connections: -t 2 -c 8

DIR=$(mktemp -d /tmp/unix-vs-tcp-XXXXXX)
SOCK=$DIR/kvd.sock
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KVD_PID=

cleanup() {
	[ -n "$KVD_PID" ] && kill "$KVD_PID" 2>/dev/null && wait "$KVD_PID" 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) cores ($(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)), $(uname -sr)"
echo "kvd: $("$KVD" --version 2>&1 | head -1) at commit $(git -C "$(dirname "$0")" rev-parse --short HEAD)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: kvd --bind 127.0.0.1 --port PORT --unix-socket DIR/kvd.sock --data-dir DIR --threads 2 --durability async"
"$KVD" --bind 127.0.0.1 --port "$PORT" --unix-socket "$SOCK" --data-dir "$DIR/data" \
	--threads 2 --durability async >"$DIR/kvd.log" 2>&1 &
KVD_PID=$!
i=0
while [ ! -S "$SOCK" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done

echo "load: kvbench --port PORT $WORKLOAD --phase load -r $RECORDS -t 2 -c 8 -P 16"
"$KVBENCH" -q --port "$PORT" "$WORKLOAD" --phase load -r "$RECORDS" -t 2 -c 8 -P 16 >/dev/null

# one run: prints "ops/s p50 p99" of the run phase
run() {
	"$KVBENCH" -q --json - "$@" "$WORKLOAD" --phase run -r "$RECORDS" -t 2 -c 8 -d "$SECS" |
		python3 -c 'import json,sys; p=[x for x in json.load(sys.stdin)["phases"] if x["phase"]=="run"][0]; l=p["latency_ms"]; print("%.0f %.3f %.3f %d" % (p["ops_per_sec"], l["p50"], l["p99"], p["errors"]["total"]))'
}

for P in $PIPELINES; do
	echo "tcp:  kvbench --port PORT $WORKLOAD --phase run -r $RECORDS -t 2 -c 8 -P $P -d $SECS"
	echo "unix: kvbench -H DIR/kvd.sock $WORKLOAD --phase run -r $RECORDS -t 2 -c 8 -P $P -d $SECS"
	t1=$(run --port "$PORT" -P "$P")
	u1=$(run -H "$SOCK" -P "$P")
	u2=$(run -H "$SOCK" -P "$P")
	t2=$(run --port "$PORT" -P "$P")
	echo "P=$P tcp: $t1 | $t2"
	echo "P=$P unix: $u1 | $u2"
	echo "$t1 $t2 $u1 $u2" | awk -v p="$P" '{
		t = ($1 + $5) / 2; u = ($9 + $13) / 2;
		printf "P=%s mean ops/s: tcp %.0f, unix %.0f, unix/tcp %.2f; errors %d\n",
			p, t, u, u / t, $4 + $8 + $12 + $16 }'
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
