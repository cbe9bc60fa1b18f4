"""test_diskfull.py - a full disk or a full map refuses writes, loses
nothing, and passes.

The data directory lives on a small filesystem of its own: a tmpfs with a
size limit, and a loop-mounted ext4 image (needs root and mount; the test
exits 77, skipped, where they are not permitted).  A filler file takes part
of the room.  Eight writers PUT 2 KiB values until the filesystem is full,
then:

  - every refused request got DISK_FULL (nothing else: not SHARD_FAILED,
    which would take the shard down for good, and no dropped connection);
    LMDB reports a write cut short by the full disk as EIO, which kvd
    tells apart from a broken disk by the room left on the filesystem;
  - every write acknowledged before is readable, and reads and other
    connections keep working while the disk is full;
  - once the filler is deleted, writes succeed again, without a restart;
  - after a clean restart every acknowledged write is still there.

On the full disk deletes are taken (test_deletes_on_a_full_disk): DEL,
MDEL and FLUSHALL answer OK (the journal keeps a spare segment that only
batches of deletes may take, and deletes go into a full memtable while its
checkpoint fails for room), their effect is read at once and survives the
filler's removal and a restart; the checkpoint's failures are logged at most
once a minute, a full disk named as such, never as "Input/output error".

A full map (a small map-size; runs everywhere, no mount needed):

  - a request that cannot fit fails alone: while one client keeps sending
    4 MiB values that no longer fit, another client's 100-byte PUTs, which
    do, never get MAP_FULL (a batch that fails is retried in parts, so
    only the request that does not fit is refused);
  - in a map filled with 100-byte values, DEL and FLUSHALL still work (kvd
    keeps room in the map that only deletes may use), so an operator can
    free space without a restart; then PUT works again.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from kvdtest import (COUNT, DEL, DISK_FULL, FLUSHALL, GET, MAP_FULL, MDEL, MGET,
                     NOT_FOUND, OK, PING, PUT, Client, Server, frame, main)
from relutil import report


def can_mount():
    if os.geteuid() != 0:
        return False
    d = tempfile.mkdtemp(prefix="kvdfs-probe-")
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d],
                            capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", d])
        return ok
    finally:
        os.rmdir(d)


class Fs:
    """A small filesystem mounted on a temporary directory."""

    def __init__(self, kind, mib):
        self.dir = tempfile.mkdtemp(prefix="kvdfs-")
        self.image = None
        if kind == "tmpfs":
            cmd = ["mount", "-t", "tmpfs", "-o", "size=%dm" % mib, "tmpfs", self.dir]
        else:
            fd, self.image = tempfile.mkstemp(prefix="kvdfs-", suffix=".img")
            os.close(fd)
            os.truncate(self.image, mib << 20)
            subprocess.run(["mkfs.ext4", "-q", "-F", self.image], check=True,
                           capture_output=True)
            cmd = ["mount", "-o", "loop", self.image, self.dir]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            self.close(mounted=False)
            raise unittest.SkipTest("cannot mount %s: %s" % (kind, p.stderr.strip()))

    def free(self):
        st = os.statvfs(self.dir)
        return st.f_bfree * st.f_frsize

    def close(self, mounted=True):
        if mounted:
            subprocess.run(["umount", self.dir], capture_output=True)
        os.rmdir(self.dir)
        if self.image:
            os.unlink(self.image)


class Writer(threading.Thread):
    """A writer thread whose failure fails the test: threading only prints
    an exception that ends run(), so work()'s is kept in self.error and
    the test asserts, once joined, that none was raised."""

    def __init__(self):
        super().__init__(daemon=True)
        self.error = None

    def run(self):
        try:
            self.work()
        except BaseException as e:  # reported by the test
            self.error = e


def assert_writers_ok(test, writers, timeout):
    """Join writers; fail if one is still running or raised."""
    for w in writers:
        w.join(timeout)
    test.assertEqual([w.name for w in writers if w.is_alive()], [],
                     "writer threads still running")
    test.assertEqual([(w.name, repr(w.error)) for w in writers if w.error], [],
                     "writer threads failed")


class Filler(Writer):
    """PUT unique keys, pipelined by 8, until enough DISK_FULL replies."""

    def __init__(self, port, wid, stop_after=10):
        super().__init__()
        self.port, self.wid, self.stop_after = port, wid, stop_after
        self.acked, self.statuses = [], {}

    def work(self):
        c = Client(self.port, timeout=30)
        i = full = 0
        while full < self.stop_after and i < 200000:
            keys = [b"f%d-%06d" % (self.wid, j) for j in range(i, i + 8)]
            i += 8
            c.send_raw(b"".join(frame([PUT, k, k * (2048 // len(k))]) for k in keys))
            for k in keys:
                r = c.read_reply()
                self.statuses[r[0]] = self.statuses.get(r[0], 0) + 1
                if r[0] == OK:
                    self.acked.append(k)
                elif r[0] == DISK_FULL:
                    full += 1
        c.close()


class DiskFull(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not can_mount():
            raise unittest.SkipTest("mounting a filesystem needs root and permission to mount")

    def fill_and_recover(self, kind, mib, filler_mib):
        fs = Fs(kind, mib)
        srv = None
        try:
            with open(os.path.join(fs.dir, "filler"), "wb") as f:
                f.write(b"\xff" * (filler_mib << 20))
                os.fsync(f.fileno())
            # Journal segments of 1 MiB, so that new ones are needed (and
            # refused) while the filesystem fills; memtables of 1 MiB, so
            # that checkpoints (LMDB's file growing) run into it too.
            srv = Server(threads=2, data_dir=os.path.join(fs.dir, "data"),
                         args=["--map-size", "1g", "--journal-segment-size", "1m",
                               "--memtable-size", "1m"])
            srv.start()
            fillers = [Filler(srv.port, w) for w in range(8)]
            for f in fillers:
                f.start()
            assert_writers_ok(self, fillers, 120)
            statuses = {}
            for f in fillers:
                for st, n in f.statuses.items():
                    statuses[st] = statuses.get(st, 0) + n
            acked = [k for f in fillers for k in f.acked]
            self.assertEqual(set(statuses), {OK, DISK_FULL}, statuses)
            self.assertGreater(len(acked), 100)
            # while full: reads, other connections
            c = srv.client()
            self.assertEqual(c.call(PING), [OK])
            for i in range(0, len(acked), 200):
                chunk = acked[i:i + 200]
                r = c.call(MGET, *chunk)
                self.assertEqual(r[0], OK)
                self.assertEqual(r[1:], [k * (2048 // len(k)) for k in chunk])
            # A write may still land in the journal's pre-allocated segment
            # (durable: its room was taken before the disk filled); once
            # that and the memtable are used up, writes are refused.
            for i in range(64):
                k = b"still-full-%02d" % i
                st = c.call(PUT, k, b"x" * 100000)[0]
                self.assertIn(st, (OK, DISK_FULL))
                if st == DISK_FULL:
                    break
                acked.append(k)
            self.assertEqual(st, DISK_FULL, "6.4 MB more taken on a full disk")
            # room again: writes succeed without a restart
            os.unlink(os.path.join(fs.dir, "filler"))
            for i in range(50):
                k = b"after-%03d" % i
                self.assertEqual(c.call(PUT, k, k * 100), [OK], "write %d after space returned:\n%s" % (i, srv.log_text()[-3000:].decode(errors="replace")))
                acked.append(k)
            c.close()
            srv.stop()
            srv.start()
            c = srv.client()
            for i in range(0, len(acked), 200):
                chunk = acked[i:i + 200]
                r = c.call(MGET, *chunk)
                self.assertNotIn(None, r[1:], "acknowledged writes lost after restart")
            c.close()
            srv.stop()
            report("disk-full-" + kind, fs_mib=mib, acked=len(acked),
                   disk_full_replies=statuses[DISK_FULL], lost=0)
        finally:
            if srv:
                srv.cleanup()
            fs.close()

    def test_tmpfs(self):
        self.fill_and_recover("tmpfs", 24, 8)

    def test_deletes_on_a_full_disk(self):
        fs = Fs("tmpfs", 24)
        srv = None
        try:
            with open(os.path.join(fs.dir, "filler"), "wb") as f:
                f.write(b"\xff" * (8 << 20))
            srv = Server(threads=2, data_dir=os.path.join(fs.dir, "data"),
                         args=["--map-size", "1g", "--journal-segment-size", "1m",
                               "--memtable-size", "1m"])
            srv.start()
            t0 = time.monotonic()
            fillers = [Filler(srv.port, w) for w in range(8)]
            for f in fillers:
                f.start()
            assert_writers_ok(self, fillers, 120)
            acked = [k for f in fillers for k in f.acked]
            self.assertGreater(len(acked), 600)
            c = srv.client()
            # the disk is full: PUTs are refused (a checkpoint part-way
            # may have made a little room: a few may still fit)...
            for i in range(64):
                st = c.call(PUT, b"one-more-%02d" % i, b"x" * 100000)[0]
                self.assertIn(st, (OK, DISK_FULL))
                if st == DISK_FULL:
                    break
            self.assertEqual(st, DISK_FULL, "6.4 MB more taken on a full disk")
            # ...deletes are taken, one at a time and many at once
            for k in acked[:200]:
                self.assertEqual(c.call(DEL, k), [OK], "DEL on a full disk")
            self.assertEqual(c.call(MDEL, *acked[200:400]), [OK, 200])
            self.assertEqual(c.call(GET, acked[0]), [NOT_FOUND])
            self.assertEqual(c.call(MGET, *acked[400:402])[1:],
                             [k * (2048 // len(k)) for k in acked[400:402]])
            self.assertEqual(c.call(FLUSHALL), [OK], "FLUSHALL on a full disk")
            self.assertEqual(c.call(COUNT), [OK, 0])
            self.assertEqual(c.call(GET, acked[500]), [NOT_FOUND])
            # the checkpoint's failures: named, and not a line per retry
            log = srv.log_text().decode(errors="replace").splitlines()
            fails = [ln for ln in log if "checkpoint" in ln and "failed:" in ln]
            self.assertEqual([ln for ln in fails if "Input/output error" in ln], [])
            minutes = (time.monotonic() - t0) / 60
            self.assertLessEqual(len(fails), srv.threads * (int(minutes) + 1),
                                 "\n".join(fails[:5]))
            # room again: writes go on, and all holds after a restart
            os.unlink(os.path.join(fs.dir, "filler"))
            self.assertEqual(c.call(PUT, b"after", b"a"), [OK])
            c.close()
            srv.stop()
            srv.start()
            c = srv.client()
            self.assertEqual(c.call(COUNT), [OK, 1])
            self.assertEqual(c.call(GET, acked[300]), [NOT_FOUND])
            self.assertEqual(c.call(GET, b"after"), [OK, b"a"])
            c.close()
            srv.stop()
            report("disk-full-deletes", acked=len(acked), deleted=400,
                   flushall=1, checkpoint_failure_lines=len(fails))
        finally:
            if srv:
                srv.cleanup()
            fs.close()

    def test_ext4_loop(self):
        if not shutil.which("mkfs.ext4"):
            self.skipTest("mkfs.ext4 not installed")
        self.fill_and_recover("ext4", 48, 8)


class BigWriter(Writer):
    """PUT 4 MiB values under new keys, two in flight, until told to stop."""

    def __init__(self, port):
        super().__init__()
        self.port = port
        self.stop = threading.Event()
        self.full_once = threading.Event()
        self.statuses = {}

    def work(self):
        c = Client(self.port, timeout=60)
        big = b"B" * (4 << 20)
        i = inflight = 0
        while not self.stop.is_set() or inflight:
            if not self.stop.is_set() and inflight < 2:
                c.send_raw(frame([PUT, b"big%05d" % i, big]))
                i += 1
                inflight += 1
                continue
            st = c.read_reply()[0]
            inflight -= 1
            self.statuses[st] = self.statuses.get(st, 0) + 1
            if st == MAP_FULL:
                self.full_once.set()
        c.close()


class MapFull(unittest.TestCase):
    def test_oversized_writes_fail_alone(self):
        with Server(threads=1, args=["--map-size", "16m"]) as srv:
            big = BigWriter(srv.port)
            big.start()
            self.assertTrue(big.full_once.wait(60),
                            "the map never filled (writer: %r)" % big.error)
            c = srv.client()
            small, statuses = [], {}
            for i in range(0, 1500, 10):
                keys = [b"s%05d" % j for j in range(i, i + 10)]
                c.send_raw(b"".join(frame([PUT, k, k * 16 + b"-" * 4]) for k in keys))
                for k in keys:
                    st = c.read_reply()[0]
                    statuses[st] = statuses.get(st, 0) + 1
                    if st == OK:
                        small.append(k)
            big.stop.set()
            assert_writers_ok(self, [big], 60)
            self.assertEqual(statuses, {OK: 1500}, "100-byte PUTs refused while they fit")
            self.assertGreater(big.statuses.get(MAP_FULL, 0), 5)
            for k in small:
                self.assertEqual(c.call(GET, k), [OK, k * 16 + b"-" * 4])
            c.close()
            report("map-full-isolation", small_ok=len(small),
                   big_refused=big.statuses.get(MAP_FULL, 0))

    def test_deletes_work_in_a_full_map(self):
        with Server(threads=1, args=["--map-size", "1m"]) as srv:
            c = srv.client()
            acked, full, i = [], 0, 0
            while not full and i < 100000:
                keys = [b"k%06d" % j for j in range(i, i + 64)]
                i += 64
                c.send_raw(b"".join(frame([PUT, k, b"v" * 100]) for k in keys))
                for k in keys:
                    st = c.read_reply()[0]
                    self.assertIn(st, (OK, MAP_FULL))
                    if st == OK:
                        acked.append(k)
                    else:
                        full += 1
            self.assertGreater(full, 0, "1 MiB never filled")
            self.assertGreater(len(acked), 1000)
            # then one at a time, until a lone 100-byte PUT no longer fits
            while True:
                k = b"k%06d" % i
                i += 1
                st = c.call(PUT, k, b"v" * 100)[0]
                self.assertIn(st, (OK, MAP_FULL))
                if st != OK:
                    break
                acked.append(k)
            # deletes still work, one by one and many at a time
            for k in acked[:300]:
                self.assertEqual(c.call(DEL, k), [OK], "DEL refused in a full map")
            c.send_raw(b"".join(frame([DEL, k]) for k in acked[300:600]))
            for k in acked[300:600]:
                self.assertEqual(c.read_reply(), [OK])
            self.assertEqual(c.call(GET, acked[0])[0], 1)
            self.assertEqual(c.call(GET, acked[600]), [OK, b"v" * 100])
            # fill it again, then empty it in one go
            j = 0
            while c.call(PUT, b"again%06d" % j, b"v" * 100)[0] == OK:
                j += 1
            self.assertEqual(c.call(FLUSHALL), [OK], "FLUSHALL refused in a full map")
            self.assertEqual(c.call(COUNT), [OK, 0])
            for j in range(100):
                self.assertEqual(c.call(PUT, b"after%03d" % j, b"v" * 100), [OK])
            c.close()
            report("map-full-deletes", filled=len(acked), deleted=600, flushall=1)


if __name__ == "__main__":
    main()
