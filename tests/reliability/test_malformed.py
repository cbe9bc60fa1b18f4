"""test_malformed.py - the native protocol's malformed-input corpus, replayed
against a live kvd.

Each file of corpus/native/ (written by gen_corpus.py) is sent on a fresh
connection, which is then half-closed.  kvd must answer every request with a
well-formed reply frame of the status EXPECT names for that file (error
statuses for the bad requests, answers for the good ones around them), an
error's text as a msgpack str and every value as bin, and then close the
connection: never hang, never crash, never apply any part of a refused
request (the store afterwards holds exactly what the accepted writes wrote),
and never allocate by a length it has not checked (its memory stays flat
across the corpus, which declares lengths up to 2^32-1).  A second client is
served after every file.  The corpus is replayed twice: each file whole, and
the small ones dribbled in pieces of 1 to 7 bytes, so that every
partial-frame path is taken.  The fuzzers' seed corpus of request bodies
(tests/fuzz/corpus/cmd) is replayed as well, framed, against a kvd whose
BACKUP can write only inside the test's own temporary directory.
"""

import os
import random
import shutil
import socket
import struct
import tempfile
import unittest

import msgpack

from kvdtest import (BACKUP, BAD_ARGS, BAD_VERSION, DISABLED, EXISTS_ST, FLUSHALL,
                     FRAME_TOO_LARGE, KEY_TOO_LARGE, MALFORMED, NOT_INTEGER, OK, PING,
                     SCAN, STATUS_NAMES, UNKNOWN_OP, VALUE_TOO_LARGE, Server, main)
from relutil import rss_kib, sanitized

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "native")
FUZZ_SEEDS = os.path.join(HERE, "..", "fuzz", "corpus", "cmd")
WIRE_STATUSES = {n for n in STATUS_NAMES if n < 64}


def _garbage_frames():
    # gen_corpus.py's 200 random bodies: none is one well-formed array, so
    # every one is MALFORMED (four begin like an array with an unknown op:
    # MALFORMED wins over UNKNOWN_OP, protocol.md section 1)
    return [MALFORMED] * 200


# The statuses of every reply to every file, in order: [] for a file that
# holds no complete frame (kvd closes at the half-close, unanswered) and for
# an HTTP request (closed unanswered: cross-protocol scripting).
EXPECT = {
    # framing
    "empty": [],
    "header-1-byte": [],
    "header-3-bytes": [],
    "body-truncated": [],
    "body-empty": [MALFORMED],
    "len-2^31": [FRAME_TOO_LARGE],
    "len-2^32-1": [FRAME_TOO_LARGE],
    "len-max-frame+1": [FRAME_TOO_LARGE],
    "len-max-frame-truncated": [],
    "len-below-max-never-sent": [],
    "ping-then-huge": [OK, FRAME_TOO_LARGE],
    "ping-then-truncated": [OK, OK, OK],
    "body-longer-than-array": [MALFORMED],
    "two-arrays-one-frame": [MALFORMED],
    # not a request
    "invalid-0xc1": [MALFORMED],
    "not-array-map": [MALFORMED],
    "not-array-uint": [MALFORMED],
    "not-array-str": [MALFORMED],
    "not-array-nil": [MALFORMED],
    "array-empty": [MALFORMED],
    "array32-2^32-1-items": [MALFORMED],
    "array16-truncated": [MALFORMED],
    "map32-huge": [MALFORMED],
    # opcodes: an integer that names no op is UNKNOWN_OP, anything else
    # (negative included: an op is a positive integer) MALFORMED
    "op-zero": [UNKNOWN_OP],
    "op-255": [UNKNOWN_OP],
    "op-max-known+1": [UNKNOWN_OP],
    "op-u64-max": [UNKNOWN_OP],
    "op-negative": [MALFORMED],
    "op-int64-min": [MALFORMED],
    "op-string": [MALFORMED],
    "op-float": [MALFORMED],
    "op-nil": [MALFORMED],
    "op-bool": [MALFORMED],
    "op-bin": [MALFORMED],
    # MALFORMED wins: a body that is not one well-formed array is MALFORMED
    # (protocol.md section 1) even with an unknown op or a bad argument
    # before the break; a well-formed one keeps UNKNOWN_OP / BAD_ARGS
    "op-unknown-body-truncated": [MALFORMED],
    "op-unknown-trailing": [MALFORMED],
    "op-unknown-nested-arg": [UNKNOWN_OP],
    "arg-nested-then-truncated": [MALFORMED],
    "arg-map-then-trailing": [MALFORMED],
    "arg-float-then-missing": [MALFORMED],
    # arguments
    "get-no-args": [BAD_ARGS],
    "get-five-args": [BAD_ARGS],
    "get-int-key": [BAD_ARGS],
    "get-empty-key": [BAD_ARGS],
    "get-key-512": [KEY_TOO_LARGE],
    "get-key-nested": [BAD_ARGS],
    "get-key-map": [BAD_ARGS],
    "get-key-ext": [BAD_ARGS],
    "get-key-fixext16": [BAD_ARGS],
    "get-key-float": [BAD_ARGS],
    "put-nil-value": [BAD_ARGS],
    "put-value-map": [BAD_ARGS],
    "put-value-too-large": [VALUE_TOO_LARGE],
    "put-ttl-negative": [BAD_ARGS],
    "put-ttl-u64-max": [BAD_ARGS],
    "put-ttl-float": [BAD_ARGS],
    "put-flags-bad": [BAD_ARGS],
    "put-flags-nx-xx": [BAD_ARGS],
    "put-bin32-2^32-1-truncated": [MALFORMED],
    "put-str32-2^31-truncated": [MALFORMED],
    "put-ext32-huge": [MALFORMED],
    "mput-odd-pairs": [BAD_ARGS],
    "mput-ttl-string": [BAD_ARGS],
    "mput-int-key": [BAD_ARGS],
    "mput-one-bad-key-of-many": [BAD_ARGS],
    "mdel-nil-key": [BAD_ARGS],
    "mget-array-key": [BAD_ARGS],
    "scan-bad-flags": [BAD_ARGS],
    "scan-limit-zero": [BAD_ARGS],
    "scan-prefix-too-long": [BAD_ARGS],
    "scan-prefix-int": [BAD_ARGS],
    "incr-u64-max": [NOT_INTEGER],
    "incr-int64-min": [OK],
    "incr-bin-delta": [BAD_ARGS],
    "expire-huge": [BAD_ARGS],
    "expire-negative": [BAD_ARGS],
    "hello-version-3": [BAD_VERSION],
    "hello-version-string": [BAD_VERSION],
    "flushall-with-args": [BAD_ARGS],
    "stats-with-args": [BAD_ARGS],
    "auth-no-password": [DISABLED],     # AUTH with no password configured
    "ping-map-arg": [BAD_ARGS],
    # depth and size bombs
    "nest-20000-in-args": [BAD_ARGS],
    "nest-20000-top": [MALFORMED],
    "map-nest-10000": [BAD_ARGS],
    "many-nil-args": [BAD_ARGS],
    "mget-20000-keys": [OK],
    # writes mixed with bad frames
    "put-then-bad": [OK, MALFORMED, OK],
    "writes-then-huge": [OK] * 50 + [FRAME_TOO_LARGE],
    "pipeline-then-garbage": [OK] * 100 + [FRAME_TOO_LARGE],
    # garbage
    "garbage-1k": [FRAME_TOO_LARGE],
    "garbage-frames": _garbage_frames(),
    "ascii-resp": [FRAME_TOO_LARGE],
    "http-get": [],
    # PUT key value ttl NX, each byte flipped: a flipped key byte is a new
    # key (stored), a flipped value or TTL byte meets "key" already stored
    # (EXISTS), a flipped flags byte is a bad flag
    "put-each-byte-flipped": [MALFORMED] * 4 + [OK] * 3 + [MALFORMED] * 2 + [OK]
    + [EXISTS_ST] * 4 + [MALFORMED] + [EXISTS_ST] * 4 + [BAD_ARGS],
}

# What the store holds after each file: only what its accepted writes wrote
# (every other file leaves it empty).
STORED = {
    "incr-int64-min": {b"n": b"-9223372036854775808"},
    "put-then-bad": {b"ok1": b"v"},
    "writes-then-huge": {b"w%d" % i: b"v" for i in range(50)},
    "put-each-byte-flipped": {b"\x94ey": b"value", b"k\x9ay": b"value",
                              b"ke\x86": b"value", b"key": b"\x89alue"},
}


def no_str(x):
    """True if no item of x (a reply's results: values, keys, cursors) is a
    msgpack str.  HELLO's and STATS's maps are documents of their own, with
    str keys and str fields (protocol.md section 4)."""
    if isinstance(x, str):
        return False
    if isinstance(x, list):
        return all(no_str(i) for i in x)
    return True


def check_types(reply):
    """protocol.md section 3: an error carries one str of text; NOT_FOUND
    and EXISTS carry nothing; values in replies are always bin."""
    st = reply[0]
    if st >= 10:
        if len(reply) != 2 or not isinstance(reply[1], str):
            raise AssertionError("error reply without a str text: %r" % (reply,))
    elif st != OK:
        if len(reply) != 1:
            raise AssertionError("%s reply with a payload: %r" % (STATUS_NAMES[st], reply))
    elif not no_str(reply[1:]):
        raise AssertionError("a value sent as str, not bin: %r" % (reply,))


def frames(buf):
    """Decode a stream of reply frames (str as str, bin as bytes: raw=False
    tells them apart); raises on anything malformed."""
    out, pos = [], 0
    while pos < len(buf):
        if pos + 4 > len(buf):
            raise AssertionError("reply stream ends inside a frame header")
        (n,) = struct.unpack_from(">I", buf, pos)
        if pos + 4 + n > len(buf):
            raise AssertionError("reply stream ends inside a frame")
        reply = msgpack.unpackb(buf[pos + 4:pos + 4 + n], raw=False, strict_map_key=False)
        if not isinstance(reply, list) or not reply or reply[0] not in WIRE_STATUSES:
            raise AssertionError("not a reply: %r" % (reply,))
        check_types(reply)
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


def stored(c):
    """{key: value}: everything the store holds."""
    out, cursor = {}, None
    while True:
        r = c.call(SCAN, None, cursor, None, 10000)
        assert r[0] == OK, r
        out.update(zip(r[1][0::2], r[1][1::2]))
        cursor = r[2]
        if cursor is None:
            return out


class Malformed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # BACKUP (a fuzz seed sends one) may write only in here
        cls.tmp = tempfile.mkdtemp(prefix="kvdmalformed-")
        cls.srv = Server(threads=2, args=["--max-frame-size", "1m", "--max-value-size", "4k",
                                          "--backup-dir", cls.tmp])
        cls.srv.start()
        cls.canary = cls.srv.client()

    @classmethod
    def tearDownClass(cls):
        cls.canary.close()
        cls.srv.stop()      # status 0: no crash, clean stop
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def alive(self, name):
        self.assertIsNone(self.srv.proc.poll(), "kvd died on %s" % name)
        self.assertEqual(self.canary.call(PING), [OK], "after %s" % name)

    def files(self):
        return sorted(f for f in os.listdir(CORPUS) if f.endswith(".bin"))

    def test_every_file_has_its_expectation(self):
        self.assertEqual(sorted(f[:-4] for f in self.files()), sorted(EXPECT))

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
                    self.assertEqual(self.canary.call(FLUSHALL), [OK])
                    got = [r[0] for r in replay(self.srv.port, data, rng if dribble else None)]
                    self.assertEqual(got, EXPECT.get(name))
                    self.alive(f)
                    # refused requests left nothing behind; accepted ones did
                    self.assertEqual(stored(self.canary), STORED.get(name, {}))
        grew = (rss_kib(self.srv.proc.pid) - rss0) / 1024
        # Not under a sanitizer (as test_load.py): TSan's shadow grows with
        # every page kvd touches (63 MiB over this corpus under TSan), and
        # ASan keeps freed memory in quarantine.
        if not sanitized(self.srv.proc.pid):
            self.assertLess(grew, 32, "kvd grew %.0f MiB over the corpus" % grew)

    def test_fuzz_seeds_framed(self):
        if not os.path.isdir(FUZZ_SEEDS):
            self.skipTest("no fuzz seed corpus")
        n = backups = 0
        for f in sorted(os.listdir(FUZZ_SEEDS)):
            with open(os.path.join(FUZZ_SEEDS, f), "rb") as fh:
                body = fh.read()
            if len(body) > (1 << 20):
                continue
            replies = replay(self.srv.port, struct.pack(">I", len(body)) + body)
            self.alive(f)
            n += 1
            try:
                req = msgpack.unpackb(body, raw=True)
            except Exception:
                continue
            if isinstance(req, list) and req[:1] == [BACKUP] and len(req) > 1 \
                    and isinstance(req[1], bytes) and req[1].startswith(b"/") \
                    and not req[1].startswith(self.tmp.encode()):
                # a path outside backup-dir is refused: no replay writes
                # anywhere but this test's own directory
                backups += 1
                self.assertEqual(replies[0][0], BAD_ARGS, "%s: BACKUP %r" % (f, req[1]))
        self.assertGreater(n, 0)
        self.assertGreater(backups, 0, "no BACKUP seed: the confinement went untested")
        # while a name lands in backup-dir, inside the test's directory
        self.assertEqual(self.canary.call(BACKUP, b"inside")[0], OK)
        self.assertIn("inside", os.listdir(self.tmp))


if __name__ == "__main__":
    main()
