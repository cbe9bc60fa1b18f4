/* strops.c - the arithmetic of string, bit and float commands that both
 * doors share (strops.h): RESP's GETRANGE, BITCOUNT, BITPOS, BITOP,
 * INCRBYFLOAT (resp/) and the native protocol's (native/cmd_str.c) run
 * the same code, so the two cannot drift apart on Redis's rules.
 */
#include "strops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_status.h"
#include "net/loop.h"
#include "net/write.h"

/* The first bit equal to bit in p[0..n), or -1 for a one that is not
 * there, or n * 8 for a zero that is not (the string is zero padded). */
static long long first_bit(const uint8_t *p, size_t n, int bit)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t b = bit ? p[i] : (uint8_t)~p[i];

		if (b)
			return (long long)(i * 8) + __builtin_clz(b) - 24;
	}
	return bit ? -1 : (long long)n * 8;
}

/* Read in place, not copied: a value read stays valid until the reader
 * is reset at the end of the loop turn (shard.h), and the section runs
 * no write before the fold ends. */
static int bitop_src(struct kvd_conn *c, struct kv_slice k, struct kv_slice *v)
{
	struct kvd_io *io = c->io;
	int rc = KV_NOT_FOUND;

	/* a key no write could have stored is missing (resp_key_ok's rule) */
	if (k.n >= 1 && k.n <= io->srv->cfg->max_key)
		rc = kvd_reader_get(io->reader,
				    kvd_shard_of(k.p, k.n, io->srv->nshards),
				    k.p, k.n, io->now_ms, v);
	if (rc == KV_NOT_FOUND)
		*v = (struct kv_slice){0};
	return rc == KV_NOT_FOUND ? KV_OK : rc;
}

/* Clamp [*start, *end] to a string of len units as Redis does; 0 when the
 * range is empty. */
int kvd_clamp_range(long long *start, long long *end, long long len)
{
	if (*start < 0)
		*start += len;
	if (*end < 0)
		*end += len;
	if (*start < 0)
		*start = 0;
	if (*end < 0)
		*end = 0;
	if (*end >= len)
		*end = len - 1;
	return *start <= *end && len > 0;
}

/* Convert a range in bytes or bits into bytes and edge masks (bitops.c). */
int kvd_bitrange_bytes(struct bitrange *br, long long len, int isbit)
{
	br->first_mask = br->last_mask = 0;
	if (!kvd_clamp_range(&br->start, &br->end, isbit ? len << 3 : len))
		return 0;
	if (isbit) {
		br->first_mask =
		    (uint8_t)(~((1u << (8 - (br->start & 7))) - 1) & 0xff);
		br->last_mask = (uint8_t)((1u << (7 - (br->end & 7))) - 1);
		br->start >>= 3;
		br->end >>= 3;
	}
	return 1;
}

long long kvd_popcount(const uint8_t *p, size_t n)
{
	long long bits = 0;

	for (size_t i = 0; i < n; i++)
		bits += __builtin_popcount(p[i]);
	return bits;
}

/* BITPOS's search of a range of bytes whose edge bits outside the range
 * are masked: set to the opposite of what is looked for. */
long long kvd_bitpos_range(const uint8_t *p, const struct bitrange *br, int bit,
			   long long *bytes)
{
	long long start = br->start, n = br->end - br->start + 1;
	uint8_t fill = bit ? 0 : 0xff;
	long long pos;

	*bytes = n;
	if (!br->first_mask && !br->last_mask)
		return first_bit(p + start, (size_t)n, bit);
	for (long long i = 0; i < n; i++) {
		uint8_t b = p[start + i];

		if (i == 0)
			b = (uint8_t)((b & ~br->first_mask) |
				      (fill & br->first_mask));
		if (i == n - 1)
			b = (uint8_t)((b & ~br->last_mask) |
				      (fill & br->last_mask));
		pos = first_bit(&b, 1, bit);
		if (pos >= 0 && pos < 8)
			return pos + i * 8;
	}
	return bit ? -1 : n * 8;
}

void kvd_bitop_fold(uint8_t *dst, struct kv_slice src, size_t len, int op,
		    int first)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t b = i < src.n ? src.p[i] : 0;

		if (first)
			dst[i] = op == BOP_NOT ? (uint8_t)~b : b;
		else if (op == BOP_AND)
			dst[i] &= b;
		else if (op == BOP_OR)
			dst[i] |= b;
		else
			dst[i] ^= b;
	}
}

/* Two passes over the sources, read where they lie: the first finds the
 * result's length (the longest source's), which is refused past
 * max-value-size before anything is allocated; the second folds them
 * into out.  So the work holds one value, however many sources are
 * named (copying each first held their sum: 250 x 16 MiB for a 1.8 KB
 * request). */
int kvd_bitop_sources(struct kvd_conn *c, int op, const struct kv_slice *src,
		      uint32_t n, struct kv_buf *out)
{
	struct kv_slice v;
	size_t len = 0;

	c->io->now_ms = kvd_now_ms();
	for (uint32_t i = 0; i < n; i++) {
		int rc = bitop_src(c, src[i], &v);

		if (rc) /* KV_WRONG_TYPE: a source holds a hash */
			return rc;
		if (v.n > len)
			len = v.n;
	}
	if (len > c->io->srv->cfg->max_value)
		return KV_VALUE_TOO_LARGE;
	if (len && kv_buf_reserve(out, len))
		return KV_INTERNAL;
	out->len = len;
	for (uint32_t i = 0; i < n; i++) {
		if (bitop_src(c, src[i], &v))
			return KV_INTERNAL;
		kvd_bitop_fold(out->data, v, len, op, i == 0);
	}
	return KV_OK;
}

/* Redis's string2ld: the whole string, no leading space, not NaN. */
int kvd_parse_ld(struct kv_slice s, long double *out)
{
	char buf[5 * 1024 + 1], *end;

	if (s.n == 0 || s.n >= sizeof(buf) || memchr(s.p, 0, s.n))
		return -1;
	memcpy(buf, s.p, s.n);
	buf[s.n] = '\0';
	if (buf[0] == ' ' || (buf[0] >= '\t' && buf[0] <= '\r'))
		return -1;
	*out = strtold(buf, &end);
	if (*end || isnan(*out))
		return -1;
	return 0;
}

/* Redis's ld2string(LD_STR_HUMAN): %.17Lf, trailing zeros trimmed, no
 * negative zero. */
size_t kvd_format_ld(char *buf, size_t cap, long double v)
{
	int l = snprintf(buf, cap, "%.17Lf", v);

	if (l < 0 || (size_t)l >= cap)
		return 0;
	if (strchr(buf, '.')) {
		while (buf[l - 1] == '0')
			l--;
		if (buf[l - 1] == '.')
			l--;
	}
	if (l == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		l = 1;
	}
	buf[l] = '\0';
	return (size_t)l;
}
