"""test_kvd_unique.py - unique indexes through a real kvd's --mongo-port
(pymongo): MongoDB's duplicate key error (11000, its errmsg, keyPattern and
keyValue) for insert, update, replace, findAndModify and upserts, ordered
and unordered batches, a missing field as null, sparse and partial unique
indexes, compound keys, multikey; a build over duplicates failing and
leaving no index; 8 writers on separate connections inserting overlapping
keys into documents on different shards (one success per key); a build
under writers (exact, every key reserved) and under inserts of keys
documents hold (each refused, or the build fails); kill -9
under concurrent unique inserts, then an audit; a replica and a backup
carrying the reservations.
"""

import os
import random
import shutil
import sys
import tempfile
import threading
import unittest

import kvdtest

try:
    import pymongo
    from pymongo.errors import BulkWriteError, DuplicateKeyError
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import HostCase, KvdHost, Poller  # noqa: E402

NATURAL = [("$natural", 1)]


def in_threads(fn, n):
    """fn(0) ... fn(n - 1), each on a thread of its own, all waited for."""
    ts = [threading.Thread(target=fn, args=(t,)) for t in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def insert_or_dup(c, doc, errs):
    """Insert doc into c: True, or False when refused with 11000; any
    other error goes to errs."""
    try:
        c.insert_one(doc)
        return True
    except DuplicateKeyError as e:
        if e.code != 11000:
            errs.append(e)
    except pymongo.errors.PyMongoError as e:
        errs.append(e)
    return False


class Unique(HostCase):
    host_args = {"password": None, "threads": 4}
    creds = ""
    db_name = "uq"

    def dup(self, fn, pattern=None, value=None):
        with self.assertRaises(DuplicateKeyError) as e:
            fn()
        self.assertEqual(e.exception.code, 11000)
        if pattern is not None:
            self.assertEqual(dict(e.exception.details["keyPattern"]),
                             pattern)
            self.assertEqual(dict(e.exception.details["keyValue"]), value)
        return e.exception

    def test_insert_update_replace(self):
        c = self.db.iur
        c.create_index("a", unique=True)
        self.assertTrue([i for i in c.list_indexes()
                         if i["name"] == "a_1"][0]["unique"])
        c.insert_one({"_id": 1, "a": 1})
        e = self.dup(lambda: c.insert_one({"_id": 2, "a": 1}),
                     {"a": 1}, {"a": 1})
        self.assertEqual(
            e.details["errmsg"],
            "E11000 duplicate key error collection: uq.iur index: a_1 "
            "dup key: { a: 1 }")
        self.assertIsNone(c.find_one({"_id": 2}))
        c.insert_one({"_id": 2, "a": 2})
        self.dup(lambda: c.update_one({"_id": 2}, {"$set": {"a": 1}}),
                 {"a": 1}, {"a": 1})
        self.dup(lambda: c.replace_one({"_id": 2}, {"a": 1}))
        self.dup(lambda: c.find_one_and_update({"_id": 2},
                                               {"$set": {"a": 1}}))
        self.dup(lambda: c.update_one({"a": 5}, {"$set": {"b": 1}, "$setOnInsert": {"a": 1}},
                                      upsert=True))
        self.assertEqual(c.find_one({"_id": 2})["a"], 2)
        # a value given up is free again: by update, then by delete
        c.update_one({"_id": 1}, {"$set": {"a": 10}})
        c.update_one({"_id": 2}, {"$set": {"a": 1}})
        c.delete_one({"_id": 2})
        c.insert_one({"_id": 3, "a": 1})
        c.find_one_and_update({"_id": 9}, {"$set": {"a": 9}}, upsert=True)
        self.dup(lambda: c.insert_one({"_id": 4, "a": 9}))
        # updating the document that has the key keeps it
        c.update_one({"_id": 3}, {"$set": {"a": 1, "z": 1}})
        self.assertEqual(sorted((d["_id"], d["a"]) for d in c.find()),
                         [(1, 10), (3, 1), (9, 9)])
        self.assertEqual([d["_id"] for d in c.find({"a": 1}).hint("a_1")],
                         [3])

    def test_batches(self):
        c = self.db.bat
        c.create_index("k", unique=True)
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many([{"_id": i, "k": i % 3} for i in range(6)])
        d = e.exception.details
        self.assertEqual(d["nInserted"], 3)
        self.assertEqual([(w["index"], w["code"]) for w in d["writeErrors"]],
                         [(3, 11000)])
        c.delete_many({})
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many([{"_id": i, "k": i % 3} for i in range(6)],
                          ordered=False)
        d = e.exception.details
        self.assertEqual(d["nInserted"], 3)
        self.assertEqual([(w["index"], w["code"]) for w in d["writeErrors"]],
                         [(3, 11000), (4, 11000), (5, 11000)])
        self.assertEqual(sorted(x["k"] for x in c.find()), [0, 1, 2])
        # a multi-update giving two documents one value stops there
        c.insert_one({"_id": 10, "k": 5, "g": 1})
        c.insert_one({"_id": 11, "k": 6, "g": 1})
        self.dup(lambda: c.update_many({"g": 1}, {"$set": {"k": 7}}))
        self.assertEqual(c.count_documents({"k": 7}), 1)

    def test_batches_past_the_window(self):
        """Batches longer than the window the door keeps in flight (256
        documents, 64 taking their keys at once): a duplicate inside the
        batch, of a document far before it or just before it, of a
        document already stored, and a repeated _id, each reported at
        its own index; ordered, nothing after the first failure is
        left; unordered, the first in the batch keeps the key."""
        c = self.db.win
        c.create_index("k", unique=True)
        c.insert_one({"_id": "old", "k": -1})
        n = 3000

        def docs():
            d = [{"_id": i, "k": i} for i in range(n)]
            d[1500]["k"] = 10      # far before it
            d[2001]["k"] = 2000    # just before it
            d[2500]["k"] = -1      # the stored document's
            d[2700]["_id"] = 2699  # a repeated _id
            return d
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many(docs())
        d = e.exception.details
        self.assertEqual(d["nInserted"], 1500)
        self.assertEqual([(w["index"], w["code"]) for w in d["writeErrors"]],
                         [(1500, 11000)])
        self.assertEqual(d["writeErrors"][0]["keyValue"], {"k": 10})
        self.assertEqual(c.count_documents({}), 1501)
        self.assertEqual(c.count_documents({"_id": {"$gte": 1500}}), 0)
        c.delete_many({"_id": {"$ne": "old"}})
        with self.assertRaises(BulkWriteError) as e:
            c.insert_many(docs(), ordered=False)
        d = e.exception.details
        self.assertEqual(d["nInserted"], n - 4)
        self.assertEqual([(w["index"], w["code"]) for w in d["writeErrors"]],
                         [(1500, 11000), (2001, 11000), (2500, 11000),
                          (2700, 11000)])
        self.assertEqual(c.find_one({"k": 10})["_id"], 10)
        self.assertEqual(c.find_one({"k": 2000})["_id"], 2000)
        self.assertEqual(c.find_one({"k": -1})["_id"], "old")
        self.assertEqual(c.find_one({"_id": 2699})["k"], 2699)
        # every document found through the index, and nothing more
        scan = sorted(x["k"] for x in c.find().hint(NATURAL))
        self.assertEqual(sorted(x["k"] for x in c.find().hint("k_1")), scan)
        self.assertEqual(len(scan), n - 3)
        # the keys of the failed documents were let go
        c.insert_many([{"_id": "a", "k": 1500}, {"_id": "b", "k": 2001},
                       {"_id": "c", "k": 2500}, {"_id": "d", "k": 2700}])

    def test_batches_against_a_model(self):
        """Random batches, ordered or not, whose _ids and keys collide
        often with each other and with stored documents (a third deleted
        between rounds, their keys released and taken again), against a
        model of MongoDB's rule: a document fails when its _id, its key
        of k (unique; a missing field is null) or of j (unique, sparse;
        in a third of the documents, so that two documents may share a
        key that is the first one of them reserves and the second of the
        other) is held by a stored document or by an earlier one of the
        batch that was inserted; an ordered batch stops at its first
        failure.  Each round's errors, count and the whole collection are
        compared."""
        c = self.db.model
        c.create_index("k", unique=True)
        c.create_index("j", unique=True, sparse=True)
        rnd = random.Random(35)
        have = {}  # _id -> (k, j)

        def one():
            d = {"_id": rnd.randrange(3000)}
            if rnd.random() > 0.002:
                d["k"] = rnd.randrange(3000)
            if rnd.random() < 0.33:
                d["j"] = rnd.randrange(300)
            return d
        for r in range(30):
            docs = [one() for _ in range(rnd.randint(1, 700))]
            ordered = rnd.random() < 0.5
            want_err, ids = [], dict(have)
            ks = {v[0] for v in have.values()}
            js = {v[1] for v in have.values()} - {None}
            for i, d in enumerate(docs):
                k, j = d.get("k"), d.get("j")
                if d["_id"] in ids or k in ks or j in js:
                    want_err.append(i)
                    if ordered:
                        break
                    continue
                ids[d["_id"]] = (k, j)
                ks.add(k)
                if j is not None:
                    js.add(j)
            try:
                c.insert_many(docs, ordered=ordered)
                got_err, n = [], len(docs)
            except BulkWriteError as e:
                got_err = [w["index"] for w in e.details["writeErrors"]]
                self.assertEqual({w["code"] for w in
                                  e.details["writeErrors"]}, {11000})
                n = e.details["nInserted"]
            self.assertEqual(got_err, want_err, "round %d" % r)
            self.assertEqual(n, len(ids) - len(have), "round %d" % r)
            have = ids
            self.assertEqual({x["_id"]: (x.get("k"), x.get("j")) for x in
                              c.find().hint(NATURAL)}, have, "round %d" % r)
            # deleted documents' keys are free for the next rounds
            gone = rnd.sample(sorted(have), len(have) // 3)
            c.delete_many({"_id": {"$in": gone}})
            for g in gone:
                del have[g]
        self.assertEqual(sorted(x["_id"] for x in c.find().hint("k_1")),
                         sorted(have))
        self.assertEqual(sorted(x["_id"] for x in c.find().hint("j_1")),
                         sorted(i for i, v in have.items()
                                if v[1] is not None))

    def test_ordered_failure_never_seen_past(self):
        """An ordered batch whose document 2000 has a key a stored
        document holds: a reader polling meanwhile never sees a document
        after it (the batch sends none of them ahead of a document whose
        reservation is in the store), and none is left."""
        c = self.db.seen
        c.create_index("k", unique=True)
        c.insert_one({"_id": "old", "k": -1})
        docs = [{"_id": i, "k": i} for i in range(4000)]
        docs[2000]["k"] = -1
        rc = self.host.client(self.creds).uq.seen
        with Poller(lambda: rc.count_documents({"_id": {"$gt": 2000}})) as p:
            with self.assertRaises(BulkWriteError) as e:
                c.insert_many(docs)
        rc.database.client.close()
        self.assertEqual(e.exception.details["nInserted"], 2000)
        self.assertGreater(len(p.seen), 1)
        self.assertEqual(max(p.seen), 0)
        self.assertEqual(c.count_documents({"_id": {"$gte": 2000}}), 0)

    def test_concurrent_batches(self):
        """8 writers insert batches of 500 whose keys overlap, half of
        them ordered: one document per key; an ordered batch's documents
        before its first failure are all there and none after it (those
        inserted ahead of a failure it could not foresee are deleted
        again); an unordered one's are there but for its failures."""
        c = self.db.cb
        c.create_index("k", unique=True)
        results = [None] * 8
        errs = []

        def run(t):
            cc = self.host.client("").uq.cb
            ks = list(range(1000))
            random.Random(t).shuffle(ks)
            docs = [{"_id": "%d-%d" % (t, i), "k": k}
                    for i, k in enumerate(ks[:500])]
            try:
                cc.insert_many(docs, ordered=t % 2 == 0)
                results[t] = (docs, [])
            except BulkWriteError as e:
                bad = [w["index"] for w in e.details["writeErrors"]]
                if any(w["code"] != 11000
                       for w in e.details["writeErrors"]):
                    errs.append(e.details["writeErrors"][:3])
                results[t] = (docs, bad)
            except pymongo.errors.PyMongoError as e:
                errs.append(e)
            cc.database.client.close()
        in_threads(run, 8)
        self.assertEqual(errs, [])
        have = {x["_id"]: x["k"] for x in c.find().hint(NATURAL)}
        self.assertEqual(len(set(have.values())), len(have))
        for t, (docs, bad) in enumerate(results):
            if t % 2 == 0:
                self.assertLessEqual(len(bad), 1)
                first = bad[0] if bad else len(docs)
                want = {d["_id"] for d in docs[:first]}
            else:
                want = {d["_id"] for i, d in enumerate(docs)
                        if i not in set(bad)}
            got = {i for i in have if i.startswith("%d-" % t)}
            self.assertEqual(got, want, "writer %d" % t)
        self.assertEqual(sorted(x["k"] for x in c.find().hint("k_1")),
                         sorted(have.values()))

    def test_missing_sparse_partial(self):
        c = self.db.msp
        c.create_index("a", unique=True)
        c.insert_one({"_id": 1})
        self.dup(lambda: c.insert_one({"_id": 2}), {"a": 1}, {"a": None})
        self.dup(lambda: c.insert_one({"_id": 2, "a": None}))
        s = self.db.msp2
        s.create_index("a", unique=True, sparse=True)
        s.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "a": 1}])
        self.dup(lambda: s.insert_one({"_id": 4, "a": 1}))
        p = self.db.msp3
        p.create_index("a", unique=True,
                       partialFilterExpression={"b": {"$gt": 0}})
        p.insert_many([{"_id": 1, "a": 1, "b": 0}, {"_id": 2, "a": 1, "b": 1}])
        self.dup(lambda: p.insert_one({"_id": 3, "a": 1, "b": 5}))
        p.insert_one({"_id": 4, "a": 1})
        # leaving the filter frees the key
        p.update_one({"_id": 2}, {"$set": {"b": -1}})
        p.insert_one({"_id": 5, "a": 1, "b": 2})

    def test_compound_multikey(self):
        c = self.db.cm
        c.create_index([("a", 1), ("b", -1)], unique=True)
        c.insert_many([{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 1, "b": 2},
                       {"_id": 3, "a": 2, "b": 1}])
        e = self.dup(lambda: c.insert_one({"_id": 4, "a": 1, "b": 2}),
                     {"a": 1, "b": -1}, {"a": 1, "b": 2})
        self.assertIn("index: a_1_b_-1 dup key: { a: 1, b: 2 }",
                      e.details["errmsg"])
        m = self.db.mk
        m.create_index("t", unique=True)
        m.insert_one({"_id": 1, "t": ["x", "y"]})
        m.insert_one({"_id": 2, "t": ["z", "z"]})  # one document: allowed
        self.dup(lambda: m.insert_one({"_id": 3, "t": ["w", "y"]}))
        m.update_one({"_id": 1}, {"$pull": {"t": "y"}})
        m.insert_one({"_id": 3, "t": ["w", "y"]})
        # a build over arrays: 3,000 documents of 40 keys each (batches
        # of the bulk reservations made smaller by their keys), then one
        # whose element another document holds
        b = self.db.mb
        b.insert_many([{"_id": i, "t": list(range(40 * i, 40 * i + 40)) +
                        [40 * i]} for i in range(3000)])
        b.create_index("t", unique=True)
        for v in (0, 41, 40 * 2999 + 39):
            self.dup(lambda: b.insert_one({"_id": "x", "t": [-1, v]}))
        self.assertEqual([d["_id"] for d in b.find({"t": 4001})
                          .hint([("t", 1)])], [100])
        b.drop_index("t_1")
        b.insert_one({"_id": "y", "t": [7, 1234567]})
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            b.create_index("t", unique=True)
        self.assertEqual(e.exception.code, 11000)

    def test_build_over_duplicates(self):
        c = self.db.bd
        c.insert_many([{"_id": i, "a": i % 50} for i in range(100)])
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.create_index("a", unique=True)
        self.assertEqual(e.exception.code, 11000)
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])
        c.delete_many({"_id": {"$gte": 50}})
        c.create_index("a", unique=True)
        self.dup(lambda: c.insert_one({"_id": 1000, "a": 7}))
        c.insert_one({"_id": 1000, "a": 77})
        self.assertEqual([d["_id"] for d in c.find({"a": 7})], [7])

    def test_build_over_one_key(self):
        """A unique build over 40,000 documents that all lack the field
        (each keyed null): 11000 and no index, the pass stopping for the
        driver as its documents pile up rather than keeping them all."""
        c = self.db.ok
        c.insert_many([{"_id": i, "x": i} for i in range(40000)])
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            c.create_index("a", unique=True)
        self.assertEqual(e.exception.code, 11000)
        self.assertEqual([i["name"] for i in c.list_indexes()], ["_id_"])
        c.create_index("a", unique=True, sparse=True)  # none keyed

    def test_concurrent_writers(self):
        """8 writers on their own connections insert documents (their
        _ids spread over the shards) whose keys overlap: one success per
        key, every other insert 11000."""
        c = self.db.cw
        c.create_index("k", unique=True)
        keys = 200
        wins = [[] for _ in range(8)]
        errs = []

        def run(t):
            cc = self.host.client("").uq.cw
            order = list(range(keys))
            random.Random(t).shuffle(order)
            for k in order:
                if insert_or_dup(cc, {"_id": "%d-%d" % (t, k), "k": k},
                                 errs):
                    wins[t].append(k)
            cc.database.client.close()
        in_threads(run, 8)
        self.assertEqual(errs, [])
        won = sorted(k for w in wins for k in w)
        self.assertEqual(won, list(range(keys)))
        self.assertEqual(c.count_documents({}), keys)
        for k in range(0, keys, 7):
            self.assertEqual(len(list(c.find({"k": k}).hint(NATURAL))), 1)


    def audit(self, c, name):
        """Index name over field u answers every document, and only
        them; no two documents share a u; each u is reserved."""
        docs = {d["_id"]: d["u"] for d in c.find().hint(NATURAL)}
        self.assertEqual(len(set(docs.values())), len(docs))
        via = {d["_id"]: d["u"] for d in c.find().hint(name)}
        self.assertEqual(via, docs)
        for i, (k, u) in enumerate(sorted(docs.items(), key=str)):
            if i % 97 == 0:
                self.dup(lambda: c.insert_one({"_id": "dup", "u": u}))
        return docs

    def test_build_under_writers(self):
        """A unique build over 40,000 documents (their keys reserved in
        bulk, then their entries in ranges) while writers insert new
        keys, move documents to new keys and delete some: built, exact,
        and every key reserved, so a second document with any key is
        refused."""
        c = self.db.bw
        n = 40000
        c.insert_many([{"_id": i, "u": i} for i in range(n)])
        stop = threading.Event()
        ready = [threading.Event() for _ in range(3)]
        errs = []

        def run(t):
            cc = self.host.client("").uq.bw
            r = random.Random(t)
            j = 0
            try:
                while not stop.is_set() or j < 50:
                    j += 1
                    if j == 20:
                        ready[t].set()
                    if t == 0:
                        cc.insert_one({"_id": "n%d" % j, "u": n + j})
                    elif t == 1:
                        cc.update_one({"_id": r.randrange(n)},
                                      {"$set": {"u": 2 * n + j}})
                    else:
                        cc.delete_one({"_id": r.randrange(n)})
            except pymongo.errors.PyMongoError as e:
                errs.append(e)
            cc.database.client.close()
        ts = [threading.Thread(target=run, args=(t,)) for t in range(3)]
        for t in ts:
            t.start()
        try:
            for e in ready:  # every writer under way first
                e.wait(60)
            c.create_index("u", unique=True)
        finally:
            stop.set()
            for t in ts:
                t.join()
        self.assertEqual(errs, [])
        self.audit(c, "u_1")

    def test_build_under_duplicates(self):
        """Writers insert keys that documents already hold while a unique
        build runs: each such insert is refused (11000), or the build
        fails (11000) over the duplicate it let in, as mongod's does;
        never an index built over two documents with one key."""
        c = self.db.bx
        n = 60000
        c.insert_many([{"_id": i, "u": i} for i in range(n)])
        won, errs, outcome = [], [], []

        def build():
            try:
                self.host.client("").uq.bx.create_index("u", unique=True)
                outcome.append("built")
            except pymongo.errors.OperationFailure as e:
                outcome.append(e.code)
        b = threading.Thread(target=build)
        b.start()
        kvdtest.wait_for(lambda: "u_1" in [i["name"] for i in
                                           c.list_indexes()], 60,
                         "the index listed")

        def run(t):
            cc = self.host.client("").uq.bx
            r = random.Random(t)
            while not outcome:
                u = r.randrange(n)
                if insert_or_dup(cc, {"_id": "x%d-%d" % (t, u), "u": u},
                                 errs):
                    won.append(u)
            cc.database.client.close()
        in_threads(run, 2)
        b.join()
        self.assertEqual(errs, [])
        if outcome == ["built"]:
            self.assertEqual(won, [])
            self.audit(c, "u_1")
        else:
            self.assertEqual(outcome, [11000])
            self.assertNotEqual(won, [])
            self.assertEqual([i["name"] for i in c.list_indexes()],
                             ["_id_"])
        print("a build under duplicate inserts: %s, %d let in"
              % (outcome[0], len(won)))


class Durable(unittest.TestCase):
    def test_kill9_audit(self):
        """kill -9 while 4 clients insert, update and delete under a unique
        index: after restart every key is held by one document at most,
        every acknowledged insert is there, and the keys of documents lost
        before their acknowledgement, or of leftovers, are free again."""
        h = KvdHost(password=None, threads=4)
        stop = threading.Event()
        acked = [dict() for _ in range(4)]
        try:
            c = h.client("").t.k
            c.create_index("k", unique=True)

            def run(t):
                wc = h.client("").t.k
                rnd = random.Random(t)
                n = 0
                while not stop.is_set():
                    k = rnd.randrange(300)
                    i = "%d-%d" % (t, n)
                    n += 1
                    try:
                        if n % 5 == 0:
                            wc.update_one({"k": k}, {"$set": {
                                "k": rnd.randrange(300)}})
                        else:
                            wc.insert_one({"_id": i, "k": k})
                            acked[t][i] = k
                    except DuplicateKeyError:
                        pass
                    except pymongo.errors.PyMongoError:
                        return
            ts = [threading.Thread(target=run, args=(t,)) for t in range(4)]
            for t in ts:
                t.start()
            kvdtest.wait_for(lambda: sum(len(a) for a in acked) >= 150, 120,
                             "inserts")
            h.srv.kill9()
            stop.set()
            for t in ts:
                t.join()
            h.start_again()
            c = h.client("").t.k
            docs = {d["_id"]: d.get("k") for d in c.find().hint(NATURAL)}
            for a in acked:
                for i in a:
                    self.assertIn(i, docs)
            held = {}
            for i, k in docs.items():
                self.assertNotIn(k, held, "key %r twice" % k)
                held[k] = i
            # every key not held can be taken, a held one cannot
            for k in range(300):
                if k in held:
                    self.assertRaises(DuplicateKeyError, c.insert_one,
                                      {"_id": "n%d" % k, "k": k})
                else:
                    c.insert_one({"_id": "n%d" % k, "k": k})
            self.assertEqual(c.count_documents({}), len(docs) + 300 -
                             len(held))
        finally:
            stop.set()
            h.stop()


class Carried(unittest.TestCase):
    """Reservations are keys of the store like any other: a replica and a
    restored backup have them, so once on their own they still refuse a
    duplicate (without them the key would look free)."""

    def fill(self, cl):
        c = cl.t.u
        c.create_index("k", unique=True)
        c.insert_many([{"_id": i, "k": i} for i in range(50)])
        c.update_one({"_id": 7}, {"$set": {"k": 1007}})
        # a build over documents there before it: their keys reserved in
        # bulk, their entries in ranges
        b = cl.t.b
        b.insert_many([{"_id": i, "k": i} for i in range(3000)])
        b.create_index("k", unique=True)

    def check(self, cl):
        c = cl.t.u
        for k in (0, 49, 1007):
            self.assertRaises(DuplicateKeyError, c.insert_one,
                              {"_id": "x%d" % k, "k": k})
        c.insert_one({"_id": "x7", "k": 7})  # let go by the update
        b = cl.t.b
        for k in (0, 1500, 2999):
            self.assertRaises(DuplicateKeyError, b.insert_one,
                              {"_id": "x%d" % k, "k": k})
        self.assertEqual([d["_id"] for d in
                          b.find({"k": 1234}).hint([("k", 1)])], [1234])

    def test_replica(self):
        p = KvdHost(password=None)
        r = None
        try:
            self.fill(p.client(""))
            p.client("").t.u.insert_one({"_id": "last", "k": "last"})
            r = KvdHost(password=None,
                        args=["--replicaof", "127.0.0.1", str(p.srv.port)])
            rc = r.client("")
            kvdtest.wait_for(
                lambda: rc.t.u.find_one({"_id": "last"}) is not None, 60,
                "the replica's copy")
            rc.close()
            r.srv.stop()
            # the replica's data on its own, as a primary
            r.srv.extra = ["--mongo-port", str(r.mport)]
            r.srv.start()
            self.check(r.client(""))
        finally:
            if r:
                r.stop()
            p.stop()

    def test_backup(self):
        tmp = tempfile.mkdtemp(prefix="kvduqbk-")
        bk = os.path.join(tmp, "bk")
        h = KvdHost(password=None, args=["--backup-anywhere", "yes"])
        try:
            self.fill(h.client(""))
            c = h.srv.client()
            st, _ = c.call(kvdtest.BACKUP, bk.encode())
            self.assertEqual(st, kvdtest.OK)
            c.close()
        finally:
            h.stop()
        r = KvdHost(password=None, data_dir=os.path.join(tmp, "restored"),
                    args=["--restore", bk])
        try:
            self.check(r.client(""))
        finally:
            r.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
