#!/usr/bin/env python3
"""test_repl_powerloss.py - a power cut of an async primary, and its replica
(docs/replication.md, "What each mode loses on failover").

In durability async a primary streams records to its replicas once they
are written, before its journal's flush.  Here the primary runs under the
powerloss.c shim (as test_powerloss.py does) with flushes an hour apart; a
replica receives 2,000 writes, then stops; the primary is cut (kill -9,
then the image plimage.py builds with every unflushed write dropped) and
restarted on that image: it has lost the 2,000 writes.  It takes 3,000 new
ones at the positions the lost ones had.  The replica comes back: it must
end identical to the primary (a full copy), not keep the lost writes under
a replication id and offset that match (a partial resync of a history that
is not the primary's).

A kill -9 of an async primary loses nothing, and its replica continues
without a full copy (under the old id, which the new one keeps as
replid2).
"""

import os
import random
import shutil
import tempfile
import unittest

from kvdtest import OK, WAIT, Server, main, start_with
import plimage
from relutil import kill9, shim_env
from replutil import dump, info, ncli, put_many, syncs, wait_until

SHIM = os.environ.get("KVD_POWERLOSS")
# no flush and no checkpoint of their own during the run; segments large
# enough that the run makes no new file
ARGS = ["--flush-interval-ms", "3600000", "--checkpoint-interval-ms",
        "3600000", "--journal-segment-size", "16m", "--memtable-size", "64m"]


class AsyncPrimaryPowerLoss(unittest.TestCase):
    def setUp(self):
        if not SHIM or not os.path.exists(SHIM):
            raise unittest.SkipTest("the powerloss shim is not built")
        self.tmp = tempfile.mkdtemp(prefix="kvd-replpl-")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def server(self, **kw):
        s = Server(threads=2, resp=True, **kw)
        self.servers.append(s)
        return s

    def assertSame(self, p, r):
        """r holds what p holds (a count of the keys that differ, not a
        diff of two long lists)."""
        a, b = dict(dump(p)), dict(dump(r))
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        self.assertEqual(len(diff), 0, "%d of %d keys differ, as %r" %
                         (len(diff), len(a), diff[:3]))

    def caught_up(self, p, r):
        wait_until(lambda: info(r).get("master_link_status") == "up" and
                   info(r)["slave_repl_offset"] ==
                   info(p)["master_repl_offset"], 60, "the replica to catch up")

    def test_power_cut_replica_does_not_diverge(self):
        p = self.server(durability="async", args=ARGS)
        p.start()
        p.settled()
        put_many(p, 0, 1000, tag=b"base")
        p.stop()            # clean: every journal flushed
        base = os.path.join(self.tmp, "base")
        shutil.copytree(p.data_dir, base)
        log = os.path.join(self.tmp, "pl.log")
        start_with(p, **shim_env(KVD_PL_LOG=log,
                                 KVD_PL_MATCH="/data.mdb,/journal-,"
                                              "/replication-"))
        port = p.port
        r = self.server(args=["--replicaof", "127.0.0.1", str(port)])
        r.start()
        # past its full copy (whose cut checkpoints the primary's shards)
        wait_until(lambda: info(r).get("master_link_status") == "up", 30,
                   "the replica to stream")
        put_many(p, 1000, 3000, tag=b"lost")
        c = ncli(p)
        self.assertEqual(c.call(WAIT, 1, 30000), [OK, 1])
        c.close()
        self.assertEqual(len(dump(r)), 3000)
        r.stop()
        kill9(p)
        img = os.path.join(self.tmp, "img")
        plimage.Log(log).image(len(plimage.Log(log)), p.data_dir, base, img,
                               "drop", random.Random(1))
        q = self.server(durability="async", data_dir=img, args=ARGS)
        q.start(port=port)
        self.assertEqual(len(dump(q)), 1000, "the cut lost the writes")
        put_many(q, 1000, 4000, tag=b"new")
        r.start()
        self.caught_up(q, r)
        self.assertSame(q, r)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 2)
        self.assertIn(b"did not stop cleanly", q.log_text())
        self.assertEqual(syncs(q), (1, 0, 1))
        r.stop()
        q.stop()

    def test_kill9_replica_continues(self):
        """kill -9 of an async primary: a new id, and its replica, which
        has nothing the primary lost, continues under the old one."""
        p = self.server(durability="async", args=ARGS)
        p.start()
        r = self.server(args=["--replicaof", "127.0.0.1", str(p.port)])
        r.start()
        put_many(p, 0, 2000)
        self.caught_up(p, r)
        old = info(p)["master_replid"]
        port = p.port
        kill9(p)
        p.start(port=port)
        ip = info(p)
        self.assertNotEqual(ip["master_replid"], old)
        self.assertEqual(ip["master_replid2"], old)
        put_many(p, 2000, 3000)
        self.caught_up(p, r)
        self.assertSame(p, r)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 1)
        self.assertEqual(syncs(p), (0, 1, 0))
        # a clean stop leaves no marker: the next start keeps the id
        p.stop()
        p.start(port=port)
        self.assertEqual(info(p)["master_replid2"], old)
        r.stop()
        p.stop()


if __name__ == "__main__":
    main()
