"""membound.py - asserts that a kvd process never holds more memory than its
configured limits allow, instead of assuming it.

    with membound.Peak(self, srv) as m:
        ...the attack: a request, a queue, a subscription table...
    m.assert_within(max_output + max_value, "EXEC of 64 GETs")

Peak measures the kernel's own account of the process, which needs no
privilege and no particular machine: at the start of the block it resets
the peak resident set size (writing 5 to /proc/PID/clear_refs, Linux 4.0
and later) and notes the resident size then; at the end it reads the peak
(VmHWM in /proc/PID/status).  The growth is the highest resident size
reached during the block, less where it started, so every byte the server
held at any moment of the block counts, however briefly, and whatever it
freed before the block does not.  A memory cgroup would give the same
figure (and could kill the server at the bound), but which one a machine
has, and whether a test may create one, differs from machine to machine.

assert_within takes the bytes the configured limits allow the block to
hold (the caller adds them up from the options it started kvd with: a
reply limit, a value size, a queue limit) and allows SLACK more: the
allocator's rounding, the receive buffers an io thread touches for the
first time, a request buffered whole.  Under AddressSanitizer (which the
suite runs with an 8 MiB quarantine, Makefile test-asan) its shadow adds
an eighth of what kvd touches, so the allowance grows by a quarter;
ThreadSanitizer's shadow is several times every byte: the block is
skipped there.  KVD_MEMBOUND_VERBOSE=1 prints every figure measured.
"""

import os
import sys

from kvdtest import build_sanitizer

MiB = 1 << 20
# Room beyond what the limits allow: see the module's docstring.
SLACK = 24 * MiB


def _status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak(pid):
    """Reset VmHWM to the current resident size; False if the kernel
    refused (no CONFIG_PROC_PAGE_MONITOR, or a kernel before 4.0)."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Peak:
    """The peak of a kvd process's resident memory during a with block."""

    def __init__(self, test, srv):
        self.test = test
        self.srv = srv
        self.pid = srv.proc.pid
        self.base = self.peak = 0

    def __enter__(self):
        if build_sanitizer() == "thread":
            self.test.skipTest("resident memory bounds do not hold with "
                               "ThreadSanitizer's shadow")
        # After a start a helper thread makes a journal segment ahead,
        # which is not what the block measures.
        self.srv.settled()
        if not _reset_peak(self.pid):
            # Without a reset the old peak stands: the figure is right
            # only if the process is at its peak now.
            rss, hwm = _status(self.pid, "VmRSS"), _status(self.pid, "VmHWM")
            if hwm - rss > 8 * MiB:
                self.test.skipTest("cannot reset VmHWM (/proc/PID/clear_refs)")
        self.base = _status(self.pid, "VmRSS")
        return self

    def __exit__(self, *exc):
        self.peak = _status(self.pid, "VmHWM")
        return False

    @property
    def grown(self):
        """Bytes above the resident size at the block's start, at the
        block's highest point."""
        return max(0, self.peak - self.base)

    def assert_within(self, allowed, what):
        """The block grew kvd by at most allowed bytes (what its limits
        permit) plus SLACK."""
        bound = allowed + SLACK
        if build_sanitizer() == "address":
            bound += bound // 4
        if os.environ.get("KVD_MEMBOUND_VERBOSE"):
            print("membound: %s: grew %.1f MiB, limits allow %.1f MiB"
                  % (what, self.grown / MiB, allowed / MiB), file=sys.stderr)
        self.test.assertLessEqual(
            self.grown, bound,
            "%s: kvd's peak grew %.1f MiB; its limits allow %.1f MiB "
            "(+%.0f MiB slack)" % (what, self.grown / MiB, allowed / MiB,
                                   (bound - allowed) / MiB))
        return self.grown



def recv_exactly(sock, n, timeout=60):
    """n bytes from sock into one buffer: the tests read replies of many
    MiB, which a reader appending chunk after chunk to bytes would copy
    over and over."""
    buf, got = bytearray(n), 0
    view = memoryview(buf)
    sock.settimeout(timeout)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError("kvd closed the connection")
        got += k
    return bytes(buf)
