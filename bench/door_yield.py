#!/usr/bin/python3
"""bench/door_yield.py - what a long MongoDB door read costs the other
connections of its io thread, and what its slices cost the read
(docs/architecture.md section 2, "A read gives its io thread back").

Each kvd runs with one io thread (--threads 1 --durability async) and N
documents {_id, v, s} (pymongo through the door), and 30 documents whose
s a backtracking $regex runs to PCRE2's match limit on, all checkpointed
into LMDB (RESP SAVE) before anything is timed.

    bench/door_yield.py [-n N] KVD        the waits: pings on another
        connection while counts over the N documents (matching none) run
        back to back for 3 s, while one count of the backtracking $regex
        runs, while a sorted DOCFIND page (the native protocol) of it
        runs, while a $lookup holds the N documents (its foreign field
        has no index), and while a $lookup's pipeline matches the
        backtracking $regex in memory: p50 and max of each ping's round
        trip
    bench/door_yield.py [-n N] --ab A_KVD B_KVD [--rounds R]
        counts over the N documents (a range, then a $regex, matching
        none, then an aggregate whose $match works in memory after an
        $addFields) on two binaries side by side (both servers up, calls
        alternated, R each): medians and B/A

A benchmark: it prints figures and never fails on them (exit 2 when a
server does not start).
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

try:
    import bson
    import msgpack
    import pymongo
except ImportError:
    print("door_yield: /usr/bin/python3 has no pymongo or msgpack "
          "(scripts/deps.sh)",
          file=sys.stderr)
    sys.exit(2)

NONE = {"v": {"$lt": -1}}
REGEX = {"s": {"$regex": "^x+y"}}
SLOW = {"s": {"$regex": "^(a+)+$"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Kvd:
    def __init__(self, binary, n):
        self.dir = tempfile.mkdtemp(prefix="door-yield-")
        self.port, self.resp = free_port(), free_port()
        self.native = free_port()
        # every server on the first core, this client on the other: two
        # servers compared share one core's speed, whatever its neighbours
        # on the host do (each kept to its own core, runs differed 1.5x)
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", binary, "--bind", "127.0.0.1",
             "--port", str(self.native),
             "--mongo-port", str(self.port), "--resp-port", str(self.resp),
             "--data-dir", self.dir, "--threads", "1",
             "--durability", "async"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            print("door_yield: %s did not start" % binary, file=sys.stderr)
            sys.exit(2)
        self.cl = self.client()
        for i in range(0, n, 10000):
            self.cl.t.big.insert_many(
                [{"_id": j, "v": j, "s": "x" * 20}
                 for j in range(i, min(n, i + 10000))])
        self.cl.t.slow.insert_many([{"_id": i, "s": "a" * 24 + "!"}
                                    for i in range(30)])
        # every document checkpointed into LMDB (RESP SAVE), so that two
        # servers compared read the same layout, not one its memtable
        with socket.create_connection(("127.0.0.1", self.resp)) as r:
            r.sendall(b"SAVE\r\n")
            r.recv(64)

    def client(self):
        c = pymongo.MongoClient("127.0.0.1", self.port)
        c.admin.command("ping")
        return c

    def stop(self):
        self.cl.close()
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir)


def pings_during(k, read):
    """Ping round trips on one connection while read(client) runs on
    another: (count, p50 ms, max ms)."""
    other, rc = k.client(), k.client()
    done = []
    t = threading.Thread(target=lambda: (read(rc), done.append(1)))
    t.start()
    time.sleep(0.05)  # the read has reached the server
    lat = []
    while not done:
        t0 = time.perf_counter()
        other.admin.command("ping")
        lat.append(time.perf_counter() - t0)
    t.join()
    other.close()
    rc.close()
    lat.sort()
    if not lat:  # the read ended first
        return 0, 0.0, 0.0
    return len(lat), statistics.median(lat) * 1000, lat[-1] * 1000


def docfind_sorted(k):
    """A sorted DOCFIND page (the native protocol, 49) of the slow
    documents matching the backtracking $regex."""
    req = msgpack.packb([49, b"t", b"slow", bson.encode(SLOW), None,
                         bson.encode({"s": -1})])
    with socket.create_connection(("127.0.0.1", k.native)) as s:
        s.sendall(len(req).to_bytes(4, "big") + req)
        head = b""
        while len(head) < 4:
            head += s.recv(4 - len(head))
        n, body = int.from_bytes(head, "big"), b""
        while len(body) < n:
            body += s.recv(n - len(body))
    return msgpack.unpackb(body)


def counts_for(seconds):
    def run(c):
        t = time.monotonic()
        while time.monotonic() - t < seconds:
            c.t.big.count_documents(NONE)
    return run


def waits(binary, n):
    k = Kvd(binary, n)
    try:
        print("%s, %d documents, one io thread" % (binary, n))
        print("  pings during 3 s of counts matching none: "
              "%d, p50 %.2f ms, max %.2f ms" %
              pings_during(k, counts_for(3)))
        print("  pings during a count of a backtracking $regex over 30 "
              "documents: %d, p50 %.2f ms, max %.2f ms" %
              pings_during(k, lambda c: c.t.slow.count_documents(SLOW)))
        print("  pings during a sorted DOCFIND page of a backtracking "
              "$regex over 30 documents (native protocol): "
              "%d, p50 %.2f ms, max %.2f ms" %
              pings_during(k, lambda c: docfind_sorted(k)))
        print("  pings during a $lookup that holds the %d documents: "
              "%d, p50 %.2f ms, max %.2f ms" %
              ((n,) + pings_during(k, lambda c: list(c.t.slow.aggregate([
                  {"$limit": 1},
                  {"$lookup": {"from": "big", "localField": "s",
                               "foreignField": "s", "as": "j"}}])))))
        print("  pings during a $lookup whose pipeline matches the "
              "backtracking $regex on 30 documents in memory: "
              "%d, p50 %.2f ms, max %.2f ms" %
              pings_during(k, lambda c: list(c.t.big.aggregate([
                  {"$limit": 1},
                  {"$lookup": {"from": "slow", "as": "j",
                               "pipeline": [{"$match": SLOW}]}}]))))
    finally:
        k.stop()


def ab(a_bin, b_bin, n, rounds):
    a, b = Kvd(a_bin, n), Kvd(b_bin, n)
    try:
        reads = (
            ("count of a range", lambda c: c.t.big.count_documents(NONE)),
            ("count of a $regex", lambda c: c.t.big.count_documents(REGEX)),
            ("aggregate $addFields, $match (in memory), $count",
             lambda c: list(c.t.big.aggregate([
                 {"$addFields": {"x": 1}}, {"$match": NONE},
                 {"$count": "n"}]))))
        for what, read in reads:
            ta, tb = [], []
            for r in range(rounds):
                order = (((a, ta), (b, tb)) if r % 2 == 0
                         else ((b, tb), (a, ta)))
                for k, ts in order:
                    t0 = time.perf_counter()
                    read(k.cl)
                    ts.append(time.perf_counter() - t0)
            ma = statistics.median(ta) * 1000
            mb = statistics.median(tb) * 1000
            print("%s over %d documents, matching none, median of "
                  "%d: A %.2f ms  B %.2f ms  B/A %.3f" %
                  (what, n, rounds, ma, mb, mb / ma))
    finally:
        a.stop()
        b.stop()


def main():
    if hasattr(os, "sched_setaffinity") and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=200000)
    p.add_argument("--ab", action="store_true")
    p.add_argument("--rounds", type=int, default=61)
    p.add_argument("kvd", nargs="+")
    a = p.parse_args()
    if a.ab:
        if len(a.kvd) != 2:
            p.error("--ab takes two kvd binaries")
        ab(a.kvd[0], a.kvd[1], a.n, a.rounds)
    else:
        waits(a.kvd[0], a.n)


if __name__ == "__main__":
    main()
