/* shard_write.c - a committer's batch: PUT, DEL, INCR, APPEND, EXPIRE,
 * GETDEL and FLUSH computed against the layers (the batch so far, the
 * active memtable, the frozen one, LMDB), turned into physical journal
 * records (the resulting value or tombstone, absolute expiry: replay is
 * deterministic), appended with one write, flushed once (sync mode), and
 * only then inserted into the active memtable and published there whole
 * (kvm_publish), where readers see them all at once. */
#include "shard_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "clock.h"
#include "kv_proto.h"
#include "kv_status.h"
#include "store_log.h"

/* A full map or disk refuses every batch until room is made, and a
 * committer retries a failed batch in parts: one line a second, with a
 * count of the others, is enough. */
static struct kvd_log_limit full_limit = KVD_LOG_LIMIT_INIT(1000);

/* The shard stops taking writes: a failed journal write or flush is never
 * retried (a retried fsync can report success for data already lost). */
static int shard_fail(struct shard *sh, const char *what, int err)
{
	log_error("%s: journal %s failed: %s; this shard accepts no more "
		  "writes until restart (a failed write or fsync is never "
		  "retried; reads go on)",
		  sh->path, what, kvj_strerror(err));
	atomic_store(&sh->failed, KV_SHARD_FAILED);
	return KV_SHARD_FAILED;
}

/* ===================== Room for deletes ===================== */

/* Pages of the map kept for deletes: LMDB copies every page it changes,
 * so a DEL in a map with no free page fails, and a full map could never be
 * emptied.  A write other than a delete is refused once only this many
 * pages are left: enough for a batch of deletes and for the free-page list
 * FLUSHALL builds (8 bytes a page, so map/512), twice over. */
static uint64_t reserve_pages(uint64_t map_pages)
{
	return 64 + map_pages / 256;
}

/* Pages listed free in the map (LMDB's free-page database: one record per
 * transaction that freed pages, each an array whose first word is its
 * count).  LMDB opens no cursor on it in a write transaction, so this reads
 * a snapshot of the last commit.
 * Read only when the unused end of the map is below the reserve. */
static uint64_t free_pages(MDB_env *env)
{
	MDB_txn *rt;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t n = 0;
	int rc;

	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &rt))
		return 0;
	if (mdb_cursor_open(rt, 0, &c) == 0) {
		for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
		     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
			if (v.mv_size >= 2 * sizeof(size_t))
				n += v.mv_size / sizeof(size_t) - 1;
		mdb_cursor_close(c);
	}
	mdb_txn_abort(rt);
	return n;
}

/* Pages a checkpoint of bytes of records may take: twice their size, for
 * half-full B-tree pages and the branch pages a write transaction copies. */
static uint64_t ckpt_pages(uint64_t bytes, uint64_t psize)
{
	return 2 * bytes / psize + 1;
}

/* Pages of shard sh's map that checkpoints may still use, keeping the
 * reserve, as of the last commit; the free-page list is read only when the
 * unused end of the map is below need.  *psize gets the page size. */
static int64_t room_pages(struct shard *sh, uint64_t need, uint64_t *psize)
{
	MDB_envinfo ei;
	MDB_stat ms;
	uint64_t pages, unused;
	int64_t avail;

	*psize = 4096;
	if (mdb_env_info(sh->env, &ei) || mdb_env_stat(sh->env, &ms) ||
	    !ms.ms_psize)
		return INT64_MAX;
	*psize = ms.ms_psize;
	pages = ei.me_mapsize / ms.ms_psize;
	unused = pages > ei.me_last_pgno + 1 ? pages - ei.me_last_pgno - 1 : 0;
	avail = (int64_t)unused - (int64_t)reserve_pages(pages);
	if (avail < (int64_t)need)
		avail += (int64_t)free_pages(sh->env);
	return avail;
}

/* 1 when a write other than a delete, of about bytes, may be taken: the
 * checkpoints of everything not yet in LMDB (the memtables, this batch,
 * this write) must fit the map and leave its reserve, so that a checkpoint
 * does not fail for room.  A write that does not fit is refused alone. */
static int has_room(struct kvd_wtxn *t, size_t bytes)
{
	struct shard *sh = &t->st->sh[t->idx];
	uint64_t pend = atomic_load(&sh->pend_bytes) + t->bytes;

	if (t->room_pages == INT64_MIN)
		t->room_pages = room_pages(
		    sh, ckpt_pages(pend + (16u << 20), 4096), &t->psize);
	return (int64_t)ckpt_pages(pend + bytes, t->psize) <= t->room_pages;
}

/* At a batch's start: when what waits for a checkpoint would take more
 * than half of the map's room, checkpoint now, so that a nearly full map
 * sees its real room (a FLUSHALL or deletes in the memtable free pages
 * only once checkpointed). */
static int room_short(struct shard *sh)
{
	uint64_t pend = atomic_load(&sh->pend_bytes), psize, need;

	if (!pend)
		return 0;
	need = ckpt_pages(pend, 4096);
	return room_pages(sh, 2 * need, &psize) < 2 * (int64_t)need;
}

static int room_checkpoint(struct shard *sh, struct kvd_reader *rd)
{
	if (!room_short(sh))
		return 0;
	if (sh->active_ms)
		return kvd_ckpt_freeze(sh, rd) ?: kvd_ckpt_wait(sh, rd);
	return kvd_ckpt_wait(sh, rd);
}

/* ===================== The batch's records ===================== */

static void ov_clear_ht(struct kvd_wtxn *t)
{
	if (t->ht)
		memset(t->ht, 0, t->htcap * sizeof(*t->ht));
}

static const uint8_t *ov_key(const struct kvd_wtxn *t, const struct ov_ent *e)
{
	/* a side write's key was copied into data, which may have moved */
	return e->kbuf ? t->data.data + e->koff : e->key;
}

static const uint8_t *ov_val(const struct kvd_wtxn *t, const struct ov_ent *e)
{
	static const uint8_t empty[1];

	if (!e->vbuf)
		return e->val;
	/* An empty computed value may leave the batch's buffer unallocated:
	 * no offset from a NULL base (undefined, and UBSan says so). */
	return t->data.data ? t->data.data + e->voff : empty;
}

/* The slot of key (of keyspace ks) in the hash of the batch's keys (empty
 * or its own). */
static uint32_t *ov_slot(struct kvd_wtxn *t, unsigned ks, const void *key,
			 size_t klen)
{
	size_t mask = t->htcap - 1,
	       i = XXH3_64bits_withSeed(key, klen, ks) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t v = t->ht[i];
		const struct ov_ent *e;

		if (!v)
			return &t->ht[i];
		e = &t->ents[v - 1]; /* only once v names an entry */
		if (e->klen == klen && e->ks == ks &&
		    !memcmp(ov_key(t, e), key, klen))
			return &t->ht[i];
	}
}

/* key of keyspace ks as the memtable holds it, in t->ikey[slot]; its
 * length (0: too long to be stored, which the server never sends). */
static size_t wikey(struct kvd_wtxn *t, int slot, unsigned ks, const void *key,
		    size_t klen)
{
	return ikey_put(t->ikey[slot], ks, key, klen);
}

/* Grow the hash to twice the entries, re-adding those after the last
 * FLUSH of the batch (a FLUSH empties the hash: nothing before it shows). */
static int ov_grow(struct kvd_wtxn *t)
{
	size_t cap = t->htcap ? t->htcap : 64, from = 0;

	while (cap < 2 * (t->nents + 1))
		cap *= 2;
	if (cap == t->htcap)
		return 0;
	free(t->ht);
	if (!(t->ht = calloc(cap, sizeof(*t->ht)))) {
		t->htcap = 0;
		return ENOMEM;
	}
	t->htcap = cap;
	for (size_t i = 0; i < t->nents; i++)
		if (t->ents[i].type == KVJ_FLUSHALL)
			from = i + 1;
	for (size_t i = from; i < t->nents; i++)
		*ov_slot(t, t->ents[i].ks, ov_key(t, &t->ents[i]),
			 t->ents[i].klen) = (uint32_t)i + 1;
	return 0;
}

/* Add a record: key = a + b (a PUT, of value type vtype), a tombstone,
 * or a FLUSHALL.  k's bytes must stay valid until the batch is committed;
 * so must a's when ext (and b is empty), else a + b are copied. */
static int ov_add(struct kvd_wtxn *t, uint8_t type, const MDB_val *k,
		  uint64_t exp, const void *a, size_t an, const void *b,
		  size_t bn, int below, int ext, unsigned vtype)
{
	struct ov_ent *e;

	if (t->nents == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		void *p = realloc(t->ents, cap * sizeof(*t->ents));

		if (!p)
			return ENOMEM;
		t->ents = p;
		t->cap = cap;
	}
	if (2 * (t->nents + 1) > t->htcap && ov_grow(t))
		return ENOMEM;
	e = &t->ents[t->nents];
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->vtype = type == KVJ_PUT ? (uint8_t)vtype : 0;
	e->below = (uint8_t)below;
	e->exp = exp;
	e->ks = (uint8_t)t->ks;
	if (k) {
		e->key = k->mv_data;
		e->klen = (uint32_t)k->mv_size;
	}
	e->vlen = (uint32_t)(an + bn);
	if (ext && !bn) {
		e->val = a;
	} else {
		e->vbuf = 1;
		e->voff = (uint32_t)t->data.len;
		if ((an && kv_buf_append(&t->data, a, an)) ||
		    (bn && kv_buf_append(&t->data, b, bn)))
			return ENOMEM;
	}
	t->bytes += e->klen + e->vlen;
	t->nents++;
	if (type == KVJ_FLUSHALL) {
		ov_clear_ht(t);
		t->flushed = 1;
	} else {
		*ov_slot(t, t->ks, k->mv_data, k->mv_size) = (uint32_t)t->nents;
		/* WATCH: a store changes the key; a delete is seen at EXEC
		 * (watched live, now absent), which also covers expiry and
		 * FLUSHALL, and a reaped key that had expired before WATCH
		 * does not count, as in Redis. */
		if (type == KVJ_PUT && t->st->stored && !t->ks)
			t->st->stored(t->st->hook_arg, k->mv_data, k->mv_size);
	}
	return 0;
}

/* ===================== Looking keys up ===================== */

/* What the layers say of a key, as the batch sees it. */
struct wval {
	struct kv_slice data;
	uint64_t exp;
	unsigned type; /* the value's KVD_VT_* */
	int live;      /* 1 live, -1 present but expired, 0 absent */
	int below;     /* a value under the active memtable (COUNT's flag) */
};

static void wval_entry(struct wval *o, const struct kvm_entry *e, uint64_t now)
{
	if (e->kind != KVM_VALUE)
		return;
	o->data.p = e->val;
	o->data.n = e->vlen;
	o->exp = e->expire_at;
	o->type = e->type;
	o->live = e->expire_at == 0 || e->expire_at > now ? 1 : -1;
}

/* The frozen memtable, then LMDB. */
static int wlookup_lower(struct kvd_wtxn *t, MDB_val *k, uint64_t now,
			 struct wval *o)
{
	struct shard *sh = &t->st->sh[t->idx];
	struct kvm_entry e;
	MDB_txn *txn;
	MDB_val v, lk;
	const uint8_t *ik = t->ikey[0];
	size_t n = wikey(t, 0, t->ks, k->mv_data, k->mv_size);
	int rc;

	if (t->frz) {
		rc = kvm_get(t->frz, ik, n, &e);
		if (rc != KVM_ABSENT) {
			wval_entry(o, &e, now);
			o->below = o->live != 0;
			return 0;
		}
	}
	if (!(txn = kvd_shard_rtxn(t->rd, t->idx)))
		return EIO;
	lk = ikey_lmdb(ik, n);
	rc = mdb_get(txn, ikey_dbi(sh, ik), &lk, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	o->below = 1;
	o->live = val_live(&v, now, &o->exp, &o->data) ? 1 : -1;
	o->type = val_type(&v);
	return 0;
}

static int wlookup(struct kvd_wtxn *t, MDB_val *k, uint64_t now, struct wval *o)
{
	struct kvm_entry e;
	uint32_t v;

	memset(o, 0, sizeof(*o));
	v = t->htcap ? *ov_slot(t, t->ks, k->mv_data, k->mv_size) : 0;
	if (v) {
		const struct ov_ent *oe = &t->ents[v - 1];

		o->below = oe->below;
		if (oe->type == KVJ_PUT) {
			o->data.p = ov_val(t, oe);
			o->data.n = oe->vlen;
			o->exp = oe->exp;
			o->type = oe->vtype;
			o->live = oe->exp == 0 || oe->exp > now ? 1 : -1;
		}
		return 0;
	}
	if (t->flushed)
		return 0;
	if (kvm_get(t->act, t->ikey[0],
		    wikey(t, 0, t->ks, k->mv_data, k->mv_size),
		    &e) != KVM_ABSENT) {
		wval_entry(o, &e, now);
		return 0;
	}
	return wlookup_lower(t, k, now, o);
}

/* Store plain value a + b (b may be empty) as key's new state; copied. */
static int wstore(struct kvd_wtxn *t, MDB_val *k, uint64_t exp, const void *a,
		  size_t an, const void *b, size_t bn, const struct wval *o)
{
	return ov_add(t, KVJ_PUT, k, exp, a, an, b, bn, o->below, 0,
		      KVD_VT_PLAIN);
}

/* Store the request's own value v, of type vtype (not copied: it
 * outlives the batch). */
static int wstore_req(struct kvd_wtxn *t, MDB_val *k, uint64_t exp,
		      const void *v, size_t vn, const struct wval *o,
		      unsigned vtype)
{
	return ov_add(t, KVJ_PUT, k, exp, v, vn, NULL, 0, o->below, 1, vtype);
}

static int wdelete(struct kvd_wtxn *t, MDB_val *k, const struct wval *o)
{
	return ov_add(t, KVJ_DEL, k, 0, NULL, 0, NULL, 0, o->below, 0, 0);
}

/* Copy a value out before a store may move it. */
static int wkeep(struct kvd_wtxn *t, struct kv_slice *data)
{
	t->tmp.len = 0;
	if (kv_buf_append(&t->tmp, data->p, data->n))
		return ENOMEM;
	data->p = t->tmp.data;
	return 0;
}

struct item {
	MDB_val k;
	const uint8_t *v;
	uint32_t vn;
};

static const uint8_t *item_next(const uint8_t *p, struct item *it)
{
	uint16_t kn;
	uint32_t vn;

	memcpy(&kn, p, 2);
	memcpy(&vn, p + 2, 4);
	it->k.mv_size = kn;
	it->k.mv_data = (void *)(p + KVD_ITEM_HDR);
	it->v = p + KVD_ITEM_HDR + kn;
	it->vn = vn;
	return it->v + vn;
}

/* Hand a value back to the io thread (GETDEL, PUT with KVD_PUT_GETOLD). */
static int copy_out(struct kvd_wop *op, struct kv_slice old)
{
	free(op->val);
	op->val = malloc(old.n ? old.n : 1);
	if (!op->val)
		return ENOMEM;
	memcpy(op->val, old.p, old.n);
	op->vlen = (uint32_t)old.n;
	return 0;
}

/* A plain PUT's outcome does not depend on the key's old value: only
 * COUNT's flag does (is there a value under the active memtable?), and a
 * B-tree descent per write to learn it cost a fifth of the committer's time.
 * The batch and the active memtable (hash probes) still say it when they
 * know the key; otherwise the flag is left open (OV_BELOW_UNKNOWN) for
 * COUNT to ask, once, if it is ever asked (memtable.h, COUNT). */
static void wlookup_plain(struct kvd_wtxn *t, MDB_val *k, struct wval *o)
{
	struct kvm_entry e;
	uint32_t v;

	memset(o, 0, sizeof(*o));
	v = t->htcap ? *ov_slot(t, t->ks, k->mv_data, k->mv_size) : 0;
	if (v) {
		o->below = t->ents[v - 1].below;
		return;
	}
	if (t->flushed || kvm_get(t->act, t->ikey[0],
				  wikey(t, 0, t->ks, k->mv_data, k->mv_size),
				  &e) != KVM_ABSENT)
		return; /* not the key's first write here: no flag counts */
	o->below = OV_BELOW_UNKNOWN;
}

/* What the layers held under a key, as kvd_wop.seen says it. */
static uint8_t seen_of(const struct wval *o)
{
	return o->live > 0 ? KVD_SEEN_LIVE : o->live < 0 ? KVD_SEEN_EXPIRED : 0;
}

static int apply_put(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now)
{
	const uint8_t *p = op->items;
	unsigned plain =
	    !op->seen && !(op->flags & (KV_PUT_NX | KV_PUT_XX | KV_PUT_KEEPTTL |
					KVD_PUT_GETOLD));
	struct item it;

	for (uint32_t i = 0; i < op->nitems; i++) {
		uint64_t exp = op->expire_at;
		struct wval o;
		int rc;

		p = item_next(p, &it);
		if (plain) {
			wlookup_plain(t, &it.k, &o);
			if ((rc = wstore_req(t, &it.k, exp, it.v, it.vn, &o,
					     op->vtype)))
				return rc;
			continue;
		}
		if ((rc = wlookup(t, &it.k, now, &o)))
			return rc;
		if (op->seen)
			op->seen[i] = seen_of(&o);
		/* SET ... GET of a hash: WRONGTYPE, and nothing stored */
		if ((op->flags & KVD_PUT_GETOLD) && o.live > 0 &&
		    o.type != KVD_VT_PLAIN) {
			op->status = KV_WRONG_TYPE;
			continue;
		}
		if ((op->flags & KVD_PUT_GETOLD) && o.live > 0 &&
		    (rc = copy_out(op, o.data)))
			return rc;
		if ((op->flags & KV_PUT_NX) && o.live > 0) {
			op->status = KV_EXISTS;
			continue;
		}
		if ((op->flags & KV_PUT_XX) && o.live <= 0) {
			op->status = KV_NOT_FOUND;
			continue;
		}
		if ((op->flags & KV_PUT_KEEPTTL) && o.live > 0)
			exp = o.exp;
		if ((rc =
			 wstore_req(t, &it.k, exp, it.v, it.vn, &o, op->vtype)))
			return rc;
		if (op->seen)
			op->seen[i] |= KVD_SEEN_DONE;
	}
	return 0;
}

static int apply_del(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		     int getdel)
{
	const uint8_t *p = op->items;
	struct item it;

	for (uint32_t i = 0; i < op->nitems; i++) {
		struct wval o;
		int rc;

		p = item_next(p, &it);
		if ((rc = wlookup(t, &it.k, now, &o)))
			return rc;
		if (o.live > 0 && getdel && o.type != KVD_VT_PLAIN) {
			op->status = KV_WRONG_TYPE; /* GETDEL of a hash */
			return 0;
		}
		if (o.live > 0 && getdel && (rc = copy_out(op, o.data)))
			return rc;
		/* An expired value is deleted too: it still takes room. */
		if (o.live && (rc = wdelete(t, &it.k, &o)))
			return rc;
		op->result += o.live > 0;
		if (op->seen)
			op->seen[i] =
			    (uint8_t)(seen_of(&o) |
				      (o.live > 0 ? KVD_SEEN_DONE : 0));
	}
	if (op->result == 0 && getdel)
		op->status = KV_NOT_FOUND;
	return 0;
}

/* Redis's rule: an integer value is the canonical decimal of an int64. */
static int parse_i64(struct kv_slice d, int64_t *out)
{
	char buf[24], *end;
	long long v;

	/* A NUL would end the string early: "\0abc" is not 0. */
	if (d.n == 0 || d.n > 20 || memchr(d.p, 0, d.n))
		return -1;
	memcpy(buf, d.p, d.n);
	buf[d.n] = '\0';
	/* strtoll would skip any leading white space ("\t9" is no integer
	 * to Redis) and take a '+': only a digit or '-' may come first. */
	if (!((buf[0] >= '0' && buf[0] <= '9') || buf[0] == '-') ||
	    (buf[0] == '0' && d.n > 1) ||
	    (buf[0] == '-' && (d.n == 1 || buf[1] < '1' || buf[1] > '9')))
		return -1;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int apply_rmw(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		     uint64_t max_value)
{
	struct kv_slice old;
	struct item it;
	struct wval o;
	uint64_t exp;
	int rc;
	char num[24];

	item_next(op->items, &it);
	if ((rc = wlookup(t, &it.k, now, &o)))
		return rc;
	if (op->seen) /* DONE below: set by apply_rmw's caller */
		op->seen[0] = seen_of(&o);
	old = o.data;
	exp = o.exp;
	if (o.live <= 0) {
		old.n = 0;
		exp = 0;
	}
	if (o.live > 0 && o.type != KVD_VT_PLAIN && op->kind != KVD_W_EXPIRE) {
		op->status = KV_WRONG_TYPE; /* INCR or APPEND of a hash */
		return 0;
	}
	switch (op->kind) {
	case KVD_W_INCR: {
		int64_t v = 0;

		if (o.live > 0 && parse_i64(old, &v)) {
			op->status = KV_NOT_INTEGER;
			return 0;
		}
		if ((op->delta > 0 && v > INT64_MAX - op->delta) ||
		    (op->delta < 0 && v < INT64_MIN - op->delta)) {
			op->status = KV_NOT_INTEGER;
			op->result = 1; /* overflow, not a non-integer (RESP) */
			return 0;
		}
		op->result = v + op->delta;
		snprintf(num, sizeof(num), "%lld", (long long)op->result);
		return wstore(t, &it.k, exp, num, strlen(num), NULL, 0, &o);
	}
	case KVD_W_APPEND:
		if (old.n + it.vn > max_value) {
			op->status = KV_VALUE_TOO_LARGE;
			return 0;
		}
		op->result = (int64_t)(old.n + it.vn);
		if (old.n && (rc = wkeep(t, &old)))
			return rc;
		return wstore(t, &it.k, exp, old.p, old.n, it.v, it.vn, &o);
	default: /* KVD_W_EXPIRE */
		if (o.live <= 0) {
			op->status = KV_NOT_FOUND;
			return 0;
		}
		/* PERSIST of a key without expiry: nothing to change. */
		op->result = op->expire_at != 0 || exp != 0;
		if (!op->result)
			return 0;
		if (old.n && (rc = wkeep(t, &old)))
			return rc;
		/* the value keeps its type */
		return ov_add(t, KVJ_PUT, &it.k, op->expire_at, old.p, old.n,
			      NULL, 0, o.below, 0, o.type);
	}
}

/* Side writes: [u8 ks][u8 del][u16 klen][u32 vlen][key][value]... */
#define SIDE_HDR 8

int kvd_merge_side(struct kvd_merge *m, unsigned ks, int del, const void *k,
		   size_t kn, const void *v, size_t vn)
{
	uint8_t h[SIDE_HDR];
	uint16_t k16 = (uint16_t)kn;
	uint32_t v32 = del ? 0 : (uint32_t)vn;

	if (kn == 0 || kn > 511 || vn > UINT32_MAX)
		return EINVAL;
	h[0] = (uint8_t)ks;
	h[1] = (uint8_t)(del != 0);
	memcpy(h + 2, &k16, 2);
	memcpy(h + 4, &v32, 4);
	if (kv_buf_append(m->side, h, SIDE_HDR) ||
	    kv_buf_append(m->side, k, kn) ||
	    (v32 && kv_buf_append(m->side, v, v32)))
		return ENOMEM;
	return 0;
}

/* Apply a merge's side writes (after its own key's).  Their keys are
 * copied into the batch's data (the side buffer is the next merge's), so
 * their entries name them by offset (ov_key). */
static int apply_side(struct kvd_wtxn *t, uint64_t now)
{
	const uint8_t *p = t->mside.data, *end = p + t->mside.len;
	unsigned ks = t->ks;
	int rc = 0;

	while (!rc && end - p >= SIDE_HDR) {
		uint16_t kn;
		uint32_t vn;
		size_t koff = t->data.len;
		struct wval o;
		MDB_val k;

		memcpy(&kn, p + 2, 2);
		memcpy(&vn, p + 4, 4);
		t->ks = p[0];
		k.mv_size = kn;
		k.mv_data = (void *)(p + SIDE_HDR);
		if ((rc = wlookup(t, &k, now, &o)))
			break;
		/* nothing to delete; but a bulk merge under way may yet write
		 * that key from an image this write replaced (shard_bulk.c) */
		if (p[1] && o.live == 0 && !t->bulk) {
			p += SIDE_HDR + kn + vn;
			continue;
		}
		if (kv_buf_append(&t->data, k.mv_data, kn)) {
			rc = ENOMEM;
			break;
		}
		rc = p[1] ? wdelete(t, &k, &o)
			  : ov_add(t, KVJ_PUT, &k, 0, p + SIDE_HDR + kn, vn,
				   NULL, 0, o.below, 0, KVD_VT_PLAIN);
		if (!rc) {
			t->ents[t->nents - 1].kbuf = 1;
			t->ents[t->nents - 1].koff = (uint32_t)koff;
		}
		p += SIDE_HDR + kn + vn;
	}
	t->ks = ks;
	return rc;
}

/* The merge's write of its own key. */
static int merge_own(struct kvd_wtxn *t, struct kvd_wop *op,
		     const struct kvd_merge *m, struct item *it,
		     const struct wval *o)
{
	/* an expired value it left goes, as a DEL's would (its "expired"
	 * event is this write's, not the reaper's) */
	if (m->action == KVD_MERGE_KEEP)
		return o->live < 0 ? wdelete(t, &it->k, o) : 0;
	if (op->seen)
		op->seen[0] |=
		    KVD_SEEN_DONE |
		    (m->action == KVD_MERGE_DELETE ? KVD_SEEN_GONE : 0);
	if (m->action == KVD_MERGE_DELETE)
		return o->live ? wdelete(t, &it->k, o) : 0;
	return ov_add(t, KVJ_PUT, &it->k, m->live ? m->exp : 0, t->mimg.data,
		      t->mimg.len, NULL, 0, o->below, 0, m->new_type);
}

/* A merge operation (shard.h, KVD_W_MERGE): the registered function
 * computes the key's new value from the one the layers hold, here in the
 * batch, so that two writers changing one value never lose an update; the
 * journal gets its outcome, a value (with the old expiry) or a
 * tombstone. */
static int apply_merge(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now)
{
	const struct kvd_merge_op *mo =
	    op->flags < KVD_MERGE_MAX ? &t->st->merge[op->flags] : NULL;
	struct kvd_merge m = {0};
	struct item it;
	struct wval o;
	int rc;

	if (!mo || !mo->fn) {
		op->status = KV_UNKNOWN_OP;
		return 0;
	}
	item_next(op->items, &it);
	if ((rc = wlookup(t, &it.k, now, &o)))
		return rc;
	if (op->seen)
		op->seen[0] = seen_of(&o);
	t->mimg.len = 0;
	t->mreply.len = 0;
	t->mside.len = 0;
	m.key = (struct kv_slice){it.k.mv_data, it.k.mv_size};
	m.live = o.live > 0;
	if (m.live) {
		m.old = o.data;
		m.type = o.type;
		m.exp = o.exp;
	}
	m.operand = (struct kv_slice){it.v, it.vn};
	m.now = now;
	m.image = &t->mimg;
	m.reply = &t->mreply;
	m.side = &t->mside;
	if ((rc = mo->fn(mo->ctx, &m)) || t->mimg.err || t->mreply.err ||
	    t->mside.err)
		return ENOMEM;
	op->status = m.status;
	op->result = m.result;
	/* a delete (and its side deletes) goes on in a full map */
	if (m.status == KV_OK && m.action != KVD_MERGE_DELETE &&
	    (m.action == KVD_MERGE_STORE || t->mside.len) &&
	    !has_room(t, t->mimg.len + it.k.mv_size + t->mside.len)) {
		op->status = KV_MAP_FULL;
		return 0;
	}
	if (t->mreply.len &&
	    (rc = copy_out(op,
			   (struct kv_slice){t->mreply.data, t->mreply.len})))
		return rc;
	if (m.status != KV_OK)
		return 0;
	if ((rc = merge_own(t, op, &m, &it, &o)))
		return rc;
	return t->mside.len ? apply_side(t, now) : 0;
}

/* A replica: the primary's records, as they are, to be given the LSNs
 * they have there (the batch holds nothing else: a replica takes no other
 * write, and reaps nothing of its own). */
static int apply_repl(struct kvd_wtxn *t, struct kvd_wop *op)
{
	struct shard *sh = &t->st->sh[t->idx];
	const uint8_t *p = op->items, *end = op->items + op->items_len;
	int rc;

	if (t->nents || op->lsn != kvj_next_lsn(sh->j)) {
		log_error("%s: replication: records from LSN %llu, but the "
			  "journal is at %llu",
			  sh->path, (unsigned long long)op->lsn,
			  (unsigned long long)kvj_next_lsn(sh->j));
		op->status = KV_INTERNAL;
		return 0;
	}
	for (uint32_t i = 0; i < op->nitems; i++) {
		struct kvj_rec r;
		struct wval o;
		uint32_t len;
		MDB_val k;

		if (end - p < 5)
			return EINVAL;
		memcpy(&len, p + 1, 4);
		if ((size_t)(end - p - 5) < len ||
		    kvj_rec_decode(p[0], p + 5, len, &r))
			return EINVAL;
		p += 5 + len;
		if (r.type == KVJ_FLUSHALL) {
			rc = ov_add(t, KVJ_FLUSHALL, NULL, 0, NULL, 0, NULL, 0,
				    0, 0, 0);
		} else {
			k.mv_size = r.klen;
			k.mv_data = (void *)r.key;
			t->ks = r.ks;
			if ((rc = wlookup(t, &k, 0, &o)))
				return rc;
			rc = ov_add(t, r.type, &k, r.expiry_ms, r.val,
				    r.type == KVJ_PUT ? r.vlen : 0, NULL, 0,
				    o.below, 1, r.vtype);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int wfail(struct kvd_wtxn *t, int rc)
{
	const char *path = t->st->sh[t->idx].path;

	if (rc == ENOMEM) {
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: out of memory; batch refused", path);
		return KV_INTERNAL;
	}
	if (rc == EINVAL) {
		log_error("%s: replication: malformed records", path);
		return KV_INTERNAL;
	}
	kvd_log_ratelimited(&full_limit, KVD_LOG_ERROR,
			    "%s: reading the store failed: %s; batch refused",
			    path, rc == EIO ? "no snapshot" : mdb_strerror(rc));
	return KV_INTERNAL;
}

int kvd_shard_apply(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		    uint64_t max_value)
{
	struct shard *sh = &t->st->sh[t->idx];
	size_t n;
	int rc;

	op->status = KV_OK;
	op->result = 0;
	t->ks = op->ks;
	if (op->kind != KVD_W_DEL && op->kind != KVD_W_GETDEL &&
	    op->kind != KVD_W_FLUSH && op->kind != KVD_W_REPL &&
	    !has_room(t, op->items_len)) {
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: map full (raise map-size); writes "
				    "refused, deletes still served",
				    sh->path);
		op->status = KV_MAP_FULL;
		return 0;
	}
	switch (op->kind) {
	case KVD_W_PUT: rc = apply_put(t, op, now); break;
	case KVD_W_DEL:
	case KVD_W_GETDEL:
		rc = apply_del(t, op, now, op->kind == KVD_W_GETDEL);
		break;
	case KVD_W_FLUSH:
		rc =
		    ov_add(t, KVJ_FLUSHALL, NULL, 0, NULL, 0, NULL, 0, 0, 0, 0);
		break;
	case KVD_W_REPL: rc = apply_repl(t, op); break;
	case KVD_W_MERGE: rc = apply_merge(t, op, now); break;
	default:
		n = t->nents;
		rc = apply_rmw(t, op, now, max_value);
		if (!rc && op->seen && t->nents > n) /* it stored the key */
			op->seen[0] |= KVD_SEEN_DONE;
		break;
	}
	return rc ? wfail(t, rc) : 0;
}

size_t kvd_shard_batch_len(const struct kvd_wtxn *t)
{
	return t->nents;
}

void kvd_shard_batch_keys(const struct kvd_wtxn *t, size_t from,
			  void (*fn)(void *arg, struct kv_slice key), void *arg)
{
	for (size_t i = from; i < t->nents; i++)
		if (t->ents[i].type != KVJ_FLUSHALL && !t->ents[i].ks)
			fn(arg, (struct kv_slice){ov_key(t, &t->ents[i]),
						  t->ents[i].klen});
}

/* Expired values still in a memtable: found by a walk over it, so at
 * most this often. */
#define MEM_REAP_MS 1000

static int reap_mem(struct kvd_wtxn *t, uint64_t now, unsigned limit,
		    unsigned *n)
{
	struct kvm *m[2] = {t->act, t->frz};

	for (int s = 0; s < 2 && *n < limit; s++) {
		struct kvm_iter it;
		struct kvm_entry e;
		struct kvm_count c;

		if (!m[s])
			continue;
		kvm_count(m[s], &c);
		if (!c.expiring)
			continue;
		kvm_iter_init(&it, m[s]);
		for (int ok = kvm_iter_seek(&it, NULL, 0); ok && *n < limit;
		     ok = kvm_iter_next(&it)) {
			/* the active memtable's first write of a key from the
			 * frozen one: that key holds a value below */
			struct wval o = {.below = s == 1, .live = -1};
			struct kvm_entry a;
			MDB_val k;
			int rc;

			kvm_iter_entry(&it, &e);
			if (e.key[0]) /* keyspace 0's keys come first */
				break;
			if (e.kind != KVM_VALUE || !e.expire_at ||
			    e.expire_at > now)
				continue;
			if (*ov_slot(t, 0, e.key + 1, e.klen - 1) ||
			    (s == 1 &&
			     kvm_get(t->act, e.key, e.klen, &a) != KVM_ABSENT))
				continue;
			k.mv_size = e.klen - 1;
			k.mv_data = (void *)(e.key + 1);
			if ((rc = wdelete(t, &k, &o))) {
				kvm_iter_fini(&it);
				return rc;
			}
			(*n)++;
		}
		kvm_iter_fini(&it);
	}
	return 0;
}

/* Expired keys, found through LMDB's expiry index (exact since
 * checkpoints maintain it): each gets a journaled tombstone, so replay
 * needs no clock.  A key some memtable or this batch has a say on is left
 * alone (its own version decides; it reaches LMDB, and this index, with
 * its checkpoint).  Tombstoned keys stay in the index until their
 * checkpoint, so the walk is bounded too. */
int kvd_shard_reap(struct kvd_wtxn *t, uint64_t now, unsigned limit)
{
	struct shard *sh = &t->st->sh[t->idx];
	MDB_txn *txn = kvd_shard_rtxn(t->rd, t->idx);
	MDB_cursor *c;
	MDB_val k, v, kv;
	unsigned n = 0, seen = 0;
	size_t ikn;
	int rc;

	if (!txn || t->flushed)
		return 0;
	if (!t->htcap && ov_grow(t))
		return -KV_INTERNAL;
	t->ks = 0; /* only keyspace 0 expires */
	if (kvm_flush_lsn(t->act) || (t->frz && kvm_flush_lsn(t->frz)))
		goto mem; /* nothing below a FLUSHALL counts */
	if ((rc = mdb_cursor_open(txn, sh->exp, &c)))
		return -wfail(t, rc);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	     rc == 0 && n < limit && seen < 4 * limit;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT), seen++) {
		uint64_t at = k.mv_size == 8 ? be64_get(k.mv_data) : 0, exp;
		struct kvm_entry e;
		struct kv_slice data;
		struct wval o = {.below = 1, .live = -1};

		if (at > now)
			break;
		ikn = wikey(t, 0, 0, v.mv_data, v.mv_size);
		if (*ov_slot(t, 0, v.mv_data, v.mv_size) ||
		    kvm_get(t->act, t->ikey[0], ikn, &e) != KVM_ABSENT ||
		    (t->frz &&
		     kvm_get(t->frz, t->ikey[0], ikn, &e) != KVM_ABSENT))
			continue;
		if (mdb_get(txn, sh->kv, &v, &kv) == 0 &&
		    val_parse(&kv, &exp, &data) == 0 && exp == at) {
			if ((rc = wdelete(t, &v, &o)))
				break;
			n++;
		}
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return -wfail(t, rc);
mem:
	if (n < limit && now >= t->next_mreap) {
		t->next_mreap = now + MEM_REAP_MS;
		if ((rc = reap_mem(t, now, limit, &n)))
			return -wfail(t, rc);
	}
	return (int)n;
}

/* ===================== Batches ===================== */

/* Freeze the active memtable when it is full (waiting for the previous
 * checkpoint if need be: backpressure) or old (only if nothing is being
 * checkpointed: an old memtable can wait). */
static int maybe_freeze(struct shard *sh, struct kvd_reader *rd, uint64_t now)
{
	struct kvd_store *st = sh->st;
	struct kvm *a = atomic_load_explicit(&sh->active, memory_order_relaxed);

	if (!sh->active_ms)
		return 0;
	if (kvm_bytes(a) >= st->memtable_size)
		return kvd_ckpt_freeze(sh, rd);
	if (now - sh->active_ms >= st->ckpt_interval_ms &&
	    !atomic_load(&sh->ckpt_busy))
		return kvd_ckpt_freeze(sh, rd);
	return 0;
}

/* 1 when beginning a batch now would freeze the memtable or checkpoint
 * for room, either of which may wait for readers or for the checkpointer.
 * The conditions only ease while the writer role is held: the
 * checkpointer shrinks pend_bytes and frees pages, never the reverse. */
static int would_wait(struct shard *sh, uint64_t now)
{
	struct kvd_store *st = sh->st;
	struct kvm *a = atomic_load_explicit(&sh->active, memory_order_relaxed);

	/* The same conditions as maybe_freeze's: an old memtable waits while
	 * the previous checkpoint runs, and so need not the writers. */
	if (sh->active_ms && (kvm_bytes(a) >= st->memtable_size ||
			      (now - sh->active_ms >= st->ckpt_interval_ms &&
			       !atomic_load(&sh->ckpt_busy))))
		return 1;
	return room_short(sh);
}

/* begin()'s ways */
enum { BEGIN_WAIT, BEGIN_NOWAIT, BEGIN_DELETES };

/* A batch of deletes may skip a freeze or checkpoint that failed for room
 * (the map or the disk is full): they free room once checkpointed, and
 * refusing them would leave a full store no way to be emptied through
 * kvd.  The active memtable may then grow to twice memtable-size. */
static int deletes_fit(struct shard *sh)
{
	struct kvm *a = atomic_load_explicit(&sh->active, memory_order_relaxed);

	return kvm_bytes(a) < 2 * sh->st->memtable_size;
}

static int deletes_go_on(struct shard *sh, int rc)
{
	return (rc == KV_DISK_FULL || rc == KV_MAP_FULL) && deletes_fit(sh);
}

static int begin(struct kvd_store *st, unsigned i, struct kvd_wtxn **out,
		 int how)
{
	struct shard *sh = &st->sh[i];
	struct kvd_wtxn *t = &sh->wt;
	uint64_t now = kvd_now_ms();
	int rc;

	if (!t->rd && !(t->rd = kvd_reader_new(st)))
		return KV_INTERNAL;
	if ((rc = atomic_load(&sh->failed)))
		return rc;
	/* would_wait false means maybe_freeze and room_checkpoint have
	 * nothing to do at this now. */
	if (how == BEGIN_NOWAIT) {
		if (would_wait(sh, now))
			return -EAGAIN;
	} else if (how == BEGIN_DELETES && atomic_load(&sh->ckpt_err) &&
		   deletes_fit(sh)) {
		/* the last checkpoint failed for room: no wait for another
		 * try (writers' batches ask for those) */
	} else if (((rc = maybe_freeze(sh, t->rd, now)) ||
		    (rc = room_checkpoint(sh, t->rd))) &&
		   !(how == BEGIN_DELETES && deletes_go_on(sh, rc)))
		return rc;
	t->begun_ms = now;
	/* before the batch's LMDB snapshot: none under way then means that
	 * snapshot has what the last one wrote */
	t->bulk = atomic_load(&sh->bulk) != NULL;
	kvd_reader_enter(t->rd);
	shard_layers(sh, &t->act, &t->frz);
	t->nents = 0;
	t->data.len = 0;
	t->bytes = 0;
	t->flushed = 0;
	t->room_pages = INT64_MIN;
	ov_clear_ht(t);
	*out = t;
	return 0;
}

int kvd_shard_begin(struct kvd_store *st, unsigned i, struct kvd_wtxn **out)
{
	return begin(st, i, out, BEGIN_WAIT);
}

int kvd_shard_begin_deletes(struct kvd_store *st, unsigned i,
			    struct kvd_wtxn **out)
{
	return begin(st, i, out, BEGIN_DELETES);
}

int kvd_shard_begin_nowait(struct kvd_store *st, unsigned i,
			   struct kvd_wtxn **out)
{
	return begin(st, i, out, BEGIN_NOWAIT);
}

/* Keys ahead of the one being inserted whose hash slots are prefetched:
 * enough to cover a miss to memory with the inserts in between. */
#define PREFETCH_AHEAD 8

/* Entry i's hash slot on its way into the cache (a FLUSHALL has no key). */
static void prefetch_ent(struct kvd_wtxn *t, size_t i)
{
	const struct ov_ent *e;

	if (i >= t->nents || (e = &t->ents[i])->type == KVJ_FLUSHALL)
		return;
	kvm_prefetch(t->act, t->ikey[1],
		     wikey(t, 1, e->ks, ov_key(t, e), e->klen));
}

/* The batch's records into the active memtable, LSNs from first on. */
static int insert_all(struct kvd_wtxn *t, uint64_t first)
{
	for (size_t i = 0; i < PREFETCH_AHEAD; i++)
		prefetch_ent(t, i);
	for (size_t i = 0; i < t->nents; i++) {
		const struct ov_ent *e = &t->ents[i];
		const uint8_t *k = t->ikey[0];
		size_t kn = e->type == KVJ_FLUSHALL
				? 0
				: wikey(t, 0, e->ks, ov_key(t, e), e->klen);
		unsigned fl = e->below == OV_BELOW_UNKNOWN ? KVM_F_UNKNOWN
			      : e->below		   ? KVM_F_BELOW
							   : 0;
		int rc;

		fl |= ks_flags(e->ks);
		prefetch_ent(t, i + PREFETCH_AHEAD);
		if (e->type == KVJ_PUT)
			rc = kvm_put(t->act, k, kn, ov_val(t, e), e->vlen,
				     e->exp, first + i,
				     fl | KVM_F_TYPE(e->vtype));
		else if (e->type == KVJ_DEL)
			rc = kvm_del(t->act, k, kn, first + i, fl);
		else
			rc = kvm_flush(t->act, first + i);
		if (rc)
			return rc;
	}
	return 0;
}

static int build_recs(struct kvd_wtxn *t, uint64_t *bytes)
{
	struct kvj_rec *r = realloc(t->recs, t->nents * sizeof(*r));

	if (!r)
		return ENOMEM;
	t->recs = r;
	*bytes = 0;
	for (size_t i = 0; i < t->nents; i++) {
		const struct ov_ent *e = &t->ents[i];

		r[i] = (struct kvj_rec){.type = e->type,
					.vtype = e->vtype,
					.ks = e->ks,
					.key = ov_key(t, e),
					.klen = e->klen,
					.val = ov_val(t, e),
					.vlen = e->vlen,
					.expiry_ms = e->exp};
		*bytes += kvj_rec_size(&r[i]);
	}
	return 0;
}

/* A failed append: no room for a new segment, or a record too large,
 * fail the batch alone; anything else failed the journal. */
static int append_fail(struct shard *sh, int rc)
{
	switch (rc) {
	case -ENOSPC:
	case -EFBIG:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: journal: disk full; batch refused",
				    sh->path);
		return KV_DISK_FULL;
	case -E2BIG:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: journal: a record larger than a "
				    "segment (raise journal-segment-size); "
				    "batch refused",
				    sh->path);
		return KV_VALUE_TOO_LARGE;
	case -ENOMEM: return KV_INTERNAL;
	default: return shard_fail(sh, "write", rc);
	}
}

/* No record of the batch stores a value: tombstones and FLUSHALL only. */
static int only_deletes(const struct kvd_wtxn *t)
{
	for (size_t i = 0; i < t->nents; i++)
		if (t->ents[i].type == KVJ_PUT)
			return 0;
	return 1;
}

/* The batch's records appended to the journal (not flushed): *first gets
 * their first LSN, *bytes their size.  0 or a KV_* code. */
static int commit_write(struct kvd_wtxn *t, uint64_t *first, uint64_t *bytes)
{
	struct shard *sh = &t->st->sh[t->idx];
	int rc;

	if (build_recs(t, bytes))
		return KV_INTERNAL;
	/* A batch of deletes may take the journal's reserved spare: on a
	 * full disk, no new segment can be made for it, and deletes are how
	 * room is freed through kvd (docs/architecture.md, section 8). */
	rc = only_deletes(t)
		 ? kvj_append_recs_reserve(sh->j, t->recs, t->nents, first)
		 : kvj_append_recs(sh->j, t->recs, t->nents, first);
	if (rc)
		return append_fail(sh, rc);
	atomic_fetch_add(&sh->jbytes, *bytes);
	shard_publish_spares(sh); /* the batch may have taken or made one */
	return 0;
}

/* The batch, in the journal (and flushed if need be), into the active
 * memtable and visible.  0 or a KV_* code. */
static int commit_publish(struct kvd_wtxn *t, uint64_t first, uint64_t bytes)
{
	struct shard *sh = &t->st->sh[t->idx];
	int rc;

	if ((rc = insert_all(t, first))) {
		/* In the journal, not in memory: a restart replays it.  What
		 * was inserted stays unpublished, so readers never see part
		 * of the batch (a failed shard is never checkpointed). */
		log_error("%s: memtable: %s", sh->path, kvm_strerror(rc));
		return shard_fail(sh, "memtable insert", -ENOMEM);
	}
	/* The whole batch at once (docs/architecture.md, section 7), before
	 * any of its requests is answered. */
	kvm_publish(t->act);
	sh->act_bytes += bytes;
	atomic_fetch_add(&sh->pend_bytes, bytes);
	atomic_store(&sh->pub_lsn, first + t->nents - 1);
	sh->last_batch_ms = t->begun_ms;
	if (!sh->active_ms)
		sh->active_ms = kvd_now_ms();
	return 0;
}

/* The batch is over, committed or not: the writer's state for the next. */
static void commit_end(struct kvd_wtxn *t)
{
	t->nents = 0;
	kv_buf_trim(&t->data, 1 << 20);
	kv_buf_trim(&t->tmp, 1 << 20);
	kvd_reader_reset(t->rd);
}

int kvd_shard_commit(struct kvd_wtxn *t, int sync)
{
	struct shard *sh = &t->st->sh[t->idx];
	uint64_t first = 0, bytes = 0;
	int rc = 0;

	if (t->nents && !(rc = commit_write(t, &first, &bytes)) && sync) {
		if ((rc = kvj_sync(sh->j)))
			rc = shard_fail(sh, "flush", rc);
		else
			atomic_fetch_add(&sh->fsyncs, 1);
	}
	if (t->nents && !rc)
		rc = commit_publish(t, first, bytes);
	commit_end(t);
	return rc;
}

/* ---- A flush made by the caller (sync mode, an io thread's ring) ---- */

/* Test shims (tests/reliability/powerloss.c, under LD_PRELOAD) define these
 * to see, and to fail, the journal flushes an io thread makes through
 * io_uring or the system call, which no libc wrapper sees: begin before the flush is issued
 * (a tag, or a negative errno: do not issue it, it failed so), end with
 * its result (the result to act on).  Found once, at the first batch; NULL
 * in a server run without a shim. */
typedef int (*fi_begin_fn)(int fd);
typedef int (*fi_end_fn)(int fd, int tag, int res);
static fi_begin_fn fi_begin;
static fi_end_fn fi_end;
static pthread_once_t fi_once = PTHREAD_ONCE_INIT;

static void fi_find(void)
{
	fi_begin =
	    (fi_begin_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "kvd_fi_io_sync_begin");
	fi_end =
	    (fi_end_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "kvd_fi_io_sync_end");
}

int kvd_shard_commit_begin(struct kvd_wtxn *t, int *fd, int *fault)
{
	struct shard *sh = &t->st->sh[t->idx];
	int rc;

	*fd = -1;
	*fault = 0;
	t->pend_first = t->pend_bytes = 0;
	t->pend_fd = -1;
	if (!t->nents)
		return 0;
	if ((rc = commit_write(t, &t->pend_first, &t->pend_bytes)) ||
	    (rc = kvj_sync_fd(sh->j, fd))) {
		if (rc < 0)
			rc = shard_fail(sh, "flush", rc);
		commit_end(t);
		return rc;
	}
	pthread_once(&fi_once, fi_find);
	t->pend_fd = *fd;
	t->pend_fi = fi_begin && *fd >= 0 ? fi_begin(*fd) : 0;
	if (t->pend_fi < 0)
		*fault = t->pend_fi;
	return 0;
}

int kvd_shard_commit_done(struct kvd_wtxn *t, int res)
{
	struct shard *sh = &t->st->sh[t->idx];
	int rc = 0;

	if (!t->nents)
		goto out;
	if (t->pend_fd >= 0) {
		if (t->pend_fi < 0)
			res = t->pend_fi; /* the shim failed it unissued */
		else if (fi_end)
			res = fi_end(t->pend_fd, t->pend_fi, res);
		/* A failed flush fails the journal for good: never retried
		 * (the kernel may have dropped the pages it could not
		 * write, so a later flush that succeeds proves nothing). */
		if ((rc = kvj_sync_done(sh->j, res))) {
			rc = shard_fail(sh, "flush", rc);
			goto out;
		}
		atomic_fetch_add(&sh->fsyncs, 1);
	}
	rc = commit_publish(t, t->pend_first, t->pend_bytes);
out:
	commit_end(t);
	return rc;
}

void kvd_shard_abort(struct kvd_wtxn *t)
{
	t->nents = 0;
	if (t->rd)
		kvd_reader_reset(t->rd);
}

int kvd_store_sync(struct kvd_store *st, unsigned i)
{
	struct shard *sh = &st->sh[i];
	int rc;

	if (atomic_load(&sh->failed))
		return KV_SHARD_FAILED;
	if (kvj_synced_lsn(sh->j) + 1 >= kvj_next_lsn(sh->j))
		return 0; /* nothing new since the last flush */
	if ((rc = kvj_sync(sh->j)))
		return shard_fail(sh, "flush", rc);
	atomic_fetch_add(&sh->fsyncs, 1);
	return 0;
}

/* Recycle the journal segments a checkpoint made unneeded. */
static void release(struct shard *sh)
{
	uint64_t lsn = atomic_load(&sh->ckpt_lsn);
	uint64_t hold = atomic_load(&sh->hold_lsn);
	int rc;

	/* Replicas' needs first, within the backlog: past it they take a
	 * full copy instead. */
	if (hold && hold - 1 < lsn && sh->j &&
	    (uint64_t)kvj_segments(sh->j) * kvj_segment_size(sh->j) <=
		atomic_load(&sh->st->backlog))
		lsn = hold - 1;
	if (lsn <= sh->released || !sh->j)
		return;
	rc = kvj_release(sh->j, lsn);
	if (rc < 0)
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: journal: cannot recycle segments: %s",
				    sh->path, kvj_strerror(rc));
	else
		sh->released = lsn;
}

/* A shard that committed no write for this long gives its spare memtable
 * chunks back to the machine; a burst of writes after that maps new ones. */
#define POOL_IDLE_MS 1000

void kvd_shard_tick(struct kvd_store *st, unsigned i, uint64_t now)
{
	struct shard *sh = &st->sh[i];
	struct kvd_wtxn *t = &sh->wt;

	release(sh);
	kvd_shard_spare_tend(sh, now);
	if (sh->pool && now - sh->last_batch_ms >= POOL_IDLE_MS)
		kvm_pool_trim(sh->pool);
	if (!t->rd && !(t->rd = kvd_reader_new(st)))
		return;
	if (!atomic_load(&sh->failed) && sh->active_ms &&
	    now - sh->active_ms >= st->ckpt_interval_ms &&
	    !atomic_load(&sh->ckpt_busy))
		kvd_ckpt_freeze(sh, t->rd);
	kvd_reader_reset(t->rd);
}

int kvd_shard_checkpoint(struct kvd_store *st, unsigned i)
{
	struct shard *sh = &st->sh[i];
	struct kvd_wtxn *t = &sh->wt;
	int rc;

	if (!t->rd && !(t->rd = kvd_reader_new(st)))
		return KV_INTERNAL;
	if ((rc = kvd_ckpt_wait(sh, t->rd)))
		return rc;
	if (sh->active_ms && ((rc = kvd_ckpt_freeze(sh, t->rd)) ||
			      (rc = kvd_ckpt_wait(sh, t->rd))))
		return rc;
	release(sh);
	return 0;
}

/* ===================== A replica's full copy ===================== */

int kvd_shard_repl_reset(struct kvd_store *st, unsigned i, uint64_t cut)
{
	struct shard *sh = &st->sh[i];
	MDB_val mk = {8, "ckpt_lsn"}, mv = {8, &cut};
	MDB_txn *txn;
	int rc;

	/* Memtables empty (into LMDB, about to be dropped: simple, and a
	 * full copy is rare), then LMDB emptied at the cut's LSN, then the
	 * journal started over above it. */
	if ((rc = kvd_shard_checkpoint(st, i)))
		return rc;
	if ((rc = mdb_txn_begin(sh->env, NULL, 0, &txn)))
		goto fail;
	if ((rc = mdb_drop(txn, sh->kv, 0)) ||
	    (rc = mdb_drop(txn, sh->kx, 0)) ||
	    (rc = mdb_drop(txn, sh->exp, 0)) ||
	    (rc = mdb_put(txn, sh->meta, &mk, &mv, 0))) {
		mdb_txn_abort(txn);
		goto fail;
	}
	if ((rc = mdb_txn_commit(txn)))
		goto fail;
	if ((rc = kvj_reset(sh->j, cut + 1)))
		return shard_fail(sh, "reset", rc);
	atomic_store(&sh->ckpt_lsn, cut);
	atomic_store(&sh->pub_lsn, cut);
	sh->released = cut;
	return 0;
fail:
	log_error("%s: replication: cannot empty the shard: %s", sh->path,
		  mdb_strerror(rc));
	return KV_INTERNAL;
}

int kvd_shard_repl_load(struct kvd_store *st, unsigned i, const uint8_t *p,
			size_t n)
{
	struct shard *sh = &st->sh[i];
	const uint8_t *end = p + n;
	MDB_txn *txn;
	int rc;

	if ((rc = mdb_txn_begin(sh->env, NULL, 0, &txn)))
		goto fail;
	while (rc == 0 && p < end) {
		uint32_t kn, vn;
		MDB_val k, v;
		MDB_dbi dbi;
		struct kv_slice d;
		uint64_t exp;

		if (end - p < 8) {
			rc = EINVAL;
			break;
		}
		memcpy(&kn, p, 4);
		memcpy(&vn, p + 4, 4);
		/* KVD_CHUNK_KX: a key of keyspace != 0, with its byte, to "kx" */
		dbi = kn & KVD_CHUNK_KX ? sh->kx : sh->kv;
		kn &= ~KVD_CHUNK_KX;
		if ((uint64_t)(end - p - 8) < (uint64_t)kn + vn || !kn ||
		    (dbi == sh->kx && (kn < 2 || !p[8]))) {
			rc = EINVAL;
			break;
		}
		k.mv_size = kn;
		k.mv_data = (void *)(p + 8);
		v.mv_size = vn;
		v.mv_data = (void *)(p + 8 + kn);
		p += 8 + (size_t)kn + vn;
		if (val_parse(&v, &exp, &d)) {
			rc = EINVAL;
			break;
		}
		rc = mdb_put(txn, dbi, &k, &v, 0);
		if (rc == 0 && exp && dbi == sh->kv) {
			uint8_t b[8];
			MDB_val ek = {8, b};

			be64_put(b, exp);
			rc = mdb_put(txn, sh->exp, &ek, &k, MDB_NODUPDATA);
			if (rc == MDB_KEYEXIST)
				rc = 0;
		}
	}
	if (rc) {
		mdb_txn_abort(txn);
		goto fail;
	}
	if ((rc = mdb_txn_commit(txn)))
		goto fail;
	return 0;
fail:
	log_error("%s: replication: cannot load the primary's copy: %s",
		  sh->path,
		  rc == EINVAL ? "malformed chunk" : mdb_strerror(rc));
	return KV_INTERNAL;
}
