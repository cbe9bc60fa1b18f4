#!/bin/sh
# scripts/deps.sh - install the Debian packages kvd needs, if any are missing.
#
#   scripts/deps.sh build   what `make run` needs: compiler, cmake, the four libraries
#   scripts/deps.sh test    what `make test` needs: the above, plus the peers the
#                           tests talk to (redis-tools, nutcracker, ...), python3,
#                           and node and npm with the npm packages tests/mongo
#                           pins (the mongodb driver, mongosh), installed by npm ci
#   scripts/deps.sh package what `make package` needs: build, plus dpkg-dev and
#                           file (dpkg-shlibdeps computes the packages' Depends)
#
# As root, missing packages are installed with apt-get; otherwise the command
# to run is printed and the script fails.
set -eu

build_pkgs="gcc make cmake pkg-config liblmdb-dev liburing-dev libmsgpack-dev
libxxhash-dev libhiredis-dev libedit-dev libsystemd-dev libpq-dev libssl-dev
libbson-dev libpcre2-dev libmongoc-dev"
# Every test's prerequisites: with these installed nothing is skipped (a test
# missing one exits 77 and ctest lists it under "did not run").  clang-format:
# the format test; lmdb-utils: mdb_dump, mdb_stat; nutcracker: twemproxy;
# groff-base, systemd, shellcheck, binutils, man-db: the packaging tests
# (groff, systemd-analyze, objdump, man); e2fsprogs, mount: the disk-full
# test's filesystems; strace: the system-call test; tmux: kvcli's prompt test;
# openssl: the TLS tests' certificates (tests/integration/tlscerts.py);
# redis-sentinel: Sentinel monitoring kvd (tests/resp/test_sentinel_basic.py);
# python3-pymongo: pymongo against the MongoDB door (tests/mongo).  node and
# npm are added below only when missing: a node from elsewhere with its own
# npm stays (Debian's npm package would conflict with it).
test_pkgs="$build_pkgs python3 python3-msgpack python3-redis redis-server
redis-tools redis-sentinel nutcracker clang clang-format libclang-rt-14-dev lmdb-utils
postgresql gnuplot-nox procps iproute2 dpkg-dev file strace groff-base
systemd shellcheck binutils man-db e2fsprogs mount util-linux tmux
openssl python3-pymongo"
package_pkgs="$build_pkgs dpkg-dev file"

case "${1:-build}" in
build) want=$build_pkgs ;;
test)
	want=$test_pkgs
	command -v node >/dev/null 2>&1 || want="$want nodejs"
	command -v npm >/dev/null 2>&1 || want="$want npm"
	;;
package) want=$package_pkgs ;;
*) echo "usage: $0 build|test|package" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
# tests/mongo's npm packages, as its package-lock.json pins them, in the
# git-ignored tests/mongo/node_modules: installed again only when missing or
# when the lock changed (the copy npm ci's success leaves beside them), so a
# second `make test` downloads nothing.  Install scripts are not run: the
# tests need no native addon, and node-gyp would fetch node's headers.
npm_tests() {
	dir=$(cd "$(dirname "$0")/.." && pwd)/tests/mongo
	stamp=$dir/node_modules/.kvd-package-lock.json
	cmp -s "$dir/package-lock.json" "$stamp" && return 0
	echo "kvd: installing tests/mongo's npm packages (npm ci)" >&2
	if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund \
		--loglevel=error >/dev/null); then
		echo "kvd: npm ci failed in tests/mongo" >&2
		exit 1
	fi
	cp "$dir/package-lock.json" "$stamp"
}

if [ -z "$missing" ]; then
	if [ "${1:-build}" = test ]; then npm_tests; fi
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "kvd: missing Debian packages:$missing" >&2
	echo "kvd: install them with: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "kvd: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Package services must not start inside a build (redis-server, postgresql).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
# shellcheck disable=SC2086
if ! apt-get install -y -q --no-install-recommends $missing >/dev/null; then
	apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
[ "$made_policy" = 1 ] && rm -f "$policy"
if [ "${1:-build}" = test ]; then npm_tests; fi
exit 0
