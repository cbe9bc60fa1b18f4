/* doc_bulk.h - an index build's pass over a collection as bulk merges,
 * range by range on every shard (doc_bulk.c), for a caller that sends its
 * requests and hands their results back: the MongoDB door's createIndexes
 * (doc_mdoor_ix.c) and the build again at start (doc_build.c). */
#ifndef KVD_DOC_DOC_BULK_H
#define KVD_DOC_DOC_BULK_H

#include <stdint.h>

#include "doc.h"

struct kvd_pend;

/* The aux of a bulk pass's requests: this bit, the shard << 1, and 1 for
 * a marker. */
#define DOC_BULK_AUX 0x20000000u

struct doc_bulk {
	/* the caller's: send kind (KVD_W_BULK: a range, at most max keys;
	 * KVD_W_MERGE: a marker) of merge id over key k of keyspace ks on
	 * shard s, with operand v and aux (kvd_write_bulk's and
	 * kvd_write_merge's arguments).  0, or -1 when nothing was sent. */
	int (*send)(void *arg, int kind, unsigned ks, unsigned id, unsigned s,
		    struct kv_slice k, struct kv_slice v, int64_t max,
		    uint32_t aux);
	void *arg;
	/* the pass's */
	unsigned nshards, left, out; /* shards not done, requests out */
	uint8_t *from;		     /* each shard's next key */
	uint16_t *flen;
	uint8_t to[4];
	struct kv_buf val, mark; /* a range's value: [u16 4][to][section] */
	struct mql_error err;
};

/* Send the first range of collection coll's documents on each of nshards
 * shards, every document to get the entries of section sec: 0, or -1 (out
 * of memory; what was sent comes back). */
int doc_bulk_start(struct doc_bulk *b, uint32_t coll, struct kv_slice sec,
		   unsigned nshards);
/* One of its requests came back (its aux has DOC_BULK_AUX): the next is
 * sent.  0, or -1 once b->err is set (a document an index cannot take,
 * out of memory); the pass is done when b->out is 0 (and b->left too, on
 * success). */
int doc_bulk_back(struct doc_bulk *b, const struct kvd_pend *pd);
void doc_bulk_free(struct doc_bulk *b);

#endif
