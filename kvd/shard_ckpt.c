/* shard_ckpt.c - checkpoints: a frozen memtable applied to LMDB in key
 * order, in one fully synced write transaction that also stores the
 * checkpoint LSN, then retired once no reader can need it.
 *
 * One checkpointer thread per shard.  The committer freezes (hands over
 * the active memtable and starts a new one); the checkpointer applies it,
 * publishes the LSN (the committer recycles the journal: the journal is
 * the committer's alone), and retires it in two steps: a reader may hold
 * an LMDB snapshot older than the checkpoint, so the frozen memtable stays
 * visible until every reader passed a quiescent point (kvd_reader_reset);
 * then it is unpublished, and freed after one more.  The waits poll the
 * readers' epochs: a checkpointer waits for io threads, never the reverse.
 */
#include "shard_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kv_status.h"
#include "kvd.h"
#include "log.h"

/* Room for a checkpoint (map or disk full): retried this often, and at
 * once when a writer needs it. */
#define RETRY_MS 1000
/* Room left below which an EIO from a commit counts as a full disk: LMDB
 * reports a short write of pages as EIO ("short write, filesystem
 * full?").  An aborted commit's pages are never referenced, so a failed
 * checkpoint for room is safe to retry; any other failure is not. */
#define FULL_MARGIN (32ull << 20)

/* Wait until every reader that was inside a turn has left it. */
static void quiesce(struct kvd_store *st)
{
	pthread_mutex_lock(&st->rmu);
	for (unsigned i = 0; i < st->nreaders; i++) {
		struct kvd_reader *r = st->readers[i];
		uint64_t e = atomic_load(&r->epoch);

		while (atomic_load(&r->busy) && atomic_load(&r->epoch) == e) {
			struct timespec ts = {0, 50000};

			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_unlock(&st->rmu);
}

static int exp_del(struct shard *sh, MDB_txn *txn, uint64_t at, MDB_val *k)
{
	uint8_t b[8];
	MDB_val ek = {8, b};
	int rc;

	be64_put(b, at);
	rc = mdb_del(txn, sh->exp, &ek, k);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* One key's newest version into LMDB, keeping the expiry index exact. */
static int apply_one(struct shard *sh, MDB_txn *txn, const struct kvm_entry *e)
{
	MDB_val k = {e->klen, (void *)e->key}, v;
	uint64_t oexp = 0;
	struct kv_slice od;
	int rc, found;

	rc = mdb_get(txn, sh->kv, &k, &v);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	found = rc == 0;
	if (found && val_parse(&v, &oexp, &od))
		oexp = 0;
	if (found && oexp && (e->kind != KVM_VALUE || oexp != e->expire_at) &&
	    (rc = exp_del(sh, txn, oexp, &k)))
		return rc;
	if (e->kind != KVM_VALUE)
		return found ? mdb_del(txn, sh->kv, &k, NULL) : 0;
	v.mv_size = val_hdr_len(e->expire_at) + e->vlen;
	if ((rc = mdb_put(txn, sh->kv, &k, &v, MDB_RESERVE)))
		return rc;
	val_hdr_put(v.mv_data, e->expire_at);
	memcpy((uint8_t *)v.mv_data + val_hdr_len(e->expire_at), e->val,
	       e->vlen);
	if (e->expire_at && (!found || oexp != e->expire_at)) {
		uint8_t b[8];
		MDB_val ek = {8, b};

		be64_put(b, e->expire_at);
		rc = mdb_put(txn, sh->exp, &ek, &k, MDB_NODUPDATA);
		if (rc == MDB_KEYEXIST)
			rc = 0;
	}
	return rc;
}

/* m into LMDB with the LSN upto, committed (fully synced).  0 or an LMDB
 * or errno code; *what names the step that failed. */
static int apply(struct shard *sh, struct kvm *m, uint64_t upto,
		 const char **what)
{
	MDB_val mk = {8, "ckpt_lsn"}, mv = {8, &upto};
	struct kvm_iter it;
	struct kvm_entry e;
	MDB_txn *txn;
	int rc;

	*what = "begin";
	if ((rc = mdb_txn_begin(sh->env, NULL, 0, &txn)))
		return rc;
	*what = "write";
	/* FLUSHALL: everything below the memtable goes first. */
	if (kvm_flush_lsn(m) && ((rc = mdb_drop(txn, sh->kv, 0)) ||
				 (rc = mdb_drop(txn, sh->exp, 0))))
		goto fail;
	kvm_iter_init(&it, m);
	for (int ok = kvm_iter_seek(&it, NULL, 0); ok;
	     ok = kvm_iter_next(&it)) {
		kvm_iter_entry(&it, &e);
		if ((rc = apply_one(sh, txn, &e)))
			goto fail;
	}
	if ((rc = mdb_put(txn, sh->meta, &mk, &mv, 0)))
		goto fail;
	*what = "commit";
	return mdb_txn_commit(txn);
fail:
	mdb_txn_abort(txn);
	return rc;
}

/* A failed checkpoint: KV_MAP_FULL, KV_DISK_FULL or KV_INTERNAL (out of
 * memory), retried: nothing of an aborted commit is referenced on disk;
 * or KV_SHARD_FAILED. */
static int ckpt_status(struct shard *sh, int rc, const char *what)
{
	if (rc == MDB_MAP_FULL)
		return KV_MAP_FULL;
	if (rc == ENOMEM)
		return KV_INTERNAL;
	if (rc == ENOSPC || (rc == EIO && !strcmp(what, "commit") &&
			     kvd_shard_fs_room(sh->path) < FULL_MARGIN))
		return KV_DISK_FULL;
	return KV_SHARD_FAILED;
}

/* Apply, publish, retire one frozen memtable; 0 or a KV_* code. */
static int checkpoint(struct shard *sh, struct kvm *m, uint64_t upto)
{
	struct kvd_store *st = sh->st;
	uint64_t t0 = kvd_mono_ns(), ns;
	const char *what;
	int rc = apply(sh, m, upto, &what);

	if (rc) {
		int status = ckpt_status(sh, rc, what);

		log_error("%s: checkpoint %s failed: %s; %s", sh->path, what,
			  mdb_strerror(rc),
			  status == KV_SHARD_FAILED
			      ? "this shard accepts no more writes until "
				"restart (reads go on; the journal keeps "
				"every acknowledged write)"
			      : "retried every second; writes wait or are "
				"refused meanwhile");
		return status;
	}
	ns = kvd_mono_ns() - t0;
	log_debug("%s: checkpoint to LSN %llu in %.1f ms", sh->path,
		  (unsigned long long)upto, (double)ns / 1e6);
	atomic_store(&sh->ckpt_ns, ns);
	atomic_fetch_add(&sh->ckpts, 1);
	atomic_store(&sh->ckpt_lsn, upto);
	atomic_store(&sh->ckpt_err, 0);
	/* Readers whose snapshot predates the commit still need m. */
	quiesce(st);
	atomic_store_explicit(&sh->frozen, NULL, memory_order_release);
	quiesce(st);
	kvm_destroy(m);
	return 0;
}

/* Between checkpoints: ask LMDB about the keys plain PUTs left open
 * (memtable.h, COUNT) ahead of any count, so that COUNT, DBSIZE, STATS,
 * INFO and a /metrics scrape on an io thread find the answers kept and
 * do not pay a lookup per key written since the last count.  Off the
 * committer's path: the lookups run here, when there is no checkpoint to
 * run, at most every RESOLVE_MS. */
#define RESOLVE_MS 100

static void resolve(struct shard *sh, struct kvd_reader *rd)
{
	struct shard_view v;

	kvd_shard_entries(rd, sh->idx, &v); /* a failure is retried later */
	kvd_reader_reset(rd); /* quiescent: never busy while idle */
}

static void idle_wait(struct shard *sh, struct kvd_reader *rd)
{
	struct timespec ts;

	if (!rd) {
		pthread_cond_wait(&sh->cv, &sh->mu);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += RESOLVE_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	if (pthread_cond_timedwait(&sh->cv, &sh->mu, &ts) == ETIMEDOUT &&
	    !sh->job && !sh->stop) {
		pthread_mutex_unlock(&sh->mu);
		resolve(sh, rd);
		pthread_mutex_lock(&sh->mu);
	}
}

static void *ckpt_main(void *arg)
{
	struct shard *sh = arg;
	struct kvd_reader *rd = kvd_reader_new(sh->st); /* NULL: no resolving */

	pthread_mutex_lock(&sh->mu);
	for (;;) {
		struct kvm *m;
		uint64_t upto, bytes;
		int rc;

		while (!sh->job && !sh->stop)
			idle_wait(sh, rd);
		if (!sh->job || atomic_load(&sh->failed))
			break;
		m = sh->job;
		upto = sh->frozen_upto;
		bytes = sh->frozen_bytes;
		pthread_mutex_unlock(&sh->mu);
		rc = checkpoint(sh, m, upto);
		pthread_mutex_lock(&sh->mu);
		sh->attempts++;
		if (rc == 0) {
			atomic_fetch_sub(&sh->pend_bytes, bytes);
			sh->job = NULL;
			atomic_store(&sh->ckpt_busy, 0);
		} else if (rc == KV_SHARD_FAILED) {
			atomic_store(&sh->failed, KV_SHARD_FAILED);
		} else {
			struct timespec ts;

			atomic_store(&sh->ckpt_err, rc);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += RETRY_MS / 1000;
			pthread_cond_broadcast(&sh->cv);
			if (!sh->stop)
				pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
			if (sh->stop)
				break;
		}
		pthread_cond_broadcast(&sh->cv);
	}
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	if (rd)
		kvd_reader_free(rd);
	return NULL;
}

int kvd_ckpt_start(struct shard *sh)
{
	if (pthread_create(&sh->ckpt_thread, NULL, ckpt_main, sh))
		return -1;
	sh->ckpt_started = 1;
	return 0;
}

void kvd_ckpt_stop(struct shard *sh)
{
	if (!sh->ckpt_started)
		return;
	pthread_mutex_lock(&sh->mu);
	sh->stop = 1;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	pthread_join(sh->ckpt_thread, NULL);
	sh->ckpt_started = 0;
}

/* Wait, holding no snapshot (the checkpointer may be waiting for this
 * reader), until no memtable is being checkpointed.  *waited says whether
 * it had to. */
static int wait_idle(struct shard *sh, struct kvd_reader *rd, int *waited)
{
	int rc = 0;

	int kicked = 0;

	kvd_reader_reset(rd);
	*waited = 0;
	pthread_mutex_lock(&sh->mu);
	while (sh->job && !(rc = atomic_load(&sh->failed))) {
		uint64_t tries = sh->attempts;

		if ((rc = atomic_load(&sh->ckpt_err))) {
			/* The checkpoint failed for room: have it tried once
			 * more now (room may be back), and answer with what
			 * that attempt says. */
			if (kicked)
				break;
			kicked = 1;
			pthread_cond_broadcast(&sh->cv);
			while (sh->job && sh->attempts == tries &&
			       !atomic_load(&sh->failed))
				pthread_cond_wait(&sh->cv, &sh->mu);
			rc = 0;
			continue;
		}
		*waited = 1;
		pthread_cond_wait(&sh->cv, &sh->mu);
	}
	if (!sh->job)
		rc = 0;
	if (!rc)
		rc = atomic_load(&sh->failed);
	pthread_mutex_unlock(&sh->mu);
	return rc;
}

int kvd_ckpt_wait(struct shard *sh, struct kvd_reader *rd)
{
	int waited;

	return wait_idle(sh, rd, &waited);
}

int kvd_ckpt_freeze(struct shard *sh, struct kvd_reader *rd)
{
	struct kvm *a = atomic_load(&sh->active), *n;
	int rc, waited;

	if ((rc = wait_idle(sh, rd, &waited)))
		return rc;
	if (waited)
		atomic_fetch_add(&sh->bp_waits, 1);
	if (!(n = kvd_memtable_new(sh->st)))
		return KV_INTERNAL;
	pthread_mutex_lock(&sh->mu);
	sh->job = a;
	atomic_store(&sh->ckpt_busy, 1);
	sh->frozen_upto = kvm_last_lsn(a);
	sh->frozen_bytes = sh->act_bytes;
	/* Frozen first: a reader that sees the new active sees it there. */
	atomic_store_explicit(&sh->frozen, a, memory_order_release);
	atomic_store_explicit(&sh->active, n, memory_order_release);
	sh->act_bytes = 0;
	sh->active_ms = 0;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return 0;
}
