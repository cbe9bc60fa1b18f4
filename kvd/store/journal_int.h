/* journal_int.h - what the journal's files share, and nothing else
 * includes: the on-disk format's constants and byte helpers, the handle,
 * and the few calls one file makes into another.  The files split the
 * journal as LevelDB splits its log: journal_format.c (segment headers,
 * record framing and checking, the key-value payload), journal_write.c (the
 * writer: segment files, spares, appends, flushes, recycling),
 * journal_recover.c (kvj_open's scan and recovery) and journal_read.c (a
 * reader on another thread).  docs/journal-format.md is the format. */
#ifndef KVD_STORE_JOURNAL_INT_H
#define KVD_STORE_JOURNAL_INT_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
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

/* A record's header fields, as read back. */
struct view {
	uint64_t lsn, synced, ext;
	uint32_t len;
	uint8_t type;
};

/* ---- bytes and checksums --------------------------------------------- */

static inline void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline uint64_t align8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* Record checksums are seeded with the journal's random id and the
 * segment's first LSN: a record is valid only in the segment instance it
 * was written for, and bytes inside a stored value (chosen by a client)
 * can never pass for a record, because nobody outside knows the seed. */
static inline uint64_t seg_seed(uint64_t id, uint64_t first)
{
	return id ^ (first * 0x9e3779b97f4a7c15ull);
}

static inline uint32_t sum32(const void *p, size_t n, uint64_t seed)
{
	return (uint32_t)XXH3_64bits_withSeed(p, n, seed);
}

static inline uint64_t rec_extent(uint32_t len)
{
	return align8((uint64_t)REC_HDR + len);
}

static inline void seg_name(char *out, size_t cap, uint64_t first)
{
	snprintf(out, cap, "journal-%016" PRIx64 ".kvj", first);
}

static inline void spare_name(char *out, size_t cap, unsigned num)
{
	snprintf(out, cap, "journal-spare-%u.kvj", num);
}

static inline int jn_sync_fd(int fd)
{
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* ---- journal_format.c ---- */

/* A segment header for this journal, and its check against the file's
 * name (first), size and this journal (first_seen: the first segment
 * read, whose id is taken): 0 or -EBADMSG. */
void jn_hdr_encode(const struct kvj *j, uint64_t first, uint64_t size,
		   unsigned char h[SEG_HDR]);
int jn_hdr_check(struct kvj *j, const unsigned char *h, uint64_t first,
		 uint64_t size, int first_seen);
/* Frame one record in place; the payload is already at p + REC_HDR. */
void jn_frame(unsigned char *p, uint64_t ext, uint32_t len, uint64_t lsn,
	      uint64_t synced, uint8_t type, uint64_t seed);
/* Is there a whole record with a good checksum at off of mapping m? */
/* The record type a kvj_rec is written as (KVJ_PUT_TYPED for a typed
 * PUT). */
uint8_t jn_rec_type(const struct kvj_rec *r);
int jn_rec_ok(const unsigned char *m, uint64_t size, uint64_t off,
	      uint64_t seed, struct view *v);

/* ---- journal_write.c (the writer) ---- */

int jn_zero_range(int fd, uint64_t off, uint64_t end);
int jn_push_seg(struct kvj *j, uint64_t first);
int jn_push_spare(struct kvj *j, unsigned num);
/* Start a new segment at LSN first (no usable tail, or the checkpoint is
 * ahead of the journal), flushing the current one first. */
int jn_start_segment(struct kvj *j, uint64_t first);

#endif
