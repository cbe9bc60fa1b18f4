"""test_crash.py - kill -9 at random moments under 64 concurrent writers.

Each iteration starts 64 writer connections (half one request at a time,
half pipelining up to 16) sending a random mix of PUT, DEL and MPUT to
their own keys, kills kvd with SIGKILL at a random moment (0.05 to 1.2 s
in), restarts it on the same data directory and audits every key written
so far (relutil.py's model): every acknowledged PUT is there with its exact
value, every acknowledged DEL left its key absent, every acknowledged MPUT
is there in full, unless a later operation of the same writer (sent,
perhaps unanswered) replaced it.  Keys of earlier iterations must still
hold what the first audit after their crash saw: nothing changes a store
behind its writers' backs.  The environment must open clean every time,
take the next iteration's writes, walk whole, and stop with status 0.

Iterations per durability mode: 20 in `make test`; KVD_SOAK_CRASH (or
KVD_SOAK_ITERATIONS) on demand.
"""

import random
import threading
import time
import unittest

from kvdtest import COUNT, OK, PUT, Server, main
from relutil import audit, fetch, kill9, merge, report, run_writers, soak, walk


class Crash(unittest.TestCase):
    def crash_rounds(self, durability, n):
        rng = random.Random(durability)
        settled = {}            # key -> state seen at the first audit after its crash
        acked = ops_sent = keys_audited = uncertain = 0
        with Server(threads=2, durability=durability) as srv:
            for it in range(n):
                stop = threading.Event()
                ws = run_writers(srv.port, 64, b"c%d" % it, stop, seed=it)
                time.sleep(rng.uniform(0.05, 1.2))
                kill9(srv)
                stop.set()
                for w in ws:
                    w.join(30)
                    self.assertFalse(w.is_alive())
                errors = {}
                for w in ws:
                    for st, cnt in w.errors.items():
                        errors[st] = errors.get(st, 0) + cnt
                self.assertEqual(errors, {}, "error replies before the kill")
                hist = merge(ws)
                srv.start()
                res = audit(srv.port, hist)
                self.assertEqual(res.lost[:5], [], "iteration %d: %d acknowledged operations "
                                 "lost" % (it, len(res.lost)))
                if settled:
                    keys = sorted(settled)
                    got = fetch(srv.port, keys)
                    changed = [k for k in keys if got[k] != settled[k]]
                    self.assertEqual(changed[:5], [], "iteration %d: keys of earlier "
                                     "iterations changed" % it)
                settled.update(res.observed)
                acked += sum(w.acked for w in ws)
                ops_sent += sum(w.sent for w in ws)
                keys_audited += res.keys
                uncertain += res.uncertain
            # opened clean after all that: writable, readable end to end
            c = srv.client()
            self.assertEqual(c.call(PUT, b"after", b"crashes"), [OK])
            self.assertEqual(walk(srv.port), c.call(COUNT)[1])
            c.close()
            srv.stop()
        self.assertGreater(acked, 0)
        report("crash-" + durability, iterations=n, writers=64, requests_sent=ops_sent,
               requests_acked=acked, keys_audited=keys_audited, uncertain_keys=uncertain,
               lost=0)

    def test_sync(self):
        self.crash_rounds("sync", soak("crash", 20))

    def test_async(self):
        # async acknowledges once the commit reached the OS: a process crash
        # loses nothing acknowledged either
        self.crash_rounds("async", soak("crash", 20))


if __name__ == "__main__":
    main()
