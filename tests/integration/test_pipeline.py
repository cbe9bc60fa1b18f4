"""test_pipeline.py - replies in request order, and a connection reads its own writes.

1,000 pipelined mixed requests in one write: every reply matches a model
that applies the requests in order, so a GET after a PUT of the same key on
the same connection always sees it, whatever shard or commit it went to.
"""

import os
import random
import shutil
import socket
import tempfile
import time
import unittest

from kvdtest import *  # noqa: F401,F403


class Pipeline(unittest.TestCase):
    def run_mixed(self, srv, seed, n=1000):
        rnd = random.Random(seed)
        c = srv.client()
        model, reqs, want = {}, [], []
        prefix = b"p%d:" % seed
        keys = [prefix + b"%03d" % i for i in range(40)]
        for _ in range(n):
            k = rnd.choice(keys)
            op = rnd.random()
            if op < 0.35:
                v = b"v%d" % rnd.randrange(10**6)
                reqs.append((PUT, k, v))
                want.append([OK])
                model[k] = v
            elif op < 0.7:
                reqs.append((GET, k))
                want.append([OK, model[k]] if k in model else [NOT_FOUND])
            elif op < 0.8:
                reqs.append((DEL, k))
                want.append([OK] if k in model else [NOT_FOUND])
                model.pop(k, None)
            elif op < 0.88:
                ks = rnd.sample(keys, 3)
                reqs.append((MGET,) + tuple(ks))
                want.append([OK] + [model.get(x) for x in ks])
            elif op < 0.94:
                ks = rnd.sample(keys, 2)
                vs = [b"m%d" % rnd.randrange(1000) for _ in ks]
                reqs.append((MPUT, 0, ks[0], vs[0], ks[1], vs[1]))
                want.append([OK])
                model[ks[0]], model[ks[1]] = vs
            elif op < 0.96:
                ks = rnd.sample(keys, 4)
                reqs.append((EXISTS,) + tuple(ks))
                want.append([OK, sum(x in model for x in ks)])
            elif op < 0.97:
                reqs.append((TTL, k))
                want.append([OK, -1] if k in model else [NOT_FOUND])
            elif op < 0.98:
                reqs.append((COUNT, prefix))
                want.append([OK, len(model)])
            elif op < 0.995:
                reqs.append((SCAN, prefix, None, None, 1000))
                want.append([OK, [x for k2 in sorted(model)
                                  for x in (k2, model[k2])], None])
            else:
                reqs.append((FLUSHALL,))
                want.append([OK])
                model.clear()
        got = c.pipeline(reqs)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g, w, "request %d %r" % (i, reqs[i]))
        c.close()

    def test_mixed_pipelines(self):
        for durability in ("sync", "async"):
            with Server(threads=2, durability=durability) as srv:
                for seed in range(3):
                    self.run_mixed(srv, seed)

    def test_one_byte_at_a_time(self):
        with Server(threads=1) as srv:
            c = srv.client()
            data = frame([PUT, b"slow", b"v"]) + frame([GET, b"slow"])
            for b in data:
                c.send_raw(bytes([b]))
            self.assertEqual(c.read_reply(), [OK])
            self.assertEqual(c.read_reply(), [OK, b"v"])

    def test_large_pipeline_backpressure(self):
        # 200 MB of GET replies asked for in 40 KB of requests while the
        # client does not read: kvd must stop reading the connection once
        # max-output (1 MiB) of replies is pending, not build them all.
        # Measured in kvd's own memory (/proc/PID/status) and in how many
        # of the GETs it has run; a kvd that ignored max-output would run
        # all 2,000 and hold about 200 MB.
        n, size = 2000, 100000
        with Server(threads=1, args=["--max-output", "1m"]) as srv:
            c = srv.client()
            watch = srv.client()
            self.assertEqual(c.call(PUT, b"big", b"x" * size), [OK])
            self.assertEqual(c.call(GET, b"big"), [OK, b"x" * size])
            # What the kernel may hold for us is kept small and constant.
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            gets0 = get_calls(watch)
            rss0 = proc_kib(srv, "RssAnon")
            hwm0 = proc_kib(srv, "VmHWM")
            c.send_raw(frame([GET, b"big"]) * n)
            ran = settled(lambda: get_calls(watch) - gets0)
            rss = proc_kib(srv, "RssAnon") - rss0
            hwm = proc_kib(srv, "VmHWM") - hwm0
            self.assertLess(rss, 32 << 10, "RssAnon grew %d KiB" % rss)
            self.assertLess(hwm, 32 << 10, "VmHWM grew %d KiB" % hwm)
            self.assertLess(ran, n // 2, "kvd kept reading the connection")
            # Once the client reads, every GET is answered, in order.
            for _ in range(n):
                self.assertEqual(c.read_reply(), [OK, b"x" * size])
            self.assertEqual(get_calls(watch) - gets0, n)
            c.close()
            watch.close()


def proc_kib(srv, field):
    """A field of kvd's /proc/PID/status, in KiB."""
    with open("/proc/%d/status" % srv.proc.pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def get_calls(c):
    st = c.call(STATS)
    assert st[0] == OK, st
    return st[1][b"ops"].get(b"GET", {}).get(b"calls", 0)


def settled(probe, still=1.0, limit=30.0):
    """probe()'s value once it has not changed for still seconds (a server
    that stopped reading); fails the test past limit seconds."""
    end = time.monotonic() + limit
    last, since = probe(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        v = probe()
        if v != last:
            last, since = v, time.monotonic()
        elif time.monotonic() - since >= still:
            return v
    raise AssertionError("still changing after %.0f s: %r" % (limit, last))


# The reads, each as a request on its round's keys: prefix, k, k2, n.
READERS = [
    ("GET", lambda p, k, k2, n: (GET, k)),
    ("MGET", lambda p, k, k2, n: (MGET, k2, k, n)),
    ("EXISTS", lambda p, k, k2, n: (EXISTS, k, k2, k, n)),
    ("TTL", lambda p, k, k2, n: (TTL, k)),
    ("SCAN", lambda p, k, k2, n: (SCAN, p, None, None, 1000)),
    ("SCAN keys", lambda p, k, k2, n: (SCAN, p, None, None, 1000,
                                       SCAN_KEYS_ONLY)),
    ("SCAN range", lambda p, k, k2, n: (SCAN, None, p, p + b"\xff", 1000)),
    ("COUNT prefix", lambda p, k, k2, n: (COUNT, p)),
    ("COUNT", lambda p, k, k2, n: (COUNT,)),
]


def writes(k, k2, n):
    """Writes of every kind, each changing what some read sees."""
    return [(PUT, k, b"v1"), (APPEND, k, b"+"), (EXPIRE, k, 100000),
            (PUT, k, b"v2"), (INCR, n, 7), (GETDEL, k),
            (MPUT, 0, k, b"m", k2, b"m2"), (INCR, n, -2), (DEL, k),
            (EXPIRE, k2, 100000), (MDEL, k, k2), (PUT, k, b"v3", 100000),
            (DEL, n), (FLUSHALL,), (PUT, k2, b"z")]


def apply(model, req):
    """The reply to a write, as the model of the store (key -> [value,
    has expiry]) gives it; updates the model."""
    op, a = req[0], req[1:]
    if op == PUT:
        model[a[0]] = [a[1], len(a) > 2 and a[2] > 0]
        return [OK]
    if op == APPEND:
        old = model.setdefault(a[0], [b"", False])
        old[0] += a[1]
        return [OK, len(old[0])]
    if op == EXPIRE:
        if a[0] not in model:
            return [NOT_FOUND]
        model[a[0]][1] = a[1] > 0
        return [OK]
    if op == INCR:
        old = model.setdefault(a[0], [b"0", False])
        old[0] = b"%d" % (int(old[0]) + a[1])
        return [OK, int(old[0])]
    if op == GETDEL:
        return [OK, model.pop(a[0])[0]] if a[0] in model else [NOT_FOUND]
    if op == DEL:
        return [OK] if model.pop(a[0], None) else [NOT_FOUND]
    if op == MPUT:
        for i in range(1, len(a), 2):
            model[a[i]] = [a[i + 1], False]
        return [OK]
    if op == MDEL:
        return [OK, sum(model.pop(x, None) is not None for x in a)]
    assert op == FLUSHALL
    model.clear()
    return [OK]


def expect(model, req):
    """The reply to a read, from the model ("ttl": a positive TTL)."""
    op, a = req[0], req[1:]
    if op == GET:
        return [OK, model[a[0]][0]] if a[0] in model else [NOT_FOUND]
    if op == MGET:
        return [OK] + [model[x][0] if x in model else None for x in a]
    if op == EXISTS:
        return [OK, sum(x in model for x in a)]
    if op == TTL:
        if a[0] not in model:
            return [NOT_FOUND]
        return "ttl" if model[a[0]][1] else [OK, -1]
    if op == COUNT:
        return [OK, sum(x.startswith(a[0]) for x in model) if a else len(model)]
    assert op == SCAN
    pre = a[0] or b""
    keys = sorted(x for x in model if x.startswith(pre) and x >= (a[1] or b"")
                  and (not a[2] or x < a[2]))
    if len(a) > 4 and a[4] & SCAN_KEYS_ONLY:
        return [OK, keys, None]
    return [OK, [x for key in keys for x in (key, model[key][0])], None]


class OwnWrites(ServerCase):
    """Every read, pipelined right behind writes that touch what it reads,
    answers as if those writes had been answered first.  A reply read from
    a snapshot taken while the writes are still being committed would be
    stale: the sync store makes that window wide, and each check runs
    ROUNDS times on fresh keys so that one missed wait is caught."""

    ROUNDS = 10
    # Enough keys to hit every one of a connection's 256 in-flight key
    # slots (conn.h) with near certainty: a slot is missed with
    # probability (255/256)^4096, about 1e-7.
    EVERY_SLOT = 4096

    @classmethod
    def setUpClass(cls):
        cls.bdir = tempfile.mkdtemp(prefix="kvdtest-bk-")
        cls.SERVER = {"threads": 2, "durability": "sync",
                      "args": ["--backup-dir", cls.bdir]}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.bdir, ignore_errors=True)

    def check(self, reqs, want):
        got = self.c.pipeline(reqs)
        for i, (g, w) in enumerate(zip(got, want)):
            if w is not None:
                self.assertEqual(g, w, "request %d %r" % (i, reqs[i]))
        return got

    def test_scan_and_count_see_writes(self):
        total = 0
        for r in range(self.ROUNDS):
            pre = b"sc%02d:" % r
            keys = [pre + b"%03d" % i for i in range(20)]
            reqs = [(PUT, k, b"v" + k) for k in keys]
            want = [[OK]] * len(keys)
            total += len(keys)
            reqs += [(SCAN, pre, None, None, 1000, SCAN_KEYS_ONLY),
                     (COUNT, pre), (COUNT,), (COUNT, None)]
            want += [[OK, keys, None], [OK, 20], [OK, total], [OK, total]]
            # deletes, one of them for a key never written
            reqs += [(MDEL,) + tuple(keys[:10]), (DEL, keys[10]),
                     (DEL, pre + b"none")]
            want += [[OK, 10], [OK], [NOT_FOUND]]
            total -= 11
            reqs += [(SCAN, pre, None, None, 1000, SCAN_KEYS_ONLY),
                     (COUNT, pre), (COUNT,)]
            want += [[OK, keys[11:], None], [OK, 9], [OK, total]]
            # a new value, and keys made by INCR, APPEND and MPUT
            reqs += [(PUT, keys[19], b"new"), (INCR, pre + b"i", 5),
                     (APPEND, pre + b"a", b"xy"),
                     (MPUT, 0, pre + b"m1", b"1", pre + b"m2", b"2"),
                     (GETDEL, keys[11])]
            want += [[OK], [OK, 5], [OK, 2], [OK], [OK, b"v" + keys[11]]]
            total += 4 - 1
            live = {k: b"v" + k for k in keys[12:19]}
            live.update({keys[19]: b"new", pre + b"i": b"5",
                         pre + b"a": b"xy", pre + b"m1": b"1",
                         pre + b"m2": b"2"})
            order = sorted(live)
            items = [x for k in order for x in (k, live[k])]
            reqs += [(SCAN, pre, None, None, 1000), (COUNT, pre), (COUNT,),
                     (SCAN, None, pre, pre + b"\xff", 3)]
            want += [[OK, items, None], [OK, 12], [OK, total],
                     [OK, items[0:6], order[3]]]
            self.check(reqs, want)

    def test_point_reads_see_writes(self):
        for r in range(self.ROUNDS):
            k, j = b"pt%02d:k" % r, b"pt%02d:j" % r
            reqs = [(PUT, k, b"1"), (GET, k), (EXISTS, k, j), (TTL, k),
                    (MGET, j, k),
                    (EXPIRE, k, 100000), (TTL, k),
                    (PUT, k, b"2"), (TTL, k),
                    (INCR, k, 40), (GET, k),
                    (APPEND, j, b"a"), (MGET, k, j), (EXISTS, j, k, j),
                    (DEL, k), (GET, k), (EXISTS, k), (TTL, k),
                    (MGET, k, j),
                    (GETDEL, j), (EXISTS, j, k), (MGET, j),
                    (MPUT, 0, k, b"m", j, b"n"), (MGET, k, j),
                    (EXISTS, k, j, k),
                    (MDEL, k, j), (EXISTS, k, j), (GET, j)]
            want = [[OK], [OK, b"1"], [OK, 1], [OK, -1],
                    [OK, None, b"1"],
                    [OK], None,
                    [OK], [OK, -1],
                    [OK, 42], [OK, b"42"],
                    [OK, 1], [OK, b"42", b"a"], [OK, 3],
                    [OK], [NOT_FOUND], [OK, 0], [NOT_FOUND],
                    [OK, None, b"a"],
                    [OK, b"a"], [OK, 0], [OK, None],
                    [OK], [OK, b"m", b"n"],
                    [OK, 3],
                    [OK, 2], [OK, 0], [NOT_FOUND]]
            got = self.check(reqs, want)
            self.assertEqual(got[6][0], OK)
            self.assertTrue(0 < got[6][1] <= 100000, got[6])

    def test_each_read_right_behind_each_write(self):
        """Each read op directly behind each kind of write, so that no
        earlier read's wait hides a read that did not wait."""
        model = {}
        reqs, want = [], []
        for r, (name, read) in enumerate(READERS):
            pre = b"rw%02d:" % r
            k, k2, n = pre + b"k", pre + b"k2", pre + b"n"
            for w in writes(k, k2, n):
                reqs.append(w)
                want.append(apply(model, w))
                reqs.append(read(pre, k, k2, n))
                want.append(expect(model, reqs[-1]))
        got = self.c.pipeline(reqs)
        for i, (g, w) in enumerate(zip(got, want)):
            if w == "ttl":
                self.assertTrue(g[0] == OK and 0 < g[1] <= 100000,
                                (i, reqs[i - 1], reqs[i], g))
            else:
                self.assertEqual(g, w, (i, reqs[i - 1], reqs[i]))

    def test_slot_count_survives_many_writes(self):
        """A key's in-flight count (conn.h, one of 256 slots) goes back to
        zero after each write, however many came before: 65,535 finished
        writes of k, then 65,536 more in flight with GET k behind them in
        the same send.  A count that kept a remainder per finished write
        would wrap to zero there and let the GET read the old value."""
        k = b"wrap:k"
        old = [x for i in range(65535) for x in (k, b"old%05d" % i)]
        self.assertEqual(self.c.call(MPUT, 0, *old), [OK])
        new = [x for i in range(65536) for x in (k, b"new%05d" % i)]
        got = self.c.pipeline([(MPUT, 0) + tuple(new), (GET, k)])
        self.assertEqual(got, [[OK], [OK, b"new65535"]])

    def test_flushall_reaches_every_slot(self):
        """A read of any key right behind FLUSHALL waits for it, whichever
        of the connection's 256 in-flight key slots (conn.h) the key is
        in.  Each segment drains its PUT (GET k waits for it), so only the
        FLUSHALL is in flight when the last read arrives; 2048 keys leave
        a slot untried with probability about 256 * e^-8."""
        with Server(threads=2, durability="async") as srv:
            c = srv.client()
            readers = [lambda k: (GET, k), lambda k: (EXISTS, k),
                       lambda k: (MGET, k), lambda k: (TTL, k),
                       lambda k: (COUNT,), lambda k: (SCAN, k)]
            answers = [[NOT_FOUND], [OK, 0], [OK, None], [NOT_FOUND],
                       [OK, 0], [OK, [], None]]
            reqs, want = [], []
            for i in range(2048):
                k = b"fl:%05d" % i
                j = i % len(readers)
                reqs += [(PUT, k, b"v"), (GET, k), (FLUSHALL,), readers[j](k)]
                want += [[OK], [OK, b"v"], [OK], answers[j]]
            # and a write after the flush survives it
            reqs += [(PUT, b"fl:x", b"after"), (GET, b"fl:x"), (COUNT,)]
            want += [[OK], [OK, b"after"], [OK, 1]]
            got = c.pipeline(reqs)
            for i, (g, w) in enumerate(zip(got, want)):
                self.assertEqual(g, w, (i, reqs[i]))
            c.close()

    def test_backup_sees_writes(self):
        # A large MPUT last keeps a commit in flight when BACKUP arrives.
        for r in range(5):
            self.assertEqual(self.c.call(FLUSHALL), [OK])
            keys = [b"bk%d:%03d" % (r, i) for i in range(50 + r)]
            bulk = [x for i in range(1000) for x in (b"bm%d:%04d" % (r, i), b"m")]
            reqs = [(PUT, k, b"v") for k in keys] + [
                (DEL, keys[0]), (MPUT, 0) + tuple(bulk), (BACKUP, b"b%d" % r)]
            got = self.c.pipeline(reqs)
            self.assertEqual(got[:-1], [[OK]] * (len(keys) + 2))
            self.assertEqual(got[-1], [OK, len(keys) - 1 + 1000], got[-1])
        # the copy holds the pipelined writes themselves
        with Server(threads=2, data_dir=os.path.join(self.bdir, "b4")) as bk:
            c = bk.client()
            self.assertEqual(c.call(COUNT), [OK, 1053])
            self.assertEqual(c.call(GET, b"bk4:000"), [NOT_FOUND])
            self.assertEqual(c.call(GET, b"bk4:053"), [OK, b"v"])
            self.assertEqual(c.call(GET, b"bm4:0999"), [OK, b"m"])
            c.close()

if __name__ == "__main__":
    main()
