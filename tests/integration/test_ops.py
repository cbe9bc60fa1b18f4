"""test_ops.py - every native operation and every error it can answer."""

import struct
import time
import unittest

from kvdtest import *  # noqa: F401,F403


class Ops(ServerCase):
    SERVER = {"threads": 2, "args": ["--max-value-size", "1m", "--max-frame-size", "2m"]}

    def test_hello(self):
        st, info = self.c.call(HELLO, 1)
        self.assertEqual(st, OK)
        # a version 1 client is answered; the server says it speaks 2
        self.assertEqual(info[b"proto"], 2)
        self.assertEqual(self.c.call(HELLO, 2), [OK, info])
        self.assertEqual(info[b"shards"], 2)
        self.assertEqual(info[b"max_key"], 511)
        self.assertEqual(info[b"max_value"], 1 << 20)
        self.assertEqual(info[b"max_frame"], 2 << 20)
        self.assertEqual(self.c.call(HELLO, 3)[0], BAD_VERSION)
        self.assertEqual(self.c.call(HELLO)[0], OK)

    def test_ping(self):
        self.assertEqual(self.c.call(PING), [OK])
        self.assertEqual(self.c.call(PING, b"abc"), [OK, b"abc"])
        self.assertEqual(self.c.call(PING, 5)[0], BAD_ARGS)

    def test_put_get_del(self):
        self.assertEqual(self.c.call(GET, b"k"), [NOT_FOUND])
        self.assertEqual(self.c.call(PUT, b"k", b"v"), [OK])
        self.assertEqual(self.c.call(GET, b"k"), [OK, b"v"])
        self.assertEqual(self.c.call(PUT, b"k", b""), [OK])
        self.assertEqual(self.c.call(GET, b"k"), [OK, b""])
        self.assertEqual(self.c.call(DEL, b"k"), [OK])
        self.assertEqual(self.c.call(DEL, b"k"), [NOT_FOUND])
        self.assertEqual(self.c.call(GET, b"k"), [NOT_FOUND])

    def test_binary_and_str_keys(self):
        key = bytes(range(256))[:200]
        val = bytes(range(256)) * 10
        self.assertEqual(self.c.call(PUT, key, val), [OK])
        self.assertEqual(self.c.call(GET, key), [OK, val])
        # msgpack str is accepted as well as bin
        self.assertEqual(self.c.call(PUT, "text", "value"), [OK])
        self.assertEqual(self.c.call(GET, b"text"), [OK, b"value"])

    def test_put_flags(self):
        self.assertEqual(self.c.call(PUT, b"f", b"1", 0, PUT_XX), [NOT_FOUND])
        self.assertEqual(self.c.call(GET, b"f"), [NOT_FOUND])
        self.assertEqual(self.c.call(PUT, b"f", b"1", 0, PUT_NX), [OK])
        self.assertEqual(self.c.call(PUT, b"f", b"2", 0, PUT_NX), [EXISTS_ST])
        self.assertEqual(self.c.call(GET, b"f"), [OK, b"1"])
        self.assertEqual(self.c.call(PUT, b"f", b"3", 0, PUT_XX), [OK])
        self.assertEqual(self.c.call(GET, b"f"), [OK, b"3"])
        self.assertEqual(self.c.call(PUT, b"f", b"4", 0, PUT_NX | PUT_XX)[0], BAD_ARGS)
        self.assertEqual(self.c.call(PUT, b"f", b"4", 0, 64)[0], BAD_ARGS)

    def test_ttl_expiry(self):
        self.assertEqual(self.c.call(PUT, b"t", b"v", 300), [OK])
        self.assertEqual(self.c.call(PUT, b"p", b"v"), [OK])
        st, ttl = self.c.call(TTL, b"t")
        self.assertEqual(st, OK)
        self.assertTrue(0 < ttl <= 300, ttl)
        self.assertEqual(self.c.call(TTL, b"p"), [OK, -1])
        self.assertEqual(self.c.call(TTL, b"nope"), [NOT_FOUND])
        self.assertEqual(self.c.call(COUNT), [OK, 2])
        # invisible to every read, before and after the reaper runs
        self.wait_for(lambda: self.c.call(GET, b"t") == [NOT_FOUND], "t never expired")
        self.assertEqual(self.c.call(EXISTS, b"t", b"p"), [OK, 1])
        self.assertEqual(self.c.call(MGET, b"t", b"p"), [OK, None, b"v"])
        st, items, cur = self.c.call(SCAN, b"", None, None, 100)
        self.assertEqual(items, [b"p", b"v"])
        self.assertEqual(self.c.call(COUNT), [OK, 1])
        self.assertEqual(self.c.call(TTL, b"t"), [NOT_FOUND])
        # an expired key counts as absent for NX
        self.assertEqual(self.c.call(PUT, b"t", b"new", 0, PUT_NX), [OK])
        self.assertEqual(self.c.call(GET, b"t"), [OK, b"new"])
        self.assertEqual(self.c.call(TTL, b"t"), [OK, -1])

    def test_reaper_reclaims(self):
        pairs = []
        for i in range(200):
            pairs += [b"exp%03d" % i, b"x" * 100]
        self.assertEqual(self.c.call(MPUT, 100, *pairs), [OK])
        before = self.c.call(STATS)[1]
        self.assertEqual(sum(s[b"expiring"] for s in before[b"shards"]), 200)
        deadline = time.time() + 10
        while time.time() < deadline:
            st = self.c.call(STATS)[1]
            if sum(s[b"entries"] for s in st[b"shards"]) == 0:
                break
            time.sleep(0.1)
        st = self.c.call(STATS)[1]
        self.assertEqual(sum(s[b"entries"] for s in st[b"shards"]), 0)
        self.assertEqual(sum(s[b"expiring"] for s in st[b"shards"]), 0)
        self.assertGreaterEqual(st[b"expired_reaped"], 200)

    def wait_for(self, cond, what, timeout=30):
        deadline = time.time() + timeout
        while not cond():
            self.assertLess(time.time(), deadline, what)
            time.sleep(0.02)

    def expiring(self):
        return [s[b"expiring"] for s in self.c.call(STATS)[1][b"shards"]]

    def shard_of(self, key):
        """The shard whose expiry index key joins (then the key goes).
        Each call uses a TTL of its own: the index is keyed by (expiry,
        key), so a second PUT of the same key within the same millisecond
        would add no entry."""
        self.ttl_seq = getattr(self, "ttl_seq", 0) + 1000
        before = self.expiring()
        self.assertEqual(self.c.call(PUT, key, b"", (1 << 40) + self.ttl_seq),
                         [OK])
        grew = [i for i, (a, b) in enumerate(zip(before, self.expiring())) if b > a]
        self.assertEqual(self.c.call(DEL, key), [OK])
        return grew[0]

    def test_overwrite_clears_ttl_and_keepttl(self):
        # a key of o's shard expiring with o's first TTL: once the reaper
        # has deleted it, it has been past o's stale index entry too
        home = self.shard_of(b"o")
        probe = next(k for k in (b"probe%d" % i for i in range(1000))
                     if self.shard_of(k) == home)
        reaped = self.c.call(STATS)[1][b"expired_reaped"]
        self.c.call(PUT, b"o", b"1", 200)
        self.c.call(PUT, probe, b"p", 200)
        self.assertEqual(self.c.call(PUT, b"o", b"2"), [OK])
        self.assertEqual(self.c.call(TTL, b"o"), [OK, -1])
        self.c.call(PUT, b"o", b"3", 100000)
        self.assertEqual(self.c.call(PUT, b"o", b"4", 0, PUT_KEEPTTL), [OK])
        st, ttl = self.c.call(TTL, b"o")
        self.assertTrue(90000 < ttl <= 100000)
        # the stale index entry of the first PUT must not delete it
        self.wait_for(lambda: self.c.call(STATS)[1][b"expired_reaped"] > reaped,
                      "the reaper never deleted %r" % probe)
        self.assertEqual(self.c.call(GET, probe), [NOT_FOUND])
        self.assertEqual(self.c.call(GET, b"o"), [OK, b"4"])

    def test_expire(self):
        self.assertEqual(self.c.call(EXPIRE, b"e", 100), [NOT_FOUND])
        self.c.call(PUT, b"e", b"v")
        self.assertEqual(self.c.call(EXPIRE, b"e", 100000), [OK])
        self.assertGreater(self.c.call(TTL, b"e")[1], 90000)
        self.assertEqual(self.c.call(EXPIRE, b"e", 0), [OK])
        self.assertEqual(self.c.call(TTL, b"e"), [OK, -1])
        self.assertEqual(self.c.call(GET, b"e"), [OK, b"v"])

    def test_mput_mget_mdel_exists(self):
        pairs = []
        for i in range(100):
            pairs += [b"m%02d" % i, b"val%d" % i]
        self.assertEqual(self.c.call(MPUT, 0, *pairs), [OK])
        keys = [b"m%02d" % i for i in range(100)] + [b"absent"]
        r = self.c.call(MGET, *keys)
        self.assertEqual(r[0], OK)
        self.assertEqual(r[1:], [b"val%d" % i for i in range(100)] + [None])
        self.assertEqual(self.c.call(EXISTS, *keys), [OK, 100])
        self.assertEqual(self.c.call(MDEL, *keys[:50], b"absent"), [OK, 50])
        self.assertEqual(self.c.call(EXISTS, *keys), [OK, 50])
        self.assertEqual(self.c.call(COUNT), [OK, 50])
        # odd pair count, bad key type: refused whole, nothing applied
        self.assertEqual(self.c.call(MPUT, 0, b"a", b"1", b"b")[0], BAD_ARGS)
        self.assertEqual(self.c.call(MPUT, 0, b"a", b"1", 7, b"2")[0], BAD_ARGS)
        self.assertEqual(self.c.call(GET, b"a"), [NOT_FOUND])
        self.assertEqual(self.c.call(MPUT, 0, b"a", b"1", b"k" * 512, b"2")[0], KEY_TOO_LARGE)
        self.assertEqual(self.c.call(GET, b"a"), [NOT_FOUND])

    def test_scan(self):
        pairs = []
        for i in range(250):
            pairs += [b"user:%04d" % i, b"u%d" % i]
        pairs += [b"other", b"o", b"user;", b"x", b"usea", b"y"]
        self.c.call(MPUT, 0, *pairs)
        got, cur = [], None
        while True:
            st, items, cur = self.c.call(SCAN, b"user:", cur, None, 64)
            self.assertEqual(st, OK)
            self.assertLessEqual(len(items), 128)
            got += items[0::2]
            if cur is None:
                break
        self.assertEqual(got, [b"user:%04d" % i for i in range(250)])
        # range: [user:0010, user:0020)
        st, items, cur = self.c.call(SCAN, b"", b"user:0010", b"user:0020", 1000)
        self.assertEqual(items[0::2], [b"user:%04d" % i for i in range(10, 20)])
        self.assertEqual(items[1::2], [b"u%d" % i for i in range(10, 20)])
        self.assertIsNone(cur)
        # keys only
        st, items, cur = self.c.call(SCAN, b"user:02", None, None, 1000, 1)
        self.assertEqual(items, [b"user:%04d" % i for i in range(200, 250)])
        # whole key space in order, across both shards
        st, items, cur = self.c.call(SCAN, b"", None, None, 10000, 1)
        self.assertEqual(items, sorted(items))
        self.assertEqual(len(items), 253)
        self.assertEqual(self.c.call(COUNT, b"user:"), [OK, 250])
        self.assertEqual(self.c.call(COUNT, b"user"), [OK, 251])
        self.assertEqual(self.c.call(SCAN, b"", None, None, 0)[0], BAD_ARGS)
        self.assertEqual(self.c.call(SCAN, b"", None, None, 5, 8)[0], BAD_ARGS)
        self.assertEqual(self.c.call(SCAN, 5)[0], BAD_ARGS)

    def test_incr_append_getdel(self):
        self.assertEqual(self.c.call(INCR, b"n", 5), [OK, 5])
        self.assertEqual(self.c.call(INCR, b"n", -7), [OK, -2])
        self.assertEqual(self.c.call(GET, b"n"), [OK, b"-2"])
        self.c.call(PUT, b"s", b"abc")
        self.assertEqual(self.c.call(INCR, b"s", 1)[0], NOT_INTEGER)
        for v in (b"\t9", b"\r9", b"+9", b"-0"):  # as Redis: no integer
            self.c.call(PUT, b"w", v)
            self.assertEqual(self.c.call(INCR, b"w", 1)[0], NOT_INTEGER, v)
        self.c.call(PUT, b"big", b"9223372036854775807")
        self.assertEqual(self.c.call(INCR, b"big", 1)[0], NOT_INTEGER)
        self.assertEqual(self.c.call(GET, b"big"), [OK, b"9223372036854775807"])
        self.assertEqual(self.c.call(APPEND, b"s", b"def"), [OK, 6])
        self.assertEqual(self.c.call(APPEND, b"new", b"xy"), [OK, 2])
        self.assertEqual(self.c.call(GET, b"s"), [OK, b"abcdef"])
        self.assertEqual(self.c.call(GETDEL, b"s"), [OK, b"abcdef"])
        self.assertEqual(self.c.call(GETDEL, b"s"), [NOT_FOUND])
        self.assertEqual(self.c.call(GET, b"s"), [NOT_FOUND])

    def test_limits(self):
        self.assertEqual(self.c.call(PUT, b"k" * 511, b"v"), [OK])
        self.assertEqual(self.c.call(GET, b"k" * 511), [OK, b"v"])
        self.assertEqual(self.c.call(PUT, b"k" * 512, b"v")[0], KEY_TOO_LARGE)
        self.assertEqual(self.c.call(GET, b"k" * 512)[0], KEY_TOO_LARGE)
        self.assertEqual(self.c.call(PUT, b"", b"v")[0], BAD_ARGS)
        big = b"x" * (1 << 20)
        self.assertEqual(self.c.call(PUT, b"big", big), [OK])
        self.assertEqual(self.c.call(GET, b"big"), [OK, big])
        self.assertEqual(self.c.call(PUT, b"big2", big + b"x")[0], VALUE_TOO_LARGE)
        self.assertEqual(self.c.call(APPEND, b"big", b"x")[0], VALUE_TOO_LARGE)
        self.assertEqual(self.c.call(GET, b"big"), [OK, big])
        # three 1 MiB values exceed the 2 MiB frame limit as a reply
        self.c.call(PUT, b"big2", big)
        self.c.call(PUT, b"big3", big)
        self.assertEqual(self.c.call(MGET, b"big", b"big2", b"big3")[0], REPLY_TOO_LARGE)
        self.assertEqual(self.c.call(PING), [OK])

    def test_bad_requests_keep_connection(self):
        c = self.c
        cases = [
            (b"\xc1", MALFORMED),                  # never-used byte
            (b"\x91", MALFORMED),                  # array missing its item
            (b"\x90", MALFORMED),                  # empty array
            (b"\x05", MALFORMED),                  # not an array
            (b"\x92\x03\xa1k\x00", MALFORMED),     # trailing byte
            (b"\x91\x63", UNKNOWN_OP),             # op 99
            (b"\x91\xa3GET", MALFORMED),           # op as a string
            (b"\x92\x03\x91\xa1k", BAD_ARGS),      # nested array argument
            (b"\x92\x03\x80", BAD_ARGS),           # map argument
            (b"\x92\x03\xcb" + b"\0" * 8, BAD_ARGS),  # float key
            (b"\x92\x03\xc6\xff\xff\xff\xff", MALFORMED),  # bin32 of 2^32-1
            (b"\x92\x03\xc6\x80\x00\x00\x00", MALFORMED),  # bin32 of 2^31
            (b"\xdd\xff\xff\xff\xff\x03", MALFORMED),     # array32 of 2^32-1
            (b"\x93\x03\xa1k\xa1v", BAD_ARGS),      # GET with two arguments
            (b"\x91\x03", BAD_ARGS),                # GET with none
        ]
        for body, want in cases:
            c.send_raw(struct.pack(">I", len(body)) + body)
            r = c.read_reply()
            self.assertEqual(r[0], want, (body, r))
            self.assertIsInstance(r[1], bytes)  # an error carries its text
            self.assertEqual(c.call(PING), [OK])
        # nesting bomb: 100,000 nested arrays as the key
        body = b"\x92\x03" + b"\x91" * 100000 + b"\xa1k"
        c.send_raw(struct.pack(">I", len(body)) + body)
        self.assertEqual(c.read_reply()[0], BAD_ARGS)
        self.assertEqual(c.call(PING), [OK])

    def test_oversize_frame_closes(self):
        for n in (2**31, 2**32 - 1, (2 << 20) + 1):
            c = self.srv.client()
            c.send_raw(struct.pack(">I", n) + b"\x91\x02")
            r = c.read_reply()
            self.assertEqual(r[0], FRAME_TOO_LARGE)
            self.assertTrue(c.closed_by_peer())
            c.close()
        self.assertEqual(self.c.call(PING), [OK])

    def test_truncated_frame_then_close(self):
        c = self.srv.client()
        c.send_raw(struct.pack(">I", 100) + b"\x92\x03")
        c.sock.shutdown(1)
        self.assertTrue(c.closed_by_peer())
        c.close()
        self.assertEqual(self.c.call(PING), [OK])

    def test_stats(self):
        self.c.call(PUT, b"a", b"1")
        self.c.call(GET, b"a")
        self.c.call(GET, b"zz")
        st, s = self.c.call(STATS)
        self.assertEqual(st, OK)
        for k in (b"server", b"uptime_ms", b"connections", b"bytes_in", b"bytes_out",
                  b"commits", b"writes", b"avg_batch", b"ops", b"shards"):
            self.assertIn(k, s)
        self.assertGreaterEqual(s[b"ops"][b"GET"][b"calls"], 2)
        self.assertGreaterEqual(s[b"ops"][b"PUT"][b"calls"], 1)
        self.assertEqual(len(s[b"shards"]), 2)
        self.assertGreaterEqual(s[b"connections"], 1)
        self.assertGreaterEqual(s[b"commits"], 1)

    def test_auth_without_password(self):
        self.assertEqual(self.c.call(AUTH, b"pw")[0] >= 10, True)


if __name__ == "__main__":
    main()
