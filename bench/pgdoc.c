/* pgdoc.c - YCSB records as JSON objects (see pgdoc.h). */
#include "pgdoc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "record.h"

size_t pgdoc_max(const struct kb_fval *fv, unsigned n)
{
	size_t m = 2;

	for (unsigned i = 0; i < n; i++)
		m += KB_FIELD_NAME_MAX + 6 + 2 * fv[i].len;
	return m;
}

size_t pgdoc_encode(const struct kb_fval *fv, unsigned n, char *out)
{
	char *p = out;

	*p++ = '{';
	for (unsigned i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		*p++ = '"';
		p += kb_field_name(fv[i].idx, p);
		memcpy(p, "\":\"", 3);
		p += 3;
		for (size_t k = 0; k < fv[i].len; k++) {
			char c = (char)fv[i].val[k];

			if (c == '"' || c == '\\')
				*p++ = '\\';
			*p++ = c;
		}
		*p++ = '"';
	}
	*p++ = '}';
	return (size_t)(p - out);
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* A string at p (its opening quote) unescaped into *o; past its end, or
 * NULL.  \uXXXX is taken for characters below 0x80 only: YCSB's. */
static const char *read_str(const char *p, const char *end, char **o)
{
	if (p >= end || *p++ != '"')
		return NULL;
	while (p < end && *p != '"') {
		char c = *p++;

		if (c == '\\') {
			unsigned u;

			if (p >= end)
				return NULL;
			c = *p++;
			if (c == 'u') {
				if (end - p < 4 || sscanf(p, "%4x", &u) != 1 ||
				    u > 0x7f)
					return NULL;
				c = (char)u;
				p += 4;
			} else if (c == 'n' || c == 't' || c == 'r' ||
				   c == 'b' || c == 'f') {
				c = c == 'n'   ? '\n'
				    : c == 't' ? '\t'
				    : c == 'r' ? '\r'
				    : c == 'b' ? '\b'
					       : '\f';
			}
		}
		*(*o)++ = c;
	}
	return p < end ? p + 1 : NULL;
}

int pgdoc_decode(const char *json, size_t len, struct kb_fval *out,
		 unsigned max, char *scratch)
{
	const char *p = json, *end = json + len;
	char *o = scratch;
	unsigned n = 0;

	p = skip_ws(p, end);
	if (p >= end || *p++ != '{')
		return -1;
	p = skip_ws(p, end);
	if (p < end && *p == '}')
		return 0;
	for (;;) {
		char *name = o, *val;

		if (!(p = read_str(skip_ws(p, end), end, &o)))
			return -1;
		p = skip_ws(p, end);
		if (p >= end || *p++ != ':')
			return -1;
		val = o;
		if (!(p = read_str(skip_ws(p, end), end, &o)))
			return -1;
		if (n < max) {
			if (rec_field_index(name, (size_t)(val - name),
					    &out[n].idx))
				out[n].idx = UINT_MAX;
			out[n].val = (const uint8_t *)val;
			out[n].len = (size_t)(o - val);
			n++;
		}
		p = skip_ws(p, end);
		if (p < end && *p == '}')
			return (int)n;
		if (p >= end || *p++ != ',')
			return -1;
	}
}

/* ---- a value (msgpack) as JSON ---- */

#define PGDOC_DEPTH 8

struct mpin {
	const uint8_t *p, *end;
};

/* n bytes big-endian; -1 when they are not there. */
static int mp_be(struct mpin *in, unsigned n, uint64_t *v)
{
	if ((size_t)(in->end - in->p) < n)
		return -1;
	*v = 0;
	while (n--)
		*v = *v << 8 | *in->p++;
	return 0;
}

/* A JSON string of n bytes at in->p (a msgpack str or bin). */
static char *json_str(struct mpin *in, uint64_t n, char *o)
{
	static const char hex[] = "0123456789abcdef";

	if (n > (uint64_t)(in->end - in->p))
		return NULL;
	*o++ = '"';
	for (const uint8_t *s = in->p, *e = in->p + n; s < e; s++) {
		if (*s == '"' || *s == '\\') {
			*o++ = '\\';
			*o++ = (char)*s;
		} else if (*s < 0x20 || *s >= 0x7f) {
			/* bytes as characters: binaries are not UTF-8 */
			memcpy(o, "\\u00", 4);
			o[4] = hex[*s >> 4];
			o[5] = hex[*s & 15];
			o += 6;
		} else {
			*o++ = (char)*s;
		}
	}
	in->p += n;
	*o++ = '"';
	return o;
}

static char *json_value(struct mpin *in, char *o, int depth);

static char *json_map(struct mpin *in, uint64_t n, char *o, int depth)
{
	if (depth > PGDOC_DEPTH)
		return NULL;
	*o++ = '{';
	for (uint64_t i = 0; i < n && o; i++) {
		if (i)
			*o++ = ',';
		if (in->p >= in->end || !((*in->p & 0xe0) == 0xa0 ||
					  (*in->p >= 0xd9 && *in->p <= 0xdb)))
			return NULL; /* keys are strings */
		if (!(o = json_value(in, o, depth)))
			return NULL;
		*o++ = ':';
		o = json_value(in, o, depth);
	}
	if (o)
		*o++ = '}';
	return o;
}

/* The lengths of str8/16/32 (0xd9..), bin8/16/32 (0xc4..), map16/32. */
static int mp_len_bytes(uint8_t b)
{
	switch (b) {
	case 0xd9:
	case 0xc4: return 1;
	case 0xda:
	case 0xc5:
	case 0xde: return 2;
	case 0xdb:
	case 0xc6:
	case 0xdf: return 4;
	default: return 0;
	}
}

static char *json_value(struct mpin *in, char *o, int depth)
{
	uint64_t v;
	uint8_t b;
	double d;
	int lb;

	if (in->p >= in->end)
		return NULL;
	b = *in->p++;
	if (b < 0x80)
		return o + sprintf(o, "%u", b);
	if (b >= 0xe0)
		return o + sprintf(o, "%d", (int)(int8_t)b);
	if ((b & 0xf0) == 0x80)
		return json_map(in, b & 15, o, depth + 1);
	if ((b & 0xe0) == 0xa0)
		return json_str(in, b & 31, o);
	if ((lb = mp_len_bytes(b))) {
		if (mp_be(in, (unsigned)lb, &v))
			return NULL;
		return b >= 0xde ? json_map(in, v, o, depth + 1)
				 : json_str(in, v, o);
	}
	if (b >= 0xcc && b <= 0xd3) { /* uint8..64, int8..64 */
		unsigned n = 1u << ((b - 0xcc) & 3);

		if (mp_be(in, n, &v))
			return NULL;
		if (b <= 0xcf)
			return o + sprintf(o, "%llu", (unsigned long long)v);
		if (n < 8 && v >> (8 * n - 1)) /* sign-extend */
			v |= ~0ull << (8 * n);
		return o + sprintf(o, "%lld", (long long)v);
	}
	if (b == 0xcb || b == 0xca) {
		if (mp_be(in, b == 0xcb ? 8 : 4, &v))
			return NULL;
		if (b == 0xcb) {
			memcpy(&d, &v, 8);
		} else {
			uint32_t u = (uint32_t)v;
			float f;

			memcpy(&f, &u, 4);
			d = f;
		}
		if (d != d || d - d != 0) /* NaN, infinities: no JSON */
			return NULL;
		return o + sprintf(o, "%.17g", d);
	}
	if (b == 0xc0 || b == 0xc2 || b == 0xc3) {
		const char *w = b == 0xc0   ? "null"
				: b == 0xc2 ? "false"
					    : "true";

		return o + sprintf(o, "%s", w);
	}
	return NULL;
}

size_t pgdoc_value_max(size_t vlen)
{
	return 6 * vlen + 32;
}

long pgdoc_from_value(const uint8_t *val, size_t vlen, char *out)
{
	struct mpin in = {val, val + vlen};
	char *o;

	if (!vlen || !((*val & 0xf0) == 0x80 || *val == 0xde || *val == 0xdf))
		return -1;
	o = json_value(&in, out, 0);
	return o && in.p == in.end ? (long)(o - out) : -1;
}
