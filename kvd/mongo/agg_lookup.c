/* agg_lookup.c - $lookup's equality form (mql_agg.h): each input document
 * gets, at its `as` path, the array of the documents of `from` whose
 * foreignField equals a value of its localField, as MongoDB's
 * DocumentSourceLookUp makes them: every value the local path reaches
 * (arrays on the way and at its end traversed), null when it reaches none
 * (so a missing localField joins the foreign documents whose foreignField
 * is null or missing), matched by MongoDB's query equality on the foreign
 * side (an array there matches by any of its elements).
 *
 * Two ways to read `from`, chosen once per cursor by the caller's
 * mql_agg_foreign.indexed: with an index on foreignField, one equality
 * read per input document (the store's planner serves it); without one,
 * the whole collection read once and held, hashed by foreignField
 * (agg_lookup_held.c; its bytes counted against lookup_mem, 292 past it),
 * each input document's filter matched against the documents filed under
 * its values, so that a join of n documents with m reads the foreign
 * collection once rather than n times, and tests few of its documents.
 * The documents of one `as` array are at most 16 MiB + 16 KiB together
 * (4568, as MongoDB), the document made at most 16 MiB (10334).
 *
 * With a pipeline and no let: after the equality, the pipeline runs over
 * each input's matches (held for it, at most lookup_mem bytes: 292) and
 * its results make `as`; without localField and foreignField it runs once
 * over the whole collection and every input gets the same array.  The
 * pipeline's own $sort and $group have their default limits, and its
 * $lookup stages read through the same reader. */
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_match.h"
#include "mql_value.h"

/* ---- compiling ------------------------------------------------------ */

void agg_lookup_spec_free(struct agg_lookup *l)
{
	if (!l)
		return;
	bson_free(l->from);
	bson_free(l->foreign);
	mql_path_free(&l->local);
	mql_path_free(&l->fpath);
	mql_path_free(&l->as);
	mql_pipeline_free(l->sub);
	bson_free(l);
}

/* A field path (not empty: lookup_check saw to it) as MongoDB's FieldPath
 * accepts it, parsed into out. */
static int field_path(const bson_value_t *v, struct mql_path *out,
		      struct mql_error *err)
{
	const char *s = v->value.v_utf8.str;
	size_t len = v->value.v_utf8.len;

	if (strlen(s) != len)
		return mql_error_set(err, 16411,
				     "FieldPath field names may not contain "
				     "'\\0'.");
	for (size_t i = 0; i <= len; i++) {
		bool start = i == 0 || s[i - 1] == '.';

		if (start && (i == len || s[i] == '.'))
			return mql_error_set(err, 15998,
					     "FieldPath field names may not be "
					     "empty strings.");
		if (start && s[i] == '$')
			return mql_error_set(err, 16410,
					     "FieldPath field names may not "
					     "start with '$'. Consider using "
					     "$getField or $setField.");
	}
	return mql_path_parse(s, len, out, err);
}

/* The arguments: copies of the values (an iterator's value changes as it
 * moves; their strings stay inside the pipeline's bytes). */
struct largs {
	bson_value_t vfrom, vlocal, vforeign, vas, vpipe;
	const bson_value_t *from, *local, *foreign, *as, *pipe;
	bool let, from_doc;
};

static int lookup_arg(struct largs *a, bson_iter_t *it, struct mql_error *err)
{
	const char *k = bson_iter_key(it);
	const bson_value_t *v = bson_iter_value(it);

	if (!strcmp(k, "pipeline")) {
		if (v->value_type != BSON_TYPE_ARRAY)
			return mql_error_set(err, MQL_TypeMismatch,
					     "'pipeline' option must be "
					     "specified as an array");
		a->vpipe = *v;
		a->pipe = &a->vpipe;
		return 0;
	}
	if (!strcmp(k, "let")) {
		a->let = true;
		if (v->value_type != BSON_TYPE_DOCUMENT)
			return mql_error_set(err, MQL_FailedToParse,
					     "$lookup argument 'let' must be "
					     "an object, is type %s",
					     mql_type_name(v->value_type));
		return 0;
	}
	if (!strcmp(k, "from")) {
		a->from_doc = v->value_type == BSON_TYPE_DOCUMENT;
		if (v->value_type != BSON_TYPE_UTF8 && !a->from_doc)
			return mql_error_set(err, MQL_FailedToParse,
					     "$lookup 'from' field must be a "
					     "string, but found %s",
					     mql_type_name(v->value_type));
		a->vfrom = *v;
		a->from = &a->vfrom;
		return 0;
	}
	/* MongoDB checks the type before the name */
	if (v->value_type != BSON_TYPE_UTF8)
		return mql_error_set(err, MQL_FailedToParse,
				     "$lookup argument '%s' must be a string, "
				     "found %s",
				     k, mql_type_name(v->value_type));
	if (!strcmp(k, "as")) {
		a->vas = *v;
		a->as = &a->vas;
	} else if (!strcmp(k, "localField")) {
		a->vlocal = *v;
		a->local = &a->vlocal;
	} else if (!strcmp(k, "foreignField")) {
		a->vforeign = *v;
		a->foreign = &a->vforeign;
	} else {
		return mql_error_set(err, MQL_FailedToParse,
				     "unknown argument to $lookup: %s", k);
	}
	return 0;
}

static bool given(const bson_value_t *v)
{
	return v && v->value.v_utf8.len > 0;
}

/* What MongoDB's createFromBson checks after reading the arguments. */
static int lookup_check(const struct largs *a, struct mql_error *err)
{
	if (a->from_doc)
		return mql_error_set(err, MQL_NotImplemented,
				     "$lookup with 'from' as {db, coll} is not "
				     "supported by kvd: 'from' names a "
				     "collection of the same database");
	if (!a->from)
		return mql_error_set(err, MQL_FailedToParse,
				     "$lookup stage without explicit "
				     "collection must have a pipeline with "
				     "$documents as first stage");
	if (a->from->value.v_utf8.len == 0 ||
	    strlen(a->from->value.v_utf8.str) != a->from->value.v_utf8.len)
		return mql_error_set(err, 73, "invalid $lookup namespace: '%s'",
				     a->from->value.v_utf8.str);
	if (!a->as || a->as->value.v_utf8.len == 0)
		return mql_error_set(err, MQL_FailedToParse,
				     "must specify 'as' field for a $lookup");
	if (a->pipe && a->let)
		return mql_error_set(err, MQL_NotImplemented,
				     "$lookup with 'let' is not supported by "
				     "kvd (nor $expr): its pipeline may not "
				     "refer to the input document");
	if (a->pipe && given(a->local) != given(a->foreign))
		return mql_error_set(err, MQL_FailedToParse,
				     "$lookup requires both or neither of "
				     "'localField' and 'foreignField' to be "
				     "specified");
	if (!a->pipe && (!given(a->local) || !given(a->foreign)))
		return mql_error_set(err, MQL_FailedToParse,
				     "$lookup requires either 'pipeline' or "
				     "both 'localField' and 'foreignField' to "
				     "be specified");
	if (a->let)
		return mql_error_set(err, MQL_FailedToParse,
				     "$lookup with a 'let' argument must also "
				     "specify 'pipeline'");
	return 0;
}

int agg_lookup_compile(struct agg_stage *s, const bson_value_t *spec,
		       struct mql_error *err)
{
	struct largs a = {0};
	struct agg_lookup *l;
	bson_iter_t it;
	int rc;

	if (spec->value_type != BSON_TYPE_DOCUMENT)
		return mql_error_set(err, MQL_FailedToParse,
				     "the $lookup specification must be an "
				     "Object");
	bson_iter_init_from_data(&it, spec->value.v_doc.data,
				 spec->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		if (lookup_arg(&a, &it, err) < 0)
			return -1;
	}
	if (lookup_check(&a, err) < 0)
		return -1;
	l = s->lookup = bson_malloc0(sizeof(*l));
	l->from = bson_strdup(a.from->value.v_utf8.str);
	l->eq = given(a.local);
	rc = field_path(a.as, &l->as, err);
	if (rc == 0 && l->eq) {
		l->foreign = bson_strdup(a.foreign->value.v_utf8.str);
		rc = field_path(a.local, &l->local, err);
		if (rc == 0)
			rc = field_path(a.foreign, &l->fpath, err);
	}
	if (rc == 0 && a.pipe)
		rc = mql_pipeline_compile(a.pipe->value.v_doc.data,
					  a.pipe->value.v_doc.data_len, NULL,
					  &l->sub, err);
	return rc;
}

/* ---- running -------------------------------------------------------- */

struct lookup_run {
	struct lookup_held *held; /* NULL: read by index per document */
	bson_t *once;		  /* the uncorrelated form's array */
};

void agg_lookup_free(struct lookup_run *lr)
{
	if (!lr)
		return;
	agg_lookup_held_free(lr->held);
	if (lr->once)
		bson_destroy(lr->once);
	bson_free(lr);
}

/* The values of localField, as a BSON array. */
struct vals {
	bson_t *arr;
	uint32_t n;
	bool regex;
};

static int add_val(void *ctx, const bson_value_t *v, unsigned flags, long pos)
{
	struct vals *x = ctx;
	char key[16];
	const char *k;

	(void)pos;
	if (flags & (MQL_PATH_MISSING | MQL_PATH_WHOLE_ARRAY))
		return 0;
	x->regex |= v->value_type == BSON_TYPE_REGEX;
	bson_uint32_to_string(x->n++, &k, key, sizeof(key));
	return mql_append(x->arr, k, -1, v) ? 0 : -1;
}

/* Every value localField reaches in doc into x (null when none). */
static int local_values(const struct agg_lookup *l, const uint8_t *doc,
			uint32_t len, struct vals *x)
{
	if (mql_path_walk(&l->local, 0, doc, len, MQL_PATH_EXPAND, add_val, x))
		return -1;
	if (x->n == 0) {
		x->n = 1;
		return bson_append_null(x->arr, "0", 1) ? 0 : -1;
	}
	return 0;
}

/* {f: {$eq: v}}: a regular expression as a value, not a pattern. */
static void eq_of(bson_t *out, const char *f, const bson_value_t *v)
{
	bson_t c;

	bson_append_document_begin(out, f, -1, &c);
	mql_append(&c, "$eq", 3, v);
	bson_append_document_end(out, &c);
}

/* The query of the foreign documents that join the values x, as MongoDB's
 * makeMatchStageFromInput: an $eq for one value, an $in for several, an
 * $or of $eq when one of them is a regular expression. */
static void make_filter(const struct agg_lookup *l, const struct vals *x,
			bson_t *out)
{
	bson_value_t av;
	bson_iter_t it;
	bson_t c, o;

	if (x->n == 1 && bson_iter_init(&it, x->arr) && bson_iter_next(&it)) {
		eq_of(out, l->foreign, bson_iter_value(&it));
	} else if (!x->regex) {
		mql_doc_value(x->arr, BSON_TYPE_ARRAY, &av);
		bson_append_document_begin(out, l->foreign, -1, &c);
		mql_append(&c, "$in", 3, &av);
		bson_append_document_end(out, &c);
	} else {
		bson_append_array_begin(out, "$or", 3, &o);
		bson_iter_init(&it, x->arr);
		while (bson_iter_next(&it)) {
			bson_append_document_begin(&o, bson_iter_key(&it), -1,
						   &c);
			eq_of(&c, l->foreign, bson_iter_value(&it));
			bson_append_document_end(&o, &c);
		}
		bson_append_array_end(out, &o);
	}
}

/* An array of documents being built: the `as` array (at most
 * MQL_AGG_LOOKUP_MAX bytes of documents: 4568), or the matches a pipeline
 * will read (at most the stage's memory limit: 292). */
struct joined {
	const struct agg_lookup *l;
	bson_t *arr;
	uint32_t n;
	size_t total, max;
};

/* Append one document to j. */
static int add_match(void *ctx, const uint8_t *doc, uint32_t len,
		     struct mql_error *err)
{
	struct joined *j = ctx;
	char key[16];
	const char *k;
	bson_t d;

	j->total += len;
	if (j->total > j->max && j->max == MQL_AGG_LOOKUP_MAX)
		return mql_error_set(err, 4568,
				     "Total size of documents in %s matching "
				     "pipeline's $lookup stage exceeds %d "
				     "bytes",
				     j->l->from, MQL_AGG_LOOKUP_MAX);
	if (j->total > j->max)
		return mql_error_set(
		    err, MQL_QueryExceededMemoryLimitNoDiskUseAllowed,
		    "$lookup exceeded the memory limit of %zu bytes with the "
		    "documents of %s one input joins",
		    j->max, j->l->from);
	bson_uint32_to_string(j->n++, &k, key, sizeof(key));
	if (!bson_init_static(&d, doc, len) ||
	    !bson_append_document(j->arr, k, -1, &d))
		return agg_too_large(err);
	return 0;
}

/* The documents that match filter into j: from the held collection, or
 * by a read of the foreign one. */
static int gather(const struct mql_agg_foreign *f, const struct lookup_run *lr,
		  const struct vals *x, const bson_t *filter, struct joined *j,
		  struct mql_error *err)
{
	struct mql_match *m = NULL;
	const uint8_t *d;
	uint32_t dl;
	void *rd;
	int rc = 0;

	if (lr->held) {
		if (mql_match_compile(bson_get_data(filter), filter->len, &m,
				      err) < 0)
			return -1;
		rc = agg_lookup_held_find(lr->held, x->arr, m, add_match, j,
					  err);
		mql_match_free(m);
		return rc;
	}
	if (f->open(f->ctx, j->l->from, bson_get_data(filter), filter->len, &rd,
		    err) < 0)
		return -1;
	while (rc == 0 && (rc = f->next(rd, &d, &dl, err)) > 0)
		rc = add_match(j, d, dl, err);
	f->close(rd);
	return rc < 0 ? -1 : 0;
}

static int lookup_start(const struct mql_agg_foreign *f,
			const struct agg_lookup *l, struct lookup_run **lr,
			size_t limit, size_t *mem, struct mql_error *err)
{
	int ix;

	if (!f)
		return mql_error_set(err, MQL_NotImplemented,
				     "$lookup has no reader of the collection "
				     "%s here",
				     l->from);
	ix = l->eq ? f->indexed(f->ctx, l->from, l->foreign, err) : 1;
	if (ix < 0)
		return -1;
	*lr = bson_malloc0(sizeof(**lr));
	return ix > 0 ? 0
		      : agg_lookup_hold(f, l, &(*lr)->held, limit, mem, err);
}

/* A pipeline's source: the documents of an array, or of a read. */
struct sub_src {
	bson_iter_t it;
	const struct mql_agg_foreign *f;
	void *rd;
};

static int sub_next(void *ctx, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err)
{
	struct sub_src *s = ctx;

	if (s->rd)
		return s->f->next(s->rd, doc, len, err);
	if (!bson_iter_next(&s->it))
		return 0;
	bson_iter_document(&s->it, len, doc);
	return 1;
}

/* Run l's pipeline over src into the `as` array j (with the same reader
 * for the $lookup stages it may hold). */
static int run_sub(const struct mql_agg_foreign *f, const struct agg_lookup *l,
		   struct sub_src *src, struct joined *j, struct mql_error *err)
{
	struct mql_agg_cursor *c;
	const uint8_t *d;
	uint32_t dl;
	int rc;

	if (mql_agg_open(l->sub, 0, sub_next, src, &c, err) < 0)
		return -1;
	if (f)
		mql_agg_set_foreign(c, f);
	while ((rc = mql_agg_next(c, &d, &dl, err)) > 0) {
		if (add_match(j, d, dl, err) < 0) {
			rc = -1;
			break;
		}
	}
	mql_agg_close(c);
	return rc;
}

/* {from, pipeline, as}: the pipeline over the whole collection, the
 * same for every input document, so run once. */
static int uncorrelated(const struct mql_agg_foreign *f,
			const struct agg_lookup *l, struct lookup_run *lr,
			size_t *mem, struct mql_error *err)
{
	static const uint8_t all[5] = {5, 0, 0, 0, 0};
	struct sub_src src = {.f = f};
	struct joined j = {l, NULL, 0, 0, MQL_AGG_LOOKUP_MAX};
	int rc;

	if (lr->once)
		return 0;
	lr->once = j.arr = bson_new();
	if (f->open(f->ctx, l->from, all, sizeof(all), &src.rd, err) < 0)
		return -1;
	rc = run_sub(f, l, &src, &j, err);
	f->close(src.rd);
	*mem += lr->once->len;
	return rc;
}

/* The `as` array of doc into arr: its equality matches, through the
 * pipeline when there is one. */
static int joined_of(const struct mql_agg_foreign *f,
		     const struct agg_lookup *l, const struct lookup_run *lr,
		     const uint8_t *doc, uint32_t len, size_t limit,
		     bson_t *arr, struct mql_error *err)
{
	bson_t vals = BSON_INITIALIZER, filter = BSON_INITIALIZER,
	       matched = BSON_INITIALIZER;
	struct vals x = {&vals, 0, false};
	struct joined j = {l, arr, 0, 0, MQL_AGG_LOOKUP_MAX};
	struct joined m = {l, &matched, 0, 0, limit};
	struct sub_src src = {.f = f};
	int rc = 0;

	if (local_values(l, doc, len, &x) < 0)
		rc = agg_too_large(err);
	if (rc == 0) {
		make_filter(l, &x, &filter);
		rc = gather(f, lr, &x, &filter, l->sub ? &m : &j, err);
	}
	if (rc == 0 && l->sub) {
		bson_iter_init(&src.it, &matched);
		rc = run_sub(f, l, &src, &j, err);
	}
	bson_destroy(&vals);
	bson_destroy(&filter);
	bson_destroy(&matched);
	return rc;
}

/* doc with the `as` array of its joined documents, into out. */
static int join(const struct mql_agg_foreign *f, const struct agg_lookup *l,
		struct lookup_run *lr, const uint8_t *doc, uint32_t len,
		size_t limit, size_t *mem, bson_t *out, struct mql_error *err)
{
	bson_t arr = BSON_INITIALIZER;
	const bson_t *as = &arr;
	bson_value_t av;
	int rc;

	if (l->eq) {
		rc = joined_of(f, l, lr, doc, len, limit, &arr, err);
	} else {
		rc = uncorrelated(f, l, lr, mem, err);
		as = lr->once;
	}
	if (rc == 0) {
		bson_reinit(out);
		mql_doc_value(as, BSON_TYPE_ARRAY, &av);
		if (!agg_set_path(doc, len, &l->as, 0, &av, out) ||
		    out->len > MQL_MAX_DOC_SIZE)
			rc = agg_too_large(err);
	}
	bson_destroy(&arr);
	return rc;
}

int agg_lookup_next(struct mql_agg_cursor *c, size_t i,
		    const struct agg_lookup *spec, struct lookup_run **lr,
		    size_t limit, size_t *mem, bson_t *out, const uint8_t **doc,
		    uint32_t *len, struct mql_error *err)
{
	const struct mql_agg_foreign *f = agg_foreign(c);
	const uint8_t *d;
	uint32_t l;
	int rc = agg_pull(c, i, &d, &l, err);

	if (rc != 1)
		return rc;
	if (!*lr && lookup_start(f, spec, lr, limit, mem, err) < 0)
		return -1;
	if (join(f, spec, *lr, d, l, limit, mem, out, err) < 0)
		return -1;
	*doc = bson_get_data(out);
	*len = out->len;
	return 1;
}
