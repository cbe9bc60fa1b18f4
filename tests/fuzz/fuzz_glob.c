/* fuzz_glob.c - the glob matcher of SCAN MATCH, KEYS, PSUBSCRIBE, PUBSUB
 * CHANNELS and CONFIG GET (kvd/resp/resp_glob.c) against a reference, on any
 * pattern and key, and held to the bound on its work that resp_glob.c
 * promises.
 *
 * The reference compiles the pattern into elements (a '*', or a set of 256
 * bytes, by resp_glob.c's rules: '?', '[...]' with '^', ranges either way
 * round and '\' escapes, an unterminated class ending the pattern, '\x')
 * and matches them by dynamic programming over every (element, position)
 * pair: a different algorithm whose answer must be the same for every
 * pattern and key up to REF_MAX bytes.  Redis's own two rules are the
 * reference's too: an empty key matches only the empty pattern, and a
 * pattern with more than 1,000 runs of '*' followed by something matches
 * nothing (checked at any size).  Also: any key, every byte escaped, is a
 * pattern that matches exactly that key.
 *
 * The work (resp_glob.c counts it when built with RESP_GLOB_WORK, as this
 * target is) must stay within the bound the file states, with constants
 * to spare: compiling at most one step per pattern byte, matching at most
 * WORK_K * (key + elements + 2) * (1 + ceil(L / 64)) steps, L the longest
 * middle run between '*' runs that holds '?' or '['.  A matcher quadratic
 * in the pattern or the key fails this on inputs far below any timeout.
 *
 * The input, after expand.h's repeats (up to EXPANDED_MAX bytes, so that a
 * few bytes make a pattern of 60,000 '*'): 3 bytes of pattern length
 * (little-endian, capped to what follows), the pattern, then the key.
 */
#include <string.h>

#include "expand.h"
#include "fuzz.h"
#include "resp/resp.h"

#define REF_MAX 512
#define EXPANDED_MAX (64u << 10)
#define WORK_K 400
#define MAX_NEST 1000

extern uint64_t resp_glob_work;

struct elem {
	int star;
	int lit;	 /* a byte or an escaped byte: resp_glob.c's literal */
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

/* The element at p[*i], *i past it. */
static void next_elem(const uint8_t *p, size_t n, size_t *i, struct elem *e)
{
	memset(e, 0, sizeof(*e));
	if (p[*i] == '*') {
		e->star = 1;
		++*i;
	} else if (p[*i] == '?') {
		set_add(e, 0, 255);
		++*i;
	} else if (p[*i] == '[') {
		compile_class(p, n, i, e);
	} else if (p[*i] == '\\' && *i + 1 < n) {
		e->lit = 1;
		set_add(e, p[*i + 1], p[*i + 1]);
		*i += 2;
	} else {
		e->lit = 1;
		set_add(e, p[*i], p[*i]);
		++*i;
	}
}

static size_t compile(const uint8_t *p, size_t n, struct elem *e)
{
	size_t k = 0;

	for (size_t i = 0; i < n; k++)
		next_elem(p, n, &i, &e[k]);
	return k;
}

/* What the bound depends on, in one pass over any pattern: the elements
 * that are not '*', the runs of '*' followed by something, and the longest
 * middle run between '*'s that holds a non-literal element. */
struct shape {
	size_t nel, nest, lw;
};

static void shape_of(const uint8_t *p, size_t n, struct shape *sh)
{
	size_t i = 0, run = 0, stars = 0;
	int wild = 0, prev_star = 0;
	struct elem e;

	memset(sh, 0, sizeof(*sh));
	while (i < n) {
		next_elem(p, n, &i, &e);
		if (e.star) {
			if (stars && wild && run > sh->lw)
				sh->lw = run; /* a middle run, '*' both sides */
			stars += !prev_star;
			run = 0;
			wild = 0;
			prev_star = 1;
			continue;
		}
		sh->nest += prev_star;
		prev_star = 0;
		sh->nel++;
		run++;
		wild |= !e.lit;
	}
}

/* m[i][j]: elements i.. match s[j..] (a pattern of REF_MAX bytes has at
 * most 256 runs of '*': the nesting rule cannot apply). */
static int ref_match(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
	static struct elem e[REF_MAX];
	static uint8_t m[REF_MAX + 1][REF_MAX + 1];
	size_t ne;

	if (sn == 0) /* Redis: only "" matches "" */
		return pn == 0;
	ne = compile(p, pn, e);
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

static struct resp_glob *g;

static int glob(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
	FUZZ_CHECK(resp_glob_set(g, (struct kv_slice){p, pn}) == 0);
	return resp_glob_match(g, (struct kv_slice){s, sn});
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
	/* "*" + escaped key + "*" also matches it (but for the empty key,
	 * which only "" matches). */
	memmove(pat + 1, pat, 2 * n);
	pat[0] = pat[2 * n + 1] = '*';
	FUZZ_CHECK(glob(pat, 2 * n + 2, s, n) == (n != 0));
}

/* The answer, and the work: within the bound for any input. */
static int checked(const uint8_t *pat, size_t pn, const uint8_t *key, size_t kn)
{
	struct shape sh;
	uint64_t w0, w1, bound;
	int got;

	shape_of(pat, pn, &sh);
	w0 = resp_glob_work;
	FUZZ_CHECK(resp_glob_set(g, (struct kv_slice){pat, pn}) == 0);
	w1 = resp_glob_work;
	FUZZ_CHECK(w1 - w0 <= pn + 1);
	got = resp_glob_match(g, (struct kv_slice){key, kn});
	bound = (uint64_t)WORK_K * (kn + sh.nel + 2) * (1 + (sh.lw + 63) / 64);
	if (resp_glob_work - w1 > bound) {
		fprintf(stderr,
			"work %llu > %llu (pattern %zu, key %zu, L %zu)\n",
			(unsigned long long)(resp_glob_work - w1),
			(unsigned long long)bound, pn, kn, sh.lw);
		abort();
	}
	if (sh.nest > MAX_NEST || (kn == 0 && pn != 0))
		FUZZ_CHECK(!got);
	return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *pat, *key;
	uint8_t *in = NULL;
	size_t n, pn, kn;
	int got;

	if (fuzz_expand(data, size, 0, EXPANDED_MAX, &in, &n) || n < 3) {
		free(in);
		return 0;
	}
	pn = (size_t)in[0] | (size_t)in[1] << 8 | (size_t)in[2] << 16;
	pn = pn < n - 3 ? pn : n - 3;
	pat = in + 3;
	key = pat + pn;
	kn = n - 3 - pn;
	/* A fresh one first, as SCAN and KEYS compile (nothing allocated
	 * yet), then reused, as PUBLISH does from pattern to pattern. */
	FUZZ_CHECK((g = resp_glob_new()) != NULL);
	got = checked(pat, pn, key, kn);
	if (pn <= REF_MAX && kn <= REF_MAX) {
		FUZZ_CHECK(got == ref_match(pat, pn, key, kn));
		check_literal(key, kn);
	}
	resp_glob_free(g);
	free(in);
	return 0;
}
