/* fuzz_glob.c - the glob matcher of SCAN MATCH and KEYS (resp_glob in
 * kvd/resp_scan.c) against a reference, on any pattern and key.
 *
 * resp_glob backtracks to the last '*' only, which is right because every
 * other element matches exactly one byte.  The reference here compiles the
 * pattern into elements (a '*', or a set of 256 bytes, by resp.h's rules:
 * '?', '[...]' with '^', ranges either way round and '\' escapes, an
 * unterminated class ending the pattern, '\x') and matches them by dynamic
 * programming over every (element, position) pair: a different algorithm
 * whose answer must be the same for every pattern and key up to 128
 * bytes.  Longer inputs are run for memory errors and time only.  Also:
 * any key, every byte escaped, is a pattern that matches exactly that key.
 *
 * The input: byte 0 is the pattern's length (capped to what follows),
 * then the pattern, then the key.
 */
#include <string.h>

#include "fuzz.h"
#include "resp.h"

#define REF_MAX 128

struct elem {
	int star;
	uint8_t set[32]; /* bit per byte */
};

static void set_add(struct elem *e, unsigned lo, unsigned hi)
{
	for (unsigned ch = lo; ch <= hi; ch++)
		e->set[ch >> 3] |= (uint8_t)(1u << (ch & 7));
}

/* One '[...]' at p[*i] (the '['): its set, *i past its ']'. */
static void compile_class(const uint8_t *p, size_t n, size_t *i, struct elem *e)
{
	size_t j = *i + 1;
	int neg = j < n && p[j] == '^';

	j += neg;
	for (; j < n && p[j] != ']'; j++) {
		if (p[j] == '\\' && j + 1 < n) {
			j++;
			set_add(e, p[j], p[j]);
		} else if (j + 2 < n && p[j + 1] == '-') {
			unsigned a = p[j], b = p[j + 2];

			set_add(e, a < b ? a : b, a < b ? b : a);
			j += 2;
		} else {
			set_add(e, p[j], p[j]);
		}
	}
	*i = j + 1; /* past the ']', or past the end */
	if (neg)
		for (unsigned k = 0; k < 32; k++)
			e->set[k] = (uint8_t)~e->set[k];
}

static size_t compile(const uint8_t *p, size_t n, struct elem *e)
{
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		memset(&e[k], 0, sizeof(e[k]));
		if (p[i] == '*') {
			e[k].star = 1;
			i++;
		} else if (p[i] == '?') {
			set_add(&e[k], 0, 255);
			i++;
		} else if (p[i] == '[') {
			compile_class(p, n, &i, &e[k]);
		} else if (p[i] == '\\' && i + 1 < n) {
			set_add(&e[k], p[i + 1], p[i + 1]);
			i += 2;
		} else {
			set_add(&e[k], p[i], p[i]);
			i++;
		}
	}
	return k;
}

/* m[i][j]: elements i.. match s[j..]. */
static int ref_match(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
	static struct elem e[REF_MAX];
	static uint8_t m[REF_MAX + 1][REF_MAX + 1];
	size_t ne = compile(p, pn, e);

	for (size_t j = 0; j <= sn; j++)
		m[ne][j] = j == sn;
	for (size_t i = ne; i-- > 0;) {
		for (size_t j = sn + 1; j-- > 0;) {
			if (e[i].star)
				m[i][j] =
				    m[i + 1][j] || (j < sn && m[i][j + 1]);
			else
				m[i][j] =
				    j < sn &&
				    (e[i].set[s[j] >> 3] >> (s[j] & 7) & 1) &&
				    m[i + 1][j + 1];
		}
	}
	return m[0][0];
}

static int glob(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
	return resp_glob((struct kv_slice){p, pn}, (struct kv_slice){s, sn});
}

/* Every byte of s escaped: must match s and nothing else tried here. */
static void check_literal(const uint8_t *s, size_t n)
{
	static uint8_t pat[2 * REF_MAX + 2];
	uint8_t longer[REF_MAX + 1];

	for (size_t i = 0; i < n; i++) {
		pat[2 * i] = '\\';
		pat[2 * i + 1] = s[i];
	}
	FUZZ_CHECK(glob(pat, 2 * n, s, n));
	memcpy(longer, s, n);
	longer[n] = 'x';
	FUZZ_CHECK(!glob(pat, 2 * n, longer, n + 1));
	if (n)
		FUZZ_CHECK(!glob(pat, 2 * n, s, n - 1));
	/* "*" + escaped key + "*" also matches it. */
	memmove(pat + 1, pat, 2 * n);
	pat[0] = pat[2 * n + 1] = '*';
	FUZZ_CHECK(glob(pat, 2 * n + 2, s, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *pat, *key;
	size_t pn, kn;
	int got;

	if (size < 1)
		return 0;
	pn = data[0] < size - 1 ? data[0] : size - 1;
	pat = data + 1;
	key = pat + pn;
	kn = size - 1 - pn;
	got = glob(pat, pn, key, kn);
	if (pn <= REF_MAX && kn <= REF_MAX) {
		FUZZ_CHECK(got == ref_match(pat, pn, key, kn));
		check_literal(key, kn);
	}
	return 0;
}
