/* shard.c - LMDB environments, read snapshots and write transactions.
 *
 * The only file that calls LMDB (see shard.h for the layout on disk).
 */
#include "shard.h"

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "datadir.h"
#include "kv_buf.h"
#include "kv_proto.h"
#include "kv_status.h"
#include "log.h"

#define VF_EXPIRE 1u

struct kvd_wtxn {
	struct kvd_store *st;
	unsigned idx;
	MDB_txn *txn;
	struct kv_buf tmp; /* old values copied out before they are rewritten */
};

struct shard {
	MDB_env *env;
	MDB_dbi kv, exp;
	char path[600];
	struct kvd_wtxn wt; /* its committer's transaction, reused per batch */
};

struct kvd_store {
	struct kvd_datadir dd;
	unsigned n;
	struct shard *sh;
};

struct kvd_reader {
	struct kvd_store *st;
	MDB_txn **txn;
	MDB_cursor **cur;
	uint8_t *active;
	unsigned nactive;
	struct scan_head *heads;
};

/* ===================== Stored values ===================== */

static size_t val_hdr_len(uint64_t exp)
{
	return exp ? 9 : 1;
}

static void val_hdr_put(uint8_t *p, uint64_t exp)
{
	p[0] = exp ? VF_EXPIRE : 0;
	for (unsigned i = 0; exp && i < 8; i++)
		p[1 + i] = (uint8_t)(exp >> (8 * i));
}

/* Split a stored value; -1 if it is too short to be one of ours. */
static int val_parse(const MDB_val *v, uint64_t *exp, struct kv_slice *data)
{
	const uint8_t *p = v->mv_data;
	size_t h;

	if (v->mv_size < 1)
		return -1;
	*exp = 0;
	if (p[0] & VF_EXPIRE) {
		if (v->mv_size < 9)
			return -1;
		for (unsigned i = 0; i < 8; i++)
			*exp |= (uint64_t)p[1 + i] << (8 * i);
	}
	h = (p[0] & VF_EXPIRE) ? 9 : 1;
	data->p = p + h;
	data->n = v->mv_size - h;
	return 0;
}

/* 1 when v holds a value that has not expired at now. */
static int val_live(const MDB_val *v, uint64_t now, uint64_t *exp,
		    struct kv_slice *data)
{
	if (val_parse(v, exp, data))
		return 0;
	return *exp == 0 || *exp > now;
}

static void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* LMDB's default order: memcmp over the common length, then shorter first. */
static int key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? memcmp(a, b, n) : 0; /* an empty slice may be NULL */

	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

/* ===================== Store ===================== */

static int shard_open(struct shard *sh, const struct kvd_store_opts *o,
		      char *err, size_t errlen)
{
	unsigned flags = MDB_NOTLS | MDB_NORDAHEAD |
			 (o->nosync ? MDB_NOSYNC : MDB_NOMETASYNC);
	MDB_txn *txn = NULL;
	int rc, dead = 0;

	if ((rc = mdb_env_create(&sh->env)) ||
	    (rc = mdb_env_set_maxdbs(sh->env, 2)) ||
	    (rc = mdb_env_set_mapsize(sh->env, o->map_size)) ||
	    (rc = mdb_env_set_maxreaders(sh->env, o->max_readers)))
		goto fail;
	if ((rc = mdb_env_open(sh->env, sh->path, flags, 0640)))
		goto fail;
	/* A kill -9 leaves reader slots behind; clear them before serving. */
	if ((rc = mdb_reader_check(sh->env, &dead)))
		goto fail;
	if (dead)
		log_warn("%s: cleared %d stale reader slot(s)", sh->path, dead);
	if ((rc = mdb_txn_begin(sh->env, NULL, 0, &txn)) ||
	    (rc = mdb_dbi_open(txn, "kv", MDB_CREATE, &sh->kv)) ||
	    (rc = mdb_dbi_open(txn, "exp", MDB_CREATE | MDB_DUPSORT, &sh->exp)))
		goto fail;
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc)
		goto fail;
	return 0;
fail:
	if (txn)
		mdb_txn_abort(txn);
	snprintf(err, errlen, "%s: cannot open LMDB environment: %s", sh->path,
		 mdb_strerror(rc));
	return -1;
}

static void shard_log_open(struct shard *sh, uint64_t map_size)
{
	MDB_txn *txn;
	MDB_stat ms;
	MDB_envinfo ei;

	if (mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &txn))
		return;
	if (!mdb_stat(txn, sh->kv, &ms) && !mdb_env_info(sh->env, &ei))
		log_info("%s: %zu keys, %.1f MiB used, map-size %.1f GiB",
			 sh->path, ms.ms_entries,
			 (double)(ei.me_last_pgno + 1) * ms.ms_psize /
			     (1 << 20),
			 (double)map_size / (1 << 30));
	mdb_txn_abort(txn);
}

int kvd_store_open(struct kvd_store **out, const struct kvd_store_opts *o,
		   char *err, size_t errlen)
{
	struct kvd_store *st = calloc(1, sizeof(*st));

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (kvd_datadir_open(&st->dd, o->dir, o->want_shards, err, errlen)) {
		free(st);
		return -1;
	}
	st->sh = calloc(st->dd.nshards, sizeof(*st->sh));
	if (!st->sh) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (; st->n < st->dd.nshards; st->n++) {
		struct shard *sh = &st->sh[st->n];

		kvd_datadir_shard_path(sh->path, sizeof(sh->path), o->dir,
				       st->n);
		sh->wt.st = st;
		sh->wt.idx = st->n;
		if (shard_open(sh, o, err, errlen)) {
			if (sh->env)
				mdb_env_close(sh->env);
			goto fail;
		}
		shard_log_open(sh, o->map_size);
	}
	*out = st;
	return 0;
fail:
	kvd_store_close(st);
	return -1;
}

void kvd_store_close(struct kvd_store *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->n; i++) {
		kv_buf_free(&st->sh[i].wt.tmp);
		mdb_env_close(st->sh[i].env);
	}
	free(st->sh);
	kvd_datadir_close(&st->dd);
	free(st);
}

unsigned kvd_store_nshards(const struct kvd_store *st)
{
	return st->n;
}

int kvd_store_sync(struct kvd_store *st, unsigned i)
{
	return mdb_env_sync(st->sh[i].env, 1);
}

/* Bytes free on the filesystem holding path (root may use the reserve). */
static uint64_t fs_room(const char *path)
{
	struct statvfs sv;

	if (statvfs(path, &sv))
		return UINT64_MAX;
	return (uint64_t)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
	       sv.f_frsize;
}

/* Zero-fill ahead of LMDB's last page (see shard.h): a commit that writes
 * into blocks the file already has syncs only its data, while one that
 * grows the file must also commit the new size through the filesystem's
 * journal, which costs about as much again. */
int kvd_store_prealloc(struct kvd_store *st, unsigned i, uint64_t ahead)
{
	static const uint8_t zero[1 << 16];
	struct shard *sh = &st->sh[i];
	MDB_envinfo ei;
	MDB_stat ms;
	struct stat fst;
	uint64_t used, end, target;
	int fd;

	if (mdb_env_info(sh->env, &ei) || mdb_env_stat(sh->env, &ms) ||
	    mdb_env_get_fd(sh->env, &fd) || fstat(fd, &fst))
		return -1;
	used = (uint64_t)(ei.me_last_pgno + 1) * ms.ms_psize;
	end = (uint64_t)fst.st_size;
	if (end >= used + ahead / 2)
		return 0;
	/* On a nearly full disk the room is for data: zeroes ahead of this
	 * shard would take what another shard's next commit needs, and keep
	 * it failing after space was freed. */
	if (fs_room(sh->path) < 4 * ahead)
		return -1;
	target = used + ahead;
	if (target > ei.me_mapsize)
		target = ei.me_mapsize;
	if (end < used)
		end = used;
	for (; end < target; end += sizeof(zero)) {
		size_t n = target - end < sizeof(zero) ? (size_t)(target - end)
						       : sizeof(zero);

		if (pwrite(fd, zero, n, (off_t)end) != (ssize_t)n)
			return -1; /* out of space: LMDB will say so itself */
	}
	/* No fsync of our own: the next commit's makes the zeroes and the new
	 * size durable (that commit pays the journal once).  Ours could take
	 * the write-back error of the last meta page, written unsynced
	 * (MDB_NOMETASYNC) through this very descriptor, and leave LMDB's
	 * next fdatasync nothing to report: that batch would be answered OK
	 * with its meta page lost.  And a failed fsync is never retried. */
	return 0;
}

int kvd_store_reader_check(struct kvd_store *st, unsigned i)
{
	int dead = 0;

	if (mdb_reader_check(st->sh[i].env, &dead))
		return 0;
	return dead;
}

/* ===================== Readers ===================== */

struct scan_head {
	MDB_val k, v;
	int valid;
};

struct kvd_reader *kvd_reader_new(struct kvd_store *st)
{
	struct kvd_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->st = st;
	r->txn = calloc(st->n, sizeof(*r->txn));
	r->cur = calloc(st->n, sizeof(*r->cur));
	r->active = calloc(st->n, 1);
	r->heads = calloc(st->n, sizeof(*r->heads));
	if (!r->txn || !r->cur || !r->active || !r->heads) {
		kvd_reader_free(r);
		return NULL;
	}
	return r;
}

void kvd_reader_free(struct kvd_reader *r)
{
	if (!r)
		return;
	for (unsigned i = 0; r->txn && i < r->st->n; i++) {
		if (r->cur && r->cur[i])
			mdb_cursor_close(r->cur[i]);
		if (r->txn[i])
			mdb_txn_abort(r->txn[i]);
	}
	free(r->txn);
	free(r->cur);
	free(r->active);
	free(r->heads);
	free(r);
}

void kvd_reader_reset(struct kvd_reader *r)
{
	if (!r->nactive)
		return;
	for (unsigned i = 0; i < r->st->n; i++) {
		if (r->active[i]) {
			mdb_txn_reset(r->txn[i]);
			r->active[i] = 0;
		}
	}
	r->nactive = 0;
}

/* This turn's snapshot of shard i, opened on first use. */
static MDB_txn *rtxn(struct kvd_reader *r, unsigned i)
{
	int rc;

	if (r->active[i])
		return r->txn[i];
	if (r->txn[i])
		rc = mdb_txn_renew(r->txn[i]);
	else
		rc = mdb_txn_begin(r->st->sh[i].env, NULL, MDB_RDONLY,
				   &r->txn[i]);
	if (rc) {
		log_error("%s: cannot open read transaction: %s",
			  r->st->sh[i].path, mdb_strerror(rc));
		return NULL;
	}
	r->active[i] = 1;
	r->nactive++;
	return r->txn[i];
}

static MDB_cursor *rcursor(struct kvd_reader *r, unsigned i)
{
	MDB_txn *txn = rtxn(r, i);
	int rc;

	if (!txn)
		return NULL;
	if (r->cur[i])
		rc = mdb_cursor_renew(txn, r->cur[i]);
	else
		rc = mdb_cursor_open(txn, r->st->sh[i].kv, &r->cur[i]);
	if (rc) {
		log_error("%s: cannot open cursor: %s", r->st->sh[i].path,
			  mdb_strerror(rc));
		return NULL;
	}
	return r->cur[i];
}

static int rget(struct kvd_reader *r, unsigned shard, const void *key,
		size_t klen, uint64_t now, uint64_t *exp, struct kv_slice *val)
{
	MDB_txn *txn = rtxn(r, shard);
	MDB_val k = {klen, (void *)key}, v;
	int rc;

	if (!txn)
		return KV_INTERNAL;
	rc = mdb_get(txn, r->st->sh[shard].kv, &k, &v);
	if (rc == MDB_NOTFOUND)
		return KV_NOT_FOUND;
	if (rc) {
		log_error("%s: read failed: %s", r->st->sh[shard].path,
			  mdb_strerror(rc));
		return KV_INTERNAL;
	}
	return val_live(&v, now, exp, val) ? KV_OK : KV_NOT_FOUND;
}

int kvd_reader_get(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, struct kv_slice *val)
{
	uint64_t exp;

	return rget(r, shard, key, klen, now, &exp, val);
}

int kvd_reader_ttl(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, int64_t *ttl_ms)
{
	struct kv_slice val;
	uint64_t exp;
	int rc = rget(r, shard, key, klen, now, &exp, &val);

	if (rc == KV_OK)
		*ttl_ms = exp ? (int64_t)(exp - now) : -1;
	return rc;
}

int kvd_reader_stat(struct kvd_reader *r, unsigned i, struct kvd_shard_stat *s)
{
	struct shard *sh = &r->st->sh[i];
	MDB_txn *txn = rtxn(r, i);
	MDB_stat ms, es;
	MDB_envinfo ei;
	struct stat fst;
	char path[640];

	memset(s, 0, sizeof(*s));
	if (!txn || mdb_stat(txn, sh->kv, &ms) || mdb_stat(txn, sh->exp, &es) ||
	    mdb_env_info(sh->env, &ei))
		return KV_INTERNAL;
	s->entries = ms.ms_entries;
	s->expiring = es.ms_entries;
	s->used_bytes = (uint64_t)(ei.me_last_pgno + 1) * ms.ms_psize;
	s->map_size = ei.me_mapsize;
	snprintf(path, sizeof(path), "%s/data.mdb", sh->path);
	if (stat(path, &fst) == 0)
		s->file_bytes = (uint64_t)fst.st_size;
	return KV_OK;
}

/* ===================== Scan and count ===================== */

static int head_valid(struct scan_head *h, const struct kvd_scan *sc)
{
	if (!h->valid)
		return 0;
	if (sc->prefix.n && (h->k.mv_size < sc->prefix.n ||
			     memcmp(h->k.mv_data, sc->prefix.p, sc->prefix.n)))
		return h->valid = 0;
	if (sc->end.n &&
	    key_cmp(h->k.mv_data, h->k.mv_size, sc->end.p, sc->end.n) >= 0)
		return h->valid = 0;
	return 1;
}

static int head_step(struct kvd_reader *r, unsigned i, MDB_cursor_op op,
		     const struct kvd_scan *sc)
{
	struct scan_head *h = &r->heads[i];
	int rc = mdb_cursor_get(r->cur[i], &h->k, &h->v, op);

	if (rc == MDB_NOTFOUND) {
		h->valid = 0;
		return 0;
	}
	if (rc) {
		log_error("%s: cursor failed: %s", r->st->sh[i].path,
			  mdb_strerror(rc));
		return -1;
	}
	h->valid = 1;
	head_valid(h, sc);
	return 0;
}

/* Position every shard's cursor at the first key >= max(prefix, start). */
static int scan_seek(struct kvd_reader *r, const struct kvd_scan *sc)
{
	struct kv_slice from = sc->prefix;

	if (sc->start.n &&
	    key_cmp(sc->start.p, sc->start.n, from.p, from.n) > 0)
		from = sc->start;
	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		if (!rcursor(r, i))
			return -1;
		h->k.mv_data = (void *)from.p;
		h->k.mv_size = from.n;
		if (head_step(r, i, from.n ? MDB_SET_RANGE : MDB_FIRST, sc))
			return -1;
	}
	return 0;
}

static int scan_min(struct kvd_reader *r)
{
	int best = -1;

	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		if (h->valid &&
		    (best < 0 || key_cmp(h->k.mv_data, h->k.mv_size,
					 r->heads[best].k.mv_data,
					 r->heads[best].k.mv_size) < 0))
			best = (int)i;
	}
	return best;
}

int kvd_reader_scan(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next)
{
	unsigned emitted = 0;
	size_t bytes = 0;
	int i;

	next->p = NULL;
	next->n = 0;
	if (scan_seek(r, sc))
		return KV_INTERNAL;
	while ((i = scan_min(r)) >= 0) {
		struct scan_head *h = &r->heads[i];
		struct kv_slice key = {h->k.mv_data, h->k.mv_size}, val;
		uint64_t exp;

		if (emitted >= sc->limit || bytes >= sc->max_bytes) {
			*next = key;
			break;
		}
		if (val_live(&h->v, now, &exp, &val)) {
			if (sc->keys_only)
				val.n = 0;
			if (fn(arg, key, val))
				return KV_INTERNAL;
			emitted++;
			bytes += key.n + val.n + 10;
		}
		if (head_step(r, (unsigned)i, MDB_NEXT, sc))
			return KV_INTERNAL;
	}
	return KV_OK;
}

/* Keys in shard i that have expired but are not yet reaped. */
static int count_expired(struct kvd_reader *r, unsigned i, uint64_t now,
			 uint64_t *n)
{
	struct shard *sh = &r->st->sh[i];
	MDB_txn *txn = rtxn(r, i);
	MDB_cursor *c;
	MDB_val k, v, kv;
	int rc;

	*n = 0;
	if (!txn || mdb_cursor_open(txn, sh->exp, &c))
		return -1;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint64_t at = k.mv_size == 8 ? be64_get(k.mv_data) : 0, exp;
		struct kv_slice data;

		if (at > now)
			break;
		if (mdb_get(txn, sh->kv, &v, &kv) == 0 &&
		    val_parse(&kv, &exp, &data) == 0 && exp == at)
			(*n)++;
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}

static int count_prefix(struct kvd_reader *r, struct kv_slice prefix,
			uint64_t now, uint64_t *count)
{
	struct kvd_scan sc = {.prefix = prefix};

	if (scan_seek(r, &sc))
		return KV_INTERNAL;
	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		while (h->valid) {
			struct kv_slice val;
			uint64_t exp;

			*count += val_live(&h->v, now, &exp, &val);
			if (head_step(r, i, MDB_NEXT, &sc))
				return KV_INTERNAL;
		}
	}
	return KV_OK;
}

int kvd_reader_count(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count)
{
	*count = 0;
	if (prefix.n)
		return count_prefix(r, prefix, now, count);
	for (unsigned i = 0; i < r->st->n; i++) {
		MDB_txn *txn = rtxn(r, i);
		MDB_stat ms;
		uint64_t expired;

		if (!txn || mdb_stat(txn, r->st->sh[i].kv, &ms) ||
		    count_expired(r, i, now, &expired))
			return KV_INTERNAL;
		*count += ms.ms_entries - expired;
	}
	return KV_OK;
}

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
	return fs_room(path) < FULL_MARGIN;
}

/* Map an LMDB failure inside a write transaction to what its writers see. */
static int wfail(struct kvd_wtxn *t, int rc, const char *what)
{
	const char *path = t->st->sh[t->idx].path;

	if (rc == EIO && !strcmp(what, "commit") && fs_full(path)) {
		log_warn("%s: commit: short write on a full filesystem; batch "
			 "refused",
			 path);
		return KV_DISK_FULL;
	}
	switch (rc) {
	case MDB_MAP_FULL:
		log_warn("%s: %s: map full (raise map-size); batch refused",
			 path, what);
		return KV_MAP_FULL;
	case ENOSPC:
		log_warn("%s: %s: disk full; batch refused", path, what);
		return KV_DISK_FULL;
	case MDB_TXN_FULL:
		log_warn("%s: %s: transaction too large; batch refused", path,
			 what);
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
	*out = t;
	return 0;
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

/* ===================== Backups ===================== */

struct kvd_snapshot {
	struct kvd_store *st;
	MDB_txn *txn[KVD_MAX_SHARDS];
};

int kvd_snapshot_begin(struct kvd_store *st, struct kvd_snapshot **out)
{
	struct kvd_snapshot *sn = calloc(1, sizeof(*sn));

	if (!sn)
		return KV_INTERNAL;
	sn->st = st;
	for (unsigned i = 0; i < st->n; i++) {
		int rc =
		    mdb_txn_begin(st->sh[i].env, NULL, MDB_RDONLY, &sn->txn[i]);

		if (rc) {
			log_error("%s: backup snapshot: %s", st->sh[i].path,
				  mdb_strerror(rc));
			kvd_snapshot_end(sn);
			return KV_INTERNAL;
		}
	}
	*out = sn;
	return 0;
}

void kvd_snapshot_end(struct kvd_snapshot *sn)
{
	if (!sn)
		return;
	for (unsigned i = 0; i < sn->st->n; i++)
		if (sn->txn[i])
			mdb_txn_abort(sn->txn[i]);
	free(sn);
}

/* Copy one database in key order; MDB_APPEND builds full, compact pages
 * without a search per key.  Commits every 64 MiB to bound dirty pages. */
static int copy_dbi(MDB_txn *src, MDB_dbi sdbi, MDB_env *env, MDB_txn **dtxn,
		    MDB_dbi ddbi, unsigned flags, uint64_t *keys,
		    uint64_t *bytes)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t since = 0;
	int rc = mdb_cursor_open(src, sdbi, &c);

	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if ((rc = mdb_put(*dtxn, ddbi, &k, &v, flags)))
			break;
		*keys += 1;
		*bytes += k.mv_size + v.mv_size;
		since += k.mv_size + v.mv_size;
		if (since >= (64u << 20)) {
			since = 0;
			if ((rc = mdb_txn_commit(*dtxn)) ||
			    (rc = mdb_txn_begin(env, NULL, 0, dtxn))) {
				*dtxn = NULL;
				break;
			}
		}
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int kvd_snapshot_copy(struct kvd_snapshot *sn, unsigned i, const char *dir,
		      uint64_t *keys, uint64_t *bytes, char *err, size_t errlen)
{
	struct shard *sh = &sn->st->sh[i];
	MDB_envinfo ei;
	MDB_env *env = NULL;
	MDB_txn *t = NULL;
	MDB_dbi kv, exp;
	uint64_t ignored = 0, ignored_bytes = 0;
	int rc;

	mdb_env_info(sh->env, &ei);
	if (mkdir(dir, 0750) && errno != EEXIST) {
		rc = errno;
		goto fail;
	}
	/* NOSYNC while copying, one forced sync at the end. */
	if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 2)) ||
	    (rc = mdb_env_set_mapsize(env, ei.me_mapsize)) ||
	    (rc = mdb_env_open(env, dir, MDB_NOSYNC | MDB_NOTLS, 0640)) ||
	    (rc = mdb_txn_begin(env, NULL, 0, &t)) ||
	    (rc = mdb_dbi_open(t, "kv", MDB_CREATE, &kv)) ||
	    (rc = mdb_dbi_open(t, "exp", MDB_CREATE | MDB_DUPSORT, &exp)))
		goto fail;
	if ((rc = copy_dbi(sn->txn[i], sh->kv, env, &t, kv, MDB_APPEND, keys,
			   bytes)) ||
	    (rc = copy_dbi(sn->txn[i], sh->exp, env, &t, exp, MDB_APPENDDUP,
			   &ignored, &ignored_bytes)))
		goto fail;
	rc = mdb_txn_commit(t);
	t = NULL;
	if (rc || (rc = mdb_env_sync(env, 1)))
		goto fail;
	mdb_env_close(env);
	return 0;
fail:
	if (t)
		mdb_txn_abort(t);
	if (env)
		mdb_env_close(env);
	snprintf(err, errlen, "%s: %s", dir, mdb_strerror(rc));
	return -1;
}
