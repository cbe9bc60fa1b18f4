"""test_arity.py - every command with every argument count, on both ports.

The command lists come from the source (kvd/resp/resp.h's RESP_COMMANDS rows,
common/kv_proto.h's KV_OP_LIST and the argument counts of cmd.c's ops[]
table), so a new command is covered without a change here.  Each command is
sent with 0 .. arity+2 arguments (variadic ones: minimum + 2), with
plausible values, to a kvd without a password and to one with
--requirepass, before and after AUTH.  Every request must get an answer (an
error or a valid reply; QUIT a clean close), the count checks must answer
Redis's own "wrong number of arguments" text (native: BAD_ARGS), and kvd
must still be alive and answer PING afterwards.

test_hello_without_argument_preauth is the regression test for HELLO with
no argument reading past its request (resp_hello started its argument walk
at 2 for a one-argument request): the reproducer that crashed a release
build with SIGBUS.
"""

import os
import re
import shutil
import socket
import sys
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403

SRC = os.environ.get("KVD_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "resp"))
from resputil import Error, Raw, encode  # noqa: E402

PW = "pw"


def read(rel):
    with open(os.path.join(SRC, rel)) as f:
        return f.read().replace("\\\n", " ")


def resp_commands():
    """[(name, arity)] from resp.h's X-macro rows."""
    # X(ID, "name", handler, [other columns,] arity, flags, ...): the
    # arity is the number just before the RC_ flags.
    rows = re.findall(r'X\(\s*\w+,\s*"([a-z]+)",\s*\w+,[^"]*?(-?\d+),\s*RC_',
                      read("kvd/resp/resp.h"))
    assert len(rows) > 30, "resp.h: command table not found"
    return [(n, int(a)) for n, a in rows]


def native_ops():
    """[(name, number, min, max or None)] from kv_proto.h and cmd.c."""
    ops = re.findall(r"X\((\w+),\s*(\d+),\s*[RWAT]\)", read("common/kv_proto.h"))
    # each row of cmd.c's ops[] ends with its argument counts: min, max
    rows = re.findall(r"^\s*\[KV_OP_(\w+)\]\s*=\s*\w*\s*[({]([^)}]*)[)}]",
                      read("kvd/native/cmd.c"), re.M)
    counts = dict((n, (int(lo), None if hi == "VAR" else int(hi))) for n, (lo, hi) in
                  ((n, [x.strip() for x in body.split(",")][-2:]) for n, body in rows))
    assert len(ops) > 15 and len(counts) == len(ops), "kv_proto.h/cmd.c tables"
    return [(n, int(num)) + counts[n] for n, num in ops]


# Plausible arguments, in order; counts past a template's end repeat keys.
RESP_ARGS = {
    "auth": ["default", PW], "hello": ["2", "AUTH", "default", PW, "SETNAME", "x"],
    "client": ["SETNAME", "conn", "x"], "command": ["INFO", "get", "set"],
    "config": ["GET", "max*", "port"], "echo": ["hi"], "info": ["server", "stats"],
    "keys": ["k*"], "scan": ["0", "MATCH", "k*", "COUNT", "10", "TYPE", "string"],
    "select": ["0"], "flushall": ["ASYNC"], "flushdb": ["SYNC"],
    "set": ["k", "v", "EX", "100", "NX", "GET"], "setex": ["k", "100", "v"],
    "psetex": ["k", "100000", "v"], "mset": ["k", "v", "k2", "v2"],
    "expire": ["k", "100", "NX"], "pexpire": ["k", "100000", "XX"],
    "expireat": ["k", "4000000000"], "pexpireat": ["k", "4000000000000"],
    "incrby": ["n", "5"], "decrby": ["n", "5"], "incr": ["n"], "decr": ["n"],
    "ping": ["hi"], "append": ["k", "v"], "getset": ["k", "v"], "setnx": ["k", "v"],
    # each a refusal: SHUTDOWN alone stops kvd (tests/resp/test_save.py)
    "shutdown": ["ABORT", "NOW", "FORCE"],
}


def resp_args(name, n):
    t = RESP_ARGS.get(name, ["k", "k2", "k3"])
    return (t + ["k%d" % i for i in range(n)])[:n]


def native_args(name, n, tmp):
    t = {
        "HELLO": [1], "PING": [b"hi"], "PUT": [b"k", b"v", 100000, 0],
        "MPUT": [0, b"k", b"v", b"k2", b"v2"], "SCAN": [None, b"a", b"z", 10, 1],
        "COUNT": [b"k"], "INCR": [b"n", 2], "APPEND": [b"k", b"v"],
        "EXPIRE": [b"k", 100000], "AUTH": [PW.encode()],
        "BACKUP": [tempfile.mkdtemp(dir=tmp) + "/b"],
    }.get(name, [b"k", b"k2", b"k3"])
    return (t + [b"k%d" % i for i in range(n)])[:n]


def arity_ok(arity, argc):
    """argc: the arguments after the name, as in Redis's table."""
    return argc + 1 == arity if arity > 0 else argc + 1 >= -arity


class Arity(unittest.TestCase):
    def resp_sweep(self, srv, password, authed):
        """Every RESP command, 0 .. arity+2 arguments, a connection each."""
        for name, arity in resp_commands():
            for argc in range(abs(arity) + 2):
                if name == "shutdown" and argc == 0:
                    continue  # it would stop the server under test
                args = resp_args(name, argc)
                what = "%s with %d argument(s), %s" % (
                    name, argc, "no password" if not password else
                    "after AUTH" if authed else "before AUTH")
                r = Raw(srv.resp_port)
                try:
                    if authed:
                        self.assertEqual(r.call("AUTH", PW), b"OK")
                    reply = r.call(name.upper(), *args)
                    if name == "quit":
                        self.assertEqual(reply, b"OK", what)
                        self.assertTrue(r.closed(), what)
                        continue
                    gated = password and not authed and name not in ("auth", "hello")
                    if gated:
                        self.assertIsInstance(reply, Error, what)
                        self.assertTrue(str(reply).startswith("NOAUTH"), what)
                    elif not arity_ok(arity, argc):
                        self.assertIsInstance(reply, Error, what)
                        # (as Redis 7.0: a refused EXEC also ends a
                        # transaction, and says so)
                        self.assertEqual(str(reply), (
                            "EXECABORT Transaction discarded because of: "
                            if name == "exec" else "ERR ")
                            + "wrong number of arguments "
                            "for '%s' command" % name, what)
                    if name == "multi" and reply == b"OK":
                        self.assertEqual(r.call("DISCARD"), b"OK", what)
                    # (P)(UN)SUBSCRIBE confirm each name apart; after a
                    # subscription PING answers as RESP2's subscribed context
                    pubsub = not gated and arity_ok(arity, argc) and name in (
                        "subscribe", "psubscribe", "unsubscribe", "punsubscribe")
                    for _ in range(argc - 1 if pubsub else 0):
                        self.assertIsInstance(r.reply(), list, what)
                    pong = ([b"pong", b""] if pubsub and name in ("subscribe", "psubscribe")
                            else b"PONG")
                    # Still in step: the next reply is the next request's.
                    r.send(encode("PING") if not gated else encode("HELLO", "3"))
                    nxt = r.reply()
                    if gated:
                        self.assertIsInstance(nxt, Error, what)
                        self.assertTrue(str(nxt).startswith("NOPROTO"), what)
                    elif not (isinstance(nxt, Error) and str(nxt).startswith("NOAUTH")):
                        self.assertEqual(nxt, pong, what)
                except (OSError, EOFError) as e:
                    raise AssertionError("%s: %r" % (what, e)) from e
                finally:
                    r.close()

    def native_sweep(self, srv, password, authed, tmp):
        for name, num, lo, hi in native_ops():
            top = (lo if hi is None else hi) + 2
            for argc in range(top + 1):
                what = "%s with %d argument(s), %s" % (
                    name, argc, "no password" if not password else
                    "after AUTH" if authed else "before AUTH")
                c = srv.client()
                try:
                    if authed:
                        self.assertEqual(c.call(AUTH, PW.encode()), [OK], what)
                    reply = c.call(num, *native_args(name, argc, tmp))
                    self.assertIsInstance(reply, list, what)
                    self.assertIsInstance(reply[0], int, what)
                    gated = password and not authed and name not in ("AUTH", "HELLO")
                    if gated:
                        self.assertEqual(reply[0], AUTH_REQUIRED, what)
                    elif argc < lo or (hi is not None and argc > hi):
                        self.assertEqual(reply[0], BAD_ARGS, what)
                    # Still in step: the next request gets its own answer.
                    nxt = c.call(HELLO, 1)
                    self.assertEqual(nxt[0], OK, what)
                    self.assertEqual(nxt[1][b"proto"], 2, what)
                except (OSError, EOFError) as e:
                    raise AssertionError("%s: %r" % (what, e)) from e
                finally:
                    c.close()

    def alive(self, srv, password):
        self.assertIsNone(srv.proc.poll(), "kvd died")
        r = Raw(srv.resp_port)
        if password:
            self.assertEqual(r.call("AUTH", PW), b"OK")
        self.assertEqual(r.call("PING"), b"PONG")
        r.close()
        c = srv.client()
        if password:
            self.assertEqual(c.call(AUTH, PW.encode()), [OK])
        self.assertEqual(c.call(PING), [OK])
        c.close()

    def test_every_count_no_password(self):
        tmp = tempfile.mkdtemp(prefix="kvd-arity-")
        try:
            with Server(threads=2, resp=True, args=["--resp-flushall", "yes"]) as srv:
                self.resp_sweep(srv, False, False)
                self.native_sweep(srv, False, False, tmp)
                self.alive(srv, False)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_every_count_password(self):
        tmp = tempfile.mkdtemp(prefix="kvd-arity-")
        try:
            with Server(threads=2, resp=True,
                        args=["--requirepass", PW, "--resp-flushall", "yes"]) as srv:
                for authed in (False, True):
                    self.resp_sweep(srv, True, authed)
                    self.native_sweep(srv, True, authed, tmp)
                self.alive(srv, True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_hello_without_argument_preauth(self):
        """160 connections leave 60,000 bytes of '7' each (no CR) in freed
        input buffers, then HELLO alone: kvd must answer NOAUTH and live."""
        with Server(threads=1, resp=True, args=["--requirepass", PW]) as srv:
            for _ in range(160):
                s = socket.create_connection(("127.0.0.1", srv.resp_port), 10)
                s.sendall(b"7" * 60000)
                s.close()
            for _ in range(3):
                r = Raw(srv.resp_port)
                r.send(b"*1\r\n$5\r\nHELLO\r\n")
                reply = r.reply()
                self.assertIsInstance(reply, Error)
                self.assertTrue(str(reply).startswith("NOAUTH HELLO must be called"),
                                str(reply))
                self.assertEqual(r.call("AUTH", PW), b"OK")
                hello = r.call("HELLO")
                self.assertEqual(hello[:2], [b"server", b"kvd"])
                self.assertEqual(r.call("PING"), b"PONG")
                r.close()
            self.assertIsNone(srv.proc.poll(), "kvd died")


if __name__ == "__main__":
    main()
