# Makefile - the two commands (make run, make test) and friends; CMake does the building.
#
#   make run         install missing Debian packages, build (Release), start kvd
#                    on 127.0.0.1 with ./data
#   make test        install what the tests need, build with -Werror, run ctest;
#                    ctest's summary comes last and lists skipped tests (exit 77)
#   make test-asan   the same suite under AddressSanitizer + UBSan
#   make test-tsan   the same suite under ThreadSanitizer
#   make soak        the reliability tests, long (docs/reliability.md)
#   make fuzz        every libFuzzer target for FUZZ_SECONDS (default 60) each
#   make format      reformat every C file with .clang-format
#   make format-check  fail if any C file is not formatted (ctest's format test too)
#   make bench       kvbench side by side with its peers (bench/compare)
#   make package     build the .deb packages (kvd, kvd-tools, libkvclient1, libkvclient-dev)
#                    in build-deb/

JOBS ?= $(shell nproc)
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)
KVD_ARGS ?=

.PHONY: all build run test test-asan test-tsan soak fuzz format format-check bench package clean

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
	@cd $(1) && { ctest $(CTEST_FLAGS) $(3); echo $$? >ctest.rc; } | \
		awk -f $(CURDIR)/scripts/skipcount.awk && exit $$(cat ctest.rc)
endef

test:
	$(call test_build,build-test,,)

# Sanitizer reports go to files, so that those of processes the tests kill
# (kill -9 rounds) or whose exit status they ignore are not lost either:
# any file left fails the run.
define sanitizer_reports
	@if ls $(1)/sanitizer-report.* >/dev/null 2>&1; then \
		cat $(1)/sanitizer-report.*; \
		echo "sanitizer reports: $(1)/sanitizer-report.*"; exit 1; fi
endef

# allocator_may_return_null: msgpack-c, unit_mp's reference decoder, asks
# malloc for a hostile container's declared size and copes with NULL.
# quarantine_size_mb: ASan keeps 256 MiB of freed memory unreused by
# default, which the memory-bound tests (test_memory.py, test_pipeline.py)
# would count as kvd's; 8 MiB still catches a use soon after free.
test-asan: export ASAN_OPTIONS = allocator_may_return_null=1 quarantine_size_mb=8 log_path=$(CURDIR)/build-asan/sanitizer-report
test-asan: export UBSAN_OPTIONS = print_stacktrace=1 log_path=$(CURDIR)/build-asan/sanitizer-report
# The sanitizer suites leave out packaging_deb and packaging_repro: they
# build the Debian packages in trees of their own (Release, Debian's
# flags, no sanitizer), so their packages are make test's, and they cost
# about four minutes of a 2-core machine each time.
SANITIZER_CTEST = -E '^packaging_(deb|repro)$$'
test-asan:
	@rm -f build-asan/sanitizer-report.*
	$(call test_build,build-asan,-DKVD_SANITIZE=address,$(SANITIZER_CTEST))
	$(call sanitizer_reports,build-asan)

# tests/tsan.supp says why each suppression (if any) is a false positive.
test-tsan: export TSAN_OPTIONS = suppressions=$(CURDIR)/tests/tsan.supp allocator_may_return_null=1 log_path=$(CURDIR)/build-tsan/sanitizer-report
test-tsan:
	@rm -f build-tsan/sanitizer-report.*
	$(call test_build,build-tsan,-DKVD_SANITIZE=thread,$(SANITIZER_CTEST))
	$(call sanitizer_reports,build-tsan)

# Long versions of the reliability tests; figures go to build-test/soak-report.txt.
SOAK_CRASH ?= 200
SOAK_POWERLOSS ?= 200
SOAK_READERS ?= 1000
soak: export KVD_SOAK_CRASH = $(SOAK_CRASH)
soak: export KVD_SOAK_POWERLOSS = $(SOAK_POWERLOSS)
soak: export KVD_SOAK_READERS = $(SOAK_READERS)
soak: export KVD_SOAK_REPORT = $(CURDIR)/build-test/soak-report.txt
soak:
	$(call test_build,build-test,,-L reliability)

# libFuzzer needs clang: a build directory of its own, only the fuzzers.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/deps.sh test
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVD_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzzers >build-fuzz/build.log 2>&1 || { cat build-fuzz/build.log; exit 1; }
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh build-fuzz/tests/fuzz

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

bench: build
	bench/compare

# The packages need a tree configured for /usr: build-deb, not build.
package:
	@scripts/deps.sh package
	@packaging/build-debs.sh build-deb

clean:
	rm -rf build build-test build-asan build-tsan build-deb build-fuzz
