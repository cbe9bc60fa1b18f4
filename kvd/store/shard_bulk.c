/* shard_bulk.c - a bulk merge (KVD_W_BULK): a merge operation run over a
 * range of a shard's keys at once, its side writes sorted and put straight
 * into LMDB, not through the memtable and the journal (kvd/doc's index
 * builds: docs/architecture.md, "Indexes", the bulk build).
 *
 * The committer hands it to the shard's checkpointer with what it applied
 * so far (the active memtable frozen: kvd_shard_bulk, shard_ckpt.c), and
 * goes on with its batches; the
 * checkpointer applies that memtable, then runs the bulk merge before it
 * takes the next one (a freeze waits for it as for a checkpoint).  So
 * LMDB holds the shard exactly as it was at the hand-over while the merge
 * reads it: nothing else writes LMDB meanwhile.  The range is read in one
 * read transaction; each live key is given to the merge (which must keep
 * it: a bulk merge only adds side writes); the side writes are sorted and
 * written in bounded write transactions, appended (MDB_APPEND: pages
 * filled once, in order) while they come after the database's last key,
 * put where they fall otherwise.
 *
 * Why that is exact with writes going on: a write after the hand-over is
 * in a memtable the checkpointer has not applied yet, and writes the
 * difference between the key's image then and its new one (kvd/doc: every
 * write keeps a building index): deletes of what the bulk merge writes
 * from the old image, puts of the new.  Those sit above LMDB for readers
 * and are applied after the bulk merge's writes, so what it wrote from
 * the old image is corrected as the write said.  No journal record: replay
 * after a crash starts at a checkpoint LSN at or before the hand-over and
 * replays every later write over what the bulk merge wrote; the caller
 * runs it again when it did not record the build done.  Replicas run the
 * same range themselves at the same point of the primary's records: the
 * caller writes a marker (KVD_BULK_MARK) after each range, which the
 * replica's applier follows with its own KVD_W_BULK (kvd_bulk_mark).
 */
#include "shard_int.h"

#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "kv_status.h"
#include "store_log.h"

/* Side writes a write transaction takes at most: appended, they fill
 * pages in order (65,536 of 40 bytes change about 700 pages); put where
 * they fall, each may change a page of its own, and LMDB keeps a changed
 * page's buffer for good (docs/architecture.md, "Memory bounds"), so those
 * are bounded as a checkpoint's transactions are.  And the side bytes
 * one range collects before it stops early. */
#define BULK_TXN_ENTRIES 65536
#define BULK_TXN_PLACED 4096
#define BULK_MAX_SIDE (24u << 20)

/* A side write, as kvd_merge_side writes it: [u8 ks][u8 del][u16 klen]
 * [u32 vlen][key][value]; kept here as [u8 del][u16 iklen][u32 vlen]
 * [ikey][value], the ikey LMDB's key in "kx". */
#define SIDE_HDR 8
#define ENT_HDR 7

/* A kept side write in the sort: its ikey's first 16 bytes as two
 * big-endian words (zeros past its end), which decide most comparisons
 * without a memcmp, then where it is. */
struct ord {
	uint64_t w0, w1;
	uint32_t off;
};

/* A range's buffers, kept by its shard (shard.bulk_buf) from one range to
 * the next of a build, and given back when the checkpointer is idle: a
 * build's next range finds its pages there (their first touch by each
 * range was a tenth of a build, perf). */
struct bulk {
	struct shard *sh;
	struct kv_buf side; /* one key's side writes */
	struct kv_buf ents; /* the range's, as kept */
	struct ord *ord;    /* where they are in ents, then sorted */
	size_t n, cap;
	struct ord *tmp; /* the radix sort's other array (tcap) */
	size_t tcap;
	uint32_t *cnt; /* and its counts (65,536) */
};

static const uint8_t *ent_at(const uint8_t *base, uint32_t off, uint16_t *kn,
			     uint32_t *vn)
{
	const uint8_t *p = base + off;

	memcpy(kn, p + 1, 2);
	memcpy(vn, p + 3, 4);
	return p;
}

/* qsort has no argument: the buffer the offsets are into (per thread:
 * every shard's checkpointer sorts its own at once). */
static __thread const uint8_t *cmp_base;

static int ent_cmp(const void *x, const void *y)
{
	const struct ord *a = x, *b = y;
	uint16_t an, bn;
	uint32_t av, bv;
	const uint8_t *pa, *pb;
	int c;

	if (a->w0 != b->w0)
		return a->w0 < b->w0 ? -1 : 1;
	if (a->w1 != b->w1)
		return a->w1 < b->w1 ? -1 : 1;
	pa = ent_at(cmp_base, a->off, &an, &av);
	pb = ent_at(cmp_base, b->off, &bn, &bv);
	c = key_cmp(pa + ENT_HDR, an, pb + ENT_HDR, bn);
	/* the same key twice: the later write last */
	return c ? c : (a->off > b->off) - (a->off < b->off);
}

static uint64_t word_at(const uint8_t *k, size_t n, size_t at)
{
	uint64_t w = 0;

	for (size_t i = at; i < at + 8; i++)
		w = w << 8 | (i < n ? k[i] : 0);
	return w;
}

static int keep_one(struct bulk *b, const uint8_t *p, uint16_t kn, uint32_t vn)
{
	uint8_t h[ENT_HDR];
	uint16_t ik = (uint16_t)(kn + 1);
	const uint8_t *k;

	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;
		struct ord *o = realloc(b->ord, nc * sizeof(*o));

		if (!o)
			return KV_INTERNAL;
		b->ord = o;
		b->cap = nc;
	}
	b->ord[b->n].off = (uint32_t)b->ents.len;
	h[0] = p[1];
	memcpy(h + 1, &ik, 2);
	memcpy(h + 3, &vn, 4);
	if (kv_buf_append(&b->ents, h, ENT_HDR) ||
	    kv_buf_append(&b->ents, p, 1) ||
	    kv_buf_append(&b->ents, p + SIDE_HDR, kn) ||
	    (vn && kv_buf_append(&b->ents, p + SIDE_HDR + kn, vn)))
		return KV_INTERNAL;
	k = b->ents.data + b->ord[b->n].off + ENT_HDR;
	b->ord[b->n].w0 = word_at(k, ik, 0);
	b->ord[b->n].w1 = word_at(k, ik, 8);
	b->n++;
	return KV_OK;
}

/* Keep one key's side writes; one of keyspace 0 is refused (its expiry
 * index is the checkpoint's to keep). */
static int collect(struct bulk *b)
{
	const uint8_t *p = b->side.data, *end = p + b->side.len;

	while (end - p >= SIDE_HDR) {
		uint16_t kn;
		uint32_t vn;
		int rc;

		memcpy(&kn, p + 2, 2);
		memcpy(&vn, p + 4, 4);
		if (!p[0] || !kn || kn >= KVM_MAX_KEY)
			return KV_BAD_ARGS;
		if ((rc = keep_one(b, p, kn, vn)))
			return rc;
		p += SIDE_HDR + kn + vn;
	}
	b->side.len = 0;
	return KV_OK;
}

/* Give key k (an ikey of keyspace ks, as "kx" holds it) and its value v
 * to the merge.  KV_OK; its refusal's status; or KV_BAD_ARGS with its
 * result < 0 in op and its message in val. */
static int merge_one(struct bulk *b, const struct kvd_merge_op *mo,
		     struct kvd_wop *op, struct kv_slice opnd, const MDB_val *k,
		     const MDB_val *v, uint64_t now, struct kv_buf *img,
		     struct kv_buf *reply)
{
	struct kvd_merge m = {0};

	m.key =
	    (struct kv_slice){(const uint8_t *)k->mv_data + 1, k->mv_size - 1};
	if (!val_live(v, now, &m.exp, &m.old))
		return KV_OK; /* expired: not there */
	m.live = 1;
	m.type = val_type(v);
	m.operand = opnd;
	m.now = now;
	m.image = img;
	m.reply = reply;
	m.side = &b->side;
	img->len = reply->len = 0;
	b->side.len = 0;
	if (mo->fn(mo->ctx, &m) || img->err || reply->err || b->side.err)
		return KV_INTERNAL;
	if (m.status != KV_OK)
		return m.status;
	if (m.result < 0 || m.action != KVD_MERGE_KEEP) {
		op->result = m.result < 0 ? m.result : -1;
		if (reply->len && (op->val = malloc(reply->len))) {
			memcpy(op->val, reply->data, reply->len);
			op->vlen = (uint32_t)reply->len;
		}
		return KV_BAD_ARGS;
	}
	return collect(b);
}

/* The range: from (inclusive) to (exclusive), ikeys of keyspace op->ks;
 * the operand after them. */
struct range {
	uint8_t from[KVM_MAX_KEY], to[KVM_MAX_KEY];
	size_t fn, tn;
	struct kv_slice opnd;
};

static int range_of(const struct kvd_wop *op, struct range *r)
{
	const uint8_t *p = op->items;
	uint16_t kn, tn;
	uint32_t vn;

	if (op->nitems != 1 || op->items_len < KVD_ITEM_HDR || !op->ks ||
	    op->flags >= KVD_MERGE_MAX)
		return -1;
	memcpy(&kn, p, 2);
	memcpy(&vn, p + 2, 4);
	if (op->items_len != KVD_ITEM_HDR + (size_t)kn + vn || vn < 2)
		return -1;
	p += KVD_ITEM_HDR;
	memcpy(&tn, p + kn, 2);
	if ((size_t)tn + 2 > vn ||
	    !(r->fn = ikey_put(r->from, op->ks, p, kn)) ||
	    !(r->tn = ikey_put(r->to, op->ks, p + kn + 2, tn)))
		return -1;
	r->opnd = (struct kv_slice){p + kn + 2 + tn, vn - 2 - tn};
	return 0;
}

/* The key the next range starts from, copied out to op->val. */
static int next_out(struct kvd_wop *op, const MDB_val *k)
{
	if (!(op->val = malloc(k->mv_size - 1)))
		return KV_INTERNAL;
	memcpy(op->val, (const uint8_t *)k->mv_data + 1, k->mv_size - 1);
	op->vlen = (uint32_t)(k->mv_size - 1);
	return KV_OK;
}

/* Read the range and run the merge on each key: KV_OK, or a refusal. */
static int scan(struct bulk *b, struct kvd_wop *op, const struct range *r)
{
	const struct kvd_merge_op *mo = &b->sh->st->merge[op->flags];
	struct kv_buf img = {0}, reply = {0};
	uint64_t now = kvd_now_ms(), max = (uint64_t)op->delta, n = 0;
	MDB_val k = {r->fn, (void *)r->from}, v;
	MDB_txn *txn;
	MDB_cursor *cur;
	int rc, st = KV_OK;

	if (!mo->fn)
		return KV_UNKNOWN_OP;
	if (mdb_txn_begin(b->sh->env, NULL, MDB_RDONLY, &txn))
		return KV_INTERNAL;
	if (mdb_cursor_open(txn, b->sh->kx, &cur)) {
		mdb_txn_abort(txn);
		return KV_INTERNAL;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (key_cmp(k.mv_data, k.mv_size, r->to, r->tn) >= 0)
			break;
		if ((max && n == max) || b->ents.len >= BULK_MAX_SIDE) {
			st = next_out(op, &k);
			break;
		}
		if ((st = merge_one(b, mo, op, r->opnd, &k, &v, now, &img,
				    &reply)))
			break;
		n++;
	}
	if (rc && rc != MDB_NOTFOUND)
		st = KV_INTERNAL;
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	kv_buf_free(&img);
	kv_buf_free(&reply);
	if (st == KV_OK)
		op->result = (int64_t)n;
	return st;
}

/* Put or delete the side write at p; last is "kx"'s last key while
 * appends go on (its bytes in lastb; mv_size 0: none); *placed counts
 * the writes not appended. */
static int write_one(MDB_cursor *cur, const uint8_t *p, uint16_t kn,
		     uint32_t vn, MDB_val *last, uint8_t *lastb,
		     unsigned *placed)
{
	MDB_val k = {kn, (void *)(p + ENT_HDR)}, v;
	unsigned fl = MDB_RESERVE;
	int rc;

	if (p[0]) {
		(*placed)++;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET);
		return rc == MDB_NOTFOUND ? 0
		       : rc		  ? rc
					  : mdb_cursor_del(cur, 0);
	}
	if (last->mv_size &&
	    key_cmp(k.mv_data, k.mv_size, last->mv_data, last->mv_size) > 0)
		fl |= MDB_APPEND;
	v.mv_size = val_hdr_len(0) + vn;
	if ((rc = mdb_cursor_put(cur, &k, &v, fl)))
		return rc;
	val_hdr_put(v.mv_data, 0, KVD_VT_PLAIN);
	memcpy((uint8_t *)v.mv_data + val_hdr_len(0), p + ENT_HDR + kn, vn);
	if (fl & MDB_APPEND) {
		memcpy(lastb, k.mv_data, k.mv_size);
		last->mv_size = k.mv_size;
	} else {
		(*placed)++;
	}
	return 0;
}

/* One write transaction of the sorted side writes from *i on. */
static int write_txn(struct bulk *b, size_t *i)
{
	uint8_t lastb[KVM_MAX_KEY];
	MDB_val last = {0, lastb}, lk, lv;
	MDB_txn *txn;
	MDB_cursor *cur;
	size_t end =
	    *i + BULK_TXN_ENTRIES < b->n ? *i + BULK_TXN_ENTRIES : b->n;
	unsigned placed = 0;
	int rc;

	if ((rc = mdb_txn_begin(b->sh->env, NULL, 0, &txn)))
		return rc;
	if ((rc = mdb_cursor_open(txn, b->sh->kx, &cur))) {
		mdb_txn_abort(txn);
		return rc;
	}
	rc = mdb_cursor_get(cur, &lk, &lv, MDB_LAST);
	if (!rc && lk.mv_size <= sizeof(lastb)) {
		memcpy(lastb, lk.mv_data, lk.mv_size);
		last.mv_size = lk.mv_size;
	}
	rc = rc == MDB_NOTFOUND ? 0 : rc;
	for (; !rc && *i < end && placed < BULK_TXN_PLACED; ++*i) {
		uint16_t kn;
		uint32_t vn;
		const uint8_t *p =
		    ent_at(b->ents.data, b->ord[*i].off, &kn, &vn);

		/* sorted, they are read at random: the miss half the loop
		 * took (perf) is taken ahead */
		if (*i + 16 < b->n)
			__builtin_prefetch(b->ents.data + b->ord[*i + 16].off);
		rc = write_one(cur, p, kn, vn, &last, lastb, &placed);
	}
	mdb_cursor_close(cur);
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

static uint32_t digit(const struct ord *o, unsigned pass)
{
	uint64_t w = pass < 4 ? o->w1 : o->w0;

	return (uint32_t)(w >> (16 * (pass % 4))) & 0xffff;
}

/* Sort the kept side writes: by their first 16 bytes with a radix sort
 * (16-bit digits, the last first; one every entry shares, such as an
 * index id's, costs a count and no move), stable, so each run of equal
 * words stays in the order written; then each such run by ent_cmp.
 * glibc's qsort with a comparison function took a fifth of a build
 * (perf, 3 indexes on 1M documents).  0, or -1 out of memory. */
static int sort_ents(struct bulk *b)
{
	struct ord *src, *dst, *t;
	uint32_t *cnt;
	size_t i, j;

	if (b->tcap < b->n) {
		free(b->tmp);
		b->tcap = 0;
		if (!(b->tmp = malloc(b->cap * sizeof(*b->tmp))))
			return -1;
		b->tcap = b->cap;
	}
	if (!b->cnt && !(b->cnt = malloc(65536 * sizeof(*b->cnt))))
		return -1;
	src = b->ord;
	dst = b->tmp;
	cnt = b->cnt;
	for (unsigned pass = 0; pass < 8; pass++) {
		uint32_t sum = 0;

		memset(cnt, 0, 65536 * sizeof(*cnt));
		for (i = 0; i < b->n; i++)
			cnt[digit(&src[i], pass)]++;
		if (cnt[digit(&src[0], pass)] == b->n)
			continue;
		for (i = 0; i < 65536; i++) {
			uint32_t c = cnt[i];

			cnt[i] = sum;
			sum += c;
		}
		for (i = 0; i < b->n; i++)
			dst[cnt[digit(&src[i], pass)]++] = src[i];
		t = src, src = dst, dst = t;
	}
	if (src != b->ord) { /* the sorted array is the kept one now */
		size_t c = b->cap;

		b->tmp = b->ord;
		b->ord = src;
		b->cap = b->tcap;
		b->tcap = c;
	}
	cmp_base = b->ents.data;
	for (i = 0; i < b->n; i = j) {
		for (j = i + 1; j < b->n && b->ord[j].w0 == b->ord[i].w0 &&
				b->ord[j].w1 == b->ord[i].w1;
		     j++)
			;
		if (j - i > 1)
			qsort(b->ord + i, j - i, sizeof(*b->ord), ent_cmp);
	}
	return 0;
}

static int write_all(struct bulk *b)
{
	size_t i = 0;
	int rc = 0;

	if (b->n && sort_ents(b))
		return KV_INTERNAL;
	while (!rc && i < b->n)
		rc = write_txn(b, &i);
	if (!rc)
		return KV_OK;
	if (rc == MDB_MAP_FULL)
		return KV_MAP_FULL;
	log_error("%s: a bulk merge's write failed: %s", b->sh->path,
		  mdb_strerror(rc));
	return KV_INTERNAL;
}

static void bulk_free(struct bulk *b)
{
	kv_buf_free(&b->side);
	kv_buf_free(&b->ents);
	free(b->ord);
	free(b->tmp);
	free(b->cnt);
	free(b);
}

void kvd_bulk_idle(struct shard *sh)
{
	if (sh->bulk_buf)
		bulk_free(sh->bulk_buf);
	sh->bulk_buf = NULL;
}

void kvd_bulk_run(struct shard *sh, struct kvd_bulk_job *job)
{
	struct kvd_wop *op = job->op;
	struct bulk *b = sh->bulk_buf;
	struct range r;
	int rc;

	if (!b && !(b = sh->bulk_buf = calloc(1, sizeof(*b)))) {
		op->status = KV_INTERNAL;
		return;
	}
	b->sh = sh;
	b->side.len = b->ents.len = b->n = 0;
	if (range_of(op, &r))
		rc = KV_BAD_ARGS;
	else if ((rc = scan(b, op, &r)) == KV_OK)
		rc = write_all(b);
	else if (rc == KV_BAD_ARGS && op->result < 0)
		rc = KV_OK; /* the merge's refusal: in op */
	op->status = rc;
}

int kvd_bulk_valid(const struct kvd_wop *op)
{
	struct range r;

	return range_of(op, &r) == 0;
}

int kvd_bulk_mark(const uint8_t *rec, size_t n, struct kv_slice *val)
{
	struct kvj_rec r;
	uint32_t len;

	if (n < 5)
		return 0;
	memcpy(&len, rec + 1, 4);
	if (len > n - 5 || kvj_rec_decode(rec[0], rec + 5, len, &r) ||
	    r.type != KVJ_PUT || r.ks != KVD_KS_OTHER ||
	    r.klen != sizeof(KVD_BULK_MARK) - 1 ||
	    memcmp(r.key, KVD_BULK_MARK, r.klen))
		return 0;
	*val = (struct kv_slice){r.val, r.vlen};
	return 1;
}
