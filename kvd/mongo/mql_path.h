/* mql_path.h - dotted paths ("a.b.0.c") and MongoDB's way of finding the
 * values a path names in a document, through subdocuments and arrays.
 *
 * A walk yields every candidate value, as MongoDB's matcher sees them:
 *   - a component names a field of a document;
 *   - a component met by an array applies to each element of it that is a
 *     document ({a: [{b: 1}, {b: 2}]}: "a.b" yields 1 and 2); elements that
 *     are not documents yield nothing, and arrays nested in the array are
 *     not entered;
 *   - a numeric component met by an array also indexes it ("a.0"), and an
 *     element so named is walked on with the rest of the path (an array
 *     there is traversed again);
 *   - a path that ends on an array yields, with MQL_PATH_EXPAND, each
 *     element of that array (one level) and then the array itself;
 *     without it, the array only ($size and $elemMatch look at arrays);
 *   - a path that runs out (a field absent from a document, or a scalar
 *     where a document would be needed) yields "missing" once for that
 *     branch: a value of type BSON_TYPE_EOD.  So {"a.b": null} matches
 *     {a: [{c: 1}]}, and not {a: [1, 2]} (no branch at all).
 *
 * Threading: a parsed path is read-only; walks of one path may run in
 * parallel on any threads.
 */
#ifndef KVD_MONGO_MQL_PATH_H
#define KVD_MONGO_MQL_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

struct mql_path_part {
	const char *s; /* inside mql_path.dotted, not NUL-terminated */
	size_t len;
	long index; /* array index this component names, or -1 */
};

struct mql_path {
	char *dotted; /* the whole path, NUL-terminated, owned */
	size_t len;
	size_t n; /* components */
	struct mql_path_part *parts;
};

/* mql_path_parse - split dotted[0..len) on dots into *out (which the
 * caller frees with mql_path_free, also after a failure).
 * Errors (-1):
 *   2 BadValue  an empty path, an empty component ("a..b", ".a", "a."),
 *               or a NUL byte in it. */
int mql_path_parse(const char *dotted, size_t len, struct mql_path *out,
		   struct mql_error *err);
void mql_path_free(struct mql_path *p);

/* Flags of a yielded value. */
enum {
	MQL_PATH_MISSING = 1u, /* the path ran out: v is BSON_TYPE_EOD */
	MQL_PATH_ELEMENT = 2u, /* an element of the array at the path's end */
	MQL_PATH_WHOLE_ARRAY = 4u /* the array at the path's end, itself */
};

/* Options of a walk. */
enum {
	MQL_PATH_EXPAND = 1u /* yield a final array's elements, then it */
};

/* mql_path_cb - called for each candidate; pos is the index, in the first
 * array the walk went through, of the element this value came from (-1
 * when it went through none): MongoDB's positional "$".  A nonzero return
 * stops the walk, which returns it. */
typedef int (*mql_path_cb)(void *ctx, const bson_value_t *v, unsigned flags,
			   long pos);

/* mql_path_walk - walk path from component `from` in the document
 * doc[0..len) (checked BSON), calling cb for every candidate.  Returns 0
 * when every callback returned 0, else the first nonzero return. */
int mql_path_walk(const struct mql_path *p, size_t from, const uint8_t *doc,
		  uint32_t len, unsigned opts, mql_path_cb cb, void *ctx);

/* mql_path_get - the value at path through documents only (no array
 * traversal; a numeric component indexes an array): true and *out when
 * it exists.  Updates and projections use it for single-valued paths. */
bool mql_path_get(const struct mql_path *p, const uint8_t *doc, uint32_t len,
		  bson_value_t *out);

/* mql_path_find_field - the field named name[0..len) in a document:
 * true and *it positioned on it. */
bool mql_path_find_field(const uint8_t *doc, uint32_t doclen, const char *name,
			 size_t len, bson_iter_t *it);

#endif
