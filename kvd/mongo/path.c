/* path.c - dotted paths and MongoDB's traversal of documents and arrays
 * (mql_path.h). */
#include <string.h>

#include "mql_int.h"
#include "mql_path.h"

int mql_path_parse(const char *dotted, size_t len, struct mql_path *out,
		   struct mql_error *err)
{
	size_t n = 1, start = 0, k = 0;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return mql_error_set(err, MQL_BadValue,
				     "FieldPath cannot be constructed with "
				     "empty string");
	if (memchr(dotted, '\0', len))
		return mql_error_set(err, MQL_BadValue,
				     "FieldPath field names may not contain "
				     "a null byte");
	for (size_t i = 0; i < len; i++)
		n += dotted[i] == '.';
	out->dotted = bson_malloc(len + 1);
	memcpy(out->dotted, dotted, len);
	out->dotted[len] = '\0';
	out->len = len;
	out->parts = bson_malloc0(n * sizeof(*out->parts));
	out->n = n;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && dotted[i] != '.')
			continue;
		if (i == start)
			return mql_error_set(err, MQL_BadValue,
					     "FieldPath field names may not be "
					     "empty strings: '%s'",
					     out->dotted);
		out->parts[k].s = out->dotted + start;
		out->parts[k].len = i - start;
		out->parts[k].index =
		    mql_index_of(out->dotted + start, i - start);
		k++;
		start = i + 1;
	}
	return 0;
}

void mql_path_free(struct mql_path *p)
{
	if (!p)
		return;
	bson_free(p->dotted);
	bson_free(p->parts);
	memset(p, 0, sizeof(*p));
}

bool mql_path_find_field(const uint8_t *doc, uint32_t doclen, const char *name,
			 size_t len, bson_iter_t *it)
{
	if (!bson_iter_init_from_data(it, doc, doclen))
		return false;
	while (bson_iter_next(it)) {
		if (bson_iter_key_len(it) == len &&
		    memcmp(bson_iter_key(it), name, len) == 0)
			return true;
	}
	return false;
}

struct walk {
	const struct mql_path *p;
	unsigned opts;
	mql_path_cb cb;
	void *ctx;
	long pos; /* index in the first array traversed, or -1 */
};

static const bson_value_t missing_value = {.value_type = BSON_TYPE_EOD};

static int walk_value(struct walk *w, const bson_value_t *v, size_t i);

static int yield_missing(struct walk *w)
{
	return w->cb(w->ctx, &missing_value, MQL_PATH_MISSING, w->pos);
}

static int walk_doc(struct walk *w, const uint8_t *data, uint32_t len, size_t i)
{
	bson_iter_t it;
	const struct mql_path_part *c = &w->p->parts[i];

	if (!mql_path_find_field(data, len, c->s, c->len, &it))
		return yield_missing(w);
	return walk_value(w, bson_iter_value(&it), i + 1);
}

/* An array met with components i.. still to go (implicit traversal). */
static int walk_array(struct walk *w, const bson_value_t *arr, size_t i)
{
	bson_iter_t it;
	long k = 0, saved = w->pos;
	int rc = 0;
	long idx = w->p->parts[i].index;

	if (!bson_iter_init_from_data(&it, arr->value.v_doc.data,
				      arr->value.v_doc.data_len))
		return 0;
	for (; rc == 0 && bson_iter_next(&it); k++) {
		const bson_value_t *e = bson_iter_value(&it);

		if (saved < 0)
			w->pos = k;
		if (idx == k) {
			rc = walk_value(w, e, i + 1);
		} else if (e->value_type == BSON_TYPE_DOCUMENT && idx >= 0) {
			/* a numeric component names a field of the other
			 * elements only where they have one: the index
			 * decides what is missing */
			bson_iter_t f;
			const struct mql_path_part *c = &w->p->parts[i];

			if (mql_path_find_field(e->value.v_doc.data,
						e->value.v_doc.data_len, c->s,
						c->len, &f))
				rc = walk_value(w, bson_iter_value(&f), i + 1);
		} else if (e->value_type == BSON_TYPE_DOCUMENT) {
			rc = walk_doc(w, e->value.v_doc.data,
				      e->value.v_doc.data_len, i);
		}
	}
	w->pos = saved;
	return rc;
}

static int walk_leaf(struct walk *w, const bson_value_t *v)
{
	bson_iter_t it;
	long k = 0, saved = w->pos;
	int rc = 0;

	if (v->value_type != BSON_TYPE_ARRAY || !(w->opts & MQL_PATH_EXPAND))
		return w->cb(w->ctx, v, 0, w->pos);
	if (bson_iter_init_from_data(&it, v->value.v_doc.data,
				     v->value.v_doc.data_len)) {
		for (; rc == 0 && bson_iter_next(&it); k++)
			rc = w->cb(w->ctx, bson_iter_value(&it),
				   MQL_PATH_ELEMENT, saved < 0 ? k : saved);
	}
	if (rc == 0)
		rc = w->cb(w->ctx, v, MQL_PATH_WHOLE_ARRAY, saved);
	return rc;
}

static int walk_value(struct walk *w, const bson_value_t *v, size_t i)
{
	if (i == w->p->n)
		return walk_leaf(w, v);
	if (v->value_type == BSON_TYPE_DOCUMENT)
		return walk_doc(w, v->value.v_doc.data, v->value.v_doc.data_len,
				i);
	if (v->value_type == BSON_TYPE_ARRAY)
		return walk_array(w, v, i);
	return yield_missing(w);
}

int mql_path_walk(const struct mql_path *p, size_t from, const uint8_t *doc,
		  uint32_t len, unsigned opts, mql_path_cb cb, void *ctx)
{
	struct walk w = {p, opts, cb, ctx, -1};

	if (from >= p->n) {
		bson_value_t v;

		memset(&v, 0, sizeof(v));
		v.value_type = BSON_TYPE_DOCUMENT;
		v.value.v_doc.data = (uint8_t *)doc;
		v.value.v_doc.data_len = len;
		return walk_leaf(&w, &v);
	}
	return walk_doc(&w, doc, len, from);
}

bool mql_path_get(const struct mql_path *p, const uint8_t *doc, uint32_t len,
		  bson_value_t *out)
{
	const uint8_t *data = doc;
	uint32_t dlen = len;
	bson_iter_t it;

	for (size_t i = 0; i < p->n; i++) {
		if (!mql_path_find_field(data, dlen, p->parts[i].s,
					 p->parts[i].len, &it))
			return false;
		if (i + 1 == p->n) {
			*out = *bson_iter_value(&it);
			return true;
		}
		if (!BSON_ITER_HOLDS_DOCUMENT(&it) &&
		    !BSON_ITER_HOLDS_ARRAY(&it))
			return false;
		bson_iter_document(&it, &dlen, &data);
		if (BSON_ITER_HOLDS_ARRAY(&it))
			bson_iter_array(&it, &dlen, &data);
	}
	return false;
}
