"""test_hash.py - kvcli's hash commands (hset, hget, hgetall) against a real
kvd, each one's output in the four styles and in batch mode, its exit
status and errors; and kvcli dump / load carrying hashes and expiries
exactly (type, fields in order, binary bytes, time to live)."""

import json
import os
import subprocess
import tempfile

import kvproto as P
from cliutil import KVCLI, CliCase
from kvdtest import Server, main


class Hash(CliCase):
    SERVER = {"threads": 2}

    def test_hset_hget_hgetall(self):
        for flag, want in (("--raw", b"2\n"), ("--readable", b"(integer) 2\n"),
                           ("--json", b"2\n"), ("--csv", b"added\r\n2\r\n")):
            self.run_cli("del", "h")
            self.assertEqual(self.ok(flag, "hset", "h", "a", "1", "b", "x,y"), want, flag)
        self.assertEqual(self.ok("hset", "h", "a", "2", "c", "3"), b"1\n")
        # one field: its bytes exactly, as get
        self.assertEqual(self.ok("hget", "h", "a"), b"2")
        self.styles(["hget", "h", "b", "zz"], b"x,y\n\n", b'"x,y"\n(nil)\n',
                    b'{"field":"b","value":"x,y"}\n{"field":"zz","value":null}\n',
                    b'field,value\r\nb,"x,y"\r\nzz,\r\n')
        self.styles(["hgetall", "h"], b"a\t2\nb\tx,y\nc\t3\n",
                    b'"a" => "2"\n"b" => "x,y"\n"c" => "3"\n',
                    b'{"field":"a","value":"2"}\n{"field":"b","value":"x,y"}\n'
                    b'{"field":"c","value":"3"}\n',
                    b'field,value\r\na,2\r\nb,"x,y"\r\nc,3\r\n')

    def test_exit_status_and_errors(self):
        self.assertEqual(self.run_cli("hget", "none", "f")[:2], (1, b""))
        self.assertEqual(self.run_cli("hgetall", "none")[:2], (1, b""))
        self.assertEqual(self.run_cli("--readable", "hgetall", "none")[:2], (1, b"(nil)\n"))
        self.ok("hset", "h", "a", "1")
        self.assertEqual(self.run_cli("hget", "h", "zz")[0], 1)
        self.ok("put", "s", "v")
        for args in (["hset", "s", "f", "v"], ["hget", "s", "f"], ["hgetall", "s"]):
            rc, out, err = self.run_cli(*args)
            self.assertEqual(rc, 2, args)
            self.assertIn(b"WRONG_TYPE", err)
        rc, _, err = self.run_cli("get", "h")
        self.assertEqual(rc, 2)
        self.assertIn(b"WRONG_TYPE", err)
        rc, _, err = self.run_cli("hset", "h", "f")
        self.assertEqual(rc, 2)
        self.assertIn(b"wrong number of arguments", err)
        rc, _, err = self.run_cli("hset", "h", "f", "v", "g")
        self.assertEqual(rc, 2)
        self.assertIn(b"FIELD without its VALUE", err)

    def test_batch_mode(self):
        p = subprocess.run([KVCLI, "-p", str(self.srv.port)],
                           input=b"hset h a 1 b 2\nhget h a\nhget h zz\nhgetall h\n"
                                 b'hset h "x\\ty" "v\\nw"\nhget h "x\\ty"\n',
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)  # the worst: a field not found
        self.assertEqual(p.stdout, b"2\n1\n(nil)\na\t1\nb\t2\n1\nv\\nw\n")

    def test_dump_load_round_trip(self):
        c = self.srv.client()
        try:
            binf = bytes(range(256))
            self.assertEqual(c.call(P.HSET, b"h1", b"z", b"1", b"a", b"{\"j\":1}",
                                    binf, b"\x00\xff"), [P.OK, 3])
            self.assertEqual(c.call(P.EXPIRE, b"h1", 500000), [P.OK])
            self.assertEqual(c.call(P.HSET, b"h2", b"only", b""), [P.OK, 1])
            self.assertEqual(c.call(P.PUT, b"s1", b"plain"), [P.OK])
            self.assertEqual(c.call(P.PUT, b"s2", b"exp", 400000), [P.OK])
            before = c.call(P.SCAN, None, None, None, 100, P.SCAN_TYPED)
            for b64 in ([], ["--base64"]):
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "d.jsonl")
                    dumped = self.ok("dump", *b64)
                    with open(path, "wb") as f:
                        f.write(dumped)
                    if not b64:
                        recs = [json.loads(x) for x in dumped.splitlines()]
                        self.assertEqual(recs[0]["type"], "hash")
                        self.assertEqual(recs[0]["fields"][0], {"field": "z", "value": "1"})
                        self.assertIn("ttl_ms", recs[0])
                        self.assertNotIn("ttl_ms", recs[2])
                    self.ok("flushall")
                    # a hash and a string already there are replaced
                    self.assertEqual(c.call(P.HSET, b"h2", b"stale", b"x"), [P.OK, 1])
                    self.assertEqual(c.call(P.HSET, b"s1", b"f", b"v"), [P.OK, 1])
                    out = self.ok("load", *b64, path)
                    self.assertIn(b"rows 4, errors 0", out)
                after = c.call(P.SCAN, None, None, None, 100, P.SCAN_TYPED)
                self.assertEqual(after[0], P.OK)
                items, want = after[1], before[1]
                self.assertEqual(len(items), len(want))
                for i in range(0, len(want), 4):
                    self.assertEqual(items[i:i + 2], want[i:i + 2])  # key, type
                    self.assertEqual(items[i + 3], want[i + 3])  # value, fields in order
                    if want[i + 2] == -1:
                        self.assertEqual(items[i + 2], -1, items[i])
                    else:  # the time to live, less what the round trip took
                        self.assertTrue(want[i + 2] - 60000 < items[i + 2] <= want[i + 2],
                                        (items[i], items[i + 2], want[i + 2]))
        finally:
            c.close()

    def test_dump_tsv_refuses_hashes(self):
        self.ok("put", "a", "1")
        self.ok("hset", "h", "f", "v")
        rc, out, err = self.run_cli("dump", "--tsv")
        self.assertEqual(rc, 2)
        self.assertEqual(out, b"a\t1\n")
        self.assertIn(b"h is a hash", err)

    def test_load_rejects_bad_hash_rows(self):
        rows = [b'{"key":"h","type":"hash"}',
                b'{"key":"h","type":"hash","fields":[]}',
                b'{"key":"h","type":"hash","value":"x","fields":[{"field":"a","value":"b"}]}',
                b'{"key":"h","fields":[{"field":"a","value":"b"}]}',
                b'{"key":"h","type":"list","value":"x"}',
                b'{"key":"h","type":"hash","fields":[{"field":"a"}]}',
                b'{"key":"h","value":"x","ttl_ms":-5}',
                b'{"key":"h","type":"hash","fields":[{"field":"a","value":"b"}]}']
        rc, out, err = self.run_cli("load", "-", input=b"\n".join(rows) + b"\n")
        self.assertEqual(rc, 2)
        self.assertIn(b"rows 1, errors 7", out)
        self.assertEqual(err.count(b"kvcli load: stdin:"), 7, err)
        self.assertEqual(self.ok("hgetall", "h"), b"a\tb\n")

    def test_hgetall_pages_a_large_hash(self):
        srv = Server(threads=1, args=("--max-frame-size", "64k", "--max-value-size", "16k"))
        srv.start()
        try:
            for i in range(10):
                self.ok("hset", "big", "f%d" % i, "x" * 10000, port=srv.port)
            out = self.ok("hgetall", "big", port=srv.port)
            lines = out.splitlines()
            self.assertEqual([x.split(b"\t")[0] for x in lines],
                             [b"f%d" % i for i in range(10)])
            self.assertTrue(all(x.endswith(b"\t" + b"x" * 10000) for x in lines))
        finally:
            srv.stop()
            srv.cleanup()


if __name__ == "__main__":
    main()
