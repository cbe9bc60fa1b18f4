/* keyspace.h - what becomes of keys once a write is applied, for those who
 * asked: Redis's keyspace notifications (notify-keyspace-events), and the
 * encoding OBJECT ENCODING reports of a value a command built.
 *
 * Both follow the writes where every write passes, whichever protocol or
 * path it came by: a shard's writer (its committer, an io thread committing
 * its own writes, an exclusive section) calls kvd_keyspace_op for each
 * request it applied, with what kvd_shard_apply found of each key
 * (kvd_wop.seen: it held a live value, an expired one, nothing; it was
 * stored or deleted) and the request's tag (write.h: the event its command
 * is, "setrange" for a SETRANGE's PUT, and how what it stores is encoded).
 * The reaper's deletions are "expired" events (kvd_keyspace_reaped).
 *
 * Events are published on RESP pub/sub (resp_pubsub.c), as Redis 7.0 does:
 * "__keyspace@0__:<key>" carries the event's name, "__keyevent@0__:<name>"
 * the key, K and E saying which, the classes (g $ x n, A) which events.
 * They are published once the write is committed and visible, so that a
 * subscriber that reads the key on the event reads the new value: a
 * committer after its batch's commit, an exclusive section at each of its
 * commits (in the order its writes were applied, so a RENAME is
 * rename_from then rename_to, as in Redis).  With notifications off (the
 * default) a write costs one relaxed load here; kvd_wop.seen is then kept
 * only for APPEND, whose encoding depends on it.
 *
 * Encodings: Redis keeps what APPEND (to a value), SETRANGE, SETBIT,
 * BITFIELD and BITOP make "raw", what INCRBYFLOAT makes "embstr" (or
 * "raw" past 44 bytes) even when it reads as an integer, and COPY makes a
 * private object (REFCOUNT 1); RENAME moves the object.  kvd stores bytes,
 * so it remembers those classes apart, per shard, in a table of key hashes
 * (16,384 entries in 4-way buckets, 128 KiB, made on first use): a write
 * that stores a value as SET would clears its entry.  A key whose entry a
 * full bucket lost, or any key after a restart (Redis re-encodes its values
 * when it loads them too), reads as SET would have encoded it.
 */
#ifndef KVD_KEYSPACE_H
#define KVD_KEYSPACE_H

#include <stdint.h>

#include "config.h"
#include "store.h"

/* X(ID, name, class): every event kvd publishes, with its class bit. */
#define KVD_EVENTS(X)                                                          \
	X(SET, "set", KVD_NOTIFY_STRING)                                       \
	X(DEL, "del", KVD_NOTIFY_GENERIC)                                      \
	X(EXPIRE, "expire", KVD_NOTIFY_GENERIC)                                \
	X(PERSIST, "persist", KVD_NOTIFY_GENERIC)                              \
	X(EXPIRED, "expired", KVD_NOTIFY_EXPIRED)                              \
	X(NEW, "new", KVD_NOTIFY_NEW)                                          \
	X(INCRBY, "incrby", KVD_NOTIFY_STRING)                                 \
	X(INCRBYFLOAT, "incrbyfloat", KVD_NOTIFY_STRING)                       \
	X(APPEND, "append", KVD_NOTIFY_STRING)                                 \
	X(SETRANGE, "setrange", KVD_NOTIFY_STRING)                             \
	X(SETBIT, "setbit", KVD_NOTIFY_STRING)                                 \
	X(RENAME_FROM, "rename_from", KVD_NOTIFY_GENERIC)                      \
	X(RENAME_TO, "rename_to", KVD_NOTIFY_GENERIC)                          \
	X(COPY_TO, "copy_to", KVD_NOTIFY_GENERIC)                              \
	X(HSET, "hset", KVD_NOTIFY_HASH)                                       \
	X(HDEL, "hdel", KVD_NOTIFY_HASH)                                       \
	X(HINCRBY, "hincrby", KVD_NOTIFY_HASH)                                 \
	X(HINCRBYFLOAT, "hincrbyfloat", KVD_NOTIFY_HASH)

enum kvd_ev {
	/* what the write's kind says: PUT "set", DEL and GETDEL "del", INCR
	 * "incrby", APPEND "append", EXPIRE "expire" (0: "persist") */
	KVD_EV_AUTO,
	/* only "expired" and "new": its command says the rest (RENAME) */
	KVD_EV_QUIET,
#define KVD_EV_ENUM(id, name, cls) KVD_EV_##id,
	KVD_EVENTS(KVD_EV_ENUM)
#undef KVD_EV_ENUM
	    KVD_NEV
};

/* How Redis 7.0 would encode a value, by how it was made. */
enum kvd_enc {
	KVD_ENC_AUTO,	 /* as SET's: int, embstr up to 44 bytes, raw */
	KVD_ENC_RAW,	 /* APPEND to a value, SETRANGE, SETBIT, BITOP, ... */
	KVD_ENC_EMBSTR,	 /* INCRBYFLOAT's: embstr up to 44 bytes, raw */
	KVD_ENC_PRIVATE, /* COPY's: as SET's, a private object (REFCOUNT 1) */
};

/* A write's tag (kvd_wop.tag; write.h): its event, whether it also sets an
 * expiry ("expire" after "set": SET ... EX, SETEX), how what it stores is
 * encoded.  0: what its kind says, encoded as SET's.  A merge (a hash's
 * HSET, HDEL, ...) has its command's event, and "del" after it when it
 * deleted the key (HDEL of the last field). */
#define KVD_TAG_EXPIRE 0x40u
/* "new" even over a key that held a value (RENAME and COPY: Redis deletes
 * the destination, then adds it) */
#define KVD_TAG_NEW 0x80u
#define KVD_TAG(ev, enc) ((uint16_t)((unsigned)(ev) | (unsigned)(enc) << 8))
#define KVD_TAG_EV(t) ((unsigned)(t)&0x3fu)
#define KVD_TAG_ENC(t) ((unsigned)(t) >> 8)

/* An io thread queuing a write of kind: bytes per item its request keeps
 * for kvd_wop.seen (1 or 0). */
uint32_t kvd_keyspace_seen(const struct kvd_config *cfg, enum kvd_wkind kind);

/* Shard shard's writer, op applied: its keys' encodings now, its events
 * kept on this thread until kvd_keyspace_publish. */
void kvd_keyspace_op(const struct kvd_config *cfg, unsigned shard,
		     const struct kvd_wop *op);
/* The reaper deleted the keys of batch t from record from on: "expired"
 * events, kept as above (before the commit: the batch's keys are gone
 * after it). */
void kvd_keyspace_reaped(const struct kvd_config *cfg, unsigned shard,
			 const struct kvd_wtxn *t, size_t from);
/* A command's own event on key (RENAME's rename_from and rename_to, once
 * its writes are committed), kept as above. */
void kvd_keyspace_event(const struct kvd_config *cfg, unsigned ev,
			struct kv_slice key);
/* RENAME's: "rename_from" on src, then "rename_to" on dst. */
void kvd_keyspace_renamed(const struct kvd_config *cfg, struct kv_slice src,
			  struct kv_slice dst);
/* Publish what this thread kept, leaving out the events of the shards
 * whose commit failed (failed[shard] nonzero; NULL: none); or drop it all
 * (a committer's batch that failed: its requests are applied again). */
void kvd_keyspace_publish(const struct kvd_config *cfg, const uint8_t *failed);
void kvd_keyspace_drop(void);
/* Shard shard was emptied or loaded whole (a replica's full copy). */
void kvd_keyspace_forget(unsigned shard);

/* OBJECT ENCODING, REFCOUNT: key's class on shard (KVD_ENC_*; any thread). */
unsigned kvd_keyspace_encoding(unsigned shard, struct kv_slice key);

#endif
