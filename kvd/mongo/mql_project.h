/* mql_project.h - projections: find's projection document and the
 * aggregation stages that reshape documents ($project, $addFields/$set,
 * $unset), compiled once and applied to documents.
 *
 * Inclusion ({a: 1, "b.c": true}) keeps the named fields, in the
 * document's order, and _id unless {_id: 0}; computed fields ({x: "$a",
 * y: {$literal: 1}}, mql_expr.h) count as inclusions and follow the
 * included ones.  Exclusion ({a: 0}) drops the named fields.  Paths go
 * through arrays of documents ({"a.b": 1} on {a: [{b: 1, c: 2}, 3]} gives
 * {a: [{b: 1}]}).  find's projection also takes {a: {$slice: n}}, {a:
 * {$slice: [skip, n]}} and {a: {$elemMatch: filter}}.
 *
 * Errors of mql_project_compile (-1, err set):
 *   31254  "Cannot do exclusion on field b in inclusion projection"
 *   31253  "Cannot do inclusion on field b in exclusion projection"
 *   31250  "Path collision at a.b" (one path a prefix of another)
 *   51272  $project without any field ("projection specification must
 *          have at least one field")
 *   2      $slice, $elemMatch arguments; $elemMatch on a dotted path
 *          ("Cannot use $elemMatch projection on a nested field.")
 *   238    $meta, the positional "a.$"
 *   and those of mql_expr_compile and mql_match_compile.
 * Memory: the spec is copied; the result is appended to the caller's
 * bson_t.  A compiled projection is read-only and may be shared.
 */
#ifndef KVD_MONGO_MQL_PROJECT_H
#define KVD_MONGO_MQL_PROJECT_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

struct mql_project;

enum mql_project_kind {
	MQL_PROJECT_FIND,  /* find's projection ({} keeps everything) */
	MQL_PROJECT_AGG,   /* $project */
	MQL_PROJECT_ADD,   /* $addFields and $set: computed fields only */
	MQL_PROJECT_UNSET, /* $unset: spec is {path: 0, ...} */
};

int mql_project_compile(const uint8_t *spec, uint32_t len,
			enum mql_project_kind kind, struct mql_project **out,
			struct mql_error *err);
void mql_project_free(struct mql_project *p);

/* mql_project_apply - append the projection of doc[0..len) (checked
 * BSON) to out (an empty bson_t).  Returns 0, or -1 with err set (10334
 * when the result passes 16 MiB). */
int mql_project_apply(const struct mql_project *p, const uint8_t *doc,
		      uint32_t len, bson_t *out, struct mql_error *err);

/* mql_project_fields - whether p is a find's inclusion of fields only
 * (no computed field, $slice or $elemMatch) without _id, every included
 * path starting with a field that ok(ctx, name, len) accepts (a
 * top-level name): its result from a document is then the same from any
 * document with those fields alike, in the same order. */
bool mql_project_fields(const struct mql_project *p,
			bool (*ok)(void *ctx, const char *name, size_t len),
			void *ctx);

#endif
