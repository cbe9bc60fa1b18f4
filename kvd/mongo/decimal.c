/* decimal.c - decimal128 taken apart, compared exactly and computed with
 * (IEEE 754-2008 decimal arithmetic, round half to even), for $inc, $mul,
 * $sum and $avg on NumberDecimal values and for comparing them with the
 * other numbers.  libbson only converts decimal128 to and from strings,
 * so the arithmetic is here: coefficients below 10^34 fit 113 bits, and
 * every intermediate result (a product, a sum aligned on its exponents, a
 * dividend scaled up) fits the 256 bits of struct u256. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mql_int.h"

#define DEC_DIGITS 34
#define DEC_EMAX 6111  /* largest exponent of a coefficient */
#define DEC_EMIN -6176 /* smallest */
#define DEC_BIAS 6176

typedef unsigned __int128 u128;

/* ---- 256-bit unsigned integers (four little-endian 64-bit limbs) ---- */

struct u256 {
	uint64_t w[4];
};

static void u256_set(struct u256 *a, u128 v)
{
	a->w[0] = (uint64_t)v;
	a->w[1] = (uint64_t)(v >> 64);
	a->w[2] = 0;
	a->w[3] = 0;
}

static bool u256_zero(const struct u256 *a)
{
	return !(a->w[0] | a->w[1] | a->w[2] | a->w[3]);
}

static int u256_cmp(const struct u256 *a, const struct u256 *b)
{
	for (int i = 3; i >= 0; i--) {
		if (a->w[i] != b->w[i])
			return a->w[i] < b->w[i] ? -1 : 1;
	}
	return 0;
}

/* a *= m; the callers keep every product below 2^256. */
static void u256_mul_small(struct u256 *a, uint64_t m)
{
	u128 carry = 0;

	for (int i = 0; i < 4; i++) {
		u128 p = (u128)a->w[i] * m + carry;

		a->w[i] = (uint64_t)p;
		carry = p >> 64;
	}
}

static void u256_add(struct u256 *a, const struct u256 *b)
{
	u128 carry = 0;

	for (int i = 0; i < 4; i++) {
		u128 s = (u128)a->w[i] + b->w[i] + carry;

		a->w[i] = (uint64_t)s;
		carry = s >> 64;
	}
}

/* a -= b, a >= b. */
static void u256_sub(struct u256 *a, const struct u256 *b)
{
	uint64_t borrow = 0;

	for (int i = 0; i < 4; i++) {
		uint64_t x = a->w[i], y = b->w[i];
		uint64_t d = x - y - borrow;

		borrow = (x < y) || (x - y < borrow);
		a->w[i] = d;
	}
}

/* a /= d, returns the remainder. */
static uint64_t u256_div_small(struct u256 *a, uint64_t d)
{
	u128 rem = 0;

	for (int i = 3; i >= 0; i--) {
		u128 cur = (rem << 64) | a->w[i];

		a->w[i] = (uint64_t)(cur / d);
		rem = cur % d;
	}
	return (uint64_t)rem;
}

static void u256_mul_pow10(struct u256 *a, int k)
{
	for (; k >= 19; k -= 19)
		u256_mul_small(a, 10000000000000000000ull);
	for (; k > 0; k--)
		u256_mul_small(a, 10);
}

/* a /= 10^k; true when a nonzero remainder was dropped. */
static bool u256_div_pow10(struct u256 *a, int k)
{
	bool sticky = false;

	for (; k >= 19; k -= 19)
		sticky |= u256_div_small(a, 10000000000000000000ull) != 0;
	for (; k > 0; k--)
		sticky |= u256_div_small(a, 10) != 0;
	return sticky;
}

static int u256_digits(const struct u256 *a)
{
	struct u256 t = *a;
	int n = 0;

	while (!u256_zero(&t)) {
		u256_div_small(&t, 10);
		n++;
	}
	return n;
}

static int u128_digits(u128 v)
{
	int n = 0;

	while (v) {
		v /= 10;
		n++;
	}
	return n;
}

static u128 pow10_u128(int k)
{
	u128 p = 1;

	while (k-- > 0)
		p *= 10;
	return p;
}

/* ---- packing -------------------------------------------------------- */

void mql_dec_unpack(const bson_decimal128_t *d, struct mql_dec *out)
{
	uint64_t hi = d->high, lo = d->low;
	unsigned comb = (unsigned)(hi >> 58) & 0x1f;
	unsigned biased;
	u128 coeff;

	memset(out, 0, sizeof(*out));
	out->neg = hi >> 63;
	if (comb == 0x1f) {
		out->cls = MQL_DEC_NAN;
		return;
	}
	if (comb == 0x1e) {
		out->cls = MQL_DEC_INF;
		return;
	}
	if (((hi >> 61) & 3) == 3) {
		/* 11 then the exponent: the implied coefficient is at least
		 * 2^113 > 10^34, non-canonical, so zero. */
		biased = (unsigned)(hi >> 47) & 0x3fff;
		coeff = 0;
	} else {
		biased = (unsigned)(hi >> 49) & 0x3fff;
		coeff = ((u128)(hi & 0x1ffffffffffffull) << 64) | lo;
		if (coeff >= pow10_u128(DEC_DIGITS))
			coeff = 0;
	}
	out->cls = MQL_DEC_FINITE;
	out->exp = (int)biased - DEC_BIAS;
	out->coeff = coeff;
}

/* Rounds c * 10^exp to 34 digits within the exponent range; c holds at
 * most 77 digits.  sticky: nonzero digits below c were already dropped. */
static void dec_round(struct u256 *c, int *exp, bool sticky)
{
	int nd = u256_digits(c);
	int drop = nd - DEC_DIGITS;
	struct u256 lim;

	if (DEC_EMIN - *exp > drop)
		drop = DEC_EMIN - *exp;
	if (drop > 0) {
		unsigned rd;

		if (drop > nd + 1) {
			sticky |= !u256_zero(c);
			u256_set(c, 0);
			*exp += drop;
			return;
		}
		sticky |= u256_div_pow10(c, drop - 1);
		rd = (unsigned)u256_div_small(c, 10);
		*exp += drop;
		if (rd > 5 || (rd == 5 && (sticky || (c->w[0] & 1)))) {
			struct u256 one;

			u256_set(&one, 1);
			u256_add(c, &one);
			u256_set(&lim, pow10_u128(DEC_DIGITS));
			if (u256_cmp(c, &lim) == 0) {
				u256_div_small(c, 10);
				(*exp)++;
			}
		}
	}
}

void mql_dec_pack(const struct mql_dec *in, bson_decimal128_t *d)
{
	struct u256 c;
	int exp = in->exp;
	u128 coeff;
	uint64_t sign = in->neg ? 1ull << 63 : 0;

	if (in->cls == MQL_DEC_NAN) {
		d->high = 0x7c00000000000000ull;
		d->low = 0;
		return;
	}
	if (in->cls == MQL_DEC_INF) {
		d->high = sign | 0x7800000000000000ull;
		d->low = 0;
		return;
	}
	u256_set(&c, in->coeff);
	dec_round(&c, &exp, false);
	coeff = ((u128)c.w[1] << 64) | c.w[0];
	if (coeff == 0 && exp > DEC_EMAX)
		exp = DEC_EMAX;
	/* Fold down: a large exponent moves into the coefficient's zeros. */
	while (exp > DEC_EMAX && coeff * 10 < pow10_u128(DEC_DIGITS)) {
		coeff *= 10;
		exp--;
	}
	if (exp > DEC_EMAX) {
		d->high = sign | 0x7800000000000000ull;
		d->low = 0;
		return;
	}
	d->high =
	    sign | ((uint64_t)(exp + DEC_BIAS) << 49) | (uint64_t)(coeff >> 64);
	d->low = (uint64_t)coeff;
}

void mql_dec_from_int64(int64_t v, struct mql_dec *out)
{
	memset(out, 0, sizeof(*out));
	out->cls = MQL_DEC_FINITE;
	out->neg = v < 0;
	out->coeff = v < 0 ? (u128)(-(v + 1)) + 1 : (u128)v;
}

void mql_dec_from_double(double v, struct mql_dec *out)
{
	char buf[64], *e;
	int exp;

	memset(out, 0, sizeof(*out));
	if (isnan(v)) {
		out->cls = MQL_DEC_NAN;
		return;
	}
	out->neg = signbit(v) != 0;
	if (isinf(v)) {
		out->cls = MQL_DEC_INF;
		return;
	}
	out->cls = MQL_DEC_FINITE;
	/* "d.dddddddddddddde+XX": 15 significant digits */
	snprintf(buf, sizeof(buf), "%.14e", fabs(v));
	e = strchr(buf, 'e');
	exp = e ? atoi(e + 1) : 0;
	for (const char *p = buf; p < e; p++) {
		if (*p >= '0' && *p <= '9')
			out->coeff = out->coeff * 10 + (unsigned)(*p - '0');
	}
	out->exp = exp - 14;
}

double mql_dec_to_double(const struct mql_dec *d)
{
	bson_decimal128_t raw;
	char buf[BSON_DECIMAL128_STRING];

	if (d->cls == MQL_DEC_NAN)
		return NAN;
	if (d->cls == MQL_DEC_INF)
		return d->neg ? -INFINITY : INFINITY;
	mql_dec_pack(d, &raw);
	bson_decimal128_to_string(&raw, buf);
	return strtod(buf, NULL);
}

/* ---- comparison ----------------------------------------------------- */

/* NaN lowest, then -inf, finite, +inf: a rank for the classes. */
static int dec_class_rank(const struct mql_dec *a)
{
	if (a->cls == MQL_DEC_NAN)
		return 0;
	if (a->cls == MQL_DEC_INF)
		return a->neg ? 1 : 3;
	return 2;
}

static int dec_cmp_mag(u128 ca, int ea, u128 cb, int eb)
{
	int da = u128_digits(ca), db = u128_digits(cb);

	if (da + ea != db + eb)
		return da + ea < db + eb ? -1 : 1;
	/* same adjusted exponent: scale the shorter one to the same digits */
	if (da < db)
		ca *= pow10_u128(db - da);
	else
		cb *= pow10_u128(da - db);
	return ca < cb ? -1 : ca > cb;
}

int mql_dec_cmp(const struct mql_dec *a, const struct mql_dec *b)
{
	int ra = dec_class_rank(a), rb = dec_class_rank(b);
	bool za, zb;
	int m;

	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (ra != 2)
		return 0;
	za = a->coeff == 0;
	zb = b->coeff == 0;
	if (za && zb)
		return 0;
	if (za)
		return b->neg ? 1 : -1;
	if (zb)
		return a->neg ? -1 : 1;
	if (a->neg != b->neg)
		return a->neg ? -1 : 1;
	m = dec_cmp_mag(a->coeff, a->exp, b->coeff, b->exp);
	return a->neg ? -m : m;
}

int mql_dec_cmp_int64(const struct mql_dec *a, int64_t b)
{
	struct mql_dec d;

	mql_dec_from_int64(b, &d);
	return mql_dec_cmp(a, &d);
}

/* Exact decimal digits of a magnitude: 0.d[0]d[1]...d[n-1] * 10^e, no
 * trailing zeros; n == 0 for zero.  A double needs at most 767. */
struct digits {
	char d[800];
	int n, e;
};

static void digits_trim(struct digits *x)
{
	while (x->n > 0 && x->d[x->n - 1] == '0')
		x->n--;
}

static void digits_of_double(double v, struct digits *x)
{
	char buf[840];
	char *e;

	snprintf(buf, sizeof(buf), "%.766e", fabs(v));
	e = strchr(buf, 'e');
	x->n = 0;
	x->e = (e ? atoi(e + 1) : 0) + 1;
	for (const char *p = buf; p < e && x->n < (int)sizeof(x->d); p++) {
		if (*p >= '0' && *p <= '9')
			x->d[x->n++] = *p;
	}
	digits_trim(x);
	if (x->n == 0 || (x->n == 1 && x->d[0] == '0'))
		x->n = 0;
}

static void digits_of_dec(const struct mql_dec *a, struct digits *x)
{
	char tmp[48];
	int n = 0;
	u128 c = a->coeff;

	while (c) {
		tmp[n++] = (char)('0' + (int)(c % 10));
		c /= 10;
	}
	for (int i = 0; i < n; i++)
		x->d[i] = tmp[n - 1 - i];
	x->n = n;
	x->e = n + a->exp;
	digits_trim(x);
}

static int digits_cmp(const struct digits *a, const struct digits *b)
{
	int m;

	if (a->n == 0 || b->n == 0)
		return (a->n > 0) - (b->n > 0);
	if (a->e != b->e)
		return a->e < b->e ? -1 : 1;
	m = memcmp(a->d, b->d, (size_t)(a->n < b->n ? a->n : b->n));
	if (m)
		return m < 0 ? -1 : 1;
	return (a->n > b->n) - (a->n < b->n);
}

int mql_dec_cmp_double(const struct mql_dec *a, double b)
{
	struct mql_dec bd;
	struct digits *x, *y;
	bool aneg, bneg;
	int m;

	if (isnan(b) || isinf(b) || a->cls != MQL_DEC_FINITE) {
		mql_dec_from_double(b, &bd);
		if (bd.cls == MQL_DEC_FINITE) /* only the class matters */
			bd.coeff = b == 0 ? 0 : 1;
		if (a->cls == MQL_DEC_FINITE && bd.cls == MQL_DEC_FINITE)
			return 0; /* unreachable */
		return dec_class_rank(a) < dec_class_rank(&bd)	 ? -1
		       : dec_class_rank(a) > dec_class_rank(&bd) ? 1
								 : 0;
	}
	x = malloc(2 * sizeof(*x));
	if (!x)
		abort();
	y = x + 1;
	digits_of_dec(a, x);
	digits_of_double(b, y);
	aneg = a->neg && x->n > 0;
	bneg = b < 0 && y->n > 0;
	if (aneg != bneg)
		m = aneg ? -1 : 1;
	else
		m = aneg ? -digits_cmp(x, y) : digits_cmp(x, y);
	free(x);
	return m;
}

/* ---- arithmetic ----------------------------------------------------- */

static void dec_finish(struct u256 *c, int exp, bool neg, bool sticky,
		       struct mql_dec *out)
{
	dec_round(c, &exp, sticky);
	out->cls = MQL_DEC_FINITE;
	out->neg = neg;
	out->exp = exp;
	out->coeff = ((u128)c->w[1] << 64) | c->w[0];
	if (exp > DEC_EMAX) {
		/* fold the exponent into the coefficient, else overflow */
		while (out->exp > DEC_EMAX &&
		       out->coeff * 10 < pow10_u128(DEC_DIGITS)) {
			out->coeff *= 10;
			out->exp--;
		}
		if (out->coeff == 0)
			out->exp = DEC_EMAX;
		if (out->exp > DEC_EMAX)
			out->cls = MQL_DEC_INF;
	}
}

/* NaN and infinity operands of + and *: true when *out is decided. */
static bool dec_special(const struct mql_dec *a, const struct mql_dec *b,
			bool mul, struct mql_dec *out)
{
	memset(out, 0, sizeof(*out));
	if (a->cls == MQL_DEC_NAN || b->cls == MQL_DEC_NAN) {
		out->cls = MQL_DEC_NAN;
		return true;
	}
	if (a->cls != MQL_DEC_INF && b->cls != MQL_DEC_INF)
		return false;
	if (mul) {
		const struct mql_dec *fin = a->cls == MQL_DEC_INF ? b : a;

		out->cls = fin->cls == MQL_DEC_FINITE && fin->coeff == 0
			       ? MQL_DEC_NAN
			       : MQL_DEC_INF;
		out->neg = a->neg != b->neg;
		return true;
	}
	if (a->cls == MQL_DEC_INF && b->cls == MQL_DEC_INF &&
	    a->neg != b->neg) {
		out->cls = MQL_DEC_NAN;
		return true;
	}
	out->cls = MQL_DEC_INF;
	out->neg = a->cls == MQL_DEC_INF ? a->neg : b->neg;
	return true;
}

void mql_dec_add(const struct mql_dec *a, const struct mql_dec *b,
		 struct mql_dec *out)
{
	struct u256 ca, cb;
	int exp;
	bool sticky = false, neg;

	if (dec_special(a, b, false, out))
		return;
	if (a->exp < b->exp) { /* a has the larger exponent */
		const struct mql_dec *t = a;

		a = b;
		b = t;
	}
	u256_set(&ca, a->coeff);
	u256_set(&cb, b->coeff);
	if (a->coeff == 0) { /* 0E+n + b is b exactly */
		*out = *b;
		out->neg = b->coeff ? b->neg : a->neg && b->neg;
		return;
	}
	if (a->exp - b->exp <= 38) {
		u256_mul_pow10(&ca, a->exp - b->exp);
		exp = b->exp;
	} else {
		/* b lies wholly below a's 39th digit: align b on a's
		 * exponent less 39, then one more digit of both, where a
		 * 1 in b stands for whatever of b was dropped (it rounds
		 * as any nonzero tail does: a sticky digit) */
		u256_mul_pow10(&ca, 40);
		exp = a->exp - 40;
		sticky = u256_div_pow10(&cb, a->exp - 39 - b->exp);
		u256_mul_small(&cb, 10);
		if (sticky) {
			struct u256 one;

			u256_set(&one, 1);
			u256_add(&cb, &one);
			sticky = false;
		}
	}
	if (a->neg == b->neg) {
		u256_add(&ca, &cb);
		neg = a->neg;
	} else if (u256_cmp(&ca, &cb) >= 0) {
		u256_sub(&ca, &cb);
		neg = a->neg;
	} else {
		u256_sub(&cb, &ca);
		ca = cb;
		neg = b->neg;
	}
	if (u256_zero(&ca))
		neg = a->neg && b->neg; /* x + -x is +0 */
	dec_finish(&ca, exp, neg, sticky, out);
}

void mql_dec_mul(const struct mql_dec *a, const struct mql_dec *b,
		 struct mql_dec *out)
{
	struct u256 c, t;
	u128 lo, hi;
	u128 al = (uint64_t)a->coeff, ah = a->coeff >> 64;
	u128 bl = (uint64_t)b->coeff, bh = b->coeff >> 64;

	if (dec_special(a, b, true, out))
		return;
	/* schoolbook 128x128: ah and bh are below 2^49 */
	lo = al * bl;
	u256_set(&c, lo);
	hi = al * bh + ah * bl; /* < 2^114: no overflow */
	u256_set(&t, hi);
	/* shift t left by 64 bits */
	t.w[3] = t.w[2];
	t.w[2] = t.w[1];
	t.w[1] = t.w[0];
	t.w[0] = 0;
	u256_add(&c, &t);
	u256_set(&t, ah * bh);
	t.w[3] = t.w[1];
	t.w[2] = t.w[0];
	t.w[1] = 0;
	t.w[0] = 0;
	u256_add(&c, &t);
	dec_finish(&c, a->exp + b->exp, a->neg != b->neg, false, out);
}

void mql_dec_div_u64(const struct mql_dec *a, uint64_t n, struct mql_dec *out)
{
	struct u256 c;
	int scale, exp;
	bool sticky;

	memset(out, 0, sizeof(*out));
	if (a->cls != MQL_DEC_FINITE || a->coeff == 0 || n == 1) {
		*out = *a;
		return;
	}
	u256_set(&c, a->coeff);
	scale = 75 - u128_digits(a->coeff);
	u256_mul_pow10(&c, scale);
	exp = a->exp - scale;
	sticky = u256_div_small(&c, n) != 0;
	if (!sticky) {
		/* exact: IEEE's preferred exponent is a's (n has exponent 0),
		 * so trailing zeros go while the exponent is below it */
		struct u256 t = c;

		while (exp < a->exp && u256_div_small(&t, 10) == 0) {
			c = t;
			exp++;
		}
	}
	dec_finish(&c, exp, a->neg, sticky, out);
}
