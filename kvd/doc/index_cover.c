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

/* The document's values of f's fields (NULL: absent), when each is there
 * once and they come in the key pattern's order (a projection keeps the
 * document's order, which a covered answer must give too). */
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

/* Does the key part at p (decoded) equal the document's value exactly:
 * its type and its bytes? */
static bool part_exact(const uint8_t *p, size_t n, bool desc,
		       const bson_value_t *v, size_t *used)
{
	bson_t a, b;
	struct mql_error e;
	bool same;

	bson_init(&a);
	bson_init(&b);
	same = !mql_key_decode(p, n, desc, &a, "", used, &e) &&
	       bson_append_value(&b, "", 0, v) && a.len == b.len &&
	       !memcmp(bson_get_data(&a), bson_get_data(&b), a.len);
	bson_destroy(&a);
	bson_destroy(&b);
	return same;
}

size_t kvdoc_ix_cover(const struct kvdoc_ix_fields *f, const uint8_t *doc,
		      size_t n, struct kv_slice key, uint8_t *out)
{
	bson_value_t at[MQL_INDEX_MAX_PARTS];
	bool has[MQL_INDEX_MAX_PARTS];
	size_t pos = 0, bytes = 1 + (f->n + 7) / 8;

	if (!f->flat || !f->n || !doc_fields(f, doc, n, at, has))
		return 0;
	memset(out, 0, bytes);
	out[0] = KVDOC_IX_COVER;
	for (size_t i = 0; i < f->n; i++) {
		size_t used;
		long skip;

		if (has[i]) {
			if (!part_exact(key.p + pos, key.n - pos, f->desc[i],
					&at[i], &used))
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
	return bytes;
}

bool kvdoc_ix_covered(const struct kvdoc_ix_fields *f, struct kv_slice val)
{
	return f->flat && f->n && val.n == 1 + (f->n + 7) / 8 &&
	       val.p[0] == KVDOC_IX_COVER;
}

int kvdoc_ix_uncover(const struct kvdoc_ix_fields *f, struct kv_slice parts,
		     struct kv_slice val, bson_t *out)
{
	struct mql_error e;
	size_t pos = 0, used;
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
		if (mql_key_decode(parts.p + pos, parts.n - pos, f->desc[i],
				   out, name, &used, &e))
			return -1;
		pos += used;
	}
	return 0;
}
