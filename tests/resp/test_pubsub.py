"""test_pubsub.py - pub/sub, CONFIG SET/REWRITE/RESETSTAT, CLIENT KILL TYPE
and run_id on kvd's RESP port (what Redis Sentinel needs from a server it
monitors):

  - the same sequence of SUBSCRIBE, PSUBSCRIBE, PUBLISH, UNSUBSCRIBE,
    PUNSUBSCRIBE, PUBSUB and commands refused in the subscribed context
    sent to redis-server 7.0 and to kvd, every reply compared;
  - a PUBLISH reaches subscribers on every io thread, in order;
  - a subscriber that never reads is closed once over pubsub-max-output,
    counted in INFO, and kvd's memory stays bounded;
  - before AUTH nothing can be subscribed to or published;
  - CONFIG SET / GET / REWRITE (comments and other lines kept, the value
    survives a restart), CONFIG RESETSTAT, and the errors of each;
  - CLIENT KILL TYPE pubsub / normal / master, and Sentinel's failover
    transaction (MULTI, CONFIG REWRITE, CLIENT KILL TYPE normal, CLIENT
    KILL TYPE pubsub, EXEC);
  - INFO's run_id: 40 hex digits, new for every process.

Every wait is bounded.
"""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import redis

from kvdtest import Server, free_port, skip_rss_bounds_under_tsan, wait_for
from resputil import Error, Raw, encode, main, need_redis_70, spread_conns


def start_redis(port):
    need_redis_70()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p
        except OSError:
            time.sleep(0.02)
    p.kill()
    raise AssertionError("redis-server did not start")


def info(conn, section):
    text = conn.call("INFO", section)
    assert isinstance(text, bytes), text
    return dict(line.split(":", 1) for line in text.decode().splitlines()
                if ":" in line)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Barrier:
    """Replies of one connection up to a PING barrier: everything a server
    sent it before answering that PING (pushes included)."""

    def __init__(self):
        self.n = 0

    def drain(self, conn):
        self.n += 1
        tag = b"barrier-%d" % self.n
        conn.send(encode("PING", tag))
        got = []
        while True:
            r = conn.reply()
            if r == tag or r == [b"pong", tag]:
                return got, r
            got.append(r)


def norm(r):
    """Replies as comparable values (errors by their text)."""
    if isinstance(r, Error):
        return ("error", str(r))
    if isinstance(r, list):
        return [norm(x) for x in r]
    return r


# (connection, command): "s" and "t" subscribe, "p" publishes.
SCRIPT = [
    ("s", ["UNSUBSCRIBE"]),
    ("s", ["PUNSUBSCRIBE"]),
    ("s", ["UNSUBSCRIBE", "a", "b"]),
    ("p", ["PUBSUB", "NUMSUB"]),
    ("p", ["PUBSUB", "NUMPAT", "x"]),
    ("p", ["PUBSUB", "CHANNELS", "a", "b"]),
    ("p", ["PUBSUB", "FOO"]),
    ("p", ["PUBSUB"]),
    ("p", ["PUBLISH", "a"]),
    ("s", ["SUBSCRIBE"]),
    ("s", ["PSUBSCRIBE"]),
    ("p", ["PUBLISH", "a", "nobody"]),
    ("s", ["SUBSCRIBE", "a", "b", "a"]),
    ("s", ["PSUBSCRIBE", "h?llo", "news.*", "h?llo"]),
    ("t", ["PSUBSCRIBE", "news.*", "[ab]"]),
    ("p", ["PUBLISH", "a", "one"]),
    ("p", ["PUBLISH", "hello", "two"]),
    ("p", ["PUBLISH", "news.tech", "three\r\nlines"]),
    ("p", ["PUBLISH", "b", ""]),
    ("p", ["PUBLISH", "zzz", "none"]),
    ("p", ["PUBSUB", "NUMSUB", "a", "b", "c", "news.*"]),
    ("p", ["PUBSUB", "NUMPAT"]),
    ("s", ["GET", "x"]),
    ("s", ["SET", "x", "1"]),
    ("s", ["CLIENT", "ID"]),
    ("s", ["CONFIG", "GET", "maxclients"]),
    ("s", ["PUBLISH", "a", "x"]),
    ("s", ["MULTI"]),
    ("s", ["NOSUCH"]),
    ("s", ["GET"]),
    ("s", ["PING"]),
    ("s", ["PING", "hi"]),
    ("s", ["UNSUBSCRIBE", "a", "zz"]),
    ("p", ["PUBLISH", "a", "after"]),
    ("s", ["PUNSUBSCRIBE", "news.*"]),
    ("p", ["PUBLISH", "news.x", "four"]),
    ("p", ["PUBSUB", "NUMPAT"]),
    ("s", ["PUNSUBSCRIBE"]),
    ("s", ["GET", "x"]),
    ("s", ["UNSUBSCRIBE"]),
    ("s", ["PING"]),
    ("s", ["SET", "x", "1"]),
    ("s", ["MULTI"]),
    ("s", ["SUBSCRIBE", "m"]),
    ("s", ["EXEC"]),
    ("p", ["PUBLISH", "m", "in-multi"]),
    ("p", ["PUBSUB", "NUMSUB", "m"]),
    ("s", ["UNSUBSCRIBE"]),
    ("t", ["PUNSUBSCRIBE", "nope", "[ab]"]),
    ("p", ["PUBLISH", "b", "five"]),
    ("t", ["QUIT"]),
    ("p", ["PUBSUB", "NUMPAT"]),
]


class Differential(unittest.TestCase):
    def run_script(self, port):
        conns = {k: Raw(port) for k in "spt"}
        out, bar = [], Barrier()
        quiet = set()  # closed, or inside MULTI (a PING would be queued)
        for who, cmd in SCRIPT:
            c = conns[who]
            c.send(encode(*cmd))
            first = c.reply()
            out.append((who, cmd, norm(first)))
            if cmd[0] in ("QUIT", "MULTI") and first == b"OK":
                quiet.add(who)
            elif cmd[0] == "EXEC":
                quiet.discard(who)
            # everything each subscriber got meanwhile
            for k in "st":
                if k not in quiet:
                    got, _ = bar.drain(conns[k])
                    out.append((k, "pushed", norm(got)))
        channels = []
        conns["s"].send(encode("SUBSCRIBE", "c1", "c2", "c3"))
        for _ in range(3):
            conns["s"].reply()
        channels.append(sorted(conns["p"].call("PUBSUB", "CHANNELS")))
        channels.append(sorted(conns["p"].call("PUBSUB", "CHANNELS", "c[12]")))
        out.append(("p", "channels", channels))
        for c in conns.values():
            c.close()
        return out

    def test_same_replies_as_redis(self):
        rport = free_port()
        rp = start_redis(rport)
        srv = Server(threads=2, resp=True).start()
        try:
            want = self.run_script(rport)
            got = self.run_script(srv.resp_port)
        finally:
            rp.kill()
            rp.wait()
            srv.stop()
            srv.cleanup()
        self.assertEqual(len(want), len(got))
        for w, g in zip(want, got):
            self.assertEqual(w, g, "step %r" % (w[:2],))


class PubSub(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, resp=True,
                         args=["--pubsub-max-output", "1m"]).start()
        cls.port = cls.srv.resp_port

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def test_cross_thread_delivery(self):
        subs, ids = spread_conns(self.port, 12)
        pub, _ = spread_conns(self.port, 2)
        for i, s in enumerate(subs):
            if i % 2:
                self.assertEqual(s.call("SUBSCRIBE", "ct"), [b"subscribe", b"ct", 1])
            else:
                self.assertEqual(s.call("PSUBSCRIBE", "c?"), [b"psubscribe", b"c?", 1])
        n = 200
        for i in range(n):
            # publishers on both threads, alternately
            self.assertEqual(pub[i % 2].call("PUBLISH", "ct", "m%d" % i), len(subs))
        for i, s in enumerate(subs):
            for j in range(n):
                r = s.reply()
                if i % 2:
                    self.assertEqual(r, [b"message", b"ct", b"m%d" % j])
                else:
                    self.assertEqual(r, [b"pmessage", b"c?", b"ct", b"m%d" % j])
        for c in subs + pub:
            c.close()

    def test_quit_ends_subscriptions_before_its_ok(self):
        # The differential script's last step, made to race: a subscriber
        # on one thread QUITs, and once its +OK is read a connection on
        # the other thread must count none of its subscriptions.
        for i in range(60):
            (s, obs), _ = spread_conns(self.port, 2)
            self.assertEqual(s.call("PSUBSCRIBE", "q.*"), [b"psubscribe", b"q.*", 1])
            self.assertEqual(s.call("SUBSCRIBE", "q1"), [b"subscribe", b"q1", 2])
            self.assertEqual(s.call("QUIT"), b"OK")
            self.assertEqual(obs.call("PUBSUB", "NUMPAT"), 0, "round %d" % i)
            self.assertEqual(obs.call("PUBSUB", "NUMSUB", "q1"), [b"q1", 0])
            s.close()
            obs.close()

    def test_slow_subscriber_closed_memory_bounded(self):
        skip_rss_bounds_under_tsan(self)
        c = Raw(self.port)
        self.assertEqual(c.call("CONFIG", "GET", "pubsub-max-output"),
                         [b"pubsub-max-output", b"1048576"])
        before = int(info(c, "stats")["client_output_buffer_limit_disconnections"])
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", self.port))
        slow.sendall(encode("SUBSCRIBE", "flood"))
        wait_for(lambda: c.call("PUBSUB", "NUMSUB", "flood")[1] == 1,
                 what="the subscription")
        rss0 = rss_kb(self.srv.proc.pid)
        msg = b"x" * 65536
        sent = 0
        # 48 MiB offered to a subscriber that reads nothing; it must be
        # dropped after about 1 MiB (plus socket buffers)
        for _ in range(768):
            sent += c.call("PUBLISH", "flood", msg)
        self.assertLess(sent, 768)
        wait_for(lambda: int(info(c, "stats")["client_output_buffer_limit_disconnections"])
                 > before, what="the disconnection to be counted")
        self.assertEqual(c.call("PUBSUB", "NUMSUB", "flood"), [b"flood", 0])
        grown = rss_kb(self.srv.proc.pid) - rss0
        self.assertLess(grown, 24 * 1024, "kvd grew %d KiB for one subscriber" % grown)
        slow.settimeout(10)
        data = b""
        try:
            while True:
                d = slow.recv(1 << 20)
                if not d:
                    break
                data += d
        except ConnectionResetError:
            pass
        slow.close()
        self.assertTrue(data.startswith(b"*3\r\n$9\r\nsubscribe\r\n"))
        c.close()

    def test_subscriptions_count_against_max_output(self):
        with Server(threads=1, resp=True, args=["--max-output", "1m"]) as srv:
            c = Raw(srv.resp_port)
            names = ["c%04d" % i + "y" * 1000 for i in range(600)]  # 600 KB
            c.send(encode("SUBSCRIBE", *names))
            for i in range(600):
                self.assertEqual(c.reply(), [b"subscribe", names[i].encode(), i + 1])
            more = ["d%04d" % i + "y" * 1000 for i in range(600)]
            r = c.call("SUBSCRIBE", *more)
            self.assertIsInstance(r, Error)
            self.assertIn("max-output", str(r))
            other = Raw(srv.resp_port)
            self.assertEqual(other.call("PUBSUB", "NUMSUB", more[0], names[0]),
                             [more[0].encode(), 0, names[0].encode(), 1])
            c.close()
            wait_for(lambda: other.call("PUBSUB", "NUMSUB", names[0])[1] == 0,
                     what="a closed subscriber's subscriptions to go")
            self.assertEqual(other.call("PUBSUB", "CHANNELS"), [])
            other.close()

    def test_redis_py_pubsub(self):
        r = redis.Redis(port=self.port)
        p = r.pubsub()
        p.subscribe("rp")
        p.psubscribe("r*")
        self.assertEqual(p.get_message(timeout=5)["type"], "subscribe")
        self.assertEqual(p.get_message(timeout=5)["type"], "psubscribe")
        self.assertEqual(r.publish("rp", "hi"), 2)
        m1 = p.get_message(timeout=5)
        m2 = p.get_message(timeout=5)
        self.assertEqual((m1["type"], m1["data"]), ("message", b"hi"))
        self.assertEqual((m2["type"], m2["pattern"], m2["data"]), ("pmessage", b"r*", b"hi"))
        self.assertIn(b"rp", r.pubsub_channels())
        self.assertEqual(r.pubsub_numpat(), 1)
        p.close()
        r.close()


class Auth(unittest.TestCase):
    def test_no_subscribe_before_auth(self):
        with Server(threads=2, resp=True, args=["--requirepass", "s3cret"]) as srv:
            c = Raw(srv.resp_port)
            for cmd in (["SUBSCRIBE", "a"], ["PSUBSCRIBE", "*"], ["PUBLISH", "a", "x"],
                        ["PUBSUB", "CHANNELS"]):
                r = c.call(*cmd)
                self.assertIsInstance(r, Error)
                self.assertTrue(str(r).startswith("NOAUTH"), r)
            self.assertEqual(c.call("AUTH", "s3cret"), b"OK")
            self.assertEqual(c.call("PUBSUB", "NUMPAT"), 0)
            self.assertEqual(c.call("SUBSCRIBE", "a"), [b"subscribe", b"a", 1])
            c.close()


class Config(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvd-config-")
        self.conf = os.path.join(self.tmp, "kvd.conf")
        self.text = ("# kvd test configuration\n"
                     "slowlog-max-len 5   \n"
                     "\n"
                     "  # an indented comment\n"
                     "slowlog-log-slower-than 10000\n"
                     "durability sync\n"
                     "slowlog-max-len 6\n")
        with open(self.conf, "w") as f:
            f.write(self.text)
        os.chmod(self.conf, 0o640)
        self.srv = Server(threads=2, resp=True, args=["--config", self.conf]).start()
        self.c = Raw(self.srv.resp_port)

    def tearDown(self):
        self.c.close()
        self.srv.stop()
        self.srv.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_set_get_rewrite_restart(self):
        c = self.c
        self.assertEqual(c.call("CONFIG", "GET", "slowlog-max-len"), [b"slowlog-max-len", b"6"])
        self.assertEqual(c.call("CONFIG", "SET", "slowlog-max-len", "77", "maxclients", "500"), b"OK")
        self.assertEqual(c.call("CONFIG", "GET", "slowlog-max-len"), [b"slowlog-max-len", b"77"])
        self.assertEqual(c.call("CONFIG", "GET", "maxclients"), [b"maxclients", b"500"])
        self.assertEqual(info(c, "clients")["maxclients"], "500")
        # the file is untouched until CONFIG REWRITE
        with open(self.conf) as f:
            self.assertEqual(f.read(), self.text)
        self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
        with open(self.conf) as f:
            text = f.read()
        self.assertEqual(text, "# kvd test configuration\n"
                               "slowlog-max-len 77\n"
                               "\n"
                               "  # an indented comment\n"
                               "slowlog-log-slower-than 10000\n"
                               "durability sync\n"
                               "max-clients 500\n")
        self.assertEqual(os.stat(self.conf).st_mode & 0o777, 0o640)
        self.assertEqual([n for n in os.listdir(self.tmp) if n != "kvd.conf"], [])
        self.c.close()
        self.srv.restart()
        self.c = Raw(self.srv.resp_port)
        self.assertEqual(self.c.call("CONFIG", "GET", "slowlog-max-len"), [b"slowlog-max-len", b"77"])
        self.assertEqual(self.c.call("CONFIG", "GET", "max-clients"), [b"max-clients", b"500"])

    def test_set_takes_effect(self):
        c = self.c
        self.assertEqual(c.call("CONFIG", "SET", "slowlog-log-slower-than", "0"), b"OK")
        c.call("SLOWLOG", "RESET")
        c.call("SET", "slowkey", "v")
        self.assertGreaterEqual(c.call("SLOWLOG", "LEN"), 1)
        self.assertEqual(c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1"), b"OK")
        self.assertEqual(c.call("CONFIG", "GET", "slowlog-log-slower-than"),
                         [b"slowlog-log-slower-than", b"-1"])
        c.call("SLOWLOG", "RESET")
        c.call("SET", "slowkey", "v")
        self.assertEqual(c.call("SLOWLOG", "LEN"), 0)

    def test_set_errors(self):
        c = self.c
        r = c.call("CONFIG", "SET", "port", "1234")
        self.assertIsInstance(r, Error)
        self.assertIn("'port'", str(r))
        self.assertIn("is read-only at run time", str(r))
        r = c.call("CONFIG", "SET", "requirepass", "x")
        self.assertIn("is read-only at run time", str(r))
        self.assertEqual(str(c.call("CONFIG", "SET", "nosuch", "1")),
                         "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
        r = c.call("CONFIG", "SET", "slowlog-max-len", "many")
        self.assertTrue(str(r).startswith("ERR CONFIG SET failed (possibly related to "
                                          "argument 'slowlog-max-len')"), r)
        self.assertEqual(str(c.call("CONFIG", "SET", "slowlog-max-len")),
                         "ERR wrong number of arguments for 'config|set' command")
        # all or nothing
        r = c.call("CONFIG", "SET", "slowlog-max-len", "9", "port", "1")
        self.assertIsInstance(r, Error)
        self.assertEqual(c.call("CONFIG", "GET", "slowlog-max-len"), [b"slowlog-max-len", b"6"])

    def test_resetstat(self):
        c = self.c
        for _ in range(20):
            c.call("SET", "k", "v")
        self.assertGreaterEqual(int(info(c, "stats")["total_commands_processed"]), 20)
        self.assertIn("cmdstat_set", info(c, "commandstats"))
        self.assertEqual(c.call("CONFIG", "RESETSTAT"), b"OK")
        self.assertLess(int(info(c, "stats")["total_commands_processed"]), 5)
        self.assertNotIn("cmdstat_set", info(c, "commandstats"))
        c.call("SET", "k", "v")
        self.assertEqual(info(c, "commandstats")["cmdstat_set"].split(",")[0], "calls=1")

    def test_sentinel_failover_transaction(self):
        """Sentinel's failover sends these in one MULTI (with SLAVEOF NO ONE,
        which belongs to replication); every one is queued and EXEC runs
        them in order."""
        c = self.c
        normal = Raw(self.srv.resp_port)
        self.assertEqual(normal.call("PING"), b"PONG")  # accepted by now
        sub = Raw(self.srv.resp_port)
        self.assertEqual(sub.call("SUBSCRIBE", "__sentinel__:hello"),
                         [b"subscribe", b"__sentinel__:hello", 1])
        self.assertEqual(c.call("CONFIG", "SET", "slowlog-max-len", "33"), b"OK")
        self.assertEqual(c.call("MULTI"), b"OK")
        for cmd in (["CONFIG", "REWRITE"], ["CLIENT", "KILL", "TYPE", "normal"],
                    ["CLIENT", "KILL", "TYPE", "pubsub"]):
            self.assertEqual(c.call(*cmd), b"QUEUED")
        self.assertEqual(c.call("EXEC"), [b"OK", 1, 1])
        self.assertTrue(normal.closed())
        self.assertTrue(sub.closed())
        self.assertEqual(c.call("PING"), b"PONG")
        with open(self.conf) as f:
            self.assertIn("slowlog-max-len 33\n", f.read())


class IdleTimeout(unittest.TestCase):
    def test_subscriber_not_closed_when_idle(self):
        """idle-timeout closes an idle connection, but not a subscriber,
        whose idleness is waiting for messages (as Redis's timeout)."""
        with Server(threads=2, resp=True, args=["--idle-timeout", "1"]) as srv:
            sub = Raw(srv.resp_port)
            self.assertEqual(sub.call("SUBSCRIBE", "quiet"), [b"subscribe", b"quiet", 1])
            idle = Raw(srv.resp_port)
            self.assertEqual(idle.call("PING"), b"PONG")
            self.assertTrue(idle.closed(timeout=15))
            time.sleep(1.5)  # past the timeout for the subscriber too
            pub = Raw(srv.resp_port)
            self.assertEqual(pub.call("PUBLISH", "quiet", "still here"), 1)
            self.assertEqual(sub.reply(), [b"message", b"quiet", b"still here"])
            for c in (sub, pub):
                c.close()


class NoConfigFile(unittest.TestCase):
    def test_rewrite_without_config_file(self):
        with Server(threads=1, resp=True) as srv:
            c = Raw(srv.resp_port)
            self.assertEqual(str(c.call("CONFIG", "REWRITE")),
                             "ERR The server is running without a config file")
            c.close()


class Clients(unittest.TestCase):
    def test_kill_by_type(self):
        with Server(threads=2, resp=True) as srv:
            me = Raw(srv.resp_port)
            subs = [Raw(srv.resp_port) for _ in range(3)]
            plain = [Raw(srv.resp_port) for _ in range(2)]
            for p in plain:
                self.assertEqual(p.call("PING"), b"PONG")  # accepted by now
            subs[0].call("SUBSCRIBE", "a")
            subs[1].call("PSUBSCRIBE", "*")
            subs[2].call("SUBSCRIBE", "b")
            self.assertEqual(subs[2].call("UNSUBSCRIBE"), [b"unsubscribe", b"b", 0])
            ids = [c.call("CLIENT", "ID") if i == 2 else None for i, c in enumerate(subs)]
            listed = me.call("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()
            rows = [dict(f.split("=", 1) for f in line.split(" ")) for line in listed]
            self.assertEqual(sorted((r["sub"], r["psub"], r["flags"]) for r in rows),
                             [("0", "1", "P"), ("1", "0", "P")])
            normal = me.call("CLIENT", "LIST", "TYPE", "normal").decode()
            self.assertEqual(normal.count("\n"), 4)  # me, plain, subs[2]
            self.assertIn("id=%d " % ids[2], normal)
            self.assertNotIn("flags=P", normal)
            for t in ("master", "replica", "slave"):
                self.assertEqual(me.call("CLIENT", "KILL", "TYPE", t), 0)
                self.assertEqual(me.call("CLIENT", "LIST", "TYPE", t), b"")
            self.assertEqual(str(me.call("CLIENT", "KILL", "TYPE", "bogus")),
                             "ERR Unknown client type")
            self.assertEqual(me.call("CLIENT", "KILL", "TYPE", "pubsub"), 2)
            self.assertTrue(subs[0].closed())
            self.assertTrue(subs[1].closed())
            wait_for(lambda: me.call("CLIENT", "LIST").count(b"\n") == 4,
                     what="the killed subscribers to go")
            # subs[2] unsubscribed from everything: a normal client again
            self.assertEqual(subs[2].call("PING"), b"PONG")
            cid = plain[0].call("CLIENT", "ID")
            self.assertEqual(me.call("CLIENT", "KILL", "TYPE", "normal", "ID", cid), 1)
            self.assertTrue(plain[0].closed())
            # killed is gone from CLIENT LIST at once, as in Redis, even
            # before its own io thread has closed it
            self.assertNotIn(b"id=%d " % cid, me.call("CLIENT", "LIST"))
            # Killed twice in one pipeline: the second finds it gone, as
            # CLIENT LIST does, though its io thread may not have closed it
            # yet (it once counted it again: 3 below instead of 2).
            cid = plain[1].call("CLIENT", "ID")
            me.send(encode("CLIENT", "KILL", "ID", str(cid)) +
                    encode("CLIENT", "KILL", "ID", str(cid)) +
                    encode("CLIENT", "KILL", "TYPE", "normal"))
            self.assertEqual([me.reply(), me.reply(), me.reply()], [1, 0, 1])
            self.assertTrue(plain[1].closed())
            self.assertTrue(subs[2].closed())
            self.assertEqual(me.call("PING"), b"PONG")
            self.assertEqual(me.call("CLIENT", "SETNAME", "me"), b"OK")
            self.assertEqual(me.call("CLIENT", "GETNAME"), b"me")
            self.assertEqual(me.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"), 1)
            self.assertTrue(me.closed())


class RunId(unittest.TestCase):
    def test_run_id(self):
        with Server(threads=1, resp=True) as srv:
            c = Raw(srv.resp_port)
            a = info(c, "server")["run_id"]
            self.assertRegex(a, r"^[0-9a-f]{40}$")
            self.assertEqual(info(c, "server")["run_id"], a)
            c.close()
            srv.restart()
            c = Raw(srv.resp_port)
            b = info(c, "server")["run_id"]
            c.close()
        self.assertRegex(b, r"^[0-9a-f]{40}$")
        self.assertNotEqual(a, b)


if __name__ == "__main__":
    main()
