"""kvbenchtest.py - runs the kvbench just built and reads its JSON report.

Tests call kvbench(...) with the options of one run; it adds --json and
--quiet, runs the binary with a timeout (and no terminal, no KVCLI_AUTH of
the caller's) and returns a Run with the exit code, stdout, stderr and the
parsed report.
"""

import json
import os
import subprocess
import tempfile

from kvproto import COUNT

BUILD = os.environ.get("KVD_BUILD_DIR", ".")
KVBENCH = os.path.join(BUILD, "bench", "kvbench")


class Run:
    def __init__(self, rc, out, err, report):
        self.rc, self.out, self.err, self.report = rc, out, err, report

    def phase(self, name):
        for p in self.report["phases"]:
            if p["phase"] == name:
                return p
        raise KeyError(name)

    def counts(self, name="run"):
        """{op type: count} of a phase."""
        return {k: v["count"] for k, v in self.phase(name)["ops_by_type"].items()}

    def share(self, op, name="run"):
        c = self.counts(name)
        return c.get(op, 0) / sum(c.values())


class RunChecks:
    """Mixin for a unittest.TestCase whose self.c is a client of the kvd
    kvbench ran against (or pass client)."""

    def ok_run(self, r, records=200, ops=300, client=None):
        """Both phases ran every operation without an error, and kvd holds
        the records loaded."""
        self.assertEqual(r.phase("load")["ops"], records)
        self.assertEqual(r.phase("load")["errors"]["total"], 0)
        self.assertEqual(r.phase("run")["ops"], ops)
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        self.assertEqual((client or self.c).call(COUNT, b"")[1], records)


def kvbench(*args, port=None, driver="kvd", timeout=120, expect=0, env=None,
            input=None, quiet=True):
    """env: variables added to the environment (KVCLI_AUTH is removed
    unless given); input: stdin's text.  kvbench runs in a session of its
    own, without a controlling terminal, so --askpass reads stdin."""
    full_env = {k: v for k, v in os.environ.items() if k != "KVCLI_AUTH"}
    full_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="kvbench-") as d:
        path = os.path.join(d, "out.json")
        argv = [KVBENCH, "-D", driver, "--json", path] + (["-q"] if quiet else [])
        if port is not None:
            argv += ["--port", str(port)]
        argv += [str(a) for a in args]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           env=full_env, input=input if input is not None else "",
                           start_new_session=True)
        report = None
        if os.path.exists(path):
            with open(path) as f:
                report = json.load(f)
    if expect is not None and p.returncode != expect:
        raise AssertionError("kvbench exited %d, expected %d: %s\nstdout:\n%s\nstderr:\n%s"
                             % (p.returncode, expect, " ".join(argv), p.stdout, p.stderr))
    return Run(p.returncode, p.stdout, p.stderr, report)
