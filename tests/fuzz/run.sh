#!/bin/sh
# run.sh BUILD_DIR [SECONDS] - run every fuzz target for SECONDS each
# (default $FUZZ_SECONDS, else 60), FUZZ_JOBS at a time (default: cores).
#
# Each target starts from its checked-in seeds (tests/fuzz/corpus/NAME,
# only read) plus what earlier runs in this build directory found
# (BUILD_DIR/fuzz-work/NAME/corpus).  Any finding (crash-, leak-, oom-,
# timeout- files) is printed with its log and fails the run; to keep one as
# a regression test, fix the bug and copy the file into the seed corpus,
# which `make test` replays.
set -u
bin=$(cd "$1" && pwd)
secs=${2:-${FUZZ_SECONDS:-60}}
jobs=${FUZZ_JOBS:-$(nproc)}
src=$(cd "$(dirname "$0")" && pwd)
work=$bin/fuzz-work

run_one() {
	name=$1 corpus=$2 max_len=$3
	dir=$work/$name
	mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
	rm -f "$dir/artifacts"/*
	# fuzz_dispatch keeps its store under $TMPDIR, and fuzz_config creates
	# the log files its inputs name, relative ones in the working
	# directory: both here, removed below, never in the caller's directory.
	(cd "$dir/tmp" && TMPDIR=$dir/tmp "$bin/fuzz_$name" -max_total_time="$secs" \
		-timeout=10 -rss_limit_mb=2560 -max_len="$max_len" \
		-artifact_prefix="$dir/artifacts/" -print_final_stats=1 \
		"$dir/corpus" "$src/corpus/$corpus") >"$dir/log" 2>&1
	status=$?
	rm -rf "$dir/tmp"
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
	cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1)
	# A slow unit (one input over 10 s) is a finding only if it is slow
	# alone: one stalled by the machine's load runs in milliseconds here.
	for f in "$dir/artifacts"/slow-unit-*; do
		[ -e "$f" ] || continue
		mkdir -p "$dir/tmp"
		if (cd "$dir/tmp" && TMPDIR=$dir/tmp timeout 5 \
			"$bin/fuzz_$name" "$f") >/dev/null 2>&1; then
			echo "fuzz_$name: $(basename "$f") ran under 5 s alone (slow only under load): not a finding"
			rm -f "$f"
		fi
		rm -rf "$dir/tmp"
	done
	found=$(ls "$dir/artifacts" 2>/dev/null | wc -l)
	echo "fuzz_$name: ${secs}s, ${runs:-?} runs, $cov, exit $status, findings $found"
	if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then
		tail -60 "$dir/log"
		ls -l "$dir/artifacts"
		return 1
	fi
}

rc=0
pids=""
n=0
# name:corpus:max_len.  Small inputs run faster; the seeds' 64 KiB cases
# (32-bit lengths) still run whole in `make test`.  RESP keeps 70,000 to
# reach its 64 KiB inline-request cap.  dispatch runs every command handler
# of both protocols against a real store (fuzz_dispatch.c).  http keeps
# 9,000 to pass its 8 KiB header cap.  resp, dispatch and glob inputs may
# hold repeats (expand.h) that make them up to a megabyte: arguments as
# long as max-frame-size, commands with 100,000 of them, glob patterns and
# keys of 64 KiB together.  mql: a filter, an update, a projection and
# documents fit in 8 KiB.  mdoor: a client's stream of OP_MSG and OP_QUERY
# messages, a few commands in 16 KiB.
for t in cmd:cmd:8192 mp_diff:mp:8192 config:config:4096 resp:resp:70000 \
	dispatch:dispatch:16384 http:http:9000 glob:glob:4096 json:json:4096 \
	reply:reply:8192 mql:mql:8192 mdoor:mdoor:16384; do
	set -- $(echo "$t" | tr : ' ')
	run_one "$1" "$2" "$3" >"$work.$1.out" 2>&1 &
	pids="$pids $!:$1"
	n=$((n + 1))
	if [ "$n" -ge "$jobs" ]; then
		for p in $pids; do
			wait "${p%%:*}" || rc=1
			cat "$work.${p#*:}.out"
		done
		pids="" n=0
	fi
done
for p in $pids; do
	wait "${p%%:*}" || rc=1
	cat "$work.${p#*:}.out"
done
exit $rc
