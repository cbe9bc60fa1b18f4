#!/usr/bin/env python3
"""bench/unique_time.py - what a unique index costs kvd's writers: the wall
time of insert_many of N documents (batches of 1000, ordered and
unordered) into a collection with a unique index on s, and of
createIndexes of s_1 unique over N documents, each beside the same without
`unique`, for one or more kvd binaries run in turn (alternated, ROUNDS
times each), so that two builds of kvd are compared on one machine at one
time (issue 35, "Unique builds take reservations one document at a
time").

    bench/unique_time.py [-n 100000] [--rounds 2] [--pg PGBIN]
                         [--build-only] KVD [KVD...]

Each run starts a fresh kvd (--threads 2 --durability sync, as
bench/peer_servers.sh does) on a temporary data directory; the documents
are bench/ixbuild_time.py's (s: 16 hex digits of a hash of i, distinct).
After each load it checks that the collection and the index hold N
documents.  It prints one line per run and the median per binary and
case.  With --pg (PostgreSQL 15's bin directory, /usr/lib/postgresql/15/bin
on Debian), the same rounds run against a fresh PostgreSQL cluster too
(fsync and synchronous_commit on, its defaults): a table (id text primary
key, doc jsonb) with an expression index on (doc->>'s'), UNIQUE or not,
the documents inserted by psql as one multi-row INSERT of 1000 rows per
statement (each its own transaction, as an insert_many batch is one
command), and CREATE [UNIQUE] INDEX over N rows; the kvd / PostgreSQL
ratios end the output.  --build-only times the builds alone (the
collection loaded unordered, then createIndexes or CREATE INDEX).  A
benchmark, not a test.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ixbuild_time import doc, free_port, start_kvd  # noqa: E402

CASES = ("insert ordered", "insert unordered", "build")


def load(c, n, ordered):
    t0 = time.monotonic()
    for lo in range(0, n, 1000):
        c.insert_many([doc(i, n) for i in range(lo, min(n, lo + 1000))],
                      ordered=ordered)
    return time.monotonic() - t0


def check(c, n):
    got = c.count_documents({"s": {"$gte": ""}}, hint=[("s", 1)])
    assert got == n and c.estimated_document_count() == n, got


def inserts(build_only):
    return () if build_only else (("insert ordered", True),
                                  ("insert unordered", False))


def one(kvd, n, unique, build_only):
    """{case: seconds} of one fresh kvd."""
    d, p, cl = start_kvd(kvd, "uqtime-")
    out = {}
    try:
        cl.admin.command("ping")
        db = cl.kvbench
        for case, ordered in inserts(build_only):
            c = db["i" + str(ordered)]
            c.create_index("s", unique=unique)
            out[case] = load(c, n, ordered)
            check(c, n)
        c = db.b
        load(c, n, False)
        t0 = time.monotonic()
        c.create_index("s", unique=unique)
        out["build"] = time.monotonic() - t0
        check(c, n)
        cl.close()
        return out
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def as_pg(cmd, **kw):
    """PostgreSQL refuses to run as root: as nobody then."""
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "nobody", "--"] + cmd
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def pg_batches(n, path):
    """One INSERT of 1000 rows per line into table t."""
    with open(path, "w") as f:
        for lo in range(0, n, 1000):
            rows = []
            for i in range(lo, min(n, lo + 1000)):
                d = doc(i, n)
                rows.append("('%s', '%s')" % (d["_id"], json.dumps(d)))
            f.write("INSERT INTO t VALUES %s;\n" % ",".join(rows))


def one_pg(pgbin, n, unique, build_only):
    """{case: seconds} of one fresh PostgreSQL cluster."""
    d = tempfile.mkdtemp(prefix="uqtime-pg-")
    os.chmod(d, 0o755)
    if os.getuid() == 0:
        shutil.chown(d, "nobody")
    data, port = os.path.join(d, "data"), free_port()
    as_pg([os.path.join(pgbin, "initdb"), "-D", data, "-U", "kvbench", "-A",
           "trust", "-E", "UTF8", "--no-sync"])
    as_pg([os.path.join(pgbin, "pg_ctl"), "-D", data, "-l",
           os.path.join(d, "log"), "-w", "-t", "60", "-o",
           "-p %d -k %s -c listen_addresses=127.0.0.1" % (port, d), "start"])
    uq = "UNIQUE " if unique else ""
    psql = ["env", "PGOPTIONS=-c client_min_messages=warning", "psql", "-X",
            "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
            "-p", str(port), "-U", "kvbench", "postgres"]
    sql = os.path.join(d, "rows.sql")
    pg_batches(n, sql)
    out = {}
    try:
        # ordered and unordered are one case to PostgreSQL: both timed
        for case, _ in inserts(build_only):
            subprocess.run(psql + ["-c", "DROP TABLE IF EXISTS t; CREATE "
                                   "TABLE t (id text PRIMARY KEY, doc jsonb);"
                                   " CREATE %sINDEX ON t ((doc->>'s'))" % uq],
                           check=True, stdout=subprocess.DEVNULL)
            t0 = time.monotonic()
            subprocess.run(psql + ["-f", sql], check=True,
                           stdout=subprocess.DEVNULL)
            out[case] = time.monotonic() - t0
        subprocess.run(psql + ["-c", "DROP TABLE IF EXISTS t; CREATE TABLE t (id text "
                               "PRIMARY KEY, doc jsonb)"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(psql + ["-f", sql], check=True,
                       stdout=subprocess.DEVNULL)
        t0 = time.monotonic()
        subprocess.run(psql + ["-c", "CREATE %sINDEX ON t ((doc->>'s'))" % uq],
                       check=True, stdout=subprocess.DEVNULL)
        out["build"] = time.monotonic() - t0
        got = subprocess.run(psql + ["-At", "-c", "SELECT count(*) FROM t"],
                             check=True, capture_output=True, text=True)
        assert int(got.stdout) == n, got.stdout
        return out
    finally:
        as_pg([os.path.join(pgbin, "pg_ctl"), "-D", data, "-m", "immediate",
               "stop"])
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pg", help="PostgreSQL's bin directory")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("kvd", nargs="+")
    a = ap.parse_args()
    got = {}
    who = list(a.kvd) + (["postgresql"] if a.pg else [])
    for r in range(a.rounds):
        for k in who:
            for unique in (True, False):
                o = (one_pg(a.pg, a.n, unique, a.build_only)
                     if k == "postgresql"
                     else one(k, a.n, unique, a.build_only))
                for case, t in o.items():
                    got.setdefault((k, unique, case), []).append(t)
                print("round %d %s %s: %s" % (
                    r + 1, k, "unique" if unique else "plain",
                    ", ".join("%s %.2f s" % x for x in o.items())),
                    flush=True)
    med = {key: statistics.median(v) for key, v in got.items()}
    cases = CASES[2:] if a.build_only else CASES
    for k in who:
        for case in cases:
            u, p = med[(k, True, case)], med[(k, False, case)]
            print("median %s %s of %d: unique %.2f s, plain %.2f s "
                  "(%.1fx)" % (k, case, a.n, u, p, u / p))
    for k in a.kvd if a.pg else ():
        for case in cases:
            print("%s / postgresql, %s, unique: %.2fx the rate" % (
                k, case, med[("postgresql", True, case)] /
                med[(k, True, case)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
