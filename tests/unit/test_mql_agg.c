/* test_mql_agg.c - kvd/mongo's aggregation executor against the results
 * MongoDB's documentation gives ("$group", "$unwind", "$sortByCount",
 * "$count", "$sort", "$limit", the accumulators' pages), its errors for
 * malformed stages, its memory limits, and what a planner and a cursor
 * rely on (leading stages, early stop, getMore). */
#include "mql_agg.h"
#include "mqltest.h"

/* The caller's documents: the elements of an array, counted as read. */
struct src {
	bson_iter_t it;
	int reads;
	int fail_at; /* report an error at this read (0: never) */
};

static int src_next(void *ctx, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err)
{
	struct src *s = ctx;

	if (++s->reads == s->fail_at)
		return mql_error_set(err, 6, "shard unreachable");
	if (!bson_iter_next(&s->it))
		return 0;
	bson_iter_document(&s->it, len, doc);
	return 1;
}

static const struct mql_agg_opts *opts;
static bool stream; /* the source yields in its first $group's order */
static bson_t last; /* the results of the last run, {"0": doc, ...} */

/* Run pipeline (a JSON array) over docs (a JSON array) from stage `from`;
 * the results as a JSON array, or "E<code> <message>". */
static char *run_from(const char *pipeline, const char *docs, size_t from,
		      struct src *sp)
{
	char *pj = bson_strdup_printf("{'p': %s}", pipeline);
	char *dj = bson_strdup_printf("{'d': %s}", docs);
	bson_t *pb = J(pj), *db = J(dj), res = BSON_INITIALIZER;
	bson_value_t pv = V(pb);
	struct mql_pipeline *p = NULL;
	struct mql_agg_cursor *c = NULL;
	struct mql_error err = {0};
	struct src local = {0}, *s = sp ? sp : &local;
	const uint8_t *d;
	uint32_t l, n = 0;
	char *out;
	int rc;

	bson_iter_init_find(&s->it, db, "d");
	bson_iter_recurse(&s->it, &s->it);
	rc = mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len,
				  opts, &p, &err);
	if (rc == 0)
		rc = mql_agg_open(p, from, src_next, s, &c, &err);
	if (rc == 0 && stream)
		mql_agg_stream_group(c);
	while (rc == 0 && (rc = mql_agg_next(c, &d, &l, &err)) > 0) {
		bson_t doc;
		char key[16];

		bson_init_static(&doc, d, l);
		snprintf(key, sizeof(key), "%u", n++);
		bson_append_document(&res, key, -1, &doc);
		rc = 0;
	}
	bson_reinit(&last);
	bson_concat(&last, &res);
	if (rc < 0) {
		out = bson_strdup_printf("E%d %s", err.code, err.msg);
	} else {
		bson_t wrap = BSON_INITIALIZER;
		char *s2;

		bson_append_array(&wrap, "r", 1, &res);
		s2 = S(&wrap);
		/* {'r': [...]} -> [...] */
		out = bson_strndup(s2 + 8, strlen(s2) - 10);
		bson_free(s2);
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

/* want: a JSON array written like J()'s input, or "E<code> <message
 * prefix>". */
static void R2(const char *pipeline, const char *docs, size_t from,
	       const char *want)
{
	char *got = run_from(pipeline, docs, from, NULL);

	if (want[0] == 'E') {
		CHECK(strncmp(got, want, strlen(want)) == 0,
		      "%s: got %s, want %s", pipeline, got, want);
	} else {
		char *wj = bson_strdup_printf("{'r': %s}", want);
		bson_t *w = J(wj);
		char *ws = S(w);
		char *exp = bson_strndup(ws + 8, strlen(ws) - 10);

		CHECK(strcmp(got, exp) == 0, "%s:\n  got  %s\n  want %s",
		      pipeline, got, exp);
		bson_free(exp);
		bson_free(ws);
		bson_destroy(w);
		bson_free(wj);
	}
	bson_free(got);
}

#define R(pipeline, docs, want) R2(pipeline, docs, 0, want)

/* "$group" and the accumulators' pages: the sales collection. */
static const char *SALES =
    "[{'_id': 1, 'item': 'abc', 'price': {'$numberDecimal': '10'}, "
    "'quantity': 2, 'date': {'$date': '2014-03-01T08:00:00Z'}},"
    "{'_id': 2, 'item': 'jkl', 'price': {'$numberDecimal': '20'}, "
    "'quantity': 1, 'date': {'$date': '2014-03-01T09:00:00Z'}},"
    "{'_id': 3, 'item': 'xyz', 'price': {'$numberDecimal': '5'}, "
    "'quantity': 10, 'date': {'$date': '2014-03-15T09:00:00Z'}},"
    "{'_id': 4, 'item': 'xyz', 'price': {'$numberDecimal': '5'}, "
    "'quantity': 20, 'date': {'$date': '2014-04-04T11:21:39.736Z'}},"
    "{'_id': 5, 'item': 'abc', 'price': {'$numberDecimal': '10'}, "
    "'quantity': 10, 'date': {'$date': '2014-04-04T21:23:13.331Z'}},"
    "{'_id': 6, 'item': 'def', 'price': {'$numberDecimal': '7.5'}, "
    "'quantity': 5, 'date': {'$date': '2015-06-04T05:08:13Z'}},"
    "{'_id': 7, 'item': 'def', 'price': {'$numberDecimal': '7.5'}, "
    "'quantity': 10, 'date': {'$date': '2015-09-10T08:43:00Z'}},"
    "{'_id': 8, 'item': 'abc', 'price': {'$numberDecimal': '10'}, "
    "'quantity': 5, 'date': {'$date': '2016-02-06T20:20:13Z'}}]";

static void test_group(void)
{
	/* "Count the Number of Documents in a Collection" */
	R("[{'$group': {'_id': null, 'count': {'$count': {}}}}]", SALES,
	  "[{'_id': null, 'count': 8}]");
	/* "Group by null" (without $multiply) */
	R("[{'$group': {'_id': null, 'averageQuantity': {'$avg': "
	  "'$quantity'}, 'count': {'$sum': 1}}}]",
	  SALES, "[{'_id': null, 'averageQuantity': 7.875, 'count': 8}]");
	/* $avg's page: avgQuantity by item */
	R("[{'$group': {'_id': '$item', 'avgQuantity': {'$avg': "
	  "'$quantity'}}}]",
	  SALES,
	  "[{'_id': 'abc', 'avgQuantity': 5.666666666666667}, {'_id': 'jkl', "
	  "'avgQuantity': 1.0}, {'_id': 'xyz', 'avgQuantity': 15.0}, {'_id': "
	  "'def', 'avgQuantity': 7.5}]");
	/* $max's page: maxQuantity by item; $min the same way */
	R("[{'$group': {'_id': '$item', 'maxQuantity': {'$max': '$quantity'}, "
	  "'minQuantity': {'$min': '$quantity'}}}]",
	  SALES,
	  "[{'_id': 'abc', 'maxQuantity': 10, 'minQuantity': 2}, {'_id': "
	  "'jkl', 'maxQuantity': 1, 'minQuantity': 1}, {'_id': 'xyz', "
	  "'maxQuantity': 20, 'minQuantity': 10}, {'_id': 'def', "
	  "'maxQuantity': 10, 'minQuantity': 5}]");
	/* $first's page: sort by item and date, then the first date */
	R("[{'$sort': {'item': 1, 'date': 1}}, {'$group': {'_id': '$item', "
	  "'firstSale': {'$first': '$date'}, 'lastSale': {'$last': "
	  "'$date'}}}]",
	  SALES,
	  "[{'_id': 'abc', 'firstSale': {'$date': '2014-03-01T08:00:00Z'}, "
	  "'lastSale': {'$date': '2016-02-06T20:20:13Z'}}, {'_id': 'def', "
	  "'firstSale': {'$date': '2015-06-04T05:08:13Z'}, 'lastSale': "
	  "{'$date': '2015-09-10T08:43:00Z'}}, {'_id': 'jkl', 'firstSale': "
	  "{'$date': '2014-03-01T09:00:00Z'}, 'lastSale': {'$date': "
	  "'2014-03-01T09:00:00Z'}}, {'_id': 'xyz', 'firstSale': {'$date': "
	  "'2014-03-15T09:00:00Z'}, 'lastSale': {'$date': "
	  "'2014-04-04T11:21:39.736Z'}}]");
	/* $sum of the decimal prices: a decimal */
	R("[{'$group': {'_id': '$item', 'total': {'$sum': '$price'}, 'prices': "
	  "{'$addToSet': '$price'}}}, {'$sort': {'_id': 1}}]",
	  SALES,
	  "[{'_id': 'abc', 'total': {'$numberDecimal': '30'}, 'prices': "
	  "[{'$numberDecimal': '10'}]}, {'_id': 'def', 'total': "
	  "{'$numberDecimal': '15.0'}, 'prices': [{'$numberDecimal': "
	  "'7.5'}]}, {'_id': 'jkl', 'total': {'$numberDecimal': '20'}, "
	  "'prices': [{'$numberDecimal': '20'}]}, {'_id': 'xyz', 'total': "
	  "{'$numberDecimal': '10'}, 'prices': [{'$numberDecimal': '5'}]}]");
	/* "Pivot Data": $push of titles by author */
	R("[{'$group': {'_id': '$author', 'books': {'$push': '$title'}}}]",
	  "[{'_id': 8751, 'title': 'The Banquet', 'author': 'Dante', 'copies': "
	  "2}, {'_id': 8752, 'title': 'Divine Comedy', 'author': 'Dante', "
	  "'copies': 1}, {'_id': 8645, 'title': 'Eclogues', 'author': "
	  "'Dante', 'copies': 2}, {'_id': 7000, 'title': 'The Odyssey', "
	  "'author': 'Homer', 'copies': 10}, {'_id': 7020, 'title': 'Iliad', "
	  "'author': 'Homer', 'copies': 10}]",
	  "[{'_id': 'Dante', 'books': ['The Banquet', 'Divine Comedy', "
	  "'Eclogues']}, {'_id': 'Homer', 'books': ['The Odyssey', "
	  "'Iliad']}]");
	/* _id as a document of expressions; missing fields in it go */
	R("[{'$group': {'_id': {'a': '$a', 'b': '$b'}, 'n': {'$sum': 1}}}]",
	  "[{'a': 1, 'b': 2}, {'a': 1, 'b': 2.0}, {'a': 1}]",
	  "[{'_id': {'a': 1, 'b': 2}, 'n': 2}, {'_id': {'a': 1}, 'n': 1}]");
	/* numbers of every type are one group; a missing _id is null */
	R("[{'$group': {'_id': '$k', 'n': {'$sum': 1}}}]",
	  "[{'k': 1}, {'k': {'$numberLong': '1'}}, {'k': 1.0}, {'k': "
	  "{'$numberDecimal': '1.00'}}, {}, {'k': null}]",
	  "[{'_id': 1, 'n': 4}, {'_id': null, 'n': 2}]");
	R("[{'$group': {'_id': 'constant', 'n': {'$sum': 2}}}]", "[{}, {}, {}]",
	  "[{'_id': 'constant', 'n': 6}]");
	/* $sum: non-numbers ignored, none at all is 0; $avg of none is null;
	 * $min/$max skip null and missing; $first of a missing field null;
	 * $push and $addToSet skip missing values */
	R("[{'$group': {'_id': null, 's': {'$sum': '$x'}, 'a': {'$avg': "
	  "'$x'}, 'mn': {'$min': '$y'}, 'mx': {'$max': '$y'}, 'f': {'$first': "
	  "'$z'}, 'p': {'$push': '$y'}, 't': {'$addToSet': '$y'}}}]",
	  "[{'x': 'a', 'y': null}, {'x': [1, 2], 'y': 3}, {'y': 1}, {'y': "
	  "3.0}]",
	  "[{'_id': null, 's': 0, 'a': null, 'mn': 1, 'mx': 3, 'f': null, "
	  "'p': [null, 3, 1, 3.0], 't': [null, 3, 1]}]");
	/* $min/$max compare across types in MongoDB's order */
	R("[{'$group': {'_id': null, 'mn': {'$min': '$v'}, 'mx': {'$max': "
	  "'$v'}}}]",
	  "[{'v': 'x'}, {'v': 5}, {'v': {'a': 1}}, {'v': true}]",
	  "[{'_id': null, 'mn': 5, 'mx': true}]");
	/* on nothing, $group makes nothing */
	R("[{'$group': {'_id': null, 'n': {'$sum': 1}}}]", "[]", "[]");
}

static void test_sum_types(void)
{
	/* int32 overflowing becomes a long; a long overflowing a double;
	 * a double anywhere makes a double */
	R("[{'$group': {'_id': null, 's': {'$sum': '$v'}}}, {'$project': "
	  "{'_id': 0, 't': {'$literal': 1}, 's': 1}}]",
	  "[{'v': 2147483647}, {'v': 2147483647}]",
	  "[{'s': 4294967294, 't': 1}]");
	R("[{'$group': {'_id': null, 's': {'$sum': '$v'}}}]",
	  "[{'v': {'$numberLong': '9223372036854775807'}}, {'v': "
	  "{'$numberLong': '9223372036854775807'}}]",
	  "[{'_id': null, 's': 1.8446744073709552e+19}]");
	R("[{'$group': {'_id': null, 's': {'$sum': '$v'}}}]",
	  "[{'v': 1}, {'v': 0.5}]", "[{'_id': null, 's': 1.5}]");
	R("[{'$group': {'_id': null, 's': {'$sum': '$v'}}}]",
	  "[{'v': 0.1}, {'v': 0.2}, {'v': 0.3}]", "[{'_id': null, 's': 0.6}]");
	R("[{'$group': {'_id': null, 's': {'$avg': '$v'}}}]",
	  "[{'v': {'$numberDecimal': '1'}}, {'v': 2}]",
	  "[{'_id': null, 's': {'$numberDecimal': '1.5'}}]");
}

/* the output of {$group: {_id: null, s: {$sum: '$v'}}} holds the type */
static void test_sum_int_types(void)
{
	static const struct {
		const char *docs;
		bson_type_t t;
	} cases[] = {
	    {"[{'v': 1}, {'v': 2}]", BSON_TYPE_INT32},
	    {"[{'v': 2147483647}, {'v': 1}]", BSON_TYPE_INT64},
	    {"[{'v': {'$numberLong': '1'}}, {'v': 2}]", BSON_TYPE_INT64},
	    {"[]", BSON_TYPE_EOD},
	    {"[{'v': 'x'}]", BSON_TYPE_INT32},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *got = run_from("[{'$group': {'_id': null, 's': {'$sum': "
				     "'$v'}}}]",
				     cases[i].docs, 0, NULL);
		bson_iter_t it;
		bson_type_t t = BSON_TYPE_EOD;

		/* relaxed JSON hides int32 vs int64: ask libbson */
		if (bson_iter_init(&it, &last) &&
		    bson_iter_find_descendant(&it, "0.s", &it))
			t = bson_iter_type(&it);
		CHECK(t == cases[i].t, "$sum of %s: type %d, want %d",
		      cases[i].docs, t, cases[i].t);
		bson_free(got);
	}
}

/* "$unwind": the inventory examples */
static const char *INV =
    "[{'_id': 1, 'item': 'ABC', 'price': {'$numberDecimal': '80'}, "
    "'sizes': ['S', 'M', 'L']},"
    "{'_id': 2, 'item': 'EFG', 'price': {'$numberDecimal': '120'}, "
    "'sizes': []},"
    "{'_id': 3, 'item': 'IJK', 'price': {'$numberDecimal': '160'}, "
    "'sizes': 'M'},"
    "{'_id': 4, 'item': 'LMN', 'price': {'$numberDecimal': '10'}},"
    "{'_id': 5, 'item': 'XYZ', 'price': {'$numberDecimal': '5.75'}, "
    "'sizes': null}]";

static void test_unwind(void)
{
	R("[{'$unwind': '$sizes'}, {'$project': {'price': 0}}]", INV,
	  "[{'_id': 1, 'item': 'ABC', 'sizes': 'S'}, {'_id': 1, 'item': "
	  "'ABC', 'sizes': 'M'}, {'_id': 1, 'item': 'ABC', 'sizes': 'L'}, "
	  "{'_id': 3, 'item': 'IJK', 'sizes': 'M'}]");
	R("[{'$unwind': {'path': '$sizes', 'includeArrayIndex': "
	  "'arrayIndex'}}, {'$project': {'price': 0, 'item': 0}}]",
	  INV,
	  "[{'_id': 1, 'sizes': 'S', 'arrayIndex': 0}, {'_id': 1, 'sizes': "
	  "'M', 'arrayIndex': 1}, {'_id': 1, 'sizes': 'L', 'arrayIndex': 2}, "
	  "{'_id': 3, 'sizes': 'M', 'arrayIndex': null}]");
	R("[{'$unwind': {'path': '$sizes', 'preserveNullAndEmptyArrays': "
	  "true}}, {'$project': {'price': 0, 'item': 0}}]",
	  INV,
	  "[{'_id': 1, 'sizes': 'S'}, {'_id': 1, 'sizes': 'M'}, {'_id': 1, "
	  "'sizes': 'L'}, {'_id': 2}, {'_id': 3, 'sizes': 'M'}, {'_id': 4}, "
	  "{'_id': 5, 'sizes': null}]");
	/* a dotted path, and an index field in a subdocument */
	R("[{'$unwind': {'path': '$a.b', 'includeArrayIndex': 'a.i'}}]",
	  "[{'_id': 1, 'a': {'b': [7, 8], 'c': 1}}, {'_id': 2, 'a': [{'b': "
	  "[1]}]}]",
	  "[{'_id': 1, 'a': {'b': 7, 'c': 1, 'i': 0}}, {'_id': 1, 'a': {'b': "
	  "8, 'c': 1, 'i': 1}}]");
	/* "$sortByCount": the exhibits, after $unwind of their tags */
	R("[{'$unwind': '$tags'}, {'$sortByCount': '$tags'}]",
	  "[{'_id': 1, 'tags': ['painting', 'satire', 'Expressionism', "
	  "'caricature']}, {'_id': 2, 'tags': ['woodcut', 'Expressionism']}, "
	  "{'_id': 3, 'tags': ['oil', 'Surrealism', 'painting']}, {'_id': 4, "
	  "'tags': ['woodblock', 'ukiyo-e']}, {'_id': 5, 'tags': "
	  "['Surrealism', 'painting', 'oil']}, {'_id': 6, 'tags': ['oil', "
	  "'painting', 'abstract']}, {'_id': 7, 'tags': ['Expressionism', "
	  "'painting', 'oil']}, {'_id': 8, 'tags': ['abstract', "
	  "'painting']}]",
	  /* ties in the order first seen (MongoDB gives them in none) */
	  "[{'_id': 'painting', 'count': 6}, {'_id': 'oil', 'count': 4}, "
	  "{'_id': 'Expressionism', 'count': 3}, {'_id': 'Surrealism', "
	  "'count': 2}, {'_id': 'abstract', 'count': 2}, {'_id': 'satire', "
	  "'count': 1}, {'_id': 'caricature', 'count': 1}, {'_id': "
	  "'woodcut', 'count': 1}, {'_id': 'woodblock', 'count': 1}, {'_id': "
	  "'ukiyo-e', 'count': 1}]");
}

static const char *SCORES =
    "[{'_id': 1, 'subject': 'History', 'score': 88}, {'_id': 2, "
    "'subject': 'History', 'score': 92}, {'_id': 3, 'subject': 'History', "
    "'score': 97}, {'_id': 4, 'subject': 'History', 'score': 71}, {'_id': "
    "5, 'subject': 'History', 'score': 79}, {'_id': 6, 'subject': "
    "'History', 'score': 83}]";

static void test_stages(void)
{
	/* "$count": passing scores */
	R("[{'$match': {'score': {'$gt': 80}}}, {'$count': "
	  "'passing_scores'}]",
	  SCORES, "[{'passing_scores': 4}]");
	R("[{'$match': {'score': {'$gt': 100}}}, {'$count': 'n'}]", SCORES,
	  "[]");
	R("[{'$sort': {'score': -1}}, {'$skip': 1}, {'$limit': 2}, "
	  "{'$project': {'_id': 1}}]",
	  SCORES, "[{'_id': 2}, {'_id': 1}]");
	R("[{'$sort': {'score': 1}}, {'$limit': 2}, {'$project': {'_id': 1}}]",
	  SCORES, "[{'_id': 4}, {'_id': 5}]");
	R("[{'$skip': 5}, {'$project': {'_id': 1}}]", SCORES, "[{'_id': 6}]");
	R("[{'$skip': 50}]", SCORES, "[]");
	R("[{'$addFields': {'s2': '$score', 'subject': 'x'}}, {'$limit': 1}]",
	  SCORES, "[{'_id': 1, 'subject': 'x', 'score': 88, 's2': 88}]");
	R("[{'$set': {'k.j': 1}}, {'$unset': ['subject', 'score']}, "
	  "{'$limit': 1}]",
	  SCORES, "[{'_id': 1, 'k': {'j': 1}}]");
	R("[{'$unset': 'subject'}, {'$limit': 1}]", SCORES,
	  "[{'_id': 1, 'score': 88}]");
	/* stable ties: equal keys keep the input's order */
	R("[{'$sort': {'subject': 1}}, {'$limit': 3}, {'$project': {'_id': "
	  "1}}]",
	  SCORES, "[{'_id': 1}, {'_id': 2}, {'_id': 3}]");
	R("[{'$sort': {'subject': 1}}, {'$project': {'_id': 1}}]",
	  "[{'_id': 1}, {'_id': 2, 'subject': null}, {'_id': 3, 'subject': "
	  "[]}]",
	  "[{'_id': 3}, {'_id': 1}, {'_id': 2}]");
	R("[]", "[{'a': 1}]", "[{'a': 1}]");
}

static void test_errors(void)
{
	R("[{'$foo': 1}]", "[]",
	  "E40324 Unrecognized pipeline stage name: '$foo'");
	R("[{'$match': {}, '$limit': 1}]", "[]",
	  "E40323 A pipeline stage specification object must contain exactly "
	  "one field.");
	R("[{}]", "[]", "E40323 ");
	R("[1]", "[]",
	  "E14 Each element of the 'pipeline' array must be an object");
	R("[{'$lookup': {'from': 'x', 'let': {}, 'pipeline': [], 'as': 'y'}}]",
	  "[]", "E238 ");
	R("[{'$graphLookup': {}}]", "[]", "E238 ");
	R("[{'$match': 1}]", "[]",
	  "E15959 the match filter must be an expression in an object");
	R("[{'$match': {'a': {'$bogus': 1}}}]", "[]",
	  "E2 unknown operator: $bogus");
	R("[{'$project': 1}]", "[]", "E15969 ");
	R("[{'$project': {}}]", "[]", "E51272 ");
	R("[{'$addFields': 1}]", "[]", "E40272 ");
	R("[{'$unset': 1}]", "[]",
	  "E31002 $unset specification must be a string or an array");
	R("[{'$unset': [1]}]", "[]", "E31120 ");
	R("[{'$unset': []}]", "[]", "E31119 ");
	R("[{'$sort': 1}]", "[]",
	  "E15973 the $sort key specification must be an object");
	R("[{'$sort': {}}]", "[]",
	  "E15976 $sort stage must have at least one sort key");
	R("[{'$sort': {'a': 2}}]", "[]", "E15975 ");
	R("[{'$skip': 'a'}]", "[]",
	  "E15972 Argument to $skip must be a number not a string");
	R("[{'$skip': -1}]", "[]",
	  "E15956 Argument to $skip cannot be negative");
	R("[{'$limit': 0}]", "[]", "E15958 the limit must be positive");
	R("[{'$limit': 'x'}]", "[]",
	  "E15957 the limit must be specified as a number");
	R("[{'$count': ''}]", "[]", "E40157 ");
	R("[{'$count': 1}]", "[]", "E40156 ");
	R("[{'$count': '$n'}]", "[]",
	  "E40158 the count field cannot be a $-prefixed path");
	R("[{'$count': 'a.b'}]", "[]",
	  "E40160 the count field cannot contain '.'");
	R("[{'$group': 1}]", "[]",
	  "E15947 a group's fields must be specified in an object");
	R("[{'$group': {'n': {'$sum': 1}}}]", "[]",
	  "E15955 a group specification must include an _id");
	R("[{'$group': {'_id': null, 'n': {'$bogus': 1}}}]", "[]",
	  "E15952 unknown group operator '$bogus'");
	R("[{'$group': {'_id': null, 'n': 1}}]", "[]",
	  "E40234 The field 'n' must be an accumulator object");
	R("[{'$group': {'_id': null, 'a.b': {'$sum': 1}}}]", "[]",
	  "E40235 The field name 'a.b' cannot contain '.'");
	R("[{'$group': {'_id': null, 'n': {'$sum': 1, '$avg': 1}}}]", "[]",
	  "E40238 The field 'n' must specify one accumulator");
	R("[{'$group': {'_id': null, 'n': {'$sum': [1]}}}]", "[]",
	  "E40237 The $sum accumulator is a unary operator");
	R("[{'$group': {'_id': null, 'n': {'$count': 1}}}]", "[]", "E14 ");
	R("[{'$group': {'_id': null, 'n': {'$stdDevPop': '$a'}}}]", "[]",
	  "E238 ");
	R("[{'$group': {'_id': {'$add': [1, 2]}}}]", "[]", "E238 ");
	R("[{'$sortByCount': 'a'}]", "[]", "E40148 ");
	R("[{'$sortByCount': {'a': 1}}]", "[]", "E40147 ");
	R("[{'$sortByCount': 1}]", "[]", "E40149 ");
	R("[{'$unwind': 'sizes'}]", "[]",
	  "E28818 path option to $unwind stage should be prefixed with a '$': "
	  "sizes");
	R("[{'$unwind': 1}]", "[]", "E15981 ");
	R("[{'$unwind': {}}]", "[]",
	  "E28812 no path specified to $unwind stage");
	R("[{'$unwind': {'path': '$a', 'x': 1}}]", "[]",
	  "E28811 unrecognized option to $unwind stage: x");
	R("[{'$unwind': {'path': '$a', 'preserveNullAndEmptyArrays': 1}}]",
	  "[]", "E28809 ");
	R("[{'$unwind': {'path': '$a', 'includeArrayIndex': '$i'}}]", "[]",
	  "E28822 ");
	R("[{'$unwind': {'path': '$a', 'includeArrayIndex': ''}}]", "[]",
	  "E28810 ");
}

/* 1001 stages are refused, 1000 run */
static void test_length(void)
{
	for (int n = 1000; n <= 1001; n++) {
		size_t cap = (size_t)n * 24 + 16, off = 0;
		char *p = malloc(cap);

		off += (size_t)snprintf(p + off, cap - off, "[");
		for (int i = 0; i < n; i++)
			off += (size_t)snprintf(p + off, cap - off,
						"%s{'$skip': 0}", i ? "," : "");
		snprintf(p + off, cap - off, "]");
		R(p, "[{'a': 1}]",
		  n == 1000 ? "[{'a': 1}]"
			    : "E7749501 Pipeline length must be no longer "
			      "than 1000 stages.");
		free(p);
	}
}

/* A JSON array of n documents {_id: i, v: (i * 7919) % n, pad: 'x' * 40} */
static char *many(int n)
{
	size_t cap = (size_t)n * 96 + 16, off = 0;
	char *s = malloc(cap);

	off += (size_t)snprintf(s + off, cap - off, "[");
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(
		    s + off, cap - off,
		    "%s{'_id': %d, 'v': %d, 'pad': "
		    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'}",
		    i ? "," : "", i, (i * 7919) % n);
	snprintf(s + off, cap - off, "]");
	return s;
}

static void test_memory(void)
{
	struct mql_agg_opts small = {.sort_mem = 20000, .group_mem = 20000};
	char *docs = many(1000);

	opts = &small;
	/* 1000 documents of ~80 bytes do not fit 20000 bytes... */
	R("[{'$sort': {'v': 1}}]", docs,
	  "E292 Sort exceeded memory limit of 20000 bytes, but did not opt "
	  "in to external sorting.");
	/* ...but the first 3 of them do: the $limit makes a top-k */
	R("[{'$sort': {'v': -1}}, {'$limit': 3}, {'$project': {'v': 1}}]", docs,
	  "[{'_id': 321, 'v': 999}, {'_id': 642, 'v': 998}, {'_id': 963, "
	  "'v': 997}]");
	R("[{'$sort': {'v': 1}}, {'$skip': 2}, {'$limit': 2}, {'$project': "
	  "{'v': 1}}]",
	  docs, "[{'_id': 358, 'v': 2}, {'_id': 37, 'v': 3}]");
	R("[{'$group': {'_id': '$_id'}}]", docs,
	  "E292 Exceeded memory limit for $group, but didn't allow external "
	  "sort. Pass allowDiskUse:true to opt in.");
	R("[{'$group': {'_id': null, 'all': {'$push': '$pad'}}}]", docs,
	  "E292 Exceeded memory limit for $group");
	R("[{'$group': {'_id': {'$literal': 1}, 'n': {'$sum': 1}}}]", docs,
	  "[{'_id': 1, 'n': 1000}]");
	opts = NULL;
	R("[{'$group': {'_id': '$_id'}}, {'$count': 'n'}]", docs,
	  "[{'n': 1000}]");
	free(docs);
}

/* A $group fed in its _id's order emits each group as its key changes:
 * one group held at a time, equal numbers one group, array keys kept
 * aside and given last, an input out of order refused. */
static void test_stream(void)
{
	struct mql_agg_opts small = {.group_mem = 20000};
	char *docs = bson_strdup("[");
	struct mql_agg_lead lead;
	struct mql_pipeline *p;
	struct mql_error err;
	bson_t *pb;
	bson_value_t pv;

	for (int i = 0; i < 1000; i++) {
		char *d = bson_strdup_printf("%s%s{'_id': %d, 'v': %d}", docs,
					     i ? ", " : "", 1000 - i, i);

		bson_free(docs);
		docs = d;
	}
	{
		char *d = bson_strdup_printf("%s]", docs);

		bson_free(docs);
		docs = d;
	}
	opts = &small;
	R("[{'$group': {'_id': '$v', 'n': {'$sum': 1}}}, {'$count': 'n'}]",
	  docs, "E292 Exceeded memory limit for $group");
	stream = true;
	R("[{'$group': {'_id': '$v', 'n': {'$sum': 1}}}, {'$count': 'n'}]",
	  docs, "[{'n': 1000}]");
	R("[{'$group': {'_id': '$v', 'f': {'$first': '$_id'}}}, {'$limit': 2}]",
	  docs, "[{'_id': 0, 'f': 1000}, {'_id': 1, 'f': 999}]");
	opts = NULL;
	R("[{'$group': {'_id': '$k', 'ids': {'$push': '$_id'}}}]",
	  "[{'_id': 1}, {'_id': 2, 'k': null}, {'_id': 3, 'k': 1}, "
	  "{'_id': 4, 'k': 1.0}, {'_id': 5, 'k': [1, 2]}, {'_id': 6, 'k': "
	  "{'$numberLong': '2'}}, {'_id': 7, 'k': 'a'}, {'_id': 8, 'k': [1, "
	  "2]}]",
	  "[{'_id': null, 'ids': [1, 2]}, {'_id': 1, 'ids': [3, 4]}, {'_id': "
	  "2, 'ids': [6]}, {'_id': 'a', 'ids': [7]}, {'_id': [1, 2], 'ids': "
	  "[5, 8]}]");
	R("[{'$group': {'_id': '$k'}}]", "[{'k': 2}, {'k': 1}]",
	  "E1 $group's input was not in the order of its _id");
	/* after a $match the caller did */
	R2("[{'$match': {'k': {'$gt': 0}}}, {'$group': {'_id': '$k', 'n': "
	   "{'$sum': 1}}}]",
	   "[{'k': 1}, {'k': 1}, {'k': 3}]", 1,
	   "[{'_id': 1, 'n': 2}, {'_id': 3, 'n': 1}]");
	/* a stage other than a $group first: nothing changes */
	R("[{'$project': {'k': 1, '_id': 0}}]", "[{'k': 2}, {'k': 1}]",
	  "[{'k': 2}, {'k': 1}]");
	stream = false;
	bson_free(docs);
	/* the order a planner is offered */
	pb = J("{'p': [{'$match': {'a': 1}}, {'$group': {'_id': '$b.c', 'n': "
	       "{'$sum': 1}}}]}");
	pv = V(pb);
	mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len, NULL,
			     &p, &err);
	mql_pipeline_lead(p, &lead);
	{
		bson_t o;
		char *os;

		bson_init_static(&o, lead.group_order_bson,
				 lead.group_order_len);
		os = S(&o);
		CHECK(lead.group_order && strcmp(os, "{ 'b.c' : 1 }") == 0,
		      "group order %s", os);
		bson_free(os);
	}
	mql_pipeline_free(p);
	bson_destroy(pb);
	for (int i = 0; i < 4; i++) {
		static const char *const none[] = {
		    "{'p': [{'$group': {'_id': null}}]}",
		    "{'p': [{'$group': {'_id': '$$ROOT'}}]}",
		    "{'p': [{'$group': {'_id': {'a': '$a'}}}]}",
		    "{'p': [{'$sort': {'a': 1}}, {'$group': {'_id': '$a'}}]}",
		};

		pb = J(none[i]);
		pv = V(pb);
		mql_pipeline_compile(pv.value.v_doc.data,
				     pv.value.v_doc.data_len, NULL, &p, &err);
		mql_pipeline_lead(p, &lead);
		CHECK(!lead.group_order, "no group order: %s", none[i]);
		mql_pipeline_free(p);
		bson_destroy(pb);
	}
}

/* A source that fails: its error comes out of mql_agg_next. */
static void test_source_error(void)
{
	struct src s = {.fail_at = 3};
	char *got =
	    run_from("[{'$sort': {'a': 1}}]", "[{}, {}, {}, {}]", 0, &s);

	CHECK(strcmp(got, "E6 shard unreachable") == 0, "source error: %s",
	      got);
	bson_free(got);
}

/* The door pulls a batch, then more at getMore; $limit stops the reads. */
static void test_cursor(void)
{
	char *docs = many(100);
	char *dj = bson_strdup_printf("{'d': %s}", docs);
	bson_t *db = J(dj);
	bson_t *pb = J("{'p': [{'$match': {'v': {'$gte': 0}}}, {'$limit': "
		       "5}]}");
	bson_value_t pv = V(pb);
	struct mql_pipeline *p;
	struct mql_agg_cursor *c;
	struct mql_error err;
	struct src s = {0};
	const uint8_t *d;
	uint32_t l;
	int n = 0, rc;

	bson_iter_init_find(&s.it, db, "d");
	bson_iter_recurse(&s.it, &s.it);
	rc = mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len,
				  NULL, &p, &err);
	CHECK(rc == 0, "compile: %s", err.msg);
	mql_agg_open(p, 0, src_next, &s, &c, &err);
	for (int i = 0; i < 2; i++)
		n += mql_agg_next(c, &d, &l, &err) == 1;
	CHECK(n == 2 && s.reads == 2, "first batch: %d results, %d reads", n,
	      s.reads);
	while (mql_agg_next(c, &d, &l, &err) == 1)
		n++;
	CHECK(n == 5 && s.reads == 5, "getMore: %d results, %d reads", n,
	      s.reads);
	CHECK(mql_agg_next(c, &d, &l, &err) == 0 && s.reads == 5,
	      "after the end: no more reads");
	mql_agg_close(c);
	mql_pipeline_free(p);
	bson_destroy(pb);
	bson_destroy(db);
	bson_free(dj);
	free(docs);
}

static void test_lead(void)
{
	bson_t *pb = J("{'p': [{'$match': {'a': {'$gt': 1}}}, {'$sort': {'b': "
		       "-1}}, {'$skip': 2}, {'$limit': 3}, {'$project': {'a': "
		       "1}}]}");
	bson_value_t pv = V(pb);
	struct mql_pipeline *p;
	struct mql_agg_lead lead;
	struct mql_error err;
	bson_t m, s;
	char *ms, *ss;

	CHECK(mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len,
				   NULL, &p, &err) == 0,
	      "compile: %s", err.msg);
	mql_pipeline_lead(p, &lead);
	CHECK(mql_pipeline_nstages(p) == 5, "5 stages");
	CHECK(lead.match && lead.sort && lead.after_match == 1 &&
		  lead.after_sort == 2 && lead.sort_limit == 5,
	      "lead: match %p sort %p after %zu %zu limit %lld",
	      (void *)lead.match, (void *)lead.sort, lead.after_match,
	      lead.after_sort, (long long)lead.sort_limit);
	bson_init_static(&m, lead.match_bson, lead.match_len);
	bson_init_static(&s, lead.sort_bson, lead.sort_len);
	ms = S(&m);
	ss = S(&s);
	CHECK(strcmp(ms, "{ 'a' : { '$gt' : 1 } }") == 0, "match %s", ms);
	CHECK(strcmp(ss, "{ 'b' : -1 }") == 0, "sort %s", ss);
	bson_free(ms);
	bson_free(ss);
	mql_pipeline_free(p);
	bson_destroy(pb);
	/* the caller did the $match and the $sort: the rest runs on its
	 * (already filtered, sorted) documents */
	R2("[{'$match': {'a': {'$gt': 1}}}, {'$sort': {'b': -1}}, {'$skip': "
	   "1}, {'$project': {'_id': 0, 'b': 1}}]",
	   "[{'a': 0, 'b': 9}, {'a': 5, 'b': 1}, {'a': 5, 'b': 2}]", 2,
	   "[{'b': 1}, {'b': 2}]");
	R2("[{'$match': {'a': 1}}]", "[{'a': 2}]", 1, "[{'a': 2}]");
	R2("[{'$match': {'a': 1}}]", "[]", 2, "E2 ");
	/* a $sortByCount's $sort is no leading $sort */
	pb = J("{'p': [{'$sortByCount': '$a'}]}");
	pv = V(pb);
	mql_pipeline_compile(pv.value.v_doc.data, pv.value.v_doc.data_len, NULL,
			     &p, &err);
	mql_pipeline_lead(p, &lead);
	CHECK(!lead.match && !lead.sort && lead.sort_limit == -1,
	      "$sortByCount has no lead");
	mql_pipeline_free(p);
	bson_destroy(pb);
}

int main(void)
{
	bson_init(&last);
	test_group();
	test_sum_types();
	test_sum_int_types();
	test_unwind();
	test_stages();
	test_errors();
	test_length();
	test_memory();
	test_stream();
	test_source_error();
	test_cursor();
	test_lead();
	bson_destroy(&last);
	return mt_done("unit_mql_agg");
}
