/* mdoor_index.c - createIndexes and dropIndexes: each index specification
 * checked and normalized here as mongod does ({v: 2, key, name, and the
 * options kvd keeps: unique, sparse, partialFilterExpression,
 * expireAfterSeconds}), then handed to the store as one batch (which adds
 * and builds them: doc_mdoor_ix.c for kvd), and MongoDB's replies
 * (numIndexesBefore / After, createdCollectionAutomatically, the note
 * "all indexes already exist"; nIndexesWas). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_write.h"
#include "mql_key.h"
#include "mql_value.h"

static int ix_done(struct mdoor_req *r, struct mdoor_wbatch *b,
		   struct mql_error *err)
{
	if (b->err.code) {
		*err = b->err;
		return -1;
	}
	if (b->kind == MDOOR_W_IXDROP) {
		BSON_APPEND_INT32(&r->reply, "nIndexesWas",
				  (int32_t)b->ix_before);
		return 0;
	}
	BSON_APPEND_INT32(&r->reply, "numIndexesBefore", (int32_t)b->ix_before);
	BSON_APPEND_INT32(&r->reply, "numIndexesAfter", (int32_t)b->ix_after);
	if (b->ix_after == b->ix_before)
		BSON_APPEND_UTF8(&r->reply, "note",
				 "all indexes already exist");
	BSON_APPEND_BOOL(&r->reply, "createdCollectionAutomatically",
			 b->ix_created_coll);
	return 0;
}

/* One option of a specification into out; 0, or -1 with err. */
static int spec_opt(bson_iter_t *it, bson_t *out, struct mql_error *err)
{
	const char *k = bson_iter_key(it);
	struct mql_match *m = NULL;
	const uint8_t *d;
	uint32_t n;

	if (!strcmp(k, "unique") || !strcmp(k, "sparse") ||
	    !strcmp(k, "background")) {
		if (!BSON_ITER_HOLDS_NUMBER(it) && !BSON_ITER_HOLDS_BOOL(it))
			return mdoor_err(err, MQL_TypeMismatch,
					 "The field '%s' has a value of type "
					 "%s, which is not convertible to bool",
					 k, mql_type_name(bson_iter_type(it)));
		if (strcmp(k, "background") && bson_iter_as_bool(it))
			bson_append_bool(out, k, -1, true);
		return 0;
	}
	if (!strcmp(k, "partialFilterExpression")) {
		if (!BSON_ITER_HOLDS_DOCUMENT(it))
			return mdoor_err(err, MQL_TypeMismatch,
					 "partialFilterExpression must be an "
					 "object");
		bson_iter_document(it, &n, &d);
		if (mql_match_compile(d, n, &m, err))
			return -1;
		mql_match_free(m);
		return bson_append_iter(out, k, -1, it) ? 0 : -1;
	}
	if (!strcmp(k, "expireAfterSeconds")) {
		int64_t v;

		if (!BSON_ITER_HOLDS_NUMBER(it) ||
		    (v = bson_iter_as_int64(it)) < 0 || v > INT32_MAX)
			return mdoor_err(err,
					 MQL_InvalidIndexSpecificationOption,
					 "TTL index 'expireAfterSeconds' "
					 "option must be within an acceptable "
					 "range");
		BSON_APPEND_INT64(out, k, v);
		return 0;
	}
	if (!strcmp(k, "v") || !strcmp(k, "ns"))
		return 0; /* v is 2 */
	return mdoor_err(err, MQL_InvalidIndexSpecificationOption,
			 "The field '%s' is not valid for an index "
			 "specification.",
			 k);
}

/* Check spec, normalized into out: 1, 0 for the _id index (nothing to
 * do), or -1 with err. */
static int spec_norm(bson_iter_t *spec, bson_t *out, struct mql_error *err)
{
	bson_iter_t it;
	const uint8_t *kd = NULL;
	uint32_t kn = 0;
	const char *name = NULL;
	struct mql_index *ix = NULL;
	bson_t key;
	int ttl = 0;

	if (!BSON_ITER_HOLDS_DOCUMENT(spec) || !bson_iter_recurse(spec, &it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "The 'indexes' elements must be objects");
	while (bson_iter_next(&it)) {
		bool is_key = !strcmp(bson_iter_key(&it), "key");

		if (!is_key && strcmp(bson_iter_key(&it), "name"))
			continue;
		if (is_key ? !BSON_ITER_HOLDS_DOCUMENT(&it)
			   : !BSON_ITER_HOLDS_UTF8(&it))
			return mdoor_err(
			    err, MQL_TypeMismatch,
			    "The field '%s' must be %s, but got %s",
			    bson_iter_key(&it),
			    is_key ? "an object" : "a string",
			    mql_type_name(bson_iter_type(&it)));
		if (is_key)
			bson_iter_document(&it, &kn, &kd);
		else
			name = bson_iter_utf8(&it, NULL);
	}
	if (!kd)
		return mdoor_err(err, MQL_FailedToParse,
				 "The 'key' field is a required property of "
				 "an index specification");
	if (!name || !name[0])
		return mdoor_err(err, MQL_FailedToParse,
				 "The 'name' field is a required property of "
				 "an index specification");
	if (mql_index_compile(kd, kn, 0, &ix, err))
		return -1;
	ttl = mql_index_nparts(ix) > 1;
	mql_index_free(ix);
	if (!strcmp(name, "_id_") ||
	    (bson_init_static(&key, kd, kn) && bson_iter_init(&it, &key) &&
	     bson_iter_next(&it) && !strcmp(bson_iter_key(&it), "_id") &&
	     !bson_iter_next(&it)))
		return 0; /* the _id index is always there */
	BSON_APPEND_INT32(out, "v", 2);
	BSON_APPEND_DOCUMENT(out, "key", &key);
	BSON_APPEND_UTF8(out, "name", name);
	bson_iter_recurse(spec, &it);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "key") && strcmp(k, "name") &&
		    spec_opt(&it, out, err))
			return -1;
		if (!strcmp(k, "expireAfterSeconds") && ttl)
			return mdoor_err(err, MQL_CannotCreateIndex,
					 "TTL indexes are single-field "
					 "indexes, compound indexes do not "
					 "support TTL.");
	}
	return 1;
}

int mdoor_index_specs(const bson_iter_t *indexes, bson_t *opts,
		      struct mql_error *err)
{
	bson_t arr;
	bson_iter_t it;
	char k[16];
	const char *key;
	uint32_t n = 0;
	int s = 0;

	if (!bson_iter_recurse(indexes, &it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "'indexes' must be an array");
	BSON_APPEND_ARRAY_BEGIN(opts, "indexes", &arr);
	while (s >= 0 && bson_iter_next(&it)) {
		bson_t one = BSON_INITIALIZER;

		if ((s = spec_norm(&it, &one, err)) > 0) {
			bson_uint32_to_string(n++, &key, k, sizeof(k));
			bson_append_document(&arr, key, -1, &one);
		}
		bson_destroy(&one);
	}
	bson_append_array_end(opts, &arr);
	if (s < 0)
		return -1;
	if (bson_iter_recurse(indexes, &it) && !bson_iter_next(&it))
		return mdoor_err(err, MQL_BadValue,
				 "Must specify at least one index");
	return 0;
}

int mdoor_cmd_createindexes(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"indexes", MDOOR_T_ARRAY, true},
	    {"commitQuorum", MDOOR_T_ANY, false},
	};
	mdoor_av a[2];
	bson_t opts = BSON_INITIALIZER;
	const char *coll;
	int rc = -1;

	if (!r->mc->d->store.list_indexes) { /* a store without indexes */
		mdoor_err(err, MQL_NotImplemented,
			  "createIndexes is not supported by this store: only "
			  "the _id index exists");
		goto out;
	}
	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 2, a, err) ||
	    mdoor_index_specs(&a[0].it, &opts, err))
		goto out;
	rc = mdoor_submit_ddl(r, MDOOR_W_IXCREATE, coll, &opts, ix_done, err);
out:
	bson_destroy(&opts);
	return rc;
}

struct by_key {
	const uint8_t *key;
	uint32_t klen;
	char name[256];
};

static int find_key(void *ctx, const uint8_t *spec, uint32_t len)
{
	struct by_key *b = ctx;
	bson_iter_t it, kt;
	const uint8_t *d;
	uint32_t n;

	if (!bson_iter_init_from_data(&it, spec, len) ||
	    !bson_iter_find(&it, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return 0;
	bson_iter_document(&it, &n, &d);
	if (n != b->klen || memcmp(d, b->key, n))
		return 0;
	if (bson_iter_init_from_data(&kt, spec, len) &&
	    bson_iter_find(&kt, "name") && BSON_ITER_HOLDS_UTF8(&kt))
		snprintf(b->name, sizeof(b->name), "%s",
			 bson_iter_utf8(&kt, NULL));
	return 1;
}

static int no_spec(void *ctx, const uint8_t *spec, uint32_t len)
{
	(void)ctx, (void)spec, (void)len;
	return 0;
}

int mdoor_index_drop_opts(const struct mdoor_store *st, const char *db,
			  const char *coll, const bson_iter_t *index,
			  bson_t *opts, struct mql_error *err)
{
	struct by_key bk = {0};
	bson_iter_t it = *index;
	const char *name = NULL;
	int rc;

	if (!st->list_indexes)
		return mdoor_err(err, MQL_NotImplemented,
				 "dropIndexes is not supported by this store: "
				 "only the _id index exists");
	if ((rc = st->list_indexes(st->ctx, db, coll, no_spec, NULL, err)) <= 0)
		return rc == 0 ? mdoor_err(err, MDOOR_NamespaceNotFound,
					   "ns not found %s.%s", db, coll)
			       : -1;
	if (BSON_ITER_HOLDS_ARRAY(&it)) { /* one name: as a string */
		bson_iter_t e;

		if (!bson_iter_recurse(&it, &e) || !bson_iter_next(&e) ||
		    !BSON_ITER_HOLDS_UTF8(&e) || bson_iter_next(&e))
			return mdoor_err(err, MQL_NotImplemented,
					 "dropIndexes of several names at "
					 "once is not supported by kvd: drop "
					 "them one by one");
		bson_iter_recurse(&it, &it);
		bson_iter_next(&it);
	}
	if (BSON_ITER_HOLDS_UTF8(&it)) {
		name = bson_iter_utf8(&it, NULL);
	} else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &bk.klen, &bk.key);
		st->list_indexes(st->ctx, db, coll, find_key, &bk, err);
		name = bk.name;
		if (!name[0])
			return mdoor_err(err, MQL_IndexNotFound,
					 "can't find index with key: %s",
					 bson_iter_key(&it));
	} else {
		return mdoor_err(err, MQL_TypeMismatch,
				 "index must be a string or an object");
	}
	if (!strcmp(name, "_id_"))
		return mdoor_err(err, MDOOR_InvalidOptions,
				 "cannot drop _id index");
	BSON_APPEND_UTF8(opts, "index", name);
	return 0;
}

int mdoor_cmd_dropindexes(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"index", MDOOR_T_STRING | MDOOR_T_OBJECT | MDOOR_T_ARRAY, true},
	};
	mdoor_av a[1];
	bson_t opts = BSON_INITIALIZER;
	const char *coll;
	int rc = -1;

	if (!r->mc->d->store.list_indexes) {
		mdoor_err(err, MQL_NotImplemented,
			  "dropIndexes is not supported by this store: only "
			  "the _id index exists");
		goto out;
	}
	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 1, a, err) ||
	    mdoor_index_drop_opts(&r->mc->d->store, r->db, coll, &a[0].it,
				  &opts, err))
		goto out;
	rc = mdoor_submit_ddl(r, MDOOR_W_IXDROP, coll, &opts, ix_done, err);
out:
	bson_destroy(&opts);
	return rc;
}
