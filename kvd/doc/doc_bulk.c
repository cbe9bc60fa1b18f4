/* doc_bulk.c - an index build's pass over a collection as bulk merges
 * (store.h, KVD_W_BULK): each shard's documents in ranges of BULK_KEYS,
 * each range one REINDEX of every document in it run by the shard's
 * checkpointer, whose entries go into LMDB sorted and unjournaled (the
 * store's shard_bulk.c), then a marker (KVDOC_OP_MARK of KVD_BULK_MARK)
 * journaled on that shard naming the range done, which a replica follows
 * with the same range of its own (docs/architecture.md, "Indexes", the
 * bulk build).
 *
 * Why ranges: a range's entries are held in memory and sorted there, and
 * the checkpointer applies no memtable while it runs one (a writer that
 * fills its memtable meanwhile waits for it), so a range is bounded;
 * every write since IXADD keeps the index itself, so a range read later
 * sees their documents as they are then, and an entry written twice is
 * the same entry.  A unique key's reservation goes through the
 * committers (doc_uq.h), which a range cannot wait for: a build with a
 * unique index runs its ranges under a section without unique marks,
 * its keys reserved beside them (doc_uqbulk.h, doc_ixwork.h).
 */
#include <stdlib.h>
#include <string.h>

#include "doc_bulk.h"
#include "kv_status.h"
#include "kvd.h"

/* A range is REINDEX over the documents; its marker, MARK of
 * KVD_BULK_MARK. */
#define RANGE_ID (KVDOC_MERGE_BASE + KVDOC_OP_REINDEX)
#define MARK_ID (KVDOC_MERGE_BASE + KVDOC_OP_MARK)
#define VAL_HDR 6 /* [u16 4][to] in front of the section */

/* Documents a range reads at most (the store stops one earlier at 24 MiB
 * of entries): about half a second of a checkpointer's time for 3 indexes
 * (bench/ixbuild_time.py).  KVD_BULK_KEYS in the environment sets it
 * (tests make it tiny to have many ranges and markers). */
#define BULK_KEYS 262144

static int64_t bulk_keys(void)
{
	const char *e = getenv("KVD_BULK_KEYS");
	long long n = e ? atoll(e) : 0;

	return n > 0 ? n : BULK_KEYS;
}

static void be32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* The value of a range's request from shard s's key on, up to end: [u16
 * n][end][section]; its marker's: [u8 merge id][u8 ks][the request's
 * item: u16 klen][u32 vlen][key][value]. */
static int send_range(struct doc_bulk *b, unsigned s)
{
	struct kv_slice from = {b->from + s * KVDOC_KEY_MAX, b->flen[s]};

	b->out++;
	return b->send(b->arg, KVD_W_BULK, KVD_KS_DOC, RANGE_ID, s, from,
		       (struct kv_slice){b->val.data, b->val.len}, bulk_keys(),
		       DOC_BULK_AUX | s << 1);
}

static int send_mark(struct doc_bulk *b, unsigned s, struct kv_slice next)
{
	const uint8_t *end = next.n ? next.p : b->to;
	uint16_t kn = (uint16_t)b->flen[s],
		 tn = (uint16_t)(next.n ? next.n : 4);
	struct kv_slice sec = {b->val.data + VAL_HDR, b->val.len - VAL_HDR};
	uint32_t vn = 2u + tn + (uint32_t)sec.n;
	uint8_t h[2 + KVD_ITEM_HDR] = {RANGE_ID, KVD_KS_DOC};
	static const char key[] = KVD_BULK_MARK;

	memcpy(h + 2, &kn, 2);
	memcpy(h + 4, &vn, 4);
	b->mark.len = 0;
	if (kv_buf_append(&b->mark, h, sizeof(h)) ||
	    kv_buf_append(&b->mark, b->from + s * KVDOC_KEY_MAX, kn) ||
	    kv_buf_append(&b->mark, &tn, 2) ||
	    kv_buf_append(&b->mark, end, tn) ||
	    kv_buf_append(&b->mark, sec.p, sec.n))
		return -1;
	b->out++;
	return b->send(b->arg, KVD_W_MERGE, KVD_KS_OTHER, MARK_ID, s,
		       (struct kv_slice){(const uint8_t *)key, sizeof(key) - 1},
		       (struct kv_slice){b->mark.data, b->mark.len}, 0,
		       DOC_BULK_AUX | s << 1 | 1);
}

int doc_bulk_start(struct doc_bulk *b, uint32_t coll, struct kv_slice sec,
		   unsigned nshards)
{
	uint16_t tn = 4;

	b->nshards = nshards;
	b->left = nshards;
	b->out = 0;
	b->val.len = 0;
	free(b->from);
	free(b->flen);
	b->from = malloc((size_t)nshards * KVDOC_KEY_MAX);
	b->flen = malloc(nshards * sizeof(*b->flen));
	if (!b->from || !b->flen || coll == UINT32_MAX)
		return -1;
	be32(b->to, coll + 1);
	if (kv_buf_append(&b->val, &tn, 2) ||
	    kv_buf_append(&b->val, b->to, 4) ||
	    kv_buf_append(&b->val, sec.p, sec.n))
		return -1;
	for (unsigned s = 0; s < nshards; s++) {
		be32(b->from + s * KVDOC_KEY_MAX, coll);
		b->flen[s] = 4;
		if (send_range(b, s))
			return -1;
	}
	return 0;
}

/* A range came back: its marker, then the next range, or the shard is
 * done.  0, or -1 with b->err. */
static int range_back(struct doc_bulk *b, unsigned s, const struct kvd_pend *pd)
{
	struct kv_slice next = {pd->val, pd->val ? pd->vlen : 0};

	if (pd->status != KV_OK || pd->result < 0) {
		if (pd->result < 0)
			mql_error_set(&b->err, (int)-pd->result, "%.*s",
				      (int)(next.n < 400 ? next.n : 400),
				      next.n ? (const char *)next.p : "");
		else
			mql_error_set(&b->err, MQL_InternalError,
				      "index build failed (%s)",
				      kv_status_name(pd->status));
		return -1;
	}
	if (next.n > KVDOC_KEY_MAX) {
		mql_error_set(&b->err, MQL_InternalError,
			      "index build: a key too long");
		return -1;
	}
	if (send_mark(b, s, next)) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		return -1;
	}
	if (!next.n) {
		b->left--;
		return 0;
	}
	memcpy(b->from + s * KVDOC_KEY_MAX, next.p, next.n);
	b->flen[s] = (uint16_t)next.n;
	if (send_range(b, s)) {
		mql_error_set(&b->err, MQL_InternalError, "out of memory");
		return -1;
	}
	return 0;
}

int doc_bulk_back(struct doc_bulk *b, const struct kvd_pend *pd)
{
	unsigned s = (pd->aux & ~DOC_BULK_AUX) >> 1;

	b->out--;
	if (b->err.code || s >= b->nshards)
		return b->err.code ? -1 : 0;
	if (pd->aux & 1) { /* a marker */
		if (pd->status != KV_OK) {
			mql_error_set(&b->err, MQL_InternalError,
				      "index build failed (%s)",
				      kv_status_name(pd->status));
			return -1;
		}
		return 0;
	}
	return range_back(b, s, pd);
}

void doc_bulk_free(struct doc_bulk *b)
{
	free(b->from);
	free(b->flen);
	kv_buf_free(&b->val);
	kv_buf_free(&b->mark);
	memset(b, 0, sizeof(*b));
}
