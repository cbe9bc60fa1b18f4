"""test_cli.py - kvcli against a real kvd: every command in each output
style, exit codes, values from files and stdin, the prompt fed from stdin,
--help everywhere, and the failures a user meets (unreachable server, a
server that never answers, server errors)."""

import json
import os
import pty
import select
import socket
import subprocess
import tempfile
import time

from cliutil import KVCLI, CliCase
from kvdtest import main


class Cli(CliCase):
    SERVER = {"args": ["--backup-anywhere", "yes"]}

    # ---- every command, every style ----

    def test_put_get(self):
        self.styles(["put", "a", "hello"], b"OK\n", b"OK\n", b'"OK"\n',
                    b"status\r\nOK\r\n")
        self.styles(["get", "a"], b"hello", b'"hello"\n',
                    b'{"key":"a","value":"hello"}\n', b"key,value\r\na,hello\r\n")
        self.styles(["get", "zz"], b"", b"(nil)\n", b'{"key":"zz","value":null}\n',
                    b"key,value\r\nzz,\r\n", rc=1)
        self.ok("put", "q", 'say "hi", ok\n\x01')
        self.assertEqual(self.ok("--readable", "get", "q"),
                         b'"say \\"hi\\", ok\\n\\x01"\n')
        self.assertEqual(self.ok("--csv", "get", "q"),
                         b'key,value\r\nq,"say ""hi"", ok\n\x01"\r\n')
        self.assertEqual(json.loads(self.ok("--json", "get", "q")),
                         {"key": "q", "value": 'say "hi", ok\n\x01'})

    def test_put_options(self):
        self.assertEqual(self.run_cli("put", "--xx", "f", "1")[0], 1)
        self.ok("put", "--nx", "f", "1")
        rc, out, _ = self.run_cli("--readable", "put", "--nx", "f", "2")
        self.assertEqual((rc, out), (1, b"(exists)\n"))
        self.ok("put", "--xx", "f", "3")
        self.assertEqual(self.ok("get", "f"), b"3")
        self.ok("put", "--ttl", "100000", "t", "v")
        ttl = int(self.ok("ttl", "t"))
        self.assertTrue(90000 < ttl <= 100000, ttl)
        self.ok("put", "--keepttl", "t", "w")
        self.assertGreater(int(self.ok("ttl", "t")), 90000)
        self.ok("put", "--ttl=100", "gone", "v")
        time.sleep(0.3)
        self.assertEqual(self.run_cli("get", "gone")[0], 1)
        self.assertEqual(self.run_cli("put", "--nx", "--xx", "f", "4")[0], 2)

    def test_binary_values_from_stdin_and_file(self):
        blob = bytes(range(256)) * 40
        self.ok("-x", "put", "bin", input=blob)
        self.assertEqual(self.ok("get", "bin"), blob)
        path = os.path.join(self.srv.data_dir, "..", "kvcli-blob-%d" % os.getpid())
        with open(path, "wb") as f:
            f.write(blob[::-1])
        try:
            self.ok("put", "-f", path, "bin2")
            self.ok("append", "--file", path, "bin3")
        finally:
            os.unlink(path)
        self.assertEqual(self.ok("get", "bin2"), blob[::-1])
        self.assertEqual(self.ok("get", "bin3"), blob[::-1])
        self.assertEqual(self.ok("-x", "append", "bin3", input=b"\0"), b"10241\n")
        rec = json.loads(self.ok("--json", "get", "bin"))
        self.assertEqual(rec["key"], "bin")
        self.assertIn("value_b64", rec)
        self.ok("-x", "put", "empty", input=b"")
        self.assertEqual(self.run_cli("get", "empty")[:2], (0, b""))
        self.assertEqual(self.ok("--readable", "get", "empty"), b'""\n')

    def test_integers(self):
        self.styles(["incr", "n", "5"], b"5\n", b"(integer) 10\n", b"15\n",
                    b"value\r\n20\r\n")
        self.assertEqual(self.ok("decr", "n"), b"19\n")
        self.assertEqual(self.ok("decr", "n", "-1"), b"20\n")
        self.assertEqual(self.ok("incr", "n", "-30"), b"-10\n")
        self.assertEqual(self.ok("incr", "m"), b"1\n")
        self.ok("put", "s", "abc")
        rc, out, err = self.run_cli("incr", "s")
        self.assertEqual(rc, 2)
        self.assertIn(b"NOT_INTEGER", err)
        self.styles(["append", "s", "def"], b"6\n", b"(integer) 9\n", b"12\n",
                    b"length\r\n15\r\n")

    def test_del_getdel_expire_ttl(self):
        self.ok("put", "a", "1")
        self.styles(["ttl", "a"], b"-1\n", b"(integer) -1\n", b"-1\n",
                    b"ttl_ms\r\n-1\r\n")
        self.assertEqual(self.ok("expire", "a", "50000"), b"OK\n")
        self.assertGreater(int(self.ok("ttl", "a")), 40000)
        self.assertEqual(self.ok("expire", "a", "0"), b"OK\n")
        self.assertEqual(self.run_cli("expire", "zz", "10")[0], 1)
        self.assertEqual(self.run_cli("ttl", "zz")[0], 1)
        self.assertEqual(self.ok("getdel", "a"), b"1")
        self.assertEqual(self.run_cli("getdel", "a")[0], 1)
        self.ok("put", "a", "1")
        self.assertEqual(self.ok("del", "a"), b"OK\n")
        self.assertEqual(self.run_cli("del", "a")[:2], (1, b""))
        self.assertEqual(self.run_cli("--readable", "del", "a")[:2], (1, b"(nil)\n"))

    def test_multi(self):
        self.styles(["mput", "a", "1", "b", "2"], b"OK\n", b"OK\n", b'"OK"\n',
                    b"status\r\nOK\r\n")
        self.styles(["mget", "a", "zz", "b"], b"1\n\n2\n",
                    b'1) "1"\n2) (nil)\n3) "2"\n',
                    b'{"key":"a","value":"1"}\n{"key":"zz","value":null}\n'
                    b'{"key":"b","value":"2"}\n',
                    b"key,value\r\na,1\r\nzz,\r\nb,2\r\n")
        self.styles(["exists", "a", "b", "zz", "a"], b"3\n", b"(integer) 3\n",
                    b"3\n", b"count\r\n3\r\n")
        self.styles(["count"], b"2\n", b"(integer) 2\n", b"2\n", b"count\r\n2\r\n")
        self.assertEqual(self.ok("count", "a"), b"1\n")
        self.ok("mput", "--ttl", "100000", "c", "3")
        self.assertGreater(int(self.ok("ttl", "c")), 90000)
        self.assertEqual(self.ok("mdel", "a", "b", "zz"), b"2\n")
        self.assertEqual(self.ok("--csv", "mdel", "c"), b"deleted\r\n1\r\n")
        self.assertEqual(self.run_cli("mput", "a")[0], 2)
        self.assertEqual(self.run_cli("mput", "a", "1", "b")[0], 2)

    def test_scan(self):
        self.ok("mput", "user:1", "u1", "user:2", "u2", "user:3", "u3", "x", "y")
        self.styles(["scan", "user:"], b"user:1\tu1\nuser:2\tu2\nuser:3\tu3\n",
                    b'"user:1" => "u1"\n"user:2" => "u2"\n"user:3" => "u3"\n',
                    b'{"key":"user:1","value":"u1"}\n{"key":"user:2","value":"u2"}\n'
                    b'{"key":"user:3","value":"u3"}\n',
                    b"key,value\r\nuser:1,u1\r\nuser:2,u2\r\nuser:3,u3\r\n")
        self.styles(["scan", "-k", "--start", "user:2", "--end", "x"],
                    b"user:2\nuser:3\n", b'"user:2"\n"user:3"\n',
                    b'{"key":"user:2"}\n{"key":"user:3"}\n',
                    b"key\r\nuser:2\r\nuser:3\r\n")
        self.assertEqual(self.ok("scan", "-n", "2", "--batch", "1", "--keys-only"),
                         b"user:1\nuser:2\n")
        self.assertEqual(self.ok("scan", "nothing"), b"")
        self.assertEqual(self.run_cli("scan", "--batch", "20000")[0], 2)

    def test_scan_streams_many_keys(self):
        rows = "".join('{"key":"s%06d","value":"v%d"}\n' % (i, i) for i in range(30000))
        self.ok("load", "-", input=rows.encode())
        out = self.ok("scan", "s", "--batch", "777")
        lines = out.split(b"\n")[:-1]
        self.assertEqual(len(lines), 30000)
        self.assertEqual(lines[12345], b"s012345\tv12345")

    def test_stats_hello_ping(self):
        self.ok("put", "a", "1")
        raw = self.ok("stats")
        self.assertIn(b"\nops.PUT.calls\t", raw)
        self.assertIn(b"shards.0.entries\t", raw)
        self.assertTrue(raw.startswith(b"server\tkvd "))
        self.assertIn(b"\ncommits: ", self.ok("--readable", "stats"))
        st = json.loads(self.ok("--json", "stats"))
        self.assertGreaterEqual(st["ops"]["PUT"]["calls"], 1)
        self.assertEqual(len(st["shards"]), 2)
        self.assertTrue(self.ok("--csv", "stats").startswith(b"name,value\r\nserver,kvd "))
        hello = json.loads(self.ok("--json", "hello"))
        self.assertEqual(hello["proto"], 2)
        self.assertEqual(hello["max_key"], 511)
        self.assertIn(b"durability\tsync\n", self.ok("hello"))
        self.styles(["ping"], b"PONG\n", b'"PONG"\n', b'"PONG"\n',
                    b"reply\r\nPONG\r\n")
        self.styles(["ping", "hi there"], b"hi there\n", b'"hi there"\n',
                    b'"hi there"\n', b"reply\r\nhi there\r\n")

    def test_backup(self):
        self.ok("mput", "a", "1", "b", "2")
        target = self.srv.data_dir + "-clibackup"
        os.makedirs(target)
        try:
            self.assertEqual(self.ok("backup", target + "/raw"), b"2\n")
            self.assertEqual(self.ok("--csv", "backup", target + "/csv"),
                             b"keys\r\n2\r\n")
            rc, out, err = self.run_cli("backup", target + "/raw")
            self.assertEqual(rc, 2)
            self.assertIn(b"BAD_ARGS: backup directory must be absent or empty", err)
        finally:
            subprocess.run(["rm", "-rf", target])

    # ---- terminals ----

    def read_pty(self, fd, token, timeout=10):
        buf = b""
        deadline = time.time() + timeout
        while token not in buf:
            r, _, _ = select.select([fd], [], [], max(0, deadline - time.time()))
            self.assertTrue(r, (token, buf))
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        self.assertIn(token, buf)
        return buf

    def test_prompt_on_a_terminal(self):
        home = tempfile.mkdtemp(prefix="kvcli-home-")
        try:
            pid, fd = pty.fork()
            if pid == 0:
                os.environ.update(HOME=home, TERM="xterm")
                os.execv(KVCLI, [KVCLI, "-p", str(self.srv.port)])
            self.read_pty(fd, b"127.0.0.1:%d> " % self.srv.port)
            os.write(fd, b"put k 'a value'\r")
            self.read_pty(fd, b"OK")
            os.write(fd, b"get k\r")
            self.read_pty(fd, b'"a value"')  # readable on a terminal
            os.write(fd, b"get nothing\r")
            self.read_pty(fd, b"(nil)")
            os.write(fd, b"quit\r")
            _, status = os.waitpid(pid, 0)
            os.close(fd)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            with open(os.path.join(home, ".kvcli_history"), "rb") as f:
                self.assertIn(b"nothing", f.read())  # libedit's own encoding
        finally:
            subprocess.run(["rm", "-rf", home])

    def test_load_progress_on_a_terminal(self):
        master, slave = pty.openpty()
        rows = b"".join(b'{"key":"p%d","value":"v"}\n' % i for i in range(1000))
        path = os.path.join(os.path.dirname(self.srv.data_dir),
                            "kvcli-progress-%d.jsonl" % os.getpid())
        with open(path, "wb") as f:
            f.write(rows)
        try:
            p = subprocess.Popen([KVCLI, "-p", str(self.srv.port), "load", path],
                                 stdout=subprocess.PIPE, stderr=slave)
            os.close(slave)
            err = self.read_pty(master, b"1000 rows, 0 errors")
            out = p.communicate(timeout=30)[0]
        finally:
            os.unlink(path)
            os.close(master)
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"1000 rows, 0 errors", err)
        self.assertTrue(out.startswith(b"rows 1000, errors 0, seconds "), out)

    # ---- exit codes and failures ----

    def test_usage_errors(self):
        for args in (["get"], ["get", "a", "b"], ["put"], ["expire", "a"],
                     ["expire", "a", "x"], ["incr", "a", "1.5"], ["nosuch"],
                     ["get", "--bogus", "a"], ["mget"], ["scan", "-n"],
                     ["stats", "extra"], ["load", "a", "b"]):
            rc, out, err = self.run_cli(*args)
            self.assertEqual(rc, 2, (args, out, err))
            self.assertTrue(err.startswith(b"kvcli"), (args, err))
        rc, out, err = self.run_cli("-p", "0", "ping")
        self.assertEqual(rc, 2)
        rc, out, err = self.run_cli("--nosuch")
        self.assertEqual(rc, 2)

    def test_server_errors(self):
        rc, out, err = self.run_cli("put", "", "v")
        self.assertEqual(rc, 2)
        self.assertEqual(err, b"kvcli: put: BAD_ARGS: wrong number or type of arguments\n")
        rc, out, err = self.run_cli("get", "k" * 512)
        self.assertEqual((rc, err), (2, b"kvcli: get: KEY_TOO_LARGE: key too large\n"))
        rc, out, err = self.run_cli("auth", "pw")
        self.assertEqual(rc, 2)
        self.assertIn(b"DISABLED", err)

    def test_unreachable(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # A refused connection is the error itself: kvcli exits on its own
        # (run_cli bounds the wait) saying so, not after a reply timeout.
        rc, out, err = self.run_cli("get", "a", port=port)
        self.assertEqual(rc, 2)
        self.assertEqual(err.count(b"\n"), 1, err)
        self.assertIn(b"127.0.0.1:%d" % port, err)
        self.assertIn(b"refused", err)
        self.assertNotIn(b"no reply", err)
        rc, out, err = self.run_cli("-h", "no-such-host.invalid", "ping")
        self.assertEqual(rc, 2)
        self.assertIn(b"no-such-host.invalid:", err)

    def test_server_that_never_answers(self):
        # In this order: the request reaches the server, which holds the
        # connection open and answers nothing; kvcli gives up by itself
        # (its -t, quoted in the error), then closes its end.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            s.settimeout(30)
            p = subprocess.Popen([KVCLI, "-p", str(s.getsockname()[1]), "-t", "300",
                                  "ping"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            conn, _ = s.accept()
            with conn:
                conn.settimeout(30)
                got = b""
                while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
                    chunk = conn.recv(100)
                    self.assertTrue(chunk, "kvcli closed before a whole request")
                    got += chunk
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 2)
                self.assertIn(b"no reply within 300 ms", err)
                self.assertEqual(err.count(b"\n"), 1)
                try:  # kvcli closed its end: EOF (or a reset) within 30 s
                    while conn.recv(100):
                        pass
                except ConnectionResetError:
                    pass

    def test_garbled_reply(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            p = subprocess.Popen([KVCLI, "-p", str(s.getsockname()[1]), "get", "a"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            conn, _ = s.accept()
            conn.recv(100)
            conn.sendall(b"\0\0\0\3\x92\x00\x05")  # a GET answered with an int
            out, err = p.communicate(timeout=30)
            conn.close()
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"malformed reply to GET", err)

    def test_help(self):
        out = self.ok("--help")
        self.assertIn(b"Exit status: 0 success, 1 key not found, 2 error.", out)
        listed = [l.split()[0].decode() for l in out.split(b"Commands:\n")[1].splitlines()]
        self.assertIn("load", listed)
        self.assertIn("dump", listed)
        for cmd in listed:
            h = self.ok(cmd, "--help")
            self.assertTrue(h.startswith(b"usage: kvcli [OPTIONS] " + cmd.encode()), h)
            self.assertEqual(self.ok("help", cmd), h)
        self.assertIn(b"kvcli ", self.ok("--version"))
        self.assertIn(b"get", self.ok("help"))

    def test_prompt_from_stdin(self):
        script = (b'put greeting "hello\\tworld"\n'
                  b"get greeting\n"
                  b"\n"
                  b"get 'it''s'\n"
                  b"incr c 2\n"
                  b"nosuch\n"
                  b"quit\n"
                  b"ping\n")
        rc, out, err = self.run_cli("--raw", input=script)
        # One reply per line, escaped as dump --tsv does; a missing key is
        # (nil), a failed command (error); the exit status is the worst.
        self.assertEqual(out, b"OK\nhello\\tworld\n(nil)\n2\n(error) UNKNOWN_COMMAND\n")
        self.assertEqual(rc, 2)
        self.assertIn(b"unknown command 'nosuch'", err)
        rc, out, err = self.run_cli(input=b'get "unbalanced\n')
        self.assertIn(b"unbalanced quotes", err)


if __name__ == "__main__":
    main()
