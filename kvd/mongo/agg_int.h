/* agg_int.h - what the files of the aggregation executor share (agg.c
 * compiles stages, agg_run.c runs them, agg_group.c is $group,
 * agg_lookup.c $lookup): the
 * compiled stages and the running state of one stage in a cursor. */
#ifndef KVD_MONGO_AGG_INT_H
#define KVD_MONGO_AGG_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_agg.h"
#include "mql_expr.h"
#include "mql_path.h"
#include "mql_project.h"

enum agg_kind {
	AG_MATCH,
	AG_PROJECT, /* $project $addFields $set $unset */
	AG_SORT,
	AG_SKIP,
	AG_LIMIT,
	AG_COUNT,
	AG_GROUP,
	AG_UNWIND,
	AG_LOOKUP,
};

enum agg_acc_op {
	ACC_SUM,
	ACC_AVG,
	ACC_MIN,
	ACC_MAX,
	ACC_FIRST,
	ACC_LAST,
	ACC_PUSH,
	ACC_ADDTOSET,
	ACC_COUNT,
};

struct agg_acc {
	char *name; /* output field */
	enum agg_acc_op op;
	struct mql_expr *arg;
};

struct agg_group {
	struct mql_expr *id;
	struct agg_acc *acc;
	size_t nacc;
	/* _id is a field path "$f": the order {f: 1} that lets the group
	 * stream (its spec, owned), or NULL */
	struct mql_sort *order;
	uint8_t *order_bson;
	uint32_t order_len;
	/* the fields its expressions read, as a projection {f: 1, ..., _id:
	 * 0} (a store may give only those), or NULL: the whole document, _id,
	 * or none (reads_none: a group of constants, which only counts) */
	struct mql_project *reads;
	bool reads_none;
};

/* $lookup: the equality form, the concise correlated form (equality
 * then a pipeline over the matches), or a pipeline over the whole
 * collection (uncorrelated: no let). */
struct agg_lookup {
	char *from;		  /* collection, same database */
	bool eq;		  /* localField and foreignField given */
	struct mql_pipeline *sub; /* or NULL */
	char *foreign;		  /* foreignField, dotted (eq) */
	struct mql_path fpath;	  /* foreignField */
	struct mql_path local;	  /* localField */
	struct mql_path as;
};

struct agg_stage {
	enum agg_kind kind;
	size_t user; /* index of the stage the user wrote */
	const uint8_t
	    *arg; /* the stage's argument, inside the pipeline's copy */
	uint32_t arg_len;
	struct mql_match *match;
	struct mql_project *proj;
	struct mql_sort *sort;
	int64_t topk; /* $sort: keep this many (-1: all) */
	int64_t n;    /* $skip, $limit */
	char *name;   /* $count's field */
	struct agg_group group;
	struct mql_path path, index; /* $unwind */
	bool has_index, preserve;
	struct agg_lookup *lookup;
};

struct mql_pipeline {
	uint8_t *bson; /* the user's array, which expressions point into */
	uint32_t len;
	struct agg_stage *st;
	size_t n, nuser;
	size_t sort_mem, group_mem, lookup_mem;
};

/* ---- running (agg_run.c, agg_group.c) ------------------------------ */

/* Pull the next document from the stage below stage i (or the source):
 * 1 with *doc, 0 at the end, -1 with err set. */
int agg_pull(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
	     uint32_t *len, struct mql_error *err);

struct group_run;

/* $group: consume every input of stage i (0), or what there is until the
 * source pauses (MQL_AGG_PAUSE: *out keeps the groups so far, and the
 * next call goes on); then emit one group per call into out.  Memory
 * past limit fails with 292. */
int agg_group_run(struct mql_agg_cursor *c, size_t i,
		  const struct agg_group *spec, struct group_run **g,
		  size_t limit, size_t *mem, struct mql_error *err);
int agg_group_emit(struct group_run *g, const struct agg_group *spec,
		   bson_t *out, struct mql_error *err);
void agg_group_free(struct group_run *g);

/* The pieces of a run, for the streaming $group (agg_group_stream.c): a
 * new empty run; one document added to it (memory growth added to *mem);
 * the key of its first group; 292's error. */
struct group_run *agg_group_new(const struct agg_group *spec);
int agg_group_add(struct group_run *g, const struct agg_group *spec,
		  const uint8_t *doc, uint32_t len, size_t *mem,
		  struct mql_error *err);
bool agg_group_first_key(const struct group_run *g, bson_value_t *v);
int agg_group_mem_fail(struct mql_error *err);

/* A $group fed in the order of its _id (agg_group_stream.c): the next
 * group, emitted as soon as the key changes, so that it holds one group
 * at a time (and the groups of array keys, which an order does not keep
 * together, until the end).  *gs made at the first call. */
struct group_stream;
int agg_group_stream(struct mql_agg_cursor *c, size_t i,
		     const struct agg_group *spec, struct group_stream **gs,
		     size_t limit, size_t *mem, bson_t *out,
		     struct mql_error *err);
void agg_group_stream_free(struct group_stream *gs);

int agg_group_compile(struct agg_group *g, const bson_value_t *spec,
		      struct mql_error *err);
void agg_group_spec_free(struct agg_group *g);

int agg_too_large(struct mql_error *err);

/* agg_set_path - copy doc into out with the value at components i.. of p
 * set to v (NULL: removed), making documents on the way as MongoDB's
 * setNestedField.  false when out would pass libbson's limit. */
bool agg_set_path(const uint8_t *doc, uint32_t len, const struct mql_path *p,
		  size_t i, const bson_value_t *v, bson_t *out);

/* ---- $lookup (agg_lookup.c) ----------------------------------------- */

struct lookup_run;

int agg_lookup_compile(struct agg_stage *s, const bson_value_t *spec,
		       struct mql_error *err);
void agg_lookup_spec_free(struct agg_lookup *l);

/* The next output of the $lookup stage i: its input with the `as` array
 * set, built in out.  *lr is the stage's state (made at the first call),
 * *mem the bytes it holds (limit: 292 past it). */
int agg_lookup_next(struct mql_agg_cursor *c, size_t i,
		    const struct agg_lookup *spec, struct lookup_run **lr,
		    size_t limit, size_t *mem, bson_t *out, const uint8_t **doc,
		    uint32_t *len, struct mql_error *err);
void agg_lookup_free(struct lookup_run *lr);

/* The foreign collection held (agg_lookup_held.c): its documents added
 * one at a time as a read of the whole collection gives them (each
 * filed by the hashes of its foreignField values; 292 past limit), then
 * sealed.  find calls hit for each held document, in the collection's
 * order, that m matches among those filed under a value of vals (an
 * array of the local values). */
struct lookup_held;
typedef int (*agg_lookup_hit)(void *ctx, const uint8_t *doc, uint32_t len,
			      struct mql_error *err);
struct lookup_held *agg_lookup_held_new(void);
int agg_lookup_held_add(struct lookup_held *h, const struct agg_lookup *l,
			const uint8_t *d, uint32_t n, size_t limit, size_t *mem,
			struct mql_error *err);
void agg_lookup_held_seal(struct lookup_held *h);
int agg_lookup_held_find(struct lookup_held *h, const bson_t *vals,
			 const struct mql_match *m, agg_lookup_hit hit,
			 void *ctx, struct mql_error *err);
void agg_lookup_held_free(struct lookup_held *h);

/* agg_pause_like - sub pauses as c does (mql_agg_set_pause), for a
 * pipeline a stage of c runs. */
void agg_pause_like(struct mql_agg_cursor *sub, const struct mql_agg_cursor *c);

/* The cursor's foreign reader (NULL: none given). */
const struct mql_agg_foreign *agg_foreign(const struct mql_agg_cursor *c);

#endif
