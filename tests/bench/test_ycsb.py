"""test_ycsb.py - kvbench's YCSB workloads A-F against a real kvd.

Checks what a short run can check: operation counts, the proportions of
each workload's definition (binomial tolerance), the zipfian and "latest"
skew, scan lengths, the report's fields.  No test asserts a speed.
"""

import os
import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import kvbench

RECORDS, OPS = 2000, 4000
LOAD = ["-r", RECORDS, "-t", 2, "-c", 2]


class Ycsb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # async: these tests count operations, durability is not their point
        cls.srv = Server(threads=2, durability="async").start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def setUp(self):
        c = self.srv.client()
        self.assertEqual(c.call(FLUSHALL), [OK])
        c.close()

    def run_wl(self, wl, *extra):
        r = kvbench(*LOAD, "-n", OPS, "--key-stats", *extra, wl, port=self.srv.port)
        load, run = r.phase("load"), r.phase("run")
        self.assertEqual(load["ops"], RECORDS)
        self.assertEqual(r.counts("load"), {"insert": RECORDS})
        self.assertEqual(run["ops"], OPS)
        self.assertEqual(run["planned"], OPS)
        self.assertEqual(sum(r.counts().values()), OPS)
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        return r

    def near(self, value, want, tol=0.04):
        self.assertLess(abs(value - want), tol, "%.4f, expected %.4f" % (value, want))

    def test_a(self):
        r = self.run_wl("a")
        self.near(r.share("read"), 0.5)
        self.near(r.share("update"), 0.5)
        # zipfian: the hottest 1% of 2,000 keys take far more than 1%
        self.assertGreater(r.phase("run")["keys"]["top1_share"], 0.08)

    def test_b(self):
        r = self.run_wl("b")
        self.near(r.share("read"), 0.95, 0.02)
        self.near(r.share("update"), 0.05, 0.02)

    def test_c(self):
        r = self.run_wl("c")
        self.assertEqual(r.counts(), {"read": OPS})

    def test_d(self):
        r = self.run_wl("d")
        self.near(r.share("read"), 0.95, 0.02)
        self.near(r.share("insert"), 0.05, 0.02)
        # every read found its key: "latest" only picks acknowledged inserts
        self.assertEqual(r.phase("run")["errors"]["not_found"], 0)
        c = self.srv.client()
        self.assertEqual(c.call(COUNT, b"user")[1], RECORDS + r.counts()["insert"])
        c.close()

    def test_e(self):
        r = self.run_wl("e")
        self.near(r.share("scan"), 0.95, 0.02)
        self.near(r.share("insert"), 0.05, 0.02)
        run = r.phase("run")
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        # uniform 1..100 has mean 50.5; scans near the end of the key
        # space come back shorter
        self.assertTrue(40 <= avg <= 52, avg)

    def test_f(self):
        r = self.run_wl("f")
        self.near(r.share("read"), 0.5)
        self.near(r.share("rmw"), 0.5)

    def test_uniform_vs_zipfian(self):
        z = self.run_wl("c").phase("run")["keys"]
        self.setUp()
        u = self.run_wl("c", "-p", "requestdistribution=uniform").phase("run")["keys"]
        self.assertLess(u["top1_share"], 0.06)
        self.assertGreater(z["top1_share"], 2 * u["top1_share"])
        self.assertGreater(u["distinct"], z["distinct"])

    def test_properties(self):
        r = self.run_wl("a", "-p", "readproportion=0.2", "-p", "updateproportion=0.8",
                        "-p", "fieldcount=3", "-p", "fieldlength=10")
        self.near(r.share("read"), 0.2)
        props = r.report["config"]["properties"]
        self.assertEqual(props["fieldcount"], "3")
        self.assertEqual(props["requestdistribution"], "zipfian")
        c = self.srv.client()
        st, items, cur = c.call(SCAN, b"user", None, None, 1, 2)  # TYPED: a hash's fields
        c.close()
        self.assertEqual(items[1], 1)  # a hash
        rec = dict(zip(items[3][0::2], items[3][1::2]))
        self.assertEqual(sorted(rec), [b"field0", b"field1", b"field2"])
        self.assertTrue(all(len(v) == 10 for v in rec.values()))

    def test_bad_options(self):
        for args in (["-p", "nosuch=1", "a"], ["-p", "readproportion=x", "a"],
                     ["nosuchworkload"], ["-t", "0", "a"], ["--phase", "x", "a"]):
            r = kvbench(*args, port=self.srv.port, expect=2)
            self.assertIn("kvbench:", r.err)


if __name__ == "__main__":
    main()
