"""test_kvd_door_bounds.py - what the door's writes hold in a real kvd:
an updateMany or deleteMany whose filter is not an _id equality over a
collection of many documents holds one batch of their keys at a time, not
every key (kvd's peak resident memory measured, membound.py), with
documents whose _ids are long (180 bytes) so that all the keys would be
tens of MiB.  KVD_DOOR_BOUND_DOCS sets how many (200,000 by default).
"""

import os
import sys
import threading
import unittest

import membound

try:
    import pymongo  # noqa: F401
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kvd_door import KvdHost  # noqa: E402

MiB = membound.MiB
DOCS = int(os.environ.get("KVD_DOOR_BOUND_DOCS", "200000"))
MEMTABLE = 1 * MiB
# What kvd may hold beyond its resident size at the start: per shard its
# active and frozen memtables (twice memtable-size, and the images the
# updates make sit there), and the statement's batch (1,024 keys of at
# most 196 bytes and a scan batch of 256 documents of ~200 bytes).
SHARDS = 2
ALLOWED = SHARDS * 2 * MEMTABLE + 1024 * 197 + 256 * 256


def long_id(i):
    return "%08d-" % i + "k" * 171


class MultiWrites(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(threads=SHARDS, durability="async",
                           args=["--memtable-size", str(MEMTABLE)])
        cls.cl = cls.host.client()

        def fill(k):
            cl = cls.host.client()
            for lo in range(k * 5000, DOCS, 4 * 5000):
                cl.t.big.insert_many(
                    [{"_id": long_id(i), "g": i % 2}
                     for i in range(lo, min(DOCS, lo + 5000))],
                    ordered=False)
            cl.close()
        ts = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()

    def test_1_update_many_holds_a_batch(self):
        c = self.cl.t.big
        # every page of the collection read once, before the measure
        self.assertEqual(c.count_documents({"g": 0}), DOCS // 2)
        with membound.Peak(self, self.host) as m:
            r = c.update_many({"g": {"$gte": 0}}, {"$inc": {"n": 1}})
        self.assertEqual((r.matched_count, r.modified_count), (DOCS, DOCS))
        m.assert_within(ALLOWED, "updateMany of %d documents" % DOCS)
        self.assertEqual(c.count_documents({"n": 1}), DOCS)

    def test_2_delete_many_holds_a_batch(self):
        c = self.cl.t.big
        self.assertEqual(c.count_documents({}), DOCS)
        with membound.Peak(self, self.host) as m:
            r = c.delete_many({"n": 1})
        self.assertEqual(r.deleted_count, DOCS)
        m.assert_within(ALLOWED, "deleteMany of %d documents" % DOCS)
        self.assertEqual(c.count_documents({}), 0)


if __name__ == "__main__":
    unittest.main()
