#!/usr/bin/env python3
"""gen_corpus.py - (re)write the malformed-input corpus of the native protocol.

    python3 tests/reliability/gen_corpus.py

Each file of corpus/native/ is what one connection sends: frames (a 4-byte
big-endian length, then a msgpack body) that are truncated, oversized,
nested, of the wrong types, or plain garbage, sometimes after valid
requests.  test_malformed.py replays them against a live kvd started with
--max-frame-size 1m --max-value-size 4k.  The files are checked in; run
this only to change the corpus (it is deterministic).
"""

import os
import random
import struct

import sys

import msgpack

# Opcodes from common/kv_proto.h itself, through the integration harness's
# parser: no second copy of the table to fall out of step.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from kvproto import (MAX_OP, HELLO, PING, GET, PUT, DEL, MGET, MPUT, MDEL,  # noqa: E402,F401
                     EXISTS, SCAN, COUNT, STATS, INCR, APPEND, EXPIRE, TTL,
                     GETDEL, FLUSHALL, AUTH)


def body(obj):
    return msgpack.packb(obj, use_bin_type=True)


def fr(b):
    """A frame around raw body bytes."""
    return struct.pack(">I", len(b)) + b


def hdr(n):
    return struct.pack(">I", n)


def nest(depth, leaf=b"\xc0"):
    return b"\x91" * depth + leaf


def cases():
    r = random.Random(6)
    ping = fr(body([PING]))
    c = {
        # framing
        "empty": b"",
        "header-1-byte": b"\x00",
        "header-3-bytes": b"\x00\x00\x00",
        "body-truncated": hdr(10) + b"\x93\x03",
        "body-empty": hdr(0),
        "len-2^31": hdr(1 << 31) + b"\x91\x02",
        "len-2^32-1": hdr(0xFFFFFFFF) + b"\x91\x02",
        "len-max-frame+1": hdr((1 << 20) + 1) + b"\x91\x02" * 100,
        "len-max-frame-truncated": hdr(1 << 20) + b"\x92\x02" + b"\x00" * 1000,
        "len-below-max-never-sent": hdr((1 << 20) - 8) + b"\xdd\x00\x00\x00\x02",
        "ping-then-huge": ping + hdr(0xFFFFFFF0),
        "ping-then-truncated": ping * 3 + hdr(40) + b"\x92",
        "body-longer-than-array": fr(b"\x91\x02\x02\x02"),
        "two-arrays-one-frame": fr(body([PING]) + body([PING])),
        # not a request
        "invalid-0xc1": fr(b"\xc1"),
        "not-array-map": fr(body({1: 2})),
        "not-array-uint": fr(body(5)),
        "not-array-str": fr(body("GET k")),
        "not-array-nil": fr(b"\xc0"),
        "array-empty": fr(b"\x90"),
        "array32-2^32-1-items": fr(b"\xdd\xff\xff\xff\xff\x02"),
        "array16-truncated": fr(b"\xdc\xff\xff"),
        "map32-huge": fr(b"\xdf\xff\xff\xff\xff"),
        # opcodes
        "op-zero": fr(body([0])),
        "op-255": fr(body([255])),
        "op-max-known+1": fr(body([MAX_OP + 1])),
        "op-u64-max": fr(body([(1 << 64) - 1])),
        "op-negative": fr(body([-1])),
        "op-int64-min": fr(body([-(1 << 63)])),
        "op-string": fr(body(["GET", b"k"])),
        "op-float": fr(body([3.0, b"k"])),
        "op-nil": fr(body([None, b"k"])),
        "op-bool": fr(body([True])),
        "op-bin": fr(body([b"\x03", b"k"])),
        # a body that is not well formed is MALFORMED whatever else is
        # wrong with it (an unknown op, a nested argument before the break)
        "op-unknown-body-truncated": fr(b"\x93\xcc\xff"),
        "op-unknown-trailing": fr(body([255]) + b"\x01"),
        "op-unknown-nested-arg": fr(body([255, [1]])),
        "arg-nested-then-truncated": fr(b"\x93" + bytes([GET]) + b"\x91"),
        "arg-map-then-trailing": fr(body([GET, {b"a": 1}]) + b"\xc0"),
        "arg-float-then-missing": fr(b"\x93" + bytes([GET]) + b"\xca\x00\x00\x00\x00"),
        # arguments
        "get-no-args": fr(body([GET])),
        "get-five-args": fr(body([GET, b"a", b"b", b"c", b"d", b"e"])),
        "get-int-key": fr(body([GET, 42])),
        "get-empty-key": fr(body([GET, b""])),
        "get-key-512": fr(body([GET, b"k" * 512])),
        "get-key-nested": fr(body([GET, [b"k"]])),
        "get-key-map": fr(body([GET, {b"k": 1}])),
        "get-key-ext": fr(body([GET, msgpack.ExtType(5, b"k")])),
        "get-key-fixext16": fr(b"\x92\x03\xd8\x05" + b"k" * 16),
        "get-key-float": fr(body([GET, 1.5])),
        "put-nil-value": fr(body([PUT, b"k", None])),
        "put-value-map": fr(body([PUT, b"k", {1: 1}])),
        "put-value-too-large": fr(body([PUT, b"k", b"v" * 4097])),
        "put-ttl-negative": fr(body([PUT, b"k", b"v", -1])),
        "put-ttl-u64-max": fr(body([PUT, b"k", b"v", (1 << 64) - 1])),
        "put-ttl-float": fr(body([PUT, b"k", b"v", 1.0])),
        "put-flags-bad": fr(body([PUT, b"k", b"v", 0, 255])),
        "put-flags-nx-xx": fr(body([PUT, b"k", b"v", 0, 3])),
        "put-bin32-2^32-1-truncated": fr(b"\x93\x04\xa1k\xc6\xff\xff\xff\xff" + b"v" * 10),
        "put-str32-2^31-truncated": fr(b"\x93\x04\xdb\x80\x00\x00\x00k"),
        "put-ext32-huge": fr(b"\x93\x04\xa1k\xc9\xff\xff\xff\xff\x05"),
        "mput-odd-pairs": fr(body([MPUT, 0, b"a", b"1", b"b"])),
        "mput-ttl-string": fr(body([MPUT, b"x", b"a", b"1"])),
        "mput-int-key": fr(body([MPUT, 0, 1, b"1"])),
        "mput-one-bad-key-of-many": fr(body([MPUT, 0] + sum(([b"k%d" % i if i != 77 else b"", b"v"]
                                                             for i in range(100)), []))),
        "mdel-nil-key": fr(body([MDEL, b"a", None])),
        "mget-array-key": fr(body([MGET, b"a", [b"b"]])),
        "scan-bad-flags": fr(body([SCAN, None, None, None, 10, 99])),
        "scan-limit-zero": fr(body([SCAN, None, None, None, 0])),
        "scan-prefix-too-long": fr(body([SCAN, b"p" * 600])),
        "scan-prefix-int": fr(body([SCAN, 5])),
        "incr-u64-max": fr(body([INCR, b"n", (1 << 64) - 1])),
        "incr-int64-min": fr(body([INCR, b"n", -(1 << 63)])),
        "incr-bin-delta": fr(body([INCR, b"n", b"1"])),
        "expire-huge": fr(body([EXPIRE, b"k", (1 << 64) - 1])),
        "expire-negative": fr(body([EXPIRE, b"k", -5])),
        "hello-version-3": fr(body([HELLO, 3])),
        "hello-version-string": fr(body([HELLO, "1"])),
        "flushall-with-args": fr(body([FLUSHALL, b"x"])),
        "stats-with-args": fr(body([STATS, 1])),
        "auth-no-password": fr(body([AUTH, b"secret"])),
        "ping-map-arg": fr(body([PING, {}])),
        # depth and size bombs
        "nest-20000-in-args": fr(b"\x92\x02" + nest(20000)),
        "nest-20000-top": fr(nest(20000)),
        "map-nest-10000": fr(b"\x92\x02" + b"\x81\xc0" * 10000 + b"\xc0"),
        "many-nil-args": fr(body([MGET] + [None] * 60000)),
        "mget-20000-keys": fr(body([MGET] + [b"k%d" % i for i in range(20000)])),
        # writes mixed with bad frames: the bad one must not apply half
        "put-then-bad": fr(body([PUT, b"ok1", b"v"])) + fr(b"\xc1") + fr(body([GET, b"ok1"])),
        "writes-then-huge": b"".join(fr(body([PUT, b"w%d" % i, b"v"])) for i in range(50)) + hdr(1 << 31),
        "pipeline-then-garbage": ping * 100 + bytes(r.getrandbits(8) for _ in range(300)),
        # garbage
        "garbage-1k": bytes(r.getrandbits(8) for _ in range(1024)),
        "garbage-frames": b"".join(fr(bytes(r.getrandbits(8) for _ in range(r.randint(0, 64)))) for _ in range(200)),
        "ascii-resp": b"*1\r\n$4\r\nPING\r\n",
        "http-get": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    }
    # each byte of a valid PUT flipped in turn, in one stream (an hour's
    # TTL: the keys some flips write are still there when the test looks)
    put = body([PUT, b"key", b"value", 3600000, 1])
    flips = b""
    for i in range(len(put)):
        m = bytearray(put)
        m[i] ^= 0xFF
        flips += fr(bytes(m))
    c["put-each-byte-flipped"] = flips
    return c


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "native")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.unlink(os.path.join(out, f))
    for name, data in sorted(cases().items()):
        with open(os.path.join(out, "%s.bin" % name), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(cases()), out))


if __name__ == "__main__":
    main()
