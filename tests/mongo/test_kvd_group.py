"""test_kvd_group.py - aggregate's $group over an index prefix through a
real kvd's --mongo-port (pymongo): a $group whose _id is "$f", first or
after a $match, reads through an index on f and streams (its groups come
in the index's order, where a collection scan gives them as first seen),
its results equal to a collection scan's for the same documents (numbers
of several types, null and missing, arrays, strings), explain shows the
index, and groups that together pass the 100 MiB $group limit (292 by a
collection scan) pass when streamed, one group held at a time.
"""

import os
import sys
import unittest

import kvdtest  # noqa: F401  (the environment of the build's kvd)

try:
    import pymongo  # noqa: F401
    from bson.int64 import Int64
    from pymongo.errors import OperationFailure
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402

SCAN = {"$natural": 1}


def docs():
    out = [{"_id": i, "g": (i * 7919) % 50, "v": i} for i in range(300)]
    out += [{"_id": 300, "v": 1}, {"_id": 301, "g": None, "v": 2},
            {"_id": 302, "g": 3.0, "v": 3}, {"_id": 303, "g": Int64(4)},
            {"_id": 304, "g": [1, 2]}, {"_id": 305, "g": [1, 2]},
            {"_id": 306, "g": "s"}, {"_id": 307, "g": {"x": 1}}]
    return out


def key(g):
    """A sortable stand-in for a group's _id."""
    return (type(g).__name__, repr(g))


class GroupStream(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(password=None)
        cls.cl = cls.host.client("")
        cls.db = cls.cl.grt
        cls.db.g.insert_many(docs())
        cls.db.g.create_index("g", name="g_1")

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def agg(self, pipeline, **kw):
        return list(self.db.g.aggregate(pipeline, **kw))

    def test_streams_in_index_order_equal_to_scan(self):
        p = [{"$group": {"_id": "$g", "n": {"$sum": 1},
                         "ids": {"$push": "$_id"}}}]
        ix, scan = self.agg(p), self.agg(p, hint=SCAN)
        self.assertEqual(sorted(((key(d["_id"]), d["n"], sorted(d["ids"]))
                                 for d in ix)),
                         sorted(((key(d["_id"]), d["n"], sorted(d["ids"]))
                                 for d in scan)))
        self.assertEqual(len(ix), 50 + 4)  # 0..49, null, "s", {x}, [1, 2]
        nums = [d["_id"] for d in ix if isinstance(d["_id"], (int, float))]
        # streamed: in the index's order; the scan's groups come as first
        # seen (_id order: g = 0, 19, 38, 7, ...)
        self.assertEqual(nums, sorted(nums))
        self.assertNotEqual([d["_id"] for d in scan
                             if isinstance(d["_id"], (int, float))],
                            sorted(nums))
        three = [d for d in ix if d["_id"] == 3][0]
        self.assertIn(302, three["ids"])  # 3.0 joins 3
        null = [d for d in ix if d["_id"] is None][0]
        self.assertEqual(sorted(null["ids"]), [300, 301])
        # an array's group is the array itself, given after the others
        self.assertEqual(ix[-1]["_id"], [1, 2])
        self.assertEqual(sorted(ix[-1]["ids"]), [304, 305])

    def test_after_a_match_the_index_serves(self):
        p = [{"$match": {"g": {"$gte": 10, "$lt": 20}}},
             {"$group": {"_id": "$g", "s": {"$sum": "$v"}}}]
        ix, scan = self.agg(p), self.agg(p, hint=SCAN)
        self.assertEqual([d["_id"] for d in ix], list(range(10, 20)))
        self.assertEqual(sorted(ix, key=lambda d: d["_id"]),
                         sorted(scan, key=lambda d: d["_id"]))
        r = self.db.command("aggregate", "g", pipeline=p, explain=True)
        wp = r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
        self.assertEqual(wp["inputStage"]["indexName"], "g_1")

    def test_explain_names_the_index(self):
        # a group reading g alone is fed from g_1's entries (covered:
        # test_kvd_covered.py); one reading another field, from documents
        for acc, stage in (({}, "PROJECTION_COVERED"),
                           ({"v": {"$max": "$v"}}, "FETCH")):
            r = self.db.command("aggregate", "g", pipeline=[
                {"$group": dict({"_id": "$g"}, **acc)}], explain=True)
            wp = r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
            self.assertEqual((wp["stage"], wp["inputStage"]["stage"],
                              wp["inputStage"]["indexName"]),
                             (stage, "IXSCAN", "g_1"))
            self.assertEqual(list(r["stages"][1]), ["$group"])

    def test_past_the_group_limit_when_streamed(self):
        # 110 groups of a 1 MiB $push each: 110 MiB held by a scan's
        # $group (292), one group at a time streamed
        c = self.db.big
        pad = "p" * (1 << 20)
        c.create_index("k")
        for i in range(110):
            c.insert_one({"_id": i, "k": (i * 37) % 110, "pad": pad})
        p = [{"$group": {"_id": "$k", "pads": {"$push": "$pad"}}},
             {"$project": {"_id": 1}}]
        got = list(c.aggregate(p))
        self.assertEqual([d["_id"] for d in got], list(range(110)))
        with self.assertRaises(OperationFailure) as e:
            list(c.aggregate(p, hint=SCAN))
        self.assertEqual(e.exception.code, 292)
        c.drop()


if __name__ == "__main__":
    unittest.main()
