"""cliutil.py - what the kvcli tests against one shared kvd (test_cli.py,
test_v2.py) have in common: the server, kvcli run against it, and the check
of one command's output in the four styles.
"""

import os
import subprocess

from kvdtest import ServerCase

KVCLI = os.environ["KVCLI"]


class CliCase(ServerCase):
    """Tests sharing one kvd (ServerCase's, Server(**SERVER)), emptied
    through kvcli before each."""

    SERVER = {}

    def run_cli(self, *args, input=None, port=None, timeout=60):
        """kvcli args against the server (or port): (exit status, stdout,
        stderr)."""
        p = subprocess.run([KVCLI, "-p", str(port or self.srv.port)] + list(args),
                           input=input, capture_output=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args, **kw):
        rc, out, err = self.run_cli(*args, **kw)
        self.assertEqual(rc, 0, (args, out, err))
        return out

    def styles(self, args, raw, readable, js, csv, rc=0):
        """The same command in the four output styles."""
        for flag, want in (("--raw", raw), ("--readable", readable),
                           ("--json", js), ("--csv", csv)):
            got = self.run_cli(flag, *args)
            self.assertEqual((got[0], got[1]), (rc, want), (flag, args, got[2]))

    def setUp(self):
        self.ok("flushall")

    def tearDown(self):
        pass  # no native client (ServerCase's self.c) to close
