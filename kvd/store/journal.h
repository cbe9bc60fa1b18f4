/* journal.h - a shard's write-ahead journal: checksummed, LSN-numbered
 * records appended to pre-written segment files, replayed at open.
 *
 * A write is durable once its record is in the journal and the journal has
 * been flushed (kvj_sync); LMDB is written later, in checkpoints, and the
 * segments at or below a checkpoint's LSN are recycled (kvj_release).  The
 * on-disk format and the rules that tell a torn tail from corruption are in
 * docs/journal-format.md.
 *
 * Threading: a journal handle belongs to one thread at a time (the shard's
 * committer).  No call takes a lock; kvj_release does file renames and a
 * directory fsync, so a checkpointer asks the committer to call it rather
 * than calling it itself.
 *
 * Errors: every call returns 0 (or a count) on success and a negative errno
 * on failure; -EBADMSG means corruption (see kvj_open), kvj_strerror() names
 * any of them.  A failed write or flush of a record makes the journal
 * permanently failed: every later kvj_append/kvj_sync returns that first
 * error and nothing is retried (a retried fsync can report success for data
 * the kernel already dropped).  Reopening after a restart recovers what is
 * on disk.
 */
#ifndef KVD_STORE_JOURNAL_H
#define KVD_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

struct kvj;

/* Segment size when kvj_opts.segment_size is 0. */
#define KVJ_DEFAULT_SEGMENT_SIZE (64u << 20)
/* The smallest segment accepted (tests use small ones). */
#define KVJ_MIN_SEGMENT_SIZE 4096u
/* Spare segments kept for reuse when kvj_opts.max_spares is 0. */
#define KVJ_DEFAULT_MAX_SPARES 2u

/* kvj_opts.flags */
/* On corruption, drop everything from the bad record on instead of
 * refusing to open (the operator's explicit choice; see kvj_open). */
#define KVJ_OPEN_TRUNCATE 0x1u

struct kvj_opts {
	uint64_t segment_size; /* bytes per new segment, 0 = default */
	uint32_t max_spares;   /* recycled segments kept, 0 = default */
	/* Of the spares, how many only kvj_append_recs_reserve may take
	 * (0: none): a full disk refuses other appends that need a new
	 * segment, but not those (kvd: batches of deletes).  max_spares is
	 * raised to reserve + 1 if below. */
	uint32_t reserve;
	uint32_t shard_id; /* written in every segment header, checked */
	unsigned flags;	   /* KVJ_OPEN_* */
};

/* What kvj_open found; filled on success and on failure. */
struct kvj_report {
	uint64_t first_lsn;  /* first LSN scanned (0: empty journal) */
	uint64_t last_lsn;   /* last valid LSN found (0: none) */
	uint64_t replayed;   /* records handed to the callback */
	uint64_t segments;   /* segment files scanned */
	uint64_t dropped;    /* bytes of a torn tail or truncation wiped */
	uint64_t bad_offset; /* corruption or tail: offset in bad_file */
	char bad_file[320];  /* file holding the corruption or tail */
	char msg[512];	     /* one line for the log, "" when clean */
};

/* Replay callback: one record with LSN > the checkpoint LSN, in LSN order.
 * payload points into a read-only mapping valid only during the call.
 * A non-zero return stops kvj_open, which returns that value. */
typedef int (*kvj_replay_fn)(void *arg, uint64_t lsn, uint8_t type,
			     const void *payload, uint32_t len);

/* kvj_open - open (or create) the journal in directory dir and replay it.
 *
 * Scans the segments in LSN order from the one holding ckpt_lsn + 1 and
 * calls fn for every record above ckpt_lsn, up to the torn tail: the first
 * record whose checksum, length or LSN is wrong, with no record after it
 * that was known durable when it was written (a crash's normal end, wiped
 * so that it can never be read again).  Then it flushes the segment, so
 * that everything replayed is durable, and positions the tail: the next
 * append gets LSN max(last valid + 1, ckpt_lsn + 1).
 *
 * Returns 0, or:
 *   -EBADMSG  corruption: a bad record followed by valid ones that were
 *             already durable, a missing run of LSNs between segments, a
 *             bad segment header, or a journal that starts above
 *             ckpt_lsn + 1.  rep->msg is one line naming the file and the
 *             offset.  With KVJ_OPEN_TRUNCATE the journal is cut there
 *             instead (the records after it are lost) and the open goes on.
 *   -EINVAL   bad options.
 *   -ENOSPC, -EFBIG, -EIO, ...  creating or flushing a segment failed.
 *   anything fn returned.
 * rep may be NULL.  On failure *out is NULL. */
int kvj_open(const char *dir, const struct kvj_opts *opts, uint64_t ckpt_lsn,
	     kvj_replay_fn fn, void *arg, struct kvj_report *rep,
	     struct kvj **out);

/* kvj_close - close the files and free the handle.  It does not flush:
 * call kvj_sync first for what must be durable.  NULL is a no-op. */
void kvj_close(struct kvj *j);

/* One record to append: an opaque payload and a type byte. */
struct kvj_entry {
	uint8_t type;
	const void *data;
	uint32_t len;
};

/* kvj_append - append n records as one write at the tail (two or more
 * writes only when the batch crosses into a new segment) and give them the
 * next n LSNs; *first_lsn (if not NULL) gets the first of them.  The
 * records are in the OS, not yet durable: call kvj_sync.
 *
 * Returns 0, or:
 *   -E2BIG    one record does not fit in a segment; nothing was written.
 *   -ENOSPC, -EFBIG  no room to pre-allocate the next segment; nothing
 *             was written, no LSN used, the journal stays usable (a batch
 *             that fits the current segment, or kvj_release making a spare,
 *             lets appends go on).
 *   -ENOMEM   nothing was written.
 *   any other negative errno: a write failed; the journal is failed. */
int kvj_append(struct kvj *j, const struct kvj_entry *e, size_t n,
	       uint64_t *first_lsn);

/* kvj_sync - fdatasync the current segment (one flush: segments never
 * change size).  Returns 0, or the error that failed the journal now or
 * before; a failed flush is never retried. */
int kvj_sync(struct kvj *j);

/* kvj_sync_fd, kvj_sync_done - kvj_sync in two halves, for a caller that
 * flushes the journal itself (an io thread, through io_uring): kvj_sync_fd
 * sets *fd to the descriptor to flush (the current segment; -1 when
 * nothing was appended since the last flush) and returns 0, or the error
 * that failed the journal; kvj_sync_done takes the flush's result, 0 or a negative errno.  No
 * append may come between the two.  Returns as kvj_sync: 0, or the error
 * that failed the journal now or before (a failed flush is never
 * retried). */
int kvj_sync_fd(const struct kvj *j, int *fd);
int kvj_sync_done(struct kvj *j, int res);

/* kvj_release - recycle every segment whose records are all at or below
 * upto_lsn (a checkpointed LSN); never the current one.  Up to max_spares
 * of them become spares, reused by later segments; the rest are deleted.
 * Returns the number of segments released or a negative errno (the journal
 * stays usable: a segment not released is retried next time). */
int kvj_release(struct kvj *j, uint64_t upto_lsn);

/* ---- Spares made off the owner's thread -------------------------------
 * A segment that crosses into a new file takes a spare; with none left
 * (the first segments after a start, before any are recycled) the append
 * makes one itself: a segment's worth of zeros and a flush, tens of
 * milliseconds on the owner's path.  A helper thread can make it ahead. */

/* kvj_prepare_spare - write a spare of size bytes in dir (the journal's
 * directory), under a temporary name while it is made and a second one
 * once it is zeroed and flushed.  Touches no handle: safe on any thread
 * while the owner appends, one call at a time per directory.  0, or a
 * negative errno (-ENOSPC: the disk is full) with nothing left behind. */
int kvj_prepare_spare(const char *dir, uint64_t size);
/* kvj_adopt_spare - owner: take a spare kvj_prepare_spare finished into
 * the handle.  1 taken; 0 none there, or one not wanted (of another size,
 * or max_spares already held) and deleted; or a negative errno.  One never
 * taken is deleted by the next kvj_open. */
int kvj_adopt_spare(struct kvj *j);
/* The size of every new segment (kvj_opts.segment_size, or its default). */
uint64_t kvj_segment_size(const struct kvj *j);

/* The LSN the next appended record gets. */
uint64_t kvj_next_lsn(const struct kvj *j);
/* The last LSN known durable (flushed). */
uint64_t kvj_synced_lsn(const struct kvj *j);
/* 0, or the error that failed the journal. */
int kvj_error(const struct kvj *j);
/* Segment files in use and spares held (the reserved ones included). */
unsigned kvj_segments(const struct kvj *j);
unsigned kvj_spares(const struct kvj *j);
/* kvj_opts.reserve: spares only kvj_append_recs_reserve may take. */
unsigned kvj_reserve(const struct kvj *j);
/* Spares the handle made itself since kvj_open returned (appends that
 * found none, kvj_reset): each one a stall kvj_prepare_spare can spare. */
uint64_t kvj_spares_made(const struct kvj *j);
/* The current segment's file descriptor: for fault-injection tests only. */
int kvj_debug_fd(const struct kvj *j);

/* kvj_reset - throw every record away and go on at LSN next (a replica
 * taking a primary's full copy, whose LSNs it then keeps): every segment
 * is recycled, the current one too, and a new one starts at next under a
 * new journal id, so that no old record can pass for a new one.  The
 * caller has made LMDB's checkpoint LSN next - 1 first.  0 or a negative
 * errno (the journal is then failed). */
int kvj_reset(struct kvj *j, uint64_t next);

/* ---- Reading from another thread --------------------------------------
 * A read-only cursor over a journal's segment files (a primary sending its
 * journal to replicas), used by one thread while the committer appends and
 * recycles.  It never reads past an LSN the caller knows written (upto),
 * checks every record's checksum and LSN, and follows the segments by
 * their names.  A segment recycled under it shows as a bad record where
 * one was due: it then reports -ENOENT, as when the LSN asked for is no
 * longer kept; a bad record in a segment still in place is -EBADMSG. */
struct kvj_reader;

/* Open a reader of the journal in dir (shard shard_id) at LSN from.
 * Returns 0, -ENOENT (no segment holds from any more), -ENOMEM, or an
 * errno from opening a file. */
int kvj_reader_open(const char *dir, uint32_t shard_id, uint64_t from,
		    struct kvj_reader **out);
/* The next record, if its LSN is at most upto: 1 with *lsn, *type, the
 * payload (valid until the next call) and its length; 0 when the reader is
 * at upto + 1; -ENOENT when the record was recycled; -EBADMSG. */
int kvj_reader_next(struct kvj_reader *r, uint64_t upto, uint64_t *lsn,
		    uint8_t *type, const void **payload, uint32_t *len);
/* The LSN the next call returns. */
uint64_t kvj_reader_lsn(const struct kvj_reader *r);
void kvj_reader_close(struct kvj_reader *r);

/* A message for any error these calls return. */
const char *kvj_strerror(int err);

/* ---- Key-value records ------------------------------------------------
 * Records hold the outcome of a command, never the command: the key and its
 * new value and absolute expiry (PUT), or that it is gone (DEL), or that
 * the shard was emptied (FLUSHALL).  Replay is therefore deterministic.
 *
 * Payload layout (little-endian), the type in the record header:
 *   u32 key length | u32 value length | u64 expiry (ms since the epoch,
 *   0 = none) | key | value
 * A PUT of a value whose type (kvj_rec.vtype) is not 0 is written as a
 * KVJ_PUT_TYPED record, whose payload has the type byte after the expiry:
 *   u32 key length | u32 value length | u64 expiry | u8 type | key | value
 * A PUT or DEL of a key in a keyspace other than 0 (store.h, keyspaces) is
 * a KVJ_PUT_KS or KVJ_DEL_KS record, whose payload has two bytes more after
 * the expiry, the keyspace and the value's type (0 for a DEL):
 *   u32 key length | u32 value length | u64 expiry | u8 ks | u8 type | key |
 *   value
 * kvj_rec_decode gives them back as KVJ_PUT or KVJ_DEL with their ks and
 * vtype, so callers see PUT, DEL and FLUSHALL only; journals of keyspace 0's
 * plain values are unchanged, and every record written before keyspaces
 * were is keyspace 0's.
 */
enum kvj_type {
	KVJ_PUT = 1,
	KVJ_DEL = 2,
	KVJ_FLUSHALL = 3,
	KVJ_PUT_TYPED = 4, /* on disk only: a PUT with a vtype */
	KVJ_PUT_KS = 5,	   /* on disk only: a PUT in keyspace ks != 0 */
	KVJ_DEL_KS = 6,	   /* on disk only: a DEL in keyspace ks != 0 */
};

struct kvj_rec {
	uint8_t type;	 /* enum kvj_type: KVJ_PUT, KVJ_DEL or KVJ_FLUSHALL */
	uint8_t vtype;	 /* PUT: the value's type (0: plain) */
	uint8_t ks;	 /* PUT, DEL: the key's keyspace (store.h) */
	const void *key; /* within its keyspace (no keyspace byte) */
	uint32_t klen;
	const void *val; /* PUT only */
	uint32_t vlen;
	uint64_t expiry_ms;
};

#define KVJ_REC_HDR 16u

/* Bytes kvj_rec_encode writes for r. */
size_t kvj_rec_size(const struct kvj_rec *r);
/* Encode r into buf (cap bytes); returns the size or -ENOBUFS. */
int kvj_rec_encode(const struct kvj_rec *r, void *buf, size_t cap);
/* Decode a replayed payload; key and val point into it.  Returns 0 or
 * -EBADMSG (unknown type, lengths that do not add up). */
int kvj_rec_decode(uint8_t type, const void *payload, uint32_t len,
		   struct kvj_rec *r);
/* kvj_append of kv records, encoded straight into the write buffer. */
int kvj_append_recs(struct kvj *j, const struct kvj_rec *r, size_t n,
		    uint64_t *first_lsn);
/* The same, allowed to take the reserved spares (kvj_opts.reserve) when
 * it needs a new segment and none other is there. */
int kvj_append_recs_reserve(struct kvj *j, const struct kvj_rec *r, size_t n,
			    uint64_t *first_lsn);

#endif
