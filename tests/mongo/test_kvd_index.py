"""test_kvd_index.py - secondary indexes through a real kvd's --mongo-port
(pymongo): createIndexes / listIndexes / dropIndexes with MongoDB's replies
and errors, single-field, compound, descending, dotted, multikey, sparse
and partial indexes, explain naming the index the planner chose, sorts the
index gives, hints, entries kept by updates and deletes, a build while
other clients write, and kill -9 during writes and a build: every document
found through each ready index, no entry returning a document that does
not match (each index's answer compared with a collection scan's), a
build cut by kill -9 built again at start with no createIndexes (a unique
one too; three of one command, in one pass), a replica answering through
the index its primary built, and createIndexes of several indexes: one
pass over the collection (unique ones among them), all or none (a
duplicate key, a refused spec or a document one cannot take leaves none;
one of them dropped mid-build ends the build of all), with inserts during
the build found through each.
"""

import os
import random
import sys
import threading
import time
import unittest

import kvdtest

try:
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import HostCase, KvdHost  # noqa: E402

NATURAL = [("$natural", 1)]


def plan(cursor):
    """The winning plan's index name, or its stage."""
    wp = cursor.explain()["queryPlanner"]["winningPlan"]
    if wp.get("inputStage", {}).get("stage") == "IXSCAN":
        return wp["inputStage"]["indexName"]
    return wp["stage"]


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def wait_built(c, field, name, what):
    """Wait until a query hinted on field goes through index name: a
    hint of an index not built yet is refused, and after a restart the
    door answers once the journal is replayed (7 s under TSan)."""
    def used():
        try:
            return plan(c.find({field: 3}).hint([(field, 1)])) == name
        except pymongo.errors.PyMongoError:
            return False
    kvdtest.wait_for(used, 120, what)


class RangesHost(HostCase):
    """A host whose builds go in ranges of bulk_keys documents (doc_bulk.c):
    many ranges, writes between them, and a build still under way when a
    test drops one of its indexes."""
    bulk_keys = "64"

    @classmethod
    def setUpClass(cls):
        os.environ["KVD_BULK_KEYS"] = cls.bulk_keys
        try:
            super().setUpClass()
        finally:
            del os.environ["KVD_BULK_KEYS"]


class Indexes(RangesHost):
    host_args = {"password": None}
    creds = ""
    db_name = "ixt"

    def audit(self, coll, field, values, index):
        """Each value's documents through the index equal a scan's."""
        for v in values:
            got = ids(coll.find({field: v}).hint(index))
            want = ids(coll.find({field: v}).hint(NATURAL))
            self.assertEqual(got, want, "%s = %r" % (field, v))

    def test_create_list_drop(self):
        c = self.db.cld
        r = self.db.command("createIndexes", "cld", indexes=[
            {"key": {"a": 1}, "name": "a_1"}])
        self.assertEqual((r["numIndexesBefore"], r["numIndexesAfter"],
                          r["createdCollectionAutomatically"]), (1, 2, True))
        r = self.db.command("createIndexes", "cld", indexes=[
            {"key": {"a": 1}, "name": "a_1"}])
        self.assertEqual(r["note"], "all indexes already exist")
        c.create_index([("b", -1), ("c.d", 1)], name="bcd")
        self.assertEqual([(i["name"], dict(i["key"])) for i in
                          c.list_indexes()],
                         [("_id_", {"_id": 1}), ("a_1", {"a": 1}),
                          ("bcd", {"b": -1, "c.d": 1})])
        for kw, code in (({"name": "other"}, 85),
                         ({"name": "a_1", "sparse": True}, 85)):
            with self.assertRaises(pymongo.errors.OperationFailure) as e:
                c.create_index([("a", 1)], **kw)
            self.assertEqual(e.exception.code, code)
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.create_index([("z", 1)], name="bcd")
        self.assertEqual(e.exception.code, 86)
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.create_index([("z", 1)], bogus=1)
        self.assertEqual(e.exception.code, 197)
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.drop_index("nope")
        self.assertEqual(e.exception.code, 27)
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.drop_index("_id_")
        self.assertEqual(e.exception.code, 72)
        r = self.db.command("dropIndexes", "cld",
                            index={"b": -1, "c.d": 1})
        self.assertEqual(r["nIndexesWas"], 3)
        self.assertEqual([i["name"] for i in c.list_indexes()],
                         ["_id_", "a_1"])
        c.drop_indexes()
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])

    def test_parallel_arrays(self):
        """A document the index cannot take fails its build (the index
        is dropped) and, once the index is there, its write."""
        c = self.db.par
        c.insert_many([{"_id": 1, "a": [1, 2], "b": [3, 4]}])
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.create_index([("a", 1), ("b", 1)])
        self.assertEqual(e.exception.code, 171)
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])
        c.delete_many({})
        c.create_index([("a", 1), ("b", 1)])
        with self.assertRaises(pymongo.errors.WriteError) as e:
            c.insert_one({"_id": 2, "a": [1], "b": [2]})
        self.assertEqual(e.exception.code, 171)
        self.assertIsNone(c.find_one({"_id": 2}))

    def test_queries(self):
        c = self.db.q
        c.insert_many([{"_id": i, "a": i % 10, "b": {"c": i % 7},
                        "s": "k%04d" % i, "l": [i % 5, 10 + i % 3]}
                       for i in range(600)])
        c.create_index("a")
        c.create_index([("b.c", 1), ("a", -1)])
        c.create_index([("s", -1)])
        c.create_index("l")
        self.assertEqual(plan(c.find({"a": 3})), "a_1")
        self.assertEqual(plan(c.find({"b.c": 2, "a": {"$lt": 5}})),
                         "b.c_1_a_-1")
        self.assertEqual(plan(c.find({"zz": 1})), "COLLSCAN")
        ex = c.find({"a": 3}).explain()["executionStats"]
        self.assertEqual((ex["nReturned"], ex["totalKeysExamined"],
                          ex["totalDocsExamined"]), (60, 60, 60))
        for q in ({"a": 3}, {"a": {"$in": [1, 9]}}, {"a": {"$gte": 7}},
                  {"b.c": 2, "a": {"$lt": 5}}, {"s": {"$lt": "k0100"}},
                  {"l": 11}, {"l": {"$gt": 3, "$lt": 11}}):
            self.assertEqual(ids(c.find(q)), ids(c.find(q).hint(NATURAL)),
                             q)
        # an index's order is the sort: and limit stops early
        got = [d["s"] for d in c.find({"s": {"$gte": "k0500"}})
               .sort("s", -1).limit(3)]
        self.assertEqual(got, ["k0599", "k0598", "k0597"])
        self.assertEqual(c.count_documents({"a": 4}), 60)
        self.assertEqual(sorted(c.distinct("b.c", {"a": 4})),
                         sorted({i % 7 for i in range(600) if i % 10 == 4}))
        self.assertEqual(
            ids(c.aggregate([{"$match": {"a": 7}}, {"$sort": {"a": 1}}])),
            ids(c.find({"a": 7}).hint(NATURAL)))
        self.assertEqual(plan(c.find({"_id": 5})), "IDHACK")
        # hint by key pattern, and a hint of no index
        self.assertEqual(plan(c.find({"a": 3}).hint([("l", 1)])), "l_1")
        self.assertEqual(ids(c.find({"a": 3}).hint([("l", 1)])),
                         ids(c.find({"a": 3})))
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            list(c.find({"a": 3}).hint([("nope", 1)]))
        self.assertEqual(e.exception.code, 2)
        # entries follow updates, replacements and deletes
        c.update_many({"a": 3}, {"$set": {"a": 33}})
        c.replace_one({"_id": 4}, {"a": 3, "l": [99]})
        c.delete_many({"a": 5})
        c.find_one_and_update({"a": 1}, {"$push": {"l": 77}})
        self.audit(c, "a", [1, 3, 5, 33, None], "a_1")
        self.audit(c, "l", [0, 10, 77, 99], "l_1")
        self.assertEqual(ids(c.find({"a": 3})), [4])

    def test_limits(self):
        """A limit read through the index's order: its first batch of
        entries is the limit's size, so what the entries do not give
        (documents the filter rejects, an array's second entry, skipped
        ones, getMore's batches) must come from the batches after it."""
        c = self.db.lim
        c.insert_many([{"_id": i, "a": i % 50, "l": [i % 7, 3 + i % 7],
                        "odd": i % 2} for i in range(500)])
        c.create_index("a")
        c.create_index("l")

        def scan(q, key):
            """The answer of a collection scan, in the index's order
            (ties by _id, as the index's entries are)."""
            docs = list(c.find(q).hint(NATURAL))
            return [d["_id"] for d in sorted(docs, key=key)]

        for q, lim, skip in (({"a": {"$gte": 10}}, 25, 0),
                             ({"a": {"$gte": 10}}, 25, 7),
                             ({"a": {"$gte": 10}, "odd": 1}, 30, 0),
                             ({"a": {"$gte": 10}, "odd": 1}, 30, 11),
                             ({"a": {"$gte": 48}}, 100, 0)):
            want = scan(q, lambda d: (d["a"], d["_id"]))[skip:skip + lim]
            for bs in (0, 4):
                cur = c.find(q).sort("a", 1).skip(skip).limit(lim)
                if bs:
                    cur = cur.batch_size(bs)
                self.assertEqual([d["_id"] for d in cur], want, (q, lim, bs))
            self.assertEqual(plan(c.find(q).sort("a", 1).limit(lim)), "a_1")
        # multikey: a document has two entries, given once
        q = {"l": {"$gte": 2}}
        want = scan(q, lambda d: (min(x for x in d["l"] if x >= 2),
                                  d["_id"]))[:40]
        got = [d["_id"] for d in c.find(q).sort("l", 1).limit(40)]
        self.assertEqual(len(set(got)), 40)
        self.assertEqual(sorted(got), sorted(want))
        # no sort: the index's order, a limit all the same
        got = [d["_id"] for d in c.find({"a": 3}).limit(4)]
        self.assertEqual(got, [3, 53, 103, 153])

    def test_sparse_partial(self):
        c = self.db.sp
        c.insert_many([{"_id": i, "a": i} if i % 2 else {"_id": i}
                       for i in range(40)])
        c.create_index("a", sparse=True)
        c.create_index([("a", -1)], name="part",
                       partialFilterExpression={"a": {"$gte": 30}})
        # neither is chosen unhinted (they lack documents)
        self.assertEqual(plan(c.find({"a": None})), "COLLSCAN")
        self.assertEqual(ids(c.find({"a": {"$exists": True}})
                             .hint([("a", 1)])),
                         list(range(1, 40, 2)))
        self.assertEqual(ids(c.find({"a": {"$gte": 0}}).hint([("a", -1)])),
                         [31, 33, 35, 37, 39])
        c.insert_one({"_id": 100, "a": 50})
        c.update_one({"_id": 31}, {"$set": {"a": 1}})
        self.assertEqual(ids(c.find({"a": {"$gte": 0}}).hint([("a", -1)])),
                         [33, 35, 37, 39, 100])

    def test_build_under_writes(self):
        """An index built while 4 clients insert, update and delete."""
        c = self.db.bw
        c.insert_many([{"_id": i, "v": i % 50} for i in range(3000)])
        stop = threading.Event()
        errors = []

        def writer(k):
            wc = self.host.client("").ixt.bw
            rnd = random.Random(k)
            n = 0
            while not stop.is_set():
                try:
                    i = rnd.randrange(4000)
                    op = n % 3
                    if op == 0:
                        wc.update_one({"_id": i},
                                      {"$set": {"v": rnd.randrange(50)}},
                                      upsert=True)
                    elif op == 1:
                        wc.delete_one({"_id": i})
                    else:
                        wc.replace_one({"_id": i}, {"v": rnd.randrange(50)},
                                       upsert=True)
                except pymongo.errors.PyMongoError as e:
                    errors.append(e)
                    return
                n += 1
        ts = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        try:
            c.create_index("v")
        finally:
            stop.set()
            for t in ts:
                t.join()
        self.assertEqual(errors, [])
        self.audit(c, "v", list(range(50)), "v_1")
        no_stale(self, c, "v", "v_1")



def no_stale(test, coll, field, index):
    """The index holds one entry per document (each has one scalar numeric
    field): none left by a write the build raced with.  (A stale entry
    returns no document, the filter checked again on each: an audit of
    answers cannot see it; the keys examined can.)"""
    ex = coll.find({field: {"$gte": 0}}).hint(index).explain()
    st = ex["executionStats"]
    test.assertEqual(st["totalKeysExamined"], coll.count_documents({}), st)


def ix_names(coll):
    return [i["name"] for i in coll.list_indexes()]


class OnePass(RangesHost):
    """createIndexes of several indexes builds them in one pass over the
    collection (doc_mdoor_ix.c), all or none."""
    host_args = {"password": None}
    creds = ""
    db_name = "onepass"

    def check(self, c, q, key):
        """q's answer through index key equals a collection scan's."""
        self.assertEqual(ids(c.find(q).hint(key)),
                         ids(c.find(q).hint(NATURAL)), (q, key))

    def test_three_in_one(self):
        """Three indexes, one of them compound and one multikey, each
        answering as a collection scan does; a fourth given twice and one
        there already change nothing."""
        c = self.db.three
        c.insert_many([{"_id": i, "k": i % 50, "r": i % 997,
                        "s": "s%05d" % (i * 7919 % 4000),
                        "l": [i % 3, 5 + i % 4]} if i % 11 else {"_id": i}
                       for i in range(4000)])
        c.create_index("k")
        names = c.create_indexes([
            pymongo.IndexModel([("k", 1)]),
            pymongo.IndexModel([("r", -1), ("k", 1)]),
            pymongo.IndexModel([("s", 1)]),
            pymongo.IndexModel([("l", 1)]),
            pymongo.IndexModel([("s", 1)])])
        self.assertEqual(names, ["k_1", "r_-1_k_1", "s_1", "l_1", "s_1"])
        self.assertEqual(ix_names(c),
                         ["_id_", "k_1", "r_-1_k_1", "s_1", "l_1"])
        for v in (0, 7, 49, None):
            self.check(c, {"k": v}, [("k", 1)])
        for q in ({"r": 5}, {"r": {"$gte": 990}}, {"r": 3, "k": 3},
                  {"r": None}):
            self.check(c, q, [("r", -1), ("k", 1)])
        for q in ({"s": "s00007"}, {"s": {"$lt": "s00100"}}, {"s": None}):
            self.check(c, q, [("s", 1)])
        for q in ({"l": 1}, {"l": {"$gte": 6}}, {"l": None}):
            self.check(c, q, [("l", 1)])
        self.assertEqual(plan(c.find({"s": "s00007"})), "s_1")
        ex = c.find({"r": {"$gte": 0}}).hint([("r", -1), ("k", 1)]) \
            .explain()["executionStats"]
        self.assertEqual(ex["totalKeysExamined"],
                         len([i for i in range(4000) if i % 11]))

    def test_unique_ones(self):
        """Two unique indexes and a plain one built in one pass through
        the reservations' driver: built, exact, and enforced."""
        c = self.db.uq
        c.insert_many([{"_id": i, "u": i, "w": "w%d" % i, "p": i % 10}
                       if i % 5 else {"_id": i, "u": i, "p": i % 10}
                       for i in range(2000)])
        c.create_indexes([pymongo.IndexModel([("u", 1)], unique=True),
                          pymongo.IndexModel([("p", 1)]),
                          pymongo.IndexModel([("w", 1)], unique=True,
                                             sparse=True)])
        self.assertEqual(ix_names(c), ["_id_", "u_1", "p_1", "w_1"])
        for v in (0, 3, 1999):
            self.check(c, {"u": v}, [("u", 1)])
        for v in range(10):
            self.check(c, {"p": v}, [("p", 1)])
        self.check(c, {"w": {"$gte": ""}}, [("w", 1)])
        for d in ({"_id": "x", "u": 5}, {"_id": "y", "u": -1, "w": "w7"}):
            with self.assertRaises(pymongo.errors.DuplicateKeyError):
                c.insert_one(d)
        c.insert_one({"_id": "z", "u": -2})  # w sparse: none is fine
        self.assertEqual(c.count_documents({}), 2001)

    def test_all_or_none(self):
        """A createIndexes that fails leaves none of its indexes: a
        unique one over duplicate values (11000), whatever its place, a
        spec refused after one added (85, 86), a document one index
        cannot take (171)."""
        c = self.db.aon
        c.insert_many([{"_id": i, "a": i, "d": i % 100, "e": [1, 2]}
                       for i in range(3000)])
        for models in (
                [pymongo.IndexModel([("a", 1)]),
                 pymongo.IndexModel([("d", 1)], unique=True)],
                [pymongo.IndexModel([("d", 1)], unique=True),
                 pymongo.IndexModel([("a", 1)])],
                [pymongo.IndexModel([("a", 1)]),
                 pymongo.IndexModel([("d", 1)], unique=True),
                 pymongo.IndexModel([("e", 1)])]):
            with self.assertRaises(pymongo.errors.OperationFailure) as e:
                c.create_indexes(models)
            self.assertEqual(e.exception.code, 11000)
            self.assertIn("index: d_1 dup key", str(e.exception))
            self.assertEqual(ix_names(c), ["_id_"])
        c.create_index("e")
        for models, code in (
                ([pymongo.IndexModel([("a", 1)]),
                  pymongo.IndexModel([("z", 1)], name="e_1")], 86),
                ([pymongo.IndexModel([("a", 1)]),
                  pymongo.IndexModel([("e", 1)], name="other")], 85),
                ([pymongo.IndexModel([("a", 1)]),
                  pymongo.IndexModel([("e", 1), ("e2", 1)])], 171),
                # the ranges fail while a unique index's keys are
                # reserved beside them
                ([pymongo.IndexModel([("a", 1)], unique=True),
                  pymongo.IndexModel([("e", 1), ("e2", 1)])], 171)):
            c.update_one({"_id": 0}, {"$set": {"e2": [3, 4]}})
            with self.assertRaises(pymongo.errors.OperationFailure) as e:
                c.create_indexes(models)
            self.assertEqual(e.exception.code, code)
            self.assertEqual(ix_names(c), ["_id_", "e_1"])
        # and then the same indexes, the duplicates gone, all at once
        c.delete_many({"_id": {"$gte": 100}})
        c.update_one({"_id": 0}, {"$unset": {"e2": 1}})
        c.create_indexes([pymongo.IndexModel([("a", 1)]),
                          pymongo.IndexModel([("d", 1)], unique=True)])
        self.assertEqual(ix_names(c), ["_id_", "e_1", "a_1", "d_1"])
        for v in (0, 50, 99):
            self.check(c, {"d": v}, [("d", 1)])
            self.check(c, {"a": v}, [("a", 1)])

    def test_inserts_during_build(self):
        """Inserts acknowledged while three indexes are built are all
        found through each of them afterwards."""
        c = self.db.ins
        c.insert_many([{"_id": i, "k": i % 50, "r": i % 997,
                        "s": "s%06d" % i} for i in range(20000)],
                      ordered=False)
        stop = threading.Event()
        acked = [[] for _ in range(3)]
        errors = []

        def writer(t):
            wc = self.host.client("").onepass.ins
            n = 0
            while not stop.is_set():
                i = "w%d-%d" % (t, n)
                try:
                    wc.insert_one({"_id": i, "k": 1000 + n % 50,
                                   "r": 5000 + n, "s": "t%d-%06d" % (t, n)})
                except pymongo.errors.PyMongoError as e:
                    errors.append(e)
                    return
                acked[t].append(i)
                n += 1
        ts = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
        for t in ts:
            t.start()
        kvdtest.wait_for(lambda: min(len(a) for a in acked) >= 20, 60,
                         "inserts")
        before = sum(len(a) for a in acked)
        try:
            c.create_indexes([pymongo.IndexModel([("k", 1)]),
                              pymongo.IndexModel([("r", 1)]),
                              pymongo.IndexModel([("s", -1)])])
            during = sum(len(a) for a in acked) - before
        finally:
            stop.set()
            for t in ts:
                t.join()
        self.assertEqual(errors, [])
        print("%d inserts during the build" % during, file=sys.stderr)
        self.assertGreater(during, 0)
        want = sorted(i for a in acked for i in a)
        self.assertEqual(ids(c.find({"k": {"$gte": 1000}}).hint([("k", 1)])),
                         want)
        self.assertEqual(ids(c.find({"r": {"$gte": 5000}}).hint([("r", 1)])),
                         want)
        self.assertEqual(ids(c.find({"s": {"$gte": "t"}}).hint([("s", -1)])),
                         want)
        for v in (0, 1, 49, 1000, 1049):
            self.check(c, {"k": v}, [("k", 1)])
        self.check(c, {"r": {"$lt": 10}}, [("r", 1)])

    def test_drop_during_build(self):
        """dropIndexes of one index of a build under way ends the build
        of all of them, as in mongod (276), and leaves none."""
        c = self.db.dropmid
        c.insert_many([{"_id": i, "x": i % 7, "y": i % 11, "z": i % 13}
                       for i in range(100000)], ordered=False)
        res = []

        def build():
            try:
                self.host.client("").onepass.dropmid.create_indexes([
                    pymongo.IndexModel([("x", 1)]),
                    pymongo.IndexModel([("y", 1)]),
                    pymongo.IndexModel([("z", 1)])])
                res.append(None)
            except pymongo.errors.OperationFailure as e:
                res.append((e.code, e.details.get("codeName")))
        t = threading.Thread(target=build)
        t.start()
        kvdtest.wait_for(lambda: len(ix_names(c)) == 4, 60,
                         "the indexes listed")
        c.drop_index("y_1")
        t.join()
        if res == [None]:  # the build was done before the drop
            print("the build ended before the drop", file=sys.stderr)
            self.assertEqual(ix_names(c), ["_id_", "x_1", "z_1"])
        else:
            self.assertEqual(res, [(276, "IndexBuildAborted")])
            self.assertEqual(ix_names(c), ["_id_"])
        c.create_indexes([pymongo.IndexModel([("x", 1)]),
                          pymongo.IndexModel([("y", 1)])])
        for v in (0, 6):
            self.check(c, {"x": v}, [("x", 1)])
            self.check(c, {"y": v}, [("y", 1)])


class Replica(unittest.TestCase):
    def test_replica_has_indexes(self):
        """A replica gets the index entries of the primary's writes as
        records of its batches, and builds the ranges of the primary's
        build (doc_bulk.c) itself at the markers' points in its stream,
        writes going on meanwhile: its door lists the index and answers
        through it as a collection scan does."""
        os.environ["KVD_BULK_KEYS"] = "64"  # many ranges, many markers
        try:
            p = KvdHost(password=None)
        finally:
            del os.environ["KVD_BULK_KEYS"]
        rport = kvdtest.free_port()
        r = kvdtest.Server(args=["--mongo-port", str(rport), "--replicaof",
                                 "127.0.0.1", str(p.srv.port)])
        try:
            kvdtest.start_with(r, KVD_BULK_KEYS=64)
            c = p.client("").t.r
            c.insert_many([{"_id": i, "a": i % 9} for i in range(900)])
            stop = threading.Event()

            def writer():
                wc = p.client("").t.r
                rnd = random.Random(7)
                while not stop.is_set():
                    i = rnd.randrange(1000)
                    wc.update_one({"_id": i},
                                  {"$set": {"a": rnd.randrange(9)}},
                                  upsert=True)
            t = threading.Thread(target=writer)
            t.start()
            try:
                c.create_index("a")
            finally:
                stop.set()
                t.join()
            c.update_many({"a": 2}, {"$set": {"a": 20}})
            c.insert_one({"_id": "last", "a": 21})
            rc = pymongo.MongoClient("mongodb://127.0.0.1:%d/" % rport,
                                     serverSelectionTimeoutMS=5000).t.r
            kvdtest.wait_for(lambda: rc.count_documents({"a": 21}) == 1,
                             60, "the replica to catch up")
            self.assertEqual([i["name"] for i in rc.list_indexes()],
                             ["_id_", "a_1"])
            for v in list(range(9)) + [20, 21]:
                want = ids(c.find({"a": v}).hint(NATURAL))
                kvdtest.wait_for(
                    lambda: ids(rc.find({"a": v}).hint(NATURAL)) == want,
                    60, "the replica's documents")
                self.assertEqual(ids(rc.find({"a": v}).hint([("a", 1)])),
                                 want, v)
            self.assertEqual(plan(rc.find({"a": 20})), "a_1")
            no_stale(self, c, "a", "a_1")
            no_stale(self, rc, "a", "a_1")
        finally:
            r.stop()
            r.cleanup()
            p.stop()


class SmallRanges(unittest.TestCase):
    """Its kvds build in ranges of 64 documents (doc_bulk.c): a kill -9
    lands between ranges, or in one, and a build is long enough to be
    under way when it does."""

    @classmethod
    def setUpClass(cls):
        os.environ["KVD_BULK_KEYS"] = "64"

    @classmethod
    def tearDownClass(cls):
        del os.environ["KVD_BULK_KEYS"]


class Kill9(SmallRanges):
    def kill_under_writes(self, h, run, acked, stop, build, listed=None):
        """Writers run(k), one per counter of acked, on threads of their
        own; once each acked 50 writes, build() on another (and, with
        listed, once that index is listed in collection listed[0]); once
        each acked 100, kill -9; every thread joined."""
        ts = [threading.Thread(target=run, args=(k,))
              for k in range(len(acked))]
        for t in ts:
            t.start()
        kvdtest.wait_for(lambda: min(acked) >= 50, 120, "updates")
        bt = threading.Thread(target=build)
        bt.start()
        if listed:
            kvdtest.wait_for(lambda: listed[1] in ix_names(listed[0]), 60,
                             "the index listed")
        kvdtest.wait_for(lambda: min(acked) >= 100, 120, "updates")
        h.srv.kill9()
        stop.set()
        for t in ts + [bt]:
            t.join()

    def test_kill9_writes_and_build(self):
        """kill -9 while clients write an indexed field and another index
        is being built: after restart every ready index answers as a
        collection scan does; the one left building is not used, and
        createIndexes of it builds it."""
        h = KvdHost(password=None)
        stop = threading.Event()
        try:
            cl = h.client("")
            c = cl.t.k
            c.insert_many([{"_id": i, "a": i % 20, "b": i % 30}
                           for i in range(4000)])
            c.create_index("a")
            acked = [0] * 4

            def run(k):
                wc = h.client("").t.k
                rnd = random.Random(k)
                while not stop.is_set():
                    try:
                        i = rnd.randrange(4000)
                        wc.update_one({"_id": i}, {"$set": {
                            "a": rnd.randrange(20), "b": rnd.randrange(30)}})
                    except pymongo.errors.PyMongoError:
                        return
                    acked[k] += 1

            def build():
                try:
                    h.client("").t.k \
                        .create_index("b")
                except pymongo.errors.PyMongoError:
                    pass
            self.kill_under_writes(h, run, acked, stop, build)
            h.start_again()
            cl = h.client("")
            c = cl.t.k
            for v in range(20):
                self.assertEqual(ids(c.find({"a": v}).hint([("a", 1)])),
                                 ids(c.find({"a": v}).hint(NATURAL)))
            names = [i["name"] for i in c.list_indexes()]
            if "b_1" in names and plan(c.find({"b": 1})) != "b_1":
                c.create_index("b")  # left building: built now
            if "b_1" not in names:
                c.create_index("b")
            self.assertEqual(plan(c.find({"b": 1})), "b_1")
            for v in range(30):
                self.assertEqual(ids(c.find({"b": v})),
                                 ids(c.find({"b": v}).hint(NATURAL)))
            no_stale(self, c, "a", "a_1")
            no_stale(self, c, "b", "b_1")
            cl.close()
        finally:
            h.stop()


    def test_kill9_unique_build(self):
        """kill -9 while clients move documents to new values of u and a
        unique index of u is built (its keys reserved beside its
        ranges): after restart the index is built again, answers as a
        collection scan does, holds one entry per document, and refuses
        a second document with any document's value."""
        h = KvdHost(password=None)
        stop = threading.Event()
        try:
            c = h.client("").t.u
            n = 20000
            c.insert_many([{"_id": i, "u": i} for i in range(n)])
            acked = [0] * 3

            def run(k):
                wc = h.client("").t.u
                rnd = random.Random(k)
                while not stop.is_set():
                    try:  # fresh values: never a duplicate
                        wc.update_one({"_id": rnd.randrange(n)}, {"$set": {
                            "u": (k + 1) * 10000000 + acked[k]}})
                    except pymongo.errors.PyMongoError:
                        return
                    acked[k] += 1

            built = threading.Event()

            def build():
                try:
                    h.client("").t.u.create_index("u", unique=True)
                    built.set()
                except pymongo.errors.PyMongoError:
                    pass
            self.kill_under_writes(h, run, acked, stop, build, (c, "u_1"))
            self.assertFalse(built.is_set(), "the build ended before the kill")
            h.start_again()
            c = h.client("").t.u
            wait_built(c, "u", "u_1", "the unique build again")
            docs = {d["_id"]: d["u"] for d in c.find().hint(NATURAL)}
            self.assertEqual(len(docs), n)
            self.assertEqual(len(set(docs.values())), n)
            self.assertEqual({d["_id"]: d["u"] for d in
                              c.find().hint([("u", 1)])}, docs)
            no_stale(self, c, "u", "u_1")
            for i in range(0, n, 499):
                self.assertRaises(pymongo.errors.DuplicateKeyError,
                                  c.insert_one, {"_id": "x", "u": docs[i]})
        finally:
            stop.set()
            h.stop()


class Resume(SmallRanges):
    def kill_mid_build(self, h, c, **kw):
        """createIndexes of {f: 1} (kw its options), kill -9 once the index
        is listed and before the command answered."""
        done = threading.Event()
        name = kw.get("name")

        def build():
            try:
                h.client("").t.r.create_index("f", **kw)
                done.set()
            except pymongo.errors.PyMongoError:
                pass
        t = threading.Thread(target=build)
        t.start()
        kvdtest.wait_for(lambda: name in [i["name"] for i in
                                          c.list_indexes()], 60,
                         "the index listed")
        h.srv.kill9()
        t.join()
        self.assertFalse(done.is_set(), "the build ended before the kill")

    def test_build_resumes_after_kill9(self):
        """An index whose build a kill -9 cut is built again at start,
        with no createIndexes: then used, and exact; a unique one too,
        and enforced."""
        h = KvdHost(password=None)
        try:
            c = h.client("").t.r
            c.insert_many([{"_id": i, "f": i % 97 if i >= 2000 else i}
                           for i in range(30000)])
            self.kill_mid_build(h, c, name="f_1")
            h.start_again()
            c = h.client("").t.r
            kvdtest.wait_for(lambda: plan(c.find({"f": 3})) == "f_1", 120,
                             "the build resumed")
            for v in list(range(97)) + [1500, 1999]:
                self.assertEqual(ids(c.find({"f": v}).hint([("f", 1)])),
                                 ids(c.find({"f": v}).hint(NATURAL)))
            # a unique index's build, cut: resumed, and enforced (over
            # enough documents that the kill finds it under way)
            c.drop_index("f_1")
            c.delete_many({"_id": {"$gte": 2000}})
            c.insert_many([{"_id": i, "f": i} for i in range(2000, 150000)],
                          ordered=False)
            self.kill_mid_build(h, c, name="fu", unique=True)
            t0 = time.time()
            h.start_again()
            c = h.client("").t.r
            wait_built(c, "f", "fu", "the unique build resumed")
            print("unique build of 150000 documents resumed in %.1f s" %
                  (time.time() - t0), file=sys.stderr)
            self.assertRaises(pymongo.errors.DuplicateKeyError,
                              c.insert_one, {"_id": "x", "f": 1999})
            c.insert_one({"_id": "y", "f": 150000})
            self.assertEqual(ids(c.find({"f": 5}).hint([("f", 1)])), [5])
        finally:
            h.stop()

    def test_three_resume_after_kill9(self):
        """A createIndexes of three cut by kill -9 mid-build leaves all
        three building, never used; at start they are built again (in
        one pass) with no createIndexes, each then exact."""
        h = KvdHost(password=None)
        try:
            c = h.client("").t.r3
            c.insert_many([{"_id": i, "f": i % 97, "g": i % 13,
                            "h": "h%d" % (i % 1000)}
                           for i in range(100000)], ordered=False)
            done = threading.Event()
            models = [pymongo.IndexModel([("f", 1)]),
                      pymongo.IndexModel([("g", -1)]),
                      pymongo.IndexModel([("h", 1), ("f", 1)])]

            def build():
                try:
                    h.client("").t.r3.create_indexes(models)
                    done.set()
                except pymongo.errors.PyMongoError:
                    pass
            t = threading.Thread(target=build)
            t.start()
            kvdtest.wait_for(lambda: len(ix_names(c)) == 4, 60,
                             "the indexes listed")
            # none is used while it is being built
            self.assertEqual(plan(c.find({"f": 3})), "COLLSCAN")
            h.srv.kill9()
            t.join()
            self.assertFalse(done.is_set(), "the build ended before the kill")
            h.start_again()
            c = h.client("").t.r3
            self.assertEqual(ix_names(c), ["_id_", "f_1", "g_-1", "h_1_f_1"])

            def ready():
                try:
                    return all(plan(c.find(q).hint(k)) == n for q, k, n in (
                        ({"f": 3}, [("f", 1)], "f_1"),
                        ({"g": 3}, [("g", -1)], "g_-1"),
                        ({"h": "h3"}, [("h", 1), ("f", 1)], "h_1_f_1")))
                except pymongo.errors.OperationFailure:
                    return False
            kvdtest.wait_for(ready, 120, "the builds resumed")
            # one build of the three (doc_build.c), as its log line says
            line = (b"index f_1, g_-1, h_1_f_1 of t.r3: its build, left "
                    b"unfinished, built again")
            kvdtest.wait_for(lambda: line in h.srv.log_text(), 30,
                             "the build's log line")
            for q, k in (({"f": 5}, [("f", 1)]), ({"g": 12}, [("g", -1)]),
                         ({"h": "h999"}, [("h", 1), ("f", 1)])):
                self.assertEqual(ids(c.find(q).hint(k)),
                                 ids(c.find(q).hint(NATURAL)), q)
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
