/* mdoor_ddl.c - databases and collections: create, drop and dropDatabase
 * (writes: the store completes them later), listDatabases,
 * listCollections and listIndexes (listings, filtered by mql_match and
 * served through a cursor; listIndexes shows _id_, then the store's
 * indexes), collStats and dbStats (createIndexes and dropIndexes:
 * mdoor_index.c).
 * Options of create that kvd does not do (capped, validators, views, time
 * series, clustered) are refused, not ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_write.h"

/* ===================== create, drop, dropDatabase ===================== */

static int ddl_done(struct mdoor_req *r, struct mdoor_wbatch *b,
		    struct mql_error *err)
{
	if (b->err.code) {
		*err = b->err;
		return -1;
	}
	if (b->kind == MDOOR_W_DROP) {
		char ns[MDOOR_NAME_MAX];

		snprintf(ns, sizeof(ns), "%s.%s", b->db, b->coll);
		BSON_APPEND_INT32(&r->reply, "nIndexesWas", 1);
		BSON_APPEND_UTF8(&r->reply, "ns", ns);
	} else if (b->kind == MDOOR_W_DROPDB) {
		BSON_APPEND_UTF8(&r->reply, "dropped", b->db);
	}
	return 0;
}

int mdoor_submit_ddl(struct mdoor_req *r, enum mdoor_wkind kind,
		     const char *coll, const bson_t *opts,
		     mdoor_finish_fn finish, struct mql_error *err)
{
	struct mdoor_wstate *w = mdoor_wstate_new(r, kind, coll, 0, true);

	if (!w)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	if (opts) {
		w->arena = malloc(opts->len);
		if (!w->arena) {
			mdoor_wstate_free(w);
			return mdoor_err(err, MDOOR_ExceededMemoryLimit,
					 "out of memory");
		}
		memcpy(w->arena, bson_get_data(opts), opts->len);
		w->b.options = w->arena;
		w->b.options_len = opts->len;
	}
	return mdoor_submit(r, &w->b, finish, w, mdoor_wstate_free, err);
}

int mdoor_create_opts(bson_iter_t *it, bson_t *opts, struct mql_error *err)
{
	static const char *const refused[] = {
	    "capped",
	    "size",
	    "max",
	    "validator",
	    "validationLevel",
	    "validationAction",
	    "viewOn",
	    "pipeline",
	    "timeseries",
	    "clusteredIndex",
	    "expireAfterSeconds",
	    "encryptedFields",
	    "changeStreamPreAndPostImages",
	    "collation",
	    NULL,
	};
	/* create's other fields in mongod's IDL: kept in the collection's
	 * options as mongod keeps them (listCollections shows them) */
	static const char *const kept[] = {
	    "storageEngine",
	    "indexOptionDefaults",
	    "idIndex",
	    "autoIndexId",
	    "flags",
	    "temp",
	    NULL,
	};

	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (mdoor_in_list(refused, k)) {
			if (BSON_ITER_HOLDS_BOOL(it) && !bson_iter_bool(it))
				continue;
			return mdoor_err(err, MQL_NotImplemented,
					 "create's '%s' option is not "
					 "supported by kvd",
					 k);
		}
		if (mdoor_in_list(kept, k))
			bson_append_iter(opts, NULL, 0, it);
		else if (!mdoor_generic_arg(k))
			return mdoor_err(err, MDOOR_IDLUnknownField,
					 "BSON field 'create.%s' is an unknown "
					 "field.",
					 k);
	}
	return 0;
}

static int cmd_create(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;
	bson_t opts = BSON_INITIALIZER;
	const char *coll;
	int rc = -1;

	if (mdoor_coll_arg(r, &coll, err))
		goto out;
	mdoor_cmd_value(r, &it);
	if (mdoor_create_opts(&it, &opts, err))
		goto out;
	rc = mdoor_submit_ddl(r, MDOOR_W_CREATE, coll, &opts, ddl_done, err);
out:
	bson_destroy(&opts);
	return rc;
}

static int cmd_drop(struct mdoor_req *r, struct mql_error *err)
{
	const char *coll;

	if (mdoor_coll_arg(r, &coll, err))
		return -1;
	return mdoor_submit_ddl(r, MDOOR_W_DROP, coll, NULL, ddl_done, err);
}

static int cmd_dropdatabase(struct mdoor_req *r, struct mql_error *err)
{
	return mdoor_submit_ddl(r, MDOOR_W_DROPDB, NULL, NULL, ddl_done, err);
}

/* ===================== listings ===================== */

struct listing {
	bson_t *docs; /* the array a cursor serves */
	uint32_t n;
	struct mql_match *filter;
	bool name_only;
	uint64_t total;
	struct mql_error *err;
};

static void list_add(struct listing *l, const bson_t *doc)
{
	char key[16];
	const char *k;

	if (l->filter &&
	    !mql_match_doc(l->filter, bson_get_data(doc), doc->len, NULL))
		return;
	bson_uint32_to_string(l->n++, &k, key, sizeof(key));
	bson_append_document(l->docs, k, -1, doc);
}

static int on_db(void *ctx, const struct mdoor_db_info *db)
{
	struct listing *l = ctx;
	bson_t doc = BSON_INITIALIZER;

	BSON_APPEND_UTF8(&doc, "name", db->name);
	if (!l->name_only) {
		BSON_APPEND_INT64(&doc, "sizeOnDisk",
				  (int64_t)db->size_on_disk);
		BSON_APPEND_BOOL(&doc, "empty", db->empty);
	}
	l->total += db->size_on_disk;
	list_add(l, &doc);
	bson_destroy(&doc);
	return 0;
}

static int list_filter(struct listing *l, const bson_iter_t *f,
		       struct mql_error *err)
{
	const uint8_t *p;
	uint32_t n;

	if (!BSON_ITER_HOLDS_DOCUMENT(f))
		return 0;
	mdoor_arg_doc(f, &p, &n);
	return mql_match_compile(p, n, &l->filter, err);
}

static int cmd_listdatabases(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"filter", MDOOR_T_OBJECT, false},
	    {"nameOnly", MDOOR_T_BOOLISH, false},
	    {"authorizedDatabases", MDOOR_T_BOOLISH, false},
	};
	struct mdoor *d = r->mc->d;
	struct listing l = {.err = err};
	mdoor_av a[3];
	int rc = -1;

	if (mdoor_args(r, spec, 3, a, err) || list_filter(&l, &a[0].it, err))
		return -1;
	l.name_only = mdoor_arg_bool(&a[1].it);
	l.docs = bson_new();
	if (d->store.list_databases(d->store.ctx, on_db, &l, err))
		goto out;
	BSON_APPEND_ARRAY(&r->reply, "databases", l.docs);
	if (!l.name_only) {
		BSON_APPEND_INT64(&r->reply, "totalSize", (int64_t)l.total);
		BSON_APPEND_INT64(&r->reply, "totalSizeMb",
				  (int64_t)(l.total >> 20));
	}
	rc = 0;
out:
	bson_destroy(l.docs);
	mql_match_free(l.filter);
	return rc;
}

static void id_index(bson_t *out, const char *field)
{
	bson_t ix, key;

	BSON_APPEND_DOCUMENT_BEGIN(out, field, &ix);
	BSON_APPEND_INT32(&ix, "v", 2);
	BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
	BSON_APPEND_INT32(&key, "_id", 1);
	bson_append_document_end(&ix, &key);
	BSON_APPEND_UTF8(&ix, "name", "_id_");
	bson_append_document_end(out, &ix);
}

static int on_coll(void *ctx, const struct mdoor_coll_info *c)
{
	struct listing *l = ctx;
	bson_t doc = BSON_INITIALIZER, opts, info;

	BSON_APPEND_UTF8(&doc, "name", c->name);
	BSON_APPEND_UTF8(&doc, "type", "collection");
	if (!l->name_only) {
		if (c->options &&
		    bson_init_static(&opts, c->options, c->options_len))
			BSON_APPEND_DOCUMENT(&doc, "options", &opts);
		else {
			BSON_APPEND_DOCUMENT_BEGIN(&doc, "options", &opts);
			bson_append_document_end(&doc, &opts);
		}
		BSON_APPEND_DOCUMENT_BEGIN(&doc, "info", &info);
		BSON_APPEND_BOOL(&info, "readOnly", false);
		if (c->uuid)
			bson_append_binary(&info, "uuid", 4, BSON_SUBTYPE_UUID,
					   c->uuid, 16);
		bson_append_document_end(&doc, &info);
		id_index(&doc, "idIndex");
	}
	list_add(l, &doc);
	bson_destroy(&doc);
	return 0;
}

/* A cursor over a listing: its documents in l.docs (taken). */
static int list_cursor(struct mdoor_req *r, const char *coll, struct listing *l,
		       const bson_iter_t *cur, struct mql_error *err)
{
	struct mdoor_cursor_src src = {.limit = -1, .list = l->docs};
	struct mdoor_cursor *c;
	int64_t batch = 101;
	bson_iter_t it;

	l->docs = NULL;
	if (cur && BSON_ITER_HOLDS_DOCUMENT(cur) &&
	    bson_iter_recurse(cur, &it) && bson_iter_find(&it, "batchSize") &&
	    BSON_ITER_HOLDS_NUMBER(&it))
		batch = bson_iter_as_int64(&it);
	c = mdoor_cursor_new(r->mc, r->db, coll, &src, err);
	if (!c)
		return -1;
	return mdoor_cursor_reply(r, c, batch < 0 ? 101 : batch, true, false,
				  err);
}

static int cmd_listcollections(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"filter", MDOOR_T_OBJECT, false},
	    {"nameOnly", MDOOR_T_BOOLISH, false},
	    {"authorizedCollections", MDOOR_T_BOOLISH, false},
	    {"cursor", MDOOR_T_OBJECT, false},
	};
	struct mdoor *d = r->mc->d;
	struct listing l = {.err = err};
	mdoor_av a[4];
	int rc = -1;

	if (mdoor_args(r, spec, 4, a, err) || list_filter(&l, &a[0].it, err))
		return -1;
	l.name_only = mdoor_arg_bool(&a[1].it);
	l.docs = bson_new();
	if (d->store.list_collections(d->store.ctx, r->db, on_coll, &l, err))
		goto out;
	rc = list_cursor(r, "$cmd.listCollections", &l, &a[3].it, err);
out:
	if (l.docs)
		bson_destroy(l.docs);
	mql_match_free(l.filter);
	return rc;
}

static int list_spec(void *ctx, const uint8_t *spec, uint32_t len)
{
	bson_t doc;

	if (bson_init_static(&doc, spec, len))
		list_add(ctx, &doc);
	return 0;
}

int mdoor_index_list(const struct mdoor_store *st, const char *db,
		     const char *coll, bson_t *arr, uint32_t *n,
		     struct mql_error *err)
{
	struct mdoor_coll_stats cs;
	struct listing l = {.docs = arr, .err = err};
	int rc;

	id_index(arr, "0");
	l.n = 1;
	if (st->list_indexes)
		rc = st->list_indexes(st->ctx, db, coll, list_spec, &l, err);
	else
		rc = st->coll_stats(st->ctx, db, coll, &cs, err);
	if (rc == 0)
		mdoor_err(err, MDOOR_NamespaceNotFound,
			  "ns does not exist: %s.%s", db, coll);
	*n = l.n;
	return rc > 0 ? 0 : -1;
}

static int cmd_listindexes(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"cursor", MDOOR_T_OBJECT, false},
	};
	struct listing l = {.err = err};
	mdoor_av a[1];
	const char *coll;
	char ns[MDOOR_NAME_MAX];

	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 1, a, err))
		return -1;
	snprintf(ns, sizeof(ns), "%s", coll);
	l.docs = bson_new();
	if (mdoor_index_list(&r->mc->d->store, r->db, coll, l.docs, &l.n,
			     err)) {
		bson_destroy(l.docs);
		return -1;
	}
	return list_cursor(r, ns, &l, &a[0].it, err);
}

/* ===================== stats ===================== */

static int scale_arg(struct mdoor_req *r, int64_t *scale, struct mql_error *err)
{
	bson_iter_t it;

	*scale = 1;
	mdoor_cmd_value(r, &it);
	while (bson_iter_next(&it))
		if (!strcmp(bson_iter_key(&it), "scale")) {
			if (mdoor_arg_int64(r, &it, scale, err))
				return -1;
			if (*scale < 1)
				return mdoor_err(err, MQL_BadValue,
						 "Scale factor must be a "
						 "positive number");
		}
	return 0;
}

static int cmd_collstats(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mdoor_coll_stats st = {0};
	const char *coll;
	char ns[MDOOR_NAME_MAX];
	int64_t scale;
	bson_t sizes;
	int rc;

	if (mdoor_coll_arg(r, &coll, err) || scale_arg(r, &scale, err))
		return -1;
	rc = d->store.coll_stats(d->store.ctx, r->db, coll, &st, err);
	if (rc < 0)
		return -1;
	snprintf(ns, sizeof(ns), "%s.%s", r->db, coll);
	if (rc == 0)
		return mdoor_err(err, MDOOR_NamespaceNotFound,
				 "Collection [%s] not found.", ns);
	BSON_APPEND_UTF8(&r->reply, "ns", ns);
	BSON_APPEND_INT64(&r->reply, "size", (int64_t)st.size / scale);
	BSON_APPEND_INT64(&r->reply, "count", (int64_t)st.count);
	BSON_APPEND_INT64(&r->reply, "avgObjSize",
			  st.count ? (int64_t)(st.size / st.count) : 0);
	BSON_APPEND_INT64(&r->reply, "storageSize",
			  (int64_t)st.storage_size / scale);
	BSON_APPEND_INT64(&r->reply, "nindexes", (int64_t)st.nindexes);
	BSON_APPEND_INT64(&r->reply, "totalIndexSize",
			  (int64_t)st.index_size / scale);
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "indexSizes", &sizes);
	BSON_APPEND_INT64(&sizes, "_id_", (int64_t)st.index_size / scale);
	bson_append_document_end(&r->reply, &sizes);
	BSON_APPEND_INT64(&r->reply, "scaleFactor", scale);
	return 0;
}

static int count_coll(void *ctx, const struct mdoor_coll_info *c)
{
	(void)c;
	(*(int64_t *)ctx)++;
	return 0;
}

static int cmd_dbstats(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mdoor_coll_stats st = {0};
	int64_t scale, ncoll = 0;
	bson_t *o = &r->reply;

	if (scale_arg(r, &scale, err) ||
	    d->store.list_collections(d->store.ctx, r->db, count_coll, &ncoll,
				      err) ||
	    d->store.coll_stats(d->store.ctx, r->db, NULL, &st, err) < 0)
		return -1;
	BSON_APPEND_UTF8(o, "db", r->db);
	BSON_APPEND_INT64(o, "collections", ncoll);
	BSON_APPEND_INT64(o, "views", 0);
	BSON_APPEND_INT64(o, "objects", (int64_t)st.count);
	BSON_APPEND_DOUBLE(o, "avgObjSize",
			   st.count ? (double)st.size / (double)st.count : 0);
	BSON_APPEND_INT64(o, "dataSize", (int64_t)st.size / scale);
	BSON_APPEND_INT64(o, "storageSize", (int64_t)st.storage_size / scale);
	BSON_APPEND_INT64(o, "indexes", (int64_t)st.nindexes);
	BSON_APPEND_INT64(o, "indexSize", (int64_t)st.index_size / scale);
	BSON_APPEND_INT64(o, "totalSize",
			  (int64_t)(st.storage_size + st.index_size) / scale);
	BSON_APPEND_INT64(o, "scaleFactor", scale);
	return 0;
}

const struct mdoor_cmd mdoor_cmds_ddl[] = {
    {"create", cmd_create, 0, MDOOR_CNT_COMMAND},
    {"drop", cmd_drop, 0, MDOOR_CNT_COMMAND},
    {"dropDatabase", cmd_dropdatabase, 0, MDOOR_CNT_COMMAND},
    {"listDatabases", cmd_listdatabases, 0, MDOOR_CNT_COMMAND},
    {"listCollections", cmd_listcollections, 0, MDOOR_CNT_COMMAND},
    {"listIndexes", cmd_listindexes, 0, MDOOR_CNT_COMMAND},
    {"createIndexes", mdoor_cmd_createindexes, 0, MDOOR_CNT_COMMAND},
    {"dropIndexes", mdoor_cmd_dropindexes, 0, MDOOR_CNT_COMMAND},
    {"explain", mdoor_cmd_explain, 0, MDOOR_CNT_COMMAND},
    {"collStats", cmd_collstats, 0, MDOOR_CNT_COMMAND},
    {"dbStats", cmd_dbstats, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
