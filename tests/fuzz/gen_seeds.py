#!/usr/bin/env python3
"""gen_seeds.py - (re)write the fuzzers' seed corpora in tests/fuzz/corpus/.

    python3 tests/fuzz/gen_seeds.py

  cmd/     native request bodies: every op in its valid forms, and the
           single-frame cases of tests/reliability/corpus/native
  mp/      msgpack objects of every type and width, nested, truncated
  config/  0x00 + a config file, or 0x01 + NUL-separated flags
  resp/    a flags byte (bits 0-2: chunk size, bit 3: not authenticated,
           bit 4: repeats) + RESP2 input: multibulk, inline, pipelines,
           protocol errors, commands of 100,000 arguments
  dispatch/ a flags byte (see fuzz_dispatch.c) + every command of both
           protocols (from kvd/resp/resp.h, common/kv_proto.h and cmd.c's ops[])
           with 0 .. arity+2 arguments, authenticated, not, and without a
           password; and with repeats (bit 6): glob patterns as long as
           max-frame-size allows, commands with tens of thousands of keys

Repeats are expand.h's (gen_seeds_input.rep): a few bytes of seed stand
for a megabyte of input.

Deterministic; the files are checked in.  Inputs the fuzzers find worth
keeping (crashes once fixed, new coverage) can be added to these
directories by hand: every file is replayed by `make test`.
"""

import os
import re
import struct
import sys

import msgpack

from gen_seeds_input import rep

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
# Opcodes come from the headers through the tests' one parser of them.
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from kvproto import (APPEND, AUTH, BACKUP, COUNT, DEL, EXISTS, EXPIRE,  # noqa: E402
                     FLUSHALL, GET, GETDEL, HELLO, INCR, MDEL, MGET, MPUT, OPS,
                     PING, PUT, SCAN, STATS, TTL)


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
    # Repeats (bit 4): 100,001 arguments, distinct keys, a bulk and an
    # inline line each as long as the limits, and more arguments than the
    # limit (1,048,576) announced.
    out["expand-many-args"] = bytes([16 | 7]) + b"*100002\r\n$4\r\nMGET\r\n" \
        + rep(b"$1\r\na\r\n", 100001) + mb(b"PING")
    out["expand-distinct-keys"] = bytes([16 | 5]) + b"*20002\r\n$3\r\nDEL\r\n" \
        + rep(b"$7\r\nk\xfe\r\n", 20001)
    out["expand-long-bulk"] = bytes([16 | 6]) + b"*2\r\n$4\r\nECHO\r\n$1000001\r\n" \
        + rep(b"x", 1000001) + b"\r\n"
    out["expand-over-frame"] = bytes([16 | 7]) + b"*2\r\n$4\r\nECHO\r\n$1048577\r\n" \
        + rep(b"x", 65537) * 16
    out["expand-inline-long"] = bytes([16 | 4]) + b"ECHO " + rep(b"y", 65537) + b"\r\n"
    out["expand-count-over"] = bytes([16 | 7]) + b"*1048577\r\n" + rep(b"$1\r\nb\r\n", 1009)
    return out


def resp_table():
    """[(name, arity)] from kvd/resp/resp.h: the arity is the number just before
    each row's RC_ flags."""
    with open(os.path.join(ROOT, "kvd", "resp", "resp.h")) as f:
        text = f.read().replace("\\\n", " ")
    rows = re.findall(r'X\(\s*\w+,\s*"([a-z_]+)",\s*\w+,[^"]*?(-?\d+),\s*(?:RC_|0,)', text)
    assert len(rows) > 30, "resp.h: command table not found"
    return [(n, int(a)) for n, a in rows]


def native_table():
    """[(name, number, min, max or None)] from kv_proto.h (kvproto.OPS, in
    the header's order) and cmd.c."""
    ops = [(n, num) for n, (num, _) in OPS.items()]
    with open(os.path.join(ROOT, "kvd", "native", "cmd.c")) as f:
        rows = re.findall(r"^\s*\[KV_OP_(\w+)\]\s*=\s*\w*\s*[({]([^)}]*)[)}]",
                          f.read(), re.M)
    # each row ends with its argument counts: ..., min, max
    counts = {n: (int(lo), None if hi == "VAR" else int(hi))
              for n, (lo, hi) in ((n, [x.strip() for x in body.split(",")][-2:])
                                  for n, body in rows)}
    assert len(ops) > 15 and len(counts) == len(ops), "kv_proto.h/cmd.c tables"
    return [(n, num) + counts[n] for n, num in ops]


# Plausible arguments, in order; longer requests repeat keys.  BACKUP's
# targets are relative (refused unread) or absolute, which fuzz_dispatch
# moves under its temporary directory: no seed writes anywhere else.
RESP_ARGS = {
    "auth": [b"default", b"pw"], "hello": [b"2", b"AUTH", b"default", b"pw", b"SETNAME", b"x"],
    "client": [b"SETNAME", b"conn", b"x"], "command": [b"DOCS", b"get", b"nosuch"],
    "config": [b"GET", b"max*", b"port"], "echo": [b"hi"], "info": [b"server", b"keyspace"],
    "keys": [b"k*"], "scan": [b"0", b"MATCH", b"k*", b"COUNT", b"10", b"TYPE", b"string"],
    "select": [b"0"], "flushall": [b"ASYNC"], "flushdb": [b"SYNC"],
    "set": [b"k", b"v", b"PX", b"100000", b"XX", b"GET", b"KEEPTTL"],
    "setex": [b"k", b"100", b"v"], "psetex": [b"k", b"100000", b"v"],
    "mset": [b"k", b"v", b"k2", b"v2"], "expire": [b"k", b"100", b"NX"],
    "pexpire": [b"k", b"100000", b"XX"], "expireat": [b"k", b"4000000000"],
    "pexpireat": [b"k", b"1"], "incrby": [b"n", b"5"], "decrby": [b"n", b"-9"],
    "incr": [b"n"], "decr": [b"n"], "ping": [b"hi"], "append": [b"k", b"v"],
    "getset": [b"k", b"v"], "setnx": [b"k", b"v"],
    "getrange": [b"k", b"0", b"-1"], "substr": [b"k", b"-3", b"100"],
    "getbit": [b"k", b"7"], "bitcount": [b"k", b"0", b"-1", b"BIT"],
    "bitpos": [b"k", b"1", b"0", b"-1", b"BIT"],
    "bitfield_ro": [b"k", b"GET", b"i8", b"#1", b"GET", b"u4", b"3"],
    "lcs": [b"k", b"k2", b"IDX", b"MINMATCHLEN", b"1", b"WITHMATCHLEN"],
    "object": [b"ENCODING", b"k"], "slowlog": [b"GET", b"-1"],
    "latency": [b"DOCTOR"], "wait": [b"0", b"0"], "touch": [b"k", b"k2"],
}
NATIVE_ARGS = {
    "HELLO": [1], "PING": [b"hi"], "PUT": [b"k", b"v", 100000, 1],
    "MPUT": [0, b"k", b"v", b"k2", b"v2"], "SCAN": [None, b"a", b"z", 10, 1],
    "COUNT": [b"k"], "INCR": [b"n", -2], "APPEND": [b"k", b"v"],
    "EXPIRE": [b"k", 100000], "AUTH": [b"pw"],
    "TXN": [[b"k", None], [4, b"k", b"v"], [13, b"n", 1], [3, b"k"], [22, b"k", b"k2"]],
    "RENAME": [b"k", b"k2", 1], "COPY": [b"k", b"k2", 1], "GETEX": [b"k", 100000, 0],
    "INCRBYFLOAT": [b"f", b"1.5"], "GETRANGE": [b"k", 0, -1],
    "SETRANGE": [b"k", 3, b"xyz"], "SETBIT": [b"b", 9, 1], "GETBIT": [b"b", 9],
    "BITCOUNT": [b"b", 0, -1, 1], "BITPOS": [b"b", 1, 0, -1, 0],
    "BITOP": [1, b"d", b"b", b"k", b"k2"],
}


def dispatch_seeds():
    """fuzz_dispatch: a flags byte (bit 0 RESP, bit 1 authenticated, bit 2
    no password, bits 3-5 chunk size), then every command of both
    protocols with 0 .. arity+2 arguments in one pipeline, then PING."""
    def mb(*args):
        return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

    def frame(obj):
        body = pk(obj)
        return struct.pack(">I", len(body)) + body

    out = {}
    for i, (name, arity) in enumerate(resp_table()):
        t = RESP_ARGS.get(name, [b"k", b"k2", b"k3"])
        reqs = [mb(name.upper().encode(), *(t + [b"k%d" % j for j in range(n)])[:n])
                for n in range(abs(arity) + 2) if name != "quit"]
        data = b"".join(reqs) + mb(b"PING") + (mb(b"QUIT") if i % 2 else b"")
        chunk = (i % 8) << 3
        out["resp-%s" % name] = bytes([1 | 2 | chunk]) + data
        out["resp-%s-noauth" % name] = bytes([1 | chunk]) + data
        out["resp-%s-nopass" % name] = bytes([1 | 4 | chunk]) + data
        inline = b"".join(b" ".join([name.encode()] + (t + [b"x"] * n)[:n]) + b"\r\n"
                          for n in range(abs(arity) + 2))
        out["resp-%s-inline" % name] = bytes([1 | 2 | ((i + 3) % 8) << 3]) + inline
    for i, (name, num, lo, hi) in enumerate(native_table()):
        t = NATIVE_ARGS.get(name, [b"k", b"k2", b"k3"])
        if name == "BACKUP":
            t = [b"/bk%d" % i, b"relative", b"/"]
        top = (lo if hi is None else hi) + 2
        data = b"".join(frame([num] + (t + [b"k%d" % j for j in range(n)])[:n])
                        for n in range(top + 1)) + frame([PING])
        chunk = (i % 8) << 3
        out["native-%s" % name.lower()] = bytes([2 | chunk]) + data
        out["native-%s-noauth" % name.lower()] = bytes([chunk]) + data
        out["native-%s-nopass" % name.lower()] = bytes([4 | chunk]) + data
    # A write, then reads of the same key before it commits (own writes),
    # and more replies than max-output holds (output stall and resume).
    out["resp-own-writes"] = bytes([3 | 7 << 3]) + mb(b"SET", b"k", b"v") + mb(b"GET", b"k") \
        + mb(b"INCR", b"k") + mb(b"MGET", b"k", b"j") + mb(b"DEL", b"k") + mb(b"EXISTS", b"k")
    out["resp-output-stall"] = bytes([3 | 7 << 3]) + mb(b"SET", b"big", b"x" * 40000) \
        + mb(b"GET", b"big") * 8 + mb(b"INCR", b"n") + mb(b"GET", b"big") * 4
    out["native-own-writes"] = bytes([2 | 7 << 3]) + frame([PUT, b"k", b"v"]) \
        + frame([GET, b"k"]) + frame([GETDEL, b"k"]) + frame([TTL, b"k"]) \
        + frame([MDEL, b"k", b"j"]) + frame([MGET, b"k"])
    out["resp-auth-then-all"] = bytes([1 | 7 << 3]) + mb(b"GET", b"k") + mb(b"AUTH", b"pw") \
        + mb(b"SET", b"k", b"1") + mb(b"INCRBY", b"k", b"2") + mb(b"HELLO") + mb(b"HELLO", b"2")
    out["resp-hello-alone-preauth"] = bytes([1]) + b"*1\r\n$5\r\nHELLO\r\n"
    # Keys to walk (SCAN pages and cursors, KEYS, COUNT), help texts,
    # unknown subcommands, bad expiry times.
    keys = mb(b"MSET", *[x for j in range(12) for x in (b"k%02d" % j, b"v")])
    out["resp-scan-pages"] = bytes([3 | 7 << 3]) + keys + mb(b"SCAN", b"0", b"COUNT", b"5") \
        + mb(b"SCAN", b"5", b"MATCH", b"k1*") + mb(b"KEYS", b"k0?") + mb(b"DBSIZE") \
        + mb(b"SCAN", b"0", b"TYPE", b"hash") + mb(b"SCAN", b"99999") + mb(b"INFO", b"keyspace")
    out["native-scan-pages"] = bytes([2 | 7 << 3]) \
        + frame([MPUT, 0, b"a", b"1", b"b", b"2", b"c", b"3"]) \
        + frame([SCAN, None, None, None, 2]) + frame([SCAN, b"", b"b", None, 1, 1]) \
        + frame([COUNT]) + frame([COUNT, b"a"]) + frame([EXISTS, b"a", b"z"]) \
        + frame([DEL, b"a"])
    out["resp-help"] = bytes([3 | 7 << 3]) + b"".join(
        mb(c, b"HELP") + mb(c, b"NOSUCH") for c in (b"CLIENT", b"COMMAND", b"CONFIG")) \
        + mb(b"CLIENT", b"ID", b"x") + mb(b"CONFIG", b"SET", b"a", b"b") + mb(b"COMMAND", b"COUNT")
    # Values for the string readers, and introspection: CLIENT LIST, INFO
    # and KILL, a MONITOR fed by the connection's own commands, SLOWLOG.
    out["resp-strings"] = bytes([3 | 7 << 3]) + mb(b"MSET", b"a", b"ohmytext", b"b", b"mynewtext",
                                                   b"n", b"12345", b"bits", b"foobar") \
        + mb(b"LCS", b"a", b"b", b"IDX", b"WITHMATCHLEN") + mb(b"LCS", b"a", b"b", b"LEN") \
        + mb(b"BITCOUNT", b"bits", b"5", b"30", b"BIT") + mb(b"BITPOS", b"bits", b"0", b"2", b"-1", b"BIT") \
        + mb(b"BITFIELD_RO", b"bits", b"GET", b"i64", b"0", b"GET", b"u63", b"#1") \
        + mb(b"GETRANGE", b"a", b"-5", b"-1") + mb(b"GETBIT", b"bits", b"4294967295") \
        + mb(b"OBJECT", b"ENCODING", b"n") + mb(b"OBJECT", b"REFCOUNT", b"n") + mb(b"OBJECT", b"HELP") \
        + mb(b"EXPIRETIME", b"a") + mb(b"RANDOMKEY") + mb(b"TOUCH", b"a", b"zz", b"a")
    out["resp-intro"] = bytes([3 | 7 << 3]) + mb(b"CLIENT", b"SETNAME", b"me") \
        + mb(b"CLIENT", b"LIST") + mb(b"CLIENT", b"LIST", b"ID", b"1", b"2") + mb(b"CLIENT", b"INFO") \
        + mb(b"CLIENT", b"KILL", b"ID", b"99") + mb(b"CLIENT", b"KILL", b"1.2.3.4:5") \
        + mb(b"CLIENT", b"NO-EVICT", b"on") + mb(b"SLOWLOG", b"GET", b"2") + mb(b"SLOWLOG", b"LEN") \
        + mb(b"INFO", b"all") + mb(b"INFO", b"commandstats") + mb(b"MONITOR") + mb(b"SET", b"k", b"a\"\n") \
        + mb(b"GET", b"k") + mb(b"SLOWLOG", b"RESET") + mb(b"LATENCY", b"LATEST") \
        + mb(b"CLIENT", b"KILL", b"USER", b"default", b"SKIPME", b"no")
    out.update(expand_seeds(mb, frame))
    out["resp-bad-expiry"] = bytes([3 | 7 << 3]) + mb(b"SET", b"k", b"v", b"EX", b"0") \
        + mb(b"SET", b"k", b"v", b"PX", b"99999999999999999") + mb(b"EXPIRE", b"k", b"x") \
        + mb(b"SETEX", b"k", b"-1", b"v") + mb(b"PEXPIREAT", b"k", b"9223372036854775807") \
        + mb(b"SET", b"k", b"v", b"NX", b"XX") + mb(b"SET", b"k", b"v", b"EX")
    return out


def expand_seeds(mb, frame):
    """fuzz_dispatch with repeats (flags bit 6): the audit's three stalls
    (PUBLISH against a long pattern, WATCH of many keys, SCAN MATCH and
    KEYS with a run of '*'), each as long as max-frame-size (512k there)
    allows, and commands with tens of thousands of keys on both protocols.
    A PUBLISH reaches the connection's own pattern inside MULTI (one
    connection per input, and a subscriber may not PUBLISH outside it); a
    pattern is under the fuzzer's max-output (64k), which subscriptions
    count against."""
    resp, native = bytes([0x40 | 3 | 7 << 3]), bytes([0x40 | 2 | 7 << 3])

    def keys(cmd, n, unit=b"$7\r\nk\xfe\r\n", per=1):
        return b"*%d\r\n$%d\r\n%s\r\n" % (n * per + 1, len(cmd), cmd) + rep(unit, n)

    def bulk(piece, times, tail=b""):
        return b"$%d\r\n" % (len(piece) * times + len(tail)) + rep(piece, times) + tail + b"\r\n"

    out = {}
    out["expand-publish-pattern"] = resp + mb(b"MULTI") \
        + b"*2\r\n$10\r\nPSUBSCRIBE\r\n" \
        + b"$60003\r\n*" + rep(b"a", 60001) + b"b\r\n" \
        + b"*3\r\n$7\r\nPUBLISH\r\n" + bulk(b"a", 120001, b"c") + b"$1\r\nm\r\n" \
        + b"*3\r\n$7\r\nPUBLISH\r\n" + bulk(b"a", 120001, b"b") + b"$1\r\nm\r\n" \
        + mb(b"EXEC")
    out["expand-publish-wild"] = resp + mb(b"MULTI") \
        + b"*2\r\n$10\r\nPSUBSCRIBE\r\n$8006\r\n*" + rep(b"a", 4001) + b"?" \
        + rep(b"a", 4001) + b"b*\r\n" \
        + b"*3\r\n$7\r\nPUBLISH\r\n" + bulk(b"a", 20001, b"c") + b"$1\r\nm\r\n" \
        + b"*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n" \
        + b"*3\r\n$6\r\nPUBSUB\r\n$8\r\nCHANNELS\r\n" + bulk(b"*", 400001, b"c") \
        + mb(b"EXEC")
    out["expand-scan-stars"] = resp + mb(b"MSET", b"ka", b"v", b"kx", b"v", b"x", b"v") \
        + keys(b"MSET", 10001, b"$7\r\ns\xfe\r\n$1\r\nv\r\n", 2) \
        + b"*6\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n" + bulk(b"*", 400001, b"x") \
        + b"$5\r\nCOUNT\r\n$5\r\n10000\r\n" \
        + b"*2\r\n$4\r\nKEYS\r\n" + bulk(b"*", 400001, b"[a-x]") \
        + b"*2\r\n$4\r\nKEYS\r\n" + bulk(b"*a", 200001)
    out["expand-watch"] = resp + keys(b"WATCH", 38401) + keys(b"WATCH", 20001) \
        + mb(b"SET", b"k000007", b"v") + mb(b"MULTI") + mb(b"GET", b"k000000") + mb(b"EXEC") \
        + keys(b"WATCH", 20001) + mb(b"MULTI") + mb(b"EXEC") + mb(b"UNWATCH")
    out["expand-many-keys"] = resp + keys(b"MSET", 20001, b"$7\r\nk\xfe\r\n$1\r\nv\r\n", 2) \
        + keys(b"MGET", 20001) + keys(b"EXISTS", 20001) + keys(b"TOUCH", 20001) \
        + keys(b"DEL", 20001)
    out["expand-config-get"] = resp + b"*10003\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n" \
        + rep(b"$8\r\n*m\xfe\r\n", 10001)
    n = 20001
    arr = b"\xdc" + struct.pack(">H", n + 1)
    for name, op, unit in (("mget", MGET, b"\xa7k\xfe"), ("exists", EXISTS, b"\xa7k\xfe"),
                           ("mdel", MDEL, b"\xa7k\xfe")):
        body = arr + pk(op) + rep(unit, n)
        blen = 3 + len(pk(op)) + n * 8
        out["expand-native-" + name] = native + frame([MPUT, 0, b"k000001", b"v"]) \
            + struct.pack(">I", blen) + body + frame([PING])
    body = b"\xdc" + struct.pack(">H", 2 * n + 2) + pk(MPUT) + pk(0) + rep(b"\xa7k\xfe\xa1v", n)
    out["expand-native-mput"] = native \
        + struct.pack(">I", 3 + len(pk(MPUT)) + 1 + n * 10) + body + frame([COUNT])
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
    write("dispatch", dispatch_seeds())


if __name__ == "__main__":
    main()
