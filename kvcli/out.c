/* out.c - kvcli's output styles.
 *
 *   raw       (stdout not a terminal) bytes as they are, for pipes: a lone
 *             value exactly, no newline added; rows as key TAB value
 *   readable  (a terminal) quoted and escaped, "(nil)", "(integer) 5"
 *   json      one JSON document per line; records are {"key":..,"value":..}
 *             exactly as kvcli dump writes them
 *   csv       RFC 4180, with a header row
 *
 * Output is composed in cli->ob and written in large pieces, so a scan of
 * millions of keys costs few system calls and bounded memory.
 */
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "kv_mp.h"
#include "kvcli.h"

#define OUT_FLUSH_AT (256u << 10)

/* Every byte for stdout leaves through here: batch mode needs to know
 * whether a command printed anything and whether its line is ended. */
static void write_out(struct cli *cli)
{
	if (!cli->ob.len)
		return;
	fwrite(cli->ob.data, 1, cli->ob.len, stdout);
	cli->out_bytes += cli->ob.len;
	cli->out_last = cli->ob.data[cli->ob.len - 1];
	cli->ob.len = 0;
}

void out_flush(struct cli *cli)
{
	write_out(cli);
	fflush(stdout);
}

void out_maybe_flush(struct cli *cli)
{
	if (cli->ob.len >= OUT_FLUSH_AT)
		write_out(cli);
}

void out_tsv_field(struct kv_buf *b, kvc_val v, int b64)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = v.p, *end = s + v.len, *run = s;

	if (b64) {
		b64_encode(b, v.p, v.len);
		return;
	}
	/* Bytes from 0x80 up stay as they are (UTF-8 text stays readable),
	 * other control bytes become \xHH. */
	for (; s < end; s++) {
		char e[4] = {'\\', 0, 0, 0};
		size_t n = 2;

		if (*s >= 0x20 && *s != 0x7f && *s != '\\')
			continue;
		kv_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		switch (*s) {
		case '\t': e[1] = 't'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\\': e[1] = '\\'; break;
		case '\0': e[1] = '0'; break;
		default:
			e[1] = 'x';
			e[2] = hex[*s >> 4];
			e[3] = hex[*s & 15];
			n = 4;
		}
		kv_buf_append(b, e, n);
	}
	kv_buf_append(b, run, (size_t)(s - run));
}

static void puts_b(struct kv_buf *b, const char *s)
{
	kv_buf_append(b, s, strlen(s));
}

/* ===================== Quoting ===================== */

/* "text", with C escapes for what a terminal should not interpret. */
static void readable(struct kv_buf *b, const void *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = p, *end = s + n;

	kv_buf_append(b, "\"", 1);
	while (s < end) {
		char e[4] = {'\\', 0, 0, 0};
		size_t k = 1;

		if (*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\') {
			kv_buf_append(b, s++, 1);
			continue;
		}
		if (*s >= 0x80) {
			/* A whole valid UTF-8 character prints as itself. */
			size_t len = *s >= 0xf0 ? 4 : *s >= 0xe0 ? 3 : 2;

			if ((size_t)(end - s) >= len && utf8_valid(s, len) &&
			    *s >= 0xc2) {
				kv_buf_append(b, s, len);
				s += len;
				continue;
			}
		}
		switch (*s) {
		case '"': e[1] = '"'; break;
		case '\\': e[1] = '\\'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			e[1] = 'x';
			e[2] = hex[*s >> 4];
			e[3] = hex[*s & 15];
			k = 3;
		}
		kv_buf_append(b, e, k + 1);
		s++;
	}
	kv_buf_append(b, "\"", 1);
}

static void csv_field(struct kv_buf *b, const void *p, size_t n)
{
	const char *s = p;

	if (n == 0)
		return;
	if (!memchr(s, ',', n) && !memchr(s, '"', n) && !memchr(s, '\n', n) &&
	    !memchr(s, '\r', n)) {
		kv_buf_append(b, s, n);
		return;
	}
	kv_buf_append(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"')
			kv_buf_append(b, "\"", 1);
		kv_buf_append(b, s + i, 1);
	}
	kv_buf_append(b, "\"", 1);
}

/* ===================== Records ===================== */

static void json_bytes_member(struct kv_buf *b, const char *name, kvc_val v,
			      int b64, int doc_ok)
{
	int text = !b64 && utf8_valid(v.p, v.len);

	kv_buf_append(b, "\"", 1);
	puts_b(b, name);
	if (!b64 && doc_ok) {
		size_t at = b->len;

		puts_b(b, "\":");
		if (mp_doc_to_json(b, v.p, v.len))
			return;
		b->len = at;
	}
	puts_b(b, text || b64 ? "\":\"" : "_b64\":\"");
	if (text) {
		b->len--; /* json_put_str opens its own quote */
		json_put_str(b, v.p, v.len);
		return;
	}
	b64_encode(b, v.p, v.len);
	kv_buf_append(b, "\"", 1);
}

/* A record {"NAME":..., "value":...}: dump's (NAME "key"), or a hash's
 * field (NAME "field", values never taken for documents). */
static void json_pair(struct kv_buf *b, const char *name, kvc_val key,
		      const kvc_val *val, int b64, int doc_ok)
{
	kv_buf_append(b, "{", 1);
	json_bytes_member(b, name, key, b64, 0);
	if (val && !val->p) {
		puts_b(b, ",\"value\":null");
	} else if (val) {
		kv_buf_append(b, ",", 1);
		json_bytes_member(b, "value", *val, b64, doc_ok);
	}
	kv_buf_append(b, "}", 1);
}

void out_json_record(struct kv_buf *b, kvc_val key, const kvc_val *val, int b64)
{
	json_pair(b, "key", key, val, b64, 1);
	kv_buf_append(b, "\n", 1);
}

void out_json_field(struct kv_buf *b, kvc_val field, kvc_val val, int b64)
{
	json_pair(b, "field", field, &val, b64, 0);
}

void out_json_member(struct kv_buf *b, const char *name, kvc_val v, int b64)
{
	json_bytes_member(b, name, v, b64, 0);
}

void out_kv_header(struct cli *cli, int with_value)
{
	out_pair_header(cli, "key", with_value);
}

void out_pair_header(struct cli *cli, const char *name, int with_value)
{
	if (cli->fmt != FMT_CSV)
		return;
	puts_b(&cli->ob, name);
	puts_b(&cli->ob, with_value ? ",value\r\n" : "\r\n");
}

void out_kv(struct cli *cli, kvc_val key, const kvc_val *val, int show_key)
{
	out_pair(cli, "key", key, val, show_key);
}

void out_pair(struct cli *cli, const char *name, kvc_val key,
	      const kvc_val *val, int show_key)
{
	struct kv_buf *b = &cli->ob;

	switch (cli->fmt) {
	case FMT_JSON:
		json_pair(b, name, key, val, 0, !strcmp(name, "key"));
		kv_buf_append(b, "\n", 1);
		break;
	case FMT_CSV:
		csv_field(b, key.p, key.len);
		if (val) {
			kv_buf_append(b, ",", 1);
			csv_field(b, val->p, val->len);
		}
		puts_b(b, "\r\n");
		break;
	case FMT_RAW:
		/* One record per line, escaped as dump --tsv writes it; in
		 * batch mode a missing key (MGET) is (nil). */
		if (show_key) {
			out_tsv_field(b, key, 0);
			kv_buf_append(b, val ? "\t" : "\n", 1);
		}
		if (val && !val->p && cli->batch)
			puts_b(b, "(nil)\n");
		else if (val) {
			out_tsv_field(b, *val, 0);
			kv_buf_append(b, "\n", 1);
		}
		break;
	case FMT_READABLE:
		if (show_key) {
			readable(b, key.p, key.len);
			if (val)
				puts_b(b, " => ");
		}
		if (val && val->p)
			readable(b, val->p, val->len);
		else if (val)
			puts_b(b, "(nil)");
		kv_buf_append(b, "\n", 1);
		break;
	}
	out_maybe_flush(cli);
}

void out_value(struct cli *cli, kvc_val key, kvc_val val)
{
	switch (cli->fmt) {
	case FMT_RAW:
		if (cli->batch) { /* one reply per line, escaped */
			out_tsv_field(&cli->ob, val, 0);
			kv_buf_append(&cli->ob, "\n", 1);
		} else if (val.p) { /* exactly the bytes: kvcli get k > f */
			kv_buf_append(&cli->ob, val.p, val.len);
		}
		break;
	case FMT_CSV:
		out_kv_header(cli, 1);
		out_kv(cli, key, &val, 1);
		break;
	default: out_kv(cli, key, &val, 0); break;
	}
}

/* ===================== Scalars ===================== */

void out_text(struct cli *cli, const char *name, kvc_val v)
{
	struct kv_buf *b = &cli->ob;

	switch (cli->fmt) {
	case FMT_JSON:
		if (utf8_valid(v.p, v.len)) {
			json_put_str(b, v.p, v.len);
		} else {
			puts_b(b, "{\"base64\":\"");
			b64_encode(b, v.p, v.len);
			puts_b(b, "\"}");
		}
		break;
	case FMT_CSV:
		puts_b(b, name);
		puts_b(b, "\r\n");
		csv_field(b, v.p, v.len);
		break;
	case FMT_READABLE: readable(b, v.p, v.len); break;
	default: kv_buf_append(b, v.p, v.len); break;
	}
	puts_b(b, cli->fmt == FMT_CSV ? "\r\n" : "\n");
}

void out_ok(struct cli *cli)
{
	switch (cli->fmt) {
	case FMT_JSON: puts_b(&cli->ob, "\"OK\"\n"); break;
	case FMT_CSV: puts_b(&cli->ob, "status\r\nOK\r\n"); break;
	default: puts_b(&cli->ob, "OK\n"); break;
	}
}

void out_int(struct cli *cli, const char *name, long long v)
{
	char tmp[64];

	switch (cli->fmt) {
	case FMT_READABLE:
		snprintf(tmp, sizeof(tmp), "(integer) %lld\n", v);
		break;
	case FMT_CSV:
		snprintf(tmp, sizeof(tmp), "%s\r\n%lld\r\n", name, v);
		break;
	default: snprintf(tmp, sizeof(tmp), "%lld\n", v); break;
	}
	puts_b(&cli->ob, tmp);
}

/* JSON's number syntax, roughly: INCRBYFLOAT's text always has it, and
 * anything else is printed as a string rather than as bad JSON. */
static int json_number(kvc_val v)
{
	const char *s = v.p;

	if (!v.len || !((s[0] >= '0' && s[0] <= '9') || s[0] == '-'))
		return 0;
	for (size_t i = 0; i < v.len; i++)
		if (!strchr("0123456789.eE+-", s[i]) || !s[i])
			return 0;
	return 1;
}

void out_number(struct cli *cli, const char *name, kvc_val v)
{
	if (cli->fmt == FMT_JSON && json_number(v)) {
		kv_buf_append(&cli->ob, v.p, v.len);
		kv_buf_append(&cli->ob, "\n", 1);
		return;
	}
	out_text(cli, name, v);
}

/* ===================== Maps ===================== */

/* One scalar, as text. */
static int scalar_text(const struct kv_mp_obj *o, char *tmp, size_t n,
		       kvc_val *text)
{
	switch (o->type) {
	case KV_MP_UINT:
		snprintf(tmp, n, "%llu", (unsigned long long)o->v.u);
		break;
	case KV_MP_INT: snprintf(tmp, n, "%lld", (long long)o->v.i); break;
	case KV_MP_FLOAT: snprintf(tmp, n, "%.6g", o->v.f); break;
	case KV_MP_BOOL:
		snprintf(tmp, n, "%s", o->v.b ? "true" : "false");
		break;
	case KV_MP_NIL: snprintf(tmp, n, "null"); break;
	case KV_MP_STR:
	case KV_MP_BIN:
		text->p = o->p;
		text->len = o->len;
		return 0;
	default: return -1;
	}
	text->p = tmp;
	text->len = strlen(tmp);
	return 0;
}

static void flat_row(struct cli *cli, struct kv_buf *path, kvc_val text)
{
	struct kv_buf *b = &cli->ob;

	switch (cli->fmt) {
	case FMT_CSV:
		csv_field(b, path->data, path->len);
		kv_buf_append(b, ",", 1);
		csv_field(b, text.p, text.len);
		puts_b(b, "\r\n");
		break;
	case FMT_READABLE:
		kv_buf_append(b, path->data, path->len);
		puts_b(b, ": ");
		kv_buf_append(b, text.p, text.len);
		kv_buf_append(b, "\n", 1);
		break;
	default:
		kv_buf_append(b, path->data, path->len);
		kv_buf_append(b, "\t", 1);
		kv_buf_append(b, text.p, text.len);
		kv_buf_append(b, "\n", 1);
		break;
	}
}

/* Every scalar under a map or array, named by its dotted path:
 * "ops.GET.calls", "shards.0.entries". */
static int flatten(struct cli *cli, const uint8_t **p, const uint8_t *end,
		   struct kv_buf *path, unsigned depth)
{
	struct kv_mp_obj o, k;
	size_t at = path->len;
	char tmp[64];
	kvc_val text;

	if (depth > 32 || kv_mp_next(p, end, &o))
		return -1;
	if (o.type != KV_MP_MAP && o.type != KV_MP_ARRAY) {
		if (scalar_text(&o, tmp, sizeof(tmp), &text))
			return -1;
		flat_row(cli, path, text);
		return 0;
	}
	for (uint32_t i = 0; i < o.len; i++) {
		path->len = at;
		if (at)
			kv_buf_append(path, ".", 1);
		if (o.type == KV_MP_ARRAY) {
			snprintf(tmp, sizeof(tmp), "%u", i);
			puts_b(path, tmp);
		} else {
			if (kv_mp_next(p, end, &k) ||
			    scalar_text(&k, tmp, sizeof(tmp), &text))
				return -1;
			kv_buf_append(path, text.p, text.len);
		}
		if (flatten(cli, p, end, path, depth + 1))
			return -1;
	}
	path->len = at;
	return 0;
}

void out_map(struct cli *cli, kvc_val map)
{
	const uint8_t *p = map.p;
	struct kv_buf path = {0};

	if (cli->fmt == FMT_JSON && mp_to_json(&cli->ob, map.p, map.len) == 0) {
		kv_buf_append(&cli->ob, "\n", 1);
		return;
	}
	if (cli->fmt == FMT_CSV)
		puts_b(&cli->ob, "name,value\r\n");
	flatten(cli, &p, p + map.len, &path, 0);
	kv_buf_free(&path);
}
