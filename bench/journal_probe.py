#!/usr/bin/env python3
"""journal_probe - two figures of issue 13 that bench/targets does not take:
what a 100-byte SET costs the disk, and how long a restart takes when the
memtable it must rebuild from the journal is full.

    bench/journal_probe.py bytes  [--p 16] [--keys N] [--secs S] KVD...
    bench/journal_probe.py replay [--keys N] KVD...

bytes: each KVD (a binary path; several are measured in turn, the first
one again at the end, so a drift of the machine shows) starts in sync mode
(--threads 2) in a temporary directory, is filled with N keys (SET
key:%012d, 100 bytes, pipelined) and restarted, so the measurement starts
on a checkpointed store.  Then `redis-benchmark -t set -r N -d 100 -c 50
-P p` runs for S seconds (-n sized from a short calibration run), kvd is
stopped with SIGTERM (it checkpoints what its memtables hold before it
exits) and the bytes it caused to be written are read: write_bytes of
/proc/PID/io read after exit but before the process is reaped (page-cache
pages it dirtied: the journal's and LMDB's data pages, each counted when it
became dirty, as the device will write it), and the sectors written on the
device that holds the data directory (/proc/diskstats: also the
filesystem's own journal, and every other process's writes: on a shared
machine, read it as an upper bound).  Both are divided by the SETs
redis-benchmark reported.

replay: each KVD starts in sync mode with --checkpoint-interval-ms 3600000
(no checkpoint for age), takes SETs of N distinct keys (so that the
memtables hold N keys, as full as their memtable-size lets them be without
a checkpoint: the script stops at 90% of it, both read from STATS), and is
killed with
SIGKILL.  Then the same command starts again on the same directory and the
time from exec to the first GET of the last key written that returns its
value on the RESP port is printed, with kvd's own log lines on recovery.

Loopback only, one server at a time; nothing is asserted.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

VALUE = b"x" * 100


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(sock, buf):
    """One reply (simple, error, integer or bulk) from buf + sock."""
    while b"\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            raise ConnectionError("closed")
        buf += d
    line, rest = buf.split(b"\r\n", 1)
    if line[:1] != b"$":
        return line, rest
    n = int(line[1:])
    if n < 0:
        return None, rest
    while len(rest) < n + 2:
        d = sock.recv(65536)
        if not d:
            raise ConnectionError("closed")
        rest += d
    return rest[:n], rest[n + 2:]


def fill(port, first, n, batch=2000):
    """SET key:%012d for first <= i < first + n, pipelined."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        buf = b""
        i = first
        while i < first + n:
            m = min(batch, first + n - i)
            s.sendall(b"".join(resp("SET", "key:%012d" % j, VALUE) for j in range(i, i + m)))
            for _ in range(m):
                r, buf = read_reply(s, buf)
                if r != b"+OK":
                    raise RuntimeError("SET: %r" % r)
            i += m


def stats(kvcli, port):
    out = subprocess.run([kvcli, "-p", str(port), "stats"], capture_output=True, text=True,
                         timeout=30).stdout
    st = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) == 2:
            st[f[0]] = f[1]
    return st


def memtable_bytes(kvcli, port):
    st = stats(kvcli, port)
    return sum(int(v) for k, v in st.items() if k.endswith(".memtable_bytes"))


def disk_sectors(path):
    """Sectors written on the block device holding path (None if unknown)."""
    dev = os.stat(path).st_dev
    maj, mnr = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if int(p[0]) == maj and int(p[1]) == mnr:
                return int(p[9])
    return None


def write_bytes(pid):
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return None


class Server:
    def __init__(self, binary, extra=()):
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="journal-probe-")
        self.extra = list(extra)
        self.proc = None

    def start(self):
        self.port, self.resp_port = peers.free_port(), peers.free_port()
        self.argv = [self.bin, "--bind", "127.0.0.1", "--port", str(self.port),
                     "--resp-port", str(self.resp_port), "--data-dir",
                     os.path.join(self.dir, "data"), "--threads", "2",
                     "--durability", "sync"] + self.extra
        self.log = open(os.path.join(self.dir, "log"), "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log)
        return t0

    def wait_ready(self, key=b"ping", want=None, timeout=120):
        """Seconds until GET key answers want (or PING answers, if want is None)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.resp_port), timeout=5) as s:
                    s.sendall(resp("GET", key) if want is not None else resp("PING"))
                    r, _ = read_reply(s, b"")
                    if (want is None and r == b"+PONG") or (want is not None and r == want):
                        return
            except (OSError, ConnectionError):
                pass
            time.sleep(0.001)
        raise RuntimeError("kvd not ready: " + self.log_tail())

    def stop_counted(self, sig=signal.SIGTERM):
        """Stop with sig; write_bytes read after exit, before reaping."""
        self.proc.send_signal(sig)
        os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        wb = write_bytes(self.proc.pid)
        self.proc.wait()
        self.log.close()
        return wb

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        self.proc.wait()
        self.log.close()

    def log_tail(self, n=20):
        with open(os.path.join(self.dir, "log"), errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def benchmark(port, n, keys, p):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-n", str(n),
            "-r", str(keys), "-d", "100", "-c", "50", "-P", str(p), "--csv"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=3600).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f and f[0] == "SET":
            return float(f[1])
    raise RuntimeError("redis-benchmark: " + out[-300:])


def probe_bytes(binary, a):
    srv = Server(binary)
    try:
        srv.start()
        srv.wait_ready()
        fill(srv.resp_port, 0, a.keys)
        srv.stop()
        srv.start()
        srv.wait_ready()
        rate = benchmark(srv.resp_port, 20000, a.keys, a.p)  # calibration
        n = max(20000, int(rate * a.secs))
        sec0, t0 = disk_sectors(srv.dir), time.monotonic()
        wb0 = write_bytes(srv.proc.pid)
        rate = benchmark(srv.resp_port, n, a.keys, a.p)
        wb1 = srv.stop_counted()
        secs = time.monotonic() - t0
        sec1 = disk_sectors(srv.dir)
        res = {"bin": binary, "n": n, "rate": rate, "secs": secs,
               "wb": (wb1 - wb0) / n,
               "dev": (sec1 - sec0) * 512 / n if sec0 is not None else None}
        print("%-40s %9d SETs at %8.0f/s: %7.0f bytes/SET written by kvd (write_bytes), "
              "%7.0f bytes/SET on the device (diskstats, %.1f s incl. the final checkpoint)"
              % (binary, n, rate, res["wb"], res["dev"] or -1, secs), flush=True)
        return res
    finally:
        srv.cleanup()


def probe_replay(binary, a):
    srv = Server(binary, ["--checkpoint-interval-ms", "3600000"])
    try:
        srv.start()
        srv.wait_ready()
        # the shards' memtable sizes as kvd took them (auto by default)
        limit = sum(int(v) for k, v in stats(a.kvcli, srv.port).items()
                    if k.endswith(".memtable_size"))
        i, step = 0, 20000
        while i < a.keys:
            fill(srv.resp_port, i, min(step, a.keys - i))
            i += min(step, a.keys - i)
            if memtable_bytes(a.kvcli, srv.port) >= 0.9 * limit:
                break
        mem = memtable_bytes(a.kvcli, srv.port)
        st = stats(a.kvcli, srv.port)
        ckpts = sum(int(v) for k, v in st.items() if k.endswith(".checkpoints"))
        last = b"key:%012d" % (i - 1)
        srv.stop(signal.SIGKILL)
        logged = os.path.getsize(os.path.join(srv.dir, "log"))
        t0 = srv.start()
        srv.wait_ready(last, VALUE)
        ready = time.monotonic() - t0
        with open(os.path.join(srv.dir, "log"), errors="replace") as f:
            f.seek(logged)
            lines = [ln for ln in f if "replayed" in ln]
        print("%-40s %d keys written, memtables %.1f MiB (memtable-size %.1f MiB in all), "
              "%d checkpoint(s) before the kill; ready (GET of the last key) %.3f s after exec"
              % (binary, i, mem / 1048576.0, limit / 1048576.0, ckpts, ready), flush=True)
        for ln in lines:
            print("    " + ln.strip())
        srv.stop()
        return ready
    finally:
        srv.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["bytes", "replay"])
    ap.add_argument("kvd", nargs="+")
    ap.add_argument("--p", type=int, default=16, help="bytes: redis-benchmark -P")
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--secs", type=float, default=20.0, help="bytes: length of the run")
    ap.add_argument("--kvcli", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "kvcli", "kvcli"))
    a = ap.parse_args()
    print("load average at start: %s" % open("/proc/loadavg").read().strip(), flush=True)
    order = a.kvd + ([a.kvd[0]] if len(a.kvd) > 1 else [])
    for b in order:
        (probe_bytes if a.what == "bytes" else probe_replay)(b, a)
    print("load average at end: %s" % open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
