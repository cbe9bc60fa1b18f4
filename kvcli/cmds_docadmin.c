/* cmds_docadmin.c - kvcli doc databases|collections|create|drop|indexes|
 * create-index|drop-index: the databases, collections and indexes of
 * kvd's documents (the native protocol's DOCDBS, DOCCOLLS, DOCCREATE,
 * DOCDROP, DOCIXCREATE, DOCIXLIST and DOCIXDROP; docs/protocol.md,
 * "Documents").
 *
 * Index specifications are MongoDB's, given as JSON; create-index also
 * takes a bare key pattern with options, named as MongoDB's drivers name
 * an index ({"a": 1, "b": -1} is a_1_b_-1).  Listings print one name or
 * specification per line.
 */
#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kvcli.h"

static const struct cli_opt o_none[] = {{0, 0, 0}};
static const struct cli_opt o_ix[] = {{"name", 0, 1},	{"sparse", 0, 0},
				      {"unique", 0, 0}, {"partial", 0, 1},
				      {"expire", 0, 1}, {0, 0, 0}};

/* One name per line: a JSON string in the JSON style. */
static void name_line(struct cli *cli, const char *db, kvc_val name)
{
	struct kv_buf *b = &cli->ob;
	struct kv_buf ns = {0};

	if (db) { /* DB.COLL */
		kv_buf_append(&ns, db, strlen(db));
		kv_buf_append(&ns, ".", 1);
	}
	kv_buf_append(&ns, name.p, name.len);
	if (cli->fmt == FMT_JSON)
		json_put_str(b, ns.data, ns.len);
	else
		kv_buf_append(b, ns.data, ns.len);
	kv_buf_append(b, "\n", 1);
	kv_buf_free(&ns);
	out_maybe_flush(cli);
}

/* Parse options and positionals (at most max), connect: -1 to go on. */
static int begin(struct cli *cli, int argc, char **argv, int max,
		 struct cli_args *a)
{
	const struct cmd *cmd = cli_find("doc");
	int rc = cli_args(cmd, argc, argv, o_none, a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a->npos > max) {
		fprintf(stderr, "kvcli doc %s: wrong number of arguments\n",
			argv[0]);
		cli_usage(cmd);
		return EXIT_ERROR;
	}
	return cli_connect(cli) ? EXIT_ERROR : -1;
}

static int doc_databases(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_reply *r;
	kvc_val name;
	int rc = begin(cli, argc, argv, 0, &a);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_doc_dbs(cli->c, &r)))
		return doc_fail(cli, "doc databases", rc);
	while (kvc_reply_next(r, NULL, &name) == 0)
		name_line(cli, NULL, name);
	return EXIT_OK;
}

/* The collections of db as DB.COLL lines. */
static int colls_of(struct cli *cli, const char *db)
{
	kvc_reply *r;
	kvc_val name, opts;
	int rc = kvc_doc_colls(cli->c, db, &r);

	if (rc)
		return doc_fail(cli, "doc collections", rc);
	while (kvc_reply_next(r, &name, &opts) == 0)
		name_line(cli, db, name);
	return EXIT_OK;
}

/* doc collections [DB]: DB's, or every database's. */
static int doc_collections(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	struct kv_buf dbs = {0};
	kvc_reply *r;
	kvc_val name;
	int rc = begin(cli, argc, argv, 1, &a);

	if (rc >= 0)
		return rc;
	if (a.npos)
		return colls_of(cli, a.pos[0]);
	if ((rc = kvc_doc_dbs(cli->c, &r)))
		return doc_fail(cli, "doc collections", rc);
	while (kvc_reply_next(r, NULL, &name) == 0) /* NUL-ended names */
		if (kv_buf_append(&dbs, name.p, name.len) ||
		    kv_buf_append(&dbs, "", 1))
			rc = EXIT_ERROR;
	for (size_t p = 0; !rc && p < dbs.len;
	     p += strlen((char *)dbs.data + p) + 1)
		rc = colls_of(cli, (char *)dbs.data + p);
	kv_buf_free(&dbs);
	return rc > 0 ? rc : EXIT_OK;
}

/* A change's exit: OK printed, or 1 for the outcome that means there
 * was nothing to do (the status named on stderr), or its failure. */
static int made(struct cli *cli, const char *what, int rc, int nothing)
{
	if (rc == nothing) {
		fprintf(stderr, "kvcli %s: %s\n", what, kvc_status_name(rc));
		return EXIT_NOT_FOUND;
	}
	if (rc)
		return doc_fail(cli, what, rc);
	out_ok(cli);
	return EXIT_OK;
}

/* doc create DB.COLL [OPTIONS]: exit 1 when it exists. */
static int doc_create(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t *o = NULL;
	int rc = doc_start(cli, argc, argv, NULL, 1, 2, &d);

	if (rc >= 0)
		return rc;
	if (d.a.npos > 1 && !(o = doc_from_json("the options", d.a.pos[1])))
		return EXIT_ERROR;
	rc = kvc_doc_create(cli->c, d.db, d.coll, o ? bson_get_data(o) : NULL,
			    o ? o->len : 0);
	if (o)
		bson_destroy(o);
	return made(cli, "doc create", rc, -KVC_EXISTS);
}

/* doc drop DB.COLL: exit 1 when there is none. */
static int doc_drop(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	int rc = doc_start(cli, argc, argv, NULL, 1, 1, &d);

	if (rc >= 0)
		return rc;
	return made(cli, "doc drop", kvc_doc_drop(cli->c, d.db, d.coll),
		    -KVC_NOT_FOUND);
}

static int doc_indexes(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	kvc_reply *r;
	kvc_val spec;
	int rc = doc_start(cli, argc, argv, NULL, 1, 1, &d);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_doc_indexes(cli->c, d.db, d.coll, &r)))
		return doc_fail(cli, "doc indexes", rc);
	while (kvc_reply_next(r, NULL, &spec) == 0)
		doc_out(cli, spec);
	return EXIT_OK;
}

/* MongoDB's drivers' name of a key pattern: field_value joined by _. */
static void default_name(const bson_t *key, char *out, size_t n)
{
	bson_iter_t it;
	size_t at = 0;

	out[0] = '\0';
	bson_iter_init(&it, key);
	while (bson_iter_next(&it) && at < n) {
		char v[64];

		if (BSON_ITER_HOLDS_UTF8(&it))
			snprintf(v, sizeof(v), "%s", bson_iter_utf8(&it, NULL));
		else
			snprintf(v, sizeof(v), "%lld",
				 (long long)bson_iter_as_int64(&it));
		at += (size_t)snprintf(out + at, n - at, "%s%s_%s",
				       at ? "_" : "", bson_iter_key(&it), v);
	}
}

/* A positional of create-index as a specification into spec: as given
 * when it has "key", else a key pattern with the options.  0 or -1. */
static int make_spec(struct dargs *d, const char *json, bson_t *spec)
{
	bson_t *j = doc_from_json("the index", json), *pfe = NULL;
	unsigned long long ttl;
	char name[256];
	int rc = -1;

	if (!j)
		return -1;
	if (bson_has_field(j, "key")) {
		rc = bson_concat(spec, j) ? 0 : -1;
		goto out;
	}
	default_name(j, name, sizeof(name));
	BSON_APPEND_DOCUMENT(spec, "key", j);
	BSON_APPEND_UTF8(spec, "name", d->a.set[0] ? d->a.val[0] : name);
	if (d->a.set[1])
		BSON_APPEND_BOOL(spec, "sparse", true);
	if (d->a.set[2])
		BSON_APPEND_BOOL(spec, "unique", true);
	if (d->a.set[3]) {
		if (!(pfe = doc_from_json("--partial", d->a.val[3])))
			goto out;
		BSON_APPEND_DOCUMENT(spec, "partialFilterExpression", pfe);
	}
	if (d->a.set[4]) {
		if (cli_uint("--expire", d->a.val[4], INT32_MAX, &ttl))
			goto out;
		BSON_APPEND_INT64(spec, "expireAfterSeconds", (int64_t)ttl);
	}
	rc = 0;
out:
	if (pfe)
		bson_destroy(pfe);
	bson_destroy(j);
	return rc;
}

/* doc create-index DB.COLL SPEC|KEY... [--name N] [--sparse] [--unique]
 * [--partial FILTER] [--expire SECONDS] */
static int doc_create_index(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t specs[64];
	kvc_val v[64];
	uint64_t before = 0, after = 0;
	int n, bad = 0, rc = doc_start(cli, argc, argv, o_ix, 2, 65, &d);

	if (rc >= 0)
		return rc;
	n = d.a.npos - 1;
	for (int i = 0; i < n; i++)
		bson_init(&specs[i]);
	for (int i = 0; !bad && i < n; i++) {
		bad = make_spec(&d, d.a.pos[i + 1], &specs[i]);
		v[i] = (kvc_val){bson_get_data(&specs[i]), specs[i].len};
	}
	if (bad)
		rc = EXIT_ERROR;
	else if ((rc = kvc_doc_create_indexes(cli->c, d.db, d.coll, v,
					      (size_t)n, &before, &after)))
		rc = doc_fail(cli, "doc create-index", rc);
	for (int i = 0; i < n; i++)
		bson_destroy(&specs[i]);
	if (rc)
		return rc;
	doc_out_counts(cli, "before", before, "after", after);
	return EXIT_OK;
}

/* doc drop-index DB.COLL NAME|KEY ("*": every one but _id_) */
static int doc_drop_index(struct cli *cli, int argc, char **argv)
{
	struct dargs d;
	bson_t *key = NULL;
	uint64_t was = 0;
	const char *arg;
	int rc = doc_start(cli, argc, argv, NULL, 2, 2, &d);

	if (rc >= 0)
		return rc;
	arg = d.a.pos[1];
	if (arg[0] == '{' && !(key = doc_from_json("the key pattern", arg)))
		return EXIT_ERROR;
	rc = kvc_doc_drop_index(cli->c, d.db, d.coll, key ? NULL : arg,
				key ? bson_get_data(key) : NULL,
				key ? key->len : 0, &was);
	if (key)
		bson_destroy(key);
	if (rc)
		return doc_fail(cli, "doc drop-index", rc);
	out_int(cli, "nIndexesWas", (long long)was);
	return EXIT_OK;
}

const struct doc_sub doc_admin_subs[] = {
    {"databases", doc_databases},   {"collections", doc_collections},
    {"create", doc_create},	    {"drop", doc_drop},
    {"indexes", doc_indexes},	    {"create-index", doc_create_index},
    {"drop-index", doc_drop_index}, {NULL, NULL}};
