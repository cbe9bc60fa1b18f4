#!/usr/bin/env python3
"""test_replication_faults.py - replication under faults (docs/replication.md).

Real kvd processes on loopback: a full copy cut short by kill -9 of the
replica, a replica that stops acknowledging under --min-replicas-to-ack,
the replica link over TLS (and a wrong CA), and a replica that was away
within and beyond --repl-backlog-size.  test_replication.py has the
normal cases; each test here names the promise it checks.

Every primary here has a password, and only its own replica knows it: the
machine runs other replication tests, whose replicas keep calling a port
their primary had, and one that got the same port from free_port() would
attach here too, acknowledge writes and take full copies.
"""

import glob
import os
import signal
import sys
import unittest

import base64

from kvdtest import OK, WAIT, Server, free_port, http_get, main

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "resp"))
from resputil import Raw, Error  # noqa: E402
from replutil import (dump, info, ncli, put_many, rcli, same, syncs,
                      wait_until)


PW = "repl-faults-pw"


def stop_process(proc):
    """SIGSTOP proc and wait until every thread of it is stopped: kill()
    returns before a busy thread on the other core has stopped, and a
    replica still running for that moment acknowledges the next write."""
    proc.send_signal(signal.SIGSTOP)

    def stopped():
        for st in glob.glob("/proc/%d/task/*/stat" % proc.pid):
            try:
                with open(st) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state not in ("T", "t"):
                return False
        return True
    wait_until(stopped, 10, "the replica to stop")


def metric_repl(srv, mport):
    """srv's /metrics kvd_replication_* samples: {name{labels}: value}."""
    auth = b"Basic " + base64.b64encode(b"x:" + srv.pw.encode())
    head, body = http_get(mport, b"/metrics", auth)
    assert " 200 " in head.splitlines()[0], head
    return {l.split()[0]: float(l.split()[1]) for l in body.splitlines()
            if l.startswith("kvd_replication_")}


def metric_syncs(srv, mport):
    """kvd_replication_syncs_total by kind from srv's /metrics."""
    return {k.split("\"")[1]: int(v) for k, v in metric_repl(srv, mport).items()
            if k.startswith("kvd_replication_syncs_total{kind=\"")}


class Faults(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            if s.proc:
                try:
                    s.proc.send_signal(signal.SIGCONT)
                except OSError:
                    pass
            s.cleanup()

    def server(self, *args, threads=2):
        """A primary, with the password."""
        s = Server(threads=threads, resp=True,
                   args=["--journal-segment-size", "1m",
                         "--requirepass", PW] + list(args))
        s.pw = PW
        self.servers.append(s)
        return s

    def replica(self, primary, *args):
        s = Server(threads=2, resp=True,
                   args=["--journal-segment-size", "1m",
                         "--replicaof", "127.0.0.1", str(primary.port),
                         "--primary-password", PW] + list(args))
        self.servers.append(s)
        return s.start()

    def test_full_copy_cut_short_starts_over(self):
        """kill -9 of a replica in the middle of its full copy: restarted,
        it empties its shards rather than serve part of the copy (even
        with the primary unreachable), then takes a new full copy and ends
        identical to the primary."""
        p = self.server().start()
        put_many(p, 0, 150000, size=400)
        r = self.replica(p)
        # freeze it as soon as the copy starts, so that it is mid-copy
        wait_until(lambda: b"taking a full copy" in r.log_text(), 20,
                   "the full copy to start")
        stop_process(r.proc)
        self.assertNotIn(b"full copy done", r.log_text(),
                         "the copy ended before the replica was stopped")
        self.assertTrue(os.path.exists(os.path.join(
            r.data_dir, "replication-full-copy")))
        r.kill9()
        port = p.port
        p.stop()
        r.start()
        wait_until(lambda: b"was cut short" in r.log_text(), 10,
                   "the cut-short copy to be noticed")
        self.assertEqual(dump(r), [], "part of a full copy is served")
        self.assertEqual(info(r)["master_link_status"], "down")
        p.start(port=port)
        put_many(p, 150000, 151000, size=400)
        self.assertEqual(len(same(p, r, 40)), 151000)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 2)
        self.assertFalse(os.path.exists(os.path.join(
            r.data_dir, "replication-full-copy")))
        r.stop()
        p.stop()

    def test_min_replicas_replica_stops_acking(self):
        """min-replicas-to-ack 1 and min-replicas-max-lag 2: a write held
        for a replica that stopped acknowledging (SIGSTOP) is answered
        NOREPLICAS once the lag is past, later writes are refused at once,
        and after SIGCONT writes are acknowledged again; the refused
        held write is on the primary and reaches the replica."""
        p = self.server("--min-replicas-to-ack", "1",
                        "--min-replicas-max-lag", "2").start()
        r = self.replica(p)
        wait_until(lambda: info(p)["connected_slaves"] == "1", 20,
                   "the replica")
        c = rcli(p, timeout=30)
        wait_until(lambda: c.call("SET", "before", "1") == b"OK", 10,
                   "a first acknowledged write")
        stop_process(r.proc)
        e = c.call("SET", "held", "1")
        self.assertIsInstance(e, Error)
        self.assertEqual(str(e), "NOREPLICAS Not enough good replicas to "
                         "write.")
        e = c.call("SET", "refused", "1")
        self.assertIsInstance(e, Error)
        self.assertTrue(str(e).startswith("NOREPLICAS"), str(e))
        self.assertEqual(c.call("GET", "held"), b"1")
        r.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: c.call("SET", "after", "1") == b"OK", 20,
                   "writes to be acknowledged again")
        cr = Raw(r.resp_port)
        self.assertEqual(cr.call("GET", "after"), b"1")
        self.assertEqual(cr.call("GET", "held"), b"1")
        cr.close()
        c.close()
        r.stop()
        p.stop()

    def test_backlog_within_partial_beyond_full(self):
        """A replica away while its primary writes less than
        repl-backlog-size continues with a partial resync; away while it
        writes more (and checkpoints recycle the journal), it takes a full
        copy, and ends identical either way."""
        mport = free_port()
        p = self.server("--repl-backlog-size", "2m",
                        "--checkpoint-interval-ms", "50",
                        "--metrics-port", str(mport)).start()
        self.assertEqual(syncs(p), (0, 0, 0))
        put_many(p, 0, 1000)
        r = self.replica(p)
        same(p, r, 40)
        full = b"takes a full copy"
        self.assertEqual(p.log_text().count(full), 1)
        # a new replica's first sync is a full one, not a refused partial
        self.assertEqual(syncs(p), (1, 0, 0))
        # within: a few hundred KiB while it is away
        r.stop()
        put_many(p, 1000, 2000, size=100)
        r.start()
        same(p, r, 40)
        self.assertEqual(p.log_text().count(full), 1)
        self.assertEqual(r.log_text().count(b"continuing from offset"), 1)
        self.assertEqual(syncs(p), (1, 1, 0))
        # beyond: 12 MB across two shards, 6 segments each, while the
        # backlog keeps 2
        r.stop()
        put_many(p, 2000, 32000, size=400)
        shards = glob.glob(os.path.join(p.data_dir, "shard-*", ""))
        # segments in use only: recycled ones kept as spares
        # (journal-spare-N.kvj) hold no records (it used to count them,
        # and timed out when two spares sat beside two segments in use)
        def in_use(d):
            return [f for f in glob.glob(os.path.join(d, "journal-*.kvj"))
                    if "spare" not in os.path.basename(f)]
        try:
            wait_until(lambda: all(len(in_use(d)) <= 3 for d in shards), 60,
                "the journal to be recycled down to the backlog")
        except AssertionError:
            print("journal files left:",
                  [sorted(os.listdir(d)) for d in shards], flush=True)
            raise
        r.start()
        self.assertEqual(len(same(p, r, 40)), 32000)
        self.assertEqual(p.log_text().count(full), 2)
        self.assertEqual(r.log_text().count(b"taking a full copy"), 2)
        # beyond the backlog: the partial resync it asked for is refused
        self.assertEqual(syncs(p), (2, 1, 1))
        self.assertEqual(metric_syncs(p, mport),
                         {"full": 2, "partial_ok": 1, "partial_err": 1})
        # the other replication metrics operations.md lists
        m = metric_repl(p, mport)
        self.assertEqual(m['kvd_replication_role{role="primary"}'], 1)
        self.assertEqual(m["kvd_replication_offset"],
                         int(info(p)["master_repl_offset"]))
        self.assertEqual(m["kvd_replication_replicas"], 1)
        self.assertIn("kvd_replication_lag_records", m)
        self.assertIn("kvd_replication_lag_seconds", m)
        # CONFIG RESETSTAT zeroes INFO's, not the monotonic counters
        cr = rcli(p)
        self.assertEqual(cr.call("CONFIG", "RESETSTAT"), b"OK")
        text = cr.call("INFO", "stats").decode()
        cr.close()
        self.assertIn("sync_full:0\r\n", text)
        self.assertIn("sync_partial_err:0\r\n", text)
        self.assertEqual(metric_syncs(p, mport)["full"], 2)
        r.stop()
        p.stop()


class TLSReplication(unittest.TestCase):
    """The replica link over TLS: tls-replication yes, the primary's
    tls-port, its certificate checked against tls-ca-cert-file."""

    @classmethod
    def setUpClass(cls):
        import tlscerts
        if not tlscerts.Certs.available():
            raise unittest.SkipTest("the openssl command is missing")
        cls.certs = tlscerts.Certs()

    @classmethod
    def tearDownClass(cls):
        cls.certs.cleanup()

    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()

    def primary(self):
        from kvdtest import free_port
        c = self.certs
        self.tls_port = free_port()
        s = Server(threads=2, resp=True, args=[
            "--journal-segment-size", "1m",
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", c.server_cert, "--tls-key-file", c.server_key,
            "--tls-ca-cert-file", c.ca, "--tls-auth-clients", "no",
            "--requirepass", PW])
        s.pw = PW
        self.servers.append(s)
        return s.start()

    def replica(self, ca):
        s = Server(threads=2, resp=True, args=[
            "--journal-segment-size", "1m",
            "--replicaof", "127.0.0.1", str(self.tls_port),
            "--tls-replication", "yes", "--tls-ca-cert-file", ca,
            "--primary-password", PW])
        self.servers.append(s)
        return s.start()

    def test_tls_link(self):
        """Over TLS the replica takes its copy and streams writes."""
        p = self.primary()
        put_many(p, 0, 2000)
        r = self.replica(self.certs.ca)
        want = dump(p)
        wait_until(lambda: dump(r) == want, 30, "the copy over TLS")
        put_many(p, 2000, 3000, tag=b"w")
        c = ncli(p)
        self.assertEqual(c.call(WAIT, 1, 20000), [OK, 1])
        c.close()
        self.assertEqual(dump(r), dump(p))
        self.assertEqual(info(r)["master_link_status"], "up")
        r.stop()
        p.stop()

    def test_wrong_ca_refused_with_clear_log(self):
        """A primary whose certificate the replica's CA did not sign: no
        link, no data, and the replica's log says why."""
        p = self.primary()
        put_many(p, 0, 100)
        r = self.replica(self.certs.ca2)
        wait_until(lambda: b"certificate verify failed" in r.log_text(), 20,
                   "the verification failure in the log")
        self.assertEqual(info(r)["master_link_status"], "down")
        self.assertEqual(dump(r), [])
        self.assertEqual(info(p)["connected_slaves"], "0")
        r.stop()
        p.stop()


if __name__ == "__main__":
    main()
