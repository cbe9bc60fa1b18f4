"""test_metrics.py - the Prometheus endpoint tells the truth.

After a known mix of requests, GET /metrics must parse as the Prometheus
text format, every sample belong to a declared family, histograms be
cumulative with count == the requests made, and the counters agree with
STATS and with what the test did.  The storage engine's own families
(journal bytes and flushes, checkpoints, their LSN and duration, memtable
bytes, checkpoint waits, a failed shard) equal STATS' per-shard fields and
INFO's sums once checkpoints have taken every write.
"""

import re
import socket
import time
import unittest

from kvdtest import *  # noqa: F401,F403

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse(text):
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            types[name] = typ
        elif line.startswith("#") or not line:
            continue
        else:
            m = SAMPLE.match(line)
            assert m, "not a sample line: %r" % line
            samples[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return types, samples


def family(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in types:
            return name[:-len(suffix)]
    return name


class Metrics(unittest.TestCase):
    def test_metrics(self):
        with Server(threads=2, args=["--metrics-port", str(free_port())]) as srv:
            mport = int(srv.argv()[srv.argv().index("--metrics-port") + 1])
            c = srv.client()
            for i in range(20):
                c.call(PUT, b"k%d" % i, b"v")
            for i in range(30):
                c.call(GET, b"k%d" % i)        # 20 OK, 10 NOT_FOUND
            c.call(GET, b"k" * 600)            # KEY_TOO_LARGE
            c.call(MPUT, 0, b"a", b"1", b"b", b"2")
            head, body = http_get(mport, b"/metrics")
            self.assertIn("200 OK", head.splitlines()[0])
            self.assertIn("text/plain; version=0.0.4", head)
            types, s = parse(body)
            for (name, labels) in s:
                self.assertIn(family(name, types), types, name)
                self.assertTrue(name.startswith("kvd_"))
            self.assertEqual(s[("kvd_requests_total", '{op="PUT",status="OK"}')], 20)
            self.assertEqual(s[("kvd_requests_total", '{op="GET",status="OK"}')], 20)
            self.assertEqual(s[("kvd_requests_total", '{op="GET",status="NOT_FOUND"}')], 10)
            self.assertEqual(s[("kvd_requests_total", '{op="GET",status="KEY_TOO_LARGE"}')], 1)
            self.assertEqual(types["kvd_request_duration_seconds"], "histogram")
            # cumulative buckets, +Inf == count == requests
            for op, n in (("GET", 31), ("PUT", 20), ("MPUT", 1)):
                buckets = [(k[1], v) for k, v in s.items()
                           if k[0] == "kvd_request_duration_seconds_bucket"
                           and 'op="%s"' % op in k[1]]
                values = [v for _, v in buckets]
                self.assertEqual(values, sorted(values))
                self.assertEqual(s[("kvd_request_duration_seconds_bucket",
                                    '{op="%s",le="+Inf"}' % op)], n)
                self.assertEqual(s[("kvd_request_duration_seconds_count",
                                    '{op="%s"}' % op)], n)
            commits = sum(v for k, v in s.items() if k[0] == "kvd_commits_total")
            self.assertGreaterEqual(commits, 1)
            batch = sum(v for k, v in s.items() if k[0] == "kvd_commit_batch_size_count")
            self.assertEqual(batch, commits)
            keys = sum(v for k, v in s.items() if k[0] == "kvd_shard_keys")
            self.assertEqual(keys, 22)
            # this client, plus the scrape itself (and maybe the readiness probe)
            self.assertIn(s[("kvd_connections", "")], (2, 3))
            # STATS shows the same counters
            st = c.call(STATS)[1]
            self.assertEqual(st[b"ops"][b"GET"][b"calls"], 31)
            self.assertEqual(st[b"ops"][b"GET"][b"errors"], 1)
            self.assertEqual(st[b"commits"], commits)
            # other paths and methods
            head, _ = http_get(mport, b"/")
            self.assertIn("404", head.splitlines()[0])
            with socket.create_connection(("127.0.0.1", mport), 5) as sk:
                sk.sendall(b"POST /metrics HTTP/1.1\r\n\r\n")
                self.assertIn(b"405", sk.recv(1000))
            with socket.create_connection(("127.0.0.1", mport), 5) as sk:
                sk.sendall(b"GET /" + b"x" * 9000)
                self.assertIn(b"431", sk.recv(1000))
            self.assertEqual(c.call(PING), [OK])


def resp_info(port, section):
    """INFO section over the RESP port, as a dict of its fields."""
    with socket.create_connection(("127.0.0.1", port), 5) as sk:
        sk.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(section), section))
        data = b""
        while True:
            chunk = sk.recv(65536)
            assert chunk, "INFO: connection closed"
            data += chunk
            head, sep, rest = data.partition(b"\r\n")
            if sep and len(rest) >= int(head[1:]) + 2:
                break
    body = rest[:int(head[1:])].decode()
    return dict(ln.split(":", 1) for ln in body.splitlines() if ":" in ln)


class StoreMetrics(unittest.TestCase):
    def test_store_families_agree_with_stats(self):
        mport = free_port()
        args = ["--metrics-port", str(mport), "--checkpoint-interval-ms", "200"]
        with Server(threads=2, args=args, resp=True) as srv:
            c = srv.client()
            for i in range(200):
                self.assertEqual(c.call(PUT, b"key-%03d" % i, b"v" * 100), [OK])
            # every write checkpointed and each shard's two spare journal
            # segments made ahead (the next one, and the one kept for
            # deletes on a full disk): nothing moves any more
            end = time.monotonic() + 30
            while True:
                sh = c.call(STATS)[1][b"shards"]
                if sum(x[b"checkpoint_lsn"] for x in sh) == 200 and \
                        all(x[b"journal_spares_ahead"] == 2 for x in sh):
                    break
                self.assertLess(time.monotonic(), end, sh)
                time.sleep(0.05)
            time.sleep(0.3)
            st = c.call(STATS)[1]
            _, body = http_get(mport, b"/metrics")
            _, s = parse(body)
            info = resp_info(srv.resp_port, b"persistence")
            self.assertEqual(sum(x[b"journal_bytes"] for x in st[b"shards"]),
                             int(info["kvd_journal_bytes"]))
            fields = (("journal_bytes", "kvd_shard_journal_bytes_total"),
                      ("journal_fsyncs", "kvd_shard_journal_fsyncs_total"),
                      ("checkpoints", "kvd_shard_checkpoints_total"),
                      ("checkpoint_lsn", "kvd_shard_checkpoint_lsn"),
                      ("checkpoint_waits", "kvd_shard_checkpoint_waits_total"),
                      ("memtable_bytes", "kvd_shard_memtable_bytes"),
                      ("memtable_spare_bytes", "kvd_shard_memtable_spare_bytes"),
                      ("memtable_size", "kvd_shard_memtable_size_bytes"),
                      ("journal_spares_ahead", "kvd_shard_journal_spares_ahead_total"),
                      ("journal_spares", "kvd_shard_journal_spares"),
                      ("journal_spares_inline",
                       "kvd_shard_journal_spares_inline_total"))
            for i, x in enumerate(st[b"shards"]):
                lab = '{shard="%d"}' % i
                for field, name in fields:
                    self.assertEqual(s[(name, lab)], x[field.encode()], (i, name))
                self.assertAlmostEqual(s[("kvd_shard_checkpoint_seconds", lab)],
                                       x[b"checkpoint_us"] / 1e6, delta=2e-6)
                self.assertEqual(s[("kvd_shard_failed", lab)], 0)
                self.assertFalse(x[b"failed"])
                commits = s[("kvd_commits_total", lab)]
                # each of the sequential PUTs its own batch, each flushed
                self.assertGreaterEqual(x[b"journal_fsyncs"], commits)
                self.assertGreaterEqual(x[b"checkpoints"], 1)
                self.assertGreater(x[b"checkpoint_us"], 0)
            puts = sum(s[("kvd_committed_writes_total", '{shard="%d"}' % i)] for i in range(2))
            self.assertEqual(puts, 200)
            # every PUT's key and 100-byte value went to a journal
            jbytes = sum(x[b"journal_bytes"] for x in st[b"shards"])
            self.assertGreaterEqual(jbytes, 200 * (7 + 100))
            for field, key in (("journal_fsyncs", "kvd_journal_fsyncs"),
                               ("checkpoints", "kvd_checkpoints"),
                               ("memtable_bytes", "kvd_memtable_bytes"),
                               ("checkpoint_waits", "kvd_checkpoint_waits")):
                self.assertEqual(sum(x[field.encode()] for x in st[b"shards"]),
                                 int(info[key]), key)


class MetricsHead(unittest.TestCase):
    """HEAD /metrics: GET's status and headers, Content-Length included,
    and no body (a probe's check that the endpoint answers)."""

    def test_head(self):
        mport = free_port()
        with Server(threads=1, args=["--metrics-port", str(mport)]) as srv:
            get_head, get_body = http_get(mport, b"/metrics")
            data = http_exchange(mport, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head, sep, body = data.partition(b"\r\n\r\n")
            self.assertEqual(sep, b"\r\n\r\n")
            self.assertEqual(body, b"")
            lines = head.decode().split("\r\n")
            self.assertEqual(lines[0], "HTTP/1.1 200 OK")
            self.assertIn("Content-Type: text/plain; version=0.0.4; "
                          "charset=utf-8", lines)
            length = [l for l in lines if l.startswith("Content-Length: ")]
            self.assertEqual(len(length), 1)
            # about GET's length: the counters moved between the two
            self.assertGreater(int(length[0].split(": ")[1]),
                               len(get_body) // 2)
            self.assertIn("200", get_head.splitlines()[0])
            # HEAD elsewhere: GET's 404, without its body
            with socket.create_connection(("127.0.0.1", mport), 5) as sk:
                sk.sendall(b"HEAD /x HTTP/1.1\r\n\r\n")
                data = sk.recv(65536)
            self.assertTrue(data.startswith(b"HTTP/1.1 404"))
            self.assertTrue(data.endswith(b"\r\n\r\n"))
            # other methods are told which two work
            with socket.create_connection(("127.0.0.1", mport), 5) as sk:
                sk.sendall(b"PUT /metrics HTTP/1.1\r\n\r\n")
                data = sk.recv(65536)
            self.assertTrue(data.startswith(b"HTTP/1.1 405"))
            self.assertIn(b"\r\nAllow: GET, HEAD\r\n", data)
            srv.client().call(PING)


class MetricsPassword(unittest.TestCase):
    """With requirepass, /metrics needs it as HTTP Basic authentication,
    wherever metrics-bind points (here 0.0.0.0: protected mode lets it
    listen there because a password is set)."""

    def test_basic_auth(self):
        import base64
        mport = free_port()
        pw = b"s3cret:with colon"
        with Server(threads=1, args=["--requirepass", pw.decode(),
                                     "--metrics-port", str(mport),
                                     "--metrics-bind", "0.0.0.0"]) as srv:
            head, body = http_get(mport, b"/metrics")
            self.assertIn("401", head.splitlines()[0])
            self.assertIn('WWW-Authenticate: Basic realm="kvd"', head)
            self.assertNotIn("kvd_info", body)
            for bad in (b"Basic " + base64.b64encode(b"prom:wrong"),
                        b"Basic " + base64.b64encode(b"prom:" + pw[:-1]),
                        b"Basic " + base64.b64encode(pw),  # no user part
                        b"Basic !!!notbase64", b"Bearer " + pw):
                head, body = http_get(mport, b"/metrics", bad)
                self.assertIn("401", head.splitlines()[0], bad)
                self.assertNotIn("kvd_info", body)
            good = b"Basic " + base64.b64encode(b"prometheus:" + pw)
            head, body = http_get(mport, b"/metrics", good)
            self.assertIn("200 OK", head.splitlines()[0])
            self.assertIn("kvd_info{", body)
            # the user name is not checked; the header name is any case
            with socket.create_connection(("127.0.0.1", mport), 5) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nauthorization: Basic "
                          + base64.b64encode(b":" + pw) + b"\r\n\r\n")
                self.assertIn(b"200 OK", s.recv(100))
            srv.stop()


if __name__ == "__main__":
    main()
