"""test_malformed.py - bad RESP input: truncated and unbalanced requests,
negative and huge lengths, a multibulk of 2^31 items, a bulk longer than
declared, binary garbage, oversize inline lines.  Each gets Redis's error
words (or waits, when it is merely incomplete), the connection is closed
when the stream cannot be resynchronised, kvd never crashes, and another
client is served throughout.
"""

import os
import random
import socket
import time
import unittest

from resputil import Error, Raw, Server, encode, main

PROTO = "ERR Protocol error: "

# (input, expected error text or None for no reply, closed afterwards)
CORPUS = [
    (b"*2147483648\r\n", PROTO + "invalid multibulk length", True),
    (b"*4294967295\r\n", PROTO + "invalid multibulk length", True),
    (b"*99999999999999999999999\r\n", PROTO + "invalid multibulk length", True),
    (b"*-5x\r\n", PROTO + "invalid multibulk length", True),
    (b"*abc\r\n", PROTO + "invalid multibulk length", True),
    (b"*01\r\n", PROTO + "invalid multibulk length", True),
    (b"*" + b"1" * 100, PROTO + "too big mbulk count string", True),
    (b"*1\r\n$-1\r\n", PROTO + "invalid bulk length", True),
    (b"*1\r\n$-2147483648\r\n", PROTO + "invalid bulk length", True),
    (b"*1\r\n$2147483648\r\n", PROTO + "invalid bulk length", True),
    (b"*1\r\n$" + b"9" * 100, PROTO + "too big bulk count string", True),
    (b"*1\r\n$x\r\n", PROTO + "invalid bulk length", True),
    (b"*2\r\n$3\r\nGET\r\n:1\r\n", PROTO + "expected '$', got ':'", True),
    (b"*1\r\n$4\r\nPINGPONG\r\n", PROTO + "bulk longer than its declared length 4", True),
    (b"*1\r\n$2\r\nPING\r\n", PROTO + "bulk longer than its declared length 2", True),
    (b'SET k "unbalanced\r\n', PROTO + "unbalanced quotes in request", True),
    (b"SET k 'x'y\r\n", PROTO + "unbalanced quotes in request", True),
    (b"x" * 65536, PROTO + "too big inline request", True),
    (b"*0\r\n", None, False),
    (b"*-1\r\n", None, False),
    (b"\r\n", None, False),
]


class Malformed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, resp=True,
                         args=["--max-frame-size", "1m",
                               "--max-value-size", "512k"]).start()
        cls.other = Raw(cls.srv.resp_port)

    @classmethod
    def tearDownClass(cls):
        cls.other.close()
        cls.srv.stop()  # exits 0: no crash, clean shutdown
        cls.srv.cleanup()

    def alive(self):
        self.assertEqual(self.other.call("SET", "alive", "yes"), b"OK")
        self.assertEqual(self.other.call("GET", "alive"), b"yes")

    def test_corpus(self):
        for data, want, closed in CORPUS:
            with self.subTest(data=data[:40]):
                c = Raw(self.srv.resp_port)
                c.send(data)
                if want is None:
                    self.assertEqual(c.call("PING"), b"PONG")
                    self.assertFalse(c.closed(0.2))
                else:
                    e = c.reply()
                    self.assertIsInstance(e, Error)
                    self.assertEqual(str(e), want)
                    self.assertEqual(c.closed(), closed)
                c.close()
        self.alive()

    def test_replies_before_error_are_kept(self):
        c = Raw(self.srv.resp_port)
        c.send(encode("SET", "before", "1") + encode("GET", "before") +
               b"*1\r\n$-7\r\n" + encode("PING"))
        self.assertEqual(c.reply(), b"OK")
        self.assertEqual(c.reply(), b"1")
        self.assertEqual(str(c.reply()), PROTO + "invalid bulk length")
        self.assertTrue(c.closed())
        c.close()

    def test_truncated_waits(self):
        """Incomplete requests get no reply until completed, byte by byte."""
        c = Raw(self.srv.resp_port)
        req = encode("SET", "slow", "v" * 100) + encode("GET", "slow")
        for i in range(len(req)):
            c.send(req[i:i + 1])
        self.assertEqual(c.reply(), b"OK")
        self.assertEqual(c.reply(), b"v" * 100)
        c.send(b"*2\r\n$3\r\nGET\r\n$4\r\nsl")
        self.assertFalse(c.closed(0.3))
        c.send(b"ow\r\n")
        self.assertEqual(c.reply(), b"v" * 100)
        c.close()

    def test_request_over_frame_limit(self):
        """Declared sizes beyond max-frame-size are refused before the body
        is read; a value over max-value-size is a plain error."""
        c = Raw(self.srv.resp_port)
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n")
        self.assertEqual(str(c.reply()), PROTO + "invalid bulk length")
        self.assertTrue(c.closed())
        c.close()
        c = Raw(self.srv.resp_port)
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$900000\r\n")
        c.send(b"x" * 900000 + b"\r\n")
        self.assertIn("exceeds maximum allowed size", str(c.reply()))
        self.assertEqual(c.call("PING"), b"PONG")
        # Many bulks, each fine, together over the limit: the 522nd bulk's
        # header (7 + 522 * 2009 > 1 MiB) is refused.  Nothing more is sent,
        # so the close cannot turn into a reset that loses the reply.
        c.send(b"*1000\r\n" + (b"$2000\r\n" + b"y" * 2000 + b"\r\n") * 521
               + b"$2000\r\n")
        self.assertIn("larger than max-frame-size", str(c.reply()))
        self.assertTrue(c.closed())
        c.close()
        self.alive()

    def test_many_args(self):
        """A large multibulk arriving in small pieces parses in linear time."""
        n = 60000  # about 700 kB: under this server's 1 MiB frame cap
        c = Raw(self.srv.resp_port, timeout=30)
        req = encode("DEL", *[b"k%d" % i for i in range(n)])
        t0 = time.time()
        for i in range(0, len(req), 1000):
            c.send(req[i:i + 1000])
        self.assertEqual(c.reply(), 0)
        self.assertLess(time.time() - t0, 20)
        c.close()

    def test_binary_garbage(self):
        rnd = random.Random(5)
        for i in range(40):
            c = Raw(self.srv.resp_port)
            blob = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 4000)))
            if i % 2:
                blob = b"*" + blob  # garbage that starts like a multibulk
            try:
                c.send(blob)
                c.sock.shutdown(socket.SHUT_WR)
                c.closed(2)
            except OSError:
                pass
            c.close()
        for _ in range(20):  # and random truncations of valid requests
            req = encode("MSET", "a", os.urandom(50), "b", "c")
            c = Raw(self.srv.resp_port)
            c.send(req[:rnd.randrange(1, len(req))])
            c.close()
        self.alive()

    def test_unknown_keeps_connection(self):
        c = Raw(self.srv.resp_port)
        for cmd in (b"LPUSH", b"EVAL", b"\x00\xff", b"XADD"):
            self.assertIn("unknown command", str(c.call(cmd, "x")))
        self.assertEqual(c.call("PING"), b"PONG")
        c.close()


if __name__ == "__main__":
    main()
