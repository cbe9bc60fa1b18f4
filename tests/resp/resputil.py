"""resputil.py - helpers for the RESP tests: a raw socket client with its own
small RESP2 reply reader (independent of kvd and of any Redis library),
runners for the Debian Redis tools, and redis-sentinel processes watching
kvd (test_sentinel_basic.py, test_failover.py).
"""

import os
import shutil
import signal
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


def need_redis_70():
    """Skip unless redis-server 7.0 is installed (the version whose
    behaviour the tests compare kvd with)."""
    need("redis-server")
    out = subprocess.run(["redis-server", "--version"], capture_output=True,
                         text=True).stdout
    if " v=7.0." not in out:
        raise unittest.SkipTest("redis-server 7.0 needed, found: " + out.strip())


def spread_conns(port, n):
    """n connections to port, opened again until they are on more than one
    io thread (a CLIENT ID carries its thread's index in its top 16 bits):
    (connections, their ids)."""
    for _ in range(200):
        cs = [Raw(port) for _ in range(n)]
        ids = [c.call("CLIENT", "ID") for c in cs]
        if len({i >> 48 for i in ids}) > 1:
            return cs, ids
        for c in cs:
            c.close()
    raise AssertionError("connections never spread over the io threads")


def start_sentinel(tmp, name, master, master_port, *conf):
    """A redis-sentinel on a free port, its sentinel.conf and sentinel.log
    in tmp/name, monitoring master at 127.0.0.1:master_port with quorum 2,
    with conf's lines added: (process, port, directory).  It may not answer
    yet."""
    port = kvdtest.free_port()
    d = os.path.join(tmp, name)
    os.mkdir(d)
    path = os.path.join(d, "sentinel.conf")
    with open(path, "w") as f:
        f.write("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"
                "logfile %s\n"
                "sentinel monitor %s 127.0.0.1 %d 2\n"
                % (port, d, os.path.join(d, "sentinel.log"), master,
                   master_port))
        f.write("".join(line + "\n" for line in conf))
    p = subprocess.Popen(["redis-sentinel", path], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return p, port, d


def sentinel_master(c, master):
    """SENTINEL MASTER master through the redis-py client c, as a dict (a
    flat list under RESP2)."""
    m = c.execute_command("SENTINEL", "MASTER", master)
    return m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))


def sentinel_logs(tmp, tail):
    """The last tail characters of every tmp/*/sentinel.log, for a failure
    message."""
    out = []
    for name in sorted(os.listdir(tmp)):
        path = os.path.join(tmp, name, "sentinel.log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                out.append("--- %s\n%s" % (name, f.read()[-tail:]))
    return out


def stop_all(procs):
    """SIGTERM every process, then wait for each (SIGKILL after 10 s)."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    kvdtest.main()
