"""test_restart.py - a restart right after a clean stop always works.

Fifty times: start kvd on the same port, write a key, SIGTERM, wait for the
process to exit, connect at once, then start kvd again on the same port at
once (what systemd's restart does).  kvd closes its listening sockets as
soon as it begins to stop, and none outlives the process, so:

  - the connection made after the exit is refused (not accepted by a
    socket left behind and then reset);
  - every start succeeds (no "Address already in use");
  - every key written before is read back.
"""

import socket
import subprocess
import unittest

from kvdtest import GET, OK, PUT, Server, free_port, main

CYCLES = 50


class SamePortServer(Server):
    """A kvd that always starts on the port chosen once."""

    def start(self, timeout=15):
        if self.port is None:
            self.port = free_port()
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        if not self._wait_ready(timeout):
            raise AssertionError("kvd did not start on port %d:\n%s"
                                 % (self.port, self.log_text().decode(errors="replace")[-2000:]))
        return self


class Restart(unittest.TestCase):
    def test_fifty_immediate_restarts(self):
        srv = SamePortServer(threads=2)
        try:
            ghosts = []
            for i in range(CYCLES):
                srv.start()
                c = srv.client()
                self.assertEqual(c.call(PUT, b"k%02d" % i, b"v%02d" % i), [OK])
                c.close()
                srv.stop()
                try:
                    s = socket.create_connection(("127.0.0.1", srv.port), 2)
                except ConnectionRefusedError:
                    continue
                # a listener outlived the process
                s.settimeout(2)
                try:
                    s.sendall(b"\0\0\0\x02\x91\x02")
                    s.recv(64)
                except OSError:
                    pass
                s.close()
                ghosts.append(i)
            self.assertEqual(ghosts, [], "connections accepted after kvd exited")
            srv.start()
            c = srv.client()
            for i in range(CYCLES):
                self.assertEqual(c.call(GET, b"k%02d" % i), [OK, b"v%02d" % i])
            c.close()
            srv.stop()
        finally:
            srv.cleanup()


if __name__ == "__main__":
    main()
