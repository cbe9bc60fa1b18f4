"""test_faults.py - a failed fsync or write ends that shard's writes, loudly,
and is never retried; the other shards and every read carry on.

The powerloss.c shim makes the Nth fdatasync (or write) of shard 1's
data.mdb fail, and logs every sync and write of the shards' files.  Then:

  - the writers of the failed batch, and every later writer of that shard,
    get SHARD_FAILED; the failed batch is not applied;
  - kvd logs an error line saying the shard takes no more writes;
  - no fsync of that file is ever issued again, not by later commits, not
    by the async flusher, not by the final flush at stop (after a failed
    fsync the kernel may have dropped the pages, so a later fsync that
    succeeds would prove nothing: PostgreSQL's fsync lesson);
  - shard 0 keeps taking writes, and every acknowledged key of both shards
    stays readable; STATS reports the shard as failed;
  - after a restart (no fault) every acknowledged write is there and the
    shard takes writes again.

A write that fails with ENOSPC is a full disk, not a broken one: only its
batch is refused (DISK_FULL) and the shard carries on.  A short write on a
filesystem with room (EIO from LMDB) is a broken disk.
"""

import os
import tempfile
import time
import unittest

from kvdtest import (DISK_FULL, GET, OK, PUT, SHARD_FAILED, STATS, Server,
                     main)
from relutil import shim_env, start_with

SHIM = os.environ.get("KVD_POWERLOSS")
FILE = "shard-001/data.mdb"


class Faults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SHIM or not os.path.exists(SHIM):
            raise unittest.SkipTest("KVD_POWERLOSS (the shim) not built")

    def setUp(self):
        fd, self.fi_log = tempfile.mkstemp(prefix="kvdfi-")
        os.close(fd)

    def tearDown(self):
        os.unlink(self.fi_log)

    def events(self):
        with open(self.fi_log) as f:
            return [line.split() for line in f]

    def injected(self):
        return any(e[0].startswith("inject") for e in self.events())

    def put_many(self, c, prefix, n, until_injected=False):
        """PUT n keys one at a time (or, until_injected, at least n and on
        until the shim has injected its fault, within 60 s): {key: status}."""
        out = {}
        deadline = time.time() + 60
        i = 0
        while i < n or (until_injected and not self.injected()):
            self.assertLess(time.time(), deadline, "the fault was never injected")
            k = b"%s%04d" % (prefix, i)
            out[k] = c.call(PUT, k, b"v" + k)[0]
            i += 1
        return out

    def run_fault(self, durability, env, expect=SHARD_FAILED):
        srv = Server(threads=2, durability=durability,
                     args=["--flush-interval-ms", "50"])
        # the shards exist before the fault counts start
        srv.start()
        srv.stop()
        arm = self.fi_log + ".arm"
        try:
            start_with(srv, **shim_env(KVD_FI_LOG=self.fi_log, KVD_FI_ARM=arm, **env))
            c = srv.client()
            before = self.put_many(c, b"a", 20)
            # count from here: kvd has started and written its first commits
            open(arm, "w").close()
            # on until the fault is in (async: the flusher's sync, on its
            # own timer, may come after many writes)
            during = self.put_many(c, b"b", 60, until_injected=True)
            after = self.put_many(c, b"c", 60)
            st = c.call(STATS)[1]
            acked = [k for d in (before, during, after) for k, s in d.items() if s == OK]
            refused = [k for d in (before, during, after) for k, s in d.items() if s == expect]
            others = [s for d in (before, during, after) for s in d.values() if s not in (OK, expect)]
            self.assertEqual(others, [])
            self.assertGreater(len(refused), 0, "the fault never showed")
            # shard 0 still takes writes after the fault
            self.assertGreater(sum(1 for s in after.values() if s == OK), 10)
            # every acknowledged key readable, on both shards
            for k in acked:
                self.assertEqual(c.call(GET, k), [OK, b"v" + k])
            c.close()
            srv.stop()  # exit status 0: the final flush skips the failed shard
            log = srv.log_text().decode(errors="replace")
            srv.start()  # no fault now
            c = srv.client()
            for k in acked:
                self.assertEqual(c.call(GET, k), [OK, b"v" + k])
            # Refused writes were not applied, except perhaps the first:
            # with MDB_NOMETASYNC a batch is answered after the sync that
            # follows its commit, and if that sync fails the commit (in
            # LMDB's eyes done) is answered SHARD_FAILED: outcome unknown.
            present = [k for k in refused if c.call(GET, k)[0] != 1]
            self.assertEqual(present, refused[:len(present)][:1],
                             "refused writes were applied")
            # writable again after restart
            self.assertTrue(all(s == OK for s in self.put_many(c, b"d", 20).values()))
            c.close()
            return st, log, refused
        finally:
            srv.cleanup()
            if os.path.exists(arm):
                os.unlink(arm)

    def check_never_retried(self):
        ev = self.events()
        hit = [i for i, e in enumerate(ev) if e[0].startswith("inject")]
        self.assertEqual(len(hit), 1, "the fault was not injected exactly once")
        path = ev[hit[0]][1]
        later = [e for e in ev[hit[0] + 1:] if e[0] == "sync" and e[1] == path]
        self.assertEqual(later, [], "fsync of %s issued again after it failed" % path)
        return path

    def fsync_fails_sync_mode(self, nth):
        st, log, refused = self.run_fault("sync", {"KVD_FI_SYNC_FAIL": "%s:%d" % (FILE, nth)})
        self.assertTrue(self.check_never_retried().endswith(FILE))
        self.assertRegex(log, r" E .*(shard-001: commit|shard 1: fsync) failed: Input/output "
                              r"error; this shard accepts no more writes until restart")
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])

    # A lone writer's commit costs two syncs: its data pages (in the
    # commit), then its meta page (nothing follows to piggyback on); the
    # first and second syncs of shard 1 after arming are one of each.
    def test_fsync_of_commit_fails(self):
        self.fsync_fails_sync_mode(1)

    def test_fsync_of_meta_page_fails(self):
        self.fsync_fails_sync_mode(2)

    def test_fsync_fails_async_flush(self):
        # the flusher's first sync of shard 1 after arming fails
        st, log, refused = self.run_fault("async", {"KVD_FI_SYNC_FAIL": FILE + ":1"})
        self.assertTrue(self.check_never_retried().endswith(FILE))
        self.assertRegex(log, r" E shard 1: flush failed: Input/output error; writes "
                              r"acknowledged since the last flush may not be on disk")
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])

    def test_write_fails(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_WRITE_FAIL": FILE + ":1"})
        self.assertRegex(log, r" E .*shard-001: commit failed: Input/output error")
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])
        # and no fsync of it after the failure either
        self.check_never_retried()

    def test_short_write_with_room_is_a_failure(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_WRITE_FAIL": FILE + ":1:SHORT"})
        self.assertNotIn("short write on a full filesystem", log)
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])

    def test_enospc_refuses_only_its_batch(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_WRITE_FAIL": FILE + ":1:ENOSPC"},
                                          expect=DISK_FULL)
        self.assertEqual(len(refused), 1)
        self.assertIn("disk full; batch refused", log)
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, False])


if __name__ == "__main__":
    main()
