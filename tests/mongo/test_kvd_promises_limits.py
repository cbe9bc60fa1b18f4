"""test_kvd_promises_limits.py - docs/mongodb.md's limits and the
promises that need their own kvd, held to a real one: the 100 MiB sort
(292), distinct's 16 MiB (17217), 10,000 open cursors in all (146), one
getMore at a time on a cursor that four connections read at once (every
document given once, 143 CursorInUse to the others), an index build that
meets a key over 256 bytes (17280, the index dropped), the TTL option's
range and single field, dropIndexes' forms, a replica's hello (a
standalone, writable server) and min-replicas-to-ack's 100
UnsatisfiableWriteConcern, SCRAM's 15,000 iterations and a salt per start.
"""

import base64
import os
import sys
import threading
import unittest

try:
    import bson
    import pymongo
    from pymongo.errors import OperationFailure
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import HostCase, KvdHost  # noqa: E402

MiB = 1 << 20


class Shared(HostCase):
    host_args = {"durability": "async"}

    def tearDown(self):
        self.assertIsNone(self.host.proc.poll(), "kvd exited")
        self.assertEqual(self.cl.admin.command("ping")["ok"], 1.0)

    def door(self):
        d = Door(self.host.mport, timeout=60)
        self.assertTrue(d.scram("kvd", b"secret")[0])
        self.addCleanup(d.close)
        return d

    def test_sort_over_100_mib(self):
        """A sort the door does holds at most 100 MiB: past it 292, and
        the same query sorted by an index answers."""
        c = self.db.bigsort
        s = "s" * (MiB - 100)
        for i in range(104):
            c.insert_one({"_id": i, "k": 103 - i, "s": s})
        with self.assertRaises(OperationFailure) as e:
            next(c.find({}, {"k": 1}).sort("k", 1))
        self.assertEqual(e.exception.code, 292)
        self.assertEqual(e.exception.details["codeName"],
                         "QueryExceededMemoryLimitNoDiskUseAllowed")
        c.create_index("k")
        got = [d["k"] for d in c.find({}, {"k": 1}).sort("k", 1).limit(3)]
        self.assertEqual(got, [0, 1, 2])
        c.drop()

    def test_distinct_16_mib(self):
        c = self.db.bigdist
        for i in range(17):
            c.insert_one({"_id": i, "s": chr(ord("a") + i) * MiB})
        with self.assertRaises(OperationFailure) as e:
            c.distinct("s")
        self.assertEqual(e.exception.code, 17217)
        self.assertEqual(len(c.distinct("s", {"_id": {"$lt": 15}})), 15)
        c.drop()

    def test_open_cursors_in_all(self):
        """10,000 cursors open in all (1,000 on each of ten connections):
        the next one, on an eleventh connection, is 146 and opens none."""
        self.db.cur.insert_many([{"_id": i} for i in range(3)])
        ds = [self.door() for _ in range(10)]
        for d in ds:
            d.send(b"".join(d.msg({"find": "cur", "batchSize": 1,
                                   "$db": "t"}) for _ in range(1000)))
        ids = []
        for d in ds:
            for _ in range(1000):
                r = d.reply()
                self.assertEqual(r["ok"], 1.0, r)
                ids.append(r["cursor"]["id"])
        self.assertEqual(len(set(ids)), 10000)
        extra = self.door()
        r = extra.call({"find": "cur", "batchSize": 1, "$db": "t"})
        self.assertEqual((r["ok"], r["code"]), (0.0, 146), r)
        self.assertIn("too many open cursors", r["errmsg"])
        # killing some gives room again
        r = ds[0].call({"killCursors": "cur", "cursors": ids[:1000],
                        "$db": "t"})
        self.assertEqual(len(r["cursorsKilled"]), 1000)
        r = extra.call({"find": "cur", "batchSize": 1, "$db": "t"})
        self.assertEqual(r["ok"], 1.0, r)
        ids.append(r["cursor"]["id"])
        ds[1].call({"killCursors": "cur", "cursors": ids[1000:],
                    "$db": "t"})

    def test_getmore_one_at_a_time(self):
        """Four connections getMore one cursor as fast as they can: each
        document comes once, a getMore meeting another is 143."""
        n = 20000
        self.db.race.insert_many([{"_id": i} for i in range(n)])
        d0 = self.door()
        r = d0.call({"find": "race", "batchSize": 1, "$db": "t"})
        cid = r["cursor"]["id"]
        got = [[x["_id"] for x in r["cursor"]["firstBatch"]]]
        codes = []
        lock = threading.Lock()

        def reader():
            d = Door(self.host.mport, timeout=60)
            d.scram("kvd", b"secret")
            mine, seen = [], []
            while True:
                r = d.call({"getMore": cid, "collection": "race",
                            "batchSize": 997, "$db": "t"})
                if r["ok"] != 1:
                    seen.append(r["code"])
                    if r["code"] == 43:  # another took the last batch
                        break
                    continue
                mine += [x["_id"] for x in r["cursor"]["nextBatch"]]
                if r["cursor"]["id"] == 0:
                    break
            d.close()
            with lock:
                got.append(mine)
                codes.extend(seen)
        ts = [threading.Thread(target=reader) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        every = sorted(i for part in got for i in part)
        self.assertEqual(every, list(range(n)), "a document lost or twice")
        self.assertEqual(set(codes) - {143, 43}, set(), codes)
        print("getMore race: %d answered 143" % codes.count(143))

    def test_index_key_too_long(self):
        """A key over 256 bytes fails the build (17280), which drops the
        index; once built, a write of such a document fails."""
        c = self.db.longkey
        c.insert_many([{"_id": 1, "k": "a"}, {"_id": 2, "k": "z" * 300}])
        with self.assertRaises(OperationFailure) as e:
            c.create_index("k")
        self.assertEqual(e.exception.code, 17280)
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])
        c.delete_one({"_id": 2})
        c.create_index("k")
        with self.assertRaises(pymongo.errors.WriteError) as e:
            c.insert_one({"_id": 3, "k": "y" * 300})
        self.assertEqual(e.exception.code, 17280)
        self.assertIsNone(c.find_one({"_id": 3}))
        c.drop()

    def test_ttl_options(self):
        c = self.db.ttlopt
        c.create_index("t", expireAfterSeconds=0, name="t0")
        c.create_index("u", expireAfterSeconds=2147483647, name="tmax")
        for bad in (-1, 2147483648):
            with self.assertRaises(OperationFailure) as e:
                c.create_index("v", expireAfterSeconds=bad)
            self.assertEqual(e.exception.code, 197)
        with self.assertRaises(OperationFailure) as e:
            c.create_index([("a", 1), ("b", 1)], expireAfterSeconds=5)
        self.assertEqual(e.exception.code, 67)
        specs = {i["name"]: i for i in c.list_indexes()}
        self.assertEqual((specs["t0"]["expireAfterSeconds"],
                          specs["tmax"]["expireAfterSeconds"]),
                         (0, 2147483647))
        c.drop()

    def test_drop_indexes_forms(self):
        c = self.db.dropforms
        for f in "abcd":
            c.create_index(f)
        r = self.db.command("dropIndexes", "dropforms", index=["a_1"])
        self.assertEqual(r["nIndexesWas"], 5)
        r = self.db.command("dropIndexes", "dropforms", index={"b": 1})
        self.assertEqual(r["nIndexesWas"], 4)
        r = self.db.command("dropIndexes", "dropforms", index="*")
        self.assertEqual(r["nIndexesWas"], 3)
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])
        with self.assertRaises(OperationFailure) as e:
            self.db.command("dropIndexes", "nosuchcoll", index="*")
        self.assertEqual(e.exception.code, 26)
        c.drop()


class SaltPerStart(unittest.TestCase):
    def first(self, port):
        d = Door(port)
        r = d.call({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                    "payload": bson.Binary(b"n,,n=kvd,r=abcdefghijkl"),
                    "$db": "admin"})
        d.close()
        f = dict(kv.split("=", 1) for kv in
                 bytes(r["payload"]).decode().split(","))
        return f["s"], int(f["i"])

    def test_iterations_and_salt(self):
        h = KvdHost()
        try:
            s1, i1 = self.first(h.mport)
            self.assertEqual((i1, len(base64.b64decode(s1)) >= 16),
                             (15000, True))
            self.assertEqual(self.first(h.mport)[0], s1)
            h.srv.restart()
            s2, _ = self.first(h.mport)
            self.assertNotEqual(s1, s2, "the same salt after a restart")
            d = Door(h.mport)
            self.assertTrue(d.scram("kvd", b"secret")[0])
            d.close()
        finally:
            h.stop()


class ReplicaHello(unittest.TestCase):
    def test_replica_answers_as_standalone_and_min_replicas(self):
        p = KvdHost(password=None)
        r = None
        try:
            r = KvdHost(password=None,
                        args=["--replicaof", "127.0.0.1", str(p.srv.port)])
            d = Door(r.mport)
            h = d.call({"hello": 1, "$db": "admin"})
            self.assertIs(h["isWritablePrimary"], True)
            self.assertNotIn("setName", h)
            d.close()
        finally:
            if r:
                r.stop()
            p.stop()
        # too few good replicas for min-replicas-to-ack: 100, nothing
        # written
        h = KvdHost(password=None, args=["--min-replicas-to-ack", "1"])
        try:
            d = Door(h.mport)
            r = d.call({"insert": "c", "documents": [{"_id": 1}],
                        "$db": "t"})
            code = r.get("code", (r.get("writeErrors") or [{}])[0]
                         .get("code"))
            self.assertEqual(code, 100, r)
            r = d.call({"find": "c", "$db": "t"})
            self.assertEqual(r["cursor"]["firstBatch"], [])
            d.close()
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
