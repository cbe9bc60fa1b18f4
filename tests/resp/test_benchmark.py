"""test_benchmark.py - redis-benchmark (Debian redis-tools) runs against
kvd to completion with no error, without and with pipelining (-P 16).  It
checks that every test reports its throughput and that no error reply was
seen; it asserts nothing about speed (bench/redis-benchmark.sh measures).
"""

import re
import subprocess
import unittest

from resputil import Server, main, need

TESTS = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"]


class Benchmark(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need("redis-benchmark")
        cls.srv = Server(threads=2, resp=True, durability="async").start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def bench(self, *extra):
        p = subprocess.run(
            ["redis-benchmark", "-p", str(self.srv.resp_port),
             "-t", "ping,set,get,incr,mset", "-n", "100000", "-c", "50",
             "-r", "10000", "--csv"] + list(extra),
            capture_output=True, timeout=300)
        out = p.stdout.decode(errors="replace")
        err = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 0, out + err)
        self.assertNotIn("Error", out + err)
        self.assertNotIn("WARNING", out + err)  # CONFIG GET answered
        got = {}
        for line in out.splitlines():
            m = re.match(r'"([^"]+)","([0-9.]+)"', line)
            if m:
                got[m.group(1)] = float(m.group(2))
        self.assertEqual(sorted(got), sorted(TESTS), out)
        for name, rps in got.items():
            self.assertGreater(rps, 0, name)

    def test_plain(self):
        self.bench()

    def test_pipelined(self):
        self.bench("-P", "16")


if __name__ == "__main__":
    main()
