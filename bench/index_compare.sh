#!/bin/sh
# bench/index_compare.sh - secondary indexes side by side: kvd's MongoDB
# door (kvbench -D mongowire) against PostgreSQL 15 keeping the same
# documents as jsonb with btree expression indexes (kvbench -D postgres),
# in one run on one machine, many connections at once (issue 35).
#
#   bench/index_compare.sh [BUILD_DIR]        (default: build)
#
# The documents are kvbench's index workloads' (bench/ixdocs.h): {_id, k
# (10 documents per value), r (unique in practice), s (a string), pad}, with
# three secondary indexes, on k, r and s (kvd: createIndexes k_1, r_1, s_1;
# PostgreSQL: CREATE INDEX on ((doc->>'k')::bigint), ((doc->>'r')::bigint),
# ((doc->>'s'))).  The rows:
#  a. point query find {k: v} (10 documents), kvbench ixpoint;
#  b. range find {r: {$gte: v}} sort {r: 1} limit 100, kvbench ixrange;
#  c. YCSB E whose scans are ranges on r (95% of 1..100 documents, 5%
#     inserts), kvbench ixscan, a collection of its own per repetition;
#  d. inserts into a collection with the 3 indexes, kvbench ixinsert, a
#     fresh collection per repetition;
#  e. index build: BUILD_RECORDS documents loaded without indexes, then the
#     3 indexes built (kvd: one createIndexes of the three, which answers
#     once they are built; PostgreSQL: three CREATE INDEX), timed by the
#     client around the command(s);
#  f. kvd alone, on e's collection once indexed: find {_id: key} (ixget)
#     against find {r: v} (ixeq, 1 document) and find {k: v} (ixpoint, 10).
# a-d run the two servers alternated (kvd first in odd repetitions,
# PostgreSQL first in even ones), REPEAT times; the table gives the median
# of each figure and the ratio of the medians (kvd / PostgreSQL; for e the
# build time, PostgreSQL's / kvd's), each server's CPU per operation and
# the client's (cl), and "3x cores": what kvd and its client would take of
# the machine at 3x PostgreSQL's rate at those costs (issue 35's goal).
# PostgreSQL's tables are ANALYZEd after their load, and the plans of its
# queries (EXPLAIN) and kvd's (explain's winningPlan) are printed.
#
# Both servers are durable on commit: kvd --durability sync (reply after
# the journal's fdatasync), PostgreSQL fsync on, synchronous_commit on.
# kvd --threads 2; PostgreSQL with its defaults but max_connections.
#
# kvbench talks to kvd with -D mongowire: OP_MSG written by kvbench on
# non-blocking sockets in its own loop, as its postgres driver uses libpq's
# pipeline mode; -D mongodb (libmongoc, a thread per connection) costs the
# client several times the CPU per request, which on a small machine the
# servers' figures pay for (KDRIVER=mongodb to use it anyway).
#
# Environment: RECORDS (100000) for a-d, DURATION (10) seconds and OPS
# (2000000) at most per run, REPEAT (3), THREADS (2) and CONNS (8, per
# thread) for the runs, LOAD_CONNS (32 per thread) for the loads,
# BUILD_RECORDS (1000000; 0 leaves e and f out), ROWS ("a b c d e f"),
# TMPDIR, KVD / KVBENCH to take the binaries from elsewhere than BUILD_DIR,
# KVD_ARGS (more options for kvd, e.g. "--io-thread-flush auto"), PROFILE
# (a row a..d: perf record on kvd during its last kvd run, the top
# of the report printed; needs perf), KDRIVER (mongowire), INDEX_ONLY (1:
# rows a and b ask for the indexed field alone, kvbench --index-only: kvd
# answers from the index, a covered query, projection {f: 1, _id: 0};
# PostgreSQL selects the index's expression).
#
# This is a benchmark, not a test: it prints figures and never fails on
# them (exit 3 when a run failed).  bench/RESULTS.md ("Secondary indexes
# (issue 35)") records a run.
set -eu

BUILD=${1:-build}
RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-10}
OPS=${OPS:-2000000}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
CONNS=${CONNS:-8}
LOAD_CONNS=${LOAD_CONNS:-32}
BUILD_RECORDS=${BUILD_RECORDS:-1000000}
ROWS=${ROWS:-a b c d e f}
PROFILE=${PROFILE:-}
KDRIVER=${KDRIVER:-mongowire}
INDEX_ONLY=${INDEX_ONLY:-0}
IXO=
[ "$INDEX_ONLY" = 1 ] && IXO=--index-only
KVD=${KVD:-$BUILD/kvd/kvd}
KVBENCH=${KVBENCH:-$BUILD/bench/kvbench}
PGBIN=/usr/lib/postgresql/15/bin
PY=/usr/bin/python3

$PY -c 'import pymongo' 2>/dev/null ||
	{ echo "index_compare: $PY has no pymongo (scripts/deps.sh)" >&2; exit 2; }
PSQL=$PGBIN/psql
[ -x "$PSQL" ] || PSQL=psql
[ "$BUILD_RECORDS" = 0 ] && ROWS=$(echo "$ROWS" | tr -d 'ef')
has_row() { case " $ROWS " in *" $1 "*) return 0 ;; esac; return 1; }

NAME=index_compare PGMAX=$((THREADS * LOAD_CONNS + THREADS * CONNS + 100)) PG_REC=
BENCH_DIR=$(dirname "$0")
. "$BENCH_DIR/peer_servers.sh"

psql_q() { "$PSQL" -X -q -h "$WORK/pg" -p "$PGPORT" -U kvbench -d postgres "$@"; }


analyze() { psql_q -c "ANALYZE $1" >/dev/null || echo "$1-analyze" >>"$WORK/failed"; }

# kvd is ready when its door accepts a connection.
$PY "$BENCH_DIR/wait_port.py" "$MPORT" || { cat "$WORK/kvd.log" >&2; exit 2; }

echo "index_compare: kvd pid $KVD_PID (mongo port), PostgreSQL pid $PG_PID, work in $WORK" >&2
{
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
	echo "kvd: $("$KVD" --version 2>&1 | head -1), --threads 2 --durability sync --max-clients 10000 --mongo-port PORT${KVD_ARGS:+ ${KVD_ARGS-}}"
	echo "PostgreSQL: $("$PGBIN/postgres" --version), max_connections=$PGMAX, defaults otherwise (fsync on, synchronous_commit on)"
	echo "runs: $THREADS threads x $CONNS connections, $DURATION s (at most $OPS ops), $REPEAT repetitions; loads $THREADS x $LOAD_CONNS connections; kvbench -D $KDRIVER for kvd"
	echo "started $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/header"
: >"$WORK/commands"
: >"$WORK/plans"

YC="-t $THREADS -c $CONNS"
YL="-t $THREADS -c $LOAD_CONNS"

# The plans each server chose for the queries of a-c (and f's), on the
# table given: PostgreSQL's EXPLAIN and kvd's explain, one line each.
plans() {
	tab=$1
	for q in "k = 7|((doc->>'k')::bigint) = 7|{\"k\": 7}|null" \
		"r = 7|((doc->>'r')::bigint) = 7|{\"r\": 7}|null" \
		"r >= x sort r limit 100|((doc->>'r')::bigint) >= 549755813 ORDER BY ((doc->>'r')::bigint) LIMIT 100|{\"r\": {\"\$gte\": 549755813}}|{\"r\": 1}"; do
		title=${q%%|*} rest=${q#*|}
		where=${rest%%|*} rest=${rest#*|}
		mfilter=${rest%%|*} msort=${rest#*|}
		plan=$(psql_q -At -c "EXPLAIN SELECT id, doc FROM $tab WHERE $where" |
			sed 's/  (cost=[^)]*)//; s/^ *//; s/^-> *//' | paste -sd'/' | sed 's|/| / |g')
		echo "  pg  $tab $title: $plan" >>"$WORK/plans"
		# what kvbench's prepared statements run once PostgreSQL
		# settles on a generic plan (after five executions, if
		# cheaper): the value as a parameter
		gwhere=$(echo "$where" | sed 's/ 7$/ $1/; s/ 549755813 / $1 /; s/LIMIT 100/LIMIT $2/')
		plan=$(psql_q -At -c "SET plan_cache_mode = force_generic_plan" \
			-c "PREPARE q(bigint, bigint) AS SELECT id, doc FROM $tab WHERE $gwhere" \
			-c "EXPLAIN EXECUTE q(7, 100)" |
			sed 's/  (cost=[^)]*)//; s/^ *//; s/^-> *//' | paste -sd'/' | sed 's|/| / |g')
		echo "  pg  $tab $title, generic plan: $plan" >>"$WORK/plans"
		kplan=$($PY - "$MPORT" "$tab" "$mfilter" "$msort" <<'EOF'
import json, sys, pymongo
c = pymongo.MongoClient("127.0.0.1", int(sys.argv[1]), directConnection=True)
cmd = {"find": sys.argv[2], "filter": json.loads(sys.argv[3])}
if sys.argv[4] != "null":
    cmd.update(sort=json.loads(sys.argv[4]), limit=100)
p = c.kvbench.command("explain", cmd)["queryPlanner"]["winningPlan"]
out = []
while p:
    out.append(p["stage"] + (" " + p["indexName"] if "indexName" in p else ""))
    p = p.get("inputStage")
print(" / ".join(out))
EOF
		) || kplan=failed
		echo "  kvd $tab $title: $kplan" >>"$WORK/plans"
	done
}

# ---------------------------------------------------------------- a-d
if has_row a || has_row b; then
	echo "index_compare: load, $RECORDS documents with 3 indexes" >&2
	load_ix() { bench "$1" "load-$1" ixpoint --phase load -r "$RECORDS" $YL --table ixdocs; }
	pair 1 load_ix
	analyze ixdocs
	plans ixdocs
fi
rep=1
while [ $rep -le "$REPEAT" ]; do
	for row in a b c d; do
		has_row $row || continue
		echo "index_compare: repetition $rep, row $row" >&2
		case $row in
		a) run_r() { bench "$1" "a-$rep-$1" ixpoint --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS" --table ixdocs $IXO; } ;;
		b) run_r() { bench "$1" "b-$rep-$1" ixrange --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS" --table ixdocs $IXO; } ;;
		c)
			# its own collection: its inserts are ids the next
			# repetition would insert again
			load_c() { bench "$1" "c-load-$rep-$1" ixscan --phase load -r "$RECORDS" $YL --table "ixscan$rep"; }
			pair "$rep" load_c
			analyze "ixscan$rep"
			run_r() { bench "$1" "c-$rep-$1" ixscan --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS" --table "ixscan$rep"; }
			;;
		d) run_r() { bench "$1" "d-$rep-$1" ixinsert --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS" --table "ixins$rep"; } ;;
		esac
		if [ "$row" = "$PROFILE" ] && [ "$rep" = "$REPEAT" ] && command -v perf >/dev/null; then
			# PostgreSQL's run first, kvd's under perf record.
			run_r p
			perf record -o "$WORK/perf.data" -p "$KVD_PID" -- sleep "$DURATION" \
				>/dev/null 2>&1 &
			perf_pid=$!
			run_r k
			wait "$perf_pid" || true
			perf report -i "$WORK/perf.data" --sort dso,symbol --percent-limit 1 \
				--stdio 2>/dev/null | grep '^ ' | head -30 >"$WORK/profile" || true
		else
			pair "$rep" run_r
		fi
	done
	rep=$((rep + 1))
done

# Wait (30 s at most) until the machine is at rest: under 10% of its CPU
# busy over a second (/proc/stat).
settle() {
	for _ in $(seq 30); do
		busy=$(awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat)
		sleep 1
		busy=$(echo "$busy $(awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $5+$6}' /proc/stat)" |
			awk '{dt=$3-$1; di=$4-$2; print (dt > 0 ? int(100 * (dt - di) / dt) : 0)}')
		[ "$busy" -lt 10 ] && return 0
	done
	echo "index_compare: the machine did not come to rest ($busy% busy)" >&2
}

# ---------------------------------------------------------------- e, f
if has_row e || has_row f; then
	echo "index_compare: load, $BUILD_RECORDS documents without indexes" >&2
	load_b() { bench "$1" "e-load-$1" ixpoint --phase load -r "$BUILD_RECORDS" $YL --table ixbuild --no-index; }
	pair 1 load_b
	echo "index_compare: index builds" >&2
	build_k() {
		$PY - "$MPORT" >"$WORK/e-build-k" <<'EOF' || echo e-build-k >>"$WORK/failed"
import sys, time, pymongo
c = pymongo.MongoClient("127.0.0.1", int(sys.argv[1]), directConnection=True)
specs = [{"key": {f: 1}, "name": f + "_1"} for f in ("k", "r", "s")]
t = time.monotonic()
c.kvbench.command("createIndexes", "ixbuild", indexes=specs)
print("%.3f" % (time.monotonic() - t))
EOF
		echo "  e-build-kvd: db.runCommand({createIndexes: 'ixbuild', indexes: [k_1, r_1, s_1]})" >>"$WORK/commands"
	}
	build_p() {
		sql="CREATE INDEX ixbuild_k ON ixbuild (((doc->>'k')::bigint)); CREATE INDEX ixbuild_r ON ixbuild (((doc->>'r')::bigint)); CREATE INDEX ixbuild_s ON ixbuild ((doc->>'s'));"
		t0=$(date +%s.%N)
		psql_q -v ON_ERROR_STOP=1 -c "$sql" >/dev/null || echo e-build-p >>"$WORK/failed"
		t1=$(date +%s.%N)
		echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$WORK/e-build-p"
		echo "  e-build-pg: psql -c \"$sql\"" >>"$WORK/commands"
	}
	# each build on a machine at rest: after a load, a server's own
	# background work (kvd's checkpoints, PostgreSQL's autovacuum and
	# checkpointer) ran into the other's build and moved the ratio by 1.5x
	settle
	build_k
	settle
	build_p
	analyze ixbuild
	plans ixbuild
fi
if has_row f; then
	for w in ixget ixeq ixpoint; do
		echo "index_compare: f, kvd $w at $BUILD_RECORDS documents" >&2
		bench k "f-$w" "$w" --phase run -r "$BUILD_RECORDS" $YC -d "$DURATION" -n "$OPS" --table ixbuild
	done
fi
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/header"

# ---------------------------------------------------------------- the table
INDEX_ONLY=$INDEX_ONLY $PY - "$WORK" "$REPEAT" "$ROWS" "$RECORDS" "$BUILD_RECORDS" <<'EOF'
import json, os, statistics, sys
work, repeat, rows, records, brecords = sys.argv[1:6]
repeat, rows, records, brecords = int(repeat), rows.split(), int(records), int(brecords)

def rep(name, phase="run"):
    try:
        with open(os.path.join(work, name + ".json")) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return None
    for p in r["phases"]:
        if p["phase"] == phase:
            return p
    return None

def cpu(name):
    try:
        return [float(x) for x in open(os.path.join(work, name + ".cpu")).read().split()]
    except (OSError, ValueError):
        return [0.0, 0.0]

def fig(p, name=None):
    if p is None or p.get("latency_ms") is None:
        return None
    lat = p["latency_ms"]
    srv, cli = cpu(name) if name else (0.0, 0.0)
    n = max(p["ops"], 1)
    return {"ops": p["ops_per_sec"], "p50": lat["p50"], "p99": lat["p99"],
            "err": p["errors"]["total"], "items": p.get("scan_items", 0) / n,
            "scpu": srv * 1e6 / n, "ccpu": cli * 1e6 / n}

def f(x, k):
    if x is None:
        return "-"
    if k == "ops":
        return "{:,.0f}".format(x[k])
    if k in ("scpu", "ccpu"):
        return "%.0f" % x[k] if x[k] else "-"
    return "%.3g" % x[k]

def med(xs):
    xs = [x for x in xs if x]
    if not xs:
        return None
    return {k: statistics.median(x[k] for x in xs) for k in ("ops", "p50", "p99", "err", "items", "scpu", "ccpu")}

def cores3(k, p):
    """The cores kvd and its client would take at 3x PostgreSQL's rate, at
    the CPU an operation measured (issue 35's goal)."""
    if not (k and p and p["ops"] and k["scpu"]):
        return "-"
    return "%.2f" % (3 * p["ops"] * (k["scpu"] + k["ccpu"]) / 1e6)

def line(title, k, p, spread=""):
    ratio = "%.2fx" % (k["ops"] / p["ops"]) if k and p and p["ops"] else "-"
    print("%-42s %9s %6s %6s %5s %4s %9s %6s %6s %5s %4s %6s %8s  %s" % (title, f(k, "ops"), f(k, "p50"),
          f(k, "p99"), f(k, "scpu"), f(k, "ccpu"), f(p, "ops"), f(p, "p50"), f(p, "p99"), f(p, "scpu"),
          f(p, "ccpu"), ratio, cores3(k, p), spread))

print(open(os.path.join(work, "header")).read().rstrip())
print("us/op: the server's CPU time (user + system, all its threads or processes) per operation; cl: the "
      "client's (kvbench's); 3x cores: what kvd and its client would take at 3x PostgreSQL's rate at those "
      "costs (of %d)" % os.cpu_count())
print()
print("%-42s %9s %6s %6s %5s %4s %9s %6s %6s %5s %4s %6s %8s  %s" % ("row", "kvd ops/s", "p50ms", "p99ms",
      "us/op", "cl", "pg ops/s", "p50ms", "p99ms", "us/op", "cl", "ratio", "3x cores", "runs (kvd / pg ops/s)"))
if "a" in rows or "b" in rows:
    line("load %d docs, 3 indexes (inserts)" % records, fig(rep("load-k", "load"), "load-k"), fig(rep("load-p", "load"), "load-p"))
ixo = os.environ.get("INDEX_ONLY") == "1"
titles = {"a": "a. point find {k: v} (10 docs)" + (", k only" if ixo else ""),
          "b": "b. range r >= v sort r limit 100" + (", r only" if ixo else ""),
          "c": "c. YCSB E, ranges on r (1..100) + 5% ins",
          "d": "d. inserts, 3 indexes, durable (sync)"}
for row in "abcd":
    if row not in rows:
        continue
    runs = {who: [fig(rep("%s-%d-%s" % (row, i, who)), "%s-%d-%s" % (row, i, who)) for i in range(1, repeat + 1)]
            for who in "kp"}
    spread = " / ".join(",".join("-" if x is None else "%.0f" % x["ops"] for x in runs[who]) for who in "kp")
    k, p = med(runs["k"]), med(runs["p"])
    items = ""
    if row in "abc" and k and p:
        items = "  [docs/query kvd %.1f, pg %.1f]" % (k["items"], p["items"])
    line(titles[row], k, p, spread + items)
if "e" in rows:
    lk, lp = fig(rep("e-load-k", "load"), "e-load-k"), fig(rep("e-load-p", "load"), "e-load-p")
    line("e. load %d docs, no index (inserts)" % brecords, lk, lp)
    def secs(who):
        try:
            return float(open(os.path.join(work, "e-build-" + who)).read())
        except (OSError, ValueError):
            return None
    bk, bp = secs("k"), secs("p")
    print("%-42s %9s %6s %6s %5s %4s %9s %6s %6s %5s %4s %6s" % ("e. build 3 indexes on %d docs" % brecords,
          "-" if bk is None else "%.2f s" % bk, "", "", "", "", "-" if bp is None else "%.2f s" % bp, "", "",
          "", "", "%.2fx" % (bp / bk) if bk and bp else "-"))
if "f" in rows:
    print()
    print("f. kvd alone at %d documents (indexed, e's collection):" % brecords)
    g = fig(rep("f-ixget"), "f-ixget")
    for w, title in (("ixget", "find {_id: key} (1 doc)"), ("ixeq", "find {r: v} through r_1 (1 doc)"),
                     ("ixpoint", "find {k: v} through k_1 (10 docs)")):
        x = fig(rep("f-" + w), "f-" + w)
        rel = ""
        if x and g and x["ops"]:
            rel = "get/this %.2fx ops/s, p50 %.2fx" % (g["ops"] / x["ops"], x["p50"] / g["p50"] if g["p50"] else 0)
        print("  %-38s %9s ops/s p50 %6s ms p99 %6s ms %5s us/op  %s" % (title, f(x, "ops"), f(x, "p50"),
              f(x, "p99"), f(x, "scpu"), rel))
    lk = fig(rep("e-load-k", "load"))
    try:
        bk = float(open(os.path.join(work, "e-build-k")).read())
    except (OSError, ValueError):
        bk = None
    if lk and lk["ops"] and bk:
        t = 1e7 / lk["ops"] + bk * 1e7 / brecords
        print("  10,000,000 documents at these rates: load %.0f s (%.0f docs/s, no index) + build of the 3 indexes"
              " about %.0f s (scaled linearly) = about %.0f min" % (1e7 / lk["ops"], lk["ops"], bk * 1e7 / brecords, t / 60))
print()
print("plans (PostgreSQL EXPLAIN with the value, and of the statement prepared as kvbench's; kvd explain winningPlan):")
print(open(os.path.join(work, "plans")).read().rstrip())
prof = os.path.join(work, "profile")
if os.path.exists(prof):
    print()
    print("kvd profile (perf record during its last run of the PROFILE row, by library and symbol):")
    print(open(prof).read().rstrip())
print()
print("commands (PORT, PID: the run's):")
print(open(os.path.join(work, "commands")).read().rstrip())
EOF
if [ -s "$WORK/failed" ]; then
	echo "index_compare: failed runs: $(tr '\n' ' ' <"$WORK/failed")" >&2
	exit 3
fi
