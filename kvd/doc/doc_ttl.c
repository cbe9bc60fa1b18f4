/* doc_ttl.c - the TTL monitor (doc_ttl.h; docs/architecture.md,
 * "Indexes").
 *
 * Every pass reads the catalog, and for each built index with
 * expireAfterSeconds (a single field) reads the index's entries of dates
 * older than now less that many seconds (mql_index_bounds of {f: {$lt:
 * cutoff}}, so only dates: other values never expire; an array's entries
 * are its elements, so it goes with its earliest date), in batches of
 * BATCH documents, and sends each a DELETE merge carrying the same
 * filter (and the index's partialFilterExpression), which the document's
 * committer checks again: a document updated since to a later date stays.
 * The delete is the door's own merge, so the document's other index
 * entries go in its batch, and replicas get the delete as any write.  At
 * most PASS_MAX documents per index per pass: the next pass goes on.
 *
 * It runs on the documents' background thread (doc_bg.h), which first
 * builds again the indexes a stop left building (doc_build.c).  A replica
 * and a read-only server do neither: the primary's records bring them.
 * The keys of unique indexes a deleted document let go are released
 * after each batch through the reservations' driver (doc_uq.h), as a
 * door's delete does, so that a collection whose documents come and go
 * keeps no reservation of a document long gone.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "doc_ttl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "config.h"
#include "doc_bg.h"
#include "doc_plan.h"
#include "doc_uq.h"
#include "index.h"
#include "kv_status.h"
#include "kvd.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"

#define BATCH 256
#define PASS_MAX 100000
#define PURGE_WAIT_MS 50 /* between purge passes while the list is not empty */

static struct {
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct doc_bg g;
	_Atomic uint64_t reaped;
} T = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

uint64_t doc_ttl_reaped(void)
{
	return atomic_load(&T.reaped);
}

/* A batch's deletes, and the releases of the keys they let go. */
struct reap {
	struct doc_uq uq;
	uint64_t n; /* documents deleted */
};

static void deleted(void *arg, const struct kvd_pend *pd)
{
	struct reap *r = arg;

	if (pd->aux) { /* a release: whatever it found */
		doc_uq_result(&r->uq, pd);
		return;
	}
	r->n += pd->status == KV_OK && pd->result == 1;
	doc_uq_back(&r->uq, pd); /* keeps the keys it let go */
}

static int uq_send(void *arg, unsigned ks, unsigned id, struct kv_slice k,
		   struct kv_slice v, uint32_t tag)
{
	(void)arg;
	return doc_bg_merge(&T.g, ks, id, -1, k, v, tag);
}

static void reap_init(struct reap *r, uint32_t coll, const struct kv_buf *op)
{
	/* a delete asks for no reservation: no document is pushed */
	struct doc_uq_host h = {.ctx = r,
				.db = "",
				.coll = "",
				.send = uq_send,
				.rd = T.g.rd,
				.cat = &T.g.cat,
				.nshards = T.g.srv->nshards};

	memset(r, 0, sizeof(*r));
	doc_uq_init(&r->uq, &h);
	doc_uq_stmt(&r->uq, coll, KVDOC_OP_DELETE, op);
}

/* Wait for the batch's deletes, then release what they let go. */
static void reap_wait(struct reap *r)
{
	doc_bg_wait(&T.g, deleted, r);
	while (!T.g.stop && doc_uq_step(&r->uq) > 0)
		doc_bg_wait(&T.g, deleted, r);
}

/* ---- one index ---- */

struct ttl_ix {
	uint32_t id, coll;
	struct kv_slice key, pfe;
	const char *field;
	int64_t expire;
};

/* A TTL index of the catalog: single field, built, expireAfterSeconds. */
static int ttl_of(const struct kvdoc_ix *ix, struct ttl_ix *t)
{
	bson_iter_t it, kt;
	const uint8_t *d;
	uint32_t n;
	int have = 0;

	memset(t, 0, sizeof(*t));
	if (ix->state != KVDOC_IX_READY ||
	    !bson_iter_init_from_data(&it, ix->spec.p, ix->spec.n))
		return 0;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "expireAfterSeconds") &&
		    BSON_ITER_HOLDS_NUMBER(&it)) {
			t->expire = bson_iter_as_int64(&it);
			have = 1;
		} else if (BSON_ITER_HOLDS_DOCUMENT(&it) &&
			   (!strcmp(k, "key") ||
			    !strcmp(k, "partialFilterExpression"))) {
			bson_iter_document(&it, &n, &d);
			if (k[0] == 'k')
				t->key = (struct kv_slice){d, n};
			else
				t->pfe = (struct kv_slice){d, n};
		}
	}
	if (!have || !t->key.n ||
	    !bson_iter_init_from_data(&kt, t->key.p, t->key.n) ||
	    !bson_iter_next(&kt))
		return 0;
	t->field = bson_iter_key(&kt);
	t->id = ix->id;
	t->coll = ix->coll;
	return !bson_iter_next(&kt);
}

/* The filter of what expired: {f: {$lt: cutoff}, $and: [pfe]}. */
static void expired_filter(const struct ttl_ix *t, int64_t cutoff, bson_t *f)
{
	bson_t lt, and, pfe;

	BSON_APPEND_DOCUMENT_BEGIN(f, t->field, &lt);
	BSON_APPEND_DATE_TIME(&lt, "$lt", cutoff);
	bson_append_document_end(f, &lt);
	if (t->pfe.n && bson_init_static(&pfe, t->pfe.p, t->pfe.n)) {
		BSON_APPEND_ARRAY_BEGIN(f, "$and", &and);
		BSON_APPEND_DOCUMENT(&and, "0", &pfe);
		bson_append_array_end(f, &and);
	}
}

struct batch {
	const struct mql_match *q;
	struct kv_buf keys; /* [u8 len][document key]... */
};

static int keep(void *arg, struct kv_slice key, struct kv_slice val,
		unsigned type, uint64_t exp)
{
	struct batch *b = arg;
	uint8_t n = (uint8_t)key.n;

	(void)type, (void)exp;
	if (key.n > KVDOC_KEY_MAX ||
	    !mql_match_doc(b->q, val.p, (uint32_t)val.n, NULL))
		return 0;
	return kv_buf_append(&b->keys, &n, 1) ||
	       kv_buf_append(&b->keys, key.p, key.n);
}

/* Delete what index t let expire, in batches: the documents deleted. */
static uint64_t reap_index(const struct ttl_ix *t)
{
	int64_t cutoff = (int64_t)kvd_now_ms() - t->expire * 1000;
	bson_t f = BSON_INITIALIZER;
	struct mql_match *q = NULL;
	struct mql_error e = {0};
	struct doc_plan *plan = NULL;
	struct batch b = {0};
	struct kv_buf op = {0};
	struct reap r;
	uint64_t seen = 0;

	reap_init(&r, t->coll, &op);
	expired_filter(t, cutoff, &f);
	if (mql_match_compile(bson_get_data(&f), f.len, &q, &e))
		goto out;
	struct mdoor_query mq = {
	    .filter = q, .hint = t->key.p, .hint_len = (uint32_t)t->key.n};

	b.q = q;
	if (doc_plan_choose(&T.g.cat, t->coll, &mq, &plan, &e) <= 0 ||
	    kvdoc_ix_section(&T.g.cat, t->coll, 0, &op) ||
	    kvdoc_op_delete(&op, 0, bson_get_data(&f), f.len))
		goto out;
	while (!doc_plan_done(plan) && seen < PASS_MAX && !T.g.stop) {
		b.keys.len = 0;
		if (doc_plan_batch(plan, T.g.rd, T.g.srv->nshards, kvd_now_ms(),
				   BATCH, keep, &b))
			break;
		kvd_reader_reset(T.g.rd); /* nothing read is used past here */
		for (size_t p = 0; p < b.keys.len; p += 1u + b.keys.data[p]) {
			if (doc_bg_merge(&T.g, KVD_KS_DOC,
					 KVDOC_MERGE_BASE + KVDOC_OP_DELETE, -1,
					 (struct kv_slice){b.keys.data + p + 1,
							   b.keys.data[p]},
					 (struct kv_slice){op.data, op.len}, 0))
				break;
			seen++;
		}
		reap_wait(&r);
	}
out:
	kvd_reader_reset(T.g.rd);
	doc_plan_free(plan);
	mql_match_free(q);
	bson_destroy(&f);
	kv_buf_free(&b.keys);
	kv_buf_free(&op);
	doc_uq_free(&r.uq);
	return r.n;
}

struct ttl_list {
	struct ttl_ix *v;
	size_t n, cap;
};

static int each_ix(void *arg, const struct kvdoc_ix *ix)
{
	struct ttl_list *l = arg;
	struct ttl_ix t;

	if (!ttl_of(ix, &t))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct ttl_ix *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = t;
	return 0;
}

static void pass(void)
{
	struct ttl_list l = {0};
	uint64_t n = 0;

	if (kvdoc_catalog_refresh(&T.g.cat, T.g.rd, kvd_now_ms()) == KV_OK)
		kvdoc_catalog_indexes(&T.g.cat, 0, each_ix, &l);
	kvd_reader_reset(T.g.rd);
	for (size_t i = 0; i < l.n && !T.g.stop; i++)
		n += reap_index(&l.v[i]);
	free(l.v);
	if (n) {
		atomic_fetch_add(&T.reaped, n);
		log_debug("ttl: %llu expired documents deleted",
			  (unsigned long long)n);
	}
}

/* A replica and a read-only server leave their documents to the
 * primary's records. */
static bool writable(void)
{
	return !T.g.srv->cfg->read_only && kvd_repl_write_ok() == KV_OK;
}

static void *ttl_main(void *arg)
{
	int resumed = 0, purging = 1; /* a purge a stop cut goes on */
	uint64_t last = kvd_now_ms(); /* the last TTL pass */

	(void)arg;
	pthread_mutex_lock(&T.mu);
	while (!T.g.stop) {
		if (!resumed && writable()) { /* once, first */
			pthread_mutex_unlock(&T.mu);
			doc_build_resume(&T.g);
			pthread_mutex_lock(&T.mu);
			resumed = 1;
			continue;
		}
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		if (purging) /* comes back soon while the list is not empty */
			ts.tv_nsec += PURGE_WAIT_MS * 1000000L;
		else
			ts.tv_sec += T.g.srv->cfg->mongo_ttl_interval;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&T.cv, &T.mu, &ts);
		if (T.g.stop || !writable()) {
			purging = 0; /* the primary's deletes come */
			continue;
		}
		pthread_mutex_unlock(&T.mu);
		if (kvd_now_ms() - last >=
		    T.g.srv->cfg->mongo_ttl_interval * 1000ull) {
			last = kvd_now_ms();
			pass();
		}
		purging = doc_purge_pass(&T.g);
		pthread_mutex_lock(&T.mu);
	}
	pthread_mutex_unlock(&T.mu);
	return NULL;
}

int doc_ttl_start(struct kvd_server *srv)
{
	if (doc_bg_init(&T.g, srv) ||
	    pthread_create(&T.thread, NULL, ttl_main, NULL)) {
		doc_bg_free(&T.g);
		return -1;
	}
	pthread_setname_np(T.thread, "kvd-docs");
	T.started = 1;
	return 0;
}

void doc_ttl_stop(void)
{
	if (!T.started)
		return;
	pthread_mutex_lock(&T.mu);
	T.g.stop = 1;
	pthread_cond_signal(&T.cv);
	pthread_mutex_unlock(&T.mu);
	pthread_join(T.thread, NULL);
	T.started = 0;
	doc_bg_free(&T.g);
}
