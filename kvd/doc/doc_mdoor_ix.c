/* doc_mdoor_ix.c - createIndexes, dropIndexes and listIndexes over kvd's
 * documents (doc_ix.h).
 *
 * createIndexes adds each index asked for to the catalog (IXADD on shard
 * 0's committer, which checks it against the collection's others:
 * MongoDB's 85 and 86), in state BUILDING, so that from then on every
 * write of the collection keeps its entries; then builds all those it
 * added in one pass over the collection, whose operand names every index
 * being built (doc_ixwork.h): ranges of bulk merges (doc_bulk.h), each
 * shard's checkpointer reading up to 262,144 documents from LMDB at once
 * and putting their entries there sorted, and beside them, with a unique
 * index among them, every document's unique keys reserved in bulk
 * (doc_uqbulk.h), the few whose key another write holds through the
 * reservations' driver (doc_uq.h).  Once the ranges and the reservations
 * are done, one IXREADY turns them all READY, and only then the planner
 * may use them.  All or none, as mongod: a spec refused, a document one of
 * them cannot take or a duplicate key of a unique one drops every index
 * the command added, and the command answers that error.  It answers when
 * the build is done, as MongoDB's does; reads and writes of other
 * connections go on meanwhile (a batch or a range holds no lock; a range
 * runs beside its shard's writes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc_ix.h"
#include "doc_ixwork.h"
#include "index.h"
#include "kv_status.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/write.h"

enum { P_ADD, P_FENCE, P_WORK, P_READY, P_DROP, P_FAILDROP };

struct ixw {
	struct mdoor_wbatch *b; /* first, as doc_mdoor.c's (doc_ix_kind) */
	struct kvd_conn *c;
	int phase;
	bson_iter_t specs; /* IXCREATE: options.indexes */
	char name[256];	   /* the index IXADD or IXDROP names */
	uint32_t cid;
	/* the indexes this command builds: [u32 id]... (IXREADY's options
	 * and the REINDEX section's choice), and their names, each ending
	 * in a NUL (for the IXDROPs of a build that fails) */
	struct kv_buf ids, names;
	struct kv_buf opnd; /* a catalog change's */
	unsigned out;
	struct mql_error berr;	/* the build's failure */
	struct doc_ixwork work; /* the build's pass */
};

bool doc_ix_kind(const struct mdoor_wbatch *b)
{
	return b->kind == MDOOR_W_IXCREATE || b->kind == MDOOR_W_IXDROP;
}

static int count_one(void *arg, const struct kvdoc_ix *ix)
{
	(void)ix;
	++*(int64_t *)arg;
	return 0;
}

/* The collection's indexes with _id_ (0: no collection). */
static int64_t n_indexes(const struct mdoor_wbatch *b, uint32_t *cid)
{
	const struct kvdoc_catalog *c = doc_mdoor_catalog();
	int64_t n = 1;
	uint32_t id = 0;

	if (!c || !kvdoc_catalog_find(c, b->db, b->coll, &id, NULL))
		return 0;
	kvdoc_catalog_indexes(c, id, count_one, &n);
	if (cid)
		*cid = id;
	return n;
}

static void finish(struct ixw *w)
{
	struct mdoor_wbatch *b = w->b;

	if (!b->err.code)
		b->ix_after = n_indexes(b, NULL);
	w->c->mwrite = NULL;
	doc_ixwork_free(&w->work);
	kv_buf_free(&w->ids);
	kv_buf_free(&w->names);
	kv_buf_free(&w->opnd);
	bson_free(w);
	b->done(b);
}

static void fail(struct ixw *w, int code, const char *msg)
{
	if (!w->b->err.code)
		mql_error_set(&w->b->err, code, "%s", msg);
	finish(w);
}

static int send_to(struct ixw *w, int shard, unsigned ks, unsigned op,
		   struct kv_slice k, struct kv_slice v)
{
	if (kvd_write_merge(w->c, 0, ks, KVDOC_MERGE_BASE + op, shard, k, v, 0))
		return -1;
	w->out++;
	return 0;
}

static int send(struct ixw *w, unsigned ks, unsigned op, struct kv_slice k,
		struct kv_slice v)
{
	return send_to(w, ks == KVD_KS_CATALOG ? 0 : -1, ks, op, k, v);
}

/* A catalog change of b's collection: 0, or -1. */
static int send_catalog(struct ixw *w, unsigned op, const void *o, size_t on)
{
	w->opnd.len = 0;
	if (kvdoc_op_catalog(&w->opnd, op, 0, w->b->db, w->b->coll, o,
			     (uint32_t)on))
		return -1;
	return send(w, KVD_KS_CATALOG, KVDOC_OP_CATALOG,
		    (struct kv_slice){(const uint8_t *)KVDOC_CATALOG_KEY,
				      sizeof(KVDOC_CATALOG_KEY) - 1},
		    (struct kv_slice){w->opnd.data, w->opnd.len});
}

/* Does this command build index id already (a spec given twice)? */
static bool building(const struct ixw *w, uint32_t id)
{
	return kvdoc_ids_have((struct kv_slice){w->ids.data, w->ids.len}, id);
}

/* Index id (named w->name) is the command's to build: 0, or -1. */
static int take(struct ixw *w, uint32_t id)
{
	uint8_t b[4] = {(uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(id >> 16),
			(uint8_t)(id >> 24)};

	return kv_buf_append(&w->ids, b, 4) ||
		       kv_buf_append(&w->names, w->name, strlen(w->name) + 1)
		   ? -1
		   : 0;
}

static void fence(struct ixw *w);

/* The build failed, or a spec was refused (w->berr): every index the
 * command added is dropped, as mongod leaves none of a createIndexes that
 * fails, and the command answers the error once the drops are back. */
static void drop_all(struct ixw *w)
{
	size_t n;

	w->phase = P_FAILDROP;
	for (size_t p = 0; p < w->names.len; p += n + 1) {
		const char *name = (const char *)w->names.data + p;

		n = strlen(name);
		if (send_catalog(w, KVDOC_CAT_IXDROP, name, n)) {
			if (!w->berr.code)
				mql_error_set(&w->berr, MQL_InternalError,
					      "out of memory");
			break;
		}
	}
	if (!w->out) {
		w->b->err = w->berr;
		finish(w);
	}
}

/* The next index asked for: its IXADD; after the last, the build of
 * those added. */
static void next_spec(struct ixw *w)
{
	const uint8_t *spec;
	uint32_t slen;
	bson_iter_t it;

	w->phase = P_ADD;
	while (bson_iter_next(&w->specs)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&w->specs))
			continue;
		bson_iter_document(&w->specs, &slen, &spec);
		w->name[0] = '\0';
		if (bson_iter_init_from_data(&it, spec, slen) &&
		    bson_iter_find(&it, "name") && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(w->name, sizeof(w->name), "%s",
				 bson_iter_utf8(&it, NULL));
		if (send_catalog(w, KVDOC_CAT_IXADD, spec, slen)) {
			mql_error_set(&w->berr, MQL_InternalError,
				      "out of memory");
			drop_all(w);
		}
		return;
	}
	if (!w->ids.len) { /* all there already */
		finish(w);
		return;
	}
	fence(w);
}

/* The build is done: one IXREADY of every index. */
static void ready(struct ixw *w)
{
	w->phase = P_READY;
	if (send_catalog(w, KVDOC_CAT_IXREADY, w->ids.data, w->ids.len))
		fail(w, MQL_InternalError, "out of memory");
}

static int send_work(void *arg, int kind, unsigned ks, unsigned id, int shard,
		     struct kv_slice k, struct kv_slice v, int64_t max,
		     uint32_t aux)
{
	struct ixw *w = arg;
	int rc = kind == KVD_W_BULK
		     ? kvd_write_bulk(w->c, 0, ks, id, (unsigned)shard, k, v,
				      max, aux)
		     : kvd_write_merge(w->c, 0, ks, id, shard, k, v, aux);

	if (rc)
		return -1;
	w->out++;
	return 0;
}

/* Once nothing of the pass is out: IXREADY, or the drops of every index
 * of the command (MongoDB drops the indexes of a build that failed). */
static void work_end(struct ixw *w)
{
	if (w->out)
		return;
	if (doc_ixwork_done(&w->work)) {
		ready(w);
		return;
	}
	if (!w->berr.code)
		w->berr = w->work.err;
	drop_all(w);
}

/* After the fence: the pass over the collection (doc_ixwork.h), this
 * connection's requests. */
static void build_start(struct ixw *w)
{
	struct kvd_io *io = doc_mdoor_io();

	w->phase = P_WORK;
	w->work.send = send_work;
	w->work.arg = w;
	doc_ixwork_start(
	    &w->work, &(struct doc_uq_host){.db = w->b->db, .coll = w->b->coll},
	    w->cid, (struct kv_slice){w->ids.data, w->ids.len},
	    io->srv->nshards);
	work_end(w);
}

struct state_arg {
	uint32_t id;
	unsigned state;
};

static int state_of(void *arg, const struct kvdoc_ix *ix)
{
	struct state_arg *a = arg;

	if (ix->id != a->id)
		return 0;
	a->state = ix->state;
	return 1;
}

/* That very index is there: built, or left building by a build that
 * stopped (kill -9, a connection gone), which is then built again (a
 * REINDEX of an entry that is there writes the same entry). */
static bool left_building(uint32_t id)
{
	const struct kvdoc_catalog *c = doc_mdoor_catalog();
	struct state_arg a = {id, KVDOC_IX_READY};

	if (c)
		kvdoc_catalog_indexes(c, 0, state_of, &a);
	return a.state == KVDOC_IX_BUILDING;
}

/* Before the build reads the collection, a no-op merge through every
 * shard's committer: once all are back, every batch a committer applied
 * before the last index was added (its writes without the entries of
 * those added last) is published, so the build's scan sees its
 * documents.  One fence serves every index: each write after an IXADD
 * keeps that index. */
static void fence(struct ixw *w)
{
	static const uint8_t none[4] = {0, 0, 0, 0};
	unsigned n = doc_mdoor_io()->srv->nshards;

	w->phase = P_FENCE;
	w->opnd.len = 0;
	if (kvdoc_ix_section(NULL, 0, 0, &w->opnd)) {
		fail(w, MQL_InternalError, "out of memory");
		return;
	}
	for (unsigned i = 0; i < n; i++)
		if (send_to(w, (int)i, KVD_KS_DOC, KVDOC_OP_REINDEX,
			    (struct kv_slice){none, 4},
			    (struct kv_slice){w->opnd.data, w->opnd.len})) {
			fail(w, MQL_InternalError, "out of memory");
			return;
		}
}

static void added(struct ixw *w, const struct kvd_pend *pd)
{
	uint32_t id = (uint32_t)pd->result;

	if (pd->status == KV_EXISTS &&
	    (!left_building(id) || building(w, id))) {
		next_spec(w); /* there, or asked for twice */
		return;
	}
	if (pd->result < 0) { /* 85, 86: the command adds none */
		mql_error_set(&w->berr, (int)-pd->result, "%.*s",
			      (int)(pd->vlen < 400 ? pd->vlen : 400),
			      pd->val ? (const char *)pd->val : "");
		drop_all(w);
		return;
	}
	if ((pd->status != KV_OK && pd->status != KV_EXISTS) ||
	    !n_indexes(w->b, &w->cid)) {
		mql_error_set(&w->berr, MQL_InternalError,
			      "adding the index failed");
		drop_all(w);
		return;
	}
	if (take(w, id)) {
		mql_error_set(&w->berr, MQL_InternalError, "out of memory");
		/* the one just added is dropped with the others */
		drop_all(w);
		return;
	}
	next_spec(w);
}

static void readied(struct ixw *w, const struct kvd_pend *pd)
{
	if (pd->status == KV_OK) {
		finish(w);
		return;
	}
	/* none turned ready; one dropped meanwhile (another client's
	 * dropIndexes) ends the build of them all, as in mongod */
	if (pd->status == KV_NOT_FOUND)
		mql_error_set(&w->berr, MQL_IndexBuildAborted,
			      "Index build aborted: an index of it was "
			      "dropped");
	else
		mql_error_set(&w->berr, MQL_InternalError,
			      "finishing the build failed (%d)", pd->status);
	drop_all(w);
}

void doc_ix_result(struct kvd_conn *c, const struct kvd_pend *pd)
{
	struct ixw *w = c->mwrite;

	w->out--;
	switch (w->phase) {
	case P_ADD: added(w, pd); break;
	case P_FENCE:
		if (!w->out)
			build_start(w);
		break;
	case P_WORK:
		doc_ixwork_back(&w->work, pd);
		work_end(w);
		break;
	case P_READY: readied(w, pd); break;
	case P_FAILDROP:
		if (!w->out) {
			w->b->err = w->berr;
			finish(w);
		}
		break;
	default: /* P_DROP */
		if (pd->status == KV_NOT_FOUND && strcmp(w->name, "*"))
			mql_error_set(&w->b->err, 27,
				      "index not found with name [%s]",
				      w->name);
		else if (pd->status != KV_OK && pd->status != KV_NOT_FOUND)
			mql_error_set(&w->b->err, MQL_InternalError,
				      "dropping the index failed (%d)",
				      pd->status);
		finish(w);
	}
}

void doc_ix_abandon(struct kvd_conn *c)
{
	/* its merges came back unanswered: the connection died (a build
	 * stops there, its indexes left BUILDING: never used, dropped or
	 * built again by the next createIndexes of them or the next start) */
	finish(c->mwrite);
}

void doc_ix_write(struct mdoor_wbatch *b)
{
	/* libbson's types in it ask for 128-byte alignment */
	struct ixw *w = BSON_ALIGNED_ALLOC0(struct ixw);
	bson_iter_t it;
	const char *name = "";

	if (!w) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		b->done(b);
		return;
	}
	w->b = b;
	w->c = b->conn;
	w->c->mwrite = w;
	b->ix_before = n_indexes(b, NULL);
	b->ix_created_coll = b->ix_before == 0;
	if (!b->ix_before)
		b->ix_before = 1;
	if (!bson_iter_init_from_data(&it, b->options, b->options_len)) {
		fail(w, MQL_InternalError, "bad options");
		return;
	}
	if (b->kind == MDOOR_W_IXCREATE) {
		if (!bson_iter_find(&it, "indexes") ||
		    !bson_iter_recurse(&it, &w->specs)) {
			fail(w, MQL_InternalError, "bad options");
			return;
		}
		next_spec(w);
		return;
	}
	if (bson_iter_find(&it, "index") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->phase = P_DROP;
	if (send_catalog(w, KVDOC_CAT_IXDROP, name, strlen(name)))
		fail(w, MQL_InternalError, "out of memory");
}

/* ---- listIndexes ---- */

struct list_arg {
	int (*cb)(void *cbctx, const uint8_t *spec, uint32_t len);
	void *cbctx;
};

static int list_one(void *arg, const struct kvdoc_ix *ix)
{
	struct list_arg *a = arg;

	return a->cb(a->cbctx, ix->spec.p, (uint32_t)ix->spec.n);
}

int doc_ix_list(void *ctx, const char *db, const char *coll,
		int (*cb)(void *cbctx, const uint8_t *spec, uint32_t len),
		void *cbctx, struct mql_error *err)
{
	const struct kvdoc_catalog *c = doc_mdoor_catalog();
	struct list_arg a = {cb, cbctx};
	uint32_t id;

	(void)ctx;
	if (!c)
		return mql_error_set(err, MQL_InternalError, "catalog");
	if (!kvdoc_catalog_find(c, db, coll, &id, NULL))
		return 0;
	kvdoc_catalog_indexes(c, id, list_one, &a);
	return 1;
}
