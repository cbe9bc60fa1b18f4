#!/bin/sh
# packaging/build-debs.sh - build kvd's Debian packages (kvd, kvd-tools, libkvclient1,
# libkvclient-dev) in a build tree of their own, the way `make package` and
# tests/packaging do it:
#
#   packaging/build-debs.sh [BUILD_DIR]      (default: build-deb)
#
# The tree is configured for /usr (Debian's paths, the multiarch libdir),
# Release, with Debian's hardening flags from dpkg-buildflags (they take
# effect when the tree is first configured); then the `package` target builds
# everything and runs CPack.  The .debs are left in BUILD_DIR and their paths
# printed, one a line.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build-deb}
jobs=$(nproc 2>/dev/null || echo 2)

if command -v dpkg-buildflags >/dev/null; then
	DEB_BUILD_MAINT_OPTIONS=${DEB_BUILD_MAINT_OPTIONS:-hardening=+all}
	export DEB_BUILD_MAINT_OPTIONS
	# CMake reads CFLAGS and LDFLAGS, not CPPFLAGS: fold them in.
	CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
	LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
	export CFLAGS LDFLAGS
fi

# Reproducible: file times and the changelog's date are the last commit's,
# and no build path reaches the binaries, so two builds of one commit give
# the same .debs (tests/packaging/test_repro.py).
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct 2>/dev/null || true)
fi
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	export SOURCE_DATE_EPOCH
fi

cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DKVD_REPRODUCIBLE=ON -DKVD_BUILD_TESTS=OFF >/dev/null
rm -f "$dir"/*.deb
if ! cmake --build "$dir" -j"$jobs" --target package >"$dir/package.log" 2>&1; then
	cat "$dir/package.log" >&2
	exit 1
fi
for deb in "$dir"/*.deb; do
	[ -e "$deb" ] || { echo "build-debs.sh: no package was built" >&2; exit 1; }
	echo "$deb"
done
