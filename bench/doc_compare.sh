#!/bin/sh
# bench/doc_compare.sh - documents side by side: kvd's MongoDB door
# (kvbench -D mongowire, or KDRIVER) against PostgreSQL 15 keeping the same documents as
# jsonb (kvbench -D postgres --record doc), in one run on one machine.
#
#   bench/doc_compare.sh [BUILD_DIR]        (default: build)
#
# 1. YCSB A, B, C, E, F with YCSB's documents (10 fields of 100 bytes):
#    both stores loaded with the same RECORDS, then each workload run for
#    DURATION seconds (at most OPS operations), the two servers alternated
#    (kvd first in odd repetitions, PostgreSQL first in even ones), REPEAT
#    times; the table gives the median of each figure and the ratio of the
#    medians.  E inserts, so each repetition's E loads a table of its own.
# 2. The geo story: GEO_RECORDS documents {position, radius, cidr, ...}
#    written in random order, then random reads and whole-document writes
#    (GEO_MIX: readproportion/updateproportion) at each of GEO_CONNS
#    connections, closed loop (each connection sends its next request when
#    the last is answered), and at the largest count once more open loop at
#    GEO_RATE requests/s (the latency a client sees at that load).  Each
#    server's peak RSS for each run: the kernel's VmHWM of kvd; for
#    PostgreSQL the VmHWM of the postmaster and every backend summed (which
#    counts its shared buffers once per process) and kvbench's sampled PSS of
#    the process tree (which counts them once).  The peaks are reset
#    (clear_refs) before each run.
#
# Each run's server CPU time per operation (us/op: user + system of all
# its threads, or of the postmaster and every backend) is measured from
# /proc around the kvbench process, as bench/index_compare.sh does; the
# CPU a server spends per operation depends much less than its ops/s on
# what else the machine runs.  It counts whatever the server does
# meanwhile, so at a low offered rate (the -R rows) its idle work weighs.
# For E the load is a kvbench run of its own so that the figure is the
# run phase's.  The client's CPU per operation (cl, kvbench's own) is
# measured alike, and "3x cores" is what kvd and its client would take of
# the machine at 3x PostgreSQL's rate at those costs (issue 34's goal):
# above the machine's cores, the goal needs less CPU per operation than
# measured, on a machine the load generator shares.
#
# kvbench talks to kvd with -D mongowire (KDRIVER): OP_MSG written by
# kvbench on non-blocking sockets in its own loop, the same commands and
# documents as -D mongodb (libmongoc, a thread per connection), which
# costs the client several times the CPU per request; on a small machine
# that client's CPU is taken from the servers' (bench/RESULTS.md,
# "Documents").  KDRIVER=mongodb uses libmongoc anyway.
#
# Both servers are durable on commit: kvd --durability sync (reply after
# the journal's fdatasync), PostgreSQL fsync on, synchronous_commit on.
# kvd --threads 2 --max-clients 10000; PostgreSQL with its defaults but
# max_connections (the largest of GEO_CONNS + 100).
#
# Environment: RECORDS (100000), DURATION (10), OPS (2000000), REPEAT (3),
# THREADS (2) and CONNS (8, per thread) for YCSB, WORKLOADS ("a b c e f"),
# GEO_RECORDS (100000), GEO_CONNS ("1 4000"), GEO_MIX (0.5: the share of
# writes), GEO_RATE (4000), KDRIVER (mongowire), TMPDIR, KVD / KVBENCH to take the binaries from
# elsewhere than BUILD_DIR, KVD_ARGS (more options for kvd).  Bounded: every run stops after DURATION
# seconds or OPS operations.
#
# This is a benchmark, not a test: it prints figures and never fails on
# them.  bench/RESULTS.md ("Documents: kvd's MongoDB door against
# PostgreSQL jsonb") records a run.
set -eu

BUILD=${1:-build}
RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-10}
OPS=${OPS:-2000000}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
CONNS=${CONNS:-8}
WORKLOADS=${WORKLOADS:-a b c e f}
GEO_RECORDS=${GEO_RECORDS:-100000}
GEO_CONNS=${GEO_CONNS:-1 4000}
GEO_MIX=${GEO_MIX:-0.5}
GEO_RATE=${GEO_RATE:-4000}
KDRIVER=${KDRIVER:-mongowire}
KVD=${KVD:-$BUILD/kvd/kvd}
KVBENCH=${KVBENCH:-$BUILD/bench/kvbench}
PGBIN=/usr/lib/postgresql/15/bin
PY=/usr/bin/python3

max_geo=1
for n in $GEO_CONNS; do [ "$n" -gt "$max_geo" ] && max_geo=$n; done
NAME=doc_compare PGMAX=$((max_geo + 100)) PG_REC="--record doc"
BENCH_DIR=$(dirname "$0")
. "$BENCH_DIR/peer_servers.sh"

# The peak-memory sampler: every 0.5 s the sum of VmHWM over a process and
# its descendants, kept at its largest, until $WORK/stop-$2 appears.
cat >"$WORK/peak.py" <<'EOF'
import os, sys, time
root, name, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def tree():
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    todo, seen = [root], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += kids.get(p, [])
    return seen
def hwm(p):
    try:
        with open("/proc/%d/status" % p) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
for p in tree():  # each peak from now on
    try:
        with open("/proc/%d/clear_refs" % p, "w") as f:
            f.write("5")
    except OSError:
        pass
open(out + ".ready", "w").close()
best, procs = 0, 0
stop = os.path.join(os.path.dirname(out), "stop-" + name)
while True:
    ps = tree()
    s = sum(hwm(p) for p in ps)
    if s > best:
        best, procs = s, len(ps)
    if os.path.exists(stop):
        break
    time.sleep(0.5)
with open(out, "w") as f:
    f.write("%d %d\n" % (best, procs))
EOF

# bench with the peak sampler around it: $1 k|p, $2 name, the rest.
bench_mem() {
	who=$1 name=$2
	pid=$KVD_PID
	[ "$who" = p ] && pid=$PG_PID
	rm -f "$WORK/stop-$name"
	$PY "$WORK/peak.py" "$pid" "$name" "$WORK/$name.peak" &
	sampler=$!
	while [ ! -e "$WORK/$name.peak.ready" ]; do sleep 0.1; done
	bench "$@"
	touch "$WORK/stop-$name"
	wait "$sampler"
}

# In odd repetitions kvd first, in even ones PostgreSQL first.

# kvd is ready when its door accepts a connection.
$PY "$BENCH_DIR/wait_port.py" "$MPORT" || { cat "$WORK/kvd.log" >&2; exit 2; }

echo "doc_compare: kvd pid $KVD_PID (mongo port), PostgreSQL pid $PG_PID, work in $WORK" >&2
{
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
	echo "kvd: $("$KVD" --version 2>&1 | head -1), --threads 2 --durability sync --max-clients 10000 --mongo-port PORT${KVD_ARGS:+ ${KVD_ARGS-}}"
	echo "kvbench -D $KDRIVER for kvd, -D postgres --record doc for PostgreSQL"
	echo "PostgreSQL: $("$PGBIN/postgres" --version), max_connections=$PGMAX, defaults otherwise (fsync on, synchronous_commit on)"
	echo "started $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/header"
: >"$WORK/commands"

# ---------------------------------------------------------------- YCSB
YC="-t $THREADS -c $CONNS"
echo "doc_compare: YCSB load, $RECORDS records" >&2
load_ycsb() { bench "$1" "load-$1" a --phase load -r "$RECORDS" $YC; }
pair 1 load_ycsb
rep=1
while [ $rep -le "$REPEAT" ]; do
	for w in $WORKLOADS; do
		echo "doc_compare: repetition $rep, YCSB $w" >&2
		if [ "$w" = e ]; then
			run_w() {
				bench "$1" "e-load-$rep-$1" e --phase load -r "$RECORDS" $YC --table "ycsb_e$rep"
				bench "$1" "e-$rep-$1" e --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS" --table "ycsb_e$rep"
			}
		else
			run_w() { bench "$1" "$w-$rep-$1" "$w" --phase run -r "$RECORDS" $YC -d "$DURATION" -n "$OPS"; }
		fi
		pair "$rep" run_w
	done
	rep=$((rep + 1))
done

# ---------------------------------------------------------------- geo
echo "doc_compare: geo load, $GEO_RECORDS documents" >&2
load_geo() { bench "$1" "geo-load-$1" geo --phase load -r "$GEO_RECORDS" -t 2 -c 8 --table geo; }
pair 1 load_geo
GM="-p readproportion=$(echo "$GEO_MIX" | awk '{print 1 - $1}') -p updateproportion=$GEO_MIX"
for n in $GEO_CONNS; do
	if [ "$n" = 1 ]; then tc="-t 1 -c 1"; else tc="-t 2 -c $((n / 2))"; fi
	echo "doc_compare: geo at $n connections" >&2
	run_g() { bench_mem "$1" "geo-$n-$1" geo --phase run -r "$GEO_RECORDS" $tc -d "$DURATION" -n "$OPS" --table geo $GM; }
	pair 1 run_g
	if [ "$n" = "$max_geo" ] && [ "$n" != 1 ]; then
		echo "doc_compare: geo at $n connections, $GEO_RATE requests/s offered" >&2
		run_r() { bench_mem "$1" "geo-$n-rate-$1" geo --phase run -r "$GEO_RECORDS" $tc -d "$DURATION" -n "$OPS" --table geo $GM -R "$GEO_RATE"; }
		pair 2 run_r
	fi
done
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/header"

# ---------------------------------------------------------------- the table
$PY - "$WORK" "$REPEAT" "$WORKLOADS" "$GEO_CONNS" "$max_geo" "$GEO_RATE" <<'EOF'
import json, os, statistics, sys
work, repeat, wls, geo_conns, max_geo, rate = sys.argv[1:7]
repeat, max_geo = int(repeat), int(max_geo)

def rep(name, phase="run"):
    try:
        with open(os.path.join(work, name + ".json")) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return None
    for p in r["phases"]:
        if p["phase"] == phase:
            p["server"] = r.get("server")
            return p
    return None

def cpu(name, i=0):
    """The server's (i 0) or the client's (1) CPU seconds over run name
    (server_cpu.py's), 0 unknown."""
    try:
        return float(open(os.path.join(work, name + ".cpu")).read().split()[i])
    except (OSError, ValueError, IndexError):
        return 0.0

def fig(p, op=None, name=None):
    """name: the run's, for the server's CPU per operation (us)."""
    if p is None:
        return None
    lat = p["latency_ms"] if op is None else p["ops_by_type"].get(op, {}).get("latency_ms")
    if lat is None:
        return None
    ops = p["ops_per_sec"] if op is None else p["ops_by_type"][op]["ops_per_sec"]
    scpu = cpu(name) * 1e6 / max(p["ops"], 1) if name else 0.0
    ccpu = cpu(name, 1) * 1e6 / max(p["ops"], 1) if name else 0.0
    return {"ops": ops, "p50": lat["p50"], "p99": lat["p99"], "err": p["errors"]["total"],
            "scpu": scpu, "ccpu": ccpu}

def f(x, k):
    if x is None:
        return "-"
    if k == "ops":
        return "{:,.0f}".format(x[k])
    if k in ("scpu", "ccpu"):
        return "%.0f" % x[k] if x[k] else "-"
    return "%.3g" % x[k]

def cores3(k, p):
    """The cores kvd and its client would take at 3x PostgreSQL's rate, at
    the CPU an operation measured (issue 34's goal)."""
    if not (k and p and p["ops"] and k["scpu"]):
        return "-"
    return "%.2f" % (3 * p["ops"] * (k["scpu"] + k["ccpu"]) / 1e6)

print(open(os.path.join(work, "header")).read().rstrip())
print()
print("us/op: the server's CPU time (user + system, all its threads or processes) per operation; cl: the "
      "client's (kvbench's); 3x cores: what kvd and its client would take at 3x PostgreSQL's rate at those "
      "costs (of %d)" % os.cpu_count())
hdr = "%-26s %12s %9s %9s %6s %4s %12s %9s %9s %6s %4s %7s %8s %s" % (
    "workload", "kvd ops/s", "p50 ms", "p99 ms", "us/op", "cl", "pg ops/s", "p50 ms", "p99 ms", "us/op", "cl",
    "ratio", "3x cores", "runs (kvd / pg ops/s)")
print(hdr)
l = {w: fig(rep("load-" + w, "load"), name="load-" + w) for w in ("k", "p")}
def row(title, k, p, spread=""):
    ratio = "%.2fx" % (k["ops"] / p["ops"]) if k and p and p["ops"] else "-"
    print("%-26s %12s %9s %9s %6s %4s %12s %9s %9s %6s %4s %7s %8s %s" % (
        title, f(k, "ops"), f(k, "p50"), f(k, "p99"), f(k, "scpu"), f(k, "ccpu"), f(p, "ops"), f(p, "p50"),
        f(p, "p99"), f(p, "scpu"), f(p, "ccpu"), ratio, cores3(k, p), spread))
row("load (inserts)", l["k"], l["p"])
def med(xs):
    xs = [x for x in xs if x]
    if not xs:
        return None
    return {k: statistics.median(x[k] for x in xs) for k in ("ops", "p50", "p99", "err", "scpu", "ccpu")}
for w in wls.split():
    runs = {who: [fig(rep("%s-%d-%s" % (w, i, who)), name="%s-%d-%s" % (w, i, who))
                  for i in range(1, repeat + 1)] for who in "kp"}
    spread = " / ".join(",".join("-" if x is None else "%.0f" % x["ops"] for x in runs[who]) for who in "kp")
    row("YCSB " + w.upper(), med(runs["k"]), med(runs["p"]), spread)
print()
print("%-34s %-6s %10s %9s %9s %9s %9s %6s %14s %s" % ("geo", "server", "ops/s", "read p50", "read p99",
                                                       "write p50", "write p99", "us/op", "peak RSS MiB",
                                                       "errors"))
names = [("geo-%s-%%s" % n, "%s conn%s, closed loop" % (n, "s"[:n != "1"])) for n in geo_conns.split()]
if max_geo > 1:
    names.append(("geo-%d-rate-%%s" % max_geo, "%d conns, %s req/s offered" % (max_geo, rate)))
for pat, title in names:
    for who in "kp":
        p = rep(pat % who)
        if p is None:
            print("%-34s %-6s failed" % (title, "kvd" if who == "k" else "pg"))
            continue
        r, u = fig(p, "read"), fig(p, "update")
        try:
            hwm, procs = open(os.path.join(work, (pat % who) + ".peak")).read().split()
        except OSError:
            hwm, procs = "0", "0"
        mem = "%.1f" % (int(hwm) / 1048576)
        if who == "p" and p.get("server"):
            mem += " (PSS %.1f, %s procs)" % (p["server"]["peak_rss_bytes"] / 1048576, procs)
        print("%-34s %-6s %10s %9s %9s %9s %9s %6s %14s %s" % (title, "kvd" if who == "k" else "pg",
              f(fig(p), "ops"), f(r, "p50"), f(r, "p99"), f(u, "p50"), f(u, "p99"),
              f(fig(p, name=pat % who), "scpu"), mem, p["errors"]["total"]))
print()
print("commands (PORT, PID: the run's):")
print(open(os.path.join(work, "commands")).read().rstrip())
EOF
if [ -s "$WORK/failed" ]; then
	echo "doc_compare: failed runs: $(tr '\n' ' ' <"$WORK/failed")" >&2
	exit 3
fi
