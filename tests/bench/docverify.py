"""docverify.py - what tests/bench's document tests share: YCSB's fields,
the assertions on a --verify report, and the one-field round trip that
each MongoDB driver of kvbench must pass (a mixin: its class gives bench()
and docs())."""

FIELDS = ["field%d" % i for i in range(10)]
UPDATES_ONLY = ["-p", "updateproportion=1", "-p", "readproportion=0"]

class Verified:
    def verified(self, r, keys=None):
        """keys: the records read back (None: those the run wrote)."""
        run = r.phase("run")
        if run:
            self.assertEqual(run["errors"]["total"], 0, run["first_error"])
        v = r.report["verify"]
        keys = v["keys"] if keys is None else keys
        self.assertGreater(keys, 0)
        self.assertEqual((v["keys"], v["ok"], v["lost"], v["mismatched"], v["errors"]),
                         (keys, keys, 0, 0, 0), v)
        f = v["fields"]
        self.assertEqual(f["read_back"], {"checked": 10 * keys, "stale": 0, "corrupt": 0,
                                          "missing": 0})
        self.assertEqual((f["run_reads"]["stale"], f["run_reads"]["corrupt"],
                          f["run_reads"]["missing"]), (0, 0, 0))
        return f

    def check_docs(self, docs, n):
        self.assertEqual(len(docs), n)
        for k, d in docs.items():
            self.assertTrue(k.startswith("user"), k)
            self.assertEqual(sorted(d), FIELDS)
            self.assertTrue(all(isinstance(v, str) and len(v) == 100 for v in d.values()))


class OneField:
    def test_one_field_update_and_read(self):
        self.bench("-r", 50, "--phase", "load", "a")
        before = self.docs()
        r = self.bench("-r", 50, "-n", 40, "-t", 1, "-c", 1, "--phase", "run", *UPDATES_ONLY, "a")
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        after = self.docs()
        changed = [(k, f) for k in before for f in FIELDS if before[k][f] != after[k][f]]
        # one field per update (one rewritten twice counts once)
        self.assertTrue(25 < len(changed) <= 40, len(changed))
        self.table += "_c"
        r = self.bench("-r", 50, "-n", 200, "-p", "readallfields=false", "--verify", "c")
        f = self.verified(r, 50)
        self.assertEqual(f["run_reads"]["checked"], 200)  # one field each
