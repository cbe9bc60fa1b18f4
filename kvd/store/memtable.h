/* memtable.h - a shard's memtable: every write acknowledged since the last
 * checkpoint, in key order, read by every io thread without locks.
 *
 * A memtable is an arena of key versions, each immutable.  A write never
 * changes a version in place: it adds a new one, so a reader sees either
 * the old version or the new one, whole.  A key's first version stands
 * for the key; later ones are chained from it (newest last).  A hash index
 * takes kvm_get, and the writer, to a key's newest version; sorted runs of
 * first versions, made 64 new keys at a time, give iterators key order
 * (so that writing a new key costs no ordered search).
 * Nothing is ever unlinked or freed before kvm_destroy, which frees the
 * arena as a whole; only runs replaced by a merge are freed earlier, once
 * no iterator holds them.  docs/memtable.md has the picture and the
 * argument.
 *
 * Threading (the contract every caller keeps):
 *   - Exactly one writer thread at a time calls kvm_put, kvm_del,
 *     kvm_flush and kvm_publish (the shard's committer, or recovery before
 *     readers start).  Handing the writer role to another thread needs a
 *     happens-before edge between them (a mutex, a thread join, a queue).
 *   - Readers see the writes up to the last kvm_publish, all of them at
 *     once: the writes of one batch (everything between two kvm_publish
 *     calls) become visible together.  A reader's view is a bound (the
 *     published LSN) taken once: kvm_snapshot for several kvm_get_at
 *     calls that must agree, or once per kvm_get, or at kvm_iter_seek for
 *     a whole pass.  kvm_count's counters are those of the last publish.
 *   - Any number of reader threads call kvm_get, kvm_snapshot,
 *     kvm_get_at, kvm_count, kvm_bytes,
 *     kvm_flush_lsn and the kvm_iter_* calls at the same time as the writer
 *     and each other.  No reader call allocates or waits for the writer's
 *     work; kvm_get and the iterator's steps take no lock.  kvm_iter_seek
 *     and kvm_iter_fini take a mutex for a count (the writer holds it only
 *     to swap in new runs, once per 64 new keys).  kvm_count_resolve takes
 *     a mutex that only other kvm_count_resolve calls hold.
 *   - While a batch is being written a reader sees the memtable as the
 *     last kvm_publish left it: kvm_get returns the version published
 *     then (KVM_ABSENT for a key first written since: look below); an
 *     iterator returns the keys published before its seek, each at its
 *     version then.  Once kvm_publish returned and the writer told a
 *     reader so (through any release/acquire pair, such as the completion
 *     queue that answers a client), that reader sees the batch: own
 *     writes are read.
 *   - A reader never sees a version go back: a thread that saw LSN n for
 *     a key sees n or a later one afterwards.
 *   - kvm_destroy frees every pointer any call returned.  The caller calls
 *     it only once no reader can hold such a pointer or an iterator (every
 *     seek was given back with kvm_iter_fini): in
 *     kvd, after every io thread passed a quiescent point (the end of a
 *     loop turn) following the memtable's retirement.
 *
 * Layers and what kvm_get's answer means to a reader (the store is: the
 * active memtable, then the one being checkpointed, then LMDB):
 *   KVM_VALUE      this layer decides: the value (the caller treats an
 *                  expire_at in the past as deleted; the memtable has no
 *                  clock).
 *   KVM_TOMBSTONE  this layer decides: the key is deleted, do not look
 *                  below (a kvm_del, or a kvm_flush that hides the key).
 *   KVM_ABSENT     this layer knows nothing of the key: look below.
 *
 * FLUSHALL: kvm_flush(m, lsn) records a flush marker.  Every version in m
 * with an LSN below it and every layer below m (older memtables, LMDB) are
 * hidden from then on: kvm_get answers KVM_TOMBSTONE for them, iterators
 * skip them, kvm_count no longer counts them, and kvm_iter_base_hidden()
 * tells a scan to leave the layers below out.  The checkpointer that
 * applies a memtable with a flush marker empties LMDB first (mdb_drop) in
 * the same transaction.
 *
 * SCAN/KEYS, merged with LMDB (the caller's loop; memtable wins on equal
 * keys, tombstones hide base keys):
 *
 *	kvm_iter_init(&it, m); kvm_iter_seek(&it, start, n);
 *	cursor: MDB_SET_RANGE at start, unless kvm_iter_base_hidden(&it)
 *	while either side has a key:
 *		take the smaller key; on equal keys take the memtable's and
 *		step both sides;
 *		memtable side: KVM_VALUE (not expired) is emitted,
 *		KVM_TOMBSTONE is not; LMDB side: emitted (unless expired).
 *
 * With two memtables (active A over frozen F over LMDB) the same merge runs
 * over three sources, A winning over F winning over LMDB; if A's flush hid
 * the base, F and LMDB are both left out.
 *
 * COUNT/DBSIZE, exact: kvm_count's counters are one consistent snapshot
 * (those of the last kvm_publish).  Writes pass KVM_F_BELOW when
 * the key holds a value (live or expired-but-unreaped) in the layers below
 * this memtable, as the committer saw them; the flag counts only at a
 * key's first write in this memtable (later writes' flags are ignored, and
 * behind a flush nothing is below).  A writer that did not look (a plain
 * PUT: its outcome does not depend on the old value, and a lookup in LMDB
 * per write was a fifth of the committer's time) passes KVM_F_UNKNOWN
 * instead: kvm_count_resolve asks the caller about each such key, once per
 * memtable (the layers below a memtable do not change while it exists),
 * and counts the answers into below.  Then the
 * number of stored entries, expired or not, is
 *
 *	entries = (base_hidden ? 0 : entries_below)
 *		  + (keys - tombstones) - below
 *
 * where entries_below is LMDB's mdb_stat count (plus the frozen
 * memtable's own delta, computed the same way).  Live keys at time now are
 * entries minus the expired ones: the expired keys of LMDB's expiry index
 * that kvm_get reports KVM_ABSENT in the memtables, plus the memtable's
 * newest values with 0 < expire_at <= now (an iteration, needed only when
 * c.expiring > 0).
 *
 * Errors: negative errno values; kvm_strerror() names them.
 *   -EINVAL  key empty or longer than KVM_MAX_KEY, value too long, an LSN
 *            lower than the last one written, or not above the last one
 *            published (LSNs start at 1).
 *   -ENOSPC  the write would take the arena past its limit: the memtable is
 *            full; freeze it and write into a new one.  Nothing was written.
 *   -ENOMEM  malloc failed.  Nothing was written.
 */
#ifndef KVD_STORE_MEMTABLE_H
#define KVD_STORE_MEMTABLE_H

#include <stddef.h>
#include <stdint.h>

struct kvm;
struct kvm_node;

/* LMDB's compiled-in key limit (kv_proto.h's KV_MAX_KEY_LIMIT), plus the
 * keyspace byte the store puts in front of every key (store.h). */
#define KVM_MAX_KEY 512u
/* Values longer than this are refused (kvd's own limit is 16 MiB). */
#define KVM_MAX_VALUE (1u << 30)
/* Arena chunk size when kvm_opts.chunk_size is 0: one huge page. */
#define KVM_DEFAULT_CHUNK (2u << 20)

/* kvm_get results and kvm_entry.kind. */
#define KVM_ABSENT 0
#define KVM_VALUE 1
#define KVM_TOMBSTONE 2

/* kvm_put/kvm_del flags. */
/* The key holds a value in the layers below this memtable (see COUNT). */
#define KVM_F_BELOW 0x1u
/* Whether it does was not looked up: kvm_count_resolve finds out. */
#define KVM_F_UNKNOWN 0x2u
/* The key is in no counter (kvm_count): the store's keyspaces other than
 * 0, which DBSIZE does not count.  Every write of a key passes it or none
 * does; it wins over the two flags above. */
#define KVM_F_NOCOUNT 0x8u
/* kvm_put: the value's type, 0 .. KVM_MAX_TYPE, kept with the version and
 * given back in kvm_entry.type.  The memtable gives it no meaning (kvd's
 * store: a plain value or a hash, store.h). */
#define KVM_MAX_TYPE 7u
#define KVM_F_TYPE(t) (((unsigned)(t)&KVM_MAX_TYPE) << 4)
#define KVM_F_TYPE_OF(f) (((unsigned)(f) >> 4) & KVM_MAX_TYPE)

struct kvm_pool;

struct kvm_opts {
	size_t chunk_size; /* arena chunk bytes with their header,
			      0 = KVM_DEFAULT_CHUNK */
	size_t limit;	   /* arena bytes at most, 0 = no limit */
	/* About the arena bytes it will be frozen at, if known (kvd: its
	 * memtable-size): the hash index starts at the size those bytes
	 * need, instead of growing to it by doubling.  0: it starts small. */
	size_t expect_bytes;
	/* Where standard chunks come from and go back to (NULL: the kernel
	 * each time); its chunk size must be chunk_size.  See kvm_pool. */
	struct kvm_pool *pool;
};

/* One version, as readers see it.  Pointers stay valid until kvm_destroy. */
struct kvm_entry {
	const uint8_t *key;
	const uint8_t *val; /* NULL for a tombstone */
	uint32_t klen;
	uint32_t vlen;
	uint8_t type;	    /* a value's KVM_F_TYPE; 0 for a tombstone */
	uint64_t expire_at; /* Unix ms, 0 for none */
	uint64_t lsn;	    /* a flush-hidden key: the flush's LSN */
	uint64_t first_lsn; /* the key's first version since the flush (a
			       flush-hidden key: the flush's LSN) */
	int kind;	    /* KVM_VALUE or KVM_TOMBSTONE */
};

/* Counters of one moment (see COUNT above). */
struct kvm_count {
	uint64_t keys;	     /* distinct keys visible in this memtable */
	uint64_t tombstones; /* of them, deleted ones */
	uint64_t below;	     /* of them, ones that hold a value below */
	uint64_t expiring;   /* of them, values with an expire_at */
	uint64_t unknown;    /* of them, first written with KVM_F_UNKNOWN
				(0 after kvm_count_resolve) */
	uint64_t flush_lsn;  /* 0, or the flush that hides the base */
	uint64_t lsn;	     /* the last write counted (0: none): the moment
				kvm_iter_entry_at and first_lsn compare with */
};

/* Iterators merge the memtable's sorted runs (kvm_iter_seek takes a set of
 * them, kvm_iter_fini gives it back) with the few keys created after the
 * newest run, which the iterator sorts itself.  These bound both. */
#define KVM_ITER_RUNS 40  /* runs of 64 << i keys: 2^45 keys */
#define KVM_ITER_PEND 128 /* twice the keys a run is made of */

/* A key in a sorted run: its first 16 bytes as two big-endian words (so
 * that most comparisons touch no node), then its first version. */
struct kvm_sent {
	uint64_t p0, p1;
	const struct kvm_node *x;
};

struct kvm_view;

/* A reader's view of a memtable: what the last kvm_publish made visible
 * (kvm_snapshot).  Versions above lsn are not seen. */
struct kvm_snap {
	uint64_t lsn;	    /* the last LSN published (0: nothing yet) */
	uint64_t flush_lsn; /* the flush in force then, or 0 */
};

/* An iterator: a reader's position.  kvm_iter_fini releases what a seek
 * took; an iterator is valid as long as its memtable is. */
struct kvm_iter {
	const struct kvm *m;
	struct kvm_view *v;	     /* the runs held since the seek */
	const struct kvm_node *node; /* the current key, NULL at the end */
	uint64_t flush_lsn;	     /* read once at seek: one view per scan */
	uint64_t upto;		     /* the published LSN at seek: the bound */
	int check;		     /* the runs hold keys above upto */
	int cur;		     /* the source of node: a run, or npend */
	unsigned npend;
	size_t pos[KVM_ITER_RUNS + 1];	     /* per run, then the keys below */
	struct kvm_sent pend[KVM_ITER_PEND]; /* keys newer than the runs */
};

/* kvm_create - a new, empty memtable.
 * opts may be NULL (defaults).  Returns 0 with *out set, -EINVAL for a
 * chunk size under 4 KiB or a limit under one chunk, -ENOMEM. */
int kvm_create(const struct kvm_opts *opts, struct kvm **out);

/* kvm_destroy - free the memtable and its arena (see the threading
 * contract: no reader may hold anything of it).  NULL is a no-op. */
void kvm_destroy(struct kvm *m);

/* A pool of mapped arena chunks that one writer's successive memtables
 * share: kvm_destroy gives a memtable's standard chunks back to it (up to
 * max_bytes), and the next memtable's arena takes them instead of mapping
 * new ones.  A chunk just mapped costs a page fault and the kernel's
 * zeroing of a 2 MiB page at first touch, on the writer's path; in a
 * virtual machine, where first touches also fault in the host, that was
 * 3-6% of a core in the committers of a uuid fill (bench/HISTORY.md, seventh round).
 * Only chunks of chunk_size bytes of 2 MiB and more (the mapped ones) are
 * pooled.  Any thread may call these, at the same time as kvm_create and
 * kvm_destroy of memtables that use the pool (one mutex).
 *
 * kvm_pool_create - 0 with *out set, -EINVAL for a chunk size under one
 * huge page (nothing to pool), -ENOMEM. */
int kvm_pool_create(size_t chunk_size, size_t max_bytes, struct kvm_pool **out);
/* kvm_pool_trim - give every pooled chunk back to the kernel (an idle
 * writer's memory goes back to the machine). */
void kvm_pool_trim(struct kvm_pool *p);
/* kvm_pool_bytes - bytes of the chunks pooled now. */
size_t kvm_pool_bytes(struct kvm_pool *p);
/* kvm_pool_destroy - trim and free the pool; no memtable may still use
 * it.  NULL is a no-op. */
void kvm_pool_destroy(struct kvm_pool *p);

/* kvm_put - write key = val (writer only), visible to readers at the next
 * kvm_publish.  expire_at is absolute Unix ms, 0 for none.  lsn must be >=
 * the last LSN written to m (equal LSNs are allowed within a batch: of two
 * writes of one key with one LSN the later one wins) and above the last
 * LSN published.  flags: KVM_F_BELOW or KVM_F_UNKNOWN, and KVM_F_TYPE(t)
 * for a value of type t (none: 0).  0, -EINVAL,
 * -ENOSPC, -ENOMEM. */
int kvm_put(struct kvm *m, const void *key, size_t klen, const void *val,
	    size_t vlen, uint64_t expire_at, uint64_t lsn, unsigned flags);

/* kvm_del - write a tombstone for key (writer only), whether or not the
 * key exists anywhere: the tombstone hides the layers below.  Same rules
 * and errors as kvm_put. */
int kvm_del(struct kvm *m, const void *key, size_t klen, uint64_t lsn,
	    unsigned flags);

/* kvm_flush - FLUSHALL at lsn (writer only): hides every version in m
 * older than lsn and every layer below; writes after it (LSN >= lsn) are
 * visible.  lsn must be above every LSN written before (and so not 0).
 * Readers see it at the next kvm_publish.  0, -EINVAL, -ENOSPC, -ENOMEM. */
int kvm_flush(struct kvm *m, uint64_t lsn);

/* kvm_publish - make every write since the last kvm_publish visible to
 * readers, all at once (writer only).  A writer calls it after each batch
 * whose records must be seen together, and before it tells anyone that
 * the batch is done. */
void kvm_publish(struct kvm *m);

/* kvm_prefetch - start loading the hash slot a kvm_put, kvm_del or kvm_get
 * of key will probe first (any thread; a hint, no effect on contents).  A
 * writer that has a batch of keys calls it a few keys ahead, so that the
 * probe's cache miss overlaps the inserts before it. */
void kvm_prefetch(const struct kvm *m, const void *key, size_t klen);
/* kvm_prefetch_node - the second step: start loading the node that slot
 * names (its header and key, which the probe compares).  Called once the
 * slot itself has had time to arrive (a pass of kvm_prefetch over a batch
 * of keys first), it turns a get's two dependent cache misses into none. */
void kvm_prefetch_node(const struct kvm *m, const void *key, size_t klen);

/* kvm_get - the newest published version of key.  Returns KVM_VALUE or
 * KVM_TOMBSTONE with *e filled, KVM_ABSENT (e untouched), or -EINVAL for a
 * bad key.  For a key a flush hides, e->lsn is the flush's LSN and e->key
 * the caller's.  Each call takes its own view (kvm_snapshot). */
int kvm_get(const struct kvm *m, const void *key, size_t klen,
	    struct kvm_entry *e);

/* kvm_snapshot - the view readers have now: the last publish.  Reads that
 * must agree with each other (a multi-key read) take one and pass it to
 * kvm_get_at, which answers as kvm_get did at that moment. */
void kvm_snapshot(const struct kvm *m, struct kvm_snap *s);
int kvm_get_at(const struct kvm *m, const struct kvm_snap *s, const void *key,
	       size_t klen, struct kvm_entry *e);

/* kvm_count - the counters of the last publish.  below
 * leaves out the c->unknown keys written with KVM_F_UNKNOWN.  c->lsn names
 * the moment: a reader that looks at the memtable again later (COUNT's
 * expired keys) sees it as it was then through kvm_iter_entry_at, and a key
 * kvm_get finds was in it then if its first_lsn is at most c->lsn, as long
 * as no flush came in between (kvm_flush_lsn unchanged) and LSNs are
 * distinct (the store's are: one per journal record). */
void kvm_count(const struct kvm *m, struct kvm_count *c);

/* kvm_count_resolve - kvm_count with every key written with KVM_F_UNKNOWN
 * counted into below (c->unknown is 0 after it).  below(arg, key, klen) is
 * called, for each such key not asked before (readers share the answers,
 * in memory owned by m), with 1 when the key holds a value (live or
 * expired-but-unreaped) in the layers below m, 0 when not, or a negative
 * error, which is returned (c is then the plain kvm_count).  Readers only;
 * one reader may wait here for another one's calls to below (a mutex:
 * COUNT is rare), never for the writer.  Behind a flush nothing is asked. */
int kvm_count_resolve(const struct kvm *m, struct kvm_count *c,
		      int (*below)(void *arg, const uint8_t *key,
				   uint32_t klen),
		      void *arg);

/* kvm_bytes - arena bytes taken (chunks plus headers) plus the sorted
 * runs' bytes: what the caller compares with its memtable size to decide
 * when to freeze.  The arena limit counts the arena only. */
size_t kvm_bytes(const struct kvm *m);

/* kvm_flush_lsn - 0, or the LSN of the newest flush marker published. */
uint64_t kvm_flush_lsn(const struct kvm *m);

/* kvm_last_lsn - the highest LSN written, 0 when none (writer only, or a
 * reader that has a happens-before edge from the last write). */
uint64_t kvm_last_lsn(const struct kvm *m);

/* ---- iteration (readers), in key order, newest version of each key ---- */

/* Bind it to m; the iterator is not valid until a seek. */
void kvm_iter_init(struct kvm_iter *it, const struct kvm *m);
/* Position at the first key >= key (klen 0: the first key).  Keys whose
 * newest version a flush hides are skipped; the flush LSN is read here, so
 * one pass (seek, then next until the end) has one view of the base.
 * The pass returns the keys published before the seek, each at its
 * version then, never one written after it.  Tombstones are
 * returned (a merge needs them).  A seek after a seek releases the first
 * one's runs.  Returns kvm_iter_valid(). */
int kvm_iter_seek(struct kvm_iter *it, const void *key, size_t klen);
/* kvm_iter_seek for a pass that stops before end (elen 0: no end): the
 * keys created after the newest run that fall outside [key, end) are left
 * out before the iterator sorts them, so a short pass (an index lookup
 * reads a key or a few) does not sort up to KVM_ITER_PEND keys it never
 * reaches.  Past end the pass may skip keys: the caller stops there. */
int kvm_iter_seek_range(struct kvm_iter *it, const void *key, size_t klen,
			const void *end, size_t elen);
/* Release the runs the last seek took (a no-op after init or fini).  Every
 * seek needs one before kvm_destroy; until then the runs it holds stay
 * allocated. */
void kvm_iter_fini(struct kvm_iter *it);
/* 1 when positioned at a key, 0 at the end. */
int kvm_iter_valid(const struct kvm_iter *it);
/* Step to the next key, skipping older versions of the current one.
 * Requires valid.  Returns kvm_iter_valid(). */
int kvm_iter_next(struct kvm_iter *it);
/* The current key (requires valid). */
const uint8_t *kvm_iter_key(const struct kvm_iter *it, uint32_t *klen);
/* The current key's version as of the seek (requires valid): its kind is
 * KVM_VALUE or KVM_TOMBSTONE. */
void kvm_iter_entry(const struct kvm_iter *it, struct kvm_entry *e);
/* The current key as it was at moment upto (a kvm_count's lsn): 1 with *e
 * filled, 0 when the key was not in the memtable then (created later, or
 * hidden by the flush in force then, flush_lsn). */
int kvm_iter_entry_at(const struct kvm_iter *it, uint64_t upto,
		      uint64_t flush_lsn, struct kvm_entry *e);

/* 1 when the flush seen at seek hides the layers below this memtable. */
int kvm_iter_base_hidden(const struct kvm_iter *it);

/* A static string for one of the negative codes above. */
const char *kvm_strerror(int err);

#endif
