/* index_cover.c - covered entries (index.h, "Covered entries"): the value
 * an index entry carries when its key gives back the document's indexed
 * fields exactly, and the document made from such an entry alone, which
 * a covered query reads instead of the document (doc_plan.c). */
#include <string.h>

#include "index.h"
#include "mongo/mql_key.h"

void kvdoc_ix_fields(const uint8_t *key, size_t n, struct kvdoc_ix_fields *f)
{
	bson_iter_t it;

	memset(f, 0, sizeof(*f));
	f->flat = true;
	if (!bson_iter_init_from_data(&it, key, n))
		return;
	while (bson_iter_next(&it)) {
		if (f->n == MQL_INDEX_MAX_PARTS) {
			f->flat = false;
			return;
		}
		f->name[f->n] = bson_iter_key(&it);
		f->len[f->n] = bson_iter_key_len(&it);
		f->desc[f->n] = bson_iter_as_double(&it) < 0;
		if (memchr(f->name[f->n], '.', f->len[f->n]))
			f->flat = false;
		f->n++;
	}
}

int kvdoc_ix_field(const struct kvdoc_ix_fields *f, const char *name,
		   size_t len)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->len[i] == len && !memcmp(f->name[i], name, len))
			return (int)i;
	return -1;
}

/* The document's values of f's fields (has[i] false: absent), when each
 * is there once and they come in the key pattern's order (a projection
 * keeps the document's order, which a covered answer must give too). */
static bool doc_fields(const struct kvdoc_ix_fields *f, const uint8_t *doc,
		       size_t n, bson_value_t *at, bool *has)
{
	bson_iter_t it;
	int last = -1;

	memset(has, 0, f->n * sizeof(*has));
	if (!bson_iter_init_from_data(&it, doc, n))
		return false;
	while (bson_iter_next(&it)) {
		int i = kvdoc_ix_field(f, bson_iter_key(&it),
				       bson_iter_key_len(&it));

		if (i < 0)
			continue;
		if (has[i] || i < last)
			return false;
		has[i] = true;
		at[i] = *bson_iter_value(&it);
		last = i;
	}
	return true;
}

/* The value v as type t: an integer given back as the document's wider
 * type (int32 as int64, an int32 or int64 as double: one key for 5,
 * NumberLong(5) and 5.0, decoded as the narrowest), appended to out under
 * name; false for any other change of type. */
static bool append_as(bson_t *out, const char *name, const bson_value_t *v,
		      uint8_t t)
{
	int64_t i;

	if (!t || t == v->value_type)
		return bson_append_value(out, name, -1, v);
	if (v->value_type == BSON_TYPE_INT32)
		i = v->value.v_int32;
	else if (v->value_type == BSON_TYPE_INT64)
		i = v->value.v_int64;
	else
		return false;
	if (t == BSON_TYPE_INT64)
		return bson_append_int64(out, name, -1, i);
	if (t == BSON_TYPE_DOUBLE)
		return bson_append_double(out, name, -1, (double)i);
	return false;
}

/* Decode the key part at p[0..n) into out under name, as type t
 * (append_as); its bytes in *used.  -1 when it cannot be. */
static int decode_as(const uint8_t *p, size_t n, bool desc, uint8_t t,
		     bson_t *out, const char *name, size_t *used)
{
	struct mql_error e;
	bson_t one;
	bson_iter_t it;
	int rc = -1;

	if (!t)
		return mql_key_decode(p, n, desc, out, name, used, &e) ? -1 : 0;
	bson_init(&one);
	if (!mql_key_decode(p, n, desc, &one, "", used, &e) &&
	    bson_iter_init(&it, &one) && bson_iter_next(&it) &&
	    append_as(out, name, bson_iter_value(&it), t))
		rc = 0;
	bson_destroy(&one);
	return rc;
}

/* Does the key part at p, decoded as the document's type, give the
 * document's value v exactly, its type and its bytes?  The type byte to
 * keep (0: as decoded) in *t. */
static bool part_exact(const uint8_t *p, size_t n, bool desc,
		       const bson_value_t *v, size_t *used, uint8_t *t)
{
	bson_t a, b;
	bool same;

	*t = 0;
	switch (v->value_type) {
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE: *t = (uint8_t)v->value_type; break;
	default: break;
	}
	bson_init(&a);
	bson_init(&b);
	same = !decode_as(p, n, desc, *t, &a, "", used) &&
	       bson_append_value(&b, "", 0, v) && a.len == b.len &&
	       !memcmp(bson_get_data(&a), bson_get_data(&b), a.len);
	bson_destroy(&a);
	bson_destroy(&b);
	return same;
}

/* [KVDOC_IX_COVER][a bit per absent field][a type byte per field] */
static size_t cover_len(const struct kvdoc_ix_fields *f)
{
	return 1 + (f->n + 7) / 8 + f->n;
}

size_t kvdoc_ix_cover(const struct kvdoc_ix_fields *f, const uint8_t *doc,
		      size_t n, struct kv_slice key, uint8_t *out)
{
	bson_value_t at[MQL_INDEX_MAX_PARTS];
	bool has[MQL_INDEX_MAX_PARTS];
	size_t pos = 0, types = 1 + (f->n + 7) / 8;

	if (!f->flat || !f->n || !doc_fields(f, doc, n, at, has))
		return 0;
	memset(out, 0, cover_len(f));
	out[0] = KVDOC_IX_COVER;
	for (size_t i = 0; i < f->n; i++) {
		size_t used;
		long skip;

		if (has[i]) {
			if (!part_exact(key.p + pos, key.n - pos, f->desc[i],
					&at[i], &used, &out[types + i]))
				return 0;
		} else {
			/* absent: keyed as undefined, given back as nothing */
			if ((skip = mql_key_skip(key.p + pos, key.n - pos,
						 f->desc[i])) < 0)
				return 0;
			used = (size_t)skip;
			out[1 + i / 8] |= (uint8_t)(1u << (i % 8));
		}
		pos += used;
	}
	return cover_len(f);
}

bool kvdoc_ix_covered(const struct kvdoc_ix_fields *f, struct kv_slice val)
{
	return f->flat && f->n && val.n == cover_len(f) &&
	       val.p[0] == KVDOC_IX_COVER;
}

int kvdoc_ix_uncover(const struct kvdoc_ix_fields *f, struct kv_slice parts,
		     struct kv_slice val, bson_t *out)
{
	size_t pos = 0, used, types = 1 + (f->n + 7) / 8;
	char name[256];

	for (size_t i = 0; i < f->n; i++) {
		if (val.p[1 + i / 8] & (1u << (i % 8))) {
			long skip = mql_key_skip(parts.p + pos, parts.n - pos,
						 f->desc[i]);

			if (skip < 0)
				return -1;
			pos += (size_t)skip;
			continue;
		}
		if (f->len[i] >= sizeof(name))
			return -1;
		memcpy(name, f->name[i], f->len[i]);
		name[f->len[i]] = 0;
		if (decode_as(parts.p + pos, parts.n - pos, f->desc[i],
			      val.p[types + i], out, name, &used))
			return -1;
		pos += used;
	}
	return 0;
}
