/* doc_uqbulk.h - a unique index build's reservations taken in bulk
 * (doc_uqbulk.c), beside the ranges that write its entries (doc_bulk.h):
 * the collection read in batches, and every unique key of each document
 * reserved for it at once, many RESERVE merges out together, each under a
 * token already ended; the few documents whose key another holds, or
 * whose reservation is still being taken, are left for the reservations'
 * driver (doc_uq.h), which waits, takes over leftovers and fails a
 * duplicate with MongoDB's 11000.  Run by an index build's pass
 * (doc_ixwork.h).  Why this is exact: docs/architecture.md, "Indexes",
 * "Unique indexes", *Builds*. */
#ifndef KVD_DOC_DOC_UQBULK_H
#define KVD_DOC_DOC_UQBULK_H

#include <stdint.h>

#include "doc.h"

struct kvd_pend;
struct kvd_reader;

/* The aux of the pass's merges: this bit and the document's place in
 * its batch. */
#define DOC_UQBULK_AUX 0x10000000u

struct doc_uqbulk {
	/* the caller's: send merge id over key k of keyspace ks on the
	 * key's shard, with operand v and aux.  0, or -1 (not sent). */
	int (*send)(void *arg, unsigned ks, unsigned id, struct kv_slice k,
		    struct kv_slice v, uint32_t aux);
	void *arg;
	/* the pass's */
	struct kvdoc_scan scan;
	uint64_t token; /* ended: never alive (unique.h) */
	struct kv_buf sec;
	struct kv_buf batch;	   /* [u8 len][doc key][u32 n][key list]... */
	unsigned ndocs, out, nmax; /* nmax: documents the next batch reads */
	uint8_t *miss; /* a document of the batch not granted every key */
	/* documents for the driver: [u8 len][document key]..., and how far
	 * doc_uqbulk_later has handed them out */
	struct kv_buf later;
	size_t lpos;
	struct kv_buf keys, op;
	struct mql_error err;
};

/* Begin the pass over collection coll with section sec (the build's,
 * which names a unique index).  0, or -1 out of memory. */
int doc_uqbulk_start(struct doc_uqbulk *u, uint32_t coll, struct kv_slice sec);
/* Read the next batch through rd and send its reservations: 1 when some
 * are out, 0 when the collection was read to its end, -1 with u->err (a
 * document an index cannot take, reading failed, out of memory). */
int doc_uqbulk_step(struct doc_uqbulk *u, struct kvd_reader *rd, uint64_t now);
/* One of its merges came back (aux with DOC_UQBULK_AUX). */
void doc_uqbulk_back(struct doc_uqbulk *u, const struct kvd_pend *pd);
/* The next document key left for the driver (valid until the next
 * call), 1, or 0 when none is left now; and the bytes of those left and
 * not handed out yet. */
int doc_uqbulk_later(struct doc_uqbulk *u, struct kv_slice *dk);
size_t doc_uqbulk_waiting(const struct doc_uqbulk *u);
void doc_uqbulk_free(struct doc_uqbulk *u);

#endif
