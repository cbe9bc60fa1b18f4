/* test_mql_value.c - kvd/mongo's values and paths against MongoDB's
 * documented order ("Comparison/Sort Order"), its numeric equality across
 * types, and the candidates its matcher sees along dotted paths. */
#include <math.h>

#include "mql_path.h"
#include "mql_value.h"
#include "mql_int.h"
#include "mqltest.h"

/* cmp of the values of {'v': a} and {'v': b} */
static int C(const char *a, const char *b)
{
	bson_t *x = J(a), *y = J(b);
	bson_value_t va = V(x), vb = V(y);
	int r = mql_value_cmp(&va, &vb);
	int back = mql_value_cmp(&vb, &va);

	CHECK((r > 0) - (r < 0) == -((back > 0) - (back < 0)),
	      "asymmetric: %s vs %s", a, b);
	if (r == 0)
		CHECK(mql_value_hash(&va) == mql_value_hash(&vb),
		      "equal values hash apart: %s %s", a, b);
	bson_destroy(x);
	bson_destroy(y);
	return (r > 0) - (r < 0);
}

#define LT(a, b) CHECK(C(a, b) < 0, "%s < %s", a, b)
#define EQ(a, b) CHECK(C(a, b) == 0, "%s == %s", a, b)

static void test_type_order(void)
{
	/* one value of each type in MongoDB's order */
	static const char *order[] = {
	    "{'v': {'$minKey': 1}}",
	    "{'v': {'$undefined': true}}",
	    "{'v': null}",
	    "{'v': {'$numberDouble': 'NaN'}}",
	    "{'v': -1e300}",
	    "{'v': 1}",
	    "{'v': ''}",
	    "{'v': 'a'}",
	    "{'v': {}}",
	    "{'v': {'a': 1}}",
	    "{'v': []}",
	    "{'v': [1]}",
	    "{'v': {'$binary': {'base64': '', 'subType': '00'}}}",
	    "{'v': {'$oid': '000000000000000000000000'}}",
	    "{'v': false}",
	    "{'v': true}",
	    "{'v': {'$date': {'$numberLong': '-1'}}}",
	    "{'v': {'$date': {'$numberLong': '0'}}}",
	    "{'v': {'$timestamp': {'t': 0, 'i': 1}}}",
	    "{'v': {'$regularExpression': {'pattern': 'a', 'options': ''}}}",
	    "{'v': {'$maxKey': 1}}",
	};
	size_t n = sizeof(order) / sizeof(order[0]);

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			int want = (i > j) - (i < j);

			CHECK(C(order[i], order[j]) == want,
			      "%s vs %s: want %d", order[i], order[j], want);
		}
	}
	/* symbol sorts with strings and equals its string */
	EQ("{'v': {'$symbol': 'ab'}}", "{'v': 'ab'}");
	LT("{'v': {'$symbol': 'aa'}}", "{'v': 'ab'}");
}

static void test_numbers(void)
{
	EQ("{'v': 1}", "{'v': 1.0}");
	EQ("{'v': 1}", "{'v': {'$numberLong': '1'}}");
	EQ("{'v': 1}", "{'v': {'$numberDecimal': '1.00'}}");
	EQ("{'v': 0.5}", "{'v': {'$numberDecimal': '0.5'}}");
	EQ("{'v': -0.0}", "{'v': 0}");
	EQ("{'v': {'$numberDecimal': '-0'}}", "{'v': 0}");
	LT("{'v': 1}", "{'v': 1.5}");
	LT("{'v': -2}", "{'v': {'$numberLong': '-1'}}");
	/* NaN is below every number, -Infinity included, and equals NaN */
	LT("{'v': {'$numberDouble': 'NaN'}}",
	   "{'v': {'$numberDouble': '-Infinity'}}");
	EQ("{'v': {'$numberDouble': 'NaN'}}",
	   "{'v': {'$numberDecimal': 'NaN'}}");
	LT("{'v': {'$numberDecimal': 'NaN'}}",
	   "{'v': {'$numberLong': '-9223372036854775808'}}");
	LT("{'v': {'$numberDouble': '-Infinity'}}",
	   "{'v': {'$numberLong': '-9223372036854775808'}}");
	LT("{'v': {'$numberLong': '9223372036854775807'}}",
	   "{'v': {'$numberDouble': 'Infinity'}}");
	/* int64 against double without rounding: 2^53 + 1 is not 2^53 */
	LT("{'v': 9007199254740992.0}",
	   "{'v': {'$numberLong': '9007199254740993'}}");
	EQ("{'v': 9007199254740992.0}",
	   "{'v': {'$numberLong': '9007199254740992'}}");
	LT("{'v': {'$numberLong': '9223372036854775807'}}",
	   "{'v': 9223372036854775808.0}");
	EQ("{'v': -9223372036854775808.0}",
	   "{'v': {'$numberLong': '-9223372036854775808'}}");
	/* decimal against double, exactly: 0.1 (double) is not 0.1 */
	LT("{'v': {'$numberDecimal': '0.1'}}", "{'v': 0.1}");
	LT("{'v': {'$numberDecimal': '0.1000000000000000055511151231257827'}}",
	   "{'v': 0.1}");
	LT("{'v': {'$numberDecimal': '-Infinity'}}", "{'v': -1e308}");
	LT("{'v': {'$numberDecimal': '1E+6144'}}",
	   "{'v': {'$numberDecimal': 'Infinity'}}");
	LT("{'v': {'$numberDecimal': '99999999999999999999'}}",
	   "{'v': {'$numberDecimal': '1E+20'}}");
	EQ("{'v': {'$numberDecimal': '1E+20'}}", "{'v': 1e20}");
	LT("{'v': {'$numberDecimal': '-5'}}", "{'v': {'$numberLong': '-4'}}");
}

static void test_compound(void)
{
	/* strings by bytes, shorter first on a common prefix */
	LT("{'v': 'a'}", "{'v': 'ab'}");
	LT("{'v': 'B'}", "{'v': 'a'}");
	/* documents element by element: type, then name, then value */
	LT("{'v': {'a': 1}}", "{'v': {'a': 2}}");
	LT("{'v': {'a': 1}}", "{'v': {'b': 0}}");
	LT("{'v': {'b': 1}}", "{'v': {'a': 'x'}}"); /* number < string */
	LT("{'v': {'a': 1}}", "{'v': {'a': 1, 'b': 1}}");
	EQ("{'v': {'a': 1, 'b': 2.0}}", "{'v': {'a': 1.0, 'b': 2}}");
	CHECK(C("{'v': {'a': 1, 'b': 2}}", "{'v': {'b': 2, 'a': 1}}") != 0,
	      "field order matters");
	/* arrays the same way */
	LT("{'v': [1, 2]}", "{'v': [1, 3]}");
	LT("{'v': [1]}", "{'v': [1, 0]}");
	LT("{'v': [2]}", "{'v': ['a']}");
	EQ("{'v': [1, [2]]}", "{'v': [1.0, [2.0]]}");
	/* binData: length, then subtype, then bytes */
	LT("{'v': {'$binary': {'base64': 'AQ==', 'subType': '05'}}}",
	   "{'v': {'$binary': {'base64': 'AAA=', 'subType': '00'}}}");
	LT("{'v': {'$binary': {'base64': 'AQ==', 'subType': '00'}}}",
	   "{'v': {'$binary': {'base64': 'AA==', 'subType': '01'}}}");
	LT("{'v': {'$timestamp': {'t': 1, 'i': 5}}}",
	   "{'v': {'$timestamp': {'t': 2, 'i': 0}}}");
	LT("{'v': {'$regularExpression': {'pattern': 'a', 'options': ''}}}",
	   "{'v': {'$regularExpression': {'pattern': 'a', 'options': 'i'}}}");
	EQ("{'v': null}", "{'v': null}");
}

static void test_check(void)
{
	struct mql_error err;
	bson_t *b = J("{'a': {'b': [1, {'c': 2}]}}");
	uint8_t *copy;
	bson_t deep = BSON_INITIALIZER;

	CHECK(mql_bson_check(bson_get_data(b), b->len, MQL_MAX_DOC_SIZE, 100,
			     &err) == 0,
	      "good document refused: %s", err.msg);
	CHECK(mql_bson_check(bson_get_data(b), b->len, MQL_MAX_DOC_SIZE, 3,
			     &err) < 0 &&
		  err.code == 15,
	      "depth 4 passed a limit of 3");
	CHECK(mql_bson_check(bson_get_data(b), b->len, 10, 100, &err) < 0 &&
		  err.code == 10334 &&
		  strcmp(err.codename, "BSONObjectTooLarge") == 0,
	      "size limit");
	/* every truncation and every flipped length byte is refused or
	 * read as some well-formed document, never beyond its bytes */
	copy = malloc(b->len);
	for (uint32_t i = 0; i < b->len; i++) {
		memcpy(copy, bson_get_data(b), b->len);
		copy[i] ^= 0x7f;
		(void)mql_bson_check(copy, b->len, MQL_MAX_DOC_SIZE, 100, &err);
		CHECK(mql_bson_check(copy, i, MQL_MAX_DOC_SIZE, 100, &err) < 0,
		      "truncated to %u passed", i);
	}
	free(copy);
	/* a nested array whose last byte is not 0: libbson's iterator reads
	 * its elements, but will not start on it, so the order and every
	 * later reader would disagree; refused */
	{
		static const uint8_t bad[] = {
		    0x1b, 0, 0, 0, 0x04, 'a', 0, 0x13, 0, 0, 0, 0x10, '0', 0,
		    1,	  0, 0, 0, 0x10, '1', 0, 2,    0, 0, 0, 0xff, 0};

		CHECK(mql_bson_check(bad, sizeof(bad), MQL_MAX_DOC_SIZE, 100,
				     &err) < 0 &&
			  err.code == 22,
		      "a nested array ending in 0xff passed");
	}
	/* 150 levels: refused at 100, without recursion */
	{
		bson_t *levels[151];

		levels[0] = &deep;
		for (int i = 1; i <= 150; i++) {
			levels[i] = bson_new();
		}
		for (int i = 150; i >= 1; i--) {
			if (i < 150)
				bson_append_document(levels[i], "x", 1,
						     levels[i + 1]);
		}
		bson_append_document(&deep, "x", 1, levels[1]);
		for (int i = 1; i <= 150; i++)
			bson_destroy(levels[i]);
	}
	CHECK(mql_bson_check(bson_get_data(&deep), deep.len, MQL_MAX_DOC_SIZE,
			     100, &err) < 0 &&
		  err.code == 15,
	      "151 levels passed");
	CHECK(mql_bson_check(bson_get_data(&deep), deep.len, MQL_MAX_DOC_SIZE,
			     200, &err) == 0,
	      "151 levels refused at 200");
	bson_destroy(&deep);
	bson_destroy(b);
}

/* ---- paths -------------------------------------------------------- */

struct collect {
	bson_t out; /* the candidates, as an array */
	int n;
};

static int collect_cb(void *ctx, const bson_value_t *v, unsigned flags,
		      long pos)
{
	struct collect *c = ctx;
	char key[16];

	(void)pos;
	snprintf(key, sizeof(key), "%d", c->n++);
	if (flags & MQL_PATH_MISSING)
		bson_append_utf8(&c->out, key, -1, "MISSING", -1);
	else
		bson_append_value(&c->out, key, -1, v);
	return 0;
}

/* The candidates of path in doc, as JSON of {'0': c0, '1': c1, ...}. */
static void P(const char *doc, const char *path, unsigned opts,
	      const char *want)
{
	bson_t *d = J(doc), *w = J(want);
	struct mql_path p;
	struct mql_error err;
	struct collect c = {BSON_INITIALIZER, 0};
	char *got, *exp;

	CHECK(mql_path_parse(path, strlen(path), &p, &err) == 0, "parse %s",
	      path);
	mql_path_walk(&p, 0, bson_get_data(d), d->len, opts, collect_cb, &c);
	got = S(&c.out);
	exp = S(w);
	CHECK(strcmp(got, exp) == 0, "%s in %s: got %s want %s", path, doc, got,
	      exp);
	bson_free(got);
	bson_free(exp);
	mql_path_free(&p);
	bson_destroy(&c.out);
	bson_destroy(d);
	bson_destroy(w);
}

static void test_paths(void)
{
	const unsigned X = MQL_PATH_EXPAND;
	struct mql_path p;
	struct mql_error err;

	P("{'a': 1}", "a", X, "{'0': 1}");
	P("{'a': 1}", "b", X, "{'0': 'MISSING'}");
	P("{'a': {'b': 2}}", "a.b", X, "{'0': 2}");
	P("{'a': 1}", "a.b", X, "{'0': 'MISSING'}");
	/* a final array: its elements, then itself */
	P("{'a': [1, [2]]}", "a", X, "{'0': 1, '1': [2], '2': [1, [2]]}");
	P("{'a': [1, [2]]}", "a", 0, "{'0': [1, [2]]}");
	/* traversal: each document element, missing where it lacks b;
	 * scalars and nested arrays yield nothing */
	P("{'a': [{'b': 1}, {'c': 2}, 3, [{'b': 4}], {'b': [5, 6]}]}", "a.b", X,
	  "{'0': 1, '1': 'MISSING', '2': 5, '3': 6, '4': [5, 6]}");
	P("{'a': [1, 2]}", "a.b", X, "{}");
	P("{'a': []}", "a.b", X, "{}");
	/* numeric components index arrays, and name fields of documents */
	P("{'a': [5, 6]}", "a.1", X, "{'0': 6}");
	P("{'a': {'1': 'x'}}", "a.1", X, "{'0': 'x'}");
	P("{'a': [{'b': 1}, {'b': 2}]}", "a.1.b", X, "{'0': 2}");
	P("{'a': [[{'b': 7}]]}", "a.0.b", X, "{'0': 7}");
	/* two levels of arrays of documents */
	P("{'a': [{'b': [{'c': 1}, {'c': 2}]}, {'b': {'c': 3}}]}", "a.b.c", X,
	  "{'0': 1, '1': 2, '2': 3}");
	CHECK(mql_path_parse("a..b", 4, &p, &err) < 0 && err.code == 2,
	      "empty component");
	mql_path_free(&p);
	CHECK(mql_path_parse("", 0, &p, &err) < 0, "empty path");
	mql_path_free(&p);
}

/* ---- arithmetic ----------------------------------------------------- */

static void A(const char *a, const char *b, bool mul, const char *want)
{
	bson_t *x = J(a), *y = J(b), out = BSON_INITIALIZER;
	bson_value_t va = V(x), vb = V(y), r;
	char *got;
	int rc = mul ? mql_num_mul(&va, &vb, &r) : mql_num_add(&va, &vb, &r);

	if (rc == 0)
		bson_append_value(&out, "v", 1, &r);
	else
		bson_append_utf8(&out, "v", 1, "overflow", -1);
	got = bson_as_canonical_extended_json(&out, NULL);
	CHECK(strcmp(got, want) == 0, "%s %c %s: got %s want %s", a,
	      mul ? '*' : '+', b, got, want);
	bson_free(got);
	bson_destroy(&out);
	bson_destroy(x);
	bson_destroy(y);
}

static void test_arith(void)
{
	A("{'v': 1}", "{'v': 2}", false,
	  "{ \"v\" : { \"$numberInt\" : \"3\" } }");
	A("{'v': 2147483647}", "{'v': 1}", false,
	  "{ \"v\" : { \"$numberLong\" : \"2147483648\" } }");
	A("{'v': {'$numberLong': '9223372036854775807'}}", "{'v': 1}", false,
	  "{ \"v\" : \"overflow\" }");
	A("{'v': 1}", "{'v': 0.5}", false,
	  "{ \"v\" : { \"$numberDouble\" : \"1.5\" } }");
	A("{'v': 65536}", "{'v': 65536}", true,
	  "{ \"v\" : { \"$numberLong\" : \"4294967296\" } }");
	A("{'v': {'$numberDecimal': '1.1'}}",
	  "{'v': {'$numberDecimal': '2.20'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : \"3.30\" } }");
	A("{'v': {'$numberDecimal': '1.5'}}", "{'v': 2}", false,
	  "{ \"v\" : { \"$numberDecimal\" : \"3.5\" } }");
	A("{'v': {'$numberDecimal': '1.5'}}",
	  "{'v': {'$numberDecimal': '-1.5'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : \"0.0\" } }");
	/* double operands become decimals of 15 digits (MongoDB's
	 * Decimal128(double)) */
	A("{'v': {'$numberDecimal': '1'}}", "{'v': 0.1}", false,
	  "{ \"v\" : { \"$numberDecimal\" : \"1.100000000000000\" } }");
	A("{'v': {'$numberDecimal': '1.1'}}", "{'v': {'$numberDecimal': '3'}}",
	  true, "{ \"v\" : { \"$numberDecimal\" : \"3.3\" } }");
	/* rounding to 34 digits, half to even */
	A("{'v': {'$numberDecimal': '1E+40'}}",
	  "{'v': {'$numberDecimal': '1'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"1.000000000000000000000000000000000E+40\" } }");
	A("{'v': {'$numberDecimal': '9999999999999999999999999999999999'}}",
	  "{'v': {'$numberDecimal': '0.5'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"1.000000000000000000000000000000000E+34\" } }");
	A("{'v': {'$numberDecimal': '1000000000000000000000000000000000'}}",
	  "{'v': {'$numberDecimal': '0.5'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"1000000000000000000000000000000000\" } }");
	A("{'v': {'$numberDecimal': '1000000000000000000000000000000001'}}",
	  "{'v': {'$numberDecimal': '0.5'}}", false,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"1000000000000000000000000000000002\" } }");
	A("{'v': {'$numberDecimal': '1E+6144'}}",
	  "{'v': {'$numberDecimal': '10'}}", true,
	  "{ \"v\" : { \"$numberDecimal\" : \"Infinity\" } }");
	A("{'v': {'$numberDecimal': '99999999999999999'}}",
	  "{'v': {'$numberDecimal': '99999999999999999'}}", true,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"9999999999999999800000000000000001\" } }");
	A("{'v': {'$numberDecimal': '999999999999999999'}}",
	  "{'v': {'$numberDecimal': '999999999999999999'}}", true,
	  "{ \"v\" : { \"$numberDecimal\" : "
	  "\"9.999999999999999980000000000000000E+35\" } }");
}

static void test_div(void)
{
	bson_decimal128_t d, r;
	struct mql_dec x, q;
	char s[BSON_DECIMAL128_STRING];

	bson_decimal128_from_string("3", &d);
	mql_dec_unpack(&d, &x);
	mql_dec_div_u64(&x, 2, &q);
	mql_dec_pack(&q, &r);
	bson_decimal128_to_string(&r, s);
	CHECK(strcmp(s, "1.5") == 0, "3/2 = %s", s);
	bson_decimal128_from_string("1", &d);
	mql_dec_unpack(&d, &x);
	mql_dec_div_u64(&x, 3, &q);
	mql_dec_pack(&q, &r);
	bson_decimal128_to_string(&r, s);
	CHECK(strcmp(s, "0.3333333333333333333333333333333333") == 0,
	      "1/3 = %s", s);
	bson_decimal128_from_string("10", &d);
	mql_dec_unpack(&d, &x);
	mql_dec_div_u64(&x, 2, &q);
	mql_dec_pack(&q, &r);
	bson_decimal128_to_string(&r, s);
	CHECK(strcmp(s, "5") == 0, "10/2 = %s", s);
}

int main(void)
{
	test_type_order();
	test_numbers();
	test_compound();
	test_check();
	test_paths();
	test_arith();
	test_div();
	return mt_done("unit_mql_value");
}
