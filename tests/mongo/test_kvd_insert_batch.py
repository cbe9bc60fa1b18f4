"""test_kvd_insert_batch.py - insert batches sent ahead of their results
(kvd/doc/doc_mdoor_pipe.c, "insert batches sent ahead"), against a real kvd in
sync mode through pymongo: a batch of 1,000 documents takes far fewer
commits than documents; MongoDB's ordered and unordered semantics hold
(nothing after an ordered batch's first failure is left inserted, whether
the failure was foreseeable, an _id already stored or repeated in the
batch, or not, an index key refused mid-batch; and after a foreseeable one
a concurrent reader never sees a document past it); every document of an
acknowledged batch is there after kill -9.
"""

import os
import sys
import threading
import unittest

import kvdtest

try:
    from pymongo.errors import BulkWriteError
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import HostCase, KvdHost, Poller  # noqa: E402


def commits(host):
    return host.stats()[b"commits"]


def failure(case, call):
    with case.assertRaises(BulkWriteError) as e:
        call()
    d = e.exception.details
    return d["nInserted"], [(x["index"], x["code"])
                            for x in d["writeErrors"]]


class InsertBatch(HostCase):
    db_name = "ib"

    def setUp(self):
        self.db.c.drop()
        self.col = self.db.c

    def ids(self):
        return sorted(d["_id"] for d in self.col.find({}, {"_id": 1}))

    def test_batch_shares_commits(self):
        """Sent one at a time, 1,000 documents took at least 1,000
        commits (one flush each in sync mode)."""
        self.col.insert_one({"_id": -1})  # the collection exists
        before = commits(self.host)
        docs = [{"_id": i, "pad": "x" * 100} for i in range(1000)]
        for ordered in (True, False):
            self.col.delete_many({"_id": {"$gte": 0}})
            r = self.col.insert_many(docs, ordered=ordered)
            self.assertEqual(len(r.inserted_ids), 1000)
            self.assertEqual(self.col.count_documents({}), 1001)
        n = commits(self.host) - before
        self.assertLess(n, 1000, "2,000 inserts and two deletes took %d "
                        "commits" % n)

    def test_ordered_stops_at_stored_id(self):
        self.col.insert_one({"_id": 500})
        n, errs = failure(self, lambda: self.col.insert_many(
            [{"_id": i} for i in range(1000)]))
        self.assertEqual((n, errs), (500, [(500, 11000)]))
        self.assertEqual(self.ids(), list(range(501)))

    def test_ordered_stored_id_never_seen_past(self):
        """An ordered batch whose document 2000 repeats a stored _id: a
        reader polling meanwhile never sees a document after it (it goes
        alone, nothing after it sent before its result)."""
        self.col.insert_one({"_id": 2000, "old": True})
        rc = self.host.client(self.creds).ib.c
        with Poller(lambda: rc.count_documents({"_id": {"$gt": 2000}})) as p:
            n, errs = failure(self, lambda: self.col.insert_many(
                [{"_id": i} for i in range(4000)]))
        rc.database.client.close()
        self.assertEqual((n, errs), (2000, [(2000, 11000)]))
        self.assertGreater(len(p.seen), 1)
        self.assertEqual(max(p.seen), 0)
        self.assertEqual(self.ids(), list(range(2001)))

    def test_ordered_stops_at_repeated_id(self):
        n, errs = failure(self, lambda: self.col.insert_many(
            [{"_id": i % 700, "i": i} for i in range(1000)]))
        self.assertEqual((n, errs), (700, [(700, 11000)]))
        self.assertEqual(self.ids(), list(range(700)))
        self.assertEqual(self.col.count_documents({"i": {"$gte": 700}}), 0)

    def test_unordered_goes_on(self):
        n, errs = failure(self, lambda: self.col.insert_many(
            [{"_id": i % 700, "i": i} for i in range(1000)], ordered=False))
        self.assertEqual(n, 700)
        self.assertEqual([i for i, _ in errs], list(range(700, 1000)))
        self.assertEqual({c for _, c in errs}, {11000})
        self.assertEqual(self.col.count_documents({"i": {"$lt": 700}}), 700)

    def test_ordered_failure_not_foreseen_undoes_later(self):
        """Parallel arrays under a compound index fail in the committer,
        after the documents behind them were sent: those are deleted
        again and reported as not run."""
        self.col.create_index([("x", 1), ("y", 1)])
        docs = [{"_id": i, "x": i, "y": i} for i in range(600)]
        docs[150] = {"_id": 150, "x": [1, 2], "y": [3, 4]}
        n, errs = failure(self, lambda: self.col.insert_many(docs))
        self.assertEqual((n, errs), (150, [(150, 171)]))
        self.assertEqual(self.ids(), list(range(150)))
        # and nothing of them is left in the index
        self.assertEqual(self.col.count_documents(
            {"x": {"$gte": 0}}, hint=[("x", 1), ("y", 1)]), 150)

    def test_unordered_failure_not_foreseen(self):
        self.col.create_index([("x", 1), ("y", 1)])
        docs = [{"_id": i, "x": i, "y": i} for i in range(600)]
        docs[150] = {"_id": 150, "x": [1, 2], "y": [3, 4]}
        n, errs = failure(self, lambda: self.col.insert_many(
            docs, ordered=False))
        self.assertEqual((n, errs), (599, [(150, 171)]))
        self.assertEqual(len(self.ids()), 599)

    def test_new_collection(self):
        r = self.db.fresh.insert_many([{"_id": i} for i in range(300)])
        self.assertEqual(len(r.inserted_ids), 300)
        self.assertEqual(self.db.fresh.count_documents({}), 300)
        self.db.fresh.drop()


class InsertBatchKill9(unittest.TestCase):
    def test_acknowledged_batches_survive(self):
        """kill -9 while a client inserts batches: every document of each
        batch acknowledged is there after the restart."""
        host = KvdHost()
        acked, stop = [], threading.Event()

        def run():
            cl = host.client()
            b = 0
            try:
                while not stop.is_set():
                    cl.ib.k.insert_many(
                        [{"_id": b * 1000 + i, "v": "y" * 200}
                         for i in range(1000)], ordered=bool(b % 2))
                    acked.append(b)
                    b += 1
            except Exception:
                pass  # the kill

        try:
            t = threading.Thread(target=run)
            t.start()
            kvdtest.wait_for(lambda: len(acked) >= 3, 60, "batches")
            host.srv.kill9()
            stop.set()
            t.join()
            host.start_again()
            cl = host.client()
            for b in list(acked):
                self.assertEqual(cl.ib.k.count_documents(
                    {"_id": {"$gte": b * 1000, "$lt": b * 1000 + 1000}}),
                    1000, "batch %d" % b)
            cl.close()
        finally:
            host.stop()


if __name__ == "__main__":
    unittest.main()
