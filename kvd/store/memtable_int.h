/* memtable_int.h - the memtable's layout, private to memtable.c (arena,
 * hash index, writes, point reads) and memtable_runs.c (sorted runs,
 * views, iterators): the structures both read, and the small key helpers
 * both inline.  Nothing outside kvd/store/memtable*.c includes it;
 * memtable.h is the interface, and memtable.c's head has the
 * memory-ordering argument every field here follows.
 */
#ifndef KVD_STORE_MEMTABLE_INT_H
#define KVD_STORE_MEMTABLE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memtable.h"

#define RUN_MIN 64   /* new keys sorted into one run */
#define KIND_FLUSH 3 /* a flush marker: in no run, only m->wtop/m->top */

/* Counters after the write that allocated the node: one consistent moment,
 * published with the node through m->top (kvm_publish). */
struct kvm_stats {
	uint32_t keys;
	uint32_t tombstones;
	uint32_t below;
	uint32_t expiring;
	uint32_t unknown; /* keys first written with KVM_F_UNKNOWN */
	uint64_t flush_lsn;
};

/* Laid out in the arena as: this header, key, value.  Only a key's first
 * version in the memtable is in the creation list and a sorted run; a
 * later version is reached through the `newer` chain (rule 5). */
struct kvm_node {
	struct kvm_stats st;
	uint64_t expire_at;
	_Atomic(struct kvm_node *) newer; /* the version that replaced this */
	/* The version this one replaced (NULL for a key's first): a reader
	 * whose bound is below this version's LSN steps back (rule 9).  Set
	 * before the node is published, never changed. */
	const struct kvm_node *older;
	/* The key created after this one (first versions only): the order
	 * runs are made in and kvm_count_resolve walks in. */
	_Atomic(struct kvm_node *) created_next;
	/* first version written with KVM_F_UNKNOWN */
	uint8_t unknown : 1;
	/* written with KVM_F_NOCOUNT: in no counter */
	uint8_t nocount : 1;
	/* the value's type (KVM_F_TYPE), carried for the store's caller */
	uint8_t vtype : 3;
	uint8_t kind;
	uint16_t klen;
	uint32_t vlen;
	uint64_t lsn;
	/* The LSN of this key's first version since the last flush: whether
	 * the key was in the memtable at an earlier moment (a count's). */
	uint64_t first_lsn;
};

/* A sorted run: the first versions of some keys, in key order.  Written
 * once by the writer before any view holds it, then only read. */
struct kvm_run {
	unsigned refs; /* views that hold it (under view_mu) */
	size_t n;
	/* a Bloom filter of the entries' 16-byte prefixes, nbloom words
	 * after e[n] (memtable_runs.c, run_bloom): a seek within one prefix
	 * passes over a run without it ("Runs a seek may pass over") */
	size_t nbloom;
	struct kvm_sent e[];
};

/* The runs that hold every key created up to `upto`, in creation order;
 * keys created after it are the writer's pending ones, which readers find
 * on the creation list.  Runs are disjoint: one node per key. */
struct kvm_view {
	unsigned refs;		     /* iterators, +1 while current (view_mu) */
	struct kvm_view *next;	     /* on m->retired: replaced, still held */
	const struct kvm_node *upto; /* the last key the runs hold */
	unsigned nruns;		     /* oldest (largest) first */
	struct kvm_run *run[KVM_ITER_RUNS];
};

/* kvm_chunk.mapped: malloc'ed; mmap'ed and still as the kernel mapped it
 * (zero); mmap'ed and used before (from a kvm_pool).  chunk_free unmaps
 * the mapped ones. */
#define CHUNK_MALLOC 0
#define CHUNK_ZERO 1
#define CHUNK_USED 2

struct kvm_chunk {
	struct kvm_chunk *next;
	size_t size;
	size_t mapped; /* CHUNK_MALLOC, CHUNK_ZERO or CHUNK_USED */
		       /* data follows, aligned to 8 */
};

/* The hash index: slot = tag << 48 | node, 0 when empty. */
struct kvm_hash {
	uint64_t mask;
	_Atomic uint64_t slot[];
};

struct kvm {
	/* Arena: written by the writer only; bytes also read by readers. */
	struct kvm_chunk *chunks;
	char *cur;   /* bump pointer in the current chunk */
	size_t left; /* bytes left after cur */
	size_t chunk_size;
	size_t limit;
	struct kvm_pool *pool; /* standard chunks from and back to (or NULL) */
	atomic_size_t bytes;

	uint64_t last_lsn; /* writer only */
	uint64_t pub_lsn;  /* writer only: the LSN of the last kvm_publish */
	/* The last node written (writer only): the counters the next write
	 * starts from, and what kvm_publish makes visible. */
	struct kvm_node *wtop;
	/* The last node published (rule 9): the counters, flush LSN and LSN
	 * bound of what readers see. */
	_Atomic(struct kvm_node *) top;
	_Atomic(struct kvm_hash *) hash;
	uint64_t hkeys;	       /* slots in use (writer only) */
	struct kvm_node *head; /* no key */
	/* Creation order: head->created_next is the first key created; the
	 * writer appends at last_created and mirrors it in tail. */
	struct kvm_node *last_created;
	_Atomic(struct kvm_node *) tail;
	/* Keys created since the current view's upto (writer only), sorted
	 * into a run when the next new key would make them RUN_MIN + 1. */
	struct kvm_sent pend[RUN_MIN];
	unsigned npend;
	/* view and retired are the writer's to change, under view_mu;
	 * readers take a view (refs) under it. */
	pthread_mutex_t view_mu;
	struct kvm_view *view;
	struct kvm_view *retired;
	atomic_size_t run_bytes;
	/* kvm_count_resolve's cache (under res_mu, readers only): how many
	 * keys, in creation order up to res_pos, hold a value below among
	 * those written with KVM_F_UNKNOWN. */
	pthread_mutex_t res_mu;
	const struct kvm_node *res_pos;
	uint64_t res_seen;
	uint64_t res_below;
};

/* ---- nodes and keys ---- */

static inline const uint8_t *node_key(const struct kvm_node *x)
{
	return (const uint8_t *)(x + 1);
}

static inline const uint8_t *node_val(const struct kvm_node *x)
{
	return node_key(x) + x->klen;
}

/* LMDB's default order: bytes, then the shorter key first.  Eight bytes
 * at a time as big-endian words, inline: sorting, merging and seeking
 * compare keys at every step, and a call to memcmp cost more than the
 * comparison. */
static inline int key_cmp(const uint8_t *a, size_t an, const uint8_t *b,
			  size_t bn)
{
	size_t n = an < bn ? an : bn, i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x, y;

		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			x = __builtin_bswap64(x);
			y = __builtin_bswap64(y);
#endif
			return x < y ? -1 : 1;
		}
	}
	for (; i < n; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return an < bn ? -1 : an > bn;
}

/* A key's first 16 bytes, zero-padded, as two big-endian words: words
 * that differ order the keys as key_cmp does (a zero pad sorts a key
 * before the longer keys it begins); equal words leave it to key_cmp. */
static inline void key_prefix(const uint8_t *k, size_t n, uint64_t *p0,
			      uint64_t *p1)
{
	uint8_t b[16] = {0};

	memcpy(b, k, n < 16 ? n : 16);
	memcpy(p0, b, 8);
	memcpy(p1, b + 8, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	*p0 = __builtin_bswap64(*p0);
	*p1 = __builtin_bswap64(*p1);
#endif
}

static inline struct kvm_sent sent_of(const struct kvm_node *x)
{
	struct kvm_sent e = {.x = x};

	key_prefix(node_key(x), x->klen, &e.p0, &e.p1);
	return e;
}

/* a's key against (p0, p1, key, klen). */
static inline int sent_cmp_key(const struct kvm_sent *a, uint64_t p0,
			       uint64_t p1, const uint8_t *key, size_t klen)
{
	if (a->p0 != p0)
		return a->p0 < p0 ? -1 : 1;
	if (a->p1 != p1)
		return a->p1 < p1 ? -1 : 1;
	return key_cmp(node_key(a->x), a->x->klen, key, klen);
}

static inline int sent_cmp(const struct kvm_sent *a, const struct kvm_sent *b)
{
	return sent_cmp_key(a, b->p0, b->p1, node_key(b->x), b->x->klen);
}

/* The last node published (kvm_publish): its counters, flush LSN and LSN
 * are the newest moment a reader can see (rule 9). */
static inline const struct kvm_node *cur_top(const struct kvm *m)
{
	return atomic_load_explicit(&((struct kvm *)m)->top,
				    memory_order_acquire);
}

static inline const struct kvm_stats *cur_stats(const struct kvm *m)
{
	return &cur_top(m)->st;
}

static inline const struct kvm_node *next_created(const struct kvm_node *x)
{
	return atomic_load_explicit(&((struct kvm_node *)x)->created_next,
				    memory_order_acquire);
}

/* Follow `newer` to the newest version at or below LSN upto (rules 6 and
 * 7); x itself is returned when no newer one qualifies. */
static inline const struct kvm_node *newest_upto(const struct kvm_node *x,
						 uint64_t upto)
{
	const struct kvm_node *n;

	while ((n = atomic_load_explicit(&((struct kvm_node *)x)->newer,
					 memory_order_acquire)) &&
	       n->lsn <= upto)
		x = n;
	return x;
}

/* The version of x's key a reader bound to LSN upto sees, from x, a
 * version reached through a hash slot or a run: forward through `newer`
 * while those are at or below upto, then back through `older` while above
 * it (rule 9); NULL when the key's first version here is above upto. */
static inline const struct kvm_node *visible_at(const struct kvm_node *x,
						uint64_t upto)
{
	x = newest_upto(x, upto);
	while (x && x->lsn > upto)
		x = x->older;
	return x;
}

static inline void fill_entry(const struct kvm_node *x, struct kvm_entry *e)
{
	e->key = node_key(x);
	e->klen = x->klen;
	e->kind = x->kind;
	e->val = x->kind == KVM_VALUE ? node_val(x) : NULL;
	e->vlen = x->vlen;
	e->type = x->vtype;
	e->expire_at = x->expire_at;
	e->lsn = x->lsn;
	e->first_lsn = x->first_lsn;
}

/* ---- between the two files ---- */

/* Sort the writer's pending keys into a run and publish a new view
 * (memtable_runs.c); 0, -ENOMEM or -ENOSPC with nothing changed. */
int kvm_runs_add(struct kvm *m);
/* Free every view and run (kvm_destroy only). */
void kvm_views_free(struct kvm *m);

#endif
