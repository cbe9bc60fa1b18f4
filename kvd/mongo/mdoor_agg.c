/* mdoor_agg.c - the aggregate command: the pipeline compiled by mql_agg;
 * its leading $match (and a $sort first or right after it) given to the
 * store's scan, which may use an index for them; the remaining stages run
 * by the door over the scan's documents in a cursor, bounded as
 * mql_agg.h says ($lookup reading other collections through
 * mdoor_lookup.c).  explain: true answers MongoDB's shape of a pipeline's
 * plan: a $cursor stage with the store's plan of the leading $match, then
 * the stages the door runs, each $lookup with the index it reads by.
 * Collection-less aggregates (aggregate: 1, $currentOp, $documents) are
 * refused with 238 NotImplemented. */
#include <stdio.h>
#include <string.h>

#include "mdoor_int.h"

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

enum {
	A_PIPE,
	A_CURSOR,
	A_EXPLAIN,
	A_DISK,
	A_BYPASS,
	A_COLL,
	A_HINT,
	A_LET,
	A_N
};

static const struct mdoor_arg agg_spec[A_N] = {
    [A_PIPE] = {"pipeline", MDOOR_T_ARRAY, true},
    [A_CURSOR] = {"cursor", MDOOR_T_OBJECT, false},
    [A_EXPLAIN] = {"explain", MDOOR_T_BOOLISH, false},
    [A_DISK] = {"allowDiskUse", MDOOR_T_BOOLISH, false},
    [A_BYPASS] = {"bypassDocumentValidation", MDOOR_T_BOOLISH, false},
    [A_COLL] = {"collation", MDOOR_T_OBJECT, false},
    [A_HINT] = {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING, false},
    [A_LET] = {"let", MDOOR_T_OBJECT, false},
};

/* cursor: {batchSize: n}: the first batch's size (101 by default). */
static int batch_size(struct mdoor_req *r, const bson_iter_t *cur,
		      int64_t *batch, struct mql_error *err)
{
	bson_iter_t it;

	*batch = 101;
	if (!mdoor_has(cur) || !bson_iter_recurse(cur, &it))
		return 0;
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "batchSize"))
			return mdoor_err(err, MDOOR_IDLUnknownField,
					 "BSON field 'cursor.%s' is an unknown "
					 "field.",
					 bson_iter_key(&it));
		if (mdoor_arg_int64(r, &it, batch, err))
			return -1;
		if (*batch < 0)
			return mdoor_err(err, 51024,
					 "BSON field 'batchSize' value must be "
					 ">= 0, actual value '%lld'",
					 (long long)*batch);
	}
	return 0;
}

static int refuse(struct mdoor_req *r, const mdoor_av *a, struct mql_error *err)
{
	bson_iter_t it;

	mdoor_cmd_value(r, &it);
	if (!BSON_ITER_HOLDS_UTF8(&it))
		return mdoor_err(err, MQL_NotImplemented,
				 "aggregate without a collection (aggregate: "
				 "1) is not supported by kvd");
	if (!mdoor_has(&a[A_CURSOR].it) && !mdoor_arg_bool(&a[A_EXPLAIN].it))
		return mdoor_err(err, MQL_FailedToParse,
				 "The 'cursor' option is required, except for "
				 "aggregate with the explain argument");
	if (mdoor_has(&a[A_LET].it))
		return mdoor_err(err, MQL_NotImplemented,
				 "aggregate's 'let' option is not supported "
				 "by kvd");
	if (mdoor_has(&a[A_COLL].it)) {
		bson_iter_t c;

		if (!bson_iter_recurse(&a[A_COLL].it, &c) ||
		    !bson_iter_find(&c, "locale") ||
		    !BSON_ITER_HOLDS_UTF8(&c) ||
		    strcmp(bson_iter_utf8(&c, NULL), "simple"))
			return mdoor_err(err, MQL_NotImplemented,
					 "collations are not supported by kvd");
	}
	return 0;
}

/* The scan the pipeline reads: its leading $match and $sort, if any. */
static int open_source(struct mdoor_req *r, const char *coll, const mdoor_av *a,
		       struct mdoor_cursor_src *src, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mql_agg_lead lead;
	struct mdoor_query q = {0};
	struct mdoor_scan_info info = {0};

	mql_pipeline_lead(src->pipe, &lead);
	q.db = r->db;
	q.coll = coll;
	if (lead.match) {
		q.filter = lead.match;
		q.filter_bson = lead.match_bson;
		q.filter_len = lead.match_len;
	} else {
		if (mql_match_compile(empty_doc, 5, &src->filter, err))
			return -1;
		q.filter = src->filter;
		q.filter_bson = empty_doc;
		q.filter_len = 5;
	}
	q.sort = lead.sort;
	q.sort_bson = lead.sort_bson;
	q.sort_len = lead.sort_len;
	q.want = lead.sort ? lead.sort_limit : -1;
	if (!lead.sort && lead.group_order) { /* $group by an index's field */
		q.sort = lead.group_order;
		q.sort_bson = lead.group_order_bson;
		q.sort_len = lead.group_order_len;
	}
	mdoor_arg_hint(&a[A_HINT].it, &q.hint, &q.hint_len, &q.hint_name);
	q.count_only = lead.count_only;
	q.proj = lead.reads;
	if (d->store.scan(d->store.ctx, &q, &src->scan, &info, err))
		return -1;
	src->stream_group = !lead.sort && lead.group_order && info.sorted;
	src->pipe_from = lead.sort && info.sorted ? lead.after_sort
			 : lead.match		  ? lead.after_match
						  : 0;
	return 0;
}

/* explain's $cursor stage: the store's plan of the leading $match (and
 * the order of a leading $sort, or of a $group that may stream). */
static int explain_cursor(struct mdoor_req *r, const char *coll,
			  const struct mql_agg_lead *lead, bson_t *stages,
			  struct mql_error *err)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	struct mdoor *d = r->mc->d;
	struct mdoor_query q = {.db = r->db, .coll = coll, .want = -1};
	struct mql_match *m = NULL;
	bson_t plan = BSON_INITIALIZER, st, cur, qp, pq;
	char ns[MDOOR_NAME_MAX + MDOOR_DB_MAX];
	int rc;

	q.filter = lead->match;
	q.filter_bson = lead->match ? lead->match_bson : empty;
	q.filter_len = lead->match ? lead->match_len : 5;
	if (!lead->match && mql_match_compile(empty, 5, &m, err))
		return -1;
	if (m)
		q.filter = m;
	q.sort = lead->sort ? lead->sort : lead->group_order;
	q.sort_bson = lead->sort ? lead->sort_bson : lead->group_order_bson;
	q.sort_len = lead->sort ? lead->sort_len : lead->group_order_len;
	q.count_only = lead->count_only;
	q.proj = lead->reads;
	rc = mdoor_plan_of(d, &q, &plan, err);
	if (rc == 0) {
		snprintf(ns, sizeof(ns), "%s.%s", r->db, coll);
		bson_init_static(&pq, q.filter_bson, q.filter_len);
		BSON_APPEND_DOCUMENT_BEGIN(stages, "0", &st);
		BSON_APPEND_DOCUMENT_BEGIN(&st, "$cursor", &cur);
		BSON_APPEND_DOCUMENT_BEGIN(&cur, "queryPlanner", &qp);
		BSON_APPEND_UTF8(&qp, "namespace", ns);
		BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &pq);
		BSON_APPEND_DOCUMENT(&qp, "winningPlan", &plan);
		bson_append_document_end(&cur, &qp);
		bson_append_document_end(&st, &cur);
		bson_append_document_end(stages, &st);
	}
	mql_match_free(m);
	bson_destroy(&plan);
	return rc;
}

/* explain: the stages after the $cursor, as the user wrote them, each
 * $lookup followed by what it reads with. */
static int explain_stages(struct mdoor_req *r, const struct mql_pipeline *pipe,
			  const uint8_t *p, uint32_t plen, size_t from,
			  bson_t *stages, struct mql_error *err)
{
	const char *coll, *field;
	size_t lk = 0, at = SIZE_MAX, n = 1, i = 0;
	bson_iter_t it, one;
	bson_t st;
	char key[16];
	const char *k;

	if (!mql_pipeline_lookup(pipe, from, lk, &coll, &field, &at))
		at = SIZE_MAX;
	bson_iter_init_from_data(&it, p, plen);
	for (; bson_iter_next(&it); i++) {
		if (i < from || !bson_iter_recurse(&it, &one) ||
		    !bson_iter_next(&one))
			continue;
		bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));
		bson_append_document_begin(stages, k, -1, &st);
		bson_append_value(&st, bson_iter_key(&one), -1,
				  bson_iter_value(&one));
		if (i == at) {
			if (mdoor_lookup_explain(r->mc->d, r->db, coll, field,
						 &st, err))
				return -1;
			if (!mql_pipeline_lookup(pipe, from, ++lk, &coll,
						 &field, &at))
				at = SIZE_MAX;
		}
		bson_append_document_end(stages, &st);
	}
	return 0;
}

static int agg_explain(struct mdoor_req *r, const char *coll,
		       const struct mql_pipeline *pipe, const uint8_t *p,
		       uint32_t plen, struct mql_error *err)
{
	struct mql_agg_lead lead;
	bson_t stages;
	int rc;

	mql_pipeline_lead(pipe, &lead);
	BSON_APPEND_UTF8(&r->reply, "explainVersion", "1");
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "stages", &stages);
	rc = explain_cursor(r, coll, &lead, &stages, err);
	if (rc == 0)
		rc = explain_stages(r, pipe, p, plen,
				    lead.match ? lead.after_match : 0, &stages,
				    err);
	bson_append_array_end(&r->reply, &stages);
	return rc;
}

static int cmd_aggregate(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	mdoor_av a[A_N];
	struct mdoor_cursor_src src = {.limit = -1,
				       .max_time_ms = r->max_time_ms};
	struct mdoor_cursor *c;
	const uint8_t *p;
	uint32_t plen;
	const char *coll;
	int64_t batch;

	if (mdoor_args(r, agg_spec, A_N, a, err) || refuse(r, a, err) ||
	    mdoor_coll_arg(r, &coll, err) ||
	    batch_size(r, &a[A_CURSOR].it, &batch, err))
		return -1;
	mdoor_arg_doc(&a[A_PIPE].it, &p, &plen);
	if (mql_pipeline_compile(p, plen, NULL, &src.pipe, err))
		return -1;
	if (mdoor_arg_bool(&a[A_EXPLAIN].it)) {
		int rc = agg_explain(r, coll, src.pipe, p, plen, err);

		mql_pipeline_free(src.pipe);
		return rc;
	}
	if (open_source(r, coll, a, &src, err)) {
		if (src.scan)
			d->store.scan_close(src.scan);
		mql_pipeline_free(src.pipe);
		mql_match_free(src.filter);
		return -1;
	}
	c = mdoor_cursor_new(r->mc, r->db, coll, &src, err);
	if (!c)
		return -1;
	return mdoor_cursor_reply(r, c, batch, true, false, err);
}

const struct mdoor_cmd mdoor_cmds_agg[] = {
    {"aggregate", cmd_aggregate, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
