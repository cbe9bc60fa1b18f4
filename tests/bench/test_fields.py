"""test_fields.py - kvbench's YCSB records of fields (--record fields, the
default) through each driver, against real servers: redis-server (hashes:
HSET, HGETALL, HMGET, counted by its INFO commandstats), PostgreSQL (a
column per field) and kvd (its native hashes: HSET, HGETALL, HGET, counted
by its STATS).

Each driver runs with --verify and the operation mix is checked; the stored
records are read back with the server's own client to check that a one-field
update changed exactly one field, and writeallfields=true all of them.
--verify's per-field checks are made to fail: a field put back to a value an
update had replaced, before the read-back (redis-server, PostgreSQL) and
while the run reads it (redis-server), and a field deleted.  Each server's
tests are skipped when it is not installed (the file then exits 77).
"""

import os
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.environ.get("KVD_SOURCE_DIR", "."), "bench"))
import kvdtest  # noqa: E402
import msgpack  # noqa: E402
import peers  # noqa: E402
from kvbenchtest import kvbench  # noqa: E402
from docverify import Verified  # noqa: E402

FIELDS = ["field%d" % i for i in range(10)]
UPDATES_ONLY = ["-p", "updateproportion=1", "-p", "readproportion=0"]
HOOK = """
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
key, field, path = sys.argv[2], sys.argv[3], sys.argv[4]
with open(path, "rb") as f:
    r.hset(key, field, f.read())
if len(sys.argv) > 5:
    r.hdel(key, sys.argv[5])
"""


class Checks(Verified):
    """Mixed into one TestCase per server.  The subclass provides bench()
    (kvbench against the server), records() ({key: {field: bytes}}) and
    flush()."""

    def setUp(self):
        self.flush()

    def near(self, value, want, tol=0.06):
        self.assertLess(abs(value - want), tol, "%.4f, expected %.4f" % (value, want))

    def check_shape(self, recs, n):
        self.assertEqual(len(recs), n)
        for k, rec in recs.items():
            self.assertTrue(k.startswith("user"), k)
            self.assertEqual(sorted(rec), sorted(FIELDS))
            self.assertTrue(all(len(v) == 100 for v in rec.values()))

    def changed(self, before, after):
        return [(k, f) for k in before for f in FIELDS if before[k][f] != after[k][f]]

    def test_a_mix_and_verify(self):
        r = self.bench("-r", 400, "-n", 3000, "-t", 2, "-c", 2, "-P", 2, "--verify", "a")
        run = r.phase("run")
        self.assertEqual((run["ops"], run["errors"]["total"]), (3000, 0), run["first_error"])
        self.near(r.share("read"), 0.5)
        self.near(r.share("update"), 0.5)
        f = self.verified(r, 400)
        # every read fetched the 10 fields of its record
        self.assertEqual(f["run_reads"]["checked"], 10 * self.reads_checked(r))
        self.check_calls(r)
        cfg = r.report["config"]
        self.assertEqual(cfg["record"], "fields")
        for p, v in (("fieldcount", "10"), ("fieldlength", "100"),
                     ("readallfields", "true"), ("writeallfields", "false")):
            self.assertEqual(cfg["properties"][p], v)
        self.check_shape(self.records(), 400)

    def reads_checked(self, r):
        return r.counts()["read"]

    def check_calls(self, r):
        """What the server counted of A's run (where it counts)."""

    def test_one_field_per_update(self):
        self.bench("-r", 3, "--phase", "load", "a")
        before = self.records()
        self.check_shape(before, 3)
        for seed in range(3):  # a seed each, or the same update thrice
            self.bench("-r", 3, "-n", 1, "-t", 1, "-c", 1, "-s", seed, "--phase", "run",
                       *UPDATES_ONLY, "a")
            after = self.records()
            self.assertEqual(len(self.changed(before, after)), 1)
            before = after

    def test_writeallfields(self):
        self.bench("-r", 3, "--phase", "load", "a")
        before = self.records()
        r = self.bench("-r", 3, "-n", 1, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY,
                       "-p", "writeallfields=true", "--verify", "a")
        after = self.records()
        changed = self.changed(before, after)
        self.assertEqual(len(changed), 10)
        self.assertEqual(len({k for k, _ in changed}), 1)
        self.assertEqual(r.report["config"]["properties"]["writeallfields"], "true")
        self.verified(r, 1)

    def test_f_one_field(self):
        r = self.bench("-r", 300, "-n", 2000, "-t", 2, "-c", 2, "--verify",
                       "-p", "readallfields=false", "f")
        self.assertEqual(r.phase("run")["errors"]["total"], 0, r.phase("run")["first_error"])
        self.near(r.share("rmw"), 0.5)
        self.verified(r, 300)
        return r


@unittest.skipUnless(peers.Redis.available(), "redis-server is not installed")
class Redis(Checks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import redis
        cls.peer = peers.Redis("none")
        cls.peer.start()
        cls.r = redis.Redis(port=cls.peer.port)
        cls.tmp = cls.peer.dir

    @classmethod
    def tearDownClass(cls):
        cls.r.close()
        cls.peer.cleanup()

    def bench(self, *args, expect=0):
        return kvbench(*self.peer.kvbench_args(), *args, expect=expect)

    def flush(self):
        self.r.flushall()
        self.r.config_resetstat()

    def records(self):
        return {k.decode(): {f.decode(): v for f, v in self.r.hgetall(k).items()}
                for k in self.r.scan_iter("user*")}

    def calls(self):
        st = self.r.info("commandstats")
        return {c: st.get("cmdstat_" + c, {}).get("calls", 0)
                for c in ("hset", "hgetall", "hmget", "set", "get", "zadd")}

    def check_calls(self, r):
        # HSET for the 400 inserts and every update, HGETALL for the reads
        # and the read-back; no strings, no index without scans
        c = self.calls()
        self.assertEqual(c["hset"], 400 + r.counts()["update"])
        self.assertEqual(c["hgetall"], r.counts()["read"] + 400)
        self.assertEqual((c["hmget"], c["set"], c["get"], c["zadd"]), (0, 0, 0, 0))

    def test_f_one_field(self):
        r = super().test_f_one_field()
        # readallfields=false: HMGET of one field for the reads and the
        # reads of the read-modify-writes, one HSET for each write
        c = self.calls()
        n = r.counts()
        self.assertEqual(c["hmget"], n["read"] + n["rmw"])
        self.assertEqual(c["hset"], 300 + n["rmw"])
        self.assertEqual(c["hgetall"], 300)  # the read-back
        self.assertEqual(r.report["verify"]["fields"]["run_reads"]["checked"],
                         n["read"] + n["rmw"])

    def test_e_scans(self):
        r = self.bench("-r", 500, "-n", 1000, "-t", 2, "-c", 2, "--verify", "e")
        run = r.phase("run")
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 52, avg)
        self.verified(r, 500 + r.counts()["insert"])
        # the index holds every record once, inserted or loaded
        self.assertEqual(self.r.zcard("usertable:index"), 500 + r.counts()["insert"])

    def hook(self, key, field, path, delete=None):
        script = os.path.join(self.tmp, "hook.py")
        with open(script, "w") as f:
            f.write(HOOK)
        return " ".join([sys.executable, script, str(self.peer.port), key, field, path]
                        + ([delete] if delete else []))

    def test_stale_and_missing_fields_read_back(self):
        # a field put back to its loaded value after updates replaced it is
        # stale; a field deleted is missing; the record counts as mismatched
        self.bench("-r", 2, "--phase", "load", "a")
        before = self.records()
        key = sorted(before)[0]
        old = os.path.join(self.tmp, "old")
        with open(old, "wb") as f:
            f.write(before[key]["field3"])
        # writeallfields: every update replaces field3, and field5
        r = self.bench("-r", 2, "-n", 20, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY,
                       "-p", "writeallfields=true", "-p", "requestdistribution=sequential",
                       "--verify", "--before-verify", self.hook(key, "field3", old, "field5"),
                       "a", expect=3)
        v = r.report["verify"]
        self.assertEqual((v["keys"], v["ok"], v["mismatched"]), (2, 1, 1))
        self.assertEqual(v["mismatched_keys"], [key])
        self.assertEqual(v["fields"]["read_back"],
                         {"checked": 20, "stale": 1, "corrupt": 0, "missing": 1})
        self.assertEqual(sorted(v["bad_fields"]),
                         [key + " field3: stale (read-back)",
                          key + " field5: missing (read-back)"])
        self.assertIn("bad field: %s field3: stale" % key, r.out)

    def test_stale_reads_during_the_run(self):
        # another client keeps putting the loaded value back while kvbench
        # updates and reads the one record: reads that get it after an
        # update was acknowledged are stale
        self.bench("-r", 1, "-p", "fieldcount=1", "--phase", "load", "a")
        key = next(iter(self.records()))
        old = self.r.hget(key, "field0")
        stop, wrote = threading.Event(), threading.Event()

        def putback():
            import redis
            c = redis.Redis(port=self.peer.port)
            while not stop.is_set():
                c.hset(key, "field0", old)
                wrote.set()
            c.close()
        t = threading.Thread(target=putback)
        t.start()
        try:
            wrote.wait(10)
            r = self.bench("-r", 1, "-p", "fieldcount=1", "-n", 2000, "-t", 1, "-c", 1,
                           "--phase", "run", "--verify", "a", expect=3)
        finally:
            stop.set()
            t.join()
        reads = r.report["verify"]["fields"]["run_reads"]
        self.assertEqual(reads["checked"], r.counts()["read"])
        self.assertGreater(reads["stale"], 0)
        self.assertEqual(reads["corrupt"], 0)
        self.assertIn(key + " field0: stale (read during the run)",
                      r.report["verify"]["bad_fields"])


@unittest.skipUnless(peers.Postgres.available(), "PostgreSQL 15 is not installed")
class Postgres(Checks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.peer = peers.Postgres(max_connections=50)
        cls.peer.start()

    @classmethod
    def tearDownClass(cls):
        cls.peer.cleanup()

    def bench(self, *args, expect=0):
        return kvbench(*self.peer.kvbench_args(), *args, expect=expect)

    def sql(self, q):
        r = subprocess.run([self.peer.bindir + "/psql", "-X", "-q", "-At", "-h", "127.0.0.1",
                            "-p", str(self.peer.port), "-U", "kvbench", "-d", "postgres",
                            "-F", "\x1f", "-c", q], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [line.split("\x1f") for line in r.stdout.splitlines()]

    def flush(self):
        self.sql("DROP TABLE IF EXISTS usertable")

    def records(self):
        cols = ", ".join(FIELDS)
        return {row[0]: {f: row[1 + i].encode() for i, f in enumerate(FIELDS)}
                for row in self.sql("SELECT ycsb_key, %s FROM usertable" % cols)}

    def test_table(self):
        # YCSB's JDBC table: the key and one text column per field
        self.bench("-r", 10, "--phase", "load", "-p", "fieldcount=3", "a")
        cols = self.sql("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'usertable' ORDER BY ordinal_position")
        self.assertEqual(cols, [["ycsb_key", "character varying"], ["field0", "text"],
                                ["field1", "text"], ["field2", "text"]])

    def test_e_scans(self):
        r = self.bench("-r", 500, "-n", 1000, "-t", 2, "-c", 2, "--verify", "e")
        run = r.phase("run")
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 52, avg)
        self.verified(r, 500 + r.counts()["insert"])

    def test_stale_field_read_back(self):
        self.bench("-r", 2, "--phase", "load", "a")
        before = self.records()
        key = sorted(before)[0]
        # the value dollar-quoted: YCSB's characters (' ' to '_') have no x
        sql = os.path.join(self.peer.dir, "putback.sql")
        with open(sql, "w") as f:
            f.write("UPDATE usertable SET field3 = $x$%s$x$ WHERE ycsb_key = '%s'"
                    % (before[key]["field3"].decode(), key))
        hook = "%s/psql -X -q -h 127.0.0.1 -p %d -U kvbench -d postgres -f %s" % (
            self.peer.bindir, self.peer.port, sql)
        r = self.bench("-r", 2, "-n", 20, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY,
                       "-p", "writeallfields=true", "-p", "requestdistribution=sequential",
                       "--verify", "--before-verify", hook, "a", expect=3)
        v = r.report["verify"]
        self.assertEqual(v["fields"]["read_back"]["stale"], 1)
        self.assertEqual(v["bad_fields"], [key + " field3: stale (read-back)"])


class Kvd(Checks, unittest.TestCase):
    """kvd's native hashes: HSET for inserts and updates, HGETALL or HGET
    for reads, a typed SCAN for YCSB's scans."""

    @classmethod
    def setUpClass(cls):
        cls.srv = kvdtest.Server(threads=2, durability="async").start()
        cls.c = cls.srv.client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.srv.stop()
        cls.srv.cleanup()

    def bench(self, *args, expect=0):
        return kvbench(*args, port=self.srv.port, expect=expect)

    def flush(self):
        self.assertEqual(self.c.call(kvdtest.FLUSHALL), [kvdtest.OK])
        self.base = self.ops()

    def ops(self):
        st = self.c.call(kvdtest.STATS)[1]
        ops = st.get(b"ops", {})
        return {n: ops.get(n.encode(), {}).get(b"calls", 0)
                for n in ("HSET", "HGETALL", "HGET", "GET", "PUT", "SCAN")}

    def calls(self):
        now = self.ops()
        return {n: now[n] - self.base[n] for n in now}

    def records(self):
        st, items, cur = self.c.call(kvdtest.SCAN, b"user", None, None, 1000, 2)  # TYPED
        self.assertIsNone(cur)
        out = {}
        for i in range(0, len(items), 4):
            self.assertEqual(items[i + 1], 1, items[i])  # a hash
            f = items[i + 3]
            out[items[i].decode()] = {f[j].decode(): bytes(f[j + 1])
                                      for j in range(0, len(f), 2)}
        return out

    def check_calls(self, r):
        # HSET for the 400 inserts and every update (computed by the
        # server: no GET first), HGETALL for the reads and the read-back
        self.assertTrue(r.report["config"]["fields_native"])
        self.assertIn("HSET, HGETALL, HGET", r.report["config"]["record_ops"])
        c = self.calls()
        self.assertEqual(c["HSET"], 400 + r.counts()["update"])
        self.assertEqual(c["HGETALL"], r.counts()["read"] + 400)
        self.assertEqual((c["HGET"], c["GET"], c["PUT"]), (0, 0, 0))

    def test_f_one_field(self):
        r = super().test_f_one_field()
        # readallfields=false: HGET of one field for the reads and the
        # reads of the read-modify-writes, one HSET for each write
        c = self.calls()
        n = r.counts()
        self.assertEqual(c["HGET"], n["read"] + n["rmw"])
        self.assertEqual(c["HSET"], 300 + n["rmw"])
        self.assertEqual(c["HGETALL"], 300)  # the read-back
        self.assertEqual(r.report["verify"]["fields"]["run_reads"]["checked"],
                         n["read"] + n["rmw"])

    def test_e_scans(self):
        r = self.bench("-r", 500, "-n", 1000, "-t", 2, "-c", 2, "--verify", "e")
        run = r.phase("run")
        self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        avg = run["scan_items"] / run["ops_by_type"]["scan"]["count"]
        self.assertTrue(40 <= avg <= 52, avg)
        self.verified(r, 500 + r.counts()["insert"])
        self.assertEqual(self.calls()["SCAN"], r.counts()["scan"])


class KvdSplit(Kvd):
    """kvd-split: the same records one key per field (key, a 0 byte, the
    field's name), the per-field layout bench/hash_layout weighs: MPUT for
    inserts, PUT for one-field updates, a prefix SCAN or a GET for reads."""

    def bench(self, *args, expect=0):
        return kvbench(*args, port=self.srv.port, driver="kvd-split", expect=expect)

    def records(self):
        st, items, cur = self.c.call(kvdtest.SCAN, b"user", None, None, 10000)
        self.assertIsNone(cur)
        out = {}
        for i in range(0, len(items), 2):
            key, field = items[i].split(b"\0")
            out.setdefault(key.decode(), {})[field.decode()] = bytes(items[i + 1])
        return out

    def check_calls(self, r):
        self.assertTrue(r.report["config"]["fields_native"])
        self.assertIn("one key per field", r.report["config"]["record_ops"])
        c = self.calls()
        # an MPUT per insert (not counted here), a PUT per one-field
        # update, a SCAN per read of the run and of the read-back
        self.assertEqual(c["PUT"], r.counts()["update"])
        self.assertEqual(c["SCAN"], r.counts()["read"] + 400)
        self.assertEqual((c["HSET"], c["HGETALL"], c["HGET"], c["GET"]), (0, 0, 0, 0))

    def test_f_one_field(self):
        r = Checks.test_f_one_field(self)
        c = self.calls()
        n = r.counts()
        self.assertEqual(c["GET"], n["read"] + n["rmw"])
        self.assertEqual(c["PUT"], n["rmw"])

    def test_e_scans(self):
        r = self.bench("-r", 10, "-n", 10, "e", expect=None)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("kvd-split stores records one key per field and has no YCSB scan",
                      r.err)


if __name__ == "__main__":
    kvdtest.main()
