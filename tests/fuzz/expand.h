/* expand.h - repeats in a fuzz input, so that a few bytes can stand for a
 * glob pattern of a million '*' or a command with thousands of arguments
 * (fuzz_glob.c, fuzz_resp.c, fuzz_dispatch.c).  libFuzzer's inputs stay
 * small (-max_len), and a quadratic matcher or parser is only found when
 * the input it chokes on is large: the glob fuzzer's 255-byte patterns
 * missed PUBLISH's and SCAN's.
 *
 * The byte 0xff starts a repeat: 0xff, a count c (2 bytes, little-endian),
 * a unit length u (1 byte), then u bytes, written c * 16 + 1 times.  In the
 * unit, the byte 0xfe stands for the repeat's index as 6 lowercase hex
 * digits, so that repeated arguments can differ ("$7\r\nk\xfe\r\n" makes
 * keys k000000, k000001, ...).  u = 0 writes one 0xff; a repeat cut short
 * by the input's end writes nothing.  The output stops at its cap.
 */
#ifndef KVD_FUZZ_EXPAND_H
#define KVD_FUZZ_EXPAND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The unit at u (n bytes), index i, into out at *len (cap); 0 when full. */
static int fuzz_expand_unit(const uint8_t *u, size_t n, size_t i, uint8_t *out,
			    size_t *len, size_t cap)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t k = 0; k < n; k++) {
		if (u[k] != 0xfe) {
			if (*len == cap)
				return 0;
			out[(*len)++] = u[k];
			continue;
		}
		for (int d = 5; d >= 0; d--) {
			if (*len == cap)
				return 0;
			out[(*len)++] = (uint8_t)hex[(i >> (4 * d)) & 15];
		}
	}
	return 1;
}

/* in expanded into a malloc'd buffer of at most cap bytes (*out, *n), its
 * first keep bytes (a fuzzer's flags) copied as they are; -1 when out of
 * memory. */
static int fuzz_expand(const uint8_t *in, size_t size, size_t keep, size_t cap,
		       uint8_t **out, size_t *n)
{
	uint8_t *o = malloc(cap ? cap : 1);
	size_t len = 0, i = 0;

	if (!o)
		return -1;
	while (i < size && i < keep && len < cap)
		o[len++] = in[i++];
	while (i < size && len < cap) {
		size_t c, u;

		if (in[i] != 0xff) {
			o[len++] = in[i++];
			continue;
		}
		if (size - i < 4)
			break;
		c = ((size_t)in[i + 1] | (size_t)in[i + 2] << 8) * 16 + 1;
		u = in[i + 3];
		i += 4;
		if (u == 0) {
			o[len++] = 0xff;
			continue;
		}
		if (size - i < u)
			break;
		for (size_t k = 0; k < c; k++)
			if (!fuzz_expand_unit(in + i, u, k, o, &len, cap))
				break;
		i += u;
	}
	*out = o;
	*n = len;
	return 0;
}

#endif
