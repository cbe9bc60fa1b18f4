#!/usr/bin/env python3
"""test_memory.py - what one client can make kvd hold in memory.

Each test mounts an attack that once grew kvd's memory by hundreds of
megabytes or more, and measures the kvd process itself (/proc/PID/status:
VmHWM for a peak, RssAnon for memory still held) before and after it.  The
bounds asserted are far below what the attack used to cost and far above
what the limits allow, so the tests do not depend on allocator details.
"""

import socket
import threading
import time
import unittest

from kvdtest import (AUTH, GET, MGET, MPUT, OK, PING, PUT, REPLY_TOO_LARGE, STATS,
                     Client, Server, frame, main, skip_rss_bounds_under_tsan)

MiB = 1 << 20


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def rss_anon(srv):
    return status_kib(srv.proc.pid, "RssAnon") * 1024


def peak(srv):
    return status_kib(srv.proc.pid, "VmHWM") * 1024


def stats(srv):
    c = srv.client()
    try:
        r = c.call(STATS)
        assert r[0] == OK, r
        return r[1]
    finally:
        c.close()


def flood(sock, chunk, limit, quiet=2.0):
    """Send chunk repeatedly, never reading, until limit bytes went out, the
    peer closed, or the peer stopped reading (a send blocked for quiet
    seconds).  Returns (bytes sent, how it ended)."""
    sock.settimeout(quiet)
    sent = 0
    try:
        while sent < limit:
            sent += sock.send(chunk[sent % len(chunk):])
    except socket.timeout:
        return sent, "blocked"
    except (BrokenPipeError, ConnectionResetError):
        return sent, "closed"
    return sent, "done"


def closed(sock, timeout=5.0):
    """True once the peer has closed (replies before that are skipped)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 16):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class ReplyBuilders(unittest.TestCase):
    """Replies are checked against their limit as they grow (item: one
    small request can take gigabytes)."""

    def setUp(self):
        skip_rss_bounds_under_tsan(self)

    def test_native_mget_of_a_big_value_many_times(self):
        with Server(threads=1) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"big", b"v" * (16 * MiB - 64)), [OK])
            before = peak(srv)
            # 64 names: the reply would be 1 GiB; a 3 KB request.
            self.assertEqual(c.call(MGET, *[b"big"] * 64)[0], REPLY_TOO_LARGE)
            self.assertLess(peak(srv) - before, 200 * MiB)
            # 1,000 names (16 GB) is refused the same way, just as cheaply.
            self.assertEqual(c.call(MGET, *[b"big"] * 1000)[0],
                             REPLY_TOO_LARGE)
            self.assertLess(peak(srv) - before, 200 * MiB)
            # The connection still works, and a fitting MGET is answered.
            r = c.call(MGET, b"big", b"nope")
            self.assertEqual(r[0], OK)
            self.assertEqual(len(r[1]), 16 * MiB - 64)
            self.assertIsNone(r[2])
            c.close()

    def test_resp_command_info_many_names(self):
        with Server(threads=1, resp=True, args=["--max-output", "4m"]) as srv:
            s = socket.create_connection(("127.0.0.1", srv.resp_port), 30)
            names = 500000
            req = (b"*%d\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n" % (names + 2)
                   + b"$3\r\nget\r\n" * names)
            before = peak(srv)
            s.sendall(req)
            s.settimeout(30)
            buf = b""
            while b"\r\n" not in buf:
                chunk = s.recv(1 << 16)
                self.assertTrue(chunk, "kvd closed the connection")
                buf += chunk
            self.assertTrue(buf.startswith(b"-ERR"), buf[:80])
            self.assertIn(b"max-output", buf.split(b"\r\n")[0])
            # The reply would have been about 75 MB (150 bytes per name).
            self.assertLess(peak(srv) - before, 40 * MiB)
            s.sendall(b"*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$3\r\nget\r\n")
            while not buf.split(b"\r\n", 1)[1].startswith(b"*1\r\n"):
                buf += s.recv(1 << 16)
            s.close()


class PreAuth(unittest.TestCase):
    """Unauthenticated peers are held to a few KiB each."""

    def setUp(self):
        skip_rss_bounds_under_tsan(self)

    def test_unread_replies_before_auth_close_the_connection(self):
        with Server(threads=2, args=["--requirepass", "pw"]) as srv:
            before = rss_anon(srv)
            ping = frame([PING]) * 4096
            socks = [socket.create_connection(("127.0.0.1", srv.port), 10)
                     for _ in range(8)]
            ends = []
            for s in socks:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                ends.append(flood(s, ping, 64 * MiB)[1])
            grown = rss_anon(srv) - before
            for s in socks:
                self.assertTrue(ends[socks.index(s)] == "closed" or closed(s))
                s.close()
            # Each used to hold max-output (64 MiB) of NOAUTH replies.
            self.assertLess(grown, 32 * MiB)
            # An authenticating client is unaffected.
            c = srv.client()
            self.assertEqual(c.call(AUTH, b"pw"), [OK])
            self.assertEqual(c.call(PING), [OK])
            c.close()

    def test_partial_inline_lines_before_auth(self):
        with Server(threads=2, resp=True, args=["--requirepass", "pw"]) as srv:
            before = rss_anon(srv)
            socks = []
            line = b"x" * (60 << 10)  # no newline: an inline line kept open
            for _ in range(2000):
                s = socket.create_connection(("127.0.0.1", srv.resp_port), 10)
                flood(s, line, len(line))
                socks.append(s)
            time.sleep(0.5)
            grown = rss_anon(srv) - before
            shut = sum(closed(s, 2.0) for s in socks[:20])
            for s in socks:
                s.close()
            # 2,000 lines of up to 64 KiB used to hold about 126 MiB.
            self.assertLess(grown, 40 * MiB)
            self.assertEqual(shut, 20)
            # AUTH as an inline line still works.
            s = socket.create_connection(("127.0.0.1", srv.resp_port), 10)
            s.sendall(b"AUTH pw\r\nPING\r\n")
            buf = b""
            while buf.count(b"\r\n") < 2:
                buf += s.recv(100)
            self.assertEqual(buf, b"+OK\r\n+PONG\r\n")
            s.close()


class InflightWrites(unittest.TestCase):
    """Writes in flight are bounded per connection and per shard."""

    def setUp(self):
        skip_rss_bounds_under_tsan(self)

    def test_pipelined_big_puts_without_reading(self):
        # The memtables (up to twice memtable-size per shard) are bounded
        # on their own; kept small here so that what grows is in flight.
        with Server(threads=1, args=["--max-inflight-write-bytes", "16m",
                                     "--max-inflight-shard-bytes", "32m",
                                     "--memtable-size", "8m"]) as srv:
            before, peak0 = rss_anon(srv), peak(srv)
            val = b"v" * (MiB - 64)
            s = socket.create_connection(("127.0.0.1", srv.port), 10)
            reqs = b"".join(frame([PUT, b"k%d" % i, val]) for i in range(8))
            # 1 GiB of PUTs, replies never read: the server reads them only
            # as fast as earlier ones commit (it used to queue them all).
            sent, how = flood(s, reqs, 1 << 30, quiet=10.0)
            self.assertEqual(how, "done")
            st = stats(srv)
            self.assertGreater(st[b"write_backpressure"], 0)
            self.assertLess(rss_anon(srv) - before, 100 * MiB)
            self.assertLess(peak(srv) - peak0, 100 * MiB)
            # Every PUT is answered, in order, once the client reads.
            c = Client.__new__(Client)
            c.sock, c.buf = s, b""
            s.settimeout(30)
            for _ in range(sent // (len(reqs) // 8)):
                self.assertEqual(c.read_reply(), [OK])
            s.close()

    def _own_writes(self, srv, n):
        """n pipelined PUTs of one key, then a GET of it."""
        c = srv.client()
        body = b"".join(frame([PUT, b"k", b"v%d" % i]) for i in range(n))
        got = []
        t = threading.Thread(target=lambda: got.extend(
            c.read_reply() for _ in range(n + 1)))
        t.start()
        c.send_raw(body + frame([GET, b"k"]))
        t.join(60)
        self.assertFalse(t.is_alive())
        self.assertTrue(all(r == [OK] for r in got[:n]))
        self.assertEqual(got[n], [OK, b"v%d" % (n - 1)])
        c.close()

    def _one_request(self, srv, n):
        """One MPUT naming one key n times, then a GET of it in the same
        pipeline: n in-flight writes of one key slot at once."""
        c = srv.client()
        self.assertEqual(c.call(PUT, b"k", b"old"), [OK])
        args = [0]
        for i in range(n):
            args += [b"k", b"v%d" % i]
        r = c.pipeline([[MPUT] + args, [GET, b"k"]])
        self.assertEqual(r, [[OK], [OK, b"v%d" % (n - 1)]])
        c.close()

    def test_own_writes_past_65536_in_flight(self):
        with Server(threads=1) as srv:
            self._one_request(srv, 65536)
            self._own_writes(srv, 70000)
        # With the in-flight bound raised out of the way, the per-key
        # counter itself must not wrap.
        with Server(threads=1, args=["--max-inflight-writes", "4000000"]) as srv:
            self._one_request(srv, 65536)
            self._one_request(srv, 140000)
            self._own_writes(srv, 70000)


class MemtableBudget(unittest.TestCase):
    """memtable-size auto (the default): 256 MiB shared by the shards, at
    least 64 MiB and at most 128 MiB each (docs/operations.md, "Sizing"),
    and a shard freezes its memtable there, not at a size of its own."""

    def sizes(self, srv):
        return [s[b"memtable_size"] for s in stats(srv)[b"shards"]]

    def test_shares_a_budget(self):
        for threads, want in ((1, 128), (2, 128), (4, 64), (5, 64)):
            with Server(threads=threads) as srv:
                self.assertEqual(self.sizes(srv), [want * MiB] * threads,
                                 threads)
                self.assertIn(b"memtable-size %d.0 MiB per shard (auto" % want,
                              srv.log_text())
        # a size given is the size, per shard; "auto" can be named too
        with Server(threads=2, args=["--memtable-size", "8m"]) as srv:
            self.assertEqual(self.sizes(srv), [8 * MiB] * 2)
        with Server(threads=4, args=["--memtable-size", "auto"]) as srv:
            self.assertEqual(self.sizes(srv), [64 * MiB] * 4)

    def test_one_shard_holds_its_128_mib(self):
        # 96 MiB of writes into the one shard stay in its memtable (the
        # old default, 64 MiB, checkpointed them); past 128 MiB it freezes
        with Server(threads=1) as srv:
            c = srv.client()
            val = b"m" * (MiB - 64)

            def write(first, n):
                for i in range(first, first + n, 8):
                    args = [0]
                    for j in range(i, i + 8):
                        args += [b"k%05d" % j, val]
                    self.assertEqual(c.call(MPUT, *args), [OK])

            def ckpts():
                return stats(srv)[b"shards"][0][b"checkpoints"]
            write(0, 96)
            st = stats(srv)[b"shards"][0]
            self.assertEqual(st[b"checkpoints"], 0, st)
            self.assertGreater(st[b"memtable_bytes"], 90 * MiB, st)
            write(96, 48)
            deadline = time.time() + 30
            while ckpts() == 0 and time.time() < deadline:
                time.sleep(0.05)
            self.assertGreater(ckpts(), 0)
            c.close()


if __name__ == "__main__":
    main()
