"""tlstest.py - the TLS set-ups that the libkvclient, kvcli and kvbench tests
share, so that each is written once: a kvd with its own TLS port, and a real
kvd behind two TLS proxies (tests/client/tlsproxy.py).  The certificates are
made now by tlscerts.py.

  kvd_has_tls()          whether the kvd under test has --tls-port
  kvd_tls(certs, auth, **server)
                         a started kvd with a TLS port beside its plain one,
                         --tls-auth-clients auth: (server, TLS port);
                         server: Server's keyword arguments
  KvdTLSPort             mixin for a unittest.TestCase class: cls.certs,
                         cls.srv (Server(**SERVER)) and cls.port, its TLS
                         port, which requires a client certificate; skipped
                         without openssl or without --tls-port
  ProxiedTLS             mixin for a unittest.TestCase class: cls.certs,
                         cls.srv (Server(**SERVER)), cls.tls a TLS port in
                         front of it that asks for no client certificate,
                         cls.req one that requires one (signed by certs.ca);
                         skipped without openssl

Put the mixin first: class T(ProxiedTLS, unittest.TestCase).
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "client"))

from kvdtest import Server, free_port  # noqa: E402
from tlscerts import Certs  # noqa: E402
from tlsproxy import TLSProxy  # noqa: E402


def kvd_has_tls():
    out = subprocess.run([os.environ["KVD_BIN"], "--help"],
                         capture_output=True, text=True, timeout=30)
    return "tls-port" in out.stdout + out.stderr


def kvd_tls(certs, auth, **server):
    """A kvd with a TLS port beside its plain one; (server, TLS port)."""
    port = free_port()
    args = ["--tls-port", str(port), "--tls-cert-file", certs.server_cert,
            "--tls-key-file", certs.server_key, "--tls-ca-cert-file", certs.ca,
            "--tls-auth-clients", auth] + list(server.pop("args", ()))
    return Server(args=args, **server).start(), port


class KvdTLSPort:
    SERVER = {}

    @classmethod
    def setUpClass(cls):
        if not Certs.available() or not kvd_has_tls():
            raise unittest.SkipTest("no openssl command, or kvd without TLS")
        cls.certs = Certs()
        cls.srv, cls.port = kvd_tls(cls.certs, "yes", **cls.SERVER)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()
        cls.certs.cleanup()


class ProxiedTLS:
    SERVER = {}

    @classmethod
    def setUpClass(cls):
        if not Certs.available():
            raise unittest.SkipTest("no openssl command")
        cls.certs = c = Certs()
        cls.srv = Server(**cls.SERVER).start()
        cls.tls = TLSProxy(cls.srv.port, c.server_cert, c.server_key)
        cls.req = TLSProxy(cls.srv.port, c.server_cert, c.server_key,
                           ca=c.ca, require_cert=True)

    @classmethod
    def tearDownClass(cls):
        cls.tls.close()
        cls.req.close()
        cls.srv.stop()
        cls.srv.cleanup()
        cls.certs.cleanup()
