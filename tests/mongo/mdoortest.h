/* mdoortest.h - what the MongoDB door's C tests share: a host whose
 * connections keep their reply bytes in memory (and count resumes and
 * closes), a settable clock, the in-memory store, OP_MSG / OP_QUERY
 * requests built with libbson, and replies taken apart again.  The door
 * is driven by bytes in and checked by bytes out, as a driver sees it. */
#ifndef KVD_TESTS_MDOORTEST_H
#define KVD_TESTS_MDOORTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor.h"
#include "memstore.h"
#include "mqltest.h"

struct tconn {
	struct mdoor_conn *mc;
	uint8_t *out;
	size_t len, cap;
	int resumed, closed, authed, auth_fails;
	int yields;	 /* mdoor_again calls */
	int gate_refuse; /* auth_gate answers -1 */
};

static uint64_t t_clock = 1700000000000ull;
static int t_seq = 1;

static inline void th_reply(void *conn, const void *p, size_t n)
{
	struct tconn *c = conn;

	if (c->len + n > c->cap) {
		c->cap = (c->len + n) * 2;
		c->out = realloc(c->out, c->cap);
	}
	memcpy(c->out + c->len, p, n);
	c->len += n;
}
static inline void th_resume(void *conn)
{
	((struct tconn *)conn)->resumed++;
}
static inline void th_close(void *conn)
{
	((struct tconn *)conn)->closed++;
}
static inline int th_gate(void *conn)
{
	return ((struct tconn *)conn)->gate_refuse ? -1 : 0;
}
static inline void th_failed(void *conn)
{
	((struct tconn *)conn)->auth_fails++;
}
static inline void th_authed(void *conn)
{
	((struct tconn *)conn)->authed++;
}
static inline uint64_t th_now(void *ctx)
{
	(void)ctx;
	return t_clock;
}
static inline void th_stats(void *ctx, struct mdoor_stats *st)
{
	(void)ctx;
	st->conn_current = 3;
	st->conn_available = 997;
	st->conn_total = 42;
}
static inline void th_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	if (getenv("MDOOR_TEST_LOG"))
		fprintf(stderr, "log %d: %s\n", level, msg);
}

/* A door over ms; cfg may be NULL (no password). */
static inline struct mdoor *th_door(struct memstore *ms,
				    const struct mdoor_config *cfg)
{
	struct mdoor_host h = {
	    .reply = th_reply,
	    .resume = th_resume,
	    .close = th_close,
	    .auth_gate = th_gate,
	    .auth_failed = th_failed,
	    .authed = th_authed,
	    .now_ms = th_now,
	    .stats = th_stats,
	    .log = th_log,
	};
	struct mdoor_config def = {.kvd_version = "0.1.0",
				   .host = "testhost:27017",
				   .pid = 1234,
				   .start_ms = t_clock - 5000};
	struct mdoor_store st;
	char err[256];
	struct mdoor *d;

	memstore_ops(ms, &st);
	d = mdoor_new(cfg ? cfg : &def, &h, &st, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "mdoor_new: %s\n", err);
		abort();
	}
	return d;
}

static inline struct tconn *th_open(struct mdoor *d, uint64_t id)
{
	struct tconn *c = calloc(1, sizeof(*c));
	struct mdoor_peer peer = {.remote = "127.0.0.1:50000", .id = id};

	c->mc = mdoor_conn_open(d, c, &peer);
	return c;
}

static inline void th_close_conn(struct tconn *c)
{
	mdoor_conn_close(c->mc);
	free(c->out);
	free(c);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* A document sequence for msg(): identifier and documents. */
struct tseq {
	const char *id;
	bson_t **docs;
	size_t n;
};

/* OP_MSG with body and optional sequences; *len its length.  flags as
 * given (a checksum is appended when flags has bit 0). */
uint32_t mdoor_crc32c(uint32_t crc, const uint8_t *p, size_t n);
static inline uint8_t *msg(const bson_t *body, uint32_t flags,
			   const struct tseq *seqs, size_t nseqs, size_t *len)
{
	size_t n = 16 + 4 + 1 + body->len, off;
	uint8_t *m;

	for (size_t s = 0; s < nseqs; s++) {
		n += 1 + 4 + strlen(seqs[s].id) + 1;
		for (size_t i = 0; i < seqs[s].n; i++)
			n += seqs[s].docs[i]->len;
	}
	if (flags & 1)
		n += 4;
	m = calloc(1, n);
	put32(m, (uint32_t)n);
	put32(m + 4, (uint32_t)t_seq++);
	put32(m + 12, 2013);
	put32(m + 16, flags);
	m[20] = 0;
	memcpy(m + 21, bson_get_data(body), body->len);
	off = 21 + body->len;
	for (size_t s = 0; s < nseqs; s++) {
		size_t start = off + 1;

		m[off] = 1;
		off += 5;
		strcpy((char *)m + off, seqs[s].id);
		off += strlen(seqs[s].id) + 1;
		for (size_t i = 0; i < seqs[s].n; i++) {
			memcpy(m + off, bson_get_data(seqs[s].docs[i]),
			       seqs[s].docs[i]->len);
			off += seqs[s].docs[i]->len;
		}
		put32(m + start, (uint32_t)(off - start));
	}
	if (flags & 1)
		put32(m + off, mdoor_crc32c(0, m, off));
	*len = n;
	return m;
}

/* OP_QUERY of query on ns. */
static inline uint8_t *query_msg(const char *ns, const bson_t *q, size_t *len)
{
	size_t n = 16 + 4 + strlen(ns) + 1 + 8 + q->len;
	uint8_t *m = calloc(1, n);

	put32(m, (uint32_t)n);
	put32(m + 4, (uint32_t)t_seq++);
	put32(m + 12, 2004);
	strcpy((char *)m + 20, ns);
	put32(m + 20 + strlen(ns) + 1 + 4, (uint32_t)-1);
	memcpy(m + n - q->len, bson_get_data(q), q->len);
	*len = n;
	return m;
}

/* Feed bytes; returns how many the door consumed in all.  A read that
 * yields goes on at once, as the server's next loop turn would. */
static inline size_t feed(struct tconn *c, const uint8_t *p, size_t n)
{
	size_t used = 0, k;

	while (used < n) {
		if ((k = mdoor_input(c->mc, p + used, n - used, NULL)) > 0) {
			used += k;
			continue;
		}
		if (!mdoor_yielded(c->mc))
			break;
		while (mdoor_yielded(c->mc)) {
			c->yields++;
			mdoor_again(c->mc);
		}
	}
	while (mdoor_yielded(c->mc)) {
		c->yields++;
		mdoor_again(c->mc);
	}
	return used;
}

/* Take the first reply message out of c's output: its document (new),
 * opcode and responseTo; NULL when there is none. */
static inline bson_t *take(struct tconn *c, int *opcode, int *response_to)
{
	uint32_t len, off;
	bson_t *b;

	if (c->len < 16)
		return NULL;
	len = get32(c->out);
	if (len > c->len)
		return NULL;
	if (opcode)
		*opcode = (int)get32(c->out + 12);
	if (response_to)
		*response_to = (int)get32(c->out + 8);
	off = get32(c->out + 12) == 1 ? 36 : 21;
	b = bson_new_from_data(c->out + off, len - off);
	memmove(c->out, c->out + len, c->len - len);
	c->len -= len;
	return b;
}

/* Run one command (OP_MSG, body from JSON with $db added) and take its
 * reply. */
static inline bson_t *run_on(struct tconn *c, const char *db, bson_t *body)
{
	size_t n;
	uint8_t *m;

	BSON_APPEND_UTF8(body, "$db", db);
	m = msg(body, 0, NULL, 0, &n);
	feed(c, m, n);
	free(m);
	bson_destroy(body);
	return take(c, NULL, NULL);
}

static inline bson_t *run(struct tconn *c, const char *json)
{
	return run_on(c, "test", J(json));
}

/* Helpers on replies. */
static inline double ok_of(const bson_t *r)
{
	bson_iter_t it;

	return r && bson_iter_init_find(&it, r, "ok") ? bson_iter_as_double(&it)
						      : -1;
}
static inline int code_of(const bson_t *r)
{
	bson_iter_t it;

	return r && bson_iter_init_find(&it, r, "code")
		   ? (int)bson_iter_as_int64(&it)
		   : 0;
}
static inline int64_t int_at(const bson_t *r, const char *dotted)
{
	bson_iter_t it, f;

	return r && bson_iter_init(&it, r) &&
		       bson_iter_find_descendant(&it, dotted, &f)
		   ? bson_iter_as_int64(&f)
		   : -999;
}
static inline const char *str_at(const bson_t *r, const char *dotted)
{
	bson_iter_t it, f;

	return r && bson_iter_init(&it, r) &&
		       bson_iter_find_descendant(&it, dotted, &f) &&
		       BSON_ITER_HOLDS_UTF8(&f)
		   ? bson_iter_utf8(&f, NULL)
		   : "";
}
/* The number of elements of the array at dotted. */
static inline int count_at(const bson_t *r, const char *dotted)
{
	bson_iter_t it, f, a;
	int n = 0;

	if (!r || !bson_iter_init(&it, r) ||
	    !bson_iter_find_descendant(&it, dotted, &f) ||
	    !bson_iter_recurse(&f, &a))
		return -1;
	while (bson_iter_next(&a))
		n++;
	return n;
}

/* CHECK a reply field against relaxed JSON (the value at dotted, printed
 * as {'v': ...}). */
static inline char *json_at(const bson_t *r, const char *dotted)
{
	bson_iter_t it, f;
	bson_t tmp = BSON_INITIALIZER;
	char *s;

	if (r && bson_iter_init(&it, r) &&
	    bson_iter_find_descendant(&it, dotted, &f))
		bson_append_iter(&tmp, "v", 1, &f);
	s = S(&tmp);
	bson_destroy(&tmp);
	return s;
}
#define CHECK_JSON(r, dotted, want)                                            \
	do {                                                                   \
		char *got_ = json_at((r), (dotted));                           \
		CHECK(!strcmp(got_, (want)), "%s: got %s want %s", (dotted),   \
		      got_, (want));                                           \
		bson_free(got_);                                               \
	} while (0)
#define CHECK_ERR(r, want_code, want_msg)                                      \
	do {                                                                   \
		CHECK(ok_of(r) == 0 && code_of(r) == (want_code),              \
		      "want error %d, got ok %g code %d (%s)", (want_code),    \
		      ok_of(r), code_of(r), str_at((r), "errmsg"));            \
		if (want_msg)                                                  \
			CHECK(strstr(str_at((r), "errmsg"),                    \
				     (want_msg) ? (want_msg) : ""),            \
			      "errmsg '%s' lacks '%s'", str_at((r), "errmsg"), \
			      (want_msg) ? (want_msg) : "");                   \
	} while (0)

#endif
