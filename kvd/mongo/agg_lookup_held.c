/* agg_lookup_held.c - $lookup's foreign collection held in memory when no
 * index answers its equality (agg_lookup.c): read once, each document
 * filed under the hash of every value its foreignField path gives (the
 * elements of an array and the array itself; null for a missing branch),
 * so that an input document finds its candidates by the hashes of its
 * local values instead of testing the whole collection.  Candidates are
 * then matched against the input's query, so the hash only narrows: the
 * answer is the matcher's, in the collection's order.
 *
 * Hashes are mql_value_hash's, which MongoDB's equality keeps (1, 1.0 and
 * NumberLong(1) hash alike); null, undefined and missing, which a query's
 * equality treats as one, are filed under one hash.  Every byte held
 * (documents, entries) counts against the stage's limit: 292 past it. */
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_value.h"

struct held_doc {
	uint8_t *doc;
	uint32_t len;
};

struct held_ent {
	uint64_t h;
	uint32_t doc;
};

struct lookup_held {
	struct held_doc *docs;
	size_t ndocs, dcap;
	struct held_ent *ent; /* sorted by (h, doc) */
	size_t nent, ecap;
	uint32_t *cand; /* one lookup's candidates */
	size_t ncand, ccap;
};

void agg_lookup_held_free(struct lookup_held *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->ndocs; i++)
		bson_free(h->docs[i].doc);
	bson_free(h->docs);
	bson_free(h->ent);
	bson_free(h->cand);
	bson_free(h);
}

static uint64_t hash_of(const bson_value_t *v, bool missing)
{
	static const bson_value_t null = {.value_type = BSON_TYPE_NULL};

	if (missing || v->value_type == BSON_TYPE_NULL ||
	    v->value_type == BSON_TYPE_UNDEFINED)
		return mql_value_hash(&null);
	return mql_value_hash(v);
}

struct filing {
	struct lookup_held *h;
	uint32_t doc;
};

static int file_value(void *ctx, const bson_value_t *v, unsigned flags,
		      long pos)
{
	struct filing *f = ctx;
	struct lookup_held *h = f->h;

	(void)pos;
	mql_grow((void **)&h->ent, &h->ecap, h->nent, 1, sizeof(*h->ent));
	h->ent[h->nent].h = hash_of(v, flags & MQL_PATH_MISSING);
	h->ent[h->nent++].doc = f->doc;
	return 0;
}

static int ent_cmp(const void *a, const void *b, void *ctx)
{
	const struct held_ent *x = a, *y = b;

	(void)ctx;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->doc < y->doc ? -1 : x->doc > y->doc;
}

static int over(const struct agg_lookup *l, size_t limit, struct mql_error *err)
{
	return mql_error_set(err, MQL_QueryExceededMemoryLimitNoDiskUseAllowed,
			     "$lookup exceeded the memory limit of %zu bytes "
			     "holding the collection %s (no index on '%s'); "
			     "kvd does not spill to disk (allowDiskUse does "
			     "not lift the limit)",
			     limit, l->from, l->foreign);
}

struct lookup_held *agg_lookup_held_new(void)
{
	return bson_malloc0(sizeof(struct lookup_held));
}

int agg_lookup_held_add(struct lookup_held *h, const struct agg_lookup *l,
			const uint8_t *d, uint32_t n, size_t limit, size_t *mem,
			struct mql_error *err)
{
	struct filing f = {h, (uint32_t)h->ndocs};
	size_t before = h->nent;

	if (h->ndocs == UINT32_MAX)
		return over(l, limit, err);
	mql_grow((void **)&h->docs, &h->dcap, h->ndocs, 1, sizeof(*h->docs));
	h->docs[h->ndocs].doc = bson_malloc(n);
	memcpy(h->docs[h->ndocs].doc, d, n);
	h->docs[h->ndocs++].len = n;
	mql_path_walk(&l->fpath, 0, d, n, MQL_PATH_EXPAND, file_value, &f);
	*mem +=
	    n + sizeof(struct held_doc) +
	    (h->nent - before) * (sizeof(struct held_ent) + sizeof(uint32_t));
	return *mem > limit ? over(l, limit, err) : 0;
}

void agg_lookup_held_seal(struct lookup_held *h)
{
	mql_msort(h->ent, h->nent, sizeof(*h->ent), ent_cmp, NULL);
}

/* Add the documents filed under hash k to the candidates. */
static void candidates_of(struct lookup_held *h, uint64_t k)
{
	size_t lo = 0, hi = h->nent;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->ent[mid].h < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < h->nent && h->ent[lo].h == k; lo++) {
		mql_grow((void **)&h->cand, &h->ccap, h->ncand, 1,
			 sizeof(*h->cand));
		h->cand[h->ncand++] = h->ent[lo].doc;
	}
}

static int u32_cmp(const void *a, const void *b, void *ctx)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	(void)ctx;
	return x < y ? -1 : x > y;
}

int agg_lookup_held_find(struct lookup_held *h, const bson_t *vals,
			 const struct mql_match *m, agg_lookup_hit hit,
			 void *ctx, struct mql_error *err)
{
	bson_iter_t it;
	uint32_t last = UINT32_MAX;

	h->ncand = 0;
	if (bson_iter_init(&it, vals))
		while (bson_iter_next(&it))
			candidates_of(h, hash_of(bson_iter_value(&it), false));
	mql_msort(h->cand, h->ncand, sizeof(*h->cand), u32_cmp, NULL);
	for (size_t i = 0; i < h->ncand; i++) {
		const struct held_doc *d = &h->docs[h->cand[i]];

		if (h->cand[i] == last)
			continue;
		last = h->cand[i];
		if (mql_match_doc(m, d->doc, d->len, NULL) &&
		    hit(ctx, d->doc, d->len, err) < 0)
			return -1;
	}
	return 0;
}
