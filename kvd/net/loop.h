/* loop.h - io threads: one io_uring ring each, and everything they own.
 *
 * Every io_uring call in kvd is in loop.c, but the journal flushes of
 * loop_flush.c.  An io thread accepts on its own
 * SO_REUSEPORT listener (multishot accept), receives with multishot recv
 * into a provided-buffer ring, parses and answers reads in place, hands
 * writes to committers, and sends each connection's replies once per loop
 * turn.  It never blocks except in io_uring_submit_and_wait, and in the
 * journal's write(2) of its own writes (committer.c); in sync mode their
 * flush goes through a second, small ring of its own (loop_flush.c).
 */
#ifndef KVD_LOOP_H
#define KVD_LOOP_H

#include <pthread.h>
#include <stdatomic.h>

#include "conn.h"
#include "kvd.h"
#include "store.h"

struct kvd_ring;
struct kvd_jring;

/* Listener slots: one per protocol (enum kvd_proto_id) and kind, slot
 * kind * KVD_NPROTO + id; listen.c binds those configured, and says which
 * speak TLS (kvd_io.tls_slots: the TLS kind's, and the metrics listener's
 * TCP slot when tls-metrics says so). */
enum kvd_listen_kind { KVD_LISTEN_TCP, KVD_LISTEN_UNIX, KVD_LISTEN_TLS };
#define KVD_LISTEN_SLOT(kind, proto) ((kind)*KVD_NPROTO + (proto))
#define KVD_NLISTEN (3 * KVD_NPROTO)

struct kvd_io {
	unsigned idx;
	struct kvd_server *srv;
	struct kvd_ring *ring;
	/* sync mode with io-thread-flush: the journal flushes of the
	 * writes this thread commits itself (loop_flush.c); NULL: none */
	struct kvd_jring *jring;
	struct kvd_reader *reader;
	uint64_t now_ms;  /* wall clock, refreshed every loop turn */
	uint64_t turn_ns; /* monotonic clock when this loop turn began */
	struct kvd_io_stats stats;
	_Atomic(struct kvd_wreq *) done; /* completions pushed by committers */
	/* completions of writes this thread committed itself (async mode):
	 * answered in the same turn, no wake-up */
	struct kvd_wreq *local_done;
	int efd; /* wakes this thread */
	atomic_uint nconns;
	unsigned inflight; /* wreqs out at committers */
	/* write payload bytes this thread has out at each shard (write.c);
	 * each thread may use 1/nio of max-inflight-shard-bytes */
	uint64_t shard_wbytes[KVD_MAX_SHARDS];
	struct kvd_wreq *free_wreq;
	unsigned nfree_wreq;
	struct kvd_pend *free_pend;
	unsigned nfree_pend;
	struct kvd_conn *conns;
	struct kvd_conn *dirty;
	/* connections whose protocol goes on next turn (kvd_io_again); the
	 * loop does not sleep while there are some */
	struct kvd_conn *again;
	pthread_t thread;
	int lfd[KVD_NLISTEN];  /* listeners by slot, -1 when absent */
	unsigned tls_slots;    /* bit per listener: it speaks TLS */
	unsigned accept_armed; /* bit per listener: its accept is in the ring */
	unsigned accept_paused; /* bit per listener: out of descriptors */
	int accept_timer;	/* the timer that resumes them is in the ring */
	uint64_t next_id;
	int stopping;
	/* TLS handshakes in flight here (at most tls-max-handshakes), the
	 * connections accepted past the bound, waiting for a slot, and
	 * whether the TLS listeners' accepts are stopped for it (loop.c) */
	unsigned hs_now;
	struct kvd_conn *hs_wait, *hs_wait_tail;
	int hs_paused;
};

/* Fit max-clients to the open-file limit (raised to its hard limit first),
 * then bind every io thread's listeners (before the data directory is
 * touched, so a port in use is the first and only complaint). */
int kvd_io_listen(struct kvd_server *srv, char *err, size_t errlen);
/* listen.c: the connections the open-file limit leaves room for, and at
 * exit, the Unix sockets' files removed (if still ours). */
unsigned kvd_listen_fd_max(void);
void kvd_listen_close(void);
/* Then create their rings and read snapshots; errors are reported here,
 * before anything runs. */
int kvd_io_create(struct kvd_server *srv, char *err, size_t errlen);
int kvd_io_start(struct kvd_server *srv);
/* Ask every io thread to drain and stop, then join them. */
void kvd_io_stop(struct kvd_server *srv);
/* A client asked the server to stop (SHUTDOWN): the main thread
 * stops it as on SIGTERM, which this raises (any thread). */
void kvd_io_request_stop(struct kvd_server *srv);
void kvd_io_destroy(struct kvd_server *srv);

/* A committer hands a finished request back to its io thread (any thread;
 * io.c): on io's own thread (kvd_io_enter) to its local_done list, else
 * onto its done stack, waking it through its eventfd when the stack was
 * empty. */
void kvd_io_complete(struct kvd_io *io, struct kvd_wreq *w);
/* The calling thread is io's (io.c). */
void kvd_io_enter(struct kvd_io *io);
/* The io thread running on the calling thread, or NULL (io.c). */
struct kvd_io *kvd_io_self(void);

/* Journal flushes in an io thread's own ring (loop_flush.c; the committers'
 * ring hooks, store.h).  init: io's ring, with io's eventfd told of each
 * completion (-1: none, said in err; its writes then go to the
 * committers); free.  flush (on io's thread): start a data flush of fd,
 * or with fault a no-op, tagged cookie; the ring, or NULL.  wait (any
 * thread): report the flushes completed, or wait up to a millisecond for
 * one.  reap (io's thread, on its wake-ups): report those completed.
 * here: the calling thread is an io thread with such a ring. */
int kvd_io_jring_init(struct kvd_io *io, char *err, size_t errlen);
void kvd_io_jring_free(struct kvd_io *io);
void *kvd_io_jring_flush(int fd, int fault, void *cookie);
void kvd_io_jring_wait(void *jring);
void kvd_io_jring_reap(struct kvd_io *io);
int kvd_io_jring_here(void);
/* io's thread answers a list of completed requests (io.c). */
void kvd_io_completed(struct kvd_io *io, struct kvd_wreq *w);

/* The connection has new output or state for the loop to act on. */
void kvd_io_mark(struct kvd_conn *c);
/* Its protocol's again runs on the loop's next turn, after the turn's
 * completions (a read that gave the thread back goes on): the loop polls
 * its ring instead of sleeping meanwhile. */
void kvd_io_again(struct kvd_conn *c);
/* c's TLS handshake is over (done or failed): its slot goes to the next
 * connection (tls.c; the loop calls it itself when c closes first). */
void kvd_io_handshake_done(struct kvd_conn *c);

/* Write requests and pending slots: per-thread free lists, so the hot path
 * does not call malloc. */
struct kvd_wreq *kvd_wreq_new(struct kvd_io *io, size_t payload);
void kvd_wreq_free(struct kvd_io *io, struct kvd_wreq *w);
struct kvd_pend *kvd_pend_new(struct kvd_io *io);
void kvd_pend_free(struct kvd_io *io, struct kvd_pend *p);
/* Send w to its shard's committer. */
void kvd_io_dispatch(struct kvd_io *io, struct kvd_wreq *w);

#endif
