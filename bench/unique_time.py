#!/usr/bin/env python3
"""bench/unique_time.py - what a unique index costs kvd's writers: the wall
time of insert_many of N documents (batches of 1000, ordered and
unordered) into a collection with a unique index on s, and of
createIndexes of s_1 unique over N documents, each beside the same without
`unique`, for one or more kvd binaries run in turn (alternated, ROUNDS
times each), so that two builds of kvd are compared on one machine at one
time (issue 35, "Unique builds take reservations one document at a
time").

    bench/unique_time.py [-n 100000] [--rounds 2] KVD [KVD...]

Each run starts a fresh kvd (--threads 2 --durability sync, as
bench/peer_servers.sh does) on a temporary data directory; the documents
are bench/ixbuild_time.py's (s: 16 hex digits of a hash of i, distinct).
After each load it checks that the collection and the index hold N
documents.  It prints one line per run and the median per binary and
case.  A benchmark, not a test.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pymongo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ixbuild_time import doc, free_port  # noqa: E402

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


def one(kvd, n, unique):
    """{case: seconds} of one fresh kvd."""
    d = tempfile.mkdtemp(prefix="uqtime-")
    port, mport = free_port(), free_port()
    p = subprocess.Popen([kvd, "--bind", "127.0.0.1", "--port", str(port),
                          "--mongo-port", str(mport), "--data-dir",
                          os.path.join(d, "kvd"), "--threads", "2",
                          "--durability", "sync", "--log-level", "warn"],
                         stderr=open(os.path.join(d, "log"), "w"))
    out = {}
    try:
        cl = pymongo.MongoClient("127.0.0.1", mport, directConnection=True,
                                 serverSelectionTimeoutMS=30000)
        cl.admin.command("ping")
        db = cl.kvbench
        for case, ordered in (("insert ordered", True),
                              ("insert unordered", False)):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("kvd", nargs="+")
    a = ap.parse_args()
    got = {}
    for r in range(a.rounds):
        for k in a.kvd:
            for unique in (True, False):
                o = one(k, a.n, unique)
                for case, t in o.items():
                    got.setdefault((k, unique, case), []).append(t)
                print("round %d %s %s: %s" % (
                    r + 1, k, "unique" if unique else "plain",
                    ", ".join("%s %.2f s" % x for x in o.items())),
                    flush=True)
    for k in a.kvd:
        for case in CASES:
            u = statistics.median(got[(k, True, case)])
            p = statistics.median(got[(k, False, case)])
            print("median %s %s of %d: unique %.2f s, plain %.2f s "
                  "(%.1fx)" % (k, case, a.n, u, p, u / p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
