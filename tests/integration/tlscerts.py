"""tlscerts.py - test certificates made at test time with the `openssl` command.

Certs(dir=None) writes into a fresh temporary directory (removed by cleanup(),
or use it as a context manager), or into dir (made if missing, kept):

  ca.crt / ca.key                 a CA ("kvd test CA")
  server.crt / server.key         signed by ca, CN=127.0.0.1, SAN IP:127.0.0.1,
                                  DNS:localhost, serverAuth
  client.crt / client.key         signed by ca, CN=kvd test client, clientAuth
  expired.crt / expired.key       signed by ca, SAN as the server's, valid from
                                  2001 to 2002 (usable as server or client cert)
  ca2.crt / ca2.key               a second, unrelated CA
  server2.crt / server2.key       signed by ca2, SAN as the server's
  client2.crt / client2.key       signed by ca2 (a client the server must refuse)
  cadir/                          ca.crt under its OpenSSL hash name (c_rehash
                                  layout), for --tls-ca-cert-dir / CA dir options

Attributes hold the paths: c.ca, c.server_cert, c.server_key, c.client_cert,
c.client_key, c.expired_cert, c.expired_key, c.ca2, c.server2_cert,
c.server2_key, c.client2_cert, c.client2_key, c.ca_dir.  c.path(name) joins
a name onto the directory.  Certs.available() tells whether `openssl` runs
(tests exit 77 when it does not).

make_server_cert(name, ca="ca", cn=..., days=...) adds another server
certificate signed by the named CA (e.g. a renewed certificate for a rotation
test); it returns (crt, key) paths.
"""

import os
import shutil
import subprocess
import tempfile

OPENSSL = shutil.which("openssl") or "openssl"

SAN = "subjectAltName=IP:127.0.0.1,DNS:localhost"


def _run(*args, cwd=None):
    r = subprocess.run([OPENSSL] + list(args), cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" %
                           (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout.decode(errors="replace")


class Certs:
    def __init__(self, dir=None):
        self.owns_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(prefix="kvdtls-")
        os.makedirs(self.dir, exist_ok=True)
        self._serial = 1000
        self._make_ca("ca", "kvd test CA")
        self._make_ca("ca2", "kvd other CA")
        self.make_server_cert("server")
        self._make_leaf("client", "ca", "kvd test client", "clientAuth", None)
        self._make_leaf("expired", "ca", "127.0.0.1",
                        "serverAuth,clientAuth", SAN,
                        start="20010101000000Z", end="20020101000000Z")
        self.make_server_cert("server2", ca="ca2")
        self._make_leaf("client2", "ca2", "kvd other client", "clientAuth",
                        None)
        self.ca_dir = self.path("cadir")
        os.mkdir(self.ca_dir)
        h = _run("x509", "-hash", "-noout", "-in", self.path("ca.crt")).strip()
        shutil.copy(self.path("ca.crt"), os.path.join(self.ca_dir, h + ".0"))
        self.ca = self.path("ca.crt")
        self.ca2 = self.path("ca2.crt")
        self.server_cert, self.server_key = self.path("server.crt"), self.path("server.key")
        self.client_cert, self.client_key = self.path("client.crt"), self.path("client.key")
        self.expired_cert, self.expired_key = self.path("expired.crt"), self.path("expired.key")
        self.server2_cert, self.server2_key = self.path("server2.crt"), self.path("server2.key")
        self.client2_cert, self.client2_key = self.path("client2.crt"), self.path("client2.key")

    @staticmethod
    def available():
        try:
            _run("version")
            return True
        except (OSError, RuntimeError):
            return False

    def path(self, name):
        return os.path.join(self.dir, name)

    def _key(self, name):
        _run("genpkey", "-algorithm", "EC", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-out", self.path(name + ".key"))
        os.chmod(self.path(name + ".key"), 0o600)

    def _make_ca(self, name, cn):
        self._key(name)
        _run("req", "-x509", "-new", "-key", self.path(name + ".key"),
             "-subj", "/CN=" + cn, "-days", "3650", "-sha256",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-out", self.path(name + ".crt"))

    def _make_leaf(self, name, ca, cn, eku, san, days=825, start=None,
                   end=None):
        """A key and a certificate signed by ca.  start/end (YYYYMMDDHHMMSSZ)
        set the validity explicitly (openssl ca), else `days` from now."""
        self._key(name)
        csr = self.path(name + ".csr")
        _run("req", "-new", "-key", self.path(name + ".key"), "-subj",
             "/CN=" + cn, "-out", csr)
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("keyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % eku)
            if san:
                f.write(san + "\n")
        self._serial += 1
        if start is None:
            _run("x509", "-req", "-in", csr, "-CA", self.path(ca + ".crt"),
                 "-CAkey", self.path(ca + ".key"), "-set_serial",
                 str(self._serial), "-days", str(days), "-sha256",
                 "-extfile", ext, "-out", self.path(name + ".crt"))
        else:
            self._sign_dated(name, ca, csr, ext, start, end)
        return self.path(name + ".crt"), self.path(name + ".key")

    def _sign_dated(self, name, ca, csr, ext, start, end):
        """`openssl ca` is the one command that takes a start date."""
        d = self.path("ca-" + name)
        os.mkdir(d)
        open(os.path.join(d, "index.txt"), "w").close()
        with open(os.path.join(d, "serial"), "w") as f:
            f.write("%04X\n" % self._serial)
        conf = os.path.join(d, "ca.cnf")
        with open(conf, "w") as f:
            f.write("[ca]\ndefault_ca=c\n[c]\n"
                    "dir=%s\ndatabase=$dir/index.txt\nserial=$dir/serial\n"
                    "new_certs_dir=$dir\ndefault_md=sha256\npolicy=p\n"
                    "copy_extensions=none\n[p]\ncommonName=supplied\n" % d)
        _run("ca", "-batch", "-config", conf, "-cert", self.path(ca + ".crt"),
             "-keyfile", self.path(ca + ".key"), "-in", csr, "-startdate",
             start, "-enddate", end, "-extfile", ext, "-notext", "-out",
             self.path(name + ".crt"))

    def make_server_cert(self, name, ca="ca", cn="127.0.0.1", days=825):
        return self._make_leaf(name, ca, cn, "serverAuth", SAN, days=days)

    def cleanup(self):
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
