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
