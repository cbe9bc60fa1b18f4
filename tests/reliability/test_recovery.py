"""test_recovery.py - starting kvd on what a crash, a corruption or an older
kvd left: LMDB at its last checkpoint, then the journal replayed above it.

  - kill -9 before any checkpoint: everything acknowledged comes back from
    the journal, and the log says how many records were replayed and how
    long it took; a clean stop checkpoints everything, so the next start
    replays nothing.
  - A bad record followed by good, durable ones is corruption, not a torn
    tail: kvd refuses to start with one line naming the segment file and
    the offset, and the operator flag --journal-truncate-corrupt yes starts
    it with the journal cut there (the writes before the bad record kept,
    the ones after it gone).
  - A data directory written before the journal existed (LMDB without the
    "meta" database, so no checkpoint LSN, and no journal) opens without a
    manual step, keeps its keys and takes writes.
"""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from kvdtest import GET, OK, PUT, Server, free_port, main

# No checkpoint during a test unless it stops kvd: the journal holds it all.
ARGS = ["--checkpoint-interval-ms", "3600000"]


def segments(data_dir, shard):
    return sorted(glob.glob(os.path.join(data_dir, "shard-%03d" % shard,
                                         "journal-[0-9a-f]*.kvj")))


def shard_of(srv, key):
    """The shard whose journal holds key (its bytes are in one segment)."""
    for s in range(srv.threads):
        for seg in segments(srv.data_dir, s):
            with open(seg, "rb") as f:
                if key in f.read():
                    return s
    raise AssertionError("%r in no journal" % key)


class Recovery(unittest.TestCase):
    def test_kill9_replays_the_journal(self):
        with Server(threads=2, args=ARGS) as srv:
            c = srv.client()
            for i in range(500):
                self.assertEqual(c.call(PUT, b"k%04d" % i, b"v%d" % i), [OK])
            c.close()
            srv.kill9()
            srv.start()
            c = srv.client()
            for i in range(500):
                self.assertEqual(c.call(GET, b"k%04d" % i), [OK, b"v%d" % i])
            c.close()
            # (the log is read once kvd served a request: the port takes
            # connections before the store is open)
            log = srv.log_text().decode()
            n = [int(x) for x in re.findall(r"journal replayed (\d+) record\(s\)", log)[-2:]]
            self.assertEqual(sum(n), 500, log[-2000:])
            self.assertRegex(log, r"shard-000: checkpoint LSN 0, journal replayed \d+ "
                                  r"record\(s\) \([0-9.]+ MiB\) in [0-9.]+ ms")
            # a clean stop leaves LMDB holding everything
            srv.restart()
            c = srv.client()
            self.assertEqual(c.call(GET, b"k0499"), [OK, b"v499"])
            c.close()
            log = srv.log_text().decode()
            n = [int(x) for x in re.findall(r"journal replayed (\d+) record\(s\)", log)[-2:]]
            self.assertEqual(n, [0, 0])
            srv.stop()

    def test_corruption_refuses_then_truncates(self):
        with Server(threads=1, args=ARGS) as srv:
            c = srv.client()
            for i in range(300):
                self.assertEqual(c.call(PUT, b"key-%04d" % i, b"value-%04d" % i), [OK])
            c.close()
            srv.kill9()
            seg = segments(srv.data_dir, 0)[-1]
            with open(seg, "r+b") as f:
                data = f.read()
                off = data.index(b"value-0150")
                f.seek(off)
                f.write(b"VALUE")   # one record's checksum no longer matches
            # kvd binds its port before it opens the store: wait for its exit
            srv.port = free_port()
            p = subprocess.run(srv.argv(), capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 1)
            out = p.stderr.decode(errors="replace")
            lines = [ln for ln in out.splitlines() if ln.startswith("kvd:")]
            self.assertEqual(len(lines), 1, out)
            self.assertIn(os.path.basename(seg), lines[0])
            self.assertRegex(lines[0], r"offset \d+")
            self.assertIn("--journal-truncate-corrupt yes", lines[0])
            # the operator's choice: cut the journal at the bad record
            srv.extra = ARGS + ["--journal-truncate-corrupt", "yes"]
            srv.start()
            c = srv.client()
            self.assertEqual(c.call(GET, b"key-0149"), [OK, b"value-0149"])
            self.assertEqual(c.call(GET, b"key-0150")[0], 1)
            self.assertEqual(c.call(GET, b"key-0151")[0], 1)
            self.assertEqual(c.call(PUT, b"after", b"cut"), [OK])
            c.close()
            srv.stop()
            srv.extra = ARGS
            srv.start()     # the cut journal opens without the flag now
            c = srv.client()
            self.assertEqual(c.call(GET, b"after"), [OK, b"cut"])
            self.assertEqual(c.call(GET, b"key-0000"), [OK, b"value-0000"])
            c.close()
            srv.stop()

    def test_directory_from_before_the_journal_opens(self):
        if not shutil.which("mdb_dump") or not shutil.which("mdb_load"):
            self.skipTest("mdb_dump/mdb_load not installed (lmdb-utils)")
        with Server(threads=2) as srv:
            c = srv.client()
            for i in range(200):
                self.assertEqual(c.call(PUT, b"old%03d" % i, b"v%d" % i), [OK])
            c.close()
            srv.stop()      # checkpointed: LMDB holds every key
            # rebuild each shard as an older kvd left it: its keys in "kv",
            # no "meta" database (no checkpoint LSN), no journal
            for d in sorted(glob.glob(os.path.join(srv.data_dir, "shard-*"))):
                tmp = tempfile.mkdtemp(prefix="kvdold-")
                try:
                    dump = subprocess.run(["mdb_dump", "-s", "kv", d], check=True,
                                          capture_output=True).stdout
                    subprocess.run(["mdb_load", "-s", "kv", tmp], input=dump, check=True,
                                   capture_output=True)
                    for f in os.listdir(d):
                        os.unlink(os.path.join(d, f))
                    shutil.copy(os.path.join(tmp, "data.mdb"), d)
                finally:
                    shutil.rmtree(tmp)
            srv.start()
            c = srv.client()
            for i in range(200):
                self.assertEqual(c.call(GET, b"old%03d" % i), [OK, b"v%d" % i])
            self.assertEqual(c.call(PUT, b"new", b"1"), [OK])
            c.close()
            srv.kill9()
            srv.start()
            c = srv.client()
            self.assertEqual(c.call(GET, b"new"), [OK, b"1"])
            self.assertEqual(c.call(GET, b"old199"), [OK, b"v199"])
            c.close()
            srv.stop()


if __name__ == "__main__":
    main()
