"""test_repro.py - two package builds of one commit give identical .debs.

packaging/build-debs.sh builds the packages twice, in two different build
directories (paths that must not reach the binaries), with
SOURCE_DATE_EPOCH the last commit's time (what the script sets by itself;
pinned here for both builds, since a commit may land in between in a shared
tree); every .deb of the second build must be byte for byte the first
one's, and its files must carry the commit's time.  The first
tree is packaging_deb's (kept between runs), the second a fresh temporary
one.  Holds packaging_deb's lock, so the two never build in that tree at
once.  Skipped without dpkg-deb or git.
"""

import fcntl
import filecmp
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

SRC = os.environ["KVD_SOURCE_DIR"]
DEB_BUILD = os.environ.get("KVD_DEB_BUILD_DIR") or os.path.join(
    os.environ["KVD_BUILD_DIR"], "tests", "packaging", "deb-build")
LOCK = "/run/lock/kvd-packaging-test.lock" if os.path.isdir("/run/lock") \
    else "/tmp/kvd-packaging-test.lock"


def build(dirname, epoch):
    env = dict(os.environ, SOURCE_DATE_EPOCH=epoch)
    r = subprocess.run([os.path.join(SRC, "packaging", "build-debs.sh"), dirname],
                       capture_output=True, text=True, env=env, timeout=1500)
    if r.returncode:
        raise AssertionError("build-debs.sh %s failed:\n%s%s" % (dirname, r.stdout, r.stderr))
    return sorted(r.stdout.split())


def main():
    for tool in ("dpkg-deb", "git", "cmake"):
        if not shutil.which(tool):
            print("skipped: %s is not installed" % tool)
            return 77
    if subprocess.run(["git", "-C", SRC, "log", "-1"], capture_output=True).returncode:
        print("skipped: %s is not a git checkout" % SRC)
        return 77
    with open(LOCK, "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        # What build-debs.sh takes by itself, pinned for both builds: in a
        # shared working tree a commit may land between the two.
        epoch = subprocess.run(["git", "-C", SRC, "log", "-1", "--format=%ct"],
                               capture_output=True, text=True).stdout.strip()
        first = build(DEB_BUILD, epoch)
        tmp = tempfile.mkdtemp(prefix="kvd-repro-")
        try:
            second = build(os.path.join(tmp, "elsewhere"), epoch)
            # the packages' file times are the commit's
            for deb in first:
                tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb],
                                     capture_output=True, check=True).stdout
                with tarfile.open(fileobj=io.BytesIO(tar)) as t:
                    times = {m.mtime for m in t.getmembers()}
                assert times == {int(epoch)}, (deb, times, epoch)
            names = [os.path.basename(p) for p in first]
            assert names == [os.path.basename(p) for p in second], (first, second)
            assert len(names) == 4, names
            differ = [n for a, b, n in zip(first, second, names)
                      if not filecmp.cmp(a, b, shallow=False)]
            for a, b, n in zip(first, second, names):
                if n in differ:
                    # say where: the listings (times, sizes) or the files
                    la = subprocess.run(["dpkg-deb", "-c", a], capture_output=True, text=True)
                    lb = subprocess.run(["dpkg-deb", "-c", b], capture_output=True, text=True)
                    if la.stdout != lb.stdout:
                        print("%s: listings differ" % n)
            assert not differ, "not reproducible: %s" % differ
            print("packaging_repro: %d packages identical: %s" % (len(names), ", ".join(names)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
