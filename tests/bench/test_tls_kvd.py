"""test_tls_kvd.py - kvbench's kvd driver against kvd's own TLS port
(--tls-port, client certificates required): a short pipelined run with
every operation acknowledged and the records in kvd, and a run without a
client certificate refused (exit 1, the reason given).  Skipped (77) while
kvd has no --tls-port; certificates made now by
tests/integration/tlscerts.py."""

import unittest

from kvdtest import *  # noqa: F401,F403
from kvbenchtest import RunChecks, kvbench
from tlstest import KvdTLSPort


class KvdTLS(KvdTLSPort, RunChecks, unittest.TestCase):
    SERVER = dict(threads=2, durability="async")

    def test_run(self):
        c = self.certs
        r = kvbench("--tls", "--cacert", c.ca, "--cert", c.client_cert,
                    "--key", c.client_key, "-t", 1, "-c", 2, "-P", 16, "-r",
                    500, "-n", 1000, "a", port=self.port)
        cl = self.srv.client()
        self.ok_run(r, 500, 1000, client=cl)
        cl.close()

    def test_no_client_cert(self):
        r = kvbench("--tls", "--cacert", self.certs.ca, "-t", 1, "-r", 10,
                    "-n", 10, "c", port=self.port, expect=1)
        self.assertRegex(r.err, "certificate required|require a client "
                         "certificate")


if __name__ == "__main__":
    main()
