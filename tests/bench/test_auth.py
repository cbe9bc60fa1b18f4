"""test_auth.py - kvbench against a password-protected kvd: the password
from -a, -u, --askpass and KVCLI_AUTH (native and RESP drivers), the
warning when it is on the command line and its absence from the reports,
and the failures: no password (the load phase fails, the run never starts,
exit 1), a wrong one, failed operations in a run (exit 4); and the same
over kvd's Unix sockets (-u unix://, -H PATH, native and RESP)."""

import os
import shutil
import tempfile
import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import RunChecks, kvbench

PW = "bench-pw's s3cret"
WARNING = "password given on the command line"


class Auth(RunChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(threads=2, durability="async", resp=True,
                         args=["--requirepass", PW]).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def setUp(self):
        c = self.srv.client()
        self.assertEqual(c.call(AUTH, PW.encode())[0], OK)
        self.assertEqual(c.call(FLUSHALL), [OK])
        self.c = c

    def tearDown(self):
        self.c.close()

    def test_no_password(self):
        # every insert is refused: the load fails, the run never starts
        r = kvbench("-r", 200, "-n", 300, "c", port=self.srv.port, expect=1)
        self.assertIn("authentication required", r.err)
        self.assertIn("the load phase failed; the run phase was not started", r.err)
        self.assertIn("--askpass, KVCLI_AUTH, -a or -u", r.err)
        self.assertEqual([p["phase"] for p in r.report["phases"]], ["load"])
        self.assertEqual(r.phase("load")["errors"]["server"], 200)

    def test_option(self):
        r = kvbench("-a", PW, "-r", 200, "-n", 300, "c", port=self.srv.port)
        self.ok_run(r)
        self.assertIn(WARNING, r.err)
        # the reports quote the command line, never the password
        self.assertNotIn("s3cret", r.report["command"])
        self.assertIn("-a '*****************'", r.report["command"])
        r = kvbench("-a", PW, "--no-auth-warning", "-r", 200, "-n", 300, "c",
                    port=self.srv.port)
        self.assertNotIn(WARNING, r.err)

    def test_environment(self):
        r = kvbench("-r", 200, "-n", 300, "c", port=self.srv.port,
                    env={"KVCLI_AUTH": PW})
        self.ok_run(r)
        self.assertNotIn(WARNING, r.err)

    def test_askpass(self):
        # without a terminal, --askpass reads stdin's first line, and wins
        # over the environment
        r = kvbench("--askpass", "-r", 200, "-n", 300, "c", port=self.srv.port,
                    env={"KVCLI_AUTH": "wrong"}, input=PW + "\n")
        self.ok_run(r)
        self.assertNotIn(WARNING, r.err)
        # -a comes first, as in kvcli
        kvbench("--askpass", "-a", "wrong", "-r", 200, "-n", 300, "c", port=self.srv.port,
                input=PW + "\n", expect=1)

    def test_url(self):
        url = "kvd://:%s@127.0.0.1:%d" % (PW.replace("'", "%27").replace(" ", "%20"),
                                          self.srv.port)
        r = kvbench("-u", url, "-r", 200, "-n", 300, "b")
        self.ok_run(r)
        self.assertIn(WARNING, r.err)
        self.assertNotIn("s3cret", r.report["command"])
        self.assertEqual(r.report["target"], "kvd 127.0.0.1:%d" % self.srv.port)

    def test_bad_url(self):
        r = kvbench("-u", "http://127.0.0.1/", "c", expect=2)
        self.assertIn("kvd://[:PASSWORD@]HOST[:PORT]", r.err)

    def test_wrong_password(self):
        r = kvbench("-a", "wrong", "-r", 200, "-n", 300, "c", port=self.srv.port,
                    expect=1)
        self.assertIn("invalid password", r.err)
        self.assertEqual(self.c.call(COUNT, b"")[1], 0)

    def test_resp_driver(self):
        # --record value: kvd's RESP port has strings, not hashes, yet
        r = kvbench("-r", 200, "-n", 300, "--record", "value", "a", driver="redis",
                    port=self.srv.resp_port, env={"KVCLI_AUTH": PW})
        self.ok_run(r)
        r = kvbench("-r", 200, "-n", 300, "--record", "value", "a", driver="redis",
                    port=self.srv.resp_port, expect=1)
        self.assertIn("the load phase failed", r.err)

    def test_server_without_password(self):
        # kvd answers AUTH with DISABLED: not an error, as libpq ignores a
        # password nobody asked for
        with Server(threads=1, durability="async") as srv:
            r = kvbench("-r", 100, "-n", 100, "c", port=srv.port, env={"KVCLI_AUTH": "x"})
            self.assertEqual(r.phase("run")["errors"]["total"], 0)

    def test_failed_operations_exit_4(self):
        # reads of records never loaded: every operation of the run that
        # finds nothing is an error, and the exit status says so
        kvbench("-a", PW, "-r", 100, "--phase", "load", "c", port=self.srv.port)
        r = kvbench("-a", PW, "-r", 100000, "-p", "requestdistribution=uniform",
                    "--phase", "run", "-n", 300, "c", port=self.srv.port, expect=4)
        self.assertGreater(r.phase("run")["errors"]["not_found"], 250)
        self.assertIn("run phase: ", r.err)
        self.assertIn("not_found", r.err)


class UnixSocket(unittest.TestCase):
    """The same password over kvd's Unix sockets: native (-u unix://, -H
    PATH) and RESP (the redis driver with -H PATH)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kvbench-unix-")
        cls.sock = os.path.join(cls.dir, "kvd.sock")
        cls.resp_sock = os.path.join(cls.dir, "resp.sock")
        cls.srv = Server(threads=2, durability="async", resp=True,
                         args=["--requirepass", PW, "--unix-socket", cls.sock,
                               "--resp-unix-socket", cls.resp_sock]).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        # The redis driver's records (--record value: strings) and the kvd
        # driver's (hashes) share key names: a hash write meets a string
        # as Redis's does (WRONGTYPE), so each test starts empty.
        c = Client(self.srv.port)
        self.assertEqual(c.call(AUTH, PW.encode()), [OK])
        self.assertEqual(c.call(FLUSHALL), [OK])
        c.close()

    def test_url(self):
        url = "unix://%s?password=%s" % (self.sock, PW.replace("'", "%27").replace(" ", "%20"))
        r = kvbench("-u", url, "-r", 200, "-n", 300, "c")
        self.assertEqual((r.phase("load")["ops"], r.phase("run")["ops"]), (200, 300))
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        self.assertEqual(r.report["target"], "kvd unix:" + self.sock)
        self.assertNotIn("s3cret", r.report["command"])
        self.assertIn(WARNING, r.err)

    def test_host_path(self):
        r = kvbench("-H", self.sock, "-r", 200, "-n", 300, "c", env={"KVCLI_AUTH": PW})
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        r = kvbench("-H", self.sock, "-r", 200, "-n", 300, "c", expect=1)
        self.assertIn("authentication required", r.err)

    def test_resp_socket(self):
        r = kvbench("-H", self.resp_sock, "-r", 200, "-n", 300, "--record", "value", "a",
                    driver="redis", env={"KVCLI_AUTH": PW})
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        self.assertEqual(r.report["target"], "redis unix:" + self.resp_sock)


if __name__ == "__main__":
    main()
