/* shard_scan.c - SCAN and COUNT: every shard's keys merged in key order,
 * read through the calling io thread's view of each shard: its active
 * memtable, over its frozen one, over the LMDB snapshot (memtable.h,
 * "SCAN/KEYS" and "COUNT/DBSIZE", explains the merge and the counts). */
#include "shard_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_proto.h"
#include "kv_status.h"
#include "store_log.h"

/* ===================== One shard's merged stream ===================== */

static int in_range(const struct kvd_scan *sc, const uint8_t *k, size_t n)
{
	if (sc->prefix.n &&
	    (n < sc->prefix.n || memcmp(k, sc->prefix.p, sc->prefix.n)))
		return 0;
	return !sc->end.n || key_cmp(k, n, sc->end.p, sc->end.n) < 0;
}

/* Step the head's cursor; h->ck is then its key within the keyspace
 * ("kx" keys lose their byte), and the cursor is done past the
 * keyspace. */
static int cursor_step(struct kvd_reader *r, unsigned i, MDB_cursor_op op)
{
	struct scan_head *h = &r->heads[i];
	int rc = mdb_cursor_get(h->cur, &h->ck, &h->cv, op);

	h->cvalid = rc == 0;
	if (rc && rc != MDB_NOTFOUND) {
		log_error("%s: cursor failed: %s", r->st->sh[i].path,
			  mdb_strerror(rc));
		return -1;
	}
	if (h->cvalid && h->ks) {
		const uint8_t *k = h->ck.mv_data;

		h->cvalid = h->ck.mv_size > 1 && k[0] == h->ks;
		h->ck.mv_data = (void *)(k + 1);
		h->ck.mv_size--;
	}
	return 0;
}

/* Memtable iterator s's key within the keyspace; 0 when it is done or
 * past the keyspace (its keys are ikeys: shard_int.h). */
static int iter_key(struct scan_head *h, int s, struct kv_slice *k)
{
	const uint8_t *p;
	uint32_t n;

	if (!h->ivalid[s])
		return 0;
	p = kvm_iter_key(&h->it[s], &n);
	if (n < 2 || p[0] != h->ks)
		return h->ivalid[s] = 0;
	k->p = p + 1;
	k->n = n - 1;
	return 1;
}

/* The smallest key among the sources that are positioned. */
static int head_min(struct scan_head *h, struct kv_slice *min)
{
	int any = 0;

	for (int s = 0; s < 2; s++) {
		struct kv_slice k;

		if (!iter_key(h, s, &k))
			continue;
		if (!any || key_cmp(k.p, k.n, min->p, min->n) < 0)
			*min = k;
		any = 1;
	}
	if (h->cvalid && (!any || key_cmp(h->ck.mv_data, h->ck.mv_size, min->p,
					  min->n) < 0)) {
		min->p = h->ck.mv_data;
		min->n = h->ck.mv_size;
		any = 1;
	}
	return any;
}

/* Take key min from the highest source that has it, step every source
 * past it; 1 when it is a live value (h->k, h->v, h->exp set). */
static int head_take(struct kvd_reader *r, unsigned i, struct kv_slice min,
		     uint64_t now, int *err)
{
	struct scan_head *h = &r->heads[i];
	int got = 0, live = 0;

	for (int s = 0; s < 2; s++) {
		struct kvm_entry e;
		struct kv_slice k;

		if (!iter_key(h, s, &k))
			continue;
		if (key_cmp(k.p, k.n, min.p, min.n))
			continue;
		if (!got) {
			kvm_iter_entry(&h->it[s], &e);
			got = 1;
			live = e.kind == KVM_VALUE &&
			       (!e.expire_at || e.expire_at > now);
			h->k = k;
			h->v.p = e.val;
			h->v.n = e.vlen;
			h->exp = e.expire_at;
			h->type = e.type;
		}
		h->ivalid[s] = kvm_iter_next(&h->it[s]);
	}
	if (h->cvalid && !key_cmp(h->ck.mv_data, h->ck.mv_size, min.p, min.n)) {
		if (!got) {
			h->k.p = h->ck.mv_data;
			h->k.n = h->ck.mv_size;
			live = val_live(&h->cv, now, &h->exp, &h->v);
			h->type = live ? val_type(&h->cv) : 0;
		}
		if (cursor_step(r, i, MDB_NEXT))
			*err = 1;
	}
	return live;
}

/* Position shard i's head at its next live key in range. */
static int head_next(struct kvd_reader *r, unsigned i,
		     const struct kvd_scan *sc, uint64_t now)
{
	struct scan_head *h = &r->heads[i];
	struct kv_slice min = {NULL, 0};
	int err = 0;

	h->valid = 0;
	while (head_min(h, &min)) {
		if (!in_range(sc, min.p, min.n))
			return 0;
		if (head_take(r, i, min, now, &err)) {
			h->valid = 1;
			return 0;
		}
		if (err)
			return -1;
	}
	return err ? -1 : 0;
}

/* Give back the memtable runs a head's iterators took (zeroed heads hold
 * none).  The keys they returned stay valid: they are in the arenas. */
static void head_release(struct scan_head *h)
{
	kvm_iter_fini(&h->it[0]);
	kvm_iter_fini(&h->it[1]);
}

static void heads_release(struct kvd_reader *r)
{
	for (unsigned i = 0; i < r->st->n; i++)
		head_release(&r->heads[i]);
}

/* Where a scan's pass ends, as an ikey (its end, else past its prefix,
 * else past its keyspace) into ik; its length, 0 for none.  The memtable
 * iterators leave out the keys created since their last run that lie
 * beyond it: a lookup of one index value sorts none of them. */
static size_t end_ikey(const struct kvd_scan *sc, uint8_t *ik)
{
	size_t n;

	ik[0] = (uint8_t)sc->ks;
	if (sc->end.n && sc->end.n < KVM_MAX_KEY) {
		memcpy(ik + 1, sc->end.p, sc->end.n);
		return sc->end.n + 1;
	}
	if (sc->prefix.n && sc->prefix.n < KVM_MAX_KEY) {
		memcpy(ik + 1, sc->prefix.p, sc->prefix.n);
		/* the prefix's successor: its last byte below 0xff, plus 1 */
		for (n = sc->prefix.n + 1; n > 1 && ik[n - 1] == 0xff; n--)
			;
		if (n > 1) {
			ik[n - 1]++;
			return n;
		}
	}
	if (sc->ks < 0xff) {
		ik[0] = (uint8_t)(sc->ks + 1);
		return 1;
	}
	return 0;
}

/* Shard i's sources at the first key >= from. */
static int head_seek(struct kvd_reader *r, unsigned i, struct kv_slice from,
		     const struct kvd_scan *sc, uint64_t now)
{
	struct scan_head *h = &r->heads[i];
	struct kvm *m[2];
	uint8_t ik[KVM_MAX_KEY], end[KVM_MAX_KEY];
	/* from within the keyspace, as an ikey (a from too long to be a key
	 * is cut: only keys above it are in range anyway) */
	size_t n = from.n < KVM_MAX_KEY ? from.n : KVM_MAX_KEY - 1;
	size_t en = end_ikey(sc, end);

	head_release(h);
	memset(h, 0, sizeof(*h));
	h->ks = sc->ks;
	ik[0] = (uint8_t)sc->ks;
	if (n)
		memcpy(ik + 1, from.p, n);
	kvd_reader_enter(r);
	shard_layers(&r->st->sh[i], &m[0], &m[1]);
	h->base = 1;
	for (int s = 0; s < 2; s++) {
		if (!m[s] || !h->base)
			continue;
		kvm_iter_init(&h->it[s], m[s]);
		h->ivalid[s] =
		    kvm_iter_seek_range(&h->it[s], ik, n + 1, end, en);
		if (kvm_iter_base_hidden(&h->it[s]))
			h->base = 0; /* a FLUSHALL hides what is below */
	}
	if (h->base) {
		if (!(h->cur = kvd_shard_rcursor(r, i, sc->ks)))
			return -1;
		h->ck = ikey_lmdb(ik, n + 1);
		if (cursor_step(r, i,
				h->ck.mv_size ? MDB_SET_RANGE : MDB_FIRST))
			return -1;
	}
	return head_next(r, i, sc, now);
}

/* Every shard's head at the first live key >= max(prefix, start). */
static int scan_seek(struct kvd_reader *r, const struct kvd_scan *sc,
		     uint64_t now)
{
	struct kv_slice from = sc->prefix;

	if (sc->start.n &&
	    key_cmp(sc->start.p, sc->start.n, from.p, from.n) > 0)
		from = sc->start;
	for (unsigned i = 0; i < r->st->n; i++)
		if (head_seek(r, i, from, sc, now))
			return -1;
	return 0;
}

static int scan_min(struct kvd_reader *r)
{
	int best = -1;

	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		if (h->valid &&
		    (best < 0 || key_cmp(h->k.p, h->k.n, r->heads[best].k.p,
					 r->heads[best].k.n) < 0))
			best = (int)i;
	}
	return best;
}

static int scan_run(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next)
{
	unsigned emitted = 0;
	size_t bytes = 0;
	int i;

	next->p = NULL;
	next->n = 0;
	if (scan_seek(r, sc, now))
		return KV_INTERNAL;
	while ((i = scan_min(r)) >= 0) {
		struct scan_head *h = &r->heads[i];
		struct kv_slice val = h->v;

		if (emitted >= sc->limit || bytes >= sc->max_bytes) {
			*next = h->k;
			break;
		}
		if (sc->keys_only)
			val.n = 0;
		int stop = fn(arg, h->k, val, h->type, h->exp);

		if (stop == KVD_SCAN_STOP) {
			*next = h->k;
			break;
		}
		if (stop)
			return KV_INTERNAL;
		emitted++;
		bytes += h->k.n + val.n + 10;
		if (head_next(r, (unsigned)i, sc, now))
			return KV_INTERNAL;
	}
	return KV_OK;
}

int kvd_reader_scan(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next)
{
	int rc = scan_run(r, sc, now, fn, arg, next);

	heads_release(r);
	return rc;
}

/* ===================== Counting ===================== */

static int count_run(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count)
{
	struct kvd_scan sc = {.prefix = prefix};

	if (scan_seek(r, &sc, now))
		return KV_INTERNAL;
	for (unsigned i = 0; i < r->st->n; i++) {
		while (r->heads[i].valid) {
			(*count)++;
			if (head_next(r, i, &sc, now))
				return KV_INTERNAL;
		}
	}
	return KV_OK;
}

static int count_prefix(struct kvd_reader *r, struct kv_slice prefix,
			uint64_t now, uint64_t *count)
{
	int rc = count_run(r, prefix, now, count);

	heads_release(r);
	return rc;
}

/* 1 when no memtable above had a say on key at the moment v counted
 * them (the base value shows): a key first written after it does not
 * count, or the reaper deleting an expired key while COUNT runs would
 * take it off twice. */
static int unshadowed(const struct shard_view *v, unsigned n, const void *key,
		      size_t klen) /* an ikey */
{
	struct kvm_entry e;

	for (unsigned s = 0; s < n; s++)
		if (v->m[s] && kvm_get(v->m[s], key, klen, &e) != KVM_ABSENT &&
		    e.first_lsn <= v->upto[s])
			return 0;
	return 1;
}

/* Keys in LMDB that have expired, not reaped, not shadowed above. */
static int count_expired_base(struct kvd_reader *r, unsigned i,
			      const struct shard_view *sv, uint64_t now,
			      uint64_t *n)
{
	MDB_txn *txn = sv->txn;
	struct shard *sh = &r->st->sh[i];
	MDB_cursor *c;
	MDB_val k, v, kv;
	uint8_t ik[KVM_MAX_KEY];
	int rc;

	if (mdb_cursor_open(txn, sh->exp, &c))
		return -1;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint64_t at = k.mv_size == 8 ? be64_get(k.mv_data) : 0, exp;
		struct kv_slice data;

		if (at > now)
			break;
		if (mdb_get(txn, sh->kv, &v, &kv) == 0 &&
		    val_parse(&kv, &exp, &data) == 0 && exp == at &&
		    unshadowed(sv, 2, ik,
			       ikey_put(ik, 0, v.mv_data, v.mv_size)))
			(*n)++;
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}

/* Values of memtable m[s], as they were when v counted it, that have
 * expired, not shadowed above. */
static uint64_t count_expired_mem(const struct shard_view *v, unsigned s,
				  uint64_t now)
{
	struct kvm_iter it;
	struct kvm_entry e;
	uint64_t n = 0;

	kvm_iter_init(&it, v->m[s]);
	for (int ok = kvm_iter_seek(&it, NULL, 0); ok;
	     ok = kvm_iter_next(&it)) {
		if (kvm_iter_entry_at(&it, v->upto[s], v->flush[s], &e) &&
		    e.kind == KVM_VALUE && e.expire_at && e.expire_at <= now &&
		    unshadowed(v, s, e.key, e.klen))
			n++;
	}
	kvm_iter_fini(&it);
	return n;
}

/* kvm_count_resolve's question for a key first written to memtable
 * v->m[s] by a plain PUT: does it hold a value in the layers below that
 * memtable, that is the frozen one (for the active one) and LMDB?  The
 * view's layers answer it as they were when that memtable was active: the
 * frozen memtable is in the view for as long as the LMDB snapshot predates
 * its checkpoint, and a checkpoint only moves it into LMDB. */
struct below_q {
	struct shard *sh;
	struct shard_view *v;
	int s;
};

static int below_fn(void *arg, const uint8_t *key, uint32_t klen)
{
	struct below_q *q = arg;
	MDB_val k = ikey_lmdb(key, klen), d; /* never a key of "kx": those
						are not counted */
	struct kvm_entry e;
	int rc;

	if (q->s == 0 && q->v->m[1]) {
		rc = kvm_get(q->v->m[1], key, klen, &e);
		if (rc == KVM_VALUE || rc == KVM_TOMBSTONE)
			return rc == KVM_VALUE;
	}
	rc = mdb_get(q->v->txn, q->sh->kv, &k, &d);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc ? -1 : 1;
}

int kvd_shard_entries(struct kvd_reader *r, unsigned i, struct shard_view *v)
{
	struct shard *sh = &r->st->sh[i];
	struct kvm_count c;
	MDB_stat ms;

	memset(v, 0, sizeof(*v));
	kvd_reader_enter(r);
	shard_layers(sh, &v->m[0], &v->m[1]);
	if (!(v->txn = kvd_shard_rtxn(r, i)) || mdb_stat(v->txn, sh->kv, &ms))
		return -1;
	/* A frozen memtable this snapshot already holds counts once. */
	if (v->m[1] && kvd_shard_meta_lsn(sh, v->txn) >= kvm_last_lsn(v->m[1]))
		v->m[1] = NULL;
	v->base = 1;
	v->entries = (int64_t)ms.ms_entries;
	/* One that it holds part of (a checkpoint part-way): LMDB's entries
	 * as they were before it, which the memtable's delta is counted
	 * against. */
	if (v->m[1])
		kvd_shard_ckpt_base(sh, v->txn, kvm_last_lsn(v->m[1]),
				    &v->entries);
	for (int s = 1; s >= 0; s--) {
		struct below_q q = {sh, v, s};

		if (!v->m[s])
			continue;
		if (kvm_count_resolve(v->m[s], &c, below_fn, &q))
			return -1;
		v->expiring[s] = c.expiring;
		v->upto[s] = c.lsn;
		v->flush[s] = c.flush_lsn;
		if (c.flush_lsn) {
			v->entries = 0;
			v->base = 0;
			if (s == 0)
				v->m[1] = NULL;
		}
		v->entries +=
		    (int64_t)(c.keys - c.tombstones) - (int64_t)c.below;
	}
	return 0;
}

/* Live keys of shard i: LMDB's entries, plus each memtable's delta
 * (memtable.h, COUNT), minus the expired ones not yet reaped. */
static int count_shard(struct kvd_reader *r, unsigned i, uint64_t now,
		       uint64_t *count)
{
	struct shard_view v;
	uint64_t expired;
	unsigned tries = 0;

	/* Again when a flush came after the count: the memtable no longer
	 * shows what was hidden at that moment.  Flushes are rare; a client
	 * sending nothing but FLUSHALL must still not hold this io thread
	 * here, so after a few tries the last answer stands: it may then
	 * still count expired keys that the racing flush removed. */
	do {
		expired = 0;
		if (kvd_shard_entries(r, i, &v))
			return -1;
		if (v.base && count_expired_base(r, i, &v, now, &expired))
			return -1;
		for (unsigned s = 0; s < 2; s++)
			if (v.m[s] && v.expiring[s])
				expired += count_expired_mem(&v, s, now);
	} while (v.m[0] && kvm_flush_lsn(v.m[0]) != v.flush[0] && ++tries < 4);
	v.entries -= (int64_t)expired;
	*count += v.entries > 0 ? (uint64_t)v.entries : 0;
	return 0;
}

int kvd_reader_count(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count)
{
	*count = 0;
	if (prefix.n)
		return count_prefix(r, prefix, now, count);
	for (unsigned i = 0; i < r->st->n; i++)
		if (count_shard(r, i, now, count))
			return KV_INTERNAL;
	return KV_OK;
}
