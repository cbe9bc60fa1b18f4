"""doorwire.py - the MongoDB door's messages on a raw socket, for the tests
that must see what a driver hides: how many replies came before kvd
closed, a message cut short, many connections at once, a SCRAM-SHA-256
conversation with a chosen (wrong) proof on one connection.

    s = Door(port)
    s.send(s.msg({"ping": 1, "$db": "admin"}))
    reply = s.reply()          # a dict (bson.decode), or None at EOF
    ok, reply = s.scram("kvd", b"secret")
"""

import base64
import hashlib
import hmac
import os
import socket
import struct

import bson

OP_MSG = 2013


def op_msg(doc, rid=1):
    """One OP_MSG of one body section."""
    body = bson.encode(doc)
    return struct.pack("<iiiiI", 21 + len(body), rid, 0, OP_MSG, 0) + \
        b"\x00" + body


class Door:
    def __init__(self, port, timeout=10, src=None):
        self.sock = socket.socket()
        if src:
            self.sock.bind((src, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""
        self.rid = 0

    def close(self):
        self.sock.close()

    def msg(self, doc):
        self.rid += 1
        return op_msg(doc, self.rid)

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def reply(self):
        """The next reply's body, or None once kvd closed."""
        try:
            while len(self.buf) < 4:
                self._fill()
            (n,) = struct.unpack("<i", self.buf[:4])
            while len(self.buf) < n:
                self._fill()
        except (EOFError, ConnectionResetError):
            return None
        m, self.buf = self.buf[:n], self.buf[n:]
        (op,) = struct.unpack("<i", m[12:16])
        assert op == OP_MSG, op
        assert m[20] == 0, m[20]
        return bson.decode(m[21:])

    def call(self, doc):
        self.send(self.msg(doc))
        return self.reply()

    def closed(self, timeout=5):
        """True once kvd has closed (after any replies, kept in buf)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def scram(self, user, password, proof=None):
        """A SCRAM-SHA-256 conversation (MongoDB's saslStart and
        saslContinue on admin): (True, reply) when authenticated, else
        (False, the failing reply, None at EOF).  proof: send these 32
        bytes as the client's proof instead of the right one."""
        cnonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = "n=%s,r=%s" % (user, cnonce)
        r = self.call({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                       "payload": bson.Binary(("n,," + first_bare).encode()),
                       "autoAuthorize": 1,
                       "options": {"skipEmptyExchange": True},
                       "$db": "admin"})
        if not r or r.get("ok") != 1:
            return False, r
        server_first = bytes(r["payload"]).decode()
        f = dict(kv.split("=", 1) for kv in server_first.split(","))
        final_bare = "c=biws,r=" + f["r"]
        if proof is None:
            salted = hashlib.pbkdf2_hmac("sha256", password,
                                         base64.b64decode(f["s"]), int(f["i"]))
            ckey = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
            stored = hashlib.sha256(ckey).digest()
            auth = ",".join((first_bare, server_first, final_bare)).encode()
            sig = hmac.new(stored, auth, hashlib.sha256).digest()
            proof = bytes(a ^ b for a, b in zip(ckey, sig))
        final = final_bare + ",p=" + base64.b64encode(proof).decode()
        r2 = self.call({"saslContinue": 1,
                        "conversationId": r["conversationId"],
                        "payload": bson.Binary(final.encode()),
                        "$db": "admin"})
        if not r2 or r2.get("ok") != 1:
            return False, r2
        while not r2.get("done"):
            r2 = self.call({"saslContinue": 1,
                            "conversationId": r["conversationId"],
                            "payload": bson.Binary(b""), "$db": "admin"})
            if not r2 or r2.get("ok") != 1:
                return False, r2
        return True, r2
