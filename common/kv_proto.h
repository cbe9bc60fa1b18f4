/* kv_proto.h - kvd's native wire protocol: framing, opcodes, limits.
 *
 * A frame is a 4-byte big-endian body length followed by the body, one
 * msgpack array.  Requests are [op, arg...], replies are [status, result...].
 * The length comes first so that a reader can refuse an oversize frame before
 * it buffers a single byte of it.  docs/protocol.md is the full specification;
 * this header is its one copy in code, shared by kvd and libkvclient.
 */
#ifndef KV_PROTO_H
#define KV_PROTO_H

#include <stdint.h>

/* Version 2 added TXN and the string, bit and key operations 21-32; a
 * server speaking 2 still answers HELLO 1, and version 1's operations are
 * unchanged (docs/protocol.md section 6). */
#define KV_PROTO_VERSION 2
#define KV_PROTO_MIN_VERSION 1
#define KV_FRAME_HDR 4

/* Defaults; the server's limits are configurable and reported by HELLO. */
#define KV_DEFAULT_PORT 7379
#define KV_DEFAULT_MAX_KEY 511 /* LMDB's compiled-in key limit */
#define KV_DEFAULT_MAX_VALUE (16u << 20)
#define KV_DEFAULT_MAX_FRAME (32u << 20)
#define KV_MAX_KEY_LIMIT 511
#define KV_SCAN_MAX_LIMIT 10000

/* X(NAME, number, kind): kind R is served by the io thread from a read
 * transaction, W goes to a shard committer, A is answered on the spot, T
 * runs other operations in an exclusive section.  Numbers 21-39 are the
 * string, key and transaction operations, 33-38 the hash operations, 40-44
 * replication's, 45-56 the document operations (docs/protocol.md,
 * "Documents"; 50-56 its databases, collections and indexes). */
#define KV_OP_LIST(X)                                                          \
	X(HELLO, 1, A)                                                         \
	X(PING, 2, A)                                                          \
	X(GET, 3, R)                                                           \
	X(PUT, 4, W)                                                           \
	X(DEL, 5, W)                                                           \
	X(MGET, 6, R)                                                          \
	X(MPUT, 7, W)                                                          \
	X(MDEL, 8, W)                                                          \
	X(EXISTS, 9, R)                                                        \
	X(SCAN, 10, R)                                                         \
	X(COUNT, 11, R)                                                        \
	X(STATS, 12, A)                                                        \
	X(INCR, 13, W)                                                         \
	X(APPEND, 14, W)                                                       \
	X(EXPIRE, 15, W)                                                       \
	X(TTL, 16, R)                                                          \
	X(GETDEL, 17, W)                                                       \
	X(FLUSHALL, 18, W)                                                     \
	X(AUTH, 19, A)                                                         \
	X(BACKUP, 20, A)                                                       \
	X(TXN, 21, T)                                                          \
	X(RENAME, 22, W)                                                       \
	X(COPY, 23, W)                                                         \
	X(GETEX, 24, W)                                                        \
	X(INCRBYFLOAT, 25, W)                                                  \
	X(GETRANGE, 26, R)                                                     \
	X(SETRANGE, 27, W)                                                     \
	X(SETBIT, 28, W)                                                       \
	X(GETBIT, 29, R)                                                       \
	X(BITCOUNT, 30, R)                                                     \
	X(BITPOS, 31, R)                                                       \
	X(BITOP, 32, W)                                                        \
	X(HSET, 33, W)                                                         \
	X(HGET, 34, R)                                                         \
	X(HGETALL, 35, R)                                                      \
	X(HDEL, 36, W)                                                         \
	X(HINCRBY, 37, W)                                                      \
	X(HSCAN, 38, R)                                                        \
	X(REPLSYNC, 40, A)                                                     \
	X(REPLPULL, 41, A)                                                     \
	X(REPLSNAP, 42, A)                                                     \
	X(REPLICAOF, 43, A)                                                    \
	X(WAIT, 44, A)                                                         \
	X(DOCINSERT, 45, W)                                                    \
	X(DOCGET, 46, R)                                                       \
	X(DOCUPDATE, 47, W)                                                    \
	X(DOCDELETE, 48, W)                                                    \
	X(DOCFIND, 49, R)                                                      \
	X(DOCDBS, 50, R)                                                       \
	X(DOCCOLLS, 51, R)                                                     \
	X(DOCCREATE, 52, W)                                                    \
	X(DOCDROP, 53, W)                                                      \
	X(DOCIXCREATE, 54, W)                                                  \
	X(DOCIXLIST, 55, R)                                                    \
	X(DOCIXDROP, 56, W)

enum kv_op {
#define KV_OP_ENUM(name, num, kind) KV_OP_##name = num,
	KV_OP_LIST(KV_OP_ENUM)
#undef KV_OP_ENUM
	    KV_OP_MAX
};

/* PUT flags (fifth argument). */
#define KV_PUT_NX 1u	  /* store only if the key is absent */
#define KV_PUT_XX 2u	  /* store only if the key is present */
#define KV_PUT_KEEPTTL 4u /* keep the key's current expiry */

/* SCAN flags (sixth argument). */
#define KV_SCAN_KEYS_ONLY 1u
/* Each key's type and time to live too: items key, type, ttl_ms, value
 * (a hash's value an array of its fields and values). */
#define KV_SCAN_TYPED 2u
/* SCAN TYPED's types. */
#define KV_TYPE_STRING 0u
#define KV_TYPE_HASH 1u

/* DOCUPDATE and DOCDELETE flags. */
#define KV_DOC_UPSERT 1u /* DOCUPDATE: insert when nothing matches */
#define KV_DOC_MULTI 2u	 /* every match, not the first */

/* RENAME flags (third argument). */
#define KV_RENAME_NX 1u /* only if the new name is free */
/* COPY flags (third argument). */
#define KV_COPY_REPLACE 1u /* overwrite an existing destination */
/* GETEX flags (fourth argument); without either, ttl_ms is relative. */
#define KV_GETEX_PERSIST 1u /* remove the expiry (ttl_ms must be nil) */
#define KV_GETEX_AT 2u	    /* ttl_ms is a Unix time in milliseconds */
/* BITCOUNT and BITPOS: the range counts bits, not bytes. */
#define KV_BIT_RANGE_BITS 1u
/* BITOP's operation (first argument). */
#define KV_BITOP_AND 0u
#define KV_BITOP_OR 1u
#define KV_BITOP_XOR 2u
#define KV_BITOP_NOT 3u

/* "GET" for KV_OP_GET; NULL for an unknown number. */
const char *kv_op_name(unsigned op);

static inline uint32_t kv_load_be32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

static inline void kv_store_be32(void *p, uint32_t v)
{
	uint8_t *b = p;
	b[0] = v >> 24;
	b[1] = v >> 16;
	b[2] = v >> 8;
	b[3] = v;
}

#endif
