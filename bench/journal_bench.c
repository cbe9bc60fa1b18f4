/* journal_bench.c - what a durable write costs on this disk: journal
 * appends of 100-byte records, one fdatasync per batch of 1 and of 64,
 * against one LMDB put per fully synced write transaction (what every
 * acknowledged write waits for before the journal), in the same directory
 * and the same run; then 1 KiB writes to one pre-written file, each
 * followed by its fdatasync, from 1, 2 and 4 threads at once (does the
 * device take flushes in parallel?  What a second flush in flight per
 * journal could give); then one 4 KiB durable write at a time by five
 * methods (a buffered write and fdatasync, as the journal does, against
 * O_DSYNC, RWF_DSYNC, O_DIRECT with fdatasync, O_DIRECT with O_DSYNC: is
 * there a cheaper flush on this device?).  A measurement tool, not a
 * test: nothing is asserted.
 *
 *   journal_bench DIR [SECONDS]      (DIR is created; SECONDS per mode, 2)
 */
#define _GNU_SOURCE /* O_DIRECT, pwritev2 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"

#define VALUE 100

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Batches of `batch` PUT records (16-byte key, 100-byte value), each
 * batch one append and one fdatasync, for `secs` seconds. */
static int bench_journal(const char *dir, unsigned batch, double secs)
{
	struct kvj_opts o = {.shard_id = 0};
	struct kvj_rec r[64];
	char keys[64][16], val[VALUE];
	unsigned long long n = 0, syncs = 0;
	struct kvj *j;
	double t0, t = 0;
	int rc;

	rc = kvj_open(dir, &o, 0, NULL, NULL, NULL, &j);
	if (rc < 0) {
		fprintf(stderr, "kvj_open %s: %s\n", dir, kvj_strerror(rc));
		return rc;
	}
	memset(val, 'v', sizeof(val));
	t0 = now();
	do {
		for (unsigned i = 0; i < batch; i++) {
			snprintf(keys[i], sizeof(keys[i]), "key:%011llu",
				 n + i);
			r[i] = (struct kvj_rec){.type = KVJ_PUT,
						.key = keys[i],
						.klen = 15,
						.val = val,
						.vlen = VALUE};
		}
		rc = kvj_append_recs(j, r, batch, NULL);
		if (rc == 0)
			rc = kvj_sync(j);
		if (rc < 0)
			break;
		n += batch;
		syncs++;
		t = now() - t0;
	} while (t < secs);
	kvj_close(j);
	if (rc < 0) {
		fprintf(stderr, "journal: %s\n", kvj_strerror(rc));
		return rc;
	}
	printf("journal batch %2u: %9.0f appends/s %7.0f fsyncs/s "
	       "(%llu records in %.2f s)\n",
	       batch, n / t, syncs / t, n, t);
	return 0;
}

/* One put per write transaction, each commit fully synced (LMDB's
 * defaults), for `secs` seconds. */
static int bench_lmdb(const char *dir, double secs)
{
	char key[16], val[VALUE];
	unsigned long long n = 0;
	MDB_env *env = NULL;
	MDB_dbi dbi;
	MDB_txn *txn;
	double t0, t = 0;
	int rc;

	memset(val, 'v', sizeof(val));
	rc = mdb_env_create(&env);
	if (rc == 0)
		rc = mdb_env_set_mapsize(env, 1ull << 30);
	if (rc == 0)
		rc = mdb_env_open(env, dir, 0, 0600);
	if (rc == 0 && (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
		rc = mdb_dbi_open(txn, NULL, 0, &dbi);
		rc = rc ? rc : mdb_txn_commit(txn);
	}
	t0 = now();
	while (rc == 0) {
		MDB_val k = {15, key}, v = {VALUE, val};

		snprintf(key, sizeof(key), "key:%011llu", n);
		rc = mdb_txn_begin(env, NULL, 0, &txn);
		if (rc == 0 && (rc = mdb_put(txn, dbi, &k, &v, 0)) == 0)
			rc = mdb_txn_commit(txn);
		else if (rc)
			break;
		n++;
		t = now() - t0;
		if (t >= secs)
			break;
	}
	if (env)
		mdb_env_close(env);
	if (rc) {
		fprintf(stderr, "lmdb: %s\n", mdb_strerror(rc));
		return -1;
	}
	printf("lmdb put+commit : %9.0f commits/s (%llu in %.2f s)\n", n / t, n,
	       t);
	return 0;
}

/* Each flusher thread writes 1 KiB at a time into its own region of one
 * pre-written file (no size change, as a journal segment) and flushes
 * after each write. */
#define FLUSH_REGION (32u << 20)

struct flusher {
	pthread_t t;
	int fd;
	unsigned idx;
	double secs;
	unsigned long long n;
	double ran; /* seconds it ran */
	int err;
};

static void *flusher_main(void *arg)
{
	struct flusher *f = arg;
	char buf[1024];
	off_t off = (off_t)f->idx * FLUSH_REGION;
	double t0 = now();
	off_t end = off + FLUSH_REGION - (off_t)sizeof(buf);

	memset(buf, 'j', sizeof(buf));
	while (now() - t0 < f->secs && off <= end) {
		if (pwrite(f->fd, buf, sizeof(buf), off) != sizeof(buf) ||
		    fdatasync(f->fd) < 0) {
			f->err = errno;
			break;
		}
		off += sizeof(buf);
		f->n++;
	}
	f->ran = now() - t0;
	return NULL;
}

static int bench_flushers(const char *path, unsigned nthr, double secs)
{
	static char zero[1 << 20];
	struct flusher f[4];
	unsigned long long n = 0;
	double t = 0;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), rc = 0;

	if (fd < 0 || nthr > 4) {
		perror(path);
		return -1;
	}
	for (unsigned i = 0; i < nthr * (FLUSH_REGION >> 20); i++)
		if (write(fd, zero, sizeof(zero)) != sizeof(zero))
			rc = -1;
	if (rc || fsync(fd) < 0) {
		perror(path);
		close(fd);
		return -1;
	}
	for (unsigned i = 0; i < nthr; i++) {
		f[i] = (struct flusher){.fd = fd, .idx = i, .secs = secs};
		pthread_create(&f[i].t, NULL, flusher_main, &f[i]);
	}
	for (unsigned i = 0; i < nthr; i++) {
		pthread_join(f[i].t, NULL);
		n += f[i].n;
		if (f[i].ran > t)
			t = f[i].ran;
		if (f[i].err)
			rc = -1;
	}
	close(fd);
	unlink(path);
	if (rc) {
		fprintf(stderr, "flushers: a write or flush failed\n");
		return rc;
	}
	printf("fdatasync x%u    : %9.0f flushes/s %7.1f us each "
	       "(%llu in %.2f s)\n",
	       nthr, n / t, t * 1e6 * nthr / (double)(n ? n : 1), n, t);
	return 0;
}

/* The ways to make one write durable, as bench_methods tries them. */
enum { M_FDATASYNC, M_ODSYNC, M_RWF_DSYNC, M_DIRECT, M_DIRECT_DSYNC, M_N };

static const char *const method_name[M_N] = {
    "write+fdatasync", "O_DSYNC write", "RWF_DSYNC pwritev2",
    "O_DIRECT+fdatasync", "O_DIRECT|O_DSYNC"};

static int durable_write(int fd, int m, const char *buf, off_t off)
{
	struct iovec v = {(void *)buf, 4096};

	if (m == M_RWF_DSYNC)
		return pwritev2(fd, &v, 1, off, RWF_DSYNC) == 4096 ? 0 : -1;
	if (pwrite(fd, buf, 4096, off) != 4096)
		return -1;
	if (m == M_FDATASYNC || m == M_DIRECT)
		return fdatasync(fd);
	return 0;
}

/* One thread, 4 KiB at a time (aligned, as O_DIRECT needs) through a
 * pre-written 32 MiB file, each write durable before the next. */
static int bench_methods(const char *path, double secs)
{
	static const int flags[M_N] = {0, O_DSYNC, 0, O_DIRECT,
				       O_DIRECT | O_DSYNC};
	char *buf = aligned_alloc(4096, 1 << 20);
	int rc = buf ? 0 : -1, fd;

	if (rc == 0) {
		memset(buf, 0, 1 << 20);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		for (unsigned i = 0; fd >= 0 && i < (FLUSH_REGION >> 20); i++)
			if (write(fd, buf, 1 << 20) != 1 << 20)
				rc = -1;
		if (fd < 0 || fsync(fd) < 0)
			rc = -1;
		if (fd >= 0 && close(fd) < 0)
			rc = -1;
	}
	memset(buf, 'd', 4096);
	for (int m = 0; m < M_N && rc == 0; m++) {
		unsigned long long n = 0;
		double t0 = now(), t;
		off_t off = 0;

		fd = open(path, O_RDWR | flags[m]);
		if (fd < 0) {
			rc = -1;
			break;
		}
		do {
			rc = durable_write(fd, m, buf, off);
			off = (off + 4096) % FLUSH_REGION;
			n++;
			t = now() - t0;
		} while (rc == 0 && t < secs);
		close(fd);
		if (rc == 0)
			printf("%-19s: %7.1f us per durable 4 KiB write "
			       "(%llu in %.2f s)\n",
			       method_name[m], t * 1e6 / (double)n, n, t);
	}
	if (rc)
		perror(path);
	unlink(path);
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	char path[4096];
	double secs = argc > 2 ? atof(argv[2]) : 2.0;
	int rc = 0;

	if (argc < 2 || secs <= 0) {
		fprintf(stderr, "usage: %s DIR [SECONDS]\n", argv[0]);
		return 2;
	}
	if (mkdir(argv[1], 0700) < 0 && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	for (unsigned b = 1; b <= 64 && rc == 0; b *= 64) {
		snprintf(path, sizeof(path), "%s/journal-b%u", argv[1], b);
		mkdir(path, 0700);
		rc = bench_journal(path, b, secs);
	}
	snprintf(path, sizeof(path), "%s/lmdb", argv[1]);
	mkdir(path, 0700);
	if (rc == 0)
		rc = bench_lmdb(path, secs);
	snprintf(path, sizeof(path), "%s/flush", argv[1]);
	for (unsigned t = 1; t <= 4 && rc == 0; t *= 2)
		rc = bench_flushers(path, t, secs);
	if (rc == 0)
		rc = bench_methods(path, secs);
	return rc ? 1 : 0;
}
