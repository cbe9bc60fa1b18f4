/* agg_run.c - a cursor over a compiled pipeline (mql_agg.h): each stage
 * pulls documents from the one before it, down to the caller's source, so
 * that nothing is read before a result needs it and a reached $limit stops
 * the reading.  The streaming stages hold one document; $sort holds what
 * it sorts (only the first k with a $limit after it), counted against its
 * memory limit. */
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_sort.h"
#include "mql_value.h"

struct sort_item {
	uint8_t *doc;
	uint32_t len;
	uint64_t seq; /* arrival order: ties keep it */
	bson_value_t *keys;
};

struct run {
	const struct agg_stage *st;
	bson_t out; /* the document this stage made last */
	int64_t count;
	bool started;
	size_t mem;
	/* $sort */
	struct sort_item *items;
	size_t n, cap, pos;
	/* $group; streamed when its input comes in its _id's order */
	struct group_run *g;
	struct group_stream *gs;
	bool stream;
	/* $unwind: a copy of the document and its array's elements */
	uint8_t *cur;
	uint32_t cur_len;
	bson_value_t *el;
	size_t nel, elcap, elpos;
	/* $lookup */
	struct lookup_run *lk;
};

struct mql_agg_cursor {
	const struct mql_pipeline *p;
	mql_agg_source src;
	void *ctx;
	struct mql_agg_foreign foreign;
	bool has_foreign;
	bool (*over)(void *ctx); /* mql_agg_set_pause's */
	void *octx;
	bool moved; /* a document moved during this mql_agg_next */
	struct run *runs;
	size_t n;
	int state; /* 1 running, 0 ended, -1 failed */
	struct mql_error err;
};

int agg_too_large(struct mql_error *err)
{
	return mql_error_set(err, MQL_BSONObjectTooLarge,
			     "BSONObj size is too large: a document of the "
			     "pipeline passes 16777216 bytes");
}

static int stage_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err);

/* A document for stage i from the one before it (or the source).  Once
 * a document moved in this mql_agg_next, a slice that ran out pauses the
 * pull: every stage already keeps its place when its input pauses. */
int agg_pull(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
	     uint32_t *len, struct mql_error *err)
{
	int rc;

	if (c->over && c->moved && c->over(c->octx))
		return MQL_AGG_PAUSE;
	rc = i == 0 ? c->src(c->ctx, doc, len, err)
		    : stage_next(c, i - 1, doc, len, err);
	c->moved |= rc == 1;
	return rc;
}

/* ---- $sort ---------------------------------------------------------- */

static int item_cmp(const struct mql_sort *s, const struct sort_item *a,
		    const struct sort_item *b)
{
	int m = mql_sort_cmp_keys(s, a->keys, b->keys);

	if (m)
		return m;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int item_cmp_cb(const void *a, const void *b, void *ctx)
{
	return item_cmp(ctx, a, b);
}

static void item_free(struct sort_item *it)
{
	bson_free(it->doc);
	bson_free(it->keys);
}

/* The top-k heap keeps its worst item on top. */
static void heap_down(const struct mql_sort *s, struct sort_item *h, size_t n,
		      size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		struct sort_item t;

		if (l < n && item_cmp(s, &h[l], &h[w]) > 0)
			w = l;
		if (r < n && item_cmp(s, &h[r], &h[w]) > 0)
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static void heap_up(const struct mql_sort *s, struct sort_item *h, size_t i)
{
	while (i > 0) {
		size_t up = (i - 1) / 2;
		struct sort_item t;

		if (item_cmp(s, &h[i], &h[up]) <= 0)
			return;
		t = h[i];
		h[i] = h[up];
		h[up] = t;
		i = up;
	}
}

static size_t item_mem(const struct sort_item *it, size_t nkeys)
{
	return it->len + sizeof(*it) + nkeys * sizeof(bson_value_t);
}

/* Keep doc (a copy of it) when it belongs among the sorted results. */
static int sort_add(struct run *r, const struct mql_pipeline *p,
		    const uint8_t *doc, uint32_t len, uint64_t seq,
		    struct mql_error *err)
{
	const struct agg_stage *st = r->st;
	size_t nk = mql_sort_nkeys(st->sort);
	struct sort_item it = {NULL, len, seq, NULL};
	bool full = st->topk >= 0 && r->n >= (size_t)st->topk;

	it.keys = bson_malloc((nk ? nk : 1) * sizeof(*it.keys));
	mql_sort_key(st->sort, doc, len, it.keys);
	if (full && item_cmp(st->sort, &it, &r->items[0]) >= 0) {
		bson_free(it.keys);
		return 0;
	}
	it.doc = bson_malloc(len);
	memcpy(it.doc, doc, len);
	mql_sort_key(st->sort, it.doc, len, it.keys);
	if (full) {
		r->mem -= item_mem(&r->items[0], nk);
		item_free(&r->items[0]);
		r->items[0] = it;
		heap_down(st->sort, r->items, r->n, 0);
	} else {
		mql_grow((void **)&r->items, &r->cap, r->n, 1,
			 sizeof(*r->items));
		r->items[r->n++] = it;
		if (st->topk >= 0)
			heap_up(st->sort, r->items, r->n - 1);
	}
	r->mem += item_mem(&it, nk);
	if (r->mem > p->sort_mem)
		return mql_error_set(
		    err, MQL_QueryExceededMemoryLimitNoDiskUseAllowed,
		    "Sort exceeded memory limit of %zu bytes, "
		    "but did not opt in to external sorting.",
		    p->sort_mem);
	return 0;
}

static int sort_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		     uint32_t *len, struct mql_error *err)
{
	struct run *r = &c->runs[i];
	const uint8_t *d;
	uint32_t l;
	int rc;

	if (!r->started) { /* its input so far stays across a pause */
		while ((rc = agg_pull(c, i, &d, &l, err)) == 1) {
			if (sort_add(r, c->p, d, l, (uint64_t)r->count++, err) <
			    0)
				return -1;
		}
		if (rc != 0)
			return rc;
		r->started = true;
		mql_msort(r->items, r->n, sizeof(*r->items), item_cmp_cb,
			  r->st->sort);
	}
	if (r->pos == r->n)
		return 0;
	*doc = r->items[r->pos].doc;
	*len = r->items[r->pos].len;
	r->pos++;
	return 1;
}

/* ---- $unwind -------------------------------------------------------- */

/* The value at p in doc through documents only (no array traversal), as
 * $unwind reads its path. */
static bool doc_get(const struct mql_path *p, const uint8_t *doc, uint32_t len,
		    bson_value_t *out)
{
	bson_iter_t it;

	for (size_t i = 0; i < p->n; i++) {
		if (!mql_path_find_field(doc, len, p->parts[i].s,
					 p->parts[i].len, &it))
			return false;
		*out = *bson_iter_value(&it);
		if (i + 1 < p->n) {
			if (out->value_type != BSON_TYPE_DOCUMENT)
				return false;
			doc = out->value.v_doc.data;
			len = out->value.v_doc.data_len;
		}
	}
	return true;
}

/* agg_int.h: $unwind and $lookup set their fields with it. */
bool agg_set_path(const uint8_t *doc, uint32_t len, const struct mql_path *p,
		  size_t i, const bson_value_t *v, bson_t *out)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	const struct mql_path_part *pt = &p->parts[i];
	bool found = false, ok = true;
	bson_iter_t it;
	bson_t child;

	bson_iter_init_from_data(&it, doc, len);
	while (ok && bson_iter_next(&it)) {
		const bson_value_t *e = bson_iter_value(&it);
		const char *k = bson_iter_key(&it);
		uint32_t kl = bson_iter_key_len(&it);

		if (found || kl != pt->len || memcmp(k, pt->s, kl) != 0) {
			ok = bson_append_value(out, k, (int)kl, e);
			continue;
		}
		found = true;
		if (i + 1 == p->n) {
			ok = !v || bson_append_value(out, k, (int)kl, v);
			continue;
		}
		ok = bson_append_document_begin(out, k, (int)kl, &child) &&
		     (e->value_type == BSON_TYPE_DOCUMENT
			  ? agg_set_path(e->value.v_doc.data,
					 e->value.v_doc.data_len, p, i + 1, v,
					 &child)
			  : agg_set_path(empty, 5, p, i + 1, v, &child)) &&
		     bson_append_document_end(out, &child);
	}
	if (!ok || found || !v)
		return ok;
	if (i + 1 == p->n)
		return bson_append_value(out, pt->s, (int)pt->len, v);
	return bson_append_document_begin(out, pt->s, (int)pt->len, &child) &&
	       agg_set_path(empty, 5, p, i + 1, v, &child) &&
	       bson_append_document_end(out, &child);
}

/* One output of $unwind: doc with the path set to v (NULL: removed) when
 * set, and the index field set to idx (-1: null) when asked for. */
static int unwind_emit(struct run *r, const uint8_t *doc, uint32_t len,
		       const bson_value_t *v, bool set, int64_t idx,
		       const uint8_t **od, uint32_t *ol, struct mql_error *err)
{
	const struct agg_stage *st = r->st;
	bson_t tmp = BSON_INITIALIZER;
	bson_value_t iv;
	bool ok = true;

	*od = doc;
	*ol = len;
	if (!set && !st->has_index)
		return 1;
	bson_reinit(&r->out);
	if (set) {
		bson_t *dst = st->has_index ? &tmp : &r->out;

		ok = agg_set_path(doc, len, &st->path, 0, v, dst);
		doc = bson_get_data(dst);
		len = dst->len;
	}
	if (ok && st->has_index) {
		memset(&iv, 0, sizeof(iv));
		iv.value_type = idx >= 0 ? BSON_TYPE_INT64 : BSON_TYPE_NULL;
		iv.value.v_int64 = idx;
		ok = agg_set_path(doc, len, &st->index, 0, &iv, &r->out);
	}
	bson_destroy(&tmp);
	if (!ok || r->out.len > MQL_MAX_DOC_SIZE)
		return agg_too_large(err);
	*od = bson_get_data(&r->out);
	*ol = r->out.len;
	return 1;
}

/* Take doc's array apart: a copy of doc and its elements. */
static void unwind_load(struct run *r, const uint8_t *doc, uint32_t len)
{
	bson_value_t a;
	bson_iter_t it;

	bson_free(r->cur);
	r->cur = bson_malloc(len);
	memcpy(r->cur, doc, len);
	r->cur_len = len;
	r->nel = r->elpos = 0;
	/* The caller saw an array there; the copy has it too, but a failed
	 * read must leave no elements rather than read an unset value. */
	if (!doc_get(&r->st->path, r->cur, len, &a) ||
	    a.value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, a.value.v_doc.data,
				      a.value.v_doc.data_len))
		return;
	while (bson_iter_next(&it)) {
		mql_grow((void **)&r->el, &r->elcap, r->nel, 1, sizeof(*r->el));
		r->el[r->nel++] = *bson_iter_value(&it);
	}
}

static int unwind_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		       uint32_t *len, struct mql_error *err)
{
	struct run *r = &c->runs[i];
	const struct agg_stage *st = r->st;
	const uint8_t *d;
	uint32_t l;
	bson_value_t v;
	int rc;

	for (;;) {
		if (r->elpos < r->nel) {
			size_t k = r->elpos++;

			return unwind_emit(r, r->cur, r->cur_len, &r->el[k],
					   true, (int64_t)k, doc, len, err);
		}
		rc = agg_pull(c, i, &d, &l, err);
		if (rc != 1)
			return rc;
		if (!doc_get(&st->path, d, l, &v) ||
		    v.value_type == BSON_TYPE_NULL ||
		    v.value_type == BSON_TYPE_UNDEFINED) {
			if (st->preserve)
				return unwind_emit(r, d, l, NULL, false, -1,
						   doc, len, err);
			continue;
		}
		if (v.value_type != BSON_TYPE_ARRAY)
			return unwind_emit(r, d, l, NULL, false, -1, doc, len,
					   err);
		if (v.value.v_doc.data_len > 5) {
			unwind_load(r, d, l);
			continue;
		}
		if (st->preserve) /* an empty array: the field goes */
			return unwind_emit(r, d, l, NULL, true, -1, doc, len,
					   err);
	}
}

/* ---- the streaming stages ------------------------------------------ */

static int count_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err)
{
	struct run *r = &c->runs[i];
	const uint8_t *d;
	uint32_t l;
	int64_t n;
	int rc;

	if (r->started)
		return 0;
	while ((rc = agg_pull(c, i, &d, &l, err)) == 1)
		r->count++; /* kept across a pause */
	if (rc != 0)
		return rc;
	r->started = true;
	n = r->count;
	if (n == 0) /* $group of nothing makes nothing */
		return 0;
	bson_reinit(&r->out);
	if (n <= INT32_MAX)
		bson_append_int32(&r->out, r->st->name, -1, (int32_t)n);
	else
		bson_append_int64(&r->out, r->st->name, -1, n);
	*doc = bson_get_data(&r->out);
	*len = r->out.len;
	return 1;
}

static int group_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err)
{
	struct run *r = &c->runs[i];
	int rc;

	if (r->stream) {
		rc = agg_group_stream(c, i, &r->st->group, &r->gs,
				      c->p->group_mem, &r->mem, &r->out, err);
		if (rc > 0) {
			*doc = bson_get_data(&r->out);
			*len = r->out.len;
		}
		return rc;
	}
	if (!r->started) { /* its groups so far stay across a pause */
		rc = agg_group_run(c, i, &r->st->group, &r->g, c->p->group_mem,
				   &r->mem, err);
		if (rc != 0)
			return rc;
		r->started = true;
	}
	bson_reinit(&r->out);
	rc = agg_group_emit(r->g, &r->st->group, &r->out, err);
	if (rc > 0) {
		*doc = bson_get_data(&r->out);
		*len = r->out.len;
	}
	return rc;
}

static int stage_next(struct mql_agg_cursor *c, size_t i, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err)
{
	struct run *r = &c->runs[i];
	const struct agg_stage *st = r->st;
	int rc;

	switch (st->kind) {
	case AG_MATCH:
		while ((rc = agg_pull(c, i, doc, len, err)) == 1) {
			if (mql_match_doc(st->match, *doc, *len, NULL))
				return 1;
		}
		return rc;
	case AG_PROJECT:
		rc = agg_pull(c, i, doc, len, err);
		if (rc != 1)
			return rc;
		bson_reinit(&r->out);
		if (mql_project_apply(st->proj, *doc, *len, &r->out, err) < 0)
			return -1;
		*doc = bson_get_data(&r->out);
		*len = r->out.len;
		return 1;
	case AG_SKIP:
		while (r->count < st->n) {
			rc = agg_pull(c, i, doc, len, err);
			if (rc != 1)
				return rc;
			r->count++;
		}
		return agg_pull(c, i, doc, len, err);
	case AG_LIMIT:
		if (r->count >= st->n)
			return 0; /* and reads no further */
		rc = agg_pull(c, i, doc, len, err);
		r->count += rc == 1;
		return rc;
	case AG_SORT: return sort_next(c, i, doc, len, err);
	case AG_COUNT: return count_next(c, i, doc, len, err);
	case AG_GROUP: return group_next(c, i, doc, len, err);
	case AG_UNWIND: return unwind_next(c, i, doc, len, err);
	case AG_LOOKUP:
		return agg_lookup_next(c, i, st->lookup, &r->lk,
				       c->p->lookup_mem, &r->mem, &r->out, doc,
				       len, err);
	}
	return mql_error_set(err, MQL_InternalError, "unknown stage");
}

/* ---- the cursor ----------------------------------------------------- */

int mql_agg_open(const struct mql_pipeline *p, size_t from, mql_agg_source src,
		 void *ctx, struct mql_agg_cursor **out, struct mql_error *err)
{
	struct mql_agg_cursor *c;
	size_t first = 0;

	*out = NULL;
	if (from > p->nuser)
		return mql_error_set(err, MQL_BadValue,
				     "the pipeline has %zu stages, not %zu",
				     p->nuser, from);
	while (first < p->n && p->st[first].user < from)
		first++;
	c = bson_malloc0(sizeof(*c));
	c->p = p;
	c->src = src;
	c->ctx = ctx;
	c->state = 1;
	c->n = p->n - first;
	/* struct run holds a bson_t, which libbson aligns to 128 bytes */
	c->runs = bson_aligned_alloc0(BSON_ALIGNOF(struct run),
				      (c->n ? c->n : 1) * sizeof(*c->runs));
	for (size_t i = 0; i < c->n; i++) {
		c->runs[i].st = &p->st[first + i];
		bson_init(&c->runs[i].out);
	}
	*out = c;
	return 0;
}

int mql_agg_next(struct mql_agg_cursor *c, const uint8_t **doc, uint32_t *len,
		 struct mql_error *err)
{
	int rc;

	if (c->state <= 0) {
		if (c->state < 0 && err)
			*err = c->err;
		return c->state;
	}
	mql_error_clear(&c->err);
	c->moved = false;
	rc = agg_pull(c, c->n, doc, len, &c->err);
	if (rc < 0 && c->err.code == 0)
		mql_error_set(&c->err, MQL_InternalError,
			      "the pipeline's source failed");
	if (rc <= 0)
		c->state = rc;
	if (rc < 0 && err)
		*err = c->err;
	return rc;
}

void mql_agg_stream_group(struct mql_agg_cursor *c)
{
	if (c->n > 0 && c->runs[0].st->kind == AG_GROUP &&
	    c->runs[0].st->group.order)
		c->runs[0].stream = true;
}

void mql_agg_set_foreign(struct mql_agg_cursor *c,
			 const struct mql_agg_foreign *f)
{
	c->foreign = *f;
	c->has_foreign = true;
}

void mql_agg_set_pause(struct mql_agg_cursor *c, bool (*over)(void *ctx),
		       void *ctx)
{
	c->over = over;
	c->octx = ctx;
}

void agg_pause_like(struct mql_agg_cursor *sub, const struct mql_agg_cursor *c)
{
	sub->over = c->over;
	sub->octx = c->octx;
}

const struct mql_agg_foreign *agg_foreign(const struct mql_agg_cursor *c)
{
	return c->has_foreign ? &c->foreign : NULL;
}

size_t mql_agg_mem(const struct mql_agg_cursor *c)
{
	size_t m = 0;

	for (size_t i = 0; i < c->n; i++)
		m += c->runs[i].mem;
	return m;
}

void mql_agg_close(struct mql_agg_cursor *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		struct run *r = &c->runs[i];

		for (size_t j = 0; j < r->n; j++)
			item_free(&r->items[j]);
		bson_free(r->items);
		agg_group_free(r->g);
		agg_group_stream_free(r->gs);
		bson_free(r->cur);
		bson_free(r->el);
		agg_lookup_free(r->lk);
		bson_destroy(&r->out);
	}
	bson_free(c->runs);
	bson_free(c);
}
