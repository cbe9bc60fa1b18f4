"""test_crash.py - kill -9 at random moments under 64 concurrent writers.

Each round starts 64 writer connections, half on the native port and half
on the RESP port, half sending one request at a time and half pipelining up
to 16, with a random mix of PUT/SET (some with an hour's TTL), DEL,
MPUT/MSET, MDEL, INCR, APPEND, EXPIRE/PERSIST and GETDEL on their own keys,
and a FLUSHALL now and then.  Once every writer has had a write
acknowledged, kvd is killed with SIGKILL at a random moment (0.05 to 1.2 s
later), restarted on the same data directory, and every key written so far
is audited (relutil.py's model): every acknowledged write is there with its
exact value and expiry, or was replaced by a later operation sent before
the kill; an acknowledged INCR or APPEND fixes the value; an acknowledged
delete or FLUSHALL leaves the key absent unless written again.  Keys of
earlier rounds still hold what the audit after their round saw (or nothing,
after a FLUSHALL).  A round fails unless it had acknowledged writes and
writes in flight at the kill, every writer connected and made progress,
and kvd came back and answered within bounded time.

test_one_shard runs on a one-shard store, where a writer's surviving
requests must be a prefix of what it sent: every MPUT and MDEL that was in
flight at the kill is there whole or not at all.

Rounds per case: 15 (one shard: 6) in `make test`; KVD_SOAK_CRASH (or
KVD_SOAK_ITERATIONS) on demand.  KVD_SEED replays a run (the seed is
printed).
"""

import unittest

from kvdtest import COUNT, OK, PUT, Server, main
from relutil import MIX, Rounds, report, seed_from_env, soak, walk


class Crash(unittest.TestCase):
    def crash_rounds(self, name, n, threads=2, durability="sync", **kw):
        seed = seed_from_env(None)
        with Server(threads=threads, durability=durability, resp=True) as srv:
            rounds = Rounds(srv, seed, **kw)
            for it in range(n):
                rounds.round(it)
            # opened clean after all that: writable, readable end to end
            c = srv.client()
            self.assertEqual(c.call(PUT, b"after", b"crashes"), [OK])
            self.assertEqual(walk(srv.port), c.call(COUNT)[1])
            c.close()
            srv.stop()
        fig = rounds.fig
        self.assertEqual(fig["iterations"], n)
        self.assertEqual(fig["lost"], 0)
        report(name, seed=seed, **fig)
        return fig

    def test_sync(self):
        self.crash_rounds("crash-sync", soak("crash", 15))

    def test_async(self):
        # async acknowledges once the commit reached the OS: a process crash
        # loses nothing acknowledged either
        self.crash_rounds("crash-async", soak("crash", 15), durability="async")

    def test_one_shard(self):
        # multi-key writes weighted up, fewer keys: many MPUT/MDEL in flight
        mix = dict(zip(("put", "del", "mput", "mdel", "incr", "append", "expire", "getdel"),
                       MIX))
        mix.update(mput=8, mdel=4)
        fig = self.crash_rounds("crash-one-shard", soak("crash", 6), threads=1, writers=16,
                                prefix=b"o", prefix_check=True, nkeys=16,
                                mix=tuple(mix.values()))
        self.assertGreater(fig["multi_in_flight"], 0, "no MPUT or MDEL in flight at any kill")


if __name__ == "__main__":
    main()
