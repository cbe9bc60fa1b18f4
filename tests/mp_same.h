/* mp_same.h - does kv_mp decode the same object msgpack-c did?  Shared by
 * the unit test (tests/unit/test_mp.c) and the differential fuzzer
 * (tests/fuzz/fuzz_mp_diff.c), so that both judge agreement alike. */
#ifndef KVD_TESTS_MP_SAME_H
#define KVD_TESTS_MP_SAME_H

#include <msgpack.h>
#include <string.h>

#include "kv_mp.h"

/* memcmp, but msgpack-c leaves the pointer of an empty string NULL, and
 * memcmp(NULL, ..., 0) is undefined (UBSan stops make test-asan on it). */
static int same_bytes(const void *a, const void *b, size_t n)
{
	return n == 0 || !memcmp(a, b, n);
}

static int same(const uint8_t **pp, const uint8_t *end, const msgpack_object *o)
{
	struct kv_mp_obj m;

	if (kv_mp_next(pp, end, &m))
		return 0;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return m.type == KV_MP_NIL;
	case MSGPACK_OBJECT_BOOLEAN:
		return m.type == KV_MP_BOOL && m.v.b == o->via.boolean;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return m.type == KV_MP_UINT && m.v.u == o->via.u64;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return m.type == KV_MP_INT && m.v.i == o->via.i64;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return m.type == KV_MP_FLOAT &&
		       (m.v.f == o->via.f64 ||
			(m.v.f != m.v.f && o->via.f64 != o->via.f64));
	case MSGPACK_OBJECT_STR:
		return m.type == KV_MP_STR && m.len == o->via.str.size &&
		       same_bytes(m.p, o->via.str.ptr, m.len);
	case MSGPACK_OBJECT_BIN:
		return m.type == KV_MP_BIN && m.len == o->via.bin.size &&
		       same_bytes(m.p, o->via.bin.ptr, m.len);
	case MSGPACK_OBJECT_EXT:
		return m.type == KV_MP_EXT && m.v.ext == o->via.ext.type &&
		       m.len == o->via.ext.size &&
		       same_bytes(m.p, o->via.ext.ptr, m.len);
	case MSGPACK_OBJECT_ARRAY:
		if (m.type != KV_MP_ARRAY || m.len != o->via.array.size)
			return 0;
		for (uint32_t i = 0; i < m.len; i++)
			if (!same(pp, end, &o->via.array.ptr[i]))
				return 0;
		return 1;
	case MSGPACK_OBJECT_MAP:
		if (m.type != KV_MP_MAP || m.len != o->via.map.size)
			return 0;
		for (uint32_t i = 0; i < m.len; i++)
			if (!same(pp, end, &o->via.map.ptr[i].key) ||
			    !same(pp, end, &o->via.map.ptr[i].val))
				return 0;
		return 1;
	}
	return 0;
}

#endif
