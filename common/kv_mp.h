/* kv_mp.h - the project's own small msgpack codec.
 *
 * msgpack-c is the reference implementation, but its unpacker builds a tree
 * in a freshly allocated zone for every message.  kvd's hot path needs none of
 * that: requests are flat arrays of scalars, so this decoder walks the bytes
 * in place, hands out pointers into the frame (zero copy) and never
 * allocates.  Every length is checked against the bytes actually present
 * before it is used, so a declared length of 2^32-1 costs nothing.
 * tests/unit/test_mp.c checks it against msgpack-c, byte for byte.
 *
 * The encoder appends to a kv_buf; the kv_mp_put_* forms write to memory the
 * caller has already reserved (at most KV_MP_HDR_MAX bytes per header).
 */
#ifndef KV_MP_H
#define KV_MP_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"

#define KV_MP_HDR_MAX 9
/* msgpack-c's unpacker stops at this depth; we agree with it. */
#define KV_MP_MAX_DEPTH 32

enum kv_mp_type {
	KV_MP_NIL,
	KV_MP_BOOL,
	KV_MP_UINT, /* any integer >= 0, whatever its encoding */
	KV_MP_INT,  /* any integer < 0 */
	KV_MP_FLOAT,
	KV_MP_STR,
	KV_MP_BIN,
	KV_MP_ARRAY,
	KV_MP_MAP,
	KV_MP_EXT,
};

struct kv_mp_obj {
	enum kv_mp_type type;
	uint32_t len; /* bytes of STR/BIN/EXT, items of ARRAY, pairs of MAP */
	const uint8_t *p; /* STR/BIN/EXT payload, inside the decoded buffer */
	union {
		uint64_t u;
		int64_t i;
		double f;
		int b;
		int8_t ext;
	} v;
};

/* Decoder results. */
#define KV_MP_OK 0
#define KV_MP_TRUNC (-1)   /* the buffer ends inside the object */
#define KV_MP_INVALID (-2) /* 0xc1, the one byte msgpack never uses */
#define KV_MP_DEPTH (-3)   /* nested deeper than the limit */

/* Decode one header at *pp.  Scalars, STR, BIN and EXT are consumed whole;
 * for ARRAY and MAP only the header is, and the caller walks the items.
 * *pp moves only on success. */
int kv_mp_next(const uint8_t **pp, const uint8_t *end, struct kv_mp_obj *o);

/* Skip one complete object, containers included, without recursion. */
int kv_mp_skip(const uint8_t **pp, const uint8_t *end, unsigned max_depth);

/* Reserved-memory writers: each returns the byte after what it wrote. */
uint8_t *kv_mp_put_array(uint8_t *p, uint32_t n);
uint8_t *kv_mp_put_map(uint8_t *p, uint32_t n);
uint8_t *kv_mp_put_uint(uint8_t *p, uint64_t v);
uint8_t *kv_mp_put_int(uint8_t *p, int64_t v);
uint8_t *kv_mp_put_bin_hdr(uint8_t *p, uint32_t n);
uint8_t *kv_mp_put_str_hdr(uint8_t *p, uint32_t n);

static inline uint8_t *kv_mp_put_nil(uint8_t *p)
{
	*p++ = 0xc0;
	return p;
}

static inline uint8_t *kv_mp_put_bool(uint8_t *p, int b)
{
	*p++ = b ? 0xc3 : 0xc2;
	return p;
}

/* kv_buf appenders: 0, or -1 when out of memory (b->err is then set). */
int kv_mp_array(struct kv_buf *b, uint32_t n);
int kv_mp_map(struct kv_buf *b, uint32_t n);
int kv_mp_uint(struct kv_buf *b, uint64_t v);
int kv_mp_int(struct kv_buf *b, int64_t v);
int kv_mp_nil(struct kv_buf *b);
int kv_mp_double(struct kv_buf *b, double v);
int kv_mp_bool(struct kv_buf *b, int v);
int kv_mp_bin(struct kv_buf *b, const void *p, size_t n);
int kv_mp_str(struct kv_buf *b, const void *p, size_t n);
int kv_mp_cstr(struct kv_buf *b, const char *s);

#endif
