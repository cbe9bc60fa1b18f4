"""test_tls_kvd.py - kvcli against kvd's own TLS port (--tls-port,
--tls-auth-clients yes): put and get with a client certificate, by address
and by a kvds:// URL with the certificate's DNS name; refused, exit status 2
and the reason: a wrong CA, no client certificate, a client certificate from
another CA.  Skipped (77) while kvd has no --tls-port; certificates made now
by tests/integration/tlscerts.py."""

import os
import subprocess
import unittest

from kvdtest import main
from tlstest import KvdTLSPort

KVCLI = os.environ["KVCLI"]


class KvdTLS(KvdTLSPort, unittest.TestCase):
    SERVER = dict(threads=1)

    def cli(self, *args):
        p = subprocess.run([KVCLI, "-p", str(self.port)] + list(args),
                           capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def test_put_get(self):
        c = self.certs
        tls = ["--tls", "--cacert", c.ca, "--cert", c.client_cert, "--key",
               c.client_key]
        self.assertEqual(self.cli(*tls, "put", "k", "v")[:2], (0, "OK\n"))
        self.assertEqual(self.cli(*tls, "get", "k")[:2], (0, "v"))
        rc, out, err = self.cli("-u", "kvds://localhost:%d" % self.port,
                                *tls[1:], "get", "k")
        self.assertEqual((rc, out), (0, "v"), err)

    def test_refused(self):
        c = self.certs
        rc, out, err = self.cli("--tls", "--cacert", c.ca2, "--cert",
                                c.client_cert, "--key", c.client_key, "get",
                                "k")
        self.assertEqual(rc, 2)
        self.assertIn("certificate verify failed", err)
        # No client certificate for a kvd that requires one.
        rc, out, err = self.cli("--tls", "--cacert", c.ca, "get", "k")
        self.assertEqual(rc, 2)
        self.assertRegex(err, "certificate required|require a client "
                         "certificate")
        # A certificate from another CA.
        rc, out, err = self.cli("--tls", "--cacert", c.ca, "--cert",
                                c.client2_cert, "--key", c.client2_key,
                                "get", "k")
        self.assertEqual(rc, 2, err)



if __name__ == "__main__":
    main()
