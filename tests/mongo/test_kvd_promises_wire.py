"""test_kvd_promises_wire.py - what docs/mongodb.md promises of the door's
wire protocol, handshake and authentication, checked against a real kvd
(its own listener and io threads, not the door's test host): the message
length bounds, OP_MSG's flags and checksums, OP_QUERY's handshake and its
refusals, OP_COMPRESSED and the removed opcodes, the limits on command
bodies, the error document's shape, the generic arguments, hello's and
buildInfo's fields, SCRAM's user, authSource, mechanisms and logout.
Each case names the promise it holds kvd to; a follow-up ping shows kvd
kept serving.
"""

import os
import struct
import subprocess
import tempfile
import sys
import unittest

import kvdtest

try:
    import bson
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import KvdHost  # noqa: E402

OP_QUERY, OP_COMPRESSED, OP_MSG = 2004, 2012, 2013
PING = {"ping": 1, "$db": "admin"}


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit: small and independent of kvd's."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def msg(doc, flags=0, rid=7, checksum=False):
    body = b"\x00" + bson.encode(doc)
    n = 20 + len(body) + (4 if checksum else 0)
    m = struct.pack("<iiiiI", n, rid, 0, OP_MSG, flags) + body
    if checksum:
        m += struct.pack("<I", crc32c(m))
    return m


def op_query(ns, doc, rid=9):
    body = struct.pack("<i", 0) + ns.encode() + b"\x00" + \
        struct.pack("<ii", 0, -1) + bson.encode(doc)
    return struct.pack("<iiii", 16 + len(body), rid, 0, OP_QUERY) + body


def raw_reply(d):
    """The next message whatever its opcode: (opcode, responseTo, body),
    or None once kvd closed."""
    try:
        while len(d.buf) < 16:
            d._fill()
        (n,) = struct.unpack("<i", d.buf[:4])
        while len(d.buf) < n:
            d._fill()
    except (EOFError, ConnectionResetError):
        return None
    m, d.buf = d.buf[:n], d.buf[n:]
    _, _, rto, op = struct.unpack("<iiii", m[:16])
    if op == 1:  # OP_REPLY: flags, cursorID, startingFrom, numberReturned
        return op, rto, bson.decode(m[36:])
    return op, rto, bson.decode(m[21:])


class WireCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost()

    @classmethod
    def tearDownClass(cls):
        cls.host.stop()

    def door(self, auth=True):
        d = Door(self.host.mport)
        if auth:
            self.assertTrue(d.scram("kvd", b"secret")[0])
        self.addCleanup(d.close)
        return d

    def tearDown(self):
        # whatever a case sent, kvd still answers a new connection
        self.assertIsNone(self.host.proc.poll(), "kvd exited")
        d = Door(self.host.mport)
        self.assertEqual(d.call(PING)["ok"], 1.0)
        d.close()

    def assert_error(self, r, code, name=None, text=None):
        self.assertIsNotNone(r, "connection closed instead of an error")
        self.assertEqual((r.get("ok"), r.get("code")), (0.0, code), r)
        self.assertIsInstance(r.get("errmsg"), str, r)
        self.assertIsInstance(r.get("codeName"), str, r)
        if name:
            self.assertEqual(r["codeName"], name, r)
        if text:
            self.assertIn(text, r["errmsg"], r)


class Framing(WireCase):
    """docs/mongodb.md, Wire protocol: MsgHeader and OP_MSG."""

    def test_length_bounds_close(self):
        # over maxMessageSizeBytes, judged on the first 4 bytes
        d = self.door()
        d.send(struct.pack("<i", 48000001))
        self.assertTrue(d.closed())
        self.assertEqual(d.buf, b"")
        # under a header's 16 bytes
        d = self.door()
        d.send(struct.pack("<iiii", 15, 1, 0, OP_MSG))
        self.assertTrue(d.closed())
        self.assertEqual(d.buf, b"")

    def test_checksum_verified(self):
        d = self.door()
        d.send(msg(PING, flags=1, rid=41, checksum=True))
        op, rto, r = raw_reply(d)
        self.assertEqual((op, rto, r["ok"]), (OP_MSG, 41, 1.0))
        bad = bytearray(msg(PING, flags=1, checksum=True))
        bad[-1] ^= 1
        d.send(bytes(bad))
        self.assert_error(d.reply(), 288, "ChecksumMismatch")
        self.assertTrue(d.closed())

    def test_flags(self):
        d = self.door()
        # bits 16-31 ignored; exhaustAllowed (16) answers one reply
        for bit in (16, 20, 31):
            d.send(msg(PING, flags=1 << bit))
            self.assertEqual(d.reply()["ok"], 1.0, bit)
        # moreToCome: no reply (the ping after it is the next answer)
        d.send(msg({"insert": "wire", "documents": [{"_id": "m2c"}],
                    "$db": "t"}, flags=2, rid=50))
        d.send(msg({"find": "wire", "filter": {"_id": "m2c"}, "$db": "t"},
                   rid=51))
        op, rto, r = raw_reply(d)
        self.assertEqual(rto, 51, "moreToCome was answered")
        self.assertEqual(r["cursor"]["firstBatch"], [{"_id": "m2c"}])
        # an unknown required bit (0-15): 223 IllegalOpMsgFlag, closed
        d.send(msg(PING, flags=1 << 3))
        self.assert_error(d.reply(), 223, "IllegalOpMsgFlag")
        self.assertTrue(d.closed())

    def test_document_sequences(self):
        """Kind 1 sections stand for fields of the body: a real insert of
        two sequenced documents, and five sequences refused."""
        d = self.door()

        def seq(ident, docs):
            b = ident.encode() + b"\x00" + b"".join(bson.encode(x)
                                                    for x in docs)
            return b"\x01" + struct.pack("<i", 4 + len(b)) + b

        def send(body, seqs):
            payload = b"\x00" + bson.encode(body) + b"".join(seqs)
            d.send(struct.pack("<iiiiI", 20 + len(payload), 3, 0, OP_MSG,
                               0) + payload)
            return d.reply()
        # exactly one kind 0 body: two are 40430, none 40587
        ping = b"\x00" + bson.encode(PING)
        for payload, code in ((ping + ping, 40430),
                              (seq("documents", [{"_id": 0}]), 40587)):
            d.send(struct.pack("<iiiiI", 20 + len(payload), 4, 0, OP_MSG,
                               0) + payload)
            self.assert_error(d.reply(), code)
        body = {"insert": "seq", "$db": "t"}
        r = send(body, [seq("documents", [{"_id": 1}, {"_id": 2}])])
        self.assertEqual((r["ok"], r["n"]), (1.0, 1 + 1), r)
        r = d.call({"count": "seq", "$db": "t"})
        self.assertEqual(r["n"], 2)
        r = send(body, [seq(x, [{"_id": 3}]) for x in "abcde"])
        self.assert_error(r, 17)

    def test_op_query_handshake_only(self):
        d = self.door(auth=False)
        for ns, doc in (("admin.$cmd", {"isMaster": 1}),
                        ("admin.$cmd", {"ismaster": 1}),
                        ("test.$cmd", {"hello": 1}),
                        ("admin.$cmd", {"$query": {"isMaster": 1}})):
            d.send(op_query(ns, doc, rid=77))
            op, rto, r = raw_reply(d)
            self.assertEqual((op, rto, r["ok"]), (1, 77, 1.0), doc)
            self.assertEqual(r["maxWireVersion"], 17)
        d.send(op_query("test.$cmd", {"find": "c"}))
        op, _, r = raw_reply(d)
        self.assertEqual(op, 1)
        self.assert_error(r, 352, "UnsupportedOpQueryCommand")
        self.assertEqual(d.call(PING)["ok"], 1.0)

    def test_op_compressed_refused(self):
        d = self.door()
        inner = msg(PING)[16:]
        m = struct.pack("<iiiiiiB", 16 + 9 + len(inner), 99, 0,
                        OP_COMPRESSED, OP_MSG, len(inner), 0) + inner
        d.send(m)
        op, rto, r = raw_reply(d)
        self.assertEqual((op, rto), (OP_MSG, 99))
        self.assert_error(r, 17, "ProtocolError")
        self.assertTrue(d.closed())

    def test_removed_opcodes_close(self):
        for op in (2001, 2002, 2005, 2006, 2007):
            d = self.door()
            d.send(struct.pack("<iiii", 32, 1, 0, op) + b"\x00" * 16)
            self.assertTrue(d.closed(), op)
            self.assertEqual(d.buf, b"", op)


def nested(depth):
    d = {"x": 1}
    for _ in range(depth - 1):
        d = {"a": d}
    return d


class Bodies(WireCase):
    """docs/mongodb.md: the checks on every document, and on inserted
    ones."""

    def test_command_nesting_and_size(self):
        d = self.door()
        r = d.call({"ping": 1, "x": nested(199), "$db": "admin"})
        self.assertEqual(r["ok"], 1.0, r)
        r = d.call({"ping": 1, "x": nested(205), "$db": "admin"})
        self.assert_error(r, 15, "Overflow")
        # a body over 16 MiB + 16 KiB (in a message under 48 MB)
        r = d.call({"ping": 1, "s": "x" * (16 * 1024 * 1024 + 17 * 1024),
                    "$db": "admin"})
        self.assert_error(r, 10334)
        self.assertEqual(d.call(PING)["ok"], 1.0)

    def test_invalid_bson(self):
        d = self.door()
        body = bytearray(bson.encode({"ping": 1, "s": "abc",
                                      "$db": "admin"}))
        # the string's length past its parent's end
        at = body.index(b"s\x00") + 2
        body[at:at + 4] = struct.pack("<i", 1000)
        payload = b"\x00" + bytes(body)
        d.send(struct.pack("<iiiiI", 20 + len(payload), 5, 0, OP_MSG, 0) +
               payload)
        self.assert_error(d.reply(), 22, "InvalidBSON")
        self.assertEqual(d.call(PING)["ok"], 1.0)

    def test_array_keys(self):
        """An array whose keys are not "0", "1", ... in order (the BSON
        spec's rule, which drivers follow) is refused with InvalidBSON
        wherever it comes: a document, a filter; libbson would otherwise
        warn on kvd's stderr at every copy of one whose first key is not
        "0", a line a client could make kvd write at will."""
        d = self.door()
        d.call({"drop": "arrkeys", "$db": "t"})

        def send(cmd, old, new):
            body = bson.encode(cmd)
            self.assertEqual(body.count(old), 1)
            payload = b"\x00" + body.replace(old, new)
            d.send(struct.pack("<iiiiI", 20 + len(payload), 7, 0, OP_MSG,
                               0) + payload)
            return d.reply()

        first = b"\x020\x00\x02\x00\x00\x00x\x00"
        second = b"\x021\x00\x02\x00\x00\x00y\x00"
        ins = {"insert": "arrkeys", "documents": [{"_id": 1, "a": ["x", "y"]}],
               "$db": "t"}
        # the first key "5"; then "0" twice (element 1 keyed "0")
        self.assert_error(send(ins, first, first.replace(b"0", b"5", 1)),
                          22, "InvalidBSON", 'element 0 has a key other than "0"')
        self.assert_error(send(ins, second, second.replace(b"1", b"0", 1)),
                          22, "InvalidBSON", 'element 1 has a key other than "1"')
        find = {"find": "arrkeys", "filter": {"a": {"$in": ["x", "y"]}},
                "$db": "t"}
        self.assert_error(send(find, first, first.replace(b"0", b"7", 1)),
                          22, "InvalidBSON")
        # the same arrays keyed as drivers key them: taken
        r = send(ins, first, first)
        self.assertEqual((r["ok"], r["n"]), (1.0, 1), r)
        r = send(find, first, first)
        self.assertEqual(r["cursor"]["firstBatch"],
                         [{"_id": 1, "a": ["x", "y"]}], r)
        self.assertNotIn(b"invalid array", self.host.srv.log_text())

    def test_inserted_document_bounds(self):
        cl = self.host.client()
        c = cl.t.bounds
        self.addCleanup(cl.close)
        c.insert_one({"_id": "deep", "x": nested(99)})
        with self.assertRaises(pymongo.errors.WriteError) as e:
            c.insert_one({"_id": "deeper", "x": nested(101)})
        self.assertEqual(e.exception.code, 15)
        # 16 MiB exactly is the largest; one byte more is refused
        pad = 16 * 1024 * 1024 - len(bson.encode({"_id": "big", "s": ""}))
        c.insert_one({"_id": "big", "s": "y" * pad})
        self.assertEqual(len(bson.encode(c.find_one({"_id": "big"}))),
                         16 * 1024 * 1024)
        d = self.door()
        r = d.call({"insert": "bounds", "documents":
                    [{"_id": "big2", "s": "y" * (pad + 1)}], "$db": "t"})
        self.assertEqual(r["n"], 0, r)
        self.assertEqual(r["writeErrors"][0]["code"], 10334, r)
        self.assertIsNone(c.find_one({"_id": "big2"}, {"_id": 1}))
        self.assertEqual(c.count_documents({}), 2)


class Errors(WireCase):
    """docs/mongodb.md: errors have MongoDB's shape, codes and messages;
    the generic arguments."""

    def test_examples(self):
        d = self.door()
        r = d.call({"foo": 1, "$db": "t"})
        self.assert_error(r, 59, "CommandNotFound")
        self.assertEqual(r["errmsg"], "no such command: 'foo'")
        r = d.call({"find": "c", "limit": "x", "$db": "t"})
        self.assert_error(r, 14, "TypeMismatch")
        self.assertEqual(r["errmsg"], "BSON field 'find.limit' is the wrong "
                         "type 'string', expected types '[long, int, "
                         "decimal, double]'")
        r = d.call({"find": "c", "foo": 1, "$db": "t"})
        self.assert_error(r, 40415)
        self.assertEqual(r["errmsg"], "BSON field 'find.foo' is an unknown "
                         "field.")

    def test_code_names(self):
        """Codes MongoDB names carry its name (error_codes.yml), not
        Location<code>: the write batch's 16, the index errors' 171 and
        17280, the catalog's 26, 48 and 73, the duplicate key's 11000."""
        d = self.door()
        r = d.call({"insert": "names", "documents": [], "$db": "t"})
        self.assert_error(r, 16, "InvalidLength")
        d.call({"insert": "names", "documents": [{"_id": 1, "a": [1],
                                                  "b": [2]}], "$db": "t"})
        r = d.call({"createIndexes": "names", "$db": "t", "indexes": [
            {"key": {"a": 1, "b": 1}, "name": "ab"}]})
        self.assert_error(r, 171, "CannotIndexParallelArrays")
        d.call({"createIndexes": "names", "$db": "t", "indexes": [
            {"key": {"k": 1}, "name": "k_1"}]})
        r = d.call({"insert": "names", "$db": "t",
                    "documents": [{"_id": 2, "k": "z" * 300}]})
        e = r["writeErrors"][0]
        self.assertEqual((e["code"], e.get("codeName", "KeyTooLong")),
                         (17280, "KeyTooLong"), r)
        r = d.call({"create": "names", "$db": "t"})
        self.assert_error(r, 48, "NamespaceExists")
        r = d.call({"drop": "names_none", "$db": "t"})
        self.assert_error(r, 26, "NamespaceNotFound")
        r = d.call({"find": "a$b", "$db": "t"})
        self.assert_error(r, 73, "InvalidNamespace")
        r = d.call({"createIndexes": "names", "$db": "t", "indexes": [
            {"key": {"u": 1}, "name": "u_1", "unique": True}]})
        d.call({"insert": "names", "documents": [{"_id": 3, "u": 1}],
                "$db": "t"})
        r = d.call({"findAndModify": "names", "query": {"_id": 1},
                    "update": {"$set": {"u": 1}}, "$db": "t"})
        self.assert_error(r, 11000, "DuplicateKey")

    def test_generic_arguments(self):
        d = self.door()
        generic = {"lsid": {"id": bson.Binary(b"\x00" * 16, 4)},
                   "$clusterTime": {"clusterTime": bson.Timestamp(1, 1)},
                   "$readPreference": {"mode": "primary"},
                   "readConcern": {"level": "local"},
                   "writeConcern": {"w": 1}, "maxTimeMS": 1000,
                   "comment": "c", "apiVersion": "1", "apiStrict": False,
                   "apiDeprecationErrors": False}
        for cmd in ({"find": "gen"}, {"insert": "gen",
                                      "documents": [{"_id": 1}]},
                    {"count": "gen"}):
            r = d.call(dict(cmd, **generic, **{"$db": "t"}))
            self.assertEqual(r["ok"], 1.0, (cmd, r))
        r = d.call({"ping": 1, "apiVersion": "2", "$db": "admin"})
        self.assert_error(r, 322)
        for extra in ({"txnNumber": bson.Int64(1)},
                      {"startTransaction": True, "autocommit": False},
                      {"autocommit": False}):
            r = d.call(dict({"find": "gen"}, **extra, **{"$db": "t"}))
            self.assert_error(r, 20, "IllegalOperation")
            self.assertEqual(r["errmsg"], "Transaction numbers are only "
                             "allowed on a replica set member or mongos")
        # $db is required in OP_MSG
        r = d.call({"ping": 1})
        self.assertEqual(r["ok"], 0.0, r)
        self.assertIn("$db", r["errmsg"])


class Handshake(WireCase):
    """docs/mongodb.md, Handshake."""

    def test_hello_fields(self):
        d = self.door(auth=False)
        r = d.call({"hello": 1, "helloOk": True, "$db": "admin"})
        want = {"isWritablePrimary": True, "maxBsonObjectSize": 16777216,
                "maxMessageSizeBytes": 48000000, "maxWriteBatchSize": 100000,
                "logicalSessionTimeoutMinutes": 30, "minWireVersion": 0,
                "maxWireVersion": 17, "readOnly": False, "helloOk": True}
        self.assertEqual({k: r.get(k) for k in want}, want)
        for k in ("localTime", "connectionId"):
            self.assertIn(k, r)
        for k in ("topologyVersion", "setName", "saslSupportedMechs"):
            self.assertNotIn(k, r)
        r = d.call({"isMaster": 1, "saslSupportedMechs": "admin.kvd",
                    "$db": "admin"})
        self.assertIs(r["ismaster"], True)
        self.assertNotIn("helloOk", r)
        self.assertEqual(r["saslSupportedMechs"], ["SCRAM-SHA-256"])

    def test_build_info(self):
        d = self.door(auth=False)
        r = d.call({"buildInfo": 1, "$db": "admin"})
        self.assertEqual(r["version"], "6.0.0")
        self.assertTrue(r["gitVersion"].startswith("kvd-"), r)
        self.assertEqual(r["gitVersion"], "kvd-" + r["kvdVersion"])


class Auth(WireCase):
    """docs/mongodb.md, Authentication."""

    def test_any_user_any_auth_source(self):
        # kvd configures no user: any name, any authSource database
        for creds, src in (("alice:secret@", "admin"), ("kvd:secret@", "t"),
                           ("bob:secret@", "other")):
            cl = pymongo.MongoClient(
                "mongodb://%s127.0.0.1:%d/?authSource=%s" %
                (creds, self.host.mport, src), serverSelectionTimeoutMS=5000)
            r = cl.admin.command("connectionStatus")
            users = r["authInfo"]["authenticatedUsers"]
            self.assertEqual(users, [{"user": creds.split(":")[0],
                                      "db": src}], r)
            self.assertEqual(r["authInfo"]["authenticatedUserRoles"],
                             [{"role": "root", "db": "admin"}], r)
            self.assertNotIn("authenticatedUserPrivileges", r["authInfo"])
            r = cl.admin.command("connectionStatus", showPrivileges=True)
            self.assertEqual(r["authInfo"]["authenticatedUserPrivileges"],
                             [{"resource": {"anyResource": True},
                               "actions": ["anyAction"]}], r)
            with self.assertRaises(pymongo.errors.OperationFailure) as e:
                cl.admin.command("connectionStatus", showPrivileges="yes")
            self.assertEqual(e.exception.code, 14)
            cl.close()

    def test_speculative_authentication(self):
        """saslStart inside hello is answered in hello's reply: the
        server's first SCRAM message, continuing the client's nonce."""
        d = self.door(auth=False)
        r = d.call({"hello": 1, "$db": "admin", "speculativeAuthenticate": {
            "saslStart": 1, "mechanism": "SCRAM-SHA-256", "db": "admin",
            "payload": bson.Binary(b"n,,n=kvd,r=abcdefghijklmnop"),
            "options": {"skipEmptyExchange": True}}})
        sa = r["speculativeAuthenticate"]
        self.assertEqual((sa["conversationId"], sa["done"]), (1, False))
        f = dict(kv.split("=", 1) for kv in
                 bytes(sa["payload"]).decode().split(","))
        self.assertTrue(f["r"].startswith("abcdefghijklmnop"))
        self.assertEqual(f["i"], "15000")

    def test_other_mechanisms_334(self):
        d = self.door(auth=False)
        for mech in ("SCRAM-SHA-1", "PLAIN", "MONGODB-X509", "GSSAPI"):
            r = d.call({"saslStart": 1, "mechanism": mech,
                        "payload": bson.Binary(b"n,,n=kvd,r=abc"),
                        "$db": "admin"})
            self.assert_error(r, 334, "MechanismUnavailable")
        self.assertEqual(d.call(PING)["ok"], 1.0)

    def test_logout_ends_authentication(self):
        d = self.door()
        self.assertEqual(d.call({"find": "c", "$db": "t"})["ok"], 1.0)
        self.assertEqual(d.call({"logout": 1, "$db": "admin"})["ok"], 1.0)
        r = d.call({"find": "c", "$db": "t"})
        self.assert_error(r, 13, "Unauthorized",
                          "command find requires authentication")

    def test_before_auth_commands_that_run(self):
        d = self.door(auth=False)
        for cmd in ({"hello": 1}, {"isMaster": 1}, {"ismaster": 1},
                    {"ping": 1}, {"buildInfo": 1}, {"connectionStatus": 1},
                    {"endSessions": []}, {"logout": 1}):
            r = d.call(dict(cmd, **{"$db": "admin"}))
            self.assertEqual(r["ok"], 1.0, (cmd, r))
        r = d.call({"connectionStatus": 1, "$db": "admin"})
        self.assertEqual(r["authInfo"]["authenticatedUsers"], [])


class ControlCharacterPassword(unittest.TestCase):
    def test_refused_at_start(self):
        """SASLprep forbids control characters: kvd with its door on
        and such a password does not start, and says why."""
        with tempfile.TemporaryDirectory(prefix="kvdsasl-") as data:
            p = subprocess.run(
                [os.environ["KVD_BIN"], "--bind", "127.0.0.1", "--port",
                 str(kvdtest.free_port()), "--data-dir", data,
                 "--mongo-port", str(kvdtest.free_port()),
                 "--requirepass", "a\x01b"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"SASLprep", p.stdout)


class NoPassword(unittest.TestCase):
    def test_sasl_start_fails_18(self):
        h = KvdHost(password=None)
        try:
            d = Door(h.mport)
            r = d.call({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                        "payload": bson.Binary(b"n,,n=kvd,r=abcdefgh"),
                        "$db": "admin"})
            self.assertEqual((r["ok"], r["code"]), (0.0, 18), r)
            self.assertEqual(r["codeName"], "AuthenticationFailed")
            # everything runs without authentication
            r = d.call({"insert": "c", "documents": [{"_id": 1}],
                        "$db": "t"})
            self.assertEqual(r["n"], 1, r)
            self.assertEqual(d.call(PING)["ok"], 1.0)
            d.close()
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
