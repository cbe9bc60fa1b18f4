"""test_prompt.py - kvcli's prompt on a real terminal, driven through tmux:
Tab completes command names (not file names) and a command's options; a
line entered before Ctrl-C is in ~/.kvcli_history (HOME in a temporary
directory) and comes back with the Up arrow in the next session; clear
empties the screen."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

from kvdtest import Server, main

KVCLI = os.environ["KVCLI"]


class Prompt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("tmux"):
            raise unittest.SkipTest("tmux is not installed (scripts/deps.sh test)")
        cls.srv = Server(threads=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.srv.cleanup()

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="kvcli-prompt-")
        # A file a file-name completion would offer for "pi".
        open(os.path.join(self.home, "pizza"), "w").close()
        self.socks = []
        self.prompt = "127.0.0.1:%d> " % self.srv.port

    def tearDown(self):
        for sock in self.socks:
            subprocess.run(["tmux", "-L", sock, "kill-server"],
                           capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock] + list(args),
                              capture_output=True, timeout=30, check=True,
                              text=True).stdout

    def start(self):
        cmd = "cd %s && env HOME=%s TERM=xterm %s -p %d" % (
            self.home, self.home, KVCLI, self.srv.port)
        # A tmux server of its own each time: one whose last session just
        # ended may still be exiting.
        self.sock = "kvcli-test-%d-%s-%d" % (os.getpid(), self._testMethodName,
                                             len(self.socks))
        self.socks.append(self.sock)
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null",
                        "new-session", "-d", "-x", "120", "-y", "30", cmd],
                       check=True, timeout=30)
        self.wait_for(lambda s: s.rstrip().endswith(self.prompt.rstrip()))

    def screen(self):
        return self.tmux("capture-pane", "-p")

    def wait_for(self, cond, what="screen"):
        deadline = time.time() + 20
        while True:
            s = self.screen()
            if cond(s):
                return s
            self.assertLess(time.time(), deadline, "%s never came:\n%s" % (what, s))
            time.sleep(0.05)

    def keys(self, *k):
        self.tmux("send-keys", "-t", "0", *k)

    def session_alive(self):
        return subprocess.run(["tmux", "-L", self.sock, "has-session"],
                              capture_output=True).returncode == 0

    def test_tab_completes_commands_and_options(self):
        self.start()
        self.keys("pi", "Tab")
        self.wait_for(lambda s: self.prompt + "ping" in s, "ping completed")
        self.keys("Enter")
        self.wait_for(lambda s: '"PONG"' in s, "PONG")
        # a command's options, after its arguments
        self.keys("put k v --kee", "Tab")
        self.wait_for(lambda s: "put k v --keepttl" in s, "--keepttl completed")
        self.keys("Enter")
        self.wait_for(lambda s: s.count("OK") == 1, "OK")
        # case does not matter, completion gives the command's name
        self.keys("GETD", "Tab")
        self.wait_for(lambda s: self.prompt + "getdel" in s, "getdel completed")
        self.keys("C-u", "clear", "Enter")
        self.wait_for(lambda s: "PONG" not in s and
                      s.strip() == self.prompt.strip(), "a cleared screen")

    def test_tab_completes_version_2_commands(self):
        self.start()
        self.keys("incrbyf", "Tab")
        self.wait_for(lambda s: self.prompt + "incrbyfloat" in s,
                      "incrbyfloat completed")
        self.keys("C-u", "txn --if-a", "Tab")
        self.wait_for(lambda s: "txn --if-absent" in s, "--if-absent completed")
        self.keys("C-u", "bitcount k 0 -1 --b", "Tab")
        self.wait_for(lambda s: "bitcount k 0 -1 --bit" in s, "--bit completed")
        self.keys("Enter")
        self.wait_for(lambda s: "(integer) " in s, "an integer")

    def test_history_kept_after_ctrl_c(self):
        hist = os.path.join(self.home, ".kvcli_history")
        self.start()
        self.keys("put hk 1", "Enter")
        self.wait_for(lambda s: "OK" in s, "OK")
        self.keys("incr hk", "Enter")
        self.wait_for(lambda s: "(integer) 2" in s, "(integer) 2")
        self.keys("C-c")
        deadline = time.time() + 20
        while self.session_alive() and time.time() < deadline:
            time.sleep(0.05)
        # Ctrl-C ended kvcli (or, if the prompt survived it, the lines must
        # be on disk all the same).
        with open(hist, "rb") as f:
            text = f.read()
        self.assertIn(b"put\\040hk\\0401", text)
        self.assertIn(b"incr\\040hk", text)
        if self.session_alive():
            self.tmux("kill-server")
        # The next session has them: Up brings back the last one.
        self.start()
        self.keys("Up")
        self.wait_for(lambda s: self.prompt + "incr hk" in s, "incr recalled")
        self.keys("Enter")
        self.wait_for(lambda s: "(integer) 3" in s, "(integer) 3")


if __name__ == "__main__":
    main()
