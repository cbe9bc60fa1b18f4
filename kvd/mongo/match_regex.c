/* match_regex.c - running a filter's regular expressions (match_int.h,
 * struct re_prog): PCRE2's interpreter first, its JIT once a pattern
 * has run often enough to pay for compiling it.
 *
 * A compiled filter is shared by threads without a lock (a cursor's
 * filter moves between io threads; an index's partial filter is read by
 * all of them), so nothing here writes what a match reads: the match
 * data is the thread's own, and the JIT code is a copy of the pattern,
 * compiled by the one thread that claims it (its run crossed
 * RE_JIT_AFTER, or reached PCRE2's match limit) and then published; the
 * interpreted pattern is never changed.
 *
 * Measured on a two-core guest (a throwaway program against
 * libpcre2-8): JIT matches ordinary patterns 1.6x to 2.9x faster (53-93
 * ns against 149-246 ns) and reaches the match limit of a backtracking
 * one 6x sooner (24 against 146 ms), for 2.6 to 6.2 us of compiling: paid
 * back after a few dozen matches, so a point query's filter never pays
 * it, and a scan's pays it once.
 */
#include <pthread.h>

#include "match_int.h"

/* Matches of one pattern before it is JIT-compiled. */
#define RE_JIT_AFTER 64

static pthread_key_t md_key;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;
static __thread pcre2_match_data *tl_md;

static void md_free(void *md)
{
	pcre2_match_data_free(md);
}

static void md_key_make(void)
{
	(void)pthread_key_create(&md_key, md_free);
}

/* The thread's match data for JIT matches (one pair of offsets is all a
 * yes/no needs), freed by the key's destructor when the thread ends.  An
 * interpreted match gets its own, freed after it: the interpreter keeps
 * its backtracking frames in the match data, as many as the match took,
 * and a thread should not hold those of its worst match. */
static pcre2_match_data *jit_match_data(void)
{
	if (!tl_md && (tl_md = pcre2_match_data_create(1, NULL))) {
		(void)pthread_once(&md_once, md_key_make);
		(void)pthread_setspecific(md_key, tl_md);
	}
	return tl_md;
}

/* Compile a copy of p's pattern with the JIT and publish it, once, by
 * the first thread that asks (JIT unsupported, or out of memory: the
 * interpreter goes on alone). */
static void make_jit(struct re_prog *p)
{
	pcre2_code *c;

	if (atomic_flag_test_and_set_explicit(&p->claimed,
					      memory_order_relaxed))
		return;
	if (!(c = pcre2_code_copy(p->code)))
		return;
	if (pcre2_jit_compile(c, PCRE2_JIT_COMPLETE) != 0) {
		pcre2_code_free(c);
		return;
	}
	atomic_store_explicit(&p->jit, c, memory_order_release);
}

/* PCRE2's answer from the interpreter. */
static int interpreted(const struct re_prog *p, const char *s, size_t len)
{
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	int rc;

	if (!md)
		return PCRE2_ERROR_NOMEMORY;
	rc = pcre2_match(p->code, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	return rc;
}

/* An invalid UTF-8 subject or a pattern past PCRE2's match limit is no
 * match, as MongoDB answers.  The JIT comes after RE_JIT_AFTER runs, or
 * at once after a run that reached the match limit (a pattern that
 * backtracks: 6x faster to the same limit). */
bool re_prog_match(struct re_prog *p, const char *s, size_t len)
{
	pcre2_code *jit = atomic_load_explicit(&p->jit, memory_order_acquire);
	pcre2_match_data *md;
	int rc;

	if (!jit) {
		if (atomic_fetch_add_explicit(
			&p->runs, 1, memory_order_relaxed) < RE_JIT_AFTER - 1) {
			rc = interpreted(p, s, len);
			if (rc == PCRE2_ERROR_MATCHLIMIT)
				make_jit(p);
			return rc >= 0;
		}
		make_jit(p);
		if (!(jit =
			  atomic_load_explicit(&p->jit, memory_order_acquire)))
			return interpreted(p, s, len) >= 0;
	}
	if (!(md = jit_match_data()))
		return false;
	rc = pcre2_match(jit, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
	/* past the JIT's stack (32 KiB of the machine's): the interpreter,
	 * whose frames are on the heap, as before the JIT */
	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
		rc = interpreted(p, s, len);
	return rc >= 0;
}

void re_prog_free(struct re_prog *p)
{
	pcre2_code *jit;

	if (!p)
		return;
	jit = atomic_load_explicit(&p->jit, memory_order_relaxed);
	if (jit)
		pcre2_code_free(jit);
	pcre2_code_free(p->code);
	bson_free(p);
}
