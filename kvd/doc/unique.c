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
 * reservations (one per connection at most), so an array scanned under a
 * mutex is enough. */
static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *tok_live, tok_next;
static size_t tok_n, tok_cap;

uint64_t kvdoc_uq_begin(void)
{
	uint64_t t = 0;

	pthread_mutex_lock(&tok_mu);
	if (!tok_next &&
	    getrandom(&tok_next, sizeof(tok_next), 0) != sizeof(tok_next))
		tok_next = (uint64_t)time(NULL) << 32;
	if (tok_n == tok_cap) {
		size_t cap = tok_cap ? 2 * tok_cap : 64;
		uint64_t *p = realloc(tok_live, cap * sizeof(*p));

		if (!p)
			goto out;
		tok_live = p;
		tok_cap = cap;
	}
	if (!++tok_next) /* 0 is no token */
		++tok_next;
	t = tok_next;
	tok_live[tok_n++] = t;
out:
	pthread_mutex_unlock(&tok_mu);
	return t;
}

void kvdoc_uq_end(uint64_t token)
{
	pthread_mutex_lock(&tok_mu);
	for (size_t i = 0; i < tok_n; i++)
		if (tok_live[i] == token) {
			tok_live[i] = tok_live[--tok_n];
			break;
		}
	pthread_mutex_unlock(&tok_mu);
}

bool kvdoc_uq_live(uint64_t token)
{
	bool live = false;

	pthread_mutex_lock(&tok_mu);
	for (size_t i = 0; i < tok_n && !live; i++)
		live = tok_live[i] == token;
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
