/* journal_read.c - a read-only cursor over a journal's segment files,
 * used by one thread while the owner appends and recycles (a primary's
 * replication sender; journal.h, "Reading from another thread"). */
#include "journal_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

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
