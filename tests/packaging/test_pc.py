"""test_pc.py - the build tree's kvclient.pc is usable as it is.

PKG_CONFIG_PATH=<build>/libkvclient: `pkg-config --cflags --libs kvclient`
must name directories that exist, and examples/kvc_example.c must compile
and link with those flags alone against the library just built.  (The
installed kvclient.pc is checked by packaging_deb.)
"""

import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

import kvdtest

SRC = os.environ["KVD_SOURCE_DIR"]
BUILD = os.environ["KVD_BUILD_DIR"]


class BuildTreePc(unittest.TestCase):
    def test_example_builds(self):
        for tool in ("pkg-config", "cc"):
            if not shutil.which(tool):
                self.skipTest(tool + " is not installed")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(BUILD, "libkvclient"))
        r = subprocess.run(["pkg-config", "--cflags", "--libs", "kvclient"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        flags = shlex.split(r.stdout)
        for f in flags:
            if f.startswith(("-I", "-L")):
                self.assertTrue(os.path.isdir(f[2:]), "%s: no such directory" % f)
        tmp = tempfile.mkdtemp(prefix="kvd-pc-")
        try:
            exe = os.path.join(tmp, "example")
            r = subprocess.run(["cc", "-o", exe, os.path.join(SRC, "examples", "kvc_example.c")]
                               + flags, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            libdir = [f[2:] for f in flags if f.startswith("-L")][0]
            r = subprocess.run(["ldd", exe], capture_output=True, text=True,
                               env=dict(os.environ, LD_LIBRARY_PATH=libdir))
            self.assertIn(os.path.join(libdir, "libkvclient.so.1"), r.stdout)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    kvdtest.main()
