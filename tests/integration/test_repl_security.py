#!/usr/bin/env python3
"""test_repl_security.py - replication as a door into the server
(docs/security.md, "REPLICAOF"; docs/replication.md).

Real kvd processes on loopback, and small fakes of our own where a hostile
peer is the point: a "primary" that answers with text of its choosing or
records what it is sent, a "replica" that claims positions it never
received.  Each test names what it checks:

- a REPLICAOF host is an address or a host name: a newline cannot reach
  the config file (CONFIG REWRITE) or the log;
- REPLICAOF HOST PORT empties the store, so disable-commands FLUSHALL,
  read-only and allowed-primaries restrain it, and primary-password goes
  to trusted primaries only;
- a replica's acknowledgement counts only what was sent to it;
- whoever pulls the journal or a full copy is listed in INFO and CLIENT
  LIST.
"""

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import msgpack

from kvdtest import (BAD_ARGS, DISABLED, KVD_BIN, OK, READ_ONLY, REPLICAOF,
                     REPLPULL, REPLSNAP, REPLSYNC, Server, frame, main)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "resp"))
from resputil import Error, Raw  # noqa: E402
from replutil import info, put_many, wait_until  # noqa: E402

INJECT = "127.0.0.1 32249\nbackup-anywhere yes\nprotected-mode no\n#"


class Fake:
    """A listener on loopback that records every byte each connection
    sends; reply(data) -> bytes to answer each chunk with (or None)."""

    def __init__(self, reply=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.got = b""
        self.conns = 0
        self.reply = reply
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(2)
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                self.got += data
                if self.reply:
                    out = self.reply(data)
                    if out:
                        c.sendall(out)
        except OSError:
            pass
        c.close()

    def close(self):
        self.stop = True
        self.sock.close()


class Base(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.tmp = tempfile.mkdtemp(prefix="kvd-replsec-")

    def tearDown(self):
        for s in self.servers:
            s.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def server(self, *args, conf=None, start=True):
        a = ["--journal-segment-size", "1m"]
        if conf is not None:
            path = os.path.join(self.tmp, "kvd%d.conf" % len(self.servers))
            with open(path, "w") as f:
                f.write(conf)
            a = ["--config", path] + a
        s = Server(threads=2, resp=True, args=a + list(args))
        s.conf = conf is not None and path
        self.servers.append(s)
        return s.start() if start else s


class HostInjection(Base):
    def test_replicaof_host_cannot_reach_config_or_log(self):
        """A REPLICAOF host with newlines is refused on both protocols,
        so CONFIG REWRITE writes no option of its choosing and the log
        gets no line of its own; addresses and host names still pass."""
        s = self.server(conf="# kvd\nthreads 2\n")
        r = Raw(s.resp_port)
        e = r.call("REPLICAOF", INJECT, "1")
        self.assertIsInstance(e, Error)
        self.assertEqual(str(e), "ERR Invalid master host")
        e = r.call("SLAVEOF", "a b", "7379")
        self.assertIsInstance(e, Error)
        n = s.client()
        self.assertEqual(n.call(REPLICAOF, INJECT.encode(), 1)[0], BAD_ARGS)
        self.assertEqual(r.call("ROLE")[0], b"master")
        self.assertEqual(r.call("CONFIG", "REWRITE"), b"OK")
        with open(s.conf) as f:
            self.assertEqual(f.read(), "# kvd\nthreads 2\n")
        for line in s.log_text().splitlines():
            self.assertFalse(line.startswith((b"backup-anywhere",
                                              b"protected-mode")), line)
        # what a host may be
        for host in ("localhost", "::1", "kvd-1.example.org", "10.0.0.7"):
            self.assertEqual(r.call("REPLICAOF", host, "7379"), b"OK", host)
        self.assertEqual(r.call("REPLICAOF", "NO", "ONE"), b"OK")
        r.close()
        n.close()
        s.stop()

    def test_replicaof_option_checked_at_start(self):
        """replicaof in the file or on the command line is checked the
        same way, with a one-line reason."""
        for val in ("a b 7379", "127.0.0.1 0", "127.0.0.1 7379 native",
                    "x\ny 1", "127.0.0.1 7379 resp more"):
            p = subprocess.run([KVD_BIN, "--replicaof=" + val,
                                "--test-config"], capture_output=True,
                               timeout=20)
            self.assertEqual(p.returncode, 2, val)
            self.assertIn(b"replicaof", p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_primary_error_text_cannot_forge_log_lines(self):
        """The text a primary answers with is logged by its replica with
        its control characters escaped: one line, whatever it holds."""
        forged = "FORGED kvd ready: owned"
        body = msgpack.packb([BAD_ARGS, "no\n" + forged])
        fake = Fake(lambda data: struct.pack(">I", len(body)) + body)
        self.addCleanup(fake.close)
        s = self.server()
        n = s.client()
        self.assertEqual(n.call(REPLICAOF, b"127.0.0.1", fake.port), [OK])
        wait_until(lambda: b"FORGED" in s.log_text(), 20,
                   "the primary's answer in the log")
        for line in s.log_text().splitlines():
            self.assertFalse(line.startswith(b"FORGED"), line)
        self.assertIn(b"no\\x0aFORGED", s.log_text())
        n.close()
        s.stop()


class DangerousReplicaof(Base):
    def test_flushall_disabled_refuses_replicaof(self):
        """With disable-commands FLUSHALL,KEYS,BACKUP (docs/security.md's
        list), REPLICAOF pointed at an empty kvd cannot empty the store,
        on either protocol; allowed-primaries names the ones it may
        follow."""
        empty = self.server()
        s = self.server("--disable-commands", "FLUSHALL,KEYS,BACKUP")
        put_many(s, 0, 1000)
        r = Raw(s.resp_port)
        for cmd in ("REPLICAOF", "SLAVEOF"):
            e = r.call(cmd, "127.0.0.1", str(empty.resp_port))
            self.assertIsInstance(e, Error)
            self.assertIn("FLUSHALL is disabled", str(e))
        n = s.client()
        self.assertEqual(n.call(REPLICAOF, b"127.0.0.1", empty.port)[0],
                         DISABLED)
        time.sleep(1.5)   # a replica would have emptied itself by now
        self.assertEqual(r.call("DBSIZE"), 1000)
        self.assertEqual(r.call("ROLE")[0], b"master")
        # NO ONE stays: it empties nothing
        self.assertEqual(r.call("REPLICAOF", "NO", "ONE"), b"OK")
        r.close()
        n.close()
        s.stop()
        # named in allowed-primaries: followed; another: refused
        t = self.server("--disable-commands", "FLUSHALL",
                        "--allowed-primaries",
                        "localhost:1, 127.0.0.1:%d" % empty.resp_port)
        r = Raw(t.resp_port)
        e = r.call("REPLICAOF", "127.0.0.1", str(s.resp_port))
        self.assertIsInstance(e, Error)
        self.assertIn("not in allowed-primaries", str(e))
        self.assertEqual(r.call("REPLICAOF", "127.0.0.1",
                                str(empty.resp_port)), b"OK")
        wait_until(lambda: info(t)["master_link_status"] == "up", 20,
                   "the link")
        r.close()
        t.stop()
        empty.stop()

    def test_allowed_primaries_checked_at_start(self):
        for bad in ("a b:x", "host:0", "[::1", "x\ny"):
            p = subprocess.run([KVD_BIN, "--allowed-primaries", bad,
                                "--test-config"], capture_output=True,
                               timeout=20)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(b"allowed-primaries", p.stderr)
        p = subprocess.run([KVD_BIN, "--allowed-primaries",
                            "10.0.0.1:6379,[::1]:7380 kvd-2 ::1",
                            "--test-config"], capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_read_only_refuses_replicaof(self):
        """read-only yes refuses every write: REPLICAOF HOST PORT, which
        replaces the data, too."""
        p = self.server()
        s = self.server("--read-only", "yes")
        r = Raw(s.resp_port)
        e = r.call("REPLICAOF", "127.0.0.1", str(p.resp_port))
        self.assertIsInstance(e, Error)
        self.assertTrue(str(e).startswith("READONLY"), str(e))
        n = s.client()
        self.assertEqual(n.call(REPLICAOF, b"127.0.0.1", p.port)[0],
                         READ_ONLY)
        self.assertEqual(r.call("ROLE")[0], b"master")
        self.assertEqual(r.call("REPLICAOF", "NO", "ONE"), b"OK")
        r.close()
        n.close()
        s.stop()
        p.stop()

    def test_password_only_to_trusted_primaries(self):
        """primary-password goes to the primary replicaof named at start
        and to allowed-primaries, never to a host REPLICAOF names
        otherwise (on either port kind)."""
        fake = Fake()
        self.addCleanup(fake.close)
        s = self.server("--primary-password", "s3cret-pw")
        r = Raw(s.resp_port)
        self.assertEqual(r.call("REPLICAOF", "127.0.0.1", str(fake.port)),
                         b"OK")
        n = s.client()
        wait_until(lambda: fake.conns >= 1 and b"INFO" in fake.got, 20,
                   "the RESP connection")
        self.assertEqual(n.call(REPLICAOF, b"localhost", fake.port), [OK])
        wait_until(lambda: fake.conns >= 2, 20, "the native connection")
        time.sleep(0.5)
        self.assertNotIn(b"s3cret-pw", fake.got)
        self.assertIn(b"primary-password is not given", s.log_text())
        n.close()
        r.close()
        s.stop()
        # a primary with that password, named in allowed-primaries: the
        # link comes up (the password is given)
        p = self.server("--requirepass", "s3cret-pw")
        put_many_pw(p, "s3cret-pw", 50)
        t = self.server("--primary-password", "s3cret-pw",
                        "--allowed-primaries", "127.0.0.1:%d" % p.resp_port)
        r = Raw(t.resp_port)
        self.assertEqual(r.call("REPLICAOF", "127.0.0.1", str(p.resp_port)),
                         b"OK")
        wait_until(lambda: r.call("DBSIZE") == 50, 20, "the copy")
        r.close()
        t.stop()
        p.stop()


def put_many_pw(srv, pw, n):
    r = Raw(srv.resp_port)
    assert r.call("AUTH", pw) == b"OK"
    for i in range(n):
        assert r.call("SET", "k%d" % i, "v") == b"OK"
    r.close()


def le(*v):
    return struct.pack("<%dQ" % len(v), *v)


class FakeReplica(Base):
    def sync(self, s, pos=(1, 1)):
        """A native connection that says REPLSYNC as a new replica: its
        client, the replication id and the session."""
        c = s.client()
        rep = c.call(REPLSYNC, b"", 2, le(*pos), 1234, 1234)
        self.assertEqual(rep[0], OK, rep)
        return c, rep

    def test_claimed_positions_clamped(self):
        """A connection that takes a full copy and then claims, in
        REPLPULL, positions of 2^60 has received nothing past the cut:
        WAIT does not count it, min-replicas-to-ack does not take it for
        a replica that has the write, and INFO does not show it ahead."""
        p = self.server("--min-replicas-to-ack", "1",
                        "--min-replicas-max-lag", "2")
        c, rep = self.sync(p)
        self.assertEqual(rep[1], b"full")
        replid = rep[2]
        c.send_raw(frame([REPLPULL, replid, le(1 << 60, 1 << 60)]))
        wait_until(lambda: "state=online" in info(p).get("slave0", ""), 10,
                   "the fake to be online")
        r = Raw(p.resp_port)
        e = r.call("SET", "a", "1")
        self.assertIsInstance(e, Error)
        self.assertTrue(str(e).startswith("NOREPLICAS"), str(e))
        ip = info(p)
        off = int(ip["slave0"].split("offset=")[1].split(",")[0])
        self.assertLessEqual(off, int(ip["master_repl_offset"]))
        r.close()
        c.close()
        p.stop()

    def test_wait_counts_only_what_was_sent(self):
        q = self.server()
        put_many(q, 0, 10)
        c, rep = self.sync(q)
        c.send_raw(frame([REPLPULL, rep[2], le(1 << 60, 1 << 60)]))
        wait_until(lambda: "state=online" in info(q).get("slave0", ""), 10,
                   "the fake to be online")
        r = Raw(q.resp_port)
        self.assertEqual(r.call("SET", "b", "2"), b"OK")
        self.assertEqual(r.call("WAIT", "1", "300"), 0)
        r.close()
        c.close()
        q.stop()


class Visibility(Base):
    def test_full_copy_puller_listed(self):
        """Whoever pulls a full copy (REPLSYNC, REPLSNAP; here with no
        password, the loopback default) shows in INFO replication
        (state=send_bulk, then online) and in CLIENT LIST (flags=S)."""
        p = self.server()
        put_many(p, 0, 100)
        c, rep = self.sync(p)
        self.assertEqual(rep[1], b"full")
        got = c.call(REPLSNAP, rep[4], 0, b"")
        self.assertEqual(got[0], OK)
        ip = info(p)
        self.assertEqual(ip["connected_slaves"], "1")
        self.assertTrue(ip["slave0"].startswith(
            "ip=127.0.0.1,port=1234,state=send_bulk,"), ip["slave0"])
        r = Raw(p.resp_port)
        lines = r.call("CLIENT", "LIST", "TYPE", "replica").splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(b" flags=S ", lines[0])
        r.close()
        c.close()
        wait_until(lambda: info(p)["connected_slaves"] == "0", 10,
                   "the puller gone from INFO")
        p.stop()

    sync = FakeReplica.sync


if __name__ == "__main__":
    main()
