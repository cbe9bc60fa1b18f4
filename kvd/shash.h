/* shash.h - the hash of kvd's in-memory tables whose keys clients choose
 * (WATCHed keys, pub/sub channels and patterns, a hash command's fields).
 *
 * Why not the router's XXH3_64bits: a table indexes by a hash's low bits,
 * and with a public unkeyed function anyone can search offline for many
 * keys of one bucket, then turn each lookup into a walk of them all (hash
 * flooding: 80,000 such keys in one WATCH is minutes of work in an
 * exclusive section).  These tables therefore hash with XXH3 under a
 * secret drawn from getrandom at the first call, as Redis keys its dict
 * with SipHash under a random seed.  The value differs between processes:
 * never store it, send it, or place data by it (the router stays
 * unseeded, so that a key's shard is the same after a restart).
 */
#ifndef KVD_SHASH_H
#define KVD_SHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t kvd_shash(const void *p, size_t n);

#endif
