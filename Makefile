# Makefile - the two commands (make run, make test) and friends; CMake does the building.
#
#   make run         install missing Debian packages, build (Release), start kvd
#                    on 127.0.0.1 with ./data
#   make test        install what the tests need, build with -Werror, run ctest
#   make test-asan   the same suite under AddressSanitizer + UBSan
#   make test-tsan   the same suite under ThreadSanitizer
#   make format      reformat every C file with .clang-format
#   make bench       kvbench side by side with its peers (bench/compare)
#   make package     build the .deb packages (kvd, libkvclient1, libkvclient-dev)
#                    in build-deb/

JOBS ?= $(shell nproc)
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)
KVD_ARGS ?=

.PHONY: all build run test test-asan test-tsan format format-check bench package clean

all: build

build:
	@scripts/deps.sh build
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j$(JOBS)

run: build
	./build/kvd/kvd --bind 127.0.0.1 --data-dir ./data $(KVD_ARGS)

# One test build per flavour, so switching never rebuilds the others.
define test_build
	@scripts/deps.sh test
	@cmake -S . -B $(1) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVD_WERROR=ON $(2) >/dev/null
	@cmake --build $(1) -j$(JOBS) >$(1)/build.log 2>&1 || { cat $(1)/build.log; exit 1; }
	@cd $(1) && ctest $(CTEST_FLAGS) $(3)
endef

test:
	$(call test_build,build-test,,)

test-asan:
	$(call test_build,build-asan,-DKVD_SANITIZE=address,)

test-tsan:
	$(call test_build,build-tsan,-DKVD_SANITIZE=thread,)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

bench: build
	bench/compare

# The packages need a tree configured for /usr: build-deb, not build.
package:
	@scripts/deps.sh package
	@packaging/build-debs.sh build-deb

clean:
	rm -rf build build-test build-asan build-tsan build-deb
