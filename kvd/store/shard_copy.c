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
	MDB_dbi kv, kx, exp;
	uint64_t ignored = 0, ignored_bytes = 0;
	int rc;

	mdb_env_info(sh->env, &ei);
	if (mkdir(dir, 0750) && errno != EEXIST) {
		rc = errno;
		goto fail;
	}
	/* NOSYNC while copying, one forced sync at the end. */
	if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 3)) ||
	    (rc = mdb_env_set_mapsize(env, ei.me_mapsize)) ||
	    (rc = mdb_env_open(env, dir, MDB_NOSYNC | MDB_NOTLS, 0640)) ||
	    (rc = mdb_txn_begin(env, NULL, 0, &t)) ||
	    (rc = mdb_dbi_open(t, "kv", MDB_CREATE, &kv)) ||
	    (rc = mdb_dbi_open(t, "kx", MDB_CREATE, &kx)) ||
	    (rc = mdb_dbi_open(t, "exp", MDB_CREATE | MDB_DUPSORT, &exp)))
		goto fail;
	if ((rc = copy_dbi(sn->txn[i], sh->kv, env, &t, kv, MDB_APPEND, keys,
			   bytes)) ||
	    (rc = copy_dbi(sn->txn[i], sh->kx, env, &t, kx, MDB_APPEND,
			   &ignored, bytes)) ||
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

/* One database's pairs from key start on (empty: its first) into out,
 * klen or'ed with flag; *more with next set when out filled first.
 * 0 or an LMDB code. */
static int chunk_dbi(MDB_txn *txn, MDB_dbi dbi, uint32_t flag,
		     struct kv_slice start, size_t max, struct kv_buf *out,
		     struct kv_buf *next, int *more)
{
	MDB_cursor *c;
	MDB_val k = {start.n, (void *)start.p}, v;
	int rc = mdb_cursor_open(txn, dbi, &c);

	if (rc)
		return rc;
	for (rc =
		 mdb_cursor_get(c, &k, &v, start.n ? MDB_SET_RANGE : MDB_FIRST);
	     rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint32_t kn = (uint32_t)k.mv_size | flag,
			 vn = (uint32_t)v.mv_size;

		if (out->len >= max) {
			/* the position: the ikey (keyspace 0's keys get
			 * their byte here; the others have it) */
			if (!flag)
				kv_buf_append(next, "", 1);
			kv_buf_append(next, k.mv_data, k.mv_size);
			*more = 1;
			break;
		}
		kv_buf_append(out, &kn, 4);
		kv_buf_append(out, &vn, 4);
		kv_buf_append(out, k.mv_data, k.mv_size);
		kv_buf_append(out, v.mv_data, v.mv_size);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int kvd_snapshot_chunk(struct kvd_snapshot *sn, unsigned i,
		       struct kv_slice start, size_t max, struct kv_buf *out,
		       struct kv_buf *next)
{
	struct shard *sh = &sn->st->sh[i];
	struct kv_slice from = {NULL, 0};
	int rc = 0, more = 0;

	next->len = 0;
	/* start is a position chunk_dbi gave: [0][key] in "kv", else a key
	 * of "kx" */
	if (!start.n || !start.p[0]) {
		if (start.n > 1)
			from = (struct kv_slice){start.p + 1, start.n - 1};
		rc = chunk_dbi(sn->txn[i], sh->kv, 0, from, max, out, next,
			       &more);
		from = (struct kv_slice){NULL, 0};
	} else {
		from = start;
	}
	if (!rc && !more)
		rc = chunk_dbi(sn->txn[i], sh->kx, KVD_CHUNK_KX, from, max, out,
			       next, &more);
	if (rc || out->err || next->err)
		return KV_INTERNAL;
	return KV_OK;
}
