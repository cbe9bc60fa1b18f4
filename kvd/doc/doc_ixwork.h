/* doc_ixwork.h - the pass of an index build once its indexes are in the
 * catalog (doc_ixwork.c): their entries in ranges of bulk merges
 * (doc_bulk.h) and, beside them, a unique index's keys reserved in bulk
 * (doc_uqbulk.h), the documents that pass leaves going through the
 * reservations' driver (doc_uq.h).  For a caller that sends its requests
 * and hands their results back, and counts what is out: the door's
 * createIndexes (doc_mdoor_ix.c) and the build again at start
 * (doc_build.c).  Why it is exact: docs/architecture.md, "Indexes",
 * "Bulk builds" and "Unique indexes". */
#ifndef KVD_DOC_DOC_IXWORK_H
#define KVD_DOC_DOC_IXWORK_H

#include <stdbool.h>
#include <stdint.h>

#include "doc_bulk.h"
#include "doc_uq.h"
#include "doc_uqbulk.h"

struct kvd_pend;

struct doc_ixwork {
	/* the caller's: send kind (KVD_W_BULK: a range of at most max
	 * keys; KVD_W_MERGE) of merge id over key k of keyspace ks on
	 * shard (-1: the key's), with operand v and aux.  0, or -1 (not
	 * sent). */
	int (*send)(void *arg, int kind, unsigned ks, unsigned id, int shard,
		    struct kv_slice k, struct kv_slice v, int64_t max,
		    uint32_t aux);
	void *arg;
	/* the pass's */
	uint32_t cid;
	struct kv_buf ids, opnd, plain; /* the section, and the ranges' */
	int pass;
	struct doc_bulk bulk;
	struct doc_uqbulk uqb;
	struct doc_uq uq;
	struct mql_error err;
};

/* Begin the build of indexes ids ([u32 id]..., little-endian) of
 * collection cid over nshards shards: its ranges and, with a unique
 * index among them, its reservations go out.  h is the driver's host
 * (doc_uq.h): its db, coll, and rd and cat for a thread that is no io
 * thread, which the pass reads with too; the rest this sets (the
 * driver's merges go through x->send).
 * 0, or -1 with x->err (what was sent still comes back). */
int doc_ixwork_start(struct doc_ixwork *x, const struct doc_uq_host *h,
		     uint32_t cid, struct kv_slice ids, unsigned nshards);
/* One of its requests came back: the next ones go out. */
void doc_ixwork_back(struct doc_ixwork *x, const struct kvd_pend *pd);
/* Once none of its requests is out: true when every entry is written and
 * every key reserved, false when it failed (x->err). */
bool doc_ixwork_done(const struct doc_ixwork *x);
void doc_ixwork_free(struct doc_ixwork *x);

#endif
