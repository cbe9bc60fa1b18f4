"""TLS on kvd's listeners (kvd/net/tls.c): the native protocol and RESP over TLS
against Python's ssl module, redis-cli --tls and redis-py ssl=True; refused
handshakes (wrong CA, expired or missing client certificate, plain text on
a TLS port, TLS on a plain port) each with a clear error and the server
unaffected; unfinished handshakes closed by request-timeout; certificates
reloaded on SIGHUP under load; and the same bytes giving the same replies
over TLS as over the plain port.  Certificates are made at test time by
the openssl command (tlscerts.py)."""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import kvdtest
from kvdtest import (GET, OK, PUT, STATS, Client, Server, frame, free_port,
                     wait_for)
import tlscerts

CERTS = None
REDIS_CLI = shutil.which("redis-cli")
SOURCE = os.environ.get("KVD_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))


def setUpModule():
    global CERTS
    if not tlscerts.Certs.available():
        raise unittest.SkipTest("the openssl command is missing")
    CERTS = tlscerts.Certs()


def tearDownModule():
    if CERTS:
        CERTS.cleanup()


def client_ctx(ca=None, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca or CERTS.ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class TLSServer(Server):
    """kvd with the plain native and RESP ports and their TLS twins."""

    def __init__(self, tls_args=(), cert=None, key=None, **kw):
        kw.setdefault("resp", True)
        super().__init__(**kw)
        self.tls_args = list(tls_args)
        self.cert = cert or CERTS.server_cert
        self.key = key or CERTS.server_key

    def argv(self):
        return super().argv() + [
            "--tls-port", str(self.tls_port),
            "--tls-resp-port", str(self.tls_resp_port),
            "--tls-cert-file", self.cert, "--tls-key-file", self.key,
            "--tls-ca-cert-file", CERTS.ca] + self.tls_args

    def start(self, timeout=15):
        self.tls_port, self.tls_resp_port = free_port(), free_port()
        return super().start(timeout)

    def wait_log(self, text, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text.encode() in self.log_text():
                return True
            time.sleep(0.05)
        return False


class TLSPipe:
    """A TLS client over MemoryBIOs on a plain socket: it can send half a
    ClientHello, or close its sending side (TCP FIN) and still read every
    reply kvd sends before it closes."""

    def __init__(self, port, ctx=None, hostname="127.0.0.1"):
        self.sock = socket.create_connection(("127.0.0.1", port), 30)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        ctx = ctx or client_ctx(cert=CERTS.client_cert, key=CERTS.client_key)
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=hostname)

    def client_hello(self):
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.out.read()

    def handshake(self):
        while True:
            try:
                self.obj.do_handshake()
                self.sock.sendall(self.out.read())
                return
            except ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                data = self.sock.recv(65536)
                if not data:
                    raise EOFError("closed during the handshake")
                self.inc.write(data)

    def send(self, data):
        self.obj.write(data)
        self.sock.sendall(self.out.read())

    def finish(self):
        """Send FIN, then return every plaintext byte until kvd closes."""
        self.sock.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            data = self.sock.recv(65536)
            if data:
                self.inc.write(data)
            try:
                while True:
                    chunk = self.obj.read(65536)
                    if not chunk:  # kvd's close_notify
                        self.sock.close()
                        return got
                    got += chunk
            except ssl.SSLWantReadError:
                if not data:
                    raise EOFError("closed without close_notify")

    def close(self):
        self.sock.close()


def plain_finish(port, data):
    s = socket.create_connection(("127.0.0.1", port), 30)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            s.close()
            return got
        got += chunk


class TLSClient(Client):
    """The harness's native client over TLS."""

    def __init__(self, port, ctx=None, hostname="127.0.0.1"):
        self.buf = b""
        ctx = ctx or client_ctx(cert=CERTS.client_cert, key=CERTS.client_key)
        raw = socket.create_connection(("127.0.0.1", port), 30)
        self.sock = ctx.wrap_socket(raw, server_hostname=hostname)


def resp_cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Base(unittest.TestCase):
    SERVER_ARGS = dict(tls_args=["--request-timeout", "1"])

    @classmethod
    def setUpClass(cls):
        cls.srv = TLSServer(**cls.SERVER_ARGS).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def assert_serves(self):
        """Every listener still answers (after a refused peer)."""
        with self.srv.client() as c:
            self.assertEqual(c.call(PUT, b"alive", b"1"), [OK])
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(GET, b"alive"), [OK, b"1"])
        with TLSClient(self.srv.tls_resp_port) as c:
            c.send_raw(resp_cmd("GET", "alive"))
            self.assertEqual(c._read(7), b"$1\r\n1\r\n")


# Client (Stream) as a context manager, for the tests above.
kvdtest.Stream.__enter__ = lambda self: self
kvdtest.Stream.__exit__ = lambda self, *exc: self.close()


class Serving(Base):
    def test_native_over_tls(self):
        """PUT/GET frames over the native TLS port, the server's
        certificate checked for both 127.0.0.1 and localhost."""
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(PUT, b"k", b"v" * 100000), [OK])
            self.assertEqual(c.call(GET, b"k"), [OK, b"v" * 100000])
            reps = c.pipeline([(PUT, b"p%d" % i, b"%d" % i)
                               for i in range(200)])
            self.assertEqual(reps, [[OK]] * 200)
            cn = dict(x[0] for x in c.sock.getpeercert()["subject"])
            self.assertEqual(cn["commonName"], "127.0.0.1")
        with TLSClient(self.srv.tls_port, hostname="localhost") as c:
            self.assertEqual(c.call(GET, b"p7"), [OK, b"7"])

    def test_redis_py_ssl(self):
        try:
            import redis
        except ImportError:
            self.skipTest("python3-redis is missing")
        r = redis.Redis(host="127.0.0.1", port=self.srv.tls_resp_port,
                        ssl=True, ssl_ca_certs=CERTS.ca,
                        ssl_certfile=CERTS.client_cert,
                        ssl_keyfile=CERTS.client_key,
                        ssl_cert_reqs="required")
        big = os.urandom(3 << 20)  # many records each way
        self.assertTrue(r.set("big", big))
        self.assertEqual(r.get("big"), big)
        p = r.pipeline(transaction=False)
        for i in range(500):
            p.set("k%d" % i, i)
            p.incr("n")
        res = p.execute()
        self.assertEqual(res[-1], 500)
        self.assertEqual(r.get("k499"), b"499")
        r.close()

    def test_redis_cli_tls(self):
        if not REDIS_CLI:
            self.skipTest("redis-cli is missing")
        base = [REDIS_CLI, "-p", str(self.srv.tls_resp_port), "--tls",
                "--cacert", CERTS.ca, "--cert", CERTS.client_cert,
                "--key", CERTS.client_key]
        r = subprocess.run(base + ["SET", "cli", "hello"],
                           capture_output=True, text=True, timeout=30)
        if "Unrecognized option" in r.stderr or "--tls" in r.stderr:
            self.skipTest("redis-cli is built without TLS")
        self.assertEqual(r.stdout.strip(), "OK", r.stderr)
        r = subprocess.run(base + ["GET", "cli"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.stdout.strip(), "hello", r.stderr)
        # Without a client certificate (required): refused.
        r = subprocess.run(base[:6] + ["GET", "cli"], capture_output=True,
                           text=True, timeout=30)
        self.assertNotEqual(r.stdout.strip(), "hello")
        self.assertIn("closed", r.stdout + r.stderr)

    def test_handshake_done_then_idle_is_not_timed_out(self):
        """The handshake's request-timeout (1 s here) stops when it is
        done: a TLS connection idle after it stays open."""
        with TLSClient(self.srv.tls_port) as c:
            time.sleep(2.5)
            self.assertEqual(c.call(PUT, b"idle", b"ok"), [OK])

    def test_same_bytes_same_replies(self):
        """TLS hands the parser the bytes the plain port does: every RESP
        fuzz seed (tests/fuzz/corpus/resp), the dispatch fuzzer's seeds of
        both protocols and a native pipeline give byte-identical replies
        over TLS and plain."""
        corpus = os.path.join(SOURCE, "tests", "fuzz", "corpus", "resp")
        seeds = sorted(os.listdir(corpus))
        self.assertTrue(seeds)
        for name in seeds:
            with open(os.path.join(corpus, name), "rb") as f:
                data = f.read()[1:]  # byte 0 sets the fuzzer's mode
            data = resp_cmd("FLUSHALL") + data
            got_plain = plain_finish(self.srv.resp_port, data)
            t = TLSPipe(self.srv.tls_resp_port)
            t.handshake()
            # in pieces, so records split requests at odd places
            for i in range(0, len(data), 7):
                t.send(data[i:i + 7])
            got_tls = t.finish()
            self.assertEqual(got_tls, got_plain, name)
        self.dispatch_seeds()
        native = b"".join(frame(r) for r in [
            [PUT, b"a", b"1"], [GET, b"a"], [GET, b"missing"], [99],
            [PUT, b"b", b"x" * 70000], [GET, b"b"]])
        got_plain = plain_finish(self.srv.port, native)
        t = TLSPipe(self.srv.tls_port)
        t.handshake()
        t.send(native)
        self.assertEqual(t.finish(), got_plain)


    # Seeds whose replies carry a clock, counters, a connection id or an
    # address: they differ between any two connections.
    VARYING = ("stats", "hello", "info", "monitor", "time")

    def dispatch_seeds(self):
        """The dispatch fuzzer's seeds (tests/fuzz/corpus/dispatch) that run
        without a password, each on its protocol's plain and TLS ports."""
        corpus = os.path.join(SOURCE, "tests", "fuzz", "corpus", "dispatch")
        n = 0
        for name in sorted(os.listdir(corpus)):
            with open(os.path.join(corpus, name), "rb") as f:
                raw = f.read()
            # byte 0: bit 0 RESP, bit 2 no password (fuzz_dispatch.c)
            if not raw or not raw[0] & 4 or any(v in name for v in
                                                  self.VARYING):
                continue
            if raw[0] & 1:
                data = resp_cmd("FLUSHALL") + raw[1:]
                plain, tls = self.srv.resp_port, self.srv.tls_resp_port
            else:
                data = frame([kvdtest.FLUSHALL]) + raw[1:]
                plain, tls = self.srv.port, self.srv.tls_port
            got_plain = plain_finish(plain, data)
            t = TLSPipe(tls)
            t.handshake()
            t.send(data)
            self.assertEqual(t.finish(), got_plain, name)
            n += 1
        self.assertGreater(n, 50)


class Refused(Base):
    """A server each: failed handshakes are logged at most once a second
    (per io thread), so one test's line could hold back the next one's."""

    @classmethod
    def setUpClass(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        pass

    def setUp(self):
        self.srv = TLSServer(**self.SERVER_ARGS).start()

    def tearDown(self):
        self.srv.stop()
        self.srv.cleanup()

    def assert_logged(self, text):
        self.assertTrue(self.srv.wait_log(text), "no log line: " + text)

    def test_server_certificate_from_unknown_ca(self):
        # The client does not trust the server's CA: the client refuses,
        # and its alert is logged.
        with self.assertRaises(ssl.SSLCertVerificationError):
            TLSClient(self.srv.tls_port, ctx=client_ctx(ca=CERTS.ca2))
        self.assert_logged("alert unknown ca")
        self.assert_serves()

    def test_client_certificate_from_other_ca(self):
        # A client certificate from another CA: the server refuses.
        with self.assertRaises((ssl.SSLError, ConnectionError, EOFError)):
            c = TLSClient(self.srv.tls_port,
                          ctx=client_ctx(cert=CERTS.client2_cert,
                                         key=CERTS.client2_key))
            c.call(GET, b"alive")
        self.assert_logged("TLS handshake failed: "
                           "error:0A000086:SSL routines::certificate "
                           "verify failed")
        self.assert_serves()

    def test_expired_client_certificate(self):
        with self.assertRaises(ssl.SSLError) as e:
            c = TLSClient(self.srv.tls_port,
                          ctx=client_ctx(cert=CERTS.expired_cert,
                                         key=CERTS.expired_key))
            c.call(GET, b"alive")
        self.assertIn("EXPIRED", str(e.exception).upper())
        self.assert_serves()

    def test_no_client_certificate(self):
        with self.assertRaises((ssl.SSLError, ConnectionError, EOFError)):
            c = TLSClient(self.srv.tls_port, ctx=client_ctx())
            c.call(GET, b"alive")
        self.assert_logged("peer did not return a certificate")
        self.assert_serves()

    def test_plain_text_on_tls_ports(self):
        for port in (self.srv.tls_port, self.srv.tls_resp_port):
            got = plain_finish(port, resp_cmd("PING") + frame([GET, b"x"]))
            # At most a TLS alert record (type 21): never a reply.
            self.assertTrue(got == b"" or got[0] == 0x15, got)
            self.assertNotIn(b"PONG", got)
        self.assert_logged("wrong version number")
        self.assert_serves()

    def test_tls_on_plain_ports(self):
        for port in (self.srv.port, self.srv.resp_port):
            t = TLSPipe(port)
            t.sock.sendall(t.client_hello())
            t.sock.settimeout(10)
            self.assertEqual(t.sock.recv(100), b"")  # closed, unanswered
            t.close()
        self.assert_logged("a TLS handshake on a plain port")
        self.assert_serves()

    def test_slow_handshake_closed(self):
        """Nothing sent, or half a ClientHello: closed once
        request-timeout (1 s) has passed."""
        silent = socket.create_connection(("127.0.0.1", self.srv.tls_port))
        half = TLSPipe(self.srv.tls_resp_port)
        hello = half.client_hello()
        half.sock.sendall(hello[:len(hello) // 2])
        for s in (silent, half.sock):
            s.settimeout(15)
            self.assertEqual(s.recv(100), b"")
            s.close()
        self.assert_logged("request-timeout (TLS handshake left unfinished)")
        self.assert_serves()

    def test_expired_server_certificate_refused_at_start(self):
        r = subprocess.run(
            [kvdtest.KVD_BIN, "--test-config", "--data-dir",
             self.srv.data_dir, "--tls-port", "1", "--tls-cert-file",
             CERTS.expired_cert, "--tls-key-file", CERTS.expired_key,
             "--tls-auth-clients", "no"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("has expired", r.stderr)


class Optional(Base):
    SERVER_ARGS = dict(tls_args=["--tls-auth-clients", "optional"])

    def test_optional_client_certificate(self):
        with TLSClient(self.srv.tls_port, ctx=client_ctx()) as c:
            self.assertEqual(c.call(PUT, b"anon", b"1"), [OK])
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(GET, b"anon"), [OK, b"1"])
        with self.assertRaises((ssl.SSLError, ConnectionError, EOFError)):
            c = TLSClient(self.srv.tls_port,
                          ctx=client_ctx(cert=CERTS.client2_cert,
                                         key=CERTS.client2_key))
            c.call(GET, b"anon")
        self.assert_serves()


class CADirAndProtocols(Base):
    """tls-ca-cert-dir instead of a CA file; tls-protocols TLSv1.3 only;
    tls-ciphersuites one suite."""

    @classmethod
    def setUpClass(cls):
        cls.srv = TLSServer(tls_args=[
            "--tls-ca-cert-file", "", "--tls-ca-cert-dir", CERTS.ca_dir,
            "--tls-protocols", "TLSv1.3",
            "--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"]).start()

    def test_ca_dir(self):
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(PUT, b"dir", b"1"), [OK])
            self.assertEqual(c.sock.version(), "TLSv1.3")
            self.assertEqual(c.sock.cipher()[0],
                             "TLS_CHACHA20_POLY1305_SHA256")
        with self.assertRaises((ssl.SSLError, ConnectionError, EOFError)):
            c = TLSClient(self.srv.tls_port,
                          ctx=client_ctx(cert=CERTS.client2_cert,
                                         key=CERTS.client2_key))
            c.call(GET, b"dir")
        self.assert_serves()

    def test_tls12_refused(self):
        ctx = client_ctx(cert=CERTS.client_cert, key=CERTS.client_key)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with self.assertRaises(ssl.SSLError):
            TLSClient(self.srv.tls_port, ctx=ctx)
        self.assert_serves()

    def test_bad_protocol_name_refused_at_start(self):
        r = subprocess.run(
            [kvdtest.KVD_BIN, "--test-config", "--data-dir",
             self.srv.data_dir, "--tls-port", "1", "--tls-cert-file",
             CERTS.server_cert, "--tls-key-file", CERTS.server_key,
             "--tls-auth-clients", "no", "--tls-protocols", "SSLv3"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("tls-protocols: 'SSLv3' is not TLSv1.2 or TLSv1.3",
                      r.stderr)


class Password(Base):
    """requirepass applies over TLS as over a plain port: a client
    certificate is not a password."""
    SERVER_ARGS = dict(tls_args=["--requirepass", "sesame"])

    def test_password_over_tls(self):
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(GET, b"k")[0], kvdtest.AUTH_REQUIRED)
            self.assertEqual(c.call(kvdtest.AUTH, b"sesame"), [OK])
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
        with TLSClient(self.srv.tls_resp_port) as c:
            c.send_raw(resp_cmd("GET", "k"))
            while b"\r\n" not in c.buf:
                c._fill()
            self.assertTrue(c.buf.startswith(b"-NOAUTH"), c.buf)
            c.buf = c.buf[c.buf.index(b"\r\n") + 2:]
            c.send_raw(resp_cmd("AUTH", "sesame") + resp_cmd("GET", "k"))
            self.assertEqual(c._read(12), b"+OK\r\n$1\r\nv\r\n")


class Handshakes(unittest.TestCase):
    """At most tls-max-handshakes TLS handshakes in flight per io thread
    (kvd/net/loop.c): 32 connections that send no ClientHello each hold a
    slot once accepted, so each io thread stops at the bound and leaves
    the rest in its accept backlog; the plain ports answer meanwhile; STATS
    and INFO count the handshakes in flight, never above the bound; once
    the silent ones close, a real TLS client that waited is served."""

    BOUND = 2

    def test_handshakes_bounded(self):
        srv = TLSServer(threads=2, tls_args=[
            "--tls-max-handshakes", str(self.BOUND)]).start()
        silent = []
        try:
            c = srv.client()
            for port in (srv.tls_port, srv.tls_resp_port):
                silent += [socket.create_connection(("127.0.0.1", port), 30)
                           for _ in range(16)]

            def stats():
                return c.call(STATS)[1]
            # both io threads at the bound (each took some of the 32)
            wait_for(lambda: stats()[b"tls_handshakes"] == 2 * self.BOUND,
                     what="both io threads at the handshake bound")
            st = stats()
            self.assertEqual(st[b"tls_handshakes_peak"], self.BOUND)
            self.assertGreaterEqual(st[b"tls_handshake_pauses"], 2)
            # the plain ports still answer
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
            r = socket.create_connection(("127.0.0.1", srv.resp_port), 30)
            r.sendall(resp_cmd("INFO", "clients"))
            info = b""
            while b"kvd_tls_handshake_pauses:" not in info:
                info += r.recv(65536)
            self.assertIn(b"kvd_tls_handshakes:%d\r\n" % (2 * self.BOUND),
                          info)
            self.assertIn(b"kvd_tls_handshakes_peak:%d\r\n" % self.BOUND,
                          info)
            r.close()
            # a TLS client behind them is served once they close
            done = []

            def tls_get():
                with TLSClient(srv.tls_port) as t:
                    done.append(t.call(GET, b"k"))
            th = threading.Thread(target=tls_get)
            th.start()
            for s in silent:
                s.close()
            th.join(60)
            self.assertEqual(done, [[OK, b"v"]])
            wait_for(lambda: stats()[b"tls_handshakes"] == 0,
                     what="every handshake slot given back")
            self.assertEqual(stats()[b"tls_handshakes_peak"], self.BOUND)
            c.close()
        finally:
            for s in silent:
                s.close()
            srv.stop()
            srv.cleanup()


class Reload(unittest.TestCase):
    """SIGHUP reloads the certificate files for new connections, under
    load, without failing a request; a bad new certificate keeps the
    old one."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvdtls-reload-")
        self.cert = os.path.join(self.dir, "server.crt")
        self.key = os.path.join(self.dir, "server.key")
        shutil.copy(CERTS.server_cert, self.cert)
        shutil.copy(CERTS.server_key, self.key)
        self.srv = TLSServer(cert=self.cert, key=self.key).start()

    def tearDown(self):
        self.srv.stop()
        self.srv.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def peer_der(self):
        with TLSClient(self.srv.tls_port) as c:
            self.assertEqual(c.call(GET, b"nothing")[0], kvdtest.NOT_FOUND)
            return c.sock.getpeercert(binary_form=True)

    @staticmethod
    def der_of(path):
        with open(path) as f:
            return ssl.PEM_cert_to_DER_cert(f.read())

    def replace(self, cert, key):
        # New files moved into place, as a certificate tool does.
        for src, dst in ((cert, self.cert), (key, self.key)):
            shutil.copy(src, dst + ".new")
            os.rename(dst + ".new", dst)

    def test_reload_under_load(self):
        new_cert, new_key = CERTS.make_server_cert("renewed")
        stop = threading.Event()
        errors, done = [], [0]

        def load(new_conns):
            try:
                c = TLSClient(self.srv.tls_port)
                i = 0
                while not stop.is_set():
                    if new_conns and i % 20 == 0:
                        c.close()
                        c = TLSClient(self.srv.tls_port)
                    # keys of this thread's own: the other one writes too
                    k = b"k%d-%d" % (new_conns, i % 50)
                    if c.call(PUT, k, b"%d" % i) != [OK]:
                        errors.append("put %d" % i)
                    if c.call(GET, k) != [OK, b"%d" % i]:
                        errors.append("get %d" % i)
                    i += 1
                    done[0] += 1
                c.close()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=load, args=(n,))
                   for n in (False, True)]
        for t in threads:
            t.start()
        self.assertEqual(self.peer_der(), self.der_of(CERTS.server_cert))
        before = done[0]
        self.replace(new_cert, new_key)
        self.srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.srv.wait_log("TLS certificates reloaded"))
        self.assertEqual(self.peer_der(), self.der_of(new_cert))
        # The load went on across the reload.
        deadline = time.time() + 20
        while done[0] < before + 200 and time.time() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertGreaterEqual(done[0], before + 200)

        # A bad certificate (a key of another certificate) keeps the one
        # in use, and says why.
        self.replace(new_cert, CERTS.server2_key)
        self.srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.srv.wait_log(
            "TLS certificates not reloaded, the old ones stay in use: "
            "tls-key-file %s: " % self.key))
        self.assertTrue(self.srv.wait_log("key values mismatch"))
        self.assertEqual(self.peer_der(), self.der_of(new_cert))
        # Garbage in the certificate file: the same.
        with open(self.cert, "w") as f:
            f.write("not a certificate\n")
        self.srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.srv.wait_log("tls-cert-file %s: " % self.cert))
        self.assertEqual(self.peer_der(), self.der_of(new_cert))


class ReloadOptions(unittest.TestCase):
    def test_reload_auth_clients(self):
        """tls-auth-clients changed in the config file applies on SIGHUP
        to new connections."""
        d = tempfile.mkdtemp(prefix="kvdtls-conf-")
        conf = os.path.join(d, "kvd.conf")
        with open(conf, "w") as f:
            f.write("tls-auth-clients yes\n")
        srv = TLSServer(args=["--config", conf]).start()
        try:
            with self.assertRaises((ssl.SSLError, ConnectionError, EOFError)):
                c = TLSClient(srv.tls_port, ctx=client_ctx())
                c.call(GET, b"k")
            with open(conf, "w") as f:
                f.write("tls-auth-clients no\n")
            srv.proc.send_signal(signal.SIGHUP)
            self.assertTrue(srv.wait_log("TLS certificates reloaded"))
            self.assertIn(b"SIGHUP: tls-auth-clients changed", srv.log_text())
            with TLSClient(srv.tls_port, ctx=client_ctx()) as c:
                self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
        finally:
            srv.stop()
            srv.cleanup()
            shutil.rmtree(d, ignore_errors=True)


class Listeners(unittest.TestCase):
    def test_port_0_turns_the_plain_port_off(self):
        """With tls-port, --port 0 leaves only the TLS listener."""
        srv = TLSServer(resp=False, args=["--port", "0"])
        srv.port = free_port()  # overridden by the --port 0 after it
        srv.tls_port, srv.tls_resp_port = free_port(), 0
        log = open(srv.log_path, "ab")
        proc = subprocess.Popen(srv.argv(), stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline, c = time.time() + 15, None
            while time.time() < deadline and c is None:
                try:
                    c = TLSClient(srv.tls_port)
                except OSError:
                    time.sleep(0.05)
            self.assertIsNotNone(c, srv.log_text())
            self.assertEqual(c.call(PUT, b"a", b"b"), [OK])
            c.close()
            out = subprocess.run(["ss", "-Hltnp"], capture_output=True,
                                 text=True).stdout
            mine = [l for l in out.splitlines() if "pid=%d," % proc.pid in l]
            ports = {l.split()[3].rsplit(":", 1)[1] for l in mine}
            self.assertEqual(ports, {str(srv.tls_port)}, out)
        finally:
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(30), 0)
            log.close()
            srv.cleanup()

    def test_metrics_over_tls(self):
        mport = free_port()
        srv = TLSServer(resp=False, args=["--metrics-port", str(mport),
                                          "--tls-metrics", "yes"])
        srv.start()
        try:
            ctx = client_ctx(cert=CERTS.client_cert, key=CERTS.client_key)
            with ctx.wrap_socket(socket.create_connection(
                    ("127.0.0.1", mport), 30),
                    server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
                got = b""
                while True:
                    try:
                        chunk = s.recv(65536)
                    except ssl.SSLEOFError:
                        break
                    if not chunk:
                        break
                    got += chunk
            self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:100])
            self.assertIn(b"kvd_", got)
        finally:
            srv.stop()
            srv.cleanup()


if __name__ == "__main__":
    kvdtest.main()
