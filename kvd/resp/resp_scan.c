/* resp_scan.c - SCAN and KEYS over kvd's key-ordered keyspace.
 *
 * kvd iterates keys in order, merging every shard, and resumes from a key.
 * Redis clients, though, expect the cursor to be a decimal integer: redis-cli
 * --scan reads it with strtoull and python's redis client with int().  A
 * key (up to 511 bytes) does not fit in 64 bits, so the server keeps the
 * resume keys: a cursor is the id of a slot in a fixed table shared by every
 * io thread, and "0" starts or ends a scan.  Ids grow by one per SCAN call
 * that has more to return and the table is a ring, so a cursor stays valid
 * for at least RESP_SCAN_SLOTS later calls, from any connection; an evicted
 * or unknown cursor is answered "invalid cursor", never with wrong keys.
 * The ids start from the clock (ms << 12), so a cursor from a previous run
 * of the server cannot match one of this run.
 *
 * As in Redis, MATCH filters the keys a call examines (COUNT of them), so a
 * page may be empty while the cursor is not 0.  A pattern's literal prefix
 * is used to seek, so "user:*" only walks keys starting with "user:".
 * The pattern is compiled once per call (resp_glob.c), so what it costs
 * does not repeat for every key examined.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kv_proto.h"
#include "kv_status.h"
#include "doc/hash.h"
#include "net/loop.h"
#include "resp.h"

#define SCAN_DEFAULT_COUNT 10
#define SCAN_MAX_BYTES (1u << 20)
#define KEYS_CHUNK 10000

/* ===================== Patterns ===================== */

/* The bytes every match must start with. */
static struct kv_slice glob_prefix(struct kv_slice pat)
{
	struct kv_slice pre = {pat.p, 0};

	while (pre.n < pat.n && pre.n < KV_MAX_KEY_LIMIT &&
	       !memchr("*?[\\", pat.p[pre.n], 4))
		pre.n++;
	return pre;
}

/* ===================== Cursors ===================== */

static struct {
	pthread_mutex_t mu;
	uint64_t last;
	struct {
		uint64_t id;
		uint16_t n;
		uint8_t key[KV_MAX_KEY_LIMIT];
	} slot[RESP_SCAN_SLOTS];
} cursors = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t cursor_save(struct kv_slice key, uint64_t now_ms)
{
	uint64_t id;

	pthread_mutex_lock(&cursors.mu);
	if (!cursors.last)
		cursors.last = now_ms << 12;
	id = ++cursors.last;
	cursors.slot[id % RESP_SCAN_SLOTS].id = id;
	cursors.slot[id % RESP_SCAN_SLOTS].n = (uint16_t)key.n;
	memcpy(cursors.slot[id % RESP_SCAN_SLOTS].key, key.p, key.n);
	pthread_mutex_unlock(&cursors.mu);
	return id;
}

/* Copy cursor id's key into buf; its length, or -1 if unknown. */
static int cursor_load(uint64_t id, uint8_t *buf)
{
	int n = -1;

	pthread_mutex_lock(&cursors.mu);
	if (cursors.slot[id % RESP_SCAN_SLOTS].id == id) {
		n = cursors.slot[id % RESP_SCAN_SLOTS].n;
		memcpy(buf, cursors.slot[id % RESP_SCAN_SLOTS].key, (size_t)n);
	}
	pthread_mutex_unlock(&cursors.mu);
	return n;
}

static int parse_cursor(struct kv_slice s, uint64_t *v)
{
	*v = 0;
	if (s.n == 0 || s.n > 20)
		return -1;
	for (size_t i = 0; i < s.n; i++) {
		if (s.p[i] < '0' || s.p[i] > '9' ||
		    *v > (UINT64_MAX - (s.p[i] - '0')) / 10)
			return -1;
		*v = *v * 10 + (uint64_t)(s.p[i] - '0');
	}
	return 0;
}

/* ===================== SCAN ===================== */

struct emit {
	struct kvd_conn *c;
	struct kv_slice pat;
	int has_pat;		/* else every key */
	struct resp_glob *glob; /* pat, compiled */
	uint64_t n;
	size_t off, cap; /* KEYS: the reply's start and its cap */
	int type;	 /* SCAN's TYPE: a KVD_VT_*, or -1 for any */
};

static int emit_key(void *arg, struct kv_slice key, struct kv_slice val,
		    unsigned type, uint64_t exp)
{
	struct emit *e = arg;

	(void)exp;
	(void)val;
	if (e->type >= 0 && (unsigned)e->type != type)
		return 0;
	if (e->has_pat && !resp_glob_match(e->glob, key))
		return 0;
	resp_add_bulk(e->c, key.p, key.n);
	e->n++;
	return e->c->out.err || e->c->out.len - e->off > e->cap;
}

struct scan_args {
	uint64_t cursor, count;
};

static const char *scan_options(struct resp_req *r, struct emit *e,
				struct scan_args *sa)
{
	struct resp_it it;
	struct kv_slice o, v;
	long long n;

	sa->count = SCAN_DEFAULT_COUNT;
	e->type = -1;
	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i += 2) {
		resp_it_next(&it, &o);
		if (i + 1 == r->argc)
			return resp_err_syntax;
		resp_it_next(&it, &v);
		if (resp_eq(o, "match")) {
			e->pat = v;
			e->has_pat = !(v.n == 1 && v.p[0] == '*');
		} else if (resp_eq(o, "count")) {
			if (resp_ll(v, &n))
				return resp_err_int;
			if (n < 1)
				return resp_err_syntax;
			sa->count = (uint64_t)n;
		} else if (resp_eq(o, "type")) {
			/* the types kvd has; any other name matches none */
			e->type = resp_eq(v, "string") ? KVD_VT_PLAIN
				  : resp_eq(v, "hash") ? KVD_VT_HASH
						       : KVD_VT_MAX + 1;
		} else {
			return resp_err_syntax;
		}
	}
	return NULL;
}

/* "*2\r\n$<n>\r\n<cursor>\r\n*<count>\r\n", inserted before the keys. */
static void scan_header(struct kvd_conn *c, size_t off, uint64_t cursor,
			uint64_t count)
{
	char num[24], hdr[80];
	size_t nl = resp_u64(num, cursor), h;

	memcpy(hdr, "*2\r\n$", 5);
	h = 5 + resp_u64(hdr + 5, nl);
	memcpy(hdr + h, "\r\n", 2);
	memcpy(hdr + h + 2, num, nl);
	h += 2 + nl;
	memcpy(hdr + h, "\r\n*", 3);
	h += 3 + resp_u64(hdr + h + 3, count);
	memcpy(hdr + h, "\r\n", 2);
	resp_insert(c, off, hdr, h + 2);
}

/* Compile e's pattern and seek by its literal prefix; NULL or an error. */
static const char *emit_pattern(struct emit *e, struct kvd_scan *sc)
{
	if (!e->has_pat)
		return NULL;
	if (!(e->glob = resp_glob_new()) || resp_glob_set(e->glob, e->pat))
		return resp_err_nomem;
	sc->prefix = glob_prefix(e->pat);
	return NULL;
}

const char *resp_scan(struct kvd_conn *c, struct resp_req *r)
{
	struct kvd_io *io = c->io;
	struct emit e = {c, {NULL, 0}, 0, NULL, 0, c->out.len, SIZE_MAX, -1};
	struct scan_args sa;
	struct kvd_scan sc = {0};
	struct kv_slice next;
	uint8_t from[KV_MAX_KEY_LIMIT];
	const char *err;
	int n = 0;

	if (parse_cursor(r->a[1], &sa.cursor))
		return "ERR invalid cursor";
	if ((err = scan_options(r, &e, &sa)))
		return err;
	if (sa.cursor && (n = cursor_load(sa.cursor, from)) < 0)
		return "ERR invalid cursor (unknown, or expired: see "
		       "docs/resp.md)";
	if ((err = emit_pattern(&e, &sc)))
		goto out;
	sc.start.p = from;
	sc.start.n = (size_t)n;
	sc.limit = sa.count > KV_SCAN_MAX_LIMIT ? KV_SCAN_MAX_LIMIT
						: (unsigned)sa.count;
	sc.max_bytes = SCAN_MAX_BYTES;
	sc.keys_only = 1;
	if (kvd_reader_scan(io->reader, &sc, io->now_ms, emit_key, &e, &next)) {
		c->out.len = e.off;
		err = resp_err_internal;
		goto out;
	}
	scan_header(c, e.off, next.n ? cursor_save(next, io->now_ms) : 0, e.n);
out:
	resp_glob_free(e.glob);
	return err;
}

/* KEYS walks everything in one call, in chunks, and refuses a reply larger
 * than max-output rather than growing without bound.  It blocks this io
 * thread for the whole walk: docs/resp.md says to use SCAN. */
const char *resp_keys(struct kvd_conn *c, struct resp_req *r)
{
	struct kvd_io *io = c->io;
	struct emit e = {c,	     r->a[1],		0, NULL, 0,
			 c->out.len, resp_reply_cap(c), -1};
	struct kvd_scan sc = {0};
	struct kv_slice next;
	uint8_t from[KV_MAX_KEY_LIMIT];
	const char *err;
	char hdr[24];
	size_t h;

	e.has_pat = !(e.pat.n == 1 && e.pat.p[0] == '*');
	if ((err = emit_pattern(&e, &sc)))
		goto out;
	sc.limit = KEYS_CHUNK;
	sc.max_bytes = SIZE_MAX;
	sc.keys_only = 1;
	do {
		if (kvd_reader_scan(io->reader, &sc, io->now_ms, emit_key, &e,
				    &next) ||
		    c->out.len - e.off > e.cap) {
			int big = c->out.len - e.off > e.cap;

			c->out.len = e.off;
			err = big ? "ERR KEYS reply would exceed max-output: "
				    "use SCAN"
				  : resp_err_internal;
			goto out;
		}
		if (next.n) /* copied: the next chunk re-seeks every shard */
			memcpy(from, next.p, next.n);
		sc.start.p = from;
		sc.start.n = next.n;
	} while (next.n);
	hdr[0] = '*';
	h = 1 + resp_u64(hdr + 1, e.n);
	memcpy(hdr + h, "\r\n", 2);
	resp_insert(c, e.off, hdr, h + 2);
out:
	resp_glob_free(e.glob);
	return err;
}
