"""test_hash.py - Redis's hash type on kvd's RESP port, side by side with
redis-server 7.0, and on the native port.

The same seeded random sequences of hash commands (HSET, HSETNX, HGET,
HMGET, HMSET, HGETALL, HDEL, HLEN, HEXISTS, HSTRLEN, HKEYS, HVALS, HINCRBY,
HINCRBYFLOAT, HRANDFIELD, HSCAN), mixed with string and keyspace commands
on the same keys, go to both servers and every reply is compared: exactly,
errors included, but where Redis's answer is not fixed:
  - a hash Redis holds as a hash table (over 512 fields, or a field or a
    value over 64 bytes, once) lists its fields in an order of its own:
    HGETALL, HKEYS, HVALS are compared as multisets, HSCAN by what a whole
    walk returns;
  - HRANDFIELD is random: its reply is checked against the hash (count,
    members, values, no repeats for a positive count, the whole hash when
    the count covers it).
After each command the key it named holds the same type and contents on
both.  KVD_SEED=n replays one seed; KVD_DIFF_COMMANDS sets the length.

Also: WRONGTYPE (Redis's words) for every string command meeting a hash
and every hash command meeting a string, on both ports; the lost-update
test (8 connections HINCRBY 8 fields of one hash 10,000 times each); the
limits (max-hash-fields, max-hash-bytes, max-output).
"""

import os
import random
import socket
import threading
import unittest

import kvdtest
import kvproto as P
from kvdtest import Client, Server
from resputil import Error, Raw, main, need_redis_70
from test_differential import seeds, start_redis

KEYS = [b"h1", b"h2", b"h3", b"s1", b"{h}4"]
FIELDS = [b"f1", b"f2", b"f3", b"a", b"b", b"", b"n", b"x" * 65, b"f\x00z",
          b"long" * 5]
VALUES = [b"", b"0", b"1", b"-1", b"7", b"12345", b"3.5", b"1.5e3", b" 1",
          b"01", b"abc", b"9223372036854775807", b"-9223372036854775808",
          b"v" * 64, b"w" * 65, b"\x00\xff", b"10.50"]
INCRS = [b"0", b"1", b"-1", b"5", b"-100", b"9223372036854775807",
         b"-9223372036854775808", b"x", b"1.5", b"", b" 1"]
FLOATS = [b"0.1", b"-0.1", b"1", b"3.5", b"1.75e1", b"-5", b"0", b"-0",
          b"1e308", b"1e-5", b"inf", b"-inf", b"nan", b"x", b"", b" 1",
          b"10.50000", b"123456789.123456789"]
# (a huge negative count without WITHVALUES would have redis-server build
# that many fields for ever: kvd refuses it at max-output, test_limits)
COUNTS = [b"0", b"1", b"2", b"3", b"5", b"-1", b"-3", b"-7", b"100", b"-100",
          b"x", b"1.5", b"-9223372036854775808", b"9223372036854775807"]
HUGE = [b"-4611686018427387904", b"4611686018427387904", b"-9223372036854775807"]


def rf(r):
    return r.choice(FIELDS)


def rv(r):
    return r.choice(VALUES)


def pairs(r, lo=1, hi=4):
    return [x for _ in range(r.randrange(lo, hi)) for x in (rf(r), rv(r))]


def many_pairs(r):
    """Up to and past 512 fields (hash-max-listpack-entries): Redis makes
    the hash a hash table."""
    base = r.randrange(1000)
    return [x for i in range(r.choice([200, 520]))
            for x in (b"m%d" % (base + i), b"%d" % i)]


GEN = {
    "HSET": lambda r: [b"HSET", r.choice(KEYS)] + pairs(r),
    "HSET_MANY": lambda r: [b"HSET", r.choice(KEYS)] + many_pairs(r),
    "HMSET": lambda r: [b"HMSET", r.choice(KEYS)] + pairs(r),
    "HSETNX": lambda r: [b"HSETNX", r.choice(KEYS), rf(r), rv(r)],
    "HGET": lambda r: [b"HGET", r.choice(KEYS), rf(r)],
    "HMGET": lambda r: [b"HMGET", r.choice(KEYS)] + [rf(r) for _ in range(r.randrange(1, 4))],
    "HGETALL": lambda r: [b"HGETALL", r.choice(KEYS)],
    "HDEL": lambda r: [b"HDEL", r.choice(KEYS)] + [rf(r) for _ in range(r.randrange(1, 4))],
    "HLEN": lambda r: [b"HLEN", r.choice(KEYS)],
    "HEXISTS": lambda r: [b"HEXISTS", r.choice(KEYS), rf(r)],
    "HSTRLEN": lambda r: [b"HSTRLEN", r.choice(KEYS), rf(r)],
    "HKEYS": lambda r: [b"HKEYS", r.choice(KEYS)],
    "HVALS": lambda r: [b"HVALS", r.choice(KEYS)],
    "HINCRBY": lambda r: [b"HINCRBY", r.choice(KEYS), rf(r), r.choice(INCRS)],
    "HINCRBYFLOAT": lambda r: [b"HINCRBYFLOAT", r.choice(KEYS), rf(r), r.choice(FLOATS)],
    "HRANDFIELD": lambda r: [b"HRANDFIELD", r.choice(KEYS)] + r.choice(
        [[], [r.choice(COUNTS)], [r.choice(COUNTS), b"WITHVALUES"],
         [r.choice(COUNTS + HUGE), b"withvalues"], [b"1", b"BOGUS"],
         [b"1", b"WITHVALUES", b"x"]]),
    "HSCAN": lambda r: [b"HSCAN", r.choice(KEYS), r.choice(
        [b"0", b"0", b"x", b"-1", b"", b"+", b"+0", b"18446744073709551616"])] + r.choice(
        [[], [b"COUNT", b"1000"], [b"MATCH", r.choice([b"f*", b"*", b"?", b"m1*"])],
         [b"COUNT", r.choice([b"0", b"x", b"5"])], [b"BOGUS", b"1"], [b"COUNT"]]),
    # string and keyspace commands on the same keys
    "SET": lambda r: [b"SET", r.choice(KEYS), rv(r)] + r.choice([[], [b"GET"], [b"NX"], [b"XX"]]),
    "GET": lambda r: [b"GET", r.choice(KEYS)],
    "MGET": lambda r: [b"MGET"] + [r.choice(KEYS) for _ in range(r.randrange(1, 4))],
    "INCR": lambda r: [r.choice([b"INCR", b"DECR"]), r.choice(KEYS)],
    "APPEND": lambda r: [b"APPEND", r.choice(KEYS), rv(r)],
    "STRLEN": lambda r: [b"STRLEN", r.choice(KEYS)],
    "GETDEL": lambda r: [b"GETDEL", r.choice(KEYS)],
    "GETRANGE": lambda r: [b"GETRANGE", r.choice(KEYS), b"0", b"-1"],
    "SETRANGE": lambda r: [b"SETRANGE", r.choice(KEYS), b"1", b"zz"],
    "GETEX": lambda r: [b"GETEX", r.choice(KEYS)] + r.choice([[], [b"PERSIST"], [b"EX", b"1000"]]),
    "INCRBYFLOAT": lambda r: [b"INCRBYFLOAT", r.choice(KEYS), b"1.5"],
    "SETBIT": lambda r: [b"SETBIT", r.choice(KEYS), b"3", b"1"],
    "BITCOUNT": lambda r: [b"BITCOUNT", r.choice(KEYS)],
    "BITOP": lambda r: [b"BITOP", b"OR", r.choice(KEYS), r.choice(KEYS)],
    "MSETNX": lambda r: [b"MSETNX", r.choice(KEYS), b"v"],
    "DEL": lambda r: [b"DEL", r.choice(KEYS)],
    "EXISTS": lambda r: [b"EXISTS"] + [r.choice(KEYS) for _ in range(r.randrange(1, 3))],
    "TYPE": lambda r: [b"TYPE", r.choice(KEYS)],
    # seconds drawn from a wide range: two EXPIREs of one key then differ
    # by a second or more, so GT compares the same way in both servers
    # (with one value it compared two expiry times a few milliseconds
    # apart, and a millisecond's boundary decided the reply)
    "EXPIRE": lambda r: [b"EXPIRE", r.choice(KEYS), b"%d" % r.randrange(1000, 100000)]
    + r.choice([[], [b"NX"], [b"GT"]]),
    "PERSIST": lambda r: [b"PERSIST", r.choice(KEYS)],
    "TTL": lambda r: [b"TTL", r.choice(KEYS)],
    "RENAME": lambda r: [r.choice([b"RENAME", b"RENAMENX"]), r.choice(KEYS), r.choice(KEYS)],
    "COPY": lambda r: [b"COPY", r.choice(KEYS), r.choice(KEYS)] + r.choice([[], [b"REPLACE"]]),
    "OBJECT": lambda r: [b"OBJECT", b"ENCODING", r.choice(KEYS)],
    "DBSIZE": lambda r: [b"DBSIZE"],
    "SCAN_TYPE": lambda r: [b"SCAN", b"0", b"COUNT", b"100", b"TYPE",
                            r.choice([b"hash", b"string", b"list", b"HASH"])],
    "ARITY": lambda r: r.choice([[b"HSET", b"h1"], [b"HSET", b"h1", b"f"],
                                 [b"HSET", b"h1", b"f", b"v", b"g"], [b"HMSET", b"h1", b"f"],
                                 [b"HGET", b"h1"], [b"HSETNX", b"h1", b"f"], [b"HDEL", b"h1"],
                                 [b"HLEN"], [b"HINCRBY", b"h1", b"f"], [b"HSCAN", b"h1"],
                                 [b"HRANDFIELD"], [b"HSTRLEN", b"h1"], [b"HKEYS", b"h1", b"x"],
                                 [b"HMGET", b"h1"], [b"HEXISTS", b"h1", b"f", b"g"]]),
}


def as_pairs(flat):
    return sorted(zip(flat[0::2], flat[1::2]))


def hash_table(conn, key):
    """Does Redis (conn) hold key as a hash table (its order its own)?"""
    return conn.call("OBJECT", "ENCODING", key) == b"hashtable"


def contents(conn, key):
    """A key as comparable data: its type and sorted contents."""
    t = conn.call("TYPE", key)
    if t == b"hash":
        return (t, as_pairs(conn.call("HGETALL", key)))
    if t == b"string":
        return (t, conn.call("GET", key))
    return (t, None)


def randfield_ok(test, got, cmd, pairs_now):
    """An HRANDFIELD reply against the hash it was asked of."""
    fields = dict(pairs_now)
    if len(cmd) == 2:
        test.assertTrue(got is None if not fields else got in fields, (cmd, got))
        return
    count = int(cmd[2])
    withvalues = len(cmd) == 4
    if not fields or count == 0:
        test.assertEqual(got, [], cmd)
        return
    items = list(zip(got[0::2], got[1::2])) if withvalues else [(f, None) for f in got]
    want = abs(count) if count < 0 else min(count, len(fields))
    test.assertEqual(len(items), want, (cmd, got))
    for f, v in items:
        test.assertIn(f, fields, cmd)
        if withvalues:
            test.assertEqual(v, fields[f], cmd)
    if count > 0:
        test.assertEqual(len({f for f, _ in items}), len(items), ("repeats", cmd, got))


class HashDifferential(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need_redis_70()
        cls.redis_proc = start_redis(kvdtest.free_port())
        cls.redis_port = int(cls.redis_proc.args[2])
        cls.srv = Server(threads=2, resp=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        cls.redis_proc.terminate()
        cls.redis_proc.wait(10)

    def setUp(self):
        self.kvd, self.redis = Raw(self.srv.resp_port), Raw(self.redis_port)
        for c in (self.kvd, self.redis):
            self.assertEqual(c.call("FLUSHALL"), b"OK")

    def tearDown(self):
        self.kvd.close()
        self.redis.close()

    def both(self, *cmd):
        return self.kvd.call(*cmd), self.redis.call(*cmd)

    def same(self, *cmd):
        k, rd = self.both(*cmd)
        if cmd[0].upper() == "SCAN" and isinstance(rd, list):  # kvd: key order
            self.assertEqual((k[0], sorted(k[1])), (rd[0], sorted(rd[1])), cmd)
        elif (cmd[0].upper() in ("HGETALL", "HKEYS", "HVALS") and isinstance(rd, list)
                and hash_table(self.redis, cmd[1])):
            pair = cmd[0].upper() == "HGETALL"
            self.assertEqual(as_pairs(k) if pair else sorted(k),
                             as_pairs(rd) if pair else sorted(rd), cmd)
        else:
            self.assertEqual(repr(k), repr(rd), cmd)
        return k

    # ---- random sequences ----

    def compare(self, cmd, k, rd, before):
        name = cmd[0].upper()
        if isinstance(rd, Error) or isinstance(k, Error):
            self.assertEqual(repr(k), repr(rd), cmd)
            return
        key = cmd[1] if len(cmd) > 1 else None
        if name == b"HRANDFIELD":
            randfield_ok(self, k, cmd, before)
            return
        unordered = key is not None and hash_table(self.redis, key)
        if name == b"HSCAN":
            self.assertEqual(len(k), 2, cmd)
            if not unordered:
                self.assertEqual(k, rd, cmd)
            else:  # one page of a walk: pairs of the hash, each once
                got = as_pairs(k[1])
                self.assertEqual(len(got), len({f for f, _ in got}), cmd)
                self.assertTrue(set(got) <= set(before), cmd)
            return
        if unordered and name == b"HGETALL":
            self.assertEqual(as_pairs(k), as_pairs(rd), cmd)
        elif unordered and name in (b"HKEYS", b"HVALS"):
            self.assertEqual(sorted(k), sorted(rd), cmd)
        elif name == b"TTL":
            self.assertTrue(k == rd or (k > 0 and abs(k - rd) <= 1), (cmd, k, rd))
        elif name == b"SCAN":
            self.assertEqual(sorted(k[1]), sorted(rd[1]), cmd)
        else:
            self.assertEqual(k, rd, cmd)

    def test_random_sequences(self):
        """Seeded sequences of hash, string and keyspace commands on shared
        keys: every reply as redis-server 7.0's, every key the same after
        each command."""
        for seed in seeds():
            with self.subTest(seed=seed):
                self.random_sequence(seed)

    def random_sequence(self, seed):
        n = int(os.environ.get("KVD_DIFF_COMMANDS", "1500"))
        print("seed %d (KVD_SEED=%d replays)" % (seed, seed), flush=True)
        rnd = random.Random(seed)
        names = sorted(GEN)
        for c in (self.kvd, self.redis):
            c.call("FLUSHALL")
        for i in range(n):
            name = rnd.choice(names)
            if name == "HSET_MANY" and rnd.random() < 0.8:
                continue
            cmd = GEN[name](rnd)
            key = cmd[1] if len(cmd) > 1 and cmd[1] in KEYS else None
            before = contents(self.redis, key)[1] if key else None
            k, rd = self.both(*cmd)
            with self.subTest(i=i, cmd=cmd[:6]):
                self.compare(cmd, k, rd, before if isinstance(before, list) else [])
            if key:
                self.assertEqual(contents(self.kvd, key), contents(self.redis, key),
                                 ("after", i, cmd[:6]))
                enc = self.both("OBJECT", "ENCODING", key)
                self.assertEqual(enc[0], enc[1], ("encoding after", cmd[:6]))

    # ---- fixed cases ----

    def test_order_and_encoding(self):
        """Small hashes list their fields in Redis's order (insertion; a
        changed field keeps its place, a deleted one goes); OBJECT ENCODING
        turns hashtable past 512 fields (Redis 7.0's
        hash-max-listpack-entries) or 64 bytes, and stays so."""
        self.same("HSET", "h", "c", "1", "a", "2", "b", "3")
        self.same("HSET", "h", "a", "9", "d", "4")
        self.same("HDEL", "h", "c")
        self.same("HINCRBY", "h", "e", "1")
        self.same("HINCRBYFLOAT", "h", "b", "0.5")
        for c in ("HGETALL", "HKEYS", "HVALS"):
            self.same(c, "h")
        self.same("HSCAN", "h", "0")
        self.same("HSCAN", "h", "0", "MATCH", "[ab]")
        self.same("OBJECT", "ENCODING", "h")
        self.same("HSET", "h", "big", "v" * 65)
        self.same("OBJECT", "ENCODING", "h")
        self.same("HDEL", "h", "big")
        self.same("OBJECT", "ENCODING", "h")  # never back to listpack
        args = [x for i in range(513) for x in (b"f%d" % i, b"%d" % i)]
        self.same("HSET", "g", *args[:1024])
        self.same("OBJECT", "ENCODING", "g")
        self.same("HSET", "g", *args[1024:])
        self.same("OBJECT", "ENCODING", "g")
        self.same("HSETNX", "n", "f", "v" * 65)  # a new field: converted
        self.same("OBJECT", "ENCODING", "n")
        self.same("HSET", "n2", "f", "1")
        self.same("HSETNX", "n2", "f", "v" * 65)  # the field is there: not
        self.same("OBJECT", "ENCODING", "n2")
        self.same("HSET", "n3", "f", "1")
        self.same("HINCRBYFLOAT", "n3", "f", "1e100")  # a long result
        self.same("OBJECT", "ENCODING", "n3")
        self.same("HSET", "n4", "a", "v" * 65, "a", "1")  # any argument
        self.same("OBJECT", "ENCODING", "n4")

    def test_counts_and_errors(self):
        """Replies of each command in its corners, as redis-server's."""
        cases = [
            ["HSET", "h", "f", "1", "f", "2", "g", "3"], ["HGETALL", "h"],
            ["HMSET", "h", "f", "5"], ["HSETNX", "h", "f", "x"], ["HSETNX", "h", "z", "x"],
            ["HDEL", "h", "f", "f", "nosuch"], ["HLEN", "h"], ["HLEN", "nokey"],
            ["HGET", "nokey", "f"], ["HMGET", "nokey", "a", "b"], ["HGETALL", "nokey"],
            ["HKEYS", "nokey"], ["HVALS", "nokey"], ["HEXISTS", "nokey", "f"],
            ["HSTRLEN", "h", "z"], ["HSTRLEN", "h", "nosuch"], ["HDEL", "nokey", "f"],
            ["HINCRBY", "h", "z", "1"], ["HINCRBY", "h", "i", "9223372036854775807"],
            ["HINCRBY", "h", "i", "1"], ["HINCRBY", "h", "i", "-1"],
            ["HINCRBY", "h", "j", "-9223372036854775808"], ["HINCRBY", "h", "j", "-1"],
            ["HINCRBY", "h", "i", "x"], ["HSET", "h", "s", "007"], ["HINCRBY", "h", "s", "1"],
            ["HINCRBYFLOAT", "h", "fl", "10.5"], ["HINCRBYFLOAT", "h", "fl", "0.1"],
            ["HINCRBYFLOAT", "h", "fl", "-10.6"], ["HINCRBYFLOAT", "h", "z", "1"],
            ["HINCRBYFLOAT", "h", "fl", "1e308"], ["HINCRBYFLOAT", "h", "fl", "1e308"],
            ["HINCRBYFLOAT", "h", "fl", "inf"], ["HINCRBYFLOAT", "h", "fl", "x"],
            ["HINCRBYFLOAT", "h", "i", "1.5"], ["HINCRBYFLOAT", "h", "e", "5.0e3"],
            ["HINCRBYFLOAT", "h", "e2", "123456789.123456789"],
            ["HGETALL", "h"], ["HRANDFIELD", "nokey"], ["HRANDFIELD", "nokey", "3"],
            ["HRANDFIELD", "h", "0"], ["HRANDFIELD", "nokey", "x"],
            ["HRANDFIELD", "h", "-9223372036854775808"],
            ["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"],
            ["HRANDFIELD", "h", "1", "NOPE"], ["HRANDFIELD", "h", "1", "WITHVALUES", "x"],
            ["HSCAN", "nokey", "0"], ["HSCAN", "nokey", "0", "BOGUS"], ["HSCAN", "h", "x"],
            ["HSCAN", "h", "0", "COUNT", "0"], ["HSCAN", "h", "0", "COUNT", "x"],
            ["HSCAN", "h", "0", "TYPE", "hash"], ["HSCAN", "h", "0", "MATCH"],
            ["HSCAN", "h", "18446744073709551616"], ["HSET", "h"], ["HSET", "h", "a"],
            ["HSET", "h", "a", "1", "b"], ["HMSET", "h", "a"], ["HDEL", "h"],
            ["HDEL", "h", "f", "g", "z", "i", "j", "s", "fl", "e", "e2"], ["EXISTS", "h"],
            ["HDEL", "h", "zz"], ["EXISTS", "h"], ["TYPE", "h"],
        ]
        for cmd in cases:
            self.same(*cmd)

    def test_wrongtype_resp(self):
        """Every string command meeting a hash, and every hash command
        meeting a string, answers as Redis (WRONGTYPE, in its words; MGET
        nil; SET replaces; DEL, EXISTS, TYPE, EXPIRE, RENAME work)."""
        for c in (self.kvd, self.redis):
            c.call("HSET", "h", "f", "1")
            c.call("SET", "s", "12")
        string_cmds = [
            ["GET", "h"], ["STRLEN", "h"], ["APPEND", "h", "x"], ["INCR", "h"],
            ["DECR", "h"], ["INCRBY", "h", "2"], ["DECRBY", "h", "2"],
            ["INCRBYFLOAT", "h", "1.5"], ["GETRANGE", "h", "0", "-1"],
            ["SUBSTR", "h", "0", "-1"], ["SETRANGE", "h", "0", "x"], ["SETRANGE", "h", "0", ""],
            ["GETBIT", "h", "0"], ["SETBIT", "h", "0", "1"], ["BITCOUNT", "h"],
            ["BITPOS", "h", "1"], ["BITFIELD", "h", "GET", "u8", "0"],
            ["BITFIELD", "h", "SET", "u8", "0", "1"], ["BITFIELD_RO", "h", "GET", "u8", "0"],
            ["BITOP", "OR", "dst", "s", "h"], ["LCS", "h", "s"], ["GETDEL", "h"],
            ["GETEX", "h"], ["GETEX", "h", "PERSIST"], ["GETSET", "h", "v"],
            ["SET", "h", "v", "GET"], ["MGET", "h", "s", "nokey"], ["EXISTS", "h", "s"],
            ["TYPE", "h"], ["SETNX", "h", "v"], ["SET", "h", "v", "NX"], ["MSETNX", "h", "v"],
            ["TTL", "h"], ["EXPIRE", "h", "100"], ["EXPIRE", "h", "200", "GT"], ["TTL", "h"],
            ["PERSIST", "h"], ["TTL", "h"], ["OBJECT", "ENCODING", "h"],
            ["OBJECT", "REFCOUNT", "h"], ["HGET", "h", "f"],
        ]
        hash_cmds = [
            ["HSET", "s", "f", "1"], ["HMSET", "s", "f", "1"], ["HSETNX", "s", "f", "1"],
            ["HGET", "s", "f"], ["HMGET", "s", "f"], ["HGETALL", "s"], ["HDEL", "s", "f"],
            ["HLEN", "s"], ["HEXISTS", "s", "f"], ["HSTRLEN", "s", "f"], ["HKEYS", "s"],
            ["HVALS", "s"], ["HINCRBY", "s", "f", "1"], ["HINCRBY", "s", "f", "x"],
            ["HINCRBYFLOAT", "s", "f", "1"], ["HRANDFIELD", "s"], ["HRANDFIELD", "s", "2"],
            ["HRANDFIELD", "s", "x"], ["HSCAN", "s", "0"], ["HSCAN", "s", "x"], ["GET", "s"],
        ]
        for cmd in string_cmds + hash_cmds:
            self.same(*cmd)
        # SET replaces a hash, as any write that sets a whole value
        for cmd in (["SET", "h", "v"], ["TYPE", "h"], ["GET", "h"], ["HSET", "h2", "f", "1"],
                    ["MSET", "h2", "x"], ["TYPE", "h2"], ["HSET", "h3", "f", "1"],
                    ["RENAME", "s", "h3"], ["TYPE", "h3"], ["HSET", "h4", "a", "1"],
                    ["COPY", "h4", "h5"], ["HGETALL", "h5"], ["RENAME", "h4", "h6"],
                    ["HGETALL", "h6"], ["EXISTS", "h4"], ["DEL", "h5", "h6"], ["DBSIZE"]):
            self.same(*cmd)

    def test_keys_of_hash_type(self):
        """A hash as a key: MULTI/EXEC, WATCH (a change by another client,
        HDEL of its last field, EXPIRE, a write that changes nothing),
        DBSIZE, SCAN TYPE, FLUSHALL, as redis-server 7.0."""
        other = (Raw(self.srv.resp_port), Raw(self.redis_port))

        def both_other(*cmd):
            k, rd = other[0].call(*cmd), other[1].call(*cmd)
            self.assertEqual(repr(k), repr(rd), cmd)

        seqs = [
            # (commands of this client, commands of the other one
            # between WATCH and EXEC)
            ([["HSET", "h", "a", "1"]], [["HSET", "h", "b", "2"]]),
            ([["HSET", "h", "a", "1"]], [["HDEL", "h", "a"]]),
            ([["HSET", "h", "a", "1"]], [["HDEL", "h", "nosuch"]]),
            ([["HSET", "h", "a", "1"]], [["HSETNX", "h", "a", "x"]]),
            ([["HSET", "h", "a", "1"]], [["HINCRBY", "h", "n", "1"]]),
            ([["HSET", "h", "a", "1"]], [["EXPIRE", "h", "100"]]),
            ([["HSET", "h", "a", "1"]], [["HGET", "h", "a"]]),
            ([["DEL", "h"]], [["HSET", "h", "a", "1"]]),
            ([["SET", "h", "v"]], [["HSET", "h", "a", "1"]]),
        ]
        for mine, theirs in seqs:
            for cmd in [["DEL", "h", "s"]] + mine:
                self.same(*cmd)
            self.same("WATCH", "h")
            for cmd in theirs:
                both_other(*cmd)
            self.same("MULTI")
            self.same("HSET", "h", "w", "1")
            self.same("HGETALL", "h")
            self.same("EXEC")
            self.same("TYPE", "h")
            self.same("HGETALL", "h")
        for cmd in (["MULTI"], ["HSET", "m", "a", "1", "b", "2"], ["HINCRBY", "m", "a", "5"],
                    ["HDEL", "m", "b"], ["SET", "s", "1"], ["HSET", "s", "a", "1"],
                    ["HGETALL", "m"], ["EXEC"], ["DBSIZE"],
                    ["SCAN", "0", "TYPE", "hash"], ["SCAN", "0", "TYPE", "string"],
                    ["FLUSHALL"], ["DBSIZE"], ["HGETALL", "m"], ["EXISTS", "m", "s"]):
            self.same(*cmd)
        for c in other:
            c.close()

    def test_hscan_walk(self):
        """A whole HSCAN walk of a hash table returns every field once, with
        MATCH filtering as Redis's; a field there for the whole walk is
        returned even while others are added and deleted between pages."""
        args = [x for i in range(1000) for x in (b"f%d" % i, b"v%d" % i)]
        for c in (self.kvd, self.redis):
            c.call("HSET", "big", *args)
        for match in (None, b"f1*", b"*9"):
            walks = []
            for c in (self.kvd, self.redis):
                cur, got = b"0", []
                while True:
                    cmd = [b"HSCAN", b"big", cur, b"COUNT", b"50"]
                    if match:
                        cmd += [b"MATCH", match]
                    cur, page = c.call(*cmd)
                    got += page
                    if cur == b"0":
                        break
                walks.append(got)
            self.assertEqual(len(walks[0]), len(set(as_pairs(walks[0]))) * 2, match)
            self.assertEqual(as_pairs(walks[0]), as_pairs(walks[1]), match)
        # changes between pages: the fields there throughout all come back
        cur, seen, pages = b"0", set(), 0
        while True:
            cur, page = self.kvd.call("HSCAN", "big", cur, "COUNT", "30")
            seen |= set(page[0::2])
            pages += 1
            self.kvd.call("HDEL", "big", b"f%d" % (999 - pages))
            self.kvd.call("HSET", "big", b"new%d" % pages, b"x")
            if cur == b"0":
                break
        stable = {b"f%d" % i for i in range(999 - pages)}
        self.assertEqual(stable - seen, set())
        self.assertGreater(pages, 1)


class HashNative(unittest.TestCase):
    """The native port meets hashes: WRONG_TYPE for the string operations,
    nil where MGET and SCAN would give a value, a count for EXISTS."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, resp=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def test_wrongtype_native(self):
        r, c = Raw(self.srv.resp_port), Client(self.srv.port)
        self.assertEqual(r.call("HSET", "h", "f", "1"), 1)
        self.assertEqual(r.call("SET", "s", "ab"), b"OK")
        wrong = [[P.GET, b"h"], [P.INCR, b"h", 1], [P.APPEND, b"h", b"x"], [P.GETDEL, b"h"],
                 [P.GETEX, b"h"], [P.INCRBYFLOAT, b"h", b"1.5"], [P.GETRANGE, b"h", 0, -1],
                 [P.SETRANGE, b"h", 0, b"x"], [P.SETBIT, b"h", 0, 1], [P.GETBIT, b"h", 0],
                 [P.BITCOUNT, b"h"], [P.BITPOS, b"h", 1], [P.BITOP, P.BITOP_OR, b"d", b"s", b"h"]]
        for req in wrong:
            got = c.call(*req)
            self.assertEqual(got[0], P.WRONG_TYPE, (req, got))
        self.assertEqual(c.call(P.MGET, b"h", b"s", b"none"), [P.OK, None, b"ab", None])
        self.assertEqual(c.call(P.EXISTS, b"h", b"s", b"none"), [P.OK, 2])
        self.assertEqual(c.call(P.TTL, b"h"), [P.OK, -1])
        self.assertEqual(c.call(P.EXPIRE, b"h", 100000), [P.OK])
        self.assertEqual(r.call("HGET", "h", "f"), b"1")  # the type kept
        self.assertEqual(c.call(P.SCAN, None, None, None, 10), [P.OK, [b"h", None, b"s", b"ab"],
                                                                None])
        self.assertEqual(c.call(P.RENAME, b"h", b"h2"), [P.OK])
        self.assertEqual(c.call(P.COPY, b"h2", b"h3"), [P.OK])
        for k in (b"h2", b"h3"):
            self.assertEqual(r.call("HGETALL", k), [b"f", b"1"])
        self.assertEqual(c.call(P.PUT, b"h3", b"plain"), [P.OK])  # replaces
        self.assertEqual(r.call("TYPE", "h3"), b"string")
        self.assertEqual(c.call(P.DEL, b"h2"), [P.OK])
        self.assertEqual(r.call("EXISTS", "h2"), 0)
        r.close()
        c.close()


def hincr_worker(port, field, n, errors):
    r = Raw(port)
    try:
        window = 500
        for start in range(0, n, window):
            k = min(window, n - start)
            r.send(b"".join(b"*4\r\n$7\r\nHINCRBY\r\n$4\r\nlost\r\n$%d\r\n%s\r\n$1\r\n1\r\n"
                            % (len(field), field) for _ in range(k)))
            for _ in range(k):
                got = r.reply()
                if not isinstance(got, int):
                    errors.append(got)
    except (OSError, EOFError) as e:  # pragma: no cover - reported below
        errors.append(e)
    finally:
        r.close()


class HashWrites(unittest.TestCase):
    def test_lost_update(self):
        """8 connections each HINCRBY its own field of one hash 10,000 times
        (pipelined, on both io threads): every field ends at exactly 10,000,
        as each change is computed on the committer against the batch and
        the layers, never from a copy a client or io thread read."""
        srv = Server(threads=2, resp=True).start()
        try:
            errors, threads = [], []
            for i in range(8):
                t = threading.Thread(target=hincr_worker,
                                     args=(srv.resp_port, b"f%d" % i, 10000, errors))
                t.start()
                threads.append(t)
            for t in threads:
                t.join(120)
            self.assertEqual(errors, [])
            r = Raw(srv.resp_port)
            got = r.call("HGETALL", "lost")
            self.assertEqual(as_pairs(got), [(b"f%d" % i, b"10000") for i in range(8)])
            r.close()
        finally:
            srv.stop()
            srv.cleanup()

    def test_limits(self):
        """max-hash-fields and max-hash-bytes refuse a write that would pass
        them (nothing of it applied); HGETALL of a hash larger than
        max-output is refused, HSCAN still walks it; HRANDFIELD with a
        huge negative count is refused at max-output, not built."""
        srv = Server(threads=2, resp=True,
                     args=("--max-hash-fields", "10", "--max-hash-bytes", "1m",
                           "--max-output", "64k")).start()
        try:
            r = Raw(srv.resp_port)
            self.assertEqual(r.call("HSET", "h", *[b"%d" % i for i in range(20)]), 10)
            e = r.call("HSET", "h", "x", "y")
            self.assertIsInstance(e, Error)
            self.assertEqual(str(e), "ERR hash would exceed max-hash-fields")
            self.assertEqual(r.call("HLEN", "h"), 10)
            self.assertEqual(r.call("HSET", "h", "0", "z" * 100000), 0)
            e = r.call("HSET", "h", "2", "z" * 1000000)
            self.assertEqual(str(e), "ERR hash would exceed max-hash-bytes")
            self.assertEqual(r.call("HSTRLEN", "h", "2"), 1)
            e = r.call("HGETALL", "h")
            self.assertEqual(str(e), "ERR reply would exceed max-output: use HSCAN")
            cur, got = b"0", []
            while True:
                cur, page = r.call("HSCAN", "h", cur)
                got += page
                if cur == b"0":
                    break
            self.assertEqual(len(got), 20)
            e = r.call("HRANDFIELD", "h", "-1000000000", "WITHVALUES")
            self.assertEqual(str(e), "ERR reply would exceed max-output: use HSCAN")
            self.assertEqual(r.call("PING"), b"PONG")
            r.close()
        finally:
            srv.stop()
            srv.cleanup()


if __name__ == "__main__":
    main()
