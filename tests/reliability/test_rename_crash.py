"""test_rename_crash.py - kill -9 at random moments during RENAMEs across
shards: after the restart each value is under at least one of its two names,
never under neither.

Eight pairs of keys on a four-shard store (most pairs fall in two shards),
each holding one value; eight RESP connections rename their pair's value
back and forth (a -> b, b -> a) as fast as they are answered, with a COPY
... REPLACE now and then, until kvd is killed with SIGKILL 0.05 to 1 s in.
kvd commits a RENAME's new key (flushed, in sync mode) before it deletes the
old one, so a crash in between leaves both; a crash that left neither would
lose the value.  Rounds: 8 (KVD_SOAK_CRASH on demand).  KVD_SEED replays.
"""

import os
import random
import sys
import threading
import time
import unittest

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "resp"))

from kvdtest import Server, main  # noqa: E402
from relutil import kill9, seed_from_env, soak  # noqa: E402
from resputil import Error, Raw  # noqa: E402

PAIRS = 8


def mover(port, a, b, stop):
    try:
        c = Raw(port)
        src, dst = a, b
        while not stop.is_set():
            if random.random() < 0.1:
                c.call("COPY", src, dst, "REPLACE")
            rep = c.call("RENAME", src, dst)
            if isinstance(rep, Error):
                return  # the value is gone: the audit reports it
            src, dst = dst, src
    except Exception:  # killed: the connection ends mid-reply
        return


class RenameCrash(unittest.TestCase):
    def test_rename_never_loses_the_value(self):
        seed = seed_from_env(None)
        random.seed(seed)
        with Server(threads=4, resp=True) as srv:
            for rnd in range(soak("crash", 8)):
                c = Raw(srv.resp_port)
                vals = {}
                for i in range(PAIRS):
                    a, b = b"ra%d" % i, b"rb%d" % i
                    v = b"value-%d-%d" % (rnd, i)
                    c.call("DEL", a, b)
                    self.assertEqual(c.call("SET", a, v), b"OK")
                    vals[(a, b)] = v
                c.close()
                stop = threading.Event()
                ts = [threading.Thread(target=mover, args=(srv.resp_port, a, b, stop))
                      for a, b in vals]
                for t in ts:
                    t.start()
                time.sleep(random.uniform(0.05, 1.0))
                kill9(srv)
                stop.set()
                for t in ts:
                    t.join(30)
                srv.start()
                # The replay may take seconds in a sanitizer build, where
                # the port answers first (kvd binds it before opening).
                c = Raw(srv.resp_port, timeout=120)
                for (a, b), v in vals.items():
                    got = [c.call("GET", a), c.call("GET", b)]
                    self.assertIn(v, got, "seed %d, round %d: %r and %r hold %r"
                                  % (seed, rnd, a, b, got))
                    for x in got:
                        self.assertIn(x, (None, v))
                c.close()
            srv.stop()
        print("seed %d: %d rounds, no value lost" % (seed, soak("crash", 8)))


if __name__ == "__main__":
    main()
