/* doc_plan.c - the planner of the MongoDB door over kvd's documents
 * (doc_plan.h): which ready index serves a query, and its scan.
 *
 * The choice, small and honest: a hint names the index (by key pattern or
 * by name);
 * otherwise every ready index that is neither sparse nor partial (they may
 * lack documents the filter matches) is weighed by the number of its
 * leading fields the filter's equality, $in and range predicates narrow
 * (mql_index_bounds), and one that narrows none is still taken when it
 * gives the sort's order; the best wins, and with none the query is a
 * collection scan.  The scan reads the index's intervals in order through
 * the store's scan, which merges every shard in key order (so documents
 * come in index order), fetches each entry's document from its shard,
 * matches the whole filter against it (bounds may be wider than the
 * filter, and a multikey entry's other elements may not match), and
 * yields each document once (an array field gives it several entries).
 * A query with a limit read in the index's order reads no more entries
 * than the limit in its first batch; a batch's documents are looked up
 * before any is matched, so that their loads overlap.
 *
 * Covered: when the index's fields are all top-level and the query reads
 * no other field (its filter, its sort unless the index gives it, and
 * its projection, or nothing for a count), an entry whose value says it
 * gives its document's fields back exactly (index.h, "Covered entries")
 * stands for the document: its fields are decoded from the key and no
 * document is read.  Other entries (arrays, a decimal, entries
 * written before covered values) fetch their documents as before.
 */
#include "doc_plan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "index.h"
#include "kv_status.h"
#include "mongo/mql_project.h"

#define NO_COV UINT32_MAX

/* An index as the planner weighs and scans it: its spec's key pattern,
 * name and kind, and the pattern compiled.  Each io thread keeps the ones
 * it used last (compiling every ready index of a collection for every
 * query cost more than a point lookup through one); a plan holds a count
 * on its own, since a cursor's scan goes on from any io thread.  A copy
 * is found by the index's id and kept only while its spec is the same
 * bytes: ids start again from 1 in a catalog that FLUSHALL emptied or a
 * replica's full resynchronization replaced, and the id of another index
 * must not bring back this one's pattern. */
struct ixc {
	atomic_uint refs;
	uint32_t id;
	uint8_t *spec; /* the whole spec (BSON), to tell reuse of an id */
	size_t slen;
	bool plain; /* neither sparse nor partial */
	char name[128];
	uint8_t *key; /* the key pattern (BSON) */
	size_t klen;
	struct mql_index *ix;
	struct kvdoc_ix_fields f; /* its fields' names (into key), directions */
};

#define SEEN_INLINE 64

struct doc_plan {
	uint32_t id, coll;
	struct ixc *c;
	struct mql_bounds b;
	size_t iv; /* the interval being read */
	uint8_t next[512];
	size_t nlen;
	int done;
	bool sorted;
	bool covered;	/* entries may stand for their documents */
	uint64_t *seen; /* hashes of documents given (open addressing) */
	size_t nseen, cseen;
	/* its first table, in the plan: most queries give a few documents */
	uint64_t seen0[SEEN_INLINE];
	/* a batch's entries: [u16 len][u32 at][document key]..., at the
	 * offset of its document made from the entry in cov, or NO_COV */
	struct kv_buf keys;
	struct kv_buf cov;
	/* and their documents, fetched before any is matched */
	struct fetched *docs;
	size_t cdocs;
	/* a batch a stop cut (KVD_SCAN_STOP): docs[rest..nrest) are still
	 * to give, their slices stale once the turn that fetched them ended
	 * (fetched again by key) */
	size_t rest, nrest;
	int64_t nkeys, ndocs, ngiven;
	/* the documents the door reads at most (mdoor_query.want, when the
	 * plan gives them in the order asked), or 0: the first batch reads
	 * no more entries than that */
	int64_t want;
};

struct fetched {
	const uint8_t *key; /* into keys */
	uint16_t klen;
	struct kv_slice doc; /* valid until the reader's reset */
	bool cov;	     /* doc is in cov (an entry's), not the store's */
};

/* ---- the indexes each thread compiled ---- */

#define IXC_SLOTS 32 /* direct-mapped by index id */

static __thread struct ixc *tl_ixc[IXC_SLOTS];
static pthread_key_t ixc_key;
static pthread_once_t ixc_once = PTHREAD_ONCE_INIT;
static int ixc_key_ok;

static void ixc_unref(struct ixc *c)
{
	if (!c ||
	    atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
	mql_index_free(c->ix);
	free(c->key);
	free(c->spec);
	free(c);
}

/* A thread's compiled indexes go with it (destructors run while its TLS
 * is still there). */
static void ixc_thread_end(void *arg)
{
	struct ixc **slots = arg;

	for (size_t i = 0; i < IXC_SLOTS; i++) {
		ixc_unref(slots[i]);
		slots[i] = NULL;
	}
}

static void ixc_key_init(void)
{
	ixc_key_ok = pthread_key_create(&ixc_key, ixc_thread_end) == 0;
}

/* The key pattern of a spec, and its name. */
static int spec_key(struct kv_slice spec, struct kv_slice *key, char *name,
		    size_t cap, bool *plain)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t n;

	*plain = true;
	key->n = 0;
	if (!bson_iter_init_from_data(&it, spec.p, spec.n))
		return -1;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &n, &d);
			*key = (struct kv_slice){d, n};
		} else if (!strcmp(k, "name") && BSON_ITER_HOLDS_UTF8(&it)) {
			snprintf(name, cap, "%s", bson_iter_utf8(&it, NULL));
		} else if (!strcmp(k, "sparse") ||
			   !strcmp(k, "partialFilterExpression")) {
			*plain = false;
		}
	}
	return key->n ? 0 : -1;
}

/* ix compiled, with one count (the caller's); NULL when its spec has no
 * key pattern, or with err set when the pattern does not compile. */
static struct ixc *ixc_new(const struct kvdoc_ix *ix, struct mql_error *err)
{
	struct ixc *c = calloc(1, sizeof(*c));
	struct kv_slice key;

	if (!c)
		return NULL;
	atomic_init(&c->refs, 1);
	c->id = ix->id;
	if (spec_key(ix->spec, &key, c->name, sizeof(c->name), &c->plain) ||
	    !(c->key = malloc(key.n)) || !(c->spec = malloc(ix->spec.n)) ||
	    mql_index_compile(key.p, (uint32_t)key.n, 0, &c->ix, err)) {
		ixc_unref(c);
		return NULL;
	}
	memcpy(c->key, key.p, key.n);
	c->klen = key.n;
	memcpy(c->spec, ix->spec.p, ix->spec.n);
	c->slen = ix->spec.n;
	kvdoc_ix_fields(c->key, c->klen, &c->f);
	return c;
}

/* The calling thread's compiled copy of ix (its count stays the
 * thread's: take one to keep it), or NULL as ixc_new. */
static struct ixc *ixc_get(const struct kvdoc_ix *ix, struct mql_error *err)
{
	struct ixc **slot = &tl_ixc[ix->id % IXC_SLOTS], *c = *slot;

	if (c && c->id == ix->id && c->slen == ix->spec.n &&
	    !memcmp(c->spec, ix->spec.p, c->slen))
		return c;
	(void)pthread_once(&ixc_once, ixc_key_init);
	if (!ixc_key_ok || pthread_setspecific(ixc_key, tl_ixc))
		return ixc_new(ix, err); /* not kept: a leak otherwise */
	if (!(c = ixc_new(ix, err)))
		return NULL;
	ixc_unref(*slot);
	*slot = c;
	return c;
}

/* ---- choosing ---- */

#define PICK_PATHS 32

struct pick {
	const struct mdoor_query *q;
	/* the paths of the filter's predicates (mql_match_preds), at most
	 * PICK_PATHS; npaths -1: more than that */
	const char *path[PICK_PATHS];
	int npaths;
	const uint8_t *hint; /* a key pattern, or with hname a name */
	uint32_t hlen;
	bool hname;
	struct ixc *best; /* one count held */
	struct mql_bounds b;
	bool follows;
	size_t score;
	struct mql_error *err;
};

/* Does the query's sort follow the index's fields (a prefix of them, in
 * their directions)? */
static bool sort_follows(const struct mdoor_query *q, struct kv_slice key)
{
	bson_iter_t s, k;

	if (!q->sort_bson || q->sort_len <= 5 ||
	    !bson_iter_init_from_data(&s, q->sort_bson, q->sort_len) ||
	    !bson_iter_init_from_data(&k, key.p, key.n))
		return false;
	while (bson_iter_next(&s)) {
		if (!bson_iter_next(&k) ||
		    strcmp(bson_iter_key(&s), bson_iter_key(&k)) ||
		    !BSON_ITER_HOLDS_NUMBER(&s) ||
		    (bson_iter_as_double(&s) < 0) !=
			(bson_iter_as_double(&k) < 0))
			return false;
	}
	return true;
}

static void plan_free(struct doc_plan *p)
{
	if (!p)
		return;
	ixc_unref(p->c);
	mql_bounds_free(&p->b);
	kv_buf_free(&p->keys);
	kv_buf_free(&p->cov);
	free(p->docs);
	if (p->seen != p->seen0)
		free(p->seen);
	free(p);
}

static void pred_path(void *ctx, const struct mql_pred *pr)
{
	struct pick *k = ctx;

	if (k->npaths >= 0 && k->npaths < PICK_PATHS)
		k->path[k->npaths++] = pr->path;
	else
		k->npaths = -1;
}

/* Whether the filter has a predicate on the first field of c's key
 * pattern (not knowing says yes).  Without one the index narrows
 * nothing, and its bounds need not be computed. */
static bool narrows(const struct pick *k, const struct ixc *c)
{
	const char *first = (const char *)c->key + 5;

	if (k->npaths < 0 || c->klen <= 6)
		return true;
	for (int i = 0; i < k->npaths; i++)
		if (!strcmp(k->path[i], first))
			return true;
	return false;
}

static int weigh(void *arg, const struct kvdoc_ix *ix)
{
	struct pick *k = arg;
	struct mql_bounds b = {0};
	bool hinted, follows;
	struct ixc *c;
	size_t score;
	bool kept;

	if (ix->state != KVDOC_IX_READY || !(c = ixc_get(ix, k->err)))
		return k->err->code ? 1 : 0;
	kept = c == tl_ixc[ix->id % IXC_SLOTS];
	if (k->hname)
		hinted = k->hint && !strcmp((const char *)k->hint, c->name);
	else
		hinted = k->hint && k->hlen == c->klen &&
			 !memcmp(k->hint, c->key, c->klen);
	if ((k->hint && !hinted) || (!c->plain && !hinted))
		goto skip;
	follows = sort_follows(k->q, (struct kv_slice){c->key, c->klen});
	/* one that narrows nothing, gives no order and is not hinted scores
	 * 0: it is never taken */
	if (!hinted && !follows && !narrows(k, c))
		goto skip;
	if (mql_index_bounds(c->ix, k->q->filter, true, &b, k->err)) {
		mql_bounds_free(&b);
		goto skip;
	}
	/* narrowed fields first; then giving the sort's order */
	score = b.nparts * 2 + (follows ? 1 : 0) + (hinted ? 1000 : 0);
	if (score == 0 || score <= k->score) {
		mql_bounds_free(&b);
		goto skip;
	}
	if (kept) /* else its one count is ours */
		atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	ixc_unref(k->best);
	mql_bounds_free(&k->b);
	k->best = c;
	k->b = b;
	k->follows = follows;
	k->score = score;
	return hinted;
skip:
	if (!kept)
		ixc_unref(c);
	return k->err->code ? 1 : 0;
}

static bool ix_has(void *ctx, const char *name, size_t len)
{
	return kvdoc_ix_field(ctx, name, len) >= 0;
}

/* Does q read only fields of c (index.h, "Covered entries"): its filter,
 * its sort when the index does not give it, and what the door reads of
 * each document (a projection of those fields, or nothing)? */
static bool coverable(const struct ixc *c, const struct mdoor_query *q,
		      bool sorted)
{
	const struct kvdoc_ix_fields *f = &c->f;
	bson_iter_t it;

	if (!f->flat || !f->n || (!q->count_only && !q->proj) ||
	    !mql_match_fields(q->filter, ix_has, (void *)f) ||
	    (q->proj && !mql_project_fields(q->proj, ix_has, (void *)f)))
		return false;
	if (sorted || !q->sort_bson || q->sort_len <= 5)
		return true;
	if (!bson_iter_init_from_data(&it, q->sort_bson, q->sort_len))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it), *dot = strchr(k, '.');

		if (!ix_has((void *)f, k, dot ? (size_t)(dot - k) : strlen(k)))
			return false;
	}
	return true;
}

/* The plan of the index pick chose (its count and bounds moved in). */
static struct doc_plan *plan_new(struct pick *k, uint32_t coll)
{
	struct doc_plan *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->c = k->best;
	p->id = k->best->id;
	p->coll = coll;
	p->b = k->b;
	p->sorted = k->follows;
	p->covered = coverable(k->best, k->q, k->follows);
	if (k->q->want > 0 && (k->follows || k->q->sort_len <= 5))
		p->want = k->q->want;
	k->best = NULL;
	memset(&k->b, 0, sizeof(k->b));
	return p;
}

bool doc_plan_hinted(const struct mdoor_query *q)
{
	return q->hint && (q->hint_name || q->hint_len > 5);
}

/* Whether a hint names the collection scan: {$natural: ...}, the _id
 * index's key pattern or its name. */
static bool hint_is_scan(const struct pick *k)
{
	bson_iter_t it;

	if (k->hname)
		return !strcmp((const char *)k->hint, "_id_");
	return bson_iter_init_from_data(&it, k->hint, k->hlen) &&
	       bson_iter_next(&it) &&
	       (!strcmp(bson_iter_key(&it), "$natural") ||
		!strcmp(bson_iter_key(&it), "_id"));
}

int doc_plan_choose(const struct kvdoc_catalog *c, uint32_t coll,
		    const struct mdoor_query *q, struct doc_plan **out,
		    struct mql_error *err)
{
	struct pick k = {.q = q, .err = err};

	*out = NULL;
	if (doc_plan_hinted(q)) {
		k.hint = q->hint;
		k.hlen = q->hint_len;
		k.hname = q->hint_name;
	}
	mql_match_preds(q->filter, pred_path, &k);
	kvdoc_catalog_indexes(c, coll, weigh, &k);
	if (!err->code && k.best && !(*out = plan_new(&k, coll)))
		mql_error_set(err, MQL_InternalError, "out of memory");
	if (err->code) {
		ixc_unref(k.best);
		mql_bounds_free(&k.b);
		return -1;
	}
	if (k.hint && !*out) {
		if (hint_is_scan(&k))
			return 0;
		return mql_error_set(err, MQL_BadValue,
				     "hint provided does not correspond to an "
				     "existing index");
	}
	return *out ? 1 : 0;
}

/* ---- scanning ---- */

const char *doc_plan_name(const struct doc_plan *p)
{
	return p->c->name;
}

bool doc_plan_sorted(const struct doc_plan *p)
{
	return p->sorted;
}

bool doc_plan_covered(const struct doc_plan *p)
{
	return p->covered;
}

void doc_plan_counts(const struct doc_plan *p, int64_t *keys, int64_t *docs)
{
	*keys = p->nkeys;
	*docs = p->ndocs;
}

void doc_plan_free(struct doc_plan *p)
{
	plan_free(p);
}

/* Remember a document given; false when it was given already. */
static bool first_time(struct doc_plan *p, const uint8_t *k, size_t n)
{
	uint64_t h = XXH3_64bits(k, n) | 1;
	size_t i;

	if (2 * (p->nseen + 1) > p->cseen) {
		size_t c = p->cseen ? 2 * p->cseen : SEEN_INLINE;
		uint64_t *t = p->cseen ? calloc(c, sizeof(*t)) : p->seen0;

		if (!t)
			return true;
		for (size_t j = 0; j < p->cseen; j++)
			if (p->seen[j]) {
				for (i = p->seen[j] & (c - 1); t[i];
				     i = (i + 1) & (c - 1))
					;
				t[i] = p->seen[j];
			}
		if (p->seen != p->seen0)
			free(p->seen);
		p->seen = t;
		p->cseen = c;
	}
	for (i = h & (p->cseen - 1); p->seen[i]; i = (i + 1) & (p->cseen - 1))
		if (p->seen[i] == h)
			return false;
	p->seen[i] = h;
	p->nseen++;
	return true;
}

/* A covered entry's document (its key parts, its value) appended to cov:
 * its offset there, or NO_COV (then its document is fetched). */
static uint32_t uncover(struct doc_plan *p, struct kv_slice parts,
			struct kv_slice val)
{
	size_t at = p->cov.len;
	bson_t b;

	if (!kvdoc_ix_covered(&p->c->f, val) || at >= NO_COV)
		return NO_COV;
	bson_init(&b);
	if (kvdoc_ix_uncover(&p->c->f, parts, val, &b) ||
	    kv_buf_append(&p->cov, bson_get_data(&b), b.len))
		at = NO_COV;
	bson_destroy(&b);
	return (uint32_t)at;
}

/* An entry (without its keyspace): its document's key into keys.  Its
 * parts are only stepped over (mql_key_skip): the _id after them is what
 * the fetch needs, unless the entry is covered. */
static int keep_entry(void *arg, struct kv_slice key, struct kv_slice val,
		      unsigned type, uint64_t exp)
{
	struct doc_plan *p = arg;
	size_t at = KVDOC_IX_PREFIX;
	uint32_t cov = NO_COV;
	uint8_t *w;
	uint16_t n;

	(void)type, (void)exp;
	p->nkeys++;
	for (size_t i = 0; i < p->c->f.n; i++) {
		long used = key.n > at ? mql_key_skip(key.p + at, key.n - at,
						      p->c->f.desc[i])
				       : -1;

		if (used < 0)
			return 0; /* not an entry of ours: skipped */
		at += (size_t)used;
	}
	if (key.n - at + 4 > KVDOC_KEY_MAX)
		return 0;
	if (p->covered)
		cov = uncover(p,
			      (struct kv_slice){key.p + KVDOC_IX_PREFIX,
						at - KVDOC_IX_PREFIX},
			      val);
	n = (uint16_t)(key.n - at + 4);
	if (kv_buf_reserve(&p->keys, 6u + n))
		return -1;
	w = p->keys.data + p->keys.len;
	memcpy(w, &n, 2);
	memcpy(w + 2, &cov, 4);
	w[6] = (uint8_t)(p->coll >> 24);
	w[7] = (uint8_t)(p->coll >> 16);
	w[8] = (uint8_t)(p->coll >> 8);
	w[9] = (uint8_t)p->coll;
	memcpy(w + 10, key.p + at, key.n - at);
	p->keys.len += 6u + n;
	return 0;
}

/* The next entries of the intervals, at most max, into p->keys. */
static int read_entries(struct doc_plan *p, struct kvd_reader *r, uint64_t now,
			unsigned max)
{
	uint8_t pre[4] = {(uint8_t)(p->id >> 24), (uint8_t)(p->id >> 16),
			  (uint8_t)(p->id >> 8), (uint8_t)p->id};
	uint8_t start[512], end[512];
	struct kv_slice next;

	p->keys.len = 0;
	p->cov.len = 0;
	while (p->iv < p->b.n && p->keys.len == 0) {
		const struct mql_interval *iv = &p->b.iv[p->iv];
		struct kvd_scan sc = {.prefix = {pre, 4},
				      .limit = max,
				      .max_bytes = SIZE_MAX,
				      .keys_only = !p->covered,
				      .ks = KVD_KS_INDEX};

		if (iv->slen + 4 > sizeof(start) || iv->elen + 4 > sizeof(end))
			return -1;
		memcpy(start, pre, 4);
		memcpy(start + 4, iv->start, iv->slen);
		memcpy(end, pre, 4);
		memcpy(end + 4, iv->end, iv->elen);
		sc.start = p->nlen ? (struct kv_slice){p->next, p->nlen}
				   : (struct kv_slice){start, 4 + iv->slen};
		if (iv->elen)
			sc.end = (struct kv_slice){end, 4 + iv->elen};
		if (kvd_reader_scan(r, &sc, now, keep_entry, p, &next) ||
		    p->keys.err || p->cov.err)
			return -1;
		if (next.n && next.n <= sizeof(p->next)) {
			memcpy(p->next, next.p, next.n);
			p->nlen = next.n;
		} else {
			p->nlen = 0;
			p->iv++;
		}
	}
	if (p->iv >= p->b.n && p->keys.len == 0)
		p->done = 1;
	return 0;
}

/* The batch's documents are fetched one after the other, each get two
 * dependent cache misses in a large memtable (its hash slot, then the
 * node): two passes of hints first let those loads overlap. */
static void prefetch(const struct doc_plan *p, struct kvd_reader *r,
		     unsigned nshards)
{
	for (int step = 0; step < 2; step++)
		for (size_t at = 0; at + 6 <= p->keys.len;) {
			uint16_t n;
			uint32_t cov;

			memcpy(&n, p->keys.data + at, 2);
			memcpy(&cov, p->keys.data + at + 2, 4);
			if (cov == NO_COV)
				kvdoc_prefetch(r, nshards,
					       p->keys.data + at + 6, n, step);
			at += 6u + n;
		}
}

/* Room for n fetched documents. */
static int docs_room(struct doc_plan *p, size_t n)
{
	struct fetched *f;

	if (!(f = realloc(p->docs, n * sizeof(*f))))
		return -1;
	p->docs = f;
	p->cdocs = n;
	return 0;
}

/* A document's first bytes, asked for before it is read: matching it
 * starts at its header and first fields, each a cache miss otherwise. */
static void doc_prefetch(struct kv_slice doc)
{
	for (size_t at = 0; at < doc.n && at < 256; at += 64)
		__builtin_prefetch(doc.p + at);
}

/* The batch's documents, each once, into p->docs (their bytes asked for
 * as they are found, so that the loads overlap); their number, or -1. */
static int64_t fetch_docs(struct doc_plan *p, struct kvd_reader *r,
			  unsigned nshards, uint64_t now)
{
	size_t nd = 0;

	for (size_t at = 0; at + 6 <= p->keys.len;) {
		uint16_t n;
		uint32_t cov;
		struct fetched *f;
		const uint8_t *k = p->keys.data + at + 6;
		int rc;

		memcpy(&n, p->keys.data + at, 2);
		memcpy(&cov, p->keys.data + at + 2, 4);
		at += 6u + n;
		if (!first_time(p, k, n))
			continue;
		if (nd == p->cdocs && docs_room(p, nd ? 2 * nd : 64))
			return -1;
		f = &p->docs[nd];
		f->key = k;
		f->klen = n;
		f->cov = false;
		if (cov != NO_COV) {
			uint32_t dl;

			memcpy(&dl, p->cov.data + cov, 4);
			f->doc = (struct kv_slice){p->cov.data + cov,
						   BSON_UINT32_FROM_LE(dl)};
			f->cov = true;
			nd++;
			continue;
		}
		rc = kvdoc_get(r, nshards, k, n, now, &f->doc);
		if (rc == KV_NOT_FOUND)
			continue; /* deleted since its entry was read */
		if (rc)
			return -1;
		p->ndocs++;
		doc_prefetch(f->doc);
		nd++;
	}
	return (int64_t)nd;
}

/* Give docs[from..nd) to fn, until one asks to stop: 0, or -1. */
static int give(struct doc_plan *p, size_t from, size_t nd, kvd_scan_fn fn,
		void *arg)
{
	for (size_t i = from; i < nd; i++) {
		const struct fetched *f = &p->docs[i];
		int rc;

		rc = fn(arg, (struct kv_slice){f->key, f->klen}, f->doc,
			KVD_VT_DOC, 0);
		if (rc == KVD_SCAN_STOP) { /* i not taken */
			p->rest = i;
			p->nrest = nd;
			return 0;
		}
		if (rc)
			return -1;
		p->ngiven++;
	}
	p->rest = p->nrest = 0;
	return 0;
}

/* Go on with the batch a stop cut, on a later turn: its documents are
 * read again by key (one deleted since is passed over, as in
 * fetch_docs). */
static int give_rest(struct doc_plan *p, struct kvd_reader *r, unsigned nshards,
		     uint64_t now, kvd_scan_fn fn, void *arg)
{
	size_t nd = p->nrest, keep = p->rest;

	for (size_t i = p->rest; i < nd; i++) {
		struct fetched *f = &p->docs[i];
		int rc;

		if (!f->cov) {
			rc = kvdoc_get(r, nshards, f->key, f->klen, now,
				       &f->doc);
			if (rc == KV_NOT_FOUND)
				continue;
			if (rc)
				return -1;
		}
		p->docs[keep++] = *f;
	}
	return give(p, p->rest, keep, fn, arg);
}

int doc_plan_batch(struct doc_plan *p, struct kvd_reader *r, unsigned nshards,
		   uint64_t now, unsigned max, kvd_scan_fn fn, void *arg)
{
	int64_t nd;

	if (p->rest < p->nrest)
		return give_rest(p, r, nshards, now, fn, arg);
	if (p->done)
		return 0;
	/* a find with a limit reads no more entries than it returns
	 * documents, when each entry is one (the common case) */
	if (p->want > 0 && p->ngiven == 0 && (uint64_t)p->want < max)
		max = (unsigned)p->want;
	if (read_entries(p, r, now, max))
		return -1;
	prefetch(p, r, nshards);
	if ((nd = fetch_docs(p, r, nshards, now)) < 0)
		return -1;
	return give(p, 0, (size_t)nd, fn, arg);
}

int doc_plan_done(const struct doc_plan *p)
{
	return p->done && p->rest >= p->nrest;
}
