"""The native protocol's hash operations (HSET, HGET, HGETALL, HDEL,
HINCRBY, HSCAN: docs/protocol.md, "Hashes") and SCAN's TYPED flag, against
a real kvd: what each answers, that RESP's hash commands see the same
hashes, WRONG_TYPE both ways, the limits, and replies held to
max-frame-size."""
import os
import sys
import threading

import kvproto as P
from kvdtest import Client, Server, ServerCase, main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resp"))
from resputil import Raw  # noqa: E402


class NativeHash(ServerCase):
    SERVER = {"threads": 2, "resp": True,
              "args": ("--max-hash-fields", "100", "--max-hash-bytes", "65536")}

    def resp(self):
        r = Raw(self.srv.resp_port)
        self.addCleanup(r.close)
        return r

    def test_set_get_getall(self):
        c = self.c
        self.assertEqual(c.call(P.HSET, b"h", b"a", b"1", b"b", b"2"), [P.OK, 2])
        self.assertEqual(c.call(P.HSET, b"h", b"a", b"x", b"c", b""), [P.OK, 1])
        self.assertEqual(c.call(P.HGET, b"h", b"a", b"zz", b"c"), [P.OK, b"x", None, b""])
        self.assertEqual(c.call(P.HGET, b"none", b"a"), [P.OK, None])
        # insertion order, a changed field in place
        self.assertEqual(c.call(P.HGETALL, b"h"), [P.OK, [b"a", b"x", b"b", b"2", b"c", b""]])
        self.assertEqual(c.call(P.HGETALL, b"none"), [P.NOT_FOUND])
        self.assertEqual(self.resp().call("HGETALL", "h"), [b"a", b"x", b"b", b"2", b"c", b""])

    def test_del_incr(self):
        c = self.c
        self.assertEqual(c.call(P.HINCRBY, b"h", b"n", 5), [P.OK, 5])
        self.assertEqual(c.call(P.HINCRBY, b"h", b"n", -7), [P.OK, -2])
        self.assertEqual(c.call(P.HSET, b"h", b"t", b"text"), [P.OK, 1])
        got = c.call(P.HINCRBY, b"h", b"t", 1)
        self.assertEqual(got[0], P.NOT_INTEGER, got)
        self.assertIn(b"not an integer", got[1])
        self.assertEqual(c.call(P.HSET, b"h", b"big", b"9223372036854775800"), [P.OK, 1])
        got = c.call(P.HINCRBY, b"h", b"big", 100)
        self.assertEqual(got[0], P.NOT_INTEGER, got)
        self.assertEqual(c.call(P.HGET, b"h", b"big"), [P.OK, b"9223372036854775800"])
        self.assertEqual(c.call(P.HDEL, b"h", b"n", b"t", b"nope", b"n"), [P.OK, 2])
        self.assertEqual(c.call(P.HDEL, b"h", b"big"), [P.OK, 1])
        # the last field gone, the key is gone (Redis)
        self.assertEqual(c.call(P.EXISTS, b"h"), [P.OK, 0])
        self.assertEqual(c.call(P.HDEL, b"h", b"x"), [P.OK, 0])

    def test_wrong_type_and_args(self):
        c = self.c
        self.assertEqual(c.call(P.PUT, b"s", b"v"), [P.OK])
        for req in ([P.HSET, b"s", b"f", b"v"], [P.HGET, b"s", b"f"], [P.HGETALL, b"s"],
                    [P.HDEL, b"s", b"f"], [P.HINCRBY, b"s", b"f", 1], [P.HSCAN, b"s"]):
            got = c.call(*req)
            self.assertEqual(got[0], P.WRONG_TYPE, (req, got))
        self.assertEqual(c.call(P.GET, b"s"), [P.OK, b"v"])
        for req in ([P.HSET, b"h", b"f"], [P.HSET, b"h"], [P.HGET, b"h"], [P.HINCRBY, b"h", b"f"],
                    [P.HINCRBY, b"h", b"f", b"1"], [P.HSET, b"", b"f", b"v"],
                    [P.HSCAN, b"h", None, 0]):
            got = c.call(*req)
            self.assertEqual(got[0], P.BAD_ARGS, (req, got))
        self.assertEqual(c.call(P.EXISTS, b"h"), [P.OK, 0])
        # not in TXN
        got = c.call(P.TXN, None, [P.HSET, b"h", b"f", b"v"])
        self.assertEqual(got[0], P.BAD_ARGS, got)

    def test_limits(self):
        c = self.c
        pairs = []
        for i in range(101):
            pairs += [b"f%d" % i, b"v"]
        got = c.call(P.HSET, b"h", *pairs)
        self.assertEqual(got[0], P.VALUE_TOO_LARGE, got)
        self.assertIn(b"max-hash-fields", got[1])
        self.assertEqual(c.call(P.EXISTS, b"h"), [P.OK, 0])  # nothing applied
        got = c.call(P.HSET, b"h", b"f", b"x" * 70000)
        self.assertEqual(got[0], P.VALUE_TOO_LARGE, got)
        self.assertIn(b"max-hash-bytes", got[1])
        self.assertEqual(c.call(P.HSET, b"h", *pairs[:200]), [P.OK, 100])
        got = c.call(P.HSET, b"h", b"one more", b"v")
        self.assertEqual(got[0], P.VALUE_TOO_LARGE, got)
        self.assertEqual(c.call(P.HGET, b"h", b"f99"), [P.OK, b"v"])

    def test_hscan(self):
        c = self.c
        fields = {b"f%03d" % i: b"v%d" % i for i in range(57)}
        args = []
        for f in sorted(fields, reverse=True):
            args += [f, fields[f]]
        self.assertEqual(c.call(P.HSET, b"h", *args), [P.OK, 57])
        got, start, pages = [], None, 0
        while True:
            st, items, start = c.call(P.HSCAN, b"h", start, 10)
            self.assertEqual(st, P.OK)
            self.assertLessEqual(len(items), 20)
            got += items
            pages += 1
            if start is None:
                break
        self.assertEqual(pages, 6)
        # bytewise field order, each field once
        self.assertEqual(got[0::2], sorted(fields))
        self.assertEqual(dict(zip(got[0::2], got[1::2])), fields)
        # a start between fields, and past the last one
        self.assertEqual(c.call(P.HSCAN, b"h", b"f055x", 10), [P.OK, [b"f056", b"v56"], None])
        self.assertEqual(c.call(P.HSCAN, b"h", b"g"), [P.OK, [], None])
        self.assertEqual(c.call(P.HSCAN, b"none"), [P.NOT_FOUND])

    def test_scan_typed(self):
        c, r = self.c, self.resp()
        self.assertEqual(c.call(P.HSET, b"h", b"b", b"2", b"a", b"1"), [P.OK, 2])
        self.assertEqual(c.call(P.PUT, b"s", b"v", 100000), [P.OK])
        self.assertEqual(r.call("PEXPIRE", "h", 50000), 1)
        st, items, cur = c.call(P.SCAN, None, None, None, 10, P.SCAN_TYPED)
        self.assertEqual((st, cur), (P.OK, None))
        self.assertEqual(len(items), 8)
        self.assertEqual(items[0:2], [b"h", 1])
        self.assertTrue(0 < items[2] <= 50000, items)
        self.assertEqual(items[3], [b"b", b"2", b"a", b"1"])
        self.assertEqual(items[4:6], [b"s", 0])
        self.assertTrue(50000 < items[6] <= 100000, items)
        self.assertEqual(items[7], b"v")
        self.assertEqual(c.call(P.EXPIRE, b"s", 0), [P.OK])  # no expiry: -1
        st, items, cur = c.call(P.SCAN, b"s", None, None, 10, P.SCAN_TYPED)
        self.assertEqual(items, [b"s", 0, -1, b"v"])
        got = c.call(P.SCAN, None, None, None, 10, P.SCAN_TYPED | P.SCAN_KEYS_ONLY)
        self.assertEqual(got[0], P.BAD_ARGS, got)

    def test_lost_update(self):
        """8 native connections each HINCRBY its own field of one hash
        10,000 times, pipelined 500 deep: every field ends at exactly
        10,000 (each change is computed by the committer, not from a copy
        a client read)."""
        errors = []

        def worker(field):
            c = Client(self.srv.port)
            try:
                for _ in range(20):
                    for got in c.pipeline([(P.HINCRBY, b"lost", field, 1)] * 500):
                        if got[0] != P.OK:
                            errors.append(got)
            finally:
                c.close()

        ts = [threading.Thread(target=worker, args=(b"f%d" % i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(errors, [])
        st, pairs = self.c.call(P.HGETALL, b"lost")
        self.assertEqual(sorted(zip(pairs[0::2], pairs[1::2])),
                         [(b"f%d" % i, b"10000") for i in range(8)])

    def test_replies_bounded_by_max_frame(self):
        """A hash larger than a reply frame may be: HGETALL and HGET answer
        REPLY_TOO_LARGE, HSCAN pages it."""
        srv = Server(threads=1, args=("--max-frame-size", "64k", "--max-value-size", "16k"))
        srv.start()
        try:
            c = srv.client()
            for i in range(10):
                self.assertEqual(c.call(P.HSET, b"big", b"f%d" % i, b"x" * 10000), [P.OK, 1])
            self.assertEqual(c.call(P.HGETALL, b"big")[0], P.REPLY_TOO_LARGE)
            self.assertEqual(c.call(P.HGET, b"big", *([b"f1"] * 10))[0], P.REPLY_TOO_LARGE)
            n, start = 0, None
            while True:
                st, items, start = c.call(P.HSCAN, b"big", start, 100)
                self.assertEqual(st, P.OK)
                n += len(items) // 2
                if start is None:
                    break
            self.assertEqual(n, 10)
            c.close()
        finally:
            srv.stop()
            srv.cleanup()


if __name__ == "__main__":
    main()
