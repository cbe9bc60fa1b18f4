/* test_mql_key.c - kvd/mongo's index keys: that memcmp of two encodings
 * has the sign of mql_value_cmp for random BSON values of every type
 * (numbers of every type on one line above all), that a key decodes to an
 * equal value, MongoDB's keys of documents for an index ("Multikey
 * Indexes", "Compound Indexes", "Sparse Indexes": one key per element,
 * parallel arrays refused), and that the scan bounds for a filter hold
 * every key of every document the filter matches. */
#include <math.h>

#include "mql_key.h"
#include "mql_value.h"
#include "mqltest.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ---- a generator of values ------------------------------------------- */

/* Numbers around a few anchors, in every type, so that equal and nearly
 * equal numbers of different types meet often. */
static void gen_number(bson_t *b, const char *k)
{
	static const double anchors[] = {0,
					 1,
					 -1,
					 0.1,
					 0.5,
					 2,
					 1e15,
					 9007199254740992.0,	/* 2^53 */
					 9223372036854775808.0, /* 2^63 */
					 1e30,
					 -1e30,
					 1e300,
					 5e-324,
					 123.456,
					 -7.25,
					 4294967296.0};
	double a = anchors[rnd() % (sizeof(anchors) / sizeof(*anchors))];
	bson_decimal128_t dec;
	char s[64];
	int64_t i = (int64_t)(rnd() % 5) - 2;

	switch (rnd() % 9) {
	case 0:
		if (fabs(a) < 2e9)
			bson_append_int32(b, k, -1, (int32_t)a + (int32_t)i);
		else
			bson_append_int32(b, k, -1, (int32_t)rnd());
		break;
	case 1:
		if (fabs(a) < 9.2e18)
			bson_append_int64(b, k, -1, (int64_t)a + i);
		else
			bson_append_int64(b, k, -1,
					  i < 0 ? INT64_MIN + (i + 2)
						: INT64_MAX - i);
		break;
	case 2: bson_append_double(b, k, -1, a); break;
	case 3: /* a neighbour of a double */
		bson_append_double(b, k, -1,
				   nextafter(a, i < 0 ? -INFINITY : INFINITY));
		break;
	case 4: /* a decimal written from the anchor, rounded or exact */
		snprintf(s, sizeof(s), "%.*g", (int)(rnd() % 25) + 1, a);
		bson_decimal128_from_string(s, &dec);
		bson_append_decimal128(b, k, -1, &dec);
		break;
	case 5: /* a decimal with many digits or a far exponent */
		snprintf(s, sizeof(s), "%s%llu%sE%d", rnd() % 2 ? "-" : "",
			 (unsigned long long)(rnd() % 100000000000000000ull),
			 rnd() % 2 ? "0000000000000000" : "",
			 (int)(rnd() % 12400) - 6200);
		bson_decimal128_from_string(s, &dec);
		bson_append_decimal128(b, k, -1, &dec);
		break;
	case 6: { /* random double bits */
		uint64_t u = rnd();
		double d;

		memcpy(&d, &u, 8);
		bson_append_double(b, k, -1, d);
		break;
	}
	case 7: {
		static const char *const sp[] = {
		    "NaN",    "Infinity", "-Infinity", "-0",
		    "0E+300", "1E+6144",  "1E-6176",   "-1E-6176"};

		bson_decimal128_from_string(sp[rnd() % 8], &dec);
		bson_append_decimal128(b, k, -1, &dec);
		break;
	}
	default:
		bson_append_double(
		    b, k, -1, rnd() % 2 ? NAN : (rnd() % 2 ? -0.0 : INFINITY));
	}
}

static void gen_value(bson_t *b, const char *k, int depth);

static void gen_container(bson_t *b, const char *k, int depth, bool doc)
{
	static const char *const names[] = {"a", "b", "ab", "", "_id", "a\x7f"};
	bson_t sub;
	int n = (int)(rnd() % 4);

	if (doc)
		bson_append_document_begin(b, k, -1, &sub);
	else
		bson_append_array_begin(b, k, -1, &sub);
	for (int i = 0; i < n; i++) {
		char buf[16];

		snprintf(buf, sizeof(buf), "%d", i);
		gen_value(&sub, doc ? names[rnd() % 6] : buf, depth + 1);
	}
	if (doc)
		bson_append_document_end(b, &sub);
	else
		bson_append_array_end(b, &sub);
}

static void gen_string(bson_t *b, const char *k, int t)
{
	char s[8];
	int n = (int)(rnd() % 5);
	static const char alpha[] = {'a', 'b', 0, 1, (char)0xFF, 'a'};

	for (int i = 0; i < n; i++)
		s[i] = alpha[rnd() % sizeof(alpha)];
	s[n] = 0;
	if (t == 0)
		bson_append_utf8(b, k, -1, s, n);
	else if (t == 1)
		bson_append_symbol(b, k, -1, s, n);
	else
		bson_append_code(b, k, -1, n && s[0] ? s : "x");
}

static void gen_value(bson_t *b, const char *k, int depth)
{
	bson_oid_t oid;
	uint8_t bin[4] = {(uint8_t)rnd(), 0, 0xFF, 1};

	switch (rnd() % (depth > 2 ? 16 : 18)) {
	case 0:
	case 1:
	case 2:
	case 3: gen_number(b, k); break;
	case 4: gen_string(b, k, 0); break;
	case 5: gen_string(b, k, (int)(rnd() % 3)); break;
	case 6:
		bson_append_binary(b, k, -1, (bson_subtype_t)(rnd() % 3), bin,
				   (uint32_t)(rnd() % 5));
		break;
	case 7:
		memset(&oid, (int)(rnd() % 3) * 0x7F, 12);
		oid.bytes[11] = (uint8_t)rnd();
		bson_append_oid(b, k, -1, &oid);
		break;
	case 8: bson_append_bool(b, k, -1, rnd() % 2); break;
	case 9:
		bson_append_date_time(b, k, -1, (int64_t)(rnd() % 5) - 2);
		break;
	case 10:
		bson_append_timestamp(b, k, -1, (uint32_t)(rnd() % 3),
				      (uint32_t)rnd());
		break;
	case 11:
		bson_append_regex(b, k, -1, rnd() % 2 ? "a" : "ab",
				  rnd() % 2 ? "i" : "");
		break;
	case 12: bson_append_null(b, k, -1); break;
	case 13:
		if (rnd() % 2)
			bson_append_minkey(b, k, -1);
		else
			bson_append_maxkey(b, k, -1);
		break;
	case 14: bson_append_undefined(b, k, -1); break;
	case 15:
		memset(&oid, 1, 12);
		bson_append_dbpointer(b, k, -1, rnd() % 2 ? "c" : "cd", &oid);
		break;
	case 16: gen_container(b, k, depth, true); break;
	default: gen_container(b, k, depth, false);
	}
}

/* ---- order ------------------------------------------------------------ */

struct enc {
	uint8_t b[4096];
	size_t n;
};

static int bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int m = memcmp(a, b, an < bn ? an : bn);

	if (m)
		return m < 0 ? -1 : 1;
	return (an > bn) - (an < bn);
}

static int sgn(int x)
{
	return (x > 0) - (x < 0);
}

#define NVALUES 3000

static void test_order_random(void)
{
	bson_t all = BSON_INITIALIZER;
	bson_value_t *v = malloc(NVALUES * sizeof(*v));
	struct enc *e = malloc(NVALUES * sizeof(*e)), *d = malloc(sizeof(*d));
	bson_iter_t it;
	size_t n = 0, bad = 0, eqs = 0, cross = 0;

	for (int i = 0; i < NVALUES; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%d", i);
		gen_value(&all, k, 0);
	}
	bson_iter_init(&it, &all);
	while (bson_iter_next(&it)) {
		struct mql_error err;

		v[n] = *bson_iter_value(&it);
		e[n].n = 0;
		if (mql_key_encode(&v[n], false, e[n].b, sizeof(e[n].b),
				   &e[n].n, &err) < 0)
			CHECK(0, "encode failed: %s", err.msg);
		n++;
	}
	for (int r = 0; r < 300000; r++) {
		size_t i = rnd() % n, j = rnd() % n;
		int c = sgn(mql_value_cmp(&v[i], &v[j]));
		int m = bytes_cmp(e[i].b, e[i].n, e[j].b, e[j].n);

		eqs += c == 0 && i != j;
		cross += c == 0 && v[i].value_type != v[j].value_type;
		if (c != m && bad++ < 5) {
			char x[200], y[200];

			CHECK(0, "order: %s vs %s: cmp %d, memcmp %d",
			      mql_value_str(&v[i], x, sizeof(x)),
			      mql_value_str(&v[j], y, sizeof(y)), c, m);
		}
	}
	CHECK(bad == 0, "%zu pairs out of order", bad);
	/* the generator makes equal values of different types often */
	CHECK(eqs > 1000 && cross > 100, "equal pairs %zu, across types %zu",
	      eqs, cross);
	/* descending: the order reversed */
	for (int r = 0; r < 20000; r++) {
		size_t i = rnd() % n, j = rnd() % n;
		struct enc a = {.n = 0}, b = {.n = 0};

		mql_key_encode(&v[i], true, a.b, sizeof(a.b), &a.n, NULL);
		mql_key_encode(&v[j], true, b.b, sizeof(b.b), &b.n, NULL);
		if (bytes_cmp(a.b, a.n, b.b, b.n) !=
		    -sgn(mql_value_cmp(&v[i], &v[j])))
			bad++;
	}
	CHECK(bad == 0, "descending: %zu pairs out of order", bad);
	/* compound: (x, y desc) as pairs of values, each part then _id */
	for (int r = 0; r < 20000; r++) {
		size_t i = rnd() % n, j = rnd() % n, k = rnd() % n,
		       l = rnd() % n;
		struct enc a = {.n = 0}, b = {.n = 0};
		int c = sgn(mql_value_cmp(&v[i], &v[k]));

		if (c == 0)
			c = -sgn(mql_value_cmp(&v[j], &v[l]));
		mql_key_encode(&v[i], false, a.b, sizeof(a.b), &a.n, NULL);
		mql_key_encode(&v[j], true, a.b, sizeof(a.b), &a.n, NULL);
		mql_key_encode(&v[k], false, b.b, sizeof(b.b), &b.n, NULL);
		mql_key_encode(&v[l], true, b.b, sizeof(b.b), &b.n, NULL);
		/* and a suffix that must not matter when the parts differ */
		a.b[a.n++] = 0xFF;
		b.b[b.n++] = 0x00;
		if (c != 0 && bytes_cmp(a.b, a.n, b.b, b.n) != c)
			bad++;
	}
	CHECK(bad == 0, "compound: %zu pairs out of order", bad);
	/* decoding gives an equal value that encodes the same */
	for (size_t i = 0; i < n; i++) {
		bson_t out = BSON_INITIALIZER;
		struct mql_error err;
		size_t used = 0;
		bson_iter_t di;
		bool desc = i % 2;
		struct enc x = {.n = 0};

		mql_key_encode(&v[i], desc, x.b, sizeof(x.b), &x.n, NULL);
		/* its length without decoding, with bytes after it too */
		if (mql_key_skip(x.b, x.n, desc) != (long)x.n)
			bad++;
		if (x.n < sizeof(x.b)) {
			x.b[x.n] = desc ? 0x00 : 0xFF;
			if (mql_key_skip(x.b, x.n + 1, desc) != (long)x.n)
				bad++;
		}
		/* cut short: never a length past the bytes given */
		if (x.n && mql_key_skip(x.b, x.n - 1, desc) > (long)x.n - 1)
			bad++;
		if (mql_key_decode(x.b, x.n, desc, &out, "v", &used, &err) <
			0 ||
		    used != x.n || !bson_iter_init(&di, &out) ||
		    !bson_iter_next(&di)) {
			CHECK(0, "decode %zu failed: %s", i, err.msg);
			bson_destroy(&out);
			continue;
		}
		d->n = 0;
		mql_key_encode(bson_iter_value(&di), desc, d->b, sizeof(d->b),
			       &d->n, NULL);
		if (!mql_value_eq(bson_iter_value(&di), &v[i]) ||
		    bytes_cmp(d->b, d->n, x.b, x.n) != 0)
			bad++;
		bson_destroy(&out);
	}
	CHECK(bad == 0, "decode: %zu values came back different", bad);
	bson_destroy(&all);
	free(v);
	free(e);
	free(d);
}

/* encoding of {'v': X} */
static struct enc E(const char *json) {
	bson_t *b = J(json);
	bson_value_t v = V(b);
	struct enc e = {.n = 0};

	mql_key_encode(&v, false, e.b, sizeof(e.b), &e.n, NULL);
	bson_destroy(b);
	return e;
}

static int
KC(const char *a, const char *b)
{
	struct enc x = E(a), y = E(b);

	return bytes_cmp(x.b, x.n, y.b, y.n);
}

#define KLT(a, b) CHECK(KC(a, b) < 0, "%s < %s", a, b)
#define KEQ(a, b) CHECK(KC(a, b) == 0, "%s == %s", a, b)

static void test_order_fixed(void)
{
	/* int64 against double exactly, past 2^53 */
	KLT("{'v': 9007199254740992.0}",
	    "{'v': {'$numberLong': '9007199254740993'}}");
	KLT("{'v': {'$numberLong': '9007199254740993'}}",
	    "{'v': 9007199254740994.0}");
	KEQ("{'v': {'$numberLong': '9007199254740992'}}",
	    "{'v': 9007199254740992.0}");
	KLT("{'v': {'$numberLong': '9223372036854775807'}}",
	    "{'v': 9223372036854775808.0}");
	KLT("{'v': -9223372036854775808.0}",
	    "{'v': {'$numberLong': '-9223372036854775807'}}");
	KEQ("{'v': {'$numberLong': '-9223372036854775808'}}",
	    "{'v': -9223372036854775808.0}");
	/* equal numbers of every type write the same bytes */
	KEQ("{'v': 1}", "{'v': 1.0}");
	KEQ("{'v': 1}", "{'v': {'$numberLong': '1'}}");
	KEQ("{'v': 1}", "{'v': {'$numberDecimal': '1.00'}}");
	KEQ("{'v': 0}", "{'v': -0.0}");
	KEQ("{'v': 0}", "{'v': {'$numberDecimal': '-0E+10'}}");
	KEQ("{'v': 0.5}", "{'v': {'$numberDecimal': '5E-1'}}");
	KEQ("{'v': {'$numberDouble': 'NaN'}}",
	    "{'v': {'$numberDecimal': 'NaN'}}");
	KEQ("{'v': {'$numberDouble': 'Infinity'}}",
	    "{'v': {'$numberDecimal': 'Infinity'}}");
	/* the double 0.1 is 0.1000000000000000055511151231257827...: above
	 * the decimal 0.1, below the decimal 0.10000000000000001 */
	KLT("{'v': {'$numberDecimal': '0.1'}}", "{'v': 0.1}");
	KLT("{'v': 0.1}", "{'v': {'$numberDecimal': '0.10000000000000001'}}");
	KLT("{'v': {'$numberDecimal': '1E+30'}}", "{'v': 1e30}");
	KLT("{'v': 1.7976931348623157e308}",
	    "{'v': {'$numberDecimal': '1E+309'}}");
	KLT("{'v': {'$numberDecimal': '1E-6176'}}", "{'v': 5e-324}");
	KLT("{'v': 0}", "{'v': {'$numberDecimal': '1E-6176'}}");
	/* NaN lowest, then -inf, ..., +inf, then strings */
	KLT("{'v': {'$numberDouble': 'NaN'}}",
	    "{'v': {'$numberDouble': '-Infinity'}}");
	KLT("{'v': {'$numberDouble': '-Infinity'}}", "{'v': -1e308}");
	KLT("{'v': {'$numberDecimal': "
	    "'9.999999999999999999999999999999999E+6144'}}",
	    "{'v': {'$numberDouble': 'Infinity'}}");
	KLT("{'v': {'$numberDouble': 'Infinity'}}", "{'v': ''}");
	KLT("{'v': -2}", "{'v': -1.5}");
	KLT("{'v': {'$numberDecimal': '-0.3'}}", "{'v': -0.25}");
	/* strings by bytes, with NULs; symbols equal to strings */
	KLT("{'v': 'a'}", "{'v': 'a\\u0000'}");
	KLT("{'v': 'a\\u0000'}", "{'v': 'a\\u0001'}");
	KLT("{'v': 'a\\u0001'}", "{'v': 'ab'}");
	KEQ("{'v': 'ab'}", "{'v': {'$symbol': 'ab'}}");
	/* documents: field by field, a shorter one first */
	KLT("{'v': {}}", "{'v': {'a': 1}}");
	KLT("{'v': {'a': 1}}", "{'v': {'a': 1, 'b': 0}}");
	KLT("{'v': {'a': 2}}", "{'v': {'b': 1}}");
	KLT("{'v': {'b': 1}}", "{'v': {'a': 'x'}}");
	KEQ("{'v': {'a': 1}}", "{'v': {'a': 1.0}}");
	KLT("{'v': [1, 2]}", "{'v': [1, 2, 0]}");
	KLT("{'v': {'z': 1}}", "{'v': []}");
	/* binData by length first */
	KLT("{'v': {'$binary': {'base64': '/w==', 'subType': '00'}}}",
	    "{'v': {'$binary': {'base64': 'AAA=', 'subType': '00'}}}");
	KLT("{'v': {'$date': {'$numberLong': '-1'}}}",
	    "{'v': {'$date': {'$numberLong': '0'}}}");
	KLT("{'v': {'$timestamp': {'t': 1, 'i': 4294967295}}}",
	    "{'v': {'$timestamp': {'t': 2, 'i': 0}}}");
	KLT("{'v': null}", "{'v': {'$numberDouble': 'NaN'}}");
	KLT("{'v': {'$undefined': true}}", "{'v': null}");
	KLT("{'v': {'$minKey': 1}}", "{'v': {'$undefined': true}}");
}

static void test_limits_and_id(void)
{
	char big[400];
	bson_t *b, *arr = J("{'v': [1]}"), *re = J("{'v': {'$regex': 'a'}}");
	bson_value_t v;
	uint8_t buf[MQL_KEY_MAX];
	size_t n = 0;
	struct mql_error err;

	memset(big, 'x', sizeof(big));
	b = bson_new();
	bson_append_utf8(b, "v", 1, big, MQL_KEY_MAX - 3);
	v = V(b);
	CHECK(mql_key_encode(&v, false, buf, sizeof(buf), &n, &err) == 0 &&
		  n == MQL_KEY_MAX,
	      "a string of the limit fits: %zu", n);
	bson_reinit(b);
	bson_append_utf8(b, "v", 1, big, MQL_KEY_MAX - 2);
	v = V(b);
	n = 0;
	CHECK(mql_key_encode(&v, false, buf, sizeof(buf), &n, &err) < 0 &&
		  err.code == 17280 && n == 0,
	      "one byte more: 17280");
	CHECK(mql_key_id(&v, buf, &n, &err) < 0 && err.code == 17280,
	      "_id past 192 bytes");
	v = V(arr);
	CHECK(mql_key_id(&v, buf, &n, &err) < 0 && err.code == 2 &&
		  strcmp(err.msg, "can't use an array for _id") == 0,
	      "_id array");
	v = V(re);
	CHECK(mql_key_id(&v, buf, &n, &err) < 0 && err.code == 2, "_id regex");
	/* _ids that come back exactly */
	{
		static const char *const ids[] = {
		    "{'v': {'$oid': '5f1d7a2b9c8e4f0012345678'}}",
		    "{'v': 'user:42'}",
		    "{'v': {'a': 1, 'b': 'x'}}",
		    "{'v': {'$date': '2024-01-02T03:04:05.678Z'}}",
		    "{'v': 42}",
		    "{'v': {'$numberLong': '9007199254740993'}}",
		    "{'v': 0.1}",
		    "{'v': {'$numberDecimal': '0.1'}}",
		    "{'v': {'$binary': {'base64': 'AAEC', 'subType': '04'}}}",
		};

		for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++) {
			bson_t *x = J(ids[i]), out = BSON_INITIALIZER;
			bson_value_t iv = V(x);
			bson_iter_t it;
			bool same = false;

			n = 0;
			if (mql_key_id(&iv, buf, &n, &err) == 0 &&
			    mql_key_id_decode(buf, n, &out, &err) == 0 &&
			    bson_iter_init_find(&it, &out, "_id")) {
				const bson_value_t *w = bson_iter_value(&it);

				same = w->value_type == iv.value_type &&
				       mql_value_eq(w, &iv);
			}
			CHECK(same, "_id %s round trip", ids[i]);
			bson_destroy(&out);
			bson_destroy(x);
		}
	}
	{
		bson_t *u = J("{'v': {'$undefined': true}}");

		v = V(u);
		CHECK(mql_key_id(&v, buf, &n, &err) < 0 && err.code == 2 &&
			  strcmp(err.msg, "can't use a undefined for _id") == 0,
		      "_id undefined");
		bson_destroy(u);
	}
	CHECK(mql_key_id_decode((const uint8_t *)"\x3c"
						 "a",
				2, &(bson_t)BSON_INITIALIZER, &err) < 0 &&
		  err.code == 22,
	      "a cut key is refused");
	bson_destroy(b);
	bson_destroy(arr);
	bson_destroy(re);
}

/* ---- keys of documents ------------------------------------------------ */

struct keys {
	char s[2048];
	size_t n;
	const struct mql_index *ix;
	bool desc[8];
};

/* Each key decoded part by part: "(1, 'x') (2, 'x')". */
static int key_cb(void *ctx, const uint8_t *key, size_t len)
{
	struct keys *k = ctx;
	bson_t out = BSON_INITIALIZER;
	size_t off = 0, used;
	char *s, *p;
	bson_iter_t it;

	for (size_t i = 0; i < mql_index_nparts(k->ix); i++) {
		char f[24];

		snprintf(f, sizeof(f), "%zu", i);
		if (mql_key_decode(key + off, len - off, k->desc[i], &out, f,
				   &used, NULL) < 0)
			return -7;
		if (mql_key_skip(key + off, len - off, k->desc[i]) !=
		    (long)used)
			return -9;
		off += used;
	}
	if (off != len)
		return -8;
	k->n += (size_t)snprintf(k->s + k->n, sizeof(k->s) - k->n, "%s(",
				 k->n ? " " : "");
	bson_iter_init(&it, &out);
	while (bson_iter_next(&it)) {
		s = mql_value_str(bson_iter_value(&it), (char[64]){0}, 64);
		for (p = s; *p; p++)
			if (*p == '"')
				*p = '\'';
		k->n += (size_t)snprintf(
		    k->s + k->n, sizeof(k->s) - k->n, "%s%s",
		    strcmp(bson_iter_key(&it), "0") ? ", " : "", s);
	}
	k->n += (size_t)snprintf(k->s + k->n, sizeof(k->s) - k->n, ")");
	bson_destroy(&out);
	return 0;
}

static void KEYS(const char *spec, unsigned flags, const char *doc,
		 const char *want, unsigned want_flags)
{
	bson_t *s = J(spec), *d = J(doc);
	struct mql_index *ix;
	struct mql_error err = {0};
	struct keys k = {.n = 0};
	unsigned f = 99;
	int rc = mql_index_compile(bson_get_data(s), s->len, flags, &ix, &err);

	if (rc == 0) {
		bson_iter_t it;
		size_t i = 0;

		k.ix = ix;
		bson_iter_init(&it, s);
		while (bson_iter_next(&it) && i < 8)
			k.desc[i++] =
			    mql_number_double(bson_iter_value(&it)) < 0;
		rc = mql_index_keys(ix, bson_get_data(d), d->len, &f, key_cb,
				    &k, &err);
		mql_index_free(ix);
	}
	if (want[0] == 'E') {
		const char *msg = strchr(want, ' ') + 1;

		CHECK(rc < 0 && err.code == atoi(want + 1) &&
			  strcmp(err.msg, msg) == 0,
		      "%s on %s: got %d %d '%s', want %s", spec, doc, rc,
		      err.code, err.msg, want);
	} else {
		CHECK(rc == 0 && strcmp(k.s, want) == 0 && f == want_flags,
		      "%s on %s: got %d '%s' flags %u, want '%s' %u", spec, doc,
		      rc, k.s, f, want, want_flags);
	}
	bson_destroy(s);
	bson_destroy(d);
}

#define MK MQL_KEYS_MULTIKEY

static void test_keys(void)
{
	KEYS("{'a': 1}", 0, "{'a': 5}", "(5)", 0);
	KEYS("{'a': 1}", 0, "{'b': 5}", "(null)", 0);
	KEYS("{'a': 1}", MQL_INDEX_SPARSE, "{'b': 5}", "", 0);
	KEYS("{'a': 1}", MQL_INDEX_SPARSE, "{'a': null}", "(null)", 0);
	/* "Multikey Indexes": one key per element, once each, in order */
	KEYS("{'a': 1}", 0, "{'a': [3, 1, 3, 'x']}", "(1) (3) ('x')", MK);
	KEYS("{'a': 1}", 0, "{'a': []}", "({ '$undefined' : true })", MK);
	KEYS("{'a': 1}", MQL_INDEX_SPARSE, "{'a': []}",
	     "({ '$undefined' : true })", MK);
	KEYS("{'a': 1}", 0, "{'a': [[1, 2], 3]}", "(3) ([ 1, 2 ])", MK);
	KEYS("{'a.b': 1}", 0, "{'a': [{'b': 1}, {'b': [2, 1]}, 7, {'c': 1}]}",
	     "(null) (1) (2)", MK);
	KEYS("{'a.b': 1}", 0, "{'a': []}", "(null)", MK);
	KEYS("{'a.b': 1}", 0, "{'a': {'b': {'c': 1}}}", "({ 'c' : 1 })", 0);
	KEYS("{'a.1': 1}", 0, "{'a': [5, 6]}", "(6)", 0);
	/* "Compound Multikey Indexes": one array at most */
	KEYS("{'a': 1, 'b': 1}", 0, "{'a': [1, 2], 'b': 5}", "(1, 5) (2, 5)",
	     MK);
	KEYS("{'a': 1, 'b': 1}", 0, "{'a': [1, 2], 'b': [3]}",
	     "E171 cannot index parallel arrays [b] [a]", 0);
	/* fields through the same array go element by element */
	KEYS("{'a.b': 1, 'a.c': 1}", 0,
	     "{'a': [{'b': 1, 'c': 2}, {'b': 3, 'c': 4}]}", "(1, 2) (3, 4)",
	     MK);
	KEYS("{'a.b': 1, 'a.c': -1}", 0, "{'a': [{'b': 1, 'c': 2}, {'b': 1}]}",
	     "(1, 2) (1, null)", MK);
	/* sparse: a key unless every field is missing */
	KEYS("{'a': 1, 'b': 1}", MQL_INDEX_SPARSE, "{'c': 1}", "", 0);
	KEYS("{'a': 1, 'b': 1}", MQL_INDEX_SPARSE, "{'b': 1}", "(null, 1)", 0);
	/* a descending field: its bytes inverted, keys in byte order */
	KEYS("{'a': -1}", 0, "{'a': [1, 2, 3]}", "(3) (2) (1)", MK);
	/* the limit */
	KEYS("{'a': 1}", 0,
	     "{'a': "
	     "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"
	     "}",
	     "E17280 key too large to index: the limit is 256 bytes", 0);
	/* key patterns MongoDB refuses */
	KEYS("{}", 0, "{}", "E67 Index keys cannot be empty.", 0);
	KEYS("{'a': 0}", 0, "{}",
	     "E67 Values in v:2 index key pattern cannot be of type int. Only "
	     "numbers > 0, numbers < 0, and strings are allowed.",
	     0);
	KEYS("{'a': 'hashed'}", 0, "{}",
	     "E238 hashed indexes are not supported", 0);
}

/* ---- bounds ----------------------------------------------------------- */

struct inb {
	const struct mql_bounds *b;
	bool in;
};

static int in_cb(void *ctx, const uint8_t *key, size_t len)
{
	struct inb *x = ctx;

	for (size_t i = 0; i < x->b->n; i++) {
		const struct mql_interval *iv = &x->b->iv[i];

		if (bytes_cmp(key, len, iv->start, iv->slen) >= 0 &&
		    bytes_cmp(key, len, iv->end, iv->elen) < 0)
			x->in = true;
	}
	return 0;
}

static int nop_cb(void *ctx, const uint8_t *key, size_t len)
{
	(void)ctx;
	(void)key;
	(void)len;
	return 0;
}

/* Whether some key of doc lies in the bounds of filter on spec. */
static int IN(const char *spec, const char *filter, bool multikey,
	      const char *doc, size_t *nparts, size_t *nint)
{
	bson_t *s = J(spec), *f = J(filter), *d = J(doc);
	struct mql_index *ix;
	struct mql_match *m;
	struct mql_bounds b;
	struct inb x = {&b, false};
	int rc = -1;

	if (mql_index_compile(bson_get_data(s), s->len, 0, &ix, NULL) == 0 &&
	    mql_match_compile(bson_get_data(f), f->len, &m, NULL) == 0) {
		mql_index_bounds(ix, m, multikey, &b, NULL);
		if (nparts)
			*nparts = b.nparts;
		if (nint)
			*nint = b.n;
		mql_index_keys(ix, bson_get_data(d), d->len, NULL, in_cb, &x,
			       NULL);
		rc = x.in;
		mql_bounds_free(&b);
		mql_match_free(m);
		mql_index_free(ix);
	}
	bson_destroy(s);
	bson_destroy(f);
	bson_destroy(d);
	return rc;
}

#define BIN(spec, f, doc)                                                      \
	CHECK(IN(spec, f, false, doc, NULL, NULL) == 1,                        \
	      "%s %s: %s should be read", spec, f, doc)
#define BOUT(spec, f, doc)                                                     \
	CHECK(IN(spec, f, false, doc, NULL, NULL) == 0,                        \
	      "%s %s: %s should not be read", spec, f, doc)

static void test_bounds_fixed(void)
{
	size_t np, ni;

	BIN("{'a': 1}", "{'a': 5}", "{'a': 5.0}");
	BOUT("{'a': 1}", "{'a': 5}", "{'a': 6}");
	/* type bracketing: $gt: 5 reads numbers only, up to +infinity */
	BIN("{'a': 1}", "{'a': {'$gt': 5}}", "{'a': 1e300}");
	BIN("{'a': 1}", "{'a': {'$gt': 5}}",
	    "{'a': {'$numberDouble': 'Infinity'}}");
	BOUT("{'a': 1}", "{'a': {'$gt': 5}}", "{'a': 5}");
	BOUT("{'a': 1}", "{'a': {'$gt': 5}}", "{'a': 'x'}");
	BOUT("{'a': 1}", "{'a': {'$gt': 5}}",
	     "{'a': {'$numberDouble': 'NaN'}}");
	BIN("{'a': -1}", "{'a': {'$lte': 'm'}}", "{'a': 'm'}");
	BIN("{'a': -1}", "{'a': {'$lte': 'm'}}", "{'a': ''}");
	BOUT("{'a': -1}", "{'a': {'$lte': 'm'}}", "{'a': 'n'}");
	BOUT("{'a': -1}", "{'a': {'$lte': 'm'}}", "{'a': 1}");
	BIN("{'a': 1}", "{'a': {'$gt': 1, '$lt': 3}}", "{'a': 2}");
	BOUT("{'a': 1}", "{'a': {'$gt': 1, '$lt': 3}}", "{'a': 3}");
	/* null reads null and missing */
	BIN("{'a': 1}", "{'a': null}", "{'b': 1}");
	BIN("{'a': 1}", "{'a': null}", "{'a': null}");
	BOUT("{'a': 1}", "{'a': null}", "{'a': 0}");
	/* an array equality reads the array and its first element */
	BIN("{'a': 1}", "{'a': [1, 2]}", "{'a': [1, 2]}");
	BIN("{'a': 1}", "{'a': [1, 2]}", "{'a': [[1, 2]]}");
	BIN("{'a': 1}",
	    "{'a': {'$in': [{'$regularExpression': {'pattern': '^x', "
	    "'options': ''}}, 7]}}",
	    "{'a': 'xy'}");
	BIN("{'a': 1}",
	    "{'a': {'$in': [{'$regularExpression': {'pattern': '^x', "
	    "'options': ''}}, 7]}}",
	    "{'a': 7}");
	BOUT("{'a': 1}",
	     "{'a': {'$in': [{'$regularExpression': {'pattern': '^x', "
	     "'options': ''}}, 7]}}",
	     "{'a': 8}");
	BOUT("{'a': 1}", "{'a': {'$in': []}}", "{'a': 8}");
	/* compound: an equality prefix, then one range */
	CHECK(IN("{'a': 1, 'b': -1, 'c': 1}",
		 "{'a': {'$in': [1, 2]}, 'b': {'$gt': 5}, 'c': 3}", false,
		 "{'a': 2, 'b': 6, 'c': 0}", &np, &ni) == 1 &&
		  np == 2 && ni == 2,
	      "compound: parts %zu intervals %zu", np, ni);
	BOUT("{'a': 1, 'b': -1}", "{'a': {'$in': [1, 2]}, 'b': {'$gt': 5}}",
	     "{'a': 2, 'b': 5}");
	BOUT("{'a': 1, 'b': -1}", "{'a': {'$in': [1, 2]}, 'b': {'$gt': 5}}",
	     "{'a': 3, 'b': 6}");
	{ /* 100 x 100 equalities pass 4096 intervals: a's only */
		char f[2048];
		size_t o = 0;

		o += (size_t)snprintf(f + o, sizeof(f) - o, "{'a': {'$in': [");
		for (int i = 0; i < 100; i++)
			o += (size_t)snprintf(f + o, sizeof(f) - o, "%s%d",
					      i ? ", " : "", i);
		o += (size_t)snprintf(f + o, sizeof(f) - o,
				      "]}, 'b': {'$in': [");
		for (int i = 0; i < 100; i++)
			o += (size_t)snprintf(f + o, sizeof(f) - o, "%s%d",
					      i ? ", " : "", i);
		snprintf(f + o, sizeof(f) - o, "]}}");
		CHECK(IN("{'a': 1, 'b': 1}", f, false, "{'a': 5, 'b': 500}",
			 &np, &ni) == 1 &&
			  np == 1 && ni == 100,
		      "4096 intervals at most: parts %zu intervals %zu", np,
		      ni);
	}
	CHECK(IN("{'a': 1, 'b': 1}", "{'b': 1}", false, "{'a': 1, 'b': 2}", &np,
		 &ni) == 1 &&
		  np == 0 && ni == 1,
	      "no predicate on the first field: the whole index");
	CHECK(IN("{'a': 1}", "{'a': 1, 'b': 2}", false, "{'a': 2}", &np, &ni) ==
		      0 &&
		  np == 1 && ni == 1,
	      "point: parts %zu intervals %zu", np, ni);
	CHECK(IN("{'a': 1}", "{'a': 1, '$and': [{'a': 2}]}", false, "{'a': 1}",
		 &np, &ni) == 0 &&
		  ni == 0,
	      "a contradiction reads nothing");
	/* multikey: {a: [1, 2]} matches {$and: [{a: 1}, {a: 2}]} */
	CHECK(IN("{'a': 1}", "{'$and': [{'a': 1}, {'a': 2}]}", true,
		 "{'a': [1, 2]}", NULL, NULL) == 1,
	      "multikey: no intersection");
}

/* Random filters on random documents: every document the filter matches
 * has a key in the bounds (the property a scan's correctness rests on). */
static void test_bounds_random(void)
{
	static const char *const specs[] = {
	    "{'a': 1}", "{'a': -1}", "{'a': 1, 'b': -1}", "{'b': -1, 'a': 1}"};
	static const char *const ops[] = {"$eq", "$gt",	 "$gte",
					  "$lt", "$lte", "$in"};
	size_t missed = 0, matched = 0;

	for (int r = 0; r < 12000; r++) {
		bson_t *doc = bson_new(), *f = bson_new(), sub, arr;
		bson_t *spec = J(specs[rnd() % 4]);
		struct mql_index *ix;
		struct mql_match *m;
		struct mql_bounds b;
		struct inb x = {&b, false};
		unsigned fl = 0;

		gen_value(doc, "a", 2);
		gen_value(doc, "b", 2);
		for (int i = 0; i < 1 + (int)(rnd() % 2); i++) {
			const char *op = ops[rnd() % 6];

			bson_append_document_begin(f, i ? "b" : "a", 1, &sub);
			if (strcmp(op, "$in") == 0) {
				bson_append_array_begin(&sub, op, -1, &arr);
				gen_value(&arr, "0", 2);
				gen_value(&arr, "1", 2);
				bson_append_array_end(&sub, &arr);
			} else {
				gen_value(&sub, op, 2);
			}
			bson_append_document_end(f, &sub);
		}
		if (mql_index_compile(bson_get_data(spec), spec->len, 0, &ix,
				      NULL) == 0 &&
		    mql_match_compile(bson_get_data(f), f->len, &m, NULL) ==
			0) {
			if (mql_match_doc(m, bson_get_data(doc), doc->len,
					  NULL)) {
				matched++;
				/* multikey when the document has an array */
				mql_index_keys(ix, bson_get_data(doc), doc->len,
					       &fl, nop_cb, NULL, NULL);
				mql_index_bounds(ix, m, fl & MK, &b, NULL);
				if (mql_index_keys(ix, bson_get_data(doc),
						   doc->len, NULL, in_cb, &x,
						   NULL) == 0 &&
				    !x.in && missed++ < 5) {
					char *ds = S(doc), *fs = S(f);

					CHECK(0,
					      "%s: %s matches %s, no key read",
					      specs[0], fs, ds);
					bson_free(ds);
					bson_free(fs);
				}
				mql_bounds_free(&b);
			}
			mql_match_free(m);
		}
		mql_index_free(ix);
		bson_destroy(spec);
		bson_destroy(doc);
		bson_destroy(f);
	}
	CHECK(missed == 0 && matched > 250, "bounds: %zu of %zu matches missed",
	      missed, matched);
}

int main(void)
{
	test_order_random();
	test_order_fixed();
	test_limits_and_id();
	test_keys();
	test_bounds_fixed();
	test_bounds_random();
	return mt_done("unit_mql_key");
}
