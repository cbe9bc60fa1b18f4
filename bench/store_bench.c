/* store_bench.c - the storage engine alone (kvd/store/store.h), without
 * the network: puts through the committers (group commit), gets and scans
 * through readers, from the memtables and then from LMDB, and the
 * checkpoint that moves one to the other.  It links kvstore and the log
 * (kvlog) and nothing else of the server, as any user of store.h may.
 *
 * Usage: store_bench [--keys N] [--shards S] [--value BYTES]
 *                    [--threads T] [--window W] [--async] [--dir DIR]
 *   (defaults: 200000 keys, 2 shards, 100-byte values, 4 threads, 64
 *   writes in flight per thread, durability sync, a temporary directory
 *   under $TMPDIR, removed at exit)
 *
 * Keys are 16 bytes (hex of a mixed counter: in no order), routed as kvd
 * routes them (XXH3_64bits(key) % S, kvd/net/router.h).  Phases, each timed:
 *   put         T threads each keep W one-key PUTs in flight at the
 *               committers, as T pipelining clients would; every reply
 *               must be KV_OK.  Commits and writes per commit are the
 *               committers' own counters.
 *   get memtable  T threads, each with its own reader, get every key in
 *               another order; the reader is reset every 64 gets (an io
 *               thread resets at the end of each loop turn).
 *   scan memtable one reader walks every key in order, 1,000 a call.
 *   checkpoint  SAVE's request on every shard: everything acknowledged
 *               written to LMDB in synced transactions.
 *   get lmdb, scan lmdb  the same reads once the memtables are empty.
 * Every key must be found by each get and seen once by each scan, in
 * order: anything else exits 1 (ctest runs a small instance, bench_store).
 * Figures are printed, never asserted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "kv_status.h"
#include "store.h"

#define KLEN 16

static unsigned nkeys = 200000, nshards = 2, vlen = 100, nthreads = 4;
static unsigned window = 64;
static int async_mode;
static char dir[512];
static int made_dir;
static struct kvd_store *st;
static struct kvd_commit *com;
static char *keys; /* nkeys x KLEN */

static void die(const char *what)
{
	fprintf(stderr, "store_bench: %s\n", what);
	exit(1);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static const char *key(unsigned i)
{
	return keys + (size_t)i * KLEN;
}

static unsigned shard_of(const void *k)
{
	return (unsigned)(XXH3_64bits(k, KLEN) % kvd_store_nshards(st));
}

static double secs(uint64_t t0)
{
	return (double)(kvd_mono_ns() - t0) / 1e9;
}

static void report(const char *what, uint64_t n, double s, const char *tail)
{
	printf("%-18s %9llu in %7.3f s  %12.0f /s%s\n", what,
	       (unsigned long long)n, s, s > 0 ? (double)n / s : 0.0, tail);
}

/* ===================== Writers ===================== */

/* One writer thread: its requests, and those the committers handed back. */
struct writer {
	pthread_t thread;
	unsigned first, end; /* its keys */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kvd_wreq *done; /* handed back, not yet seen */
	int failed;
};

/* The committers' complete hook: any thread. */
static void complete(void *arg, struct kvd_wreq *w)
{
	struct writer *wr = w->io;

	(void)arg;
	pthread_mutex_lock(&wr->mu);
	w->next = wr->done;
	wr->done = w;
	pthread_cond_signal(&wr->cv);
	pthread_mutex_unlock(&wr->mu);
}

static struct kvd_wreq *wreq_new(struct writer *wr, size_t payload)
{
	struct kvd_wreq *w = calloc(1, sizeof(*w) + payload);

	if (!w)
		die("out of memory");
	w->io = wr;
	w->cap = (uint32_t)payload;
	return w;
}

/* A one-key PUT of key i, its value the key's bytes repeated. */
static void fill_put(struct kvd_wreq *w, unsigned i)
{
	uint16_t kn = KLEN;
	uint32_t vn = vlen;
	uint8_t *p = w->data;

	memset(&w->op, 0, sizeof(w->op));
	w->shard = (uint16_t)shard_of(key(i));
	w->op.kind = KVD_W_PUT;
	w->op.nitems = 1;
	memcpy(p, &kn, 2);
	memcpy(p + 2, &vn, 4);
	memcpy(p + KVD_ITEM_HDR, key(i), KLEN);
	for (uint32_t j = 0; j < vn; j++)
		p[KVD_ITEM_HDR + KLEN + j] = (uint8_t)key(i)[j % KLEN];
	w->op.items = p;
	w->op.items_len = KVD_ITEM_HDR + KLEN + vn;
}

/* Wait for at least one request back; the list of those back. */
static struct kvd_wreq *wait_back(struct writer *wr)
{
	struct kvd_wreq *w;

	pthread_mutex_lock(&wr->mu);
	while (!wr->done)
		pthread_cond_wait(&wr->cv, &wr->mu);
	w = wr->done;
	wr->done = NULL;
	pthread_mutex_unlock(&wr->mu);
	return w;
}

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	struct kvd_wreq *free_list = NULL;
	unsigned next = wr->first, out = 0;

	for (unsigned i = 0; i < window; i++) {
		struct kvd_wreq *w = wreq_new(wr, KVD_ITEM_HDR + KLEN + vlen);

		w->next = free_list;
		free_list = w;
	}
	while (next < wr->end || out) {
		struct kvd_wreq *w;

		while (free_list && next < wr->end) {
			w = free_list;
			free_list = w->next;
			fill_put(w, next++);
			kvd_committer_submit(com, w);
			out++;
		}
		/* what a loop turn's end does: hand the turn's writes over */
		kvd_committer_flush(com);
		for (w = wait_back(wr); w;) {
			struct kvd_wreq *n = w->next;

			if (w->op.status != KV_OK)
				wr->failed = w->op.status;
			w->next = free_list;
			free_list = w;
			out--;
			w = n;
		}
	}
	while (free_list) {
		struct kvd_wreq *n = free_list->next;

		free(free_list);
		free_list = n;
	}
	return NULL;
}

static uint64_t commits_total(void)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < kvd_store_nshards(st); i++)
		n += kvd_read(&kvd_commit_stats(com, i)->commits);
	return n;
}

static void bench_put(void)
{
	struct writer *wr = calloc(nthreads, sizeof(*wr));
	uint64_t c0 = commits_total(), t0 = kvd_mono_ns(), commits;
	char tail[96];
	double s;

	if (!wr)
		die("out of memory");
	for (unsigned t = 0; t < nthreads; t++) {
		wr[t].first = (unsigned)((uint64_t)nkeys * t / nthreads);
		wr[t].end = (unsigned)((uint64_t)nkeys * (t + 1) / nthreads);
		pthread_mutex_init(&wr[t].mu, NULL);
		pthread_cond_init(&wr[t].cv, NULL);
		if (pthread_create(&wr[t].thread, NULL, writer_main, &wr[t]))
			die("cannot start a writer");
	}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(wr[t].thread, NULL);
		if (wr[t].failed)
			die(kv_status_text(wr[t].failed));
	}
	s = secs(t0);
	commits = commits_total() - c0;
	snprintf(tail, sizeof(tail), "  (%llu commits, %.1f writes each)",
		 (unsigned long long)commits,
		 commits ? (double)nkeys / (double)commits : 0.0);
	report("put", nkeys, s, tail);
	free(wr);
}

/* ===================== Readers ===================== */

struct getter {
	pthread_t thread;
	unsigned seed;
	uint64_t missing;
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;
	struct kvd_reader *r = kvd_reader_new(st);

	if (!r)
		die("out of memory for a reader");
	for (unsigned n = 0; n < nkeys; n++) {
		/* every key once, in an order of this thread's own */
		unsigned i =
		    (unsigned)(((uint64_t)n * 2654435761u + g->seed) % nkeys);
		struct kv_slice v;

		if (kvd_reader_get(r, shard_of(key(i)), key(i), KLEN,
				   kvd_now_ms(), &v) != KV_OK ||
		    v.n != vlen ||
		    memcmp(v.p, key(i), KLEN < vlen ? KLEN : vlen))
			g->missing++;
		if (n % 64 == 63)
			kvd_reader_reset(r);
	}
	kvd_reader_free(r);
	return NULL;
}

static void bench_get(const char *what)
{
	struct getter *g = calloc(nthreads, sizeof(*g));
	uint64_t t0 = kvd_mono_ns(), missing = 0;

	if (!g)
		die("out of memory");
	for (unsigned t = 0; t < nthreads; t++) {
		g[t].seed = 7919u * (t + 1);
		if (pthread_create(&g[t].thread, NULL, getter_main, &g[t]))
			die("cannot start a reader");
	}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(g[t].thread, NULL);
		missing += g[t].missing;
	}
	report(what, (uint64_t)nkeys * nthreads, secs(t0), "");
	free(g);
	if (missing) {
		fprintf(stderr,
			"store_bench: %llu gets did not find their key\n",
			(unsigned long long)missing);
		exit(1);
	}
}

struct walk {
	char last[KLEN];
	uint64_t n;
	int disorder;
};

static int walk_one(void *arg, struct kv_slice k, struct kv_slice v,
		    unsigned type, uint64_t exp)
{
	struct walk *w = arg;

	(void)exp;
	if (k.n != KLEN || v.n != vlen || type != KVD_VT_PLAIN ||
	    (w->n && memcmp(w->last, k.p, KLEN) >= 0))
		w->disorder = 1;
	memcpy(w->last, k.p, KLEN);
	w->n++;
	return 0;
}

static void bench_scan(const char *what)
{
	struct kvd_reader *r = kvd_reader_new(st);
	struct kvd_scan sc = {.limit = 1000, .max_bytes = 1u << 20};
	struct walk w = {0};
	uint64_t t0 = kvd_mono_ns();
	char start[KLEN];

	if (!r)
		die("out of memory for a reader");
	for (;;) {
		struct kv_slice next;

		if (kvd_reader_scan(r, &sc, kvd_now_ms(), walk_one, &w, &next))
			die("a scan failed");
		if (!next.n)
			break;
		/* next points into the snapshot: keep it past the reset */
		memcpy(start, next.p, next.n < KLEN ? next.n : KLEN);
		sc.start.p = (const uint8_t *)start;
		sc.start.n = next.n < KLEN ? next.n : KLEN;
		kvd_reader_reset(r);
	}
	kvd_reader_free(r);
	report(what, w.n, secs(t0), "");
	if (w.n != nkeys || w.disorder) {
		fprintf(stderr, "store_bench: the scan saw %llu keys of %u%s\n",
			(unsigned long long)w.n, nkeys,
			w.disorder ? ", out of order" : "");
		exit(1);
	}
}

/* ===================== Checkpoint ===================== */

static void bench_checkpoint(void)
{
	unsigned n = kvd_store_nshards(st);
	struct writer wr = {0};
	uint64_t t0 = kvd_mono_ns(), bytes = (uint64_t)nkeys * (KLEN + vlen);
	unsigned back = 0;
	char tail[64];
	double s;

	pthread_mutex_init(&wr.mu, NULL);
	pthread_cond_init(&wr.cv, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct kvd_wreq *w = wreq_new(&wr, 0);

		w->shard = (uint16_t)i;
		w->op.kind = KVD_W_CHECKPOINT;
		kvd_committer_submit(com, w);
	}
	kvd_committer_flush(com);
	while (back < n)
		for (struct kvd_wreq *w = wait_back(&wr); w; back++) {
			struct kvd_wreq *next = w->next;

			if (w->op.status != KV_OK)
				die(kv_status_text(w->op.status));
			free(w);
			w = next;
		}
	s = secs(t0);
	snprintf(tail, sizeof(tail), "  keys (%.1f MB/s of keys and values)",
		 s > 0 ? (double)bytes / s / 1e6 : 0.0);
	report("checkpoint", nkeys, s, tail);
}

/* ===================== Setup ===================== */

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

static void cleanup(void)
{
	if (made_dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void options(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"keys", required_argument, NULL, 'k'},
	    {"shards", required_argument, NULL, 's'},
	    {"value", required_argument, NULL, 'v'},
	    {"threads", required_argument, NULL, 't'},
	    {"window", required_argument, NULL, 'w'},
	    {"async", no_argument, NULL, 'a'},
	    {"dir", required_argument, NULL, 'd'},
	    {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': nkeys = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': nshards = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'v': vlen = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': nthreads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': window = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'a': async_mode = 1; break;
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		default:
			fprintf(stderr,
				"usage: store_bench [--keys N] [--shards S] "
				"[--value BYTES] [--threads T] [--window W] "
				"[--async] [--dir DIR]\n");
			exit(2);
		}
	}
	if (!nkeys || !nshards || nshards > KVD_MAX_SHARDS || !nthreads ||
	    !window || vlen < KLEN || vlen > (1u << 20)) {
		fprintf(stderr,
			"store_bench: keys, shards (1-%u), threads "
			"and window at least 1, value 16 bytes to 1 "
			"MiB\n",
			KVD_MAX_SHARDS);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	static unsigned reap_ms = 100, flush_ms = 1000;
	struct kvd_store_opts so = {0};
	struct kvd_commit_opts co = {0};
	char err[512];

	options(argc, argv);
	if (!dir[0]) {
		const char *base = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/store-bench-XXXXXX",
			 base && base[0] == '/' ? base : "/tmp");
		if (!mkdtemp(dir))
			die(strerror(errno));
		made_dir = 1;
		atexit(cleanup);
	}
	if (!(keys = malloc((size_t)nkeys * KLEN)))
		die("out of memory");
	for (unsigned i = 0; i < nkeys; i++) {
		char tmp[KLEN + 1];

		snprintf(tmp, sizeof(tmp), "%016llx",
			 (unsigned long long)mix(i));
		memcpy(keys + (size_t)i * KLEN, tmp, KLEN);
	}
	so.dir = dir;
	so.want_shards = nshards;
	so.map_size = 4ull << 30;
	so.max_readers = nthreads + 126;
	if (kvd_store_open(&st, &so, err, sizeof(err)))
		die(err);
	co.store = st;
	co.async = async_mode;
	co.max_value = 1u << 20;
	co.reap_interval_ms = &reap_ms;
	co.flush_interval_ms = &flush_ms;
	co.start_ms = kvd_now_ms();
	co.hooks.complete = complete;
	if (kvd_committers_start(&com, &co))
		die("cannot start the committers");
	printf("store_bench: %u shards, %u keys of %u bytes, values of %u "
	       "bytes, durability %s, %u threads, %u writes in flight each\n",
	       kvd_store_nshards(st), nkeys, KLEN, vlen,
	       async_mode ? "async" : "sync", nthreads, window);
	bench_put();
	bench_get("get memtable");
	bench_scan("scan memtable");
	bench_checkpoint();
	bench_get("get lmdb");
	bench_scan("scan lmdb");
	kvd_committers_stop(com);
	kvd_store_close(st);
	free(keys);
	return 0;
}
