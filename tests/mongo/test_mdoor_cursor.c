/* test_mdoor_cursor.c - the MongoDB door's cursors: getMore from another
 * connection (drivers' pools), after the opening connection closed;
 * killCursors; ids random, positive, distinct; the bounds: cursors per
 * connection and server-wide, the idle timeout (a settable clock, no
 * sleeping), the bytes cursors hold, 16 MiB batches; and every scan the
 * store opened closed again. */
#include <pthread.h>

#include "mdoortest.h"

static int64_t cursor_id(const bson_t *r)
{
	return int_at(r, "cursor.id");
}

static bson_t *getmore(struct tconn *c, int64_t id, const char *coll, int batch)
{
	bson_t *b = bson_new();

	BSON_APPEND_INT64(b, "getMore", id);
	BSON_APPEND_UTF8(b, "collection", coll);
	if (batch)
		BSON_APPEND_INT32(b, "batchSize", batch);
	return run_on(c, "test", b);
}

/* n documents {_id: i} into c, or, with rows, {_id, g (three groups), v,
 * t (an array to unwind)} into y (the yield test's). */
static void load_into(struct tconn *c, int n, bool rows)
{
	bson_t *b = bson_new(), arr, d, t;
	char k[16];

	BSON_APPEND_UTF8(b, "insert", rows ? "y" : "c");
	BSON_APPEND_ARRAY_BEGIN(b, "documents", &arr);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &d);
		BSON_APPEND_INT32(&d, "_id", i);
		if (rows) {
			BSON_APPEND_INT32(&d, "g", i % 3);
			BSON_APPEND_INT32(&d, "v", (i * 7) % 11);
			BSON_APPEND_ARRAY_BEGIN(&d, "t", &t);
			BSON_APPEND_INT32(&t, "0", i % 2);
			BSON_APPEND_INT32(&t, "1", 10 + i % 4);
			bson_append_array_end(&d, &t);
		}
		bson_append_document_end(&arr, &d);
	}
	bson_append_array_end(b, &arr);
	bson_destroy(run_on(c, "test", b));
}

static void load(struct tconn *c, int n)
{
	load_into(c, n, false);
}

static void test_getmore(struct mdoor *d, struct memstore *ms)
{
	struct tconn *a = th_open(d, 1), *b = th_open(d, 2);
	bson_t *r;
	int64_t id, id2;

	load(a, 5);
	r = run(a, "{'find': 'c', 'batchSize': 2}");
	id = cursor_id(r);
	CHECK(id > 0 && count_at(r, "cursor.firstBatch") == 2, "first batch");
	CHECK(!strcmp(str_at(r, "cursor.ns"), "test.c"), "ns");
	bson_destroy(r);
	r = run(a, "{'find': 'c', 'batchSize': 2}");
	id2 = cursor_id(r);
	CHECK(id2 > 0 && id2 != id, "another id");
	bson_destroy(r);
	r = getmore(b, id, "c", 2); /* another connection */
	CHECK(count_at(r, "cursor.nextBatch") == 2 && cursor_id(r) == id,
	      "getMore from another connection");
	CHECK_JSON(r, "cursor.nextBatch",
		   "{ 'v' : [ { '_id' : 2 }, { '_id' : "
		   "3 } ] }");
	bson_destroy(r);
	r = getmore(b, id, "other", 0);
	CHECK_ERR(r, 13,
		  "Requested getMore on namespace 'test.other', but "
		  "cursor belongs to a different namespace test.c");
	bson_destroy(r);
	th_close_conn(a); /* cursors outlive their connection */
	r = getmore(b, id, "c", 0);
	CHECK(count_at(r, "cursor.nextBatch") == 1 && cursor_id(r) == 0,
	      "the last batch, id 0");
	bson_destroy(r);
	r = getmore(b, id, "c", 0);
	CHECK_ERR(r, 43, "not found");
	bson_destroy(r);
	{
		bson_t *k = bson_new(), arr;

		BSON_APPEND_UTF8(k, "killCursors", "c");
		BSON_APPEND_ARRAY_BEGIN(k, "cursors", &arr);
		BSON_APPEND_INT64(&arr, "0", id2);
		BSON_APPEND_INT64(&arr, "1", 12345);
		bson_append_array_end(k, &arr);
		r = run_on(b, "test", k);
		CHECK(int_at(r, "cursorsKilled.0") == id2 &&
			  int_at(r, "cursorsNotFound.0") == 12345,
		      "killCursors");
		bson_destroy(r);
	}
	r = getmore(b, id2, "c", 0);
	CHECK_ERR(r, 43, NULL);
	bson_destroy(r);
	r = run(b, "{'getMore': 1, 'collection': 'c'}");
	CHECK_ERR(r, 14, "expected type 'long'");
	bson_destroy(r);
	CHECK(memstore_open_scans(ms) == 0, "scans closed");
	th_close_conn(b);
}

static void test_timeout(struct mdoor *d, struct memstore *ms)
{
	struct tconn *a = th_open(d, 1);
	bson_t *r = run(a, "{'find': 'c', 'batchSize': 1}");
	int64_t id = cursor_id(r);

	bson_destroy(r);
	t_clock += 599999;
	mdoor_tick(d);
	r = getmore(a, id, "c", 1);
	CHECK(cursor_id(r) == id, "alive before 10 minutes idle");
	bson_destroy(r);
	t_clock += 600000;
	mdoor_tick(d);
	r = getmore(a, id, "c", 1);
	CHECK_ERR(r, 43, NULL);
	bson_destroy(r);
	r = run(a, "{'serverStatus': 1}");
	CHECK(int_at(r, "metrics.cursor.timedOut") == 1, "timedOut counted");
	bson_destroy(r);
	CHECK(memstore_open_scans(ms) == 0, "a timed-out cursor's scan closed");
	th_close_conn(a);
}

static void test_bounds(struct memstore *ms)
{
	struct mdoor_config cfg = {
	    .max_cursors = 3, .max_conn_cursors = 2, .kvd_version = "0.1.0"};
	struct mdoor *d = th_door(ms, &cfg);
	struct tconn *a = th_open(d, 1), *b = th_open(d, 2);
	bson_t *r;

	for (int i = 0; i < 2; i++) {
		r = run(a, "{'find': 'c', 'batchSize': 1}");
		CHECK(cursor_id(r) > 0, "cursor %d", i);
		bson_destroy(r);
	}
	r = run(a, "{'find': 'c', 'batchSize': 1}");
	CHECK_ERR(r, 146, "too many open cursors on this connection (2)");
	bson_destroy(r);
	r = run(a, "{'find': 'c', 'batchSize': 100}");
	CHECK(ok_of(r) == 1 && cursor_id(r) == 0,
	      "a find read whole needs no cursor");
	bson_destroy(r);
	r = run(b, "{'find': 'c', 'batchSize': 1}");
	CHECK(cursor_id(r) > 0, "third cursor, another connection");
	bson_destroy(r);
	r = run(b, "{'find': 'c', 'batchSize': 1}");
	CHECK_ERR(r, 146, "too many open cursors (3)");
	bson_destroy(r);
	th_close_conn(a);
	th_close_conn(b);
	mdoor_free(d);
	CHECK(memstore_open_scans(ms) == 0, "scans closed with the door");

	/* the bytes cursors hold: a sort the door does holds its input */
	cfg = (struct mdoor_config){.cursor_mem = 100, .kvd_version = "0"};
	d = th_door(ms, &cfg);
	a = th_open(d, 1);
	r = run(a, "{'find': 'c', 'sort': {'_id': -1}, 'batchSize': 1}");
	CHECK_ERR(r, 146, "open cursors hold more than 100 bytes");
	bson_destroy(r);
	r = run(a, "{'find': 'c', 'batchSize': 1}");
	CHECK(cursor_id(r) > 0, "a cursor holding nothing is fine");
	bson_destroy(r);
	th_close_conn(a);
	mdoor_free(d);
	CHECK(memstore_open_scans(ms) == 0, "scans closed");
}

/* Five documents of 5 MiB: three fill a batch (16 MiB), two the next. */
static void test_big_batches(struct mdoor *d)
{
	struct tconn *a = th_open(d, 1);
	size_t big = 5u << 20;
	char *s = malloc(big);
	bson_t *r;
	int64_t id;

	memset(s, 'x', big - 1);
	s[big - 1] = '\0';
	for (int i = 0; i < 5; i++) {
		bson_t *b = bson_new(), arr, doc;

		BSON_APPEND_UTF8(b, "insert", "big");
		BSON_APPEND_ARRAY_BEGIN(b, "documents", &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &doc);
		BSON_APPEND_INT32(&doc, "_id", i);
		BSON_APPEND_UTF8(&doc, "s", s);
		bson_append_document_end(&arr, &doc);
		bson_append_array_end(b, &arr);
		r = run_on(a, "test", b);
		CHECK(int_at(r, "n") == 1, "big insert %d", i);
		bson_destroy(r);
	}
	r = run(a, "{'find': 'big'}");
	id = cursor_id(r);
	CHECK(count_at(r, "cursor.firstBatch") == 3 && id > 0,
	      "16 MiB hold three: %d", count_at(r, "cursor.firstBatch"));
	bson_destroy(r);
	r = getmore(a, id, "big", 0);
	CHECK(count_at(r, "cursor.nextBatch") == 2 && cursor_id(r) == 0,
	      "the other two");
	CHECK(int_at(r, "cursor.nextBatch.0._id") == 3, "in order");
	bson_destroy(r);
	free(s);
	th_close_conn(a);
}

struct gm_arg {
	struct tconn *c;
	int64_t id;
	bson_t *reply;
};

static void *gm_thread(void *p)
{
	struct gm_arg *a = p;

	a->reply = getmore(a->c, a->id, "c", 1);
	return NULL;
}

/* A getMore in progress on one thread: another's getMore of the cursor
 * answers 143 CursorInUse; killCursors kills it, and the getMore in
 * progress answers 237 CursorKilled. */
static void test_in_use(struct mdoor *d, struct memstore *ms)
{
	struct tconn *a = th_open(d, 1), *b = th_open(d, 2);
	struct gm_arg g = {.c = th_open(d, 3)};
	bson_t *r = run(a, "{'find': 'c', 'batchSize': 1}"), *k;
	bson_t arr;
	pthread_t t;

	g.id = cursor_id(r);
	bson_destroy(r);
	memstore_block_scans(ms, true);
	pthread_create(&t, NULL, gm_thread, &g);
	memstore_wait_blocked(ms);
	r = getmore(b, g.id, "c", 1);
	CHECK_ERR(r, 143, "is already in use");
	bson_destroy(r);
	k = bson_new();
	BSON_APPEND_UTF8(k, "killCursors", "c");
	BSON_APPEND_ARRAY_BEGIN(k, "cursors", &arr);
	BSON_APPEND_INT64(&arr, "0", g.id);
	bson_append_array_end(k, &arr);
	r = run_on(b, "test", k);
	CHECK(int_at(r, "cursorsKilled.0") == g.id, "killed while in use");
	bson_destroy(r);
	memstore_block_scans(ms, false);
	pthread_join(t, NULL);
	CHECK_ERR(g.reply, 237, "was killed");
	bson_destroy(g.reply);
	r = getmore(b, g.id, "c", 1);
	CHECK_ERR(r, 43, NULL);
	bson_destroy(r);
	th_close_conn(a);
	th_close_conn(b);
	th_close_conn(g.c);
	CHECK(memstore_open_scans(ms) == 0, "the killed cursor's scan closed");
}

/* distinct's values: at most 16 MiB. */
static void test_distinct_cap(struct mdoor *d)
{
	struct tconn *a = th_open(d, 1);
	size_t big = 1u << 20;
	char *s = malloc(big);
	bson_t *r;

	memset(s, 'y', big - 1);
	s[big - 1] = '\0';
	for (int i = 0; i < 17; i++) {
		bson_t *b = bson_new(), arr, doc;

		s[0] = (char)('a' + i);
		BSON_APPEND_UTF8(b, "insert", "dist");
		BSON_APPEND_ARRAY_BEGIN(b, "documents", &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &doc);
		BSON_APPEND_UTF8(&doc, "s", s);
		bson_append_document_end(&arr, &doc);
		bson_append_array_end(b, &arr);
		bson_destroy(run_on(a, "test", b));
	}
	r = run(a, "{'distinct': 'dist', 'key': 's'}");
	CHECK_ERR(r, 17217, "distinct too big, 16mb cap");
	bson_destroy(r);
	free(s);
	th_close_conn(a);
}

/* Reads whose scans pause every other document (each slice gives the
 * thread back: mdoor_again goes on) answer as reads that never pause:
 * find, sorted finds (the pipeline's $sort holds its input across
 * pauses), getMore, count, distinct, and aggregates with each stage
 * that pulls; and a read left yielded when its connection closes
 * releases its cursor and scan. */
/* A read part-way holds what its sort holds: counted in cursor_mem at
 * each pause (many connections part-way through sorts cannot pass it
 * together), where a read that does not pause answers (its cursor ends
 * with its first batch, holding nothing). */
static void test_yield_bound(struct memstore *ps, struct memstore *qs)
{
	static const char *const sorted =
	    "{'aggregate': 'y', 'pipeline': [{'$sort': {'v': 1}}], "
	    "'cursor': {}}";
	struct mdoor_config cfg = {.cursor_mem = 1000, .kvd_version = "0"};
	struct mdoor *pd = th_door(ps, &cfg), *qd = th_door(qs, &cfg);
	struct tconn *p = th_open(pd, 1), *q = th_open(qd, 1);
	bson_t *a;

	a = run(p, sorted);
	CHECK_ERR(a, 146,
		  "reads part-way and open cursors hold more than "
		  "1000 bytes");
	bson_destroy(a);
	a = run(q, sorted);
	CHECK(ok_of(a) == 1 && count_at(a, "cursor.firstBatch") == 40,
	      "not paused: answered");
	bson_destroy(a);
	a = run(p, "{'count': 'y'}");
	CHECK(int_at(a, "n") == 40, "a count holds nothing");
	bson_destroy(a);
	th_close_conn(p);
	th_close_conn(q);
	mdoor_free(pd);
	mdoor_free(qd);
}

static void test_yield(void)
{
	static const char *const reads[][2] = {
	    {"{'find': 'y', 'filter': {'g': 1}}", "cursor.firstBatch"},
	    {"{'find': 'y', 'sort': {'v': -1, '_id': 1}, 'skip': 3, "
	     "'limit': 9}",
	     "cursor.firstBatch"},
	    {"{'find': 'y', 'batchSize': 4}", "cursor.firstBatch"},
	    {"{'count': 'y', 'query': {'v': {'$gt': 4}}}", "n"},
	    {"{'distinct': 'y', 'key': 't'}", "values"},
	    {"{'aggregate': 'y', 'pipeline': [{'$match': {'g': {'$ne': 2}}}, "
	     "{'$group': {'_id': '$g', 'n': {'$sum': 1}, 'v': {'$max': "
	     "'$v'}}}, {'$sort': {'_id': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$sort': {'_id': 1}}, "
	     "{'$group': {'_id': '$g', 'f': {'$first': '$v'}}}, {'$sort': "
	     "{'_id': -1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$unwind': '$t'}, {'$skip': "
	     "5}, {'$limit': 7}, {'$project': {'t': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$match': {'v': {'$lt': 5}}}, "
	     "{'$count': 'k'}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    /* work in memory between reads: a $match after a $project */
	    {"{'aggregate': 'y', 'pipeline': [{'$project': {'v': 1, 'g': "
	     "1}}, {'$match': {'v': {'$gt': 3}}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    /* $lookup: held, by _id, the equality then a pipeline, a
	     * pipeline over all, and a $lookup inside one */
	    {"{'aggregate': 'y', 'pipeline': [{'$lookup': {'from': 'y', "
	     "'localField': 'g', 'foreignField': 'g', 'as': 'j'}}, "
	     "{'$project': {'j._id': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$lookup': {'from': 'y', "
	     "'localField': 'v', 'foreignField': '_id', 'as': 'j'}}, "
	     "{'$project': {'j.t': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$lookup': {'from': 'y', "
	     "'localField': 'g', 'foreignField': 'g', 'pipeline': [{'$match': "
	     "{'v': {'$gt': 5}}}, {'$project': {'_id': 1}}], 'as': 'j'}}, "
	     "{'$project': {'j': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$limit': 3}, {'$lookup': "
	     "{'from': 'y', 'pipeline': [{'$match': {'g': 1}}, {'$project': "
	     "{'_id': 1}}], 'as': 'j'}}, {'$project': {'j': 1}}], "
	     "'cursor': {}}",
	     "cursor.firstBatch"},
	    {"{'aggregate': 'y', 'pipeline': [{'$match': {'_id': {'$lt': "
	     "4}}}, {'$lookup': {'from': 'y', 'pipeline': [{'$match': {'v': "
	     "{'$lt': 3}}}, {'$lookup': {'from': 'y', 'localField': 'v', "
	     "'foreignField': 'g', 'as': 'k'}}, {'$project': {'k._id': 1}}], "
	     "'as': 'j'}}, {'$project': {'j': 1}}], 'cursor': {}}",
	     "cursor.firstBatch"},
	};
	struct memstore *ps = memstore_new(), *qs = memstore_new();
	struct mdoor *pd, *qd;
	struct tconn *p, *q;
	bson_t *a, *b;
	int64_t id;

	memstore_pausing(ps, true);
	memstore_pausing(qs, false);
	pd = th_door(ps, NULL);
	qd = th_door(qs, NULL);
	p = th_open(pd, 1);
	q = th_open(qd, 1);
	load_into(p, 40, true);
	load_into(q, 40, true);
	for (size_t i = 0; i < sizeof(reads) / sizeof(*reads); i++) {
		char *ja, *jb;
		int before = p->yields;

		a = run(p, reads[i][0]);
		b = run(q, reads[i][0]);
		ja = json_at(a, reads[i][1]);
		jb = json_at(b, reads[i][1]);
		CHECK(ok_of(a) == 1 && !strcmp(ja, jb),
		      "%s: paused %s, unpaused %s", reads[i][0], ja, jb);
		CHECK(p->yields > before, "%s yielded", reads[i][0]);
		bson_free(ja);
		bson_free(jb);
		bson_destroy(a);
		bson_destroy(b);
	}
	/* a getMore yields and goes on too */
	a = run(p, "{'find': 'y', 'batchSize': 30}");
	id = cursor_id(a);
	bson_destroy(a);
	a = getmore(p, id, "y", 0);
	CHECK(count_at(a, "cursor.nextBatch") == 10 && cursor_id(a) == 0,
	      "getMore over pausing scans");
	bson_destroy(a);
	/* left yielded, then closed: nothing stays open */
	{
		bson_t *body = bson_new_from_json(
		    (const uint8_t *)"{\"count\": \"y\", \"$db\": \"test\"}",
		    -1, NULL);
		size_t len;
		uint8_t *m = msg(body, 0, NULL, 0, &len);

		CHECK(mdoor_input(p->mc, m, len, NULL) == len, "taken");
		CHECK(mdoor_yielded(p->mc) && mdoor_busy(p->mc), "yielded");
		CHECK(mdoor_input(p->mc, m, len, NULL) == 0,
		      "no input while yielded");
		free(m);
		bson_destroy(body);
	}
	th_close_conn(p);
	th_close_conn(q);
	mdoor_free(pd); /* (the batchSize 4 cursor is still registered) */
	mdoor_free(qd);
	CHECK(memstore_open_scans(ps) == 0, "an abandoned read's scan closed");
	test_yield_bound(ps, qs);
	memstore_free(ps);
	memstore_free(qs);
}

int main(void)
{
	struct memstore *ms = memstore_new();
	struct mdoor *d = th_door(ms, NULL);

	test_getmore(d, ms);
	test_timeout(d, ms);
	test_in_use(d, ms);
	test_distinct_cap(d);
	test_bounds(ms);
	test_big_batches(d);
	test_yield();
	mdoor_free(d);
	CHECK(memstore_open_scans(ms) == 0, "every scan closed");
	memstore_free(ms);
	return mt_done("unit_mdoor_cursor");
}
