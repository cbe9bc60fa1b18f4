# bench/peer_servers.sh - sourced by bench/doc_compare.sh and
# bench/index_compare.sh: kvd (its MongoDB door) and a PostgreSQL 15
# cluster started side by side in a temporary directory, stopped on exit,
# and the kvbench runs against either with each server's CPU time.
#
# The caller sets NAME (its messages and directory), KVD, KVBENCH,
# KDRIVER, PGBIN, PY, PGMAX (PostgreSQL's max_connections), PG_REC
# (kvbench's record arguments for PostgreSQL) and BENCH_DIR (this folder).
# KVD_ARGS, when set, adds options to kvd's command line.
# It gets WORK, KPORT, MPORT, KVD_PID, PGPORT, PG_PID, and bench (one
# kvbench run: $WORK/NAME.json, .out, .cpu, its command in $WORK/commands)
# and pair (two runs, the order alternated by repetition).

for f in "$KVD" "$KVBENCH" "$PGBIN/initdb"; do
	[ -x "$f" ] || { echo "$NAME: $f is missing (build first)" >&2; exit 2; }
done
"$KVBENCH" --help 2>&1 | grep -q mongodb ||
	{ echo "$NAME: kvbench was built without libmongoc" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvd-$NAME.XXXXXX")
KVD_PID=
PG_UP=
cleanup() {
	[ -n "$KVD_PID" ] && kill "$KVD_PID" 2>/dev/null && wait "$KVD_PID" 2>/dev/null
	[ -n "$PG_UP" ] && as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate stop >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# PostgreSQL refuses to run as root: run it as nobody then.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------- servers
KPORT=$(free_port)
MPORT=$(free_port)
"$KVD" --bind 127.0.0.1 --port "$KPORT" --mongo-port "$MPORT" \
	--data-dir "$WORK/kvd" --threads 2 --durability sync \
	--max-clients 10000 --log-level warn ${KVD_ARGS-} 2>"$WORK/kvd.log" &
KVD_PID=$!

mkdir -p "$WORK/pg"
if [ "$(id -u)" = 0 ]; then chown nobody "$WORK/pg"; chmod 755 "$WORK"; fi
as_pg "$PGBIN/initdb" -D "$WORK/pg/data" -U kvbench -A trust -E UTF8 --no-sync >/dev/null
PGPORT=$(free_port)
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w -t 60 \
	-o "-p $PGPORT -k $WORK/pg -c listen_addresses=127.0.0.1 -c max_connections=$PGMAX" \
	start >/dev/null
PG_UP=1
PG_PID=$(head -1 "$WORK/pg/data/postmaster.pid")

# kvbench against one server: $1 k|p, $2 the report's name, the rest its
# arguments.  The report is $WORK/$2.json; a failed run is told, not fatal.
bench() {
	who=$1 name=$2
	shift 2
	if [ "$who" = k ]; then
		set -- -D "$KDRIVER" --port "$MPORT" --server-pid "$KVD_PID" "$@"
	else
		set -- -D postgres $PG_REC --port "$PGPORT" \
			--conninfo "user=kvbench dbname=postgres" --server-pid "$PG_PID" "$@"
	fi
	{
		printf '  %s: kvbench' "$name"
		for a in "$@"; do
			case $a in *" "*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac
		done
		echo
	} | sed "s/--server-pid [0-9]*/--server-pid PID/; s/--port [0-9]*/--port PORT/" >>"$WORK/commands"
	spid=$KVD_PID
	[ "$who" = p ] && spid=$PG_PID
	if ! $PY "$BENCH_DIR/server_cpu.py" "$spid" "$WORK/$name.cpu" \
		"$KVBENCH" -q -s 1 --json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1; then
		echo "$NAME: $name failed: $(tail -1 "$WORK/$name.out")" >&2
		echo "$name" >>"$WORK/failed"
	fi
}

# In odd repetitions kvd first, in even ones PostgreSQL first.
pair() {
	rep=$1
	shift
	if [ $((rep % 2)) = 1 ]; then order="k p"; else order="p k"; fi
	for who in $order; do "$@" "$who"; done
}
