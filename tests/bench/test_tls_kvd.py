"""test_tls_kvd.py - kvbench's kvd driver against kvd's own TLS port
(--tls-port, client certificates required): a short pipelined run with
every operation acknowledged and the records in kvd, and a run without a
client certificate refused (exit 1, the reason given).  Skipped (77) while
kvd has no --tls-port; certificates made now by
tests/integration/tlscerts.py."""

import os
import subprocess
import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import kvbench
from tlscerts import Certs


def kvd_has_tls():
    out = subprocess.run([os.environ["KVD_BIN"], "--help"],
                         capture_output=True, text=True, timeout=30)
    return "tls-port" in out.stdout + out.stderr


class KvdTLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not Certs.available() or not kvd_has_tls():
            raise unittest.SkipTest("no openssl command, or kvd without TLS")
        cls.certs = c = Certs()
        cls.port = free_port()
        cls.srv = Server(threads=2, durability="async", args=[
            "--tls-port", str(cls.port), "--tls-cert-file", c.server_cert,
            "--tls-key-file", c.server_key, "--tls-ca-cert-file", c.ca,
            "--tls-auth-clients", "yes"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        cls.certs.cleanup()

    def test_run(self):
        c = self.certs
        r = kvbench("--tls", "--cacert", c.ca, "--cert", c.client_cert,
                    "--key", c.client_key, "-t", 1, "-c", 2, "-P", 16, "-r",
                    500, "-n", 1000, "a", port=self.port)
        self.assertEqual(r.phase("load")["ops"], 500)
        self.assertEqual(r.phase("load")["errors"]["total"], 0)
        self.assertEqual(r.phase("run")["ops"], 1000)
        self.assertEqual(r.phase("run")["errors"]["total"], 0)
        cl = self.srv.client()
        self.assertEqual(cl.call(COUNT, b"")[1], 500)
        cl.close()

    def test_no_client_cert(self):
        r = kvbench("--tls", "--cacert", self.certs.ca, "-t", 1, "-r", 10,
                    "-n", 10, "c", port=self.port, expect=1)
        self.assertRegex(r.err, "certificate required|require a client "
                         "certificate")


if __name__ == "__main__":
    main()
