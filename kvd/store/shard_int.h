/* shard_int.h - what the files of the storage layer share, and nothing
 * else includes: shard.c (opening, recovery, readers), shard_scan.c
 * (ordered scans and counts across shards), shard_write.c (the committer's
 * batches: journal, memtable), shard_ckpt.c (checkpoints, retiring
 * memtables), shard_spare.c (journal segments made ahead) and
 * shard_copy.c (backups).  Together they are the only code
 * that calls LMDB, the journal and the memtable; shard.h is their
 * interface to the rest of kvd.
 */
#ifndef KVD_SHARD_INT_H
#define KVD_SHARD_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "journal.h"
#include "kv_buf.h"
#include "memtable.h"
#include "store.h"
#include "store_log.h"

#define VF_EXPIRE 1u
/* Bits 1-3 of the flag byte: the value's type (store.h, KVD_VT_*); 0, a
 * plain value, is what every value stored before types were had. */
#define VF_TYPE_SHIFT 1
#define VF_TYPE_MASK 0x0eu

/* ov_ent.below when it was not looked up (a plain PUT: memtable.h, COUNT). */
#define OV_BELOW_UNKNOWN 2

/* One record of a batch, before it reaches the journal (shard_write.c). */
struct ov_ent {
	/* The key, and a value given by the request, stay where they are
	 * (the request's items, a snapshot or a memtable: all valid until the
	 * batch is committed); a computed value is in kvd_wtxn.data at voff. */
	const uint8_t *key, *val;
	uint32_t klen, vlen, voff;
	uint8_t vbuf; /* the value is in data */
	uint8_t kbuf; /* the key is in data at koff (a merge's side write) */
	uint32_t koff;
	uint8_t vtype; /* a PUT's value type (KVD_VT_*) */
	uint64_t exp;
	uint8_t type;  /* KVJ_PUT, KVJ_DEL, KVJ_FLUSHALL */
	uint8_t ks;    /* the key's keyspace (key has no keyspace byte) */
	uint8_t below; /* the key holds a value under the active memtable:
			  0, 1, or OV_BELOW_UNKNOWN (not looked up) */
};

struct kvd_wtxn {
	struct kvd_store *st;
	unsigned idx;
	struct kvd_reader *rd; /* the committer's LMDB snapshot */
	struct kvm *act, *frz; /* the layers, as of the batch's start */
	struct kv_buf data;    /* the batch's computed values */
	size_t bytes;	       /* keys and values in the batch */
	struct kv_buf tmp; /* old values copied out before they are rewritten */
	struct kv_buf mimg, mreply; /* a merge's new value and reply bytes */
	struct kv_buf mside;	    /* and its side writes (kvd_merge_side) */
	unsigned ks;		    /* the keyspace of the keys being applied */
	/* the memtable's form of a key (ikey_put), twice: one for a prefetch
	 * while the other is being inserted */
	uint8_t ikey[2][KVM_MAX_KEY];
	struct ov_ent *ents;
	size_t nents, cap;
	uint32_t *ht; /* open addressing: newest entry of a key, index + 1 */
	size_t htcap;
	struct kvj_rec *recs;
	size_t nrecs;
	int flushed; /* a FLUSH in this batch hides every layer below it */
	int bulk;    /* a bulk merge was under way when the batch began */
	uint64_t next_mreap; /* the next walk for expired memtable values */
	uint64_t begun_ms;   /* when the batch began (kvd_now_ms) */
	/* pages of the map checkpoints may still use (INT64_MIN: not yet
	 * known in this batch), and the page size */
	int64_t room_pages;
	uint64_t psize;
	/* a batch whose flush is in flight (kvd_shard_commit_begin): its
	 * first LSN and bytes, and the test shim's tag for its flush */
	uint64_t pend_first, pend_bytes;
	int pend_fd, pend_fi;
};

struct shard {
	MDB_env *env;
	MDB_dbi kv, exp, meta;
	MDB_dbi kx; /* the keyspaces other than 0, keys with their byte */
	char path[600];
	unsigned idx;
	struct kvd_store *st;
	struct kvd_wtxn wt; /* its committer's batch, reused */
	struct kvj *j;	    /* the committer's only */
	/* Readers load active, then frozen (acquire), then open their LMDB
	 * snapshot.  The committer writes active and sets frozen; the
	 * checkpointer clears frozen once no reader can need it. */
	_Atomic(struct kvm *) active, frozen;
	uint64_t active_ms;	/* committer: when active got its first write */
	uint64_t last_batch_ms; /* writer: when the last write batch began */
	struct kvm_pool *pool;	/* the memtables' spare chunks, or NULL */
	uint64_t frozen_upto;	/* under mu: the frozen one's last LSN */
	uint64_t released;	/* committer: journal released up to here */
	atomic_uint_least64_t ckpt_lsn; /* the last checkpoint's LSN */
	/* The last LSN readers of the journal may send (replication): in
	 * the OS, and flushed in sync mode; set by the committer. */
	atomic_uint_least64_t pub_lsn;
	/* Replicas still need the journal from this LSN on (0: none); the
	 * committer keeps it within the store's backlog. */
	atomic_uint_least64_t hold_lsn;
	atomic_int failed;   /* a KV_* code: no more writes */
	atomic_int ckpt_err; /* the last checkpoint failed for room: KV_* */
	pthread_t ckpt_thread;
	int ckpt_started;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* job set (checkpointer), or done (committer) */
	struct kvm *job;   /* under mu: the frozen memtable to checkpoint */
	/* set under mu: a bulk merge, run by the checkpointer after job (if
	 * any) and before the next one, and cleared once its writes are
	 * committed; a batch begun while one is set writes every side
	 * delete, found or not (shard_bulk.c), so it is read without mu too */
	_Atomic(struct kvd_bulk_job *) bulk;
	/* checkpointer: a range's buffers (shard_bulk.c) */
	struct bulk *bulk_buf;
	uint64_t attempts; /* under mu: checkpoints tried */
	uint64_t tried_ns; /* under mu: when the last attempt ended */
	uint64_t fails;	   /* checkpointer: failed for room in a row */
	/* the checkpointer's lines on failures for room (retried): one a
	 * minute while they last, with a count of the others */
	struct kvd_log_limit fail_log;
	atomic_int ckpt_busy; /* job is set: a checkpoint is under way */
	int stop;	      /* under mu */
	/* counters */
	_Atomic uint64_t jbytes, fsyncs, ckpts, ckpt_ns, bp_waits;
	/* record bytes in active + frozen, not yet in LMDB (map room) */
	_Atomic uint64_t pend_bytes;
	uint64_t act_bytes, frozen_bytes; /* committer; under mu */
	/* The next journal segment, made ahead (shard_spare.c): the helper
	 * sets spare_rc, then spare_state DONE (release); the committer
	 * joins it, starts the next. */
	atomic_int spare_state;
	int spare_rc;
	pthread_t spare_thread;
	uint64_t spare_size;	 /* committer, before it starts the helper */
	uint64_t spare_retry_ms; /* committer: no helper before this */
	_Atomic uint64_t spares_ahead;	/* spares the helpers made */
	_Atomic uint64_t spares_inline; /* kvj_spares_made, for STATS */
	atomic_uint spares_held;	/* kvj_spares, for STATS */
};

struct kvd_store {
	struct kvd_datadir dd;
	unsigned n;
	struct shard *sh;
	uint64_t memtable_size;
	uint64_t map_size;
	uint64_t ckpt_interval_ms;
	uint64_t segment_size;	  /* journal segments (0: the default) */
	_Atomic uint64_t backlog; /* journal bytes a shard keeps for replicas */
	struct kvd_merge_op merge[KVD_MERGE_MAX]; /* by id (KVD_W_MERGE) */
	/* kvd_store_opts.stored, and its argument */
	void (*stored)(void *arg, const void *key, size_t klen);
	void *hook_arg;
	/* every kvd_reader, for the quiescent-point waits (shard_ckpt.c) */
	pthread_mutex_t rmu;
	struct kvd_reader **readers;
	unsigned nreaders, capreaders;
};

/* A reader's view of one shard for point reads (shard.c, rview): its
 * memtables and what each had published, current while gen is the
 * reader's. */
struct rview {
	uint64_t gen;
	struct kvm *m[2];     /* active, frozen */
	struct kvm_snap s[2]; /* their published LSNs when loaded */
};

struct kvd_reader {
	struct kvd_store *st;
	MDB_txn **txn;
	MDB_cursor **cur;  /* on "kv", by shard */
	MDB_cursor **xcur; /* on "kx" */
	uint8_t *active;
	unsigned nactive;
	struct scan_head *heads;
	/* Point reads' views by shard: loaded per read, or once per request
	 * between kvd_reader_pin and kvd_reader_unpin; kvd_reader_reset and
	 * every pin or unpin move gen, which retires them all. */
	struct rview *views;
	uint64_t gen;
	int pinned;
	/* 1 from the first read of a turn to kvd_reader_reset, which counts
	 * epoch: a checkpointer that saw busy == 0, or epoch move, knows this
	 * reader holds nothing it loaded before. */
	atomic_int busy;
	_Atomic uint64_t epoch;
	int in; /* this thread's own copy of busy */
};

/* One shard's position during a scan (shard_scan.c): the memtables'
 * iterators and the LMDB cursor merged, the shard's next live key. */
struct scan_head {
	struct kvm_iter it[2]; /* active, frozen */
	MDB_cursor *cur;       /* the keyspace's database's */
	unsigned ks;	       /* the scan's keyspace */
	int ivalid[2];
	int base;	   /* the LMDB cursor takes part */
	int cvalid;	   /* the cursor is at a key */
	MDB_val ck, cv;	   /* the cursor's key and value */
	struct kv_slice k; /* the shard's current key */
	struct kv_slice v; /* its value (the stored bytes, no header) */
	uint64_t exp;
	uint8_t type; /* its value's KVD_VT_* */
	int valid;
};

/* ===================== Stored values ===================== */

static inline size_t val_hdr_len(uint64_t exp)
{
	return exp ? 9 : 1;
}

static inline void val_hdr_put(uint8_t *p, uint64_t exp, unsigned type)
{
	p[0] = (uint8_t)((exp ? VF_EXPIRE : 0) |
			 ((type << VF_TYPE_SHIFT) & VF_TYPE_MASK));
	for (unsigned i = 0; exp && i < 8; i++)
		p[1 + i] = (uint8_t)(exp >> (8 * i));
}

/* Split a stored value; -1 if it is too short to be one of ours. */
static inline int val_parse(const MDB_val *v, uint64_t *exp,
			    struct kv_slice *data)
{
	const uint8_t *p = v->mv_data;
	size_t h;

	if (v->mv_size < 1)
		return -1;
	*exp = 0;
	if (p[0] & VF_EXPIRE) {
		if (v->mv_size < 9)
			return -1;
		for (unsigned i = 0; i < 8; i++)
			*exp |= (uint64_t)p[1 + i] << (8 * i);
	}
	h = (p[0] & VF_EXPIRE) ? 9 : 1;
	data->p = p + h;
	data->n = v->mv_size - h;
	return 0;
}

/* The type of a stored value (val_parse must have accepted it). */
static inline uint8_t val_type(const MDB_val *v)
{
	return (uint8_t)((((const uint8_t *)v->mv_data)[0] & VF_TYPE_MASK) >>
			 VF_TYPE_SHIFT);
}

/* 1 when v holds a value that has not expired at now. */
static inline int val_live(const MDB_val *v, uint64_t now, uint64_t *exp,
			   struct kv_slice *data)
{
	if (val_parse(v, exp, data))
		return 0;
	return *exp == 0 || *exp > now;
}

static inline void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* LMDB's default order: memcmp over the common length, then shorter first. */
static inline int key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? memcmp(a, b, n) : 0; /* an empty slice may be NULL */

	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

/* ===================== Keyspaces =====================
 *
 * Inside the store a key is an ikey: its keyspace byte (store.h, KVD_KS_*),
 * then the key.  The memtables hold ikeys, so a batch's keys of every
 * keyspace publish together; LMDB holds keyspace 0 in "kv" with the key
 * alone (as every store did before keyspaces: old directories open as
 * they are) and the others in "kx" with their ikeys; the journal writes
 * keyspace 0's records as it always did (journal.h, KVJ_PUT_KS). */

/* buf (KVM_MAX_KEY bytes) = [ks][key]; its length, or 0 when the key is
 * empty or too long to be stored (no such key can exist). */
static inline size_t ikey_put(uint8_t *buf, unsigned ks, const void *key,
			      size_t klen)
{
	if (!klen || klen >= KVM_MAX_KEY)
		return 0;
	buf[0] = (uint8_t)ks;
	memcpy(buf + 1, key, klen);
	return klen + 1;
}

/* The LMDB database and key of ikey ik (n > 0 bytes). */
static inline MDB_dbi ikey_dbi(const struct shard *sh, const uint8_t *ik)
{
	return ik[0] ? sh->kx : sh->kv;
}

static inline MDB_val ikey_lmdb(const uint8_t *ik, size_t n)
{
	MDB_val k = {n, (void *)ik};

	if (!ik[0]) {
		k.mv_size = n - 1;
		k.mv_data = (void *)(ik + 1);
	}
	return k;
}

/* The memtable flags of a key of keyspace ks: only keyspace 0 counts. */
static inline unsigned ks_flags(unsigned ks)
{
	return ks ? KVM_F_NOCOUNT : 0;
}

/* Mark r in use for this turn (before loading memtable pointers). */
static inline void kvd_reader_enter(struct kvd_reader *r)
{
	if (!r->in) {
		r->in = 1;
		atomic_store(&r->busy, 1);
	}
}

/* The memtables of shard i as a reader loads them: active first. */
static inline void shard_layers(struct shard *sh, struct kvm **a,
				struct kvm **f)
{
	*a = atomic_load_explicit(&sh->active, memory_order_acquire);
	*f = atomic_load_explicit(&sh->frozen, memory_order_acquire);
}

/* This loop turn's snapshot of shard i, opened on first use; NULL (logged)
 * when LMDB refuses. */
MDB_txn *kvd_shard_rtxn(struct kvd_reader *r, unsigned i);
/* The reader's cursor on shard i's database of keyspace ks ("kv" for 0,
 * "kx" for the others), renewed on that snapshot. */
MDB_cursor *kvd_shard_rcursor(struct kvd_reader *r, unsigned i, unsigned ks);
/* Bytes free on the filesystem holding path (root may use the reserve). */
uint64_t kvd_shard_fs_room(const char *path);
/* The checkpoint LSN stored in txn's snapshot (0: none yet). */
uint64_t kvd_shard_meta_lsn(struct shard *sh, MDB_txn *txn);
/* 1 with *entries set when txn's snapshot holds part of the checkpoint to
 * LSN upto: LMDB's entries before it (shard_ckpt.c); 0 otherwise. */
int kvd_shard_ckpt_base(struct shard *sh, MDB_txn *txn, uint64_t upto,
			int64_t *entries);
/* Delete that marker in write txn txn; 0 or an LMDB code. */
int kvd_shard_ckpt_base_clear(struct shard *sh, MDB_txn *txn);
/* A reader's view of one shard, for counts (shard_scan.c). */
struct shard_view {
	struct kvm *m[2]; /* active, frozen (NULL: none, or already in LMDB) */
	MDB_txn *txn;
	int base;	      /* LMDB counts (no FLUSHALL above it) */
	int64_t entries;      /* stored entries, expired or not */
	uint64_t expiring[2]; /* the memtables' values with an expiry */
	/* The moment each memtable was counted at (kvm_count's lsn and
	 * flush_lsn): the active one takes writes meanwhile. */
	uint64_t upto[2], flush[2];
};

/* Fill v for shard i: the layers and their entries, consistently.  0 or
 * -1. */
int kvd_shard_entries(struct kvd_reader *r, unsigned i, struct shard_view *v);
/* Start shard sh's checkpointer; 0 or -1. */
int kvd_ckpt_start(struct shard *sh);
/* Stop it (what it is doing finishes first). */
void kvd_ckpt_stop(struct shard *sh);
/* Committer: hand the active memtable to the checkpointer and start a new
 * one; waits while a previous one is still being checkpointed.  0 or a
 * KV_* code. */
int kvd_ckpt_freeze(struct shard *sh, struct kvd_reader *rd);
/* Committer: wait until no frozen memtable (nor bulk merge) is pending. */
int kvd_ckpt_wait(struct shard *sh, struct kvd_reader *rd);
/* A bulk merge handed to the checkpointer (shard_bulk.c): its request's
 * op, and what to call once it is done. */
struct kvd_bulk_job {
	struct kvd_wop *op;
	void (*done)(void *a, void *b);
	void *a, *b;
};
/* Checkpointer: run job (LMDB then holds every write up to the last
 * freeze, and nothing newer), set its op's status, call its done. */
void kvd_bulk_run(struct shard *sh, struct kvd_bulk_job *job);
/* Checkpointer, idle: give the ranges' buffers back. */
void kvd_bulk_idle(struct shard *sh);
/* Is op a well-formed KVD_W_BULK (its range and merge)? */
int kvd_bulk_valid(const struct kvd_wop *op);
/* Committer: copy the journal's spare counts where STATS reads them. */
static inline void shard_publish_spares(struct shard *sh)
{
	atomic_store_explicit(&sh->spares_inline, kvj_spares_made(sh->j),
			      memory_order_relaxed);
	atomic_store_explicit(&sh->spares_held, kvj_spares(sh->j),
			      memory_order_relaxed);
}
/* Committer, between batches: take a spare journal segment a helper made,
 * start a helper when the journal holds none (shard_spare.c). */
void kvd_shard_spare_tend(struct shard *sh, uint64_t now);
/* Wait for a helper still making one (before the journal closes). */
void kvd_shard_spare_stop(struct shard *sh);
/* A fresh memtable for shard sh (NULL: out of memory). */
struct kvm *kvd_memtable_new(struct shard *sh);

#endif
