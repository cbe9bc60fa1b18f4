/* mql_expr.h - the subset of MongoDB's aggregation expressions that
 * projections, $addFields and $group need: field paths ("$a.b", through
 * arrays as aggregation does: an array yields the array of its elements'
 * values), $$ROOT and $$CURRENT (and paths below them), $$REMOVE, {$literal:
 * v}, documents and arrays of expressions, and constants.  Any other
 * operator is refused: 168 InvalidPipelineOperator "Unrecognized expression
 * '$foo'" (or 238 NotImplemented for operators MongoDB has and this
 * library does not evaluate: see docs/mongodb-language.md).
 *
 * A compiled expression points into the BSON it was compiled from, which
 * must outlive it.  Evaluation appends the result to a bson_t under a key:
 * no value is returned by pointer, so nothing dangles.
 */
#ifndef KVD_MONGO_MQL_EXPR_H
#define KVD_MONGO_MQL_EXPR_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

struct mql_expr;

/* mql_expr_compile - compile the expression v (a value of checked BSON
 * that outlives the expression).  Errors (-1): 168, 238, 2 BadValue (an
 * empty field path, '$' alone), 17276 "Use of undefined variable: x",
 * 16412/16410 field names of document expressions with '.' or '$'. */
int mql_expr_compile(const bson_value_t *v, struct mql_expr **out,
		     struct mql_error *err);
void mql_expr_free(struct mql_expr *e);

/* mql_expr_eval - evaluate e on the document doc[0..len) and append the
 * result to out under key (keylen bytes).  Returns 1 when appended, 0
 * when the result is missing (nothing appended), -1 when out would pass
 * its size limit. */
int mql_expr_eval(const struct mql_expr *e, const uint8_t *doc, uint32_t len,
		  bson_t *out, const char *key, int keylen);

/* mql_expr_is_field_path - a "$a.b" expression (projections treat them as
 * computed fields). */
bool mql_expr_is_field_path(const struct mql_expr *e);

/* mql_expr_fields - whether every field the expression reads starts with
 * a top-level field that ok(ctx, name, len) accepts (each path's first
 * component is given to it); false when it reads the whole document
 * ($$ROOT). */
bool mql_expr_fields(const struct mql_expr *e,
		     bool (*ok)(void *ctx, const char *name, size_t len),
		     void *ctx);

#endif
