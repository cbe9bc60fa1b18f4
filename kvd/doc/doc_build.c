/* doc_build.c - index builds that a stop left unfinished, built again at
 * start by the documents' background thread (doc_bg.h), so that an index
 * never stays unused after a kill -9 mid-build.
 *
 * An index left BUILDING in the catalog was kept by every write since it
 * was added (writes keep building indexes), and after a restart every io
 * thread's copy of the catalog has it, so a pass over the collection as
 * createIndexes makes it builds it whole (doc_ixwork.h, with this
 * thread's requests and reads): the entries in ranges of bulk merges and,
 * beside them, a unique index's keys reserved; an entry or a reservation
 * written again is the same.  IXREADY then lets the planner
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
#include "doc_ixwork.h"
#include "index.h"
#include "kv_status.h"
#include "kvd.h"
#include "log.h"

/* The indexes of one collection left building, built in one pass. */
struct build {
	struct doc_bg *g;
	uint32_t coll;
	char db[KVDOC_NAME_MAX + 1], cname[KVDOC_NAME_MAX + 1];
	/* [u32 id]... (the section's choice, IXREADY's options); the
	 * names, each ending in a NUL, and as one line for the log */
	struct kv_buf ids, names;
	char line[512];
	struct doc_ixwork work;
	struct mql_error err;
	int status; /* a catalog merge's */
};

static void fail_msg(struct build *b, int code, const char *msg, size_t n)
{
	if (!b->err.code)
		mql_error_set(&b->err, code, "%.*s", (int)(n < 400 ? n : 400),
			      msg);
}

static void catalog_back(void *arg, const struct kvd_pend *pd)
{
	((struct build *)arg)->status = pd->status;
}

static int work_send(void *arg, int kind, unsigned ks, unsigned id, int shard,
		     struct kv_slice k, struct kv_slice v, int64_t max,
		     uint32_t aux)
{
	struct doc_bg *g = ((struct build *)arg)->g;

	if (g->stop) /* the pass ends there: built again at the next start */
		return -1;
	return kind == KVD_W_BULK
		   ? doc_bg_bulk(g, ks, id, (unsigned)shard, k, v, max, aux)
		   : doc_bg_merge(g, ks, id, shard, k, v, aux);
}

static void work_back(void *arg, const struct kvd_pend *pd)
{
	doc_ixwork_back(arg, pd);
}

/* The pass (doc_ixwork.h), every request of it waited for: 0, or -1
 * (b->err). */
static int build_all(struct build *b)
{
	struct doc_bg *g = b->g;
	struct doc_ixwork *x = &b->work;

	x->send = work_send;
	x->arg = b;
	doc_ixwork_start(
	    x,
	    &(struct doc_uq_host){
		.db = b->db, .coll = b->cname, .rd = g->rd, .cat = &g->cat},
	    b->coll, (struct kv_slice){b->ids.data, b->ids.len},
	    g->srv->nshards);
	doc_bg_wait(g, work_back, x);
	if (doc_ixwork_done(x))
		return 0;
	if (!b->err.code)
		b->err = x->err;
	return -1;
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

	if (b->ids.err || b->names.err)
		fail_msg(b, MQL_InternalError, "no memory", 9);
	else if (!build_all(b) && !g->stop)
		ready(b);
	if (b->err.code && !g->stop) {
		drop_all(b);
		log_warn("index %s of %s.%s: its build, left unfinished, "
			 "failed again (%d: %s); dropped",
			 b->line, b->db, b->cname, b->err.code, b->err.msg);
	}
	doc_ixwork_free(&b->work);
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
	}
	kvd_reader_reset(g->rd);
	free(l.v);
}
