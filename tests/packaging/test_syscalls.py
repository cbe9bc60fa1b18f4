"""test_syscalls.py - kvd makes no system call that kvd.service denies.

packaging/kvd.service carries a SystemCallFilter deny list.  A call kvd
needs landing in it would fail only on a real systemd host, so this test
runs the kvd just built under strace -f through start-up, both protocols,
the metrics endpoint, expiry, idle timeouts, a backup, a restore, both Unix
sockets (made, served, removed), SIGUSR1, SIGHUP and SIGTERM, and checks every call it made against the groups the unit denies
(expanded with `systemd-analyze syscall-filter`).  Skipped without strace
or systemd-analyze, where ptrace is not allowed, and for sanitizer builds
(their run-time makes calls the shipped binary does not).
"""

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

SRC = os.environ["KVD_SOURCE_DIR"]
BUILD = os.environ["KVD_BUILD_DIR"]
KVD = os.environ["KVD_BIN"]
KVCLI = os.path.join(BUILD, "kvcli", "kvcli")
UNIT = os.path.join(SRC, "packaging", "kvd.service")
READY = re.compile(rb"Z (\d+) I kvd \S+ ready: \S+ port (\d+)")


def skip(why):
    print("skipped: " + why)
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def denied_groups():
    groups = []
    with open(UNIT) as f:
        for line in f:
            if line.startswith("SystemCallFilter=~"):
                groups += line.split("=", 1)[1][1:].split()
    return groups


def expand(name, seen):
    """The system calls of a systemd group, nested groups included."""
    if name in seen:
        return set()
    seen.add(name)
    out = subprocess.run(["systemd-analyze", "syscall-filter", name],
                         capture_output=True, text=True, check=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        calls |= expand(word, seen) if word.startswith("@") else {word}
    return calls


class Traced:
    """kvd under strace -f; the trace goes to one file per run."""

    def __init__(self, tmp, name, args):
        self.trace = os.path.join(tmp, name + ".trace")
        self.log = os.path.join(tmp, name + ".log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["strace", "-f", "-qq", "-o", self.trace, KVD, "--port", "0", *args],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(self.log, "rb") as f:
                m = READY.search(f.read())
            if m:
                self.pid, self.port = int(m.group(1)), int(m.group(2))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.proc.kill()
        with open(self.log, "rb") as f:
            raise RuntimeError("kvd under strace did not start:\n" + f.read().decode(errors="replace"))

    def stop(self):
        os.kill(self.pid, signal.SIGTERM)
        self.proc.wait(30)
        with open(self.log, "rb") as f:
            log = f.read()
        assert b"stopped cleanly" in log, log.decode(errors="replace")

    def calls(self):
        made = set()
        with open(self.trace) as f:
            for line in f:
                m = re.match(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", line)
                if m:
                    made.add(m.group(1))
        return made


def kvcli(port, *args, stdin=None):
    r = subprocess.run([KVCLI, "-p", str(port), *args], input=stdin,
                       capture_output=True, text=True, timeout=60)
    if r.returncode not in (0, 1):
        raise AssertionError("kvcli %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.stdout


def workload(srv, resp_port, metrics_port, backup):
    p = srv.port
    kvcli(p, "ping")
    kvcli(p, "put", "a", "1")
    kvcli(p, "put", "t", "x", "--ttl", "20")
    kvcli(p, "mput", "b", "2", "c", "3")
    kvcli(p, "get", "a")
    kvcli(p, "mget", "a", "b", "zz")
    kvcli(p, "incr", "n", "5")
    kvcli(p, "append", "a", "more")
    kvcli(p, "expire", "b", "30")
    kvcli(p, "ttl", "c")
    kvcli(p, "getdel", "c")
    kvcli(p, "scan")
    kvcli(p, "count")
    kvcli(p, "stats")
    rows = "".join('{"key": "k%d", "value": "v%d"}\n' % (i, i) for i in range(3000))
    kvcli(p, "load", "-", stdin=rows)
    kvcli(p, "dump")
    # RESP, inline and multibulk.
    with socket.create_connection(("127.0.0.1", resp_port), 10) as s:
        s.sendall(b"PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nr\r\n$1\r\n1\r\n*1\r\n$4\r\nINFO\r\n")
        time.sleep(0.2)
        s.recv(65536)
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10) as r:
        assert b"kvd_info" in r.read()
    # An idle connection closed by idle-timeout, and the reaper at work.
    idle = socket.create_connection(("127.0.0.1", p), 10)
    time.sleep(1.5)
    idle.close()
    kvcli(p, "backup", os.path.basename(backup))  # a name under --backup-dir
    kvcli(p, "del", "a")
    # Both Unix sockets, then the signals: SIGUSR1 (logrotate) and SIGHUP.
    for path, req in ((srv.unix, struct.pack(">I", 2) + b"\x91\x02"),
                      (srv.unix + "-resp", b"PING\r\n")):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall(req)
            assert s.recv(65536)
    os.kill(srv.pid, signal.SIGUSR1)
    os.kill(srv.pid, signal.SIGHUP)
    time.sleep(0.3)


def main():
    for tool in ("strace", "systemd-analyze"):
        if not shutil.which(tool):
            skip(tool + " is not installed")
    ldd = subprocess.run(["ldd", KVD], capture_output=True, text=True).stdout
    if "libasan" in ldd or "libtsan" in ldd or "libubsan" in ldd:
        skip("a sanitizer build makes calls of its own")
    if subprocess.run(["strace", "-qq", "-o", "/dev/null", "true"]).returncode:
        skip("strace cannot trace here (ptrace not allowed)")
    groups = denied_groups()
    if not groups:
        skip("kvd.service has no SystemCallFilter")
    denied, seen = set(), set()
    for g in groups:
        denied |= expand(g, seen)

    tmp = tempfile.mkdtemp(prefix="kvd-syscalls-")
    made = set()
    try:
        data, backup = os.path.join(tmp, "data"), os.path.join(tmp, "backup")
        resp_port, metrics_port = free_port(), free_port()
        srv = Traced(tmp, "serve", [
            "--data-dir", data, "--threads", "2", "--durability", "async",
            "--flush-interval-ms", "50", "--reaper-interval-ms", "10",
            "--idle-timeout", "1", "--resp-port", str(resp_port),
            "--metrics-port", str(metrics_port), "--backup-dir", tmp,
            "--unix-socket", os.path.join(tmp, "kvd.sock"),
            "--resp-unix-socket", os.path.join(tmp, "kvd.sock-resp")])
        srv.unix = os.path.join(tmp, "kvd.sock")
        try:
            workload(srv, resp_port, metrics_port, backup)
            srv.stop()
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()
        made |= srv.calls()
        # Restore into a second data directory, in sync mode.
        rst = Traced(tmp, "restore", ["--data-dir", os.path.join(tmp, "restored"),
                                       "--restore", backup, "--threads", "2"])
        try:
            assert kvcli(rst.port, "get", "n").strip() == "5"
            kvcli(rst.port, "put", "after", "restore")
            rst.stop()
        finally:
            if rst.proc.poll() is None:
                rst.proc.kill()
        made |= rst.calls()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for need in ("io_uring_setup", "io_uring_enter", "fdatasync"):
        assert need in made, "the trace misses %s: strace output not understood" % need
    bad = sorted(made & denied)
    print("kvd made %d distinct system calls; kvd.service denies %d (%s)"
          % (len(made), len(denied), " ".join(groups)))
    if bad:
        sys.exit("kvd.service's SystemCallFilter denies calls kvd makes: " + " ".join(bad))
    print("ok")


if __name__ == "__main__":
    main()
