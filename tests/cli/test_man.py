"""test_man.py - docs/kvcli.1 against kvcli itself: every option of
`kvcli --help` and every command of `kvcli help` is documented, the
environment variable too, and groff finds nothing wrong with the page."""

import os
import re
import shutil
import subprocess
import unittest

from kvdtest import main

KVCLI = os.environ["KVCLI"]
MAN = os.path.join(os.environ["KVD_SOURCE_DIR"], "docs", "kvcli.1")


class Man(unittest.TestCase):
    def setUp(self):
        with open(MAN) as f:
            self.text = f.read()
        # roff escapes dashes: \-\-name
        self.plain = self.text.replace("\\-", "-")
        self.help = subprocess.run([KVCLI, "--help"], capture_output=True,
                                   text=True, check=True).stdout

    def test_every_option(self):
        opts = set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", self.help, re.M))
        opts |= set(re.findall(r"^\s+(-\w)\b", self.help, re.M))
        self.assertIn("--askpass", opts)
        self.assertIn("-e", opts)
        missing = [o for o in sorted(opts)
                   if not re.search(r"(^|[^\w-])%s([^\w-]|$)" % re.escape(o),
                                    self.plain, re.M)]
        self.assertEqual(missing, [], "kvcli --help options missing from kvcli.1")

    def test_every_command(self):
        cmds = [l.split()[0] for l in
                self.help.split("Commands:\n")[1].splitlines() if l.strip()]
        missing = [c for c in cmds
                   if not re.search(r"^\.B .*\b%s\b" % c, self.text, re.M)]
        self.assertEqual(missing, [], "commands missing from kvcli.1")
        for word in ("KVCLI_AUTH", "clear", "BATCH MODE", "kvd://", "unix://"):
            self.assertIn(word, self.plain)

    def test_groff_clean(self):
        if not shutil.which("groff"):
            self.skipTest("groff is not installed")
        r = subprocess.run(["groff", "-man", "-ww", "-z", MAN],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))


if __name__ == "__main__":
    main()
