"""test_sentinel_basic.py - real redis-sentinel processes monitoring one kvd
as their master: what Sentinel needs from a monitored server (PING, INFO
with run_id, CLIENT SETNAME, PUBLISH and SUBSCRIBE on __sentinel__:hello).

Two sentinels watch the same kvd.  Each must see it as a master that is
up (SENTINEL MASTER: flags exactly "master", no s_down or o_down, the
run_id INFO gives), and each must find the other through the hello
messages it publishes on kvd's __sentinel__:hello channel
(num-other-sentinels 1).  Replication and failover themselves are not
kvd's yet; this is the monitoring half.  Every wait is bounded.
"""

import shutil
import tempfile
import time
import unittest

import redis

import resputil
from kvdtest import Server
from resputil import Raw, main, need


def start_sentinel(tmp, name, master_port):
    """A sentinel watching kvd, once it answers: (process, client, dir)."""
    p, port, d = resputil.start_sentinel(
        tmp, name, "kvdmaster", master_port,
        "sentinel down-after-milliseconds kvdmaster 5000")
    c = redis.Redis(port=port, decode_responses=True, socket_timeout=5)
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            c.ping()
            return p, c, d
        except redis.ConnectionError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    p.kill()
    raise AssertionError("redis-sentinel did not start")


def sentinel_master(c):
    return resputil.sentinel_master(c, "kvdmaster")


class SentinelBasic(unittest.TestCase):
    def setUp(self):
        need("redis-sentinel")
        self.tmp = tempfile.mkdtemp(prefix="kvd-sentinel-")
        self.srv = Server(threads=2, resp=True).start()
        self.procs = []

    def tearDown(self):
        resputil.stop_all(self.procs)
        self.srv.stop()
        self.srv.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self):
        return "\n".join(resputil.sentinel_logs(self.tmp, 3000))

    def wait_master(self, c, others, timeout=40):
        deadline = time.time() + timeout
        m = None
        while time.time() < deadline:
            m = sentinel_master(c)
            # Sentinel knows kvd's run id only after its first INFO reply,
            # which may come after the flags say master.
            if (m.get("flags") == "master" and m.get("runid")
                    and int(m["num-other-sentinels"]) == others):
                return m
            time.sleep(0.2)
        self.fail("sentinel's view of kvd: %r\n%s" % (m, self.logs()))

    def test_two_sentinels_see_kvd_and_each_other(self):
        kvd_port = self.srv.resp_port
        raw = Raw(kvd_port)
        text = raw.call("INFO", "server").decode()
        run_id = [l.split(":", 1)[1] for l in text.splitlines() if l.startswith("run_id:")][0]
        p1, s1, _ = start_sentinel(self.tmp, "s1", kvd_port)
        self.procs.append(p1)
        m = self.wait_master(s1, 0)
        self.assertEqual(m["runid"], run_id)
        p2, s2, _ = start_sentinel(self.tmp, "s2", kvd_port)
        self.procs.append(p2)
        # hellos every 2 s on kvd's __sentinel__:hello, in both directions
        for s in (s1, s2):
            m = self.wait_master(s, 1)
            self.assertEqual(m["flags"], "master")
            self.assertEqual(m["runid"], run_id)
            self.assertEqual(int(m["port"]), kvd_port)
            self.assertLess(int(m["last-ping-reply"]), 5000)
        # the sentinels' links, seen from kvd
        self.assertGreaterEqual(raw.call("PUBSUB", "NUMSUB", "__sentinel__:hello")[1], 2)
        names = raw.call("CLIENT", "LIST").decode()
        self.assertIn("name=sentinel-", names)
        # still up well past down-after-milliseconds (5 s): no s_down
        time.sleep(6)
        for s in (s1, s2):
            m = sentinel_master(s)
            self.assertEqual(m["flags"], "master", self.logs())
            self.assertEqual(int(m["num-other-sentinels"]), 1)
        self.assertEqual(s1.execute_command("SENTINEL", "CKQUORUM", "kvdmaster")[:2], "OK")
        raw.close()


if __name__ == "__main__":
    main()
