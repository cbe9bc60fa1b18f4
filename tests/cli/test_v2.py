"""test_v2.py - kvcli's commands for the native protocol's version 2
against a real kvd: rename, copy, getex, incrbyfloat, getrange, setrange,
setbit, getbit, bitcount, bitpos, bitop and txn, each one's output in the
four styles, its exit status, the refusals of bad input (exit status 2, a
message on stderr, nothing sent), and txn's batches: from arguments, from
stdin and from a file, with checks that hold and one that does not."""

import json
import os
import tempfile
import time

from cliutil import CliCase
from kvdtest import main


class V2(CliCase):
    def fails(self, args, rc, err_has):
        got = self.run_cli(*args)
        self.assertEqual(got[0], rc, (args, got))
        self.assertIn(err_has, got[2], args)
        return got

    def test_rename_copy(self):
        for flag, want in (("--raw", b"OK\n"), ("--readable", b"OK\n"),
                           ("--json", b'"OK"\n'), ("--csv", b"status\r\nOK\r\n")):
            self.ok("put", "--ttl", "100000", "b", "1")
            self.assertEqual(self.ok(flag, "rename", "b", "a"), want)
        self.assertEqual(self.run_cli("get", "b")[0], 1)
        self.assertGreater(int(self.ok("ttl", "a")), 90000)  # moved with it
        self.assertEqual(self.run_cli("rename", "zz", "b")[:2], (1, b""))
        self.assertEqual(self.run_cli("--readable", "rename", "zz", "b")[:2],
                         (1, b"(nil)\n"))
        self.ok("put", "c", "3")
        self.assertEqual(self.run_cli("--readable", "rename", "--nx", "a", "c")[:2],
                         (1, b"(exists)\n"))
        self.assertEqual(self.ok("get", "c"), b"3")
        self.styles(["copy", "--replace", "a", "n"], b"OK\n", b"OK\n", b'"OK"\n',
                    b"status\r\nOK\r\n")
        self.assertEqual(self.run_cli("--readable", "copy", "a", "c")[:2],
                         (1, b"(exists)\n"))
        self.ok("copy", "--replace", "a", "c")
        self.assertEqual(self.ok("mget", "a", "c", "n"), b"1\n1\n1\n")
        self.fails(["copy", "a", "a"], 2, b"kvcli: copy: BAD_ARGS")
        self.fails(["rename", "a"], 2, b"wrong number of arguments")
        self.fails(["rename", "--replace", "a", "b"], 2, b"unknown option --replace")

    def test_getex(self):
        self.ok("put", "k", "v")
        self.styles(["getex", "k"], b"v", b'"v"\n', b'{"key":"k","value":"v"}\n',
                    b"key,value\r\nk,v\r\n")
        self.assertEqual(self.ok("ttl", "k"), b"-1\n")
        self.assertEqual(self.ok("getex", "k", "--ttl", "50000"), b"v")
        self.assertTrue(40000 < int(self.ok("ttl", "k")) <= 50000)
        self.ok("getex", "k", "--persist")
        self.assertEqual(self.ok("ttl", "k"), b"-1\n")
        at = int(time.time() * 1000) + 60000
        self.ok("getex", "k", "--at", str(at))
        self.assertTrue(50000 < int(self.ok("ttl", "k")) <= 60000)
        self.assertEqual(self.ok("getex", "k", "--at", "1"), b"v")  # past: deleted
        self.assertEqual(self.run_cli("get", "k")[0], 1)
        self.styles(["getex", "k"], b"", b"(nil)\n", b'{"key":"k","value":null}\n',
                    b"key,value\r\nk,\r\n", rc=1)
        self.fails(["getex", "k", "--ttl", "1", "--persist"], 2, b"exclude each other")
        self.fails(["getex", "k", "--ttl", "0"], 2, b"--ttl must be 1 or more")
        self.fails(["getex", "k", "--at", "x"], 2, b"not a number")

    def test_incrbyfloat(self):
        self.styles(["incrbyfloat", "f", "1.5"], b"1.5\n", b'"3"\n', b"4.5\n",
                    b"value\r\n6\r\n")
        self.assertEqual(self.ok("incrbyfloat", "f", "-0.25"), b"5.75\n")
        self.assertEqual(self.ok("incrbyfloat", "f", "5.0e3"), b"5005.75\n")
        self.assertEqual(json.loads(self.ok("--json", "incrbyfloat", "f", "1")), 5006.75)
        self.ok("put", "s", "abc")
        self.fails(["incrbyfloat", "s", "1"], 2, b"kvcli: incrbyfloat: NOT_FLOAT")
        self.fails(["incrbyfloat", "f", "inf"], 2, b"BAD_ARGS")  # not a number at all
        self.fails(["incrbyfloat", "f"], 2, b"wrong number of arguments")

    def test_ranges(self):
        self.ok("put", "k", "hello")
        self.styles(["getrange", "k", "1", "3"], b"ell", b'"ell"\n',
                    b'{"key":"k","value":"ell"}\n', b"key,value\r\nk,ell\r\n")
        self.assertEqual(self.ok("getrange", "k", "-3", "-1"), b"llo")
        self.assertEqual(self.ok("getrange", "k", "0", "-1"), b"hello")
        self.assertEqual(self.run_cli("getrange", "zz", "0", "1")[:2], (1, b""))
        self.styles(["setrange", "k", "7", "XY"], b"9\n", b"(integer) 9\n",
                    b"9\n", b"length\r\n9\r\n")
        self.assertEqual(self.ok("get", "k"), b"hello\0\0XY")
        self.assertEqual(self.ok("-x", "setrange", "k", "0", input=b"J"), b"9\n")
        path = os.path.join(os.path.dirname(self.srv.data_dir),
                            "kvcli-v2-%d" % os.getpid())
        with open(path, "wb") as f:
            f.write(b"\xff\x00")
        try:
            self.assertEqual(self.ok("setrange", "k", "1", "-f", path), b"9\n")
        finally:
            os.unlink(path)
        self.assertEqual(self.ok("get", "k"), b"J\xff\0lo\0\0XY")
        self.fails(["getrange", "k", "0"], 2, b"wrong number of arguments")
        self.fails(["getrange", "k", "0", "x"], 2, b"end: not a 64-bit integer")
        self.fails(["setrange", "k", "-1", "a"], 2, b"offset: not a number")
        self.fails(["setrange", "k", "1"], 2, b"wrong number of arguments")

    def test_bits(self):
        self.styles(["setbit", "b", "7", "1"], b"0\n", b"(integer) 1\n", b"1\n",
                    b"bit\r\n1\r\n")
        self.assertEqual(self.ok("get", "b"), b"\x01")
        self.styles(["getbit", "b", "7"], b"1\n", b"(integer) 1\n", b"1\n",
                    b"bit\r\n1\r\n")
        self.assertEqual(self.ok("getbit", "b", "1000"), b"0\n")
        self.assertEqual(self.ok("getbit", "nokey", "0"), b"0\n")
        self.ok("put", "h", "hello")
        self.styles(["bitcount", "h"], b"21\n", b"(integer) 21\n", b"21\n",
                    b"count\r\n21\r\n")
        self.assertEqual(self.ok("bitcount", "h", "0", "0"), b"3\n")
        self.assertEqual(self.ok("bitcount", "h", "1", "6", "--bit"), b"3\n")  # 1101000
        self.styles(["bitpos", "b", "1"], b"7\n", b"(integer) 7\n", b"7\n",
                    b"position\r\n7\r\n")
        self.assertEqual(self.ok("bitpos", "h", "1", "1"), b"9\n")
        self.assertEqual(self.ok("bitpos", "h", "1", "2", "5", "--bit"), b"2\n")
        self.assertEqual(self.ok("bitpos", "b", "1", "-1", "--bit"), b"7\n")
        self.assertEqual(self.ok("bitpos", "nokey", "1"), b"-1\n")
        self.ok("put", "x", "\x0f\x0f")
        self.ok("put", "y", "\xff")  # UTF-8: c3 bf
        self.styles(["bitop", "and", "d", "x", "y"], b"2\n", b"(integer) 2\n",
                    b"2\n", b"length\r\n2\r\n")
        self.assertEqual(self.ok("get", "d"), b"\x03\x0f")
        self.assertEqual(self.ok("bitop", "OR", "d", "x", "y"), b"2\n")
        self.assertEqual(self.ok("get", "d"), b"\xcf\xbf")
        self.assertEqual(self.ok("bitop", "not", "d", "x"), b"2\n")
        self.assertEqual(self.ok("get", "d"), b"\xf0\xf0")
        self.assertEqual(self.ok("bitop", "xor", "d", "nokey"), b"0\n")
        self.assertEqual(self.run_cli("get", "d")[0], 1)  # empty: deleted
        self.fails(["setbit", "b", "0", "2"], 2, b"the bit must be 0 or 1")
        self.fails(["getbit", "b"], 2, b"wrong number of arguments")
        self.fails(["bitcount", "h", "0"], 2, b"give both START and END")
        self.fails(["bitcount", "h", "--bit"], 2, b"--bit needs a range")
        self.fails(["bitpos", "h", "x"], 2, b"the bit must be 0 or 1")
        self.fails(["bitop", "nand", "d", "x"], 2, b"and, or, xor or not")
        self.fails(["bitop", "not", "d", "x", "y"], 2, b"not takes one source")
        self.fails(["bitop", "and", "d"], 2, b"wrong number of arguments")

    def test_help_for_each(self):
        for cmd in ("rename", "copy", "getex", "incrbyfloat", "getrange",
                    "setrange", "setbit", "getbit", "bitcount", "bitpos",
                    "bitop", "txn"):
            h = self.ok(cmd, "--help")
            self.assertTrue(h.startswith(b"usage: kvcli [OPTIONS] " + cmd.encode()), h)
            self.assertEqual(self.ok("help", cmd), h)

    # ---- txn ----

    def test_txn_arguments_every_style(self):
        self.ok("put", "s", "text")
        cmds = ["put t 1", "incr t 5", "get t", "get nope", "mget t nope",
                "incr s", "del nope", "incrbyfloat t 0.5"]
        # each reply as the command alone prints it; incr s fails while
        # running without stopping the rest; the worst exit status
        self.styles(["txn"] + cmds,
                    b"OK\n6\n6\n(nil)\n6\n(nil)\n(error) NOT_INTEGER\n(nil)\n6.5\n",
                    b'OK\n(integer) 6\n"6"\n(nil)\n1) "6"\n2) (nil)\n'
                    b"(error) NOT_INTEGER\n(nil)\n\"6.5\"\n",
                    b'"OK"\n6\n{"key":"t","value":"6"}\n{"key":"nope","value":null}\n'
                    b'{"key":"t","value":"6"}\n{"key":"nope","value":null}\n'
                    b'{"error":"NOT_INTEGER"}\n{"status":"NOT_FOUND"}\n6.5\n',
                    b"status\r\nOK\r\nvalue\r\n6\r\nkey,value\r\nt,6\r\n"
                    b"key,value\r\nnope,\r\nkey,value\r\nt,6\r\nnope,\r\n"
                    b"error\r\nNOT_INTEGER\r\nstatus\r\nNOT_FOUND\r\nvalue\r\n6.5\r\n",
                    rc=2)
        rc, out, err = self.run_cli("txn", "incr s")
        self.assertIn(b"kvcli: txn: command 1 (incr): NOT_INTEGER", err)
        # a missing key is exit status 1, as alone
        self.assertEqual(self.run_cli("txn", "put a 1", "get zz")[:2], (1, b"OK\n(nil)\n"))
        self.assertEqual(self.ok("txn", "put t 1", "rename t u --nx", "getrange u 0 0",
                                 "setbit u 0 1", "bitcount u", "getex u --ttl 9000",
                                 "mput --ttl 5000 m1 a m2 b", "exists m1 m2 u",
                                 "mdel m1", "append u x", "expire u 0", "ttl u",
                                 "getdel u", "decr n 2", "copy m2 m3",
                                 "bitop or o m2 m3", "getbit o 1", "bitpos o 1",
                                 "setrange o 0 \"a\\x00b\"", "get o"),
                         b"OK\nOK\n1\n0\n4\n\xb1\nOK\n3\n1\n2\nOK\n-1\n\xb1x\n"
                         b"-2\nOK\n1\n1\n1\n3\na\\0b\n")

    def test_txn_from_stdin_and_file(self):
        script = b"put s1 a\n\nappend s1 'b c'\nget s1\nincr n\n"
        self.assertEqual(self.ok("txn", input=script), b"OK\n4\nab c\n1\n")
        path = os.path.join(os.path.dirname(self.srv.data_dir),
                            "kvcli-txn-%d" % os.getpid())
        with open(path, "wb") as f:
            f.write(b"getdel s1\r\nincr n\n")
        try:
            self.assertEqual(self.ok("--json", "txn", "-f", path),
                             b'{"key":"s1","value":"ab c"}\n2\n')
            self.fails(["txn", "-f", path, "get a"], 2, b"not both")
        finally:
            os.unlink(path)
        self.fails(["txn", "-f", path], 2, path.encode())
        self.fails(["txn"], 2, b"no commands")  # empty stdin
        # in batch mode a txn line takes its commands as arguments
        rc, out, err = self.run_cli(input=b"txn 'put q 1' 'get q'\nget q\ntxn\n")
        self.assertEqual((rc, out), (2, b"OK\n1\n1\n(error) ERR\n"))
        self.assertIn(b"give the commands as arguments", err)

    def test_txn_checks(self):
        self.ok("put", "bal", "10")
        self.assertEqual(self.ok("txn", "--if-equal", "bal", "10", "--if-absent", "lock",
                                 "put bal 5", "incr spent 5"), b"OK\n5\n")
        # the check no longer holds: nothing runs, exit status 1
        for flag, want in (("--raw", b""), ("--readable", b"(check failed)\n"),
                           ("--json", b"")):
            rc, out, err = self.run_cli(flag, "txn", "--if-equal", "bal", "10",
                                        "put bal 0", "incr spent 10")
            self.assertEqual((rc, out), (1, want), flag)
            self.assertIn(b"a check did not hold: nothing was run", err)
        self.ok("put", "lock", "x")
        self.assertEqual(self.run_cli("txn", "--if-absent", "lock", "put bal 0")[0], 1)
        self.assertEqual(self.ok("mget", "bal", "spent"), b"5\n5\n")
        # in batch mode, a failed check is its own line
        rc, out, _ = self.run_cli(input=b"txn --if-absent lock 'put bal 0'\nget bal\n")
        self.assertEqual((rc, out), (1, b"(check failed)\n5\n"))

    def test_txn_refusals_run_nothing(self):
        for args, err in ((["scan"], b"scan is not allowed in a transaction"),
                          (["nosuch a"], b"unknown command 'nosuch'"),
                          (["put x 1", "get"], b"kvcli get: wrong number of arguments"),
                          (["put x 1", "incr x y"], b"not a 64-bit integer"),
                          (["put x 1", "put 'a"], b"unbalanced quotes"),
                          (["--if-equal", "a"], b"--if-equal needs its arguments"),
                          (["--bogus", "get a"], b"unknown option --bogus"),
                          (["put x 1", "put '' v"], b"txn: BAD_ARGS: request 2")):
            self.fails(["txn"] + args, 2, err)
        self.assertEqual(self.run_cli("get", "x")[0], 1)


if __name__ == "__main__":
    main()
