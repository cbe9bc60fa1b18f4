"""test_output.py - kvbench's reports and time controls: the JSON fields
docs/kvbench.md documents, CSV, the HDR percentile file, the plot,
--duration, --warmup and --rate (as a bound on what is offered, never as a
speed the server must reach)."""

import csv
import io
import os
import shutil
import subprocess
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import KVBENCH, kvbench

PHASE_FIELDS = {"phase", "seconds", "ops", "planned", "ops_per_sec", "errors",
                "first_error", "scan_items", "latency_ms", "ops_by_type", "timeline"}
LATENCY_FIELDS = {"p50", "p90", "p99", "p99_9", "max", "mean", "min"}
ERROR_KINDS = {"total", "not_found", "server", "connection", "protocol"}


class Output(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, durability="async").start()
        cls.tmp = tempfile.mkdtemp(prefix="kvbench-out-")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_json_fields(self):
        r = kvbench("-r", 1000, "-n", 2000, "--key-stats", "--verify", "e", port=self.srv.port)
        j = r.report
        for k in ("kvbench", "command", "driver", "target", "workload", "title",
                  "config", "phases", "verify"):
            self.assertIn(k, j)
        self.assertEqual((j["driver"], j["workload"]), ("kvd", "e"))
        self.assertIn("kvbench", j["command"])
        for k in ("threads", "conns", "pipeline", "records", "ops", "duration",
                  "warmup", "rate", "seed", "value_size", "verify", "properties"):
            self.assertIn(k, j["config"])
        self.assertEqual(j["config"]["properties"]["maxscanlength"], "100")
        self.assertEqual([p["phase"] for p in j["phases"]], ["load", "run"])
        for p in j["phases"]:
            self.assertLessEqual(PHASE_FIELDS, set(p))
            self.assertEqual(set(p["errors"]), ERROR_KINDS)
            self.assertEqual(set(p["latency_ms"]), LATENCY_FIELDS)
            for op, v in p["ops_by_type"].items():
                self.assertIn(op, ("read", "update", "insert", "scan", "rmw"))
                self.assertEqual(set(v["latency_ms"]), LATENCY_FIELDS)
                lat = v["latency_ms"]
                self.assertTrue(0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"]
                                <= lat["p99_9"] <= lat["max"], lat)
        self.assertEqual(set(j["phases"][1]["keys"]),
                         {"space", "distinct", "top1_share", "top10_share"})
        self.assertEqual(set(j["verify"]), {"keys", "ok", "lost", "mismatched", "errors",
                                            "seconds", "lost_keys", "mismatched_keys"})

    def test_csv(self):
        r = subprocess.run([KVBENCH, "-q", "--port", str(self.srv.port), "-r", "500",
                            "-n", "1000", "--csv", "f"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        self.assertEqual({(x["phase"], x["op"]) for x in rows},
                         {("load", "insert"), ("load", "all"), ("run", "read"),
                          ("run", "rmw"), ("run", "all")})
        run = [x for x in rows if x["phase"] == "run"]
        self.assertEqual(sum(int(x["count"]) for x in run if x["op"] != "all"), 1000)
        self.assertEqual([int(x["count"]) for x in run if x["op"] == "all"], [1000])
        for x in rows:
            self.assertLessEqual(float(x["p50_ms"]), float(x["max_ms"]))

    def test_hdr_and_plot(self):
        hdr = os.path.join(self.tmp, "lat.hdr")
        png = os.path.join(self.tmp, "run.png")
        args = ["-r", 500, "-d", 1.5, "--hdr", hdr]
        if shutil.which("gnuplot"):
            args += ["--plot", png]
        kvbench(*args, "b", port=self.srv.port)
        with open(hdr) as f:
            text = f.read()
        for op in ("insert", "read", "update"):
            self.assertIn("op %s\n" % op, text)
        self.assertIn("Value     Percentile TotalCount 1/(1-Percentile)", text)
        self.assertIn("#[Max     =", text)
        # percentiles and counts rise monotonically within each section
        for sec in text.split("# kvbench")[1:]:
            rows = [l.split() for l in sec.splitlines()
                    if l.strip() and l.strip()[0].isdigit()]
            vals = [float(r[0]) for r in rows]
            pcts = [float(r[1]) for r in rows]
            self.assertEqual(vals, sorted(vals))
            self.assertEqual(pcts, sorted(pcts))
            self.assertEqual(pcts[-1], 1.0)
        if not shutil.which("gnuplot"):
            self.skipTest("gnuplot is not installed: --plot went unchecked (scripts/deps.sh test)")
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_duration_and_warmup(self):
        r = kvbench("-r", 500, "-d", 2, "-w", 1, "-t", 1, "-c", 2, "c", port=self.srv.port)
        run = r.phase("run")
        # Checked by structure, not by the clock: the run is by time
        # (planned 0) with the duration and warmup asked for, its timeline
        # is the warmup's seconds and then the measured ones, and the run's
        # count holds the measured seconds' operations (plus those of the
        # last, partial second, which has no tick).
        self.assertEqual((r.report["config"]["duration"],
                          r.report["config"]["warmup"]), (2.0, 1.0))
        self.assertEqual(run["planned"], 0)
        tl = run["timeline"]
        self.assertGreaterEqual(len(tl), 2)
        flags = [t["warmup"] for t in tl]
        self.assertTrue(flags[0])
        self.assertFalse(flags[-1])
        self.assertEqual(flags, sorted(flags, reverse=True), flags)
        self.assertEqual([t["t"] for t in tl], sorted(t["t"] for t in tl))
        self.assertLessEqual(sum(t["ops"] for t in tl if not t["warmup"]), run["ops"])
        self.assertGreater(sum(t["ops"] for t in tl if t["warmup"]), 0)
        self.assertGreater(run["ops"], 0)

    def test_rate_bounds_offered_load(self):
        r = kvbench("-r", 500, "-d", 2, "-R", 300, "-t", 2, "-c", 2, "c", port=self.srv.port)
        run = r.phase("run")
        # 300 ops/s for 2 s: the limiter may not offer more
        self.assertLessEqual(run["ops"], 300 * 2 * 1.1 + 8)
        self.assertGreater(run["ops"], 0)

    def test_ops_exact_with_pipeline(self):
        r = kvbench("-r", 777, "-n", 1234, "-t", 2, "-c", 3, "-P", 16, "b",
                    port=self.srv.port)
        self.assertEqual(r.phase("load")["ops"], 777)
        self.assertEqual(r.phase("run")["ops"], 1234)
        self.assertEqual(sum(r.counts().values()), 1234)


if __name__ == "__main__":
    main()
