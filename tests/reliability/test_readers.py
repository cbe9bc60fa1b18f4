"""test_readers.py - reader slots a kill -9 leaves behind are cleared at start.

Every io thread holds one LMDB reader slot per shard it has read from, and
a kill -9 leaves those slots marked in use.  When kvd is the only process
with the environment open, LMDB itself resets the reader table at open;
when another process has it open too (a backup tool, mdb_stat, a second
reader: here lmdb_hold), the table survives the crash and only kvd's
mdb_reader_check at open (and every 10 s) frees the dead slots.  Without
it, the table (threads + 126 slots) would be full after about 64 crashes
and every read would fail with MDB_READERS_FULL.

The test keeps lmdb_hold attached and runs 200 cycles of: start kvd, read
from both shards on both io threads while writing, kill -9 in the middle of
it.  Each restart must clear the dead slots (kvd logs how many), reads and
writes must keep working, and at the end the reader table holds no slot of
a dead process.  Cycles: KVD_SOAK_READERS (or KVD_SOAK_ITERATIONS).
"""

import os
import random
import re
import shutil
import subprocess
import threading
import time
import unittest

from kvdtest import MGET, OK, PUT, Server, main
from relutil import kill9, report, soak

HOLD = os.environ.get("KVD_LMDB_HOLD")


def reader_pids(shard_dir):
    out = subprocess.run(["mdb_stat", "-r", shard_dir], capture_output=True,
                         text=True, timeout=30).stdout
    return [int(m.group(1)) for m in re.finditer(r"^\s+(\d+) [0-9a-f]+ ", out, re.M)]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class StaleReaders(unittest.TestCase):
    def test_200_kill9_cycles_with_a_second_process_attached(self):
        if not HOLD or not os.path.exists(HOLD):
            self.skipTest("lmdb_hold not built")
        if not shutil.which("mdb_stat"):
            self.skipTest("mdb_stat is not installed (lmdb-utils: scripts/deps.sh test)")
        cycles = soak("readers", 200)
        keys = [b"r%03d" % i for i in range(64)]   # enough to reach both shards
        srv = Server(threads=2)
        srv.start()
        c = srv.client()
        for k in keys:
            self.assertEqual(c.call(PUT, k, k), [OK])
        c.close()
        srv.stop()
        shards = sorted(os.path.join(srv.data_dir, d) for d in os.listdir(srv.data_dir)
                        if d.startswith("shard-"))
        hold = subprocess.Popen([HOLD] + shards, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            self.assertEqual(hold.stdout.readline(), b"ready\n")
            rng = random.Random(3)
            cleared = 0
            for i in range(cycles):
                srv.start()
                stop = threading.Event()
                # a few connections, so both io threads open read snapshots
                cs = [srv.client() for _ in range(4)]
                for c in cs:
                    r = c.call(MGET, *keys)
                    self.assertEqual(r[0], OK, "cycle %d: reads failed: %r" % (i, r[:1]))
                    self.assertEqual(r[1:], keys)
                t = threading.Thread(target=self.pound, args=(cs, keys, stop, i))
                t.start()
                time.sleep(rng.uniform(0.0, 0.03))
                kill9(srv)              # with reads and writes in flight
                stop.set()
                t.join()
                for c in cs:
                    c.close()
                text = srv.log_text().decode(errors="replace")
                cleared = sum(int(n) for n in re.findall(r"cleared (\d+) stale reader", text))
            srv.start()
            c = srv.client()
            r = c.call(MGET, *keys)
            self.assertEqual(r, [OK] + keys)
            self.assertEqual(c.call(PUT, b"after", b"all"), [OK])
            c.close()
            for d in shards:
                pids = reader_pids(d)
                # the live holders are listed: the table was read, not misparsed
                self.assertIn(hold.pid, pids, "%s: lmdb_hold's own slot is not listed" % d)
                self.assertIn(srv.proc.pid, pids, "%s: the running kvd's slot is not listed" % d)
                dead = [p for p in pids if not pid_alive(p)]
                self.assertEqual(dead, [], "%s: slots of dead processes" % d)
            srv.stop()
            # every restart found the previous run's slots and freed them
            self.assertGreaterEqual(cleared, cycles)
            report("stale-readers", cycles=cycles, slots_cleared=cleared)
        finally:
            hold.stdin.close()
            hold.wait(30)
            srv.cleanup()

    def pound(self, cs, keys, stop, cycle):
        try:
            n = 0
            while not stop.is_set():
                c = cs[n % len(cs)]
                c.call(MGET, *keys[:16])
                c.call(PUT, b"cycle", b"%d" % cycle)
                n += 1
        except (OSError, EOFError):
            pass


if __name__ == "__main__":
    main()
