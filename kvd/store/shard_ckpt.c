/* shard_ckpt.c - checkpoints: a frozen memtable applied to LMDB in key
 * order, in fully synced write transactions of bounded size, the last of
 * which stores the checkpoint LSN, then retired once no reader can need it.
 *
 * Between two checkpoints it also runs the bulk merges a committer hands
 * it (kvd_shard_bulk, the work in shard_bulk.c): after the memtable frozen
 * with the hand-over, before any later one.
 *
 * One checkpointer thread per shard.  The committer freezes (hands over
 * the active memtable and starts a new one); the checkpointer applies it,
 * publishes the LSN (the committer recycles the journal: the journal is
 * the committer's alone), and retires it in two steps: a reader may hold
 * an LMDB snapshot older than the checkpoint, so the frozen memtable stays
 * visible until every reader passed a quiescent point (kvd_reader_reset);
 * then it is unpublished, and freed after one more.  The waits poll the
 * readers' epochs: a checkpointer waits for io threads, never the reverse.
 *
 * Why several transactions: LMDB keeps the buffer of every page a write
 * transaction dirtied in its environment's free list for reuse and never
 * gives it back (mdb_page_free), so the largest transaction's dirty pages
 * stay in the process for good: one transaction per 64 MiB memtable of
 * random keys dirtied up to LMDB's 131,072-page limit, 512 MiB a shard.
 * While a checkpoint is part-way, LMDB holds part of the frozen memtable
 * under the old checkpoint LSN, which is safe: the frozen memtable stays
 * in front of LMDB for every reader until the last transaction committed
 * (it decides every key it holds), a crash replays the journal from the
 * old LSN over the part applied (records are physical: replaying them is
 * idempotent; a FLUSHALL's mdb_drop is in the first transaction only, and
 * its record replays as a flush marker that hides LMDB and drops it
 * again), and a failed transaction (map or disk full) is retried from
 * where the last committed one ended.  COUNT stays exact: the frozen
 * memtable's plain PUTs are resolved against LMDB before its first
 * transaction (memtable.h, COUNT), and the first of several transactions
 * stores LMDB's entry count before the checkpoint ("ckpt_base"), which
 * kvd_shard_entries uses instead of mdb_stat's for a snapshot that holds a
 * part of that memtable; the last transaction deletes it, and so does
 * opening the store (the memtable it described is gone after a restart).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "shard_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "kv_status.h"
#include "store_log.h"

/* Room for a checkpoint (map or disk full): retried this often, and when
 * a writer needs it, at most every KICK_MS (every writer's batch asked for
 * one, and a full disk saw hundreds of attempts a second). */
#define RETRY_MS 1000
#define KICK_MS 100
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

/* One key's newest version into LMDB, keeping the expiry index exact.
 * Through one cursor for the whole transaction: keys come in order, and
 * LMDB's cursor set and put look first at the leaf the cursor is on (most
 * of the next keys of a sorted batch land there), where mdb_get and
 * mdb_put descend from the root for each key, twice. */
static int apply_one(struct shard *sh, MDB_txn *txn, MDB_cursor *cur,
		     const struct kvm_entry *e)
{
	MDB_val k = ikey_lmdb(e->key, e->klen), v;
	uint64_t oexp = 0;
	struct kv_slice od;
	int rc, found;
	/* the expiry index is keyspace 0's (store.h, keyspaces) */
	int indexed = !e->key[0];

	rc = mdb_cursor_get(cur, &k, &v, MDB_SET);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	found = rc == 0;
	if (found && val_parse(&v, &oexp, &od))
		oexp = 0;
	if (!indexed)
		oexp = 0;
	if (found && oexp && (e->kind != KVM_VALUE || oexp != e->expire_at) &&
	    (rc = exp_del(sh, txn, oexp, &k)))
		return rc;
	if (e->kind != KVM_VALUE)
		return found ? mdb_cursor_del(cur, 0) : 0;
	v.mv_size = val_hdr_len(e->expire_at) + e->vlen;
	if ((rc = mdb_cursor_put(cur, &k, &v, MDB_RESERVE)))
		return rc;
	val_hdr_put(v.mv_data, e->expire_at, e->type);
	memcpy((uint8_t *)v.mv_data + val_hdr_len(e->expire_at), e->val,
	       e->vlen);
	if (indexed && e->expire_at && (!found || oexp != e->expire_at)) {
		uint8_t b[8];
		MDB_val ek = {8, b};

		be64_put(b, e->expire_at);
		rc = mdb_put(txn, sh->exp, &ek, &k, MDB_NODUPDATA);
		if (rc == MDB_KEYEXIST)
			rc = 0;
	}
	return rc;
}

/* Entries and key and value bytes one write transaction of a checkpoint
 * applies at most: about a dirty page per entry for random keys (the leaf
 * it lands in; branch pages are shared), a page per 4 KiB of values, so
 * LMDB's kept page buffers stay near 4096 pages (16 MiB) a shard instead
 * of a memtable's worth.  KVD_CKPT_TXN_ENTRIES in the environment sets the
 * entry bound (tests make it tiny to watch a checkpoint part-way). */
#define TXN_ENTRIES 4096
#define TXN_BYTES (16u << 20)
static uint64_t txn_entries = TXN_ENTRIES;

/* Where a checkpoint of m stands: after a failed transaction it goes on
 * from the first key not committed. */
struct ckpt_pos {
	const struct kvm *m;
	const uint8_t *key; /* the next key to apply (in m's arena) */
	uint32_t klen;
	int started;	   /* a transaction committed; the marker stored */
	int resolved;	   /* m's plain PUTs resolved: several txns allowed */
	uint64_t applied;  /* entries committed */
	uint64_t released; /* of the job's bytes, taken off pend_bytes */
};

/* The marker of a checkpoint part-way: its LSN and LMDB's entries before
 * its first transaction (see the head of this file). */
#define BASE_KEY "ckpt_base"

int kvd_shard_ckpt_base(struct shard *sh, MDB_txn *txn, uint64_t upto,
			int64_t *entries)
{
	MDB_val k = {sizeof(BASE_KEY) - 1, BASE_KEY}, v;
	uint64_t b[2];

	if (mdb_get(txn, sh->meta, &k, &v) || v.mv_size != sizeof(b))
		return 0;
	memcpy(b, v.mv_data, sizeof(b));
	if (b[0] != upto)
		return 0;
	*entries = (int64_t)b[1];
	return 1;
}

int kvd_shard_ckpt_base_clear(struct shard *sh, MDB_txn *txn)
{
	MDB_val k = {sizeof(BASE_KEY) - 1, BASE_KEY};
	int rc = mdb_del(txn, sh->meta, &k, NULL);

	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The transaction's end: more to come (store the marker once), or the
 * last one (the checkpoint LSN, the marker gone). */
static int apply_end(struct shard *sh, MDB_txn *txn, struct ckpt_pos *pos,
		     int more, uint64_t upto, uint64_t base)
{
	MDB_val mk = {8, "ckpt_lsn"}, mv = {8, &upto};
	MDB_val bk = {sizeof(BASE_KEY) - 1, BASE_KEY};
	uint64_t b[2] = {upto, base};
	MDB_val bv = {sizeof(b), b};

	if (more)
		return pos->started ? 0 : mdb_put(txn, sh->meta, &bk, &bv, 0);
	if (pos->started) {
		int rc = kvd_shard_ckpt_base_clear(sh, txn);

		if (rc)
			return rc;
	}
	return mdb_put(txn, sh->meta, &mk, &mv, 0);
}

/* One transaction of m's checkpoint, from pos on, committed (fully
 * synced); *done when it was the last.  0 or an LMDB or errno code; *what
 * names the step that failed.  pos moves only once the commit succeeded. */
static int apply(struct shard *sh, struct kvm *m, uint64_t upto,
		 struct ckpt_pos *pos, int *done, const char **what)
{
	uint64_t max = pos->resolved ? txn_entries : UINT64_MAX, n = 0;
	uint64_t max_bytes = pos->resolved ? TXN_BYTES : UINT64_MAX, bytes = 0;
	struct kvm_iter it;
	struct kvm_entry e;
	MDB_stat ms = {0};
	MDB_txn *txn;
	/* on "kv", then "kx" (keyspace 0's ikeys come first); a write txn's
	 * cursors close with it */
	MDB_cursor *cur = NULL, *xcur = NULL;
	const uint8_t *next = NULL;
	uint32_t nlen = 0;
	int rc, ok;

	kvm_iter_init(&it, m); /* before any goto fail, which releases it */
	*what = "begin";
	if ((rc = mdb_txn_begin(sh->env, NULL, 0, &txn)))
		return rc;
	*what = "write";
	if (!pos->started && (rc = mdb_stat(txn, sh->kv, &ms)))
		goto fail;
	/* FLUSHALL: everything below the memtable goes first. */
	if (!pos->started && kvm_flush_lsn(m) &&
	    ((rc = mdb_drop(txn, sh->kv, 0)) ||
	     (rc = mdb_drop(txn, sh->kx, 0)) ||
	     (rc = mdb_drop(txn, sh->exp, 0))))
		goto fail;
	if ((rc = mdb_cursor_open(txn, sh->kv, &cur)) ||
	    (rc = mdb_cursor_open(txn, sh->kx, &xcur)))
		goto fail;
	for (ok = kvm_iter_seek(&it, pos->key, pos->klen); ok;
	     ok = kvm_iter_next(&it)) {
		if (n >= max || bytes >= max_bytes)
			break;
		kvm_iter_entry(&it, &e);
		if ((rc = apply_one(sh, txn, e.key[0] ? xcur : cur, &e)))
			goto fail;
		n++;
		bytes += e.klen + e.vlen;
	}
	/* The key is in m's arena: it outlives the iterator.  pos takes it
	 * only after the commit, so that a failed one is retried whole. */
	if (ok)
		next = kvm_iter_key(&it, &nlen);
	kvm_iter_fini(&it);
	if ((rc = apply_end(sh, txn, pos, ok, upto,
			    pos->started ? 0 : ms.ms_entries)))
		goto fail;
	*what = "commit";
	if ((rc = mdb_txn_commit(txn)))
		return rc;
	pos->started = 1;
	pos->applied += n;
	pos->key = next;
	pos->klen = nlen;
	*done = !ok;
	return 0;
fail:
	kvm_iter_fini(&it);
	mdb_txn_abort(txn);
	return rc;
}

/* Resolve m's plain PUTs against LMDB as it is before m's first
 * transaction (kvd_shard_entries resolves the frozen memtable, m, with a
 * fresh snapshot); 0, or -1 and m is applied in one transaction. */
static int resolve_frozen(struct shard *sh, struct kvd_reader *rd)
{
	struct shard_view v;
	int rc;

	if (!rd)
		return -1;
	kvd_reader_reset(rd);
	rc = kvd_shard_entries(rd, sh->idx, &v);
	kvd_reader_reset(rd);
	return rc;
}

/* Take the committed part of the job's bytes off pend_bytes, so that the
 * room checks (shard_write.c) do not count it both there and in LMDB. */
static void release_part(struct shard *sh, struct ckpt_pos *pos, uint64_t bytes,
			 uint64_t keys)
{
	uint64_t part = keys ? (uint64_t)((double)bytes * (double)pos->applied /
					  (double)keys)
			     : 0;

	if (part > bytes)
		part = bytes;
	if (part > pos->released) {
		atomic_fetch_sub(&sh->pend_bytes, part - pos->released);
		pos->released = part;
	}
}

/* 1 when LMDB refuses every transaction on sh's environment: after a
 * failed write of a meta page it sets MDB_FATAL_ERROR, and from then on
 * every mdb_txn_begin, read-only ones too, answers MDB_PANIC until the
 * environment is closed (a restart, for kvd).  An aborted commit whose
 * data pages failed leaves the environment usable. */
static int env_panicked(struct shard *sh, int rc)
{
	MDB_txn *t;

	if (rc == MDB_PANIC)
		return 1;
	if ((rc = mdb_txn_begin(sh->env, NULL, MDB_RDONLY, &t)) == 0)
		mdb_txn_abort(t);
	return rc == MDB_PANIC;
}

/* A failed checkpoint: KV_MAP_FULL, KV_DISK_FULL or KV_INTERNAL (out of
 * memory), retried: nothing of an aborted commit is referenced on disk;
 * or KV_SHARD_FAILED, always when LMDB panicked (a retry cannot begin). */
static int ckpt_status(struct shard *sh, int rc, const char *what, int panic)
{
	if (panic)
		return KV_SHARD_FAILED;
	if (rc == MDB_MAP_FULL)
		return KV_MAP_FULL;
	if (rc == ENOMEM)
		return KV_INTERNAL;
	if (rc == ENOSPC || (rc == EIO && !strcmp(what, "commit") &&
			     kvd_shard_fs_room(sh->path) < FULL_MARGIN))
		return KV_DISK_FULL;
	return KV_SHARD_FAILED;
}

/* Why a checkpoint failed, as the log says it: a full disk by name (LMDB
 * reports a write the full disk cut short as EIO). */
static const char *ckpt_why(struct shard *sh, int rc, int status, char *buf,
			    size_t len)
{
	if (status != KV_DISK_FULL)
		return mdb_strerror(rc);
	snprintf(buf, len, "disk full (%s; %llu MiB left on the filesystem)",
		 rc == ENOSPC ? "no space left on the device"
			      : "a write of LMDB's was cut short",
		 (unsigned long long)(kvd_shard_fs_room(sh->path) >> 20));
	return buf;
}

/* Log a failed checkpoint: one for room is retried (every second, and
 * when a writer needs it), so its line goes through the shard's limiter;
 * one that fails the shard is logged at once. */
static void ckpt_failed(struct shard *sh, int rc, const char *what, int status,
			int panic)
{
	char buf[160];
	const char *why = ckpt_why(sh, rc, status, buf, sizeof(buf));

	if (status != KV_SHARD_FAILED) {
		sh->fails++;
		kvd_log_ratelimited(&sh->fail_log, KVD_LOG_ERROR,
				    "%s: checkpoint %s failed: %s; retried "
				    "every second and when a writer needs it "
				    "(this line at most once a minute); writes "
				    "but deletes wait or are refused meanwhile",
				    sh->path, what, why);
		return;
	}
	log_error("%s: checkpoint %s failed: %s; %s", sh->path, what, why,
		  panic ? "this shard accepts no more writes until "
			  "restart, and LMDB refuses its store "
			  "(MDB_PANIC): reads of keys not in a memtable "
			  "fail until restart (the journal keeps every "
			  "acknowledged write)"
			: "this shard accepts no more writes until "
			  "restart (reads go on; the journal keeps "
			  "every acknowledged write)");
}

/* Apply, publish, retire one frozen memtable; 0 or a KV_* code.  pos
 * carries a failed attempt's progress to the next one. */
static int checkpoint(struct shard *sh, struct kvd_reader *rd, struct kvm *m,
		      uint64_t upto, uint64_t bytes, struct ckpt_pos *pos)
{
	struct kvd_store *st = sh->st;
	uint64_t t0 = kvd_mono_ns(), ns, keys;
	struct kvm_count c;
	const char *what;
	int rc = 0, done = 0;

	if (pos->m != m) {
		memset(pos, 0, sizeof(*pos));
		pos->m = m;
	}
	if (!pos->started)
		pos->resolved = resolve_frozen(sh, rd) == 0;
	kvm_count(m, &c);
	keys = c.keys;
	while (!done && !(rc = apply(sh, m, upto, pos, &done, &what)))
		release_part(sh, pos, bytes, keys);
	if (rc) {
		int panic = env_panicked(sh, rc);
		int status = ckpt_status(sh, rc, what, panic);

		ckpt_failed(sh, rc, what, status, panic);
		return status;
	}
	if (sh->fails)
		log_info("%s: checkpoint done after %llu attempt(s) that "
			 "failed for room",
			 sh->path, (unsigned long long)sh->fails);
	sh->fails = 0;
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
	    !sh->job && !sh->bulk && !sh->stop) {
		pthread_mutex_unlock(&sh->mu);
		kvd_bulk_idle(sh);
		resolve(sh, rd);
		pthread_mutex_lock(&sh->mu);
	}
}

/* Under mu: the bulk merge handed over, after the memtable frozen before
 * it (a failed shard fails it). */
static void run_bulk(struct shard *sh)
{
	struct kvd_bulk_job *j = sh->bulk;

	pthread_mutex_unlock(&sh->mu);
	if (atomic_load(&sh->failed))
		j->op->status = KV_SHARD_FAILED;
	else
		kvd_bulk_run(sh, j);
	pthread_mutex_lock(&sh->mu);
	sh->bulk = NULL; /* its writes committed */
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	j->done(j->a, j->b);
	free(j);
	pthread_mutex_lock(&sh->mu);
}

static void *ckpt_main(void *arg)
{
	struct shard *sh = arg;
	struct kvd_reader *rd = kvd_reader_new(sh->st); /* NULL: no resolving */
	struct ckpt_pos pos = {0};

	pthread_mutex_lock(&sh->mu);
	for (;;) {
		struct kvm *m;
		uint64_t upto, bytes;
		int rc;

		while (!sh->job && !sh->bulk && !sh->stop)
			idle_wait(sh, rd);
		if (!sh->job && sh->bulk) {
			run_bulk(sh);
			continue;
		}
		if (!sh->job || atomic_load(&sh->failed))
			break;
		m = sh->job;
		upto = sh->frozen_upto;
		bytes = sh->frozen_bytes;
		pthread_mutex_unlock(&sh->mu);
		rc = checkpoint(sh, rd, m, upto, bytes, &pos);
		pthread_mutex_lock(&sh->mu);
		sh->attempts++;
		sh->tried_ns = kvd_mono_ns();
		if (rc == 0) {
			atomic_fetch_sub(&sh->pend_bytes, bytes - pos.released);
			pos.m = NULL;
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
	if (sh->bulk) /* none is left waiting */
		run_bulk(sh);
	kvd_bulk_idle(sh);
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	if (rd)
		kvd_reader_free(rd);
	return NULL;
}

int kvd_ckpt_start(struct shard *sh)
{
	const char *e = getenv("KVD_CKPT_TXN_ENTRIES");
	char name[32];

	if (e && strtoull(e, NULL, 10) > 0)
		txn_entries = strtoull(e, NULL, 10);
	if (pthread_create(&sh->ckpt_thread, NULL, ckpt_main, sh))
		return -1;
	snprintf(name, sizeof(name), "kvd-ckpt/%u", sh->idx);
	name[15] = '\0'; /* the kernel keeps 15 bytes */
	pthread_setname_np(sh->ckpt_thread, name); /* for top -H; may fail */
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

/* Under mu: wait until KICK_MS after the last checkpoint attempt ended,
 * or until the job is gone. */
static void rest_wait(struct shard *sh)
{
	uint64_t now = kvd_mono_ns(),
		 until = sh->tried_ns + KICK_MS * 1000000ull;
	struct timespec ts;

	if (now >= until)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)(until - now);
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	while (sh->job && kvd_mono_ns() < until &&
	       pthread_cond_timedwait(&sh->cv, &sh->mu, &ts) != ETIMEDOUT)
		;
}

/* Wait, holding no snapshot (the checkpointer may be waiting for this
 * reader), until no memtable is being checkpointed.  *waited says whether
 * it had to. */
static int wait_idle(struct shard *sh, struct kvd_reader *rd, int *waited)
{
	int rc = 0, kicked = 0;

	kvd_reader_reset(rd);
	*waited = 0;
	pthread_mutex_lock(&sh->mu);
	while ((sh->job || sh->bulk) && !(rc = atomic_load(&sh->failed))) {
		uint64_t tries = sh->attempts;

		if ((rc = atomic_load(&sh->ckpt_err))) {
			/* The checkpoint failed for room: have it tried once
			 * more (room may be back), and answer with what that
			 * attempt says; KICK_MS after the last one at the
			 * earliest (every batch of a full store asks). */
			if (kicked)
				break;
			kicked = 1;
			rest_wait(sh);
			tries = sh->attempts;
			if (!sh->job || atomic_load(&sh->failed))
				continue;
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
	if (!sh->job && !sh->bulk)
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
	if (!(n = kvd_memtable_new(sh)))
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

/* A bulk merge handed to the checkpointer (shard_bulk.c runs it there). */
int kvd_shard_bulk(struct kvd_store *st, unsigned i, struct kvd_wop *op,
		   void (*done)(void *a, void *b), void *a, void *b)
{
	struct shard *sh = &st->sh[i];
	struct kvd_wtxn *t = &sh->wt;
	struct kvd_bulk_job *j;
	int rc;

	if (!kvd_bulk_valid(op))
		return KV_BAD_ARGS;
	if (!t->rd && !(t->rd = kvd_reader_new(st)))
		return KV_INTERNAL;
	/* what the committer applied so far goes to the checkpointer first
	 * (a checkpoint under way is waited for, as a freeze waits) */
	if ((rc = kvd_ckpt_wait(sh, t->rd)) ||
	    (sh->active_ms && (rc = kvd_ckpt_freeze(sh, t->rd))))
		return rc;
	if (!(j = malloc(sizeof(*j))))
		return KV_INTERNAL;
	*j = (struct kvd_bulk_job){op, done, a, b};
	pthread_mutex_lock(&sh->mu);
	sh->bulk = j; /* before any later batch of this writer begins */
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return KV_OK;
}
