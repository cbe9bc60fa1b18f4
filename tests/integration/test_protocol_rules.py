"""test_protocol_rules.py - the rules docs/protocol.md states beyond the
op table, each checked against a live kvd:

- an optional trailing argument may be omitted or sent as nil, the same
  for every op that has one (HELLO's version, PING's payload, PUT's ttl_ms
  and flags, SCAN's five, COUNT's prefix);
- an empty key is BAD_ARGS in every op that takes keys;
- KEEPTTL wins over ttl_ms on a key that exists (its expiry, or none, is
  kept); on a new key ttl_ms applies;
- repeated keys: EXISTS counts each argument, MDEL counts each key
  deleted once, MPUT stores the last value given for a key, MGET answers
  every position.
"""

import unittest

import kvdtest
from kvdtest import ServerCase
from kvproto import *  # noqa: F401,F403

KEEPTTL = 4


class OptionalArguments(ServerCase):
    def test_nil_is_omitted(self):
        c = self.c
        hello = c.call(HELLO)
        self.assertEqual(hello[0], OK)
        self.assertEqual(c.call(HELLO, None), hello)
        self.assertEqual(c.call(HELLO, 3)[0], BAD_VERSION)
        self.assertEqual(c.call(PING), [OK])
        self.assertEqual(c.call(PING, None), [OK])
        self.assertEqual(c.call(PING, b"p"), [OK, b"p"])
        self.assertEqual(c.call(PUT, b"k", b"v", None), [OK])
        self.assertEqual(c.call(PUT, b"k", b"v", None, None), [OK])
        self.assertEqual(c.call(TTL, b"k"), [OK, -1])
        self.assertEqual(c.call(SCAN, None, None, None, None, None), c.call(SCAN))
        self.assertEqual(c.call(COUNT, None), [OK, 1])


class Keys(ServerCase):
    def test_empty_key(self):
        c = self.c
        for req in ([GET, b""], [PUT, b"", b"v"], [DEL, b""], [MGET, b"a", b""],
                    [MPUT, 0, b"a", b"1", b"", b"2"], [MDEL, b""], [EXISTS, b""],
                    [INCR, b"", 1], [APPEND, b"", b"x"], [EXPIRE, b"", 10],
                    [TTL, b""], [GETDEL, b""]):
            self.assertEqual(c.call(*req)[0], BAD_ARGS, req)
        self.assertEqual(c.call(GET, b"a"), [NOT_FOUND])  # MPUT did nothing

    def test_keepttl_wins(self):
        c = self.c
        self.assertEqual(c.call(PUT, b"t", b"v", 100000), [OK])
        self.assertEqual(c.call(PUT, b"t", b"v2", 5000, KEEPTTL), [OK])
        self.assertGreater(c.call(TTL, b"t")[1], 5000)  # the old expiry
        self.assertEqual(c.call(GET, b"t"), [OK, b"v2"])
        self.assertEqual(c.call(PUT, b"p", b"v"), [OK])
        self.assertEqual(c.call(PUT, b"p", b"v2", 5000, KEEPTTL), [OK])
        self.assertEqual(c.call(TTL, b"p"), [OK, -1])  # kept: none
        self.assertEqual(c.call(PUT, b"n", b"v", 5000, KEEPTTL), [OK])
        ttl = c.call(TTL, b"n")[1]
        self.assertTrue(0 < ttl <= 5000, ttl)  # a new key: ttl_ms applies

    def test_repeated_keys(self):
        c = self.c
        self.assertEqual(c.call(PUT, b"a", b"1"), [OK])
        self.assertEqual(c.call(EXISTS, b"a", b"a", b"zz"), [OK, 2])
        self.assertEqual(c.call(MGET, b"a", b"a"), [OK, b"1", b"1"])
        self.assertEqual(c.call(MDEL, b"a", b"a"), [OK, 1])
        self.assertEqual(c.call(MPUT, 0, b"y", b"1", b"z", b"2", b"y", b"3"), [OK])
        self.assertEqual(c.call(GET, b"y"), [OK, b"3"])


if __name__ == "__main__":
    kvdtest.main()
