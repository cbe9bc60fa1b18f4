/* cmd_docadmin.c - the native protocol's operations on databases,
 * collections and indexes (50-56: DOCDBS, DOCCOLLS, DOCCREATE, DOCDROP,
 * DOCIXCREATE, DOCIXLIST, DOCIXDROP; docs/protocol.md, "Documents").
 *
 * Nothing here decides what MongoDB would: create's options, index
 * specifications and the index a drop names are checked by kvd/mongo's
 * functions that the door's create, createIndexes, listIndexes and
 * dropIndexes call (mdoor.h), and the changes are the door's store's
 * batches (cmd_doc.c's kvd_doc_change: the catalog's merge on shard 0, an
 * index built in batches of REINDEX merges before the reply).  So an
 * index made here is the one the door lists and plans with, and both
 * refuse the same specifications with the same codes.
 */
#include <string.h>

#include "cmd.h"
#include "cmd_doc.h"
#include "doc/doc.h"
#include "doc/doc_mdoor.h"
#include "kv_status.h"
#include "net/conn.h"
#include "net/loop.h"

/* Specifications one DOCIXCREATE carries at most (MongoDB's limit of
 * indexes on a collection). */
#define SPECS_MAX 64

/* A check's status as the handler's return: a DOC_ERROR answered. */
static int fail(struct kvd_conn *c, struct kvd_req *r, int rc,
		const struct mql_error *e)
{
	return rc == KV_DOC_ERROR ? kvd_doc_answer_error(c, r->op, e) : rc;
}

/* ===================== listings ===================== */

struct names {
	struct kvd_conn *c;
	uint32_t n;
};

static int on_db(void *arg, const struct mdoor_db_info *db)
{
	struct names *l = arg;

	kv_mp_bin(&l->c->out, db->name, strlen(db->name));
	l->n++;
	return 0;
}

static int on_coll(void *arg, const struct mdoor_coll_info *ci)
{
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	struct names *l = arg;

	kv_mp_bin(&l->c->out, ci->name, strlen(ci->name));
	if (ci->options && ci->options_len >= 5)
		kv_mp_bin(&l->c->out, ci->options, ci->options_len);
	else
		kv_mp_bin(&l->c->out, empty, 5);
	l->n += 2;
	return 0;
}

/* A listing's reply [0, [item, ...]]: the array's header is written
 * once its count is known (as an array32, patched). */
static int listing(struct kvd_conn *c, const char *db)
{
	struct names l = {.c = c};
	struct mql_error e = {0};
	size_t off = kvd_reply_begin(c), at;
	int rc;

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	at = c->out.len;
	kv_buf_append(&c->out, "\xdd\0\0\0\0", 5);
	doc_mdoor_enter(c->io);
	rc = db ? doc_mdoor_store.list_collections(NULL, db, on_coll, &l, &e)
		: doc_mdoor_store.list_databases(NULL, on_db, &l, &e);
	if (rc || c->out.err) {
		c->out.len = off;
		return KV_INTERNAL;
	}
	kv_store_be32(c->out.data + at + 1, l.n);
	kvd_reply_end(c, off);
	return KV_OK;
}

/* DOCDBS: [50] -> [0, [db, ...]] */
int kvd_op_docdbs(struct kvd_conn *c, struct kvd_req *r)
{
	(void)r;
	return listing(c, NULL);
}

/* DOCCOLLS: [51, db] -> [0, [coll, options, ...]] */
int kvd_op_doccolls(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1];
	struct mql_error e = {0};
	int rc = kvd_doc_name(&r->a[0], 1, db, &e);

	return rc ? fail(c, r, rc, &e) : listing(c, db);
}

/* DOCIXLIST: [55, db, coll] -> [0, [spec, ...]], _id_ first */
int kvd_op_docixlist(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	struct mql_error e = {0};
	bson_t arr = BSON_INITIALIZER;
	bson_iter_t it;
	uint32_t n = 0;
	size_t off;
	int rc;

	if ((rc = kvd_doc_ns(r, db, coll, &e)))
		return fail(c, r, rc, &e);
	doc_mdoor_enter(c->io);
	if (mdoor_index_list(&doc_mdoor_store, db, coll, &arr, &n, &e)) {
		bson_destroy(&arr);
		return e.code == MQL_InternalError
			   ? KV_INTERNAL
			   : kvd_doc_answer_error(c, r->op, &e);
	}
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_array(&c->out, n);
	bson_iter_init(&it, &arr);
	while (bson_iter_next(&it)) {
		const uint8_t *d;
		uint32_t len;

		bson_iter_document(&it, &len, &d);
		kv_mp_bin(&c->out, d, len);
	}
	bson_destroy(&arr);
	kvd_reply_end(c, off);
	return KV_OK;
}

/* ===================== changes ===================== */

/* The reply of a change: [0, ...] when it was made, else the failure
 * (an outcome where one fits: create of a collection that exists, drop
 * of one that does not). */
static int change_error(struct kvd_conn *c, const struct mdoor_wbatch *b)
{
	if (b->kind == MDOOR_W_CREATE && b->err.code == 48)
		return kvd_reply_status(c, KV_EXISTS, NULL), KV_EXISTS;
	if (b->kind == MDOOR_W_DROP && b->err.code == 26)
		return kvd_reply_status(c, KV_NOT_FOUND, NULL), KV_NOT_FOUND;
	kvd_doc_reply_error(c, &b->err);
	return KV_DOC_ERROR;
}

/* [0, v...]: what a change answers once made (DOCIXCREATE: the indexes
 * before and after, and 1 when it made the collection; DOCIXDROP: the
 * indexes there were; DOCCREATE and DOCDROP: nothing). */
static int changed(struct kvd_conn *c, const struct mdoor_wbatch *b)
{
	uint64_t v[3] = {(uint64_t)b->ix_before, (uint64_t)b->ix_after,
			 b->ix_created_coll ? 1 : 0};
	unsigned n = b->kind == MDOOR_W_IXCREATE ? 3
		     : b->kind == MDOOR_W_IXDROP ? 1
						 : 0;
	size_t off;

	if (b->err.code)
		return change_error(c, b);
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 1 + n);
	kv_mp_uint(&c->out, KV_OK);
	for (unsigned i = 0; i < n; i++)
		kv_mp_uint(&c->out, v[i]);
	kvd_reply_end(c, off);
	return KV_OK;
}

/* Argument i as a BSON document (nil or absent: none, *doc NULL). */
static int opt_doc(struct kvd_req *r, unsigned i, const struct kv_mp_obj **doc,
		   struct mql_error *e)
{
	*doc = NULL;
	if (i >= r->argc || r->a[i].type == KV_MP_NIL)
		return KV_OK;
	*doc = &r->a[i];
	return kvd_doc_bson(*doc, MQL_MAX_INPUT_DEPTH, e);
}

/* DOCCREATE: [52, db, coll, options?] -> [0], or [2] when it exists */
int kvd_op_doccreate(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	const struct kv_mp_obj *o;
	struct mql_error e = {0};
	bson_t opts = BSON_INITIALIZER;
	bson_iter_t it;
	int rc;

	if ((rc = kvd_doc_ns(r, db, coll, &e)) || (rc = opt_doc(r, 2, &o, &e)))
		goto out;
	if (o && (!bson_iter_init_from_data(&it, o->p, o->len) ||
		  mdoor_create_opts(&it, &opts, &e))) {
		rc = KV_DOC_ERROR;
		goto out;
	}
	rc = kvd_doc_change(c, r->op, MDOOR_W_CREATE, db, coll,
			    o ? &opts : NULL, changed);
out:
	bson_destroy(&opts);
	return fail(c, r, rc, &e);
}

/* DOCDROP: [53, db, coll] -> [0], or [1] when there is none */
int kvd_op_docdrop(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	struct mql_error e = {0};
	int rc = kvd_doc_ns(r, db, coll, &e);

	if (rc)
		return fail(c, r, rc, &e);
	return kvd_doc_change(c, r->op, MDOOR_W_DROP, db, coll, NULL, changed);
}

/* DOCIXCREATE: [54, db, coll, spec, ...] -> [0, before, after, made] */
int kvd_op_docixcreate(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1], k[16];
	struct mql_error e = {0};
	bson_t cmd = BSON_INITIALIZER, arr, opts = BSON_INITIALIZER, spec;
	const char *key;
	struct kv_mp_obj o;
	struct kvd_argit ai;
	bson_iter_t it;
	int rc;

	if (r->argc - 2 > SPECS_MAX)
		return KV_BAD_ARGS;
	if ((rc = kvd_doc_ns(r, db, coll, &e)))
		goto out;
	BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
	kvd_argit_init(r, 2, &ai);
	for (uint32_t i = 0; i + 2 < r->argc; i++) {
		kvd_argit_next(&ai, &o);
		if ((rc = kvd_doc_bson(&o, MQL_MAX_INPUT_DEPTH, &e)))
			break;
		bson_init_static(&spec, o.p, o.len);
		bson_uint32_to_string(i, &key, k, sizeof(k));
		bson_append_document(&arr, key, -1, &spec);
	}
	bson_append_array_end(&cmd, &arr);
	if (rc)
		goto out;
	if (!bson_iter_init_find(&it, &cmd, "indexes") ||
	    mdoor_index_specs(&it, &opts, &e)) {
		rc = KV_DOC_ERROR;
		goto out;
	}
	rc = kvd_doc_change(c, r->op, MDOOR_W_IXCREATE, db, coll, &opts,
			    changed);
out:
	bson_destroy(&cmd);
	bson_destroy(&opts);
	return fail(c, r, rc, &e);
}

/* DOCIXDROP: [56, db, coll, name?, key?] -> [0, indexes there were];
 * one of name ("*": all but _id_) and key pattern */
int kvd_op_docixdrop(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	const struct kv_mp_obj *key = NULL, *name = &r->a[2];
	struct mql_error e = {0};
	bson_t ix = BSON_INITIALIZER, opts = BSON_INITIALIZER, kd;
	bson_iter_t it;
	int rc;

	if ((rc = kvd_doc_ns(r, db, coll, &e)) ||
	    (rc = opt_doc(r, 3, &key, &e)))
		goto out;
	if (name->type == KV_MP_NIL) {
		if (!key) {
			rc = KV_BAD_ARGS;
			goto out;
		}
		bson_init_static(&kd, key->p, key->len);
		BSON_APPEND_DOCUMENT(&ix, "index", &kd);
	} else if (key || !kvd_arg_is_bytes(name) || !name->len ||
		   memchr(name->p, 0, name->len)) {
		rc = KV_BAD_ARGS;
		goto out;
	} else {
		bson_append_utf8(&ix, "index", 5, (const char *)name->p,
				 (int)name->len);
	}
	doc_mdoor_enter(c->io);
	if (!bson_iter_init_find(&it, &ix, "index") ||
	    mdoor_index_drop_opts(&doc_mdoor_store, db, coll, &it, &opts, &e)) {
		rc = KV_DOC_ERROR;
		goto out;
	}
	rc = kvd_doc_change(c, r->op, MDOOR_W_IXDROP, db, coll, &opts, changed);
out:
	bson_destroy(&ix);
	bson_destroy(&opts);
	return fail(c, r, rc, &e);
}
