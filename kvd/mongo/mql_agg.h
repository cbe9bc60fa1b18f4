/* mql_agg.h - MongoDB's aggregation pipeline, in memory and bounded: an
 * array of stage documents compiled once, then run over documents that
 * the caller feeds through a callback, its results pulled one at a time
 * (so that the MongoDB door fills a cursor batch, stops early, and goes
 * on at the next getMore).
 *
 * Stages: $match $project $addFields $set $unset $sort $skip $limit
 * $count $group $sortByCount $unwind $lookup.  A $sort followed by a $limit
 * (or a $skip then a $limit) keeps only the documents the limit lets
 * through (a top-k).  $group accumulators: $sum $avg $min $max $first
 * $last $push $addToSet $count; its _id is any expression mql_expr.h
 * evaluates (a field path, a document of expressions, a constant, null).
 * $lookup: the equality form {from, localField, foreignField, as}, the
 * same with a pipeline run over each input's matches, and {from,
 * pipeline, as} (a pipeline over the whole collection, run once); it
 * reads its `from` collection through the caller's struct
 * mql_agg_foreign (agg_lookup.c says how).  `let` (and so any pipeline
 * that refers to the input document) and a `from` in another database
 * are refused with 238.  MongoDB's other stages
 * ($facet $bucket $replaceRoot $out $merge ...) are refused with 238
 * NotImplemented; a name MongoDB does not know, with 40324.  Adding a
 * stage is one entry in agg.c's table of stages.
 *
 * Memory: the stages that hold documents ($sort, $group, $sortByCount,
 * and $lookup when it holds its foreign collection) count the bytes they
 * hold and fail past a limit (MongoDB's 100 MiB by default) with 292
 * QueryExceededMemoryLimitNoDiskUseAllowed; nothing is spilled to disk
 * (allowDiskUse is not supported).  Every other stage holds one document
 * at a time ($lookup: one document and its `as` array, at most 16 MiB).
 *
 * Errors of mql_pipeline_compile (-1, err set):
 *   40324  "Unrecognized pipeline stage name: '$foo'"
 *   40323  "A pipeline stage specification object must contain exactly one
 *          field."
 *   14 TypeMismatch  "Each element of the 'pipeline' array must be an
 *          object"
 *   15959 $match not a document, 15969 $project, 40272 $addFields/$set,
 *   31002/31119/31120 $unset, 15973/15976 $sort, 15972/15956 $skip,
 *   15957/15958 $limit, 40156/40157/40158/40160 $count, 15947/15955/
 *   15952/40234/40235/40236/40237/40238 $group, 40147/40148/40149
 *   $sortByCount, 15981/28808/28809/28810/28811/28812/28818/28822
 *   $unwind: MongoDB's codes and messages for malformed stages;
 *   and those of mql_match_compile, mql_project_compile, mql_sort_compile
 *   and mql_expr_compile for the stages' arguments.
 * Errors of mql_agg_next (-1, err set):
 *   292 QueryExceededMemoryLimitNoDiskUseAllowed  "Sort exceeded memory
 *          limit of 104857600 bytes, but did not opt in to external
 *          sorting.", "Exceeded memory limit for $group, but didn't allow
 *          external sort. Pass allowDiskUse:true to opt in.";
 *   10334 BSONObjectTooLarge  a document a stage makes passes 16 MiB;
 *   4568  "Total size of documents in <from> matching pipeline's $lookup
 *          stage exceeds 16793600 bytes";
 *   238 NotImplemented  a $lookup on a cursor given no mql_agg_foreign;
 *   1 InternalError  a streamed $group whose input was not in order;
 *   whatever the source callback reports.
 *
 * Threading: a compiled pipeline is read-only and may be shared; a cursor
 * belongs to one thread at a time (it may move between getMores).
 */
#ifndef KVD_MONGO_MQL_AGG_H
#define KVD_MONGO_MQL_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"
#include "mql_match.h"
#include "mql_sort.h"

/* MongoDB's defaults: internalQueryMaxBlockingSortMemoryUsageBytes and
 * internalDocumentSourceGroupMaxMemoryBytes. */
#define MQL_AGG_SORT_MEM_DEFAULT (100u * 1024 * 1024)
#define MQL_AGG_GROUP_MEM_DEFAULT (100u * 1024 * 1024)
#define MQL_AGG_LOOKUP_MEM_DEFAULT (100u * 1024 * 1024)

/* MongoDB's BSONObjMaxInternalSize: the bytes of one $lookup's matches. */
#define MQL_AGG_LOOKUP_MAX (16 * 1024 * 1024 + 16 * 1024)

/* MongoDB's internalPipelineLengthLimit: more stages fail with 7749501
 * "Pipeline length must be no longer than 1000 stages." */
#define MQL_AGG_MAX_STAGES 1000

struct mql_agg_opts {
	size_t sort_mem;   /* bytes one $sort may hold; 0: the default */
	size_t group_mem;  /* bytes one $group may hold; 0: the default */
	size_t lookup_mem; /* bytes one $lookup may hold of its foreign
			    * collection; 0: the default */
};

struct mql_pipeline;

/* mql_pipeline_compile - compile the pipeline given as the bytes of a
 * BSON array (the aggregate command's `pipeline`; an array's bytes are a
 * document's, keys "0", "1" ...).  opts may be NULL.  The bytes are
 * copied.  Returns 0, or -1 with err set and *out NULL. */
int mql_pipeline_compile(const uint8_t *stages, uint32_t len,
			 const struct mql_agg_opts *opts,
			 struct mql_pipeline **out, struct mql_error *err);
void mql_pipeline_free(struct mql_pipeline *p);

/* mql_pipeline_nstages - the number of stages as the user wrote them. */
size_t mql_pipeline_nstages(const struct mql_pipeline *p);

/* ---- what a planner needs ------------------------------------------ */

/* The leading stages a caller may do itself with an index: a $match
 * first, and a $sort first or right after that $match.  Pointers stay
 * valid until mql_pipeline_free. */
struct mql_agg_lead {
	const struct mql_match *match; /* NULL: no leading $match */
	const uint8_t *match_bson;     /* its filter document */
	uint32_t match_len;
	const struct mql_sort *sort; /* NULL: no leading $sort */
	const uint8_t *sort_bson;    /* its specification */
	uint32_t sort_len;
	size_t after_match; /* stage index right after the $match (or 0) */
	size_t after_sort;  /* stage index right after the $sort (or 0) */
	int64_t sort_limit; /* the $sort needs only its first sort_limit
			     * documents (a $limit follows, maybe after a
			     * $skip), or -1 */
	/* A $group first or right after the $match whose _id is a field
	 * path "$f": the order {f: 1} in which it can stream (NULL: none).
	 * A caller whose scan yields in that order (an index on f) runs
	 * the pipeline from after_match and calls mql_agg_stream_group. */
	const struct mql_sort *group_order;
	const uint8_t *group_order_bson;
	uint32_t group_order_len;
	/* The stage first or right after the $match reads no field of its
	 * documents, only counts them: $count, or a $group of constants
	 * ({_id: 1, n: {$sum: 1}}, the drivers' countDocuments). */
	bool count_only;
	/* Or what it reads: a $group's fields as a projection ({f: 1, _id:
	 * 0}; NULL: the whole document), which the store may give alone. */
	const struct mql_project *reads;
};

void mql_pipeline_lead(const struct mql_pipeline *p, struct mql_agg_lead *out);

/* ---- running -------------------------------------------------------- */

/* mql_agg_source - the caller's documents: store the next one in *doc and
 * *len (checked BSON, valid until the next call) and return 1; return 0
 * at the end; -1 with err set on a failure, which mql_agg_next passes on;
 * MQL_AGG_PAUSE when it has nothing yet (a reader giving its thread
 * back): mql_agg_next returns MQL_AGG_PAUSE too, every stage keeping its
 * place ($sort's and $group's documents so far), and a later call goes
 * on.  The executor stops calling it as soon as no more input is needed
 * (after a $limit is reached). */
#define MQL_AGG_PAUSE 2
typedef int (*mql_agg_source)(void *ctx, const uint8_t **doc, uint32_t *len,
			      struct mql_error *err);

struct mql_agg_cursor;

/* mql_agg_open - a cursor that runs stages [from, nstages) of p over the
 * documents src gives (from = 0 runs the whole pipeline; from =
 * lead.after_sort when the caller's index scan did the $match and the
 * $sort).  p must outlive the cursor.  Returns 0, or -1 (from past the
 * last stage: 2 BadValue). */
int mql_agg_open(const struct mql_pipeline *p, size_t from, mql_agg_source src,
		 void *ctx, struct mql_agg_cursor **out, struct mql_error *err);

/* mql_agg_set_pause - a cursor whose caller gives its thread back in
 * slices: over(ctx) says whether the slice ran out, and is asked before
 * each document a stage takes from the one before it (or from src) once
 * a document moved in this mql_agg_next; when it has, mql_agg_next
 * returns MQL_AGG_PAUSE, every stage keeping its place, so that work done
 * in memory (a slow $match after a $project, the pipeline of a $lookup
 * over its matches) gives the thread back as the reads do.  Pipelines a
 * stage runs ($lookup's) pause with it.  Before the first mql_agg_next. */
void mql_agg_set_pause(struct mql_agg_cursor *c, bool (*over)(void *ctx),
		       void *ctx);

/* mql_agg_stream_group - the cursor's first stage is lead.group_order's
 * $group and its source yields in that order: it emits each group when
 * the key changes instead of holding them all (agg_group_stream.c).  A
 * no-op for any other first stage.  Before the first mql_agg_next. */
void mql_agg_stream_group(struct mql_agg_cursor *c);

/* mql_agg_foreign - how $lookup reads the collection its `from` names
 * (in the pipeline's database).  The caller gives one to a cursor whose
 * pipeline has a $lookup (mql_agg_set_foreign); ctx must outlive it.
 *
 * indexed - 1 when a read of coll by an equality on field is an index
 *   read (an index whose first key is field answers it), 0 when each read
 *   would scan the collection, -1 with err.  With 0, $lookup reads the
 *   whole collection once (filter {}), holds it hashed by foreignField
 *   (lookup_mem) and matches each input document against the documents
 *   filed under its values; with 1, it reads once per input document
 *   with the equality filter.
 * open - a read of coll's documents that match the query document
 *   filter[0..len) (made by $lookup: {field: {$eq: v}}, {field: {$in:
 *   [...]}} or an $or of $eq); a missing collection reads nothing.  0
 *   with *rd, -1 with err.
 * next - as mql_agg_source, on rd (MQL_AGG_PAUSE included: $lookup
 *   returns it, keeping its place in the join, and reads on at the next
 *   call).  close - end the read. */
struct mql_agg_foreign {
	void *ctx;
	int (*indexed)(void *ctx, const char *coll, const char *field,
		       struct mql_error *err);
	int (*open)(void *ctx, const char *coll, const uint8_t *filter,
		    uint32_t len, void **rd, struct mql_error *err);
	int (*next)(void *rd, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err);
	void (*close)(void *rd);
};

/* mql_agg_set_foreign - the reader of the cursor's $lookup stages (copied),
 * before its first mql_agg_next. */
void mql_agg_set_foreign(struct mql_agg_cursor *c,
			 const struct mql_agg_foreign *f);

/* mql_pipeline_lookup - the i-th $lookup stage (i from 0) of stages [from,
 * nstages): true with its from and foreignField (NULL for a pipeline
 * without one; valid until
 * mql_pipeline_free) and its place among the user's stages; false when
 * there is no such stage.  For explain. */
bool mql_pipeline_lookup(const struct mql_pipeline *p, size_t from, size_t i,
			 const char **coll, const char **field, size_t *stage);

/* mql_agg_next - the next result: 1 with *doc, *len (valid until the next
 * call or mql_agg_close), 0 at the end, -1 with err set.  After -1 or 0
 * every further call returns the same. */
int mql_agg_next(struct mql_agg_cursor *c, const uint8_t **doc, uint32_t *len,
		 struct mql_error *err);

/* mql_agg_mem - the bytes the cursor's stages hold now (for metrics). */
size_t mql_agg_mem(const struct mql_agg_cursor *c);

void mql_agg_close(struct mql_agg_cursor *c);

#endif
