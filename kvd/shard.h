/* shard.h - the storage layer: S LMDB environments, one per shard.
 *
 * This module (shard*.c, sharing shard_int.h) is the only code that calls
 * LMDB.  Each shard directory holds one
 * environment with two databases: "kv" maps a key to its stored value, and
 * "exp" (MDB_DUPSORT) maps big-endian(expire_ms) to the keys expiring then,
 * so expired keys are found in time order without scanning.  An entry there
 * is only a hint: the value's own header decides, so an overwritten key's
 * stale entry is simply dropped when the reaper reaches it.
 *
 * A stored value is one flag byte, then (if bit 0 is set) the expiry as a
 * little-endian u64 of Unix milliseconds, then the user's bytes:
 *
 *     +-------+------------------+-----------------+
 *     | flags | expire_ms (opt.) | value ...       |
 *     +-------+------------------+-----------------+
 *
 * Readers (io threads) use kvd_reader: one MDB_NOTLS read transaction per
 * shard, renewed lazily and reset at the end of each loop turn so no snapshot
 * is held while the thread sleeps.  Writers (one committer per shard) use the
 * kvd_shard_* calls inside a single write transaction per batch.
 */
#ifndef KVD_SHARD_H
#define KVD_SHARD_H

#include <stddef.h>
#include <stdint.h>

struct kvd_store;
struct kvd_reader;
struct kvd_wtxn;

struct kv_slice {
	const uint8_t *p;
	size_t n;
};

struct kvd_store_opts {
	const char *dir;
	unsigned want_shards; /* used only when the directory is new */
	uint64_t map_size;
	unsigned max_readers;
	/* async durability: commits write but do not fsync (MDB_NOSYNC).
	 * Otherwise commits sync their data but not their meta page
	 * (MDB_NOMETASYNC): the committer answers writers only after a later
	 * sync (committer.c explains). */
	int nosync;
};

struct kvd_shard_stat {
	uint64_t entries;
	uint64_t used_bytes; /* pages in use, from the last commit */
	uint64_t file_bytes;
	uint64_t map_size;
	uint64_t expiring; /* entries in the expiry index */
};

/* Open (or create) the data directory and every shard; logs each shard.
 * 0, or -1 with a one-line reason in err. */
int kvd_store_open(struct kvd_store **out, const struct kvd_store_opts *o,
		   char *err, size_t errlen);
void kvd_store_close(struct kvd_store *st);
unsigned kvd_store_nshards(const struct kvd_store *st);
/* Flush shard i to disk (async mode's timer); 0 or an errno. */
int kvd_store_sync(struct kvd_store *st, unsigned i);
/* Clear reader slots left by dead processes; returns how many. */
int kvd_store_reader_check(struct kvd_store *st, unsigned i);

/* ---- read side (io threads) ---- */

struct kvd_reader *kvd_reader_new(struct kvd_store *st);
void kvd_reader_free(struct kvd_reader *r);
/* End of a loop turn, or after writes completed: drop all snapshots. */
void kvd_reader_reset(struct kvd_reader *r);

/* KV_OK with *val pointing into the map (valid until kvd_reader_reset),
 * KV_NOT_FOUND, or KV_INTERNAL. */
int kvd_reader_get(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, struct kv_slice *val);
/* KV_OK with *ttl_ms the time left, or -1 for no expiry; KV_NOT_FOUND. */
int kvd_reader_ttl(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, int64_t *ttl_ms);

struct kvd_scan {
	struct kv_slice prefix; /* keys must start with it */
	struct kv_slice start;	/* first key, inclusive (may be empty) */
	struct kv_slice end;	/* stop before it (empty: no bound) */
	unsigned limit;
	size_t max_bytes; /* stop early once this much was emitted */
	int keys_only;
};

/* Called per key in order; return nonzero to stop. */
typedef int (*kvd_scan_fn)(void *arg, struct kv_slice key, struct kv_slice val);

/* Merge every shard in key order.  *next is set to the key the next call
 * should start from when more may follow, else to an empty slice; it points
 * into the map.  KV_OK or KV_INTERNAL. */
int kvd_reader_scan(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next);
/* Sizes of shard i, read through this reader's snapshot. */
int kvd_reader_stat(struct kvd_reader *r, unsigned i, struct kvd_shard_stat *s);
/* Live keys (optionally with a prefix) across all shards. */
int kvd_reader_count(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count);

/* ---- write side (committers) ---- */

enum kvd_wkind {
	KVD_W_PUT,    /* items: key + value pairs */
	KVD_W_DEL,    /* items: keys; result: keys deleted */
	KVD_W_INCR,   /* one key; delta; result: new value */
	KVD_W_APPEND, /* one key + value; result: new length */
	KVD_W_EXPIRE, /* one key; expire_at (0 = persist); result 1, or 0
			 when persisting a key that has no expiry */
	KVD_W_GETDEL, /* one key; the old value is copied out */
	KVD_W_FLUSH,  /* no items: empty the shard */
};

/* One write, as the committer applies it.  items holds nitems entries of
 * [u16 klen][u32 vlen][key][value], native-endian, built by the io thread. */
/* A PUT flag of the server's own (not on the native wire): copy the old
 * value out, as GETDEL does (RESP's SET ... GET and GETSET). */
#define KVD_PUT_GETOLD 0x80u

struct kvd_wop {
	uint8_t kind;
	uint8_t flags; /* KV_PUT_*, KVD_PUT_GETOLD */
	uint32_t nitems;
	uint64_t expire_at; /* Unix ms, 0 for none */
	int64_t delta;
	const uint8_t *items;
	size_t items_len;
	/* results */
	int status; /* KV_OK, KV_NOT_FOUND, KV_EXISTS, KV_NOT_INTEGER, ... */
	int64_t result;
	uint8_t *val; /* GETDEL: malloc'd copy of the old value */
	uint32_t vlen;
};

#define KVD_ITEM_HDR 6

/* Begin shard i's write transaction (call from its committer thread only). */
int kvd_shard_begin(struct kvd_store *st, unsigned i, struct kvd_wtxn **out);
/* Apply one op.  0 after setting op->status; a KV_* code when the
 * transaction itself failed and must be aborted (map full, disk full, ...).
 * Failures are logged here, with LMDB's own words. */
int kvd_shard_apply(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		    uint64_t max_value);
/* Delete up to limit expired keys; returns how many, or a negative KV_*. */
int kvd_shard_reap(struct kvd_wtxn *t, uint64_t now, unsigned limit);
/* 0, or a KV_* code (the transaction is gone either way). */
int kvd_shard_commit(struct kvd_wtxn *t);
void kvd_shard_abort(struct kvd_wtxn *t);

/* ---- backups ---- */

struct kvd_snapshot;

/* One read transaction per shard, opened now (while writers are paused, they
 * form one cut).  0 or a KV_* code. */
int kvd_snapshot_begin(struct kvd_store *st, struct kvd_snapshot **out);
/* Write shard i of the snapshot as a fresh, compact environment in dir
 * (created), flushed to disk.  Adds to *keys and *bytes.  0, or -1 with a
 * reason in err. */
int kvd_snapshot_copy(struct kvd_snapshot *sn, unsigned i, const char *dir,
		      uint64_t *keys, uint64_t *bytes, char *err,
		      size_t errlen);
void kvd_snapshot_end(struct kvd_snapshot *sn);

#endif
