"""test_kvd_door_yield.py - a slow door read does not hold its io thread
(docs/mongodb.md, "Reads give their thread back"): kvd with one io
thread, so that every connection shares it, runs reads whose filter is a
regular expression that backtracks to PCRE2's match limit on every
document (about a fortieth of a second each here once PCRE2's JIT runs
it, seconds for the collection), with no maxTimeMS; meanwhile other connections on that
thread, door and RESP, are answered (each waiting at most for the slice
in progress, here one document's match), each read still gives the answer
it gives without the wait, writes whose filter is as slow (updateMany,
findAndModify with a sort, deleteMany) look for their documents the same
way, a client pipelining slow requests gets a slice of the thread at a
time, and a read's connection that closes mid-read leaves nothing
behind.
"""

import os
import socket
import sys
import threading
import time
import unittest

try:
    import bson
    import pymongo
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402

SLOW = {"s": {"$regex": "^(a+)+$"}}


def op_msg(doc, request_id):
    """An OP_MSG of one body section."""
    msg = bytes(4) + b"\x00" + bson.encode(doc)  # flags, section kind 0
    return (16 + len(msg)).to_bytes(4, "little") + \
        request_id.to_bytes(4, "little") + bytes(4) + \
        (2013).to_bytes(4, "little") + msg


def read_msg(s):
    """The body of the next OP_MSG reply on s."""
    def exactly(n):
        b = b""
        while len(b) < n:
            more = s.recv(n - len(b))
            assert more, "connection closed"
            b += more
        return b
    n = int.from_bytes(exactly(4), "little")
    rest = exactly(n - 4)
    return bson.decode(rest[12 + 4 + 1:])
N = 200  # slow documents: seconds of matching in all


class Yield(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(threads=1, password=None, resp=True)
        cls.cl = cls.host.client("")
        c = cls.cl.t.slow
        c.insert_many([{"_id": i, "s": "a" * 24 + "!", "g": i % 2}
                       for i in range(N)])
        c.insert_one({"_id": N, "s": "aaa", "g": 1})  # the one match

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def tearDown(self):
        self.assertIsNone(self.host.srv.proc.poll(), "kvd exited")

    def resp_ping(self):
        with socket.create_connection(("127.0.0.1", self.host.srv.resp_port),
                                      timeout=30) as s:
            s.sendall(b"PING\r\n")
            self.assertEqual(s.recv(64), b"+PONG\r\n")

    def while_slow(self, read, want):
        """Run read (on a client of its own) and, while it works, pings
        and a get by _id on other connections of the same io thread: all
        of them answered before it ends, and it answers want."""
        cl, other = self.host.client(""), self.host.client("")
        self.addCleanup(cl.close)
        self.addCleanup(other.close)
        for c in (cl, other):  # connected before the read starts
            c.admin.command("ping")
        got, ended = [], []

        def run():
            got.append(read(cl.t.slow))
            ended.append(time.monotonic())

        t = threading.Thread(target=run)
        started = time.monotonic()
        t.start()
        time.sleep(0.5)  # the read has reached the server
        # each waits at most for the slice in progress: one document's
        # match here, not the whole read
        for _ in range(2):
            self.assertEqual(other.admin.command("ping")["ok"], 1.0)
            self.assertEqual(other.t.slow.find_one({"_id": 3})["g"], 1)
            self.resp_ping()
        answered = time.monotonic()
        self.assertTrue(t.is_alive(), "the slow read ended before the "
                        "others were answered: it did not take seconds?")
        t.join(300)
        self.assertFalse(t.is_alive())
        # answered in the read's first half, not as it ends (when a read
        # holds the thread, all of them come back together)
        self.assertLess(answered - started, (ended[0] - started) / 2,
                        "others waited for the slow read")
        self.assertEqual(got[0], want)

    def test_count(self):
        self.while_slow(lambda c: c.count_documents(SLOW), 1)

    def test_find_sorted(self):
        self.while_slow(
            lambda c: [d["_id"] for d in
                       c.find({"$or": [SLOW, {"_id": {"$lt": 2}}]},
                              sort=[("g", -1), ("_id", 1)])],
            [1, N, 0])

    def test_aggregate_group(self):
        self.while_slow(
            lambda c: list(c.aggregate([
                {"$match": {"$or": [SLOW, {"_id": 0}]}},
                {"$group": {"_id": "$g", "n": {"$sum": 1}}},
                {"$sort": {"_id": 1}}])),
            [{"_id": 0, "n": 1}, {"_id": 1, "n": 1}])

    def test_distinct(self):
        self.while_slow(lambda c: c.distinct("g", SLOW), [1])

    def test_match_in_memory(self):
        """A stage working in memory between reads (a $match after an
        $addFields, which the scan cannot take) gives the thread back as
        the reads do."""
        self.while_slow(
            lambda c: list(c.aggregate([
                {"$addFields": {"x": 1}}, {"$match": SLOW},
                {"$project": {"_id": 1}}])),
            [{"_id": N}])

    def test_lookup_pipeline(self):
        """$lookup's pipeline over the whole foreign collection: its
        foreign read, and its $match over what it reads, in slices."""
        self.while_slow(
            lambda c: list(c.aggregate([
                {"$match": {"_id": 0}},
                {"$lookup": {"from": "slow", "as": "j", "pipeline": [
                    {"$match": SLOW}, {"$project": {"_id": 1}}]}},
                {"$project": {"j": 1}}])),
            [{"_id": 0, "j": [{"_id": N}]}])

    def test_lookup_per_document(self):
        """$lookup's equality then a pipeline over each input's matches
        (held: g has no index), in slices."""
        self.while_slow(
            lambda c: list(c.aggregate([
                {"$match": {"_id": {"$lt": 2}}},
                {"$lookup": {"from": "slow", "localField": "g",
                             "foreignField": "g", "as": "j", "pipeline": [
                                 {"$match": SLOW}, {"$project": {"_id": 1}}]}},
                {"$project": {"j": 1}}])),
            [{"_id": 0, "j": []}, {"_id": 1, "j": [{"_id": N}]}])

    def test_update_many(self):
        """A write whose filter is slow to match looks for its documents a
        slice at a time too (updateMany's batches)."""
        self.while_slow(
            lambda c: c.update_many({"$or": [SLOW, {"_id": 0}]},
                                    {"$inc": {"u": 1}}).modified_count, 2)
        self.assertEqual(
            sorted(d["_id"] for d in self.cl.t.slow.find({"u": {"$gt": 0}})),
            [0, N])

    def test_find_one_and_update_sorted(self):
        """findAndModify's first in its sort's order, found a slice at a
        time."""
        self.while_slow(
            lambda c: c.find_one_and_update(
                {"$or": [SLOW, {"_id": {"$lt": 2}}]}, {"$inc": {"k": 1}},
                sort=[("g", -1), ("_id", -1)])["_id"], N)
        self.assertEqual(self.cl.t.slow.find_one({"_id": N})["k"], 1)

    def test_delete_many(self):
        d = self.cl.t.slowd
        d.insert_many([{"_id": i, "s": "a" * 24 + "!"} for i in range(N)])
        d.insert_one({"_id": N, "s": "aaa"})
        self.while_slow(lambda c: c.database.slowd.delete_many(SLOW)
                        .deleted_count, 1)
        self.assertEqual(d.count_documents({}), N)
        d.drop()

    def test_explain_execution_stats(self):
        """explain's run (executionStats) reads a slice at a time too."""
        self.while_slow(
            lambda c: c.find(SLOW).explain()["executionStats"]
            ["totalDocsExamined"], N + 1)

    def test_pipelined_slow_requests(self):
        """A client that pipelines slow requests (finds by _id whose $regex
        backtracks on that one document: each request one document's
        match) holds its thread for a slice of them at a time, not for
        all of them: the connection's other requests wait for the loop's
        next turn."""
        def pipeline(_):
            with socket.create_connection(("127.0.0.1", self.host.mport),
                                          timeout=300) as s:
                s.sendall(b"".join(
                    op_msg({"find": "slow", "filter": dict(SLOW, _id=i),
                            "$db": "t"}, i) for i in range(40)))
                return sum(1 for _ in range(40)
                           if read_msg(s)["cursor"]["firstBatch"] == [])
        self.while_slow(pipeline, 40)

    def test_close_mid_read(self):
        """A read whose client goes away mid-read: its connection closes
        between slices and the read ends there (the server goes on)."""
        s = socket.create_connection(("127.0.0.1", self.host.mport))
        s.sendall(op_msg({"count": "slow", "query": SLOW, "$db": "t"}, 7))
        time.sleep(0.5)
        s.close()
        for _ in range(3):
            self.assertEqual(self.cl.admin.command("ping")["ok"], 1.0)
        st = self.cl.admin.command("serverStatus")
        self.assertEqual(st["metrics"]["cursor"]["open"]["total"], 0)


if __name__ == "__main__":
    unittest.main()
