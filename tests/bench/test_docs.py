"""test_docs.py - every option `kvbench --help` lists is documented in
docs/kvbench.1 and docs/kvbench.md, and the man page is clean for groff."""

import os
import re
import shutil
import subprocess
import unittest

from kvdtest import main
from kvbenchtest import KVBENCH

SRC = os.environ.get("KVD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def help_options():
    out = subprocess.run([KVBENCH, "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    return sorted(set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", out)))


class Docs(unittest.TestCase):
    def setUp(self):
        self.opts = help_options()
        self.assertIn("askpass", self.opts)
        self.assertGreater(len(self.opts), 25)

    def test_man_page(self):
        with open(os.path.join(SRC, "docs", "kvbench.1")) as f:
            man = f.read()
        # whole names: --record is not documented by --records
        missing = [o for o in self.opts
                   if not re.search(r"\\-\\-%s(?![a-z\\-])" % re.escape(o.replace("-", "\\-")),
                                    man)]
        self.assertEqual(missing, [])
        self.assertIn("KVCLI_AUTH", man)

    def test_markdown(self):
        with open(os.path.join(SRC, "docs", "kvbench.md")) as f:
            md = f.read()
        missing = [o for o in self.opts
                   if not re.search(r"(`|, )--%s(?![a-z-])" % re.escape(o), md)]
        self.assertEqual(missing, [])

    def test_groff_clean(self):
        if not shutil.which("groff"):
            self.skipTest("groff is not installed (scripts/deps.sh test)")
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z",
                            os.path.join(SRC, "docs", "kvbench.1")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, ""))


if __name__ == "__main__":
    main()
