/* strops.h - the arithmetic of string, bit and float commands, shared by
 * both front ends (strops.c defines them): RESP (resp_str.c, resp_rmw.c) and
 * the native protocol (cmd_str.c).  One copy of Redis's rules for ranges,
 * bit counts and float formatting, so that the two protocols cannot drift
 * apart on what GETRANGE -1 or INCRBYFLOAT 0.1 means.
 */
#ifndef KVD_STROPS_H
#define KVD_STROPS_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"
#include "store.h"

/* BITOP's operations, in the order of the native wire (KV_BITOP_*). */
enum { BOP_AND, BOP_OR, BOP_XOR, BOP_NOT };

/* A range of a value in bytes, with the edge bits outside a bit range. */
struct bitrange {
	long long start, end; /* bytes, inclusive */
	uint8_t first_mask;   /* bits of the first byte outside the range */
	uint8_t last_mask;    /* bits of the last byte outside the range */
};

/* Clamp [*start, *end] (negative: from the end) to a string of len units
 * as Redis does; 0 when the range is empty. */
int kvd_clamp_range(long long *start, long long *end, long long len);
/* br->start and br->end in bytes (isbit 0) or bits (isbit 1) of a value
 * of len bytes, turned into bytes and edge masks; 0 when empty. */
int kvd_bitrange_bytes(struct bitrange *br, long long len, int isbit);
/* Set bits in p[0..n). */
long long kvd_popcount(const uint8_t *p, size_t n);
/* The first bit equal to bit in the range, from br->start's byte; -1 for
 * a one that is not there, (*bytes * 8) for a zero that is not. */
long long kvd_bitpos_range(const uint8_t *p, const struct bitrange *br, int bit,
			   long long *bytes);
/* dst[0..len) op= src (zero padded); first: dst = src (NOT: ~src). */
void kvd_bitop_fold(uint8_t *dst, struct kv_slice src, size_t len, int op,
		    int first);
/* BITOP's work, in an exclusive section (both doors): out = op over the
 * values of the keys src[0..n) (a missing or invalid key is empty), as
 * long as the longest.  KV_OK; KV_VALUE_TOO_LARGE, before anything is
 * allocated, when that is over max-value-size; KV_INTERNAL. */
struct kvd_conn;
int kvd_bitop_sources(struct kvd_conn *c, int op, const struct kv_slice *src,
		      uint32_t n, struct kv_buf *out);
/* Redis's string2ld: the whole string a float, no leading space, not NaN.
 * 0 or -1. */
int kvd_parse_ld(struct kv_slice s, long double *out);
/* Redis's ld2string (human form): the length written, 0 if cap is short. */
size_t kvd_format_ld(char *buf, size_t cap, long double v);

#endif
