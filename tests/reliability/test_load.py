"""test_load.py - floods, slow clients and clients that never read.

  - 10,000 connections (the default max-clients): one more gets a clear
    refusal (a TOO_MANY_CONNS frame, then close); the 10,000 keep working;
    a client's PING latency with 10,000 idle neighbours is measured against
    none (printed, not asserted: the machines are shared); after they all
    close, kvd holds exactly the descriptors it held before (no fd leak).
  - Slowloris: clients sending one byte of a request per second are closed
    by request-timeout, while a normal client is served throughout.
  - Idle clients are closed by idle-timeout when it is set.
  - A client that pipelines GETs of a 512 KiB value and never reads: kvd
    stops reading it at max-output, its memory stays bounded, and
    output-timeout closes it; another client is served throughout.
All on loopback, all bounded.
"""

import os
import random
import resource
import socket
import time
import unittest

from kvdtest import GET, OK, PING, PUT, STATS, TOO_MANY_CONNS, Client, Server, frame, main
from relutil import fds_of, report, rss_kib, sanitized

N = 10000


def raise_nofile(n):
    """At least n descriptors for this process and the kvd it starts; root
    raises the hard limit too, anyone else is skipped under a low one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
        except (ValueError, OSError):
            raise unittest.SkipTest("RLIMIT_NOFILE hard limit %d < %d, and raising it "
                                    "needs root (ulimit -Hn %d)" % (hard, n, n))
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n), hard))


def conns(c):
    return c.call(STATS)[1][b"connections"]


def wait_conns(c, want, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        n = conns(c)
        if n == want:
            return n
        time.sleep(0.05)
    return conns(c)


def ping_latency(c, n=300):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        assert c.call(PING) == [OK]
        lat.append(time.perf_counter() - t)
    lat.sort()
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6


def closed(s, timeout):
    """True once the peer closed s (within timeout)."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class Flood(unittest.TestCase):
    def test_10000_connections_then_one_more(self):
        raise_nofile(N + 2000)
        with Server(threads=2, args=["--max-clients", str(N)]) as srv:
            srv.settled()
            active = srv.client()
            wait_conns(active, 1)
            base_fds = fds_of(srv.proc.pid)
            p50_0, p99_0 = ping_latency(active)
            idle = []
            t0 = time.time()
            for _ in range(N - 1):
                idle.append(socket.create_connection(("127.0.0.1", srv.port)))
            opened = wait_conns(active, N)
            self.assertEqual(opened, N)
            opened_s = time.time() - t0
            self.assertEqual(fds_of(srv.proc.pid), base_fds + N - 1)
            # one more: a clear refusal, then close
            extra = Client(srv.port)
            self.assertEqual(extra.read_reply(), [TOO_MANY_CONNS, b"too many connections"])
            self.assertTrue(extra.closed_by_peer())
            extra.close()
            # everyone already in keeps working
            p50_n, p99_n = ping_latency(active)
            for s in random.Random(4).sample(idle, 200):
                s.sendall(frame([PING]))
            for s in idle:
                s.setblocking(True)
            for s in random.Random(4).sample(idle, 200):
                s.settimeout(10)
                self.assertEqual(s.recv(64)[4:], b"\x91\x00")
            st = active.call(STATS)[1]
            self.assertGreaterEqual(st[b"connections_refused"], 1)
            for s in idle:
                s.close()
            self.assertEqual(wait_conns(active, 1), 1)
            deadline = time.time() + 10
            while fds_of(srv.proc.pid) != base_fds and time.time() < deadline:
                time.sleep(0.05)
            leaked = fds_of(srv.proc.pid) - base_fds
            self.assertEqual(leaked, 0, "descriptors leaked")
            active.close()
            report("flood", connections=opened, refused=st[b"connections_refused"],
                   open_s="%.1f" % opened_s,
                   ping_p50_us_0="%.0f" % p50_0, ping_p99_us_0="%.0f" % p99_0,
                   ping_p50_us_10k="%.0f" % p50_n, ping_p99_us_10k="%.0f" % p99_n,
                   fd_leak=leaked)


class SlowClients(unittest.TestCase):
    def test_slowloris_closed_by_request_timeout(self):
        with Server(threads=2, args=["--request-timeout", "2"]) as srv:
            srv.settled()
            good = srv.client()
            wait_conns(good, 1)
            base_fds = fds_of(srv.proc.pid)
            req = frame([PUT, b"slow", b"x" * 100])
            slow = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(50)]
            t0 = time.time()
            gone = {}           # client -> bytes of its request it had sent
            # Four bytes a second, and never the last byte: kvd must close
            # each before its request is whole, whatever the pace.
            for i in range(len(req) - 1):
                for n, s in enumerate(slow):
                    if n in gone:
                        continue
                    try:
                        s.sendall(req[i:i + 1])
                    except OSError:
                        gone[n] = i
                # the normal client is served meanwhile
                self.assertEqual(good.call(PING), [OK])
                for n, s in enumerate(slow):
                    if n not in gone and closed(s, 0.001):
                        gone[n] = i + 1
                if len(gone) == len(slow):
                    break
                time.sleep(0.25)
            took = time.time() - t0
            self.assertEqual(len(gone), len(slow), "slow senders outlived their request")
            self.assertEqual(good.call(GET, b"slow")[0], 1)     # never applied
            for s in slow:
                s.close()
            self.assertEqual(wait_conns(good, 1), 1)
            self.assertEqual(fds_of(srv.proc.pid), base_fds)
            self.assertIn("request-timeout (request left incomplete); closing", srv.log_text().decode())
            report("slowloris", clients_closed=len(gone), closed_after_s="%.1f" % took,
                   bytes_sent_max=max(gone.values()), request_bytes=len(req))

    def test_idle_timeout(self):
        with Server(threads=1, args=["--idle-timeout", "1"]) as srv:
            s = socket.create_connection(("127.0.0.1", srv.port))
            busy = srv.client()
            # the idle one goes; the busy one, as old, stays
            deadline = time.time() + 30
            while not closed(s, 0.2):
                self.assertLess(time.time(), deadline, "the idle client was never closed")
                self.assertEqual(busy.call(PING), [OK])
            self.assertEqual(busy.call(PING), [OK])
            self.assertEqual(wait_conns(busy, 1), 1)
            busy.close()
            s.close()

    def test_reader_that_never_reads(self):
        with Server(threads=2, args=["--max-output", "1m", "--output-timeout", "2"]) as srv:
            good = srv.client()
            wait_conns(good, 1)
            value = os.urandom(512 << 10)
            self.assertEqual(good.call(PUT, b"big", value), [OK])
            rss0 = rss_kib(srv.proc.pid)
            bad = socket.create_connection(("127.0.0.1", srv.port))
            bad.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            burst = frame([GET, b"big"]) * 1000     # 512 MiB of replies asked for
            self.assertEqual(wait_conns(good, 2), 2)
            bad.setblocking(False)
            sent = total = 0
            peak = rss0
            # until kvd closes it (output-timeout): its slot is gone
            deadline = time.time() + 60
            while conns(good) > 1:
                self.assertLess(time.time(), deadline, "the non-reader was never closed")
                try:
                    n = bad.send(burst[sent:sent + 65536])
                    sent += n
                    total += n
                except BlockingIOError:
                    pass
                except OSError:
                    pass    # closed: the loop's condition sees it next
                peak = max(peak, rss_kib(srv.proc.pid))
                self.assertEqual(good.call(GET, b"big"), [OK, value])
                if sent >= len(burst):
                    sent = 0
                time.sleep(0.01)
            grew_mib = (peak - rss0) / 1024
            # max-output (1 MiB) + one 512 KiB reply + a reply being
            # encoded, and the good client's replies: far below 512 MiB.
            # (Not under a sanitizer: ASan keeps freed memory in
            # quarantine, and TSan's shadow grows with it.)
            if not sanitized(srv.proc.pid):
                self.assertLess(grew_mib, 64)
            self.assertIn("output-timeout (replies left unread); closing", srv.log_text().decode())
            bad.close()
            report("never-reads", gets_sent=total // len(frame([GET, b"big"])),
                   value_kib=len(value) >> 10, rss_growth_mib="%.1f" % grew_mib)


if __name__ == "__main__":
    main()
