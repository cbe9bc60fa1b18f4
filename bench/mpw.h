/* mpw.h - the few msgpack forms kvbench writes (maps, strings, bin
 * headers), big-endian as the format says; shared by the workloads' values
 * and record.c's one-value encoding of a record of fields. */
#ifndef KB_MPW_H
#define KB_MPW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint8_t *mpw_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static inline uint8_t *mpw_map(uint8_t *p, uint32_t n)
{
	if (n < 16) {
		*p++ = (uint8_t)(0x80 | n);
		return p;
	}
	*p++ = 0xdf;
	return mpw_be(p, n, 4);
}

/* A string of fewer than 256 bytes. */
static inline uint8_t *mpw_str(uint8_t *p, const char *s, size_t n)
{
	if (n < 32)
		*p++ = (uint8_t)(0xa0 | n);
	else {
		*p++ = 0xd9;
		*p++ = (uint8_t)n;
	}
	memcpy(p, s, n);
	return p + n;
}

static inline uint8_t *mpw_bin_hdr(uint8_t *p, size_t n)
{
	if (n < 256) {
		*p++ = 0xc4;
		*p++ = (uint8_t)n;
		return p;
	}
	if (n < 65536) {
		*p++ = 0xc5;
		return mpw_be(p, n, 2);
	}
	*p++ = 0xc6;
	return mpw_be(p, n, 4);
}

#endif
