"""test_logging.py - SIGUSR1 reopens the log file and does nothing else.

logrotate renames kvd.log and sends SIGUSR1: new lines must go to a new
kvd.log, none to the renamed file, and the configuration must not be read
again (SIGHUP's job): an edit made to kvd.conf meanwhile stays unapplied.
"""

import os
import shutil
import signal
import tempfile
import time
import unittest

import kvdtest
from kvdtest import Server
from kvproto import *  # noqa: F401,F403


def wait_for(pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


class Sigusr1(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvdlog-")
        self.log = os.path.join(self.dir, "kvd.log")
        self.conf = os.path.join(self.dir, "kvd.conf")
        self.write_conf(max_clients=4)
        self.srv = Server(threads=1, args=["--config", self.conf])

    def tearDown(self):
        self.srv.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_conf(self, max_clients):
        with open(self.conf, "w") as f:
            f.write("log-file %s\nmax-clients %d\n" % (self.log, max_clients))

    def test_reopen_only(self):
        self.srv.start()
        # (the port accepts a moment before the ready line is written)
        self.assertTrue(wait_for(lambda: b" ready: " in read(self.log)))
        os.rename(self.log, self.log + ".1")
        # an edit SIGUSR1 must not apply (SIGHUP would: max-clients is
        # reloadable)
        self.write_conf(max_clients=1)
        self.srv.proc.send_signal(signal.SIGUSR1)
        self.assertTrue(wait_for(lambda: b"SIGUSR1: log file reopened"
                                 in read(self.log)), read(self.log))
        self.assertIsNone(self.srv.proc.poll())
        new = read(self.log)
        self.assertNotIn(b"SIGHUP", new)
        self.assertNotIn(b"max-clients", new)
        # max-clients is still 4: three connections at once are served
        conns = [self.srv.client() for _ in range(3)]
        for c in conns:
            self.assertEqual(c.call(PING)[0], OK)
            c.close()
        self.srv.stop()
        self.assertIn(b"stopped cleanly", read(self.log))
        old = read(self.log + ".1")
        self.assertNotIn(b"SIGUSR1", old)
        self.assertNotIn(b"stopped cleanly", old)


if __name__ == "__main__":
    kvdtest.main()
