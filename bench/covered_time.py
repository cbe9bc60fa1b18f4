#!/usr/bin/python3
"""bench/covered_time.py - the commands that count or list an indexed
field's values (count, the drivers' countDocuments, distinct, a $group by
it) timed on two kvd binaries, alternated: each pass starts a fresh kvd
of each, loads N documents {_id, k: i % (N / 40), pad: 200 bytes} with an
index on k (pymongo through the MongoDB door), and takes the best of 5
runs of each command, which reads k alone (answered from the index's
entries where a kvd covers them: docs/architecture.md section 15,
"Covered queries").

    bench/covered_time.py [-n N] [--passes P] A_KVD B_KVD

A benchmark: it prints figures and never fails on them (exit 2 when a
server does not start).
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import pymongo
except ImportError:
    print("covered_time: /usr/bin/python3 has no pymongo (scripts/deps.sh)",
          file=sys.stderr)
    sys.exit(2)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def best(fn, runs=5):
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = fn()
        t.append(time.perf_counter() - t0)
    return min(t) * 1000, r


def one(kvd, n, work):
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    mport = free_port()
    p = subprocess.Popen([kvd, "--bind", "127.0.0.1", "--port",
                          str(free_port()), "--mongo-port", str(mport),
                          "--data-dir", data, "--threads", "2",
                          "--log-level", "warn"])
    try:
        cl = pymongo.MongoClient("127.0.0.1", mport, directConnection=True,
                                 serverSelectionTimeoutMS=10000)
        c = cl.bench.cov
        c.create_index([("k", 1)])
        kn = max(n // 40, 1)
        for i in range(0, n, 10000):
            c.insert_many([{"_id": j, "k": j % kn, "pad": "x" * 200}
                           for j in range(i, min(n, i + 10000))])
        out = {
            "count {k: {$gte: 100}}": best(lambda: cl.bench.command(
                "count", "cov", query={"k": {"$gte": 100}})["n"]),
            "countDocuments {k: {$lt: N/80}}": best(
                lambda: c.count_documents({"k": {"$lt": kn // 2}})),
            "distinct k, {k: {$gte: 0}}": best(
                lambda: len(c.distinct("k", {"k": {"$gte": 0}}))),
            "$group {_id: $k, n: {$sum: 1}}": best(lambda: len(list(
                c.aggregate([{"$group": {"_id": "$k",
                                         "n": {"$sum": 1}}}])))),
        }
        cl.close()
        return out
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("a")
    ap.add_argument("b")
    o = ap.parse_args()
    work = tempfile.mkdtemp(prefix="covered_time.")
    print("covered_time: %d documents, A %s, B %s; %s, load average %s" %
          (o.n, o.a, o.b, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           " ".join(open("/proc/loadavg").read().split()[:3])))
    try:
        for p in range(o.passes):
            for label, kvd in (("A", o.a), ("B", o.b)):
                for what, (ms, r) in one(kvd, o.n, work).items():
                    print("pass %d %s  %-34s %8.1f ms  (%d)" %
                          (p + 1, label, what, ms, r))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
