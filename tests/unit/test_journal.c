/* test_journal.c - the shard journal (kvd/store/journal_*.c) against its
 * format (docs/journal-format.md): replay, LSN continuity across reopens,
 * a torn tail at every byte of the last record, a bit flip in every byte
 * of a record mid-file (corruption, named by file and offset) and of the
 * last one (a torn tail), an unsynced batch that reached the disk out of
 * order, segment rollover and recycling, stale records in a recycled
 * segment, a missing segment, spares made ahead (kvj_prepare_spare), the
 * permanent failed state after a failed flush or write, and (argument
 * "enospc", its own ctest) a full disk, and a spare reserved for the
 * appends that may take it (kvj_opts.reserve) on one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "journaltest.h"

/* ---- the model: what each LSN's payload is ---------------------------- */

#define MAXLSN 4096
static unsigned char *want[MAXLSN];
static uint32_t want_len[MAXLSN];

static void make_payload(uint64_t lsn, uint32_t len)
{
	free(want[lsn]);
	want[lsn] = malloc(len ? len : 1);
	want_len[lsn] = len;
	for (uint32_t i = 0; i < len; i++)
		want[lsn][i] = (unsigned char)(lsn * 131 + i * 7 + 1) | 1;
}

static uint32_t default_len(uint64_t lsn)
{
	return 1 + (uint32_t)(lsn * 37 % 180);
}

/* Append n records with the next LSNs; len 0 picks a varying length. */
static int append_n(struct kvj *j, size_t n, uint32_t len)
{
	struct kvj_entry e[256];
	uint64_t first = kvj_next_lsn(j), got = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		uint64_t lsn = first + i;

		make_payload(lsn, len ? len : default_len(lsn));
		e[i] = (struct kvj_entry){
		    .type = 7, .data = want[lsn], .len = want_len[lsn]};
	}
	rc = kvj_append(j, e, n, &got);
	if (rc == 0)
		CHECK(got == first, "first lsn %llu, want %llu",
		      (unsigned long long)got, (unsigned long long)first);
	return rc;
}

/* ---- replay collection ------------------------------------------------ */

struct seen {
	uint64_t lsn[MAXLSN];
	size_t n;
	int bad; /* a payload that does not match the model */
};

static int collect(void *arg, uint64_t lsn, uint8_t type, const void *p,
		   uint32_t len)
{
	struct seen *s = arg;

	if (s->n < MAXLSN)
		s->lsn[s->n++] = lsn;
	if (lsn >= MAXLSN || type != 7 || len != want_len[lsn] ||
	    memcmp(p, want[lsn], len) != 0)
		s->bad = 1;
	return 0;
}

static struct kvj_opts opts(uint64_t seg, unsigned flags)
{
	return (struct kvj_opts){.segment_size = seg,
				 .max_spares = 2,
				 .shard_id = 3,
				 .flags = flags};
}

/* Reopen and check the replay is exactly LSN from..to (to < from: none). */
static int reopen_expect(const char *dir, uint64_t seg, uint64_t ckpt,
			 uint64_t from, uint64_t to, struct kvj **out)
{
	static struct seen s;
	struct kvj_opts o = opts(seg, 0);
	struct kvj_report rep;
	struct kvj *j = NULL;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = kvj_open(dir, &o, ckpt, collect, &s, &rep, &j);
	CHECK(rc == 0, "open %s: %s (%s)", dir, kvj_strerror(rc), rep.msg);
	if (rc)
		return rc;
	size_t n = to >= from ? (size_t)(to - from + 1) : 0;

	CHECK(s.n == n, "replayed %zu, want %zu (LSN %llu..%llu)", s.n, n,
	      (unsigned long long)from, (unsigned long long)to);
	for (size_t i = 0; i < s.n && i < n; i++)
		CHECK(s.lsn[i] == from + i, "replay[%zu] LSN %llu", i,
		      (unsigned long long)s.lsn[i]);
	CHECK(!s.bad, "a replayed payload differs");
	CHECK(kvj_next_lsn(j) == (to >= from ? to + 1 : from), "next lsn %llu",
	      (unsigned long long)kvj_next_lsn(j));
	if (out)
		*out = j;
	else
		kvj_close(j);
	return 0;
}

/* ---- files ------------------------------------------------------------ */

static unsigned count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	while (d && (e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	if (d)
		closedir(d);
	return n;
}

static void seg_path(char *out, size_t cap, const char *dir, uint64_t first)
{
	snprintf(out, cap, "%s/journal-%016llx.kvj", dir,
		 (unsigned long long)first);
}

static unsigned char *slurp(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	unsigned char *b;

	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	b = malloc((size_t)st.st_size);
	*n = (size_t)st.st_size;
	if (b && pread(fd, b, *n, 0) != (ssize_t)*n) {
		free(b);
		b = NULL;
	}
	close(fd);
	return b;
}

static void spill(const char *path, const unsigned char *b, size_t n)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || pwrite(fd, b, n, 0) != (ssize_t)n)
		CHECK(0, "rewrite %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Offset of LSN lsn in a single segment holding LSN 1 on. */
static size_t off_of(uint64_t lsn)
{
	size_t off = 64;

	for (uint64_t l = 1; l < lsn; l++)
		off += (25 + want_len[l] + 7) & ~(size_t)7;
	return off;
}

static size_t ext_of(uint64_t lsn)
{
	return (25 + want_len[lsn] + 7) & ~(size_t)7;
}

/* ---- the tests -------------------------------------------------------- */

#define SEG1 (1u << 20) /* one segment holds everything in these tests */

/* Records come back in order after reopen; appends after a reopen take
 * the next LSNs; a checkpoint LSN skips what it covers. */
static void test_continuity(void)
{
	struct kvj_opts o = opts(SEG1, 0);
	struct kvj *j;
	char dir[300];

	newdir(dir, sizeof(dir), "cont");
	CHECK(kvj_open(dir, &o, 0, collect, NULL, NULL, &j) == 0, "create");
	CHECK(kvj_next_lsn(j) == 1, "fresh journal starts at 1");
	for (int b = 0; b < 10; b++) {
		CHECK(append_n(j, 5, 0) == 0, "append");
		CHECK(kvj_sync(j) == 0, "sync");
	}
	CHECK(kvj_synced_lsn(j) == 50, "synced %llu",
	      (unsigned long long)kvj_synced_lsn(j));
	kvj_close(j);
	if (reopen_expect(dir, SEG1, 0, 1, 50, &j))
		return;
	CHECK(append_n(j, 10, 0) == 0 && kvj_sync(j) == 0, "append 51..60");
	kvj_close(j);
	reopen_expect(dir, SEG1, 0, 1, 60, NULL);
	reopen_expect(dir, SEG1, 30, 31, 60, NULL);
	/* unsynced but written records survive a process exit */
	if (reopen_expect(dir, SEG1, 0, 1, 60, &j))
		return;
	CHECK(append_n(j, 3, 0) == 0, "append without sync");
	kvj_close(j);
	reopen_expect(dir, SEG1, 0, 1, 63, NULL);
	/* a checkpoint ahead of the journal: LSNs go on above it */
	if (reopen_expect(dir, SEG1, 100, 101, 100, &j) == 0) {
		CHECK(kvj_next_lsn(j) == 101, "next after ckpt 100: %llu",
		      (unsigned long long)kvj_next_lsn(j));
		CHECK(append_n(j, 2, 0) == 0 && kvj_sync(j) == 0, "append");
		kvj_close(j);
		reopen_expect(dir, SEG1, 100, 101, 102, NULL);
	}
	rmdir_all(dir);
}

/* The payload lives only during the callback: keep copies. */
static char rec_copy[3][32];

static int collect_rec(void *arg, uint64_t lsn, uint8_t type, const void *p,
		       uint32_t len)
{
	struct kvj_rec *r = (struct kvj_rec *)arg + (lsn - 1);

	if (lsn > 3 || kvj_rec_decode(type, p, len, r) < 0 ||
	    r->klen + r->vlen > sizeof(rec_copy[0]))
		return -EBADMSG;
	memcpy(rec_copy[lsn - 1], r->key, r->klen);
	memcpy(rec_copy[lsn - 1] + r->klen, r->val, r->vlen);
	r->key = rec_copy[lsn - 1];
	r->val = rec_copy[lsn - 1] + r->klen;
	return 0;
}

/* A PUT of a typed value (kvd's hashes) is a KVJ_PUT_TYPED record with the
 * type after the expiry, read back as a KVJ_PUT with its vtype; a plain
 * PUT's record is unchanged (a journal of plain values is what it was). */
static void test_typed_records(void)
{
	struct kvj_opts o = opts(SEG1, 0);
	struct kvj_rec in[3] = {
	    {.type = KVJ_PUT,
	     .vtype = 1,
	     .key = "h1",
	     .klen = 2,
	     .val = "image",
	     .vlen = 5,
	     .expiry_ms = 42},
	    {.type = KVJ_PUT, .key = "s1", .klen = 2, .val = "v", .vlen = 1},
	    {.type = KVJ_DEL, .key = "h1", .klen = 2},
	};
	struct kvj_rec out[3];
	unsigned char buf[64];
	struct kvj *j;
	char dir[300];
	int n;

	newdir(dir, sizeof(dir), "kvt");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	CHECK(kvj_append_recs(j, in, 3, NULL) == 0 && kvj_sync(j) == 0,
	      "append typed recs");
	kvj_close(j);
	memset(out, 0, sizeof(out));
	CHECK(kvj_open(dir, &o, 0, collect_rec, out, NULL, &j) == 0, "reopen");
	kvj_close(j);
	CHECK(out[0].type == KVJ_PUT && out[0].vtype == 1 && out[0].klen == 2 &&
		  memcmp(out[0].key, "h1", 2) == 0 && out[0].vlen == 5 &&
		  memcmp(out[0].val, "image", 5) == 0 && out[0].expiry_ms == 42,
	      "typed PUT round trip");
	CHECK(out[1].type == KVJ_PUT && out[1].vtype == 0, "plain PUT");
	CHECK(out[2].type == KVJ_DEL && out[2].vtype == 0, "DEL");
	n = kvj_rec_encode(&in[0], buf, sizeof(buf));
	CHECK(n == 17 + 2 + 5 && buf[16] == 1, "typed size %d", n);
	CHECK(kvj_rec_decode(KVJ_PUT_TYPED, buf, (uint32_t)n, &out[0]) == 0 &&
		  out[0].vtype == 1,
	      "typed decode");
	buf[16] = 0;
	CHECK(kvj_rec_decode(KVJ_PUT_TYPED, buf, (uint32_t)n, &out[0]) ==
		  -EBADMSG,
	      "typed record of type 0 refused");
	CHECK(kvj_rec_encode(&in[1], buf, sizeof(buf)) == 16 + 2 + 1,
	      "plain size unchanged");
	rmdir_all(dir);
}

/* Key-value records round-trip; malformed payloads are refused. */
static void test_kv_records(void)
{
	struct kvj_opts o = opts(SEG1, 0);
	struct kvj_rec in[3] = {
	    {.type = KVJ_PUT,
	     .key = "k1",
	     .klen = 2,
	     .val = "value",
	     .vlen = 5,
	     .expiry_ms = 1700000000123ull},
	    {.type = KVJ_DEL, .key = "k2", .klen = 2},
	    {.type = KVJ_FLUSHALL},
	};
	struct kvj_rec out[3];
	unsigned char buf[64];
	struct kvj *j;
	char dir[300];

	newdir(dir, sizeof(dir), "kv");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	CHECK(kvj_append_recs(j, in, 3, NULL) == 0 && kvj_sync(j) == 0,
	      "append recs");
	kvj_close(j);
	memset(out, 0, sizeof(out));
	CHECK(kvj_open(dir, &o, 0, collect_rec, out, NULL, &j) == 0, "reopen");
	kvj_close(j);
	CHECK(out[0].type == KVJ_PUT && out[0].klen == 2 &&
		  memcmp(out[0].key, "k1", 2) == 0 && out[0].vlen == 5 &&
		  memcmp(out[0].val, "value", 5) == 0 &&
		  out[0].expiry_ms == 1700000000123ull,
	      "PUT round trip");
	CHECK(out[1].type == KVJ_DEL && out[1].klen == 2 &&
		  memcmp(out[1].key, "k2", 2) == 0 && out[1].vlen == 0,
	      "DEL round trip");
	CHECK(out[2].type == KVJ_FLUSHALL && out[2].klen == 0, "FLUSHALL");
	int n = kvj_rec_encode(&in[0], buf, sizeof(buf));

	CHECK(n == 16 + 2 + 5, "encoded size %d", n);
	CHECK(kvj_rec_decode(KVJ_PUT, buf, (uint32_t)n - 1, &out[0]) ==
		  -EBADMSG,
	      "short payload refused");
	CHECK(kvj_rec_decode(9, buf, (uint32_t)n, &out[0]) == -EBADMSG,
	      "unknown type refused");
	CHECK(kvj_rec_decode(KVJ_DEL, buf, (uint32_t)n, &out[0]) == -EBADMSG,
	      "DEL with a value refused");
	CHECK(kvj_rec_encode(&in[0], buf, 10) == -ENOBUFS, "small buffer");
	rmdir_all(dir);
	test_typed_records();
}

/* Twelve synced batches; the last record 103 bytes (no padding), so that
 * every byte of it matters. */
static int build_twelve(const char *dir, uint64_t *last)
{
	struct kvj_opts o = opts(SEG1, 0);
	struct kvj *j;
	int rc = kvj_open(dir, &o, 0, NULL, NULL, NULL, &j);

	if (rc)
		return rc;
	for (int b = 0; b < 11; b++) {
		append_n(j, 3, 0);
		kvj_sync(j);
	}
	append_n(j, 1, 103);
	kvj_sync(j);
	*last = kvj_next_lsn(j) - 1;
	kvj_close(j);
	return 0;
}

/* The last record torn at every byte: everything before it replays, it
 * does not, and the journal goes on from its LSN. */
static void test_torn_tail(void)
{
	char dir[300], seg[400];
	unsigned char *orig, *b;
	uint64_t last;
	size_t n;

	newdir(dir, sizeof(dir), "torn");
	CHECK(build_twelve(dir, &last) == 0, "build");
	seg_path(seg, sizeof(seg), dir, 1);
	orig = slurp(seg, &n);
	if (!orig)
		return;
	size_t off = off_of(last), end = off + ext_of(last);

	CHECK(end - off == 128, "last record extent %zu", end - off);
	b = malloc(n);
	for (int fill = 0; fill < 2; fill++) {
		for (size_t k = off; k < end; k++) {
			struct kvj *j;

			memcpy(b, orig, n);
			/* zeros, or garbage as a half-written sector holds */
			for (size_t i = k; i < end; i++)
				b[i] = fill ? (unsigned char)(i * 29 + 5) : 0;
			if (memcmp(b + k, orig + k, end - k) == 0)
				continue;
			spill(seg, b, n);
			if (reopen_expect(dir, SEG1, 0, 1, last - 1, &j))
				break;
			/* the tail is usable: the torn LSN is written anew */
			CHECK(append_n(j, 1, 0) == 0 && kvj_sync(j) == 0,
			      "append after torn tail");
			kvj_close(j);
			reopen_expect(dir, SEG1, 0, 1, last, NULL);
			make_payload(last, 103);
		}
	}
	spill(seg, orig, n);
	free(b);
	free(orig);
	rmdir_all(dir);
}

/* One bit flipped in every byte of a record with synced records after it:
 * refused as corruption naming the file and the record's offset; with
 * truncation the journal is cut there and goes on.  In the last record:
 * a torn tail. */
static void test_bit_flips(void)
{
	char dir[300], seg[400], at[64];
	struct kvj_opts o = opts(SEG1, 0);
	unsigned char *orig, *b;
	struct kvj_report rep;
	struct kvj *j;
	uint64_t last, mid = 17;
	size_t n;

	newdir(dir, sizeof(dir), "flip");
	CHECK(build_twelve(dir, &last) == 0, "build");
	seg_path(seg, sizeof(seg), dir, 1);
	orig = slurp(seg, &n);
	if (!orig)
		return;
	b = malloc(n);
	size_t off = off_of(mid), end = off + ext_of(mid);

	snprintf(at, sizeof(at), "offset %zu:", off);
	for (size_t k = off; k < end; k++) {
		memcpy(b, orig, n);
		b[k] ^= (unsigned char)(1u << (k % 8));
		spill(seg, b, n);
		int rc = kvj_open(dir, &o, 0, NULL, NULL, &rep, &j);

		CHECK(rc == -EBADMSG, "flip at %zu: open gave %d", k, rc);
		CHECK(strcmp(rep.bad_file, seg) == 0 && rep.bad_offset == off,
		      "flip at %zu: reported %s @ %llu", k, rep.bad_file,
		      (unsigned long long)rep.bad_offset);
		CHECK(strstr(rep.msg, seg) && strstr(rep.msg, at) &&
			  !strchr(rep.msg, '\n'),
		      "message: %s", rep.msg);
		if (rc == 0)
			kvj_close(j);
	}
	/* the operator's truncation: cut at the bad record, go on */
	memcpy(b, orig, n);
	b[off + 30] ^= 0x10;
	spill(seg, b, n);
	o.flags = KVJ_OPEN_TRUNCATE;
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, &rep, &j) == 0, "truncate");
	CHECK(strstr(rep.msg, "truncated") && rep.dropped > 0, "%s", rep.msg);
	CHECK(kvj_next_lsn(j) == mid, "next after truncation %llu",
	      (unsigned long long)kvj_next_lsn(j));
	CHECK(append_n(j, 4, 0) == 0 && kvj_sync(j) == 0, "append");
	kvj_close(j);
	reopen_expect(dir, SEG1, 0, 1, mid + 3, NULL);
	/* a damaged segment header */
	memcpy(b, orig, n);
	b[20] ^= 0x01;
	spill(seg, b, n);
	o.flags = 0;
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, &rep, &j) == -EBADMSG &&
		  strstr(rep.msg, "header") && strstr(rep.msg, "offset 0:"),
	      "bad header: %s", rep.msg);
	/* flips in the last record: the torn tail, not corruption */
	spill(seg, orig, n);
	for (uint64_t l = mid; l <= last; l++)
		make_payload(l, l == last ? 103 : default_len(l));
	off = off_of(last);
	end = off + ext_of(last);
	for (size_t k = off; k < end; k++) {
		memcpy(b, orig, n);
		b[k] ^= (unsigned char)(1u << (k % 8));
		spill(seg, b, n);
		reopen_expect(dir, SEG1, 0, 1, last - 1, NULL);
	}
	spill(seg, orig, n);
	free(b);
	free(orig);
	rmdir_all(dir);
}

/* A power loss while an unsynced batch was in flight may keep its later
 * records and lose an earlier one: that is a torn tail (their synced
 * field predates the lost record), and the leftovers are wiped so that
 * they never line up with a record written later. */
static void test_unsynced_reorder(void)
{
	struct kvj_opts o = opts(SEG1, 0);
	char dir[300], seg[400];
	struct kvj_report rep;
	struct seen s;
	unsigned char *b;
	struct kvj *j;
	size_t n;

	newdir(dir, sizeof(dir), "reorder");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	append_n(j, 5, 0);
	kvj_sync(j);
	append_n(j, 5, 0); /* LSN 6..10, never synced */
	kvj_close(j);
	seg_path(seg, sizeof(seg), dir, 1);
	b = slurp(seg, &n);
	if (!b)
		return;
	memset(b + off_of(7), 0, ext_of(7)); /* 7 lost, 6 and 8..10 kept */
	spill(seg, b, n);
	memset(&s, 0, sizeof(s));
	CHECK(kvj_open(dir, &o, 0, collect, &s, &rep, &j) == 0, "open: %s",
	      rep.msg);
	CHECK(s.n == 6 && kvj_next_lsn(j) == 7, "replayed %zu", s.n);
	CHECK(rep.dropped == off_of(11) - off_of(7), "wiped %llu",
	      (unsigned long long)rep.dropped);
	/* one short record, then a reopen: old 8..10 must not come back */
	append_n(j, 1, 1);
	kvj_sync(j);
	kvj_close(j);
	reopen_expect(dir, SEG1, 0, 1, 7, NULL);
	free(b);
	rmdir_all(dir);
}

#define SEGS 4096u /* small segments: about 25 records each */

/* Rollover inside batches, release to spares, reuse of spares whose old
 * records are never replayed, a missing segment refused. */
static void test_segments(void)
{
	struct kvj_opts o = opts(SEGS, 0);
	char dir[300], path[400];
	struct kvj_report rep;
	struct kvj *j;
	int rc;

	newdir(dir, sizeof(dir), "segs");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	for (int b = 0; b < 20; b++) {
		CHECK(append_n(j, 7, 0) == 0, "append batch %d", b);
		CHECK(kvj_sync(j) == 0, "sync");
	}
	unsigned segs = kvj_segments(j);

	CHECK(segs >= 5, "segments %u", segs);
	CHECK(count_files(dir, "journal-0") == segs, "files on disk");
	kvj_close(j);
	if (reopen_expect(dir, SEGS, 0, 1, 140, &j))
		return;
	/* too big for any segment: refused, journal fine */
	make_payload(141, SEGS);
	struct kvj_entry big = {.type = 7, .data = want[141], .len = SEGS};

	CHECK(kvj_append(j, &big, 1, NULL) == -E2BIG, "oversized record");
	CHECK(kvj_error(j) == 0 && kvj_next_lsn(j) == 141, "still usable");
	rc = kvj_release(j, 100);
	CHECK(rc >= 3, "released %d", rc);
	CHECK(kvj_spares(j) == 2 && count_files(dir, "journal-spare-") == 2,
	      "spares %u", kvj_spares(j));
	CHECK(kvj_segments(j) == segs - (unsigned)rc, "segments left");
	kvj_close(j);
	/* the checkpoint must cover what was released */
	rc = kvj_open(dir, &o, 0, NULL, NULL, &rep, &j);
	CHECK(rc == -EBADMSG && strstr(rep.msg, "checkpoint"), "gap: %s",
	      rep.msg);
	if (reopen_expect(dir, SEGS, 100, 101, 140, &j))
		return;
	/* fill into a recycled spare, stopping early inside it: the spare's
	 * old records lie beyond the new tail */
	unsigned spares = kvj_spares(j);

	while (kvj_spares(j) == spares)
		CHECK(append_n(j, 1, 0) == 0 && kvj_sync(j) == 0, "append");
	CHECK(kvj_spares(j) == spares - 1, "a spare reused");
	uint64_t end = kvj_next_lsn(j) - 1;

	kvj_close(j);
	reopen_expect(dir, SEGS, 100, 101, end, NULL);
	/* a missing middle segment: corruption named at the one before */
	if (reopen_expect(dir, SEGS, 100, 101, end, &j))
		return;
	for (int b = 0; b < 10; b++)
		append_n(j, 7, 0), kvj_sync(j);
	kvj_close(j);
	DIR *d = opendir(dir);
	struct dirent *e;
	char names[64][64];
	unsigned nn = 0;

	while (d && (e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "journal-0", 9) == 0 && nn < 64)
			snprintf(names[nn++], 64, "%.60s", e->d_name);
	closedir(d);
	qsort(names, nn, 64, (int (*)(const void *, const void *))strcmp);
	CHECK(nn >= 3, "segments %u", nn);
	snprintf(path, sizeof(path), "%s/%s", dir, names[nn - 2]);
	unlink(path);
	rc = kvj_open(dir, &o, 100, NULL, NULL, &rep, &j);
	snprintf(path, sizeof(path), "%s/%s", dir, names[nn - 3]);
	CHECK(rc == -EBADMSG && strcmp(rep.bad_file, path) == 0,
	      "missing segment: %d %s", rc, rep.msg);
	rmdir_all(dir);
}

/* Spares made ahead (kvj_prepare_spare on another thread in kvd): a
 * whole zeroed file of the segment size, taken by the next segment without
 * the append making one; one of another size, or past max_spares, is
 * deleted; leftovers from a crash are deleted at open. */
static void test_spares_ahead(void)
{
	struct kvj_opts o = opts(SEGS, 0);
	char dir[300], path[400];
	struct kvj *j;
	size_t n;

	newdir(dir, sizeof(dir), "ahead");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	CHECK(kvj_spares(j) == 0 && kvj_spares_made(j) == 0,
	      "open used its spare: %u", kvj_spares(j));
	CHECK(kvj_segment_size(j) == SEGS, "segment size");
	CHECK(kvj_adopt_spare(j) == 0, "nothing to adopt yet");
	CHECK(kvj_prepare_spare(dir, SEGS) == 0, "prepare");
	CHECK(count_files(dir, "journal-prep") == 0, "no temporary left");
	snprintf(path, sizeof(path), "%s/journal-ready.tmp", dir);
	unsigned char *b = slurp(path, &n);
	size_t nonzero = 0;

	for (size_t i = 0; b && i < n; i++)
		nonzero += b[i] != 0;
	CHECK(b && n == SEGS && nonzero == 0, "ready: %zu bytes, %zu not zero",
	      n, nonzero);
	free(b);
	CHECK(kvj_adopt_spare(j) == 1 && kvj_spares(j) == 1, "adopted");
	CHECK(count_files(dir, "journal-ready") == 0 &&
		  count_files(dir, "journal-spare-") == 1,
	      "renamed into a spare");
	/* the next segment takes it; the one after has to be made */
	unsigned segs = kvj_segments(j);

	while (kvj_segments(j) == segs)
		CHECK(append_n(j, 1, 0) == 0 && kvj_sync(j) == 0, "append");
	CHECK(kvj_spares(j) == 0 && kvj_spares_made(j) == 0,
	      "used the adopted spare: made %llu",
	      (unsigned long long)kvj_spares_made(j));
	while (kvj_segments(j) == segs + 1)
		CHECK(append_n(j, 1, 0) == 0 && kvj_sync(j) == 0, "append");
	CHECK(kvj_spares_made(j) == 1, "made one itself");
	/* of another size: deleted, not adopted */
	CHECK(kvj_prepare_spare(dir, 2 * SEGS) == 0, "prepare another size");
	CHECK(kvj_adopt_spare(j) == 0 && kvj_spares(j) == 0 &&
		  count_files(dir, "journal-ready") == 0,
	      "another size refused");
	/* past max_spares (2, held by released segments): deleted */
	uint64_t last = kvj_next_lsn(j) - 1;

	CHECK(kvj_release(j, last) >= 2 && kvj_spares(j) == 2, "two spares");
	CHECK(kvj_prepare_spare(dir, SEGS) == 0, "prepare a third");
	CHECK(kvj_adopt_spare(j) == 0 && kvj_spares(j) == 2 &&
		  count_files(dir, "journal-spare-") == 2 &&
		  count_files(dir, "journal-ready") == 0,
	      "a third spare refused");
	/* a crash's leftovers: deleted at open, records intact */
	CHECK(kvj_prepare_spare(dir, SEGS) == 0, "prepare, never adopted");
	snprintf(path, sizeof(path), "%s/journal-prep.tmp", dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);

	CHECK(fd >= 0 && write(fd, "half", 4) == 4, "a half-made spare");
	if (fd >= 0)
		close(fd);
	CHECK(append_n(j, 3, 0) == 0 && kvj_sync(j) == 0, "append 3");
	kvj_close(j);
	reopen_expect(dir, SEGS, last, last + 1, last + 3, NULL);
	CHECK(count_files(dir, "journal-ready") == 0 &&
		  count_files(dir, "journal-prep") == 0,
	      "leftovers deleted at open");
	CHECK(kvj_prepare_spare(dir, 100) == -EINVAL, "bad size");
	snprintf(path, sizeof(path), "%s/none", dir);
	CHECK(kvj_prepare_spare(path, SEGS) == -ENOENT, "no directory");
	rmdir_all(dir);
}

/* A failed flush fails the journal for good: later calls return the
 * error and the flush is not tried again even once it would work. */
static void test_failed_state(void)
{
	struct kvj_opts o = opts(SEG1, 0);
	int pipefd[2], saved, fd, rc;
	char dir[300];
	struct kvj *j;

	newdir(dir, sizeof(dir), "failed");
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	CHECK(append_n(j, 4, 0) == 0 && kvj_sync(j) == 0, "append 1..4");
	CHECK(append_n(j, 2, 0) == 0, "append 5..6");
	fd = kvj_debug_fd(j);
	saved = dup(fd);
	CHECK(pipe(pipefd) == 0, "pipe");
	dup2(pipefd[1], fd); /* fdatasync on a pipe fails (EINVAL) */
	rc = kvj_sync(j);
	CHECK(rc < 0 && kvj_error(j) == rc, "sync on a pipe: %d", rc);
	dup2(saved, fd); /* a retry would now succeed: there must be none */
	CHECK(kvj_sync(j) == rc, "sync after failure must not retry");
	CHECK(append_n(j, 1, 0) == rc, "append after failure");
	CHECK(kvj_synced_lsn(j) == 4 && kvj_next_lsn(j) == 7, "lsns kept");
	kvj_close(j);
	close(saved);
	close(pipefd[0]);
	close(pipefd[1]);
	/* a restart recovers what is on disk */
	reopen_expect(dir, SEG1, 0, 1, 6, &j);
	/* a failed write: the same */
	fd = kvj_debug_fd(j);
	saved = dup(fd);
	int ro = open(dir, O_RDONLY | O_DIRECTORY);

	dup2(ro, fd);
	rc = append_n(j, 2, 0);
	CHECK(rc < 0 && kvj_error(j) == rc, "write to a read-only fd: %d", rc);
	dup2(saved, fd);
	CHECK(append_n(j, 2, 0) == rc && kvj_sync(j) == rc, "stays failed");
	kvj_close(j);
	close(saved);
	close(ro);
	reopen_expect(dir, SEG1, 0, 1, 6, NULL);
	rmdir_all(dir);
}

/* A full disk (a 256 KiB tmpfs in a private mount namespace): the batch
 * that needed a new segment is refused whole, nothing half-made is left,
 * the journal stays usable, and releasing a segment lets appends go on. */
static int test_enospc(void)
{
	struct kvj_opts o = opts(64u << 10, 0);
	char dir[300];
	struct kvj *j;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s/full", root);
	mkdir(dir, 0700);
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=256k") < 0) {
		printf("skipped: cannot mount a small tmpfs (%s)\n",
		       strerror(errno));
		return 77;
	}
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	for (int i = 0; i < 1000 && rc == 0; i++) {
		rc = append_n(j, 8, 0);
		if (rc == 0)
			CHECK(kvj_sync(j) == 0, "sync");
	}
	uint64_t next = kvj_next_lsn(j);

	CHECK(rc == -ENOSPC, "append on a full disk: %s", kvj_strerror(rc));
	CHECK(kvj_error(j) == 0, "journal not failed by ENOSPC");
	CHECK(count_files(dir, "journal-new") == 0, "no half-made segment");
	rc = kvj_prepare_spare(dir, 64u << 10);
	CHECK(rc == -ENOSPC && count_files(dir, "journal-prep") == 0 &&
		  count_files(dir, "journal-ready") == 0,
	      "a spare made ahead on a full disk: %s", kvj_strerror(rc));
	CHECK(append_n(j, 8, 0) == -ENOSPC && kvj_next_lsn(j) == next,
	      "refused again, no LSN used");
	/* a checkpoint frees segments: appends go on */
	CHECK(kvj_release(j, next - 1) >= 1, "release");
	CHECK(append_n(j, 8, 0) == 0 && kvj_sync(j) == 0,
	      "append after release");
	kvj_close(j);
	reopen_expect(dir, 64u << 10, next - 1, next, next + 7, NULL);
	umount(dir);
	rmdir(dir);
	return 0;
}

/* A reserved spare (kvj_opts.reserve): on a full disk, an append that
 * needs a new segment is refused unless it may take the reserve (kvd's
 * batches of deletes, kvj_append_recs_reserve). */
static int test_enospc_reserve(void)
{
	struct kvj_opts o = opts(64u << 10, 0);
	struct kvj_rec del = {.type = KVJ_DEL, .key = "k", .klen = 1};
	char dir[300];
	struct kvj *j;
	unsigned segs;
	int rc = 0;

	o.reserve = 1;
	snprintf(dir, sizeof(dir), "%s/reserve", root);
	mkdir(dir, 0700);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=256k") < 0) {
		printf("skipped: cannot mount a small tmpfs (%s)\n",
		       strerror(errno));
		return 77;
	}
	CHECK(kvj_open(dir, &o, 0, NULL, NULL, NULL, &j) == 0, "create");
	CHECK(kvj_reserve(j) == 1, "reserve");
	CHECK(kvj_prepare_spare(dir, 64u << 10) == 0 && kvj_adopt_spare(j) == 1,
	      "the reserved spare");
	for (int i = 0; i < 1000 && rc == 0; i++) {
		rc = append_n(j, 8, 0);
		if (rc == 0)
			CHECK(kvj_sync(j) == 0, "sync");
	}
	CHECK(rc == -ENOSPC, "a plain append on a full disk: %s",
	      kvj_strerror(rc));
	CHECK(kvj_spares(j) == 1, "the reserved spare left alone");
	segs = kvj_segments(j);
	rc = 0;
	for (int i = 0; i < 100000 && rc == 0 && kvj_segments(j) == segs; i++)
		rc = kvj_append_recs_reserve(j, &del, 1, NULL);
	CHECK(rc == 0 && kvj_segments(j) == segs + 1 && kvj_spares(j) == 0,
	      "deletes took the reserved spare: %s", kvj_strerror(rc));
	CHECK(kvj_sync(j) == 0 && kvj_error(j) == 0, "sync after");
	kvj_close(j);
	umount(dir);
	rmdir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (jt_root("kvj-test"))
		return 1;
	if (argc > 1 && strcmp(argv[1], "enospc") == 0) {
		rc = test_enospc();
		if (rc == 0)
			rc = test_enospc_reserve();
	} else {
		test_continuity();
		test_kv_records();
		test_torn_tail();
		test_bit_flips();
		test_unsynced_reorder();
		test_segments();
		test_spares_ahead();
		test_failed_state();
	}
	for (size_t i = 0; i < MAXLSN; i++)
		free(want[i]);
	return jt_finish() ? 1 : rc;
}
