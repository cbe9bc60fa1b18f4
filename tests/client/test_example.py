"""test_example.py - examples/kvc_example, built with the tree, run against
a real kvd: it must print what it stored and exit 0."""

import os
import subprocess
import sys

from kvdtest import Server


def main():
    example = os.environ["KVC_EXAMPLE"]
    with Server() as srv:
        out = subprocess.run([example, "127.0.0.1", str(srv.port)],
                             capture_output=True, timeout=60)
        sys.stdout.write(out.stdout.decode())
        sys.stderr.write(out.stderr.decode())
        assert out.returncode == 0, out.returncode
        assert b"greeting = hello, kvd" in out.stdout
        assert b"scanned 1000 keys" in out.stdout
        srv.stop()
    # Unreachable server: one line naming host:port, exit 1.
    out = subprocess.run([example, "127.0.0.1", "1"], capture_output=True,
                         timeout=30)
    assert out.returncode == 1
    assert b"127.0.0.1:1" in out.stderr, out.stderr
    print("ok")


if __name__ == "__main__":
    main()
