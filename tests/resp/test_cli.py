"""test_cli.py - redis-cli (Debian redis-tools) against kvd: one-shot
commands, commands read from stdin, --pipe mass insertion of 100,000 keys
with 0 errors, and --scan (with and without --pattern) finding every key.
"""

import re
import unittest

from resputil import Server, cli, main, need


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need("redis-cli")
        cls.srv = Server(threads=2, resp=True).start()
        cls.port = cls.srv.resp_port

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def run_ok(self, *args, stdin=None):
        rc, out, err = cli(self.port, *args, stdin=stdin)
        self.assertEqual(rc, 0, err)
        return out

    def test_one_shot(self):
        self.assertEqual(self.run_ok("PING"), b"PONG\n")
        self.assertEqual(self.run_ok("SET", "greeting", "hello world"), b"OK\n")
        self.assertEqual(self.run_ok("GET", "greeting"), b"hello world\n")
        self.assertEqual(self.run_ok("APPEND", "greeting", "!"), b"12\n")
        self.assertEqual(self.run_ok("INCRBY", "n", "41"), b"41\n")
        self.assertEqual(self.run_ok("INCR", "n"), b"42\n")
        self.assertEqual(self.run_ok("EXISTS", "n", "greeting", "x"), b"2\n")
        self.assertEqual(self.run_ok("MGET", "n", "x"), b"42\n\n")
        self.assertEqual(self.run_ok("EXPIRE", "n", "100"), b"1\n")
        self.assertIn(self.run_ok("TTL", "n"), (b"100\n", b"99\n"))
        self.assertEqual(self.run_ok("DEL", "n", "x"), b"1\n")
        self.assertEqual(self.run_ok("--no-raw", "GET", "n"), b"(nil)\n")
        self.assertEqual(self.run_ok("--no-raw", "STRLEN", "greeting"), b"(integer) 12\n")
        info = self.run_ok("INFO", "server")
        self.assertIn(b"redis_version:", info)
        self.assertIn(b"redis_mode:standalone", info)

    def test_errors_keep_connection(self):
        # Commands from stdin share one connection: an error in the middle
        # must not end it.
        out = self.run_ok(stdin=b"SET a 1\nLPUSH l x\nGET\nGET a\n")
        self.assertEqual(out.split(b"\n")[0], b"OK")
        self.assertIn(b"ERR unknown command 'LPUSH'", out)
        self.assertIn(b"ERR wrong number of arguments for 'get' command", out)
        self.assertTrue(out.endswith(b"1\n"), out)

    def test_binary_value(self):
        data = bytes(range(256)) * 4
        self.run_ok("-x", "SET", "bin", stdin=data)
        rc, out, _ = cli(self.port, "--raw", "GET", "bin")
        self.assertEqual(out, data + b"\n")

    def test_pipe_and_scan(self):
        n = 100000
        proto = []
        for i in range(n):
            k, v = b"mass:%06d" % i, b"value-%d" % i
            proto.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                         % (len(k), k, len(v), v))
        out = self.run_ok("--pipe", stdin=b"".join(proto))
        m = re.search(rb"errors: (\d+), replies: (\d+)", out)
        self.assertIsNotNone(m, out)
        self.assertEqual((int(m.group(1)), int(m.group(2))), (0, n), out)
        self.assertEqual(self.run_ok("GET", "mass:054321"), b"value-54321\n")

        keys = self.run_ok("--scan", "--pattern", "mass:*").split()
        self.assertEqual(len(keys), n)
        self.assertEqual(set(keys), {b"mass:%06d" % i for i in range(n)})
        some = self.run_ok("--scan", "--pattern", "mass:00012?").split()
        self.assertEqual(sorted(some), [b"mass:%06d" % i for i in range(120, 130)])
        self.assertGreaterEqual(len(self.run_ok("--scan").split()), n)


if __name__ == "__main__":
    main()
