/* key_index.c - an index's key pattern, and the keys of a document for it
 * (mql_key.h), as MongoDB's B-tree key generator makes them: each field's
 * path is followed through documents until it ends or meets an array;
 * fields that meet the same array are expanded together, one key per
 * element (the rest of their paths followed inside it), and two different
 * arrays are refused ("parallel arrays"). */
#include <stdlib.h>
#include <string.h>

#include "key_int.h"
#include "mql_int.h"
#include "mql_path.h"
#include "mql_value.h"

struct mql_index {
	size_t n;
	struct mql_path *paths;
	bool *desc;
	unsigned flags;
};

void mql_index_free(struct mql_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->n; i++)
		mql_path_free(&ix->paths[i]);
	bson_free(ix->paths);
	bson_free(ix->desc);
	bson_free(ix);
}

size_t mql_index_nparts(const struct mql_index *ix)
{
	return ix->n;
}

const struct mql_path *key_index_path(const struct mql_index *ix, size_t i,
				      bool *desc)
{
	*desc = ix->desc[i];
	return &ix->paths[i];
}

static int bad_value(const bson_value_t *v, struct mql_error *err)
{
	static const char *const special[] = {
	    "hashed", "text", "2d", "2dsphere", "geoHaystack", "columnstore"};

	if (v->value_type == BSON_TYPE_UTF8) {
		for (size_t i = 0; i < sizeof(special) / sizeof(*special);
		     i++) {
			if (strcmp(v->value.v_utf8.str, special[i]) == 0)
				return mql_error_set(err, MQL_NotImplemented,
						     "%s indexes are not "
						     "supported",
						     special[i]);
		}
		return mql_error_set(err, MQL_CannotCreateIndex,
				     "Unknown index plugin '%s'",
				     v->value.v_utf8.str);
	}
	return mql_error_set(err, MQL_CannotCreateIndex,
			     "Values in v:2 index key pattern cannot be of "
			     "type %s. Only numbers > 0, numbers < 0, and "
			     "strings are allowed.",
			     mql_type_name(v->value_type));
}

/* Is p (a part of a dotted key) one of a DBRef's fields? */
static bool dbref_part(const char *p)
{
	size_t n = strcspn(p, ".");

	return (n == 3 && (!strncmp(p, "$db", 3) || !strncmp(p, "$id", 3))) ||
	       (n == 4 && !strncmp(p, "$ref", 4));
}

/* A key's field: "$**" anywhere makes a wildcard index (not supported:
 * 238); another part beginning with '$' is refused as mongod refuses it,
 * but for a DBRef's $ref, $id and $db after the first part. */
static int bad_field(const char *key, struct mql_error *err)
{
	const char *p = key;

	for (;;) {
		if (!strncmp(p, "$**", 3) && (p[3] == '\0' || p[3] == '.'))
			return mql_error_set(err, MQL_NotImplemented,
					     "wildcard indexes are not "
					     "supported");
		if (*p == '$' && (p == key || !dbref_part(p)))
			return mql_error_set(err, MQL_CannotCreateIndex,
					     "Index key contains an illegal "
					     "field name: field name starts "
					     "with '$'.");
		if (!(p = strchr(p, '.')))
			return 0;
		p++;
	}
}

int mql_index_compile(const uint8_t *spec, uint32_t len, unsigned flags,
		      struct mql_index **out, struct mql_error *err)
{
	struct mql_index *ix;
	bson_iter_t it;
	size_t n = 0;

	*out = NULL;
	if (mql_bson_check(spec, len, MQL_MAX_INPUT_SIZE, MQL_MAX_INPUT_DEPTH,
			   err) < 0)
		return -1;
	bson_iter_init_from_data(&it, spec, len);
	while (bson_iter_next(&it))
		n++;
	if (n == 0)
		return mql_error_set(err, MQL_CannotCreateIndex,
				     "Index keys cannot be empty.");
	if (n > MQL_INDEX_MAX_PARTS)
		return mql_error_set(err, 13103,
				     "too many fields in index key, max is %d",
				     MQL_INDEX_MAX_PARTS);
	ix = bson_malloc0(sizeof(*ix));
	ix->paths = bson_malloc0(n * sizeof(*ix->paths));
	ix->desc = bson_malloc0(n * sizeof(*ix->desc));
	ix->flags = flags;
	bson_iter_init_from_data(&it, spec, len);
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		double d = mql_number_double(v);

		if (!mql_is_number(v) || d == 0 || d != d) {
			bad_value(v, err);
			goto fail;
		}
		if (bson_iter_key_len(&it) == 0) {
			mql_error_set(err, MQL_CannotCreateIndex,
				      "Index keys cannot be an empty field.");
			goto fail;
		}
		if (bad_field(bson_iter_key(&it), err))
			goto fail;
		ix->desc[ix->n] = d < 0;
		if (mql_path_parse(bson_iter_key(&it), bson_iter_key_len(&it),
				   &ix->paths[ix->n++], err) < 0)
			goto fail;
	}
	*out = ix;
	return 0;
fail:
	mql_index_free(ix);
	return -1;
}

/* ---- the keys ---------------------------------------------------------- */

struct kg {
	const struct mql_index *ix;
	unsigned flags;
	struct mql_error *err;
	uint8_t *buf; /* every key, one after the other */
	size_t len, cap;
	size_t *off; /* key i is buf[off[i] .. off[i + 1]) */
	size_t nkeys, offcap;
};

/* Where each field stands: its next path component (n: done) and, once
 * done, its value. */
struct fstate {
	size_t comp;
	bson_value_t v;
	bool missing;
};

enum { X_MISSING, X_VALUE, X_ARRAY };

static bool array_at(const bson_value_t *a, long idx, bson_value_t *out)
{
	bson_iter_t it;

	bson_iter_init_from_data(&it, a->value.v_doc.data,
				 a->value.v_doc.data_len);
	for (long i = 0; bson_iter_next(&it); i++) {
		if (i == idx) {
			*out = *bson_iter_value(&it);
			return true;
		}
	}
	return false;
}

/* Follow p from component *c in obj through documents (and array
 * elements a numeric component names): a value, nothing, or an array met
 * on the way (*c then the component after it). */
static int extract(const struct mql_path *p, size_t *c, const uint8_t *obj,
		   uint32_t olen, bson_value_t *v)
{
	bson_iter_t it;

	memset(v, 0, sizeof(*v));
	v->value_type = BSON_TYPE_DOCUMENT;
	v->value.v_doc.data = (uint8_t *)obj;
	v->value.v_doc.data_len = olen;
	while (*c < p->n) {
		const struct mql_path_part *pt = &p->parts[*c];

		if (v->value_type != BSON_TYPE_DOCUMENT ||
		    !mql_path_find_field(v->value.v_doc.data,
					 v->value.v_doc.data_len, pt->s,
					 pt->len, &it))
			return X_MISSING;
		*v = *bson_iter_value(&it);
		(*c)++;
		if (v->value_type != BSON_TYPE_ARRAY)
			continue;
		if (*c < p->n && p->parts[*c].index >= 0 &&
		    array_at(v, p->parts[*c].index, v)) {
			(*c)++; /* "a.1": that element, not them all */
			continue;
		}
		return X_ARRAY;
	}
	return X_VALUE;
}

static int emit(struct kg *g, const struct fstate *fs)
{
	static const bson_value_t null = {.value_type = BSON_TYPE_NULL};
	const struct mql_index *ix = g->ix;
	size_t missing = 0, len = 0;
	uint8_t key[MQL_KEY_MAX];

	for (size_t i = 0; i < ix->n; i++)
		missing += fs[i].missing;
	if ((ix->flags & MQL_INDEX_SPARSE) && missing == ix->n)
		return 0;
	for (size_t i = 0; i < ix->n; i++) {
		if (mql_key_encode(fs[i].missing ? &null : &fs[i].v,
				   ix->desc[i], key, sizeof(key), &len,
				   g->err) < 0)
			return -1;
	}
	mql_grow((void **)&g->buf, &g->cap, g->len, len, 1);
	memcpy(g->buf + g->len, key, len);
	mql_grow((void **)&g->off, &g->offcap, g->nkeys, 2, sizeof(*g->off));
	g->off[g->nkeys++] = g->len;
	g->len += len;
	g->off[g->nkeys] = g->len;
	return 0;
}

static int keygen(struct kg *g, struct fstate *fs, const uint8_t *obj,
		  uint32_t olen);

/* One element e of the array the fields in hit[] met. */
static int expand_one(struct kg *g, const struct fstate *fs, const bool *hit,
		      const bson_value_t *e)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	const struct mql_index *ix = g->ix;
	struct fstate sub[MQL_INDEX_MAX_PARTS];
	bool doc = e->value_type == BSON_TYPE_DOCUMENT;

	memcpy(sub, fs, ix->n * sizeof(*fs));
	for (size_t i = 0; i < ix->n; i++) {
		if (!hit[i])
			continue;
		if (sub[i].comp == ix->paths[i].n) {
			sub[i].v = *e; /* a nested array stays whole */
		} else if (!doc || e->value_type == BSON_TYPE_UNDEFINED) {
			sub[i].comp = ix->paths[i].n;
			sub[i].missing = true;
		}
	}
	return doc ? keygen(g, sub, e->value.v_doc.data,
			    e->value.v_doc.data_len)
		   : keygen(g, sub, empty, 5);
}

static int parallel(struct kg *g, const struct mql_path *a, size_t ca,
		    const struct mql_path *b, size_t cb)
{
	const struct mql_path_part *x = &a->parts[ca - 1],
				   *y = &b->parts[cb - 1];

	return mql_error_set(g->err, MQL_CannotIndexParallelArrays,
			     "cannot index parallel arrays [%.*s] [%.*s]",
			     (int)x->len, x->s, (int)y->len, y->s);
}

static int keygen(struct kg *g, struct fstate *fs, const uint8_t *obj,
		  uint32_t olen)
{
	const struct mql_index *ix = g->ix;
	bool hit[MQL_INDEX_MAX_PARTS] = {false};
	/* arr is read only once first is set, which gcc -O1 cannot prove */
	bson_value_t arr = {0}, v;
	size_t first = SIZE_MAX;
	bson_iter_t it;
	int rc = 0;

	for (size_t i = 0; i < ix->n; i++) {
		if (fs[i].comp == ix->paths[i].n)
			continue;
		switch (extract(&ix->paths[i], &fs[i].comp, obj, olen, &v)) {
		case X_MISSING:
			fs[i].comp = ix->paths[i].n;
			fs[i].missing = true;
			break;
		case X_VALUE: fs[i].v = v; break;
		default:
			if (first == SIZE_MAX) {
				first = i;
				arr = v;
			} else if (v.value.v_doc.data != arr.value.v_doc.data) {
				return parallel(g, &ix->paths[i], fs[i].comp,
						&ix->paths[first],
						fs[first].comp);
			}
			hit[i] = true;
		}
	}
	if (first == SIZE_MAX)
		return emit(g, fs);
	g->flags |= MQL_KEYS_MULTIKEY;
	if (arr.value.v_doc.data_len <= 5) { /* []: undefined */
		bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};

		return expand_one(g, fs, hit, &undef);
	}
	bson_iter_init_from_data(&it, arr.value.v_doc.data,
				 arr.value.v_doc.data_len);
	while (rc == 0 && bson_iter_next(&it))
		rc = expand_one(g, fs, hit, bson_iter_value(&it));
	return rc;
}

static int cmp_keys(const void *a, const void *b, void *ctx)
{
	const struct kg *g = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	size_t li = g->off[i + 1] - g->off[i], lj = g->off[j + 1] - g->off[j];
	int m =
	    memcmp(g->buf + g->off[i], g->buf + g->off[j], li < lj ? li : lj);

	return m ? m : (li > lj) - (li < lj);
}

int mql_index_keys(const struct mql_index *ix, const uint8_t *doc, uint32_t len,
		   unsigned *flags, mql_key_cb cb, void *ctx,
		   struct mql_error *err)
{
	struct kg g = {ix, 0, err, NULL, 0, 0, NULL, 0, 0};
	struct fstate fs[MQL_INDEX_MAX_PARTS];
	size_t *order = NULL;
	int rc;

	memset(fs, 0, sizeof(fs));
	rc = keygen(&g, fs, doc, len);
	if (flags)
		*flags = g.flags;
	if (rc == 0 && g.nkeys) {
		order = bson_malloc(g.nkeys * sizeof(*order));
		for (size_t i = 0; i < g.nkeys; i++)
			order[i] = i;
		mql_msort(order, g.nkeys, sizeof(*order), cmp_keys, &g);
		for (size_t i = 0; rc == 0 && i < g.nkeys; i++) {
			size_t k = order[i];

			if (i && cmp_keys(&order[i - 1], &order[i], &g) == 0)
				continue;
			rc = cb(ctx, g.buf + g.off[k], g.off[k + 1] - g.off[k]);
		}
	}
	bson_free(order);
	bson_free(g.buf);
	bson_free(g.off);
	return rc;
}
