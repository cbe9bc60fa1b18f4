"""test_kvd_purge.py - the keys of dropped collections and indexes are
deleted in the background (docs/architecture.md, "Indexes";
docs/mongodb.md), through a real kvd's --mongo-port (pymongo).

What the store holds is read where it ends up: SAVE (the RESP door)
checkpoints every shard, then mdb_dump (LMDB's own tool, a separate
process) lists the keys of the server's keyspaces ("kx": a keyspace byte,
then the key) in every shard's LMDB file.  A collection's documents are
keys "D" + [u32 collection id], an index's entries "I" + [u32 index id],
a unique index's reservations "I" + [u32 index id | 0x80000000].
drop, dropDatabase and dropIndexes leave none of them behind; a
collection made again under the name is empty and works; a purge a
kill -9 cut goes on at the next start.
"""

import glob
import os
import shutil
import socket
import subprocess
import sys
import unittest

import kvdtest

try:
    import pymongo  # noqa: F401
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402

N = 20000


def save(srv):
    """SAVE through the RESP door: every shard checkpointed to LMDB."""
    with socket.create_connection(("127.0.0.1", srv.resp_port), 30) as s:
        s.sendall(b"*1\r\n$4\r\nSAVE\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                break
            reply += chunk
    assert reply == b"+OK\r\n", reply


def store_keys(srv):
    """Every key of the server's keyspaces in the shards' LMDB files,
    after a SAVE: a list of bytes (keyspace byte first)."""
    save(srv)
    keys = []
    for d in sorted(glob.glob(os.path.join(srv.data_dir, "shard-*"))):
        out = subprocess.run(["mdb_dump", "-s", "kx", d],
                             capture_output=True, check=True).stdout
        body = out.split(b"HEADER=END\n", 1)[1].splitlines()
        keys += [bytes.fromhex(line.strip().decode())
                 for line in body[0:-1:2]]
    return keys


def prefixes(keys, ks):
    """The 4-byte ids under keyspace ks, and how many keys each has
    (a reservation's id without its top bit)."""
    out = {}
    for k in keys:
        if k[:1] == ks and len(k) >= 5:
            i = int.from_bytes(k[1:5], "big") & 0x7FFFFFFF
            out[i] = out.get(i, 0) + 1
    return out


def fill(c, n=N, unique=True):
    """n documents under two indexes, a (unique, unless told) and b, a."""
    c.create_index("a", unique=unique)
    c.create_index([("b", 1), ("a", -1)])
    c.insert_many(({"_id": i, "a": i, "b": i % 13} for i in range(n)),
                  ordered=False)


def gone(srv, ids):
    """Whether the store holds no key under any of ids."""
    keys = store_keys(srv)
    held = set(prefixes(keys, b"D")) | set(prefixes(keys, b"I"))
    return not held & ids


def host(durability="async", **kw):
    if not shutil.which("mdb_dump"):
        print("skipped: mdb_dump is not installed (lmdb-utils)")
        sys.exit(77)
    return KvdHost(password=None, resp=True, durability=durability, **kw)


class Purge(unittest.TestCase):
    def ids(self, srv):
        keys = store_keys(srv)
        return prefixes(keys, b"D"), prefixes(keys, b"I")

    def test_drop_collection(self):
        h = host(args=["--mongo-ttl-interval", "1"])
        try:
            db = h.client("").t
            fill(db.big, unique=False)  # reservations: the tests below
            docs, ixs = self.ids(h.srv)
            self.assertEqual(list(docs.values()), [N])
            self.assertEqual(sorted(ixs.values()), [N, N])
            db.big.drop()
            kvdtest.wait_for(lambda: gone(h.srv, set(docs) | set(ixs)), 60,
                             "the dropped collection's keys deleted")
            # the name again: a new, empty collection that works
            c = db.big
            self.assertEqual(c.count_documents({}), 0)
            c.create_index("a", unique=True)
            c.insert_many([{"_id": i, "a": i % 5} for i in range(5)])
            self.assertEqual(sorted(d["_id"] for d in c.find({"a": 3})
                                    .hint("a_1")), [3])
            with self.assertRaises(pymongo.errors.DuplicateKeyError):
                c.insert_one({"_id": 9, "a": 3})
            self.assertEqual(c.count_documents({}), 5)
            docs2, ixs2 = self.ids(h.srv)
            self.assertFalse((set(docs2) | set(ixs2)) &
                             (set(docs) | set(ixs)))
            self.assertEqual(list(docs2.values()), [5])
        finally:
            h.srv.cleanup()

    def test_drop_database(self):
        h = host(args=["--mongo-ttl-interval", "1"])
        try:
            cl = h.client("")
            fill(cl.gone.one, 3000)
            fill(cl.kept.two, 1000)
            docs, ixs = self.ids(h.srv)
            self.assertEqual(sorted(docs.values()), [1000, 3000])
            cl.drop_database("gone")
            dropped = {i for i, n in docs.items() if n == 3000} | \
                {i for i, n in ixs.items() if n in (3000, 6000)}
            self.assertEqual(len(dropped), 3)
            kvdtest.wait_for(lambda: gone(h.srv, dropped), 60,
                             "the dropped database's keys deleted")
            docs2, ixs2 = self.ids(h.srv)
            self.assertEqual(list(docs2.values()), [1000])
            self.assertEqual(sorted(ixs2.values()), [1000, 2000])
            self.assertEqual(cl.kept.two.count_documents({"b": 3}), 77)
        finally:
            h.srv.cleanup()

    def test_drop_indexes(self):
        h = host(args=["--mongo-ttl-interval", "1"])
        try:
            c = h.client("").t.ix
            fill(c, 5000)
            docs, before = self.ids(h.srv)
            c.drop_index("a_1")  # the unique one: entries, reservations
            after = {i: n for i, n in before.items() if n != 2 * 5000}
            self.assertEqual(len(after), 1)
            dropped = set(before) - set(after)
            kvdtest.wait_for(lambda: gone(h.srv, dropped), 60,
                             "the dropped index's keys deleted")
            docs2, ixs2 = self.ids(h.srv)
            self.assertEqual((docs2, ixs2), (docs, after))
            self.assertEqual(c.count_documents({"b": 4}), 385)
            c.drop_indexes()
            kvdtest.wait_for(lambda: gone(h.srv, set(after)), 60,
                             "every dropped index's keys deleted")
            self.assertEqual(self.ids(h.srv), (docs, {}))
            self.assertEqual(c.count_documents({}), 5000)
        finally:
            h.srv.cleanup()

    def test_replica_gets_the_deletes(self):
        # The replica does not purge: the primary's deletes arrive as
        # records and leave its shards as empty of the dropped keys.
        h = host(args=["--mongo-ttl-interval", "1"])
        r = None
        try:
            db = h.client("").t
            fill(db.rep, 2000)
            r = kvdtest.Server(resp=True, durability="async",
                               args=["--mongo-ttl-interval", "1",
                                     "--replicaof", "127.0.0.1",
                                     str(h.srv.port)]).start()
            docs, ixs = self.ids(h.srv)
            ids = set(docs) | set(ixs)
            kvdtest.wait_for(lambda: self.ids(r) == (docs, ixs), 60,
                             "the replica's copy")
            db.rep.drop()
            kvdtest.wait_for(lambda: gone(h.srv, ids), 60,
                             "the primary's purge")
            kvdtest.wait_for(lambda: self.ids(r) == ({}, {}), 60,
                             "the deletes on the replica")
        finally:
            if r:
                r.cleanup()
            h.srv.cleanup()

    def test_purge_goes_on_after_kill9(self):
        # A TTL interval of an hour: after the first pass at start, the
        # thread waits that long, so the drop's keys are still there when
        # kvd is killed; the list in the catalog makes the next start
        # purge them.
        h = host(durability="sync", args=["--mongo-ttl-interval", "3600"])
        try:
            db = h.client("").t
            fill(db.big, 5000)
            docs, ixs = self.ids(h.srv)
            ids = set(docs) | set(ixs)
            db.big.drop()
            self.assertFalse(gone(h.srv, ids))  # not purged yet
            h.srv.kill9()
            h.srv.start()
            kvdtest.wait_for(lambda: gone(h.srv, ids), 60,
                             "the purge finished after the restart")
            self.assertEqual(self.ids(h.srv), ({}, {}))
            self.assertEqual(h.client("").t.big.count_documents({}), 0)
        finally:
            h.srv.cleanup()


if __name__ == "__main__":
    unittest.main()
