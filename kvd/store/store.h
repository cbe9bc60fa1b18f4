/* store.h - the storage engine: S shards, each a journal, a memtable and an
 * LMDB environment written by checkpoints, and one committer thread per
 * shard that writes it (docs/architecture.md, "The journal and
 * checkpoints").  The one header the rest of kvd includes; the engine
 * includes nothing of the server (kvd/store/ is a leaf: a test of the
 * build checks it).
 *
 * This module (shard*.c, sharing shard_int.h) is the only code that calls
 * LMDB, the journal (journal.h) and the memtable (memtable.h).  A
 * committer's batch is computed against the layers (the batch itself, the
 * active memtable, the frozen one, LMDB), appended to the journal as
 * physical records, flushed, and only then inserted into the active
 * memtable and published there whole (kvm_publish), where readers see it.
 * A checkpointer thread per shard applies a frozen memtable to LMDB in
 * fully synced write transactions of bounded size, the last of which
 * stores the checkpoint LSN ("meta" database).
 *
 * Each shard directory holds the journal's segment files and one LMDB
 * environment with three databases: "meta" (the checkpoint LSN), "kv" maps
 * a key to its stored value, and "exp" (MDB_DUPSORT) maps
 * big-endian(expire_ms) to the keys expiring then, so expired keys are
 * found in time order without scanning.  Checkpoints keep it exact;
 * entries a store written before them left behind are only hints: the
 * value's own header decides.
 *
 * A stored value is one flag byte (bit 0: an expiry follows; bits 1-3: the
 * value's type), then (if bit 0 is set) the expiry as a
 * little-endian u64 of Unix milliseconds, then the user's bytes:
 *
 *     +-------+------------------+-----------------+
 *     | flags | expire_ms (opt.) | value ...       |
 *     +-------+------------------+-----------------+
 *
 * Keyspaces.  Every key belongs to a keyspace, named by one byte: 0 for
 * the key space of RESP and the native protocol (strings, hashes), the
 * others the server's own (KVD_KS_*: documents, the catalog), so a key of
 * one never meets a key of another.  The calls without a keyspace
 * argument are keyspace 0's.  Only keyspace 0 is counted (kvd_reader_count,
 * kvd_shard_stat.entries), expired by time (the "exp" index) and seen by
 * the WATCH hook; every keyspace is journaled, checkpointed, replicated,
 * copied by backups and emptied by KVD_W_FLUSH alike.  On disk keyspace 0
 * is "kv", keys as they are, as before keyspaces were; the others share
 * the database "kx", each key after its keyspace byte.
 *
 * Readers (io threads) use kvd_reader: per read (per request between
 * kvd_reader_pin and kvd_reader_unpin), the active and frozen memtables
 * and the batches each had published (loaded before the LMDB snapshot: a
 * committer's batch is seen all or none), then one MDB_NOTLS read
 * transaction per shard, renewed lazily and reset at the end of each loop
 * turn.  kvd_reader_reset is a reader's quiescent point: a retired
 * memtable is unpublished, then freed, only after every reader passed one.
 * Writers (one committer per shard) use the kvd_shard_* calls, one batch at
 * a time.
 *
 * The committers (committer.c, at the end of this header) are those
 * writers: one thread per shard that takes the write requests queued for
 * its shard, commits them as one batch (group commit) and hands each back
 * through the hooks given at start.
 *
 * Errors.  A call returns 0 (KV_OK) or a KV_* status (common/kv_status.h;
 * kv_status_text names each): KV_NOT_FOUND and its kind are answers,
 * KV_INTERNAL an LMDB or allocation failure (logged here), KV_MAP_FULL and
 * KV_DISK_FULL a lack of room (the batch is refused, the shard goes on),
 * KV_SHARD_FAILED a shard whose journal write or flush, or checkpoint,
 * failed: it refuses writes until a restart, never retrying a flush
 * (PostgreSQL's fsync lesson), while reads go on.  Calls that open, copy
 * or name files return -1 with a one-line reason in err instead; a few
 * say otherwise where they are declared.
 *
 * Threading.  One thread opens and closes the store, with no other call
 * under way.  A shard has one writer at a time, the holder of its
 * committer's role: its committer thread, an io thread committing its own
 * writes (async mode), or an exclusive section; the kvd_shard_* write and
 * replication calls are that writer's only ("the writer" below).  A
 * kvd_reader belongs to one thread at a time and never waits for a
 * writer.  Calls marked "any thread" may be made from anywhere, at any
 * time while the store is open.  Nothing here is async-signal-safe.
 *
 * Ownership.  The store owns every slice it returns: a reader's point into
 * LMDB's map or a memtable and stay valid until that reader's
 * kvd_reader_reset, which its thread calls at least once a loop turn.
 * Keys and values handed in are read during the call (a batch's until its
 * commit, which is the caller's: kvd_wop.items).  A write request
 * (kvd_wreq) is the submitter's but while it is out, from
 * kvd_committer_submit to the hook that hands it back; the old value a
 * write copies out (kvd_wop.val) is malloc'd and then the submitter's to
 * free.
 *
 * Log lines go through store_log.h, which the program implements; the
 * clocks are clock.h's.
 */
#ifndef KVD_STORE_H
#define KVD_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/* A store has 1 to KVD_MAX_SHARDS shards. */
#define KVD_MAX_SHARDS 256

/* Keyspaces (see Keyspaces above).  A key of keyspace 0 is at most 511
 * bytes (LMDB's limit), of another at most 510 (its byte goes first). */
#define KVD_KS_KV 0u	   /* strings and hashes */
#define KVD_KS_DOC 'D'	   /* documents (kvd/doc/) */
#define KVD_KS_CATALOG 'C' /* databases and collections (kvd/doc/) */
#define KVD_KS_INDEX 'I'   /* secondary index entries (to come) */
#define KVD_KS_OTHER 'X'   /* anything else the server keeps */

struct kvd_store;
struct kvd_reader;
struct kvd_wtxn;

/* ---- opening ---- */

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
	/* Side writes (kvd_merge_side): puts and deletes of other keys of
	 * this shard, of any keyspace, applied after the key's own write in
	 * the same batch when status is KV_OK (whatever the action), so they
	 * are journaled, made visible and replayed with it as physical
	 * records (kvd/doc's index entries).  Never the merge's own key. */
	struct kv_buf *side;
};
enum { KVD_MERGE_KEEP, KVD_MERGE_STORE, KVD_MERGE_DELETE };
/* Add a side write to m: a put of v (vtype KVD_VT_PLAIN, no expiry) under
 * key k of keyspace ks, or its delete (del, v ignored).  0, or ENOMEM. */
int kvd_merge_side(struct kvd_merge *m, unsigned ks, int del, const void *k,
		   size_t kn, const void *v, size_t vn);
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
	/* want_shards asked for explicitly: an existing directory of another
	 * count is refused before anything of it is opened */
	int exact_shards;
	uint64_t map_size;
	unsigned max_readers;
	uint64_t memtable_size; /* freeze the active memtable here; 0: auto */
	unsigned checkpoint_interval_ms; /* or when it is this old */
	uint64_t segment_size;		 /* journal segment bytes */
	int truncate_corrupt; /* cut a corrupt journal instead of refusing */
	/* merge operations by id (KVD_W_MERGE's flags), copied at open */
	const struct kvd_merge_op *merge;
	unsigned nmerge; /* at most KVD_MERGE_MAX */
	/* Called for every key a batch stores (a PUT record, not a delete),
	 * by the shard's writer while it builds the batch, before its commit;
	 * NULL: nobody asks.  It must be quick and must not call the store.
	 * (kvd: WATCH marks the key's watchers, resp_multi.c.) */
	void (*stored)(void *arg, const void *key, size_t klen);
	void *hook_arg;
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

/* Open (or create) the data directory and every shard: take the
 * directory's lock, replay each journal above its checkpoint (a torn tail
 * is cut; corruption refuses the open unless o->truncate_corrupt), start
 * each shard's checkpointer; logs a line per shard.  0 with *out set, or
 * -1 with a one-line reason in err (nothing left open). */
int kvd_store_open(struct kvd_store **out, const struct kvd_store_opts *o,
		   char *err, size_t errlen);
/* Stop the checkpointers, close every shard and the journals (without a
 * flush: kvd_committers_stop flushes and checkpoints first), release the
 * lock, free.  Every reader must have been freed.  NULL is a no-op. */
void kvd_store_close(struct kvd_store *st);
/* S, from the manifest (any thread). */
unsigned kvd_store_nshards(const struct kvd_store *st);
/* Flush shard i's journal (async mode's timer; the writer): 0 or a KV_*
 * code (KV_SHARD_FAILED: never retried). */
int kvd_store_sync(struct kvd_store *st, unsigned i);
/* Clear shard i's reader slots left by dead processes (LMDB's
 * mdb_reader_check; the writer, now and then); how many (0 also when
 * LMDB could not tell). */
int kvd_store_reader_check(struct kvd_store *st, unsigned i);

/* ---- read side (io threads) ---- */

/* A reader of every shard, for one thread at a time (any thread may make
 * or free one); NULL when out of memory.  Free it before the store. */
struct kvd_reader *kvd_reader_new(struct kvd_store *st);
void kvd_reader_free(struct kvd_reader *r);
/* End of a loop turn, or after writes completed: drop all snapshots.  The
 * reader's quiescent point: what it returned before is invalid after. */
void kvd_reader_reset(struct kvd_reader *r);

/* A request that reads several keys: between pin and unpin, each shard's
 * memtables are looked at as they were at the request's first read of that
 * shard (one view per shard), so the request sees each shard's batches
 * whole.  Without a pin each read takes its own view.  A pinned request
 * must not wait for its own writes (they would not show). */
void kvd_reader_pin(struct kvd_reader *r);
void kvd_reader_unpin(struct kvd_reader *r);

/* Reads at time now (Unix ms: a value expired by then is absent).
 * KV_OK with *val pointing into the map (valid until kvd_reader_reset),
 * KV_NOT_FOUND, KV_WRONG_TYPE (a value of a type other than
 * KVD_VT_PLAIN; *val is set all the same), or KV_INTERNAL. */
int kvd_reader_get(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, struct kv_slice *val);
/* A value of any type: KV_OK with *val, *type (KVD_VT_*) and *exp (its
 * absolute expiry, 0 for none), KV_NOT_FOUND or KV_INTERNAL. */
int kvd_reader_getv(struct kvd_reader *r, unsigned shard, const void *key,
		    size_t klen, uint64_t now, struct kv_slice *val,
		    unsigned *type, uint64_t *exp);
/* A hint before a batch of gets: start loading what a get of key in
 * keyspace ks on shard will read in the memtables, step 0 their hash
 * slots, step 1 (once every key of the batch had its step 0) the nodes
 * the slots name.  The gets then find in cache what would otherwise be
 * two dependent misses each (a range of documents fetched by an index).
 * No effect on what any read returns. */
void kvd_reader_prefetch(struct kvd_reader *r, unsigned shard, unsigned ks,
			 const void *key, size_t klen, int step);
/* A key of keyspace ks: as kvd_reader_getv (keyspaces other than 0 keep
 * no expiry). */
int kvd_reader_getk(struct kvd_reader *r, unsigned shard, unsigned ks,
		    const void *key, size_t klen, uint64_t now,
		    struct kv_slice *val, unsigned *type);
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
	unsigned ks; /* the keyspace scanned (keys are given without it) */
};

/* Called per key in order, with its value's type (KVD_VT_*) and absolute
 * expiry (Unix ms, 0 for none); return 0 to go on, KVD_SCAN_STOP to end
 * the call before this key, untaken (*next is then this key: a reader
 * that must give its thread back mid-batch), anything else to fail. */
#define KVD_SCAN_STOP 0x53544f50 /* "STOP" */
typedef int (*kvd_scan_fn)(void *arg, struct kv_slice key, struct kv_slice val,
			   unsigned type, uint64_t exp);

/* Merge every shard in key order.  *next is set to the key the next call
 * should start from when more may follow, else to an empty slice; it points
 * into the map.  KV_OK or KV_INTERNAL. */
int kvd_reader_scan(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next);
/* Sizes of shard i, read through this reader's snapshot: KV_OK, or
 * KV_INTERNAL with what could be read. */
int kvd_reader_stat(struct kvd_reader *r, unsigned i, struct kvd_shard_stat *s);
/* Live keys (optionally with a prefix) across all shards: KV_OK or
 * KV_INTERNAL. */
int kvd_reader_count(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count);

/* ---- write side (the writer of a shard) ---- */

/* What a write does.  Records stay physical whatever the kind: a kind is
 * computed against the layers into the key's resulting value (a PUT
 * record) or a tombstone, so replay and replicas never run it again.  A
 * new kind is added here and applied in shard_write.c (kvd_shard_apply). */
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
	/* A bulk merge (shard_bulk.c): the shard's checkpointer, after the
	 * writes before it, runs merge flags over the live keys of keyspace ks
	 * (not 0) from the item's key on, below the key its value starts
	 * with ([u16 n][key]: the end, exclusive), the rest of the value
	 * the operand; delta keys at most (0: no bound).  Each merge keeps
	 * its key; its side writes go straight into LMDB, unjournaled.
	 * result: keys read, and val the key to go on from (none: the range
	 * is done); a merge's refusal: its status, or its result < 0 and
	 * its reply in val. */
	KVD_W_BULK,
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
	uint8_t ks;    /* the keyspace of its keys (0: strings, hashes) */
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

/* Begin a batch on shard i (the writer; one batch at a time).  Freezes the active
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
/* Compute one op against the batch so far and the layers below, at time
 * now; its records join the batch.  0 after setting op->status (and
 * op->result, op->val, op->seen); a KV_* code when the batch itself
 * failed and must be aborted.  Values over max_value bytes are refused
 * (KV_VALUE_TOO_LARGE in op->status). */
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
 * way; KV_SHARD_FAILED: the shard takes no more writes).  Abort drops it
 * unwritten. */
int kvd_shard_commit(struct kvd_wtxn *t, int sync);
void kvd_shard_abort(struct kvd_wtxn *t);
/* kvd_shard_commit in sync mode, in two halves, for a writer that flushes
 * the journal itself without waiting (an io thread, through its ring):
 * begin appends the batch to the journal and sets *fd to the descriptor
 * to flush (-1: nothing to flush, call done at once) and *fault to a
 * negative errno when a test shim fails that flush (do not issue it; done
 * then fails the batch).  0, or a KV_* code: the batch is gone, as
 * kvd_shard_commit's.  After 0, t stays the writer's until done, which
 * takes the flush's result (0 or a negative errno), makes the batch
 * visible, and returns as kvd_shard_commit.  Nothing else may write the
 * shard in between. */
int kvd_shard_commit_begin(struct kvd_wtxn *t, int *fd, int *fault);
int kvd_shard_commit_done(struct kvd_wtxn *t, int res);
/* Committer housekeeping between batches: recycle checkpointed journal
 * segments, freeze an old memtable, drop the committer's snapshot. */
void kvd_shard_tick(struct kvd_store *st, unsigned i, uint64_t now);
/* 1 when shard i's journal is down to its reserve of spare segments and
 * no helper is making the next one: its committer's next tick would start
 * one.  A writer that commits without the committer (an io thread) asks
 * after its batch and wakes the committer, so the segment is made ahead
 * rather than by a write that crosses into it.  The writer only. */
int kvd_shard_spare_wanted(struct kvd_store *st, unsigned i);
/* Checkpoint everything shard i acknowledged and wait until LMDB holds it
 * (backups, SAVE, clean shutdown; the writer).  0 or a KV_*. */
int kvd_shard_checkpoint(struct kvd_store *st, unsigned i);
/* KVD_W_BULK, by shard i's writer: handed to its checkpointer, which sets
 * op's status, result and val as KVD_W_BULK says and then calls done(a,
 * b) (KV_OK); or refused at once (a KV_* code, done not called). */
int kvd_shard_bulk(struct kvd_store *st, unsigned i, struct kvd_wop *op,
		   void (*done)(void *a, void *b), void *a, void *b);
/* A bulk merge's marker: the key of keyspace KVD_KS_OTHER whose PUT a
 * caller writes after each KVD_W_BULK on the same shard, its value the
 * request's item (the range done and the operand), so that a replica's
 * applier runs the same range at the same point of the records.  Is the
 * record rec ([u8 type][u32 len][journal payload], as KVD_W_REPL's items)
 * one, and its value val? */
#define KVD_BULK_MARK "bulk-mark"
int kvd_bulk_mark(const uint8_t *rec, size_t n, struct kv_slice *val);
/* 1 when shard i takes no more writes (a failed journal write or flush, or
 * a failed checkpoint); any thread. */
int kvd_shard_failed(struct kvd_store *st, unsigned i);

/* ---- replication (kvd: repl/) ---- */

/* The last LSN of shard i that may be sent to replicas: written to the
 * journal, and flushed in sync mode (any thread). */
uint64_t kvd_shard_pub_lsn(struct kvd_store *st, unsigned i);
/* A cursor over shard i's journal from LSN from on, for one thread at a
 * time while the writer appends and recycles (a primary's sender): 0,
 * -ENOENT (no segment holds from any more), -ENOMEM, or an errno from
 * opening a file.  next gives the record at the cursor if its LSN is at
 * most upto: 1 with *lsn, *type (a journal record type), its payload
 * (valid until the next call) and length; 0 at upto + 1; -ENOENT when the
 * record was recycled meanwhile; -EBADMSG.  lsn is the LSN next returns
 * next.  kvd_journal_strerror names those errors. */
struct kvj_reader;
int kvd_journal_open(struct kvd_store *st, unsigned i, uint64_t from,
		     struct kvj_reader **out);
int kvd_journal_next(struct kvj_reader *r, uint64_t upto, uint64_t *lsn,
		     uint8_t *type, const void **payload, uint32_t *len);
uint64_t kvd_journal_lsn(const struct kvj_reader *r);
void kvd_journal_close(struct kvj_reader *r);
const char *kvd_journal_strerror(int err);
/* Keep shard i's journal from LSN lsn on for replicas (0: nothing), as
 * long as what is kept stays within backlog bytes a shard (any thread). */
void kvd_shard_hold(struct kvd_store *st, unsigned i, uint64_t lsn);
void kvd_store_set_backlog(struct kvd_store *st, uint64_t bytes);
/* A replica's full copy, by shard i's writer: wipe the shard, make its
 * checkpoint LSN cut and start its journal at cut + 1 (reset); then load
 * chunks of [u32 klen][u32 vlen][key][stored value] pairs into LMDB.
 * 0 or a KV_* code. */
int kvd_shard_repl_reset(struct kvd_store *st, unsigned i, uint64_t cut);
/* A chunk's klen with this bit: a key of a keyspace other than 0, its
 * keyspace byte first (an older replica refuses such a chunk whole). */
#define KVD_CHUNK_KX 0x80000000u
int kvd_shard_repl_load(struct kvd_store *st, unsigned i, const uint8_t *p,
			size_t n);

/* ---- backups (any one thread at a time) ---- */

struct kvd_snapshot;

/* One read transaction per shard, opened now (while writers are paused, they
 * form one cut: kvd_committers_pause).  0 or a KV_* code.  End it before
 * the store closes; it pins the pages it reads meanwhile. */
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
/* Append shard i's pairs from position start on ([u32 klen][u32 vlen]
 * [key][stored value], little-endian; keyspace 0's keys first, then the
 * others', with KVD_CHUNK_KX) to out until it holds max bytes; next gets
 * the position to start the next chunk from (empty: done), a token of the
 * store's that the caller hands back as it is.  0 or a KV_* code. */
struct kv_buf;
int kvd_snapshot_chunk(struct kvd_snapshot *sn, unsigned i,
		       struct kv_slice start, size_t max, struct kv_buf *out,
		       struct kv_buf *next);

/* ---- the data directory (datadir.c) ----
 *
 * The directory's lock file and its manifest.  The manifest records the
 * shard count S fixed when the directory was made; keys are routed by
 * XXH3_64bits(key) % S, so S can never change without moving every key.
 * Starting kvd with another --threads keeps S.  A manifest that disagrees
 * with the shard directories present is refused, because serving it would
 * make keys silently vanish.  These calls may be made from any thread
 * (kvd_store_open makes the first two); none keeps state but the lock. */

struct kvd_datadir {
	int lock_fd;
	unsigned nshards;
	int created; /* the manifest says its shards are still being made */
};

/* Create the directory if missing, take its lock (refusing one held by
 * another kvd), then read the manifest or write one for want_shards;
 * with exact, a manifest of another count is refused.  0, or -1 with a
 * one-line reason in err. */
int kvd_datadir_open(struct kvd_datadir *d, const char *dir,
		     unsigned want_shards, int exact, char *err, size_t errlen);

/* Every shard of a directory being created now exists: rewrite the
 * manifest without its "creating" mark.  No-op otherwise.  0, or -1 with a
 * reason in err. */
int kvd_datadir_created(struct kvd_datadir *d, const char *dir, char *err,
			size_t errlen);

/* The directory of shard i: "DIR/shard-003". */
void kvd_datadir_shard_path(char *buf, size_t len, const char *dir, unsigned i);

void kvd_datadir_close(struct kvd_datadir *d);

/* fsync a directory, so that the renames and creations in it last.  0, or
 * -1 with errno set. */
int kvd_fsync_dir(const char *dir);

/* Check that dir is a complete data directory (a valid manifest, every
 * shard's data file present, no extra shard); *nshards from the manifest.
 * Takes no lock.  0, or -1 with a reason in err. */
int kvd_datadir_inspect(const char *dir, unsigned *nshards, char *err,
			size_t errlen);

/* Write DIR/MANIFEST for n shards atomically (temp file, fsync, rename,
 * fsync of the directory).  0, or -1 with a reason in err. */
int kvd_datadir_write_manifest(const char *dir, unsigned n, char *err,
			       size_t errlen);

/* ---- paths given by others (a BACKUP's target, --restore) ---- */

/* 1 if path holds a control character (a byte below 0x20, or 0x7f): such
 * a path could forge log lines, and no sane directory is named so. */
int kvd_path_has_ctl(const char *path, size_t n);

/* The absolute path with every symbolic link, "." and ".." resolved:
 * realpath(3) when path exists, else realpath of its parent plus its last
 * name (which must not be "." or "..").  0, or -1 with errno set. */
int kvd_path_resolve(const char *path, char *out, size_t len);

/* 1 if the resolved path is dir itself or lies under it. */
int kvd_path_within(const char *path, const char *dir);

/* path in double quotes for a log line, with '"', '\\' and control
 * characters escaped (\n, \xNN), cut to fit buf.  Returns buf. */
const char *kvd_path_quote(char *buf, size_t len, const char *path);

/* ---- write requests and the committers (committer.c) ---- */

/* Single-writer counters: only the owning thread writes, any thread may
 * read.  Relaxed load+store, not fetch_add: no lock prefix on the hot path,
 * and still a data race free program for TSan. */
typedef _Atomic uint64_t kvd_counter;

static inline void kvd_count(kvd_counter *c, uint64_t n)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline uint64_t kvd_read(kvd_counter *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* A write request on its way to its shard's committer and back.  The
 * submitter allocates it, fills shard and op (op.items usually points at
 * data), and owns it again once a hook hands it back with op's results
 * set.  The store reads and writes next, shard and op only; the rest is the
 * submitter's (kvd: io is the io thread that gets it back, pend the reply
 * it answers, struct kvd_pend; loop.c). */
struct kvd_wreq {
	struct kvd_wreq *next; /* the committer's queue while it is out */
	void *pend;
	void *io;
	uint16_t shard;
	uint8_t tracked; /* the submitter's: counted in its connection */
	uint32_t cap;	 /* the submitter's: bytes data[] holds */
	struct kvd_wop op;
	uint8_t data[];
};

/* Batch sizes are counted in powers of two: <= 1, 2, 4, ... 4096. */
#define KVD_BATCH_BUCKETS 13

/* One shard's committer's counters (kvd_commit_stats; read with
 * kvd_read from any thread). */
struct kvd_commit_stats {
	kvd_counter commits, writes, max_batch, commit_ns, failures;
	kvd_counter reaped;
	kvd_counter inline_batches; /* committed by an io thread */
	/* of those (sync mode), the ones whose journal flush went through
	 * the io thread's ring; the others', its own fdatasync */
	kvd_counter ring_flushes;
	kvd_counter commit_hist[KVD_LAT_BUCKETS];  /* journal write + flush */
	kvd_counter batch_hist[KVD_BATCH_BUCKETS]; /* writes per commit */
};

struct kvd_commit;

/* What the committers call back.  complete is required, the others may be
 * NULL.  Each runs on the thread that wrote the batch: a committer, an io
 * thread committing its own writes (async mode, kvd_committer_flush), or
 * one in an exclusive section; none may call back into the committers. */
struct kvd_commit_hooks {
	void *arg; /* passed to every hook */
	/* Hand a request back, its op's status and results set. */
	void (*complete)(void *arg, struct kvd_wreq *w);
	/* A batch of shard committed: its requests (linked by next; NULL
	 * for a batch of the reaper's alone) go back now or later, each
	 * through complete.  NULL: at once. */
	void (*committed)(void *arg, unsigned shard, struct kvd_wreq *list);
	/* 1 while the store only follows another's writes (a replica):
	 * nothing is reaped here and no io thread commits. */
	int (*follower)(void *arg);
	/* Observers of what a write did, in the order the writes were
	 * made: applied after each request joins a batch, reaped after the
	 * reaper deleted the keys of batch t from record from on; what they
	 * keep is published once the batch committed (publish: failed, if
	 * not NULL, flags the shards whose batch failed) or dropped (drop:
	 * the batch failed and will be made again); forget: a shard was
	 * emptied or loaded whole. */
	void (*applied)(void *arg, unsigned shard, const struct kvd_wop *op);
	void (*reaped)(void *arg, unsigned shard, const struct kvd_wtxn *t,
		       size_t from);
	void (*publish)(void *arg, const uint8_t *failed);
	void (*drop)(void *arg);
	void (*forget)(void *arg, unsigned shard);
	/* Sync mode with kvd_commit_opts.ring (both NULL: never).  An io
	 * thread committing its own writes starts its batch's journal flush
	 * (fd; with fault, a no-op that a test shim fails) in its own ring
	 * with ring_flush, tagged cookie, and goes back to its sockets; the
	 * flush's completion is reported to kvd_committer_flushed(cookie,
	 * res), on that thread or on whoever waits for it.  ring_flush
	 * returns the ring, or NULL: the caller flushes in place, blocking
	 * (this thread has nothing else to do, or no room in its ring).  ring_wait (any thread): wait a little for a
	 * flush started in ring, and report those completed.  ring_here: 1
	 * when the calling thread has a ring (else its writes go to the
	 * committers). */
	void *(*ring_flush)(void *arg, int fd, int fault, void *cookie);
	void (*ring_wait)(void *arg, void *ring);
	int (*ring_here)(void *arg);
	/* ring_conns (optional): how many connections the calling io thread
	 * serves.  io-thread-flush auto flushes a small batch in place only
	 * when it holds a write of each (none of them could send anything
	 * while the thread blocks in the flush). */
	unsigned (*ring_conns)(void *arg);
};

struct kvd_commit_opts {
	struct kvd_store *store;
	/* 0: durability sync, a batch is flushed before it is answered;
	 * 1: async, answered once in the OS, flushed every flush interval */
	int async;
	uint64_t max_value; /* kvd_shard_apply's */
	/* Read live (a relaxed load at each use), so whoever owns them may
	 * store new values at any time (kvd: SIGHUP, CONFIG SET): how often
	 * expired keys are reaped, and async mode's flush. */
	const unsigned *reap_interval_ms;
	const unsigned *flush_interval_ms;
	uint64_t start_ms; /* kvd_committers_lastsave before any save */
	/* Sync mode: an io thread commits its own writes when the shard's
	 * committer is idle, flushing through its ring (hooks.ring_flush),
	 * or with INLINE, with its own fdatasync (blocking), or with AUTO,
	 * with its own for a small batch, the last of its loop turn, through
	 * the ring otherwise */
	enum { KVD_RING_OFF, KVD_RING_ON, KVD_RING_INLINE, KVD_RING_AUTO } ring;
	struct kvd_commit_hooks hooks;
};

/* Start one committer per shard of o->store; 0 or -1 (logged; *out is
 * then still to be stopped).  One set of committers per process. */
int kvd_committers_start(struct kvd_commit **out,
			 const struct kvd_commit_opts *o);
/* Queue a request (an io thread, or a thread that then calls
 * kvd_committer_flush).  It comes back through the hooks. */
void kvd_committer_submit(struct kvd_commit *com, struct kvd_wreq *w);
/* Push the calling thread's submitted requests to their committers:
 * kvd_committer_submit holds them until the end of the thread's loop turn,
 * which calls this (so does kvd_excl_begin, before it locks). */
void kvd_committer_flush(struct kvd_commit *com);
/* A journal flush started by hooks.ring_flush ended with res (0 or a
 * negative errno): its batch becomes visible and is answered, or fails
 * with its shard.  Called once per flush, under the ring's lock. */
void kvd_committer_flushed(void *cookie, int res);
/* Stop every committer between two batches, each once its shard's LMDB
 * holds everything it acknowledged (a checkpoint), and wait until all
 * have; a backup opens its snapshots meanwhile.  0, or the KV_* code of a
 * checkpoint that failed (the committers are paused either way).  Resume
 * lets them go on. */
int kvd_committers_pause(struct kvd_commit *com);
void kvd_committers_resume(struct kvd_commit *com);
/* An exclusive section (EXEC, WATCH; an io thread): no committer runs a
 * batch, housekeeping or a checkpoint meanwhile.  Writes queued between
 * kvd_excl_capture and kvd_excl_apply (kvd_write_*) are not handed to
 * the committers but applied here, to one open batch per shard; commit
 * journals each shard's batch as one (sync mode: flushed) and hands its
 * requests back as a committer would.  End commits what is still open.
 * Sections are not nested. */
struct kvd_excl {
	struct kvd_commit *com;
	struct kvd_wreq *cap;
	int open;
	struct kvd_wtxn *t[KVD_MAX_SHARDS];
	struct kvd_wreq *head[KVD_MAX_SHARDS], *tail[KVD_MAX_SHARDS];
	/* a batch of that shard failed: its keyspace events are dropped */
	uint8_t failed[KVD_MAX_SHARDS];
};

void kvd_excl_begin(struct kvd_excl *x, struct kvd_commit *com);
void kvd_excl_capture(struct kvd_excl *x);
void kvd_excl_apply(struct kvd_excl *x);
void kvd_excl_commit(struct kvd_excl *x);
void kvd_excl_end(struct kvd_excl *x);
/* The section this thread is in, or NULL. */
struct kvd_excl *kvd_excl_current(void);
/* Readers: a read that began at seq (waited for a section under way) and
 * ends with kvd_excl_moved false saw no section's writes half made. */
unsigned kvd_excl_seq(void);
int kvd_excl_moved(unsigned seq);

/* BGSAVE: every committer checkpoints its shard (kvd_shard_checkpoint)
 * between two batches, on its own time.  1 when one was under way already
 * (another is then asked for only if again: BGSAVE SCHEDULE), else 0.
 * SAVE queues KVD_W_CHECKPOINT on every shard instead, and is answered
 * once each is done. */
int kvd_committers_bgsave(struct kvd_commit *com, int again);
/* Is a BGSAVE's checkpoint still under way on some shard? */
int kvd_committers_saving(struct kvd_commit *com);
/* LASTSAVE: the time (Unix ms) by which every shard had finished a
 * checkpoint a SAVE or BGSAVE asked for (the start before any);
 * *failed: the last of them failed on some shard. */
uint64_t kvd_committers_lastsave(struct kvd_commit *com, int *failed);
/* Shard shard's committer: its counters, and 1 when a journal write or
 * flush, or a checkpoint, failed (it refuses writes until a restart). */
struct kvd_commit_stats *kvd_commit_stats(struct kvd_commit *com,
					  unsigned shard);
int kvd_commit_failed(struct kvd_commit *com, unsigned shard);

/* After every submitter has stopped: drain, commit, flush, checkpoint,
 * stop, free.  NULL is a no-op. */
void kvd_committers_stop(struct kvd_commit *com);

#endif
