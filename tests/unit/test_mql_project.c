/* test_mql_project.c - kvd/mongo's projections and sort specifications
 * against MongoDB's documented results ("Project Fields to Return from
 * Query", "$project", "$addFields", "Comparison/Sort Order"). */
#include "mql_project.h"
#include "mql_sort.h"
#include "mqltest.h"

static void P4(const char *spec, enum mql_project_kind kind, const char *doc,
	       const char *want)
{
	bson_t *s = J(spec), *d = J(doc), out = BSON_INITIALIZER;
	struct mql_project *p = NULL;
	struct mql_error err = {0};
	int rc = mql_project_compile(bson_get_data(s), s->len, kind, &p, &err);

	if (rc == 0)
		rc = mql_project_apply(p, bson_get_data(d), d->len, &out, &err);
	if (want[0] == 'E') {
		const char *msg = strchr(want, ' ') + 1;

		CHECK(rc < 0 && err.code == atoi(want + 1) &&
			  strncmp(err.msg, msg, strlen(msg)) == 0,
		      "%s: got %d %d %s, want %s", spec, rc, err.code, err.msg,
		      want);
	} else if (rc < 0) {
		CHECK(0, "%s on %s: %s", spec, doc, err.msg);
	} else {
		bson_t *w = J(want);
		char *got = S(&out), *exp = S(w);

		CHECK(strcmp(got, exp) == 0, "%s on %s: got %s want %s", spec,
		      doc, got, exp);
		bson_free(got);
		bson_free(exp);
		bson_destroy(w);
	}
	mql_project_free(p);
	bson_destroy(&out);
	bson_destroy(s);
	bson_destroy(d);
}

#define F(spec, doc, want) P4(spec, MQL_PROJECT_FIND, doc, want)
#define A(spec, doc, want) P4(spec, MQL_PROJECT_AGG, doc, want)

static const char *D =
    "{'_id': 1, 'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2, 3]}";

static void test_projection(void)
{
	F("{}", D, D);
	F("{'a': 1}", D, "{'_id': 1, 'a': 1}");
	F("{'e': 1, 'a': 1}", D, "{'_id': 1, 'a': 1, 'e': [1, 2, 3]}");
	F("{'a': 1, '_id': 0}", D, "{'a': 1}");
	F("{'_id': 0}", D, "{'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2, 3]}");
	F("{'_id': 1}", D, "{'_id': 1}");
	F("{'a': 0}", D, "{'_id': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2, 3]}");
	F("{'b.c': 1}", D, "{'_id': 1, 'b': {'c': 2}}");
	F("{'b': {'c': 1}}", D, "{'_id': 1, 'b': {'c': 2}}");
	F("{'b.c': 0, '_id': 0}", D, "{'a': 1, 'b': {'d': 3}, 'e': [1, 2, 3]}");
	F("{'a.b': 1}", "{'_id': 1, 'a': [{'b': 1, 'c': 2}, 3, {'c': 1}]}",
	  "{'_id': 1, 'a': [{'b': 1}, {}]}");
	F("{'a.c': 0}", "{'_id': 1, 'a': [{'b': 1, 'c': 2}, 3]}",
	  "{'_id': 1, 'a': [{'b': 1}, 3]}");
	F("{'a.b': 1}", "{'_id': 1, 'a': 5}", "{'_id': 1}");
	F("{'x': 1}", D, "{'_id': 1}");
	F("{'a': true, 'b': false}", D,
	  "E31254 Cannot do exclusion on field b in inclusion projection");
	F("{'b': 0, 'a': 1}", D,
	  "E31253 Cannot do inclusion on field a in exclusion projection");
	F("{'a': 1, 'a.b': 1}", D, "E31250 Path collision at a.b");
	F("{'e': {'$slice': 2}}", D,
	  "{'_id': 1, 'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2]}");
	F("{'e': {'$slice': -2}}", D,
	  "{'_id': 1, 'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [2, 3]}");
	F("{'e': {'$slice': [1, 1]}, 'a': 1}", D,
	  "{'_id': 1, 'a': 1, 'e': [2]}");
	F("{'e': {'$slice': [-1, 5]}, 'a': 1}", D,
	  "{'_id': 1, 'a': 1, 'e': [3]}");
	F("{'e': {'$slice': [0, 0]}}", D, "E2 $slice limit must be positive");
	F("{'a': {'$slice': 1}, '_id': 0}", "{'a': 5}", "{'a': 5}");
	F("{'s': {'$elemMatch': {'x': {'$gt': 1}}}}",
	  "{'_id': 1, 's': [{'x': 1}, {'x': 2, 'y': 1}, {'x': 3}], 't': 1}",
	  "{'_id': 1, 's': [{'x': 2, 'y': 1}], 't': 1}");
	F("{'s': {'$elemMatch': {'x': 9}}, 't': 1}",
	  "{'_id': 1, 's': [{'x': 1}], 't': 1}", "{'_id': 1, 't': 1}");
	F("{'a.b': {'$elemMatch': {'x': 1}}}", D,
	  "E2 Cannot use $elemMatch projection on a nested field.");
	F("{'a.$': 1}", D, "E238 ");
	F("{'a': {'$meta': 'textScore'}}", D, "E238 ");
	/* computed fields (4.4 on): after the included ones */
	F("{'x': '$b.c', 'a': 1}", D, "{'_id': 1, 'a': 1, 'x': 2}");
	F("{'x': {'$literal': 1}, '_id': 0}", D, "{'x': 1}");
	F("{'x': 'lit', '_id': 0}", D, "{'x': 'lit'}");
	F("{'x': '$nope', '_id': 0}", D, "{}");
	F("{'x': ['$a', '$nope'], '_id': 0}", D, "{'x': [1, null]}");
	F("{'x': {'y': '$a', 'z': '$$ROOT.b.d'}, '_id': 0}", D,
	  "{'x': {'y': 1, 'z': 3}}");
	F("{'x': '$a', 'b': 0}", D,
	  "E31254 Cannot do exclusion on field b in inclusion projection");
	F("{'b': 0, 'x': '$a'}", D,
	  "E31253 Cannot do inclusion on field x in exclusion projection");
	F("{'x': {'$add': [1, 2]}}", D, "E238 ");
	F("{'x': {'$bogus': 1}}", D, "E168 Unrecognized expression '$bogus'");
	F("{'x': '$$foo'}", D, "E17276 Use of undefined variable: foo");
	/* aggregation field paths through arrays */
	F("{'x': '$a.b', '_id': 0}",
	  "{'a': [{'b': 1}, {'c': 1}, {'b': [2]}, 7]}", "{'x': [1, [2]]}");
	A("{}", D, "E51272 ");
	A("{'a': 1}", D, "{'_id': 1, 'a': 1}");
	A("{'b': {'d': true}, '_id': false}", D, "{'b': {'d': 3}}");
	P4("{'a': 5, 'b.z': '$a', 'n': '$e'}", MQL_PROJECT_ADD, D,
	   "{'_id': 1, 'a': 5, 'b': {'c': 2, 'd': 3, 'z': 1}, 'e': [1, 2, 3], "
	   "'n': [1, 2, 3]}");
	P4("{'a': 0, 'b.c': 0}", MQL_PROJECT_UNSET, D,
	   "{'_id': 1, 'b': {'d': 3}, 'e': [1, 2, 3]}");
}

/* ---- sort ----------------------------------------------------------- */

static int SC(const char *spec, const char *a, const char *b)
{
	bson_t *s = J(spec), *x = J(a), *y = J(b);
	struct mql_sort *so;
	struct mql_error err;
	bson_value_t ka[4], kb[4];
	int c = 99;

	if (mql_sort_compile(bson_get_data(s), s->len, &so, &err) == 0) {
		mql_sort_key(so, bson_get_data(x), x->len, ka);
		mql_sort_key(so, bson_get_data(y), y->len, kb);
		c = mql_sort_cmp_keys(so, ka, kb);
		c = (c > 0) - (c < 0);
		mql_sort_free(so);
	}
	bson_destroy(s);
	bson_destroy(x);
	bson_destroy(y);
	return c;
}

static void test_sort(void)
{
	struct mql_sort *so;
	struct mql_error err;
	bson_t *bad = J("{'a': 2}"), *meta = J("{'a': {'$meta': 'textScore'}}");

	CHECK(SC("{'a': 1}", "{'a': 1}", "{'a': 2}") < 0, "asc");
	CHECK(SC("{'a': -1}", "{'a': 1}", "{'a': 2}") > 0, "desc");
	CHECK(SC("{'a': 1, 'b': -1}", "{'a': 1, 'b': 1}", "{'a': 1, 'b': 2}") >
		  0,
	      "compound");
	/* missing sorts as null, equal to null, below numbers */
	CHECK(SC("{'a': 1}", "{}", "{'a': null}") == 0, "missing == null");
	CHECK(SC("{'a': 1}", "{}", "{'a': 0}") < 0, "missing < 0");
	/* arrays: the smallest element ascending, the largest descending */
	CHECK(SC("{'a': 1}", "{'a': [5, 1]}", "{'a': 2}") < 0,
	      "min of array asc");
	CHECK(SC("{'a': -1}", "{'a': [5, 1]}", "{'a': 4}") < 0,
	      "max of array desc");
	CHECK(SC("{'a': 1}", "{'a': [3, 'x']}", "{'a': 2}") > 0,
	      "min across types");
	/* the empty array sorts below null */
	CHECK(SC("{'a': 1}", "{'a': []}", "{'a': null}") < 0, "[] < null");
	CHECK(SC("{'a': 1}", "{'a': []}", "{}") < 0, "[] < missing");
	CHECK(SC("{'a.b': 1}", "{'a': [{'b': 3}, {'b': 1}]}",
		 "{'a': {'b': 2}}") < 0,
	      "through arrays");
	CHECK(SC("{'a': 1}", "{'a': 'b'}",
		 "{'a': {'$numberDecimal': '1E+100'}}") > 0,
	      "string > number");
	CHECK(mql_sort_compile(bson_get_data(bad), bad->len, &so, &err) < 0 &&
		  err.code == 15975,
	      "{a: 2}");
	CHECK(mql_sort_compile(bson_get_data(meta), meta->len, &so, &err) < 0 &&
		  err.code == 238,
	      "$meta");
	bson_destroy(bad);
	bson_destroy(meta);
}

int main(void)
{
	test_projection();
	test_sort();
	return mt_done("unit_mql_project");
}
