"""test_limits.py - a full shard refuses its batch, and nothing else breaks.

With a 1 MiB map, writes eventually fail with MAP_FULL: only the writers of
that batch get the error, every write acknowledged before stays readable,
reads and other connections keep working, and a restart with a larger
map-size accepts writes again.  A value larger than a journal segment
(`--journal-segment-size`) gets VALUE_TOO_LARGE, alone: the shard stays
writable, its batch-mates and later writes are acknowledged.  Also:
max-clients refuses the extra
connection with TOO_MANY_CONNS while the others keep working.
"""

import time
import unittest

from kvdtest import *  # noqa: F401,F403


class Limits(unittest.TestCase):
    def test_map_full(self):
        with Server(threads=1, args=["--map-size", "1m"]) as srv:
            c = srv.client()
            acked, status = [], None
            for i in range(2000):
                k = b"fill%05d" % i
                r = c.call(PUT, k, b"x" * 1000)
                if r[0] != OK:
                    status = r
                    break
                acked.append(k)
            self.assertIsNotNone(status, "1 MiB never filled")
            self.assertEqual(status[0], MAP_FULL)
            self.assertIn(b"map-size", status[1])
            self.assertGreater(len(acked), 100)
            # the server stays up: reads and other connections work
            other = srv.client()
            self.assertEqual(other.call(PING), [OK])
            for k in acked:
                self.assertEqual(c.call(GET, k), [OK, b"x" * 1000])
            st = c.call(STATS)[1]
            self.assertGreaterEqual(st[b"commit_failures"], 1)
            self.assertEqual(st[b"shards"][0][b"failed"], False)
            # room again: a larger map on restart
            srv.restart(extra=["--map-size", "64m"])
            c = srv.client()
            self.assertEqual(c.call(PUT, b"more", b"y" * 1000), [OK])
            self.assertEqual(c.call(COUNT), [OK, len(acked) + 1])

    def test_value_larger_than_a_journal_segment(self):
        with Server(threads=1, args=["--journal-segment-size", "1m"]) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"before", b"b"), [OK])
            big = b"x" * (2 << 20)
            # pipelined with small writes: the big one fails alone
            r = c.pipeline([(PUT, b"small1", b"s1"), (PUT, b"big", big),
                            (PUT, b"small2", b"s2")])
            self.assertEqual(r[0], [OK])
            self.assertEqual(r[1][0], VALUE_TOO_LARGE, r[1])
            self.assertEqual(r[2], [OK])
            self.assertEqual(c.call(GET, b"big")[0], NOT_FOUND)
            st = c.call(STATS)[1]
            self.assertEqual(st[b"shards"][0][b"failed"], False)
            self.assertEqual(c.call(PUT, b"after", b"a"), [OK])
            # a value that fits a segment is taken
            self.assertEqual(c.call(PUT, b"fits", b"y" * (512 << 10)), [OK])
            srv.kill9()
            srv.start()
            c = srv.client()
            for k, v in ((b"before", b"b"), (b"small1", b"s1"), (b"small2", b"s2"),
                         (b"after", b"a"), (b"fits", b"y" * (512 << 10))):
                self.assertEqual(c.call(GET, k), [OK, v])
            self.assertEqual(c.call(GET, b"big")[0], NOT_FOUND)

    def test_max_clients(self):
        with Server(threads=1, args=["--max-clients", "3"]) as srv:
            # the harness's readiness probe holds a slot until kvd sees it close
            first = srv.client()
            end = time.monotonic() + 30
            while first.call(STATS)[1][b"connections"] > 1:
                self.assertLess(time.monotonic(), end,
                                "the readiness probe's connection never closed")
                time.sleep(0.01)
            cs = [first] + [srv.client() for _ in range(2)]
            for c in cs:
                self.assertEqual(c.call(PING), [OK])
            extra = srv.client()
            r = extra.read_reply()
            self.assertEqual(r[0], TOO_MANY_CONNS)
            self.assertTrue(extra.closed_by_peer())
            for c in cs:
                self.assertEqual(c.call(PING), [OK])
            cs[0].close()
            # a freed slot is reusable
            for _ in range(50):
                c = srv.client()
                c.send_raw(frame([PING]))
                r = c.read_reply()
                if r == [OK]:
                    break
                time.sleep(0.05)
            self.assertEqual(r, [OK])
            st = cs[1].call(STATS)[1]
            self.assertGreaterEqual(st[b"connections_refused"], 1)


if __name__ == "__main__":
    main()
