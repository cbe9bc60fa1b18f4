/* cmdparse.c - the native request decoder (see cmdparse.h). */
#include "cmdparse.h"

#include "kv_proto.h"
#include "kv_status.h"

int kvd_req_decode(const uint8_t *p, const uint8_t *end, struct kvd_req *r)
{
	struct kv_mp_obj o;

	if (kv_mp_next(&p, end, &o) || o.type != KV_MP_ARRAY || o.len == 0)
		return KV_MALFORMED;
	r->argc = o.len - 1;
	if (kv_mp_next(&p, end, &o))
		return KV_MALFORMED;
	if (o.type != KV_MP_UINT || o.v.u == 0 || o.v.u >= KV_OP_MAX)
		return o.type == KV_MP_UINT ? KV_UNKNOWN_OP : KV_MALFORMED;
	r->op = (unsigned)o.v.u;
	r->args = p;
	r->end = end;
	for (uint32_t i = 0; i < r->argc; i++) {
		if (kv_mp_next(&p, end, &o))
			return KV_MALFORMED;
		if (o.type == KV_MP_ARRAY || o.type == KV_MP_MAP ||
		    o.type == KV_MP_EXT || o.type == KV_MP_FLOAT)
			return KV_BAD_ARGS;
		if (i < KVD_REQ_FIXED_ARGS)
			r->a[i] = o;
	}
	return p == end ? KV_OK : KV_MALFORMED;
}

void kvd_argit_init(const struct kvd_req *r, unsigned from,
		    struct kvd_argit *it)
{
	struct kv_mp_obj o;

	it->p = r->args;
	it->end = r->end;
	while (from--)
		kv_mp_next(&it->p, it->end, &o);
}

void kvd_argit_next(struct kvd_argit *it, struct kv_mp_obj *o)
{
	kv_mp_next(&it->p, it->end, o); /* validated by kvd_req_decode() */
}
