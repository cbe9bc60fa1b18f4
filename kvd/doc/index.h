/* index.h - secondary indexes over kvd's documents (issue 35; DESIGN.md
 * section 7; docs/architecture.md, "Indexes"): their definitions in the
 * catalog, their entries, kept by the documents' merges in the batch of
 * the document they describe, and the operand section that tells a merge
 * which indexes its collection has.
 *
 * Definitions.  The catalog's image (doc.h) ends, after its collections,
 * with
 *
 *     [u32 nidx] then nidx entries of
 *     [u32 index id][u32 collection id][u8 state][u32 slen][spec BSON]
 *
 * (an image written before indexes has no such tail: no index).  The spec
 * is the index as listIndexes shows it ({v: 2, key: {...}, name, and the
 * options given: unique, sparse, partialFilterExpression,
 * expireAfterSeconds}); the id comes from the catalog's counter of
 * collection ids, so an index id is never reused either (a dropped
 * index's entries stay unreachable under its id).  State BUILDING while
 * an index is being built (writers maintain it, the planner does not use
 * it), READY after.  The _id index is implicit: the documents' own keys.
 *
 * Entries.  One key of keyspace KVD_KS_INDEX per (document, index key) on
 * the document's shard, with an empty value or a covered entry's (below):
 *
 *     [u32 index id, big-endian][key (mql_index_keys)][mql_key_id(_id)]
 *
 * so an index is one key range, in index order on every shard, and the
 * store's scan, which merges shards in key order, reads it in index
 * order.  A key is self-delimiting (mql_key.h), so the _id is what follows
 * it, and a document's key is [u32 collection id][that _id].
 *
 * Maintenance.  The io thread puts its copy of the collection's indexes
 * (ready and building) in front of every INSERT, UPDATE and DELETE
 * operand; the merge computes the old image's entries and the new one's
 * and writes the difference as side writes (store.h, kvd_merge_side), so
 * a document and its entries change in one batch, one journal write, one
 * replica record group.  A document an index cannot take (parallel
 * arrays, a key too long) fails the write, as in MongoDB.
 *
 * Covered entries.  An index whose fields are all top-level ({a: 1, b:
 * -1}, not "a.b") gives a document's entry the value
 *
 *     [KVDOC_IX_COVER][a bit per field the document lacks, ceil(n / 8)]
 *     [a BSON type per field, n bytes: 0, or int64 or double]
 *
 * when its key gives back the document's indexed fields exactly: one
 * entry (no array), each field there once and in the key pattern's order,
 * each value decoded from the key (mql_key_decode), then made the type
 * its byte names (5, NumberLong(5) and 5.0 encode alike and decode as
 * int32 5), of the very type and bytes of the document's (not so a
 * decimal 5.0, or -0.0); otherwise the entry's value is empty.  A query that reads only those fields
 * (doc_plan.c) builds its document from such an entry and fetches the
 * others.  A write whose entry keeps its key but changes its value (5
 * becomes 5.0, or [5]) rewrites it.
 */
#ifndef KVD_DOC_INDEX_H
#define KVD_DOC_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "doc.h"

enum { KVDOC_IX_BUILDING = 0, KVDOC_IX_READY = 1 };

/* Flags of an index in an operand's section. */
#define KVDOC_IXF_SPARSE 0x1u
#define KVDOC_IXF_UNIQUE 0x2u

#define KVDOC_IX_PREFIX 4 /* the index id in front of every entry */

/* An index as the catalog holds it. */
struct kvdoc_ix {
	uint32_t id, coll;
	unsigned state;
	struct kv_slice spec; /* BSON */
};

/* Every index of collection coll (0: of every collection) in the
 * catalog's copy c: fn's nonzero return stops the walk. */
/* The index entry of a catalog tail at *p (of [*p, end)): 0 and *p past
 * it, or -1 (malformed). */
int kvdoc_ix_next(const uint8_t **p, const uint8_t *end, struct kvdoc_ix *ix);
typedef int (*kvdoc_ix_fn)(void *arg, const struct kvdoc_ix *ix);
void kvdoc_catalog_indexes(const struct kvdoc_catalog *c, uint32_t coll,
			   kvdoc_ix_fn fn, void *arg);

/* The catalog merge's part for IXADD, IXDROP and IXREADY, and the index
 * tail of a CREATE, DROP or DROPDB (catalog.c calls it once the
 * collections' entries are written to m->image): ixs is the old image's
 * tail, live the ids of the collections kept (n of them, as [u32]...),
 * cid the collection the index operation names (0: none), *next the id
 * counter; the ids of the indexes it drops (by name or with their
 * collection) are appended to gone as [u32]... .  0, or -1 (malformed:
 * KV_INTERNAL), with m's result and status set for the index operations. */
int kvdoc_ix_rewrite(struct kvd_merge *m, unsigned op, struct kv_slice opts,
		     struct kv_slice ixs, const struct kv_buf *live,
		     uint32_t cid, uint32_t *next, struct kv_buf *gone);

/* ---- operands ---- */

/* Append collection coll's indexes (ready and building, or only the one
 * of id only when only != 0) to out: [u32 n] then n entries of [u32 id]
 * [u8 flags][u32 klen][key pattern][u32 plen][partialFilterExpression],
 * then [u64 the catalog's version].
 * 0, or -1 out of memory. */
int kvdoc_ix_section(const struct kvdoc_catalog *c, uint32_t coll,
		     uint32_t only, struct kv_buf *out);
/* kvdoc_ids_have - is id among ids ([u32 id]..., little-endian: IXREADY's
 * options, a build's list of the indexes it builds)? */
bool kvdoc_ids_have(struct kv_slice ids, uint32_t id);
/* The same with the indexes of ids only ([u32 id]..., little-endian, as
 * IXREADY's options; empty: every one): a build's section, which writes
 * the entries of all the indexes one createIndexes adds in one pass. */
int kvdoc_ix_section_of(const struct kvdoc_catalog *c, uint32_t coll,
			struct kv_slice ids, struct kv_buf *out);
/* The section ends with the version of the catalog it was made from
 * ([u64], 0: none).  kvdoc_ix_registry_set: the catalog merge's new image,
 * the committers' copy; kvdoc_ix_fresh: when that copy is newer than
 * *sec's version, *sec becomes collection coll's section from it (built
 * in tmp).  0, or -1 out of memory. */
void kvdoc_ix_registry_set(const uint8_t *img, size_t n);
/* The committers' copy's version (0: none): a catalog made anew after
 * FLUSHALL counts on from it (catalog.c). */
uint64_t kvdoc_ix_registry_version(void);
int kvdoc_ix_fresh(struct kv_slice *sec, uint32_t coll, struct kv_buf *tmp);
/* Take the section from the front of *op: 0 with *sec and *res (may be
 * NULL) the key list of the reservations the operand holds (unique.h;
 * empty: none), or -1.  A section whose version has KVDOC_SEC_RES set is
 * followed by [u32 len][key list]. */
#define KVDOC_SEC_RES (1ull << 63)
int kvdoc_ix_take(struct kv_slice *op, struct kv_slice *sec,
		  struct kv_slice *res);

/* A merge's side writes for a document going from old to new (either may
 * be NULL: an insert, a delete) under the document key key: 0, or -1 with
 * e (MongoDB's error: the write fails), or ENOMEM.  For a unique index,
 * res lists the keys whose reservation the operand holds (unique.h): a
 * key the new image gains that is not in it returns KVDOC_IX_NEED with
 * m->reply [u8 len][document key][key list] of the keys to reserve (the
 * caller fails the write with result -KVDOC_NEED_RESERVE); otherwise
 * the keys the document lets go (lost, or reserved and not kept) end
 * the reply as its trailer: [u8 len][document key][key list][u32 its
 * length][u32 KVDOC_REL_MAGIC], after whatever reply came before. */
#define KVDOC_IX_NEED 2
#define KVDOC_NEED_RESERVE 0x40000000
#define KVDOC_REL_MAGIC 0x4c52564bu
int kvdoc_ix_apply(struct kvd_merge *m, struct kv_slice sec,
		   struct kv_slice res, const uint8_t *old, size_t oldn,
		   const uint8_t *new_, size_t newn, struct mql_error *e);

/* Key lists ([u32 index id][u16 len][key]...): the next entry of *l (1,
 * or 0 at its end); whether l holds (id, k). */
int kvdoc_keylist_next(struct kv_slice *l, uint32_t *id, struct kv_slice *k);
bool kvdoc_keylist_has(struct kv_slice l, uint32_t id, struct kv_slice k);
/* The keys of doc for the unique indexes of sec (only the one of id only,
 * when not 0), appended to out as a key list: 0, ENOMEM, or -1 with e. */
int kvdoc_ix_unique_keys(struct kv_slice sec, uint32_t only, const uint8_t *doc,
			 size_t n, struct kv_buf *out, struct mql_error *e);
/* Has section sec a unique index? */
bool kvdoc_ix_has_unique(struct kv_slice sec);
/* Section sec again into out with no index of it marked unique: the
 * ranges' section of a build whose unique keys were reserved before
 * (doc_uqbulk.h), whose REINDEX then writes entries without asking for
 * reservations.  0, or -1 (out of memory, malformed). */
int kvdoc_ix_without_unique(struct kv_slice sec, struct kv_buf *out);

/* REINDEX's merge: operand a section; writes the current document's
 * entries (a build's step), leaving the document as it is. */
int kvdoc_reindex_merge(void *ctx, struct kvd_merge *m);

/* MARK's merge: stores its operand as the key's value (a bulk build's
 * marker, store.h's KVD_BULK_MARK, on the shard the build's range was). */
int kvdoc_mark_merge(void *ctx, struct kvd_merge *m);

/* The entry key of index id for an encoded key and a document key
 * ([u32 coll][_id]), in out (of 512 bytes): its length, or 0 when too
 * long. */
size_t kvdoc_ix_entry(uint32_t id, const uint8_t *key, size_t kn,
		      const uint8_t *dkey, size_t dn, uint8_t *out);

/* ---- covered entries (index_cover.c) ---- */

#define KVDOC_IX_COVER 0x01

/* A key pattern's fields; names point into the pattern's BSON. */
struct kvdoc_ix_fields {
	size_t n;
	bool flat; /* every field top-level: entries may be covered */
	const char *name[MQL_INDEX_MAX_PARTS];
	size_t len[MQL_INDEX_MAX_PARTS];
	bool desc[MQL_INDEX_MAX_PARTS];
};

void kvdoc_ix_fields(const uint8_t *key, size_t n, struct kvdoc_ix_fields *f);
/* The position of field name[0..len) in f, or -1. */
int kvdoc_ix_field(const struct kvdoc_ix_fields *f, const char *name,
		   size_t len);
#define KVDOC_IX_COVER_MAX (1 + MQL_INDEX_MAX_PARTS / 8 + MQL_INDEX_MAX_PARTS)

/* The value of doc's entry whose key parts are key, in out (of
 * KVDOC_IX_COVER_MAX bytes): its length, 0 when not covered. */
size_t kvdoc_ix_cover(const struct kvdoc_ix_fields *f, const uint8_t *doc,
		      size_t n, struct kv_slice key, uint8_t *out);
/* Is val a covered entry's value for an index of fields f? */
bool kvdoc_ix_covered(const struct kvdoc_ix_fields *f, struct kv_slice val);
/* Append to out the fields of a covered entry (key parts, value): the
 * document's indexed fields.  0, or -1 (bytes that are no entry). */
int kvdoc_ix_uncover(const struct kvdoc_ix_fields *f, struct kv_slice parts,
		     struct kv_slice val, bson_t *out);

#endif
