/* doc_mdoor.c - the MongoDB door's document store (mdoor.h, struct
 * mdoor_store) over kvd's documents (doc.h): listings from the catalog,
 * scans of a collection merged across shards in _id order (an _id
 * equality reads its one shard), and writes as merge operations on the
 * documents' committers, completed on the connection's io thread.
 *
 * Threads.  Every call runs on an io thread, which doc_mdoor_enter names
 * first (its reader and its copy of the catalog); a cursor's scan may go
 * on from another io thread (a getMore on another connection), so a scan
 * keeps no reader of its own: each batch reads from the calling thread's.
 *
 * Writes.  A batch runs its statements one after another (an ordered
 * batch stops at the first that fails), except a batch of inserts, whose
 * documents go out ahead of their results (below, "insert batches sent
 * ahead"); a statement's merges go out
 * together and come back through the connection's pends (proto wreply ->
 * doc_mdoor_result), in order.  An insert or upsert into a collection the
 * catalog lacks first creates it through shard 0's committer (concurrent
 * creations get one id).  A statement whose filter is not an _id equality
 * scans for the matching _ids and sends one merge per document carrying
 * the filter, which the committer checks again on the current image; a
 * multi-document one does it in batches of BATCH keys, the scan going on
 * after the last document it read once a batch's merges came back, so an
 * updateMany over any number of documents holds one batch.
 */
#include "doc_mdoor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "doc.h"
#include "doc_ix.h"
#include "doc_plan.h"
#include "doc_uq.h"
#include "index.h"
#include "kv_status.h"
#include "mongo/mql_value.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/router.h"
#include "net/write.h"
#include "repl/repl.h"
#include "unique.h"

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

static int coll_id(const char *db, const char *coll, uint32_t *id)
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
	uint64_t deadline;     /* kvd_now_ms past which it reads no more; 0 */
};

/* A refill that read to the scan's deadline. */
#define OVER_TIME (-2)

/* Has a refill that found nothing yet read to its deadline? */
static bool past_deadline(const struct dscan *d)
{
	return !d->buf.len && d->deadline && kvd_now_ms() >= d->deadline;
}

static int keep_match(void *arg, struct kv_slice key, struct kv_slice val,
		      unsigned type, uint64_t exp)
{
	struct dscan *d = arg;

	(void)key;
	(void)exp; /* documents do not expire */
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
	if (d->one) {
		struct kv_slice doc;
		int rc = kvdoc_get(tl_io->reader, tl_io->srv->nshards, d->key,
				   d->klen, tl_io->now_ms, &doc);

		d->one = 0;
		d->empty = 1;
		if (rc == KV_NOT_FOUND)
			return 0;
		return rc ? -1
			  : keep_match(d, (struct kv_slice){0}, doc, KVD_VT_DOC,
				       0);
	}
	/* batches until one matches: a filter that matches nothing reads
	 * the whole collection here, so the deadline is looked at between
	 * batches */
	while (d->plan && !doc_plan_done(d->plan) && d->buf.len == 0) {
		if (doc_plan_batch(d->plan, tl_io->reader, tl_io->srv->nshards,
				   tl_io->now_ms, SCAN_BATCH, keep_match, d))
			return -1;
		if (past_deadline(d))
			return OVER_TIME;
	}
	while (!d->plan && !d->s.done && d->buf.len == 0) {
		if (kvdoc_scan_batch(&d->s, tl_io->reader, SCAN_BATCH,
				     tl_io->now_ms, keep_match, d))
			return -1;
		if (past_deadline(d))
			return OVER_TIME;
	}
	return 0;
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

static int scan_open(void *ctx, const struct mdoor_query *q, void **out,
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
	found = coll_id(q->db, q->coll, &cid);
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

static int scan_next(void *scan, const uint8_t **doc, uint32_t *len,
		     struct mql_error *err)
{
	struct dscan *d = scan;
	uint32_t n;
	int rc;

	if (d->pos >= d->buf.len) {
		if (d->empty ||
		    (d->plan ? doc_plan_done(d->plan) : d->s.done && !d->one))
			return 0;
		rc = refill(d);
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

static void scan_deadline(void *scan, uint64_t deadline_ms)
{
	((struct dscan *)scan)->deadline = deadline_ms;
}

static void scan_close(void *scan)
{
	struct dscan *d = scan;

	doc_plan_free(d->plan);
	kv_buf_free(&d->buf);
	free(d);
}

/* explain: run q's scan to its end (the door's sort and limit aside),
 * and say how it read. */
static int explain(void *ctx, const struct mdoor_query *q, bson_t *plan,
		   bson_t *stats, struct mql_error *err)
{
	struct mdoor_scan_info info = {0};
	int64_t t0 = (int64_t)kvd_now_ms(), n = 0, keys = 0, docs;
	const uint8_t *doc;
	uint32_t len;
	bson_t in;
	void *s;
	int rc;

	if (scan_open(ctx, q, &s, &info, err))
		return -1;
	while ((rc = scan_next(s, &doc, &len, err)) == 1)
		n++;
	if (rc == 0) {
		struct dscan *d = s;

		docs = d->examined;
		if (d->plan) {
			doc_plan_counts(d->plan, &keys, &docs);
			BSON_APPEND_UTF8(plan, "stage", "FETCH");
			BSON_APPEND_DOCUMENT_BEGIN(plan, "inputStage", &in);
			BSON_APPEND_UTF8(&in, "stage", "IXSCAN");
			BSON_APPEND_UTF8(&in, "indexName",
					 doc_plan_name(d->plan));
			bson_append_document_end(plan, &in);
		} else {
			BSON_APPEND_UTF8(plan, "stage",
					 d->klen ? "IDHACK" : "COLLSCAN");
			keys = d->klen ? 1 : 0;
		}
		BSON_APPEND_BOOL(stats, "executionSuccess", true);
		BSON_APPEND_INT64(stats, "nReturned", n);
		BSON_APPEND_INT64(stats, "executionTimeMillis",
				  (int64_t)kvd_now_ms() - t0);
		BSON_APPEND_INT64(stats, "totalKeysExamined", keys);
		BSON_APPEND_INT64(stats, "totalDocsExamined", docs);
	}
	scan_close(s);
	return rc < 0 ? -1 : 0;
}

static int count_ix(void *arg, const uint8_t *spec, uint32_t len)
{
	(void)spec, (void)len;
	++*(uint64_t *)arg;
	return 0;
}

static int db_stats(void *ctx, const char *db, struct mdoor_coll_stats *out,
		    struct mql_error *err);

static int coll_stats(void *ctx, const char *db, const char *coll,
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
	if ((rc = coll_id(db, coll, &id)) <= 0)
		return rc < 0 ? mql_error_set(err, MQL_InternalError, "catalog")
			      : 0;
	if (mql_match_compile(empty, 5, &all, err))
		return -1;
	q.filter = all;
	if (scan_open(ctx, &q, &s, &(struct mdoor_scan_info){0}, err)) {
		mql_match_free(all);
		return -1;
	}
	while ((rc = scan_next(s, &doc, &len, err)) == 1) {
		out->count++;
		out->size += len;
	}
	scan_close(s);
	mql_match_free(all);
	out->storage_size = out->size;
	out->nindexes = 1;
	doc_ix_list(NULL, db, coll, count_ix, &out->nindexes, err);
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
		if ((rc = coll_stats(ctx, db, nm.p + at, &one, err)) < 0)
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

/* ===================== writes ===================== */

/* At most this many merges of one statement in flight at once, and the
 * keys a multi-document statement holds at once (read ahead of them). */
#define WINDOW 256
#define BATCH 1024

struct dmw {
	struct mdoor_wbatch *b;
	struct kvd_conn *c;
	size_t i;	    /* the statement running */
	unsigned out;	    /* its merges in flight */
	int creating, sent; /* the catalog's CREATE / change is out */
	int have;	    /* cid is known */
	uint32_t cid;
	struct kv_buf keys;	  /* its documents' keys: [u8 len][key] ... */
	size_t kpos;		  /* the next key to send */
	struct dscan *scan;	  /* a multi-document statement's, open */
	struct kv_buf opnd;	  /* the operand every key of it gets */
	unsigned mid;		  /* and its merge id */
	const bson_value_t *upid; /* an upsert's _id */
	bool unique;	  /* an insert under a unique index (send_unique) */
	struct doc_uq uq; /* doc_uq.h: their reservations */
	/* an insert batch sent ahead of its results (pipe_fill) */
	bool pipe;
	size_t next;	    /* the next statement to send */
	size_t stop;	    /* ordered: the first that failed (nops: none) */
	size_t bytes;	    /* documents' bytes in flight */
	unsigned undo;	    /* deletes in flight undoing inserts past stop */
	size_t kfront;	    /* keys: the first of those in flight */
	struct kv_buf sect; /* the collection's index section */
};

static void step(struct dmw *w);

static bool b_is_catalog(enum mdoor_wkind k)
{
	return k == MDOOR_W_CREATE || k == MDOOR_W_DROP || k == MDOOR_W_DROPDB;
}

static int oom(struct mql_error *e)
{
	return mql_error_set(e, MQL_InternalError, "out of memory");
}

static void finish(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	w->c->mwrite = NULL;
	if (w->scan)
		scan_close(w->scan);
	doc_uq_free(&w->uq);
	kv_buf_free(&w->keys);
	kv_buf_free(&w->opnd);
	kv_buf_free(&w->sect);
	free(w);
	b->done(b);
}

static int send_merge(struct dmw *w, unsigned ks, unsigned id, const uint8_t *k,
		      size_t kn, const uint8_t *v, size_t vn)
{
	int shard = ks == KVD_KS_CATALOG ? 0 : -1;

	if (kvd_write_merge(w->c, 0, ks, id, shard, (struct kv_slice){k, kn},
			    (struct kv_slice){v, vn}, 0))
		return -1;
	w->out++;
	return 0;
}

/* An insert into a collection with a unique index: through the
 * reservations' driver (doc_uq.h), its keys reserved before its merge. */
static int send_unique(struct dmw *w, struct mql_error *e)
{
	struct kv_buf want = {0};
	const struct mdoor_wop *op = &w->b->ops[w->i];
	int rc = 0;

	doc_uq_stmt(&w->uq, w->cid, w->mid, &w->opnd);
	while (!rc && w->kpos < w->keys.len) {
		const uint8_t *p = w->keys.data + w->kpos;

		want.len = 0;
		if (w->mid == KVDOC_OP_INSERT &&
		    doc_uq_keys((struct kv_slice){w->opnd.data, w->opnd.len},
				op->doc, op->len, &want, e)) {
			rc = -1;
			break;
		}
		rc = doc_uq_push(&w->uq, p + 1, p[0],
				 (struct kv_slice){want.data, want.len}, w->i,
				 (struct kv_slice){0});
		w->kpos += 1u + p[0];
	}
	kv_buf_free(&want);
	if (!rc && !w->out && doc_uq_step(&w->uq) < 0)
		rc = -1;
	return rc && !e->code ? oom(e) : rc;
}

/* Send the statement's next keys, up to the window. */
static int send_keys(struct dmw *w, struct mql_error *e)
{
	if (w->unique)
		return send_unique(w, e);
	while (w->kpos < w->keys.len && w->out < WINDOW) {
		const uint8_t *p = w->keys.data + w->kpos;

		if (send_merge(w, KVD_KS_DOC, KVDOC_MERGE_BASE + w->mid, p + 1,
			       p[0], w->opnd.data, w->opnd.len))
			return oom(e);
		w->kpos += 1u + p[0];
	}
	return 0;
}

static int add_key(struct dmw *w, const bson_value_t *id, struct mql_error *e)
{
	uint8_t k[KVDOC_KEY_MAX];
	size_t kn;
	uint8_t n;

	if (kvdoc_key(w->cid, id, k, &kn, e))
		return -1;
	n = (uint8_t)kn;
	if (kv_buf_append(&w->keys, &n, 1) || kv_buf_append(&w->keys, k, kn))
		return oom(e);
	return 0;
}

/* The _id equality among q's top-level predicates, or NULL. */
struct ideq {
	const bson_value_t *v;
};

static void find_ideq(void *ctx, const struct mql_pred *p)
{
	struct ideq *x = ctx;

	if (!x->v && p->op == MQL_PRED_EQ && !strcmp(p->path, "_id") &&
	    p->value->value_type != BSON_TYPE_DOCUMENT &&
	    p->value->value_type != BSON_TYPE_ARRAY &&
	    p->value->value_type != BSON_TYPE_REGEX)
		x->v = p->value;
}

static const bson_value_t *id_eq(const struct mql_match *q)
{
	struct ideq x = {NULL};

	mql_match_preds(q, find_ideq, &x);
	return x.v;
}

static int doc_id(const uint8_t *p, uint32_t n, bson_iter_t *it)
{
	return bson_iter_init_from_data(it, p, n) && bson_iter_find(it, "_id")
		   ? 0
		   : -1;
}

/* The next keys of a multi-document statement's matches, at most BATCH,
 * from its open scan (closed once it ends): 0, or -1 with e.  The scan
 * goes on after the last document it read, so a statement over any
 * number of documents holds one batch of keys and one scan batch. */
static int more_keys(struct dmw *w, struct mql_error *e)
{
	const uint8_t *doc;
	uint32_t len;
	size_t nk = 0;
	bson_iter_t it;
	int rc = 0;

	w->keys.len = w->kpos = 0;
	while (nk < BATCH && (rc = scan_next(w->scan, &doc, &len, e)) == 1) {
		if (doc_id(doc, len, &it) ||
		    add_key(w, bson_iter_value(&it), e))
			return -1;
		nk++;
	}
	if (rc < 0)
		return -1;
	if (rc == 0) {
		scan_close(w->scan);
		w->scan = NULL;
	}
	return 0;
}

/* Collect the keys of q's matches (all, or the first; for findAndModify
 * the first in op->sort's order): 0, or -1 with e.  All: the first batch
 * (more_keys), the scan left open for the next. */
static int collect(struct dmw *w, const struct mdoor_wop *op, bool all,
		   struct mql_error *e)
{
	struct mdoor_query q = {.db = w->b->db,
				.coll = w->b->coll,
				.filter = op->q,
				.hint = op->hint,
				.hint_len = op->hint_len,
				.hint_name = op->hint_name};
	size_t nk = op->sort ? mql_sort_nkeys(op->sort) : 0;
	bson_value_t *ka = calloc(nk + 1, sizeof(*ka)),
		     *kb = calloc(nk + 1, sizeof(*kb));
	struct kv_buf best = {0};
	const uint8_t *doc;
	uint32_t len;
	void *s = NULL;
	bson_iter_t it;
	int rc = -1;

	if (!ka || !kb) {
		oom(e);
		goto out;
	}
	if (scan_open(NULL, &q, &s, &(struct mdoor_scan_info){0}, e))
		goto out;
	if (all && !op->sort) {
		w->scan = s;
		s = NULL;
		rc = more_keys(w, e);
		goto out;
	}
	while ((rc = scan_next(s, &doc, &len, e)) == 1) {
		if (op->sort) {
			if (best.len) {
				mql_sort_key(op->sort, doc, len, ka);
				mql_sort_key(op->sort, best.data,
					     (uint32_t)best.len, kb);
				if (mql_sort_cmp_keys(op->sort, ka, kb) >= 0)
					continue;
			}
			best.len = 0;
			if (kv_buf_append(&best, doc, len)) {
				rc = oom(e);
				break;
			}
			continue;
		}
		if (doc_id(doc, len, &it) ||
		    add_key(w, bson_iter_value(&it), e)) {
			rc = -1;
			break;
		}
		break; /* the first match */
	}
	if (rc >= 0 && best.len) {
		rc = doc_id(best.data, (uint32_t)best.len, &it) ||
			     add_key(w, bson_iter_value(&it), e)
			 ? -1
			 : 0;
	}
	rc = rc < 0 ? -1 : 0;
out:
	if (s)
		scan_close(s);
	kv_buf_free(&best);
	free(ka);
	free(kb);
	return rc;
}

/* Start statement i: the number of merges it sent (0: done at once, its
 * results set), or -1 with op->err. */
static int start_stmt(struct dmw *w, struct mdoor_wop *op)
{
	enum mdoor_wkind k = w->b->kind;
	const bson_value_t *id = NULL;
	const uint8_t *qb;
	uint32_t ql;
	unsigned fl = 0;
	bson_iter_t it;

	w->keys.len = w->opnd.len = w->kpos = 0;
	w->upid = NULL;
	if (w->scan) { /* the statement before failed mid-way */
		scan_close(w->scan);
		w->scan = NULL;
	}
	/* the collection's indexes, which the merge keeps (index.h) */
	if (kvdoc_ix_section(catalog(), w->have ? w->cid : 0, 0, &w->opnd))
		return oom(&op->err);
	/* an insert's unique keys are known: reserved before its merge;
	 * other writes go out at once, and a merge that finds its document
	 * gaining a unique key asks for reservations (doc_uq_back) */
	w->unique =
	    k == MDOOR_W_INSERT &&
	    kvdoc_ix_has_unique((struct kv_slice){w->opnd.data, w->opnd.len});
	if (k == MDOOR_W_INSERT) {
		if (doc_id(op->doc, op->len, &it) ||
		    add_key(w, bson_iter_value(&it), &op->err))
			return op->err.code
				   ? -1
				   : mql_error_set(&op->err, MQL_BadValue,
						   "no _id");
		w->mid = KVDOC_OP_INSERT;
		if (kv_buf_append(&w->opnd, op->doc, op->len))
			return oom(&op->err);
		return send_keys(w, &op->err) ? -1 : (int)w->out;
	}
	if (w->have) {
		/* a hint is checked (and used) by the scan, as a find's */
		if (!op->hint && mql_match_is_id_eq(op->q, &id)) {
			if (add_key(w, id, &op->err))
				return -1;
		} else if (collect(w, op, k != MDOOR_W_FAM && op->multi,
				   &op->err)) {
			return -1;
		}
	}
	if (op->upsert && !op->remove) {
		fl |= KVDOC_UPSERT;
		w->upid = id ? id : id_eq(op->q) ? id_eq(op->q) : op->new_id;
		if (!w->keys.len && add_key(w, w->upid, &op->err))
			return -1;
	}
	if (!w->keys.len)
		return 0;
	if (k == MDOOR_W_FAM)
		fl |= op->return_new ? KVDOC_RET_NEW : KVDOC_RET_OLD;
	/* A filter that is only {_id: v} holds for the document under v's
	 * key whatever it is (the key is _id's, compared as MongoDB
	 * compares _ids): the committer would compile and check it for
	 * nothing.  An upsert's filter stays, as its document's seed. */
	qb = id && !(fl & KVDOC_UPSERT) ? NULL : op->q_bson;
	ql = qb ? op->q_len : 0;
	if (k == MDOOR_W_DELETE || (k == MDOOR_W_FAM && op->remove)) {
		w->mid = KVDOC_OP_DELETE;
		if (kvdoc_op_delete(&w->opnd, fl & KVDOC_RET_OLD, qb, ql))
			return oom(&op->err);
	} else {
		w->mid = KVDOC_OP_UPDATE;
		if (kvdoc_op_update(&w->opnd, fl, op->u_bson, op->u_len, qb, ql,
				    (fl & KVDOC_UPSERT) ? w->upid : NULL))
			return oom(&op->err);
	}
	return send_keys(w, &op->err) ? -1 : (int)w->out;
}

static void dup_error(struct dmw *w, struct mdoor_wop *op)
{
	bson_iter_t it;
	char v[128] = "?";

	if (!doc_id(op->doc, op->len, &it))
		mql_value_str(bson_iter_value(&it), v, sizeof(v));
	mql_error_set(&op->err, 11000,
		      "E11000 duplicate key error collection: %s.%s index: "
		      "_id_ dup key: { _id: %s }",
		      w->b->db, w->b->coll, v);
}

/* One merge of statement op came back. */
static void stmt_result(struct dmw *w, struct mdoor_wop *op,
			const struct kvd_pend *pd)
{
	if (pd->status == KV_EXISTS && w->mid == KVDOC_OP_INSERT) {
		dup_error(w, op);
		return;
	}
	if (pd->status != KV_OK && pd->status != KV_NOT_FOUND) {
		mql_error_set(&op->err, MQL_InternalError, "write failed (%d)",
			      pd->status);
		return;
	}
	if (pd->result < 0) {
		mql_error_set(&op->err, (int)-pd->result, "%.*s",
			      (int)(pd->vlen < 400 ? pd->vlen : 400),
			      pd->val ? (const char *)pd->val : "");
		return;
	}
	if (pd->result == KVDOC_R_UPSERTED && w->mid == KVDOC_OP_UPDATE) {
		if (w->upid)
			bson_append_value(&op->upserted, "_id", 3, w->upid);
	} else if (w->mid != KVDOC_OP_UPDATE) {
		op->n += pd->result > 0;
	} else if (pd->result >= KVDOC_R_MATCHED) {
		op->n++;
		op->nmodified += pd->result == KVDOC_R_MODIFIED;
	}
	if (w->b->kind == MDOOR_W_FAM && pd->val && doc_uq_len(pd) >= 5) {
		bson_t v;

		if (bson_init_static(&v, pd->val, doc_uq_len(pd))) {
			bson_reinit(&op->value);
			bson_concat(&op->value, &v);
		}
	}
}

/* ---- insert batches sent ahead ----
 *
 * A batch of inserts does not wait for each document's merge (and, in
 * sync mode, its flush) before sending the next: up to WINDOW documents
 * (PIPE_BYTES of them) are in flight at once, so the shards' committers
 * take them in a few batches and flushes rather than one each; their
 * results come back in the order sent.  Unordered, that is all.  Ordered,
 * MongoDB runs nothing after the first failure, so a document is sent
 * ahead only if no earlier one can fail on its _id: its key is not in the
 * store and not among those in flight (otherwise it waits until those
 * came back, and goes alone).  A failure that the check could not foresee
 * (a concurrent insert of the same _id, an index key refused, a write
 * error) can still find later documents inserted: they are deleted again
 * (a delete merge of that _id, after the insert on the same committer)
 * and reported as not run, as MongoDB would.  A collection with a unique
 * index sends its documents through the reservations' driver (below,
 * "under a unique index"). */
#define PIPE_BYTES (16u << 20)

static bool pipe_ok(struct dmw *w)
{
	const struct mdoor_wbatch *b = w->b;

	if (b->kind != MDOOR_W_INSERT || b->nops - w->i < 2 || !w->have)
		return false;
	w->sect.len = 0;
	if (kvdoc_ix_section(catalog(), w->cid, 0, &w->sect))
		return false; /* out of memory: the plain path reports it */
	w->unique =
	    kvdoc_ix_has_unique((struct kv_slice){w->sect.data, w->sect.len});
	return true;
}

/* May ordered statement op go before those in flight came back? */
static bool pipe_safe(struct dmw *w, const uint8_t *k, size_t kn)
{
	struct kv_slice doc;
	size_t p;

	if (!w->out)
		return true;
	p = w->kfront;
	while (p < w->keys.len) { /* the keys in flight */
		const uint8_t *q = w->keys.data + p;

		if (q[0] == kn && !memcmp(q + 1, k, kn))
			return false;
		p += 1u + q[0];
	}
	return kvdoc_get(tl_io->reader, tl_io->srv->nshards, k, kn,
			 tl_io->now_ms, &doc) == KV_NOT_FOUND;
}

static int upipe_fill(struct dmw *w);

/* Send the batch's next documents, up to the window: 0, or -1 (out of
 * memory, in b->err). */
static int pipe_fill(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	if (w->unique)
		return upipe_fill(w);
	if (!w->out) {
		w->keys.len = w->kfront = 0;
	} else if (w->kfront > w->keys.len / 2) {
		/* those back are dropped from the front now and then, so that
		 * the keys kept are about those in flight */
		memmove(w->keys.data, w->keys.data + w->kfront,
			w->keys.len - w->kfront);
		w->keys.len -= w->kfront;
		w->kfront = 0;
	}
	while (w->next < w->stop && w->next < b->nops && w->out < WINDOW &&
	       (!w->out || w->bytes < PIPE_BYTES)) {
		struct mdoor_wop *op = &b->ops[w->next];
		uint8_t k[KVDOC_KEY_MAX], n;
		size_t kn;
		bson_iter_t it;

		if (doc_id(op->doc, op->len, &it) ||
		    kvdoc_key(w->cid, bson_iter_value(&it), k, &kn, &op->err)) {
			if (!op->err.code)
				mql_error_set(&op->err, MQL_BadValue, "no _id");
			op->ran = true; /* pipe_result steps over it */
			if (b->ordered)
				w->stop = w->next;
			w->next++;
			continue;
		}
		if (b->ordered && !pipe_safe(w, k, kn))
			break;
		n = (uint8_t)kn;
		w->opnd.len = 0;
		if (kv_buf_append(&w->opnd, w->sect.data, w->sect.len) ||
		    kv_buf_append(&w->opnd, op->doc, op->len) ||
		    kv_buf_append(&w->keys, &n, 1) ||
		    kv_buf_append(&w->keys, k, kn) ||
		    send_merge(w, KVD_KS_DOC,
			       KVDOC_MERGE_BASE + KVDOC_OP_INSERT, k, kn,
			       w->opnd.data, w->opnd.len))
			return oom(&b->err);
		w->bytes += op->len;
		w->next++;
	}
	return 0;
}

/* Delete again the document an ordered batch inserted past its failure. */
static int pipe_undo(struct dmw *w, const struct mdoor_wop *op)
{
	uint8_t k[KVDOC_KEY_MAX];
	size_t kn;
	bson_iter_t it;
	bson_t f;
	struct mql_error e;
	int rc = -1;

	mql_error_clear(&e);
	if (doc_id(op->doc, op->len, &it) ||
	    kvdoc_key(w->cid, bson_iter_value(&it), k, &kn, &e))
		return -1;
	bson_init(&f);
	w->opnd.len = 0;
	if (bson_append_value(&f, "_id", 3, bson_iter_value(&it)) &&
	    !kv_buf_append(&w->opnd, w->sect.data, w->sect.len) &&
	    !kvdoc_op_delete(&w->opnd, 0, bson_get_data(&f), f.len) &&
	    !send_merge(w, KVD_KS_DOC, KVDOC_MERGE_BASE + KVDOC_OP_DELETE, k,
			kn, w->opnd.data, w->opnd.len)) {
		w->undo++;
		rc = 0;
	}
	bson_destroy(&f);
	return rc;
}

/* Every merge came back: past an ordered batch's failure nothing ran. */
static void pipe_end(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	for (size_t i = w->stop + 1; b->ordered && i < b->nops; i++) {
		b->ops[i].ran = false; /* never sent, or undone */
		b->ops[i].n = 0;
		mql_error_clear(&b->ops[i].err);
	}
	finish(w);
}

/* One merge of a pipelined batch came back (in the order sent). */
static void pipe_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;
	struct mdoor_wop *op;

	/* once one is undone no insert is sent, and results come back in
	 * the order sent: with only undos in flight, this is one */
	if (w->out-- == w->undo) {
		w->undo--;
		goto next;
	}
	while (b->ops[w->i].ran) /* failed before it was sent */
		w->i++;
	op = &b->ops[w->i++];
	w->bytes -= op->len;
	w->kfront += 1u + w->keys.data[w->kfront]; /* its key, sent first */
	w->mid = KVDOC_OP_INSERT;
	stmt_result(w, op, pd);
	op->ran = true;
	if (b->ordered && w->i - 1 < w->stop && op->err.code)
		w->stop = w->i - 1;
	else if (b->ordered && w->i - 1 > w->stop) {
		bool inserted = !op->err.code;

		op->ran = false; /* past the failure: not run, as MongoDB's */
		op->n = 0;
		mql_error_clear(&op->err);
		if (inserted && pipe_undo(w, op) && !b->err.code)
			oom(&b->err);
	}
next:
	if (!b->err.code && pipe_fill(w) == 0 && w->out)
		return;
	if (!w->out)
		pipe_end(w);
}

/* ---- insert batches under a unique index ----
 *
 * The same window, each document through the reservations' driver
 * (doc_uq.h), which takes its keys and then sends its merge, up to
 * DOC_UQ_SLOTS documents at once and each on its own, so their results
 * come back in any order (the driver gives back each one's statement
 * index).  The window is the statements from the first not done (w->i)
 * to the next to send (w->next); w->keys holds a record of each,
 * [u8 len][_id key][u32 n][unique key list] (len 0: it failed before it
 * was sent).  A document whose _id or unique key is one of the window's
 * waits until the window drained, so that the first in the batch gets
 * it, as in mongod.  Ordered, so does one whose _id or reservation is in
 * the store already (it may fail); a failure the check could not
 * foresee undoes the documents after it that were inserted, as above. */

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The record at w->keys + at: its _id key, its key list; its size. */
static size_t up_rec(const struct dmw *w, size_t at, struct kv_slice *k,
		     struct kv_slice *l)
{
	const uint8_t *q = w->keys.data + at;

	*k = (struct kv_slice){q + 1, q[0]};
	*l = (struct kv_slice){q + 5 + q[0], le32(q + 1 + q[0])};
	return 5u + q[0] + l->n;
}

static int up_add(struct dmw *w, struct kv_slice k, struct kv_slice l)
{
	uint8_t n = (uint8_t)k.n,
		h[4] = {(uint8_t)l.n, (uint8_t)(l.n >> 8), (uint8_t)(l.n >> 16),
			(uint8_t)(l.n >> 24)};

	return kv_buf_append(&w->keys, &n, 1) ||
		       kv_buf_append(&w->keys, k.p, k.n) ||
		       kv_buf_append(&w->keys, h, 4) ||
		       kv_buf_append(&w->keys, l.p, l.n)
		   ? -1
		   : 0;
}

/* Has a document of the window the _id k or a key of want? */
static bool up_clash(const struct dmw *w, struct kv_slice k,
		     struct kv_slice want)
{
	struct kv_slice rk, rl, x, wk;
	uint32_t id;

	for (size_t p = w->kfront; p < w->keys.len;
	     p += up_rec(w, p, &rk, &rl)) {
		up_rec(w, p, &rk, &rl);
		if (rk.n == k.n && !memcmp(rk.p, k.p, k.n))
			return true;
		for (x = want; kvdoc_keylist_next(&x, &id, &wk);)
			if (kvdoc_keylist_has(rl, id, wk))
				return true;
	}
	return false;
}

/* Is the _id k, or a reservation of want, in the store? */
static bool up_in_store(struct kv_slice k, struct kv_slice want)
{
	struct kvd_reader *rd = tl_io->reader;
	unsigned ns = tl_io->srv->nshards, type;
	uint8_t rk[KVDOC_UQ_KEY_MAX];
	struct kv_slice v, wk;
	uint32_t id;
	size_t rn;

	if (kvdoc_get(rd, ns, k.p, k.n, tl_io->now_ms, &v) != KV_NOT_FOUND)
		return true;
	while (kvdoc_keylist_next(&want, &id, &wk)) {
		rn = kvdoc_uq_key(id, wk.p, wk.n, rk);
		if (kvd_reader_getk(rd, kvd_shard_of(rk, rn, ns), KVD_KS_INDEX,
				    rk, rn, tl_io->now_ms, &v,
				    &type) != KV_NOT_FOUND)
			return true;
	}
	return false;
}

/* Statement op's _id key in k (KVDOC_KEY_MAX) and unique keys in want:
 * 0, or -1 with op->err. */
static int up_keys(struct dmw *w, struct mdoor_wop *op, uint8_t *k, size_t *kn,
		   struct kv_buf *want)
{
	bson_iter_t it;

	want->len = 0;
	if (doc_id(op->doc, op->len, &it) ||
	    kvdoc_key(w->cid, bson_iter_value(&it), k, kn, &op->err))
		return op->err.code
			   ? -1
			   : mql_error_set(&op->err, MQL_BadValue, "no _id");
	return doc_uq_keys((struct kv_slice){w->sect.data, w->sect.len},
			   op->doc, op->len, want, &op->err);
}

static int upipe_fill(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;
	struct kv_buf want = {0};
	int rc = 0;

	if (w->i == w->next) {
		w->keys.len = w->kfront = 0;
	} else if (w->kfront > w->keys.len / 2) {
		memmove(w->keys.data, w->keys.data + w->kfront,
			w->keys.len - w->kfront);
		w->keys.len -= w->kfront;
		w->kfront = 0;
	}
	doc_uq_stmt(&w->uq, w->cid, KVDOC_OP_INSERT, &w->sect);
	while (!rc && w->next < w->stop && w->next < b->nops &&
	       w->next - w->i < WINDOW &&
	       (w->i == w->next || w->bytes < PIPE_BYTES)) {
		struct mdoor_wop *op = &b->ops[w->next];
		uint8_t k[KVDOC_KEY_MAX];
		size_t kn = 0;
		struct kv_slice ks, wl;

		if (up_keys(w, op, k, &kn, &want)) {
			op->ran = true; /* done: failed before it was sent */
			if (b->ordered)
				w->stop = w->next;
			w->next++;
			rc = up_add(w, (struct kv_slice){k, 0},
				    (struct kv_slice){0});
			continue;
		}
		ks = (struct kv_slice){k, kn};
		wl = (struct kv_slice){want.data, want.len};
		if (w->i < w->next && (up_clash(w, ks, wl) ||
				       (b->ordered && up_in_store(ks, wl))))
			break;
		rc = up_add(w, ks, wl) ||
		     doc_uq_push(&w->uq, k, kn, wl, w->next,
				 (struct kv_slice){op->doc, op->len});
		w->bytes += op->len;
		w->next++;
	}
	kv_buf_free(&want);
	if (rc || want.err || doc_uq_step(&w->uq) < 0)
		return oom(&b->err);
	return 0;
}

/* Statement t is done (pd its merge's result, or e its failure). */
static void upipe_done(struct dmw *w, size_t t, const struct kvd_pend *pd,
		       const struct mql_error *e, const bson_t *info)
{
	struct mdoor_wbatch *b = w->b;
	struct mdoor_wop *op = &b->ops[t];
	struct kv_slice rk, rl;

	w->bytes -= op->len;
	w->mid = KVDOC_OP_INSERT;
	if (pd) {
		stmt_result(w, op, pd);
	} else if (!op->err.code) {
		op->err = *e;
		if (op->errinfo.len == 5)
			bson_concat(&op->errinfo, info);
	}
	op->ran = true;
	if (b->ordered && op->err.code && t < w->stop) {
		/* the first failure: nothing after it runs, and what after
		 * it was inserted already is deleted again */
		w->stop = t;
		doc_uq_cancel(&w->uq);
		for (size_t j = t + 1; j < w->next; j++)
			if (b->ops[j].ran && !b->ops[j].err.code &&
			    b->ops[j].n && !pipe_undo(w, &b->ops[j]))
				b->ops[j].n = 0;
	} else if (b->ordered && t > w->stop && !op->err.code && op->n &&
		   !pipe_undo(w, op)) {
		op->n = 0;
	}
	while (w->i < w->next && b->ops[w->i].ran) {
		w->kfront += up_rec(w, w->kfront, &rk, &rl);
		w->i++;
	}
}

/* One merge of a batch under a unique index came back. */
static void upipe_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;

	w->out--;
	if (pd->aux) {
		doc_uq_result(&w->uq, pd);
	} else { /* an undo's delete: the keys it let go are released */
		w->undo--;
		doc_uq_back(&w->uq, pd);
	}
	if (!b->err.code && w->next < b->nops && w->next < w->stop)
		upipe_fill(w);
	if (!w->out && doc_uq_step(&w->uq) < 0 && !b->err.code)
		oom(&b->err);
	if (!w->out)
		pipe_end(w);
}

/* ---- the catalog's changes ---- */

static int send_catalog(struct dmw *w, unsigned op, unsigned flags)
{
	w->opnd.len = 0;
	if (kvdoc_op_catalog(&w->opnd, op, flags, w->b->db,
			     op == KVDOC_CAT_DROPDB ? NULL : w->b->coll,
			     w->b->options, w->b->options_len))
		return -1;
	return send_merge(w, KVD_KS_CATALOG,
			  KVDOC_MERGE_BASE + KVDOC_OP_CATALOG,
			  (const uint8_t *)KVDOC_CATALOG_KEY,
			  strlen(KVDOC_CATALOG_KEY), w->opnd.data, w->opnd.len);
}

static void catalog_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;

	if (b->kind == MDOOR_W_CREATE && pd->status == KV_EXISTS)
		mql_error_set(&b->err, 48, "Collection %s.%s already exists.",
			      b->db, b->coll);
	else if (b->kind == MDOOR_W_DROP && pd->status == KV_NOT_FOUND)
		mql_error_set(&b->err, 26, "ns not found");
	else if (pd->status != KV_OK)
		mql_error_set(&b->err, MQL_InternalError,
			      "catalog change failed (%d)", pd->status);
}

/* Does the batch insert (so needs its collection)? */
static bool inserts(const struct mdoor_wbatch *b)
{
	if (b->kind == MDOOR_W_INSERT)
		return b->nops > 0;
	for (size_t i = 0; i < b->nops; i++)
		if (b->ops[i].upsert && !b->ops[i].remove)
			return true;
	return false;
}

/* Run the batch on until it waits for merges, or it is done. */
static void step(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;
	int n;

	if (!w->have) {
		int r = coll_id(b->db, b->coll, &w->cid);

		if (r < 0) {
			mql_error_set(&b->err, MQL_InternalError, "catalog");
			goto done;
		}
		w->have = r;
		if (!r && inserts(b) && !w->creating) {
			w->creating = 1;
			if (send_catalog(w, KVDOC_CAT_CREATE, 0)) {
				mql_error_set(&b->err, MQL_InternalError,
					      "out of memory");
				goto done;
			}
			return;
		}
	}
	if (pipe_ok(w)) {
		w->pipe = true;
		w->uq.h.each = true; /* each document its own statement */
		w->next = w->i;
		w->stop = b->nops;
		pipe_fill(w);
		if (!w->out)
			pipe_end(w);
		return; /* otherwise pipe_result goes on */
	}
	for (; w->i < b->nops; w->i++) {
		struct mdoor_wop *op = &b->ops[w->i];

		n = start_stmt(w, op);
		if (n > 0)
			return; /* doc_mdoor_result goes on */
		op->ran = true;
		if (op->err.code && b->ordered) {
			w->i = b->nops;
			break;
		}
	}
done:
	finish(w);
}

void doc_mdoor_result(struct kvd_conn *c, const struct kvd_pend *pd)
{
	struct dmw *w = c->mwrite;
	struct mdoor_wop *op;

	if (!w)
		return;
	if (doc_ix_kind(w->b)) { /* an index command's (doc_mdoor_ix.c) */
		doc_ix_result(c, pd);
		return;
	}
	if (w->pipe) {
		if (w->unique)
			upipe_result(w, pd);
		else
			pipe_result(w, pd);
		return;
	}
	w->out--;
	if (b_is_catalog(w->b->kind)) {
		catalog_result(w, pd);
		finish(w);
		return;
	}
	if (w->creating == 1) {
		w->creating = 2; /* once: a collection dropped meanwhile */
		if (pd->status != KV_OK && pd->status != KV_EXISTS) {
			mql_error_set(&w->b->err, MQL_InternalError,
				      "creating the collection failed");
			finish(w);
			return;
		}
		step(w);
		return;
	}
	op = &w->b->ops[w->i];
	if (pd->aux)
		doc_uq_result(&w->uq, pd);
	else if (!doc_uq_back(&w->uq, pd))
		stmt_result(w, op, pd);
	if (send_keys(w, &op->err) == 0 && w->out)
		return;
	if (w->out)
		return;
	/* documents whose merge asked for reservations, keys let go */
	doc_uq_stmt(&w->uq, w->cid, w->mid, &w->opnd);
	if (doc_uq_step(&w->uq) < 0 && !op->err.code)
		oom(&op->err);
	if (w->out)
		return;
	/* a multi-document statement's next batch (MongoDB's multi-updates
	 * stop at their first error too) */
	if (w->scan && !op->err.code && w->kpos == w->keys.len &&
	    more_keys(w, &op->err) == 0 && w->keys.len &&
	    send_keys(w, &op->err) == 0 && w->out)
		return;
	if (w->scan) {
		scan_close(w->scan);
		w->scan = NULL;
	}
	op->ran = true;
	if (op->err.code && w->b->ordered)
		w->i = w->b->nops;
	else
		w->i++;
	step(w);
}

void doc_mdoor_abandon(struct kvd_conn *c)
{
	struct dmw *w = c->mwrite;

	if (w && doc_ix_kind(w->b))
		doc_ix_abandon(c);
	else if (w) /* its merges came back unanswered: the connection died */
		finish(w);
}

/* May this server take writes now?  0, or -1 with b->err: a replica (its
 * primary's writes only) and a read-only server answer as a MongoDB
 * secondary does, 10107 NotWritablePrimary, and min-replicas-to-ack
 * short of good replicas as a write concern that cannot be met. */
static int writable(struct mdoor_wbatch *b)
{
	struct kvd_conn *c = b->conn;
	int rc = kvd_repl_write_ok();
	const char *name = "NotWritablePrimary";

	if (c->io->srv->cfg->read_only)
		mql_error_set(&b->err, 10107,
			      "not primary: the server is read-only");
	else if (rc == KV_REPLICA_READ_ONLY)
		mql_error_set(&b->err, 10107,
			      "not primary: the server is a replica");
	else if (rc) {
		mql_error_set(&b->err, 100,
			      "not enough good replicas to write "
			      "(min-replicas-to-ack)");
		name = "UnsatisfiableWriteConcern";
	} else
		return 0;
	snprintf(b->err.codename, sizeof(b->err.codename), "%s", name);
	return -1;
}

/* The reservations' driver reports to the statement running, or to the
 * batch's statement t under a unique index. */
static void uq_doc_back(void *ctx, size_t t, const struct kvd_pend *pd)
{
	struct dmw *w = ctx;

	if (w->pipe)
		upipe_done(w, t, pd, NULL, NULL);
	else
		stmt_result(w, &w->b->ops[w->i], pd);
}

static void uq_fail(void *ctx, size_t t, const struct mql_error *e,
		    const bson_t *info)
{
	struct dmw *w = ctx;
	struct mdoor_wop *op = &w->b->ops[w->i];

	if (w->pipe) {
		upipe_done(w, t, NULL, e, info);
		return;
	}
	if (op->err.code)
		return;
	op->err = *e;
	/* a batch of the native protocol leaves errinfo zeroed: unused */
	if (op->errinfo.len == 5)
		bson_concat(&op->errinfo, info);
}

static void uq_host(struct dmw *w)
{
	struct doc_uq_host h = {.c = w->c,
				.out = &w->out,
				.ctx = w,
				.doc_back = uq_doc_back,
				.fail = uq_fail,
				.db = w->b->db,
				.coll = w->b->coll};

	doc_uq_init(&w->uq, &h);
}

static void write_batch(void *ctx, struct mdoor_wbatch *b)
{
	struct kvd_conn *c = b->conn;
	struct dmw *w = NULL;
	unsigned op = KVDOC_CAT_CREATE, fl = KVDOC_EXCL;

	(void)ctx;
	/* index builds and drops are writes too: a replica refuses them */
	if (writable(b)) {
		b->done(b);
		return;
	}
	if (doc_ix_kind(b)) {
		doc_ix_write(b);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		b->done(b);
		return;
	}
	w->b = b;
	w->c = c;
	c->mwrite = w;
	uq_host(w);
	if (!b_is_catalog(b->kind)) {
		step(w);
		return;
	}
	if (b->kind != MDOOR_W_CREATE) {
		op =
		    b->kind == MDOOR_W_DROP ? KVDOC_CAT_DROP : KVDOC_CAT_DROPDB;
		fl = 0;
	}
	if (send_catalog(w, op, fl)) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		finish(w);
	}
}

const struct mdoor_store doc_mdoor_store = {
    .list_databases = doc_mdoor_list_dbs,
    .list_collections = doc_mdoor_list_colls,
    .coll_stats = coll_stats,
    .scan = scan_open,
    .scan_next = scan_next,
    .scan_close = scan_close,
    .scan_deadline = scan_deadline,
    .write = write_batch,
    .list_indexes = doc_ix_list,
    .explain = explain,
};
