/* test_journal_reader.c - the journal's reader (kvj_reader_*, what a
 * primary sends its replicas from) and kvj_reset (a replica taking a full
 * copy), against kvd/store/journal.h: reads from any LSN across segment
 * boundaries, stopping at the LSN the caller knows written; a reader in
 * one thread while another appends, flushes and recycles (only flushed
 * records are asked for and returned, every one exact); segments recycled
 * and reused under an open reader (reported, never a wrong record); a bad
 * checksum mid-stream (reported as corruption); and kvj_reset to an LSN,
 * then appends, a reopen and a reader (LSN continuity).  Threaded: run it
 * in a -DKVD_SANITIZE=thread build too.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "journaltest.h"

#define SHARD 5
#define SMALL_SEG 4096u /* a few dozen records a segment */

/* ---- the model: each LSN's payload is a function of the LSN ----------- *
 * (generation g changes it, so that records written after a reset differ
 * from the ones they replace) */

static uint32_t model_len(uint64_t lsn)
{
	return 1 + (uint32_t)(lsn * 37 % 150);
}

static void model_fill(uint64_t lsn, unsigned g, unsigned char *p)
{
	uint32_t n = model_len(lsn);

	for (uint32_t i = 0; i < n; i++)
		p[i] = (unsigned char)(lsn * 131 + i * 7 + g * 29 + 1);
}

static int model_ok(uint64_t lsn, unsigned g, uint8_t type, const void *p,
		    uint32_t len)
{
	unsigned char want[256];

	if (type != 7 + g || len != model_len(lsn))
		return 0;
	model_fill(lsn, g, want);
	return memcmp(p, want, len) == 0;
}

/* Append n records (the next LSNs, generation g) and flush them. */
static int append_sync(struct kvj *j, size_t n, unsigned g)
{
	static unsigned char data[64][256];
	struct kvj_entry e[64];
	uint64_t next = kvj_next_lsn(j);
	int rc;

	while (n > 0) {
		size_t k = n < 64 ? n : 64;

		for (size_t i = 0; i < k; i++) {
			model_fill(next + i, g, data[i]);
			e[i] = (struct kvj_entry){.type = (uint8_t)(7 + g),
						  .data = data[i],
						  .len = model_len(next + i)};
		}
		if ((rc = kvj_append(j, e, k, NULL)) < 0)
			return rc;
		next += k;
		n -= k;
	}
	return kvj_sync(j);
}

/* ---- journals ---------------------------------------------------------- */

static struct kvj *open_j(const char *dir, uint64_t ckpt)
{
	struct kvj_opts o = {
	    .segment_size = SMALL_SEG, .max_spares = 2, .shard_id = SHARD};
	struct kvj *j = NULL;
	int rc = kvj_open(dir, &o, ckpt, NULL, NULL, NULL, &j);

	CHECK(rc == 0, "kvj_open %s: %s", dir, kvj_strerror(rc));
	return j;
}

/* A new journal in root/name (its path in dir) holding records 1..n of
 * generation 0, synced; NULL when it could not be opened. */
static struct kvj *fresh_j(char *dir, size_t cap, const char *name, size_t n)
{
	struct kvj *j;

	newdir(dir, cap, name);
	if (!(j = open_j(dir, 0)))
		return NULL;
	CHECK(append_sync(j, n, 0) == 0, "append");
	return j;
}

/* Read from..upto with a new reader and check every record against the
 * model; 0 when all came back and the reader stopped at upto + 1. */
static int read_range(const char *dir, uint64_t from, uint64_t upto, unsigned g)
{
	struct kvj_reader *r = NULL;
	const void *p;
	uint64_t lsn, want = from;
	uint32_t len;
	uint8_t type;
	int rc = kvj_reader_open(dir, SHARD, from, &r);

	if (rc < 0)
		return rc;
	while ((rc = kvj_reader_next(r, upto, &lsn, &type, &p, &len)) == 1) {
		CHECK(lsn == want, "lsn %llu, want %llu",
		      (unsigned long long)lsn, (unsigned long long)want);
		CHECK(model_ok(lsn, g, type, p, len), "record %llu differs",
		      (unsigned long long)lsn);
		want = lsn + 1;
	}
	CHECK(rc < 0 || (want == upto + 1 && kvj_reader_lsn(r) == upto + 1),
	      "stopped at %llu reading %llu..%llu", (unsigned long long)want,
	      (unsigned long long)from, (unsigned long long)upto);
	kvj_reader_close(r);
	return rc;
}

/* ---- the tests --------------------------------------------------------- */

/* From every LSN, across the segment boundaries, up to a bound: exact
 * records, and nothing past the bound. */
static void test_across_segments(void)
{
	char dir[300];
	struct kvj *j;
	int rc;

	if (!(j = fresh_j(dir, sizeof(dir), "across", 600)))
		return;
	CHECK(kvj_segments(j) >= 10, "only %u segments", kvj_segments(j));
	for (uint64_t from = 1; from <= 600; from += 7) {
		rc = read_range(dir, from, 600, 0);
		CHECK(rc == 0, "from %llu: %d", (unsigned long long)from, rc);
	}
	CHECK(read_range(dir, 600, 600, 0) == 0, "the last record alone");
	CHECK(read_range(dir, 100, 350, 0) == 0, "a bounded range");
	/* at the bound already: nothing, and no error */
	CHECK(read_range(dir, 601, 600, 0) == 0, "at the bound");
	kvj_close(j);
	rmdir_all(dir);
}

/* ---- a reader while another thread appends -------------------------- */

#define CONC_RECORDS 30000u

struct conc {
	struct kvj *j;
	const char *dir;
	_Atomic uint64_t synced; /* published by the writer: known flushed */
	_Atomic uint64_t read;	 /* published by the reader: last LSN read */
	_Atomic int stop;
	unsigned released; /* segments the writer recycled */
	int werr;
};

/* The committer's part: batches of varying size, each flushed and then
 * published; the next batch is in the file, unflushed, while the reader
 * reads.  Segments the reader has passed are recycled (and reused). */
static void *writer(void *arg)
{
	struct conc *c = arg;
	unsigned seed = 1;

	while (kvj_next_lsn(c->j) <= CONC_RECORDS && !atomic_load(&c->stop)) {
		size_t n = 1 + (seed = seed * 1103515245u + 12345u) % 40;
		int rc;

		if (kvj_next_lsn(c->j) + n > CONC_RECORDS + 1)
			n = CONC_RECORDS + 1 - kvj_next_lsn(c->j);
		if ((rc = append_sync(c->j, n, 0)) < 0) {
			c->werr = rc;
			break;
		}
		atomic_store_explicit(&c->synced, kvj_synced_lsn(c->j),
				      memory_order_release);
		rc = kvj_release(c->j, atomic_load(&c->read));
		if (rc > 0)
			c->released += (unsigned)rc;
	}
	return NULL;
}

static void test_concurrent(void)
{
	struct conc c = {0};
	struct kvj_reader *r = NULL;
	pthread_t t;
	char dir[300];
	uint64_t want = 1, lsn;
	const void *p;
	uint32_t len;
	uint8_t type;
	int rc = 0;

	newdir(dir, sizeof(dir), "concurrent");
	c.dir = dir;
	if (!(c.j = open_j(dir, 0)))
		return;
	/* one record first, so that the reader has a segment to open */
	CHECK(append_sync(c.j, 1, 0) == 0, "first record");
	c.synced = kvj_synced_lsn(c.j);
	CHECK(kvj_reader_open(dir, SHARD, 1, &r) == 0, "reader");
	if (!r || pthread_create(&t, NULL, writer, &c) != 0) {
		CHECK(0, "start");
		kvj_reader_close(r);
		kvj_close(c.j);
		return;
	}
	while (want <= CONC_RECORDS) {
		uint64_t upto =
		    atomic_load_explicit(&c.synced, memory_order_acquire);

		rc = kvj_reader_next(r, upto, &lsn, &type, &p, &len);
		if (rc < 0)
			break;
		if (rc == 0) {
			if (c.werr)
				break;
			sched_yield();
			continue;
		}
		CHECK(lsn == want && lsn <= upto,
		      "lsn %llu, want %llu, upto %llu", (unsigned long long)lsn,
		      (unsigned long long)want, (unsigned long long)upto);
		if (!model_ok(lsn, 0, type, p, len)) {
			CHECK(0, "record %llu differs",
			      (unsigned long long)lsn);
			break;
		}
		want = lsn + 1;
		atomic_store(&c.read, lsn);
	}
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	CHECK(rc >= 0, "reader: %s at %llu", kvj_strerror(rc),
	      (unsigned long long)want);
	CHECK(c.werr == 0, "writer: %s", kvj_strerror(c.werr));
	CHECK(want == CONC_RECORDS + 1, "read up to %llu",
	      (unsigned long long)want);
	CHECK(c.released > 10, "only %u segments recycled", c.released);
	kvj_reader_close(r);
	kvj_close(c.j);
	rmdir_all(dir);
}

/* A reader whose segments are recycled, and reused for new records, under
 * it: what it still returns is exact, and then it reports -ENOENT; a new
 * reader at a recycled LSN gets -ENOENT from the start. */
static void test_recycled_under_reader(void)
{
	struct kvj_reader *r = NULL;
	char dir[300];
	uint64_t lsn, last, ok = 0, want = 1;
	const void *p;
	uint32_t len;
	uint8_t type;
	struct kvj *j;
	int rc;

	if (!(j = fresh_j(dir, sizeof(dir), "recycled", 300)))
		return;
	CHECK(kvj_reader_open(dir, SHARD, 1, &r) == 0, "reader");
	if (!r)
		goto out;
	for (int i = 0; i < 5; i++)
		CHECK(kvj_reader_next(r, 300, &lsn, &type, &p, &len) == 1,
		      "first records");
	want = 6;
	/* everything but the current segment goes; two become spares, and
	 * the appends below reuse them */
	CHECK(kvj_release(j, 300) > 5, "release");
	CHECK(append_sync(j, 200, 0) == 0, "append after release");
	last = kvj_synced_lsn(j);
	while ((rc = kvj_reader_next(r, last, &lsn, &type, &p, &len)) == 1) {
		CHECK(lsn == want && model_ok(lsn, 0, type, p, len),
		      "record %llu (want %llu) after recycling",
		      (unsigned long long)lsn, (unsigned long long)want);
		want = lsn + 1;
		ok++;
	}
	CHECK(rc == -ENOENT, "after %llu records: %d, want -ENOENT",
	      (unsigned long long)ok, rc);
	CHECK(want < 300, "read up to %llu through recycled segments",
	      (unsigned long long)want);
	kvj_reader_close(r);
	r = NULL;
	CHECK(kvj_reader_open(dir, SHARD, 2, &r) == -ENOENT,
	      "a reader at a recycled LSN");
	kvj_reader_close(r);
	/* what is still kept reads back */
	CHECK(read_range(dir, 450, last, 0) == 0, "kept records");
out:
	kvj_close(j);
	rmdir_all(dir);
}

/* The segment files of dir, sorted by first LSN (their names sort so). */
static int list_segs(const char *dir, char names[][64], int cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL && n < cap)
		if (strncmp(e->d_name, "journal-", 8) == 0 &&
		    strlen(e->d_name) < 64)
			memcpy(names[n++], e->d_name, strlen(e->d_name) + 1);
	closedir(d);
	qsort(names, (size_t)n, 64,
	      (int (*)(const void *, const void *))strcmp);
	return n;
}

/* Flip one byte of the payload of the k-th record of a segment file (its
 * records laid out as docs/journal-format.md says); its LSN, or 0. */
static uint64_t corrupt_kth(const char *path, int k)
{
	unsigned char h[25], b;
	uint64_t off = 64, lsn = 0;
	int fd = open(path, O_RDWR);

	if (fd < 0)
		return 0;
	for (int i = 0; i <= k; i++) {
		uint32_t len;

		if (pread(fd, h, sizeof(h), (off_t)off) != (ssize_t)sizeof(h))
			goto out;
		memcpy(&len, h + 4, 4);
		memcpy(&lsn, h + 8, 8);
		if (i < k)
			off += (25 + len + 7) & ~(uint64_t)7;
	}
	if (pread(fd, &b, 1, (off_t)off + 25) != 1)
		goto out;
	b ^= 0x40;
	if (pwrite(fd, &b, 1, (off_t)off + 25) != 1)
		lsn = 0;
	close(fd);
	return lsn;
out:
	close(fd);
	return 0;
}

/* A bad checksum in the middle of a segment that is not the last: the
 * records before it come back, the bad one never does, the reader says
 * -EBADMSG there (corruption, not recycling), and a reader opened in a
 * later segment reads on. */
static void test_bad_checksum(void)
{
	char dir[300], names[64][64], path[400];
	struct kvj_reader *r = NULL;
	uint64_t bad, lsn, want = 1;
	const void *p;
	uint32_t len;
	uint8_t type;
	struct kvj *j;
	int rc, n;

	if (!(j = fresh_j(dir, sizeof(dir), "badsum", 300)))
		return;
	n = list_segs(dir, names, 64);
	CHECK(n >= 4, "%d segments", n);
	if (n < 4)
		goto out;
	snprintf(path, sizeof(path), "%s/%s", dir, names[2]);
	bad = corrupt_kth(path, 3);
	CHECK(bad > 4, "corrupting %s", path);
	CHECK(kvj_reader_open(dir, SHARD, 1, &r) == 0, "reader");
	if (!r)
		goto out;
	while ((rc = kvj_reader_next(r, 300, &lsn, &type, &p, &len)) == 1) {
		CHECK(lsn == want && model_ok(lsn, 0, type, p, len),
		      "record %llu (want %llu)", (unsigned long long)lsn,
		      (unsigned long long)want);
		want = lsn + 1;
	}
	CHECK(rc == -EBADMSG, "at %llu: %d (%s), want -EBADMSG",
	      (unsigned long long)want, rc, kvj_strerror(rc));
	CHECK(want == bad, "stopped at %llu, the bad record is %llu",
	      (unsigned long long)want, (unsigned long long)bad);
	/* asked again, the same answer: never the bad record */
	rc = kvj_reader_next(r, 300, &lsn, &type, &p, &len);
	CHECK(rc == -EBADMSG, "asked again: %d", rc);
	kvj_reader_close(r);
	/* a reader from the next segment on does not need the bad record */
	CHECK(read_range(dir, strtoull(names[3] + 8, NULL, 16), 300, 0) == 0,
	      "the segment after the bad one");
out:
	kvj_close(j);
	rmdir_all(dir);
}

/* kvj_reset to an LSN far from the old ones: the next append gets it, a
 * reopen replays exactly the new records from there and goes on after
 * them, a reader reads them, an LSN from before the reset is gone, and a
 * reader opened before the reset never returns an old record as new. */
static void test_reset(void)
{
	struct kvj_reader *old = NULL;
	char dir[300];
	uint64_t lsn, first = 0;
	const void *p;
	uint32_t len;
	uint8_t type;
	struct kvj *j;
	int rc;

	if (!(j = fresh_j(dir, sizeof(dir), "reset", 120)))
		return;
	CHECK(kvj_reader_open(dir, SHARD, 110, &old) == 0, "old reader");
	CHECK((rc = kvj_reset(j, 5000)) == 0, "reset: %s", kvj_strerror(rc));
	CHECK(kvj_next_lsn(j) == 5000, "next %llu after reset",
	      (unsigned long long)kvj_next_lsn(j));
	CHECK(kvj_synced_lsn(j) == 4999, "synced %llu after reset",
	      (unsigned long long)kvj_synced_lsn(j));
	CHECK(append_sync(j, 150, 1) == 0, "append after reset");
	kvj_close(j);

	/* the old reader: its LSNs 110..120 are not in the new journal; it
	 * may only still return the old records it had, never others */
	while (old &&
	       (rc = kvj_reader_next(old, 120, &lsn, &type, &p, &len)) == 1)
		CHECK(lsn <= 120 && model_ok(lsn, 0, type, p, len),
		      "old reader: record %llu", (unsigned long long)lsn);
	kvj_reader_close(old);

	j = open_j(dir, 4999);
	if (!j)
		goto out;
	CHECK(kvj_next_lsn(j) == 5150, "next %llu after reopen",
	      (unsigned long long)kvj_next_lsn(j));
	CHECK(append_sync(j, 10, 1) == 0, "append after reopen");
	kvj_close(j);
	CHECK(read_range(dir, 5000, 5159, 1) == 0, "the new records");
	CHECK(read_range(dir, 100, 120, 0) == -ENOENT, "an LSN from before");
	/* a replay from the checkpoint: exactly 5000..5159 */
	{
		struct kvj_opts o = {.segment_size = SMALL_SEG,
				     .max_spares = 2,
				     .shard_id = SHARD};
		struct kvj_report rep;

		rc = kvj_open(dir, &o, 4999, NULL, NULL, &rep, &j);
		CHECK(rc == 0 && rep.first_lsn == 5000 && rep.last_lsn == 5159,
		      "replay %llu..%llu (%d)",
		      (unsigned long long)rep.first_lsn,
		      (unsigned long long)rep.last_lsn, rc);
		if (rc == 0)
			first = kvj_next_lsn(j);
		CHECK(first == 5160, "next %llu", (unsigned long long)first);
		kvj_close(j);
	}
out:
	rmdir_all(dir);
}

int main(void)
{
	if (jt_root("kvjr-test"))
		return 1;
	test_across_segments();
	test_concurrent();
	test_recycled_under_reader();
	test_bad_checksum();
	test_reset();
	if (jt_finish())
		return 1;
	printf("unit_journal_reader: all passed\n");
	return 0;
}
