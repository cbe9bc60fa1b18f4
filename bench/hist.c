/* hist.c - kvbench's latency histogram: merging, percentiles, and the
 * HdrHistogram text format.  Recording is inline in hist.h. */
#include "hist.h"

#include <math.h>
#include <string.h>

void hist_reset(struct kb_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void hist_add(struct kb_hist *dst, const struct kb_hist *src)
{
	uint64_t mn = HIST_LOAD(src->min), mx = HIST_LOAD(src->max);

	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->counts[i] += HIST_LOAD(src->counts[i]);
	dst->count += HIST_LOAD(src->count);
	dst->sum += HIST_LOAD(src->sum);
	if (mn < dst->min)
		dst->min = mn;
	if (mx > dst->max)
		dst->max = mx;
}

uint64_t hist_bucket_low(unsigned i)
{
	unsigned shift;

	if (i < 2 * HIST_HALF)
		return i;
	shift = i / HIST_HALF - 1;
	return (uint64_t)(i - shift * HIST_HALF) << shift;
}

uint64_t hist_bucket_high(unsigned i)
{
	unsigned shift = i < 2 * HIST_HALF ? 0 : i / HIST_HALF - 1;

	return hist_bucket_low(i) + (1ull << shift) - 1;
}

/* Rank (1-based) of the value at percentile p. */
static uint64_t rank_of(uint64_t count, double p)
{
	double r = ceil(p / 100.0 * (double)count);

	if (r < 1)
		r = 1;
	if (r > (double)count)
		r = (double)count;
	return (uint64_t)r;
}

uint64_t hist_percentile(const struct kb_hist *h, double p)
{
	uint64_t want, seen = 0;

	if (h->count == 0)
		return 0;
	if (p >= 100.0)
		return h->max;
	want = rank_of(h->count, p);
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= want) {
			uint64_t v = hist_bucket_high(i);
			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

double hist_mean(const struct kb_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

static double hist_stddev(const struct kb_hist *h)
{
	double mean = hist_mean(h), acc = 0;

	if (h->count == 0)
		return 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		double mid, d;

		if (!h->counts[i])
			continue;
		mid =
		    ((double)hist_bucket_low(i) + (double)hist_bucket_high(i)) /
		    2.0;
		d = mid - mean;
		acc += d * d * (double)h->counts[i];
	}
	return sqrt(acc / (double)h->count);
}

/* HdrHistogram's percentile iterator: ticks_per_half reporting steps each
 * time the remaining distance to 100% halves, so the tail gets as many
 * lines as the body. */
static double next_percentile(double pct, unsigned ticks_per_half)
{
	double ticks =
	    ticks_per_half * pow(2.0, floor(log2(100.0 / (100.0 - pct))) + 1.0);

	return pct + 100.0 / ticks;
}

void hist_print_hdr(FILE *f, const struct kb_hist *h, unsigned ticks_per_half)
{
	uint64_t seen = 0;
	unsigned i = 0;
	double pct = 0.0;

	fprintf(f, "%12s %14s %10s %14s\n\n", "Value", "Percentile",
		"TotalCount", "1/(1-Percentile)");
	while (h->count && i < HIST_BUCKETS) {
		uint64_t want = rank_of(h->count, pct), v;

		while (i < HIST_BUCKETS && seen + h->counts[i] < want)
			seen += h->counts[i++];
		if (i == HIST_BUCKETS)
			break;
		v = hist_bucket_high(i);
		if (v > h->max)
			v = h->max;
		if (seen + h->counts[i] >= h->count) {
			fprintf(f, "%12.3f %14.12f %10llu %14s\n", v / 1e6, 1.0,
				(unsigned long long)h->count, "inf");
			break;
		}
		fprintf(f, "%12.3f %14.12f %10llu %14.2f\n", v / 1e6,
			pct / 100.0, (unsigned long long)(seen + h->counts[i]),
			100.0 / (100.0 - pct));
		pct = next_percentile(pct, ticks_per_half);
	}
	fprintf(f, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n",
		hist_mean(h) / 1e6, hist_stddev(h) / 1e6);
	fprintf(f, "#[Max     = %12.3f, Total count    = %12llu]\n",
		h->max / 1e6, (unsigned long long)h->count);
	fprintf(f, "#[Buckets = %12u, SubBuckets     = %12u]\n",
		HIST_MAX_SHIFT + 2, HIST_HALF);
}
