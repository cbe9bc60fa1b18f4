/* test_memtable.c - the memtable (kvd/store/memtable.h) against a model,
 * and one writer against three lock-free readers (run it under TSan:
 * -DKVD_SANITIZE=thread).
 *
 * 1. Model: random puts, deletes (with equal LSNs now and then) and
 *    flushes on a few hundred keys, every answer of kvm_get, kvm_count and
 *    the iterator (from the start and from random keys) compared with a
 *    plain array.  The seed is printed; KVM_TEST_SEED=n replays one.
 *    Writes say a key holds a value below (KVM_F_BELOW), does not, or
 *    leave it open (KVM_F_UNKNOWN): kvm_count_resolve must then count the
 *    answers of its callback into below, asking about each such key at
 *    most once in the memtable's life.
 * 2. Limits: bad keys and LSNs refused, the arena limit answered -ENOSPC
 *    with nothing half-written, kvm_bytes within the limit.
 * 3. Concurrency: one writer writes new versions of 64 keys (values that
 *    carry their LSN, key and a checksum), deletes and flushes, while three
 *    readers get and iterate without locks.  They assert that a version
 *    never goes back, no value is torn, iteration is sorted, and a write
 *    the writer announced (release/acquire) is visible.
 * 4. A moment: after kvm_count, later writes (a delete, a new key, a new
 *    version, a flush) do not change what kvm_iter_entry_at and first_lsn
 *    say about that moment (COUNT's expired keys rely on it).
 * 5. A sized index (kvm_opts.expect_bytes, as kvd's memtable-size): the
 *    model again on one, the arena charged for it at once but its pages
 *    not touched until slots fill (RSS), and growth past it when the keys
 *    outnumber the hint.
 * 6. A chunk pool (kvm_pool): a destroyed memtable's chunks, full of its
 *    keys, go to the pool up to its bound; the next memtable takes them
 *    and answers exactly (its hash index grows by doubling into reused
 *    chunks, which are not zero), and nothing of the first one shows; a
 *    trimmed pool holds nothing; bad pool sizes are refused.
 * 7. Value types (KVM_F_TYPE): kept with each version and given back by
 *    kvm_get, the iterator and kvm_iter_entry_at; a later version of
 *    another type replaces it; a tombstone has none.
 * (test_memtable_batches.c: batches seen whole under concurrent readers.)
 *
 * The model (1) publishes after most writes and leaves batches of several
 * open now and then: every answer must be what was published, and a view
 * kept across later batches must still answer as it did.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtable.h"

static unsigned fails;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			if (++fails > 20)                                      \
				exit(1);                                       \
		}                                                              \
	} while (0)

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

/* ---- 1. model ---- */

#define MKEYS 300
#define MVAL 64

/* A key's state in the model: as written (w), and as published (v). */
struct mval {
	int state; /* KVM_ABSENT, KVM_VALUE, KVM_TOMBSTONE */
	uint8_t val[MVAL];
	size_t vlen;
	uint64_t exp, lsn;
	int below;
	int unknown; /* first written with KVM_F_UNKNOWN */
};

struct mkey {
	uint8_t key[KVM_MAX_KEY];
	size_t klen;
	struct mval w, v;
	int lower; /* what the layers below say (the callback's answer) */
	int asked; /* times kvm_count_resolve asked about it */
};

/* The flush in force: as written, as published. */
struct mflush {
	int base_hidden;
	uint64_t lsn;
};

static struct mkey mk[MKEYS];
static unsigned nmk;
static struct mflush wflush, vflush;
/* A view kept across later batches, and the model's keys as it saw them. */
static struct kvm_snap old_snap;
static struct mval old_v[MKEYS];
static struct mflush old_flush;
static int have_old;

static int mkey_order(const void *a, const void *b)
{
	const struct mkey *x = a, *y = b;

	return key_cmp(x->key, x->klen, y->key, y->klen);
}

/* Short keys over a small alphabet (shared prefixes, a key that is a prefix
 * of another), bytes 0x00 and 0xff, and one key of the maximum length. */
static void model_keys(void)
{
	static const uint8_t alpha[] = {'a', 'b', 'c', 0x00, 0xff};

	nmk = 0;
	memset(mk, 0, sizeof(mk)); /* a second run starts from nothing too */
	memset(mk[0].key, 'z', KVM_MAX_KEY);
	mk[0].klen = KVM_MAX_KEY;
	nmk = 1;
	while (nmk < MKEYS) {
		struct mkey *k = &mk[nmk];
		int dup = 0;

		size_t pre = 0;

		/* A quarter share a prefix of 15 to 17 bytes: sorted runs
		 * compare 16 bytes in place, the rest through the node. */
		if (rnd() % 4 == 0)
			pre = 15 + rnd() % 3;
		memset(k->key, 'b', pre);
		k->klen = pre + 1 + rnd() % 6;
		for (size_t i = pre; i < k->klen; i++)
			k->key[i] = alpha[rnd() % sizeof(alpha)];
		for (unsigned j = 0; j < nmk && !dup; j++)
			dup = !key_cmp(mk[j].key, mk[j].klen, k->key, k->klen);
		nmk += !dup;
	}
	/* Sorted, so that the model's order is the index order. */
	qsort(mk, nmk, sizeof(mk[0]), mkey_order);
	for (unsigned i = 0; i < nmk; i++) {
		mk[i].lower = rnd() % 2;
		mk[i].asked = 0;
	}
}

/* Key i's answer, by kvm_get, or by kvm_get_at on view sn when given,
 * against what the model published (v) at that view (fl). */
static void check_get_in(struct kvm *m, unsigned i, const struct kvm_snap *sn,
			 const struct mval *v, const struct mflush *fl)
{
	struct kvm_entry e;
	int r = sn ? kvm_get_at(m, sn, mk[i].key, mk[i].klen, &e)
		   : kvm_get(m, mk[i].key, mk[i].klen, &e);
	int want = v->state;

	if (want == KVM_ABSENT && fl->base_hidden)
		want = KVM_TOMBSTONE;
	CHECK(r == want, "get key %u%s: %d, want %d", i,
	      sn ? " (old view)" : "", r, want);
	if (r != want || r == KVM_ABSENT)
		return;
	CHECK(e.lsn == (v->state ? v->lsn : fl->lsn), "get key %u lsn", i);
	if (r == KVM_VALUE) {
		CHECK(e.vlen == v->vlen && !memcmp(e.val, v->val, e.vlen),
		      "get key %u value", i);
		CHECK(e.expire_at == v->exp, "get key %u expiry", i);
		CHECK(e.klen == mk[i].klen && !memcmp(e.key, mk[i].key, e.klen),
		      "get key %u key", i);
	}
}

static void check_get(struct kvm *m, unsigned i)
{
	check_get_in(m, i, NULL, &mk[i].v, &vflush);
}

/* Make the model's writes visible, as kvm_publish does the memtable's. */
static void model_publish(struct kvm *m)
{
	kvm_publish(m);
	for (unsigned i = 0; i < nmk; i++)
		mk[i].v = mk[i].w;
	vflush = wflush;
}

/* Keep the view readers have now, to ask it again after later batches:
 * a view holds while the memtable lives. */
static void keep_view(struct kvm *m)
{
	kvm_snapshot(m, &old_snap);
	for (unsigned i = 0; i < nmk; i++)
		old_v[i] = mk[i].v;
	old_flush = vflush;
	have_old = 1;
}

static int model_below(void *arg, const uint8_t *key, uint32_t klen)
{
	(void)arg;
	for (unsigned i = 0; i < nmk; i++) {
		if (key_cmp(key, klen, mk[i].key, mk[i].klen))
			continue;
		mk[i].asked++;
		CHECK(mk[i].asked == 1, "key %u asked %d times", i,
		      mk[i].asked);
		return mk[i].lower;
	}
	CHECK(0, "asked about a key the model never wrote");
	return -1;
}

/* kvm_count_resolve: the known below plus the unknown keys' answers. */
static void check_resolve(struct kvm *m, const struct kvm_count *w)
{
	struct kvm_count c;
	uint64_t want = w->below;

	for (unsigned i = 0; i < nmk; i++)
		want += mk[i].v.state && mk[i].v.unknown && mk[i].lower;
	CHECK(!kvm_count_resolve(m, &c, model_below, NULL), "resolve");
	CHECK(c.below == want && c.unknown == 0 && c.keys == w->keys,
	      "resolve: below %llu unknown %llu, want %llu 0",
	      (unsigned long long)c.below, (unsigned long long)c.unknown,
	      (unsigned long long)want);
}

static void check_count(struct kvm *m)
{
	struct kvm_count c, w = {0};

	for (unsigned i = 0; i < nmk; i++) {
		const struct mval *v = &mk[i].v;

		if (!v->state)
			continue;
		w.keys++;
		w.tombstones += v->state == KVM_TOMBSTONE;
		w.below += v->below;
		w.expiring += v->state == KVM_VALUE && v->exp;
		w.unknown += v->unknown;
	}
	kvm_count(m, &c);
	CHECK(c.unknown == w.unknown, "count: %llu unknown, want %llu",
	      (unsigned long long)c.unknown, (unsigned long long)w.unknown);
	check_resolve(m, &w);
	CHECK(c.keys == w.keys && c.tombstones == w.tombstones &&
		  c.below == w.below && c.expiring == w.expiring &&
		  c.flush_lsn == vflush.lsn,
	      "count %llu/%llu/%llu/%llu, want %llu/%llu/%llu/%llu",
	      (unsigned long long)c.keys, (unsigned long long)c.tombstones,
	      (unsigned long long)c.below, (unsigned long long)c.expiring,
	      (unsigned long long)w.keys, (unsigned long long)w.tombstones,
	      (unsigned long long)w.below, (unsigned long long)w.expiring);
}

/* Iterate from key index `from` (nmk: from the start) and compare. */
static void check_iter(struct kvm *m, unsigned from)
{
	struct kvm_iter it;
	unsigned i = from == nmk ? 0 : from;
	int ok;

	kvm_iter_init(&it, m);
	if (from == nmk)
		ok = kvm_iter_seek(&it, NULL, 0);
	else
		ok = kvm_iter_seek(&it, mk[from].key, mk[from].klen);
	CHECK(kvm_iter_base_hidden(&it) == vflush.base_hidden, "base hidden");
	for (; ok; ok = kvm_iter_next(&it), i++) {
		struct kvm_entry e;
		uint32_t klen;
		const uint8_t *k = kvm_iter_key(&it, &klen);

		while (i < nmk && !mk[i].v.state)
			i++;
		CHECK(i < nmk, "iter: a key past the model's last");
		if (i >= nmk)
			break;
		kvm_iter_entry(&it, &e);
		CHECK(!key_cmp(k, klen, mk[i].key, mk[i].klen),
		      "iter: key %u out of place", i);
		CHECK(e.kind == mk[i].v.state && e.lsn == mk[i].v.lsn,
		      "iter: key %u kind %d lsn %llu", i, e.kind,
		      (unsigned long long)e.lsn);
		CHECK(e.kind != KVM_VALUE ||
			  (e.vlen == mk[i].v.vlen &&
			   !memcmp(e.val, mk[i].v.val, e.vlen)),
		      "iter: key %u value", i);
	}
	while (i < nmk && !mk[i].v.state)
		i++;
	CHECK(i == nmk, "iter: ended at model key %u of %u", i, nmk);
	kvm_iter_fini(&it);
}

/* One write, published with it or left for a later batch (then readers
 * must not see it yet).  *pub is the LSN last published: a write after a
 * publish takes a higher one, within a batch equal LSNs come now and then
 * (the later write wins). */
static void model_step(struct kvm *m, uint64_t *lsn, uint64_t *pub)
{
	unsigned r = rnd() % 1000, i = rnd() % nmk;
	unsigned pick = rnd() % 3;
	unsigned flags = pick == 1   ? KVM_F_BELOW
			 : pick == 2 ? KVM_F_UNKNOWN
				     : 0;
	struct mval *k = &mk[i].w;

	*lsn += rnd() % 4 != 0 || *lsn == *pub;
	if (r < 600) {
		k->vlen = rnd() % MVAL;
		for (size_t j = 0; j < k->vlen; j++)
			k->val[j] = (uint8_t)rnd();
		k->exp = rnd() % 3 ? 0 : 1700000000000ull + rnd() % 1000;
		CHECK(!kvm_put(m, mk[i].key, mk[i].klen, k->val, k->vlen,
			       k->exp, *lsn, flags),
		      "put");
	} else if (r < 990) {
		CHECK(!kvm_del(m, mk[i].key, mk[i].klen, *lsn, flags), "del");
		k->exp = 0;
	} else {
		CHECK(!kvm_flush(m, ++*lsn), "flush");
		for (unsigned j = 0; j < nmk; j++)
			mk[j].w.state = KVM_ABSENT;
		wflush.base_hidden = 1;
		wflush.lsn = *lsn;
		goto out;
	}
	if (!k->state) {
		k->below = wflush.base_hidden ? 0 : !!(flags & KVM_F_BELOW);
		k->unknown = wflush.base_hidden ? 0 : !!(flags & KVM_F_UNKNOWN);
	}
	k->state = r < 600 ? KVM_VALUE : KVM_TOMBSTONE;
	k->lsn = *lsn;
out:
	/* Batches of one write mostly, of up to a dozen now and then. */
	if (rnd() % 3) {
		model_publish(m);
		*pub = *lsn;
	}
}

static void test_model(uint64_t seed, size_t expect)
{
	struct kvm_opts o = {.chunk_size = 8192, .expect_bytes = expect};
	struct kvm *m;
	uint64_t lsn = 0, pub = 0;

	rng_state = seed;
	model_keys();
	memset(&wflush, 0, sizeof(wflush));
	vflush = wflush;
	have_old = 0;
	CHECK(!kvm_create(&o, &m), "create");
	check_iter(m, nmk);
	for (unsigned step = 0; step < 10000; step++) {
		model_step(m, &lsn, &pub);
		check_get(m, rnd() % nmk);
		check_count(m);
		if (step % 500 == 250)
			keep_view(m);
		if (step % 1000 == 999) {
			for (unsigned i = 0; i < nmk; i++) {
				check_get(m, i);
				check_get_in(m, i, &old_snap, &old_v[i],
					     &old_flush);
			}
			check_iter(m, nmk);
			for (int j = 0; j < 20; j++)
				check_iter(m, rnd() % nmk);
		}
	}
	CHECK(have_old, "an old view was checked");
	CHECK(kvm_last_lsn(m) == lsn, "last lsn");
	model_publish(m);
	for (unsigned i = 0; i < nmk; i++)
		check_get(m, i);
	check_iter(m, nmk);
	kvm_destroy(m);
}

/* ---- 2. limits ---- */

static void test_limits(void)
{
	struct kvm_opts o = {.chunk_size = 4096, .limit = 65536};
	struct kvm_entry e;
	struct kvm_count c1, c2;
	struct kvm_iter it;
	uint8_t big[600], val[100];
	struct kvm *m;
	uint64_t lsn = 10;
	unsigned n = 0;
	int r;

	memset(big, 'k', sizeof(big));
	memset(val, 'v', sizeof(val));
	o.limit = 100;
	CHECK(kvm_create(&o, &m) == -EINVAL, "limit under a chunk");
	o.limit = 65536;
	CHECK(!kvm_create(&o, &m), "create");
	CHECK(kvm_put(m, big, 0, val, 1, 0, lsn, 0) == -EINVAL, "empty key");
	CHECK(kvm_put(m, big, KVM_MAX_KEY + 1, val, 1, 0, lsn, 0) == -EINVAL,
	      "key too long");
	CHECK(kvm_get(m, big, 0, &e) == -EINVAL, "get empty key");
	CHECK(!kvm_put(m, big, KVM_MAX_KEY, val, 1, 0, lsn, 0), "longest key");
	CHECK(kvm_put(m, "a", 1, val, 1, 0, lsn - 1, 0) == -EINVAL,
	      "lsn going back");
	CHECK(kvm_flush(m, lsn) == -EINVAL, "flush at the last lsn");
	CHECK(kvm_get(m, big, KVM_MAX_KEY, &e) == KVM_ABSENT,
	      "a write not published yet");
	CHECK(!kvm_put(m, "a", 1, val, 1, 0, lsn, 0),
	      "the same lsn, unpublished");
	kvm_publish(m);
	CHECK(kvm_get(m, big, KVM_MAX_KEY, &e) == KVM_VALUE &&
		  kvm_get(m, "a", 1, &e) == KVM_VALUE,
	      "published");
	CHECK(kvm_put(m, "b", 1, val, 1, 0, lsn, 0) == -EINVAL,
	      "an lsn not above the published one");
	/* A seek past the longest key: nothing at or after it. */
	kvm_iter_init(&it, m);
	CHECK(!kvm_iter_seek(&it, big, sizeof(big)), "seek past every key");
	CHECK(kvm_iter_seek(&it, big, KVM_MAX_KEY), "seek at the key");
	kvm_iter_fini(&it);
	/* A value over a quarter chunk takes a chunk of its own. */
	CHECK(!kvm_put(m, "big", 3, big, sizeof(big) - 8, 0, ++lsn, 0), "big");
	kvm_publish(m);
	for (;;) {
		char key[16];

		snprintf(key, sizeof(key), "k%06u", n);
		kvm_count(m, &c1);
		r = kvm_put(m, key, strlen(key), val, sizeof(val), 0, ++lsn, 0);
		if (r)
			break;
		kvm_publish(m);
		n++;
	}
	CHECK(r == -ENOSPC, "full: %d (%s)", r, kvm_strerror(r));
	CHECK(kvm_bytes(m) <= o.limit, "bytes %zu over the limit",
	      kvm_bytes(m));
	CHECK(n > 200, "only %u writes fit in 64 KiB", n);
	kvm_count(m, &c2);
	CHECK(c1.keys == c2.keys && c2.keys == n + 3, "count after -ENOSPC");
	CHECK(kvm_get(m, "k000000", 7, &e) == KVM_VALUE && e.vlen == 100,
	      "first key still there");
	CHECK(kvm_last_lsn(m) == lsn - 1, "the refused write left no LSN");
	kvm_destroy(m);
}

/* ---- 3. one writer, three readers ---- */

#define CKEYS 64
#define CWRITES 20000
#define CREADERS 3

struct shared {
	struct kvm *m;
	atomic_int done;
	atomic_uint rounds; /* reader passes, all readers (shows overlap) */
	/* The last write, announced after its kvm_publish: lsn << 8 | key. */
	_Atomic uint64_t announced;
	uint64_t final_lsn[CKEYS]; /* read after the join */
};

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* value: lsn (8), key index (4), filler, fnv of all before it (8) */
static size_t make_value(uint8_t *v, uint64_t lsn, uint32_t key)
{
	size_t n = 20 + (lsn * 7919) % 180;
	uint64_t h;

	memcpy(v, &lsn, 8);
	memcpy(v + 8, &key, 4);
	for (size_t i = 12; i < n - 8; i++)
		v[i] = (uint8_t)(lsn >> (i % 8) ^ i);
	h = fnv(v, n - 8);
	memcpy(v + n - 8, &h, 8);
	return n;
}

static void ckey(char *buf, unsigned k)
{
	snprintf(buf, 8, "key%03u", k);
}

static void *writer(void *arg)
{
	struct shared *s = arg;
	uint64_t st = 42, lsn = 0;
	uint8_t v[256];

	for (unsigned i = 0; i < CWRITES; i++) {
		unsigned k, op;
		char key[8];

		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		k = st % CKEYS;
		op = (st >> 32) % 100;
		ckey(key, k);
		if (i % 3000 == 2999) {
			CHECK(!kvm_flush(s->m, ++lsn), "flush");
			for (unsigned j = 0; j < CKEYS; j++)
				s->final_lsn[j] = lsn; /* hidden */
			continue;
		}
		lsn++;
		if (op < 90)
			CHECK(!kvm_put(s->m, key, 6, v, make_value(v, lsn, k),
				       0, lsn, 0),
			      "put");
		else
			CHECK(!kvm_del(s->m, key, 6, lsn, 0), "del");
		s->final_lsn[k] = lsn;
		/* batches of 1 to 4 writes */
		if ((st >> 40) % 4 == 0) {
			kvm_publish(s->m);
			atomic_store_explicit(&s->announced, lsn << 8 | k,
					      memory_order_release);
		}
	}
	kvm_publish(s->m);
	atomic_store_explicit(&s->done, 1, memory_order_release);
	return NULL;
}

/* The LSN of what a reader saw: 0 for absent.  Checks the value whole. */
static uint64_t seen_lsn(const struct kvm_entry *e, int r, unsigned k)
{
	uint64_t lsn, h;
	uint32_t key;

	if (r == KVM_ABSENT)
		return 0;
	if (r != KVM_VALUE)
		return e->lsn;
	CHECK(e->vlen >= 20, "short value");
	if (e->vlen < 20)
		return e->lsn;
	memcpy(&lsn, e->val, 8);
	memcpy(&key, e->val + 8, 4);
	memcpy(&h, e->val + e->vlen - 8, 8);
	CHECK(lsn == e->lsn && key == k && h == fnv(e->val, e->vlen - 8) &&
		  e->vlen == 20 + (lsn * 7919) % 180,
	      "torn value: key %u lsn %llu (in value %llu key %u vlen %u)", k,
	      (unsigned long long)e->lsn, (unsigned long long)lsn, key,
	      e->vlen);
	return e->lsn;
}

static void reader_iterate(struct shared *s, uint64_t *last)
{
	struct kvm_iter it;
	char prev[8] = "";

	kvm_iter_init(&it, s->m);
	for (int ok = kvm_iter_seek(&it, NULL, 0); ok;
	     ok = kvm_iter_next(&it)) {
		struct kvm_entry e;
		unsigned k;
		uint64_t lsn;

		kvm_iter_entry(&it, &e);
		CHECK(e.klen == 6 && (!prev[0] || memcmp(prev, e.key, 6) < 0),
		      "iteration out of order");
		memcpy(prev, e.key, 6);
		/* "keyNNN", not NUL-terminated */
		k = ((e.key[3] - '0') * 100u + (e.key[4] - '0') * 10u +
		     (e.key[5] - '0')) %
		    CKEYS;
		lsn = seen_lsn(&e, e.kind, k);
		CHECK(lsn >= last[k], "iter: key %u went back %llu -> %llu", k,
		      (unsigned long long)last[k], (unsigned long long)lsn);
		last[k] = lsn;
	}
	kvm_iter_fini(&it);
}

static void *reader(void *arg)
{
	struct shared *s = arg;
	uint64_t last[CKEYS] = {0};
	unsigned rounds = 0;

	while (!atomic_load_explicit(&s->done, memory_order_acquire) ||
	       rounds < 2) {
		uint64_t a =
		    atomic_load_explicit(&s->announced, memory_order_acquire);
		struct kvm_entry e;
		struct kvm_count c;
		char key[8];

		/* An announced write is visible (own writes). */
		ckey(key, a & 0xff);
		if (a) {
			int r = kvm_get(s->m, key, 6, &e);

			CHECK(seen_lsn(&e, r, a & 0xff) >= a >> 8,
			      "announced lsn %llu not visible",
			      (unsigned long long)(a >> 8));
		}
		for (unsigned k = 0; k < CKEYS; k++) {
			int r;
			uint64_t lsn;

			ckey(key, k);
			r = kvm_get(s->m, key, 6, &e);
			lsn = seen_lsn(&e, r, k);
			CHECK(lsn >= last[k],
			      "get: key %u went back %llu -> %llu", k,
			      (unsigned long long)last[k],
			      (unsigned long long)lsn);
			last[k] = lsn;
		}
		reader_iterate(s, last);
		kvm_count(s->m, &c);
		CHECK(c.keys <= CKEYS && c.tombstones <= c.keys, "count");
		rounds++;
	}
	atomic_fetch_add(&s->rounds, rounds);
	return NULL;
}

static void test_concurrent(void)
{
	static struct shared s;
	pthread_t w, r[CREADERS];
	struct kvm_entry e;
	char key[8];

	CHECK(!kvm_create(NULL, &s.m), "create");
	atomic_init(&s.done, 0);
	atomic_init(&s.announced, 0);
	atomic_init(&s.rounds, 0);
	for (int i = 0; i < CREADERS; i++)
		pthread_create(&r[i], NULL, reader, &s);
	pthread_create(&w, NULL, writer, &s);
	pthread_join(w, NULL);
	for (int i = 0; i < CREADERS; i++)
		pthread_join(r[i], NULL);
	for (unsigned k = 0; k < CKEYS; k++) {
		int res;

		ckey(key, k);
		res = kvm_get(s.m, key, 6, &e);
		CHECK(seen_lsn(&e, res, k) == s.final_lsn[k], "final: key %u",
		      k);
	}
	printf("concurrent: %u writes, %u reader passes, %zu arena bytes\n",
	       CWRITES, atomic_load(&s.rounds), kvm_bytes(s.m));
	kvm_destroy(s.m);
}

/* ---- 4. many keys: sorted runs ---- */

#define OKEYS 20000

static int okey(uint8_t *k, unsigned i)
{
	/* Three shapes: short, a 16-byte shared prefix (ties in the run's
	 * words), and zero bytes (pads against real bytes). */
	static const char pre[] = "0123456789abcdef";

	switch (i % 3) {
	case 0: return snprintf((char *)k, 32, "%x", i * 2654435761u);
	case 1: return snprintf((char *)k, 40, "%s%u", pre, i * 40503u);
	default:
		memset(k, 0, 20);
		k[0] = (uint8_t)(i >> 8);
		k[3] = (uint8_t)i;
		return 4 + (int)(i % 17);
	}
}

struct okey {
	uint8_t k[40];
	int n;
};

static int okey_order(const void *a, const void *b)
{
	const struct okey *x = a, *y = b;

	return key_cmp(x->k, (size_t)x->n, y->k, (size_t)y->n);
}

/* OKEYS new keys (many runs and merges, some pending), then every seek
 * position and a whole pass against a sorted array. */
static void test_order(void)
{
	static struct okey ks[OKEYS];
	struct kvm_iter it;
	struct kvm *m;
	unsigned n = 0;

	CHECK(!kvm_create(NULL, &m), "create");
	for (unsigned i = 0; i < OKEYS; i++) {
		struct okey *k = &ks[n];

		k->n = okey(k->k, i);
		if (kvm_get(m, k->k, (size_t)k->n, &(struct kvm_entry){0}) ==
		    KVM_ABSENT)
			n++;
		CHECK(!kvm_put(m, k->k, (size_t)k->n, "v", 1, 0, i + 1, 0),
		      "put %u", i);
		kvm_publish(m);
	}
	qsort(ks, n, sizeof(ks[0]), okey_order);
	kvm_iter_init(&it, m);
	for (unsigned from = 0; from <= n; from += from < 50 ? 1 : 997) {
		unsigned j = from;

		if (from == n)
			kvm_iter_seek(&it, NULL, 0), j = 0;
		else
			kvm_iter_seek(&it, ks[from].k, (size_t)ks[from].n);
		for (; kvm_iter_valid(&it); kvm_iter_next(&it), j++) {
			uint32_t klen;
			const uint8_t *k = kvm_iter_key(&it, &klen);

			if (j >= n ||
			    key_cmp(k, klen, ks[j].k, (size_t)ks[j].n)) {
				CHECK(0, "order: from %u, key %u of %u", from,
				      j, n);
				break;
			}
		}
		CHECK(j == n, "order: from %u ended at %u of %u", from, j, n);
	}
	/* a pass bounded by an end (the pending keys clipped to it) gives
	 * every key from the seek up to the end, the pending ones too */
	for (unsigned from = 0; from < n; from += from < 50 ? 1 : 331) {
		static const unsigned spans[] = {0, 1, 2, 5, 70, 300};

		for (unsigned s = 0; s < sizeof(spans) / sizeof(spans[0]);
		     s++) {
			unsigned to = from + spans[s] < n ? from + spans[s] : n;
			unsigned j = from;

			kvm_iter_seek_range(&it, ks[from].k, (size_t)ks[from].n,
					    to < n ? ks[to].k : NULL,
					    to < n ? (size_t)ks[to].n : 0);
			for (; kvm_iter_valid(&it); kvm_iter_next(&it), j++) {
				uint32_t klen;
				const uint8_t *k = kvm_iter_key(&it, &klen);

				if (to < n && key_cmp(k, klen, ks[to].k,
						      (size_t)ks[to].n) >= 0)
					break;
				if (j >= n || key_cmp(k, klen, ks[j].k,
						      (size_t)ks[j].n)) {
					CHECK(0, "range: from %u to %u, key %u",
					      from, to, j);
					break;
				}
			}
			CHECK(j == to, "range: from %u to %u ended at %u", from,
			      to, j);
		}
	}
	kvm_iter_fini(&it);
	printf("order: %u keys, %zu bytes\n", n, kvm_bytes(m));
	kvm_destroy(m);
}

/* ---- 5. one writer of new keys, readers iterating ---- */

#define NKEYS 30000

struct fresh {
	struct kvm *m;
	atomic_uint made; /* keys 0..made-1 are written */
};

static void nkey(char *k, unsigned i)
{
	snprintf(k, 16, "n%08x", i * 2654435761u);
}

static void *fresh_writer(void *arg)
{
	struct fresh *f = arg;
	char k[16];

	for (unsigned i = 0; i < NKEYS; i++) {
		nkey(k, i);
		CHECK(!kvm_put(f->m, k, 9, "v", 1, 0, i + 1, 0), "put %u", i);
		kvm_publish(f->m);
		atomic_store_explicit(&f->made, i + 1, memory_order_release);
	}
	return NULL;
}

/* Each pass holds every key written before its seek, in order, once. */
static void *fresh_reader(void *arg)
{
	struct fresh *f = arg;
	unsigned made;

	do {
		struct kvm_iter it;
		char prev[16] = "";
		unsigned seen = 0;

		made = atomic_load_explicit(&f->made, memory_order_acquire);
		kvm_iter_init(&it, f->m);
		for (int ok = kvm_iter_seek(&it, NULL, 0); ok;
		     ok = kvm_iter_next(&it)) {
			uint32_t klen;
			const uint8_t *k = kvm_iter_key(&it, &klen);

			CHECK(klen == 9 && memcmp(prev, k, 9) < 0,
			      "fresh: out of order");
			memcpy(prev, k, 9);
			seen++;
		}
		kvm_iter_fini(&it);
		CHECK(seen >= made && seen <= NKEYS,
		      "fresh: %u keys seen, %u written before", seen, made);
	} while (made < NKEYS);
	return NULL;
}

static void test_fresh(void)
{
	static struct fresh f;
	pthread_t w, r[CREADERS];

	CHECK(!kvm_create(NULL, &f.m), "create");
	atomic_init(&f.made, 0);
	for (int i = 0; i < CREADERS; i++)
		pthread_create(&r[i], NULL, fresh_reader, &f);
	pthread_create(&w, NULL, fresh_writer, &f);
	pthread_join(w, NULL);
	for (int i = 0; i < CREADERS; i++)
		pthread_join(r[i], NULL);
	printf("fresh: %u new keys under %d iterating readers\n", NKEYS,
	       CREADERS);
	kvm_destroy(f.m);
}

/* The entry_at of the key the iterator is on, or -1 when it is elsewhere. */
static int at_key(struct kvm_iter *it, const char *key, uint64_t upto,
		  uint64_t flush, struct kvm_entry *e)
{
	uint32_t klen;
	const uint8_t *k;

	if (!kvm_iter_seek(it, key, strlen(key)))
		return -1;
	k = kvm_iter_key(it, &klen);
	if (klen != strlen(key) || memcmp(k, key, klen))
		return -1;
	return kvm_iter_entry_at(it, upto, flush, e);
}

static void test_moment(void)
{
	struct kvm *m;
	struct kvm_count c, c2;
	struct kvm_entry e;
	struct kvm_iter it;

	CHECK(!kvm_create(NULL, &m), "create");
	CHECK(!kvm_put(m, "a", 1, "1", 1, 0, 1, 0), "put a");
	CHECK(!kvm_put(m, "b", 1, "2", 1, 99, 2, 0), "put b");
	kvm_publish(m);
	kvm_count(m, &c);
	CHECK(c.lsn == 2 && c.expiring == 1, "count: lsn %llu",
	      (unsigned long long)c.lsn);
	CHECK(!kvm_del(m, "b", 1, 3, 0), "del b");
	CHECK(!kvm_put(m, "d", 1, "4", 1, 0, 4, 0), "put d");
	CHECK(!kvm_put(m, "a", 1, "5", 1, 0, 5, 0), "put a again");
	kvm_count(m, &c2);
	CHECK(c2.lsn == 2 && c2.keys == 2 && c2.tombstones == 0,
	      "count before the publish: the published moment");
	kvm_publish(m);
	kvm_iter_init(&it, m);
	CHECK(at_key(&it, "a", c.lsn, c.flush_lsn, &e) == 1 && e.lsn == 1 &&
		  e.val[0] == '1',
	      "a at the moment: the first version");
	CHECK(at_key(&it, "b", c.lsn, c.flush_lsn, &e) == 1 &&
		  e.kind == KVM_VALUE && e.expire_at == 99,
	      "b at the moment: the value, not the later tombstone");
	CHECK(at_key(&it, "d", c.lsn, c.flush_lsn, &e) == 0,
	      "d at the moment: not there yet");
	CHECK(kvm_get(m, "a", 1, &e) == KVM_VALUE && e.lsn == 5 &&
		  e.first_lsn == 1,
	      "a: first_lsn %llu", (unsigned long long)e.first_lsn);
	CHECK(kvm_get(m, "d", 1, &e) == KVM_VALUE && e.first_lsn == 4 &&
		  e.first_lsn > c.lsn,
	      "d: first_lsn after the moment");
	CHECK(!kvm_flush(m, 6), "flush");
	CHECK(!kvm_put(m, "a", 1, "7", 1, 0, 7, 0), "put a after the flush");
	CHECK(kvm_flush_lsn(m) == 0 && kvm_get(m, "d", 1, &e) == KVM_VALUE,
	      "a flush not published yet hides nothing");
	kvm_publish(m);
	kvm_count(m, &c2);
	CHECK(c2.lsn == 7 && c2.flush_lsn == 6, "count after the flush");
	CHECK(kvm_get(m, "a", 1, &e) == KVM_VALUE && e.first_lsn == 7,
	      "a after the flush: a new key (first_lsn %llu)",
	      (unsigned long long)e.first_lsn);
	CHECK(kvm_get(m, "d", 1, &e) == KVM_TOMBSTONE && e.first_lsn == 6,
	      "d hidden by the flush: first_lsn is the flush's");
	CHECK(at_key(&it, "a", c.lsn, c.flush_lsn, &e) == 1 && e.lsn == 1,
	      "a at the first moment, after the flush");
	CHECK(at_key(&it, "a", c2.lsn, c2.flush_lsn, &e) == 1 && e.lsn == 7,
	      "a at the second moment");
	kvm_iter_fini(&it);
	/* a version hidden by the flush in force at the moment */
	CHECK(!kvm_put(m, "e", 1, "8", 1, 0, 8, 0), "put e");
	kvm_publish(m);
	kvm_count(m, &c2);
	kvm_iter_init(&it, m);
	CHECK(at_key(&it, "e", c2.lsn, 9, &e) == 0,
	      "e older than the flush given: hidden");
	kvm_iter_fini(&it);
	kvm_destroy(m);
	printf("moment: counts and later writes agree\n");
}

/* Resident bytes of this process (/proc/self/statm), 0 if unknown. */
static size_t rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * 4096;
}

static void test_sized(void)
{
	struct kvm_opts o = {.expect_bytes = 256u << 20};
	struct kvm_entry e;
	struct kvm *m;
	size_t rss0, rss1;
	char key[32];
	unsigned n = 20000;

	/* 256 MiB / 128 per slot: 2 Mi slots, a 16 MiB table. */
	rss0 = rss_bytes();
	CHECK(!kvm_create(&o, &m), "create sized");
	rss1 = rss_bytes();
	CHECK(kvm_bytes(m) >= (16u << 20), "sized: arena charged %zu bytes",
	      kvm_bytes(m));
	CHECK(rss1 < rss0 + (8u << 20), "sized: %zu bytes touched at create",
	      rss1 - rss0);
	CHECK(!kvm_put(m, "k", 1, "v", 1, 0, 1, 0), "sized: put");
	kvm_publish(m);
	CHECK(kvm_get(m, "k", 1, &e) == KVM_VALUE && e.val[0] == 'v',
	      "sized: get");
	kvm_destroy(m);
	/* 1 MiB: 8,192 slots, grown past when 4,097 keys are in. */
	o.expect_bytes = 1u << 20;
	CHECK(!kvm_create(&o, &m), "create small hint");
	for (unsigned i = 0; i < n; i++) {
		int len = snprintf(key, sizeof(key), "key:%u", i);

		CHECK(!kvm_put(m, key, (size_t)len, key, (size_t)len, 0, i + 1,
			       0),
		      "put %u", i);
	}
	kvm_publish(m);
	for (unsigned i = 0; i < n; i++) {
		int len = snprintf(key, sizeof(key), "key:%u", i);

		CHECK(kvm_get(m, key, (size_t)len, &e) == KVM_VALUE &&
			  e.vlen == (uint32_t)len &&
			  !memcmp(e.val, key, e.vlen),
		      "get %u past the hint", i);
	}
	kvm_destroy(m);
	printf("sized: index sized ahead, charged, untouched, grown past\n");
}

#define PKEYS 30000

static void pkey(char *k, char tag, unsigned i)
{
	snprintf(k, 24, "%c-pooled-%09u", tag, i);
}

/* n keys tagged tag into m, each value its key twice; every 16th key
 * also a filler value of a random size up to 400 KiB (bump-allocated,
 * under a quarter chunk), so that chunks end often and the hash index's
 * growing tables land at the start of a chunk now and then. */
static void pool_fill(struct kvm *m, char tag, unsigned n, uint64_t *lsn)
{
	static uint8_t fill[400u << 10];
	char k[24], v[48];

	memset(fill, 0xa5, sizeof(fill));
	for (unsigned i = 0; i < n; i++) {
		pkey(k, tag, i);
		snprintf(v, sizeof(v), "%s%s", k, k);
		CHECK(!kvm_put(m, k, strlen(k), v, strlen(v), 0, ++*lsn, 0),
		      "pool put %u", i);
		if (i % 16 == 0) {
			k[0] = 'f';
			CHECK(!kvm_put(m, k, strlen(k), fill,
				       rnd() % sizeof(fill), 0, ++*lsn, 0),
			      "pool filler %u", i);
		}
	}
	kvm_publish(m);
}

static void test_pool(void)
{
	struct kvm_opts o = {.chunk_size = KVM_DEFAULT_CHUNK};
	struct kvm_pool *p;
	struct kvm_entry e;
	struct kvm_count c;
	struct kvm *m;
	uint64_t lsn = 0;
	char k[24], v[48];

	CHECK(kvm_pool_create(4096, 8u << 20, &p) == -EINVAL && !p,
	      "a pool of chunks under a huge page");
	CHECK(!kvm_pool_create(KVM_DEFAULT_CHUNK, 64u << 20, &p), "pool");
	o.pool = p;
	o.chunk_size = 4096;
	CHECK(kvm_create(&o, &m) == -EINVAL, "chunk size not the pool's");
	o.chunk_size = KVM_DEFAULT_CHUNK;
	CHECK(!kvm_create(&o, &m), "create");
	pool_fill(m, 'a', PKEYS, &lsn);
	CHECK(kvm_bytes(m) > (64u << 20), "first memtable: %zu bytes",
	      kvm_bytes(m));
	kvm_destroy(m);
	CHECK(kvm_pool_bytes(p) == (64u << 20), "pooled %zu bytes, want 64 MiB",
	      kvm_pool_bytes(p));
	/* The next memtable, from the pool: an index that starts small and
	 * doubles, its tables partly in reused chunks. */
	CHECK(!kvm_create(&o, &m), "create from the pool");
	pool_fill(m, 'b', PKEYS, &lsn);
	CHECK(kvm_pool_bytes(p) == 0, "pool not drained: %zu bytes left",
	      kvm_pool_bytes(p));
	for (unsigned i = 0; i < PKEYS; i++) {
		pkey(k, 'b', i);
		snprintf(v, sizeof(v), "%s%s", k, k);
		CHECK(kvm_get(m, k, strlen(k), &e) == KVM_VALUE &&
			  e.vlen == strlen(v) && !memcmp(e.val, v, e.vlen),
		      "reused chunks: key %u", i);
		pkey(k, 'a', i);
		CHECK(kvm_get(m, k, strlen(k), &e) == KVM_ABSENT,
		      "a key of the destroyed memtable: %u", i);
	}
	kvm_count(m, &c);
	CHECK(c.keys == PKEYS + (PKEYS + 15) / 16 && c.tombstones == 0,
	      "count %llu", (unsigned long long)c.keys);
	kvm_destroy(m);
	CHECK(kvm_pool_bytes(p) == (64u << 20), "pooled again");
	kvm_pool_trim(p);
	CHECK(kvm_pool_bytes(p) == 0, "trimmed");
	/* A trimmed pool maps new chunks again. */
	CHECK(!kvm_create(&o, &m), "create after trim");
	pool_fill(m, 'c', 1000, &lsn);
	kvm_destroy(m);
	kvm_pool_destroy(p);
}

static void test_types(void)
{
	struct kvm_entry e;
	struct kvm_iter it;
	struct kvm_count c;
	struct kvm *m;

	CHECK(!kvm_create(NULL, &m), "create");
	CHECK(!kvm_put(m, "h", 1, "img", 3, 0, 1, KVM_F_TYPE(1)) &&
		  !kvm_put(m, "s", 1, "v", 1, 0, 2, KVM_F_UNKNOWN) &&
		  !kvm_put(m, "t", 1, "x", 1, 0, 3,
			   KVM_F_BELOW | KVM_F_TYPE(KVM_MAX_TYPE)),
	      "typed puts");
	kvm_publish(m);
	CHECK(kvm_get(m, "h", 1, &e) == KVM_VALUE && e.type == 1 &&
		  e.vlen == 3 && !memcmp(e.val, "img", 3),
	      "a typed value");
	CHECK(kvm_get(m, "s", 1, &e) == KVM_VALUE && e.type == 0,
	      "a plain value (the unknown flag beside it)");
	CHECK(kvm_get(m, "t", 1, &e) == KVM_VALUE && e.type == KVM_MAX_TYPE,
	      "the largest type");
	kvm_count(m, &c);
	CHECK(c.keys == 3 && c.below == 1 && c.unknown == 1,
	      "flags beside the type still count");
	kvm_iter_init(&it, m);
	CHECK(kvm_iter_seek(&it, "h", 1), "seek");
	kvm_iter_entry(&it, &e);
	CHECK(e.type == 1, "the iterator's type");
	kvm_iter_fini(&it);
	CHECK(!kvm_put(m, "h", 1, "str", 3, 0, 4, 0) &&
		  !kvm_del(m, "t", 1, 5, 0),
	      "replace, delete");
	kvm_publish(m);
	CHECK(kvm_get(m, "h", 1, &e) == KVM_VALUE && e.type == 0,
	      "a plain value replaced the typed one");
	CHECK(kvm_get(m, "t", 1, &e) == KVM_TOMBSTONE && e.type == 0,
	      "a tombstone has no type");
	kvm_iter_init(&it, m);
	CHECK(kvm_iter_seek(&it, "h", 1) &&
		  kvm_iter_entry_at(&it, c.lsn, c.flush_lsn, &e) && e.type == 1,
	      "the version of a moment keeps its type");
	kvm_iter_fini(&it);
	kvm_destroy(m);
}

int main(void)
{
	const char *env = getenv("KVM_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : 20240611;

	printf("model: seed %llu (KVM_TEST_SEED=%llu replays it)\n",
	       (unsigned long long)seed, (unsigned long long)seed);
	test_model(seed ? seed : 1, 0);
	test_model(seed ? seed : 1, 64u << 20);
	test_limits();
	test_concurrent();
	test_order();
	test_fresh();
	test_moment();
	test_sized();
	test_pool();
	test_types();
	if (fails) {
		fprintf(stderr, "%u failure(s)\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
