"""test_install.py - libkvclient as its users get it: installed into a
prefix, found with pkg-config and with CMake's find_package, linked both
ways, and exporting nothing but the kvc_ API under SONAME libkvclient.so.1.
"""

import os
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ["KVD_BUILD_DIR"]
PROG = r"""
#include <kvclient.h>
#include <stdio.h>
int main(void)
{
    kvc_conn *c;
    if (kvc_create(&c)) return 1;
    printf("%s %s\n", kvc_version(), kvc_status_name(-KVC_NOT_FOUND));
    kvc_close(c);
    return 0;
}
"""
CMAKE_PROJ = """
cmake_minimum_required(VERSION 3.25)
project(user C)
find_package(kvclient REQUIRED)
add_executable(user_shared user.c)
target_link_libraries(user_shared PRIVATE kvclient::kvclient)
add_executable(user_static user.c)
target_link_libraries(user_static PRIVATE kvclient::kvclient_static)
"""


def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def main():
    missing = [t for t in ("cmake", "pkg-config") if not shutil.which(t)]
    if missing:
        print("skipped: %s not installed (scripts/deps.sh build installs the build tools)"
              % " and ".join(missing))
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="kvc-install-")
    try:
        prefix = os.path.join(tmp, "prefix")
        run("cmake", "--install", BUILD, "--prefix", prefix,
            "--component", "libkvclient")
        run("cmake", "--install", BUILD, "--prefix", prefix,
            "--component", "libkvclient-dev")
        libdir = os.path.dirname(run("find", prefix, "-name", "kvclient.pc").split()[0])
        libdir = os.path.dirname(libdir)
        so = os.path.join(libdir, "libkvclient.so.1")
        assert os.path.exists(so), so
        dyn = run("objdump", "-p", so)
        if "libasan" in dyn or "libtsan" in dyn:
            print("sanitizer build: a plain program cannot load it; skipped")
            sys.exit(77)
        assert "SONAME               libkvclient.so.1" in dyn
        syms = [line.split()[-1] for line in
                run("nm", "-D", "--defined-only", so).splitlines()]
        bad = [s for s in syms if not s.startswith("kvc_")
               and s not in ("KVCLIENT_1", "KVCLIENT_1.1", "KVCLIENT_1.2",
                             "KVCLIENT_1.3", "KVCLIENT_1.4", "KVCLIENT_1.5",
                             "KVCLIENT_1.6")]
        assert not bad, bad
        assert "kvc_get@@KVCLIENT_1" in syms
        # What 1.1 added carries its own version, so a program using it
        # refuses to load against a 1.0 library instead of failing later.
        for name in ("kvc_set_password", "kvc_connect_unix", "kvc_connect_url",
                     "kvc_url_parse", "kvc_url_free"):
            assert name + "@@KVCLIENT_1.1" in syms, (name, syms)
        assert "kvc_set_tls@@KVCLIENT_1.2" in syms, syms
        for name in ("kvc_txn", "kvc_rename", "kvc_send_txn"):
            assert name + "@@KVCLIENT_1.3" in syms, (name, syms)
        for name in ("kvc_hset", "kvc_hgetall", "kvc_scan_next_typed", "kvc_send_hscan"):
            assert name + "@@KVCLIENT_1.4" in syms, (name, syms)
        for name in ("kvc_doc_insert", "kvc_doc_find", "kvc_doc_errcode",
                     "kvc_reply_doc_update", "kvc_send_doc_update"):
            assert name + "@@KVCLIENT_1.5" in syms, (name, syms)
        for name in ("kvc_doc_dbs", "kvc_doc_colls", "kvc_doc_create",
                     "kvc_doc_drop", "kvc_doc_create_indexes",
                     "kvc_doc_indexes", "kvc_doc_drop_index",
                     "kvc_reply_doc_ixcreate", "kvc_send_doc_dbs",
                     "kvc_send_doc_drop_index"):
            assert name + "@@KVCLIENT_1.6" in syms, (name, syms)
        # kvd's own entry point into the library (kvc_int.h) stays inside
        assert not [s for s in syms if s.startswith("kvc_send_raw")], syms
        # OpenSSL is the library's own business: linked, never exported.
        assert "libssl.so.3" in dyn, dyn
        with open(os.path.join(tmp, "user.c"), "w") as f:
            f.write(PROG)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        flags = run("pkg-config", "--cflags", "--libs", "kvclient", env=env).split()
        exe = os.path.join(tmp, "user_pc")
        run("cc", "-Wall", "-Werror", os.path.join(tmp, "user.c"), "-o", exe,
            *flags, "-Wl,-rpath," + libdir)
        assert run(exe).split()[1] == "NOT_FOUND"
        with open(os.path.join(tmp, "CMakeLists.txt"), "w") as f:
            f.write(CMAKE_PROJ)
        bdir = os.path.join(tmp, "b")
        run("cmake", "-S", tmp, "-B", bdir, "-DCMAKE_PREFIX_PATH=" + prefix)
        run("cmake", "--build", bdir)
        for exe in ("user_shared", "user_static"):
            assert run(os.path.join(bdir, exe)).split()[1] == "NOT_FOUND"
        print("ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
