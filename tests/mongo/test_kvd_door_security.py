"""test_kvd_door_security.py - the MongoDB door of a real kvd against
clients that do not behave: TLS on --tls-mongo-port (pymongo with the test
CA; a plain client and a client trusting another CA fail), every command
but the handshake's and the authentication's refused before
authentication (13 Unauthorized), and the RESP port's pre-authentication
limits on the door: messages over 16 KiB closed, unread replies and
partial messages held to the caps of conn.c (memory measured, membound),
ten failed SCRAM proofs per connection, and the guessing limit per source
address (kvd_auth_gate).
"""

import os
import socket
import struct
import sys
import time
import unittest

import kvdtest
import membound

try:
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doorwire import Door  # noqa: E402
from test_kvd_door import KvdHost  # noqa: E402

MiB = membound.MiB
# conn.c's caps on a connection before authentication (conn.h)
PREAUTH_INPUT, PREAUTH_OUTPUT = 32 << 10, 16 << 10
# net/auth.h, KVD_AUTH_MAX_FAILS
AUTH_FAIL_LIMIT = 10

# Every command of the door (kvd/mongo/mdoor_*.c's tables), and those it
# runs before authentication (docs/mongodb.md, Authentication).
COMMANDS = """aggregate buildInfo buildinfo collStats connectionStatus count
create createIndexes dbStats delete distinct drop dropDatabase dropIndexes
endSessions find findAndModify findandmodify getCmdLineOpts getLog getMore
getParameter hello hostInfo insert isMaster ismaster killCursors
listCollections listDatabases listIndexes logout ping saslContinue
saslStart serverStatus update whatsmyuri""".split()
NOAUTH = set("""hello isMaster ismaster ping buildInfo buildinfo saslStart
saslContinue connectionStatus endSessions logout""".split())


def stats(host):
    return host.stats()


class DoorTLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(tls=True)
        if not cls.host.certs:
            cls.host.stop()
            raise unittest.SkipTest("no openssl command for the certificates")

    @classmethod
    def tearDownClass(cls):
        cls.host.stop()

    def test_pymongo_over_tls(self):
        cl = self.host.tls_client()
        c = cl.t.tls
        c.insert_many([{"_id": i, "v": i % 3} for i in range(300)])
        self.assertEqual(c.count_documents({"v": 1}), 100)
        self.assertEqual(len(list(c.find({}).batch_size(7))), 300)
        self.assertEqual(c.update_many({"v": 2}, {"$inc": {"v": 1}})
                         .modified_count, 100)
        self.assertEqual(c.find_one({"_id": 2}), {"_id": 2, "v": 3})
        # the documents are kvd's: the plain port sees them
        plain = self.host.client()
        self.assertEqual(plain.t.tls.count_documents({}), 300)
        c.drop()
        cl.close()
        plain.close()

    def test_tls_wrong_password_and_wrong_ca(self):
        cl = self.host.tls_client("kvd:wrong@")
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            cl.admin.command("ping")
        self.assertEqual(e.exception.code, 18)
        cl.close()
        # a certificate of a CA the client does not trust
        bad = self.host.client(port=self.host.tport, tls=True,
                               tlsCAFile=self.host.certs.ca2,
                               serverSelectionTimeoutMS=1500)
        with self.assertRaises(pymongo.errors.ServerSelectionTimeoutError):
            bad.admin.command("ping")
        bad.close()
        # a client without TLS on the TLS port
        plain = self.host.client(port=self.host.tport,
                                 serverSelectionTimeoutMS=1500)
        with self.assertRaises(pymongo.errors.ServerSelectionTimeoutError):
            plain.admin.command("ping")
        plain.close()


class DoorPreAuth(unittest.TestCase):
    """Before authentication: what runs, and what it may hold."""

    def test_commands_before_auth(self):
        h = KvdHost()
        try:
            d = Door(h.mport)
            for name in COMMANDS:
                r = d.call({name: 1, "$db": "admin"})
                self.assertIsNotNone(r, name)
                if name in NOAUTH:
                    self.assertNotEqual(r.get("code"), 13, (name, r))
                    continue
                self.assertEqual((r["ok"], r["code"], r["codeName"]),
                                 (0.0, 13, "Unauthorized"), name)
                self.assertEqual(r["errmsg"],
                                 "command %s requires authentication" % name)
            # and after authentication they run
            self.assertTrue(d.scram("kvd", b"secret")[0])
            r = d.call({"find": "c", "$db": "t"})
            self.assertEqual(r["ok"], 1.0, r)
            d.close()
        finally:
            h.stop()

    def test_message_over_16k_before_auth_closes(self):
        h = KvdHost()
        try:
            d = Door(h.mport)
            d.send(struct.pack("<iiii", 20000, 1, 0, 2013) + b"\0" * 64)
            self.assertTrue(d.closed())
            self.assertEqual(d.buf, b"")
            # authenticated, the same connection may send 16 MiB documents
            a = Door(h.mport)
            self.assertTrue(a.scram("kvd", b"secret")[0])
            r = a.call({"insert": "c", "documents": [{"_id": 1,
                                                      "x": "y" * 100000}],
                        "$db": "t"})
            self.assertEqual((r["ok"], r["n"]), (1.0, 1))
            a.close()
        finally:
            h.stop()

    def test_unread_replies_before_auth_close(self):
        """8 connections send pings without reading: each is closed once
        16 KiB of replies wait, not left to hold max-output each."""
        h = KvdHost(threads=2)
        try:
            ping = Door(h.mport).msg({"ping": 1, "$db": "admin"}) * 2048
            socks = []
            with membound.Peak(self, h) as m:
                for _ in range(8):
                    s = socket.create_connection(("127.0.0.1", h.mport), 10)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    s.settimeout(5)
                    try:
                        sent = 0
                        while sent < 64 * MiB:
                            sent += s.send(ping)
                    except (BrokenPipeError, ConnectionResetError,
                            socket.timeout):
                        pass
                    socks.append(s)
            for s in socks:
                d = Door.__new__(Door)
                d.sock, d.buf = s, b""
                self.assertTrue(d.closed(), "a flooding peer stays")
                s.close()
            m.assert_within(8 * (PREAUTH_INPUT + PREAUTH_OUTPUT),
                            "8 unauthenticated door connections flooding")
            self.assertGreaterEqual(stats(h)[b"preauth_closed"], 8)
        finally:
            h.stop()

    def test_many_partial_messages_before_auth(self):
        """1,000 connections each hold a message of 16 KiB short of its
        last bytes (the largest allowed before authentication), and 200
        announce 1 MiB: those are closed at once, and kvd holds no more
        than the caps allow."""
        h = KvdHost(threads=2)
        held, big = [], []
        try:
            head = struct.pack("<iiii", 16384, 1, 0, 2013)
            with membound.Peak(self, h) as m:
                for _ in range(1000):
                    s = socket.create_connection(("127.0.0.1", h.mport), 10)
                    s.sendall(head + b"\x00" * 16000)
                    held.append(s)
                for _ in range(200):
                    s = socket.create_connection(("127.0.0.1", h.mport), 10)
                    s.sendall(struct.pack("<iiii", 1 << 20, 1, 0, 2013) +
                              b"\x00" * 16000)
                    big.append(s)
                # each of the first is still open (kvd waits for the rest)
                probe = Door.__new__(Door)
                probe.sock, probe.buf = held[-1], b""
                self.assertFalse(probe.closed(0.5))
            for s in big:
                d = Door.__new__(Door)
                d.sock, d.buf = s, b""
                self.assertTrue(d.closed(), "a 1 MiB message before auth")
            m.assert_within(1000 * PREAUTH_INPUT,
                            "1,000 partial messages before auth")
            # an authenticating client is unaffected
            d = Door(h.mport)
            self.assertTrue(d.scram("kvd", b"secret")[0])
            d.close()
        finally:
            for s in held + big:
                s.close()
            h.stop()


class DoorGuessing(unittest.TestCase):
    def test_ten_failures_close_the_connection(self):
        """A wrong proof, again and again on one connection: ten answered
        18 AuthenticationFailed, then kvd closes it; counted with the
        other ports' (STATS auth_failures)."""
        h = KvdHost(args=["--auth-fail-rate", "0"])
        try:
            d = Door(h.mport)
            failures = 0
            for _ in range(100):
                ok, r = d.scram("kvd", b"", proof=b"\x01" * 32)
                self.assertFalse(ok)
                if r is None:
                    break
                self.assertEqual(r["code"], 18, r)
                failures += 1
            self.assertEqual(failures, AUTH_FAIL_LIMIT)
            self.assertTrue(d.closed())
            self.assertEqual(stats(h)[b"auth_failures"], AUTH_FAIL_LIMIT)
            # the right password still works, on a fresh connection
            self.assertTrue(Door(h.mport).scram("kvd", b"secret")[0])
        finally:
            h.stop()

    def test_guesses_limited_per_address(self):
        """Reconnecting buys no guesses: past auth-fail-burst failures
        from one address, its proofs are refused unchecked (the right
        one too) until auth-fail-rate gives one back; another address
        is not affected."""
        h = KvdHost(args=["--auth-fail-burst", "5", "--auth-fail-rate", "1"])
        try:
            guesser = "127.0.0.5"
            t0 = time.monotonic()
            for _ in range(40):
                d = Door(h.mport, src=guesser)
                ok, r = d.scram("kvd", b"", proof=b"\x01" * 32)
                self.assertFalse(ok)
                self.assertEqual(r["code"], 18, r)
                d.close()
            t1 = time.monotonic()
            right = Door(h.mport, src=guesser).scram("kvd", b"secret")[0]
            if time.monotonic() - t1 < 0.5:
                self.assertFalse(right)
            elapsed = time.monotonic() - t0
            st = stats(h)
            # five at once, then at most one a second were checked
            self.assertGreaterEqual(st[b"auth_limited"],
                                    40 - 5 - int(elapsed) - 1)
            self.assertTrue(Door(h.mport, src="127.0.0.2")
                            .scram("kvd", b"secret")[0])
            self.assertIn(b"refused unchecked", h.srv.log_text())
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main()
