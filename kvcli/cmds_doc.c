/* cmds_doc.c - kvcli doc insert|find|update|delete DB.COLL ...: MongoDB's
 * documents in kvd's collections (the native protocol's DOCINSERT,
 * DOCGET, DOCUPDATE, DOCDELETE and DOCFIND; docs/protocol.md,
 * "Documents").
 *
 * Documents, filters and updates are given as JSON (MongoDB's extended
 * JSON: {"$oid": ...}, {"$date": ...}, {"$numberLong": ...} are read as
 * those types) and turned into BSON by libbson; documents print as
 * libbson's relaxed extended JSON, one per line, in every output style.
 * find pages through any number of documents in bounded memory.  A
 * failure MongoDB would report prints its text and code (exit status 2).
 */
#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvcli.h"

static const struct cli_opt o_find[] = {
    {"projection", 'p', 1}, {"sort", 's', 1}, {"skip", 0, 1}, {"limit", 'n', 1},
    {"batch", 0, 1},	    {"id", 0, 1},     {0, 0, 0}};
static const struct cli_opt o_update[] = {
    {"upsert", 0, 0}, {"multi", 0, 0}, {0, 0, 0}};
static const struct cli_opt o_delete[] = {{"multi", 0, 0}, {0, 0, 0}};

/* DB.COLL split at its first dot into db and coll (NUL-ended copies):
 * 0, or -1 (message printed). */
int doc_split_ns(const char *ns, char *db, char *coll)
{
	const char *dot = strchr(ns, '.');

	if (!dot || dot == ns || !dot[1] || dot - ns > 255 ||
	    strlen(dot + 1) > 255) {
		fprintf(stderr,
			"kvcli doc: '%s' is not DB.COLL (a database, a dot, "
			"a collection)\n",
			ns);
		return -1;
	}
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';
	strcpy(coll, dot + 1);
	return 0;
}

/* JSON text as BSON: NULL (message printed) when it is not a JSON
 * object. */
bson_t *doc_from_json(const char *what, const char *s)
{
	bson_error_t e;
	bson_t *b =
	    bson_new_from_json((const uint8_t *)s, (ssize_t)cli_len(s), &e);

	if (!b)
		fprintf(stderr, "kvcli doc: %s is not a JSON object: %s\n",
			what, e.message);
	return b;
}

/* One document's BSON bytes as a line of relaxed extended JSON. */
void doc_out(struct cli *cli, kvc_val v)
{
	bson_t b;
	char *s;

	if (!bson_init_static(&b, v.p, v.len) ||
	    !(s = bson_as_relaxed_extended_json(&b, NULL))) {
		kv_buf_append(&cli->ob, "(invalid BSON)\n", 15);
		return;
	}
	kv_buf_append(&cli->ob, s, strlen(s));
	kv_buf_append(&cli->ob, "\n", 1);
	bson_free(s);
	out_maybe_flush(cli);
}

void doc_out_counts(struct cli *cli, const char *a, unsigned long long x,
		    const char *b, unsigned long long y)
{
	char line[160];

	if (cli->fmt == FMT_JSON)
		snprintf(line, sizeof(line), "{\"%s\":%llu,\"%s\":%llu}\n", a,
			 x, b, y);
	else if (cli->fmt == FMT_CSV)
		snprintf(line, sizeof(line), "%s,%s\r\n%llu,%llu\r\n", a, b, x,
			 y);
	else
		snprintf(line, sizeof(line), "%s %llu %s %llu\n", a, x, b, y);
	kv_buf_append(&cli->ob, line, strlen(line));
}

/* A failed call: MongoDB's text and code for DOC_ERROR. */
int doc_fail(struct cli *cli, const char *what, int rc)
{
	if (rc != -KVC_DOC_ERROR)
		return cli_fail(cli, what, rc);
	out_flush(cli);
	cli->errname = kvc_status_name(rc);
	fprintf(stderr, "kvcli: %s: %s (MongoDB code %lld)\n", what,
		kvc_errmsg(cli->c), (long long)kvc_doc_errcode(cli->c));
	return EXIT_ERROR;
}

/* Parse a subcommand's arguments (argv[0] is "insert" ...), split its
 * DB.COLL and connect: -1 to go on, else the exit code. */
int doc_start(struct cli *cli, int argc, char **argv,
	      const struct cli_opt *opts, int min, int max, struct dargs *d)
{
	const struct cmd *cmd = cli_find("doc");
	int rc = cli_args(cmd, argc, argv, opts, &d->a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (d->a.npos < min || (max >= 0 && d->a.npos > max)) {
		fprintf(stderr, "kvcli doc %s: wrong number of arguments\n",
			argv[0]);
		cli_usage(cmd);
		return EXIT_ERROR;
	}
	if (doc_split_ns(d->a.pos[0], d->db, d->coll))
		return EXIT_ERROR;
	return cli_connect(cli) ? EXIT_ERROR : -1;
}

static int doc_insert(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t **b = NULL;
	kvc_val *docs = NULL, id;
	kvc_reply *r;
	int n, rc = doc_start(cli, argc, argv, NULL, 2, -1, &d);

	if (rc >= 0)
		return rc;
	n = d.a.npos - 1;
	b = calloc((size_t)n, sizeof(*b));
	docs = calloc((size_t)n, sizeof(*docs));
	rc = b && docs ? 0 : EXIT_ERROR;
	for (int i = 0; !rc && i < n; i++) {
		char what[32];

		snprintf(what, sizeof(what), "document %d", i + 1);
		if (!(b[i] = doc_from_json(what, d.a.pos[i + 1])))
			rc = EXIT_ERROR;
		else
			docs[i] = (kvc_val){bson_get_data(b[i]), b[i]->len};
	}
	if (!rc &&
	    (rc = kvc_doc_insert(cli->c, d.db, d.coll, docs, (size_t)n, &r)))
		rc = doc_fail(cli, "doc insert", rc);
	else if (!rc)
		while (kvc_reply_next(r, NULL, &id) == 0)
			doc_out(cli, id);
	for (int i = 0; b && i < n; i++)
		if (b[i])
			bson_destroy(b[i]);
	free(b);
	free(docs);
	return rc;
}

/* --id VALUE: the one document whose _id is VALUE (JSON). */
static int find_id(struct cli *cli, struct dargs *d, const char *value)
{
	struct kv_buf json = {0};
	bson_t *id;
	kvc_val doc;
	int rc;

	kv_buf_append(&json, "{\"_id\": ", 8);
	kv_buf_append(&json, value, strlen(value));
	kv_buf_append(&json, "}", 2); /* and the NUL */
	id = json.err ? NULL : doc_from_json("--id", (const char *)json.data);
	kv_buf_free(&json);
	if (!id)
		return EXIT_ERROR;
	rc = kvc_doc_get(cli->c, d->db, d->coll, bson_get_data(id), id->len,
			 &doc);
	if (rc == 0)
		doc_out(cli, doc);
	bson_destroy(id);
	return rc ? doc_fail(cli, "doc find", rc) : EXIT_OK;
}

/* The query of find's arguments into q (its BSON in b[]): 0 or -1. */
static int query(struct dargs *d, kvc_doc_query *q, bson_t *b[3])
{
	static const char *const names[3] = {"filter", "projection", "sort"};
	const char *src[3] = {d->a.npos > 1 ? d->a.pos[1] : NULL,
			      d->a.set[0] ? d->a.val[0] : NULL,
			      d->a.set[1] ? d->a.val[1] : NULL};
	kvc_val *dst[3] = {&q->filter, &q->projection, &q->sort};
	unsigned long long v;

	for (int i = 0; i < 3; i++) {
		if (!src[i])
			continue;
		if (!(b[i] = doc_from_json(names[i], src[i])))
			return -1;
		*dst[i] = (kvc_val){bson_get_data(b[i]), b[i]->len};
	}
	if (d->a.set[2] && cli_uint("--skip", d->a.val[2], INT64_MAX / 2, &v))
		return -1;
	q->skip = d->a.set[2] ? v : 0;
	if (d->a.set[3] && cli_uint("--limit", d->a.val[3], INT64_MAX / 2, &v))
		return -1;
	q->limit = d->a.set[3] ? v : 0;
	if (d->a.set[4] && (cli_uint("--batch", d->a.val[4], 10000, &v) || !v))
		return -1;
	q->batch = d->a.set[4] ? (unsigned)v : 1000;
	return 0;
}

static int doc_find(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t *b[3] = {NULL, NULL, NULL};
	struct kv_buf next = {0};
	kvc_doc_query q = {0};
	kvc_val cur = {NULL, 0}, doc;
	kvc_reply *r;
	int rc = doc_start(cli, argc, argv, o_find, 1, 2, &d);

	if (rc >= 0)
		return rc;
	if (d.a.set[5])
		return find_id(cli, &d, d.a.val[5]);
	if (query(&d, &q, b))
		rc = EXIT_ERROR;
	while (rc < 0) {
		if ((rc = kvc_doc_find(cli->c, d.db, d.coll, &q, &cur, &r))) {
			rc = doc_fail(cli, "doc find", rc);
			break;
		}
		while (kvc_reply_next(r, NULL, &doc) == 0)
			doc_out(cli, doc);
		rc = -1;
		if (kvc_reply_cursor(r, &cur)) {
			rc = EXIT_OK; /* -KVC_END: done */
			break;
		}
		next.len = 0; /* the reply's bytes die at the next call */
		if (kv_buf_append(&next, cur.p, cur.len)) {
			rc = EXIT_ERROR;
			break;
		}
		cur = (kvc_val){next.data, next.len};
	}
	kv_buf_free(&next);
	for (int i = 0; i < 3; i++)
		if (b[i])
			bson_destroy(b[i]);
	return rc;
}

static int doc_update(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t *f = NULL, *u = NULL;
	uint64_t matched = 0, modified = 0;
	kvc_val up;
	int rc = doc_start(cli, argc, argv, o_update, 3, 3, &d);

	if (rc >= 0)
		return rc;
	if (!(f = doc_from_json("the filter", d.a.pos[1])) ||
	    !(u = doc_from_json("the update", d.a.pos[2]))) {
		rc = EXIT_ERROR;
		goto out;
	}
	rc = kvc_doc_update(cli->c, d.db, d.coll, bson_get_data(f), f->len,
			    bson_get_data(u), u->len,
			    (d.a.set[0] ? KVC_DOC_UPSERT : 0) |
				(d.a.set[1] ? KVC_DOC_MULTI : 0),
			    &matched, &modified, &up);
	if (rc) {
		rc = doc_fail(cli, "doc update", rc);
		goto out;
	}
	doc_out_counts(cli, "matched", matched, "modified", modified);
	if (up.p) /* the upserted {_id} */
		doc_out(cli, up);
out:
	if (f)
		bson_destroy(f);
	if (u)
		bson_destroy(u);
	return rc;
}

static int doc_delete(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t *f;
	uint64_t n = 0;
	int rc = doc_start(cli, argc, argv, o_delete, 2, 2, &d);

	if (rc >= 0)
		return rc;
	if (!(f = doc_from_json("the filter", d.a.pos[1])))
		return EXIT_ERROR;
	rc = kvc_doc_delete(cli->c, d.db, d.coll, bson_get_data(f), f->len,
			    d.a.set[0] ? KVC_DOC_MULTI : 0, &n);
	bson_destroy(f);
	if (rc)
		return doc_fail(cli, "doc delete", rc);
	out_int(cli, "deleted", (long long)n);
	return EXIT_OK;
}

int cmd_doc(struct cli *cli, int argc, char **argv)
{
	static const struct doc_sub subs[] = {{"insert", doc_insert},
					      {"find", doc_find},
					      {"update", doc_update},
					      {"delete", doc_delete},
					      {NULL, NULL}};
	const struct doc_sub *const tables[] = {subs, doc_admin_subs};

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return cli_help(cli_find("doc"), stdout), EXIT_OK;
	for (int t = 0; argc >= 2 && t < 2; t++)
		for (const struct doc_sub *s = tables[t]; s->name; s++)
			if (!strcasecmp(argv[1], s->name))
				return s->fn(cli, argc - 1, argv + 1);
	fprintf(stderr, "kvcli doc: give insert, find, update, delete, "
			"databases, collections, create, drop, indexes, "
			"create-index or drop-index\n");
	cli_usage(cli_find("doc"));
	return EXIT_ERROR;
}
