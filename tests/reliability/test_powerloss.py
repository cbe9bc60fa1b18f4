"""test_powerloss.py - what a power cut leaves, at many moments of a run.

kvd runs under the powerloss.c shim (LD_PRELOAD), which logs every write
to the shards' data.mdb files and every sync of them, while writers send a
mix of PUT, DEL and MPUT.  Then, for many cut points in that log and for
each way a disk may have handled the writes no sync covered (all lost, all
kept, any subset of 512-byte sectors, a prefix in order: see plimage.py),
the image a power cut there would leave is built, kvd is started on it,
and every key is audited against the operations acknowledged before the
cut (relutil.py's model).

  sync mode: nothing acknowledged is ever missing, and every image opens
  clean (kvd starts, a full walk reads every page, mdb_dump -a reads every
  database, kvd stops with status 0).

  async mode: a power cut may lose what was acknowledged since the last
  completed flush started, and nothing older; the test checks exactly that
  for images where unsynced writes are lost whole, and measures the window
  (how old the oldest lost acknowledgement is) against flush-interval-ms.
  Images where unsynced writes survive in part are opened too, and what
  happens is counted: LMDB documents that MDB_NOSYNC may corrupt the store
  on a disk that reorders writes, and the count shows how often it does.

Cut points: KVD_SOAK_POWERLOSS (or KVD_SOAK_ITERATIONS) per mode on demand;
the async case takes KVD_FLUSH_INTERVAL_MS (default 200) and KVD_PL_SECONDS
(seconds of writes recorded, default 2).
"""

import os
import random
import shutil
import tempfile
import threading
import time
import unittest

from kvdtest import Server, main
import plimage
from relutil import audit, kill9, mdb_dump_ok, merge, report, run_writers, soak, start_with, walk

SHIM = os.environ.get("KVD_POWERLOSS")


def record(durability, seconds, writers, args=()):
    """Run kvd under the shim with writers; returns (log, live dir, base
    dir, history, server object (stopped))."""
    srv = Server(threads=2, durability=durability, args=list(args))
    srv.start()
    srv.stop()          # a data directory with its shards, synced
    base = tempfile.mkdtemp(prefix="kvdpl-base-")
    shutil.rmtree(base)
    shutil.copytree(srv.data_dir, base)
    logpath = os.path.join(tempfile.mkdtemp(prefix="kvdpl-log-"), "pl.log")
    os.environ["LD_PRELOAD"] = SHIM
    os.environ["KVD_PL_LOG"] = logpath
    # A shim under an ASan kvd: the runtime need not come first.
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    try:
        srv.start()
    finally:
        del os.environ["LD_PRELOAD"]
        del os.environ["KVD_PL_LOG"]
    stop = threading.Event()
    ws = run_writers(srv.port, writers, b"pl", stop, nkeys=64, seed=7)
    time.sleep(seconds)
    kill9(srv)
    stop.set()
    for w in ws:
        w.join(30)
    errors = sum(sum(w.errors.values()) for w in ws)
    return plimage.Log(logpath), srv, base, merge(ws), errors, logpath


class Image:
    """kvd started on one power-cut image."""

    def __init__(self, log, srv, base, k, mode, rng):
        self.dir = tempfile.mkdtemp(prefix="kvdpl-img-")
        self.uncovered = log.image(k, srv.data_dir, base, self.dir, mode, rng)
        self.srv = Server(threads=2, data_dir=self.dir, durability=srv.durability)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def shard_dirs(d):
    return sorted(os.path.join(d, x) for x in os.listdir(d) if x.startswith("shard-"))


class PowerLoss(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SHIM or not os.path.exists(SHIM):
            raise unittest.SkipTest("KVD_POWERLOSS (the shim) not built")

    def test_sync_loses_nothing(self):
        log, srv, base, hist, errors, logpath = record("sync", 1.5, 16)
        self.assertEqual(errors, 0)
        rng = random.Random(1)
        cuts = plimage.cut_points(log, soak("powerloss", 24), 0, rng)
        images = audited = uncertain = 0
        try:
            for k in cuts:
                T = log.time_at(k) if k < len(log) else None
                for mode in plimage.MODES:
                    with Image(log, srv, base, k, mode, rng) as im:
                        im.srv.start()
                        res = audit(im.srv.port, hist, T)
                        self.assertEqual(res.lost[:5], [],
                                         "cut %d/%d (%s): %d acknowledged writes lost"
                                         % (k, len(log), mode, len(res.lost)))
                        walk(im.srv.port)
                        im.srv.stop()   # exits 0
                        for d in shard_dirs(im.dir):
                            self.assertNotEqual(mdb_dump_ok(d), False, "%s: mdb_dump -a" % d)
                        images += 1
                        audited += res.acked_ops
                        uncertain += res.uncertain
        finally:
            srv.cleanup()
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(os.path.dirname(logpath), ignore_errors=True)
        self.assertGreater(audited, 0)
        report("powerloss-sync", records=len(log), cuts=len(cuts), images=images,
               acked_ops_audited=audited, uncertain_keys=uncertain, lost=0)

    def test_async_loss_window(self):
        interval = int(os.environ.get("KVD_FLUSH_INTERVAL_MS", "200"))
        seconds = float(os.environ.get("KVD_PL_SECONDS", "2"))
        log, srv, base, hist, errors, logpath = record(
            "async", seconds, 16, ["--flush-interval-ms", str(interval)])
        self.assertEqual(errors, 0)
        rng = random.Random(2)
        n = soak("powerloss", 24)
        # cuts after the first flush, so that a window can be measured
        first = next((i for i, r in enumerate(log.recs) if r.type == plimage.SYNC_END), 0)
        cuts = [k for k in plimage.cut_points(log, n, first + 1, rng) if k < len(log)]
        windows, lost_total, acked_total, broken = [], 0, 0, {}
        try:
            for k in cuts:
                T = log.time_at(k)
                synced = min(log.last_sync_begin(k).values())
                with Image(log, srv, base, k, "drop", rng) as im:
                    im.srv.start()
                    res = audit(im.srv.port, hist, T)
                    walk(im.srv.port)
                    im.srv.stop()
                for key, got, age in res.lost:
                    # lost only what was acknowledged after the last flush began
                    self.assertGreater(T - age, synced,
                                       "%r: acknowledged %.0f ms before the cut, before the "
                                       "last completed flush began" % (key, age / 1e6))
                windows.append(max([age for _, _, age in res.lost] + [0]))
                lost_total += len(res.lost)
                acked_total += res.acked_ops
            # partly written unsynced pages: LMDB's NOSYNC caveat, counted
            for k in cuts[: max(4, len(cuts) // 3)]:
                for mode in ("random", "ordered"):
                    with Image(log, srv, base, k, mode, rng) as im:
                        outcome = self.open_outcome(im, hist, log.time_at(k))
                        broken[outcome] = broken.get(outcome, 0) + 1
        finally:
            srv.cleanup()
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(os.path.dirname(logpath), ignore_errors=True)
        report("powerloss-async", flush_interval_ms=interval, cuts=len(cuts),
               acked_ops_audited=acked_total, lost_acked=lost_total,
               window_max_ms="%.0f" % (max(windows) / 1e6),
               window_mean_ms="%.0f" % (sum(windows) / len(windows) / 1e6),
               partial_images=" ".join("%s:%d" % kv for kv in sorted(broken.items())))

    def open_outcome(self, im, hist, T):
        """What kvd makes of an async image with partly written pages.
        LMDB has no checksums: on a damaged page kvd may crash, and under a
        sanitizer that crash is expected here, so its report goes to a
        directory of its own rather than to the run's."""
        reports = tempfile.mkdtemp(prefix="kvdpl-san-")
        env = {k: os.environ.get(k, "") + ":log_path=%s/report" % reports
               for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS")}
        try:
            try:
                start_with(im.srv, **env)
            except RuntimeError:
                return "refused-to-open"
            try:
                res = audit(im.srv.port, hist, T)
                walk(im.srv.port)
                im.srv.stop()
            except Exception:   # noqa: BLE001 - any failure is the outcome
                return "failed-reading"
            return "clean" if not res.lost else "opened-lost-recent"
        finally:
            im.srv.cleanup()    # kvd gone before its reports' directory
            shutil.rmtree(reports, ignore_errors=True)


if __name__ == "__main__":
    main()
