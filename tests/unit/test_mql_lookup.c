/* test_mql_lookup.c - kvd/mongo's $lookup stage (agg_lookup.c) over a
 * foreign reader of in-memory collections: the results of MongoDB's
 * $lookup manual page, the queries it asks its reader for (an $eq, an $in
 * for several values, an $or of $eq when one is a regular expression, as
 * MongoDB's makeMatchStageFromInput), the two ways of reading (per input
 * document with an index, once and held without), its bounds (292, 4568,
 * 10334), its errors for malformed stages, and what explain asks of a
 * pipeline (mql_pipeline_lookup). */
#include "mql_agg.h"
#include "mql_match.h"
#include "mqltest.h"

/* The foreign side: collections of a JSON document {name: [docs]}. */
struct foreign {
	bson_t *colls;
	int indexed; /* what indexed() answers */
	int opens, reads;
	char last[512]; /* the last query asked for, as JSON */
};

struct fread {
	struct foreign *f;
	struct mql_match *m;
	bson_iter_t it;
	bool any;
};

static int f_indexed(void *ctx, const char *coll, const char *field,
		     struct mql_error *err)
{
	struct foreign *f = ctx;

	(void)coll;
	(void)field;
	(void)err;
	return f->indexed;
}

static int f_open(void *ctx, const char *coll, const uint8_t *filter,
		  uint32_t len, void **rd, struct mql_error *err)
{
	struct foreign *f = ctx;
	/* a bson_iter_t inside: libbson aligns it to 128 bytes */
	struct fread *r = BSON_ALIGNED_ALLOC0(struct fread);
	bson_t q;
	char *s;

	r->f = f;
	f->opens++;
	bson_init_static(&q, filter, len);
	s = S(&q);
	snprintf(f->last, sizeof(f->last), "%s", s);
	bson_free(s);
	if (mql_match_compile(filter, len, &r->m, err) < 0) {
		bson_free(r);
		return -1;
	}
	r->any = bson_iter_init_find(&r->it, f->colls, coll) &&
		 bson_iter_recurse(&r->it, &r->it);
	*rd = r;
	return 0;
}

static int f_next(void *rd, const uint8_t **doc, uint32_t *len,
		  struct mql_error *err)
{
	struct fread *r = rd;

	(void)err;
	while (r->any && bson_iter_next(&r->it)) {
		bson_iter_document(&r->it, len, doc);
		r->f->reads++;
		if (mql_match_doc(r->m, *doc, *len, NULL))
			return 1;
	}
	return 0;
}

static void f_close(void *rd)
{
	struct fread *r = rd;

	mql_match_free(r->m);
	bson_free(r);
}

/* The input documents: an array's elements. */
static int src_next(void *ctx, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err)
{
	bson_iter_t *it = ctx;

	(void)err;
	if (!bson_iter_next(it))
		return 0;
	bson_iter_document(it, len, doc);
	return 1;
}

static struct mql_agg_opts opts;

/* Run pipeline over docs with f (NULL: no reader); the results as JSON,
 * or "E<code> <message>". */
static char *run(const char *pipeline, const char *docs, struct foreign *f)
{
	char *pj = bson_strdup_printf("{'p': %s}", pipeline);
	char *dj = bson_strdup_printf("{'d': %s}", docs);
	bson_t *pb = J(pj), *db = J(dj), res = BSON_INITIALIZER, wrap;
	bson_value_t pv = V(pb);
	struct mql_agg_foreign fa = {f, f_indexed, f_open, f_next, f_close};
	struct mql_pipeline *p = NULL;
	struct mql_agg_cursor *c = NULL;
	struct mql_error err = {0};
	const uint8_t *d;
	uint32_t l, n = 0;
	bson_iter_t it;
	char *out, *s;
	int rc;

	bson_iter_init_find(&it, db, "d");
	bson_iter_recurse(&it, &it);
	rc = mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len,
				  &opts, &p, &err);
	if (rc == 0)
		rc = mql_agg_open(p, 0, src_next, &it, &c, &err);
	if (rc == 0 && f)
		mql_agg_set_foreign(c, &fa);
	while (rc == 0 && (rc = mql_agg_next(c, &d, &l, &err)) > 0) {
		bson_t doc;
		char key[16];

		bson_init_static(&doc, d, l);
		snprintf(key, sizeof(key), "%u", n++);
		bson_append_document(&res, key, -1, &doc);
		rc = 0;
	}
	if (rc < 0) {
		out = bson_strdup_printf("E%d %s", err.code, err.msg);
	} else {
		bson_init(&wrap);
		bson_append_array(&wrap, "r", 1, &res);
		s = S(&wrap);
		out = bson_strndup(s + 8, strlen(s) - 10);
		bson_free(s);
		bson_destroy(&wrap);
	}
	mql_agg_close(c);
	mql_pipeline_free(p);
	bson_destroy(&res);
	bson_destroy(pb);
	bson_destroy(db);
	bson_free(pj);
	bson_free(dj);
	return out;
}

/* JSON as S() writes it. */
static char *norm(const char *json)
{
	char *wj = bson_strdup_printf("{'r': %s}", json);
	bson_t *w = J(wj);
	char *ws = S(w), *exp = bson_strndup(ws + 8, strlen(ws) - 10);

	bson_free(ws);
	bson_destroy(w);
	bson_free(wj);
	return exp;
}

static void check(const char *pipeline, const char *docs, struct foreign *f,
		  const char *want)
{
	char *got = run(pipeline, docs, f);

	if (want[0] == 'E') {
		CHECK(strncmp(got, want, strlen(want)) == 0,
		      "%s: got %s, want %s", pipeline, got, want);
	} else {
		char *exp = norm(want);

		CHECK(strcmp(got, exp) == 0, "%s:\n  got  %s\n  want %s",
		      pipeline, got, exp);
		bson_free(exp);
	}
	bson_free(got);
}

static const char *ORDERS = "[{'_id': 1, 'item': 'almonds', 'price': 12, "
			    "'quantity': 2}, {'_id': 2, 'item': 'pecans', "
			    "'price': 20, 'quantity': 1}, {'_id': 3}]";
static const char *COLLS =
    "{'inventory': [{'_id': 1, 'sku': 'almonds', 'instock': 120}, "
    "{'_id': 2, 'sku': 'bread', 'instock': 80}, "
    "{'_id': 3, 'sku': 'cashews', 'instock': 60}, "
    "{'_id': 4, 'sku': 'pecans', 'instock': 70}, "
    "{'_id': 5, 'sku': null, 'description': 'Incomplete'}, {'_id': 6}],"
    " 'members': [{'_id': 1, 'name': 'artie'}, {'_id': 2, 'name': "
    "'giraffe'}, {'_id': 3, 'name': 'giraffe1'}, {'_id': 4, 'name': "
    "'panda'}, {'_id': 5, 'name': 'pandabear'}, {'_id': 6, 'name': "
    "'giraffe2'}],"
    " 'pats': [{'_id': 1, 'p': {'$regularExpression': {'pattern': '^a', "
    "'options': ''}}}, {'_id': 2, 'p': 'abc'}, {'_id': 3, 'p': 'b'}]}";

#define LK(from, local, foreign, as)                                           \
	"[{'$lookup': {'from': '" from "', 'localField': '" local              \
	"', 'foreignField': '" foreign "', 'as': '" as "'}}]"

/* "Perform a Single Equality Join with $lookup", both ways of reading. */
static void test_manual(void)
{
	static const char *want =
	    "[{'_id': 1, 'item': 'almonds', 'price': 12, 'quantity': 2, "
	    "'inv': [{'_id': 1, 'sku': 'almonds', 'instock': 120}]}, "
	    "{'_id': 2, 'item': 'pecans', 'price': 20, 'quantity': 1, "
	    "'inv': [{'_id': 4, 'sku': 'pecans', 'instock': 70}]}, "
	    "{'_id': 3, 'inv': [{'_id': 5, 'sku': null, 'description': "
	    "'Incomplete'}, {'_id': 6}]}]";
	struct foreign f = {J(COLLS), 1, 0, 0, ""};

	check(LK("inventory", "item", "sku", "inv"), ORDERS, &f, want);
	CHECK(f.opens == 3, "indexed: one read per document, got %d", f.opens);
	CHECK(strcmp(f.last, "{ 'sku' : { '$eq' : null } }") == 0,
	      "a missing localField asks for null: %s", f.last);
	f.indexed = 0;
	f.opens = f.reads = 0;
	check(LK("inventory", "item", "sku", "inv"), ORDERS, &f, want);
	CHECK(f.opens == 1 && f.reads == 6,
	      "held: read once, got %d opens %d reads", f.opens, f.reads);
	CHECK(strcmp(f.last, "{ }") == 0, "held: the whole collection: %s",
	      f.last);
	/* "Use $lookup with an Array" */
	f.indexed = 1;
	check(LK("members", "list", "name", "e"),
	      "[{'_id': 1, 'list': ['giraffe2', 'pandabear', 'artie']}]", &f,
	      "[{'_id': 1, 'list': ['giraffe2', 'pandabear', 'artie'], 'e': "
	      "[{'_id': 1, 'name': 'artie'}, {'_id': 5, 'name': 'pandabear'}, "
	      "{'_id': 6, 'name': 'giraffe2'}]}]");
	CHECK(strstr(f.last, "'$in' : [ 'giraffe2', 'pandabear', 'artie' ]"),
	      "an array asks with $in: %s", f.last);
	/* an unknown collection joins nothing */
	check(LK("nosuch", "item", "sku", "x"), "[{'_id': 1, 'item': 'a'}]", &f,
	      "[{'_id': 1, 'item': 'a', 'x': []}]");
	bson_destroy(f.colls);
}

static void test_values(void)
{
	struct foreign f = {J(COLLS), 0, 0, 0, ""};

	/* a regular expression joins as a value, never as a pattern:
	 * held (hash join), then read through the index */
	for (int ix = 0; ix < 2; ix++) {
		f.indexed = ix;
		check(LK("pats", "v", "p", "j"),
		      "[{'_id': 1, 'v': [{'$regularExpression': "
		      "{'pattern': '^a', 'options': ''}}, 'b']}]",
		      &f,
		      "[{'_id': 1, 'v': [{'$regularExpression': "
		      "{'pattern': '^a', 'options': ''}}, 'b'], "
		      "'j': [{'_id': 1, 'p': {'$regularExpression': "
		      "{'pattern': '^a', 'options': ''}}}, "
		      "{'_id': 3, 'p': 'b'}]}]");
	}
	CHECK(strncmp(f.last, "{ '$or' : [ { 'p' : { '$eq'", 27) == 0,
	      "a regex asks with an $or of $eq: %s", f.last);
	/* values through arrays of documents; an empty array is null */
	check("[{'$lookup': {'from': 'members', 'localField': 'a.n', "
	      "'foreignField': 'name', 'as': 'j'}}, {'$project': {'j.name': "
	      "1}}]",
	      "[{'_id': 1, 'a': [{'n': 'panda'}, {'n': ['artie']}, {'m': 1}]},"
	      " {'_id': 2, 'a': []}]",
	      &f,
	      "[{'_id': 1, 'j': [{'name': 'artie'}, {'name': 'panda'}]}, "
	      "{'_id': 2, 'j': []}]");
	/* a dotted as makes documents on its way, replacing a scalar */
	check(LK("members", "n", "name", "x.y"),
	      "[{'_id': 1, 'n': 'panda', "
	      "'x': 5}]",
	      &f,
	      "[{'_id': 1, 'n': 'panda', 'x': {'y': [{'_id': 4, 'name': "
	      "'panda'}]}}]");
	bson_destroy(f.colls);
}

/* The held collection's hash join gives what matching every document
 * gives (the reader's answer with indexed = 1 here): equal numbers of
 * other types, NaN, null, undefined and missing, arrays as elements and
 * as whole values, paths through arrays of documents. */
static void test_held_equals_matching(void)
{
	static const char *colls =
	    "{'f': [{'_id': 1, 'k': 1}, {'_id': 2, 'k': 1.0}, {'_id': 3, "
	    "'k': {'$numberLong': '1'}}, {'_id': 4, 'k': {'$numberDecimal': "
	    "'1.00'}}, {'_id': 5, 'k': {'$numberDouble': 'NaN'}}, {'_id': 6, "
	    "'k': null}, {'_id': 7, 'k': {'$undefined': true}}, {'_id': 8}, "
	    "{'_id': 9, 'k': [1, 2]}, {'_id': 10, 'k': [[1, 2], 3]}, {'_id': "
	    "11, 'k': []}, {'_id': 12, 'k': [null]}, {'_id': 13, 'k': 'a'}, "
	    "{'_id': 14, 'k': {'x': 1}}, {'_id': 15, 'k': [{'x': 1}]}], "
	    "'g': [{'_id': 1, 'a': [{'b': 1}, {'c': 2}]}, {'_id': 2, 'a': "
	    "{'b': [2, 3]}}, {'_id': 3, 'a': [1, 2]}, {'_id': 4, 'a': [{'b': "
	    "[null]}]}]}";
	static const char *locals[] = {
	    "[{'_id': 1, 'k': 1}]",
	    "[{'_id': 1, 'k': {'$numberDecimal': '1'}}]",
	    "[{'_id': 1, 'k': {'$numberDouble': 'NaN'}}]",
	    "[{'_id': 1}]",
	    "[{'_id': 1, 'k': null}]",
	    "[{'_id': 1, 'k': [[1, 2]]}]",
	    "[{'_id': 1, 'k': [2, 'a', 3]}]",
	    "[{'_id': 1, 'k': []}]",
	    "[{'_id': 1, 'k': {'x': 1}}]",
	    "[{'_id': 1, 'k': [[]]}]",
	};
	static const char *pipes[] = {LK("f", "k", "k", "j"),
				      LK("g", "k", "a.b", "j")};
	struct foreign f = {J(colls), 1, 0, 0, ""};

	for (size_t p = 0; p < 2; p++) {
		for (size_t i = 0; i < sizeof(locals) / sizeof(*locals); i++) {
			char *want, *got;

			f.indexed = 1;
			want = run(pipes[p], locals[i], &f);
			f.indexed = 0;
			got = run(pipes[p], locals[i], &f);
			CHECK(want[0] != 'E' && strcmp(got, want) == 0,
			      "%s over %s: held %s, matching %s", pipes[p],
			      locals[i], got, want);
			bson_free(want);
			bson_free(got);
		}
	}
	/* and what MongoDB's equality says for two of them */
	check(LK("f", "k", "k", "j"), "[{'_id': 0}]", &f,
	      "[{'_id': 0, 'j': [{'_id': 6, 'k': null}, {'_id': 7, 'k': "
	      "{'$undefined': true}}, {'_id': 8}, {'_id': 12, 'k': [null]}]}]");
	check("[{'$lookup': {'from': 'f', 'localField': 'k', 'foreignField': "
	      "'k', 'as': 'j'}}, {'$project': {'j._id': 1}}]",
	      "[{'_id': 0, 'k': 1}]", &f,
	      "[{'_id': 0, 'j': [{'_id': 1}, {'_id': 2}, {'_id': 3}, {'_id': "
	      "4}, {'_id': 9}]}]");
	bson_destroy(f.colls);
}

/* The pipeline forms without let: over the equality's matches (concise
 * correlated), or over the whole collection (uncorrelated, read once). */
static void test_pipelines(void)
{
	struct foreign f = {J(COLLS), 1, 0, 0, ""};

	check("[{'$lookup': {'from': 'inventory', 'localField': 'item', "
	      "'foreignField': 'sku', 'pipeline': [{'$project': {'_id': 0, "
	      "'instock': 1}}], 'as': 'inv'}}]",
	      ORDERS, &f,
	      "[{'_id': 1, 'item': 'almonds', 'price': 12, 'quantity': 2, "
	      "'inv': [{'instock': 120}]}, {'_id': 2, 'item': 'pecans', "
	      "'price': 20, 'quantity': 1, 'inv': [{'instock': 70}]}, "
	      "{'_id': 3, 'inv': [{}, {}]}]");
	f.indexed = 0;
	check("[{'$lookup': {'from': 'members', 'localField': 'l', "
	      "'foreignField': 'name', 'pipeline': [{'$count': 'n'}], 'as': "
	      "'c'}}]",
	      "[{'_id': 1, 'l': ['artie', 'panda', 'nobody']}]", &f,
	      "[{'_id': 1, 'l': ['artie', 'panda', 'nobody'], 'c': [{'n': "
	      "2}]}]");
	f.opens = 0;
	check("[{'$lookup': {'from': 'inventory', 'pipeline': [{'$match': "
	      "{'instock': {'$gte': 70}}}, {'$project': {'sku': 1}}], 'as': "
	      "'big'}}, {'$project': {'big': 1}}]",
	      "[{'_id': 1}, {'_id': 2}]", &f,
	      "[{'_id': 1, 'big': [{'_id': 1, 'sku': 'almonds'}, {'_id': 2, "
	      "'sku': 'bread'}, {'_id': 4, 'sku': 'pecans'}]}, {'_id': 2, "
	      "'big': [{'_id': 1, 'sku': 'almonds'}, {'_id': 2, 'sku': "
	      "'bread'}, {'_id': 4, 'sku': 'pecans'}]}]");
	CHECK(f.opens == 1, "uncorrelated: read once, %d", f.opens);
	/* a $lookup inside the pipeline reads through the same reader */
	check("[{'$lookup': {'from': 'inventory', 'localField': 'item', "
	      "'foreignField': 'sku', 'pipeline': [{'$lookup': {'from': "
	      "'members', 'localField': 'sku', 'foreignField': 'name', 'as': "
	      "'m'}}, {'$project': {'m': 1, '_id': 0}}], 'as': 'inv'}}, "
	      "{'$match': {'_id': 1}}, {'$project': {'inv': 1}}]",
	      ORDERS, &f, "[{'_id': 1, 'inv': [{'m': []}]}]");
	bson_destroy(f.colls);
}

/* A collection of n documents {_id: i, k: 1, pad: <size bytes>}. */
static bson_t *padded(int n, size_t size)
{
	bson_t *b = bson_new(), arr, d;
	char *pad = bson_malloc(size + 1);
	char key[16];

	memset(pad, 'p', size);
	pad[size] = '\0';
	bson_append_array_begin(b, "big", -1, &arr);
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%d", i);
		bson_append_document_begin(&arr, key, -1, &d);
		BSON_APPEND_INT32(&d, "_id", i);
		BSON_APPEND_INT32(&d, "k", 1);
		BSON_APPEND_UTF8(&d, "pad", pad);
		bson_append_document_end(&arr, &d);
	}
	bson_append_array_end(b, &arr);
	bson_free(pad);
	return b;
}

/* Whether the join of docs with big runs without an error. */
static void fits(struct foreign *f, const char *docs, bool want)
{
	char *got = run(LK("big", "k", "k", "j"), docs, f);

	CHECK((got[0] != 'E') == want, "fits %d: %.60s", want, got);
	bson_free(got);
}

static void test_bounds(void)
{
	struct foreign f = {padded(2, 9u << 20), 1, 0, 0, ""};

	check(LK("big", "k", "k", "j"), "[{'_id': 1, 'k': 1}]", &f,
	      "E4568 Total size of documents in big matching pipeline's "
	      "$lookup stage exceeds 16793600 bytes");
	f.indexed = 0;
	check(LK("big", "k", "k", "j"), "[{'_id': 1, 'k': 1}]", &f, "E4568 ");
	bson_destroy(f.colls);
	/* one 12 MiB match fits an array, not with a 5 MiB document */
	f.colls = padded(1, 12u << 20);
	fits(&f, "[{'_id': 1, 'k': 1}]", true);
	{
		char *pad = bson_malloc((5u << 20) + 1);
		char *docs;

		memset(pad, 'q', 5u << 20);
		pad[5u << 20] = '\0';
		docs = bson_strdup_printf("[{'_id': 1, 'k': 1, 'pad': '%s'}]",
					  pad);
		check(LK("big", "k", "k", "j"), docs, &f, "E10334 ");
		bson_free(docs);
		bson_free(pad);
	}
	/* a held collection within lookup_mem, then past it */
	opts.lookup_mem = 20u << 20;
	f.indexed = 0;
	fits(&f, "[{'_id': 1, 'k': 1}]", true);
	bson_destroy(f.colls);
	f.colls = padded(3, 8u << 20);
	check(LK("big", "k", "k", "j"), "[{'_id': 1, 'k': 7}]", &f,
	      "E292 $lookup exceeded the memory limit of 20971520 bytes");
	f.indexed = 1; /* an index reads only the matches */
	check(LK("big", "k", "k", "j"), "[{'_id': 1, 'k': 7}]", &f,
	      "[{'_id': 1, 'k': 7, 'j': []}]");
	opts.lookup_mem = 0;
	bson_destroy(f.colls);
	/* no reader */
	check(LK("big", "k", "k", "j"), "[{'_id': 1}]", NULL, "E238 ");
	check(LK("big", "k", "k", "j"), "[]", NULL, "[]");
}

static void test_errors(void)
{
	static const struct {
		const char *spec;
		const char *want;
	} cases[] = {
	    {"1", "E9 the $lookup specification must be an Object"},
	    {"{'from': 'a', 'localField': 'b', 'foreignField': 'c'}",
	     "E9 must specify 'as' field for a $lookup"},
	    {"{'from': 'a', 'localField': 'b', 'as': 'c'}",
	     "E9 $lookup requires either 'pipeline' or both 'localField' and "
	     "'foreignField' to be specified"},
	    {"{'from': 1, 'localField': 'b', 'foreignField': 'c', 'as': 'd'}",
	     "E9 $lookup 'from' field must be a string, but found int"},
	    {"{'from': 'a', 'localField': 1, 'foreignField': 'c', 'as': 'd'}",
	     "E9 $lookup argument 'localField' must be a string, found int"},
	    {"{'from': 'a', 'x': 'b', 'foreignField': 'c', 'as': 'd'}",
	     "E9 unknown argument to $lookup: x"},
	    {"{'localField': 'b', 'foreignField': 'c', 'as': 'd'}", "E9 "},
	    {"{'from': 'a', 'localField': 'b', 'foreignField': 'c', 'as': "
	     "'d', 'let': {}}",
	     "E9 $lookup with a 'let' argument must also specify 'pipeline'"},
	    {"{'from': '', 'localField': 'b', 'foreignField': 'c', 'as': 'd'}",
	     "E73 "},
	    {"{'from': 'a', 'localField': 'b', 'foreignField': 'c', 'as': "
	     "'$d'}",
	     "E16410 "},
	    {"{'from': 'a', 'localField': 'b.', 'foreignField': 'c', 'as': "
	     "'d'}",
	     "E15998 "},
	    {"{'from': 'a', 'localField': 'b', 'foreignField': '', 'as': 'd'}",
	     "E9 $lookup requires either"},
	    {"{'from': 'a', 'localField': 'b', 'foreignField': 'c', 'as': ''}",
	     "E9 must specify 'as' field for a $lookup"},
	    {"{'from': 'a', 'let': {}, 'pipeline': [], 'as': 'd'}",
	     "E238 $lookup with 'let' is not supported by kvd"},
	    {"{'from': 'a', 'pipeline': {}, 'as': 'd'}",
	     "E14 'pipeline' option must be specified as an array"},
	    {"{'from': 'a', 'pipeline': [1], 'as': 'd'}",
	     "E14 Each element of the 'pipeline' array must be an object"},
	    {"{'from': 'a', 'pipeline': [{'$bogus': 1}], 'as': 'd'}",
	     "E40324 "},
	    {"{'from': 'a', 'localField': 'b', 'pipeline': [], 'as': 'd'}",
	     "E9 $lookup requires both or neither of 'localField' and "
	     "'foreignField' to be specified"},
	    {"{'from': {'db': 'x', 'coll': 'a'}, 'localField': 'b', "
	     "'foreignField': 'c', 'as': 'd'}",
	     "E238 "},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *p =
		    bson_strdup_printf("[{'$lookup': %s}]", cases[i].spec);

		check(p, "[]", NULL, cases[i].want);
		bson_free(p);
	}
}

static void test_explain_info(void)
{
	bson_t *pb = J("{'p': [{'$match': {'a': 1}}, {'$lookup': {'from': "
		       "'f', 'localField': 'a', 'foreignField': 'b.c', 'as': "
		       "'x'}}, {'$limit': 1}, {'$lookup': {'from': 'g', "
		       "'localField': 'a', 'foreignField': 'k', 'as': 'y'}}]}");
	bson_value_t pv = V(pb);
	struct mql_pipeline *p;
	struct mql_error err;
	const char *coll, *field;
	size_t at;

	mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len, NULL,
			     &p, &err);
	CHECK(mql_pipeline_lookup(p, 0, 0, &coll, &field, &at) &&
		  !strcmp(coll, "f") && !strcmp(field, "b.c") && at == 1,
	      "first $lookup");
	CHECK(mql_pipeline_lookup(p, 1, 1, &coll, &field, &at) &&
		  !strcmp(coll, "g") && !strcmp(field, "k") && at == 3,
	      "second $lookup");
	CHECK(!mql_pipeline_lookup(p, 2, 1, &coll, &field, &at),
	      "no third $lookup");
	mql_pipeline_free(p);
	bson_destroy(pb);
}

int main(void)
{
	test_manual();
	test_values();
	test_held_equals_matching();
	test_pipelines();
	test_bounds();
	test_errors();
	test_explain_info();
	return mt_done("unit_mql_lookup");
}
