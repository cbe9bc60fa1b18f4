#!/usr/bin/env python3
"""test_bounds.py - the native protocol's reply builders and work buffers
never hold more than the configured limits allow, measured on the kvd
process (membound.py) while one small request asks for far more.

Each test starts kvd with lowered limits (4 MiB values, an 8 MiB frame or
max-output), makes a request whose unbounded cost would be hundreds of
MiB, and asserts the peak against the sum of the limits in play.  The
RESP door's builders, MULTI's queue and the subscription table are
tests/resp/test_bounds.py.
"""

import socket
import unittest

import membound
from kvdtest import (BITOP, BITOP_OR, GET, GETRANGE, MGET, NOT_FOUND, OK, PUT,
                     REPLY_TOO_LARGE, SCAN, TXN, VALUE_TOO_LARGE, Server,
                     frame, main)

MiB = membound.MiB
VALUE = 4 * MiB  # max-value-size
FRAME = 8 * MiB  # max-frame-size, the native reply limit
BIG = b"v" * (VALUE - 64)
LIMITS = ["--max-value-size", "4m", "--max-frame-size", "8m",
          "--memtable-size", "16m"]


def server(*args):
    return Server(threads=1, args=LIMITS + list(args))


class Work(unittest.TestCase):
    """Operations that compute from many values: their work is one value."""

    def test_bitop_of_one_big_value_named_many_times(self):
        with server() as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", BIG), [OK])
            # 64 sources: a 300-byte request; every source was copied
            # (256 MiB) before the fold.
            with membound.Peak(self, srv) as m:
                self.assertEqual(c.call(BITOP, BITOP_OR, b"d", *[b"v"] * 64),
                                 [OK, len(BIG)])
            # the result, its memtable copy and its journal batch
            m.assert_within(3 * VALUE, "BITOP OR d v x64")
            self.assertEqual(c.call(GET, b"d"), [OK, BIG])
            c.close()

    def test_bitop_result_over_max_value_size_is_refused(self):
        with Server(threads=1, args=["--max-value-size", "8m"]) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", b"\x0f" * (6 * MiB)), [OK])
            srv.restart(extra=["--max-value-size", "4m"])
            c = srv.client()
            # A 6 MiB result cannot be stored: refused before the fold.
            with membound.Peak(self, srv) as m:
                self.assertEqual(c.call(BITOP, BITOP_OR, b"d", *[b"v"] * 64)[0],
                                 VALUE_TOO_LARGE)
            m.assert_within(VALUE, "BITOP past max-value-size")
            self.assertEqual(c.call(GET, b"d"), [NOT_FOUND])
            c.close()


class Txn(unittest.TestCase):
    """TXN's reply is held to max-frame-size as it is built."""

    def test_txn_of_many_gets_of_a_big_value(self):
        with server() as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", BIG), [OK])
            subs = [[GET, b"v"]] * 64 + [[PUT, b"after", b"1"]]
            # A 600-byte request whose reply would be 256 MiB: every reply
            # was kept (256 MiB), then copied into the frame (256 more).
            with membound.Peak(self, srv) as m:
                self.assertEqual(c.call(TXN, None, *subs)[0], REPLY_TOO_LARGE)
            # the replies kept up to the frame, one more being built
            m.assert_within(FRAME + 2 * VALUE, "TXN of 64 GETs")
            # refused as a whole, it ran all the same (docs/protocol.md)
            self.assertEqual(c.call(GET, b"after"), [OK, b"1"])
            # one that fits is answered
            r = c.call(TXN, None, [GET, b"v"], [GET, b"none"])
            self.assertEqual(r, [OK, [[OK, BIG], [NOT_FOUND]]])
            c.close()


class Replies(unittest.TestCase):
    """The single reply builders, under the same measure."""

    def test_mget_of_a_big_value_many_times(self):
        with server() as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", BIG), [OK])
            with membound.Peak(self, srv) as m:
                self.assertEqual(c.call(MGET, *[b"v"] * 64)[0], REPLY_TOO_LARGE)
            m.assert_within(FRAME + 2 * VALUE, "MGET of 64 big values")
            c.close()

    def test_scan_of_big_values(self):
        with server() as srv:
            c = srv.client()
            for i in range(16):
                self.assertEqual(c.call(PUT, b"k%02d" % i, BIG), [OK])
            with membound.Peak(self, srv) as m:
                r = c.call(SCAN, None, None, None, 1000)
            self.assertEqual(r[0], OK)
            self.assertTrue(0 < len(r[1]) < 32, len(r[1]))
            m.assert_within(FRAME + 2 * VALUE, "SCAN of 16 big values")
            c.close()

    def test_getrange_of_a_big_value(self):
        with server() as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", BIG), [OK])
            with membound.Peak(self, srv) as m:
                for _ in range(8):
                    self.assertEqual(c.call(GETRANGE, b"v", 0, -1), [OK, BIG])
            m.assert_within(VALUE, "GETRANGE of a big value")
            c.close()

    def test_pipelined_gets_of_a_big_value_unread(self):
        with server("--max-output", "8m") as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"v", BIG), [OK])
            s = socket.create_connection(("127.0.0.1", srv.port), 10)
            n = 64  # 256 MiB of replies, never read while sending
            with membound.Peak(self, srv) as m:
                s.sendall(frame([GET, b"v"]) * n)
                # kvd stops reading past max-output; the kernel's buffers
                # take the rest of the 2 KB requests
                c.call(PUT, b"x", b"1")
            m.assert_within(8 * MiB + 2 * VALUE, "GETs not read")
            # every GET is answered once the client reads
            one = frame([OK, BIG])
            self.assertEqual(membound.recv_exactly(s, n * len(one))[-len(one):], one)
            s.close()
            c.close()


if __name__ == "__main__":
    main()
