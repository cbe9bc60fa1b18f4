/* cmdparse.c - the native request decoder (see cmdparse.h). */
#include "cmdparse.h"

#include "kv_proto.h"
#include "kv_status.h"

/* Walk what is left of a request once a bad argument was found, so that a
 * body that is not well formed anyway is MALFORMED whatever came first:
 * *items more objects at p, each container adding its own items (kept as a
 * count, not by recursion).  Each object takes at least one byte, so this
 * ends within end - p steps.  0 when the body ends exactly at end. */
static int skip_rest(const uint8_t *p, const uint8_t *end, uint64_t items)
{
	struct kv_mp_obj o;

	for (; items; items--) {
		if (kv_mp_next(&p, end, &o))
			return -1;
		if (o.type == KV_MP_ARRAY)
			items += o.len;
		else if (o.type == KV_MP_MAP)
			items += 2 * (uint64_t)o.len;
	}
	return p == end ? 0 : -1;
}

static int is_scalar(const struct kv_mp_obj *o)
{
	return o->type != KV_MP_ARRAY && o->type != KV_MP_MAP &&
	       o->type != KV_MP_EXT && o->type != KV_MP_FLOAT;
}

/* n scalars at *pp, the items of one of TXN's arrays, with `after` more
 * arguments behind the array: KV_OK past them, or the status of the
 * request (MALFORMED still wins over BAD_ARGS). */
static int scalars(const uint8_t **pp, const uint8_t *end, uint32_t n,
		   uint32_t after)
{
	struct kv_mp_obj o;

	for (uint32_t j = 0; j < n; j++) {
		if (kv_mp_next(pp, end, &o))
			return KV_MALFORMED;
		if (!is_scalar(&o)) {
			uint64_t items =
			    (uint64_t)(n - j - 1) + after +
			    (o.type == KV_MP_ARRAY ? o.len
			     : o.type == KV_MP_MAP ? 2 * (uint64_t)o.len
						   : 0);

			return skip_rest(*pp, end, items) ? KV_MALFORMED
							  : KV_BAD_ARGS;
		}
	}
	return KV_OK;
}

int kvd_req_decode(const uint8_t *p, const uint8_t *end, struct kvd_req *r)
{
	struct kv_mp_obj o;
	int unknown;

	if (kv_mp_next(&p, end, &o) || o.type != KV_MP_ARRAY || o.len == 0)
		return KV_MALFORMED;
	r->argc = o.len - 1;
	if (kv_mp_next(&p, end, &o) || o.type != KV_MP_UINT)
		return KV_MALFORMED;
	/* An unknown op is UNKNOWN_OP only in a well-formed body. */
	/* (the numbers are not contiguous: a gap is unknown too) */
	unknown = o.v.u == 0 || o.v.u >= KV_OP_MAX || !kv_op_name(o.v.u);
	r->op = unknown ? 0 : (unsigned)o.v.u;
	r->args = p;
	r->end = end;
	for (uint32_t i = 0; i < r->argc; i++) {
		const uint8_t *at = p;
		uint64_t items;

		if (kv_mp_next(&p, end, &o))
			return KV_MALFORMED;
		if (o.type == KV_MP_ARRAY && r->op == KV_OP_TXN) {
			/* TXN's arguments: arrays of scalars, one level. */
			int rc = scalars(&p, end, o.len, r->argc - i - 1);

			if (rc != KV_OK)
				return rc;
			o.p = at;
		} else if (!is_scalar(&o)) {
			items = (uint64_t)(r->argc - i - 1) +
				(o.type == KV_MP_ARRAY ? o.len
				 : o.type == KV_MP_MAP ? 2 * (uint64_t)o.len
						       : 0);
			if (skip_rest(p, end, items))
				return KV_MALFORMED;
			return unknown ? KV_UNKNOWN_OP : KV_BAD_ARGS;
		}
		if (i < KVD_REQ_FIXED_ARGS)
			r->a[i] = o;
	}
	if (p != end)
		return KV_MALFORMED;
	return unknown ? KV_UNKNOWN_OP : KV_OK;
}

void kvd_argit_next(struct kvd_argit *it, struct kv_mp_obj *o)
{
	const uint8_t *at = it->p;
	struct kv_mp_obj item;

	kv_mp_next(&it->p, it->end, o); /* validated by kvd_req_decode() */
	if (o->type != KV_MP_ARRAY)
		return;
	for (uint32_t j = 0; j < o->len; j++)
		kv_mp_next(&it->p, it->end, &item);
	o->p = at;
}

void kvd_argit_init(const struct kvd_req *r, unsigned from,
		    struct kvd_argit *it)
{
	struct kv_mp_obj o;

	it->p = r->args;
	it->end = r->end;
	while (from--)
		kvd_argit_next(it, &o);
}
