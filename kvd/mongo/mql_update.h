/* mql_update.h - MongoDB's update documents: parse and check one once,
 * then apply it to a document (or to nothing, for an upsert's insert) to
 * make the new document.  The committer calls mql_update_apply with the
 * document's current image and writes the image it returns.
 *
 * Two kinds of update document (MongoDB's rule: the first field decides):
 *   operators   {$set: {...}, $inc: {...}, ...}: $set $unset $inc $mul
 *               $min $max $rename $setOnInsert $currentDate $push (with
 *               $each $slice $position $sort) $addToSet (with $each) $pop
 *               $pull (a value or a condition, by the matcher) $pullAll;
 *               the positional "$" (the index the query matched, given
 *               by the caller); paths into subdocuments and array
 *               indexes, arrays padded with nulls;
 *   replacement {a: 1, ...}: the new document, which keeps _id.
 * An empty document {} is a replacement (MongoDB's rule); {$set: {}} is
 * a valid update that changes nothing (MongoDB 5.0 on).
 * Fields are updated in MongoDB's order (5.0 on): by name, numeric names
 * in numeric order, so new fields are appended in that order.
 * Not supported (238 NotImplemented): $[] and $[<identifier>] with
 * arrayFilters, $bit, pipeline updates (an array), $currentDate inside
 * arrays reached by "$".
 *
 * Errors of mql_update_compile (-1, err set):
 *   9 FailedToParse   "Unknown modifier: $foo. Expected a valid update
 *                     modifier or pipeline-style update specified as an
 *                     array", "Modifiers operate on fields but we found
 *                     type int instead. ...", $pop's arguments;
 *   40 ConflictingUpdateOperators  "Updating the path 'a.b' would create
 *                     a conflict at 'a'";
 *   14 TypeMismatch   "Cannot increment with non-numeric argument: ...",
 *                     "Cannot multiply with non-numeric argument: ...";
 *   52 DollarPrefixedFieldName  a '$' field in a replacement, or a path
 *                     component that starts with '$' and is not "$";
 *   56 EmptyFieldName "An empty update path is not valid.", "The update
 *                     path 'a..b' contains an empty field name, which is
 *                     not allowed.";
 *   2 BadValue        the arguments of $rename, $push, $addToSet,
 *                     $currentDate, $pullAll, $pull (its filter's own
 *                     errors too);
 *   15 Overflow       a path of more than 100 components;
 *   238 NotImplemented, 22, 10334  as above and malformed BSON.
 * Errors of mql_update_apply (-1, err set, *out left empty):
 *   28 PathNotViable  "Cannot create field 'b' in element {a: 1}";
 *   14 TypeMismatch   "Cannot apply $inc to a value of non-numeric type.
 *                     {_id: ...} has the field 'a' of non-numeric type
 *                     string" ($mul the same), $pop on a non-array;
 *   2 BadValue        $push / $addToSet / $pull on a non-array, an int64
 *                     $inc or $mul that overflows, the positional operator
 *                     without a matched index;
 *   66 ImmutableField "Performing an update on the path '_id' would
 *                     modify the immutable field '_id'", and for a
 *                     replacement "After applying the update, the
 *                     (immutable) field '_id' was found to have been
 *                     altered to _id: ...";
 *   54 NotSingleValueField  an upsert whose query sets one path twice
 *                     ("cannot infer query fields to set, path 'a' is
 *                     matched twice");
 *   10334 BSONObjectTooLarge  "Resulting document after update is larger
 *                     than 16777216";
 *   15 Overflow       the result nests deeper than 100 levels.
 *
 * Memory: mql_update_compile copies the update; mql_update_free frees it.
 * mql_update_apply writes into a bson_t the caller initialized (and
 * destroys).  Threading: a compiled update is read-only and may be
 * applied by several threads at once.
 */
#ifndef KVD_MONGO_MQL_UPDATE_H
#define KVD_MONGO_MQL_UPDATE_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"
#include "mql_match.h"

struct mql_update;

/* mql_update_compile - parse and check update[0..len). */
int mql_update_compile(const uint8_t *update, uint32_t len,
		       struct mql_update **out, struct mql_error *err);

void mql_update_free(struct mql_update *u);

/* mql_update_is_replacement - a replacement document, not operators. */
bool mql_update_is_replacement(const struct mql_update *u);

/* What an apply needs from its caller. */
struct mql_update_ctx {
	int64_t now_ms;	     /* $currentDate's date (ms since the epoch) */
	uint32_t ts_t, ts_i; /* $currentDate's timestamp */
	long pos;	     /* positional "$": mql_match_doc's pos, or -1 */
	const struct mql_match *query; /* upsert: its equalities seed the
					* new document (may be NULL) */
	const bson_value_t *new_id;    /* upsert: the _id of a new document
				     * that gets none (may be NULL) */
};

/* mql_update_apply - apply u to the document doc[0..len) (checked BSON),
 * or, with doc NULL, make the document an upsert inserts: the query's
 * equalities, then u with $setOnInsert, _id first.  The new document is
 * appended to out (an empty bson_t); *modified says whether it differs
 * from doc byte for byte (MongoDB's nModified).  Returns 0 or -1. */
int mql_update_apply(const struct mql_update *u, const uint8_t *doc,
		     uint32_t len, const struct mql_update_ctx *ctx,
		     bson_t *out, bool *modified, struct mql_error *err);

#endif
