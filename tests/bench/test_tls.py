"""test_tls.py - kvbench over TLS: a short run of the kvd driver with --tls
and --cacert (every operation acknowledged, the records in kvd), a kvds://
URL, a client certificate for a port that requires one; and the refusals
with their messages: a wrong CA (exit 1, the verification failure named),
TLS options without --tls, --tls with a driver that has none.  The TLS
ports are tests/client/tlsproxy.py in front of a real kvd; the certificates
are made now (tests/integration/tlscerts.py)."""

import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import RunChecks, kvbench
from tlstest import ProxiedTLS


class TLS(ProxiedTLS, RunChecks, unittest.TestCase):
    SERVER = dict(threads=2, durability="async")

    def setUp(self):
        self.c = self.srv.client()
        self.assertEqual(self.c.call(FLUSHALL), [OK])

    def tearDown(self):
        self.c.close()

    def test_run(self):
        r = kvbench("--tls", "--cacert", self.certs.ca, "-t", 1, "-c", 2,
                    "-P", 4, "-r", 200, "-n", 300, "a", port=self.tls.port)
        self.ok_run(r)

    def test_url(self):
        r = kvbench("--cacert", self.certs.ca, "-u",
                    "kvds://localhost:%d" % self.tls.port, "-t", 1, "-r",
                    200, "-n", 300, "c")
        self.ok_run(r)

    def test_client_cert(self):
        r = kvbench("--tls", "--cacert", self.certs.ca, "--cert",
                    self.certs.client_cert, "--key", self.certs.client_key,
                    "-t", 1, "-r", 200, "-n", 300, "c", port=self.req.port)
        self.ok_run(r)
        self.assertIn("kvd test client", self.req.peers)

    def test_wrong_ca(self):
        r = kvbench("--tls", "--cacert", self.certs.ca2, "-t", 1, "-r", 10,
                    "-n", 10, "c", port=self.tls.port, expect=1)
        self.assertIn("certificate verify failed", r.err)

    def test_usage(self):
        r = kvbench("--cacert", self.certs.ca, "-r", 10, "-n", 10, "c",
                    port=self.tls.port, expect=None)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("need --tls", r.err)
        r = kvbench("--tls", "-r", 10, "-n", 10, "c", driver="redis",
                    port=self.tls.port, expect=None)
        self.assertNotEqual(r.rc, 0)
        self.assertRegex(r.err, "redis driver has no TLS|not built in")


if __name__ == "__main__":
    main()
