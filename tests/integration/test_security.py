"""test_security.py - who may do what, on both protocols.

Protected mode refuses a non-loopback bind without a password; with a
password, nothing but HELLO/AUTH (and RESP QUIT) works before AUTH, and
unauthenticated requests are held to small caps; read-only mode and
disable-commands refuse what they should and nothing else, on both
protocols; a browser's request to either port (cross-protocol scripting) is
refused and the connection closed; password guessing costs a connection
every few guesses and is counted, and its log lines are rate-limited.
"""

import base64
import os
import socket
import struct
import subprocess
import tempfile
import time
import unittest

import msgpack
import redis

from kvdtest import *  # noqa: F401,F403

AUTH_FAIL_LIMIT = 10  # failed AUTHs a connection may make (auth.h)
WRONG = [AUTH_FAILED, b"invalid password"]  # checked, and wrong
LIMITED = [AUTH_FAILED, b"too many failed AUTH attempts from this address; "
           b"try again later"]  # refused unchecked (auth.h)


def kvd(args):
    p = subprocess.run([KVD_BIN] + args, capture_output=True, timeout=20)
    return p.returncode, p.stderr.decode()


class Security(unittest.TestCase):
    def test_protected_mode(self):
        rc, err = kvd(["--bind", "0.0.0.0", "--test-config"])
        self.assertEqual(rc, 2)
        self.assertIn("protected mode", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        rc, err = kvd(["--bind", "::", "--test-config"])
        self.assertEqual(rc, 2)
        rc, err = kvd(["--metrics-port", "9379", "--metrics-bind", "0.0.0.0",
                       "--test-config"])
        self.assertEqual(rc, 2)
        self.assertIn("metrics", err)
        for ok in (["--bind", "0.0.0.0", "--requirepass", "s3cret"],
                   ["--bind", "0.0.0.0", "--protected-mode", "no"],
                   ["--bind", "127.0.0.2"], ["--bind", "::1"],
                   ["--bind", "localhost"]):
            rc, err = kvd(ok + ["--test-config"])
            self.assertEqual(rc, 0, (ok, err))
        rc, err = kvd(["--disable-commands", "FLUSHALL,NOPE", "--test-config"])
        self.assertEqual(rc, 2)
        self.assertIn("unknown command 'NOPE'", err)
        rc, err = kvd(["--requirepass", "a", "--requirepass-file", "/x", "--test-config"])
        self.assertEqual(rc, 2)

    def test_password_native(self):
        tmp = tempfile.mkdtemp()
        pw = os.path.join(tmp, "pw")
        with open(pw, "w") as f:
            f.write("correct horse\n")
        with Server(threads=1, args=["--requirepass-file", pw]) as srv:
            c = srv.client()
            self.assertEqual(c.call(GET, b"k")[0], AUTH_REQUIRED)
            self.assertEqual(c.call(PING)[0], AUTH_REQUIRED)
            self.assertEqual(c.call(HELLO, 1)[0], OK)
            self.assertEqual(c.call(AUTH, b"correct horsE")[0], AUTH_FAILED)
            self.assertEqual(c.call(AUTH, b"correct")[0], AUTH_FAILED)
            self.assertEqual(c.call(AUTH, b"correct horse!")[0], AUTH_FAILED)
            self.assertEqual(c.call(PUT, b"k", b"v")[0], AUTH_REQUIRED)
            self.assertEqual(c.call(AUTH, b"correct horse"), [OK])
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])
            # before AUTH, a 20 KB frame is refused (for want of the
            # password, not as too large) and the connection closed
            d = srv.client()
            d.send_raw(struct.pack(">I", 20000) + b"\x92\x13")
            self.assertEqual(d.read_reply()[0], AUTH_REQUIRED)
            self.assertTrue(d.closed_by_peer())
            # after AUTH the normal limit applies
            big = b"x" * 100000
            self.assertEqual(c.call(PUT, b"big", big), [OK])
        os.system("rm -rf " + tmp)

    def test_password_resp(self):
        with Server(threads=1, resp=True, args=["--requirepass", "pw"]) as srv:
            r = redis.Redis(port=srv.resp_port)
            with self.assertRaises(redis.exceptions.AuthenticationError):
                r.get("k")
            good = redis.Redis(port=srv.resp_port, password="pw")
            self.assertTrue(good.set("k", "v"))
            self.assertEqual(good.get("k"), b"v")
            bad = redis.Redis(port=srv.resp_port, password="nope")
            with self.assertRaises(redis.exceptions.ResponseError) as e:
                bad.get("k")
            self.assertIn("WRONGPASS", str(e.exception))  # Redis 6+'s words
            user = redis.Redis(port=srv.resp_port, username="default", password="pw")
            self.assertEqual(user.get("k"), b"v")
            # an unauthenticated multibulk of 11 items, or a bulk of 20,000
            # bytes, is refused, then the connection is closed (EOF or
            # reset within 5 s), the error line its only reply
            for req, err in ((b"*11\r\n", b"unauthenticated multibulk length"),
                             (b"*2\r\n$3\r\nGET\r\n$20000\r\n",
                              b"invalid bulk length")):
                s = Stream(srv.resp_port, timeout=5)
                s.send_raw(req)
                self.assertTrue(s.closed_by_peer(5), req)
                self.assertTrue(s.buf.startswith(b"-ERR Protocol error: "),
                                s.buf)
                self.assertIn(err, s.buf)
                self.assertEqual(s.buf.count(b"\r\n"), 1, s.buf)
                s.close()

    def test_read_only(self):
        with Server(threads=1, resp=True) as srv:
            srv.client().call(PUT, b"k", b"v")
            srv.restart(extra=["--read-only", "yes"])
            c = srv.client()
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])
            for req in ([PUT, b"k", b"w"], [DEL, b"k"], [MPUT, 0, b"a", b"b"],
                        [INCR, b"n", 1], [FLUSHALL]):
                self.assertEqual(c.call(*req)[0], READ_ONLY, req)
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])
            r = redis.Redis(port=srv.resp_port)
            self.assertEqual(r.get("k"), b"v")
            with self.assertRaises(redis.exceptions.ReadOnlyError):
                r.set("k", "w")

    def test_disable_commands(self):
        with Server(threads=1, resp=True,
                    args=["--disable-commands", "FLUSHALL, keys,BACKUP"]) as srv:
            c = srv.client()
            c.call(PUT, b"k", b"v")
            self.assertEqual(c.call(FLUSHALL)[0], DISABLED)
            self.assertEqual(c.call(BACKUP, b"/tmp/nowhere")[0], DISABLED)
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])
            r = redis.Redis(port=srv.resp_port)
            for cmd in (("FLUSHALL",), ("KEYS", "*")):
                with self.assertRaises(redis.exceptions.ResponseError) as e:
                    r.execute_command(*cmd)
                self.assertIn("disabled", str(e.exception))
            self.assertEqual(r.get("k"), b"v")


    def test_disable_commands_cover_resp(self):
        """Each native name refuses every RESP command that performs it."""
        with Server(threads=1, resp=True,
                    args=["--disable-commands", "PUT,EXPIRE,INCR,MPUT"]) as srv:
            c = srv.client()
            self.assertEqual(c.call(APPEND, b"k", b"v"), [OK, 1])
            for req in ([PUT, b"k", b"w"], [MPUT, 0, b"a", b"b"],
                        [EXPIRE, b"k", 1000], [INCR, b"n", 1]):
                self.assertEqual(c.call(*req)[0], DISABLED, req)
            r = redis.Redis(port=srv.resp_port)
            for cmd in (("SET", "k", "w"), ("SETNX", "k2", "w"),
                        ("SETEX", "k", "10", "w"), ("PSETEX", "k", "10", "w"),
                        ("MSET", "k", "w"), ("GETSET", "k", "w"),
                        ("EXPIRE", "k", "1"), ("PEXPIRE", "k", "1"),
                        ("EXPIREAT", "k", "1"), ("PEXPIREAT", "k", "1"),
                        ("PERSIST", "k"), ("INCR", "n"), ("INCRBY", "n", "2"),
                        ("DECR", "n"), ("DECRBY", "n", "2")):
                with self.assertRaises(redis.exceptions.ResponseError,
                                       msg=cmd) as e:
                    r.execute_command(*cmd)
                self.assertIn("disabled", str(e.exception), cmd)
            self.assertEqual(r.get("k"), b"v")
            self.assertEqual(r.ttl("k"), -1)
            self.assertIsNone(r.get("n"))
            self.assertEqual(r.append("k", "x"), 2)  # not listed: works
        with Server(threads=1, resp=True,
                    args=["--disable-commands", "del,SCAN,STATS"]) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
            for req in ([DEL, b"k"], [SCAN], [STATS]):
                self.assertEqual(c.call(*req)[0], DISABLED, req)
            r = redis.Redis(port=srv.resp_port)
            for cmd in (("DEL", "k"), ("UNLINK", "k"), ("SCAN", "0"),
                        ("KEYS", "*"), ("INFO",)):
                with self.assertRaises(redis.exceptions.ResponseError,
                                       msg=cmd) as e:
                    r.execute_command(*cmd)
                self.assertIn("disabled", str(e.exception), cmd)
            self.assertEqual(r.get("k"), b"v")
            self.assertEqual(c.call(MDEL, b"k"), [OK, 1])  # not listed

    def test_disable_commands_resp_names(self):
        """A RESP name is accepted and refuses that RESP command only."""
        rc, err = kvd(["--disable-commands", "SET,FLUSHDB,getset",
                       "--test-config"])
        self.assertEqual(rc, 0, err)
        rc, err = kvd(["--disable-commands", "SET,NOPE", "--test-config"])
        self.assertEqual(rc, 2)
        self.assertIn("unknown command 'NOPE'", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        with Server(threads=1, resp=True,
                    args=["--disable-commands", "SET"]) as srv:
            r = redis.Redis(port=srv.resp_port)
            with self.assertRaises(redis.exceptions.ResponseError) as e:
                r.set("k", "v")
            self.assertIn("disabled", str(e.exception))
            self.assertTrue(r.setnx("k", "v"))  # another command
            self.assertEqual(srv.client().call(PUT, b"j", b"v"), [OK])

    def test_disable_documented_example(self):
        """docs/security.md's example list leaves no command that empties
        the store (FLUSHALL covers RESP FLUSHDB) or stops the server."""
        with Server(threads=1, resp=True,
                    args=["--disable-commands",
                          "FLUSHALL,KEYS,BACKUP,SHUTDOWN"]) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
            self.assertEqual(c.call(FLUSHALL)[0], DISABLED)
            r = redis.Redis(port=srv.resp_port)
            for cmd in (("FLUSHALL",), ("FLUSHDB",), ("FLUSHALL", "ASYNC"),
                        ("FLUSHDB", "SYNC"), ("SHUTDOWN",),
                        ("SHUTDOWN", "NOSAVE")):
                with self.assertRaises(redis.exceptions.ResponseError,
                                       msg=cmd) as e:
                    r.execute_command(*cmd)
                self.assertIn("disabled", str(e.exception), cmd)
            self.assertEqual(r.dbsize(), 1)
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])

    def http_attack(self, port, body):
        """A browser's form POST to a kvd port: what a web page can make a
        victim's browser send (cross-protocol scripting).  Returns the
        bytes kvd answered, asserting that it closed the connection."""
        s = Stream(port, timeout=5)
        s.send_raw(b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                   b"Content-Type: text/plain\r\nContent-Length: %d\r\n"
                   b"\r\n" % (port, len(body)) + body)
        self.assertTrue(s.closed_by_peer())
        s.close()
        return s.buf

    def test_cross_protocol_resp(self):
        with Server(threads=1, resp=True) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"keep", b"v"), [OK])
            self.http_attack(srv.resp_port, b"SET x pwned\r\n")
            self.http_attack(srv.resp_port, b"FLUSHALL\r\n")
            # a GET has no POST line: its Host: header closes it
            s = Stream(srv.resp_port, timeout=5)
            s.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nSET y pwned\r\n")
            self.assertTrue(s.closed_by_peer())
            self.assertEqual(c.call(GET, b"x")[0], NOT_FOUND)
            self.assertEqual(c.call(GET, b"y")[0], NOT_FOUND)
            self.assertEqual(c.call(GET, b"keep"), [OK, b"v"])
            self.assertIn(b"SECURITY ATTACK", srv.log_text())
            # the port still serves its own protocol
            self.assertEqual(redis.Redis(port=srv.resp_port).get("keep"), b"v")

    def test_cross_protocol_native(self):
        with Server(threads=1) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"keep", b"v"), [OK])
            for body in (frame([PUT, b"x", b"pwned"]), frame([FLUSHALL])):
                out = self.http_attack(srv.port, body)
                self.assertEqual(out, b"")  # no binary reply to a browser
            s = Stream(srv.port, timeout=5)
            s.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(s.closed_by_peer())
            self.assertEqual(s.buf, b"")
            self.assertEqual(c.call(GET, b"x")[0], NOT_FOUND)
            self.assertEqual(c.call(GET, b"keep"), [OK, b"v"])
            self.assertIn(b"SECURITY ATTACK", srv.log_text())

    def auth_lines(self, srv):
        return [l for l in srv.log_text().splitlines() if b"AUTH failed" in l]

    def test_auth_guessing(self):
        """Per connection: ten failures, then closed; counted; the log
        holds at most a line a second.  (The limit per source address is
        off here: test_auth_limited_per_address checks it.)"""
        mport = free_port()
        with Server(threads=1, resp=True,
                    args=["--requirepass", "right", "--auth-fail-rate", "0",
                          "--metrics-port", str(mport)]) as srv:
            # 100 guesses on one native connection: the first ten are
            # answered, then the connection is closed
            d = srv.client()
            d.send_raw(b"".join(frame([AUTH, b"guess%d" % i])
                                for i in range(100)))
            self.assertTrue(d.closed_by_peer())
            replies = []
            while d.buf:
                (n,) = struct.unpack(">I", d.buf[:4])
                replies.append(msgpack.unpackb(d.buf[4:4 + n]))
                d.buf = d.buf[4 + n:]
            self.assertEqual([r[0] for r in replies],
                             [AUTH_FAILED] * AUTH_FAIL_LIMIT)
            # the same on the RESP port
            s = Stream(srv.resp_port, timeout=5)
            s.send_raw(b"".join(b"AUTH guess%d\r\n" % i for i in range(100)))
            self.assertTrue(s.closed_by_peer())
            self.assertEqual(s.buf.count(b"-WRONGPASS"), AUTH_FAIL_LIMIT)
            self.assertEqual(s.buf.count(b"\r\n"), AUTH_FAIL_LIMIT)
            # the right password still works, on a fresh connection
            c = srv.client()
            self.assertEqual(c.call(AUTH, b"right"), [OK])
            failures = 2 * AUTH_FAIL_LIMIT
            self.assertEqual(c.call(STATS)[1][b"auth_failures"], failures)
            r = redis.Redis(port=srv.resp_port, password="right")
            self.assertEqual(r.info("stats")["acl_access_denied_auth"],
                             failures)
            _, text = http_get(mport, b"/metrics",
                               b"Basic " + base64.b64encode(b"kvd:right"))
            self.assertIn("\nkvd_auth_failures_total %d\n" % failures, text)
            # many guessing connections: the log does not grow per guess
            # (at most one line a second per io thread)
            t0 = time.monotonic()
            for _ in range(20):
                g = Stream(srv.port, timeout=5)
                g.send_raw(b"".join(frame([AUTH, b"x"]) for i in range(20)))
                self.assertTrue(g.closed_by_peer())
                g.close()
            elapsed = time.monotonic() - t0
            self.assertLessEqual(len(self.auth_lines(srv)), 3 + elapsed)
            self.assertEqual(c.call(STATS)[1][b"auth_failures"],
                             failures + 20 * AUTH_FAIL_LIMIT)

    def guess(self, srv, pw, src="127.0.0.1"):
        """AUTH pw on a new native connection from source address src
        (any of 127/8 reaches a server bound to 127.0.0.1): its reply."""
        sock = socket.socket()
        sock.bind((src, 0))
        sock.settimeout(10)
        sock.connect(("127.0.0.1", srv.port))
        c = Client.__new__(Client)
        c.sock, c.buf = sock, b""
        try:
            return c.call(AUTH, pw)
        finally:
            c.close()

    def test_auth_limited_per_address(self):
        """Reconnecting buys no guesses: a source address that failed AUTH
        auth-fail-burst times has its attempts refused unchecked (the
        right password too) and its connection closed, on every port,
        until auth-fail-rate lets it try again; another address is not
        affected.  Counted (STATS auth_limited, metric), logged at most
        once a second."""
        mport = free_port()
        with Server(threads=2, resp=True,
                    args=["--requirepass", "right", "--auth-fail-burst", "5",
                          "--auth-fail-rate", "1",
                          "--metrics-port", str(mport)]) as srv:
            t0 = time.monotonic()
            replies = [self.guess(srv, b"guess%d" % i) for i in range(40)]
            elapsed = time.monotonic() - t0
            checked = [r for r in replies if r == WRONG]
            limited = [r for r in replies if r == LIMITED]
            self.assertEqual(len(checked) + len(limited), 40, replies)
            # five at once, then one a second at most
            self.assertGreaterEqual(len(checked), 5)
            self.assertLessEqual(len(checked), 5 + int(elapsed) + 1)
            # the right password is refused unchecked too, on RESP as well
            # (a token comes back a second after the last failure: only
            # when this runs within it)
            t1 = time.monotonic()
            right = self.guess(srv, b"right")
            r = Stream(srv.resp_port, timeout=5)
            r.send_raw(b"AUTH right\r\n")
            self.assertTrue(r.closed_by_peer())
            if time.monotonic() - t1 < 0.5:
                self.assertEqual(right, LIMITED)
                self.assertEqual(r.buf, b"-ERR too many failed AUTH attempts "
                                 b"from this address; try again later\r\n")
            r.close()
            # another source address is not affected
            self.assertEqual(self.guess(srv, b"right", "127.0.0.2"), [OK])
            # the allowance comes back
            wait_for(lambda: self.guess(srv, b"right") == [OK], 15,
                     "an AUTH from 127.0.0.1 to be checked again")
            c = srv.client()
            self.assertEqual(c.call(AUTH, b"right"), [OK])
            st = c.call(STATS)[1]
            self.assertGreaterEqual(st[b"auth_limited"], len(limited))
            self.assertGreaterEqual(st[b"auth_failures"], 40)
            _, text = http_get(mport, b"/metrics",
                               b"Basic " + base64.b64encode(b"kvd:right"))
            self.assertIn("\nkvd_auth_limited_total %d\n" % st[b"auth_limited"],
                          text)
            lines = [l for l in srv.log_text().splitlines()
                     if b"refused unchecked" in l]
            self.assertGreaterEqual(len(lines), 1)
            self.assertLessEqual(len(lines), 2 + time.monotonic() - t0)
            self.assertIn(b"AUTH from 127.0.0.1 refused unchecked", lines[0])

    def test_auth_limited_globally(self):
        """Failures from many addresses together (here 1,500 addresses of
        127/8, one guess each) past 100 times auth-fail-rate a second: an
        address that failed in the last 10 s is refused unchecked, while
        one that did not still authenticates."""
        with Server(threads=2,
                    args=["--requirepass", "right", "--auth-fail-burst", "5",
                          "--auth-fail-rate", "1"]) as srv:
            for i in range(1500):
                src = "127.0.%d.%d" % (10 + i // 250, 1 + i % 250)
                self.assertEqual(self.guess(srv, b"x", src), WRONG)
            # 1,500 failures push the global limit 15 s ahead, 12.5 s past
            # its burst: the flood lasts that long after the first guess
            self.assertEqual(self.guess(srv, b"right", "127.0.10.1"), LIMITED)
            self.assertEqual(self.guess(srv, b"right", "127.0.200.1"), [OK])
            self.assertIn(b"exceed the global limit", srv.log_text())


if __name__ == "__main__":
    main()
