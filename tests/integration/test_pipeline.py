"""test_pipeline.py - replies in request order, and a connection reads its own writes.

1,000 pipelined mixed requests in one write: every reply matches a model
that applies the requests in order, so a GET after a PUT of the same key on
the same connection always sees it, whatever shard or commit it went to.
"""

import os
import random
import shutil
import tempfile
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
        # 20 MB of GET replies requested in one go while the client does not
        # read: kvd stops reading the connection instead of buffering all.
        with Server(threads=1, args=["--max-output", "1m"]) as srv:
            c = srv.client()
            c.call(PUT, b"big", b"x" * 100000)
            c.send_raw(frame([GET, b"big"]) * 200)
            for _ in range(200):
                self.assertEqual(c.read_reply(), [OK, b"x" * 100000])


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

    def test_flushall_reaches_every_slot(self):
        keys = [b"fl:%05d" % i for i in range(self.EVERY_SLOT)]
        for r in range(3):
            got = self.c.pipeline([(PUT, k, b"v") for k in keys])
            self.assertEqual(got, [[OK]] * len(keys))
            reqs = [(FLUSHALL,), (COUNT,), (SCAN, b"fl:", None, None, 10)]
            want = [[OK], [OK, 0], [OK, [], None]]
            reqs += [(GET, k) for k in keys]
            want += [[NOT_FOUND]] * len(keys)
            for i in range(0, len(keys), 64):
                reqs += [(EXISTS,) + tuple(keys[i:i + 64]),
                         (MGET,) + tuple(keys[i:i + 64])]
                want += [[OK, 0], [OK] + [None] * 64]
            reqs += [(TTL, k) for k in keys[::7]]
            want += [[NOT_FOUND]] * len(keys[::7])
            reqs += [(COUNT,), (COUNT, b"fl:"), (SCAN, None, None, None, 10)]
            want += [[OK, 0], [OK, 0], [OK, [], None]]
            # and a write after the flush survives it
            reqs += [(PUT, keys[r], b"after"), (GET, keys[r]), (COUNT,),
                     (SCAN, None, None, None, 10, SCAN_KEYS_ONLY)]
            want += [[OK], [OK, b"after"], [OK, 1], [OK, [keys[r]], None]]
            self.check(reqs, want)

    def test_backup_sees_writes(self):
        for r in range(3):
            self.assertEqual(self.c.call(FLUSHALL), [OK])
            keys = [b"bk%d:%03d" % (r, i) for i in range(50 + r)]
            reqs = [(PUT, k, b"v") for k in keys] + [(DEL, keys[0]),
                                                     (BACKUP, b"b%d" % r)]
            got = self.c.pipeline(reqs)
            self.assertEqual(got[:-1], [[OK]] * (len(keys) + 1))
            self.assertEqual(got[-1], [OK, len(keys) - 1], got[-1])
        # the copy holds the pipelined writes themselves
        with Server(threads=2, data_dir=os.path.join(self.bdir, "b2")) as bk:
            c = bk.client()
            self.assertEqual(c.call(COUNT), [OK, 51])
            self.assertEqual(c.call(GET, b"bk2:000"), [NOT_FOUND])
            self.assertEqual(c.call(GET, b"bk2:051"), [OK, b"v"])
            c.close()


if __name__ == "__main__":
    main()
