"""test_output.py - kvbench's reports and time controls: the JSON fields
docs/kvbench.md documents, CSV, the HDR percentile files (one per
operation type), the plot and its gnuplot script, the progress line,
--duration, --warmup and --rate (as a bound on what is offered, never as a
speed the server must reach)."""

import csv
import io
import os
import re
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
                  "warmup", "rate", "seed", "value_size", "verify", "properties",
                  "record", "record_ops", "fields_native"):
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
                                            "seconds", "lost_keys", "mismatched_keys",
                                            "fields", "bad_fields"})
        for k in ("read_back", "run_reads"):
            self.assertEqual(set(j["verify"]["fields"][k]),
                             {"checked", "stale", "corrupt", "missing"})
        # workload e: records of fields, kvd's native hashes
        self.assertEqual((j["config"]["record"], j["config"]["fields_native"]),
                         ("fields", True))
        self.assertEqual(j["verify"]["fields"]["read_back"]["checked"],
                         10 * j["verify"]["keys"])

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

    def check_hgrm(self, path, count):
        """HdrHistogram's percentile distribution (.hgrm), as its
        outputPercentileDistribution writes it and its plotters read it:
        the column header and a blank line, rows of value (ms), percentile,
        total count and 1/(1-percentile) rising together, a last row at
        percentile 1 with every value counted, then the three #[...] lines."""
        with open(path) as f:
            lines = f.read().split("\n")
        self.assertEqual(lines[0].split(),
                         ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"])
        self.assertEqual(lines[1], "")
        rows = [l.split() for l in lines[2:] if l and not l.startswith("#")]
        self.assertGreater(len(rows), 5)
        for r in rows[:-1]:
            self.assertEqual(len(r), 4, r)
            self.assertAlmostEqual(float(r[3]), 1 / (1 - float(r[1])), delta=0.01 * float(r[3]))
        vals = [float(r[0]) for r in rows]
        pcts = [float(r[1]) for r in rows]
        totals = [int(r[2]) for r in rows]
        self.assertEqual(vals, sorted(vals))
        self.assertEqual(pcts, sorted(pcts))
        self.assertEqual(totals, sorted(totals))
        self.assertEqual((pcts[0], pcts[-1], totals[-1]), (0.0, 1.0, count))
        foot = [l for l in lines if l.startswith("#")]
        self.assertEqual(len(foot), 3)
        self.assertRegex(foot[0], r"^#\[Mean    = +[0-9.]+, StdDeviation   = +[0-9.]+\]$")
        self.assertRegex(foot[1], r"^#\[Max     = +[0-9.]+, Total count    = +%d\]$" % count)
        self.assertEqual(float(foot[1].split()[2].rstrip(",")), vals[-1])
        self.assertRegex(foot[2], r"^#\[Buckets = +\d+, SubBuckets     = +\d+\]$")

    def test_hdr_file_per_op_type(self):
        # one histogram per file, as HdrHistogram's plotters take them
        prefix = os.path.join(self.tmp, "lat")
        r = kvbench("-r", 500, "-n", 3000, "--hdr", prefix + ".hgrm", "a", port=self.srv.port)
        names = sorted(f for f in os.listdir(self.tmp) if f.startswith("lat."))
        self.assertEqual(names, ["lat.load.insert.hgrm", "lat.read.hgrm", "lat.update.hgrm"])
        run = r.phase("run")["ops_by_type"]
        self.check_hgrm(prefix + ".read.hgrm", run["read"]["count"])
        self.check_hgrm(prefix + ".update.hgrm", run["update"]["count"])
        self.check_hgrm(prefix + ".load.insert.hgrm", 500)
        # the file's maximum is the report's
        with open(prefix + ".update.hgrm") as f:
            top = float([l for l in f if l.startswith("#[Max")][0].split()[2].rstrip(","))
        self.assertAlmostEqual(top, run["update"]["latency_ms"]["max"], delta=0.001)

    def test_plot(self):
        if not shutil.which("gnuplot"):
            self.skipTest("gnuplot is not installed: --plot went unchecked (scripts/deps.sh test)")
        png = os.path.join(self.tmp, "run.png")
        r = kvbench("-r", 500, "-d", 2.5, "-w", 1, "-t", 2, "-c", 3, "-P", 4, "--plot", png, "a",
                    port=self.srv.port)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        # the script and the data are kept beside the picture
        with open(os.path.join(self.tmp, "run.gnuplot")) as f:
            gp = f.read().splitlines()
        title = [l for l in gp if l.startswith("set multiplot")][0]
        self.assertIn("layout 3,1", title)
        self.assertIn("workload a (YCSB A", title)
        self.assertIn("6 connections (2 threads x 3), pipeline 4", title)
        plots = [i for i, l in enumerate(gp) if l.startswith("plot ")]
        self.assertEqual(len(plots), 3)
        # throughput from 0, latency panels per type: p50 p99 p99.9 max
        before = gp[:plots[0]]
        self.assertIn("set yrange [0:*]", before)
        self.assertIn('set xlabel "seconds of the run"', before)
        self.assertNotIn("set logscale y", before)
        self.assertIn("throughput", gp[plots[0]])
        for i, op in zip(plots[1:], ("read", "update")):
            self.assertEqual(gp[i - 1], 'set ylabel "%s latency, ms"' % op)
            for p in ("p50", "p99", "p99.9", "max"):
                self.assertIn('title "%s %s"' % (op, p), gp[i])
        # the time axis is the measured run's seconds: the warmup second is
        # left out and the first point is one second into the run
        with open(os.path.join(self.tmp, "run.dat")) as f:
            rows = [l.split() for l in f]
        self.assertEqual(len(rows[0]), 10)
        xs = [float(x[0]) for x in rows]
        self.assertLess(xs[0], 1.5)
        self.assertLess(xs[-1], 3.6)
        warm = [t for t in r.phase("run")["timeline"] if t["warmup"]]
        self.assertEqual(len(rows), len(r.phase("run")["timeline"]) - len(warm))

    def test_progress_line(self):
        # by time: elapsed/total (warmup included) and the time left
        r = kvbench("-r", 300, "-d", 2, "-w", 1, "-t", 1, "-c", 2, "c", port=self.srv.port,
                    quiet=False)
        lines = [l for l in r.err.splitlines() if l.startswith("kvbench: run")]
        self.assertGreaterEqual(len(lines), 2, r.err)
        etas = []
        for l in lines:
            m = re.search(r"  (\d+)s/3s ETA (\d+)s(  \(warmup\))?$", l)
            self.assertTrue(m, l)
            etas.append(int(m.group(2)))
        self.assertEqual(etas, sorted(etas, reverse=True))
        self.assertLessEqual(etas[0], 3)
        # by count: done/planned and a percentage
        # (the rate makes the run last two seconds at least: a line or two)
        r = kvbench("-r", 300, "-n", 40000, "-R", 20000, "-t", 1, "-c", 2, "c",
                    port=self.srv.port, quiet=False)
        lines = [l for l in r.err.splitlines() if l.startswith("kvbench: run")]
        self.assertGreaterEqual(len(lines), 1, r.err)
        for l in lines:
            self.assertRegex(l, r"  \d+/40000 \d+% ETA \d+(m\d\d)?s$")

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
