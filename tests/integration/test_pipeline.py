"""test_pipeline.py - replies in request order, and a connection reads its own writes.

1,000 pipelined mixed requests in one write: every reply matches a model
that applies the requests in order, so a GET after a PUT of the same key on
the same connection always sees it, whatever shard or commit it went to.
"""

import random
import unittest

from kvdtest import *  # noqa: F401,F403


class Pipeline(unittest.TestCase):
    def run_mixed(self, srv, seed, n=1000):
        rnd = random.Random(seed)
        c = srv.client()
        model, reqs, want = {}, [], []
        keys = [b"p%d:%03d" % (seed, i) for i in range(40)]
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
            else:
                ks = rnd.sample(keys, 4)
                reqs.append((EXISTS,) + tuple(ks))
                want.append([OK, sum(x in model for x in ks)])
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


if __name__ == "__main__":
    main()
