"""test_verify.py - kvbench --verify: every acknowledged write is read
back; a healthy server loses nothing, and keys deleted or overwritten behind
kvbench's back (by --before-verify) are reported, with exit status 3."""

import os
import shutil
import sys
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import kvbench

HOOK = """
import sys
from kvdtest import Client, DEL, PUT, OK
c = Client(int(sys.argv[1]))
op = sys.argv[2]
for k in sys.argv[3:]:
    r = c.call(DEL, k.encode()) if op == "del" else c.call(PUT, k.encode(), b"junk")
    assert r == [OK], r
"""


class Verify(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2).start()
        cls.tmp = tempfile.mkdtemp(prefix="kvbench-verify-")
        cls.hook = os.path.join(cls.tmp, "hook.py")
        with open(cls.hook, "w") as f:
            f.write(HOOK)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        c = self.srv.client()
        self.assertEqual(c.call(FLUSHALL), [OK])
        c.close()

    def hook_cmd(self, op, keys):
        return "%s %s %d %s %s" % (sys.executable, self.hook, self.srv.port, op,
                                   " ".join(keys))

    def test_healthy_ycsb(self):
        # several connections, pipelined, updating the same hot keys
        r = kvbench("-r", 1000, "-n", 3000, "-t", 2, "-c", 3, "-P", 4, "--verify", "a",
                    port=self.srv.port)
        self.assertIn("\nlost: 0\n", r.out)
        v = r.report["verify"]
        self.assertEqual((v["keys"], v["ok"], v["lost"], v["mismatched"]), (1000, 1000, 0, 0))

    def test_healthy_inserts(self):
        r = kvbench("-r", 500, "-n", 2000, "--verify", "d", port=self.srv.port)
        v = r.report["verify"]
        inserted = r.counts()["insert"]
        self.assertEqual(v["keys"], 500 + inserted)
        self.assertEqual(v["lost"], 0)

    def test_deleted_behind_its_back(self):
        gone = ["client000-0000000007", "client003-0000000042", "client007-0000000099"]
        r = kvbench("-r", 800, "--verify", "--before-verify", self.hook_cmd("del", gone),
                    "ingest", port=self.srv.port, expect=3)
        self.assertIn("\nlost: 3\n", r.out)
        for k in gone:
            self.assertIn("lost key: " + k, r.out)
        v = r.report["verify"]
        self.assertEqual((v["keys"], v["ok"], v["lost"]), (800, 797, 3))
        self.assertEqual(sorted(v["lost_keys"]), sorted(gone))

    def test_overwritten_behind_its_back(self):
        bad = ["client001-0000000001", "client002-0000000002"]
        r = kvbench("-r", 800, "--verify", "--before-verify", self.hook_cmd("put", bad),
                    "ingest", port=self.srv.port, expect=3)
        self.assertIn("\nlost: 0\n", r.out)
        v = r.report["verify"]
        self.assertEqual((v["ok"], v["mismatched"]), (798, 2))
        self.assertEqual(sorted(v["mismatched_keys"]), bad)

    def test_hook_failure(self):
        r = kvbench("-r", 100, "--verify", "--before-verify", "false", "ingest",
                    port=self.srv.port, expect=1)
        self.assertIn("--before-verify", r.err)


if __name__ == "__main__":
    main()
