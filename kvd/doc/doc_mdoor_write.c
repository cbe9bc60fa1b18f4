/* doc_mdoor_write.c - the MongoDB door's writes (mdoor_store.write) over
 * kvd's documents, as merge operations on the documents' committers,
 * completed on the connection's io thread (doc_mdoor_int.h).
 *
 * A batch runs its statements one after another (an ordered batch stops
 * at the first that fails), except a batch of inserts, whose documents go
 * out ahead of their results (doc_mdoor_pipe.c); a statement's merges go
 * out together and come back through the connection's pends (proto wreply ->
 * doc_mdoor_result), in order.  An insert or upsert into a collection the
 * catalog lacks first creates it through shard 0's committer (concurrent
 * creations get one id).  A statement whose filter is not an _id equality
 * scans for the matching _ids and sends one merge per document carrying
 * the filter, which the committer checks again on the current image; a
 * multi-document one does it in batches of BATCH keys, the scan going on
 * after the last document it read once a batch's merges came back, so an
 * updateMany over any number of documents holds one batch.
 */
#include "doc_mdoor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc.h"
#include "doc_ix.h"
#include "doc_mdoor_int.h"
#include "doc_uq.h"
#include "index.h"
#include "kv_status.h"
#include "mongo/mql_value.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/write.h"
#include "repl/repl.h"

static void step(struct dmw *w);

static bool b_is_catalog(enum mdoor_wkind k)
{
	return k == MDOOR_W_CREATE || k == MDOOR_W_DROP || k == MDOOR_W_DROPDB;
}

/* An insert into a collection with a unique index: through the
 * reservations' driver (doc_uq.h), its keys reserved before its merge. */
static int send_unique(struct dmw *w, struct mql_error *e)
{
	struct kv_buf want = {0};
	const struct mdoor_wop *op = &w->b->ops[w->i];
	int rc = 0;

	doc_uq_stmt(&w->uq, w->cid, w->mid, &w->opnd);
	while (!rc && w->kpos < w->keys.len) {
		const uint8_t *p = w->keys.data + w->kpos;

		want.len = 0;
		if (w->mid == KVDOC_OP_INSERT &&
		    doc_uq_keys((struct kv_slice){w->opnd.data, w->opnd.len},
				op->doc, op->len, &want, e)) {
			rc = -1;
			break;
		}
		rc = doc_uq_push(&w->uq, p + 1, p[0],
				 (struct kv_slice){want.data, want.len}, w->i,
				 (struct kv_slice){0});
		w->kpos += 1u + p[0];
	}
	kv_buf_free(&want);
	if (!rc && !w->out && doc_uq_step(&w->uq) < 0)
		rc = -1;
	return rc && !e->code ? dmw_oom(e) : rc;
}

/* Send the statement's next keys, up to the window. */
static int send_keys(struct dmw *w, struct mql_error *e)
{
	if (w->unique)
		return send_unique(w, e);
	while (w->kpos < w->keys.len && w->out < WINDOW) {
		const uint8_t *p = w->keys.data + w->kpos;

		if (dmw_send_merge(w, KVD_KS_DOC, KVDOC_MERGE_BASE + w->mid,
				   p + 1, p[0], w->opnd.data, w->opnd.len))
			return dmw_oom(e);
		w->kpos += 1u + p[0];
	}
	return 0;
}

static int add_key(struct dmw *w, const bson_value_t *id, struct mql_error *e)
{
	uint8_t k[KVDOC_KEY_MAX];
	size_t kn;
	uint8_t n;

	if (kvdoc_key(w->cid, id, k, &kn, e))
		return -1;
	n = (uint8_t)kn;
	if (kv_buf_append(&w->keys, &n, 1) || kv_buf_append(&w->keys, k, kn))
		return dmw_oom(e);
	return 0;
}

/* The _id equality among q's top-level predicates, or NULL. */
struct ideq {
	const bson_value_t *v;
};

static void find_ideq(void *ctx, const struct mql_pred *p)
{
	struct ideq *x = ctx;

	if (!x->v && p->op == MQL_PRED_EQ && !strcmp(p->path, "_id") &&
	    p->value->value_type != BSON_TYPE_DOCUMENT &&
	    p->value->value_type != BSON_TYPE_ARRAY &&
	    p->value->value_type != BSON_TYPE_REGEX)
		x->v = p->value;
}

static const bson_value_t *id_eq(const struct mql_match *q)
{
	struct ideq x = {NULL};

	mql_match_preds(q, find_ideq, &x);
	return x.v;
}

/* A scan's slice ran out before it found what the statement needs: the
 * connection's next loop turn goes on (doc_mdoor_write_again), so that
 * a filter slow to match does not hold the io thread (mdoor.h). */
static void pause_scan(struct dmw *w)
{
	w->paused = true;
	kvd_io_again(w->c);
}

/* The next keys of a multi-document statement's matches, at most BATCH,
 * from its open scan (closed once it ends): 0, or -1 with e; 0 with no
 * key and w->paused when its slice ran out first.  The scan goes on
 * after the last document it read, so a statement over any number of
 * documents holds one batch of keys and one scan batch. */
static int more_keys(struct dmw *w, struct mql_error *e)
{
	const uint8_t *doc;
	uint32_t len;
	size_t nk = 0;
	bson_iter_t it;
	int rc = 0;

	w->keys.len = w->kpos = 0;
	doc_mdoor_scan_slice(w->scan, MDOOR_SLICE_MS);
	while (nk < BATCH &&
	       (rc = doc_mdoor_scan_next(w->scan, &doc, &len, e)) == 1) {
		if (dmw_doc_id(doc, len, &it) ||
		    add_key(w, bson_iter_value(&it), e))
			return -1;
		nk++;
	}
	if (rc < 0)
		return -1;
	if (rc == MDOOR_PAUSE) {
		if (!nk) /* else these go out, and the scan on after */
			pause_scan(w);
		return 0;
	}
	if (rc == 0) {
		doc_mdoor_scan_close(w->scan);
		w->scan = NULL;
	}
	return 0;
}

/* The first match of the open scan, or the first in op->sort's order
 * (w->best holds the best so far), into keys: 0 (no key: no match), 0
 * with w->paused (the scan and w->best kept), or -1 with e. */
static int find_one(struct dmw *w, const struct mdoor_wop *op,
		    struct mql_error *e)
{
	size_t nk = op->sort ? mql_sort_nkeys(op->sort) : 0;
	bson_value_t *ka = calloc(nk + 1, sizeof(*ka)),
		     *kb = calloc(nk + 1, sizeof(*kb));
	const uint8_t *doc;
	uint32_t len;
	bson_iter_t it;
	int rc = -1;

	if (!ka || !kb) {
		dmw_oom(e);
		goto out;
	}
	doc_mdoor_scan_slice(w->scan, MDOOR_SLICE_MS);
	while ((rc = doc_mdoor_scan_next(w->scan, &doc, &len, e)) == 1) {
		if (op->sort) {
			if (w->best.len) {
				mql_sort_key(op->sort, doc, len, ka);
				mql_sort_key(op->sort, w->best.data,
					     (uint32_t)w->best.len, kb);
				if (mql_sort_cmp_keys(op->sort, ka, kb) >= 0)
					continue;
			}
			w->best.len = 0;
			if (kv_buf_append(&w->best, doc, len)) {
				rc = dmw_oom(e);
				break;
			}
			continue;
		}
		if (dmw_doc_id(doc, len, &it) ||
		    add_key(w, bson_iter_value(&it), e)) {
			rc = -1;
			break;
		}
		break; /* the first match */
	}
	if (rc == MDOOR_PAUSE) {
		pause_scan(w);
		rc = 0;
		goto out;
	}
	if (rc >= 0 && w->best.len) {
		rc = dmw_doc_id(w->best.data, (uint32_t)w->best.len, &it) ||
			     add_key(w, bson_iter_value(&it), e)
			 ? -1
			 : 0;
	}
	rc = rc < 0 ? -1 : 0;
	doc_mdoor_scan_close(w->scan);
	w->scan = NULL;
	w->best.len = 0;
out:
	free(ka);
	free(kb);
	return rc;
}

/* Look for the statement's documents: a slice of its open scan. */
static int look(struct dmw *w, const struct mdoor_wop *op, struct mql_error *e)
{
	return w->multi ? more_keys(w, e) : find_one(w, op, e);
}

/* Collect the keys of q's matches (all, or the first; for findAndModify
 * the first in op->sort's order): 0, or -1 with e; 0 with w->paused
 * when the scan's slice ran out first (doc_mdoor_write_again goes on).
 * All: the first batch (more_keys), the scan left open for the next. */
static int collect(struct dmw *w, const struct mdoor_wop *op, bool all,
		   struct mql_error *e)
{
	struct mdoor_query q = {.db = w->b->db,
				.coll = w->b->coll,
				.filter = op->q,
				.hint = op->hint,
				.hint_len = op->hint_len,
				.hint_name = op->hint_name};

	if (doc_mdoor_scan_open(NULL, &q, &w->scan,
				&(struct mdoor_scan_info){0}, e)) {
		w->scan = NULL;
		return -1;
	}
	w->multi = all && !op->sort;
	w->best.len = 0;
	return look(w, op, e);
}

static int stmt_send(struct dmw *w, struct mdoor_wop *op);

/* Start statement i: the number of merges it sent (0: done at once, its
 * results set), or -1 with op->err; 1 too while its scan is paused
 * (doc_mdoor_write_again goes on). */
static int start_stmt(struct dmw *w, struct mdoor_wop *op)
{
	enum mdoor_wkind k = w->b->kind;
	const bson_value_t *id = NULL;
	bson_iter_t it;

	w->keys.len = w->opnd.len = w->kpos = 0;
	w->upid = w->ideq = NULL;
	w->sent_stmt = false;
	if (w->scan) { /* the statement before failed mid-way */
		doc_mdoor_scan_close(w->scan);
		w->scan = NULL;
	}
	/* the collection's indexes, which the merge keeps (index.h) */
	if (kvdoc_ix_section(doc_mdoor_catalog(), w->have ? w->cid : 0, 0,
			     &w->opnd))
		return dmw_oom(&op->err);
	/* an insert's unique keys are known: reserved before its merge;
	 * other writes go out at once, and a merge that finds its document
	 * gaining a unique key asks for reservations (doc_uq_back) */
	w->unique =
	    k == MDOOR_W_INSERT &&
	    kvdoc_ix_has_unique((struct kv_slice){w->opnd.data, w->opnd.len});
	if (k == MDOOR_W_INSERT) {
		if (dmw_doc_id(op->doc, op->len, &it) ||
		    add_key(w, bson_iter_value(&it), &op->err))
			return op->err.code
				   ? -1
				   : mql_error_set(&op->err, MQL_BadValue,
						   "no _id");
		w->mid = KVDOC_OP_INSERT;
		if (kv_buf_append(&w->opnd, op->doc, op->len))
			return dmw_oom(&op->err);
		return send_keys(w, &op->err) ? -1 : (int)w->out;
	}
	if (w->have) {
		/* a hint is checked (and used) by the scan, as a find's */
		if (!op->hint && mql_match_is_id_eq(op->q, &id)) {
			if (add_key(w, id, &op->err))
				return -1;
		} else if (collect(w, op, k != MDOOR_W_FAM && op->multi,
				   &op->err)) {
			return -1;
		}
	}
	w->ideq = id;
	if (w->paused)
		return 1;
	return stmt_send(w, op);
}

/* The statement's keys found: its operand built, its merges sent (as
 * start_stmt returns). */
static int stmt_send(struct dmw *w, struct mdoor_wop *op)
{
	enum mdoor_wkind k = w->b->kind;
	const bson_value_t *id = w->ideq;
	const uint8_t *qb;
	uint32_t ql;
	unsigned fl = 0;

	w->sent_stmt = true;
	if (op->upsert && !op->remove) {
		fl |= KVDOC_UPSERT;
		w->upid = id ? id : id_eq(op->q) ? id_eq(op->q) : op->new_id;
		if (!w->keys.len && add_key(w, w->upid, &op->err))
			return -1;
	}
	if (!w->keys.len)
		return 0;
	if (k == MDOOR_W_FAM)
		fl |= op->return_new ? KVDOC_RET_NEW : KVDOC_RET_OLD;
	/* A filter that is only {_id: v} holds for the document under v's
	 * key whatever it is (the key is _id's, compared as MongoDB
	 * compares _ids): the committer would compile and check it for
	 * nothing.  An upsert's filter stays, as its document's seed. */
	qb = id && !(fl & KVDOC_UPSERT) ? NULL : op->q_bson;
	ql = qb ? op->q_len : 0;
	if (k == MDOOR_W_DELETE || (k == MDOOR_W_FAM && op->remove)) {
		w->mid = KVDOC_OP_DELETE;
		if (kvdoc_op_delete(&w->opnd, fl & KVDOC_RET_OLD, qb, ql))
			return dmw_oom(&op->err);
	} else {
		w->mid = KVDOC_OP_UPDATE;
		if (kvdoc_op_update(&w->opnd, fl, op->u_bson, op->u_len, qb, ql,
				    (fl & KVDOC_UPSERT) ? w->upid : NULL))
			return dmw_oom(&op->err);
	}
	return send_keys(w, &op->err) ? -1 : (int)w->out;
}

/* ---- the catalog's changes ---- */

static int send_catalog(struct dmw *w, unsigned op, unsigned flags)
{
	w->opnd.len = 0;
	if (kvdoc_op_catalog(&w->opnd, op, flags, w->b->db,
			     op == KVDOC_CAT_DROPDB ? NULL : w->b->coll,
			     w->b->options, w->b->options_len))
		return -1;
	return dmw_send_merge(
	    w, KVD_KS_CATALOG, KVDOC_MERGE_BASE + KVDOC_OP_CATALOG,
	    (const uint8_t *)KVDOC_CATALOG_KEY, strlen(KVDOC_CATALOG_KEY),
	    w->opnd.data, w->opnd.len);
}

static void catalog_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;

	if (b->kind == MDOOR_W_CREATE && pd->status == KV_EXISTS)
		mql_error_set(&b->err, 48, "Collection %s.%s already exists.",
			      b->db, b->coll);
	else if (b->kind == MDOOR_W_DROP && pd->status == KV_NOT_FOUND)
		mql_error_set(&b->err, 26, "ns not found");
	else if (pd->status != KV_OK)
		mql_error_set(&b->err, MQL_InternalError,
			      "catalog change failed (%d)", pd->status);
}

/* Does the batch insert (so needs its collection)? */
static bool inserts(const struct mdoor_wbatch *b)
{
	if (b->kind == MDOOR_W_INSERT)
		return b->nops > 0;
	for (size_t i = 0; i < b->nops; i++)
		if (b->ops[i].upsert && !b->ops[i].remove)
			return true;
	return false;
}

/* Statement op is over: the next (an ordered batch stops at its first
 * error). */
static void stmt_end(struct dmw *w, struct mdoor_wop *op)
{
	if (w->scan) {
		doc_mdoor_scan_close(w->scan);
		w->scan = NULL;
	}
	op->ran = true;
	if (op->err.code && w->b->ordered)
		w->i = w->b->nops;
	else
		w->i++;
	step(w);
}

/* A multi-document statement's next batch once the last came back
 * (MongoDB's multi-updates stop at their first error too), or its end. */
static void next_batch(struct dmw *w, struct mdoor_wop *op)
{
	if (w->scan && !op->err.code && w->kpos == w->keys.len) {
		if (more_keys(w, &op->err) == 0 && w->paused)
			return; /* doc_mdoor_write_again goes on */
		if (!op->err.code && w->keys.len &&
		    send_keys(w, &op->err) == 0 && w->out)
			return;
	}
	stmt_end(w, op);
}

/* Run the batch on until it waits for merges, or it is done. */
static void step(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;
	int n;

	if (!w->have) {
		int r = doc_mdoor_coll_id(b->db, b->coll, &w->cid);

		if (r < 0) {
			mql_error_set(&b->err, MQL_InternalError, "catalog");
			goto done;
		}
		w->have = r;
		if (!r && inserts(b) && !w->creating) {
			w->creating = 1;
			if (send_catalog(w, KVDOC_CAT_CREATE, 0)) {
				mql_error_set(&b->err, MQL_InternalError,
					      "out of memory");
				goto done;
			}
			return;
		}
	}
	if (dmw_pipe_ok(w)) {
		w->pipe = true;
		w->uq.h.each = true; /* each document its own statement */
		w->next = w->i;
		w->stop = b->nops;
		dmw_pipe_fill(w);
		if (!w->out)
			dmw_pipe_end(w);
		return; /* otherwise pipe_result goes on */
	}
	for (; w->i < b->nops; w->i++) {
		struct mdoor_wop *op = &b->ops[w->i];

		n = start_stmt(w, op);
		if (n > 0)
			return; /* doc_mdoor_result goes on */
		op->ran = true;
		if (op->err.code && b->ordered) {
			w->i = b->nops;
			break;
		}
	}
done:
	dmw_finish(w);
}

void doc_mdoor_result(struct kvd_conn *c, const struct kvd_pend *pd)
{
	struct dmw *w = c->mwrite;
	struct mdoor_wop *op;

	if (!w)
		return;
	if (doc_ix_kind(w->b)) { /* an index command's (doc_mdoor_ix.c) */
		doc_ix_result(c, pd);
		return;
	}
	if (w->pipe) {
		dmw_pipe_result(w, pd);
		return;
	}
	w->out--;
	if (b_is_catalog(w->b->kind)) {
		catalog_result(w, pd);
		dmw_finish(w);
		return;
	}
	if (w->creating == 1) {
		w->creating = 2; /* once: a collection dropped meanwhile */
		if (pd->status != KV_OK && pd->status != KV_EXISTS) {
			mql_error_set(&w->b->err, MQL_InternalError,
				      "creating the collection failed");
			dmw_finish(w);
			return;
		}
		step(w);
		return;
	}
	op = &w->b->ops[w->i];
	if (pd->aux)
		doc_uq_result(&w->uq, pd);
	else if (!doc_uq_back(&w->uq, pd))
		dmw_stmt_result(w, op, pd);
	if (send_keys(w, &op->err) == 0 && w->out)
		return;
	if (w->out)
		return;
	/* documents whose merge asked for reservations, keys let go */
	doc_uq_stmt(&w->uq, w->cid, w->mid, &w->opnd);
	if (doc_uq_step(&w->uq) < 0 && !op->err.code)
		dmw_oom(&op->err);
	if (w->out)
		return;
	next_batch(w, op);
}

bool doc_mdoor_write_paused(const struct kvd_conn *c)
{
	const struct dmw *w = c->mwrite;

	return w && !w->pipe && !doc_ix_kind(w->b) && w->paused;
}

void doc_mdoor_write_again(struct kvd_conn *c)
{
	struct dmw *w = c->mwrite;
	struct mdoor_wop *op;
	int n;

	if (!doc_mdoor_write_paused(c))
		return;
	w->paused = false;
	op = &w->b->ops[w->i];
	if (w->sent_stmt) { /* a later batch of a multi-document one */
		next_batch(w, op);
		return;
	}
	n = look(w, op, &op->err);
	if (n == 0 && w->paused)
		return;
	if (n == 0 && (n = stmt_send(w, op)) > 0)
		return; /* doc_mdoor_result goes on */
	stmt_end(w, op);
}

void doc_mdoor_abandon(struct kvd_conn *c)
{
	struct dmw *w = c->mwrite;

	if (w && doc_ix_kind(w->b))
		doc_ix_abandon(c);
	else if (w) /* its merges came back unanswered: the connection died */
		dmw_finish(w);
}

/* May this server take writes now?  0, or -1 with b->err: a replica (its
 * primary's writes only) and a read-only server answer as a MongoDB
 * secondary does, 10107 NotWritablePrimary, and min-replicas-to-ack
 * short of good replicas as a write concern that cannot be met. */
static int writable(struct mdoor_wbatch *b)
{
	struct kvd_conn *c = b->conn;
	int rc = kvd_repl_write_ok();
	const char *name = "NotWritablePrimary";

	if (c->io->srv->cfg->read_only)
		mql_error_set(&b->err, 10107,
			      "not primary: the server is read-only");
	else if (rc == KV_REPLICA_READ_ONLY)
		mql_error_set(&b->err, 10107,
			      "not primary: the server is a replica");
	else if (rc) {
		mql_error_set(&b->err, 100,
			      "not enough good replicas to write "
			      "(min-replicas-to-ack)");
		name = "UnsatisfiableWriteConcern";
	} else
		return 0;
	snprintf(b->err.codename, sizeof(b->err.codename), "%s", name);
	return -1;
}

/* The reservations' driver reports to the statement running, or to the
 * batch's statement t under a unique index. */
static void uq_doc_back(void *ctx, size_t t, const struct kvd_pend *pd)
{
	struct dmw *w = ctx;

	if (w->pipe)
		dmw_upipe_done(w, t, pd, NULL, NULL);
	else
		dmw_stmt_result(w, &w->b->ops[w->i], pd);
}

static void uq_fail(void *ctx, size_t t, const struct mql_error *e,
		    const bson_t *info)
{
	struct dmw *w = ctx;
	struct mdoor_wop *op = &w->b->ops[w->i];

	if (w->pipe) {
		dmw_upipe_done(w, t, NULL, e, info);
		return;
	}
	if (op->err.code)
		return;
	op->err = *e;
	/* a batch of the native protocol leaves errinfo zeroed: unused */
	if (op->errinfo.len == 5)
		bson_concat(&op->errinfo, info);
}

static void uq_host(struct dmw *w)
{
	struct doc_uq_host h = {.c = w->c,
				.out = &w->out,
				.ctx = w,
				.doc_back = uq_doc_back,
				.fail = uq_fail,
				.db = w->b->db,
				.coll = w->b->coll};

	doc_uq_init(&w->uq, &h);
}

void doc_mdoor_write(void *ctx, struct mdoor_wbatch *b)
{
	struct kvd_conn *c = b->conn;
	struct dmw *w = NULL;
	unsigned op = KVDOC_CAT_CREATE, fl = KVDOC_EXCL;

	(void)ctx;
	/* index builds and drops are writes too: a replica refuses them */
	if (writable(b)) {
		b->done(b);
		return;
	}
	if (doc_ix_kind(b)) {
		doc_ix_write(b);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		b->done(b);
		return;
	}
	w->b = b;
	w->c = c;
	c->mwrite = w;
	uq_host(w);
	if (!b_is_catalog(b->kind)) {
		step(w);
		return;
	}
	if (b->kind != MDOOR_W_CREATE) {
		op =
		    b->kind == MDOOR_W_DROP ? KVDOC_CAT_DROP : KVDOC_CAT_DROPDB;
		fl = 0;
	}
	if (send_catalog(w, op, fl)) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		dmw_finish(w);
	}
}
