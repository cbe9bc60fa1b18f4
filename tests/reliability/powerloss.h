/* powerloss.h - the record format of the power-loss shim's log (powerloss.c),
 * read back by plimage.py.  Native byte order, 56-byte header, then the
 * payload: the path for PL_OPEN, the bytes written for PL_WRITE.
 */
#ifndef KVD_POWERLOSS_H
#define KVD_POWERLOSS_H

#include <stdint.h>

#define PL_MAGIC 0x4b504c31u /* "KPL1" */

enum pl_type {
	PL_OPEN = 1,	   /* file: its id; payload: its path */
	PL_WRITE = 2,	   /* intent: off, res = 1 for an O_DSYNC fd; bytes */
	PL_WDONE = 3,	   /* seq of its PL_WRITE; res = bytes or -errno */
	PL_SYNC_BEGIN = 4, /* fsync or fdatasync issued */
	PL_SYNC_END = 5,   /* seq of its begin; res = 0 or -errno */
	PL_TRUNC = 6,	   /* off = new size; res = 0 or -errno */
};

struct pl_rec {
	uint32_t magic;
	uint32_t type;
	uint32_t file;
	uint64_t seq;
	uint64_t t_ns; /* CLOCK_MONOTONIC when logged */
	uint64_t off;
	uint64_t len; /* payload bytes that follow */
	int64_t res;
};

#endif
