"""test_journal.py - under journald, kvd's log lines carry their priority.

systemd connects a service's stderr to the journal and says so in
JOURNAL_STREAM ("DEVICE:INODE" of that stream).  kvd then opens each line on
stderr with the sd-daemon prefix of its level, <3> error, <4> warning,
<6> info (<7> debug), so that `journalctl -p warning` shows warnings and
errors only.  Here stderr is a file and JOURNAL_STREAM names it, as systemd
would name its socket; kvd is made to log at three levels: info (ready),
a warning (a SIGHUP that changes an option needing a restart) and an error
(a SIGHUP whose configuration no longer loads).  Without JOURNAL_STREAM, or
with one that names another stream (inherited from a parent), lines keep
their timestamps and no prefix.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import kvdtest

LINE = re.compile(rb"^<([0-7])>([EWID]) ")
PRIO = {b"E": b"3", b"W": b"4", b"I": b"6", b"D": b"7"}


class JournalPriorities(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvdjournal-")
        self.conf = os.path.join(self.dir, "kvd.conf")
        self.err = os.path.join(self.dir, "stderr")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def text(self):
        with open(self.err, "rb") as f:
            return f.read()

    def wait_for(self, needle, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline and needle not in self.text():
            time.sleep(0.05)
        self.assertIn(needle, self.text())

    def run_kvd(self, journal_stream):
        """kvd logging at three levels; its stderr, line by line."""
        with open(self.conf, "w") as f:
            f.write("port %d\ndata-dir %s\nthreads 1\n"
                    % (kvdtest.free_port(), os.path.join(self.dir, "data")))
        with open(self.err, "wb") as f:
            st = os.fstat(f.fileno())
            env = dict(os.environ)
            env.pop("JOURNAL_STREAM", None)
            if journal_stream == "self":
                env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
            elif journal_stream:
                env["JOURNAL_STREAM"] = journal_stream
            self.proc = subprocess.Popen(
                [kvdtest.KVD_BIN, "--config", self.conf], stdout=f, stderr=f,
                env=env)
        self.wait_for(b"ready:")
        with open(self.conf, "a") as f:
            f.write("threads 2\n")  # needs a restart: a warning
        self.proc.send_signal(signal.SIGHUP)
        self.wait_for(b"takes effect after a restart")
        with open(self.conf, "a") as f:
            f.write("no-such-option 1\n")  # does not load: an error
        self.proc.send_signal(signal.SIGHUP)
        self.wait_for(b"does not load")
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(30), 0)
        return self.text().splitlines()

    def test_prefixes(self):
        lines = self.run_kvd("self")
        levels = set()
        for line in lines:
            if line.startswith(b"kvd: "):  # the config parser's own
                continue                   # message, printed as is
            m = LINE.match(line)
            self.assertTrue(m, line)
            self.assertEqual(m.group(1), PRIO[m.group(2)], line)
            levels.add(m.group(2))
        self.assertEqual(levels, {b"E", b"W", b"I"})
        self.assertTrue(any(l.startswith(b"<6>I kvd ") and b" ready: " in l
                            for l in lines))
        self.assertTrue(any(l.startswith(b"<4>W SIGHUP: threads changed")
                            for l in lines))
        self.assertTrue(any(l.startswith(b"<3>E SIGHUP: the configuration")
                            for l in lines))

    def test_no_prefix_elsewhere(self):
        for stream in (None, "1:1"):
            lines = [l for l in self.run_kvd(stream)
                     if not l.startswith(b"kvd: ")]
            self.assertTrue(lines)
            for line in lines:
                self.assertRegex(line, rb"^\d{4}-\d\d-\d\dT[0-9:.]+Z \d+ [EWI] ")


if __name__ == "__main__":
    kvdtest.main()
