/* mdoor_explain.c - explain of find and count ({explain: {find: ...},
 * verbosity}): the store runs the query's scan and says how it read it
 * (mdoor_store.explain: the index scan and its name, or the collection
 * scan), and the reply is MongoDB's shape: queryPlanner (namespace,
 * parsedQuery, winningPlan, rejectedPlans) and executionStats (nReturned,
 * executionTimeMillis, totalKeysExamined, totalDocsExamined).  The
 * statistics are of the whole scan (the door's skip, limit and sort are
 * not applied to nReturned). */
#include <stdio.h>
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
