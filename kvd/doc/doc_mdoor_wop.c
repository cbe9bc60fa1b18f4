/* doc_mdoor_wop.c - what every write of the MongoDB door's does with one
 * statement's merges (doc_mdoor_int.h): send one, give back the batch once
 * done, and read a merge's result into its statement's; the writes'
 * steps (doc_mdoor_write.c) and the insert batches sent ahead
 * (doc_mdoor_pipe.c) both use it. */
#include <stdio.h>
#include <stdlib.h>

#include "doc.h"
#include "doc_mdoor_int.h"
#include "doc_uq.h"
#include "kv_status.h"
#include "mongo/mql_value.h"
#include "net/conn.h"
#include "net/write.h"

int dmw_oom(struct mql_error *e)
{
	return mql_error_set(e, MQL_InternalError, "out of memory");
}

void dmw_finish(struct dmw *w)
{
	struct mdoor_wbatch *b = w->b;

	w->c->mwrite = NULL;
	if (w->scan)
		doc_mdoor_scan_close(w->scan);
	doc_uq_free(&w->uq);
	kv_buf_free(&w->keys);
	kv_buf_free(&w->best);
	kv_buf_free(&w->opnd);
	kv_buf_free(&w->sect);
	free(w);
	b->done(b);
}

int dmw_send_merge(struct dmw *w, unsigned ks, unsigned id, const uint8_t *k,
		   size_t kn, const uint8_t *v, size_t vn)
{
	int shard = ks == KVD_KS_CATALOG ? 0 : -1;

	if (kvd_write_merge(w->c, 0, ks, id, shard, (struct kv_slice){k, kn},
			    (struct kv_slice){v, vn}, 0))
		return -1;
	w->out++;
	return 0;
}

int dmw_doc_id(const uint8_t *p, uint32_t n, bson_iter_t *it)
{
	return bson_iter_init_from_data(it, p, n) && bson_iter_find(it, "_id")
		   ? 0
		   : -1;
}

static void dup_error(struct dmw *w, struct mdoor_wop *op)
{
	bson_iter_t it;
	char v[128] = "?";

	if (!dmw_doc_id(op->doc, op->len, &it))
		mql_value_str(bson_iter_value(&it), v, sizeof(v));
	mql_error_set(&op->err, 11000,
		      "E11000 duplicate key error collection: %s.%s index: "
		      "_id_ dup key: { _id: %s }",
		      w->b->db, w->b->coll, v);
}

/* One merge of statement op came back. */
void dmw_stmt_result(struct dmw *w, struct mdoor_wop *op,
		     const struct kvd_pend *pd)
{
	if (pd->status == KV_EXISTS && w->mid == KVDOC_OP_INSERT) {
		dup_error(w, op);
		return;
	}
	if (pd->status != KV_OK && pd->status != KV_NOT_FOUND) {
		mql_error_set(&op->err, MQL_InternalError, "write failed (%d)",
			      pd->status);
		return;
	}
	if (pd->result < 0) {
		mql_error_set(&op->err, (int)-pd->result, "%.*s",
			      (int)(pd->vlen < 400 ? pd->vlen : 400),
			      pd->val ? (const char *)pd->val : "");
		return;
	}
	if (pd->result == KVDOC_R_UPSERTED && w->mid == KVDOC_OP_UPDATE) {
		if (w->upid)
			bson_append_value(&op->upserted, "_id", 3, w->upid);
	} else if (w->mid != KVDOC_OP_UPDATE) {
		op->n += pd->result > 0;
	} else if (pd->result >= KVDOC_R_MATCHED) {
		op->n++;
		op->nmodified += pd->result == KVDOC_R_MODIFIED;
	}
	if (w->b->kind == MDOOR_W_FAM && pd->val && doc_uq_len(pd) >= 5) {
		bson_t v;

		if (bson_init_static(&v, pd->val, doc_uq_len(pd))) {
			bson_reinit(&op->value);
			bson_concat(&op->value, &v);
		}
	}
}
