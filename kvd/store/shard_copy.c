/* shard_copy.c - backups: one read snapshot per shard, each copied in key
 * order into a fresh, compact environment. */
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
#include "store_log.h"

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

uint64_t kvd_snapshot_lsn(struct kvd_snapshot *sn, unsigned i)
{
	return kvd_shard_meta_lsn(&sn->st->sh[i], sn->txn[i]);
}

int kvd_snapshot_chunk(struct kvd_snapshot *sn, unsigned i,
		       struct kv_slice start, size_t max, struct kv_buf *out,
		       struct kv_buf *next)
{
	MDB_cursor *c;
	MDB_val k = {start.n, (void *)start.p}, v;
	int rc = mdb_cursor_open(sn->txn[i], sn->st->sh[i].kv, &c);

	next->len = 0;
	if (rc)
		return KV_INTERNAL;
	for (rc =
		 mdb_cursor_get(c, &k, &v, start.n ? MDB_SET_RANGE : MDB_FIRST);
	     rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint32_t kn = (uint32_t)k.mv_size, vn = (uint32_t)v.mv_size;

		if (out->len >= max) {
			kv_buf_append(next, k.mv_data, k.mv_size);
			break;
		}
		kv_buf_append(out, &kn, 4);
		kv_buf_append(out, &vn, 4);
		kv_buf_append(out, k.mv_data, k.mv_size);
		kv_buf_append(out, v.mv_data, v.mv_size);
	}
	mdb_cursor_close(c);
	if ((rc && rc != MDB_NOTFOUND) || out->err || next->err)
		return KV_INTERNAL;
	return KV_OK;
}
