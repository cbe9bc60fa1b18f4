/* shard.c - opening a shard (LMDB, then the journal replayed above the
 * checkpoint LSN into a memtable), and point reads through the layers.
 *
 * With shard_scan.c, shard_write.c, shard_ckpt.c and shard_copy.c
 * (shard_int.h), the only code that calls LMDB, the journal and the
 * memtable; see shard.h for the layout on disk.
 */
#include "shard_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "kv_proto.h"
#include "kv_status.h"
#include "store_log.h"

/* ===================== Store ===================== */

static int shard_open(struct shard *sh, const struct kvd_store_opts *o,
		      char *err, size_t errlen)
{
	/* Every commit fully synced: LMDB on disk is always the last
	 * checkpoint, whole (the journal carries what came after). */
	unsigned flags = MDB_NOTLS | MDB_NORDAHEAD;
	MDB_txn *txn = NULL;
	int rc, dead = 0;

	if ((rc = mdb_env_create(&sh->env)) ||
	    (rc = mdb_env_set_maxdbs(sh->env, 4)) ||
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
	    (rc = mdb_dbi_open(txn, "kx", MDB_CREATE, &sh->kx)) ||
	    (rc = mdb_dbi_open(txn, "exp", MDB_CREATE | MDB_DUPSORT,
			       &sh->exp)) ||
	    (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &sh->meta)))
		goto fail;
	/* A checkpoint cut short left its marker: the memtable it describes
	 * is gone (shard_ckpt.c); the journal replays over what it applied. */
	if ((rc = kvd_shard_ckpt_base_clear(sh, txn)))
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

uint64_t kvd_shard_meta_lsn(struct shard *sh, MDB_txn *txn)
{
	MDB_val k = {8, "ckpt_lsn"}, v;
	uint64_t lsn = 0;

	if (mdb_get(txn, sh->meta, &k, &v) == 0 && v.mv_size == 8)
		memcpy(&lsn, v.mv_data, 8);
	return lsn;
}

/* Arena chunks of an eighth of the memtable size (4 KiB to 2 MiB), so
 * that a small memtable-size still freezes on what it holds; the hash
 * index sized for a full one from the start (bench/HISTORY.md, "The
 * write path, fifth round").  The shard's memtables share a pool of one
 * memtable's worth of 2 MiB chunks: the next one reuses the chunks of the
 * one its checkpoint freed instead of faulting in new pages (memtable.h,
 * kvm_pool); an idle shard gives them back (kvd_shard_tick).  Called at
 * recovery first (one thread), then by the writer. */
struct kvm *kvd_memtable_new(struct shard *sh)
{
	const struct kvd_store *st = sh->st;
	struct kvm_opts o = {.chunk_size = st->memtable_size / 8,
			     .expect_bytes = st->memtable_size};
	struct kvm *m = NULL;

	if (o.chunk_size < 4096)
		o.chunk_size = 4096;
	if (o.chunk_size > KVM_DEFAULT_CHUNK)
		o.chunk_size = KVM_DEFAULT_CHUNK;
	/* A pool that cannot be made (small chunks, no memory) is none. */
	if (!sh->pool && o.chunk_size == KVM_DEFAULT_CHUNK)
		kvm_pool_create(o.chunk_size, st->memtable_size, &sh->pool);
	o.pool = sh->pool;
	return kvm_create(&o, &m) ? NULL : m;
}

/* Recovery: one journal record above the checkpoint into the memtable. */
struct replay {
	struct shard *sh;
	struct kvm *m;
	MDB_txn *txn;
	uint64_t bytes; /* of the records replayed */
};

static int replay_one(void *arg, uint64_t lsn, uint8_t type,
		      const void *payload, uint32_t len)
{
	struct replay *rp = arg;
	struct kvj_rec r;
	/* Whether LMDB holds the key is left to COUNT to ask (memtable.h):
	 * no B-tree descent per record, so replay costs memtable inserts. */
	unsigned below = KVM_F_UNKNOWN;
	uint8_t ik[KVM_MAX_KEY];
	size_t n;
	int rc;

	rp->bytes += len;
	if ((rc = kvj_rec_decode(type, payload, len, &r)))
		return rc;
	if (r.type == KVJ_FLUSHALL)
		return kvm_flush(rp->m, lsn);
	/* records of before keyspaces are keyspace 0's (r.ks is 0) */
	if (!(n = ikey_put(ik, r.ks, r.key, r.klen)))
		return -EBADMSG;
	below |= ks_flags(r.ks);
	if (r.type == KVJ_PUT)
		return kvm_put(rp->m, ik, n, r.val, r.vlen, r.expiry_ms, lsn,
			       below | KVM_F_TYPE(r.vtype));
	return kvm_del(rp->m, ik, n, lsn, below);
}

static int shard_recover(struct shard *sh, const struct kvd_store_opts *o,
			 char *err, size_t errlen)
{
	/* One spare segment is kept for batches of deletes: a full disk
	 * refuses new segments to other writes (shard_write.c). */
	struct kvj_opts jo = {.segment_size = o->segment_size,
			      .reserve = 1,
			      .shard_id = sh->idx,
			      .flags =
				  o->truncate_corrupt ? KVJ_OPEN_TRUNCATE : 0};
	struct replay rp = {.sh = sh};
	struct kvj_report rep;
	uint64_t t0 = kvd_mono_ns(), ckpt;
	int rc;

	if ((rc = mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &rp.txn))) {
		snprintf(err, errlen, "%s: %s", sh->path, mdb_strerror(rc));
		return -1;
	}
	ckpt = kvd_shard_meta_lsn(sh, rp.txn);
	rp.m = kvd_memtable_new(sh);
	rc = rp.m ? kvj_open(sh->path, &jo, ckpt, replay_one, &rp, &rep, &sh->j)
		  : -ENOMEM;
	mdb_txn_abort(rp.txn);
	if (rc) {
		kvm_destroy(rp.m);
		if (rc == -EBADMSG)
			snprintf(err, errlen,
				 "%s; start with --journal-truncate-corrupt "
				 "yes to drop the journal from there on",
				 rep.msg);
		else
			snprintf(err, errlen, "%s: cannot open journal: %s%s%s",
				 sh->path, kvj_strerror(rc),
				 rep.msg[0] ? ": " : "", rep.msg);
		return -1;
	}
	if (rep.msg[0])
		log_warn("%s", rep.msg);
	else if (rep.dropped) /* the valid-looking leftovers of a torn write */
		log_warn("%s: journal: torn tail wiped, %llu byte(s) from "
			 "offset %llu (a write a crash cut short)",
			 rep.bad_file, (unsigned long long)rep.dropped,
			 (unsigned long long)rep.bad_offset);
	kvm_publish(rp.m); /* before any reader: replay is one batch */
	atomic_store(&sh->active, rp.m);
	atomic_store(&sh->ckpt_lsn, ckpt);
	atomic_store(&sh->pub_lsn, kvj_next_lsn(sh->j) - 1);
	sh->released = ckpt;
	sh->active_ms = rep.replayed ? kvd_now_ms() : 0;
	log_info("%s: checkpoint LSN %llu, journal replayed %llu record(s) "
		 "(%.1f MiB) in %.1f ms",
		 sh->path, (unsigned long long)ckpt,
		 (unsigned long long)rep.replayed, (double)rp.bytes / (1 << 20),
		 (double)(kvd_mono_ns() - t0) / 1e6);
	return 0;
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

static int store_shard_open(struct kvd_store *st, struct shard *sh,
			    const struct kvd_store_opts *o, char *err,
			    size_t errlen)
{
	kvd_datadir_shard_path(sh->path, sizeof(sh->path), o->dir, sh->idx);
	sh->st = st;
	sh->wt.st = st;
	sh->wt.idx = sh->idx;
	pthread_mutex_init(&sh->mu, NULL);
	pthread_cond_init(&sh->cv, NULL);
	sh->fail_log = (struct kvd_log_limit)KVD_LOG_LIMIT_INIT(60000);
	if (shard_open(sh, o, err, errlen))
		return -1;
	shard_log_open(sh, o->map_size);
	return 0;
}

/* The journal after every shard's LMDB exists: a new data directory has
 * all its shards' files at once (pre-writing a journal segment takes a
 * while, and a crash in between must not leave a shard missing). */
static int store_shard_recover(struct shard *sh, const struct kvd_store_opts *o,
			       char *err, size_t errlen)
{
	if (shard_recover(sh, o, err, errlen))
		return -1;
	if (kvd_ckpt_start(sh)) {
		snprintf(err, errlen, "%s: cannot start its checkpointer",
			 sh->path);
		return -1;
	}
	return 0;
}

/* memtable-size auto: a budget the shards share, so that the memtables'
 * memory does not grow with the cores, held between what checkpoints
 * amortize well and a memtable small enough to replay at once.  A
 * checkpoint of a large store of random keys touches nearly every leaf
 * whatever the memtable holds, so it is the memtables' total that sets
 * how often that happens (bench/HISTORY.md, eighth round). */
#define AUTO_MEMTABLE_BUDGET (256ull << 20)
#define AUTO_MEMTABLE_MIN (64ull << 20)
#define AUTO_MEMTABLE_MAX (128ull << 20)

static uint64_t auto_memtable_size(unsigned nshards)
{
	/* whole 2 MiB chunks */
	uint64_t v = AUTO_MEMTABLE_BUDGET / nshards & ~((2ull << 20) - 1);

	return v < AUTO_MEMTABLE_MIN   ? AUTO_MEMTABLE_MIN
	       : v > AUTO_MEMTABLE_MAX ? AUTO_MEMTABLE_MAX
				       : v;
}

int kvd_store_open(struct kvd_store **out, const struct kvd_store_opts *o,
		   char *err, size_t errlen)
{
	struct kvd_store *st = calloc(1, sizeof(*st));

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_init(&st->rmu, NULL);
	st->map_size = o->map_size;
	st->segment_size = o->segment_size;
	for (unsigned i = 0; i < o->nmerge && i < KVD_MERGE_MAX; i++)
		st->merge[i] = o->merge[i];
	st->stored = o->stored;
	st->hook_arg = o->hook_arg;
	st->ckpt_interval_ms =
	    o->checkpoint_interval_ms ? o->checkpoint_interval_ms : 60000;
	if (kvd_datadir_open(&st->dd, o->dir, o->want_shards, o->exact_shards,
			     err, errlen)) {
		free(st);
		return -1;
	}
	st->memtable_size = o->memtable_size
				? o->memtable_size
				: auto_memtable_size(st->dd.nshards);
	if (o->memtable_size)
		log_info("memtable-size %.1f MiB per shard",
			 (double)st->memtable_size / (1 << 20));
	else
		log_info("memtable-size %.1f MiB per shard (auto: %llu MiB "
			 "shared by the shards)",
			 (double)st->memtable_size / (1 << 20),
			 AUTO_MEMTABLE_BUDGET >> 20);
	st->sh = calloc(st->dd.nshards, sizeof(*st->sh));
	if (!st->sh) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (; st->n < st->dd.nshards; st->n++) {
		st->sh[st->n].idx = st->n;
		if (store_shard_open(st, &st->sh[st->n], o, err, errlen)) {
			st->n++; /* closed by kvd_store_close */
			goto fail;
		}
	}
	if (kvd_datadir_created(&st->dd, o->dir, err, errlen))
		goto fail;
	for (unsigned i = 0; i < st->n; i++)
		if (store_shard_recover(&st->sh[i], o, err, errlen))
			goto fail;
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
		struct shard *sh = &st->sh[i];

		kvd_ckpt_stop(sh);
		kvd_shard_spare_stop(sh);
		kv_buf_free(&sh->wt.tmp);
		kv_buf_free(&sh->wt.mimg);
		kv_buf_free(&sh->wt.mreply);
		kv_buf_free(&sh->wt.mside);
		kv_buf_free(&sh->wt.data);
		free(sh->wt.ents);
		free(sh->wt.ht);
		free(sh->wt.recs);
		kvd_reader_free(sh->wt.rd);
		kvm_destroy(atomic_load(&sh->active));
		kvm_destroy(atomic_load(&sh->frozen));
		kvm_pool_destroy(sh->pool);
		kvj_close(sh->j);
		if (sh->env)
			mdb_env_close(sh->env);
	}
	free(st->sh);
	free(st->readers);
	kvd_datadir_close(&st->dd);
	free(st);
}

unsigned kvd_store_nshards(const struct kvd_store *st)
{
	return st->n;
}

uint64_t kvd_shard_pub_lsn(struct kvd_store *st, unsigned i)
{
	return atomic_load(&st->sh[i].pub_lsn);
}

int kvd_journal_open(struct kvd_store *st, unsigned i, uint64_t from,
		     struct kvj_reader **out)
{
	return kvj_reader_open(st->sh[i].path, i, from, out);
}

int kvd_journal_next(struct kvj_reader *r, uint64_t upto, uint64_t *lsn,
		     uint8_t *type, const void **payload, uint32_t *len)
{
	return kvj_reader_next(r, upto, lsn, type, payload, len);
}

uint64_t kvd_journal_lsn(const struct kvj_reader *r)
{
	return kvj_reader_lsn(r);
}

void kvd_journal_close(struct kvj_reader *r)
{
	kvj_reader_close(r);
}

const char *kvd_journal_strerror(int err)
{
	return kvj_strerror(err);
}

void kvd_shard_hold(struct kvd_store *st, unsigned i, uint64_t lsn)
{
	atomic_store(&st->sh[i].hold_lsn, lsn);
}

void kvd_store_set_backlog(struct kvd_store *st, uint64_t bytes)
{
	atomic_store(&st->backlog, bytes);
}

int kvd_shard_failed(struct kvd_store *st, unsigned i)
{
	return atomic_load(&st->sh[i].failed) != 0;
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

/* Readers are listed in the store so that a checkpointer can wait for
 * each to pass a quiescent point (shard_ckpt.c). */
static int reader_register(struct kvd_store *st, struct kvd_reader *r)
{
	int rc = 0;

	pthread_mutex_lock(&st->rmu);
	if (st->nreaders == st->capreaders) {
		unsigned cap = st->capreaders ? 2 * st->capreaders : 16;
		void *p = realloc(st->readers, cap * sizeof(*st->readers));

		if (p) {
			st->readers = p;
			st->capreaders = cap;
		}
	}
	if (st->nreaders < st->capreaders)
		st->readers[st->nreaders++] = r;
	else
		rc = -1;
	pthread_mutex_unlock(&st->rmu);
	return rc;
}

static void reader_unregister(struct kvd_store *st, struct kvd_reader *r)
{
	pthread_mutex_lock(&st->rmu);
	for (unsigned i = 0; i < st->nreaders; i++) {
		if (st->readers[i] == r) {
			st->readers[i] = st->readers[--st->nreaders];
			break;
		}
	}
	pthread_mutex_unlock(&st->rmu);
}

struct kvd_reader *kvd_reader_new(struct kvd_store *st)
{
	struct kvd_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->st = st;
	r->txn = calloc(st->n, sizeof(*r->txn));
	r->cur = calloc(st->n, sizeof(*r->cur));
	r->xcur = calloc(st->n, sizeof(*r->xcur));
	r->active = calloc(st->n, 1);
	r->heads = calloc(st->n, sizeof(*r->heads));
	r->views = calloc(st->n, sizeof(*r->views));
	r->gen = 1; /* views start at 0: none is current */
	if (!r->txn || !r->cur || !r->xcur || !r->active || !r->heads ||
	    !r->views || reader_register(st, r)) {
		free(r->txn);
		free(r->cur);
		free(r->xcur);
		free(r->active);
		free(r->heads);
		free(r->views);
		free(r);
		return NULL;
	}
	return r;
}

void kvd_reader_free(struct kvd_reader *r)
{
	if (!r)
		return;
	reader_unregister(r->st, r);
	for (unsigned i = 0; r->txn && i < r->st->n; i++) {
		if (r->cur && r->cur[i])
			mdb_cursor_close(r->cur[i]);
		if (r->xcur && r->xcur[i])
			mdb_cursor_close(r->xcur[i]);
		if (r->txn[i])
			mdb_txn_abort(r->txn[i]);
	}
	free(r->txn);
	free(r->cur);
	free(r->xcur);
	free(r->active);
	free(r->heads);
	free(r->views);
	free(r);
}

void kvd_reader_reset(struct kvd_reader *r)
{
	r->gen++; /* no view's memtable pointer outlives the quiescent point */
	for (unsigned i = 0; r->nactive && i < r->st->n; i++) {
		if (r->active[i]) {
			mdb_txn_reset(r->txn[i]);
			r->active[i] = 0;
		}
	}
	r->nactive = 0;
	if (r->in) {
		/* Nothing loaded before this point is used after it: release
		 * stores (this thread is the only writer of both), no locked
		 * instruction at every loop turn's end. */
		atomic_store_explicit(
		    &r->epoch,
		    atomic_load_explicit(&r->epoch, memory_order_relaxed) + 1,
		    memory_order_release);
		atomic_store_explicit(&r->busy, 0, memory_order_release);
		r->in = 0;
	}
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

MDB_cursor *kvd_shard_rcursor(struct kvd_reader *r, unsigned i, unsigned ks)
{
	MDB_txn *txn = kvd_shard_rtxn(r, i);
	MDB_cursor **c = ks ? &r->xcur[i] : &r->cur[i];
	int rc;

	if (!txn)
		return NULL;
	if (*c)
		rc = mdb_cursor_renew(txn, *c);
	else
		rc = mdb_cursor_open(txn,
				     ks ? r->st->sh[i].kx : r->st->sh[i].kv, c);
	if (rc) {
		kvd_log_ratelimited(&read_limit, KVD_LOG_ERROR,
				    "%s: cannot open cursor: %s",
				    r->st->sh[i].path, mdb_strerror(rc));
		return NULL;
	}
	return *c;
}

void kvd_reader_pin(struct kvd_reader *r)
{
	r->pinned = 1;
	r->gen++;
}

void kvd_reader_unpin(struct kvd_reader *r)
{
	r->pinned = 0;
	r->gen++;
}

/* The reader's view of shard i for this read: its memtables and what each
 * had published, loaded once per read, or once per pinned request (a
 * multi-key read then sees each shard at one batch boundary). */
static const struct rview *rview(struct kvd_reader *r, unsigned i)
{
	struct rview *v = &r->views[i];

	kvd_reader_enter(r);
	if (!r->pinned)
		r->gen++;
	if (v->gen == r->gen)
		return v;
	shard_layers(&r->st->sh[i], &v->m[0], &v->m[1]);
	for (int s = 0; s < 2; s++)
		if (v->m[s])
			kvm_snapshot(v->m[s], &v->s[s]);
	v->gen = r->gen;
	return v;
}

/* One memtable layer's say on a key: KV_OK, KV_NOT_FOUND, or -1 (look
 * below). */
static int mget(struct kvm *m, const struct kvm_snap *sn, const void *key,
		size_t klen, uint64_t now, uint64_t *exp, struct kv_slice *val,
		unsigned *type)
{
	struct kvm_entry e;
	int k = m ? kvm_get_at(m, sn, key, klen, &e) : KVM_ABSENT;

	if (k == KVM_VALUE) {
		if (e.expire_at && e.expire_at <= now)
			return KV_NOT_FOUND;
		*exp = e.expire_at;
		*type = e.type;
		val->p = e.val;
		val->n = e.vlen;
		return KV_OK;
	}
	return k == KVM_TOMBSTONE ? KV_NOT_FOUND : -1;
}

static int rget(struct kvd_reader *r, unsigned shard, unsigned ks,
		const void *key, size_t klen, uint64_t now, uint64_t *exp,
		struct kv_slice *val, unsigned *type)
{
	struct shard *sh = &r->st->sh[shard];
	MDB_txn *txn;
	MDB_val k, v;
	uint8_t ik[KVM_MAX_KEY];
	size_t n = ikey_put(ik, ks, key, klen);
	int rc;
	const struct rview *rv;

	if (!n)
		return KV_NOT_FOUND; /* no such key can be stored */
	/* The memtables before the snapshot: a checkpoint in between can
	 * only show a key twice (the memtable wins), never hide it. */
	rv = rview(r, shard);
	if ((rc = mget(rv->m[0], &rv->s[0], ik, n, now, exp, val, type)) >= 0 ||
	    (rc = mget(rv->m[1], &rv->s[1], ik, n, now, exp, val, type)) >= 0)
		return rc;
	if (!(txn = kvd_shard_rtxn(r, shard)))
		return KV_INTERNAL;
	k = ikey_lmdb(ik, n);
	rc = mdb_get(txn, ikey_dbi(sh, ik), &k, &v);
	if (rc == MDB_NOTFOUND)
		return KV_NOT_FOUND;
	if (rc) {
		kvd_log_ratelimited(&read_limit, KVD_LOG_ERROR,
				    "%s: read failed: %s", sh->path,
				    mdb_strerror(rc));
		return KV_INTERNAL;
	}
	if (!val_live(&v, now, exp, val))
		return KV_NOT_FOUND;
	*type = val_type(&v);
	return KV_OK;
}

int kvd_reader_get(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, struct kv_slice *val)
{
	uint64_t exp;
	unsigned type;
	int rc = rget(r, shard, 0, key, klen, now, &exp, val, &type);

	return rc == KV_OK && type != KVD_VT_PLAIN ? KV_WRONG_TYPE : rc;
}

int kvd_reader_getv(struct kvd_reader *r, unsigned shard, const void *key,
		    size_t klen, uint64_t now, struct kv_slice *val,
		    unsigned *type, uint64_t *exp)
{
	return rget(r, shard, 0, key, klen, now, exp, val, type);
}

void kvd_reader_prefetch(struct kvd_reader *r, unsigned shard, unsigned ks,
			 const void *key, size_t klen, int step)
{
	uint8_t ik[KVM_MAX_KEY];
	size_t n = ikey_put(ik, ks, key, klen);
	struct kvm *m[2];

	if (!n)
		return;
	kvd_reader_enter(r); /* the memtables stay while it looks */
	shard_layers(&r->st->sh[shard], &m[0], &m[1]);
	for (int i = 0; i < 2; i++)
		if (m[i] && step)
			kvm_prefetch_node(m[i], ik, n);
		else if (m[i])
			kvm_prefetch(m[i], ik, n);
}

int kvd_reader_getk(struct kvd_reader *r, unsigned shard, unsigned ks,
		    const void *key, size_t klen, uint64_t now,
		    struct kv_slice *val, unsigned *type)
{
	uint64_t exp;

	return rget(r, shard, ks, key, klen, now, &exp, val, type);
}

int kvd_reader_ttl(struct kvd_reader *r, unsigned shard, const void *key,
		   size_t klen, uint64_t now, int64_t *ttl_ms)
{
	struct kv_slice val;
	uint64_t exp;
	unsigned type;
	int rc = rget(r, shard, 0, key, klen, now, &exp, &val, &type);

	if (rc == KV_OK)
		*ttl_ms = exp ? (int64_t)(exp - now) : -1;
	return rc;
}

int kvd_reader_stat(struct kvd_reader *r, unsigned i, struct kvd_shard_stat *s)
{
	struct shard *sh = &r->st->sh[i];
	MDB_txn *txn;
	MDB_stat ms, es;
	MDB_envinfo ei;
	struct stat fst;
	char path[640];
	struct kvm *a, *f;
	struct shard_view v;

	memset(s, 0, sizeof(*s));
	kvd_reader_enter(r);
	shard_layers(sh, &a, &f);
	s->memtable_bytes = (a ? kvm_bytes(a) : 0) + (f ? kvm_bytes(f) : 0);
	s->memtable_spare = sh->pool ? kvm_pool_bytes(sh->pool) : 0;
	s->memtable_size = r->st->memtable_size;
	s->journal_bytes = atomic_load(&sh->jbytes);
	s->journal_fsyncs = atomic_load(&sh->fsyncs);
	s->spares_ahead = atomic_load(&sh->spares_ahead);
	s->spares_inline = atomic_load(&sh->spares_inline);
	s->spares_held = atomic_load(&sh->spares_held);
	s->checkpoints = atomic_load(&sh->ckpts);
	s->checkpoint_ns = atomic_load(&sh->ckpt_ns);
	s->checkpoint_lsn = atomic_load(&sh->ckpt_lsn);
	s->backpressure = atomic_load(&sh->bp_waits);
	s->checkpoint_failed = atomic_load(&sh->failed) != 0;
	if (kvd_shard_entries(r, i, &v))
		return KV_INTERNAL;
	txn = v.txn;
	if (mdb_stat(txn, sh->kv, &ms) || mdb_stat(txn, sh->exp, &es) ||
	    mdb_env_info(sh->env, &ei))
		return KV_INTERNAL;
	/* Entries, expired or not, across the layers; expiring: LMDB's index
	 * plus the memtables' values with an expiry (a key in both counts
	 * twice until its checkpoint). */
	s->entries = v.entries > 0 ? (uint64_t)v.entries : 0;
	s->expiring =
	    (v.base ? es.ms_entries : 0) + v.expiring[0] + v.expiring[1];
	s->used_bytes = (uint64_t)(ei.me_last_pgno + 1) * ms.ms_psize;
	s->map_size = ei.me_mapsize;
	snprintf(path, sizeof(path), "%s/data.mdb", sh->path);
	if (stat(path, &fst) == 0)
		s->file_bytes = (uint64_t)fst.st_size;
	return KV_OK;
}
