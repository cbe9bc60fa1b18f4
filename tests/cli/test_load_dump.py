"""test_load_dump.py - kvcli load and dump: a 100,000-row round trip with
text, binary values and JSON documents (stored as msgpack, checked with
python3-msgpack), the base64 and TSV forms, malformed lines reported by
number while the rest load, --strict, and the summary in each style."""

import base64
import json
import os
import random
import subprocess
import unittest

import msgpack

from kvdtest import GET, OK, Server, main

KVCLI = os.environ["KVCLI"]
N = 100000


def rows(n, seed=7):
    """Records as (key bytes, value bytes, JSON line)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 4
        key = b"row:%07d" % i
        if kind == 0:
            val = ("text %d é ✓ \t\"\\ \u0001" % i).encode()
            line = {"key": key.decode(), "value": val.decode()}
        elif kind == 1:
            val = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 64)))
            key = b"bin:\xff\x00" + key
            line = {"key_b64": base64.b64encode(key).decode(),
                    "value_b64": base64.b64encode(val).decode()}
        elif kind == 2:
            doc = {"id": i, "neg": -i, "f": i / 7.0, "ok": i % 3 == 0,
                   "none": None, "tags": ["a", "ü", {"deep": [1, [2, [3]]]}],
                   "big": 2**63 + i, "s": "x" * (i % 40)}
            val = msgpack.packb(doc, use_bin_type=True)
            line = {"key": key.decode(), "value": doc}
        else:
            doc = [i, "two", [], {}, 1.5e300, -2**63]
            val = msgpack.packb(doc, use_bin_type=True)
            line = {"key": key.decode(), "value": doc}
        out.append((key, val, json.dumps(line, ensure_ascii=(i % 8 == 0))))
    return out


class LoadDump(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server().start()
        cls.rows = rows(N)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def cli(self, *args, input=None):
        p = subprocess.run([KVCLI, "-p", str(self.srv.port)] + list(args),
                           input=input, capture_output=True, timeout=300)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args, **kw):
        rc, out, err = self.cli(*args, **kw)
        self.assertEqual(rc, 0, (args, err[-2000:]))
        return out

    def setUp(self):
        self.ok("flushall")

    def check_stored(self, sample=2000):
        c = self.srv.client()
        try:
            rnd = random.Random(1)
            for key, val, _ in rnd.sample(self.rows, sample):
                self.assertEqual(c.call(GET, key), [OK, val], key)
        finally:
            c.close()
        self.assertEqual(self.ok("count"), b"%d\n" % N)

    def test_round_trip(self):
        data = ("\n".join(r[2] for r in self.rows) + "\n").encode()
        out = self.ok("--json", "load", "-", input=data)
        summary = json.loads(out)
        self.assertEqual((summary["rows"], summary["errors"]), (N, 0))
        self.assertGreater(summary["rows_per_second"], 0)
        self.check_stored()
        dump1 = self.ok("dump")
        lines = dump1.splitlines()
        self.assertEqual(len(lines), N)
        # key order, and every kind in its natural form
        recs = [json.loads(l) for l in lines[:3]]
        self.assertIn("key_b64", recs[0])
        docs = [json.loads(l) for l in lines if b'"row:0000002"' in l]
        self.assertEqual(docs[0]["value"]["tags"][1], "ü")
        self.ok("flushall")
        self.ok("load", "-", input=dump1)
        self.check_stored()
        self.assertEqual(self.ok("dump"), dump1)
        # base64 form
        b64 = self.ok("dump", "--base64")
        self.ok("flushall")
        self.ok("load", "--base64", "-", input=b64)
        self.assertEqual(self.ok("dump"), dump1)
        # TSV form
        tsv = self.ok("dump", "--tsv")
        self.assertEqual(len(tsv.splitlines()), N)
        self.ok("flushall")
        self.ok("load", "--tsv", "-", input=tsv)
        self.assertEqual(self.ok("dump"), dump1)
        # scan --json writes the same records
        self.assertEqual(self.ok("--json", "scan"), dump1)
        # a prefix
        part = self.ok("dump", "--prefix", "row:001")
        self.assertEqual(len(part.splitlines()), 10000 * 3 // 4)

    def test_foreign_msgpack_is_not_mangled(self):
        """Bytes that are msgpack but not load's own encoding of a JSON
        document (a float32, bin inside a map) come back as base64."""
        c = self.srv.client()
        from kvdtest import PUT
        odd = [msgpack.packb({"f": 1.5}, use_single_float=True),
               msgpack.packb({"b": b"\x00\x01"}, use_bin_type=True),
               b"\x81\xa1a\xcc\x01",  # 1 encoded in two bytes
               b"\x91"]               # truncated
        for i, v in enumerate(odd):
            self.assertEqual(c.call(PUT, b"odd%d" % i, v), [OK])
        c.close()
        dump = self.ok("dump")
        for line in dump.splitlines():
            self.assertIn("value_b64", json.loads(line))
        self.ok("flushall")
        self.ok("load", input=dump)
        self.assertEqual(self.ok("dump"), dump)

    def test_malformed_lines(self):
        good = ['{"key":"g%d","value":"v"}' % i for i in range(5)]
        bad = ["not json", '{"key":"x"}', '{"value":"y"}', '["key","value"]',
               '{"key":"a","value":"b","more":1}', '{"key":"","value":"v"}',
               '{"key":"k","value":null}', '{"key":"k","value":"v"} x',
               '{"key_b64":"!!","value":"v"}', '{"key":"k","value":"\\ud800"}',
               '{"key":"%s","value":"v"}' % ("k" * 512),
               '{"key":"a","key":"b","value":"v"}', '{"key":"k","value":"v",}']
        lines = [good[0], bad[0], good[1]] + bad[1:] + good[2:] + ["", "  "]
        data = ("\n".join(lines)).encode()  # no final newline
        rc, out, err = self.cli("load", "-", input=data)
        self.assertEqual(rc, 2)
        self.assertEqual(out.decode().split(",")[:2], ["rows 5", " errors %d" % (len(bad) + 1)])
        msgs = err.decode().splitlines()
        self.assertEqual(len(msgs), len(bad) + 1, msgs)
        self.assertTrue(msgs[0].startswith("kvcli load: stdin:2: column 1:"), msgs[0])
        self.assertIn("stdin:4: no value", msgs[1])
        self.assertIn("stdin:8: empty key", msgs[5])
        self.assertIn("max_key", "\n".join(msgs))
        self.assertIn("stdin:%d:" % len(lines), msgs[-1])  # "  " is not blank
        self.assertEqual(self.ok("count"), b"5\n")
        # --strict: rows before the first bad line are stored, then it stops
        self.ok("flushall")
        rc, out, err = self.cli("load", "--strict", "-", input=data)
        self.assertEqual(rc, 2)
        self.assertEqual(err.decode().count("\n"), 1)
        self.assertEqual(self.ok("count"), b"1\n")

    def test_tsv_and_summary_styles(self):
        data = b"a\t1\nb\\tc\tx\\ny\\\\z\\0\\x7f\r\nbad line\nc\t\n"
        rc, out, err = self.cli("--csv", "load", "--tsv", "-", input=data)
        self.assertEqual(rc, 2)
        self.assertTrue(out.startswith(b"rows,errors,seconds,rows_per_second\r\n3,1,"), out)
        self.assertIn(b"stdin:3: no TAB", err)
        self.assertEqual(self.ok("get", "b\tc"), b"x\ny\\z\0\x7f")
        self.assertEqual(self.ok("get", "c"), b"")
        rc, out, err = self.cli("load", "--tsv", "-", input=b"k\tv\\q\n")
        self.assertIn(b"bad escape in the value", err)
        path = os.path.join(os.path.dirname(self.srv.data_dir),
                            "kvcli-load-%d.tsv" % os.getpid())
        with open(path, "wb") as f:
            f.write(b"fromfile\tyes\n")
        try:
            self.ok("load", path)  # .tsv picks the format
        finally:
            os.unlink(path)
        self.assertEqual(self.ok("get", "fromfile"), b"yes")
        self.assertEqual(self.cli("load", "/nonexistent/file")[0], 2)

    def test_ttl_and_scalars(self):
        self.ok("load", "--ttl", "100000", input=b'{"key":"t","value":12}\n'
                b'{"key":"u","value":true}\n{"value":-1.5e3,"key":"w"}\n')
        self.assertEqual(self.ok("get", "t"), b"12")
        self.assertEqual(self.ok("get", "u"), b"true")
        self.assertEqual(self.ok("get", "w"), b"-1.5e3")
        self.assertGreater(int(self.ok("ttl", "t")), 90000)

    def test_small_batches_and_window(self):
        data = ("\n".join(r[2] for r in self.rows[:5000]) + "\n").encode()
        self.ok("load", "--batch", "7", "--window", "3", input=data)
        self.assertEqual(self.ok("count"), b"5000\n")


if __name__ == "__main__":
    main()
