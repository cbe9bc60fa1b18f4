/* test_mdoor_cmd.c - the MongoDB door's document commands end to end over
 * the in-memory store: bytes of OP_MSG requests in (built with libbson,
 * documents in the body or in kind-1 sequences), reply documents out,
 * checked field by field against the shapes mongod answers: insert,
 * update, delete (n, nModified, upserted, writeErrors), find (filter,
 * sort, skip, limit, projection, batches), count, distinct, aggregate,
 * findAndModify, create, drop, dropDatabase, the listings and stats; and
 * the order of replies when a write completes later. */
#include "mdoortest.h"

/* Run and free: the reply's relaxed JSON at dotted must be want. */
#define EXPECT(c, json, dotted, want)                                          \
	do {                                                                   \
		bson_t *r_ = run((c), (json));                                 \
		CHECK(ok_of(r_) == 1, "%s: %s", (json), str_at(r_, "errmsg")); \
		CHECK_JSON(r_, (dotted), (want));                              \
		bson_destroy(r_);                                              \
	} while (0)
#define EXPECT_ERR(c, json, code, msg)                                         \
	do {                                                                   \
		bson_t *r_ = run((c), (json));                                 \
		CHECK_ERR(r_, (code), (msg));                                  \
		bson_destroy(r_);                                              \
	} while (0)

static void load(struct tconn *c)
{
	EXPECT(c,
	       "{'insert': 'p', 'documents': [{'_id': 1, 'n': 'a', 'v': 5, "
	       "'t': ['x', 'y']}, {'_id': 2, 'n': 'b', 'v': 3, 't': ['y']}, "
	       "{'_id': 3, 'n': 'c', 'v': 9}, {'_id': 4, 'n': 'd', 'v': 1, "
	       "'t': [['z']]}]}",
	       "n", "{ 'v' : 4 }");
}

/* 100,001 statements; a document nested 101 levels. */
static void test_insert_bounds(struct tconn *c)
{
	bson_t *b = J("{'insert': 'o', '$db': 'test'}"), *e = J("{}");
	bson_t **many = malloc(sizeof(*many) * 100001), *r, lv[101];
	struct tseq s = {"documents", many, 100001};
	bson_t *deep = bson_new();
	size_t n;
	uint8_t *m;

	for (int i = 0; i < 100001; i++)
		many[i] = e;
	m = msg(b, 0, &s, 1, &n);
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 16, "Got 100001 operations");
	bson_destroy(r);
	bson_append_document_begin(deep, "x", 1, &lv[0]);
	for (int i = 1; i < 100; i++)
		bson_append_document_begin(&lv[i - 1], "x", 1, &lv[i]);
	for (int i = 99; i > 0; i--)
		bson_append_document_end(&lv[i - 1], &lv[i]);
	bson_append_document_end(deep, &lv[0]);
	many[0] = deep;
	s.n = 1;
	m = msg(b, 0, &s, 1, &n);
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK(int_at(r, "n") == 0 && int_at(r, "writeErrors.0.code") == 15,
	      "101 levels refused: %s", str_at(r, "writeErrors.0.errmsg"));
	bson_destroy(r);
	free(many);
	bson_destroy(deep);
	bson_destroy(e);
	bson_destroy(b);
}

static void test_insert(struct tconn *c)
{
	bson_t *b = J("{'insert': 'i', '$db': 'test', 'ordered': false}"), *r;
	bson_t *docs[3] = {J("{'a': 1, '_id': 'x'}"), J("{'_id': 'x'}"),
			   J("{'b': 2}")};
	struct tseq s = {"documents", docs, 3};
	size_t n;
	uint8_t *m = msg(b, 0, &s, 1, &n);

	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK(int_at(r, "n") == 2, "kind-1 insert, unordered: n 2");
	CHECK(int_at(r, "writeErrors.0.index") == 1 &&
		  int_at(r, "writeErrors.0.code") == 11000,
	      "duplicate _id at index 1");
	CHECK(strstr(str_at(r, "writeErrors.0.errmsg"),
		     "E11000 duplicate key error collection: test.i"),
	      "E11000 message: %s", str_at(r, "writeErrors.0.errmsg"));
	bson_destroy(r);
	for (int i = 0; i < 3; i++)
		bson_destroy(docs[i]);
	bson_destroy(b);
	/* _id moved first; a generated ObjectId first too */
	EXPECT(c, "{'find': 'i', 'filter': {'_id': 'x'}}", "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 'x', 'a' : 1 } ] }");
	{
		bson_t *f = run(c, "{'find': 'i', 'filter': {'b': 2}}");
		bson_iter_t it, d;

		CHECK(bson_iter_init(&it, f) &&
			  bson_iter_find_descendant(
			      &it, "cursor.firstBatch.0._id", &d) &&
			  BSON_ITER_HOLDS_OID(&d) && bson_iter_offset(&d) == 4,
		      "a new ObjectId _id, first");
		bson_destroy(f);
	}
	/* ordered: stops at the first error */
	EXPECT(c,
	       "{'insert': 'o', 'documents': [{'_id': 1}, {'_id': 1}, "
	       "{'_id': 2}]}",
	       "n", "{ 'v' : 1 }");
	EXPECT(c, "{'count': 'o'}", "n", "{ 'v' : 1 }");
	/* refused by the door: an array _id; ordered stops there too */
	EXPECT(c,
	       "{'insert': 'o', 'documents': [{'_id': 5}, {'_id': [1]}, "
	       "{'_id': 6}]}",
	       "writeErrors",
	       "{ 'v' : [ { 'index' : 1, 'code' : 2, 'errmsg' : 'can't use "
	       "an array for _id' } ] }");
	EXPECT(c, "{'count': 'o'}", "n", "{ 'v' : 2 }");
	test_insert_bounds(c);
	EXPECT_ERR(c, "{'insert': 'o', 'documents': []}", 16,
		   "Write batch sizes must be between 1 and 100000. Got 0");
	EXPECT_ERR(c, "{'insert': 'o'}", 40414,
		   "BSON field 'insert.documents' is missing but a required "
		   "field");
	EXPECT_ERR(c, "{'insert': 'o', 'documents': [1]}", 14, NULL);
	EXPECT_ERR(c, "{'insert': 'o', 'documents': [{}], 'foo': 1}", 40415,
		   "BSON field 'insert.foo' is an unknown field.");
	EXPECT_ERR(c, "{'insert': 'a$b', 'documents': [{}]}", 73,
		   "Invalid namespace");
	EXPECT_ERR(c, "{'insert': 5, 'documents': [{}]}", 73,
		   "collection name has invalid type int");
	EXPECT(c,
	       "{'insert': 'o', 'documents': [{'x': 1}], 'writeConcern': "
	       "{'w': 1}, 'lsid': {'id': 1}, 'bypassDocumentValidation': "
	       "false}",
	       "n", "{ 'v' : 1 }");
}

static void test_find(struct tconn *c)
{
	EXPECT(c,
	       "{'find': 'p', 'filter': {'v': {'$gt': 2}}, 'sort': {'v': -1}, "
	       "'projection': {'n': 1, '_id': 0}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { 'n' : 'c' }, { 'n' : 'a' }, { 'n' : 'b' } ] }");
	EXPECT(c,
	       "{'find': 'p', 'sort': {'v': 1}, 'skip': 1, 'limit': 2, "
	       "'projection': {'v': 1}}",
	       "cursor",
	       "{ 'v' : { 'firstBatch' : [ { '_id' : 2, 'v' : 3 }, "
	       "{ '_id' : 1, 'v' : 5 } ], 'id' : 0, 'ns' : 'test.p' } }");
	EXPECT(
	    c, "{'find': 'p', 'filter': {'t': 'y'}, 'projection': {'_id': 1}}",
	    "cursor.firstBatch", "{ 'v' : [ { '_id' : 1 }, { '_id' : 2 } ] }");
	EXPECT(c, "{'find': 'nothing'}", "cursor",
	       "{ 'v' : { 'firstBatch' : [  ], 'id' : 0, 'ns' : "
	       "'test.nothing' } }");
	EXPECT(c, "{'find': 'p', 'limit': 1, 'singleBatch': true}", "cursor.id",
	       "{ 'v' : 0 }");
	EXPECT_ERR(c, "{'find': 'p', 'limit': -1}", 51024,
		   "BSON field 'limit' value must be >= 0, actual value '-1'");
	EXPECT_ERR(c, "{'find': 'p', 'skip': 'x'}", 14,
		   "BSON field 'find.skip' is the wrong type 'string', "
		   "expected types '[long, int, decimal, double]'");
	EXPECT_ERR(c, "{'find': 'p', 'filter': 1}", 14,
		   "expected type 'object'");
	EXPECT_ERR(c, "{'find': 'p', 'filtre': {}}", 40415, NULL);
	EXPECT_ERR(c, "{'find': 'p', 'filter': {'$foo': 1}}", 2,
		   "unknown top level operator: $foo");
	EXPECT_ERR(c, "{'find': 'p', 'sort': {'v': 2}}", 15975, NULL);
	EXPECT_ERR(c, "{'find': 'p', 'projection': {'a': 1, 'b': 0}}", 31254,
		   NULL);
	EXPECT_ERR(c, "{'find': 'p', 'tailable': true}", 238, "tailable");
	EXPECT_ERR(c, "{'find': 'p', 'collation': {'locale': 'fr'}}", 238,
		   NULL);
	EXPECT(c,
	       "{'find': 'p', 'collation': {'locale': 'simple'}, 'limit': 1}",
	       "cursor.firstBatch.0._id", "{ 'v' : 1 }");
}

static void test_count_distinct(struct tconn *c)
{
	EXPECT(c, "{'count': 'p'}", "n", "{ 'v' : 4 }");
	EXPECT(c, "{'count': 'p', 'query': {'v': {'$lt': 6}}}", "n",
	       "{ 'v' : 3 }");
	EXPECT(c, "{'count': 'p', 'skip': 1, 'limit': 2}", "n", "{ 'v' : 2 }");
	EXPECT(c, "{'count': 'p', 'skip': 3, 'limit': -5}", "n", "{ 'v' : 1 }");
	EXPECT(c, "{'count': 'none'}", "n", "{ 'v' : 0 }");
	EXPECT(c, "{'distinct': 'p', 'key': 't'}", "values",
	       "{ 'v' : [ 'x', 'y', [ 'z' ] ] }");
	EXPECT(c, "{'distinct': 'p', 'key': 'v', 'query': {'v': {'$gt': 3}}}",
	       "values", "{ 'v' : [ 5, 9 ] }");
	EXPECT_ERR(c, "{'distinct': 'p'}", 40414, "distinct.key");
}

static void test_aggregate(struct tconn *c)
{
	EXPECT(
	    c,
	    "{'aggregate': 'p', 'pipeline': [{'$match': {'v': {'$gte': 3}}}, "
	    "{'$group': {'_id': null, 's': {'$sum': '$v'}}}], 'cursor': {}}",
	    "cursor.firstBatch", "{ 'v' : [ { '_id' : null, 's' : 17 } ] }");
	EXPECT(
	    c,
	    "{'aggregate': 'p', 'pipeline': [{'$sort': {'v': 1}}, "
	    "{'$limit': 2}, {'$project': {'v': 1, '_id': 0}}], 'cursor': {}}",
	    "cursor.firstBatch", "{ 'v' : [ { 'v' : 1 }, { 'v' : 3 } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'_id': 3}}], "
	       "'cursor': {}}",
	       "cursor.firstBatch.0.n", "{ 'v' : 'c' }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [], 'cursor': {'batchSize': 1}}",
	       "cursor.firstBatch.0._id", "{ 'v' : 1 }");
	EXPECT_ERR(c, "{'aggregate': 'p', 'pipeline': []}", 9,
		   "The 'cursor' option is required");
	EXPECT_ERR(
	    c, "{'aggregate': 'p', 'pipeline': [{'$foo': 1}], 'cursor': {}}",
	    40324, "Unrecognized pipeline stage name: '$foo'");
	EXPECT_ERR(c, "{'aggregate': 1, 'pipeline': [], 'cursor': {}}", 238,
		   NULL);
	/* $lookup reads through the store's scans (each one closed: main
	 * checks), here of the same collection; nosuch joins nothing */
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'_id': 2}}, "
	       "{'$lookup': {'from': 'p', 'localField': 't', 'foreignField': "
	       "'t', 'as': 'j'}}, {'$project': {'j._id': 1}}], 'cursor': {}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 2, 'j' : [ { '_id' : 1 }, { '_id' : 2 } ] "
	       "} ] }");
	/* each way $lookup reads: by _id per input, the equality then a
	 * pipeline, a pipeline over the whole collection, and a $lookup
	 * inside one (under MDOOR_TEST_PAUSE every read pauses, the join
	 * going on from where it stood) */
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$lookup': {'from': 'p', "
	       "'localField': 'v', 'foreignField': '_id', 'as': 'j'}}, "
	       "{'$project': {'j.n': 1}}], 'cursor': {}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 1, 'j' : [  ] }, { '_id' : 2, 'j' : [ { "
	       "'n' : 'c' } ] }, { '_id' : 3, 'j' : [  ] }, { '_id' : 4, 'j' : "
	       "[ { 'n' : 'a' } ] } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'_id': {'$lte': "
	       "2}}}, {'$lookup': {'from': 'p', 'localField': 'n', "
	       "'foreignField': 'n', 'pipeline': [{'$project': {'_id': 0, 'v': "
	       "1}}], 'as': 'j'}}, {'$project': {'j': 1}}], 'cursor': {}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 1, 'j' : [ { 'v' : 5 } ] }, { '_id' : 2, "
	       "'j' : [ { 'v' : 3 } ] } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'_id': {'$lte': "
	       "2}}}, {'$lookup': {'from': 'p', 'pipeline': [{'$match': {'v': "
	       "{'$gt': 4}}}, {'$project': {'_id': 1}}], 'as': 'j'}}, "
	       "{'$project': {'j': 1}}], 'cursor': {}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 1, 'j' : [ { '_id' : 1 }, { '_id' : 3 } ] "
	       "}, { '_id' : 2, 'j' : [ { '_id' : 1 }, { '_id' : 3 } ] } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'_id': 1}}, "
	       "{'$lookup': {'from': 'p', 'pipeline': [{'$match': {'_id': 2}}, "
	       "{'$lookup': {'from': 'p', 'localField': 'v', 'foreignField': "
	       "'_id', 'as': 'k'}}, {'$project': {'k.n': 1}}], 'as': 'j'}}, "
	       "{'$project': {'j': 1}}], 'cursor': {}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { '_id' : 1, 'j' : [ { '_id' : 2, 'k' : [ { 'n' : "
	       "'c' } ] } ] } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$lookup': {'from': 'nosuch', "
	       "'localField': 'n', 'foreignField': 'n', 'as': 'j'}}, "
	       "{'$project': {'j': 1}}], 'cursor': {'batchSize': 1}}",
	       "cursor.firstBatch", "{ 'v' : [ { '_id' : 1, 'j' : [  ] } ] }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'v': 3}}, "
	       "{'$lookup': {'from': 'p', 'localField': 'n', 'foreignField': "
	       "'n', 'as': 'j'}}], 'explain': true}",
	       "stages.1",
	       "{ 'v' : { '$lookup' : { 'from' : 'p', 'localField' : 'n', "
	       "'foreignField' : 'n', 'as' : 'j' }, 'indexesUsed' : [  ], "
	       "'collectionScans' : 1, 'strategy' : "
	       "'HashJoin' } }");
	EXPECT(c,
	       "{'aggregate': 'p', 'pipeline': [{'$match': {'v': 3}}], "
	       "'explain': true}",
	       "stages.0.$cursor.queryPlanner.parsedQuery",
	       "{ 'v' : { 'v' : 3 } }");
	EXPECT_ERR(c,
		   "{'aggregate': 'p', 'pipeline': [{'$lookup': {'from': 'p', "
		   "'localField': 'n', 'foreignField': 'n'}}], 'cursor': {}}",
		   9, "must specify 'as' field for a $lookup");
}

static void test_update(struct tconn *c)
{
	EXPECT(c,
	       "{'update': 'p', 'updates': [{'q': {'v': {'$lt': 6}}, 'u': "
	       "{'$inc': {'v': 10}}, 'multi': true}]}",
	       "nModified", "{ 'v' : 3 }");
	EXPECT(c, "{'count': 'p', 'query': {'v': {'$gt': 10}}}", "n",
	       "{ 'v' : 3 }");
	{
		bson_t *r = run(c, "{'update': 'p', 'updates': [{'q': {'_id': "
				   "1}, 'u': {'$set': {'v': 15}}}, {'q': "
				   "{'_id': 7}, 'u': {'$set': {'v': 7}}, "
				   "'upsert': true}]}");

		CHECK(int_at(r, "n") == 2 && int_at(r, "nModified") == 0,
		      "n counts matched and upserted, nModified the changed");
		CHECK_JSON(r, "upserted",
			   "{ 'v' : [ { 'index' : 1, '_id' : 7 } ] }");
		bson_destroy(r);
	}
	{ /* an upsert without _id gets the door's ObjectId */
		bson_t *r = run(c, "{'update': 'p', 'updates': [{'q': {'n': "
				   "'z'}, 'u': {'$set': {'v': 0}}, 'upsert': "
				   "true}]}");
		bson_iter_t it, d;

		CHECK(
		    bson_iter_init(&it, r) &&
			bson_iter_find_descendant(&it, "upserted.0._id", &d) &&
			BSON_ITER_HOLDS_OID(&d),
		    "upserted ObjectId");
		bson_destroy(r);
	}
	EXPECT(
	    c,
	    "{'update': 'p', 'updates': [{'q': {}, 'u': {'$foo': {'a': 1}}}, "
	    "{'q': {}, 'u': {'x': 1}, 'multi': true}], 'ordered': false}",
	    "writeErrors",
	    "{ 'v' : [ { 'index' : 0, 'code' : 9, 'errmsg' : 'Unknown "
	    "modifier: $foo. Expected a valid update modifier or "
	    "pipeline-style update specified as an array' }, { 'index' : "
	    "1, 'code' : 9, 'errmsg' : 'multi update is not supported for "
	    "replacement-style update' } ] }");
	EXPECT(
	    c,
	    "{'update': 'p', 'updates': [{'q': {'_id': 2}, 'u': {'_id': 3}}]}",
	    "writeErrors.0.code", "{ 'v' : 66 }");
	EXPECT_ERR(c, "{'update': 'p', 'updates': [{'u': {}}]}", 40414,
		   "BSON field 'update.updates.q' is missing");
	EXPECT_ERR(c,
		   "{'update': 'p', 'updates': [{'q': {}, 'u': {}, 'z': 1}]}",
		   40415, NULL);
	EXPECT(c,
	       "{'update': 'p', 'updates': [{'q': {}, 'u': {'$set': {'a.$[x]': "
	       "1}}, 'arrayFilters': [{'x': 1}]}]}",
	       "writeErrors.0.code", "{ 'v' : 238 }");
}

static void test_delete_fam(struct tconn *c)
{
	EXPECT(c,
	       "{'findAndModify': 'p', 'query': {'v': {'$gt': 10}}, 'sort': "
	       "{'v': -1}, 'update': {'$set': {'w': 1}}, 'new': true, "
	       "'fields': {'w': 1, 'v': 1}}",
	       "value", "{ 'v' : { '_id' : 1, 'v' : 15, 'w' : 1 } }");
	EXPECT(c, "{'findAndModify': 'p', 'query': {'_id': 3}, 'remove': true}",
	       "lastErrorObject", "{ 'v' : { 'n' : 1 } }");
	EXPECT(c,
	       "{'findAndModify': 'p', 'query': {'_id': 99}, 'update': "
	       "{'$set': {'k': 1}}, 'upsert': true, 'new': true}",
	       "lastErrorObject",
	       "{ 'v' : { 'n' : 1, 'updatedExisting' : false, 'upserted' : 99 "
	       "} }");
	EXPECT(c, "{'findAndModify': 'p', 'query': {'_id': 1000}, 'remove': 1}",
	       "value", "{ 'v' : null }");
	EXPECT_ERR(c,
		   "{'findAndModify': 'p', 'remove': true, 'update': {'a': 1}}",
		   9, "Cannot specify both an update and remove=true");
	EXPECT_ERR(c, "{'findAndModify': 'p'}", 9,
		   "Either an update or remove=true must be specified");
	EXPECT_ERR(c,
		   "{'findAndModify': 'p', 'query': {'_id': 1}, 'update': "
		   "{'_id': 2}}",
		   66, NULL);
	EXPECT(c,
	       "{'delete': 'p', 'deletes': [{'q': {'v': {'$gt': 10}}, 'limit': "
	       "1}]}",
	       "n", "{ 'v' : 1 }");
	EXPECT(c, "{'delete': 'p', 'deletes': [{'q': {}, 'limit': 0}]}", "n",
	       "{ 'v' : 5 }");
	EXPECT_ERR(c, "{'delete': 'p', 'deletes': [{'q': {}, 'limit': 2}]}", 9,
		   "The limit field in delete objects must be 0 or 1. Got 2");
	EXPECT_ERR(c, "{'delete': 'p', 'deletes': [{'q': {}}]}", 40414,
		   "delete.deletes.limit");
}

static void test_ddl(struct tconn *c)
{
	EXPECT(c, "{'dropDatabase': 1}", "dropped", "{ 'v' : 'test' }");
	EXPECT(c, "{'create': 'k', 'comment': 'x'}", "ok", "{ 'v' : 1.0 }");
	EXPECT_ERR(c, "{'create': 'k'}", 48, "already exists");
	EXPECT_ERR(c, "{'create': 'k2', 'capped': true, 'size': 1000}", 238,
		   "capped");
	EXPECT(c, "{'listCollections': 1, 'filter': {'name': 'k'}}",
	       "cursor.firstBatch.0.name", "{ 'v' : 'k' }");
	EXPECT(c, "{'listCollections': 1, 'filter': {'name': 'k'}}",
	       "cursor.ns", "{ 'v' : 'test.$cmd.listCollections' }");
	EXPECT(c,
	       "{'listCollections': 1, 'nameOnly': true, 'filter': {'name': "
	       "'k'}}",
	       "cursor.firstBatch",
	       "{ 'v' : [ { 'name' : 'k', 'type' : 'collection' } ] }");
	EXPECT(c, "{'listIndexes': 'k'}", "cursor.firstBatch",
	       "{ 'v' : [ { 'v' : 2, 'key' : { '_id' : 1 }, 'name' : '_id_' } "
	       "] }");
	EXPECT_ERR(c, "{'listIndexes': 'nope'}", 26, "ns does not exist");
	EXPECT_ERR(c, "{'createIndexes': 'k', 'indexes': []}", 238, NULL);
	EXPECT(c, "{'insert': 'k', 'documents': [{'_id': 1, 's': 'abc'}]}", "n",
	       "{ 'v' : 1 }");
	EXPECT(c, "{'collStats': 'k'}", "count", "{ 'v' : 1 }");
	EXPECT(c, "{'collStats': 'k'}", "ns", "{ 'v' : 'test.k' }");
	EXPECT_ERR(c, "{'collStats': 'nope'}", 26, NULL);
	EXPECT(c, "{'dbStats': 1}", "objects", "{ 'v' : 1 }");
	EXPECT(c, "{'listDatabases': 1, 'filter': {'name': 'test'}}",
	       "databases.0.name", "{ 'v' : 'test' }");
	EXPECT(c,
	       "{'listDatabases': 1, 'nameOnly': true, 'filter': {'name': "
	       "'zzz'}}",
	       "databases", "{ 'v' : [  ] }");
	EXPECT(c, "{'drop': 'k'}", "ns", "{ 'v' : 'test.k' }");
	EXPECT_ERR(c, "{'drop': 'k'}", 26, "ns not found");
	EXPECT(c, "{'dropDatabase': 1}", "dropped", "{ 'v' : 'test' }");
	EXPECT(c, "{'count': 'p'}", "n", "{ 'v' : 0 }");
}

/* A write completes later: the connection's next request waits, replies
 * leave in order, and the next request reads the write. */
static void test_order(struct memstore *ms, struct tconn *c)
{
	bson_t *ins = J("{'insert': 'q', '$db': 'test', 'documents': "
			"[{'_id': 1}]}");
	bson_t *fnd = J("{'find': 'q', '$db': 'test'}"), *r;
	size_t n1, n2;
	uint8_t *m1 = msg(ins, 0, NULL, 0, &n1),
		*m2 = msg(fnd, 0, NULL, 0, &n2);
	uint8_t *both = malloc(n1 + n2);
	int rt;

	memcpy(both, m1, n1);
	memcpy(both + n1, m2, n2);
	memstore_defer(ms, true);
	CHECK(feed(c, both, n1 + n2) == n1, "the find waits behind the insert");
	CHECK(mdoor_busy(c->mc) && c->len == 0, "no reply yet");
	CHECK(memstore_complete(ms) == 1 && c->resumed == 1, "resumed once");
	r = take(c, NULL, &rt);
	CHECK(int_at(r, "n") == 1 && rt == (int)get32(m1 + 4),
	      "the insert's reply first");
	bson_destroy(r);
	CHECK(!mdoor_busy(c->mc) && feed(c, both + n1, n2) == n2,
	      "then the find");
	r = take(c, NULL, &rt);
	CHECK(count_at(r, "cursor.firstBatch") == 1 && rt == (int)get32(m2 + 4),
	      "the find reads the insert");
	bson_destroy(r);
	/* moreToCome: no reply, but the order holds all the same */
	free(m1);
	m1 = msg(ins, 2, NULL, 0, &n1);
	CHECK(feed(c, m1, n1) == n1 && mdoor_busy(c->mc), "w:0 insert waits");
	memstore_complete(ms);
	CHECK(c->len == 0 && !mdoor_busy(c->mc), "w:0 answers nothing");
	/* the connection closes while its write is in flight */
	{
		struct mdoor *d = NULL;

		(void)d;
		free(m1);
		bson_destroy(ins);
		ins = J("{'insert': 'q', '$db': 'test', 'documents': "
			"[{'_id': 2}]}");
		m1 = msg(ins, 0, NULL, 0, &n1);
		feed(c, m1, n1);
		mdoor_conn_close(c->mc);
		c->mc = NULL;
		CHECK(memstore_complete(ms) == 1 && c->len == 0 &&
			  c->resumed == 2,
		      "a closed connection's write completes unanswered");
	}
	memstore_defer(ms, false);
	free(m1);
	free(m2);
	free(both);
	bson_destroy(ins);
	bson_destroy(fnd);
}

int main(void)
{
	struct memstore *ms = memstore_new();
	struct mdoor *d = th_door(ms, NULL);
	struct tconn *c = th_open(d, 1);

	for (int sorting = 0; sorting < 2; sorting++) {
		/* the door sorts, then the store does (sorted scans) */
		memstore_sorting(ms, sorting);
		load(c);
		test_find(c);
		test_count_distinct(c);
		test_aggregate(c);
		EXPECT(c, "{'drop': 'p'}", "ok", "{ 'v' : 1.0 }");
	}
	load(c);
	test_insert(c);
	test_update(c);
	test_delete_fam(c);
	test_ddl(c);
	test_order(ms, c);
	free(c->out);
	free(c);
	mdoor_free(d);
	CHECK(memstore_open_scans(ms) == 0, "every scan closed");
	memstore_free(ms);
	return mt_done("unit_mdoor_cmd");
}
