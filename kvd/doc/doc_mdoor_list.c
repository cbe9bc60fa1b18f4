/* doc_mdoor_list.c - the MongoDB door's listings over kvd's documents
 * (listDatabases, listCollections: mdoor_store's list_databases and
 * list_collections), read from the io thread's copy of the catalog. */
#include <stdlib.h>
#include <string.h>

#include "doc_ix.h"

struct dbs {
	char names[256][KVDOC_NAME_MAX + 1];
	size_t n;
};

static int each_db(void *arg, uint32_t id, struct kv_slice db,
		   struct kv_slice coll, struct kv_slice opts)
{
	struct dbs *d = arg;

	(void)id, (void)coll, (void)opts;
	for (size_t i = 0; i < d->n; i++)
		if (strlen(d->names[i]) == db.n &&
		    !memcmp(d->names[i], db.p, db.n))
			return 0;
	if (d->n == 256)
		return 1;
	memcpy(d->names[d->n], db.p, db.n);
	d->names[d->n++][db.n] = '\0';
	return 0;
}

int doc_mdoor_list_dbs(void *ctx, mdoor_db_cb cb, void *cbctx,
		       struct mql_error *err)
{
	const struct kvdoc_catalog *c = doc_mdoor_catalog();
	struct dbs *d;

	(void)ctx;
	if (!c || !(d = calloc(1, sizeof(*d))))
		return mql_error_set(err, MQL_InternalError, "catalog");
	kvdoc_catalog_each(c, NULL, each_db, d);
	for (size_t i = 0; i < d->n; i++) {
		struct mdoor_db_info info = {.name = d->names[i],
					     .size_on_disk = 4096};

		if (cb(cbctx, &info))
			break;
	}
	free(d);
	return 0;
}

struct colls {
	mdoor_coll_cb cb;
	void *cbctx;
};

static int each_coll(void *arg, uint32_t id, struct kv_slice db,
		     struct kv_slice coll, struct kv_slice opts)
{
	struct colls *cs = arg;
	char name[KVDOC_NAME_MAX + 1];
	uint8_t uuid[16] = {0};
	struct mdoor_coll_info info = {.name = name, .uuid = uuid};

	(void)db;
	memcpy(name, coll.p, coll.n);
	name[coll.n] = '\0';
	/* the id is the collection's identity: never reused */
	uuid[12] = (uint8_t)(id >> 24);
	uuid[13] = (uint8_t)(id >> 16);
	uuid[14] = (uint8_t)(id >> 8);
	uuid[15] = (uint8_t)id;
	if (opts.n >= 5) {
		info.options = opts.p;
		info.options_len = (uint32_t)opts.n;
	}
	return cs->cb(cs->cbctx, &info);
}

int doc_mdoor_list_colls(void *ctx, const char *db, mdoor_coll_cb cb,
			 void *cbctx, struct mql_error *err)
{
	const struct kvdoc_catalog *c = doc_mdoor_catalog();
	struct colls cs = {cb, cbctx};

	(void)ctx;
	if (!c)
		return mql_error_set(err, MQL_InternalError, "catalog");
	kvdoc_catalog_each(c, db, each_coll, &cs);
	return 0;
}
