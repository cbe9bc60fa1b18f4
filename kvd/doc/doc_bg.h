/* doc_bg.h - the documents' background thread (doc_ttl.c runs it) as a
 * client of the store (doc_bg.c): its own reader and copy of the catalog,
 * and a kvd_io that no io thread runs, where the committers hand its
 * merges back, as the replica's applier does.  Its jobs: index builds a
 * kill -9 left unfinished (doc_build.c), then the TTL monitor and the
 * purge of dropped collections' and indexes' keys (doc_purge.c). */
#ifndef KVD_DOC_DOC_BG_H
#define KVD_DOC_DOC_BG_H

#include <stdatomic.h>
#include <stdint.h>

#include "doc.h"

struct kvd_server;
struct kvd_io;
struct kvd_pend;

struct doc_bg {
	struct kvd_server *srv;
	struct kvd_io *sink;
	struct kvd_reader *rd;
	struct kvdoc_catalog cat;
	_Atomic int stop;
	unsigned out; /* merges sent, not yet back */
};

int doc_bg_init(struct doc_bg *g, struct kvd_server *srv);
void doc_bg_free(struct doc_bg *g);
/* Send merge id (KVDOC_MERGE_BASE + op) of key k with operand v on shard
 * (-1: the key's); its result comes back with aux tag.  0, or -1. */
int doc_bg_merge(struct doc_bg *g, unsigned ks, unsigned id, int shard,
		 struct kv_slice k, struct kv_slice v, uint32_t tag);
/* Send a bulk merge (store.h, KVD_W_BULK) of merge id over keyspace ks on
 * shard, from key from on, v its [u16 n][end key][operand], at most max
 * keys; it comes back with aux tag.  0, or -1. */
int doc_bg_bulk(struct doc_bg *g, unsigned ks, unsigned id, unsigned shard,
		struct kv_slice from, struct kv_slice v, int64_t max,
		uint32_t tag);
/* Send a delete of nitems keys of keyspace ks ([u16 klen][u32 0][key]...,
 * KVD_ITEM_HDR) to shard's committer: the plain delete of any writer, so
 * the journal, replicas and checkpoints see deletes.  Its result (keys
 * deleted) comes back with aux tag.  0, or -1. */
int doc_bg_del(struct doc_bg *g, unsigned ks, unsigned shard,
	       struct kv_slice items, uint32_t nitems, uint32_t tag);
/* Wait until no merge is out, giving fn each as it comes back (fn may
 * send more: they are waited for too).  The reader is reset first: what
 * it read is not used past this. */
void doc_bg_wait(struct doc_bg *g,
		 void (*fn)(void *arg, const struct kvd_pend *pd), void *arg);

/* doc_build.c: build again the indexes a stop left building (at start). */
void doc_build_resume(struct doc_bg *g);
/* doc_purge.c: delete the keys of the collections and indexes on the
 * catalog's purge list, a bounded amount per call.  1 when the list is
 * still not empty after it (the caller comes back soon), else 0. */
int doc_purge_pass(struct doc_bg *g);
/* Keys it deleted since the start. */
uint64_t doc_purge_deleted(void);

#endif
