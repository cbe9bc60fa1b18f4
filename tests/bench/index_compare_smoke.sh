#!/bin/sh
# tests/bench/index_compare_smoke.sh - bench/index_compare.sh at tiny sizes
# so that it cannot rot: it must complete (exit 0: every run made) and print
# every row of its table, the plans and the commands.  Figures are printed,
# never asserted.  Exit 77 (skipped) without PostgreSQL 15, kvbench's
# mongodb driver or pymongo.
set -u
out=$(env RECORDS=300 DURATION=0.5 OPS=3000 REPEAT=1 BUILD_RECORDS=500 \
	LOAD_CONNS=4 CONNS=4 sh "$1/bench/index_compare.sh" 2>&1)
rc=$?
echo "$out"
case $out in
*"index_compare: "*" is missing"* | *"built without libmongoc"* | *"has no pymongo"*) exit 77 ;;
esac
[ $rc = 0 ] || { echo "FAIL: index_compare.sh exited $rc"; exit 1; }
for row in "load 300 docs, 3 indexes" "a. point find" "b. range" "c. YCSB E" \
	"d. inserts, 3 indexes" "e. load 500 docs" "e. build 3 indexes on 500 docs" "us/op" \
	"find {_id: key}" "find {r: v} through r_1" "find {k: v} through k_1" \
	"10,000,000 documents at these rates" "IXSCAN r_1" "pg  ixdocs r = 7, generic plan" \
	"e-build-pg: psql" "f-ixpoint: kvbench"; do
	case $out in
	*"$row"*) ;;
	*) echo "FAIL: no line with '$row'"; exit 1 ;;
	esac
done
# every row's figures: each run's ops/s, kvd's and PostgreSQL's (a dash
# when a run failed)
if [ "$(echo "$out" | grep -E '^(a|b|c|d)\. ' | grep -cE ' [0-9]+ / [0-9]+')" != 4 ]; then
	echo "FAIL: a row without figures"
	exit 1
fi
echo "index_compare_smoke: every row printed"
