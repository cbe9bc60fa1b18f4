"""test_twemproxy.py - scale-out: two kvd nodes behind twemproxy (Debian's
nutcracker) with ketama consistent hashing, all on loopback.

10,000 keys are written through the proxy; each is then found on exactly
one node (asked directly, not through the proxy), both nodes hold a share,
every key reads back through the proxy, and after one node is restarted
everything is still there.  docs/scale-out.md describes the setup.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import redis

from kvdtest import free_port
from resputil import Server, main, need

NUTCRACKER = shutil.which("nutcracker") or "/usr/sbin/nutcracker"
N = 10000


class PinnedServer(Server):
    """A kvd node that keeps its ports across restarts, as the proxy's
    configuration names them."""

    def start(self, timeout=15):
        if self.port is None:
            return super().start(timeout)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        if not self._wait_ready(timeout):
            raise RuntimeError("kvd did not restart:\n" +
                               self.log_text().decode(errors="replace"))
        return self


def wait_port(port, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class Twemproxy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need(NUTCRACKER)
        cls.tmp = tempfile.mkdtemp(prefix="kvd-twem-")
        cls.nodes = [PinnedServer(threads=1, resp=True).start()
                     for _ in range(2)]
        cls.port = free_port()
        conf = os.path.join(cls.tmp, "nutcracker.yml")
        with open(conf, "w") as f:
            f.write("kvd:\n"
                    "  listen: 127.0.0.1:%d\n"
                    "  hash: fnv1a_64\n"
                    "  distribution: ketama\n"
                    "  redis: true\n"
                    "  auto_eject_hosts: false\n"
                    "  server_retry_timeout: 500\n"
                    "  timeout: 5000\n"
                    "  servers:\n" % cls.port)
            for i, n in enumerate(cls.nodes):
                f.write("    - 127.0.0.1:%d:1 kvd%d\n" % (n.resp_port, i))
        cls.proxy_log = open(os.path.join(cls.tmp, "nutcracker.log"), "ab")
        cls.proxy = subprocess.Popen(
            [NUTCRACKER, "-c", conf, "-s", str(free_port()), "-a", "127.0.0.1",
             "-o", os.path.join(cls.tmp, "nutcracker.out")],
            stdout=cls.proxy_log, stderr=subprocess.STDOUT)
        if not wait_port(cls.port, cls.proxy):
            raise RuntimeError("nutcracker did not start")

    @classmethod
    def tearDownClass(cls):
        cls.proxy.terminate()
        cls.proxy.wait(10)
        cls.proxy_log.close()
        for n in cls.nodes:
            n.stop()
            n.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def proxy_client(self):
        return redis.Redis(port=self.port, socket_timeout=10)

    def read_all(self, r, keys):
        got = []
        for i in range(0, len(keys), 500):
            got += r.mget(keys[i:i + 500])  # the proxy splits it by node
        return got

    def on_node(self, node, keys):
        r = redis.Redis(port=node.resp_port, socket_timeout=10)
        p = r.pipeline(transaction=False)
        for k in keys:
            p.exists(k)
        out = p.execute()
        r.close()
        return out

    def test_shards_and_restart(self):
        keys = [b"user:%05d" % i for i in range(N)]
        vals = [b"value-%d" % i for i in range(N)]
        r = self.proxy_client()
        p = r.pipeline(transaction=False)
        for k, v in zip(keys, vals):
            p.set(k, v)
        self.assertTrue(all(p.execute()))

        a, b = (self.on_node(n, keys) for n in self.nodes)
        for k, x, y in zip(keys, a, b):
            self.assertEqual(x + y, 1, k)  # on exactly one node
        share = sum(a)
        self.assertTrue(0.2 * N < share < 0.8 * N, share)  # both hold a share
        self.assertEqual(self.read_all(r, keys), vals)

        # Multi-key commands the proxy fragments across nodes.
        self.assertTrue(r.mset({b"m:%d" % i: b"%d" % i for i in range(100)}))
        self.assertEqual(r.delete(*[b"m:%d" % i for i in range(50)]), 50)
        self.assertEqual(r.exists(*[b"m:%d" % i for i in range(100)]), 50)
        self.assertEqual(r.incr("counter"), 1)

        self.nodes[0].restart()
        deadline = time.time() + 15
        while True:  # the proxy reconnects on the first request after
            try:
                got = self.read_all(r, keys)
                break
            except redis.RedisError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        self.assertEqual(got, vals)
        self.assertEqual(self.on_node(self.nodes[0], keys), a)
        r.close()


if __name__ == "__main__":
    main()
