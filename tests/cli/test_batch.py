"""test_batch.py - kvcli as scripts use it: batch mode (commands piped on
stdin) prints one reply per line with (nil) and (error) shown and exits with
the worst command's status (-e: stops at the first error); arguments with
NUL bytes reach the server whole; commands in any case; raw scan output
escaped one record per line as dump --tsv; -r/-i repeat; --stat and
--latency bounded by -r."""

import os
import signal
import subprocess
import time
import unittest

from kvdtest import Server, main

KVCLI = os.environ["KVCLI"]


class Batch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def cli(self, *args, input=None):
        p = subprocess.run([KVCLI, "-p", str(self.srv.port)] + list(args),
                           input=input, capture_output=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def setUp(self):
        self.assertEqual(self.cli("flushall")[0], 0)

    def test_one_reply_per_line(self):
        rc, out, err = self.cli(input=b"put a v1\nput b v2\nget a\nget b\n"
                                      b"get nope\n")
        # Not "v1v2": each value ends its line; the absent key is shown.
        self.assertEqual(out, b"OK\nOK\nv1\nv2\n(nil)\n")
        self.assertEqual(rc, 1)  # the worst: a key not found
        rc, out, err = self.cli(input=b"put a v1\nget a\n")
        self.assertEqual((rc, out), (0, b"OK\nv1\n"))

    def test_worst_status_and_stop_on_error(self):
        script = b"get nope\nnosuch\nput k v\nincr k\nget k\n"
        rc, out, err = self.cli(input=script)
        self.assertEqual(rc, 2)
        self.assertEqual(out.split(b"\n")[:3],
                         [b"(nil)", b"(error) UNKNOWN_COMMAND", b"OK"])
        self.assertEqual(out.split(b"\n")[3], b"(error) NOT_INTEGER")
        self.assertEqual(out.split(b"\n")[4], b"v")
        # -e: nothing after the first error runs.
        rc, out, err = self.cli("-e", input=b"put x 1\nincr k\nput y 2\n")
        self.assertEqual((rc, out), (2, b"OK\n(error) NOT_INTEGER\n"))
        self.assertEqual(self.cli("exists", "y")[1], b"0\n")

    def test_values_with_newlines_stay_on_their_line(self):
        rc, out, _ = self.cli(input=b'put m "l1\\nl2\\tx\\\\"\nget m\n')
        self.assertEqual(out, b"OK\nl1\\nl2\\tx\\\\\n")
        # a one-shot get still prints the exact bytes
        self.assertEqual(self.cli("get", "m")[1], b"l1\nl2\tx\\")

    def test_nul_in_arguments(self):
        rc, out, err = self.cli(input=b'put "a\\x00b" "v\\x00w"\nget "a\\x00b"\n'
                                      b'get a\nexists "a\\x00b" a\n')
        self.assertEqual(out, b"OK\nv\\0w\n(nil)\n1\n", err)
        # the key on the server has all three bytes, the value too
        rc, out, _ = self.cli("--json", "scan")
        self.assertEqual(out, b'{"key":"a\\u0000b","value":"v\\u0000w"}\n')
        # NUL inside --name=value and in a prefix
        rc, out, _ = self.cli(input=b'scan "a\\x00" --start="a\\x00a"\n')
        self.assertEqual(out, b"a\\0b\tv\\0w\n")

    def test_case_insensitive(self):
        rc, out, err = self.cli(input=b"PUT k v\nGet k\nGET k\n")
        self.assertEqual((rc, out), (0, b"OK\nv\nv\n"), err)
        self.assertEqual(self.cli("GET", "k"), (0, b"v", b""))

    def test_scan_raw_escaped(self):
        self.assertEqual(self.cli("put", "k\tey", "line1\nline2\r\\\x01")[0], 0)
        self.assertEqual(self.cli("put", "plain", "text")[0], 0)
        rc, out, _ = self.cli("--raw", "scan")
        self.assertEqual(out, b"k\\tey\tline1\\nline2\\r\\\\\\x01\nplain\ttext\n")
        # the same escapes as dump --tsv, so load --tsv reads it back
        self.assertEqual(self.cli("dump", "--tsv")[1], out)
        rc, out, _ = self.cli("--raw", "scan", "-k")
        self.assertEqual(out, b"k\\tey\nplain\n")

    def test_repeat(self):
        rc, out, _ = self.cli("-r", "3", "-i", "0.01", "incr", "n")
        self.assertEqual((rc, out), (0, b"1\n2\n3\n"))
        rc, out, _ = self.cli("-r", "2", "get", "nope")
        self.assertEqual(rc, 1)
        self.assertEqual(self.cli("-r", "0", "ping")[0], 2)
        self.assertEqual(self.cli("-i", "x", "ping")[0], 2)

    def test_stat(self):
        for i in range(5):
            self.cli("put", "s%d" % i, "v")
        rc, out, err = self.cli("--stat", "-r", "2", "-i", "0.05")
        self.assertEqual(rc, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual(lines[1].split(), ["keys", "mem", "ops/s", "connections"])
        self.assertEqual(len(lines), 4)
        for row in lines[2:]:
            keys, mem, ops, conns = row.split()
            self.assertEqual(keys, "5")
            self.assertRegex(mem, r"^[0-9.]+[BKMGTP]$")
            self.assertGreaterEqual(int(conns), 1)  # this one, at least
        self.assertEqual(lines[2].split()[2], "-")
        self.assertRegex(lines[3].split()[2], r"^[0-9]+$")

    def test_latency(self):
        rc, out, err = self.cli("--latency", "-r", "20", "-i", "0.001")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out.decode(), r"^min: [0-9.]+, max: [0-9.]+, "
                         r"avg: [0-9.]+ \(20 samples\)\n$")
        mn, mx, avg = [float(x.split(": ")[1]) for x in
                       out.decode().split(" (")[0].split(", ")]
        self.assertTrue(mn <= avg <= mx, out)
        self.assertEqual(self.cli("--latency", "ping")[0], 2)

    def test_ctrl_c_ends_stat_and_latency(self):
        # --stat: once its first row is out, SIGINT ends it cleanly.
        p = subprocess.Popen([KVCLI, "-p", str(self.srv.port), "--stat",
                              "-i", "0.05"], stdout=subprocess.PIPE)
        try:
            for _ in range(3):
                self.assertTrue(p.stdout.readline())
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(30), 0)
        finally:
            p.kill()
            p.stdout.close()
        # --latency (no -r: until Ctrl-C): once the server has counted its
        # PINGs, SIGINT prints the summary and exits 0.
        before = self.pings()
        p = subprocess.Popen([KVCLI, "-p", str(self.srv.port), "--latency",
                              "-i", "0.01"], stdout=subprocess.PIPE)
        try:
            deadline = time.time() + 30
            while self.pings() < before + 3:
                self.assertLess(time.time(), deadline)
                time.sleep(0.05)
            p.send_signal(signal.SIGINT)
            out = p.stdout.read()
            self.assertEqual(p.wait(30), 0)
        finally:
            p.kill()
            p.stdout.close()
        self.assertRegex(out.decode(), r"^min: [0-9.]+, max: [0-9.]+, "
                         r"avg: [0-9.]+ \([0-9]+ samples\)\n$")

    def pings(self):
        out = self.cli("--raw", "stats")[1].decode()
        for line in out.splitlines():
            name, _, value = line.partition("\t")
            if name == "ops.PING.calls":
                return int(value)
        return 0


if __name__ == "__main__":
    main()
