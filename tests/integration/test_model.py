#!/usr/bin/env python3
"""test_model.py - a model-based differential test of the write path.

Random PUT (with NX, XX, KEEPTTL, TTLs), DEL, GETDEL, INCR, APPEND, EXPIRE,
MPUT, MDEL and FLUSHALL run against kvd and against an in-memory Python
model of the same store; GET, TTL, EXISTS, SCAN and COUNT are compared with
the model throughout.  The memtable is small (64 KiB) and checkpoints run
every 20 ms, so that the reads go through every layer (active memtable,
frozen memtable, LMDB) and through checkpoints happening under them.
Between rounds kvd is stopped cleanly, or killed with SIGKILL: in both
durability modes a process crash loses nothing acknowledged (the journal
write reached the OS before the reply), so the model must match exactly
after every restart (journal replay above the checkpoint LSN).

The seed is printed; KVD_MODEL_SEED=<seed> replays a run.
"""

import os
import random
import time

from kvdtest import Server, main, unittest
from kvproto import *  # noqa: F401,F403

LONG_TTL = 3600 * 1000
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


class Model:
    """key -> (value, has_expiry); short TTLs are applied as deletes once
    they have passed (the test sleeps past them before reading)."""

    def __init__(self):
        self.kv = {}

    def live(self, k):
        return k in self.kv


def is_int(v):
    try:
        s = v.decode()
    except UnicodeDecodeError:
        return False
    if not s or s[0] in "+ " or (s[0] == "0" and len(s) > 1):
        return False
    if s[0] == "-" and (len(s) == 1 or s[1] == "0"):
        return False
    try:
        n = int(s)
    except ValueError:
        return False
    return INT64_MIN <= n <= INT64_MAX and str(n) == s


class ModelTest(unittest.TestCase):
    ARGS = ["--memtable-size", "64k", "--checkpoint-interval-ms", "20",
            "--journal-segment-size", "1m", "--reaper-interval-ms", "10"]

    def setUp(self):
        seed = int(os.environ.get("KVD_MODEL_SEED", random.randrange(1 << 30)))
        print("KVD_MODEL_SEED=%d" % seed, flush=True)
        self.rnd = random.Random(seed)
        self.m = Model()
        self.short = set()  # keys given a 1 ms TTL (a failure names them)
        self.keys = [b"k%03d" % i for i in range(300)] + \
            [b"p/%02d" % i for i in range(40)]

    def key(self):
        return self.rnd.choice(self.keys)

    def value(self):
        r = self.rnd.random()
        if r < 0.2:
            return str(self.rnd.randrange(-1000, 1000)).encode()
        n = self.rnd.choice([0, 1, 10, 100, 1000, 5000])
        return bytes(self.rnd.randrange(256) for _ in range(min(n, 64))) * \
            (n // 64 + 1) if n else b""

    # ---- one random write, checked against the model ----

    def op_put(self, c):
        k, v = self.key(), self.value()
        flags = self.rnd.choice([0, 0, 0, PUT_NX, PUT_XX, PUT_KEEPTTL])
        ttl = self.rnd.choice([0, 0, LONG_TTL])
        r = c.call(PUT, k, v, ttl, flags)
        live = self.m.live(k)
        if flags == PUT_NX and live:
            self.assertEqual(r[0], EXISTS_ST)
            return
        if flags == PUT_XX and not live:
            self.assertEqual(r[0], NOT_FOUND)
            return
        self.assertEqual(r, [OK])
        exp = ttl != 0
        if flags == PUT_KEEPTTL and live:
            exp = self.m.kv[k][1]
        self.m.kv[k] = (v, exp)

    def op_short_ttl(self, c):
        k = self.key()
        self.assertEqual(c.call(PUT, k, b"short", 1), [OK])
        self.m.kv.pop(k, None)
        self.short.add(k)
        time.sleep(0.005)

    def op_del(self, c):
        k = self.key()
        r = c.call(DEL, k)
        self.assertEqual(r[0], OK if self.m.live(k) else NOT_FOUND)
        self.m.kv.pop(k, None)

    def op_getdel(self, c):
        k = self.key()
        r = c.call(GETDEL, k)
        if self.m.live(k):
            self.assertEqual(r, [OK, self.m.kv.pop(k)[0]])
        else:
            self.assertEqual(r[0], NOT_FOUND)

    def op_incr(self, c):
        k, d = self.key(), self.rnd.choice([1, -1, 7, 1 << 62, -(1 << 62)])
        r = c.call(INCR, k, d)
        old = self.m.kv.get(k, (b"0", False))
        if not is_int(old[0]) or not INT64_MIN <= int(old[0]) + d <= INT64_MAX:
            self.assertEqual(r[0], NOT_INTEGER, (k, old, d, r))
            return
        n = int(old[0]) + d
        self.assertEqual(r, [OK, n])
        self.m.kv[k] = (str(n).encode(), old[1])

    def op_append(self, c):
        k, v = self.key(), self.value()[:100]
        r = c.call(APPEND, k, v)
        old = self.m.kv.get(k, (b"", False))
        self.assertEqual(r, [OK, len(old[0]) + len(v)])
        self.m.kv[k] = (old[0] + v, old[1])

    def op_expire(self, c):
        k, ttl = self.key(), self.rnd.choice([0, LONG_TTL])
        r = c.call(EXPIRE, k, ttl)
        if not self.m.live(k):
            self.assertEqual(r[0], NOT_FOUND)
            return
        self.assertEqual(r[0], OK)
        self.m.kv[k] = (self.m.kv[k][0], ttl != 0)

    def op_mput(self, c):
        ks = self.rnd.sample(self.keys, self.rnd.randrange(1, 20))
        ttl = self.rnd.choice([0, LONG_TTL])
        args = [ttl]
        for k in ks:
            v = self.value()
            args += [k, v]
            self.m.kv[k] = (v, ttl != 0)
        self.assertEqual(c.call(MPUT, *args), [OK])

    def op_mdel(self, c):
        ks = list(set(self.rnd.sample(self.keys, self.rnd.randrange(1, 20))))
        n = sum(1 for k in ks if self.m.live(k))
        self.assertEqual(c.call(MDEL, *ks), [OK, n])
        for k in ks:
            self.m.kv.pop(k, None)

    def op_flushall(self, c):
        self.assertEqual(c.call(FLUSHALL), [OK])
        self.m.kv.clear()

    # ---- reads, compared with the model ----

    def check_key(self, c, k):
        want = self.m.kv.get(k)
        r = c.call(GET, k)
        self.assertEqual(r if want else r[:1], [OK, want[0]] if want else [NOT_FOUND], k)
        r = c.call(TTL, k)
        if want is None:
            self.assertEqual(r[0], NOT_FOUND, k)
        elif want[1]:
            self.assertEqual(r[0], OK)
            self.assertGreater(r[1], 0, k)
        else:
            self.assertEqual(r, [OK, -1], k)

    def check_all(self, c, what):
        for k in self.keys:
            self.check_key(c, k)
        st, items, cur = c.call(SCAN, None, None, None, 10000)
        want = []
        for k in sorted(self.m.kv):
            want += [k, self.m.kv[k][0]]
        self.assertEqual(items, want, what)
        self.assertIsNone(cur)
        self.check_count(c, what)
        np = sum(1 for k in self.m.kv if k.startswith(b"p/"))
        self.assertEqual(c.call(COUNT, b"p/"), [OK, np], what)
        # a bounded SCAN in pages: the same keys, in order
        got, start = [], None
        while True:
            st, items, cur = c.call(SCAN, b"k", start, None, 37, 1)
            got += items
            if cur is None:
                break
            start = cur
        self.assertEqual(got, sorted(k for k in self.m.kv if k.startswith(b"k")),
                         what)

    def spot_check(self, c):
        self.check_key(c, self.key())
        if self.rnd.random() < 0.05:
            st, items, cur = c.call(SCAN, b"p/", None, None, 1000)
            want = []
            for k in sorted(k for k in self.m.kv if k.startswith(b"p/")):
                want += [k, self.m.kv[k][0]]
            self.assertEqual(items, want)
            self.check_count(c, "spot check")

    def check_count(self, c, what):
        """COUNT against the model; a mismatch says which keys SCAN and
        the model disagree on (none: the count itself is off)."""
        got = c.call(COUNT)
        if got == [OK, len(self.m.kv)]:
            return
        keys, cur = [], None
        while True:
            st, items, cur = c.call(SCAN, None, cur, None, 10000, 1)
            keys += items
            if cur is None:
                break
        diff = sorted(set(keys) ^ set(self.m.kv))
        self.fail("%s: COUNT %r, model %d; SCAN has %d keys, differing %r; "
                  "short-TTL keys so far %r" % (what, got, len(self.m.kv),
                                                len(keys), diff, sorted(self.short)))

    def round(self, c, n):
        ops = [(self.op_put, 30), (self.op_del, 10), (self.op_getdel, 3),
               (self.op_incr, 10), (self.op_append, 8), (self.op_expire, 6),
               (self.op_mput, 8), (self.op_mdel, 5), (self.op_short_ttl, 2),
               (self.op_flushall, 0.15)]
        fns = [f for f, _ in ops]
        weights = [w for _, w in ops]
        for _ in range(n):
            self.rnd.choices(fns, weights)[0](c)
            self.spot_check(c)

    def run_model(self, durability):
        with Server(threads=2, durability=durability, args=self.ARGS) as srv:
            for rnd in range(8):
                c = srv.client()
                self.round(c, 500)
                self.check_all(c, "round %d, before restart" % rnd)
                c.close()
                if rnd % 2:
                    srv.kill9()
                    srv.start()
                else:
                    srv.restart()
                c = srv.client()
                self.check_all(c, "round %d, after %s" %
                               (rnd, "kill -9" if rnd % 2 else "restart"))
                c.close()

    def test_sync(self):
        self.run_model("sync")

    def test_async(self):
        self.run_model("async")


if __name__ == "__main__":
    main()
