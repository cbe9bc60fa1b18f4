/* memtable.c - a single-writer, many-reader skiplist of key versions in an
 * arena (see memtable.h for the contract, docs/memtable.md for the design).
 *
 * Why readers need no lock (the memory-ordering argument, after LevelDB's
 * db/skiplist.h):
 *
 *  1. A node's contents (key, value, LSN, kind, expiry, counters) are
 *     written by the writer before the node is linked anywhere, and never
 *     again.  Only the next[] links change after that.
 *  2. The writer links a node with a release store into its predecessor's
 *     next[i] (after setting the node's own next[i] with a relaxed store:
 *     the release store that publishes the node orders it).  A reader loads
 *     every link with acquire.  So a reader that reaches a node through any
 *     link has happened-after everything the writer wrote into the node
 *     before publishing it: it sees the node whole.  The same holds for
 *     m->top (the node whose counters are current) and m->height.
 *  3. Nodes are only ever inserted, never unlinked or moved, and memory is
 *     freed only by kvm_destroy.  So any pointer a reader holds stays valid
 *     and still leads, through next[0], to every node after it; a reader
 *     that passes an insertion point before or after the link changed just
 *     misses or finds the new node, and the list stays sorted either way.
 *  4. m->height may be read stale.  A reader that sees the new height but
 *     an old head link at that level reads NULL there, which sorts after
 *     every key, and drops one level: the search stays correct.
 *  5. The skiplist holds one node per key: the key's first version in
 *     this memtable.  A later version is never linked into the skiplist
 *     (it has no links at all): it hangs off the `newer` chain below, so
 *     a write to a key already here costs a hash probe, not a skiplist
 *     search, and an iterator steps from key to key with no older
 *     versions in its way.
 *
 * Point reads do not walk the skiplist: a hash index (open addressing,
 * linear probing, at most half full) maps each key to its newest version,
 * and every version has a `newer` link to the one that replaced it.  The
 * writer publishes a version x of a key whose newest version is s in this
 * order, each a release store:
 *
 *	(a) s->newer = x      (x is complete)
 *	(c) the key's hash slot = x
 *
 * and a new key's x in this order: (a') the empty hash slot = x, (b) link
 * x into the skiplist.
 * Readers, by kvm_get or by an iterator, take a node (from the slot or
 * from the skiplist) and follow `newer` with acquire loads to its end.
 *
 *  6. Versions never go back, across kvm_get and iterators alike: a reader
 *     that saw x by any path happened after (a), so any later look at s
 *     reads s->newer == x (or a newer one: coherence) and goes on to x.
 *  7. A slot, once set for a key, always holds a version of that key:
 *     (c) replaces a version with a newer one of the same key, so a probe
 *     that matched the key once matches it again.  A new key is in the
 *     index (a') before the skiplist (b): kvm_get may find a brand-new key
 *     a moment before an iterator does, never after.
 *  8. The index grows by building a bigger table and publishing it with a
 *     release store of m->hash; the old table stays in the arena, still
 *     right for the versions it holds (rule 6 takes a reader on from them).
 *     A slot holds a node pointer with a 16-bit tag of the key's hash in
 *     its top bits (user pointers fit in 48 bits here), so a probe that
 *     does not match costs no load of the node.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>

#include "memtable.h"

#define MAX_HEIGHT 12 /* 4^12 = 16M nodes before search degrades */
#define BRANCHING 4   /* one node in 4 climbs a level */
#define KIND_FLUSH 3  /* a flush marker: never linked, only m->top */
#define ALIGN 8u
#define HASH_MIN 64u			/* slots in a new memtable's index */
#define HASH_SEED 0x6b766d656d746162ull /* not the router's (unseeded) hash */
#define PTR_BITS 48
#define PTR_MASK ((UINT64_C(1) << PTR_BITS) - 1)

/* Counters after the write that allocated the node: one consistent moment,
 * published with the node through m->top. */
struct kvm_stats {
	uint32_t keys;
	uint32_t tombstones;
	uint32_t below;
	uint32_t expiring;
	uint32_t unknown; /* keys first written with KVM_F_UNKNOWN */
	uint64_t flush_lsn;
};

/* Laid out in the arena as: this header, height links, key, value.  The
 * fields a search reads (klen, lsn, the links, then the key) are last, next
 * to each other: a skiplist step touches one or two cache lines, not three.
 * Only a key's first version in the memtable is linked into the skiplist
 * (height >= 1); a later version has height 0 and is reached through the
 * `newer` chain (rule 5). */
struct kvm_node {
	struct kvm_stats st;
	uint64_t expire_at;
	_Atomic(struct kvm_node *) newer; /* the version that replaced this */
	/* The key created after this one (first versions only): the order
	 * kvm_count_resolve walks in. */
	_Atomic(struct kvm_node *) created_next;
	uint8_t unknown; /* first version written with KVM_F_UNKNOWN */
	uint8_t kind;
	uint16_t klen;
	uint32_t vlen;
	uint8_t height;
	uint64_t lsn;
	_Atomic(struct kvm_node *) next[];
};

struct kvm_chunk {
	struct kvm_chunk *next;
	size_t size;
	size_t mapped; /* 1: mmap'ed (chunk_free unmaps it), 0: malloc'ed */
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
	atomic_size_t bytes;

	uint64_t rng;	   /* writer only */
	uint64_t last_lsn; /* writer only */
	_Atomic int height;
	_Atomic(struct kvm_node *) top; /* current counters and flush LSN */
	_Atomic(struct kvm_hash *) hash;
	uint64_t hkeys;	       /* slots in use (writer only) */
	struct kvm_node *head; /* MAX_HEIGHT links, no key */
	/* Creation order: head->created_next is the first key created; the
	 * writer appends at last_created. */
	struct kvm_node *last_created;
	/* kvm_count_resolve's cache (under res_mu, readers only): how many
	 * keys, in creation order up to res_pos, hold a value below among
	 * those written with KVM_F_UNKNOWN. */
	pthread_mutex_t res_mu;
	const struct kvm_node *res_pos;
	uint64_t res_seen;
	uint64_t res_below;
};

/* ---- arena ---- */

/* Chunks of a multiple of 2 MiB are aligned to it and offered to the
 * kernel as huge pages: a skiplist search in a memtable of hundreds of
 * megabytes misses the TLB at nearly every step with 4 KiB pages.  They
 * are mapped and unmapped directly: from malloc, a freed memtable stayed
 * in the process's heaps (glibc raises its mmap threshold after the first
 * free), and kvd's anonymous memory grew to several times its memtables. */
#define HUGE_PAGE (2u << 20)

static struct kvm_chunk *chunk_mem(size_t total)
{
	struct kvm_chunk *c;
	char *p, *a;

	if (total % HUGE_PAGE) {
		c = malloc(total);
		if (c)
			c->mapped = 0;
		return c;
	}
	p = mmap(NULL, total + HUGE_PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) &
		     ~(uintptr_t)(HUGE_PAGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + total < p + total + HUGE_PAGE)
		munmap(a + total, (size_t)(p + HUGE_PAGE - a));
	madvise(a, total, MADV_HUGEPAGE); /* advice: failure is harmless */
	c = (struct kvm_chunk *)a;
	c->mapped = 1;
	return c;
}

static void chunk_free(struct kvm_chunk *c)
{
	if (c->mapped)
		munmap(c, sizeof(*c) + c->size);
	else
		free(c);
}

/* A chunk of total bytes, its header included. */
static int arena_chunk(struct kvm *m, size_t total)
{
	struct kvm_chunk *c;

	if (m->limit &&
	    atomic_load_explicit(&m->bytes, memory_order_relaxed) + total >
		m->limit)
		return -ENOSPC;
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

/* ---- nodes and search ---- */

static const uint8_t *node_key(const struct kvm_node *x)
{
	return (const uint8_t *)&x->next[x->height];
}

static const uint8_t *node_val(const struct kvm_node *x)
{
	return node_key(x) + x->klen;
}

static struct kvm_node *next_of(const struct kvm_node *x, int i)
{
	/* Acquire: see rule 2 at the top of the file. */
	return atomic_load_explicit(&((struct kvm_node *)x)->next[i],
				    memory_order_acquire);
}

/* LMDB's default order: bytes, then the shorter key first.  Eight bytes
 * at a time as big-endian words, inline: a skiplist search compares a key
 * at every step, and a call to memcmp cost more than the comparison. */
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

/* Is x before (key, lsn) in (key asc, LSN desc) order?  A node with the
 * same key and LSN is not, so a new version goes in front of it. */
static bool node_before(const struct kvm_node *x, const uint8_t *key,
			size_t klen, uint64_t lsn)
{
	int c;

	if (!x)
		return false; /* NULL ends a level: after every key */
	c = key_cmp(node_key(x), x->klen, key, klen);
	return c < 0 || (c == 0 && x->lsn > lsn);
}

/* The first node at or after (key, lsn); prev[] (if set) gets the last
 * node before it on every level. */
static struct kvm_node *find_ge(const struct kvm *m, const uint8_t *key,
				size_t klen, uint64_t lsn,
				struct kvm_node **prev)
{
	struct kvm_node *x = m->head;
	int level = atomic_load_explicit(&m->height, memory_order_acquire) - 1;

	for (;;) {
		struct kvm_node *nx = next_of(x, level), *ahead;

		/* Each step is a cache miss on a big memtable: while nx is
		 * compared, fetch where the search goes if it drops a level
		 * (two misses in flight instead of one). */
		if (level && (ahead = next_of(x, level - 1)))
			__builtin_prefetch((char *)ahead +
					   offsetof(struct kvm_node, klen));
		if (node_before(nx, key, klen, lsn)) {
			x = nx;
			continue;
		}
		if (prev)
			prev[level] = x;
		if (level == 0)
			return nx;
		level--;
	}
}

static int random_height(struct kvm *m)
{
	int h = 1;

	for (;;) {
		/* xorshift64 */
		m->rng ^= m->rng << 13;
		m->rng ^= m->rng >> 7;
		m->rng ^= m->rng << 17;
		if (h >= MAX_HEIGHT || m->rng % BRANCHING)
			return h;
		h++;
	}
}

static const struct kvm_stats *cur_stats(const struct kvm *m)
{
	return &atomic_load_explicit(&((struct kvm *)m)->top,
				     memory_order_acquire)
		    ->st;
}

static const struct kvm_node *next_created(const struct kvm_node *x)
{
	return atomic_load_explicit(&((struct kvm_node *)x)->created_next,
				    memory_order_acquire);
}

/* Follow `newer` to the newest version (rules 6 and 7). */
static const struct kvm_node *newest(const struct kvm_node *x)
{
	const struct kvm_node *n;

	while ((n = atomic_load_explicit(&((struct kvm_node *)x)->newer,
					 memory_order_acquire)))
		x = n;
	return x;
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
	int err = 0;

	t = arena_alloc(m, sizeof(*t) + slots * sizeof(t->slot[0]), &err);
	if (!t)
		return err;
	t->mask = slots - 1;
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

/* Link x at its place; rule 2: x is complete before the release stores. */
static void link_node(struct kvm *m, struct kvm_node *x, struct kvm_node **prev)
{
	int h = atomic_load_explicit(&m->height, memory_order_relaxed);

	if (x->height > h) {
		for (int i = h; i < x->height; i++)
			prev[i] = m->head;
		/* Rule 4: a stale or early height is harmless. */
		atomic_store_explicit(&m->height, x->height,
				      memory_order_release);
	}
	for (int i = 0; i < x->height; i++) {
		atomic_store_explicit(
		    &x->next[i],
		    atomic_load_explicit(&prev[i]->next[i],
					 memory_order_relaxed),
		    memory_order_relaxed);
		atomic_store_explicit(&prev[i]->next[i], x,
				      memory_order_release);
	}
}

/* Publish x, the newest version of its key (s: the one before it, or
 * NULL), in the order of rules 5-7. */
static void publish(struct kvm *m, struct kvm_node *x, struct kvm_node *s,
		    uint64_t h, uint64_t idx, struct kvm_node **prev)
{
	struct kvm_hash *t =
	    atomic_load_explicit(&m->hash, memory_order_relaxed);

	if (s) {
		/* (a), then (c); x is not linked (rule 5) */
		atomic_store_explicit(&s->newer, x, memory_order_release);
		atomic_store_explicit(&t->slot[idx], slot_of(x, h),
				      memory_order_release);
	} else {
		/* (a'), then (b) */
		atomic_store_explicit(&t->slot[idx], slot_of(x, h),
				      memory_order_release);
		link_node(m, x, prev);
		/* Creation order, for kvm_count_resolve (x is complete). */
		atomic_store_explicit(&m->last_created->created_next, x,
				      memory_order_release);
		m->last_created = x;
	}
	atomic_store_explicit(&m->top, x, memory_order_release);
}

static int insert(struct kvm *m, const void *key, size_t klen, const void *val,
		  size_t vlen, uint64_t expire_at, uint64_t lsn, int kind,
		  unsigned flags)
{
	struct kvm_node *prev[MAX_HEIGHT], *s, *x;
	const struct kvm_stats *st = cur_stats(m);
	struct kvm_hash *t =
	    atomic_load_explicit(&m->hash, memory_order_relaxed);
	uint64_t h, idx;
	int height, err = 0;

	if (!klen || klen > KVM_MAX_KEY || vlen > KVM_MAX_VALUE ||
	    lsn < m->last_lsn)
		return -EINVAL;
	h = hash_key(key, klen);
	s = hash_find(t, key, klen, h, &idx);
	if (!s && (m->hkeys + 1) * 2 > t->mask + 1) {
		err = hash_grow(m, (t->mask + 1) * 2);
		if (err)
			return err;
		t = atomic_load_explicit(&m->hash, memory_order_relaxed);
		hash_find(t, key, klen, h, &idx);
	}
	/* Rule 5: only a key's first version is linked. */
	height = s ? 0 : random_height(m);
	x = arena_alloc(
	    m, sizeof(*x) + height * sizeof(x->next[0]) + klen + vlen, &err);
	if (!x)
		return err;
	x->lsn = lsn;
	x->expire_at = kind == KVM_VALUE ? expire_at : 0;
	x->vlen = (uint32_t)vlen;
	x->klen = (uint16_t)klen;
	x->kind = (uint8_t)kind;
	x->height = (uint8_t)height;
	x->st = *st;
	x->unknown = !s && (flags & KVM_F_UNKNOWN) && !st->flush_lsn;
	atomic_init(&x->newer, NULL);
	atomic_init(&x->created_next, NULL);
	memcpy((uint8_t *)node_key(x), key, klen);
	if (vlen)
		memcpy((uint8_t *)node_val(x), val, vlen);
	/* A version older than the flush is no version: a new key. */
	next_stats(&x->st, s && s->lsn >= st->flush_lsn ? s : NULL, x, flags);
	if (!s) {
		find_ge(m, key, klen, lsn, prev);
		m->hkeys++;
	}
	publish(m, x, s, h, idx, prev);
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

/* A flush marker is a node of height 0 that is never linked: it only
 * carries the new counters (all zero) and the flush LSN to readers. */
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
	atomic_store_explicit(&m->top, x, memory_order_release);
	m->last_lsn = lsn;
	return 0;
}

/* ---- readers ---- */

static void fill_entry(const struct kvm_node *x, struct kvm_entry *e)
{
	e->key = node_key(x);
	e->klen = x->klen;
	e->kind = x->kind;
	e->val = x->kind == KVM_VALUE ? node_val(x) : NULL;
	e->vlen = x->vlen;
	e->expire_at = x->expire_at;
	e->lsn = x->lsn;
}

int kvm_get(const struct kvm *m, const void *key, size_t klen,
	    struct kvm_entry *e)
{
	/* The flush LSN first: a version found after it is at least as new
	 * as the view it belongs to (rule 6). */
	uint64_t flush = cur_stats(m)->flush_lsn, idx;
	const struct kvm_node *x;

	if (!klen || klen > KVM_MAX_KEY)
		return -EINVAL;
	x = hash_find(atomic_load_explicit(&((struct kvm *)m)->hash,
					   memory_order_acquire),
		      key, klen, hash_key(key, klen), &idx);
	if (x)
		x = newest(x);
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
	e->kind = KVM_TOMBSTONE;
	return KVM_TOMBSTONE;
}

void kvm_count(const struct kvm *m, struct kvm_count *c)
{
	const struct kvm_stats *st = cur_stats(m);

	c->keys = st->keys;
	c->tombstones = st->tombstones;
	c->below = st->below;
	c->expiring = st->expiring;
	c->unknown = st->unknown;
	c->flush_lsn = st->flush_lsn;
}

/* Writes with KVM_F_UNKNOWN left "is there a value below?" open; the layers
 * below a memtable do not change while it exists (a checkpoint only moves
 * the frozen memtable into LMDB, and every write goes to the active one),
 * so each such key is asked once, in creation order, and the answer kept.
 * Without a flush every key created is a skiplist node, and the snapshot's
 * keys count is the number of nodes created up to it. */
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
			break; /* cannot happen: the count saw it created */
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
	return atomic_load_explicit(&m->bytes, memory_order_relaxed);
}

uint64_t kvm_flush_lsn(const struct kvm *m)
{
	return cur_stats(m)->flush_lsn;
}

uint64_t kvm_last_lsn(const struct kvm *m)
{
	return m->last_lsn;
}

/* ---- iterator ---- */

/* Skip keys whose newest version the flush hides. */
static void skip_hidden(struct kvm_iter *it)
{
	const struct kvm_node *x = it->node;

	/* One node per key (rule 5): the next node is the next key. */
	while (x && newest(x)->lsn < it->flush_lsn)
		x = next_of(x, 0);
	it->node = x;
}

void kvm_iter_init(struct kvm_iter *it, const struct kvm *m)
{
	it->m = m;
	it->node = NULL;
	it->flush_lsn = 0;
}

int kvm_iter_seek(struct kvm_iter *it, const void *key, size_t klen)
{
	it->flush_lsn = cur_stats(it->m)->flush_lsn;
	if (klen)
		it->node = find_ge(it->m, key, klen, UINT64_MAX, NULL);
	else
		it->node = next_of(it->m->head, 0);
	skip_hidden(it);
	return it->node != NULL;
}

int kvm_iter_valid(const struct kvm_iter *it)
{
	return it->node != NULL;
}

int kvm_iter_next(struct kvm_iter *it)
{
	/* One node per key (rule 5): the next node is the next key; newer
	 * versions of this one are on its `newer` chain, not in the list. */
	it->node = next_of(it->node, 0);
	skip_hidden(it);
	return it->node != NULL;
}

const uint8_t *kvm_iter_key(const struct kvm_iter *it, uint32_t *klen)
{
	*klen = it->node->klen;
	return node_key(it->node); /* every version holds the same key */
}

void kvm_iter_entry(const struct kvm_iter *it, struct kvm_entry *e)
{
	fill_entry(newest(it->node), e);
}

int kvm_iter_base_hidden(const struct kvm_iter *it)
{
	return it->flush_lsn != 0;
}

/* ---- life cycle ---- */

int kvm_create(const struct kvm_opts *opts, struct kvm **out)
{
	struct kvm_opts o = opts ? *opts : (struct kvm_opts){0};
	struct kvm *m;
	struct kvm_node *head;
	int err = 0;

	if (!o.chunk_size)
		o.chunk_size = KVM_DEFAULT_CHUNK;
	if (o.chunk_size < 4096 || (o.limit && o.limit < o.chunk_size))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->res_mu, NULL);
	m->chunk_size = o.chunk_size;
	m->limit = o.limit;
	m->rng = o.seed ? o.seed : 0x9e3779b97f4a7c15ull;
	atomic_init(&m->bytes, 0);
	atomic_init(&m->height, 1);
	head = arena_alloc(
	    m, sizeof(*head) + MAX_HEIGHT * sizeof(head->next[0]), &err);
	if (!head)
		goto fail;
	memset(head, 0, sizeof(*head));
	atomic_init(&head->newer, NULL);
	head->height = MAX_HEIGHT;
	for (int i = 0; i < MAX_HEIGHT; i++)
		atomic_init(&head->next[i], NULL);
	atomic_init(&head->created_next, NULL);
	m->head = head;
	m->last_created = head;
	/* The head doubles as the first counters: all zero, no flush. */
	atomic_init(&m->top, head);
	atomic_init(&m->hash, NULL);
	err = hash_grow(m, HASH_MIN);
	if (err)
		goto fail;
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
	for (c = m->chunks; c; c = next) {
		next = c->next;
		chunk_free(c);
	}
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
