/* sort.c - sort specifications and sort keys (mql_sort.h). */
#include <string.h>

#include "mql_int.h"
#include "mql_path.h"
#include "mql_sort.h"
#include "mql_value.h"

struct mql_sort {
	size_t n;
	struct mql_path *paths;
	int *dir;  /* 1 or -1 */
	int whole; /* mql_sort_whole's direction, or 0 */
};

void mql_sort_free(struct mql_sort *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		mql_path_free(&s->paths[i]);
	bson_free(s->paths);
	bson_free(s->dir);
	bson_free(s);
}

struct mql_sort *mql_sort_whole(int direction)
{
	struct mql_sort *s = bson_malloc0(sizeof(*s));

	s->whole = direction < 0 ? -1 : 1;
	return s;
}

int mql_sort_compile(const uint8_t *spec, uint32_t len, struct mql_sort **out,
		     struct mql_error *err)
{
	struct mql_sort *s;
	bson_iter_t it;
	size_t n = 0;

	*out = NULL;
	if (mql_bson_check(spec, len, MQL_MAX_INPUT_SIZE, MQL_MAX_INPUT_DEPTH,
			   err) < 0)
		return -1;
	bson_iter_init_from_data(&it, spec, len);
	while (bson_iter_next(&it))
		n++;
	s = bson_malloc0(sizeof(*s));
	s->paths = bson_malloc0((n ? n : 1) * sizeof(*s->paths));
	s->dir = bson_malloc0((n ? n : 1) * sizeof(*s->dir));
	bson_iter_init_from_data(&it, spec, len);
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		double d = mql_number_double(v);

		if (v->value_type == BSON_TYPE_DOCUMENT) {
			mql_error_set(err, MQL_NotImplemented,
				      "$meta sort keys are not supported");
			goto fail;
		}
		if (!mql_is_number(v) || (d != 1 && d != -1)) {
			mql_error_set(err, 15975,
				      "$sort key ordering must be 1 (for "
				      "ascending) or -1 (for descending)");
			goto fail;
		}
		if (mql_path_parse(bson_iter_key(&it), bson_iter_key_len(&it),
				   &s->paths[s->n], err) < 0) {
			s->n++;
			goto fail;
		}
		s->dir[s->n++] = d > 0 ? 1 : -1;
	}
	*out = s;
	return 0;
fail:
	mql_sort_free(s);
	return -1;
}

size_t mql_sort_nkeys(const struct mql_sort *s)
{
	return s->whole ? 1 : s->n;
}

struct keyctx {
	bson_value_t best;
	bool have;
	int dir;
};

static int key_cb(void *ctx, const bson_value_t *v, unsigned flags, long pos)
{
	struct keyctx *k = ctx;
	bson_value_t null = {.value_type = BSON_TYPE_NULL};
	const bson_value_t *c = v;

	(void)pos;
	if (flags & MQL_PATH_WHOLE_ARRAY)
		return 0; /* its elements stand for it */
	if (flags & MQL_PATH_MISSING)
		c = &null;
	if (!k->have || mql_value_cmp(c, &k->best) * k->dir < 0) {
		k->best = *c;
		k->have = true;
	}
	return 0;
}

void mql_sort_key(const struct mql_sort *s, const uint8_t *doc, uint32_t len,
		  bson_value_t *keys)
{
	for (size_t i = 0; i < s->n; i++) {
		struct keyctx k = {.dir = s->dir[i]};
		bool any_array = false;

		mql_path_walk(&s->paths[i], 0, doc, len, MQL_PATH_EXPAND,
			      key_cb, &k);
		if (!k.have) {
			/* nothing but empty arrays (undefined sorts below
			 * null), or no branch at all (null) */
			bson_value_t probe;

			any_array =
			    mql_path_get(&s->paths[i], doc, len, &probe) &&
			    probe.value_type == BSON_TYPE_ARRAY;
			memset(&k.best, 0, sizeof(k.best));
			k.best.value_type =
			    any_array ? BSON_TYPE_UNDEFINED : BSON_TYPE_NULL;
		}
		keys[i] = k.best;
	}
}

int mql_sort_cmp_keys(const struct mql_sort *s, const bson_value_t *a,
		      const bson_value_t *b)
{
	if (s->whole)
		return mql_value_cmp(a, b) * s->whole;
	for (size_t i = 0; i < s->n; i++) {
		int c = mql_value_cmp(&a[i], &b[i]);

		if (c)
			return c * s->dir[i];
	}
	return 0;
}

int mql_sort_cmp_values(const struct mql_sort *s, const bson_value_t *a,
			const bson_value_t *b)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	bson_value_t *ka, *kb;
	int c;

	if (s->whole)
		return mql_value_cmp(a, b) * s->whole;
	if (s->n == 0)
		return 0;
	ka = bson_malloc(2 * s->n * sizeof(*ka));
	kb = ka + s->n;
	if (a->value_type == BSON_TYPE_DOCUMENT)
		mql_sort_key(s, a->value.v_doc.data, a->value.v_doc.data_len,
			     ka);
	else
		mql_sort_key(s, empty, 5, ka);
	if (b->value_type == BSON_TYPE_DOCUMENT)
		mql_sort_key(s, b->value.v_doc.data, b->value.v_doc.data_len,
			     kb);
	else
		mql_sort_key(s, empty, 5, kb);
	c = mql_sort_cmp_keys(s, ka, kb);
	bson_free(ka);
	return c;
}
