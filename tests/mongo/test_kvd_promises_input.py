"""test_kvd_promises_input.py - bad input on the door of a real kvd, as
reviewers send it: for every command docs/mongodb.md lists, each argument
of the wrong type and each required argument missing, answered with
MongoDB's error document and the code mongod gives (14 TypeMismatch for a
wrong type, 40414 for a missing required field, 73 for a collection name
that is not a string), then a ping on the same connection.
test_kvd_door_fuzz.py already sends every type to every argument and
checks the shape of each answer; this file checks the codes.
"""

import os
import sys
import unittest

try:
    import bson
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import KvdHost  # noqa: E402

OBJ, ARR, NUM, BOOL, STR = "object", "array", "number", "bool", "string"
# A value of another type than each kind wants (a string is no boolean,
# number, object or array to mongod's parsers; an object is no string).
WRONG = {OBJ: "x", ARR: "x", NUM: {"a": 1}, BOOL: "x", STR: {"a": 1}}

# command: (a valid call, {argument: kind}, required arguments).
COMMANDS = {
    "find": ({"find": "c"},
             {"filter": OBJ, "sort": OBJ, "projection": OBJ, "skip": NUM,
              "limit": NUM, "batchSize": NUM, "singleBatch": BOOL,
              "noCursorTimeout": BOOL, "allowDiskUse": BOOL,
              "collation": OBJ}, ()),
    "insert": ({"insert": "c", "documents": [{"a": 1}]},
               {"documents": ARR, "ordered": BOOL,
                "bypassDocumentValidation": BOOL}, ("documents",)),
    "update": ({"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}}]},
               {"updates": ARR, "ordered": BOOL}, ("updates",)),
    "delete": ({"delete": "c", "deletes": [{"q": {"a": 9}, "limit": 0}]},
               {"deletes": ARR, "ordered": BOOL}, ("deletes",)),
    "findAndModify": ({"findAndModify": "c", "query": {"a": 9},
                       "update": {"$set": {"b": 1}}},
                      {"query": OBJ, "sort": OBJ, "remove": BOOL, "new": BOOL,
                       "fields": OBJ, "upsert": BOOL}, ()),
    "count": ({"count": "c"}, {"query": OBJ, "skip": NUM, "limit": NUM}, ()),
    "distinct": ({"distinct": "c", "key": "a"},
                 {"key": STR, "query": OBJ}, ("key",)),
    "aggregate": ({"aggregate": "c", "pipeline": [], "cursor": {}},
                  {"pipeline": ARR, "cursor": OBJ, "explain": BOOL,
                   "allowDiskUse": BOOL}, ("pipeline",)),
    "listCollections": ({"listCollections": 1},
                        {"filter": OBJ, "nameOnly": BOOL}, ()),
    "listDatabases": ({"listDatabases": 1},
                      {"filter": OBJ, "nameOnly": BOOL}, ()),
    "createIndexes": ({"createIndexes": "c",
                       "indexes": [{"key": {"a": 1}, "name": "a_1"}]},
                      {"indexes": ARR}, ("indexes",)),
    "dropIndexes": ({"dropIndexes": "c", "index": "a_1"}, {}, ("index",)),
    "getMore": (None, {"collection": STR, "batchSize": NUM},
                ("collection",)),
    "killCursors": ({"killCursors": "c", "cursors": [bson.Int64(1)]},
                    {"cursors": ARR}, ("cursors",)),
    "explain": ({"explain": {"find": "c"}}, {"explain": OBJ}, ()),
    "endSessions": ({"endSessions": []}, {"endSessions": ARR}, ()),
}
# Commands whose first value names a collection: a number there is 73.
COLLECTION_FIRST = ("find", "insert", "update", "delete", "findAndModify",
                    "count", "distinct", "createIndexes", "dropIndexes",
                    "killCursors", "listIndexes", "collStats", "create",
                    "drop")


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost()
        cls.d = Door(cls.host.mport, timeout=30)
        assert cls.d.scram("kvd", b"secret")[0]
        cls.d.call({"insert": "c", "documents": [{"_id": 1, "a": 1}],
                    "$db": "t"})

    @classmethod
    def tearDownClass(cls):
        cls.d.close()
        cls.host.stop()

    def call(self, doc):
        return self.d.call(dict(doc, **{"$db": "t"}))

    def valid(self, name):
        base = COMMANDS[name][0]
        if base is None:  # getMore: a live cursor's id
            r = self.call({"find": "c", "batchSize": 0})
            base = {"getMore": r["cursor"]["id"], "collection": "c"}
        return dict(base)

    def expect(self, req, code, problems):
        r = self.call(req)
        shape = r is not None and r.get("ok") == 0 and \
            isinstance(r.get("errmsg"), str) and \
            isinstance(r.get("codeName"), str)
        if not shape or r.get("code") != code:
            problems.append("%r: want %d, got %r" % (req, code, r))
        # the same connection goes on
        self.assertEqual(self.call({"ping": 1})["ok"], 1.0, req)

    def test_valid_calls_run(self):
        for name in COMMANDS:
            r = self.call(self.valid(name))
            self.assertEqual(r["ok"], 1.0, (name, r))

    def test_wrong_types_are_14(self):
        problems = []
        for name, (_, args, _) in COMMANDS.items():
            for arg, kind in args.items():
                req = self.valid(name)
                if arg == name:
                    req = {name: WRONG[kind]}
                else:
                    req[arg] = WRONG[kind]
                self.expect(req, 14, problems)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_missing_required_are_40414(self):
        problems = []
        for name, (_, _, required) in COMMANDS.items():
            for arg in required:
                req = self.valid(name)
                del req[arg]
                self.expect(req, 40414, problems)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_statement_fields(self):
        """The fields inside a statement, an index spec or a cursor
        document: wrong types 14, missing required ones 40414."""
        upd = {"q": {}, "u": {"$set": {"a": 1}}}
        dele = {"q": {"a": 9}, "limit": 0}
        ix = {"key": {"z": 1}, "name": "z_1"}
        cases = []
        for f, kind in (("q", OBJ), ("multi", BOOL), ("upsert", BOOL)):
            cases.append(({"update": "c", "updates": [
                dict(upd, **{f: WRONG[kind]})]}, 14))
        for f, kind in (("q", OBJ), ("limit", NUM)):
            cases.append(({"delete": "c", "deletes": [
                dict(dele, **{f: WRONG[kind]})]}, 14))
        for f in ("q", "u"):
            cases.append(({"update": "c", "updates": [
                {k: v for k, v in upd.items() if k != f}]}, 40414))
        for f in ("q", "limit"):
            cases.append(({"delete": "c", "deletes": [
                {k: v for k, v in dele.items() if k != f}]}, 40414))
        # an index specification is checked as mongod's validateIndexSpec
        # does: wrong types 14, a missing key or name 9 FailedToParse
        for f, kind in (("key", OBJ), ("name", STR), ("unique", BOOL),
                        ("sparse", BOOL), ("background", BOOL),
                        ("partialFilterExpression", OBJ)):
            cases.append(({"createIndexes": "c", "indexes": [
                dict(ix, **{f: WRONG[kind]})]}, 14))
        for f in ("key", "name"):
            cases.append(({"createIndexes": "c", "indexes": [
                {k: v for k, v in ix.items() if k != f}]}, 9))
        for v in ("x", -1, 2147483648):
            cases.append(({"createIndexes": "c", "indexes": [
                dict(ix, expireAfterSeconds=v)]}, 197))
        # '$' parts of a key pattern: 67, but a DBRef's after the first
        cases.append(({"createIndexes": "c", "indexes": [
            {"key": {"$ref": 1}, "name": "r"}]}, 67))
        cases.append(({"createIndexes": "c", "indexes": [
            {"key": {"a.$b": 1}, "name": "r"}]}, 67))
        cases.append(({"aggregate": "c", "pipeline": [],
                       "cursor": {"batchSize": "x"}}, 14))
        cases.append(({"find": "c", "hint": 5}, 14))
        problems = []
        for req, code in cases:
            self.expect(req, code, problems)
        self.assertEqual(problems, [], "\n".join(problems))
        cl = self.host.client()
        self.assertEqual([i["name"] for i in cl.t.c.list_indexes()],
                         ["_id_"])
        cl.t.c.create_index([("r.$id", 1)], name="dbref")
        cl.t.c.drop_index("dbref")
        cl.close()

    def test_sasl_arguments(self):
        """saslStart and saslContinue, before authentication, parsed as
        mongod's IDL parses them (before any session is looked at)."""
        d = Door(self.host.mport)
        self.addCleanup(d.close)
        pl = bson.Binary(b"n,,n=kvd,r=abcdefghijkl")
        cases = [
            ({"saslStart": 1, "mechanism": 1, "payload": pl}, 14),
            ({"saslStart": 1, "payload": pl}, 40414),
            ({"saslStart": 1, "mechanism": "SCRAM-SHA-256"}, 40414),
            ({"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": 1},
             14),
            ({"saslContinue": 1, "conversationId": "x", "payload": pl}, 14),
            ({"saslContinue": 1, "payload": pl}, 40414),
            ({"saslContinue": 1, "conversationId": 1}, 40414),
            ({"saslContinue": 1, "conversationId": 1, "payload": pl}, 17),
        ]
        problems = []
        for req, code in cases:
            r = d.call(dict(req, **{"$db": "admin"}))
            if r is None or (r.get("ok"), r.get("code")) != (0.0, code) \
                    or not isinstance(r.get("codeName"), str):
                problems.append("%r: want %d, got %r" % (req, code, r))
            self.assertEqual(d.call({"ping": 1, "$db": "admin"})["ok"], 1.0)
        self.assertEqual(problems, [], "\n".join(problems))
        self.assertTrue(d.scram("kvd", b"secret")[0])

    def test_hello_arguments(self):
        d = Door(self.host.mport)
        self.addCleanup(d.close)
        problems = []
        for name in ("hello", "isMaster"):
            for f, v in (("helloOk", "x"), ("saslSupportedMechs", 5),
                         ("speculativeAuthenticate", 5)):
                r = d.call({name: 1, f: v, "$db": "admin"})
                if (r.get("ok"), r.get("code")) != (0.0, 14):
                    problems.append("%s %s=%r: %r" % (name, f, v, r))
            r = d.call({name: 1, "helloOk": 1, "$db": "admin"})
            self.assertIs(r.get("helloOk"), True, r)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_collection_name_not_a_string_is_73(self):
        problems = []
        for name in COLLECTION_FIRST:
            req = dict(self.valid(name)) if name in COMMANDS else {}
            req[name] = 5
            if name in COMMANDS:  # the command's name first, as sent
                req = dict([(name, 5)] + [(k, v) for k, v in req.items()
                                          if k != name])
            self.expect(req, 73, problems)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_server_still_serves(self):
        self.assertIsNone(self.host.proc.poll())
        cl = self.host.client()
        self.assertEqual(cl.t.c.find_one({"_id": 1}), {"_id": 1, "a": 1})
        cl.close()


if __name__ == "__main__":
    unittest.main()
