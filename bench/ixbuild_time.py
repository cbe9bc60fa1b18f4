#!/usr/bin/env python3
"""bench/ixbuild_time.py - the wall time and the kvd process's CPU time of
one createIndexes of three indexes (k_1, r_1, s_1, as bench/index_compare.sh
row e builds them) over N documents, for one or more kvd binaries run in
turn (alternated, ROUNDS times each), so that two builds of kvd are
compared on one machine at one time (issue 35).

    bench/ixbuild_time.py [-n 200000] [--rounds 2] [--mem] KVD [KVD...]

Each run starts a fresh kvd (--threads 2 --durability sync, as
bench/peer_servers.sh does) on a temporary data directory, loads the
documents of bench/ixdocs.h's shape ({_id: "ix" + 10 digits, k: i mod
n/10, r: a 40-bit hash of i, s: 16 hex digits, pad: 100 bytes}) through
pymongo's insert_many in batches of 1000, then times createIndexes of the
three, and reads the process's utime + stime from /proc/PID/stat before
and after it; then checks that each index holds every document.  It
prints one line per run and the median per binary.  With --mem it also
samples kvd's anonymous memory (/proc/PID/smaps_rollup, every 20 ms):
before the build, its peak during it, and 2 s after.
A benchmark, not a test.
"""

import argparse
import os
import threading
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import pymongo

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
M64 = (1 << 64) - 1


def fnv64(v):
    """kvbench's fnvhash64 of an integer (its 8 bytes, low first)."""
    h = FNV_OFFSET
    for _ in range(8):
        h ^= v & 0xFF
        h = (h * FNV_PRIME) & M64
        v >>= 8
    return h


def doc(i, n):
    h = fnv64(i)
    return {"_id": "ix%010d" % i, "k": i % max(1, n // 10), "r": h >> 24,
            "s": "%016x" % fnv64(h), "pad": "p" * 100}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid):
    """utime + stime of pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def start_kvd(kvd, prefix):
    """A fresh kvd (--threads 2 --durability sync) on a temporary data
    directory: (its directory, process, a pymongo client of its door)."""
    d = tempfile.mkdtemp(prefix=prefix)
    port, mport = free_port(), free_port()
    p = subprocess.Popen([kvd, "--bind", "127.0.0.1", "--port", str(port),
                          "--mongo-port", str(mport), "--data-dir",
                          os.path.join(d, "kvd"), "--threads", "2",
                          "--durability", "sync", "--log-level", "warn"],
                         stderr=open(os.path.join(d, "log"), "w"))
    cl = pymongo.MongoClient("127.0.0.1", mport, directConnection=True,
                             serverSelectionTimeoutMS=30000)
    return d, p, cl


def anon_mib(pid):
    """kvd's anonymous memory, MiB."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) // 1024
    return 0


class Sampler(threading.Thread):
    """The peak of anon_mib(pid) until stop()."""

    def __init__(self, pid):
        super().__init__()
        self.pid, self.peak, self.done = pid, anon_mib(pid), False

    def run(self):
        while not self.done:
            self.peak = max(self.peak, anon_mib(self.pid))
            time.sleep(0.02)

    def stop(self):
        self.done = True
        self.join()


def one(kvd, n, mem=False):
    d, p, cl = start_kvd(kvd, "ixbuild-")
    try:
        cl.admin.command("ping")
        c = cl.kvbench.ixbuild
        for lo in range(0, n, 1000):
            c.insert_many([doc(i, n) for i in range(lo, min(n, lo + 1000))],
                          ordered=False)
        specs = [{"key": {f: 1}, "name": f + "_1"} for f in ("k", "r", "s")]
        if mem:
            time.sleep(2)
            smp = Sampler(p.pid)
            before = smp.peak
            smp.start()
        c0 = cpu_s(p.pid)
        t0 = time.monotonic()
        cl.kvbench.command("createIndexes", "ixbuild", indexes=specs)
        wall = time.monotonic() - t0
        cpu = cpu_s(p.pid) - c0
        if mem:
            time.sleep(2)
            smp.stop()
            print("  anonymous MiB: %d before the build, %d at its peak, "
                  "%d 2 s after" % (before, smp.peak, anon_mib(p.pid)),
                  flush=True)
        # each index holds every document (after the timing)
        for f, lo in (("k", 0), ("r", 0), ("s", "")):
            got = c.count_documents({f: {"$gte": lo}}, hint=[(f, 1)])
            assert got == n, (f, got)
        cl.close()
        return wall, cpu
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mem", action="store_true")
    ap.add_argument("kvd", nargs="+")
    a = ap.parse_args()
    got = {k: [] for k in a.kvd}
    for r in range(a.rounds):
        for k in a.kvd:
            wall, cpu = one(k, a.n, a.mem)
            got[k].append((wall, cpu))
            print("round %d %s: createIndexes of 3 on %d documents: "
                  "%.2f s wall, %.2f s kvd CPU" % (r + 1, k, a.n, wall, cpu),
                  flush=True)
    for k, v in got.items():
        print("median %s: %.2f s wall, %.2f s kvd CPU" %
              (k, statistics.median(x[0] for x in v),
               statistics.median(x[1] for x in v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
