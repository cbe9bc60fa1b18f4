/* resp_glob.c - Redis's glob patterns (SCAN MATCH, KEYS, PSUBSCRIBE,
 * PUBSUB CHANNELS, CONFIG GET) with a bound on the work, whatever the
 * pattern and the subject.
 *
 * The semantics are Redis 7's stringmatchlen, byte for byte: '*' any run,
 * '?' any byte, '[...]' a set with '^', ranges either way round and '\'
 * escapes (an unterminated class ends the pattern), '\x' the byte x.  Two
 * rules of Redis's own make a difference too: an empty subject matches
 * only the empty pattern (Redis's loop never looks at a '*' once the
 * subject is used up, so "*" does not match ""), and a pattern with more
 * than 1,000 runs of '*' followed by something else matches nothing (its
 * recursion limit, which the redis-server the tests compare with has).
 *
 * Redis recurses at every '*' and costs O(pattern x subject) even with
 * its skipLongerMatches cut; so did kvd's two-pointer matcher, and a run of
 * 1,000,000 '*' cost that much per key.  Here a pattern is compiled once
 * (resp_glob_set, O(pattern)) into its segments: the runs of elements
 * between runs of '*' (one run of any length is one star).  Each element
 * matches exactly one byte, so a segment has a fixed length, and
 *
 *   - the first segment must match at the start, the last at the end;
 *   - the others, in order, are each best placed at their leftmost
 *     occurrence after the previous one (any later placement leaves less
 *     room for the rest), so one left-to-right pass decides.
 *
 * A subject shorter than the segments' total is refused at once.  Finding
 * a middle segment costs: memmem (glibc's is linear) when it is literal;
 * a bit-parallel Shift-And (one 64-bit word per subject byte) when it
 * holds '?' or a set and has at most 64 elements; and for a longer one
 * the same per block of 64 elements, over windows of GLOB_WINDOW candidate
 * starts, so ceil(L/64) words per subject byte, L its length.  So a match
 * costs O(pattern + subject x (1 + ceil(L/64))) where L is the longest
 * middle segment that holds '?' or '[': linear but for that factor, which
 * is 1 for every segment up to 64 elements and 8 for any key (keys are
 * at most 511 bytes, and a longer segment cannot match one).  No method
 * as simple finds a run holding wildcards in time linear in both lengths.
 * Nothing is allocated while matching; the compiled form is at most 1,002
 * segments of 24 bytes, the literal segments unescaped, and the byte set
 * of each class longer than GLOB_CACHE_MIN bytes (so that a huge class is
 * read once, not once per subject).
 */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "resp.h"

#define GLOB_MAX_NEST 1000 /* Redis: deeper '*' nesting matches nothing */
#define GLOB_CACHE_MIN 33  /* classes this long keep their byte set */
#define GLOB_WINDOW 4096   /* candidate starts per pass of a long segment */
#define GLOB_NONE SIZE_MAX

#ifdef RESP_GLOB_WORK /* the glob fuzzer checks the bound above */
uint64_t resp_glob_work;
#define WORK(n) (resp_glob_work += (n))
#else
#define WORK(n) ((void)0)
#endif

enum { EL_LIT, EL_ANY, EL_SET };

/* One element: a byte, any byte, or a set of bytes. */
struct glob_el {
	int kind;
	uint8_t ch;
	uint64_t set[4];
};

struct glob_seg {
	size_t off; /* where it starts in the pattern */
	size_t nel; /* its elements: the bytes it matches */
	size_t lit; /* literal: its bytes at g->lit + lit, else NONE */
};

struct glob_cls {
	size_t off, end; /* the '[' and past its ']' */
	uint64_t set[4]; /* with its '^' applied */
};

struct resp_glob {
	const uint8_t *p; /* the pattern: the caller keeps it */
	size_t pn;
	size_t nel; /* the shortest subject that can match */
	int never;  /* over Redis's nesting limit */
	struct glob_seg *seg;
	size_t nseg, segcap;
	struct glob_cls *cls;
	size_t ncls, clscap;
	uint8_t *lit;
	size_t litlen, litcap;
};

/* ===================== Elements ===================== */

/* Add bytes lo..hi to a 256-bit set. */
static void set_range(uint64_t *s, unsigned lo, unsigned hi)
{
	for (unsigned w = lo >> 6; w <= hi >> 6; w++) {
		unsigned a = w == lo >> 6 ? lo & 63 : 0;
		unsigned b = w == hi >> 6 ? hi & 63 : 63;

		s[w] |= (~0ull >> (63 - b)) & (~0ull << a);
	}
}

static int set_has(const uint64_t *s, uint8_t ch)
{
	return (int)(s[ch >> 6] >> (ch & 63) & 1);
}

/* The class whose '[' is p[i]: its set in set, the offset past it.  The
 * rules are stringmatchlen's, as kvd's matcher had them: '\' escapes the
 * next byte when there is one, "a-z" (either way round) when a byte
 * follows the '-', and a class with no ']' takes the rest. */
static size_t class_parse(const uint8_t *p, size_t pn, size_t i, uint64_t *set)
{
	size_t j = i + 1;
	int neg = j < pn && p[j] == '^';

	memset(set, 0, 4 * sizeof(*set));
	j += (size_t)neg;
	while (j < pn && p[j] != ']') {
		if (p[j] == '\\' && j + 1 < pn) {
			j++;
			set_range(set, p[j], p[j]);
		} else if (j + 2 < pn && p[j + 1] == '-') {
			unsigned lo = p[j], hi = p[j + 2];

			set_range(set, lo < hi ? lo : hi, lo < hi ? hi : lo);
			j += 2;
		} else {
			set_range(set, p[j], p[j]);
		}
		j++;
	}
	WORK(j - i);
	if (neg)
		for (int w = 0; w < 4; w++)
			set[w] = ~set[w];
	return j < pn ? j + 1 : j;
}

static const struct glob_cls *cls_find(const struct resp_glob *g, size_t off)
{
	size_t lo = 0, hi = g->ncls;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->cls[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < g->ncls && g->cls[lo].off == off ? &g->cls[lo] : NULL;
}

/* The element at p[i] (not a '*'); the offset past it. */
static size_t el_next(const struct resp_glob *g, size_t i, struct glob_el *e)
{
	const uint8_t *p = g->p;
	const struct glob_cls *k;

	WORK(1);
	if (p[i] == '?') {
		e->kind = EL_ANY;
		return i + 1;
	}
	if (p[i] == '\\' && i + 1 < g->pn) {
		e->kind = EL_LIT;
		e->ch = p[i + 1];
		return i + 2;
	}
	if (p[i] != '[') {
		e->kind = EL_LIT;
		e->ch = p[i];
		return i + 1;
	}
	e->kind = EL_SET;
	if ((k = cls_find(g, i))) {
		memcpy(e->set, k->set, sizeof(e->set));
		return k->end;
	}
	return class_parse(p, g->pn, i, e->set); /* short: at most 32 bytes */
}

static int el_has(const struct glob_el *e, uint8_t ch)
{
	return e->kind == EL_ANY || (e->kind == EL_LIT && e->ch == ch) ||
	       (e->kind == EL_SET && set_has(e->set, ch));
}

/* ===================== Compiling ===================== */

static int grow(void **a, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 8;
	void *b;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if (!(b = realloc(*a, n * size)))
		return -1;
	*a = b;
	*cap = n;
	return 0;
}

/* Compile the element at p[*i] into segment sg. */
static int compile_el(struct resp_glob *g, struct glob_seg *sg, size_t *i)
{
	size_t at = *i;
	struct glob_el e;

	if (g->p[at] == '[') {
		e.kind = EL_SET;
		*i = class_parse(g->p, g->pn, at, e.set);
		if (*i - at >= GLOB_CACHE_MIN) {
			struct glob_cls *k;

			if (grow((void **)&g->cls, &g->clscap, g->ncls + 1,
				 sizeof(*g->cls)))
				return -1;
			k = &g->cls[g->ncls++];
			k->off = at;
			k->end = *i;
			memcpy(k->set, e.set, sizeof(k->set));
		}
	} else {
		*i = el_next(g, at, &e);
	}
	sg->nel++;
	g->nel++;
	if (sg->lit == GLOB_NONE)
		return 0;
	if (e.kind != EL_LIT) {
		g->litlen = sg->lit; /* not literal after all */
		sg->lit = GLOB_NONE;
		return 0;
	}
	if (grow((void **)&g->lit, &g->litcap, g->litlen + 1, 1))
		return -1;
	g->lit[g->litlen++] = e.ch;
	return 0;
}

static int seg_push(struct resp_glob *g, const struct glob_seg *sg)
{
	if (grow((void **)&g->seg, &g->segcap, g->nseg + 1, sizeof(*g->seg)))
		return -1;
	g->seg[g->nseg++] = *sg;
	return 0;
}

struct resp_glob *resp_glob_new(void)
{
	return calloc(1, sizeof(struct resp_glob));
}

void resp_glob_free(struct resp_glob *g)
{
	if (!g)
		return;
	free(g->seg);
	free(g->cls);
	free(g->lit);
	free(g);
}

int resp_glob_set(struct resp_glob *g, struct kv_slice pat)
{
	struct glob_seg sg = {0, 0, 0};
	size_t i = 0, nest = 0;

	g->p = pat.p;
	g->pn = pat.n;
	g->nel = g->nseg = g->ncls = g->litlen = 0;
	g->never = 0;
	while (i < pat.n) {
		if (pat.p[i] != '*') {
			if (compile_el(g, &sg, &i))
				return -1;
			continue;
		}
		if (seg_push(g, &sg))
			return -1;
		sg.off = i;
		while (i < pat.n && pat.p[i] == '*')
			i++;
		WORK(i - sg.off);
		if (i < pat.n && ++nest > GLOB_MAX_NEST) {
			g->never = 1; /* the rest cannot change that */
			return 0;
		}
		sg.off = i;
		sg.nel = 0;
		sg.lit = g->litlen;
	}
	return seg_push(g, &sg);
}

/* ===================== Matching ===================== */

/* Does segment sg match the bytes at s? */
static int seg_at(const struct resp_glob *g, const struct glob_seg *sg,
		  const uint8_t *s)
{
	size_t i = sg->off;

	if (!sg->nel) /* g->lit may still be NULL */
		return 1;
	if (sg->lit != GLOB_NONE) {
		WORK(sg->nel);
		return !memcmp(g->lit + sg->lit, s, sg->nel);
	}
	for (size_t k = 0; k < sg->nel; k++) {
		struct glob_el e;

		i = el_next(g, i, &e);
		if (!el_has(&e, s[k]))
			return 0;
	}
	return 1;
}

/* Shift-And masks of up to 64 elements: bit j of b[c] | any is set when
 * element j accepts byte c.  Only the entries touched are cleared. */
struct glob_masks {
	uint64_t b[256];
	uint64_t any;
	uint64_t touched[4];
};

static void mask_add(struct glob_masks *m, unsigned c, uint64_t bit)
{
	m->b[c] |= bit;
	m->touched[c >> 6] |= 1ull << (c & 63);
}

/* Masks of the n elements from pattern offset off; the offset past them. */
static size_t masks_build(const struct resp_glob *g, size_t off, size_t n,
			  struct glob_masks *m)
{
	m->any = 0;
	for (size_t j = 0; j < n; j++) {
		uint64_t bit = 1ull << j;
		struct glob_el e;

		off = el_next(g, off, &e);
		if (e.kind == EL_ANY) {
			m->any |= bit;
		} else if (e.kind == EL_LIT) {
			mask_add(m, e.ch, bit);
		} else {
			for (unsigned w = 0; w < 4; w++) {
				for (uint64_t x = e.set[w]; x; x &= x - 1) {
					WORK(1);
					mask_add(
					    m,
					    w * 64 +
						(unsigned)__builtin_ctzll(x),
					    bit);
				}
			}
		}
	}
	return off;
}

static void masks_clear(struct glob_masks *m)
{
	for (unsigned w = 0; w < 4; w++) {
		for (uint64_t x = m->touched[w]; x; x &= x - 1) {
			WORK(1);
			m->b[w * 64 + (unsigned)__builtin_ctzll(x)] = 0;
		}
		m->touched[w] = 0;
	}
}

/* Segment sg of up to 64 elements, leftmost in s[lo, hi). */
static size_t find_short(const struct resp_glob *g, const struct glob_seg *sg,
			 const uint8_t *s, size_t lo, size_t hi,
			 struct glob_masks *m)
{
	uint64_t d = 0, top = 1ull << (sg->nel - 1);
	size_t found = GLOB_NONE;

	masks_build(g, sg->off, sg->nel, m);
	for (size_t t = lo; t < hi; t++) {
		d = ((d << 1) | 1) & (m->b[s[t]] | m->any);
		if (d & top) {
			found = t + 1 - sg->nel;
			break;
		}
	}
	WORK((found == GLOB_NONE ? hi : found + sg->nel) - lo);
	masks_clear(m);
	return found;
}

/* One window of a long segment: clear from c the candidate starts w + i
 * (i < nb) where block k (its elements [64k, 64k + len), from pattern
 * offset *off) does not match. */
static void long_block(const struct resp_glob *g, size_t *off, size_t k,
		       size_t len, const uint8_t *s, size_t w, size_t nb,
		       uint64_t *c, struct glob_masks *m)
{
	uint64_t r[GLOB_WINDOW / 64] = {0}, d = 0, top = 1ull << (len - 1);
	size_t from = w + 64 * k, to = from + nb + len - 1;

	*off = masks_build(g, *off, len, m);
	for (size_t t = from; t < to; t++) {
		d = ((d << 1) | 1) & (m->b[s[t]] | m->any);
		if (d & top) {
			size_t i = t + 1 - len - from;

			r[i >> 6] |= 1ull << (i & 63);
		}
	}
	WORK(to - from);
	masks_clear(m);
	for (size_t i = 0; i < (nb + 63) / 64; i++)
		c[i] &= r[i];
}

/* Segment sg of more than 64 elements, leftmost in s[lo, hi): windows of
 * GLOB_WINDOW candidate starts, each checked block by block. */
static size_t find_long(const struct resp_glob *g, const struct glob_seg *sg,
			const uint8_t *s, size_t lo, size_t hi,
			struct glob_masks *m)
{
	for (size_t w = lo; w + sg->nel <= hi; w += GLOB_WINDOW) {
		size_t nb = hi - sg->nel + 1 - w, off = sg->off, nw, i;
		uint64_t c[GLOB_WINDOW / 64], alive = 1;

		nb = nb < GLOB_WINDOW ? nb : GLOB_WINDOW;
		nw = (nb + 63) / 64;
		memset(c, 0xff, nw * sizeof(*c));
		if (nb % 64)
			c[nw - 1] = (1ull << (nb % 64)) - 1;
		for (size_t k = 0; 64 * k < sg->nel && alive; k++) {
			size_t len = sg->nel - 64 * k;

			long_block(g, &off, k, len < 64 ? len : 64, s, w, nb, c,
				   m);
			alive = 0;
			for (i = 0; i < nw; i++)
				alive |= c[i];
		}
		for (i = 0; alive && i < nw; i++)
			if (c[i])
				return w + 64 * i +
				       (size_t)__builtin_ctzll(c[i]);
	}
	return GLOB_NONE;
}

/* Where segment sg first occurs whole in s[lo, hi), or NONE. */
static size_t seg_find(const struct resp_glob *g, const struct glob_seg *sg,
		       const uint8_t *s, size_t lo, size_t hi,
		       struct glob_masks *m)
{
	if (hi - lo < sg->nel)
		return GLOB_NONE;
	if (sg->lit != GLOB_NONE) {
		const uint8_t *f =
		    memmem(s + lo, hi - lo, g->lit + sg->lit, sg->nel);

		WORK(f ? (size_t)(f - s) - lo + sg->nel : hi - lo);
		return f ? (size_t)(f - s) : GLOB_NONE;
	}
	if (sg->nel == 1) {
		struct glob_el e;

		el_next(g, sg->off, &e);
		for (size_t t = lo; t < hi; t++) {
			WORK(1);
			if (el_has(&e, s[t]))
				return t;
		}
		return GLOB_NONE;
	}
	if (sg->nel <= 64)
		return find_short(g, sg, s, lo, hi, m);
	return find_long(g, sg, s, lo, hi, m);
}

int resp_glob_match(const struct resp_glob *g, struct kv_slice s)
{
	const struct glob_seg *first, *last;
	struct glob_masks m;
	size_t pos, end;

	if (s.n == 0) /* Redis: only "" matches "" */
		return g->pn == 0;
	if (g->never || g->nel > s.n)
		return 0;
	first = &g->seg[0];
	last = &g->seg[g->nseg - 1];
	if (g->nseg == 1)
		return s.n == g->nel && seg_at(g, first, s.p);
	if (!seg_at(g, first, s.p) || !seg_at(g, last, s.p + s.n - last->nel))
		return 0;
	pos = first->nel;
	end = s.n - last->nel;
	memset(m.b, 0, sizeof(m.b));
	memset(m.touched, 0, sizeof(m.touched));
	for (size_t k = 1; k + 1 < g->nseg; k++) {
		size_t at = seg_find(g, &g->seg[k], s.p, pos, end, &m);

		if (at == GLOB_NONE)
			return 0;
		pos = at + g->seg[k].nel;
	}
	return 1;
}
