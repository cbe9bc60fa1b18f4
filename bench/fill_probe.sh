#!/bin/sh
# fill_probe.sh - what a uuid fill costs the device: one kvd (sync, two
# shards, a new data directory) filled by kvbench's uuid workload, with the
# device's sectors written and flushes read from /proc/diskstats before and
# after, and the checkpoints kvd counted.  Extra arguments go to kvd, so
# that two settings can be run back to back:
#
#   bench/fill_probe.sh BUILD_DIR KEYS [KVD_ARGS...]
#   bench/fill_probe.sh build-rel 10000000 --checkpoint-interval-ms 5000
#
# Prints kvbench's load line, then bytes and flushes per key.  The device is
# the one holding TMPDIR (default /tmp); other writers to it count too, so
# run nothing else meanwhile.  bench/RESULTS.md quotes it.
set -eu

BUILD=$1
KEYS=$2
shift 2
KVD=$BUILD/kvd/kvd
KVBENCH=$BUILD/bench/kvbench
KVCLI=$BUILD/kvcli/kvcli
PORT=${PORT:-17679}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/fill_probe.XXXXXX")
DEV=$(lsblk -no PKNAME "$(df --output=source "$DIR" | tail -1)" 2>/dev/null || true)
[ -n "$DEV" ] || DEV=$(basename "$(df --output=source "$DIR" | tail -1)")

"$KVD" --bind 127.0.0.1 --port "$PORT" --threads 2 --durability sync \
	--data-dir "$DIR/data" "$@" >"$DIR/kvd.log" 2>&1 &
KP=$!
trap 'kill $KP 2>/dev/null; wait $KP 2>/dev/null; rm -rf "$DIR"' EXIT
i=0
until "$KVCLI" -p "$PORT" ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$DIR/kvd.log"; exit 1; }
	sleep 0.2
done

# fields 10 (sectors written) and 20 (flushes completed) of the device
stat() { awk -v d="$DEV" '$3 == d { print $10, $20 }' /proc/diskstats; }
before=$(stat)
"$KVBENCH" -D kvd --port "$PORT" uuid -r "$KEYS" -t 2 -c 32 2>/dev/null |
	grep 'phase load'
after=$(stat)
ckpts=$("$KVCLI" -p "$PORT" stats | awk '/\.checkpoints/ { n += $2 } END { print n }')
echo "$before $after" | awk -v k="$KEYS" -v c="$ckpts" -v d="$DEV" '{
	printf "device %s: %.0f bytes and %.4f flushes per key; %d checkpoints\n",
	    d, ($3 - $1) * 512 / k, ($4 - $2) / k, c }'
