"""test_kvd_lookup.py - aggregate's $lookup through a real kvd's
--mongo-port (pymongo): the equality form against the results MongoDB's
$lookup manual page gives for its examples (orders and inventory, classes
and members with an array localField), missing local and foreign fields,
an unknown `from`, a dotted `as` that replaces a field, the index path
(explain names the index; its results equal the held-collection path's
for the same data), the 16 MiB bounds of the joined documents (4568) and
of the document made (10334), the 100 MiB bound of a held foreign
collection (292), MongoDB's error codes for malformed $lookup stages, the
pipeline forms without `let` (the manual's uncorrelated subquery, a
correlated pipeline after the equality), and `let` and `from: {db, coll}`
refused with 238.
"""

import datetime
import os
import sys
import unittest

import kvdtest  # noqa: F401  (the environment of the build's kvd)

try:
    import pymongo
    from pymongo.errors import OperationFailure
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402

ORDERS = [
    {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
    {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
    {"_id": 3},
]
INVENTORY = [
    {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
    {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
    {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
    {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
    {"_id": 5, "sku": None, "description": "Incomplete"},
    {"_id": 6},
]
CLASSES = [
    {"_id": 1, "title": "Reading is ...",
     "enrollmentlist": ["giraffe2", "pandabear", "artie"],
     "days": ["M", "W", "F"]},
    {"_id": 2, "title": "But Writing ...",
     "enrollmentlist": ["giraffe1", "artie"], "days": ["T", "F"]},
]
MEMBERS = [
    {"_id": 1, "name": "artie", "status": "A"},
    {"_id": 2, "name": "giraffe", "status": "D"},
    {"_id": 3, "name": "giraffe1", "status": "A"},
    {"_id": 4, "name": "panda", "status": "A"},
    {"_id": 5, "name": "pandabear", "status": "A"},
    {"_id": 6, "name": "giraffe2", "status": "D"},
]


def lookup(frm, local, foreign, as_):
    return {"$lookup": {"from": frm, "localField": local,
                        "foreignField": foreign, "as": as_}}


def by_id(docs):
    """Each document with its joined array in _id order (an index gives
    its matches in index order, a collection scan in _id order)."""
    out = []
    for d in docs:
        d = dict(d)
        for k, v in d.items():
            if isinstance(v, list) and all(isinstance(e, dict) and "_id" in e
                                           for e in v):
                d[k] = sorted(v, key=lambda e: e["_id"])
        out.append(d)
    return out


class Lookup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(password=None)
        cls.cl = cls.host.client("")
        cls.db = cls.cl.lkt
        cls.db.orders.insert_many(ORDERS)
        cls.db.inventory.insert_many(INVENTORY)
        cls.db.classes.insert_many(CLASSES)
        cls.db.members.insert_many(MEMBERS)
        # the same members, with an index on the joined field
        cls.db.members_ix.insert_many(MEMBERS)
        cls.db.members_ix.create_index("name", name="name_1")
        cls.db.inventory_ix.insert_many(INVENTORY)
        cls.db.inventory_ix.create_index("sku", name="sku_1")

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def agg(self, coll, pipeline):
        return list(self.db[coll].aggregate(pipeline))

    def code(self, coll, pipeline):
        with self.assertRaises(OperationFailure) as e:
            self.agg(coll, pipeline)
        return e.exception.code

    def explain_lookup(self, coll, pipeline):
        r = self.db.command("aggregate", coll, pipeline=pipeline,
                            explain=True)
        return [s for s in r["stages"] if "$lookup" in s]

    # ---- MongoDB's manual, "Perform a Single Equality Join" ----------

    def test_manual_orders_inventory(self):
        want = [
            dict(ORDERS[0], inventory_docs=[INVENTORY[0]]),
            dict(ORDERS[1], inventory_docs=[INVENTORY[3]]),
            # no item: joins the sku null and the sku missing
            dict(ORDERS[2], inventory_docs=[INVENTORY[4], INVENTORY[5]]),
        ]
        for inv in ("inventory", "inventory_ix"):
            got = self.agg("orders", [
                lookup(inv, "item", "sku", "inventory_docs"),
                {"$sort": {"_id": 1}}])
            self.assertEqual(by_id(got), want, inv)

    # ---- "Use $lookup with an Array" ----------------------------------

    def test_manual_array_local_field(self):
        m = {d["_id"]: d for d in MEMBERS}
        want = [
            dict(CLASSES[0], enrollee_info=[m[1], m[5], m[6]]),
            dict(CLASSES[1], enrollee_info=[m[1], m[3]]),
        ]
        got = self.agg("classes", [
            lookup("members", "enrollmentlist", "name", "enrollee_info")])
        # without an index the matches come in the collection's order,
        # which is the manual's
        self.assertEqual(got, want)
        got = self.agg("classes", [
            lookup("members_ix", "enrollmentlist", "name", "enrollee_info")])
        self.assertEqual(by_id(got), want)

    # ---- semantics ------------------------------------------------------

    def test_foreign_array_and_dotted_paths(self):
        self.db.fa.insert_many([
            {"_id": 1, "tags": ["x", "y"]},
            {"_id": 2, "tags": "y"},
            {"_id": 3, "tags": [["x"]]},
            {"_id": 4, "o": {"k": 7}},
        ])
        self.db.la.insert_many([
            {"_id": 1, "a": [{"b": "x"}, {"b": ["y"]}]},
            {"_id": 2, "a": {"b": 7}},
            {"_id": 3, "a": []},
        ])
        got = self.agg("la", [lookup("fa", "a.b", "tags", "j"),
                              {"$project": {"ids": "$j._id"}},
                              {"$sort": {"_id": 1}}])
        # 1: x and y join 1 (by element) and 2; 2: 7 joins nothing;
        # 3: an empty array is no value, so null: the documents without
        # tags (4)
        self.assertEqual([sorted(d["ids"]) for d in got],
                         [[1, 2], [], [4]])
        got = self.agg("la", [{"$match": {"_id": 2}},
                              lookup("fa", "a.b", "o.k", "j")])
        self.assertEqual([d["_id"] for d in got[0]["j"]], [4])

    def test_numbers_join_across_types(self):
        self.db.nf.insert_many([{"_id": 1, "v": 1.0}, {"_id": 2, "v": 2}])
        self.db.nl.insert_one({"_id": 1, "v": 1})
        got = self.agg("nl", [lookup("nf", "v", "v", "j")])
        self.assertEqual([d["_id"] for d in got[0]["j"]], [1])

    def test_unknown_from_gives_empty_arrays(self):
        got = self.agg("orders", [lookup("nosuch", "item", "sku", "x"),
                                  {"$sort": {"_id": 1}}])
        self.assertEqual(got, [dict(o, x=[]) for o in ORDERS])

    def test_as_replaces_and_nests(self):
        got = self.agg("orders", [
            {"$match": {"_id": 1}},
            lookup("inventory", "item", "sku", "item")])
        self.assertEqual(got[0]["item"], [INVENTORY[0]])
        got = self.agg("orders", [
            {"$match": {"_id": 1}},
            lookup("inventory", "item", "sku", "price.inv")])
        self.assertEqual(got[0]["price"], {"inv": [INVENTORY[0]]})

    def test_with_other_stages(self):
        got = self.agg("classes", [
            {"$unwind": "$enrollmentlist"},
            lookup("members_ix", "enrollmentlist", "name", "m"),
            {"$unwind": "$m"},
            {"$group": {"_id": "$m.status", "n": {"$sum": 1}}},
            {"$sort": {"_id": 1}}])
        self.assertEqual(got, [{"_id": "A", "n": 4}, {"_id": "D", "n": 1}])

    def test_lookup_on_id(self):
        got = self.agg("orders", [lookup("inventory", "_id", "_id", "inv"),
                                  {"$sort": {"_id": 1}}])
        self.assertEqual([d["inv"] for d in got],
                         [[INVENTORY[0]], [INVENTORY[1]], [INVENTORY[2]]])
        st = self.explain_lookup("orders",
                                 [lookup("inventory", "_id", "_id", "inv")])
        self.assertEqual(st[0]["indexesUsed"], ["_id_"])

    # ---- the index path ---------------------------------------------------

    def test_index_path_explained_and_equal_to_scan(self):
        p = [lookup("members_ix", "enrollmentlist", "name", "e")]
        st = self.explain_lookup("classes", p)
        self.assertEqual(len(st), 1)
        self.assertEqual(st[0]["indexesUsed"], ["name_1"])
        self.assertEqual(st[0]["collectionScans"], 0)
        self.assertEqual(st[0]["$lookup"]["from"], "members_ix")
        st = self.explain_lookup("classes", [
            lookup("members", "enrollmentlist", "name", "e")])
        self.assertEqual((st[0]["indexesUsed"], st[0]["collectionScans"]),
                         ([], 1))
        # a bigger join: every local value, present, missing or null,
        # joins the same documents through the index as without it
        self.db.big_f.insert_many(
            [{"_id": i, "k": i % 37 if i % 11 else None} for i in range(600)]
            + [{"_id": 1000}])
        self.db.big_fix.insert_many(
            [{"_id": i, "k": i % 37 if i % 11 else None} for i in range(600)]
            + [{"_id": 1000}])
        self.db.big_fix.create_index("k")
        self.db.big_l.insert_many(
            [{"_id": i, "k": [i % 41, i % 5] if i % 7 else i % 41}
             for i in range(120)] + [{"_id": 500}, {"_id": 501, "k": None}])
        a = by_id(self.agg("big_l", [lookup("big_f", "k", "k", "j"),
                                     {"$sort": {"_id": 1}}]))
        b = by_id(self.agg("big_l", [lookup("big_fix", "k", "k", "j"),
                                     {"$sort": {"_id": 1}}]))
        self.assertEqual(a, b)
        # across getMores (batches of 5): the same, both ways
        for f in ("big_f", "big_fix"):
            got = by_id(self.db.big_l.aggregate(
                [lookup(f, "k", "k", "j"), {"$sort": {"_id": 1}}],
                batchSize=5))
            self.assertEqual(got, a, f)
            got = by_id(sorted(self.db.big_l.aggregate(
                [lookup(f, "k", "k", "j")], batchSize=5),
                key=lambda d: d["_id"]))
            self.assertEqual(got, a, f)
        # and what the rule says: a value joins equal keys, null (or no
        # value) joins null and missing keys
        fk = {i: (i % 37 if i % 11 else None) for i in range(600)}
        fk[1000] = None
        for d in a:
            vals = d.get("k")
            vals = vals if isinstance(vals, list) else [vals]
            self.assertEqual([e["_id"] for e in d["j"]],
                             [i for i in sorted(fk) if fk[i] in vals],
                             d["_id"])
        st = self.explain_lookup("big_l", [lookup("big_fix", "k", "k", "j")])
        self.assertEqual(st[0]["indexesUsed"], ["k_1"])

    def test_sparse_index_not_used_for_nulls(self):
        self.db.sp.insert_many(INVENTORY)
        self.db.sp.create_index("sku", sparse=True)
        got = self.agg("orders", [{"$match": {"_id": 3}},
                                  lookup("sp", "item", "sku", "j")])
        self.assertEqual(sorted(d["_id"] for d in got[0]["j"]), [5, 6])
        st = self.explain_lookup("orders", [lookup("sp", "item", "sku", "j")])
        self.assertEqual(st[0]["indexesUsed"], [])

    # ---- bounds ------------------------------------------------------------

    def test_joined_documents_bound(self):
        pad = "p" * (9 * 1024 * 1024)
        for c in ("huge", "huge_ix"):
            self.db[c].insert_many([{"_id": 1, "k": 1, "pad": pad},
                                    {"_id": 2, "k": 1, "pad": pad}])
        self.db.huge_ix.create_index("k")
        self.db.hl.insert_one({"_id": 1, "k": 1})
        for c in ("huge", "huge_ix"):
            with self.assertRaises(OperationFailure) as e:
                self.agg("hl", [lookup(c, "k", "k", "j")])
            self.assertEqual(e.exception.code, 4568, c)
            self.assertIn("Total size of documents in %s matching "
                          "pipeline's $lookup stage exceeds 16793600 bytes"
                          % c, str(e.exception))
        # one 9 MiB match fits the array, but not an 8 MiB document
        self.db.hl.insert_one({"_id": 2, "k": 2, "pad": "q" * (8 << 20)})
        self.db.huge.insert_one({"_id": 3, "k": 2, "pad": pad})
        with self.assertRaises(OperationFailure) as e:
            self.agg("hl", [{"$match": {"_id": 2}},
                            lookup("huge", "k", "k", "j")])
        self.assertEqual(e.exception.code, 10334)
        got = self.agg("hl", [{"$match": {"_id": 2}}, {"$unset": "pad"},
                              lookup("huge", "k", "k", "j"),
                              {"$project": {"j._id": 1}}])
        self.assertEqual(got, [{"_id": 2, "j": [{"_id": 3}]}])

    def test_held_collection_memory_bound(self):
        # 7 documents of 15 MiB: a held foreign collection past 100 MiB
        pad = "m" * (15 << 20)
        for i in range(7):
            self.db.mem_f.insert_one({"_id": i, "k": i, "pad": pad})
        self.db.mem_l.insert_one({"_id": 1, "k": 1})
        with self.assertRaises(OperationFailure) as e:
            self.agg("mem_l", [lookup("mem_f", "k", "k", "j"),
                               {"$project": {"j._id": 1}}])
        self.assertEqual(e.exception.code, 292)
        self.assertIn("allowDiskUse", str(e.exception))
        # through an index each document reads only its matches
        self.db.mem_f.create_index("k")
        got = self.agg("mem_l", [lookup("mem_f", "k", "k", "j"),
                                 {"$project": {"j._id": 1}}])
        self.assertEqual(got, [{"_id": 1, "j": [{"_id": 1}]}])
        self.db.mem_f.drop()

    # ---- bad arguments ---------------------------------------------------

    def test_bad_arguments(self):
        good = {"from": "inventory", "localField": "item",
                "foreignField": "sku", "as": "x"}

        def without(k, **extra):
            d = {a: b for a, b in good.items() if a != k}
            d.update(extra)
            return [{"$lookup": d}]
        cases = [
            ([{"$lookup": "inventory"}], 9),
            ([{"$lookup": []}], 9),
            (without("as"), 9),
            (without("foreignField"), 9),
            (without("localField"), 9),
            (without("from"), 9),
            (without("from", **{"from": 5}), 9),
            (without("as", **{"as": 1}), 9),
            (without("localField", localField=None), 9),
            (without("x", bogus="y"), 9),
            (without("x", let={"a": 1}), 9),
            (without("x", let=5), 9),
            (without("as", **{"as": "$x"}), 16410),
            (without("as", **{"as": ""}), 9),
            (without("localField", localField=""), 9),
            (without("as", **{"as": "a.$b"}), 16410),
            (without("as", **{"as": "a..b"}), 15998),
            (without("foreignField", foreignField="$sku"), 16410),
            (without("from", **{"from": ""}), 73),
        ]
        for p, code in cases:
            self.assertEqual(self.code("orders", p), code, p)

    def test_pipeline_forms_refused(self):
        for spec in (
            {"from": "inventory", "let": {"i": "$item"},
             "pipeline": [{"$match": {"$expr": {"$eq": ["$sku", "$$i"]}}}],
             "as": "x"},
            {"from": {"db": "other", "coll": "inventory"},
             "localField": "item", "foreignField": "sku", "as": "x"},
        ):
            with self.assertRaises(OperationFailure) as e:
                self.agg("orders", [{"$lookup": spec}])
            self.assertEqual(e.exception.code, 238, spec)
            self.assertIn("not supported by kvd", str(e.exception))
        self.assertEqual(self.code("orders", [{"$lookup": {
            "from": "inventory", "pipeline": {}, "as": "x"}}]), 14)
        self.assertEqual(self.code("orders", [{"$lookup": {
            "from": "inventory", "localField": "item", "pipeline": [],
            "as": "x"}}]), 9)

    def test_uncorrelated_pipeline(self):
        # the manual's "Perform an Uncorrelated Subquery with $lookup",
        # its $replaceRoot written as the $project that gives the same
        d = datetime.datetime
        self.db.absences.insert_many([
            {"_id": 1, "student": "Ann Aardvark",
             "sickdays": [d(2018, 5, 1), d(2018, 8, 23)]},
            {"_id": 2, "student": "Zoe Zebra",
             "sickdays": [d(2018, 2, 1), d(2018, 5, 23)]}])
        self.db.holidays.insert_many([
            {"_id": 1, "year": 2018, "name": "New Years",
             "date": d(2018, 1, 1)},
            {"_id": 2, "year": 2018, "name": "Pi Day", "date": d(2018, 3, 14)},
            {"_id": 3, "year": 2018, "name": "Ice Cream Day",
             "date": d(2018, 7, 15)},
            {"_id": 4, "year": 2017, "name": "New Years",
             "date": d(2017, 1, 1)},
            {"_id": 5, "year": 2017, "name": "Ice Cream Day",
             "date": d(2017, 7, 16)}])
        p = [{"$lookup": {"from": "holidays", "pipeline": [
            {"$match": {"year": 2018}},
            {"$project": {"_id": 0, "name": 1, "date": 1}}],
            "as": "holidays"}}]
        hol = [{"name": "New Years", "date": d(2018, 1, 1)},
               {"name": "Pi Day", "date": d(2018, 3, 14)},
               {"name": "Ice Cream Day", "date": d(2018, 7, 15)}]
        got = self.agg("absences", p)
        self.assertEqual([g["holidays"] for g in got], [hol, hol])
        self.assertEqual([g["student"] for g in got],
                         ["Ann Aardvark", "Zoe Zebra"])
        st = self.explain_lookup("absences", p)
        self.assertEqual((st[0]["indexesUsed"], st[0]["strategy"]),
                         ([], "Uncorrelated"))

    def test_correlated_pipeline_without_let(self):
        p = [{"$lookup": {"from": "inventory_ix", "localField": "item",
                          "foreignField": "sku", "pipeline": [
                              {"$project": {"_id": 0, "instock": 1}}],
                          "as": "inv"}}, {"$sort": {"_id": 1}}]
        got = self.agg("orders", p)
        self.assertEqual([g["inv"] for g in got],
                         [[{"instock": 120}], [{"instock": 70}], [{}, {}]])
        self.assertEqual(self.explain_lookup("orders", p)[0]["indexesUsed"],
                         ["sku_1"])
        p[0]["$lookup"]["from"] = "inventory"
        self.assertEqual([g["inv"] for g in self.agg("orders", p)],
                         [[{"instock": 120}], [{"instock": 70}], [{}, {}]])


if __name__ == "__main__":
    unittest.main()
