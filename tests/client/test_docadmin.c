/* test_docadmin.c - libkvclient's calls on databases, collections and
 * indexes (KVCLIENT_1.6) against a real kvd: kvc_doc_dbs, kvc_doc_colls,
 * kvc_doc_create, kvc_doc_drop, kvc_doc_create_indexes, kvc_doc_indexes
 * and kvc_doc_drop_index, synchronous and pipelined (kvc_send_doc_*,
 * kvc_reply_doc_ixcreate), MongoDB's refusals as -KVC_DOC_ERROR with
 * their codes, and the argument checks made before anything is sent.
 */
#include <bson/bson.h>
#include <string.h>

#include "kvctest.h"

#define V(b) ((kvc_val){bson_get_data(b), (b)->len})

/* The string field name of BSON bytes v is s. */
static int field_is(kvc_val v, const char *name, const char *s)
{
	bson_iter_t it;

	return bson_iter_init_from_data(&it, v.p, v.len) &&
	       bson_iter_find(&it, name) && BSON_ITER_HOLDS_UTF8(&it) &&
	       !strcmp(bson_iter_utf8(&it, NULL), s);
}

static int same(kvc_val v, const char *s)
{
	return v.len == strlen(s) && !memcmp(v.p, s, v.len);
}

static void collections(kvc_conn *c)
{
	bson_t *opts = BCON_NEW("storageEngine", "{", "}");
	bson_t *capped = BCON_NEW("capped", BCON_BOOL(true));
	kvc_val name, o;
	kvc_reply *r;

	CHECK_RC(kvc_doc_create(c, "adm", "a", NULL, 0), 0);
	CHECK_RC(kvc_doc_create(c, "adm", "a", NULL, 0), -KVC_EXISTS);
	CHECK_RC(kvc_doc_create(c, "adm", "b", bson_get_data(opts), opts->len),
		 0);
	CHECK_RC(
	    kvc_doc_create(c, "adm", "c", bson_get_data(capped), capped->len),
	    -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 238);
	CHECK_RC(kvc_doc_dbs(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &name), 0);
	CHECK(same(name, "adm"));
	CHECK_RC(kvc_reply_next(r, NULL, &name), -KVC_END);
	CHECK_RC(kvc_doc_colls(c, "adm", &r), 0);
	CHECK_RC(kvc_reply_next(r, &name, &o), 0);
	CHECK(same(name, "a") && o.len == 5);
	CHECK_RC(kvc_reply_next(r, &name, &o), 0);
	CHECK(same(name, "b") && o.len == opts->len &&
	      !memcmp(o.p, bson_get_data(opts), o.len));
	CHECK_RC(kvc_reply_next(r, &name, &o), -KVC_END);
	CHECK_RC(kvc_doc_drop(c, "adm", "a"), 0);
	CHECK_RC(kvc_doc_drop(c, "adm", "a"), -KVC_NOT_FOUND);
	/* checked before anything is sent */
	CHECK_RC(kvc_doc_colls(c, NULL, &r), -KVC_INVALID);
	CHECK_RC(kvc_doc_create(c, "adm", "x", "\x04", 1), -KVC_INVALID);
	CHECK(kvc_pending(c) == 0);
	bson_destroy(opts);
	bson_destroy(capped);
}

static void indexes(kvc_conn *c)
{
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "a", BCON_INT32(2));
	bson_t *s1 = BCON_NEW("key", "{", "a", BCON_INT32(1), "}", "name",
			      BCON_UTF8("a_1"));
	bson_t *s2 = BCON_NEW("key", "{", "b", BCON_INT32(-1), "}", "name",
			      BCON_UTF8("b_-1"), "sparse", BCON_BOOL(true));
	bson_t *clash = BCON_NEW("key", "{", "z", BCON_INT32(1), "}", "name",
				 BCON_UTF8("a_1"));
	bson_t *kb = BCON_NEW("b", BCON_INT32(-1));
	kvc_val specs[65], d = V(doc), s;
	uint64_t before = 0, after = 0, was = 0;
	kvc_reply *r;

	CHECK_RC(kvc_doc_insert(c, "ix", "c", &d, 1, &r), 0);
	specs[0] = V(s1);
	specs[1] = V(s2);
	CHECK_RC(
	    kvc_doc_create_indexes(c, "ix", "c", specs, 2, &before, &after), 0);
	CHECK(before == 1 && after == 3);
	CHECK_RC(
	    kvc_doc_create_indexes(c, "ix", "c", specs, 1, &before, &after), 0);
	CHECK(before == 3 && after == 3);
	specs[0] = V(clash);
	CHECK_RC(kvc_doc_create_indexes(c, "ix", "c", specs, 1, NULL, NULL),
		 -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 86);
	CHECK_RC(kvc_doc_indexes(c, "ix", "c", &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &s), 0);
	CHECK(field_is(s, "name", "_id_"));
	CHECK_RC(kvc_reply_next(r, NULL, &s), 0);
	CHECK(field_is(s, "name", "a_1"));
	CHECK_RC(kvc_reply_next(r, NULL, &s), 0);
	CHECK(field_is(s, "name", "b_-1"));
	CHECK_RC(kvc_reply_next(r, NULL, &s), -KVC_END);
	CHECK_RC(kvc_doc_indexes(c, "ix", "none", &r), -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 26);
	CHECK_RC(kvc_doc_drop_index(c, "ix", "c", NULL, bson_get_data(kb),
				    kb->len, &was),
		 0);
	CHECK(was == 3);
	CHECK_RC(kvc_doc_drop_index(c, "ix", "c", "b_-1", NULL, 0, NULL),
		 -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 27);
	CHECK_RC(kvc_doc_drop_index(c, "ix", "c", "_id_", NULL, 0, NULL),
		 -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 72);
	/* checked before anything is sent: a name and a key, neither, more
	 * than 64 specifications */
	CHECK_RC(kvc_doc_drop_index(c, "ix", "c", "a_1", bson_get_data(kb),
				    kb->len, NULL),
		 -KVC_INVALID);
	CHECK_RC(kvc_doc_drop_index(c, "ix", "c", NULL, NULL, 0, NULL),
		 -KVC_INVALID);
	for (int i = 0; i < 65; i++)
		specs[i] = V(s1);
	CHECK_RC(kvc_doc_create_indexes(c, "ix", "c", specs, 65, NULL, NULL),
		 -KVC_INVALID);
	CHECK(kvc_pending(c) == 0);
	bson_destroy(doc);
	bson_destroy(s1);
	bson_destroy(s2);
	bson_destroy(clash);
	bson_destroy(kb);
}

static void pipelined(kvc_conn *c)
{
	bson_t *s1 = BCON_NEW("key", "{", "q", BCON_INT32(1), "}", "name",
			      BCON_UTF8("q_1"));
	kvc_val spec = V(s1), v;
	uint64_t before, after;
	int64_t n;
	int made;
	kvc_reply *r;

	CHECK_RC(kvc_send_doc_create(c, "pl", "c", NULL, 0), 0);
	CHECK_RC(kvc_send_doc_create_indexes(c, "pl", "c", &spec, 1), 0);
	CHECK_RC(kvc_send_doc_indexes(c, "pl", "c"), 0);
	CHECK_RC(kvc_send_doc_colls(c, "pl"), 0);
	CHECK_RC(kvc_send_doc_drop_index(c, "pl", "c", "*", NULL, 0), 0);
	CHECK_RC(kvc_send_doc_drop(c, "pl", "c"), 0);
	CHECK_RC(kvc_send_doc_dbs(c), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_doc_ixcreate(r, &before, &after, &made), 0);
	CHECK(before == 1 && after == 2 && made == 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK(field_is(v, "name", "q_1"));
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, &v, NULL), 0);
	CHECK(same(v, "c"));
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &n), 0);
	CHECK(n == 2);
	CHECK_RC(kvc_reply_doc_ixcreate(r, NULL, NULL, NULL), -KVC_INVALID);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	while (kvc_reply_next(r, NULL, &v) == 0)
		CHECK(!same(v, "pl")); /* its only collection was dropped */
	bson_destroy(s1);
}

int main(void)
{
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, NULL);
	c = kvt_connect(k.port, 20000);
	collections(c);
	indexes(c);
	pipelined(c);
	kvc_close(c);
	kvd_stop(&k);
	return 0;
}
