/* doc.h - documents in the store (issue 34; DESIGN.md section 7): where a
 * document lives, the merge operations that change documents and the
 * catalog on the shards' committers, and the reads of io threads.
 *
 * Keys (store.h, keyspaces).  A document is one value of type KVD_VT_DOC
 * in keyspace KVD_KS_DOC under
 *
 *     [u32 collection id, big-endian][mql_key_id(_id)]
 *
 * so a collection is one key range in MongoDB's _id order on every shard
 * (mql_key.h: an order-preserving, decodable encoding of at most 192
 * bytes).  Its shard is the router's function of that key (router.h,
 * kvd_shard_of), the same everywhere.  The value is the document's BSON
 * as stored: a find returns those bytes without re-encoding.
 *
 * The catalog (databases, collections: name -> id, create's options) is
 * one value in keyspace KVD_KS_CATALOG on shard 0, changed only by the
 * KVDOC_OP_CATALOG merge on shard 0's committer: two io threads creating
 * one collection at once get one id (the second finds it), ids are never
 * reused (a dropped collection's documents are purged under its id),
 * and the catalog is journaled, replicated, backed up and recovered as
 * any value.  Its image:
 *
 *     [u64 version][u32 next id][u32 n] then n entries of
 *     [u32 id][u8 dblen][db][u8 clen][coll][u32 olen][options BSON]
 *
 * little-endian; version grows at every change, so an io thread's copy
 * (struct kvdoc_catalog) is refreshed only when it moved.  The indexes'
 * tail follows (index.h), then the purge list, [u32 n][u32 id]...: the
 * ids of collections and indexes dropped whose keys the documents'
 * background thread has not deleted yet (doc_purge.c; an image without
 * the list has none).  DROP, DROPDB and IXDROP append to it, PURGED
 * takes an id off.
 *
 * Writes are merge operations (store.h, KVD_W_MERGE), computed by the
 * document's shard's committer on its current image, so no update is lost
 * between clients; each is deterministic given (image, operand), and the
 * journal gets the resulting image anyway.  Results (kvd_wop.result, and
 * status; val gets the reply bytes):
 *   INSERT   operand: the document (checked BSON, _id first).  result 1;
 *            KV_EXISTS when the _id exists (MongoDB's 11000).
 *   UPDATE   operand: kvdoc_op_update's.  result KVDOC_R_NOMATCH,
 *            KVDOC_R_MATCHED (nothing changed), KVDOC_R_MODIFIED,
 *            KVDOC_R_UPSERTED; or a negative MongoDB error code with the
 *            message as reply.  With KVDOC_RET_OLD / KVDOC_RET_NEW the
 *            reply is that image (findAndModify), copied out.
 *   DELETE   operand: kvdoc_op_delete's.  result 1 deleted, 0 not (absent,
 *            or its filter no longer matches); reply the old image with
 *            KVDOC_RET_OLD.
 *   CATALOG  operand: kvdoc_op_catalog's.  CREATE: result the id (of the
 *            existing collection too), KV_EXISTS with KVDOC_EXCL when it
 *            existed; DROP: result the id dropped, KV_NOT_FOUND when none;
 *            DROPDB: result the number of collections dropped.
 * A filter carried by an UPDATE or DELETE is checked again on the current
 * image (a multi-document write sends one merge per _id it found: a
 * document that no longer matches is skipped, as MongoDB's multi-updates
 * are not atomic either).
 */
#ifndef KVD_DOC_DOC_H
#define KVD_DOC_DOC_H

#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "kv_buf.h"
#include "mongo/mql_error.h"
#include "mongo/mql_key.h"
#include "store.h"

/* The value type of documents (store.h; hashes are 1). */
#define KVD_VT_DOC 2u

/* A document's key: collection id, then its encoded _id. */
#define KVDOC_KEY_MAX (4 + MQL_KEY_ID_MAX)

enum {
	KVDOC_OP_INSERT,
	KVDOC_OP_UPDATE,
	KVDOC_OP_DELETE,
	KVDOC_OP_CATALOG,
	KVDOC_OP_REINDEX, /* index.h: an index build's entries of one doc */
	KVDOC_OP_RESERVE, /* unique.h: a unique key's reservation */
	KVDOC_OP_MARK,	  /* index.h: a bulk build's marker (store.h) */
	KVDOC_NOPS
};

/* UPDATE's results. */
enum {
	KVDOC_R_NOMATCH = 0,
	KVDOC_R_MATCHED = 1,
	KVDOC_R_MODIFIED = 2,
	KVDOC_R_UPSERTED = 3
};

/* Operand flags. */
#define KVDOC_UPSERT 0x1u  /* UPDATE: insert when absent */
#define KVDOC_RET_OLD 0x2u /* reply: the image before */
#define KVDOC_RET_NEW 0x4u /* reply: the image after */
#define KVDOC_EXCL 0x8u	   /* CATALOG CREATE: fail if it exists */

enum {
	KVDOC_CAT_CREATE,
	KVDOC_CAT_DROP,
	KVDOC_CAT_DROPDB,
	KVDOC_CAT_IXADD,   /* options: the index's spec (index.h) */
	KVDOC_CAT_IXDROP,  /* options: its name ("*": every one) */
	KVDOC_CAT_IXREADY, /* options: [u32 index id]... (built: all or
			    * none, KV_NOT_FOUND when one is not there) */
	KVDOC_CAT_PURGED,  /* options: [u32 id] (its keys deleted); db "" */
};

/* The catalog's one key (keyspace KVD_KS_CATALOG, shard 0). */
#define KVDOC_CATALOG_KEY "catalog"
#define KVDOC_NAME_MAX 255 /* a database's or a collection's name */

/* The merge id (kvd_wop.flags) of KVDOC_OP_INSERT; the others follow.
 * Hashes' take the ids below it (hash.h). */
#define KVDOC_MERGE_BASE 8u

/* Fill ops[KVDOC_MERGE_BASE ..] (of KVD_MERGE_MAX) with the document
 * operations. */
void kvdoc_register(struct kvd_merge_op *ops);

/* CATALOG's merge function (catalog.c; kvdoc_register installs it). */
int kvdoc_catalog_merge(void *ctx, struct kvd_merge *m);

/* ---- keys ---- */

/* The key of the document of collection coll whose _id is id, in key
 * (KVDOC_KEY_MAX bytes): 0 with *klen, or -1 with err (mql_key_id's). */
int kvdoc_key(uint32_t coll, const bson_value_t *id, uint8_t *key, size_t *klen,
	      struct mql_error *err);

/* ---- operands (io threads) ---- */

/* UPDATE: the update document (operators or a replacement), the filter to
 * check again (NULL: none), and for an upsert the _id of the document it
 * would insert (the new document takes the filter's equalities, then the
 * update; id is its _id). */
int kvdoc_op_update(struct kv_buf *out, unsigned flags, const uint8_t *update,
		    uint32_t ulen, const uint8_t *filter, uint32_t flen,
		    const bson_value_t *id);
int kvdoc_op_delete(struct kv_buf *out, unsigned flags, const uint8_t *filter,
		    uint32_t flen);
/* CATALOG: op KVDOC_CAT_*, flags KVDOC_EXCL; coll NULL for DROPDB;
 * options (CREATE) may be NULL. */
int kvdoc_op_catalog(struct kv_buf *out, unsigned op, unsigned flags,
		     const char *db, const char *coll, const uint8_t *opts,
		     uint32_t olen);

/* ---- the catalog, as an io thread reads it ---- */

struct kvdoc_catalog {
	uint64_t version; /* of the copy (0: none yet) */
	struct kv_buf img;
};

/* Bring c up to date with the store (a read of shard 0's catalog key):
 * KV_OK, or KV_INTERNAL. */
int kvdoc_catalog_refresh(struct kvdoc_catalog *c, struct kvd_reader *r,
			  uint64_t now);
void kvdoc_catalog_free(struct kvdoc_catalog *c);
/* Collection db.coll: 1 with *id (and its options), 0 when absent. */
int kvdoc_catalog_find(const struct kvdoc_catalog *c, const char *db,
		       const char *coll, uint32_t *id, struct kv_slice *opts);
/* Every collection (of db, or of all with db NULL), in catalog order:
 * fn's nonzero return stops the walk. */
typedef int (*kvdoc_coll_fn)(void *arg, uint32_t id, struct kv_slice db,
			     struct kv_slice coll, struct kv_slice opts);
void kvdoc_catalog_each(const struct kvdoc_catalog *c, const char *db,
			kvdoc_coll_fn fn, void *arg);
/* The first id of the purge list: 1 with *id, or 0 when it is empty. */
int kvdoc_catalog_purge_first(const struct kvdoc_catalog *c, uint32_t *id);

/* ---- documents, as an io thread reads them ---- */

/* The document under key (kvdoc_key) on its shard of nshards: KV_OK with
 * *doc (valid until kvd_reader_reset), KV_NOT_FOUND, or KV_INTERNAL. */
int kvdoc_get(struct kvd_reader *r, unsigned nshards, const uint8_t *key,
	      size_t klen, uint64_t now, struct kv_slice *doc);
/* kvd_reader_prefetch's step for the document under key, before a batch
 * of kvdoc_gets. */
void kvdoc_prefetch(struct kvd_reader *r, unsigned nshards, const uint8_t *key,
		    size_t klen, int step);

/* A scan of one collection across every shard, in _id order, in batches:
 * each kvdoc_scan_batch examines at most max documents and the next one
 * goes on after the last key given (the scan keeps no snapshot between
 * batches: it sees what was committed before each batch). */
struct kvdoc_scan {
	uint32_t coll;
	uint8_t next[KVDOC_KEY_MAX]; /* where the next batch starts */
	size_t nlen;
	uint8_t end[KVDOC_KEY_MAX]; /* stop before it (elen 0: no bound) */
	size_t elen;
	/* a batch ends once it gave this many bytes of documents (0: no
	 * bound but max) */
	size_t max_bytes;
	int done;
};
void kvdoc_scan_init(struct kvdoc_scan *s, uint32_t coll);
/* Narrow a scan not yet started to the documents whose encoded _id
 * (mql_key_id) is in [start, end): an _id range read from where it
 * starts.  0, or -1 (the scan unchanged) when a bound is too long. */
int kvdoc_scan_range(struct kvdoc_scan *s, const uint8_t *start, size_t slen,
		     const uint8_t *end, size_t elen);
/* fn gets each document's key (collection id and encoded _id) and its
 * bytes, and returns 0, or KVD_SCAN_STOP to end the batch before it (the
 * next batch starts at this document), or anything else to fail
 * the batch (KV_INTERNAL).  KV_OK or
 * KV_INTERNAL; s->done once the collection was read to its end. */
int kvdoc_scan_batch(struct kvdoc_scan *s, struct kvd_reader *r, unsigned max,
		     uint64_t now, kvd_scan_fn fn, void *arg);

#endif
