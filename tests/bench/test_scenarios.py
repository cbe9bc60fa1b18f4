"""test_scenarios.py - kvbench's own scenarios (ingest, uuid, geo) and
--server, against a real kvd: counts, key and value shapes."""

import os
import re
import shutil
import tempfile
import unittest

import msgpack

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import kvbench


class Scenarios(ServerCase):

    def all_keys(self, prefix=b""):
        keys, cur = [], None
        while True:
            st, items, cur = self.c.call(SCAN, prefix, cur, None, 10000)
            keys += items[0::2]
            if cur is None:
                return keys, items

    def test_ingest(self):
        # the story's shape: 8 clients, one row per round trip, 50 bytes
        r = kvbench("-r", 800, "ingest", port=self.srv.port)
        cfg = r.report["config"]
        self.assertEqual(cfg["threads"] * cfg["conns"], 8)
        self.assertEqual(cfg["pipeline"], 1)
        self.assertEqual(r.phase("load")["ops"], 800)
        self.assertEqual([p["phase"] for p in r.report["phases"]], ["load"])
        keys, _ = self.all_keys(b"client")
        self.assertEqual(len(keys), 800)
        # 8 clients x 100 rows: client name + zero-padded counter
        self.assertIn(b"client007-0000000099", keys)
        self.assertEqual(len({k[:9] for k in keys}), 8)
        self.assertEqual(len(self.c.call(GET, keys[0])[1]), 50)

    def test_uuid(self):
        r = kvbench("-r", 2000, "--value-size", "20-200", "-t", 2, "-c", 16, "uuid",
                    port=self.srv.port)
        self.assertEqual(r.phase("load")["ops"], 2000)
        self.assertEqual(self.c.call(COUNT, b"")[1], 2000)
        st, items, cur = self.c.call(SCAN, b"", None, None, 2000)
        pat = re.compile(rb"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        for k, v in zip(items[0::2], items[1::2]):
            self.assertRegex(k, pat)
            self.assertTrue(20 <= len(v) <= 200, len(v))
        lens = [len(v) for v in items[1::2]]
        self.assertLess(min(lens), 40)
        self.assertGreater(max(lens), 180)

    def test_geo(self):
        r = kvbench("-r", 1000, "-n", 2000, "-t", 2, "-c", 50, "geo", port=self.srv.port)
        self.assertEqual(r.phase("load")["ops"], 1000)
        self.assertEqual(r.counts(), {"read": 2000})
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        # the load wrote every document once, in a shuffled order
        self.assertEqual(self.c.call(COUNT, b"geo:")[1], 1000)
        doc = msgpack.unpackb(self.c.call(GET, b"geo:0000000500")[1], raw=False)
        self.assertEqual(sorted(doc), sorted(
            ["position", "radius", "cidr", "country_code", "nearest_city",
             "timestamp", "software_source_version"]))
        self.assertEqual(sorted(doc["position"]), ["lat", "lon"])
        self.assertTrue(-90 <= doc["position"]["lat"] <= 90)
        self.assertEqual(len(doc["country_code"]), 2)

    def test_server_option(self):
        # kvbench starts the server itself and reports its peak RSS
        port = free_port()
        d = tempfile.mkdtemp(prefix="kvbench-srv-")
        try:
            cmd = "%s --bind 127.0.0.1 --port %d --data-dir %s --threads 2" % (
                KVD_BIN, port, d)
            r = kvbench("-r", 500, "-n", 500, "--server", cmd, "c", port=port)
            self.assertGreater(r.report["server"]["peak_rss_bytes"], 1 << 20)
            self.assertEqual(r.report["server"]["method"], "VmHWM")
            self.assertIn("peak RSS", r.out)
            # and stopped it
            with self.assertRaises(ProcessLookupError):
                os.kill(r.report["server"]["pid"], 0)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
