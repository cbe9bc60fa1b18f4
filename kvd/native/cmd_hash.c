/* cmd_hash.c - the native protocol's hash operations (33-38: HSET, HGET,
 * HGETALL, HDEL, HINCRBY, HSCAN; docs/protocol.md, "Hashes").
 *
 * They are RESP's hash commands (resp_hash.c) spoken in msgpack: writes
 * are the same merge operations (kvd/doc/hash.h), checked whole here and
 * computed by the key's committer against the layers, so two clients
 * changing different fields of one hash never lose an update; reads
 * decode the image from the io thread's snapshot, as GET reads a value.
 * A key that holds a string answers WRONG_TYPE.  Replies that list fields
 * are held to max-frame-size as MGET's are (REPLY_TOO_LARGE; HSCAN pages
 * a hash of any size).
 */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "doc/hash.h"
#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "net/router.h"
#include "net/write.h"

#define HSCAN_DEFAULT_LIMIT 100

/* ===================== Reads ===================== */

/* The hash at the request's key: 1 with its image, 0 when the key is
 * missing, or a negative KV status. */
static int hash_at(struct kvd_conn *c, struct kvd_req *r, struct kv_slice *img)
{
	struct kvd_io *io = c->io;
	struct kv_slice k;
	unsigned type;
	uint64_t exp;
	int rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc)
		return -rc;
	rc = kvd_reader_getv(io->reader,
			     kvd_shard_of(k.p, k.n, io->srv->nshards), k.p, k.n,
			     io->now_ms, img, &type, &exp);
	if (rc == KV_NOT_FOUND)
		return 0;
	if (rc != KV_OK)
		return -rc;
	return type == KVD_VT_HASH ? 1 : -KV_WRONG_TYPE;
}

/* Arguments from..argc are bytes of at most max-value-size: fields and
 * values. */
static int check_strings(struct kvd_conn *c, struct kvd_req *r, unsigned from)
{
	struct kv_mp_obj o;
	struct kv_slice s;
	struct kvd_argit it;
	int rc;

	kvd_argit_init(r, from, &it);
	for (uint32_t i = from; i < r->argc; i++) {
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_val(c, &o, &s)))
			return rc;
	}
	return KV_OK;
}

static int too_large(struct kvd_conn *c, size_t off)
{
	return c->out.len - off - KV_FRAME_HDR > c->io->srv->cfg->max_frame;
}

/* HGET: [34, key, field, ...] -> [0, value-or-nil, ...] */
int kvd_op_hget(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice img, v;
	struct kv_mp_obj o;
	struct kvd_argit it;
	size_t off;
	int has = check_strings(c, r, 1);

	if (has || (has = hash_at(c, r, &img)) < 0)
		return has < 0 ? -has : has;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, r->argc);
	kv_mp_uint(&c->out, KV_OK);
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		int rc = 0;

		kvd_argit_next(&it, &o);
		if (has && (rc = kvh_get(img, (struct kv_slice){o.p, o.len},
					 &v)) < 0) {
			c->out.len = off;
			return KV_INTERNAL;
		}
		if (rc)
			kv_mp_bin(&c->out, v.p, v.n);
		else
			kv_mp_nil(&c->out);
		if (too_large(c, off)) {
			c->out.len = off;
			return KV_REPLY_TOO_LARGE;
		}
	}
	kvd_reply_end(c, off);
	return KV_OK;
}

/* A hash's fields and values as one flat msgpack array into b: 0, or
 * KV_INTERNAL for an image that is not one. */
int kvd_hash_encode(struct kv_buf *b, struct kv_slice img)
{
	struct kv_slice f, v;
	struct kvh_iter it;
	uint32_t n;
	unsigned flags;
	int rc;

	if (kvh_open(img, &it, &n, &flags))
		return KV_INTERNAL;
	kv_mp_array(b, 2 * n);
	while ((rc = kvh_next(&it, &f, &v)) > 0) {
		kv_mp_bin(b, f.p, f.n);
		kv_mp_bin(b, v.p, v.n);
	}
	return rc < 0 ? KV_INTERNAL : KV_OK;
}

/* HGETALL: [35, key] -> [0, [field, value, ...]] in insertion order, or
 * [1] */
int kvd_op_hgetall(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice img;
	size_t off;
	int rc = hash_at(c, r, &img);

	if (rc <= 0)
		return rc < 0 ? -rc : KV_NOT_FOUND;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	if ((rc = kvd_hash_encode(&c->out, img)) || too_large(c, off)) {
		c->out.len = off;
		return rc ? rc : KV_REPLY_TOO_LARGE;
	}
	kvd_reply_end(c, off);
	return KV_OK;
}

/* ===================== HSCAN ===================== */

struct field {
	struct kv_slice f, v;
};

static int field_cmp(const void *a, const void *b)
{
	const struct kv_slice *x = &((const struct field *)a)->f;
	const struct kv_slice *y = &((const struct field *)b)->f;
	size_t n = x->n < y->n ? x->n : y->n;
	int d = n ? memcmp(x->p, y->p, n) : 0;

	return d ? d : (x->n > y->n) - (x->n < y->n);
}

/* The image's fields sorted bytewise: 0 with *out (malloc'd, *n of them),
 * or a KV status. */
static int fields_sorted(struct kv_slice img, struct field **out, uint32_t *n)
{
	struct kvh_iter it;
	struct field *a;
	uint32_t i = 0;
	unsigned flags;
	int rc;

	if (kvh_open(img, &it, n, &flags))
		return KV_INTERNAL;
	if (!(a = malloc(((size_t)*n ? *n : 1) * sizeof(*a))))
		return KV_INTERNAL;
	while (i < *n && (rc = kvh_next(&it, &a[i].f, &a[i].v)) > 0)
		i++;
	if (i != *n) {
		free(a);
		return KV_INTERNAL;
	}
	qsort(a, *n, sizeof(*a), field_cmp);
	*out = a;
	return KV_OK;
}

/* HSCAN: [38, key, start?, limit?] -> [0, [field, value, ...], next-or-nil]
 * in bytewise field order from start (inclusive). */
int kvd_op_hscan(struct kvd_conn *c, struct kvd_req *r)
{
	struct field *a = NULL, at;
	struct kv_slice img;
	uint64_t limit;
	uint32_t n = 0, i = 0, end;
	size_t off, bytes = 0, max = c->io->srv->cfg->max_frame / 2;
	int rc;

	memset(&at, 0, sizeof(at));
	if (r->argc > 1 && r->a[1].type != KV_MP_NIL) {
		if (!kvd_arg_is_bytes(&r->a[1]))
			return KV_BAD_ARGS;
		at.f = (struct kv_slice){r->a[1].p, r->a[1].len};
	}
	if ((rc = kvd_arg_opt_uint(r, 2, HSCAN_DEFAULT_LIMIT, &limit)))
		return rc;
	if (limit == 0)
		return KV_BAD_ARGS;
	if (limit > KV_SCAN_MAX_LIMIT)
		limit = KV_SCAN_MAX_LIMIT;
	if ((rc = hash_at(c, r, &img)) <= 0)
		return rc < 0 ? -rc : KV_NOT_FOUND;
	if (max > (8u << 20)) /* as SCAN's pages */
		max = 8u << 20;
	if ((rc = fields_sorted(img, &a, &n)))
		return rc;
	while (i < n && field_cmp(&a[i], &at) < 0) /* the first >= start */
		i++;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 3);
	kv_mp_uint(&c->out, KV_OK);
	/* the page ends at limit fields or about half a frame, whichever
	 * comes first; at least one field, however large */
	for (end = i; end < n && end - i < limit; end++) {
		bytes += a[end].f.n + a[end].v.n + 10;
		if (end > i && bytes > max)
			break;
	}
	kv_mp_array(&c->out, 2 * (end - i));
	for (uint32_t j = i; j < end; j++) {
		kv_mp_bin(&c->out, a[j].f.p, a[j].f.n);
		kv_mp_bin(&c->out, a[j].v.p, a[j].v.n);
	}
	if (end < n)
		kv_mp_bin(&c->out, a[end].f.p, a[end].f.n);
	else
		kv_mp_nil(&c->out);
	free(a);
	if (too_large(c, off)) {
		c->out.len = off;
		return KV_REPLY_TOO_LARGE;
	}
	kvd_reply_end(c, off);
	return KV_OK;
}

/* ===================== Writes ===================== */

/* Answer VALUE_TOO_LARGE with the limit's name, as the committer's
 * refusal does (kvd_cmd_hash_wreply), behind earlier writes' replies. */
static int over_bytes(struct kvd_conn *c, struct kvd_req *r)
{
	size_t mark = c->out.len;

	kvd_count_now(&c->io->stats, r->op, KV_VALUE_TOO_LARGE);
	kvd_reply_status(c, KV_VALUE_TOO_LARGE,
			 "hash would exceed max-hash-bytes");
	kvd_conn_defer(c, mark, r->op);
	return KVD_ANSWERED;
}

/* The fields (and values) from argument 1 on, varint-prefixed, into b:
 * the operand of KVH_OP_SET and KVH_OP_DEL (hash.h).  Refused past
 * max-hash-bytes before anything is copied: the merge would refuse it. */
static int strings_operand(struct kvd_conn *c, struct kvd_req *r,
			   struct kv_buf *b)
{
	struct kv_mp_obj o;
	struct kvd_argit it;
	size_t need = 0;
	int rc = check_strings(c, r, 1);

	if (rc)
		return rc;
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		kvd_argit_next(&it, &o);
		need += kvh_str_size(o.len) + o.len;
	}
	if (need > c->io->srv->cfg->max_hash_bytes)
		return over_bytes(c, r);
	if (kv_buf_reserve(b, need))
		return KV_INTERNAL;
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		kvd_argit_next(&it, &o);
		kvh_put_str(b, (struct kv_slice){o.p, o.len});
	}
	return b->err ? KV_INTERNAL : KV_OK;
}

/* Queue hash operation op on the request's key with operand b (freed). */
static int merge(struct kvd_conn *c, struct kvd_req *r, unsigned op,
		 unsigned ev, struct kv_buf *b)
{
	struct kv_slice k, v = {b->data, b->len};
	int rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc == KV_OK)
		rc = kvd_write_tagged(c, r->op, KVD_W_MERGE, k, v, 0,
				      (uint8_t)op, 0, KVD_TAG(ev, 0));
	kv_buf_free(b);
	return rc;
}

/* HSET: [33, key, field, value, ...] -> [0, fields added] */
int kvd_op_hset(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_buf b = {0};
	int rc;

	if (r->argc % 2 == 0) /* key, then pairs */
		return KV_BAD_ARGS;
	if ((rc = strings_operand(c, r, &b))) {
		kv_buf_free(&b);
		return rc; /* a status, or KVD_ANSWERED */
	}
	return merge(c, r, KVH_OP_SET, KVD_EV_HSET, &b);
}

/* HDEL: [36, key, field, ...] -> [0, fields deleted] */
int kvd_op_hdel(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_buf b = {0};
	int rc;

	if ((rc = strings_operand(c, r, &b))) {
		kv_buf_free(&b);
		return rc; /* a status, or KVD_ANSWERED */
	}
	return merge(c, r, KVH_OP_DEL, KVD_EV_HDEL, &b);
}

/* HINCRBY: [37, key, field, delta] -> [0, new value] */
int kvd_op_hincrby(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_buf b = {0};
	struct kv_slice f;
	uint8_t d8[8];
	int64_t d;
	int rc;

	if ((rc = kvd_arg_val(c, &r->a[1], &f)))
		return rc;
	if (r->a[2].type != KV_MP_UINT && r->a[2].type != KV_MP_INT)
		return KV_BAD_ARGS;
	if (r->a[2].type == KV_MP_UINT && r->a[2].v.u > INT64_MAX)
		return KV_NOT_INTEGER;
	d = r->a[2].v.i;
	for (int i = 0; i < 8; i++) /* little-endian i64, then the field */
		d8[i] = (uint8_t)((uint64_t)d >> (8 * i));
	kv_buf_append(&b, d8, 8);
	kv_buf_append(&b, f.p, f.n);
	if (b.err) {
		kv_buf_free(&b);
		return KV_INTERNAL;
	}
	return merge(c, r, KVH_OP_INCRBY, KVD_EV_HINCRBY, &b);
}

/* The reply of a hash write that came back (cmd.c): 1 when op is one. */
int kvd_cmd_hash_wreply(struct kvd_conn *c, unsigned op, int st, int64_t result)
{
	if (op != KV_OP_HSET && op != KV_OP_HDEL && op != KV_OP_HINCRBY)
		return 0;
	if (st == KV_VALUE_TOO_LARGE)
		kvd_reply_status(c, st,
				 result == KVH_OVER_FIELDS
				     ? "hash would exceed max-hash-fields"
				     : "hash would exceed max-hash-bytes");
	else if (st == KV_NOT_INTEGER)
		kvd_reply_status(c, st,
				 result == 1
				     ? "increment or decrement would overflow"
				     : "hash value is not an integer");
	else if (st != KV_OK)
		kvd_reply_status(c, st, NULL);
	else if (op == KV_OP_HINCRBY)
		kvd_reply_int(c, result);
	else
		kvd_reply_uint(c, (uint64_t)result);
	return 1;
}
