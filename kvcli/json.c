/* json.c - strict JSON reader/writer, base64, JSON <-> msgpack (json.h). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_mp.h"

/* ===================== UTF-8 ===================== */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		uint8_t lo = c == 0xe0 ? 0xa0 : 0x80,
			hi = c == 0xed ? 0x9f : 0xbf;

		return n >= 3 && p[1] >= lo && p[1] <= hi &&
			       (p[2] & 0xc0) == 0x80
			   ? 3
			   : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		uint8_t lo = c == 0xf0 ? 0x90 : 0x80,
			hi = c == 0xf4 ? 0x8f : 0xbf;

		return n >= 4 && p[1] >= lo && p[1] <= hi &&
			       (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80
			   ? 4
			   : 0;
	}
	return 0;
}

int utf8_valid(const void *p, size_t n)
{
	const uint8_t *s = p, *end = s + n;

	while (s < end) {
		size_t k;

		/* ASCII runs are the common case: eight bytes at a time. */
		while (end - s >= 8) {
			uint64_t w;

			memcpy(&w, s, 8);
			if (w & 0x8080808080808080ull)
				break;
			s += 8;
		}
		if (s == end)
			break;
		if (!(k = utf8_seq(s, (size_t)(end - s))))
			return 0;
		s += k;
	}
	return 1;
}

/* ===================== Reader ===================== */

struct parser {
	struct json_doc *d;
	const char *s;
	size_t i, len;
	unsigned max_depth; /* containers open at once */
};

static int perr(struct parser *ps, const char *why)
{
	ps->d->err = why;
	ps->d->err_at = ps->i;
	return -1;
}

static void skip_ws(struct parser *ps)
{
	while (ps->i < ps->len &&
	       (ps->s[ps->i] == ' ' || ps->s[ps->i] == '\t' ||
		ps->s[ps->i] == '\n' || ps->s[ps->i] == '\r'))
		ps->i++;
}

static int new_tok(struct parser *ps, uint8_t type, uint32_t *idx)
{
	struct json_doc *d = ps->d;

	if (d->n == d->cap) {
		uint32_t cap = d->cap ? d->cap * 2 : 64;
		struct json_tok *t = realloc(d->t, cap * sizeof(*t));

		if (!t)
			return perr(ps, "out of memory");
		d->t = t;
		d->cap = cap;
	}
	*idx = d->n++;
	memset(&d->t[*idx], 0, sizeof(d->t[0]));
	d->t[*idx].type = type;
	d->t[*idx].start = (uint32_t)ps->i;
	d->t[*idx].next = *idx + 1; /* containers: set when they close */
	return 0;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
						    : 16u;

		if (d == 16)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* \uXXXX, and its low half when it is a high surrogate. */
static int check_u_escape(struct parser *ps)
{
	unsigned u, lo;

	if (ps->len - ps->i < 5 || hex4(ps->s + ps->i + 1, &u))
		return perr(ps, "bad \\u escape");
	ps->i += 5;
	if (u >= 0xdc00 && u <= 0xdfff)
		return perr(ps, "lone low surrogate");
	if (u < 0xd800 || u > 0xdbff)
		return 0;
	if (ps->len - ps->i < 6 || ps->s[ps->i] != '\\' ||
	    ps->s[ps->i + 1] != 'u' || hex4(ps->s + ps->i + 2, &lo) ||
	    lo < 0xdc00 || lo > 0xdfff)
		return perr(ps, "lone high surrogate");
	ps->i += 6;
	return 0;
}

static int parse_string(struct parser *ps, uint32_t *idx)
{
	struct json_tok *t;
	size_t start;
	int escaped = 0;

	ps->i++; /* the opening quote */
	if (new_tok(ps, JSON_STRING, idx))
		return -1;
	start = ps->i;
	for (;;) {
		const uint8_t *u = (const uint8_t *)ps->s + ps->i;
		size_t k;

		if (ps->i >= ps->len)
			return perr(ps, "unterminated string");
		if (*u == '"')
			break;
		if (*u < 0x20)
			return perr(ps, "control character in string");
		if (*u == '\\') {
			escaped = 1;
			if (ps->i + 1 >= ps->len)
				return perr(ps, "unterminated string");
			if (ps->s[ps->i + 1] == 'u') {
				ps->i++;
				if (check_u_escape(ps))
					return -1;
				continue;
			}
			if (!ps->s[ps->i + 1] ||
			    !strchr("\"\\/bfnrt", ps->s[ps->i + 1]))
				return perr(ps, "bad escape");
			ps->i += 2;
			continue;
		}
		if (!(k = utf8_seq(u, ps->len - ps->i)))
			return perr(ps, "invalid UTF-8 in string");
		ps->i += k;
	}
	t = &ps->d->t[*idx];
	t->len = (uint32_t)(ps->i - start);
	t->escaped = (uint8_t)escaped;
	ps->i++;
	return 0;
}

static int digits(struct parser *ps)
{
	size_t from = ps->i;

	while (ps->i < ps->len && ps->s[ps->i] >= '0' && ps->s[ps->i] <= '9')
		ps->i++;
	return ps->i > from ? 0 : -1;
}

static int parse_number(struct parser *ps, uint32_t *idx)
{
	size_t from = ps->i;

	if (new_tok(ps, JSON_NUMBER, idx))
		return -1;
	if (ps->s[ps->i] == '-')
		ps->i++;
	if (ps->i < ps->len && ps->s[ps->i] == '0')
		ps->i++;
	else if (digits(ps))
		return perr(ps, "bad number");
	if (ps->i < ps->len && ps->s[ps->i] == '.') {
		ps->i++;
		if (digits(ps))
			return perr(ps, "bad number");
	}
	if (ps->i < ps->len && (ps->s[ps->i] == 'e' || ps->s[ps->i] == 'E')) {
		ps->i++;
		if (ps->i < ps->len &&
		    (ps->s[ps->i] == '+' || ps->s[ps->i] == '-'))
			ps->i++;
		if (digits(ps))
			return perr(ps, "bad number");
	}
	ps->d->t[*idx].len = (uint32_t)(ps->i - from);
	return 0;
}

static int parse_word(struct parser *ps, uint32_t *idx)
{
	static const char *const words[] = {"null", "false", "true"};

	for (int w = 0; w < 3; w++) {
		size_t n = strlen(words[w]);

		if (ps->len - ps->i >= n &&
		    !memcmp(ps->s + ps->i, words[w], n)) {
			if (new_tok(ps, (uint8_t)(JSON_NULL + w), idx))
				return -1;
			ps->i += n;
			return 0;
		}
	}
	return perr(ps, "unexpected character");
}

/* A scalar, or the opening of a container (pushed on stack). */
static int parse_item(struct parser *ps, uint32_t *stack, unsigned *top)
{
	uint32_t idx;
	char c;

	skip_ws(ps);
	if (ps->i >= ps->len)
		return perr(ps, "unexpected end of input");
	c = ps->s[ps->i];
	if (c == '{' || c == '[') {
		if (*top >= ps->max_depth)
			return perr(ps, "nested too deeply");
		if (new_tok(ps, c == '{' ? JSON_OBJECT : JSON_ARRAY, &idx))
			return -1;
		ps->i++;
		stack[(*top)++] = idx;
		return 1;
	}
	if (c == '"')
		return parse_string(ps, &idx);
	if (c == '-' || (c >= '0' && c <= '9'))
		return parse_number(ps, &idx);
	return parse_word(ps, &idx);
}

/* After an item inside the container on top: ',' or its closing bracket.
 * Returns 1 when another item follows, 0 when the container closed. */
static int parse_after(struct parser *ps, uint32_t *stack, unsigned *top)
{
	struct json_tok *t = &ps->d->t[stack[*top - 1]];
	char close = t->type == JSON_OBJECT ? '}' : ']';

	skip_ws(ps);
	if (ps->i < ps->len && ps->s[ps->i] == ',') {
		ps->i++;
		return 1;
	}
	if (ps->i < ps->len && ps->s[ps->i] == close) {
		ps->i++;
		t->next = ps->d->n;
		(*top)--;
		return 0;
	}
	return perr(ps, close == '}' ? "expected ',' or '}'"
				     : "expected ',' or ']'");
}

/* An object member's "name": (the name is a token too). */
static int parse_name(struct parser *ps)
{
	uint32_t idx;

	skip_ws(ps);
	if (ps->i >= ps->len || ps->s[ps->i] != '"')
		return perr(ps, "expected a string member name");
	if (parse_string(ps, &idx))
		return -1;
	skip_ws(ps);
	if (ps->i >= ps->len || ps->s[ps->i] != ':')
		return perr(ps, "expected ':'");
	ps->i++;
	return 0;
}

/* Is the container on top empty ("{}" or "[]")?  Consumes the bracket. */
static int empty_container(struct parser *ps, uint32_t *stack, unsigned *top)
{
	struct json_tok *t = &ps->d->t[stack[*top - 1]];

	skip_ws(ps);
	if (ps->i < ps->len &&
	    ps->s[ps->i] == (t->type == JSON_OBJECT ? '}' : ']')) {
		ps->i++;
		t->next = ps->d->n;
		(*top)--;
		return 1;
	}
	return 0;
}

int json_parse(struct json_doc *d, const char *s, size_t len)
{
	return json_parse_depth(d, s, len, JSON_MAX_DEPTH);
}

int json_parse_depth(struct json_doc *d, const char *s, size_t len,
		     unsigned max_depth)
{
	struct parser ps = {d, s, 0, len, max_depth};
	uint32_t stack[JSON_MAX_DEPTH + 1];
	unsigned top = 0;
	struct json_tok *t;
	int r;

	d->n = 0;
	d->err = NULL;
	if (max_depth > JSON_MAX_DEPTH + 1)
		ps.max_depth = JSON_MAX_DEPTH + 1;
	if (len > UINT32_MAX)
		return perr(&ps, "document too long");
	/* r: 1 when a container was just opened, 0 after a complete item. */
	r = parse_item(&ps, stack, &top);
	while (r >= 0 && top > 0) {
		if (r == 1 && empty_container(&ps, stack, &top)) {
			r = 0;
			continue;
		}
		if (r == 0 && (r = parse_after(&ps, stack, &top)) <= 0)
			continue; /* closed (look at the parent), or failed */
		t = &d->t[stack[top - 1]];
		t->n++;
		if (t->type == JSON_OBJECT && parse_name(&ps))
			return -1;
		r = parse_item(&ps, stack, &top);
	}
	if (r < 0)
		return -1;
	skip_ws(&ps);
	if (ps.i != len)
		return perr(&ps, "unexpected text after the value");
	return 0;
}

void json_doc_free(struct json_doc *d)
{
	free(d->t);
	d->t = NULL;
	d->n = d->cap = 0;
}

static void put_utf8(struct kv_buf *out, unsigned u)
{
	uint8_t b[4];
	size_t n;

	if (u < 0x80) {
		b[0] = (uint8_t)u;
		n = 1;
	} else if (u < 0x800) {
		b[0] = (uint8_t)(0xc0 | u >> 6);
		b[1] = (uint8_t)(0x80 | (u & 0x3f));
		n = 2;
	} else if (u < 0x10000) {
		b[0] = (uint8_t)(0xe0 | u >> 12);
		b[1] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (u & 0x3f));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | u >> 18);
		b[1] = (uint8_t)(0x80 | (u >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
		b[3] = (uint8_t)(0x80 | (u & 0x3f));
		n = 4;
	}
	kv_buf_append(out, b, n);
}

int json_str(const char *s, const struct json_tok *t, struct kv_buf *out)
{
	const char *p = s + t->start, *end = p + t->len;

	if (!t->escaped)
		return kv_buf_append(out, p, t->len);
	while (p < end) {
		const char *bs = memchr(p, '\\', (size_t)(end - p));
		unsigned u, lo;

		if (!bs)
			return kv_buf_append(out, p, (size_t)(end - p));
		kv_buf_append(out, p, (size_t)(bs - p));
		p = bs + 2;
		switch (bs[1]) {
		case 'b': kv_buf_append(out, "\b", 1); break;
		case 'f': kv_buf_append(out, "\f", 1); break;
		case 'n': kv_buf_append(out, "\n", 1); break;
		case 'r': kv_buf_append(out, "\r", 1); break;
		case 't': kv_buf_append(out, "\t", 1); break;
		case 'u': /* checked by the parser */
			hex4(p, &u);
			p += 4;
			if (u >= 0xd800 && u <= 0xdbff) {
				hex4(p + 2, &lo);
				p += 6;
				u = 0x10000 + ((u - 0xd800) << 10) +
				    (lo - 0xdc00);
			}
			put_utf8(out, u);
			break;
		default: kv_buf_append(out, bs + 1, 1); break; /* " \ / */
		}
	}
	return out->err ? -1 : 0;
}

/* ===================== JSON -> msgpack ===================== */

static int number_to_mp(const char *s, const struct json_tok *t,
			struct kv_buf *out)
{
	char tmp[400], *end;
	int is_int = !memchr(s + t->start, '.', t->len) &&
		     !memchr(s + t->start, 'e', t->len) &&
		     !memchr(s + t->start, 'E', t->len);
	double f;

	if (t->len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s + t->start, t->len);
	tmp[t->len] = '\0';
	if (is_int) {
		errno = 0;
		if (tmp[0] == '-') {
			long long v = strtoll(tmp, &end, 10);

			if (!errno)
				return kv_mp_int(out, v);
		} else {
			unsigned long long v = strtoull(tmp, &end, 10);

			if (!errno)
				return kv_mp_uint(out, v);
		}
	}
	f = strtod(tmp, &end);
	if (!isfinite(f))
		return -1;
	return kv_mp_double(out, f);
}

/* An escaped string: decode first, then put the header, whose size depends
 * on the decoded length, in front. */
static int string_to_mp(const char *s, const struct json_tok *t,
			struct kv_buf *out)
{
	uint8_t hdr[KV_MP_HDR_MAX];
	size_t at = out->len, n, h;

	if (json_str(s, t, out))
		return -1;
	n = out->len - at;
	h = (size_t)(kv_mp_put_str_hdr(hdr, (uint32_t)n) - hdr);
	if (kv_buf_reserve(out, h))
		return -1;
	memmove(out->data + at + h, out->data + at, n);
	memcpy(out->data + at, hdr, h);
	out->len += h;
	return 0;
}

int64_t json_to_mp(const char *s, const struct json_doc *d, uint32_t i,
		   struct kv_buf *out)
{
	const struct json_tok *t = &d->t[i];

	switch (t->type) {
	case JSON_NULL: kv_mp_nil(out); return i + 1;
	case JSON_FALSE:
	case JSON_TRUE: kv_mp_bool(out, t->type == JSON_TRUE); return i + 1;
	case JSON_NUMBER:
		return number_to_mp(s, t, out) || out->err ? -1
							   : (int64_t)i + 1;
	case JSON_STRING:
		if (!t->escaped) {
			kv_mp_str(out, s + t->start, t->len);
			return out->err ? -1 : (int64_t)i + 1;
		}
		return string_to_mp(s, t, out) ? -1 : (int64_t)i + 1;
	default: break;
	}
	if (t->type == JSON_ARRAY)
		kv_mp_array(out, t->n);
	else
		kv_mp_map(out, t->n);
	i++;
	while (i < t->next) {
		int64_t r = json_to_mp(s, d, i, out);

		if (r < 0)
			return -1;
		i = (uint32_t)r;
	}
	return out->err ? -1 : (int64_t)i;
}

/* ===================== Writer ===================== */

void json_put_raw(struct kv_buf *b, const char *s)
{
	kv_buf_append(b, s, strlen(s));
}

void json_put_str(struct kv_buf *b, const void *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = p, *end = s + n, *run = s;

	kv_buf_reserve(b, n + 2);
	kv_buf_append(b, "\"", 1);
	for (; s < end; s++) {
		char esc[6] = {'\\', 'u', '0', '0', 0, 0};
		size_t elen = 2;

		if (*s >= 0x20 && *s != '"' && *s != '\\')
			continue;
		kv_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		switch (*s) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			esc[4] = hex[*s >> 4];
			esc[5] = hex[*s & 15];
			elen = 6;
		}
		kv_buf_append(b, esc, elen);
	}
	kv_buf_append(b, run, (size_t)(s - run));
	kv_buf_append(b, "\"", 1);
}

static void put_double(struct kv_buf *b, double f)
{
	char tmp[40];
	int n = snprintf(tmp, sizeof(tmp), "%.17g", f);

	/* Keep it a float when read back: "1" would come back an integer. */
	if (!strpbrk(tmp, ".eE"))
		snprintf(tmp + n, sizeof(tmp) - (size_t)n, ".0");
	json_put_raw(b, tmp);
}

static int mp_one(struct kv_buf *b, const uint8_t **p, const uint8_t *end,
		  unsigned depth)
{
	struct kv_mp_obj o;
	char tmp[32];

	if (depth > JSON_MAX_DEPTH || kv_mp_next(p, end, &o))
		return -1;
	switch (o.type) {
	case KV_MP_NIL: json_put_raw(b, "null"); return 0;
	case KV_MP_BOOL: json_put_raw(b, o.v.b ? "true" : "false"); return 0;
	case KV_MP_UINT:
		snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)o.v.u);
		json_put_raw(b, tmp);
		return 0;
	case KV_MP_INT:
		snprintf(tmp, sizeof(tmp), "%lld", (long long)o.v.i);
		json_put_raw(b, tmp);
		return 0;
	case KV_MP_FLOAT:
		if (!isfinite(o.v.f))
			return -1;
		put_double(b, o.v.f);
		return 0;
	case KV_MP_STR:
		if (!utf8_valid(o.p, o.len))
			return -1;
		json_put_str(b, o.p, o.len);
		return 0;
	case KV_MP_ARRAY:
	case KV_MP_MAP:
		/* json_parse reads at most JSON_MAX_DEPTH containers deep: a
		 * deeper one has no JSON form it would read back */
		if (depth >= JSON_MAX_DEPTH)
			return -1;
		break;
	default: return -1; /* BIN, EXT */
	}
	kv_buf_append(b, o.type == KV_MP_MAP ? "{" : "[", 1);
	for (uint32_t i = 0; i < o.len; i++) {
		if (i)
			kv_buf_append(b, ",", 1);
		if (o.type == KV_MP_MAP) {
			const uint8_t *q = *p;
			struct kv_mp_obj k;

			if (kv_mp_next(&q, end, &k) || k.type != KV_MP_STR ||
			    mp_one(b, p, end, depth + 1))
				return -1;
			kv_buf_append(b, ":", 1);
		}
		if (mp_one(b, p, end, depth + 1))
			return -1;
	}
	kv_buf_append(b, o.type == KV_MP_MAP ? "}" : "]", 1);
	return 0;
}

int mp_to_json(struct kv_buf *b, const uint8_t *p, size_t n)
{
	size_t at = b->len;
	const uint8_t *end = p + n;

	if (mp_one(b, &p, end, 0) || p != end || b->err) {
		b->len = at;
		return -1;
	}
	return 0;
}

int mp_doc_to_json(struct kv_buf *b, const uint8_t *p, size_t n)
{
	struct json_doc d = {0};
	struct kv_buf again = {0};
	size_t at = b->len;
	int same = 0;

	/* Only maps and arrays: a scalar is stored as text by load. */
	if (n == 0 ||
	    !((p[0] >= 0x80 && p[0] <= 0x9f) || (p[0] >= 0xdc && p[0] <= 0xdf)))
		return 0;
	if (mp_to_json(b, p, n))
		return 0;
	if (json_parse(&d, (const char *)b->data + at, b->len - at) == 0 &&
	    json_to_mp((const char *)b->data + at, &d, 0, &again) >= 0 &&
	    !again.err && again.len == n && !memcmp(again.data, p, n))
		same = 1;
	json_doc_free(&d);
	kv_buf_free(&again);
	if (!same)
		b->len = at;
	return same;
}

/* ===================== Base64 ===================== */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void b64_encode(struct kv_buf *b, const void *p, size_t n)
{
	const uint8_t *s = p;
	uint8_t *o;
	size_t i;

	/* Nothing to write: an empty b may have no memory to point into. */
	if (!n || kv_buf_reserve(b, (n + 2) / 3 * 4))
		return;
	o = b->data + b->len;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v =
		    (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		*o++ = (uint8_t)b64[v >> 18];
		*o++ = (uint8_t)b64[v >> 12 & 63];
		*o++ = (uint8_t)b64[v >> 6 & 63];
		*o++ = (uint8_t)b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 |
			     (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);

		*o++ = (uint8_t)b64[v >> 18];
		*o++ = (uint8_t)b64[v >> 12 & 63];
		*o++ = i + 1 < n ? (uint8_t)b64[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	b->len = (size_t)(o - b->data);
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int b64_decode(struct kv_buf *b, const char *s, size_t n)
{
	uint8_t *o;

	if (n % 4 || kv_buf_reserve(b, n / 4 * 3))
		return -1;
	if (!n)
		return 0; /* an empty b may have no memory to point into */
	o = b->data + b->len;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;

		for (int k = 0; k < 4; k++) {
			v[k] = b64_val(s[i + k]);
			if (s[i + k] == '=' && i + 4 == n && k >= 2 &&
			    (k == 3 || s[i + 3] == '=')) {
				v[k] = 0;
				pad++;
			} else if (v[k] < 0) {
				return -1;
			}
		}
		*o++ = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			*o++ = (uint8_t)(v[1] << 4 | v[2] >> 2);
		if (pad < 1)
			*o++ = (uint8_t)(v[2] << 6 | v[3]);
	}
	b->len = (size_t)(o - b->data);
	return 0;
}
