"""tlsproxy.py - a TLS-terminating proxy for the client tests: it accepts TLS
on a loopback port (Python's ssl module, OpenSSL underneath) and forwards the
plain bytes to a real kvd, so libkvclient, kvcli and kvbench can be tested
over TLS independently of kvd's own TLS listener.

  p = TLSProxy(backend_port, cert, key, ca=None, require_cert=False)
  p.port            the TLS port
  p.peers           the client certificates' subject CNs, one per connection
                    that completed its handshake ("" when none was sent)
  p.errors          the handshakes that failed, OpenSSL's reason each
  p.snis            the server names clients sent (SNI), None when none
  p.close()

ca with require_cert=False asks for a client certificate without demanding
one (CERT_OPTIONAL); require_cert=True refuses a client without one.
Everything is bounded: one thread per connection, loopback only, a
connection idle for 60 s is dropped.
"""

import select
import socket
import ssl
import threading


class TLSProxy:
    def __init__(self, backend_port, cert, key, ca=None, require_cert=False):
        self.backend_port = backend_port
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        if ca:
            self.ctx.load_verify_locations(ca)
            self.ctx.verify_mode = (ssl.CERT_REQUIRED if require_cert
                                    else ssl.CERT_OPTIONAL)
        self.peers = []
        self.errors = []
        self.snis = []
        self.ctx.sni_callback = lambda sock, name, ctx: self.snis.append(name)
        self.lock = threading.Lock()
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.closing = False
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    def _accept(self):
        while not self.closing:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, raw):
        raw.settimeout(10)
        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as e:
            with self.lock:
                self.errors.append(getattr(e, "reason", None) or str(e))
            raw.close()
            return
        cert = tls.getpeercert()
        cn = ""
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    cn = v
        with self.lock:
            self.peers.append(cn)
        try:
            back = socket.create_connection(("127.0.0.1", self.backend_port),
                                            timeout=10)
        except OSError:
            tls.close()
            return
        try:
            self._pump(tls, back)
        except (ssl.SSLError, OSError):
            pass
        finally:
            tls.close()
            back.close()

    @staticmethod
    def _pump(tls, back):
        """Both directions in one thread (an SSL object must not be read
        and written by two threads at once)."""
        tls.setblocking(False)
        back.setblocking(False)
        to_back, to_tls = b"", b""
        while True:
            w = ([back] if to_back else []) + ([tls] if to_tls else [])
            rl = ([tls] if len(to_back) < (1 << 20) else []) + \
                 ([back] if len(to_tls) < (1 << 20) else [])
            if not tls.pending():
                r, wr, _ = select.select(rl, w, [], 60)
                if not r and not wr:
                    return
            else:
                r, wr = [tls], []
            if tls in r:
                try:
                    while True:
                        d = tls.recv(65536)
                        if not d:
                            return
                        to_back += d
                        if not tls.pending():
                            break
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
            if back in r:
                try:
                    d = back.recv(65536)
                    if not d:
                        # kvd closed: send what it said, then close.
                        tls.setblocking(True)
                        tls.sendall(to_tls)
                        return
                    to_tls += d
                except BlockingIOError:
                    pass
            if to_back:
                try:
                    to_back = to_back[back.send(to_back):]
                except BlockingIOError:
                    pass
            if to_tls:
                try:
                    to_tls = to_tls[tls.send(to_tls):]
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass

    def close(self):
        self.closing = True
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.lsock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
