"""test_tls.py - libkvclient over TLS (test_tls.c) against a real kvd behind
TLS ports (tlsproxy.py), with certificates made now by tlscerts.py; then,
when kvd has --tls-port, the same cases against kvd's own TLS port (with
--tls-auth-clients optional, and yes for the port that requires a client
certificate).

Besides test_tls.c's own checks: the port that asks for a client
certificate saw the one test_tls.c presented, and the name it connected to
("localhost") arrived as SNI while an IP address was never sent as one.
"""

import os
import socket
import subprocess
import sys
import threading

from kvdtest import Server
from tlscerts import Certs
from tlsproxy import TLSProxy
from tlstest import kvd_has_tls, kvd_tls


def closing_backend():
    """A backend that closes every connection at once: the TLS port in
    front of it closes cleanly right after the handshake."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)

    def serve():
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return s


def run(binary, certs, tls_port, req_port, plain_port, gone_port):
    env = dict(os.environ, KVT_TLS_PORT=str(tls_port),
               KVT_REQ_PORT=str(req_port), KVT_PLAIN_PORT=str(plain_port),
               KVT_GONE_PORT=str(gone_port), KVT_CERTS=certs.dir)
    out = subprocess.run([binary], env=env, capture_output=True, timeout=240)
    sys.stdout.write(out.stdout.decode())
    sys.stderr.write(out.stderr.decode())
    assert out.returncode == 0, out.returncode


def main():
    if not Certs.available():
        print("no openssl command: skipped")
        sys.exit(77)
    binary = os.environ["KVT_TLS_BIN"]
    with Certs() as certs, Server() as srv:
        opt = TLSProxy(srv.port, certs.server_cert, certs.server_key,
                       ca=certs.ca)
        req = TLSProxy(srv.port, certs.server_cert, certs.server_key,
                       ca=certs.ca, require_cert=True)
        back = closing_backend()
        gone = TLSProxy(back.getsockname()[1], certs.server_cert,
                        certs.server_key)
        run(binary, certs, opt.port, req.port, srv.port, gone.port)
        assert "kvd test client" in req.peers, req.peers
        assert "" not in req.peers, req.peers
        assert "localhost" in opt.snis, opt.snis
        assert "127.0.0.1" not in opt.snis, opt.snis
        assert "db.example.org" in opt.snis, opt.snis
        opt.close()
        req.close()
        if kvd_has_tls():
            a, a_port = kvd_tls(certs, "optional")
            b, b_port = kvd_tls(certs, "yes")
            try:
                run(binary, certs, a_port, b_port, a.port, gone.port)
            finally:
                for k in (a, b):
                    k.stop()
                    k.cleanup()
            print("kvd's own TLS port: ok")
        else:
            print("kvd has no --tls-port: its own TLS port not tested")
        gone.close()
        back.close()
    print("ok")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
