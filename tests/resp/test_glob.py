"""test_glob.py - glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, PUBSUB
CHANNELS) sent to redis-server 7.0 and to kvd, every answer compared.

kvd's matcher (kvd/resp/resp_glob.c) is not Redis's algorithm: it compiles a
pattern into the runs between its '*'s and places them left to right, so
that no pattern costs more than a bounded amount per key.  What must not
change is the answer.  Compared here:

  - 600 random patterns built from every element and oddity ('*' runs, '?',
    classes with '^', ranges either way round, ']' and '\\' inside them,
    unterminated classes, escapes, a trailing '\\', high bytes) against
    keys holding the same bytes, through KEYS and SCAN MATCH;
  - Redis's two rules of its own: an empty channel matches only the empty
    pattern (so PSUBSCRIBE '*' does not get PUBLISH ''), and a pattern with
    more than 1,000 runs of '*' followed by something matches nothing;
  - patterns far longer than any key (100,000 '*', a 2,000-byte class);
  - PSUBSCRIBE then PUBLISH counts, and PUBSUB CHANNELS with a pattern.
"""

import random
import unittest

import kvdtest
from kvdtest import Server
from resputil import Raw, encode, main, need_redis_70
from test_differential import start_redis

KEYS = [b"a", b"b", b"ab", b"abc", b"aXc", b"a*c", b"a?c", b"a[c", b"a]c",
        b"a\\c", b"a^c", b"a-c", b"-", b"]", b"[", b"\\", b"^", b"*", b"?",
        b"h\xc3\xa9", b"\x00z", b"\xff", b"user:1:name", b"user:22:x",
        b"aaaa", b"aaaaaaaaab", b"abab", b"ba", b"a" * 40 + b"b"]

PIECES = [b"*", b"**", b"?", b"a", b"b", b"c", b"X", b"[a-c]", b"[^a]",
          b"[c-a]", b"[]", b"[^]", b"[a-]", b"[\\]]", b"[]a]", b"\\*",
          b"\\?", b"\\[", b"\\a", b"\\", b"[", b"]", b"^", b"-", b"[ab",
          b"[^", b"\xc3", b"[\x80-\xff]", b":", b"*:*", b"[*]", b"[?]",
          b"a" * 5]


def patterns(n, seed=31):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        out.append(b"".join(rnd.choice(PIECES)
                            for _ in range(rnd.randint(1, 7))))
    return out


class Glob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need_redis_70()
        cls.redis_proc = start_redis(kvdtest.free_port())
        cls.redis_port = int(cls.redis_proc.args[2])
        cls.srv = Server(threads=2, resp=True).start()
        cls.conns = [Raw(cls.srv.resp_port), Raw(cls.redis_port)]

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        cls.redis_proc.terminate()
        cls.redis_proc.wait(10)

    def setUp(self):
        for c in self.conns:
            self.assertEqual(c.call("FLUSHALL"), b"OK")

    def both(self, *args):
        """The same command to kvd and to redis-server: both answers."""
        return [c.call(*args) for c in self.conns]

    def set_keys(self, keys):
        for c in self.conns:
            c.send(b"".join(encode("SET", k, "v") for k in keys))
            for _ in keys:
                self.assertEqual(c.reply(), b"OK")

    def keys_equal(self, pat):
        kvd, redis = self.both("KEYS", pat)
        self.assertEqual(sorted(kvd), sorted(redis), "KEYS %r" % pat[:80])
        return sorted(kvd)

    def test_random_patterns(self):
        self.set_keys(KEYS)
        pats = patterns(600)
        for p in pats:
            self.keys_equal(p)
        for p in pats[:100]:  # SCAN MATCH goes through the same matcher
            kvd, redis = self.both("SCAN", 0, "MATCH", p, "COUNT", 1000)
            self.assertEqual(sorted(kvd[1]), sorted(redis[1]), p)

    def subscribed(self, chans):
        """A connection to each server subscribed to chans (closed at the
        end of the test)."""
        subs = [Raw(self.srv.resp_port), Raw(self.redis_port)]
        for s in subs:
            self.addCleanup(s.close)
            s.send(encode("SUBSCRIBE", *chans))
            for _ in chans:
                self.assertEqual(s.reply()[0], b"subscribe")
        return subs

    def channels_equal(self, pat):
        kvd, redis = self.both("PUBSUB", "CHANNELS", pat)
        self.assertEqual(sorted(kvd), sorted(redis), "CHANNELS %r" % pat[:80])
        return sorted(kvd)

    def test_nesting_limit(self):
        """Redis gives up past 1,000 runs of '*' followed by something:
        such a pattern matches nothing, whatever the subject (channels
        here: keys are too short to need 1,001 bytes)."""
        self.subscribed([b"a" * 2000, b"a" * 2002])
        self.assertEqual(len(self.channels_equal(b"*a" * 1000)), 2)
        self.assertEqual(self.channels_equal(b"*a" * 1001), [])
        self.assertEqual(self.channels_equal(b"*a" * 1001 + b"*"), [])
        self.assertEqual(len(self.channels_equal(b"*a" * 999 + b"*")), 2)

    def test_long_patterns(self):
        self.set_keys([b"ax", b"x", b"abc", b"a[b", b"k" * 500 + b"x"])
        self.assertEqual(self.keys_equal(b"*" * 100000 + b"x"),
                         [b"ax", b"k" * 500 + b"x", b"x"])
        self.keys_equal(b"*" * 50000 + b"[a-z]" + b"*" * 50000 + b"?")
        self.keys_equal(b"a[" + b"xyzb" * 500 + b"]*")
        self.keys_equal(b"*" + b"k" * 400 + b"?" + b"k" * 98 + b"x")
        self.keys_equal(b"*" + b"k" * 200 + b"*" + b"k" * 200 + b"*x")

    def test_publish_counts(self):
        """PSUBSCRIBE the same patterns on both, then PUBLISH: every count
        the same, the empty channel included ('*' does not match it)."""
        pats = [b"*", b"**", b"", b"?*", b"*?", b"[", b"\\", b"a*", b"*a*",
                b"[^a]", b"*\\*", b"[]", b"[^]*"] + patterns(60, seed=7)
        for s in (Raw(self.srv.resp_port), Raw(self.redis_port)):
            self.addCleanup(s.close)
            s.send(encode("PSUBSCRIBE", *pats))
            for _ in pats:
                self.assertEqual(s.reply()[0], b"psubscribe")
        for ch in [b"", b"a" * 1000] + KEYS:
            kvd, redis = self.both("PUBLISH", ch, "m")
            self.assertEqual(kvd, redis, "PUBLISH %r" % ch[:80])

    def test_pubsub_channels(self):
        self.subscribed([b""] + KEYS)
        for p in [b"*", b"**", b"", b"?"] + patterns(100, seed=5):
            self.channels_equal(p)
        kvd, redis = self.both("PUBSUB", "CHANNELS")
        self.assertEqual(sorted(kvd), sorted(redis))


if __name__ == "__main__":
    main()
