/* committer.c - shard writer threads and group commit.
 *
 * Queue: io threads push onto a Treiber stack, one CAS per shard and loop
 * turn for all the requests of that turn (kvd_committer_flush); the committer
 * takes the whole stack with one exchange and reverses it, so requests from
 * one connection keep their order.  A committer that finds the stack
 * empty says it is going to sleep (c->sleeping), looks once more, and
 * sleeps in poll() on its eventfd, with a timeout for its timers (expiry
 * reaping, the async flush, checkpoint housekeeping, stale reader checks);
 * a pusher writes the eventfd only when it sees that flag, so a committer
 * busy with a batch (in fdatasync, say) is not woken for the next one: it
 * takes it when it is done.  The flag and the queue are stored and loaded
 * sequentially consistent on both sides, so a push is never missed; the
 * eventfd counter is sticky, so a wake-up is not lost before the poll.
 *
 * A batch is computed against the shard's layers, appended to its journal
 * as one write and, in sync mode, flushed with one fdatasync before it is
 * made visible (memtable) and answered (shard.h).  In async mode it is
 * answered once the write reached the OS, and the committer flushes the
 * journal every flush-interval-ms.  The journal and the memtable have one
 * writer at a time, whoever holds the shard's run_mu: its committer, or
 * an io thread that found the committer idle and commits its own turn's
 * writes (try_inline); an exclusive section holds them all off.  In sync
 * mode such an io thread starts the batch's flush in its own ring and
 * goes on serving; until the flush ends the batch is the shard's writer
 * (ring_busy), and whoever needs the shard next waits for that flush
 * itself (settle) rather than for the io thread: committer_ring.c.
 *
 * What is not the store's goes through the hooks given at start
 * (kvd_commit_hooks): handing a request back, replication, keyspace
 * events.  The locks below are the process's: one set of committers per
 * process.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include "store.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "committer_int.h"
#include "kv_status.h"
#include "store_log.h"
#define REAP_PER_TXN 1000
/* An io thread commits its own writes to a shard (async mode) only when
 * its turn has at most this many for it (try_inline). */
#define INLINE_MAX 16
#define READER_CHECK_MS 10000

/* ---- the hooks ---- */

static void complete(struct kvd_commit *com, struct kvd_wreq *w)
{
	com->o.hooks.complete(com->o.hooks.arg, w);
}

int kvd_cm_follower(const struct kvd_commit *com)
{
	return com->o.hooks.follower && com->o.hooks.follower(com->o.hooks.arg);
}

/* A committed batch's requests go back, through the committed hook, or
 * one by one. */
void kvd_cm_committed(struct kvd_commit *com, unsigned shard,
		      struct kvd_wreq *list)
{
	if (com->o.hooks.committed) {
		com->o.hooks.committed(com->o.hooks.arg, shard, list);
		return;
	}
	while (list) {
		struct kvd_wreq *next = list->next;

		complete(com, list);
		list = next;
	}
}

void kvd_cm_ev_applied(struct kvd_commit *com, unsigned shard,
		       const struct kvd_wop *op)
{
	if (com->o.hooks.applied)
		com->o.hooks.applied(com->o.hooks.arg, shard, op);
}

static void ev_reaped(struct kvd_commit *com, unsigned shard,
		      const struct kvd_wtxn *t, size_t from)
{
	if (com->o.hooks.reaped)
		com->o.hooks.reaped(com->o.hooks.arg, shard, t, from);
}

void kvd_cm_ev_publish(struct kvd_commit *com, const uint8_t *failed)
{
	if (com->o.hooks.publish)
		com->o.hooks.publish(com->o.hooks.arg, failed);
}

void kvd_cm_ev_drop(struct kvd_commit *com)
{
	if (com->o.hooks.drop)
		com->o.hooks.drop(com->o.hooks.arg);
}

static void ev_forget(struct kvd_commit *com, unsigned shard)
{
	if (com->o.hooks.forget)
		com->o.hooks.forget(com->o.hooks.arg, shard);
}

/* A setting read live: its owner may store a new value at any time. */
static unsigned live(const unsigned *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* Backups pause every committer between two batches, each having
 * checkpointed everything it acknowledged, so that LMDB snapshots opened
 * meanwhile form one cut across all shards that holds every acknowledged
 * write. */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cv = PTHREAD_COND_INITIALIZER;
static atomic_int pause_req;
static unsigned paused;
static int pause_rc; /* under pause_mu: a checkpoint that failed */

int kvd_cm_pausing(void)
{
	return atomic_load(&pause_req);
}

/* Transactions (EXEC, WATCH): committers hold this shared around each
 * round of batches and housekeeping; an io thread holding it exclusively
 * knows no batch is under way on any shard, and may then apply and commit
 * writes itself (kvd_excl_*).  Writers are preferred, so that a steady
 * stream of batches cannot starve an EXEC. */
static pthread_rwlock_t txn_lock;
/* Odd while an exclusive section runs: a reader that saw it move knows
 * its reads may straddle one (kvd_excl_seq). */
static atomic_uint excl_seq;
static pthread_once_t txn_once = PTHREAD_ONCE_INIT;

/* The io thread in an EXEC: its writes are captured here instead of
 * being queued (kvd_committer_submit). */
static __thread struct kvd_wreq **cap_tail;
static __thread struct kvd_excl *excl_cur; /* this thread's section */

/* For top -H and ps -L; a name that does not fit is simply not set. */
static void name_thread(pthread_t t, const char *what, unsigned i)
{
	char name[32];

	snprintf(name, sizeof(name), "%s/%u", what, i);
	name[15] = '\0'; /* the kernel keeps 15 bytes */
	pthread_setname_np(t, name);
}

void kvd_cm_wake(struct kvd_committer *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error("shard %u: cannot wake committer: %s", c->shard,
			  strerror(errno));
}

void kvd_cm_spare_nudge(struct kvd_committer *c)
{
	if (kvd_shard_spare_wanted(c->com->o.store, c->shard))
		kvd_cm_wake(c);
}

/* An io thread's requests of one loop turn, per shard, newest first (the
 * order of the committer's stack): pushed with one CAS and at most one
 * wake-up per shard at the end of the turn (kvd_committer_flush), instead
 * of one CAS per request and a wake-up whenever the committer had just
 * emptied its queue.  A committer woken once finds the turn's writes all
 * there: one batch, one journal write. */
static __thread struct kvd_wreq *turn_head[KVD_MAX_SHARDS];
static __thread struct kvd_wreq *turn_tail[KVD_MAX_SHARDS];
static __thread uint16_t turn_shards[KVD_MAX_SHARDS];
static __thread unsigned turn_n;

void kvd_committer_submit(struct kvd_commit *com, struct kvd_wreq *w)
{
	unsigned s = w->shard;

	(void)com;
	if (cap_tail) {
		w->next = NULL;
		*cap_tail = w;
		cap_tail = &w->next;
		return;
	}
	if (!turn_head[s]) {
		turn_tail[s] = w;
		turn_shards[turn_n++] = (uint16_t)s;
	}
	w->next = turn_head[s];
	turn_head[s] = w;
}

/* A list in the other order: the queue is newest first, a batch oldest
 * first. */
struct kvd_wreq *kvd_cm_reverse(struct kvd_wreq *w)
{
	struct kvd_wreq *r = NULL;

	while (w) {
		struct kvd_wreq *next = w->next;

		w->next = r;
		r = w;
		w = next;
	}
	return r;
}

/* Push a list (newest first, head to tail) onto c's queue. */
static void push(struct kvd_committer *c, struct kvd_wreq *head,
		 struct kvd_wreq *tail)
{
	struct kvd_wreq *old =
	    atomic_load_explicit(&c->queue, memory_order_relaxed);

	/* seq_cst, against wait_for_work's: either this sees the committer
	 * asleep and wakes it, or the committer sees the queue filled and
	 * does not sleep.  A committer that is busy takes the queue after
	 * its batch: no wake-up needed. */
	do
		tail->next = old;
	while (!atomic_compare_exchange_weak_explicit(
	    &c->queue, &old, head, memory_order_seq_cst, memory_order_relaxed));
	/* A ring batch in flight: whoever ends it sees the queue (seq_cst,
	 * against ring_done's) and has it taken; the committer would only
	 * wait for that flush. */
	if (atomic_load(&c->sleeping) && !atomic_load(&c->ring_busy))
		kvd_cm_wake(c);
}

static struct kvd_wreq *run_batch(struct kvd_committer *c, struct kvd_wreq *w,
				  int nowait);

/* The writer role for an io thread (try_inline, try_ring): the shard's
 * run_mu, then txn_lock shared, both without waiting; 1 when taken. */
int kvd_cm_role_try(struct kvd_committer *c)
{
	if (pthread_mutex_trylock(&c->run_mu))
		return 0;
	if (pthread_rwlock_tryrdlock(&txn_lock)) {
		pthread_mutex_unlock(&c->run_mu);
		return 0;
	}
	return 1;
}

void kvd_cm_role_drop(struct kvd_committer *c)
{
	pthread_rwlock_unlock(&txn_lock);
	pthread_mutex_unlock(&c->run_mu);
}

/* Async mode: commit an io thread's writes of one turn (newest first) on
 * that thread when the shard's committer is idle, so that the request is
 * answered in the turn that read it, without two thread hops.  The
 * committer holds run_mu whenever it works, which hands the writer role
 * (memtable and journal) over with a happens-before edge; an exclusive
 * section or a pause holds the committers off through txn_lock and
 * run_mu, and so this too.  Anything that may wait (a freeze, a
 * checkpoint for room) stays with the committer: an io thread that finds
 * one due, the lock taken or others' writes queued hands its writes over
 * as before.  Sync mode: try_ring.  1 when they were taken. */
static int try_inline(struct kvd_committer *c, struct kvd_wreq *head)
{
	struct kvd_wreq *fifo, *w = head;
	unsigned n = 0;

	if (!c->com->o.async)
		return kvd_cm_try_ring(c, head);
	/* Only a committer asleep is idle: one awake would block on run_mu
	 * behind this thread instead of taking its next batch. */
	if (kvd_cm_follower(c->com) ||
	    !atomic_load_explicit(&c->sleeping, memory_order_relaxed) ||
	    atomic_load_explicit(&c->queue, memory_order_relaxed) ||
	    atomic_load(&pause_req) || atomic_load(&c->failed))
		return 0;
	/* A long list goes to the committer: it then runs beside this
	 * thread, which goes back to its sockets (bench/HISTORY.md, third
	 * round); so does any request run alone (kvd_cm_is_copy: a SAVE's
	 * checkpoint, a bulk merge's hand-over, which wait for the disk or
	 * the checkpointer). */
	while (w && n <= INLINE_MAX) {
		if (kvd_cm_is_copy(w))
			return 0;
		w = w->next;
		n++;
	}
	if (n > INLINE_MAX)
		return 0;
	if (!kvd_cm_role_try(c))
		return 0;
	/* Under the lock: what is queued now came before us. */
	if (atomic_load(&c->queue) || atomic_load(&pause_req)) {
		kvd_cm_role_drop(c);
		return 0;
	}
	for (fifo = kvd_cm_reverse(head); fifo;)
		fifo = run_batch(c, fifo, 1);
	kvd_cm_spare_nudge(c);
	kvd_cm_role_drop(c);
	return 1;
}

void kvd_committer_flush(struct kvd_commit *com)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < turn_n; i++) {
		unsigned s = turn_shards[i];
		struct kvd_committer *c = &com->c[s];
		struct kvd_wreq *head = turn_head[s], *tail = turn_tail[s];

		/* This thread's own flush of that shard is in flight: its
		 * completion wakes this thread, whose next turn commits
		 * these as the next batch (a committer would first wait for
		 * that flush anyway). */
		if (kvd_cm_ring_mine(c)) {
			turn_shards[kept++] = (uint16_t)s;
			continue;
		}
		kvd_cm_ring_untake(s); /* try_ring takes the queue with these */
		kvd_cm_ring_left(turn_n - i - 1);
		turn_head[s] = turn_tail[s] = NULL;
		if (!try_inline(c, head))
			push(c, head, tail);
	}
	turn_n = kept;
	kvd_cm_ring_take_queues(com);
}

struct kvd_wreq *kvd_cm_take_all(struct kvd_committer *c)
{
	return kvd_cm_reverse(
	    atomic_exchange_explicit(&c->queue, NULL, memory_order_acquire));
}

/* The committer's next requests, oldest first: what an io thread handed
 * back (ring_batch), then the queue. */
static struct kvd_wreq *take_work(struct kvd_committer *c)
{
	struct kvd_wreq *h = atomic_exchange(&c->handoff, NULL), *w = h;

	if (!h)
		return kvd_cm_take_all(c);
	while (w->next)
		w = w->next;
	w->next = kvd_cm_take_all(c);
	return h;
}

/* Hand back every request of list w, failed with status. */
void kvd_cm_fail_all(struct kvd_commit *com, struct kvd_wreq *w, int status)
{
	while (w) {
		struct kvd_wreq *next = w->next;

		free(w->op.val);
		w->op.val = NULL;
		w->op.status = status;
		w->op.result = 0;
		complete(com, w);
		w = next;
	}
}

unsigned kvd_cm_batch_bucket(uint64_t n)
{
	unsigned b = 0;

	while (b < KVD_BATCH_BUCKETS - 1 && n > (1ull << b))
		b++;
	return b;
}

/* Only deletes (DEL, GETDEL, FLUSHALL): they may go where other writes may
 * not, on a full map or disk (shard.h, kvd_shard_begin_deletes). */
static int deletes_only(const struct kvd_wreq *w)
{
	for (; w; w = w->next)
		if (w->op.kind != KVD_W_DEL && w->op.kind != KVD_W_GETDEL &&
		    w->op.kind != KVD_W_FLUSH)
			return 0;
	return 1;
}

/* Apply the requests of list first (NULL-terminated) as one batch, with a
 * round of reaping if reap, and commit it to the journal.  0, or the KV_*
 * code that failed the batch (it is gone either way).  *full: a write was
 * refused because only the map's room for deletes is left.  *begun: the
 * batch began (a failure before is no request's doing). */
static int commit_list(struct kvd_committer *c, struct kvd_wreq *first,
		       uint64_t now, int reap, int *full, int nowait,
		       int *begun)
{
	struct kvd_commit *com = c->com;
	struct kvd_wtxn *t;
	uint64_t t0;
	int rc;

	rc = nowait ? kvd_shard_begin_nowait(com->o.store, c->shard, &t)
	     : deletes_only(first)
		 ? kvd_shard_begin_deletes(com->o.store, c->shard, &t)
		 : kvd_shard_begin(com->o.store, c->shard, &t);
	if (rc)
		return rc;
	*begun = 1;
	for (struct kvd_wreq *w = first; w; w = w->next) {
		if ((rc = kvd_shard_apply(t, &w->op, now, com->o.max_value))) {
			kvd_shard_abort(t);
			return rc;
		}
		*full |= w->op.status == KV_MAP_FULL;
	}
	if (reap) {
		size_t mark = kvd_shard_batch_len(t);

		if ((rc = kvd_shard_reap(t, now, REAP_PER_TXN)) < 0) {
			kvd_shard_abort(t);
			return -rc;
		}
		kvd_count(&c->st.reaped, (uint64_t)rc);
		ev_reaped(com, c->shard, t, mark);
	}
	t0 = kvd_mono_ns();
	/* A replica flushes what it took from its primary before asking
	 * for more: its next request acknowledges it as on disk (WAIT). */
	rc = kvd_shard_commit(t, !com->o.async || first->op.kind == KVD_W_REPL);
	t0 = kvd_mono_ns() - t0;
	kvd_count(&c->st.commit_ns, t0);
	if (!rc)
		kvd_count(&c->st.commit_hist[kvd_lat_bucket(t0)], 1);
	return rc;
}

/* A batch that failed with rc may succeed without some of its requests:
 * one that does not fit the map, the disk or a journal segment, or that
 * ran out of memory, must fail alone, not take its batch with it. */
static int splittable(int rc)
{
	return rc == KV_MAP_FULL || rc == KV_DISK_FULL || rc == KV_INTERNAL ||
	       rc == KV_VALUE_TOO_LARGE;
}

/* Requests an io thread could not commit without waiting (a freeze or a
 * checkpoint due): its committer takes them, in order. */
static void requeue(struct kvd_committer *c, struct kvd_wreq *fifo)
{
	struct kvd_wreq *tail = fifo;

	push(c, kvd_cm_reverse(fifo), tail);
}

/* Commit the n requests of list first, in order; when that fails in a way
 * a smaller transaction may not, commit each half on its own (bisection:
 * the requests that cannot be applied end up alone and fail alone).
 * nowait: the caller is an io thread, which must not wait (requeue). */
static void run_list(struct kvd_committer *c, struct kvd_wreq *first,
		     uint64_t n, uint64_t now, int reap, int nowait)
{
	struct kvd_wreq *w, *second;
	int rc, full = 0, begun = 0;

	if (atomic_load(&c->failed)) {
		kvd_cm_fail_all(c->com, first, KV_SHARD_FAILED);
		return;
	}
	rc = commit_list(c, first, now, reap, &full, nowait, &begun);
	if (rc)
		kvd_cm_ev_drop(c->com); /* what it reaped is reaped again */
	if (rc == -EAGAIN) {
		requeue(c, first);
		return;
	}
	if (rc == 0) {
		/* Committed and visible: its keyspace events, before the
		 * requests go back (and are freed). */
		for (w = first; w; w = w->next)
			kvd_cm_ev_applied(c->com, c->shard, &w->op);
		kvd_cm_ev_publish(c->com, NULL);
		/* Writes refused for a full map count as a failed batch,
		 * as when the whole transaction was refused: that is what
		 * operators watch. */
		if (full)
			kvd_count(&c->st.failures, 1);
		kvd_count(&c->st.commits, 1);
		kvd_count(&c->st.writes, n);
		if (nowait)
			kvd_count(&c->st.inline_batches, 1);
		kvd_count(&c->st.batch_hist[kvd_cm_batch_bucket(n)], 1);
		if (n > kvd_read(&c->st.max_batch))
			atomic_store_explicit(&c->st.max_batch, n,
					      memory_order_relaxed);
		kvd_cm_committed(c->com, c->shard, first);
		return;
	}
	kvd_count(&c->st.failures, 1);
	if (rc == KV_SHARD_FAILED) {
		atomic_store(&c->failed, 1);
		kvd_cm_fail_all(c->com, first, rc);
		return;
	}
	/* A batch refused before it began (a checkpoint failing for room)
	 * is refused whole: its halves would only ask again, each. */
	if (n > 1 && begun && splittable(rc)) {
		w = first;
		for (uint64_t i = 1; i < n / 2; i++)
			w = w->next;
		second = w->next;
		w->next = NULL;
		run_list(c, first, n / 2, now, 0, nowait);
		run_list(c, second, n - n / 2, now, 0, nowait);
		return;
	}
	kvd_cm_fail_all(c->com, first, rc);
}

/* A checkpoint a SAVE or BGSAVE asked for has ended with rc. */
static void saved(struct kvd_committer *c, int rc)
{
	static struct kvd_log_limit limit = KVD_LOG_LIMIT_INIT(1000);

	atomic_store(&c->save_failed, rc != 0);
	if (!rc) {
		atomic_store(&c->saved_ms, kvd_now_ms());
		return;
	}
	kvd_log_ratelimited(&limit, KVD_LOG_ERROR,
			    "shard %u: the checkpoint SAVE or BGSAVE asked for "
			    "failed: %s",
			    c->shard, kv_status_text(rc));
}

/* A bulk merge's request, done by the checkpointer (its thread). */
static void bulk_done(void *a, void *b)
{
	complete(a, b);
}

/* A replica's full copy (emptying the shard, or loading a chunk of the
 * primary's snapshot), SAVE's checkpoint, or a bulk merge: alone and
 * outside any batch. */
static struct kvd_wreq *run_copy(struct kvd_committer *c, struct kvd_wreq *w)
{
	struct kvd_wreq *next = w->next;
	struct kvd_store *st = c->com->o.store;

	if (atomic_load(&c->failed))
		w->op.status = KV_SHARD_FAILED;
	else if (w->op.kind == KVD_W_CHECKPOINT) {
		w->op.status = kvd_shard_checkpoint(st, c->shard);
		saved(c, w->op.status);
	} else if (w->op.kind == KVD_W_BULK) {
		/* handed over, w is the checkpointer's: not even its status
		 * is written here after that */
		int rc =
		    kvd_shard_bulk(st, c->shard, &w->op, bulk_done, c->com, w);

		if (rc == KV_OK)
			return next; /* the checkpointer completes it */
		w->op.status = rc;
	} else if (w->op.kind == KVD_W_RESET)
		w->op.status = kvd_shard_repl_reset(st, c->shard, w->op.lsn);
	else
		w->op.status = kvd_shard_repl_load(st, c->shard, w->op.items,
						   w->op.items_len);
	if (w->op.kind != KVD_W_CHECKPOINT && w->op.kind != KVD_W_BULK)
		ev_forget(c->com, c->shard); /* a primary's copy: as SET's */
	if (w->op.status == KV_SHARD_FAILED)
		atomic_store(&c->failed, 1);
	complete(c->com, w);
	return next;
}

int kvd_cm_is_copy(const struct kvd_wreq *w)
{
	return w->op.kind == KVD_W_RESET || w->op.kind == KVD_W_LOAD ||
	       w->op.kind == KVD_W_CHECKPOINT || w->op.kind == KVD_W_BULK;
}

/* When the next round of reaping is due: reaper-interval-ms after the
 * last, the interval read now (a SIGHUP or CONFIG SET applies at once, as
 * for the async flush). */
static uint64_t next_reap(const struct kvd_committer *c)
{
	return c->last_reap_ms + live(c->com->o.reap_interval_ms);
}

/* Apply and commit one batch starting at w; returns the first request not
 * in it.  nowait: as run_list's; an io thread leaves reaping to the
 * committer. */
static struct kvd_wreq *run_batch(struct kvd_committer *c, struct kvd_wreq *w,
				  int nowait)
{
	struct kvd_wreq *first = w, *end, *last = w;
	uint64_t now = kvd_now_ms(), n = 0;
	size_t bytes = 0;
	int reap = 0;

	if (kvd_cm_is_copy(w))
		return run_copy(c, w);
	for (end = w; end && n < BATCH_MAX_OPS && !kvd_cm_is_copy(end) &&
		      (n == 0 || bytes + end->op.items_len <= BATCH_MAX_BYTES);
	     end = end->next) {
		n++;
		bytes += end->op.items_len;
		last = end;
	}
	last->next = NULL; /* the batch is a list of its own from here on */
	/* A replica reaps nothing itself: its primary's deletions come as
	 * records, and its journal must hold the primary's LSNs only. */
	if (!nowait && now >= next_reap(c) && !kvd_cm_follower(c->com)) {
		c->last_reap_ms = now;
		reap = 1;
	}
	run_list(c, first, n, now, reap, nowait);
	return end;
}

/* With nothing queued: reclaim expired keys in a batch of their own. */
static void idle_reap(struct kvd_committer *c, uint64_t now)
{
	struct kvd_wtxn *t;
	int n, rc;

	c->last_reap_ms = now;
	if (atomic_load(&c->failed) || kvd_cm_follower(c->com) ||
	    kvd_shard_begin(c->com->o.store, c->shard, &t))
		return;
	n = kvd_shard_reap(t, now, REAP_PER_TXN);
	if (n <= 0) {
		kvd_shard_abort(t); /* nothing to do: no write, no fsync */
		return;
	}
	ev_reaped(c->com, c->shard, t, 0);
	rc = kvd_shard_commit(t, !c->com->o.async);
	if (rc == 0) {
		kvd_count(&c->st.reaped, (uint64_t)n);
		kvd_cm_ev_publish(c->com, NULL);
		kvd_cm_committed(c->com, c->shard, NULL); /* new records */
		return;
	}
	kvd_cm_ev_drop(c->com);
	if (rc == KV_SHARD_FAILED) /* not a full disk */
		atomic_store(&c->failed, 1);
}

/* When the next async flush is due: flush-interval-ms after the last one,
 * the interval read now, so that a SIGHUP or CONFIG SET applies at once. */
static uint64_t next_flush(const struct kvd_committer *c)
{
	return c->last_flush_ms + live(c->com->o.flush_interval_ms);
}

/* async durability: the journal reaches the OS at once; flush it every
 * flush-interval-ms.  A failed flush ends the shard's writes and is never
 * retried: the kernel may have dropped the pages it could not write, so a
 * later flush that succeeds would prove nothing about them (PostgreSQL's
 * fsync lesson). */
static void async_flush(struct kvd_committer *c, uint64_t now)
{
	struct kvd_commit *com = c->com;

	if (!com->o.async || now < next_flush(c))
		return;
	c->last_flush_ms = now;
	if (!atomic_load(&c->failed) && kvd_store_sync(com->o.store, c->shard))
		atomic_store(&c->failed, 1);
}

/* Every READER_CHECK_MS, busy or idle: free the reader slots of dead
 * processes, which would otherwise pin old pages and fill the table. */
static void check_readers(struct kvd_committer *c, uint64_t now)
{
	int dead;

	if (now < c->next_check_ms)
		return;
	c->next_check_ms = now + READER_CHECK_MS;
	dead = kvd_store_reader_check(c->com->o.store, c->shard);
	if (dead)
		log_warn("shard %u: cleared %d stale reader slot(s)", c->shard,
			 dead);
}

/* Between batches: flush (async), recycle the journal, freeze an old
 * memtable, clear stale readers. */
static void housekeeping(struct kvd_committer *c, uint64_t now)
{
	async_flush(c, now);
	kvd_shard_tick(c->com->o.store, c->shard, now);
	if (kvd_shard_failed(c->com->o.store, c->shard))
		atomic_store(&c->failed, 1);
	check_readers(c, now);
}

static void timers(struct kvd_committer *c)
{
	uint64_t now = kvd_now_ms();

	if (now >= next_reap(c))
		idle_reap(c, now);
	housekeeping(c, now);
}

/* Sleep until work comes or the next timer is due: reaping, the async
 * flush, and a look at the memtable's age at least every TICK_MS. */
#define TICK_MS 100

static void wait_for_work(struct kvd_committer *c)
{
	struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
	uint64_t now = kvd_now_ms(), buf, due = now + TICK_MS;
	int timeout;

	if (next_reap(c) < due)
		due = next_reap(c);
	if (c->com->o.async && next_flush(c) < due)
		due = next_flush(c);
	timeout = (int)(due > now ? due - now : 0);

	atomic_store(&c->sleeping, 1);
	if (!atomic_load(&c->queue) && !atomic_load(&c->handoff) &&
	    poll(&pfd, 1, timeout) > 0 && read(c->efd, &buf, sizeof(buf)) < 0) {
		/* EAGAIN: another wake-up already consumed it. */
	}
	atomic_store(&c->sleeping, 0);
}

static void maybe_pause(struct kvd_committer *c)
{
	int rc;

	if (!atomic_load(&pause_req))
		return;
	/* Everything acknowledged into LMDB before the snapshot opens. */
	pthread_rwlock_rdlock(&txn_lock);
	rc = atomic_load(&c->failed)
		 ? 0
		 : kvd_shard_checkpoint(c->com->o.store, c->shard);
	pthread_rwlock_unlock(&txn_lock);
	pthread_mutex_lock(&pause_mu);
	if (rc && !pause_rc)
		pause_rc = rc;
	paused++;
	pthread_cond_broadcast(&pause_cv);
	while (atomic_load(&pause_req))
		pthread_cond_wait(&pause_cv, &pause_mu);
	paused--;
	pthread_mutex_unlock(&pause_mu);
}

/* BGSAVE asked for a checkpoint this shard has not made yet: make it
 * now, between two batches. */
static void maybe_save(struct kvd_committer *c)
{
	uint64_t want = atomic_load(&c->save_req);
	int rc;

	if (atomic_load(&c->save_done) == want)
		return;
	pthread_rwlock_rdlock(&txn_lock);
	rc = atomic_load(&c->failed)
		 ? KV_SHARD_FAILED
		 : kvd_shard_checkpoint(c->com->o.store, c->shard);
	pthread_rwlock_unlock(&txn_lock);
	saved(c, rc);
	atomic_store(&c->save_done, want);
}

int kvd_committers_bgsave(struct kvd_commit *com, int again)
{
	int busy = kvd_committers_saving(com);

	if (busy && !again)
		return 1;
	for (unsigned i = 0; i < com->n; i++) {
		atomic_fetch_add(&com->c[i].save_req, 1);
		kvd_cm_wake(&com->c[i]);
	}
	return busy;
}

int kvd_committers_saving(struct kvd_commit *com)
{
	for (unsigned i = 0; i < com->n; i++)
		if (atomic_load(&com->c[i].save_done) !=
		    atomic_load(&com->c[i].save_req))
			return 1;
	return 0;
}

uint64_t kvd_committers_lastsave(struct kvd_commit *com, int *failed)
{
	uint64_t t = UINT64_MAX;

	*failed = 0;
	for (unsigned i = 0; i < com->n; i++) {
		uint64_t s = atomic_load(&com->c[i].saved_ms);

		if (s < t)
			t = s;
		*failed |= atomic_load(&com->c[i].save_failed);
	}
	return t == UINT64_MAX ? com->o.start_ms : t;
}

struct kvd_commit_stats *kvd_commit_stats(struct kvd_commit *com,
					  unsigned shard)
{
	return &com->c[shard].st;
}

int kvd_commit_failed(struct kvd_commit *com, unsigned shard)
{
	return atomic_load(&com->c[shard].failed);
}

/* One pauser at a time (a backup, a replica's full copy): each needs
 * its own cut. */
static pthread_mutex_t pauser_mu = PTHREAD_MUTEX_INITIALIZER;

int kvd_committers_pause(struct kvd_commit *com)
{
	int rc;

	pthread_mutex_lock(&pauser_mu);
	pthread_mutex_lock(&pause_mu);
	pause_rc = 0;
	pthread_mutex_unlock(&pause_mu);
	atomic_store(&pause_req, 1);
	for (unsigned i = 0; i < com->n; i++)
		kvd_cm_wake(&com->c[i]);
	pthread_mutex_lock(&pause_mu);
	while (paused < com->n)
		pthread_cond_wait(&pause_cv, &pause_mu);
	rc = pause_rc;
	pthread_mutex_unlock(&pause_mu);
	return rc;
}

void kvd_committers_resume(struct kvd_commit *com)
{
	(void)com;
	pthread_mutex_lock(&pause_mu);
	atomic_store(&pause_req, 0);
	pthread_cond_broadcast(&pause_cv);
	pthread_mutex_unlock(&pause_mu);
	pthread_mutex_unlock(&pauser_mu);
}

static void *committer_main(void *arg)
{
	struct kvd_committer *c = arg;
	struct kvd_wreq *w;

	c->last_flush_ms = kvd_now_ms();
	for (;;) {
		/* Held whenever this thread works (try_inline). */
		pthread_mutex_lock(&c->run_mu);
		kvd_cm_settle(c);
		maybe_pause(c);
		maybe_save(c);
		w = take_work(c);
		if (!w) {
			if (atomic_load(&c->stop))
				break;
			pthread_rwlock_rdlock(&txn_lock);
			timers(c);
			pthread_rwlock_unlock(&txn_lock);
			pthread_mutex_unlock(&c->run_mu);
			wait_for_work(c);
			continue;
		}
		pthread_rwlock_rdlock(&txn_lock);
		while (w)
			w = run_batch(c, w, 0);
		housekeeping(c, kvd_now_ms());
		pthread_rwlock_unlock(&txn_lock);
		pthread_mutex_unlock(&c->run_mu);
	}
	/* A clean stop leaves LMDB holding everything: a quick restart. */
	if (!atomic_load(&c->failed) &&
	    kvd_store_sync(c->com->o.store, c->shard) == 0)
		kvd_shard_checkpoint(c->com->o.store, c->shard);
	pthread_mutex_unlock(&c->run_mu);
	return NULL;
}

/* After the committers stopped (joined: their journals are this thread's
 * now): flush every shard that has not failed.  Never a retry of a flush
 * that failed. */
static void flush_all(struct kvd_commit *com)
{
	for (unsigned i = 0; i < com->n; i++)
		if (!atomic_load(&com->c[i].failed))
			kvd_store_sync(com->o.store, i);
}

static void txn_lock_init(void)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(
	    &a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&txn_lock, &a);
	pthread_rwlockattr_destroy(&a);
}

/* ===================== Exclusive sections ===================== */

void kvd_excl_begin(struct kvd_excl *x, struct kvd_commit *com)
{
	/* This thread's writes of the turn so far go first, in order. */
	kvd_committer_flush(com);
	pthread_once(&txn_once, txn_lock_init);
	pthread_rwlock_wrlock(&txn_lock);
	for (unsigned i = 0; i < com->n; i++)
		kvd_cm_settle(&com->c[i]);
	atomic_fetch_add(&excl_seq, 1);
	memset(x, 0, sizeof(*x));
	x->com = com;
	excl_cur = x;
}

struct kvd_excl *kvd_excl_current(void)
{
	return excl_cur;
}

void kvd_excl_capture(struct kvd_excl *x)
{
	x->cap = NULL;
	cap_tail = &x->cap;
}

/* Apply one captured request to its shard's open batch. */
static void excl_apply(struct kvd_excl *x, struct kvd_wreq *w)
{
	struct kvd_commit *com = x->com;
	unsigned s = w->shard;
	int rc;

	w->next = NULL;
	if (atomic_load(&com->c[s].failed)) {
		kvd_cm_fail_all(com, w, KV_SHARD_FAILED);
		return;
	}
	if (!x->t[s] && (rc = kvd_shard_begin(com->o.store, s, &x->t[s]))) {
		x->t[s] = NULL;
		kvd_cm_fail_all(com, w, rc);
		return;
	}
	rc = kvd_shard_apply(x->t[s], &w->op, kvd_now_ms(), com->o.max_value);
	if (rc) {
		/* the batch is gone: so are the requests already in it */
		kvd_shard_abort(x->t[s]);
		x->t[s] = NULL;
		w->next = x->head[s];
		x->head[s] = NULL;
		x->failed[s] = 1; /* and their keyspace events */
		kvd_cm_fail_all(com, w, rc);
		return;
	}
	kvd_cm_ev_applied(com, s, &w->op); /* published once committed */
	*(x->head[s] ? &x->tail[s]->next : &x->head[s]) = w;
	x->tail[s] = w;
	x->open = 1;
}

/* The writes captured since kvd_excl_capture join their shards' batches. */
void kvd_excl_apply(struct kvd_excl *x)
{
	struct kvd_wreq *w = x->cap;

	cap_tail = NULL;
	x->cap = NULL;
	while (w) {
		struct kvd_wreq *next = w->next;

		excl_apply(x, w);
		w = next;
	}
}

/* Commit every open batch (one per shard, in shard order) and hand its
 * requests back; then publish the section's keyspace events so far, in
 * the order they were made, but those of a shard that failed. */
void kvd_excl_commit(struct kvd_excl *x)
{
	struct kvd_commit *com = x->com;

	for (unsigned s = 0; x->open && s < com->n && s < KVD_MAX_SHARDS; s++) {
		int rc;

		if (!x->t[s])
			continue;
		rc = kvd_shard_commit(x->t[s], !com->o.async);
		x->t[s] = NULL;
		if (rc == KV_SHARD_FAILED)
			atomic_store(&com->c[s].failed, 1);
		if (rc) {
			x->failed[s] = 1;
			kvd_cm_fail_all(com, x->head[s], rc);
		} else {
			kvd_cm_committed(com, s, x->head[s]);
		}
		x->head[s] = x->tail[s] = NULL;
	}
	x->open = 0;
	kvd_cm_ev_publish(com, x->failed);
	memset(x->failed, 0, sizeof(x->failed));
}

void kvd_excl_end(struct kvd_excl *x)
{
	if (cap_tail)
		kvd_excl_apply(x);
	kvd_excl_commit(x);
	excl_cur = NULL;
	atomic_fetch_add(&excl_seq, 1);
	pthread_rwlock_unlock(&txn_lock);
}

unsigned kvd_excl_seq(void)
{
	unsigned s = atomic_load(&excl_seq);

	if (s & 1) {
		/* wait for the section to end */
		pthread_once(&txn_once, txn_lock_init);
		pthread_rwlock_rdlock(&txn_lock);
		pthread_rwlock_unlock(&txn_lock);
		s = atomic_load(&excl_seq);
	}
	return s;
}

int kvd_excl_moved(unsigned seq)
{
	return atomic_load(&excl_seq) != seq;
}

int kvd_committers_start(struct kvd_commit **out,
			 const struct kvd_commit_opts *o)
{
	struct kvd_commit *com;
	int rc;

	pthread_once(&txn_once, txn_lock_init);
	*out = com = calloc(1, sizeof(*com));
	if (!com)
		return -1;
	com->o = *o;
	com->c = calloc(kvd_store_nshards(o->store), sizeof(*com->c));
	if (!com->c)
		return -1;
	for (unsigned i = 0; i < kvd_store_nshards(o->store); i++) {
		struct kvd_committer *c = &com->c[i];

		c->shard = i;
		c->com = com;
		atomic_store(&c->saved_ms, o->start_ms);
		pthread_mutex_init(&c->run_mu, NULL);
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
		name_thread(c->thread, "kvd-commit", i);
		com->n++;
	}
	return 0;
}

void kvd_committers_stop(struct kvd_commit *com)
{
	if (!com)
		return;
	for (unsigned i = 0; i < com->n; i++) {
		struct kvd_committer *c = &com->c[i];
		uint64_t one = 1;

		atomic_store(&c->stop, 1);
		if (write(c->efd, &one, sizeof(one)) < 0) {
			/* it will still see stop on its next timeout */
		}
		pthread_join(c->thread, NULL);
		close(c->efd);
		pthread_mutex_destroy(&c->run_mu);
	}
	flush_all(com);
	free(com->c);
	free(com);
}
