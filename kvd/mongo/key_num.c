/* key_num.c - numbers in index keys: int32, int64, double and decimal128
 * on one line, so that memcmp orders them as mql_value_cmp does (exactly:
 * 2^53 + 1 as an int64 sorts above the double 2^53, NumberDecimal("0.1")
 * above the double 0.1, which is 0.1000000000000000055511151231257827...).
 *
 * A finite nonzero number x is written as its sign, then E = floor(log2
 * |x|) and the first 64 bits of |x| / 2^E (its mantissa, the leading 1
 * included), truncated.  Every int64 and every double fits those 64 bits
 * exactly, and so do decimals that are integers below 2^64 or fractions
 * with few binary digits: those end with the byte 0x01.  A decimal that
 * does not fit (0.1, 10^30) is above the truncated value of its 64 bits:
 * 0x02 then follows, and then the decimal itself (its adjusted decimal
 * exponent and its digits), which orders the decimals that share those 64
 * bits.  Equal numbers of any type thus write the same bytes (1, 1.0,
 * NumberLong(1), NumberDecimal("1.00")), as one value of an index must.
 * A negative number writes the same body with every byte inverted.
 *
 * Decimals need exact big arithmetic: 10^6176 has 20,517 bits.  struct bn
 * holds 340 limbs of 64 bits (21,760 bits), enough for a coefficient
 * below 2^113 shifted by 10^6176 and 65 more bits. */
#include <math.h>
#include <string.h>

#include "key_int.h"
#include "mql_int.h"

typedef unsigned __int128 u128;

#define BN_LIMBS 340
#define E_BIAS 32768

struct bn {
	uint64_t w[BN_LIMBS];
	int n; /* limbs in use; w[n - 1] != 0 unless n == 0 */
};

static void bn_trim(struct bn *a)
{
	while (a->n > 0 && a->w[a->n - 1] == 0)
		a->n--;
}

static void bn_set(struct bn *a, u128 v)
{
	a->w[0] = (uint64_t)v;
	a->w[1] = (uint64_t)(v >> 64);
	a->n = 2;
	bn_trim(a);
}

static int bn_bitlen(const struct bn *a)
{
	if (a->n == 0)
		return 0;
	return 64 * (a->n - 1) + 64 - __builtin_clzll(a->w[a->n - 1]);
}

static void bn_mul_small(struct bn *a, uint64_t m)
{
	u128 carry = 0;

	for (int i = 0; i < a->n; i++) {
		u128 p = (u128)a->w[i] * m + carry;

		a->w[i] = (uint64_t)p;
		carry = p >> 64;
	}
	if (carry && a->n < BN_LIMBS)
		a->w[a->n++] = (uint64_t)carry;
}

static void bn_mul_pow(struct bn *a, uint64_t base, uint64_t chunk,
		       int chunk_exp, int k)
{
	for (; k >= chunk_exp; k -= chunk_exp)
		bn_mul_small(a, chunk);
	while (k-- > 0)
		bn_mul_small(a, base);
}

static void bn_mul_pow10(struct bn *a, int k)
{
	bn_mul_pow(a, 10, 10000000000000000000ull, 19, k);
}

/* dst = src << bits (dst may be src). */
static void bn_shl(struct bn *dst, const struct bn *src, int bits)
{
	int limbs = bits / 64, b = bits % 64, n = src->n + limbs + 1;

	if (n > BN_LIMBS)
		n = BN_LIMBS;
	for (int i = n - 1; i >= 0; i--) {
		int j = i - limbs;
		uint64_t hi = j >= 0 && j < src->n ? src->w[j] : 0;
		uint64_t lo = j - 1 >= 0 && j - 1 < src->n ? src->w[j - 1] : 0;

		dst->w[i] = b ? (hi << b) | (lo >> (64 - b)) : hi;
	}
	dst->n = n;
	bn_trim(dst);
}

static int bn_cmp(const struct bn *a, const struct bn *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (int i = a->n - 1; i >= 0; i--) {
		if (a->w[i] != b->w[i])
			return a->w[i] < b->w[i] ? -1 : 1;
	}
	return 0;
}

/* a -= b, a >= b. */
static void bn_sub(struct bn *a, const struct bn *b)
{
	uint64_t borrow = 0;

	for (int i = 0; i < a->n; i++) {
		uint64_t bi = i < b->n ? b->w[i] : 0;
		u128 d = (u128)a->w[i] - bi - borrow;

		a->w[i] = (uint64_t)d;
		borrow = (uint64_t)(d >> 64) & 1;
	}
	bn_trim(a);
}

/* The 64 bits of a from bit lo up; true in *below when a bit under lo is
 * set. */
static uint64_t bn_bits(const struct bn *a, int lo, bool *below)
{
	int l = lo / 64, b = lo % 64;
	uint64_t x = l < a->n ? a->w[l] >> b : 0;

	if (b && l + 1 < a->n)
		x |= a->w[l + 1] << (64 - b);
	*below = b && (a->w[l] & ((1ull << b) - 1));
	for (int i = 0; i < l && !*below; i++)
		*below = a->w[i] != 0;
	return x;
}

/* a /= d; the remainder. */
static uint64_t bn_div_small(struct bn *a, uint64_t d)
{
	u128 r = 0;

	for (int i = a->n - 1; i >= 0; i--) {
		u128 cur = (r << 64) | a->w[i];

		a->w[i] = (uint64_t)(cur / d);
		r = cur % d;
	}
	bn_trim(a);
	return (uint64_t)r;
}

static int u128_bitlen(u128 v)
{
	return v >> 64 ? 128 - __builtin_clzll((uint64_t)(v >> 64))
		       : 64 - __builtin_clzll((uint64_t)v);
}

/* c * 10^e (c > 0) as E and the truncated 64-bit mantissa m. */
static void dec_bits(u128 c, int e, int *E, uint64_t *m, bool *exact)
{
	struct bn *N = bson_malloc(3 * sizeof(*N)), *D = N + 1, *T = N + 2;
	uint64_t q = 0;
	int t;

	bn_set(N, c);
	if (e >= 0) {
		int bl;

		bn_mul_pow10(N, e);
		bl = bn_bitlen(N);
		*E = bl - 1;
		if (bl <= 64) {
			*m = N->w[0] << (64 - bl);
			*exact = true;
		} else {
			*m = bn_bits(N, bl - 64, exact);
			*exact = !*exact;
		}
		bson_free(N);
		return;
	}
	bn_set(D, 1);
	bn_mul_pow10(D, -e);
	/* q = floor(c * 2^t / 10^-e) lands in [2^62, 2^64) */
	t = 63 - (u128_bitlen(c) - bn_bitlen(D));
	if (t >= 0)
		bn_shl(N, N, t);
	else
		bn_shl(D, D, -t);
	for (int b = 63; b >= 0; b--) {
		bn_shl(T, D, b);
		if (bn_cmp(N, T) >= 0) {
			bn_sub(N, T);
			q |= 1ull << b;
		}
	}
	if (!(q >> 63)) { /* one bit more */
		bn_shl(N, N, 1);
		q <<= 1;
		if (bn_cmp(N, D) >= 0) {
			bn_sub(N, D);
			q |= 1;
		}
		t++;
	}
	*E = 63 - t;
	*m = q;
	*exact = N->n == 0;
	bson_free(N);
}

/* The decimal's own order among those that share 64 bits: its adjusted
 * exponent, then its digits two a byte (1 + 10a + b), then 0. */
static size_t dec_tail(const struct mql_dec *d, uint8_t *out)
{
	char dg[40];
	u128 c = d->coeff;
	int exp = d->exp, n = 0, adj;
	size_t o = 0;

	while (c % 10 == 0) {
		c /= 10;
		exp++;
	}
	for (u128 x = c; x; x /= 10)
		n++;
	for (int i = n - 1; i >= 0; i--, c /= 10)
		dg[i] = (char)(c % 10);
	adj = exp + n - 1 + E_BIAS;
	out[o++] = (uint8_t)(adj >> 8);
	out[o++] = (uint8_t)adj;
	for (int i = 0; i < n; i += 2)
		out[o++] =
		    (uint8_t)(1 + 10 * dg[i] + (i + 1 < n ? dg[i + 1] : 0));
	out[o++] = 0;
	return o;
}

void key_number(struct kbuf *k, const bson_value_t *v)
{
	uint8_t body[40];
	struct mql_dec d;
	uint64_t m = 0, u;
	int E = 0, e;
	bool neg = false, exact = true;
	size_t n;
	double x;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		u = v->value_type == BSON_TYPE_INT32
			? (uint64_t)(int64_t)v->value.v_int32
			: (uint64_t)v->value.v_int64;
		if (u == 0) {
			kbyte(k, K_ZERO);
			return;
		}
		neg = (int64_t)u < 0;
		u = neg ? -u : u;
		E = 63 - __builtin_clzll(u);
		m = u << __builtin_clzll(u);
		break;
	case BSON_TYPE_DOUBLE:
		x = v->value.v_double;
		if (isnan(x)) {
			kbyte(k, K_NAN);
			return;
		}
		if (isinf(x)) {
			kbyte(k, x < 0 ? K_NEGINF : K_POSINF);
			return;
		}
		if (x == 0) {
			kbyte(k, K_ZERO);
			return;
		}
		neg = x < 0;
		x = frexp(fabs(x), &e);
		E = e - 1;
		m = (uint64_t)ldexp(x, 64);
		break;
	default: /* decimal128 */
		mql_dec_unpack(&v->value.v_decimal128, &d);
		if (d.cls == MQL_DEC_NAN) {
			kbyte(k, K_NAN);
			return;
		}
		if (d.cls == MQL_DEC_INF) {
			kbyte(k, d.neg ? K_NEGINF : K_POSINF);
			return;
		}
		if (d.coeff == 0) {
			kbyte(k, K_ZERO);
			return;
		}
		neg = d.neg;
		dec_bits(d.coeff, d.exp, &E, &m, &exact);
	}
	kbyte(k, neg ? K_NEG : K_POS);
	body[0] = (uint8_t)((E + E_BIAS) >> 8);
	body[1] = (uint8_t)(E + E_BIAS);
	for (int i = 0; i < 8; i++)
		body[2 + i] = (uint8_t)(m >> (56 - 8 * i));
	body[10] = exact ? 1 : 2;
	n = 11 + (exact ? 0 : dec_tail(&d, body + 11));
	for (size_t i = 0; neg && i < n; i++)
		body[i] = (uint8_t)~body[i];
	kput(k, body, n);
}

/* ---- decoding --------------------------------------------------------- */

static void set_dec(bson_value_t *v, bool neg, u128 c, int exp)
{
	struct mql_dec d = {MQL_DEC_FINITE, neg, exp, c};

	v->value_type = BSON_TYPE_DECIMAL128;
	mql_dec_pack(&d, &v->value.v_decimal128);
}

/* The decimal of an exact m * 2^(E - 63) that no int64 or double holds:
 * 0, or -1 when it has more digits than a decimal128 (no key of ours). */
static int exact_to_dec(bool neg, int E, uint64_t m, bson_value_t *v)
{
	static const u128 lim =
	    (u128)10000000000000000ull * 1000000000000000000ull;
	/* lim: 10^34, the first number of 35 digits */
	struct bn *N = bson_malloc(sizeof(*N));
	int tz = __builtin_ctzll(m), s = E - 63 + tz, exp = 0, rc = -1;

	bn_set(N, m >> tz);
	if (s >= 0 && s <= 256) {
		bn_shl(N, N, s);
		for (;;) { /* trailing decimal zeros go to the exponent */
			struct bn *q = bson_malloc(sizeof(*q));
			bool zero;

			*q = *N;
			zero = bn_div_small(q, 10) == 0;
			if (zero)
				*N = *q;
			bson_free(q);
			if (!zero)
				break;
			exp++;
		}
	} else if (s < 0 && s >= -128) {
		bn_mul_pow(N, 5, 7450580596923828125ull, 27, -s);
		exp = s;
	}
	if ((s >= 0 && s <= 256) || (s < 0 && s >= -128)) {
		u128 c = N->n > 1 ? ((u128)N->w[1] << 64) | N->w[0]
			 : N->n	  ? N->w[0]
				  : 0;

		if (N->n <= 2 && c < lim) {
			set_dec(v, neg, c, exp);
			rc = 0;
		}
	}
	bson_free(N);
	return rc;
}

/* An exact m * 2^(E - 63): the narrowest of int32, int64, double that
 * holds it, else a decimal. */
static int exact_value(bool neg, int E, uint64_t m, bson_value_t *v)
{
	int tz = __builtin_ctzll(m);

	if (E >= 0 && E <= 63 && (63 - E <= tz || E == 63)) {
		uint64_t u = m >> (63 - E);

		if (!neg && u <= INT32_MAX) {
			v->value_type = BSON_TYPE_INT32;
			v->value.v_int32 = (int32_t)u;
			return 0;
		}
		if (neg && u <= (uint64_t)INT32_MAX + 1) {
			v->value_type = BSON_TYPE_INT32;
			v->value.v_int32 = (int32_t)(-(int64_t)u);
			return 0;
		}
		if (u <= (uint64_t)INT64_MAX || (neg && u == 1ull << 63)) {
			v->value_type = BSON_TYPE_INT64;
			v->value.v_int64 = neg ? (int64_t)(0 - u) : (int64_t)u;
			return 0;
		}
	}
	if (64 - tz <= 53 && E <= 1023 && E - 63 + tz >= -1074) {
		v->value_type = BSON_TYPE_DOUBLE;
		v->value.v_double = ldexp((double)(m >> tz), E - 63 + tz);
		if (neg)
			v->value.v_double = -v->value.v_double;
		return 0;
	}
	return exact_to_dec(neg, E, m, v);
}

/* The digits after 0x02: the decimal itself. */
static long tail_value(bool neg, const uint8_t *p, size_t n, bson_value_t *v)
{
	u128 c = 0;
	int digits = 0, adj, exp;
	size_t i = 2;

	if (n < 3)
		return -1;
	adj = ((p[0] << 8) | p[1]) - E_BIAS;
	for (; i < n && p[i] != 0; i++) {
		if (p[i] > 100 || digits >= 34)
			return -1;
		c = c * 100 + (u128)(p[i] - 1);
		digits += 2;
	}
	if (i == n)
		return -1;
	exp = adj - (digits - 1);
	while (c && c % 10 == 0) { /* the pad digit */
		c /= 10;
		exp++;
	}
	while (exp > 6111 && c < (u128)1 << 100) {
		c *= 10;
		exp--;
	}
	set_dec(v, neg, c, exp);
	return (long)i + 1;
}

long key_number_decode(uint8_t t, const uint8_t *p, size_t n, bson_value_t *v)
{
	uint8_t body[40];
	bool neg = t == K_NEG;
	uint64_t m = 0;
	size_t len = n < sizeof(body) ? n : sizeof(body);
	long used;
	int E;

	memset(v, 0, sizeof(*v));
	v->value_type = BSON_TYPE_DOUBLE;
	switch (t) {
	case K_NAN: v->value.v_double = NAN; return 0;
	case K_NEGINF: v->value.v_double = -INFINITY; return 0;
	case K_POSINF: v->value.v_double = INFINITY; return 0;
	case K_ZERO:
		v->value_type = BSON_TYPE_INT32;
		v->value.v_int32 = 0;
		return 0;
	}
	if (len < 11)
		return -1;
	for (size_t i = 0; i < len; i++)
		body[i] = neg ? (uint8_t)~p[i] : p[i];
	E = ((body[0] << 8) | body[1]) - E_BIAS;
	for (int i = 0; i < 8; i++)
		m = (m << 8) | body[2 + i];
	if (!(m >> 63))
		return -1;
	if (body[10] == 1)
		return exact_value(neg, E, m, v) < 0 ? -1 : 11;
	if (body[10] != 2)
		return -1;
	used = tail_value(neg, body + 11, len - 11, v);
	return used < 0 ? -1 : 11 + used;
}
