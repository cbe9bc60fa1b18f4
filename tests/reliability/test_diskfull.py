"""test_diskfull.py - a full disk refuses batches, loses nothing, and passes.

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
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

from kvdtest import DISK_FULL, MGET, OK, PING, PUT, Client, Server, frame, main
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


class Filler(threading.Thread):
    """PUT unique keys, pipelined by 8, until enough DISK_FULL replies."""

    def __init__(self, port, wid, stop_after=10):
        super().__init__(daemon=True)
        self.port, self.wid, self.stop_after = port, wid, stop_after
        self.acked, self.statuses = [], {}

    def run(self):
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
    def fill_and_recover(self, kind, mib, filler_mib):
        fs = Fs(kind, mib)
        srv = None
        try:
            with open(os.path.join(fs.dir, "filler"), "wb") as f:
                f.write(b"\xff" * (filler_mib << 20))
                os.fsync(f.fileno())
            srv = Server(threads=2, data_dir=os.path.join(fs.dir, "data"),
                         args=["--map-size", "1g"])
            srv.start()
            fillers = [Filler(srv.port, w) for w in range(8)]
            for f in fillers:
                f.start()
            for f in fillers:
                f.join(120)
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
            self.assertEqual(c.call(PUT, b"still-full", b"x" * 100000)[0], DISK_FULL)
            # room again: writes succeed without a restart
            os.unlink(os.path.join(fs.dir, "filler"))
            for i in range(50):
                k = b"after-%03d" % i
                self.assertEqual(c.call(PUT, k, k * 100), [OK], "write %d after space returned" % i)
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

    def test_ext4_loop(self):
        if not shutil.which("mkfs.ext4"):
            self.skipTest("mkfs.ext4 not installed")
        self.fill_and_recover("ext4", 48, 8)


if __name__ == "__main__":
    if not can_mount():
        print("skipped: mounting a filesystem needs root and permission to mount")
        sys.exit(77)
    main()
