"""test_durability.py - nothing acknowledged is ever lost.

Concurrent writers, restarts (clean and kill -9), a different --threads on
restart, and SIGTERM with writes in flight: after each, every acknowledged
write is read back with its exact value, from the real LMDB files.  The
kill -9 rounds are tests/reliability/relutil.py's (seeded: KVD_SEED).
"""

import os
import random
import subprocess
import sys
import threading
import time
import unittest

from kvdtest import *  # noqa: F401,F403

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import Rounds, seed_from_env  # noqa: E402


def value_of(key):
    # Deterministic, varied length, binary: lets the audit check contents.
    r = random.Random(key)
    return bytes(r.getrandbits(8) for _ in range(r.randint(1, 300)))


def writer(port, prefix, count, acked, pipeline, stop=None):
    """Write count unique keys; record each one kvd acknowledged."""
    try:
        c = Client(port, timeout=30)
        i = 0
        while i < count and not (stop and stop.is_set()):
            batch = [b"%s:%06d" % (prefix, j) for j in range(i, min(count, i + pipeline))]
            reqs = [(PUT, k, value_of(k)) for k in batch]
            for k, r in zip(batch, c.pipeline(reqs)):
                if r == [OK]:
                    acked.append(k)
            i += len(batch)
        c.close()
    except (OSError, EOFError):
        pass  # the server was killed under us: what was acked is recorded


def audit(test, port, keys):
    c = Client(port)
    missing = []
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        r = c.call(MGET, *chunk)
        test.assertEqual(r[0], OK)
        for k, v in zip(chunk, r[1:]):
            if v != value_of(k):
                missing.append(k)
    c.close()
    test.assertEqual(missing[:10], [], "%d acknowledged writes lost or wrong" % len(missing))
    return len(keys)


def one_by_one_writers(test, srv, prefix, each):
    """8 writers, one request at a time, each of its keys read back at
    once by its writer and by another connection; the writes went through
    io threads' own commits (inline_commits) and checkpoints ran.  The
    keys acknowledged."""
    acked, errors = [], []

    def one_by_one(n):
        c, other = Client(srv.port), Client(srv.port)
        for i in range(each):
            k = prefix + b"%02d:%04d" % (n, i)
            v = value_of(k)
            if c.call(PUT, k, v) != [OK]:
                errors.append(k)
                continue
            acked.append(k)
            if c.call(GET, k) != [OK, v] or other.call(GET, k) != [OK, v]:
                errors.append(k)
        c.close()
        other.close()

    threads = [threading.Thread(target=one_by_one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    test.assertEqual(errors, [])
    test.assertEqual(len(acked), 8 * each)
    st = srv.client().call(STATS)[1]
    test.assertGreater(st[b"inline_commits"], 0)
    test.assertLessEqual(st[b"inline_commits"], st[b"commits"])
    test.assertGreater(sum(s[b"checkpoints"] for s in st[b"shards"]), 0)
    return acked


class Durability(unittest.TestCase):
    def test_concurrent_writers_then_restart(self):
        with Server(threads=2) as srv:
            acked = []
            threads = [threading.Thread(target=writer,
                                        args=(srv.port, b"w%02d" % n, 2000, acked,
                                              1 if n % 4 == 0 else 50))
                       for n in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(len(acked), 64 * 2000)
            audit(self, srv.port, acked)
            st = srv.client().call(STATS)[1]
            self.assertEqual(st[b"writes"] >= 64 * 2000, True)
            # group commit: many writes per commit under concurrency
            self.assertGreater(st[b"avg_batch"], 1.0)
            srv.restart()
            audit(self, srv.port, acked)
            self.assertEqual(srv.client().call(COUNT), [OK, 64 * 2000])

    def test_async_inline_commits(self):
        """Async mode: an io thread commits its own turn's writes when the
        shard's committer is idle (docs/architecture.md section 4).  With
        writers one request at a time and memtables small enough to freeze
        every few hundred writes (a freeze hands the batch back to the
        committer), every write is acknowledged once, read back at once by
        its writer and by another connection, and survives kill -9."""
        mport = free_port()
        with Server(threads=2, durability="async",
                    args=["--memtable-size", "64k", "--checkpoint-interval-ms", "50",
                          "--metrics-port", str(mport)]) as srv:
            acked = one_by_one_writers(self, srv, b"i", 400)
            _, body = http_get(mport, b"/metrics")
            inl = [float(line.split()[-1]) for line in body.splitlines()
                   if line.startswith("kvd_inline_commits_total{")]
            self.assertEqual(len(inl), 2)  # one per shard
            self.assertGreater(sum(inl), 0)
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)
            self.assertEqual(srv.client().call(COUNT), [OK, 8 * 400])

    def sync_io_thread_commits(self, mode):
        """Sync mode, io-thread-flush ring, inline or auto: an io thread
        commits its own writes when the shard's committer is idle and
        flushes the journal itself, through its io_uring ring (answering
        from the flush's completion) or with its own fdatasync
        (docs/architecture.md section 4).  With writers one request at a
        time, and memtables frozen every few hundred writes (a freeze
        hands the batch to the committer), every write is acknowledged
        once, read back at once by its writer and by another connection,
        and survives kill -9.  STATS before the kill."""
        with Server(threads=2, durability="sync",
                    args=["--memtable-size", "64k", "--checkpoint-interval-ms", "50",
                          "--io-thread-flush", mode]) as srv:
            acked = one_by_one_writers(self, srv, b"r", 300)
            st = srv.client().call(STATS)[1]
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)
            self.assertEqual(srv.client().call(COUNT), [OK, 8 * 300])
            return st

    def test_sync_ring_commits(self):
        st = self.sync_io_thread_commits("ring")
        # every io thread's flush through its ring (room there is ample)
        self.assertEqual(st[b"ring_flushes"], st[b"inline_commits"])

    def test_sync_inline_commits(self):
        st = self.sync_io_thread_commits("inline")
        self.assertEqual(st[b"ring_flushes"], 0)

    def test_sync_auto_commits(self):
        """io-thread-flush auto, eight writers one request at a time: the
        io threads commit their batches themselves; a batch is flushed in
        place only when it holds a write of each of its thread's
        connections, otherwise through the ring (how many go each way is
        the timing's: test_sync_auto_one_writer_in_place and
        test_sync_auto_large_batches_through_ring pin each way down)."""
        st = self.sync_io_thread_commits("auto")
        self.assertGreater(st[b"inline_commits"], 0)
        self.assertLessEqual(st[b"ring_flushes"], st[b"inline_commits"])

    def test_sync_auto_one_writer_in_place(self):
        """io-thread-flush auto, one connection writing one request at a
        time: each batch is one write, the only one of its loop turn, so
        every io-thread flush is that thread's own fdatasync; every write
        survives kill -9."""
        with Server(threads=2, durability="sync",
                    args=["--io-thread-flush", "auto"]) as srv:
            acked = []
            writer(srv.port, b"o", 400, acked, 1)
            self.assertEqual(len(acked), 400)
            st = srv.client().call(STATS)[1]
            self.assertGreaterEqual(st[b"inline_commits"], 300)
            self.assertEqual(st[b"ring_flushes"], 0)
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)

    def test_sync_auto_idle_connections_through_ring(self):
        """io-thread-flush auto, one io thread, one connection writing one
        request at a time beside two idle ones: a batch of one write does
        not hold a write of each of the thread's three connections (an
        idle one could send during a flush in place), so every io-thread
        flush goes through the ring; every write survives kill -9."""
        with Server(threads=1, durability="sync",
                    args=["--io-thread-flush", "auto"]) as srv:
            idle = [srv.client(), srv.client()]
            st0 = idle[0].call(STATS)[1]
            acked = []
            writer(srv.port, b"i", 300, acked, 1)
            self.assertEqual(len(acked), 300)
            st = idle[0].call(STATS)[1]
            inl = st[b"inline_commits"] - st0[b"inline_commits"]
            ring = st[b"ring_flushes"] - st0[b"ring_flushes"]
            self.assertGreaterEqual(inl, 200)
            self.assertEqual(ring, inl)
            for c in idle:
                c.close()
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)

    def test_sync_auto_large_batches_through_ring(self):
        """io-thread-flush auto: batches of more than 16 writes (pipelines
        of 200 from four connections) have their flush go through the io
        thread's ring; every acknowledged write survives kill -9.  One
        shard, so that no batch goes to the ring for being one of two in
        its loop turn: only its size sends it there."""
        with Server(threads=1, durability="sync",
                    args=["--io-thread-flush", "auto"]) as srv:
            acked = []
            threads = [threading.Thread(target=writer,
                                        args=(srv.port, b"p%d" % n, 2000, acked, 200))
                       for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(len(acked), 4 * 2000)
            st = srv.client().call(STATS)[1]
            self.assertGreater(st[b"inline_commits"], 0)
            self.assertGreater(st[b"ring_flushes"], 0)
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)
            self.assertEqual(srv.client().call(COUNT), [OK, 4 * 2000])

    def test_sync_commits_stay_with_committers(self):
        """Sync mode with io-thread-flush no never commits on an io
        thread: every write goes through its shard's committer."""
        with Server(threads=2, durability="sync",
                    args=["--io-thread-flush", "no"]) as srv:
            c = srv.client()
            for i in range(200):
                self.assertEqual(c.call(PUT, b"s%03d" % i, b"v"), [OK])
            st = c.call(STATS)[1]
            self.assertGreater(st[b"commits"], 0)
            self.assertEqual(st[b"inline_commits"], 0)

    def test_sync_auto_two_shards_in_one_turn(self):
        """io-thread-flush auto, one io thread over two shards (a data
        directory made with --threads 2, opened with --threads 1), one
        connection sending one write to each shard at a time: every loop
        turn has a batch of one for each shard.  The first goes through
        the ring, the last is flushed in place beside it, so about half
        of the io thread's flushes go each way; every write survives
        kill -9."""
        with Server(threads=2, durability="sync",
                    args=["--io-thread-flush", "auto"]) as srv:
            keys = shard_keys(srv.client(), 150, prefix=b"t")
            srv.stop()
            srv.threads = 1
            srv.start()
            c = srv.client()
            st0 = c.call(STATS)[1]
            acked = []
            for k0, k1 in zip(keys[0], keys[1]):
                for k, r in zip((k0, k1), c.pipeline([(PUT, k0, value_of(k0)),
                                                      (PUT, k1, value_of(k1))])):
                    if r == [OK]:
                        acked.append(k)
            self.assertEqual(len(acked), 300)
            st = c.call(STATS)[1]
            ring = st[b"ring_flushes"] - st0[b"ring_flushes"]
            inl = st[b"inline_commits"] - st0[b"inline_commits"]
            self.assertGreater(ring, 0)
            self.assertLess(ring, inl)
            srv.kill9()
            srv.start()
            audit(self, srv.port, acked)

    def kill9_rounds(self, durability, rounds):
        """relutil's crash rounds (both ports, the full write mix, the
        audit), restarting with a different --threads each time: shards are
        fixed by the data directory, whatever the thread count."""
        seed = seed_from_env(None)
        with Server(threads=2, durability=durability, resp=True) as srv:
            r = Rounds(srv, seed, writers=16, prefix=b"r", threads=(1, 2, 3, 4))
            for rnd in range(rounds):
                r.round(rnd)
            self.assertEqual(r.fig["iterations"], rounds)
            self.assertGreater(r.fig["min_acked_round"], 0)
            # the environments opened clean: still writable after all that
            self.assertEqual(srv.client().call(PUT, b"after", b"crash"), [OK])

    def test_kill9_sync(self):
        self.kill9_rounds("sync", 3)

    def test_kill9_async(self):
        # async acknowledges after write(2): a process crash loses nothing
        self.kill9_rounds("async", 2)

    def test_threads_change_keeps_data(self):
        with Server(threads=2) as srv:
            c = srv.client()
            keys = [b"t%05d" % i for i in range(3000)]
            for i in range(0, len(keys), 500):
                pairs = []
                for k in keys[i:i + 500]:
                    pairs += [k, value_of(k)]
                self.assertEqual(c.call(MPUT, 0, *pairs), [OK])
            c.close()
            for n in (1, 4, 3):
                srv.restart(threads=n)
                hello = srv.client().call(HELLO, 1)[1]
                self.assertEqual(hello[b"shards"], 2)   # shards are not threads
                self.assertEqual(hello[b"threads"], n)
                audit(self, srv.port, keys)
                st, items, cur = srv.client().call(SCAN, b"t", None, None, 10000, 1)
                self.assertEqual(items, keys)

    def test_shards_option(self):
        # --shards sets a new directory's count apart from --threads; an
        # existing directory keeps its own, and a different explicit count
        # is refused before anything is served.
        with Server(threads=2, args=("--shards", "1")) as srv:
            c = srv.client()
            hello = c.call(HELLO, 1)[1]
            self.assertEqual((hello[b"shards"], hello[b"threads"]), (1, 2))
            keys = [b"s%05d" % i for i in range(2000)]
            pairs = []
            for k in keys:
                pairs += [k, value_of(k)]
            self.assertEqual(c.call(MPUT, 0, *pairs), [OK])
            c.close()
            self.assertEqual([n for n in os.listdir(srv.data_dir)
                              if n.startswith("shard-")], ["shard-000"])
            srv.stop()
            # kvd listens before it opens the store: wait for its exit
            srv.extra, srv.port = ["--shards", "2"], free_port()
            r = subprocess.run(srv.argv(), capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertIn(b"has 1 shard (its MANIFEST); shards 2 applies "
                          b"only to a new data directory", r.stderr)
            srv.extra = []
            srv.restart(threads=3)
            hello = srv.client().call(HELLO, 1)[1]
            self.assertEqual((hello[b"shards"], hello[b"threads"]), (1, 3))
            audit(self, srv.port, keys)

    def test_sigterm_drains_in_flight_writes(self):
        with Server(threads=2) as srv:
            c = srv.client()
            # served: the store is open (kvd binds its port before it opens
            # the store, whose first start pre-writes journal segments)
            self.assertEqual(c.call(PING), [OK])
            keys = [b"d%05d" % i for i in range(5000)]
            payload = b"".join(frame([PUT, k, value_of(k)]) for k in keys)
            c.send_raw(payload)
            time.sleep(0.05)
            srv.proc.send_signal(signal.SIGTERM)
            acked = []
            try:
                for k in keys:
                    if c.read_reply() == [OK]:
                        acked.append(k)
            except (EOFError, OSError):
                pass
            self.assertEqual(srv.proc.wait(30), 0)
            srv.proc = None
            srv.log.close()
            self.assertGreater(len(acked), 0)
            srv.start()
            audit(self, srv.port, acked)


if __name__ == "__main__":
    main()
