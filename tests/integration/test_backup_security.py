"""test_backup_security.py - BACKUP cannot be turned against the server.

BACKUP makes kvd write a directory where the client says.  Without
backup-dir (or an explicit backup-anywhere yes) it is refused; with
backup-dir it takes a plain name under that directory; a target inside the
data directory (where a stray shard-NNN/ made the next start fail), a path
with control characters (which forged log lines), BACKUP in read-only mode:
all refused.  Also: BACKUP is counted once in STATS, and two backups started
on different io threads, the first failing at once, leave no thread behind
(run under a TSan build, kvd's exit status says so: a data race or a thread
leak makes it non-zero).
"""

import os
import shutil
import subprocess
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403


def stats_backup(c):
    st, s = c.call(STATS)
    return s[b"ops"].get(b"BACKUP", {b"calls": 0, b"errors": 0})


class BackupSecurity(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvdbksec-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fill(self, c, n=50):
        for i in range(n):
            self.assertEqual(c.call(PUT, b"k%03d" % i, b"v%d" % i), [OK])

    def test_refused_without_backup_dir(self):
        with Server() as srv:
            r = srv.client().call(BACKUP, (self.tmp + "/b").encode())
            self.assertEqual(r[0], DISABLED)
            self.assertIn(b"backup-dir", r[1])
            self.assertFalse(os.path.exists(self.tmp + "/b"))

    def test_not_into_the_data_dir(self):
        with Server(threads=2, args=["--backup-anywhere", "yes"]) as srv:
            c = srv.client()
            self.fill(c)
            for target in ("/shard-002", "/x", "/shard-000/y", ""):
                r = c.call(BACKUP, (srv.data_dir + target).encode())
                self.assertEqual(r[0], BAD_ARGS, target)
            # also through a symbolic link that leads there
            os.symlink(srv.data_dir, self.tmp + "/link")
            r = c.call(BACKUP, (self.tmp + "/link/shard-002").encode())
            self.assertEqual(r[0], BAD_ARGS)
            self.assertIn(b"data directory", r[1])
            self.assertFalse(os.path.exists(srv.data_dir + "/shard-002"))
            srv.restart()  # the manifest still agrees with the shards
            self.assertEqual(srv.client().call(COUNT), [OK, 50])
            srv.stop()
        # a backup-dir inside the data directory is refused at start
        d = tempfile.mkdtemp(prefix="kvdbksec-data-")
        try:
            p = subprocess.run([KVD_BIN, "--port", "0", "--data-dir", d,
                                "--backup-dir", d + "/backups"],
                               capture_output=True, timeout=20)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(b"inside data-dir", p.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_backup_dir_takes_a_name(self):
        bdir = os.path.join(self.tmp, "backups")
        os.mkdir(bdir)
        with Server(threads=2, args=["--backup-dir", bdir]) as srv:
            c = srv.client()
            self.fill(c)
            for bad in (b"..", b"../escape", b"a/b", b"/abs/path",
                        (bdir + "/x").encode(), b"x\ny", b"x\x1by", b""):
                r = c.call(BACKUP, bad)
                self.assertEqual(r[0], BAD_ARGS, bad)
            self.assertEqual(os.listdir(bdir), [])
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "escape")))
            self.assertEqual(c.call(BACKUP, b"good"), [OK, 50])
            self.assertTrue(os.path.exists(os.path.join(bdir, "good", "MANIFEST")))
            self.assertEqual(c.call(BACKUP, b"good")[0], BAD_ARGS)  # not empty
            srv.stop()
        dst = os.path.join(self.tmp, "restored")
        with Server(threads=1, data_dir=dst,
                    args=["--restore", os.path.join(bdir, "good")]) as r:
            c = r.client()
            self.assertEqual(c.call(COUNT), [OK, 50])
            self.assertEqual(c.call(GET, b"k007"), [OK, b"v7"])
            r.stop()

    def test_no_forged_log_line(self):
        with Server(args=["--backup-anywhere", "yes"]) as srv:
            c = srv.client()
            evil = self.tmp + "/x\n2026-01-01T00:00:00.000Z 1 I FORGED admin logged in"
            r = c.call(BACKUP, evil.encode())
            self.assertEqual(r[0], BAD_ARGS)
            self.assertEqual(c.call(PING), [OK])
            srv.stop()
            log = srv.log_text()
            self.assertIn(b'/x\\n2026-01-01T00:00:00.000Z 1 I FORGED', log)
            for line in log.splitlines():
                self.assertFalse(line.startswith(b"2026-01-01T00:00:00.000Z 1 I FORGED"),
                                 log)

    def test_read_only(self):
        bdir = self.tmp
        with Server(args=["--read-only", "yes", "--backup-dir", bdir]) as srv:
            r = srv.client().call(BACKUP, b"ro")
            self.assertEqual(r[0], READ_ONLY)
            self.assertFalse(os.path.exists(os.path.join(bdir, "ro")))
            srv.stop()
        with Server(args=["--read-only", "yes", "--backup-dir", bdir,
                          "--read-only-backup", "yes"]) as srv:
            self.assertEqual(srv.client().call(BACKUP, b"ro"), [OK, 0])
            srv.stop()

    def test_counted_once(self):
        with Server(args=["--backup-dir", self.tmp]) as srv:
            c = srv.client()
            self.fill(c, 5)
            self.assertEqual(c.call(BACKUP, b"one"), [OK, 5])
            self.assertEqual(c.call(BACKUP, b"one")[0], BAD_ARGS)
            self.assertEqual(stats_backup(c), {b"calls": 2, b"errors": 1})
            srv.stop()

    def test_fast_failures_on_two_io_threads(self):
        # mkdir under /proc fails at once, in the backup's own thread (the
        # checks before it pass: the parent is there and root may write).
        if os.geteuid() != 0:
            self.skipTest("needs root: a target whose creation fails late")
        with Server(threads=2, args=["--backup-anywhere", "yes"]) as srv:
            # eight connections: SO_REUSEPORT spreads them over both threads
            cs = [srv.client() for _ in range(8)]
            for rnd in range(40):
                c = cs[rnd % len(cs)]
                r = c.call(BACKUP, b"/proc/kvd-no-such-dir-%d" % rnd)
                self.assertIn(r[0], (INTERNAL, BUSY), r)
            self.assertEqual(cs[0].call(PING), [OK])
            self.assertEqual(stats_backup(cs[0])[b"calls"], 40)
            srv.stop()  # exit status 0 (under TSan: no race, no leak)


if __name__ == "__main__":
    main()
