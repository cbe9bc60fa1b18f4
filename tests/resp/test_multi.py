"""test_multi.py - MULTI, EXEC, DISCARD, WATCH and UNWATCH on kvd's RESP port,
through python3-redis as applications use them and through a raw socket.

What is proved: redis-py's pipeline() (a MULTI/EXEC transaction by default)
and transaction() with WATCH work; a WATCH retried under contention from
another client loses no increment; a transaction's reads see its own writes;
no reader on another connection sees a cross-shard EXEC half applied; a
watched key that expires, is flushed, deleted or stored by another client
makes EXEC answer nil, and one that is not touched does not.  Replies and
errors compared with redis-server 7.0 are in test_differential.py.
"""

import threading
import time
import unittest

from kvdtest import Server
from resputil import Error, Raw, main

try:
    import redis
except ImportError:  # exit 77: the prerequisite is missing
    redis = None


class Multi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if redis is None:
            raise unittest.SkipTest("python3-redis is not installed")
        # four shards: the keys below fall in several
        cls.srv = Server(threads=4, resp=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def client(self):
        return redis.Redis(port=self.srv.resp_port)

    def setUp(self):
        self.client().flushall()

    def test_pipeline_default_is_a_transaction(self):
        r = self.client()
        p = r.pipeline()
        p.set("a", "1").incr("a").get("a").mset({"b": "x", "c": "y"})
        p.mget("a", "b", "c").delete("b").exists("b")
        self.assertEqual(p.execute(),
                         [True, 2, b"2", True, [b"2", b"x", b"y"], 1, 0])

    def test_transaction_watch_under_contention(self):
        """Two clients add to one counter through WATCH/GET/MULTI/SET/EXEC
        while a third INCRs it: a lost update would leave it short."""
        n = 150
        errors = []

        def add_watched():
            r = self.client()
            try:
                for _ in range(n):
                    def fn(pipe):
                        v = int(pipe.get("counter") or 0)
                        pipe.multi()
                        pipe.set("counter", v + 1)
                    r.transaction(fn, "counter")
            except Exception as e:  # reported by the main thread
                errors.append(e)

        def add_incr():
            r = self.client()
            for _ in range(n):
                r.incr("counter")

        ts = [threading.Thread(target=add_watched) for _ in range(2)]
        ts.append(threading.Thread(target=add_incr))
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(int(self.client().get("counter")), 3 * n)

    def test_exec_is_isolated_across_shards(self):
        """EXEC sets twelve keys (several shards) to one value; a reader on
        another connection never sees two of them differ."""
        keys = ["iso%d" % i for i in range(12)]
        r = self.client()
        r.mset({k: "0" for k in keys})
        stop = threading.Event()
        torn = []

        def read():
            rr = self.client()
            while not stop.is_set():
                vals = rr.mget(keys)
                if len(set(vals)) != 1:
                    torn.append(vals)
                    return

        t = threading.Thread(target=read)
        t.start()
        try:
            for i in range(1, 300):
                p = r.pipeline()
                for k in keys:
                    p.set(k, str(i))
                p.execute()
        finally:
            stop.set()
            t.join(60)
        self.assertEqual(torn, [])
        self.assertEqual(set(r.mget(keys)), {b"299"})

    def test_watch_rules(self):
        a, b = Raw(self.srv.resp_port), Raw(self.srv.resp_port)
        # untouched: EXEC runs
        a.call("SET", "w", "1")
        self.assertEqual(a.call("WATCH", "w", "absent"), b"OK")
        b.call("GET", "w")
        a.call("MULTI")
        a.call("INCR", "w")
        self.assertEqual(a.call("EXEC"), [2])
        # stored by another client, even with the same value: nil
        for change in (["SET", "w", "2"], ["DEL", "w"], ["EXPIRE", "w", "100"],
                       ["FLUSHALL"], ["SET", "absent", "x"]):
            a.call("SET", "w", "2")
            a.call("DEL", "absent")
            a.call("WATCH", "w", "absent")
            b.call(*change)
            a.call("MULTI")
            a.call("GET", "w")
            self.assertIsNone(a.call("EXEC"), change)
        # a watched key that expires before EXEC: nil
        a.call("SET", "t", "1", "PX", "100")
        a.call("WATCH", "t")
        time.sleep(0.3)
        a.call("MULTI")
        a.call("GET", "t")
        self.assertIsNone(a.call("EXEC"))
        # FLUSHALL does not touch a watched key that did not exist
        a.call("WATCH", "nokey")
        b.call("FLUSHALL")
        a.call("MULTI")
        a.call("PING")
        self.assertEqual(a.call("EXEC"), [b"PONG"])
        # UNWATCH forgets; the transaction's own writes do not count
        a.call("WATCH", "w")
        a.call("UNWATCH")
        b.call("SET", "w", "9")
        a.call("MULTI")
        a.call("SET", "w", "10")
        a.call("GET", "w")
        self.assertEqual(a.call("EXEC"), [b"OK", b"10"])
        a.close()
        b.close()

    def test_redis_py_commands(self):
        """copy, rename, getex and incrbyfloat as redis-py calls them."""
        r = self.client()
        r.set("src", "v", ex=100)
        self.assertTrue(r.copy("src", "dst"))
        self.assertFalse(r.copy("src", "dst"))
        self.assertTrue(r.copy("src", "dst", replace=True))
        self.assertGreater(r.ttl("dst"), 90)
        self.assertTrue(r.rename("src", "moved"))
        self.assertIsNone(r.get("src"))
        self.assertEqual(r.get("moved"), b"v")
        self.assertGreater(r.ttl("moved"), 90)  # the TTL moved with it
        self.assertFalse(r.renamenx("moved", "dst"))
        self.assertEqual(r.getex("moved", persist=True), b"v")
        self.assertEqual(r.ttl("moved"), -1)
        self.assertEqual(r.getex("moved", px=5000), b"v")
        self.assertGreater(r.pttl("moved"), 4000)
        self.assertEqual(r.incrbyfloat("f", 10.5), 10.5)
        self.assertEqual(r.incrbyfloat("f", 7), 17.5)
        self.assertEqual(r.get("f"), b"17.5")
        self.assertEqual(r.incrbyfloat("f", -17.5), 0)
        self.assertEqual(r.get("f"), b"0")
        with self.assertRaises(redis.ResponseError):
            r.rename("nothing", "x")

    def test_redis_py_bitfield(self):
        """BITFIELD as redis-py builds it: SET answers the old value,
        INCRBY the new one, wrapped, saturated, or nil under FAIL (the
        field then unchanged); the key keeps its TTL; inside a pipeline's
        transaction too."""
        r = self.client()
        r.set("bf", "", ex=100)
        bf = r.bitfield("bf").set("u8", 0, 200).incrby("u8", 0, 100)
        bf = bf.overflow("SAT").incrby("u8", 0, 250).incrby("i8", 8, -200)
        bf = bf.overflow("FAIL").incrby("u8", 0, 1).get("u8", 0)
        self.assertEqual(bf.execute(), [0, 44, 255, -128, None, 255])
        self.assertEqual(r.get("bf"), b"\xff\x80")
        self.assertGreater(r.ttl("bf"), 90)
        p = r.pipeline()
        p.bitfield("bf").set("u4", "#1", 7).execute()
        p.get("bf")
        self.assertEqual(p.execute(), [[15], b"\xf7\x80"])
        self.assertEqual(r.execute_command("BITFIELD_RO", "bf", "GET", "u4", 4,
                                           "GET", "u4", 0), [7, 15])

    def test_errors_and_discard(self):
        a = Raw(self.srv.resp_port)
        self.assertEqual(a.call("MULTI"), b"OK")
        self.assertEqual(a.call("SET", "d", "1"), b"QUEUED")
        self.assertEqual(a.call("DISCARD"), b"OK")
        self.assertIsNone(a.call("GET", "d"))
        a.call("MULTI")
        a.call("SET", "d", "1")
        e = a.call("SET", "d")
        self.assertIsInstance(e, Error)
        self.assertEqual(str(a.call("EXEC")),
                         "EXECABORT Transaction discarded because of previous errors.")
        self.assertIsNone(a.call("GET", "d"))
        self.assertEqual(str(a.call("EXEC")), "ERR EXEC without MULTI")
        a.close()


if __name__ == "__main__":
    main()
