#!/bin/sh
# bench/load_compare.sh - bulk loading: `kvcli load` into kvd (durability
# sync, the default) beside PostgreSQL 15's `COPY ... FROM STDIN` of the same
# rows into a two-column table, in the same run on the same machine.
#
#   bench/load_compare.sh [BUILD_DIR]        (default: build)
#
# Environment: ROWS (1000000), REPEAT (3: each figure is the median of this
# many runs, every run on a fresh server and data directory), TMPDIR, and
# KVD / KVCLI to take the two binaries from elsewhere than BUILD_DIR.
#
# Rows: 16-byte keys (hex of a hash of the row number, so in random order)
# and 100-byte values.  Each load runs twice: in that random order, and in
# key order (what `kvcli dump` writes, and what a sorted export gives).
# PostgreSQL gets the same rows as TSV, into (k text PRIMARY KEY, v text) -
# a key-value table has unique keys - and, for reference, into the same
# table without the index.  Both servers run with their defaults: kvd sync
# (reply after fsync), PostgreSQL fsync=on, synchronous_commit=on.
#
# This is a benchmark, not a test: it prints figures and never fails on
# them.  bench/RESULTS.md ("kvcli load vs PostgreSQL COPY") records a run.
set -eu

BUILD=${1:-build}
ROWS=${ROWS:-1000000}
REPEAT=${REPEAT:-3}
KVD=${KVD:-$BUILD/kvd/kvd}
KVCLI=${KVCLI:-$BUILD/kvcli/kvcli}
PGBIN=/usr/lib/postgresql/15/bin

for f in "$KVD" "$KVCLI" "$PGBIN/initdb"; do
	[ -x "$f" ] || { echo "load_compare: $f is missing (build first)" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvd-loadcmp.XXXXXX")
KVD_PID=
cleanup() {
	[ -n "$KVD_PID" ] && kill "$KVD_PID" 2>/dev/null && wait "$KVD_PID" 2>/dev/null
	[ -f "$WORK/pg/data/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate stop >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# PostgreSQL refuses to run as root: run it as nobody then.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

now() { date +%s.%N; }

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ---------------------------------------------------------------- the rows
echo "generating $ROWS rows..." >&2
/usr/bin/python3 - "$ROWS" "$WORK" <<'EOF'
import hashlib, sys
n, d = int(sys.argv[1]), sys.argv[2]
rows = []
for i in range(n):
    k = hashlib.blake2b(b"%d" % i, digest_size=8).hexdigest()   # 16 bytes
    v = ("%010d:" % i + "abcdefghijklmnopqrstuvwxyz" * 4)[:100]  # 100 bytes
    rows.append((k, v))
for name, rs in (("random", rows), ("sorted", sorted(rows))):
    with open("%s/%s.jsonl" % (d, name), "w") as f:
        f.writelines('{"key":"%s","value":"%s"}\n' % r for r in rs)
    with open("%s/%s.tsv" % (d, name), "w") as f:
        f.writelines("%s\t%s\n" % r for r in rs)
EOF

# ---------------------------------------------------------------- kvd
# One load into a fresh kvd; prints the seconds kvcli reports.
kvd_load() {
	rm -rf "$WORK/kvd"
	port=$(free_port)
	"$KVD" --bind 127.0.0.1 --port "$port" --data-dir "$WORK/kvd" \
		--durability sync --log-level warn 2>"$WORK/kvd.log" &
	KVD_PID=$!
	i=0
	until "$KVCLI" -p "$port" ping >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$WORK/kvd.log" >&2; exit 2; }
		sleep 0.05
	done
	out=$("$KVCLI" -p "$port" --json load "$1")
	rows=$("$KVCLI" -p "$port" count)
	kill "$KVD_PID"
	wait "$KVD_PID" || true
	KVD_PID=
	[ "$rows" = "$ROWS" ] || { echo "kvd holds $rows rows, not $ROWS" >&2; exit 2; }
	echo "$out" | sed 's/.*"seconds":\([0-9.]*\).*/\1/'
}

# ---------------------------------------------------------------- PostgreSQL
pg_start() {
	mkdir -p "$WORK/pg"
	[ "$(id -u)" = 0 ] && chown nobody "$WORK/pg" && chmod 755 "$WORK"
	as_pg "$PGBIN/initdb" -D "$WORK/pg/data" -U kvbench -A trust -E UTF8 \
		--no-sync >/dev/null
	PGPORT=$(free_port)
	as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w -t 60 \
		-o "-p $PGPORT -k $WORK/pg -c listen_addresses=''" start >/dev/null
}

psql_run() {
	PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -h "$WORK/pg" -p "$PGPORT" -U kvbench \
		-d postgres "$@"
}

# One COPY into a fresh table; $2 is "pk" or "heap".  Prints seconds.
pg_copy() {
	if [ "$2" = pk ]; then cols="k text PRIMARY KEY, v text"; else cols="k text, v text"; fi
	psql_run -c "DROP TABLE IF EXISTS kv" -c "CREATE TABLE kv ($cols)" -c "CHECKPOINT"
	t0=$(now)
	psql_run -c "COPY kv FROM STDIN" <"$1"
	t1=$(now)
	n=$(psql_run -At -c "SELECT count(*) FROM kv")
	[ "$n" = "$ROWS" ] || { echo "PostgreSQL holds $n rows, not $ROWS" >&2; exit 2; }
	echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}'
}

# ---------------------------------------------------------------- runs
pg_start
PGVERSION=$("$PGBIN/postgres" --version)

rate() { echo "$1" | awk -v n="$ROWS" '{printf "%.0f", n / $1}'; }

echo
echo "kvcli load vs PostgreSQL COPY FROM STDIN: $ROWS rows, 16-byte keys, 100-byte values"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
echo "kvd $("$KVCLI" --version | cut -d' ' -f2), durability sync; $PGVERSION, fsync on, synchronous_commit on"
echo "median of $REPEAT runs, each on a fresh kvd / fresh table"
echo
printf '%-7s %-24s %-24s %-24s %s\n' order "kvcli load (kvd sync)" "COPY, PRIMARY KEY" "COPY, no index" "kvd / PK"
for order in random sorted; do
	k=$(for r in $(seq "$REPEAT"); do kvd_load "$WORK/$order.jsonl"; done | median)
	p=$(for r in $(seq "$REPEAT"); do pg_copy "$WORK/$order.tsv" pk; done | median)
	h=$(for r in $(seq "$REPEAT"); do pg_copy "$WORK/$order.tsv" heap; done | median)
	printf '%-7s %-24s %-24s %-24s %s\n' "$order" \
		"$(rate "$k") rows/s ($k s)" "$(rate "$p") rows/s ($p s)" \
		"$(rate "$h") rows/s ($h s)" \
		"$(echo "$k $p" | awk '{printf "%.2fx", $2 / $1}')"
done
