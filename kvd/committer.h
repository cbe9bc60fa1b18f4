/* committer.h - one writer thread per shard, and group commit.
 *
 * LMDB allows one write transaction per environment, bound to one thread,
 * and its commit blocks in fsync.  So io threads never write: they push
 * requests onto the shard's lock-free queue, and the shard's committer takes
 * everything queued while its previous commit was in fsync, applies it in
 * one transaction, commits once, and only then hands each request back.
 * Under load one fsync carries hundreds of writes.
 */
#ifndef KVD_COMMITTER_H
#define KVD_COMMITTER_H

#include <pthread.h>

#include "kvd.h"

/* Batch sizes are counted in powers of two: <= 1, 2, 4, ... 4096. */
#define KVD_BATCH_BUCKETS 13

struct kvd_committer {
	_Atomic(struct kvd_wreq *) queue; /* Treiber stack, newest first */
	int efd;			  /* wakes the committer */
	pthread_t thread;
	unsigned shard;
	struct kvd_server *srv;
	atomic_int stop;
	/* A write or fsync failed: refuse writes, and never fsync again, until
	 * restart.  Set by the committer or the async flusher; read by both
	 * and by STATS. */
	atomic_int failed;
	struct kvd_wreq
	    *unacked; /* sync mode: committed, meta not yet synced */
	uint64_t next_reap_ms;
	uint64_t next_check_ms;
	/* counters, written by the committer thread only */
	kvd_counter commits, writes, max_batch, commit_ns, failures;
	kvd_counter reaped;
	kvd_counter commit_hist[KVD_LAT_BUCKETS];  /* commit (fsync) time */
	kvd_counter batch_hist[KVD_BATCH_BUCKETS]; /* writes per commit */
};

/* Start one committer per shard (and the async flusher); 0 or -1. */
int kvd_committers_start(struct kvd_server *srv);
/* Queue a request (any thread).  It comes back through kvd_io_complete(). */
void kvd_committer_submit(struct kvd_server *srv, struct kvd_wreq *w);
/* Stop every committer between two batches and wait until all have; a
 * backup opens its snapshots meanwhile.  Resume lets them go on. */
void kvd_committers_pause(struct kvd_server *srv);
void kvd_committers_resume(struct kvd_server *srv);
/* After the io threads have stopped: drain, commit, stop, flush. */
void kvd_committers_stop(struct kvd_server *srv);

#endif
