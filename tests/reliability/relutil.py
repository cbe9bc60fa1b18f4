"""relutil.py - shared by the reliability tests: a mixed write workload on
both ports whose every request is recorded with the time it was sent, the
time its reply arrived and what the reply said, and the audit that decides,
key by key, which states the store may hold after a crash or a power cut.

The workload.  Each writer owns its keys and sends, on one connection
(native protocol or RESP), PUT/SET (some with a TTL of an hour), DEL,
MPUT/MSET, MDEL/DEL of several keys, INCR/INCRBY, APPEND, EXPIRE (an hour,
or 0: PEXPIRE/PERSIST on RESP) and GETDEL, one at a time or pipelined; a
flusher sends FLUSHALL now and then.  A key's state is None (absent) or
(value, has an expiry).

The model.  kvd applies one connection's writes to a key in the order sent
and answers in that order, and what survives a crash is a prefix of each
shard's commits.  So after a cut at time T the key holds the state left by
its first j operations sent before T, where j is at least one past the last
operation acknowledged before T.  A FLUSHALL (atomic per shard) resets the
key somewhere between the last of its operations acknowledged before the
FLUSHALL was sent and the first sent after its reply came; an acknowledged
one must have taken effect, an unanswered one may have.  The audit
enumerates those histories and keeps only the ones that agree with every
acknowledged reply (an INCR's result, an APPEND's length, what GETDEL
returned, whether DEL and EXPIRE found the key): so an acknowledged INCR or
APPEND fixes the value, an acknowledged PUT must be there with its exact
value and expiry unless a later operation replaced it, an acknowledged
delete or FLUSHALL leaves the key absent unless it was written again.

With one shard everything commits in one order, so a writer's surviving
operations are a prefix of all it sent: audit_prefix() checks that, which
makes every unacknowledged MPUT and MDEL all or nothing.

Times are CLOCK_MONOTONIC nanoseconds (time.monotonic_ns), the clock the
power-loss shim stamps its records with.
"""

import itertools
import os
import random
import subprocess
import sys
import threading
import time

from kvdtest import (APPEND, DEL, EXPIRE, FLUSHALL, GETDEL, INCR, MDEL, MGET, MPUT,
                     NOT_FOUND, OK, PUT, SCAN, TTL, Client, frame)
from kvdtest import start_with  # noqa: F401 (the reliability tests' relutil.start_with)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resp"))
import resputil  # noqa: E402

now_ns = time.monotonic_ns
TTL_MS = 3600 * 1000    # an hour: nothing written here expires during a test
KINDS = ("put", "del", "mput", "mdel", "incr", "append", "expire", "getdel")
MIX = (5, 2, 3, 1, 2, 2, 1, 1)   # weights of KINDS


def seed_from_env(default):
    """KVD_SEED replays a run; otherwise a fresh seed.  Printed either way."""
    v = os.environ.get("KVD_SEED")
    seed = int(v) if v else (default if default is not None else random.randrange(1 << 30))
    print("seed %d (KVD_SEED=%d replays this run)" % (seed, seed), flush=True)
    return seed


class Req:
    """One request on the wire."""
    __slots__ = ("kind", "sent", "acked", "failed", "status", "nkeys")

    def __init__(self, kind, nkeys):
        self.kind, self.nkeys = kind, nkeys
        self.sent = self.acked = None
        self.failed = False     # an error reply: it changed nothing
        self.status = None


class KeyOp:
    """One request's effect on one key: fn(prev) is the state it leaves,
    check(prev) whether its acknowledged reply agrees with prev, rix the
    request's index in its writer's reqs."""
    __slots__ = ("req", "fn", "check", "rix")

    def __init__(self, req, fn, rix):
        self.req, self.fn, self.rix = req, fn, rix
        self.check = None


def _set(v, ttl):
    return lambda p: (v, ttl > 0)


def _gone(p):
    return None


def _incr(d):
    return lambda p: (b"%d" % (int(p[0]) + d), p[1]) if p else (b"%d" % d, False)


def _append(s):
    return lambda p: (p[0] + s, p[1]) if p else (s, False)


def _expire(ttl):
    return lambda p: (p[0], ttl > 0) if p else None


class Writer(threading.Thread):
    """One connection writing its own keys, one request at a time
    (pipeline=1) or in pipelined batches of up to `pipeline`.  resp=True
    speaks RESP2 to the RESP port.  reqs lists every request in the order
    sent; hist maps each key to its KeyOps in that order."""

    def __init__(self, port, wid, prefix, nkeys, stop, pipeline=1, seed=None,
                 vmax=200, mix=MIX, resp=False):
        super().__init__(daemon=True, name="writer %d (%s)" % (wid, "resp" if resp else "native"))
        self.port, self.wid, self.stop, self.resp = port, wid, stop, resp
        self.keys = [b"%s:%03d:%04d" % (prefix, wid, i) for i in range(nkeys)]
        # every fourth key is a counter (INCR); the others take strings
        self.counters = self.keys[3::4]
        self.strings = [k for i, k in enumerate(self.keys) if i % 4 != 3]
        self.pipeline = pipeline
        self.rng = random.Random(seed if seed is not None else wid)
        self.vmax, self.mix = vmax, mix
        self.hist, self.reqs = {}, []
        self.seq = 0
        self.errors = {}        # status -> count, for error replies
        self.acked = self.sent = 0
        self.connected = threading.Event()
        self.failure = None     # why the writer could not connect or stopped early

    def value(self, key):
        self.seq += 1
        head = b"%s|%d|%d|" % (key, self.wid, self.seq)
        return head + bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, self.vmax)))

    def ttl(self):
        return TTL_MS if self.rng.random() < 0.3 else 0

    def one_request(self):
        """(Req, wire bytes, reply decoder: reply -> (ok, value))."""
        r = self.rng
        kind = r.choices(KINDS, weights=self.mix)[0]
        if kind == "mput":
            ks = r.sample(self.strings, r.randint(2, 5))
            ttl = 0 if self.resp else self.ttl()
            vals = [self.value(k) for k in ks]
            eff = [(k, _set(v, ttl)) for k, v in zip(ks, vals)]
            pairs = [x for kv in zip(ks, vals) for x in kv]
            wire = ([b"MSET"] + pairs) if self.resp else ([MPUT, ttl] + pairs)
        elif kind == "mdel":
            ks = r.sample(self.keys, r.randint(2, 5))
            eff = [(k, _gone) for k in ks]
            wire = ([b"DEL"] + ks) if self.resp else ([MDEL] + ks)
        else:
            k = r.choice(self.counters if kind == "incr" else self.keys)
            counter = k in self.counters
            if kind == "put":
                ttl = self.ttl()
                v = b"%d" % r.randint(-1000, 1000) if counter else self.value(k)
                eff = [(k, _set(v, ttl))]
                if self.resp:
                    wire = [b"SET", k, v] + ([b"PX", ttl] if ttl else [])
                else:
                    wire = [PUT, k, v, ttl]
            elif kind == "del":
                eff = [(k, _gone)]
                wire = [b"DEL", k] if self.resp else [DEL, k]
            elif kind == "getdel":
                eff = [(k, _gone)]
                wire = [b"GETDEL", k] if self.resp else [GETDEL, k]
            elif kind == "expire":
                ttl = self.ttl()
                eff = [(k, _expire(ttl))]
                if self.resp:
                    wire = [b"PEXPIRE", k, ttl] if ttl else [b"PERSIST", k]
                else:
                    wire = [EXPIRE, k, ttl]
                kind = "persist" if self.resp and not ttl else kind
            elif kind == "incr" or counter:     # APPEND keeps counters integers
                d = r.randint(-100, 100)
                kind = "incr"
                eff = [(k, _incr(d))]
                wire = [b"INCRBY", k, d] if self.resp else [INCR, k, d]
            else:
                s = b"+%d" % self.seq
                self.seq += 1
                eff = [(k, _append(s))]
                wire = [b"APPEND", k, s] if self.resp else [APPEND, k, s]
        req = Req(kind, len(eff))
        ops = [(k, KeyOp(req, fn, None)) for k, fn in eff]
        data = resputil.encode(*wire) if self.resp else frame(wire)
        return req, ops, data

    def decode(self, reply):
        """(error status or None, the reply's value)."""
        if self.resp:
            if isinstance(reply, resputil.Error):
                return str(reply).split(" ")[0], None
            return None, reply
        if reply[0] in (OK, NOT_FOUND):
            v = reply[1] if len(reply) > 1 else None
            return None, (reply[0], v)
        return reply[0], None

    def checks(self, req, ops, val):
        """Attach to each key's op what its acknowledged reply says."""
        if self.resp:
            found = val == 1
            get = val
        else:
            found = val[0] == OK
            get = val[1]
        k, op = ops[0]
        if req.kind == "del":
            op.check = lambda p: (p is not None) == found
        elif req.kind == "getdel":
            op.check = lambda p: (p[0] if p else None) == get
        elif req.kind == "expire":
            op.check = lambda p: (p is not None) == found
        elif req.kind == "persist":
            op.check = lambda p: bool(p and p[1]) == found
        elif req.kind == "incr":
            n = val if self.resp else val[1]
            op.check = lambda p: op.fn(p)[0] == b"%d" % n
        elif req.kind == "append":
            n = val if self.resp else val[1]
            op.check = lambda p: len(op.fn(p)[0]) == n

    def run(self):
        try:
            c = (resputil.Raw if self.resp else Client)(self.port, timeout=20)
        except OSError as e:
            self.failure = "cannot connect: %s" % e
            return
        self.connected.set()
        try:
            self.loop(c)
        except TimeoutError as e:
            self.failure = "no reply within 20 s: %s" % e
        except (OSError, EOFError):
            pass    # kvd died under us: what was acknowledged is recorded
        finally:
            c.close()

    def loop(self, c):
        read = c.reply if self.resp else c.read_reply
        while not self.stop.is_set():
            depth = 1 if self.pipeline <= 1 else self.rng.randint(1, self.pipeline)
            batch = [self.one_request() for _ in range(depth)]
            t = now_ns()
            for req, ops, _ in batch:
                req.sent = t
                for k, op in ops:
                    op.rix = len(self.reqs)
                    self.hist.setdefault(k, []).append(op)
                self.reqs.append(req)
            self.sent += len(batch)
            c.send_raw(b"".join(d for _, _, d in batch))
            for req, ops, _ in batch:
                err, val = self.decode(read())
                t = now_ns()
                if err is None:
                    self.checks(req, ops, val)
                    req.acked = t
                    self.acked += 1
                else:
                    req.failed, req.status = True, err
                    self.errors[err] = self.errors.get(err, 0) + 1


class Flusher(threading.Thread):
    """Sends FLUSHALL (native or RESP) at each of the given delays after
    start, one at a time; events lists them as Reqs."""

    def __init__(self, port, resp_port, delays, stop, seed):
        super().__init__(daemon=True, name="flusher")
        self.port, self.resp_port, self.delays, self.stop = port, resp_port, delays, stop
        self.rng = random.Random(seed)
        self.events = []
        self.failure = None

    def run(self):
        t0 = time.monotonic()
        try:
            for d in self.delays:
                if self.stop.wait(max(0, t0 + d - time.monotonic())):
                    return
                resp = self.resp_port and self.rng.random() < 0.5
                c = resputil.Raw(self.resp_port, 20) if resp else Client(self.port, timeout=20)
                req = Req("flushall", 0)
                req.sent = now_ns()
                self.events.append(req)
                try:
                    if resp:
                        c.send(resputil.encode(b"FLUSHALL"))
                        r = c.reply()
                        ok = r == b"OK"
                    else:
                        c.send_raw(frame([FLUSHALL]))
                        ok = c.read_reply() == [OK]
                    if ok:
                        req.acked = now_ns()
                    else:
                        req.failed = True
                finally:
                    c.close()
        except TimeoutError as e:
            self.failure = "FLUSHALL: no reply within 20 s: %s" % e
        except (OSError, EOFError):
            pass


def run_writers(port, n, prefix, stop, nkeys=48, seed=0, pipelines=(1, 16), resp_port=None,
                mix=MIX):
    """Start n writers: half send one request at a time, half pipeline; with
    resp_port, every other pair speaks RESP."""
    ws = []
    for i in range(n):
        resp = bool(resp_port) and i % 4 >= 2
        ws.append(Writer(resp_port if resp else port, i, prefix, nkeys, stop,
                         pipeline=pipelines[i % len(pipelines)], seed=seed * 1000 + i,
                         resp=resp, mix=mix))
    for w in ws:
        w.start()
    return ws


def wait_progress(ws, timeout=30):
    """Every writer connected and had a write acknowledged, within timeout;
    otherwise an AssertionError naming the ones that did not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(w.acked > 0 for w in ws):
            return
        if any(w.failure for w in ws):
            break
        time.sleep(0.01)
    bad = ["writer %d (%s): %s" % (w.wid, "resp" if w.resp else "native",
                                   w.failure or "no write acknowledged in %d s" % timeout)
           for w in ws if w.acked == 0 or w.failure]
    raise AssertionError("writers made no progress: " + "; ".join(bad[:5]))


def stop_all(ws, stop, timeout=30):
    """Stop and join every writer (and flusher), bounded; a writer that
    is still blocked or failed with a timeout fails the test."""
    stop.set()
    deadline = time.monotonic() + timeout
    for w in ws:
        w.join(max(0.1, deadline - time.monotonic()))
        if w.is_alive():
            raise AssertionError("%s still blocked %d s after the cut" % (w.name, timeout))
        if w.failure:
            raise AssertionError("%s: %s" % (w.name, w.failure))


def merge(writers):
    hist = {}
    for w in writers:
        hist.update(w.hist)
    return hist


def cut_counts(writers, T=None):
    """(requests acknowledged before T, requests sent before T and not
    acknowledged before T without an error, multi-key ones of those)."""
    acked = flight = multi = 0
    for w in writers:
        for r in w.reqs:
            if r.failed or (T is not None and r.sent >= T):
                continue
            if r.acked is not None and (T is None or r.acked < T):
                acked += 1
            else:
                flight += 1
                multi += r.nkeys > 1
    return acked, flight, multi


def _acked(req, T):
    return req.acked is not None and (T is None or req.acked < T)


def _flush_ranges(live, flushes, T):
    """For each FLUSHALL sent before T: (acknowledged, lowest, highest
    position), position p meaning after live[p-1] and before live[p]."""
    out = []
    for f in flushes:
        if f.failed or (T is not None and f.sent >= T):
            continue
        lo = 1 + max([i for i, o in enumerate(live) if _acked(o.req, T) and o.req.acked < f.sent]
                     + [-1])
        hi = len(live)
        if _acked(f, T):
            after = [i for i, o in enumerate(live) if o.req.sent > f.acked]
            hi = after[0] if after else len(live)
        out.append((_acked(f, T), lo, hi))
    return out


def states_by_j(ops, flushes=(), T=None, strict=True):
    """{j: set of states} a key may hold when its first j operations sent
    before T survive.  strict: only the j and FLUSHALL placements allowed
    by what was acknowledged before T (an acknowledged FLUSHALL survives);
    otherwise every j, for measuring what was lost."""
    live = [o for o in ops if not o.req.failed and (T is None or o.req.sent < T)]
    last = max([i for i, o in enumerate(live) if _acked(o.req, T)] + [-1])
    ranges = _flush_ranges(live, flushes, T)
    out = {}
    # each FLUSHALL: not executed (unless acknowledged) or at a position
    choices = [([None] if not a else []) + list(range(lo, hi + 1)) for a, lo, hi in ranges]
    n = 1
    for c in choices:
        n *= len(c)
    if n > 100000:
        raise AssertionError("too many FLUSHALL placements to enumerate (%d)" % n)
    for combo in itertools.product(*choices):
        resets = {p for p in combo if p is not None}
        seq, s, ok = [], None, True
        for i, o in enumerate(live):
            if i in resets:
                s = None
            if o.check is not None and _acked(o.req, T) and not o.check(s):
                ok = False
                break
            s = o.fn(s)
            seq.append(s)
        if not ok:
            continue
        acked_pos = [p for p, (a, _, _) in zip(combo, ranges) if a]
        for j in range(len(live) + 1):
            if strict and (j < last + 1 or any(p > j for p in acked_pos)):
                continue
            s = seq[j - 1] if j else None      # resets before live[j-1] included
            got = out.setdefault(j, set())
            if j in resets and strict and j in acked_pos:
                got.add(None)                   # an acknowledged FLUSHALL right here
            elif j in resets:
                got.update((s, None))           # one right here, maybe not durable
            else:
                got.add(s)
    return out, live, last


class AuditResult:
    def __init__(self):
        self.keys = 0
        self.acked_ops = 0      # acknowledged operations whose effect was checked
        self.uncertain = 0      # keys with more than one allowed state
        self.lost = []          # (key, observed, age of the oldest lost ack in ns)
        self.observed = {}

    def __repr__(self):
        return "keys=%d acked_ops=%d uncertain=%d lost=%d" % (
            self.keys, self.acked_ops, self.uncertain, len(self.lost))


def fetch(port, keys, timeout=30):
    """{key: state} for keys: None, or (value, has an expiry), read with
    MGET and TTL, 500 keys at a time."""
    c = Client(port, timeout=timeout)
    out = {}
    try:
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            r = c.call(MGET, *chunk)
            if r[0] != OK:
                raise AssertionError("MGET failed: %r" % (r,))
            ttls = c.pipeline([(TTL, k) for k in chunk])
            for k, v, t in zip(chunk, r[1:], ttls):
                if v is None:
                    out[k] = None
                    continue
                if t[0] != OK:
                    raise AssertionError("TTL %r: %r while MGET found it" % (k, t))
                out[k] = (v, t[1] != -1)
    finally:
        c.close()
    return out


def _lost_age(ops, flushes, T, v):
    """How long before T the oldest acknowledgement that state v misses
    came (0 when T is None or no such acknowledgement is known)."""
    if T is None:
        return 0
    loose, live, last = states_by_j(ops, flushes, T, strict=False)
    j = max([j for j, s in loose.items() if v in s] + [-1])
    if j < 0:
        return T        # nothing explains it: older than anything
    acks = [o.req.acked for o in live[j:] if _acked(o.req, T)]
    return T - min(acks) if acks else 0


def audit(port, hist, T=None, observed=None, flushes=()):
    """Check every key of hist against what kvd on port holds."""
    res = AuditResult()
    keys = sorted(hist)
    got = observed if observed is not None else fetch(port, keys)
    res.allowed = {}
    for k in keys:
        byj, live, last = states_by_j(hist[k], flushes, T)
        ok = set().union(*byj.values()) if byj else set()
        res.allowed[k] = byj
        res.keys += 1
        res.acked_ops += sum(1 for o in live[:last + 1] if _acked(o.req, T))
        if len(ok) > 1:
            res.uncertain += 1
        v = got.get(k)
        res.observed[k] = v
        if v not in ok:
            res.lost.append((k, v, _lost_age(hist[k], flushes, T, v)))
    return res


def audit_prefix(writers, res, T=None):
    """One shard: each writer's surviving requests must be a prefix of what
    it sent.  Returns [(writer id, reason)] for the writers where no prefix
    explains every one of its keys (a half-applied MPUT or MDEL, say)."""
    bad = []
    for w in writers:
        reqs = [(i, r) for i, r in enumerate(w.reqs)
                if not r.failed and (T is None or r.sent < T)]
        last = max([n for n, (_, r) in enumerate(reqs) if _acked(r, T)] + [-1])
        # per key: how many of its ops lie in the first J live requests
        rank = {i: n for n, (i, _) in enumerate(reqs)}
        ok_any = False
        for J in range(last + 1, len(reqs) + 1):
            fits = True
            for k, ops in w.hist.items():
                live = [o for o in ops if o.rix in rank]
                j = sum(1 for o in live if rank[o.rix] < J)
                if res.observed[k] not in res.allowed[k].get(j, ()):
                    fits = False
                    break
            if fits:
                ok_any = True
                break
        if not ok_any:
            bad.append((w.wid, "no prefix of its %d requests (%d acknowledged) explains "
                        "what its keys hold" % (len(reqs), last + 1)))
    return bad


def check_settled(port, settled, flushes):
    """Keys of earlier rounds hold what the audit after their round saw,
    or nothing when a FLUSHALL may have run (must, if acknowledged).
    Returns the keys that do not."""
    keys = sorted(settled)
    if not keys:
        return [], {}
    got = fetch(port, keys)
    flushed = any(f.acked is not None for f in flushes)
    maybe = any(not f.failed for f in flushes)
    bad = []
    for k in keys:
        ok = {None} if flushed else ({settled[k], None} if maybe else {settled[k]})
        if got[k] not in ok:
            bad.append(k)
    return bad, got


class Rounds:
    """Crash rounds on one server: writers on both ports (and a FLUSHALL
    now and then), SIGKILL at a random moment once every writer has made
    progress, restart, audit.  Every wait is bounded and fails the round
    when it runs out: a writer that cannot connect or makes no progress, a
    kvd that does not come back or does not answer.  Each round must have
    acknowledged writes and writes in flight at the kill."""

    def __init__(self, srv, seed, writers=64, prefix=b"c", prefix_check=False,
                 mix=MIX, threads=None, nkeys=48):
        self.srv, self.nwriters, self.prefix = srv, writers, prefix
        self.rng = random.Random(seed)
        self.prefix_check, self.mix, self.threads, self.nkeys = prefix_check, mix, threads, nkeys
        self.settled = {}       # key -> state it held at the audit after its round
        self.fig = dict(iterations=0, writers=writers, requests_sent=0, requests_acked=0,
                        in_flight_at_kill=0, multi_in_flight=0, min_acked_round=None,
                        min_in_flight_round=None, flushall_sent=0, keys_audited=0,
                        acked_ops_audited=0, uncertain_keys=0, lost=0)

    def round(self, it):
        srv, rng, fig = self.srv, self.rng, self.fig
        stop = threading.Event()
        ws = run_writers(srv.port, self.nwriters, b"%s%d" % (self.prefix, it), stop,
                         seed=rng.randrange(1 << 30), resp_port=srv.resp_port, mix=self.mix,
                         nkeys=self.nkeys)
        try:
            wait_progress(ws)
        except AssertionError:
            stop.set()
            raise
        delay = rng.uniform(0.05, 1.2)
        flushes = sorted(rng.uniform(0, delay * 1.2) for _ in range(rng.choice((0, 1, 2))))
        fl = Flusher(srv.port, srv.resp_port, flushes, stop, rng.randrange(1 << 30))
        fl.start()
        time.sleep(delay)
        kill9(srv)
        stop_all(ws + [fl], stop)
        errors = {}
        for w in ws:
            for st, cnt in w.errors.items():
                errors[st] = errors.get(st, 0) + cnt
        if errors:
            raise AssertionError("round %d: error replies before the kill: %r" % (it, errors))
        idle = [w.wid for w in ws if w.acked == 0]
        if idle:
            raise AssertionError("round %d: writers %r had no write acknowledged before "
                                 "the kill" % (it, idle[:8]))
        acked, flight, multi = cut_counts(ws)
        if acked == 0 or (flight == 0 and getattr(self, "redone", 0) >= 3):
            raise AssertionError("round %d: %d acknowledged, %d in flight at the kill: "
                                 "nothing to audit" % (it, acked, flight))
        if self.threads:
            srv.threads = rng.choice(self.threads)
        srv.start()
        res = audit(srv.port, merge(ws), flushes=fl.events)
        if res.lost:
            k, v, _ = res.lost[0]
            raise AssertionError("round %d: %d keys hold a state no history allows, e.g. %r = "
                                 "%r, allowed %r" % (it, len(res.lost), k, v,
                                                     res.allowed[k]))
        if self.prefix_check:
            bad = audit_prefix(ws, res)
            if bad:
                raise AssertionError("round %d: not a prefix (a multi-key write half "
                                     "applied?): %r" % (it, bad[:3]))
        bad, got = check_settled(srv.port, self.settled, fl.events)
        if bad:
            raise AssertionError("round %d: %d keys of earlier rounds changed, e.g. %r"
                                 % (it, len(bad), bad[0]))
        self.settled = {k: v for k, v in itertools.chain(got.items(), res.observed.items())
                        if v is not None}
        if flight == 0:
            # The kill fell where every writer had its answer (a slow,
            # sanitized kvd): audited, but not counted; the round is run
            # again on keys of its own, three times at the most.
            self.redone = getattr(self, "redone", 0) + 1
            return self.round(it + 1000)
        fig["iterations"] += 1
        fig["requests_sent"] += sum(w.sent for w in ws)
        fig["requests_acked"] += acked
        fig["in_flight_at_kill"] += flight
        fig["multi_in_flight"] += multi
        fig["min_acked_round"] = min(acked, fig["min_acked_round"] or acked)
        fig["min_in_flight_round"] = min(flight, fig["min_in_flight_round"] or flight)
        fig["flushall_sent"] += len(fl.events)
        fig["keys_audited"] += res.keys
        fig["acked_ops_audited"] += res.acked_ops
        fig["uncertain_keys"] += res.uncertain
        fig["lost"] += len(res.lost)


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


def shim_env(**env):
    """LD_PRELOAD of the shim, plus what ASan needs to accept it."""
    shim = os.environ.get("KVD_POWERLOSS")
    env["LD_PRELOAD"] = shim
    env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    return env
