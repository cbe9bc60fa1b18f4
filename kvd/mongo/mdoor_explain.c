/* mdoor_explain.c - explain of find and count ({explain: {find: ...},
 * verbosity}): the store runs the query's scan and says how it read it
 * (mdoor_store.explain: the index scan and its name, or the collection
 * scan), and the reply is MongoDB's shape: queryPlanner (namespace,
 * parsedQuery, winningPlan, rejectedPlans) and executionStats (nReturned,
 * executionTimeMillis, totalKeysExamined, totalDocsExamined).  The
 * statistics are of the whole scan (the door's skip, limit and sort are
 * not applied to nReturned).  With the store's scan_explain the door runs
 * the scan itself, a slice at a time as every read (mdoor_yield), and the
 * store then says how it read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_write.h"
#include "mql_sort.h"

/* The inner command's fields. */
struct inner {
	const char *coll;
	const uint8_t *filter, *sort, *hint, *proj;
	uint32_t flen, slen, hlen, plen;
	bool hname;
	bool count;
};

static void inner_read(bson_iter_t *it, struct inner *in)
{
	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);
		const uint8_t **p = NULL;
		uint32_t *n = NULL;

		if ((!strcmp(k, "filter") || !strcmp(k, "query")) &&
		    BSON_ITER_HOLDS_DOCUMENT(it)) {
			p = &in->filter;
			n = &in->flen;
		} else if (!strcmp(k, "sort") && BSON_ITER_HOLDS_DOCUMENT(it)) {
			p = &in->sort;
			n = &in->slen;
		} else if (!strcmp(k, "projection") &&
			   BSON_ITER_HOLDS_DOCUMENT(it)) {
			p = &in->proj;
			n = &in->plen;
		} else if (!strcmp(k, "hint")) {
			mdoor_arg_hint(it, &in->hint, &in->hlen, &in->hname);
		}
		if (p)
			bson_iter_document(it, n, p);
	}
}

static void plans(struct mdoor_req *r, const struct inner *in,
		  const bson_t *plan, const bson_t *stats)
{
	bson_t qp, pq, rej;
	char ns[MDOOR_NAME_MAX + MDOOR_DB_MAX];

	snprintf(ns, sizeof(ns), "%s.%s", r->db, in->coll);
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "queryPlanner", &qp);
	BSON_APPEND_INT32(&qp, "plannerVersion", 1);
	BSON_APPEND_UTF8(&qp, "namespace", ns);
	if (in->filter && bson_init_static(&pq, in->filter, in->flen))
		BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &pq);
	BSON_APPEND_DOCUMENT(&qp, "winningPlan", plan);
	BSON_APPEND_ARRAY_BEGIN(&qp, "rejectedPlans", &rej);
	bson_append_array_end(&qp, &rej);
	bson_append_document_end(&r->reply, &qp);
	BSON_APPEND_DOCUMENT(&r->reply, "executionStats", stats);
}

/* The explain command's own fields, as mongod's IDL checks them:
 * verbosity a string of its three values. */
static int verbosity(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"verbosity", MDOOR_T_STRING, false},
	};
	static const char *const known[] = {"queryPlanner", "executionStats",
					    "allPlansExecution"};
	mdoor_av a[1];
	const char *v;

	if (mdoor_args(r, spec, 1, a, err))
		return -1;
	if (!mdoor_has(&a[0].it))
		return 0;
	v = bson_iter_utf8(&a[0].it, NULL);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(v, known[i]))
			return 0;
	return mdoor_err(err, MQL_BadValue,
			 "Enumeration value '%s' for field 'explain.verbosity' "
			 "is not a valid value.",
			 v);
}

int mdoor_plan_of(struct mdoor *d, const struct mdoor_query *q, bson_t *plan,
		  struct mql_error *err)
{
	struct mdoor_scan_info info = {0};
	bson_t stats = BSON_INITIALIZER;
	void *s;
	int rc = 0;

	if (d->store.scan_explain) { /* the plan is chosen as it opens */
		if (d->store.scan(d->store.ctx, q, &s, &info, err))
			return -1;
		d->store.scan_explain(s, q->count_only, 0, 0, plan, &stats);
		d->store.scan_close(s);
	} else if (!d->store.explain) {
		BSON_APPEND_UTF8(plan, "stage", "COLLSCAN");
	} else {
		rc = d->store.explain(d->store.ctx, q, plan, &stats, err);
	}
	bson_destroy(&stats);
	return rc;
}

/* An explain whose scan runs a slice at a time: what it keeps across
 * the yields (r->state; the request's body is gone by then). */
struct explain_job {
	struct mdoor *d;
	uint8_t *inner; /* a copy of the explained command */
	uint32_t ilen;
	struct mql_match *m;
	struct mql_sort *s;
	struct mql_project *pj;
	void *scan;
	int64_t n;
	uint64_t t0;
	bool count;
};

static void job_free(void *p)
{
	struct explain_job *j = p;

	if (j->scan) /* before what it points to */
		j->d->store.scan_close(j->scan);
	mql_sort_free(j->s);
	mql_project_free(j->pj);
	mql_match_free(j->m);
	free(j->inner);
	free(j);
}

/* Run the job's scan a slice at a time, then answer. */
static int explain_go(struct mdoor_req *r, struct mql_error *err)
{
	struct explain_job *j = r->state;
	struct mdoor *d = j->d;
	bson_t plan = BSON_INITIALIZER, stats = BSON_INITIALIZER;
	struct inner in = {0};
	const uint8_t *doc;
	uint32_t len;
	bson_iter_t c;
	int rc;

	if (d->store.scan_slice)
		d->store.scan_slice(j->scan, MDOOR_SLICE_MS);
	while ((rc = d->store.scan_next(j->scan, &doc, &len, err)) == 1)
		j->n++;
	if (rc == MDOOR_PAUSE)
		return mdoor_yield(r, explain_go);
	if (rc < 0)
		return -1;
	d->store.scan_explain(j->scan, j->count, j->n,
			      (int64_t)(mdoor_now(d) - j->t0), &plan, &stats);
	bson_iter_init_from_data(&c, j->inner, j->ilen);
	bson_iter_next(&c);
	in.coll = bson_iter_utf8(&c, NULL);
	in.count = j->count;
	inner_read(&c, &in);
	plans(r, &in, &plan, &stats);
	bson_destroy(&plan);
	bson_destroy(&stats);
	return 0;
}

/* Take q's compiled parts and the explained command over into a job, open
 * its scan, and run it. */
static int explain_run(struct mdoor_req *r, const bson_iter_t *it,
		       const struct mdoor_query *q, bool count,
		       struct mql_error *err)
{
	struct explain_job *j = calloc(1, sizeof(*j));
	struct mdoor_scan_info info = {0};
	const uint8_t *data;
	uint32_t len;

	if (!j) {
		mql_sort_free((struct mql_sort *)q->sort);
		mql_project_free((struct mql_project *)q->proj);
		mql_match_free((struct mql_match *)q->filter);
		return mdoor_err(err, MQL_InternalError, "out of memory");
	}
	bson_iter_document(it, &len, &data);
	j->d = r->mc->d;
	j->m = (struct mql_match *)q->filter;
	j->s = (struct mql_sort *)q->sort;
	j->pj = (struct mql_project *)q->proj;
	j->count = count;
	r->state = j; /* freed with the request, whatever happens */
	r->state_free = job_free;
	if (!(j->inner = malloc(len)))
		return mdoor_err(err, MQL_InternalError, "out of memory");
	memcpy(j->inner, data, len);
	j->ilen = len;
	j->t0 = mdoor_now(j->d);
	if (j->d->store.scan(j->d->store.ctx, q, &j->scan, &info, err)) {
		j->scan = NULL;
		return -1;
	}
	return explain_go(r, err);
}

int mdoor_cmd_explain(struct mdoor_req *r, struct mql_error *err)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	struct mdoor *d = r->mc->d;
	struct inner in = {0};
	struct mdoor_query q = {.db = r->db, .want = -1};
	struct mql_match *m = NULL;
	struct mql_sort *s = NULL;
	struct mql_project *pj = NULL;
	bson_t plan = BSON_INITIALIZER, stats = BSON_INITIALIZER;
	bson_iter_t it, c;
	int rc = -1;

	if (!mdoor_cmd_value(r, &it))
		return mdoor_err(err, MQL_BadValue,
				 "explain takes a command document");
	if (verbosity(r, err))
		return -1;
	if (!BSON_ITER_HOLDS_DOCUMENT(&it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "BSON field 'explain.explain' is the wrong "
				 "type '%s', expected type 'object'",
				 mql_type_name(bson_iter_type(&it)));
	if (!bson_iter_recurse(&it, &c) || !bson_iter_next(&c))
		return mdoor_err(err, MQL_BadValue,
				 "explain takes a command document");
	if ((strcmp(bson_iter_key(&c), "find") &&
	     strcmp(bson_iter_key(&c), "count")) ||
	    !BSON_ITER_HOLDS_UTF8(&c))
		return mdoor_err(err, MQL_NotImplemented,
				 "explain of %s is not supported by kvd: find "
				 "and count are",
				 bson_iter_key(&c));
	in.coll = bson_iter_utf8(&c, NULL);
	in.count = !strcmp(bson_iter_key(&c), "count");
	inner_read(&c, &in);
	if (mql_match_compile(in.filter ? in.filter : empty,
			      in.filter ? in.flen : 5, &m, err) ||
	    (in.sort && in.slen > 5 &&
	     mql_sort_compile(in.sort, in.slen, &s, err)) ||
	    (!in.count && in.proj && in.plen > 5 &&
	     mql_project_compile(in.proj, in.plen, MQL_PROJECT_FIND, &pj, err)))
		goto out;
	q.coll = in.coll;
	q.filter = m;
	q.filter_bson = in.filter;
	q.filter_len = in.flen;
	q.sort = s;
	q.sort_bson = s ? in.sort : NULL;
	q.sort_len = s ? in.slen : 0;
	q.hint = in.hint;
	q.hint_len = in.hlen;
	q.hint_name = in.hname;
	q.proj = pj;
	q.count_only = in.count;
	if (d->store.scan_explain) /* the job owns m, s and pj from here */
		return explain_run(r, &it, &q, in.count, err);
	if (!d->store.explain) {
		BSON_APPEND_UTF8(&plan, "stage", "COLLSCAN");
	} else if (d->store.explain(d->store.ctx, &q, &plan, &stats, err)) {
		goto out;
	}
	plans(r, &in, &plan, &stats);
	rc = 0;
out:
	bson_destroy(&plan);
	bson_destroy(&stats);
	mql_sort_free(s);
	mql_project_free(pj);
	mql_match_free(m);
	return rc;
}
