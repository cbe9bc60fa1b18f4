"""test_backup.py - hot backups are one consistent cut, and restore works.

Writers keep writing numbered keys (each waits for its acknowledgement)
while a backup runs.  The backup must hold, for every writer, exactly its
first n keys with no gap: n at least what was acknowledged before the backup
was asked for and at most what was acknowledged when it answered.  The backup
is then served directly and through --restore; restore refuses a data
directory that is not empty unless forced.
"""

import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from kvdtest import *  # noqa: F401,F403


def writer(port, n, acked, stop):
    c = Client(port)
    i = 0
    while not stop.is_set():
        if c.call(PUT, b"w%d:%07d" % (n, i), b"%d" % i) == [OK]:
            acked[n] = i + 1
        i += 1
    c.close()


def prefix_len(test, c, n):
    st, items, cur = c.call(SCAN, b"w%d:" % n, None, None, 10000, 1)
    keys = list(items)
    while cur is not None:
        st, items, cur = c.call(SCAN, b"w%d:" % n, cur, None, 10000, 1)
        keys += items
    test.assertEqual(keys, [b"w%d:%07d" % (n, i) for i in range(len(keys))],
                     "writer %d: a gap in the backup" % n)
    return len(keys)


class Backup(unittest.TestCase):
    def test_hot_backup_is_a_cut(self):
        tmp = tempfile.mkdtemp(prefix="kvdbackup-")
        bk = os.path.join(tmp, "bk")
        with Server(threads=2, args=["--backup-anywhere", "yes"]) as srv:
            acked, stop = [0] * 6, threading.Event()
            ts = [threading.Thread(target=writer, args=(srv.port, n, acked, stop))
                  for n in range(6)]
            for t in ts:
                t.start()
            # Every writer has had an answer before BACKUP is asked for
            # (a fresh data directory's first write waits for its journal
            # segments to be pre-written, which a slow disk can stretch
            # past any fixed sleep), then they write on for a while.
            deadline = time.time() + 60
            while min(acked) == 0 and time.time() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            c = srv.client()
            lo = list(acked)
            st, keys = c.call(BACKUP, bk.encode())
            hi = list(acked)
            time.sleep(0.2)
            stop.set()
            for t in ts:
                t.join()
            self.assertEqual(st, OK)
            self.assertGreater(min(lo), 0)
            # errors: relative path, a directory that is not empty, a file
            self.assertEqual(c.call(BACKUP, b"relative/dir")[0], BAD_ARGS)
            self.assertEqual(c.call(BACKUP, bk.encode())[0], BAD_ARGS)
            self.assertEqual(c.call(BACKUP, 7)[0], BAD_ARGS)
            r = c.call(BACKUP, (tmp + "/no/such/parent").encode())
            self.assertEqual(r[0], BAD_ARGS)
            self.assertIn(b"parent", r[1])
            self.assertEqual(c.call(PING), [OK])

        # serve the backup directory directly
        with Server(threads=2, data_dir=bk) as b:
            c = b.client()
            total = 0
            for n in range(6):
                got = prefix_len(self, c, n)
                self.assertGreaterEqual(got, lo[n])
                self.assertLessEqual(got, hi[n])
                total += got
            self.assertEqual(total, keys)
            self.assertEqual(c.call(COUNT), [OK, keys])
            b.stop()

        # --restore into a fresh directory, then refuse a non-empty one
        dst = os.path.join(tmp, "restored")
        with Server(threads=1, data_dir=dst, args=["--restore", bk]) as r:
            self.assertEqual(r.client().call(COUNT), [OK, keys])
            r.client().call(PUT, b"extra", b"1")
            r.stop()
        p = subprocess.run([KVD_BIN, "--port", "0", "--data-dir", dst, "--restore", bk],
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"not empty", p.stderr)
        with Server(threads=1, data_dir=dst,
                    args=["--restore", bk, "--restore-force", "yes"]) as r:
            self.assertEqual(r.client().call(COUNT), [OK, keys])
            self.assertEqual(r.client().call(GET, b"extra"), [NOT_FOUND])
            r.stop()
        # a backup directory without its manifest is refused
        os.rename(os.path.join(bk, "MANIFEST"), os.path.join(tmp, "M"))
        p = subprocess.run([KVD_BIN, "--port", "0", "--data-dir", tmp + "/x", "--restore", bk],
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"MANIFEST", p.stderr)
        subprocess.run(["rm", "-rf", tmp])

    def test_hashes(self):
        """A backup carries hashes (type, fields in their order, expiry),
        and so does a restore of it."""
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "resp"))
        from resputil import Raw
        tmp = tempfile.mkdtemp(prefix="kvdbackup-")
        bk = os.path.join(tmp, "bk")

        def state(srv):
            r = Raw(srv.resp_port)
            out = {k: (r.call("TYPE", k), r.call("HGETALL", k), r.call("TTL", k) > 0,
                       r.call("OBJECT", "ENCODING", k))
                   for k in r.call("KEYS", "*") if k.startswith(b"h")}
            r.close()
            return out

        with Server(threads=2, resp=True, args=["--backup-anywhere", "yes"]) as srv:
            r = Raw(srv.resp_port)
            for i in range(200):
                r.call("HSET", "h%d" % i, "z", "1", "a", "%d" % i)
                r.call("HINCRBY", "h%d" % i, "n", "%d" % i)
            r.call("HSET", "hbig", *[b"f%d" % i for i in range(1200)])
            r.call("EXPIRE", "h5", "3600")
            r.call("SET", "s", "string")
            r.close()
            want = state(srv)
            self.assertEqual(srv.client().call(BACKUP, bk.encode())[0], OK)
        with Server(threads=2, resp=True, data_dir=bk) as srv:
            self.assertEqual(state(srv), want)
        restored = os.path.join(tmp, "restored")
        with Server(threads=2, resp=True, data_dir=restored,
                    args=["--restore", bk]) as srv:
            self.assertEqual(state(srv), want)
            self.assertEqual(Raw(srv.resp_port).call("GET", "s"), b"string")

    def test_second_backup_is_busy(self):
        # 256 MiB of values make the first copy take a while (about 0.5 s
        # here); the second BACKUP is sent only once kvd has logged that
        # the first one started, and its BUSY must come while the first
        # one's reply is still pending, so the order is checked, not
        # assumed.
        tmp = tempfile.mkdtemp(prefix="kvdbackup-")
        first, second = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        with Server(threads=2, args=["--backup-anywhere", "yes"]) as srv:
            c = srv.client()
            val = b"v" * (1 << 20)
            for i in range(32):
                args = [0]
                for j in range(8):
                    args += [b"big%04d" % (i * 8 + j), val]
                self.assertEqual(c.call(MPUT, *args), [OK])
            c.send_raw(frame([BACKUP, first.encode()]))
            started = b'backup to "%s" started' % first.encode()
            end = time.monotonic() + 30
            while started not in srv.log_text():
                self.assertLess(time.monotonic(), end, "BACKUP never started")
                time.sleep(0.01)
            c2 = srv.client()
            r = c2.call(BACKUP, second.encode())
            pending = not select.select([c.sock], [], [], 0)[0]
            self.assertEqual(r[0], BUSY, r)
            self.assertTrue(pending, "the first BACKUP ended before the "
                            "second was answered: make the store larger")
            self.assertFalse(os.path.exists(second))
            self.assertEqual(c.read_reply(), [OK, 256])
            # BUSY lasts only while one runs.
            self.assertEqual(c2.call(BACKUP, second.encode()), [OK, 256])
            c.close()
            c2.close()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
