"""test_startup.py - kvd refuses to start with a one-line reason, or starts.

Bad flags and config files (with file:line), a port in use, a data directory
held by another kvd, a manifest that disagrees with the shard directories or
names a format or hash this kvd does not know, an unusable data directory;
and the options that only print (--help, --version, --test-config).  A start
tells systemd READY=1 only once every shard is open.
"""

import os
import socket
import subprocess
import tempfile
import time
import unittest

from kvdtest import *  # noqa: F401,F403


def run(args, timeout=20):
    p = subprocess.run([KVD_BIN] + args, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def one_line_refusal(test, args, rc_want, needle):
    rc, out, err = run(args)
    test.assertEqual(rc, rc_want, err)
    first = err.strip().splitlines()[0]
    test.assertTrue(first.startswith("kvd: "), err)
    test.assertIn(needle, first)
    return first


class Startup(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvdstart-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def conf(self, text):
        self.nconf = getattr(self, "nconf", 0) + 1
        path = os.path.join(self.tmp, "kvd%d.conf" % self.nconf)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_help_version(self):
        rc, out, _ = run(["--help"])
        self.assertEqual(rc, 0)
        for opt in ("--port", "--data-dir", "--threads", "--durability",
                    "--flush-interval-ms", "--max-clients", "--map-size"):
            self.assertIn(opt, out)
        rc, out, _ = run(["--version"])
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^kvd \d+\.\d+\.\d+")

    def test_bad_flags(self):
        one_line_refusal(self, ["--bogus", "1"], 2, "unknown option '--bogus'")
        one_line_refusal(self, ["--port", "-1"], 2, "port")
        one_line_refusal(self, ["--port", "70000"], 2, "out of range")
        one_line_refusal(self, ["--threads", "many"], 2, "not a non-negative integer")
        one_line_refusal(self, ["--durability", "maybe"], 2, "sync, async")
        one_line_refusal(self, ["--map-size", "12q"], 2, "not a size")
        one_line_refusal(self, ["--max-value-size", "64m", "--max-frame-size", "32m"],
                         2, "max-frame-size")
        one_line_refusal(self, ["--port"], 2, "needs a value")
        one_line_refusal(self, ["stray"], 2, "unexpected argument")

    def test_config_file(self):
        good = self.conf("# comment\nport 7999\n\ndurability async\nmap-size 1g\n")
        rc, out, err = run(["--config", good, "--test-config"])
        self.assertEqual(rc, 0, err)
        self.assertIn("valid", out)
        bad = self.conf("port 7999\nflush-interval-ms 0\n")
        line = one_line_refusal(self, ["--config", bad, "--test-config"], 2, bad + ":2:")
        self.assertIn("out of range", line)
        bad = self.conf("port 7999\nno-such-thing yes\n")
        one_line_refusal(self, ["--config", bad], 2, bad + ":2: unknown option 'no-such-thing'")
        bad = self.conf("threads\n")
        one_line_refusal(self, ["--config", bad], 2, "missing value")
        bad = self.conf("max-clients 99999999999\n")
        one_line_refusal(self, ["--config", bad], 2, "out of range")
        bad = self.conf("data-dir\t\"/srv/kvd data\"\nport -5\n")
        one_line_refusal(self, ["--config", bad], 2, bad + ":2: port")
        one_line_refusal(self, ["--config", os.path.join(self.tmp, "absent.conf")], 2,
                         "No such file")
        # paths are checked at start (and by --test-config), with file:line
        bad = self.conf("port 7999\nlog-file %s/missing/dir/kvd.log\n" % self.tmp)
        one_line_refusal(self, ["--config", bad, "--test-config"], 2,
                         bad + ":2: log-file")
        bad = self.conf("requirepass-file %s/nope\n" % self.tmp)
        one_line_refusal(self, ["--config", bad, "--test-config"], 2,
                         bad + ":1: requirepass-file")
        f = os.path.join(self.tmp, "plainfile")
        open(f, "w").close()
        one_line_refusal(self, ["--data-dir", f, "--test-config"], 2,
                         "--data-dir: data-dir")
        # flags override the file
        rc, _, err = run(["--config", good, "--port", "8000", "--test-config"])
        self.assertEqual(rc, 0, err)

    def test_port_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        one_line_refusal(self, ["--port", str(port), "--data-dir", self.tmp + "/d"], 1,
                         "Address already in use")
        s.close()
        # and a second kvd on a port a first kvd holds
        with Server(threads=1) as srv:
            one_line_refusal(self, ["--port", str(srv.port), "--data-dir",
                                    self.tmp + "/d2"], 1, "Address already in use")

    def test_data_dir_locked(self):
        with Server(threads=1) as srv:
            line = one_line_refusal(self, ["--port", "0", "--data-dir", srv.data_dir], 1,
                                    "in use by another kvd")
            self.assertIn("pid %d" % srv.proc.pid, line)

    def test_unusable_data_dir(self):
        f = os.path.join(self.tmp, "file")
        open(f, "w").close()
        # found by the configuration check, before anything starts
        one_line_refusal(self, ["--port", "0", "--data-dir", f + "/sub"], 2,
                         "cannot be used: Not a directory")

    def test_manifest_checks(self):
        d = os.path.join(self.tmp, "data")
        with Server(threads=2, data_dir=d) as srv:
            srv.client().call(PUT, b"k", b"v")
            srv.stop()
        # a shard directory beyond the manifest's count
        os.mkdir(os.path.join(d, "shard-002"))
        one_line_refusal(self, ["--port", "0", "--data-dir", d], 1, "shard-002 exists")
        os.rmdir(os.path.join(d, "shard-002"))
        # a shard the manifest promises is missing
        os.rename(os.path.join(d, "shard-001"), os.path.join(self.tmp, "moved"))
        one_line_refusal(self, ["--port", "0", "--data-dir", d], 1, "shard-001")
        os.rename(os.path.join(self.tmp, "moved"), os.path.join(d, "shard-001"))
        # a manifest that is not one
        man = os.path.join(d, "MANIFEST")
        orig = open(man).read()
        with open(man, "w") as f:
            f.write("shards lots\n")
        one_line_refusal(self, ["--port", "0", "--data-dir", d], 1, "not a valid kvd manifest")
        # a format or a key hash this kvd does not know is refused, never
        # guessed at (docs/operations.md, "Upgrade"), and left as it was
        for text, found in ((orig.replace("kvd-data 1", "kvd-data 2"), "'kvd-data 2'"),
                            (orig.replace("hash xxh3-64", "hash murmur3"), "'hash murmur3'")):
            self.assertNotEqual(text, orig)
            with open(man, "w") as f:
                f.write(text)
            rc, _, err = run(["--port", "0", "--data-dir", d])
            self.assertNotEqual(rc, 0, err)
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertTrue(lines[0].startswith("kvd: %s is not a valid kvd manifest" % man),
                            err)
            # the line says what this kvd reads
            self.assertIn("'kvd-data 1'", lines[0])
            self.assertIn("'hash xxh3-64'", lines[0])
            # and what it found there (a newer format: upgrade kvd)
            self.assertIn(found, lines[0])
            self.assertIn("'shards 2'", lines[0])
            self.assertEqual(open(man).read(), text)
        # shard directories without a manifest
        os.unlink(man)
        one_line_refusal(self, ["--port", "0", "--data-dir", d], 1, "no MANIFEST")
        with open(man, "w") as f:
            f.write(orig)
        with Server(threads=3, data_dir=d) as srv:
            self.assertEqual(srv.client().call(GET, b"k"), [OK, b"v"])
            self.assertEqual(srv.client().call(HELLO, 1)[1][b"shards"], 2)

    def test_creation_killed_half_way(self):
        """A first start killed while it made the shards (the manifest is
        written first, marked creating) must not leave a directory that
        never opens: nothing was served from it, so the next start makes
        the missing shards.  A finished manifest keeps refusing a missing
        shard (test_manifest_checks)."""
        d = os.path.join(self.tmp, "data")
        os.mkdir(d)
        with open(os.path.join(d, "MANIFEST"), "w") as f:
            f.write("kvd-data 1\nshards 2\nhash xxh3-64\ncreating\n")
        os.mkdir(os.path.join(d, "shard-000"))  # made, then the kill
        with Server(threads=2, data_dir=d) as srv:
            c = srv.client()
            self.assertEqual(c.call(PUT, b"k", b"v"), [OK])
            self.assertEqual(c.call(HELLO, 1)[1][b"shards"], 2)
            srv.stop()
        with open(os.path.join(d, "MANIFEST")) as f:
            self.assertNotIn("creating", f.read())
        with Server(threads=1, data_dir=d) as srv:
            self.assertEqual(srv.client().call(GET, b"k"), [OK, b"v"])

    def test_ready_after_the_store_opens(self):
        """docs/operations.md, "Sizing" and "Running under systemd": a first
        start pre-writes each shard's journal segment, and READY=1 (and the
        "ready" line) come only once every shard is open: by the time
        systemd hears READY=1 the log has each shard's recovery line, and
        the ready line after them."""
        path = os.path.join(self.tmp, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(30)
        d = os.path.join(self.tmp, "data")
        srv = Server(threads=2, data_dir=d, args=["--journal-segment-size", "16m"])
        try:
            start_with(srv, NOTIFY_SOCKET=path)
            got = []
            while True:
                msg = sock.recv(4096).decode()
                got.append(msg)
                if "READY=1" in msg.split("\n"):
                    break
            log = srv.log_text().decode()
            recov = [log.find("%s/shard-%03d: checkpoint LSN" % (d, i)) for i in (0, 1)]
            ready = log.find(" ready: 127.0.0.1 port %d" % srv.port)
            self.assertTrue(all(r >= 0 for r in recov), (got, log))
            self.assertGreater(ready, max(recov), log)
            self.assertRegex(log[recov[1]:], r"^\S+: checkpoint LSN 0, journal replayed 0 record")
            # each shard's first segment is there, allocated in full
            for i in (0, 1):
                segs = [f for f in os.listdir(os.path.join(d, "shard-%03d" % i))
                        if f.startswith("journal-") and f.endswith(".kvj")]
                self.assertEqual(len(segs), 1, segs)
                st = os.stat(os.path.join(d, "shard-%03d" % i, segs[0]))
                self.assertEqual(st.st_size, 16 << 20)
                self.assertGreaterEqual(st.st_blocks * 512, 16 << 20)
            self.assertEqual(srv.client().call(PING)[0], OK)
            srv.stop()
            # and STOPPING=1 as it stops
            while "STOPPING=1" not in sock.recv(4096).decode().split("\n"):
                pass
        finally:
            srv.cleanup()
            sock.close()

    def test_long_password_file(self):
        # requirepass-file once kept only the first 255 bytes of the line.
        pw = ("p%03d" % 0 + "".join("%03d" % i for i in range(1, 100)))[:300]
        self.assertEqual(len(pw), 300)
        path = os.path.join(self.tmp, "pw")
        with open(path, "w") as f:
            f.write(pw + "\n")
        with Server(threads=1, args=["--requirepass-file", path]) as srv:
            c = srv.client()
            self.assertEqual(c.call(AUTH, pw[:255].encode())[0], AUTH_FAILED)
            self.assertEqual(c.call(AUTH, pw.encode()), [OK])
            self.assertEqual(c.call(PING), [OK])
            srv.stop()
        # longer than any AUTH could carry: refused at start, not cut
        with open(path, "w") as f:
            f.write("x" * 5000 + "\n")
        one_line_refusal(self, ["--port", "0", "--data-dir", self.tmp + "/d",
                                "--requirepass-file", path], 2, "longer than")

    def test_restore_into_itself(self):
        # --restore D --data-dir D --restore-force yes once deleted D's data,
        # then failed: the two must not overlap.
        d = os.path.join(self.tmp, "data")
        with Server(threads=2, data_dir=d) as srv:
            c = srv.client()
            for i in range(30):
                c.call(PUT, b"k%d" % i, b"v")
            srv.stop()
        before = sorted(os.listdir(d))
        for rst, data in ((d, d), (d, d + "/sub"), (d + "/shard-000", d)):
            one_line_refusal(self, ["--port", "0", "--data-dir", data,
                                    "--restore", rst, "--restore-force", "yes"],
                             2, "overlap")
        self.assertEqual(sorted(os.listdir(d)), before)
        with Server(threads=2, data_dir=d) as srv:
            self.assertEqual(srv.client().call(COUNT), [OK, 30])
            srv.stop()

    def test_thread_names(self):
        # docs/architecture.md section 1: every thread says what it is.
        d = os.path.join(self.tmp, "data")
        with Server(threads=3, data_dir=d) as srv:
            # The port takes connections before the io threads run: a
            # reply says one does; the others may still be starting (a
            # sanitized build is slow), so the names get a few seconds.
            self.assertEqual(srv.client().call(PING)[0], OK)
            task = "/proc/%d/task" % srv.proc.pid
            want = ["kvd"] + ["kvd-%s/%d" % (w, i)
                              for w in ("io", "commit", "ckpt")
                              for i in range(3)] + ["kvd-repl-send", "kvd-replica",
                                                    "kvd-docs"]
            deadline = time.time() + 10
            while True:
                names = []
                for t in os.listdir(task):
                    # A short-lived thread (kvd-spare/N, a journal segment made
                    # ahead) may end between the listing and the read.
                    try:
                        with open(os.path.join(task, t, "comm")) as f:
                            names.append(f.read().strip())
                    except FileNotFoundError:
                        continue
                # ThreadSanitizer runs a background thread of its own,
                # which keeps the process's name.
                if build_sanitizer() == "thread" and names.count("kvd") > 1:
                    names.remove("kvd")
                if sorted(names) == sorted(want) or time.time() > deadline:
                    break
                time.sleep(0.1)
            srv.stop()
        self.assertEqual(sorted(names), sorted(want))


if __name__ == "__main__":
    main()
