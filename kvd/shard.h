/* shard.h - the storage layer: S shards, each a journal, a memtable and an
 * LMDB environment written by checkpoints (docs/architecture.md, "The
 * journal and checkpoints").
 *
 * This module (shard*.c, sharing shard_int.h) is the only code that calls
 * LMDB, the journal (store/journal.h) and the memtable (store/memtable.h).
 * A committer's batch is computed against the layers (the batch itself,
 * the active memtable, the frozen one, LMDB), appended to the journal as
 * physical records, flushed, and only then inserted into the active
 * memtable and published there whole (kvm_publish), where readers see it.
 * A checkpointer thread per shard applies a frozen memtable to LMDB in
 * fully synced write transactions of bounded size, the last of which
 * stores the checkpoint LSN ("meta" database).
 *
 * Each shard directory holds the journal's segment files and one LMDB
 * environment with three databases: "meta" (the checkpoint LSN), "kv" maps
 * a key to its stored value, and
 * "exp" (MDB_DUPSORT) maps big-endian(expire_ms) to the keys expiring then,
 * so expired keys are found in time order without scanning.  Checkpoints keep
 * it exact; entries a store written before them left behind are only hints:
 * the value's own header decides.
 *
 * A stored value is one flag byte (bit 0: an expiry follows; bits 1-3: the
 * value's type), then (if bit 0 is set) the expiry as a
 * little-endian u64 of Unix milliseconds, then the user's bytes:
 *
 *     +-------+------------------+-----------------+
 *     | flags | expire_ms (opt.) | value ...       |
 *     +-------+------------------+-----------------+
 *
 * Readers (io threads) use kvd_reader: per read (per request between
 * kvd_reader_pin and kvd_reader_unpin), the active and frozen memtables
 * and the batches each had published (loaded before the LMDB snapshot: a
 * committer's batch is seen all or none), then one MDB_NOTLS read
 * transaction per shard, renewed lazily and reset at the end of each loop
 * turn.  kvd_reader_reset is a reader's quiescent point: a retired
 * memtable is unpublished, then freed, only after every reader passed one.
 * Writers (one committer per shard) use the kvd_shard_* calls, one batch at
 * a time, from that shard's committer thread only.
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

/* Value types.  Every value carries one, through every layer (journal
 * records, memtable versions, LMDB's flag byte, so replication, backups
 * and recovery too).  The store gives them no meaning beyond this: a
 * plain value (a string: every value stored before types were) is 0, and
 * kvd_reader_get and the string writes answer KV_WRONG_TYPE for any
 * other; the others are the server's (kvd/doc/: hashes), made and changed
 * by merge operations (KVD_W_MERGE). */
#define KVD_VT_PLAIN 0u
#define KVD_VT_MAX 7u

/* A merge operation (KVD_W_MERGE; RocksDB's merge operator is the model):
 * the server registers them at open, by id, and a committer calls one to
 * compute a key's new value from its old one and an operand, inside the
 * batch, against the layers: no round trip, no lock, no lost update; the
 * journal gets the resulting value (or a tombstone), as for any write. */
struct kv_buf;
struct kvd_merge {
	/* in */
	struct kv_slice key;
	struct kv_slice old; /* the key's value, when live */
	int live;	     /* 1: old, type and exp are the key's value */
	unsigned type;	     /* its KVD_VT_* */
	uint64_t exp;	     /* its expiry (0: none); a new value keeps it */
	struct kv_slice operand;
	uint64_t now;
	/* out: action, and status KV_OK, or a refusal (KV_WRONG_TYPE,
	 * KV_NOT_INTEGER, ...) with action KVD_MERGE_KEEP */
	int action;
	unsigned new_type;    /* KVD_MERGE_STORE: the new value's type */
	struct kv_buf *image; /* KVD_MERGE_STORE: the new value, appended */
	int status;
	int64_t result;	      /* kvd_wop.result */
	struct kv_buf *reply; /* bytes for kvd_wop.val (empty: none) */
};
enum { KVD_MERGE_KEEP, KVD_MERGE_STORE, KVD_MERGE_DELETE };
/* 0, or ENOMEM (the batch fails). image and reply are empty at the call. */
typedef int (*kvd_merge_fn)(void *ctx, struct kvd_merge *m);
#define KVD_MERGE_MAX 16
struct kvd_merge_op {
	kvd_merge_fn fn; /* NULL: no operation of that id */
	void *ctx;
};

struct kvd_store_opts {
	const char *dir;
	unsigned want_shards; /* used only when the directory is new */
	uint64_t map_size;
	unsigned max_readers;
	uint64_t memtable_size; /* freeze the active memtable here; 0: auto */
	unsigned checkpoint_interval_ms; /* or when it is this old */
	uint64_t segment_size;		 /* journal segment bytes */
	int truncate_corrupt; /* cut a corrupt journal instead of refusing */
	/* merge operations by id (KVD_W_MERGE's flags), copied at open */
	const struct kvd_merge_op *merge;
	unsigned nmerge; /* at most KVD_MERGE_MAX */
};

struct kvd_shard_stat {
	uint64_t entries;
	uint64_t used_bytes; /* pages in use, from the last commit */
	uint64_t file_bytes;
	uint64_t map_size;
	uint64_t expiring; /* entries in the expiry index */
	/* the write path (counters since start, gauges now) */
	uint64_t journal_bytes;	    /* appended */
	uint64_t journal_fsyncs;    /* flushes */
	uint64_t spares_ahead;	    /* segments made ahead by a helper */
	uint64_t spares_inline;	    /* made by the committer: a stall each */
	uint64_t spares_held;	    /* spare segments ready now */
	uint64_t memtable_bytes;    /* active + frozen arenas */
	uint64_t memtable_spare;    /* arena chunks kept for the next one */
	uint64_t memtable_size;	    /* where the active one is frozen */
	uint64_t checkpoints;	    /* completed */
	uint64_t checkpoint_ns;	    /* the last one's duration */
	uint64_t checkpoint_lsn;    /* the last one's LSN */
	uint64_t backpressure;	    /* batches that waited for a checkpoint */
	uint64_t checkpoint_failed; /* 1 when checkpoints stopped this shard */
};

/* Open (or create) the data directory and every shard; logs each shard.
 * 0, or -1 with a one-line reason in err. */
int kvd_store_open(struct kvd_store **out, const struct kvd_store_opts *o,
		   char *err, size_t errlen);
void kvd_store_close(struct kvd_store *st);
unsigned kvd_store_nshards(const struct kvd_store *st);
/* Flush shard i's journal (async mode's timer; shard i's committer only):
 * 0 or a KV_* code (KV_SHARD_FAILED: never retried). */
int kvd_store_sync(struct kvd_store *st, unsigned i);
/* Clear reader slots left by dead processes; returns how many. */
int kvd_store_reader_check(struct kvd_store *st, unsigned i);

/* ---- read side (io threads) ---- */

struct kvd_reader *kvd_reader_new(struct kvd_store *st);
void kvd_reader_free(struct kvd_reader *r);
/* End of a loop turn, or after writes completed: drop all snapshots. */
void kvd_reader_reset(struct kvd_reader *r);

/* A request that reads several keys: between pin and unpin, each shard's
 * memtables are looked at as they were at the request's first read of that
 * shard (one view per shard), so the request sees each shard's batches
 * whole.  Without a pin each read takes its own view.  A pinned request
 * must not wait for its own writes (they would not show). */
void kvd_reader_pin(struct kvd_reader *r);
void kvd_reader_unpin(struct kvd_reader *r);

/* KV_OK with *val pointing into the map (valid until kvd_reader_reset),
 * KV_NOT_FOUND, KV_WRONG_TYPE (a value of a type other than
 * KVD_VT_PLAIN; *val is set all the same), or KV_INTERNAL. */
int kvd_reader_get(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, struct kv_slice *val);
/* A value of any type: KV_OK with *val, *type (KVD_VT_*) and *exp (its
 * absolute expiry, 0 for none), KV_NOT_FOUND or KV_INTERNAL. */
int kvd_reader_getv(struct kvd_reader *r, unsigned shard, const void *key,
		    size_t klen, uint64_t now, struct kv_slice *val,
		    unsigned *type, uint64_t *exp);
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

/* Called per key in order, with its value's type (KVD_VT_*); return
 * nonzero to stop. */
typedef int (*kvd_scan_fn)(void *arg, struct kv_slice key, struct kv_slice val,
			   unsigned type);

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
	KVD_W_PUT,    /* items: key + value pairs, of type vtype */
	KVD_W_DEL,    /* items: keys; result: keys deleted */
	KVD_W_INCR,   /* one key; delta; result: new value */
	KVD_W_APPEND, /* one key + value; result: new length */
	KVD_W_EXPIRE, /* one key; expire_at (0 = persist); result 1, or 0
			 when persisting a key that has no expiry */
	KVD_W_GETDEL, /* one key; the old value is copied out */
	KVD_W_FLUSH,  /* no items: empty the shard */
	/* one key + operand: the merge operation flags names (registered at
	 * open, kvd_store_opts.merge) computes the key's new value from its
	 * old one (kvd_merge_fn); result and val as the operation says */
	KVD_W_MERGE,
	KVD_W_REPL, /* a replica: a primary's records, from LSN lsn on;
			 items: [u8 type][u32 len][journal payload]... */
	/* A replica's full copy; run by the committer alone, not through
	 * kvd_shard_apply: kvd_shard_repl_reset(lsn), kvd_shard_repl_load
	 * (items). */
	KVD_W_RESET,
	KVD_W_LOAD,
	/* SAVE: no items; the committer checkpoints its shard alone, outside
	 * any batch (kvd_shard_checkpoint). */
	KVD_W_CHECKPOINT,
};

/* One write, as the committer applies it.  items holds nitems entries of
 * [u16 klen][u32 vlen][key][value], native-endian, built by the io thread. */
/* A PUT flag of the server's own (not on the native wire): copy the old
 * value out, as GETDEL does (RESP's SET ... GET and GETSET); an old value
 * of a type other than KVD_VT_PLAIN fails it with KV_WRONG_TYPE. */
#define KVD_PUT_GETOLD 0x80u

struct kvd_wop {
	uint8_t kind;
	uint8_t flags; /* KV_PUT_*, KVD_PUT_GETOLD; KVD_W_MERGE: its id */
	uint8_t vtype; /* KVD_W_PUT: the type of the values it stores */
	uint32_t nitems;
	uint64_t expire_at; /* Unix ms, 0 for none */
	int64_t delta;
	uint64_t lsn; /* KVD_W_REPL: the first record's LSN */
	const uint8_t *items;
	size_t items_len;
	/* Not the store's: what the write's keys become for keyspace.h's
	 * observers (a keyspace event, an encoding), read after apply. */
	uint16_t tag;
	/* NULL, or one byte per item that kvd_shard_apply fills with
	 * KVD_SEEN_* (a PUT then looks its keys up: a plain PUT does not). */
	uint8_t *seen;
	/* results */
	int status; /* KV_OK, KV_NOT_FOUND, KV_EXISTS, KV_NOT_INTEGER, ... */
	int64_t result; /* INCR refused with KV_NOT_INTEGER: 1 on overflow */
	uint8_t *val;	/* GETDEL: malloc'd copy of the old value */
	uint32_t vlen;
};

#define KVD_ITEM_HDR 6

/* kvd_wop.seen: what the apply found and did, per item. */
#define KVD_SEEN_DONE 1u    /* the key was stored or deleted */
#define KVD_SEEN_LIVE 2u    /* it held a live value before */
#define KVD_SEEN_EXPIRED 4u /* it held an expired value before */
#define KVD_SEEN_GONE 8u    /* a merge deleted it (with DONE) */

/* Begin a batch on shard i (its committer thread only).  Freezes the active
 * memtable first when it is full or old; when the previous one is still
 * being checkpointed and this one is full, waits (backpressure).  0 or a
 * KV_* code (KV_SHARD_FAILED: the shard takes no more writes). */
int kvd_shard_begin(struct kvd_store *st, unsigned i, struct kvd_wtxn **out);
/* The same, for a batch of deletes only (DEL, GETDEL, FLUSHALL, expiry),
 * which frees room: while a checkpoint fails for room (a full map or
 * disk) it goes into the active memtable though it is full, up to twice
 * memtable-size, instead of waiting for that checkpoint. */
int kvd_shard_begin_deletes(struct kvd_store *st, unsigned i,
			    struct kvd_wtxn **out);
/* The same, for a writer that must not wait (an io thread committing its
 * own writes, async mode): -EAGAIN, with nothing begun, where
 * kvd_shard_begin would freeze the memtable or checkpoint first. */
int kvd_shard_begin_nowait(struct kvd_store *st, unsigned i,
			   struct kvd_wtxn **out);
/* Compute one op against the batch so far and the layers below; its
 * records join the batch.  0 after setting op->status; a KV_* code when
 * the batch itself failed and must be aborted. */
int kvd_shard_apply(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		    uint64_t max_value);
/* Tombstone up to limit expired keys; returns how many, or a negative KV_*. */
int kvd_shard_reap(struct kvd_wtxn *t, uint64_t now, unsigned limit);
/* The records the batch holds so far, and fn on the key of each from
 * record from on (valid during the call; a FLUSHALL has none): after
 * kvd_shard_reap, from the count before it, the keys it reaped. */
size_t kvd_shard_batch_len(const struct kvd_wtxn *t);
void kvd_shard_batch_keys(const struct kvd_wtxn *t, size_t from,
			  void (*fn)(void *arg, struct kv_slice key),
			  void *arg);
/* Append the batch to the journal, flush it when sync, then make it
 * visible in the memtable.  0, or a KV_* code (the batch is gone either
 * way; KV_SHARD_FAILED: the shard takes no more writes). */
int kvd_shard_commit(struct kvd_wtxn *t, int sync);
void kvd_shard_abort(struct kvd_wtxn *t);
/* Committer housekeeping between batches: recycle checkpointed journal
 * segments, freeze an old memtable, drop the committer's snapshot. */
void kvd_shard_tick(struct kvd_store *st, unsigned i, uint64_t now);
/* Checkpoint everything shard i acknowledged and wait until LMDB holds it
 * (backups, clean shutdown; its committer thread only).  0 or a KV_*. */
int kvd_shard_checkpoint(struct kvd_store *st, unsigned i);
/* 1 when shard i takes no more writes (a failed journal write or flush, or
 * a failed checkpoint). */
int kvd_shard_failed(struct kvd_store *st, unsigned i);

/* WATCH (resp_multi.c): a batch stores key; watchers of it see a change.
 * Called by the committer of the key's shard, or by an exclusive
 * section (committer.h).  Nearly free when nothing is watched. */
void kvd_watch_touch(const void *key, size_t klen);

/* ---- replication (repl.c, replica.c) ---- */

/* The last LSN of shard i that may be sent to replicas: written to the
 * journal, and flushed in sync mode (any thread). */
uint64_t kvd_shard_pub_lsn(struct kvd_store *st, unsigned i);
/* Shard i's directory, where its journal segments are (kvj_reader). */
const char *kvd_shard_dir(struct kvd_store *st, unsigned i);
/* Keep shard i's journal from LSN lsn on for replicas (0: nothing), as
 * long as what is kept stays within backlog bytes a shard (any thread). */
void kvd_shard_hold(struct kvd_store *st, unsigned i, uint64_t lsn);
void kvd_store_set_backlog(struct kvd_store *st, uint64_t bytes);
/* A replica's full copy, on shard i's committer: wipe the shard, make its
 * checkpoint LSN cut and start its journal at cut + 1 (reset); then load
 * chunks of [u32 klen][u32 vlen][key][stored value] pairs into LMDB.
 * 0 or a KV_* code. */
int kvd_shard_repl_reset(struct kvd_store *st, unsigned i, uint64_t cut);
int kvd_shard_repl_load(struct kvd_store *st, unsigned i, const uint8_t *p,
			size_t n);

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
/* The checkpoint LSN shard i's snapshot holds. */
uint64_t kvd_snapshot_lsn(struct kvd_snapshot *sn, unsigned i);
/* Append shard i's pairs from key start on ([u32 klen][u32 vlen][key]
 * [stored value], little-endian) to out until it holds max bytes; next
 * gets the key to start the next chunk from (empty: done).  0 or a KV_*
 * code. */
struct kv_buf;
int kvd_snapshot_chunk(struct kvd_snapshot *sn, unsigned i,
		       struct kv_slice start, size_t max, struct kv_buf *out,
		       struct kv_buf *next);

#endif
