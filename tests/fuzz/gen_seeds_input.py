#!/usr/bin/env python3
"""gen_seeds_input.py - (re)write the seed corpora of fuzz_http, fuzz_glob,
fuzz_json and fuzz_reply in tests/fuzz/corpus/.

    python3 tests/fuzz/gen_seeds_input.py

  http/   a flags byte (bit 0: requirepass set, bit 1: the rest is the
          credentials of a request built by the fuzzer) + a request
  glob/   after expand.h's repeats: the pattern's length (3 bytes,
          little-endian) + the pattern + the key
  json/   a mode byte (0 JSON, 1 msgpack, 2 JSON record, 3 TSV record;
          bit 2 --b64, bit 3 CRLF) + a document, or a key length, key
          and value
  reply/  the number of requests - 1 (bit 4: max_reply 1024) + one byte
          per request (fuzz_reply.c's ops[] index, MGET keys - 1 in bits
          5-7) + the server's byte stream

Deterministic (stdlib only); the files are checked in, and every file is
replayed by `make test` (see fuzz_*.c for what each target checks).
"""

import base64
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
PASSWORD = "pa:ss w\u00e9rd".encode()


def write(corpus, name, data):
    d = os.path.join(HERE, "corpus", corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def http():
    def req(head):
        return head.encode() + b"\r\n\r\n"

    def basic(cred):
        return base64.b64encode(cred).decode()

    write("http", "metrics", b"\0" + req("GET /metrics HTTP/1.1\r\nHost: x"))
    write("http", "metrics-query", b"\0" + req("GET /metrics?name=x HTTP/1.0"))
    write("http", "root", b"\0" + req("GET / HTTP/1.1"))
    write("http", "post", b"\0" + req("POST /metrics HTTP/1.1"))
    write("http", "no-method", b"\0" + req("G"))
    write("http", "incomplete", b"\0GET /metrics HTTP/1.1\r\nHost: x\r\n")
    write("http", "too-large", b"\0GET /metrics HTTP/1.1\r\nX: " + b"a" * 8200)
    write("http", "lf-only", b"\0GET /metrics HTTP/1.1\n\n")
    write("http", "auth-right", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nAuthorization: Basic " +
        basic(b"user:" + PASSWORD)))
    write("http", "auth-lowercase-spaces", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nauthorization:   basic    " +
        basic(b":" + PASSWORD)))
    write("http", "auth-wrong", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nAuthorization: Basic " + basic(b"u:nope")))
    write("http", "auth-no-colon", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nAuthorization: Basic " + basic(PASSWORD)))
    write("http", "auth-bad-base64", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nAuthorization: Basic !!!!"))
    write("http", "auth-bearer", b"\1" + req(
        "GET /metrics HTTP/1.1\r\nAuthorization: Bearer abc"))
    write("http", "auth-missing", b"\1" + req("GET /metrics HTTP/1.1"))
    write("http", "auth-in-request-line", b"\1" + req(
        "GET /metrics\r\nAuthorization: Basic " + basic(b"u:" + PASSWORD)))
    write("http", "built-right", b"\3u:" + PASSWORD)
    write("http", "built-colons", b"\3" + PASSWORD + b":" + PASSWORD)
    write("http", "built-wrong", b"\3u:" + PASSWORD[:-1])
    write("http", "built-empty", b"\3")
    write("http", "built-no-password", b"\2anything")


def rep(unit, times):
    """expand.h's repeat of unit, times = 16 * c + 1."""
    assert times % 16 == 1 and 0 < len(unit) < 256
    return b"\xff" + struct.pack("<H", times // 16) + bytes([len(unit)]) + unit


def glob():
    def case(name, pat, key, pat_len=None):
        n = len(pat) if pat_len is None else pat_len
        write("glob", name, struct.pack("<I", n)[:3] + pat + key)

    cases = [
        ("star", b"*", b"anything"),
        ("star-empty-key", b"*", b""),
        ("empty-empty", b"", b""),
        ("question", b"h?llo", b"hello"),
        ("stars", b"h*l*o", b"heeellllo"),
        ("class", b"h[ae]llo", b"hallo"),
        ("class-neg", b"h[^e]llo", b"hello"),
        ("range", b"key:[0-9][0-9]", b"key:42"),
        ("range-reversed", b"[z-a]", b"q"),
        ("range-to-bracket", b"[a-]]", b"]"),
        ("escaped-star", b"\\*x", b"*x"),
        ("escape-in-class", b"[\\]]", b"]"),
        ("unterminated-class", b"a[bc", b"ab"),
        ("trailing-backslash", b"a\\", b"a\\"),
        ("empty-class", b"[]", b"]"),
        ("high-bytes", b"[\x80-\xff]*", b"\xc3\xa9t\xc3\xa9"),
        ("backtrack", b"*a*a*a*a*b", b"a" * 60),
        ("prefix", b"user:*:name", b"user:1000:name"),
        ("no-match", b"abc", b"abd"),
        ("middle-class", b"*x[0-9]?y*z", b"aax1by--x22yz"),
        ("long-class", b"*[" + b"a" * 100 + b"]*", b"xxayy"),
        ("escaped-long-middle", b"*-" + b"\\a" * 100 + b"-*", b"--" + b"a" * 100 + b"-"),
        ("wild-long-middle", b"*" + b"ab" * 40 + b"?" + b"ab" * 40 + b"*",
         b"ab" * 100 + b"c" + b"ab" * 100),
    ]
    for name, pat, key in cases:
        case(name, pat, key)
    case("long-key", b"*a*", b"b" * 600)
    # What the 255-byte patterns missed: a run of 60,001 '*' (one star for
    # the matcher), PUBLISH's quadratic case (a '*' then a long literal
    # tail), and a long middle run holding a '?' (the bit-parallel search).
    case("star-run", rep(b"*", 60001) + b"x", b"a" * 500 + b"x", 60002)
    case("publish-audit", b"*" + rep(b"a", 20001) + b"b",
         rep(b"a", 40001) + b"c", 20003)
    case("wild-middle-window", b"*" + rep(b"a", 4001) + b"?" + rep(b"a", 4001) + b"b*",
         rep(b"a", 20001) + b"c", 8006)
    # Redis's nesting limit: 1,000 runs of '*' followed by something match,
    # 1,001 never do.
    case("nest-1000", rep(b"*a", 993) + b"*a" * 7, b"a" * 2000, 2000)
    case("nest-1001", rep(b"*a", 993) + b"*a" * 8, b"a" * 2000, 2002)


def json_():
    docs = {
        "doc": b'{"key":"a","value":{"x":[1,2.5,-3,true,false,null]}}',
        "escapes": b'"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"',
        "lone-high": b'"\\ud800"',
        "lone-low": b'"\\udc00x"',
        "control": b'"a\x01b"',
        "bad-utf8": b'"\xc3\x28"',
        "big-int": b"[18446744073709551615,18446744073709551616,-9223372036854775809]",
        "floats": b"[1e400,-0,-0.0,1E-5,0.1]",
        "bad-numbers": b"[01]",
        "trailing-comma": b'{"a":1,}',
        "deep-32": b"[" * 32 + b"]" * 32,
        "deep-33": b"[" * 33 + b"]" * 33,
        "empty": b"  {} ",
        "two-values": b"1 2",
    }
    for name, d in docs.items():
        write("json", "json-" + name, b"\0" + d)
    mps = {
        "map": b"\x82\xa1a\x01\xa1b\x92\xc3\xc0",
        "float": b"\x91\xcb" + struct.pack(">d", 1.0),
        "nan": b"\xcb" + struct.pack(">d", float("nan")),
        "bin": b"\x91\xc4\x01x",
        "str8-short": b"\xd9\x01a",
        "int-key": b"\x81\x01\x02",
        "trailing": b"\x90\x90",
    }
    for name, m in mps.items():
        write("json", "mp-" + name, b"\1" + m)

    def rec(mode, key, val):
        return bytes([mode, len(key)]) + key + val

    write("json", "record-text", rec(2, b"user:1", b"Ada Lovelace"))
    write("json", "record-doc", rec(2, b"k", b"\x81\xa1n\x92\x01\xcb" +
                                    struct.pack(">d", 0.5)))
    write("json", "record-binary", rec(2, b"\xff\x00", b"\xfe\x01\n\""))
    write("json", "record-b64", rec(6, b"k", b"\x00\x01\x02"))
    write("json", "record-crlf", rec(10, b"k", b"v"))
    write("json", "tsv-text", rec(3, b"k\tx", b"v\\n\r\x00\x7f"))
    write("json", "tsv-crlf", rec(11, b"k", b"v\r"))
    write("json", "tsv-b64", rec(7, b"\xff", b""))
    write("json", "tsv-escapes", b"\3\0\\x41\\t\\\\\\0\\n\\r")
    write("json", "tsv-bad-escapes", b"\3\0a\\x4g\\q\\")


def reply():
    HELLO, PING, GET, MGET, MDEL, SCAN, STATS, INCR, TTL = 0, 1, 2, 5, 7, 9, 11, 12, 15
    PUT = 3

    def keys(op, n):
        """The request byte for op with n keys (ops[] has 20 entries)."""
        return next(b for b in range(256) if b % 20 == op and (b >> 5) + 1 == n)

    def frame(body):
        return struct.pack(">I", len(body)) + body

    def seed(name, ops, stream, small=False):
        head = (len(ops) - 1) | (16 if small else 0)
        write("reply", name, bytes([head] + ops) + stream)

    ok_get = frame(b"\x92\x00\xa1v")
    seed("get", [GET], ok_get)
    seed("get-not-found", [GET], frame(b"\x91\x01"))
    seed("get-error-text", [GET], frame(b"\x92\x0c\xa3bad"))
    seed("get-bad-type", [GET], frame(b"\x92\x00\x05"))
    seed("get-trailing", [GET], frame(b"\x92\x00\xa1v\xc0"))
    seed("put-ok", [PUT], frame(b"\x91\x00"))
    seed("hello", [HELLO], frame(
        b"\x92\x00\x82\xa7version\xa51.0.0\xa7max_key\xcd\x01\xff"))
    seed("stats-float", [STATS], frame(b"\x92\x00\x81\xa7max_key\xcb" +
                                       struct.pack(">d", 3.0)))
    seed("mget", [keys(MGET, 2)], frame(b"\x93\x00\xa1a\xc0"))
    seed("mget-short", [keys(MGET, 2)], frame(b"\x92\x00\xa1a"))
    seed("scan-keys-only", [keys(SCAN, 5) | 0x80], frame(b"\x93\x00\x91\xa1k\xc0"))
    seed("scan", [SCAN], frame(b"\x93\x00\x92\xa1k\xa1v\xa1k"))
    seed("scan-end", [SCAN], frame(b"\x93\x00\x90\xc0"))
    seed("scan-odd", [SCAN], frame(b"\x93\x00\x91\xa1k\xc0"))
    seed("incr-negative", [INCR], frame(b"\x92\x00\xd3" +
                                        struct.pack(">q", -5)))
    seed("mdel-negative", [MDEL], frame(b"\x92\x00\xff"))
    seed("ttl-u64", [TTL], frame(b"\x92\x00\xcf" + b"\xff" * 8))
    seed("ping-two", [PING, PING], frame(b"\x91\x00") + frame(b"\x92\x00\xa2hi"))
    seed("pipeline", [GET, INCR, HELLO], ok_get + frame(b"\x92\x00\x07") +
         frame(b"\x92\x00\x80"))
    seed("truncated", [GET, GET], ok_get + ok_get[:5])
    seed("closed-early", [GET, GET, GET], ok_get)
    seed("short-header", [GET], b"\x00\x00")
    seed("huge-length", [GET], b"\xff\xff\xff\xff\x92\x00")
    seed("over-small-limit", [GET], frame(b"\x92\x00\xc5\x04\x00" + b"x" * 1024),
         small=True)
    seed("client-status", [GET], frame(b"\x91\x43"))
    seed("empty-array", [GET], frame(b"\x90"))


if __name__ == "__main__":
    http()
    glob()
    json_()
    reply()
