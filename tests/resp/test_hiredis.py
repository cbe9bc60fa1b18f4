"""test_hiredis.py - runs hiredis_client (built against Debian's libhiredis)
against kvd's RESP port: binary-safe arguments, a 20,000-command pipeline
with an error in the middle, counters and MGET as hiredis parses them.
"""

import os
import subprocess
import unittest

from resputil import Server, main

CLIENT = os.path.join(os.environ.get("KVD_BUILD_DIR", "."), "tests", "resp",
                      "hiredis_client")


class Hiredis(unittest.TestCase):
    def test_client(self):
        if not os.path.exists(CLIENT):
            self.skipTest("built without libhiredis (scripts/deps.sh test installs libhiredis-dev)")
        with Server(threads=2, resp=True) as srv:
            p = subprocess.run([CLIENT, str(srv.resp_port)],
                               capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            srv.stop()


if __name__ == "__main__":
    main()
