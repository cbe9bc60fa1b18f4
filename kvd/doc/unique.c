/* unique.c - reservations of unique index keys (unique.h): the tokens
 * alive in this process, and RESERVE, the merge that grants, refuses or
 * lets go of a reservation on its key's committer. */
#include "unique.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kv_status.h"

size_t kvdoc_uq_key(uint32_t id, const uint8_t *key, size_t kn, uint8_t *out)
{
	id |= 0x80000000u;
	out[0] = (uint8_t)(id >> 24);
	out[1] = (uint8_t)(id >> 16);
	out[2] = (uint8_t)(id >> 8);
	out[3] = (uint8_t)id;
	if (kn > MQL_KEY_MAX)
		kn = MQL_KEY_MAX; /* mql_index_keys keeps keys within it */
	memcpy(out + 4, key, kn);
	return 4 + kn;
}

/* ---- tokens ----
 *
 * The live ones: as many as document writes under way that need
 * reservations (up to DOC_UQ_SLOTS per connection writing), asked about
 * by every committer that finds a reservation held, so an open-addressed
 * set (linear probing, deletion by backward shift, at most half full)
 * under a mutex. */
static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *tok_tab, tok_next;
static size_t tok_n, tok_cap; /* tok_cap: a power of two, or 0 */

static size_t tok_slot(uint64_t t, size_t cap)
{
	return (size_t)((t * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static void tok_put(uint64_t *tab, size_t cap, uint64_t t)
{
	size_t i = tok_slot(t, cap);

	while (tab[i])
		i = (i + 1) & (cap - 1);
	tab[i] = t;
}

static int tok_grow(void)
{
	size_t cap = tok_cap ? 2 * tok_cap : 64;
	uint64_t *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -1;
	for (size_t i = 0; i < tok_cap; i++)
		if (tok_tab[i])
			tok_put(tab, cap, tok_tab[i]);
	free(tok_tab);
	tok_tab = tab;
	tok_cap = cap;
	return 0;
}

/* Where t is, or where the probe for it ended (an empty slot). */
static size_t tok_find(uint64_t t)
{
	size_t i = tok_slot(t, tok_cap);

	while (tok_tab[i] && tok_tab[i] != t)
		i = (i + 1) & (tok_cap - 1);
	return i;
}

uint64_t kvdoc_uq_begin(void)
{
	uint64_t t = 0;

	pthread_mutex_lock(&tok_mu);
	if (!tok_next &&
	    getrandom(&tok_next, sizeof(tok_next), 0) != sizeof(tok_next))
		tok_next = (uint64_t)time(NULL) << 32;
	if (2 * (tok_n + 1) > tok_cap && tok_grow())
		goto out;
	if (!++tok_next) /* 0 is no token */
		++tok_next;
	t = tok_next;
	tok_put(tok_tab, tok_cap, t);
	tok_n++;
out:
	pthread_mutex_unlock(&tok_mu);
	return t;
}

void kvdoc_uq_end(uint64_t token)
{
	size_t i, j, m;

	/* the mask under the lock: another thread's begin may grow the
	 * table meanwhile */
	pthread_mutex_lock(&tok_mu);
	m = tok_cap - 1;
	if (!tok_cap || !tok_tab[i = tok_find(token)])
		goto out;
	/* backward shift: each later entry of the run that may sit in the
	 * hole (its home not cyclically in (i, j]) moves into it */
	for (j = (i + 1) & m; tok_tab[j]; j = (j + 1) & m) {
		size_t h = tok_slot(tok_tab[j], tok_cap);

		if (((j - h) & m) >= ((j - i) & m)) {
			tok_tab[i] = tok_tab[j];
			i = j;
		}
	}
	tok_tab[i] = 0;
	tok_n--;
out:
	pthread_mutex_unlock(&tok_mu);
}

bool kvdoc_uq_live(uint64_t token)
{
	bool live;

	pthread_mutex_lock(&tok_mu);
	live = token && tok_cap && tok_tab[tok_find(token)] == token;
	pthread_mutex_unlock(&tok_mu);
	return live;
}

/* ---- RESERVE ---- */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int kvdoc_uq_op(struct kv_buf *out, unsigned mode, uint64_t token,
		uint64_t expect, const uint8_t *dkey, size_t dn)
{
	uint8_t h[17];

	h[0] = (uint8_t)mode;
	put64(h + 1, token);
	put64(h + 9, expect);
	return kv_buf_append(out, h, 17) || kv_buf_append(out, dkey, dn) ? -1
									 : 0;
}

/* Grant it: [token][document key]. */
static int grant(struct kvd_merge *m, const uint8_t *tok, struct kv_slice dk)
{
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_PLAIN;
	m->result = KVDOC_UQ_GRANTED;
	return kv_buf_append(m->image, tok, 8) ||
		       kv_buf_append(m->image, dk.p, dk.n)
		   ? ENOMEM
		   : 0;
}

int kvdoc_uq_merge(void *ctx, struct kvd_merge *m)
{
	const uint8_t *op = m->operand.p;
	struct kv_slice dk;
	uint64_t held, expect;
	int same;

	(void)ctx;
	m->action = KVD_MERGE_KEEP;
	if (m->operand.n < 17 || m->operand.n > 17 + KVDOC_KEY_MAX) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	expect = get64(op + 9);
	dk = (struct kv_slice){op + 17, m->operand.n - 17};
	if (!m->live || m->old.n < 8) {
		if (op[0] == KVDOC_UQ_RELEASE)
			return 0;
		return grant(m, op + 1, dk);
	}
	held = get64(m->old.p);
	same = m->old.n - 8 == dk.n && !memcmp(m->old.p + 8, dk.p, dk.n);
	if (op[0] == KVDOC_UQ_RELEASE) {
		if (held == expect && !kvdoc_uq_live(held)) {
			m->action = KVD_MERGE_DELETE;
			m->result = 1;
		}
		return 0;
	}
	/* the same document again (a later write of it): a new token, so
	 * that a taker that read it under the old one asks again */
	if (same || (expect && held == expect && !kvdoc_uq_live(held)))
		return grant(m, op + 1, dk);
	if (kvdoc_uq_live(held)) {
		m->result = KVDOC_UQ_BUSY;
		return 0;
	}
	m->result = KVDOC_UQ_HELD;
	return kv_buf_append(m->reply, m->old.p, m->old.n) ? ENOMEM : 0;
}
