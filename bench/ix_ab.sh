#!/bin/sh
# bench/ix_ab.sh - two kvd binaries side by side on the indexed-document
# queries and inserts (kvbench's ixpoint, ixrange, ixinsert): each pass
# starts a fresh kvd of each binary in turn (A, then B), loads 100,000
# documents with their 3 indexes, runs each workload for DURATION seconds,
# and prints its rate and the server's CPU microseconds per operation
# (bench/server_cpu.py).  A before / after comparison of one change on a
# shared machine, where only figures measured side by side mean anything.
#
#   bench/ix_ab.sh A_KVD B_KVD [KVBENCH_OPTION...]
#
# The options go to the query runs (e.g. --index-only).  Environment:
# KVBENCH (build/bench/kvbench), PASSES (2), DURATION (8), RECORDS (100000),
# WORKLOADS ("ixpoint ixrange ixinsert").  A benchmark: it prints figures
# and never fails on them.
set -eu

[ $# -ge 2 ] || { echo "usage: $0 A_KVD B_KVD [KVBENCH_OPTION...]" >&2; exit 2; }
A=$1 B=$2
shift 2
OPTS="$*"
KVBENCH=${KVBENCH:-build/bench/kvbench}
PASSES=${PASSES:-2}
DURATION=${DURATION:-8}
RECORDS=${RECORDS:-100000}
WORKLOADS=${WORKLOADS:-ixpoint ixrange ixinsert}
HERE=$(dirname "$0")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ix_ab.XXXXXX")
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# Two free ports, told apart (both held while asked).
ports() { /usr/bin/python3 -c 'import socket; s = [socket.socket() for _ in range(2)]; [x.bind(("127.0.0.1", 0)) for x in s]; print(*[x.getsockname()[1] for x in s])'; }

# One pass of one binary: label, kvd.
one() {
	label=$1 kvd=$2
	rm -rf "$WORK/data" && mkdir "$WORK/data"
	set -- $(ports)
	mport=$1 kport=$2
	"$kvd" --bind 127.0.0.1 --port "$kport" --mongo-port "$mport" \
		--data-dir "$WORK/data" --threads 2 --durability sync \
		--max-clients 10000 --log-level warn >"$WORK/kvd.log" 2>&1 &
	PID=$!
	/usr/bin/python3 "$HERE/wait_port.py" "$mport" ||
		{ cat "$WORK/kvd.log" >&2; exit 2; }
	kb="$KVBENCH -D mongowire --port $mport --server-pid $PID -q -s 1"
	$kb ixpoint --phase load -r "$RECORDS" -t 2 -c 32 --table ixdocs >/dev/null
	for w in $WORKLOADS; do
		if [ "$w" = ixinsert ]; then
			args="ixinsert --table ixins -c 32"
		else
			args="$w --table ixdocs -c 8 $OPTS"
		fi
		/usr/bin/python3 "$HERE/server_cpu.py" "$PID" "$WORK/cpu" $kb $args \
			--phase run -r "$RECORDS" -t 2 -d "$DURATION" -n 5000000 \
			>"$WORK/out" 2>&1 || true
		/usr/bin/python3 - "$label" "$w" "$WORK/out" "$WORK/cpu" "$DURATION" <<'EOF'
import re, sys
label, w, out, cpu, dur = sys.argv[1:6]
m = re.search(r"([0-9]+) ops/s", open(out).read())
ops = int(m.group(1)) if m else 0
sec = float(open(cpu).read().split()[0]) if ops else 0
print("%-7s %-9s %9s ops/s %8s us/op" % (label, w, "{:,}".format(ops),
      "%.1f" % (sec * 1e6 / (ops * float(dur))) if ops else "-"))
EOF
	done
	kill "$PID" && wait "$PID" || true
	PID=
}

echo "ix_ab: A $A, B $B, options: ${OPTS:-none}; $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
pass=1
while [ "$pass" -le "$PASSES" ]; do
	one A "$A"
	one B "$B"
	pass=$((pass + 1))
done
