/* repl_int.h - what the primary's side of replication shares between its
 * files: the sender's jobs, the replicas' table, the writes held for
 * min-replicas-to-ack, and the one state they live in (R).
 *
 * The files, by job: repl.c the sender thread (its queue, the table, the
 * pulls, the io threads' side), repl_resync.c the resyncs (partial or a
 * full copy), repl_wait.c WAIT and the held writes, repl_state.c the
 * replication ids, the role and the figures.  Locks: the queue is under
 * qmu, the table under tmu (the sender writes it, INFO and ROLE read it),
 * the ids and the link under smu (kvd_repl_lock).  Only repl/ includes
 * this header.
 */
#ifndef KVD_REPL_INT_H
#define KVD_REPL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kv_buf.h"
#include "kv_proto.h"
#include "repl.h"
#include "store.h"

/* Bytes of records or of a snapshot chunk in one reply. */
#define REPL_REPLY_BYTES (4u << 20)

enum job_type { JOB_SYNC = 1, JOB_PULL, JOB_SNAP, JOB_WAIT, JOB_CLOSED };

struct job {
	int type;
	kvd_repl_wait_fn answer; /* WAIT from another protocol: its reply */
	uint64_t conn_id;
	uint64_t deadline_ms; /* WAIT: 0 for none */
	uint64_t pos[KVD_MAX_SHARDS];
	char replid[KVD_REPLID_LEN + 1];
	char ip[56];
	unsigned port, native_port, nwant, shard;
	uint64_t sid;
	uint32_t klen;
	uint8_t key[KV_MAX_KEY_LIMIT + 1];
};

/* A connected replica, as the sender sees it. */
struct rep {
	uint64_t conn_id;
	char ip[56];
	unsigned port;
	uint64_t next[KVD_MAX_SHARDS]; /* acknowledged: its next LSNs */
	/* what it can have: its position at REPLSYNC (at most ours), or
	 * the cut of its full copy, then past the records sent to it; an
	 * acknowledgement claiming more is cut to this */
	uint64_t sent[KVD_MAX_SHARDS];
	uint64_t last_ms; /* its last request */
	int online;	  /* past its full copy */
	struct kvj_reader *rd[KVD_MAX_SHARDS];
	struct kvd_snapshot *sn; /* a full copy under way */
	uint64_t sid;
};

/* Committed requests held for min-replicas-to-ack. */
struct hold {
	struct hold *next;
	unsigned shard;
	uint64_t lsn;
	uint64_t since_ms;
	struct kvd_wreq *list;
};

struct repl_state {
	struct kvd_server *srv;
	pthread_t thread;
	int started;
	/* the queue (qmu) */
	pthread_mutex_t qmu;
	pthread_cond_t qcv;
	struct kvd_wreq *jobs, **jobs_tail;
	struct hold *holds, **holds_tail;
	int kick, stop;
	atomic_int parked; /* pulls waiting for records: committers kick */
	/* the table (tmu: the sender writes, INFO reads) */
	pthread_mutex_t tmu;
	struct rep *reps;
	unsigned nreps;
	uint64_t gone[KVD_MAX_SHARDS]; /* least positions of replicas gone */
	uint64_t gone_ms;	       /* when the last one went */
	uint64_t next_sid;
	atomic_uint good; /* replicas heard from within max-lag */
	/* resyncs answered (Redis's sync_full, sync_partial_ok and
	 * sync_partial_err); only the sender writes them */
	atomic_uint_least64_t syncs_full, syncs_partial_ok, syncs_partial_err;
	/* the sender's own */
	struct kvd_wreq *waiting; /* parked pulls and WAITs */
	struct hold *held;
	/* ids and the link (smu) */
	pthread_mutex_t smu;
	struct kvd_repl_ids ids;
	struct kvd_repl_link link;
	atomic_int is_replica;
	char dir[520]; /* data-dir is at most 511 bytes */
};

/* The one state (repl.c defines it); R in repl/'s files. */
extern struct repl_state kvd_repl_state;
#define R kvd_repl_state

static inline uint64_t repl_mono_ms(void)
{
	return kvd_mono_ns() / 1000000;
}

static inline struct job *repl_job_of(struct kvd_wreq *w)
{
	return (struct job *)w->data;
}

/* repl.c: the sender's replies.  A native frame is begun into b with
 * items array items and status first; repl_job_reply hands b (that frame,
 * or bytes sent as they are when native is 0) to the request's io thread
 * and leaves b empty. */
void repl_frame_begin(struct kv_buf *b, uint32_t items, int status);
void repl_job_reply(struct kvd_wreq *w, struct kv_buf *b, int native);
void repl_job_status(struct kvd_wreq *w, int status, const char *text);

/* repl.c: the replicas' table (the sender's; changes under tmu). */
struct rep *repl_rep_find(uint64_t conn_id);
struct rep *repl_rep_add(const struct job *j);
void repl_rep_clear(struct rep *rp);
void repl_rep_del(uint64_t conn_id);
/* A replica's offset: the sum of its acknowledged positions. */
uint64_t repl_rep_offset(const struct rep *rp, unsigned nshards);
/* Hold the journal the replicas (and those gone lately) still need. */
void repl_update_holds(void);
/* A pull or WAIT waits in the sender's list until it can be answered. */
void repl_park(struct kvd_wreq *w);
/* repl.c, io threads: a job of type for the sender, its reply queued in
 * order on c for request op (NULL: answered INTERNAL in order); handed to
 * the sender. */
struct kvd_wreq *repl_job_new(struct kvd_conn *c, unsigned op, int type);
void repl_job_submit(struct kvd_conn *c, struct kvd_wreq *w);

/* repl_resync.c: REPLSYNC and REPLSNAP, on the sender. */
void repl_do_sync(struct kvd_wreq *w, struct job *j);
void repl_do_snap(struct kvd_wreq *w, struct job *j);

/* repl_wait.c: WAIT and the writes held for min-replicas-to-ack.  The
 * positions a WAIT waits for (the shards' published LSNs) into pos; a
 * WAIT answered (1) or still waiting (0), last: answer now; the held
 * writes released or refused (last: all released, stopping); the count
 * of good replicas (min-replicas-max-lag) brought up to date. */
void repl_wait_targets(struct kvd_server *srv, uint64_t *pos);
int repl_wait_try(struct kvd_wreq *w, int last);
void repl_release_holds(int last);
void repl_update_good(void);

/* repl_state.c: read the ids from the data directory, or make new ones
 * (under smu). */
void repl_load_ids(void);

#endif
