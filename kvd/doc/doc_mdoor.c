/* doc_mdoor.c - the reads of the MongoDB door's document store (mdoor.h,
 * struct mdoor_store) over kvd's documents (doc.h): the calling thread's
 * catalog, scans of a collection merged across shards in _id order (an
 * _id equality reads its one shard), explain and statistics
 * (doc_mdoor_store.c holds the store's table; the writes are
 * doc_mdoor_write.c's, doc_mdoor_int.h).
 *
 * Threads.  Every call runs on an io thread, which doc_mdoor_enter names
 * first (its reader and its copy of the catalog); a cursor's scan may go
 * on from another io thread (a getMore on another connection), so a scan
 * keeps no reader of its own: each batch reads from the calling thread's.
 */
#include "doc_mdoor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "doc.h"
#include "doc_ix.h"
#include "doc_mdoor_int.h"
#include "doc_plan.h"
#include "index.h"
#include "kv_status.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/router.h"

/* Documents a scan batch examines at most (a read's bound). */
#define SCAN_BATCH 256

static __thread struct kvd_io *tl_io;
static __thread struct kvdoc_catalog tl_cat;

void doc_mdoor_enter(struct kvd_io *io)
{
	tl_io = io;
}

/* The calling thread's catalog, brought up to date. */
static const struct kvdoc_catalog *catalog(void)
{
	if (!tl_cat.img.data)
		(void)kv_buf_free_at_exit(&tl_cat.img);
	if (kvdoc_catalog_refresh(&tl_cat, tl_io->reader, tl_io->now_ms))
		return NULL;
	return &tl_cat;
}

struct kvd_io *doc_mdoor_io(void)
{
	return tl_io;
}

const struct kvdoc_catalog *doc_mdoor_catalog(void)
{
	return catalog();
}

int doc_mdoor_coll_id(const char *db, const char *coll, uint32_t *id)
{
	const struct kvdoc_catalog *c = catalog();

	return c ? kvdoc_catalog_find(c, db, coll, id, NULL) : -1;
}

/* ===================== scans ===================== */

struct dscan {
	struct kvdoc_scan s;
	const struct mql_match *filter;
	int one; /* an _id equality: key[] only */
	uint8_t key[KVDOC_KEY_MAX];
	size_t klen;
	struct kv_buf buf; /* the batch's matching documents */
	size_t pos;
	int empty; /* no collection */
	int64_t examined;
	struct doc_plan *plan; /* an index scan (doc_plan.h), or NULL */
	uint64_t deadline;     /* kvd_coarse_ms past which it reads no more */
	bool timed_out;	       /* a document went unmatched past the deadline */
	uint64_t slice_end;    /* kvd_coarse_ms past which it pauses; 0 */
	bool paused;	       /* the batch stopped at slice_end */
	bool slow;	       /* mql_match_slow: the clock after every match */
	bool moved;	       /* the slice took a document */
	unsigned work;	       /* documents (and 16 KiB) since the clock */
};

/* A refill that read to the scan's deadline, or to its slice's end. */
#define OVER_TIME (-2)
#define PAUSED (-3)

/* Has a refill that found nothing yet read to its deadline? */
static bool past_deadline(const struct dscan *d)
{
	return !d->buf.len && (d->timed_out ||
			       (d->deadline && kvd_coarse_ms() >= d->deadline));
}

/* Is the slice over, before a document of n bytes?  The clock is read
 * before every match of a filter with a regular expression (one match
 * may take 25 to 150 ms), else every 16 documents, 16 KiB of them
 * counting as one more (matching costs in proportion to the bytes): 3.8
 * ns a read next to about 85 ns a document of a scan of small ones. */
static bool slice_over(struct dscan *d, size_t n)
{
	if (!d->slow) {
		d->work += 1 + (unsigned)(n >> 14);
		if (d->work < 16)
			return false;
		d->work = 0;
	}
	return kvd_coarse_ms() >= d->slice_end;
}

/* The clock is read before every document's match once a deadline is
 * set: one match may take long (a regular expression that backtracks runs
 * to PCRE2's match limit, 25 to 150 ms, on every document), so a
 * look between batches let maxTimeMS 500 answer after 45 s.  Past it the
 * batch's other documents are passed over unmatched and the scan ends in
 * 50 MaxTimeMSExpired (what was matched before may go out first), so no
 * document it passed over can be missing from an answer. */
static int keep_match(void *arg, struct kv_slice key, struct kv_slice val,
		      unsigned type, uint64_t exp)
{
	struct dscan *d = arg;

	(void)key;
	(void)exp; /* documents do not expire */
	if (d->timed_out ||
	    (d->deadline && !d->one && kvd_coarse_ms() >= d->deadline)) {
		d->timed_out = true;
		return 0;
	}
	/* a slice ends before a document, never before its first: each
	 * slice moves the scan on */
	if (d->slice_end && d->moved && !d->one && slice_over(d, val.n)) {
		d->paused = true;
		return KVD_SCAN_STOP;
	}
	d->moved = true;
	d->examined++;
	if (type != KVD_VT_DOC ||
	    !mql_match_doc(d->filter, val.p, (uint32_t)val.n, NULL))
		return 0;
	return kv_buf_append(&d->buf, val.p, val.n);
}

/* Fill buf with the next batch's matches; 0, or -1. */
static int refill(struct dscan *d)
{
	d->buf.len = 0;
	d->pos = 0;
	d->paused = false;
	if (d->one) {
		struct kv_slice doc;
		int rc = kvdoc_get(tl_io->reader, tl_io->srv->nshards, d->key,
				   d->klen, tl_io->now_ms, &doc);

		d->empty = 1;
		if (!rc) /* (one read: no deadline, no slice) */
			rc = keep_match(d, (struct kv_slice){0}, doc,
					KVD_VT_DOC, 0);
		d->one = 0;
		return rc && rc != KV_NOT_FOUND ? -1 : 0;
	}
	/* batches until one matches: a filter that matches nothing reads
	 * the whole collection here, so the deadline is looked at between
	 * batches */
	while (d->plan && !doc_plan_done(d->plan) && d->buf.len == 0 &&
	       !d->paused) {
		if (doc_plan_batch(d->plan, tl_io->reader, tl_io->srv->nshards,
				   tl_io->now_ms, SCAN_BATCH, keep_match, d))
			return -1;
		if (past_deadline(d))
			return OVER_TIME;
	}
	while (!d->plan && !d->s.done && d->buf.len == 0 && !d->paused) {
		if (kvdoc_scan_batch(&d->s, tl_io->reader, SCAN_BATCH,
				     tl_io->now_ms, keep_match, d))
			return -1;
		if (past_deadline(d))
			return OVER_TIME;
	}
	return d->paused && !d->buf.len ? PAUSED : 0;
}

/* {_id: 1}: the index a collection's documents are kept in, compiled
 * once for every thread (a compiled index is read only). */
static struct mql_index *id_ix;
static pthread_once_t id_ix_once = PTHREAD_ONCE_INIT;

static void id_index_compile(void)
{
	static const uint8_t spec[] = {14,  0, 0, 0, 0x10, '_', 'i',
				       'd', 0, 1, 0, 0,	   0,	0};
	struct mql_error e;

	if (mql_index_compile(spec, sizeof(spec), 0, &id_ix, &e))
		id_ix = NULL;
}

static const struct mql_index *id_index(void)
{
	(void)pthread_once(&id_ix_once, id_index_compile);
	return id_ix;
}

/* Read only the _id intervals the filter allows ({_id: {$gte: k}}, an
 * $in of _ids, ...), first to last: the filter is still checked on
 * every document read. */
static void id_bounds(struct dscan *d, const struct mql_match *m)
{
	const struct mql_index *ix = id_index();
	struct mql_bounds b;
	struct mql_error e;

	if (!ix || mql_index_bounds(ix, m, false, &b, &e))
		return; /* the whole collection, as without */
	if (b.n == 0)
		d->s.done = d->empty = 1;
	else if (b.nparts)
		(void)kvdoc_scan_range(&d->s, b.iv[0].start, b.iv[0].slen,
				       b.iv[b.n - 1].end, b.iv[b.n - 1].elen);
	mql_bounds_free(&b);
}

/* Whether the door asks for _id order ({_id: 1}), which scans yield:
 * then it need not sort, and stops at its limit. */
static bool id_order(const struct mdoor_query *q)
{
	bson_iter_t it;

	if (!q->sort_bson ||
	    !bson_iter_init_from_data(&it, q->sort_bson, q->sort_len) ||
	    !bson_iter_next(&it) || strcmp(bson_iter_key(&it), "_id") ||
	    !BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) <= 0)
		return false;
	return !bson_iter_next(&it);
}

int doc_mdoor_scan_open(void *ctx, const struct mdoor_query *q, void **out,
			struct mdoor_scan_info *info, struct mql_error *err)
{
	struct dscan *d = calloc(1, sizeof(*d));
	const bson_value_t *id;
	uint32_t cid = 0;
	int found;

	(void)ctx;
	if (!d)
		return mql_error_set(err, MQL_InternalError, "out of memory");
	d->filter = q->filter;
	d->slow = mql_match_slow(q->filter);
	found = doc_mdoor_coll_id(q->db, q->coll, &cid);
	if (found < 0) {
		free(d);
		return mql_error_set(err, MQL_InternalError, "catalog");
	}
	kvdoc_scan_init(&d->s, cid);
	if (!found)
		d->s.done = d->empty = 1;
	else if (!doc_plan_hinted(q) && /* checked by the plan */
		 mql_match_is_id_eq(q->filter, &id)) {
		if (kvdoc_key(cid, id, d->key, &d->klen, err)) {
			free(d);
			return -1;
		}
		d->one = 1;
	} else if (doc_plan_choose(catalog(), cid, q, &d->plan, err) < 0) {
		free(d);
		return -1;
	} else if (!d->plan) {
		id_bounds(d, q->filter); /* no index serves it: the _id's */
	}
	/* the door sorts unless the index, or _id order, gives its order */
	info->sorted = d->plan ? doc_plan_sorted(d->plan) : id_order(q);
	*out = d;
	return 0;
}

int doc_mdoor_scan_next(void *scan, const uint8_t **doc, uint32_t *len,
			struct mql_error *err)
{
	struct dscan *d = scan;
	uint32_t n;
	int rc;

	if (d->pos >= d->buf.len) {
		if (d->timed_out) /* documents were passed over: no end */
			return mql_error_set(err, MQL_MaxTimeMSExpired,
					     "operation exceeded time limit");
		if (d->empty ||
		    (d->plan ? doc_plan_done(d->plan) : d->s.done && !d->one))
			return 0;
		rc = refill(d);
		if (rc == PAUSED)
			return MDOOR_PAUSE;
		if (rc == OVER_TIME)
			return mql_error_set(err, MQL_MaxTimeMSExpired,
					     "operation exceeded time limit");
		if (rc)
			return mql_error_set(err, MQL_InternalError,
					     "reading documents failed");
		if (d->buf.len == 0)
			return 0;
	}
	memcpy(&n, d->buf.data + d->pos, 4);
	n = BSON_UINT32_FROM_LE(n);
	*doc = d->buf.data + d->pos;
	*len = n;
	d->pos += n;
	return 1;
}

void doc_mdoor_scan_deadline(void *scan, uint64_t deadline_ms)
{
	struct dscan *d = scan;
	uint64_t now = kvd_now_ms();

	/* on the clock read before every match */
	d->deadline =
	    kvd_coarse_ms() + (deadline_ms > now ? deadline_ms - now : 0);
}

void doc_mdoor_scan_slice(void *scan, unsigned ms)
{
	struct dscan *d = scan;

	d->slice_end = kvd_coarse_ms() + ms;
	d->moved = false;
}

void doc_mdoor_scan_slice_as(void *scan, void *like)
{
	struct dscan *d = scan;

	d->slice_end = ((struct dscan *)like)->slice_end;
	d->moved = false;
}

bool doc_mdoor_scan_slice_over(void *scan)
{
	const struct dscan *d = scan;

	return d->slice_end && kvd_coarse_ms() >= d->slice_end;
}

void doc_mdoor_scan_close(void *scan)
{
	struct dscan *d = scan;

	doc_plan_free(d->plan);
	kv_buf_free(&d->buf);
	free(d);
}

/* How a scan read (its plan, the keys and documents it examined), once
 * read to its end by explain, or just opened (mdoor_plan_of). */
void doc_mdoor_scan_explain(void *scan, bool count_only, int64_t n, int64_t ms,
			    bson_t *plan, bson_t *stats)
{
	struct dscan *d = scan;
	int64_t keys = 0, docs = d->examined;
	bson_t in;

	if (d->plan) {
		/* covered: MongoDB's stage above an index scan that reads no
		 * document */
		const char *top = !doc_plan_covered(d->plan) ? "FETCH"
				  : count_only		     ? "COUNT"
					       : "PROJECTION_COVERED";

		doc_plan_counts(d->plan, &keys, &docs);
		BSON_APPEND_UTF8(plan, "stage", top);
		BSON_APPEND_DOCUMENT_BEGIN(plan, "inputStage", &in);
		BSON_APPEND_UTF8(&in, "stage", "IXSCAN");
		BSON_APPEND_UTF8(&in, "indexName", doc_plan_name(d->plan));
		bson_append_document_end(plan, &in);
	} else {
		BSON_APPEND_UTF8(plan, "stage",
				 d->klen ? "IDHACK" : "COLLSCAN");
		keys = d->klen ? 1 : 0;
	}
	BSON_APPEND_BOOL(stats, "executionSuccess", true);
	BSON_APPEND_INT64(stats, "nReturned", n);
	BSON_APPEND_INT64(stats, "executionTimeMillis", ms);
	BSON_APPEND_INT64(stats, "totalKeysExamined", keys);
	BSON_APPEND_INT64(stats, "totalDocsExamined", docs);
}

/* explain: run q's scan to its end (the door's sort and limit aside),
 * and say how it read. */
int doc_mdoor_explain(void *ctx, const struct mdoor_query *q, bson_t *plan,
		      bson_t *stats, struct mql_error *err)
{
	struct mdoor_scan_info info = {0};
	int64_t t0 = (int64_t)kvd_now_ms(), n = 0;
	const uint8_t *doc;
	uint32_t len;
	void *s;
	int rc;

	if (doc_mdoor_scan_open(ctx, q, &s, &info, err))
		return -1;
	while ((rc = doc_mdoor_scan_next(s, &doc, &len, err)) == 1)
		n++;
	if (rc == 0)
		doc_mdoor_scan_explain(s, q->count_only, n,
				       (int64_t)kvd_now_ms() - t0, plan, stats);
	doc_mdoor_scan_close(s);
	return rc < 0 ? -1 : 0;
}

static int count_ix(void *arg, const struct kvdoc_ix *ix)
{
	(void)ix;
	++*(uint64_t *)arg;
	return 0;
}

static int db_stats(void *ctx, const char *db, struct mdoor_coll_stats *out,
		    struct mql_error *err);

int doc_mdoor_coll_stats(void *ctx, const char *db, const char *coll,
			 struct mdoor_coll_stats *out, struct mql_error *err)
{
	struct mdoor_query q = {.db = db, .coll = coll};
	struct mql_match *all = NULL;
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	const uint8_t *doc;
	uint32_t len, id;
	void *s;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!coll)
		return db_stats(ctx, db, out, err);
	if ((rc = doc_mdoor_coll_id(db, coll, &id)) <= 0)
		return rc < 0 ? mql_error_set(err, MQL_InternalError, "catalog")
			      : 0;
	if (mql_match_compile(empty, 5, &all, err))
		return -1;
	q.filter = all;
	if (doc_mdoor_scan_open(ctx, &q, &s, &(struct mdoor_scan_info){0},
				err)) {
		mql_match_free(all);
		return -1;
	}
	while ((rc = doc_mdoor_scan_next(s, &doc, &len, err)) == 1) {
		out->count++;
		out->size += len;
	}
	doc_mdoor_scan_close(s);
	mql_match_free(all);
	out->storage_size = out->size;
	out->nindexes = 1; /* _id's */
	if (catalog())
		kvdoc_catalog_indexes(catalog(), id, count_ix, &out->nindexes);
	return rc < 0 ? -1 : 1;
}

/* The names of a database's collections, NUL-terminated one after
 * another: taken from the catalog before any is read, since a read may
 * refresh the thread's copy of the catalog under the walk. */
struct names {
	char *p;
	size_t n, cap;
	bool oom;
};

static int add_name(void *arg, uint32_t id, struct kv_slice db,
		    struct kv_slice coll, struct kv_slice opts)
{
	struct names *nm = arg;
	char *p;

	(void)id, (void)db, (void)opts;
	if (nm->n + coll.n + 1 > nm->cap) {
		size_t cap = (nm->cap ? nm->cap * 2 : 256) + coll.n + 1;

		if (!(p = realloc(nm->p, cap))) {
			nm->oom = true;
			return 1;
		}
		nm->p = p;
		nm->cap = cap;
	}
	memcpy(nm->p + nm->n, coll.p, coll.n);
	nm->p[nm->n + coll.n] = '\0';
	nm->n += coll.n + 1;
	return 0;
}

/* dbStats: the sums of the database's collections' figures (each read as
 * collStats reads it). */
static int db_stats(void *ctx, const char *db, struct mdoor_coll_stats *out,
		    struct mql_error *err)
{
	const struct kvdoc_catalog *c = catalog();
	struct names nm = {0};
	struct mdoor_coll_stats one;
	int rc = 1;

	if (!c)
		return mql_error_set(err, MQL_InternalError, "catalog");
	kvdoc_catalog_each(c, db, add_name, &nm);
	if (nm.oom)
		rc = mql_error_set(err, MQL_InternalError, "out of memory");
	for (size_t at = 0; rc >= 0 && at < nm.n; at += strlen(nm.p + at) + 1) {
		if ((rc = doc_mdoor_coll_stats(ctx, db, nm.p + at, &one, err)) <
		    0)
			break;
		out->count += one.count;
		out->size += one.size;
		out->storage_size += one.storage_size;
		out->nindexes += one.nindexes;
		out->index_size += one.index_size;
		rc = 1; /* a collection dropped meanwhile counts nothing */
	}
	free(nm.p);
	return rc < 0 ? -1 : 1;
}
