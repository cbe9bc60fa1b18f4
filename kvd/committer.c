/* committer.c - shard writer threads, group commit and the async flusher.
 *
 * Queue: io threads push onto a Treiber stack with one CAS; the committer
 * takes the whole stack with one exchange and reverses it, so requests from
 * one connection keep their order.  The pusher that finds the stack empty
 * writes the eventfd; a committer that finds it empty sleeps in poll() on
 * it, with a timeout for its timers (expiry reaping, stale reader checks).
 * The eventfd counter is sticky, so a wake-up cannot be lost between the
 * committer's last look and its sleep.
 *
 * Sync durability with one fsync per commit: an LMDB commit writes its data
 * pages, syncs them, then writes its meta page, and (by default) syncs that
 * too.  kvd opens environments with MDB_NOMETASYNC, so a commit costs one
 * sync; its meta page becomes durable with the *next* sync, which the next
 * commit does before writing its own meta page.  So a batch's writers are
 * answered when the following commit returns, or, if no work follows, after
 * an explicit mdb_env_sync.  Each write still waits for two syncs, as
 * before, but under load the committer pays one per batch instead of two.
 * A power loss can lose only a commit whose writers were not yet answered.
 */
#include "committer.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kv_status.h"
#include "log.h"
#include "loop.h"

/* One transaction carries at most this much, so that a flood of writes
 * cannot build a transaction LMDB refuses (MDB_TXN_FULL) or delay the first
 * writer's reply without bound. */
#define BATCH_MAX_OPS 4096
#define BATCH_MAX_BYTES (16u << 20)
#define REAP_PER_TXN 1000
#define READER_CHECK_MS 10000

static pthread_t flusher;
static int flusher_efd = -1;

/* Backups pause every committer between two batches, so that read
 * snapshots opened meanwhile form one cut across all shards. */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cv = PTHREAD_COND_INITIALIZER;
static atomic_int pause_req;
static unsigned paused;

static void wake(struct kvd_committer *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error("shard %u: cannot wake committer: %s", c->shard,
			  strerror(errno));
}

void kvd_committer_submit(struct kvd_server *srv, struct kvd_wreq *w)
{
	struct kvd_committer *c = &srv->com[w->shard];
	struct kvd_wreq *old =
	    atomic_load_explicit(&c->queue, memory_order_relaxed);

	do
		w->next = old;
	while (!atomic_compare_exchange_weak_explicit(
	    &c->queue, &old, w, memory_order_release, memory_order_relaxed));
	if (!old)
		wake(c);
}

static struct kvd_wreq *take_all(struct kvd_committer *c)
{
	struct kvd_wreq *w =
	    atomic_exchange_explicit(&c->queue, NULL, memory_order_acquire);
	struct kvd_wreq *fifo = NULL;

	while (w) {
		struct kvd_wreq *next = w->next;

		w->next = fifo;
		fifo = w;
		w = next;
	}
	return fifo;
}

static void complete(struct kvd_wreq *w)
{
	kvd_io_complete(w->io, w);
}

static void complete_list(struct kvd_wreq *w)
{
	while (w) {
		struct kvd_wreq *next = w->next;

		complete(w);
		w = next;
	}
}

static void fail_all(struct kvd_wreq *w, struct kvd_wreq *stop, int status)
{
	while (w != stop) {
		struct kvd_wreq *next = w->next;

		free(w->op.val);
		w->op.val = NULL;
		w->op.status = status;
		w->op.result = 0;
		complete(w);
		w = next;
	}
}

static unsigned batch_bucket(uint64_t n)
{
	unsigned b = 0;

	while (b < KVD_BATCH_BUCKETS - 1 && n > (1ull << b))
		b++;
	return b;
}

/* Make the last commit's meta page durable and answer its writers.  Not
 * a retry: nothing has synced since that commit's meta page was written. */
static void flush_unacked(struct kvd_committer *c)
{
	uint64_t t0 = kvd_mono_ns();
	int rc;

	if (!c->unacked)
		return;
	rc = kvd_store_sync(c->srv->store, c->shard);
	kvd_count(&c->commit_ns, kvd_mono_ns() - t0);
	if (rc) {
		log_error("shard %u: fsync failed: %s; this shard accepts no "
			  "more writes until restart (a failed fsync is never "
			  "retried)",
			  c->shard, strerror(rc));
		atomic_store(&c->failed, 1);
		fail_all(c->unacked, NULL, KV_SHARD_FAILED);
	} else {
		complete_list(c->unacked);
	}
	c->unacked = NULL;
}

/* Apply the requests of list first (NULL-terminated) in one transaction,
 * with a round of reaping if reap, and commit.  0, or the KV_* code that
 * failed the transaction (it is gone either way).  *full: a write was
 * refused because only the map's room for deletes is left. */
static int commit_list(struct kvd_committer *c, struct kvd_wreq *first,
		       uint64_t now, int reap, int *full)
{
	struct kvd_server *srv = c->srv;
	struct kvd_wtxn *t;
	uint64_t t0;
	int rc;

	if ((rc = kvd_shard_begin(srv->store, c->shard, &t)))
		return rc;
	for (struct kvd_wreq *w = first; w; w = w->next) {
		if ((rc = kvd_shard_apply(t, &w->op, now,
					  srv->cfg->max_value))) {
			kvd_shard_abort(t);
			return rc;
		}
		*full |= w->op.status == KV_MAP_FULL;
	}
	if (reap) {
		if ((rc = kvd_shard_reap(t, now, REAP_PER_TXN)) < 0) {
			kvd_shard_abort(t);
			return -rc;
		}
		kvd_count(&c->reaped, (uint64_t)rc);
	}
	t0 = kvd_mono_ns();
	rc = kvd_shard_commit(t);
	t0 = kvd_mono_ns() - t0;
	kvd_count(&c->commit_ns, t0);
	if (!rc)
		kvd_count(&c->commit_hist[kvd_lat_bucket(t0)], 1);
	return rc;
}

/* A transaction that failed with rc may succeed without some of its
 * requests: one that does not fit the map or the disk, or that ran out of
 * memory, must fail alone, not take its batch with it. */
static int splittable(int rc)
{
	return rc == KV_MAP_FULL || rc == KV_DISK_FULL || rc == KV_INTERNAL;
}

/* Commit the n requests of list first, in order; when that fails in a way
 * a smaller transaction may not, commit each half on its own (bisection:
 * the requests that cannot be applied end up alone and fail alone). */
static void run_list(struct kvd_committer *c, struct kvd_wreq *first,
		     uint64_t n, uint64_t now, int reap)
{
	struct kvd_wreq *w, *second;
	int rc, full = 0;

	if (atomic_load(&c->failed)) {
		fail_all(first, NULL, KV_SHARD_FAILED);
		return;
	}
	rc = commit_list(c, first, now, reap, &full);
	if (rc == 0) {
		/* Writes refused for a full map count as a failed batch,
		 * as when the whole transaction was refused: that is what
		 * operators watch. */
		if (full)
			kvd_count(&c->failures, 1);
		kvd_count(&c->commits, 1);
		kvd_count(&c->writes, n);
		kvd_count(&c->batch_hist[batch_bucket(n)], 1);
		if (n > kvd_read(&c->max_batch))
			atomic_store_explicit(&c->max_batch, n,
					      memory_order_relaxed);
		if (c->srv->cfg->durability == KVD_DUR_SYNC) {
			/* This commit's data sync made the previous meta
			 * page durable: its writers can be answered.  This
			 * list waits for the next sync (see the top). */
			complete_list(c->unacked);
			c->unacked = first;
		} else {
			complete_list(first);
		}
		return;
	}
	kvd_count(&c->failures, 1);
	if (rc == KV_SHARD_FAILED) {
		/* The sync that failed may have been the one that was to make
		 * the previous batch durable, and a failed fsync is never
		 * retried: those writers are not answered OK either. */
		atomic_store(&c->failed, 1);
		fail_all(c->unacked, NULL, KV_SHARD_FAILED);
		c->unacked = NULL;
		fail_all(first, NULL, rc);
		return;
	}
	if (n > 1 && splittable(rc)) {
		w = first;
		for (uint64_t i = 1; i < n / 2; i++)
			w = w->next;
		second = w->next;
		w->next = NULL;
		run_list(c, first, n / 2, now, 0);
		run_list(c, second, n - n / 2, now, 0);
		return;
	}
	flush_unacked(c);
	fail_all(first, NULL, rc);
}

/* Apply and commit one batch starting at w; returns the first request not
 * in it. */
static struct kvd_wreq *run_batch(struct kvd_committer *c, struct kvd_wreq *w)
{
	struct kvd_wreq *first = w, *end, *last = w;
	uint64_t now = kvd_now_ms(), n = 0;
	size_t bytes = 0;
	int reap = 0;

	for (end = w; end && n < BATCH_MAX_OPS &&
		      (n == 0 || bytes + end->op.items_len <= BATCH_MAX_BYTES);
	     end = end->next) {
		n++;
		bytes += end->op.items_len;
		last = end;
	}
	last->next = NULL; /* the batch is a list of its own from here on */
	if (now >= c->next_reap_ms) {
		c->next_reap_ms =
		    now + KVD_LIVE(c->srv->cfg->reaper_interval_ms);
		reap = 1;
	}
	run_list(c, first, n, now, reap);
	return end;
}

/* With nothing queued: reclaim expired keys in a transaction of their own. */
static void idle_reap(struct kvd_committer *c, uint64_t now)
{
	struct kvd_wtxn *t;
	int n;

	c->next_reap_ms = now + KVD_LIVE(c->srv->cfg->reaper_interval_ms);
	if (atomic_load(&c->failed) ||
	    kvd_shard_begin(c->srv->store, c->shard, &t))
		return;
	n = kvd_shard_reap(t, now, REAP_PER_TXN);
	if (n > 0) {
		int rc = kvd_shard_commit(t);

		if (rc == 0)
			kvd_count(&c->reaped, (uint64_t)n);
		else if (rc == KV_SHARD_FAILED) /* not a full map or disk */
			atomic_store(&c->failed, 1);
	} else {
		kvd_shard_abort(t); /* nothing to do: no commit, no fsync */
	}
}

/* Every READER_CHECK_MS, busy or idle: free the reader slots of dead
 * processes, which would otherwise pin old pages and fill the table. */
static void check_readers(struct kvd_committer *c, uint64_t now)
{
	int dead;

	if (now < c->next_check_ms)
		return;
	c->next_check_ms = now + READER_CHECK_MS;
	dead = kvd_store_reader_check(c->srv->store, c->shard);
	if (dead)
		log_warn("shard %u: cleared %d stale reader slot(s)", c->shard,
			 dead);
}

static void timers(struct kvd_committer *c)
{
	uint64_t now = kvd_now_ms();

	if (now >= c->next_reap_ms)
		idle_reap(c, now);
	check_readers(c, now);
}

static void wait_for_work(struct kvd_committer *c)
{
	struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
	uint64_t now = kvd_now_ms(), buf;
	int timeout = (int)(c->next_reap_ms > now ? c->next_reap_ms - now : 0);

	if (poll(&pfd, 1, timeout) > 0 && read(c->efd, &buf, sizeof(buf)) < 0) {
		/* EAGAIN: another wake-up already consumed it. */
	}
}

static void maybe_pause(void)
{
	if (!atomic_load(&pause_req))
		return;
	pthread_mutex_lock(&pause_mu);
	paused++;
	pthread_cond_broadcast(&pause_cv);
	while (atomic_load(&pause_req))
		pthread_cond_wait(&pause_cv, &pause_mu);
	paused--;
	pthread_mutex_unlock(&pause_mu);
}

void kvd_committers_pause(struct kvd_server *srv)
{
	atomic_store(&pause_req, 1);
	for (unsigned i = 0; i < srv->nshards; i++)
		wake(&srv->com[i]);
	pthread_mutex_lock(&pause_mu);
	while (paused < srv->nshards)
		pthread_cond_wait(&pause_cv, &pause_mu);
	pthread_mutex_unlock(&pause_mu);
}

void kvd_committers_resume(struct kvd_server *srv)
{
	(void)srv;
	pthread_mutex_lock(&pause_mu);
	atomic_store(&pause_req, 0);
	pthread_cond_broadcast(&pause_cv);
	pthread_mutex_unlock(&pause_mu);
}

static void *committer_main(void *arg)
{
	struct kvd_committer *c = arg;
	struct kvd_wreq *w;

	for (;;) {
		maybe_pause();
		w = take_all(c);
		if (!w && c->unacked) {
			/* Nothing to piggyback on: sync now. */
			flush_unacked(c);
			continue;
		}
		if (!w) {
			if (atomic_load(&c->stop))
				break;
			timers(c);
			wait_for_work(c);
			continue;
		}
		while (w)
			w = run_batch(c, w);
		check_readers(c, kvd_now_ms());
	}
	return NULL;
}

/* Flush every shard that has not failed.  A failed fsync ends the shard's
 * writes and is never retried, here or at stop: the kernel may have dropped
 * the dirty pages it could not write, so a later fsync that succeeds would
 * prove nothing about them (PostgreSQL's fsync lesson). */
static void flush_all(struct kvd_server *srv, const char *what)
{
	for (unsigned i = 0; srv->com && i < srv->nshards; i++) {
		struct kvd_committer *c = &srv->com[i];
		int rc;

		if (atomic_load(&c->failed))
			continue;
		if ((rc = kvd_store_sync(srv->store, i))) {
			atomic_store(&c->failed, 1);
			log_error(
			    "shard %u: %s failed: %s; writes acknowledged "
			    "since the last flush may not be on disk; "
			    "this shard accepts no more writes until "
			    "restart (a failed fsync is never retried)",
			    i, what, strerror(rc));
		}
	}
}

/* async durability: commits reach the OS at once; this thread makes them
 * durable every flush-interval-ms.  LMDB's mdb_env_sync takes no lock, so
 * the committers never wait for it. */
static void *flusher_main(void *arg)
{
	struct kvd_server *srv = arg;
	struct pollfd pfd = {.fd = flusher_efd, .events = POLLIN};

	for (;;) {
		int stop = poll(&pfd, 1,
				(int)KVD_LIVE(srv->cfg->flush_interval_ms)) > 0;

		flush_all(srv, "flush");
		if (stop)
			return NULL;
	}
}

int kvd_committers_start(struct kvd_server *srv)
{
	int rc;

	srv->com = calloc(srv->nshards, sizeof(*srv->com));
	if (!srv->com)
		return -1;
	for (unsigned i = 0; i < srv->nshards; i++) {
		struct kvd_committer *c = &srv->com[i];

		c->shard = i;
		c->srv = srv;
		c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->efd < 0) {
			log_error("cannot start committer %u: eventfd: %s", i,
				  strerror(errno));
			return -1;
		}
		/* pthread_create returns its error; it does not set errno. */
		if ((rc =
			 pthread_create(&c->thread, NULL, committer_main, c))) {
			log_error("cannot start committer %u: %s", i,
				  strerror(rc));
			return -1;
		}
	}
	if (srv->cfg->durability == KVD_DUR_ASYNC) {
		flusher_efd = eventfd(0, EFD_CLOEXEC);
		if (flusher_efd < 0) {
			log_error("cannot start the flusher: eventfd: %s",
				  strerror(errno));
			return -1;
		}
		if ((rc = pthread_create(&flusher, NULL, flusher_main, srv))) {
			log_error("cannot start the flusher: %s", strerror(rc));
			return -1;
		}
	}
	return 0;
}

void kvd_committers_stop(struct kvd_server *srv)
{
	for (unsigned i = 0; srv->com && i < srv->nshards; i++) {
		struct kvd_committer *c = &srv->com[i];
		uint64_t one = 1;

		atomic_store(&c->stop, 1);
		if (write(c->efd, &one, sizeof(one)) < 0) {
			/* it will still see stop on its next timeout */
		}
		pthread_join(c->thread, NULL);
		close(c->efd);
	}
	if (flusher_efd >= 0) {
		uint64_t one = 1;

		if (write(flusher_efd, &one, sizeof(one)) == sizeof(one))
			pthread_join(flusher, NULL);
		close(flusher_efd);
		flusher_efd = -1;
	}
	flush_all(srv, "final flush");
	free(srv->com);
	srv->com = NULL;
}
