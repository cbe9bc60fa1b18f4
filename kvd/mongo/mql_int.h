/* mql_int.h - what the files of kvd/mongo share and nobody else sees:
 * decimal128 arithmetic, small growable arrays, helpers to append values
 * with libbson. */
#ifndef KVD_MONGO_MQL_INT_H
#define KVD_MONGO_MQL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

/* ---- decimal128 (decimal.c) ------------------------------------------ */

/* A decimal128 taken apart: value = (neg ? -1 : 1) * coeff * 10^exp, or an
 * infinity or a NaN.  coeff < 10^34 (non-canonical encodings read as 0, as
 * IEEE 754-2008 says). */
struct mql_dec {
	int cls; /* MQL_DEC_FINITE, MQL_DEC_INF, MQL_DEC_NAN */
	bool neg;
	int exp; /* -6176 .. 6111 */
	unsigned __int128 coeff;
};
enum { MQL_DEC_FINITE, MQL_DEC_INF, MQL_DEC_NAN };

void mql_dec_unpack(const bson_decimal128_t *d, struct mql_dec *out);
/* Packs with rounding to 34 digits (half to even) and the exponent range
 * (overflow gives an infinity, underflow rounds towards 0). */
void mql_dec_pack(const struct mql_dec *in, bson_decimal128_t *d);
void mql_dec_from_int64(int64_t v, struct mql_dec *out);
/* As MongoDB's Decimal128(double): rounded to 15 significant digits. */
void mql_dec_from_double(double v, struct mql_dec *out);
double mql_dec_to_double(const struct mql_dec *d);
/* Exact order of a decimal against another number, NaN lowest. */
int mql_dec_cmp(const struct mql_dec *a, const struct mql_dec *b);
int mql_dec_cmp_double(const struct mql_dec *a, double b);
int mql_dec_cmp_int64(const struct mql_dec *a, int64_t b);
void mql_dec_add(const struct mql_dec *a, const struct mql_dec *b,
		 struct mql_dec *out);
void mql_dec_mul(const struct mql_dec *a, const struct mql_dec *b,
		 struct mql_dec *out);
/* a / n, n > 0 ($avg). */
void mql_dec_div_u64(const struct mql_dec *a, uint64_t n, struct mql_dec *out);

/* ---- numbers (value.c) ---------------------------------------------- */

/* Any BSON number as a decimal (doubles rounded to 15 digits). */
void mql_num_to_dec(const bson_value_t *v, struct mql_dec *out);

/* Arithmetic of $inc, $mul and $sum (MongoDB's SafeNum): int32 op int32
 * widens to int64 on overflow; int64 overflow is an error (returns -1);
 * a double makes a double; a decimal makes a decimal. */
int mql_num_add(const bson_value_t *a, const bson_value_t *b,
		bson_value_t *out);
int mql_num_mul(const bson_value_t *a, const bson_value_t *b,
		bson_value_t *out);

/* ---- growable arrays ------------------------------------------------ */

/* mql_grow - make room for n more items of size sz in *v (holding *len of
 * *cap): 0, or -1 when the count would overflow size_t.  libbson's
 * allocator aborts the process when memory runs out, as every other
 * allocation of this library does. */
int mql_grow(void **v, size_t *cap, size_t len, size_t n, size_t sz);

/* ---- appending ------------------------------------------------------ */

/* append v under key (of keylen bytes) to b: false when b would pass
 * libbson's own size limit (INT32_MAX). */
bool mql_append(bson_t *b, const char *key, int keylen, const bson_value_t *v);

/* The value of a whole document or array as a bson_value_t. */
void mql_doc_value(const bson_t *b, bson_type_t t, bson_value_t *out);

/* mql_msort - a stable merge sort of n items of size sz (MongoDB's
 * sorts give ties no order; a stable one gives them the input's). */
void mql_msort(void *base, size_t n, size_t sz,
	       int (*cmp)(const void *a, const void *b, void *ctx), void *ctx);

/* Decimal digits of an array index, or -1 when s (of len bytes) is not a
 * canonical array index (digits, no leading zero unless "0", < 2^31). */
long mql_index_of(const char *s, size_t len);

#endif
