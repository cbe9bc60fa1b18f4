"""test_pymongo.py - pymongo (Debian's python3-pymongo 3.11) against the
MongoDB door, through tests/mongo/mdoor_host: the door's module and the
in-memory store behind a loopback socket, with writes completed on the
host's next loop turn (--defer), as kvd's committers complete them.

What a real driver proves that the C tests cannot: its handshake (legacy
isMaster over OP_QUERY, then OP_MSG), its choice of SCRAM-SHA-256 from
saslSupportedMechs and its speculative authentication, the shapes of the
replies it parses (cursors and getMore, writeErrors, upserted ids,
findAndModify's value), fire-and-forget writes (w=0, moreToCome), and its
errors for wrong credentials and unauthenticated commands.
"""

import os
import subprocess
import sys
import unittest

try:
    import pymongo
    from pymongo import MongoClient, ReturnDocument
    from pymongo.errors import BulkWriteError, OperationFailure
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

BUILD = os.environ.get("KVD_BUILD_DIR", "build")
HOST = os.path.join(BUILD, "tests", "mongo", "mdoor_host")


class Host:
    """mdoor_host on a port the kernel picks."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([HOST, "--port", "0", "--defer"] +
                                     list(args), stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def client(self, creds="kvd:secret@", **kw):
        return MongoClient("mongodb://%s127.0.0.1:%d/?authSource=admin" %
                           (creds, self.port),
                           serverSelectionTimeoutMS=5000, **kw)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class PymongoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = Host("--password", "secret", "--user", "kvd")
        cls.cl = cls.host.client()
        cls.db = cls.cl.test

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def setUp(self):
        self.db.drop_collection("c")

    def test_handshake(self):
        info = self.cl.server_info()
        self.assertEqual(info["version"], "6.0.0")
        self.assertEqual(info["versionArray"], [6, 0, 0, 0])
        self.assertEqual(self.cl.admin.command("ping")["ok"], 1.0)
        hello = self.cl.admin.command("hello")
        self.assertEqual(hello["maxWireVersion"], 17)
        self.assertTrue(hello["isWritablePrimary"])
        status = self.cl.admin.command("connectionStatus")
        self.assertEqual(status["authInfo"]["authenticatedUsers"],
                         [{"user": "kvd", "db": "admin"}])

    def test_crud(self):
        c = self.db.c
        ids = c.insert_many([{"_id": i, "v": i % 7} for i in range(250)])
        self.assertEqual(len(ids.inserted_ids), 250)
        got = list(c.find({"v": 3}, {"_id": 1}).sort("_id", -1)
                   .skip(1).limit(3))
        self.assertEqual(got, [{"_id": 241}, {"_id": 234}, {"_id": 227}])
        # 250 documents by batches of 10: 25 getMores
        self.assertEqual(len(list(c.find().batch_size(10))), 250)
        self.assertEqual(c.count_documents({"v": {"$gt": 3}}), 106)
        self.assertEqual(c.estimated_document_count(), 250)
        self.assertEqual(sorted(c.distinct("v")), list(range(7)))
        r = c.update_many({"v": 1}, {"$inc": {"v": 100}})
        self.assertEqual((r.matched_count, r.modified_count), (36, 36))
        r = c.update_one({"_id": "new"}, {"$set": {"v": 5}}, upsert=True)
        self.assertEqual(r.upserted_id, "new")
        r = c.replace_one({"_id": "new"}, {"w": 1})
        self.assertEqual(r.modified_count, 1)
        self.assertEqual(c.find_one({"_id": "new"}), {"_id": "new", "w": 1})
        doc = c.find_one_and_update({"_id": "new"}, {"$inc": {"w": 1}},
                                    return_document=ReturnDocument.AFTER)
        self.assertEqual(doc, {"_id": "new", "w": 2})
        self.assertEqual(c.find_one_and_delete({"_id": "new"})["w"], 2)
        self.assertEqual(c.delete_many({"v": {"$gte": 100}}).deleted_count,
                         36)
        self.assertEqual(c.delete_one({"_id": 0}).deleted_count, 1)
        groups = list(c.aggregate([{"$group": {"_id": "$v",
                                               "n": {"$sum": 1}}},
                                   {"$sort": {"_id": 1}}]))
        self.assertEqual(groups[0], {"_id": 0, "n": 35})
        self.assertEqual(len(groups), 6)

    def test_write_errors(self):
        c = self.db.c
        c.insert_one({"_id": 1})
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}])
        self.assertEqual(e.exception.details["nInserted"], 1)
        err = e.exception.details["writeErrors"][0]
        self.assertEqual((err["index"], err["code"]), (1, 11000))
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many([{"_id": 4}, {"_id": 1}, {"_id": 5}],
                          ordered=False)
        self.assertEqual(e.exception.details["nInserted"], 2)
        with self.assertRaises(OperationFailure) as e:
            c.update_one({}, {"$foo": {"a": 1}})
        self.assertEqual(e.exception.code, 9)
        with self.assertRaises(OperationFailure) as e:
            list(c.find({"$bad": 1}))
        self.assertEqual(e.exception.code, 2)

    def test_unacknowledged(self):
        w0 = self.db.get_collection(
            "c", write_concern=pymongo.WriteConcern(w=0))
        for i in range(50):
            w0.insert_one({"_id": i})
        # the next acknowledged request waits behind the w=0 writes
        self.assertEqual(self.db.c.count_documents({}), 50)

    def test_collections(self):
        self.db.create_collection("made")
        self.assertIn("made", self.db.list_collection_names())
        self.assertIn("test", self.cl.list_database_names())
        self.assertEqual(list(self.db.made.list_indexes())[0]["name"], "_id_")
        self.db.drop_collection("made")
        self.assertNotIn("made", self.db.list_collection_names())

    def test_wrong_password(self):
        cl = self.host.client("kvd:wrong@")
        with self.assertRaises(OperationFailure) as e:
            cl.admin.command("ping")
        self.assertEqual(e.exception.code, 18)
        cl.close()
        cl = self.host.client("bob:secret@")
        with self.assertRaises(OperationFailure):
            cl.admin.command("ping")
        cl.close()

    def test_unauthenticated(self):
        cl = self.host.client("")
        self.assertEqual(cl.admin.command("ping")["ok"], 1.0)
        with self.assertRaises(OperationFailure) as e:
            cl.test.c.find_one()
        self.assertEqual(e.exception.code, 13)
        self.assertIn("requires authentication", str(e.exception))
        cl.close()


if __name__ == "__main__":
    unittest.main()
