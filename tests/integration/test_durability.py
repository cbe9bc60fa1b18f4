"""test_durability.py - nothing acknowledged is ever lost.

Concurrent writers, restarts (clean and kill -9), a different --threads on
restart, and SIGTERM with writes in flight: after each, every acknowledged
write is read back with its exact value, from the real LMDB files.
"""

import random
import threading
import time
import unittest

from kvdtest import *  # noqa: F401,F403


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

    def kill9_round(self, durability, rounds):
        with Server(threads=2, durability=durability) as srv:
            all_acked = []
            for rnd in range(rounds):
                acked, stop = [], threading.Event()
                threads = [threading.Thread(target=writer,
                                            args=(srv.port, b"r%d-%02d" % (rnd, n), 100000,
                                                  acked, 1 + n % 3 * 10, stop))
                           for n in range(16)]
                for t in threads:
                    t.start()
                time.sleep(random.uniform(0.3, 1.0))
                srv.kill9()
                stop.set()
                for t in threads:
                    t.join()
                self.assertGreater(len(acked), 0)
                all_acked += acked
                srv.start()
                audit(self, srv.port, all_acked)
            # the environments opened clean: still writable after all that
            self.assertEqual(srv.client().call(PUT, b"after", b"crash"), [OK])

    def test_kill9_sync(self):
        self.kill9_round("sync", 3)

    def test_kill9_async(self):
        # async acknowledges after write(2): a process crash loses nothing
        self.kill9_round("async", 2)

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

    def test_sigterm_drains_in_flight_writes(self):
        with Server(threads=2) as srv:
            c = srv.client()
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
