"""replutil.py - helpers of the replication tests (test_replication.py,
test_replication_faults.py): clients that log in when a server has a
password (srv.pw), a server's keys in order, INFO replication and the
resync counters, bulk writes, and waiting for a replica to match.
"""

import os
import sys
import time

from kvdtest import AUTH, OK, PUT, SCAN, STATS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "resp"))
from resputil import Raw  # noqa: E402


def ncli(srv):
    """A native client of srv, authenticated when srv has a password."""
    c = srv.client()
    if getattr(srv, "pw", None):
        assert c.call(AUTH, srv.pw.encode()) == [OK]
    return c


def rcli(srv, timeout=10):
    """A RESP connection to srv, authenticated when srv has a password."""
    r = Raw(srv.resp_port, timeout=timeout)
    if getattr(srv, "pw", None):
        assert r.call("AUTH", srv.pw) == b"OK"
    return r


def dump(srv):
    """Every key and value of srv, in key order (native SCAN)."""
    c = ncli(srv)
    out, start = [], None
    try:
        while True:
            st, items, nxt = c.call(SCAN, None, start, None, 10000, 0)
            assert st == OK, st
            out += [(items[i], items[i + 1]) for i in range(0, len(items), 2)]
            if nxt is None:
                return out
            start = nxt
    finally:
        c.close()


def wait_until(fn, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def same(a, b, timeout=30):
    """Wait until replica b holds what a holds; a's keys and values."""
    want = dump(a)
    wait_until(lambda: dump(b) == want, timeout, "the replica to match")
    return want


def info_section(srv, section):
    """INFO section of srv (RESP) as a dict."""
    r = rcli(srv)
    try:
        text = r.call("INFO", section).decode()
    finally:
        r.close()
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def info(srv):
    return info_section(srv, "replication")


def syncs(srv):
    """srv's resyncs answered as a primary: (full, partial ok, partial
    err), INFO stats's sync_full, sync_partial_ok, sync_partial_err; the
    replication map of native STATS must agree."""
    i = info_section(srv, "stats")
    got = tuple(int(i[k]) for k in ("sync_full", "sync_partial_ok",
                                    "sync_partial_err"))
    c = ncli(srv)
    try:
        m = c.call(STATS)[1][b"replication"]
    finally:
        c.close()
    assert got == (m[b"sync_full"], m[b"sync_partial_ok"],
                   m[b"sync_partial_err"]), (got, m)
    return got


def put_many(srv, lo, hi, tag=b"v", size=0, batch=1000):
    """Keys k0000000.. with values tag + i, padded to size bytes."""
    c = ncli(srv)
    try:
        for b in range(lo, hi, batch):
            rs = c.pipeline([(PUT, b"k%07d" % i,
                              (tag + b"%d" % i).ljust(size, b"."))
                             for i in range(b, min(hi, b + batch))])
            assert all(r == [OK] for r in rs), rs[:3]
    finally:
        c.close()
