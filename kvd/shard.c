/* shard.c - LMDB environments and read snapshots.
 *
 * With shard_scan.c, shard_write.c and shard_copy.c (shard_int.h), the only
 * code that calls LMDB; see shard.h for the layout on disk.
 */
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
uint64_t kvd_shard_fs_room(const char *path)
{
	struct statvfs sv;

	if (statvfs(path, &sv))
		return UINT64_MAX;
	return (uint64_t)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
	       sv.f_frsize;
}

int kvd_store_reader_check(struct kvd_store *st, unsigned i)
{
	int dead = 0;

	if (mdb_reader_check(st->sh[i].env, &dead))
		return 0;
	return dead;
}

/* ===================== Readers ===================== */

/* A read that fails (MDB_READERS_FULL, say) fails for every request until
 * the cause goes: one line a second, with a count of the others. */
static struct kvd_log_limit read_limit = KVD_LOG_LIMIT_INIT(1000);

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
MDB_txn *kvd_shard_rtxn(struct kvd_reader *r, unsigned i)
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
		kvd_log_ratelimited(&read_limit, KVD_LOG_ERROR,
				    "%s: cannot open read transaction: %s",
				    r->st->sh[i].path, mdb_strerror(rc));
		return NULL;
	}
	r->active[i] = 1;
	r->nactive++;
	return r->txn[i];
}

MDB_cursor *kvd_shard_rcursor(struct kvd_reader *r, unsigned i)
{
	MDB_txn *txn = kvd_shard_rtxn(r, i);
	int rc;

	if (!txn)
		return NULL;
	if (r->cur[i])
		rc = mdb_cursor_renew(txn, r->cur[i]);
	else
		rc = mdb_cursor_open(txn, r->st->sh[i].kv, &r->cur[i]);
	if (rc) {
		kvd_log_ratelimited(&read_limit, KVD_LOG_ERROR,
				    "%s: cannot open cursor: %s",
				    r->st->sh[i].path, mdb_strerror(rc));
		return NULL;
	}
	return r->cur[i];
}

static int rget(struct kvd_reader *r, unsigned shard, const void *key,
		size_t klen, uint64_t now, uint64_t *exp, struct kv_slice *val)
{
	MDB_txn *txn = kvd_shard_rtxn(r, shard);
	MDB_val k = {klen, (void *)key}, v;
	int rc;

	if (!txn)
		return KV_INTERNAL;
	rc = mdb_get(txn, r->st->sh[shard].kv, &k, &v);
	if (rc == MDB_NOTFOUND)
		return KV_NOT_FOUND;
	if (rc) {
		kvd_log_ratelimited(&read_limit, KVD_LOG_ERROR,
				    "%s: read failed: %s",
				    r->st->sh[shard].path, mdb_strerror(rc));
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
	MDB_txn *txn = kvd_shard_rtxn(r, i);
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
