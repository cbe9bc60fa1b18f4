#!/usr/bin/env python3
"""test_ckpt_txn.py - checkpoints applied in several LMDB write transactions.

LMDB keeps the buffer of every page a write transaction dirtied for the life
of the environment, so kvd bounds the transactions of a checkpoint
(kvd/store/shard_ckpt.c) instead of applying a whole memtable in one.  These tests
check what that must not break and what it buys:

- memory: after a checkpoint of a 128 MiB memtable, whose chunks are kept
  for the next memtable while writes go on (STATS memtable_spare_bytes)
  and given back a second after they stop, kvd's private anonymous
  memory (smaps_rollup Anonymous, as bench/targets measures it), less the
  active memtable, grows by less than one memtable (4,096 entries or 16 MiB
  of values a transaction: 22 MiB measured, 83 MiB seen once on a loaded
  machine), where one transaction of that memtable kept 329 MiB of LMDB
  page buffers; a second checkpoint as large adds less than 32 MiB (what
  is kept does not grow with the data);
- COUNT, GET and SCAN stay exact while LMDB holds part of a frozen memtable
  (KVD_CKPT_TXN_ENTRIES=2 makes a checkpoint hundreds of transactions long),
  with plain PUTs (whose "was it below" is resolved lazily), deletes and
  writes to the active memtable during the checkpoint;
- a kill -9 part-way through a checkpoint of a FLUSHALL loses nothing and
  resurrects nothing: the journal replays over the part applied;
- backpressure: when the next memtable fills before the previous
  checkpoint ended, writers wait, and the waits are counted, in STATS
  (checkpoint_waits) and in kvd_shard_checkpoint_waits_total alike; every
  write is acknowledged and kept.
"""

import os
import time

from kvdtest import (COUNT, DEL, FLUSHALL, GET, MDEL, MPUT, NOT_FOUND, OK, PUT,
                     SCAN, STATS, Server, free_port, http_get, main,
                     skip_rss_bounds_under_tsan, start_with, unittest, wait_for)

MiB = 1 << 20


def anon(srv):
    with open("/proc/%d/smaps_rollup" % srv.proc.pid) as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    raise KeyError("Anonymous")


def largest_anon(srv, count=8):
    """The largest anonymous figures of srv's mappings, for a failure's
    message: which allocation grew (arenas, stacks, memtable chunks)."""
    rows, head = [], ""
    with open("/proc/%d/smaps" % srv.proc.pid) as f:
        for line in f:
            first = line.split(" ", 1)[0]
            if "-" in first and not first.endswith(":"):
                head = line.split()[0] + " " + " ".join(line.split()[5:])
            elif line.startswith("Anonymous:"):
                rows.append((int(line.split()[1]), head))
    rows.sort(reverse=True)
    return ", ".join("%s %d KiB" % (h, kb) for kb, h in rows[:count])


def shard_stats(c):
    return c.call(STATS)[1][b"shards"]


def ckpts(c):
    return [s[b"checkpoints"] for s in shard_stats(c)]


def mput(c, pairs, batch=500):
    for i in range(0, len(pairs), batch):
        args = [0]
        for k, v in pairs[i:i + batch]:
            args += [k, v]
        assert c.call(MPUT, *args) == [OK]


def scan_all(c):
    keys, start = [], None
    while True:
        st, items, cur = c.call(SCAN, None, start, None, 1000, 1)
        keys += items
        if cur is None:
            return keys
        start = cur


class CheckpointTxnTest(unittest.TestCase):
    def tearDown(self):
        if getattr(self, "srv", None):
            self.srv.cleanup()

    def settle(self, c, before):
        """Wait until every shard completed a checkpoint after before and
        has nothing frozen (a second one completed, or none needed)."""
        wait_for(lambda: all(a > b for a, b in zip(ckpts(c), before)),
                 timeout=120, what="a checkpoint on every shard")

    def checkpoint_round(self, c, prefix, n, val, pool=True):
        """Write n keys of val (past one memtable: the first freezes full),
        wait for its checkpoint and for the memory to settle; kvd's
        anonymous memory then, less the active memtable.  pool: check the
        frozen memtable's chunks kept while writes come (a checkpoint that
        ends more than a second after the last write gives them back at
        once: a second round's, into a larger tree, may on a loaded
        machine)."""
        before = ckpts(c)
        mput(c, [(prefix + b"%08d" % ((i * 7919) % n), val)
                 for i in range(n)], batch=200)
        self.settle(c, before)
        # The frozen memtable is freed once no reader can need it (two
        # quiescent points after the checkpoint): wait for its arena to go.
        # Until then the shard holds it (128 MiB) and the active one.  Its
        # chunks stay for the next memtable while writes go on (a trickle
        # here) and go back to the system a second after they stop.
        i = 0

        def trickle():
            nonlocal i
            i += 1
            self.assertEqual(c.call(PUT, b"trickle", b"%d" % i), [OK])
            time.sleep(0.05)
            return shard_stats(c)[0]

        wait_for(lambda: trickle()[b"memtable_bytes"] < 128 * MiB,
                 timeout=60, what="the frozen memtable freed")
        if pool:
            wait_for(lambda: trickle()[b"memtable_spare_bytes"] > 64 * MiB,
                     timeout=10,
                     what="its chunks kept for the next memtable")
            for _ in range(10):     # kept while writes come
                self.assertGreater(trickle()[b"memtable_spare_bytes"],
                                   64 * MiB)
        wait_for(lambda: shard_stats(c)[0][b"memtable_spare_bytes"] == 0,
                 timeout=10, what="the spare chunks given back when idle")
        # The counters drop it when it is unpublished; its arena goes one
        # quiescent point later (a loaded or sanitized run sees the gap):
        # the lowest figure of a few seconds.
        low = None
        deadline = time.time() + 3
        while time.time() < deadline:
            got = anon(self.srv) - shard_stats(c)[0][b"memtable_bytes"]
            low = got if low is None else min(low, got)
            time.sleep(0.1)
        return low

    def test_memory_after_large_checkpoint(self):
        skip_rss_bounds_under_tsan(self)
        """One shard, a 128 MiB memtable of 1,500-byte values frozen when
        full: one transaction for it kept 329 MiB of page buffers."""
        self.srv = Server(threads=1, args=["--memtable-size", "128m",
                                           "--checkpoint-interval-ms",
                                           "3600000"])
        self.srv.start()
        c = self.srv.client()
        base = anon(self.srv)
        val = os.urandom(1500)
        n = (160 * MiB) // 1600
        first = self.checkpoint_round(c, b"m", n, val)
        self.assertLess(first - base, 128 * MiB,
                        "the first checkpoint left %.1f MiB (less the "
                        "active memtable); largest anonymous mappings: %s"
                        % ((first - base) / MiB, largest_anon(self.srv)))
        second = self.checkpoint_round(c, b"n", n, val, pool=False)
        self.assertLess(second - first, 32 * MiB,
                        "a second checkpoint of as much added %.1f MiB (the "
                        "first left %.1f MiB); largest anonymous mappings: %s"
                        % ((second - first) / MiB, (first - base) / MiB,
                           largest_anon(self.srv)))
        self.assertEqual(c.call(COUNT), [OK, 2 * n + 1])
        self.assertEqual(c.call(GET, b"m%08d" % (n - 1)), [OK, val])
        self.assertEqual(c.call(GET, b"n%08d" % (n - 1)), [OK, val])

    def test_count_exact_during_checkpoint(self):
        os.environ.pop("KVD_CKPT_TXN_ENTRIES", None)
        self.srv = Server(threads=2, args=["--checkpoint-interval-ms", "200"])
        start_with(self.srv, KVD_CKPT_TXN_ENTRIES=2)
        c = self.srv.client()
        model = {}
        base = [(b"b%05d" % i, b"v0") for i in range(2000)]
        before = ckpts(c)
        mput(c, base)
        model.update(base)
        self.settle(c, before)
        # The next memtable: plain PUTs over LMDB's keys (resolved lazily
        # for COUNT), new keys, deletes of LMDB's keys.
        before = ckpts(c)
        over = [(b"b%05d" % i, b"v1") for i in range(1000)]
        new = [(b"n%05d" % i, b"v1") for i in range(1000)]
        mput(c, over + new)
        model.update(over + new)
        gone = [b"b%05d" % i for i in range(1000, 1500)]
        self.assertEqual(c.call(MDEL, *gone), [OK, len(gone)])
        for k in gone:
            del model[k]
        i = 0
        while not all(a > b for a, b in zip(ckpts(c), before)) or i < 50:
            # Meanwhile, writes to the active memtable over the frozen one
            # and LMDB: their own "below" answers read both.
            k = b"b%05d" % (1500 + i % 500)
            if i % 2:
                self.assertEqual(c.call(DEL, k)[0],
                                 OK if k in model else NOT_FOUND)
                model.pop(k, None)
            else:
                self.assertEqual(c.call(PUT, k, b"v2"), [OK])
                model[k] = b"v2"
            self.assertEqual(c.call(COUNT), [OK, len(model)], "read %d" % i)
            for j in (i * 37 % 2000, 1000 + i % 1000):
                k = b"b%05d" % j
                want = [OK, model[k]] if k in model else [NOT_FOUND]
                self.assertEqual(c.call(GET, k)[:len(want)], want, k)
            if i % 10 == 0:
                self.assertEqual(scan_all(c), sorted(model), "read %d" % i)
            i += 1
            if i > 100000:
                self.fail("no checkpoint completed")
        self.assertEqual(sum(s[b"entries"] for s in shard_stats(c)),
                         len(model))
        self.assertEqual(c.call(COUNT), [OK, len(model)])

    def test_writers_wait_for_a_slow_checkpoint(self):
        os.environ.pop("KVD_CKPT_TXN_ENTRIES", None)
        mport = free_port()
        # 64 KiB memtables, checkpoints one entry (one synced LMDB commit)
        # per transaction: the next memtable fills long before the last
        # checkpoint is done
        self.srv = Server(threads=1, args=["--memtable-size", "64k",
                                           "--metrics-port", str(mport)])
        start_with(self.srv, KVD_CKPT_TXN_ENTRIES=1)
        c = self.srv.client()
        pairs = [(b"w%05d" % i, b"v" * 100) for i in range(10000)]
        mput(c, pairs)
        st = shard_stats(c)[0]
        self.assertGreater(st[b"checkpoint_waits"], 0, st)
        self.assertGreater(st[b"checkpoints"], 1, st)
        _, body = http_get(mport, b"/metrics")
        waits = [int(line.split()[-1]) for line in body.splitlines()
                 if line.startswith('kvd_shard_checkpoint_waits_total{shard="0"}')]
        # no write is in flight: the count stands still
        self.assertEqual(waits, [shard_stats(c)[0][b"checkpoint_waits"]])
        self.assertEqual(c.call(COUNT), [OK, len(pairs)])
        for k, v in pairs[::97]:
            self.assertEqual(c.call(GET, k), [OK, v])

    def test_kill_during_checkpoint_of_flushall(self):
        os.environ.pop("KVD_CKPT_TXN_ENTRIES", None)
        self.srv = Server(threads=2, args=["--checkpoint-interval-ms", "100"])
        start_with(self.srv, KVD_CKPT_TXN_ENTRIES=1)
        c = self.srv.client()
        before = ckpts(c)
        mput(c, [(b"b%05d" % i, b"v0") for i in range(1000)])
        self.settle(c, before)
        self.assertEqual(c.call(FLUSHALL), [OK])
        model = {b"n%05d" % i: b"v1" for i in range(6000)}
        mput(c, sorted(model.items()))
        self.assertEqual(c.call(MDEL, *[b"n%05d" % i for i in range(100)]),
                         [OK, 100])
        for i in range(100):
            del model[b"n%05d" % i]
        # Let the checkpoints begin (3,000 entries a shard, one a
        # transaction: hundreds of milliseconds), then kill kvd part-way.
        time.sleep(0.35)
        self.srv.kill9()
        self.srv.start()
        c = self.srv.client()
        self.assertEqual(c.call(COUNT), [OK, len(model)])
        self.assertEqual(scan_all(c), sorted(model))
        self.assertEqual(c.call(GET, b"b00001"), [NOT_FOUND])
        # And once what the journal replayed is checkpointed too.
        before = ckpts(c)
        self.assertEqual(c.call(PUT, b"n00000", b"v3"), [OK])
        model[b"n00000"] = b"v3"
        wait_for(lambda: any(a > b for a, b in zip(ckpts(c), before)),
                 timeout=120, what="a checkpoint")
        self.srv.stop()
        self.srv.start()
        c = self.srv.client()
        self.assertEqual(c.call(COUNT), [OK, len(model)])
        self.assertEqual(scan_all(c), sorted(model))
        self.assertEqual(sum(s[b"entries"] for s in shard_stats(c)),
                         len(model))


if __name__ == "__main__":
    main()
