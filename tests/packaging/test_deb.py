"""test_deb.py - the Debian packages install, run and purge cleanly here.

Builds kvd, kvd-tools, libkvclient1 and libkvclient-dev with
packaging/build-debs.sh (in a tree of its own), checks what they hold and
depend on (the server's package holds kvd alone and does not depend on
libedit, hiredis or libpq: kvcli and kvbench are in kvd-tools), installs
them with dpkg into this machine, and then, with nothing but the installed
files:

- the postinst made the kvd system user and group, /var/lib/kvd,
  /var/log/kvd and /var/backups/kvd with the right owners and modes, made
  /etc/kvd/kvd.conf readable by the kvd group only, and enabled kvd.service
  (the multi-user.target.wants link) although systemd is not running here,
  as dh_installsystemd's scripts do; the installed unit passes
  `systemd-analyze verify`;
- kvd runs as the kvd user from /usr/sbin/kvd with /etc/kvd/kvd.conf (on
  free ports), and /usr/bin/kvcli talks to it: put, get, load, count, a
  backup into /var/backups/kvd that a second kvd restores; RESP and
  /metrics answer; SIGHUP reloads, SIGTERM stops with status 0;
- examples/kvc_example.c builds with nothing but
  `pkg-config --cflags --libs kvclient` and runs against it; a CMake
  project finds the library with find_package(kvclient) and links it both
  shared and static;
- installing again (an upgrade's path) keeps the user and the data;
  `dpkg --remove` keeps data, user and conffiles; `dpkg --purge` removes
  them all but the backups, and afterwards the machine is as it was.

Root and dpkg only (else skipped, exit 77).  It refuses to run (skips) when
kvd's packages, user or directories already exist, so it never touches a
real installation; it holds a lock so that two runs never overlap, cleans up
in `finally` (and on SIGTERM), and a marker file lets the next run clean up
after a run that was killed outright.
"""

import fcntl
import glob
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

SRC = os.environ["KVD_SOURCE_DIR"]
DEB_BUILD = os.environ.get("KVD_DEB_BUILD_DIR") or os.path.join(
    os.environ["KVD_BUILD_DIR"], "tests", "packaging", "deb-build")
PKGS = ["kvd-tools", "kvd", "libkvclient-dev", "libkvclient1"]  # purge order
WANTS = "/etc/systemd/system/multi-user.target.wants/kvd.service"
LOCK = "/run/lock/kvd-packaging-test.lock" if os.path.isdir("/run/lock") else "/tmp/kvd-packaging-test.lock"
MARK = "/var/tmp/kvd-packaging-test.installed"
BACKUP = "/var/backups/kvd/packaging-test"
# What the packages create outside dpkg's file lists (the postinst), and
# must not exist before the test.
OWN_PATHS = ["/etc/kvd", "/var/lib/kvd", "/var/log/kvd", "/var/backups/kvd",
             "/etc/systemd/system/multi-user.target.wants/kvd.service"]
DEADLINE = time.time() + 900  # the ctest TIMEOUT is 1200: cleanup always gets its turn
READY = re.compile(rb"Z (\d+) I kvd \S+ ready: \S+ port (\d+)")

CLIENT_C = r"""
#include <kvclient.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    kvc_conn *c;
    kvc_val v;
    int rc;
    if (argc < 2 || kvc_create(&c)) return 2;
    if ((rc = kvc_connect(c, "127.0.0.1", (unsigned)atoi(argv[1])))) {
        fprintf(stderr, "connect: %s\n", kvc_errmsg(c));
        return 1;
    }
    if ((rc = kvc_get(c, "pkg:greeting", 12, &v))) {
        fprintf(stderr, "get: %s\n", kvc_status_name(rc));
        return 1;
    }
    printf("%s %.*s\n", kvc_version(), (int)v.len, (const char *)v.p);
    kvc_close(c);
    return 0;
}
"""
CLIENT_CMAKE = """
cmake_minimum_required(VERSION 3.25)
project(pkguser C)
find_package(kvclient REQUIRED)
add_executable(user_shared user.c)
target_link_libraries(user_shared PRIVATE kvclient::kvclient)
add_executable(user_static user.c)
target_link_libraries(user_static PRIVATE kvclient::kvclient_static)
"""


class Skip(Exception):
    pass


def log(msg):
    print("packaging_deb: " + msg, flush=True)


def left():
    t = DEADLINE - time.time()
    if t < 5:
        raise AssertionError("out of time (the test's own deadline)")
    return t


def run(*cmd, check=True, input=None, env=None, cwd=None, timeout=None):
    r = subprocess.run(cmd, capture_output=True, text=True, input=input, env=env,
                       cwd=cwd, timeout=timeout or min(left(), 300))
    if check and r.returncode:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def dpkg(*args, check=True):
    """dpkg, waiting (up to 2 minutes) while another dpkg or apt holds its lock."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for _ in range(60):
        r = subprocess.run(["dpkg", *args], capture_output=True, text=True, env=env, timeout=300)
        if r.returncode and "lock" in r.stderr and "locked" in r.stderr:
            time.sleep(2)
            continue
        if check and r.returncode:
            raise AssertionError("dpkg %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r
    raise AssertionError("dpkg stayed locked by another process")


def pkg_status(name):
    """dpkg's two-letter state ("ii", "rc", ...) or "" when unknown."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", name],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def getent(db, name):
    return subprocess.run(["getent", db, name], capture_output=True, text=True).stdout.strip()


def statoverrides():
    r = subprocess.run(["dpkg-statoverride", "--list"], capture_output=True, text=True)
    return sorted(line for line in r.stdout.splitlines() if "kvd" in line)


def machine_state():
    return {
        "packages": {p: pkg_status(p) for p in PKGS},
        "user": getent("passwd", "kvd"),
        "group": getent("group", "kvd"),
        "paths": {p: os.path.lexists(p) for p in OWN_PATHS},
        "statoverrides": statoverrides(),
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mode_owner(path):
    st = os.lstat(path)
    return (stat.S_IMODE(st.st_mode), pwd.getpwuid(st.st_uid).pw_name,
            grp.getgrgid(st.st_gid).gr_name)


# ---------------------------------------------------------------- cleanup

class Cleanup:
    """Everything the test may leave behind, undone in reverse."""

    def __init__(self):
        self.procs = []
        self.tmp = None

    def __call__(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.path.exists(MARK):
            undo_install()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


def stop_recorded_servers():
    """SIGKILL the kvd processes an earlier run started (their pids are in
    MARK) if they still run /usr/sbin/kvd; a purge cannot delete the kvd
    user while it owns processes."""
    with open(MARK) as f:
        pids = [int(line.split()[1]) for line in f if line.startswith("pid ")]
    for pid in pids:
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            continue
        if exe.startswith("/usr/sbin/kvd"):
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                if not os.path.exists("/proc/%d" % pid):
                    break
                time.sleep(0.05)


def undo_install():
    """Purge the packages and whatever their scripts made; only ever called
    when this test (this run or a killed one, per MARK) installed them."""
    stop_recorded_servers()
    for p in PKGS:
        if pkg_status(p):
            r = dpkg("--purge", p, check=False)
            if r.returncode:
                log("cleanup: dpkg --purge %s failed:\n%s%s" % (p, r.stdout, r.stderr))
                dpkg("--purge", "--force-remove-reinstreq", "--force-depends", p, check=False)
    shutil.rmtree(BACKUP, ignore_errors=True)
    for path in OWN_PATHS:
        subprocess.run(["dpkg-statoverride", "--remove", path], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["dpkg-statoverride", "--remove", "/etc/kvd/kvd.conf"], capture_output=True)
    if getent("passwd", "kvd"):
        subprocess.run(["userdel", "kvd"], capture_output=True)
    if getent("group", "kvd"):
        subprocess.run(["groupdel", "kvd"], capture_output=True)
    os.unlink(MARK)


# ---------------------------------------------------------------- the packages

def build():
    log("building the packages in " + DEB_BUILD)
    out = run(os.path.join(SRC, "packaging", "build-debs.sh"), DEB_BUILD,
              timeout=min(left(), 700)).stdout.split()
    debs = {}
    for path in out:
        m = re.match(r"(.+)_(.+)_(.+)\.deb$", os.path.basename(path))
        assert m, path
        debs[m.group(1)] = path
        version, arch = m.group(2), m.group(3)
    assert sorted(debs) == sorted(PKGS), "expected exactly %s, got %s" % (PKGS, out)
    return debs, version, arch


def control(deb, field):
    return run("dpkg-deb", "-f", deb, field).stdout.strip()


def contents(deb):
    """{path: type char} of a .deb's files and links (no directories)."""
    files = {}
    for line in run("dpkg-deb", "-c", deb).stdout.splitlines():
        parts = line.split()
        kind, path = parts[0][0], parts[5]
        if kind != "d":
            files[path[1:]] = kind
    return files


def depends_names(deb):
    names = set()
    for alt in re.split(r"[,|]", control(deb, "Depends")):
        if alt.strip():
            names.add(alt.split()[0])
    return names


def check_debs(debs, version, arch):
    triplet = run("gcc", "-print-multiarch").stdout.strip() or "x86_64-linux-gnu"
    lib = "/usr/lib/" + triplet
    want = {
        "kvd": ["/usr/sbin/kvd",
                "/etc/kvd/kvd.conf", "/etc/logrotate.d/kvd", "/lib/systemd/system/kvd.service",
                "/usr/share/man/man8/kvd.8.gz", "/usr/share/doc/kvd/operations.md.gz",
                "/usr/share/doc/kvd/protocol.md.gz", "/usr/share/doc/kvd/resp.md.gz",
                "/usr/share/doc/kvd/mongodb.md.gz",
                "/usr/share/doc/kvd/changelog.Debian.gz"],
        "kvd-tools": ["/usr/bin/kvcli", "/usr/bin/kvbench", "/usr/share/man/man1/kvcli.1.gz",
                      "/usr/share/man/man1/kvbench.1.gz",
                      "/usr/share/doc/kvd-tools/changelog.Debian.gz"],
        "libkvclient1": [lib + "/libkvclient.so.1", lib + "/libkvclient.so.1.0.0",
                         "/usr/share/doc/libkvclient1/changelog.Debian.gz"],
        "libkvclient-dev": ["/usr/share/doc/libkvclient-dev/changelog.Debian.gz",
                            "/usr/share/doc/libkvclient-dev/client.md.gz",
                            "/usr/include/kvclient.h", "/usr/include/kvclient/kv_status_list.h",
                            lib + "/libkvclient.a", lib + "/libkvclient.so",
                            lib + "/pkgconfig/kvclient.pc",
                            lib + "/cmake/kvclient/kvclientConfig.cmake",
                            lib + "/cmake/kvclient/kvclientConfigVersion.cmake",
                            lib + "/cmake/kvclient/kvclientTargets.cmake"],
    }
    for name, deb in debs.items():
        files = contents(deb)
        for path in want[name]:
            assert path in files, "%s lacks %s (it has %s)" % (name, path, sorted(files))
        for path in files:
            assert re.match(r"^(/usr/(s?bin|include)/|%s/|/usr/share/man/man[1-9]/[^/]+\.gz$|"
                            r"/usr/share/doc/%s/|/etc/kvd/|/etc/logrotate\.d/kvd$|"
                            r"/lib/systemd/system/)" % (re.escape(lib), re.escape(name)), path), \
                "%s ships %s, outside Debian's places for it" % (name, path)
        assert control(deb, "Version") == version
        assert control(deb, "Architecture") == arch
        assert control(deb, "Maintainer")
        desc = control(deb, "Description").splitlines()
        assert len(desc) > 2 and len(desc[0]) < 80, desc
    deps = depends_names(debs["kvd"])
    for d in ("adduser", "init-system-helpers", "libc6", "liblmdb0", "liburing2", "libxxhash0",
              "libsystemd0", "libssl3"):
        assert d in deps, "kvd does not depend on %s: %s" % (d, control(debs["kvd"], "Depends"))
    # The server alone: no client-side library (the tools' are in kvd-tools).
    for d in deps:
        assert not re.match(r"libedit|libhiredis|libpq|libkvclient", d), \
            "kvd depends on %s: %s" % (d, control(debs["kvd"], "Depends"))
    assert not [p for p in contents(debs["kvd"]) if p.startswith("/usr/bin/")]
    assert control(debs["kvd"], "Recommends") == "kvd-tools (= %s)" % version
    tools = depends_names(debs["kvd-tools"])
    for d in ("libkvclient1", "libedit2", "libc6"):
        assert d in tools, "kvd-tools does not depend on %s: %s" % (
            d, control(debs["kvd-tools"], "Depends"))
    assert "libkvclient1 (= %s)" % version in control(debs["kvd-tools"], "Depends")
    assert "kvd" not in tools, "kvd-tools needs no local server"
    assert "libkvclient1 (= %s)" % version in control(debs["libkvclient-dev"], "Depends")
    # kvclient.pc requires libssl (privately), the CMake package OpenSSL.
    assert "libssl-dev" in depends_names(debs["libkvclient-dev"])
    assert control(debs["kvd"], "Section") == "database"
    assert control(debs["kvd-tools"], "Section") == "database"
    assert control(debs["libkvclient1"], "Section") == "libs"
    assert control(debs["libkvclient-dev"], "Section") == "libdevel"
    ctrl = subprocess.run(["dpkg-deb", "--info", debs["kvd"], "conffiles"],
                          capture_output=True, text=True).stdout.split()
    assert sorted(ctrl) == ["/etc/kvd/kvd.conf", "/etc/logrotate.d/kvd"], ctrl
    shlibs = subprocess.run(["dpkg-deb", "--info", debs["libkvclient1"], "shlibs"],
                            capture_output=True, text=True).stdout.strip()
    assert shlibs.startswith("libkvclient 1 libkvclient1 (>= "), shlibs
    triggers = subprocess.run(["dpkg-deb", "--info", debs["libkvclient1"], "triggers"],
                              capture_output=True, text=True).stdout
    assert "activate-noawait ldconfig" in triggers, triggers
    return lib


# ---------------------------------------------------------------- installed

def check_installed(debs, lib):
    for p in PKGS:
        assert pkg_status(p) == "ii", "%s: %r" % (p, pkg_status(p))
    r = dpkg("--verify", *PKGS, check=False)
    assert r.returncode == 0 and not r.stdout.strip(), "dpkg --verify:\n" + r.stdout + r.stderr
    user = pwd.getpwnam("kvd")
    assert user.pw_uid < 1000, "kvd is not a system user: %r" % (user,)
    assert user.pw_dir == "/var/lib/kvd" and user.pw_shell == "/usr/sbin/nologin", user
    assert grp.getgrgid(user.pw_gid).gr_name == "kvd"
    assert mode_owner("/var/lib/kvd") == (0o750, "kvd", "kvd"), mode_owner("/var/lib/kvd")
    assert mode_owner("/var/log/kvd") == (0o2750, "kvd", "adm"), mode_owner("/var/log/kvd")
    assert mode_owner("/var/backups/kvd") == (0o750, "kvd", "kvd")
    assert mode_owner("/etc/kvd/kvd.conf") == (0o640, "root", "kvd"), mode_owner("/etc/kvd/kvd.conf")
    # Enabled even though systemd is not running (an image build), and
    # enabled where its [Install] says.
    wants = glob.glob("/etc/systemd/system/*.wants/kvd.service")
    assert wants == [WANTS], "the postinst did not enable kvd: %s" % wants
    assert os.readlink(WANTS) == "/lib/systemd/system/kvd.service", os.readlink(WANTS)
    # The binaries use the installed library, and kvd can tell systemd it is ready.
    so = re.search(r"libkvclient\.so\.1 => (\S+)", run("ldd", "/usr/bin/kvcli").stdout)
    assert so and so.group(1).endswith(lib[len("/usr"):] + "/libkvclient.so.1"), so
    needed = run("objdump", "-p", "/usr/sbin/kvd").stdout
    assert "libsystemd.so.0" in needed, "kvd is built without sd_notify: Type=notify would time out"
    # Every library a packaged program links belongs to a package it depends on.
    for deb, progs in ((debs["kvd"], ["/usr/sbin/kvd"]),
                       (debs["kvd-tools"], ["/usr/bin/kvcli", "/usr/bin/kvbench"]),
                       (debs["libkvclient1"], [lib + "/libkvclient.so.1"])):
        deps = depends_names(deb)
        for prog in progs:
            resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", run("ldd", prog).stdout, re.M))
            for soname in re.findall(r"NEEDED\s+(\S+)", run("objdump", "-p", prog).stdout):
                path = resolved[soname]
                owner = ""
                for cand in (path, re.sub(r"^/usr", "", path), "/usr" + path):
                    r = subprocess.run(["dpkg-query", "-S", cand], capture_output=True, text=True)
                    if r.returncode == 0:
                        owner = r.stdout.split(":")[0]
                        break
                assert owner, "%s: no package owns %s" % (prog, path)
                assert owner in deps, "%s links %s (%s) but %s does not depend on it" % (
                    prog, soname, owner, os.path.basename(deb))
    if shutil.which("systemd-analyze"):
        man = "yes" if shutil.which("man") else "no"
        r = run("systemd-analyze", "verify", "--man=" + man, "/lib/systemd/system/kvd.service", check=False)
        assert r.returncode == 0 and "kvd.service" not in r.stderr, r.stdout + r.stderr
    for page in ("/usr/share/man/man8/kvd.8.gz", "/usr/share/man/man1/kvcli.1.gz"):
        text = subprocess.run(["zcat", page], capture_output=True, text=True).stdout
        assert text.startswith(".\\\"") and ".TH " in text, page
    assert run("/usr/sbin/kvd", "--version").stdout.startswith("kvd ")
    for p in PKGS:
        head = subprocess.run(["zcat", "/usr/share/doc/%s/changelog.Debian.gz" % p],
                              capture_output=True, text=True).stdout.split("\n", 1)[0]
        assert head.startswith("kvd (%s) " % control(debs[p], "Version")), head
    r = run("setpriv", "--reuid=kvd", "--regid=kvd", "--init-groups", "/usr/sbin/kvd",
            "--config", "/etc/kvd/kvd.conf", "--test-config", check=False)
    assert r.returncode == 0, "the shipped kvd.conf does not load: " + r.stdout + r.stderr


class Server:
    """/usr/sbin/kvd as the kvd user, with the installed configuration."""

    def __init__(self, cleanup, logpath, *args):
        self.logpath = logpath
        for _ in range(3):
            self.metrics = free_port()
            self.resp = free_port()
            with open(logpath, "wb") as logf:
                # --pdeathsig: should this test die, kvd is told to stop.
                self.proc = subprocess.Popen(
                    ["setpriv", "--reuid=kvd", "--regid=kvd", "--init-groups",
                     "--pdeathsig=SIGTERM", "/usr/sbin/kvd",
                     "--config", "/etc/kvd/kvd.conf", "--port", "0",
                     "--metrics-port", str(self.metrics), "--resp-port", str(self.resp), *args],
                    stdout=logf, stderr=subprocess.STDOUT, cwd="/")
            cleanup.procs.append(self.proc)
            with open(MARK, "a") as f:  # for a later run, should this one be killed
                f.write("pid %d\n" % self.proc.pid)
            deadline = time.time() + 30
            while time.time() < deadline and self.proc.poll() is None:
                m = READY.search(self.log())
                if m:
                    self.pid, self.port = int(m.group(1)), int(m.group(2))
                    assert self.pid == self.proc.pid, "setpriv did not exec kvd"
                    return
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if b"in use" not in self.log():
                break
        raise AssertionError("installed kvd did not start:\n" + self.log().decode(errors="replace"))

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read()

    def wait_log(self, text, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.log():
                return
            time.sleep(0.05)
        raise AssertionError("kvd never logged %r:\n%s" % (text, self.log().decode(errors="replace")))

    def stop(self):
        os.kill(self.pid, signal.SIGTERM)
        rc = self.proc.wait(60)
        assert rc == 0, "kvd exited %d:\n%s" % (rc, self.log().decode(errors="replace"))
        assert b"stopped cleanly" in self.log()


def kvcli(port, *args, input=None):
    return run("/usr/bin/kvcli", "-p", str(port), *args, input=input).stdout


def exercise(cleanup, tmp):
    srv = Server(cleanup, os.path.join(tmp, "kvd.log"), "--backup-dir", "/var/backups/kvd")
    uid = pwd.getpwnam("kvd").pw_uid
    with open("/proc/%d/status" % srv.pid) as f:
        uids = re.search(r"^Uid:\s+(.*)$", f.read(), re.M).group(1).split()
    assert uids == [str(uid)] * 4, "kvd does not run as the kvd user: Uid %s" % uids
    assert kvcli(srv.port, "put", "pkg:greeting", "hello").strip() == "OK"
    assert kvcli(srv.port, "get", "pkg:greeting").strip() == "hello"
    rows = "".join('{"key": "pkg:row:%04d", "value": "v%d"}\n' % (i, i) for i in range(1000))
    kvcli(srv.port, "load", "-", input=rows)
    assert kvcli(srv.port, "count", "pkg:row:").strip() == "1000"
    assert os.stat("/var/lib/kvd/MANIFEST").st_uid == uid
    # The Redis protocol and the metrics endpoint of the installed server.
    with socket.create_connection(("127.0.0.1", srv.resp), 10) as s:
        s.sendall(b"*2\r\n$3\r\nGET\r\n$12\r\npkg:greeting\r\n")
        assert s.recv(100) == b"$5\r\nhello\r\n"
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % srv.metrics, timeout=10) as r:
        body = r.read().decode()
    assert "kvd_info{" in body and 'kvd_requests_total{op="PUT",status="OK"}' in body, body[:2000]

    # A program built with nothing but pkg-config, against the installed library.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PKG_CONFIG")}
    flags = run("pkg-config", "--cflags", "--libs", "kvclient", env=env).stdout.split()
    exe = os.path.join(tmp, "kvc_example")
    run("cc", "-Wall", "-Werror", os.path.join(SRC, "examples", "kvc_example.c"), "-o", exe, *flags, env=env)
    so = re.search(r"libkvclient\.so\.1 => (\S+)", run("ldd", exe).stdout)
    assert so and not so.group(1).startswith(os.path.dirname(DEB_BUILD)), so
    out = run(exe, "127.0.0.1", str(srv.port)).stdout
    assert "greeting = hello, kvd" in out and "scanned 1000 keys" in out, out
    # find_package(kvclient) from the system paths, shared and static.
    proj = os.path.join(tmp, "cmake-user")
    os.mkdir(proj)
    with open(os.path.join(proj, "user.c"), "w") as f:
        f.write(CLIENT_C)
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write(CLIENT_CMAKE)
    cenv = {k: v for k, v in env.items() if k not in ("CMAKE_PREFIX_PATH", "kvclient_DIR")}
    run("cmake", "-S", proj, "-B", os.path.join(proj, "b"), env=cenv)
    run("cmake", "--build", os.path.join(proj, "b"), env=cenv)
    for prog in ("user_shared", "user_static"):
        out = run(os.path.join(proj, "b", prog), str(srv.port)).stdout.split()
        assert out[1:] == ["hello"], out

    # A hot backup into the packaged backup directory, restored by a second kvd.
    keys = kvcli(srv.port, "count").strip()
    assert int(keys) == 2002, keys  # ours, and the example's greeting and 1000 keys
    # With backup-dir /var/backups/kvd (kvd.conf's example), BACKUP takes a
    # name there.
    assert kvcli(srv.port, "backup", os.path.basename(BACKUP)).strip() == keys
    assert mode_owner(BACKUP)[1] == "kvd"
    rdir = os.path.join(tmp, "restore")
    os.mkdir(rdir)
    os.chown(rdir, uid, -1)
    second = Server(cleanup, os.path.join(tmp, "kvd-restore.log"),
                    "--data-dir", os.path.join(rdir, "data"), "--restore", BACKUP)
    assert kvcli(second.port, "get", "pkg:greeting").strip() == "hello"
    assert kvcli(second.port, "count").strip() == keys
    second.stop()

    # SIGHUP (what systemctl reload sends) and SIGTERM (systemctl stop).
    os.kill(srv.pid, signal.SIGHUP)
    srv.wait_log(b"SIGHUP: configuration reloaded")
    assert kvcli(srv.port, "ping").strip() == "PONG"
    srv.stop()


def check_remove_and_purge(debs, before):
    uid = pwd.getpwnam("kvd").pw_uid
    # Installing again is what an upgrade does: the user, its data and the
    # configuration stay as they are.
    dpkg("-i", debs["kvd"])
    assert pwd.getpwnam("kvd").pw_uid == uid
    assert os.path.exists("/var/lib/kvd/MANIFEST")
    assert mode_owner("/etc/kvd/kvd.conf") == (0o640, "root", "kvd")

    dpkg("--remove", "kvd")
    assert pkg_status("kvd") == "rc", pkg_status("kvd")
    assert not os.path.exists("/usr/sbin/kvd")
    assert os.path.exists("/usr/bin/kvcli"), "removing the server removed the tools"
    assert os.path.exists("/etc/kvd/kvd.conf"), "remove deleted a conffile"
    assert os.path.exists("/var/lib/kvd/MANIFEST"), "remove deleted the data"
    assert getent("passwd", "kvd"), "remove deleted the kvd user"

    r = dpkg("--purge", "kvd")
    assert "keeping the backups" in r.stderr, r.stderr
    assert os.path.exists(os.path.join(BACKUP, "MANIFEST")), "purge deleted the backups"
    shutil.rmtree("/var/backups/kvd")
    assert not os.path.lexists(WANTS), "purge left the unit enabled"
    dpkg("--purge", "kvd-tools", "libkvclient-dev", "libkvclient1")

    for p in PKGS:
        assert pkg_status(p) == "", "%s is still known to dpkg: %r" % (p, pkg_status(p))
    for deb in debs.values():
        for path in contents(deb):
            assert not os.path.lexists(path), "left behind: " + path
    after = machine_state()
    assert after == before, "the machine differs after purge:\nbefore %s\nafter  %s" % (before, after)
    for db in ("passwd", "group", "shadow", "gshadow"):
        assert not getent(db, "kvd"), "kvd is still in " + db


# ---------------------------------------------------------------- main

def main():
    if os.geteuid() != 0:
        raise Skip("needs root (it installs packages with dpkg)")
    for tool in ("dpkg", "dpkg-deb", "dpkg-statoverride", "cmake", "cc", "gcc", "pkg-config",
                 "setpriv", "objdump", "ldd", "getent", "userdel"):
        if not shutil.which(tool):
            raise Skip(tool + " is not installed")

    cleanup = Cleanup()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("packaging_deb: SIGTERM, cleaning up"))
    lockf = open(LOCK, "w")
    try:
        deadline = time.time() + 600
        while True:
            try:
                fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.time() > deadline:
                    raise AssertionError("another packaging test held %s for 10 minutes" % LOCK)
                time.sleep(1)
        if os.path.exists(MARK):
            log("cleaning up after an earlier run that did not finish")
            undo_install()
        before = machine_state()
        present = [p for p, s in before["packages"].items() if s] + \
            [p for p, e in before["paths"].items() if e] + \
            (["user kvd"] if before["user"] else []) + (["group kvd"] if before["group"] else [])
        if present:
            raise Skip("kvd is already (partly) installed here, not touching it: " + ", ".join(present))

        debs, version, arch = build()
        lib = check_debs(debs, version, arch)
        cleanup.tmp = tempfile.mkdtemp(prefix="kvd-pkgtest-")
        os.chmod(cleanup.tmp, 0o755)
        with open(MARK, "w") as f:
            f.write("%d %s\n" % (os.getpid(), time.ctime()))
        log("installing " + " ".join(os.path.basename(d) for d in debs.values()))
        dpkg("-i", *debs.values())
        check_installed(debs, lib)
        log("running the installed kvd as the kvd user")
        exercise(cleanup, cleanup.tmp)
        log("remove, purge")
        check_remove_and_purge(debs, before)
        os.unlink(MARK)
        log("ok")
    finally:
        try:
            cleanup()
        finally:
            fcntl.flock(lockf, fcntl.LOCK_UN)
            lockf.close()


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        print("skipped: %s" % e)
        sys.exit(77)
