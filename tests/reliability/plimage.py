"""plimage.py - file images a power cut could leave, from the shim's log.

powerloss.c logs, for every tracked file, each write (its bytes, before it
is issued, and its result, when it returns) and each fsync/fdatasync (when
it starts and when it returns).  A power cut after the first k records
leaves, for each file:

  - every write a sync covered: the write returned (was logged done)
    before a sync of that file started, and that sync returned 0 within
    the k records; or the write went through an O_DSYNC descriptor and
    returned (LMDB writes its meta pages that way in sync mode);
  - of every other write in the k records (returned or still in flight),
    any part: missing, present, or present sector by sector (512 bytes,
    the unit a disk writes atomically, the assumption LMDB itself makes
    for its 120-byte meta pages).

The modes choose among those possibilities:

  drop     every uncovered write lost (what a cut usually leaves)
  keep     every uncovered write present (in-flight ones in part)
  random   each 512-byte sector of each uncovered write kept or lost by a
           coin toss, independently (a disk that reorders freely)
  ordered  uncovered writes applied in order up to a random one, that one
           in part (a disk that writes in order)
"""

import os
import random
import shutil
import struct

HDR = struct.Struct("=IIIxxxxQQQQq")    # struct pl_rec (powerloss.h), 56 bytes
MAGIC = 0x4B504C31
OPEN, WRITE, WDONE, SYNC_BEGIN, SYNC_END, TRUNC = 1, 2, 3, 4, 5, 6
SECTOR = 512
MODES = ("drop", "keep", "random", "ordered")


class Rec:
    __slots__ = ("type", "file", "seq", "t", "off", "res", "data")

    def __init__(self, type_, file, seq, t, off, res, data):
        self.type, self.file, self.seq, self.t = type_, file, seq, t
        self.off, self.res, self.data = off, res, data


class Log:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.raw = f.read()
        self.recs = []
        self.paths = {}
        mv = memoryview(self.raw)
        pos = 0
        while pos + HDR.size <= len(self.raw):
            magic, type_, file, seq, t, off, ln, res = HDR.unpack_from(self.raw, pos)
            if magic != MAGIC:
                raise ValueError("bad record at %d" % pos)
            pos += HDR.size
            if pos + ln > len(self.raw):
                break   # the process died while logging: not issued yet
            data = mv[pos:pos + ln]
            pos += ln
            if type_ == OPEN:
                self.paths[file] = bytes(data).decode()
            self.recs.append(Rec(type_, file, seq, t, off, res, data))

    def __len__(self):
        return len(self.recs)

    def time_at(self, k):
        """The cut after k records happened no earlier than this."""
        return self.recs[k - 1].t if k else 0

    def last_sync_begin(self, k):
        """Per file, the time the last sync that completed within the first
        k records began (0: none): everything acknowledged before it is on
        disk in any image, whatever the mode."""
        begin, out = {}, {f: 0 for f in self.paths}
        for i in range(k):
            r = self.recs[i]
            if r.type == SYNC_BEGIN:
                begin[r.seq] = r.t
            elif r.type == SYNC_END and r.res == 0 and r.seq in begin:
                out[r.file] = begin[r.seq]
        return out

    def sync_points(self):
        """Indices of records that complete a durable step: a successful
        sync, or a returned O_DSYNC write (a meta page in sync mode)."""
        out, dsync = [], set()
        for i, r in enumerate(self.recs):
            if r.type == WRITE and r.res == 1:
                dsync.add(r.seq)
            elif (r.type == SYNC_END and r.res == 0) or (r.type == WDONE and r.seq in dsync):
                out.append(i)
        return out

    def classify(self, k):
        """Writes in the first k records as [(rec, length, covered, done)]."""
        writes, done, dsync, begin = {}, {}, {}, {}
        syncs = {}      # file -> [index of the begin of each successful sync]
        for i in range(k):
            r = self.recs[i]
            if r.type == WRITE:
                writes[r.seq] = (i, r)
                dsync[r.seq] = r.res == 1
            elif r.type == WDONE:
                done[r.seq] = (i, r.res)
            elif r.type == SYNC_BEGIN:
                begin[r.seq] = i
            elif r.type == SYNC_END and r.res == 0 and r.seq in begin:
                syncs.setdefault(r.file, []).append(begin[r.seq])
        out = []
        for seq, (i, r) in sorted(writes.items(), key=lambda x: x[1][0]):
            if seq in done:
                di, res = done[seq]
                if res <= 0:
                    continue        # failed: nothing to model
                n = res
                covered = dsync[seq] or any(b > di for b in syncs.get(r.file, ()))
                out.append((r, n, covered, True))
            else:
                out.append((r, len(r.data), False, False))
        return out

    def image(self, k, live_dir, base_dir, out_dir, mode, rng):
        """Write into out_dir (a copy of base_dir, the data directory as it
        was before the recorded run in live_dir) the tracked files as the
        cut after k records may leave them; returns the uncovered writes."""
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        shutil.copytree(base_dir, out_dir, ignore=shutil.ignore_patterns("lock.mdb"))
        files = {}
        for fid, path in self.paths.items():
            rel = os.path.relpath(path, live_dir)
            src = os.path.join(base_dir, rel)
            with open(src, "rb") if os.path.exists(src) else _Empty() as f:
                files[fid] = (os.path.join(out_dir, rel), bytearray(f.read()))
        ws = self.classify(k)
        uncovered = [w for w in ws if not w[2]]
        stop = rng.randrange(len(uncovered) + 1) if mode == "ordered" else None
        u = 0
        for r, n, covered, done in ws:
            img = files[r.file][1]
            data = r.data[:n]
            if covered:
                _put(img, r.off, data)
                continue
            if mode == "drop":
                pass
            elif mode == "keep":
                _put_sectors(img, r.off, data, rng, 1.0 if done else 0.5)
            elif mode == "random":
                _put_sectors(img, r.off, data, rng, 0.5)
            elif mode == "ordered":
                if u < stop:
                    _put(img, r.off, data)
                elif u == stop:
                    _put(img, r.off, data[:rng.randrange(len(data) // SECTOR + 1) * SECTOR])
            u += 1
        for fid, (path, img) in files.items():
            with open(path, "wb") as f:
                f.write(img)
        return len(uncovered)


class _Empty:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def read(self):
        return b""


def _put(img, off, data):
    end = off + len(data)
    if end > len(img):
        img.extend(bytes(end - len(img)))
    img[off:end] = data


def _put_sectors(img, off, data, rng, p):
    """Each sector of the write (aligned to the file) kept with chance p."""
    pos = 0
    while pos < len(data):
        a = off + pos
        n = min(len(data) - pos, SECTOR - a % SECTOR)
        if p >= 1.0 or rng.random() < p:
            _put(img, a, data[pos:pos + n])
        pos += n


def cut_points(log, n, first, rng):
    """About n cuts from record `first` on: half anywhere, half right before
    or right after a durable step (where a wrong order would show)."""
    total = len(log)
    if total <= first:
        return []
    cuts = {total}
    steps = [i for i in log.sync_points() if i >= first]
    while len(cuts) < n // 2 and len(cuts) < total - first:
        cuts.add(rng.randrange(first, total + 1))
    for i in rng.sample(steps, min(len(steps), n - len(cuts))):
        cuts.add(i + rng.choice((0, 1)))       # before it is logged, or after
    return sorted(c for c in cuts if first <= c <= total)
