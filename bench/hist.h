/* hist.h - kvbench's latency histogram: log-linear buckets, HDR style.
 *
 * Values are nanoseconds.  Below 2^B (B = HIST_SUB_BITS) every value has its
 * own bucket; above, each power of two is cut into 2^(B-1) equal buckets, so
 * the bucket width is at most 1/2^(B-1) of the value: with B = 10, every
 * reported percentile is within 0.2% of the true one, from 1 ns to 18
 * minutes, in a fixed array of 16,896 counters.  Recording is an index
 * computation and an increment: no allocation, no lock, no branch on the
 * data beyond the clamp.
 *
 * Bucket index of v: shift = max(0, msb(v) - (B - 1)),
 *                    index = shift * 2^(B-1) + (v >> shift).
 *
 * One thread records into a histogram; the progress reporter reads it from
 * another thread while it is being written.  Fields are therefore written
 * and read with relaxed atomics (plain moves on x86): a snapshot may be a
 * few operations stale or torn across buckets, never undefined.
 */
#ifndef KB_HIST_H
#define KB_HIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS 10
#define HIST_HALF (1u << (HIST_SUB_BITS - 1))
#define HIST_MAX_BITS 40 /* largest value recorded: 2^40 - 1 ns, 18 min */
#define HIST_MAX_SHIFT (HIST_MAX_BITS - HIST_SUB_BITS)
#define HIST_BUCKETS ((HIST_MAX_SHIFT + 2) * HIST_HALF)
#define HIST_MAX_VALUE ((1ull << HIST_MAX_BITS) - 1)

struct kb_hist {
	uint64_t count;
	uint64_t sum; /* ns; overflows only after 584 years of latency */
	uint64_t min; /* UINT64_MAX while empty */
	uint64_t max;
	uint64_t counts[HIST_BUCKETS];
};

static inline unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v > HIST_MAX_VALUE)
		v = HIST_MAX_VALUE;
	msb = 63 - (unsigned)__builtin_clzll(v | 1);
	shift = msb < HIST_SUB_BITS ? 0 : msb - (HIST_SUB_BITS - 1);
	return shift * HIST_HALF + (unsigned)(v >> shift);
}

#define HIST_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define HIST_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* Record one value.  Only the owning thread calls this. */
static inline void hist_record(struct kb_hist *h, uint64_t v)
{
	unsigned i = hist_index(v);

	HIST_STORE(h->counts[i], h->counts[i] + 1);
	HIST_STORE(h->count, h->count + 1);
	HIST_STORE(h->sum, h->sum + v);
	if (v < h->min)
		HIST_STORE(h->min, v);
	if (v > h->max)
		HIST_STORE(h->max, v);
}

void hist_reset(struct kb_hist *h);

/* dst += src; src may be being written by its owner. */
void hist_add(struct kb_hist *dst, const struct kb_hist *src);

/* Lowest and highest value that land in bucket i. */
uint64_t hist_bucket_low(unsigned i);
uint64_t hist_bucket_high(unsigned i);

/* The value at percentile p (0..100]: the highest value equivalent to the
 * bucket holding the ceil(p% x count)-th smallest value, capped by the exact
 * maximum.  0 for an empty histogram. */
uint64_t hist_percentile(const struct kb_hist *h, double p);

double hist_mean(const struct kb_hist *h);

/* The full distribution in HdrHistogram's percentile text format
 * (Value, Percentile, TotalCount, 1/(1-Percentile)), values in
 * milliseconds, ticks_per_half halving steps per the HdrHistogram
 * convention, so HdrHistogram's plotter reads it as is. */
void hist_print_hdr(FILE *f, const struct kb_hist *h, unsigned ticks_per_half);

#endif
