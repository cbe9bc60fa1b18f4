"""test_faults.py - a failed fsync or write ends that shard's writes, loudly,
and is never retried; the other shards and every read carry on.

The powerloss.c shim makes the Nth fdatasync (or write) of one of shard 1's
files fail, and logs every sync and write of the shards' files: its
journal segment (the ack path) or its data.mdb (checkpoints, off the ack
path; they run every 20 ms here).  Then:

  - the writers of the failed batch (a journal fault), and every later
    writer of that shard, get SHARD_FAILED; a refused batch is not
    visible;
  - kvd logs an error line saying the shard takes no more writes;
  - no fsync of that file is ever issued again, not by later batches, not
    by the async flush, not at stop (after a failed fsync the kernel may
    have dropped the pages, so a later fsync that succeeds would prove
    nothing: PostgreSQL's fsync lesson);
  - shard 0 keeps taking writes, and every acknowledged key of both shards
    stays readable; STATS reports the shard as failed, and so does the
    metric kvd_shard_failed;
  - after a restart (no fault) every acknowledged write is there (LMDB at
    its last checkpoint, the journal replayed above it) and the shard
    takes writes again.

Room is different.  A checkpoint whose write fails with ENOSPC is retried
(nothing of an aborted commit is referenced) and no writer sees it; a
journal segment that cannot be made (ENOSPC while pre-writing it) refuses
only its batch (DISK_FULL) and the shard carries on; one that a helper
could not make ahead of need refuses nothing (the segment is made when
needed).  A short write of a
journal record is completed by the next write, and nothing is lost.
"""

import contextlib
import os
import tempfile
import time
import unittest

from kvdtest import (DISK_FULL, GET, INTERNAL, OK, PUT, SHARD_FAILED, STATS,
                     Server, free_port, http_get, main, shard_keys, wait_for)
from relutil import shim_env, start_with

SHIM = os.environ.get("KVD_POWERLOSS")
MATCH = "/data.mdb,/journal-"
JOURNAL = "shard-001/journal-0"     # its segments: journal-<first LSN>.kvj
DATA = "shard-001/data.mdb"
ARGS = ["--flush-interval-ms", "50", "--checkpoint-interval-ms", "20"]
BIG = b"x" * (60 << 10)     # 1 MiB segments: a new one every 17 writes


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

    @contextlib.contextmanager
    def faulty(self, durability="sync", args=(), **fault):
        """A kvd whose shards exist, started again under the shim with fault
        (KVD_FI_*); yields (srv, arm): creating the file arm starts the
        shim's counts.  The server and arm are removed on the way out."""
        srv = Server(threads=2, durability=durability, args=ARGS + list(args))
        # the shards exist before the fault counts start
        srv.start()
        srv.stop()
        arm = self.fi_log + ".arm"
        try:
            start_with(srv, **shim_env(KVD_FI_LOG=self.fi_log, KVD_FI_ARM=arm,
                                       KVD_PL_MATCH=MATCH, **fault))
            yield srv, arm
        finally:
            srv.cleanup()
            if os.path.exists(arm):
                os.unlink(arm)

    def check_after_restart(self, srv, keys):
        """Restart srv (no fault now): every key in keys reads back."""
        srv.start()
        c = srv.client()
        for k in keys:
            self.assertEqual(c.call(GET, k), [OK, b"v" + k])
        c.close()
        srv.stop()

    def run_fault(self, durability, env, expect=SHARD_FAILED, args=()):
        mport = free_port()
        args = list(args) + ["--metrics-port", str(mport)]
        with self.faulty(durability, args, **env) as (srv, arm):
            c = srv.client()
            before = self.put_many(c, b"a", 20)
            # count from here: kvd has started and written its first commits
            open(arm, "w").close()
            # on until the fault is in (async: the flusher's sync, on its
            # own timer, may come after many writes)
            during = self.put_many(c, b"b", 60, until_injected=True)
            after = self.put_many(c, b"c", 60)
            st = c.call(STATS)[1]
            _, body = http_get(mport, b"/metrics")
            st["metric_failed"] = [
                int(line.split()[-1]) for line in body.splitlines()
                if line.startswith('kvd_shard_failed{shard="')]
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
            # a batch whose journal flush failed was written to the
            # journal before: the restart may replay it (outcome unknown).
            present = [k for k in refused if c.call(GET, k)[0] != 1]
            self.assertEqual(present, refused[:len(present)][:1],
                             "refused writes were applied")
            # writable again after restart
            self.assertTrue(all(s == OK for s in self.put_many(c, b"d", 20).values()))
            c.close()
            return st, log, refused

    def check_never_retried(self):
        ev = self.events()
        hit = [i for i, e in enumerate(ev) if e[0].startswith("inject")]
        self.assertEqual(len(hit), 1, "the fault was not injected exactly once")
        path = ev[hit[0]][1]
        later = [e for e in ev[hit[0] + 1:]
                 if e[0] in ("sync", "io-sync") and e[1] == path]
        self.assertEqual(later, [], "fsync of %s issued again after it failed" % path)
        return path

    def failed_shard_1(self, st):
        self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])
        self.assertEqual(st["metric_failed"], [0, 1])

    # ---- the journal: the ack path ----

    def test_journal_fsync_fails(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_SYNC_FAIL": JOURNAL + ":1"})
        self.assertIn(JOURNAL, self.check_never_retried())
        self.assertRegex(log, r" E .*shard-001: journal flush failed: Input/output error; "
                              r"this shard accepts no more writes until restart")
        self.failed_shard_1(st)

    def io_thread_fsync_fails(self, mode):
        """Sync mode, writes one at a time, io-thread-flush mode: the io
        thread commits each itself and flushes the journal (through its
        io_uring ring, or with its own fdatasync; docs/architecture.md
        section 4).  That flush fails: the batch's writer and every later
        writer of the shard get SHARD_FAILED, nothing acknowledged is lost,
        and the flush is never issued again.  (No freeze of an old memtable
        here: a freeze due hands the batch to the committer.)"""
        st, log, refused = self.run_fault(
            "sync", {"KVD_FI_SYNC_FAIL": JOURNAL + ":1"},
            args=["--checkpoint-interval-ms", "600000", "--io-thread-flush", mode])
        self.assertEqual([e[0] for e in self.events() if e[0].startswith("inject")],
                         ["inject-io-sync"])
        self.assertIn(JOURNAL, self.check_never_retried())
        self.assertRegex(log, r" E .*shard-001: journal flush failed: Input/output error; "
                              r"this shard accepts no more writes until restart")
        self.failed_shard_1(st)
        self.assertGreater(st[b"inline_commits"], 0)
        return st

    def test_journal_ring_fsync_fails(self):
        self.io_thread_fsync_fails("ring")

    def test_journal_inline_fsync_fails(self):
        st = self.io_thread_fsync_fails("inline")
        self.assertEqual(st[b"ring_flushes"], 0)

    def test_journal_auto_fsync_fails(self):
        """io-thread-flush auto, writes one at a time: batches of one,
        flushed in place (the io thread's own fdatasync), and that flush
        fails, with the same outcome."""
        st = self.io_thread_fsync_fails("auto")
        self.assertLess(st[b"ring_flushes"] * 2, st[b"inline_commits"])

    def test_journal_auto_ring_fsync_fails(self):
        """io-thread-flush auto with pipelines of 64 writes, all to shard
        1: batches of 64, whose flush goes through the io thread's ring
        for their size alone (no other shard's batch in the turn); the
        first such flush of shard 1's journal fails.  Every writer of
        that batch and every later writer of the shard gets SHARD_FAILED,
        the flush is never issued again, and every acknowledged write is
        there after a restart; of the refused ones only the failed
        batch's may have their new value (it was in the journal before
        its flush failed), the others keep the one they had."""
        with self.faulty(args=["--checkpoint-interval-ms", "600000",
                               "--io-thread-flush", "auto"],
                         KVD_FI_SYNC_FAIL=JOURNAL + ":1") as (srv, arm):
            c = srv.client()
            before = self.put_many(c, b"a", 20)
            rounds = [ks[i:i + 64] for ks in [shard_keys(c, 64 * 6, b"b", b"x")[1]]
                      for i in range(0, 64 * 6, 64)]
            ring0 = c.call(STATS)[1][b"ring_flushes"]
            open(arm, "w").close()
            during, batch_of, after = {}, {}, 0
            for n, keys in enumerate(rounds):  # until the fault is in, then three
                if after == 3:
                    break
                after += self.injected()
                for k, r in zip(keys, c.pipeline([(PUT, k, b"v" + k) for k in keys])):
                    during[k] = r[0]
                    batch_of[k] = n
            self.assertEqual(after, 3, "the fault was not injected in time")
            st = c.call(STATS)[1]
            self.assertGreater(st[b"ring_flushes"], ring0)
            self.assertEqual([e[0] for e in self.events() if e[0].startswith("inject")],
                             ["inject-io-sync"])
            self.assertIn(JOURNAL, self.check_never_retried())
            self.assertEqual([s[b"failed"] for s in st[b"shards"]], [False, True])
            acked = [k for d in (before, during) for k, s in d.items() if s == OK]
            refused = [k for k, s in during.items() if s == SHARD_FAILED]
            self.assertEqual(len(acked) + len(refused), len(before) + len(during))
            self.assertGreater(len(refused), 64)  # the batch, and later rounds
            c.close()
            srv.stop()
            self.assertRegex(srv.log_text().decode(errors="replace"),
                             r" E .*shard-001: journal flush failed: Input/output error; "
                             r"this shard accepts no more writes until restart")
            srv.start()  # no fault now
            c = srv.client()
            for k in acked:
                self.assertEqual(c.call(GET, k), [OK, b"v" + k])
            replayed = [k for k in refused if c.call(GET, k) != [OK, b"x"]]
            # what the restart replayed is from the failed batch, the
            # first refused round's, and has its new value
            self.assertEqual([batch_of[k] for k in replayed],
                             [batch_of[refused[0]]] * len(replayed))
            for k in replayed:
                self.assertEqual(c.call(GET, k), [OK, b"v" + k])
            c.close()
            srv.stop()

    def test_journal_committer_fsync_fails(self):
        """The same with io-thread-flush no: the committer's fdatasync
        fails, with the same outcome."""
        st, log, refused = self.run_fault(
            "sync", {"KVD_FI_SYNC_FAIL": JOURNAL + ":1"},
            args=["--checkpoint-interval-ms", "600000", "--io-thread-flush", "no"])
        self.assertEqual([e[0] for e in self.events() if e[0].startswith("inject")],
                         ["inject-sync"])
        self.assertIn(JOURNAL, self.check_never_retried())
        self.failed_shard_1(st)
        self.assertEqual(st[b"inline_commits"], 0)

    def test_journal_fsync_fails_async_flush(self):
        # the async flush of shard 1's journal fails
        st, log, refused = self.run_fault("async", {"KVD_FI_SYNC_FAIL": JOURNAL + ":1"})
        self.assertIn(JOURNAL, self.check_never_retried())
        self.assertRegex(log, r" E .*shard-001: journal flush failed: Input/output error; "
                              r"this shard accepts no more writes until restart")
        self.failed_shard_1(st)

    def test_journal_write_fails(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_WRITE_FAIL": JOURNAL + ":1"})
        self.assertRegex(log, r" E .*shard-001: journal write failed: Input/output error")
        self.failed_shard_1(st)
        # and no fsync of it after the failure either
        self.check_never_retried()

    def test_journal_short_write_is_completed(self):
        # pwrite may write part of a record: the journal writes the rest
        # (a short write is not an error; the next call reports one)
        with self.faulty(KVD_FI_WRITE_FAIL=JOURNAL + ":1:SHORT") as (srv, arm):
            c = srv.client()
            open(arm, "w").close()
            st = self.put_many(c, b"a", 40, until_injected=True)
            self.assertEqual(set(st.values()), {OK})
            self.assertEqual([s[b"failed"] for s in c.call(STATS)[1][b"shards"]],
                             [False, False])
            c.close()
            srv.kill9()     # the journal alone holds them
            self.check_after_restart(srv, st)

    def put_big(self, c):
        """200 PUTs of BIG (60 KiB): {key: status}."""
        return {b"k%04d" % i: c.call(PUT, b"k%04d" % i, BIG)[0]
                for i in range(200)}

    def test_journal_segment_enospc_refuses_only_its_batch(self):
        # 1 MiB segments filled by 60 KiB values: a new segment is needed
        # every 17 or so writes of the shard.  The helper that makes them
        # ahead is held up (its flush delayed 4 s), so the committer makes
        # them itself (journal-new.tmp); the first of those writes fails
        # with ENOSPC.
        with self.faulty(args=["--journal-segment-size", "1m"],
                         KVD_FI_WRITE_FAIL="shard-001/journal-new.tmp:1:ENOSPC",
                         KVD_FI_SYNC_DELAY="journal-prep.tmp:4000") as (srv, arm):
            c = srv.client()
            open(arm, "w").close()
            st = self.put_big(c)
            refused = [k for k, s in st.items() if s != OK]
            self.assertTrue(self.injected(), "no segment was made")
            self.assertEqual([st[k] for k in refused], [DISK_FULL])
            self.assertEqual([s[b"failed"] for s in c.call(STATS)[1][b"shards"]],
                             [False, False])
            c.close()
            srv.stop()
            self.assertIn("journal: disk full; batch refused", srv.log_text().decode())
            srv.start()
            c = srv.client()
            for k, s in st.items():
                self.assertEqual(c.call(GET, k)[0], OK if s == OK else 1, k)
            c.close()
            srv.stop()

    def test_spare_made_ahead_enospc_refuses_nothing(self):
        # The helper making shard 1's next segment ahead (journal-prep.tmp)
        # finds the disk full: it logs and leaves it, no writer sees it,
        # and the segment is made when it is needed (by the committer, or
        # by a helper a second later).
        with self.faulty(args=["--journal-segment-size", "1m"],
                         KVD_FI_WRITE_FAIL="shard-001/journal-prep.tmp:1:ENOSPC") as (srv, arm):
            c = srv.client()
            open(arm, "w").close()
            st = self.put_big(c)
            self.assertTrue(self.injected(), "no segment was made ahead")
            self.assertEqual(set(st.values()), {OK})
            shards = c.call(STATS)[1][b"shards"]
            self.assertEqual([s[b"failed"] for s in shards], [False, False])
            c.close()
            srv.stop()
            self.assertRegex(srv.log_text().decode(),
                             r" W .*shard-001: journal: cannot make a spare segment "
                             r"ahead: No space left on device")
            srv.start()
            c = srv.client()
            for k in st:
                self.assertEqual(c.call(GET, k), [OK, BIG], k)
            c.close()
            srv.stop()

    # ---- data.mdb: checkpoints, off the ack path ----

    def test_checkpoint_fsync_fails(self):
        st, log, refused = self.run_fault("sync", {"KVD_FI_SYNC_FAIL": DATA + ":1"})
        self.assertTrue(self.check_never_retried().endswith(DATA))
        self.assertRegex(log, r" E .*shard-001: checkpoint commit failed: Input/output error; "
                              r"this shard accepts no more writes until restart")
        self.failed_shard_1(st)

    def test_checkpoint_write_fails(self):
        # a data page: the meta page is the next test
        st, log, refused = self.run_fault("async", {"KVD_FI_WRITE_FAIL": DATA + ":1",
                                                    "KVD_FI_WRITE_ON": "plain"})
        self.assertRegex(log, r" E .*shard-001: checkpoint commit failed: Input/output error; "
                              r"this shard accepts no more writes until restart \(reads go on")
        self.failed_shard_1(st)
        self.check_never_retried()

    def test_checkpoint_meta_write_fails(self):
        """LMDB's meta page write fails (EIO): LMDB refuses every
        transaction on that store from then on (MDB_PANIC), so the shard
        takes no more writes and says that reads of checkpointed keys fail;
        such a read answers INTERNAL, never a wrong value or NOT_FOUND; keys
        still in a memtable and the other shard answer; a restart recovers
        every acknowledged write."""
        with self.faulty(KVD_FI_WRITE_FAIL=DATA + ":1",
                         KVD_FI_WRITE_ON="dsync") as (srv, arm):
            c = srv.client()
            base = self.put_many(c, b"a", 40)
            # every one of them checkpointed (every 20 ms) before the fault:
            # a record (an LSN) per PUT
            wait_for(lambda: sum(s[b"checkpoint_lsn"] for s in c.call(STATS)[1][b"shards"])
                     >= len(base), what="the first keys checkpointed")
            time.sleep(0.2)     # the frozen memtable retired
            open(arm, "w").close()
            during = self.put_many(c, b"b", 20, until_injected=True)
            wait_for(lambda: c.call(STATS)[1][b"shards"][1][b"failed"], what="shard 1 failed")
            after = self.put_many(c, b"c", 40)
            self.assertEqual([s[b"failed"] for s in c.call(STATS)[1][b"shards"]],
                             [False, True])
            self.assertEqual(set(base.values()), {OK})
            refused = [k for k, s in after.items() if s == SHARD_FAILED]
            self.assertGreater(len(refused), 0)
            self.assertEqual(set(after.values()), {OK, SHARD_FAILED})
            # checkpointed keys of shard 1 answer INTERNAL, shard 0's answer
            got = {k: c.call(GET, k) for k in base}
            self.assertEqual({r[0] for r in got.values()}, {OK, INTERNAL}, got)
            for k, r in got.items():
                self.assertIn(r, ([OK, b"v" + k], [INTERNAL, b"internal server error"]))
            # what the memtables hold still answers
            acked = [k for d in (during, after) for k, s in d.items() if s == OK]
            for k in acked:
                self.assertEqual(c.call(GET, k), [OK, b"v" + k])
            c.close()
            srv.stop()
            self.assertRegex(srv.log_text().decode(errors="replace"),
                             r" E .*shard-001: checkpoint commit failed: Input/output error; "
                             r"this shard accepts no more writes until restart, and LMDB "
                             r"refuses its store \(MDB_PANIC\): reads of keys not in a "
                             r"memtable fail until restart")
            self.check_never_retried()
            self.check_after_restart(srv, list(base) + acked)

    def test_checkpoint_enospc_is_retried(self):
        with self.faulty(KVD_FI_WRITE_FAIL=DATA + ":1:ENOSPC") as (srv, arm):
            c = srv.client()
            open(arm, "w").close()
            st = self.put_many(c, b"a", 100, until_injected=True)
            st.update(self.put_many(c, b"b", 100))
            self.assertEqual(set(st.values()), {OK})
            # the checkpoint is tried again and gets through
            deadline = time.time() + 10
            while time.time() < deadline:
                shards = c.call(STATS)[1][b"shards"]
                if shards[1][b"checkpoint_lsn"] > 0 and \
                        shards[1][b"memtable_bytes"] < (1 << 20):
                    break
                time.sleep(0.1)
            self.assertEqual([s[b"failed"] for s in shards], [False, False])
            self.assertGreater(shards[1][b"checkpoints"], 0)
            c.close()
            srv.stop()
            self.assertRegex(srv.log_text().decode(),
                             r"shard-001: checkpoint commit failed: disk full \(no space "
                             r"left on the device; \d+ MiB left on the filesystem\); retried")
            self.check_after_restart(srv, st)


if __name__ == "__main__":
    main()
