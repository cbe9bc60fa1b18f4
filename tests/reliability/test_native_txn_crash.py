"""test_native_txn_crash.py - kill -9 during a stream of native TXN batches:
after the restart, each shard's part of a batch is all there or not at all.

Four keys on each of two shards; one client sends, as fast as they are
answered, batches that write the round's number to all eight keys (a TXN of
plain writes: one journal batch per shard), until kvd is killed with
SIGKILL 0.1 to 0.8 s after the first answer.  After the restart, in each
shard all four keys hold the same round (that shard's part was all or
nothing), and that round is the last one answered or the one after it
(sync mode: an answered batch is durable; the one in flight may have
reached one shard, both or none).
Rounds: 4 (KVD_SOAK_TXN_CRASH on demand).  KVD_SEED replays.
"""

import os
import random
import sys
import threading
import time
import unittest

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                             "integration"))

from kvdtest import (EXISTS_ST, MGET, OK, PUT, TXN, Server,  # noqa: E402,F401
                     main, shard_keys)
from relutil import kill9, seed_from_env, soak  # noqa: E402


class NativeTxnCrash(unittest.TestCase):
    def test_kill_during_batches(self):
        rng = random.Random(seed_from_env(7))
        srv = Server(threads=2, durability="sync").start()
        try:
            shards = shard_keys(srv.client(), 4, b"tk", b"0")
            keys = shards[0] + shards[1]
            for rnd in range(soak("txn_crash", 4)):
                acked = self.one_round(srv, keys, rng.uniform(0.1, 0.8))
                srv.restart()
                got = srv.client().call(MGET, *keys)
                self.assertEqual(got[0], OK)
                vals = dict(zip(keys, got[1:]))
                seen = set()
                for s in (0, 1):
                    part = {vals[k] for k in shards[s]}
                    self.assertEqual(len(part), 1, (rnd, s, vals))
                    seen |= part
                for v in seen:
                    self.assertIn(int(v), (acked, acked + 1), (rnd, acked, vals))
                # the next round starts from what is there
                srv.client().call(TXN, None, *[[PUT, k, b"%d" % acked] for k in keys])
        finally:
            srv.stop()
            srv.cleanup()

    def one_round(self, srv, keys, delay):
        """Batches until kvd is killed; the last round answered OK."""
        c = srv.client()
        start = int(c.call(MGET, keys[0])[1] or b"0")
        acked = [start]
        stop = threading.Event()

        def writer():
            i = start
            try:
                while not stop.is_set():
                    i += 1
                    reply = c.call(TXN, None, *[[PUT, k, b"%d" % i] for k in keys])
                    if reply[0] != OK or any(r != [OK] for r in reply[1]):
                        raise AssertionError(reply)
                    acked[0] = i
            except (EOFError, ConnectionError, OSError):
                pass  # the kill

        t = threading.Thread(target=writer)
        t.start()
        # the kill comes a random while after the first answer: on a busy
        # machine (ctest -j2) the first batch after a restart can take
        # longer than the shortest delay
        deadline = time.monotonic() + 10
        while acked[0] == start and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay)
        self.assertGreater(acked[0], start, "no batch answered before the kill")
        kill9(srv)
        stop.set()
        t.join()
        return acked[0]


if __name__ == "__main__":
    main()
