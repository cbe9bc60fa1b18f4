"""test_opmatrix.py - every native operation of common/kv_proto.h's table,
checked against its expectations here.

The operations come from the header (kvproto.py parses KV_OP_LIST), the
expectations from EXPECT below: an operation added to the table without an
entry here fails test_table_complete.  For each operation:

- arity: 0 .. arity + 2 arguments (variadic: minimum + 2 repeats + 2);
  a wrong count answers BAD_ARGS with a text, a right one its normal reply;
- read-only: writes (and BACKUP) answer READ_ONLY, the rest work;
- disable-commands: a disabled operation answers DISABLED, and so does
  every operation that performs it (EXPECT's performs), the others not;
- requirepass: everything but HELLO and AUTH answers AUTH_REQUIRED before
  AUTH, and works after it;
- STATS and /metrics count every call under its operation and the status
  of its reply;
- every operation that reads the store, pipelined right behind a write
  that changes its answer, sees that write.
"""

import re
import shutil
import tempfile
import unittest

import bson

from kvdtest import *  # noqa: F401,F403
from test_metrics import http_get, parse

# Normal outcomes of a well-formed request (statuses below MALFORMED).
FINE = {OK, NOT_FOUND, EXISTS_ST}


def op(kind, args, more=None, ok=FINE, refused_read_only=None, own=None,
       performs=()):
    """Expectations of one operation.

    kind: the header's kind (R, W, A, T); args(t): a well-formed argument
    list of the maximum fixed length, t a per-call unique tag; more(t):
    the unit a variadic operation repeats; ok: the statuses a well-formed
    request may answer on a plain server; refused_read_only: answers
    READ_ONLY on a read-only server (default: the writes); own(t): for an
    operation that reads the store, (writes, read, check(reply)) where
    the read, pipelined behind the writes, must see them; performs: the
    other operations its effect is made of, which disable-commands
    refuses it with (docs/security.md)."""
    return {"kind": kind, "args": args, "more": more, "ok": ok,
            "ro": kind == "W" if refused_read_only is None else refused_read_only,
            "own": own, "performs": set(performs)}


def key(t, name="k"):
    return b"om:%s:%s" % (t, name.encode())


def ttl_set(reply):
    return reply[0] == OK and 0 < reply[1] <= 100000


EXPECT = {
    "HELLO": op("A", lambda t: [1]),
    "PING": op("A", lambda t: [b"p"]),
    "GET": op("R", lambda t: [key(t)], own=lambda t: (
        [(PUT, key(t), b"x")], (GET, key(t)), lambda r: r == [OK, b"x"])),
    "PUT": op("W", lambda t: [key(t), b"v", 0, 0]),
    "DEL": op("W", lambda t: [key(t)]),
    "MGET": op("R", lambda t: [key(t)], more=lambda t: [key(t, "m")],
               own=lambda t: ([(MPUT, 0, key(t), b"x", key(t, "y"), b"y")],
                              (MGET, key(t, "y"), key(t)),
                              lambda r: r == [OK, b"y", b"x"])),
    "MPUT": op("W", lambda t: [0, key(t), b"v"],
               more=lambda t: [key(t, "m"), b"w"]),
    "MDEL": op("W", lambda t: [key(t)], more=lambda t: [key(t, "m")]),
    "EXISTS": op("R", lambda t: [key(t)], more=lambda t: [key(t, "m")],
                 own=lambda t: ([(PUT, key(t), b"x")], (EXISTS, key(t)),
                                lambda r: r == [OK, 1])),
    "SCAN": op("R", lambda t: [None, None, None, 10, 0], own=lambda t: (
        [(PUT, key(t), b"x")], (SCAN, key(t)),
        lambda r: r == [OK, [key(t), b"x"], None])),
    "COUNT": op("R", lambda t: [None], own=lambda t: (
        [(PUT, key(t), b"x"), (PUT, key(t, "2"), b"x")],
        (COUNT, b"om:%s:" % t),
        lambda r: r == [OK, 2])),
    "STATS": op("A", lambda t: []),
    "INCR": op("W", lambda t: [key(t, "n"), 1]),
    "APPEND": op("W", lambda t: [key(t), b"x"]),
    "EXPIRE": op("W", lambda t: [key(t), 1000]),
    "TTL": op("R", lambda t: [key(t)], own=lambda t: (
        [(PUT, key(t), b"x", 100000)], (TTL, key(t)), ttl_set)),
    "GETDEL": op("W", lambda t: [key(t)]),
    "FLUSHALL": op("W", lambda t: []),
    # without requirepass, AUTH answers DISABLED (protocol.md)
    "AUTH": op("A", lambda t: [b"pw"], ok={DISABLED}),
    # a fresh name under backup-dir each time; refused when read-only
    "BACKUP": op("A", lambda t: [b"bk-" + t], ok={OK}, refused_read_only=True,
                 own=lambda t: ([(FLUSHALL,), (PUT, key(t), b"x")],
                                (BACKUP, b"own-" + t),
                                lambda r: r == [OK, 1])),
    # version 2: a TXN of nothing (its sub-requests are checked in
    # test_native_txn.py), and the string, bit and key operations
    "TXN": op("T", lambda t: [None], more=lambda t: [[GET, key(t)]],
              refused_read_only=False),
    "RENAME": op("W", lambda t: [key(t), key(t, "to"), 0],
                 performs={"GET", "PUT", "DEL"}),
    "COPY": op("W", lambda t: [key(t), key(t, "to"), 0],
               performs={"GET", "PUT"}),
    "GETEX": op("W", lambda t: [key(t), 1000, 0],
                performs={"GET", "EXPIRE", "DEL"}),
    "INCRBYFLOAT": op("W", lambda t: [key(t, "f"), b"1.5"],
                      performs={"GET", "PUT"}),
    "GETRANGE": op("R", lambda t: [key(t), 0, -1], own=lambda t: (
        [(PUT, key(t), b"xyz")], (GETRANGE, key(t), 1, -1),
        lambda r: r == [OK, b"yz"]), performs={"GET"}),
    "SETRANGE": op("W", lambda t: [key(t), 1, b"x"], performs={"GET", "PUT"}),
    "SETBIT": op("W", lambda t: [key(t), 7, 1], performs={"GET", "PUT"}),
    "GETBIT": op("R", lambda t: [key(t), 7], own=lambda t: (
        [(PUT, key(t), b"\x01")], (GETBIT, key(t), 7),
        lambda r: r == [OK, 1]), performs={"GET"}),
    "BITCOUNT": op("R", lambda t: [key(t), 0, -1, 0], own=lambda t: (
        [(PUT, key(t), b"\xff\x01")], (BITCOUNT, key(t)),
        lambda r: r == [OK, 9]), performs={"GET"}),
    "BITPOS": op("R", lambda t: [key(t), 1, 0, -1, 0], own=lambda t: (
        [(PUT, key(t), b"\x00\x10")], (BITPOS, key(t), 1),
        lambda r: r == [OK, 11]), performs={"GET"}),
    "BITOP": op("W", lambda t: [BITOP_OR, key(t, "d"), key(t)],
                more=lambda t: [key(t, "s")], performs={"GET", "PUT", "DEL"}),
    # hashes (protocol.md, "Hashes")
    "HSET": op("W", lambda t: [key(t, "h"), b"f", b"v"],
               more=lambda t: [b"g", b"w"], performs={"PUT"}),
    "HGET": op("R", lambda t: [key(t, "h"), b"f"], more=lambda t: [b"g"],
               own=lambda t: ([(HSET, key(t, "h"), b"f", b"x")],
                              (HGET, key(t, "h"), b"f"),
                              lambda r: r == [OK, b"x"]),
               performs={"GET"}),
    "HGETALL": op("R", lambda t: [key(t, "h")], own=lambda t: (
        [(HSET, key(t, "h"), b"f", b"x")], (HGETALL, key(t, "h")),
        lambda r: r == [OK, [b"f", b"x"]]), performs={"GET"}),
    "HDEL": op("W", lambda t: [key(t, "h"), b"f"], more=lambda t: [b"g"],
               performs={"PUT"}),
    "HINCRBY": op("W", lambda t: [key(t, "hn"), b"f", 1], performs={"PUT"}),
    "HSCAN": op("R", lambda t: [key(t, "h"), None, 10], own=lambda t: (
        [(HSET, key(t, "h"), b"f", b"x")], (HSCAN, key(t, "h")),
        lambda r: r == [OK, [b"f", b"x"], None]), performs={"GET"}),
    # documents (protocol.md, "Documents"): db "om", a collection per tag
    "DOCINSERT": op("W", lambda t: [b"om", b"c" + t, bson.encode({"a": 1})],
                    more=lambda t: [bson.encode({"a": 2})]),
    "DOCGET": op("R", lambda t: [b"om", b"c" + t, bson.encode({"_id": 1})],
                 own=lambda t: (
                     [(DOCINSERT, b"om", b"c" + t, bson.encode({"_id": 1}))],
                     (DOCGET, b"om", b"c" + t, bson.encode({"_id": 1})),
                     lambda r: r == [OK, bson.encode({"_id": 1})])),
    "DOCUPDATE": op("W", lambda t: [b"om", b"c" + t, bson.encode({"_id": 1}),
                                    bson.encode({"$set": {"a": 1}}), 0]),
    "DOCDELETE": op("W", lambda t: [b"om", b"c" + t, bson.encode({"_id": 1}),
                                    0]),
    "DOCFIND": op("R", lambda t: [b"om", b"c" + t, None, None, None, 0, 0,
                                  10, None],
                  own=lambda t: (
                      [(DOCINSERT, b"om", b"c" + t, bson.encode({"_id": 2}))],
                      (DOCFIND, b"om", b"c" + t),
                      lambda r: r == [OK, [bson.encode({"_id": 2})], None])),
    # databases, collections and indexes: a listing or drop of indexes
    # of a collection that does not exist is MongoDB's error 26
    "DOCDBS": op("R", lambda t: [], own=lambda t: (
        [(DOCCREATE, b"od" + t, b"c")], (DOCDBS,),
        lambda r: r[0] == OK and b"od" + t in r[1])),
    "DOCCOLLS": op("R", lambda t: [b"om"], own=lambda t: (
        [(DOCCREATE, b"om", b"c" + t)], (DOCCOLLS, b"om"),
        lambda r: r[0] == OK and b"c" + t in r[1][::2])),
    "DOCCREATE": op("W", lambda t: [b"om", b"c" + t, bson.encode({})]),
    "DOCDROP": op("W", lambda t: [b"om", b"c" + t]),
    "DOCIXCREATE": op("W", lambda t: [b"om", b"c" + t, bson.encode(
        {"key": {"a": 1}, "name": "a"})], more=lambda t: [bson.encode(
            {"key": {"f" + t.decode(): 1}, "name": "f" + t.decode()})]),
    "DOCIXLIST": op("R", lambda t: [b"om", b"c" + t], ok=FINE | {DOC_ERROR},
                    own=lambda t: (
                        [(DOCIXCREATE, b"om", b"c" + t, bson.encode(
                            {"key": {"a": 1}, "name": "a"}))],
                        (DOCIXLIST, b"om", b"c" + t),
                        lambda r: r[0] == OK and len(r[1]) == 2)),
    "DOCIXDROP": op("W", lambda t: [b"om", b"c" + t, b"*", None],
                    ok=FINE | {DOC_ERROR}),
    # replication (docs/protocol.md): a full copy for a replica with
    # nothing; a pull or snapshot chunk without one is refused with a text
    "REPLSYNC": op("A", lambda t: [b"", 2, bytes(16), 0, 0], ok={OK}),
    "REPLPULL": op("A", lambda t: [b"", bytes(16)], ok={OK, BAD_ARGS}),
    "REPLSNAP": op("A", lambda t: [0, 0, b""], ok={BAD_ARGS}),
    "REPLICAOF": op("A", lambda t: [None, 0], ok={OK}),
    "WAIT": op("A", lambda t: [0, 0], ok={OK}),
}

# Operations a client may send before AUTH (protocol.md, AUTH).
BEFORE_AUTH = {"HELLO", "AUTH"}


def counts(e):
    """(argument count, well-formed?) for 0 .. arity + 2."""
    n = len(e["args"](b"x"))
    if e["more"] is None:
        return [(i, i == n or (i < n and optional(e, i))) for i in range(n + 3)]
    unit = len(e["more"](b"x"))
    top = n + 2 * unit + 2
    return [(i, i >= n and (i - n) % unit == 0) for i in range(top + 1)]


# How many trailing arguments each fixed-arity operation may omit
# (protocol.md's `?`): from this count up, a request is well formed.
MIN_ARGS = {"HELLO": 0, "PING": 0, "PUT": 2, "SCAN": 0, "COUNT": 0,
            "RENAME": 2, "COPY": 2, "GETEX": 1, "BITCOUNT": 1, "BITPOS": 2,
            "HSCAN": 1, "DOCUPDATE": 4, "DOCDELETE": 3, "DOCFIND": 2,
            "DOCCREATE": 2, "DOCIXDROP": 3}


def optional(e, i):
    name = [k for k, v in EXPECT.items() if v is e][0]
    return i >= MIN_ARGS.get(name, len(e["args"](b"x")))


def request(name, n, t):
    """name's request with n arguments, as well formed as n allows."""
    e = EXPECT[name]
    args = list(e["args"](t))
    i = 0
    while e["more"] and len(args) < n:
        args += e["more"](t + b"-%d" % i)
        i += 1
    args += [b"extra"] * (n - len(args))  # past a fixed arity
    return (OPS[name][0],) + tuple(args[:n])


class Tally:
    """A native client that counts every reply by operation and status."""

    def __init__(self, c):
        self.c, self.n = c, {}

    def call(self, opnum, *args):
        reply = self.c.call(opnum, *args)
        k = (OP_NAMES[opnum], reply[0])
        self.n[k] = self.n.get(k, 0) + 1
        return reply


class OpMatrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvdtest-om-")
        cls.serial = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def tag(self):
        OpMatrix.serial += 1
        return b"%d" % self.serial

    def server(self, *args):
        bdir = tempfile.mkdtemp(dir=self.tmp)
        return Server(threads=2, args=["--backup-dir", bdir] + list(args))

    def well_formed(self, c, name, t=None):
        n = len(EXPECT[name]["args"](b"x"))
        return c.call(*request(name, n, t or self.tag()))

    def assert_error(self, reply, status, what):
        self.assertEqual(reply[0], status, (what, reply))
        self.assertEqual(len(reply), 2, (what, reply))
        self.assertIsInstance(reply[1], bytes, (what, reply))

    def test_table_complete(self):
        self.assertEqual(sorted(OPS), sorted(EXPECT),
                         "kv_proto.h's KV_OP_LIST and EXPECT differ: give "
                         "every operation its expectations")
        for name, (_, kind) in OPS.items():
            e = EXPECT[name]
            self.assertEqual(e["kind"], kind, name)
            if kind == "R":
                self.assertIsNotNone(e["own"], "%s reads: give it an own-"
                                     "writes check" % name)

    def test_arity_and_counters(self):
        mport = free_port()
        with self.server("--metrics-port", str(mport)) as srv:
            c = Tally(srv.client())
            for name in sorted(OPS):
                for n, good in counts(EXPECT[name]):
                    if name == "AUTH" and good:
                        continue  # test_auth_disabled_counted
                    req = request(name, n, self.tag())
                    reply = c.call(*req)
                    if good:
                        self.assertIn(reply[0], EXPECT[name]["ok"], (req, reply))
                    else:
                        self.assert_error(reply, BAD_ARGS, req)
            # every number no operation has, the gaps between ranges too
            unnamed = [n for n in range(MAX_OP + 2) if n not in OP_NAMES]
            for opnum in unnamed + [255]:
                self.assert_error(c.c.call(opnum), UNKNOWN_OP, opnum)
            # STATS: calls and errors per operation, STATS itself not yet
            st = c.call(STATS)[1][b"ops"]
            for name in OPS:
                calls = sum(v for (o, s), v in c.n.items() if o == name)
                errors = sum(v for (o, s), v in c.n.items()
                             if o == name and s >= MALFORMED)
                if name == "STATS":
                    calls -= 1  # this STATS is counted once answered
                got = st.get(name.encode(), {})
                self.assertEqual((got.get(b"calls"), got.get(b"errors")),
                                 (calls, errors), (name, c.n))
            # /metrics: every reply under its operation and status
            _, s = parse(http_get(mport, b"/metrics")[1])
            got = {}
            for (fam, labels), v in s.items():
                m = re.match(r'\{op="(\w+)",status="(\w+)"\}$', labels)
                if fam == "kvd_requests_total" and m and m.group(1) in OPS:
                    got[(m.group(1), m.group(2))] = v
            want = {(o, STATUS_NAMES[st]): v for (o, st), v in c.n.items()}
            wrong = {k: (got.get(k), want.get(k)) for k in set(got) | set(want)
                     if got.get(k) != want.get(k)}
            self.assertEqual(wrong, {}, "(op, status): (/metrics, replies)")

    # AUTH without a configured password answers DISABLED, and STATS and
    # /metrics count it under DISABLED, not OK (op_auth counts its reply).
    def test_auth_disabled_counted(self):
        mport = free_port()
        with self.server("--metrics-port", str(mport)) as srv:
            c = srv.client()
            self.assert_error(c.call(AUTH, b"pw"), DISABLED, "AUTH")
            self.assertEqual(c.call(STATS)[1][b"ops"][b"AUTH"],
                             {b"calls": 1, b"errors": 1})
            _, s = parse(http_get(mport, b"/metrics")[1])
            self.assertEqual(s.get(("kvd_requests_total",
                                    '{op="AUTH",status="DISABLED"}')), 1)

    def test_read_only(self):
        with self.server("--read-only", "yes") as srv:
            c = srv.client()
            for name in sorted(OPS):
                reply = self.well_formed(c, name)
                if EXPECT[name]["ro"]:
                    self.assert_error(reply, READ_ONLY, name)
                else:
                    self.assertIn(reply[0], EXPECT[name]["ok"], (name, reply))

    def test_disabled(self):
        names = sorted(OPS)
        for half in (names[::2], names[1::2]):
            with self.server("--disable-commands", ",".join(half)) as srv:
                c = srv.client()
                for name in names:
                    reply = self.well_formed(c, name)
                    if name in half or EXPECT[name]["performs"] & set(half):
                        self.assert_error(reply, DISABLED, name)
                    else:
                        self.assertIn(reply[0], EXPECT[name]["ok"],
                                      (name, reply))

    def test_auth_required(self):
        with self.server("--requirepass", "pw") as srv:
            c = srv.client()
            for name in sorted(OPS):
                if name in BEFORE_AUTH:
                    continue
                for n in (0, len(EXPECT[name]["args"](b"x"))):
                    req = request(name, n, self.tag())
                    self.assert_error(c.call(*req), AUTH_REQUIRED, req)
            self.assertEqual(c.call(HELLO)[0], OK)
            self.assert_error(c.call(AUTH, b"wrong"), AUTH_FAILED, "AUTH")
            self.assertEqual(c.call(AUTH, b"pw"), [OK])
            for name in sorted(OPS):
                reply = self.well_formed(c, name)
                ok = {OK} if name == "AUTH" else EXPECT[name]["ok"]
                self.assertIn(reply[0], ok, (name, reply))

    def test_own_writes(self):
        """Each reading operation right behind the writes it must see;
        ten rounds, since a read that skipped its wait would usually (not
        always) see a snapshot from before the commit."""
        with self.server() as srv:
            c = srv.client()
            for _ in range(10):
                for name in sorted(OPS):
                    if not EXPECT[name]["own"]:
                        continue
                    writes, read, check = EXPECT[name]["own"](self.tag())
                    got = c.pipeline(list(writes) + [read])
                    for w, g in zip(writes, got):
                        self.assertEqual(g[0], OK, (name, w, g))
                    self.assertTrue(check(got[-1]), (name, read, got[-1]))


if __name__ == "__main__":
    main()
