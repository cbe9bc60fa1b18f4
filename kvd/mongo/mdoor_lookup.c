/* mdoor_lookup.c - how an aggregate's $lookup reads its foreign collection
 * through the store (mql_agg.h's struct mql_agg_foreign over struct
 * mdoor_store): each read is a store scan of the query $lookup makes, so
 * the store's planner serves it with an index when one fits, exactly as
 * it serves a find.  The door needs no store call of its own for it.
 *
 * Whether $lookup reads per input document or holds the foreign
 * collection depends on an index whose first key is foreignField (or
 * foreignField being _id): listIndexes says, sparse and partial indexes
 * not counted (they cannot answer {field: null}, which a missing
 * localField asks). */
#include <stdio.h>
#include <string.h>

#include "mdoor_int.h"

struct mdoor_fread {
	struct mdoor *d;
	struct mdoor_foreign *f;
	struct mdoor_fread *prev, *next; /* f->reads */
	void *scan;
	struct mql_match *m;
};

static void slice(const struct mdoor_foreign *f, struct mdoor_fread *r)
{
	if (f->like && f->d->store.scan_slice_as)
		f->d->store.scan_slice_as(r->scan, f->like);
}

void mdoor_foreign_slice(struct mdoor_foreign *f)
{
	for (struct mdoor_fread *r = f->reads; r; r = r->next)
		slice(f, r);
}

struct first_key {
	const char *field;
	bool found;
};

/* Whether an index spec (as listIndexes shows it) has field as its first
 * key, ascending or descending, and is neither sparse nor partial. */
static int spec_fits(void *ctx, const uint8_t *spec, uint32_t len)
{
	struct first_key *fk = ctx;
	bson_iter_t it, k;
	bool first = false, whole = true;

	if (!bson_iter_init_from_data(&it, spec, len))
		return 0;
	while (bson_iter_next(&it)) {
		const char *n = bson_iter_key(&it);

		if (!strcmp(n, "key") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
		    bson_iter_recurse(&it, &k) && bson_iter_next(&k))
			first = !strcmp(bson_iter_key(&k), fk->field) &&
				BSON_ITER_HOLDS_NUMBER(&k);
		else if ((!strcmp(n, "sparse") && bson_iter_as_bool(&it)) ||
			 !strcmp(n, "partialFilterExpression"))
			whole = false;
	}
	fk->found |= first && whole;
	return 0;
}

static int f_indexed(void *ctx, const char *coll, const char *field,
		     struct mql_error *err)
{
	struct mdoor_foreign *f = ctx;
	struct first_key fk = {field, false};

	if (!strcmp(field, "_id"))
		return 1;
	if (!f->d->store.list_indexes)
		return 0;
	if (f->d->store.list_indexes(f->d->store.ctx, f->db, coll, spec_fits,
				     &fk, err) < 0)
		return -1;
	return fk.found;
}

static int f_open(void *ctx, const char *coll, const uint8_t *filter,
		  uint32_t len, void **rd, struct mql_error *err)
{
	struct mdoor_foreign *f = ctx;
	struct mdoor_query q = {.db = f->db, .coll = coll, .want = -1};
	struct mdoor_scan_info info = {0};
	struct mdoor_fread *r = bson_malloc0(sizeof(*r));

	r->d = f->d;
	if (mql_match_compile(filter, len, &r->m, err) < 0) {
		bson_free(r);
		return -1;
	}
	q.filter = r->m;
	q.filter_bson = filter;
	q.filter_len = len;
	if (f->d->store.scan(f->d->store.ctx, &q, &r->scan, &info, err)) {
		mql_match_free(r->m);
		bson_free(r);
		return -1;
	}
	r->f = f;
	r->next = f->reads;
	if (f->reads)
		f->reads->prev = r;
	f->reads = r;
	slice(f, r);
	*rd = r;
	return 0;
}

static int f_next(void *rd, const uint8_t **doc, uint32_t *len,
		  struct mql_error *err)
{
	struct mdoor_fread *r = rd;

	return r->d->store.scan_next(r->scan, doc, len, err);
}

static void f_close(void *rd)
{
	struct mdoor_fread *r = rd;

	if (r->prev)
		r->prev->next = r->next;
	else
		r->f->reads = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->d->store.scan_close(r->scan);
	mql_match_free(r->m);
	bson_free(r);
}

void mdoor_foreign_init(struct mdoor_foreign *f, struct mdoor *d,
			const char *db, void *like, struct mql_agg_foreign *out)
{
	memset(f, 0, sizeof(*f));
	f->d = d;
	f->like = like;
	snprintf(f->db, sizeof(f->db), "%s", db);
	out->ctx = f;
	out->indexed = f_indexed;
	out->open = f_open;
	out->next = f_next;
	out->close = f_close;
}

/* The index the store's planner reads a lookup of field with: its plan
 * of {field: null} (a missing localField's query, which every fitting
 * index answers).  1 with name, 0 when it scans, -1 with err. */
static int plan_index(struct mdoor_foreign *f, const char *coll,
		      const char *field, char *name, size_t nlen,
		      struct mql_error *err)
{
	struct mdoor_query q = {.db = f->db, .coll = coll, .want = -1};
	bson_t filter = BSON_INITIALIZER, plan = BSON_INITIALIZER;
	struct mql_match *m = NULL;
	bson_iter_t it;
	int rc = 0;

	BSON_APPEND_NULL(&filter, field);
	if (mql_match_compile(bson_get_data(&filter), filter.len, &m, err) <
	    0) {
		bson_destroy(&filter);
		return -1;
	}
	q.filter = m;
	q.filter_bson = bson_get_data(&filter);
	q.filter_len = filter.len;
	if (mdoor_plan_of(f->d, &q, &plan, err))
		rc = -1;
	else if (bson_iter_init(&it, &plan) &&
		 bson_iter_find_descendant(&it, "inputStage.indexName", &it) &&
		 BSON_ITER_HOLDS_UTF8(&it))
		rc = snprintf(name, nlen, "%s", bson_iter_utf8(&it, NULL)) > 0;
	else if (bson_iter_init_find(&it, &plan, "stage") &&
		 BSON_ITER_HOLDS_UTF8(&it) &&
		 !strcmp(bson_iter_utf8(&it, NULL), "IDHACK"))
		rc = snprintf(name, nlen, "_id_") > 0;
	mql_match_free(m);
	bson_destroy(&filter);
	bson_destroy(&plan);
	return rc;
}

int mdoor_lookup_explain(struct mdoor *d, const char *db, const char *from,
			 const char *field, bson_t *out, struct mql_error *err)
{
	struct mdoor_foreign f;
	struct mql_agg_foreign fa;
	char name[MDOOR_NAME_MAX];
	bson_t arr;
	int ix;

	mdoor_foreign_init(&f, d, db, NULL, &fa);
	if (!field) { /* no equality: the pipeline reads the collection */
		BSON_APPEND_ARRAY_BEGIN(out, "indexesUsed", &arr);
		bson_append_array_end(out, &arr);
		BSON_APPEND_INT64(out, "collectionScans", 1);
		BSON_APPEND_UTF8(out, "strategy", "Uncorrelated");
		return 0;
	}
	ix = f_indexed(&f, from, field, err);
	if (ix > 0)
		ix = plan_index(&f, from, field, name, sizeof(name), err);
	if (ix < 0)
		return -1;
	BSON_APPEND_ARRAY_BEGIN(out, "indexesUsed", &arr);
	if (ix > 0)
		BSON_APPEND_UTF8(&arr, "0", name);
	bson_append_array_end(out, &arr);
	/* without an index the collection is read once and held */
	BSON_APPEND_INT64(out, "collectionScans", ix > 0 ? 0 : 1);
	BSON_APPEND_UTF8(out, "strategy",
			 ix > 0 ? "IndexedLoopJoin" : "HashJoin");
	return 0;
}
