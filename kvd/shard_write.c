/* shard_write.c - a committer's write transaction: applying PUT, DEL,
 * INCR, APPEND, EXPIRE, GETDEL and FLUSH, reaping expired keys, committing,
 * and turning LMDB's failures into what writers are told. */
#include "shard_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "kv_proto.h"
#include "kv_status.h"
#include "log.h"

/* ===================== Writers ===================== */

/* Room left below which an EIO from a commit counts as a full disk: more
 * than the largest batch a committer builds (16 MiB) can write. */
#define FULL_MARGIN (32ull << 20)

/* LMDB reports a short write of data pages as EIO (mdb_page_flush: "short
 * write, filesystem full?"), and a write that runs out of space part way is
 * short; only a write with no room at all gives ENOSPC.  So an EIO from a
 * commit on a filesystem with (almost) no room left is a full disk, and
 * fails only its batch.  That is safe: an aborted commit's pages are never
 * referenced by a meta page, and in sync mode every earlier commit was
 * already on disk, so the only pages an fsync that failed here can have
 * lost are the aborted batch's own. */
static int fs_full(const char *path)
{
	return kvd_shard_fs_room(path) < FULL_MARGIN;
}

/* A full map or disk refuses every batch until room is made, and a
 * committer retries a failed batch in parts: one line a second, with a
 * count of the others, is enough. */
static struct kvd_log_limit full_limit = KVD_LOG_LIMIT_INIT(1000);

/* Map an LMDB failure inside a write transaction to what its writers see.
 * A full map or disk and a failed allocation fail only the transaction:
 * nothing of it reached the disk's meta page, and the next one may fit. */
static int wfail(struct kvd_wtxn *t, int rc, const char *what)
{
	const char *path = t->st->sh[t->idx].path;

	if (rc == EIO && !strcmp(what, "commit") && fs_full(path)) {
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: commit: short write on a full "
				    "filesystem; batch refused",
				    path);
		return KV_DISK_FULL;
	}
	switch (rc) {
	case MDB_MAP_FULL:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: %s: map full (raise map-size); batch "
				    "refused",
				    path, what);
		return KV_MAP_FULL;
	case ENOSPC:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: %s: disk full; batch refused", path,
				    what);
		return KV_DISK_FULL;
	case ENOMEM:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: %s: out of memory; batch refused",
				    path, what);
		return KV_INTERNAL;
	case MDB_TXN_FULL:
		kvd_log_ratelimited(&full_limit, KVD_LOG_WARN,
				    "%s: %s: transaction too large; batch "
				    "refused",
				    path, what);
		return KV_INTERNAL;
	default:
		log_error(
		    "%s: %s failed: %s; this shard accepts no more writes "
		    "until restart (a failed write or fsync is never retried)",
		    path, what, mdb_strerror(rc));
		return KV_SHARD_FAILED;
	}
}

int kvd_shard_begin(struct kvd_store *st, unsigned i, struct kvd_wtxn **out)
{
	struct kvd_wtxn *t = &st->sh[i].wt;
	int rc = mdb_txn_begin(st->sh[i].env, NULL, 0, &t->txn);

	if (rc)
		return wfail(t, rc, "begin");
	t->room = -1;
	*out = t;
	return 0;
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
 * a snapshot of the last commit, which is where this transaction started.
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

/* 1 when a write other than a delete may use the map, as of the start of
 * this transaction (a batch can add at most BATCH_MAX_BYTES: the reserve's
 * margin covers it in a large map; a small one fails that batch, retried
 * in parts by the committer). */
static int has_room(struct kvd_wtxn *t)
{
	MDB_env *env = t->st->sh[t->idx].env;
	MDB_envinfo ei;
	MDB_stat ms;
	uint64_t pages, unused, reserve;

	if (t->room >= 0)
		return t->room;
	t->room = 1;
	if (mdb_env_info(env, &ei) || mdb_env_stat(env, &ms) || !ms.ms_psize)
		return t->room;
	pages = ei.me_mapsize / ms.ms_psize;
	unused = pages > ei.me_last_pgno + 1 ? pages - ei.me_last_pgno - 1 : 0;
	reserve = reserve_pages(pages);
	if (unused < reserve && unused + free_pages(env) < reserve)
		t->room = 0;
	return t->room;
}

/* Look key up; *live says whether it holds an unexpired value.  *present
 * says whether any record exists (an expired one still needs deleting). */
static int wlookup(struct kvd_wtxn *t, MDB_val *k, uint64_t now,
		   struct kv_slice *data, uint64_t *exp, int *live)
{
	struct shard *sh = &t->st->sh[t->idx];
	MDB_val v;
	int rc = mdb_get(t->txn, sh->kv, k, &v);

	*live = 0;
	*exp = 0;
	data->p = NULL;
	data->n = 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	*live = val_live(&v, now, exp, data) ? 1 : -1; /* -1: present, dead */
	return 0;
}

/* Write header + a + b as key's value (b may be empty), and index expiry. */
static int wstore(struct kvd_wtxn *t, MDB_val *k, uint64_t exp, const void *a,
		  size_t an, const void *b, size_t bn)
{
	struct shard *sh = &t->st->sh[t->idx];
	size_t h = val_hdr_len(exp);
	MDB_val v = {h + an + bn, NULL};
	uint8_t at[8];
	int rc = mdb_put(t->txn, sh->kv, k, &v, MDB_RESERVE);

	if (rc)
		return rc;
	val_hdr_put(v.mv_data, exp);
	if (an)
		memcpy((uint8_t *)v.mv_data + h, a, an);
	if (bn)
		memcpy((uint8_t *)v.mv_data + h + an, b, bn);
	if (exp) {
		MDB_val ek = {8, at};

		be64_put(at, exp);
		rc = mdb_put(t->txn, sh->exp, &ek, k, MDB_NODUPDATA);
		if (rc == MDB_KEYEXIST)
			rc = 0;
	}
	return rc;
}

/* Copy a value out of the map before a put may move it. */
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

static int apply_put(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now)
{
	const uint8_t *p = op->items;
	struct item it;

	for (uint32_t i = 0; i < op->nitems; i++) {
		uint64_t exp = op->expire_at, oexp = 0;
		struct kv_slice old;
		int live = 0, rc;

		p = item_next(p, &it);
		if (op->flags &&
		    (rc = wlookup(t, &it.k, now, &old, &oexp, &live)))
			return rc;
		if ((op->flags & KVD_PUT_GETOLD) && live > 0 &&
		    (rc = copy_out(op, old)))
			return rc;
		if ((op->flags & KV_PUT_NX) && live > 0) {
			op->status = KV_EXISTS;
			continue;
		}
		if ((op->flags & KV_PUT_XX) && live <= 0) {
			op->status = KV_NOT_FOUND;
			continue;
		}
		if ((op->flags & KV_PUT_KEEPTTL) && live > 0)
			exp = oexp;
		if ((rc = wstore(t, &it.k, exp, it.v, it.vn, NULL, 0)))
			return rc;
	}
	return 0;
}

static int apply_del(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		     int getdel)
{
	struct shard *sh = &t->st->sh[t->idx];
	const uint8_t *p = op->items;
	struct item it;

	for (uint32_t i = 0; i < op->nitems; i++) {
		struct kv_slice old;
		uint64_t exp;
		int live, rc;

		p = item_next(p, &it);
		if ((rc = wlookup(t, &it.k, now, &old, &exp, &live)))
			return rc;
		if (live > 0 && getdel && (rc = copy_out(op, old)))
			return rc;
		if (live && (rc = mdb_del(t->txn, sh->kv, &it.k, NULL)))
			return rc;
		op->result += live > 0;
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

	if (d.n == 0 || d.n > 20)
		return -1;
	memcpy(buf, d.p, d.n);
	buf[d.n] = '\0';
	if (buf[0] == '+' || buf[0] == ' ' || (buf[0] == '0' && d.n > 1) ||
	    (buf[0] == '-' && (d.n == 1 || buf[1] == '0')))
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
	const uint8_t *p = op->items;
	struct kv_slice old;
	struct item it;
	uint64_t exp;
	int live, rc;
	char num[24];

	item_next(p, &it);
	if ((rc = wlookup(t, &it.k, now, &old, &exp, &live)))
		return rc;
	if (live <= 0) {
		old.n = 0;
		exp = 0;
	}
	switch (op->kind) {
	case KVD_W_INCR: {
		int64_t v = 0;

		if (live > 0 && parse_i64(old, &v)) {
			op->status = KV_NOT_INTEGER;
			return 0;
		}
		if ((op->delta > 0 && v > INT64_MAX - op->delta) ||
		    (op->delta < 0 && v < INT64_MIN - op->delta)) {
			op->status = KV_NOT_INTEGER;
			return 0;
		}
		op->result = v + op->delta;
		snprintf(num, sizeof(num), "%lld", (long long)op->result);
		return wstore(t, &it.k, exp, num, strlen(num), NULL, 0);
	}
	case KVD_W_APPEND:
		if (old.n + it.vn > max_value) {
			op->status = KV_VALUE_TOO_LARGE;
			return 0;
		}
		op->result = (int64_t)(old.n + it.vn);
		if (old.n && (rc = wkeep(t, &old)))
			return rc;
		return wstore(t, &it.k, exp, old.p, old.n, it.v, it.vn);
	default: /* KVD_W_EXPIRE */
		if (live <= 0) {
			op->status = KV_NOT_FOUND;
			return 0;
		}
		/* PERSIST of a key without expiry: nothing to change. */
		op->result = op->expire_at != 0 || exp != 0;
		if (!op->result)
			return 0;
		if (old.n && (rc = wkeep(t, &old)))
			return rc;
		return wstore(t, &it.k, op->expire_at, old.p, old.n, NULL, 0);
	}
}

int kvd_shard_apply(struct kvd_wtxn *t, struct kvd_wop *op, uint64_t now,
		    uint64_t max_value)
{
	struct shard *sh = &t->st->sh[t->idx];
	int rc;

	op->status = KV_OK;
	op->result = 0;
	if (op->kind != KVD_W_DEL && op->kind != KVD_W_GETDEL &&
	    op->kind != KVD_W_FLUSH && !has_room(t)) {
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
		rc = mdb_drop(t->txn, sh->kv, 0);
		if (!rc)
			rc = mdb_drop(t->txn, sh->exp, 0);
		break;
	default: rc = apply_rmw(t, op, now, max_value); break;
	}
	return rc ? wfail(t, rc, "write") : 0;
}

int kvd_shard_reap(struct kvd_wtxn *t, uint64_t now, unsigned limit)
{
	struct shard *sh = &t->st->sh[t->idx];
	MDB_cursor *c;
	MDB_val k, v, kv;
	unsigned n = 0;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, sh->exp, &c)))
		return -wfail(t, rc, "reap");
	while (n < limit && (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST)) == 0) {
		uint64_t at = k.mv_size == 8 ? be64_get(k.mv_data) : 0, exp;
		struct kv_slice data;

		if (at > now)
			break;
		/* The index is a hint: delete only if the value still expires
		 * at this instant (it may have been rewritten since). */
		rc = mdb_get(t->txn, sh->kv, &v, &kv);
		if (rc == 0 && val_parse(&kv, &exp, &data) == 0 && exp == at) {
			if ((rc = mdb_del(t->txn, sh->kv, &v, NULL)))
				break;
			n++;
		} else if (rc && rc != MDB_NOTFOUND) {
			break;
		}
		if ((rc = mdb_cursor_del(c, 0)))
			break;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return -wfail(t, rc, "reap");
	return (int)n;
}

int kvd_shard_commit(struct kvd_wtxn *t)
{
	int rc = mdb_txn_commit(t->txn);

	t->txn = NULL;
	kv_buf_trim(&t->tmp, 1 << 20);
	return rc ? wfail(t, rc, "commit") : 0;
}

void kvd_shard_abort(struct kvd_wtxn *t)
{
	if (t->txn)
		mdb_txn_abort(t->txn);
	t->txn = NULL;
}
