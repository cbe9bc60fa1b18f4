/* journal.c - the shard journal: segment files, record framing, group
 * append, flush, recovery scan and segment recycling (journal.h says what
 * each call promises; docs/journal-format.md is the on-disk format).
 *
 * Layout of the code: byte helpers and checksums, segment files (create,
 * activate, header), the append path, the recovery scan, release.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "journal.h"

#define SEG_HDR 64u	  /* segment header bytes; records start here */
#define REC_HDR 25u	  /* u32 sum, u32 len, u64 lsn, u64 synced, u8 type */
#define MAGIC 0x314a564bu /* "KVJ1" */
#define VERSION 1u
#define ZERO_CHUNK (1u << 20)
#define TMP_NAME "journal-new.tmp"
/* kvj_prepare_spare's file while it is written, and once it is whole */
#define PREP_NAME "journal-prep.tmp"
#define READY_NAME "journal-ready.tmp"

struct kvj {
	int dirfd;
	char dir[240];
	struct kvj_opts o;
	uint64_t id;	  /* per-journal random id, in every header */
	uint64_t *firsts; /* first LSN of each segment, ascending */
	unsigned nsegs, capsegs;
	unsigned *spares; /* spare file numbers */
	unsigned nspares, capspares, spare_seq;
	unsigned taken;	   /* the spare take_spare just opened */
	uint64_t made;	   /* spares made on the owner's thread since open */
	int fd;		   /* the current (last) segment */
	uint64_t seg_size; /* its size */
	uint64_t seed;	   /* its record checksum seed */
	uint64_t tail;	   /* offset of the next record in it */
	uint64_t next_lsn;
	uint64_t synced_lsn;
	int err;	    /* sticky: the write or flush that failed */
	unsigned char *buf; /* the batch being written */
	size_t bufcap;
};

/* ---- bytes and checksums --------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint64_t align8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* Record checksums are seeded with the journal's random id and the
 * segment's first LSN: a record is valid only in the segment instance it
 * was written for, and bytes inside a stored value (chosen by a client)
 * can never pass for a record, because nobody outside knows the seed. */
static uint64_t seg_seed(uint64_t id, uint64_t first)
{
	return id ^ (first * 0x9e3779b97f4a7c15ull);
}

static uint32_t sum32(const void *p, size_t n, uint64_t seed)
{
	return (uint32_t)XXH3_64bits_withSeed(p, n, seed);
}

static uint64_t rec_extent(uint32_t len)
{
	return align8((uint64_t)REC_HDR + len);
}

const char *kvj_strerror(int err)
{
	if (err == -EBADMSG)
		return "journal corrupt";
	if (err == -E2BIG)
		return "journal record larger than a segment";
	return strerror(err < 0 ? -err : err);
}

/* ---- file helpers ---------------------------------------------------- */

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const unsigned char *c = p;

	while (n > 0) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int zero_range(int fd, uint64_t off, uint64_t end)
{
	static const unsigned char zeros[65536];

	while (off < end) {
		size_t n = end - off < sizeof(zeros) ? (size_t)(end - off)
						     : sizeof(zeros);
		int rc = pwrite_all(fd, zeros, n, off);

		if (rc < 0)
			return rc;
		off += n;
	}
	return 0;
}

static int sync_fd(int fd)
{
	return fdatasync(fd) < 0 ? -errno : 0;
}

static void seg_name(char *out, size_t cap, uint64_t first)
{
	snprintf(out, cap, "journal-%016" PRIx64 ".kvj", first);
}

static void spare_name(char *out, size_t cap, unsigned num)
{
	snprintf(out, cap, "journal-spare-%u.kvj", num);
}

static int push_seg(struct kvj *j, uint64_t first)
{
	if (j->nsegs == j->capsegs) {
		unsigned cap = j->capsegs ? 2 * j->capsegs : 8;
		uint64_t *f = realloc(j->firsts, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		j->firsts = f;
		j->capsegs = cap;
	}
	j->firsts[j->nsegs++] = first;
	return 0;
}

static int push_spare(struct kvj *j, unsigned num)
{
	if (j->nspares == j->capspares) {
		unsigned cap = j->capspares ? 2 * j->capspares : 4;
		unsigned *s = realloc(j->spares, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		j->spares = s;
		j->capspares = cap;
	}
	j->spares[j->nspares++] = num;
	if (num >= j->spare_seq)
		j->spare_seq = num + 1;
	return 0;
}

/* ---- segment files ----------------------------------------------------- */

static void hdr_encode(const struct kvj *j, uint64_t first, uint64_t size,
		       unsigned char h[SEG_HDR])
{
	memset(h, 0, SEG_HDR);
	put32(h + 4, MAGIC);
	h[8] = VERSION;
	h[10] = SEG_HDR;
	put32(h + 12, j->o.shard_id);
	put64(h + 16, j->id);
	put64(h + 24, first);
	put64(h + 32, size);
	put32(h, sum32(h + 4, SEG_HDR - 4, 0));
}

/* Check a segment header against its name and this journal. */
static int hdr_check(struct kvj *j, const unsigned char *h, uint64_t first,
		     uint64_t size, int first_seen)
{
	if (get32(h) != sum32(h + 4, SEG_HDR - 4, 0) || get32(h + 4) != MAGIC)
		return -EBADMSG;
	if (h[8] != VERSION || h[9] != 0 || h[10] != SEG_HDR || h[11] != 0)
		return -EBADMSG;
	if (get32(h + 12) != j->o.shard_id || get64(h + 24) != first ||
	    get64(h + 32) != size)
		return -EBADMSG;
	if (first_seen)
		j->id = get64(h + 16);
	else if (get64(h + 16) != j->id)
		return -EBADMSG;
	return 0;
}

/* A zeroed file of size bytes named tmp in dirfd: allocated and written
 * with zeros, then flushed, so that a later append only overwrites blocks
 * that exist (no size or extent change, nothing but the data for
 * fdatasync to write).  fallocate first finds a full disk at once and
 * keeps the file contiguous.  0, or a negative errno with nothing left
 * behind. */
static int zeroed_file(int dirfd, const char *tmp, uint64_t size)
{
	uint64_t off;
	int fd, rc;

	fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = posix_fallocate(fd, 0, (off_t)size);
	if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
		rc = -rc;
		goto fail;
	}
	for (off = 0; off < size; off += ZERO_CHUNK) {
		uint64_t end =
		    off + ZERO_CHUNK < size ? off + ZERO_CHUNK : size;

		rc = zero_range(fd, off, end);
		if (rc < 0)
			goto fail;
	}
	rc = sync_fd(fd);
fail:
	close(fd);
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

/* Give a finished file in the directory the next spare's name. */
static int name_spare(struct kvj *j, const char *from)
{
	char name[64];

	spare_name(name, sizeof(name), j->spare_seq);
	if (renameat(j->dirfd, from, j->dirfd, name) < 0)
		return -errno;
	return push_spare(j, j->spare_seq);
}

/* A new spare, made on the caller's thread (kvj_prepare_spare makes one on
 * another). */
static int create_spare(struct kvj *j)
{
	int rc = zeroed_file(j->dirfd, TMP_NAME, j->o.segment_size);

	if (rc < 0)
		return rc;
	rc = name_spare(j, TMP_NAME);
	if (rc < 0)
		unlinkat(j->dirfd, TMP_NAME, 0);
	else
		j->made++;
	return rc;
}

int kvj_prepare_spare(const char *dir, uint64_t size)
{
	int dirfd, rc;

	if (size < KVJ_MIN_SEGMENT_SIZE || size % 8)
		return -EINVAL;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	rc = zeroed_file(dirfd, PREP_NAME, size);
	/* Whole and flushed before it has the name kvj_adopt_spare takes. */
	if (rc == 0 && renameat(dirfd, PREP_NAME, dirfd, READY_NAME) < 0) {
		rc = -errno;
		unlinkat(dirfd, PREP_NAME, 0);
	}
	close(dirfd);
	return rc;
}

int kvj_adopt_spare(struct kvj *j)
{
	struct stat st;
	int rc;

	if (fstatat(j->dirfd, READY_NAME, &st, 0) < 0)
		return errno == ENOENT ? 0 : -errno;
	/* Recycled segments may have made spares meanwhile: no more than
	 * max_spares are kept, whoever made them. */
	if ((uint64_t)st.st_size != j->o.segment_size ||
	    j->nspares >= j->o.max_spares) {
		unlinkat(j->dirfd, READY_NAME, 0);
		return 0;
	}
	rc = name_spare(j, READY_NAME);
	return rc < 0 ? rc : 1;
}

uint64_t kvj_segment_size(const struct kvj *j)
{
	return j->o.segment_size;
}

/* Open the last spare; one of another size (the option changed) is
 * deleted and the next one tried; none left, a new one is made. */
static int take_spare(struct kvj *j)
{
	for (;;) {
		int rc = j->nspares ? 0 : create_spare(j);

		if (rc < 0)
			return rc;
		unsigned num = j->spares[--j->nspares];
		char name[64];
		struct stat st;
		int fd;

		spare_name(name, sizeof(name), num);
		fd = openat(j->dirfd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 &&
		    (uint64_t)st.st_size == j->o.segment_size) {
			j->taken = num; /* the name activate renames */
			return fd;
		}
		close(fd);
		unlinkat(j->dirfd, name, 0);
	}
}

/* Make a spare the new current segment starting at LSN first: header,
 * flush, rename, directory flush, in that order, so a segment that has its
 * name always has a valid header.  The caller has flushed the previous
 * segment (a later segment's existence promises the earlier is whole). */
static int activate(struct kvj *j, uint64_t first)
{
	unsigned char h[SEG_HDR];
	char from[64], to[64];
	int fd, rc;

	fd = take_spare(j);
	if (fd < 0)
		return fd;
	spare_name(from, sizeof(from), j->taken);
	seg_name(to, sizeof(to), first);
	hdr_encode(j, first, j->o.segment_size, h);
	rc = pwrite_all(fd, h, SEG_HDR, 0);
	if (rc == 0)
		rc = sync_fd(fd);
	if (rc == 0 && renameat(j->dirfd, from, j->dirfd, to) < 0)
		rc = -errno;
	if (rc == 0 && fsync(j->dirfd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = push_seg(j, first);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	if (j->fd >= 0)
		close(j->fd);
	j->fd = fd;
	j->seg_size = j->o.segment_size;
	j->seed = seg_seed(j->id, first);
	j->tail = SEG_HDR;
	return 0;
}

/* ---- append ------------------------------------------------------------ */

static int fail(struct kvj *j, int err)
{
	if (!j->err)
		j->err = err;
	return j->err;
}

/* Where a batch goes: walk the records, start a new segment where one
 * does not fit.  Returns the number of new segments it needs, or -E2BIG. */
static int plan(const struct kvj *j, const uint64_t *ext, size_t n,
		uint64_t *total)
{
	uint64_t t = j->tail, size = j->seg_size, max;
	int need = 0;

	max = j->o.segment_size - SEG_HDR;
	*total = 0;
	for (size_t i = 0; i < n; i++) {
		if (ext[i] > max)
			return -E2BIG;
		if (t + ext[i] > size) {
			need++;
			t = SEG_HDR;
			size = j->o.segment_size;
		}
		t += ext[i];
		*total += ext[i];
	}
	return need;
}

/* Frame one record in place; the payload is already at p + REC_HDR. */
static void frame(unsigned char *p, uint64_t ext, uint32_t len, uint64_t lsn,
		  uint64_t synced, uint8_t type, uint64_t seed)
{
	put32(p + 4, len);
	put64(p + 8, lsn);
	put64(p + 16, synced);
	p[24] = type;
	memset(p + REC_HDR + len, 0, ext - REC_HDR - len);
	put32(p, sum32(p + 4, ext - 4, seed));
}

typedef void (*fill_fn)(const void *src, size_t i, unsigned char *dst,
			uint8_t *type);
typedef uint64_t (*size_fn)(const void *src, size_t i);

/* Write the framed batch: one pwrite per segment it touches; crossing into
 * a new segment flushes the old one first.  Any failure fails the journal. */
static int write_batch(struct kvj *j, const uint64_t *len, const uint64_t *ext,
		       size_t n, const void *src, fill_fn fill)
{
	uint64_t start = 0, off = 0, t = j->tail, size = j->seg_size;
	uint64_t lsn = j->next_lsn;
	int rc;

	for (size_t i = 0; i <= n; i++) {
		if (i == n || t + ext[i] > size) {
			/* [start, off) goes at the tail of this segment */
			rc = pwrite_all(j->fd, j->buf + start, off - start,
					j->tail);
			if (rc < 0)
				return fail(j, rc);
			j->tail = t;
			j->next_lsn = lsn;
			if (i == n)
				break;
			rc = sync_fd(j->fd);
			if (rc == 0)
				rc = activate(j, lsn);
			if (rc < 0)
				return fail(j, rc);
			j->synced_lsn = lsn - 1;
			start = off;
			t = SEG_HDR;
			size = j->seg_size;
		}
		unsigned char *p = j->buf + off;
		uint8_t type = 0;

		fill(src, i, p + REC_HDR, &type);
		frame(p, ext[i], (uint32_t)len[i], lsn, j->synced_lsn, type,
		      j->seed);
		t += ext[i];
		off += ext[i];
		lsn++;
	}
	return 0;
}

/* Spares an append may take: all of them, or those beyond the reserve. */
static unsigned usable_spares(const struct kvj *j, int reserve)
{
	if (reserve)
		return j->nspares;
	return j->nspares > j->o.reserve ? j->nspares - j->o.reserve : 0;
}

static int append_common(struct kvj *j, size_t n, const void *src, size_fn size,
			 fill_fn fill, uint64_t *first_lsn, int reserve)
{
	uint64_t *len, *ext, total;
	int need, rc;

	if (j->err)
		return j->err;
	if (first_lsn)
		*first_lsn = j->next_lsn;
	if (n == 0)
		return 0;
	len = malloc(2 * n * sizeof(*len));
	if (!len)
		return -ENOMEM;
	ext = len + n;
	for (size_t i = 0; i < n; i++) {
		len[i] = size(src, i);
		ext[i] = len[i] > UINT32_MAX ? UINT64_MAX / 2
					     : rec_extent((uint32_t)len[i]);
	}
	rc = need = plan(j, ext, n, &total);
	if (rc < 0)
		goto out;
	if (total > j->bufcap) {
		unsigned char *b = realloc(j->buf, total);

		rc = -ENOMEM;
		if (!b)
			goto out;
		j->buf = b;
		j->bufcap = total;
	}
	/* Every segment the batch needs exists before a byte is written: a
	 * full disk refuses the batch whole and the journal goes on (taking
	 * the reserved spares only when the caller may). */
	while (usable_spares(j, reserve) < (unsigned)need) {
		rc = create_spare(j);
		if (rc < 0)
			goto out;
	}
	rc = write_batch(j, len, ext, n, src, fill);
out:
	free(len);
	return rc;
}

static uint64_t entry_size(const void *src, size_t i)
{
	return ((const struct kvj_entry *)src)[i].len;
}

static void entry_fill(const void *src, size_t i, unsigned char *dst,
		       uint8_t *type)
{
	const struct kvj_entry *e = (const struct kvj_entry *)src + i;

	if (e->len)
		memcpy(dst, e->data, e->len);
	*type = e->type;
}

int kvj_append(struct kvj *j, const struct kvj_entry *e, size_t n,
	       uint64_t *first_lsn)
{
	return append_common(j, n, e, entry_size, entry_fill, first_lsn, 0);
}

/* ---- key-value records ------------------------------------------------- */

/* A value of a type other than 0 takes the typed record, whose header
 * holds one byte more: a journal of plain values is what it always was. */
static size_t rec_hdr(const struct kvj_rec *r)
{
	return r->type == KVJ_PUT && r->vtype ? KVJ_REC_HDR + 1 : KVJ_REC_HDR;
}

static uint8_t rec_type(const struct kvj_rec *r)
{
	return r->type == KVJ_PUT && r->vtype ? KVJ_PUT_TYPED : r->type;
}

size_t kvj_rec_size(const struct kvj_rec *r)
{
	return rec_hdr(r) + (size_t)r->klen + r->vlen;
}

int kvj_rec_encode(const struct kvj_rec *r, void *buf, size_t cap)
{
	unsigned char *p = buf;
	size_t n = kvj_rec_size(r), h = rec_hdr(r);

	if (n > cap || n > INT32_MAX)
		return -ENOBUFS;
	put32(p, r->klen);
	put32(p + 4, r->vlen);
	put64(p + 8, r->expiry_ms);
	if (h > KVJ_REC_HDR)
		p[KVJ_REC_HDR] = r->vtype;
	if (r->klen)
		memcpy(p + h, r->key, r->klen);
	if (r->vlen)
		memcpy(p + h + r->klen, r->val, r->vlen);
	return (int)n;
}

int kvj_rec_decode(uint8_t type, const void *payload, uint32_t len,
		   struct kvj_rec *r)
{
	const unsigned char *p = payload;
	size_t h = type == KVJ_PUT_TYPED ? KVJ_REC_HDR + 1 : KVJ_REC_HDR;

	if (type < KVJ_PUT || type > KVJ_PUT_TYPED || len < h)
		return -EBADMSG;
	r->type = type == KVJ_PUT_TYPED ? KVJ_PUT : type;
	r->vtype = type == KVJ_PUT_TYPED ? p[KVJ_REC_HDR] : 0;
	r->klen = get32(p);
	r->vlen = get32(p + 4);
	r->expiry_ms = get64(p + 8);
	if ((uint64_t)h + r->klen + r->vlen != len)
		return -EBADMSG;
	if (r->type != KVJ_PUT && r->vlen != 0)
		return -EBADMSG;
	/* type 0 is the plain record's: a typed one never holds it */
	if (type == KVJ_PUT_TYPED && !r->vtype)
		return -EBADMSG;
	r->key = p + h;
	r->val = p + h + r->klen;
	return 0;
}

static uint64_t rec_size(const void *src, size_t i)
{
	return kvj_rec_size((const struct kvj_rec *)src + i);
}

static void rec_fill(const void *src, size_t i, unsigned char *dst,
		     uint8_t *type)
{
	const struct kvj_rec *r = (const struct kvj_rec *)src + i;

	kvj_rec_encode(r, dst, kvj_rec_size(r));
	*type = rec_type(r);
}

int kvj_append_recs(struct kvj *j, const struct kvj_rec *r, size_t n,
		    uint64_t *first_lsn)
{
	return append_common(j, n, r, rec_size, rec_fill, first_lsn, 0);
}

int kvj_append_recs_reserve(struct kvj *j, const struct kvj_rec *r, size_t n,
			    uint64_t *first_lsn)
{
	return append_common(j, n, r, rec_size, rec_fill, first_lsn, 1);
}

/* ---- flush, release, accessors ----------------------------------------- */

int kvj_sync(struct kvj *j)
{
	int rc;

	if (j->err)
		return j->err;
	rc = sync_fd(j->fd);
	if (rc < 0)
		return fail(j, rc);
	j->synced_lsn = j->next_lsn - 1;
	return 0;
}

int kvj_release(struct kvj *j, uint64_t upto_lsn)
{
	unsigned done = 0;
	int rc = 0;

	/* segment i holds firsts[i] .. firsts[i + 1] - 1 */
	while (done + 1 < j->nsegs && j->firsts[done + 1] - 1 <= upto_lsn) {
		char from[64], to[64];

		seg_name(from, sizeof(from), j->firsts[done]);
		if (j->nspares < j->o.max_spares) {
			spare_name(to, sizeof(to), j->spare_seq);
			if (renameat(j->dirfd, from, j->dirfd, to) < 0) {
				rc = -errno;
				break;
			}
			rc = push_spare(j, j->spare_seq);
			if (rc < 0)
				break;
		} else if (unlinkat(j->dirfd, from, 0) < 0) {
			rc = -errno;
			break;
		}
		done++;
	}
	if (done == 0)
		return rc;
	memmove(j->firsts, j->firsts + done,
		(j->nsegs - done) * sizeof(*j->firsts));
	j->nsegs -= done;
	/* Not flushing the directory loses nothing: a segment that comes
	 * back after a crash lies wholly below the checkpoint and is released
	 * again at the next open. */
	return rc < 0 ? rc : (int)done;
}

uint64_t kvj_next_lsn(const struct kvj *j)
{
	return j->next_lsn;
}

uint64_t kvj_synced_lsn(const struct kvj *j)
{
	return j->synced_lsn;
}

int kvj_error(const struct kvj *j)
{
	return j->err;
}

unsigned kvj_segments(const struct kvj *j)
{
	return j->nsegs;
}

unsigned kvj_spares(const struct kvj *j)
{
	return j->nspares;
}

unsigned kvj_reserve(const struct kvj *j)
{
	return j->o.reserve;
}

uint64_t kvj_spares_made(const struct kvj *j)
{
	return j->made;
}

int kvj_debug_fd(const struct kvj *j)
{
	return j->fd;
}

void kvj_close(struct kvj *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	if (j->dirfd >= 0)
		close(j->dirfd);
	free(j->firsts);
	free(j->spares);
	free(j->buf);
	free(j);
}

/* ---- recovery ---------------------------------------------------------- */

struct view {
	uint64_t lsn, synced, ext;
	uint32_t len;
	uint8_t type;
};

/* Is there a whole record with a good checksum at off? */
static int rec_ok(const unsigned char *m, uint64_t size, uint64_t off,
		  uint64_t seed, struct view *v)
{
	const unsigned char *p = m + off;

	if (off + REC_HDR > size)
		return 0;
	v->len = get32(p + 4);
	v->ext = rec_extent(v->len);
	if (v->len > size || v->ext > size - off)
		return 0;
	v->lsn = get64(p + 8);
	v->synced = get64(p + 16);
	v->type = p[24];
	return get32(p) == sum32(p + 4, v->ext - 4, seed);
}

/* How one segment's scan ended. */
struct seg_end {
	int fd;		   /* open, for the tail */
	uint64_t size;	   /* file size */
	uint64_t off;	   /* first offset without a valid next record */
	uint64_t expected; /* the LSN that was expected there */
	uint64_t cand_end; /* end of the last valid record beyond off */
	uint64_t cand_lsn; /* highest LSN beyond off */
	int proof;	   /* a record beyond off proves off was durable */
	int hdr_bad;
};

/* Past the end of the records: look for valid records further on with an
 * LSN at or above the one expected.  In a segment that is not the last,
 * any is proof of corruption (the writer flushed it whole before starting
 * the next); in the last, only one written after the missing LSN was
 * flushed (its synced field says so): the rest are a torn write's
 * leftovers, which may reach the disk in any order. */
static void look_beyond(const unsigned char *m, uint64_t seed, int last,
			struct seg_end *e)
{
	struct view v;

	e->cand_end = e->off;
	for (uint64_t o = e->off + 8; o + REC_HDR <= e->size; o += 8) {
		uint64_t lsn = get64(m + o + 8);

		/* A record this segment's writer put at o follows records
		 * expected..lsn-1, each at least rec_extent(0) bytes, from
		 * off on; and its synced field is below its own LSN.  Only
		 * such a candidate is checksummed: a recycled segment is
		 * full of an earlier life's bytes, and checksumming each
		 * 8-byte offset's "length" of them took seconds at startup. */
		if (lsn < e->expected ||
		    lsn - e->expected > (o - e->off) / rec_extent(0) ||
		    get64(m + o + 16) >= lsn ||
		    !rec_ok(m, e->size, o, seed, &v))
			continue;
		if (o + v.ext > e->cand_end)
			e->cand_end = o + v.ext;
		if (v.lsn > e->cand_lsn)
			e->cand_lsn = v.lsn;
		if (!last || v.synced >= e->expected)
			e->proof = 1;
	}
}

/* Replay segment i (records above ckpt go to fn) and say how it ended. */
static int scan_seg(struct kvj *j, unsigned i, int first_seen, int last,
		    uint64_t ckpt, kvj_replay_fn fn, void *arg,
		    struct kvj_report *rep, struct seg_end *e)
{
	unsigned char *m = MAP_FAILED;
	char name[64];
	struct stat st;
	struct view v;
	uint64_t seed;
	int rc = 0;

	memset(e, 0, sizeof(*e));
	e->expected = j->firsts[i];
	seg_name(name, sizeof(name), j->firsts[i]);
	e->fd = openat(j->dirfd, name, O_RDWR | O_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	if (fstat(e->fd, &st) < 0)
		return -errno; /* the caller closes e->fd */
	e->size = (uint64_t)st.st_size;
	if (e->size >= SEG_HDR) {
		m = mmap(NULL, e->size, PROT_READ, MAP_SHARED, e->fd, 0);
		if (m == MAP_FAILED)
			return -errno;
	}
	if (m == MAP_FAILED ||
	    hdr_check(j, m, j->firsts[i], e->size, first_seen) < 0) {
		e->hdr_bad = 1;
		goto out;
	}
	seed = seg_seed(j->id, j->firsts[i]);
	e->off = SEG_HDR;
	while (rec_ok(m, e->size, e->off, seed, &v) && v.lsn == e->expected) {
		if (v.lsn > ckpt && fn) {
			rc =
			    fn(arg, v.lsn, v.type, m + e->off + REC_HDR, v.len);
			if (rc)
				goto out;
			rep->replayed++;
		}
		if (!rep->first_lsn)
			rep->first_lsn = v.lsn;
		rep->last_lsn = v.lsn;
		e->off += v.ext;
		e->expected++;
	}
	look_beyond(m, seed, last, e);
out:
	if (m != MAP_FAILED)
		munmap(m, e->size);
	rep->segments++;
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Find the segments and spares; a half-made or unadopted spare is
 * deleted (no helper runs while the journal opens). */
static int list_dir(struct kvj *j)
{
	struct dirent *d;
	int fd, rc = 0;
	DIR *dir;

	fd = dup(j->dirfd);
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	while (rc == 0 && (d = readdir(dir)) != NULL) {
		uint64_t first;
		unsigned num;
		char tail[8];

		if (sscanf(d->d_name, "journal-spare-%u.kv%1s", &num, tail) ==
			2 &&
		    strcmp(tail, "j") == 0)
			rc = push_spare(j, num);
		else if (strlen(d->d_name) == 28 &&
			 sscanf(d->d_name, "journal-%16" SCNx64 ".kv%1s",
				&first, tail) == 2 &&
			 strcmp(tail, "j") == 0)
			rc = push_seg(j, first);
		else if (strcmp(d->d_name, TMP_NAME) == 0 ||
			 strcmp(d->d_name, PREP_NAME) == 0 ||
			 strcmp(d->d_name, READY_NAME) == 0)
			unlinkat(j->dirfd, d->d_name, 0);
	}
	closedir(dir);
	if (j->nsegs > 1)
		qsort(j->firsts, j->nsegs, sizeof(*j->firsts), cmp_u64);
	return rc;
}

/* Delete segments from index k on (the operator chose truncation). */
static int drop_from(struct kvj *j, unsigned k)
{
	while (j->nsegs > k) {
		char name[64];

		seg_name(name, sizeof(name), j->firsts[j->nsegs - 1]);
		if (unlinkat(j->dirfd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		j->nsegs--;
	}
	return fsync(j->dirfd) < 0 ? -errno : 0;
}

static const char *verdict(const struct kvj *j, unsigned i,
			   const struct seg_end *e)
{
	if (e->hdr_bad)
		return "bad segment header";
	if (e->proof)
		return "bad record followed by valid records";
	if (i + 1 < j->nsegs && j->firsts[i + 1] != e->expected)
		return "next segment does not continue the LSNs";
	return NULL;
}

static void report_bad(struct kvj *j, unsigned i, const struct seg_end *e,
		       const char *why, struct kvj_report *rep)
{
	char name[64];
	int trunc = j->o.flags & KVJ_OPEN_TRUNCATE;

	seg_name(name, sizeof(name), j->firsts[i]);
	snprintf(rep->bad_file, sizeof(rep->bad_file), "%s/%s", j->dir, name);
	rep->bad_offset = e->off;
	snprintf(rep->msg, sizeof(rep->msg),
		 "journal %s: %s offset %" PRIu64 ": %s (LSN %" PRIu64
		 " expected)%s",
		 trunc ? "truncated" : "corrupt", rep->bad_file, e->off, why,
		 e->expected,
		 trunc ? ": that LSN and every later one dropped"
		       : "; truncating there drops that LSN and every later "
			 "one");
}

/* Scan from segment s to the end.  On return *tail is the segment the
 * journal goes on from (fd -1: none usable, start a new one). */
static int recover(struct kvj *j, unsigned s, uint64_t ckpt, kvj_replay_fn fn,
		   void *arg, struct kvj_report *rep, struct seg_end *tail,
		   unsigned *tail_idx)
{
	struct seg_end e;
	int rc;

	e.fd = -1;
	tail->fd = -1;
	tail->expected = j->firsts[s];
	for (unsigned i = s; i < j->nsegs; i++) {
		const char *why;

		rc = scan_seg(j, i, i == s, i + 1 == j->nsegs, ckpt, fn, arg,
			      rep, &e);
		if (rc)
			goto fail;
		why = verdict(j, i, &e);
		if (why) {
			report_bad(j, i, &e, why, rep);
			rc = -EBADMSG;
			if (!(j->o.flags & KVJ_OPEN_TRUNCATE))
				goto fail;
			rc = drop_from(j, e.hdr_bad ? i : i + 1);
			if (rc < 0)
				goto fail;
		}
		if (e.hdr_bad) {
			close(e.fd);
			break;
		}
		if (tail->fd >= 0)
			close(tail->fd);
		*tail = e;
		*tail_idx = i;
	}
	return 0;
fail:
	if (e.fd >= 0)
		close(e.fd);
	if (tail->fd >= 0)
		close(tail->fd);
	tail->fd = -1;
	return rc;
}

/* Continue in the tail segment at its end: wipe what lies beyond (a torn
 * write's leftovers must never line up with a later record), flush, so
 * that every replayed record is durable before anything builds on it. */
static int resume_tail(struct kvj *j, struct seg_end *t, unsigned idx,
		       struct kvj_report *rep)
{
	char name[64];
	int rc = 0;

	seg_name(name, sizeof(name), j->firsts[idx]);
	snprintf(rep->bad_file, sizeof(rep->bad_file), "%s/%s", j->dir, name);
	rep->bad_offset = t->off;
	if (t->cand_end > t->off) {
		rc = zero_range(t->fd, t->off, t->cand_end);
		rep->dropped += t->cand_end - t->off;
	}
	if (rc == 0)
		rc = sync_fd(t->fd);
	if (rc < 0) {
		close(t->fd);
		return rc;
	}
	j->fd = t->fd;
	j->seg_size = t->size;
	j->seed = seg_seed(j->id, j->firsts[idx]);
	j->tail = t->off;
	j->next_lsn = t->expected;
	return 0;
}

/* Start a new segment at LSN first (no usable tail, or the checkpoint is
 * ahead of the journal: LSNs inside a segment stay consecutive). */
static int start_segment(struct kvj *j, uint64_t first)
{
	int rc = 0;

	if (j->fd >= 0) {
		rc = sync_fd(j->fd);
		if (rc < 0)
			return rc;
	}
	if (j->nspares == 0)
		rc = create_spare(j);
	if (rc == 0)
		rc = activate(j, first);
	if (rc == 0)
		j->next_lsn = first;
	return rc;
}

static int check_opts(const struct kvj_opts *in, struct kvj_opts *o)
{
	*o = *in;
	if (!o->segment_size)
		o->segment_size = KVJ_DEFAULT_SEGMENT_SIZE;
	if (!o->max_spares)
		o->max_spares = KVJ_DEFAULT_MAX_SPARES;
	if (o->max_spares < o->reserve + 1)
		o->max_spares = o->reserve + 1;
	if (o->segment_size < KVJ_MIN_SEGMENT_SIZE || o->segment_size % 8 ||
	    o->flags & ~KVJ_OPEN_TRUNCATE)
		return -EINVAL;
	return 0;
}

static int open_scan(struct kvj *j, uint64_t ckpt, kvj_replay_fn fn, void *arg,
		     struct kvj_report *rep)
{
	struct seg_end t;
	unsigned s = 0, idx = 0;
	int rc;

	/* start at the last segment that holds ckpt + 1 */
	while (s + 1 < j->nsegs && j->firsts[s + 1] <= ckpt + 1)
		s++;
	if (j->firsts[s] > ckpt + 1) {
		snprintf(rep->msg, sizeof(rep->msg),
			 "journal corrupt: %s starts at LSN %" PRIu64
			 " but the checkpoint needs LSN %" PRIu64 " on",
			 j->dir, j->firsts[s], ckpt + 1);
		return -EBADMSG;
	}
	rc = recover(j, s, ckpt, fn, arg, rep, &t, &idx);
	if (rc)
		return rc;
	if (t.fd >= 0) {
		rc = resume_tail(j, &t, idx, rep);
		if (rc < 0)
			return rc;
	}
	if (t.fd < 0 || j->next_lsn < ckpt + 1) {
		if (t.fd < 0 && getrandom(&j->id, sizeof(j->id), 0) < 0)
			return -errno;
		rc = start_segment(j, t.expected > ckpt + 1 ? t.expected
							    : ckpt + 1);
	}
	return rc;
}

int kvj_open(const char *dir, const struct kvj_opts *opts, uint64_t ckpt_lsn,
	     kvj_replay_fn fn, void *arg, struct kvj_report *rep,
	     struct kvj **out)
{
	struct kvj_report dummy;
	struct kvj *j;
	int rc;

	*out = NULL;
	if (!rep)
		rep = &dummy;
	memset(rep, 0, sizeof(*rep));
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fd = -1;
	j->dirfd = -1;
	rc = check_opts(opts, &j->o);
	if (rc < 0)
		goto fail;
	rc = -ENAMETOOLONG;
	if (strlen(dir) >= sizeof(j->dir))
		goto fail;
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = list_dir(j);
	if (rc < 0)
		goto fail;
	if (j->nsegs == 0) {
		if (getrandom(&j->id, sizeof(j->id), 0) < 0) {
			rc = -errno;
			goto fail;
		}
		rc = start_segment(j, ckpt_lsn + 1);
	} else {
		rc = open_scan(j, ckpt_lsn, fn, arg, rep);
	}
	if (rc)
		goto fail;
	j->synced_lsn = j->next_lsn - 1;
	/* segments wholly below the checkpoint: recycled now */
	kvj_release(j, ckpt_lsn);
	j->made = 0; /* kvj_spares_made counts the appends' own */
	*out = j;
	return 0;
fail:
	kvj_close(j);
	return rc;
}

/* ---- reset (a replica's full copy) --------------------------------------- */

int kvj_reset(struct kvj *j, uint64_t next)
{
	int rc;

	if (j->err)
		return j->err;
	if ((rc = sync_fd(j->fd)) < 0)
		return fail(j, rc);
	close(j->fd);
	j->fd = -1;
	/* Every segment goes, the current one too: spares keep their old
	 * bytes, which the new id makes invalid for good. */
	while (j->nsegs > 0) {
		char from[64], to[64];

		seg_name(from, sizeof(from), j->firsts[j->nsegs - 1]);
		if (j->nspares < j->o.max_spares) {
			spare_name(to, sizeof(to), j->spare_seq);
			if (renameat(j->dirfd, from, j->dirfd, to) < 0)
				return fail(j, -errno);
			if ((rc = push_spare(j, j->spare_seq)) < 0)
				return fail(j, rc);
		} else if (unlinkat(j->dirfd, from, 0) < 0) {
			return fail(j, -errno);
		}
		j->nsegs--;
	}
	if (fsync(j->dirfd) < 0)
		return fail(j, -errno);
	if (getrandom(&j->id, sizeof(j->id), 0) < 0)
		return fail(j, -errno);
	if ((rc = start_segment(j, next)) < 0)
		return fail(j, rc);
	j->synced_lsn = next - 1;
	return 0;
}

/* ---- readers ------------------------------------------------------------- */

#define RD_CHUNK (1u << 20)

struct kvj_reader {
	int dirfd;
	uint32_t shard;
	int fd;		/* the segment being read, or -1 */
	uint64_t size;	/* its size */
	uint64_t seed;	/* its record checksum seed */
	uint64_t first; /* its first LSN (its name) */
	uint64_t off;	/* offset of the next record in it */
	uint64_t next;	/* that record's LSN */
	unsigned char *buf;
	size_t cap;
	uint64_t boff, blen; /* the bytes of the file held in buf */
};

/* The first LSN of the newest segment whose first LSN is at most lsn. */
static int rd_find(struct kvj_reader *r, uint64_t lsn, uint64_t *first)
{
	struct dirent *d;
	int fd = dup(r->dirfd), found = 0;
	DIR *dir;

	if (fd < 0)
		return -errno;
	if (!(dir = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	rewinddir(dir);
	while ((d = readdir(dir)) != NULL) {
		uint64_t f;
		char tail[8];

		if (strlen(d->d_name) == 28 &&
		    sscanf(d->d_name, "journal-%16" SCNx64 ".kv%1s", &f,
			   tail) == 2 &&
		    strcmp(tail, "j") == 0 && f <= lsn &&
		    (!found || f > *first)) {
			*first = f;
			found = 1;
		}
	}
	closedir(dir);
	return found ? 0 : -ENOENT;
}

/* Open the segment that starts at first; -ENOENT when it is gone. */
static int rd_segment(struct kvj_reader *r, uint64_t first)
{
	unsigned char h[SEG_HDR];
	char name[64];
	struct stat st;
	ssize_t n;
	int fd;

	seg_name(name, sizeof(name), first);
	fd = openat(r->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, h, SEG_HDR, 0);
	if (n != SEG_HDR || fstat(fd, &st) < 0 ||
	    get32(h) != sum32(h + 4, SEG_HDR - 4, 0) || get32(h + 4) != MAGIC ||
	    get32(h + 12) != r->shard || get64(h + 24) != first) {
		close(fd);
		return -ENOENT; /* recycled while we looked */
	}
	if (r->fd >= 0)
		close(r->fd);
	r->fd = fd;
	r->size = (uint64_t)st.st_size;
	r->seed = seg_seed(get64(h + 16), first);
	r->first = first;
	r->off = SEG_HDR;
	r->next = first;
	r->blen = 0;
	return 0;
}

/* A record due in the reader's segment is not there and no segment starts
 * at its LSN: if the segment is still the same file under its name, with
 * the same journal id, nothing recycled it, so the record is corrupt.
 * -EBADMSG then, else -ENOENT. */
static int rd_gone_or_bad(struct kvj_reader *r)
{
	unsigned char h[SEG_HDR];
	struct stat a, b;
	char name[64];
	int fd, same;

	seg_name(name, sizeof(name), r->first);
	fd = openat(r->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	same = fstat(fd, &a) == 0 && fstat(r->fd, &b) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
	       pread(fd, h, SEG_HDR, 0) == SEG_HDR &&
	       seg_seed(get64(h + 16), r->first) == r->seed;
	close(fd);
	return same ? -EBADMSG : -ENOENT;
}

/* Bytes [off, off + n) of the segment into buf; fresh reads them from
 * the file again (what was read before the writer got there is stale).
 * NULL past the end of the file or on a read error. */
static const unsigned char *rd_bytes(struct kvj_reader *r, uint64_t off,
				     uint64_t n, int fresh)
{
	uint64_t want;
	ssize_t got;

	if (off + n > r->size)
		return NULL;
	if (!fresh && off >= r->boff && off + n <= r->boff + r->blen)
		return r->buf + (off - r->boff);
	want = n > RD_CHUNK ? n : RD_CHUNK;
	if (off + want > r->size)
		want = r->size - off;
	if (want > r->cap) {
		unsigned char *b = realloc(r->buf, want);

		if (!b)
			return NULL;
		r->buf = b;
		r->cap = want;
	}
	got = pread(r->fd, r->buf, want, (off_t)off);
	r->blen = 0;
	if (got < (ssize_t)n)
		return NULL;
	r->boff = off;
	r->blen = (uint64_t)got;
	return r->buf;
}

/* The record at the reader's offset, if it is whole, valid, and the one
 * expected. */
static int rd_record(struct kvj_reader *r, int fresh, struct view *v,
		     const unsigned char **p)
{
	const unsigned char *h = rd_bytes(r, r->off, REC_HDR, fresh);

	if (!h)
		return 0;
	v->len = get32(h + 4);
	v->ext = rec_extent(v->len);
	if (v->len > r->size || v->ext > r->size - r->off)
		return 0;
	if (!(*p = rd_bytes(r, r->off, v->ext, 0)))
		return 0;
	v->lsn = get64(*p + 8);
	v->type = (*p)[24];
	return v->lsn == r->next &&
	       get32(*p) == sum32(*p + 4, v->ext - 4, r->seed);
}

int kvj_reader_next(struct kvj_reader *r, uint64_t upto, uint64_t *lsn,
		    uint8_t *type, const void **payload, uint32_t *len)
{
	const unsigned char *p;
	struct view v;
	int rc;

	if (r->next > upto)
		return 0;
	for (int tries = 0;; tries++) {
		/* Known written: a miss in the buffer may be stale bytes,
		 * so look at the file itself before giving up on it. */
		if (rd_record(r, 0, &v, &p) || rd_record(r, 1, &v, &p))
			break;
		/* The segment ends here, and the record is at the start of
		 * the next one; or this one was recycled under us. */
		if (tries)
			return -ENOENT;
		if ((rc = rd_segment(r, r->next)) < 0)
			return rc == -ENOENT ? rd_gone_or_bad(r) : -ENOENT;
	}
	*lsn = v.lsn;
	*type = v.type;
	*payload = p + REC_HDR;
	*len = v.len;
	r->off += v.ext;
	r->next++;
	return 1;
}

uint64_t kvj_reader_lsn(const struct kvj_reader *r)
{
	return r->next;
}

void kvj_reader_close(struct kvj_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->dirfd >= 0)
		close(r->dirfd);
	free(r->buf);
	free(r);
}

/* Skip the records of the segment below from (all written: the caller
 * asks only for LSNs it knows were). */
static int rd_skip_to(struct kvj_reader *r, uint64_t from)
{
	const unsigned char *p;
	struct view v;

	while (r->next < from) {
		if (!rd_record(r, 0, &v, &p) && !rd_record(r, 1, &v, &p))
			return -ENOENT;
		r->off += v.ext;
		r->next++;
	}
	return 0;
}

int kvj_reader_open(const char *dir, uint32_t shard_id, uint64_t from,
		    struct kvj_reader **out)
{
	struct kvj_reader *r = calloc(1, sizeof(*r));
	uint64_t first = 0;
	int rc = -ENOMEM;

	*out = NULL;
	if (!r)
		return rc;
	r->fd = -1;
	r->shard = shard_id;
	r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	/* A segment renamed between the listing and the open: look again. */
	for (int tries = 0; tries < 3; tries++) {
		if ((rc = rd_find(r, from, &first)) < 0)
			goto fail;
		if ((rc = rd_segment(r, first)) != -ENOENT)
			break;
	}
	if (rc < 0 || (rc = rd_skip_to(r, from)) < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	kvj_reader_close(r);
	return rc;
}
