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
 * $lookup stages read through the same reader.
 *
 * A foreign read, or the pipeline, may pause (MQL_AGG_PAUSE: the reader
 * gives its thread back, or the cursor's slice ran out): the stage keeps
 * where its join stands (enum part, with a copy of the input document,
 * whose stage may move on) and goes on from there at its next call. */
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

/* Where the join of one input document stands.  A foreign read may give
 * its thread back (MQL_AGG_PAUSE, mql_agg.h) at any document: the stage
 * returns it and goes on from the same place at its next call. */
enum part {
	PART_IDLE,  /* no input document taken */
	PART_START, /* one taken: how to read `from` decided at the first */
	PART_HOLD,  /* the foreign collection being read to be held */
	PART_JOIN,  /* the reads of this input to begin */
	PART_ONCE,  /* the uncorrelated pipeline running over `from` */
	PART_READ,  /* this input's foreign documents being read */
	PART_SUBGO, /* this input's pipeline to begin over them */
	PART_SUB,   /* and running */
	PART_DONE,  /* its `as` array complete */
};

/* The values of localField, as a BSON array. */
struct vals {
	bson_t *arr;
	uint32_t n;
	bool regex;
};

/* An array of documents being built: the `as` array (at most
 * MQL_AGG_LOOKUP_MAX bytes of documents: 4568), or the matches a pipeline
 * will read (at most the stage's memory limit: 292). */
struct joined {
	const struct agg_lookup *l;
	bson_t *arr;
	uint32_t n;
	size_t total, max;
};

/* A pipeline's source: the documents of an array, or of a read. */
struct sub_src {
	bson_iter_t it;
	const struct mql_agg_foreign *f;
	void *rd;
};

struct lookup_run {
	struct mql_agg_cursor *c; /* the stage's cursor */
	const struct mql_agg_foreign *f;
	struct lookup_held *held; /* NULL: read by index per document */
	bson_t *once;		  /* the uncorrelated form's array */
	bool started;		  /* the way to read `from` chosen */
	enum part part;
	const uint8_t *doc; /* the input: its stage's, or `in` after a pause */
	uint32_t len;
	bson_t *in;
	bson_t vals, filter, matched, arr;
	struct joined j, m; /* into arr (`as`), into matched (the pipeline's) */
	struct sub_src src;
	void *rd;		    /* a foreign read open */
	struct mql_agg_cursor *sub; /* a pipeline running */
};

static void close_reads(struct lookup_run *lr)
{
	if (lr->sub)
		mql_agg_close(lr->sub);
	if (lr->rd)
		lr->f->close(lr->rd);
	lr->sub = NULL;
	lr->rd = NULL;
}

/* The reads and the copy of a join given up or done; the stage takes its
 * next input. */
static void part_end(struct lookup_run *lr)
{
	close_reads(lr);
	if (lr->in)
		bson_destroy(lr->in);
	lr->in = NULL;
	lr->part = PART_IDLE;
}

void agg_lookup_free(struct lookup_run *lr)
{
	if (!lr)
		return;
	part_end(lr);
	agg_lookup_held_free(lr->held);
	if (lr->once)
		bson_destroy(lr->once);
	bson_destroy(&lr->vals);
	bson_destroy(&lr->filter);
	bson_destroy(&lr->matched);
	bson_destroy(&lr->arr);
	bson_free(lr);
}

static struct lookup_run *run_new(struct mql_agg_cursor *c,
				  const struct mql_agg_foreign *f)
{
	/* bson_t members: libbson aligns them to 128 bytes */
	struct lookup_run *lr =
	    bson_aligned_alloc0(BSON_ALIGNOF(struct lookup_run), sizeof(*lr));

	lr->c = c;
	lr->f = f;
	bson_init(&lr->vals);
	bson_init(&lr->filter);
	bson_init(&lr->matched);
	bson_init(&lr->arr);
	return lr;
}

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

/* rd's documents into j: 0 at the end, MQL_AGG_PAUSE, or -1. */
static int drain_read(const struct mql_agg_foreign *f, void *rd,
		      struct joined *j, struct mql_error *err)
{
	const uint8_t *d;
	uint32_t dl;
	int rc;

	while ((rc = f->next(rd, &d, &dl, err)) == 1)
		if (add_match(j, d, dl, err) < 0)
			return -1;
	return rc;
}

/* A pipeline's results into j: 0 at the end, MQL_AGG_PAUSE, or -1. */
static int drain_sub(struct mql_agg_cursor *c, struct joined *j,
		     struct mql_error *err)
{
	const uint8_t *d;
	uint32_t dl;
	int rc;

	while ((rc = mql_agg_next(c, &d, &dl, err)) == 1)
		if (add_match(j, d, dl, err) < 0)
			return -1;
	return rc;
}

/* l's pipeline over lr->src (with the same reader for the $lookup
 * stages it may hold, and the stage's cursor's slices). */
static int sub_open(const struct agg_lookup *l, struct lookup_run *lr,
		    struct mql_error *err)
{
	if (mql_agg_open(l->sub, 0, sub_next, &lr->src, &lr->sub, err) < 0)
		return -1;
	mql_agg_set_foreign(lr->sub, lr->f);
	agg_pause_like(lr->sub, lr->c);
	return 0;
}

static const uint8_t all[5] = {5, 0, 0, 0, 0}; /* the query {} */

/* At the first input: an index on foreignField reads `from` per input;
 * without one it is read whole once, and held. */
static int part_start(const struct agg_lookup *l, struct lookup_run *lr,
		      struct mql_error *err)
{
	const struct mql_agg_foreign *f = lr->f;
	int ix;

	lr->part = PART_JOIN;
	if (lr->started)
		return 0;
	ix = l->eq ? f->indexed(f->ctx, l->from, l->foreign, err) : 1;
	if (ix < 0)
		return -1;
	lr->started = true;
	if (ix > 0)
		return 0;
	lr->held = agg_lookup_held_new();
	lr->part = PART_HOLD;
	return f->open(f->ctx, l->from, all, sizeof(all), &lr->rd, err);
}

static int part_hold(const struct agg_lookup *l, struct lookup_run *lr,
		     size_t limit, size_t *mem, struct mql_error *err)
{
	const uint8_t *d;
	uint32_t n;
	int rc;

	while ((rc = lr->f->next(lr->rd, &d, &n, err)) == 1)
		if (agg_lookup_held_add(lr->held, l, d, n, limit, mem, err) < 0)
			return -1;
	if (rc)
		return rc;
	lr->f->close(lr->rd);
	lr->rd = NULL;
	agg_lookup_held_seal(lr->held);
	lr->part = PART_JOIN;
	return 0;
}

/* {from, pipeline, as}: the pipeline over the whole collection, the
 * same for every input document, so run once. */
static int once_begin(const struct agg_lookup *l, struct lookup_run *lr,
		      struct mql_error *err)
{
	const struct mql_agg_foreign *f = lr->f;

	if (lr->once) {
		lr->part = PART_DONE;
		return 0;
	}
	lr->once = bson_new();
	lr->j = (struct joined){l, lr->once, 0, 0, MQL_AGG_LOOKUP_MAX};
	lr->part = PART_ONCE;
	if (f->open(f->ctx, l->from, all, sizeof(all), &lr->rd, err) < 0)
		return -1;
	lr->src = (struct sub_src){.f = f, .rd = lr->rd};
	return sub_open(l, lr, err);
}

/* This input's equality: its foreign documents from the held
 * collection, or a read of them begun. */
static int join_begin(const struct agg_lookup *l, struct lookup_run *lr,
		      size_t limit, struct mql_error *err)
{
	const struct mql_agg_foreign *f = lr->f;
	struct vals x = {&lr->vals, 0, false};
	struct mql_match *m = NULL;
	int rc;

	if (!l->eq)
		return once_begin(l, lr, err);
	bson_reinit(&lr->vals);
	bson_reinit(&lr->filter);
	bson_reinit(&lr->matched);
	bson_reinit(&lr->arr);
	lr->j = (struct joined){l, &lr->arr, 0, 0, MQL_AGG_LOOKUP_MAX};
	lr->m = (struct joined){l, &lr->matched, 0, 0, limit};
	if (local_values(l, lr->doc, lr->len, &x) < 0)
		return agg_too_large(err);
	make_filter(l, &x, &lr->filter);
	lr->part = l->sub ? PART_SUBGO : PART_DONE;
	if (!lr->held) {
		lr->part = PART_READ;
		return f->open(f->ctx, l->from, bson_get_data(&lr->filter),
			       lr->filter.len, &lr->rd, err);
	}
	if (mql_match_compile(bson_get_data(&lr->filter), lr->filter.len, &m,
			      err) < 0)
		return -1;
	rc = agg_lookup_held_find(lr->held, &lr->vals, m, add_match,
				  l->sub ? &lr->m : &lr->j, err);
	mql_match_free(m);
	return rc;
}

/* One step of the join: 0 when it moved on (lr->part says where), else
 * MQL_AGG_PAUSE or -1. */
static int step(const struct agg_lookup *l, struct lookup_run *lr, size_t limit,
		size_t *mem, struct mql_error *err)
{
	int rc;

	switch (lr->part) {
	case PART_START: return part_start(l, lr, err);
	case PART_HOLD: return part_hold(l, lr, limit, mem, err);
	case PART_JOIN: return join_begin(l, lr, limit, err);
	case PART_ONCE:
		if ((rc = drain_sub(lr->sub, &lr->j, err)))
			return rc;
		*mem += lr->once->len;
		break;
	case PART_READ:
		if ((rc = drain_read(lr->f, lr->rd, l->sub ? &lr->m : &lr->j,
				     err)))
			return rc;
		lr->f->close(lr->rd);
		lr->rd = NULL;
		lr->part = l->sub ? PART_SUBGO : PART_DONE;
		return 0;
	case PART_SUBGO:
		lr->src = (struct sub_src){.f = lr->f};
		bson_iter_init(&lr->src.it, &lr->matched);
		lr->part = PART_SUB;
		return sub_open(l, lr, err);
	case PART_SUB:
		if ((rc = drain_sub(lr->sub, &lr->j, err)))
			return rc;
		break;
	case PART_DONE: return 0;
	case PART_IDLE:
	default:
		return mql_error_set(err, MQL_InternalError,
				     "$lookup stepped with no input");
	}
	close_reads(lr);
	lr->part = PART_DONE;
	return 0;
}

/* The input with its `as` array, into out. */
static int finish(const struct agg_lookup *l, const struct lookup_run *lr,
		  bson_t *out, struct mql_error *err)
{
	bson_value_t av;

	bson_reinit(out);
	mql_doc_value(l->eq ? &lr->arr : lr->once, BSON_TYPE_ARRAY, &av);
	if (!agg_set_path(lr->doc, lr->len, &l->as, 0, &av, out) ||
	    out->len > MQL_MAX_DOC_SIZE)
		return agg_too_large(err);
	return 0;
}

/* The next input document to join, into *lr (made at the first). */
static int take_input(struct mql_agg_cursor *c, size_t i,
		      const struct agg_lookup *spec, struct lookup_run **lr,
		      struct mql_error *err)
{
	const struct mql_agg_foreign *f = agg_foreign(c);
	const uint8_t *d;
	uint32_t l;
	int rc = agg_pull(c, i, &d, &l, err);

	if (rc != 1)
		return rc;
	if (!f)
		return mql_error_set(err, MQL_NotImplemented,
				     "$lookup has no reader of the collection "
				     "%s here",
				     spec->from);
	if (!*lr)
		*lr = run_new(c, f);
	(*lr)->doc = d;
	(*lr)->len = l;
	(*lr)->part = PART_START;
	return 1;
}

int agg_lookup_next(struct mql_agg_cursor *c, size_t i,
		    const struct agg_lookup *spec, struct lookup_run **lr,
		    size_t limit, size_t *mem, bson_t *out, const uint8_t **doc,
		    uint32_t *len, struct mql_error *err)
{
	struct lookup_run *r = *lr;
	int rc = 0;

	if (!r || r->part == PART_IDLE) {
		if ((rc = take_input(c, i, spec, lr, err)) != 1)
			return rc;
		r = *lr;
		rc = 0;
	}
	while (rc == 0 && r->part != PART_DONE)
		rc = step(spec, r, limit, mem, err);
	if (rc == MQL_AGG_PAUSE) {
		/* the input's stage may move on meanwhile: keep a copy */
		if (!r->in) {
			r->in = bson_new_from_data(r->doc, r->len);
			if (r->in)
				r->doc = bson_get_data(r->in);
		}
		if (r->in)
			return MQL_AGG_PAUSE;
		rc = agg_too_large(err);
	}
	if (rc == 0)
		rc = finish(spec, r, out, err);
	part_end(r);
	if (rc < 0)
		return -1;
	*doc = bson_get_data(out);
	*len = out->len;
	return 1;
}
