/* fuzz_dispatch.c - full command dispatch on any bytes: the real handlers of
 * both protocols (kvd/native/cmd.c, kvd/resp*.c) behind the real connection code
 * (kvd/net/conn.c), against a real store and real committer threads.
 *
 * The parsers have fuzzers of their own; this one is for the handlers,
 * where a request that parses may still be read past by a handler that
 * trusts the wrong argument count (HELLO with no argument did).  Every kvd
 * source but main.c and loop.c is linked; loop.c (io_uring) is replaced by
 * the few functions below, one fake io thread that the fuzzer drives:
 * writes go to the real committers through kvd_io_dispatch, and come back
 * through kvd_io_complete, which wakes us like the io thread's eventfd.
 * The store lives in a temporary directory made once per process under
 * $TMPDIR (removed at exit, or by the next run when libFuzzer ended without
 * exit handlers), opened with durability async so commits do not wait for
 * the disk.
 *
 * The first input byte chooses:
 *   bit 0     protocol: native (0) or RESP (1)
 *   bit 1     the connection is authenticated
 *   bit 2     no password configured (else requirepass is "pw")
 *   bits 3-5  chunk size in which the rest arrives (1 byte .. all at once)
 *   bit 6     the rest holds expand.h's repeats, up to 4 x max-frame-size:
 *             arguments as long as the limit allows (a glob pattern of
 *             400,000 '*'), commands with 40,000 keys
 * The store's limits are small (max-frame-size 512k, max-value-size 256k)
 * so that inputs reach them.  The rest is fed to kvd_conn_input chunk by
 * chunk; after each chunk every
 * write in flight is waited for (so replies, stalls and resumes run as in
 * the io loop) and the replies are checked to be well-formed frames or
 * RESP replies, then dropped as if sent.  After each input the store is
 * emptied, so inputs do not depend on each other.
 *
 * BACKUP writes directories: kvd_backup_start is wrapped (-Wl,--wrap) so
 * that an absolute target is moved under the temporary directory (with
 * every byte but [A-Za-z0-9_-/] replaced, so no ".." can climb out);
 * other targets pass unchanged, as kvd refuses them before touching the
 * file system.  Nothing this fuzzer does leaves its directory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/auth.h"
#include "ops/backup.h"
#include "net/conn.h"
#include "expand.h"
#include "fuzz.h"
#include "kv_mp.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp/resp.h"
#include "store.h"
#include "net/write.h"

static struct kvd_config cfg;
static struct kvd_server srv;
static struct kvd_io *io;
#define MAX_FRAME (512u << 10)
#define EXPANDED_MAX (4 * MAX_FRAME) /* a few commands that large */

static char tmpdir[256];
static unsigned writes; /* dispatched since the store was last emptied */
static int backups;	/* a backup directory may exist */

/* ===================== loop.c, for one fake io thread =====================
 * The free lists, the hand-off to the committers and back are io.c's own;
 * these few stand in for the ring. */

void kvd_io_mark(struct kvd_conn *c)
{
	(void)c; /* the fuzzer looks at every connection after every chunk */
}

void kvd_io_again(struct kvd_conn *c)
{
	(void)c; /* settle() gives a connection its next turn (STALL_TURN,
		  * STALL_YIELD: a sorted DOCFIND page's next slice) */
}

void kvd_io_handshake_done(struct kvd_conn *c)
{
	(void)c; /* no TLS listener here: handshakes are not bounded */
}

void kvd_io_request_stop(struct kvd_server *server)
{
	(void)server; /* SHUTDOWN: the fuzzer goes on */
}

/* Wait for every write (and backup) in flight, as on_wake() does. */
static void drain(void)
{
	for (;;) {
		uint64_t n;
		ssize_t got;

		/* The io loop pushes a turn's writes to the committers at its
		 * end; completions may have started more. */
		kvd_committer_flush(io->srv->com);
		if (!io->inflight)
			break;
		writes += io->inflight; /* (flush_store: only "any?" counts) */
		while ((got = read(io->efd, &n, sizeof(n))) < 0 &&
		       errno == EINTR)
			; /* libFuzzer's -timeout alarm */
		FUZZ_CHECK(got == sizeof(n));
		kvd_io_completed(
		    io, atomic_exchange_explicit(&io->done, NULL,
						 memory_order_acquire));
	}
}

/* ===================== BACKUP, kept inside the temporary directory ===== */

int __real_kvd_backup_start(struct kvd_conn *c, struct kv_slice dir);
int __wrap_kvd_backup_start(struct kvd_conn *c, struct kv_slice dir);

int __wrap_kvd_backup_start(struct kvd_conn *c, struct kv_slice dir)
{
	char path[1024], bk[300];
	size_t n = (size_t)snprintf(path, sizeof(path), "%s/bk", tmpdir);
	struct kv_slice safe;

	if (dir.n == 0 || dir.p[0] != '/' || dir.n >= 512 ||
	    memchr(dir.p, '\0', dir.n))
		return __real_kvd_backup_start(c, dir); /* refused unread */
	for (size_t i = 0; i < dir.n && n < sizeof(path) - 1; i++) {
		uint8_t ch = dir.p[i];
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			 (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
			 ch == '/';

		path[n++] = ok ? (char)ch : '_';
	}
	path[n] = '\0';
	snprintf(bk, sizeof(bk), "%s/bk", tmpdir);
	FUZZ_CHECK(mkdir(bk, 0700) == 0 || errno == EEXIST);
	safe.p = (const uint8_t *)path;
	safe.n = n;
	backups = 1;
	return __real_kvd_backup_start(c, safe);
}

/* ===================== WAIT, which may wait for ever ===================== */

int __real_kvd_repl_native(struct kvd_conn *c, struct kvd_req *r);
int __wrap_kvd_repl_native(struct kvd_conn *c, struct kvd_req *r);
int __wrap_kvd_repl_wait(struct kvd_conn *c, unsigned op, uint64_t n,
			 uint64_t ms, kvd_repl_wait_fn answer);

int __wrap_kvd_repl_native(struct kvd_conn *c, struct kvd_req *r)
{
	if (r->op == KV_OP_WAIT)
		return KV_DISABLED;
	return __real_kvd_repl_native(c, r);
}

int __wrap_kvd_repl_wait(struct kvd_conn *c, unsigned op, uint64_t n,
			 uint64_t ms, kvd_repl_wait_fn answer)
{
	(void)op;
	(void)n;
	(void)ms;
	(void)answer;
	resp_add_error(c, "ERR WAIT is not run by the fuzzer");
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup(void)
{
	if (tmpdir[0])
		rm_tree(tmpdir);
}

/* libFuzzer may end without running atexit (a finding, -max_total_time):
 * remove what fuzzers that are gone left in base. */
static void sweep_stale(const char *base)
{
	static const char prefix[] = "kvd-fuzz-dispatch-";
	struct dirent *de;
	DIR *d = opendir(base);

	while (d && (de = readdir(d))) {
		char path[512];
		long pid;

		if (strncmp(de->d_name, prefix, sizeof(prefix) - 1))
			continue;
		pid = strtol(de->d_name + sizeof(prefix) - 1, NULL, 10);
		if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		rm_tree(path);
	}
	if (d)
		closedir(d);
}

/* ===================== Reply checks ===================== */

/* One RESP reply at *p: 0, or -1 when it is not well-formed. */
static int resp_reply(const uint8_t **p, const uint8_t *end, int depth)
{
	const uint8_t *q = *p, *cr;
	long long n = 0;
	int neg = 0;

	if (q >= end || depth > 8)
		return -1;
	cr = memmem(q, (size_t)(end - q), "\r\n", 2);
	if (!cr)
		return -1;
	if (*q == '+' || *q == '-') {
		*p = cr + 2;
		return 0;
	}
	if (*q == ':') { /* any 64-bit integer: a sign and 1 to 19 digits */
		const uint8_t *d = q + 1 + (q + 1 < cr && q[1] == '-');

		if (d == cr || cr - d > 19)
			return -1;
		for (; d < cr; d++)
			if (*d < '0' || *d > '9')
				return -1;
		*p = cr + 2;
		return 0;
	}
	if (*q != '$' && *q != '*')
		return -1;
	for (const uint8_t *d = q + 1; d < cr; d++) {
		if (d == q + 1 && *d == '-') {
			neg = 1;
			continue;
		}
		if (*d < '0' || *d > '9' || n > (1ll << 40))
			return -1;
		n = n * 10 + (*d - '0');
	}
	*p = cr + 2;
	if (neg)
		return n != 1 ? -1 : 0;
	if (*q == '$') {
		if (end - *p < n + 2 || (*p)[n] != '\r' || (*p)[n + 1] != '\n')
			return -1;
		*p += n + 2;
		return 0;
	}
	for (long long i = 0; i < n; i++)
		if (resp_reply(p, end, depth + 1))
			return -1;
	return 0;
}

/* Every reply in c->out is whole and well-formed; then they are "sent". */
static void check_out(struct kvd_conn *c)
{
	const uint8_t *p = c->out.data, *end = p;

	if (!c->out.len)
		return;
	end += c->out.len;
	while (p < end) {
		if (c->proto == KVD_PROTO_RESP) {
			FUZZ_CHECK(resp_reply(&p, end, 0) == 0);
		} else {
			const uint8_t *b;
			struct kv_mp_obj o;
			uint32_t n;

			FUZZ_CHECK(end - p >= KV_FRAME_HDR);
			n = kv_load_be32(p);
			b = p + KV_FRAME_HDR;
			FUZZ_CHECK((size_t)(end - b) >= n);
			p = b + n;
			FUZZ_CHECK(kv_mp_next(&b, p, &o) == 0 &&
				   o.type == KV_MP_ARRAY && o.len >= 1);
			FUZZ_CHECK(kv_mp_next(&b, p, &o) == 0 &&
				   o.type == KV_MP_UINT);
		}
	}
	c->out.len = 0;
}

/* After a chunk: run everything in flight to the end, as the loop would
 * over its next turns, sending replies as they come. */
static void settle(struct kvd_conn *c)
{
	for (;;) {
		drain();
		check_out(c);
		/* it ran its slice, or a page gave the thread back: next turn */
		if (c->stall == STALL_TURN || c->stall == STALL_YIELD) {
			kvd_conn_again(c);
			continue;
		}
		if (c->stall != STALL_OUTPUT)
			break;
		kvd_conn_sent(c); /* everything went out: resume */
		if (c->stall == STALL_OUTPUT && !io->inflight && !c->out.len)
			break;
	}
	kvd_reader_reset(io->reader);
	/* Nothing is in flight, so nothing may still wait for it. */
	FUZZ_CHECK(c->npend == 0 && c->stall != STALL_WRITES);
}

/* Empty the store between inputs, through the committers. */
static void flush_store(void)
{
	struct kvd_conn c;

	if (!writes)
		return;
	memset(&c, 0, sizeof(c));
	c.io = io;
	c.fd = -1;
	c.flags = CONN_AUTHED;
	FUZZ_CHECK(kvd_write_all(&c, KV_OP_FLUSHALL, KVD_W_FLUSH) == KV_OK);
	drain();
	FUZZ_CHECK(c.npend == 0);
	kvd_conn_release(&c);
	writes = 0;
}

/* ===================== Setup ===================== */

static void setup(void)
{
	char *argv[] = {"fuzz_dispatch",
			"--data-dir",
			tmpdir,
			"--threads",
			"2",
			"--durability",
			"async",
			"--map-size",
			"256m",
			"--memtable-size",
			"1m",
			"--journal-segment-size",
			"1m",
			"--max-output",
			"64k",
			"--log-level",
			"error",
			"--max-frame-size",
			"512k",
			"--max-value-size",
			"256k",
			NULL};
	const char *base = getenv("TMPDIR");
	char err[768];

	if (!base || base[0] != '/')
		base = "/tmp";
	sweep_stale(base);
	snprintf(tmpdir, sizeof(tmpdir), "%s/kvd-fuzz-dispatch-%ld-XXXXXX",
		 base, (long)getpid());
	FUZZ_CHECK(mkdtemp(tmpdir) != NULL);
	atexit(cleanup);
	FUZZ_CHECK(kvd_config_load(&cfg, 21, argv) == 0);
	FUZZ_CHECK(cfg.max_frame == MAX_FRAME);
	FUZZ_CHECK(kvd_auth_setup(&cfg, err, sizeof(err)) == 0);
	FUZZ_CHECK(kvd_log_open("/dev/null", KVD_LOG_ERROR) == 0);
	srv.cfg = &cfg;
	srv.nio = 1;
	srv.start_ms = kvd_now_ms();
	if (kvd_server_open_store(&srv, err, sizeof(err))) {
		fprintf(stderr, "fuzz_dispatch: %s\n", err);
		abort();
	}
	FUZZ_CHECK((srv.io = calloc(1, sizeof(*srv.io))) != NULL);
	FUZZ_CHECK((io = calloc(1, sizeof(*io))) != NULL);
	srv.io[0] = io;
	io->srv = &srv;
	io->efd = eventfd(0, EFD_CLOEXEC);
	io->reader = kvd_reader_new(srv.store);
	FUZZ_CHECK(io->efd >= 0 && io->reader);
	for (int i = 0; i < KVD_NLISTEN; i++)
		io->lfd[i] = -1;
	FUZZ_CHECK(kvd_server_start_committers(&srv) == 0);
	FUZZ_CHECK(kvd_repl_start(&srv, err, sizeof(err)) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[8] = {1, 2, 3, 7, 64, 4096, 65536, 1 << 30};
	struct kvd_conn c;
	uint8_t *big = NULL;
	size_t chunk, pos = 1;

	if (size == 0)
		return 0;
	if (data[0] & 0x40) { /* repeats: the rest expanded */
		FUZZ_CHECK(
		    fuzz_expand(data, size, 1, EXPANDED_MAX, &big, &size) == 0);
		data = big;
	}
	memset(&c, 0, sizeof(c));
	c.io = io;
	c.fd = -1;
	c.id = ++io->next_id;
	c.proto = data[0] & 1 ? KVD_PROTO_RESP : KVD_PROTO_NATIVE;
	c.flags = data[0] & 2 ? CONN_AUTHED : 0;
	snprintf(cfg.requirepass, sizeof(cfg.requirepass), "%s",
		 data[0] & 4 ? "" : "pw");
	chunk = chunks[(data[0] >> 3) & 7];
	io->now_ms = kvd_now_ms();
	io->turn_ns = kvd_mono_ns();
	if (kvd_protos[c.proto]->open) /* as the loop does */
		kvd_protos[c.proto]->open(&c);
	while (pos < size && !(c.flags & (CONN_CLOSING | CONN_DEAD))) {
		size_t n = size - pos < chunk ? size - pos : chunk;

		kvd_conn_input(&c, data + pos, n);
		pos += n;
		settle(&c);
	}
	/* The peer is gone: what it started still ends, nothing is left. */
	drain();
	check_out(&c);
	FUZZ_CHECK(c.npend == 0 && c.deferred == 0);
	if (kvd_protos[c.proto]->close)
		kvd_protos[c.proto]->close(&c);
	kvd_conn_release(&c);
	flush_store();
	if (backups) {
		char bk[300];

		snprintf(bk, sizeof(bk), "%s/bk", tmpdir);
		kvd_backup_wait();
		rm_tree(bk);
		backups = 0;
	}
	free(big);
	return 0;
}
