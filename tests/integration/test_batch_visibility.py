"""test_batch_visibility.py - one shard's part of a multi-key write becomes
visible to readers at once (docs/architecture.md, section 7).

A writer sets the same 20 keys of one shard to a new value, over and over
(MPUT on the native protocol, MSET on the RESP one), while readers on other
connections read all 20 (MGET): every reply must hold one write's values,
never some keys old and others new.  The committer inserts a batch into the
memtable one record at a time while io threads read it, so without a
watermark a reader can land between two inserts.  In sync mode a committer
thread inserts; in async mode an idle shard's writes are inserted by the
writer's own io thread (inline commits), so that case needs a reader on
the other io thread: the RESP readers are placed by CLIENT ID (its top 16
bits are the io thread), the native ones are eight connections, so that
all of them land on the writer's thread with a chance of 1 in 256.
"""

import os
import sys
import threading
import unittest

from kvdtest import *  # noqa: F401,F403

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "resp"))
from resputil import Raw, encode  # noqa: E402

NKEYS = 20
READS = 1500  # MGETs per reader at least
ROUNDS = 20   # and until the writer has written this many rounds
DEPTH = 16    # writes pipelined at a time: batches of 16 x 20 records
PAD = b"." * 200  # values long enough that a batch takes a while to insert


def value(i, j):
    return b"%d.%d" % (i, j) + PAD


def io_thread(raw):
    return raw.call("CLIENT", "ID") >> 48


class BatchVisibility(unittest.TestCase):
    def run_case(self, durability):
        with Server(threads=2, durability=durability, resp=True) as srv:
            c = srv.client()
            keys = shard_keys(c, NKEYS, prefix=b"bv")[0]
            self.native(srv, keys)
            self.resp(srv, keys)
            if durability == "async":  # the writer's io thread inserted
                self.assertGreater(c.call(STATS)[1][b"inline_commits"], 0)
            c.close()

    def hammer(self, write, readers):
        """Run write(i) for i = 1, 2, ... until every reader has read
        READS times and the writer has run ROUNDS rounds; the torn replies
        the readers saw.  reader(torn, more) reads while more()."""
        stop = threading.Event()
        torn, rounds = [], [0]

        def writer():
            while not stop.is_set():
                write(rounds[0] + 1)
                rounds[0] += 1

        def more(n):
            return n < READS or (rounds[0] < ROUNDS and wt.is_alive())

        wt = threading.Thread(target=writer)
        wt.start()
        rts = [threading.Thread(target=r, args=(torn, more)) for r in readers]
        for t in rts:
            t.start()
        for t in rts:
            t.join()
        stop.set()
        wt.join()
        self.assertGreaterEqual(rounds[0], ROUNDS)
        return torn

    def native(self, srv, keys):
        w = srv.client()
        self.assertEqual(w.call(MPUT, 0, *[x for k in keys for x in (k, b"0")]),
                         [OK])

        def write(i):
            got = w.pipeline([(MPUT, 0) + tuple(
                x for k in keys for x in (k, value(i, j)))
                for j in range(DEPTH)])
            self.assertEqual(got, [[OK]] * DEPTH)

        def reader(torn, more):
            conns = [srv.client() for _ in range(8)]
            n = 0
            while more(n):
                for got in conns[n % 8].pipeline([(MGET,) + tuple(keys)] * 10):
                    if got[0] != OK or len(set(got[1:])) != 1:
                        torn.append(got)
                n += 10
            for r in conns:
                r.close()

        torn = self.hammer(write, [reader, reader])
        w.close()
        self.assertEqual(torn[:3], [], "%d MGETs torn" % len(torn))

    def resp(self, srv, keys):
        w = Raw(srv.resp_port)
        mine = io_thread(w)
        # a reader on the writer's io thread, and one on the other
        same = other = None
        for _ in range(64):
            r = Raw(srv.resp_port)
            t = io_thread(r)
            if t == mine and same is None:
                same = r
            elif t != mine and other is None:
                other = r
            else:
                r.close()
            if same and other:
                break
        self.assertTrue(same and other, "connections on one io thread only")
        self.assertEqual(w.call("MSET", *[x for k in keys for x in (k, b"0")]),
                         b"OK")

        def write(i):
            w.send(b"".join(
                encode("MSET", *[x for k in keys for x in (k, value(i, j))])
                for j in range(DEPTH)))
            self.assertEqual([w.reply() for _ in range(DEPTH)],
                             [b"OK"] * DEPTH)

        def reader_on(r):
            def reader(torn, more):
                n = 0
                while more(n):
                    r.send(encode("MGET", *keys) * 10)
                    for _ in range(10):
                        got = r.reply()
                        if not isinstance(got, list) or len(set(got)) != 1:
                            torn.append(got)
                    n += 10
            return reader

        torn = self.hammer(write, [reader_on(same), reader_on(other)])
        for r in (w, same, other):
            r.close()
        self.assertEqual(torn[:3], [], "%d MGETs torn" % len(torn))

    def test_sync(self):
        self.run_case("sync")

    def test_async_inline(self):
        self.run_case("async")


if __name__ == "__main__":
    main()
