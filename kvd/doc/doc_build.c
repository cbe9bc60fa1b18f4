/* doc_build.c - index builds that a stop left unfinished, built again at
 * start by the documents' background thread (doc_bg.h), so that an index
 * never stays unused after a kill -9 mid-build.
 *
 * An index left BUILDING in the catalog was kept by every write since it
 * was added (writes keep building indexes), and after a restart every io
 * thread's copy of the catalog has it, so a pass over the collection as
 * createIndexes makes it builds it whole: a unique index's keys reserved
 * first (doc_uqbulk.h, and the documents it leaves through the same
 * driver as the door's, doc_uq.h, with this thread's merges and reads),
 * then the entries in ranges of bulk merges (doc_bulk.h); an entry or a
 * reservation written again is the same.  IXREADY then lets the planner
 * use it.  The indexes of one collection left building (one createIndexes
 * of several, cut) are built together, as createIndexes builds them: one
 * pass naming them all, one IXREADY.  A build that fails (a
 * duplicate key, a document an index cannot take) drops the indexes it
 * built, as mongod does, and says so in the log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "doc_bg.h"
#include "doc_bulk.h"
#include "doc_uq.h"
#include "doc_uqbulk.h"
#include "index.h"
#include "kv_status.h"
#include "kvd.h"
#include "log.h"

#define BATCH 256

/* The indexes of one collection left building, built in one pass. */
struct build {
	struct doc_bg *g;
	uint32_t coll;
	char db[KVDOC_NAME_MAX + 1], cname[KVDOC_NAME_MAX + 1];
	/* [u32 id]... (the section's choice, IXREADY's options); the
	 * names, each ending in a NUL, and as one line for the log */
	struct kv_buf ids, names;
	char line[512];
	struct kv_buf opnd, plain; /* the section, and the ranges' */
	struct doc_uqbulk uqb;
	struct doc_uq uq;
	struct mql_error err;
	int status; /* a catalog merge's */
};

static void fail_msg(struct build *b, int code, const char *msg, size_t n)
{
	if (!b->err.code)
		mql_error_set(&b->err, code, "%.*s", (int)(n < 400 ? n : 400),
			      msg);
}

static void reindexed(void *arg, const struct kvd_pend *pd)
{
	struct build *b = arg;

	if (pd->status != KV_OK)
		fail_msg(b, MQL_InternalError, "a REINDEX failed", 16);
	else if (pd->result < 0)
		fail_msg(b, (int)-pd->result,
			 pd->val ? (const char *)pd->val : "", pd->vlen);
}

static void uq_back(void *arg, size_t tag, const struct kvd_pend *pd)
{
	(void)tag;
	reindexed(arg, pd);
}

static void uq_fail(void *arg, size_t tag, const struct mql_error *e,
		    const bson_t *info)
{
	struct build *b = arg;

	(void)tag, (void)info;
	if (!b->err.code)
		b->err = *e;
}

static int uq_send(void *arg, unsigned ks, unsigned id, struct kv_slice k,
		   struct kv_slice v, uint32_t tag)
{
	struct build *b = arg;

	return doc_bg_merge(b->g, ks, id, -1, k, v, tag);
}

/* A merge of the build came back: the driver's, or a REINDEX. */
static void back(void *arg, const struct kvd_pend *pd)
{
	struct build *b = arg;

	if (pd->aux)
		doc_uq_result(&b->uq, pd);
	else if (!doc_uq_back(&b->uq, pd))
		reindexed(b, pd);
}

static void catalog_back(void *arg, const struct kvd_pend *pd)
{
	((struct build *)arg)->status = pd->status;
}

static int uqb_send(void *arg, unsigned ks, unsigned id, struct kv_slice k,
		    struct kv_slice v, uint32_t aux)
{
	return doc_bg_merge(((struct build *)arg)->g, ks, id, -1, k, v, aux);
}

static void uqb_back(void *arg, const struct kvd_pend *pd)
{
	doc_uqbulk_back(&((struct build *)arg)->uqb, pd);
}

/* The documents the pass left, a batch at a time through the driver. */
static void later_all(struct build *b)
{
	struct doc_bg *g = b->g;
	struct kv_slice dk, doc;
	int rc = 0;

	while (!b->err.code && !g->stop && b->uqb.lpos < b->uqb.later.len) {
		for (unsigned n = 0;
		     n < BATCH && doc_uqbulk_later(&b->uqb, &dk); n++) {
			rc = kvdoc_get(g->rd, g->srv->nshards, dk.p, dk.n,
				       kvd_now_ms(), &doc);
			if (rc == KV_NOT_FOUND) /* deleted since */
				continue;
			if (rc != KV_OK ||
			    doc_uq_push_image(&b->uq, dk, doc) < 0)
				fail_msg(b, MQL_InternalError, "reading failed",
					 14);
		}
		while (!g->stop && (rc = doc_uq_step(&b->uq)) > 0)
			doc_bg_wait(g, back, b);
		if (rc < 0)
			fail_msg(b, MQL_InternalError, "no memory", 9);
	}
}

/* A unique index's keys, reserved before the ranges (doc_uqbulk.h): 0,
 * or -1 (b->err). */
static int reserve_all(struct build *b)
{
	struct doc_bg *g = b->g;
	int rc;

	b->uqb.send = uqb_send;
	b->uqb.arg = b;
	if (doc_uqbulk_start(&b->uqb, b->coll,
			     (struct kv_slice){b->opnd.data, b->opnd.len})) {
		fail_msg(b, MQL_InternalError, "no memory", 9);
		return -1;
	}
	while (!g->stop &&
	       (rc = doc_uqbulk_step(&b->uqb, g->rd, kvd_now_ms())) != 0) {
		doc_bg_wait(g, uqb_back, b);
		if (rc < 0)
			break;
	}
	doc_bg_wait(g, uqb_back, b);
	if (b->uqb.err.code && !b->err.code)
		b->err = b->uqb.err;
	if (!b->err.code)
		later_all(b);
	return b->err.code || g->stop ? -1 : 0;
}

static int bulk_send(void *arg, int kind, unsigned ks, unsigned id, unsigned s,
		     struct kv_slice k, struct kv_slice v, int64_t max,
		     uint32_t aux)
{
	struct doc_bg *g = ((struct build *)arg)->g;

	if (g->stop) /* the pass ends there: built again at the next start */
		return -1;
	return kind == KVD_W_BULK ? doc_bg_bulk(g, ks, id, s, k, v, max, aux)
				  : doc_bg_merge(g, ks, id, (int)s, k, v, aux);
}

static void bulk_back(void *arg, const struct kvd_pend *pd)
{
	doc_bulk_back(arg, pd);
}

/* The entries, in ranges (doc_bulk.h), as the door's createIndexes makes
 * them: under the section without its unique marks, since every unique
 * key was reserved before.  0, or -1 (b->err). */
static int bulk_all(struct build *b)
{
	struct doc_bulk k = {.send = bulk_send, .arg = b};

	if ((kvdoc_ix_without_unique(
		 (struct kv_slice){b->opnd.data, b->opnd.len}, &b->plain) ||
	     doc_bulk_start(&k, b->coll,
			    (struct kv_slice){b->plain.data, b->plain.len},
			    b->g->srv->nshards)) &&
	    !k.err.code)
		mql_error_set(&k.err, MQL_InternalError, "out of memory");
	doc_bg_wait(b->g, bulk_back, &k);
	if (k.err.code)
		b->err = k.err;
	else if (k.left)
		fail_msg(b, MQL_InternalError, "stopped", 7);
	doc_bulk_free(&k);
	return b->err.code || b->g->stop ? -1 : 0;
}

/* A catalog change of the index: its status. */
static int catalog(struct build *b, unsigned op, const void *o, size_t on)
{
	struct kv_buf v = {0};

	b->status = KV_INTERNAL;
	if (!kvdoc_op_catalog(&v, op, 0, b->db, b->cname, o, (uint32_t)on) &&
	    !doc_bg_merge(b->g, KVD_KS_CATALOG,
			  KVDOC_MERGE_BASE + KVDOC_OP_CATALOG, 0,
			  (struct kv_slice){(const uint8_t *)KVDOC_CATALOG_KEY,
					    sizeof(KVDOC_CATALOG_KEY) - 1},
			  (struct kv_slice){v.data, v.len}, 0))
		doc_bg_wait(b->g, catalog_back, b);
	kv_buf_free(&v);
	return b->status;
}

/* Drop every index of the build (its failure), by name. */
static void drop_all(struct build *b)
{
	size_t n;

	for (size_t p = 0; p < b->names.len; p += n + 1) {
		const char *name = (const char *)b->names.data + p;

		n = strlen(name);
		catalog(b, KVDOC_CAT_IXDROP, name, n);
	}
}

/* The pass is done: one IXREADY turns every index of the build ready. */
static void ready(struct build *b)
{
	int st = catalog(b, KVDOC_CAT_IXREADY, b->ids.data, b->ids.len);

	if (st == KV_OK)
		log_info("index %s of %s.%s: its build, left unfinished, "
			 "built again",
			 b->line, b->db, b->cname);
	else if (st == KV_NOT_FOUND) /* one dropped meanwhile: as mongod,
				      * that ends the build of them all */
		fail_msg(b, MQL_IndexBuildAborted,
			 "an index of the build was dropped", 33);
	else
		log_warn("index %s of %s.%s: built again, but not made ready "
			 "(%d): built again at the next start",
			 b->line, b->db, b->cname, st);
}

static void build_coll(struct build *b)
{
	struct doc_bg *g = b->g;
	struct doc_uq_host h = {.ctx = b,
				.doc_back = uq_back,
				.fail = uq_fail,
				.db = b->db,
				.coll = b->cname,
				.send = uq_send,
				.rd = g->rd,
				.cat = &g->cat,
				.nshards = g->srv->nshards};

	doc_uq_init(&b->uq, &h);
	doc_uq_stmt(&b->uq, b->coll, KVDOC_OP_REINDEX, &b->opnd);
	if (b->ids.err || b->names.err ||
	    kvdoc_ix_section_of(&g->cat, b->coll,
				(struct kv_slice){b->ids.data, b->ids.len},
				&b->opnd))
		fail_msg(b, MQL_InternalError, "no memory", 9);
	else if (!(kvdoc_ix_has_unique(
		       (struct kv_slice){b->opnd.data, b->opnd.len}) &&
		   reserve_all(b)) &&
		 !bulk_all(b))
		ready(b);
	if (b->err.code && !g->stop) {
		drop_all(b);
		log_warn("index %s of %s.%s: its build, left unfinished, "
			 "failed again (%d: %s); dropped",
			 b->line, b->db, b->cname, b->err.code, b->err.msg);
	}
	doc_uq_free(&b->uq);
	doc_uqbulk_free(&b->uqb);
}

/* ---- the indexes left building ---- */

struct left_ix {
	uint32_t id, coll;
	bool joined; /* to its collection's build */
	char name[256];
};

struct left {
	struct left_ix *v;
	size_t n, cap;
};

static int each_building(void *arg, const struct kvdoc_ix *ix)
{
	struct left *l = arg;
	struct left_ix *x;
	bson_iter_t it;

	if (ix->state != KVDOC_IX_BUILDING)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4;
		struct left_ix *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	x = memset(&l->v[l->n++], 0, sizeof(*x));
	x->id = ix->id;
	x->coll = ix->coll;
	if (bson_iter_init_from_data(&it, ix->spec.p, ix->spec.n) &&
	    bson_iter_find(&it, "name") && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(x->name, sizeof(x->name), "%s",
			 bson_iter_utf8(&it, NULL));
	return 0;
}

static int name_coll(void *arg, uint32_t id, struct kv_slice db,
		     struct kv_slice coll, struct kv_slice opts)
{
	struct build *b = arg;

	(void)opts;
	if (id != b->coll)
		return 0;
	snprintf(b->db, sizeof(b->db), "%.*s", (int)db.n, db.p);
	snprintf(b->cname, sizeof(b->cname), "%.*s", (int)coll.n, coll.p);
	return 1;
}

/* Index x joins build b. */
static void join(struct build *b, const struct left_ix *x)
{
	uint8_t id[4] = {(uint8_t)x->id, (uint8_t)(x->id >> 8),
			 (uint8_t)(x->id >> 16), (uint8_t)(x->id >> 24)};
	size_t at = strlen(b->line);

	kv_buf_append(&b->ids, id, 4);
	kv_buf_append(&b->names, x->name, strlen(x->name) + 1);
	snprintf(b->line + at, sizeof(b->line) - at, "%s%s", at ? ", " : "",
		 x->name);
}

void doc_build_resume(struct doc_bg *g)
{
	struct left l = {0};

	if (kvdoc_catalog_refresh(&g->cat, g->rd, kvd_now_ms()) == KV_OK)
		kvdoc_catalog_indexes(&g->cat, 0, each_building, &l);
	for (size_t i = 0; i < l.n && !g->stop; i++) {
		struct build b;

		if (l.v[i].joined) /* built with an earlier one */
			continue;
		memset(&b, 0, sizeof(b));
		b.g = g;
		b.coll = l.v[i].coll;
		/* every index of the collection left building: one pass */
		for (size_t j = i; j < l.n; j++)
			if (l.v[j].coll == b.coll) {
				join(&b, &l.v[j]);
				l.v[j].joined = true;
			}
		kvdoc_catalog_each(&g->cat, NULL, name_coll, &b);
		if (b.db[0])
			build_coll(&b);
		kv_buf_free(&b.ids);
		kv_buf_free(&b.names);
		kv_buf_free(&b.opnd);
		kv_buf_free(&b.plain);
	}
	kvd_reader_reset(g->rd);
	free(l.v);
}
