"""test_kvd_ttl.py - TTL indexes through a real kvd's --mongo-port
(pymongo), with the TTL monitor passing every second
(--mongo-ttl-interval 1): documents whose date (an array's earliest) is
expireAfterSeconds past are deleted, documents with later dates, non-date
values or no field stay, a partial TTL index reaps only its documents, the
collection's other indexes stay exact, a replica gets the deletes, and the
reservations of a unique index's keys that reaped documents held are
released (the shards' LMDB files read by mdb_dump after SAVE), so a
collection whose documents come and go keeps none of the gone.
"""

import datetime
import os
import shutil
import sys
import unittest

import kvdtest

try:
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402
from test_kvd_purge import store_keys  # noqa: E402

NATURAL = [("$natural", 1)]
HOUR = datetime.timedelta(hours=1)


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None)


def fill(c):
    """Documents 0-99 expired an hour ago, the rest not; their g field
    under another index."""
    t = now()
    docs = [{"_id": i, "t": t - 2 * HOUR, "g": i % 7} for i in range(100)]
    docs += [{"_id": 100, "t": t + HOUR, "g": 1},
             {"_id": 101, "t": [t + HOUR, t - 3 * HOUR], "g": 2},
             {"_id": 102, "t": [t + HOUR, t + 2 * HOUR], "g": 3},
             {"_id": 103, "t": "yesterday", "g": 4},
             {"_id": 104, "t": 12, "g": 5},
             {"_id": 105, "g": 6},
             {"_id": 106, "t": t - 30 * datetime.timedelta(minutes=1)}]
    c.insert_many(docs)
    return {100, 102, 103, 104, 105, 106}


class Ttl(unittest.TestCase):
    def test_reaped(self):
        h = KvdHost(password=None, args=["--mongo-ttl-interval", "1"])
        r = None
        try:
            c = h.client("").t.ttl
            c.create_index("g")
            c.create_index("t", expireAfterSeconds=3600)
            self.assertEqual([i.get("expireAfterSeconds") for i in
                              c.list_indexes() if i["name"] == "t_1"],
                             [3600])
            rport = kvdtest.free_port()
            r = kvdtest.Server(args=["--mongo-port", str(rport),
                                     "--mongo-ttl-interval", "1",
                                     "--replicaof", "127.0.0.1",
                                     str(h.srv.port)]).start()
            keep = fill(c)
            kvdtest.wait_for(lambda: c.count_documents({}) == len(keep),
                             60, "the TTL monitor")
            self.assertEqual({d["_id"] for d in c.find()}, keep)
            # the other index has no entry of a deleted document
            for g in range(7):
                self.assertEqual(
                    sorted(d["_id"] for d in c.find({"g": g}).hint("g_1")),
                    sorted(d["_id"] for d in c.find({"g": g})
                           .hint(NATURAL)))
            # the replica got the deletes as records
            rc = pymongo.MongoClient("mongodb://127.0.0.1:%d/" % rport,
                                     serverSelectionTimeoutMS=5000).t.ttl
            kvdtest.wait_for(
                lambda: {d["_id"] for d in rc.find()} == keep, 60,
                "the replica")
            # a document updated to a later date stays
            c.insert_one({"_id": 200, "t": now()})
            c.update_one({"_id": 200}, {"$set": {"t": now() + HOUR}})
            c.insert_one({"_id": 201, "t": now() - 2 * HOUR})
            kvdtest.wait_for(lambda: c.find_one({"_id": 201}) is None, 60,
                             "the next pass")
            self.assertIsNotNone(c.find_one({"_id": 200}))
        finally:
            if r:
                r.stop()
                r.cleanup()
            h.stop()

    def test_partial(self):
        h = KvdHost(password=None, args=["--mongo-ttl-interval", "1"])
        try:
            c = h.client("").t.p
            c.create_index("t", expireAfterSeconds=0,
                           partialFilterExpression={"kind": "tmp"})
            old = now() - HOUR
            c.insert_many([{"_id": 1, "t": old, "kind": "tmp"},
                           {"_id": 2, "t": old, "kind": "keep"},
                           {"_id": 3, "t": old}])
            kvdtest.wait_for(lambda: c.find_one({"_id": 1}) is None, 60,
                             "the TTL monitor")
            self.assertEqual(sorted(d["_id"] for d in c.find()), [2, 3])
        finally:
            h.stop()

    def test_unique_keys_released(self):
        """Sessions that expire, under a unique index on their token:
        round after round, the reservations stay those of the live
        documents, and a reaped document's token can be taken again."""
        if not shutil.which("mdb_dump"):
            self.skipTest("mdb_dump is not installed (lmdb-utils)")
        h = KvdHost(password=None, resp=True,
                    args=["--mongo-ttl-interval", "1"])
        try:
            c = h.client("").t.sessions
            c.create_index("t", expireAfterSeconds=3600)
            c.create_index("tok", unique=True)
            uq = [i for i in h.client("").t.command(
                "listIndexes", "sessions")["cursor"]["firstBatch"]
                if i["name"] == "tok_1"]
            self.assertEqual(len(uq), 1)

            def reservations():
                # keyspace I, an index id with its top bit set
                return sum(1 for k in store_keys(h.srv)
                           if k[:1] == b"I" and len(k) >= 5 and k[1] & 0x80)
            for r in range(3):
                c.insert_many([{"_id": "%d-%d" % (r, i), "tok": i,
                                "t": now() - 2 * HOUR} for i in range(300)])
                c.insert_many([{"_id": "live-%d-%d" % (r, i),
                                "tok": 1000 * (r + 1) + i, "t": now()}
                               for i in range(10)])
                kvdtest.wait_for(
                    lambda: c.count_documents({}) == 10 * (r + 1), 60,
                    "the TTL monitor")
                kvdtest.wait_for(lambda: reservations() == 10 * (r + 1),
                                 60, "the reaped documents' keys released")
            with self.assertRaises(pymongo.errors.DuplicateKeyError):
                c.insert_one({"_id": "x", "tok": 1000})
            c.insert_one({"_id": "y", "tok": 5, "t": now()})
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
