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
#include <xxhash.h>

static inline unsigned kvd_shard_of(const void *key, size_t len,
				    unsigned nshards)
{
	return (unsigned)(XXH3_64bits(key, len) % nshards);
}

/* A key's slot in its connection's count of in-flight writes (conn.h):
 * the hash's top byte, independent of the shard (its low bits). */
static inline unsigned kvd_key_slot(const void *key, size_t len)
{
	return (unsigned)(XXH3_64bits(key, len) >> 56);
}

#endif
