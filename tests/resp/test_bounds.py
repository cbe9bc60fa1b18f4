#!/usr/bin/env python3
"""test_bounds.py - on the RESP port, the reply builders, BITOP's work,
EXEC's replies, MULTI's queue and the subscription table never hold more
than the configured limits allow, measured on the kvd process
(tests/integration/membound.py) while a client asks for far more.

Each test lowers the limits in play (4 MiB values, max-output 8m or 4m,
multi-max-bytes 8m, pubsub-max-subscription-bytes 16m), mounts a request
or a queue whose unbounded cost would be hundreds of MiB, and asserts the
peak against the sum of those limits.  The native protocol's builders are
tests/integration/test_bounds.py.
"""

import unittest

import membound
from resputil import Error, Raw, Server, encode, main

MiB = membound.MiB
VALUE = 4 * MiB  # max-value-size
BIG = b"v" * (VALUE - 64)
LIMITS = ["--max-value-size", "4m", "--max-frame-size", "8m",
          "--memtable-size", "16m"]


def server(*args):
    return Server(threads=1, resp=True, args=LIMITS + list(args))


def bulk(v):
    return b"$%d\r\n%s\r\n" % (len(v), v)


class Work(unittest.TestCase):
    """BITOP's work is one value, however many sources it names."""

    def test_bitop_of_one_big_value_named_many_times(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", BIG), b"OK")
            # A 1 KB request: each of its 64 sources was copied first.
            with membound.Peak(self, srv) as m:
                self.assertEqual(c.call("BITOP", "OR", "d", *["v"] * 64),
                                 len(BIG))
            # the result, its memtable copy and its journal batch
            m.assert_within(3 * VALUE, "BITOP OR d v x64")
            self.assertEqual(c.call("STRLEN", "d"), len(BIG))
            c.close()

    def test_bitop_result_over_max_value_size_is_refused(self):
        with Server(threads=1, resp=True, args=["--max-value-size", "8m"]) as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", b"\x0f" * (6 * MiB)), b"OK")
            c.close()
            srv.restart(extra=["--max-value-size", "4m"])
            c = Raw(srv.resp_port, timeout=60)
            with membound.Peak(self, srv) as m:
                r = c.call("BITOP", "OR", "d", *["v"] * 64)
            self.assertIsInstance(r, Error)
            self.assertIn("max-value-size", str(r))
            m.assert_within(VALUE, "BITOP past max-value-size")
            self.assertIsNone(c.call("GET", "d"))
            c.close()


class Exec(unittest.TestCase):
    """EXEC's replies are held to max-output together as they are made."""

    def exec_gets(self, first):
        """MULTI, first, 64 GETs of a 4 MiB value, SET after 1, EXEC with
        max-output 8m: the EXEC reply, and the peak's growth."""
        with server("--max-output", "8m") as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", BIG), b"OK")
            cmds = [first] if first else []
            cmds += [("GET", "v")] * 64 + [("SET", "after", "1")]
            with membound.Peak(self, srv) as m:
                c.send(encode("MULTI") + b"".join(encode(*a) for a in cmds)
                       + encode("EXEC"))
                self.assertEqual(c.reply(), b"OK")
                for _ in cmds:
                    self.assertEqual(c.reply(), b"QUEUED")
                r = c.reply()
            # the replies kept (max-output), one being made, its copy
            # waiting behind the transaction's writes
            m.assert_within(8 * MiB + 2 * VALUE, "EXEC of 64 GETs")
            self.assertEqual(len(r), len(cmds))
            # it ran whole
            self.assertEqual(r[-1], b"OK")
            self.assertEqual(c.call("GET", "after"), b"1")
            # an EXEC that fits is answered as before
            c.send(encode("MULTI") + encode("GET", "v") + encode("EXEC"))
            self.assertEqual([c.reply() for _ in range(3)],
                             [b"OK", b"QUEUED", [BIG]])
            c.close()
            return r[1:-1] if first else r[:-1]

    def check_gets(self, gets):
        # 2 x 4 MiB fit in 8 MiB; every later reply is dropped for an error
        self.assertEqual(gets[:2], [BIG, BIG])
        for e in gets[2:]:
            self.assertIsInstance(e, Error)
            self.assertIn("EXEC reply would exceed max-output", str(e))

    def test_exec_of_many_gets_of_a_big_value(self):
        self.check_gets(self.exec_gets(None))

    def test_exec_of_many_gets_after_a_write(self):
        # after a write, each read's reply waits in a pend of its own
        self.check_gets(self.exec_gets(("SET", "w", "1")))


class MultiQueue(unittest.TestCase):
    """MULTI's queue is held to multi-max-commands and multi-max-bytes."""

    def test_queue_past_its_bytes_is_discarded(self):
        with server("--multi-max-bytes", "8m") as srv:
            c = Raw(srv.resp_port, timeout=60)
            val = b"q" * MiB
            n = 128  # 128 MiB queued, were the queue not bounded
            with membound.Peak(self, srv) as m:
                c.send(encode("MULTI") + b"".join(
                    encode("SET", "k%d" % i, val) for i in range(n)))
                got = [c.reply() for _ in range(n + 1)]
            # the queue's buffer (doubling as it grows), a request
            # buffered whole
            m.assert_within(2 * 8 * MiB + 2 * MiB, "MULTI of 128 x 1 MiB")
            self.assertEqual(got[0], b"OK")
            self.assertEqual(got[1:8], [b"QUEUED"] * 7)  # 7 x (1 MiB + 23)
            self.assertIsInstance(got[8], Error)
            self.assertEqual(str(got[8]), "ERR MULTI queue would exceed "
                             "multi-max-bytes (8388608 bytes)")
            # as Redis: what follows is answered QUEUED, and not kept
            self.assertEqual(got[9:], [b"QUEUED"] * (n - 8))
            r = c.call("EXEC")
            self.assertIsInstance(r, Error)
            self.assertEqual(str(r), "EXECABORT Transaction discarded "
                             "because of previous errors.")
            self.assertIsNone(c.call("GET", "k0"))
            # the next transaction starts afresh
            c.send(encode("MULTI") + encode("SET", "k0", val) + encode("EXEC"))
            self.assertEqual([c.reply() for _ in range(3)],
                             [b"OK", b"QUEUED", [b"OK"]])
            c.close()

    def test_queue_past_its_commands_is_discarded(self):
        with Server(threads=1, resp=True,
                    args=["--multi-max-commands", "100"]) as srv:
            c = Raw(srv.resp_port)
            c.send(encode("MULTI") + encode("INCR", "n") * 150)
            got = [c.reply() for _ in range(151)]
            self.assertEqual(got[:101], [b"OK"] + [b"QUEUED"] * 100)
            self.assertEqual(str(got[101]), "ERR MULTI queue would exceed "
                             "multi-max-commands (100 commands)")
            self.assertEqual(got[102:], [b"QUEUED"] * 49)
            self.assertIn("EXECABORT", str(c.call("EXEC")))
            self.assertIsNone(c.call("GET", "n"))
            # CONFIG SET raises it for the next transaction
            self.assertEqual(c.call("CONFIG", "SET", "multi-max-commands",
                                    "200"), b"OK")
            c.send(encode("MULTI") + encode("INCR", "n") * 150 + encode("EXEC"))
            got = [c.reply() for _ in range(152)]
            self.assertEqual(got[-1], list(range(1, 151)))
            c.close()


def subscribe(c, kind, names, total):
    """Send one (P)SUBSCRIBE of names; True once every confirmation came
    (the last one counts total subscriptions), or the Error refusing it.
    The confirmations are matched in bulk, not parsed one by one."""
    c.send(encode(kind, *names))
    last = b":%d\r\n" % total
    while not c.buf.endswith(last):
        if c.buf.startswith(b"-"):
            return c.reply()
        c._fill()
    c.buf = b""
    return True


class Subscriptions(unittest.TestCase):
    """Every connection's subscriptions together are held to
    pubsub-max-subscriptions and pubsub-max-subscription-bytes."""

    def test_server_wide_bytes(self):
        with Server(threads=1, resp=True,
                    args=["--pubsub-max-subscription-bytes", "16m"]) as srv:
            conns, names = 8, 40000
            cost = 100 + 160  # a 100-byte name plus 160 (docs/resp.md)
            cs = [Raw(srv.resp_port, timeout=60) for _ in range(conns)]
            refused = []
            # 8 x 40,000 channels: 10 MB each (within max-output), 83 MB
            # together, were the server not bounded
            with membound.Peak(self, srv) as m:
                for j, c in enumerate(cs):
                    for b in range(0, names, 5000):
                        batch = [("c%d-%06d" % (j, i)).ljust(100, "x")
                                 for i in range(b, b + 5000)]
                        r = subscribe(c, "SUBSCRIBE", batch, b + 5000)
                        if r is not True:
                            refused.append(r)
                            break
            # the table, and one batch's confirmations
            m.assert_within(16 * MiB + MiB, "8 x 40,000 subscriptions")
            self.assertEqual(len(refused), conns - 1)
            self.assertIn("ERR subscriptions would exceed "
                          "pubsub-max-subscription-bytes (16777216 bytes) "
                          "on this server", str(refused[0]))
            other = Raw(srv.resp_port)
            subs = len(other.call("PUBSUB", "CHANNELS"))
            self.assertLessEqual(subs * cost, 16 * MiB)
            self.assertGreater(subs * cost, 16 * MiB - 5000 * cost)
            # room comes back as subscriptions go
            cs[0].send(encode("UNSUBSCRIBE"))
            while not cs[0].buf.endswith(b":0\r\n"):
                cs[0]._fill()
            self.assertEqual(other.call("SUBSCRIBE", "back"),
                             [b"subscribe", b"back", 1])
            for c in cs + [other]:
                c.close()

    def test_server_wide_count(self):
        with Server(threads=2, resp=True,
                    args=["--pubsub-max-subscriptions", "1000"]) as srv:
            a, b = Raw(srv.resp_port), Raw(srv.resp_port)
            self.assertTrue(subscribe(a, "SUBSCRIBE",
                                      ["a%d" % i for i in range(600)], 600))
            self.assertTrue(subscribe(b, "PSUBSCRIBE",
                                      ["p%d*" % i for i in range(300)], 300))
            r = subscribe(b, "SUBSCRIBE", ["b%d" % i for i in range(200)], 500)
            self.assertEqual(str(r), "ERR subscriptions would exceed "
                             "pubsub-max-subscriptions (1000) on this server")
            # none of the refused command's names was subscribed
            self.assertTrue(subscribe(b, "SUBSCRIBE",
                                      ["b%d" % i for i in range(100)], 400))
            o = Raw(srv.resp_port)
            self.assertEqual(o.call("PUBSUB", "NUMSUB", "b99", "b100"),
                             [b"b99", 1, b"b100", 0])
            self.assertEqual(o.call("PUBSUB", "NUMPAT"), 300)
            r = subscribe(b, "PSUBSCRIBE", ["q*"], 401)
            self.assertIn("pubsub-max-subscriptions", str(r))
            a.send(encode("UNSUBSCRIBE", "a0"))
            self.assertEqual(a.reply(), [b"unsubscribe", b"a0", 599])
            self.assertTrue(subscribe(b, "PSUBSCRIBE", ["q*"], 401))
            # CONFIG SET moves the bound at once
            self.assertIn("pubsub-max-subscriptions",
                          str(subscribe(b, "PSUBSCRIBE", ["r*"], 402)))
            self.assertEqual(o.call("CONFIG", "SET",
                                    "pubsub-max-subscriptions", "2000"), b"OK")
            self.assertTrue(subscribe(b, "PSUBSCRIBE", ["r*"], 402))
            for c in (a, b, o):
                c.close()


class Replies(unittest.TestCase):
    """The single reply builders, under the same measure."""

    def test_mget_of_a_big_value_many_times(self):
        with server("--max-output", "8m") as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", BIG), b"OK")
            with membound.Peak(self, srv) as m:
                r = c.call("MGET", *["v"] * 64)
            self.assertIn("max-output", str(r))
            m.assert_within(8 * MiB + 2 * VALUE, "MGET of 64 big values")
            c.close()

    def test_keys_and_scan_of_many_long_keys(self):
        with server("--max-output", "4m") as srv:
            c = Raw(srv.resp_port, timeout=60)
            for b in range(0, 16000, 500):  # 8 MB of key names
                args = []
                for i in range(b, b + 500):
                    args += [("k%06d" % i).ljust(500, "k"), "1"]
                self.assertEqual(c.call("MSET", *args), b"OK")
            with membound.Peak(self, srv) as m:
                r = c.call("KEYS", "*")
                self.assertIn("max-output", str(r))
                cursor, n = b"0", 0
                while True:
                    cursor, page = c.call("SCAN", cursor, "COUNT", 10000)
                    n += len(page)
                    if cursor == b"0":
                        break
            self.assertEqual(n, 16000)
            # KEYS up to max-output; a SCAN page of about 1 MiB
            m.assert_within(4 * MiB + 2 * MiB, "KEYS and SCAN of 16,000 keys")
            c.close()

    def test_getrange_of_a_big_value(self):
        with server() as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", BIG), b"OK")
            with membound.Peak(self, srv) as m:
                for _ in range(8):
                    self.assertEqual(len(c.call("GETRANGE", "v", 0, -1)),
                                     len(BIG))
            m.assert_within(VALUE, "GETRANGE of a big value")
            c.close()

    def test_pipelined_gets_of_a_big_value_unread(self):
        with server("--max-output", "8m") as srv:
            c = Raw(srv.resp_port, timeout=60)
            self.assertEqual(c.call("SET", "v", BIG), b"OK")
            s = Raw(srv.resp_port, timeout=60)
            n = 64  # 256 MiB of replies, not read while sending
            with membound.Peak(self, srv) as m:
                s.send(encode("GET", "v") * n)
                c.call("SET", "x", "1")
            m.assert_within(8 * MiB + 2 * VALUE, "GETs not read")
            one = bulk(BIG)
            got = membound.recv_exactly(s.sock, n * len(one))
            self.assertEqual(got[-len(one):], one)
            s.close()
            c.close()


if __name__ == "__main__":
    main()
