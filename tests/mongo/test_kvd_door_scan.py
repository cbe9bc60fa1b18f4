"""test_kvd_door_scan.py - reads of an _id range through a real kvd's
--mongo-port: a filter on _id ({$gte: k}, {$lt: k}, $in, a range with
another predicate) reads the documents of its _id interval only, and a
sort on {_id: 1} is the order kvd keeps documents in, so the door streams
them (YCSB E's scan, find({_id: {$gte: k}}).sort({_id: 1}).limit(n))
instead of reading the whole collection into a sort.  The results are
compared with MongoDB's documented semantics: a range is bracketed by its
operand's type (numbers of every BSON type on one line), sorted in
MongoDB's cross-type order.
"""

import sys
import unittest

import kvdtest

try:
    from bson.int64 import Int64
    from bson.objectid import ObjectId
    from pymongo import ASCENDING, DESCENDING, MongoClient
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)


class IdRanges(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mport = kvdtest.free_port()
        cls.srv = kvdtest.Server(args=["--mongo-port", str(cls.mport)]).start()
        cls.cl = MongoClient("mongodb://127.0.0.1:%d/" % cls.mport,
                             serverSelectionTimeoutMS=5000)
        cls.c = cls.cl.t.ranges
        cls.oid = ObjectId()
        docs = [{"_id": i, "odd": i % 2 == 1} for i in range(300)]
        docs += [{"_id": 1.5}, {"_id": Int64(1000)}]
        docs += [{"_id": ch} for ch in "abcxyz"]
        docs += [{"_id": {"k": 1}}, {"_id": cls.oid}, {"_id": None}]
        cls.c.insert_many(docs)

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.srv.stop()
        cls.srv.cleanup()

    def ids(self, flt, sort=ASCENDING, limit=0, **kw):
        return [d["_id"] for d in self.c.find(flt, sort=[("_id", sort)], limit=limit, **kw)]

    def test_gte_sorted_with_limit(self):
        self.assertEqual(self.ids({"_id": {"$gte": 100}}, limit=5), [100, 101, 102, 103, 104])
        # numbers only, whatever their type, in numeric order
        self.assertEqual(self.ids({"_id": {"$gte": 297}}), [297, 298, 299, 1000])
        self.assertEqual(self.ids({"_id": {"$gt": 1}}, limit=3), [1.5, 2, 3])
        self.assertEqual(self.ids({"_id": {"$gte": 297}}, sort=DESCENDING, limit=2), [1000, 299])

    def test_upper_bounds_and_strings(self):
        self.assertEqual(self.ids({"_id": {"$lt": 3}}), [0, 1, 1.5, 2])
        self.assertEqual(self.ids({"_id": {"$gt": "b", "$lte": "y"}}), ["c", "x", "y"])
        self.assertEqual(self.ids({"_id": {"$gte": "x"}}), ["x", "y", "z"])
        self.assertEqual(self.ids({"_id": {"$gt": {"k": 0}}}), [{"k": 1}])
        self.assertEqual(self.ids({"_id": {"$gte": 2000}}), [])
        self.assertEqual(self.ids({"_id": {"$lte": None}}), [None])

    def test_in_and_other_predicates(self):
        self.assertEqual(self.ids({"_id": {"$in": [5, "b", 1000, 7000, self.oid]}}),
                         [5, 1000, "b", self.oid])
        self.assertEqual(self.ids({"_id": {"$gte": 10, "$lt": 20}, "odd": True}),
                         [11, 13, 15, 17, 19])
        self.assertEqual(self.ids({"$and": [{"_id": {"$gte": 290}}, {"_id": {"$lt": 293}}]}),
                         [290, 291, 292])
        self.assertEqual(self.c.count_documents({"_id": {"$gte": 0}}), 302)
        # a filter without _id bounds still reads the whole collection
        self.assertEqual(len(self.ids({"odd": True})), 150)
        self.assertEqual(self.ids({"$or": [{"_id": 3}, {"_id": "z"}]}), [3, "z"])

    def test_sorted_scan_streams(self):
        """A find sorted by _id is answered from the scan as it goes, not
        from a sort of everything it matched when the cursor opened: a
        document inserted past the first batch, beyond the 256 the scan
        had read, is in a later batch (a sort would have missed it)."""
        c = self.cl.t.stream
        c.insert_many([{"_id": i} for i in range(600)])
        cur = c.find({"_id": {"$gte": 0}}, sort=[("_id", ASCENDING)], batch_size=10)
        first = [next(cur)["_id"] for _ in range(10)]
        self.assertEqual(first, list(range(10)))
        c.insert_one({"_id": 100000})
        rest = [d["_id"] for d in cur]
        self.assertEqual(first + rest, list(range(600)) + [100000])


if __name__ == "__main__":
    unittest.main()
