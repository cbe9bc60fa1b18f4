"""kvdtest.py - harness for integration tests: real kvd processes on loopback.

Server starts kvd (the binary named by $KVD_BIN) on a free port with its own
temporary data directory, waits until it accepts connections, and stops it
with SIGTERM (checking the exit status) or SIGKILL.  Client speaks the native
protocol with python3-msgpack, an implementation independent of kvd's own
codec, so the tests check the wire format as a third-party client sees it.
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

import msgpack

KVD_BIN = os.environ.get("KVD_BIN", "kvd")

# Opcodes (GET, PUT, ...), statuses (OK, BAD_ARGS, ...; the status EXISTS is
# EXISTS_ST) and flags (PUT_NX, ...), parsed from common/kv_proto.h and
# common/kv_status_list.h: the headers are the one copy of the table.
from kvproto import *  # noqa: F401,F403,E402


def build_sanitizer():
    """KVD_SANITIZE of the build under test ("", "address" or "thread"),
    read from $KVD_BUILD_DIR/CMakeCache.txt."""
    path = os.path.join(os.environ.get("KVD_BUILD_DIR", ""), "CMakeCache.txt")
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("KVD_SANITIZE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def skip_rss_bounds_under_tsan(test):
    """A test that bounds kvd's resident memory cannot run under
    ThreadSanitizer, whose shadow memory (several times every byte kvd
    touches) is counted in the same figures; it runs in the other builds."""
    if build_sanitizer() == "thread":
        test.skipTest("resident memory bounds do not hold with ThreadSanitizer's shadow")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One kvd process.  Keeps its data directory across restart()."""

    def __init__(self, threads=2, durability="sync", data_dir=None, args=(),
                 resp=False):
        self.owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kvdtest-")
        self.threads = threads
        self.durability = durability
        self.extra = list(args)
        self.resp = resp
        self.proc = None
        self.port = None
        self.resp_port = None
        self.log_path = os.path.join(tempfile.gettempdir(),
                                     "kvdtest-%d-%d.log" % (os.getpid(), id(self)))

    def argv(self):
        a = [KVD_BIN, "--bind", "127.0.0.1", "--port", str(self.port),
             "--data-dir", self.data_dir, "--threads", str(self.threads),
             "--durability", self.durability]
        if self.resp:
            a += ["--resp-port", str(self.resp_port)]
        return a + self.extra

    def start(self, timeout=15, port=None):
        """port: listen there (a restart that peers must find again)."""
        for _ in range(5):
            # none of the ports the test's own options name (two probes
            # of free_port may give one port)
            taken = {str(a) for a in self.extra}
            self.port = port or free_port()
            while not port and str(self.port) in taken:
                self.port = free_port()
            if self.resp:
                self.resp_port = free_port()
                while self.resp_port == self.port or \
                        str(self.resp_port) in taken:
                    self.resp_port = free_port()
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(self.argv(), stdout=self.log,
                                         stderr=subprocess.STDOUT)
            if self._wait_ready(timeout):
                return self
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if b"Address already in use" not in self.log_text():
                raise RuntimeError("kvd did not start:\n" + self.log_text().decode(errors="replace"))
            if port:  # the same port again: a client's may free it soon
                time.sleep(1)
        raise RuntimeError("kvd: no free port after 5 tries")

    def _wait_ready(self, timeout):
        # Every port a test may use: kvd opens its listeners one after
        # another, so the native one answering does not mean the RESP one
        # does yet (a loaded machine once showed the gap).
        ports = [self.port] + ([self.resp_port] if self.resp else [])
        # and those a test names itself (/metrics, the MongoDB door)
        for i, a in enumerate(self.extra[:-1]):
            if a in ("--metrics-port", "--mongo-port") and \
                    str(self.extra[i + 1]) != "0":
                ports.append(int(self.extra[i + 1]))
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                for port in ports:
                    with socket.create_connection(("127.0.0.1", port), 0.5):
                        pass
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()
        except OSError:
            return b""

    def stop(self, timeout=30):
        """SIGTERM; kvd must exit 0."""
        if not self.proc:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self.proc = None
        self.log.close()
        if rc != 0:
            raise AssertionError("kvd exited %d:\n%s" % (rc, self.log_text().decode(errors="replace")))
        return rc

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        self.log.close()

    def restart(self, **kw):
        if self.proc:
            self.stop()
        for k, v in kw.items():
            setattr(self, k, v)
        return self.start()

    def client(self, **kw):
        return Client(self.port, **kw)

    def settled(self, timeout=30):
        """Wait until every shard holds its two spare journal segments (the
        next one, and the one kept for deletes on a full disk): after a
        start, a helper thread writes them (its files and descriptors come
        and go meanwhile), which tests that count a process's descriptors
        or the files it creates wait out."""
        c = self.client()
        try:
            wait_for(lambda: all(s[b"journal_spares"] >= 2
                                 for s in c.call(STATS)[1][b"shards"]),
                     timeout, "two spare journal segments in every shard")
        finally:
            c.close()
        return self

    def cleanup(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if getattr(self, "log", None) and not self.log.closed:
            self.log.close()
        if self.owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        try:
            os.unlink(self.log_path)
        except OSError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


def http_exchange(port, request):
    """Send request to kvd's HTTP (metrics) port: the whole response, read
    until kvd closes the connection."""
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def http_get(port, path, auth=None):
    """GET path from kvd's HTTP (metrics) port, with an Authorization
    header if auth is given: (head, body) as text."""
    req = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
    if auth is not None:
        req += b"Authorization: " + auth + b"\r\n"
    head, _, body = http_exchange(port, req + b"\r\n").partition(b"\r\n\r\n")
    return head.decode(), body.decode()


def wait_for(cond, timeout=10, what="condition"):
    """cond()'s first true value, polled every 20 ms for timeout seconds
    (an AssertionError naming what after that)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def start_with(srv, **env):
    """Start srv with extra environment variables (the powerloss shim's,
    mostly), the test's own environment restored after."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        return srv.start()
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def shard_keys(c, n, prefix=b"sk", val=b"x"):
    """n keys (prefix + a number, stored with val) on each shard of a
    two-shard kvd, found through STATS' per-shard entry counts (kvd hashes
    keys with XXH3): {0: [...], 1: [...]}."""
    found, i = {0: [], 1: []}, 0
    while min(len(v) for v in found.values()) < n:
        k = prefix + b"%d" % i
        before = [s[b"entries"] for s in c.call(STATS)[1][b"shards"]]
        c.call(PUT, k, val)
        after = [s[b"entries"] for s in c.call(STATS)[1][b"shards"]]
        s = [j for j in (0, 1) if after[j] != before[j]][0]
        if len(found[s]) < n:
            found[s].append(k)
        i += 1
    return found


def frame(obj):
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


class Stream:
    """A blocking socket with an input buffer: what every protocol's test
    client shares (the native Client here, RESP's in tests/resp)."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def _fill(self, want=65536):
        chunk = self.sock.recv(max(65536, want))
        if not chunk:
            raise EOFError("connection closed by kvd")
        self.buf += chunk

    def _read(self, n):
        while len(self.buf) < n:
            self._fill(n - len(self.buf))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def closed_by_peer(self, timeout=5):
        """True once kvd has closed this connection (after any replies)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


class Client(Stream):
    """A blocking native-protocol client; replies are decoded lists."""

    def read_reply(self):
        (n,) = struct.unpack(">I", self._read(4))
        return msgpack.unpackb(self._read(n), raw=True, strict_map_key=False)

    def call(self, op, *args):
        self.send_raw(frame([op] + list(args)))
        return self.read_reply()

    def pipeline(self, reqs):
        self.send_raw(b"".join(frame(list(r)) for r in reqs))
        return [self.read_reply() for _ in reqs]


class ServerCase(unittest.TestCase):
    """Tests that share one kvd: SERVER holds Server's keyword arguments;
    each test gets a native client, self.c, on an emptied store."""

    SERVER = {"threads": 2}

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(**cls.SERVER).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def setUp(self):
        self.c = self.srv.client()
        self.assertEqual(self.c.call(FLUSHALL), [OK])

    def tearDown(self):
        self.c.close()

    def assert_doc_error(self, reply, code, text=None):
        """reply is [DOC_ERROR, text, code] (docs/protocol.md,
        "Documents"), its text holding text when given."""
        self.assertEqual(reply[0], DOC_ERROR, reply)
        self.assertEqual(len(reply), 3, reply)
        self.assertEqual(reply[2], code, reply)
        if text:
            self.assertIn(text, reply[1], reply)


def mongo_client(case, port):
    """A pymongo client of the MongoDB door on port, closed after case's
    test; without pymongo the test is skipped."""
    try:
        from pymongo import MongoClient
    except ImportError:
        case.skipTest("pymongo is not installed")
    m = MongoClient("127.0.0.1", port, directConnection=True,
                    serverSelectionTimeoutMS=5000)
    case.addCleanup(m.close)
    return m


def main():
    """unittest.main for every Python test: exit 1 if a test failed or none
    ran, 77 if one was skipped (ctest's SKIP_RETURN_CODE: listed as not
    run, never counted as passed), else 0.  A missing prerequisite is a
    skip (self.skipTest, unittest.SkipTest), never a sys.exit inside a test,
    which unittest would report as an error."""
    # Sockets left to the garbage collector in failure paths are not bugs.
    warnings.simplefilter("ignore", ResourceWarning)
    prog = unittest.main(verbosity=2, buffer=False, warnings="ignore", exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    if r.skipped:
        # (a skip in setUpClass counts once, for the whole class)
        for test, why in r.skipped:
            print("skipped: %s: %s" % (test.id(), why))
        print("%d skipped, %d run: scripts/deps.sh test installs what they need"
              % (len(r.skipped), r.testsRun))
        sys.exit(77)
    if r.testsRun == 0:
        print("no test ran", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
