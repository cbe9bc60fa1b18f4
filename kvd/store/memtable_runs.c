/* memtable_runs.c - the memtable's key order: sorted runs of the keys'
 * first versions, the views that publish sets of them, and the iterators
 * that merge a view's runs with the few keys created after it.
 *
 * Rule 4 of memtable.c's memory-ordering argument is this file's: a run is
 * written whole before a view holding it is published under view_mu; a
 * seek takes the current view with a count under that mutex, then loads
 * m->tail (the writer stored it before it published the view, so it is at
 * or after the view's last key) and reads the creation list from the
 * view's last key to it, with acquire loads.  A run a merge replaced is
 * freed when the last view holding it is released.
 *
 * Rule 9 (batches) holds here too: a seek loads m->top first, and the pass
 * sees the memtable as published then.  A key whose first version is
 * above that bound was written since: the keys after the view are checked
 * as the seek gathers them, and the runs' keys only when the view is newer
 * than the bound (the writer made a run in the middle of a batch), since
 * the view's last key has the highest first LSN of its runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "memtable_int.h"

/* Insertion sort: n is at most KVM_ITER_PEND, and mostly RUN_MIN. */
static void sent_sort(struct kvm_sent *e, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct kvm_sent t = e[i];
		size_t j = i;

		for (; j && sent_cmp(&e[j - 1], &t) > 0; j--)
			e[j] = e[j - 1];
		e[j] = t;
	}
}

/* The first of e[0..n) at or after key. */
static size_t lower_bound(const struct kvm_sent *e, size_t n, uint64_t p0,
			  uint64_t p1, const uint8_t *key, size_t klen)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sent_cmp_key(&e[mid], p0, p1, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- sorted runs and views ---- */

/* Runs a seek may pass over.  A seek within one 16-byte prefix (an index
 * equality: every entry of one value shares its first 16 bytes) would
 * search every run, of every memtable, of every shard, some 26 binary
 * searches a query and most of their steps cache misses, though its keys
 * lie in few runs.  Each run keeps a Bloom filter of its prefixes (a
 * byte a key: two bits in one word, about 5% false positives), so the
 * seek passes over a run that cannot hold the prefix.  A run of fewer
 * than BLOOM_MIN keys keeps none: it is searched within the cache, and
 * the smallest runs are the ones merged most often. */
#define BLOOM_MIN 4096

static size_t bloom_words(size_t n)
{
	return n < BLOOM_MIN ? 0 : n / 8 + 1;
}

static uint64_t pre_hash(uint64_t p0, uint64_t p1)
{
	uint64_t h = p0 * 0x9E3779B97F4A7C15ull ^ (p1 + 0x632BE59BD9B4E019ull);

	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 29;
	h *= 0x94D049BB133111EBull;
	return h ^ (h >> 32);
}

static uint64_t bloom_bits(uint64_t h)
{
	return 1ull << ((h >> 40) & 63) | 1ull << ((h >> 52) & 63);
}

/* A run's filter: its nbloom words, after its entries. */
static uint64_t *run_bloom(const struct kvm_run *r)
{
	return (uint64_t *)(void *)&((struct kvm_run *)r)->e[r->n];
}

/* The filter of a run whose entries are in place. */
static void run_bloom_make(struct kvm_run *r)
{
	uint64_t *w = run_bloom(r);

	if (!r->nbloom)
		return;
	memset(w, 0, r->nbloom * sizeof(*w));
	for (size_t i = 0; i < r->n; i++) {
		uint64_t h = pre_hash(r->e[i].p0, r->e[i].p1);

		w[h % r->nbloom] |= bloom_bits(h);
	}
}

static bool run_may_hold(const struct kvm_run *r, uint64_t h)
{
	uint64_t b = bloom_bits(h);

	return !r->nbloom || (run_bloom(r)[h % r->nbloom] & b) == b;
}

static size_t run_bytes(size_t n)
{
	return sizeof(struct kvm_run) + n * sizeof(struct kvm_sent) +
	       bloom_words(n) * sizeof(uint64_t);
}

/* A run of n keys, or NULL with *err set (the limit covers runs too). */
static struct kvm_run *run_new(struct kvm *m, size_t n, int *err)
{
	size_t bytes = run_bytes(n);
	struct kvm_run *r = NULL;

	if (m->limit && kvm_bytes(m) + bytes > m->limit)
		*err = -ENOSPC;
	else if (!(r = malloc(bytes)))
		*err = -ENOMEM;
	if (!r)
		return NULL;
	r->refs = 0;
	r->n = n;
	r->nbloom = bloom_words(n);
	atomic_fetch_add_explicit(&m->run_bytes, bytes, memory_order_relaxed);
	return r;
}

static void run_free(struct kvm *m, struct kvm_run *r)
{
	atomic_fetch_sub_explicit(&m->run_bytes, run_bytes(r->n),
				  memory_order_relaxed);
	free(r);
}

/* One run of a's and b's keys (disjoint: one node per key). */
static struct kvm_run *run_merge(struct kvm *m, const struct kvm_run *a,
				 const struct kvm_run *b, int *err)
{
	struct kvm_run *r = run_new(m, a->n + b->n, err);
	size_t i = 0, j = 0, k = 0;

	if (!r)
		return NULL;
	while (i < a->n && j < b->n)
		r->e[k++] =
		    sent_cmp(&a->e[i], &b->e[j]) < 0 ? a->e[i++] : b->e[j++];
	while (i < a->n)
		r->e[k++] = a->e[i++];
	while (j < b->n)
		r->e[k++] = b->e[j++];
	run_bloom_make(r);
	return r;
}

/* Drop one hold on v (under view_mu); the last one frees it and the runs
 * no other view holds. */
static void view_put_locked(struct kvm *m, struct kvm_view *v)
{
	if (--v->refs)
		return;
	for (struct kvm_view **p = &m->retired; *p; p = &(*p)->next)
		if (*p == v) {
			*p = v->next;
			break;
		}
	for (unsigned i = 0; i < v->nruns; i++)
		if (!--v->run[i]->refs)
			run_free(m, v->run[i]);
	free(v);
}

/* Publish v as the current view; the old one lives on while iterators
 * hold it. */
static void view_swap(struct kvm *m, struct kvm_view *v)
{
	struct kvm_view *old;

	pthread_mutex_lock(&m->view_mu);
	for (unsigned i = 0; i < v->nruns; i++)
		v->run[i]->refs++;
	old = m->view;
	m->view = v;
	if (old) {
		old->next = m->retired;
		m->retired = old;
		view_put_locked(m, old);
	}
	pthread_mutex_unlock(&m->view_mu);
}

/* Sort the pending keys into a run, merge it with the newest runs while
 * they are no bigger (a binary counter: at most log2(keys / RUN_MIN) + 1
 * runs, each key copied once per doubling), publish the new set.  Called
 * before a write changes anything, so that -ENOMEM leaves nothing half
 * done.  Why runs: rule 4 above. */
int kvm_runs_add(struct kvm *m)
{
	const struct kvm_view *old = m->view;
	struct kvm_run *run[KVM_ITER_RUNS + 1];
	bool fresh[KVM_ITER_RUNS + 1] = {false};
	struct kvm_view *v = malloc(sizeof(*v));
	unsigned n = old->nruns;
	int err = -ENOMEM;

	memcpy(run, old->run, n * sizeof(run[0]));
	if (!v || !(run[n] = run_new(m, m->npend, &err)))
		goto fail;
	sent_sort(m->pend, m->npend);
	memcpy(run[n]->e, m->pend, m->npend * sizeof(m->pend[0]));
	run_bloom_make(run[n]);
	fresh[n++] = true;
	while (n >= 2 &&
	       (run[n - 2]->n <= run[n - 1]->n || n > KVM_ITER_RUNS)) {
		struct kvm_run *r = run_merge(m, run[n - 2], run[n - 1], &err);

		if (!r)
			goto fail;
		/* A run made in this call is in no view: free it now. */
		for (unsigned i = n - 2; i < n; i++)
			if (fresh[i])
				run_free(m, run[i]);
		run[n - 2] = r;
		fresh[n - 2] = true;
		n--;
	}
	v->refs = 1;
	v->next = NULL;
	v->upto = m->last_created;
	v->nruns = n;
	memcpy(v->run, run, n * sizeof(run[0]));
	view_swap(m, v);
	m->npend = 0;
	return 0;
fail:
	for (unsigned i = 0; i <= n && i <= KVM_ITER_RUNS; i++)
		if (fresh[i])
			run_free(m, run[i]);
	free(v);
	return err;
}

/* At kvm_destroy no reader holds a view any more (the contract): free
 * them all, and the runs with them. */
void kvm_views_free(struct kvm *m)
{
	while (m->retired) {
		m->retired->refs = 1;
		view_put_locked(m, m->retired);
	}
	if (m->view) {
		m->view->refs = 1;
		view_put_locked(m, m->view);
	}
}

/* ---- iterator ---- */

static struct kvm_view *view_get(const struct kvm *cm)
{
	struct kvm *m = (struct kvm *)cm;
	struct kvm_view *v;

	pthread_mutex_lock(&m->view_mu);
	v = m->view;
	v->refs++;
	pthread_mutex_unlock(&m->view_mu);
	return v;
}

/* Source s's next key: run s, or (s == nruns) the iterator's own. */
static const struct kvm_sent *head_of(const struct kvm_iter *it, unsigned s)
{
	if (s < it->v->nruns)
		return it->pos[s] < it->v->run[s]->n
			   ? &it->v->run[s]->e[it->pos[s]]
			   : NULL;
	return it->pos[s] < it->npend ? &it->pend[it->pos[s]] : NULL;
}

/* The smallest key at the sources' heads becomes the current one. */
static void pick(struct kvm_iter *it)
{
	const struct kvm_sent *best = NULL;

	it->cur = -1;
	for (unsigned s = 0; s <= it->v->nruns; s++) {
		const struct kvm_sent *e = head_of(it, s);

		if (e && (!best || sent_cmp(e, best) < 0)) {
			best = e;
			it->cur = (int)s;
		}
	}
	it->node = best ? best->x : NULL;
}

/* Step source s, and ask for the node PREFETCH keys ahead in it: a pass
 * that reads entries (a checkpoint, a scan) touches every node, and nodes
 * of random keys lie anywhere in the arena, so each would be a cache
 * miss; a run's entries are read in order, so its coming nodes are
 * known. */
#define PREFETCH 8

static void advance(struct kvm_iter *it, unsigned s)
{
	size_t p = ++it->pos[s];

	if (s < it->v->nruns) {
		const struct kvm_run *r = it->v->run[s];

		if (p + PREFETCH < r->n)
			__builtin_prefetch(r->e[p + PREFETCH].x);
	}
}

/* 1 when the pass does not see the current key: its first version is
 * above the pass's bound, or its version at the bound is older than the
 * flush in force then. */
static bool hidden(const struct kvm_iter *it)
{
	/* Without a flush, and with a view no newer than the bound, nothing
	 * is hidden: the node is not touched here (a cache miss per key,
	 * which a pass over keys alone need not pay).  The keys after the
	 * view were checked at the seek. */
	if (it->check && (unsigned)it->cur < it->v->nruns &&
	    it->node->lsn > it->upto)
		return true;
	return it->flush_lsn &&
	       newest_upto(it->node, it->upto)->lsn < it->flush_lsn;
}

static void skip_hidden(struct kvm_iter *it)
{
	while (it->node && hidden(it)) {
		advance(it, (unsigned)it->cur);
		pick(it);
	}
}

/* Take the current view and the keys created after it, up to the newest
 * key now.  0 when more keys than fit were created meanwhile (the writer
 * made a newer view in the mean time): try again with that one. */
static int take_view(struct kvm_iter *it)
{
	const struct kvm_node *x, *tail;

	it->v = view_get(it->m);
	/* After the view: the writer stored tail = upto before publishing
	 * it, so tail is upto or a key after it on the creation list. */
	tail = atomic_load_explicit(&((struct kvm *)it->m)->tail,
				    memory_order_acquire);
	it->npend = 0;
	/* Creation order is LSN order: the first key above the bound ends
	 * the keys this pass sees. */
	for (x = it->v->upto;
	     x != tail && (x = next_created(x)) && x->lsn <= it->upto;) {
		if (it->npend == KVM_ITER_PEND) {
			kvm_iter_fini(it);
			return 0;
		}
		it->pend[it->npend++] = sent_of(x);
	}
	it->check = it->v->upto->lsn > it->upto;
	return 1;
}

void kvm_iter_init(struct kvm_iter *it, const struct kvm *m)
{
	it->m = m;
	it->v = NULL;
	it->node = NULL;
	it->flush_lsn = 0;
	it->upto = 0;
	it->check = 0;
	it->cur = -1;
	it->npend = 0;
}

void kvm_iter_fini(struct kvm_iter *it)
{
	struct kvm *m = (struct kvm *)it->m;

	if (!it->v)
		return;
	pthread_mutex_lock(&m->view_mu);
	view_put_locked(m, it->v);
	pthread_mutex_unlock(&m->view_mu);
	it->v = NULL;
	it->node = NULL;
}

/* Keep only the pending keys in [key, end) (elen 0: no end). */
static void pend_clip(struct kvm_iter *it, const uint8_t *key, size_t klen,
		      const uint8_t *end, size_t elen)
{
	uint64_t k0 = 0, k1 = 0, e0 = 0, e1 = 0;
	unsigned n = 0;

	if (klen)
		key_prefix(key, klen, &k0, &k1);
	if (elen)
		key_prefix(end, elen, &e0, &e1);
	for (unsigned i = 0; i < it->npend; i++) {
		const struct kvm_sent *e = &it->pend[i];

		if (klen && sent_cmp_key(e, k0, k1, key, klen) < 0)
			continue;
		if (elen && sent_cmp_key(e, e0, e1, end, elen) >= 0)
			continue;
		it->pend[n++] = *e;
	}
	it->npend = n;
}

int kvm_iter_seek_range(struct kvm_iter *it, const void *key, size_t klen,
			const void *end, size_t elen)
{
	const struct kvm_node *top;
	uint64_t p0 = 0, p1 = 0, h;
	bool one;

	kvm_iter_fini(it);
	/* The bound before the view and the creation list (rule 9). */
	top = cur_top(it->m);
	it->upto = top->lsn;
	it->flush_lsn = top->st.flush_lsn;
	while (!take_view(it))
		;
	if (klen || elen)
		pend_clip(it, key, klen, end, elen);
	sent_sort(it->pend, it->npend);
	if (klen)
		key_prefix(key, klen, &p0, &p1);
	/* Within one prefix, every key the pass yields has it (key <= k <
	 * end, both of 16 bytes or more, sharing their first 16): a run
	 * without it yields nothing (its pos at its end). */
	one = klen >= 16 && elen >= 16 && !memcmp(key, end, 16);
	h = one ? pre_hash(p0, p1) : 0;
	for (unsigned s = 0; s < it->v->nruns; s++) {
		const struct kvm_run *r = it->v->run[s];

		it->pos[s] = !klen ? 0
			     : one && !run_may_hold(r, h)
				 ? r->n
				 : lower_bound(r->e, r->n, p0, p1, key, klen);
	}
	/* the pending keys left are all at or after key */
	it->pos[it->v->nruns] = 0;
	pick(it);
	skip_hidden(it);
	return it->node != NULL;
}

int kvm_iter_seek(struct kvm_iter *it, const void *key, size_t klen)
{
	return kvm_iter_seek_range(it, key, klen, NULL, 0);
}

int kvm_iter_valid(const struct kvm_iter *it)
{
	return it->node != NULL;
}

int kvm_iter_next(struct kvm_iter *it)
{
	/* One node per key (rule 5): the next node is the next key; newer
	 * versions of this one are on its `newer` chain, not in a run. */
	advance(it, (unsigned)it->cur);
	pick(it);
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
	fill_entry(newest_upto(it->node, it->upto), e);
}

int kvm_iter_entry_at(const struct kvm_iter *it, uint64_t upto,
		      uint64_t flush_lsn, struct kvm_entry *e)
{
	/* The run holds the key's first version; later ones are on its
	 * `newer` chain in LSN order. */
	const struct kvm_node *x = it->node;

	if (x->lsn > upto)
		return 0;
	x = newest_upto(x, upto);
	if (x->lsn < flush_lsn)
		return 0;
	fill_entry(x, e);
	return 1;
}

int kvm_iter_base_hidden(const struct kvm_iter *it)
{
	return it->flush_lsn != 0;
}
