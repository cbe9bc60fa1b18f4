"""peers.py - the servers bench/compare measures: kvd, redis-server and
PostgreSQL, each started privately on a free loopback port in a temporary
directory of its own, and stopped and removed afterwards.

Used by bench/compare and by tests/bench, so the tests exercise the very
start-up code the comparison relies on.  Only Debian's packages are used:
redis-server, and postgresql's initdb/pg_ctl (run as an unprivileged user,
since PostgreSQL refuses to run as root).
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PG_BINDIRS = ["/usr/lib/postgresql/15/bin"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


class PeerError(Exception):
    pass


class Peer:
    """One server.  key names it in tables ("redis-always"), label says what
    it is, driver is kvbench's driver for it."""

    key = label = driver = ""
    max_conns = None  # connections it can take; None: no limit worth noting
    unsupported = set()  # compare's steps this server cannot run

    def __init__(self):
        self.port = None
        self.proc = None
        self.dir = None
        self.command = ""

    def kvbench_args(self):
        return ["-D", self.driver, "--port", str(self.port)]

    def pid(self):
        return self.proc.pid if self.proc else None

    def log_tail(self, n=20):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def _wait_port(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc and self.proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise PeerError("%s did not start:\n%s" % (self.key, self.log_tail()))

    def _spawn(self, argv):
        self.command = " ".join(argv)
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        self._wait_port()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self):
        self.stop()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.cleanup()


class Kvd(Peer):
    """kvd; with resp=True it is measured through its RESP port with the
    redis driver (hiredis), the same client library as redis-server."""

    def __init__(self, kvd_bin, durability="sync", threads=2, resp=False):
        super().__init__()
        self.bin, self.durability, self.threads, self.resp = kvd_bin, durability, threads, resp
        self.driver = "redis" if resp else "kvd"
        self.key = "kvd-resp" if resp else "kvd-" + durability
        self.label = "kvd, durability %s%s" % (durability, ", RESP port" if resp else "")
        # YCSB E's Redis scans need EVALSHA, which kvd's RESP port lacks.
        self.unsupported = {"e"} if resp else set()
        self.resp_port = None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="compare-kvd-")
        self.port = free_port()
        argv = [self.bin, "--bind", "127.0.0.1", "--port", str(self.port),
                "--data-dir", os.path.join(self.dir, "data"),
                "--threads", str(self.threads), "--durability", self.durability]
        if self.resp:
            self.resp_port = free_port()
            argv += ["--resp-port", str(self.resp_port)]
        self._spawn(argv)
        self.command = "kvd --threads %d --durability %s%s" % (
            self.threads, self.durability, " --resp-port PORT" if self.resp else "")

    def kvbench_args(self):
        if self.resp:
            return ["-D", "redis", "--port", str(self.resp_port)]
        return super().kvbench_args()

    def version(self):
        return first_line([self.bin, "--version"])


class Redis(Peer):
    driver = "redis"
    MODES = {
        "none": (["--appendonly", "no"], "redis-server, persistence off"),
        "always": (["--appendonly", "yes", "--appendfsync", "always"],
                   "redis-server, appendfsync always (fsync per write)"),
        "everysec": (["--appendonly", "yes", "--appendfsync", "everysec"],
                     "redis-server, appendfsync everysec"),
    }

    def __init__(self, mode="none", binary="redis-server"):
        super().__init__()
        self.mode, self.bin = mode, binary
        self.key = "redis-" + mode
        self.label = self.MODES[mode][1]

    @staticmethod
    def available(binary="redis-server"):
        return shutil.which(binary) is not None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="compare-redis-")
        self.port = free_port()
        extra = self.MODES[self.mode][0]
        self._spawn([self.bin, "--port", str(self.port), "--bind", "127.0.0.1",
                     "--dir", self.dir, "--save", "", "--daemonize", "no"] + extra)
        self.command = "redis-server --save '' " + " ".join(extra)

    def version(self):
        return first_line([self.bin, "--version"])


class Postgres(Peer):
    driver = "postgres"
    key = "postgres"
    label = "PostgreSQL 15, fsync on, synchronous_commit on"

    def __init__(self, max_connections=300):
        super().__init__()
        self.max_conns = max_connections - 10
        self.max_connections = max_connections
        self.bindir = next((d for d in PG_BINDIRS if os.path.exists(d + "/initdb")), None)
        self.user = None
        self.postmaster = None

    @staticmethod
    def available():
        return any(os.path.exists(d + "/initdb") for d in PG_BINDIRS)

    def _as_user(self, argv):
        if os.geteuid() != 0:
            return argv
        return ["runuser", "-u", self.user, "--"] + argv

    def _run(self, argv):
        r = subprocess.run(self._as_user(argv), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise PeerError("%s failed:\n%s%s" % (argv[0], r.stdout, r.stderr))

    def _pick_user(self):
        """PostgreSQL will not run as root: use the postgres account."""
        if os.geteuid() != 0:
            return pwd.getpwuid(os.geteuid()).pw_name
        for name in ("postgres", "nobody"):
            try:
                pwd.getpwnam(name)
                return name
            except KeyError:
                pass
        raise PeerError("no unprivileged user to run PostgreSQL as")

    def start(self):
        if not self.bindir:
            raise PeerError("PostgreSQL 15 is not installed")
        self.user = self._pick_user()
        self.dir = tempfile.mkdtemp(prefix="compare-pg-")
        pw = pwd.getpwnam(self.user)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        data = os.path.join(self.dir, "data")
        self._run([self.bindir + "/initdb", "-D", data, "-U", "kvbench", "-A", "trust",
                   "-E", "UTF8", "--no-sync"])
        self.port = free_port()
        opts = ("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=%d"
                % (self.port, self.dir, self.max_connections))
        self._run([self.bindir + "/pg_ctl", "-D", data, "-l", os.path.join(self.dir, "log"),
                   "-o", opts, "-w", "-t", "60", "start"])
        with open(os.path.join(data, "postmaster.pid")) as f:
            self.postmaster = int(f.readline())
        self.command = "postgres -c max_connections=%d (defaults otherwise)" % self.max_connections

    def pid(self):
        return self.postmaster

    def kvbench_args(self):
        return super().kvbench_args() + ["--conninfo", "user=kvbench dbname=postgres"]

    def stop(self):
        if self.postmaster:
            try:
                self._run([self.bindir + "/pg_ctl", "-D", os.path.join(self.dir, "data"),
                           "-m", "fast", "-w", "stop"])
            except PeerError:
                os.kill(self.postmaster, signal.SIGKILL)
            self.postmaster = None

    def version(self):
        return first_line([self.bindir + "/postgres", "--version"]) if self.bindir else "absent"
