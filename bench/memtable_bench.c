/* memtable_bench.c - how fast the memtable (kvd/store/memtable.h) takes
 * writes and answers reads, beside an LMDB read-only transaction's gets on
 * the same keys in the same run: the two layers a read goes through.
 *
 * Usage: memtable_bench [keys [rounds [expect [ahead]]]]
 *   (defaults: 1000000 keys, 3 rounds, expect 64 MiB, ahead 0)
 * expect is the memtable's kvm_opts.expect_bytes, as kvd passes its
 * memtable-size (default 64 MiB); 0 starts the hash index small.  ahead:
 * the inserts call kvm_prefetch that many keys ahead, as kvd's committer
 * does for a batch (8); 0 inserts without it.
 * Keys are 16 bytes (hex of a mixed counter, so in no particular order),
 * values 100 bytes.  Each round inserts every key into a new memtable, then
 * gets every key in another order from the memtable and from LMDB
 * (interleaved), then walks both in key order.  The best round is printed.
 * The LMDB environment lives in a temporary directory, removed at exit.
 * Not a test: nothing here is asserted but that every key is found.
 */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memtable.h"

#define KLEN 16
#define VLEN 100

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void make_key(char *k, uint64_t i)
{
	char tmp[KLEN + 1];

	snprintf(tmp, sizeof(tmp), "%016llx", (unsigned long long)mix(i));
	memcpy(k, tmp, KLEN);
}

struct best {
	double put, get, walk, lget, lwalk;
};

static void keep(double *best, double rate)
{
	if (rate > *best)
		*best = rate;
}

static size_t expect = 64u << 20;
static size_t ahead;

static int bench_memtable(const char *keys, const uint32_t *order, size_t n,
			  struct best *b, size_t *bytes)
{
	struct kvm_opts o = {.expect_bytes = expect};
	uint8_t val[VLEN];
	struct kvm *m;
	struct kvm_entry e;
	struct kvm_iter it;
	size_t found = 0, walked = 0;
	double t;

	memset(val, 'v', sizeof(val));
	if (kvm_create(&o, &m))
		return -1;
	t = now();
	for (size_t i = 0; i < n; i++) {
		if (ahead && i + ahead < n)
			kvm_prefetch(m, keys + (i + ahead) * KLEN, KLEN);
		if (kvm_put(m, keys + i * KLEN, KLEN, val, VLEN, 0, i + 1, 0))
			goto fail;
		if (i % 64 == 63) /* batches, as a committer's */
			kvm_publish(m);
	}
	kvm_publish(m);
	keep(&b->put, n / (now() - t));
	t = now();
	for (size_t i = 0; i < n; i++)
		found +=
		    kvm_get(m, keys + order[i] * KLEN, KLEN, &e) == KVM_VALUE;
	keep(&b->get, n / (now() - t));
	t = now();
	kvm_iter_init(&it, m);
	for (int ok = kvm_iter_seek(&it, NULL, 0); ok; ok = kvm_iter_next(&it))
		walked++;
	kvm_iter_fini(&it);
	keep(&b->walk, n / (now() - t));
	*bytes = kvm_bytes(m);
	kvm_destroy(m);
	return found == n && walked == n ? 0 : -1;
fail:
	kvm_destroy(m);
	return -1;
}

static int lmdb_load(MDB_env *env, MDB_dbi *dbi, const char *keys, size_t n)
{
	uint8_t val[VLEN];
	MDB_txn *txn;

	memset(val, 'v', sizeof(val));
	if (mdb_txn_begin(env, NULL, 0, &txn) ||
	    mdb_dbi_open(txn, NULL, 0, dbi))
		return -1;
	for (size_t i = 0; i < n; i++) {
		MDB_val k = {KLEN, (void *)(keys + i * KLEN)}, v = {VLEN, val};

		if (mdb_put(txn, *dbi, &k, &v, 0)) {
			mdb_txn_abort(txn);
			return -1;
		}
	}
	return mdb_txn_commit(txn) ? -1 : 0;
}

static int bench_lmdb(MDB_env *env, MDB_dbi dbi, const char *keys,
		      const uint32_t *order, size_t n, struct best *b)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	size_t found = 0, walked = 0;
	double t;

	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))
		return -1;
	t = now();
	for (size_t i = 0; i < n; i++) {
		k.mv_size = KLEN;
		k.mv_data = (void *)(keys + order[i] * KLEN);
		found += mdb_get(txn, dbi, &k, &v) == 0;
	}
	keep(&b->lget, n / (now() - t));
	t = now();
	if (mdb_cursor_open(txn, dbi, &cur) == 0) {
		for (int r = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !r;
		     r = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			walked++;
		mdb_cursor_close(cur);
	}
	keep(&b->lwalk, n / (now() - t));
	mdb_txn_abort(txn);
	return found == n && walked == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	char dir[] = "/tmp/memtable_bench.XXXXXX", path[64];
	struct best b = {0};
	MDB_env *env = NULL;
	MDB_dbi dbi;
	char *keys = malloc(n * KLEN);
	uint32_t *order = malloc(n * sizeof(*order));
	size_t bytes = 0;
	int rc = 1;

	if (argc > 3)
		expect = strtoull(argv[3], NULL, 0);
	if (argc > 4)
		ahead = strtoul(argv[4], NULL, 0);
	if (!keys || !order || !n || rounds < 1 || !mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < n; i++) {
		make_key(keys + i * KLEN, i);
		order[i] = (uint32_t)i;
	}
	for (size_t i = n - 1; i > 0; i--) { /* another order for the gets */
		size_t j = mix(i + n) % (i + 1);
		uint32_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	/* Loading is set-up, not measured: NOSYNC is fine here. */
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 4ull << 30) ||
	    mdb_env_open(env, dir, MDB_NOSYNC, 0600) ||
	    lmdb_load(env, &dbi, keys, n))
		goto out;
	for (int r = 0; r < rounds; r++)
		if (bench_memtable(keys, order, n, &b, &bytes) ||
		    bench_lmdb(env, dbi, keys, order, n, &b))
			goto out;
	printf("%zu keys of %d bytes, values of %d bytes, best of %d rounds, "
	       "expect_bytes %zu\n",
	       n, KLEN, VLEN, rounds, expect);
	printf("memtable insert      %12.0f /s  (arena %.1f MiB, %.0f B/key)\n",
	       b.put, bytes / 1048576.0, (double)bytes / n);
	printf("memtable get         %12.0f /s\n", b.get);
	printf("lmdb ro-txn get      %12.0f /s\n", b.lget);
	printf("memtable iterate     %12.0f keys/s\n", b.walk);
	printf("lmdb cursor iterate  %12.0f keys/s\n", b.lwalk);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "memtable_bench: failed\n");
	if (env)
		mdb_env_close(env);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lock.mdb", dir);
	unlink(path);
	rmdir(dir);
	free(keys);
	free(order);
	return rc;
}
