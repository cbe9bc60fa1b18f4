/* value.c - MongoDB's order, equality and hash of BSON values, the check
 * that bounds every BSON document this library reads, and the numbers'
 * arithmetic shared by updates and $group (mql_value.h, mql_int.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mql_int.h"
#include "mql_value.h"

/* ---- the check ------------------------------------------------------ */

static int check_fail(struct mql_error *err)
{
	return mql_error_set(err, MQL_InvalidBSON, "invalid BSON");
}

/* One level of the walk's stack.  A struct around the iterator: libbson
 * aligns bson_iter_t to 128 bytes by an attribute on its typedef, which
 * does not pad its size, so a plain array of them would misalign every
 * other one; a struct member is padded. */
struct level {
	bson_iter_t it;
	uint32_t next; /* an array's: the key its next element must have */
	bool arr;
};

/* Is k the decimal form of i, as an array's i-th key must be?  The BSON
 * spec wants an array's keys to be "0", "1", ... in order; libbson warns
 * on stderr, once for every copy, of an array whose first key is not "0",
 * and MongoDB's dotted paths name elements by position: an array with
 * other keys is refused where it comes in, rather than stored, copied and
 * logged by every request that touches it. */
static bool index_key(const char *k, uint32_t i)
{
	const char *want;
	char buf[16];

	bson_uint32_to_string(i, &want, buf, sizeof(buf));
	return !strcmp(k, want);
}

/* Levels kept on the C stack: every document of an ordinary request
 * nests less, so its check allocates nothing (a heap stack of
 * max_depth + 1 levels, 25 KiB for a command, was a third of the check's
 * cost and made malloc consolidate its free lists on every request). */
#define CHECK_SHALLOW 8

/* The walk's stack, at least need + 1 levels: *st grown (on the heap,
 * the levels so far copied; *heap set) up to max + 1.  0, or -1. */
static int check_grow(struct level **st, int *cap, int need, int max, int *heap)
{
	struct level *n;
	int c = *cap;

	if (need < c)
		return 0;
	while (c <= need)
		c *= 2;
	if (c > max + 1)
		c = max + 1;
	/* bson_iter_t wants 128-byte alignment, which malloc does not give */
	if (posix_memalign((void **)&n, 128, sizeof(*n) * (size_t)c))
		return -1;
	memcpy(n, *st, sizeof(*n) * (size_t)*cap);
	if (*heap)
		free(*st);
	*st = n;
	*cap = c;
	*heap = 1;
	return 0;
}

/* Walks every element with an explicit stack of iterators, so that a
 * hostile document nested a million levels deep costs no stack. */
int mql_bson_check(const uint8_t *data, size_t len, size_t max_size,
		   int max_depth, struct mql_error *err)
{
	struct level shallow[CHECK_SHALLOW], *stack = shallow;
	int depth = 0, rc = -1, cap = CHECK_SHALLOW, heap = 0;
	uint32_t hdr;

	if (len < 5)
		return check_fail(err);
	memcpy(&hdr, data, 4);
	hdr = BSON_UINT32_FROM_LE(hdr);
	if (hdr != len)
		return check_fail(err);
	if (len > max_size)
		return mql_error_set(err, MQL_BSONObjectTooLarge,
				     "BSONObj size: %zu (0x%zx) is invalid. "
				     "Size must be between 0 and %zu",
				     len, len, max_size);
	if (!bson_iter_init_from_data(&stack[0].it, data, len))
		goto bad;
	stack[0].arr = false;
	for (;;) {
		bson_iter_t *it = &stack[depth].it;
		const uint8_t *sub;
		uint32_t sublen;

		if (!bson_iter_next(it)) {
			if (it->err_off)
				goto bad;
			if (depth == 0)
				break;
			depth--;
			continue;
		}
		if (stack[depth].arr &&
		    !index_key(bson_iter_key(it), stack[depth].next++)) {
			mql_error_set(err, MQL_InvalidBSON,
				      "invalid BSON: an array's element %u has "
				      "a key other than \"%u\" (an array's "
				      "keys are \"0\", \"1\", ... in order)",
				      stack[depth].next - 1,
				      stack[depth].next - 1);
			goto fail;
		}
		if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
			if (depth + 1 >= max_depth) {
				mql_error_set(err, MQL_Overflow,
					      "BSONObj exceeds maximum nested "
					      "object depth: %d",
					      max_depth);
				goto fail;
			}
			if (check_grow(&stack, &cap, depth + 1, max_depth,
				       &heap))
				abort();
			it = &stack[depth].it; /* the stack may have moved */
			/* libbson's iterator reads a nested document whose
			 * last byte is not 0, bson_iter_init_from_data (and
			 * so the comparisons) will not: refuse it here */
			if (BSON_ITER_HOLDS_DOCUMENT(it))
				bson_iter_document(it, &sublen, &sub);
			else
				bson_iter_array(it, &sublen, &sub);
			if (!sub || sublen < 5 || sub[sublen - 1] != 0 ||
			    !bson_iter_recurse(it, &stack[depth + 1].it))
				goto bad;
			stack[depth + 1].arr = BSON_ITER_HOLDS_ARRAY(it);
			stack[depth + 1].next = 0;
			depth++;
		} else if (BSON_ITER_HOLDS_CODEWSCOPE(it)) {
			uint32_t codelen;

			bson_iter_codewscope(it, &codelen, &sublen, &sub);
			if (!sub || depth + 1 >= max_depth)
				goto bad;
			if (check_grow(&stack, &cap, depth + 1, max_depth,
				       &heap))
				abort();
			it = &stack[depth].it; /* the stack may have moved */
			if (!bson_iter_init_from_data(&stack[depth + 1].it, sub,
						      sublen))
				goto bad;
			stack[depth + 1].arr = false;
			depth++;
		}
	}
	rc = 0;
	goto fail;
bad:
	check_fail(err);
fail:
	if (heap)
		free(stack);
	return rc;
}

/* ---- types ---------------------------------------------------------- */

int mql_type_rank(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_MINKEY: return -1;
	case BSON_TYPE_EOD:
	case BSON_TYPE_UNDEFINED: return 0;
	case BSON_TYPE_NULL: return 5;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128: return 10;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL: return 15;
	case BSON_TYPE_DOCUMENT: return 20;
	case BSON_TYPE_ARRAY: return 25;
	case BSON_TYPE_BINARY: return 30;
	case BSON_TYPE_OID: return 35;
	case BSON_TYPE_BOOL: return 40;
	case BSON_TYPE_DATE_TIME: return 45;
	case BSON_TYPE_TIMESTAMP: return 47;
	case BSON_TYPE_REGEX: return 50;
	case BSON_TYPE_DBPOINTER: return 55;
	case BSON_TYPE_CODE: return 60;
	case BSON_TYPE_CODEWSCOPE: return 65;
	case BSON_TYPE_MAXKEY: return 127;
	default: return 126;
	}
}

const char *mql_type_name(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_DOUBLE: return "double";
	case BSON_TYPE_UTF8: return "string";
	case BSON_TYPE_DOCUMENT: return "object";
	case BSON_TYPE_ARRAY: return "array";
	case BSON_TYPE_BINARY: return "binData";
	case BSON_TYPE_UNDEFINED: return "undefined";
	case BSON_TYPE_OID: return "objectId";
	case BSON_TYPE_BOOL: return "bool";
	case BSON_TYPE_DATE_TIME: return "date";
	case BSON_TYPE_NULL: return "null";
	case BSON_TYPE_REGEX: return "regex";
	case BSON_TYPE_DBPOINTER: return "dbPointer";
	case BSON_TYPE_CODE: return "javascript";
	case BSON_TYPE_SYMBOL: return "symbol";
	case BSON_TYPE_CODEWSCOPE: return "javascriptWithScope";
	case BSON_TYPE_INT32: return "int";
	case BSON_TYPE_TIMESTAMP: return "timestamp";
	case BSON_TYPE_INT64: return "long";
	case BSON_TYPE_DECIMAL128: return "decimal";
	case BSON_TYPE_MINKEY: return "minKey";
	case BSON_TYPE_MAXKEY: return "maxKey";
	case BSON_TYPE_EOD: return "missing";
	default: return "unknown";
	}
}

bool mql_is_number(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128: return true;
	default: return false;
	}
}

double mql_number_double(const bson_value_t *v)
{
	struct mql_dec d;

	switch (v->value_type) {
	case BSON_TYPE_DOUBLE: return v->value.v_double;
	case BSON_TYPE_INT32: return v->value.v_int32;
	case BSON_TYPE_INT64: return (double)v->value.v_int64;
	case BSON_TYPE_DECIMAL128:
		mql_dec_unpack(&v->value.v_decimal128, &d);
		return mql_dec_to_double(&d);
	default: return 0;
	}
}

bool mql_number_isnan(const bson_value_t *v)
{
	struct mql_dec d;

	if (v->value_type == BSON_TYPE_DOUBLE)
		return isnan(v->value.v_double);
	if (v->value_type == BSON_TYPE_DECIMAL128) {
		mql_dec_unpack(&v->value.v_decimal128, &d);
		return d.cls == MQL_DEC_NAN;
	}
	return false;
}

/* ---- order ---------------------------------------------------------- */

static int sign(int64_t x)
{
	return (x > 0) - (x < 0);
}

/* int64 against double without rounding either (2^63 is not an int64). */
static int cmp_int64_double(int64_t a, double b)
{
	double t;

	if (isnan(b))
		return 1;
	if (b >= 9223372036854775808.0)
		return -1;
	if (b < -9223372036854775808.0)
		return 1;
	t = trunc(b);
	if (a != (int64_t)t)
		return a < (int64_t)t ? -1 : 1;
	return b > t ? -1 : b < t ? 1 : 0;
}

static int cmp_double(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(b) - isnan(a);
	return (a > b) - (a < b);
}

static int64_t as_int64(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32
						: v->value.v_int64;
}

static int cmp_numbers(const bson_value_t *a, const bson_value_t *b)
{
	bson_type_t ta = a->value_type, tb = b->value_type;
	struct mql_dec da, db;

	if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
		if (ta != BSON_TYPE_DECIMAL128)
			return -cmp_numbers(b, a);
		mql_dec_unpack(&a->value.v_decimal128, &da);
		if (tb == BSON_TYPE_DECIMAL128) {
			mql_dec_unpack(&b->value.v_decimal128, &db);
			return mql_dec_cmp(&da, &db);
		}
		if (tb == BSON_TYPE_DOUBLE)
			return mql_dec_cmp_double(&da, b->value.v_double);
		return mql_dec_cmp_int64(&da, as_int64(b));
	}
	if (ta == BSON_TYPE_DOUBLE && tb == BSON_TYPE_DOUBLE)
		return cmp_double(a->value.v_double, b->value.v_double);
	if (ta == BSON_TYPE_DOUBLE)
		return -cmp_int64_double(as_int64(b), a->value.v_double);
	if (tb == BSON_TYPE_DOUBLE)
		return cmp_int64_double(as_int64(a), b->value.v_double);
	return sign((as_int64(a) > as_int64(b)) - (as_int64(a) < as_int64(b)));
}

static int cmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	int m = memcmp(a, b, alen < blen ? alen : blen);

	if (m)
		return m < 0 ? -1 : 1;
	return (alen > blen) - (alen < blen);
}

static int cmp_docs(const uint8_t *a, uint32_t alen, const uint8_t *b,
		    uint32_t blen);

static int cmp_same_rank(const bson_value_t *a, const bson_value_t *b)
{
	const bson_value_t *x = a, *y = b;
	int m;

	switch (a->value_type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128: return cmp_numbers(a, b);
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL: {
		const char *s = x->value_type == BSON_TYPE_UTF8
				    ? x->value.v_utf8.str
				    : x->value.v_symbol.symbol;
		const char *t = y->value_type == BSON_TYPE_UTF8
				    ? y->value.v_utf8.str
				    : y->value.v_symbol.symbol;
		size_t sl = x->value_type == BSON_TYPE_UTF8
				? x->value.v_utf8.len
				: x->value.v_symbol.len;
		size_t tl = y->value_type == BSON_TYPE_UTF8
				? y->value.v_utf8.len
				: y->value.v_symbol.len;

		return cmp_bytes(s, sl, t, tl);
	}
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return cmp_docs(a->value.v_doc.data, a->value.v_doc.data_len,
				b->value.v_doc.data, b->value.v_doc.data_len);
	case BSON_TYPE_BINARY:
		if (a->value.v_binary.data_len != b->value.v_binary.data_len)
			return a->value.v_binary.data_len <
				       b->value.v_binary.data_len
				   ? -1
				   : 1;
		if (a->value.v_binary.subtype != b->value.v_binary.subtype)
			return a->value.v_binary.subtype <
				       b->value.v_binary.subtype
				   ? -1
				   : 1;
		return cmp_bytes(
		    a->value.v_binary.data, a->value.v_binary.data_len,
		    b->value.v_binary.data, b->value.v_binary.data_len);
	case BSON_TYPE_OID:
		return cmp_bytes(&a->value.v_oid, 12, &b->value.v_oid, 12);
	case BSON_TYPE_BOOL: return (int)a->value.v_bool - (int)b->value.v_bool;
	case BSON_TYPE_DATE_TIME:
		return sign((a->value.v_datetime > b->value.v_datetime) -
			    (a->value.v_datetime < b->value.v_datetime));
	case BSON_TYPE_TIMESTAMP: {
		uint64_t p = ((uint64_t)a->value.v_timestamp.timestamp << 32) |
			     a->value.v_timestamp.increment;
		uint64_t q = ((uint64_t)b->value.v_timestamp.timestamp << 32) |
			     b->value.v_timestamp.increment;

		return (p > q) - (p < q);
	}
	case BSON_TYPE_REGEX:
		m = strcmp(a->value.v_regex.regex, b->value.v_regex.regex);
		if (!m)
			m = strcmp(a->value.v_regex.options,
				   b->value.v_regex.options);
		return sign(m);
	case BSON_TYPE_DBPOINTER:
		if (a->value.v_dbpointer.collection_len !=
		    b->value.v_dbpointer.collection_len)
			return a->value.v_dbpointer.collection_len <
				       b->value.v_dbpointer.collection_len
				   ? -1
				   : 1;
		m = cmp_bytes(a->value.v_dbpointer.collection,
			      a->value.v_dbpointer.collection_len,
			      b->value.v_dbpointer.collection,
			      b->value.v_dbpointer.collection_len);
		if (!m)
			m = cmp_bytes(&a->value.v_dbpointer.oid, 12,
				      &b->value.v_dbpointer.oid, 12);
		return m;
	case BSON_TYPE_CODE:
		return cmp_bytes(a->value.v_code.code, a->value.v_code.code_len,
				 b->value.v_code.code,
				 b->value.v_code.code_len);
	case BSON_TYPE_CODEWSCOPE:
		m = cmp_bytes(
		    a->value.v_codewscope.code, a->value.v_codewscope.code_len,
		    b->value.v_codewscope.code, b->value.v_codewscope.code_len);
		if (!m)
			m = cmp_docs(a->value.v_codewscope.scope_data,
				     a->value.v_codewscope.scope_len,
				     b->value.v_codewscope.scope_data,
				     b->value.v_codewscope.scope_len);
		return m;
	default: return 0; /* MinKey, MaxKey, null, undefined */
	}
}

int mql_value_cmp(const bson_value_t *a, const bson_value_t *b)
{
	int ra = mql_type_rank(a->value_type);
	int rb = mql_type_rank(b->value_type);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	return cmp_same_rank(a, b);
}

/* BSONObj::woCompare: element by element, each by type rank, then field
 * name, then value; a document that runs out first is the smaller. */
static int cmp_docs(const uint8_t *a, uint32_t alen, const uint8_t *b,
		    uint32_t blen)
{
	bson_iter_t ia, ib;
	bool ma, mb;

	if (!bson_iter_init_from_data(&ia, a, alen) ||
	    !bson_iter_init_from_data(&ib, b, blen))
		return cmp_bytes(a, alen, b, blen);
	for (;;) {
		int ra, rb, m;

		ma = bson_iter_next(&ia);
		mb = bson_iter_next(&ib);
		if (!ma || !mb)
			return (int)ma - (int)mb;
		ra = mql_type_rank(bson_iter_type(&ia));
		rb = mql_type_rank(bson_iter_type(&ib));
		if (ra != rb)
			return ra < rb ? -1 : 1;
		m = strcmp(bson_iter_key(&ia), bson_iter_key(&ib));
		if (m)
			return m < 0 ? -1 : 1;
		m = cmp_same_rank(bson_iter_value(&ia), bson_iter_value(&ib));
		if (m)
			return m;
	}
}

int mql_doc_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b,
		uint32_t blen)
{
	return cmp_docs(a, alen, b, blen);
}

bool mql_value_eq(const bson_value_t *a, const bson_value_t *b)
{
	return mql_value_cmp(a, b) == 0;
}

/* ---- hash ----------------------------------------------------------- */

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t hash_docs(uint64_t h, const uint8_t *data, uint32_t len);

static uint64_t hash_value(uint64_t h, const bson_value_t *v)
{
	int rank = mql_type_rank(v->value_type);

	h = mix(h, &rank, sizeof(rank));
	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128: {
		/* equal numbers of any type round to the same double */
		double d = mql_number_double(v);

		if (isnan(d))
			d = NAN;
		if (d == 0)
			d = 0;
		return mix(h, &d, sizeof(d));
	}
	case BSON_TYPE_UTF8:
		return mix(h, v->value.v_utf8.str, v->value.v_utf8.len);
	case BSON_TYPE_SYMBOL:
		return mix(h, v->value.v_symbol.symbol, v->value.v_symbol.len);
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return hash_docs(h, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	case BSON_TYPE_BINARY:
		h = mix(h, &v->value.v_binary.subtype, 1);
		return mix(h, v->value.v_binary.data,
			   v->value.v_binary.data_len);
	case BSON_TYPE_OID: return mix(h, &v->value.v_oid, 12);
	case BSON_TYPE_BOOL: return mix(h, &v->value.v_bool, 1);
	case BSON_TYPE_DATE_TIME: return mix(h, &v->value.v_datetime, 8);
	case BSON_TYPE_TIMESTAMP: return mix(h, &v->value.v_timestamp, 8);
	case BSON_TYPE_REGEX:
		h = mix(h, v->value.v_regex.regex,
			strlen(v->value.v_regex.regex));
		return mix(h, v->value.v_regex.options,
			   strlen(v->value.v_regex.options));
	case BSON_TYPE_CODE:
		return mix(h, v->value.v_code.code, v->value.v_code.code_len);
	default: return h;
	}
}

static uint64_t hash_docs(uint64_t h, const uint8_t *data, uint32_t len)
{
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, data, len))
		return h;
	while (bson_iter_next(&it)) {
		h = mix(h, bson_iter_key(&it), strlen(bson_iter_key(&it)));
		h = hash_value(h, bson_iter_value(&it));
	}
	return h;
}

uint64_t mql_value_hash(const bson_value_t *v)
{
	return hash_value(0xcbf29ce484222325ull, v);
}

/* ---- printing ------------------------------------------------------- */

static void cut_copy(char *buf, size_t n, const char *s, size_t len)
{
	if (n == 0)
		return;
	if (len < n) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		return;
	}
	memcpy(buf, s, n - 1);
	buf[n - 1] = '\0';
	if (n > 4)
		memcpy(buf + n - 4, "...", 4);
}

char *mql_doc_str(const uint8_t *data, uint32_t len, char *buf, size_t n)
{
	bson_t b;
	char *json = NULL;
	size_t jl = 0;

	if (bson_init_static(&b, data, len))
		json = bson_as_relaxed_extended_json(&b, &jl);
	if (!json) {
		cut_copy(buf, n, "?", 1);
		return buf;
	}
	cut_copy(buf, n, json, jl);
	bson_free(json);
	return buf;
}

char *mql_value_str(const bson_value_t *v, char *buf, size_t n)
{
	bson_t b = BSON_INITIALIZER;
	char *json = NULL;
	size_t jl = 0;
	static const char pre[] = "{ \"\" : ";

	if (v->value_type == BSON_TYPE_EOD) {
		cut_copy(buf, n, "missing", 7);
		return buf;
	}
	if (bson_append_value(&b, "", 0, v))
		json = bson_as_relaxed_extended_json(&b, &jl);
	bson_destroy(&b);
	if (!json || jl < sizeof(pre) + 1) {
		bson_free(json);
		cut_copy(buf, n, "?", 1);
		return buf;
	}
	cut_copy(buf, n, json + sizeof(pre) - 1, jl - (sizeof(pre) - 1) - 2);
	bson_free(json);
	return buf;
}

/* ---- arithmetic ----------------------------------------------------- */

void mql_num_to_dec(const bson_value_t *v, struct mql_dec *out)
{
	switch (v->value_type) {
	case BSON_TYPE_DECIMAL128:
		mql_dec_unpack(&v->value.v_decimal128, out);
		break;
	case BSON_TYPE_DOUBLE:
		mql_dec_from_double(v->value.v_double, out);
		break;
	default: mql_dec_from_int64(as_int64(v), out); break;
	}
}

static bool is_int(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_INT32 ||
	       v->value_type == BSON_TYPE_INT64;
}

static int num_op(const bson_value_t *a, const bson_value_t *b, bool mul,
		  bson_value_t *out)
{
	memset(out, 0, sizeof(*out));
	if (a->value_type == BSON_TYPE_DECIMAL128 ||
	    b->value_type == BSON_TYPE_DECIMAL128) {
		struct mql_dec x, y, r;

		mql_num_to_dec(a, &x);
		mql_num_to_dec(b, &y);
		if (mul)
			mql_dec_mul(&x, &y, &r);
		else
			mql_dec_add(&x, &y, &r);
		out->value_type = BSON_TYPE_DECIMAL128;
		mql_dec_pack(&r, &out->value.v_decimal128);
		return 0;
	}
	if (is_int(a) && is_int(b)) {
		int64_t r;
		bool ovf =
		    mul ? __builtin_mul_overflow(as_int64(a), as_int64(b), &r)
			: __builtin_add_overflow(as_int64(a), as_int64(b), &r);

		if (ovf)
			return -1;
		if (a->value_type == BSON_TYPE_INT32 &&
		    b->value_type == BSON_TYPE_INT32 && r >= INT32_MIN &&
		    r <= INT32_MAX) {
			out->value_type = BSON_TYPE_INT32;
			out->value.v_int32 = (int32_t)r;
		} else {
			out->value_type = BSON_TYPE_INT64;
			out->value.v_int64 = r;
		}
		return 0;
	}
	out->value_type = BSON_TYPE_DOUBLE;
	out->value.v_double = mul ? mql_number_double(a) * mql_number_double(b)
				  : mql_number_double(a) + mql_number_double(b);
	return 0;
}

int mql_num_add(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
	return num_op(a, b, false, out);
}

int mql_num_mul(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
	return num_op(a, b, true, out);
}

/* ---- small helpers -------------------------------------------------- */

int mql_grow(void **v, size_t *cap, size_t len, size_t n, size_t sz)
{
	size_t want, ncap;

	if (n > SIZE_MAX / sz - len)
		return -1;
	want = len + n;
	if (want <= *cap)
		return 0;
	ncap = *cap ? *cap : 8;
	while (ncap < want)
		ncap = ncap > SIZE_MAX / 2 / sz ? want : ncap * 2;
	*v = bson_realloc(*v, ncap * sz);
	*cap = ncap;
	return 0;
}

bool mql_append(bson_t *b, const char *key, int keylen, const bson_value_t *v)
{
	return bson_append_value(b, key, keylen, v);
}

void mql_doc_value(const bson_t *b, bson_type_t t, bson_value_t *out)
{
	memset(out, 0, sizeof(*out));
	out->value_type = t;
	out->value.v_doc.data = (uint8_t *)bson_get_data(b);
	out->value.v_doc.data_len = b->len;
}

long mql_index_of(const char *s, size_t len)
{
	long v = 0;

	if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= INT32_MAX ? v : -1;
}

static void msort_rec(char *a, char *tmp, size_t n, size_t sz,
		      int (*cmp)(const void *, const void *, void *), void *ctx)
{
	size_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return;
	msort_rec(a, tmp, h, sz, cmp, ctx);
	msort_rec(a + h * sz, tmp, n - h, sz, cmp, ctx);
	while (i < h && j < n) {
		if (cmp(a + j * sz, a + i * sz, ctx) < 0)
			memcpy(tmp + k++ * sz, a + j++ * sz, sz);
		else
			memcpy(tmp + k++ * sz, a + i++ * sz, sz);
	}
	while (i < h)
		memcpy(tmp + k++ * sz, a + i++ * sz, sz);
	while (j < n)
		memcpy(tmp + k++ * sz, a + j++ * sz, sz);
	memcpy(a, tmp, n * sz);
}

void mql_msort(void *base, size_t n, size_t sz,
	       int (*cmp)(const void *a, const void *b, void *ctx), void *ctx)
{
	char *tmp;

	if (n < 2)
		return;
	tmp = bson_malloc(n * sz);
	msort_rec(base, tmp, n, sz, cmp, ctx);
	bson_free(tmp);
}
