"""test_kvd_covered.py - covered queries through a real kvd's --mongo-port
(pymongo): a find whose filter, sort and projection ({..., _id: 0}) read
only an index's top-level fields, and a count whose filter does, answer
from the index's entries (explain: PROJECTION_COVERED or COUNT over IXSCAN,
totalDocsExamined 0), as does the drivers' countDocuments (an aggregate
whose $group reads no field), with the very bytes a fetch of the
documents gives (compared raw with the same query read by a collection
scan); documents whose key does not give their fields back
(NumberDecimal("5.0") or -0.0 for 5 or 0, arrays, fields in another order
than the index's) are fetched (5.0 and NumberLong(5), one key with 5, are
given back by the type kept beside it), and updates that change that are
followed.
Builds (in ranges, and the unique one's pass) and a restart after kill -9
keep the entries covered.
"""

import datetime
import os
import sys
import unittest

import kvdtest  # noqa: F401

try:
    import pymongo
    from bson.codec_options import CodecOptions
    from bson.decimal128 import Decimal128
    from bson.int64 import Int64
    from bson.objectid import ObjectId
    from bson.raw_bson import RawBSONDocument
    from bson.son import SON
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402
from test_kvd_index import RangesHost  # noqa: E402

RAW = CodecOptions(document_class=RawBSONDocument)
NATURAL = [("$natural", 1)]
PROJ = {"k": 1, "s": 1, "_id": 0}


def docs():
    """Documents of every kind of value the index {k: 1, s: -1} meets."""
    out = [SON([("_id", i), ("k", i % 7), ("s", "v%d" % i), ("pad", "x")])
           for i in range(60)]
    odd = [
        SON([("_id", "dbl"), ("k", 5.0), ("s", "d")]),
        SON([("_id", "frac"), ("k", 5.5), ("s", "f")]),
        SON([("_id", "long"), ("k", Int64(5)), ("s", "l")]),
        SON([("_id", "big"), ("k", Int64(1 << 40)), ("s", "b")]),
        SON([("_id", "dec"), ("k", Decimal128("5.0")), ("s", "m")]),
        SON([("_id", "negz"), ("k", -0.0), ("s", "z")]),
        SON([("_id", "dblz"), ("k", 0.0), ("s", "z")]),
        SON([("_id", "arr"), ("k", [5, 6]), ("s", "a")]),
        SON([("_id", "empty"), ("k", []), ("s", "e")]),
        SON([("_id", "rev"), ("s", "r"), ("k", 5)]),
        SON([("_id", "nok"), ("s", "n")]),
        SON([("_id", "nos"), ("k", 5)]),
        SON([("_id", "none")]),
        SON([("_id", "null"), ("k", None), ("s", None)]),
        SON([("_id", "sub"), ("k", SON([("x", 1), ("y", 2.0)])), ("s", "s")]),
        SON([("_id", "subi"), ("k", SON([("x", 1)])), ("s", "t")]),
        SON([("_id", "oid"), ("k", ObjectId("5f0000000000000000000001")),
             ("s", "o")]),
        SON([("_id", "date"),
             ("k", datetime.datetime(2026, 12, 7, 4, 0, 0)), ("s", "t")]),
        SON([("_id", "bool"), ("k", True), ("s", "b")]),
        SON([("_id", "str"), ("k", "5"), ("s", "q")]),
        SON([("_id", "sarr"), ("k", 5), ("s", ["x", "y"])]),
    ]
    return out + odd


FILTERS = [
    {"k": 5},
    {"k": 0},
    {"k": {"$gte": 3}},
    {"k": {"$in": [1, 5, "5"]}},
    {"k": None},
    {"k": {"$exists": False}},
    {"k": 5, "s": {"$gt": "a"}},
    {"k": {"$type": "double"}},
    {"$or": [{"k": 2}, {"s": "d"}]},
    {"k": {"$gte": {"x": 0}}},
    {"k": {"$lt": 100}, "s": {"$not": {"$regex": "^v1"}}},
    {"k.x": 1},
]


def norm(v):
    """v as distinct and $group compare it: they keep the first of equal
    values they meet (5, 5.0, Int64(5)), and an index and a scan meet them
    in other orders, so numbers count by value; other types by theirs."""
    if isinstance(v, Decimal128):
        v = float(v.to_decimal())
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("number", float(v))
    if isinstance(v, dict):
        return ("doc", tuple((k, norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        return ("array", tuple(norm(x) for x in v))
    return (type(v).__name__, repr(v))


class Covered(RangesHost):
    host_args = {"password": None}
    creds = ""
    db_name = "cov"
    bulk_keys = "16"  # builds in many ranges

    def coll(self, name, build_after=False, unique=False):
        c = self.db[name]
        c.drop()
        if not build_after:
            c.create_index([("k", 1), ("s", -1)])
        c.insert_many(docs())
        if build_after:  # entries from a build: ranges, or unique's pass
            c.create_index([("k", 1), ("s", -1)],
                           unique=unique, sparse=False)
        return c

    def stats(self, name, filt, proj=PROJ, sort=None):
        cmd = SON([("find", name), ("filter", filt), ("projection", proj)])
        if sort:
            cmd["sort"] = sort
        r = self.db.command("explain", cmd, verbosity="executionStats")
        return r["queryPlanner"]["winningPlan"], r["executionStats"]

    def same(self, c, filt, proj=PROJ, sort=None):
        """The query's raw answer through the index equals a scan's."""
        rc = c.with_options(codec_options=RAW)
        cur = rc.find(filt, proj)
        if sort:
            cur = cur.sort(sort)
        got = [d.raw for d in cur]
        want = [d.raw for d in rc.find(filt, proj).hint(NATURAL)]
        if sort:
            self.assertEqual(got, sorted(got, key=lambda _: 0))
        self.assertEqual(sorted(got), sorted(want), filt)
        return got

    def test_answers_equal_a_scan(self):
        c = self.coll("eq")
        for f in FILTERS:
            self.same(c, f)
            self.same(c, f, {"k": 1, "_id": 0})
            self.same(c, f, {"s": 1, "_id": 0})
            self.same(c, f, {"k.x": 1, "_id": 0})
            self.same(c, f, PROJ, [("s", 1)])
        wp, st = self.stats("eq", {"k": 5})
        self.assertEqual(wp["stage"], "PROJECTION_COVERED", wp)
        self.assertEqual(wp["inputStage"]["stage"], "IXSCAN")
        self.assertEqual(wp["inputStage"]["indexName"], "k_1_s_-1")
        # k = 5 matches 8 + dbl long dec arr rev nos sarr: fetched are
        # those whose key does not give their bytes back (a decimal: 5.0
        # and NumberLong(5) are given back by their type bytes), arrays,
        # and fields in another order
        fetched = {"dec", "arr", "rev", "sarr"}
        n = len(list(c.find({"k": 5})))
        self.assertEqual(st["nReturned"], n)
        self.assertEqual(st["totalDocsExamined"], len(fetched))

    def test_count(self):
        c = self.coll("cnt")
        for f in FILTERS:
            want = len(list(c.find(f).hint(NATURAL)))
            self.assertEqual(self.db.command("count", "cnt", query=f)["n"],
                             want, f)
        r = self.db.command("explain", {"count": "cnt",
                                        "query": {"k": {"$lt": 4}}},
                            verbosity="executionStats")
        self.assertEqual(r["queryPlanner"]["winningPlan"]["stage"], "COUNT")
        # -0.0 alone is read: its key is 0's, and 0.0 is not its bytes
        self.assertEqual(r["executionStats"]["totalDocsExamined"], 1)
        self.assertGreater(r["executionStats"]["totalKeysExamined"], 30)

    def test_count_documents(self):
        """The drivers' countDocuments: aggregate [{$match}, {$group: {_id:
        1, n: {$sum: 1}}}], whose $group reads no field: covered too."""
        c = self.coll("cdoc")
        for f in FILTERS:
            want = len(list(c.find(f).hint(NATURAL)))
            self.assertEqual(c.count_documents(f), want, f)
        self.assertEqual(c.count_documents({"k": 5}, skip=2, limit=3), 3)
        for pipe, covered in (
                ([{"$match": {"k": 5}},
                  {"$group": {"_id": 1, "n": {"$sum": 1}}}], True),
                ([{"$match": {"k": 5}}, {"$count": "n"}], True),
                ([{"$match": {"k": 5}},
                  {"$group": {"_id": 1, "n": {"$sum": "$pad"}}}], False),
                ([{"$match": {"k": 5}}, {"$project": {"k": 1}},
                  {"$count": "n"}], False)):
            r = self.db.command("aggregate", "cdoc", pipeline=pipe,
                                explain=True)
            wp = r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
            self.assertEqual(wp["stage"], "COUNT" if covered else "FETCH",
                             pipe)
            got = list(c.aggregate(pipe))
            want = list(c.aggregate(pipe, hint={"$natural": 1}))
            self.assertEqual(got, want, pipe)

    def test_distinct(self):
        """distinct reads its key's field alone: through the index, the
        entries answer; the values are a scan's."""
        c = self.coll("dst")

        def typed(vals):
            return sorted(norm(v) for v in vals)

        for key in ("k", "s", "k.x", "pad", "_id"):
            for f in FILTERS:
                got = self.db.command("distinct", "dst", key=key, query=f)
                want = self.db.command("distinct", "dst", key=key, query=f,
                                       hint={"$natural": 1})
                self.assertEqual(typed(got["values"]),
                                 typed(want["values"]), (key, f))
        # numbers only ({$gte: 3} is bracketed by type): 3 4 5 5.5 6 2^40
        self.assertEqual(len(c.distinct("k", {"k": {"$gte": 3}})), 6)

    def test_group(self):
        """A $group that reads only index fields (a report by k) is fed
        from the entries; one that reads another field, the documents."""
        c = self.coll("grp")
        cases = [
            ([{"$group": {"_id": "$k", "n": {"$sum": 1}}}], True),
            ([{"$match": {"k": {"$gte": 2}}},
              {"$group": {"_id": "$k", "n": {"$sum": 1},
                          "hi": {"$max": "$s"}, "all": {"$push": "$s"}}}],
             True),
            ([{"$match": {"k": {"$lt": 5}}},
              {"$group": {"_id": {"a": "$k", "b": ["$s", 1]},
                          "n": {"$sum": 1}}}], True),
            ([{"$match": {"k": {"$gte": 2}}},
              {"$group": {"_id": "$k", "p": {"$max": "$pad"}}}], False),
            ([{"$match": {"k": {"$gte": 2}}},
              {"$group": {"_id": "$_id", "k": {"$first": "$k"}}}], False),
            ([{"$match": {"k": {"$gte": 2}}},
              {"$group": {"_id": "$$ROOT"}}], False),
        ]
        for pipe, covered in cases:
            r = self.db.command("aggregate", "grp", pipeline=pipe,
                                explain=True)
            wp = r["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
            if "$match" in pipe[0] or covered:
                self.assertEqual(
                    wp["stage"],
                    "PROJECTION_COVERED" if covered else "FETCH", pipe)

            def groups(**kw):
                out = []
                for d in c.aggregate(pipe, **kw):
                    if "all" in d:  # $push keeps the input's order
                        d["all"] = sorted(d["all"], key=norm)
                    out.append(norm(d))
                return sorted(out)
            self.assertEqual(groups(), groups(hint={"$natural": 1}), pipe)

    def test_not_covered(self):
        c = self.coll("nc")
        c.create_index([("a.b", 1)])
        c.insert_one({"_id": "ab", "a": {"b": 1, "c": 2}})
        cases = [
            ({"k": 5}, {"k": 1}, None),              # _id kept
            ({"k": 5}, {"k": 1, "pad": 1, "_id": 0}, None),
            ({"k": 5, "pad": "x"}, {"k": 1, "_id": 0}, None),
            ({"k": 5}, {"k": 1, "_id": 0}, [("pad", 1)]),
            ({"k": 5}, {"k": {"$slice": 1}, "_id": 0}, None),
            ({"a.b": 1}, {"a.b": 1, "_id": 0}, None),  # a dotted index
        ]
        for f, p, s in cases:
            wp, _ = self.stats("nc", f, p, SON(s) if s else None)
            self.assertEqual(wp["stage"], "FETCH", (f, p, s))
            self.same(c, f, p, s)
        self.assertEqual(
            list(c.find({"a.b": 1}, {"a.b": 1, "_id": 0})),
            [{"a": {"b": 1}}])

    def test_updates_follow(self):
        c = self.coll("up")
        steps = [
            {"$set": {"k": 5.0}},       # same key, not its bytes
            {"$set": {"k": 5}},         # back
            {"$set": {"k": [5]}},       # an array, the same key
            {"$set": {"k": 5}},
            {"$set": {"k": Int64(5)}},
            {"$unset": {"s": 1}},       # a missing field
            {"$set": {"s": "z"}},       # now after k: order kept
        ]
        for u in steps:
            c.update_one({"_id": 5}, u)
            self.same(c, {"k": {"$in": [3, 5]}})
            self.same(c, {"k": {"$in": [3, 5]}}, {"k": 1, "_id": 0})
        # a replacement that puts s before k is fetched, then in order
        c.replace_one({"_id": 10}, SON([("s", "w"), ("k", 3)]))
        self.same(c, {"k": 3})
        _, st = self.stats("up", {"k": 3})
        self.assertEqual(st["totalDocsExamined"], 1)
        c.replace_one({"_id": 10}, SON([("k", 3), ("s", "w")]))
        self.same(c, {"k": 3})
        _, st = self.stats("up", {"k": 3})
        self.assertEqual(st["totalDocsExamined"], 0)
        c.delete_one({"_id": 10})
        self.same(c, {"k": 3})

    def test_builds_cover(self):
        for name, unique in (("bulk", False), ("uq", True)):
            c = self.db[name]
            c.drop()
            c.insert_many([{"_id": i, "k": i, "s": "v%d" % i, "pad": "p"}
                           for i in range(300)])
            c.create_index([("k", 1), ("s", -1)], unique=unique)
            _, st = self.stats(name, {"k": {"$gte": 0}})
            self.assertEqual(st["nReturned"], 300)
            self.assertEqual(st["totalDocsExamined"], 0, name)
            self.same(c, {"k": {"$gte": 0}})


class Restart(unittest.TestCase):
    def test_kill9_keeps_entries_covered(self):
        h = KvdHost(password=None)
        try:
            cl = h.client("")
            c = cl.cov.r
            c.create_index([("k", 1), ("s", 1)])
            c.insert_many(docs())
            c.update_one({"_id": 4}, {"$set": {"k": 4.5}})
            cl.close()
            h.srv.kill9()
            h.start_again()
            cl = h.client("")
            c = cl.cov.r
            r = cl.cov.command("explain", {"find": "r", "filter": {"k": 4},
                                           "projection": PROJ},
                               verbosity="executionStats")
            self.assertEqual(r["queryPlanner"]["winningPlan"]["stage"],
                             "PROJECTION_COVERED")
            self.assertEqual(r["executionStats"]["totalDocsExamined"], 0)
            rc = c.with_options(codec_options=RAW)
            for f in FILTERS:
                got = sorted(d.raw for d in rc.find(f, PROJ))
                want = sorted(d.raw for d in rc.find(f, PROJ).hint(NATURAL))
                self.assertEqual(got, want, f)
            self.assertEqual(list(c.find({"k": 4.5}, {"k": 1, "_id": 0})),
                             [{"k": 4.5}])
            cl.close()
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
