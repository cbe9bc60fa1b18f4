"""test_intro.py - RESP introspection and the read-only string commands
through real clients: CLIENT LIST/INFO/KILL across io threads, SLOWLOG and
its options (reloaded by SIGHUP), INFO memory/cpu/commandstats, MONITOR (its
format, lines from other io threads, and a monitor that does not read being
closed), WAIT, LATENCY DOCTOR, LCS's bound; redis-py's scan_iter, lcs,
bitcount, getrange, expiretime and object; redis-cli --stat, monitor, --scan
and --bigkeys.  Every wait is bounded.
"""

import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import redis

from kvdtest import Server, wait_for
from resputil import Error, Raw, cli, main, need, spread_conns


def client_list(conn):
    text = conn.call("CLIENT", "LIST")
    assert isinstance(text, bytes), text
    rows = []
    for line in text.decode().splitlines():
        rows.append(dict(f.split("=", 1) for f in line.split(" ")))
    return rows


class Intro(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvd-intro-")
        cls.conf = os.path.join(cls.tmp, "kvd.conf")
        with open(cls.conf, "w") as f:
            f.write("slowlog-log-slower-than 0\nslowlog-max-len 5\n")
        cls.srv = Server(threads=2, resp=True, args=["--config", cls.conf]).start()
        cls.port = cls.srv.resp_port

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.c = Raw(self.port)
        self.assertEqual(self.c.call("FLUSHALL"), b"OK")

    def tearDown(self):
        self.c.close()

    # ---- CLIENT ----

    def test_client_list_and_info(self):
        others, ids = spread_conns(self.port, 4)
        others[0].call("CLIENT", "SETNAME", "worker-0")
        others[1].call("GET", "k")
        rows = client_list(self.c)
        by_id = {int(r["id"]): r for r in rows}
        for i in ids + [self.c.call("CLIENT", "ID")]:
            self.assertIn(i, by_id)  # every io thread's connections
        for r in rows:
            for field in ("addr", "laddr", "fd", "name", "age", "idle", "flags",
                          "db", "sub", "psub", "ssub", "multi", "qbuf", "obl",
                          "omem", "cmd", "user", "resp"):
                self.assertIn(field, r)
            self.assertRegex(r["addr"], r"^127\.0\.0\.1:\d+$")
            self.assertEqual(r["laddr"], "127.0.0.1:%d" % self.port)
            self.assertEqual((r["flags"], r["db"], r["multi"]), ("N", "0", "-1"))
        self.assertEqual(by_id[ids[0]]["name"], "worker-0")
        self.assertEqual(by_id[ids[1]]["cmd"], "get")
        me = self.c.call("CLIENT", "INFO").decode()
        self.assertTrue(me.endswith("\n") and me.count("\n") == 1, me)
        self.assertIn("cmd=client|info", me)
        self.assertIn("id=%d " % self.c.call("CLIENT", "ID"), me)
        # filters, and Redis's errors
        self.assertEqual(len(client_list_ids(self.c, ids[2])), 1)
        self.assertEqual(self.c.call("CLIENT", "LIST", "TYPE", "pubsub"), b"")
        self.assertEqual(str(self.c.call("CLIENT", "LIST", "TYPE", "x")),
                         "ERR Unknown client type 'x'")
        self.assertEqual(str(self.c.call("CLIENT", "LIST", "ID", "x")),
                         "ERR Invalid client ID")
        for o in others:
            o.close()

    def test_client_list_buffers(self):
        """CLIENT LIST's buffer fields are a connection's real figures,
        read from another io thread: a partial request is its qbuf, a
        MULTI queue its multi-mem, replies it does not read its obl and
        omem; the caller's own argv-mem is its request's bytes, as in
        Redis (CLIENT LIST: 10)."""
        others, ids = spread_conns(self.port, 4)
        partial = b"*3\r\n$3\r\nSET\r\n$2\r\nqb\r\n$10\r\nhel"
        others[0].send(partial)
        others[1].call("MULTI")
        others[1].call("SET", "mm", "x" * 1000)
        self.c.call("SET", "big", "v" * (1 << 20))
        others[2].send(b"GET big\r\n" * 64)  # and never read

        def row(i):
            return {int(r["id"]): r for r in client_list(self.c)}[ids[i]]
        r = wait_for(lambda: row(0) if row(0)["qbuf"] != "0" else None,
                     what="qbuf of a partial request")
        self.assertEqual(int(r["qbuf"]), len(partial))
        self.assertGreater(int(r["qbuf-free"]), 0)
        self.assertGreaterEqual(int(r["tot-mem"]),
                                int(r["qbuf"]) + int(r["qbuf-free"]))
        r = row(1)
        self.assertGreater(int(r["multi-mem"]), 1000)
        self.assertGreaterEqual(int(r["tot-mem"]), int(r["multi-mem"]))
        r = wait_for(lambda: row(2) if int(row(2)["obl"]) > 0 else None,
                     what="obl of a client that does not read")
        self.assertGreaterEqual(int(r["omem"]), int(r["obl"]))
        self.assertEqual(row(3)["qbuf"], "0")  # idle
        self.assertEqual(row(3)["obl"], "0")
        mine = [r for r in client_list(self.c)
                if int(r["id"]) == self.c.call("CLIENT", "ID")][0]
        self.assertEqual(mine["argv-mem"], "10")
        others[1].call("DISCARD")
        for o in others:
            o.close()

    def test_client_kill(self):
        others, ids = spread_conns(self.port, 6)
        me = self.c.call("CLIENT", "ID")
        far = [o for o, i in zip(others, ids) if i >> 48 != me >> 48]
        near = [o for o, i in zip(others, ids) if i >> 48 == me >> 48]
        victims = far[:1] + near[:1]
        for v in victims:  # by ID, on this io thread and on the other
            vid = v.call("CLIENT", "ID")
            self.assertEqual(self.c.call("CLIENT", "KILL", "ID", vid), 1)
            # gone from the list at once, as in Redis, before its own io
            # thread has closed it
            self.assertNotIn(vid, [int(r["id"]) for r in client_list(self.c)])
            self.assertTrue(v.closed(timeout=10))
        rest = [o for o in others if o not in victims]
        addr = {int(r["id"]): r["addr"] for r in client_list(self.c)}
        # the old form
        v = rest.pop()
        self.assertEqual(self.c.call("CLIENT", "KILL", addr[v.call("CLIENT", "ID")]), b"OK")
        self.assertTrue(v.closed(timeout=10))
        self.assertEqual(str(self.c.call("CLIENT", "KILL", "1.2.3.4:5")), "ERR No such client")
        # ADDR, and USER default (every connection but this one: SKIPME yes)
        v = rest.pop()
        self.assertEqual(self.c.call("CLIENT", "KILL", "ADDR", addr[v.call("CLIENT", "ID")]), 1)
        self.assertTrue(v.closed(timeout=10))
        # the connections still open: one killed on another io thread may
        # still be listed until that thread closes it, and is not killed
        # twice
        n = len(rest)
        self.assertGreater(n, 0)
        self.assertEqual(self.c.call("CLIENT", "KILL", "USER", "default"), n)
        for v in rest:
            self.assertTrue(v.closed(timeout=10))
        self.assertEqual(self.c.call("PING"), b"PONG")
        for args, msg in [(("ID", "0"), "ERR client-id should be greater than 0"),
                          (("ID", "x"), "ERR client-id should be greater than 0"),
                          (("USER", "nobody"), "ERR No such user 'nobody'"),
                          (("SKIPME", "maybe"), "ERR syntax error"),
                          (("BOGUS", "1"), "ERR syntax error")]:
            self.assertEqual(str(self.c.call("CLIENT", "KILL", *args)), msg)
        # SKIPME no: this connection too, after its reply
        self.assertEqual(self.c.call("CLIENT", "KILL", "ID", me, "SKIPME", "no"), 1)
        self.assertTrue(self.c.closed(timeout=10))

    def test_client_no_evict_no_touch(self):
        for sub in ("NO-EVICT", "NO-TOUCH"):
            self.assertEqual(self.c.call("CLIENT", sub, "on"), b"OK")
            self.assertEqual(self.c.call("CLIENT", sub, "OFF"), b"OK")
            self.assertEqual(str(self.c.call("CLIENT", sub, "maybe")), "ERR syntax error")

    # ---- SLOWLOG, INFO ----

    def test_slowlog(self):
        self.assertEqual(self.c.call("SLOWLOG", "RESET"), b"OK")
        self.c.call("SET", "k", "v")
        self.c.call("ECHO", "x" * 200)
        self.c.call("MGET", *["k"] * 40)
        entries = self.c.call("SLOWLOG", "GET")
        # slowlog-log-slower-than 0 logs everything; newest first
        self.assertEqual(entries[0][3][0], b"MGET")
        self.assertEqual(len(entries[0][3]), 32)
        self.assertEqual(entries[0][3][31], b"... (10 more arguments)")  # 41 - 32 + 1
        self.assertEqual(entries[1][3], [b"ECHO", b"x" * 128 + b"... (72 more bytes)"])
        self.assertEqual(entries[2][3], [b"SET", b"k", b"v"])
        for e in entries:
            self.assertEqual(len(e), 6)
            self.assertTrue(isinstance(e[0], int) and isinstance(e[1], int)
                            and isinstance(e[2], int) and e[2] >= 0)
            self.assertRegex(e[4], rb"^127\.0\.0\.1:\d+$")
        self.assertGreater(entries[0][0], entries[1][0])
        self.assertEqual(len(self.c.call("SLOWLOG", "GET", 2)), 2)
        for _ in range(10):
            self.c.call("PING")
        self.assertEqual(self.c.call("SLOWLOG", "LEN"), 5)  # slowlog-max-len
        self.assertEqual(len(self.c.call("SLOWLOG", "GET", -1)), 5)
        self.assertEqual(str(self.c.call("SLOWLOG", "GET", -2)),
                         "ERR count should be greater than or equal to -1")
        # SIGHUP: slowlog-log-slower-than -1 logs nothing more
        with open(self.conf, "w") as f:
            f.write("slowlog-log-slower-than -1\nslowlog-max-len 5\n")
        self.srv.proc.send_signal(signal.SIGHUP)
        self.assertEqual(self.c.call("SLOWLOG", "RESET"), b"OK")
        wait_for(lambda: self.c.call("SLOWLOG", "RESET") == b"OK"
                 and self.c.call("SLOWLOG", "LEN") == 0, what="the reload")
        self.c.call("SET", "k", "v")
        self.assertEqual(self.c.call("SLOWLOG", "LEN"), 0)
        with open(self.conf, "w") as f:
            f.write("slowlog-log-slower-than 0\nslowlog-max-len 5\n")
        self.srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.c.call("SLOWLOG", "LEN") > 0, what="the reload")

    def test_info_sections(self):
        self.c.call("GET", "k")
        self.c.call("GET")  # rejected: arity
        self.c.call("BITPOS", "k", "2")  # failed
        info = self.c.call("INFO").decode()
        for head in ("# Server", "# Clients", "# Memory", "# Persistence",
                     "# Stats", "# CPU", "# Keyspace"):
            self.assertIn(head + "\r\n", info)
        self.assertNotIn("# Commandstats", info)  # not in the default set
        self.assertLess(info.index("# Clients"), info.index("# Memory"))
        self.assertLess(info.index("# Memory"), info.index("# Persistence"))
        mem = dict(l.split(":", 1) for l in info.split("\r\n") if ":" in l)
        self.assertGreater(int(mem["used_memory"]), 0)
        self.assertGreaterEqual(int(mem["used_memory_rss"]), int(mem["used_memory"]))
        self.assertEqual(mem["maxmemory"], "0")
        self.assertGreaterEqual(float(mem["used_cpu_user"]), 0)
        stats = self.c.call("INFO", "commandstats").decode()
        self.assertTrue(stats.startswith("# Commandstats\r\n"), stats)
        m = re.search(r"cmdstat_get:calls=(\d+),usec=(\d+),usec_per_call=([\d.]+),"
                      r"rejected_calls=(\d+),failed_calls=(\d+)", stats)
        self.assertTrue(m, stats)
        self.assertGreaterEqual(int(m.group(1)), 1)
        self.assertGreaterEqual(int(m.group(4)), 1)
        m = re.search(r"cmdstat_bitpos:calls=\d+,usec=\d+,usec_per_call=[\d.]+,"
                      r"rejected_calls=0,failed_calls=(\d+)", stats)
        self.assertGreaterEqual(int(m.group(1)), 1)
        self.assertIn("# Commandstats", self.c.call("INFO", "all").decode())
        self.assertEqual(self.c.call("INFO", "cpu").decode().count("# "), 1)

    # ---- MONITOR ----

    def test_monitor(self):
        mon = Raw(self.port)
        self.assertEqual(mon.call("MONITOR"), b"OK")
        others, _ = spread_conns(self.port, 4)  # on both io threads
        for i, o in enumerate(others):
            o.call("SET", "key%d" % i, 'a "b"\n\x01')
        o.call("AUTH", "secret")  # never shown
        lines = []
        while len(lines) < len(others):  # (CLIENT ID from spread_conns too)
            ln = mon.reply()
            if b'"SET"' in ln:
                lines.append(ln)
        seen = set()
        for ln in lines:
            # the arguments as sent, quoted and escaped as Redis does
            m = re.match(rb'^(\d+)\.(\d{6}) \[0 127\.0\.0\.1:\d+\] "SET" "key(\d)" '
                         rb'"a \\"b\\"\\n\\x01"$', ln)
            self.assertTrue(m, ln)
            self.assertLess(abs(int(m.group(1)) - time.time()), 60)
            seen.add(int(m.group(3)))
        self.assertEqual(seen, set(range(len(others))))
        others[0].call("INFO", "cpu")
        others[0].call("GET", "key0")
        # neither AUTH nor an admin command (INFO) was shown
        self.assertRegex(mon.reply(), rb'"GET" "key0"$')
        for o in others:
            o.close()
        mon.close()

    def test_monitor_that_does_not_read_is_closed(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"MONITOR\r\n")
        time.sleep(0.2)
        w = Raw(self.port)
        big = "v" * 60000
        closed = False
        deadline = time.time() + 60
        # ~80 KB per pipelined batch of monitor lines; the feed is held to
        # 1 MiB and the output to 4 MiB, so this ends well before 100 MiB
        for _ in range(2000):
            w.send(b"".join(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$60000\r\n"
                            + big.encode() + b"\r\n" for _ in range(10)))
            for _ in range(10):
                w.reply()
            if not any(int(r["id"]) and r["flags"] == "O" for r in client_list(w)):
                closed = True
                break
            self.assertLess(time.time(), deadline)
        self.assertTrue(closed, "a monitor that reads nothing was never closed")
        s.close()
        w.close()

    # ---- the others ----

    def test_wait_latency(self):
        self.assertEqual(self.c.call("WAIT", 0, 0), 0)
        self.assertEqual(self.c.call("WAIT", 1, 100), 0)
        self.assertEqual(str(self.c.call("WAIT", 1, -1)), "ERR timeout is negative")
        doc = self.c.call("LATENCY", "DOCTOR")
        self.assertIn(b"kvd does not monitor latency", doc)
        self.assertEqual(self.c.call("LATENCY", "LATEST"), [])
        self.assertEqual(self.c.call("LATENCY", "RESET"), 0)

    def test_lcs_bound(self):
        self.c.call("MSET", "a", "x" * 5000, "b", "y" * 4000)
        e = self.c.call("LCS", "a", "b")
        self.assertIsInstance(e, Error)
        self.assertIn("kvd's limit", str(e))
        self.c.call("MSET", "a", "ab" * 2000, "b", "ba" * 2000)
        self.assertEqual(self.c.call("LCS", "a", "b", "LEN"), 3999)
        # every range of an IDX reply, within max-output
        r = self.c.call("LCS", "a", "b", "IDX")
        self.assertEqual(r[0], b"matches")
        self.assertEqual(r[2:], [b"len", 3999])

    def test_command_rows(self):
        for name, arity, first, last in [("getrange", 4, 1, 1), ("lcs", -3, 1, 2),
                                         ("bitfield_ro", -2, 1, 1), ("touch", -2, 1, -1),
                                         ("object", -2, 2, 2), ("randomkey", 1, 0, 0),
                                         ("slowlog", -2, 0, 0), ("monitor", 1, 0, 0)]:
            row = self.c.call("COMMAND", "INFO", name)[0]
            self.assertEqual((row[0], row[1], row[3], row[4]),
                             (name.encode(), arity, first, last))
            docs = self.c.call("COMMAND", "DOCS", name)
            self.assertEqual(docs[0], name.encode())


def client_list_ids(conn, *ids):
    text = conn.call("CLIENT", "LIST", "ID", *ids)
    return text.decode().splitlines()


class Disabled(unittest.TestCase):
    def test_native_get_disables_readers(self):
        """disable-commands GET refuses the RESP commands that read values."""
        with Server(threads=1, resp=True, args=["--disable-commands", "GET"]) as srv:
            c = Raw(srv.resp_port)
            for cmd in (("GETRANGE", "k", 0, 1), ("BITCOUNT", "k"), ("LCS", "a", "b"),
                        ("OBJECT", "ENCODING", "k"), ("GETBIT", "k", 1)):
                self.assertIn("disabled", str(c.call(*cmd)))
            self.assertEqual(c.call("TOUCH", "k"), 0)
            c.close()


class SmallOutput(unittest.TestCase):
    def test_lcs_idx_held_to_max_output(self):
        with Server(threads=1, resp=True, args=["--max-output", "64k"]) as srv:
            c = Raw(srv.resp_port)
            # 2000 ranges of one byte: about 90 KB of IDX reply
            c.call("MSET", "a", "xa" * 2000, "b", "ya" * 2000)
            self.assertEqual(c.call("LCS", "a", "b", "LEN"), 2000)
            e = c.call("LCS", "a", "b", "IDX")
            self.assertEqual(str(e), "ERR reply would exceed max-output: use "
                             "MINMATCHLEN or LEN")
            r = c.call("LCS", "a", "b", "IDX", "MINMATCHLEN", 2)
            self.assertEqual(r, [b"matches", [], b"len", 2000])
            self.assertEqual(c.call("PING"), b"PONG")
            c.close()


class Clients(unittest.TestCase):
    """redis-py and redis-cli against kvd."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, resp=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def setUp(self):
        self.r = redis.Redis(port=self.srv.resp_port, socket_timeout=20)
        self.r.flushall()

    def test_redis_py(self):
        p = self.r.pipeline(transaction=False)
        for i in range(250):
            p.set("scan:%03d" % i, i)
        p.execute()
        self.assertEqual(sorted(self.r.scan_iter(match="scan:*", count=7)),
                         [b"scan:%03d" % i for i in range(250)])
        self.r.mset({"a": "ohmytext", "b": "mynewtext"})
        self.assertEqual(self.r.lcs("a", "b"), b"mytext")
        self.assertEqual(self.r.lcs("a", "b", len=True), 6)
        idx = self.r.lcs("a", "b", idx=True, minmatchlen=4, withmatchlen=True)
        self.assertEqual(idx, [b"matches", [[[4, 7], [5, 8], 4]], b"len", 6])
        self.r.set("bits", "foobar")
        self.assertEqual(self.r.bitcount("bits"), 26)
        self.assertEqual(self.r.bitcount("bits", 1, 1), 6)
        self.assertEqual(self.r.bitcount("bits", 5, 30, "BIT"), 17)
        self.assertEqual(self.r.getrange("bits", 0, 2), b"foo")
        self.assertEqual(self.r.getrange("bits", -3, -1), b"bar")
        self.assertEqual(self.r.expiretime("bits"), -1)
        self.assertEqual(self.r.expiretime("none"), -2)
        self.r.set("t", "v", exat=2000000000)
        self.assertEqual(self.r.expiretime("t"), 2000000000)
        self.assertEqual(self.r.pexpiretime("t"), 2000000000000)
        self.r.set("n", 12)
        self.r.set("long", "x" * 45)
        self.assertEqual(self.r.object("encoding", "n"), b"int")
        self.assertEqual(self.r.object("encoding", "bits"), b"embstr")
        self.assertEqual(self.r.object("encoding", "long"), b"raw")
        self.assertIsNone(self.r.object("encoding", "none"))
        self.assertEqual(self.r.getbit("bits", 1), 1)
        self.assertEqual(self.r.bitpos("bits", 0), 0)
        self.assertEqual(self.r.touch("n", "none", "n"), 2)
        self.assertIn(self.r.randomkey(), self.r.keys())

    def pty_run(self, args, seconds):
        """Run a tool on a terminal (it flushes its lines then) for a few
        seconds; its output."""
        master, slave = pty.openpty()
        p = subprocess.Popen(args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        out, deadline = b"", time.time() + seconds
        while time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
        p.terminate()
        p.wait(10)
        os.close(master)
        return out.decode(errors="replace")

    def test_cli_stat(self):
        need("redis-cli")
        self.r.mset({"k%d" % i: "v" for i in range(20)})
        out = self.pty_run(["redis-cli", "-p", str(self.srv.resp_port), "--stat",
                            "-i", "0.5"], 3)
        self.assertIn("keys", out)
        rows = [l.split() for l in out.splitlines() if re.match(r"^\d+ ", l)]
        self.assertGreaterEqual(len(rows), 2, out)
        for row in rows:
            self.assertEqual(row[0], "20")
            self.assertRegex(row[1], r"^[\d.]+[KMG]?B?$")  # used_memory, human
        self.assertNotIn("ERR", out)
        self.assertNotIn("rror", out)

    def test_cli_monitor(self):
        need("redis-cli")
        master, slave = pty.openpty()
        p = subprocess.Popen(["redis-cli", "-p", str(self.srv.resp_port), "monitor"],
                             stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        try:
            out = b""
            deadline = time.time() + 20
            while b"OK" not in out and time.time() < deadline:
                if select.select([master], [], [], 0.1)[0]:
                    out += os.read(master, 65536)
            for i in range(3):
                self.r.set("mon%d" % i, "v%d" % i)
            while out.count(b'"set"') < 3 and time.time() < deadline:
                if select.select([master], [], [], 0.1)[0]:
                    out += os.read(master, 65536)
            for i in range(3):
                self.assertIn(b'"SET" "mon%d" "v%d"' % (i, i), out)
        finally:
            p.terminate()
            p.wait(10)
            os.close(master)

    def test_cli_scan_bigkeys(self):
        need("redis-cli")
        self.r.mset({"big:%d" % i: "x" * i for i in range(1, 60)})
        rc, out, err = cli(self.srv.resp_port, "--scan", "--pattern", "big:*")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.split()), sorted(b"big:%d" % i for i in range(1, 60)))
        rc, out, err = cli(self.srv.resp_port, "--bigkeys")
        self.assertEqual(rc, 0, err)
        self.assertIn(b"Biggest string found", out)
        self.assertIn(b"big:59", out)
        self.assertIn(b"59 keys", out.replace(b"  ", b" "))
        self.assertNotIn(b"ERR", out + err)


if __name__ == "__main__":
    main()
