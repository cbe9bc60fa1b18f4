/* mql_key.h - index keys: BSON values written as bytes whose memcmp order
 * is MongoDB's order of the values (mql_value_cmp), so that an LMDB
 * B-tree, which orders keys by memcmp, keeps documents in index order;
 * the keys of a document for an index ({a: 1, "b.c": -1}), MongoDB's way
 * (one key per array element); and the byte intervals an index scan reads
 * for a filter.  The primary key of a document is its _id so encoded.
 *
 * Order: memcmp(enc(a), enc(b)) has the sign of mql_value_cmp(a, b), for
 * every pair of values: types in MongoDB's order; numbers of every type
 * on one line, exactly (int64 against double without rounding, decimal128
 * against both, NaN lowest, -0 equal to 0); strings by their bytes;
 * documents and arrays element by element; and so on.  Equal values write
 * the same bytes (1, 1.0, NumberLong(1), NumberDecimal("1.00"); "a" and
 * Symbol("a"); undefined and a missing value), as one value of an index
 * and one _id must.  So a key does not keep the type of a number: decoding
 * gives the narrowest of int32, int64, double, decimal128 that holds the
 * value exactly, a string for a symbol, undefined for a missing value
 * (the stored document keeps the real value).
 *
 * Every encoding is self-delimiting (no encoding is a prefix of another),
 * so the parts of a compound key are written one after the other and
 * still compare part by part, and any suffix (the _id after an index
 * key) leaves the order of the parts alone.  A descending part is its
 * ascending encoding with every byte inverted: inverting reverses the
 * order of self-delimiting encodings.
 *
 * Arrays are compared element by element as mql_value_cmp compares
 * arrays whose keys are "0", "1", ... (as every BSON array libbson builds);
 * an array with other keys is encoded as if it had those.
 *
 * Sizes: LMDB refuses keys past 511 bytes, and an index entry is the
 * server's prefix (index id), the key, then the _id: a key is at most
 * MQL_KEY_MAX bytes, an _id MQL_KEY_ID_MAX (448 together, 63 for the
 * prefix).  Longer ones fail with 17280 KeyTooLong.
 */
#ifndef KVD_MONGO_MQL_KEY_H
#define KVD_MONGO_MQL_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"
#include "mql_match.h"

#define MQL_KEY_MAX 256	       /* the parts of one index key */
#define MQL_KEY_ID_MAX 192     /* an encoded _id */
#define MQL_INDEX_MAX_PARTS 32 /* MongoDB's limit of a compound index */

/* MQL_KeyTooLong, MQL_CannotIndexParallelArrays and MQL_CannotCreateIndex
 * are mql_error.h's, with their names. */

/* ---- values ----------------------------------------------------------- */

/* mql_key_encode - write v's encoding (inverted when desc) at buf[*len],
 * advancing *len, within buf[0..cap).  v comes from checked BSON.
 * Returns 0, or -1 with 17280 KeyTooLong when it does not fit (buf is
 * left with *len unchanged). */
int mql_key_encode(const bson_value_t *v, bool desc, uint8_t *buf, size_t cap,
		   size_t *len, struct mql_error *err);

/* mql_key_decode - the value encoded at the start of key[0..len) (one
 * part; desc as it was written), appended to out under field.  *used
 * receives the bytes it took.  Returns 0, or -1 with 22 InvalidBSON when
 * the bytes are no encoding of this library's. */
int mql_key_decode(const uint8_t *key, size_t len, bool desc, bson_t *out,
		   const char *field, size_t *used, struct mql_error *err);

/* mql_key_skip - the bytes the value encoded at the start of key[0..len)
 * takes (desc as it was written), without decoding it: where the next
 * part of a compound key, or an index entry's _id, begins.  -1 when the
 * bytes are no encoding of this library's (a descending value is read
 * within its first 512 bytes: every key is shorter). */
long mql_key_skip(const uint8_t *key, size_t len, bool desc);

/* ---- the primary key ------------------------------------------------- */

/* mql_key_id - the primary key of a document whose _id is id: its
 * ascending encoding, in buf (of MQL_KEY_ID_MAX bytes).  A document
 * without _id gets one from the server before this is called.
 * Errors (-1): 2 BadValue "can't use an array for _id", "can't use a
 * regex for _id", "can't use a undefined for _id" (MongoDB's insert
 * rules); 17280 KeyTooLong past MQL_KEY_ID_MAX. */
int mql_key_id(const bson_value_t *id, uint8_t *buf, size_t *len,
	       struct mql_error *err);

/* mql_key_id_decode - append {_id: value} of a primary key to out. */
int mql_key_id_decode(const uint8_t *key, size_t len, bson_t *out,
		      struct mql_error *err);

/* ---- the keys of a document ------------------------------------------ */

struct mql_index;

enum {
	MQL_INDEX_SPARSE = 1u /* no key for a document missing every field */
};

/* mql_index_compile - an index key pattern {a: 1, "b.c": -1}: each value
 * a number above 0 (ascending) or below 0 (descending).
 * Errors (-1): 67 CannotCreateIndex "Index keys cannot be empty.",
 * "Values in v:2 index key pattern cannot be of type string. Only numbers
 * > 0, numbers < 0, and strings are allowed." (and for 0), an empty field
 * name; 13103 "too many fields in index key, max is 32"; 238 for the
 * special indexes ("hashed", "text", "2dsphere" ...). */
int mql_index_compile(const uint8_t *spec, uint32_t len, unsigned flags,
		      struct mql_index **out, struct mql_error *err);
void mql_index_free(struct mql_index *ix);
size_t mql_index_nparts(const struct mql_index *ix);

/* Flags mql_index_keys reports. */
enum {
	MQL_KEYS_MULTIKEY = 1u /* an array was expanded (even an empty one) */
};

/* mql_key_cb - one key; a nonzero return stops mql_index_keys, which
 * returns it. */
typedef int (*mql_key_cb)(void *ctx, const uint8_t *key, size_t len);

/* mql_index_keys - the keys of the document doc[0..len) (checked BSON),
 * as MongoDB makes them: a missing field is null; an array field gives
 * one key per element (an empty array, undefined); fields reached through
 * the same array are expanded together (one key per element of it), and
 * two fields reached through different arrays fail with 171
 * CannotIndexParallelArrays "cannot index parallel arrays [b] [a]"; an
 * array element that is itself an array is one value; a numeric path
 * component indexes an array.  Keys are given once each (no duplicates),
 * in ascending byte order.  A sparse index gives no key for a document
 * (or an array element) missing every field.  *flags (may be NULL) gets
 * MQL_KEYS_MULTIKEY.  Returns 0, a callback's nonzero return, or -1 with
 * err set (171, 17280 KeyTooLong). */
int mql_index_keys(const struct mql_index *ix, const uint8_t *doc, uint32_t len,
		   unsigned *flags, mql_key_cb cb, void *ctx,
		   struct mql_error *err);

/* ---- scan bounds ------------------------------------------------------ */

/* A range of keys: start <= key < end, compared as byte strings (a key
 * with more bytes after an equal prefix is the greater). */
struct mql_interval {
	uint8_t *start, *end;
	size_t slen, elen;
};

struct mql_bounds {
	struct mql_interval *iv; /* ascending, disjoint */
	size_t n;
	size_t nparts; /* the leading index fields the bounds narrow */
};

/* mql_index_bounds - the intervals of ix's keys that hold every document
 * the filter m may match, from its top-level equality, $in and range
 * predicates (mql_match_preds), MongoDB's way: an equality (or $in) prefix
 * of the index's fields, then at most one range; a range is bracketed by
 * the type of its operand ({$gt: 5} reads numbers only, up to +infinity;
 * {$lt: "m"} strings only); {a: null} reads null and undefined (missing
 * fields are keyed null); an equality to an array reads the array and its
 * first element.  With multikey (the index has had an array in a document)
 * two predicates on one field are not intersected (different elements may
 * satisfy them): the first one is used.  The bounds may be wider than the
 * filter: the caller still matches every document it fetches.  No
 * predicate on the first field: one interval over the whole index.
 * Returns 0 (n == 0: nothing can match), or -1. */
int mql_index_bounds(const struct mql_index *ix, const struct mql_match *m,
		     bool multikey, struct mql_bounds *out,
		     struct mql_error *err);
void mql_bounds_free(struct mql_bounds *b);

#endif
