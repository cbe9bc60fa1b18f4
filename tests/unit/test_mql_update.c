/* test_mql_update.c - kvd/mongo's updates against the results and errors
 * MongoDB documents for each update operator, replacements and upserts. */
#include "mql_match.h"
#include "mql_update.h"
#include "mql_value.h"
#include "mqltest.h"

/* Apply update to doc (NULL: an upsert with query and new_id 7) with
 * positional index pos; compare with want (a document, or "E<code>
 * <message prefix>"), and the modified flag with want_mod (-1: any). */
static void U4(const char *update, const char *doc, const char *query, long pos,
	       const char *want, int want_mod)
{
	bson_t *u = J(update), *d = doc ? J(doc) : NULL;
	bson_t *q = query ? J(query) : NULL;
	bson_t out = BSON_INITIALIZER, idd = BSON_INITIALIZER;
	struct mql_update *cu = NULL;
	struct mql_match *m = NULL;
	struct mql_error err = {0};
	bool mod = false;
	bson_value_t id = {.value_type = BSON_TYPE_INT32};
	struct mql_update_ctx ctx = {.now_ms = 1700000000000,
				     .ts_t = 1700000000,
				     .ts_i = 1,
				     .pos = pos,
				     .new_id = &id};
	int rc;

	id.value.v_int32 = 7;
	if (q) {
		mql_match_compile(bson_get_data(q), q->len, &m, NULL);
		ctx.query = m;
	}
	rc = mql_update_compile(bson_get_data(u), u->len, &cu, &err);
	if (rc == 0)
		rc = mql_update_apply(cu, d ? bson_get_data(d) : NULL,
				      d ? d->len : 0, &ctx, &out, &mod, &err);
	if (want[0] == 'E') {
		int code = atoi(want + 1);
		const char *msg = strchr(want, ' ') + 1;

		CHECK(rc < 0 && err.code == code &&
			  strncmp(err.msg, msg, strlen(msg)) == 0,
		      "%s on %s: got rc %d code %d '%s', want %s", update,
		      doc ? doc : "upsert", rc, err.code, err.msg, want);
		CHECK(rc == 0 || out.len == 5, "failed update left output");
	} else if (rc < 0) {
		CHECK(0, "%s on %s: error %d %s", update, doc ? doc : "upsert",
		      err.code, err.msg);
	} else {
		bson_t *w = J(want);
		char *got = S(&out), *exp = S(w);

		CHECK(strcmp(got, exp) == 0, "%s on %s: got %s want %s", update,
		      doc ? doc : "upsert", got, exp);
		CHECK(want_mod < 0 || (int)mod == want_mod,
		      "%s on %s: modified %d", update, doc ? doc : "upsert",
		      mod);
		bson_free(got);
		bson_free(exp);
		bson_destroy(w);
	}
	mql_update_free(cu);
	mql_match_free(m);
	bson_destroy(&out);
	bson_destroy(&idd);
	bson_destroy(u);
	if (d)
		bson_destroy(d);
	if (q)
		bson_destroy(q);
}

#define U(update, doc, want) U4(update, doc, NULL, -1, want, -1)
#define UM(update, doc, want, mod) U4(update, doc, NULL, -1, want, mod)

static void test_set_unset(void)
{
	UM("{'$set': {'a': 2}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 2}", 1);
	UM("{'$set': {'a': 1}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 1}", 0);
	UM("{'$set': {'a': 1}}", "{'_id': 1, 'a': 1.0}", "{'_id': 1, 'a': 1}",
	   1);
	/* new fields in name order, numeric names numerically */
	U("{'$set': {'b': 1, 'a': 1}}", "{'_id': 1}",
	  "{'_id': 1, 'a': 1, 'b': 1}");
	U("{'$set': {'a.10': 1, 'a.9': 2}}", "{'_id': 1, 'a': {}}",
	  "{'_id': 1, 'a': {'9': 2, '10': 1}}");
	U("{'$set': {'z': 1}}", "{'_id': 1, 'b': 1}",
	  "{'_id': 1, 'b': 1, 'z': 1}");
	U("{'$set': {'a.b': 1}}", "{'_id': 1}", "{'_id': 1, 'a': {'b': 1}}");
	U("{'$set': {'a.b': 1}}", "{'_id': 1, 'a': {'c': 1}}",
	  "{'_id': 1, 'a': {'c': 1, 'b': 1}}");
	U("{'$set': {'a.b.c': 1}}", "{}", "{'a': {'b': {'c': 1}}}");
	U("{'$set': {'a.0': 9}}", "{'a': [1, 2]}", "{'a': [9, 2]}");
	U("{'$set': {'a.2': 9}}", "{'a': [1]}", "{'a': [1, null, 9]}");
	U("{'$set': {'a.1.b': 9}}", "{'a': [1, {'b': 0}]}",
	  "{'a': [1, {'b': 9}]}");
	U("{'$set': {'a.0': 9}}", "{'a': {}}", "{'a': {'0': 9}}");
	U("{'$set': {'a': {'x': [1]}}}", "{'a': 1}", "{'a': {'x': [1]}}");
	U("{'$set': {}}", "{'a': 1}", "{'a': 1}");
	U("{'$set': {'a.b': 1}}", "{'_id': 1, 'a': 5}",
	  "E28 Cannot create field 'b' in element {a: 5}");
	U("{'$set': {'a.b': 1}}", "{'a': [1]}",
	  "E28 Cannot create field 'b' in element {a: [ 1 ]}");
	U("{'$set': {'a.b.c': 1}}", "{'a': {'b': 'x'}}",
	  "E28 Cannot create field 'c' in element {b: \"x\"}");
	UM("{'$unset': {'a': ''}}", "{'_id': 1, 'a': 1, 'b': 2}",
	   "{'_id': 1, 'b': 2}", 1);
	U("{'$unset': {'a.1': ''}}", "{'a': [1, 2, 3]}", "{'a': [1, null, 3]}");
	UM("{'$unset': {'a.b': 1}}", "{'_id': 1, 'a': 5}", "{'_id': 1, 'a': 5}",
	   0);
	UM("{'$unset': {'x': 1}}", "{'_id': 1}", "{'_id': 1}", 0);
	UM("{'$unset': {'a.5': 1}}", "{'a': [1]}", "{'a': [1]}", 0);
}

static void test_arith(void)
{
	U("{'$inc': {'a': 1}}", "{'a': 1}", "{'a': 2}");
	U("{'$inc': {'a': 1}}", "{}", "{'a': 1}");
	U("{'$inc': {'a': -2}}", "{'a': 1.5}", "{'a': -0.5}");
	U("{'$inc': {'a.b': 1}}", "{'a': {'b': 1}}", "{'a': {'b': 2}}");
	U("{'$inc': {'a.1': 5}}", "{'a': [1, 2]}", "{'a': [1, 7]}");
	U("{'$inc': {'a': {'$numberDecimal': '0.1'}}}", "{'a': 1}",
	  "{'a': {'$numberDecimal': '1.1'}}");
	{
		/* int32 overflows into int64; int64 overflow is an error */
		bson_t *d = J("{'a': 2147483647}"),
		       *u = J("{'$inc': {'a': 1}}");
		struct mql_update *cu;
		bson_t out = BSON_INITIALIZER;
		bson_iter_t it;

		mql_update_compile(bson_get_data(u), u->len, &cu, NULL);
		mql_update_apply(cu, bson_get_data(d), d->len, NULL, &out, NULL,
				 NULL);
		CHECK(bson_iter_init_find(&it, &out, "a") &&
			  BSON_ITER_HOLDS_INT64(&it) &&
			  bson_iter_int64(&it) == 2147483648ll,
		      "int32 overflow into int64");
		mql_update_free(cu);
		bson_destroy(&out);
		bson_destroy(d);
		bson_destroy(u);
	}
	U("{'$inc': {'a': 1}}",
	  "{'_id': 1, 'a': {'$numberLong': '9223372036854775807'}}",
	  "E2 Failed to apply $inc operations to current value (");
	U("{'$inc': {'a': 1}}", "{'_id': 1, 'a': 'x'}",
	  "E14 Cannot apply $inc to a value of non-numeric type. {_id: 1} has "
	  "the field 'a' of non-numeric type string");
	U("{'$inc': {'a': 'x'}}", "{}",
	  "E14 Cannot increment with non-numeric argument: {a: \"x\"}");
	U("{'$mul': {'a': 2}}", "{'a': 3}", "{'a': 6}");
	U("{'$mul': {'a': 2}}", "{}", "{'a': 0}");
	U("{'$mul': {'a': 2.5}}", "{}", "{'a': 0.0}");
	U("{'$mul': {'a': 'x'}}", "{}",
	  "E14 Cannot multiply with non-numeric argument");
	U("{'$mul': {'a': 2}}", "{'_id': 1, 'a': [1]}",
	  "E14 Cannot apply $mul to a value of non-numeric type. {_id: 1} has "
	  "the field 'a' of non-numeric type array");
	UM("{'$min': {'a': 5}}", "{'a': 10}", "{'a': 5}", 1);
	UM("{'$min': {'a': 5}}", "{'a': 1}", "{'a': 1}", 0);
	U("{'$min': {'a': 5}}", "{}", "{'a': 5}");
	U("{'$max': {'a': 'x'}}", "{'a': 5}", "{'a': 'x'}");
	U("{'$max': {'a': 5}}", "{'a': 'x'}", "{'a': 'x'}");
	U("{'$min': {'a': null}}", "{'a': 5}", "{'a': null}");
}

static void test_rename_dates(void)
{
	U("{'$rename': {'a': 'b'}}", "{'_id': 1, 'a': 1, 'c': 2}",
	  "{'_id': 1, 'c': 2, 'b': 1}");
	UM("{'$rename': {'a': 'b'}}", "{'_id': 1}", "{'_id': 1}", 0);
	U("{'$rename': {'a.b': 'c'}}", "{'a': {'b': 1, 'x': 2}}",
	  "{'a': {'x': 2}, 'c': 1}");
	U("{'$rename': {'a': 'b.c'}}", "{'a': [1]}", "{'b': {'c': [1]}}");
	U("{'$rename': {'a.0': 'b'}}", "{'a': [1]}",
	  "E2 The source field cannot be an array element");
	U("{'$rename': {'a': 1}}", "{}",
	  "E2 The 'to' field for $rename must be a string");
	U("{'$rename': {'a': 'a'}}", "{}",
	  "E2 The source and target field for $rename must differ");
	U("{'$rename': {'a': 'a.b'}}", "{}",
	  "E2 The source and target field for $rename must not be on the same "
	  "path");
	UM("{'$setOnInsert': {'a': 1}}", "{'_id': 1}", "{'_id': 1}", 0);
	U("{'$currentDate': {'d': true}}", "{}",
	  "{'d': {'$date': '2023-11-14T22:13:20Z'}}");
	U("{'$currentDate': {'d': {'$type_': 'timestamp'}}}", "{}",
	  "{'d': {'$timestamp': {'t': 1700000000, 'i': 1}}}");
	U("{'$currentDate': {'d': {'$type_': 'x'}}}", "{}",
	  "E2 The '$type' string field is required to be 'date' or "
	  "'timestamp'");
	U("{'$currentDate': {'d': 1}}", "{}",
	  "E2 {d: 1} is not valid type for $currentDate.");
}

static void test_arrays(void)
{
	U("{'$push': {'a': 3}}", "{'a': [1, 2]}", "{'a': [1, 2, 3]}");
	U("{'$push': {'a': 3}}", "{}", "{'a': [3]}");
	U("{'$push': {'a': [3]}}", "{'a': []}", "{'a': [[3]]}");
	U("{'$push': {'a': 3}}", "{'_id': 1, 'a': 1}",
	  "E2 The field 'a' must be an array but is of type int in document "
	  "{_id: 1}");
	U("{'$push': {'a': {'$each': [5, 1], '$sort': 1, '$slice': 3}}}",
	  "{'a': [4, 2]}", "{'a': [1, 2, 4]}");
	U("{'$push': {'a': {'$each': [9], '$position': 1}}}", "{'a': [1, 2]}",
	  "{'a': [1, 9, 2]}");
	U("{'$push': {'a': {'$each': [9], '$position': -1}}}", "{'a': [1, 2]}",
	  "{'a': [1, 9, 2]}");
	U("{'$push': {'a': {'$each': [9], '$position': -5}}}", "{'a': [1, 2]}",
	  "{'a': [9, 1, 2]}");
	U("{'$push': {'a': {'$each': [9, 8], '$position': 0}}}", "{'a': [1]}",
	  "{'a': [9, 8, 1]}");
	U("{'$push': {'a': {'$each': [3], '$slice': -2}}}", "{'a': [1, 2]}",
	  "{'a': [2, 3]}");
	U("{'$push': {'a': {'$each': [], '$slice': 0}}}", "{'a': [1, 2]}",
	  "{'a': []}");
	U("{'$push': {'a': {'$each': [{'s': 2}], '$sort': {'s': -1}}}}",
	  "{'a': [{'s': 1}, {'s': 3}]}",
	  "{'a': [{'s': 3}, {'s': 2}, {'s': 1}]}");
	U("{'$push': {'a': {'$each': [1, 'x', null], '$sort': -1}}}", "{}",
	  "{'a': ['x', 1, null]}");
	U("{'$push': {'a': {'$each': 1}}}", "{}",
	  "E2 The argument to $each in $push must be an array but it was of "
	  "type: int");
	U("{'$push': {'a': {'$each': [], '$foo': 1}}}", "{}",
	  "E2 Unrecognized clause in $push: $foo");
	U("{'$push': {'a': {'$each': [], '$slice': 'x'}}}", "{}",
	  "E2 The value for $slice must be an integer value but was given "
	  "type: string");
	U("{'$push': {'a': {'$each': [], '$sort': {}}}}", "{}",
	  "E2 The $sort pattern is empty when it should be a set of fields.");
	U("{'$push': {'a': {'$each': [], '$sort': 2}}}", "{}",
	  "E2 The $sort element value must be either 1 or -1");
	UM("{'$addToSet': {'a': 2}}", "{'a': [1, 2]}", "{'a': [1, 2]}", 0);
	UM("{'$addToSet': {'a': 2.0}}", "{'a': [1, 2]}", "{'a': [1, 2]}", 0);
	U("{'$addToSet': {'a': {'$each': [2, 3, 3]}}}", "{'a': [1, 2]}",
	  "{'a': [1, 2, 3]}");
	U("{'$addToSet': {'a': {'b': 1}}}", "{}", "{'a': [{'b': 1}]}");
	U("{'$addToSet': {'a': 1}}", "{'a': 1}",
	  "E2 Cannot apply $addToSet to non-array field. Field named 'a' has "
	  "non-array type int");
	U("{'$pop': {'a': 1}}", "{'a': [1, 2, 3]}", "{'a': [1, 2]}");
	U("{'$pop': {'a': -1}}", "{'a': [1, 2, 3]}", "{'a': [2, 3]}");
	UM("{'$pop': {'a': 1}}", "{'a': []}", "{'a': []}", 0);
	UM("{'$pop': {'a': 1}}", "{}", "{}", 0);
	U("{'$pop': {'a': 1}}", "{'a': 1}",
	  "E14 Path 'a' contains an element of non-array type 'int'");
	U("{'$pop': {'a': 2}}", "{}", "E9 $pop expects 1 or -1, found: 2");
	U("{'$pop': {'a': 'x'}}", "{}", "E9 Expected a number in: {a: \"x\"}");
	U("{'$pull': {'a': 2}}", "{'a': [1, 2, 3, 2]}", "{'a': [1, 3]}");
	U("{'$pull': {'a': {'$gte': 2}}}", "{'a': [1, 2, 3]}", "{'a': [1]}");
	U("{'$pull': {'a': {'b': 1}}}", "{'a': [{'b': 1, 'c': 1}, {'b': 2}]}",
	  "{'a': [{'b': 2}]}");
	U("{'$pull': {'a': {'$in': ['x', 'y']}}}", "{'a': ['x', 'z', 'y']}",
	  "{'a': ['z']}");
	UM("{'$pull': {'a': 9}}", "{'a': [1]}", "{'a': [1]}", 0);
	U("{'$pull': {'a': 1}}", "{'a': 1}",
	  "E2 Cannot apply $pull to a non-array value");
	U("{'$pullAll': {'a': [1, 3]}}", "{'a': [1, 2, 3, 1]}", "{'a': [2]}");
	U("{'$pullAll': {'a': 1}}", "{}",
	  "E2 $pullAll requires an array argument but was given a int");
}

static void test_errors(void)
{
	U("{'$set': {'a': 1}, '$inc': {'a.b': 1}}", "{}",
	  "E40 Updating the path 'a.b' would create a conflict at 'a'");
	U("{'$set': {'a.b': 1, 'a': 1}}", "{}",
	  "E40 Updating the path 'a' would create a conflict at 'a'");
	U("{'$set': {'a': 1}, '$unset': {'a': 1}}", "{}",
	  "E40 Updating the path 'a' would create a conflict at 'a'");
	U("{'$set': {'a.b.c': 1}, '$inc': {'a.b': 1}}", "{}",
	  "E40 Updating the path 'a.b' would create a conflict at 'a.b'");
	U("{'$set': {'a.b': 1, 'a.c': 1}}", "{}", "{'a': {'b': 1, 'c': 1}}");
	U("{'$rename': {'a': 'b'}, '$set': {'b': 1}}", "{}",
	  "E40 Updating the path 'b' would create a conflict at 'b'");
	U("{'$foo': {'a': 1}}", "{}",
	  "E9 Unknown modifier: $foo. Expected a valid update modifier or "
	  "pipeline-style update specified as an array");
	U("{'$set': {'a': 1}, 'b': 2}", "{}", "E9 Unknown modifier: b.");
	U("{'$set': 1}", "{}",
	  "E9 Modifiers operate on fields but we found type int instead. For "
	  "example: {$mod: {<field>: ...}} not {$set: 1}");
	U("{'$set': {'': 1}}", "{}", "E56 An empty update path is not valid.");
	U("{'$set': {'a..b': 1}}", "{}",
	  "E56 The update path 'a..b' contains an empty field name, which is "
	  "not allowed.");
	U("{'$set': {'a.$b': 1}}", "{}",
	  "E52 The dollar ($) prefixed field '$b' in 'a.$b' is not valid for "
	  "storage.");
	U("{'$set': {'a.$[]': 1}}", "{}", "E238 ");
	U("{'$bit': {'a': {'and': 1}}}", "{}", "E238 $bit is not supported");
	/* _id is immutable */
	U("{'$set': {'_id': 2}}", "{'_id': 1}",
	  "E66 Performing an update on the path '_id' would modify the "
	  "immutable field '_id'");
	U("{'$set': {'_id.x': 2}}", "{'_id': {'x': 1}}",
	  "E66 Performing an update on the path '_id' would modify the "
	  "immutable field '_id'");
	UM("{'$set': {'_id': 1}}", "{'_id': 1}", "{'_id': 1}", 0);
	U("{'$unset': {'_id': 1}}", "{'_id': 1}",
	  "E66 Performing an update on the path '_id'");
	U("{'$set': {'_id': 1.0}}", "{'_id': 1}",
	  "E66 Performing an update on the path '_id'");
}

static void test_replacement(void)
{
	UM("{'a': 2}", "{'_id': 1, 'a': 1, 'b': 1}", "{'_id': 1, 'a': 2}", 1);
	U("{'a': 1, '_id': 1}", "{'_id': 1}", "{'_id': 1, 'a': 1}");
	U("{}", "{'_id': 1, 'a': 1}", "{'_id': 1}");
	UM("{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 1}", 0);
	U("{'_id': 2, 'a': 1}", "{'_id': 1}",
	  "E66 After applying the update, the (immutable) field '_id' was "
	  "found to have been altered to _id: 2");
	U("{'a': 1, '$set': {'b': 1}}", "{}",
	  "E52 The dollar ($) prefixed field '$set' in '$set' is not allowed "
	  "in the context of an update's replacement document.");
}

static void test_upsert_positional(void)
{
	U4("{'$set': {'e': 1}, '$setOnInsert': {'f': 1}}", NULL,
	   "{'a': 1, 'b.c': 2, 'd': {'$gt': 5}, '$or': [{'x': 1}]}", -1,
	   "{'_id': 7, 'a': 1, 'b': {'c': 2}, 'e': 1, 'f': 1}", 1);
	U4("{'$inc': {'n': 1}}", NULL, "{'_id': 5, 'a': {'$eq': 1}}", -1,
	   "{'_id': 5, 'a': 1, 'n': 1}", 1);
	U4("{'$set': {'a': 2}}", NULL, "{'a': 1}", -1, "{'_id': 7, 'a': 2}", 1);
	U4("{'$set': {'_id': 9}}", NULL, "{'a': 1}", -1, "{'_id': 9, 'a': 1}",
	   1);
	U4("{'y': 2}", NULL, "{'_id': 3, 'x': 1}", -1, "{'_id': 3, 'y': 2}", 1);
	U4("{'y': 2}", NULL, "{'x': 1}", -1, "{'_id': 7, 'y': 2}", 1);
	U4("{'$set': {'e': 1}}", NULL, "{'a': 1, 'a.b': 2}", -1,
	   "E54 cannot infer query fields to set, path 'a' is matched twice",
	   1);
	U4("{'$set': {'e': 1}}", NULL, NULL, -1, "{'_id': 7, 'e': 1}", 1);
	/* positional $: the index the query matched */
	U4("{'$set': {'a.$.b': 9}}", "{'a': [{'b': 1}, {'b': 2}]}", NULL, 1,
	   "{'a': [{'b': 1}, {'b': 9}]}", 1);
	U4("{'$inc': {'a.$': 1}}", "{'a': [1, 2, 3]}", NULL, 2,
	   "{'a': [1, 2, 4]}", 1);
	U4("{'$inc': {'a.$': 1}}", "{'a': [1, 2, 3]}", NULL, -1,
	   "E2 The positional operator did not find the match needed from the "
	   "query.",
	   1);
}

static void test_limits(void)
{
	size_t n = 9 * 1024 * 1024;
	char *big = malloc(n + 1);
	bson_t *d = bson_new(), *u = bson_new(), set;
	struct mql_update *cu;
	bson_t out = BSON_INITIALIZER;
	struct mql_error err = {0};
	int rc;

	memset(big, 'x', n);
	big[n] = '\0';
	bson_append_utf8(d, "a", 1, big, (int)n);
	bson_append_document_begin(u, "$set", 4, &set);
	bson_append_utf8(&set, "b", 1, big, (int)n);
	bson_append_document_end(u, &set);
	rc = mql_update_compile(bson_get_data(u), u->len, &cu, &err);
	CHECK(rc == 0, "9 MiB $set: %s", err.msg);
	rc = mql_update_apply(cu, bson_get_data(d), d->len, NULL, &out, NULL,
			      &err);
	CHECK(rc < 0 && err.code == 10334 &&
		  strcmp(err.msg, "Resulting document after update is "
				  "larger than 16777216") == 0,
	      "18 MiB result: %d %s", err.code, err.msg);
	mql_update_free(cu);
	bson_destroy(&out);
	bson_destroy(d);
	bson_destroy(u);
	free(big);
	/* a path of 101 components; one of 100 makes 100 levels, which pass */
	for (int k = 99; k <= 101; k++) {
		char path[512] = "";
		bson_t *uu = bson_new(), s2, o2 = BSON_INITIALIZER;
		static const uint8_t empty[5] = {5, 0, 0, 0, 0};

		for (int i = 0; i < k; i++)
			strcat(path, i ? ".a" : "a");
		bson_append_document_begin(uu, "$set", 4, &s2);
		bson_append_int32(&s2, path, -1, 1);
		bson_append_document_end(uu, &s2);
		rc = mql_update_compile(bson_get_data(uu), uu->len, &cu, &err);
		if (rc == 0)
			rc = mql_update_apply(cu, empty, 5, NULL, &o2, NULL,
					      &err);
		CHECK(k <= 100 ? rc == 0 : (rc < 0 && err.code == 15),
		      "path of %d: %d %s", k, rc, err.msg);
		mql_update_free(cu);
		bson_destroy(&o2);
		bson_destroy(uu);
	}
}

/* $set of top-level fields the document holds is spliced into its bytes
 * (update_doc.c): the same document the field-by-field walk makes, in
 * every shape the splice takes or hands back to the walk. */
static void test_set_splice(void)
{
	/* larger, smaller, nested values; the document's order kept */
	UM("{'$set': {'c': {'x': [1, 2]}, 'a': 'longer string'}}",
	   "{'_id': 1, 'a': 's', 'b': 2, 'c': 3}",
	   "{'_id': 1, 'a': 'longer string', 'b': 2, 'c': {'x': [1, 2]}}", 1);
	UM("{'$set': {'a': 1}}", "{'_id': 1, 'a': 'a long string', 'b': 2}",
	   "{'_id': 1, 'a': 1, 'b': 2}", 1);
	/* the last field, then the type changed at the same size */
	UM("{'$set': {'z': 'abc'}}", "{'_id': 1, 'y': 0, 'z': 1}",
	   "{'_id': 1, 'y': 0, 'z': 'abc'}", 1);
	UM("{'$set': {'a': 1.5}}", "{'_id': 1, 'a': {'$numberLong': '3'}}",
	   "{'_id': 1, 'a': 1.5}", 1);
	/* the same bytes: not modified */
	UM("{'$set': {'a': 'x', 'b': 2}}", "{'_id': 1, 'a': 'x', 'b': 2}",
	   "{'_id': 1, 'a': 'x', 'b': 2}", 0);
	/* the walk's cases: a field to create, a field held twice, _id,
	 * a dotted path */
	UM("{'$set': {'a': 1, 'n': 2}}", "{'_id': 1, 'a': 0}",
	   "{'_id': 1, 'a': 1, 'n': 2}", 1);
	UM("{'$set': {'a': 5}}", "{'_id': 1, 'a': 0, 'b': 1, 'a': 0}",
	   "{'_id': 1, 'a': 5, 'b': 1, 'a': 5}", 1);
	UM("{'$set': {'_id': 1, 'a': 2}}", "{'_id': 1, 'a': 0}",
	   "{'_id': 1, 'a': 2}", 1);
	U("{'$set': {'_id': 2}}", "{'_id': 1, 'a': 0}",
	  "E66 Performing an update on the path '_id' would modify");
	UM("{'$set': {'b.c': 2}}", "{'_id': 1, 'b': {'c': 1}}",
	   "{'_id': 1, 'b': {'c': 2}}", 1);
}

int main(void)
{
	test_set_unset();
	test_set_splice();
	test_arith();
	test_rename_dates();
	test_arrays();
	test_errors();
	test_replacement();
	test_upsert_positional();
	test_limits();
	return mt_done("unit_mql_update");
}
