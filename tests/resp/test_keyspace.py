"""test_keyspace.py - keyspace notifications (notify-keyspace-events,
docs/resp.md "Keyspace notifications"), side by side with redis-server 7.0.

A subscriber on each server (PSUBSCRIBE __key*__:*) sees the events of the
same command sequence; the lists must be equal, names and order.  A
sequence ends with a PUBLISH on a mark channel the subscriber also
listens to: every event of the sequence comes before the mark, since both
servers publish a write's events before they answer it.  kvd runs one
shard here, so that the events of a multi-key command come in argument
order, as in Redis (test_shards: across shards they come shard by shard).

Also: every class letter and K/E combination, CONFIG SET/GET and their
errors as Redis's, the option in the config file and on the command line,
"expired" events from the reaper, events of native-protocol writes (a
native PUT is a "set", as the RESP command it matches), and nothing at
all while the option is empty, the default.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import kvdtest
from kvdtest import *  # noqa: F401,F403  (Server, opcodes, statuses)
from resputil import Raw, main, need_redis_70
from test_differential import start_redis

# Command sequences.  "sleep S" waits S seconds (a PX 1 key expiring);
# "expired K" waits until the subscriber saw K's "expired" event (an
# expiry the reaper, or Redis's active expiry, reports in its own time).
SEQS = [
    ["SET k v"], ["SET k v EX 100"], ["SET k v KEEPTTL"], ["SET k v PXAT 1", "expired k"],
    ["SET k v PX 1", "sleep 0.02", "SET k w"],
    ["SETEX k 10 v"], ["PSETEX k 10000 v"], ["SETNX k v", "SETNX k w"],
    ["MSET a 1 b 2"], ["MSETNX a 1 b 2", "MSETNX a 1 c 3"],
    ["DEL a b", "SET a 1", "DEL a b"], ["SET a 1", "UNLINK a"],
    ["INCR k", "DECR k", "INCRBY k 5", "DECRBY k 2", "INCRBYFLOAT k 1.5",
     "APPEND k x"],
    ["SET k v", "EXPIRE k 10", "PERSIST k", "PERSIST k", "EXPIRE k -1"],
    ["SET k v", "PEXPIRE k 100000", "EXPIREAT k 1", "SET k v", "PEXPIREAT k 1"],
    ["SET k v", "EXPIRE k 10 GT", "EXPIRE k 20 NX", "EXPIRE k 30 XX",
     "EXPIRE k 1 GT", "EXPIRE k 0 XX"],
    ["SET k v", "GETEX k EX 10", "GETEX k PERSIST", "GETEX k", "GETEX k PXAT 1"],
    ["SET k v", "RENAME k j", "SET k 1", "RENAME k j", "RENAMENX j k",
     "RENAMENX k k"],
    ["SET k v", "COPY k j", "COPY k j", "COPY k j REPLACE"],
    ["SETRANGE k 0 x", "SETRANGE k 0 ''", "SETBIT k 1 1", "SETBIT k 1 1",
     "SETBIT k 100 0"],
    ["BITFIELD k SET u8 0 1", "BITFIELD k GET u8 0",
     "BITFIELD k OVERFLOW FAIL INCRBY u2 0 8"],
    ["SET s x", "BITOP OR d s", "BITOP OR d nokey", "BITOP NOT d s"],
    ["SET k 1", "GETSET k 2", "GETDEL k", "GETDEL k", "SET k v NX",
     "SET k v NX", "SET k w XX", "SET k w XX GET"],
    ["SET k v", "FLUSHALL", "SET k v", "FLUSHDB"],
    ["INCRBY k 0", "SET k x", "INCR k", "APPEND k ''"],
    ["SET k v PX 1", "sleep 0.02", "DEL k"],
    ["SET k v PX 1", "sleep 0.02", "INCR k"],
    ["SET k v PX 1", "sleep 0.02", "SETRANGE k 0 x"],
    ["SET k v PX 1", "sleep 0.02", "APPEND k x"],
    ["SET k v PX 1", "sleep 0.02", "SET k w NX"],
    ["SET j v", "SET k v PX 1", "sleep 0.02", "RENAME j k"],
    ["SET j v", "SET k v PX 1", "sleep 0.02", "COPY j k"],
    ["MULTI", "SET k 1", "INCR k", "DEL k", "EXEC"],
    # hashes: "new", then the command's (class h); HDEL of the last field
    # "hdel" then "del"; nothing for a write that changed nothing
    ["HSET h a 1 b 2", "HSET h a 3", "HMSET h c 4", "HSETNX h a 1", "HSETNX h d 1",
     "HDEL h x", "HDEL h a b", "HDEL h c d"],
    ["HINCRBY h n 1", "HINCRBYFLOAT h f 1.5", "HINCRBY h n x", "HINCRBY h f 1",
     "SET s v", "HSET s a 1", "HINCRBY s a 1"],
    ["HSET h a 1", "EXPIRE h 100", "PERSIST h", "RENAME h j", "COPY j k", "DEL j k"],
    ["HSET h a 1", "MULTI", "HSET h b 2", "HDEL h a b", "HINCRBY h n 2", "EXEC"],
    # 10 ms, not 1: redis-server deletes at once (a del event, not
    # expire) a PEXPIRE whose time its clock has passed by the check, which
    # a millisecond's tick within the command decided
    ["HSET h a 1", "PEXPIRE h 10", "sleep 0.05", "HSET h b 2"],
    ["HSET h a 1", "PEXPIRE h 10", "sleep 0.05", "HDEL h a"],
    ["HSET h a 1", "SET h v", "HSET j a 1", "DEL j"],
]

FLAGS = ["KEA", "KEAn", "Kg", "E$", "Ex", "K$x", "gE", "Kn", "KEg$xn", "AK", "Kh", "Eh",
         "KEhg"]


def kvd_rc(args):
    """kvd's exit status for args (--test-config)."""
    return subprocess.run([kvdtest.KVD_BIN] + args, capture_output=True,
                          timeout=20).returncode


class Subscriber:
    """A connection subscribed to every keyspace event and to a mark."""

    def __init__(self, port):
        self.c = Raw(port)
        self.c.send(b"PSUBSCRIBE __key*__:*\r\nSUBSCRIBE ks-mark\r\n")
        self.c.reply()
        self.c.reply()
        self.n = 0

    def message(self):
        m = self.c.reply()
        return (m[2], m[3]) if m[0] == b"pmessage" else (m[1], m[2])

    def until(self, pub, stop):
        """The events read until stop(event) is true (bounded)."""
        got = []
        self.c.sock.settimeout(10)
        while True:
            ch, data = self.message()
            if ch == b"ks-mark":
                continue
            got.append((ch, data))
            if stop((ch, data)):
                return got

    def drain(self, pub):
        """Every event before a mark published now on pub."""
        self.n += 1
        mark = b"%d" % self.n
        self.assert_int(pub.call("PUBLISH", "ks-mark", mark))
        got = []
        while True:
            ch, data = self.message()
            if ch == b"ks-mark":
                if data == mark:
                    return got
                continue
            got.append((ch, data))

    @staticmethod
    def assert_int(x):
        assert isinstance(x, int), x


def run(port, flags, seq, sub=None):
    """The events seq makes on the server at port with flags set."""
    c = Raw(port)
    own = sub is None
    sub = sub or Subscriber(port)
    assert c.call("CONFIG", "SET", "notify-keyspace-events", flags) == b"OK"
    c.call("FLUSHALL")
    sub.drain(c)
    got = []
    for cmd in seq:
        if cmd.startswith("sleep "):
            time.sleep(float(cmd.split()[1]))
        elif cmd.startswith("expired "):
            key = cmd.split()[1].encode()
            # Redis publishes the keyspace event, then the keyevent one:
            # wait for the last that flags ask for, as kvd's reaper sends
            # the two apart and a mark published between them would
            # otherwise end the drain before the second.
            last = ((b"__keyevent@0__:expired", key) if "E" in flags else
                    (b"__keyspace@0__:" + key, b"expired"))
            got += sub.until(c, lambda e: e == last)
        else:
            c.send(cmd.encode() + b"\r\n")
            c.reply()
    got += sub.drain(c)
    c.call("CONFIG", "SET", "notify-keyspace-events", "")
    c.close()
    if own:
        sub.c.close()
    return got


class Keyspace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need_redis_70()
        cls.redis_proc = start_redis(kvdtest.free_port())
        cls.redis_port = int(cls.redis_proc.args[2])
        cls.srv = Server(threads=1, resp=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        cls.redis_proc.terminate()
        cls.redis_proc.wait(10)
        shutil.rmtree(os.path.dirname(cls.redis_proc.args[-1]),
                      ignore_errors=True)

    def test_same_events_as_redis(self):
        """Every write command, every class: the same events, in the same
        order, as redis-server 7.0 publishes (expired keys found by a
        write, the reaper's expiry, RENAME's and COPY's "new" included)."""
        ksub, rsub = Subscriber(self.srv.resp_port), Subscriber(self.redis_port)
        for flags in FLAGS:
            for seq in SEQS:
                if "expired" in " ".join(seq) and "x" not in flags and \
                        "A" not in flags:
                    continue  # nothing to wait for
                k = run(self.srv.resp_port, flags, seq, ksub)
                r = run(self.redis_port, flags, seq, rsub)
                self.assertEqual(k, r, (flags, seq))

    def test_config(self):
        """CONFIG SET and GET of notify-keyspace-events: the same replies
        as Redis 7.0's, errors and Redis's way of writing classes back
        included."""
        for value in ("KEA", "Kg$x", "AKEmn", "gKEn", "Ex", "A", "", "KE",
                      "lshzted", "bogus", "K E", "AE$"):
            got = []
            for port in (self.srv.resp_port, self.redis_port):
                c = Raw(port)
                got.append((repr(c.call("CONFIG", "SET",
                                        "notify-keyspace-events", value)),
                            c.call("CONFIG", "GET", "notify-keyspace-events"),
                            c.call("CONFIG", "GET", "notify*")))
                c.call("CONFIG", "SET", "notify-keyspace-events", "")
                c.close()
            self.assertEqual(got[0], got[1], value)

    def test_off_publishes_nothing(self):
        """Empty (the default): no event, whatever is written."""
        c, sub = Raw(self.srv.resp_port), Subscriber(self.srv.resp_port)
        self.assertEqual(c.call("CONFIG", "GET", "notify-keyspace-events"),
                         [b"notify-keyspace-events", b""])
        for cmd in ("SET k v", "INCR n", "DEL k", "SET e v PX 1",
                    "RENAME n m", "SETRANGE r 0 x"):
            c.send(cmd.encode() + b"\r\n")
            c.reply()
        time.sleep(0.05)  # e expires; a write then finds it expired
        c.call("SET", "e", "w")
        self.assertEqual(sub.drain(c), [])

    def test_native_writes(self):
        """A native write notifies as the RESP command it matches: the
        same events from kvd's native port as from Redis's RESP."""
        pairs = [
            ([(PUT, b"k", b"v")], ["SET k v"]),
            ([(PUT, b"k", b"v", 100000)], ["SET k v PX 100000"]),
            ([(PUT, b"k", b"v"), (PUT, b"k", b"w", 0, PUT_NX)],
             ["SET k v", "SET k w NX"]),
            ([(MPUT, 0, b"a", b"1", b"b", b"2")], ["MSET a 1 b 2"]),
            ([(PUT, b"a", b"1"), (MDEL, b"a", b"b"), (DEL, b"a")],
             ["SET a 1", "DEL a b", "DEL a"]),
            ([(INCR, b"n", 2), (APPEND, b"n", b"x")],
             ["INCRBY n 2", "APPEND n x"]),
            ([(PUT, b"k", b"v"), (EXPIRE, b"k", 100000), (EXPIRE, b"k", 0)],
             ["SET k v", "PEXPIRE k 100000", "PERSIST k"]),
            ([(PUT, b"k", b"v"), (GETDEL, b"k")], ["SET k v", "GETDEL k"]),
            ([(PUT, b"k", b"v"), (RENAME, b"k", b"j"), (COPY, b"j", b"k")],
             ["SET k v", "RENAME k j", "COPY j k"]),
            ([(SETRANGE, b"k", 1, b"x"), (SETBIT, b"k", 0, 1),
              (INCRBYFLOAT, b"f", b"1.5")],
             ["SETRANGE k 1 x", "SETBIT k 0 1", "INCRBYFLOAT f 1.5"]),
            ([(PUT, b"s", b"x"), (BITOP, BITOP_OR, b"d", b"s"),
              (GETEX, b"d", 100000)],
             ["SET s x", "BITOP OR d s", "GETEX d PX 100000"]),
            ([(TXN, None, [SETRANGE, b"k", 0, b"x"], [INCR, b"n", 1])],
             ["SETRANGE k 0 x", "INCR n"]),
        ]
        ksub = Subscriber(self.srv.resp_port)
        native = self.srv.client()
        for reqs, cmds in pairs:
            c = Raw(self.srv.resp_port)
            c.call("CONFIG", "SET", "notify-keyspace-events", "KEAn")
            c.call("FLUSHALL")
            ksub.drain(c)
            for req in reqs:
                self.assertLess(native.call(*req)[0], MALFORMED, req)
            got = ksub.drain(c)
            c.call("CONFIG", "SET", "notify-keyspace-events", "")
            c.close()
            self.assertEqual(got, run(self.redis_port, "KEAn", cmds), cmds)

    def test_reaper_expired(self):
        """A key nobody touches again: the reaper reports it expired."""
        c, sub = Raw(self.srv.resp_port), Subscriber(self.srv.resp_port)
        c.call("CONFIG", "SET", "notify-keyspace-events", "Ex")
        c.call("SET", "gone", "v", "PX", "20")
        got = sub.until(c, lambda e: e[0] == b"__keyevent@0__:expired")
        self.assertEqual(got, [(b"__keyevent@0__:expired", b"gone")])
        c.call("CONFIG", "SET", "notify-keyspace-events", "")

    def test_shards(self):
        """With several shards every event still comes, once: a multi-key
        command's shard by shard."""
        with Server(threads=4, resp=True,
                    args=["--notify-keyspace-events", "KEA"]) as srv:
            c, sub = Raw(srv.resp_port), Subscriber(srv.resp_port)
            keys = ["s%d" % i for i in range(40)]
            c.call("MSET", *[x for k in keys for x in (k, "v")])
            c.call("DEL", *keys)
            got = sub.drain(c)
            want = [(b"__keyspace@0__:%s" % k.encode(), ev) for ev in
                    (b"set", b"del") for k in keys] + \
                   [(b"__keyevent@0__:%s" % ev, k.encode()) for ev in
                    (b"set", b"del") for k in keys]
            self.assertEqual(sorted(got), sorted(want))
            # each key's set before its del
            for k in keys:
                mine = [e for e in got if e[1] == k.encode()]
                self.assertEqual(mine, [(b"__keyevent@0__:set", k.encode()),
                                        (b"__keyevent@0__:del", k.encode())])

    def test_config_file_flag_and_reload(self):
        """In the config file (an empty value as Redis writes it, "") and
        on the command line; CONFIG REWRITE keeps it; SIGHUP reloads it."""
        tmp = tempfile.mkdtemp(prefix="kvd-ks-")
        self.addCleanup(shutil.rmtree, tmp, True)
        conf = os.path.join(tmp, "kvd.conf")
        with open(conf, "w") as f:
            f.write('notify-keyspace-events ""\n')
        self.assertEqual(kvd_rc(["--config", conf, "--test-config"]), 0)
        self.assertEqual(kvd_rc(["--notify-keyspace-events", "KEQ",
                                  "--test-config"]), 2)
        with Server(threads=1, resp=True, args=["--config", conf]) as srv:
            c = Raw(srv.resp_port)
            self.assertEqual(c.call("CONFIG", "GET", "notify-keyspace-events")[1], b"")
            self.assertEqual(c.call("CONFIG", "SET", "notify-keyspace-events", "gKE"), b"OK")
            self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
            with open(conf) as f:
                self.assertEqual(f.read(), "notify-keyspace-events gKE\n")
            with open(conf, "w") as f:
                f.write("notify-keyspace-events Ex\n")
            srv.proc.send_signal(signal.SIGHUP)
            kvdtest.wait_for(lambda: c.call("CONFIG", "GET", "notify-keyspace-events")[1]
                             == b"xE", what="SIGHUP's reload")
        with Server(threads=1, resp=True,
                    args=["--notify-keyspace-events", "KEA"]) as srv:
            c, sub = Raw(srv.resp_port), Subscriber(srv.resp_port)
            c.call("SET", "k", "v")
            self.assertEqual(sub.drain(c), [(b"__keyspace@0__:k", b"set"),
                                            (b"__keyevent@0__:set", b"k")])


if __name__ == "__main__":
    main()
