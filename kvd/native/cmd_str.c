/* cmd_str.c - the native protocol's string, bit and key operations of
 * version 2: RENAME, COPY, GETEX, INCRBYFLOAT, SETRANGE, SETBIT and BITOP
 * (each read, computed and written in an exclusive section), and GETRANGE,
 * GETBIT, BITCOUNT and BITPOS (reads).
 *
 * They are the RESP commands' twins (resp_multi.c, resp_rmw.c,
 * resp_str.c): the same exclusive sections (shard.h), the same
 * arithmetic (strops.h), the same rule that what is journaled is the
 * result.  Only the arguments and replies are the native protocol's
 * (docs/protocol.md section 4).  Each operation has a check, which looks
 * at its arguments alone, so that TXN can refuse a bad sub-request before
 * running any.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "resp/resp.h"
#include "net/router.h"
#include "store.h"
#include "strops.h"
#include "net/write.h"

_Static_assert(KV_BITOP_AND == BOP_AND && KV_BITOP_OR == BOP_OR &&
		   KV_BITOP_XOR == BOP_XOR && KV_BITOP_NOT == BOP_NOT,
	       "BITOP's wire numbers are strops.h's");

/* A section operation queues at most this many writes at a time. */
#define SECTION_MAX_WRITES 4
/* GETEX's absolute times: 2^52 ms is well past any real date. */
#define AT_MAX (1ull << 52)

static const struct kv_slice none;

static struct kv_slice sl(const struct kv_buf *b)
{
	return (struct kv_slice){.p = b->data, .n = b->len};
}

/* ===================== Sections ===================== */

int kvd_cmd_in_section(struct kvd_conn *c, struct kvd_req *r, kvd_section_fn fn,
		       void *arg)
{
	struct kvd_excl *x = kvd_excl_current(), *own = NULL;
	struct kvd_wreq *w[SECTION_MAX_WRITES], *p;
	size_t mark = c->out.len, n = 0;
	int rc;

	if (x) {
		kvd_excl_commit(x); /* TXN's writes before it */
	} else {
		if (!(own = malloc(sizeof(*own))))
			return KV_INTERNAL;
		kvd_excl_begin(own, c->io->srv->com);
		x = own;
	}
	kvd_excl_capture(x);
	rc = fn(c, r, arg);
	for (p = x->cap; p && n < SECTION_MAX_WRITES; p = p->next)
		w[n++] = p;
	kvd_excl_apply(x);
	kvd_excl_commit(x);
	for (size_t i = 0; i < n && rc == KV_OK; i++) {
		if (w[i]->op.status >= KV_MALFORMED) {
			c->out.len = mark; /* the failure is the answer */
			rc = w[i]->op.status;
		}
	}
	if (own) {
		kvd_excl_end(own);
		free(own);
	}
	return rc;
}

/* Queue one silent write, committed when the section's fn returns; tag:
 * what it does to its key (keyspace.h), 0 for what its kind says. */
static int write_later(struct kvd_conn *c, enum kvd_wkind kind,
		       struct kv_slice k, struct kv_slice v, uint64_t exp,
		       uint16_t tag)
{
	return kvd_write_tagged(c, KVD_OP_SILENT, kind, k, v, exp, 0, 0, tag);
}

/* The value at k from the io thread's snapshot: KV_OK, KV_NOT_FOUND or a
 * failure. */
static int value_of(struct kvd_conn *c, struct kv_slice k, struct kv_slice *v)
{
	struct kvd_io *io = c->io;

	return kvd_reader_get(io->reader,
			      kvd_shard_of(k.p, k.n, io->srv->nshards), k.p,
			      k.n, io->now_ms, v);
}

/* A bit argument: 0, 1, false or true. */
static int arg_bit(const struct kv_mp_obj *o, int *bit)
{
	if (o->type == KV_MP_BOOL) {
		*bit = o->v.b != 0;
		return KV_OK;
	}
	if (o->type != KV_MP_UINT || o->v.u > 1)
		return KV_BAD_ARGS;
	*bit = (int)o->v.u;
	return KV_OK;
}

/* ===================== RENAME, COPY ===================== */

struct move {
	struct kv_slice src, dst;
	int del, nx;
};

static int move_args(struct kvd_conn *c, struct kvd_req *r, struct move *m)
{
	uint64_t flags;
	int rc;

	if ((rc = kvd_arg_key(c, &r->a[0], &m->src)) ||
	    (rc = kvd_arg_key(c, &r->a[1], &m->dst)) ||
	    (rc = kvd_arg_opt_uint(r, 2, 0, &flags)))
		return rc;
	m->del = r->op == KV_OP_RENAME;
	if (m->del) {
		if (flags & ~(uint64_t)KV_RENAME_NX)
			return KV_BAD_ARGS;
		m->nx = (flags & KV_RENAME_NX) != 0;
	} else {
		if (flags & ~(uint64_t)KV_COPY_REPLACE)
			return KV_BAD_ARGS;
		m->nx = !(flags & KV_COPY_REPLACE);
		/* as Redis: a key is not copied onto itself */
		if (m->src.n == m->dst.n &&
		    !memcmp(m->src.p, m->dst.p, m->src.n))
			return KV_BAD_ARGS;
	}
	return KV_OK;
}

int kvd_check_rename(struct kvd_conn *c, struct kvd_req *r)
{
	struct move m;

	return move_args(c, r, &m);
}

/* The tag of the PUT that moves or copies src: RENAME's events are its
 * own (kvd_keyspace_renamed), COPY's "copy_to"; the value keeps its
 * encoding, and COPY makes a private object of a shared one. */
static uint16_t moved_tag(struct kv_slice src, int del, struct kvd_conn *c)
{
	unsigned enc = kvd_keyspace_encoding(
	    kvd_shard_of(src.p, src.n, c->io->srv->nshards), src);

	if (del)
		return KVD_TAG(KVD_EV_QUIET, enc) | KVD_TAG_NEW;
	return KVD_TAG(KVD_EV_COPY_TO, enc ? enc : KVD_ENC_PRIVATE) |
	       KVD_TAG_NEW;
}

/* Copy src to dst with its expiry, then delete src for RENAME.  The new
 * key is committed (in sync mode flushed) before the old one is deleted:
 * a crash in between leaves both, never neither. */
static int move_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	const struct move *m = arg;
	struct kv_buf v = {0};
	uint64_t exp, dexp;
	struct kvd_wreq *w;
	unsigned type = KVD_VT_PLAIN, dtype;
	int rc = resp_section_readv(c, m->src, &v, &exp, &type);

	(void)r;
	if (rc != KV_OK)
		goto out;
	if (m->src.n == m->dst.n && !memcmp(m->src.p, m->dst.p, m->src.n)) {
		rc = m->nx ? KV_EXISTS : KV_OK; /* RENAME k k: nothing to do */
		goto answer;
	}
	if (m->nx) {
		rc = resp_section_readv(c, m->dst, NULL, &dexp, &dtype);
		if (rc != KV_NOT_FOUND) {
			rc = rc == KV_OK ? KV_EXISTS : rc;
			goto out;
		}
	}
	w = kvd_write_now(c, kvd_excl_current(), KVD_OP_SILENT, KVD_W_PUT,
			  m->dst, sl(&v), exp, moved_tag(m->src, m->del, c),
			  type);
	rc = !w ? KV_INTERNAL : w->op.status;
	if (rc != KV_OK || !m->del)
		goto answer;
	/* the new key is there: a failure now leaves both, and says so */
	w = kvd_write_now(c, kvd_excl_current(), KVD_OP_SILENT, KVD_W_DEL,
			  m->src, none, 0, KVD_TAG(KVD_EV_QUIET, 0),
			  KVD_VT_PLAIN);
	rc = !w ? KV_INTERNAL : w->op.status;
	if (rc == KV_OK)
		kvd_keyspace_renamed(c->io->srv->cfg, m->src, m->dst);
answer:
	if (rc == KV_OK)
		kvd_reply_status(c, KV_OK, NULL);
out:
	kv_buf_free(&v);
	return rc;
}

int kvd_op_rename(struct kvd_conn *c, struct kvd_req *r)
{
	struct move m;
	int rc = move_args(c, r, &m);

	if (rc)
		return rc;
	return kvd_cmd_in_section(c, r, move_fn, &m);
}

/* ===================== GETEX ===================== */

struct getex {
	struct kv_slice k;
	int set, persist, abs;
	uint64_t when;
};

static int getex_args(struct kvd_conn *c, struct kvd_req *r, struct getex *g)
{
	uint64_t flags;
	int rc;

	memset(g, 0, sizeof(*g));
	if ((rc = kvd_arg_key(c, &r->a[0], &g->k)) ||
	    (rc = kvd_arg_opt_uint(r, 2, 0, &flags)))
		return rc;
	if (flags & ~(uint64_t)(KV_GETEX_PERSIST | KV_GETEX_AT))
		return KV_BAD_ARGS;
	g->set = r->argc > 1 && r->a[1].type != KV_MP_NIL;
	g->persist = (flags & KV_GETEX_PERSIST) != 0;
	g->abs = (flags & KV_GETEX_AT) != 0;
	if (g->persist)
		return g->set || g->abs ? KV_BAD_ARGS : KV_OK;
	if (!g->set)
		return g->abs ? KV_BAD_ARGS : KV_OK;
	if (r->a[1].type != KV_MP_UINT)
		return KV_BAD_ARGS;
	g->when = r->a[1].v.u;
	if (g->abs ? g->when > AT_MAX : g->when == 0 || g->when > KVD_TTL_MAX)
		return KV_BAD_ARGS;
	return KV_OK;
}

int kvd_check_getex(struct kvd_conn *c, struct kvd_req *r)
{
	struct getex g;

	return getex_args(c, r, &g);
}

static int getex_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	const struct getex *g = arg;
	struct kv_buf v = {0};
	uint64_t cur, now, at;
	int rc = resp_section_read(c, g->k, &v, &cur);

	(void)r;
	if (rc != KV_OK)
		goto out;
	now = c->io->now_ms;
	kvd_reply_value(c, sl(&v));
	if (g->set) {
		at = g->abs ? g->when : now + g->when;
		/* a time already past deletes the key, as Redis does */
		rc = at <= now
			 ? write_later(c, KVD_W_DEL, g->k, none, 0, 0)
			 : write_later(c, KVD_W_EXPIRE, g->k, none, at, 0);
	} else if (g->persist && cur) {
		rc = write_later(c, KVD_W_EXPIRE, g->k, none, 0, 0);
	}
out:
	kv_buf_free(&v);
	return rc;
}

int kvd_op_getex(struct kvd_conn *c, struct kvd_req *r)
{
	struct getex g;
	int rc = getex_args(c, r, &g);

	if (rc)
		return rc;
	return kvd_cmd_in_section(c, r, getex_fn, &g);
}

/* ===================== INCRBYFLOAT ===================== */

/* The increment: decimal text as Redis takes it, or an integer. */
static int incr_arg(const struct kv_mp_obj *o, long double *incr)
{
	if (o->type == KV_MP_UINT) {
		*incr = (long double)o->v.u;
		return KV_OK;
	}
	if (o->type == KV_MP_INT) {
		*incr = (long double)o->v.i;
		return KV_OK;
	}
	if (!kvd_arg_is_bytes(o) ||
	    kvd_parse_ld((struct kv_slice){o->p, o->len}, incr) || isinf(*incr))
		return KV_BAD_ARGS;
	return KV_OK;
}

int kvd_check_incrbyfloat(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;
	long double incr;
	int rc = kvd_arg_key(c, &r->a[0], &k);

	return rc ? rc : incr_arg(&r->a[1], &incr);
}

static int incrbyfloat_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	const long double *incr = arg;
	struct kv_slice k = {r->a[0].p, r->a[0].len};
	struct kv_buf v = {0};
	long double cur = 0;
	char out[5 * 1024 + 64];
	uint64_t exp = 0;
	size_t n;
	int rc = resp_section_read(c, k, &v, &exp);

	if (rc == KV_NOT_FOUND)
		rc = KV_OK;
	else if (rc == KV_OK && kvd_parse_ld(sl(&v), &cur))
		rc = KV_NOT_FLOAT;
	if (rc != KV_OK)
		goto out;
	cur += *incr;
	if (isnan(cur) || isinf(cur)) {
		rc = KV_NOT_FLOAT;
		goto out;
	}
	if (!(n = kvd_format_ld(out, sizeof(out), cur))) {
		rc = KV_INTERNAL;
		goto out;
	}
	kvd_reply_value(c, (struct kv_slice){(const uint8_t *)out, n});
	rc = write_later(c, KVD_W_PUT, k,
			 (struct kv_slice){(const uint8_t *)out, n}, exp,
			 KVD_TAG(KVD_EV_INCRBYFLOAT, KVD_ENC_EMBSTR));
out:
	kv_buf_free(&v);
	return rc;
}

int kvd_op_incrbyfloat(struct kvd_conn *c, struct kvd_req *r)
{
	long double incr;
	int rc = kvd_check_incrbyfloat(c, r);

	if (rc || (rc = incr_arg(&r->a[1], &incr)))
		return rc;
	return kvd_cmd_in_section(c, r, incrbyfloat_fn, &incr);
}

/* ===================== SETRANGE, SETBIT ===================== */

struct patch {
	struct kv_slice k, data;
	uint64_t off; /* bytes (SETRANGE) or bits (SETBIT) */
	int bit;
};

/* The value grown with zeros to at least len bytes; its old expiry. */
static int load_grown(struct kvd_conn *c, struct kv_slice k, struct kv_buf *v,
		      uint64_t len, uint64_t *exp, int *dirty)
{
	int rc = resp_section_read(c, k, v, exp);

	/* made or grown: Redis's "dirty" (lookupStringForBitCommand) */
	*dirty = rc != KV_OK || v->len < len;
	if (rc == KV_NOT_FOUND) {
		*exp = 0;
		rc = KV_OK;
	}
	if (rc != KV_OK)
		return rc;
	if (v->len < len) {
		if (kv_buf_reserve(v, len - v->len))
			return KV_INTERNAL;
		memset(v->data + v->len, 0, len - v->len);
		v->len = len;
	}
	return KV_OK;
}

static int setrange_args(struct kvd_conn *c, struct kvd_req *r, struct patch *p)
{
	uint64_t max = c->io->srv->cfg->max_value;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = kvd_arg_key(c, &r->a[0], &p->k)))
		return rc;
	if (r->a[1].type != KV_MP_UINT || !kvd_arg_is_bytes(&r->a[2]))
		return KV_BAD_ARGS;
	p->off = r->a[1].v.u;
	p->data = (struct kv_slice){r->a[2].p, r->a[2].len};
	if (p->data.n && (p->off > max || p->data.n > max - p->off))
		return KV_VALUE_TOO_LARGE;
	return KV_OK;
}

int kvd_check_setrange(struct kvd_conn *c, struct kvd_req *r)
{
	struct patch p;

	return setrange_args(c, r, &p);
}

static int setrange_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	const struct patch *p = arg;
	struct kv_buf v = {0};
	uint64_t exp;
	int rc, dirty;

	(void)r;
	if (!p->data.n) { /* nothing to write: the length as it is */
		rc = resp_section_read(c, p->k, &v, &exp);
		if (rc == KV_OK || rc == KV_NOT_FOUND) {
			kvd_reply_uint(c, v.len);
			rc = KV_OK;
		}
		goto out;
	}
	rc = load_grown(c, p->k, &v, p->off + p->data.n, &exp, &dirty);
	if (rc != KV_OK)
		goto out;
	memcpy(v.data + p->off, p->data.p, p->data.n);
	kvd_reply_uint(c, v.len);
	rc = write_later(c, KVD_W_PUT, p->k, sl(&v), exp,
			 KVD_TAG(KVD_EV_SETRANGE, KVD_ENC_RAW));
out:
	kv_buf_free(&v);
	return rc;
}

int kvd_op_setrange(struct kvd_conn *c, struct kvd_req *r)
{
	struct patch p;
	int rc = setrange_args(c, r, &p);

	if (rc)
		return rc;
	return kvd_cmd_in_section(c, r, setrange_fn, &p);
}

static int setbit_args(struct kvd_conn *c, struct kvd_req *r, struct patch *p)
{
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = kvd_arg_key(c, &r->a[0], &p->k)))
		return rc;
	if (r->a[1].type != KV_MP_UINT || arg_bit(&r->a[2], &p->bit))
		return KV_BAD_ARGS;
	p->off = r->a[1].v.u;
	if ((p->off >> 3) >= c->io->srv->cfg->max_value)
		return KV_VALUE_TOO_LARGE;
	return KV_OK;
}

int kvd_check_setbit(struct kvd_conn *c, struct kvd_req *r)
{
	struct patch p;

	return setbit_args(c, r, &p);
}

static int setbit_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	const struct patch *p = arg;
	struct kv_buf v = {0};
	uint64_t exp, byte = p->off >> 3;
	uint8_t mask = (uint8_t)(0x80u >> (p->off & 7));
	int dirty, rc = load_grown(c, p->k, &v, byte + 1, &exp, &dirty), same;

	(void)r;
	if (rc != KV_OK)
		goto out;
	same = ((v.data[byte] & mask) != 0) == (p->bit != 0);
	kvd_reply_uint(c, (v.data[byte] & mask) != 0);
	if (p->bit)
		v.data[byte] |= mask;
	else
		v.data[byte] &= (uint8_t)~mask;
	/* "setbit" only for a bit changed or a key made or grown (Redis) */
	rc = write_later(c, KVD_W_PUT, p->k, sl(&v), exp,
			 KVD_TAG(same && !dirty ? KVD_EV_QUIET : KVD_EV_SETBIT,
				 KVD_ENC_RAW));
out:
	kv_buf_free(&v);
	return rc;
}

int kvd_op_setbit(struct kvd_conn *c, struct kvd_req *r)
{
	struct patch p;
	int rc = setbit_args(c, r, &p);

	if (rc)
		return rc;
	return kvd_cmd_in_section(c, r, setbit_fn, &p);
}

/* ===================== BITOP ===================== */

int kvd_check_bitop(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_mp_obj o;
	struct kvd_argit it;
	struct kv_slice k;
	int rc;

	if (r->a[0].type != KV_MP_UINT || r->a[0].v.u > KV_BITOP_NOT)
		return KV_BAD_ARGS;
	if (r->a[0].v.u == KV_BITOP_NOT && r->argc != 3)
		return KV_BAD_ARGS; /* NOT takes one source */
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_key(c, &o, &k)))
			return rc;
	}
	return KV_OK;
}

/* Fold the sources (arguments 2...) into out (kvd_bitop_sources). */
static int bitop_fold_all(struct kvd_conn *c, struct kvd_req *r, int op,
			  struct kv_buf *out)
{
	uint32_t n = r->argc - 2;
	struct kv_slice *src = malloc(n * sizeof(*src));
	struct kv_mp_obj o;
	struct kvd_argit it;
	int rc;

	if (!src)
		return KV_INTERNAL;
	kvd_argit_init(r, 2, &it);
	for (uint32_t i = 0; i < n; i++) {
		kvd_argit_next(&it, &o);
		src[i] = (struct kv_slice){o.p, o.len};
	}
	rc = kvd_bitop_sources(c, op, src, n, out);
	free(src);
	return rc;
}

static int bitop_fn(struct kvd_conn *c, struct kvd_req *r, void *arg)
{
	struct kv_slice dst = {r->a[1].p, r->a[1].len};
	struct kv_buf out = {0};
	int rc = bitop_fold_all(c, r, (int)r->a[0].v.u, &out);

	(void)arg;
	if (rc == KV_OK) {
		kvd_reply_uint(c, out.len);
		/* as Redis: an empty result deletes the destination */
		rc = out.len ? write_later(c, KVD_W_PUT, dst, sl(&out), 0,
					   KVD_TAG(KVD_EV_SET, KVD_ENC_RAW))
			     : write_later(c, KVD_W_DEL, dst, none, 0, 0);
	}
	kv_buf_free(&out);
	return rc;
}

int kvd_op_bitop(struct kvd_conn *c, struct kvd_req *r)
{
	int rc = kvd_check_bitop(c, r);

	return rc ? rc : kvd_cmd_in_section(c, r, bitop_fn, NULL);
}

/* ===================== Reads ===================== */

int kvd_check_getrange(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;
	int64_t s, e;
	int rc;

	if ((rc = kvd_arg_key(c, &r->a[0], &k)))
		return rc;
	if (r->a[1].type == KV_MP_NIL || r->a[2].type == KV_MP_NIL ||
	    kvd_arg_opt_int(r, 1, 0, &s) || kvd_arg_opt_int(r, 2, 0, &e))
		return KV_BAD_ARGS;
	return KV_OK;
}

int kvd_op_getrange(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k = {r->a[0].p, r->a[0].len}, v;
	int64_t s, e;
	long long start, end;
	int rc = kvd_check_getrange(c, r);

	if (rc || (rc = value_of(c, k, &v)))
		return rc;
	kvd_arg_opt_int(r, 1, 0, &s);
	kvd_arg_opt_int(r, 2, 0, &e);
	start = s;
	end = e;
	if ((start < 0 && end < 0 && start > end) ||
	    !kvd_clamp_range(&start, &end, (long long)v.n))
		v.n = 0;
	else
		v = (struct kv_slice){v.p + start, (size_t)(end - start + 1)};
	kvd_reply_value(c, v);
	return KV_OK;
}

int kvd_check_getbit(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;
	int rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc)
		return rc;
	return r->a[1].type == KV_MP_UINT ? KV_OK : KV_BAD_ARGS;
}

int kvd_op_getbit(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k = {r->a[0].p, r->a[0].len}, v;
	uint64_t off = r->a[1].v.u;
	int rc = kvd_check_getbit(c, r), bit = 0;

	if (rc)
		return rc;
	rc = value_of(c, k, &v);
	if (rc != KV_OK && rc != KV_NOT_FOUND)
		return rc;
	if (rc == KV_OK && (off >> 3) < v.n)
		bit = (v.p[off >> 3] >> (7 - (off & 7))) & 1;
	kvd_reply_uint(c, (uint64_t)bit);
	return KV_OK;
}

/* BITCOUNT's and BITPOS's range: start and end (signed, nil: 0 and -1)
 * at arguments i and i + 1, the unit flag at i + 2. */
static int bit_range_args(const struct kvd_req *r, unsigned i,
			  struct bitrange *br, int *isbit, int *end_given)
{
	int64_t s, e;
	uint64_t flags;

	if (kvd_arg_opt_int(r, i, 0, &s) || kvd_arg_opt_int(r, i + 1, -1, &e) ||
	    kvd_arg_opt_uint(r, i + 2, 0, &flags) ||
	    (flags & ~(uint64_t)KV_BIT_RANGE_BITS))
		return KV_BAD_ARGS;
	br->start = s;
	br->end = e;
	br->first_mask = br->last_mask = 0;
	*isbit = (flags & KV_BIT_RANGE_BITS) != 0;
	*end_given = i + 1 < r->argc && r->a[i + 1].type != KV_MP_NIL;
	return KV_OK;
}

int kvd_check_bitcount(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;
	struct bitrange br;
	int isbit, end_given, rc = kvd_arg_key(c, &r->a[0], &k);

	return rc ? rc : bit_range_args(r, 1, &br, &isbit, &end_given);
}

int kvd_op_bitcount(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k = {r->a[0].p, r->a[0].len}, v;
	struct bitrange br;
	int isbit, end_given, rc = kvd_check_bitcount(c, r);
	long long n = 0;

	if (rc)
		return rc;
	bit_range_args(r, 1, &br, &isbit, &end_given);
	rc = value_of(c, k, &v);
	if (rc != KV_OK && rc != KV_NOT_FOUND)
		return rc;
	if (rc == KV_OK && !(br.start < 0 && br.end < 0 && br.start > br.end) &&
	    kvd_bitrange_bytes(&br, (long long)v.n, isbit)) {
		n = kvd_popcount(v.p + br.start,
				 (size_t)(br.end - br.start + 1));
		n -= __builtin_popcount(v.p[br.start] & br.first_mask);
		n -= __builtin_popcount(v.p[br.end] & br.last_mask);
	}
	kvd_reply_uint(c, (uint64_t)n);
	return KV_OK;
}

int kvd_check_bitpos(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;
	struct bitrange br;
	int bit, isbit, end_given, rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc)
		return rc;
	if (arg_bit(&r->a[1], &bit))
		return KV_BAD_ARGS;
	return bit_range_args(r, 2, &br, &isbit, &end_given);
}

int kvd_op_bitpos(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k = {r->a[0].p, r->a[0].len}, v;
	struct bitrange br;
	long long pos, bytes;
	int bit = 0, isbit, end_given, rc = kvd_check_bitpos(c, r);

	if (rc)
		return rc;
	arg_bit(&r->a[1], &bit);
	bit_range_args(r, 2, &br, &isbit, &end_given);
	rc = value_of(c, k, &v);
	if (rc == KV_NOT_FOUND) { /* an endless run of zeros */
		kvd_reply_int(c, bit ? -1 : 0);
		return KV_OK;
	}
	if (rc != KV_OK)
		return rc;
	if (!kvd_bitrange_bytes(&br, (long long)v.n, isbit)) {
		kvd_reply_int(c, -1);
		return KV_OK;
	}
	pos = kvd_bitpos_range(v.p, &br, bit, &bytes);
	if (end_given && bit == 0 && pos == bytes * 8)
		pos = -1; /* no zero inside an explicit range */
	else if (pos != -1)
		pos += br.start * 8;
	kvd_reply_int(c, pos);
	return KV_OK;
}
