/* mdoor_cursor.c - cursors: what a find or an aggregate leaves to read,
 * continued by getMore and ended by killCursors, their end, their idle
 * timeout or the end of the door.
 *
 * A cursor is server-wide, as MongoDB's are: drivers keep a pool of
 * connections and send a getMore on whichever is free, so a cursor is
 * found by its id from any connection (of an authenticated client).  It
 * is checked out (busy) while one getMore reads it, so two never read it
 * at once (the second gets 143 CursorInUse).  Ids are random 63-bit
 * numbers, never 0, never one of a cursor still alive.
 *
 * Bounds: at most max_cursors open, and max_conn_cursors opened by one
 * connection still open (past either: 146 ExceededMemoryLimit, the
 * cursor not opened); the bytes their pipelines hold (sorts, groups) and
 * their stashed documents at most cursor_mem together (past it the
 * cursor that grew is killed with 146); idle ones die after
 * cursor_timeout_ms (mdoor_tick); a batch holds at most 16 MiB of
 * documents (one more document than fits is kept for the next batch).
 * A read that gives its thread back part-way (a slice) is counted in
 * cursor_mem too, at each pause (mdoor_cursor_hold), so that many
 * connections each part-way through a large sort cannot hold more than
 * the bound together (past it: 146, the read ended).
 * A connection that closes leaves its cursors to the timeout, as mongod
 * does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "mdoor_int.h"

struct mdoor_cursor {
	struct mdoor *d;
	uint64_t id;
	struct mdoor_cursor *hnext;	    /* registry chain (d->lock) */
	struct mdoor_cursor *oprev, *onext; /* owner's list (d->lock) */
	struct mdoor_conn *owner;	    /* NULL once it closed */
	bool registered, busy, killed;
	uint64_t last_ms;
	size_t mem; /* counted in d->mem */
	char ns[MDOOR_NAME_MAX];
	struct mdoor_cursor_src src;
	struct mql_agg_cursor *agg;
	struct mdoor_foreign foreign; /* what its $lookup stages read */
	bool eof;
	bool stashed; /* stash holds the next document */
	uint8_t *stash;
	uint32_t stash_len, stash_cap;
	bson_t out;	 /* a projected document */
	bson_iter_t lit; /* a listing's position */
	bool list_started;
	/* maxTimeMS: the working time left (src.max_time_ms less what its
	 * batches took), since when this batch works, and a count of reads
	 * between looks at the clock */
	int64_t budget_ms;
	uint64_t t0;
	unsigned ticks;
};

/* How many documents a cursor reads between looks at the clock. */
#define TICKS_PER_CHECK 64

/* ===================== reading ===================== */

/* Past its maxTimeMS: 50, as mongod's interrupt checks answer. */
static int over_time(struct mdoor_cursor *c, struct mql_error *err)
{
	if (!c->budget_ms)
		return 0;
	if ((int64_t)(mdoor_now(c->d) - c->t0) < c->budget_ms)
		return 0;
	return mdoor_err(err, MQL_MaxTimeMSExpired,
			 "operation exceeded time limit");
}

/* A batch starts working: the clock runs from now, and the store's scan
 * stops reading at the budget's end. */
static void work_start(struct mdoor_cursor *c)
{
	c->t0 = mdoor_now(c->d);
	if (c->budget_ms && c->src.scan && c->d->store.scan_deadline)
		c->d->store.scan_deadline(c->src.scan,
					  c->t0 + (uint64_t)c->budget_ms);
}

/* ... and ends: what it took is spent (at least 1 ms, so that an
 * exhausted budget never reads as "no limit"). */
static void work_end(struct mdoor_cursor *c)
{
	int64_t left;

	if (!c->budget_ms)
		return;
	left = c->budget_ms - (int64_t)(mdoor_now(c->d) - c->t0);
	c->budget_ms = left > 0 ? left : -1;
}

static int from_store(void *ctx, const uint8_t **doc, uint32_t *len,
		      struct mql_error *err)
{
	struct mdoor_cursor *c = ctx;

	if (c->budget_ms && ++c->ticks % TICKS_PER_CHECK == 0 &&
	    over_time(c, err))
		return -1;
	if (c->src.list) {
		if (!c->list_started) {
			bson_iter_init(&c->lit, c->src.list);
			c->list_started = true;
		}
		if (!bson_iter_next(&c->lit))
			return 0;
		bson_iter_document(&c->lit, len, doc);
		return 1;
	}
	return c->d->store.scan_next(c->src.scan, doc, len, err);
}

int mdoor_cursor_next(struct mdoor_cursor *c, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err)
{
	int rc;

	if (c->stashed) {
		c->stashed = false;
		*doc = c->stash;
		*len = c->stash_len;
		return 1;
	}
	for (;;) {
		if (c->eof || c->src.limit == 0) {
			c->eof = true;
			return 0;
		}
		rc = c->agg ? mql_agg_next(c->agg, doc, len, err)
			    : from_store(c, doc, len, err);
		if (rc == MDOOR_PAUSE)
			return rc; /* nothing yet: the cursor keeps its place */
		if (rc <= 0) {
			c->eof = true;
			return rc;
		}
		if (c->src.skip > 0) {
			c->src.skip--;
			continue;
		}
		break;
	}
	if (c->src.limit > 0)
		c->src.limit--;
	if (c->src.proj) {
		bson_reinit(&c->out);
		if (mql_project_apply(c->src.proj, *doc, *len, &c->out, err))
			return -1;
		*doc = bson_get_data(&c->out);
		*len = c->out.len;
	}
	return 1;
}

static int stash(struct mdoor_cursor *c, const uint8_t *doc, uint32_t len)
{
	if (len > c->stash_cap) {
		uint8_t *p = realloc(c->stash, len);

		if (!p)
			return -1;
		c->stash = p;
		c->stash_cap = len;
	}
	memmove(c->stash, doc, len);
	c->stash_len = len;
	c->stashed = true;
	return 0;
}

/* ===================== life ===================== */

/* The pause mql_agg_set_pause asks about: c's scan's slice ran out. */
static bool cursor_slice_over(void *ctx)
{
	struct mdoor_cursor *c = ctx;

	return c->d->store.scan_slice_over(c->src.scan);
}

struct mdoor_cursor *mdoor_cursor_new(struct mdoor_conn *mc, const char *db,
				      const char *coll,
				      struct mdoor_cursor_src *src,
				      struct mql_error *err)
{
	/* libbson's types in it ask for 128-byte alignment */
	struct mdoor_cursor *c = BSON_ALIGNED_ALLOC0(struct mdoor_cursor);

	if (!c) {
		mdoor_err(err, MDOOR_ExceededMemoryLimit, "out of memory");
		goto fail;
	}
	c->d = mc->d;
	c->src = *src;
	memset(src, 0, sizeof(*src));
	c->budget_ms = c->src.max_time_ms;
	work_start(c);
	bson_init(&c->out);
	snprintf(c->ns, sizeof(c->ns), "%s.%s", db, coll);
	/* A pipeline the scan did whole (a lone $match) is kept for its
	 * filter, which the scan uses, and not run. */
	if (c->src.pipe &&
	    c->src.pipe_from < mql_pipeline_nstages(c->src.pipe) &&
	    mql_agg_open(c->src.pipe, c->src.pipe_from, from_store, c, &c->agg,
			 err)) {
		mdoor_cursor_free(mc->d, c);
		return NULL;
	}
	if (c->agg) {
		struct mql_agg_foreign f;

		mdoor_foreign_init(&c->foreign, mc->d, db, c->src.scan, &f);
		mql_agg_set_foreign(c->agg, &f);
		/* its stages pause when the scan's slice ran out (never
		 * before mdoor_cursor_slice gave it one) */
		if (c->src.scan && mc->d->store.scan_slice_over)
			mql_agg_set_pause(c->agg, cursor_slice_over, c);
		if (c->src.stream_group)
			mql_agg_stream_group(c->agg);
	}
	return c;
fail:
	if (src->scan)
		mc->d->store.scan_close(src->scan);
	mql_pipeline_free(src->pipe);
	mql_project_free(src->proj);
	mql_match_free(src->filter);
	mql_sort_free(src->sort);
	if (src->list)
		bson_destroy(src->list);
	memset(src, 0, sizeof(*src));
	return NULL;
}

void mdoor_cursor_free(struct mdoor *d, struct mdoor_cursor *c)
{
	if (!c)
		return;
	if (c->mem) { /* a read not registered, counted as it paused */
		pthread_mutex_lock(&d->lock);
		d->mem -= c->mem;
		pthread_mutex_unlock(&d->lock);
	}
	if (c->agg)
		mql_agg_close(c->agg);
	if (c->src.scan)
		d->store.scan_close(c->src.scan);
	mql_pipeline_free(c->src.pipe);
	mql_project_free(c->src.proj);
	mql_match_free(c->src.filter);
	mql_sort_free(c->src.sort);
	if (c->src.list)
		bson_destroy(c->src.list);
	bson_destroy(&c->out);
	free(c->stash);
	bson_free(c);
}

/* ===================== the registry (d->lock held) ===================== */

static struct mdoor_cursor **bucket(struct mdoor *d, uint64_t id)
{
	return &d->buckets[(id * 0x9e3779b97f4a7c15ull) >> 32 &
			   (d->nbuckets - 1)];
}

static struct mdoor_cursor *lookup(struct mdoor *d, uint64_t id)
{
	for (struct mdoor_cursor *c = *bucket(d, id); c; c = c->hnext)
		if (c->id == id)
			return c;
	return NULL;
}

static void unlink_owner(struct mdoor_cursor *c)
{
	if (!c->owner)
		return;
	if (c->oprev)
		c->oprev->onext = c->onext;
	else
		c->owner->cursors = c->onext;
	if (c->onext)
		c->onext->oprev = c->oprev;
	c->owner->ncursors--;
	c->owner = NULL;
}

static void unregister(struct mdoor *d, struct mdoor_cursor *c)
{
	struct mdoor_cursor **pp = bucket(d, c->id);

	while (*pp != c)
		pp = &(*pp)->hnext;
	*pp = c->hnext;
	unlink_owner(c);
	d->ncursors--;
	d->mem -= c->mem;
	c->mem = 0;
	c->registered = false;
	/* serverStatus's metrics.cursor.open.total: the cursors open now */
	atomic_fetch_sub_explicit(&d->c_cursors_open, 1, memory_order_relaxed);
}

static int do_register(struct mdoor_conn *mc, struct mdoor_cursor *c,
		       struct mql_error *err)
{
	struct mdoor *d = mc->d;
	uint64_t id;

	if (d->ncursors >= d->max_cursors)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "too many open cursors (%zu): read cursors "
				 "to their end or kill them",
				 d->max_cursors);
	if (mc->ncursors >= d->max_conn_cursors)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "too many open cursors on this connection "
				 "(%zu): read cursors to their end or kill "
				 "them",
				 d->max_conn_cursors);
	do {
		if (RAND_bytes((uint8_t *)&id, sizeof(id)) != 1)
			return mdoor_err(err, MQL_InternalError,
					 "no random bytes for a cursor id");
		id &= INT64_MAX;
	} while (!id || lookup(d, id));
	c->id = id;
	c->hnext = *bucket(d, id);
	*bucket(d, id) = c;
	c->owner = mc;
	c->oprev = NULL;
	c->onext = mc->cursors;
	if (mc->cursors)
		mc->cursors->oprev = c;
	mc->cursors = c;
	mc->ncursors++;
	d->ncursors++;
	c->registered = true;
	c->busy = true;
	atomic_fetch_add_explicit(&d->c_cursors_open, 1, memory_order_relaxed);
	return 0;
}

/* Count what c holds now (its pipeline, its stash, and extra bytes) in
 * d->mem, d->lock held: true past the bound. */
static bool recount(struct mdoor *d, struct mdoor_cursor *c, size_t extra)
{
	size_t mem = (c->agg ? mql_agg_mem(c->agg) : 0) + c->stash_cap + extra;

	d->mem += mem - c->mem;
	c->mem = mem;
	return d->mem > d->cursor_mem;
}

/* Give a cursor back after a batch; -1 (it was killed, or its memory
 * would pass the bound: freed) or 0. */
static int checkin(struct mdoor *d, struct mdoor_cursor *c,
		   struct mql_error *err)
{
	bool drop;

	pthread_mutex_lock(&d->lock);
	drop = recount(d, c, 0) || c->killed;
	if (drop)
		unregister(d, c);
	else {
		c->busy = false;
		c->last_ms = mdoor_now(d);
	}
	pthread_mutex_unlock(&d->lock);
	if (!drop)
		return 0;
	if (c->killed)
		mdoor_err(err, MDOOR_CursorKilled, "cursor id %llu was killed",
			  (unsigned long long)c->id);
	else
		mdoor_err(err, MDOOR_ExceededMemoryLimit,
			  "open cursors hold more than %zu bytes: cursor "
			  "killed",
			  d->cursor_mem);
	mdoor_cursor_free(d, c);
	return -1;
}

int mdoor_cursor_hold(struct mdoor_cursor *c, size_t extra,
		      struct mql_error *err)
{
	struct mdoor *d = c->d;
	bool over;

	pthread_mutex_lock(&d->lock);
	over = recount(d, c, extra);
	pthread_mutex_unlock(&d->lock);
	if (!over)
		return 0;
	return mdoor_err(err, MDOOR_ExceededMemoryLimit,
			 "reads part-way and open cursors hold more than %zu "
			 "bytes: read ended",
			 d->cursor_mem);
}

static void drop_cursor(struct mdoor *d, struct mdoor_cursor *c)
{
	if (c->registered) {
		pthread_mutex_lock(&d->lock);
		unregister(d, c);
		pthread_mutex_unlock(&d->lock);
	}
	mdoor_cursor_free(d, c);
}

void mdoor_cursor_detach(struct mdoor_conn *mc)
{
	struct mdoor *d = mc->d;

	pthread_mutex_lock(&d->lock);
	for (struct mdoor_cursor *c = mc->cursors; c; c = c->onext)
		c->owner = NULL;
	mc->cursors = NULL;
	mc->ncursors = 0;
	pthread_mutex_unlock(&d->lock);
}

void mdoor_cursor_reap(struct mdoor *d, bool all)
{
	struct mdoor_cursor *dead = NULL, *c, **pp;
	uint64_t now = all ? 0 : mdoor_now(d);
	size_t n = 0;

	pthread_mutex_lock(&d->lock);
	for (size_t b = 0; b < d->nbuckets && d->ncursors; b++) {
		for (pp = &d->buckets[b]; (c = *pp);) {
			if (!all && (c->busy ||
				     now - c->last_ms < d->cursor_timeout_ms)) {
				pp = &c->hnext;
				continue;
			}
			unregister(d, c);
			c->hnext = dead;
			dead = c;
			n++;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (!all)
		atomic_fetch_add_explicit(&d->c_cursors_timed_out, n,
					  memory_order_relaxed);
	while ((c = dead)) {
		dead = c->hnext;
		mdoor_cursor_free(d, c);
	}
}

/* ===================== batches ===================== */

static void append_doc(bson_t *arr, uint32_t i, const uint8_t *doc,
		       uint32_t len)
{
	char key[16];
	const char *k;
	size_t kl = bson_uint32_to_string(i, &k, key, sizeof(key));
	bson_t b;

	bson_init_static(&b, doc, len);
	bson_append_document(arr, k, (int)kl, &b);
}

/* Fill the batch array: 0, -1, or MDOOR_YIELD (the slice ran out; b
 * keeps what it holds, and the next call goes on). */
static int fill(struct mdoor_rbatch *b, struct mql_error *err)
{
	struct mdoor_cursor *c = b->c;
	const uint8_t *doc;
	uint32_t len;
	int rc;

	while (!b->full && (b->want < 0 || b->n < b->want)) {
		rc = mdoor_cursor_next(c, &doc, &len, err);
		if (rc == MDOOR_PAUSE)
			return MDOOR_YIELD;
		if (rc < 0)
			return -1;
		if (rc == 0)
			return 0;
		if (b->n > 0 && b->bytes + len > MDOOR_MAX_BSON)
			return stash(c, doc, len)
				   ? mdoor_err(err, MDOOR_ExceededMemoryLimit,
					       "out of memory")
				   : 0;
		append_doc(&b->arr, b->n++, doc, len);
		b->bytes += len;
	}
	b->full = true;
	/* Full: is there more?  A cursor with nothing left says id 0; one
	 * whose look ahead pauses stays open (its getMore may find none). */
	if (b->n > 0 && !c->eof) {
		rc = mdoor_cursor_next(c, &doc, &len, err);
		if (rc < 0)
			return -1;
		if (rc == 1 && stash(c, doc, len))
			return mdoor_err(err, MDOOR_ExceededMemoryLimit,
					 "out of memory");
	}
	return 0;
}

void mdoor_cursor_slice(struct mdoor_cursor *c)
{
	if (c->src.scan && c->d->store.scan_slice)
		c->d->store.scan_slice(c->src.scan, MDOOR_SLICE_MS);
	if (c->agg)
		mdoor_foreign_slice(&c->foreign);
}

int mdoor_yield(struct mdoor_req *r, mdoor_cmd_fn cont)
{
	r->cont = cont;
	return MDOOR_YIELD;
}

void mdoor_read_abandon(struct mdoor_req *r)
{
	struct mdoor_rbatch *b = &r->rb;

	if (!b->c)
		return;
	if (b->open) {
		bson_append_array_end(&b->cur, &b->arr);
		bson_append_document_end(&r->reply, &b->cur);
		b->open = false;
	}
	drop_cursor(r->mc->d, b->c);
	b->c = NULL;
}

/* Fill r's batch (a slice at a time) and close its reply. */
static int reply_go(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mdoor_rbatch *b = &r->rb;
	struct mdoor_cursor *c = b->c;
	int rc;
	bool open;

	mdoor_cursor_slice(c);
	rc = fill(b, err);
	if (rc == MDOOR_YIELD && !mdoor_cursor_hold(c, b->bytes, err))
		return mdoor_yield(r, reply_go);
	if (rc == MDOOR_YIELD)
		rc = -1;
	b->c = NULL;
	b->open = false;
	work_end(c);
	bson_append_array_end(&b->cur, &b->arr);
	open = rc == 0 && !b->single && !(c->eof && !c->stashed);
	if (open && !c->registered) {
		pthread_mutex_lock(&d->lock);
		rc = do_register(r->mc, c, err);
		pthread_mutex_unlock(&d->lock);
		open = rc == 0;
	}
	if (open && checkin(d, c, err)) {
		rc = -1;
		open = false;
		c = NULL; /* freed */
	}
	BSON_APPEND_INT64(&b->cur, "id", open ? (int64_t)c->id : 0);
	BSON_APPEND_UTF8(&b->cur, "ns", c ? c->ns : "");
	bson_append_document_end(&r->reply, &b->cur);
	if (!open && c)
		drop_cursor(d, c);
	return rc;
}

int mdoor_cursor_reply(struct mdoor_req *r, struct mdoor_cursor *c,
		       int64_t batch, bool first, bool single,
		       struct mql_error *err)
{
	struct mdoor_rbatch *b = &r->rb;
	int rc;

	if (!first)
		work_start(c); /* idle time between getMores does not count */
	if (c->budget_ms < 0) {
		rc = over_time(c, err);
		drop_cursor(r->mc->d, c);
		return rc;
	}
	b->c = c;
	b->want = batch;
	b->n = 0;
	b->bytes = 0;
	b->single = single;
	b->full = false;
	b->open = true;
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "cursor", &b->cur);
	BSON_APPEND_ARRAY_BEGIN(&b->cur, first ? "firstBatch" : "nextBatch",
				&b->arr);
	return reply_go(r, err);
}

/* ===================== getMore, killCursors ===================== */

/* Check out cursor id for a getMore on ns: 0, or -1 with err. */
static int checkout(struct mdoor *d, uint64_t id, const char *ns,
		    struct mdoor_cursor **out, struct mql_error *err)
{
	struct mdoor_cursor *c;
	int rc = 0;

	pthread_mutex_lock(&d->lock);
	c = lookup(d, id);
	if (!c)
		rc = mdoor_err(err, MDOOR_CursorNotFound,
			       "cursor id %llu not found",
			       (unsigned long long)id);
	else if (c->busy)
		rc = mdoor_err(err, MDOOR_CursorInUse,
			       "cursor id %llu is already in use",
			       (unsigned long long)id);
	else if (strcmp(c->ns, ns))
		rc = mdoor_err(err, MDOOR_Unauthorized,
			       "Requested getMore on namespace '%s', but "
			       "cursor belongs to a different namespace %s",
			       ns, c->ns);
	else
		c->busy = true;
	pthread_mutex_unlock(&d->lock);
	*out = c;
	return rc;
}

static int cmd_getmore(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"collection", MDOOR_T_STRING, true},
	    {"batchSize", MDOOR_T_NUM, false},
	    {"term", MDOOR_T_NUM, false},
	    {"lastKnownCommittedOpTime", MDOOR_T_OBJECT, false},
	};
	mdoor_av a[4];
	bson_iter_t it;
	struct mdoor_cursor *c;
	char ns[MDOOR_NAME_MAX];
	int64_t batch = -1;

	if (mdoor_args(r, spec, 4, a, err))
		return -1;
	mdoor_cmd_value(r, &it);
	if (!BSON_ITER_HOLDS_INT64(&it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "BSON field 'getMore.getMore' is the wrong "
				 "type '%s', expected type 'long'",
				 mql_type_name(bson_iter_type(&it)));
	/* listCollections' cursors are "db.$cmd.listCollections" */
	if (strncmp(bson_iter_utf8(&a[0].it, NULL), "$cmd.", 5) &&
	    mdoor_check_coll(r->db, bson_iter_utf8(&a[0].it, NULL), err))
		return -1;
	if (mdoor_has(&a[1].it) && mdoor_arg_int64(r, &a[1].it, &batch, err))
		return -1;
	if (batch < 0 && mdoor_has(&a[1].it))
		return mdoor_err(err, MQL_BadValue,
				 "Batch size for getMore must be positive, "
				 "but received: %lld",
				 (long long)batch);
	if (batch == 0)
		batch = -1;
	snprintf(ns, sizeof(ns), "%s.%s", r->db,
		 bson_iter_utf8(&a[0].it, NULL));
	if (checkout(r->mc->d, (uint64_t)bson_iter_as_int64(&it), ns, &c, err))
		return -1;
	return mdoor_cursor_reply(r, c, batch, false, false, err);
}

static void append_id(bson_t *arr, uint32_t *n, int64_t id)
{
	char key[16];
	const char *k;
	size_t kl = bson_uint32_to_string((*n)++, &k, key, sizeof(key));

	bson_append_int64(arr, k, (int)kl, id);
}

static int cmd_killcursors(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"cursors", MDOOR_T_ARRAY, true},
	};
	struct mdoor *d = r->mc->d;
	struct mdoor_cursor *dead = NULL, *c;
	mdoor_av a[1];
	bson_iter_t it;
	bson_t killed, missing, arr;
	uint32_t nk = 0, nm = 0;
	const char *coll;
	char ns[MDOOR_NAME_MAX];

	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 1, a, err))
		return -1;
	snprintf(ns, sizeof(ns), "%s.%s", r->db, coll);
	bson_iter_recurse(&a[0].it, &it);
	while (bson_iter_next(&it))
		if (!BSON_ITER_HOLDS_INT64(&it))
			return mdoor_err(err, MQL_TypeMismatch,
					 "BSON field 'killCursors.cursors.%s' "
					 "is the wrong type '%s', expected "
					 "type 'long'",
					 bson_iter_key(&it),
					 mql_type_name(bson_iter_type(&it)));
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "cursorsKilled", &killed);
	bson_init(&missing);
	bson_iter_recurse(&a[0].it, &it);
	pthread_mutex_lock(&d->lock);
	while (bson_iter_next(&it)) {
		int64_t id = bson_iter_as_int64(&it);

		c = lookup(d, (uint64_t)id);
		if (!c || strcmp(c->ns, ns)) {
			append_id(&missing, &nm, id);
			continue;
		}
		append_id(&killed, &nk, id);
		if (c->busy) { /* its getMore frees it */
			c->killed = true;
			continue;
		}
		unregister(d, c);
		c->hnext = dead;
		dead = c;
	}
	pthread_mutex_unlock(&d->lock);
	while ((c = dead)) {
		dead = c->hnext;
		mdoor_cursor_free(d, c);
	}
	bson_append_array_end(&r->reply, &killed);
	BSON_APPEND_ARRAY(&r->reply, "cursorsNotFound", &missing);
	bson_destroy(&missing);
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "cursorsAlive", &arr);
	bson_append_array_end(&r->reply, &arr);
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "cursorsUnknown", &arr);
	bson_append_array_end(&r->reply, &arr);
	return 0;
}

const struct mdoor_cmd mdoor_cmds_cursor[] = {
    {"getMore", cmd_getmore, 0, MDOOR_CNT_GETMORE},
    {"killCursors", cmd_killcursors, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
