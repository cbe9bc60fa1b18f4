/* resp_rmw.c - GETEX, MSETNX, SETRANGE, SETBIT, INCRBYFLOAT, BITOP and
 * BITFIELD: writes computed from what the keys hold.
 *
 * Each runs in an exclusive section (resp_multi.c, shard.h): the keys
 * are read with no batch under way on any shard, the result is computed
 * here and queued as a plain write that the section commits before it
 * ends, so nothing can land between the read and the write, and what is
 * journaled is the result.  The command answers itself; its write is
 * silent (op RESP_CMD_EXEC) unless it fails, when the failure is the
 * answer instead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "resp.h"
#include "strops.h"
#include "net/write.h"

#define SILENT RESP_CMD_EXEC
#define PROTO_MAX_BULK (512ull << 20) /* Redis's proto-max-bulk-len */

static const struct kv_slice none;

static const char *queued(int rc)
{
	return rc == KV_OK ? NULL : resp_err_internal;
}

static struct kv_slice sl(const struct kv_buf *b)
{
	return (struct kv_slice){.p = b->data, .n = b->len};
}

/* ===================== GETEX ===================== */

struct getex {
	int persist, set, abs;
	uint64_t unit, at;
	struct kv_slice when;
};

static const char *getex_fn(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	struct getex *g = arg;
	struct kv_buf v = {0};
	uint64_t cur;
	int rc = resp_section_read(c, r->a[1], &v, &cur);
	const char *err = NULL;

	if (rc == KV_NOT_FOUND) {
		resp_add_nil(c);
		goto out;
	}
	if (rc != KV_OK) {
		err = resp_read_err(rc);
		goto out;
	}
	/* as Redis: the expiry is checked once the key is found */
	if (g->set && (err = resp_parse_expire(c, r, g->when, g->unit, g->abs,
					       1, &g->at)))
		goto out;
	resp_add_bulk(c, v.data, v.len);
	if (g->set && g->at <= c->io->now_ms)
		err = queued(kvd_write_one(c, SILENT, KVD_W_DEL, r->a[1], none,
					   0, 0, 0));
	else if (g->set || (g->persist && cur))
		err = queued(kvd_write_one(c, SILENT, KVD_W_EXPIRE, r->a[1],
					   none, g->set ? g->at : 0, 0, 0));
out:
	kv_buf_free(&v);
	return err;
}

/* GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST] */
const char *resp_getex(struct kvd_conn *c, struct resp_req *r)
{
	struct getex g = {.unit = 1};
	struct kv_slice a;
	struct resp_it it;
	int n = 0;

	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i++) {
		resp_it_next(&it, &a);
		if (++n > 1)
			return resp_err_syntax;
		if (resp_eq(a, "persist")) {
			g.persist = 1;
			continue;
		}
		if (resp_eq(a, "ex") || resp_eq(a, "exat"))
			g.unit = 1000;
		else if (!resp_eq(a, "px") && !resp_eq(a, "pxat"))
			return resp_err_syntax;
		g.abs = a.n == 4;
		if (i + 1 >= r->argc)
			return resp_err_syntax;
		resp_it_next(&it, &g.when);
		i++;
		g.set = 1;
	}
	if (!resp_key_ok(c, r->a[1])) {
		resp_add_nil(c);
		return NULL;
	}
	return resp_in_section(c, r, getex_fn, &g);
}

/* ===================== MSETNX ===================== */

struct pairs {
	struct resp_req *r;
	struct resp_it it;
};

static void next_pair(void *arg, uint32_t i, struct kv_slice *k,
		      struct kv_slice *v)
{
	struct pairs *p = arg;

	if (i == 0)
		resp_it_init(p->r, 1, &p->it);
	resp_it_next(&p->it, k);
	resp_it_next(&p->it, v);
}

static const char *msetnx_fn(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	struct pairs p = {r, {NULL, 0}};
	struct resp_it it;
	struct kv_slice k, v;
	uint64_t exp;

	(void)arg;
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i += 2) {
		resp_it_next(&it, &k);
		resp_it_next(&it, &v);
		if (resp_section_read(c, k, NULL, &exp) != KV_NOT_FOUND) {
			resp_add_int(c, 0);
			return NULL;
		}
	}
	resp_add_int(c, 1);
	return queued(kvd_write_multi(c, SILENT, KVD_W_PUT, (r->argc - 1) / 2,
				      next_pair, &p, 0, 0));
}

/* MSETNX key value...: all set, or none when one exists. */
const char *resp_msetnx(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice k, v;

	if (r->argc % 2 == 0)
		return resp_arity_error(r, "msetnx");
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i += 2) {
		resp_it_next(&it, &k);
		resp_it_next(&it, &v);
		if (!resp_key_ok(c, k))
			return resp_err_key;
		if (v.n > c->io->srv->cfg->max_value)
			return "ERR string exceeds maximum allowed size "
			       "(max-value-size)";
	}
	return resp_in_section(c, r, msetnx_fn, NULL);
}

/* ===================== SETRANGE, SETBIT ===================== */

struct patch {
	uint64_t off; /* bytes (SETRANGE) or bits (SETBIT) */
	struct kv_slice data;
	int bit;
};

/* The value grown with zeros to at least len bytes; its old expiry.  0,
 * or the error to answer. */
static const char *load_grown(struct kvd_conn *c, struct kv_slice k,
			      struct kv_buf *v, uint64_t len, uint64_t *exp,
			      int *dirty)
{
	int rc = resp_section_read(c, k, v, exp);

	/* made or grown: Redis's "dirty" (lookupStringForBitCommand) */
	*dirty = rc != KV_OK || v->len < len;
	if (rc == KV_NOT_FOUND) {
		*exp = 0;
		rc = KV_OK;
	}
	if (rc != KV_OK)
		return resp_read_err(rc);
	if (v->len < len) {
		if (kv_buf_reserve(v, len - v->len))
			return resp_err_internal;
		memset(v->data + v->len, 0, len - v->len);
		v->len = len;
	}
	return NULL;
}

static const char *too_large(struct kvd_conn *c, uint64_t len)
{
	if (len > PROTO_MAX_BULK)
		return "ERR string exceeds maximum allowed size "
		       "(proto-max-bulk-len)";
	if (len > c->io->srv->cfg->max_value)
		return "ERR string exceeds maximum allowed size "
		       "(max-value-size)";
	return NULL;
}

static const char *setrange_fn(struct kvd_conn *c, struct resp_req *r,
			       void *arg)
{
	const struct patch *p = arg;
	struct kv_buf v = {0};
	uint64_t exp;
	const char *err = NULL;
	int dirty;

	if (!p->data.n) { /* nothing to write: the length as it is */
		int rc = resp_section_read(c, r->a[1], &v, &exp);

		if (rc != KV_OK && rc != KV_NOT_FOUND)
			err = resp_read_err(rc);
		else
			resp_add_int(c, (int64_t)v.len);
		goto out;
	}
	if ((err =
		 load_grown(c, r->a[1], &v, p->off + p->data.n, &exp, &dirty)))
		goto out;
	if ((err = too_large(c, v.len)))
		goto out;
	memcpy(v.data + p->off, p->data.p, p->data.n);
	resp_add_int(c, (int64_t)v.len);
	err = queued(kvd_write_tagged(c, SILENT, KVD_W_PUT, r->a[1], sl(&v),
				      exp, 0, 0,
				      KVD_TAG(KVD_EV_SETRANGE, KVD_ENC_RAW)));
out:
	kv_buf_free(&v);
	return err;
}

/* SETRANGE key offset value */
const char *resp_setrange(struct kvd_conn *c, struct resp_req *r)
{
	struct patch p = {.data = r->a[3]};
	long long off;
	const char *err;

	if (resp_ll(r->a[2], &off))
		return resp_err_int;
	if (off < 0)
		return "ERR offset is out of range";
	if (p.data.n && (err = too_large(c, (uint64_t)off + p.data.n)))
		return err;
	if (!resp_key_ok(c, r->a[1]))
		return resp_err_key;
	p.off = (uint64_t)off;
	return resp_in_section(c, r, setrange_fn, &p);
}

static const char *setbit_fn(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	const struct patch *p = arg;
	struct kv_buf v = {0};
	uint64_t exp, byte = p->off >> 3;
	uint8_t mask = (uint8_t)(0x80u >> (p->off & 7));
	const char *err = NULL;
	int dirty, same;

	if ((err = load_grown(c, r->a[1], &v, byte + 1, &exp, &dirty)))
		goto out;
	same = ((v.data[byte] & mask) != 0) == (p->bit != 0);
	resp_add_int(c, (v.data[byte] & mask) != 0);
	if (p->bit)
		v.data[byte] |= mask;
	else
		v.data[byte] &= (uint8_t)~mask;
	/* as Redis 7.0: "setbit" only for a bit changed or a key made or
	 * grown; the value is raw either way */
	err = queued(kvd_write_tagged(
	    c, SILENT, KVD_W_PUT, r->a[1], sl(&v), exp, 0, 0,
	    KVD_TAG(same && !dirty ? KVD_EV_QUIET : KVD_EV_SETBIT,
		    KVD_ENC_RAW)));
out:
	kv_buf_free(&v);
	return err;
}

/* SETBIT key offset 0|1 */
const char *resp_setbit(struct kvd_conn *c, struct resp_req *r)
{
	struct patch p = {0};
	long long off;
	const char *err;

	if (resp_ll(r->a[2], &off) || off < 0 ||
	    (unsigned long long)off >= PROTO_MAX_BULK * 8)
		return "ERR bit offset is not an integer or out of range";
	if (r->a[3].n != 1 || (r->a[3].p[0] != '0' && r->a[3].p[0] != '1'))
		return "ERR bit is not an integer or out of range";
	/* before the value is read and grown: nothing that big is made */
	if ((err = too_large(c, ((uint64_t)off >> 3) + 1)))
		return err;
	if (!resp_key_ok(c, r->a[1]))
		return resp_err_key;
	p.off = (uint64_t)off;
	p.bit = r->a[3].p[0] == '1';
	return resp_in_section(c, r, setbit_fn, &p);
}

/* ===================== INCRBYFLOAT ===================== */

static const char *incrbyfloat_fn(struct kvd_conn *c, struct resp_req *r,
				  void *arg)
{
	const long double *incr = arg;
	struct kv_buf v = {0};
	long double cur = 0;
	char out[5 * 1024 + 64];
	uint64_t exp;
	const char *err = NULL;
	size_t n;
	int rc = resp_section_read(c, r->a[1], &v, &exp);

	if (rc == KV_NOT_FOUND)
		exp = 0;
	else if (rc != KV_OK)
		err = resp_read_err(rc);
	else if (kvd_parse_ld(sl(&v), &cur))
		err = "ERR value is not a valid float";
	if (err)
		goto out;
	cur += *incr;
	if (isnan(cur) || isinf(cur)) {
		err = "ERR increment would produce NaN or Infinity";
		goto out;
	}
	n = kvd_format_ld(out, sizeof(out), cur);
	if (!n) {
		err = resp_err_internal;
		goto out;
	}
	resp_add_bulk(c, out, n);
	err = queued(kvd_write_tagged(
	    c, SILENT, KVD_W_PUT, r->a[1],
	    (struct kv_slice){.p = (uint8_t *)out, .n = n}, exp, 0, 0,
	    KVD_TAG(KVD_EV_INCRBYFLOAT, KVD_ENC_EMBSTR)));
out:
	kv_buf_free(&v);
	return err;
}

/* INCRBYFLOAT key increment */
const char *resp_incrbyfloat(struct kvd_conn *c, struct resp_req *r)
{
	long double incr;

	if (kvd_parse_ld(r->a[2], &incr))
		return "ERR value is not a valid float";
	if (!resp_key_ok(c, r->a[1]))
		return resp_err_key;
	return resp_in_section(c, r, incrbyfloat_fn, &incr);
}

/* ===================== BITOP ===================== */

static const char *bitop_fn(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	int op = *(const int *)arg;
	uint32_t n = r->argc - 3;
	struct kv_slice *src = malloc(n * sizeof(*src));
	struct kv_buf out = {0};
	struct resp_it it;
	const char *err = NULL;
	int rc;

	if (!src)
		return resp_err_internal;
	resp_it_init(r, 3, &it);
	for (uint32_t i = 0; i < n; i++)
		resp_it_next(&it, &src[i]);
	rc = kvd_bitop_sources(c, op, src, n, &out);
	if (rc == KV_VALUE_TOO_LARGE) {
		err = too_large(c, c->io->srv->cfg->max_value + 1);
		goto out;
	}
	if (rc) {
		err = resp_read_err(rc);
		goto out;
	}
	resp_add_int(c, (int64_t)out.len);
	err = queued(
	    out.len
		? kvd_write_tagged(c, SILENT, KVD_W_PUT, r->a[2], sl(&out), 0,
				   0, 0, KVD_TAG(KVD_EV_SET, KVD_ENC_RAW))
		: kvd_write_one(c, SILENT, KVD_W_DEL, r->a[2], none, 0, 0, 0));
out:
	free(src);
	kv_buf_free(&out);
	return err;
}

/* BITOP AND|OR|XOR|NOT destkey key... */
const char *resp_bitop(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice o = r->a[1];
	int op;

	if (resp_eq(o, "and"))
		op = BOP_AND;
	else if (resp_eq(o, "or"))
		op = BOP_OR;
	else if (resp_eq(o, "xor"))
		op = BOP_XOR;
	else if (resp_eq(o, "not"))
		op = BOP_NOT;
	else
		return resp_err_syntax;
	if (op == BOP_NOT && r->argc != 4)
		return "ERR BITOP NOT must be called with a single source key.";
	if (!resp_key_ok(c, r->a[2]))
		return resp_err_key;
	return resp_in_section(c, r, bitop_fn, &op);
}

/* ===================== BITFIELD ===================== */

struct bitfield {
	struct resp_bf_op *ops;
	uint32_t n;
	uint64_t maxbit; /* 0: GETs only */
};

/* As Redis: with a SET or INCRBY, the key is made (or grown with zeros)
 * to hold the furthest field written before any operation runs, and so
 * stays even when every write fails under OVERFLOW FAIL. */
static const char *bitfield_fn(struct kvd_conn *c, struct resp_req *r,
			       void *arg)
{
	const struct bitfield *b = arg;
	struct kv_buf v = {0};
	uint64_t exp;
	const char *err = NULL;
	int dirty, rc, changes = 0;

	if (!b->maxbit) {
		rc = resp_section_read(c, r->a[1], &v, &exp);
		if (rc != KV_OK && rc != KV_NOT_FOUND) {
			err = resp_read_err(rc);
			goto out;
		}
	} else if ((err = load_grown(c, r->a[1], &v, (b->maxbit + 7) >> 3, &exp,
				     &dirty))) {
		goto out;
	}
	resp_add_array(c, b->n);
	for (uint32_t i = 0; i < b->n; i++) {
		const struct resp_bf_op *o = &b->ops[i];
		int64_t x;

		if (o->op == RESP_BF_GET)
			resp_add_int(c, resp_bf_get(sl(&v), o));
		else if (resp_bf_write(v.data, o, &x))
			resp_add_nil(c);
		else
			resp_add_int(c, x), changes++;
	}
	if (b->maxbit)
		err = queued(kvd_write_tagged(/* "setbit" if one changed */
					      c, SILENT, KVD_W_PUT, r->a[1],
					      sl(&v), exp, 0, 0,
					      KVD_TAG(changes ? KVD_EV_SETBIT
							      : KVD_EV_QUIET,
						      KVD_ENC_RAW)));
out:
	kv_buf_free(&v);
	return err;
}

/* BITFIELD key [GET type offset | SET type offset value | INCRBY type
 * offset incr | OVERFLOW WRAP|SAT|FAIL]... */
const char *resp_bitfield(struct kvd_conn *c, struct resp_req *r)
{
	struct bitfield b;
	const char *err = resp_bf_parse(r, &b.ops, &b.n, &b.maxbit);

	if (err)
		return err;
	if (b.maxbit && (err = too_large(c, (b.maxbit + 7) >> 3)))
		goto out;
	if (!resp_key_ok(c, r->a[1])) {
		if (b.maxbit) {
			err = resp_err_key;
			goto out;
		}
		resp_add_array(c, b.n); /* GETs of a key that cannot exist */
		for (uint32_t i = 0; i < b.n; i++)
			resp_add_int(c, 0);
		goto out;
	}
	err = resp_in_section(c, r, bitfield_fn, &b);
out:
	free(b.ops);
	return err;
}
