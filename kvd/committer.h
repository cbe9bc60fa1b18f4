/* committer.h - one writer thread per shard, and group commit.
 *
 * A shard's journal and memtable have one writer, and a journal flush
 * blocks in fdatasync.  So io threads do not write (but in async mode,
 * their own writes when the committer is asleep: committer.c, try_inline):
 * they push requests onto the shard's lock-free queue, and the shard's
 * committer takes everything queued while its previous flush ran, appends
 * it to the journal as one write, flushes once, makes it visible, and only
 * then hands each request back.  Under load one fdatasync carries hundreds
 * of writes.
 */
#ifndef KVD_COMMITTER_H
#define KVD_COMMITTER_H

#include <pthread.h>

#include "datadir.h"
#include "kvd.h"

/* Batch sizes are counted in powers of two: <= 1, 2, 4, ... 4096. */
#define KVD_BATCH_BUCKETS 13

struct kvd_committer {
	_Atomic(struct kvd_wreq *) queue; /* Treiber stack, newest first */
	int efd;			  /* wakes the committer */
	atomic_int sleeping; /* in wait_for_work: a pusher must wake it */
	pthread_t thread;
	/* Held by whoever writes the shard: the committer while it works, or
	 * an io thread committing its own writes (async mode). */
	pthread_mutex_t run_mu;
	unsigned shard;
	struct kvd_server *srv;
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
	/* counters, written under run_mu only (one writer at a time) */
	kvd_counter commits, writes, max_batch, commit_ns, failures;
	kvd_counter reaped;
	/* BGSAVE: checkpoints asked for (save_req) and done (save_done), as
	 * generations, so that one asked for while another runs is not lost;
	 * saved_ms: when this shard last finished one of them (SAVE's too),
	 * or kvd's start; save_failed: the last of them failed. */
	_Atomic uint64_t save_req, save_done, saved_ms;
	atomic_int save_failed;
	kvd_counter inline_batches; /* committed by an io thread */
	kvd_counter commit_hist[KVD_LAT_BUCKETS];  /* journal write + flush */
	kvd_counter batch_hist[KVD_BATCH_BUCKETS]; /* writes per commit */
};

/* Start one committer per shard; 0 or -1. */
int kvd_committers_start(struct kvd_server *srv);
/* Queue a request (an io thread, or a thread that then calls
 * kvd_committer_flush).  It comes back through kvd_io_complete(). */
void kvd_committer_submit(struct kvd_server *srv, struct kvd_wreq *w);
/* Push the calling io thread's submitted requests to their committers:
 * kvd_committer_submit holds them until the end of the thread's loop turn,
 * which calls this (so does kvd_excl_begin, before it locks). */
void kvd_committer_flush(struct kvd_server *srv);
/* Stop every committer between two batches, each once its shard's LMDB
 * holds everything it acknowledged (a checkpoint), and wait until all
 * have; a backup opens its snapshots meanwhile.  0, or the KV_* code of a
 * checkpoint that failed (the committers are paused either way).  Resume
 * lets them go on. */
int kvd_committers_pause(struct kvd_server *srv);
void kvd_committers_resume(struct kvd_server *srv);
/* An exclusive section (EXEC, WATCH; an io thread): no committer runs a
 * batch, housekeeping or a checkpoint meanwhile.  Writes queued between
 * kvd_excl_capture and kvd_excl_apply (kvd_write_*) are not handed to
 * the committers but applied here, to one open batch per shard; commit
 * journals each shard's batch as one (sync mode: flushed) and hands its
 * requests back as a committer would.  End commits what is still open.
 * Sections are not nested. */
struct kvd_excl {
	struct kvd_server *srv;
	struct kvd_wreq *cap;
	int open;
	struct kvd_wtxn *t[KVD_MAX_SHARDS];
	struct kvd_wreq *head[KVD_MAX_SHARDS], *tail[KVD_MAX_SHARDS];
	/* a batch of that shard failed: its keyspace events are dropped */
	uint8_t failed[KVD_MAX_SHARDS];
};

void kvd_excl_begin(struct kvd_excl *x, struct kvd_server *srv);
void kvd_excl_capture(struct kvd_excl *x);
void kvd_excl_apply(struct kvd_excl *x);
void kvd_excl_commit(struct kvd_excl *x);
void kvd_excl_end(struct kvd_excl *x);
/* The section this thread is in, or NULL. */
struct kvd_excl *kvd_excl_current(void);
/* Readers: a read that began at seq (waited for a section under way) and
 * ends with kvd_excl_moved false saw no section's writes half made. */
unsigned kvd_excl_seq(void);
int kvd_excl_moved(unsigned seq);

/* BGSAVE: every committer checkpoints its shard (kvd_shard_checkpoint)
 * between two batches, on its own time.  1 when one was under way already
 * (another is then asked for only if again: BGSAVE SCHEDULE), else 0.
 * SAVE queues KVD_W_CHECKPOINT on every shard instead, and is answered
 * once each is done. */
int kvd_committers_bgsave(struct kvd_server *srv, int again);
/* Is a BGSAVE's checkpoint still under way on some shard? */
int kvd_committers_saving(struct kvd_server *srv);
/* LASTSAVE: the time (Unix ms) by which every shard had finished a
 * checkpoint a SAVE or BGSAVE asked for (kvd's start before any);
 * *failed: the last of them failed on some shard. */
uint64_t kvd_committers_lastsave(struct kvd_server *srv, int *failed);

/* After the io threads have stopped: drain, commit, flush, checkpoint,
 * stop. */
void kvd_committers_stop(struct kvd_server *srv);

#endif
