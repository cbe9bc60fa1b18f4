"""test_mongodb.py - kvbench's mongodb driver (libmongoc) against the MongoDB
door in tests/mongo/mdoor_host (the door over its in-memory store, writes
completed on the host's next loop turn), and the postgres driver's
--record doc (a jsonb document per record) against a real PostgreSQL.

Each runs YCSB workloads with --verify and the stored documents are read
back with the server's own client (pymongo, psql); --verify is made to fail
once through each (a field put back to a value an update had replaced,
before the read-back).  Skipped when the mongodb driver is not built in
(libmongoc-dev), pymongo or PostgreSQL is missing.
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ.get("KVD_SOURCE_DIR", "."), "bench"))
sys.path.insert(0, os.path.join(os.environ.get("KVD_SOURCE_DIR", "."), "tests", "mongo"))
import peers  # noqa: E402
from kvbenchtest import KVBENCH, kvbench  # noqa: E402

try:
    import pymongo  # noqa: F401
    from test_pymongo import Host  # noqa: E402
except ImportError:
    Host = None

from docverify import FIELDS, UPDATES_ONLY, OneField, Verified  # noqa: E402
STALE = ["-r", 2, "-n", 20, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY,
         "-p", "writeallfields=true", "-p", "requestdistribution=sequential", "--verify"]


def built_in():
    out = subprocess.run([KVBENCH, "--help"], capture_output=True, text=True).stdout
    return "mongodb" in out and Host is not None


@unittest.skipUnless(built_in(), "kvbench without its mongodb driver, or no pymongo")
class MongoDriver(OneField, Verified, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = Host("--password", "secret", "--user", "kvd")
        cls.cl = cls.host.client()

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def setUp(self):
        self.table = self.id().rsplit(".", 1)[-1]

    def bench(self, *args, expect=0):
        return kvbench("-a", "secret", "--no-auth-warning", "--table", self.table, *args,
                       port=self.host.port, driver="mongodb", expect=expect)

    def docs(self, db="kvbench"):
        return {d.pop("_id"): d for d in self.cl[db][self.table].find()}

    def test_a_documents_and_verify(self):
        r = self.bench("-r", 300, "-n", 1000, "-t", 2, "-c", 2, "-P", 2, "--verify", "a")
        self.assertEqual(r.phase("run")["ops"], 1000)
        f = self.verified(r, 300)
        reads = r.counts()["read"]
        self.assertGreater(reads, 350)
        self.assertEqual(f["run_reads"]["checked"], 10 * reads)  # all fields
        self.check_docs(self.docs(), 300)
        self.assertIn("mongodb", r.report["target"])

    def test_e_scans_f_rmw(self):
        r = self.bench("-r", 400, "-n", 600, "-t", 2, "-c", 2, "--verify", "e")
        run = r.phase("run")
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 56, avg)
        self.verified(r, 400 + r.counts()["insert"])
        self.table += "_f"
        r = self.bench("-r", 200, "-n", 400, "-p", "writeallfields=true", "--verify", "f")
        self.assertGreater(r.counts()["rmw"], 120)
        self.verified(r, 200)

    def test_geo_and_values(self):
        r = self.bench("-r", 200, "-n", 300, "--verify", "geo")
        self.assertEqual(r.report["verify"]["ok"], 200)
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        d = self.cl.kvbench[self.table].find_one({"_id": "geo:0000000007"})
        self.assertEqual(sorted(d), ["_id", "cidr", "country_code", "nearest_city", "position",
                                     "radius", "software_source_version", "timestamp"])
        self.assertIsInstance(d["position"]["lat"], float)
        self.assertIsInstance(d["radius"], int)
        self.table += "_i"
        r = self.bench("-r", 100, "--verify", "ingest")
        self.assertEqual(r.report["verify"]["ok"], 100)
        d = self.cl.kvbench[self.table].find_one()
        self.assertEqual(sorted(d), ["_id", "value"])
        self.table += "_v"
        r = self.bench("-r", 100, "-n", 200, "--record", "value", "--verify", "a")
        self.assertEqual(r.report["verify"]["ok"], 100)
        d = self.cl.kvbench[self.table].find_one()
        self.assertEqual(sorted(k for k in d if k != "_id"), FIELDS)
        self.assertIsInstance(d["field0"], bytes)

    def test_uri_and_password(self):
        url = "mongodb://kvd:secret@127.0.0.1:%d/benchdb?authSource=admin" % self.host.port
        r = kvbench("-u", url, "--no-auth-warning", "--table", self.table, "-r", 20, "-n", 20,
                    "--verify", "c", driver="mongodb")
        self.assertEqual(r.report["verify"]["ok"], 20)
        self.assertEqual(len(self.docs("benchdb")), 20)
        r = kvbench("-a", "wrong", "--no-auth-warning", "-r", 5, "-n", 5, "c",
                    port=self.host.port, driver="mongodb", expect=None)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("Authentication failed", r.err)
        self.assertNotIn("DEBUG", r.err)

    def test_stale_field_read_back(self):
        self.bench("-r", 2, "--phase", "load", "a")
        before = self.docs()
        key = sorted(before)[0]
        hook = ("/usr/bin/python3 -c \"import pymongo; pymongo.MongoClient("
                "'mongodb://kvd:secret@127.0.0.1:%d/?authSource=admin').kvbench['%s']"
                ".update_one({'_id': '%s'}, {'\\$set': {'field3': bytes.fromhex('%s')"
                ".decode()}})\"" % (self.host.port, self.table, key,
                                    before[key]["field3"].encode().hex()))
        r = self.bench(*STALE, "--before-verify", hook, "a", expect=3)
        v = r.report["verify"]
        self.assertEqual(v["fields"]["read_back"]["stale"], 1)
        self.assertEqual(v["bad_fields"], [key + " field3: stale (read-back)"])


@unittest.skipUnless(peers.Postgres.available(), "PostgreSQL 15 is not installed")
class PostgresDoc(Verified, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.peer = peers.Postgres(max_connections=50)
        cls.peer.start()

    @classmethod
    def tearDownClass(cls):
        cls.peer.cleanup()

    def setUp(self):
        self.sql("DROP TABLE IF EXISTS usertable_doc")

    def bench(self, *args, expect=0):
        return kvbench(*self.peer.kvbench_args(), "--record", "doc", *args, expect=expect)

    def psql(self, args):
        return [self.peer.bindir + "/psql", "-X", "-q", "-At", "-h", "127.0.0.1",
                "-p", str(self.peer.port), "-U", "kvbench", "-d", "postgres"] + args

    def sql(self, q):
        r = subprocess.run(self.psql(["-F", "\x1f", "-c", q]), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [line.split("\x1f") for line in r.stdout.splitlines()]

    def docs(self):
        import json
        return {k: json.loads(d) for k, d in self.sql("SELECT id, doc FROM usertable_doc")}

    def test_a_table_and_verify(self):
        r = self.bench("-r", 300, "-n", 1000, "-t", 2, "-c", 2, "-P", 2, "--verify", "a")
        f = self.verified(r, 300)
        self.assertEqual(f["run_reads"]["checked"], 10 * r.counts()["read"])
        self.assertEqual(self.sql("SELECT column_name, data_type FROM information_schema.columns"
                                  " WHERE table_name = 'usertable_doc' ORDER BY ordinal_position"),
                         [["id", "text"], ["doc", "jsonb"]])
        self.check_docs(self.docs(), 300)
        self.assertEqual(r.report["config"]["record"], "doc")
        self.assertIn("jsonb", r.report["config"]["record_ops"])

    def test_one_field_f_and_e(self):
        self.bench("-r", 50, "--phase", "load", "a")
        before = self.docs()
        self.bench("-r", 50, "-n", 40, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY, "a")
        after = self.docs()
        changed = [(k, f) for k in before for f in FIELDS if before[k][f] != after[k][f]]
        self.assertTrue(25 < len(changed) <= 40, len(changed))
        r = self.bench("-r", 50, "-n", 300, "--phase", "run", "-p", "readallfields=false",
                       "-p", "writeallfields=true", "--verify", "f")
        f = self.verified(r)
        self.assertEqual(f["run_reads"]["checked"], r.counts()["read"] + r.counts()["rmw"])
        self.setUp()
        r = self.bench("-r", 400, "-n", 500, "--verify", "e")
        run = r.phase("run")
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 56, avg)
        self.verified(r, 400 + r.counts()["insert"])

    def test_stale_field_read_back(self):
        self.bench("-r", 2, "--phase", "load", "a")
        before = self.docs()
        key = sorted(before)[0]
        sql = os.path.join(self.peer.dir, "putback.sql")
        with open(sql, "w") as f:
            f.write("UPDATE usertable_doc SET doc = jsonb_set(doc, '{field3}', "
                    "to_jsonb($x$%s$x$::text)) WHERE id = '%s'" % (before[key]["field3"], key))
        hook = " ".join(self.psql(["-f", sql]))
        r = self.bench(*STALE, "--before-verify", hook, "a", expect=3)
        v = r.report["verify"]
        self.assertEqual(v["fields"]["read_back"]["stale"], 1)
        self.assertEqual(v["bad_fields"], [key + " field3: stale (read-back)"])

    def test_geo_documents_as_jsonb(self):
        """geo's documents (msgpack maps) go into kvbench_doc as jsonb:
        written whole (an upsert), read by id."""
        self.sql("DROP TABLE IF EXISTS kvbench_doc")
        r = self.bench("-r", 200, "-n", 400, "-t", 1, "-c", 4, "-p", "readproportion=0.5",
                       "-p", "updateproportion=0.5", "geo")
        self.assertEqual(r.phase("load")["errors"]["total"], 0, r.phase("load")["first_error"])
        run = r.phase("run")
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        self.assertGreater(run["ops_by_type"]["update"]["count"], 100)
        self.assertGreater(run["ops_by_type"]["read"]["count"], 100)
        self.assertEqual(self.sql("SELECT column_name, data_type FROM information_schema.columns"
                                  " WHERE table_name = 'kvbench_doc' ORDER BY ordinal_position"),
                         [["id", "text"], ["doc", "jsonb"]])
        self.assertEqual(self.sql("SELECT count(*) FROM kvbench_doc"), [["200"]])
        import json
        (doc,), = self.sql("SELECT doc FROM kvbench_doc WHERE id = 'geo:0000000007'")
        d = json.loads(doc)
        self.assertEqual(sorted(d), ["cidr", "country_code", "nearest_city", "position", "radius",
                                     "software_source_version", "timestamp"])
        self.assertIsInstance(d["position"]["lat"], float)
        self.assertTrue(-90 <= d["position"]["lat"] <= 90)
        self.assertIsInstance(d["radius"], int)
        self.assertRegex(d["cidr"], r"^\d+\.\d+\.\d+\.0/24$")
        # each document as it was read back: jsonb, which --verify cannot
        # compare with the msgpack written; ingest has no documents
        r = self.bench("-r", 5, "--verify", "geo", expect=2)
        self.assertIn("jsonb", r.err)
        r = self.bench("-r", 5, "ingest", expect=2)
        self.assertIn("--record doc", r.err)

    def test_doc_is_postgres_only(self):
        r = kvbench("--record", "doc", "-r", 1, "a", driver="redis", expect=2)
        self.assertIn("postgres only", r.err)


if __name__ == "__main__":
    unittest.main()
