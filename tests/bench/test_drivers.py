"""test_drivers.py - kvbench's redis and postgres drivers against the real
servers, started by bench/peers.py as bench/compare starts them: workloads
with reads, updates, read-modify-writes, scans (redis: through its sorted-set
index and Lua script), --verify, and a password the server does not use.  Each server's tests are skipped when it
is not installed, and then the whole file exits 77 (kvdtest.main)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ.get("KVD_SOURCE_DIR", "."), "bench"))
import kvdtest  # noqa: E402
import peers  # noqa: E402
from kvbenchtest import kvbench  # noqa: E402

SMALL = ["-r", 1000, "-n", 2000, "-t", 2, "-c", 2, "--verify"]


class DriverChecks:
    """Mixed into one TestCase per server."""

    def bench(self, *args, expect=0):
        return kvbench(*self.peer.kvbench_args(), *args, expect=expect)

    def test_a_verify(self):
        r = self.bench(*SMALL, "-P", 4, "a")
        self.assertEqual(r.phase("run")["ops"], 2000)
        self.assertEqual(r.phase("run")["errors"]["total"], 0, r.phase("run")["first_error"])
        self.assertEqual(r.report["verify"]["lost"], 0)
        self.assertEqual(r.report["verify"]["mismatched"], 0)

    def test_e_scans(self):
        r = self.bench(*SMALL, "e")
        run = r.phase("run")
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 52, avg)

    def test_f_rmw(self):
        r = self.bench(*SMALL, "f")
        self.assertEqual(sum(r.counts().values()), 2000)
        self.assertIn("rmw", r.counts())
        self.assertEqual(r.report["verify"]["lost"], 0)

    def test_password_nobody_asked_for(self):
        # a server without a password takes the connection anyway (Redis
        # answers AUTH with an error kvbench lets pass, PostgreSQL's trust
        # ignores it), and a quote, a backslash and a blank in it do not
        # break libpq's connection string
        r = self.bench("-a", "p'w\\ x", "-r", 100, "-n", 100, "c")
        self.assertEqual(r.phase("run")["errors"]["total"], 0)

    def test_ingest_and_memory(self):
        r = self.bench("-r", 400, "--verify", "--server-pid", self.peer.pid(), "ingest")
        self.assertEqual(r.phase("load")["ops"], 400)
        self.assertEqual(r.report["verify"]["ok"], 400)
        self.assertGreater(r.report["server"]["peak_rss_bytes"], 1 << 20)


@unittest.skipUnless(peers.Redis.available(), "redis-server is not installed")
class Redis(DriverChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.peer = peers.Redis("none")
        cls.peer.start()

    @classmethod
    def tearDownClass(cls):
        cls.peer.cleanup()


@unittest.skipUnless(peers.Postgres.available(), "PostgreSQL 15 is not installed")
class Postgres(DriverChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.peer = peers.Postgres(max_connections=50)
        cls.peer.start()

    @classmethod
    def tearDownClass(cls):
        cls.peer.cleanup()

    def test_memory_is_the_process_tree(self):
        r = self.bench("-r", 200, "-n", 200, "--server-pid", self.peer.pid(), "c")
        self.assertEqual(r.report["server"]["method"], "sampled process tree PSS")


if __name__ == "__main__":
    kvdtest.main()
