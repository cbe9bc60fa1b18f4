/* router.h - which shard owns a key.
 *
 * XXH3_64bits is fast on short keys and well distributed; the modulo keeps
 * routing a pure function of the key and the shard count recorded in the
 * manifest, so it is stable across restarts and thread counts
 * (tests/unit/test_router.c pins known values).
 */
#ifndef KVD_ROUTER_H
#define KVD_ROUTER_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

/* A write needs both the shard and the slot of its key: hash once and
 * derive both from the hash. */
static inline uint64_t kvd_key_hash(const void *key, size_t len)
{
	return XXH3_64bits(key, len);
}

static inline unsigned kvd_hash_shard(uint64_t h, unsigned nshards)
{
	return (unsigned)(h % nshards);
}

/* A key's slot in its connection's count of in-flight writes (conn.h):
 * the hash's top byte, independent of the shard (its low bits). */
static inline unsigned kvd_hash_slot(uint64_t h)
{
	return (unsigned)(h >> 56);
}

static inline unsigned kvd_shard_of(const void *key, size_t len,
				    unsigned nshards)
{
	return kvd_hash_shard(kvd_key_hash(key, len), nshards);
}

static inline unsigned kvd_key_slot(const void *key, size_t len)
{
	return kvd_hash_slot(kvd_key_hash(key, len));
}

#endif
