/* journal_write.c - the journal's writer: segment files and spares, the group
 * append (one write per batch, framed records), the flush, recycling
 * below a checkpoint, and kvj_reset (journal.h says what each call
 * promises; journal_int.h lists the other files of the journal).
 */
#include "journal_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>

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

int jn_zero_range(int fd, uint64_t off, uint64_t end)
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

int jn_push_seg(struct kvj *j, uint64_t first)
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

int jn_push_spare(struct kvj *j, unsigned num)
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

		rc = jn_zero_range(fd, off, end);
		if (rc < 0)
			goto fail;
	}
	rc = jn_sync_fd(fd);
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
	return jn_push_spare(j, j->spare_seq);
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
	jn_hdr_encode(j, first, j->o.segment_size, h);
	rc = pwrite_all(fd, h, SEG_HDR, 0);
	if (rc == 0)
		rc = jn_sync_fd(fd);
	if (rc == 0 && renameat(j->dirfd, from, j->dirfd, to) < 0)
		rc = -errno;
	if (rc == 0 && fsync(j->dirfd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = jn_push_seg(j, first);
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
			rc = jn_sync_fd(j->fd);
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
		jn_frame(p, ext[i], (uint32_t)len[i], lsn, j->synced_lsn, type,
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

static uint64_t rec_size(const void *src, size_t i)
{
	return kvj_rec_size((const struct kvj_rec *)src + i);
}

static void rec_fill(const void *src, size_t i, unsigned char *dst,
		     uint8_t *type)
{
	const struct kvj_rec *r = (const struct kvj_rec *)src + i;

	kvj_rec_encode(r, dst, kvj_rec_size(r));
	*type = jn_rec_type(r);
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
	rc = jn_sync_fd(j->fd);
	if (rc < 0)
		return fail(j, rc);
	j->synced_lsn = j->next_lsn - 1;
	return 0;
}

int kvj_sync_fd(const struct kvj *j, int *fd)
{
	*fd = -1;
	if (j->err)
		return j->err;
	if (j->synced_lsn + 1 < j->next_lsn)
		*fd = j->fd;
	return 0;
}

int kvj_sync_done(struct kvj *j, int res)
{
	if (j->err)
		return j->err;
	if (res < 0)
		return fail(j, res);
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
			rc = jn_push_spare(j, j->spare_seq);
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

/* ---- starting a segment ----------------------------------------------- */

/* Start a new segment at LSN first (no usable tail, or the checkpoint is
 * ahead of the journal: LSNs inside a segment stay consecutive). */
int jn_start_segment(struct kvj *j, uint64_t first)
{
	int rc = 0;

	if (j->fd >= 0) {
		rc = jn_sync_fd(j->fd);
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

/* ---- reset (a replica's full copy) --------------------------------------- */

int kvj_reset(struct kvj *j, uint64_t next)
{
	int rc;

	if (j->err)
		return j->err;
	if ((rc = jn_sync_fd(j->fd)) < 0)
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
			if ((rc = jn_push_spare(j, j->spare_seq)) < 0)
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
	if ((rc = jn_start_segment(j, next)) < 0)
		return fail(j, rc);
	j->synced_lsn = next - 1;
	return 0;
}
