/* key.c - BSON values as order-preserving bytes, and back (mql_key.h).
 *
 * Each value is its type byte (key_int.h, in MongoDB's order of types),
 * then a body that orders the values of that type and ends itself:
 *   numbers    key_num.c
 *   strings, symbols, code   the bytes, 0x00 written 0x00 0xFF, then
 *              0x00 0x01 (so "a" < "a\0" < "a\1" < "ab")
 *   documents  per element: the type byte of its rank, its name and
 *              0x00, its value; then 0x00 (a shorter document first, as
 *              mql_value_cmp's element by element comparison)
 *   arrays     the elements' values, then 0x00
 *   binData    its length (one byte below 255, else 0xFF and four bytes),
 *              its subtype, its bytes (length first, as MongoDB)
 *   ObjectId 12 bytes; bool one byte; date 8 bytes big-endian with the
 *   sign bit flipped; timestamp 8 bytes big-endian (seconds, increment);
 *   regex pattern 0x00 options 0x00; dbPointer the collection's length
 *   (4 bytes), its bytes, the ObjectId; code with scope the code, then
 *   the scope as a document; MinKey, MaxKey, null, undefined: no body.
 */
#include <stdlib.h>
#include <string.h>

#include "key_int.h"
#include "mql_int.h"
#include "mql_value.h"

static uint8_t rank_byte(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_MINKEY: return K_MINKEY;
	case BSON_TYPE_EOD:
	case BSON_TYPE_UNDEFINED: return K_UNDEF;
	case BSON_TYPE_NULL: return K_NULL;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128: return K_ZERO;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL: return K_STRING;
	case BSON_TYPE_DOCUMENT: return K_DOC;
	case BSON_TYPE_ARRAY: return K_ARRAY;
	case BSON_TYPE_BINARY: return K_BIN;
	case BSON_TYPE_OID: return K_OID;
	case BSON_TYPE_BOOL: return K_BOOL;
	case BSON_TYPE_DATE_TIME: return K_DATE;
	case BSON_TYPE_TIMESTAMP: return K_TS;
	case BSON_TYPE_REGEX: return K_REGEX;
	case BSON_TYPE_DBPOINTER: return K_DBPTR;
	case BSON_TYPE_CODE: return K_CODE;
	case BSON_TYPE_CODEWSCOPE: return K_CWS;
	default: return K_MAXKEY;
	}
}

uint8_t key_type_byte(const bson_value_t *v)
{
	return rank_byte(v->value_type);
}

static void be32(struct kbuf *k, uint32_t x)
{
	uint8_t b[4] = {(uint8_t)(x >> 24), (uint8_t)(x >> 16),
			(uint8_t)(x >> 8), (uint8_t)x};

	kput(k, b, 4);
}

static void be64(struct kbuf *k, uint64_t x)
{
	be32(k, (uint32_t)(x >> 32));
	be32(k, (uint32_t)x);
}

static void escaped(struct kbuf *k, const char *s, size_t n)
{
	static const uint8_t nul[2] = {0, 0xFF}, end[2] = {0, 1};
	size_t from = 0;

	for (size_t i = 0; i < n && !k->over; i++) {
		if (s[i] != 0)
			continue;
		kput(k, s + from, i - from);
		kput(k, nul, 2);
		from = i + 1;
	}
	kput(k, s + from, n - from);
	kput(k, end, 2);
}

static void enc_value(struct kbuf *k, const bson_value_t *v);

static void enc_elems(struct kbuf *k, const uint8_t *data, uint32_t len,
		      bool doc)
{
	bson_iter_t it;

	if (bson_iter_init_from_data(&it, data, len)) {
		while (!k->over && bson_iter_next(&it)) {
			if (doc) {
				kbyte(k, rank_byte(bson_iter_type(&it)));
				kput(k, bson_iter_key(&it),
				     bson_iter_key_len(&it) + 1);
			}
			enc_value(k, bson_iter_value(&it));
		}
	}
	kbyte(k, 0);
}

static void enc_value(struct kbuf *k, const bson_value_t *v)
{
	const bson_value_t *x = v;
	uint32_t n;

	if (mql_is_number(v)) {
		key_number(k, v);
		return;
	}
	kbyte(k, rank_byte(v->value_type));
	switch (v->value_type) {
	case BSON_TYPE_UTF8:
		escaped(k, x->value.v_utf8.str, x->value.v_utf8.len);
		break;
	case BSON_TYPE_SYMBOL:
		escaped(k, x->value.v_symbol.symbol, x->value.v_symbol.len);
		break;
	case BSON_TYPE_CODE:
		escaped(k, x->value.v_code.code, x->value.v_code.code_len);
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		enc_elems(k, x->value.v_doc.data, x->value.v_doc.data_len,
			  v->value_type == BSON_TYPE_DOCUMENT);
		break;
	case BSON_TYPE_BINARY:
		n = x->value.v_binary.data_len;
		if (n < 255) {
			kbyte(k, (uint8_t)n);
		} else {
			kbyte(k, 0xFF);
			be32(k, n);
		}
		kbyte(k, (uint8_t)x->value.v_binary.subtype);
		kput(k, x->value.v_binary.data, n);
		break;
	case BSON_TYPE_OID: kput(k, &x->value.v_oid, 12); break;
	case BSON_TYPE_BOOL: kbyte(k, x->value.v_bool ? 1 : 0); break;
	case BSON_TYPE_DATE_TIME:
		be64(k, (uint64_t)x->value.v_datetime ^ (1ull << 63));
		break;
	case BSON_TYPE_TIMESTAMP:
		be32(k, x->value.v_timestamp.timestamp);
		be32(k, x->value.v_timestamp.increment);
		break;
	case BSON_TYPE_REGEX:
		kput(k, x->value.v_regex.regex,
		     strlen(x->value.v_regex.regex) + 1);
		kput(k, x->value.v_regex.options,
		     strlen(x->value.v_regex.options) + 1);
		break;
	case BSON_TYPE_DBPOINTER:
		be32(k, x->value.v_dbpointer.collection_len);
		kput(k, x->value.v_dbpointer.collection,
		     x->value.v_dbpointer.collection_len);
		kput(k, &x->value.v_dbpointer.oid, 12);
		break;
	case BSON_TYPE_CODEWSCOPE:
		escaped(k, x->value.v_codewscope.code,
			x->value.v_codewscope.code_len);
		enc_elems(k, x->value.v_codewscope.scope_data,
			  x->value.v_codewscope.scope_len, true);
		break;
	default: break; /* MinKey MaxKey null undefined: the type says all */
	}
}

static int too_long(struct mql_error *err, size_t cap)
{
	return mql_error_set(err, MQL_KeyTooLong,
			     "key too large to index: the limit is %zu bytes",
			     cap);
}

int mql_key_encode(const bson_value_t *v, bool desc, uint8_t *buf, size_t cap,
		   size_t *len, struct mql_error *err)
{
	struct kbuf k = {buf, *len, cap, *len > cap};

	enc_value(&k, v);
	if (k.over)
		return too_long(err, cap);
	for (size_t i = *len; desc && i < k.len; i++)
		buf[i] = (uint8_t)~buf[i];
	*len = k.len;
	return 0;
}

/* ---- decoding --------------------------------------------------------- */

struct dec {
	const uint8_t *p;
	size_t n, i;
	int depth;
};

/* An escaped string at d->i, unescaped into a new NUL-terminated buffer. */
static char *unescape(struct dec *d, size_t *len)
{
	char *s = bson_malloc(d->n - d->i + 1);
	size_t o = 0;

	while (d->i + 1 < d->n) {
		uint8_t c = d->p[d->i++];

		if (c != 0) {
			s[o++] = (char)c;
			continue;
		}
		c = d->p[d->i++];
		if (c == 1) {
			s[o] = '\0';
			*len = o;
			return s;
		}
		if (c != 0xFF)
			break;
		s[o++] = '\0';
	}
	bson_free(s);
	return NULL;
}

static bool take(struct dec *d, size_t n, const uint8_t **p)
{
	if (n > d->n - d->i)
		return false;
	*p = d->p + d->i;
	d->i += n;
	return true;
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t x = 0;

	for (int i = 0; i < n; i++)
		x = (x << 8) | p[i];
	return x;
}

/* At the end of a document's or array's elements: 1 (passed, one level
 * up), -1 (the key ends first), 0 (an element follows). */
static int elems_end(struct dec *d)
{
	if (d->i >= d->n)
		return -1;
	if (d->p[d->i] != 0)
		return 0;
	d->i++;
	d->depth--;
	return 1;
}

/* A binary value's length: one byte, or 0xFF then four big-endian. */
static bool take_bin_len(struct dec *d, uint32_t *n)
{
	const uint8_t *p;

	if (!take(d, 1, &p))
		return false;
	*n = p[0];
	if (*n == 0xFF) {
		if (!take(d, 4, &p))
			return false;
		*n = (uint32_t)get_be(p, 4);
	}
	return true;
}

static bool dec_value(struct dec *d, bson_t *out, const char *key);

/* Elements up to their 0x00, appended to out (documents with their names,
 * arrays numbered). */
static bool dec_elems(struct dec *d, bson_t *out, bool doc)
{
	uint32_t idx = 0;

	if (++d->depth > MQL_MAX_INPUT_DEPTH)
		return false;
	for (;;) {
		char buf[16];
		const char *name = buf;
		const uint8_t *nul;

		int end = elems_end(d);

		if (end)
			return end > 0;
		if (doc) {
			d->i++; /* the rank byte: the value's type says it */
			nul = memchr(d->p + d->i, 0, d->n - d->i);
			if (!nul)
				return false;
			name = (const char *)d->p + d->i;
			d->i = (size_t)(nul - d->p) + 1;
		} else {
			bson_uint32_to_string(idx++, &name, buf, sizeof(buf));
		}
		if (!dec_value(d, out, name))
			return false;
	}
}

static bool dec_sub(struct dec *d, bson_t *out, const char *key, bool doc)
{
	bson_t sub;

	if (doc ? !bson_append_document_begin(out, key, -1, &sub)
		: !bson_append_array_begin(out, key, -1, &sub))
		return false;
	if (!dec_elems(d, &sub, doc))
		return false; /* the caller drops the whole parent */
	return doc ? bson_append_document_end(out, &sub)
		   : bson_append_array_end(out, &sub);
}

static bool dec_string(struct dec *d, bson_t *out, const char *key, uint8_t t)
{
	size_t len;
	char *s = unescape(d, &len);
	bool ok = false;
	bson_t scope;

	if (!s)
		return false;
	if (t == K_STRING)
		ok = bson_append_utf8(out, key, -1, s, (int)len);
	else if (t == K_CODE)
		ok = bson_append_code(out, key, -1, s);
	else if (bson_init(&scope), dec_elems(d, &scope, true))
		ok = bson_append_code_with_scope(out, key, -1, s, &scope);
	if (t == K_CWS)
		bson_destroy(&scope);
	bson_free(s);
	return ok;
}

static bool dec_binary(struct dec *d, bson_t *out, const char *key)
{
	const uint8_t *p, *data;
	uint32_t n;

	if (!take_bin_len(d, &n) || !take(d, 1, &p) || !take(d, n, &data))
		return false;
	return bson_append_binary(out, key, -1, (bson_subtype_t)p[0], data, n);
}

static bool dec_fixed(struct dec *d, bson_t *out, const char *key, uint8_t t)
{
	const uint8_t *p;
	bson_oid_t oid;

	switch (t) {
	case K_OID:
		if (!take(d, 12, &p))
			return false;
		memcpy(&oid, p, 12);
		return bson_append_oid(out, key, -1, &oid);
	case K_BOOL:
		return take(d, 1, &p) && p[0] <= 1 &&
		       bson_append_bool(out, key, -1, p[0]);
	case K_DATE:
		return take(d, 8, &p) &&
		       bson_append_date_time(
			   out, key, -1,
			   (int64_t)(get_be(p, 8) ^ (1ull << 63)));
	case K_TS:
		return take(d, 8, &p) &&
		       bson_append_timestamp(out, key, -1,
					     (uint32_t)get_be(p, 4),
					     (uint32_t)get_be(p + 4, 4));
	}
	return false;
}

/* A regex element appended as it was encoded: bson_append_regex sorts
 * the options and drops the ones it does not know, and the key of what
 * it wrote would then not be the key decoded. */
static bool append_regex_raw(bson_t *out, const char *key, const char *pat,
			     size_t plen, const char *opt, size_t olen)
{
	size_t klen = strlen(key), n = 4 + 1 + klen + 1 + plen + 1 + olen + 2;
	uint8_t small[256], *buf = small, *q;
	bson_t tmp;
	bool ok;

	if (n > INT32_MAX || (n > sizeof(small) && !(buf = malloc(n))))
		return false;
	q = buf;
	*q++ = (uint8_t)n;
	*q++ = (uint8_t)(n >> 8);
	*q++ = (uint8_t)(n >> 16);
	*q++ = (uint8_t)(n >> 24);
	*q++ = BSON_TYPE_REGEX;
	memcpy(q, key, klen + 1);
	q += klen + 1;
	memcpy(q, pat, plen + 1);
	q += plen + 1;
	memcpy(q, opt, olen + 1);
	q += olen + 1;
	*q = 0;
	ok = bson_init_static(&tmp, buf, n) && bson_concat(out, &tmp);
	if (buf != small)
		free(buf);
	return ok;
}

static bool dec_cstrings(struct dec *d, bson_t *out, const char *key, uint8_t t)
{
	const uint8_t *p;
	char *coll;
	uint32_t n;
	bson_oid_t oid;
	bool ok;

	if (t == K_REGEX) {
		const char *pat = (const char *)d->p + d->i, *opt;
		const uint8_t *e1 = memchr(d->p + d->i, 0, d->n - d->i), *e2;

		if (!e1)
			return false;
		opt = (const char *)e1 + 1;
		e2 = memchr(e1 + 1, 0, (size_t)(d->p + d->n - (e1 + 1)));
		if (!e2)
			return false;
		d->i = (size_t)(e2 - d->p) + 1;
		return append_regex_raw(out, key, pat,
					(size_t)((const char *)e1 - pat), opt,
					(size_t)(e2 - e1) - 1);
	}
	if (!take(d, 4, &p))
		return false;
	n = (uint32_t)get_be(p, 4);
	if (!take(d, n, &p))
		return false;
	coll = bson_strndup((const char *)p, n);
	ok = take(d, 12, &p);
	if (ok) {
		memcpy(&oid, p, 12);
		ok = bson_append_dbpointer(out, key, -1, coll, &oid);
	}
	bson_free(coll);
	return ok;
}

static bool dec_value(struct dec *d, bson_t *out, const char *key)
{
	bson_value_t v;
	uint8_t t;
	long used;

	if (d->i >= d->n)
		return false;
	t = d->p[d->i++];
	switch (t) {
	case K_MINKEY: return bson_append_minkey(out, key, -1);
	case K_UNDEF: return bson_append_undefined(out, key, -1);
	case K_NULL: return bson_append_null(out, key, -1);
	case K_MAXKEY: return bson_append_maxkey(out, key, -1);
	case K_NAN:
	case K_NEGINF:
	case K_NEG:
	case K_ZERO:
	case K_POS:
	case K_POSINF:
		used = key_number_decode(t, d->p + d->i, d->n - d->i, &v);
		if (used < 0)
			return false;
		d->i += (size_t)used;
		return bson_append_value(out, key, -1, &v);
	case K_STRING:
	case K_CODE:
	case K_CWS: return dec_string(d, out, key, t);
	case K_DOC:
	case K_ARRAY: return dec_sub(d, out, key, t == K_DOC);
	case K_BIN: return dec_binary(d, out, key);
	case K_OID:
	case K_BOOL:
	case K_DATE:
	case K_TS: return dec_fixed(d, out, key, t);
	case K_REGEX:
	case K_DBPTR: return dec_cstrings(d, out, key, t);
	}
	return false;
}

/* ---- skipping: a value's length without decoding it -------------------- */

static bool skip_value(struct dec *d);

/* Past a string's escaped bytes and its 0x00 0x01 end. */
static bool skip_string(struct dec *d)
{
	while (d->i + 1 < d->n) {
		if (d->p[d->i++] != 0)
			continue;
		if (d->p[d->i] == 1) {
			d->i++;
			return true;
		}
		if (d->p[d->i++] != 0xFF)
			return false;
	}
	return false;
}

static bool skip_cstring(struct dec *d)
{
	const uint8_t *nul = memchr(d->p + d->i, 0, d->n - d->i);

	if (!nul)
		return false;
	d->i = (size_t)(nul - d->p) + 1;
	return true;
}

static bool skip_elems(struct dec *d, bool doc)
{
	if (++d->depth > MQL_MAX_INPUT_DEPTH)
		return false;
	for (;;) {
		int end = elems_end(d);

		if (end)
			return end > 0;
		if (doc && (++d->i, !skip_cstring(d)))
			return false;
		if (!skip_value(d))
			return false;
	}
}

static bool skip_number(struct dec *d, uint8_t t)
{
	const uint8_t *p = d->p + d->i;
	bson_value_t v;
	long used;

	if (t != K_NEG && t != K_POS)
		return true; /* NaN, the infinities and zero: the byte alone */
	/* an exact one is 11 bytes (the 11th says so), others have a tail */
	if (d->n - d->i >= 11 && (uint8_t)(t == K_NEG ? ~p[10] : p[10]) == 1)
		used = 11;
	else
		used = key_number_decode(t, p, d->n - d->i, &v);
	if (used < 0)
		return false;
	d->i += (size_t)used;
	return true;
}

static bool skip_value(struct dec *d)
{
	const uint8_t *p;
	uint8_t t;

	if (d->i >= d->n)
		return false;
	t = d->p[d->i++];
	switch (t) {
	case K_MINKEY:
	case K_UNDEF:
	case K_NULL:
	case K_MAXKEY: return true;
	case K_NAN:
	case K_NEGINF:
	case K_NEG:
	case K_ZERO:
	case K_POS:
	case K_POSINF: return skip_number(d, t);
	case K_STRING:
	case K_CODE: return skip_string(d);
	case K_CWS: return skip_string(d) && skip_elems(d, true);
	case K_DOC:
	case K_ARRAY: return skip_elems(d, t == K_DOC);
	case K_BIN: {
		uint32_t n;

		return take_bin_len(d, &n) && take(d, 1, &p) && take(d, n, &p);
	}
	case K_OID: return take(d, 12, &p);
	case K_BOOL: return take(d, 1, &p);
	case K_DATE:
	case K_TS: return take(d, 8, &p);
	case K_REGEX: return skip_cstring(d) && skip_cstring(d);
	case K_DBPTR:
		return take(d, 4, &p) && take(d, (size_t)get_be(p, 4), &p) &&
		       take(d, 12, &p);
	}
	return false;
}

long mql_key_skip(const uint8_t *key, size_t len, bool desc)
{
	uint8_t inv[512];
	struct dec d = {key, len, 0, 0};

	if (desc) {
		/* a descending part is its bytes inverted; its length is that
		 * of the ascending encoding, read from a copy put back */
		if (len > sizeof(inv))
			len = sizeof(inv);
		for (size_t i = 0; i < len; i++)
			inv[i] = (uint8_t)~key[i];
		d.p = inv;
		d.n = len;
	}
	return skip_value(&d) ? (long)d.i : -1;
}

int mql_key_decode(const uint8_t *key, size_t len, bool desc, bson_t *out,
		   const char *field, size_t *used, struct mql_error *err)
{
	uint8_t *inv = NULL;
	struct dec d = {key, len, 0, 0};
	bson_t tmp = BSON_INITIALIZER; /* out sees only a whole value */
	bool ok;

	if (desc) {
		inv = bson_malloc(len ? len : 1);
		for (size_t i = 0; i < len; i++)
			inv[i] = (uint8_t)~key[i];
		d.p = inv;
	}
	ok = dec_value(&d, &tmp, field) && bson_concat(out, &tmp);
	bson_free(inv);
	bson_destroy(&tmp);
	if (!ok)
		return mql_error_set(err, MQL_InvalidBSON,
				     "not an index key: bad bytes at %zu", d.i);
	if (used)
		*used = d.i;
	return 0;
}

/* ---- the primary key ------------------------------------------------- */

int mql_key_id(const bson_value_t *id, uint8_t *buf, size_t *len,
	       struct mql_error *err)
{
	*len = 0;
	switch (id->value_type) {
	case BSON_TYPE_ARRAY:
		return mql_error_set(err, MQL_BadValue,
				     "can't use an array for _id");
	case BSON_TYPE_REGEX:
		return mql_error_set(err, MQL_BadValue,
				     "can't use a regex for _id");
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_EOD:
		return mql_error_set(err, MQL_BadValue,
				     "can't use a undefined for _id");
	default: break;
	}
	return mql_key_encode(id, false, buf, MQL_KEY_ID_MAX, len, err);
}

int mql_key_id_decode(const uint8_t *key, size_t len, bson_t *out,
		      struct mql_error *err)
{
	size_t used = 0;

	if (mql_key_decode(key, len, false, out, "_id", &used, err) < 0)
		return -1;
	if (used != len)
		return mql_error_set(err, MQL_InvalidBSON,
				     "not a primary key: %zu bytes after the "
				     "_id",
				     len - used);
	return 0;
}
