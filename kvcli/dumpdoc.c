/* dumpdoc.c - documents in kvcli dump and load.
 *
 * A dump of version 2 holds, after the keys, the line {"kvcli_dump":2}
 * and every collection of every database as rows load reads back:
 *
 *   {"type":"collection","db":"D","coll":"C","options_b64":"..."}
 *   {"type":"doc","db":"D","coll":"C","bson_b64":"..."}      one a document
 *   {"type":"index","db":"D","coll":"C","spec_b64":"..."}    one an index
 *
 * Documents and index specifications are their BSON in base64, so that a
 * document comes back byte for byte (no JSON form keeps every BSON type
 * and the order of fields exactly); names are strings (db_b64, coll_b64
 * when they are not UTF-8).  A collection's row comes before its
 * documents, so an empty one is made again too, and its indexes after
 * them: load builds each over the documents already there, once, rather
 * than keeping it at every insert.
 *
 * load batches consecutive documents of one collection into DOCINSERTs
 * (1,000 documents or the loader's batch bytes), pipelined with the
 * loader's other requests in its window.  A dump of version 1 has no
 * version line and no such rows: it loads as before; and a server with
 * no collection dumps as version 1 did, byte for byte, so that an older
 * kvcli loads it too.
 */
#include <bson/bson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumpdoc.h"

#define DOC_PAGE 1000  /* documents a DOCFIND page of dump asks for */
#define LOAD_DOCS 1000 /* documents one DOCINSERT of load carries */

/* ===================== dump ===================== */

static void header(struct kv_buf *b)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "{\"kvcli_dump\":%d}\n",
			 KVCLI_DUMP_VERSION);

	kv_buf_append(b, line, (size_t)n);
}

/* A row's start: {"type":"T","db":...,"coll":... */
static void row_begin(struct kv_buf *b, const char *type, const char *db,
		      const char *coll, int b64)
{
	kv_buf_append(b, "{\"type\":\"", 9);
	kv_buf_append(b, type, strlen(type));
	kv_buf_append(b, "\",", 2);
	out_json_member(b, "db", (kvc_val){db, strlen(db)}, b64);
	kv_buf_append(b, ",", 1);
	out_json_member(b, "coll", (kvc_val){coll, strlen(coll)}, b64);
}

/* ,"NAME":"base64"}\n: a row's end. */
static void row_blob(struct cli *cli, const char *name, kvc_val v)
{
	struct kv_buf *b = &cli->ob;

	kv_buf_append(b, ",\"", 2);
	kv_buf_append(b, name, strlen(name));
	kv_buf_append(b, "\":\"", 3);
	b64_encode(b, v.p, v.len);
	kv_buf_append(b, "\"}\n", 3);
	out_maybe_flush(cli);
}

static int is_id_index(kvc_val spec)
{
	bson_iter_t it;

	return bson_iter_init_from_data(&it, spec.p, spec.len) &&
	       bson_iter_find(&it, "name") && BSON_ITER_HOLDS_UTF8(&it) &&
	       !strcmp(bson_iter_utf8(&it, NULL), "_id_");
}

/* db.coll's documents, a page at a time, then its indexes. */
static int dump_contents(struct cli *cli, const char *db, const char *coll,
			 int b64)
{
	kvc_doc_query q = {.batch = DOC_PAGE};
	struct kv_buf next = {0};
	kvc_val cur = {NULL, 0}, v;
	kvc_reply *r;
	int rc;

	for (;;) {
		if ((rc = kvc_doc_find(cli->c, db, coll, &q, &cur, &r)))
			goto out;
		while (kvc_reply_next(r, NULL, &v) == 0) {
			row_begin(&cli->ob, "doc", db, coll, b64);
			row_blob(cli, "bson_b64", v);
		}
		if (kvc_reply_cursor(r, &cur))
			break; /* the last page */
		next.len = 0;  /* the reply's bytes die at the next call */
		if (kv_buf_append(&next, cur.p, cur.len)) {
			rc = -KVC_NOMEM;
			goto out;
		}
		cur = (kvc_val){next.data, next.len};
	}
	if ((rc = kvc_doc_indexes(cli->c, db, coll, &r)))
		goto out;
	while (kvc_reply_next(r, NULL, &v) == 0)
		if (!is_id_index(v)) {
			row_begin(&cli->ob, "index", db, coll, b64);
			row_blob(cli, "spec_b64", v);
		}
out:
	kv_buf_free(&next);
	return rc;
}

/* db's collections: their names and options copied out of the reply
 * (which the next call ends) as [size_t n][name, NUL][size_t n][opts]. */
static int dump_db(struct cli *cli, const char *db, int b64)
{
	struct kv_buf l = {0};
	kvc_reply *r;
	kvc_val name, opts;
	size_t p = 0, n;
	int rc = kvc_doc_colls(cli->c, db, &r);

	while (!rc && kvc_reply_next(r, &name, &opts) == 0) {
		n = name.len + 1;
		kv_buf_append(&l, &n, sizeof(n));
		kv_buf_append(&l, name.p, name.len);
		kv_buf_append(&l, "", 1);
		kv_buf_append(&l, &opts.len, sizeof(opts.len));
		kv_buf_append(&l, opts.p, opts.len);
		if (l.err)
			rc = -KVC_NOMEM;
	}
	while (!rc && p < l.len) {
		const char *coll = (const char *)l.data + p + sizeof(size_t);

		memcpy(&n, l.data + p, sizeof(n));
		p += sizeof(n) + n;
		memcpy(&n, l.data + p, sizeof(n));
		row_begin(&cli->ob, "collection", db, coll, b64);
		row_blob(cli, "options_b64",
			 (kvc_val){l.data + p + sizeof(n), n});
		p += sizeof(n) + n;
		rc = dump_contents(cli, db, coll, b64);
	}
	kv_buf_free(&l);
	return rc;
}

int dumpdoc_all(struct cli *cli, int b64)
{
	struct kv_buf dbs = {0};
	kvc_reply *r;
	kvc_val name;
	int rc = kvc_doc_dbs(cli->c, &r);

	while (!rc && kvc_reply_next(r, NULL, &name) == 0)
		if (kv_buf_append(&dbs, name.p, name.len) ||
		    kv_buf_append(&dbs, "", 1))
			rc = -KVC_NOMEM;
	if (!rc && dbs.len) /* version 2's line, before its first row */
		header(&cli->ob);
	for (size_t p = 0; !rc && p < dbs.len;
	     p += strlen((char *)dbs.data + p) + 1)
		rc = dump_db(cli, (char *)dbs.data + p, b64);
	kv_buf_free(&dbs);
	return rc ? cli_fail(cli, "dump", rc) : EXIT_OK;
}

/* ===================== load ===================== */

enum { K_COLL = 1, K_DOC, K_INDEX, K_HEADER };

/* The members a document row may have, by index. */
static const char *const members[] = {
    "type",	   "db",       "db_b64",   "coll",	 "coll_b64",
    "options_b64", "bson_b64", "spec_b64", "kvcli_dump", NULL};
enum { M_TYPE, M_DB, M_DB64, M_COLL, M_COLL64, M_OPTS, M_BSON, M_SPEC, M_VER };

/* The string token t is the text w. */
static int str_is(struct ldoc *D, const char *s, const struct json_tok *t,
		  const char *w)
{
	D->tmp.len = 0;
	return t->type == JSON_STRING && !json_str(s, t, &D->tmp) &&
	       D->tmp.len == strlen(w) && !memcmp(D->tmp.data, w, D->tmp.len);
}

static int member_of(struct ldoc *D, const char *s, const struct json_tok *t)
{
	for (int m = 0; members[m]; m++)
		if (str_is(D, s, t, members[m]))
			return m;
	return -1;
}

/* Which row this is: K_*, or 0 (a key's row: no type of ours). */
static int row_kind(struct ldoc *D, const char *s, const struct json_doc *d)
{
	static const char *const types[] = {"collection", "doc", "index"};
	const struct json_tok *t = d->t;

	if (t[0].type != JSON_OBJECT)
		return 0;
	for (uint32_t i = 1; i < t[0].next; i = t[i + 1].next) {
		int m = member_of(D, s, &t[i]);

		if (m == M_VER)
			return K_HEADER;
		for (int k = 0; m == M_TYPE && k < 3; k++)
			if (str_is(D, s, &t[i + 1], types[k]))
				return K_COLL + k;
	}
	return 0;
}

/* A string member's bytes (base64 decoded when b64) into out. */
static int bytes_of(struct ldoc *D, const char *s, const struct json_tok *t,
		    int b64, struct kv_buf *out)
{
	if (t->type != JSON_STRING)
		return -1;
	if (!b64)
		return json_str(s, t, out);
	D->tmp.len = 0;
	return json_str(s, t, &D->tmp) ||
	       b64_decode(out, (const char *)D->tmp.data, D->tmp.len);
}

/* A name: 1 to 255 bytes, no NUL, into out (NUL-ended). */
static int name_of(struct ldoc *D, const char *s, const struct json_tok *t,
		   int b64, char *out)
{
	struct kv_buf b = {0};
	int rc = bytes_of(D, s, t, b64, &b) || !b.len || b.len > 255 ||
		 memchr(b.data, 0, b.len);

	if (!rc) {
		memcpy(out, b.data, b.len);
		out[b.len] = '\0';
	}
	kv_buf_free(&b);
	return rc ? -1 : 0;
}

/* The row's parts: names into db and coll, its BSON into blob. */
struct parts {
	char db[256], coll[256];
	struct kv_buf blob;
	int have[M_VER + 1];
	long version;
};

static const char *parse(struct ldoc *D, const char *s,
			 const struct json_doc *d, struct parts *p)
{
	const struct json_tok *t = d->t;

	for (uint32_t i = 1; i < t[0].next; i = t[i + 1].next) {
		int m = member_of(D, s, &t[i]);
		const struct json_tok *v = &t[i + 1];

		if (m < 0)
			return "unknown member in a document row (type, db, "
			       "coll, options_b64, bson_b64, spec_b64)";
		if (p->have[m == M_DB64 ? M_DB : m == M_COLL64 ? M_COLL : m]++)
			return "a member given twice";
		if (m == M_DB || m == M_DB64 || m == M_COLL || m == M_COLL64) {
			if (name_of(D, s, v, D->b64 || m % 2 == 0,
				    m <= M_DB64 ? p->db : p->coll))
				return "bad db or coll (a name of 1 to 255 "
				       "bytes)";
		} else if (m == M_VER) {
			if (v->type != JSON_NUMBER || v->len > 6)
				return "kvcli_dump: not a version number";
			p->version = strtol(s + v->start, NULL, 10);
		} else if (m != M_TYPE && bytes_of(D, s, v, 1, &p->blob)) {
			return "bad base64";
		}
	}
	return NULL;
}

static void send_one(struct ldoc *D, int kind, struct parts *p)
{
	kvc_val spec = {p->blob.data, p->blob.len};
	int rc;

	if (load_room(D->L, p->blob.len)) {
		load_sent(D->L, -KVC_CLOSED, *D->line, 1, 0, 0);
		return;
	}
	if (kind == K_COLL)
		rc = kvc_send_doc_create(D->c, p->db, p->coll, p->blob.data,
					 p->blob.len);
	else
		rc =
		    kvc_send_doc_create_indexes(D->c, p->db, p->coll, &spec, 1);
	load_sent(D->L, rc, *D->line, 1, p->blob.len,
		  kind == K_COLL ? -KVC_EXISTS : 0);
}

/* A document into the batch (sent first when it is of another
 * collection, or full). */
static const char *batch_doc(struct ldoc *D, struct parts *p)
{
	size_t o[2] = {D->data.len, p->blob.len};

	if (D->n &&
	    (strcmp(D->db, p->db) || strcmp(D->coll, p->coll) ||
	     D->n == LOAD_DOCS || D->data.len + p->blob.len > D->max_bytes))
		ldoc_flush(D);
	if (!D->n) {
		strcpy(D->db, p->db);
		strcpy(D->coll, p->coll);
		D->first = *D->line;
		o[0] = 0;
	}
	if (kv_buf_append(&D->data, p->blob.data, p->blob.len) ||
	    kv_buf_append(&D->offs, o, sizeof(o)))
		return "out of memory";
	D->n++;
	return NULL;
}

static int is_bson(const struct kv_buf *b)
{
	bson_t d;

	return b->len >= 5 && bson_init_static(&d, b->data, b->len) &&
	       b->data[b->len - 1] == 0;
}

int ldoc_row(struct ldoc *D, const char *s, const struct json_doc *doc,
	     const char **why)
{
	struct parts p = {.version = -1};
	int kind = row_kind(D, s, doc);

	if (!kind)
		return 0;
	*why = parse(D, s, doc, &p);
	if (!*why && kind == K_HEADER &&
	    (p.have[M_TYPE] || p.version < 1 || p.version > KVCLI_DUMP_VERSION))
		*why = "a dump of a version this kvcli does not read (it "
		       "reads 1 and 2)";
	else if (!*why && kind != K_HEADER &&
		 (!p.have[M_DB] || !p.have[M_COLL]))
		*why = "a document row without its db or coll";
	else if (!*why && (kind == K_DOC || kind == K_INDEX) &&
		 (!p.have[kind == K_DOC ? M_BSON : M_SPEC] ||
		  !is_bson(&p.blob)))
		*why = kind == K_DOC ? "bson_b64: not a BSON document"
				     : "spec_b64: not a BSON document";
	else if (!*why && kind == K_COLL && p.have[M_OPTS] && !is_bson(&p.blob))
		*why = "options_b64: not a BSON document";
	if (!*why && kind == K_DOC)
		*why = batch_doc(D, &p);
	else if (!*why && kind != K_HEADER) {
		ldoc_flush(D); /* the documents before it go first */
		send_one(D, kind, &p);
	}
	kv_buf_free(&p.blob);
	return 1;
}

void ldoc_flush(struct ldoc *D)
{
	const size_t *o = (const size_t *)D->offs.data;
	kvc_val *v;
	int rc;

	if (!D->n)
		return;
	D->vals.len = 0;
	if (kv_buf_reserve(&D->vals, D->n * sizeof(kvc_val)) == 0 &&
	    load_room(D->L, D->data.len) == 0) {
		v = (kvc_val *)D->vals.data;
		for (uint32_t i = 0; i < D->n; i++)
			v[i] = (kvc_val){D->data.data + o[2 * i], o[2 * i + 1]};
		rc = kvc_send_doc_insert(D->c, D->db, D->coll, v, D->n);
		load_sent(D->L, rc, D->first, D->n, D->data.len, 0);
	} else {
		load_sent(D->L, -KVC_NOMEM, D->first, D->n, 0, 0);
	}
	D->n = 0;
	D->data.len = D->offs.len = 0;
}

void ldoc_free(struct ldoc *D)
{
	kv_buf_free(&D->data);
	kv_buf_free(&D->offs);
	kv_buf_free(&D->vals);
	kv_buf_free(&D->tmp);
}
