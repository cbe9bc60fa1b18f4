"""relutil.py - shared by the reliability tests: a mixed write workload whose
every operation is recorded with the time it was sent and the time its
reply arrived, and the audit that decides, key by key, which states the
store may hold afterwards.

The model.  Every key has exactly one writer, which sends its operations in
order on one connection; kvd applies one connection's writes to a key in
that order and answers in that order.  So after a crash at time T the key
holds the state left by one of its operations j, where j is at least the
last operation acknowledged before T (acknowledged: an OK or NOT_FOUND
reply arrived) and at most the last one sent before T.  Values carry the
writer and a sequence number, so each PUT's value is unique and the audit
knows exactly which operation it is looking at.  An acknowledged PUT must
therefore be present with its exact value unless a later operation (sent,
maybe acknowledged) replaced it; an acknowledged DEL leaves the key absent
unless a later PUT re-created it; an acknowledged MPUT is present in full.
Times are CLOCK_MONOTONIC nanoseconds (time.monotonic_ns), the clock the
power-loss shim stamps its records with.
"""

import os
import random
import subprocess
import threading
import time

from kvdtest import DEL, MGET, MPUT, NOT_FOUND, OK, PUT, SCAN, Client, frame

now_ns = time.monotonic_ns


class Op:
    """One operation's effect on one key."""
    __slots__ = ("state", "sent", "acked", "failed")

    def __init__(self, state, sent):
        self.state = state      # the value it leaves, None for absent
        self.sent = sent
        self.acked = None       # when its reply arrived
        self.failed = False     # an error reply: it changed nothing


class Writer(threading.Thread):
    """One connection writing its own keys: PUT, DEL and MPUT at random,
    one at a time (pipeline=1) or in pipelined batches of up to pipeline
    requests.  Its history is {key: [Op, ...]} in the order sent."""

    def __init__(self, port, wid, prefix, nkeys, stop, pipeline=1, seed=None,
                 vmax=200, mix=(5, 2, 3)):
        super().__init__(daemon=True)
        self.port, self.wid, self.stop = port, wid, stop
        self.keys = [b"%s:%03d:%04d" % (prefix, wid, i) for i in range(nkeys)]
        self.pipeline = pipeline
        self.rng = random.Random(seed if seed is not None else wid)
        self.vmax = vmax
        self.mix = mix
        self.hist = {}
        self.seq = 0
        self.errors = {}        # status -> count, for replies other than OK/NOT_FOUND
        self.acked = 0          # requests acknowledged
        self.sent = 0

    def value(self, key):
        self.seq += 1
        head = b"%s|%d|%d|" % (key, self.wid, self.seq)
        return head + bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, self.vmax)))

    def one_request(self):
        """A request and the keys it touches, as (request, [(key, state)])."""
        kind = self.rng.choices((PUT, DEL, MPUT), weights=self.mix)[0]
        if kind == MPUT:
            ks = self.rng.sample(self.keys, self.rng.randint(2, 5))
            pairs, effects = [], []
            for k in ks:
                v = self.value(k)
                pairs += [k, v]
                effects.append((k, v))
            return [MPUT, 0] + pairs, effects
        k = self.rng.choice(self.keys)
        if kind == DEL:
            return [DEL, k], [(k, None)]
        v = self.value(k)
        return [PUT, k, v], [(k, v)]

    def run(self):
        try:
            c = Client(self.port, timeout=20)
        except OSError:
            return
        try:
            while not self.stop.is_set():
                depth = 1 if self.pipeline <= 1 else self.rng.randint(1, self.pipeline)
                reqs, ops = [], []
                for _ in range(depth):
                    req, effects = self.one_request()
                    reqs.append(req)
                    ops.append([(k, Op(s, 0)) for k, s in effects])
                t = now_ns()
                for group in ops:
                    for k, op in group:
                        op.sent = t
                        self.hist.setdefault(k, []).append(op)
                self.sent += len(reqs)
                c.send_raw(b"".join(frame(r) for r in reqs))
                for group in ops:
                    r = c.read_reply()
                    t = now_ns()
                    if r[0] in (OK, NOT_FOUND):
                        self.acked += 1
                        for _, op in group:
                            op.acked = t
                    else:
                        self.errors[r[0]] = self.errors.get(r[0], 0) + 1
                        for _, op in group:
                            op.failed = True
        except (OSError, EOFError):
            pass    # kvd died under us: what was acknowledged is recorded
        finally:
            c.close()


def run_writers(port, n, prefix, stop, nkeys=48, seed=0, pipelines=(1, 16)):
    """Start n writers: half send one request at a time, half pipeline."""
    ws = [Writer(port, i, prefix, nkeys, stop,
                 pipeline=pipelines[i % len(pipelines)], seed=seed * 1000 + i)
          for i in range(n)]
    for w in ws:
        w.start()
    return ws


def merge(writers):
    hist = {}
    for w in writers:
        hist.update(w.hist)
    return hist


def allowed(ops, T=None):
    """The states a key may hold after a crash at T (None: after the last
    reply that arrived), and the index of the last acknowledged op."""
    live = [o for o in ops if not o.failed and (T is None or o.sent < T)]
    last = None
    for i, o in enumerate(live):
        if o.acked is not None and (T is None or o.acked < T):
            last = i
    if last is None:
        return {None} | {o.state for o in live}, live, None
    return {o.state for o in live[last:]}, live, last


class AuditResult:
    def __init__(self):
        self.keys = 0
        self.acked_ops = 0      # acknowledged operations whose effect was checked
        self.uncertain = 0      # keys whose last ops were sent but not acknowledged
        self.lost = []          # (key, observed, age of the oldest lost ack in ns)
        self.observed = {}

    def __repr__(self):
        return "keys=%d acked_ops=%d uncertain=%d lost=%d" % (
            self.keys, self.acked_ops, self.uncertain, len(self.lost))


def fetch(port, keys, timeout=30):
    """{key: value or None} read with MGET, 500 keys at a time."""
    c = Client(port, timeout=timeout)
    out = {}
    try:
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            r = c.call(MGET, *chunk)
            if r[0] != OK:
                raise AssertionError("MGET failed: %r" % (r,))
            out.update(zip(chunk, r[1:]))
    finally:
        c.close()
    return out


def audit(port, hist, T=None, observed=None):
    """Check every key of hist against what kvd on port holds."""
    res = AuditResult()
    keys = sorted(hist)
    got = observed if observed is not None else fetch(port, keys)
    for k in keys:
        ok, live, last = allowed(hist[k], T)
        res.keys += 1
        res.acked_ops += 0 if last is None else sum(1 for o in live[:last + 1] if o.acked is not None)
        if len(ok) > 1:
            res.uncertain += 1
        v = got.get(k)
        res.observed[k] = v
        if v not in ok:
            # the oldest acknowledgement this state misses
            j = max([i for i, o in enumerate(live[:last + 1]) if o.state == v] + [-1])
            age = (T - live[j + 1].acked) if T is not None else 0
            res.lost.append((k, v, age))
    return res


def walk(port):
    """Read every key in key order (SCAN pages): every leaf page is read."""
    c = Client(port, timeout=60)
    n, cursor = 0, None
    try:
        while True:
            r = c.call(SCAN, None, cursor, None, 10000, 1)
            if r[0] != OK:
                raise AssertionError("SCAN failed: %r" % (r,))
            n += len(r[1])
            cursor = r[2]
            if cursor is None:
                return n
    finally:
        c.close()


def soak(name, default):
    """Iterations: KVD_SOAK_ITERATIONS (or KVD_SOAK_<NAME>) on demand."""
    v = os.environ.get("KVD_SOAK_" + name.upper()) or os.environ.get("KVD_SOAK_ITERATIONS")
    return int(v) if v else default


def report(name, **figures):
    """One line of figures, for docs/reliability.md and the soak log."""
    line = "RELIABILITY %s %s" % (name, " ".join("%s=%s" % kv for kv in figures.items()))
    print(line, flush=True)
    path = os.environ.get("KVD_SOAK_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def mdb_dump_ok(shard_dir):
    """mdb_dump -a walks every page of every database; None if not installed."""
    try:
        p = subprocess.run(["mdb_dump", "-a", shard_dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=60)
    except FileNotFoundError:
        return None
    return p.returncode == 0 and not p.stderr


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def sanitized(pid):
    """Is the process built with ASan or TSan (its memory is not its own)?"""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    return "libasan" in maps or "libtsan" in maps


def kill9(srv):
    """SIGKILL kvd, which must still be running: a kvd that died on its own
    (a crash, a sanitizer's abort) must not pass for a killed one."""
    rc = srv.proc.poll()
    if rc is not None:
        raise AssertionError("kvd exited on its own (status %d) before the kill:\n%s"
                             % (rc, srv.log_text().decode(errors="replace")[-3000:]))
    srv.kill9()


def start_with(srv, **env):
    """Start srv with extra environment variables (the shim's, mostly)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        return srv.start()
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def shim_env(**env):
    """LD_PRELOAD of the shim, plus what ASan needs to accept it."""
    shim = os.environ.get("KVD_POWERLOSS")
    env["LD_PRELOAD"] = shim
    env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    return env
