/* key_int.h - what the files of the index key encoding share (key.c
 * values, key_num.c numbers, key_index.c keys of documents, key_bounds.c
 * scan bounds): the type bytes and the bounded buffer keys are written to.
 */
#ifndef KVD_MONGO_KEY_INT_H
#define KVD_MONGO_KEY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include <bson/bson.h>

#include "mql_key.h"

/* The first byte of every encoded value, in MongoDB's order of types
 * (numbers take six: NaN, -inf, negative, zero, positive, +inf). */
enum {
	K_MINKEY = 0x0A,
	K_UNDEF = 0x0F, /* undefined, and a missing value */
	K_NULL = 0x14,
	K_NAN = 0x1E,
	K_NEGINF = 0x1F,
	K_NEG = 0x20,
	K_ZERO = 0x21,
	K_POS = 0x22,
	K_POSINF = 0x23,
	K_STRING = 0x3C, /* and symbols */
	K_DOC = 0x46,
	K_ARRAY = 0x50,
	K_BIN = 0x5A,
	K_OID = 0x64,
	K_BOOL = 0x6E,
	K_DATE = 0x78,
	K_TS = 0x82,
	K_REGEX = 0x8C,
	K_DBPTR = 0x96,
	K_CODE = 0xA0,
	K_CWS = 0xAA,
	K_MAXKEY = 0xF0,
};

/* Bytes written at b[len..cap); past cap, over is set and nothing more is
 * written. */
struct kbuf {
	uint8_t *b;
	size_t len, cap;
	bool over;
};

static inline void kput(struct kbuf *k, const void *p, size_t n)
{
	if (k->over || n > k->cap - k->len) {
		k->over = true;
		return;
	}
	memcpy(k->b + k->len, p, n);
	k->len += n;
}

static inline void kbyte(struct kbuf *k, uint8_t c)
{
	kput(k, &c, 1);
}

/* key_num.c: a number (int32, int64, double, decimal128) on one line. */
void key_number(struct kbuf *k, const bson_value_t *v);
/* Decode a number whose type byte is t from p[0..n): bytes used, or -1. */
long key_number_decode(uint8_t t, const uint8_t *p, size_t n, bson_value_t *v);

/* The type byte of v's rank (numbers: K_ZERO; their bracket is
 * K_NEGINF..K_POSINF). */
uint8_t key_type_byte(const bson_value_t *v);

/* key_index.c: field i of an index, and whether it is descending. */
struct mql_path;
const struct mql_path *key_index_path(const struct mql_index *ix, size_t i,
				      bool *desc);

#endif
