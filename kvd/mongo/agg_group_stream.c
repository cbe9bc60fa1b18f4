/* agg_group_stream.c - a $group whose input comes in the order of its _id
 * (the caller read it through an index on that field: mql_agg.h's
 * mql_agg_stream_group), emitting each group as soon as the key changes:
 * it holds one group at a time instead of all of them, and gives its first
 * result after reading one group's documents.
 *
 * Equal keys are together in that order only when they are not arrays:
 * the group of an array key ({_id: "$tags"} over tags: [1, 2]) is the
 * array itself, but the index places its document by an element.  Those
 * groups are kept aside in an ordinary $group run, counted against the
 * memory limit, and emitted after the streamed ones.  A key lower than the
 * current one means the input was not in order after all: an error
 * rather than a group given twice. */
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_value.h"

struct group_stream {
	struct group_run *cur;	/* the current key's group, or NULL */
	struct group_run *side; /* the groups of array keys, or NULL */
	size_t cur_mem, side_mem;
	bool ended;
	bson_t *scratch; /* a key evaluated */
};

void agg_group_stream_free(struct group_stream *gs)
{
	if (!gs)
		return;
	agg_group_free(gs->cur);
	agg_group_free(gs->side);
	if (gs->scratch)
		bson_destroy(gs->scratch);
	bson_free(gs);
}

/* The _id of doc (null when missing) into *v: 0, or -1 too large. */
static int key_of(struct group_stream *gs, const struct agg_group *spec,
		  const uint8_t *doc, uint32_t len, bson_value_t *v)
{
	bson_iter_t it;
	int rc;

	bson_reinit(gs->scratch);
	rc = mql_expr_eval(spec->id, doc, len, gs->scratch, "k", 1);
	if (rc < 0)
		return -1;
	memset(v, 0, sizeof(*v));
	v->value_type = BSON_TYPE_NULL;
	if (rc > 0 && bson_iter_init(&it, gs->scratch) && bson_iter_next(&it))
		*v = *bson_iter_value(&it);
	return 0;
}

static int add(struct group_run **g, size_t *gmem, const struct agg_group *spec,
	       const uint8_t *doc, uint32_t len, struct mql_error *err)
{
	if (!*g)
		*g = agg_group_new(spec);
	return agg_group_add(*g, spec, doc, len, gmem, err);
}

/* Emit the current group into out and drop it. */
static int emit_cur(struct group_stream *gs, const struct agg_group *spec,
		    bson_t *out, struct mql_error *err)
{
	int rc;

	bson_reinit(out);
	rc = agg_group_emit(gs->cur, spec, out, err);
	agg_group_free(gs->cur);
	gs->cur = NULL;
	gs->cur_mem = 0;
	return rc;
}

/* One input document: 1 when it closed the current group (emitted into
 * out), 0 when it joined a group, -1 with err. */
static int take(struct group_stream *gs, const struct agg_group *spec,
		const uint8_t *doc, uint32_t len, bson_t *out,
		struct mql_error *err)
{
	bson_value_t k, ck;
	int cmp, rc = 0;

	if (key_of(gs, spec, doc, len, &k) < 0)
		return agg_too_large(err);
	if (k.value_type == BSON_TYPE_ARRAY)
		return add(&gs->side, &gs->side_mem, spec, doc, len, err);
	if (gs->cur && agg_group_first_key(gs->cur, &ck) &&
	    !mql_value_eq(&ck, &k)) {
		cmp = mql_value_cmp(&k, &ck);
		if (cmp < 0)
			return mql_error_set(err, MQL_InternalError,
					     "$group's input was not in the "
					     "order of its _id");
		rc = emit_cur(gs, spec, out, err);
		if (rc < 0)
			return -1;
	}
	if (add(&gs->cur, &gs->cur_mem, spec, doc, len, err) < 0)
		return -1;
	return rc;
}

int agg_group_stream(struct mql_agg_cursor *c, size_t i,
		     const struct agg_group *spec, struct group_stream **gsp,
		     size_t limit, size_t *mem, bson_t *out,
		     struct mql_error *err)
{
	struct group_stream *gs = *gsp;
	const uint8_t *doc;
	uint32_t len;
	int rc;

	if (!gs) {
		gs = *gsp = bson_malloc0(sizeof(*gs));
		gs->scratch = bson_new();
	}
	while (!gs->ended) {
		rc = agg_pull(c, i, &doc, &len, err);
		if (rc < 0)
			return -1;
		if (rc == MQL_AGG_PAUSE)
			return rc;
		if (rc == 0) {
			gs->ended = true;
			if (gs->cur)
				return emit_cur(gs, spec, out, err);
			break;
		}
		rc = take(gs, spec, doc, len, out, err);
		*mem = gs->cur_mem + gs->side_mem;
		if (rc < 0)
			return -1;
		if (*mem > limit)
			return agg_group_mem_fail(err);
		if (rc > 0)
			return 1;
	}
	if (!gs->side)
		return 0;
	bson_reinit(out);
	return agg_group_emit(gs->side, spec, out, err);
}
