/* committer_ring.c - sync commits an io thread makes itself.  When the
 * shard's committer sleeps, an io thread takes the writer role (run_mu
 * and the shared txn_lock, committer.c), applies its turn's writes after
 * those queued as one batch, appends it to the journal and starts its
 * data sync in its own ring (the ring_flush hook), then goes back to its
 * sockets; the completion answers the batch (ring_done).  Until then the
 * batch is the shard's writer (ring_busy): whoever needs the shard next
 * settles that flush itself rather than waiting for the io thread, and
 * writes queued meanwhile are taken by that io thread's next turn.
 * What may wait (a freeze, a checkpoint, a SAVE, a failed batch of
 * several to split) goes to the committer whole and in order (handoff).
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "committer_int.h"
#include "kv_status.h"
#include "store_log.h"

/* Its address names the calling thread (kvd_committer.ring_owner). */
static __thread char self_tok;

/* io-thread-flush auto: a batch of at most this many writes is flushed
 * with the io thread's own fdatasync; a larger one goes through its ring.
 * One request in flight per connection makes batches of a few writes (6-11
 * at 50 connections on two io threads), a pipeline of 16 makes them of
 * 80-180 (bench/RESULTS.md, Write CPU after issue 36): a small batch's
 * flush is cheaper blocking, a large one's is better overlapped with
 * reading the next batch. */
#define AUTO_INLINE_MAX 16

/* Commits this thread still has to start in its loop turn after the
 * current one (kvd_cm_ring_left). */
static __thread unsigned turn_left;

/* Shards whose queue this thread is to take (sync mode): its ring batch
 * there ended with others' writes queued, which waited for it
 * (ring_done); its next kvd_committer_flush commits them. */
static __thread uint8_t take_mark[KVD_MAX_SHARDS];
static __thread uint16_t take_shards[KVD_MAX_SHARDS];
static __thread unsigned take_n;

/* Shard s's queue: taken by this thread's next ring batch there, or, when
 * it cannot, handed to the committer, woken for it (nobody woke it: the
 * pushers saw a flush in flight, push). */
static void take_queue(struct kvd_commit *com, unsigned s)
{
	struct kvd_committer *c = &com->c[s];

	take_mark[s] = 0;
	if (atomic_load(&c->queue) && !kvd_cm_try_ring(c, NULL) &&
	    atomic_load(&c->sleeping))
		kvd_cm_wake(c);
}

/* The flush of c's ring batch ended with res: the batch becomes visible
 * and its requests go back, or it fails, and with it the shard (a failed
 * flush is never retried).  On the io thread that started it, or on a
 * thread that settles it; never two at once (the ring's lock). */
static void ring_done(struct kvd_committer *c, int res)
{
	struct kvd_commit *com = c->com;
	struct kvd_wreq *first = c->ring_first;
	uint64_t n = c->ring_n, t0 = kvd_mono_ns() - c->ring_t0;
	int rc = kvd_shard_commit_done(c->ring_t, res);

	c->ring_first = NULL;
	kvd_count(&c->st.commit_ns, t0);
	if (rc == 0) {
		kvd_count(&c->st.commit_hist[kvd_lat_bucket(t0)], 1);
		for (struct kvd_wreq *w = first; w; w = w->next)
			kvd_cm_ev_applied(com, c->shard, &w->op);
		kvd_cm_ev_publish(com, NULL);
		if (c->ring_full)
			kvd_count(&c->st.failures, 1);
		kvd_count(&c->st.commits, 1);
		kvd_count(&c->st.writes, n);
		kvd_count(&c->st.inline_batches, 1);
		kvd_count(&c->st.batch_hist[kvd_cm_batch_bucket(n)], 1);
		if (n > kvd_read(&c->st.max_batch))
			atomic_store_explicit(&c->st.max_batch, n,
					      memory_order_relaxed);
	} else {
		kvd_cm_ev_drop(com);
		kvd_count(&c->st.failures, 1);
		if (rc == KV_SHARD_FAILED)
			atomic_store(&c->failed, 1);
	}
	if (rc == 0) /* while this batch still holds the writer role */
		kvd_cm_spare_nudge(c);
	/* The shard is free before its requests go back: their io thread
	 * may commit its next writes as soon as it sees them answered. */
	atomic_store(&c->ring_busy, 0);
	if (rc == 0)
		kvd_cm_committed(com, c->shard, first);
	else
		kvd_cm_fail_all(com, first, rc);
	/* Others' writes queued meanwhile, nobody woke for them (push): the
	 * owner takes them with its next batch; anyone else (a thread that
	 * settles: about to write the shard, or an exclusive section) leaves
	 * them to the committer. */
	if (!atomic_load(&c->queue))
		return;
	if (atomic_load(&c->ring_owner) == &self_tok &&
	    c->shard < KVD_MAX_SHARDS && take_n < KVD_MAX_SHARDS) {
		if (!take_mark[c->shard]) {
			take_mark[c->shard] = 1;
			take_shards[take_n++] = (uint16_t)c->shard;
		}
	} else if (atomic_load(&c->sleeping)) {
		kvd_cm_wake(c);
	}
}

void kvd_committer_flushed(void *cookie, int res)
{
	ring_done(cookie, res);
}

/* Wait until no ring batch of c is in flight, reporting its flush
 * ourselves when it completes: the io thread that started it may be
 * waiting for us (an exclusive section, say), so we never wait for it.
 * The caller is to be the shard's next writer (run_mu or txn_lock held
 * exclusively), so no new ring batch starts meanwhile. */
void kvd_cm_settle(struct kvd_committer *c)
{
	struct kvd_commit_hooks *h = &c->com->o.hooks;

	while (atomic_load(&c->ring_busy))
		h->ring_wait(h->arg, c->ring);
}

/* Requests taken from the queue (and the io thread's own after them) that
 * a ring batch cannot take: the committer commits them, before anything
 * queued after them (under run_mu). */
static void handoff(struct kvd_committer *c, struct kvd_wreq *fifo)
{
	struct kvd_wreq *h = atomic_load(&c->handoff);

	if (h) {
		while (h->next)
			h = h->next;
		h->next = fifo;
	} else {
		atomic_store(&c->handoff, fifo);
	}
	kvd_cm_wake(c);
}

/* A list a ring batch takes whole: plain writes, one batch's worth. */
static int ring_fits(const struct kvd_wreq *w, uint64_t *n)
{
	uint64_t bytes = 0;

	for (*n = 0; w; w = w->next, ++*n) {
		if (kvd_cm_is_copy(w))
			return 0;
		bytes += w->op.items_len;
		if (*n > 0 && (*n >= BATCH_MAX_OPS || bytes > BATCH_MAX_BYTES))
			return 0;
	}
	return 1;
}

/* Flush a ring batch of n writes with this thread's own fdatasync rather
 * than through its ring?  That blocks the thread, but spares the switches
 * to and from the kernel's worker that runs a ring's flush, and the
 * wake-up of this thread by its completion (docs/architecture.md section
 * 12).  inline: always.  auto: when the batch is small, the last this
 * thread commits in its turn (others' flushes go first, through the ring,
 * and so run beside this one), and has as many writes as the thread has
 * connections: then every client of the thread waits for this flush and
 * none can send meanwhile, so blocking delays no one's request, where
 * with more connections than writes the ring lets the thread read the
 * next batch during the flush (one client: in place 1.3x the ring's
 * rate; 50 clients: the ring spent less).  A condition that the thread
 * have no socket completion waiting (IORING_SQ_TASKRUN) sent three
 * quarters of the batches of one-request-at-a-time clients to the ring
 * and measured no better than ring itself: it is not taken. */
static int in_place(const struct kvd_committer *c, uint64_t n)
{
	const struct kvd_commit *com = c->com;
	const struct kvd_commit_hooks *h = &com->o.hooks;

	if (com->o.ring == KVD_RING_INLINE)
		return 1;
	return com->o.ring == KVD_RING_AUTO && n <= AUTO_INLINE_MAX &&
	       !turn_left && (!h->ring_conns || n >= h->ring_conns(h->arg));
}

/* Sync mode, on an io thread holding run_mu and the shared txn_lock: apply
 * list first as one batch, append it to the journal and start its flush
 * in this thread's ring; ring_done answers it.  What cannot go so (a
 * freeze or a checkpoint due, a SAVE, a failed batch of several, which
 * the committer splits) goes to the committer whole and in order
 * (handoff). */
static void ring_batch(struct kvd_committer *c, struct kvd_wreq *first)
{
	struct kvd_commit *com = c->com;
	struct kvd_wtxn *t;
	uint64_t now = kvd_now_ms(), n;
	int rc, fd, fault, full = 0;
	void *ring;

	if (!ring_fits(first, &n) ||
	    kvd_shard_begin_nowait(com->o.store, c->shard, &t)) {
		handoff(c, first);
		return;
	}
	rc = 0;
	for (struct kvd_wreq *w = first; w && !rc; w = w->next) {
		if ((rc = kvd_shard_apply(t, &w->op, now, com->o.max_value)))
			kvd_shard_abort(t);
		full |= w->op.status == KV_MAP_FULL;
	}
	c->ring_t0 = kvd_mono_ns();
	if (rc || (rc = kvd_shard_commit_begin(t, &fd, &fault))) {
		/* As run_list: a request alone fails alone (a full disk, say);
		 * several are split by the committer. */
		kvd_cm_ev_drop(com);
		if (n > 1) {
			handoff(c, first);
			return;
		}
		kvd_count(&c->st.failures, 1);
		if (rc == KV_SHARD_FAILED)
			atomic_store(&c->failed, 1);
		kvd_cm_fail_all(com, first, rc);
		return;
	}
	c->ring_first = first;
	c->ring_n = n;
	c->ring_t = t;
	c->ring_full = full;
	atomic_store(&c->ring_owner, &self_tok);
	atomic_store(&c->ring_busy, 1);
	if (fd < 0) { /* nothing to flush: a batch of refusals, say */
		ring_done(c, 0);
		return;
	}
	ring = in_place(c, n)
		   ? NULL
		   : com->o.hooks.ring_flush(com->o.hooks.arg, fd, fault, c);
	if (ring) {
		c->ring = ring;
		kvd_count(&c->st.ring_flushes, 1);
		return;
	}
	/* io-thread-flush inline or auto's choice, or no room in the ring:
	 * flush in place
	 * (the system call itself: a test shim saw this flush through its
	 * hooks). */
	ring_done(c, fault ? fault : syscall(SYS_fdatasync, fd) ? -errno : 0);
}

/* Sync mode: commit an io thread's writes of one turn (newest first; NULL:
 * none), after the writes queued for the shard (which waited for this
 * thread's previous flush, push), as one batch whose journal flush goes
 * through this thread's ring: no thread hop for its own, one for the
 * others'.  As try_inline's, only when the committer sleeps and nothing
 * may wait.  1 when they were taken. */
int kvd_cm_try_ring(struct kvd_committer *c, struct kvd_wreq *head)
{
	const struct kvd_commit_hooks *h = &c->com->o.hooks;
	struct kvd_wreq *q, *mine;

	if (!c->com->o.ring || !h->ring_here || !h->ring_here(h->arg) ||
	    kvd_cm_follower(c->com) ||
	    !atomic_load_explicit(&c->sleeping, memory_order_relaxed) ||
	    kvd_cm_pausing() || atomic_load(&c->failed) ||
	    atomic_load(&c->ring_busy) || atomic_load(&c->handoff))
		return 0;
	if (!kvd_cm_role_try(c))
		return 0;
	if (kvd_cm_pausing() || atomic_load(&c->ring_busy) ||
	    atomic_load(&c->handoff)) {
		kvd_cm_role_drop(c);
		return 0;
	}
	/* What is queued came before this thread's own writes. */
	q = kvd_cm_take_all(c);
	mine = kvd_cm_reverse(head);
	if (q) {
		struct kvd_wreq *w = q;

		while (w->next)
			w = w->next;
		w->next = mine;
	} else {
		q = mine;
	}
	if (q)
		ring_batch(c, q);
	kvd_cm_role_drop(c);
	return 1;
}

int kvd_cm_ring_mine(const struct kvd_committer *c)
{
	return atomic_load(&c->ring_busy) &&
	       atomic_load(&c->ring_owner) == &self_tok;
}

void kvd_cm_ring_untake(unsigned s)
{
	take_mark[s] = 0;
}

void kvd_cm_ring_take_queues(struct kvd_commit *com)
{
	for (unsigned i = 0; i < take_n; i++) {
		turn_left = take_n - i - 1;
		if (take_mark[take_shards[i]])
			take_queue(com, take_shards[i]);
	}
	take_n = 0;
	turn_left = 0;
}

void kvd_cm_ring_left(unsigned n)
{
	turn_left = n;
}
