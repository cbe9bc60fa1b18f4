/* doc_purge.c - the keys of dropped collections and indexes deleted in
 * the background (doc_bg.h; docs/architecture.md, "Indexes").
 *
 * DROP, DROPDB and IXDROP only change the catalog; they append the ids
 * they drop (a collection's, its indexes', an index's) to the catalog's
 * purge list (doc.h).  Each pass of the documents' background thread
 * takes the list's first id and deletes, in batches of BATCH keys, every
 * key under it: documents ([u32 id] in keyspace D, each on its key's
 * shard), index entries ([u32 id] in keyspace I, on their document's
 * shard, which the entry alone does not name without its index's spec:
 * the delete goes to every shard, where an absent key costs a lookup and
 * writes nothing) and unique reservations ([u32 id | 0x80000000] in
 * keyspace I, on their key's shard).  The deletes are the store's plain
 * deletes, so the journal, replicas and checkpoints see them as any
 * delete.  Once none is left, a PURGED catalog merge takes the id off the
 * list.  Ids come from one counter and are never reused, so no live
 * collection or index has keys under a listed id.  A pass does at most
 * PASS_MAX batches and waits for each before the next, so a committer
 * serves other writes between them; a stop cuts a purge, and the list,
 * durable in the catalog, makes the next start go on. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "doc_bg.h"
#include "kv_status.h"
#include "kvd.h"
#include "log.h"
#include "net/loop.h"
#include "net/router.h"

#define BATCH 1024
#define PASS_MAX 64 /* batches per pass */
#define RES_BIT 0x80000000u

static _Atomic uint64_t deleted;

uint64_t doc_purge_deleted(void)
{
	return atomic_load(&deleted);
}

/* One batch of keys read, as delete items per shard. */
struct purge_batch {
	struct kv_buf *items; /* per shard */
	uint32_t *n;	      /* items per shard */
	unsigned nshards;
	int route; /* each key to its router shard, else to every one */
	unsigned seen;
	int err;
};

static void item_add(struct purge_batch *b, unsigned s, struct kv_slice key)
{
	uint16_t kn = (uint16_t)key.n;
	uint32_t vn = 0;

	b->err |= kv_buf_append(&b->items[s], &kn, 2) ||
		  kv_buf_append(&b->items[s], &vn, 4) ||
		  kv_buf_append(&b->items[s], key.p, key.n);
	b->n[s]++;
}

static int collect(void *arg, struct kv_slice key, struct kv_slice val,
		   unsigned type, uint64_t exp)
{
	struct purge_batch *b = arg;

	(void)val, (void)type, (void)exp;
	b->seen++;
	if (b->route) {
		item_add(b, kvd_shard_of(key.p, key.n, b->nshards), key);
		return 0;
	}
	for (unsigned s = 0; s < b->nshards; s++)
		item_add(b, s, key);
	return 0;
}

static void count_deleted(void *arg, const struct kvd_pend *pd)
{
	if (pd->status == KV_OK && pd->result > 0)
		*(uint64_t *)arg += (uint64_t)pd->result;
}

/* Delete one batch of the keys of keyspace ks under the 4-byte prefix
 * pre: 1 when none was left, 0 when some were deleted, -1 on error. */
static int purge_batch(struct doc_bg *g, unsigned ks, uint32_t pre,
		       struct purge_batch *b)
{
	uint8_t p[4] = {(uint8_t)(pre >> 24), (uint8_t)(pre >> 16),
			(uint8_t)(pre >> 8), (uint8_t)pre};
	struct kvd_scan sc = {.prefix = {p, 4},
			      .limit = BATCH,
			      .max_bytes = SIZE_MAX,
			      .keys_only = 1,
			      .ks = ks};
	struct kv_slice next;
	uint64_t n = 0;
	int rc = -1;

	b->seen = 0;
	b->err = 0;
	for (unsigned s = 0; s < b->nshards; s++) {
		b->items[s].len = 0;
		b->n[s] = 0;
	}
	if (kvd_reader_scan(g->rd, &sc, kvd_now_ms(), collect, b, &next) ||
	    b->err)
		goto out;
	rc = b->seen ? 0 : 1;
	kvd_reader_reset(g->rd); /* the items are copies */
	for (unsigned s = 0; s < b->nshards && !rc; s++)
		if (b->n[s] && doc_bg_del(g, ks, s,
					  (struct kv_slice){b->items[s].data,
							    b->items[s].len},
					  b->n[s], 0))
			rc = -1;
	doc_bg_wait(g, count_deleted, &n);
	atomic_fetch_add(&deleted, n);
out:
	kvd_reader_reset(g->rd);
	return rc;
}

/* Purge id's keys, at most *budget batches: 1 when none is left. */
static int purge_id(struct doc_bg *g, uint32_t id, struct purge_batch *b,
		    unsigned *budget)
{
	static const struct {
		unsigned ks;
		uint32_t bit;
		int route;
	} ranges[] = {{KVD_KS_DOC, 0, 1},
		      {KVD_KS_INDEX, 0, 0},
		      {KVD_KS_INDEX, RES_BIT, 1}};

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		int rc = 0;

		b->route = ranges[i].route;
		while (!rc && *budget && !g->stop) {
			(*budget)--;
			rc =
			    purge_batch(g, ranges[i].ks, id | ranges[i].bit, b);
		}
		if (rc != 1)
			return 0;
	}
	return 1;
}

/* Take id off the catalog's purge list. */
static int purged(struct doc_bg *g, uint32_t id)
{
	struct kv_buf op = {0};
	uint8_t idb[4];
	int rc;

	for (int i = 0; i < 4; i++)
		idb[i] = (uint8_t)(id >> (8 * i));
	rc = kvdoc_op_catalog(&op, KVDOC_CAT_PURGED, 0, "", NULL, idb, 4) ||
	     doc_bg_merge(g, KVD_KS_CATALOG,
			  KVDOC_MERGE_BASE + KVDOC_OP_CATALOG, 0,
			  (struct kv_slice){(const uint8_t *)KVDOC_CATALOG_KEY,
					    sizeof(KVDOC_CATALOG_KEY) - 1},
			  (struct kv_slice){op.data, op.len}, 0);
	doc_bg_wait(g, NULL, NULL);
	kv_buf_free(&op);
	return rc ? -1 : 0;
}

int doc_purge_pass(struct doc_bg *g)
{
	unsigned nshards = g->srv->nshards, budget = PASS_MAX;
	struct purge_batch b = {.nshards = nshards};
	uint32_t id = 0;
	int more = 0;

	b.items = calloc(nshards, sizeof(*b.items));
	b.n = calloc(nshards, sizeof(*b.n));
	if (!b.items || !b.n)
		goto out;
	while (!g->stop) {
		int got = kvdoc_catalog_refresh(&g->cat, g->rd, kvd_now_ms()) ==
			      KV_OK &&
			  kvdoc_catalog_purge_first(&g->cat, &id);

		kvd_reader_reset(g->rd);
		if (!got)
			break;
		more = 1;
		if (!budget || !purge_id(g, id, &b, &budget) || purged(g, id))
			break;
		log_info("purge: the keys of dropped id %u are deleted",
			 (unsigned)id);
		more = 0;
	}
out:
	for (unsigned s = 0; b.items && s < nshards; s++)
		kv_buf_free(&b.items[s]);
	free(b.items);
	free(b.n);
	return more;
}
