"""resputil.py - helpers for the RESP tests: a raw socket client with its own
small RESP2 reply reader (independent of kvd and of any Redis library), and
runners for the Debian Redis tools.
"""

import os
import shutil
import socket
import subprocess
import unittest

import kvdtest
from kvdtest import Server, Stream  # noqa: F401  (Server: re-exported)


class Error(Exception):
    """An error reply: str(e) is its text without the leading '-'."""


class Raw(Stream):
    """A blocking RESP2 connection that sends bytes as given."""

    def __init__(self, port, timeout=10):
        super().__init__(port, timeout)

    def send(self, data):
        self.send_raw(data)

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        """One reply: bytes, int, None, list, or an Error instance."""
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest
        if t == b"-":
            return Error(rest.decode("latin-1"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise AssertionError("bad reply line %r" % line)

    def call(self, *args):
        self.send(encode(*args))
        return self.reply()

    def closed(self, timeout=5):
        """True once kvd closed the connection (after any replies)."""
        return self.closed_by_peer(timeout)


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = b"%d" % a
        elif isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def need(*tools):
    """Skip (kvdtest.main exits 77) unless every tool is installed."""
    for t in tools:
        if not shutil.which(t) and not os.path.exists(t):
            raise unittest.SkipTest("%s is not installed (scripts/deps.sh test)" % t)


def cli(port, *args, stdin=None, timeout=60):
    """Run redis-cli against port; returns (exit code, stdout, stderr)."""
    p = subprocess.run(["redis-cli", "-p", str(port)] + [str(a) for a in args],
                       input=stdin, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def main():
    kvdtest.main()
