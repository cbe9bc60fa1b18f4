/* agg.c - the aggregation pipeline compiled (mql_agg.h): each stage
 * document checked as MongoDB checks it and turned into the stages
 * agg_run.c runs; what a planner may take over from the front. */
#include <math.h>
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_value.h"

static struct agg_stage *new_stage(struct mql_pipeline *p, enum agg_kind kind,
				   size_t *cap)
{
	struct agg_stage *s;

	mql_grow((void **)&p->st, cap, p->n, 1, sizeof(*p->st));
	s = &p->st[p->n++];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->user = p->nuser;
	s->topk = -1;
	return s;
}

static void set_arg(struct agg_stage *s, const bson_value_t *v)
{
	if (v->value_type == BSON_TYPE_DOCUMENT ||
	    v->value_type == BSON_TYPE_ARRAY) {
		s->arg = v->value.v_doc.data;
		s->arg_len = v->value.v_doc.data_len;
	}
}

/* ---- stage by stage ------------------------------------------------ */

struct parse {
	struct mql_pipeline *p;
	size_t *cap;
	const bson_value_t *v;
	struct mql_error *err;
};

static struct agg_stage *add(struct parse *x, enum agg_kind kind)
{
	struct agg_stage *s = new_stage(x->p, kind, x->cap);

	set_arg(s, x->v);
	return s;
}

static bool is_doc(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_DOCUMENT;
}

static int p_match(struct parse *x)
{
	struct agg_stage *s;

	if (!is_doc(x->v))
		return mql_error_set(x->err, 15959,
				     "the match filter must be an expression "
				     "in an object");
	s = add(x, AG_MATCH);
	return mql_match_compile(s->arg, s->arg_len, &s->match, x->err);
}

static int p_proj(struct parse *x, enum mql_project_kind kind, int code,
		  const char *msg)
{
	struct agg_stage *s;

	if (!is_doc(x->v))
		return mql_error_set(x->err, code, "%s", msg);
	s = add(x, AG_PROJECT);
	return mql_project_compile(s->arg, s->arg_len, kind, &s->proj, x->err);
}

static int p_project(struct parse *x)
{
	return p_proj(x, MQL_PROJECT_AGG, 15969,
		      "$project specification must be an object");
}

static int p_addfields(struct parse *x)
{
	return p_proj(x, MQL_PROJECT_ADD, 40272,
		      "$addFields specification stage must be an object");
}

/* $unset: a path or an array of paths, made a {path: 0 ...} exclusion. */
static int p_unset(struct parse *x)
{
	const bson_value_t *v = x->v;
	bson_t spec = BSON_INITIALIZER;
	struct agg_stage *s;
	bson_iter_t it;
	int rc = 0;

	if (v->value_type == BSON_TYPE_UTF8) {
		bson_append_int32(&spec, v->value.v_utf8.str,
				  (int)v->value.v_utf8.len, 0);
	} else if (v->value_type == BSON_TYPE_ARRAY) {
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		while (rc == 0 && bson_iter_next(&it)) {
			uint32_t l;
			const char *k;

			if (!BSON_ITER_HOLDS_UTF8(&it)) {
				rc = mql_error_set(x->err, 31120,
						   "$unset specification must "
						   "be a string or an array "
						   "containing only string "
						   "values");
				break;
			}
			k = bson_iter_utf8(&it, &l);
			bson_append_int32(&spec, k, (int)l, 0);
		}
		if (rc == 0 && bson_count_keys(&spec) == 0)
			rc = mql_error_set(x->err, 31119,
					   "$unset specification must be a "
					   "string or an array with at least "
					   "one field");
	} else {
		rc = mql_error_set(x->err, 31002,
				   "$unset specification must be a string or "
				   "an array");
	}
	if (rc == 0) {
		s = add(x, AG_PROJECT);
		rc = mql_project_compile(bson_get_data(&spec), spec.len,
					 MQL_PROJECT_UNSET, &s->proj, x->err);
	}
	bson_destroy(&spec);
	return rc;
}

static int p_sort(struct parse *x)
{
	struct agg_stage *s;

	if (!is_doc(x->v))
		return mql_error_set(x->err, 15973,
				     "the $sort key specification must be an "
				     "object");
	if (x->v->value.v_doc.data_len <= 5)
		return mql_error_set(x->err, 15976,
				     "$sort stage must have at least one sort "
				     "key");
	s = add(x, AG_SORT);
	return mql_sort_compile(s->arg, s->arg_len, &s->sort, x->err);
}

/* An integral number as MongoDB's numberLong() reads it. */
static int64_t as_long(const bson_value_t *v)
{
	double d;

	switch (v->value_type) {
	case BSON_TYPE_INT32: return v->value.v_int32;
	case BSON_TYPE_INT64: return v->value.v_int64;
	default:
		d = mql_number_double(v);
		if (isnan(d))
			return 0;
		if (d >= 9.2233720368547758e18)
			return INT64_MAX;
		if (d <= -9.2233720368547758e18)
			return INT64_MIN;
		return (int64_t)d;
	}
}

static int p_skip(struct parse *x)
{
	int64_t n;

	if (!mql_is_number(x->v))
		return mql_error_set(x->err, 15972,
				     "Argument to $skip must be a number not "
				     "a %s",
				     mql_type_name(x->v->value_type));
	n = as_long(x->v);
	if (n < 0)
		return mql_error_set(x->err, 15956,
				     "Argument to $skip cannot be negative");
	add(x, AG_SKIP)->n = n;
	return 0;
}

static int p_limit(struct parse *x)
{
	int64_t n;

	if (!mql_is_number(x->v))
		return mql_error_set(x->err, 15957,
				     "the limit must be specified as a number");
	n = as_long(x->v);
	if (n <= 0)
		return mql_error_set(x->err, 15958,
				     "the limit must be positive");
	add(x, AG_LIMIT)->n = n;
	return 0;
}

static int p_count(struct parse *x)
{
	const bson_value_t *v = x->v;
	const char *s = v->value.v_utf8.str;

	if (v->value_type != BSON_TYPE_UTF8)
		return mql_error_set(x->err, 40156,
				     "the count field must be a non-empty "
				     "string");
	if (v->value.v_utf8.len == 0)
		return mql_error_set(x->err, 40157,
				     "the count field must be a non-empty "
				     "string");
	if (s[0] == '$')
		return mql_error_set(x->err, 40158,
				     "the count field cannot be a $-prefixed "
				     "path");
	if (memchr(s, '.', v->value.v_utf8.len) ||
	    strlen(s) != v->value.v_utf8.len)
		return mql_error_set(x->err, 40160,
				     "the count field cannot contain '.'");
	add(x, AG_COUNT)->name = bson_strdup(s);
	return 0;
}

static int p_group(struct parse *x)
{
	if (!is_doc(x->v))
		return mql_error_set(x->err, 15947,
				     "a group's fields must be specified in an "
				     "object");
	return agg_group_compile(&add(x, AG_GROUP)->group, x->v, x->err);
}

/* $sortByCount: expr is {$group: {_id: expr, count: {$sum: 1}}} then
 * {$sort: {count: -1}}. */
static int p_sortbycount(struct parse *x)
{
	static const bson_value_t one = {.value_type = BSON_TYPE_INT32,
					 .value.v_int32 = 1};
	const bson_value_t *v = x->v;
	bson_t spec = BSON_INITIALIZER;
	struct agg_stage *s;
	int rc;

	if (v->value_type == BSON_TYPE_DOCUMENT) {
		bson_iter_t it;

		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		if (!bson_iter_next(&it) || bson_iter_key(&it)[0] != '$')
			return mql_error_set(
			    x->err, 40147,
			    "the sortByCount field must be defined as a "
			    "$-prefixed path or an expression inside an "
			    "object");
	} else if (v->value_type == BSON_TYPE_UTF8) {
		if (v->value.v_utf8.str[0] != '$')
			return mql_error_set(
			    x->err, 40148,
			    "the sortByCount field must be defined as a "
			    "$-prefixed path or an expression inside an "
			    "object");
	} else {
		return mql_error_set(x->err, 40149,
				     "the sortByCount field must be specified "
				     "as a string or as an object");
	}
	s = add(x, AG_GROUP);
	s->group.acc = bson_malloc0(sizeof(*s->group.acc));
	s->group.nacc = 1;
	s->group.acc[0].name = bson_strdup("count");
	s->group.acc[0].op = ACC_SUM;
	if (mql_expr_compile(v, &s->group.id, x->err) < 0 ||
	    mql_expr_compile(&one, &s->group.acc[0].arg, x->err) < 0)
		return -1;
	s = add(x, AG_SORT);
	s->arg = NULL;
	BSON_APPEND_INT32(&spec, "count", -1);
	rc = mql_sort_compile(bson_get_data(&spec), spec.len, &s->sort, x->err);
	bson_destroy(&spec);
	return rc;
}

/* "$a.b" -> the path a.b (a $unwind path). */
static int unwind_path(struct parse *x, const bson_value_t *v,
		       struct mql_path *out)
{
	if (v->value_type != BSON_TYPE_UTF8)
		return mql_error_set(x->err, 28808,
				     "expected a string as the path for "
				     "$unwind stage, got %s",
				     mql_type_name(v->value_type));
	if (v->value.v_utf8.len < 2 || v->value.v_utf8.str[0] != '$')
		return mql_error_set(x->err, 28818,
				     "path option to $unwind stage should be "
				     "prefixed with a '$': %s",
				     v->value.v_utf8.str);
	return mql_path_parse(v->value.v_utf8.str + 1, v->value.v_utf8.len - 1,
			      out, x->err);
}

static int unwind_option(struct parse *x, struct agg_stage *s, bson_iter_t *it,
			 bool *have_path)
{
	const char *k = bson_iter_key(it);
	const bson_value_t *o = bson_iter_value(it);

	if (strcmp(k, "path") == 0) {
		*have_path = true;
		return unwind_path(x, o, &s->path);
	}
	if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
		if (o->value_type != BSON_TYPE_BOOL)
			return mql_error_set(x->err, 28809,
					     "expected a boolean for the "
					     "preserveNullAndEmptyArrays "
					     "option to $unwind stage, got %s",
					     mql_type_name(o->value_type));
		s->preserve = o->value.v_bool;
		return 0;
	}
	if (strcmp(k, "includeArrayIndex") == 0) {
		if (o->value_type != BSON_TYPE_UTF8 || o->value.v_utf8.len == 0)
			return mql_error_set(x->err, 28810,
					     "expected a non-empty string for "
					     "the includeArrayIndex  option to "
					     "$unwind stage, got %s",
					     mql_type_name(o->value_type));
		if (o->value.v_utf8.str[0] == '$')
			return mql_error_set(x->err, 28822,
					     "includeArrayIndex option to "
					     "$unwind stage should not be "
					     "prefixed with a '$': %s",
					     o->value.v_utf8.str);
		s->has_index = true;
		return mql_path_parse(o->value.v_utf8.str, o->value.v_utf8.len,
				      &s->index, x->err);
	}
	return mql_error_set(x->err, 28811,
			     "unrecognized option to $unwind stage: %s", k);
}

static int p_unwind(struct parse *x)
{
	const bson_value_t *v = x->v;
	struct agg_stage *s;
	bool have_path = false;
	bson_iter_t it;

	if (v->value_type == BSON_TYPE_UTF8)
		return unwind_path(x, v, &add(x, AG_UNWIND)->path);
	if (!is_doc(v))
		return mql_error_set(x->err, 15981,
				     "expected either a string or an object as "
				     "specification for $unwind stage, got %s",
				     mql_type_name(v->value_type));
	s = add(x, AG_UNWIND);
	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		if (unwind_option(x, s, &it, &have_path) < 0)
			return -1;
	}
	if (!have_path)
		return mql_error_set(x->err, 28812,
				     "no path specified to $unwind stage");
	return 0;
}

static int p_lookup(struct parse *x)
{
	return agg_lookup_compile(add(x, AG_LOOKUP), x->v, x->err);
}

static const struct {
	const char *name;
	int (*parse)(struct parse *x);
} stages[] = {
    {"$match", p_match},
    {"$project", p_project},
    {"$addFields", p_addfields},
    {"$set", p_addfields},
    {"$unset", p_unset},
    {"$sort", p_sort},
    {"$skip", p_skip},
    {"$limit", p_limit},
    {"$count", p_count},
    {"$group", p_group},
    {"$sortByCount", p_sortbycount},
    {"$unwind", p_unwind},
    {"$lookup", p_lookup},
};

/* MongoDB's stages that this executor does not run. */
static const char *const unsupported[] = {
    "$graphLookup",
    "$facet",
    "$bucket",
    "$bucketAuto",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
    "$out",
    "$merge",
    "$sample",
    "$geoNear",
    "$unionWith",
    "$setWindowFields",
    "$densify",
    "$fill",
    "$documents",
    "$indexStats",
    "$collStats",
    "$planCacheStats",
    "$changeStream",
    "$currentOp",
    "$listSessions",
    "$listLocalSessions",
    "$search",
    "$searchMeta",
    "$vectorSearch",
    "$changeStreamSplitLargeEvent",
    "$listSearchIndexes",
    "$shardedDataDistribution",
    "$listSampledQueries",
};

static int parse_stage(struct mql_pipeline *p, size_t *cap,
		       const bson_value_t *doc, struct mql_error *err)
{
	bson_iter_t it;
	const char *name;
	struct parse x = {p, cap, NULL, err};

	if (doc->value_type != BSON_TYPE_DOCUMENT)
		return mql_error_set(
		    err, MQL_TypeMismatch,
		    "Each element of the 'pipeline' array must "
		    "be an object");
	bson_iter_init_from_data(&it, doc->value.v_doc.data,
				 doc->value.v_doc.data_len);
	if (!bson_iter_next(&it))
		goto shape;
	name = bson_iter_key(&it);
	x.v = bson_iter_value(&it);
	if (bson_iter_next(&it))
		goto shape;
	for (size_t i = 0; i < sizeof(stages) / sizeof(*stages); i++) {
		if (strcmp(name, stages[i].name) == 0)
			return stages[i].parse(&x);
	}
	for (size_t i = 0; i < sizeof(unsupported) / sizeof(*unsupported);
	     i++) {
		if (strcmp(name, unsupported[i]) == 0)
			return mql_error_set(err, MQL_NotImplemented,
					     "the %s stage is not supported",
					     name);
	}
	return mql_error_set(err, 40324,
			     "Unrecognized pipeline stage name: '%s'", name);
shape:
	return mql_error_set(err, 40323,
			     "A pipeline stage specification object must "
			     "contain exactly one field.");
}

/* A $sort that a $limit follows (maybe after a $skip) keeps only the
 * first skip + limit documents. */
static void fuse_topk(struct mql_pipeline *p)
{
	for (size_t i = 0; i + 1 < p->n; i++) {
		struct agg_stage *s = &p->st[i], *n = &p->st[i + 1];

		if (s->kind != AG_SORT)
			continue;
		if (n->kind == AG_LIMIT)
			s->topk = n->n;
		else if (n->kind == AG_SKIP && i + 2 < p->n &&
			 p->st[i + 2].kind == AG_LIMIT)
			s->topk = n->n > INT64_MAX - p->st[i + 2].n
				      ? -1
				      : n->n + p->st[i + 2].n;
	}
}

void mql_pipeline_free(struct mql_pipeline *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		struct agg_stage *s = &p->st[i];

		mql_match_free(s->match);
		mql_project_free(s->proj);
		mql_sort_free(s->sort);
		bson_free(s->name);
		agg_group_spec_free(&s->group);
		mql_path_free(&s->path);
		mql_path_free(&s->index);
		agg_lookup_spec_free(s->lookup);
	}
	bson_free(p->st);
	bson_free(p->bson);
	bson_free(p);
}

int mql_pipeline_compile(const uint8_t *stages_bson, uint32_t len,
			 const struct mql_agg_opts *opts,
			 struct mql_pipeline **out, struct mql_error *err)
{
	struct mql_pipeline *p;
	size_t cap = 0;
	bson_iter_t it;

	*out = NULL;
	if (mql_bson_check(stages_bson, len, MQL_MAX_INPUT_SIZE,
			   MQL_MAX_INPUT_DEPTH, err) < 0)
		return -1;
	p = bson_malloc0(sizeof(*p));
	p->bson = bson_malloc(len);
	memcpy(p->bson, stages_bson, len);
	p->len = len;
	p->sort_mem =
	    opts && opts->sort_mem ? opts->sort_mem : MQL_AGG_SORT_MEM_DEFAULT;
	p->group_mem = opts && opts->group_mem ? opts->group_mem
					       : MQL_AGG_GROUP_MEM_DEFAULT;
	p->lookup_mem = opts && opts->lookup_mem ? opts->lookup_mem
						 : MQL_AGG_LOOKUP_MEM_DEFAULT;
	bson_iter_init_from_data(&it, p->bson, len);
	while (bson_iter_next(&it)) {
		if (p->nuser == MQL_AGG_MAX_STAGES) {
			mql_error_set(err, 7749501,
				      "Pipeline length must be no longer than "
				      "%d stages.",
				      MQL_AGG_MAX_STAGES);
			mql_pipeline_free(p);
			return -1;
		}
		if (parse_stage(p, &cap, bson_iter_value(&it), err) < 0) {
			mql_pipeline_free(p);
			return -1;
		}
		p->nuser++;
	}
	fuse_topk(p);
	*out = p;
	return 0;
}

size_t mql_pipeline_nstages(const struct mql_pipeline *p)
{
	return p->nuser;
}

void mql_pipeline_lead(const struct mql_pipeline *p, struct mql_agg_lead *out)
{
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	out->sort_limit = -1;
	if (i < p->n && p->st[i].kind == AG_MATCH) {
		out->match = p->st[i].match;
		out->match_bson = p->st[i].arg;
		out->match_len = p->st[i].arg_len;
		out->after_match = p->st[i].user + 1;
		i++;
	}
	out->count_only =
	    i < p->n &&
	    (p->st[i].kind == AG_COUNT ||
	     (p->st[i].kind == AG_GROUP && p->st[i].group.reads_none));
	if (i < p->n && p->st[i].kind == AG_GROUP)
		out->reads = p->st[i].group.reads;
	/* a $group by a field whose order the caller may read in */
	if (i < p->n && p->st[i].kind == AG_GROUP && p->st[i].group.order) {
		out->group_order = p->st[i].group.order;
		out->group_order_bson = p->st[i].group.order_bson;
		out->group_order_len = p->st[i].group.order_len;
	}
	/* a $sortByCount's $sort is not the user's stage: arg is NULL */
	if (i < p->n && p->st[i].kind == AG_SORT && p->st[i].arg) {
		out->sort = p->st[i].sort;
		out->sort_bson = p->st[i].arg;
		out->sort_len = p->st[i].arg_len;
		out->after_sort = p->st[i].user + 1;
		out->sort_limit = p->st[i].topk;
	}
}

bool mql_pipeline_lookup(const struct mql_pipeline *p, size_t from, size_t i,
			 const char **coll, const char **field, size_t *stage)
{
	for (size_t k = 0; k < p->n; k++) {
		const struct agg_stage *s = &p->st[k];

		if (s->kind != AG_LOOKUP || s->user < from || i-- > 0)
			continue;
		*coll = s->lookup->from;
		*field = s->lookup->foreign;
		*stage = s->user;
		return true;
	}
	return false;
}
