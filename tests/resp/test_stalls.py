"""test_stalls.py - small requests that once stalled kvd for seconds (an
outside audit's findings), each raced against a client that keeps working
meanwhile:

  - PUBLISH to a 200,000-byte channel with one subscriber to a '*' and a
    100,000-byte pattern (21.9 s, quadratic, under the pub/sub lock);
  - PUBLISH matching patterns must not hold that lock: a subscriber on
    another io thread is answered while a PUBLISH matches;
  - WATCH of 200,000 keys (quadratic, inside the exclusive section that
    every write waits for);
  - SCAN MATCH and KEYS with a pattern of 1,000,000 '*' (per key examined).

No assertion is timed.  Each test sends the request and, until its reply
arrives, has another client on another io thread do cheap work of its own,
one round trip at a time; the reply must come before that client has done
a set number of rounds.  The number sits between what the fixed and the
quadratic servers allow by a wide margin on either side, on a loaded
2-core machine as on an idle one, because both sides slow down together:
figures for each are in its docstring.
"""

import select
import unittest

from kvdtest import Server
from resputil import Raw, encode, main, spread_conns


def other_thread(port):
    """Two connections on different io threads (the rest closed)."""
    cs, ids = spread_conns(port, 4)
    a = cs[0]
    b = next(c for c, i in zip(cs, ids) if i >> 48 != ids[0] >> 48)
    for c in cs:
        if c is not a and c is not b:
            c.close()
    return a, b


def arrived(conn):
    return bool(conn.buf) or bool(select.select([conn.sock], [], [], 0)[0])


def race(conn, request, other, work, rounds):
    """Send request on conn, then do work(other) until its reply starts to
    arrive, at most rounds times: the rounds done first."""
    conn.send(request)
    for done in range(rounds):
        if arrived(conn):
            return done
        work(other)
    return rounds


class Stalls(unittest.TestCase):
    def server(self, **kw):
        srv = Server(threads=2, resp=True, durability="async", **kw).start()
        self.addCleanup(srv.cleanup)  # SIGKILL: a stalled one may not stop
        return srv

    def ping(self, c):
        self.assertEqual(c.call("PING"), b"PONG")

    def test_publish_against_a_long_pattern(self):
        """The audit's PUBLISH: a '*' and 100,000 'a' then 'b', against
        200,000 'a' then 'c'.  Fixed: the last run must end the channel, one
        comparison of 100,001 bytes (about 1 ms here); quadratic: 21.9 s in
        the audit, 51.7 s on this test's loaded 2-core machine.  Meanwhile
        a client on another io thread does up to 10,000 PINGs (0.5-1 s; the
        fixed PUBLISH answers within 20)."""
        srv = self.server()
        sub = Raw(srv.resp_port)
        pat = b"*" + b"a" * 100000 + b"b"
        self.assertEqual(sub.call("PSUBSCRIBE", pat)[0], b"psubscribe")
        pub, other = other_thread(srv.resp_port)
        done = race(pub, encode("PUBLISH", b"a" * 200000 + b"c", "m"), other,
                    self.ping, 10000)
        self.assertLess(done, 10000, "PUBLISH still unanswered after "
                        "10,000 PINGs on another io thread")
        self.assertEqual(pub.reply(), 0)
        # and one that matches is delivered
        self.assertEqual(pub.call("PUBLISH", b"a" * 200000 + b"b", "m"), 1)
        msg = sub.reply()
        self.assertEqual((msg[0], msg[1], len(msg[2])),
                         (b"pmessage", pat, 200001))

    def test_publish_matches_without_the_lock(self):
        """Matching a channel against patterns is done with the pub/sub lock
        released, which a subscriber's every command takes.  50 patterns
        with a '?' in a 6,003-element run that fails only at its last
        byte, against an 80,000-byte channel: about 0.5 s of linear work
        for the PUBLISH (the channel's length times 94 words per pattern;
        1-3 s on this loaded 2-core machine).  A subscriber on another io
        thread does 1,000 PINGs meanwhile (0.1-0.3 s), every one answered
        before the PUBLISH is.  With the lock held while matching, the
        first PING after the match starts waits for the whole PUBLISH,
        whose reply then comes first."""
        srv = self.server()
        pats = [b"*" + b"a" * 3000 + b"?" + b"a" * 3000 + b"b%d*" % i
                for i in range(50)]
        holder = Raw(srv.resp_port)
        holder.send(encode("PSUBSCRIBE", *pats))
        for _ in pats:
            self.assertEqual(holder.reply()[0], b"psubscribe")
        pub, sub = other_thread(srv.resp_port)
        self.assertEqual(sub.call("SUBSCRIBE", "x")[0], b"subscribe")
        pub.send(encode("PUBLISH", b"a" * 80000, "m"))
        for done in range(1000):
            if arrived(pub):
                break
            self.assertEqual(sub.call("PING"), [b"pong", b""])
        else:
            done = 1000
        self.assertEqual(done, 1000, "the PUBLISH answered while its "
                         "subscriber on another thread waited: PING %d of "
                         "1,000" % done)
        self.assertEqual(pub.reply(), 0)

    def test_watch_many_keys(self):
        """WATCH of 200,000 keys: fixed, about 0.8 s here (an allocation, a
        hash insertion and a read per key); quadratic (each key compared
        with those before it, inside the exclusive section that every write
        and every read waits for): about 130 s (10.3 s for 80,000 keys in
        the audit, 20.9 s on this machine).  The other client, on another
        io thread, does up to 150,000 PINGs (PING waits for no section):
        the fixed WATCH answers within 2,000 to 25,000 of them, the
        quadratic one after more than 1,500,000."""
        srv = self.server()
        keys = [b"wk%06d" % i for i in range(200000)]
        w, other = other_thread(srv.resp_port)
        done = race(w, encode("WATCH", *keys), other, self.ping, 150000)
        self.assertLess(done, 150000, "WATCH still unanswered after "
                        "150,000 PINGs on another io thread")
        self.assertEqual(w.reply(), b"OK")
        # still a WATCH: a write to one of the keys breaks the transaction
        self.assertEqual(other.call("SET", keys[-1], "v"), b"OK")
        self.assertEqual(w.call("MULTI"), b"OK")
        self.assertEqual(w.call("GET", keys[0]), b"QUEUED")
        self.assertIsNone(w.call("EXEC"))

    def scan_race(self, *cmd):
        srv = self.server()
        c, other = other_thread(srv.resp_port)
        keys = [b"key%05d" % i for i in range(4000)] + [b"key-x"]
        c.send(b"".join(encode("SET", k, "v") for k in keys))
        for _ in keys:
            self.assertEqual(c.reply(), b"OK")
        done = race(c, encode(*cmd), other, self.ping, 10000)
        self.assertLess(done, 10000, "%s still unanswered after 10,000 "
                        "PINGs on another io thread" % cmd[0])
        return c.reply()

    def test_scan_match_star_run(self):
        """SCAN MATCH of 1,000,000 '*' then 'x', COUNT 10000, over 4,001
        keys: the run is one star, so a key costs one comparison (about 10
        ms for the call here); before, 1,000,000 steps per key: 8.7 s over
        10,000 keys in the audit, about 14 s here for 4,001.  Meanwhile up
        to 10,000 PINGs (0.5-1 s; the fixed SCAN answers within 80 to 500)
        on another io thread."""
        got = self.scan_race("SCAN", 0, "MATCH", b"*" * 1000000 + b"x",
                             "COUNT", 10000)
        self.assertEqual(got, [b"0", [b"key-x"]])

    def test_keys_star_run(self):
        """KEYS with the same pattern, the same race."""
        got = self.scan_race("KEYS", b"*" * 1000000 + b"x")
        self.assertEqual(got, [b"key-x"])


if __name__ == "__main__":
    main()
