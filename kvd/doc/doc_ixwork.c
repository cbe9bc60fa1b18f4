/* doc_ixwork.c - an index build's pass (doc_ixwork.h).
 *
 * The ranges and a unique index's reservations run side by side: the
 * ranges on the shards' checkpointers, the reservations' pass on the
 * caller's thread and the committers.  No query uses the indexes before
 * the caller's IXREADY, which waits for both, so an entry may be written
 * before its document's key is reserved; the pass is what finds two
 * documents with one key (docs/architecture.md, "Unique indexes",
 * *Builds*).  A failure of either stops what is not sent yet (the ranges
 * after the ones out, the documents the driver has not started), and the
 * caller drops the indexes once nothing is out.
 */
#include <string.h>

#include "doc_ixwork.h"
#include "index.h"
#include "kv_status.h"
#include "kvd.h"

/* Documents the pass left, handed to the driver at a time; and the bytes
 * of them left waiting past which the pass reads no further batch until
 * the driver took them (a collection of many documents with one key
 * fails after a batch or two, holding little, not after a pass that
 * kept them all). */
#define LATER_BATCH 256
#define LATER_MAX (256u << 10)

/* The reservations' pass: reading the collection, then the documents it
 * left, then done. */
enum { PASS_DONE, PASS_READ, PASS_LATER };

static bool failed(const struct doc_ixwork *x)
{
	return x->err.code || x->uqb.err.code || x->bulk.err.code;
}

static void set_err(struct doc_ixwork *x, int code, const char *msg, size_t n)
{
	if (!x->err.code)
		mql_error_set(&x->err, code, "%.*s", (int)(n < 400 ? n : 400),
			      msg);
}

/* ---- the driver's host: the REINDEX of a document the pass left ---- */

static void doc_back(void *ctx, size_t tag, const struct kvd_pend *pd)
{
	struct doc_ixwork *x = ctx;

	(void)tag;
	if (pd->status != KV_OK)
		set_err(x, MQL_InternalError, "a REINDEX failed", 16);
	else if (pd->result < 0)
		set_err(x, (int)-pd->result,
			pd->val ? (const char *)pd->val : "", pd->vlen);
}

static void doc_fail(void *ctx, size_t tag, const struct mql_error *e,
		     const bson_t *info)
{
	struct doc_ixwork *x = ctx;

	(void)tag, (void)info;
	if (!x->err.code)
		x->err = *e;
}

/* ---- the caller's send, as the ranges and the pass ask ---- */

static int bulk_send(void *arg, int kind, unsigned ks, unsigned id, unsigned s,
		     struct kv_slice k, struct kv_slice v, int64_t max,
		     uint32_t aux)
{
	struct doc_ixwork *x = arg;

	return x->send(x->arg, kind, ks, id, (int)s, k, v, max, aux);
}

/* The pass's merges, and the driver's (its ctx is x too). */
static int merge_send(void *arg, unsigned ks, unsigned id, struct kv_slice k,
		      struct kv_slice v, uint32_t aux)
{
	struct doc_ixwork *x = arg;

	return x->send(x->arg, KVD_W_MERGE, ks, id, -1, k, v, 0, aux);
}

/* ---- the pass ---- */

/* The section naming every index built into x->opnd: 0, or -1. */
static int section(struct doc_ixwork *x)
{
	const struct kvdoc_catalog *c = doc_uq_catalog(&x->uq);

	x->opnd.len = 0;
	if (!c || kvdoc_ix_section_of(
		      c, x->cid, (struct kv_slice){x->ids.data, x->ids.len},
		      &x->opnd)) {
		set_err(x, MQL_InternalError, "reading the catalog failed", 26);
		return -1;
	}
	return 0;
}

/* The documents the pass left (doc_uqbulk_later), a batch at a time
 * through the driver whenever it is idle, each reserving its keys and
 * then sending its REINDEX holding them: 1 while some are left or under
 * way, 0 once all are done, -1 failed. */
static int later_step(struct doc_ixwork *x)
{
	struct kv_slice dk, doc;
	int rc;

	while (!(rc = doc_uq_step(&x->uq))) {
		unsigned n = 0;

		if (!doc_uqbulk_later(&x->uqb, &dk))
			return 0;
		if (section(x))
			return -1;
		doc_uq_stmt(&x->uq, x->cid, KVDOC_OP_REINDEX, &x->opnd);
		do {
			rc = kvdoc_get(doc_uq_reader(&x->uq), x->uq.h.nshards,
				       dk.p, dk.n, kvd_now_ms(), &doc);
			if (rc == KV_NOT_FOUND) /* deleted since */
				continue;
			if (rc != KV_OK ||
			    doc_uq_push_image(&x->uq, dk, doc) < 0) {
				set_err(x, MQL_InternalError,
					"reading documents failed", 24);
				return -1;
			}
		} while (++n < LATER_BATCH && doc_uqbulk_later(&x->uqb, &dk));
	}
	if (rc < 0)
		set_err(x, MQL_InternalError, "out of memory", 13);
	return rc;
}

/* Go on: the documents the pass left go to the driver whenever it is
 * idle, the pass's next batch once the last is back (and few wait for
 * the driver); once the pass read the collection, the documents it
 * left; a failure stops what is not sent yet. */
static void work(struct doc_ixwork *x)
{
	if (!failed(x) && x->pass == PASS_READ) {
		later_step(x);
		if (!failed(x) && !x->uqb.out &&
		    doc_uqbulk_waiting(&x->uqb) < LATER_MAX &&
		    !doc_uqbulk_step(&x->uqb, doc_uq_reader(&x->uq),
				     kvd_now_ms()))
			x->pass = PASS_LATER;
	}
	if (!failed(x) && x->pass == PASS_LATER && !later_step(x))
		x->pass = PASS_DONE;
	if (!failed(x))
		return;
	if (!x->err.code)
		x->err = x->uqb.err.code ? x->uqb.err : x->bulk.err;
	if (!x->bulk.err.code) /* no range after the ones out */
		x->bulk.err = x->err;
	doc_uq_cancel(&x->uq);
}

int doc_ixwork_start(struct doc_ixwork *x, const struct doc_uq_host *h,
		     uint32_t cid, struct kv_slice ids, unsigned nshards)
{
	struct doc_uq_host hh = *h;
	struct kv_slice sec;
	bool uq;

	hh.ctx = x;
	hh.doc_back = doc_back;
	hh.fail = doc_fail;
	hh.each = false;
	hh.send = merge_send;
	hh.out = NULL; /* the caller counts what x->send sent */
	hh.nshards = nshards;
	doc_uq_init(&x->uq, &hh);
	x->cid = cid;
	x->pass = PASS_DONE;
	x->ids.len = x->plain.len = 0;
	if (kv_buf_append(&x->ids, ids.p, ids.n)) {
		set_err(x, MQL_InternalError, "out of memory", 13);
		return -1;
	}
	if (section(x))
		return -1;
	sec = (struct kv_slice){x->opnd.data, x->opnd.len};
	uq = kvdoc_ix_has_unique(sec);
	x->uqb.send = merge_send;
	x->uqb.arg = x;
	x->bulk.send = bulk_send;
	x->bulk.arg = x;
	if (kvdoc_ix_without_unique(sec, &x->plain) ||
	    (uq && doc_uqbulk_start(&x->uqb, cid, sec))) {
		set_err(x, MQL_InternalError, "out of memory", 13);
		return -1;
	}
	x->pass = uq ? PASS_READ : PASS_DONE;
	if (doc_bulk_start(&x->bulk, cid,
			   (struct kv_slice){x->plain.data, x->plain.len},
			   nshards) &&
	    !x->bulk.err.code)
		mql_error_set(&x->bulk.err, MQL_InternalError, "out of memory");
	work(x);
	return failed(x) ? -1 : 0;
}

void doc_ixwork_back(struct doc_ixwork *x, const struct kvd_pend *pd)
{
	if (pd->aux & DOC_BULK_AUX)
		doc_bulk_back(&x->bulk, pd);
	else if (pd->aux & DOC_UQBULK_AUX)
		doc_uqbulk_back(&x->uqb, pd);
	else if (pd->aux)
		doc_uq_result(&x->uq, pd);
	else if (!doc_uq_back(&x->uq, pd))
		doc_back(x, 0, pd);
	work(x);
}

bool doc_ixwork_done(const struct doc_ixwork *x)
{
	return !failed(x) && x->pass == PASS_DONE && !x->bulk.left;
}

void doc_ixwork_free(struct doc_ixwork *x)
{
	doc_uq_free(&x->uq);
	doc_uqbulk_free(&x->uqb);
	doc_bulk_free(&x->bulk);
	kv_buf_free(&x->ids);
	kv_buf_free(&x->opnd);
	kv_buf_free(&x->plain);
}
