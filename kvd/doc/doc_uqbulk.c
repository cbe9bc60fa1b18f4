/* doc_uqbulk.c - a unique index build's reservations in bulk
 * (doc_uqbulk.h).
 *
 * The build used to hand every document to the reservations' driver
 * (doc_uq.h): a window of 256 documents, each taking its keys one at a
 * time, then a REINDEX holding them, every entry through its committer.
 * Here a batch of BATCH documents is read and the RESERVE of every unique
 * key of each goes out at once, while the entries are written in ranges
 * (doc_bulk.h) whose section no longer marks the index unique.
 *
 * Each grant names a token ended before the pass began, so no grant of
 * the pass makes another writer wait: one that finds a key the pass
 * granted reads the holder's document, as for any reservation whose
 * write is over.  That is right because the pass grants a key only to a
 * document whose image, read after the index was added, has it (a write
 * since then that gains a key reserves it itself; one that keeps the key
 * had it when the pass read).  A RESERVE the shard does not grant (the
 * key held by another document, or by a write under way) leaves its
 * document for the driver, which waits, takes a leftover over, or fails
 * the build with 11000, as a build always did.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doc_uqbulk.h"
#include "index.h"
#include "kv_status.h"
#include "kvd.h"
#include "unique.h"

/* Documents read per batch: their RESERVEs are out together (one or a
 * few each), enough to fill the committers' batches of both shards.  A
 * batch ends at BYTES_MAX of documents (their keys take no more), and
 * one whose documents had many keys (arrays under a multikey index)
 * makes the next one smaller, so that about KEYS_MAX RESERVEs are out at
 * once whatever the documents hold. */
#define BATCH 4096
#define KEYS_MAX 8192
#define BYTES_MAX (8u << 20)

int doc_uqbulk_start(struct doc_uqbulk *u, uint32_t coll, struct kv_slice sec)
{
	kvdoc_scan_init(&u->scan, coll);
	u->scan.max_bytes = BYTES_MAX;
	u->sec.len = u->later.len = u->lpos = 0;
	u->out = u->ndocs = 0;
	u->nmax = BATCH;
	/* a token no write holds: begun and ended at once */
	if (!(u->token = kvdoc_uq_begin()))
		return -1;
	kvdoc_uq_end(u->token);
	if (!u->miss && !(u->miss = malloc(BATCH)))
		return -1;
	return kv_buf_append(&u->sec, sec.p, sec.n) ? -1 : 0;
}

/* A document of the batch: its key and its unique keys. */
static int keep(void *arg, struct kv_slice key, struct kv_slice val,
		unsigned type, uint64_t exp)
{
	struct doc_uqbulk *u = arg;
	struct kv_slice sec = {u->sec.data, u->sec.len};
	uint8_t n = (uint8_t)key.n;
	uint32_t ln;
	int rc;

	(void)exp;
	if (type != KVD_VT_DOC || key.n > KVDOC_KEY_MAX)
		return 0;
	u->keys.len = 0;
	if ((rc = kvdoc_ix_unique_keys(sec, 0, val.p, val.n, &u->keys,
				       &u->err)) != 0) {
		if (rc == ENOMEM)
			mql_error_set(&u->err, MQL_InternalError,
				      "out of memory");
		return -1;
	}
	ln = (uint32_t)u->keys.len;
	u->ndocs++;
	return kv_buf_append(&u->batch, &n, 1) ||
	       kv_buf_append(&u->batch, key.p, key.n) ||
	       kv_buf_append(&u->batch, &ln, 4) ||
	       kv_buf_append(&u->batch, u->keys.data, ln);
}

/* The RESERVE of each key of the batch's document i at p. */
static int send_doc(struct doc_uqbulk *u, unsigned i, const uint8_t *p)
{
	struct kv_slice dk = {p + 1, p[0]}, l, k;
	uint8_t rk[KVDOC_UQ_KEY_MAX];
	uint32_t ln, id;

	memcpy(&ln, p + 1 + dk.n, 4);
	l = (struct kv_slice){p + 5 + dk.n, ln};
	while (kvdoc_keylist_next(&l, &id, &k)) {
		size_t rn = kvdoc_uq_key(id, k.p, k.n, rk);

		u->op.len = 0;
		if (kvdoc_uq_op(&u->op, KVDOC_UQ_TAKE, u->token, 0, dk.p,
				dk.n) ||
		    u->send(u->arg, KVD_KS_INDEX,
			    KVDOC_MERGE_BASE + KVDOC_OP_RESERVE,
			    (struct kv_slice){rk, rn},
			    (struct kv_slice){u->op.data, u->op.len},
			    DOC_UQBULK_AUX | i))
			return -1;
		u->out++;
	}
	return 0;
}

/* The batch's misses, once all its RESERVEs are back: to the driver. */
static void batch_done(struct doc_uqbulk *u)
{
	const uint8_t *p = u->batch.data;

	for (unsigned i = 0; i < u->ndocs; i++) {
		uint32_t ln;

		memcpy(&ln, p + 1 + p[0], 4);
		if (u->miss[i] && kv_buf_append(&u->later, p, 1u + p[0]))
			mql_error_set(&u->err, MQL_InternalError,
				      "out of memory");
		p += 5u + p[0] + ln;
	}
	u->ndocs = 0;
	u->batch.len = 0;
}

/* The next batch's size from this one's keys and bytes. */
static void next_size(struct doc_uqbulk *u)
{
	uint64_t n = u->ndocs ? u->ndocs : 1, m = n * KEYS_MAX / (u->out + 1);

	u->nmax = m < 1 ? 1 : m > BATCH ? BATCH : (unsigned)m;
}

int doc_uqbulk_step(struct doc_uqbulk *u, struct kvd_reader *rd, uint64_t now)
{
	while (!u->err.code && !u->scan.done) {
		const uint8_t *p;
		uint32_t ln;

		u->batch.len = 0;
		u->ndocs = 0;
		if (kvdoc_scan_batch(&u->scan, rd, u->nmax, now, keep, u) !=
			KV_OK ||
		    u->batch.err) {
			if (!u->err.code)
				mql_error_set(&u->err, MQL_InternalError,
					      "reading documents failed");
			break;
		}
		memset(u->miss, 0, BATCH);
		p = u->batch.data;
		for (unsigned i = 0; i < u->ndocs; i++) {
			if (send_doc(u, i, p)) {
				mql_error_set(&u->err, MQL_InternalError,
					      "out of memory");
				break;
			}
			memcpy(&ln, p + 1 + p[0], 4);
			p += 5u + p[0] + ln;
		}
		next_size(u);
		if (u->out)
			return u->err.code ? -1 : 1;
		batch_done(u); /* no unique key in the batch */
	}
	return u->err.code ? -1 : 0;
}

void doc_uqbulk_back(struct doc_uqbulk *u, const struct kvd_pend *pd)
{
	unsigned i = pd->aux & ~DOC_UQBULK_AUX;

	u->out--;
	if (pd->status != KV_OK) {
		if (!u->err.code)
			mql_error_set(&u->err, MQL_InternalError,
				      "reserving a unique key failed (%s)",
				      kv_status_name(pd->status));
	} else if (pd->result != KVDOC_UQ_GRANTED && i < BATCH) {
		u->miss[i] = 1;
	}
	if (!u->out)
		batch_done(u);
}

int doc_uqbulk_later(struct doc_uqbulk *u, struct kv_slice *dk)
{
	if (u->lpos >= u->later.len) { /* all handed out: room again */
		u->later.len = u->lpos = 0;
		return 0;
	}
	*dk = (struct kv_slice){u->later.data + u->lpos + 1,
				u->later.data[u->lpos]};
	u->lpos += 1u + dk->n;
	return 1;
}

size_t doc_uqbulk_waiting(const struct doc_uqbulk *u)
{
	return u->later.len - u->lpos;
}

void doc_uqbulk_free(struct doc_uqbulk *u)
{
	free(u->miss);
	kv_buf_free(&u->sec);
	kv_buf_free(&u->batch);
	kv_buf_free(&u->later);
	kv_buf_free(&u->keys);
	kv_buf_free(&u->op);
	memset(u, 0, sizeof(*u));
}
