"""test_kvd_door_repl.py - documents travel as kvd's other data does: a
replica of a real primary serves the primary's documents and collections
(those the native protocol's operations 50-56 make too, which it refuses
as every native write) through its own door and refuses writes there (10107
NotWritablePrimary, as a MongoDB secondary does), as does a read-only
kvd; a BACKUP restored into a new data directory serves the documents
and collections it was taken with.
"""

import os
import shutil
import sys
import tempfile
import time
import unittest

import bson
import kvdtest
from kvdtest import BACKUP, OK

try:
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import KvdHost  # noqa: E402

# Every kind of write, as the door receives it.
WRITES = [
    {"insert": "c", "documents": [{"_id": "new"}]},
    {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"x": 1}}}]},
    {"update": "c", "updates": [{"q": {"v": 1}, "u": {"$set": {"x": 1}},
                                 "multi": True}]},
    {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]},
    {"findAndModify": "c", "query": {"_id": 3}, "remove": True},
    {"create": "made"},
    {"drop": "c"},
    {"dropDatabase": 1},
    {"createIndexes": "c", "indexes": [{"key": {"s": 1}, "name": "s_1"}]},
    {"dropIndexes": "c", "index": "v_1"},
]


def fill(cl):
    """Two databases, three collections (one created empty), updates and
    deletes: what a copy must carry."""
    c = cl.t.c
    c.insert_many([{"_id": i, "v": i % 7, "s": "x" * (i % 50)}
                   for i in range(1000)])
    c.update_many({"v": 3}, {"$push": {"l": "p"}, "$inc": {"n": 2}})
    c.delete_many({"v": 6})
    c.create_index("v", name="v_1")
    cl.t.create_collection("empty")
    cl.other.d.insert_one({"_id": "only", "nested": {"a": [1, {"b": 2}]}})
    cl.t.gone.insert_one({"_id": 1})
    cl.t.gone.drop()


def same_as_filled(test, cl):
    """cl sees exactly what fill made."""
    test.assertEqual(sorted(cl.t.list_collection_names()), ["c", "empty"])
    test.assertIn("other", cl.list_database_names())
    c = cl.t.c
    test.assertEqual(c.count_documents({}), 1000 - 1000 // 7)
    test.assertEqual(c.count_documents({"v": 6}), 0)
    test.assertEqual(c.find_one({"_id": 3}),
                     {"_id": 3, "v": 3, "s": "xxx", "l": ["p"], "n": 2})
    test.assertEqual(c.count_documents({"l": "p"}), len(range(3, 1000, 7)))
    # the index came too, and serves the copy's queries
    test.assertEqual(sorted(i["name"] for i in c.list_indexes()),
                     ["_id_", "v_1"])
    plan = c.find({"v": 3}).explain()["queryPlanner"]["winningPlan"]
    test.assertEqual(plan["inputStage"]["indexName"], "v_1", plan)
    test.assertEqual(c.count_documents({"v": 3}), len(range(3, 1000, 7)))
    test.assertEqual(cl.other.d.find_one(),
                     {"_id": "only", "nested": {"a": [1, {"b": 2}]}})
    test.assertEqual(cl.t.empty.count_documents({}), 0)
    test.assertEqual(cl.t.gone.count_documents({}), 0)


def refused(test, port):
    """Every write on port's door answers 10107 and changes nothing."""
    d = Door(port)
    for w in WRITES:
        r = d.call(dict(w, **{"$db": "t"}))
        test.assertEqual((r["ok"], r["code"], r["codeName"]),
                         (0.0, 10107, "NotWritablePrimary"), (w, r))
        test.assertTrue(r["errmsg"].startswith("not primary"), r)
    # reads go on
    r = d.call({"find": "c", "filter": {"_id": 1}, "$db": "t"})
    test.assertEqual(r["cursor"]["firstBatch"][0]["_id"], 1, r)
    d.close()


def eventually(check, what, timeout=30):
    """check() (assertions) holds within timeout: the replica applies each
    shard's stream on its own, so one shard's writes (a count reached) may
    show before another's (an update, an index's entries there)."""
    deadline = time.time() + timeout
    while True:
        try:
            return check()
        except (AssertionError, pymongo.errors.PyMongoError) as e:
            if time.time() > deadline:
                raise AssertionError("%s: %s" % (what, e)) from e
            time.sleep(0.05)


class DoorReplica(unittest.TestCase):
    def test_replica_carries_documents(self):
        p = KvdHost(password=None,
                    args=["--journal-segment-size", "1m"])
        r = None
        try:
            pc = p.client("")
            fill(pc)
            r = KvdHost(password=None,
                        args=["--replicaof", "127.0.0.1", str(p.srv.port)])
            rc = r.client("")

            def synced(n):
                try:
                    return rc.t.c.count_documents({}) == n
                except pymongo.errors.PyMongoError:
                    return False
            kvdtest.wait_for(lambda: synced(1000 - 1000 // 7), 30,
                             "the replica's full copy")
            eventually(lambda: same_as_filled(self, rc),
                       "every shard's copy")
            # what the primary does next arrives too (the stream, not
            # only the full copy)
            pc.t.c.update_one({"_id": 1}, {"$set": {"after": True}})
            pc.t.c.insert_one({"_id": "late"})
            pc.t.empty.drop()
            kvdtest.wait_for(lambda: synced(1000 - 1000 // 7 + 1), 30,
                             "the primary's later writes")
            kvdtest.wait_for(
                lambda: "empty" not in rc.t.list_collection_names(), 30,
                "the drop")
            eventually(lambda: self.assertTrue(
                rc.t.c.find_one({"_id": 1})["after"]), "the update")
            # the native protocol's collection and index changes (50-56)
            # are the same writes: they arrive, and a replica refuses them
            nc = p.srv.client()
            spec = bson.encode({"key": {"s": 1}, "name": "s_native"})
            self.assertEqual(nc.call(kvdtest.DOCIXCREATE, b"t", b"c", spec),
                             [OK, 2, 3, 0])
            self.assertEqual(nc.call(kvdtest.DOCCREATE, b"t", b"nat"), [OK])
            nc.close()
            kvdtest.wait_for(
                lambda: "nat" in rc.t.list_collection_names() and
                "s_native" in [i["name"] for i in rc.t.c.list_indexes()],
                30, "the native changes")
            plan = rc.t.c.find({"s": "xx"}).explain()
            self.assertIn("s_native", str(plan["queryPlanner"]))
            eventually(lambda: self.assertEqual(
                rc.t.c.count_documents({"s": "xx"}),
                len([i for i in range(1000) if i % 50 == 2 and i % 7 != 6])),
                "the index's entries from every shard")
            rn = r.srv.client()
            for req in [(kvdtest.DOCCREATE, b"t", b"x"),
                        (kvdtest.DOCDROP, b"t", b"c"),
                        (kvdtest.DOCIXCREATE, b"t", b"c", spec),
                        (kvdtest.DOCIXDROP, b"t", b"c", b"s_native")]:
                self.assertEqual(rn.call(*req)[0],
                                 kvdtest.REPLICA_READ_ONLY, req)
            rn.close()
            # writes through the replica's door are refused
            refused(self, r.mport)
            with self.assertRaises(pymongo.errors.PyMongoError):
                rc.t.c.insert_one({"_id": "on-replica"})
            self.assertIsNone(pc.t.c.find_one({"_id": "on-replica"}))
            self.assertIsNone(rc.t.c.find_one({"_id": "on-replica"}))
            self.assertIsNone(rc.t.c.find_one({"_id": "new"}))
            pc.close()
            rc.close()
        finally:
            if r:
                r.stop()
            p.stop()

    def test_read_only_server_refuses_writes(self):
        h = KvdHost(password=None)
        try:
            h.client("").t.c.insert_one({"_id": 1})
            h.srv.restart(extra=h.srv.extra + ["--read-only", "yes"])
            refused(self, h.mport)
        finally:
            h.stop()


class DoorBackup(unittest.TestCase):
    def test_backup_carries_documents(self):
        tmp = tempfile.mkdtemp(prefix="kvddoorbk-")
        bk = os.path.join(tmp, "bk")
        h = KvdHost(password=None, args=["--backup-anywhere", "yes"])
        try:
            cl = h.client("")
            fill(cl)
            c = h.srv.client()
            st, _ = c.call(BACKUP, bk.encode())
            self.assertEqual(st, OK)
            c.close()
            # after the backup: not in it
            cl.t.c.insert_one({"_id": "after"})
            cl.t.create_collection("later")
            cl.close()
        finally:
            h.stop()
        r = KvdHost(password=None, data_dir=os.path.join(tmp, "restored"),
                    args=["--restore", bk])
        try:
            cl = r.client("")
            same_as_filled(self, cl)
            self.assertIsNone(cl.t.c.find_one({"_id": "after"}))
            # the restored store goes on: new documents, new collections
            # (the catalog's next id was restored with it)
            cl.t.c.insert_one({"_id": "restored"})
            cl.t.fresh.insert_one({"_id": 1})
            self.assertEqual(sorted(cl.t.list_collection_names()),
                             ["c", "empty", "fresh"])
            self.assertEqual(cl.t.fresh.count_documents({}), 1)
            cl.close()
        finally:
            r.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
