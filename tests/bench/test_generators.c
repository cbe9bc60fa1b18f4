/* test_generators.c - kvbench's histogram and YCSB generators, without a
 * server: bucket arithmetic, percentile accuracy, YCSB's key hashing and
 * zeta constant, the shape of the zipfian and "latest" distributions, and
 * the acknowledged-insert window.  Exit 0 passes, 1 fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hist.h"
#include "ycsb.h"

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);        \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

/* Every bucket's bounds map back to it, and buckets tile the range. */
static void test_buckets(void)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		uint64_t lo = hist_bucket_low(i), hi = hist_bucket_high(i);

		CHECK(hist_index(lo) == i && hist_index(hi) == i,
		      "bucket %u: [%llu, %llu]", i, (unsigned long long)lo,
		      (unsigned long long)hi);
		if (i + 1 < HIST_BUCKETS)
			CHECK(hist_bucket_low(i + 1) == hi + 1,
			      "gap after bucket %u", i);
		/* Relative width stays within 1/512 above the linear part. */
		CHECK(lo < 1024 || (double)(hi - lo + 1) / (double)lo <=
				       1.0 / 512 + 1e-12,
		      "bucket %u too wide", i);
	}
	CHECK(hist_index(UINT64_MAX) == HIST_BUCKETS - 1, "clamp");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Percentiles of a wide distribution agree with the exact ones to 0.2%. */
static void test_percentiles(void)
{
	enum { N = 200000 };
	static struct kb_hist h;
	uint64_t *v = malloc(N * sizeof(*v));
	const double ps[] = {50, 90, 99, 99.9};
	struct kb_rng r;

	rng_seed(&r, 7);
	hist_reset(&h);
	for (int i = 0; i < N; i++) {
		/* log-uniform from 1 us to 1 s */
		v[i] = (uint64_t)(1000.0 * pow(1e6, rng_double(&r)));
		hist_record(&h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t exact = v[(size_t)ceil(ps[i] / 100 * N) - 1];
		uint64_t got = hist_percentile(&h, ps[i]);

		CHECK(got >= exact && (double)got <= (double)exact * 1.002,
		      "p%g: %llu, exact %llu", ps[i], (unsigned long long)got,
		      (unsigned long long)exact);
	}
	CHECK(h.max == v[N - 1] && h.min == v[0] && h.count == N,
	      "min/max/count");
	CHECK(hist_percentile(&h, 100) == v[N - 1], "p100 is the max");
	free(v);
}

/* YCSB's Utils.fnvhash64, values from its Java definition; the first is
 * the key every YCSB user has seen: user6284781860667377211. */
static void test_fnv(void)
{
	CHECK(fnvhash64(0) == 6284781860667377211ull, "fnv(0)");
	CHECK(fnvhash64(1) == 8517097267634966620ull, "fnv(1)");
	CHECK(fnvhash64(42) == 55488592825689361ull, "fnv(42)");
	CHECK(fnvhash64(1000000) == 1011632231655643464ull, "fnv(1e6)");
}

/* ScrambledZipfianGenerator's precomputed zeta(10^10, 0.99). */
static void test_zeta(void)
{
	double z = zeta(0, SCRAMBLED_ITEM_COUNT, 0.99, 0);
	double inc = zeta(1000, 5000000, 0.99, zeta(0, 1000, 0.99, 0));

	CHECK(fabs(z - SCRAMBLED_ZETAN) / SCRAMBLED_ZETAN < 1e-9,
	      "zeta(1e10) = %.14f", z);
	CHECK(fabs(inc - zeta(0, 5000000, 0.99, 0)) < 1e-9, "incremental");
}

/* ZipfianGenerator over 1000 items: item 0 has probability 1/zeta(1000),
 * item 1 2^-0.99 of that, and nothing falls outside the range. */
static void test_zipfian(void)
{
	enum { N = 1000000 };
	struct kb_zipf z;
	struct kb_rng r;
	unsigned c0 = 0, c1 = 0, out = 0;
	double p0;

	rng_seed(&r, 11);
	zipf_init(&z, 0, 999, 0.99, -1);
	p0 = 1 / z.zetan;
	for (int i = 0; i < N; i++) {
		uint64_t v = zipf_next(&z, &r, z.items);

		c0 += v == 0;
		c1 += v == 1;
		out += v > 999;
	}
	CHECK(fabs((double)c0 / N - p0) < 0.005, "P(0) %.4f vs %.4f",
	      (double)c0 / N, p0);
	CHECK(fabs((double)c1 / N - p0 * pow(0.5, 0.99)) < 0.005, "P(1)");
	CHECK(out == 0, "%u values out of range", out);
}

/* The scrambled zipfian stays in [lo, hi] and is skewed, but its hottest
 * key is not the first one (that is what the scrambling is for). */
static void test_scrambled(void)
{
	enum { N = 200000, K = 10000 };
	static unsigned count[K];
	struct kb_chooser_params p = {
	    .dist = DIST_ZIPFIAN, .lo = 0, .hi = K - 1, .zipf_theta = 0.99};
	struct kb_chooser c;
	struct kb_rng r;
	unsigned hot = 0, out = 0;

	rng_seed(&r, 5);
	chooser_init(&c, &p);
	for (int i = 0; i < N; i++) {
		uint64_t v = chooser_next(&c, &r, K - 1);

		if (v >= K)
			out++;
		else
			count[v]++;
	}
	for (unsigned k = 1; k < K; k++)
		if (count[k] > count[hot])
			hot = k;
	CHECK(out == 0, "out of range");
	CHECK(hot == fnvhash64(0) % K, "hottest key %u", hot);
	CHECK(count[hot] > N / 40, "not skewed: %u", count[hot]);
}

/* "latest" favours the newest keys: most draws within 1% of the last. */
static void test_latest(void)
{
	enum { N = 100000, K = 100000 };
	struct kb_chooser_params p = {
	    .dist = DIST_LATEST, .zipf_theta = 0.99, .latest_items = K};
	struct kb_chooser c;
	struct kb_rng r;
	unsigned near = 0, out = 0;

	rng_seed(&r, 3);
	chooser_init(&c, &p);
	for (int i = 0; i < N; i++) {
		uint64_t v = chooser_next(&c, &r, K - 1);

		out += v > K - 1;
		near += v >= K - 1 - K / 100;
	}
	CHECK(out == 0, "latest beyond the last key");
	CHECK(near > N / 3, "latest not skewed: %u", near);
}

/* Acknowledgements out of order: the limit moves only over a prefix. */
static void test_acked(void)
{
	struct kb_acked a;

	CHECK(acked_init(&a, 100) == 0, "init");
	CHECK(acked_last(&a) == 99, "start");
	for (int i = 0; i < 3; i++)
		CHECK(acked_next(&a) == 100 + (uint64_t)i, "next");
	acked_ack(&a, 101);
	acked_ack(&a, 102);
	CHECK(acked_last(&a) == 99, "gap at 100: %llu",
	      (unsigned long long)acked_last(&a));
	acked_ack(&a, 100);
	CHECK(acked_last(&a) == 102, "after 100: %llu",
	      (unsigned long long)acked_last(&a));
	acked_free(&a);
}

int main(void)
{
	test_buckets();
	test_percentiles();
	test_fnv();
	test_zeta();
	test_zipfian();
	test_scrambled();
	test_latest();
	test_acked();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
