"""The native protocol's database, collection and index operations (DOCDBS,
DOCCOLLS, DOCCREATE, DOCDROP, DOCIXCREATE, DOCIXLIST, DOCIXDROP:
docs/protocol.md, "Documents") against a real kvd with its MongoDB door:
what each answers, indexes built over the documents there and used by the
door's planner, the door's refusals with the door's codes and texts (the
same checks serve both), and what the door sees of a native change and
back."""
import itertools
import unittest

import bson
import kvproto as P
from kvdtest import Server, ServerCase, free_port, main, mongo_client

E = bson.encode
D = bson.decode


NAMES = itertools.count(1)


def spec(key, name, **opts):
    return E(dict({"key": key, "name": name}, **opts))


class NativeDocAdmin(ServerCase):
    mport = free_port()
    SERVER = {"threads": 2, "args": ("--mongo-port", str(mport))}

    def coll(self):
        """A collection of this test's own."""
        return b"c%d" % next(NAMES)

    def mongo(self):
        return mongo_client(self, self.mport)

    def indexes(self, db, coll):
        r = self.c.call(P.DOCIXLIST, db, coll)
        self.assertEqual(r[0], P.OK, r)
        return [D(s) for s in r[1]]

    def test_create_list_drop(self):
        c, k = self.c, self.coll()
        self.assertEqual(c.call(P.DOCCREATE, b"adm", k), [P.OK])
        self.assertEqual(c.call(P.DOCCREATE, b"adm", k), [P.EXISTS_ST])
        k2 = self.coll()
        self.assertEqual(c.call(P.DOCCREATE, b"adm", k2,
                                E({"comment": "x", "storageEngine": {}})),
                         [P.OK])
        r = c.call(P.DOCDBS)
        self.assertEqual(r[0], P.OK, r)
        self.assertIn(b"adm", r[1])
        r = c.call(P.DOCCOLLS, b"adm")
        self.assertEqual(r[0], P.OK, r)
        pairs = dict(zip(r[1][::2], r[1][1::2]))
        self.assertEqual(D(pairs[k]), {})
        # create's options as the door keeps them (comment left out)
        self.assertEqual(D(pairs[k2]), {"storageEngine": {}})
        self.assertEqual(c.call(P.DOCCOLLS, b"nosuchdb"), [P.OK, []])
        self.assertEqual(c.call(P.DOCDROP, b"adm", k), [P.OK])
        self.assertEqual(c.call(P.DOCDROP, b"adm", k), [P.NOT_FOUND])
        r = c.call(P.DOCCOLLS, b"adm")
        self.assertNotIn(k, r[1][::2])
        self.assertIn(k2, r[1][::2])

    def test_create_refusals(self):
        c, k = self.c, self.coll()
        self.assert_doc_error(c.call(P.DOCCREATE, b"adm", k,
                                     E({"capped": True, "size": 1000})),
                              238, b"'capped' option is not supported")
        self.assert_doc_error(c.call(P.DOCCREATE, b"adm", k, b"\x05\x00"),
                              22)
        self.assert_doc_error(c.call(P.DOCCREATE, b"a.b", k), 73)
        self.assert_doc_error(c.call(P.DOCCOLLS, b"a b"), 73)
        self.assertEqual(c.call(P.DOCCREATE, b"adm", k, 5)[0], P.BAD_ARGS)
        self.assertEqual(c.call(P.DOCCREATE, b"adm", k)[0], P.OK)

    def test_indexes_built_and_planned(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"adm", k,
               *[E({"_id": i, "a": i % 7, "b": "x%d" % i}) for i in range(300)])
        r = c.call(P.DOCIXCREATE, b"adm", k, spec({"a": 1}, "a_1"),
                   spec({"b": -1, "a": 1}, "ba", sparse=True))
        self.assertEqual(r, [P.OK, 1, 3, 0])
        # the same again: nothing to do, as createIndexes' note
        self.assertEqual(c.call(P.DOCIXCREATE, b"adm", k,
                                spec({"a": 1}, "a_1")), [P.OK, 3, 3, 0])
        self.assertEqual(self.indexes(b"adm", k), [
            {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            {"v": 2, "key": {"a": 1}, "name": "a_1"},
            {"v": 2, "key": {"b": -1, "a": 1}, "name": "ba", "sparse": True}])
        # built over the 300 documents: the door plans with it and finds
        # through it what a collection scan finds
        m = self.mongo()
        coll = m["adm"][k.decode()]
        plan = coll.find({"a": 3}).explain()
        self.assertIn("a_1", str(plan["queryPlanner"]["winningPlan"]))
        self.assertEqual(sorted(d["_id"] for d in coll.find({"a": 3})),
                         [i for i in range(300) if i % 7 == 3])
        self.assertEqual(plan["executionStats"]["totalKeysExamined"],
                         len([i for i in range(300) if i % 7 == 3]))
        self.assertEqual([ix["name"] for ix in coll.list_indexes()],
                         ["_id_", "a_1", "ba"])
        # an index on a new collection makes it
        k3 = self.coll()
        self.assertEqual(c.call(P.DOCIXCREATE, b"adm", k3,
                                spec({"z": 1}, "z_1")), [P.OK, 1, 2, 1])

    def test_unique_index(self):
        """A unique index made natively holds for native writes and the
        door's alike: 11000 with the door's text, from either side."""
        c, k = self.c, self.coll()
        self.assertEqual(c.call(P.DOCIXCREATE, b"adm", k,
                                spec({"u": 1}, "u_1", unique=True)),
                         [P.OK, 1, 2, 1])
        self.assertEqual(c.call(P.DOCINSERT, b"adm", k,
                                E({"_id": 1, "u": 5}))[0], P.OK)
        r = c.call(P.DOCINSERT, b"adm", k, E({"_id": 2, "u": 5}))
        self.assert_doc_error(r, 11000, b"E11000 duplicate key error")
        coll = self.mongo()["adm"][k.decode()]
        from pymongo.errors import DuplicateKeyError
        with self.assertRaises(DuplicateKeyError) as cm:
            coll.insert_one({"_id": 3, "u": 5})
        self.assertEqual(r[1].decode(), cm.exception.details["errmsg"])
        self.assertEqual(c.call(P.DOCINSERT, b"adm", k,
                                E({"_id": 4, "u": 6}))[0], P.OK)
        self.assertEqual(sorted(d["_id"] for d in coll.find()), [1, 4])
        self.assertEqual(self.indexes(b"adm", k)[1],
                         {"v": 2, "key": {"u": 1}, "name": "u_1",
                          "unique": True})
        # a unique index over duplicate values: 11000, and of the
        # command's indexes none is left (all or none)
        c.call(P.DOCINSERT, b"adm", k, E({"_id": 7, "w": 1}),
               E({"_id": 8, "w": 1}))
        r = c.call(P.DOCIXCREATE, b"adm", k, spec({"x": 1}, "x_1"),
                   spec({"w": 1}, "w_1", unique=True))
        self.assert_doc_error(r, 11000, b"E11000 duplicate key error")
        self.assertEqual([s["name"] for s in self.indexes(b"adm", k)],
                         ["_id_", "u_1"])

    def test_indexes_after_flushall(self):
        """FLUSHALL empties the catalog with the rest; the indexes made
        after it are kept by the writes after it (the committers' copy of
        the catalog before it must not stand in for the new one)."""
        c = self.c
        for r in range(3):
            k = self.coll()
            self.assertEqual(c.call(P.DOCIXCREATE, b"adm", k,
                                    spec({"f%d" % r: 1}, "f_1"))[0], P.OK)
            self.assertEqual(c.call(P.DOCINSERT, b"adm", k, *[
                E({"_id": i, "f%d" % r: i % 5}) for i in range(50)])[0],
                P.OK)
            # the index made after FLUSHALL has the id the one before it
            # had: each io thread must plan with the new key pattern, not
            # a compiled copy of the old (connections spread over them)
            for m in [self.mongo() for _ in range(4)]:
                coll = m["adm"][k.decode()]
                found = coll.find({"f%d" % r: 3}).hint("f_1")
                self.assertEqual(sorted(d["_id"] for d in found),
                                 list(range(3, 50, 5)), "round %d" % r)
                plan = coll.find({"f%d" % r: 3}).explain()
                self.assertIn("f_1", str(plan["queryPlanner"]
                                         ["winningPlan"]), "round %d" % r)
                self.assertEqual(
                    plan["executionStats"]["totalKeysExamined"], 10)
            self.assertEqual(c.call(P.FLUSHALL), [P.OK])

    def test_index_drop(self):
        c, k = self.c, self.coll()
        c.call(P.DOCINSERT, b"adm", k, E({"_id": 1, "a": 1, "b": 2}))
        c.call(P.DOCIXCREATE, b"adm", k, spec({"a": 1}, "a_1"),
               spec({"b": 1}, "b_1"), spec({"a": 1, "b": 1}, "ab"))
        self.assertEqual(c.call(P.DOCIXDROP, b"adm", k, b"a_1"), [P.OK, 4])
        self.assertEqual(c.call(P.DOCIXDROP, b"adm", k, None, E({"b": 1})),
                         [P.OK, 3])
        self.assertEqual([s["name"] for s in self.indexes(b"adm", k)],
                         ["_id_", "ab"])
        self.assert_doc_error(c.call(P.DOCIXDROP, b"adm", k, b"a_1"), 27,
                              b"index not found with name [a_1]")
        self.assert_doc_error(c.call(P.DOCIXDROP, b"adm", k, None,
                                     E({"q": 1})), 27,
                              b"can't find index with key")
        self.assert_doc_error(c.call(P.DOCIXDROP, b"adm", k, b"_id_"), 72,
                              b"cannot drop _id index")
        self.assert_doc_error(c.call(P.DOCIXDROP, b"adm", b"nonesuch",
                                     b"a_1"), 26, b"ns not found")
        self.assertEqual(c.call(P.DOCIXDROP, b"adm", k, b"*"), [P.OK, 2])
        self.assertEqual([s["name"] for s in self.indexes(b"adm", k)],
                         ["_id_"])
        # neither or both of name and key
        self.assertEqual(c.call(P.DOCIXDROP, b"adm", k, None)[0], P.BAD_ARGS)
        self.assertEqual(c.call(P.DOCIXDROP, b"adm", k, b"x",
                                E({"a": 1}))[0], P.BAD_ARGS)

    def test_index_refusals_as_the_door(self):
        """Each bad specification: the door's code and text, natively."""
        c, k = self.c, self.coll()
        c.call(P.DOCIXCREATE, b"adm", k, spec({"a": 1}, "a_1"))
        m = self.mongo()
        db = m["adm"]
        bad = [
            {"key": {"a": 1}, "name": "a_1", "sparse": True},   # 85
            {"key": {"b": 1}, "name": "a_1"},                   # 86
            {"key": {"a": 1}, "name": "other"},                 # 85
            {"name": "nokey"},                                  # 9
            {"key": {"c": 1}},                                  # 9 no name
            {"key": {"c": 1}, "name": "c", "bogus": 1},         # 197
            {"key": {"c": "text"}, "name": "t"},                # 67
            {"key": {"c": 1, "d": 1}, "name": "cd",
             "expireAfterSeconds": 5},                          # 67
        ]
        from pymongo.errors import OperationFailure
        for s in bad:
            with self.assertRaises(OperationFailure, msg=s) as cm:
                db.command("createIndexes", k.decode(), indexes=[s])
            r = c.call(P.DOCIXCREATE, b"adm", k, E(s))
            self.assert_doc_error(r, cm.exception.code)
            self.assertEqual(r[1].decode(), cm.exception.details["errmsg"],
                             s)
        with self.assertRaises(OperationFailure) as cm:
            db.command("listIndexes", "nonesuch")
        r = c.call(P.DOCIXLIST, b"adm", b"nonesuch")
        self.assert_doc_error(r, cm.exception.code)
        self.assertEqual(r[1].decode(), cm.exception.details["errmsg"])
        self.assertEqual(c.call(P.DOCIXCREATE, b"adm", k,
                                *[spec({"f%d" % i: 1}, "f%d" % i)
                                  for i in range(65)])[0], P.BAD_ARGS)

    def test_door_sees_native_and_back(self):
        c, k = self.c, self.coll()
        m = self.mongo()
        db = m["adm2"]
        db.create_collection("fromdoor")
        db["fromdoor"].create_index([("q", 1)], name="q_1")
        r = c.call(P.DOCCOLLS, b"adm2")
        self.assertIn(b"fromdoor", r[1][::2])
        self.assertEqual([s["name"] for s in self.indexes(b"adm2",
                                                          b"fromdoor")],
                         ["_id_", "q_1"])
        self.assertEqual(c.call(P.DOCCREATE, b"adm2", k), [P.OK])
        self.assertIn(k.decode(), db.list_collection_names())
        self.assertEqual(c.call(P.DOCDROP, b"adm2", b"fromdoor"), [P.OK])
        self.assertNotIn("fromdoor", db.list_collection_names())


class ReadOnly(unittest.TestCase):
    def test_changes_refused(self):
        with Server(threads=1, args=["--read-only", "yes"]) as srv:
            self.refused(srv.client())
            srv.stop()

    def refused(self, c):
        for req in [(P.DOCCREATE, b"d", b"c"), (P.DOCDROP, b"d", b"c"),
                    (P.DOCIXCREATE, b"d", b"c", spec({"a": 1}, "a")),
                    (P.DOCIXDROP, b"d", b"c", b"a")]:
            self.assertEqual(c.call(*req)[0], P.READ_ONLY, req)
        self.assertEqual(c.call(P.DOCDBS), [P.OK, []])
        self.assertEqual(c.call(P.DOCCOLLS, b"d"), [P.OK, []])


if __name__ == "__main__":
    main()
