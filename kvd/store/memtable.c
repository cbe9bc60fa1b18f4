/* memtable.c - a single-writer, many-reader memtable of key versions in an
 * arena: a hash index for point reads, sorted runs for order (see
 * memtable.h for the contract, docs/memtable.md for the design).
 *
 * Why readers need no lock for the versions (the memory-ordering argument):
 *
 *  1. A node's contents (key, value, LSN, kind, expiry, counters, the
 *     `older` link) are written by the writer before the node is published
 *     anywhere, and never again.  Only its `newer` and `created_next` links change.
 *  2. The writer publishes with release stores (a hash slot, a `newer`
 *     link, a `created_next` link, m->tail, m->top); a reader loads each
 *     with acquire.  So a reader that reaches a node by any path has
 *     happened-after everything the writer wrote into it before: it sees
 *     the node whole.
 *  3. Nodes are never unlinked or moved, and memory is freed only by
 *     kvm_destroy, so any node pointer a reader holds stays valid.
 *  4. Order is kept apart from the versions, in sorted runs: arrays of
 *     (16-byte key prefix, first version) in key order, each written whole
 *     by the writer before a view that holds it is published under
 *     view_mu.  A view is the set of runs holding every key created up to
 *     its `upto`; newer keys (at most RUN_MIN, and the writer's own until
 *     they make a run) are on the creation list after `upto`, and an
 *     iterator sorts those itself.  Readers take a view with a count
 *     (under view_mu, once per seek); the runs a view holds are freed when
 *     the last view holding them is released.  Why runs rather than a
 *     skiplist: inserting a random key into a skiplist of hundreds of
 *     thousands cost a cache miss per step, and it was the committer's
 *     largest cost; a run is made of 64 keys sorted in cache and merged
 *     sequentially, a binary counter of merges.
 *  5. One node per key is in the creation list and in a run: the key's
 *     first version in this memtable.  A later version hangs off the
 *     `newer` chain below (it is in no list), so a write to a key already
 *     here costs a hash probe, and an iterator steps from key to key with
 *     no older versions in its way.
 *
 * Point reads use a hash index (open addressing, linear probing, at most
 * half full) that maps each key to its newest version, and every version
 * has a `newer` link to the one that replaced it.  The writer publishes a
 * version x of a key whose newest version is s in this order, each a
 * release store:
 *
 *	(a) s->newer = x      (x is complete)
 *	(c) the key's hash slot = x
 *
 * and a new key's x in this order: (a') the empty hash slot = x, (b) x on
 * the creation list and m->tail = x.
 * Readers, by kvm_get or by an iterator, take a node (from the slot, a
 * run or the creation list) and follow `newer` with acquire loads to its
 * end.
 *
 *  6. Versions never go back, across kvm_get and iterators alike: a reader
 *     that saw x by any path happened after (a), so any later look at s
 *     reads s->newer == x (or a newer one: coherence) and goes on to x.
 *  7. A slot, once set for a key, always holds a version of that key:
 *     (c) replaces a version with a newer one of the same key, so a probe
 *     that matched the key once matches it again.  A new key is in the
 *     index (a') before the creation list (b): kvm_get may find a
 *     brand-new key a moment before an iterator does, never after.
 *  8. The index grows by building a bigger table and publishing it with a
 *     release store of m->hash; the old table stays in the arena, still
 *     right for the versions it holds (rule 6 takes a reader on from them).
 *     A slot holds a node pointer with a 16-bit tag of the key's hash in
 *     its top bits (user pointers fit in 48 bits here), so a probe that
 *     does not match costs no load of the node.
 *
 * Batches (kvm_publish): a reader sees the memtable as the last
 * kvm_publish left it, never part of what the writer wrote after it, so
 * that the records of one batch become visible together.
 *
 *  9. The writer links every version as above at once, and moves m->wtop
 *     (its own) to the last node written.  kvm_publish stores m->top =
 *     m->wtop (release), after every link of the batch.  A reader loads
 *     m->top once per view (acquire; kvm_snapshot, kvm_get, kvm_iter_seek)
 *     and takes its LSN as its bound and its flush LSN as the flush in
 *     force; LSNs only grow and a write after kvm_publish must be above
 *     the published LSN, so the versions at or below the bound are exactly
 *     those published.  Every one of them is reachable: each link to it (a
 *     slot, m->hash, `newer`, `created_next`, m->tail) was stored before
 *     m->top, so a reader that acquired m->top loads that link or a later
 *     one (coherence).  A later one may lead to versions above the bound,
 *     written since: the reader walks from the node it reached forward
 *     through `newer` while at or below the bound (rule 6), then back
 *     through `older` while above it (visible_at: `older`, set before the
 *     node was published, is the version the node replaced, which had been
 *     linked before it).  A key whose first version is above the bound
 *     is absent at that bound: the reader looks in the layers below, which
 *     still hold its state before this memtable.  Counters and the flush
 *     LSN come with m->top: one published moment (kvm_count).  Iterators
 *     take the bound at the seek: keys whose first version is above it are
 *     skipped (memtable_runs.c), each key's entry is its version at it.
 *     Versions never go back (rule 6) across views: m->top only moves
 *     forward, so a later view's bound is at or above an earlier one's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>

#include "memtable_int.h"

#define ALIGN 8u
#define HASH_MIN 64u /* slots in a new memtable's index */
/* expect_bytes per slot of a new index: a new key takes about 230 arena
 * bytes with a 16-byte key and a 100-byte value, so an index of
 * expect_bytes / 128 slots ends under half full with such keys and grows
 * once (one rehash, not one per doubling from HASH_MIN) with much
 * smaller ones.  Its 8-byte slots are a sixteenth of expect_bytes. */
#define HASH_BYTES_PER_SLOT 128u
#define HASH_SEED 0x6b766d656d746162ull /* not the router's (unseeded) hash */
#define PTR_BITS 48
#define PTR_MASK ((UINT64_C(1) << PTR_BITS) - 1)

/* ---- arena ---- */

/* Chunks of 2 MiB or more are aligned to 2 MiB and offered to the
 * kernel as huge pages: a hash probe or an iterator step in a memtable of
 * hundreds of megabytes misses the TLB at nearly every step with 4 KiB
 * pages.  They
 * are mapped and unmapped directly: from malloc, a freed memtable stayed
 * in the process's heaps (glibc raises its mmap threshold after the first
 * free), and kvd's anonymous memory grew to several times its memtables. */
#define HUGE_PAGE (2u << 20)

/* Mapped chunks (2 MiB and more) are zero, as the kernel maps them. */
static struct kvm_chunk *chunk_mem(size_t total)
{
	struct kvm_chunk *c;
	char *p, *a;
	size_t len = (total + 4095) & ~(size_t)4095;

	if (total < HUGE_PAGE) {
		c = malloc(total);
		if (c)
			c->mapped = CHUNK_MALLOC;
		return c;
	}
	p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) &
		     ~(uintptr_t)(HUGE_PAGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + len < p + len + HUGE_PAGE)
		munmap(a + len, (size_t)(p + HUGE_PAGE - a));
	madvise(a, len, MADV_HUGEPAGE); /* advice: failure is harmless */
	c = (struct kvm_chunk *)a;
	c->mapped = CHUNK_ZERO;
	return c;
}

static void chunk_free(struct kvm_chunk *c)
{
	if (c->mapped != CHUNK_MALLOC)
		munmap(c, sizeof(*c) + c->size);
	else
		free(c);
}

/* ---- chunk pool ---- */

struct kvm_pool {
	pthread_mutex_t mu;
	struct kvm_chunk *free; /* under mu */
	size_t n, max;		/* chunks held, and at most */
	size_t chunk_size;
};

int kvm_pool_create(size_t chunk_size, size_t max_bytes, struct kvm_pool **out)
{
	struct kvm_pool *p;

	*out = NULL;
	if (chunk_size < HUGE_PAGE)
		return -EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	p->chunk_size = chunk_size;
	p->max = max_bytes / chunk_size;
	*out = p;
	return 0;
}

/* A pooled chunk, or NULL: the caller maps one. */
static struct kvm_chunk *pool_get(struct kvm_pool *p)
{
	struct kvm_chunk *c;

	pthread_mutex_lock(&p->mu);
	if ((c = p->free)) {
		p->free = c->next;
		p->n--;
	}
	pthread_mutex_unlock(&p->mu);
	return c;
}

/* Keep c for the next memtable, if it is a standard mapped chunk and the
 * pool has room; 0 when the caller must free it. */
static int pool_put(struct kvm_pool *p, struct kvm_chunk *c)
{
	int kept = 0;

	if (c->mapped == CHUNK_MALLOC || sizeof(*c) + c->size != p->chunk_size)
		return 0;
	pthread_mutex_lock(&p->mu);
	if (p->n < p->max) {
		c->mapped = CHUNK_USED; /* no longer zero */
		c->next = p->free;
		p->free = c;
		p->n++;
		kept = 1;
	}
	pthread_mutex_unlock(&p->mu);
	return kept;
}

void kvm_pool_trim(struct kvm_pool *p)
{
	struct kvm_chunk *c, *next;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	c = p->free;
	p->free = NULL;
	p->n = 0;
	pthread_mutex_unlock(&p->mu);
	for (; c; c = next) {
		next = c->next;
		chunk_free(c);
	}
}

size_t kvm_pool_bytes(struct kvm_pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->mu);
	n = p->n;
	pthread_mutex_unlock(&p->mu);
	return n * p->chunk_size;
}

void kvm_pool_destroy(struct kvm_pool *p)
{
	if (!p)
		return;
	kvm_pool_trim(p);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* A chunk of total bytes, its header included; a standard one (the bump
 * allocator's) comes from the pool when it holds one. */
static int arena_chunk(struct kvm *m, size_t total)
{
	struct kvm_chunk *c = NULL;

	if (m->limit && kvm_bytes(m) + total > m->limit)
		return -ENOSPC;
	if (m->pool && total == m->pool->chunk_size)
		c = pool_get(m->pool);
	if (!c)
		c = chunk_mem(total);
	if (c)
		c->size = total - sizeof(*c);
	if (c && ((uintptr_t)c + total - 1) >> PTR_BITS) {
		/* cannot be tagged (rule 8): no Linux allocator does it */
		chunk_free(c);
		c = NULL;
	}
	if (!c)
		return -ENOMEM;
	c->next = m->chunks;
	m->chunks = c;
	atomic_store_explicit(
	    &m->bytes,
	    atomic_load_explicit(&m->bytes, memory_order_relaxed) + total,
	    memory_order_relaxed);
	return 0;
}

/* Bump allocation; a request over a quarter chunk gets a chunk of its own
 * so that big values do not waste the rest of the current one. */
static void *arena_alloc(struct kvm *m, size_t n, int *err)
{
	char *p;

	n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (n > m->chunk_size / 4) {
		*err = arena_chunk(m, sizeof(struct kvm_chunk) + n);
		return *err ? NULL : (char *)(m->chunks + 1);
	}
	if (n > m->left) {
		*err = arena_chunk(m, m->chunk_size);
		if (*err)
			return NULL;
		m->cur = (char *)(m->chunks + 1);
		m->left = m->chunks->size;
	}
	p = m->cur;
	m->cur += n;
	m->left -= n;
	return p;
}

/* ---- hash index ---- */

static uint64_t hash_key(const void *key, size_t klen)
{
	return XXH3_64bits_withSeed(key, klen, HASH_SEED);
}

static uint64_t slot_of(const struct kvm_node *x, uint64_t h)
{
	return (h >> PTR_BITS) << PTR_BITS | (uintptr_t)x;
}

/* The key's slot node, or NULL; *idx gets its slot, or the empty slot that
 * ends the probe. */
static struct kvm_node *hash_find(const struct kvm_hash *t, const void *key,
				  size_t klen, uint64_t h, uint64_t *idx)
{
	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		uint64_t v = atomic_load_explicit(
		    &((struct kvm_hash *)t)->slot[i], memory_order_acquire);
		struct kvm_node *x =
		    (struct kvm_node *)(uintptr_t)(v & PTR_MASK);

		if (!v || ((v ^ h) >> PTR_BITS == 0 &&
			   !key_cmp(node_key(x), x->klen, key, klen))) {
			*idx = i;
			return x;
		}
	}
}

/* A table of `slots` slots (a power of two) in the arena, filled from the
 * current one and published (rule 8).  The writer's own loads are relaxed:
 * it wrote every slot itself. */
static int hash_grow(struct kvm *m, uint64_t slots)
{
	struct kvm_hash *old =
	    atomic_load_explicit(&m->hash, memory_order_relaxed);
	struct kvm_hash *t;
	size_t bytes = sizeof(*t) + slots * sizeof(t->slot[0]);
	int err = 0;

	t = arena_alloc(m, bytes, &err);
	if (!t)
		return err;
	t->mask = slots - 1;
	/* A table over a quarter chunk gets a chunk of its own (arena_alloc),
	 * and one just mapped is zero already: no pass over it, its pages
	 * touched only as slots fill.  Any other (in the bump allocator's
	 * chunks, which may come from a kvm_pool, used) is cleared: at most
	 * a quarter chunk. */
	if (bytes <= m->chunk_size / 4 || m->chunks->mapped != CHUNK_ZERO)
		for (uint64_t i = 0; i < slots; i++)
			atomic_init(&t->slot[i], 0);
	for (uint64_t i = 0; old && i <= old->mask; i++) {
		uint64_t v =
		    atomic_load_explicit(&old->slot[i], memory_order_relaxed);
		struct kvm_node *x =
		    (struct kvm_node *)(uintptr_t)(v & PTR_MASK);
		uint64_t j;

		if (!v)
			continue;
		hash_find(t, node_key(x), x->klen,
			  hash_key(node_key(x), x->klen), &j);
		atomic_store_explicit(&t->slot[j], v, memory_order_relaxed);
	}
	atomic_store_explicit(&m->hash, t, memory_order_release);
	return 0;
}

/* ---- writer ---- */

/* The counters after a write of (kind, expire_at) over old, the key's
 * newest version in this memtable (NULL, or hidden by a flush: new key). */
static void next_stats(struct kvm_stats *st, const struct kvm_node *old,
		       const struct kvm_node *x, unsigned flags)
{
	if (x->nocount)
		return;
	if (old) {
		/* Not a new key: what is below was counted at its first
		 * write, and flags are ignored. */
		st->tombstones -= old->kind == KVM_TOMBSTONE;
		st->expiring -= old->kind == KVM_VALUE && old->expire_at;
	} else {
		st->keys++;
		/* Behind a flush nothing below is visible. */
		st->below += !st->flush_lsn && (flags & KVM_F_BELOW);
		st->unknown += !st->flush_lsn && (flags & KVM_F_UNKNOWN);
	}
	st->tombstones += x->kind == KVM_TOMBSTONE;
	st->expiring += x->kind == KVM_VALUE && x->expire_at;
}

/* Publish x, the newest version of its key (s: the one before it, or
 * NULL), in the order of rules 5-7. */
static void publish(struct kvm *m, struct kvm_node *x, struct kvm_node *s,
		    uint64_t h, uint64_t idx)
{
	struct kvm_hash *t =
	    atomic_load_explicit(&m->hash, memory_order_relaxed);

	if (s) {
		/* (a), then (c); x is in no run (rule 5) */
		atomic_store_explicit(&s->newer, x, memory_order_release);
		atomic_store_explicit(&t->slot[idx], slot_of(x, h),
				      memory_order_release);
	} else {
		/* (a'), then (b) */
		atomic_store_explicit(&t->slot[idx], slot_of(x, h),
				      memory_order_release);
		atomic_store_explicit(&m->last_created->created_next, x,
				      memory_order_release);
		m->last_created = x;
		atomic_store_explicit(&m->tail, x, memory_order_release);
		m->pend[m->npend++] = sent_of(x);
	}
	m->wtop = x; /* visible at the next kvm_publish (rule 9) */
}

static int insert(struct kvm *m, const void *key, size_t klen, const void *val,
		  size_t vlen, uint64_t expire_at, uint64_t lsn, int kind,
		  unsigned flags)
{
	struct kvm_node *s, *x;
	const struct kvm_stats *st = &m->wtop->st;
	struct kvm_hash *t =
	    atomic_load_explicit(&m->hash, memory_order_relaxed);
	uint64_t h, idx;
	int err = 0;

	if (!klen || klen > KVM_MAX_KEY || vlen > KVM_MAX_VALUE ||
	    lsn < m->last_lsn || lsn <= m->pub_lsn)
		return -EINVAL;
	h = hash_key(key, klen);
	s = hash_find(t, key, klen, h, &idx);
	if (!s && m->npend == RUN_MIN && (err = kvm_runs_add(m)))
		return err;
	if (!s && (m->hkeys + 1) * 2 > t->mask + 1) {
		err = hash_grow(m, (t->mask + 1) * 2);
		if (err)
			return err;
		t = atomic_load_explicit(&m->hash, memory_order_relaxed);
		hash_find(t, key, klen, h, &idx);
	}
	x = arena_alloc(m, sizeof(*x) + klen + vlen, &err);
	if (!x)
		return err;
	x->lsn = lsn;
	/* A version older than the flush is no version: a new key. */
	x->first_lsn = s && s->lsn >= st->flush_lsn ? s->first_lsn : lsn;
	x->expire_at = kind == KVM_VALUE ? expire_at : 0;
	x->vlen = (uint32_t)vlen;
	x->klen = (uint16_t)klen;
	x->kind = (uint8_t)kind;
	x->st = *st;
	x->nocount = (flags & KVM_F_NOCOUNT) != 0;
	x->unknown =
	    !s && (flags & KVM_F_UNKNOWN) && !st->flush_lsn && !x->nocount;
	x->vtype = kind == KVM_VALUE ? KVM_F_TYPE_OF(flags) : 0;
	atomic_init(&x->newer, NULL);
	atomic_init(&x->created_next, NULL);
	x->older = s;
	memcpy((uint8_t *)node_key(x), key, klen);
	if (vlen)
		memcpy((uint8_t *)node_val(x), val, vlen);
	/* A version older than the flush is no version: a new key. */
	next_stats(&x->st, s && s->lsn >= st->flush_lsn ? s : NULL, x, flags);
	if (!s)
		m->hkeys++;
	publish(m, x, s, h, idx);
	m->last_lsn = lsn;
	return 0;
}

int kvm_put(struct kvm *m, const void *key, size_t klen, const void *val,
	    size_t vlen, uint64_t expire_at, uint64_t lsn, unsigned flags)
{
	return insert(m, key, klen, val, vlen, expire_at, lsn, KVM_VALUE,
		      flags);
}

int kvm_del(struct kvm *m, const void *key, size_t klen, uint64_t lsn,
	    unsigned flags)
{
	return insert(m, key, klen, NULL, 0, 0, lsn, KVM_TOMBSTONE, flags);
}

/* A flush marker is a node in no run and no list: it only carries the new counters (all zero) and the flush LSN to readers. */
int kvm_flush(struct kvm *m, uint64_t lsn)
{
	struct kvm_node *x;
	int err = 0;

	/* Strictly above every version it hides: a version at the flush's
	 * LSN or later is visible, so it must have been written after it. */
	if (lsn <= m->last_lsn)
		return -EINVAL;
	x = arena_alloc(m, sizeof(*x), &err);
	if (!x)
		return err;
	memset(x, 0, sizeof(*x));
	x->lsn = lsn;
	x->kind = KIND_FLUSH;
	x->st.flush_lsn = lsn;
	m->wtop = x;
	m->last_lsn = lsn;
	return 0;
}

void kvm_publish(struct kvm *m)
{
	/* After every link of the batch (rule 9). */
	atomic_store_explicit(&m->top, m->wtop, memory_order_release);
	m->pub_lsn = m->wtop->lsn;
}

/* ---- readers ---- */

void kvm_prefetch(const struct kvm *m, const void *key, size_t klen)
{
	const struct kvm_hash *t = atomic_load_explicit(
	    &((struct kvm *)m)->hash, memory_order_acquire);

	__builtin_prefetch(&t->slot[hash_key(key, klen) & t->mask]);
}

void kvm_prefetch_node(const struct kvm *m, const void *key, size_t klen)
{
	const struct kvm_hash *t = atomic_load_explicit(
	    &((struct kvm *)m)->hash, memory_order_acquire);
	uint64_t v = atomic_load_explicit(
	    &((struct kvm_hash *)t)->slot[hash_key(key, klen) & t->mask],
	    memory_order_relaxed);
	const char *x = (const char *)(uintptr_t)(v & PTR_MASK);

	/* only a hint: the node is not read here, so no ordering is needed */
	if (x) {
		__builtin_prefetch(x);
		__builtin_prefetch(x + 64);
	}
}

void kvm_snapshot(const struct kvm *m, struct kvm_snap *s)
{
	const struct kvm_node *top = cur_top(m);

	s->lsn = top->lsn;
	s->flush_lsn = top->st.flush_lsn;
}

int kvm_get(const struct kvm *m, const void *key, size_t klen,
	    struct kvm_entry *e)
{
	struct kvm_snap s;

	kvm_snapshot(m, &s);
	return kvm_get_at(m, &s, key, klen, e);
}

int kvm_get_at(const struct kvm *m, const struct kvm_snap *s, const void *key,
	       size_t klen, struct kvm_entry *e)
{
	/* The bound was loaded first (s): the hash table and the slot loaded
	 * after it are at least as new as the view (rule 9). */
	uint64_t flush = s->flush_lsn, idx;
	const struct kvm_node *x;

	if (!klen || klen > KVM_MAX_KEY)
		return -EINVAL;
	x = hash_find(atomic_load_explicit(&((struct kvm *)m)->hash,
					   memory_order_acquire),
		      key, klen, hash_key(key, klen), &idx);
	if (x)
		x = visible_at(x, s->lsn);
	if (x && x->lsn >= flush) {
		fill_entry(x, e);
		return x->kind;
	}
	if (!flush)
		return KVM_ABSENT;
	/* Hidden by the flush, here and below. */
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->klen = (uint32_t)klen;
	e->lsn = flush;
	e->first_lsn = flush;
	e->kind = KVM_TOMBSTONE;
	return KVM_TOMBSTONE;
}

void kvm_count(const struct kvm *m, struct kvm_count *c)
{
	/* One node: its counters include every write up to its LSN. */
	const struct kvm_node *top = cur_top(m);
	const struct kvm_stats *st = &top->st;

	c->keys = st->keys;
	c->tombstones = st->tombstones;
	c->below = st->below;
	c->expiring = st->expiring;
	c->unknown = st->unknown;
	c->flush_lsn = st->flush_lsn;
	c->lsn = top->lsn;
}

/* Writes with KVM_F_UNKNOWN left "is there a value below?" open; the layers
 * below a memtable do not change while it exists (a checkpoint only moves
 * the frozen memtable into LMDB, and every write goes to the active one),
 * so each such key is asked once, in creation order, and the answer kept.
 * Without a flush every key created is on the creation list, and the
 * snapshot's keys count is the number of keys created up to it. */
int kvm_count_resolve(const struct kvm *cm, struct kvm_count *c,
		      int (*below)(void *arg, const uint8_t *key,
				   uint32_t klen),
		      void *arg)
{
	struct kvm *m = (struct kvm *)cm;
	const struct kvm_node *x;
	int rc = 0;

	pthread_mutex_lock(&m->res_mu);
	/* Under the lock, so that the cache is never past this snapshot. */
	kvm_count(m, c);
	if (!c->unknown || c->flush_lsn)
		goto out;
	x = m->res_pos ? m->res_pos : m->head;
	while (m->res_seen < c->keys) {
		const struct kvm_node *n = next_created(x);

		if (!n)
			break;	  /* cannot happen: the count saw it created */
		if (n->nocount) { /* not among c->keys */
			x = n;
			m->res_pos = x;
			continue;
		}
		if (n->unknown) {
			rc = below(arg, node_key(n), n->klen);
			if (rc < 0)
				goto out;
			m->res_below += rc > 0;
		}
		x = n;
		m->res_pos = x;
		m->res_seen++;
	}
	c->below += m->res_below;
	c->unknown = 0;
	rc = 0;
out:
	pthread_mutex_unlock(&m->res_mu);
	return rc;
}

size_t kvm_bytes(const struct kvm *m)
{
	return atomic_load_explicit(&m->bytes, memory_order_relaxed) +
	       atomic_load_explicit(&m->run_bytes, memory_order_relaxed);
}

uint64_t kvm_flush_lsn(const struct kvm *m)
{
	return cur_stats(m)->flush_lsn;
}

uint64_t kvm_last_lsn(const struct kvm *m)
{
	return m->last_lsn;
}

/* ---- life cycle ---- */

/* A new index's slots: the most, a power of two, that the bytes o
 * expects (no more than its limit) pay HASH_BYTES_PER_SLOT each for;
 * HASH_MIN at least. */
static uint64_t index_slots(const struct kvm_opts *o)
{
	size_t expect =
	    o->limit && o->expect_bytes > o->limit ? o->limit : o->expect_bytes;
	uint64_t slots = HASH_MIN;

	while (slots * 2 * HASH_BYTES_PER_SLOT <= expect)
		slots *= 2;
	return slots;
}

int kvm_create(const struct kvm_opts *opts, struct kvm **out)
{
	struct kvm_opts o = opts ? *opts : (struct kvm_opts){0};
	struct kvm *m;
	struct kvm_node *head;
	int err = 0;

	if (!o.chunk_size)
		o.chunk_size = KVM_DEFAULT_CHUNK;
	if (o.chunk_size < 4096 || (o.limit && o.limit < o.chunk_size) ||
	    (o.pool && o.pool->chunk_size != o.chunk_size))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->res_mu, NULL);
	pthread_mutex_init(&m->view_mu, NULL);
	m->chunk_size = o.chunk_size;
	m->limit = o.limit;
	m->pool = o.pool;
	atomic_init(&m->bytes, 0);
	atomic_init(&m->run_bytes, 0);
	head = arena_alloc(m, sizeof(*head), &err);
	if (!head)
		goto fail;
	memset(head, 0, sizeof(*head));
	atomic_init(&head->newer, NULL);
	atomic_init(&head->created_next, NULL);
	head->older = NULL;
	m->head = head;
	m->last_created = head;
	atomic_init(&m->tail, head);
	/* The head doubles as the first counters: all zero, no flush, and
	 * the first bound: LSN 0, nothing visible. */
	m->wtop = head;
	atomic_init(&m->top, head);
	atomic_init(&m->hash, NULL);
	err = hash_grow(m, index_slots(&o));
	if (err)
		goto fail;
	m->view = calloc(1, sizeof(*m->view));
	if (!m->view) {
		err = -ENOMEM;
		goto fail;
	}
	m->view->refs = 1;
	m->view->upto = head;
	*out = m;
	return 0;
fail:
	kvm_destroy(m);
	return err;
}

void kvm_destroy(struct kvm *m)
{
	struct kvm_chunk *c, *next;

	if (!m)
		return;
	kvm_views_free(m);
	for (c = m->chunks; c; c = next) {
		next = c->next;
		if (!m->pool || !pool_put(m->pool, c))
			chunk_free(c);
	}
	pthread_mutex_destroy(&m->view_mu);
	pthread_mutex_destroy(&m->res_mu);
	free(m);
}

const char *kvm_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case -EINVAL: return "invalid argument (key, value length or LSN)";
	case -ENOSPC: return "memtable full";
	case -ENOMEM: return "out of memory";
	default: return "unknown memtable error";
	}
}
