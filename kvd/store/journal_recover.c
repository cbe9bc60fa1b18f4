/* journal_recover.c - kvj_open: find a journal's segments, replay every
 * record above the checkpoint in LSN order, tell a torn tail (cut and
 * wiped) from corruption (refused, or cut when the operator chose so),
 * and position the writer at the end (docs/journal-format.md). */
#include "journal_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>

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
		    !jn_rec_ok(m, e->size, o, seed, &v))
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
	    jn_hdr_check(j, m, j->firsts[i], e->size, first_seen) < 0) {
		e->hdr_bad = 1;
		goto out;
	}
	seed = seg_seed(j->id, j->firsts[i]);
	e->off = SEG_HDR;
	while (jn_rec_ok(m, e->size, e->off, seed, &v) &&
	       v.lsn == e->expected) {
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
			rc = jn_push_spare(j, num);
		else if (strlen(d->d_name) == 28 &&
			 sscanf(d->d_name, "journal-%16" SCNx64 ".kv%1s",
				&first, tail) == 2 &&
			 strcmp(tail, "j") == 0)
			rc = jn_push_seg(j, first);
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
		rc = jn_zero_range(t->fd, t->off, t->cand_end);
		rep->dropped += t->cand_end - t->off;
	}
	if (rc == 0)
		rc = jn_sync_fd(t->fd);
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
		rc = jn_start_segment(j, t.expected > ckpt + 1 ? t.expected
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
		rc = jn_start_segment(j, ckpt_lsn + 1);
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
