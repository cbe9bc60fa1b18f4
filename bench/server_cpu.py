#!/usr/bin/python3
"""bench/server_cpu.py PID OUT CMD...: runs CMD and writes to OUT the CPU
seconds the server spent meanwhile (PID's process and its descendants, with
the children it reaped: PostgreSQL's backends) and CMD's own (kvbench's).
On a shared machine a run's ops/s depends on what else runs; the CPU a
server spends per operation much less (bench/peer_servers.sh)."""
import os, resource, subprocess, sys, time
tck = os.sysconf("SC_CLK_TCK")
def stat(p):
    try:
        with open("/proc/%d/stat" % p) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[1]), [int(x) for x in v[11:15]]
    except (OSError, IndexError, ValueError):
        return None, None
def server(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            ppid, _ = stat(int(d))
            if ppid is not None:
                kids.setdefault(ppid, []).append(int(d))
    todo, total = [root], 0
    while todo:
        p = todo.pop()
        _, t = stat(p)
        if t:
            total += t[0] + t[1] + (t[2] + t[3] if p == root else 0)
        todo += kids.get(p, [])
    return total / tck
pid, out = int(sys.argv[1]), sys.argv[2]
s0, c0 = server(pid), resource.getrusage(resource.RUSAGE_CHILDREN)
rc = subprocess.call(sys.argv[3:])
time.sleep(0.3)  # the backends that ended: reaped by the postmaster
s1, c1 = server(pid), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as f:
    f.write("%.3f %.3f\n" % (s1 - s0, c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime))
sys.exit(rc)
