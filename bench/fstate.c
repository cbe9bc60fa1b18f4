/* fstate.c - --verify's per-field state for records of fields (see
 * fstate.h for the rule). */
#include "fstate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "record.h"

/* Record numbers followed: 2^32 from the first, a table of chunk pointers
 * that calloc leaves untouched (and unbacked) until used. */
#define FST_MAX_CHUNKS ((1ull << 32) / FST_CHUNK)

/* How far a short field's generation is looked for among the candidates
 * its few known bits allow. */
#define FST_SEARCH 4096

int fst_init(struct fst_table *t, unsigned fieldcount, uint64_t first)
{
	struct timespec ts;
	uint64_t x;

	memset(t, 0, sizeof(*t));
	t->fieldcount = fieldcount;
	t->first = first;
	t->nchunks = FST_MAX_CHUNKS;
	if (!(t->chunks = calloc(t->nchunks, sizeof(*t->chunks))))
		return -1;
	for (int i = 0; i < FST_LOCKS; i++)
		pthread_mutex_init(&t->locks[i], NULL);
	/* A run phase without its load writes fields another process may
	 * have written too: its generations start somewhere else, in
	 * [2^20, 2^30), so that they are unlikely to repeat that process's. */
	clock_gettime(CLOCK_REALTIME, &ts);
	x = ((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^
	     (uint64_t)getpid() << 40) *
	    0x9e3779b97f4a7c15ull;
	t->gen_base =
	    (uint32_t)((1u << 20) + (x >> 34) % ((1u << 30) - (1u << 20)));
	return 0;
}

void fst_free(struct fst_table *t)
{
	for (size_t i = 0; t->chunks && i < t->nchunks; i++)
		free(t->chunks[i]);
	free(t->chunks);
	for (int i = 0; t->chunks && i < FST_LOCKS; i++)
		pthread_mutex_destroy(&t->locks[i]);
	memset(t, 0, sizeof(*t));
}

static pthread_mutex_t *lock_of(struct fst_table *t, uint64_t k)
{
	return &t->locks[k % FST_LOCKS];
}

/* Record k's entries, the chunk made if need be (make) ; NULL when out of
 * range or memory, or not made. */
static struct fst_ent *record(struct fst_table *t, uint64_t k, int make)
{
	uint64_t i = k - t->first;
	struct fst_ent *c, *fresh;

	if (k < t->first || i / FST_CHUNK >= t->nchunks)
		return NULL;
	c = __atomic_load_n(&t->chunks[i / FST_CHUNK], __ATOMIC_ACQUIRE);
	if (!c && make) {
		fresh = calloc((size_t)FST_CHUNK * t->fieldcount, sizeof(*c));
		if (!fresh)
			return NULL;
		if (__atomic_compare_exchange_n(&t->chunks[i / FST_CHUNK], &c,
						fresh, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			c = fresh;
		else
			free(fresh); /* another thread made it: c is it */
	}
	return c ? c + (i % FST_CHUNK) * t->fieldcount : NULL;
}

int fst_send(struct fst_table *t, uint64_t k, unsigned f, int insert,
	     uint32_t *gen, uint32_t *pfx)
{
	struct fst_ent *e = record(t, k, 1);
	pthread_mutex_t *m = lock_of(t, k);

	if (!e)
		return -1;
	e += f;
	pthread_mutex_lock(m);
	if (!e->next)
		e->next = insert ? 1 : t->gen_base;
	*gen = e->next++;
	/* No write in flight: every earlier generation was answered, so this
	 * one replaces them all once acknowledged. */
	*pfx = e->inflight ? e->quiet : *gen - 1;
	if (e->inflight < UINT16_MAX)
		e->inflight++;
	pthread_mutex_unlock(m);
	return 0;
}

void fst_done(struct fst_table *t, uint64_t k, unsigned f, uint32_t pfx,
	      int acked)
{
	struct fst_ent *e = record(t, k, 0);
	pthread_mutex_t *m = lock_of(t, k);

	if (!e)
		return;
	e += f;
	pthread_mutex_lock(m);
	if (acked) {
		if (pfx > e->floor)
			e->floor = pfx;
		e->acked = 1;
	}
	/* A field that reached UINT16_MAX writes in flight stays there: its
	 * quiet prefix is then never advanced, which is only lenient. */
	if (e->inflight && e->inflight < UINT16_MAX && !--e->inflight)
		e->quiet = e->next - 1;
	pthread_mutex_unlock(m);
}

void fst_snapshot(struct fst_table *t, uint64_t k, int f, uint64_t *out)
{
	struct fst_ent *e = record(t, k, 0);
	pthread_mutex_t *m = lock_of(t, k);
	unsigned lo = f < 0 ? 0 : (unsigned)f,
		 hi = f < 0 ? t->fieldcount : (unsigned)f + 1;

	if (!e) {
		memset(out, 0, (hi - lo) * sizeof(*out));
		return;
	}
	pthread_mutex_lock(m);
	for (unsigned i = lo; i < hi; i++)
		out[i - lo] = e[i].floor | (e[i].acked ? FST_ACKED : 0);
	pthread_mutex_unlock(m);
}

static uint32_t next_of(struct fst_table *t, uint64_t k, unsigned f)
{
	struct fst_ent *e = record(t, k, 0);
	uint32_t n = 0;

	if (e) {
		pthread_mutex_lock(lock_of(t, k));
		n = e[f].next;
		pthread_mutex_unlock(lock_of(t, k));
	}
	return n;
}

/* A field too short to carry its whole generation: look for one whose
 * low bits and bytes match, among the generations this process wrote
 * above the floor, then below it. */
static enum fst_verdict check_short(struct fst_table *t,
				    const struct kb_props *p,
				    const struct kb_zipf *lenz, uint64_t k,
				    unsigned f, uint32_t floor, uint32_t low,
				    unsigned bits, const uint8_t *v, size_t len)
{
	uint32_t next = next_of(t, k, f), step = 1u << bits;
	uint32_t g = next ? next - 1 : 0;
	unsigned n = 0;

	if (!next)
		return FST_OK;	     /* written elsewhere only: cannot tell */
	g -= (g - low) & (step - 1); /* the highest g <= next-1, g = low */
	for (; g > floor && g <= next - 1 && n < FST_SEARCH; g -= step, n++)
		if (rec_is(p, lenz, k, f, g, v, len))
			return FST_OK;
	for (; g >= 1 && g <= floor && n < FST_SEARCH; g -= step, n++)
		if (rec_is(p, lenz, k, f, g, v, len))
			return FST_STALE;
	return FST_OK; /* another process's, or beyond the search */
}

enum fst_verdict fst_check(struct fst_table *t, const struct kb_props *p,
			   const struct kb_zipf *lenz, uint64_t k, unsigned f,
			   uint64_t snap, const uint8_t *v, size_t len)
{
	uint32_t g, floor = (uint32_t)snap;
	unsigned bits;

	if (rec_generation(k, f, v, len, &g, &bits))
		return FST_CORRUPT;
	if (bits < 32)
		return check_short(t, p, lenz, k, f, floor, g, bits, v, len);
	if (!rec_is(p, lenz, k, f, g, v, len))
		return FST_CORRUPT;
	return g > floor ? FST_OK : FST_STALE;
}

static int any_acked(const struct fst_ent *e, unsigned n)
{
	for (unsigned f = 0; f < n; f++)
		if (e[f].acked)
			return 1;
	return 0;
}

int fst_vtable(struct fst_table *t, struct kb_vtable *vt)
{
	size_t cap = 0;

	memset(vt, 0, sizeof(*vt));
	for (size_t c = 0; c < t->nchunks; c++) {
		struct fst_ent *e = t->chunks[c];

		for (size_t r = 0; e && r < FST_CHUNK; r++) {
			if (!any_acked(e + r * t->fieldcount, t->fieldcount))
				continue;
			if (vt->nkeys == cap) {
				struct kb_vkey *g;

				cap = cap ? cap * 2 : 4096;
				if (!(g = realloc(vt->keys,
						  cap * sizeof(*g)))) {
					vtable_free(vt);
					return -1;
				}
				vt->keys = g;
			}
			vt->keys[vt->nkeys++] = (struct kb_vkey){
			    {0, t->first + c * FST_CHUNK + r}, 0, 0};
		}
	}
	return 0;
}
