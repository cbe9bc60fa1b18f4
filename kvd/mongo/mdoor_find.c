/* mdoor_find.c - the read commands: find, count and distinct.  Their
 * arguments are checked as mongod checks them; the filter is compiled
 * with mql_match and given to the store's scan, which yields the matching
 * documents; what the store leaves (a sort it could not follow, skip,
 * limit, the projection) the door does with the language library, in
 * bounded memory (a blocking sort is MongoDB's 100 MiB, then 292). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_int.h"
#include "mql_path.h"
#include "mql_value.h"

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

struct read_spec {
	const char *coll;
	const uint8_t *filter, *sort, *proj, *hint;
	uint32_t flen, slen, plen, hlen;
	bool hname;	     /* hint is an index's name */
	int64_t skip, limit; /* limit -1: none */
	bool count;	     /* the documents are only counted */
	/* what the door reads of each document, when not the projection
	 * (distinct's key): the store may give only those fields */
	const struct mql_project *reads;
};

/* [{$sort: sort}, {$limit: skip + limit}]: a top-k when there is a limit. */
static int sort_pipeline(const struct read_spec *s, struct mql_pipeline **p,
			 struct mql_error *err)
{
	bson_t arr = BSON_INITIALIZER, st, sort;
	int rc;

	bson_init_static(&sort, s->sort, s->slen);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
	BSON_APPEND_DOCUMENT(&st, "$sort", &sort);
	bson_append_document_end(&arr, &st);
	if (s->limit > 0) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "1", &st);
		BSON_APPEND_INT64(&st, "$limit", s->skip + s->limit);
		bson_append_document_end(&arr, &st);
	}
	rc = mql_pipeline_compile(bson_get_data(&arr), arr.len, NULL, p, err);
	bson_destroy(&arr);
	return rc;
}

/* Open a cursor over the documents s reads. */
static int open_read(struct mdoor_req *r, const struct read_spec *s,
		     struct mdoor_cursor **out, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mdoor_cursor_src src = {0};
	struct mdoor_query q = {0};
	struct mdoor_scan_info info = {0};

	src.skip = s->skip;
	src.limit = s->limit;
	src.max_time_ms = r->max_time_ms;
	if (mql_match_compile(s->filter, s->flen, &src.filter, err))
		goto fail;
	if (s->slen > 5 && mql_sort_compile(s->sort, s->slen, &src.sort, err))
		goto fail;
	if (s->plen > 5 &&
	    mql_project_compile(s->proj, s->plen, MQL_PROJECT_FIND, &src.proj,
				err))
		goto fail;
	q.db = r->db;
	q.coll = s->coll;
	q.filter = src.filter;
	q.filter_bson = s->filter;
	q.filter_len = s->flen;
	q.sort = src.sort;
	q.sort_bson = src.sort ? s->sort : NULL;
	q.sort_len = src.sort ? s->slen : 0;
	q.want = s->limit > 0 ? s->skip + s->limit : -1;
	q.hint = s->hint;
	q.hint_len = s->hlen;
	q.hint_name = s->hname;
	q.proj = s->reads ? s->reads : src.proj;
	q.count_only = s->count;
	if (d->store.scan(d->store.ctx, &q, &src.scan, &info, err))
		goto fail;
	if (src.sort && !info.sorted && sort_pipeline(s, &src.pipe, err))
		goto fail;
	*out = mdoor_cursor_new(r->mc, r->db, s->coll, &src, err);
	return *out ? 0 : -1;
fail:
	if (src.scan)
		d->store.scan_close(src.scan);
	mql_match_free(src.filter);
	mql_sort_free(src.sort);
	mql_project_free(src.proj);
	return -1;
}

static void doc_arg(const bson_iter_t *it, const uint8_t **p, uint32_t *n)
{
	if (mdoor_has(it)) {
		mdoor_arg_doc(it, p, n);
	} else {
		*p = empty_doc;
		*n = 5;
	}
}

/* A non-negative integer argument (MongoDB: 51024). */
static int nonneg(struct mdoor_req *r, const bson_iter_t *it, int64_t *v,
		  struct mql_error *err)
{
	if (!mdoor_has(it))
		return 0;
	if (mdoor_arg_int64(r, it, v, err))
		return -1;
	if (*v < 0)
		return mdoor_err(err, 51024,
				 "BSON field '%s' value must be >= 0, actual "
				 "value '%lld'",
				 bson_iter_key(it), (long long)*v);
	return 0;
}

/* Options kvd does not do: refused rather than ignored. */
static int unsupported(const bson_iter_t *it, bool when_true,
		       struct mql_error *err)
{
	if (!mdoor_has(it) || (when_true && !mdoor_arg_bool(it)))
		return 0;
	if (!strcmp(bson_iter_key(it), "collation") &&
	    BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_t c;

		if (bson_iter_recurse(it, &c) && bson_iter_find(&c, "locale") &&
		    BSON_ITER_HOLDS_UTF8(&c) &&
		    !strcmp(bson_iter_utf8(&c, NULL), "simple"))
			return 0;
	}
	return mdoor_err(err, MQL_NotImplemented,
			 "find's '%s' option is not supported by kvd",
			 bson_iter_key(it));
}

enum {
	F_FILTER,
	F_PROJ,
	F_SORT,
	F_HINT,
	F_SKIP,
	F_LIMIT,
	F_BATCH,
	F_SINGLE,
	F_MAX,
	F_MIN,
	F_RETKEY,
	F_RECID,
	F_TAIL,
	F_AWAIT,
	F_COLL,
	F_LET,
	F_NOTIMEOUT,
	F_PARTIAL,
	F_DISK,
	F_OPLOG,
	F_READONCE,
	F_N
};

static const struct mdoor_arg find_spec[F_N] = {
    [F_FILTER] = {"filter", MDOOR_T_OBJECT, false},
    [F_PROJ] = {"projection", MDOOR_T_OBJECT, false},
    [F_SORT] = {"sort", MDOOR_T_OBJECT, false},
    [F_HINT] = {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING, false},
    [F_SKIP] = {"skip", MDOOR_T_NUM, false},
    [F_LIMIT] = {"limit", MDOOR_T_NUM, false},
    [F_BATCH] = {"batchSize", MDOOR_T_NUM, false},
    [F_SINGLE] = {"singleBatch", MDOOR_T_BOOLISH, false},
    [F_MAX] = {"max", MDOOR_T_OBJECT, false},
    [F_MIN] = {"min", MDOOR_T_OBJECT, false},
    [F_RETKEY] = {"returnKey", MDOOR_T_BOOLISH, false},
    [F_RECID] = {"showRecordId", MDOOR_T_BOOLISH, false},
    [F_TAIL] = {"tailable", MDOOR_T_BOOLISH, false},
    [F_AWAIT] = {"awaitData", MDOOR_T_BOOLISH, false},
    [F_COLL] = {"collation", MDOOR_T_OBJECT, false},
    [F_LET] = {"let", MDOOR_T_OBJECT, false},
    [F_NOTIMEOUT] = {"noCursorTimeout", MDOOR_T_BOOLISH, false},
    [F_PARTIAL] = {"allowPartialResults", MDOOR_T_BOOLISH, false},
    [F_DISK] = {"allowDiskUse", MDOOR_T_BOOLISH, false},
    [F_OPLOG] = {"oplogReplay", MDOOR_T_BOOLISH, false},
    [F_READONCE] = {"readOnce", MDOOR_T_BOOLISH, false},
};

static int cmd_find(struct mdoor_req *r, struct mql_error *err)
{
	mdoor_av a[F_N];
	struct read_spec s = {0};
	struct mdoor_cursor *c;
	int64_t batch = 101, limit = 0;

	if (mdoor_coll_arg(r, &s.coll, err) ||
	    mdoor_args(r, find_spec, F_N, a, err))
		return -1;
	if (unsupported(&a[F_MAX].it, false, err) ||
	    unsupported(&a[F_MIN].it, false, err) ||
	    unsupported(&a[F_RETKEY].it, true, err) ||
	    unsupported(&a[F_RECID].it, true, err) ||
	    unsupported(&a[F_TAIL].it, true, err) ||
	    unsupported(&a[F_AWAIT].it, true, err) ||
	    unsupported(&a[F_COLL].it, false, err) ||
	    unsupported(&a[F_LET].it, false, err))
		return -1;
	if (nonneg(r, &a[F_SKIP].it, &s.skip, err) ||
	    nonneg(r, &a[F_LIMIT].it, &limit, err) ||
	    nonneg(r, &a[F_BATCH].it, &batch, err))
		return -1;
	s.limit = limit > 0 ? limit : -1;
	doc_arg(&a[F_FILTER].it, &s.filter, &s.flen);
	doc_arg(&a[F_SORT].it, &s.sort, &s.slen);
	doc_arg(&a[F_PROJ].it, &s.proj, &s.plen);
	mdoor_arg_hint(&a[F_HINT].it, &s.hint, &s.hlen, &s.hname);
	if (open_read(r, &s, &c, err))
		return -1;
	if (limit > 0 && (!mdoor_has(&a[F_BATCH].it) || limit < batch))
		batch = limit;
	return mdoor_cursor_reply(r, c, batch, true,
				  mdoor_arg_bool(&a[F_SINGLE].it), err);
}

/* ===================== count ===================== */

/* Count r->rb's cursor's documents a slice at a time, then answer. */
static int count_go(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor_rbatch *b = &r->rb;
	const uint8_t *doc;
	uint32_t len;
	int rc;

	mdoor_cursor_slice(b->c);
	while ((rc = mdoor_cursor_next(b->c, &doc, &len, err)) == 1)
		b->count++;
	if (rc == MDOOR_PAUSE)
		return mdoor_yield(r, count_go);
	mdoor_cursor_free(r->mc->d, b->c);
	b->c = NULL;
	if (rc < 0)
		return -1;
	BSON_APPEND_INT64(&r->reply, "n", b->count);
	return 0;
}

static int count_scan(struct mdoor_req *r, struct read_spec *s,
		      struct mql_error *err)
{
	s->count = true;
	r->rb.count = 0;
	if (open_read(r, s, &r->rb.c, err))
		return -1;
	return count_go(r, err);
}

static int cmd_count(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"query", MDOOR_T_OBJECT | MDOOR_T_NULL, false},
	    {"limit", MDOOR_T_NUM, false},
	    {"skip", MDOOR_T_NUM, false},
	    {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING, false},
	    {"collation", MDOOR_T_OBJECT, false},
	    {"fields", MDOOR_T_OBJECT, false},
	};
	struct mdoor *d = r->mc->d;
	mdoor_av a[6];
	struct read_spec s = {0};
	int64_t n = 0, limit = 0;
	int rc = 1;

	if (mdoor_coll_arg(r, &s.coll, err) || mdoor_args(r, spec, 6, a, err) ||
	    unsupported(&a[4].it, false, err) ||
	    nonneg(r, &a[2].it, &s.skip, err))
		return -1;
	if (mdoor_has(&a[1].it) && mdoor_arg_int64(r, &a[1].it, &limit, err))
		return -1;
	limit = limit < 0 ? -limit : limit; /* MongoDB: a negative limit too */
	s.limit = limit > 0 ? limit : -1;
	if (BSON_ITER_HOLDS_DOCUMENT(&a[0].it))
		mdoor_arg_doc(&a[0].it, &s.filter, &s.flen);
	else
		s.filter = empty_doc, s.flen = 5;
	/* a hint forces the index (one of none is 2), as a find's */
	mdoor_arg_hint(&a[3].it, &s.hint, &s.hlen, &s.hname);
	if (d->store.count && !s.skip && s.limit < 0) {
		struct mdoor_query q = {.db = r->db,
					.coll = s.coll,
					.hint = s.hint,
					.hint_len = s.hlen,
					.hint_name = s.hname};

		if (mql_match_compile(s.filter, s.flen,
				      (struct mql_match **)&q.filter, err))
			return -1;
		q.filter_bson = s.filter;
		q.filter_len = s.flen;
		q.want = -1;
		rc = d->store.count(d->store.ctx, &q, &n, err);
		mql_match_free((struct mql_match *)q.filter);
		if (rc < 0)
			return -1;
	}
	if (rc == 1)
		return count_scan(r, &s, err);
	BSON_APPEND_INT64(&r->reply, "n", n);
	return 0;
}

/* ===================== distinct ===================== */

/* The distinct values so far: kept in an array document, found again by
 * an open-addressing table of their hashes. */
struct distinct {
	bson_t values;
	bson_value_t *v; /* copies, in order */
	uint32_t n, cap;
	uint32_t *slot; /* index + 1, or 0 */
	uint32_t nslot;
	size_t bytes;
	int rc;
	struct mql_error *err;
};

static int grow(struct distinct *x)
{
	uint32_t ns = x->nslot ? x->nslot * 2 : 64;
	uint32_t *slot = calloc(ns, sizeof(*slot));
	bson_value_t *v = realloc(x->v, sizeof(*v) * ns / 2);

	if (!slot || !v) {
		free(slot);
		if (v)
			x->v = v;
		return -1;
	}
	x->v = v;
	x->cap = ns / 2;
	for (uint32_t i = 0; i < x->n; i++) {
		uint32_t h = (uint32_t)mql_value_hash(&x->v[i]) & (ns - 1);

		while (slot[h])
			h = (h + 1) & (ns - 1);
		slot[h] = i + 1;
	}
	free(x->slot);
	x->slot = slot;
	x->nslot = ns;
	return 0;
}

static int add_value(void *ctx, const bson_value_t *v, unsigned flags, long pos)
{
	struct distinct *x = ctx;
	uint32_t h;
	char key[16];
	const char *k;

	(void)pos;
	if (flags & (MQL_PATH_MISSING | MQL_PATH_WHOLE_ARRAY))
		return 0;
	if (x->n + 1 > x->cap && grow(x))
		return x->rc = mdoor_err(x->err, MDOOR_ExceededMemoryLimit,
					 "out of memory");
	h = (uint32_t)mql_value_hash(v) & (x->nslot - 1);
	for (; x->slot[h]; h = (h + 1) & (x->nslot - 1))
		if (mql_value_eq(&x->v[x->slot[h] - 1], v))
			return 0;
	bson_uint32_to_string(x->n, &k, key, sizeof(key));
	bson_append_value(&x->values, k, -1, v);
	x->bytes = x->values.len;
	if (x->bytes > MDOOR_MAX_BSON)
		return x->rc = mdoor_err(x->err, 17217,
					 "distinct too big, 16mb cap");
	bson_value_copy(v, &x->v[x->n]);
	x->slot[h] = ++x->n;
	return 0;
}

static void distinct_free(struct distinct *x)
{
	for (uint32_t i = 0; i < x->n; i++)
		bson_value_destroy(&x->v[i]);
	free(x->v);
	free(x->slot);
	bson_destroy(&x->values);
}

/* A distinct being run: what it holds across a yield (r->state). */
struct distinct_job {
	struct distinct x;
	struct mql_path path;
	const struct mql_project *reads;
};

static void distinct_job_free(void *p)
{
	struct distinct_job *j = p;

	distinct_free(&j->x);
	mql_project_free((struct mql_project *)j->reads);
	mql_path_free(&j->path);
	bson_free(j);
}

/* Walk r->rb's cursor's documents a slice at a time, then answer. */
static int distinct_go(struct mdoor_req *r, struct mql_error *err)
{
	struct distinct_job *j = r->state;
	struct mdoor_cursor *c = r->rb.c;
	const uint8_t *doc;
	uint32_t len;
	int rc;

	j->x.err = err; /* this call's */
	mdoor_cursor_slice(c);
	while ((rc = mdoor_cursor_next(c, &doc, &len, err)) == 1)
		if (mql_path_walk(&j->path, 0, doc, len, MQL_PATH_EXPAND,
				  add_value, &j->x)) {
			rc = -1;
			break;
		}
	if (rc == MDOOR_PAUSE && !mdoor_cursor_hold(c, j->x.values.len, err))
		return mdoor_yield(r, distinct_go);
	if (rc == MDOOR_PAUSE)
		rc = -1;
	mdoor_cursor_free(r->mc->d, c);
	r->rb.c = NULL;
	if (rc < 0)
		return -1;
	BSON_APPEND_ARRAY(&r->reply, "values", &j->x.values);
	return 0;
}

/* What distinct reads of each document: {key: 1, _id: 0}, so that an
 * index on its field answers from its entries (a covered read; the
 * documents are not projected: the store gives whole ones otherwise);
 * NULL for a key under _id, or a projection that does not compile. */
static const struct mql_project *key_reads(const char *key)
{
	struct mql_project *p = NULL;
	struct mql_error e;
	bson_t spec = BSON_INITIALIZER;

	if (strncmp(key, "_id", 3) || (key[3] && key[3] != '.')) {
		BSON_APPEND_INT32(&spec, key, 1);
		BSON_APPEND_INT32(&spec, "_id", 0);
		if (mql_project_compile(bson_get_data(&spec), spec.len,
					MQL_PROJECT_FIND, &p, &e))
			p = NULL;
	}
	bson_destroy(&spec);
	return p;
}

static int cmd_distinct(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"key", MDOOR_T_STRING, true},
	    {"query", MDOOR_T_OBJECT | MDOOR_T_NULL, false},
	    {"collation", MDOOR_T_OBJECT, false},
	    {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING, false},
	};
	mdoor_av a[4];
	struct read_spec s = {0};
	struct distinct_job *j;
	uint32_t klen;
	const char *key;

	if (mdoor_coll_arg(r, &s.coll, err) || mdoor_args(r, spec, 4, a, err) ||
	    unsupported(&a[2].it, false, err))
		return -1;
	key = bson_iter_utf8(&a[0].it, &klen);
	if (!klen) /* mongod's FieldPath check, before the path's own */
		return mdoor_err(err, 40352,
				 "FieldPath cannot be constructed with empty "
				 "string");
	/* struct distinct holds a bson_t: aligned as libbson asks */
	j = bson_aligned_alloc0(BSON_ALIGNOF(struct distinct_job), sizeof(*j));
	bson_init(&j->x.values);
	r->state = j; /* freed with the request, whatever happens */
	r->state_free = distinct_job_free;
	if (mql_path_parse(key, klen, &j->path, err))
		return -1;
	if (BSON_ITER_HOLDS_DOCUMENT(&a[1].it))
		mdoor_arg_doc(&a[1].it, &s.filter, &s.flen);
	else
		s.filter = empty_doc, s.flen = 5;
	mdoor_arg_hint(&a[3].it, &s.hint, &s.hlen, &s.hname); /* as count's */
	s.limit = -1;
	s.reads = j->reads = key_reads(key);
	if (grow(&j->x))
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	if (open_read(r, &s, &r->rb.c, err))
		return -1;
	return distinct_go(r, err);
}

const struct mdoor_cmd mdoor_cmds_read[] = {
    {"find", cmd_find, 0, MDOOR_CNT_QUERY},
    {"count", cmd_count, 0, MDOOR_CNT_COMMAND},
    {"distinct", cmd_distinct, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
