/* doc_mdoor_pipe.c - the MongoDB door's insert batches sent ahead of
 * their results (doc_mdoor_int.h): up to a window of documents in flight,
 * through the reservations' driver under a unique index. */
#include <stdlib.h>
#include <string.h>

#include "doc.h"
#include "doc_ix.h"
#include "doc_mdoor_int.h"
#include "doc_uq.h"
#include "index.h"
#include "kv_status.h"
#include "net/loop.h"
#include "net/router.h"
#include "unique.h"

/* ---- insert batches sent ahead ----
 *
 * A batch of inserts does not wait for each document's merge (and, in
 * sync mode, its flush) before sending the next: up to WINDOW documents
 * (PIPE_BYTES of them) are in flight at once, so the shards' committers
 * take them in a few batches and flushes rather than one each; their
 * results come back in the order sent.  Unordered, that is all.  Ordered,
 * MongoDB runs nothing after the first failure, so a document is sent
 * ahead only if no earlier one can fail on its _id: one whose key is in
 * the store or among those in flight waits until those came back and
 * goes alone (nothing after it is sent before its result).  A failure
 * that the check could not foresee (a concurrent insert of the same _id,
 * an index key refused, a write error) can still find later documents
 * inserted: they are deleted again (a delete merge of that _id, after the
 * insert on the same committer) and reported as not run, as MongoDB
 * would.  A collection with a unique
 * index sends its documents through the reservations' driver (below,
 * "under a unique index"). */
#define PIPE_BYTES (16u << 20)

bool dmw_pipe_ok(struct dmw *w)
{
	const struct mdoor_wbatch *b = w->b;

	if (b->kind != MDOOR_W_INSERT || b->nops - w->i < 2 || !w->have)
		return false;
	w->sect.len = 0;
	if (kvdoc_ix_section(doc_mdoor_catalog(), w->cid, 0, &w->sect))
		return false; /* out of memory: the plain path reports it */
	w->unique =
	    kvdoc_ix_has_unique((struct kv_slice){w->sect.data, w->sect.len});
	return true;
}

/* Could ordered statement op fail on its _id (key k): is it among the
 * keys in flight, or in the store?  Such a document goes alone: sent once
 * nothing is in flight, and nothing after it before its result. */
static bool pipe_risky(struct dmw *w, const uint8_t *k, size_t kn)
{
	struct kv_slice doc;

	for (size_t p = w->kfront; p < w->keys.len;) { /* those in flight */
		const uint8_t *q = w->keys.data + p;

		if (q[0] == kn && !memcmp(q + 1, k, kn))
			return true;
		p += 1u + q[0];
	}
	return kvdoc_get(doc_mdoor_io()->reader, doc_mdoor_io()->srv->nshards,
			 k, kn, doc_mdoor_io()->now_ms, &doc) != KV_NOT_FOUND;
}

static int upipe_fill(struct dmw *w);

/* The keys of those in flight are w->keys from kfront: emptied when none
 * is, and those back dropped from the front now and then, so that the
 * keys kept are about those in flight. */
static void keys_trim(struct dmw *w, bool none)
{
	if (none) {
		w->keys.len = w->kfront = 0;
	} else if (w->kfront > w->keys.len / 2) {
		memmove(w->keys.data, w->keys.data + w->kfront,
			w->keys.len - w->kfront);
		w->keys.len -= w->kfront;
		w->kfront = 0;
	}
}

/* Send the batch's next documents, up to the window: 0, or -1 (out of
 * memory, in b->err). */
int dmw_pipe_fill(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	if (w->unique)
		return upipe_fill(w);
	keys_trim(w, !w->out);
	while (w->next < w->stop && w->next < b->nops && w->out < WINDOW &&
	       (!w->out || w->bytes < PIPE_BYTES)) {
		struct mdoor_wop *op = &b->ops[w->next];
		uint8_t k[KVDOC_KEY_MAX], n;
		size_t kn;
		bson_iter_t it;
		bool alone;

		if (dmw_doc_id(op->doc, op->len, &it) ||
		    kvdoc_key(w->cid, bson_iter_value(&it), k, &kn, &op->err)) {
			if (!op->err.code)
				mql_error_set(&op->err, MQL_BadValue, "no _id");
			op->ran = true; /* pipe_result steps over it */
			if (b->ordered)
				w->stop = w->next;
			w->next++;
			continue;
		}
		alone = b->ordered && pipe_risky(w, k, kn);
		if (alone && w->out)
			break;
		n = (uint8_t)kn;
		w->opnd.len = 0;
		if (kv_buf_append(&w->opnd, w->sect.data, w->sect.len) ||
		    kv_buf_append(&w->opnd, op->doc, op->len) ||
		    kv_buf_append(&w->keys, &n, 1) ||
		    kv_buf_append(&w->keys, k, kn) ||
		    dmw_send_merge(w, KVD_KS_DOC,
				   KVDOC_MERGE_BASE + KVDOC_OP_INSERT, k, kn,
				   w->opnd.data, w->opnd.len))
			return dmw_oom(&b->err);
		w->bytes += op->len;
		w->next++;
		if (alone)
			break;
	}
	return 0;
}

/* Delete again the document an ordered batch inserted past its failure. */
static int pipe_undo(struct dmw *w, const struct mdoor_wop *op)
{
	uint8_t k[KVDOC_KEY_MAX];
	size_t kn;
	bson_iter_t it;
	bson_t f;
	struct mql_error e;
	int rc = -1;

	mql_error_clear(&e);
	if (dmw_doc_id(op->doc, op->len, &it) ||
	    kvdoc_key(w->cid, bson_iter_value(&it), k, &kn, &e))
		return -1;
	bson_init(&f);
	w->opnd.len = 0;
	if (bson_append_value(&f, "_id", 3, bson_iter_value(&it)) &&
	    !kv_buf_append(&w->opnd, w->sect.data, w->sect.len) &&
	    !kvdoc_op_delete(&w->opnd, 0, bson_get_data(&f), f.len) &&
	    !dmw_send_merge(w, KVD_KS_DOC, KVDOC_MERGE_BASE + KVDOC_OP_DELETE,
			    k, kn, w->opnd.data, w->opnd.len)) {
		w->undo++;
		rc = 0;
	}
	bson_destroy(&f);
	return rc;
}

/* Every merge came back: past an ordered batch's failure nothing ran. */
void dmw_pipe_end(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	for (size_t i = w->stop + 1; b->ordered && i < b->nops; i++) {
		b->ops[i].ran = false; /* never sent, or undone */
		b->ops[i].n = 0;
		mql_error_clear(&b->ops[i].err);
	}
	dmw_finish(w);
}

/* One merge of a pipelined batch came back (in the order sent). */
static void plain_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;
	struct mdoor_wop *op;

	/* once one is undone no insert is sent, and results come back in
	 * the order sent: with only undos in flight, this is one */
	if (w->out-- == w->undo) {
		w->undo--;
		goto next;
	}
	while (b->ops[w->i].ran) /* failed before it was sent */
		w->i++;
	op = &b->ops[w->i++];
	w->bytes -= op->len;
	w->kfront += 1u + w->keys.data[w->kfront]; /* its key, sent first */
	w->mid = KVDOC_OP_INSERT;
	dmw_stmt_result(w, op, pd);
	op->ran = true;
	if (b->ordered && w->i - 1 < w->stop && op->err.code)
		w->stop = w->i - 1;
	else if (b->ordered && w->i - 1 > w->stop) {
		bool inserted = !op->err.code;

		op->ran = false; /* past the failure: not run, as MongoDB's */
		op->n = 0;
		mql_error_clear(&op->err);
		if (inserted && pipe_undo(w, op) && !b->err.code)
			dmw_oom(&b->err);
	}
next:
	if (!b->err.code && dmw_pipe_fill(w) == 0 && w->out)
		return;
	if (!w->out)
		dmw_pipe_end(w);
}

/* ---- insert batches under a unique index ----
 *
 * The same window, each document through the reservations' driver
 * (doc_uq.h), which takes its keys and then sends its merge, up to
 * DOC_UQ_SLOTS documents at once and each on its own, so their results
 * come back in any order (the driver gives back each one's statement
 * index).  The window is the statements from the first not done (w->i)
 * to the next to send (w->next); w->keys holds a record of each, its
 * _id key and unique key list as a block of doc_uq.h (an empty key: it
 * failed before it was sent).  A document whose _id or unique key is one
 * of the window's waits until the window drained, so that the first in
 * the batch gets it, as in mongod.  Ordered, one whose _id or
 * reservation is in the store already (it may fail) goes alone, as
 * above; a failure the check could not foresee undoes the documents
 * after it that were inserted. */

/* Has a document of the window the _id k or a key of want? */
static bool up_clash(const struct dmw *w, struct kv_slice k,
		     struct kv_slice want)
{
	struct kv_slice rk, rl, x, wk;
	uint32_t id;

	for (size_t p = w->kfront; doc_uq_block_next(&w->keys, &p, &rk, &rl);) {
		if (rk.n == k.n && !memcmp(rk.p, k.p, k.n))
			return true;
		for (x = want; kvdoc_keylist_next(&x, &id, &wk);)
			if (kvdoc_keylist_has(rl, id, wk))
				return true;
	}
	return false;
}

/* Is the _id k, or a reservation of want, in the store? */
static bool up_in_store(struct kv_slice k, struct kv_slice want)
{
	struct kvd_reader *rd = doc_mdoor_io()->reader;
	unsigned ns = doc_mdoor_io()->srv->nshards, type;
	uint8_t rk[KVDOC_UQ_KEY_MAX];
	struct kv_slice v, wk;
	uint32_t id;
	size_t rn;

	if (kvdoc_get(rd, ns, k.p, k.n, doc_mdoor_io()->now_ms, &v) !=
	    KV_NOT_FOUND)
		return true;
	while (kvdoc_keylist_next(&want, &id, &wk)) {
		rn = kvdoc_uq_key(id, wk.p, wk.n, rk);
		if (kvd_reader_getk(rd, kvd_shard_of(rk, rn, ns), KVD_KS_INDEX,
				    rk, rn, doc_mdoor_io()->now_ms, &v,
				    &type) != KV_NOT_FOUND)
			return true;
	}
	return false;
}

/* Statement op's _id key in k (KVDOC_KEY_MAX) and unique keys in want:
 * 0, or -1 with op->err. */
static int up_keys(struct dmw *w, struct mdoor_wop *op, uint8_t *k, size_t *kn,
		   struct kv_buf *want)
{
	bson_iter_t it;

	want->len = 0;
	if (dmw_doc_id(op->doc, op->len, &it) ||
	    kvdoc_key(w->cid, bson_iter_value(&it), k, kn, &op->err))
		return op->err.code
			   ? -1
			   : mql_error_set(&op->err, MQL_BadValue, "no _id");
	if (!doc_uq_keys((struct kv_slice){w->sect.data, w->sect.len}, op->doc,
			 op->len, want, &op->err))
		return 0;
	return op->err.code ? -1 : dmw_oom(&op->err);
}

static int upipe_fill(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;
	struct kv_buf want = {0};
	int rc = 0;

	keys_trim(w, w->i == w->next);
	doc_uq_stmt(&w->uq, w->cid, KVDOC_OP_INSERT, &w->sect);
	while (!rc && w->next < w->stop && w->next < b->nops &&
	       w->next - w->i < WINDOW &&
	       (w->i == w->next || w->bytes < PIPE_BYTES)) {
		struct mdoor_wop *op = &b->ops[w->next];
		uint8_t k[KVDOC_KEY_MAX];
		size_t kn = 0;
		struct kv_slice ks, wl;
		bool alone;

		if (up_keys(w, op, k, &kn, &want)) {
			op->ran = true; /* done: failed before it was sent */
			if (b->ordered)
				w->stop = w->next;
			w->next++;
			rc = doc_uq_block_put(&w->keys, k, 0,
					      (struct kv_slice){0});
			continue;
		}
		ks = (struct kv_slice){k, kn};
		wl = (struct kv_slice){want.data, want.len};
		/* one that may fail goes alone, as above */
		alone = b->ordered && up_in_store(ks, wl);
		if (w->i < w->next && (alone || up_clash(w, ks, wl)))
			break;
		rc = doc_uq_block_put(&w->keys, k, kn, wl) ||
		     doc_uq_push(&w->uq, k, kn, wl, w->next,
				 (struct kv_slice){op->doc, op->len});
		w->bytes += op->len;
		w->next++;
		if (alone)
			break;
	}
	rc = rc || want.err;
	kv_buf_free(&want);
	if (rc || doc_uq_step(&w->uq) < 0)
		return dmw_oom(&b->err);
	return 0;
}

/* Statement t is done (pd its merge's result, or e its failure). */
void dmw_upipe_done(struct dmw *w, size_t t, const struct kvd_pend *pd,
		    const struct mql_error *e, const bson_t *info)
{
	struct mdoor_wbatch *b = w->b;
	struct mdoor_wop *op = &b->ops[t];
	struct kv_slice rk, rl;

	w->bytes -= op->len;
	w->mid = KVDOC_OP_INSERT;
	if (pd) {
		dmw_stmt_result(w, op, pd);
	} else if (!op->err.code) {
		op->err = *e;
		if (op->errinfo.len == 5)
			bson_concat(&op->errinfo, info);
	}
	op->ran = true;
	if (b->ordered && op->err.code && t < w->stop) {
		/* the first failure: nothing after it runs, and what after
		 * it was inserted already is deleted again */
		w->stop = t;
		doc_uq_cancel(&w->uq);
		for (size_t j = t + 1; j < w->next; j++)
			if (b->ops[j].ran && !b->ops[j].err.code &&
			    b->ops[j].n && !pipe_undo(w, &b->ops[j]))
				b->ops[j].n = 0;
	} else if (b->ordered && t > w->stop && !op->err.code && op->n &&
		   !pipe_undo(w, op)) {
		op->n = 0;
	}
	while (w->i < w->next && b->ops[w->i].ran) {
		doc_uq_block_next(&w->keys, &w->kfront, &rk, &rl);
		w->i++;
	}
}

/* One merge of a batch under a unique index came back. */
static void upipe_result(struct dmw *w, const struct kvd_pend *pd)
{
	struct mdoor_wbatch *b = w->b;

	w->out--;
	if (pd->aux) {
		doc_uq_result(&w->uq, pd);
	} else { /* an undo's delete: the keys it let go are released */
		w->undo--;
		doc_uq_back(&w->uq, pd);
	}
	if (!b->err.code && w->next < b->nops && w->next < w->stop)
		upipe_fill(w);
	if (!w->out && doc_uq_step(&w->uq) < 0 && !b->err.code)
		dmw_oom(&b->err);
	if (!w->out)
		dmw_pipe_end(w);
}

void dmw_pipe_result(struct dmw *w, const struct kvd_pend *pd)
{
	if (w->unique)
		upipe_result(w, pd);
	else
		plain_result(w, pd);
}
