/* fuzz_mp_diff.c - kvd's msgpack decoder (common/kv_mp.c) against msgpack-c.
 *
 * Differential: on any bytes, kv_mp_skip and msgpack_unpack_next must
 * accept exactly the same inputs as one object, end it at the same byte,
 * and see the same objects (the comparison of tests/unit/test_mp.c).  Then
 * the object is re-encoded with kv_mp's encoder and must decode to the
 * same object again (a round trip through our own writer).
 *
 * msgpack-c allocates a container's item array from its declared count
 * before it looks for the items; an input declaring 2^32-1 items would
 * make it ask for 96 GiB.  Such a count cannot fit in the bytes present
 * (every item takes at least one), so for those inputs only our decoder
 * runs, and it must say the object is truncated.
 */
#include <msgpack.h>
#include <string.h>

#include "fuzz.h"
#include "kv_buf.h"
#include "kv_mp.h"
#include "mp_same.h"

/* Does a container header within the first object declare more items
 * than bytes remain?  (Walked as kv_mp_skip does, but deeper than
 * msgpack-c's limit, so no header msgpack-c would meet is missed.) */
static int declares_too_much(const uint8_t *p, const uint8_t *end)
{
	uint64_t left[64];
	unsigned top = 0;
	struct kv_mp_obj o;

	left[0] = 1;
	while (kv_mp_next(&p, end, &o) == KV_MP_OK) {
		uint64_t items = o.type == KV_MP_MAP	 ? 2 * (uint64_t)o.len
				 : o.type == KV_MP_ARRAY ? o.len
							 : 0;

		left[top]--;
		if (items > (uint64_t)(end - p))
			return 1;
		if (items && top + 1 < 64)
			left[++top] = items;
		while (left[top] == 0) {
			if (top == 0)
				return 0;
			top--;
		}
	}
	return 0;
}

/* Re-encode a msgpack-c object with kv_mp's encoder. */
static void encode(struct kv_buf *b, const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: kv_mp_nil(b); break;
	case MSGPACK_OBJECT_BOOLEAN: kv_mp_bool(b, o->via.boolean); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: kv_mp_uint(b, o->via.u64); break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: kv_mp_int(b, o->via.i64); break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: kv_mp_double(b, o->via.f64); break;
	case MSGPACK_OBJECT_STR:
		kv_mp_str(b, o->via.str.ptr, o->via.str.size);
		break;
	case MSGPACK_OBJECT_BIN:
		kv_mp_bin(b, o->via.bin.ptr, o->via.bin.size);
		break;
	case MSGPACK_OBJECT_EXT: kv_mp_nil(b); break; /* no ext encoder */
	case MSGPACK_OBJECT_ARRAY:
		kv_mp_array(b, o->via.array.size);
		for (uint32_t i = 0; i < o->via.array.size; i++)
			encode(b, &o->via.array.ptr[i]);
		break;
	case MSGPACK_OBJECT_MAP:
		kv_mp_map(b, o->via.map.size);
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			encode(b, &o->via.map.ptr[i].key);
			encode(b, &o->via.map.ptr[i].val);
		}
		break;
	}
}

static int has_ext_or_float(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_EXT:
	case MSGPACK_OBJECT_FLOAT32: return 1; /* re-encoded as a double */
	case MSGPACK_OBJECT_ARRAY:
		for (uint32_t i = 0; i < o->via.array.size; i++)
			if (has_ext_or_float(&o->via.array.ptr[i]))
				return 1;
		return 0;
	case MSGPACK_OBJECT_MAP:
		for (uint32_t i = 0; i < o->via.map.size; i++)
			if (has_ext_or_float(&o->via.map.ptr[i].key) ||
			    has_ext_or_float(&o->via.map.ptr[i].val))
				return 1;
		return 0;
	default: return 0;
	}
}

static void round_trip(const msgpack_object *o)
{
	struct kv_buf b = {0};
	const uint8_t *p;

	if (has_ext_or_float(o))
		return;
	encode(&b, o);
	FUZZ_CHECK(!b.err);
	p = b.data;
	FUZZ_CHECK(same(&p, b.data + b.len, o) && p == b.data + b.len);
	kv_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *end = data + size, *p = data;
	msgpack_unpacked u;
	size_t off = 0;
	int ref, ours;

	ours = kv_mp_skip(&p, end, KV_MP_MAX_DEPTH);
	if (declares_too_much(data, end)) {
		FUZZ_CHECK(ours != KV_MP_OK);
		return 0;
	}
	msgpack_unpacked_init(&u);
	ref = msgpack_unpack_next(&u, (const char *)data, size, &off);
	if (ref == MSGPACK_UNPACK_SUCCESS ||
	    ref == MSGPACK_UNPACK_EXTRA_BYTES) {
		const uint8_t *q = data;

		FUZZ_CHECK(ours == KV_MP_OK);
		FUZZ_CHECK((size_t)(p - data) == off);
		FUZZ_CHECK(same(&q, end, &u.data) && q == p);
		round_trip(&u.data);
	} else {
		FUZZ_CHECK(ours != KV_MP_OK);
	}
	msgpack_unpacked_destroy(&u);
	return 0;
}
