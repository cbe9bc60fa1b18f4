"""test_disable_matrix.py - disable-commands on both doors, every name.

One table decides what a name in disable-commands refuses (docs/security.md,
"Dangerous commands"): a native operation is refused when it, or an
operation it performs, is named (RENAME performs GET, PUT and DEL); a RESP
command when it is named, or when a native operation it performs is.  This
test keeps its own copy of that table (test_opmatrix's EXPECT for the native
operations, RESP below for every RESP command kvd has) and checks it whole:

- each native operation name alone disabled: every native operation, every
  one of them inside a TXN, and every RESP command is refused exactly when
  the table says;
- the RESP-only names, half of them at a time: each refuses its command
  and nothing else, on either door.

A native operation or RESP command missing from the tables fails
test_tables_complete.
"""

import os
import shutil
import sys
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403
from test_opmatrix import EXPECT, request

SRC = os.environ.get("KVD_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "resp"))
from resputil import Error, Raw  # noqa: E402

# Every RESP command: (a well-formed request that changes nothing the next
# requests depend on, or shuts nothing down when it is not refused; the
# native operations it performs).  A name given here in capitals is also
# a native operation's, which it performs by name too.
RESP = {
    "append": (["APPEND", "rk", "x"], {"APPEND"}),
    "auth": (["AUTH", "pw"], {"AUTH"}),
    "bgsave": (["BGSAVE"], set()),
    "bitcount": (["BITCOUNT", "rk"], {"BITCOUNT", "GET"}),
    "bitfield": (["BITFIELD", "rk", "SET", "u8", "0", "1"], {"GET", "PUT"}),
    "bitfield_ro": (["BITFIELD_RO", "rk", "GET", "u8", "0"], {"GET"}),
    "bitop": (["BITOP", "OR", "rd", "rk"], {"BITOP", "GET", "PUT", "DEL"}),
    "bitpos": (["BITPOS", "rk", "1"], {"BITPOS", "GET"}),
    "client": (["CLIENT", "ID"], set()),
    "command": (["COMMAND", "COUNT"], set()),
    "config": (["CONFIG", "GET", "maxclients"], set()),
    "copy": (["COPY", "rk", "rc", "REPLACE"], {"COPY", "GET", "PUT"}),
    "dbsize": (["DBSIZE"], {"COUNT"}),
    "decr": (["DECR", "rn"], {"INCR"}),
    "decrby": (["DECRBY", "rn", "2"], {"INCR"}),
    "del": (["DEL", "rx"], {"DEL", "MDEL"}),
    "discard": (["DISCARD"], set()),
    "echo": (["ECHO", "x"], set()),
    "exec": (["EXEC"], set()),
    "exists": (["EXISTS", "rk"], {"EXISTS"}),
    "expire": (["EXPIRE", "rk", "1000"], {"EXPIRE"}),
    "expireat": (["EXPIREAT", "rk", "99999999999"], {"EXPIRE"}),
    "expiretime": (["EXPIRETIME", "rk"], {"TTL"}),
    "flushall": (["FLUSHALL"], {"FLUSHALL"}),
    "flushdb": (["FLUSHDB"], {"FLUSHALL"}),
    "get": (["GET", "rk"], {"GET"}),
    "getbit": (["GETBIT", "rk", "1"], {"GETBIT", "GET"}),
    "getdel": (["GETDEL", "rx"], {"GETDEL"}),
    "getex": (["GETEX", "rk", "EX", "1000"], {"GETEX", "GET", "EXPIRE", "DEL"}),
    "getrange": (["GETRANGE", "rk", "0", "1"], {"GETRANGE", "GET"}),
    "getset": (["GETSET", "rk", "v"], {"PUT"}),
    "hdel": (["HDEL", "rh", "x"], {"PUT"}),
    "hello": (["HELLO", "2"], {"HELLO"}),
    "hexists": (["HEXISTS", "rh", "f"], {"GET"}),
    "hget": (["HGET", "rh", "f"], {"GET"}),
    "hgetall": (["HGETALL", "rh"], {"GET"}),
    "hincrby": (["HINCRBY", "rh", "n", "1"], {"PUT"}),
    "hincrbyfloat": (["HINCRBYFLOAT", "rh", "fl", "1.5"], {"PUT"}),
    "hkeys": (["HKEYS", "rh"], {"GET"}),
    "hlen": (["HLEN", "rh"], {"GET"}),
    "hmget": (["HMGET", "rh", "f"], {"GET"}),
    "hmset": (["HMSET", "rh", "f", "v"], {"PUT"}),
    "hrandfield": (["HRANDFIELD", "rh"], {"GET"}),
    "hscan": (["HSCAN", "rh", "0"], {"GET"}),
    "hset": (["HSET", "rh", "f", "v"], {"PUT"}),
    "hsetnx": (["HSETNX", "rh", "f", "v"], {"PUT"}),
    "hstrlen": (["HSTRLEN", "rh", "f"], {"GET"}),
    "hvals": (["HVALS", "rh"], {"GET"}),
    "incr": (["INCR", "rn"], {"INCR"}),
    "incrby": (["INCRBY", "rn", "2"], {"INCR"}),
    "incrbyfloat": (["INCRBYFLOAT", "rf", "1.5"], {"INCRBYFLOAT", "GET", "PUT"}),
    "info": (["INFO", "server"], {"STATS"}),
    "keys": (["KEYS", "r*"], {"SCAN"}),
    "lastsave": (["LASTSAVE"], set()),
    "latency": (["LATENCY", "LATEST"], set()),
    "lcs": (["LCS", "rk", "rc"], {"GET"}),
    "mget": (["MGET", "rk"], {"MGET"}),
    "monitor": (["MONITOR"], set()),
    "mset": (["MSET", "rm", "v"], {"MPUT"}),
    "msetnx": (["MSETNX", "rm2", "v"], {"EXISTS", "MPUT"}),
    "multi": (["MULTI"], set()),
    "object": (["OBJECT", "ENCODING", "rk"], {"GET"}),
    "persist": (["PERSIST", "rk"], {"EXPIRE"}),
    "pexpire": (["PEXPIRE", "rk", "1000000"], {"EXPIRE"}),
    "pexpireat": (["PEXPIREAT", "rk", "99999999999999"], {"EXPIRE"}),
    "pexpiretime": (["PEXPIRETIME", "rk"], {"TTL"}),
    "ping": (["PING"], {"PING"}),
    "psetex": (["PSETEX", "rk", "1000000", "v"], {"PUT"}),
    "psubscribe": (["PSUBSCRIBE", "p*"], set()),
    "pttl": (["PTTL", "rk"], {"TTL"}),
    "publish": (["PUBLISH", "ch", "m"], set()),
    "pubsub": (["PUBSUB", "NUMPAT"], set()),
    "punsubscribe": (["PUNSUBSCRIBE"], set()),
    "quit": (["QUIT"], set()),
    "randomkey": (["RANDOMKEY"], {"SCAN"}),
    "rename": (["RENAME", "rk", "rk"], {"RENAME", "GET", "PUT", "DEL"}),
    "renamenx": (["RENAMENX", "rk", "rk"], {"RENAME", "GET", "PUT", "DEL"}),
    "replicaof": (["REPLICAOF", "NO", "ONE"], {"REPLICAOF"}),
    "role": (["ROLE"], set()),
    "save": (["SAVE"], set()),
    "scan": (["SCAN", "0"], {"SCAN"}),
    "select": (["SELECT", "0"], set()),
    "set": (["SET", "rk", "v"], {"PUT"}),
    "setbit": (["SETBIT", "rb", "1", "1"], {"SETBIT", "GET", "PUT"}),
    "setex": (["SETEX", "rk", "1000", "v"], {"PUT"}),
    "setnx": (["SETNX", "rk", "v"], {"PUT"}),
    "setrange": (["SETRANGE", "rk", "0", "v"], {"SETRANGE", "GET", "PUT"}),
    # an argument SHUTDOWN refuses: it must not stop the server when on
    "shutdown": (["SHUTDOWN", "BOGUS"], set()),
    "slaveof": (["SLAVEOF", "NO", "ONE"], {"REPLICAOF"}),
    "slowlog": (["SLOWLOG", "LEN"], set()),
    "strlen": (["STRLEN", "rk"], {"GET"}),
    "subscribe": (["SUBSCRIBE", "ch"], set()),
    "substr": (["SUBSTR", "rk", "0", "1"], {"GETRANGE", "GET"}),
    "time": (["TIME"], set()),
    "touch": (["TOUCH", "rk"], {"EXISTS"}),
    "ttl": (["TTL", "rk"], {"TTL"}),
    "type": (["TYPE", "rk"], {"EXISTS"}),
    "unlink": (["UNLINK", "rx"], {"DEL", "MDEL"}),
    "unsubscribe": (["UNSUBSCRIBE"], set()),
    "unwatch": (["UNWATCH"], set()),
    "wait": (["WAIT", "0", "0"], {"WAIT"}),
    "watch": (["WATCH", "rk"], set()),
}

# The operations a TXN may hold (protocol.md, TXN; the document
# operations are not among them: protocol.md, "Documents").
IN_TXN = {n for n, (_, kind) in OPS.items()
          if kind in "RW" and not n.startswith("DOC")} - {
    "SCAN", "COUNT", "FLUSHALL", "HSET", "HGET", "HGETALL", "HDEL", "HINCRBY",
    "HSCAN"}


def refused(reply):
    """A native reply of DISABLED for disable-commands (AUTH without a
    password answers DISABLED too, with a text of its own)."""
    return reply[0] == DISABLED and b"password" not in reply[1]


def native_refused(name, off):
    """Is native operation name refused with the names off disabled?"""
    return name in off or bool(EXPECT[name]["performs"] & off)


def resp_refused(cmd, off):
    """Is RESP command cmd refused with the names off disabled?"""
    return cmd.upper() in off or bool(RESP[cmd][1] & off)


# Commands that change what their connection may do next (or close it):
# each gets a connection of its own.
STATEFUL = {"monitor", "multi", "psubscribe", "quit", "subscribe"}


class DisableMatrix(unittest.TestCase):
    def resp_disabled(self, port, cmd, shared):
        """Send cmd's request: refused by disable-commands?"""
        c = Raw(port) if cmd in STATEFUL else shared
        try:
            reply = c.call(*RESP[cmd][0])
        finally:
            if c is not shared:
                c.close()
        return isinstance(reply, Error) and "disable-commands" in str(reply)

    def check(self, off):
        """A server with the names off disabled refuses what the table
        says, on both doors and inside TXN, and nothing else."""
        bdir = tempfile.mkdtemp(prefix="kvdtest-dm-")
        self.addCleanup(shutil.rmtree, bdir, True)
        with Server(threads=1, resp=True, durability="async",
                    args=["--disable-commands", ",".join(sorted(off)),
                          "--backup-dir", bdir]) as srv:
            c = srv.client()
            t = 0
            for name in sorted(OPS):
                t += 1
                n = len(EXPECT[name]["args"](b"x"))
                req = request(name, n, b"dm%d" % t)
                reply = c.call(*req)
                want = native_refused(name, off)
                self.assertEqual(refused(reply), want, (off, req, reply))
                if name in IN_TXN:
                    reply = c.call(TXN, None, list(req))
                    self.assertEqual(refused(reply), want or "TXN" in off,
                                     (off, req, reply))
            shared = Raw(srv.resp_port)
            for cmd in sorted(RESP):
                self.assertEqual(
                    self.resp_disabled(srv.resp_port, cmd, shared),
                    resp_refused(cmd, off), (off, cmd))
            shared.close()

    def test_tables_complete(self):
        with Server(threads=1, resp=True) as srv:
            names = Raw(srv.resp_port).call("COMMAND", "LIST")
        self.assertEqual(sorted(n.decode() for n in names), sorted(RESP),
                         "kvd's RESP commands and this test's RESP table "
                         "differ: give every command its row")
        self.assertEqual(sorted(EXPECT), sorted(OPS))
        for cmd, (_, ops) in RESP.items():
            self.assertLessEqual(ops, set(OPS), cmd)

    def test_each_native_name(self):
        """Each native operation name alone: PUT refuses every operation
        that stores a whole value (native RENAME, COPY, SETRANGE, SETBIT,
        BITOP, INCRBYFLOAT and a TXN holding one, as their RESP twins)."""
        for name in sorted(OPS):
            self.check({name})

    def test_resp_names(self):
        """RESP-only names refuse their command and nothing else."""
        only = sorted(n.upper() for n in RESP if n.upper() not in OPS)
        for half in (only[::2], only[1::2]):
            self.check(set(half))


if __name__ == "__main__":
    main()
