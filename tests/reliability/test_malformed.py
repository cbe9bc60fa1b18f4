"""test_malformed.py - the native protocol's malformed-input corpus, replayed
against a live kvd.

Each file of corpus/native/ (written by gen_corpus.py) is sent on a fresh
connection, which is then half-closed.  kvd must answer with well-formed
reply frames (error statuses for the bad requests, answers for the good
ones around them) and then close the connection: never hang, never crash,
never apply part of a refused request, and never allocate by a length it
has not checked (its memory stays flat across the corpus, which declares
lengths up to 2^32-1).  A second client is served after every file.  The
corpus is replayed twice: each file whole, and the small ones dribbled in
pieces of 1 to 7 bytes, so that every partial-frame path is taken.  The
fuzzers' seed corpus of request bodies (tests/fuzz/corpus/cmd) is replayed
as well, framed.
"""

import os
import random
import socket
import struct
import unittest

import msgpack

from kvdtest import (BAD_ARGS, FRAME_TOO_LARGE, GET, MALFORMED, NOT_FOUND, OK, PING,
                     UNKNOWN_OP, VALUE_TOO_LARGE, Server, main)
from relutil import rss_kib

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "native")
FUZZ_SEEDS = os.path.join(HERE, "..", "fuzz", "corpus", "cmd")
STATUSES = {0, 1, 2} | set(range(10, 19)) | set(range(20, 30))

# What some files must get (a prefix of the statuses of their replies).
EXPECT = {
    "len-2^31": [FRAME_TOO_LARGE],
    "len-2^32-1": [FRAME_TOO_LARGE],
    "len-max-frame+1": [FRAME_TOO_LARGE],
    "ping-then-huge": [OK, FRAME_TOO_LARGE],
    "ping-then-truncated": [OK, OK, OK],
    "invalid-0xc1": [MALFORMED],
    "body-empty": [MALFORMED],
    "body-longer-than-array": [MALFORMED],
    "op-zero": [UNKNOWN_OP],
    "op-255": [UNKNOWN_OP],
    "op-string": [MALFORMED],
    "get-key-nested": [BAD_ARGS],
    "nest-20000-in-args": [BAD_ARGS],
    "put-value-too-large": [VALUE_TOO_LARGE],
    "put-then-bad": [OK, MALFORMED, OK],
    "writes-then-huge": [OK] * 50 + [FRAME_TOO_LARGE],
    "mput-one-bad-key-of-many": [BAD_ARGS],
}


def frames(buf):
    """Decode a stream of reply frames; raises on anything malformed."""
    out, pos = [], 0
    while pos < len(buf):
        if pos + 4 > len(buf):
            raise AssertionError("reply stream ends inside a frame header")
        (n,) = struct.unpack_from(">I", buf, pos)
        if pos + 4 + n > len(buf):
            raise AssertionError("reply stream ends inside a frame")
        reply = msgpack.unpackb(buf[pos + 4:pos + 4 + n], raw=True, strict_map_key=False)
        if not isinstance(reply, list) or not reply or reply[0] not in STATUSES:
            raise AssertionError("not a reply: %r" % (reply,))
        out.append(reply)
        pos += 4 + n
    return out


def replay(port, data, chunks=None):
    """Send data, half-close, read until kvd closes: the replies."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(15)
    try:
        if chunks:
            pos = 0
            while pos < len(data):
                n = chunks.randint(1, 7)
                s.sendall(data[pos:pos + n])
                pos += n
        else:
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass    # kvd closed first (an oversize frame): fine
    buf = b""
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    except ConnectionResetError:
        pass
    except socket.timeout:
        raise AssertionError("kvd neither answered nor closed within 15 s")
    finally:
        s.close()
    return frames(buf)


class Malformed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, args=["--max-frame-size", "1m", "--max-value-size", "4k"])
        cls.srv.start()
        cls.canary = cls.srv.client()

    @classmethod
    def tearDownClass(cls):
        cls.canary.close()
        cls.srv.stop()      # status 0: no crash, clean stop
        cls.srv.cleanup()

    def alive(self, name):
        self.assertIsNone(self.srv.proc.poll(), "kvd died on %s" % name)
        self.assertEqual(self.canary.call(PING), [OK], "after %s" % name)

    def files(self):
        return sorted(f for f in os.listdir(CORPUS) if f.endswith(".bin"))

    def test_corpus_whole_then_dribbled(self):
        rss0 = rss_kib(self.srv.proc.pid)
        rng = random.Random(5)
        for dribble in (False, True):
            for f in self.files():
                name = f[:-4]
                with open(os.path.join(CORPUS, f), "rb") as fh:
                    data = fh.read()
                if dribble and len(data) > 4096:
                    continue
                with self.subTest(file=f, dribble=dribble):
                    got = [r[0] for r in replay(self.srv.port, data, rng if dribble else None)]
                    want = EXPECT.get(name)
                    if want is not None:
                        self.assertEqual(got[:len(want)], want)
                    self.alive(f)
        grew = (rss_kib(self.srv.proc.pid) - rss0) / 1024
        self.assertLess(grew, 32, "kvd grew %.0f MiB over the corpus" % grew)
        # refused requests left nothing behind; accepted ones did
        c = self.srv.client()
        self.assertEqual(c.call(GET, b"k0"), [NOT_FOUND])       # mput-one-bad-key-of-many
        self.assertEqual(c.call(GET, b"ok1"), [OK, b"v"])       # put-then-bad
        self.assertEqual(c.call(GET, b"w49"), [OK, b"v"])       # writes-then-huge
        c.close()

    def test_fuzz_seeds_framed(self):
        if not os.path.isdir(FUZZ_SEEDS):
            self.skipTest("no fuzz seed corpus")
        n = 0
        for f in sorted(os.listdir(FUZZ_SEEDS)):
            with open(os.path.join(FUZZ_SEEDS, f), "rb") as fh:
                body = fh.read()
            if len(body) > (1 << 20):
                continue
            replay(self.srv.port, struct.pack(">I", len(body)) + body)
            self.alive(f)
            n += 1
        self.assertGreater(n, 0)


if __name__ == "__main__":
    main()
