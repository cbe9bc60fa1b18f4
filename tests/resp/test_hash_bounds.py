#!/usr/bin/env python3
"""test_hash_bounds.py - a request of a few hundred bytes about a hash never
makes kvd hold more than its limits allow (max-output, max-frame-size,
max-value-size, max-hash-bytes), measured on the kvd process
(tests/integration/membound.py): HMGET of one big field named 64 times,
HRANDFIELD with a huge negative count, HGETALLs pipelined and not read,
the native HGET and SCAN TYPED of big hashes, and an HSET past
max-hash-bytes.  Unbounded, each would hold hundreds of MiB."""

import unittest

import kvproto as P
import membound
from kvdtest import Client
from resputil import Raw, Server, encode, main

MiB = membound.MiB
VALUE = 4 * MiB  # max-value-size
HASH = 12 * MiB  # max-hash-bytes
BIG = b"v" * (VALUE - 64)
LIMITS = ["--max-value-size", "4m", "--max-frame-size", "8m", "--max-output", "8m",
          "--max-hash-bytes", "12m", "--memtable-size", "32m"]


def server():
    return Server(threads=1, resp=True, args=LIMITS)


def big_hash(c, key, n=2):
    """A hash of n fields of nearly max-value-size each."""
    for i in range(n):
        c.call("HSET", key, "f%d" % i, BIG)


class HashBounds(unittest.TestCase):
    def test_hmget_of_a_big_field_many_times(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            big_hash(c, "h")
            req = ["HMGET", "h"] + ["f0"] * 64  # 256 MiB of reply
            self.assertLess(len(encode(*req)), 3000)
            with membound.Peak(self, srv) as m:
                r = c.call(*req)
            self.assertIn("max-output", str(r))
            m.assert_within(8 * MiB + 2 * VALUE, "HMGET of one big field 64 times")
            self.assertEqual(c.call("HSTRLEN", "h", "f0"), len(BIG))
            c.close()

    def test_hrandfield_huge_negative_count(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            big_hash(c, "h")
            with membound.Peak(self, srv) as m:
                r = c.call("HRANDFIELD", "h", -1000000, "WITHVALUES")
            self.assertIn("max-output", str(r))
            m.assert_within(8 * MiB + 2 * VALUE, "HRANDFIELD -1000000 of big fields")
            c.close()

    def test_hgetall_pipelined_unread(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            c.call("HSET", "h", "f0", BIG)  # one reply: 4 MiB
            s = Raw(srv.resp_port, timeout=60)
            n = 64  # 256 MiB of replies, not read while sending
            with membound.Peak(self, srv) as m:
                s.send(encode("HGETALL", "h") * n)
                self.assertEqual(c.call("HSET", "x", "f", "1"), 1)
            m.assert_within(8 * MiB + 2 * VALUE, "HGETALLs not read")
            one = b"*2\r\n$2\r\nf0\r\n$%d\r\n%s\r\n" % (len(BIG), BIG)
            got = membound.recv_exactly(s.sock, n * len(one))
            self.assertEqual(got[-len(one):], one)
            s.close()
            c.close()

    def test_native_hget_and_typed_scan(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            for k in ("h1", "h2", "h3"):
                big_hash(c, k)
            n = Client(srv.port)
            with membound.Peak(self, srv) as m:
                r = n.call(P.HGET, b"h1", *[b"f0"] * 64)
                self.assertEqual(r[0], P.REPLY_TOO_LARGE)
                start, keys = None, 0
                while True:  # pages of about half a frame, one hash at least
                    st, items, start = n.call(P.SCAN, None, start, None, 10000,
                                              P.SCAN_TYPED)
                    self.assertEqual(st, P.OK)
                    keys += len(items) // 4
                    if start is None:
                        break
            self.assertEqual(keys, 3)
            m.assert_within(8 * MiB + 2 * HASH, "native HGET and SCAN TYPED of big hashes")
            n.close()
            c.close()

    def test_hset_past_max_hash_bytes(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            big_hash(c, "h")
            with membound.Peak(self, srv) as m:
                for i in range(2, 10):  # each would make a 12+ MiB image
                    r = c.call("HSET", "h", "f%d" % i, BIG, "g%d" % i, BIG[:MiB])
                    self.assertIn("max-hash-bytes", str(r))
            m.assert_within(HASH + 2 * VALUE, "HSETs past max-hash-bytes")
            self.assertEqual(c.call("HLEN", "h"), 2)
            c.close()


if __name__ == "__main__":
    main()
