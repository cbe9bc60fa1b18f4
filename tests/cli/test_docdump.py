"""test_docdump.py - kvcli dump and load carry documents: a kvd with keys,
documents of every BSON type, collections (an empty one, one with create's
options) and indexes, dumped and loaded into an empty kvd, which pymongo
then reads through its MongoDB door: the same documents byte for byte (raw
BSON compared), the same collections and index definitions, the indexes
built (the door's planner answers through them); with --base64 too.  A
dump of a server without documents is version 1's, and a version 1 dump
(no version line) loads as before; a dump of a later version is refused
by line."""

import datetime
import json
import os
import tempfile
import uuid

from bson.binary import Binary
from bson.codec_options import CodecOptions
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp
from cliutil import CliCase
from kvdtest import Server, free_port, main, mongo_client

RAW = CodecOptions(document_class=RawBSONDocument)


def every_type(i):
    return {
        "_id": i, "d": 1.5 + i, "s": "text %d" % i, "o": {"x": [1, {"y": None}]},
        "a": [1, "two", 3.0], "bin": Binary(bytes(range(i % 256)), 0),
        "uuid": Binary(uuid.UUID(int=i).bytes, 4), "oid": ObjectId(),
        "t": True, "date": datetime.datetime(2020, 1, 1, 0, 0, i % 60),
        "n": None, "re": Regex("^a.*", "i"), "i32": i, "i64": Int64(1 << 40),
        "ts": Timestamp(1000, i), "dec": Decimal128("1.10"),
        "min": MinKey(), "max": MaxKey(), "v": i % 5,
    }


class DocDump(CliCase):
    mport = free_port()
    SERVER = {"threads": 2, "args": ("--mongo-port", str(mport))}

    def setUp(self):
        super().setUp()
        m = mongo_client(self, self.mport)
        for name in m.list_database_names():
            if name not in ("admin", "local", "config"):
                m.drop_database(name)
        self.m = m

    def target(self):
        port = free_port()
        srv = Server(threads=2, args=["--mongo-port", str(port)])
        self.addCleanup(srv.cleanup)
        self.addCleanup(srv.stop)
        srv.start()
        return srv, mongo_client(self, port)

    def fill(self):
        m = self.m
        shop = m["shop"]
        shop.create_collection("empty")
        shop.create_collection("opts", storageEngine={"wiredTiger": {}})
        docs = [every_type(i) for i in range(2500)]  # several pages, batches
        shop["orders"].insert_many(docs)
        # a document whose fields are not in _id-first order as given, and
        # one whose _id is a document
        shop["orders"].insert_one({"z": 1, "_id": "zfirst", "a": {"b": 2}})
        shop["orders"].insert_one({"_id": {"k": 1, "j": Int64(2)}, "v": 1})
        shop["orders"].create_index([("v", 1)], name="v_1")
        shop["orders"].create_index([("s", -1), ("v", 1)], name="sv",
                                    sparse=True)
        shop["orders"].create_index([("d", 1)], name="d_pfe",
                                    partialFilterExpression={"d": {"$gt": 10}})
        m["other_db"]["c.with.dots"].insert_one({"_id": 1, "x": "y"})
        m["other_db"]["c.with.dots"].create_index([("date", 1)],
                                                  expireAfterSeconds=3600)
        self.ok("put", "plain", "value")
        self.ok("hset", "h", "f", "v")

    def raw_docs(self, m, db, coll):
        c = m[db].get_collection(coll, codec_options=RAW)
        return sorted(d.raw for d in c.find())

    def check_same(self, m2):
        m = self.m
        for db in ("shop", "other_db"):
            self.assertEqual(sorted(m2[db].list_collection_names()),
                             sorted(m[db].list_collection_names()), db)
            for coll in m[db].list_collection_names():
                self.assertEqual(self.raw_docs(m2, db, coll),
                                 self.raw_docs(m, db, coll), (db, coll))
                self.assertEqual(list(m2[db][coll].list_indexes()),
                                 list(m[db][coll].list_indexes()), (db, coll))
        opts = {c["name"]: c["options"] for c in m2["shop"].list_collections()}
        self.assertEqual(opts["opts"], {"storageEngine": {"wiredTiger": {}}})
        self.assertEqual(m2["shop"]["empty"].count_documents({}), 0)
        # built: the planner uses the index and it finds every match
        orders = m2["shop"]["orders"]
        plan = orders.find({"v": 3}).explain()
        self.assertIn("v_1", str(plan["queryPlanner"]["winningPlan"]))
        self.assertEqual(plan["executionStats"]["totalKeysExamined"], 500)
        self.assertEqual(orders.count_documents({"v": 3}), 500)

    def round_trip(self, *flags):
        srv2, m2 = self.target()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.jsonl")
            with open(path, "wb") as f:
                f.write(self.ok("dump", *flags))
            out = self.ok("load", *flags, path, port=srv2.port)
        self.check_same(m2)
        self.assertEqual(self.ok("get", "plain", port=srv2.port), b"value")
        return out

    def test_round_trip(self):
        self.fill()
        dumped = self.ok("dump")
        lines = [json.loads(x) for x in dumped.splitlines()]
        # keys first, then the version line and the collections' rows
        self.assertEqual([l.get("key") for l in lines[:2]], ["h", "plain"])
        self.assertEqual(lines[2], {"kvcli_dump": 2})
        kinds = [l["type"] for l in lines[3:]]
        self.assertEqual(kinds.count("collection"), 4)
        self.assertEqual(kinds.count("doc"), 2503)
        self.assertEqual(kinds.count("index"), 4)
        first = lines[3:][kinds.index("doc")]
        self.assertEqual(set(first), {"type", "db", "coll", "bson_b64"})
        out = self.round_trip()
        # 2 keys, 4 collections, 2503 documents, 4 indexes
        self.assertIn(b"rows 2513, errors 0", out)

    def test_round_trip_base64(self):
        self.fill()
        self.round_trip("--base64")

    def test_without_documents_version_1(self):
        self.ok("put", "k", "v")
        self.assertEqual(self.ok("dump"), b'{"key":"k","value":"v"}\n')
        # a version 1 dump loads as before; a later version is refused
        srv2, _ = self.target()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.jsonl")
            with open(path, "wb") as f:
                f.write(b'{"key":"k","value":"v"}\n{"kvcli_dump":3}\n'
                        b'{"type":"doc","db":"d","coll":"c","bson_b64":"eA=="}\n')
            rc, out, err = self.run_cli("load", path, port=srv2.port)
        self.assertEqual(rc, 2, err)
        self.assertIn(b":2: a dump of a version this kvcli does not read", err)
        self.assertIn(b":3: bson_b64: not a BSON document", err)
        self.assertEqual(self.ok("get", "k", port=srv2.port), b"v")

    def test_prefix_and_tsv_hold_keys_only(self):
        self.ok("put", "k", "v")
        self.ok("doc", "insert", "d.c", '{"_id": 1}')
        self.assertEqual(self.ok("dump", "--prefix", "k"),
                         b'{"key":"k","value":"v"}\n')
        self.assertEqual(self.ok("dump", "--tsv"), b"k\tv\n")


if __name__ == "__main__":
    main()
