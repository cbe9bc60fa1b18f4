/* ycsb.h - YCSB's number generators, as its core package defines them.
 *
 * Each is a faithful transcription of the Java class of the same name in
 * YCSB's site.ycsb.generator package (ZipfianGenerator,
 * ScrambledZipfianGenerator, SkewedLatestGenerator, HotspotIntegerGenerator,
 * ExponentialGenerator, AcknowledgedCounterGenerator), including its
 * quirks, because a benchmark is only comparable with YCSB's figures if it
 * draws keys the way YCSB does.  The random source is ours (xoshiro256**,
 * one per thread), so sequences match YCSB's in distribution, not value.
 */
#ifndef KB_YCSB_H
#define KB_YCSB_H

#include <pthread.h>
#include <stdint.h>

/* ---- random numbers -------------------------------------------------- */

struct kb_rng {
	uint64_t s[4];
};

void rng_seed(struct kb_rng *r, uint64_t seed);

static inline uint64_t rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna): fast, 256 bits of state, and good
 * enough in every bit that a uniform double is just its top 53 bits. */
static inline uint64_t rng_next(struct kb_rng *r)
{
	uint64_t *s = r->s, res = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return res;
}

/* Uniform in [0, 1). */
static inline double rng_double(struct kb_rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n), n > 0, without modulo bias (Lemire's method). */
uint64_t rng_below(struct kb_rng *r, uint64_t n);

/* YCSB's Utils.fnvhash64: FNV-1 over the 8 little-endian bytes, then Java's
 * Math.abs on the signed result. */
uint64_t fnvhash64(uint64_t v);

/* ---- zipfian --------------------------------------------------------- */

#define ZIPFIAN_CONSTANT 0.99
/* ScrambledZipfianGenerator draws from this many items and hashes the draw
 * into the real key range; its zeta for theta 0.99 is precomputed. */
#define SCRAMBLED_ITEM_COUNT 10000000000ull
#define SCRAMBLED_ZETAN 26.46902820178302

struct kb_zipf {
	uint64_t items, base, countforzeta;
	double theta, zeta2theta, alpha, zetan, eta;
};

/* sum_{i=st+1..n} 1/i^theta, plus initial.  Exact summation up to a few
 * million terms; beyond, Euler-Maclaurin (relative error < 1e-12), where
 * YCSB would loop for minutes. */
double zeta(uint64_t st, uint64_t n, double theta, double initial);

/* Items min..max inclusive; zetan < 0 computes it. */
void zipf_init(struct kb_zipf *z, uint64_t min, uint64_t max, double theta,
	       double zetan);

/* ZipfianGenerator.nextLong(itemcount): grows zeta incrementally when
 * itemcount grew, as SkewedLatestGenerator needs. */
uint64_t zipf_next(struct kb_zipf *z, struct kb_rng *r, uint64_t itemcount);

/* ---- key choosers: CoreWorkload's requestdistribution ------------------ */

enum kb_dist {
	DIST_UNIFORM,
	DIST_ZIPFIAN,
	DIST_LATEST,
	DIST_HOTSPOT,
	DIST_SEQUENTIAL,
	DIST_EXPONENTIAL,
	DIST_CONSTANT, /* field lengths only */
};

const char *dist_name(enum kb_dist d);
int dist_parse(const char *s, enum kb_dist *out);

struct kb_chooser {
	enum kb_dist dist;
	uint64_t lo, hi; /* inclusive */
	struct kb_zipf zipf;
	double hot_data, hot_opn; /* hotspot */
	double gamma;		  /* exponential */
	uint64_t *seq;		  /* sequential: shared by all threads */
};

struct kb_chooser_params {
	enum kb_dist dist;
	uint64_t lo, hi;
	double zipf_theta;
	double hot_data, hot_opn;
	double exp_percentile, exp_range;
	uint64_t latest_items; /* latest: the acknowledged count at start */
	uint64_t *seq;	       /* sequential: the shared counter */
};

void chooser_init(struct kb_chooser *c, const struct kb_chooser_params *p);

/* One draw.  For DIST_LATEST, last is the highest acknowledged key number
 * and the draw is last - zipfian(last); for the others it is ignored
 * (CoreWorkload does the resampling against it). */
uint64_t chooser_next(struct kb_chooser *c, struct kb_rng *r, uint64_t last);

/* ---- AcknowledgedCounterGenerator ------------------------------------ */

/* Insert key numbers are handed out in order; "latest" may only choose a
 * key once it and every key before it have been acknowledged, so a read
 * never races the insert of its key.  YCSB's sliding window of 2^20
 * flags, advanced by whichever thread gets the lock. */
#define ACKED_WINDOW (1u << 20)

struct kb_acked {
	uint64_t next;	/* atomic */
	uint64_t limit; /* atomic: highest key with every key <= it acked */
	pthread_mutex_t lock;
	uint8_t *window;
};

int acked_init(struct kb_acked *a, uint64_t start);
void acked_free(struct kb_acked *a);
uint64_t acked_next(struct kb_acked *a);
uint64_t acked_last(struct kb_acked *a);
/* 0, or -1 when more than the window is outstanding (YCSB throws). */
int acked_ack(struct kb_acked *a, uint64_t v);

#endif
