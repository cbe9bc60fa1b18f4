#!/usr/bin/env python3
"""test_replication.py - replicas on loopback (docs/replication.md).

Real kvd processes: a primary and replicas of it (--replicaof, REPLICAOF
on RESP), compared key by key with SCAN.  Each test names the promise of
docs/replication.md it checks.
"""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

from kvdtest import (OK, PUT, GET, WAIT, REPLICAOF, Server, main)
from kvdtest import REPLICA_READ_ONLY  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "resp"))
from resputil import Raw, Error  # noqa: E402
from replutil import dump, info, put_many, same, syncs, wait_until


class Replication(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()

    def server(self, *args, threads=2, **kw):
        s = Server(threads=threads, resp=True,
                   args=["--journal-segment-size", "1m"] + list(args), **kw)
        self.servers.append(s)
        return s

    def replica(self, primary, *args, threads=2):
        return self.server("--replicaof", "127.0.0.1", str(primary.port),
                           *args, threads=threads).start()

    def test_full_copy_then_partial_after_restart(self):
        """A new replica takes a full copy; restarted, it continues from
        its own positions (no second full copy)."""
        p = self.server().start()
        put_many(p, 0, 3000)
        r = self.replica(p)
        self.assertEqual(len(same(p, r)), 3000)
        self.assertIn(b"taking a full copy", r.log_text())
        self.assertEqual(syncs(p), (1, 0, 0))
        r.stop()
        put_many(p, 3000, 5000)
        r.start()
        self.assertEqual(len(same(p, r)), 5000)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 1)
        self.assertIn(b"continuing from offset", r.log_text())
        self.assertEqual(syncs(p), (1, 1, 0))
        r.stop()
        p.stop()

    def test_writes_during_full_copy_all_arrive(self):
        """100,000 writes made while the replica takes its full copy all
        reach it."""
        p = self.server().start()
        put_many(p, 0, 20000, tag=b"old")
        w = threading.Thread(target=put_many, args=(p, 0, 100000))
        w.start()
        r = self.replica(p)
        w.join()
        c = p.client()
        self.assertEqual(c.call(WAIT, 1, 30000), [OK, 1])
        c.close()
        got = dump(r)
        self.assertEqual(len(got), 100000)
        self.assertEqual(got, dump(p))
        r.stop()
        p.stop()

    def test_hashes(self):
        """A replica carries hashes: those made before it took its full
        copy and those changed while it streams (HSET, HINCRBY, HDEL of
        the last field, EXPIRE, RENAME), type, fields and expiry; it
        refuses HSET as any write."""
        p = self.server().start()
        rp = Raw(p.resp_port)

        def hashes(srv):
            r = Raw(srv.resp_port)
            out = {}
            for k in r.call("KEYS", "h*"):
                out[k] = (r.call("TYPE", k), sorted(r.call("HGETALL", k)),
                          r.call("TTL", k) > 0)
            r.close()
            return out

        for i in range(300):
            rp.call("HSET", "h%d" % i, "a", "%d" % i, "b", "x" * (i % 80))
        rp.call("EXPIRE", "h7", "3600")
        r = self.replica(p)
        for i in range(300):
            rp.call("HINCRBY", "h%d" % i, "n", "%d" % i)
            if i % 3 == 0:
                rp.call("HDEL", "h%d" % i, "a", "b")
        rp.call("HDEL", "h9", "n")  # its last field: the hash goes
        rp.call("RENAME", "h10", "h10r")
        rp.call("EXPIRE", "h11", "3600")
        c = p.client()
        self.assertEqual(c.call(WAIT, 1, 30000), [OK, 1])
        c.close()
        want = hashes(p)
        self.assertEqual(len(want), 299)
        self.assertEqual(want[b"h10r"][0], b"hash")
        wait_until(lambda: hashes(r) == want, 30, "the replica's hashes")
        rr = Raw(r.resp_port)
        self.assertIsInstance(rr.call("HSET", "h1", "x", "1"), Error)
        self.assertEqual(rr.call("HGET", "h1", "a"), b"1")
        rr.close()
        rp.close()
        r.stop()
        p.stop()

    def test_kill9_replica_midstream(self):
        """kill -9 of a replica while it streams: restarted, it continues
        (partial) and ends identical to its primary."""
        p = self.server().start()
        r = self.replica(p)
        w = threading.Thread(target=put_many, args=(p, 0, 60000))
        w.start()
        # Streaming, not still in its first full copy (records arrive in
        # that too: a kill then rightly takes the copy again).
        wait_until(lambda: b"streaming from the primary" in r.log_text() and dump(r),
                   20, "records to arrive by streaming")
        r.kill9()
        time.sleep(0.2)
        r.start()
        w.join()
        same(p, r)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 1)
        self.assertIn(b"continuing from offset", r.log_text())
        self.assertEqual(syncs(p), (1, 1, 0))
        r.stop()
        p.stop()

    def test_primary_restart(self):
        """A primary restarted on its port: its replica reconnects and
        continues without a full copy."""
        p = self.server().start()
        put_many(p, 0, 2000)
        r = self.replica(p)
        same(p, r)
        port = p.port
        p.stop()
        p.start(port=port)
        put_many(p, 2000, 4000)
        self.assertEqual(len(same(p, r)), 4000)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 1)
        # the restarted primary counts from zero: one continuation
        self.assertEqual(syncs(p), (0, 1, 0))
        r.stop()
        p.stop()

    def test_replica_of_replica(self):
        """A chain: the primary's writes reach a replica of its replica."""
        p = self.server().start()
        r1 = self.replica(p)
        r2 = self.replica(r1)
        put_many(p, 0, 3000)
        same(p, r2)
        self.assertEqual(info(r2)["master_port"], str(r1.port))
        for s in (r2, r1, p):
            s.stop()

    def test_promotion_sibling_continues(self):
        """REPLICAOF NO ONE promotes a replica (new replid, the old one as
        replid2); its sibling, pointed at it, continues without a full
        copy, and the new primary's writes reach it."""
        p = self.server().start()
        r1 = self.replica(p)
        r2 = self.replica(p)
        put_many(p, 0, 3000)
        same(p, r1)
        same(p, r2)
        old = info(r1)["master_replid"]
        p.kill9()
        c1 = Raw(r1.resp_port)
        self.assertEqual(c1.call("REPLICAOF", "NO", "ONE"), b"OK")
        i1 = info(r1)
        self.assertEqual(i1["role"], "master")
        self.assertEqual(i1["master_replid2"], old)
        self.assertNotEqual(i1["master_replid"], old)
        c2 = Raw(r2.resp_port)
        # SLAVEOF on the RESP port names the RESP port, as Sentinel's does
        self.assertEqual(c2.call("SLAVEOF", "127.0.0.1", str(r1.resp_port)),
                         b"OK")
        self.assertEqual(c1.call("SET", "after", "promotion"), b"OK")
        wait_until(lambda: c2.call("GET", "after") == b"promotion", 30,
                   "the new primary's write")
        self.assertEqual(r2.log_text().count(b"taking a full copy"), 1)
        self.assertEqual(syncs(r1), (0, 1, 0))  # by its old id (replid2)
        self.assertEqual(info(r2)["master_replid"], i1["master_replid"])
        self.assertEqual(info(r2)["master_port"], str(r1.resp_port))
        same(r1, r2)
        c1.close()
        c2.close()
        r2.stop()
        r1.stop()

    def test_readonly_refusals_and_reads(self):
        """A replica refuses writes (RESP -READONLY, native
        REPLICA_READ_ONLY) and serves reads."""
        p = self.server().start()
        r = self.replica(p)
        put_many(p, 0, 10)
        same(p, r)
        c = Raw(r.resp_port)
        e = c.call("SET", "a", "b")
        self.assertIsInstance(e, Error)
        self.assertEqual(str(e), "READONLY You can't write against a read "
                         "only replica.")
        self.assertEqual(c.call("GET", "k0000001"), b"v1")
        n = r.client()
        self.assertEqual(n.call(PUT, b"a", b"b")[0], REPLICA_READ_ONLY)
        self.assertEqual(n.call(GET, b"k0000002"), [OK, b"v2"])
        n.close()
        c.close()
        r.stop()
        p.stop()

    def test_wait_and_info(self):
        """WAIT counts the replicas that have the client's writes; INFO
        replication and ROLE show both sides as Redis does."""
        p = self.server().start()
        c = Raw(p.resp_port)
        self.assertEqual(c.call("SET", "a", "1"), b"OK")
        self.assertEqual(c.call("WAIT", "1", "100"), 0)
        r = self.replica(p)
        self.assertEqual(c.call("SET", "b", "2"), b"OK")
        self.assertEqual(c.call("WAIT", "1", "0"), 1)
        self.assertEqual(c.call("WAIT", "2", "200"), 1)
        ip = info(p)
        self.assertEqual(ip["role"], "master")
        self.assertEqual(ip["connected_slaves"], "1")
        self.assertTrue(ip["slave0"].startswith(
            "ip=127.0.0.1,port=%d,state=online,offset=" % r.resp_port),
            ip["slave0"])
        ir = info(r)
        self.assertEqual(ir["role"], "slave")
        self.assertEqual(ir["master_link_status"], "up")
        self.assertEqual(ir["master_replid"], ip["master_replid"])
        wait_until(lambda: info(r)["slave_repl_offset"] ==
                   info(p)["master_repl_offset"], 10, "offsets to meet")
        role = c.call("ROLE")
        self.assertEqual(role[0], b"master")
        self.assertEqual(role[2][0][1], str(r.resp_port).encode())
        cr = Raw(r.resp_port)
        self.assertEqual(cr.call("ROLE")[:3],
                         [b"slave", b"127.0.0.1", p.port])
        cr.close()
        c.close()
        r.stop()
        p.stop()

    def test_min_replicas_to_ack(self):
        """min-replicas-to-ack 1: writes are refused (NOREPLICAS) while no
        replica is connected, and once one is, a write's reply comes when
        the replica has it: it is there as soon as the primary answers."""
        p = self.server("--min-replicas-to-ack", "1",
                        "--min-replicas-max-lag", "5").start()
        c = Raw(p.resp_port)
        e = c.call("SET", "a", "1")
        self.assertIsInstance(e, Error)
        self.assertEqual(str(e), "NOREPLICAS Not enough good replicas to "
                         "write.")
        r = self.replica(p)
        # online: past its full copy (slaveN shows it from its REPLSYNC)
        wait_until(lambda: "state=online" in info(p).get("slave0", ""), 20,
                   "the replica")
        time.sleep(0.3)  # heard from within the lag, by the sender too
        cr = Raw(r.resp_port)
        for i in range(50):
            self.assertEqual(c.call("SET", "k%d" % i, str(i)), b"OK")
            self.assertEqual(cr.call("GET", "k%d" % i), str(i).encode())
        cr.close()
        c.close()
        r.stop()
        p.stop()

    def test_shard_count_must_match(self):
        """A replica with another shard count is refused, both counts
        named."""
        p = self.server(threads=2).start()
        r = self.replica(p, threads=3)
        wait_until(lambda: b"the replica has 3 shards and the primary 2"
                   in r.log_text(), 20, "the refusal")
        r.stop()
        p.stop()

    def test_shards_apart_from_threads(self):
        """The counts that must match are the shards', not the io
        threads': a primary of one shard on 2 io threads takes a replica of
        one shard on 3; the same replica made with the default (a shard a
        thread) is refused."""
        p = self.server("--shards", "1", threads=2).start()
        put_many(p, 0, 500)
        r = self.replica(p, "--shards", "1", threads=3)
        same(p, r)
        put_many(p, 500, 1000)
        same(p, r)
        bad = self.replica(p, threads=3)
        wait_until(lambda: b"the replica has 3 shards and the primary 1"
                   in bad.log_text(), 20, "the refusal")

    def test_resp_replicaof_takes_resp_port(self):
        """REPLICAOF on the RESP port and `replicaof HOST PORT resp` name
        the primary's RESP port (the replica finds the native one);
        master_port shows the port given; the primary's slaveN line and
        ROLE give the replica's RESP port, where Sentinel reaches it."""
        p = self.server().start()
        put_many(p, 0, 100)
        r1 = self.server().start()
        r2 = self.server("--replicaof", "127.0.0.1", str(p.resp_port),
                         "resp").start()
        c1 = Raw(r1.resp_port)
        self.assertEqual(c1.call("REPLICAOF", "127.0.0.1",
                                 str(p.resp_port)), b"OK")
        for r in (r1, r2):
            same(p, r)
            wait_until(lambda: info(r)["master_link_status"] == "up", 10,
                       "the link")
            self.assertEqual(info(r)["master_port"], str(p.resp_port))
        self.assertEqual(c1.call("ROLE")[:3],
                         [b"slave", b"127.0.0.1", p.resp_port])
        wait_until(lambda: info(p)["connected_slaves"] == "2", 10,
                   "both replicas")
        ip = info(p)
        ports = sorted(int(ip[k].split(",")[1].split("=")[1])
                       for k in ("slave0", "slave1"))
        self.assertEqual(ports, sorted([r1.resp_port, r2.resp_port]))
        put_many(p, 100, 200)
        same(p, r1)
        # the same primary again: the link stays (no new resync)
        self.assertEqual(c1.call("REPLICAOF", "127.0.0.1",
                                 str(p.resp_port)), b"OK")
        self.assertEqual(r1.log_text().count(b"replication: streaming"), 1)
        c1.close()
        for s in (r2, r1, p):
            s.stop()

    def test_resp_replicaof_with_password(self):
        """Given the RESP port of a primary with a password, the replica
        sends AUTH with primary-password before asking for the native
        port; with a wrong one it never links, and says why."""
        p = self.server("--requirepass", "pw-resp").start()
        good = self.server("--replicaof", "127.0.0.1", str(p.resp_port),
                           "resp", "--primary-password", "pw-resp").start()
        bad = self.server("--replicaof", "127.0.0.1", str(p.resp_port),
                          "resp", "--primary-password", "wrong").start()
        c = Raw(p.resp_port)
        self.assertEqual(c.call("AUTH", "pw-resp"), b"OK")
        self.assertEqual(c.call("SET", "a", "1"), b"OK")
        self.assertEqual(c.call("WAIT", "1", "20000"), 1)
        cg = Raw(good.resp_port)
        self.assertEqual(cg.call("GET", "a"), b"1")
        wait_until(lambda: b"the primary's RESP port answered" in
                   bad.log_text(), 20, "the refusal in the log")
        self.assertEqual(info(bad)["master_link_status"], "down")
        self.assertEqual(c.call("WAIT", "2", "300"), 1)
        c.close()
        cg.close()
        for s in (bad, good, p):
            s.stop()

    def test_resp_replicaof_over_tls(self):
        """With tls-replication, `replicaof HOST PORT resp` names the
        primary's tls-resp-port: the replica asks there over TLS for
        kvd_native_tls_port and links to that."""
        import tlscerts
        from kvdtest import free_port
        if not tlscerts.Certs.available():
            self.skipTest("the openssl command is missing")
        certs = tlscerts.Certs()
        self.addCleanup(certs.cleanup)
        tport, trport = free_port(), free_port()
        p = self.server(
            "--tls-port", str(tport), "--tls-resp-port", str(trport),
            "--tls-cert-file", certs.server_cert,
            "--tls-key-file", certs.server_key,
            "--tls-ca-cert-file", certs.ca,
            "--tls-auth-clients", "no").start()
        put_many(p, 0, 100)
        r = self.server("--replicaof", "127.0.0.1", str(trport), "resp",
                        "--tls-replication", "yes",
                        "--tls-ca-cert-file", certs.ca).start()
        same(p, r)
        self.assertEqual(info(r)["master_port"], str(trport))
        wait_until(lambda: info(r)["master_link_status"] == "up", 20,
                   "the link")
        put_many(p, 100, 200)
        same(p, r)
        r.stop()
        p.stop()

    def test_client_kill_type_master_and_replica(self):
        """CLIENT LIST shows a replica's link on the primary (flags=S,
        TYPE replica) and the link on the replica (flags=M, TYPE master);
        CLIENT KILL TYPE replica/slave and TYPE master close them (the
        replica connects again and keeps up), TYPE normal leaves them."""
        p = self.server().start()
        r = self.server("--replicaof", "127.0.0.1", str(p.resp_port),
                        "resp").start()
        cp, cr = Raw(p.resp_port), Raw(r.resp_port)
        wait_until(lambda: info(r)["master_link_status"] == "up", 20,
                   "the link")
        wait_until(lambda: b"flags=S" in cp.call("CLIENT", "LIST"), 10,
                   "the replica's link listed")
        lines = cp.call("CLIENT", "LIST", "TYPE", "replica").splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(b" flags=S ", lines[0])
        self.assertEqual(cp.call("CLIENT", "LIST", "TYPE", "master"), b"")
        self.assertNotIn(b"flags=S",
                         cp.call("CLIENT", "LIST", "TYPE", "normal"))
        ml = cr.call("CLIENT", "LIST", "TYPE", "master").splitlines()
        self.assertEqual(len(ml), 1, ml)
        self.assertIn(b" flags=M ", ml[0])
        self.assertIn(b"addr=127.0.0.1:%d " % p.port, ml[0])
        self.assertEqual(cr.call("CLIENT", "LIST", "TYPE", "replica"), b"")
        # TYPE normal (what Sentinel sends) keeps the replication links.
        # The INFO connections the waits above opened and closed may not
        # be gone from the lists yet (a full make test once killed one):
        # only each server's own caller first, which KILL skips.
        for c in (cp, cr):
            wait_until(lambda: len(c.call("CLIENT", "LIST", "TYPE",
                                          "normal").splitlines()) == 1, 10,
                       "closed connections gone from CLIENT LIST")
        self.assertEqual(cp.call("CLIENT", "KILL", "TYPE", "normal"), 0)
        self.assertEqual(cr.call("CLIENT", "KILL", "TYPE", "normal"), 0)
        # TYPE slave closes the replica's link; it comes back
        self.assertEqual(cp.call("CLIENT", "KILL", "TYPE", "slave"), 1)
        wait_until(lambda: r.log_text().count(b"replication: streaming")
                   >= 2, 20, "the replica to reconnect")
        # TYPE master on the replica drops its link; it reconnects
        wait_until(lambda: info(r)["master_link_status"] == "up", 20,
                   "the link")
        self.assertEqual(cr.call("CLIENT", "KILL", "TYPE", "master"), 1)
        wait_until(lambda: r.log_text().count(b"replication: streaming")
                   >= 3, 20, "the replica to reconnect")
        put_many(p, 0, 100)
        same(p, r)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 1)
        cp.close()
        cr.close()
        r.stop()
        p.stop()

    def test_native_replicaof(self):
        """The native REPLICAOF: a primary becomes a replica, and back."""
        p = self.server().start()
        put_many(p, 0, 100)
        r = self.server().start()
        n = r.client()
        self.assertEqual(n.call(REPLICAOF, b"127.0.0.1", p.port), [OK])
        same(p, r)
        self.assertEqual(n.call(REPLICAOF, None, 0), [OK])
        self.assertEqual(n.call(PUT, b"mine", b"1"), [OK])
        n.close()
        r.stop()
        p.stop()


class RoleRewrite(unittest.TestCase):
    """CONFIG REWRITE writes the live role as replicaof, as Redis's does,
    so that a restart keeps the role REPLICAOF gave (docs/replication.md,
    "Roles in the configuration file")."""

    def setUp(self):
        self.servers = []
        self.tmp = tempfile.mkdtemp(prefix="kvd-rolerw-")

    def tearDown(self):
        for s in self.servers:
            s.cleanup()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def server(self, text=None):
        """A server; with text, a --config file holding it."""
        args = ["--journal-segment-size", "1m"]
        if text is not None:
            conf = os.path.join(self.tmp, "kvd%d.conf" % len(self.servers))
            with open(conf, "w") as f:
                f.write(text)
            args = ["--config", conf] + args
        s = Server(threads=2, resp=True, args=args)
        s.conf = text is not None and conf
        self.servers.append(s)
        return s.start()

    def resp(self, s):
        """A RESP connection to s (its RESP listener may open just after
        the native one)."""
        deadline = time.time() + 10
        while True:
            try:
                return Raw(s.resp_port)
            except ConnectionRefusedError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    def read(self, s):
        with open(s.conf) as f:
            return f.read()

    def test_promoted_replica_stays_primary_after_restart(self):
        """REPLICAOF NO ONE + CONFIG REWRITE removes replicaof from the
        file (other lines kept): restarted, the server is a primary and
        takes writes."""
        p = self.server()
        put_many(p, 0, 500)
        r = self.server("# replica\nreplicaof 127.0.0.1 %d\n"
                        "slowlog-max-len 9\n" % p.port)
        wait_until(lambda: dump(r) == dump(p), 30, "the replica to match")
        c = self.resp(r)
        self.assertEqual(c.call("REPLICAOF", "NO", "ONE"), b"OK")
        self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
        c.close()
        self.assertEqual(self.read(r), "# replica\nslowlog-max-len 9\n")
        r.restart()
        c = self.resp(r)
        self.assertEqual(c.call("ROLE")[0], b"master")
        self.assertEqual(c.call("SET", "mine", "1"), b"OK")
        self.assertEqual(c.call("GET", "k0000499"), b"v499")
        c.close()
        # a second rewrite as a primary leaves the file as it is
        c = self.resp(r)
        self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
        c.close()
        self.assertEqual(self.read(r), "# replica\nslowlog-max-len 9\n")
        r.stop()
        p.stop()

    def test_reconfigured_server_follows_after_restart(self):
        """REPLICAOF on the RESP port + CONFIG REWRITE writes `replicaof
        HOST PORT resp` in place of the file's replicaof line: restarted,
        the server follows that primary and gets what it missed."""
        p = self.server()
        put_many(p, 0, 500)
        q = self.server("# q\nreplicaof 127.0.0.1 1\nreplicaof 127.0.0.1 2"
                        "\nslowlog-max-len 9\n")
        c = self.resp(q)
        self.assertEqual(c.call("REPLICAOF", "127.0.0.1", str(p.resp_port)),
                         b"OK")
        self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
        c.close()
        self.assertEqual(self.read(q),
                         "# q\nreplicaof 127.0.0.1 %d resp\n"
                         "slowlog-max-len 9\n" % p.resp_port)
        wait_until(lambda: dump(q) == dump(p), 30, "q to match")
        q.stop()
        put_many(p, 500, 1000)
        q.start()
        self.resp(q).close()
        i = info(q)
        self.assertEqual(i["role"], "slave")
        self.assertEqual(i["master_port"], str(p.resp_port))
        wait_until(lambda: dump(q) == dump(p), 30, "q to catch up")
        self.assertEqual(len(dump(q)), 1000)
        q.stop()
        p.stop()

    def test_primary_rewrite_appends_replicaof(self):
        """A primary whose file has no replicaof, told native REPLICAOF
        HOST PORT: CONFIG REWRITE appends `replicaof HOST PORT`."""
        p = self.server()
        q = self.server("threads 2\n")
        n = q.client()
        self.assertEqual(n.call(REPLICAOF, b"127.0.0.1", p.port), [OK])
        n.close()
        c = self.resp(q)
        self.assertEqual(c.call("CONFIG", "REWRITE"), b"OK")
        c.close()
        self.assertEqual(self.read(q), "threads 2\nreplicaof 127.0.0.1 %d\n"
                         % p.port)
        q.restart()
        self.resp(q).close()
        self.assertEqual(info(q)["role"], "slave")
        q.stop()
        p.stop()


if __name__ == "__main__":
    main()
