/* mql_sort.h - MongoDB's sort specifications ({a: 1, b: -1}) compiled into
 * a comparator of documents.
 *
 * A document's key for a field is found by the matcher's path walk
 * (mql_path.h): a missing field sorts as null; an array contributes its
 * elements, the smallest for an ascending field and the largest for a
 * descending one; an empty array sorts below null (as undefined, the
 * documented "an empty array is less than null or a missing field").
 * Values then compare in MongoDB's cross-type order (mql_value.h).
 *
 * Keys point into the document they were taken from: keep the document
 * while its key is used.  A compiled spec is read-only and may be shared
 * by threads.
 */
#ifndef KVD_MONGO_MQL_SORT_H
#define KVD_MONGO_MQL_SORT_H

#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

struct mql_sort;

/* mql_sort_compile - compile spec[0..len) into *out.  An empty spec
 * compiles (every document ties).
 * Errors (-1, err set):
 *   15975  "$sort key ordering must be 1 (for ascending) or -1 (for
 *          descending)" (a value other than 1 or -1);
 *   238 NotImplemented  {$meta: ...} keys;
 *   2 BadValue  an empty path or an empty component;
 *   22, 15, 10334  malformed, too deep or too large BSON. */
int mql_sort_compile(const uint8_t *spec, uint32_t len, struct mql_sort **out,
		     struct mql_error *err);

/* mql_sort_of_direction - a spec that sorts whole values (what $push's
 * {$sort: 1} does): keys are the values themselves. */
struct mql_sort *mql_sort_whole(int direction);

void mql_sort_free(struct mql_sort *s);

/* mql_sort_nkeys - the number of fields of the spec (key arrays hold as
 * many values). */
size_t mql_sort_nkeys(const struct mql_sort *s);

/* mql_sort_key - fill keys[0..nkeys) with doc's sort key (doc[0..len) is
 * checked BSON).  For mql_sort_whole, doc is ignored and v is the key. */
void mql_sort_key(const struct mql_sort *s, const uint8_t *doc, uint32_t len,
		  bson_value_t *keys);

/* mql_sort_cmp_keys - <0, 0, >0 as a sorts before, with, after b. */
int mql_sort_cmp_keys(const struct mql_sort *s, const bson_value_t *a,
		      const bson_value_t *b);

/* mql_sort_cmp_values - compare two values as this spec sorts them: a
 * document value by its fields' keys; a value that is not a document as
 * a document without the fields (its keys null); a mql_sort_whole spec
 * compares the values themselves. */
int mql_sort_cmp_values(const struct mql_sort *s, const bson_value_t *a,
			const bson_value_t *b);

#endif
