"""test_hash_crash.py - hashes under kill -9 (issue 33).

Writers on the RESP port each own one hash and send, one at a time or
pipelined (up to 16), HSET of one to several fields, HINCRBY and
HINCRBYFLOAT of a counter, HDEL of one or several fields (the last one
deleting the hash now and then), HSETNX, and an EXPIRE of an hour.  kvd
runs with small memtables and frequent checkpoints, so that hashes pass
through the journal, the memtables and LMDB during a round.  Once every
writer has had a write acknowledged, kvd is killed with SIGKILL at a
random moment and restarted on the same data directory, and each hash is
audited: one connection's writes to one key are applied in the order sent
and what survives is a prefix of them, so the hash must equal the model's
state after some j of its writes, j at least one past the last one
acknowledged (every acknowledged HSET and HINCRBY is there, exactly) and
at most the number sent; a write of several fields is all there or none
(no half-applied HSET or HDEL).  The expiry is checked the same way.  The
next round starts from what the audit found.

Rounds: 5 per durability mode in `make test` (KVD_SOAK_HASH_CRASH or
KVD_SOAK_ITERATIONS for more); KVD_SEED replays a run.
"""

import random
import threading
import time
import unittest

from kvdtest import STATS, Server, main
from relutil import report, seed_from_env, soak
from resputil import Error, Raw, encode

TTL_S = 3600


def gen_op(rnd):
    """One write: the RESP command, and its effect on (fields, expires)."""
    r = rnd.random()
    f = b"f%d" % rnd.randrange(12)
    v = b"v%d" % rnd.randrange(1 << 30)
    if r < 0.35:
        fs = [b"f%d" % rnd.randrange(12) for _ in range(rnd.choice([1, 1, 3, 6]))]
        args = [x for g in fs for x in (g, v + g)]
        return ["HSET", b"h"] + args, ("set", list(zip(fs, [v + g for g in fs])))
    if r < 0.55:
        return ["HINCRBY", b"h", b"cnt", b"1"], ("incr", b"cnt")
    if r < 0.62:
        return ["HINCRBYFLOAT", b"h", b"fl", b"0.5"], ("incrf", b"fl")
    if r < 0.82:
        fs = [b"f%d" % rnd.randrange(12) for _ in range(rnd.choice([1, 2, 12]))]
        if rnd.random() < 0.1:  # every field: the hash goes
            fs = [b"f%d" % i for i in range(12)] + [b"cnt", b"fl"]
        return ["HDEL", b"h"] + fs, ("del", fs)
    if r < 0.92:
        return ["HSETNX", b"h", f, v], ("setnx", (f, v))
    return ["EXPIRE", b"h", str(TTL_S).encode()], ("expire", None)


def apply(state, eff):
    """The state (fields dict, has an expiry) after one write's effect."""
    fields, exp = dict(state[0]), state[1]
    kind, arg = eff
    if kind == "set":
        fields.update(arg)
    elif kind == "incr":
        fields[arg] = b"%d" % (int(fields.get(arg, b"0")) + 1)
    elif kind == "incrf":
        x = float(fields.get(arg, b"0")) + 0.5
        fields[arg] = (b"%d" % x) if x == int(x) else (b"%.1f" % x)
    elif kind == "del":
        for f in arg:
            fields.pop(f, None)
    elif kind == "setnx":
        fields.setdefault(*arg)
    elif kind == "expire":
        if fields:
            exp = True
    if not fields:
        exp = False  # a hash with no field is no key
    return fields, exp


class Writer(threading.Thread):
    def __init__(self, port, key, seed, stop, pipeline):
        super().__init__(daemon=True)
        self.port, self.key, self.stop, self.pipeline = port, key, stop, pipeline
        self.rnd = random.Random(seed)
        self.ops = []       # (command, effect), in the order sent
        self.acked = 0      # replies received (the first acked ops)
        self.errors = []

    def run(self):
        try:
            c = Raw(self.port, timeout=30)
        except OSError as e:  # pragma: no cover - reported by the audit
            self.errors.append(e)
            return
        try:
            while not self.stop.is_set():
                n = self.rnd.randrange(1, self.pipeline + 1)
                batch = [gen_op(self.rnd) for _ in range(n)]
                for cmd, _ in batch:
                    cmd[1] = self.key
                self.ops += batch
                c.send(b"".join(encode(*cmd) for cmd, _ in batch))
                for cmd, _ in batch:
                    got = c.reply()
                    if isinstance(got, Error):
                        self.errors.append((cmd, got))
                    self.acked += 1
        except (OSError, EOFError):
            pass  # the kill
        finally:
            c.close()


def hash_state(c, key):
    flat = c.call("HGETALL", key)
    fields = dict(zip(flat[0::2], flat[1::2]))
    ttl = c.call("TTL", key)
    return fields, ttl > 0


class HashCrash(unittest.TestCase):
    def rounds(self, durability):
        seed = seed_from_env(None)
        rnd = random.Random(seed)
        n_writers, rounds = 12, soak("hash_crash", 5)
        lost = in_flight = acked_total = 0
        with Server(threads=2, durability=durability, resp=True,
                    args=("--memtable-size", "256k",
                          "--checkpoint-interval-ms", "200")) as srv:
            base = {b"hc%d" % i: ({}, False) for i in range(n_writers)}
            for it in range(rounds):
                stop = threading.Event()
                ws = [Writer(srv.resp_port, key, rnd.randrange(1 << 30), stop,
                             rnd.choice([1, 16]))
                      for key in sorted(base)]
                for w in ws:
                    w.start()
                deadline = time.time() + 30
                while min(w.acked for w in ws) == 0 and time.time() < deadline:
                    time.sleep(0.01)
                self.assertGreater(min(w.acked for w in ws), 0, "a writer made no progress")
                time.sleep(rnd.uniform(0.05, 1.0))
                srv.kill9()
                stop.set()
                for w in ws:
                    w.join(30)
                srv.restart()
                c = Raw(srv.resp_port)
                for w in ws:
                    self.assertEqual([e for e in w.errors if not isinstance(e, OSError)], [],
                                     w.key)
                    got = hash_state(c, w.key)
                    states = [base[w.key]]
                    for _, eff in w.ops:
                        states.append(apply(states[-1], eff))
                    ok = [j for j in range(w.acked, len(w.ops) + 1) if states[j] == got]
                    acked_total += w.acked
                    in_flight += len(w.ops) - w.acked
                    if not ok:
                        lost += 1
                        self.fail("round %d, %s: recovered %r matches no state "
                                  "after %d to %d of its writes (last acknowledged "
                                  "state %r)" % (it, w.key, got, w.acked, len(w.ops),
                                                 states[w.acked]))
                    base[w.key] = got
                c.close()
            self.assertGreater(in_flight, 0, "no write in flight at any kill")
            # the hashes went through checkpoints into LMDB, not only the
            # journal and the memtables: a checkpoint's LSN is read back from
            # LMDB at open (the checkpoint counter starts again at each
            # restart, and the last restart may not have had one yet)
            st = srv.client().call(STATS)[1]
            self.assertGreater(sum(s[b"checkpoint_lsn"] for s in st[b"shards"]), 0)
        report("hash-crash-" + durability, seed=seed, rounds=rounds, lost=lost,
               acked=acked_total, in_flight=in_flight)

    def test_sync(self):
        self.rounds("sync")

    def test_async(self):
        self.rounds("async")


if __name__ == "__main__":
    main()
