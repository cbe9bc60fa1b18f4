/* committer_int.h - what committer.c (shard writer threads, group
 * commit, exclusive sections) and committer_ring.c (sync commits whose
 * journal flush an io thread makes itself) share, and nothing else
 * includes: the committer's state and the helpers both sides call.
 * store.h is their interface to the rest of kvd.
 */
#ifndef KVD_COMMITTER_INT_H
#define KVD_COMMITTER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "store.h"

/* One batch carries at most this much (one request larger than that goes
 * alone), so that a flood of writes cannot delay the first writer's reply
 * without bound.  4 MiB already makes one journal write and flush cheap per
 * byte; the batch is copied once more into the journal's write buffer, so
 * more would only cost memory. */
#define BATCH_MAX_OPS 4096
#define BATCH_MAX_BYTES (4u << 20)

/* One shard's writer. */
struct kvd_committer {
	_Atomic(struct kvd_wreq *) queue; /* Treiber stack, newest first */
	int efd;			  /* wakes the committer */
	atomic_int sleeping; /* in wait_for_work: a pusher must wake it */
	pthread_t thread;
	/* Held by whoever writes the shard: the committer while it works, or
	 * an io thread committing its own writes (async mode). */
	pthread_mutex_t run_mu;
	unsigned shard;
	struct kvd_commit *com;
	atomic_int stop;
	/* A journal write or flush, or a checkpoint, failed: refuse writes,
	 * and never flush again, until restart.  Set by the committer (which
	 * also copies the checkpointer's verdict); read by STATS. */
	atomic_int failed;
	uint64_t last_reap_ms; /* due reaper-interval-ms after it, read live */
	/* async mode: the last flush; the next is due flush-interval-ms
	 * after it, read live (a SIGHUP may change it meanwhile) */
	uint64_t last_flush_ms;
	uint64_t next_check_ms;
	/* BGSAVE: checkpoints asked for (save_req) and done (save_done), as
	 * generations, so that one asked for while another runs is not lost;
	 * saved_ms: when this shard last finished one of them (SAVE's too),
	 * or the start; save_failed: the last of them failed. */
	_Atomic uint64_t save_req, save_done, saved_ms;
	atomic_int save_failed;
	struct kvd_commit_stats st; /* written by the shard's writer only */
	/* Sync mode: a batch an io thread committed itself whose journal
	 * flush is in flight in that thread's ring (ring_batch).  Until it
	 * ends (ring_done) that batch is the shard's writer: set under
	 * run_mu and the shared txn_lock, cleared by whoever reports the
	 * flush; whoever takes the writer role next settles it first. */
	atomic_int ring_busy;
	_Atomic(const void *) ring_owner; /* the io thread (its self_tok) */
	void *ring;			  /* its ring, for ring_wait */
	struct kvd_wreq *ring_first;	  /* the batch's requests */
	uint64_t ring_n, ring_t0;
	int ring_full;
	struct kvd_wtxn *ring_t;
	/* Oldest first, before the queue: requests an io thread took from
	 * the queue and could not commit itself (ring_batch) */
	_Atomic(struct kvd_wreq *) handoff;
};

/* Every shard's committer. */
struct kvd_commit {
	struct kvd_commit_opts o;
	unsigned n;
	struct kvd_committer *c;
};

/* ---- committer.c, for committer_ring.c ---- */

/* Wake c's committer through its eventfd. */
void kvd_cm_wake(struct kvd_committer *c);
/* After a batch an io thread committed itself (the writer role still its):
 * wake the committer when the shard wants a spare journal segment made
 * ahead, which only the committer's housekeeping starts. */
void kvd_cm_spare_nudge(struct kvd_committer *c);
/* The hooks (kvd_commit_hooks): a replica?; a committed batch's requests
 * back; one request failed back, the list's each with status; keyspace
 * events of an applied write, published, or dropped with their batch. */
int kvd_cm_follower(const struct kvd_commit *com);
void kvd_cm_committed(struct kvd_commit *com, unsigned shard,
		      struct kvd_wreq *list);
void kvd_cm_fail_all(struct kvd_commit *com, struct kvd_wreq *w, int status);
void kvd_cm_ev_applied(struct kvd_commit *com, unsigned shard,
		       const struct kvd_wop *op);
void kvd_cm_ev_publish(struct kvd_commit *com, const uint8_t *failed);
void kvd_cm_ev_drop(struct kvd_commit *com);
/* c's queue, taken whole, oldest first; a list in the other order. */
struct kvd_wreq *kvd_cm_take_all(struct kvd_committer *c);
struct kvd_wreq *kvd_cm_reverse(struct kvd_wreq *w);
/* The writer role for an io thread: run_mu, then txn_lock shared, both
 * without waiting (1 when taken); and its release. */
int kvd_cm_role_try(struct kvd_committer *c);
void kvd_cm_role_drop(struct kvd_committer *c);
/* The batch size histogram's bucket for n writes. */
unsigned kvd_cm_batch_bucket(uint64_t n);
/* A request that goes alone, outside any batch (a copy, SAVE's
 * checkpoint). */
int kvd_cm_is_copy(const struct kvd_wreq *w);
/* A pause (kvd_committers_pause) is asked for or under way. */
int kvd_cm_pausing(void);

/* ---- committer_ring.c, for committer.c ---- */

/* Sync mode: commit an io thread's writes of one turn (newest first;
 * NULL: none) after those queued, as one batch flushed through its ring;
 * 1 when taken. */
int kvd_cm_try_ring(struct kvd_committer *c, struct kvd_wreq *head);
/* Wait until no ring batch of c is in flight (the caller is to be the
 * shard's next writer). */
void kvd_cm_settle(struct kvd_committer *c);
/* A ring batch of c started by the calling thread is in flight. */
int kvd_cm_ring_mine(const struct kvd_committer *c);
/* At the end of a loop turn (kvd_committer_flush): shard s's queue goes
 * with this turn's writes (untake); the queues that waited for this
 * thread's ring batches are committed or handed to their committers
 * (take_queues). */
void kvd_cm_ring_untake(unsigned s);
void kvd_cm_ring_take_queues(struct kvd_commit *com);
/* The calling thread has n more shards' writes to commit in this loop
 * turn after the one it commits next (io-thread-flush auto flushes only
 * the last in place). */
void kvd_cm_ring_left(unsigned n);

#endif
