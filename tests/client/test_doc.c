/* test_doc.c - libkvclient's document calls (KVCLIENT_1.5) against a real
 * kvd: kvc_doc_insert, kvc_doc_get, kvc_doc_update, kvc_doc_delete and
 * kvc_doc_find, synchronous and pipelined (kvc_send_doc_*), MongoDB's
 * errors as -KVC_DOC_ERROR with kvc_doc_errcode, a find paged by its
 * cursor, and the argument checks made before anything is sent.
 */
#include <bson/bson.h>
#include <string.h>

#include "kvctest.h"

#define V(b) ((kvc_val){bson_get_data(b), (b)->len})

/* The int32 field name of BSON bytes v, or -1. */
static int32_t field_i32(kvc_val v, const char *name)
{
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, v.p, v.len) ||
	    !bson_iter_find(&it, name) || !BSON_ITER_HOLDS_INT32(&it))
		return -1;
	return bson_iter_int32(&it);
}

static void sync_calls(kvc_conn *c)
{
	bson_t *d1 = BCON_NEW("_id", BCON_INT32(1), "n", BCON_INT32(5));
	bson_t *d2 = BCON_NEW("x", BCON_UTF8("no id"));
	bson_t *id1 = BCON_NEW("_id", BCON_INT32(1));
	bson_t *id7 = BCON_NEW("_id", BCON_INT32(7));
	bson_t *inc = BCON_NEW("$inc", "{", "n", BCON_INT32(2), "}");
	bson_t *bad = BCON_NEW("$nope", "{", "n", BCON_INT32(2), "}");
	bson_t *all = bson_new();
	kvc_val docs[2] = {V(d1), V(d2)}, id, doc, up;
	bson_iter_t it;
	kvc_reply *r;
	uint64_t matched, modified, n;

	CHECK_RC(kvc_doc_insert(c, "db", "c", docs, 2, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &id), 0);
	CHECK(id.len == id1->len && !memcmp(id.p, bson_get_data(id1), id.len));
	CHECK_RC(kvc_reply_next(r, NULL, &id), 0); /* a generated ObjectId */
	CHECK(bson_iter_init_from_data(&it, id.p, id.len) &&
	      bson_iter_find(&it, "_id") && BSON_ITER_HOLDS_OID(&it));
	CHECK_RC(kvc_reply_next(r, NULL, &id), -KVC_END);
	/* a duplicate: MongoDB's code and text */
	CHECK_RC(kvc_doc_insert(c, "db", "c", docs, 1, &r), -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 11000);
	CHECK(strstr(kvc_errmsg(c), "duplicate key"));
	CHECK_RC(kvc_doc_get(c, "db", "c", bson_get_data(id1), id1->len, &doc),
		 0);
	CHECK(kvc_doc_errcode(c) == 0);
	CHECK(field_i32(doc, "n") == 5);
	CHECK_RC(kvc_doc_get(c, "db", "c", bson_get_data(id7), id7->len, &doc),
		 -KVC_NOT_FOUND);
	CHECK_RC(kvc_doc_update(c, "db", "c", bson_get_data(id1), id1->len,
				bson_get_data(inc), inc->len, 0, &matched,
				&modified, &up),
		 0);
	CHECK(matched == 1 && modified == 1 && up.p == NULL);
	CHECK_RC(kvc_doc_get(c, "db", "c", bson_get_data(id1), id1->len, &doc),
		 0);
	CHECK(field_i32(doc, "n") == 7);
	CHECK_RC(kvc_doc_update(c, "db", "c", bson_get_data(id7), id7->len,
				bson_get_data(inc), inc->len, KVC_DOC_UPSERT,
				&matched, &modified, &up),
		 0);
	CHECK(matched == 0 && up.len == id7->len &&
	      !memcmp(up.p, bson_get_data(id7), up.len));
	CHECK_RC(kvc_doc_update(c, "db", "c", bson_get_data(all), all->len,
				bson_get_data(bad), bad->len, KVC_DOC_MULTI,
				NULL, NULL, NULL),
		 -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 9 && strstr(kvc_errmsg(c), "$nope"));
	/* bytes that are not BSON */
	CHECK_RC(kvc_doc_get(c, "db", "c", "\x06\0\0\0\0\0", 6, &doc),
		 -KVC_DOC_ERROR);
	CHECK(kvc_doc_errcode(c) == 22);
	CHECK_RC(kvc_doc_delete(c, "db", "c", bson_get_data(all), all->len,
				KVC_DOC_MULTI, &n),
		 0);
	CHECK(n == 3);
	/* checked before anything is sent */
	CHECK_RC(kvc_doc_insert(c, "db", "c", docs, 0, &r), -KVC_INVALID);
	CHECK_RC(kvc_doc_insert(c, "", "c", docs, 1, &r), -KVC_INVALID);
	CHECK_RC(kvc_doc_get(c, "db", NULL, "x", 1, &doc), -KVC_INVALID);
	CHECK_RC(
	    kvc_doc_delete(c, "db", "c", bson_get_data(all), all->len, 1, &n),
	    -KVC_INVALID);
	CHECK(kvc_pending(c) == 0);
	bson_destroy(d1);
	bson_destroy(d2);
	bson_destroy(id1);
	bson_destroy(id7);
	bson_destroy(inc);
	bson_destroy(bad);
	bson_destroy(all);
}

/* 250 documents, 60 a page, _id descending, those with even _id, from
 * the 10th on, projected to v. */
static void find_pages(kvc_conn *c)
{
	bson_t *filter = BCON_NEW("even", BCON_BOOL(true));
	bson_t *proj = BCON_NEW("v", BCON_INT32(1), "_id", BCON_INT32(0));
	bson_t *sort = BCON_NEW("_id", BCON_INT32(-1));
	kvc_doc_query q = {.filter = V(filter),
			   .projection = V(proj),
			   .sort = V(sort),
			   .skip = 10,
			   .batch = 60};
	kvc_val docs[250], cur = {NULL, 0}, doc;
	bson_t b[250];
	char next[64];
	kvc_reply *r;
	int want = 248 - 20, pages = 0, rc;

	for (int i = 0; i < 250; i++) {
		bson_init(&b[i]);
		BSON_APPEND_INT32(&b[i], "_id", i);
		BSON_APPEND_BOOL(&b[i], "even", i % 2 == 0);
		BSON_APPEND_INT32(&b[i], "v", i);
		docs[i] = V(&b[i]);
	}
	CHECK_RC(kvc_doc_insert(c, "db", "pages", docs, 250, &r), 0);
	for (;;) {
		CHECK_RC(kvc_doc_find(c, "db", "pages", &q, &cur, &r), 0);
		pages++;
		while ((rc = kvc_reply_next(r, NULL, &doc)) == 0) {
			CHECK(field_i32(doc, "v") == want);
			CHECK(field_i32(doc, "_id") == -1); /* projected out */
			want -= 2;
		}
		CHECK_RC(rc, -KVC_END);
		if ((rc = kvc_reply_cursor(r, &cur)) == -KVC_END)
			break;
		CHECK_RC(rc, 0);
		CHECK(cur.len <= sizeof(next));
		memcpy(next, cur.p,
		       cur.len); /* the reply dies at the next call */
		cur.p = next;
	}
	CHECK(want == -2 && pages == 2); /* 115 documents, 60 a page */
	/* all of them, _id order, default page */
	CHECK_RC(kvc_doc_find(c, "db", "pages", NULL, NULL, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &doc), 0);
	CHECK(field_i32(doc, "_id") == 0);
	CHECK_RC(kvc_reply_cursor(r, &cur), 0);
	for (int i = 0; i < 250; i++)
		bson_destroy(&b[i]);
	bson_destroy(filter);
	bson_destroy(proj);
	bson_destroy(sort);
}

static void pipelined(kvc_conn *c)
{
	bson_t *d = BCON_NEW("_id", BCON_UTF8("p"), "n", BCON_INT32(0));
	bson_t *id = BCON_NEW("_id", BCON_UTF8("p"));
	bson_t *inc = BCON_NEW("$inc", "{", "n", BCON_INT32(1), "}");
	kvc_val docs[1] = {V(d)}, v, up;
	kvc_reply *r;
	uint64_t m, mod;
	int64_t n;

	CHECK_RC(kvc_send_doc_insert(c, "db", "p", docs, 1), 0);
	for (int i = 0; i < 100; i++)
		CHECK_RC(kvc_send_doc_update(c, "db", "p", bson_get_data(id),
					     id->len, bson_get_data(inc),
					     inc->len, 0),
			 0);
	CHECK_RC(kvc_send_doc_get(c, "db", "p", bson_get_data(id), id->len), 0);
	CHECK_RC(kvc_send_doc_find(c, "db", "p", NULL, NULL), 0);
	CHECK_RC(
	    kvc_send_doc_delete(c, "db", "p", bson_get_data(id), id->len, 0),
	    0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	for (int i = 0; i < 100; i++) {
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_doc_update(r, &m, &mod, &up), 0);
		CHECK(m == 1 && mod == 1 && up.p == NULL);
	}
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_value(r, &v), 0);
	CHECK(field_i32(v, "n") == 100);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), -KVC_END);
	CHECK_RC(kvc_reply_cursor(r, &v), -KVC_END);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &n), 0);
	CHECK(n == 1);
	CHECK_RC(kvc_reply_doc_update(r, &m, &mod, &up), -KVC_INVALID);
	bson_destroy(d);
	bson_destroy(id);
	bson_destroy(inc);
}

int main(void)
{
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, NULL);
	c = kvt_connect(k.port, 20000);
	sync_calls(c);
	find_pages(c);
	pipelined(c);
	kvc_close(c);
	kvd_stop(&k);
	return 0;
}
