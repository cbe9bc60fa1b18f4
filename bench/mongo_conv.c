/* mongo_conv.c - kvbench's values as MongoDB documents and back (see
 * mongo_conv.h).  The msgpack read is the forms kvbench writes: maps with
 * string keys, strings, binaries, unsigned integers and doubles, maps
 * within maps; anything else makes the value opaque ({value: BinData}). */
#include "mongo_conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpw.h"

#define MCONV_DEPTH 8

struct mreader {
	const uint8_t *p, *end;
};

static int rd_be(struct mreader *r, int bytes, uint64_t *v)
{
	if (r->end - r->p < bytes)
		return -1;
	*v = 0;
	for (int i = 0; i < bytes; i++)
		*v = *v << 8 | *r->p++;
	return 0;
}

/* A length of 1, 2 or 4 bytes after a form byte. */
static int rd_len(struct mreader *r, int bytes, size_t *n)
{
	uint64_t v;

	if (rd_be(r, bytes, &v) || v > (uint64_t)(r->end - r->p))
		return -1;
	*n = (size_t)v;
	return 0;
}

/* A string's bytes: fixstr, str8/16/32. */
static int rd_str(struct mreader *r, const char **s, size_t *n)
{
	uint8_t b;

	if (r->p >= r->end)
		return -1;
	b = *r->p++;
	if ((b & 0xe0) == 0xa0) {
		*n = b & 0x1f;
		if (*n > (size_t)(r->end - r->p))
			return -1;
	} else if (b < 0xd9 || b > 0xdb ||
		   rd_len(r,
			  b == 0xd9   ? 1
			  : b == 0xda ? 2
				      : 4,
			  n)) {
		return -1;
	}
	*s = (const char *)r->p;
	r->p += *n;
	return 0;
}

static int rd_map(struct mreader *r, bson_t *out, int depth);

static int rd_value(struct mreader *r, bson_t *out, const char *k, int klen,
		    int depth)
{
	uint8_t b = *r->p;
	const char *s;
	uint64_t v;
	size_t n;
	double d;
	bson_t sub;

	if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) {
		return rd_str(r, &s, &n) || n > INT32_MAX ||
			       !bson_utf8_validate(s, n, false) ||
			       !bson_append_utf8(out, k, klen, s, (int)n)
			   ? -1
			   : 0;
	}
	r->p++;
	if (b < 0x80)
		return bson_append_int64(out, k, klen, b) ? 0 : -1;
	if (b >= 0xc4 && b <= 0xc6) {
		if (rd_len(r, b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4, &n))
			return -1;
		r->p += n;
		return bson_append_binary(out, k, klen, BSON_SUBTYPE_BINARY,
					  r->p - n, (uint32_t)n)
			   ? 0
			   : -1;
	}
	if (b == 0xcf)
		return rd_be(r, 8, &v) || v > INT64_MAX ||
			       !bson_append_int64(out, k, klen, (int64_t)v)
			   ? -1
			   : 0;
	if (b == 0xcb) {
		if (rd_be(r, 8, &v))
			return -1;
		memcpy(&d, &v, 8);
		return bson_append_double(out, k, klen, d) ? 0 : -1;
	}
	r->p--;
	if (!bson_append_document_begin(out, k, klen, &sub))
		return -1;
	if (rd_map(r, &sub, depth + 1)) {
		bson_append_document_end(out, &sub);
		return -1;
	}
	return bson_append_document_end(out, &sub) ? 0 : -1;
}

/* A map's entries appended to out. */
static int rd_map(struct mreader *r, bson_t *out, int depth)
{
	uint64_t n;
	uint8_t b;

	if (depth > MCONV_DEPTH || r->p >= r->end)
		return -1;
	b = *r->p++;
	if ((b & 0xf0) == 0x80)
		n = b & 0x0f;
	else if (b != 0xde && b != 0xdf)
		return -1;
	else if (rd_be(r, b == 0xde ? 2 : 4, &n))
		return -1;
	while (n--) {
		const char *k;
		size_t kn;

		if (rd_str(r, &k, &kn) || kn > INT32_MAX || memchr(k, 0, kn) ||
		    (kn == 3 && !memcmp(k, "_id", 3)) || r->p >= r->end ||
		    rd_value(r, out, k, (int)kn, depth))
			return -1;
	}
	return 0;
}

bson_t *mconv_value_doc(const char *key, size_t klen, const uint8_t *v,
			size_t vlen)
{
	struct mreader r = {v, v + vlen};
	bson_t *d = bson_new();

	bson_append_utf8(d, "_id", 3, key, (int)klen);
	if (vlen && rd_map(&r, d, 0) == 0 && r.p == r.end)
		return d;
	bson_reinit(d);
	bson_append_utf8(d, "_id", 3, key, (int)klen);
	if (!bson_append_binary(d, "value", 5, BSON_SUBTYPE_BINARY, v,
				(uint32_t)vlen)) {
		bson_destroy(d);
		return NULL;
	}
	return d;
}

/* ---- back to msgpack ------------------------------------------------- */

struct mwriter {
	uint8_t **buf;
	size_t *cap, len;
};

/* Room for n more bytes. */
static uint8_t *wr_room(struct mwriter *w, size_t n)
{
	if (w->len + n > *w->cap) {
		size_t cap = (w->len + n) * 2;
		uint8_t *b = realloc(*w->buf, cap);

		if (!b)
			return NULL;
		*w->buf = b;
		*w->cap = cap;
	}
	return *w->buf + w->len;
}

static int wr_str(struct mwriter *w, const char *s, size_t n)
{
	uint8_t *p = wr_room(w, n + 5), *q;

	if (!p)
		return -1;
	if (n < 256) {
		q = mpw_str(p, s, n);
	} else {
		*p = n < 65536 ? 0xda : 0xdb;
		q = mpw_be(p + 1, n, n < 65536 ? 2 : 4);
		memcpy(q, s, n);
		q += n;
	}
	w->len += (size_t)(q - p);
	return 0;
}

static int wr_doc(struct mwriter *w, bson_iter_t *it, int top);

static int wr_value(struct mwriter *w, bson_iter_t *it)
{
	uint8_t *p = wr_room(w, 9), *q = p;
	const uint8_t *bin;
	uint32_t n;
	int64_t i;
	double d;
	uint64_t bits;
	bson_iter_t sub;

	if (!p)
		return -1;
	switch (bson_iter_type(it)) {
	case BSON_TYPE_UTF8: {
		const char *s = bson_iter_utf8(it, &n);

		return wr_str(w, s, n);
	}
	case BSON_TYPE_BINARY:
		bson_iter_binary(it, NULL, &n, &bin);
		if (!(p = wr_room(w, n + 5)))
			return -1;
		q = mpw_bin_hdr(p, n);
		memcpy(q, bin, n);
		w->len += (size_t)(q + n - p);
		return 0;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		if ((i = bson_iter_as_int64(it)) < 0)
			return -1;
		if (i < 128) {
			*q++ = (uint8_t)i;
		} else {
			*q++ = 0xcf;
			q = mpw_be(q, (uint64_t)i, 8);
		}
		break;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(it);
		memcpy(&bits, &d, 8);
		*q++ = 0xcb;
		q = mpw_be(q, bits, 8);
		break;
	case BSON_TYPE_DOCUMENT:
		return bson_iter_recurse(it, &sub) ? wr_doc(w, &sub, 0) : -1;
	default: return -1;
	}
	w->len += (size_t)(q - p);
	return 0;
}

/* A document's fields as a map (top: leave _id out). */
static int wr_doc(struct mwriter *w, bson_iter_t *it, int top)
{
	bson_iter_t count = *it;
	uint32_t n = 0;
	uint8_t *p;

	while (bson_iter_next(&count))
		n += !(top && strcmp(bson_iter_key(&count), "_id") == 0);
	if (!(p = wr_room(w, 5)))
		return -1;
	w->len += (size_t)(mpw_map(p, n) - p);
	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (top && strcmp(k, "_id") == 0)
			continue;
		if (wr_str(w, k, strlen(k)) || wr_value(w, it))
			return -1;
	}
	return 0;
}

int mconv_doc_value(const bson_t *d, uint8_t **buf, size_t *cap, size_t *len)
{
	struct mwriter w = {buf, cap, 0};
	bson_iter_t it;
	const uint8_t *bin;
	uint32_t n;

	/* {_id, value: BinData}: the value's own bytes */
	if (bson_count_keys(d) == 2 && bson_iter_init_find(&it, d, "value") &&
	    BSON_ITER_HOLDS_BINARY(&it)) {
		bson_iter_binary(&it, NULL, &n, &bin);
		if (!wr_room(&w, n ? n : 1))
			return -1;
		memcpy(*buf, bin, n);
		*len = n;
		return 0;
	}
	if (!bson_iter_init(&it, d) || wr_doc(&w, &it, 1))
		return -1;
	*len = w.len;
	return 0;
}

void mconv_ix_create(bson_t *cmd, const char *coll)
{
	static const char *const fields[] = {"k", "r", "s"};
	bson_t arr, spec, key;
	char name[8], idx[4];

	BSON_APPEND_UTF8(cmd, "createIndexes", coll);
	BSON_APPEND_ARRAY_BEGIN(cmd, "indexes", &arr);
	for (int i = 0; i < 3; i++) {
		snprintf(idx, sizeof(idx), "%d", i);
		snprintf(name, sizeof(name), "%s_1", fields[i]);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, idx, &spec);
		BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
		BSON_APPEND_INT32(&key, fields[i], 1);
		bson_append_document_end(&spec, &key);
		BSON_APPEND_UTF8(&spec, "name", name);
		bson_append_document_end(&arr, &spec);
	}
	bson_append_array_end(cmd, &arr);
}
