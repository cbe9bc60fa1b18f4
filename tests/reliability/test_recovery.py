"""test_recovery.py - starting kvd on what a crash, a corruption or an older
kvd left: LMDB at its last checkpoint, then the journal replayed above it.

  - kill -9 before any checkpoint: everything acknowledged comes back from
    the journal, and the log says how many records were replayed and how
    long it took; a clean stop checkpoints everything, so the next start
    replays nothing.  Each shard's start line gives its LMDB's keys (none
    after the kill, every one after the clean stop), used MiB and map size.
  - A torn tail (a bad record followed only by records of the same
    write, none of them known durable) is wiped with a warning naming the
    segment, and kvd starts with the records before it.
  - A bad record followed by good, durable ones is corruption, not a torn
    tail: kvd refuses to start with one line naming the segment file and
    the offset, and the operator flag --journal-truncate-corrupt yes starts
    it with the journal cut there (the writes before the bad record kept,
    the ones after it gone).
  - A data directory written before the journal existed (LMDB without the
    "meta" database, so no checkpoint LSN, and no journal) opens without a
    manual step, keeps its keys and takes writes.
  - The next segment is made ahead on a helper thread: an append that
    crosses into it finds it there (STATS journal_spares_ahead, none made
    by the committer: journal_spares_inline).
  - Checkpoints recycle the journal: with 1 MiB segments, 20 MiB written
    leave one segment and at most two spares (released segments renamed),
    never more than two spares on the way.
"""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from kvdtest import GET, MPUT, OK, PUT, STATS, Server, free_port, main, wait_for

# No checkpoint during a test unless it stops kvd: the journal holds it all.
ARGS = ["--checkpoint-interval-ms", "3600000"]


def segments(data_dir, shard):
    return sorted(glob.glob(os.path.join(data_dir, "shard-%03d" % shard,
                                         "journal-[0-9a-f]*.kvj")))


def garble(srv, find, new):
    """Overwrite the first bytes find in shard 0's last journal segment
    with new (a record's checksum no longer matches); the segment's path."""
    seg = segments(srv.data_dir, 0)[-1]
    with open(seg, "r+b") as f:
        off = f.read().index(find)
        f.seek(off)
        f.write(new)
    return seg


def warnings(srv, what):
    """The log's warning lines that say what."""
    return [ln for ln in srv.log_text().decode().splitlines()
            if " W " in ln and what in ln]


def shard_of(srv, key):
    """The shard whose journal holds key (its bytes are in one segment)."""
    for s in range(srv.threads):
        for seg in segments(srv.data_dir, s):
            with open(seg, "rb") as f:
                if key in f.read():
                    return s
    raise AssertionError("%r in no journal" % key)


# The start line of a shard (docs/operations.md, "Logs"): its LMDB's keys,
# used size and map size, before the journal is replayed.
START_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \d+ I (\S+)/shard-(\d{3}): "
    r"(\d+) keys, (\d+\.\d) MiB used, map-size (\d+\.\d) GiB$", re.M)


def start_lines(srv):
    """{shard: (keys, MiB used, map-size GiB)} from the last start's lines."""
    found = START_LINE.findall(srv.log_text().decode())[-srv.threads:]
    for d, _, _, _, _ in found:
        assert d == srv.data_dir, (d, srv.data_dir)
    return {int(s): (int(k), float(u), float(m)) for _, s, k, u, m in found}


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
            # nothing was checkpointed before the kill: LMDB holds no key
            lines = start_lines(srv)
            self.assertEqual(sorted(lines), [0, 1], log[-2000:])
            self.assertEqual([lines[s][0] for s in (0, 1)], [0, 0], log[-2000:])
            self.assertEqual({lines[s][2] for s in (0, 1)}, {64.0})  # the default
            # a clean stop leaves LMDB holding everything
            srv.restart()
            c = srv.client()
            self.assertEqual(c.call(GET, b"k0499"), [OK, b"v499"])
            c.close()
            log = srv.log_text().decode()
            n = [int(x) for x in re.findall(r"journal replayed (\d+) record\(s\)", log)[-2:]]
            self.assertEqual(n, [0, 0])
            # ... and its start lines count every key, each shard its own
            lines = start_lines(srv)
            self.assertEqual(sorted(lines), [0, 1], log[-2000:])
            c = srv.client()
            shards = c.call(STATS)[1][b"shards"]
            c.close()
            entries = [s[b"entries"] for s in shards]
            self.assertEqual([lines[s][0] for s in (0, 1)], entries, log[-2000:])
            self.assertEqual(sum(entries), 500)
            # "MiB used" is LMDB's used pages, STATS used_bytes, to 0.1 MiB
            for s in (0, 1):
                self.assertAlmostEqual(lines[s][1], shards[s][b"used_bytes"] / (1 << 20),
                                       delta=0.051)
            self.assertEqual({lines[s][2] for s in (0, 1)}, {64.0})
            srv.stop()

    def test_torn_tail_is_wiped_with_a_warning(self):
        with Server(threads=1, args=ARGS) as srv:
            c = srv.client()
            for i in range(50):
                self.assertEqual(c.call(PUT, b"before-%02d" % i, b"b%02d" % i), [OK])
            # one request, one batch: one journal write of 20 records, each
            # stamped with the flushed LSN from before that write
            args = [0]
            for i in range(20):
                args += [b"torn-%02d" % i, b"torn-value-%02d" % i]
            self.assertEqual(c.call(MPUT, *args), [OK])
            c.close()
            srv.kill9()
            # as if the write had reached the disk in part
            seg = garble(srv, b"torn-value-05", b"TORN")
            srv.start()
            c = srv.client()
            self.assertEqual(c.call(GET, b"before-49"), [OK, b"b49"])
            self.assertEqual(c.call(GET, b"torn-04"), [OK, b"torn-value-04"])
            for i in range(5, 20):
                self.assertEqual(c.call(GET, b"torn-%02d" % i)[0], 1, i)
            self.assertEqual(c.call(PUT, b"after", b"tail"), [OK])
            c.close()
            warn = warnings(srv, "torn tail")
            self.assertEqual(len(warn), 1, srv.log_text()[-2000:])
            self.assertIn(os.path.basename(seg), warn[0])
            self.assertRegex(warn[0], r"torn tail wiped, [1-9]\d* byte\(s\) from offset \d+")
            srv.restart()   # the wiped tail is gone for good: a clean start
            c = srv.client()
            self.assertEqual(c.call(GET, b"after"), [OK, b"tail"])
            self.assertEqual(c.call(GET, b"torn-06")[0], 1)
            c.close()
            self.assertEqual(srv.log_text().decode().count("torn tail"), 1)
            srv.stop()

    def test_corruption_refuses_then_truncates(self):
        with Server(threads=1, args=ARGS) as srv:
            c = srv.client()
            for i in range(300):
                self.assertEqual(c.call(PUT, b"key-%04d" % i, b"value-%04d" % i), [OK])
            c.close()
            srv.kill9()
            seg = garble(srv, b"value-0150", b"VALUE")
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
            warn = warnings(srv, "journal truncated")
            self.assertEqual(len(warn), 1, srv.log_text()[-2000:])
            self.assertIn(os.path.basename(seg), warn[0])
            self.assertIn("every later one dropped", warn[0])
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

    def test_segments_made_ahead(self):
        """docs/architecture.md, "The journal": a shard whose journal holds
        no spare but the one kept for deletes (section 8) has a helper
        thread make the next segment, so the append that crosses into it
        does not write a segment of zeros itself.
        1 MiB segments, no checkpoint (so no spare is a recycled segment):
        eight rounds of 0.75 MiB, each after a spare is there, cross at
        least five segments, every one made ahead (STATS
        journal_spares_ahead), none by the committer
        (journal_spares_inline); nothing temporary is left after a stop."""
        with Server(threads=1, args=ARGS + ["--journal-segment-size", "1m"]) as srv:
            shard = os.path.join(srv.data_dir, "shard-000")
            c = srv.client()

            def spares():
                return [f for f in os.listdir(shard)
                        if re.fullmatch(r"journal-spare-\d+\.kvj", f)]

            def shard_stats():
                return c.call(STATS)[1][b"shards"][0]
            # an answer first: kvd listens before its store is open
            self.assertEqual(shard_stats()[b"journal_spares_inline"], 0)
            val = b"a" * (64 << 10)
            for r in range(8):
                wait_for(lambda: len(spares()) >= 2,
                         what="a spare made ahead (round %d)" % r)
                for i in range(12):
                    self.assertEqual(c.call(PUT, b"k%d-%02d" % (r, i), val), [OK])
            made = len(segments(srv.data_dir, 0)) - 1   # the first: at start
            st = wait_for(lambda: (lambda s: s[b"journal_spares_ahead"] >= made
                                   and s)(shard_stats()),
                          what="the last spare counted")
            self.assertGreaterEqual(made, 5)
            self.assertEqual(st[b"journal_spares_inline"], 0, st)
            self.assertGreaterEqual(st[b"journal_spares_ahead"], made, st)
            c.close()
            srv.stop()
            left = [f for f in os.listdir(shard) if f.endswith(".tmp")]
            self.assertEqual(left, [])

    def test_stop_while_a_spare_is_made(self):
        """A stop that finds the helper making a segment ahead (just after
        an append crossed into the last spare) takes its file as a spare:
        nothing temporary is left, and the store opens with every value.
        Stopping at once after each crossing, five times, meets the helper
        at work most times; before the fix each such stop left
        journal-ready.tmp behind."""
        d = tempfile.mkdtemp(prefix="kvdspare-")
        self.addCleanup(shutil.rmtree, d, True)
        val = b"s" * (64 << 10)
        for r in range(5):
            with Server(threads=1, data_dir=d,
                        args=ARGS + ["--journal-segment-size", "1m"]) as srv:
                c = srv.client()
                for i in range(17):     # 1.06 MiB: past one segment
                    self.assertEqual(c.call(PUT, b"r%d-%02d" % (r, i), val), [OK])
                c.close()
                srv.stop()
            shard = os.path.join(d, "shard-000")
            left = [f for f in os.listdir(shard) if f.endswith(".tmp")]
            self.assertEqual(left, [], "round %d" % r)
        with Server(threads=1, data_dir=d, args=ARGS) as srv:
            c = srv.client()
            for r in range(5):
                self.assertEqual(c.call(GET, b"r%d-16" % r), [OK, val])

    def test_checkpoints_recycle_segments(self):
        """docs/operations.md, "Sizing": each shard keeps its current
        segment, those written since the last checkpoint and up to two
        recycled spares (KVJ_DEFAULT_MAX_SPARES; kvd passes max_spares 0).
        20 MiB through 1 MiB segments with a checkpoint every 100 ms: the
        directory never holds more than two spares, a spare is a released
        segment renamed (its inode), and once checkpointed one segment is
        left."""
        args = ["--journal-segment-size", "1m", "--checkpoint-interval-ms", "100",
                "--memtable-size", "4m"]
        with Server(threads=1, durability="async", args=args) as srv:
            shard = os.path.join(srv.data_dir, "shard-000")

            def look():
                segs, spares = {}, {}
                for f in os.listdir(shard):
                    try:
                        ino = os.stat(os.path.join(shard, f)).st_ino
                    except FileNotFoundError:   # renamed meanwhile
                        continue
                    if re.fullmatch(r"journal-spare-\d+\.kvj", f):
                        spares[f] = ino
                    elif re.fullmatch(r"journal-[0-9a-f]{16}\.kvj", f):
                        segs[f] = ino
                return segs, spares

            c = srv.client()
            seg_inodes, seen_segs, most_segs, most_spares, recycled = set(), set(), 0, 0, 0
            val = b"v" * (64 << 10)
            for i in range(320):                 # 20 MiB of values
                self.assertEqual(c.call(PUT, b"big%03d" % i, val), [OK])
                segs, spares = look()
                self.assertLessEqual(len(spares), 2, (i, sorted(spares)))
                most_segs = max(most_segs, len(segs))
                most_spares = max(most_spares, len(spares))
                recycled += sum(1 for ino in spares.values() if ino in seg_inodes)
                seg_inodes.update(segs.values())
                seen_segs.update(segs)
            # every write (one record each, LSNs from 1) in LMDB: the
            # segments below the current one were released
            wait_for(lambda: len(look()[0]) == 1 and
                     c.call(STATS)[1][b"shards"][0][b"checkpoint_lsn"] == 320,
                     what="one journal segment left after the checkpoints")
            segs, spares = look()
            c.close()
            self.assertGreaterEqual(len(seen_segs), 15, sorted(seen_segs))
            self.assertLessEqual(most_segs, 12)
            self.assertLessEqual(len(spares), 2, sorted(spares))
            self.assertGreaterEqual(most_spares, 1)
            self.assertGreater(recycled, 0, "no spare was a released segment")
            journal = sum(os.stat(os.path.join(shard, f)).st_size
                          for f in list(segs) + list(spares))
            self.assertLessEqual(journal, 3 << 20)
            srv.stop()
            srv.start()
            c = srv.client()
            self.assertEqual(c.call(GET, b"big319"), [OK, val])
            c.close()
            srv.stop()


if __name__ == "__main__":
    main()
