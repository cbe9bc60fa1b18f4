/* cmd_docfind.c - the native protocol's query form, DOCFIND (49;
 * docs/protocol.md, "Documents"): a collection's documents matching a
 * filter, projected, sorted, skipped and limited, in pages bounded as
 * SCAN's are, resumable with a cursor the client sends back.
 *
 * No state is kept between pages: the cursor is the position itself.
 * Without a sort the documents come in _id order and the cursor holds the
 * key to go on from (and how many were skipped and returned so far), so a
 * page costs what it reads; a page also ends after examining 10,000
 * documents, or after a slice of time (MDOOR_SLICE_MS, the door's: one
 * document's match may take 25 to 150 ms), perhaps with nothing
 * in it (a filter that matches little, or slowly, still answers
 * promptly and does not hold the io thread).  With a sort the query runs again for each
 * page through kvd/mongo's pipeline ($sort, $skip past what was returned,
 * $limit to the page), a top-k held within the sort's memory limit
 * (MongoDB's 100 MiB: 292 past it); its scan reads a slice at a time, and
 * between slices the page waits on the connection (c->nread, the request
 * answered, the connection's later requests waiting) while the io thread
 * serves its other connections, as the door's reads do.  The page is
 * written once the sort has its first document (the scan has ended then),
 * so a slice never leaves half a reply in the output.  Filters, projections and sorts are
 * kvd/mongo's, as the MongoDB door's find has them; the scans are
 * kvd/doc's and the door's store's (doc_mdoor.c).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cmd.h"
#include "cmd_doc.h"
#include "doc/doc.h"
#include "doc/doc_mdoor.h"
#include "kv_status.h"
#include "mongo/mql_agg.h"
#include "mongo/mql_project.h"
#include "net/conn.h"
#include "net/loop.h"

#define BATCH_DEFAULT 100
#define EXAMINE_MAX 10000 /* documents one unsorted page examines */
#define SCAN_STEP 64	  /* documents one store read examines */
#define CURSOR_HDR 17	  /* kind, skipped, taken */

enum {
	ARG_FILTER = 2,
	ARG_PROJ,
	ARG_SORT,
	ARG_SKIP,
	ARG_LIMIT,
	ARG_BATCH,
	ARG_CURSOR,
	NARGS
};

struct find {
	struct kvd_conn *c;
	struct kv_mp_obj a[NARGS]; /* every argument (nil when absent) */
	struct mql_match *filter;
	struct mql_project *proj;
	uint64_t skip, limit, batch; /* limit 0: none */
	uint64_t skipped, taken;     /* so far, over every page */
	uint32_t cid;
	struct kvdoc_scan s;
	/* the page */
	size_t off, items, max; /* its start, item count's place, bytes */
	uint32_t n;
	uint64_t examined;
	uint64_t slice_end; /* kvd_coarse_ms when an unsorted page ends */
	int full, ended;    /* the page is full; the limit is reached */
	int spent;	    /* the page's time is up */
	int begun;	    /* a page is started in the output */
	uint8_t resume[KVDOC_KEY_MAX];
	size_t rlen;
	struct mql_error e;
	/* sorted: the page's read, kept between slices */
	unsigned op;
	uint8_t *own; /* the filter, projection and sort bytes, copied */
	struct mql_pipeline *p;
	struct mql_agg_cursor *cur;
	void *scan;
	size_t held; /* counted in pages_held */
};

/* Returned by a sorted page that gave its thread back. */
#define YIELDED (-2)

/* What the sorted pages waiting for their next slice hold together (their
 * sorts' documents), at most PAGES_HELD_MAX, as the MongoDB door's reads
 * part-way count in its cursor memory (1 GiB): many connections each
 * part-way through a large sort end with 146 past it, rather than hold a
 * sort's 100 MiB each. */
#define PAGES_HELD_MAX ((size_t)1 << 30)
#define EXCEEDED_MEMORY_LIMIT 146 /* MongoDB's ExceededMemoryLimit */
static _Atomic size_t pages_held;

static void find_free(struct find *f)
{
	if (f->held)
		atomic_fetch_sub(&pages_held, f->held);
	if (f->cur)
		mql_agg_close(f->cur);
	if (f->scan)
		doc_mdoor_store.scan_close(f->scan);
	mql_pipeline_free(f->p);
	mql_match_free(f->filter);
	mql_project_free(f->proj);
	free(f->own);
	free(f);
}

/* PAGES_HELD_MAX, or KVD_PAGES_HELD_MAX in the environment (tests make
 * it small). */
static size_t held_max(void)
{
	static _Atomic size_t max;
	size_t m = atomic_load_explicit(&max, memory_order_relaxed);
	const char *e;

	if (m)
		return m;
	e = getenv("KVD_PAGES_HELD_MAX");
	m = e ? strtoull(e, NULL, 10) : 0;
	m = m ? m : PAGES_HELD_MAX;
	atomic_store_explicit(&max, m, memory_order_relaxed);
	return m;
}

/* A page that gives its thread back counts what its sort holds:
 * YIELDED, or KV_DOC_ERROR (146) past held_max(). */
static int hold(struct find *f)
{
	size_t mem = mql_agg_mem(f->cur), delta = mem - f->held; /* mod 2^64 */
	size_t total = atomic_fetch_add(&pages_held, delta) + delta;

	f->held = mem;
	if (total <= held_max())
		return YIELDED;
	mql_error_set(&f->e, EXCEEDED_MEMORY_LIMIT,
		      "sorted pages part-way hold more than %zu bytes: page "
		      "ended",
		      held_max());
	return KV_DOC_ERROR;
}

/* A sorted page may outlive its request's bytes (the input moves on):
 * the filter, projection and sort it compiles are copies. */
static int own_args(struct find *f)
{
	size_t n = 0;

	for (unsigned i = ARG_FILTER; i <= ARG_SORT; i++)
		n += f->a[i].type == KV_MP_NIL ? 0 : f->a[i].len;
	if (!(f->own = malloc(n ? n : 1)))
		return KV_INTERNAL;
	n = 0;
	for (unsigned i = ARG_FILTER; i <= ARG_SORT; i++) {
		if (f->a[i].type == KV_MP_NIL)
			continue;
		memcpy(f->own + n, f->a[i].p, f->a[i].len);
		f->a[i].p = f->own + n;
		n += f->a[i].len;
	}
	return KV_OK;
}

/* All arguments into f->a (absent ones nil): KV_OK or KV_BAD_ARGS. */
static int take_args(struct find *f, struct kvd_req *r)
{
	struct kvd_argit it;

	for (unsigned i = 0; i < NARGS; i++)
		f->a[i].type = KV_MP_NIL;
	kvd_argit_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc && i < NARGS; i++)
		kvd_argit_next(&it, &f->a[i]);
	for (unsigned i = ARG_FILTER; i <= ARG_SORT; i++)
		if (f->a[i].type != KV_MP_NIL && !kvd_arg_is_bytes(&f->a[i]))
			return KV_BAD_ARGS;
	for (unsigned i = ARG_SKIP; i <= ARG_BATCH; i++)
		if (f->a[i].type != KV_MP_NIL && f->a[i].type != KV_MP_UINT)
			return KV_BAD_ARGS;
	f->skip = f->a[ARG_SKIP].type == KV_MP_UINT ? f->a[ARG_SKIP].v.u : 0;
	f->limit = f->a[ARG_LIMIT].type == KV_MP_UINT ? f->a[ARG_LIMIT].v.u : 0;
	f->batch = f->a[ARG_BATCH].type == KV_MP_UINT ? f->a[ARG_BATCH].v.u
						      : BATCH_DEFAULT;
	if (f->batch == 0 || f->batch > KV_SCAN_MAX_LIMIT ||
	    f->skip > INT64_MAX / 2 || f->limit > INT64_MAX / 2)
		return KV_BAD_ARGS;
	return KV_OK;
}

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

/* Filter and projection compiled: KV_OK, or KV_DOC_ERROR with f->e. */
static int compile(struct find *f)
{
	const struct kv_mp_obj *q = &f->a[ARG_FILTER], *p = &f->a[ARG_PROJ];
	int rc;

	for (unsigned i = ARG_FILTER; i <= ARG_SORT; i++)
		if (f->a[i].type != KV_MP_NIL &&
		    (rc = kvd_doc_bson(&f->a[i], MQL_MAX_INPUT_DEPTH, &f->e)))
			return rc;
	if (q->type == KV_MP_NIL
		? mql_match_compile(empty_doc, 5, &f->filter, &f->e)
		: mql_match_compile(q->p, q->len, &f->filter, &f->e))
		return KV_DOC_ERROR;
	if (p->type != KV_MP_NIL && p->len > 5 &&
	    mql_project_compile(p->p, p->len, MQL_PROJECT_FIND, &f->proj,
				&f->e))
		return KV_DOC_ERROR;
	return KV_OK;
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* The cursor sent back: [u8 'U' or 'S'][u64 skipped][u64 taken] and, for
 * 'U', the key to go on from (its collection's id first). */
static int take_cursor(struct find *f, int sorted)
{
	const struct kv_mp_obj *o = &f->a[ARG_CURSOR];
	const uint8_t *p = o->p;
	size_t klen;

	if (o->type == KV_MP_NIL)
		return KV_OK;
	if (!kvd_arg_is_bytes(o) || o->len < CURSOR_HDR ||
	    p[0] != (sorted ? 'S' : 'U'))
		return KV_BAD_ARGS;
	f->skipped = be64(p + 1);
	f->taken = be64(p + 9);
	klen = o->len - CURSOR_HDR;
	if (sorted)
		return klen ? KV_BAD_ARGS : KV_OK;
	if (klen < 4 || klen > KVDOC_KEY_MAX ||
	    kv_load_be32(p + CURSOR_HDR) != f->cid)
		return KV_BAD_ARGS;
	memcpy(f->s.next, p + CURSOR_HDR, klen);
	f->s.nlen = klen;
	return KV_OK;
}

/* ---- the page ---- */

static void page_begin(struct find *f)
{
	struct kvd_conn *c = f->c;

	f->max = c->io->srv->cfg->max_frame / 2;
	if (f->max > (8u << 20)) /* as SCAN's pages */
		f->max = 8u << 20;
	f->off = kvd_reply_begin(c);
	f->begun = 1;
	kv_mp_array(&c->out, 3);
	kv_mp_uint(&c->out, KV_OK);
	f->items = c->out.len; /* the count is known at the end */
	kv_buf_append(&c->out, "\xdd\0\0\0\0", 5);
}

/* Emit doc (projected): 1 emitted, 0 it does not fit (the page is full),
 * -1 with f->e. */
static int emit(struct find *f, const uint8_t *doc, uint32_t len)
{
	struct kv_buf *out = &f->c->out;
	bson_t pj = BSON_INITIALIZER;

	if (f->proj) {
		if (mql_project_apply(f->proj, doc, len, &pj, &f->e)) {
			bson_destroy(&pj);
			return -1;
		}
		doc = bson_get_data(&pj);
		len = pj.len;
	}
	if (f->n >= f->batch ||
	    (f->n > 0 && out->len - f->off + len + 5 > f->max)) {
		bson_destroy(&pj);
		f->full = 1;
		return 0;
	}
	kv_mp_bin(out, doc, len);
	bson_destroy(&pj);
	f->n++;
	f->taken++;
	return 1;
}

/* Close the page with cursor (kind, key) or nil (kind 0). */
static int page_end(struct find *f, char kind)
{
	struct kvd_conn *c = f->c;
	uint8_t cur[CURSOR_HDR + KVDOC_KEY_MAX];

	f->begun = 0;
	kv_store_be32(c->out.data + f->items + 1, f->n);
	if (kind) {
		cur[0] = (uint8_t)kind;
		put_be64(cur + 1, f->skipped);
		put_be64(cur + 9, f->taken);
		memcpy(cur + CURSOR_HDR, f->resume, f->rlen);
		kv_mp_bin(&c->out, cur, CURSOR_HDR + f->rlen);
	} else {
		kv_mp_nil(&c->out);
	}
	if (c->out.err ||
	    c->out.len - f->off - KV_FRAME_HDR > c->io->srv->cfg->max_frame) {
		c->out.len = f->off;
		return c->out.err ? KV_INTERNAL : KV_REPLY_TOO_LARGE;
	}
	kvd_reply_end(c, f->off);
	return KV_OK;
}

/* ---- without a sort: _id order, from the cursor's key ---- */

static void take_doc(struct find *f, struct kv_slice key, struct kv_slice val,
		     unsigned type)
{
	int rc;

	f->examined++;
	if (f->full || f->ended || f->e.code || type != KVD_VT_DOC ||
	    !mql_match_doc(f->filter, val.p, (uint32_t)val.n, NULL))
		return;
	if (f->skipped < f->skip) {
		f->skipped++;
		return;
	}
	if (f->limit && f->taken >= f->limit) {
		f->ended = 1;
		return;
	}
	rc = emit(f, val.p, (uint32_t)val.n);
	if (rc == 0 && key.n <= sizeof(f->resume)) { /* go on from here */
		memcpy(f->resume, key.p, key.n);
		f->rlen = key.n;
	}
	/* an error is f->e: the batch reads on, emitting nothing */
}

/* The clock, then the document: past the page's slice the scan stops
 * before this document (where the next page starts), once the page
 * examined one. */
static int scan_doc(void *arg, struct kv_slice key, struct kv_slice val,
		    unsigned type, uint64_t exp)
{
	struct find *f = arg;

	(void)exp;
	if (f->examined && !f->full && !f->ended && !f->e.code &&
	    kvd_coarse_ms() >= f->slice_end) {
		f->spent = 1;
		return KVD_SCAN_STOP;
	}
	take_doc(f, key, val, type);
	return 0;
}

static int find_unsorted(struct find *f)
{
	struct kvd_io *io = f->c->io;
	const bson_value_t *id;

	page_begin(f);
	f->slice_end = kvd_coarse_ms() + MDOOR_SLICE_MS;
	if (mql_match_is_id_eq(f->filter, &id) && !f->s.nlen) {
		struct kv_slice doc;
		size_t klen;
		int rc;

		if (kvdoc_key(f->cid, id, f->resume, &klen, &f->e))
			return KV_DOC_ERROR;
		rc = kvdoc_get(io->reader, io->srv->nshards, f->resume, klen,
			       io->now_ms, &doc);
		if (rc && rc != KV_NOT_FOUND)
			return rc;
		if (rc == KV_OK)
			scan_doc(f, (struct kv_slice){f->resume, klen}, doc,
				 KVD_VT_DOC, 0);
		return f->e.code ? KV_DOC_ERROR : page_end(f, 0);
	}
	while (!f->s.done && !f->full && !f->ended && !f->spent &&
	       f->examined < EXAMINE_MAX) {
		unsigned step = EXAMINE_MAX - f->examined < SCAN_STEP
				    ? (unsigned)(EXAMINE_MAX - f->examined)
				    : SCAN_STEP;

		if (kvdoc_scan_batch(&f->s, io->reader, step, io->now_ms,
				     scan_doc, f))
			return KV_INTERNAL;
		if (f->e.code)
			return KV_DOC_ERROR;
	}
	if (f->ended || (f->limit && f->taken >= f->limit) ||
	    (!f->full && f->s.done))
		return page_end(f, 0);
	if (!f->full) { /* examined enough: on from the scan's next key */
		memcpy(f->resume, f->s.next, f->s.nlen);
		f->rlen = f->s.nlen;
	}
	return page_end(f, 'U');
}

/* ---- with a sort: the pipeline, from the start each page ---- */

/* [{$sort: sort}, {$skip: n}?, {$limit: n}] */
static int pipeline(struct find *f, struct mql_pipeline **p)
{
	const struct kv_mp_obj *so = &f->a[ARG_SORT];
	uint64_t skip = f->skip + f->taken, want = f->batch + 1;
	bson_t arr = BSON_INITIALIZER, st, sd;
	char k[4] = "0";
	int rc;

	if (f->limit && f->limit - f->taken < want)
		want = f->limit - f->taken;
	if (!bson_init_static(&sd, so->p, so->len))
		return mql_error_set(&f->e, MQL_InvalidBSON, "invalid sort");
	BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &st);
	BSON_APPEND_DOCUMENT(&st, "$sort", &sd);
	bson_append_document_end(&arr, &st);
	if (skip) {
		k[0]++;
		BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &st);
		BSON_APPEND_INT64(&st, "$skip", (int64_t)skip);
		bson_append_document_end(&arr, &st);
	}
	k[0]++;
	BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &st);
	BSON_APPEND_INT64(&st, "$limit", (int64_t)want);
	bson_append_document_end(&arr, &st);
	rc = mql_pipeline_compile(bson_get_data(&arr), arr.len, NULL, p, &f->e);
	bson_destroy(&arr);
	return rc;
}

static int source(void *ctx, const uint8_t **doc, uint32_t *len,
		  struct mql_error *err)
{
	return doc_mdoor_store.scan_next(ctx, doc, len, err);
}

/* The page once the pipeline has its first document (the sort read its
 * whole input: nothing pauses after it), or YIELDED. */
static int sorted_go(struct find *f)
{
	const uint8_t *doc;
	uint32_t len;
	int got = mql_agg_next(f->cur, &doc, &len, &f->e);

	if (got == MQL_AGG_PAUSE)
		return hold(f);
	if (got < 0)
		return KV_DOC_ERROR;
	page_begin(f);
	while (got == 1) {
		if (emit(f, doc, len) < 0)
			return KV_DOC_ERROR;
		if (f->full)
			break;
		got = mql_agg_next(f->cur, &doc, &len, &f->e);
	}
	if (got == MQL_AGG_PAUSE) /* cannot: the scan has ended */
		got = mql_error_set(&f->e, MQL_InternalError,
				    "a sorted page paused after its first "
				    "document");
	if (got < 0)
		return KV_DOC_ERROR;
	return page_end(f, f->full ? 'S' : 0);
}

static int find_sorted(struct find *f, const char *db, const char *coll)
{
	struct mdoor_query q = {.db = db, .coll = coll, .filter = f->filter};

	if (f->limit && f->taken >= f->limit) {
		page_begin(f);
		return page_end(f, 0);
	}
	if (pipeline(f, &f->p))
		return KV_DOC_ERROR;
	doc_mdoor_enter(f->c->io);
	if (doc_mdoor_store.scan(NULL, &q, &f->scan,
				 &(struct mdoor_scan_info){0}, &f->e) ||
	    mql_agg_open(f->p, 0, source, f->scan, &f->cur, &f->e))
		return KV_DOC_ERROR;
	doc_mdoor_store.scan_slice(f->scan, MDOOR_SLICE_MS);
	return sorted_go(f);
}

/* A page's end: an error reply for KV_DOC_ERROR (behind earlier writes'
 * replies, counted), a page given up cut from the output. */
static int answer(struct find *f, int rc)
{
	struct kvd_conn *c = f->c;

	if (f->begun) /* a page given up */
		c->out.len = f->off;
	f->begun = 0;
	if (rc == KV_DOC_ERROR) {
		size_t mark = c->out.len;

		kvd_count_now(&c->io->stats, f->op, KV_DOC_ERROR);
		kvd_doc_reply_error(c, &f->e);
		kvd_conn_defer(c, mark, f->op);
		rc = KVD_ANSWERED;
	}
	return rc;
}

/* DOCFIND: [49, db, coll, filter?, projection?, sort?, skip?, limit?,
 * batch?, cursor?] -> [0, [document, ...], cursor-or-nil] */
int kvd_op_docfind(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	struct find *f = calloc(1, sizeof(*f));
	int sorted, rc, found;

	if (!f)
		return KV_INTERNAL;
	f->c = c;
	f->op = r->op;
	if ((rc = take_args(f, r)) || (rc = kvd_doc_ns(r, db, coll, &f->e)))
		goto out;
	sorted = f->a[ARG_SORT].type != KV_MP_NIL && f->a[ARG_SORT].len > 5;
	if ((sorted && (rc = own_args(f))) || (rc = compile(f)))
		goto out;
	if ((found = kvd_doc_coll(c, db, coll, &f->cid)) < 0) {
		rc = KV_INTERNAL;
		goto out;
	}
	kvdoc_scan_init(&f->s, f->cid);
	if ((rc = take_cursor(f, sorted)))
		goto out;
	if (!found) { /* no collection: no document */
		page_begin(f);
		rc = page_end(f, 0);
	} else {
		rc = sorted ? find_sorted(f, db, coll) : find_unsorted(f);
	}
	if (rc == YIELDED) { /* goes on next turn (kvd_docfind_again) */
		c->nread = f;
		c->stall = STALL_YIELD;
		kvd_io_again(c);
		return KVD_ANSWERED;
	}
out:
	rc = answer(f, rc);
	find_free(f);
	return rc;
}

int kvd_docfind_again(struct kvd_conn *c)
{
	struct find *f = c->nread;
	size_t mark = c->out.len;
	int rc;

	doc_mdoor_enter(c->io);
	doc_mdoor_store.scan_slice(f->scan, MDOOR_SLICE_MS);
	kvd_reader_pin(c->io->reader);
	rc = sorted_go(f);
	kvd_reader_unpin(c->io->reader);
	if (rc == YIELDED)
		return 0;
	c->nread = NULL;
	rc = answer(f, rc);
	if (rc != KVD_ANSWERED) {
		kvd_count_now(&c->io->stats, f->op, rc);
		if (rc != KV_OK)
			kvd_reply_status(c, rc, NULL);
		kvd_conn_defer(c, mark, f->op);
	}
	find_free(f);
	return 1;
}

void kvd_docfind_abandon(struct kvd_conn *c)
{
	if (!c->nread)
		return;
	doc_mdoor_enter(c->io);
	find_free(c->nread);
	c->nread = NULL;
}
