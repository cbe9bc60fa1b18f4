/* mql_match.h - MongoDB's query filters: compile a filter document once
 * into a tree, then match documents against it.
 *
 * Supported (docs/mongodb-language.md lists the semantics and the
 * differences from MongoDB):
 *   implicit equality {a: v}, whole documents and arrays included, and an
 *   array field that contains v; {a: /re/};
 *   $eq $ne $gt $gte $lt $lte $in $nin (comparisons bracketed by type:
 *   {$gt: 5} never matches a string; MinKey/MaxKey bound everything),
 *   $exists $type (aliases, numbers, "number", arrays of them) $regex
 *   ($options i m s x u; PCRE2) $mod $size $all $elemMatch (both forms)
 *   $not, and at the top $and $or $nor $comment $alwaysTrue $alwaysFalse.
 *   {a: null} matches a missing a (and null, and undefined).
 *   $expr $where $text $jsonSchema $geoWithin and the other geo and bit
 *   operators are refused with 238 NotImplemented.
 *
 * Errors of mql_match_compile (all -1, err set):
 *   2 BadValue   "unknown operator: $foo", "unknown top level operator:
 *                $foo. ...", "$in needs an array", "$and/$or/$nor must be
 *                a nonempty array", "exceeded maximum query tree depth of
 *                100 at ...", and the other malformed arguments;
 *   14 TypeMismatch  "type must be represented as a number or a string";
 *   22 InvalidBSON, 15 Overflow, 10334 BSONObjectTooLarge  the filter is
 *                not well-formed BSON, nests past 200 levels, or passes
 *                16 MiB + 16 KiB;
 *   51075 51091 51108  regular expression options twice, a pattern
 *                PCRE2 refuses, an unknown option letter;
 *   238 NotImplemented  an operator this library does not implement.
 *
 * Memory: mql_match_compile copies the filter; the caller's buffer may go
 * as soon as it returns.  mql_match_free frees the whole tree.
 *
 * Threading: a compiled filter is read-only; any number of threads may
 * call mql_match on it at once.
 */
#ifndef KVD_MONGO_MQL_MATCH_H
#define KVD_MONGO_MQL_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

struct mql_match;

/* mql_match_compile - compile the filter filter[0..len) into *out.
 * Returns 0, or -1 with err set (see above) and *out NULL. */
int mql_match_compile(const uint8_t *filter, uint32_t len,
		      struct mql_match **out, struct mql_error *err);

/* mql_match_compile_value - compile what $pull takes: a condition on a
 * single value.  cond is an operator document ({$gte: 6}), tested on the
 * value (and on the elements of an array value); an object that is not an
 * operator document is a filter tested on values that are documents;
 * anything else is an equality. */
int mql_match_compile_value(const bson_value_t *cond, struct mql_match **out,
			    struct mql_error *err);

/* mql_match_doc - true when the document doc[0..len) (checked BSON)
 * matches.  pos, when not NULL, receives the index of the array element
 * that made the match in the first array a matching path went through
 * (MongoDB's positional "$"), or -1. */
bool mql_match_doc(const struct mql_match *m, const uint8_t *doc, uint32_t len,
		   long *pos);

/* mql_match_value - for a filter from mql_match_compile_value: true when
 * the value matches. */
bool mql_match_value(const struct mql_match *m, const bson_value_t *v);

void mql_match_free(struct mql_match *m);

/* mql_match_slow - m runs a regular expression: one document's match may
 * take long (backtracking to PCRE2's match limit: 25 to 150 ms),
 * where any other filter costs in proportion to the document's size.  A
 * scan that must give its thread back in time reads the clock after
 * each of this one's matches, and less often for the others. */
bool mql_match_slow(const struct mql_match *m);

/* ---- what a query planner needs ----------------------------------- */

enum mql_pred_op {
	MQL_PRED_EQ,  /* $eq and implicit equality (not a regex) */
	MQL_PRED_LT,  /* $lt */
	MQL_PRED_LTE, /* $lte */
	MQL_PRED_GT,  /* $gt */
	MQL_PRED_GTE, /* $gte */
	MQL_PRED_IN,  /* $in: value is the array (regexes included) */
};

/* One predicate that every matching document satisfies: it sits in the
 * filter's top-level conjunction (directly, or under $and), so an index
 * on path can narrow the search to it.  An equality or range on an array
 * field holds for any one of its elements (or the array itself): the
 * planner must keep arrays in mind, as MongoDB's multikey indexes do. */
struct mql_pred {
	const char *path; /* dotted, NUL-terminated */
	enum mql_pred_op op;
	const bson_value_t *value; /* points into the compiled filter */
};

/* mql_match_preds - call cb for each such predicate, in filter order.
 * The pointers stay valid until mql_match_free. */
void mql_match_preds(const struct mql_match *m,
		     void (*cb)(void *ctx, const struct mql_pred *p),
		     void *ctx);

/* mql_match_fields - whether every path the filter tests starts with a
 * field that ok(ctx, name, len) accepts (a top-level field name, the
 * first component of the path), under $and, $or, $nor and $not too: a
 * document that agrees with another on those fields matches alike.
 * False for a filter of values (mql_match_compile_value's). */
bool mql_match_fields(const struct mql_match *m,
		      bool (*ok)(void *ctx, const char *name, size_t len),
		      void *ctx);

/* mql_match_is_id_eq - the filter is exactly {_id: v} (or {_id: {$eq:
 * v}}) with v not an object, array or regex: a point lookup.  *v points
 * into the compiled filter. */
bool mql_match_is_id_eq(const struct mql_match *m, const bson_value_t **v);

#endif
