/* test_mql_match.c - kvd/mongo's matcher against the results MongoDB's
 * documentation gives for each query operator (and its errors). */
#include <pthread.h>
#include <stdlib.h>

#include "mql_match.h"
#include "mql_value.h"

#include "mqltest.h"

static const struct {
	const char *filter, *doc;
	bool want;
} cases[] = {
    /* implicit equality: numbers of any type, arrays that contain it */
    {"{'a': 1}", "{'a': 1}", true},
    {"{'a': 1}", "{'a': 1.0}", true},
    {"{'a': 1}", "{'a': {'$numberLong': '1'}}", true},
    {"{'a': 1}", "{'a': {'$numberDecimal': '1.0'}}", true},
    {"{'a': 1}", "{'a': '1'}", false},
    {"{'a': 1}", "{'a': [2, 1]}", true},
    {"{'a': 1}", "{'a': [[1]]}", false},
    {"{'a': 1}", "{'b': 1}", false},
    {"{'a': [1, 2]}", "{'a': [1, 2]}", true},
    {"{'a': [1, 2]}", "{'a': [2, 1]}", false},
    {"{'a': [1, 2]}", "{'a': [[1, 2], 3]}", true},
    {"{'a': [1, 2]}", "{'a': 1}", false},
    {"{'a': {'b': 1}}", "{'a': {'b': 1}}", true},
    {"{'a': {'b': 1}}", "{'a': {'b': 1.0}}", true},
    {"{'a': {'b': 1}}", "{'a': {'b': 1, 'c': 2}}", false},
    {"{'a': {'b': 1, 'c': 2}}", "{'a': {'c': 2, 'b': 1}}", false},
    {"{'a': {'b': 1}}", "{'a': [{'b': 1}]}", true},
    {"{'a': 'x', 'b': 2}", "{'a': 'x', 'b': 2}", true},
    {"{'a': 'x', 'b': 2}", "{'a': 'x', 'b': 3}", false},
    /* dotted paths through documents and arrays */
    {"{'a.b': 1}", "{'a': {'b': 1}}", true},
    {"{'a.b': 1}", "{'a': [{'b': 2}, {'b': 1}]}", true},
    {"{'a.b': 1}", "{'a': {'b': [3, 1]}}", true},
    {"{'a.b': 1}", "{'a': [{'b': [2, 1]}]}", true},
    {"{'a.b': 1}", "{'a': [[{'b': 1}]]}", false},
    {"{'a.1': 5}", "{'a': [4, 5]}", true},
    {"{'a.0': 5}", "{'a': [4, 5]}", false},
    {"{'a.1.b': 2}", "{'a': [{'b': 1}, {'b': 2}]}", true},
    {"{'a.0.b': 2}", "{'a': [{'b': 1}, {'b': 2}]}", false},
    {"{'a.b.c': 3}", "{'a': [{'b': [{'c': 1}, {'c': 3}]}]}", true},
    /* null matches missing, null and undefined */
    {"{'a': null}", "{}", true},
    {"{'a': null}", "{'a': null}", true},
    {"{'a': null}", "{'a': {'$undefined': true}}", true},
    {"{'a': null}", "{'a': 0}", false},
    {"{'a': null}", "{'a': [1, null]}", true},
    {"{'a': null}", "{'a': []}", false},
    {"{'a.b': null}", "{'a': 1}", true},
    {"{'a.b': null}", "{'a': [{'b': 1}, {'c': 1}]}", true},
    {"{'a.b': null}", "{'a': [{'b': 1}]}", false},
    /* $eq $ne */
    {"{'a': {'$eq': [1]}}", "{'a': [1]}", true},
    {"{'a': {'$eq': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}",
     "{'a': 'x'}", false},
    {"{'a': {'$eq': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}",
     "{'a': {'$regularExpression': {'pattern': 'x', 'options': ''}}}", true},
    {"{'a': {'$ne': 1}}", "{'a': 2}", true},
    {"{'a': {'$ne': 1}}", "{'a': [1, 2]}", false},
    {"{'a': {'$ne': 1}}", "{'a': [2, 3]}", true},
    {"{'a': {'$ne': 1}}", "{}", true},
    {"{'a': {'$ne': null}}", "{}", false},
    {"{'a': {'$ne': null}}", "{'a': 0}", true},
    /* comparisons: bracketed by type */
    {"{'a': {'$gt': 5}}", "{'a': 6}", true},
    {"{'a': {'$gt': 5}}", "{'a': 5.5}", true},
    {"{'a': {'$gt': 5}}", "{'a': 5}", false},
    {"{'a': {'$gt': 5}}", "{'a': 'x'}", false},
    {"{'a': {'$gt': 5}}", "{'a': [1, 7]}", true},
    {"{'a': {'$gt': 5}}", "{'a': [1, 2]}", false},
    {"{'a': {'$gt': 5}}", "{}", false},
    {"{'a': {'$gt': 5}}", "{'a': null}", false},
    {"{'a': {'$gte': 5}}", "{'a': {'$numberDecimal': '5.0'}}", true},
    {"{'a': {'$lt': 'b'}}", "{'a': 'a'}", true},
    {"{'a': {'$lt': 'b'}}", "{'a': 1}", false},
    {"{'a': {'$lte': 'b'}}", "{'a': {'$symbol': 'b'}}", true},
    {"{'a': {'$gte': null}}", "{}", true},
    {"{'a': {'$gte': null}}", "{'a': null}", true},
    {"{'a': {'$gte': null}}", "{'a': 1}", false},
    {"{'a': {'$gt': null}}", "{'a': null}", false},
    {"{'a': {'$lt': null}}", "{}", false},
    {"{'a': {'$gt': {'$minKey': 1}}}", "{'a': 'x'}", true},
    {"{'a': {'$gt': {'$minKey': 1}}}", "{'a': null}", true},
    {"{'a': {'$lt': {'$maxKey': 1}}}", "{'a': {'b': 1}}", true},
    {"{'a': {'$lt': {'$maxKey': 1}}}", "{'a': {'$maxKey': 1}}", false},
    {"{'a': {'$lte': {'$maxKey': 1}}}", "{'a': {'$maxKey': 1}}", true},
    {"{'a': {'$gt': {'$date': {'$numberLong': '0'}}}}",
     "{'a': {'$date': {'$numberLong': '1'}}}", true},
    {"{'a': {'$gt': {'$date': {'$numberLong': '0'}}}}", "{'a': 1}", false},
    {"{'a': {'$gt': [1]}}", "{'a': [2]}", true},
    {"{'a': {'$gt': {'b': 1}}}", "{'a': {'b': 2}}", true},
    /* NaN equals NaN and is ordered against nothing */
    {"{'a': {'$gt': {'$numberDouble': 'NaN'}}}", "{'a': 1}", false},
    {"{'a': {'$lt': 1}}", "{'a': {'$numberDouble': 'NaN'}}", false},
    {"{'a': {'$eq': {'$numberDouble': 'NaN'}}}",
     "{'a': {'$numberDouble': 'NaN'}}", true},
    {"{'a': {'$lte': {'$numberDouble': 'NaN'}}}",
     "{'a': {'$numberDecimal': 'NaN'}}", true},
    {"{'a': {'$lt': {'$numberDouble': 'NaN'}}}",
     "{'a': {'$numberDouble': 'NaN'}}", false},
    /* $in $nin */
    {"{'a': {'$in': [1, 'x', null]}}", "{'a': 'x'}", true},
    {"{'a': {'$in': [1, 'x', null]}}", "{}", true},
    {"{'a': {'$in': [1, 'x', null]}}", "{'a': [3, 1.0]}", true},
    {"{'a': {'$in': [1, 'x', null]}}", "{'a': 2}", false},
    {"{'a': {'$in': [{'$regularExpression': {'pattern': '^x', 'options': "
     "''}}]}}",
     "{'a': 'xyz'}", true},
    {"{'a': {'$in': [{'$regularExpression': {'pattern': '^x', 'options': "
     "''}}]}}",
     "{'a': 'axyz'}", false},
    {"{'a': {'$in': [[1, 2]]}}", "{'a': [1, 2]}", true},
    {"{'a': {'$in': []}}", "{'a': 1}", false},
    {"{'a': {'$nin': [1, 2]}}", "{'a': 3}", true},
    {"{'a': {'$nin': [1, 2]}}", "{'a': [3, 2]}", false},
    {"{'a': {'$nin': [1, 2]}}", "{}", true},
    {"{'a': {'$nin': []}}", "{'a': 1}", true},
    /* $exists */
    {"{'a': {'$exists': true}}", "{'a': null}", true},
    {"{'a': {'$exists': true}}", "{}", false},
    {"{'a': {'$exists': false}}", "{}", true},
    {"{'a': {'$exists': 0}}", "{'a': 1}", false},
    {"{'a.b': {'$exists': true}}", "{'a': [{'b': 1}]}", true},
    {"{'a.b': {'$exists': true}}", "{'a': [1]}", false},
    {"{'a.b': {'$exists': true}}", "{'a': [{'c': 1}, {'b': null}]}", true},
    /* $type */
    {"{'a': {'$type_': 'string'}}", "{'a': 'x'}", true},
    {"{'a': {'$type_': 'string'}}", "{'a': [1, 'x']}", true},
    {"{'a': {'$type_': 'string'}}", "{'a': 1}", false},
    {"{'a': {'$type_': 2}}", "{'a': 'x'}", true},
    {"{'a': {'$type_': 2.0}}", "{'a': 'x'}", true},
    {"{'a': {'$type_': 'number'}}", "{'a': 1.5}", true},
    {"{'a': {'$type_': 'number'}}", "{'a': {'$numberDecimal': '1'}}", true},
    {"{'a': {'$type_': 'number'}}", "{'a': '1'}", false},
    {"{'a': {'$type_': 'int'}}", "{'a': {'$numberLong': '1'}}", false},
    {"{'a': {'$type_': 'long'}}", "{'a': {'$numberLong': '1'}}", true},
    {"{'a': {'$type_': 'array'}}", "{'a': []}", true},
    {"{'a': {'$type_': 'array'}}", "{'a': [1]}", true},
    {"{'a': {'$type_': 'array'}}", "{'a': 1}", false},
    {"{'a': {'$type_': 4}}", "{'a': [[1]]}", true},
    {"{'a': {'$type_': ['int', 'string']}}", "{'a': 's'}", true},
    {"{'a': {'$type_': ['int', 'string']}}", "{'a': true}", false},
    {"{'a': {'$type_': 'null'}}", "{}", false},
    {"{'a': {'$type_': 'null'}}", "{'a': null}", true},
    {"{'a': {'$type_': 'minKey'}}", "{'a': {'$minKey': 1}}", true},
    {"{'a': {'$type_': -1}}", "{'a': {'$minKey': 1}}", true},
    {"{'a': {'$type_': 127}}", "{'a': {'$maxKey': 1}}", true},
    {"{'a': {'$type_': 'objectId'}}",
     "{'a': {'$oid': '0123456789ab0123456789ab'}}", true},
    /* $regex */
    {"{'a': {'$regex_': '^ab', '$options_': 'i'}}", "{'a': 'ABc'}", true},
    {"{'a': {'$options_': 'i', '$regex_': '^ab'}}", "{'a': 'ABc'}", true},
    {"{'a': {'$regex_': '^ab'}}", "{'a': 'ABc'}", false},
    {"{'a': {'$regularExpression': {'pattern': 'b$', 'options': ''}}}",
     "{'a': 'ab'}", true},
    {"{'a': {'$regularExpression': {'pattern': 'b$', 'options': ''}}}",
     "{'a': 1}", false},
    {"{'a': {'$regularExpression': {'pattern': 'b$', 'options': ''}}}",
     "{'a': ['x', 'yb']}", true},
    {"{'a': {'$regularExpression': {'pattern': 'b$', 'options': ''}}}",
     "{'a': {'$symbol': 'ab'}}", true},
    {"{'a': {'$regex_': 'a.c'}}", "{'a': 'a\\nc'}", false},
    {"{'a': {'$regex_': 'a.c', '$options_': 's'}}", "{'a': 'a\\nc'}", true},
    {"{'a': {'$regex_': '^b'}}", "{'a': 'a\\nb'}", false},
    {"{'a': {'$regex_': {'$regularExpression': {'pattern': '^b', 'options': "
     "'m'}}}}",
     "{'a': 'a\\nb'}", true},
    {"{'a': {'$regex_': 'a b # comment', '$options_': 'x'}}", "{'a': 'ab'}",
     true},
    {"{'a': {'$regex_': '^\u00e9.$'}}", "{'a': '\u00e9\u00e8'}", true},
    {"{'a': {'$not': {'$regularExpression': {'pattern': '^x', 'options': "
     "''}}}}",
     "{'a': 'xy'}", false},
    {"{'a': {'$not': {'$regularExpression': {'pattern': '^x', 'options': "
     "''}}}}",
     "{'a': 'y'}", true},
    /* $size */
    {"{'a': {'$size': 2}}", "{'a': [1, 2]}", true},
    {"{'a': {'$size': 2}}", "{'a': [[1, 2]]}", false},
    {"{'a': {'$size': 2}}", "{'a': 2}", false},
    {"{'a': {'$size': 0}}", "{'a': []}", true},
    {"{'a': {'$size': 1.0}}", "{'a': [7]}", true},
    {"{'a.b': {'$size': 1}}", "{'a': [{'b': [1]}, {'b': 2}]}", true},
    /* $all */
    {"{'a': {'$all': [1, 2]}}", "{'a': [2, 3, 1]}", true},
    {"{'a': {'$all': [1, 2]}}", "{'a': [1]}", false},
    {"{'a': {'$all': [1]}}", "{'a': 1}", true},
    {"{'a': {'$all': [[1, 2]]}}", "{'a': [[1, 2], 3]}", true},
    {"{'a': {'$all': [[1, 2]]}}", "{'a': [1, 2]}", true},
    {"{'a': {'$all': []}}", "{'a': [1]}", false},
    {"{'a': {'$all': [{'$elemMatch': {'b': 1}}, {'$elemMatch': {'c': 2}}]}}",
     "{'a': [{'b': 1}, {'c': 2}]}", true},
    {"{'a': {'$all': [{'$elemMatch': {'b': 1}}, {'$elemMatch': {'c': 2}}]}}",
     "{'a': [{'b': 1}]}", false},
    /* $elemMatch: both criteria on one element */
    {"{'a': {'$elemMatch': {'b': 1, 'c': {'$gt': 1}}}}",
     "{'a': [{'b': 1, 'c': 1}, {'b': 2, 'c': 2}]}", false},
    {"{'a.b': 1, 'a.c': {'$gt': 1}}",
     "{'a': [{'b': 1, 'c': 1}, {'b': 2, 'c': 2}]}", true},
    {"{'a': {'$elemMatch': {'b': 1, 'c': {'$gt': 1}}}}",
     "{'a': [{'b': 1, 'c': 2}]}", true},
    {"{'a': {'$elemMatch': {'$gte': 80, '$lt': 85}}}", "{'a': [82, 90]}", true},
    {"{'a': {'$elemMatch': {'$gte': 80, '$lt': 85}}}", "{'a': [79, 90]}",
     false},
    {"{'a': {'$elemMatch': {'$gte': 80, '$lt': 85}}}", "{'a': 82}", false},
    {"{'a': {'$elemMatch': {'$eq': 1}}}", "{'a': [[1]]}", false},
    {"{'a': {'$elemMatch': {'$or': [{'b': 1}, {'c': 1}]}}}",
     "{'a': [{'c': 1}]}", true},
    {"{'a': {'$elemMatch': {}}}", "{'a': [1, {'x': 1}]}", true},
    {"{'a': {'$elemMatch': {}}}", "{'a': [1, 2]}", false},
    {"{'a.b': {'$elemMatch': {'c': 1}}}", "{'a': [{'b': [{'c': 1}]}]}", true},
    /* $not */
    {"{'a': {'$not': {'$gt': 5}}}", "{'a': 3}", true},
    {"{'a': {'$not': {'$gt': 5}}}", "{'a': 7}", false},
    {"{'a': {'$not': {'$gt': 5}}}", "{}", true},
    {"{'a': {'$not': {'$gt': 5}}}", "{'a': 'x'}", true},
    {"{'a': {'$not': {'$gt': 1, '$lt': 5}}}", "{'a': 3}", false},
    {"{'a': {'$not': {'$gt': 1, '$lt': 5}}}", "{'a': 7}", true},
    /* $and $or $nor */
    {"{'$or': [{'a': 1}, {'b': 2}]}", "{'b': 2}", true},
    {"{'$or': [{'a': 1}, {'b': 2}]}", "{'b': 3}", false},
    {"{'$nor': [{'a': 1}, {'b': 2}]}", "{'a': 3}", true},
    {"{'$nor': [{'a': 1}, {'b': 2}]}", "{'a': 1}", false},
    {"{'$and': [{'a': {'$gt': 1}}, {'a': {'$lt': 5}}]}", "{'a': 3}", true},
    {"{'$and': [{'a': {'$gt': 1}}, {'a': {'$lt': 5}}]}", "{'a': [0, 10]}",
     true},
    {"{'a': {'$gt': 1, '$lt': 5}}", "{'a': [0, 10]}", true},
    {"{'$and': [{'$or': [{'a': 1}, {'a': 2}]}, {'b': 1}]}", "{'a': 2, 'b': 1}",
     true},
    {"{'$comment': 'x', 'a': 1}", "{'a': 1}", true},
    {"{'$alwaysFalse': 1}", "{'a': 1}", false},
    {"{'$alwaysTrue': 1}", "{}", true},
    /* $mod: truncation towards zero */
    {"{'a': {'$mod': [4, 0]}}", "{'a': 8}", true},
    {"{'a': {'$mod': [4, 0]}}", "{'a': 8.9}", true},
    {"{'a': {'$mod': [4, 0]}}", "{'a': 7}", false},
    {"{'a': {'$mod': [4, 0]}}", "{'a': -8}", true},
    {"{'a': {'$mod': [4, -1]}}", "{'a': -5}", true},
    {"{'a': {'$mod': [4, 0]}}", "{'a': '8'}", false},
    /* a DBRef is a value */
    {"{'a': {'$ref': 'c', '$id': 1}}", "{'a': {'$ref': 'c', '$id': 1}}", true},
    /* the empty filter */
    {"{}", "{'a': 1}", true},
};

static const struct {
	const char *filter;
	int code;
	const char *msg; /* a prefix of the message */
} errors[] = {
    {"{'a': {'$foo': 1}}", 2, "unknown operator: $foo"},
    {"{'a': {'$gt': 1, 'b': 2}}", 2, "unknown operator: b"},
    {"{'$foo': 1}", 2, "unknown top level operator: $foo"},
    {"{'a': {'$in': 1}}", 2, "$in needs an array"},
    {"{'a': {'$nin': {}}}", 2, "$nin needs an array"},
    {"{'a': {'$in': [{'$gt': 1}]}}", 2, "cannot nest $ under $in"},
    {"{'$or': []}", 2, "$and/$or/$nor must be a nonempty array"},
    {"{'$and': 1}", 2, "$and/$or/$nor must be a nonempty array"},
    {"{'$nor': [1]}", 2, "$or/$and/$nor entries need to be full objects"},
    {"{'a': {'$size': 'x'}}", 2, "$size needs a number"},
    {"{'a': {'$size': 1.5}}", 2, "$size must be a whole number"},
    {"{'a': {'$size': -1}}", 2, "$size may not be negative"},
    {"{'a': {'$type_': 'foo'}}", 2, "Unknown type name alias: foo"},
    {"{'a': {'$type_': 99}}", 2, "Invalid numerical type code: 99"},
    {"{'a': {'$type_': 1.5}}", 2, "Invalid numerical type code: 1.5"},
    {"{'a': {'$type_': {}}}", 14,
     "type must be represented as a number or a string"},
    {"{'a': {'$regex_': '('}}", 51091, "Regular expression is invalid: "},
    {"{'a': {'$regex_': 1}}", 2, "$regex has to be a string"},
    {"{'a': {'$regex_': {'$regularExpression': {'pattern': 'x', 'options': "
     "'i'}}, '$options_': 'm'}}",
     51075, "options set in both $regex and $options"},
    {"{'a': {'$options_': 'i'}}", 2, "$options needs a $regex"},
    {"{'a': {'$regex_': 'x', '$options_': 'z'}}", 51108,
     "invalid flag in regex options: z"},
    {"{'a': {'$not': 1}}", 2, "$not needs a regex or a document"},
    {"{'a': {'$not': {}}}", 2, "$not cannot be empty"},
    {"{'a': {'$elemMatch': 1}}", 2, "$elemMatch needs an Object"},
    {"{'a': {'$all': 1}}", 2, "$all needs an array"},
    {"{'a': {'$all': [{'$elemMatch': {'b': 1}}, 1]}}", 2,
     "$all/$elemMatch has to be consistent"},
    {"{'a': {'$mod': [0, 1]}}", 2, "divisor cannot be 0"},
    {"{'a': {'$mod': 1}}", 2, "malformed mod, needs to be an array"},
    {"{'a': {'$mod': [1]}}", 2, "malformed mod, not enough elements"},
    {"{'a': {'$mod': [1, 2, 3]}}", 2, "malformed mod, too many elements"},
    {"{'a': {'$ne': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}",
     2, "Can't have regex as arg to $ne."},
    {"{'$where': 'true'}", 238, "$where is not supported"},
    {"{'$expr': {'$eq': ['$a', 1]}}", 238, "$expr is not supported"},
    {"{'a': {'$geoWithin': {}}}", 238, "$geoWithin is not supported"},
    {"{'$alwaysTrue': 2}", 9, "$alwaysTrue must be an integer value of 1"},
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bson_t *f = J(cases[i].filter), *d = J(cases[i].doc);
		struct mql_match *m;
		struct mql_error err;

		if (mql_match_compile(bson_get_data(f), f->len, &m, &err) < 0) {
			CHECK(0, "%s: compile failed: %s", cases[i].filter,
			      err.msg);
		} else {
			bool got =
			    mql_match_doc(m, bson_get_data(d), d->len, NULL);

			CHECK(got == cases[i].want, "%s on %s: got %d",
			      cases[i].filter, cases[i].doc, got);
			mql_match_free(m);
		}
		bson_destroy(f);
		bson_destroy(d);
	}
}

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		bson_t *f = J(errors[i].filter);
		struct mql_match *m = NULL;
		struct mql_error err;
		int rc = mql_match_compile(bson_get_data(f), f->len, &m, &err);

		CHECK(rc < 0 && m == NULL, "%s compiled", errors[i].filter);
		if (rc < 0) {
			CHECK(err.code == errors[i].code &&
				  strncmp(err.msg, errors[i].msg,
					  strlen(errors[i].msg)) == 0,
			      "%s: got %d %s (%s), want %d %s",
			      errors[i].filter, err.code, err.codename, err.msg,
			      errors[i].code, errors[i].msg);
		}
		mql_match_free(m);
		bson_destroy(f);
	}
}

/* 101 levels of $not are refused, 100 are not.  ($and costs two BSON
 * levels a level: 100 of them pass BSON's own limit of 200 first.) */
static void test_depth(void)
{
	for (int depth = 99; depth <= 101; depth++) {
		bson_t *cur = J("{'$gt': 1}");
		struct mql_match *m;
		struct mql_error err;
		int rc;

		for (int i = 0; i < depth; i++) {
			bson_t *next = bson_new();

			bson_append_document(next, "$not", 4, cur);
			bson_destroy(cur);
			cur = next;
		}
		{
			bson_t *f = bson_new();

			bson_append_document(f, "a", 1, cur);
			bson_destroy(cur);
			cur = f;
		}
		rc = mql_match_compile(bson_get_data(cur), cur->len, &m, &err);
		if (depth <= 100) {
			CHECK(rc == 0, "depth %d refused: %s", depth, err.msg);
			mql_match_free(m);
		} else {
			CHECK(rc < 0 && err.code == 2 &&
				  strstr(err.msg, "exceeded maximum query "
						  "tree depth of 100"),
			      "depth %d: %d %s", depth, rc, rc ? err.msg : "");
		}
		bson_destroy(cur);
	}
}

struct preds {
	char buf[512];
};

static void pred_cb(void *ctx, const struct mql_pred *p)
{
	static const char *names[] = {"EQ", "LT", "LTE", "GT", "GTE", "IN"};
	struct preds *ps = ctx;
	size_t n = strlen(ps->buf);

	snprintf(ps->buf + n, sizeof(ps->buf) - n, "%s %s %s; ", p->path,
		 names[p->op], mql_type_name(p->value->value_type));
}

static void test_planner(void)
{
	bson_t *f =
	    J("{'a': 1, 'b': {'$gt': 2, '$lt': 5}, 'c': {'$in': [1, 2]},"
	      " '$and': [{'d.e': 'x'}], '$or': [{'e': 1}, {'f': 1}],"
	      " 'g': {'$ne': 1}, 'h': {'$exists': true}}");
	bson_t *id = J("{'_id': 7}"), *id2 = J("{'_id': {'$eq': 'k'}}");
	bson_t *notid = J("{'_id': 7, 'a': 1}");
	struct mql_match *m;
	struct preds ps = {""};
	const bson_value_t *v;

	mql_match_compile(bson_get_data(f), f->len, &m, NULL);
	mql_match_preds(m, pred_cb, &ps);
	CHECK(strcmp(ps.buf, "a EQ int; b GT int; b LT int; c IN array; "
			     "d.e EQ string; ") == 0,
	      "preds: %s", ps.buf);
	mql_match_free(m);
	mql_match_compile(bson_get_data(id), id->len, &m, NULL);
	CHECK(mql_match_is_id_eq(m, &v) && v->value.v_int32 == 7, "_id eq");
	mql_match_free(m);
	mql_match_compile(bson_get_data(id2), id2->len, &m, NULL);
	CHECK(mql_match_is_id_eq(m, &v) && v->value_type == BSON_TYPE_UTF8,
	      "_id $eq");
	mql_match_free(m);
	mql_match_compile(bson_get_data(notid), notid->len, &m, NULL);
	CHECK(!mql_match_is_id_eq(m, &v), "_id and more");
	mql_match_free(m);
	bson_destroy(f);
	bson_destroy(id);
	bson_destroy(id2);
	bson_destroy(notid);
}

static void POS(const char *filter, const char *doc, long want)
{
	bson_t *f = J(filter), *d = J(doc);
	struct mql_match *m;
	long pos = -2;

	mql_match_compile(bson_get_data(f), f->len, &m, NULL);
	mql_match_doc(m, bson_get_data(d), d->len, &pos);
	CHECK(pos == want, "%s on %s: pos %ld want %ld", filter, doc, pos,
	      want);
	mql_match_free(m);
	bson_destroy(f);
	bson_destroy(d);
}

static void VAL(const char *cond, const char *value, bool want)
{
	bson_t *c = J(cond), *v = J(value);
	bson_value_t cv = V(c), vv = V(v);
	struct mql_match *m;
	struct mql_error err;

	if (mql_match_compile_value(&cv, &m, &err) < 0) {
		CHECK(0, "%s: %s", cond, err.msg);
	} else {
		CHECK(mql_match_value(m, &vv) == want, "%s on %s", cond, value);
		mql_match_free(m);
	}
	bson_destroy(c);
	bson_destroy(v);
}

static void test_positional_and_value(void)
{
	POS("{'a.b': 2}", "{'a': [{'b': 1}, {'b': 2}]}", 1);
	POS("{'a': 3}", "{'a': [1, 2, 3]}", 2);
	POS("{'a': {'$elemMatch': {'$gt': 1}}}", "{'a': [0, 5]}", 1);
	POS("{'a': 1}", "{'a': 1}", -1);
	POS("{'x': 1, 'a': {'$gte': 2}}", "{'x': 1, 'a': [1, 2]}", 1);
	/* $pull's conditions: operators, filters of documents, values */
	VAL("{'v': {'$gte': 6}}", "{'v': 7}", true);
	VAL("{'v': {'$gte': 6}}", "{'v': 5}", false);
	VAL("{'v': {'$gte': 6}}", "{'v': [7]}", true);
	VAL("{'v': {'$in': ['a', 'b']}}", "{'v': 'b'}", true);
	VAL("{'v': {'b': 1}}", "{'v': {'b': 1, 'c': 2}}", true);
	VAL("{'v': {'b': 1}}", "{'v': {'b': 2}}", false);
	VAL("{'v': {'b': 1}}", "{'v': 1}", false);
	VAL("{'v': 5}", "{'v': 5.0}", true);
	VAL("{'v': [1, 2]}", "{'v': [1, 2]}", true);
	VAL("{'v': [1, 2]}", "{'v': 1}", false);
}

/* Every case again, each filter run 200 times: past the run at which a
 * regular expression is JIT-compiled (match_regex.c), the answers stay
 * the interpreter's; a subject past the JIT's stack goes back to the
 * interpreter; a filter with a regex is slow (mql_match_slow), one
 * without is not. */
static void test_regex_runs(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bson_t *f = J(cases[i].filter), *d = J(cases[i].doc);
		struct mql_match *m;
		struct mql_error err;
		int wrong = 0;

		if (mql_match_compile(bson_get_data(f), f->len, &m, &err) ==
		    0) {
			for (int k = 0; k < 200; k++)
				wrong +=
				    mql_match_doc(m, bson_get_data(d), d->len,
						  NULL) != cases[i].want;
			CHECK(!wrong, "%s on %s: %d of 200 runs wrong",
			      cases[i].filter, cases[i].doc, wrong);
			CHECK(mql_match_slow(m) ==
				  (strstr(cases[i].filter, "$reg") &&
				   !strstr(cases[i].filter, "$eq")),
			      "%s: slow %d", cases[i].filter,
			      mql_match_slow(m));
			mql_match_free(m);
		}
		bson_destroy(f);
		bson_destroy(d);
	}
	{
		bson_t *f = J("{'a': {'$regex_': '^(a|b)*$'}}"), d;
		char *s = malloc(5001);
		struct mql_match *m;
		struct mql_error err;
		int wrong = 0;

		memset(s, 'a', 5000);
		s[5000] = '\0';
		bson_init(&d);
		BSON_APPEND_UTF8(&d, "a", s);
		CHECK(mql_match_compile(bson_get_data(f), f->len, &m, &err) ==
			  0,
		      "deep regex: %s", err.msg);
		for (int k = 0; k < 70; k++)
			wrong +=
			    !mql_match_doc(m, bson_get_data(&d), d.len, NULL);
		CHECK(!wrong,
		      "a subject deeper than the JIT's stack: %d of 70 "
		      "runs missed",
		      wrong);
		mql_match_free(m);
		bson_destroy(&d);
		bson_destroy(f);
		free(s);
	}
}

/* One compiled filter, four threads matching it at once across the run
 * that JIT-compiles its pattern (the pattern is never written while
 * read: a copy is compiled and published). */
struct shared {
	struct mql_match *m;
	bson_t *yes, *no;
	int wrong;
};

static void *match_many(void *arg)
{
	struct shared *sh = arg;
	int wrong = 0;

	for (int k = 0; k < 2000; k++)
		wrong += !mql_match_doc(sh->m, bson_get_data(sh->yes),
					sh->yes->len, NULL) +
			 mql_match_doc(sh->m, bson_get_data(sh->no),
				       sh->no->len, NULL);
	__atomic_add_fetch(&sh->wrong, wrong, __ATOMIC_RELAXED);
	return NULL;
}

static void test_regex_threads(void)
{
	bson_t *f = J("{'s': {'$regex_': '^ab+c', '$options_': 'i'}}");
	struct shared sh = {.yes = J("{'s': 'ABBBc!'}"),
			    .no = J("{'s': 'ac'}")};
	struct mql_error err;
	pthread_t t[4];

	CHECK(mql_match_compile(bson_get_data(f), f->len, &sh.m, &err) == 0,
	      "compile: %s", err.msg);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, match_many, &sh);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(sh.wrong == 0, "%d wrong answers from four threads", sh.wrong);
	mql_match_free(sh.m);
	bson_destroy(sh.yes);
	bson_destroy(sh.no);
	bson_destroy(f);
}

int main(void)
{
	test_cases();
	test_regex_runs();
	test_regex_threads();
	test_errors();
	test_depth();
	test_planner();
	test_positional_and_value();
	return mt_done("unit_mql_match");
}
