"""test_commands.py - every RESP command kvd supports, through Debian's
python3-redis client and a raw socket: replies and errors as Redis gives
them, options and their combinations, expiry, atomic counters, SCAN cursors.
"""

import time
import unittest

import redis

from kvdtest import Server, ServerCase
from resputil import Error, Raw, encode, main


# Read commands, each on its round's keys: prefix, k, k2.
RESP_READERS = [
    lambda p, k, k2: ("DBSIZE",),
    lambda p, k, k2: ("KEYS", p + b"*"),
    lambda p, k, k2: ("SCAN", 0, "MATCH", p + b"*", "COUNT", 10000),
    lambda p, k, k2: ("EXISTS", k, k2, k),
    lambda p, k, k2: ("GET", k),
    lambda p, k, k2: ("MGET", k2, k),
    lambda p, k, k2: ("TTL", k),
    lambda p, k, k2: ("PTTL", k),
    lambda p, k, k2: ("STRLEN", k),
    lambda p, k, k2: ("TYPE", k),
]


def resp_writes(k, k2, n):
    """Writes of every kind, each changing what some read sees."""
    return [("SET", k, b"v1"), ("APPEND", k, b"+"), ("EXPIRE", k, 100),
            ("PERSIST", k), ("PEXPIRE", k, 100000), ("SET", k, b"v2"),
            ("INCR", n), ("GETDEL", k), ("MSET", k, b"m", k2, b"m2"),
            ("INCRBY", n, 5), ("DEL", k, n), ("SETEX", k2, 100, b"e"),
            ("UNLINK", k2), ("SET", k, b"v3", "EX", 100), ("FLUSHALL",),
            ("SET", k2, b"z"), ("GETSET", k2, b"zz"), ("FLUSHDB",),
            ("SETNX", k, b"nx")]


def resp_apply(model, cmd):
    """The reply to a write from a model of the store (key -> [value,
    has expiry]), which it updates."""
    op, a = cmd[0], cmd[1:]
    if op in ("SET", "SETNX"):
        if op == "SETNX" and a[0] in model:
            return 0
        model[a[0]] = [a[1], len(a) > 2]
        return 1 if op == "SETNX" else b"OK"
    if op == "SETEX":
        model[a[0]] = [a[2], True]
        return b"OK"
    if op == "GETSET":
        old = model.get(a[0], [None])[0]
        model[a[0]] = [a[1], False]
        return old
    if op == "APPEND":
        old = model.setdefault(a[0], [b"", False])
        old[0] += a[1]
        return len(old[0])
    if op in ("EXPIRE", "PEXPIRE", "PERSIST"):
        if a[0] not in model or (op == "PERSIST" and not model[a[0]][1]):
            return 0
        model[a[0]][1] = op != "PERSIST"
        return 1
    if op in ("INCR", "INCRBY"):
        old = model.setdefault(a[0], [b"0", False])
        old[0] = b"%d" % (int(old[0]) + (a[1] if a[1:] else 1))
        return int(old[0])
    if op == "GETDEL":
        return model.pop(a[0])[0] if a[0] in model else None
    if op in ("DEL", "UNLINK"):
        return sum(model.pop(x, None) is not None for x in a)
    if op == "MSET":
        for i in range(0, len(a), 2):
            model[a[i]] = [a[i + 1], False]
        return b"OK"
    assert op in ("FLUSHALL", "FLUSHDB")
    model.clear()
    return b"OK"


def resp_expect(model, cmd):
    """The reply to a read from the model ("ttl"/"pttl": positive)."""
    op, a = cmd[0], cmd[1:]
    if op == "DBSIZE":
        return len(model)
    if op == "KEYS":
        return sorted(x for x in model if x.startswith(a[0][:-1]))
    if op == "SCAN":
        keys = sorted(x for x in model if x.startswith(a[2][:-1]))
        return [b"0", keys]
    if op == "EXISTS":
        return sum(x in model for x in a)
    if op == "GET":
        return model[a[0]][0] if a[0] in model else None
    if op == "MGET":
        return [model[x][0] if x in model else None for x in a]
    if op in ("TTL", "PTTL"):
        if a[0] not in model:
            return -2
        return op.lower() if model[a[0]][1] else -1
    if op == "STRLEN":
        return len(model[a[0]][0]) if a[0] in model else 0
    assert op == "TYPE"
    return b"string" if a[0] in model else b"none"


class Commands(ServerCase):
    SERVER = {"threads": 2, "resp": True,
              "args": ["--max-value-size", "1m", "--max-frame-size", "2m"]}

    def setUp(self):
        self.r = redis.Redis(port=self.srv.resp_port, socket_timeout=10)
        self.assertTrue(self.r.flushall())

    def tearDown(self):
        self.r.close()

    def raw(self):
        return Raw(self.srv.resp_port)

    def err(self, *args):
        with self.assertRaises(redis.ResponseError) as cm:
            self.r.execute_command(*args)
        return str(cm.exception)

    def test_connection(self):
        r = self.r
        self.assertTrue(r.ping())
        self.assertEqual(self.raw().call("PING", "hi"), b"hi")
        self.assertEqual(r.echo(b"\x00\xffbin"), b"\x00\xffbin")
        self.assertTrue(r.execute_command("SELECT", 0))
        self.assertEqual(self.err("SELECT", 1), "DB index is out of range")
        self.assertIn("not an integer", self.err("SELECT", "x"))
        self.assertIn("wrong number of arguments for 'ping'",
                      self.err("PING", "a", "b"))
        self.assertTrue(r.client_setname("worker-1"))
        self.assertEqual(r.client_getname(), "worker-1")
        self.assertIn("cannot contain spaces", self.err("CLIENT", "SETNAME", "a b"))
        self.assertIsInstance(r.client_id(), int)
        self.assertIn("unknown subcommand 'nope'. Try CLIENT HELP",
                      self.err("CLIENT", "nope"))
        sec, usec = r.time()
        self.assertLess(abs(sec + usec / 1e6 - time.time()), 5)
        self.assertIn("without any password configured", self.err("AUTH", "pw"))

    def test_hello(self):
        c = self.raw()
        rep = c.call("HELLO", 2)
        d = dict(zip(rep[::2], rep[1::2]))
        self.assertEqual(d[b"proto"], 2)
        self.assertEqual(d[b"mode"], b"standalone")
        e = c.call("HELLO", 3)
        self.assertIsInstance(e, Error)
        self.assertTrue(str(e).startswith("NOPROTO"), e)
        self.assertEqual(c.call("HELLO", 2, "SETNAME", "n1")[0], b"server")
        self.assertEqual(c.call("CLIENT", "GETNAME"), b"n1")
        self.assertIn("Syntax error in HELLO option 'bogus'",
                      str(c.call("HELLO", 2, "bogus")))
        self.assertEqual(c.call("PING"), b"PONG")  # still usable
        c.close()

    def test_get_set(self):
        r = self.r
        self.assertIsNone(r.get("k"))
        self.assertTrue(r.set("k", "v"))
        self.assertEqual(r.get("k"), b"v")
        self.assertTrue(r.set("k", b""))
        self.assertEqual(r.get("k"), b"")
        key, val = bytes(range(256))[1:200], bytes(range(256)) * 100
        self.assertTrue(r.set(key, val))
        self.assertEqual(r.get(key), val)
        self.assertEqual(r.strlen(key), len(val))
        self.assertEqual(r.strlen("nope"), 0)
        self.assertEqual(r.type(key), b"string")
        self.assertEqual(r.type("nope"), b"none")

    def test_set_options(self):
        r = self.r
        self.assertIsNone(r.set("s", "1", xx=True))
        self.assertIsNone(r.get("s"))
        self.assertTrue(r.set("s", "1", nx=True))
        self.assertIsNone(r.set("s", "2", nx=True))
        self.assertEqual(r.get("s"), b"1")
        self.assertTrue(r.set("s", "3", xx=True))
        self.assertEqual(r.set("s", "4", get=True), b"3")
        self.assertIsNone(r.set("fresh", "1", get=True))
        self.assertEqual(r.set("s", "5", nx=True, get=True), b"4")
        self.assertEqual(r.get("s"), b"4")
        self.assertEqual(r.getset("s", "6"), b"4")
        self.assertTrue(r.set("s", "7", ex=100))
        self.assertTrue(98 <= r.ttl("s") <= 100)
        self.assertTrue(r.set("s", "8", keepttl=True))
        self.assertTrue(98 <= r.ttl("s") <= 100)
        self.assertEqual(r.get("s"), b"8")
        self.assertTrue(r.set("s", "9"))
        self.assertEqual(r.ttl("s"), -1)
        self.assertTrue(r.set("s", "a", px=50000))
        self.assertTrue(49000 < r.pttl("s") <= 50000)
        self.assertTrue(r.set("s", "b", exat=int(time.time()) + 100))
        self.assertTrue(95 <= r.ttl("s") <= 100)
        self.assertTrue(r.set("s", "c", pxat=int(time.time() * 1000) + 100000))
        self.assertTrue(95 <= r.ttl("s") <= 100)
        self.assertEqual(self.err("SET", "s", "v", "NX", "XX"), "syntax error")
        self.assertEqual(self.err("SET", "s", "v", "EX", 1, "PX", 1), "syntax error")
        self.assertEqual(self.err("SET", "s", "v", "EX"), "syntax error")
        self.assertEqual(self.err("SET", "s", "v", "KEEPTTL", "EX", 5), "syntax error")
        self.assertEqual(self.err("SET", "s", "v", "BOGUS"), "syntax error")
        self.assertEqual(self.err("SET", "s", "v", "EX", "x"),
                         "value is not an integer or out of range")
        self.assertEqual(self.err("SET", "s", "v", "EX", 0),
                         "invalid expire time in 'set' command")
        self.assertEqual(self.err("SET", "s", "v", "PX", -5),
                         "invalid expire time in 'set' command")
        self.assertEqual(r.get("s"), b"c")  # refused requests change nothing

    def test_set_variants(self):
        r = self.r
        self.assertTrue(r.setnx("n", "1"))
        self.assertFalse(r.setnx("n", "2"))
        self.assertEqual(r.get("n"), b"1")
        self.assertTrue(r.setex("e", 100, "v"))
        self.assertTrue(98 <= r.ttl("e") <= 100)
        self.assertTrue(r.psetex("e", 100000, "w"))
        self.assertTrue(98000 <= r.pttl("e") <= 100000)
        self.assertEqual(self.err("SETEX", "e", 0, "v"),
                         "invalid expire time in 'setex' command")
        self.assertEqual(self.err("PSETEX", "e", -1, "v"),
                         "invalid expire time in 'psetex' command")
        self.assertEqual(r.getdel("e"), b"w")
        self.assertIsNone(r.getdel("e"))
        self.assertTrue(r.mset({"m1": "a", "m2": "b", "m3": "c"}))
        self.assertEqual(r.mget("m1", "nope", "m3", "m2"), [b"a", None, b"c", b"b"])
        self.assertIn("wrong number of arguments for 'mset'",
                      self.err("MSET", "a", "1", "b"))

    def test_del_exists(self):
        r = self.r
        r.mset({"d%d" % i: i for i in range(20)})
        self.assertEqual(r.exists("d1", "d2", "d1", "zz"), 3)
        self.assertEqual(r.delete(*["d%d" % i for i in range(10)], "zz"), 10)
        self.assertEqual(r.unlink("d10", "d11", "zz"), 2)
        self.assertEqual(r.exists(*["d%d" % i for i in range(20)]), 8)
        self.assertEqual(r.dbsize(), 8)

    def test_counters(self):
        r = self.r
        self.assertEqual(r.incr("c"), 1)
        self.assertEqual(r.incrby("c", 10), 11)
        self.assertEqual(r.decr("c"), 10)
        self.assertEqual(r.decrby("c", 15), -5)
        self.assertEqual(r.get("c"), b"-5")
        r.set("c", str(2**63 - 1))
        self.assertEqual(self.err("INCR", "c"), "increment or decrement would overflow")
        self.assertEqual(r.get("c"), str(2**63 - 1).encode())
        r.set("t", "abc")
        self.assertIn("not an integer or out of range", self.err("INCR", "t"))
        # a stored value with leading white space or '+' is no integer
        # (Redis's string2ll), whatever strtoll would make of it
        for v in ("\t999", "\n1", " 1", "+1", "-0", "- 1", "\v-5"):
            r.set("t", v)
            self.assertIn("not an integer", self.err("INCR", "t"), repr(v))
            self.assertEqual(r.get("t"), v.encode())
        self.assertIn("not an integer", self.err("INCRBY", "c", "1.5"))
        self.assertIn("not an integer", self.err("INCRBY", "c", "01"))
        self.assertEqual(self.err("DECRBY", "c", str(-2**63)),
                         "decrement would overflow")
        r.set("ttl", "5", ex=100)
        self.assertEqual(r.incr("ttl"), 6)
        self.assertTrue(98 <= r.ttl("ttl") <= 100)  # INCR keeps the expiry

    def test_append(self):
        r = self.r
        self.assertEqual(r.append("a", "hello"), 5)
        self.assertEqual(r.append("a", " world"), 11)
        self.assertEqual(r.get("a"), b"hello world")
        r.set("big", b"x" * (1 << 20))
        self.assertIn("exceeds maximum allowed size", self.err("APPEND", "big", "y"))
        self.assertIn("exceeds maximum allowed size",
                      self.err("SET", "big2", b"x" * ((1 << 20) + 1)))

    def test_expire(self):
        r = self.r
        self.assertFalse(r.expire("nope", 10))
        r.set("k", "v")
        self.assertEqual(r.ttl("k"), -1)
        self.assertEqual(r.ttl("nope"), -2)
        self.assertEqual(r.pttl("nope"), -2)
        self.assertTrue(r.expire("k", 100))
        self.assertTrue(98 <= r.ttl("k") <= 100)
        self.assertTrue(r.pexpire("k", 200000))
        self.assertTrue(198 <= r.ttl("k") <= 200)
        self.assertTrue(r.expireat("k", int(time.time()) + 300))
        self.assertTrue(295 <= r.ttl("k") <= 300)
        self.assertTrue(r.pexpireat("k", int(time.time() * 1000) + 400000))
        self.assertTrue(395 <= r.ttl("k") <= 400)
        self.assertTrue(r.persist("k"))
        self.assertFalse(r.persist("k"))  # no expiry left to remove
        self.assertFalse(r.persist("nope"))
        self.assertEqual(r.ttl("k"), -1)
        self.assertTrue(r.pexpire("k", 100))
        time.sleep(0.3)
        self.assertIsNone(r.get("k"))
        self.assertEqual(r.ttl("k"), -2)
        r.set("k", "v")
        self.assertTrue(r.expire("k", -1))  # in the past: deleted
        self.assertEqual(r.exists("k"), 0)
        r.set("k", "v")
        self.assertTrue(r.expireat("k", 1))
        self.assertEqual(r.exists("k"), 0)
        self.assertIn("invalid expire time", self.err("EXPIRE", "k", 2**62))
        self.assertIn("Unsupported option", self.err("EXPIRE", "k", 10, "BOGUS"))
        # NX, XX, GT, LT compare with the key's expiry (no expiry: infinite)
        r.set("k", "v")
        self.assertFalse(r.expire("k", 100, xx=True))
        self.assertFalse(r.expire("k", 100, gt=True))
        self.assertTrue(r.expire("k", 100, nx=True))
        self.assertFalse(r.expire("k", 50, nx=True))
        self.assertFalse(r.expire("k", 50, gt=True))
        self.assertTrue(r.expire("k", 200, gt=True))
        self.assertTrue(r.expire("k", 50, lt=True))
        self.assertLessEqual(r.ttl("k"), 50)
        self.assertIn("not compatible", self.err("EXPIRE", "k", 10, "NX", "XX"))

    def test_invalid_keys(self):
        r = self.r
        long_key = b"k" * 512
        self.assertIsNone(r.get(long_key))
        self.assertIsNone(r.get(b""))
        self.assertEqual(r.exists(long_key, b""), 0)
        self.assertEqual(r.ttl(b""), -2)
        self.assertIn("invalid key", self.err("SET", long_key, "v"))
        self.assertIn("invalid key", self.err("SET", b"", "v"))
        self.assertIn("invalid key", self.err("MSET", "a", "1", b"", "2"))
        self.assertIsNone(r.get("a"))  # MSET refused whole
        self.assertTrue(r.set(b"k" * 511, "v"))

    def test_unknown_and_arity(self):
        c = self.raw()
        e = c.call("LPUSH", "list", "a")
        self.assertEqual(str(e), "ERR unknown command 'LPUSH', with args "
                         "beginning with: 'list' 'a' ")
        e = c.call("NOPE")
        self.assertEqual(str(e), "ERR unknown command 'NOPE', with args beginning with: ")
        e = c.call("GET")
        self.assertEqual(str(e), "ERR wrong number of arguments for 'get' command")
        e = c.call("GET", "a", "b")
        self.assertEqual(str(e), "ERR wrong number of arguments for 'get' command")
        e = c.call("X" * 300, "y" * 300)
        self.assertLess(len(str(e)), 400)
        self.assertEqual(c.call("get", "a"), None)  # case-insensitive, usable
        self.assertEqual(c.call("GeT", "a"), None)
        c.close()

    def test_scan(self):
        r = self.r
        keys = {("user:%04d" % i).encode() for i in range(500)}
        keys |= {("item:%04d" % i).encode() for i in range(300)}
        r.mset({k: b"v" for k in keys})
        self.assertEqual(set(r.scan_iter(count=37)), keys)
        self.assertEqual(set(r.scan_iter(match="user:*", count=50)),
                         {k for k in keys if k.startswith(b"user:")})
        self.assertEqual(set(r.scan_iter(match="*:00[1-2]?")),
                         {k for k in keys if k[-4:-2] == b"00" and k[-2:-1] in b"12"})
        self.assertEqual(set(r.scan_iter(match="nomatch*")), set())
        self.assertEqual(list(r.scan_iter(_type="hash")), [])
        cur, page = r.scan(0, count=10)
        self.assertNotEqual(cur, 0)
        self.assertEqual(len(page), 10)
        self.assertEqual(page, sorted(page))  # key order
        self.assertIn("invalid cursor", self.err("SCAN", "123"))
        self.assertIn("invalid cursor", self.err("SCAN", "abc"))
        self.assertEqual(self.err("SCAN", 0, "COUNT", 0), "syntax error")
        self.assertEqual(self.err("SCAN", 0, "BOGUS", 1), "syntax error")
        self.assertEqual(self.err("SCAN", 0, "MATCH"), "syntax error")

    def test_keys_dbsize(self):
        r = self.r
        r.mset({"a1": 1, "a2": 2, "b1": 3, "[x]": 4, "a*": 5})
        self.assertEqual(sorted(r.keys("*")), [b"[x]", b"a*", b"a1", b"a2", b"b1"])
        self.assertEqual(sorted(r.keys("a?")), [b"a*", b"a1", b"a2"])
        self.assertEqual(r.keys("a\\*"), [b"a*"])
        self.assertEqual(r.keys("\\[x\\]"), [b"[x]"])
        self.assertEqual(sorted(r.keys("[^a]*")), [b"[x]", b"b1"])
        self.assertEqual(r.keys("*" * 40 + "z"), [])  # no exponential blowup
        self.assertEqual(r.dbsize(), 5)
        r.set("gone", "v", px=1)
        time.sleep(0.05)
        self.assertEqual(r.dbsize(), 5)

    def test_info_config_command(self):
        r = self.r
        r.set("k", "v")
        info = r.info()
        for f in ("redis_version", "uptime_in_seconds", "connected_clients",
                  "total_commands_processed", "kvd_durability", "db0"):
            self.assertIn(f, info)
        self.assertEqual(info["db0"]["keys"], 1)
        self.assertEqual(set(r.info("keyspace")), {"db0"})
        self.assertEqual(r.info("nosuchsection"), {})
        self.assertEqual(r.config_get("save"), {"save": ""})
        self.assertEqual(r.config_get("appendonly"), {"appendonly": "no"})
        self.assertIn("maxclients", r.config_get("max*"))
        self.assertIn("read-only at run time", self.err("CONFIG", "SET", "save", ""))
        c = self.raw()  # redis-py reshapes COMMAND replies: read them raw
        n = c.call("COMMAND", "COUNT")
        self.assertEqual(len(c.call("COMMAND")), n)
        info = c.call("COMMAND", "INFO", "get", "nope")
        self.assertEqual(info[0][:6], [b"get", 2, [b"readonly", b"fast"], 1, 1, 1])
        self.assertIsNone(info[1])
        docs = c.call("COMMAND", "DOCS", "set")
        self.assertEqual(docs[0], b"set")
        self.assertIn(b"summary", docs[1])
        self.assertEqual(len(c.call("COMMAND", "DOCS")), 2 * n)
        c.close()
        self.assertIn("get", r.command())  # redis-py's own parsing

    def test_flushall(self):
        r = self.r
        r.mset({"a": 1, "b": 2})
        self.assertTrue(r.flushdb())
        self.assertEqual(r.dbsize(), 0)
        self.assertEqual(self.err("FLUSHALL", "LATER"), "syntax error")
        with Server(threads=1, resp=True, args=["--resp-flushall", "no"]) as s:
            r2 = redis.Redis(port=s.resp_port)
            r2.set("a", "1")
            with self.assertRaises(redis.ResponseError) as cm:
                r2.flushall()
            self.assertIn("disabled", str(cm.exception))
            self.assertEqual(r2.get("a"), b"1")
            r2.close()

    def test_pipeline_order(self):
        """Pipelined writes and reads on one connection: own writes seen,
        replies in order, errors in their place."""
        p = self.r.pipeline(transaction=False)
        want = []
        for i in range(300):
            k = "p%d" % (i % 17)
            p.set(k, i)
            want.append(True)
            p.get(k)
            want.append(str(i).encode())
            if i % 50 == 0:
                p.incr("p%d" % (i % 17))
                want.append(i + 1)
                p.execute_command("SET", k, "v", "BOGUS")
                want.append("err")
                p.set(k, i)
                want.append(True)
        got = p.execute(raise_on_error=False)
        for g, w in zip(got, want):
            if w == "err":
                self.assertIsInstance(g, redis.ResponseError)
            else:
                self.assertEqual(g, w)
        self.assertEqual(len(got), len(want))

    def pipe(self, cmds):
        """Send every command in one write, then read the replies."""
        c = self.raw()
        c.send(b"".join(encode(*a) for a in cmds))
        got = [c.reply() for _ in cmds]
        c.close()
        return got

    def test_pipeline_own_writes(self):
        """Every read command directly behind each kind of write (so no
        earlier read's wait hides one that did not wait) sees the write:
        whole-keyspace readers (DBSIZE, KEYS, SCAN) too."""
        model, cmds, want = {}, [], []
        for r, read in enumerate(RESP_READERS):
            pre = b"rw%02d:" % r
            k, k2, n = pre + b"k", pre + b"k2", pre + b"n"
            for w in resp_writes(k, k2, n):
                cmds.append(w)
                want.append(resp_apply(model, w))
                cmds.append(read(pre, k, k2))
                want.append(resp_expect(model, cmds[-1]))
        got = self.pipe(cmds)
        for i, (g, w) in enumerate(zip(got, want)):
            where = (i, cmds[i - 1], cmds[i], g)
            if w == "ttl":
                self.assertTrue(0 < g <= 100, where)
            elif w == "pttl":
                self.assertTrue(0 < g <= 100000, where)
            elif cmds[i][0] == "KEYS":
                self.assertEqual(sorted(g), w, where)
            elif cmds[i][0] == "SCAN":
                self.assertEqual([g[0], sorted(g[1])], w, where)
            else:
                self.assertEqual(g, w, where)

    def test_pipeline_slot_count_wraps_not(self):
        """A key's in-flight count (conn.h) goes back to zero after each
        write: 65,535 finished writes of k, then MSET of k 65,536 times
        with GET k in the same send reads the MSET's last value."""
        c = self.raw()
        old = ["MSET"] + [x for i in range(65535) for x in ("wrap", "o%d" % i)]
        self.assertEqual(c.call(*old), b"OK")
        new = ["MSET"] + [x for i in range(65536) for x in ("wrap", "n%d" % i)]
        c.send(encode(*new) + encode("GET", "wrap"))
        self.assertEqual([c.reply(), c.reply()], [b"OK", b"n65535"])
        c.close()

    def test_pipeline_flush_every_slot(self):
        """A read of any key right behind FLUSHALL or FLUSHDB waits for it,
        whichever of the connection's 256 in-flight key slots (conn.h) the
        key is in.  Each segment drains its SET (GET k waits for it), so
        only the flush is in flight when the last read arrives; 2048 keys
        leave a slot untried with probability about 256 * e^-8."""
        readers = [(lambda k: ("GET", k), None), (lambda k: ("EXISTS", k), 0),
                   (lambda k: ("MGET", k), [None]), (lambda k: ("TTL", k), -2),
                   (lambda k: ("PTTL", k), -2), (lambda k: ("STRLEN", k), 0),
                   (lambda k: ("TYPE", k), b"none"),
                   (lambda k: ("DBSIZE",), 0), (lambda k: ("KEYS", k), []),
                   (lambda k: ("SCAN", 0, "MATCH", k), [b"0", []])]
        cmds, want = [], []
        for i in range(2048):
            k = b"fs:%05d" % i
            read, answer = readers[i % len(readers)]
            cmds += [("SET", k, b"v"), ("GET", k),
                     ("FLUSHALL" if i % 2 else "FLUSHDB",), read(k)]
            want += [b"OK", b"v", b"OK", answer]
        cmds += [("SET", b"fs:x", b"after"), ("GET", b"fs:x"), ("DBSIZE",)]
        want += [b"OK", b"after", 1]
        with Server(threads=2, resp=True, durability="async") as srv:
            c = Raw(srv.resp_port)
            c.send(b"".join(encode(*a) for a in cmds))
            got = [c.reply() for _ in cmds]
            c.close()
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g, w, (i, cmds[i]))

    def test_inline(self):
        c = self.raw()
        c.send(b'SET "a b" "x\\ny\\x41"\r\nGET \'a b\'\r\n\r\n  \r\nPING\nEXISTS a\\ b\r\n')
        self.assertEqual(c.reply(), b"OK")
        self.assertEqual(c.reply(), b"x\nyA")
        self.assertEqual(c.reply(), b"PONG")
        self.assertEqual(c.reply(), 0)
        c.close()

    def test_quit(self):
        c = self.raw()
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$1\r\n1\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
        self.assertEqual(c.reply(), b"OK")
        self.assertEqual(c.reply(), b"OK")
        self.assertTrue(c.closed())
        self.assertEqual(self.r.get("q"), b"1")


if __name__ == "__main__":
    main()
