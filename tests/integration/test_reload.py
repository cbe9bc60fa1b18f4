"""test_reload.py - SIGHUP reopens the log and applies run-time settings.

A config file is edited under a running kvd: max-clients, idle-timeout and
log-level take effect on SIGHUP, a setting that needs a restart is reported
as such, a log file moved away (as logrotate does) is recreated, and a
config that no longer parses changes nothing: the settings it would have
replaced stay in force.
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


if __name__ == "__main__":
    main()
