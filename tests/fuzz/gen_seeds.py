#!/usr/bin/env python3
"""gen_seeds.py - (re)write the fuzzers' seed corpora in tests/fuzz/corpus/.

    python3 tests/fuzz/gen_seeds.py

  cmd/     native request bodies: every op in its valid forms, and the
           single-frame cases of tests/reliability/corpus/native
  mp/      msgpack objects of every type and width, nested, truncated
  config/  0x00 + a config file, or 0x01 + NUL-separated flags
  resp/    a flags byte (bits 0-2: chunk size, bit 3: not authenticated)
           + RESP2 input: multibulk, inline, pipelines, protocol errors

Deterministic; the files are checked in.  Inputs the fuzzers find worth
keeping (crashes once fixed, new coverage) can be added to these
directories by hand: every file is replayed by `make test`.
"""

import os
import struct

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
HELLO, PING, GET, PUT, DEL, MGET, MPUT, MDEL, EXISTS, SCAN, COUNT, STATS = range(1, 13)
INCR, APPEND, EXPIRE, TTL, GETDEL, FLUSHALL, AUTH, BACKUP = range(13, 21)


def pk(obj):
    return msgpack.packb(obj, use_bin_type=True)


def cmd_seeds():
    k, v = b"key", b"value"
    reqs = [
        [HELLO], [HELLO, 1], [PING], [PING, b"hi"], [GET, k], [GET, "strkey"],
        [PUT, k, v], [PUT, k, v, 1000], [PUT, k, v, 0, 1], [PUT, k, v, None, 4],
        [PUT, k, b""], [DEL, k], [MGET, k, b"k2", b"k3"], [MPUT, 0, k, v, b"k2", v],
        [MPUT, 5000, k, v], [MDEL, k, b"k2"], [EXISTS, k, b"k2"],
        [SCAN], [SCAN, b"p"], [SCAN, None, b"a", b"z", 10, 1], [COUNT], [COUNT, b"p"],
        [STATS], [INCR, k, 1], [INCR, k, -5], [APPEND, k, v], [EXPIRE, k, 100],
        [EXPIRE, k, 0], [TTL, k], [GETDEL, k], [FLUSHALL], [AUTH, b"pw"],
        [BACKUP, b"/tmp/b"], [MGET] + [b"k%d" % i for i in range(40)],
        [PUT, k, v * 1000], [PUT, True, None], [GET, 1 << 40],
    ]
    out = {"req-%02d" % i: pk(r) for i, r in enumerate(reqs)}
    native = os.path.join(ROOT, "tests", "reliability", "corpus", "native")
    if os.path.isdir(native):
        for f in sorted(os.listdir(native)):
            with open(os.path.join(native, f), "rb") as fh:
                data = fh.read()
            if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == len(data) - 4 \
                    and len(data) < 70000:
                out["native-" + f[:-4]] = data[4:]
    return out


def mp_seeds():
    objs = [
        None, True, False, 0, 1, 127, 128, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32,
        (1 << 64) - 1, -1, -32, -33, -128, -129, -32768, -32769, -(1 << 31), -(1 << 31) - 1,
        -(1 << 63), 1.5, 3.25e300, "", "a" * 31, "a" * 32, "a" * 255, "a" * 256, "a" * 65536,
        b"", b"b" * 255, b"b" * 256, b"b" * 65536, [], [1] * 15, [1] * 16, [1] * 65536, {},
        {i: i for i in range(15)}, {i: i for i in range(16)}, [[[[[]]]]], {b"k": [1, {2: b"x"}]},
        msgpack.ExtType(1, b"x"), msgpack.ExtType(2, b"xy"), msgpack.ExtType(3, b"x" * 4),
        msgpack.ExtType(4, b"x" * 8), msgpack.ExtType(5, b"x" * 16), msgpack.ExtType(6, b"x" * 3),
        msgpack.ExtType(7, b"x" * 300), msgpack.ExtType(8, b"x" * 65536),
        [PUT, b"key", b"value", 10, 1],
    ]
    out = {}
    for i, o in enumerate(objs):
        b = pk(o)
        out["obj-%02d" % i] = b
        if len(b) > 1:
            out["obj-%02d-cut" % i] = b[: min(len(b) // 2, 64)]
    out["float32"] = b"\xca\x3f\xc0\x00\x00"
    out["nest-33"] = b"\x91" * 33 + b"\xc0"
    out["nest-32"] = b"\x91" * 32 + b"\xc0"
    out["map-nest-33"] = b"\x81\xc0" * 33 + b"\xc0"
    out["invalid"] = b"\xc1"
    out["array32-huge"] = b"\xdd\xff\xff\xff\xff\xc0"
    out["str32-huge"] = b"\xdb\xff\xff\xff\xff"
    out["extra-bytes"] = pk([1, 2]) + b"\xc1\xdd\xff\xff\xff\xff"
    return out


def config_seeds():
    out = {}
    conf = os.path.join(ROOT, "packaging", "kvd.conf")
    if os.path.exists(conf):
        with open(conf, "rb") as f:
            out["packaging-kvd.conf"] = b"\x00" + f.read()
    files = [
        b"port 7379\nbind 127.0.0.1\n",
        b"# comment\n\n   # indented comment\nthreads 2\r\ndurability async\n",
        b'data-dir "/var/lib/kvd"\nlog-file ""\n',
        b"max-value-size 16m\nmax-frame-size 1g\nmap-size 64G\nmax-output 64kb\n",
        b"port 99999\n", b"port -1\n", b"port 12k\n", b"max-value-size 16x\n",
        b"durability maybe\n", b"nosuch 1\n", b"port\n", b"config other.conf\n",
        b"idle-timeout 0\nrequest-timeout 30\noutput-timeout 60\n",
        b"log-level debug\nprotected-mode no\nread-only yes\n",
        b"disable-commands FLUSHALL,KEYS\n",
        b"# " + b"x" * 1100 + b"\n",
        b"data-dir /" + b"d" * 600 + b"\n",
        b"port 1\x00port 2\n",
        b"\t port \t 7000 \t\n",
    ]
    for i, f in enumerate(files):
        out["file-%02d" % i] = b"\x00" + f
    flags = [
        [b"--port", b"7000"], [b"--port=7000"], [b"--durability", b"async", b"--threads", b"4"],
        [b"--test-config"], [b"--port"], [b"port"], [b"--"], [b"--max-frame-size", b"1k"],
        [b"--resp-port", b"7379"], [b"--map-size", b"1t"],
    ]
    for i, f in enumerate(flags):
        out["flags-%02d" % i] = b"\x01" + b"\x00".join(f)
    return out


def resp_seeds():
    def mb(*args):
        return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

    inputs = {
        "set-get": mb(b"SET", b"k", b"v") + mb(b"GET", b"k"),
        "pipeline": b"".join(mb(b"INCR", b"n") for _ in range(20)),
        "mset": mb(b"MSET", b"a", b"1", b"b", b"2", b"c", b"3"),
        "many-args": mb(b"MGET", *[b"k%d" % i for i in range(30)]),
        "binary": mb(b"SET", b"k\r\n", bytes(range(256))),
        "empty-bulk": mb(b"SET", b"k", b""),
        "inline": b"SET k v\r\nGET k\nPING\r\n",
        "inline-quotes": b'SET "a b" "c\\x41\\n\\"d" \'e\\\'f\'\r\n',
        "inline-unbalanced": b'SET "a\r\n',
        "inline-long": b"ECHO " + b"x" * 65536 + b"\r\n",
        "zero-count": b"*0\r\n*-1\r\n\r\n",
        "bad-count": b"*abc\r\n", "huge-count": b"*2147483648\r\n",
        "bad-bulk": b"*1\r\n$x\r\n", "neg-bulk": b"*1\r\n$-1\r\n",
        "short-bulk": b"*1\r\n$4\r\nPINGPONG\r\n", "not-dollar": b"*1\r\n:1\r\n",
        "truncated": b"*3\r\n$3\r\nSET\r\n$1\r\nk", "unknown": mb(b"NOSUCH", b"x"),
        "arity": mb(b"GET"), "auth": mb(b"AUTH", b"pw") + mb(b"GET", b"k"),
        "keys-disabled": mb(b"KEYS", b"*"), "scan": mb(b"SCAN", b"0", b"MATCH", b"k*", b"COUNT", b"10"),
        "big-bulk-preauth": b"*2\r\n$3\r\nSET\r\n$20000\r\n" + b"x" * 20000 + b"\r\n",
        "long-count-line": b"*" + b"1" * 100,
    }
    out = {}
    for name, data in inputs.items():
        out[name] = bytes([len(name) % 8]) + data
        if len(data) < 4096:
            out[name + "-noauth"] = bytes([8 | (len(name) % 8)]) + data
    return out


def write(sub, seeds):
    d = os.path.join(HERE, "corpus", sub)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.unlink(os.path.join(d, f))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (d, len(seeds)))


def main():
    write("cmd", cmd_seeds())
    write("mp", mp_seeds())
    write("config", config_seeds())
    write("resp", resp_seeds())


if __name__ == "__main__":
    main()
