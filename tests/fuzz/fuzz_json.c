/* fuzz_json.c - kvcli's input parsers on any bytes: the JSON reader
 * (kvcli/json.c), msgpack to JSON, and the rows of `kvcli load` in both
 * formats, each with the round trips `kvcli dump | kvcli load` relies on.
 *
 * load.c, dump.c and dumpdoc.c are compiled into this file (their row parsers and
 * escapers are static; dump's TSV escaping is out.c's out_tsv_field), with
 * libkvclient; their commands, which need a server, are never run.
 *
 * Byte 0 picks the case (low two bits) and, for records, --b64 (bit 2)
 * and a CRLF line end (bit 3); the rest is the input:
 *   0  a JSON document: its tokens are well formed; every string decodes
 *      to valid UTF-8 and comes back through json_put_str; converted to
 *      msgpack, written back as JSON and converted again, the bytes are
 *      the same (what dump's "value is a document" promise rests on).
 *   1  msgpack: what mp_to_json writes is JSON, and reading it back and
 *      writing it again gives the same text.
 *   2  a key (its length in byte 1) and a value, written as one JSON line
 *      by out_json_record (kvcli dump) and read by load's json_row: the
 *      key and value come back byte for byte.
 *   3  the same through TSV (dump's escaping, load's tsv_row); and the
 *      input itself unescaped by load, when it is valid, written by dump
 *      and read again, comes back the same.
 */
#include <stdlib.h>
#include <string.h>

#include "dump.c"
#include "dumpdoc.c"
#include "load.c"

#include "fuzz.h"

/* kvcli's main.c and cmds.c: only load's and dump's commands call these,
 * and nothing here runs those (the linker may drop them all). */
const struct cmd *cli_find(const char *name)
{
	(void)name;
	abort();
}

int cli_args(const struct cmd *cmd, int argc, char **argv,
	     const struct cli_opt *opts, struct cli_args *a)
{
	(void)cmd, (void)argc, (void)argv, (void)opts, (void)a;
	abort();
}

int cli_uint(const char *what, const char *s, unsigned long long max,
	     unsigned long long *v)
{
	(void)what, (void)s, (void)max, (void)v;
	abort();
}

int cli_usage(const struct cmd *cmd)
{
	(void)cmd;
	abort();
}

int cli_connect(struct cli *cli)
{
	(void)cli;
	abort();
}

int cli_fail(struct cli *cli, const char *what, int rc)
{
	(void)cli, (void)what, (void)rc;
	abort();
}

/* Equal bytes (memcmp, without its null pointer for no bytes). */
static int same(const void *a, size_t an, const void *b, size_t bn)
{
	return an == bn && (!an || !memcmp(a, b, an));
}

static void check_tokens(const struct json_doc *d, size_t len)
{
	FUZZ_CHECK(d->n > 0 && d->t[0].next == d->n);
	for (uint32_t i = 0; i < d->n; i++) {
		const struct json_tok *t = &d->t[i];
		uint32_t kids = 0;

		FUZZ_CHECK(t->next > i && t->next <= d->n);
		FUZZ_CHECK((size_t)t->start + t->len <= len);
		if (t->type != JSON_ARRAY && t->type != JSON_OBJECT) {
			FUZZ_CHECK(t->next == i + 1);
			continue;
		}
		for (uint32_t k = i + 1; k < t->next; k = d->t[k].next) {
			if (t->type == JSON_OBJECT && kids % 2 == 0)
				FUZZ_CHECK(d->t[k].type == JSON_STRING);
			kids++;
		}
		FUZZ_CHECK(kids == (t->type == JSON_OBJECT ? 2 * t->n : t->n));
	}
}

/* A decoded string, written by json_put_str and read again. */
static void check_string(const char *s, const struct json_tok *t)
{
	struct kv_buf dec = {0}, enc = {0}, again = {0};
	struct json_doc d = {0};

	FUZZ_CHECK(json_str(s, t, &dec) == 0);
	if (!dec.len) /* no memory yet: kvcli never passes a null pointer */
		kv_buf_reserve(&dec, 1);
	FUZZ_CHECK(!dec.err && utf8_valid(dec.data, dec.len));
	json_put_str(&enc, dec.data, dec.len);
	FUZZ_CHECK(!enc.err);
	FUZZ_CHECK(json_parse(&d, (const char *)enc.data, enc.len) == 0);
	FUZZ_CHECK(d.n == 1 && d.t[0].type == JSON_STRING);
	FUZZ_CHECK(json_str((const char *)enc.data, &d.t[0], &again) == 0);
	FUZZ_CHECK(same(again.data, again.len, dec.data, dec.len));
	json_doc_free(&d);
	kv_buf_free(&dec);
	kv_buf_free(&enc);
	kv_buf_free(&again);
}

/* JSON -> msgpack -> JSON -> msgpack: the same msgpack both times. */
static void check_mp_round_trip(const char *s, const struct json_doc *d)
{
	struct kv_buf mp = {0}, js = {0}, mp2 = {0};
	struct json_doc d2 = {0};

	if (json_to_mp(s, d, 0, &mp) < 0)
		goto out; /* a number msgpack cannot hold */
	FUZZ_CHECK(!mp.err);
	FUZZ_CHECK(mp_to_json(&js, mp.data, mp.len) == 0);
	FUZZ_CHECK(json_parse(&d2, (const char *)js.data, js.len) == 0);
	FUZZ_CHECK(json_to_mp((const char *)js.data, &d2, 0, &mp2) ==
		   (int64_t)d2.n);
	FUZZ_CHECK(mp2.len == mp.len && !memcmp(mp2.data, mp.data, mp.len));
	if (d->t[0].type == JSON_ARRAY || d->t[0].type == JSON_OBJECT) {
		js.len = 0;
		FUZZ_CHECK(mp_doc_to_json(&js, mp.data, mp.len) == 1);
	}
out:
	json_doc_free(&d2);
	kv_buf_free(&mp);
	kv_buf_free(&js);
	kv_buf_free(&mp2);
}

static void fuzz_json(const char *s, size_t n)
{
	struct json_doc d = {0};

	if (json_parse(&d, s, n) == 0) {
		check_tokens(&d, n);
		for (uint32_t i = 0; i < d.n; i++)
			if (d.t[i].type == JSON_STRING)
				check_string(s, &d.t[i]);
		check_mp_round_trip(s, &d);
	} else {
		FUZZ_CHECK(d.err && d.err_at <= n);
	}
	json_doc_free(&d);
}

static void fuzz_mp(const uint8_t *p, size_t n)
{
	struct kv_buf js = {0}, mp = {0}, js2 = {0};
	struct json_doc d = {0};

	if (mp_to_json(&js, p, n) == 0) {
		FUZZ_CHECK(json_parse(&d, (const char *)js.data, js.len) == 0);
		FUZZ_CHECK(json_to_mp((const char *)js.data, &d, 0, &mp) >= 0);
		FUZZ_CHECK(mp_to_json(&js2, mp.data, mp.len) == 0);
		FUZZ_CHECK(js2.len == js.len &&
			   !memcmp(js2.data, js.data, js.len));
	} else {
		FUZZ_CHECK(js.len == 0);
	}
	js.len = 0;
	mp_doc_to_json(&js, p, n);
	json_doc_free(&d);
	kv_buf_free(&js);
	kv_buf_free(&mp);
	kv_buf_free(&js2);
}

/* A loader with room for one row and no server. */
static void loader_init(struct loader *L, int b64, size_t *off)
{
	memset(L, 0, sizeof(*L));
	L->b64 = b64;
	L->koff = &off[0];
	L->klen = &off[1];
	L->voff = &off[2];
	L->vlen = &off[3];
}

static void loader_free(struct loader *L)
{
	kv_buf_free(&L->data);
	kv_buf_free(&L->scratch);
	json_doc_free(&L->doc);
	ldoc_free(&L->docs);
}

static void check_row(struct loader *L, kvc_val key, kvc_val val)
{
	const uint8_t *d = L->data.data;

	FUZZ_CHECK(!L->data.err);
	FUZZ_CHECK(L->klen[0] == key.len && L->vlen[0] == val.len);
	FUZZ_CHECK(!key.len || !memcmp(d + L->koff[0], key.p, key.len));
	FUZZ_CHECK(!val.len || !memcmp(d + L->voff[0], val.p, val.len));
}

static void fuzz_record(kvc_val key, kvc_val val, int b64, int tsv, int crlf)
{
	struct kv_buf line = {0};
	struct loader L;
	size_t off[4];
	const char *why;

	loader_init(&L, b64, off);
	if (tsv) {
		out_tsv_field(&line, key, b64);
		kv_buf_append(&line, "\t", 1);
		out_tsv_field(&line, val, b64);
	} else {
		out_json_record(&line, key, &val, b64);
		FUZZ_CHECK(line.len > 2 && line.data[line.len - 1] == '\n');
		line.len--;
	}
	FUZZ_CHECK(!line.err && !memchr(line.data, '\n', line.len));
	if (crlf)
		kv_buf_append(&line, "\r", 1);
	why = tsv ? tsv_row(&L, (const char *)line.data, line.len)
		  : json_row(&L, (const char *)line.data, line.len);
	if (why)
		fprintf(stderr, "row refused: %s\n", why);
	FUZZ_CHECK(why == NULL);
	check_row(&L, key, val);
	kv_buf_free(&line);
	loader_free(&L);
}

/* Whatever load's TSV unescaping accepts, dump writes so that it reads
 * back the same. */
static void fuzz_unescape(const char *s, size_t n, int b64)
{
	struct kv_buf esc = {0};
	struct loader L;
	size_t off[4], first;

	loader_init(&L, b64, off);
	if (tsv_field(&L, s, n) == 0 && !L.data.err) {
		kvc_val dec = {L.data.data, L.data.len};

		out_tsv_field(&esc, dec, b64);
		FUZZ_CHECK(!esc.err);
		for (size_t i = 0; i < esc.len; i++)
			FUZZ_CHECK(!memchr("\t\n\r", esc.data[i], 3));
		first = L.data.len;
		FUZZ_CHECK(tsv_field(&L, (const char *)esc.data, esc.len) == 0);
		FUZZ_CHECK(L.data.len == 2 * first);
		FUZZ_CHECK(!first ||
			   !memcmp(L.data.data, L.data.data + first, first));
	}
	kv_buf_free(&esc);
	loader_free(&L);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t n = size - 1, kn;

	if (size < 1)
		return 0;
	switch (data[0] & 3) {
	case 0: fuzz_json((const char *)p, n); break;
	case 1: fuzz_mp(p, n); break;
	default:
		if (n < 1)
			break;
		kn = p[0] < n - 1 ? p[0] : n - 1;
		fuzz_record((kvc_val){p + 1, kn},
			    (kvc_val){p + 1 + kn, n - 1 - kn}, data[0] & 4,
			    (data[0] & 3) == 3, data[0] & 8);
		if ((data[0] & 3) == 3)
			fuzz_unescape((const char *)p, n, data[0] & 4);
	}
	return 0;
}
