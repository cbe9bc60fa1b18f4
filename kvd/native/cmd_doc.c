/* cmd_doc.c - the native protocol's document operations (45-48:
 * DOCINSERT, DOCGET, DOCUPDATE, DOCDELETE; DOCFIND is cmd_docfind.c;
 * docs/protocol.md, "Documents").
 *
 * Documents travel as BSON in msgpack bin.  Nothing of MongoDB's language
 * is redone here: a document to insert is prepared as the MongoDB door
 * prepares it (mdoor_doc_prepare: checked, _id first, an ObjectId when it
 * has none), filters and updates are compiled by kvd/mongo to check them
 * before anything is queued, and the writes are the door's own write
 * batches over kvd's documents (doc_mdoor.c, struct mdoor_store's write):
 * an implicit collection creation, _id lookups on one shard, a query's
 * matches found by a scan and each changed by a merge that its committer
 * checks again, upserts, multi.  So a document written here is the one
 * the door reads, and no update is lost between clients of either.
 *
 * A write's merges come back through the connection's pends while
 * c->mwrite is set (cmd.c routes them to doc_mdoor_result); the
 * connection reads nothing else meanwhile, so its replies stay in order.
 * MongoDB's errors are answered as [DOC_ERROR, message, code].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmd_doc.h"
#include "doc/doc.h"
#include "doc/doc_mdoor.h"
#include "kv_status.h"
#include "net/conn.h"
#include "net/loop.h"
#include "ops/stats.h"

/* Documents one DOCINSERT carries at most (MongoDB's maxWriteBatchSize). */
#define INSERT_MAX MDOOR_MAX_WRITE_BATCH

/* ===================== shared pieces ===================== */

void kvd_doc_reply_error(struct kvd_conn *c, const struct mql_error *e)
{
	size_t off = kvd_reply_begin(c);

	kv_mp_array(&c->out, 3);
	kv_mp_uint(&c->out, KV_DOC_ERROR);
	kv_mp_cstr(&c->out, e->msg[0] ? e->msg : "document operation failed");
	kv_mp_int(&c->out, e->code);
	kvd_reply_end(c, off);
}

int kvd_doc_answer_error(struct kvd_conn *c, unsigned op,
			 const struct mql_error *e)
{
	size_t mark = c->out.len;

	kvd_count_now(&c->io->stats, op, KV_DOC_ERROR);
	kvd_doc_reply_error(c, e);
	kvd_conn_defer(c, mark, op);
	return KVD_ANSWERED;
}

/* A database or collection name: 1..255 bytes, MongoDB's rules (no NUL,
 * a database without '.', '/', '\\', ' ', '"' or '$', a collection not
 * empty and without '$'). */
int kvd_doc_name(const struct kv_mp_obj *o, int is_db, char *out,
		 struct mql_error *e)
{
	static const char bad_db[] = "./\\ \"$";

	if (!kvd_arg_is_bytes(o) || o->len == 0 || o->len > KVDOC_NAME_MAX)
		return KV_BAD_ARGS;
	for (uint32_t i = 0; i < o->len; i++)
		if (o->p[i] == 0 || (is_db ? strchr(bad_db, o->p[i]) != NULL
					   : o->p[i] == '$')) {
			mql_error_set(e, 73,
				      "Invalid namespace specified '%.*s'",
				      (int)o->len, (const char *)o->p);
			return KV_DOC_ERROR;
		}
	memcpy(out, o->p, o->len);
	out[o->len] = '\0';
	return KV_OK;
}

int kvd_doc_ns(struct kvd_req *r, char *db, char *coll, struct mql_error *e)
{
	int rc = kvd_doc_name(&r->a[0], 1, db, e);

	return rc ? rc : kvd_doc_name(&r->a[1], 0, coll, e);
}

int kvd_doc_bson(const struct kv_mp_obj *o, int depth, struct mql_error *e)
{
	if (!kvd_arg_is_bytes(o))
		return KV_BAD_ARGS;
	if (mql_bson_check(o->p, o->len, MQL_MAX_INPUT_SIZE, depth, e))
		return KV_DOC_ERROR;
	return KV_OK;
}

/* A status of the checks above as the handler's return. */
static int fail(struct kvd_conn *c, struct kvd_req *r, int rc,
		const struct mql_error *e)
{
	return rc == KV_DOC_ERROR ? kvd_doc_answer_error(c, r->op, e) : rc;
}

/* ===================== DOCGET ===================== */

static __thread struct kvdoc_catalog tl_cat;

int kvd_doc_coll(struct kvd_conn *c, const char *db, const char *coll,
		 uint32_t *id)
{
	if (!tl_cat.img.data)
		(void)kv_buf_free_at_exit(&tl_cat.img);
	if (kvdoc_catalog_refresh(&tl_cat, c->io->reader, c->io->now_ms))
		return -1;
	return kvdoc_catalog_find(&tl_cat, db, coll, id, NULL);
}

/* DOCGET: [46, db, coll, {_id: v}] -> [0, document] or [1] */
int kvd_op_docget(struct kvd_conn *c, struct kvd_req *r)
{
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	struct mql_error e = {0};
	uint8_t key[KVDOC_KEY_MAX];
	struct kv_slice doc;
	bson_iter_t it;
	size_t klen;
	uint32_t cid;
	int rc;

	if ((rc = kvd_doc_ns(r, db, coll, &e)) ||
	    (rc = kvd_doc_bson(&r->a[2], MQL_MAX_INPUT_DEPTH, &e)))
		return fail(c, r, rc, &e);
	if (!bson_iter_init_from_data(&it, r->a[2].p, r->a[2].len) ||
	    !bson_iter_next(&it) || strcmp(bson_iter_key(&it), "_id")) {
		mql_error_set(
		    &e, MQL_BadValue,
		    "DOCGET takes a document whose first field is _id");
		return kvd_doc_answer_error(c, r->op, &e);
	}
	if ((rc = kvd_doc_coll(c, db, coll, &cid)) < 0)
		return KV_INTERNAL;
	if (rc == 0)
		return KV_NOT_FOUND;
	if (kvdoc_key(cid, bson_iter_value(&it), key, &klen, &e))
		return kvd_doc_answer_error(c, r->op, &e);
	rc = kvdoc_get(c->io->reader, c->io->srv->nshards, key, klen,
		       c->io->now_ms, &doc);
	if (rc)
		return rc;
	kvd_reply_value(c, doc);
	return KV_OK;
}

/* ===================== writes ===================== */

/* A write in flight: the door's batch and what it points to. */
struct ndw {
	struct mdoor_wbatch b; /* first: done's batch is the write */
	struct kvd_conn *c;
	unsigned op;
	int answered; /* done ran within start */
	int dead;     /* the connection went away */
	uint64_t t0_ns;
	char db[KVDOC_NAME_MAX + 1], coll[KVDOC_NAME_MAX + 1];
	struct mdoor_wop *ops;
	size_t nops;
	bson_t *docs; /* DOCINSERT: the prepared documents */
	struct mql_match *q;
	struct mql_update *u;
	bson_value_t new_id;
	uint8_t *q_bson, *u_bson;
	/* a collection or index change (kvd_doc_change): its options and
	 * its answer */
	uint8_t *opts;
	int (*reply)(struct kvd_conn *c, const struct mdoor_wbatch *b);
};

static void ndw_free(struct ndw *w)
{
	for (size_t i = 0; i < w->nops; i++) {
		bson_destroy(&w->ops[i].upserted);
		bson_destroy(&w->ops[i].value);
		if (w->docs)
			bson_destroy(&w->docs[i]);
	}
	bson_free(w->ops);
	bson_free(w->docs);
	mql_match_free(w->q);
	mql_update_free(w->u);
	free(w->q_bson);
	free(w->u_bson);
	free(w->opts);
	free(w);
}

static struct ndw *ndw_new(struct kvd_conn *c, unsigned op, size_t nops,
			   enum mdoor_wkind kind)
{
	struct ndw *w = calloc(1, sizeof(*w));

	/* libbson's types in a mdoor_wop ask for 128-byte alignment */
	if (!w || !(w->ops = bson_aligned_alloc0(BSON_ALIGNOF(struct mdoor_wop),
						 (nops ? nops : 1) *
						     sizeof(*w->ops)))) {
		free(w);
		return NULL;
	}
	w->c = c;
	w->op = op;
	w->nops = nops;
	for (size_t i = 0; i < nops; i++) {
		bson_init(&w->ops[i].upserted);
		bson_init(&w->ops[i].value);
	}
	w->b.kind = kind;
	w->b.db = w->db;
	w->b.coll = w->coll;
	w->b.ordered = true;
	w->b.ops = w->ops;
	w->b.nops = nops;
	w->b.conn = c;
	w->t0_ns = c->io->turn_ns;
	return w;
}

/* The first statement that failed (its error), or NULL. */
static const struct mdoor_wop *failed(const struct ndw *w, size_t *i)
{
	for (*i = 0; *i < w->nops; (*i)++)
		if (w->ops[*i].err.code)
			return &w->ops[*i];
	return NULL;
}

/* DOCINSERT's reply: [0, [{_id: v}, ...]] of the documents inserted. */
static void reply_insert(struct ndw *w)
{
	struct kvd_conn *c = w->c;
	size_t off = kvd_reply_begin(c);

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_array(&c->out, (uint32_t)w->nops);
	for (size_t i = 0; i < w->nops; i++) {
		bson_t id = BSON_INITIALIZER;
		bson_iter_t it;

		if (bson_iter_init_find(&it, &w->docs[i], "_id"))
			bson_append_iter(&id, "_id", 3, &it);
		kv_mp_bin(&c->out, bson_get_data(&id), id.len);
		bson_destroy(&id);
	}
	kvd_reply_end(c, off);
}

/* The reply of a write whose statements all ran. */
static void reply_write(struct ndw *w)
{
	struct kvd_conn *c = w->c;
	const struct mdoor_wop *op = &w->ops[0];
	size_t off;

	if (w->op == KV_OP_DOCINSERT) {
		reply_insert(w);
		return;
	}
	off = kvd_reply_begin(c);
	if (w->op == KV_OP_DOCDELETE) {
		kv_mp_array(&c->out, 2);
		kv_mp_uint(&c->out, KV_OK);
		kv_mp_uint(&c->out, (uint64_t)op->n);
	} else {
		kv_mp_array(&c->out, 4);
		kv_mp_uint(&c->out, KV_OK);
		kv_mp_uint(&c->out, (uint64_t)op->n);
		kv_mp_uint(&c->out, (uint64_t)op->nmodified);
		if (op->upserted.len > 5)
			kv_mp_bin(&c->out, bson_get_data(&op->upserted),
				  op->upserted.len);
		else
			kv_mp_nil(&c->out);
	}
	kvd_reply_end(c, off);
}

/* The batch is done (on the connection's thread): answer, free.  A
 * connection that died meanwhile gets nothing (kvd_doc_conn_close). */
static void write_done(struct mdoor_wbatch *b)
{
	struct ndw *w = (struct ndw *)b;
	struct kvd_conn *c = w->c;
	const struct mdoor_wop *op;
	struct mql_error e;
	int st = KV_OK;
	size_t i;

	if (c->flags & CONN_DEAD) {
		ndw_free(w);
		return;
	}
	if (w->reply) {
		st = w->reply(c, b);
	} else if (b->err.code) {
		st = KV_DOC_ERROR;
		kvd_doc_reply_error(c, &b->err);
	} else if ((op = failed(w, &i))) {
		e = op->err;
		if (w->nops > 1) /* which one, and that those before it stay */
			mql_error_set(&e, op->err.code,
				      "document %zu: %s (the %zu before it "
				      "were inserted)",
				      i, op->err.msg, i);
		st = KV_DOC_ERROR;
		kvd_doc_reply_error(c, &e);
	} else {
		reply_write(w);
	}
	kvd_count_reply(&c->io->stats, w->op, st);
	kvd_count_latency(&c->io->stats, w->op, c->io->turn_ns - w->t0_ns, 1);
	ndw_free(w);
}

void kvd_doc_conn_close(struct kvd_conn *c)
{
	kvd_docfind_abandon(c);
	if (!c->mwrite)
		return;
	doc_mdoor_enter(c->io);
	doc_mdoor_abandon(c);
}

void kvd_doc_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	doc_mdoor_enter(c->io);
	doc_mdoor_result(c, pd);
}

/* Hand w to the door's store: the reply comes with its last merge (or at
 * once, when it needs none).  The connection has no write in flight
 * (the operations wait for them, as sections do) and reads nothing more
 * until this one is answered (cmd.c: c->mwrite). */
static int start(struct kvd_conn *c, struct ndw *w)
{
	w->b.done = write_done;
	w->b.now_ms = (int64_t)kvd_now_ms();
	doc_mdoor_enter(c->io);
	doc_mdoor_store.write(NULL, &w->b);
	return KVD_ANSWERED;
}

int kvd_doc_change(struct kvd_conn *c, unsigned op, int kind, const char *db,
		   const char *coll, const bson_t *opts,
		   int (*reply)(struct kvd_conn *c,
				const struct mdoor_wbatch *b))
{
	struct ndw *w = ndw_new(c, op, 0, (enum mdoor_wkind)kind);

	if (!w || (opts && !(w->opts = malloc(opts->len)))) {
		if (w)
			ndw_free(w);
		return KV_INTERNAL;
	}
	snprintf(w->db, sizeof(w->db), "%s", db);
	snprintf(w->coll, sizeof(w->coll), "%s", coll);
	if (opts) {
		memcpy(w->opts, bson_get_data(opts), opts->len);
		w->b.options = w->opts;
		w->b.options_len = opts->len;
	}
	w->reply = reply;
	return start(c, w);
}

/* DOCINSERT: [45, db, coll, document, ...] -> [0, [{_id: v}, ...]] */
int kvd_op_docinsert(struct kvd_conn *c, struct kvd_req *r)
{
	struct mql_error e = {0};
	struct kv_mp_obj o;
	struct kvd_argit it;
	struct ndw *w;
	size_t n = r->argc - 2;
	int rc;

	if (n > INSERT_MAX)
		return KV_BAD_ARGS;
	if (!(w = ndw_new(c, r->op, n, MDOOR_W_INSERT)) ||
	    !(w->docs = bson_aligned_alloc0(BSON_ALIGNOF(bson_t),
					    n * sizeof(*w->docs)))) {
		if (w)
			ndw_free(w);
		return KV_INTERNAL;
	}
	for (size_t i = 0; i < n; i++)
		bson_init(&w->docs[i]);
	if ((rc = kvd_doc_ns(r, w->db, w->coll, &e)))
		goto fail;
	kvd_argit_init(r, 2, &it);
	for (size_t i = 0; i < n; i++) {
		bson_t d;

		kvd_argit_next(&it, &o);
		if (!kvd_arg_is_bytes(&o)) {
			rc = KV_BAD_ARGS;
			goto fail;
		}
		if (mdoor_doc_prepare(o.p, o.len, &d, &e)) {
			if (n > 1) {
				struct mql_error e2 = e;

				mql_error_set(&e, e2.code, "document %zu: %s",
					      i, e2.msg);
			}
			rc = KV_DOC_ERROR;
			goto fail;
		}
		/* a copy: d may point into the request */
		rc = bson_concat(&w->docs[i], &d) ? KV_OK : KV_INTERNAL;
		bson_destroy(&d);
		if (rc)
			goto fail;
		w->ops[i].doc = bson_get_data(&w->docs[i]);
		w->ops[i].len = w->docs[i].len;
	}
	return start(c, w);
fail:
	ndw_free(w);
	return fail(c, r, rc, &e);
}

/* Keep copies of the filter (and update) for the committers. */
static int keep(uint8_t **dst, const struct kv_mp_obj *o)
{
	if (!(*dst = malloc(o->len)))
		return -1;
	memcpy(*dst, o->p, o->len);
	return 0;
}

/* DOCUPDATE and DOCDELETE: the filter (argument 2), compiled. */
static int take_filter(struct ndw *w, struct kvd_req *r, struct mql_error *e)
{
	int rc = kvd_doc_ns(r, w->db, w->coll, e);

	if (rc || (rc = kvd_doc_bson(&r->a[2], MQL_MAX_INPUT_DEPTH, e)))
		return rc;
	if (mql_match_compile(r->a[2].p, r->a[2].len, &w->q, e))
		return KV_DOC_ERROR;
	if (keep(&w->q_bson, &r->a[2]))
		return KV_INTERNAL;
	w->ops[0].q = w->q;
	w->ops[0].q_bson = w->q_bson;
	w->ops[0].q_len = r->a[2].len;
	return KV_OK;
}

/* DOCUPDATE: [47, db, coll, filter, update, flags?] -> [0, matched,
 * modified, {_id: v}-or-nil] */
int kvd_op_docupdate(struct kvd_conn *c, struct kvd_req *r)
{
	struct mql_error e = {0};
	struct ndw *w = ndw_new(c, r->op, 1, MDOOR_W_UPDATE);
	uint64_t flags;
	bson_oid_t oid;
	int rc;

	if (!w)
		return KV_INTERNAL;
	if ((rc = kvd_arg_opt_uint(r, 4, 0, &flags)) ||
	    (flags & ~(uint64_t)(KV_DOC_UPSERT | KV_DOC_MULTI))) {
		rc = KV_BAD_ARGS;
		goto fail;
	}
	if ((rc = take_filter(w, r, &e)) ||
	    (rc = kvd_doc_bson(&r->a[3], MQL_MAX_INPUT_DEPTH, &e)))
		goto fail;
	if (mql_update_compile(r->a[3].p, r->a[3].len, &w->u, &e)) {
		rc = KV_DOC_ERROR;
		goto fail;
	}
	if (mql_update_is_replacement(w->u) && (flags & KV_DOC_MULTI)) {
		mql_error_set(&e, MQL_FailedToParse,
			      "multi update is not supported for replacement-"
			      "style update");
		rc = KV_DOC_ERROR;
		goto fail;
	}
	if (keep(&w->u_bson, &r->a[3])) {
		rc = KV_INTERNAL;
		goto fail;
	}
	bson_oid_init(&oid, NULL);
	w->new_id.value_type = BSON_TYPE_OID;
	bson_oid_copy(&oid, &w->new_id.value.v_oid);
	w->ops[0].u = w->u;
	w->ops[0].u_bson = w->u_bson;
	w->ops[0].u_len = r->a[3].len;
	w->ops[0].upsert = (flags & KV_DOC_UPSERT) != 0;
	w->ops[0].multi = (flags & KV_DOC_MULTI) != 0;
	w->ops[0].new_id = &w->new_id;
	return start(c, w);
fail:
	ndw_free(w);
	return fail(c, r, rc, &e);
}

/* DOCDELETE: [48, db, coll, filter, flags?] -> [0, deleted] */
int kvd_op_docdelete(struct kvd_conn *c, struct kvd_req *r)
{
	struct mql_error e = {0};
	struct ndw *w = ndw_new(c, r->op, 1, MDOOR_W_DELETE);
	uint64_t flags;
	int rc;

	if (!w)
		return KV_INTERNAL;
	if ((rc = kvd_arg_opt_uint(r, 3, 0, &flags)) ||
	    (flags & ~(uint64_t)KV_DOC_MULTI)) {
		rc = KV_BAD_ARGS;
		goto fail;
	}
	if ((rc = take_filter(w, r, &e)))
		goto fail;
	w->ops[0].multi = (flags & KV_DOC_MULTI) != 0;
	return start(c, w);
fail:
	ndw_free(w);
	return fail(c, r, rc, &e);
}
