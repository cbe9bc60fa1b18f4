"""test_kvd_door_fuzz.py - every command the door knows, sent to a real
kvd's door with arguments of every wrong type and count, before and after
authentication, on one connection each: every request is answered (the
connection stays open) with a well-formed reply, {ok: 1, ...} or MongoDB's
error document {ok: 0, errmsg, code, codeName}; every command has errors
among its answers, and before authentication every command but the
handshake's and SCRAM's answers 13; kvd is up and serves documents after.
"""

import datetime
import os
import struct
import sys
import unittest

try:
    import bson
    from bson.int64 import Int64
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door, op_msg  # noqa: E402
from test_kvd_door import KvdHost  # noqa: E402
from test_kvd_door_security import COMMANDS, NOAUTH  # noqa: E402


def nested(depth):
    d = {"x": 1}
    for _ in range(depth):
        d = {"a": d}
    return d


# Values of every BSON type the door may meet where it wants another.
VALUES = [1, 0, -1, 2.5, float("nan"), Int64(1 << 62), "x", "", True,
          None, [], [1, "a", None], {}, {"a": 1}, {"$bad": 1},
          bson.Binary(b"\x00\x01"), bson.ObjectId(),
          datetime.datetime(2020, 1, 1), bson.Regex("^a"), bson.MinKey(),
          bson.MaxKey(), bson.Timestamp(1, 1), bson.Code("x"),
          nested(150)]
# A shorter set for every argument of every command.
ARG_VALUES = [-1, "x", None, [1, {"$x": 1}], {"$bad": 1}, nested(150)]
# The arguments the door's commands take.
FIELDS = """filter query documents updates deletes q u update new remove
upsert multi limit fields sort projection skip batchSize singleBatch
pipeline cursor key collection getMore cursors mechanism payload
conversationId options nameOnly scale ordered hint comment lsid
writeConcern readConcern maxTimeMS $readPreference apiVersion apiStrict
txnNumber autocommit startTransaction bypassDocumentValidation
noCursorTimeout allowDiskUse collation let arrayFilters $db
featureCompatibilityVersion speculativeAuthenticate saslSupportedMechs
helloOk""".split()


def raw_bodies():
    """Bodies bson.encode would not make: the same field twice, nothing,
    the command name not first."""
    def elem_i32(name, v):
        return b"\x10" + name + b"\x00" + struct.pack("<i", v)

    def elem_str(name, v):
        return b"\x02" + name + b"\x00" + struct.pack("<i", len(v) + 1) + \
            v + b"\x00"

    def doc(*elems):
        body = b"".join(elems)
        return struct.pack("<i", len(body) + 5) + body + b"\x00"
    db = elem_str(b"$db", b"t")
    yield doc()
    yield doc(db)
    yield doc(elem_str(b"find", b"c"), elem_str(b"find", b"d"), db)
    yield doc(elem_i32(b"limit", 1), elem_str(b"find", b"c"), db)
    yield doc(elem_str(b"find", b"c"), db, db)
    yield doc(elem_str(b"insert", b"c"), elem_i32(b"documents", 1), db)


def requests(name, fields):
    for v in VALUES:
        yield {name: v, "$db": "t"}
    yield {name: "c"}  # no $db
    yield {"$db": "t", name: "c"}  # $db first
    yield {name: "c", "$db": "t", "unknownField": 1}
    if not fields:
        return
    for f in FIELDS:
        for v in ARG_VALUES:
            yield {name: "c", f: v, "$db": "admin" if f == "$db" else "t"}
        if f != "$db":
            yield {name: 1, f: {}, "$db": "t"}


class DoorFuzz(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost()

    @classmethod
    def tearDownClass(cls):
        cls.host.stop()

    def check(self, d, req, answered, authed):
        """Send req (a dict, or a body's bytes): the reply must be a
        well-formed one; count it under the command's name."""
        if isinstance(req, bytes):
            d.send(struct.pack("<iiiiI", 21 + len(req), 1, 0, 2013, 0) +
                   b"\x00" + req)
            name = "raw"
        else:
            d.send(op_msg(req))
            name = next(iter(req))
        r = d.reply()
        self.assertIsNotNone(r, "kvd closed the connection after %r"
                             % (req,))
        self.assertIn("ok", r, req)
        if r["ok"] != 1:
            self.assertEqual(r["ok"], 0, (req, r))
            self.assertIsInstance(r["code"], int, (req, r))
            self.assertIsInstance(r["errmsg"], str, (req, r))
            self.assertIsInstance(r["codeName"], str, (req, r))
            answered.setdefault(name, set()).add(r["code"])
            # (a request without its $db string is refused before
            # authentication is asked, as mongod does)
            if not authed and name in COMMANDS and name not in NOAUTH \
                    and isinstance(req.get("$db"), str):
                self.assertEqual(r["code"], 13, (req, r))
        else:
            answered.setdefault(name, set())
        return r

    def run_all(self, authed):
        d = Door(self.host.mport, timeout=30)
        if authed:
            self.assertTrue(d.scram("kvd", b"secret")[0])
        answered = {}
        n = 0
        for name in COMMANDS:
            # before authentication only the commands that run then take
            # arguments worth varying (the others answer 13 whatever)
            ends = name in ("logout", "saslStart", "saslContinue")
            fields = (authed and not ends) or (not authed and name in NOAUTH)
            for req in requests(name, fields):
                self.check(d, req, answered, authed)
                n += 1
                if authed and ends:
                    # a logout (or a conversation begun) ends it:
                    # authenticate again, on the same connection
                    self.assertTrue(d.scram("kvd", b"secret")[0])
        for body in raw_bodies():
            self.check(d, body, answered, authed)
            n += 1
        d.close()
        for name in COMMANDS:
            self.assertTrue(answered.get(name), "%s answered no error" % name)
        return n

    def alive(self):
        self.assertIsNone(self.host.srv.proc.poll())
        cl = self.host.client()
        cl.t.alive.insert_one({"_id": 1})
        self.assertEqual(cl.t.alive.find_one(), {"_id": 1})
        cl.t.alive.drop()
        cl.close()

    def test_before_auth(self):
        self.assertGreater(self.run_all(False), 1000)
        self.alive()

    def test_after_auth(self):
        self.assertGreater(self.run_all(True), 8000)
        self.alive()


if __name__ == "__main__":
    unittest.main()
