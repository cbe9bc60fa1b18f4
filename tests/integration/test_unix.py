"""test_unix.py - kvd's Unix socket listeners (--unix-socket,
--resp-unix-socket, --unix-socket-perm): both protocols answer over them,
with the TCP listeners' password, max-clients and idle timeout; the file
gets the configured mode; a stale file (a kvd killed with SIGKILL) is
replaced, a socket something still listens on is not, nor a file that is
not a socket; the file is removed when kvd exits.
"""

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import unittest

import kvdtest
from kvdtest import Client, Server, frame  # noqa: F401
from kvproto import *  # noqa: F401,F403


class UnixClient(Client):
    """The native test client over a Unix socket."""

    def __init__(self, path, timeout=30):  # pylint: disable=super-init-not-called
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""


def resp_call(path, *args):
    """One RESP command over a Unix socket; the raw reply bytes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        req = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
        s.sendall(req)
        out = b""
        while not out.endswith(b"\r\n") or (out.startswith(b"$")
                                            and out.count(b"\r\n") < 2
                                            and not out.startswith(b"$-1")):
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
        return out


def served(connect, tries=50):
    """A connection kvd has accepted and answers (PING), not refused."""
    for _ in range(tries):
        c = connect()
        try:
            if c.call(PING)[0] == OK:
                return c
        except OSError:
            pass  # refused and closed before the PING was sent
        c.close()
        time.sleep(0.05)
    raise AssertionError("every connection refused")


class UnixSocketTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvdunix-")
        self.path = os.path.join(self.dir, "kvd.sock")
        self.rpath = os.path.join(self.dir, "resp.sock")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def server(self, *args, resp=False):
        srv = Server(args=["--unix-socket", self.path] + list(args), resp=resp)
        self.servers.append(srv)
        return srv

    def run_kvd(self, *args):
        """kvd that must refuse to start: its exit status and output."""
        data = os.path.join(self.dir, "data-refused")
        p = subprocess.run([kvdtest.KVD_BIN, "--port", "0", "--data-dir", data,
                            "--threads", "1"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30)
        return p.returncode, p.stdout

    def test_both_protocols(self):
        srv = self.server("--resp-unix-socket", self.rpath, resp=True).start()
        c = UnixClient(self.path)
        self.assertEqual(c.call(PUT, b"k", b"over unix"), [OK])
        self.assertEqual(c.call(GET, b"k"), [OK, b"over unix"])
        # the same store as TCP
        t = srv.client()
        self.assertEqual(t.call(GET, b"k"), [OK, b"over unix"])
        self.assertEqual(resp_call(self.rpath, b"SET", b"r", b"resp"), b"+OK\r\n")
        self.assertEqual(resp_call(self.rpath, b"GET", b"k"),
                         b"$9\r\nover unix\r\n")
        self.assertEqual(c.call(GET, b"r"), [OK, b"resp"])
        # many connections, each answered (they are spread over the io
        # threads that all accept on the one socket)
        many = [UnixClient(self.path) for _ in range(8)]
        for i, m in enumerate(many):
            self.assertEqual(m.call(PUT, b"m%d" % i, b"v"), [OK])
        for m in many:
            m.close()
        if shutil.which("redis-cli"):
            out = subprocess.run(["redis-cli", "-s", self.rpath, "GET", "r"],
                                 stdout=subprocess.PIPE, timeout=30).stdout
            self.assertEqual(out, b"resp\n")
        c.close()
        t.close()
        srv.stop()

    def test_connections_spread_over_io_threads(self):
        # One socket for all io threads: each accepts in turn.  A
        # connection's id carries its io thread in bits 48 and up
        # (loop.c, on_accept); CLIENT LIST shows the ids.
        srv = self.server("--resp-unix-socket", self.rpath, resp=True).start()
        conns, threads, out = [], set(), b""
        # An io thread's accept may be armed a little after the first
        # connections arrive (a loaded machine): connect until both have
        # taken one, 64 at the most.
        while threads != {0, 1} and len(conns) < 64:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(self.rpath)
            s.sendall(b"PING\r\n")
            self.assertEqual(s.recv(100), b"+PONG\r\n")
            conns.append(s)
            conns[0].sendall(b"CLIENT LIST\r\n")
            out = b""
            while out.count(b"\n") < len(conns) + 1:  # header, a line each
                out += conns[0].recv(65536)
            # this test's clients, not the harness's readiness probe over
            # TCP (still open on a slow, sanitized run)
            mine = b"addr=%s:0" % self.rpath.encode()
            ids = [int(ln.split()[0][3:]) for ln in out.split(b"\n")
                   if ln.startswith(b"id=") and mine in ln.split()]
            self.assertEqual(len(ids), len(conns), out)
            threads = {i >> 48 for i in ids}
        self.assertEqual(threads, {0, 1}, out)
        for s in conns:
            s.close()
        srv.stop()

    def test_resp_socket_needs_resp(self):
        rc, out = self.run_kvd("--resp-unix-socket", self.rpath)
        self.assertEqual(rc, 2, out)
        self.assertIn(b"resp-unix-socket needs the RESP listener", out)

    def test_permissions(self):
        srv = self.server().start()
        self.assertEqual(stat.S_IMODE(os.lstat(self.path).st_mode), 0o770)
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.path).st_mode))
        srv.stop()
        srv = self.server("--unix-socket-perm", "600").start()
        self.assertEqual(stat.S_IMODE(os.lstat(self.path).st_mode), 0o600)
        srv.stop()
        rc, out = self.run_kvd("--unix-socket", self.path,
                               "--unix-socket-perm", "0789")
        self.assertEqual(rc, 2, out)
        self.assertIn(b"not an octal mode", out)

    def test_password(self):
        srv = self.server("--requirepass", "sesame",
                          "--resp-unix-socket", self.rpath, resp=True).start()
        c = UnixClient(self.path)
        self.assertEqual(c.call(GET, b"k")[0], AUTH_REQUIRED)
        self.assertEqual(c.call(AUTH, b"wrong")[0], AUTH_FAILED)
        self.assertEqual(c.call(AUTH, b"sesame"), [OK])
        self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
        self.assertTrue(resp_call(self.rpath, b"GET", b"k").startswith(b"-NOAUTH"))
        c.close()
        srv.stop()

    def test_max_clients_and_idle_timeout(self):
        srv = self.server("--max-clients", "2", "--idle-timeout", "1").start()
        # (the harness's readiness probe counts until kvd sees it closed)
        a = served(srv.client)
        b = served(lambda: UnixClient(self.path))
        # the third connection, over either listener, is over the limit
        d = UnixClient(self.path)
        self.assertEqual(d.read_reply()[0], TOO_MANY_CONNS)
        self.assertTrue(d.closed_by_peer())
        # idle, the Unix connection is closed like a TCP one
        self.assertTrue(b.closed_by_peer(timeout=10))
        a.close()
        srv.stop()

    def test_stale_file_replaced(self):
        srv = self.server().start()
        srv.kill9()  # leaves the file behind
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.path).st_mode))
        srv.start()
        self.assertIn(b"removed a stale socket file", srv.log_text())
        c = UnixClient(self.path)
        self.assertEqual(c.call(PING)[0], OK)
        c.close()
        srv.stop()
        self.assertFalse(os.path.lexists(self.path))

    def test_in_use_refused(self):
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.bind(self.path)
        other.listen(64)
        try:
            rc, out = self.run_kvd("--unix-socket", self.path)
            self.assertNotEqual(rc, 0)
            self.assertIn(b"another process listens on it", out)
            # the other process's socket is still there, and still works
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(self.path)
        finally:
            other.close()
        # a second kvd on a running kvd's socket
        srv = self.server().start()
        rc, out = self.run_kvd("--unix-socket", self.path)
        self.assertNotEqual(rc, 0)
        self.assertIn(b"another process listens on it", out)
        c = UnixClient(self.path)
        self.assertEqual(c.call(PING)[0], OK)
        c.close()
        srv.stop()

    def test_not_a_socket_kept(self):
        with open(self.path, "w") as f:
            f.write("precious\n")
        rc, out = self.run_kvd("--unix-socket", self.path)
        self.assertNotEqual(rc, 0)
        self.assertIn(b"not a socket", out)
        with open(self.path) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_removed_on_exit(self):
        srv = self.server().start()
        self.assertTrue(os.path.lexists(self.path))
        srv.stop()
        self.assertFalse(os.path.lexists(self.path))


if __name__ == "__main__":
    kvdtest.main()
