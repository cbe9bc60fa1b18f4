"""test_files.py - the packaging files agree with kvd itself.

- packaging/kvd.conf lists every option of `kvd --help` exactly once, shows
  the real default wherever it has one, and kvd accepts it as shipped, with
  every default uncommented, and with each example line uncommented;
- docs/kvd.8 documents every option, and is clean for groff;
- packaging/kvd.service passes `systemd-analyze verify` and keeps the
  settings the package relies on;
- the maintainer scripts and build-debs.sh are valid sh (and shellcheck-clean
  when shellcheck is installed).
Needs no root; runs against the kvd just built ($KVD_BIN).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import kvdtest

SRC = os.environ["KVD_SOURCE_DIR"]
KVD = os.environ["KVD_BIN"]
CONF = os.path.join(SRC, "packaging", "kvd.conf")
UNIT = os.path.join(SRC, "packaging", "kvd.service")
MAN = os.path.join(SRC, "docs", "kvd.8")
SCRIPTS = [os.path.join(SRC, "packaging", "deb", s) for s in ("postinst", "prerm", "postrm")]
SCRIPTS.append(os.path.join(SRC, "packaging", "build-debs.sh"))

# An option line of kvd.conf: "name value" or "#name value" (prose comments
# have a blank after the '#').
OPT_LINE = re.compile(r"^(#?)([a-z][a-z0-9-]*)\s+(.*)$")


def run(*cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def help_options():
    """{name: default} from `kvd --help`; "" for an empty default."""
    out = run(KVD, "--help").stdout
    opts = {}
    for line in out.splitlines():
        m = re.match(r"^  --([a-z][a-z0-9-]*)\s+.*\(default (.*)\)$", line)
        if m:
            opts[m.group(1)] = "" if m.group(2) == '""' else m.group(2)
    return opts


def conf_options():
    """[(commented, name, value, lineno)] for every option line of kvd.conf."""
    found = []
    with open(CONF) as f:
        for n, line in enumerate(f, 1):
            m = OPT_LINE.match(line.rstrip("\n"))
            if m:
                found.append((m.group(1) == "#", m.group(2), m.group(3), n))
    return found


def check_config(text, extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    try:
        return run(KVD, "--config", f.name, "--test-config", *extra)
    finally:
        os.unlink(f.name)


class Conf(unittest.TestCase):
    def setUp(self):
        self.opts = help_options()
        self.assertGreater(len(self.opts), 20, "kvd --help lists too few options")
        self.lines = conf_options()

    def test_every_option_once(self):
        names = [name for _, name, _, _ in self.lines]
        missing = sorted(set(self.opts) - set(names))
        unknown = sorted(set(names) - set(self.opts))
        twice = sorted({n for n in names if names.count(n) > 1})
        self.assertEqual(missing, [], "options of kvd --help missing from packaging/kvd.conf")
        self.assertEqual(unknown, [], "packaging/kvd.conf has options kvd does not know")
        self.assertEqual(twice, [], "options listed more than once in packaging/kvd.conf")

    def test_commented_values_are_defaults(self):
        for commented, name, value, n in self.lines:
            default = self.opts.get(name)
            if commented and default:
                self.assertEqual(value, default,
                                 "kvd.conf:%d: #%s shows %r, kvd's default is %r"
                                 % (n, name, value, default))

    def test_package_settings(self):
        active = {name: value for c, name, value, _ in self.lines if not c}
        self.assertEqual(active, {"data-dir": "/var/lib/kvd"},
                         "kvd.conf should set data-dir only (the rest are kvd's defaults; "
                         "log to stderr, which systemd sends to the journal)")

    def test_kvd_accepts_it(self):
        with open(CONF) as f:
            text = f.read()
        r = check_config(text)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Every default at once.
        lines = text.splitlines()
        for commented, name, value, n in self.lines:
            if commented and self.opts.get(name):
                lines[n - 1] = lines[n - 1][1:]
        r = check_config("\n".join(lines) + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        # Each example (options whose default is empty) on its own.
        tmp = tempfile.mkdtemp(prefix="kvd-conf-")
        try:
            pw = os.path.join(tmp, "password")
            with open(pw, "w") as f:
                f.write("example\n")
            for commented, name, value, n in self.lines:
                if not commented or self.opts.get(name):
                    continue
                example = lines[:]
                line = lines[n - 1][1:]
                # kvd checks paths at start: the examples' paths exist only
                # on an installed system, so point them here.
                if name == "requirepass-file":
                    line = "requirepass-file " + pw
                elif name == "log-file":
                    line = "log-file " + os.path.join(tmp, "kvd.log")
                elif name == "restore":
                    line = "restore " + tmp
                elif name == "resp-unix-socket":  # needs the RESP port
                    line += "\nresp-port 7380"
                example[n - 1] = line
                r = check_config("\n".join(example) + "\n")
                self.assertEqual(r.returncode, 0, "kvd.conf:%d: %s\n%s" % (n, line, r.stderr))
        finally:
            shutil.rmtree(tmp)

    def test_bad_line_is_refused_with_file_and_line(self):
        with open(CONF) as f:
            text = f.read()
        n = text.count("\n") + 1
        r = check_config(text + "map-size 64x\n")
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, r"\.conf:%d: map-size: " % n)


class Man(unittest.TestCase):
    def test_every_option(self):
        with open(MAN) as f:
            text = f.read()
        # Options appear as \-\-name (roff escapes the dashes).
        plain = text.replace("\\-", "-")
        missing = [o for o in help_options() if "--" + o not in plain]
        self.assertEqual(missing, [], "options of kvd --help missing from docs/kvd.8")
        for section in ("SYNOPSIS", "OPTIONS", "SIGNALS", "FILES", '"EXIT STATUS"', "EXAMPLES"):
            self.assertIn(".SH " + section, text)

    def test_groff_clean(self):
        if not shutil.which("groff"):
            self.skipTest("groff is not installed")
        r = run("groff", "-man", "-ww", "-z", MAN)
        self.assertEqual((r.returncode, r.stderr), (0, ""))


class Unit(unittest.TestCase):
    def setUp(self):
        with open(UNIT) as f:
            self.text = f.read()
        self.keys = {}
        for line in self.text.splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                self.keys.setdefault(k, []).append(v)

    def test_settings(self):
        want = {
            "Type": ["notify"], "User": ["kvd"], "Group": ["kvd"],
            "ExecStart": ["/usr/sbin/kvd --config /etc/kvd/kvd.conf"],
            "Restart": ["on-failure"], "StateDirectory": ["kvd"],
            "RuntimeDirectory": ["kvd"], "SyslogLevel": ["err"],
            "ProtectSystem": ["strict"], "ProtectHome": ["yes"], "PrivateTmp": ["yes"],
            "NoNewPrivileges": ["yes"], "WantedBy": ["multi-user.target"],
        }
        for k, v in want.items():
            self.assertEqual(self.keys.get(k), v, k)
        self.assertEqual(self.keys["ExecReload"][-1], "/bin/kill -HUP $MAINPID")
        # Enough descriptors for the default max-clients.
        self.assertGreater(int(self.keys["LimitNOFILE"][0]), int(help_options()["max-clients"]))
        # io_uring must stay allowed: only a deny list, which names none of it.
        for f in self.keys.get("SystemCallFilter", []):
            self.assertTrue(f.startswith("~"), "SystemCallFilter must be a deny list: " + f)
            self.assertNotIn("io_uring", f)
            self.assertNotIn("@io-event", f)

    def test_systemd_analyze_verify(self):
        if not shutil.which("systemd-analyze"):
            self.skipTest("systemd-analyze is not installed")
        tmp = tempfile.mkdtemp(prefix="kvd-unit-")
        try:
            # The unit as installed, with the kvd just built standing in for
            # /usr/sbin/kvd (verify checks that the command exists).
            path = os.path.join(tmp, "kvd.service")
            with open(path, "w") as f:
                f.write(self.text.replace("/usr/sbin/kvd", os.path.abspath(KVD)))
            r = run("systemd-analyze", "verify", "--man=no", path)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("kvd.service", r.stderr, r.stderr)
        finally:
            shutil.rmtree(tmp)


class Scripts(unittest.TestCase):
    def test_sh_syntax(self):
        for s in SCRIPTS:
            r = run("sh", "-n", s)
            self.assertEqual(r.returncode, 0, s + ": " + r.stderr)
            self.assertTrue(os.access(s, os.X_OK), s + " is not executable")

    def test_shellcheck(self):
        if not shutil.which("shellcheck"):
            self.skipTest("shellcheck is not installed")
        r = run("shellcheck", *SCRIPTS)
        self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    kvdtest.main()
