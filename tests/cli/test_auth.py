"""test_auth.py - kvcli against a kvd with requirepass: the password from -a,
KVCLI_AUTH, a kvd:// or unix:// URL (-u) and --askpass (a pseudo-terminal),
the warning when it is on the command line, precedence, a wrong one; kvcli
load without it says "authentication required"; and the prompt's history
file after an AUTH (HOME in a temporary directory) holds the other commands
but never the AUTH line."""

import os
import pty
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from kvdtest import Server, main

KVCLI = os.environ["KVCLI"]
WARNING = (b"Warning: Using a password with '-a' or '-u' option on the "
           b"command line interface may not be safe.\n")


class Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvcli-auth-")
        cls.sock = os.path.join(cls.tmp, "kvd.sock")
        cls.srv = Server(threads=1, args=["--requirepass", "pw",
                                           "--unix-socket", cls.sock]).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cli(self, *args, input=None, env=None, port=True):
        e = dict(os.environ)
        e.pop("KVCLI_AUTH", None)
        e.update(env or {})
        pre = ["-p", str(self.srv.port)] if port else []
        p = subprocess.run([KVCLI] + pre + list(args), input=input,
                           capture_output=True, timeout=60, env=e)
        return p.returncode, p.stdout, p.stderr

    def test_no_password(self):
        rc, out, err = self.cli("get", "k")
        self.assertEqual(rc, 2)
        # what is missing, and how to give it
        self.assertIn(b"kvcli: get: authentication required", err)
        self.assertIn(b"-a, --askpass, KVCLI_AUTH or -u", err)

    def test_dash_a(self):
        rc, out, err = self.cli("-a", "pw", "put", "k", "v")
        self.assertEqual((rc, out), (0, b"OK\n"), err)
        self.assertEqual(err, WARNING)
        rc, out, err = self.cli("-a", "pw", "--no-auth-warning", "get", "k")
        self.assertEqual((rc, out, err), (0, b"v", b""))
        rc, out, err = self.cli("-a", "nope", "get", "k")
        self.assertEqual(rc, 2)
        self.assertIn(b"invalid password", err)

    def test_environment(self):
        self.cli("-a", "pw", "put", "k", "v")
        rc, out, err = self.cli("get", "k", env={"KVCLI_AUTH": "pw"})
        self.assertEqual((rc, out, err), (0, b"v", b""))  # no warning
        # -a wins over the environment
        rc, out, err = self.cli("-a", "pw", "get", "k",
                                env={"KVCLI_AUTH": "wrong"})
        self.assertEqual((rc, out), (0, b"v"), err)
        # batch mode: every command authenticated, no AUTH line needed
        rc, out, err = self.cli(input=b"get k\nput j w\nget j\n",
                                env={"KVCLI_AUTH": "pw"})
        self.assertEqual((rc, out), (0, b"v\nOK\nw\n"), err)

    def test_url(self):
        self.cli("-a", "pw", "put", "k", "v")
        url = "kvd://:pw@127.0.0.1:%d" % self.srv.port
        rc, out, err = self.cli("-u", url, "get", "k", port=False)
        self.assertEqual((rc, out, err), (0, b"v", WARNING))
        # percent-escapes, and a URL without a password takes KVCLI_AUTH
        rc, out, err = self.cli("-u", "kvd://:%%70w@127.0.0.1:%d/" % self.srv.port,
                                "get", "k", port=False)
        self.assertEqual((rc, out), (0, b"v"), err)
        rc, out, err = self.cli("-u", "kvd://127.0.0.1:%d" % self.srv.port,
                                "get", "k", port=False, env={"KVCLI_AUTH": "pw"})
        self.assertEqual((rc, out, err), (0, b"v", b""))
        rc, out, err = self.cli("-u", "kvd://:bad@127.0.0.1:%d" % self.srv.port,
                                "get", "k", port=False)
        self.assertEqual(rc, 2)
        self.assertIn(b"invalid password", err)
        rc, out, err = self.cli("-u", "http://127.0.0.1", "get", "k", port=False)
        self.assertEqual(rc, 2)
        self.assertIn(b"invalid URL", err)

    def test_unix_socket(self):
        self.cli("-a", "pw", "put", "k", "over unix")
        rc, out, err = self.cli("-u", "unix://%s?password=pw" % self.sock,
                                "--no-auth-warning", "get", "k", port=False)
        self.assertEqual((rc, out, err), (0, b"over unix", b""))
        rc, out, err = self.cli("-h", self.sock, "get", "k", port=False,
                                env={"KVCLI_AUTH": "pw"})
        self.assertEqual((rc, out), (0, b"over unix"), err)
        rc, out, err = self.cli("-h", self.sock, "get", "k", port=False)
        self.assertIn(b"authentication required", err)

    def restart_same_port(self):
        s = self.srv
        s.stop()
        s.log = open(s.log_path, "ab")
        s.proc = subprocess.Popen(s.argv(), stdout=s.log, stderr=subprocess.STDOUT)
        self.assertTrue(s._wait_ready(30), s.log_text())

    def test_auth_command_kept_for_reconnects(self):
        e = dict(os.environ)
        e.pop("KVCLI_AUTH", None)
        p = subprocess.Popen([KVCLI, "-p", str(self.srv.port)], env=e,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            p.stdin.write(b"auth pw\nput rk rv\n")
            p.stdin.flush()
            self.assertEqual(p.stdout.readline(), b"OK\n")
            self.assertEqual(p.stdout.readline(), b"OK\n")
            self.restart_same_port()
            # The first command meets the closed connection; the next one
            # reconnects, and AUTH goes out again without being typed.
            out, err = p.communicate(b"get rk\nget rk\n", timeout=60)
        finally:
            p.kill()
        lines = out.split(b"\n")
        self.assertTrue(lines[0].startswith(b"(error) "), (out, err))
        self.assertEqual(lines[1:], [b"rv", b""], (out, err))
        # A wrong -a, then the right password with auth: connecting with it
        # is the AUTH.
        rc, out, err = self.cli("-a", "nope", "--no-auth-warning",
                                input=b"get rk\nauth pw\nget rk\n")
        self.assertEqual(out, b"(error) AUTH_FAILED\nOK\nrv\n", err)

    def test_load_without_password(self):
        rows = b"".join(b'{"key":"k%d","value":"%s"}\n' % (i, b"v" * 100)
                        for i in range(2000))
        rc, out, err = self.cli("load", "-", input=rows)
        self.assertEqual(rc, 2)
        self.assertIn(b"authentication required", err)
        self.assertNotIn(b"FRAME_TOO_LARGE", err)
        rc, out, err = self.cli("-a", "pw", "--no-auth-warning", "load", "-",
                                input=rows)
        self.assertEqual(rc, 0, err)
        self.assertIn(b"rows 2000, errors 0", out)

    def run_pty(self, args, lines, env):
        """kvcli on a pseudo-terminal: type lines one by one, each after the
        previous prompt (or password prompt) appeared; the whole output."""
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(KVCLI, [KVCLI, "-p", str(self.srv.port)] + args, env)
        out, pos, done = b"", 0, False
        try:
            for want, line in lines:
                # Typed only once asked: libedit flushes input typed ahead.
                deadline = time.time() + 20
                while want not in out[pos:]:
                    self.assertLess(time.time(), deadline, out)
                    r, _, _ = select.select([fd], [], [], 1)
                    if r:
                        out += os.read(fd, 4096)
                pos = out.index(want, pos) + len(want)
                os.write(fd, line)
            while True:
                r, _, _ = select.select([fd], [], [], 20)
                self.assertTrue(r, out)
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            done = True
        finally:
            if not done:  # a failed check: never wait on a kvcli still reading
                os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
            os.close(fd)
        return out, status

    def test_askpass(self):
        env = dict(os.environ, HOME=self.tmp)
        env.pop("KVCLI_AUTH", None)
        out, status = self.run_pty(
            ["--askpass", "put", "ak", "typed"],
            [(b"Please input password: ", b"pw\n")], env)
        self.assertIn(b"OK", out)
        self.assertNotIn(b"pw\r\n", out)  # not echoed
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)

    def test_history_after_auth(self):
        home = tempfile.mkdtemp(dir=self.tmp)
        env = dict(os.environ, HOME=home)
        env.pop("KVCLI_AUTH", None)
        prompt = b"> "
        out, status = self.run_pty(
            [], [(prompt, b"auth pw\n"), (prompt, b"put hk hv\n"),
                 (prompt, b'  AUTH "pw"\n'), (prompt, b"get hk\n"),
                 (prompt, b"quit\n")], env)
        self.assertEqual(out.count(b"OK"), 3, out)
        self.assertIn(b'"hv"', out)
        with open(os.path.join(home, ".kvcli_history"), "rb") as f:
            hist = f.read()
        self.assertIn(b"put", hist)
        self.assertIn(b"hk", hist)
        self.assertNotIn(b"auth", hist.lower())
        self.assertNotIn(b"pw", hist)
        self.assertEqual(os.stat(os.path.join(home, ".kvcli_history")).st_mode & 0o777,
                         0o600)


if __name__ == "__main__":
    main()
