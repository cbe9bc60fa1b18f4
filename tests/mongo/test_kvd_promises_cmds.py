"""test_kvd_promises_cmds.py - what docs/mongodb.md promises of the door's
commands, cursors, limits and compatibility table, checked with pymongo
(and raw messages where a driver hides the answer) against a real kvd:
the admin commands' fields, the write commands' replies and batches, the
order of a connection's pipelined requests, an updateMany under a
concurrent writer (each document checked against the filter again),
cursors across connections and past their connection, the 16 MiB batch,
the cursors one connection may open, and every "not supported (code)" row
of the compatibility table answered with its code.
"""

import os
import socket
import sys
import threading
import time
import unittest

try:
    import bson
    from pymongo.errors import OperationFailure
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import HostCase  # noqa: E402

PING = {"ping": 1, "$db": "admin"}


class Base(HostCase):

    def door(self):
        d = Door(self.host.mport, timeout=30)
        self.assertTrue(d.scram("kvd", b"secret")[0])
        self.addCleanup(d.close)
        return d

    def call(self, doc, db="t"):
        d = getattr(self, "_d", None) or self.door()
        self._d = d
        return d.call(dict(doc, **{"$db": db}))

    def tearDown(self):
        self._d = None
        self.assertIsNone(self.host.proc.poll(), "kvd exited")
        self.assertEqual(self.cl.admin.command("ping")["ok"], 1.0)

    def assert_code(self, r, code):
        self.assertEqual((r.get("ok"), r.get("code")), (0.0, code), r)
        self.assertIsInstance(r.get("errmsg"), str, r)
        self.assertIsInstance(r.get("codeName"), str, r)


class Admin(Base):
    """docs/mongodb.md, Commands: the admin rows."""

    def test_get_parameter(self):
        a = self.cl.admin
        r = a.command({"getParameter": 1, "featureCompatibilityVersion": 1})
        self.assertEqual(r["featureCompatibilityVersion"], {"version": "6.0"})
        r = a.command({"getParameter": 1, "authenticationMechanisms": 1})
        self.assertEqual(r["authenticationMechanisms"], ["SCRAM-SHA-256"])
        r = a.command({"getParameter": 1, "cursorTimeoutMillis": 1})
        self.assertEqual(r["cursorTimeoutMillis"], 600000)
        r = a.command({"getParameter": "*"})
        for k in ("featureCompatibilityVersion", "authenticationMechanisms",
                  "cursorTimeoutMillis"):
            self.assertIn(k, r)

    def test_whatsmyuri_hostinfo(self):
        d = self.door()
        me = "%s:%d" % d.sock.getsockname()[:2]
        r = d.call({"whatsmyuri": 1, "$db": "admin"})
        self.assertEqual(r["you"], me)
        r = self.cl.admin.command("hostInfo")
        self.assertEqual(r["system"]["numCores"], os.cpu_count())
        self.assertEqual(r["system"]["hostname"].split(":")[0],
                         socket.gethostname())

    def test_server_status(self):
        r = self.cl.admin.command("serverStatus")
        for k in ("host", "version", "process", "pid", "uptime", "localTime",
                  "connections", "mem", "opcounters", "network", "metrics"):
            self.assertIn(k, r)
        self.assertEqual((r["process"], r["pid"], r["version"]),
                         ("kvd", self.host.proc.pid, "6.0.0"))
        self.assertIn("timedOut", r["metrics"]["cursor"])
        self.assertGreaterEqual(r["connections"]["current"], 1)
        self.assertIn("kvd", r, "kvd's own section")
        # opcounters count documents inserted and statements of updates
        # and deletes, as mongod's (SERVER-3817; mongostat reads them)
        before = r["opcounters"]
        self.db.ss.insert_many([{"_id": i} for i in range(3)])
        self.call({"update": "ss", "updates": [
            {"q": {"_id": 0}, "u": {"$set": {"a": 1}}},
            {"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]})
        self.call({"delete": "ss", "deletes": [
            {"q": {"_id": 0}, "limit": 1}, {"q": {"_id": 1}, "limit": 1}]})
        r = self.cl.admin.command("serverStatus")["opcounters"]
        self.assertEqual([r[k] - before[k] for k in
                          ("insert", "update", "delete")], [3, 2, 2])

    def test_cmdline_and_log(self):
        r = self.cl.admin.command("getCmdLineOpts")
        self.assertIn("--mongo-port", r["argv"])
        self.assertIn(str(self.host.mport), r["argv"])
        # kvd's argv, but no password in it (mongod redacts its own too)
        self.assertNotIn("secret", r["argv"])
        at = r["argv"].index("--requirepass")
        self.assertEqual(r["argv"][at + 1], "<password>")
        self.assertEqual(r["argv"][0], os.environ["KVD_BIN"])
        for name in ("global", "startupWarnings"):
            r = self.cl.admin.command({"getLog": name})
            self.assertEqual(r["log"], [])
        r = self.cl.admin.command({"getLog": "*"})
        self.assertEqual(r["names"], ["global", "startupWarnings"])

    def test_stats_scale(self):
        db = self.cl.statsdb
        c = db.scaled
        c.insert_many([{"_id": i, "s": "x" * 1000} for i in range(50)])
        db.other.insert_many([{"_id": i} for i in range(3)])
        one = db.command("collStats", "scaled")
        kib = db.command("collStats", "scaled", scale=1024)
        self.assertEqual((one["count"], kib["count"]), (50, 50))
        self.assertGreater(one["size"], 50 * 1000)
        self.assertEqual(kib["size"], one["size"] // 1024)
        other = db.command("collStats", "other")
        # dbStats: the figures of the database's collections together
        d1 = db.command("dbStats")
        dk = db.command("dbStats", scale=1024)
        self.assertEqual((d1["collections"], d1["objects"]), (2, 53))
        self.assertEqual(d1["dataSize"], one["size"] + other["size"])
        self.assertEqual(dk["dataSize"], d1["dataSize"] // 1024)
        self.assertEqual(self.cl.nodb.command("dbStats")["objects"], 0)

    def test_listings(self):
        self.db.create_collection("lst_a")
        self.db.lst_b.insert_one({"_id": 1})
        r = self.call({"listCollections": 1, "nameOnly": True,
                       "filter": {"name": {"$in": ["lst_a", "lst_b"]}}})
        self.assertEqual(sorted(x["name"] for x in
                                r["cursor"]["firstBatch"]),
                         ["lst_a", "lst_b"])
        self.assertEqual(r["cursor"]["ns"], "t.$cmd.listCollections")
        r = self.cl.admin.command({"listDatabases": 1, "nameOnly": True,
                                   "filter": {"name": "t"}})
        self.assertEqual(r["databases"], [{"name": "t"}])
        r = self.call({"listIndexes": "lst_b", "cursor": {"batchSize": 1}})
        self.assertEqual([x["name"] for x in r["cursor"]["firstBatch"]],
                         ["_id_"])
        self.assert_code(self.call({"drop": "lst_none"}), 26)
        self.assertIn("ns not found",
                      self.call({"drop": "lst_none"})["errmsg"])


class Writes(Base):
    """docs/mongodb.md, Commands: insert, update, delete, findAndModify,
    and the write batches."""

    def test_insert_adds_id_first(self):
        r = self.call({"insert": "ins", "documents": [{"a": 1, "b": 2}]})
        self.assertEqual(r["n"], 1)
        got = self.db.ins.find_one({"a": 1})
        self.assertEqual(list(got), ["_id", "a", "b"])
        self.assertIsInstance(got["_id"], bson.ObjectId)

    def test_batch_bounds(self):
        for n in (0, 100001):
            r = self.call({"insert": "bb",
                           "documents": [{} for _ in range(n)]})
            self.assert_code(r, 16)
            self.assertEqual(r["codeName"], "InvalidLength")
        self.assertEqual(self.db.bb.count_documents({}), 0)
        # 100,000 is allowed (deletes that match nothing: quick to run)
        r = self.call({"delete": "bb", "deletes": [
            {"q": {"_id": -1}, "limit": 1}] * 100000})
        self.assertEqual((r["ok"], r["n"]), (1.0, 0), r)
        r = self.call({"delete": "bb", "deletes": [
            {"q": {"_id": -1}, "limit": 1}] * 100001})
        self.assert_code(r, 16)

    def test_ordered_and_unordered(self):
        docs = [{"_id": 1}, {"_id": [1]}, {"_id": 2}]
        r = self.call({"insert": "ou", "documents": docs})
        self.assertEqual(r["n"], 1)
        self.assertEqual([(e["index"], e["code"]) for e in r["writeErrors"]],
                         [(1, 2)])
        r = self.call({"insert": "ou2", "documents": docs, "ordered": False})
        self.assertEqual(r["n"], 2)
        self.assertEqual(self.db.ou2.count_documents({}), 2)
        r = self.call({"update": "ou2", "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"x": 1}}},
            {"q": {"_id": 2}, "u": {"$bad": {"x": 1}}},
            {"q": {"_id": 9}, "u": {"$set": {"x": 1}}, "upsert": True}],
            "ordered": False})
        self.assertEqual((r["n"], r["nModified"]), (2, 1), r)
        self.assertEqual(r["upserted"], [{"index": 2, "_id": 9}])
        self.assertEqual([(e["index"], e["code"]) for e in r["writeErrors"]],
                         [(1, 9)])

    def test_delete_limit(self):
        self.db.dl.insert_many([{"_id": i, "g": 1} for i in range(5)])
        r = self.call({"delete": "dl", "deletes": [{"q": {"g": 1},
                                                    "limit": 1}]})
        self.assertEqual(r["n"], 1)
        r = self.call({"delete": "dl", "deletes": [{"q": {"g": 1},
                                                    "limit": 2}]})
        self.assert_code(r, 9)
        r = self.call({"delete": "dl", "deletes": [{"q": {"g": 1},
                                                    "limit": 0}]})
        self.assertEqual(r["n"], 4)

    def test_find_and_modify(self):
        self.db.fam.insert_many([{"_id": i, "v": i} for i in range(3)])
        r = self.call({"findAndModify": "fam", "query": {"v": {"$gte": 0}},
                       "sort": {"v": -1}, "update": {"$inc": {"v": 10}},
                       "new": True, "fields": {"v": 1, "_id": 0}})
        self.assertEqual(r["value"], {"v": 12})
        self.assertEqual(r["lastErrorObject"],
                         {"n": 1, "updatedExisting": True})
        r = self.call({"findAndModify": "fam", "query": {"_id": 7},
                       "update": {"$set": {"v": 7}}, "upsert": True})
        self.assertEqual(r["lastErrorObject"],
                         {"n": 1, "updatedExisting": False, "upserted": 7})
        self.assertIsNone(r["value"])
        r = self.call({"findAndModify": "fam", "query": {"_id": 0},
                       "remove": True})
        self.assertEqual((r["lastErrorObject"], r["value"]),
                         ({"n": 1}, {"_id": 0, "v": 0}))

    def test_pipelined_requests_answered_in_order(self):
        """A connection's requests are answered in the order they came,
        and a request after a write reads it (here 200 pairs sent before
        any reply is read, spread over the shards by _id)."""
        d = self.door()
        out = b""
        for i in range(200):
            out += d.msg({"insert": "pipe", "documents": [{"_id": i}],
                          "$db": "t"})
            out += d.msg({"count": "pipe", "$db": "t"})
        d.send(out)
        for i in range(200):
            r = d.reply()
            self.assertEqual(r["n"], 1, (i, r))
            self.assertEqual(d.reply()["n"], i + 1, i)

    def test_unacknowledged_keep_order(self):
        """w: 0 writes (moreToCome) then a read on the same connection:
        the read sees every one of them."""
        d = self.door()
        out = b""
        for i in range(300):
            m = bytearray(d.msg({"update": "w0", "updates": [
                {"q": {"_id": i % 7}, "u": {"$push": {"l": i}},
                 "upsert": True}], "$db": "t"}))
            m[16] = 2  # moreToCome
            out += bytes(m)
        d.send(out + d.msg({"find": "w0", "sort": {"_id": 1}, "$db": "t"}))
        r = d.reply()
        got = {x["_id"]: x["l"] for x in r["cursor"]["firstBatch"]}
        self.assertEqual(got, {k: list(range(k, 300, 7)) for k in range(7)})

    def test_update_many_rechecks_the_filter(self):
        """An updateMany and a concurrent writer that moves documents out
        of its filter: each document is checked against the filter again
        at its merge, so none ends both moved and updated."""
        n = 4000
        c = self.db.um
        c.insert_many([{"_id": i, "g": 0} for i in range(n)])
        other = self.host.client()
        self.addCleanup(other.close)
        moved = []

        def mover():
            oc = other.t.um
            for i in range(n - 1, -1, -3):
                r = oc.update_one({"_id": i, "m": {"$exists": False}},
                                  {"$set": {"g": 2}})
                moved.append(r.modified_count)
        t = threading.Thread(target=mover)
        t.start()
        r = c.update_many({"g": 0}, {"$set": {"m": 1}})
        t.join()
        self.assertEqual(c.count_documents({"g": 2, "m": 1}), 0)
        self.assertEqual(c.count_documents({"m": 1}), r.modified_count)
        self.assertEqual(c.count_documents({"g": 2}), sum(moved))
        self.assertEqual(r.modified_count + sum(moved), n)
        print("updateMany race: %d updated, %d moved first" %
              (r.modified_count, sum(moved)))


class Reads(Base):
    """docs/mongodb.md, Commands: find, count, distinct, aggregate,
    explain."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.db.r.insert_many([{"_id": i, "v": i % 5, "t": [i % 3, "x"]}
                              for i in range(300)])

    def test_find_defaults_and_options(self):
        r = self.call({"find": "r"})
        self.assertEqual(len(r["cursor"]["firstBatch"]), 101)
        self.assertNotEqual(r["cursor"]["id"], 0)
        self.call({"killCursors": "r", "cursors": [r["cursor"]["id"]]})
        r = self.call({"find": "r", "batchSize": 5, "singleBatch": True})
        self.assertEqual((len(r["cursor"]["firstBatch"]), r["cursor"]["id"]),
                         (5, 0))
        r = self.call({"find": "r", "filter": {"v": 1}, "sort": {"_id": -1},
                       "skip": 2, "limit": 3, "projection": {"v": 1},
                       "noCursorTimeout": True, "allowDiskUse": True,
                       "collation": {"locale": "simple"},
                       "hint": {"$natural": 1}})
        self.assertEqual(r["cursor"]["firstBatch"],
                         [{"_id": 286, "v": 1}, {"_id": 281, "v": 1},
                          {"_id": 276, "v": 1}])

    def test_count_distinct(self):
        self.assertEqual(self.call({"count": "r", "query": {"v": 2},
                                    "hint": {"$natural": 1}})["n"], 60)
        self.assertEqual(self.call({"count": "r", "query": {"v": 2},
                                    "skip": 10, "limit": -5})["n"], 5)
        self.assertEqual(self.call({"count": "r", "limit": -1000})["n"], 300)
        r = self.call({"distinct": "r", "key": "t", "query": {"v": 1}})
        self.assertEqual(sorted(r["values"], key=str), [0, 1, 2, "x"])
        # mongod: FieldPath cannot be constructed with empty string
        with self.assertRaises(OperationFailure) as e:
            self.db.command({"distinct": "r", "key": ""})
        self.assertEqual(e.exception.code, 40352)

    def test_count_distinct_hint(self):
        """count's and distinct's hint, as a find's (docs/mongodb.md, the
        planner): a key pattern forces the index, so a sparse one gives
        only the documents it holds, as in mongod; one of no index is 2;
        {$natural: 1} scans."""
        c = self.db.hinted
        c.insert_many([{"_id": i, "w": i % 3} if i % 2 else {"_id": i}
                       for i in range(30)])
        c.create_index("w", sparse=True)
        self.assertEqual(self.call({"count": "hinted"})["n"], 30)
        self.assertEqual(self.call({"count": "hinted",
                                    "hint": {"w": 1}})["n"], 15)
        self.assertEqual(self.call({"count": "hinted",
                                    "hint": {"$natural": 1}})["n"], 30)
        r = self.call({"distinct": "hinted", "key": "_id",
                       "hint": {"w": 1}})
        self.assertEqual(sorted(r["values"]), list(range(1, 30, 2)))
        for cmd in ({"count": "hinted", "hint": {"nope": 1}},
                    {"distinct": "hinted", "key": "w",
                     "hint": {"nope": 1}}):
            self.assert_code(self.call(cmd), 2)

    def test_write_hint(self):
        """update's, delete's and findAndModify's hint, as a find's: a
        sparse index's hint writes only the documents it holds (as
        mongod), one of no index is 2 (a write error for update and
        delete, the command's for findAndModify) and writes nothing."""
        c = self.db.whint
        c.insert_many([{"_id": i, "w": i % 3} if i % 2 else {"_id": i}
                       for i in range(30)])
        c.create_index("w", sparse=True)
        r = self.call({"update": "whint", "updates": [
            {"q": {}, "u": {"$set": {"s": 1}}, "multi": True,
             "hint": {"w": 1}}]})
        self.assertEqual((r["n"], r["nModified"]), (15, 15))
        self.assertEqual(c.count_documents({"s": 1}), 15)
        for cmd in ({"update": "whint", "updates": [
                        {"q": {"_id": 2}, "u": {"$set": {"b": 1}},
                         "hint": {"nope": 1}}]},
                    {"delete": "whint", "deletes": [
                        {"q": {"_id": 0}, "limit": 1,
                         "hint": {"nope": 1}}]}):
            r = self.call(cmd)
            self.assertEqual(r["n"], 0)
            self.assertEqual([e["code"] for e in r["writeErrors"]], [2])
        self.assert_code(self.call({"findAndModify": "whint",
                                    "query": {"_id": 2},
                                    "update": {"$set": {"b": 2}},
                                    "hint": {"nope": 1}}), 2)
        self.assertEqual(c.count_documents({"b": {"$exists": True}}), 0)
        self.assertEqual(c.count_documents({"_id": 0}), 1)
        r = self.call({"delete": "whint", "deletes": [
            {"q": {}, "limit": 0, "hint": {"w": 1}}]})
        self.assertEqual(r["n"], 15)
        self.assertEqual(c.count_documents({}), 15)

    def test_aggregate_cursor_required(self):
        r = self.call({"aggregate": "r", "pipeline": [{"$count": "n"}]})
        self.assert_code(r, 9)
        r = self.call({"aggregate": "r", "pipeline": [{"$count": "n"}],
                       "explain": True})
        self.assertEqual(r["ok"], 1.0, r)
        self.assertEqual(r["explainVersion"], "1")
        r = self.call({"aggregate": "r", "pipeline": [{"$count": "n"}],
                       "cursor": {}})
        self.assertEqual(r["cursor"]["firstBatch"], [{"n": 300}])

    def test_explain(self):
        for verbosity in ("queryPlanner", "executionStats",
                          "allPlansExecution"):
            r = self.call({"explain": {"find": "r", "filter": {"v": 1}},
                           "verbosity": verbosity})
            self.assertEqual(r["queryPlanner"]["rejectedPlans"], [])
            self.assertEqual(r["queryPlanner"]["namespace"], "t.r")
            self.assertEqual(r["queryPlanner"]["winningPlan"]["stage"],
                             "COLLSCAN")
            self.assertEqual(r["executionStats"]["nReturned"], 60, r)
        r = self.call({"explain": {"count": "r", "query": {"v": 1}}})
        self.assertEqual(r["executionStats"]["nReturned"], 60, r)
        # verbosity checked as mongod's IDL: a string of three values
        r = self.call({"explain": {"find": "r"}, "verbosity": 1})
        self.assert_code(r, 14)
        self.assertEqual(r["errmsg"], "BSON field 'explain.verbosity' is "
                         "the wrong type 'int', expected type 'string'")
        r = self.call({"explain": {"find": "r"}, "verbosity": "all"})
        self.assert_code(r, 2)
        self.assertEqual(r["errmsg"], "Enumeration value 'all' for field "
                         "'explain.verbosity' is not a valid value.")
        self.assert_code(self.call({"explain": {"find": "r"}, "x": 1}),
                         40415)
        # the scan run to its end: skip, limit and sort not applied
        r = self.call({"explain": {"find": "r", "filter": {"v": 1},
                                   "skip": 5, "limit": 2,
                                   "sort": {"_id": -1}}})
        self.assertEqual(r["executionStats"]["nReturned"], 60, r)
        self.assertEqual(r["executionStats"]["totalDocsExamined"], 300, r)
        for cmd in ({"update": "r", "updates": [{"q": {}, "u": {}}]},
                    {"delete": "r", "deletes": [{"q": {}, "limit": 0}]},
                    {"distinct": "r", "key": "v"},
                    {"findAndModify": "r", "remove": True},
                    {"aggregate": "r", "pipeline": [], "cursor": {}}):
            self.assert_code(self.call({"explain": cmd}), 238)
        self.assertEqual(self.db.r.count_documents({}), 300)


class Cursors(Base):
    """docs/mongodb.md, Cursors."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.db.cur.insert_many([{"_id": i} for i in range(20)])

    def open_cursors(self):
        st = self.cl.admin.command("serverStatus")
        return st["metrics"]["cursor"]["open"]["total"]

    def test_across_connections_and_past_their_own(self):
        opened = self.open_cursors()
        a = self.door()
        r = a.call({"find": "cur", "batchSize": 5, "$db": "t"})
        cid = r["cursor"]["id"]
        self.assertEqual(r["cursor"]["ns"], "t.cur")
        self.assertGreater(cid, 0)
        ids = [x["_id"] for x in r["cursor"]["firstBatch"]]
        b = self.door()
        r = b.call({"getMore": cid, "collection": "cur", "batchSize": 5,
                    "$db": "t"})
        self.assertEqual(r["cursor"]["id"], cid)
        ids += [x["_id"] for x in r["cursor"]["nextBatch"]]
        a.close()
        # the namespace must match (13), the id be a long (14)
        self.assert_code(b.call({"getMore": cid, "collection": "other",
                                 "$db": "t"}), 13)
        self.assert_code(b.call({"getMore": 5, "collection": "cur",
                                 "$db": "t"}), 14)
        self.assert_code(b.call({"killCursors": "cur", "cursors": [5],
                                 "$db": "t"}), 14)
        # the rest exactly: id 0 with the last documents, no empty getMore
        r = b.call({"getMore": cid, "collection": "cur", "batchSize": 10,
                    "$db": "t"})
        ids += [x["_id"] for x in r["cursor"]["nextBatch"]]
        self.assertEqual(r["cursor"]["id"], 0)
        self.assertEqual(ids, list(range(20)))
        # serverStatus counts the cursors open now, not those ever opened
        self.assertEqual(self.open_cursors(), opened)
        # a find whose batch holds exactly the rest: id 0 at once
        r = b.call({"find": "cur", "batchSize": 20, "$db": "t"})
        self.assertEqual((len(r["cursor"]["firstBatch"]), r["cursor"]["id"]),
                         (20, 0))

    def test_ids_random_and_distinct(self):
        d = self.door()
        ids = set()
        for _ in range(50):
            r = d.call({"find": "cur", "batchSize": 1, "$db": "t"})
            cid = r["cursor"]["id"]
            self.assertIsInstance(cid, bson.Int64)
            self.assertGreater(cid, 0)
            ids.add(cid)
        self.assertEqual(len(ids), 50)
        self.assertGreater(max(ids), 1 << 40, "ids are not small counters")
        r = d.call({"killCursors": "cur", "cursors": [bson.Int64(i)
                                                      for i in ids],
                    "$db": "t"})
        self.assertEqual(sorted(r["cursorsKilled"]), sorted(ids))

    def test_batches_of_16_mib(self):
        c = self.db.big
        s = "x" * (5 << 20)
        for i in range(5):
            c.insert_one({"_id": i, "s": s})
        r = self.call({"find": "big"})
        first = [x["_id"] for x in r["cursor"]["firstBatch"]]
        self.assertEqual(first, [0, 1, 2])
        r = self.call({"getMore": r["cursor"]["id"], "collection": "big"})
        self.assertEqual([x["_id"] for x in r["cursor"]["nextBatch"]],
                         [3, 4])
        self.assertEqual(r["cursor"]["id"], 0)
        c.drop()

    def test_cursors_per_connection(self):
        """1,000 cursors opened by one open connection: the next is 146,
        with no cursor opened; closing the connection does not free them
        (they are server-wide), killing them does."""
        d = self.door()
        out = b"".join(d.msg({"find": "cur", "batchSize": 1, "$db": "t"})
                       for _ in range(1000))
        d.send(out)
        ids = []
        for _ in range(1000):
            r = d.reply()
            self.assertEqual(r["ok"], 1.0, r)
            ids.append(r["cursor"]["id"])
        r = d.call({"find": "cur", "batchSize": 1, "$db": "t"})
        self.assert_code(r, 146)
        self.assertEqual(r["codeName"], "ExceededMemoryLimit")
        self.assertEqual(self.open_cursors(), 1000)
        # a read that needs no cursor still runs
        r = d.call({"find": "cur", "$db": "t"})
        self.assertEqual((r["ok"], r["cursor"]["id"]), (1.0, 0))
        r = d.call({"killCursors": "cur", "cursors": ids, "$db": "t"})
        self.assertEqual(len(r["cursorsKilled"]), 1000)
        self.assertEqual(self.open_cursors(), 0)
        r = d.call({"find": "cur", "batchSize": 1, "$db": "t"})
        self.assertGreater(r["cursor"]["id"], 0)


class Compatibility(Base):
    """docs/mongodb.md, Compatibility: each "not supported (code)" row
    answers that code, and each "differs" row behaves as it says."""

    def test_refused_238(self):
        self.db.cmp.insert_one({"_id": 1, "a": [1, 2]})
        cases = [
            {"aggregate": 1, "pipeline": [{"$currentOp": {}}],
             "cursor": {}},
            {"aggregate": 1, "pipeline": [{"$documents": [{"a": 1}]}],
             "cursor": {}},
            {"aggregate": "cmp", "pipeline": [{"$facet": {"a": []}}],
             "cursor": {}},
            {"aggregate": "cmp", "pipeline": [{"$graphLookup": {
                "from": "cmp", "startWith": "$a", "connectFromField": "a",
                "connectToField": "_id", "as": "g"}}], "cursor": {}},
            {"aggregate": "cmp", "pipeline": [{"$out": "o"}], "cursor": {}},
            {"aggregate": "cmp", "pipeline": [{"$merge": "o"}],
             "cursor": {}},
            {"find": "cmp", "collation": {"locale": "fr"}},
            {"aggregate": "cmp", "pipeline": [], "cursor": {},
             "collation": {"locale": "fr"}},
            {"count": "cmp", "collation": {"locale": "fr"}},
            {"find": "cmp", "tailable": True},
            {"find": "cmp", "awaitData": True},
            {"find": "cmp", "min": {"_id": 0}},
            {"find": "cmp", "max": {"_id": 0}},
            {"find": "cmp", "returnKey": True},
            {"find": "cmp", "showRecordId": True},
            {"find": "cmp", "let": {"x": 1}},
            {"create": "capped", "capped": True, "size": 4096},
            {"create": "val", "validator": {"a": 1}},
            {"create": "view", "viewOn": "cmp", "pipeline": []},
            {"create": "ts", "timeseries": {"timeField": "t"}},
            {"create": "cl", "clusteredIndex": {"key": {"_id": 1},
                                                "unique": True}},
        ]
        for kind in ("text", "2d", "2dsphere", "hashed"):
            cases.append({"createIndexes": "cmp", "indexes": [
                {"key": {"a": kind}, "name": "a_" + kind}]})
        for wild in ("$**", "f.$**"):
            cases.append({"createIndexes": "cmp", "indexes": [
                {"key": {wild: 1}, "name": "wild"}]})
        for cmd in cases:
            self.assert_code(self.call(cmd), 238)
        for upd in ({"q": {}, "u": {"$set": {"a.$[e]": 0}},
                     "arrayFilters": [{"e": 1}]},
                    {"q": {}, "u": [{"$set": {"b": 1}}]}):
            r = self.call({"update": "cmp", "updates": [upd]})
            err = r.get("writeErrors", [r])[0]
            self.assertEqual(err["code"], 238, r)
        r = self.call({"update": "cmp", "updates": [
            {"q": {}, "u": {"$set": {"b": 1}}}], "let": {"x": 1}})
        self.assertEqual(r.get("code", r.get("writeErrors", [{}])[0]
                               .get("code")), 238, r)
        self.assertEqual(self.db.cmp.find_one(), {"_id": 1, "a": [1, 2]})
        self.assertNotIn("capped", self.db.list_collection_names())
        self.assertEqual([i["name"] for i in self.db.cmp.list_indexes()],
                         ["_id_"])
        # another '$' field in a key pattern: mongod's 67
        r = self.call({"createIndexes": "cmp", "indexes": [
            {"key": {"a.$b": 1}, "name": "dollar"}]})
        self.assert_code(r, 67)

    def test_create_unknown_option(self):
        """create refuses a field mongod's IDL does not know (40415, as
        find's), keeps the options mongod keeps, and leaves the generic
        arguments out of the collection's options."""
        r = self.call({"create": "unk", "cappd": True})
        self.assert_code(r, 40415)
        self.assertEqual(r["errmsg"],
                         "BSON field 'create.cappd' is an unknown field.")
        self.assertNotIn("unk", self.db.list_collection_names())
        self.assertEqual(self.call({"create": "kept", "capped": False,
                                    "storageEngine": {"wiredTiger": {}},
                                    "maxTimeMS": 1000, "comment": "c",
                                    "writeConcern": {"w": 1}})["ok"], 1)
        info = [c for c in self.db.list_collections() if c["name"] == "kept"]
        self.assertEqual(info[0]["options"],
                         {"storageEngine": {"wiredTiger": {}}})

    def test_refused_59(self):
        for cmd, db in (({"createUser": "u", "pwd": "p", "roles": []},
                         "admin"),
                        ({"replSetGetStatus": 1}, "admin"),
                        ({"replSetInitiate": {}}, "admin"),
                        ({"enableSharding": "t"}, "admin"),
                        ({"shardCollection": "t.c", "key": {"_id": 1}},
                         "admin"),
                        ({"filemd5": bson.ObjectId(), "root": "fs"}, "t")):
            r = self.call(cmd, db)
            self.assert_code(r, 59)
            self.assertEqual(r["codeName"], "CommandNotFound")

    def test_change_streams_refused(self):
        # a $changeStream stage: refused as the other stages kvd lacks
        with self.assertRaises(OperationFailure) as e:
            with self.db.cmp.watch() as s:
                s.try_next()
        self.assertEqual(e.exception.code, 238)

    def test_max_time_ms(self):
        """maxTimeMS bounds a read's working time as mongod's: a filter
        that matches none of 200,000 documents reads them all (tens of
        milliseconds at best), so 1 ms ends find, count, distinct and
        aggregate with 50 MaxTimeMSExpired; a limit it does not reach
        answers; a value mongod would refuse is 2."""
        c = self.db.mt
        for b in range(200):
            c.insert_many([{"_id": b * 1000 + i, "a": i, "pad": "x" * 100}
                           for i in range(1000)])
        none = {"a": -1}
        for cmd in ({"find": "mt", "filter": none},
                    {"count": "mt", "query": none},
                    {"distinct": "mt", "key": "a", "query": none},
                    {"aggregate": "mt", "pipeline": [{"$match": none}],
                     "cursor": {}},
                    {"aggregate": "mt", "pipeline": [{"$sort": {"a": -1}}],
                     "cursor": {}}):
            r = self.call(dict(cmd, maxTimeMS=1))
            self.assert_code(r, 50)
            self.assertEqual((r["codeName"], r["errmsg"]),
                             ("MaxTimeMSExpired",
                              "operation exceeded time limit"), cmd)
            r = self.call(dict(cmd, maxTimeMS=600000))
            self.assertEqual(r["ok"], 1.0, (cmd, r))
        self.assertEqual(c.count_documents(none, maxTimeMS=600000), 0)
        for v, msg in ((-1, "maxTimeMS is out of range"),
                       (2 ** 31, "maxTimeMS is out of range"),
                       ("1", "maxTimeMS must be a number"),
                       (1.5, "maxTimeMS has non-integral value")):
            r = self.call({"find": "mt", "limit": 1, "maxTimeMS": v})
            self.assert_code(r, 2)
            self.assertEqual(r["errmsg"], msg)
        c.drop()

    def test_max_time_ms_slow_matches(self):
        """maxTimeMS holds when each document's match is slow: a regular
        expression that backtracks runs to PCRE2's match limit on every
        document (140 ms each interpreted, 23 ms with PCRE2's JIT: seconds
        for these 300), and a read with maxTimeMS 300 still answers 50
        within seconds, not after its batch of 256 (a document passed
        over unmatched never leaves an answer short: the read ends in
        50)."""
        c = self.db.slowre
        c.drop()
        c.insert_many([{"_id": i, "s": "a" * 24 + "!"} for i in range(300)])
        c.insert_one({"_id": -1, "s": "aaa"})  # first in _id order: matches
        slow = {"s": {"$regex": "^(a+)+$"}}
        for cmd in ({"find": "slowre", "filter": slow, "batchSize": 1000},
                    {"count": "slowre", "query": slow},
                    {"aggregate": "slowre", "pipeline": [{"$match": slow}],
                     "cursor": {}}):
            t = time.monotonic()
            r = self.call(dict(cmd, maxTimeMS=300))
            took = time.monotonic() - t
            self.assert_code(r, 50)
            self.assertLess(took, 10, (cmd, took))
        # the fast document alone: found, the slow ones not read
        r = self.call({"find": "slowre", "filter": {"_id": -1, **slow},
                       "maxTimeMS": 300})
        self.assertEqual(r["cursor"]["firstBatch"], [{"_id": -1, "s": "aaa"}])
        c.drop()

    def differs_hint_by_name(self, c):
        """A hint by name forces the index as mongod's: a sparse index's
        documents only, in its order, for find, count, aggregate, explain,
        update and delete; a name of no index is 2; "_id_" is the
        collection scan."""
        by_a = sorted(range(10), key=lambda i: (i * 7) % 10)
        for h in ("a_sparse", [("a", 1)]):
            self.assertEqual([d["_id"] for d in c.find({}).hint(h)], by_a)
        self.assertEqual([d["_id"] for d in c.find({}).hint("a_desc")],
                         by_a[::-1] + [10])
        self.assertEqual(c.count_documents({}, hint="a_sparse"), 10)
        self.assertEqual(len(list(c.aggregate([{"$match": {}}],
                                              hint="a_sparse"))), 10)
        plan = c.find({"_id": {"$gte": 0}}).hint("a_desc").explain()
        self.assertEqual(plan["queryPlanner"]["winningPlan"]["inputStage"]
                         ["indexName"], "a_desc")
        self.assertEqual(len(list(c.find({}).hint("_id_"))), 11)
        r = self.call({"find": "dif", "hint": "no_such_index"})
        self.assert_code(r, 2)
        self.assertEqual(c.update_many({}, {"$set": {"u": 1}},
                                       hint="a_sparse").matched_count, 10)
        self.assertEqual(c.find_one({"_id": 10}), {"_id": 10})
        r = self.call({"delete": "dif", "deletes": [
            {"q": {}, "limit": 0, "hint": "nope"}]})
        self.assertEqual(r["writeErrors"][0]["code"], 2, r)
        self.assertEqual(c.count_documents({}), 11)
        c.delete_one({"_id": 10})

    def test_differs_rows(self):
        c = self.db.dif
        c.insert_many([{"_id": i, "a": (i * 7) % 10} for i in range(10)])
        c.insert_one({"_id": 10})
        c.create_index("a", sparse=True, name="a_sparse")
        c.create_index([("a", -1)], name="a_desc")
        self.differs_hint_by_name(c)
        # maxTimeMS (a limit no find of 11 documents reaches),
        # writeConcern and readConcern accepted
        r = self.call({"find": "dif", "maxTimeMS": 600000,
                       "readConcern": {"level": "majority"}})
        self.assertEqual(r["ok"], 1.0, r)
        r = self.call({"insert": "dif", "documents": [{"_id": 99}],
                       "writeConcern": {"w": "majority", "j": True}})
        self.assertEqual(r["n"], 1, r)
        # sessions accepted, hold nothing
        with self.cl.start_session() as s:
            self.assertEqual(c.count_documents({}, session=s), 11)
        # retryable writes and transactions refused (20)
        r = self.call({"insert": "dif", "documents": [{"_id": 100}],
                       "lsid": {"id": bson.Binary(b"\x01" * 16, 4)},
                       "txnNumber": bson.Int64(1)})
        self.assert_code(r, 20)
        self.assertIsNone(c.find_one({"_id": 100}))


if __name__ == "__main__":
    unittest.main()
