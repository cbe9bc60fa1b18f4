/* test_docstore.c - documents in the store (kvd/doc/doc.h) through real
 * committers and real LMDB files: the catalog (ids, one id for a
 * collection two threads create at once, drops), insert with duplicate
 * _id, updates computed on the committer (upsert, replacement, a filter
 * checked again, findAndModify's images), delete, reads by _id, scans of
 * a collection merged across shards in _id order in bounded batches, a
 * restart replaying it all, index entries written with their documents
 * (index.h: insert, update, multikey, delete, a refused document, REINDEX,
 * and the restart), the set of live unique-write tokens (unique.h)
 * against a plain list through begins and ends in random order, and
 * the lost-update test: 8 threads $inc
 * their own field of one document 10,000 times each, and every increment
 * is there.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "doc.h"
#include "index.h"
#include "journaltest.h"
#include "kv_status.h"
#include "net/router.h"
#include "store.h"
#include "store_log.h"
#include "unique.h"

void kvd_log(int level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

int kvd_log_ratelimited(struct kvd_log_limit *l, int level, const char *fmt,
			...)
{
	(void)l;
	(void)level;
	(void)fmt;
	return 0;
}

#define SHARDS 4
#define THREADS 8
#define INCS 10000

static struct kvd_store *st;
static struct kvd_commit *com;
static struct kvd_merge_op ops[KVD_MERGE_MAX];
static unsigned reap_ms = 1000, flush_ms = 10;

/* A submitter waiting for its request (one in flight a thread). */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

static void complete(void *arg, struct kvd_wreq *w)
{
	struct waiter *wt = w->pend;

	(void)arg;
	pthread_mutex_lock(&wt->mu);
	wt->done = 1;
	pthread_cond_signal(&wt->cv);
	pthread_mutex_unlock(&wt->mu);
}

static void open_all(const char *dir)
{
	struct kvd_store_opts so = {.dir = dir,
				    .want_shards = SHARDS,
				    .map_size = 256u << 20,
				    .max_readers = 64,
				    .merge = ops,
				    .nmerge = KVD_MERGE_MAX};
	struct kvd_commit_opts co = {.async = 1,
				     .max_value = 16u << 20,
				     .reap_interval_ms = &reap_ms,
				     .flush_interval_ms = &flush_ms,
				     .hooks.complete = complete};
	char err[256];

	kvdoc_register(ops);
	if (kvd_store_open(&st, &so, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	co.store = st;
	co.start_ms = kvd_now_ms();
	if (kvd_committers_start(&com, &co)) {
		fprintf(stderr, "committers\n");
		exit(1);
	}
}

static void close_all(void)
{
	kvd_committers_stop(com);
	kvd_store_close(st);
}

/* Submit w and wait until it is back. */
static void run_wait(struct kvd_wreq *w)
{
	struct waiter wt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			    0};

	w->pend = &wt;
	kvd_committer_submit(com, w);
	kvd_committer_flush(com);
	pthread_mutex_lock(&wt.mu);
	while (!wt.done)
		pthread_cond_wait(&wt.cv, &wt.mu);
	pthread_mutex_unlock(&wt.mu);
}

/* The index section the document merges get (none by default). */
static uint8_t tsec[4096 + 8] = {0}; /* and 8 bytes of version 0 */
static size_t tsec_len = 4;
static uint64_t tsec_ver; /* little-endian hosts: the section's version */

/* One merge (op id) of key with operand on shard, waited for: its status,
 * *result, and the reply bytes in *reply (malloc'd, or NULL). */
static int merge(unsigned shard, unsigned ks, unsigned op, const void *key,
		 size_t klen, const void *opnd, size_t olen, int64_t *result,
		 struct kv_slice *reply)
{
	/* a document's operand opens with its indexes (index.h): tsec's */
	size_t sn =
	    ks == KVD_KS_DOC && op != KVDOC_OP_REINDEX ? tsec_len + 8 : 0;
	struct kvd_wreq *w =
	    calloc(1, sizeof(*w) + KVD_ITEM_HDR + klen + sn + olen);
	uint16_t kn = (uint16_t)klen;
	uint32_t vn = (uint32_t)(sn + olen);
	int rc;

	memcpy(w->data, &kn, 2);
	memcpy(w->data + 2, &vn, 4);
	memcpy(w->data + KVD_ITEM_HDR, key, klen);
	memcpy(w->data + KVD_ITEM_HDR + klen, tsec, sn ? tsec_len : 0);
	if (sn) /* the catalog version (0: the section as given) */
		memcpy(w->data + KVD_ITEM_HDR + klen + tsec_len, &tsec_ver, 8);
	memcpy(w->data + KVD_ITEM_HDR + klen + sn, opnd, olen);
	olen += sn;
	w->shard = (uint16_t)shard;
	w->op.kind = KVD_W_MERGE;
	w->op.ks = (uint8_t)ks;
	w->op.flags = (uint8_t)(KVDOC_MERGE_BASE + op);
	w->op.nitems = 1;
	w->op.items = w->data;
	w->op.items_len = KVD_ITEM_HDR + klen + olen;
	run_wait(w);
	rc = w->op.status;
	if (result)
		*result = w->op.result;
	if (reply) {
		reply->p = w->op.val;
		reply->n = w->op.val ? w->op.vlen : 0;
	} else {
		free(w->op.val);
	}
	free(w);
	return rc;
}

static int catalog(unsigned op, unsigned flags, const char *db,
		   const char *coll, int64_t *id)
{
	struct kv_buf b = {0};
	int rc;

	if (kvdoc_op_catalog(&b, op, flags, db, coll, NULL, 0))
		return -1;
	rc = merge(0, KVD_KS_CATALOG, KVDOC_OP_CATALOG, KVDOC_CATALOG_KEY,
		   sizeof(KVDOC_CATALOG_KEY) - 1, b.data, b.len, id, NULL);
	kv_buf_free(&b);
	return rc;
}

/* The key and shard of the document _id: int32 n of collection coll. */
static unsigned key_of(uint32_t coll, int32_t n, uint8_t *key, size_t *klen)
{
	bson_value_t id = {.value_type = BSON_TYPE_INT32, .value.v_int32 = n};
	struct mql_error e;

	if (kvdoc_key(coll, &id, key, klen, &e))
		abort();
	return kvd_shard_of(key, *klen, SHARDS);
}

static int insert(uint32_t coll, const char *json)
{
	bson_error_t be;
	bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &be);
	bson_iter_t it;
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	struct mql_error e;
	unsigned shard;
	int rc;

	if (!d || !bson_iter_init_find(&it, d, "_id") ||
	    kvdoc_key(coll, bson_iter_value(&it), key, &kn, &e))
		abort();
	shard = kvd_shard_of(key, kn, SHARDS);
	rc = merge(shard, KVD_KS_DOC, KVDOC_OP_INSERT, key, kn,
		   bson_get_data(d), d->len, NULL, NULL);
	bson_destroy(d);
	return rc;
}

/* An update of _id n by update (JSON), filter (JSON or NULL), flags: its
 * status, result, and the reply image as JSON in out ("" for none). */
static int update(uint32_t coll, int32_t n, const char *upd, const char *filter,
		  unsigned flags, int64_t *result, char *out, size_t cap)
{
	bson_error_t be;
	bson_t *u = bson_new_from_json((const uint8_t *)upd, -1, &be);
	bson_t *f = filter
			? bson_new_from_json((const uint8_t *)filter, -1, &be)
			: NULL;
	bson_value_t id = {.value_type = BSON_TYPE_INT32, .value.v_int32 = n};
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	unsigned shard = key_of(coll, n, key, &kn);
	struct kv_buf b = {0};
	struct kv_slice reply;
	int rc;

	if (!u ||
	    kvdoc_op_update(&b, flags, bson_get_data(u), u->len,
			    f ? bson_get_data(f) : NULL, f ? f->len : 0, &id))
		abort();
	rc = merge(shard, KVD_KS_DOC, KVDOC_OP_UPDATE, key, kn, b.data, b.len,
		   result, &reply);
	if (out) {
		bson_t r;
		char *j = NULL;

		out[0] = '\0';
		if (reply.n && bson_init_static(&r, reply.p, reply.n))
			j = bson_as_relaxed_extended_json(&r, NULL);
		/* an error's text is not NUL-terminated */
		if (j)
			snprintf(out, cap, "%s", j);
		else
			snprintf(out, cap, "%.*s", (int)reply.n,
				 reply.n ? (const char *)reply.p : "");
		bson_free(j);
	}
	free((void *)reply.p);
	kv_buf_free(&b);
	bson_destroy(u);
	if (f)
		bson_destroy(f);
	return rc;
}

/* Document _id n as relaxed JSON in out ("" when absent). */
static const char *find(uint32_t coll, int32_t n, char *out, size_t cap)
{
	struct kvd_reader *r = kvd_reader_new(st);
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	struct kv_slice d;
	bson_t b;

	key_of(coll, n, key, &kn);
	out[0] = '\0';
	if (kvdoc_get(r, SHARDS, key, kn, kvd_now_ms(), &d) == KV_OK &&
	    bson_init_static(&b, d.p, d.n)) {
		char *j = bson_as_relaxed_extended_json(&b, NULL);

		snprintf(out, cap, "%s", j);
		bson_free(j);
	}
	kvd_reader_free(r);
	return out;
}

static int scan_fn(void *arg, struct kv_slice k, struct kv_slice v,
		   unsigned type, uint64_t exp)
{
	char *out = arg;
	bson_t b;
	bson_iter_t it;

	(void)k;
	(void)exp;
	if (type != KVD_VT_DOC || !bson_init_static(&b, v.p, v.n) ||
	    !bson_iter_init_find(&it, &b, "_id"))
		return 1;
	snprintf(out + strlen(out), 512 - strlen(out), "%d,",
		 bson_iter_int32(&it));
	return 0;
}

/* The _ids of collection coll in scan order, batches of max, "|" between
 * batches. */
static const char *scan_ids(uint32_t coll, unsigned max, char out[512])
{
	struct kvd_reader *r = kvd_reader_new(st);
	struct kvdoc_scan s;

	out[0] = '\0';
	kvdoc_scan_init(&s, coll);
	while (!s.done) {
		if (kvdoc_scan_batch(&s, r, max, kvd_now_ms(), scan_fn, out)) {
			strcat(out, "failed");
			break;
		}
		kvd_reader_reset(r);
		if (!s.done)
			strcat(out, "|");
	}
	kvd_reader_free(r);
	return out;
}

struct racer {
	pthread_t th;
	int64_t id;
	int rc;
};

static void *create_race(void *arg)
{
	struct racer *r = arg;

	r->rc = catalog(KVDOC_CAT_CREATE, 0, "db", "raced", &r->id);
	return NULL;
}

static void t_catalog(void)
{
	struct racer r[THREADS];
	int64_t id = 0, id2 = 0;
	struct kvd_reader *rd;
	struct kvdoc_catalog cat = {0};
	uint32_t cid;

	CHECK(catalog(KVDOC_CAT_CREATE, KVDOC_EXCL, "db", "c", &id) == KV_OK &&
		  id == 1,
	      "create: %lld", (long long)id);
	CHECK(catalog(KVDOC_CAT_CREATE, KVDOC_EXCL, "db", "c", &id2) ==
		      KV_EXISTS &&
		  id2 == 1,
	      "create again");
	for (int i = 0; i < THREADS; i++)
		pthread_create(&r[i].th, NULL, create_race, &r[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(r[i].th, NULL);
		CHECK(r[i].rc == KV_OK && r[i].id == 2, "raced create %d: %lld",
		      r[i].rc, (long long)r[i].id);
	}
	CHECK(catalog(KVDOC_CAT_CREATE, 0, "db2", "x", &id) == KV_OK && id == 3,
	      "db2.x");
	CHECK(catalog(KVDOC_CAT_DROP, 0, "db2", "x", &id) == KV_OK && id == 3,
	      "drop");
	CHECK(catalog(KVDOC_CAT_DROP, 0, "db2", "x", &id) == KV_NOT_FOUND,
	      "drop again");
	/* ids are never reused */
	CHECK(catalog(KVDOC_CAT_CREATE, 0, "db2", "x", &id) == KV_OK && id == 4,
	      "again: %lld", (long long)id);
	rd = kvd_reader_new(st);
	CHECK(kvdoc_catalog_refresh(&cat, rd, kvd_now_ms()) == KV_OK,
	      "refresh");
	CHECK(kvdoc_catalog_find(&cat, "db", "raced", &cid, NULL) && cid == 2,
	      "find");
	CHECK(kvdoc_catalog_find(&cat, "db2", "x", &cid, NULL) && cid == 4,
	      "find");
	CHECK(!kvdoc_catalog_find(&cat, "db", "x", &cid, NULL), "not found");
	kvdoc_catalog_free(&cat);
	kvd_reader_free(rd);
}

static void t_documents(void)
{
	char b[512];
	int64_t res = -9;

	for (int i = 20; i >= 1; i--) {
		char j[64];

		snprintf(j, sizeof(j), "{\"_id\": %d, \"n\": %d}", i, i * 10);
		CHECK(insert(1, j) == KV_OK, "insert %d", i);
	}
	CHECK(insert(1, "{\"_id\": 5, \"n\": 0}") == KV_EXISTS, "duplicate");
	CHECK(!strcmp(find(1, 5, b, sizeof(b)), "{ \"_id\" : 5, \"n\" : 50 }"),
	      "%s", b);
	/* a collection is its own range: collection 2 holds none of them */
	CHECK(!strcmp(find(2, 5, b, sizeof(b)), ""), "%s", b);
	CHECK(!strcmp(scan_ids(1, 7, b),
		      "1,2,3,4,5,6,7,|8,9,10,11,12,13,14,|15,16,17,18,19,20,"),
	      "scan: %s", b);
	CHECK(!strcmp(scan_ids(2, 7, b), ""), "scan 2: %s", b);
	/* findAndModify's images */
	CHECK(update(1, 5, "{\"$inc\": {\"n\": 1}}", NULL, KVDOC_RET_OLD, &res,
		     b, sizeof(b)) == KV_OK &&
		  res == KVDOC_R_MODIFIED,
	      "update");
	CHECK(!strcmp(b, "{ \"_id\" : 5, \"n\" : 50 }"), "old: %s", b);
	CHECK(update(1, 5, "{\"$inc\": {\"n\": 1}}", NULL, KVDOC_RET_NEW, &res,
		     b, sizeof(b)) == KV_OK,
	      "update");
	CHECK(!strcmp(b, "{ \"_id\" : 5, \"n\" : 52 }"), "new: %s", b);
	/* a filter that no longer matches: skipped */
	CHECK(update(1, 5, "{\"$set\": {\"x\": 1}}", "{\"n\": 50}", 0, &res,
		     NULL, 0) == KV_OK &&
		  res == KVDOC_R_NOMATCH,
	      "stale filter: %lld", (long long)res);
	CHECK(update(1, 5, "{\"$set\": {\"n\": 52}}", NULL, 0, &res, NULL, 0) ==
		      KV_OK &&
		  res == KVDOC_R_MATCHED,
	      "no change: %lld", (long long)res);
	/* replacement keeps _id */
	CHECK(update(1, 6, "{\"r\": true}", NULL, 0, &res, NULL, 0) == KV_OK &&
		  res == KVDOC_R_MODIFIED,
	      "replace");
	CHECK(
	    !strcmp(find(1, 6, b, sizeof(b)), "{ \"_id\" : 6, \"r\" : true }"),
	    "%s", b);
	/* upsert: the filter's equalities, then the update */
	CHECK(update(1, 30, "{\"$set\": {\"a\": 1}}", "{\"_id\": 30, \"k\": 2}",
		     KVDOC_UPSERT, &res, NULL, 0) == KV_OK &&
		  res == KVDOC_R_UPSERTED,
	      "upsert: %lld", (long long)res);
	CHECK(!strcmp(find(1, 30, b, sizeof(b)),
		      "{ \"_id\" : 30, \"k\" : 2, \"a\" : 1 }"),
	      "%s", b);
	CHECK(update(1, 31, "{\"$set\": {\"a\": 1}}", NULL, 0, &res, NULL, 0) ==
		      KV_OK &&
		  res == KVDOC_R_NOMATCH && !find(1, 31, b, sizeof(b))[0],
	      "no upsert");
	/* MongoDB's errors come back as a negative code and the message */
	CHECK(update(1, 7, "{\"$inc\": {\"n\": \"x\"}}", NULL, 0, &res, b,
		     sizeof(b)) == KV_OK &&
		  res == -14,
	      "bad $inc: %lld %s", (long long)res, b);
	CHECK(update(1, 7, "{\"$set\": {\"_id\": 8}}", NULL, 0, &res, b,
		     sizeof(b)) == KV_OK &&
		  res == -66,
	      "_id changed: %lld %s", (long long)res, b);
}

static void t_delete(void)
{
	struct kv_buf op = {0};
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	unsigned shard = key_of(1, 7, key, &kn);
	int64_t res = -1;
	char b[512];
	bson_t *f = bson_new_from_json((const uint8_t *)"{\"n\": 1}", -1, NULL);

	kvdoc_op_delete(&op, 0, bson_get_data(f), f->len);
	CHECK(merge(shard, KVD_KS_DOC, KVDOC_OP_DELETE, key, kn, op.data,
		    op.len, &res, NULL) == KV_OK &&
		  res == 0,
	      "filtered delete skipped");
	op.len = 0;
	kvdoc_op_delete(&op, KVDOC_RET_OLD, NULL, 0);
	CHECK(merge(shard, KVD_KS_DOC, KVDOC_OP_DELETE, key, kn, op.data,
		    op.len, &res, NULL) == KV_OK &&
		  res == 1,
	      "delete");
	CHECK(!find(1, 7, b, sizeof(b))[0], "deleted: %s", b);
	kv_buf_free(&op);
	bson_destroy(f);
}

/* ---- index entries (index.h) ---- */

/* Add index id on key pattern (JSON) to the section every document
 * merge gets. */
static void sec_add(uint32_t id, const char *key, unsigned flags)
{
	bson_t *k = bson_new_from_json((const uint8_t *)key, -1, NULL);
	uint32_t n, z = 0, kl = k->len;

	memcpy(&n, tsec, 4);
	n++;
	memcpy(tsec, &n, 4);
	memcpy(tsec + tsec_len, &id, 4);
	tsec[tsec_len + 4] = (uint8_t)flags;
	memcpy(tsec + tsec_len + 5, &kl, 4);
	memcpy(tsec + tsec_len + 9, bson_get_data(k), kl);
	memcpy(tsec + tsec_len + 9 + kl, &z, 4);
	tsec_len += 13 + kl;
	bson_destroy(k);
}

/* Is there an entry of index id for value v (int32; INT32_MIN: null)
 * and document _id n of collection coll? */
static int ix_has(uint32_t id, uint32_t coll, int32_t v, int32_t n)
{
	bson_value_t val = {.value_type = BSON_TYPE_INT32, .value.v_int32 = v};
	uint8_t key[KVDOC_KEY_MAX], enc[MQL_KEY_MAX], ent[512];
	size_t kn, en = 0, len;
	unsigned shard = key_of(coll, n, key, &kn);
	struct kvd_reader *r = kvd_reader_new(st);
	struct mql_error e;
	struct kv_slice d;
	unsigned type;
	int rc;

	if (v == INT32_MIN)
		val.value_type = BSON_TYPE_NULL;
	if (mql_key_encode(&val, false, enc, sizeof(enc), &en, &e))
		abort();
	len = kvdoc_ix_entry(id, enc, en, key, kn, ent);
	rc = kvd_reader_getk(r, shard, KVD_KS_INDEX, ent, len, kvd_now_ms(), &d,
			     &type);
	kvd_reader_free(r);
	return rc == KV_OK;
}

static int count_fn(void *arg, struct kv_slice k, struct kv_slice v,
		    unsigned type, uint64_t exp)
{
	(void)k, (void)v, (void)type, (void)exp;
	++*(int *)arg;
	return 0;
}

/* Entries of index id, over every shard. */
static int ix_count(uint32_t id)
{
	uint8_t pre[4] = {(uint8_t)(id >> 24), (uint8_t)(id >> 16),
			  (uint8_t)(id >> 8), (uint8_t)id};
	struct kvd_scan sc = {.prefix = {pre, 4},
			      .limit = 100000,
			      .max_bytes = SIZE_MAX,
			      .ks = KVD_KS_INDEX};
	struct kvd_reader *r = kvd_reader_new(st);
	struct kv_slice next;
	int n = 0;

	if (kvd_reader_scan(r, &sc, kvd_now_ms(), count_fn, &n, &next))
		n = -1;
	kvd_reader_free(r);
	return n;
}

static void t_index(void)
{
	char b[512];
	int64_t res = 0;
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	unsigned shard;
	struct kv_buf op = {0};

	sec_add(50, "{\"a\": 1}", 0);
	sec_add(51, "{\"a\": 1, \"c\": 1}", KVDOC_IXF_SPARSE);
	CHECK(insert(7, "{\"_id\": 1, \"a\": 5}") == KV_OK, "insert");
	CHECK(insert(7, "{\"_id\": 2, \"a\": [1, 2]}") == KV_OK, "insert");
	CHECK(insert(7, "{\"_id\": 3}") == KV_OK, "insert");
	CHECK(ix_has(50, 7, 5, 1) && ix_has(50, 7, 1, 2) &&
		  ix_has(50, 7, 2, 2) && ix_has(50, 7, INT32_MIN, 3),
	      "entries of inserts");
	CHECK(ix_count(50) == 4, "4 entries: %d", ix_count(50));
	/* sparse: no entry for _id 3, which has neither a nor c */
	CHECK(ix_count(51) == 3, "sparse: %d", ix_count(51));
	update(7, 1, "{\"$set\": {\"a\": 6}}", NULL, 0, &res, NULL, 0);
	CHECK(!ix_has(50, 7, 5, 1) && ix_has(50, 7, 6, 1), "update moved it");
	update(7, 2, "{\"$set\": {\"a\": [2, 3]}}", NULL, 0, &res, NULL, 0);
	CHECK(!ix_has(50, 7, 1, 2) && ix_has(50, 7, 2, 2) &&
		  ix_has(50, 7, 3, 2),
	      "multikey update");
	/* parallel arrays: refused, and nothing of it stored */
	CHECK(insert(7, "{\"_id\": 4, \"a\": [1, 2], \"c\": [3, 4]}") ==
		      KV_OK &&
		  ix_count(50) == 4 && !find(7, 4, b, sizeof(b))[0],
	      "parallel arrays stored something: %d", ix_count(50));
	shard = key_of(7, 3, key, &kn);
	kvdoc_op_delete(&op, 0, NULL, 0);
	CHECK(merge(shard, KVD_KS_DOC, KVDOC_OP_DELETE, key, kn, op.data,
		    op.len, &res, NULL) == KV_OK &&
		  res == 1 && !ix_has(50, 7, INT32_MIN, 3),
	      "delete took its entry");
	/* REINDEX: the entries of an index the documents did not have */
	CHECK(ix_count(52) == 0, "52 empty");
	op.len = 0;
	{
		uint8_t sv[4096];
		size_t sl = tsec_len;

		memcpy(sv, tsec, sl);
		tsec_len = 4;
		memset(tsec, 0, 4);
		sec_add(52, "{\"a\": -1}", 0);
		kv_buf_append(&op, tsec, tsec_len);
		kv_buf_append(&op, "\0\0\0\0\0\0\0\0", 8);
		memcpy(tsec, sv, sl);
		tsec_len = sl;
	}
	shard = key_of(7, 2, key, &kn);
	CHECK(merge(shard, KVD_KS_DOC, KVDOC_OP_REINDEX, key, kn, op.data,
		    op.len, &res, NULL) == KV_OK &&
		  res == 1 && ix_count(52) == 2,
	      "reindex: %d", ix_count(52));
	kv_buf_free(&op);
	tsec_len = 4;
	memset(tsec, 0, 4);
}

/* An operand made from an older catalog (version 1) still keeps an
 * index the catalog's merge added since (index.h, kvdoc_ix_fresh). */
static void t_index_fresh(void)
{
	bson_t *spec = bson_new_from_json(
	    (const uint8_t *)"{\"v\": 2, \"key\": {\"a\": 1}, \"name\": "
			     "\"a_1\"}",
	    -1, NULL);
	struct kv_buf b = {0};
	int64_t coll = 0, ix = 0;

	CHECK(catalog(KVDOC_CAT_CREATE, 0, "db", "fresh", &coll) == KV_OK,
	      "create");
	kvdoc_op_catalog(&b, KVDOC_CAT_IXADD, 0, "db", "fresh",
			 bson_get_data(spec), spec->len);
	CHECK(merge(0, KVD_KS_CATALOG, KVDOC_OP_CATALOG, KVDOC_CATALOG_KEY,
		    sizeof(KVDOC_CATALOG_KEY) - 1, b.data, b.len, &ix,
		    NULL) == KV_OK &&
		  ix > 0,
	      "ixadd: %lld", (long long)ix);
	tsec_ver = 1; /* an io thread's copy from before: no index */
	CHECK(insert((uint32_t)coll, "{\"_id\": 1, \"a\": 5}") == KV_OK,
	      "insert");
	CHECK(ix_has((uint32_t)ix, (uint32_t)coll, 5, 1),
	      "a stale operand's write lacks the new index's entry");
	tsec_ver = 0;
	kv_buf_free(&b);
	bson_destroy(spec);
}

/* A catalog change of db.multi with options o: its status, *res. */
static int ix_op(unsigned op, const void *o, size_t on, int64_t *res)
{
	struct kv_buf b = {0};
	int rc;

	kvdoc_op_catalog(&b, op, 0, "db", "multi", o, (uint32_t)on);
	rc = merge(0, KVD_KS_CATALOG, KVDOC_OP_CATALOG, KVDOC_CATALOG_KEY,
		   sizeof(KVDOC_CATALOG_KEY) - 1, b.data, b.len, res, NULL);
	kv_buf_free(&b);
	return rc;
}

static int state_fn(void *arg, const struct kvdoc_ix *ix)
{
	char *out = arg;

	snprintf(out + strlen(out), 64 - strlen(out), "%c",
		 ix->state == KVDOC_IX_READY ? 'R' : 'B');
	return 0;
}

/* The states of collection coll's indexes, in order: "RB..." */
static const char *ix_states(uint32_t coll, char out[64])
{
	struct kvd_reader *rd = kvd_reader_new(st);
	struct kvdoc_catalog cat = {0};

	out[0] = '\0';
	if (kvdoc_catalog_refresh(&cat, rd, kvd_now_ms()) == KV_OK)
		kvdoc_catalog_indexes(&cat, coll, state_fn, out);
	kvdoc_catalog_free(&cat);
	kvd_reader_free(rd);
	return out;
}

/* One build of several indexes (doc_mdoor_ix.c): a section naming some
 * of the collection's indexes, whose one REINDEX writes the entries of
 * each of them and of no other, and one IXREADY that readies all its
 * indexes or, one of them gone, none. */
static void t_index_multi(void)
{
	static const char *const specs[3] = {
	    "{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}",
	    "{\"v\": 2, \"key\": {\"b\": 1}, \"name\": \"b_1\"}",
	    "{\"v\": 2, \"key\": {\"c\": -1}, \"name\": \"c_-1\"}"};
	int64_t coll = 0, ix[3] = {0}, res = 0;
	struct kvd_reader *rd = kvd_reader_new(st);
	struct kvdoc_catalog cat = {0};
	struct kv_buf sec = {0};
	uint8_t ids[8], key[KVDOC_KEY_MAX];
	size_t kn;
	unsigned shard;
	char s[64];
	int rc;

	/* (earlier tests wrote documents of collection ids they did not
	 * create: an _id none of them used) */
	CHECK(catalog(KVDOC_CAT_CREATE, 0, "db", "multi", &coll) == KV_OK,
	      "create");
	for (int i = 0; i < 3; i++) {
		bson_t *b =
		    bson_new_from_json((const uint8_t *)specs[i], -1, NULL);

		CHECK(ix_op(KVDOC_CAT_IXADD, bson_get_data(b), b->len,
			    &ix[i]) == KV_OK &&
			  ix[i] > 0,
		      "ixadd %d", i);
		bson_destroy(b);
	}
	rc = insert((uint32_t)coll, "{\"_id\": 4242, \"a\": 4, \"b\": 5, "
				    "\"c\": 6}");
	CHECK(rc == KV_OK, "insert: %d", rc);
	/* the build's section: a_1 and c_-1 */
	for (int i = 0; i < 4; i++) {
		ids[i] = (uint8_t)(ix[0] >> (8 * i));
		ids[4 + i] = (uint8_t)(ix[2] >> (8 * i));
	}
	CHECK(kvdoc_catalog_refresh(&cat, rd, kvd_now_ms()) == KV_OK &&
		  !kvdoc_ix_section_of(&cat, (uint32_t)coll,
				       (struct kv_slice){ids, 8}, &sec) &&
		  sec.len > 4 && sec.data[0] == 2,
	      "section of two");
	/* their entries, written by the insert (from a section of none),
	 * come from the one REINDEX */
	for (int i = 0; i < 3; i++)
		CHECK(ix_count((uint32_t)ix[i]) == 0, "no entry yet");
	shard = key_of((uint32_t)coll, 4242, key, &kn);
	CHECK(merge(shard, KVD_KS_DOC, KVDOC_OP_REINDEX, key, kn, sec.data,
		    sec.len, &res, NULL) == KV_OK &&
		  res == 1,
	      "reindex");
	CHECK(ix_has((uint32_t)ix[0], (uint32_t)coll, 4, 4242) &&
		  ix_count((uint32_t)ix[2]) == 1 &&
		  ix_count((uint32_t)ix[1]) == 0,
	      "entries of both, none of the third: %d %d %d",
	      ix_count((uint32_t)ix[0]), ix_count((uint32_t)ix[1]),
	      ix_count((uint32_t)ix[2]));
	CHECK(!strcmp(ix_states((uint32_t)coll, s), "BBB"), "building: %s", s);
	/* an IXREADY naming one index not there readies none */
	ids[4] = 0x3f, ids[5] = 0x42, ids[6] = 0x0f, ids[7] = 0;
	CHECK(ix_op(KVDOC_CAT_IXREADY, ids, 8, &res) == KV_NOT_FOUND,
	      "ixready of a gone index");
	CHECK(!strcmp(ix_states((uint32_t)coll, s), "BBB"), "none: %s", s);
	for (int i = 0; i < 4; i++)
		ids[4 + i] = (uint8_t)(ix[2] >> (8 * i));
	CHECK(ix_op(KVDOC_CAT_IXREADY, ids, 8, &res) == KV_OK, "ixready");
	CHECK(!strcmp(ix_states((uint32_t)coll, s), "RBR"), "two: %s", s);
	kv_buf_free(&sec);
	kvdoc_catalog_free(&cat);
	kvd_reader_free(rd);
}

/* The lost-update test. */
struct incer {
	pthread_t th;
	int field, fails;
};

static void *inc_main(void *arg)
{
	struct incer *in = arg;
	char u[64];

	snprintf(u, sizeof(u), "{\"$inc\": {\"f%d\": 1}}", in->field);
	for (int i = 0; i < INCS; i++) {
		int64_t res = 0;

		if (update(1, 100, u, NULL, 0, &res, NULL, 0) != KV_OK ||
		    res != KVDOC_R_MODIFIED)
			in->fails++;
	}
	return NULL;
}

static void t_lost_update(void)
{
	struct incer in[THREADS];
	struct kvd_reader *r;
	uint8_t key[KVDOC_KEY_MAX];
	size_t kn;
	struct kv_slice d;
	bson_t b;
	bson_iter_t it;

	CHECK(insert(1, "{\"_id\": 100}") == KV_OK, "insert");
	for (int i = 0; i < THREADS; i++) {
		in[i].field = i;
		in[i].fails = 0;
		pthread_create(&in[i].th, NULL, inc_main, &in[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(in[i].th, NULL);
		CHECK(in[i].fails == 0, "thread %d: %d failed", i, in[i].fails);
	}
	r = kvd_reader_new(st);
	key_of(1, 100, key, &kn);
	CHECK(kvdoc_get(r, SHARDS, key, kn, kvd_now_ms(), &d) == KV_OK &&
		  bson_init_static(&b, d.p, d.n),
	      "read");
	for (int i = 0; i < THREADS; i++) {
		char f[8];

		snprintf(f, sizeof(f), "f%d", i);
		CHECK(bson_iter_init_find(&it, &b, f) &&
			  bson_iter_as_int64(&it) == INCS,
		      "%s: %lld", f, (long long)bson_iter_as_int64(&it));
	}
	kvd_reader_free(r);
}

/* A bulk merge (store.h, KVD_W_BULK) of REINDEX with section opnd over
 * collection coll's documents on shard from key from (fn bytes) on, at
 * most max, waited for: its status, *result, and the key to go on from
 * (or a refusal's text) in *next (malloc'd, or NULL). */
static int bulk(unsigned shard, uint32_t coll, const uint8_t *from, size_t fn,
		const struct kv_buf *opnd, int64_t max, int64_t *result,
		struct kv_slice *next)
{
	uint8_t to[4] = {(uint8_t)((coll + 1) >> 24),
			 (uint8_t)((coll + 1) >> 16),
			 (uint8_t)((coll + 1) >> 8), (uint8_t)(coll + 1)};
	size_t vn = 2 + 4 + opnd->len;
	struct kvd_wreq *w = calloc(1, sizeof(*w) + KVD_ITEM_HDR + fn + vn);
	uint16_t kn = (uint16_t)fn, tn = 4;
	uint32_t v32 = (uint32_t)vn;
	uint8_t *p = w->data;
	int rc;

	memcpy(p, &kn, 2);
	memcpy(p + 2, &v32, 4);
	memcpy(p + KVD_ITEM_HDR, from, fn);
	p += KVD_ITEM_HDR + fn;
	memcpy(p, &tn, 2);
	memcpy(p + 2, to, 4);
	memcpy(p + 6, opnd->data, opnd->len);
	w->shard = (uint16_t)shard;
	w->op.kind = KVD_W_BULK;
	w->op.ks = KVD_KS_DOC;
	w->op.flags = (uint8_t)(KVDOC_MERGE_BASE + KVDOC_OP_REINDEX);
	w->op.delta = max;
	w->op.nitems = 1;
	w->op.items = w->data;
	w->op.items_len = KVD_ITEM_HDR + fn + vn;
	run_wait(w);
	rc = w->op.status;
	*result = w->op.result;
	*next = (struct kv_slice){w->op.val, w->op.val ? w->op.vlen : 0};
	free(w);
	return rc;
}

/* Every shard's documents of coll through bulk merges of max at a time:
 * the ranges run, or -1 on a failure. */
static int bulk_all(uint32_t coll, const struct kv_buf *opnd, int64_t max)
{
	int ranges = 0;

	for (unsigned s = 0; s < SHARDS; s++) {
		uint8_t from[KVDOC_KEY_MAX] = {
		    (uint8_t)(coll >> 24), (uint8_t)(coll >> 16),
		    (uint8_t)(coll >> 8), (uint8_t)coll};
		size_t fn = 4;

		for (;;) {
			int64_t res = 0;
			struct kv_slice next;

			if (bulk(s, coll, from, fn, opnd, max, &res, &next) !=
				KV_OK ||
			    res < 0 || next.n > sizeof(from)) {
				free((void *)next.p);
				return -1;
			}
			ranges++;
			if (!next.n)
				break;
			memcpy(from, next.p, next.n);
			fn = next.n;
			free((void *)next.p);
		}
	}
	return ranges;
}

struct bulk_writer {
	pthread_t th;
	_Atomic int stop;
	int writes;
};

/* Writes of collection 9 while its index 60 is built in bulk: updates of
 * a, deletes, inserts, with section tsec (index 60 building). */
static void *bulk_write(void *arg)
{
	struct bulk_writer *bw = arg;
	unsigned seed = 11;

	while (!atomic_load(&bw->stop) || bw->writes < 300) {
		int n = (int)(rand_r(&seed) % 2500), a = rand_r(&seed) % 50;
		char j[96];
		int64_t res;

		if (bw->writes % 7 == 3) {
			uint8_t key[KVDOC_KEY_MAX];
			size_t kn;
			unsigned shard = key_of(9, n, key, &kn);
			struct kv_buf op = {0};

			kvdoc_op_delete(&op, 0, NULL, 0);
			merge(shard, KVD_KS_DOC, KVDOC_OP_DELETE, key, kn,
			      op.data, op.len, &res, NULL);
			kv_buf_free(&op);
		} else {
			snprintf(j, sizeof(j), "{\"$set\": {\"a\": %d}}", a);
			update(9, n, j, NULL, KVDOC_UPSERT, &res, NULL, 0);
		}
		bw->writes++;
	}
	return NULL;
}

struct bulk_check {
	int docs, bad;
};

static int bulk_doc(void *arg, struct kv_slice k, struct kv_slice v,
		    unsigned type, uint64_t exp)
{
	struct bulk_check *c = arg;
	bson_t b;
	bson_iter_t id, a;

	(void)k, (void)type, (void)exp;
	c->docs++;
	if (!bson_init_static(&b, v.p, v.n) ||
	    !bson_iter_init_find(&id, &b, "_id") ||
	    !bson_iter_init_find(&a, &b, "a") ||
	    !ix_has(60, 9, bson_iter_int32(&a), bson_iter_int32(&id)))
		c->bad++;
	return 0;
}

/* Index 60 built by bulk merges in ranges of 37 documents while a writer
 * updates, deletes and upserts: every document has its entry and no
 * other is there (each has one a: entries = documents); a range over a
 * document an index cannot take is refused with the merge's code and
 * writes nothing. */
static void t_bulk(void)
{
	struct bulk_writer bw = {0};
	struct bulk_check c = {0};
	struct kv_buf op = {0};
	uint8_t pre[4] = {0, 0, 0, 9};
	struct kvd_scan sc = {.prefix = {pre, 4},
			      .limit = 100000,
			      .max_bytes = SIZE_MAX,
			      .ks = KVD_KS_DOC};
	struct kvd_reader *r;
	struct kv_slice next;
	int64_t res = 0;
	int ranges;
	char j[64];

	tsec_len = 4;
	memset(tsec, 0, 4);
	for (int i = 0; i < 2000; i++) {
		snprintf(j, sizeof(j), "{\"_id\": %d, \"a\": %d}", i, i % 50);
		CHECK(insert(9, j) == KV_OK, "insert %d", i);
	}
	sec_add(60, "{\"a\": 1}", 0); /* building: the writer keeps it */
	kv_buf_append(&op, tsec, tsec_len);
	kv_buf_append(&op, "\0\0\0\0\0\0\0\0", 8);
	pthread_create(&bw.th, NULL, bulk_write, &bw);
	ranges = bulk_all(9, &op, 37);
	atomic_store(&bw.stop, 1);
	pthread_join(bw.th, NULL);
	CHECK(ranges > 2 * SHARDS, "ranges: %d", ranges);
	r = kvd_reader_new(st);
	CHECK(kvd_reader_scan(r, &sc, kvd_now_ms(), bulk_doc, &c, &next) ==
		  KV_OK,
	      "scan");
	kvd_reader_free(r);
	CHECK(c.docs > 1500 && c.bad == 0 && ix_count(60) == c.docs,
	      "%d documents, %d without their entry, %d entries (%d writes)",
	      c.docs, c.bad, ix_count(60), bw.writes);
	/* parallel arrays under {a: 1, c: 1}: the range is refused */
	CHECK(insert(9, "{\"_id\": 9000, \"a\": [1, 2], \"c\": [3, 4]}") ==
		  KV_OK,
	      "insert");
	tsec_len = 4;
	memset(tsec, 0, 4);
	sec_add(61, "{\"a\": 1, \"c\": 1}", 0);
	op.len = 0;
	kv_buf_append(&op, tsec, tsec_len);
	kv_buf_append(&op, "\0\0\0\0\0\0\0\0", 8);
	{
		uint8_t key[KVDOC_KEY_MAX];
		size_t kn;
		unsigned shard = key_of(9, 9000, key, &kn);

		CHECK(bulk(shard, 9, pre, 4, &op, 0, &res, &next) == KV_OK &&
			  res == -171 && next.n && ix_count(61) == 0,
		      "refused: %lld, %d entries", (long long)res,
		      ix_count(61));
		free((void *)next.p);
	}
	kv_buf_free(&op);
	tsec_len = 4;
	memset(tsec, 0, 4);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The live tokens: every begun and not ended one live, every ended one
 * not, through thousands of each in a random order (the set grows and
 * its deletions shift entries back across its wrap). */
static void t_tokens(void)
{
	enum { N = 5000 };
	static uint64_t live[N];
	size_t n = 0, bad = 0;
	uint64_t gone[64];
	size_t ng = 0;

	srand(7);
	for (int r = 0; r < 40000; r++) {
		if (n < N && (n == 0 || rand() % 3)) {
			live[n] = kvdoc_uq_begin();
			bad += !live[n];
			n++;
		} else {
			size_t i = (size_t)rand() % n;

			kvdoc_uq_end(live[i]);
			gone[ng++ % 64] = live[i];
			live[i] = live[--n];
		}
		if (r % 1000 == 0) {
			for (size_t i = 0; i < n; i++)
				bad += !kvdoc_uq_live(live[i]);
			for (size_t i = 0; i < (ng < 64 ? ng : 64); i++)
				bad += kvdoc_uq_live(gone[i]);
		}
	}
	bad += kvdoc_uq_live(0);
	while (n)
		kvdoc_uq_end(live[--n]);
	for (size_t i = 0; i < (ng < 64 ? ng : 64); i++)
		bad += kvdoc_uq_live(gone[i]);
	CHECK(bad == 0, "live tokens: %zu wrong answers", bad);
}

int main(void)
{
	char dir[300], b[512];

	if (jt_root("kvd-docstore"))
		return 1;
	newdir(dir, sizeof(dir), "data");
	open_all(dir);
	t_catalog();
	t_documents();
	t_delete();
	t_index();
	t_index_fresh();
	t_index_multi();
	t_lost_update();
	t_tokens();
	t_bulk();
	close_all();
	/* everything again after a restart (journal, then LMDB) */
	open_all(dir);
	CHECK(!strcmp(find(1, 30, b, sizeof(b)),
		      "{ \"_id\" : 30, \"k\" : 2, \"a\" : 1 }"),
	      "after restart: %s", b);
	CHECK(
	    !strcmp(scan_ids(1, 100, b),
		    "1,2,3,4,5,6,8,9,10,11,12,13,14,15,16,17,18,19,20,30,100,"),
	    "after restart: %s", b);
	CHECK(catalog(KVDOC_CAT_CREATE, 0, "db", "new", NULL) == KV_OK,
	      "create");
	CHECK(ix_count(50) == 3 && ix_has(50, 7, 6, 1) && !ix_has(50, 7, 5, 1),
	      "index entries after restart: %d", ix_count(50));
	close_all();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return jt_finish();
}
