/* repl.h - replication: a primary streams its shards' journals to replicas
 * (repl.c, repl_resync.c, repl_wait.c, repl_state.c: repl_int.h says which
 * does what), and a replica follows a primary (replica.c).  What Redis's
 * clients read of it (INFO replication, ROLE, WAIT's answer) is written in
 * RESP by kvd/resp/resp_repl.c from the calls here.  The design is in
 * docs/architecture.md ("Replication"), the wire protocol in
 * docs/protocol.md, operations in docs/replication.md.
 *
 * A replica pulls: it asks for the records after its own position (one
 * next LSN per shard), and its next request is its acknowledgement: it
 * sends it only once what it received is applied and flushed to its own
 * journal.  A primary answers every replication request on one thread of
 * its own (the sender), never on an io thread or a committer: reading
 * journal segments, opening the snapshot of a full copy, and holding a
 * request until records or acknowledgements arrive all happen there.
 *
 * Replication ids: 40 hex characters, as Redis's.  A replica takes its
 * primary's; a promoted replica takes a new one and keeps the old as
 * replid2 with the positions where it switched, so that replicas of the
 * old primary continue from the new one without a full copy (Redis PSYNC2).
 * They are kept in the data directory's file "replication".
 */
#ifndef KVD_REPL_H
#define KVD_REPL_H

#include <stdint.h>

#include "native/cmdparse.h"
#include "net/conn.h"
#include "kv_buf.h"
#include "store.h"

/* Before the store opens: a full copy that was cut short leaves the data
 * directory marked; its shards are then emptied, so that the replica takes
 * a new copy instead of serving half of one.  0, or -1 with err. */
int kvd_repl_prepare(const struct kvd_config *cfg, char *err, size_t errlen);
/* After the committers started: read the replication ids, start the
 * sender, and the replica's thread when replicaof is set.  0 or -1. */
int kvd_repl_start(struct kvd_server *srv, char *err, size_t errlen);
/* After the io threads stopped taking requests... (called once they
 * stopped: every held request was answered when stopping began). */
void kvd_repl_stop(struct kvd_server *srv);

/* 1 while this server follows a primary (any thread). */
int kvd_repl_is_replica(void);
/* May a client write now?  KV_OK, KV_REPLICA_READ_ONLY (a replica), or
 * KV_NO_REPLICAS (min-replicas-to-ack with too few good replicas). */
int kvd_repl_write_ok(void);

/* Committers: a batch of shard was committed; hand its requests back to
 * their io threads, or hold them until min-replicas-to-ack replicas have
 * its records (the list is NULL-terminated). */
void kvd_repl_committed(struct kvd_server *srv, unsigned shard,
			struct kvd_wreq *list);

/* Native REPLSYNC, REPLPULL, REPLSNAP, REPLICAOF, WAIT (cmd.c): KV_OK once
 * answered or queued, or a status to answer with. */
int kvd_repl_native(struct kvd_conn *c, struct kvd_req *r);
/* WAIT's answer in another protocol than the native one: n replicas
 * acknowledged, appended to b (sent as it is). */
typedef void (*kvd_repl_wait_fn)(struct kv_buf *b, unsigned n);
/* WAIT numreplicas timeout_ms from another protocol (validated, on a
 * primary: kvd_repl_is_replica() is 0) for request op of c: queued, its
 * answer written by answer in order; 0, or -1 when it was answered
 * INTERNAL in order. */
int kvd_repl_wait(struct kvd_conn *c, unsigned op, uint64_t n, uint64_t ms,
		  kvd_repl_wait_fn answer);
/* REPLICAOF host port, or host NULL for NO ONE.  port is the primary's
 * RESP port when resp is set (REPLICAOF on the RESP port, as Redis and
 * Sentinel give it; the replica asks the primary for its native port), its
 * native port otherwise.  KV_OK, or a status with a reason in err:
 * BAD_ARGS (not a host), READ_ONLY or DISABLED (kvd_repl_may_follow),
 * INTERNAL. */
int kvd_repl_replicaof(const char *host, unsigned port, int resp, char *err,
		       size_t errlen);

/* repl_trust.c.  Is host:port (port as REPLICAOF names it, resp: a RESP
 * port) a trusted primary: the replicaof of the start, or one in
 * allowed-primaries?  Only those get primary-password.  1 or 0. */
int kvd_repl_trusted(const struct kvd_config *cfg, const char *host,
		     unsigned port, int resp);
/* May REPLICAOF host port be obeyed now?  KV_OK, or BAD_ARGS (not a host
 * name or address), READ_ONLY (read-only yes), DISABLED (not a trusted
 * primary while allowed-primaries is set or FLUSHALL disabled), with a
 * reason in err. */
int kvd_repl_may_follow(const struct kvd_config *cfg, const char *host,
			unsigned port, int resp, char *err, size_t errlen);
/* The live role as the option replicaof writes it (CONFIG REWRITE):
 * "HOST PORT", "HOST PORT resp" (REPLICAOF on the RESP port), or "" for a
 * primary. */
void kvd_repl_config_role(char *buf, size_t cap);
/* CLIENT KILL TYPE master: drop the link to the primary (the replica
 * connects again at once, as Redis's).  1 when a link was up, else 0. */
int kvd_repl_kill_link(void);
/* A connection flagged CONN_REPLICA is freed (its closed hook). */
void kvd_repl_conn_closed(struct kvd_conn *c);

/* A replica connected to this primary, as INFO replication and ROLE list
 * it: online once past its full copy; offset the sum of its acknowledged
 * positions; idle_ms since its last request. */
struct kvd_repl_peer {
	char ip[56];
	unsigned port;
	int online;
	uint64_t offset;
	uint64_t idle_ms;
};
/* The replicas connected now, in the table's order, into *out (malloc'ed:
 * free it); their count, or -1 (out of memory, *out NULL). */
int kvd_repl_peers(struct kvd_server *srv, struct kvd_repl_peer **out);

/* For STATS and /metrics: role (0 primary, 1 replica), replicas heard
 * from within min-replicas-max-lag, the offset (sum of the shards'
 * positions), and lag: on a replica, how far behind its primary it was
 * at the last reply (records) and ms since it heard from it; on a
 * primary, the largest lag among its replicas in records. */
struct kvd_repl_stat {
	int replica;
	int link_up;
	unsigned replicas;
	uint64_t offset;
	uint64_t lag_records;
	uint64_t lag_ms;
	/* Resyncs this server answered as a primary since it started (kept
	 * across a change of role): full copies, continuations, and
	 * continuations asked for and refused (each also a full copy). */
	uint64_t syncs_full;
	uint64_t syncs_partial_ok;
	uint64_t syncs_partial_err;
};
void kvd_repl_stat(struct kvd_server *srv, struct kvd_repl_stat *s);

/* Sum of shard next LSNs - 1: the replication offset. */
uint64_t kvd_repl_offset(struct kvd_server *srv);

/* ---- shared by repl.c and replica.c ---- */

#define KVD_REPLID_LEN 40

/* The replication ids and where the second one ended: its next LSN per
 * shard (a replica of the old primary at or below it may continue). */
struct kvd_repl_ids {
	char replid[KVD_REPLID_LEN + 1];
	char replid2[KVD_REPLID_LEN + 1];
	uint64_t sw[KVD_MAX_SHARDS];
};

/* What the replica's link reports (INFO, ROLE); under kvd_repl_lock. */
struct kvd_repl_link {
	int replica;	      /* following a primary */
	char host[256];	      /* the primary */
	unsigned port;	      /* as given: its RESP port if resp, else native */
	int resp;	      /* port is the primary's RESP port */
	unsigned native_port; /* the port the link uses (found, if resp) */
	unsigned gen;	      /* bumped: a new primary, or a killed link */
	int up;		      /* streaming */
	int syncing;	      /* a full copy under way */
	uint64_t last_io_ms;
	uint64_t down_since_ms;	 /* the link is down since (0: never up) */
	uint64_t up_since_ms;	 /* when it came up */
	char laddr[64];		 /* its local "ip:port", while up */
	uint64_t primary_offset; /* the primary's, at its last reply */
};

void kvd_repl_lock(void);
void kvd_repl_unlock(void);
/* Under the lock. */
struct kvd_repl_ids *kvd_repl_ids(void);
struct kvd_repl_link *kvd_repl_link(void);
/* Write the ids to the data directory (under the lock); 0 or -1. */
int kvd_repl_save_ids(void);
/* The marker of a full copy under way: set before the shards are emptied,
 * cleared once the copy and its ids are on disk.  0 or -1. */
int kvd_repl_mark_full(int on);
/* A new random replication id into out (41 bytes). */
void kvd_repl_new_id(char *out);

/* repl_async.c: in durability async, published records may be lost by a
 * power cut.  At start (under the lock, the store open, nothing published
 * yet): a primary whose last run was async and did not stop cleanly takes
 * a new replication id, the old one good up to the recovered positions;
 * then an async run leaves its marker.  0, or -1 with err.  At a clean
 * stop, once the journals are flushed: the marker goes. */
int kvd_repl_async_begin(struct kvd_server *srv, int primary, char *err,
			 size_t errlen);
void kvd_repl_async_end(struct kvd_server *srv);

/* replica.c: the thread that follows a primary. */
int kvd_replica_start(struct kvd_server *srv);
void kvd_replica_stop(void);
/* Wake it: the primary it should follow changed. */
void kvd_replica_kick(void);

#endif
