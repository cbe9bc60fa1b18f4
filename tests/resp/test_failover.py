"""test_failover.py - Redis Sentinel fails a kvd primary over to one of its
replicas (docs/replication.md, "Failover with Redis Sentinel").

Three real redis-sentinel processes (quorum 2) watch a kvd primary with two
kvd replicas, all on loopback, each kvd with a --config file (Sentinel's
CONFIG REWRITE).  A writer thread writes through redis-py's
Sentinel(...).master_for(...) and sends WAIT 1 after each SET, recording
every key whose WAIT answered at least 1.  The primary is killed with
SIGKILL.  Then:

- the Sentinels promote a replica (their MULTI, SLAVEOF NO ONE, CONFIG
  REWRITE, CLIENT KILL TYPE normal and pubsub, EXEC all work on kvd), and
  get-master-addr-by-name names it;
- the redis-py client follows: its writes after the failover reach the new
  primary and are WAITed for by the other replica;
- every recorded key is on the new primary with its value;
- the other replica follows the new primary (Sentinel's SLAVEOF) and ends
  identical to it;
- the old primary, restarted on the same port with the same data directory
  and config file, is turned into a replica of the new one by Sentinel and
  ends identical to it;
- Sentinel's CONFIG REWRITEs leave the roles in the config files: no
  replicaof on the new primary, `replicaof 127.0.0.1 <its RESP port> resp`
  on the other two.

Every wait is on a condition and bounded; the whole run takes well under
90 s.
"""

import os
import shutil
import tempfile
import threading
import time
import unittest

try:
    import redis
    import redis.sentinel
except ImportError:  # checked in setUp: a skip, not an error
    redis = None

import resputil
from kvdtest import Server, free_port
from resputil import main, need

NAME = "kvdm"


def wait_until(fn, timeout, what):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError("timed out after %d s waiting for %s (last: %r)"
                         % (timeout, what, last))


def info(port, section="replication"):
    c = redis.Redis(port=port, decode_responses=True, socket_timeout=5)
    try:
        return c.info(section)
    finally:
        c.close()


def dump(port):
    """Every key and value, in key order."""
    c = redis.Redis(port=port, socket_timeout=10)
    try:
        keys = sorted(c.scan_iter(count=1000))
        vals = c.mget(keys) if keys else []
        return list(zip(keys, vals))
    finally:
        c.close()


def read(path):
    with open(path) as f:
        return f.read()


class Kvd(Server):
    """A kvd whose RESP port is fixed in its config file, so that a restart
    comes back where the Sentinels know it."""

    def __init__(self, tmp, name, extra_conf=""):
        super().__init__(threads=2, resp=False)
        self.resp_port = free_port()
        self.conf = os.path.join(tmp, name + ".conf")
        with open(self.conf, "w") as f:
            f.write("resp-port %d\n%s" % (self.resp_port, extra_conf))
        self.extra = ["--config", self.conf, "--journal-segment-size", "1m"]

    def start(self, timeout=15, port=None):
        super().start(timeout, port)
        wait_until(lambda: info(self.resp_port, "server"), 15,
                   "the RESP port")
        return self


class Failover(unittest.TestCase):
    def setUp(self):
        need("redis-sentinel")
        if redis is None:
            self.skipTest("python3-redis is not installed "
                          "(scripts/deps.sh test)")
        self.tmp = tempfile.mkdtemp(prefix="kvd-failover-")
        self.kvds, self.sentinels = [], []

    def tearDown(self):
        resputil.stop_all([p for p, _ in self.sentinels])
        for k in self.kvds:
            k.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def wait(self, fn, timeout, what):
        """wait_until, with every Sentinel's and kvd's log in the failure
        message: a timeout says which process did not move."""
        try:
            return wait_until(fn, timeout, what)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.logs())) from None

    def logs(self):
        out = resputil.sentinel_logs(self.tmp, 4000)
        for k in self.kvds:
            out.append("--- kvd %d\n%s" % (k.resp_port,
                       k.log_text()[-3000:].decode(errors="replace")))
        return "\n".join(out)

    def kvd(self, name, extra_conf=""):
        k = Kvd(self.tmp, name, extra_conf)
        self.kvds.append(k)
        return k.start()

    def sentinel(self, name, master_port):
        # down-after 2000, not 1000: a Sentinel that has just switched to a
        # new master opens a new link to it and sends its first PING about
        # a ping period (1 s) later, so with down-after equal to that
        # period all three once marked the new master down before its
        # first answer came (+sdown, then -sdown 70 ms later) and failed it
        # over a second time, and the test waited for the first one
        p, port, _ = resputil.start_sentinel(
            self.tmp, name, NAME, master_port,
            "sentinel down-after-milliseconds %s 2000" % NAME,
            "sentinel failover-timeout %s 10000" % NAME,
            "sentinel parallel-syncs %s 1" % NAME)
        self.sentinels.append((p, port))
        return port

    def sentinel_view(self, port):
        c = redis.Redis(port=port, decode_responses=True, socket_timeout=5)
        try:
            return resputil.sentinel_master(c, NAME)
        finally:
            c.close()

    def master_addr(self, port):
        c = redis.Redis(port=port, decode_responses=True, socket_timeout=5)
        try:
            a = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                  NAME)
            return int(a[1])
        finally:
            c.close()

    def follows(self, k, primary):
        i = info(k.resp_port)
        return (i.get("role") == "slave" and
                i.get("master_port") == primary.resp_port and
                i.get("master_link_status") == "up")

    def test_sentinel_failover(self):
        p = self.kvd("p")
        # the replicas name the primary's RESP port, as Sentinel does
        link = "replicaof 127.0.0.1 %d resp\n" % p.resp_port
        reps = [self.kvd("r1", link), self.kvd("r2", link)]
        for r in reps:
            self.wait(lambda: self.follows(r, p), 20, "the replicas")
        sports = [self.sentinel("s%d" % i, p.resp_port) for i in range(3)]

        def ready(port):
            m = self.sentinel_view(port)
            return (m["flags"] == "master" and
                    int(m["num-other-sentinels"]) == 2 and
                    int(m["num-slaves"]) == 2)
        for s in sports:
            self.wait(lambda: ready(s), 30, "sentinel %d ready" % s)

        # the writer: SET, then WAIT 1; record the keys WAIT confirmed
        acked, stop, errors = {}, threading.Event(), []
        st = redis.sentinel.Sentinel([("127.0.0.1", s) for s in sports],
                                     socket_timeout=2)
        m = st.master_for(NAME, socket_timeout=2)

        def writer():
            i = 0
            while not stop.is_set():
                k, v = "k%06d" % i, "v%d-%f" % (i, time.time())
                i += 1
                try:
                    m.set(k, v)
                    if m.execute_command("WAIT", 1, 500) >= 1:
                        acked[k] = v
                except redis.RedisError as e:  # failing over: try again
                    errors.append(repr(e))
                    time.sleep(0.05)
        w = threading.Thread(target=writer)
        w.start()
        try:
            self.wait(lambda: len(acked) >= 100, 20, "acknowledged writes")
            before = len(acked)
            p.kill9()
            # Sentinel promotes one of the replicas
            new_port = self.wait(
                lambda: all(self.master_addr(s) != p.resp_port
                            for s in sports) and self.master_addr(sports[0]),
                40, "the failover")
            new = [r for r in reps if r.resp_port == new_port]
            self.assertEqual(len(new), 1, (new_port, self.logs()))
            new = new[0]
            other = reps[1 - reps.index(new)]
            self.assertEqual(info(new.resp_port)["role"], "master")
            # the client follows: WAIT-confirmed writes on the new primary
            self.wait(lambda: len(acked) >= before + 50, 40,
                       "writes acknowledged after the failover")
        finally:
            stop.set()
            w.join(30)
        self.assertFalse(w.is_alive())
        # every write whose WAIT answered >= 1 survived the failover
        c = redis.Redis(port=new.resp_port, decode_responses=True,
                        socket_timeout=10)
        keys = sorted(acked)
        got = dict(zip(keys, c.mget(keys)))
        lost = [k for k in keys if got[k] != acked[k]]
        self.assertEqual(lost, [], self.logs())
        c.close()
        # the other replica follows the new primary, identical
        self.wait(lambda: self.follows(other, new), 30,
                   "the other replica to follow the new primary")
        want = dump(new.resp_port)
        self.wait(lambda: dump(other.resp_port) == want, 30,
                   "the other replica to match")
        # Sentinel's CONFIG REWRITEs wrote the roles into the files: the
        # new primary's lost its replicaof, the other replica's names the
        # new primary's RESP port (a restart keeps each role)
        link = "replicaof 127.0.0.1 %d resp" % new.resp_port
        self.wait(lambda: "replicaof" not in read(new.conf), 30,
                   "the new primary's file without replicaof")
        self.wait(lambda: link in read(other.conf).splitlines(), 30,
                   "the other replica's file to name the new primary")
        # once every Sentinel ended the failover (flags back to plain
        # master, at the new address), the old primary, restarted as it
        # was, comes back as a primary and Sentinel makes it a replica
        # (60 s: the leader ends it within failover-timeout, 10 s; the
        # others learn it from hellos every 2 s, and in a loaded full-suite
        # run one Sentinel once took longer than 30 s)
        for s in sports:
            self.wait(lambda: self.sentinel_view(s)["flags"] == "master" and
                       int(self.sentinel_view(s)["port"]) == new.resp_port,
                       60, "sentinel %d to end the failover" % s)
        p.start(port=p.port)
        self.wait(lambda: self.follows(p, new), 45,
                   "the old primary to rejoin as a replica")
        self.wait(lambda: dump(p.resp_port) == want, 30,
                   "the old primary to match the new one")
        self.wait(lambda: link in read(p.conf).splitlines(), 30,
                   "the old primary's file to name the new primary")


if __name__ == "__main__":
    main()
