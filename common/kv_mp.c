/* kv_mp.c - zero-copy msgpack decoder and appending encoder (see kv_mp.h). */
#include "kv_mp.h"

#include <string.h>

/* ===================== Decoder ===================== */

static uint64_t load_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* Width of the length or value field that follows each lead byte from 0xc4
 * to 0xdf; 0 where the byte is handled on its own. */
static const uint8_t field_width[32] = {
    [0xc4 - 0xc0] = 1, [0xc5 - 0xc0] = 2, [0xc6 - 0xc0] = 4, /* bin */
    [0xc7 - 0xc0] = 1, [0xc8 - 0xc0] = 2, [0xc9 - 0xc0] = 4, /* ext */
    [0xca - 0xc0] = 4, [0xcb - 0xc0] = 8,		     /* float */
    [0xcc - 0xc0] = 1, [0xcd - 0xc0] = 2, [0xce - 0xc0] = 4,
    [0xcf - 0xc0] = 8, /* uint */
    [0xd0 - 0xc0] = 1, [0xd1 - 0xc0] = 2, [0xd2 - 0xc0] = 4,
    [0xd3 - 0xc0] = 8,					     /* int */
    [0xd9 - 0xc0] = 1, [0xda - 0xc0] = 2, [0xdb - 0xc0] = 4, /* str */
    [0xdc - 0xc0] = 2, [0xdd - 0xc0] = 4,		     /* array */
    [0xde - 0xc0] = 2, [0xdf - 0xc0] = 4,		     /* map */
};

/* Consume a payload of n bytes that must be present in full. */
static int take(const uint8_t **pp, const uint8_t *end, struct kv_mp_obj *o,
		uint64_t n)
{
	if ((uint64_t)(end - *pp) < n)
		return KV_MP_TRUNC;
	o->p = *pp;
	o->len = (uint32_t)n;
	*pp += n;
	return KV_MP_OK;
}

static int set_int(struct kv_mp_obj *o, int64_t v)
{
	o->type = v < 0 ? KV_MP_INT : KV_MP_UINT;
	o->v.i = v;
	return KV_MP_OK;
}

static int take_ext(const uint8_t **pp, const uint8_t *end, struct kv_mp_obj *o,
		    uint64_t n)
{
	if (end - *pp < 1)
		return KV_MP_TRUNC;
	o->type = KV_MP_EXT;
	o->v.ext = (int8_t) * (*pp)++;
	return take(pp, end, o, n);
}

static int decode_fixed(uint8_t c, const uint8_t **pp, const uint8_t *end,
			struct kv_mp_obj *o)
{
	if (c <= 0x7f) {
		o->type = KV_MP_UINT;
		o->v.u = c;
	} else if (c <= 0x8f) {
		o->type = KV_MP_MAP;
		o->len = c & 0x0f;
	} else if (c <= 0x9f) {
		o->type = KV_MP_ARRAY;
		o->len = c & 0x0f;
	} else if (c <= 0xbf) {
		o->type = KV_MP_STR;
		return take(pp, end, o, c & 0x1f);
	} else if (c >= 0xe0) {
		o->type = KV_MP_INT;
		o->v.i = (int8_t)c;
	} else if (c == 0xc0) {
		o->type = KV_MP_NIL;
	} else if (c == 0xc2 || c == 0xc3) {
		o->type = KV_MP_BOOL;
		o->v.b = c == 0xc3;
	} else if (c >= 0xd4 && c <= 0xd8) { /* fixext 1, 2, 4, 8, 16 */
		return take_ext(pp, end, o, 1u << (c - 0xd4));
	} else {
		return KV_MP_INVALID; /* 0xc1 */
	}
	return KV_MP_OK;
}

static int decode_sized(uint8_t c, uint64_t x, const uint8_t **pp,
			const uint8_t *end, struct kv_mp_obj *o)
{
	union {
		uint32_t u;
		float f;
	} f32;
	union {
		uint64_t u;
		double f;
	} f64;

	switch (c) {
	case 0xc4:
	case 0xc5:
	case 0xc6: o->type = KV_MP_BIN; return take(pp, end, o, x);
	case 0xc7:
	case 0xc8:
	case 0xc9: return take_ext(pp, end, o, x);
	case 0xca:
		f32.u = (uint32_t)x;
		o->type = KV_MP_FLOAT;
		o->v.f = f32.f;
		return KV_MP_OK;
	case 0xcb:
		f64.u = x;
		o->type = KV_MP_FLOAT;
		o->v.f = f64.f;
		return KV_MP_OK;
	case 0xcc:
	case 0xcd:
	case 0xce:
	case 0xcf:
		o->type = KV_MP_UINT;
		o->v.u = x;
		return KV_MP_OK;
	case 0xd0: return set_int(o, (int8_t)x);
	case 0xd1: return set_int(o, (int16_t)x);
	case 0xd2: return set_int(o, (int32_t)x);
	case 0xd3: return set_int(o, (int64_t)x);
	case 0xd9:
	case 0xda:
	case 0xdb: o->type = KV_MP_STR; return take(pp, end, o, x);
	case 0xdc:
	case 0xdd:
		o->type = KV_MP_ARRAY;
		o->len = (uint32_t)x;
		return KV_MP_OK;
	default: /* 0xde, 0xdf */
		o->type = KV_MP_MAP;
		o->len = (uint32_t)x;
		return KV_MP_OK;
	}
}

int kv_mp_next(const uint8_t **pp, const uint8_t *end, struct kv_mp_obj *o)
{
	const uint8_t *p = *pp;
	unsigned w;
	uint64_t x;
	uint8_t c;
	int r;

	if (p >= end)
		return KV_MP_TRUNC;
	c = *p++;
	o->p = NULL;
	o->len = 0;
	w = (c >= 0xc0 && c <= 0xdf) ? field_width[c - 0xc0] : 0;
	if (!w) {
		r = decode_fixed(c, &p, end, o);
	} else {
		if ((size_t)(end - p) < w)
			return KV_MP_TRUNC;
		x = load_be(p, w);
		p += w;
		r = decode_sized(c, x, &p, end, o);
	}
	if (r == KV_MP_OK)
		*pp = p;
	return r;
}

int kv_mp_skip(const uint8_t **pp, const uint8_t *end, unsigned max_depth)
{
	/* Items still to read at each open level; level 0 is the object. */
	uint64_t left[KV_MP_MAX_DEPTH + 1];
	unsigned top = 0;
	const uint8_t *p = *pp;
	struct kv_mp_obj o;

	if (max_depth > KV_MP_MAX_DEPTH)
		max_depth = KV_MP_MAX_DEPTH;
	left[0] = 1;
	for (;;) {
		int r = kv_mp_next(&p, end, &o);

		if (r)
			return r;
		left[top]--;
		if (o.type == KV_MP_ARRAY || o.type == KV_MP_MAP) {
			/* As msgpack-c: even an empty container may not open
			 * past the limit. */
			if (top >= max_depth)
				return KV_MP_DEPTH;
			if (o.len)
				left[++top] = o.type == KV_MP_MAP
						  ? 2 * (uint64_t)o.len
						  : o.len;
		}
		while (left[top] == 0) {
			if (top == 0) {
				*pp = p;
				return KV_MP_OK;
			}
			top--;
		}
	}
}

/* ===================== Encoder ===================== */

static uint8_t *put_be(uint8_t *p, uint8_t lead, uint64_t v, unsigned n)
{
	*p++ = lead;
	while (n--)
		*p++ = (uint8_t)(v >> (8 * n));
	return p;
}

/* Smallest header: fix form (when fix != 0), then 8, 16, 32-bit lengths. */
static uint8_t *put_sized(uint8_t *p, uint32_t n, uint8_t fix, uint32_t fixmax,
			  uint8_t l8, uint8_t l16, uint8_t l32)
{
	if (fix && n <= fixmax)
		*p++ = fix | (uint8_t)n;
	else if (l8 && n <= 0xff)
		p = put_be(p, l8, n, 1);
	else if (n <= 0xffff)
		p = put_be(p, l16, n, 2);
	else
		p = put_be(p, l32, n, 4);
	return p;
}

uint8_t *kv_mp_put_array(uint8_t *p, uint32_t n)
{
	return put_sized(p, n, 0x90, 15, 0, 0xdc, 0xdd);
}

uint8_t *kv_mp_put_map(uint8_t *p, uint32_t n)
{
	return put_sized(p, n, 0x80, 15, 0, 0xde, 0xdf);
}

uint8_t *kv_mp_put_bin_hdr(uint8_t *p, uint32_t n)
{
	return put_sized(p, n, 0, 0, 0xc4, 0xc5, 0xc6);
}

uint8_t *kv_mp_put_str_hdr(uint8_t *p, uint32_t n)
{
	return put_sized(p, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
}

uint8_t *kv_mp_put_uint(uint8_t *p, uint64_t v)
{
	if (v <= 0x7f) {
		*p++ = (uint8_t)v;
		return p;
	}
	if (v <= 0xff)
		return put_be(p, 0xcc, v, 1);
	if (v <= 0xffff)
		return put_be(p, 0xcd, v, 2);
	if (v <= 0xffffffffu)
		return put_be(p, 0xce, v, 4);
	return put_be(p, 0xcf, v, 8);
}

uint8_t *kv_mp_put_int(uint8_t *p, int64_t v)
{
	if (v >= 0)
		return kv_mp_put_uint(p, (uint64_t)v);
	if (v >= -32) {
		*p++ = (uint8_t)(int8_t)v;
		return p;
	}
	if (v >= INT8_MIN)
		return put_be(p, 0xd0, (uint64_t)v, 1);
	if (v >= INT16_MIN)
		return put_be(p, 0xd1, (uint64_t)v, 2);
	if (v >= INT32_MIN)
		return put_be(p, 0xd2, (uint64_t)v, 4);
	return put_be(p, 0xd3, (uint64_t)v, 8);
}

#define KV_MP_APPEND(call)                                                     \
	do {                                                                   \
		if (kv_buf_reserve(b, KV_MP_HDR_MAX))                          \
			return -1;                                             \
		b->len = (size_t)(call - b->data);                             \
		return 0;                                                      \
	} while (0)

int kv_mp_array(struct kv_buf *b, uint32_t n)
{
	KV_MP_APPEND(kv_mp_put_array(b->data + b->len, n));
}

int kv_mp_map(struct kv_buf *b, uint32_t n)
{
	KV_MP_APPEND(kv_mp_put_map(b->data + b->len, n));
}

int kv_mp_uint(struct kv_buf *b, uint64_t v)
{
	KV_MP_APPEND(kv_mp_put_uint(b->data + b->len, v));
}

int kv_mp_int(struct kv_buf *b, int64_t v)
{
	KV_MP_APPEND(kv_mp_put_int(b->data + b->len, v));
}

int kv_mp_nil(struct kv_buf *b)
{
	KV_MP_APPEND(kv_mp_put_nil(b->data + b->len));
}

int kv_mp_double(struct kv_buf *b, double v)
{
	union {
		double f;
		uint64_t u;
	} x = {.f = v};

	KV_MP_APPEND(put_be(b->data + b->len, 0xcb, x.u, 8));
}

int kv_mp_bool(struct kv_buf *b, int v)
{
	KV_MP_APPEND(kv_mp_put_bool(b->data + b->len, v));
}

static int put_payload(struct kv_buf *b, const void *p, size_t n, int str)
{
	uint8_t *q;

	if (n > UINT32_MAX || kv_buf_reserve(b, KV_MP_HDR_MAX + n)) {
		b->err = 1;
		return -1;
	}
	q = b->data + b->len;
	q = str ? kv_mp_put_str_hdr(q, (uint32_t)n)
		: kv_mp_put_bin_hdr(q, (uint32_t)n);
	if (n)
		memcpy(q, p, n);
	b->len = (size_t)(q + n - b->data);
	return 0;
}

int kv_mp_bin(struct kv_buf *b, const void *p, size_t n)
{
	return put_payload(b, p, n, 0);
}

int kv_mp_str(struct kv_buf *b, const void *p, size_t n)
{
	return put_payload(b, p, n, 1);
}

int kv_mp_cstr(struct kv_buf *b, const char *s)
{
	return put_payload(b, s, strlen(s), 1);
}
