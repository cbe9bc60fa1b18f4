"""test_security.py - who may do what, on both protocols.

Protected mode refuses a non-loopback bind without a password; with a
password, nothing but HELLO/AUTH (and RESP QUIT) works before AUTH, and
unauthenticated requests are held to small caps; read-only mode and
disable-commands refuse what they should and nothing else.
"""

import os
import socket
import struct
import subprocess
import tempfile
import unittest

import redis

from kvdtest import *  # noqa: F401,F403

AUTH_REQUIRED, AUTH_FAILED, READ_ONLY, DISABLED = 25, 26, 27, 28


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
            # before AUTH, a 20 KB frame is refused and the connection closed
            d = srv.client()
            d.send_raw(struct.pack(">I", 20000) + b"\x92\x13")
            self.assertEqual(d.read_reply()[0], FRAME_TOO_LARGE)
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
            # an unauthenticated multibulk of 11 items is refused, then closed
            s = socket.create_connection(("127.0.0.1", srv.resp_port), 5)
            s.sendall(b"*11\r\n")
            self.assertIn(b"unauthenticated multibulk length", s.recv(1000))
            self.assertEqual(s.recv(1000), b"")
            s.close()
            s = socket.create_connection(("127.0.0.1", srv.resp_port), 5)
            s.sendall(b"*2\r\n$3\r\nGET\r\n$20000\r\n")
            self.assertIn(b"ERR Protocol error", s.recv(1000))
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
            self.assertEqual(c.call(20, b"/tmp/nowhere")[0], DISABLED)
            self.assertEqual(c.call(GET, b"k"), [OK, b"v"])
            r = redis.Redis(port=srv.resp_port)
            for cmd in (("FLUSHALL",), ("KEYS", "*")):
                with self.assertRaises(redis.exceptions.ResponseError) as e:
                    r.execute_command(*cmd)
                self.assertIn("disabled", str(e.exception))
            self.assertEqual(r.get("k"), b"v")


if __name__ == "__main__":
    main()
