"""test_powerloss.py - what a power cut leaves, at many moments of a run.

kvd runs under the powerloss.c shim (LD_PRELOAD), which logs every write
to the shards' files (LMDB's data.mdb and the journal's segments) and
every sync of them, while 16 writers on
both ports send relutil.py's mix (PUT with and without TTL, DEL, MPUT,
MDEL, INCR, APPEND, EXPIRE, GETDEL) and FLUSHALL comes once or twice.
Then, for many cut points in that log and for
each way a disk may have handled the writes no sync covered (all lost, all
kept, any subset of 512-byte sectors, a prefix in order: see plimage.py),
the image a power cut there would leave is built, kvd is started on it,
and every key is audited against the operations acknowledged before the
cut (relutil.py's model).  Every image must have writes acknowledged
before its cut and writes in flight at it; a missing shim or mdb_dump
skips the test (exit 77) rather than passing it.

The recording runs with a small memtable and a short checkpoint interval,
so cuts fall before, inside and after checkpoints (LMDB commits, fully
synced) as well as between journal appends and their flushes; recovery is
kvd's own: LMDB at its checkpoint, then the journal replayed above it.
Journal segments are large enough that the run stays in the segments the
data directory already had (the test checks it: segment creation and
recycling, renames and directory flushes, are the journal's unit tests'
part, tests/unit/test_journal.c).

  sync mode: nothing acknowledged is ever missing, and every image opens
  clean (kvd starts, a full walk reads every page, mdb_dump -a reads every
  database, kvd stops with status 0).

  async mode: a power cut may lose what was acknowledged since the last
  completed flush of the journal started, and nothing older; the test
  checks exactly that for images where unsynced writes are lost whole, and
  measures the window (how old the oldest lost acknowledgement is) against
  flush-interval-ms.  Images where unsynced writes survive in part, sector
  by sector or in order, must open too: a partly written journal tail is a
  torn tail, and LMDB is only ever written by fully synced commits.

  async mode, then SIGTERM: kvd exits 0 with writes in flight, and a power
  cut right after loses nothing it acknowledged, in every mode.

Cut points: KVD_SOAK_POWERLOSS (or KVD_SOAK_ITERATIONS) per mode on demand;
the async case takes KVD_FLUSH_INTERVAL_MS (default 200) and KVD_PL_SECONDS
(seconds of writes recorded, default 2).  KVD_SEED replays a run (the
seed is printed).
"""

import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest

from kvdtest import Server, main
import plimage
from relutil import (Flusher, audit, cut_counts, kill9, mdb_dump_ok, merge, now_ns, report,
                     run_writers, seed_from_env, shim_env, soak, start_with, stop_all, walk,
                     wait_progress)

SHIM = os.environ.get("KVD_POWERLOSS")


# Checkpoints every 50 ms or 256 KiB; 16 MiB segments, more than a
# recording writes (checked in Recording).
ARGS = ["--memtable-size", "256k", "--checkpoint-interval-ms", "50",
        "--journal-segment-size", "16m"]
MATCH = "/data.mdb,/journal-"


class Recording:
    """A run of kvd under the shim: its log, the data directory before the
    run (base), the writers and the FLUSHALLs, and when it was stopped."""

    def __init__(self, durability, seconds, writers, seed, args=(), sigterm=False):
        rng = random.Random(seed)
        self.srv = srv = Server(threads=2, durability=durability, args=ARGS + list(args),
                                resp=True)
        srv.start()
        srv.settled()       # its spare segments made: no file is new later
        srv.stop()          # a data directory with its shards, synced
        self.base = tempfile.mkdtemp(prefix="kvdpl-base-")
        shutil.rmtree(self.base)
        shutil.copytree(srv.data_dir, self.base)
        self.logdir = tempfile.mkdtemp(prefix="kvdpl-log-")
        logpath = os.path.join(self.logdir, "pl.log")
        start_with(srv, **shim_env(KVD_PL_LOG=logpath, KVD_PL_MATCH=MATCH))
        stop = threading.Event()
        self.ws = ws = run_writers(srv.port, writers, b"pl", stop, nkeys=64, seed=seed,
                                   resp_port=srv.resp_port)
        try:
            wait_progress(ws)
        except AssertionError:
            stop.set()
            raise
        flushes = sorted(rng.uniform(0, seconds) for _ in range(rng.choice((1, 2))))
        self.fl = Flusher(srv.port, srv.resp_port, flushes, stop, seed)
        self.fl.start()
        time.sleep(seconds)
        self.stopped = now_ns()
        if sigterm:
            srv.stop()      # kvd must exit 0, within 30 s
        else:
            kill9(srv)
        stop_all(ws + [self.fl], stop)
        self.errors = sum(sum(w.errors.values()) for w in ws)
        self.hist = merge(ws)
        self.flushes = self.fl.events
        self.log = plimage.Log(logpath)
        # every file written was there before the run (see the top)
        for path in self.log.paths.values():
            rel = os.path.relpath(path, srv.data_dir)
            if not os.path.exists(os.path.join(self.base, rel)):
                raise AssertionError("%s was created during the recording" % rel)
        self.checkpoints = checkpoints(self.log)
        # no cut before the first acknowledgement: it would audit nothing.
        # The cut after k records is at the time of record k - 1 (time_at),
        # so the first cut after the acknowledgement is one past the first
        # record logged after it: cutting at that record's own index put
        # the cut at or before the acknowledgement (a failed precondition,
        # "nothing acknowledged before it", once in a run of make test).
        first_ack = min(r.acked for w in ws for r in w.reqs if r.acked is not None)
        self.first = next((i + 1 for i, r in enumerate(self.log.recs) if r.t > first_ack),
                          len(self.log))

    def cut_time(self, k):
        """The time of the cut after k records (None: after everything)."""
        return self.log.time_at(k) if k < len(self.log) else None

    def counts(self, T):
        return cut_counts(self.ws, T)

    def cleanup(self):
        self.srv.cleanup()
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.logdir, ignore_errors=True)


class Image:
    """kvd started on one power-cut image."""

    def __init__(self, log, srv, base, k, mode, rng):
        self.dir = tempfile.mkdtemp(prefix="kvdpl-img-")
        self.uncovered = log.image(k, srv.data_dir, base, self.dir, mode, rng)
        self.srv = Server(threads=2, data_dir=self.dir, durability=srv.durability,
                          args=ARGS)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def checkpoints(log):
    """Successful syncs of data.mdb in the log: LMDB commits (checkpoints)."""
    return sum(1 for r in log.recs if r.type == plimage.SYNC_END and r.res == 0 and
               log.paths[r.file].endswith("/data.mdb"))


def shard_dirs(d):
    return sorted(os.path.join(d, x) for x in os.listdir(d) if x.startswith("shard-"))


class PowerLoss(unittest.TestCase):
    def audit_image(self, rec, im, k, T):
        """Start kvd on the image and audit it; every image must have
        acknowledged writes and writes in flight at its cut."""
        acked, flight, _ = rec.counts(T)
        self.assertGreater(acked, 0, "cut %d: nothing acknowledged before it" % k)
        self.assertGreater(flight, 0, "cut %d: nothing in flight at it" % k)
        im.srv.start()
        res = audit(im.srv.port, rec.hist, T, flushes=rec.flushes)
        walk(im.srv.port)
        im.srv.stop()   # exits 0
        return res

    def test_sync_loses_nothing(self):
        self.sync_loses_nothing()

    def test_sync_auto_loses_nothing(self):
        """The same with io-thread-flush auto: the io threads flush small
        batches with their own fdatasync and others through their rings
        (docs/architecture.md section 4), both seen by the shim."""
        self.sync_loses_nothing(["--io-thread-flush", "auto"])

    def sync_loses_nothing(self, args=()):
        seed = seed_from_env(None)
        rec = Recording("sync", 1.5, 16, seed, args=args)
        rng = random.Random(seed)
        images = audited = uncertain = lost = 0
        try:
            self.assertEqual(rec.errors, 0)
            self.assertGreater(rec.checkpoints, 0, "no checkpoint during the recording")
            cuts = plimage.cut_points(rec.log, soak("powerloss", 24), rec.first, rng)
            for k in cuts:
                T = rec.cut_time(k)
                for mode in plimage.MODES:
                    with Image(rec.log, rec.srv, rec.base, k, mode, rng) as im:
                        res = self.audit_image(rec, im, k, T)
                        self.assertEqual(res.lost[:5], [],
                                         "cut %d/%d (%s): %d acknowledged writes lost"
                                         % (k, len(rec.log), mode, len(res.lost)))
                        for d in shard_dirs(im.dir):
                            self.assertIs(mdb_dump_ok(d), True, "%s: mdb_dump -a" % d)
                        images += 1
                        audited += res.acked_ops
                        uncertain += res.uncertain
                        lost += len(res.lost)
        finally:
            rec.cleanup()
        self.assertGreater(audited, 0)
        report("powerloss-sync", seed=seed, records=len(rec.log), cuts=len(cuts), images=images,
               checkpoints=rec.checkpoints,
               flushall_sent=len(rec.flushes), acked_ops_audited=audited,
               uncertain_keys=uncertain, lost=lost)

    def test_async_sigterm_then_cut(self):
        """A clean SIGTERM in async mode, with writes in flight on both
        ports, flushes everything it acknowledged: a power cut right after
        kvd exits loses nothing, however the disk treated unsynced writes."""
        seed = seed_from_env(None)
        rec = Recording("async", 1.0, 16, seed, ["--flush-interval-ms", "1000"], sigterm=True)
        rng = random.Random(seed)
        images = audited = lost = 0
        try:
            self.assertEqual(rec.errors, 0)
            acked, flight, _ = rec.counts(rec.stopped)
            self.assertGreater(acked, 0)
            self.assertGreater(flight, 0, "nothing in flight at the SIGTERM")
            k = len(rec.log)
            for mode in plimage.MODES:
                with Image(rec.log, rec.srv, rec.base, k, mode, rng) as im:
                    res = self.audit_image(rec, im, k, None)
                    self.assertEqual(res.lost[:5], [], "%s: %d acknowledged writes lost"
                                     % (mode, len(res.lost)))
                    for d in shard_dirs(im.dir):
                        self.assertIs(mdb_dump_ok(d), True, "%s: mdb_dump -a" % d)
                    images += 1
                    audited += res.acked_ops
                    lost += len(res.lost)
        finally:
            rec.cleanup()
        self.assertGreater(audited, 0)
        report("powerloss-sigterm-async", seed=seed, records=len(rec.log), images=images,
               in_flight_at_sigterm=flight, acked_ops_audited=audited, lost=lost)

    def test_async_loss_window(self):
        interval = int(os.environ.get("KVD_FLUSH_INTERVAL_MS", "200"))
        seconds = float(os.environ.get("KVD_PL_SECONDS", "2"))
        seed = seed_from_env(None)
        rec = Recording("async", seconds, 16, seed, ["--flush-interval-ms", str(interval)])
        log = rec.log
        rng = random.Random(seed)
        n = soak("powerloss", 24)
        windows, lost_total, acked_total, broken = [], 0, 0, {}
        try:
            self.assertEqual(rec.errors, 0)
            # cuts after the first flush, so that a window can be measured
            first = next((i for i, r in enumerate(log.recs) if r.type == plimage.SYNC_END), 0)
            cuts = [k for k in plimage.cut_points(log, n, max(first + 1, rec.first), rng)
                    if k < len(log)]
            self.assertGreater(len(cuts), 0)
            for k in cuts:
                T = log.time_at(k)
                synced = min(log.last_sync_begin(k).values())
                with Image(log, rec.srv, rec.base, k, "drop", rng) as im:
                    res = self.audit_image(rec, im, k, T)
                for key, got, age in res.lost:
                    # lost only what was acknowledged after the last flush began
                    self.assertGreater(T - age, synced,
                                       "%r: acknowledged %.0f ms before the cut, before the "
                                       "last completed flush began" % (key, age / 1e6))
                windows.append(max([age for _, _, age in res.lost] + [0]))
                lost_total += len(res.lost)
                acked_total += res.acked_ops
            # unsynced journal writes kept in part: a torn tail, never a
            # store that does not open
            for k in cuts[: max(4, len(cuts) // 3)]:
                for mode in ("random", "ordered"):
                    with Image(log, rec.srv, rec.base, k, mode, rng) as im:
                        outcome = self.open_outcome(im, rec, log.time_at(k))
                        broken[outcome] = broken.get(outcome, 0) + 1
                        self.assertIn(outcome, ("clean", "opened-lost-recent"),
                                      "cut %d (%s): %s" % (k, mode, getattr(self, "why", "")))
        finally:
            rec.cleanup()
        self.assertGreater(acked_total, 0, "no acknowledged write audited")
        report("powerloss-async", seed=seed, flush_interval_ms=interval, cuts=len(cuts),
               checkpoints=rec.checkpoints,
               flushall_sent=len(rec.flushes), acked_ops_audited=acked_total,
               lost_acked=lost_total, window_max_ms="%.0f" % (max(windows) / 1e6),
               window_mean_ms="%.0f" % (sum(windows) / len(windows) / 1e6),
               partial_images=" ".join("%s:%d" % kv for kv in sorted(broken.items())))

    def open_outcome(self, im, rec, T):
        """What kvd makes of an async image with partly written journal
        pages: "clean" or "opened-lost-recent" (the loss window is the
        drop images' check); anything else fails the test.  A sanitizer's
        report of a crash goes to a directory of its own."""
        reports = tempfile.mkdtemp(prefix="kvdpl-san-")
        env = {k: os.environ.get(k, "") + ":log_path=%s/report" % reports
               for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS")}
        try:
            try:
                start_with(im.srv, **env)
            except RuntimeError:
                return "refused-to-open"
            try:
                res = audit(im.srv.port, rec.hist, T, flushes=rec.flushes)
                walk(im.srv.port)
                im.srv.stop()
            except Exception as e:   # noqa: BLE001 - any failure is the outcome
                # what went wrong, for the failure message
                self.why = "%s: %s; sanitizer reports: %s" % (
                    type(e).__name__, str(e)[-1500:],
                    "".join(open(os.path.join(reports, f), errors="replace").read()[:3000]
                            for f in sorted(os.listdir(reports))) or "none")
                return "failed-reading"
            return "clean" if not res.lost else "opened-lost-recent"
        finally:
            im.srv.cleanup()    # kvd gone before its reports' directory
            shutil.rmtree(reports, ignore_errors=True)


def prerequisites():
    """Exit 77 (skipped) when what the selected cases need is missing: the
    shim for all, mdb_dump for the ones that check images with it."""
    if not SHIM or not os.path.exists(SHIM):
        print("skipped: KVD_POWERLOSS (the shim) not built")
        sys.exit(77)
    names = [a for a in sys.argv[1:] if not a.startswith("-")]
    if (not names or any("async_loss_window" not in a for a in names)) and \
            not shutil.which("mdb_dump"):
        print("skipped: mdb_dump is not installed (lmdb-utils)")
        sys.exit(77)


if __name__ == "__main__":
    prerequisites()
    main()
