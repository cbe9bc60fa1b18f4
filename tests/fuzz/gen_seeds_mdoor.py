#!/usr/bin/env python3
"""gen_seeds_mdoor.py - (re)write fuzz_mdoor's seeds in tests/fuzz/corpus/mdoor/.

    /usr/bin/python3 tests/fuzz/gen_seeds_mdoor.py

Each seed is a mode byte (see fuzz_mdoor.c: password, deferred writes,
sorting store, second connection, pausing scans, a read left yielded),
a piece-size byte, then a client's stream: OP_MSG messages (bodies and
kind-1 sequences, some checksummed, some moreToCome), OP_QUERY
handshakes, and broken ones (bad lengths, flags, sections, checksums,
OP_COMPRESSED).  BSON is written with
Debian's python3-bson (pymongo's).  Deterministic; the files are checked
in and replayed by `make test`.
"""

import os
import struct
import sys

import bson
from bson.int64 import Int64

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def op_msg(body, seqs=(), flags=0, rid=1, checksum=False):
    if checksum:
        flags |= 1
    payload = struct.pack("<I", flags) + b"\0" + bson.encode(body)
    for ident, docs in seqs:
        sec = ident.encode() + b"\0" + b"".join(bson.encode(d) for d in docs)
        payload += b"\1" + struct.pack("<i", 4 + len(sec)) + sec
    n = 16 + len(payload) + (4 if checksum else 0)
    m = struct.pack("<iiii", n, rid, 0, 2013) + payload
    if checksum:
        m += struct.pack("<I", crc32c(m))
    return m


def op_query(ns, q, rid=1):
    payload = struct.pack("<i", 0) + ns.encode() + b"\0" + \
        struct.pack("<ii", 0, -1) + bson.encode(q)
    return struct.pack("<iiii", 16 + len(payload), rid, 0, 2004) + payload


def cmd(name, val, db="test", **kw):
    d = {name: val}
    d.update(kw)
    d["$db"] = db
    return d


DOCS = [{"_id": i, "a": i % 3, "t": ["x", i], "s": {"k": i}} for i in range(6)]

SESSION = [
    op_query("admin.$cmd", {"isMaster": 1, "helloOk": True,
                            "client": {"driver": {"name": "seed"}}}),
    op_msg(cmd("hello", 1, "admin", saslSupportedMechs="admin.kvd")),
    op_msg(cmd("insert", "c"), [("documents", DOCS)]),
    op_msg(cmd("find", "c", filter={"a": {"$gte": 1}}, sort={"a": -1},
               projection={"t": 0}, batchSize=2)),
    op_msg(cmd("getMore", Int64(1), collection="c", batchSize=1)),
    op_msg(cmd("update", "c", updates=[
        {"q": {"a": 1}, "u": {"$inc": {"a": 10}, "$push": {"t": 7}},
         "multi": True},
        {"q": {"_id": 99}, "u": {"$set": {"a": 5}}, "upsert": True}])),
    op_msg(cmd("aggregate", "c", pipeline=[
        {"$match": {"a": {"$lt": 20}}}, {"$sort": {"_id": -1}},
        {"$group": {"_id": "$a", "n": {"$sum": 1}}}], cursor={"batchSize": 1})),
    op_msg(cmd("findAndModify", "c", query={"_id": 2}, update={"$set": {"z": 1}},
               new=True, fields={"z": 1})),
    op_msg(cmd("count", "c", query={"a": 0})),
    op_msg(cmd("distinct", "c", key="t")),
    op_msg(cmd("delete", "c", deletes=[{"q": {"a": 0}, "limit": 0}]),
           flags=2),
    op_msg(cmd("listCollections", 1, cursor={})),
    op_msg(cmd("listIndexes", "c")),
    op_msg(cmd("collStats", "c")),
    op_msg(cmd("dbStats", 1)),
    op_msg(cmd("killCursors", "c", cursors=[Int64(1)])),
    op_msg(cmd("create", "d")),
    op_msg(cmd("drop", "c")),
    op_msg(cmd("dropDatabase", 1)),
    op_msg(cmd("listDatabases", 1, "admin")),
    op_msg(cmd("serverStatus", 1, "admin"), checksum=True),
]

# $lookup in each of its forms, and a $match working in memory: over
# pausing scans each goes on from where its join stood
LOOKUP = [
    op_msg(cmd("aggregate", "c", cursor={}, pipeline=[
        {"$lookup": {"from": "c", "localField": "a", "foreignField": "a",
                     "as": "j"}}])),
    op_msg(cmd("aggregate", "c", cursor={"batchSize": 1}, pipeline=[
        {"$lookup": {"from": "c", "localField": "a", "foreignField": "_id",
                     "as": "j"}}, {"$project": {"j.t": 1}}])),
    op_msg(cmd("aggregate", "c", cursor={}, pipeline=[
        {"$lookup": {"from": "c", "localField": "a", "foreignField": "a",
                     "as": "j", "pipeline": [{"$match": {"_id": {"$gt": 1}}},
                                             {"$project": {"s": 1}}]}}])),
    op_msg(cmd("aggregate", "c", cursor={}, pipeline=[
        {"$limit": 2},
        {"$lookup": {"from": "c", "as": "j", "pipeline": [
            {"$match": {"a": 1}},
            {"$lookup": {"from": "c", "localField": "a",
                         "foreignField": "_id", "as": "k"}}]}}])),
    op_msg(cmd("aggregate", "c", cursor={}, pipeline=[
        {"$addFields": {"x": 1}}, {"$match": {"a": {"$gt": 0}}},
        {"$count": "n"}])),
]

AUTH = [
    op_msg(cmd("saslStart", 1, "admin", mechanism="SCRAM-SHA-256",
               payload=b"n,,n=kvd,r=abcdefghijklmnop",
               options={"skipEmptyExchange": True})),
    op_msg(cmd("saslContinue", 1, "admin", conversationId=1,
               payload=b"c=biws,r=abcdefghijklmnopXXXX,p=AAAA")),
    op_msg(cmd("hello", 1, "admin", speculativeAuthenticate={
        "saslStart": 1, "mechanism": "SCRAM-SHA-256",
        "payload": b"n,,n=kvd,r=xyz", "db": "admin"})),
    op_msg(cmd("find", "c")),
]

BROKEN = [
    struct.pack("<iiii", 15, 1, 0, 2013),
    struct.pack("<iiii", 48000001, 1, 0, 2013),
    struct.pack("<iiiiI", 21, 1, 0, 2013, 8) + b"\0",
    op_msg(cmd("ping", 1), flags=1 << 3),
    op_msg(cmd("ping", 1), checksum=True)[:-1] + b"\0",
    struct.pack("<iiiiiiB", 25, 1, 0, 2012, 2013, 10, 0),
    struct.pack("<iiii", 32, 1, 0, 2002) + bytes(16),
    op_msg(cmd("insert", "c"), [("documents", [{}]), ("documents", [{}])]),
    op_msg({"ping": 1}),
    op_msg(cmd("foo", 1)),
    op_msg(cmd("find", "c", txnNumber=Int64(1))),
]


def main():
    out = os.path.join(HERE, "corpus", "mdoor")
    os.makedirs(out, exist_ok=True)
    seeds = {
        "session": bytes([0, 255]) + b"".join(SESSION),
        "session-deferred": bytes([2, 3]) + b"".join(SESSION),
        "session-sorting-two": bytes([4 | 8, 0]) + b"".join(SESSION * 2),
        "auth": bytes([1, 255]) + b"".join(AUTH),
        "auth-deferred": bytes([3, 1]) + b"".join(AUTH + SESSION[:4]),
        # scans that pause (reads yield and go on), and a read left
        # yielded when its connection closes
        "session-pausing": bytes([16 | 2, 255]) + b"".join(SESSION),
        "session-abandoned": bytes([32 | 16, 255]) + b"".join(SESSION),
        "lookup": bytes([0, 255]) + b"".join(SESSION[:3] + LOOKUP),
        "lookup-pausing": bytes([16, 255]) + b"".join(SESSION[:3] + LOOKUP),
        "lookup-abandoned": bytes([32 | 16, 7]) +
        b"".join(SESSION[:3] + LOOKUP),
    }
    for i, m in enumerate(BROKEN):
        seeds["broken-%02d" % i] = bytes([i & 3, 255]) + m + SESSION[1]
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out))


if __name__ == "__main__":
    sys.exit(main())
