"""The native protocol's document operations (DOCINSERT, DOCGET, DOCUPDATE,
DOCDELETE, DOCFIND: docs/protocol.md, "Documents") against a real kvd: what
each answers, MongoDB's errors as DOC_ERROR, bad, huge and deeply nested
BSON refused with the connection still served, DOCFIND's pages and cursors
(_id order, sorts, skip, limit, projections), AUTH, no lost update between
8 connections, and the same documents seen through the MongoDB door."""
import threading
import time

import bson
from bson.son import SON
import kvproto as P
from kvdtest import (Server, ServerCase, frame, free_port, main,
                     mongo_client, start_with)

E = bson.encode
D = bson.decode


def docs(reply):
    return [D(d) for d in reply[1]]


def find_all(c, *args, batch=None):
    """Every document of a DOCFIND, page by page: (documents, pages)."""
    out, cursor, pages = [], None, 0
    args = list(args) + [None] * (7 - len(args))
    while True:
        r = c.call(P.DOCFIND, *(args[:7] + [batch, cursor]))
        assert r[0] == P.OK, r
        out += docs(r)
        pages += 1
        cursor = r[2]
        if cursor is None:
            return out, pages


class NativeDoc(ServerCase):
    SERVER = {"threads": 2}
    serial = 0

    def coll(self):
        NativeDoc.serial += 1
        return b"c%d" % NativeDoc.serial

    def test_insert_get(self):
        c, k = self.c, self.coll()
        r = c.call(P.DOCINSERT, b"db", k, E({"_id": 1, "a": 1}), E({"b": 2}),
                   E({"c": 3, "_id": "x"}))
        self.assertEqual(r[0], P.OK, r)
        ids = [D(i) for i in r[1]]
        self.assertEqual(ids[0], {"_id": 1})
        self.assertIsInstance(ids[1]["_id"], bson.ObjectId)  # generated
        self.assertEqual(ids[2], {"_id": "x"})
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": 1})),
                         [P.OK, E({"_id": 1, "a": 1})])
        # _id first, whatever order it came in
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": "x"})),
                         [P.OK, E({"_id": "x", "c": 3})])
        self.assertEqual(D(c.call(P.DOCGET, b"db", k, r[1][1])[1]),
                         dict(ids[1], b=2))
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": 2})), [P.NOT_FOUND])
        self.assertEqual(c.call(P.DOCGET, b"db", b"none", E({"_id": 1})),
                         [P.NOT_FOUND])
        # 1 and 1.0 are one _id (MongoDB's equality)
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": 1.0}))[0], P.OK)

    def test_duplicate_stops_ordered(self):
        c, k = self.c, self.coll()
        r = c.call(P.DOCINSERT, b"db", k, E({"_id": 1}), E({"_id": 2}),
                   E({"_id": 1}), E({"_id": 3}))
        self.assert_doc_error(r, 11000, b"document 2: E11000 duplicate key")
        got, _ = find_all(c, b"db", k)
        self.assertEqual(got, [{"_id": 1}, {"_id": 2}])

    def test_update(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, E({"_id": 1, "n": 1, "t": "a"}),
               E({"_id": 2, "n": 2, "t": "a"}), E({"_id": 3, "n": 3}))
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({"_id": 1}),
                                E({"$inc": {"n": 10}})), [P.OK, 1, 1, None])
        # a query, one match (the first in _id order), then every match
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({"t": "a"}),
                                E({"$set": {"u": 1}})), [P.OK, 1, 1, None])
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({"t": "a"}),
                                E({"$set": {"u": 1}}), P.DOC_MULTI),
                         [P.OK, 2, 1, None])
        # replacement keeps the _id
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({"_id": 3}),
                                E({"z": 1})), [P.OK, 1, 1, None])
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": 3})),
                         [P.OK, E({"_id": 3, "z": 1})])
        # no match; an upsert takes the filter's equalities
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({"_id": 9}),
                                E({"$set": {"a": 1}})), [P.OK, 0, 0, None])
        r = c.call(P.DOCUPDATE, b"db", k, E({"_id": 9, "w": 5}),
                   E({"$set": {"a": 1}}), P.DOC_UPSERT)
        self.assertEqual(r, [P.OK, 0, 0, E({"_id": 9})])
        self.assertEqual(D(c.call(P.DOCGET, b"db", k, E({"_id": 9}))[1]),
                         {"_id": 9, "w": 5, "a": 1})
        r = c.call(P.DOCUPDATE, b"db", k, E({"q": 7}), E({"$set": {"a": 1}}),
                   P.DOC_UPSERT)
        self.assertIsInstance(D(r[3])["_id"], bson.ObjectId)
        # an upsert into a collection that does not exist creates it
        r = c.call(P.DOCUPDATE, b"db2", k, E({"_id": 1}), E({"$inc": {"n": 1}}),
                   P.DOC_UPSERT)
        self.assertEqual(r, [P.OK, 0, 0, E({"_id": 1})])
        self.assertEqual(c.call(P.DOCGET, b"db2", k, E({"_id": 1})),
                         [P.OK, E({"_id": 1, "n": 1})])

    def test_update_errors(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, E({"_id": 1, "s": "text"}))
        self.assert_doc_error(c.call(P.DOCUPDATE, b"db", k, E({}),
                                     E({"$bad": {"a": 1}})), 9, b"$bad")
        self.assert_doc_error(c.call(P.DOCUPDATE, b"db", k, E({}),
                                     E({"z": 1}), P.DOC_MULTI), 9)
        # computed by the committer on the stored document
        self.assert_doc_error(c.call(P.DOCUPDATE, b"db", k, E({"_id": 1}),
                                     E({"$inc": {"s": 1}})), 14,
                              b"non-numeric")
        self.assert_doc_error(c.call(P.DOCUPDATE, b"db", k, E({"_id": 1}),
                                     E({"$set": {"_id": 2}})), 66)
        self.assert_doc_error(c.call(P.DOCFIND, b"db", k,
                                     E({"a": {"$nope": 1}})), 2)
        self.assertEqual(c.call(P.DOCUPDATE, b"db", k, E({}), E({"$set": {}}),
                                4)[0], P.BAD_ARGS)
        self.assertEqual(c.call(P.DOCDELETE, b"db", k, E({}), 1)[0],
                         P.BAD_ARGS)
        self.assert_doc_error(c.call(P.DOCGET, b"db", k, E({"a": 1})), 2)
        self.assert_doc_error(c.call(P.DOCGET, b"d.b", k, E({"_id": 1})), 73)
        self.assert_doc_error(c.call(P.DOCINSERT, b"db", b"c$", E({})), 73)
        self.assertEqual(c.call(P.DOCGET, b"db", k, E({"_id": 1})),
                         [P.OK, E({"_id": 1, "s": "text"})])

    def test_delete(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, *[E({"_id": i, "odd": i % 2})
                                        for i in range(10)])
        self.assertEqual(c.call(P.DOCDELETE, b"db", k, E({"_id": 0})), [P.OK, 1])
        self.assertEqual(c.call(P.DOCDELETE, b"db", k, E({"_id": 0})), [P.OK, 0])
        self.assertEqual(c.call(P.DOCDELETE, b"db", k, E({"odd": 1})), [P.OK, 1])
        self.assertEqual(c.call(P.DOCDELETE, b"db", k, E({"odd": 1}),
                                P.DOC_MULTI), [P.OK, 4])
        got, _ = find_all(c, b"db", k)
        self.assertEqual([d["_id"] for d in got], [2, 4, 6, 8])
        self.assertEqual(c.call(P.DOCDELETE, b"db", b"none", E({})), [P.OK, 0])

    def test_bad_bson_nothing_held(self):
        c, k = self.c, self.coll()
        good = E({"_id": 1})
        # an array keyed "5" where BSON wants "0": well formed otherwise
        arr = E({"a": ["x"]}).replace(b"\x020\x00", b"\x025\x00")
        bad = [b"", b"\x05\x00\x00", b"\x06\x00\x00\x00\x00\x00",
               good[:-1] + b"\x01", b"\xff\xff\xff\x7f" + good[4:], arr]
        for b in bad:
            # a bad document among good ones: none is inserted
            self.assert_doc_error(c.call(P.DOCINSERT, b"db", k, good, b), 22)
            for req in ((P.DOCGET, b"db", k, b), (P.DOCFIND, b"db", k, b),
                        (P.DOCUPDATE, b"db", k, good, b),
                        (P.DOCDELETE, b"db", k, b)):
                self.assert_doc_error(c.call(*req), 22)
        self.assertEqual(c.call(P.DOCINSERT, b"db", k, 5)[0], P.BAD_ARGS)
        # deeper than 100 levels: refused, and nothing else went in
        deep = {"v": 1}
        for _ in range(120):
            deep = {"d": deep}
        self.assert_doc_error(c.call(P.DOCINSERT, b"db", k, good, E(deep)), 15)
        # over 16 MiB
        huge = E({"s": "x" * (16 * 1024 * 1024)})
        self.assert_doc_error(c.call(P.DOCINSERT, b"db", k, huge), 10334)
        self.assertEqual(find_all(c, b"db", k)[0], [])
        self.assertEqual(c.call(P.PING), [P.OK])
        self.assertEqual(c.call(P.DOCINSERT, b"db", k, good)[0], P.OK)

    def test_find_pages_in_id_order(self):
        c, k = self.c, self.coll()
        n = 1000
        for i in range(0, n, 250):
            c.call(P.DOCINSERT, b"db", k, *[E({"_id": j, "m": j % 7})
                                            for j in range(i, i + 250)])
        got, pages = find_all(c, b"db", k, batch=100)
        self.assertEqual([d["_id"] for d in got], list(range(n)))
        self.assertEqual(pages, 10)
        got, _ = find_all(c, b"db", k, E({"m": 3}), E({"m": 0}), None, 5, 20,
                          batch=7)
        want = [j for j in range(n) if j % 7 == 3][5:25]
        self.assertEqual(got, [{"_id": j} for j in want])
        # a page of 2 MiB documents ends by bytes, not count
        big = self.coll()
        c.call(P.DOCINSERT, b"db", big,
               *[E({"_id": i, "s": "y" * (2 << 20)}) for i in range(6)])
        r = c.call(P.DOCFIND, b"db", big)
        self.assertLess(len(r[1]), 6)
        self.assertIsNotNone(r[2])
        got, _ = find_all(c, b"db", big)
        self.assertEqual([d["_id"] for d in got], list(range(6)))

    def test_find_sorted_pages(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, *[E({"_id": i, "v": (i * 37) % 101})
                                        for i in range(101)])
        got, pages = find_all(c, b"db", k, None, None, E({"v": -1}), batch=10)
        self.assertEqual([d["v"] for d in got], list(range(100, -1, -1)))
        self.assertEqual(pages, 11)
        got, _ = find_all(c, b"db", k, E({"v": {"$lt": 50}}), E({"_id": 0}),
                          E({"v": 1}), 10, 15, batch=4)
        self.assertEqual(got, [{"v": v} for v in range(10, 25)])
        # a cursor of one kind is not the other's
        r = c.call(P.DOCFIND, b"db", k, None, None, E({"v": 1}), None, None, 5)
        self.assertEqual(c.call(P.DOCFIND, b"db", k, None, None, None, None,
                                None, 5, r[2])[0], P.BAD_ARGS)
        r = c.call(P.DOCFIND, b"db", k, None, None, None, None, None, 5)
        bad = r[2][:17] + b"\x00\x00\x00\x63" + r[2][21:]
        self.assertEqual(c.call(P.DOCFIND, b"db", k, None, None, None, None,
                                None, 5, bad)[0], P.BAD_ARGS)

    def test_find_examines_bounded(self):
        c, k = self.c, self.coll()
        for i in range(0, 12000, 2000):
            c.call(P.DOCINSERT, b"db", k, *[E({"_id": j}) for j in range(i, i + 2000)])
        # nothing matches: a first page examines at most 10,000 (fewer
        # when its time slice ends first), empty, with a cursor
        r = c.call(P.DOCFIND, b"db", k, E({"nope": 1}))
        self.assertEqual(r[:2], [P.OK, []])
        self.assertIsNotNone(r[2])
        found, pages = find_all(c, b"db", k, E({"nope": 1}))
        self.assertEqual((found, pages >= 2), ([], True))
        self.assertEqual(len(find_all(c, b"db", k, E({"_id": {"$gte": 11990}}))[0]),
                         10)

    def test_find_sort_keys_in_order(self):
        """A sort's keys count in their order, _id after another key too
        (docs/protocol.md: pymongo's bson.encode moves _id first in a
        top-level document, so the spec goes as an inner document)."""
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, *[E({"_id": i, "g": i % 2})
                                        for i in range(6)])
        for spec, want in (([("g", -1), ("_id", 1)], [1, 3, 5, 0, 2, 4]),
                           ([("g", 1), ("_id", -1)], [4, 2, 0, 5, 3, 1]),
                           ([("_id", -1), ("g", 1)], [5, 4, 3, 2, 1, 0])):
            sort = E({"s": SON(spec)})[7:-1]
            got, _ = find_all(c, b"db", k, None, None, sort, batch=4)
            self.assertEqual([d["_id"] for d in got], want, spec)

    def test_find_slow_matches_paged(self):
        """A filter slow to match (a $regex that backtracks to PCRE2's
        limit, 140 ms a document interpreted, 23 ms with PCRE2's JIT)
        ends each page after a slice of time, so that the io thread goes
        on to its other connections: 20 such documents come in many pages
        (a page of 10,000 would take minutes), and the one match is
        found."""
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k,
               *[E({"_id": i, "s": "a" * 24 + "!"}) for i in range(20)])
        c.call(P.DOCINSERT, b"db", k, E({"_id": 20, "s": "aaa"}))
        found, pages = find_all(c, b"db", k,
                                E({"s": {"$regex": "^(a+)+$"}}))
        self.assertEqual(found, [{"_id": 20, "s": "aaa"}])
        self.assertGreater(pages, 5)

    def test_lost_update_8_connections(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"db", k, E({"_id": "ctr"}))
        n = 300
        errors = []

        def worker(w):
            cl = self.srv.client()
            try:
                reqs = [(P.DOCUPDATE, b"db", k, E({"_id": "ctr"}),
                         E({"$inc": {"f%d" % w: 1, "all": 1}}))] * n
                for rep in cl.pipeline(reqs):
                    if rep != [P.OK, 1, 1, None]:
                        errors.append(rep)
            finally:
                cl.close()
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        got = D(c.call(P.DOCGET, b"db", k, E({"_id": "ctr"}))[1])
        self.assertEqual(got, dict({"_id": "ctr", "all": 8 * n},
                                   **{"f%d" % w: n for w in range(8)}))

    def test_flushall_then_new_collection(self):
        # FLUSHALL empties the catalog, whose versions then start again: an
        # io thread's copy of the old catalog must not pass for the new one
        c = self.c
        self.assertEqual(c.call(P.DOCINSERT, b"fdb", b"old", E({"_id": 1}))[0], P.OK)
        self.assertEqual(c.call(P.DOCGET, b"fdb", b"old", E({"_id": 1}))[0], P.OK)
        self.assertEqual(c.call(P.FLUSHALL), [P.OK])
        self.assertEqual(c.call(P.DOCINSERT, b"fdb", b"new", E({"_id": 2}))[0], P.OK)
        self.assertEqual(c.call(P.DOCGET, b"fdb", b"new", E({"_id": 2})),
                         [P.OK, E({"_id": 2})])
        self.assertEqual(c.call(P.DOCGET, b"fdb", b"old", E({"_id": 2})), [P.NOT_FOUND])

    def test_pipelined_in_order(self):
        c, k = self.c, self.coll()
        reps = c.pipeline([(P.PUT, b"s", b"1"),
                           (P.DOCINSERT, b"db", k, E({"_id": 1, "n": 0})),
                           (P.DOCUPDATE, b"db", k, E({"_id": 1}),
                            E({"$inc": {"n": 1}})),
                           (P.DOCGET, b"db", k, E({"_id": 1})),
                           (P.GET, b"s"),
                           (P.DOCDELETE, b"db", k, E({"_id": 1})),
                           (P.DOCGET, b"db", k, E({"_id": 1}))])
        self.assertEqual(reps[0], [P.OK])
        self.assertEqual(reps[2], [P.OK, 1, 1, None])
        self.assertEqual(reps[3], [P.OK, E({"_id": 1, "n": 1})])
        self.assertEqual(reps[4], [P.OK, b"1"])
        self.assertEqual(reps[5], [P.OK, 1])
        self.assertEqual(reps[6], [P.NOT_FOUND])


class NativeDocAuth(ServerCase):
    SERVER = {"threads": 2, "args": ("--requirepass", "pw")}

    def setUp(self):
        self.c = self.srv.client()

    def test_before_and_after_auth(self):
        c = self.c
        reqs = [(P.DOCINSERT, b"db", b"a", E({"_id": 1})),
                (P.DOCGET, b"db", b"a", E({"_id": 1})),
                (P.DOCUPDATE, b"db", b"a", E({}), E({"$set": {"x": 1}})),
                (P.DOCDELETE, b"db", b"a", E({})),
                (P.DOCFIND, b"db", b"a")]
        for req in reqs:
            self.assertEqual(c.call(*req)[0], P.AUTH_REQUIRED, req)
        self.assertEqual(c.call(P.AUTH, b"pw"), [P.OK])
        got = [c.call(*req) for req in reqs]
        self.assertEqual(got[0][0], P.OK)
        self.assertEqual(got[1], [P.OK, E({"_id": 1})])
        self.assertEqual(got[2], [P.OK, 1, 1, None])
        self.assertEqual(got[3], [P.OK, 1])
        self.assertEqual(got[4], [P.OK, [], None])


class CrossDoor(ServerCase):
    """A document written natively is the MongoDB door's, and back."""
    mport = free_port()
    SERVER = {"threads": 2, "args": ("--mongo-port", str(mport))}

    def test_both_ways(self):
        c = self.c
        m = mongo_client(self, self.mport)
        coll = m["xdb"]["people"]
        self.assertEqual(c.call(P.DOCINSERT, b"xdb", b"people",
                                E({"_id": "n1", "name": "ann", "age": 30}))[0],
                         P.OK)
        self.assertEqual(coll.find_one({"_id": "n1"}),
                         {"_id": "n1", "name": "ann", "age": 30})
        coll.insert_one({"_id": "m1", "name": "bob", "tags": ["a", "b"]})
        self.assertEqual(D(c.call(P.DOCGET, b"xdb", b"people",
                                  E({"_id": "m1"}))[1]),
                         {"_id": "m1", "name": "bob", "tags": ["a", "b"]})
        c.call(P.DOCUPDATE, b"xdb", b"people", E({"_id": "m1"}),
               E({"$push": {"tags": "c"}}))
        self.assertEqual(coll.find_one({"_id": "m1"})["tags"], ["a", "b", "c"])
        self.assertIn("people", m["xdb"].list_collection_names())


SLOW = {"s": {"$regex": "^(a+)+$"}}  # backtracks on "aaa...a!"
NSLOW = 120  # about 3 s of matching with PCRE2's JIT, 17 s without


class NativeDocYield(ServerCase):
    """A sorted DOCFIND page runs its query whole (its sort needs every
    match) and so reads a slice at a time, the page waiting on its
    connection while the io thread (one here) serves the others."""
    SERVER = {"threads": 1}

    def setUp(self):
        super().setUp()
        self.c.call(P.DOCINSERT, b"db", b"slow",
                    *[E({"_id": i, "s": "a" * 24 + "!", "g": i % 2})
                      for i in range(NSLOW)])
        self.c.call(P.DOCINSERT, b"db", b"slow",
                    E({"_id": NSLOW, "s": "aaa", "g": 1}))

    def sorted_find(self, c):
        # by g descending; ties keep _id order (a stable sort)
        return c.call(P.DOCFIND, b"db", b"slow",
                      E({"$or": [SLOW, {"_id": {"$lt": 2}}]}), None,
                      E({"g": -1}), None, None, 2, None)

    def test_sorted_page_shares_the_thread(self):
        other = self.srv.client()
        self.addCleanup(other.close)
        self.assertEqual(other.call(P.PING), [P.OK])
        got, ended = [], []

        def run():
            cl = self.srv.client()
            try:
                got.append(self.sorted_find(cl))
            finally:
                ended.append(time.monotonic())
                cl.close()

        t = threading.Thread(target=run)
        started = time.monotonic()
        t.start()
        time.sleep(0.5)
        for _ in range(3):
            self.assertEqual(other.call(P.PING), [P.OK])
            self.assertEqual(
                docs(other.call(P.DOCFIND, b"db", b"slow",
                                E({"_id": 5})))[0]["g"], 1)
        answered = time.monotonic()
        self.assertTrue(t.is_alive(), "the sorted page ended before the "
                        "others were answered: it did not take seconds?")
        t.join(300)
        self.assertLess(answered - started, (ended[0] - started) / 2,
                        "others waited for the sorted page")
        self.assertEqual(got[0][0], P.OK, got[0])
        self.assertEqual([d["_id"] for d in docs(got[0])], [1, NSLOW])
        # the next page (the query again, past what was returned)
        r = self.c.call(P.DOCFIND, b"db", b"slow",
                        E({"$or": [SLOW, {"_id": {"$lt": 2}}]}), None,
                        E({"g": -1}), None, None, 2, got[0][2])
        self.assertEqual(([d["_id"] for d in docs(r)], r[2]), ([0], None))

    def test_pipelined_after_a_sorted_page(self):
        """Requests pipelined behind a page that gives its thread back
        are answered after it, in order; a write before it is read."""
        reqs = [(P.PUT, b"k", b"v"),
                (P.DOCFIND, b"db", b"slow", E(SLOW), E({"_id": 1}),
                 E({"_id": -1})),
                (P.GET, b"k"), (P.PING,)]
        got = self.c.pipeline(reqs)
        self.assertEqual(got[0], [P.OK])
        self.assertEqual(got[1][0], P.OK, got[1])
        self.assertEqual(docs(got[1]), [{"_id": NSLOW}])
        self.assertEqual(got[2], [P.OK, b"v"])
        self.assertEqual(got[3], [P.OK])

    def test_pages_part_way_bounded(self):
        """What sorted pages waiting for their next slice hold together is
        bounded (1 GiB; KVD_PAGES_HELD_MAX here): past it a page ends with
        146, where one that needs no second slice answers."""
        srv = Server(threads=1)
        start_with(srv, KVD_PAGES_HELD_MAX=1000)
        self.addCleanup(srv.cleanup)
        self.addCleanup(srv.stop)
        c = srv.client()
        self.addCleanup(c.close)
        c.call(P.DOCINSERT, b"db", b"slow",
               *[E({"_id": i, "s": "a" * 24 + "!", "pad": "p" * 100})
                 for i in range(40)])
        c.call(P.DOCINSERT, b"db", b"fast",
               *[E({"_id": i, "pad": "p" * 100}) for i in range(40)])
        r = c.call(P.DOCFIND, b"db", b"slow",
                   E({"$or": [SLOW, {"_id": {"$gte": 0}}]}), None,
                   E({"pad": 1}))
        self.assert_doc_error(r, 146, b"sorted pages part-way hold more "
                              b"than 1000 bytes")
        r = c.call(P.DOCFIND, b"db", b"fast", None, None, E({"pad": 1}))
        self.assertEqual(len(docs(r)), 40)
        self.assertEqual(c.call(P.PING), [P.OK])

    def test_close_mid_page(self):
        """A connection closed while its page reads leaves nothing behind:
        the thread goes on serving."""
        cl = self.srv.client()
        cl.send_raw(frame([P.DOCFIND, b"db", b"slow", E(SLOW), None,
                             E({"g": 1})]))
        time.sleep(0.3)
        cl.close()
        self.assertEqual(self.c.call(P.PING), [P.OK])
        self.assertIsNone(self.srv.proc.poll())

if __name__ == "__main__":
    main()
