"""test_tls.py - kvcli over TLS: --tls with --cacert / --cacertdir, a
kvds:// URL with a password, a client certificate (--cert, --key) for a
port that requires one, --sni, --insecure and its warning; and the refusals,
each with its message and exit status 2: a wrong CA, a name the certificate
does not hold, TLS to a plain port, a missing CA file, TLS options without
--tls.  The TLS ports are tests/client/tlsproxy.py in front of a real kvd;
the certificates are made now (tests/integration/tlscerts.py).
test_tls_kvd.py runs kvcli against kvd's own TLS port."""

import os
import subprocess
import unittest

from kvdtest import main
from tlstest import ProxiedTLS

KVCLI = os.environ["KVCLI"]


class TLS(ProxiedTLS, unittest.TestCase):
    SERVER = dict(threads=1, args=["--requirepass", "pw"])

    def cli(self, *args, input=None, port=None):
        e = dict(os.environ, KVCLI_AUTH="pw")
        pre = ["-p", str(port or self.tls.port)] if port != 0 else []
        p = subprocess.run([KVCLI] + pre + list(args), input=input,
                           capture_output=True, timeout=60, env=e)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def test_put_get(self):
        ca = ["--tls", "--cacert", self.certs.ca]
        self.assertEqual(self.cli(*ca, "put", "t1", "v1")[:2], (0, "OK\n"))
        self.assertEqual(self.cli(*ca, "get", "t1")[:2], (0, "v1"))
        # By name (the certificate's DNS name) and with a CA directory.
        self.assertEqual(self.cli("--tls", "--cacertdir", self.certs.ca_dir,
                                  "-h", "localhost", "get", "t1")[:2],
                         (0, "v1"))
        # Batch mode: several commands on the one TLS connection.
        rc, out, err = self.cli(*ca, input=b"put t2 v2\nget t2\ncount t\n")
        self.assertEqual((rc, out), (0, "OK\nv2\n2\n"), err)

    def test_url(self):
        url = "kvds://:pw@127.0.0.1:%d" % self.tls.port
        rc, out, err = self.cli("--no-auth-warning", "--cacert",
                                self.certs.ca, "-u", url, "put", "u1", "x",
                                port=0)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(self.cli("--cacert", self.certs.ca, "-u", url,
                                  "get", "u1", port=0)[:2], (0, "x"))
        # --tls makes a kvd:// URL TLS too, whatever the order.
        for args in (["--tls", "-u", url.replace("kvds", "kvd")],
                     ["-u", url.replace("kvds", "kvd"), "--tls"]):
            rc, out, err = self.cli("--no-auth-warning", "--cacert",
                                    self.certs.ca, *args, "get", "u1", port=0)
            self.assertEqual((rc, out), (0, "x"), err)
        # kvds:// is TLS: against the plain port it fails, never in clear.
        rc, out, err = self.cli("--cacert", self.certs.ca, "-u",
                                "kvds://127.0.0.1:%d" % self.srv.port,
                                "get", "u1", port=0)
        self.assertEqual(rc, 2)
        self.assertIn("TLS handshake", err)

    def test_client_cert(self):
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca, "--cert",
                                self.certs.client_cert, "--key",
                                self.certs.client_key, "put", "c1", "y",
                                port=self.req.port)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("kvd test client", self.req.peers)
        # Without --key, the key is read from the --cert file.
        both = self.certs.path("client-both.pem")
        with open(both, "w") as f:
            for p in (self.certs.client_cert, self.certs.client_key):
                with open(p) as g:
                    f.write(g.read())
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca, "--cert",
                                both, "get", "c1", port=self.req.port)
        self.assertEqual((rc, out), (0, "y"), err)
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca, "get",
                                "c1", port=self.req.port)
        self.assertEqual(rc, 2)
        # The server's alert, or (when the reset overtakes it) the hint.
        self.assertRegex(err, "certificate required|require a client "
                         "certificate")

    def test_wrong_ca(self):
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca2, "get",
                                "k")
        self.assertEqual(rc, 2)
        self.assertIn("kvcli: cannot connect: 127.0.0.1:%d: TLS handshake: "
                      "certificate verify failed" % self.tls.port, err)

    def test_name_mismatch(self):
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca, "--sni",
                                "db.example.org", "get", "k")
        self.assertEqual(rc, 2)
        self.assertIn("hostname mismatch", err)
        self.assertIn("db.example.org", self.tls.snis)

    def test_insecure(self):
        rc, out, err = self.cli("--tls", "--insecure", "--cacert",
                                self.certs.ca2, "put", "i1", "z")
        self.assertEqual(rc, 0, err)
        self.assertIn("Warning: --insecure", err)

    def test_plain_port(self):
        rc, out, err = self.cli("--tls", "--cacert", self.certs.ca, "get",
                                "k", port=self.srv.port)
        self.assertEqual(rc, 2)
        self.assertIn("TLS handshake", err)

    def test_bad_options(self):
        rc, out, err = self.cli("--tls", "--cacert", "/nonexistent/ca.pem",
                                "get", "k")
        self.assertEqual(rc, 2)
        self.assertIn("/nonexistent/ca.pem", err)
        rc, out, err = self.cli("--cacert", self.certs.ca, "get", "k")
        self.assertEqual(rc, 2)
        self.assertIn("need --tls", err)
        rc, out, err = self.cli("--tls", "-h", "/tmp/kvd.sock", "get", "k")
        self.assertEqual(rc, 2)
        self.assertIn("Unix socket", err)


if __name__ == "__main__":
    main()
