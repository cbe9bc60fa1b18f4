"""test_reload.py - SIGHUP reopens the log and applies run-time settings.

A config file is edited under a running kvd: max-clients, idle-timeout and
log-level take effect on SIGHUP, a setting that needs a restart is reported
as such, a log file moved away (as logrotate does) is recreated, and a
config that no longer parses changes nothing: the settings it would have
replaced stay in force.  In async mode a new flush-interval-ms applies at
once, not after the interval it replaced; so does a new
reaper-interval-ms.
"""

import os
import signal
import tempfile
import time
import unittest

from kvdtest import *  # noqa: F401,F403


class Reload(unittest.TestCase):
    def wait_log(self, path, needle, timeout=5):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(path) and needle in open(path).read():
                return True
            time.sleep(0.05)
        self.fail("%r never appeared in %s:\n%s" % (
            needle, path, open(path).read() if os.path.exists(path) else "(no file)"))

    def test_sighup(self):
        tmp = tempfile.mkdtemp(prefix="kvdreload-")
        conf, log = os.path.join(tmp, "kvd.conf"), os.path.join(tmp, "kvd.log")
        with open(conf, "w") as f:
            f.write("log-file %s\nmax-clients 100\nmap-size 1g\n" % log)
        with Server(threads=1, args=["--config", conf]) as srv:
            self.wait_log(log, "ready")
            first = srv.client()
            while first.call(STATS)[1][b"connections"] > 1:
                time.sleep(0.01)
            with open(conf, "w") as f:
                f.write("log-file %s\nmax-clients 2\nmap-size 2g\nidle-timeout 1\n"
                        "log-level debug\n" % log)
            os.rename(log, log + ".1")            # logrotate
            srv.proc.send_signal(signal.SIGHUP)
            self.wait_log(log, "configuration reloaded")
            text = open(log).read()
            self.assertIn("max-clients changed", text)
            self.assertIn("idle-timeout changed", text)
            self.assertIn("map-size changed; it takes effect after a restart", text)
            # max-clients 2: one more is fine, a third is refused
            second = srv.client()
            self.assertEqual(second.call(PING), [OK])
            third = srv.client()
            self.assertEqual(third.read_reply()[0], TOO_MANY_CONNS)
            # idle-timeout 1: an idle connection is closed
            self.assertTrue(first.closed_by_peer(timeout=10))
            # a broken config changes nothing
            with open(conf, "w") as f:
                f.write("max-clients lots\n")
            srv.proc.send_signal(signal.SIGHUP)
            self.wait_log(log, "does not load; nothing changed")
            # ... the reloaded settings stay in force, not the defaults
            # (max-clients 10000, no idle-timeout): every connection from
            # before is closed by kvd (idle), then two fit and a third is
            # refused, and an idle one is closed again
            self.assertTrue(second.closed_by_peer(timeout=10))
            a, b = srv.client(), srv.client()
            self.assertEqual(a.call(PING), [OK])
            self.assertEqual(b.call(PING), [OK])
            self.assertEqual(srv.client().read_reply()[0], TOO_MANY_CONNS)
            self.assertTrue(a.closed_by_peer(timeout=10))
            srv.stop()
        os.system("rm -rf " + tmp)

    def test_sighup_applies_flush_interval(self):
        """docs/operations.md, "Configure": SIGHUP applies
        flush-interval-ms.  In async mode with an hour's interval nothing is
        flushed after writes; once the file says 50 ms and kvd got SIGHUP,
        new writes are flushed soon after (STATS journal_fsyncs), without
        waiting out the hour the old interval had scheduled."""
        tmp = tempfile.mkdtemp(prefix="kvdreload-")
        conf = os.path.join(tmp, "kvd.conf")
        with open(conf, "w") as f:
            f.write("flush-interval-ms 3600000\ncheckpoint-interval-ms 3600000\n")
        with Server(threads=1, durability="async", args=["--config", conf]) as srv:
            c = srv.client()

            def fsyncs():
                return c.call(STATS)[1][b"shards"][0][b"journal_fsyncs"]

            for i in range(20):
                self.assertEqual(c.call(PUT, b"a%d" % i, b"v"), [OK])
            before = fsyncs()
            time.sleep(1)           # 20 flush intervals of the new setting
            self.assertEqual(fsyncs(), before, "flushed under a 1 h interval")
            with open(conf, "w") as f:
                f.write("flush-interval-ms 50\ncheckpoint-interval-ms 3600000\n")
            srv.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: b"SIGHUP: configuration reloaded" in srv.log_text(),
                     what="the reload")
            self.assertIn(b"SIGHUP: flush-interval-ms changed", srv.log_text())
            # what was written before the reload is flushed now too
            wait_for(lambda: fsyncs() > before, timeout=5,
                     what="a flush at the new 50 ms interval")
            # and each later write is flushed within the interval's margin
            for n in range(3):
                self.assertEqual(c.call(PUT, b"b%d" % n, b"v"), [OK])
                now = fsyncs()
                wait_for(lambda: fsyncs() > now, timeout=5,
                         what="write %d flushed at the new interval" % n)
            c.close()
            srv.stop()
        os.system("rm -rf " + tmp)

    def test_sighup_applies_reaper_interval(self):
        """With an hour between reaps, expired keys stay stored (reads
        never return them); after SIGHUP to 50 ms they are reclaimed at
        once, not an hour after the last reap."""
        tmp = tempfile.mkdtemp(prefix="kvdreload-")
        conf = os.path.join(tmp, "kvd.conf")
        with open(conf, "w") as f:
            f.write("reaper-interval-ms 3600000\n")
        with Server(threads=1, args=["--config", conf]) as srv:
            c = srv.client()

            def stats():
                return c.call(STATS)[1]

            time.sleep(0.2)     # the reap at start is behind us
            pairs = []
            for i in range(50):
                pairs += [b"e%02d" % i, b"v"]
            self.assertEqual(c.call(MPUT, 100, *pairs), [OK])   # 100 ms TTL
            time.sleep(1)
            st = stats()
            self.assertEqual(st[b"expired_reaped"], 0)
            self.assertEqual(st[b"shards"][0][b"entries"], 50)
            self.assertEqual(c.call(GET, b"e00")[0], NOT_FOUND)
            with open(conf, "w") as f:
                f.write("reaper-interval-ms 50\n")
            srv.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: b"SIGHUP: configuration reloaded" in srv.log_text(),
                     what="the reload")
            wait_for(lambda: stats()[b"expired_reaped"] >= 50, timeout=5,
                     what="the expired keys reaped at the new interval")
            self.assertEqual(stats()[b"shards"][0][b"entries"], 0)
            c.close()
            srv.stop()
        os.system("rm -rf " + tmp)


if __name__ == "__main__":
    main()
