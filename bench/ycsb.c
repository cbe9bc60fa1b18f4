/* ycsb.c - YCSB's number generators (see ycsb.h for why they are copied
 * quirks and all). */
#include "ycsb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers -------------------------------------------------- */

/* splitmix64 spreads one 64-bit seed over xoshiro's 256 bits of state, as
 * its authors recommend: nearby seeds give unrelated streams. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rng_seed(struct kb_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

uint64_t rng_below(struct kb_rng *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t low = (uint64_t)m;

	if (low < n) {
		uint64_t t = -n % n;

		while (low < t) {
			m = (unsigned __int128)rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

uint64_t fnvhash64(uint64_t v)
{
	uint64_t h = 0xCBF29CE484222325ull;
	int64_t s;

	for (int i = 0; i < 8; i++) {
		h ^= v & 0xff;
		h *= 1099511628211ull;
		v >>= 8;
	}
	/* Java's Math.abs(long): Long.MIN_VALUE stays negative, and the
	 * caller's "% itemcount" then sees a negative number.  Mapping it to
	 * its two's-complement magnitude keeps the result in range; YCSB
	 * would produce a negative key there, one time in 2^64. */
	s = (int64_t)h;
	return s < 0 ? -(uint64_t)s : (uint64_t)s;
}

/* ---- zipfian --------------------------------------------------------- */

#define ZETA_EXACT 2000000ull

/* sum_{i=a..b} i^-theta for large a, by Euler-Maclaurin with the
 * Bernoulli terms up to B4; the next term is O(a^-(theta+5)). */
static double zeta_tail(double a, double b, double theta)
{
	double integral, ends, d1, d3;

	if (theta == 1.0)
		integral = log(b / a);
	else
		integral =
		    (pow(b, 1 - theta) - pow(a, 1 - theta)) / (1 - theta);
	ends = (pow(a, -theta) + pow(b, -theta)) / 2;
	d1 = -theta * (pow(b, -theta - 1) - pow(a, -theta - 1));
	d3 = -theta * (theta + 1) * (theta + 2) *
	     (pow(b, -theta - 3) - pow(a, -theta - 3));
	return integral + ends + d1 / 12 - d3 / 720;
}

double zeta(uint64_t st, uint64_t n, double theta, double initial)
{
	double sum = initial;
	uint64_t i, exact_end = n;

	if (n > st && n - st > 2 * ZETA_EXACT)
		exact_end = st + ZETA_EXACT;
	for (i = st; i < exact_end; i++)
		sum += 1 / pow((double)(i + 1), theta);
	if (exact_end < n)
		sum += zeta_tail((double)exact_end + 1, (double)n, theta);
	return sum;
}

void zipf_init(struct kb_zipf *z, uint64_t min, uint64_t max, double theta,
	       double zetan)
{
	z->items = max - min + 1;
	z->base = min;
	z->theta = theta;
	z->zeta2theta = zeta(0, 2, theta, 0);
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan >= 0 ? zetan : zeta(0, z->items, theta, 0);
	z->countforzeta = z->items;
	z->eta = (1 - pow(2.0 / (double)z->items, 1 - theta)) /
		 (1 - z->zeta2theta / z->zetan);
}

uint64_t zipf_next(struct kb_zipf *z, struct kb_rng *r, uint64_t itemcount)
{
	double u, uz;

	if (itemcount > z->countforzeta) {
		/* YCSB recomputes eta from the original item count, not the
		 * new one; kept, so "latest" skews as YCSB's does. */
		z->zetan = zeta(z->countforzeta, itemcount, z->theta, z->zetan);
		z->countforzeta = itemcount;
		z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) /
			 (1 - z->zeta2theta / z->zetan);
	}
	u = rng_double(r);
	uz = u * z->zetan;
	if (uz < 1.0)
		return z->base;
	if (uz < 1.0 + pow(0.5, z->theta))
		return z->base + 1;
	return z->base + (uint64_t)((double)itemcount *
				    pow(z->eta * u - z->eta + 1, z->alpha));
}

/* ---- key choosers ---------------------------------------------------- */

static const char *const dist_names[] = {
    [DIST_UNIFORM] = "uniform",	      [DIST_ZIPFIAN] = "zipfian",
    [DIST_LATEST] = "latest",	      [DIST_HOTSPOT] = "hotspot",
    [DIST_SEQUENTIAL] = "sequential", [DIST_EXPONENTIAL] = "exponential",
    [DIST_CONSTANT] = "constant",
};

const char *dist_name(enum kb_dist d)
{
	return dist_names[d];
}

int dist_parse(const char *s, enum kb_dist *out)
{
	for (unsigned i = 0; i < sizeof(dist_names) / sizeof(*dist_names); i++)
		if (strcmp(s, dist_names[i]) == 0) {
			*out = (enum kb_dist)i;
			return 0;
		}
	return -1;
}

void chooser_init(struct kb_chooser *c, const struct kb_chooser_params *p)
{
	memset(c, 0, sizeof(*c));
	c->dist = p->dist;
	c->lo = p->lo;
	c->hi = p->hi;
	c->hot_data = p->hot_data;
	c->hot_opn = p->hot_opn;
	c->seq = p->seq;
	switch (p->dist) {
	case DIST_ZIPFIAN:
		/* ScrambledZipfianGenerator: draw from 10^10 items with the
		 * precomputed zeta when theta is YCSB's, then hash. */
		zipf_init(&c->zipf, 0, SCRAMBLED_ITEM_COUNT, p->zipf_theta,
			  p->zipf_theta == ZIPFIAN_CONSTANT ? SCRAMBLED_ZETAN
							    : -1);
		break;
	case DIST_LATEST:
		/* SkewedLatestGenerator: new ZipfianGenerator(lastValue()). */
		zipf_init(&c->zipf, 0,
			  p->latest_items ? p->latest_items - 1 : 0,
			  p->zipf_theta, -1);
		break;
	case DIST_EXPONENTIAL:
		c->gamma = -log(1.0 - p->exp_percentile / 100.0) / p->exp_range;
		break;
	default: break;
	}
}

static uint64_t hotspot_next(struct kb_chooser *c, struct kb_rng *r)
{
	uint64_t interval = c->hi - c->lo + 1;
	uint64_t hot = (uint64_t)((double)interval * c->hot_data);
	uint64_t cold = interval - hot;

	if (rng_double(r) < c->hot_opn && hot)
		return c->lo + rng_below(r, hot);
	return c->lo + hot + (cold ? rng_below(r, cold) : 0);
}

uint64_t chooser_next(struct kb_chooser *c, struct kb_rng *r, uint64_t last)
{
	uint64_t v, n = c->hi - c->lo + 1;

	switch (c->dist) {
	case DIST_ZIPFIAN:
		v = zipf_next(&c->zipf, r, c->zipf.items);
		return c->lo + fnvhash64(v) % n;
	case DIST_LATEST: return last - zipf_next(&c->zipf, r, last);
	case DIST_HOTSPOT: return hotspot_next(c, r);
	case DIST_SEQUENTIAL:
		return c->lo +
		       __atomic_fetch_add(c->seq, 1, __ATOMIC_RELAXED) % n;
	case DIST_EXPONENTIAL:
		/* CoreWorkload subtracts this from the latest key. */
		return (uint64_t)(-log(1.0 - rng_double(r)) / c->gamma);
	case DIST_UNIFORM:
	case DIST_CONSTANT: break;
	}
	return c->lo + rng_below(r, n);
}

/* ---- AcknowledgedCounterGenerator ------------------------------------ */

int acked_init(struct kb_acked *a, uint64_t start)
{
	a->next = start;
	a->limit = start - 1; /* wraps to UINT64_MAX for 0: "none yet" */
	a->window = calloc(ACKED_WINDOW, 1);
	if (!a->window)
		return -1;
	pthread_mutex_init(&a->lock, NULL);
	return 0;
}

void acked_free(struct kb_acked *a)
{
	if (a->window)
		pthread_mutex_destroy(&a->lock);
	free(a->window);
	a->window = NULL;
}

uint64_t acked_next(struct kb_acked *a)
{
	return __atomic_fetch_add(&a->next, 1, __ATOMIC_RELAXED);
}

uint64_t acked_last(struct kb_acked *a)
{
	return __atomic_load_n(&a->limit, __ATOMIC_ACQUIRE);
}

int acked_ack(struct kb_acked *a, uint64_t v)
{
	uint8_t *slot = &a->window[v & (ACKED_WINDOW - 1)];
	uint64_t i, limit;

	if (__atomic_exchange_n(slot, 1, __ATOMIC_ACQ_REL))
		return -1;
	/* Whoever holds the lock slides the window; a thread that finds it
	 * taken leaves its flag for the holder or the next acknowledger. */
	if (pthread_mutex_trylock(&a->lock))
		return 0;
	limit = a->limit;
	for (i = limit + 1; i != limit + 1 + ACKED_WINDOW; i++) {
		uint8_t *s = &a->window[i & (ACKED_WINDOW - 1)];

		if (!__atomic_load_n(s, __ATOMIC_ACQUIRE))
			break;
		__atomic_store_n(s, 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&a->limit, i - 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&a->lock);
	return 0;
}
