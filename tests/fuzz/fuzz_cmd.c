/* fuzz_cmd.c - the native request decoder (kvd/native/cmdparse.c) on any bytes.
 *
 * The input is one frame body.  Beyond "no crash, no read outside the
 * buffer" (ASan, UBSan), it checks what cmd.c's handlers rely on without
 * re-checking: after KV_OK, walking the arguments with kvd_argit_* visits
 * exactly argc scalars (or, for TXN, arrays of scalars, each of them a
 * body the decoder takes again), each inside the buffer, the first ones
 * equal to r.a[], ending exactly at the end of the frame, from any
 * starting argument; and the decoder agrees with kv_mp_skip on where the
 * array ends.
 */
#include <string.h>

#include "native/cmdparse.h"
#include "fuzz.h"
#include "kv_proto.h"
#include "kv_status.h"

static int is_scalar(const struct kv_mp_obj *o)
{
	return o->type == KV_MP_NIL || o->type == KV_MP_BOOL ||
	       o->type == KV_MP_UINT || o->type == KV_MP_INT ||
	       o->type == KV_MP_STR || o->type == KV_MP_BIN;
}

static void same_obj(const struct kv_mp_obj *a, const struct kv_mp_obj *b)
{
	FUZZ_CHECK(a->type == b->type && a->len == b->len && a->p == b->p);
	if (a->type == KV_MP_UINT || a->type == KV_MP_INT)
		FUZZ_CHECK(a->v.u == b->v.u);
}

static void walk(const struct kvd_req *r, const uint8_t *data,
		 const uint8_t *end, unsigned from)
{
	struct kvd_argit it;
	struct kv_mp_obj o;

	kvd_argit_init(r, from, &it);
	for (uint32_t i = from; i < r->argc; i++) {
		const uint8_t *before = it.p;

		kvd_argit_next(&it, &o);
		FUZZ_CHECK(it.p > before && it.p <= end);
		if (o.type == KV_MP_ARRAY) {
			const uint8_t *q = o.p;

			/* TXN only: one level of scalars, [o.p, it.p) */
			FUZZ_CHECK(r->op == KV_OP_TXN && o.p == before);
			FUZZ_CHECK(kv_mp_skip(&q, end, 1) == KV_MP_OK);
			FUZZ_CHECK(q == it.p);
		} else {
			FUZZ_CHECK(is_scalar(&o));
		}
		if (o.type == KV_MP_STR || o.type == KV_MP_BIN)
			FUZZ_CHECK(o.p >= data && o.p + o.len <= end);
		if (i < KVD_REQ_FIXED_ARGS)
			same_obj(&o, &r->a[i]);
	}
	FUZZ_CHECK(it.p == end);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *end = data + size, *p = data;
	struct kvd_req r;
	int rc, skip;

	memset(&r, 0, sizeof(r));
	rc = kvd_req_decode(data, end, &r);
	skip = kv_mp_skip(&p, end, KV_MP_MAX_DEPTH);
	if (rc != KV_OK) {
		FUZZ_CHECK(rc == KV_MALFORMED || rc == KV_UNKNOWN_OP ||
			   rc == KV_BAD_ARGS);
		/* MALFORMED wins: the other two only for one well-formed
		 * array (deeper than kv_mp_skip's limit, it cannot tell) */
		if (rc != KV_MALFORMED)
			FUZZ_CHECK((skip == KV_MP_OK && p == end) ||
				   skip == KV_MP_DEPTH);
		return 0;
	}
	FUZZ_CHECK(r.op > 0 && r.op < KV_OP_MAX);
	FUZZ_CHECK(r.args > data && r.args <= end && r.end == end);
	/* a flat array of scalars: kv_mp_skip must agree it ends here */
	FUZZ_CHECK(skip == KV_MP_OK && p == end);
	walk(&r, data, end, 0);
	if (r.argc)
		walk(&r, data, end, r.argc / 2);
	return 0;
}
