"""test_save.py - SAVE, BGSAVE, LASTSAVE and SHUTDOWN (docs/resp.md).

kvd has no snapshot file: SAVE and BGSAVE checkpoint every shard, so that
LMDB holds every acknowledged write; the tests read the shards' LMDB files
with mdb_dump (a separate process, LMDB's own tool) to see it there.
SHUTDOWN stops kvd as SIGTERM does: exit 0, "stopped cleanly", every
acknowledged write there after a restart.  Argument errors are compared
with redis-server 7.0's, side by side.
"""

import os
import subprocess
import time
import unittest

import kvdtest
from kvdtest import Server
from resputil import Error, Raw, cli, main, need, need_redis_70
from test_differential import start_redis

# No checkpoint of its own for the length of a test: what reaches LMDB is
# what SAVE or BGSAVE put there.
QUIET = ["--checkpoint-interval-ms", "3600000"]


def lmdb_keys(data_dir, nshards):
    """Every key the shards' LMDB files hold, read by mdb_dump."""
    need("mdb_dump")
    keys = set()
    for i in range(nshards):
        out = subprocess.run(["mdb_dump", "-p", "-s", "kv",
                              os.path.join(data_dir, "shard-%03d" % i)],
                             capture_output=True, check=True).stdout
        body = out.split(b"HEADER=END\n", 1)[1].splitlines()
        keys |= {line[1:] for line in body[0:-1:2]}
    return keys


class Save(unittest.TestCase):
    def fill(self, r, n=40):
        keys = [b"save:%d" % i for i in range(n)]
        for k in keys:
            self.assertEqual(r.call("SET", k, "v"), b"OK")
        return set(keys)

    def test_save_checkpoints_every_shard(self):
        with Server(threads=4, resp=True, args=QUIET) as srv:
            r = Raw(srv.resp_port)
            keys = self.fill(r)
            self.assertFalse(keys & lmdb_keys(srv.data_dir, 4))
            before = r.call("LASTSAVE")
            self.assertEqual(r.call("SAVE"), b"OK")
            self.assertLessEqual(keys, lmdb_keys(srv.data_dir, 4))
            self.assertGreaterEqual(r.call("LASTSAVE"), before)
            # in order behind the connection's pipelined writes
            r.send(b"SET save:late v\r\nSAVE\r\nGET save:late\r\n")
            self.assertEqual([r.reply() for _ in range(3)],
                             [b"OK", b"OK", b"v"])
            self.assertIn(b"save:late", lmdb_keys(srv.data_dir, 4))

    def test_bgsave_and_lastsave(self):
        with Server(threads=4, resp=True, args=QUIET) as srv:
            r = Raw(srv.resp_port)
            keys = self.fill(r)
            t0 = int(time.time())
            self.assertEqual(r.call("BGSAVE"), b"Background saving started")
            kvdtest.wait_for(lambda: b"rdb_bgsave_in_progress:0" in
                             r.call("INFO", "persistence"), what="BGSAVE")
            self.assertLessEqual(keys, lmdb_keys(srv.data_dir, 4))
            self.assertGreaterEqual(r.call("LASTSAVE"), t0)
            info = r.call("INFO", "persistence")
            self.assertIn(b"rdb_last_bgsave_status:ok", info)
            self.assertIn(b"rdb_last_save_time:%d" % r.call("LASTSAVE"), info)
            self.assertEqual(r.call("BGSAVE", "SCHEDULE")[:17],
                             b"Background saving")

    def test_shutdown_stops_cleanly(self):
        """redis-cli shutdown, the habit: kvd stops as on SIGTERM."""
        need("redis-cli")
        srv = Server(threads=2, resp=True, args=QUIET).start()
        try:
            r = Raw(srv.resp_port)
            keys = self.fill(r)
            # a pipelined write before it is answered and kept
            r.send(b"SET save:last v\r\nSHUTDOWN NOSAVE\r\nGET save:last\r\n")
            self.assertEqual(r.reply(), b"OK")
            self.assertTrue(r.closed())
            self.assertEqual(srv.proc.wait(30), 0)
            srv.proc = None
            log = srv.log_text()
            self.assertIn(b"SHUTDOWN from RESP connection", log)
            self.assertIn(b"stopped cleanly", log)
            # the clean stop checkpointed everything
            self.assertLessEqual(keys | {b"save:last"},
                                 lmdb_keys(srv.data_dir, 2))
            srv.start()
            rc, out, err = cli(srv.resp_port, "shutdown")
            self.assertEqual((rc, out), (0, b""), err)
            self.assertEqual(srv.proc.wait(30), 0)
            srv.proc = None
        finally:
            srv.stop()
            srv.cleanup()

    def test_same_errors_as_redis(self):
        need_redis_70()
        redis_proc = start_redis(kvdtest.free_port())
        try:
            with Server(threads=2, resp=True) as srv:
                k, rd = Raw(srv.resp_port), Raw(int(redis_proc.args[2]))
                for cmd in (["SHUTDOWN", "BOGUS"], ["SHUTDOWN", "NOSAVE", "SAVE"],
                            ["SHUTDOWN", "ABORT"], ["SHUTDOWN", "NOW", "ABORT"],
                            ["SHUTDOWN", "abort", "force"], ["SAVE", "x"],
                            ["BGSAVE", "x"], ["BGSAVE", "SCHEDULE", "x"],
                            ["LASTSAVE", "x"]):
                    self.assertEqual(repr(k.call(*cmd)), repr(rd.call(*cmd)), cmd)
                for c in (k, rd):
                    c.send(b"MULTI\r\nSHUTDOWN\r\nSAVE\r\nLASTSAVE\r\nEXEC\r\n")
                got = [[repr(c.reply()) for _ in range(5)] for c in (k, rd)]
                self.assertEqual(got[0], got[1])
                self.assertIn("not allowed inside a transaction", got[0][1])
                for c in (k, rd):
                    c.send(b"MULTI\r\nBGSAVE\r\nLASTSAVE\r\nEXEC\r\n")
                got = [[c.reply() for _ in range(4)] for c in (k, rd)]
                self.assertEqual(got[0][:3], got[1][:3])
                self.assertEqual(got[0][3][0], b"Background saving scheduled")
                self.assertEqual(srv.proc.poll(), None)
        finally:
            redis_proc.terminate()
            redis_proc.wait(10)

    def test_disabled(self):
        """SHUTDOWN is dangerous: disable-commands SHUTDOWN refuses it."""
        with Server(threads=1, resp=True,
                    args=["--disable-commands", "SHUTDOWN"]) as srv:
            r = Raw(srv.resp_port)
            self.assertIn("disable-commands", str(r.call("SHUTDOWN")))
            self.assertEqual(r.call("PING"), b"PONG")


if __name__ == "__main__":
    main()
