"""test_mongowire.py - kvbench -D mongowire (OP_MSG written by kvbench in its
own loop) speaking YCSB's document operations to a real kvd's MongoDB door
(--mongo-port), at tiny sizes: YCSB A, E and F loaded and run with --verify,
one-field reads and updates, the geo workload and --record value, the
documents read back with pymongo, compared with those -D mongodb (libmongoc)
writes, and what mongowire refuses.  Skipped when kvbench has no MongoDB
drivers (libmongoc-dev) or pymongo is missing.
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ.get("KVD_SOURCE_DIR", "."), "bench"))
import kvdtest  # noqa: E402
from kvbenchtest import KVBENCH, kvbench  # noqa: E402

try:
    from pymongo import MongoClient
except ImportError:
    MongoClient = None

from docverify import FIELDS, OneField, Verified  # noqa: E402


def built_in():
    out = subprocess.run([KVBENCH, "--help"], capture_output=True, text=True).stdout
    return "mongowire" in out and MongoClient is not None


@unittest.skipUnless(built_in(), "kvbench without its MongoDB drivers, or no pymongo")
class MongoWire(OneField, Verified, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mport = kvdtest.free_port()
        cls.srv = kvdtest.Server(args=["--mongo-port", str(cls.mport)]).start()
        cls.cl = MongoClient("127.0.0.1", cls.mport, directConnection=True,
                             serverSelectionTimeoutMS=5000)

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.srv.stop()

    def setUp(self):
        self.table = self.id().rsplit(".", 1)[-1]

    def bench(self, *args, driver="mongowire", expect=0):
        return kvbench("--table", self.table, *args, port=self.mport, driver=driver,
                       expect=expect)

    def docs(self, table=None):
        return {d.pop("_id"): d for d in self.cl.kvbench[table or self.table].find()}

    def test_a_load_run_verify(self):
        r = self.bench("-r", 300, "-n", 1000, "-t", 2, "-c", 2, "-P", 2, "--verify", "a")
        self.assertEqual(r.phase("load")["ops"], 300)
        self.assertEqual(r.phase("load")["errors"]["total"], 0)
        self.assertEqual(r.phase("run")["ops"], 1000)
        f = self.verified(r, 300)
        reads = r.counts()["read"]
        self.assertGreater(reads, 350)
        self.assertEqual(f["run_reads"]["checked"], 10 * reads)  # all fields
        self.assertIn("mongowire", r.report["target"])
        docs = self.docs()
        self.assertEqual(len(docs), 300)
        for k, d in docs.items():
            self.assertTrue(k.startswith("user"), k)
            self.assertEqual(sorted(d), FIELDS)
            self.assertTrue(all(isinstance(v, str) and len(v) == 100 for v in d.values()))

    def test_e_scans(self):
        r = self.bench("-r", 400, "-n", 600, "-t", 2, "-c", 2, "--verify", "e")
        run = r.phase("run")
        # YCSB E's scans: uniform lengths 1..100 from a zipfian key on
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 56, avg)
        self.verified(r, 400 + r.counts()["insert"])
        self.assertEqual(len(self.docs()), 400 + r.counts()["insert"])

    def test_long_scans_whole(self):
        # scans of 150, longer than a first batch's 101 documents: every
        # document comes back, as many as libmongoc's cursor (getMore) reads
        items = {}
        for driver in ("mongowire", "mongodb"):
            self.table = "long_scans_" + driver
            self.bench("-r", 300, "--phase", "load", "e", driver=driver)
            r = self.bench("-r", 300, "-n", 20, "-t", 1, "-c", 1, "--phase", "run",
                           "-p", "scanproportion=1", "-p", "insertproportion=0",
                           "-p", "minscanlength=150", "-p", "maxscanlength=150",
                           "-p", "requestdistribution=sequential", "e", driver=driver)
            run = r.phase("run")
            self.assertEqual(run["errors"]["total"], 0, run["first_error"])
            items[driver] = run["scan_items"]
        self.assertGreater(items["mongowire"], 20 * 101)
        self.assertEqual(items["mongowire"], items["mongodb"])

    def test_f_rmw(self):
        r = self.bench("-r", 200, "-n", 400, "--verify", "f")
        self.assertGreater(r.counts()["rmw"], 120)
        self.verified(r, 200)
        self.table += "_all"
        r = self.bench("-r", 200, "-n", 400, "-p", "writeallfields=true", "--verify", "f")
        self.verified(r, 200)

    def test_missing_records_not_found(self):
        # an update that matched nothing and a read that found nothing
        r = self.bench("-r", 20, "-n", 40, "--phase", "run", "-p", "updateproportion=0.5",
                       "-p", "readproportion=0.5", "a", expect=None)
        run = r.phase("run")
        self.assertEqual(run["errors"]["not_found"], 40, run["errors"])
        self.assertEqual(run["errors"]["total"], 40)
        self.assertEqual(self.docs(), {})

    def test_geo_and_values(self):
        r = self.bench("-r", 200, "-n", 300, "--verify", "geo")
        self.assertEqual(r.report["verify"]["ok"], 200)
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        d = self.cl.kvbench[self.table].find_one({"_id": "geo:0000000007"})
        self.assertEqual(sorted(d), ["_id", "cidr", "country_code", "nearest_city", "position",
                                     "radius", "software_source_version", "timestamp"])
        self.assertIsInstance(d["position"]["lat"], float)
        self.table += "_v"
        r = self.bench("-r", 100, "-n", 200, "--record", "value", "--verify", "a")
        self.assertEqual(r.report["verify"]["ok"], 100)
        d = self.cl.kvbench[self.table].find_one()
        self.assertEqual(sorted(k for k in d if k != "_id"), FIELDS)
        self.assertIsInstance(d["field0"], bytes)

    def test_same_documents_as_libmongoc(self):
        args = ("-r", 100, "-n", 300, "-t", 1, "-c", 1, "-p", "requestdistribution=sequential")
        self.bench(*args, "a")
        wire = self.docs()
        self.table += "_mongoc"
        self.bench(*args, "a", driver="mongodb")
        self.assertEqual(self.docs(), wire)
        self.assertEqual(len(wire), 100)

    def test_refused(self):
        for extra, text in ((("-a", "secret", "--no-auth-warning"), "without TLS or a password"),
                            (("--tls",), "mongowire")):
            r = self.bench(*extra, "-r", 5, "-n", 5, "a", expect=None)
            self.assertNotEqual(r.rc, 0)
            self.assertIn(text, r.err)
        r = self.bench("--record", "doc", "-r", 5, "a", expect=None)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("postgres only", r.err)


if __name__ == "__main__":
    kvdtest.main()
