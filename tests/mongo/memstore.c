/* memstore.c - the in-memory document store of the door's tests (see
 * memstore.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstore.h"
#include "mql_key.h"
#include "mql_sort.h"
#include "mql_update.h"
#include "mql_value.h"

struct mdoc {
	uint8_t *p;
	uint32_t len;
	uint8_t key[MQL_KEY_ID_MAX]; /* its _id's primary key */
	size_t klen;
};

struct mcoll {
	char db[64], name[256];
	struct mdoc *docs;
	size_t n, cap;
	uint8_t *opts;
	uint32_t optlen;
	uint8_t uuid[16];
};

struct memstore {
	struct mcoll **colls;
	size_t ncolls;
	bool defer, sorting, pausing;
	struct mdoor_wbatch **q;
	size_t nq, capq;
	size_t nscans;
	/* memstore_block_scans: scan_next waits while blocked */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool blocked;
	unsigned waiting;
};

struct mscan {
	struct memstore *ms;
	struct mdoc *docs; /* copies */
	size_t n, pos;
	bool sliced;	/* scan_slice was called: it may pause */
	unsigned calls; /* scan_next's, for pausing every other one */
};

/* ===================== collections ===================== */

static struct mcoll *find_coll(struct memstore *ms, const char *db,
			       const char *name)
{
	for (size_t i = 0; i < ms->ncolls; i++)
		if (!strcmp(ms->colls[i]->db, db) &&
		    !strcmp(ms->colls[i]->name, name))
			return ms->colls[i];
	return NULL;
}

static struct mcoll *make_coll(struct memstore *ms, const char *db,
			       const char *name)
{
	struct mcoll *c = find_coll(ms, db, name);

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	snprintf(c->db, sizeof(c->db), "%s", db);
	snprintf(c->name, sizeof(c->name), "%s", name);
	for (int i = 0; i < 16; i++)
		c->uuid[i] = (uint8_t)rand();
	ms->colls = realloc(ms->colls, sizeof(*ms->colls) * (ms->ncolls + 1));
	ms->colls[ms->ncolls++] = c;
	return c;
}

static void free_coll(struct mcoll *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->docs[i].p);
	free(c->docs);
	free(c->opts);
	free(c);
}

static void drop_coll(struct memstore *ms, struct mcoll *c)
{
	for (size_t i = 0; i < ms->ncolls; i++)
		if (ms->colls[i] == c) {
			ms->colls[i] = ms->colls[--ms->ncolls];
			break;
		}
	free_coll(c);
}

/* ===================== documents ===================== */

static int doc_key(const uint8_t *p, uint32_t len, uint8_t *key, size_t *klen,
		   struct mql_error *err)
{
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, p, len) ||
	    !bson_iter_find(&it, "_id"))
		return mql_error_set(err, MQL_BadValue, "document without _id");
	return mql_key_id(bson_iter_value(&it), key, klen, err);
}

static long find_key(const struct mcoll *c, const uint8_t *key, size_t klen)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->docs[i].klen == klen &&
		    !memcmp(c->docs[i].key, key, klen))
			return (long)i;
	return -1;
}

static int dup_error(const struct mcoll *c, const uint8_t *p, uint32_t len,
		     struct mql_error *err)
{
	bson_iter_t it;
	char v[128];

	bson_iter_init_from_data(&it, p, len);
	bson_iter_find(&it, "_id");
	mql_value_str(bson_iter_value(&it), v, sizeof(v));
	return mql_error_set(err, 11000,
			     "E11000 duplicate key error collection: %s.%s "
			     "index: _id_ dup key: { _id: %s }",
			     c->db, c->name, v);
}

/* Insert a copy of p; 0, or -1 (a duplicate _id). */
static int put_doc(struct mcoll *c, const uint8_t *p, uint32_t len,
		   struct mql_error *err)
{
	struct mdoc d = {0};

	if (doc_key(p, len, d.key, &d.klen, err))
		return -1;
	if (find_key(c, d.key, d.klen) >= 0)
		return dup_error(c, p, len, err);
	d.p = malloc(len);
	memcpy(d.p, p, len);
	d.len = len;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->docs = realloc(c->docs, sizeof(*c->docs) * c->cap);
	}
	c->docs[c->n++] = d;
	return 0;
}

static void replace_doc(struct mdoc *d, const bson_t *b)
{
	free(d->p);
	d->p = malloc(b->len);
	memcpy(d->p, bson_get_data(b), b->len);
	d->len = b->len;
}

static void del_doc(struct mcoll *c, size_t i)
{
	free(c->docs[i].p);
	memmove(&c->docs[i], &c->docs[i + 1],
		sizeof(*c->docs) * (c->n - i - 1));
	c->n--;
}

/* ===================== reads ===================== */

static int list_dbs(void *ctx, mdoor_db_cb cb, void *cbctx,
		    struct mql_error *err)
{
	struct memstore *ms = ctx;
	const char *seen[256];
	size_t ns = 0;

	(void)err;
	for (size_t i = 0; i < ms->ncolls; i++) {
		struct mdoor_db_info db = {.name = ms->colls[i]->db};
		size_t k;

		for (k = 0; k < ns && strcmp(seen[k], db.name); k++)
			;
		if (k < ns || ns == 256)
			continue;
		seen[ns++] = db.name;
		for (size_t j = 0; j < ms->ncolls; j++)
			if (!strcmp(ms->colls[j]->db, db.name))
				for (size_t d = 0; d < ms->colls[j]->n; d++)
					db.size_on_disk +=
					    ms->colls[j]->docs[d].len;
		db.empty = db.size_on_disk == 0;
		if (cb(cbctx, &db))
			break;
	}
	return 0;
}

static int list_colls(void *ctx, const char *db, mdoor_coll_cb cb, void *cbctx,
		      struct mql_error *err)
{
	struct memstore *ms = ctx;

	(void)err;
	for (size_t i = 0; i < ms->ncolls; i++) {
		struct mcoll *c = ms->colls[i];
		struct mdoor_coll_info info = {.name = c->name,
					       .options = c->opts,
					       .options_len = c->optlen,
					       .uuid = c->uuid};

		if (!strcmp(c->db, db) && cb(cbctx, &info))
			break;
	}
	return 0;
}

static int coll_stats(void *ctx, const char *db, const char *coll,
		      struct mdoor_coll_stats *out, struct mql_error *err)
{
	struct memstore *ms = ctx;
	int found = 0;

	(void)err;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < ms->ncolls; i++) {
		struct mcoll *c = ms->colls[i];

		if (strcmp(c->db, db) || (coll && strcmp(c->name, coll)))
			continue;
		found = 1;
		out->count += c->n;
		out->nindexes++;
		for (size_t d = 0; d < c->n; d++)
			out->size += c->docs[d].len;
	}
	out->storage_size = out->size;
	return found || !coll;
}

struct sort_ctx {
	const struct mql_sort *s;
	size_t nk;
	bson_value_t *keys;
};

static int by_keys(const void *a, const void *b, void *ctx)
{
	const struct sort_ctx *sc = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = mql_sort_cmp_keys(sc->s, &sc->keys[i * sc->nk],
				  &sc->keys[j * sc->nk]);

	return c ? c : (i < j ? -1 : i > j);
}

/* Put docs[0..n) in s's order (stable). */
static void sort_docs(struct mdoc *docs, size_t n, const struct mql_sort *s)
{
	struct sort_ctx sc = {.s = s, .nk = mql_sort_nkeys(s)};
	size_t *idx = malloc(sizeof(*idx) * (n ? n : 1));
	struct mdoc *tmp = malloc(sizeof(*tmp) * (n ? n : 1));

	sc.keys = calloc(n * sc.nk + 1, sizeof(*sc.keys));
	for (size_t i = 0; i < n; i++) {
		idx[i] = i;
		mql_sort_key(s, docs[i].p, docs[i].len, &sc.keys[i * sc.nk]);
	}
	qsort_r(idx, n, sizeof(*idx), by_keys, &sc);
	for (size_t i = 0; i < n; i++)
		tmp[i] = docs[idx[i]];
	memcpy(docs, tmp, sizeof(*docs) * n);
	free(tmp);
	free(idx);
	free(sc.keys);
}

static int scan_open(void *ctx, const struct mdoor_query *q, void **out,
		     struct mdoor_scan_info *info, struct mql_error *err)
{
	struct memstore *ms = ctx;
	struct mcoll *c = find_coll(ms, q->db, q->coll);
	struct mscan *s = calloc(1, sizeof(*s));

	(void)err;
	s->ms = ms;
	s->docs = calloc(c ? c->n + 1 : 1, sizeof(*s->docs));
	for (size_t i = 0; c && i < c->n; i++) {
		if (!mql_match_doc(q->filter, c->docs[i].p, c->docs[i].len,
				   NULL))
			continue;
		s->docs[s->n].p = malloc(c->docs[i].len);
		memcpy(s->docs[s->n].p, c->docs[i].p, c->docs[i].len);
		s->docs[s->n++].len = c->docs[i].len;
	}
	if (ms->sorting && q->sort) {
		sort_docs(s->docs, s->n, q->sort);
		info->sorted = true;
	}
	ms->nscans++;
	*out = s;
	return 0;
}

static int scan_next(void *scan, const uint8_t **doc, uint32_t *len,
		     struct mql_error *err)
{
	struct mscan *s = scan;
	struct memstore *ms = s->ms;

	(void)err;
	pthread_mutex_lock(&ms->lock);
	if (ms->blocked) {
		ms->waiting++;
		pthread_cond_broadcast(&ms->cond);
		while (ms->blocked)
			pthread_cond_wait(&ms->cond, &ms->lock);
		ms->waiting--;
	}
	pthread_mutex_unlock(&ms->lock);
	/* pausing: every other call finds nothing yet, as a slice of the
	 * real store's that runs out does (always before the end, too) */
	if (ms->pausing && s->sliced && s->calls++ % 2 == 0)
		return MDOOR_PAUSE;
	if (s->pos == s->n)
		return 0;
	*doc = s->docs[s->pos].p;
	*len = s->docs[s->pos].len;
	s->pos++;
	return 1;
}

static void scan_close(void *scan)
{
	struct mscan *s = scan;

	for (size_t i = 0; i < s->n; i++)
		free(s->docs[i].p);
	free(s->docs);
	s->ms->nscans--;
	free(s);
}

/* ===================== writes ===================== */

static int apply(const struct mdoor_wbatch *b, const struct mdoor_wop *op,
		 const uint8_t *doc, uint32_t len, long pos, bson_t *out,
		 bool *mod, struct mql_error *err)
{
	struct mql_update_ctx ctx = {
	    .now_ms = b->now_ms,
	    .ts_t = (uint32_t)(b->now_ms / 1000),
	    .ts_i = 1,
	    .pos = pos,
	    .query = op->q,
	    .new_id = op->new_id,
	};

	return mql_update_apply(op->u, doc, len, &ctx, out, mod, err);
}

/* An upsert's insert; its new document in *out (initialized). */
static int upsert(struct memstore *ms, struct mdoor_wbatch *b,
		  struct mdoor_wop *op, bson_t *out)
{
	struct mcoll *c;
	bool mod;
	bson_iter_t it;

	if (apply(b, op, NULL, 0, -1, out, &mod, &op->err))
		return -1;
	c = make_coll(ms, b->db, b->coll);
	if (put_doc(c, bson_get_data(out), out->len, &op->err))
		return -1;
	if (bson_iter_init_find(&it, out, "_id"))
		bson_append_iter(&op->upserted, "_id", 3, &it);
	return 0;
}

static void run_update(struct memstore *ms, struct mdoor_wbatch *b,
		       struct mdoor_wop *op)
{
	struct mcoll *c = find_coll(ms, b->db, b->coll);

	for (size_t i = 0; c && i < c->n; i++) {
		struct mdoc *d = &c->docs[i];
		bson_t out = BSON_INITIALIZER;
		bool mod = false;
		long pos = -1;

		if (!mql_match_doc(op->q, d->p, d->len, &pos)) {
			bson_destroy(&out);
			continue;
		}
		if (apply(b, op, d->p, d->len, pos, &out, &mod, &op->err)) {
			bson_destroy(&out);
			return;
		}
		op->n++;
		if (mod) {
			replace_doc(d, &out);
			op->nmodified++;
		}
		bson_destroy(&out);
		if (!op->multi)
			break;
	}
	if (op->n == 0 && op->upsert) {
		bson_t out = BSON_INITIALIZER;

		upsert(ms, b, op, &out);
		bson_destroy(&out);
	}
}

static void run_delete(struct memstore *ms, struct mdoor_wbatch *b,
		       struct mdoor_wop *op)
{
	struct mcoll *c = find_coll(ms, b->db, b->coll);

	for (size_t i = 0; c && i < c->n;) {
		if (!mql_match_doc(op->q, c->docs[i].p, c->docs[i].len, NULL)) {
			i++;
			continue;
		}
		del_doc(c, i);
		op->n++;
		if (!op->multi)
			break;
	}
}

/* findAndModify's document: the first match in sort's order, or -1. */
static long fam_pick(const struct mcoll *c, const struct mdoor_wop *op)
{
	size_t nk = op->sort ? mql_sort_nkeys(op->sort) : 0;
	bson_value_t *best = calloc(nk + 1, sizeof(*best));
	bson_value_t *k = calloc(nk + 1, sizeof(*k));
	long pick = -1;

	for (size_t i = 0; c && i < c->n; i++) {
		if (!mql_match_doc(op->q, c->docs[i].p, c->docs[i].len, NULL))
			continue;
		if (!op->sort) {
			pick = (long)i;
			break;
		}
		mql_sort_key(op->sort, c->docs[i].p, c->docs[i].len, k);
		if (pick < 0 || mql_sort_cmp_keys(op->sort, k, best) < 0) {
			pick = (long)i;
			memcpy(best, k, sizeof(*k) * nk);
		}
	}
	free(best);
	free(k);
	return pick;
}

static void run_fam(struct memstore *ms, struct mdoor_wbatch *b,
		    struct mdoor_wop *op)
{
	struct mcoll *c = find_coll(ms, b->db, b->coll);
	long i = fam_pick(c, op);
	bson_t out = BSON_INITIALIZER, old;
	bool mod;

	if (i < 0) {
		if (op->upsert && upsert(ms, b, op, &out) == 0 &&
		    op->return_new)
			bson_concat(&op->value, &out);
		bson_destroy(&out);
		return;
	}
	op->n = 1;
	bson_init_static(&old, c->docs[i].p, c->docs[i].len);
	if (op->remove) {
		bson_concat(&op->value, &old);
		del_doc(c, (size_t)i);
	} else if (apply(b, op, c->docs[i].p, c->docs[i].len, -1, &out, &mod,
			 &op->err) == 0) {
		bson_concat(&op->value, op->return_new ? &out : &old);
		if (mod)
			replace_doc(&c->docs[i], &out);
	}
	bson_destroy(&out);
}

static void run_ddl(struct memstore *ms, struct mdoor_wbatch *b)
{
	struct mcoll *c = b->coll ? find_coll(ms, b->db, b->coll) : NULL;

	switch (b->kind) {
	case MDOOR_W_CREATE:
		if (c) {
			mql_error_set(&b->err, 48,
				      "Collection %s.%s already exists.", b->db,
				      b->coll);
			snprintf(b->err.codename, sizeof(b->err.codename),
				 "NamespaceExists");
			return;
		}
		c = make_coll(ms, b->db, b->coll);
		c->opts = malloc(b->options_len);
		memcpy(c->opts, b->options, b->options_len);
		c->optlen = b->options_len;
		return;
	case MDOOR_W_DROP:
		if (!c) {
			mql_error_set(&b->err, 26, "ns not found");
			snprintf(b->err.codename, sizeof(b->err.codename),
				 "NamespaceNotFound");
			return;
		}
		drop_coll(ms, c);
		return;
	default: /* MDOOR_W_DROPDB */
		for (size_t i = 0; i < ms->ncolls;)
			if (!strcmp(ms->colls[i]->db, b->db))
				drop_coll(ms, ms->colls[i]);
			else
				i++;
		return;
	}
}

static void execute(struct memstore *ms, struct mdoor_wbatch *b)
{
	if (b->kind == MDOOR_W_CREATE || b->kind == MDOOR_W_DROP ||
	    b->kind == MDOOR_W_DROPDB) {
		run_ddl(ms, b);
	}
	for (size_t i = 0; i < b->nops; i++) {
		struct mdoor_wop *op = &b->ops[i];

		switch (b->kind) {
		case MDOOR_W_INSERT:
			if (put_doc(make_coll(ms, b->db, b->coll), op->doc,
				    op->len, &op->err) == 0)
				op->n = 1;
			break;
		case MDOOR_W_UPDATE: run_update(ms, b, op); break;
		case MDOOR_W_DELETE: run_delete(ms, b, op); break;
		case MDOOR_W_FAM: run_fam(ms, b, op); break;
		default: break;
		}
		op->ran = true;
		if (op->err.code && b->ordered)
			break;
	}
	b->done(b);
}

static void store_write(void *ctx, struct mdoor_wbatch *b)
{
	struct memstore *ms = ctx;

	if (!ms->defer) {
		execute(ms, b);
		return;
	}
	if (ms->nq == ms->capq) {
		ms->capq = ms->capq ? ms->capq * 2 : 8;
		ms->q = realloc(ms->q, sizeof(*ms->q) * ms->capq);
	}
	ms->q[ms->nq++] = b;
}

size_t memstore_complete(struct memstore *ms)
{
	size_t n, k = ms->nq;

	/* done may queue more (a resumed connection's next write): those
	 * wait for the next call */
	for (n = 0; n < k; n++)
		execute(ms, ms->q[n]);
	if (n)
		memmove(ms->q, ms->q + n, sizeof(*ms->q) * (ms->nq - n));
	ms->nq -= n;
	return n;
}

size_t memstore_pending(const struct memstore *ms)
{
	return ms->nq;
}

size_t memstore_open_scans(const struct memstore *ms)
{
	return ms->nscans;
}

/* ===================== the store ===================== */

static void scan_slice(void *scan, unsigned ms)
{
	struct mscan *s = scan;

	(void)ms;
	s->sliced = true;
}

static void scan_slice_as(void *scan, void *like)
{
	struct mscan *s = scan;

	s->sliced = ((struct mscan *)like)->sliced;
}

/* Pausing, every other look finds the slice over, as a stage working
 * in memory may. */
static bool scan_slice_over(void *scan)
{
	struct mscan *s = scan;

	return s->ms->pausing && s->sliced && s->calls++ % 2 == 0;
}

struct memstore *memstore_new(void)
{
	struct memstore *ms = calloc(1, sizeof(struct memstore));

	ms->pausing = getenv("MDOOR_TEST_PAUSE") != NULL;
	pthread_mutex_init(&ms->lock, NULL);
	pthread_cond_init(&ms->cond, NULL);
	return ms;
}

void memstore_block_scans(struct memstore *ms, bool on)
{
	pthread_mutex_lock(&ms->lock);
	ms->blocked = on;
	pthread_cond_broadcast(&ms->cond);
	pthread_mutex_unlock(&ms->lock);
}

void memstore_wait_blocked(struct memstore *ms)
{
	pthread_mutex_lock(&ms->lock);
	while (!ms->waiting)
		pthread_cond_wait(&ms->cond, &ms->lock);
	pthread_mutex_unlock(&ms->lock);
}

void memstore_free(struct memstore *ms)
{
	for (size_t i = 0; i < ms->ncolls; i++)
		free_coll(ms->colls[i]);
	free(ms->colls);
	free(ms->q);
	pthread_mutex_destroy(&ms->lock);
	pthread_cond_destroy(&ms->cond);
	free(ms);
}

void memstore_defer(struct memstore *ms, bool on)
{
	ms->defer = on;
}

void memstore_sorting(struct memstore *ms, bool on)
{
	ms->sorting = on;
}

void memstore_ops(struct memstore *ms, struct mdoor_store *out)
{
	memset(out, 0, sizeof(*out));
	out->ctx = ms;
	out->list_databases = list_dbs;
	out->list_collections = list_colls;
	out->coll_stats = coll_stats;
	out->scan = scan_open;
	out->scan_next = scan_next;
	out->scan_close = scan_close;
	out->scan_slice = scan_slice;
	out->scan_slice_as = scan_slice_as;
	out->scan_slice_over = scan_slice_over;
	out->write = store_write;
}

void memstore_pausing(struct memstore *ms, bool on)
{
	ms->pausing = on;
}
