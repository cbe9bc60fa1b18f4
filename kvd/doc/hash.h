/* hash.h - Redis's hash type on kvd's store: the image a hash is stored as,
 * and the merge operations that change it on a shard's committer.
 *
 * A hash is one value of type KVD_VT_HASH in the ordinary key space (a key
 * holds a string or a hash, never both, as in Redis), so expiry, DEL,
 * RENAME, COPY, SCAN, replication, backups and recovery carry it as they
 * carry any value.  Its image (docs/architecture.md, "Hashes"):
 *
 *     +-------+-------------+-----------------------------------------+
 *     | flags | u32 nfields | per field, in insertion order:          |
 *     | (u8)  | little-end. |  varint flen, field, varint vlen, value |
 *     +-------+-------------+-----------------------------------------+
 *
 * varint: LEB128 (7 bits a byte, low first), at most 5 bytes.  Fields keep
 * the order Redis's listpack keeps (a new one at the end, a changed one in
 * place, a deleted one gone), so small hashes list their fields as Redis
 * does.  Flag KVH_F_LARGE: Redis would hold the hash as a hash table now
 * (it had more than 512 fields, or a field or value over 64 bytes, at some
 * time: Redis never converts back); OBJECT ENCODING answers by it.
 *
 * Changes are merge operations (store.h, KVD_W_MERGE) whose operands are
 * built by kvh_op_* and whose functions kvh_register gives the store at
 * open; reads decode images with kvh_iter on io threads.
 */
#ifndef KVD_DOC_HASH_H
#define KVD_DOC_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"
#include "store.h"

/* The value type of hashes (store.h). */
#define KVD_VT_HASH 1u

#define KVH_HDR 5
#define KVH_F_LARGE 0x1u
/* Redis's hash-max-listpack-entries and hash-max-listpack-value. */
#define KVH_LISTPACK_ENTRIES 512
#define KVH_LISTPACK_VALUE 64

/* The merge operations (KVD_W_MERGE ids), their operands and results:
 *   SET     pairs (varint flen, field, varint vlen, value)...; result:
 *           fields added (HSET; HMSET answers OK)
 *   SETNX   one pair; result 1 set, 0 the field existed
 *   DEL     fields (varint flen, field)...; result: fields deleted; the
 *           last field deleted deletes the key
 *   INCRBY  i64 little-endian delta, then the field; result: new value
 *   INCRBYFLOAT  varint flen, field, then the increment as text; reply:
 *           the new value as text
 * Refusals: KV_WRONG_TYPE (a string), KV_NOT_INTEGER (result 1: overflow),
 * KV_NOT_FLOAT, KV_VALUE_TOO_LARGE (result KVH_OVER_FIELDS or
 * KVH_OVER_BYTES: the hash would pass max-hash-fields or max-hash-bytes). */
enum {
	KVH_OP_SET,
	KVH_OP_SETNX,
	KVH_OP_DEL,
	KVH_OP_INCRBY,
	KVH_OP_INCRBYFLOAT,
	KVH_NOPS
};
enum { KVH_OVER_FIELDS = 1, KVH_OVER_BYTES = 2 };

/* The limits the operations keep (max-hash-fields, max-hash-bytes). */
struct kvh_limits {
	uint64_t max_fields;
	uint64_t max_bytes;
};

/* Fill ops[0 .. KVH_NOPS) with the hash operations, bound to lim (which
 * must outlive the store). */
void kvh_register(struct kvd_merge_op *ops, const struct kvh_limits *lim);

/* ---- images ---- */

struct kvh_iter {
	const uint8_t *p, *end;
	uint32_t left;
};

/* Start a walk over image img: 0 with *n fields and *flags, or -1 when it
 * is not a hash image. */
int kvh_open(struct kv_slice img, struct kvh_iter *it, uint32_t *n,
	     unsigned *flags);
/* The next field and value: 1, 0 at the end, -1 malformed. */
int kvh_next(struct kvh_iter *it, struct kv_slice *f, struct kv_slice *v);
/* Field f's value in img: 1 with *v, 0 absent, -1 malformed. */
int kvh_get(struct kv_slice img, struct kv_slice f, struct kv_slice *v);
/* Fields in img (0 for a malformed one). */
uint32_t kvh_len(struct kv_slice img);
/* OBJECT ENCODING: "listpack" or "hashtable", as Redis 7.0 would say. */
const char *kvh_encoding(struct kv_slice img);
/* A whole image, checked: 0, or -1 when it is not one. */
int kvh_check(struct kv_slice img);

/* ---- operands (built on io threads) ---- */

/* LEB128 of v into p (at least 5 bytes); its length. */
size_t kvh_varint_put(uint8_t *p, uint32_t v);
/* Decode one from [*p, end): 0 and *p moved past it, or -1. */
int kvh_varint_get(const uint8_t **p, const uint8_t *end, uint32_t *v);
/* Append a varint-prefixed string to b. */
void kvh_put_str(struct kv_buf *b, struct kv_slice s);
/* Bytes kvh_put_str takes for n bytes. */
size_t kvh_str_size(size_t n);
/* Start an image of n fields in b (flags: KVH_F_*); patch the count
 * later with kvh_set_count. */
void kvh_put_hdr(struct kv_buf *b, unsigned flags, uint32_t n);
void kvh_set_count(struct kv_buf *b, size_t at, uint32_t n);

#endif
