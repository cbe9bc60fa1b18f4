/* resp_hash.c - Redis's hash commands (HSET, HGET, HGETALL, HINCRBY, HSCAN,
 * ...) on the RESP port, as Redis 7.0 answers them.
 *
 * A hash is one value of type KVD_VT_HASH (kvd/doc/hash.h).  Writes are
 * merge operations: checked whole here, then queued to the key's shard,
 * whose committer computes the new image against the layers (so two
 * clients changing one hash never lose an update) and journals it.  Reads
 * decode the image from the io thread's snapshot, as GET reads a value.
 * A command meeting a string answers WRONGTYPE, as a string command
 * meeting a hash does.  Replies that list a hash (HGETALL, HKEYS, HVALS,
 * HMGET, HRANDFIELD) are held to max-output like MGET's.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "doc/hash.h"
#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "resp.h"
#include "net/router.h"
#include "strops.h"
#include "net/write.h"

static const char err_reply[] = "ERR reply would exceed max-output: use HSCAN";

/* ===================== Reading a hash ===================== */

/* The hash at k: 1 with its image, 0 when missing, or -1 with *err. */
static int hash_of(struct kvd_conn *c, struct kv_slice k, struct kv_slice *img,
		   const char **err)
{
	struct kvd_io *io = c->io;
	unsigned type;
	uint64_t exp;
	int rc;

	if (!resp_key_ok(c, k))
		return 0;
	rc = kvd_reader_getv(io->reader,
			     kvd_shard_of(k.p, k.n, io->srv->nshards), k.p, k.n,
			     io->now_ms, img, &type, &exp);
	if (rc == KV_NOT_FOUND)
		return 0;
	if (rc != KV_OK) {
		*err = resp_err_internal;
		return -1;
	}
	if (type != KVD_VT_HASH) {
		*err = resp_err_wrongtype;
		return -1;
	}
	return 1;
}

/* A reply grown past max-output: taken back, and the error. */
static const char *capped(struct kvd_conn *c, size_t off)
{
	if (c->out.len - off <= resp_reply_cap(c))
		return NULL;
	c->out.len = off;
	return err_reply;
}

const char *resp_hget(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice img, v;
	const char *err;
	int rc = hash_of(c, r->a[1], &img, &err);

	if (rc < 0)
		return err;
	if (rc && (rc = kvh_get(img, r->a[2], &v)) < 0)
		return resp_err_internal;
	if (rc)
		resp_add_bulk(c, v.p, v.n);
	else
		resp_add_nil(c);
	return NULL;
}

const char *resp_hmget(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice img, f, v;
	struct resp_it it;
	const char *err;
	size_t off = c->out.len;
	int has = hash_of(c, r->a[1], &img, &err);

	if (has < 0)
		return err;
	resp_add_array(c, r->argc - 2);
	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i++) {
		int rc = 0;

		resp_it_next(&it, &f);
		if (has && (rc = kvh_get(img, f, &v)) < 0) {
			c->out.len = off;
			return resp_err_internal;
		}
		if (rc)
			resp_add_bulk(c, v.p, v.n);
		else
			resp_add_nil(c);
		if ((err = capped(c, off)))
			return err;
	}
	return NULL;
}

enum { LIST_FIELDS = 1, LIST_VALUES = 2 };

/* HGETALL, HKEYS, HVALS */
static const char *list_hash(struct kvd_conn *c, struct resp_req *r,
			     unsigned what)
{
	struct kv_slice img, f, v;
	struct kvh_iter it;
	const char *err;
	size_t off = c->out.len;
	uint32_t n = 0;
	unsigned flags;
	int rc = hash_of(c, r->a[1], &img, &err);

	if (rc < 0)
		return err;
	if (rc && kvh_open(img, &it, &n, &flags))
		return resp_err_internal;
	resp_add_array(c, (uint64_t)n *
			      (what == (LIST_FIELDS | LIST_VALUES) ? 2 : 1));
	while (rc && (rc = kvh_next(&it, &f, &v)) > 0) {
		if (what & LIST_FIELDS)
			resp_add_bulk(c, f.p, f.n);
		if (what & LIST_VALUES)
			resp_add_bulk(c, v.p, v.n);
		if ((err = capped(c, off)))
			return err;
	}
	if (rc < 0) {
		c->out.len = off;
		return resp_err_internal;
	}
	return NULL;
}

const char *resp_hgetall(struct kvd_conn *c, struct resp_req *r)
{
	return list_hash(c, r, LIST_FIELDS | LIST_VALUES);
}

const char *resp_hkeys(struct kvd_conn *c, struct resp_req *r)
{
	return list_hash(c, r, LIST_FIELDS);
}

const char *resp_hvals(struct kvd_conn *c, struct resp_req *r)
{
	return list_hash(c, r, LIST_VALUES);
}

const char *resp_hlen(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice img;
	const char *err;
	int rc = hash_of(c, r->a[1], &img, &err);

	if (rc < 0)
		return err;
	resp_add_int(c, rc ? kvh_len(img) : 0);
	return NULL;
}

/* HEXISTS (0 or 1) and HSTRLEN (the value's length, 0 for none). */
static const char *field_info(struct kvd_conn *c, struct resp_req *r, int len)
{
	struct kv_slice img, v;
	const char *err;
	int rc = hash_of(c, r->a[1], &img, &err);

	if (rc < 0)
		return err;
	if (rc && (rc = kvh_get(img, r->a[2], &v)) < 0)
		return resp_err_internal;
	resp_add_int(c, !rc ? 0 : len ? (int64_t)v.n : 1);
	return NULL;
}

const char *resp_hexists(struct kvd_conn *c, struct resp_req *r)
{
	return field_info(c, r, 0);
}

const char *resp_hstrlen(struct kvd_conn *c, struct resp_req *r)
{
	return field_info(c, r, 1);
}

/* ===================== Writes ===================== */

/* An operand: small ones on the stack, larger ones on the heap. */
struct operand {
	uint8_t stack[1024];
	struct kv_buf heap;
	struct kv_slice s;
};

/* The keyspace event of hash operation op, as Redis names it. */
static unsigned kvh_event(unsigned op)
{
	switch (op) {
	case KVH_OP_DEL: return KVD_EV_HDEL;
	case KVH_OP_INCRBY: return KVD_EV_HINCRBY;
	case KVH_OP_INCRBYFLOAT: return KVD_EV_HINCRBYFLOAT;
	default: return KVD_EV_HSET; /* HSET, HMSET, HSETNX */
	}
}

/* need bytes for o; NULL when out of memory. */
static uint8_t *operand_room(struct operand *o, size_t need)
{
	memset(&o->heap, 0, sizeof(o->heap));
	if (need <= sizeof(o->stack)) {
		o->s.p = o->stack;
	} else {
		if (kv_buf_reserve(&o->heap, need))
			return NULL;
		o->s.p = o->heap.data;
	}
	o->s.n = need;
	return (uint8_t *)o->s.p;
}

/* Queue merge operation op (hash.h) on key k with operand o.s. */
static const char *merge(struct kvd_conn *c, struct resp_req *r, unsigned op,
			 struct operand *o)
{
	int rc;

	if (!resp_key_ok(c, r->a[1])) {
		kv_buf_free(&o->heap);
		return resp_err_key;
	}
	rc = kvd_write_tagged(c, r->cmd, KVD_W_MERGE, r->a[1], o->s, 0,
			      (uint8_t)op, 0, KVD_TAG(kvh_event(op), 0));
	kv_buf_free(&o->heap);
	return rc == KV_OK ? NULL : resp_err_nomem;
}

/* The varint-prefixed strings of arguments from..argc into o, refused
 * past max-hash-bytes before anything is copied (the merge would refuse
 * it anyway). */
static const char *strings_operand(struct kvd_conn *c, struct resp_req *r,
				   uint32_t from, struct operand *o)
{
	struct resp_it it;
	struct kv_slice a;
	size_t need = 0;
	uint8_t *p;

	resp_it_init(r, from, &it);
	for (uint32_t i = from; i < r->argc; i++) {
		resp_it_next(&it, &a);
		need += kvh_str_size(a.n) + a.n;
	}
	if (need > c->io->srv->cfg->max_hash_bytes)
		return "ERR hash would exceed max-hash-bytes";
	if (!(p = operand_room(o, need)))
		return resp_err_nomem;
	resp_it_init(r, from, &it);
	for (uint32_t i = from; i < r->argc; i++) {
		resp_it_next(&it, &a);
		p += kvh_varint_put(p, (uint32_t)a.n);
		if (a.n)
			memcpy(p, a.p, a.n);
		p += a.n;
	}
	return NULL;
}

/* HSET key field value [field value ...], and HMSET */
const char *resp_hset(struct kvd_conn *c, struct resp_req *r)
{
	struct operand o;
	const char *err;

	if (r->argc % 2)
		return resp_arity_error(r, resp_cmds[r->cmd].name);
	if ((err = strings_operand(c, r, 2, &o)))
		return err;
	return merge(c, r, KVH_OP_SET, &o);
}

const char *resp_hsetnx(struct kvd_conn *c, struct resp_req *r)
{
	struct operand o;
	const char *err;

	if ((err = strings_operand(c, r, 2, &o)))
		return err;
	return merge(c, r, KVH_OP_SETNX, &o);
}

const char *resp_hdel(struct kvd_conn *c, struct resp_req *r)
{
	struct operand o;
	const char *err;

	if ((err = strings_operand(c, r, 2, &o)))
		return err;
	return merge(c, r, KVH_OP_DEL, &o);
}

const char *resp_hincrby(struct kvd_conn *c, struct resp_req *r)
{
	struct operand o;
	long long delta;
	struct kv_slice f = r->a[2];
	int64_t d;
	uint8_t *p;

	if (resp_ll(r->a[3], &delta))
		return resp_err_int;
	if (!(p = operand_room(&o, 8 + f.n)))
		return resp_err_nomem;
	d = delta; /* little-endian i64, then the field */
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)((uint64_t)d >> (8 * i));
	if (f.n)
		memcpy(p + 8, f.p, f.n);
	return merge(c, r, KVH_OP_INCRBY, &o);
}

const char *resp_hincrbyfloat(struct kvd_conn *c, struct resp_req *r)
{
	struct operand o;
	struct kv_slice f = r->a[2], x = r->a[3];
	long double incr;
	uint8_t *p;

	if (kvd_parse_ld(x, &incr))
		return "ERR value is not a valid float";
	if (isnan(incr) || isinf(incr))
		return "ERR value is NaN or Infinity";
	/* the field varint-prefixed, then the increment as it came */
	if (!(p = operand_room(&o, kvh_str_size(f.n) + f.n + x.n)))
		return resp_err_nomem;
	p += kvh_varint_put(p, (uint32_t)f.n);
	if (f.n)
		memcpy(p, f.p, f.n);
	memcpy(p + f.n, x.p, x.n);
	return merge(c, r, KVH_OP_INCRBYFLOAT, &o);
}

/* A hash write came back (resp_cmd.c, kvd_resp_wreply): 1 when pd was
 * one and is answered. */
int resp_hash_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	char msg[96];

	switch (pd->op) {
	case RESP_CMD_HSET:
	case RESP_CMD_HMSET:
	case RESP_CMD_HSETNX:
	case RESP_CMD_HDEL:
	case RESP_CMD_HINCRBY:
	case RESP_CMD_HINCRBYFLOAT: break;
	default: return 0;
	}
	switch (pd->status) {
	case KV_OK: break;
	case KV_WRONG_TYPE: resp_add_error(c, resp_err_wrongtype); return 1;
	case KV_NOT_INTEGER:
		resp_add_error(c, pd->result == 1
				      ? "ERR increment or decrement would "
					"overflow"
				      : "ERR hash value is not an integer");
		return 1;
	case KV_NOT_FLOAT:
		resp_add_error(c, pd->result == 1
				      ? "ERR increment would produce NaN or "
					"Infinity"
				      : "ERR hash value is not a float");
		return 1;
	case KV_VALUE_TOO_LARGE:
		snprintf(msg, sizeof(msg), "ERR hash would exceed %s",
			 pd->result == KVH_OVER_FIELDS ? "max-hash-fields"
						       : "max-hash-bytes");
		resp_add_error(c, msg);
		return 1;
	default: return 0; /* the general errors: kvd_resp_wreply's */
	}
	if (pd->op == RESP_CMD_HMSET)
		resp_add_ok(c);
	else if (pd->op == RESP_CMD_HINCRBYFLOAT)
		resp_add_bulk(c, pd->val, pd->vlen);
	else
		resp_add_int(c, pd->result);
	return 1;
}

/* ===================== HRANDFIELD ===================== */

/* Every field of a hash, for random picks and HSCAN's order. */
struct entries {
	struct kv_slice *f, *v;
	uint32_t n;
};

static int entries_load(struct kv_slice img, struct entries *e)
{
	struct kvh_iter it;
	unsigned flags;
	uint32_t i = 0;
	int rc;

	memset(e, 0, sizeof(*e));
	if (kvh_open(img, &it, &e->n, &flags))
		return -1;
	e->f = malloc((e->n ? e->n : 1) * sizeof(*e->f));
	e->v = malloc((e->n ? e->n : 1) * sizeof(*e->v));
	if (!e->f || !e->v)
		return -1;
	while (i < e->n && (rc = kvh_next(&it, &e->f[i], &e->v[i])) > 0)
		i++;
	return i == e->n ? 0 : -1;
}

static void entries_free(struct entries *e)
{
	free(e->f);
	free(e->v);
}

/* xorshift64 per io thread: a choice that need not be secret. */
static uint64_t rnd(void)
{
	static _Thread_local uint64_t s;

	if (!s)
		s = kvd_mono_ns() | 1;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

static void add_entry(struct kvd_conn *c, const struct entries *e, uint32_t i,
		      int withvalues)
{
	resp_add_bulk(c, e->f[i].p, e->f[i].n);
	if (withvalues)
		resp_add_bulk(c, e->v[i].p, e->v[i].n);
}

/* HRANDFIELD key count [WITHVALUES], count checked: as Redis 7.0, a
 * negative count may repeat fields, a positive one does not (the whole
 * hash when it has no more fields than count). */
static const char *randfields(struct kvd_conn *c, struct kv_slice img,
			      long long count, int withvalues)
{
	uint64_t want = count < 0 ? 0 - (uint64_t)count : (uint64_t)count;
	size_t off = c->out.len;
	struct entries e;
	uint32_t *idx = NULL;
	const char *err = NULL;

	if (entries_load(img, &e))
		goto fail;
	if (count >= 0 && want > e.n)
		want = e.n;
	resp_add_array(c, want * (withvalues ? 2 : 1));
	if (count < 0) {
		for (uint64_t i = 0; i < want && !err; i++) {
			add_entry(c, &e, (uint32_t)(rnd() % e.n), withvalues);
			err = capped(c, off);
		}
		goto out;
	}
	if (!(idx = malloc((e.n ? e.n : 1) * sizeof(*idx))))
		goto fail;
	for (uint32_t i = 0; i < e.n; i++)
		idx[i] = i;
	/* the whole hash in its order, or a partial Fisher-Yates shuffle */
	for (uint32_t i = 0; i < want && !err; i++) {
		uint32_t j = want == e.n ? i
					 : i + (uint32_t)(rnd() % (e.n - i)),
			 t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
		add_entry(c, &e, idx[i], withvalues);
		err = capped(c, off);
	}
	goto out;
fail:
	c->out.len = off;
	err = resp_err_nomem;
out:
	free(idx);
	entries_free(&e);
	return err;
}

const char *resp_hrandfield(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice img;
	const char *err;
	long long count = 0;
	int withvalues = 0, rc;

	if (r->argc >= 3) {
		if (resp_ll(r->a[2], &count))
			return resp_err_int;
		if (count == LLONG_MIN)
			return "ERR value is out of range, value must between "
			       "-9223372036854775807 and 9223372036854775807";
		if (r->argc > 4 ||
		    (r->argc == 4 && !resp_eq(r->a[3], "withvalues")))
			return resp_err_syntax;
		withvalues = r->argc == 4;
		if (withvalues &&
		    (count < -LLONG_MAX / 2 || count > LLONG_MAX / 2))
			return "ERR value is out of range";
	}
	rc = hash_of(c, r->a[1], &img, &err);
	if (rc < 0)
		return err;
	if (r->argc == 2) {
		struct entries e;

		if (!rc) {
			resp_add_nil(c);
			return NULL;
		}
		if (entries_load(img, &e) || !e.n) {
			entries_free(&e);
			return resp_err_internal;
		}
		add_entry(c, &e, (uint32_t)(rnd() % e.n), 0);
		entries_free(&e);
		return NULL;
	}
	if (!rc || count == 0) {
		resp_add_array(c, 0);
		return NULL;
	}
	return randfields(c, img, count, withvalues);
}

/* ===================== HSCAN ===================== */

/* A hash Redis would hold as a listpack is returned whole, cursor 0, as
 * Redis does.  A larger one is walked in the order of its fields' 64-bit
 * hashes (made odd, so that 0 stays "start"): the cursor is the hash of
 * the first field not returned yet.  A field there for the whole scan is
 * returned once, whatever is added or deleted meanwhile (its hash does
 * not move), which is what Redis promises.  A page holds COUNT fields, or
 * a sixteenth of the hash when that is more (COUNT is a hint in Redis
 * too), so a whole walk costs about sixteen passes over the hash. */
#define HSCAN_MAX_BYTES (1u << 20)

struct scan_ent {
	uint64_t h;
	uint32_t i;
};

static int scan_ent_cmp(const void *a, const void *b)
{
	const struct scan_ent *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h;
}

static uint64_t field_hash(struct kv_slice f)
{
	return XXH3_64bits(f.p, f.n) | 1;
}

struct hscan {
	uint64_t cursor, count;
	struct kv_slice pat;
	struct resp_glob *glob;
};

static const char *hscan_options(struct resp_req *r, struct hscan *h)
{
	struct resp_it it;
	struct kv_slice o, v;
	long long n;

	h->count = 10;
	resp_it_init(r, 3, &it);
	for (uint32_t i = 3; i < r->argc; i += 2) {
		resp_it_next(&it, &o);
		if (i + 1 == r->argc)
			return resp_err_syntax;
		resp_it_next(&it, &v);
		if (resp_eq(o, "count")) {
			if (resp_ll(v, &n))
				return resp_err_int;
			if (n < 1)
				return resp_err_syntax;
			h->count = (uint64_t)n;
		} else if (resp_eq(o, "match")) {
			h->pat = v;
		} else {
			return resp_err_syntax;
		}
	}
	if (h->pat.p && !(h->pat.n == 1 && h->pat.p[0] == '*') &&
	    (!(h->glob = resp_glob_new()) || resp_glob_set(h->glob, h->pat)))
		return resp_err_nomem;
	return NULL;
}

/* "*2\r\n$<n>\r\n<cursor>\r\n*<count>\r\n", put before the fields. */
static void hscan_header(struct kvd_conn *c, size_t off, uint64_t cursor,
			 uint64_t n)
{
	char num[24], hdr[80];
	size_t nl = resp_u64(num, cursor), h;

	memcpy(hdr, "*2\r\n$", 5);
	h = 5 + resp_u64(hdr + 5, nl);
	memcpy(hdr + h, "\r\n", 2);
	memcpy(hdr + h + 2, num, nl);
	h += 2 + nl;
	memcpy(hdr + h, "\r\n*", 3);
	h += 3 + resp_u64(hdr + h + 3, n);
	memcpy(hdr + h, "\r\n", 2);
	resp_insert(c, off, hdr, h + 2);
}

/* Fields i of e that the pattern takes, as pairs. */
static uint64_t hscan_emit(struct kvd_conn *c, const struct hscan *h,
			   const struct entries *e, uint32_t i)
{
	if (h->glob && !resp_glob_match(h->glob, e->f[i]))
		return 0;
	add_entry(c, e, i, 1);
	return 2;
}

/* The page of a large hash from h->cursor on; *next the next cursor. */
static int hscan_page(struct kvd_conn *c, const struct hscan *h,
		      const struct entries *e, uint64_t *n, uint64_t *next)
{
	struct scan_ent *s = malloc((e->n ? e->n : 1) * sizeof(*s));
	uint64_t page = h->count > e->n / 16 ? h->count : e->n / 16;
	size_t m = 0, start = c->out.len, k;

	if (!s)
		return -1;
	for (uint32_t i = 0; i < e->n; i++) {
		uint64_t x = field_hash(e->f[i]);

		if (x >= h->cursor)
			s[m++] = (struct scan_ent){x, i};
	}
	qsort(s, m, sizeof(*s), scan_ent_cmp);
	*next = 0;
	for (k = 0; k < m; k++) {
		/* a page ends between two hashes, never inside one */
		if ((k >= page || c->out.len - start >= HSCAN_MAX_BYTES) &&
		    s[k].h != s[k - 1].h) {
			*next = s[k].h;
			break;
		}
		*n += hscan_emit(c, h, e, s[k].i);
	}
	free(s);
	return 0;
}

/* Redis 7.0's cursor: strtoul's, so "" is 0, a sign is taken and "-1"
 * wraps to 2^64 - 1; no leading space, nothing after the digits, no
 * overflow. */
static int parse_cursor(struct kv_slice s, uint64_t *v)
{
	size_t i = 0;
	int neg = 0;

	*v = 0;
	if (s.n && (s.p[0] == '+' || s.p[0] == '-')) {
		neg = s.p[0] == '-';
		i = 1;
		if (i == s.n) /* a sign alone: no digits */
			return -1;
	}
	for (; i < s.n; i++) {
		unsigned d = (unsigned)(s.p[i] - '0');

		if (d > 9 || *v > (UINT64_MAX - d) / 10)
			return -1;
		*v = *v * 10 + d;
	}
	if (neg)
		*v = 0 - *v;
	return 0;
}

const char *resp_hscan(struct kvd_conn *c, struct resp_req *r)
{
	struct hscan h = {0};
	struct kv_slice img, cur = r->a[2];
	struct entries e = {0};
	size_t off = c->out.len;
	uint64_t n = 0, next = 0;
	const char *err = NULL;
	int rc;

	if (parse_cursor(cur, &h.cursor))
		return "ERR invalid cursor";
	rc = hash_of(c, r->a[1], &img, &err);
	if (rc < 0)
		return err;
	if (!rc) { /* as Redis: no key, no look at the options */
		hscan_header(c, off, 0, 0);
		return NULL;
	}
	if ((err = hscan_options(r, &h)))
		goto out;
	if (entries_load(img, &e)) {
		err = resp_err_nomem;
		goto out;
	}
	if (strcmp(kvh_encoding(img), "listpack") == 0) {
		for (uint32_t i = 0; i < e.n; i++)
			n += hscan_emit(c, &h, &e, i);
	} else if (hscan_page(c, &h, &e, &n, &next)) {
		c->out.len = off;
		err = resp_err_nomem;
		goto out;
	}
	hscan_header(c, off, next, n);
out:
	entries_free(&e);
	resp_glob_free(h.glob);
	return err;
}
