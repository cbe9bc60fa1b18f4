/* kvd.h - the server's shared types: the server, its io threads' counters,
 * and a connection's place in its reply order.
 *
 * Ownership: an io thread allocates a kvd_wreq (shard.h), hands it to the
 * committer of the shard its keys live in, and gets it back through its
 * completion stack; only the owning io thread ever frees it.  A kvd_pend is the connection's
 * place in its reply order; it lives on the owning io thread only.
 */
#ifndef KVD_KVD_H
#define KVD_KVD_H

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"
#include "config.h"
#include "kv_proto.h"
#include "store.h"

struct kvd_io;
struct kvd_conn;

struct kvd_server {
	struct kvd_config *cfg;
	struct kvd_store *store;
	unsigned nshards;
	unsigned nio;
	struct kvd_io **io;
	struct kvd_commit *com;
	atomic_int stopping;
	atomic_uint nconns;
	uint64_t start_ms;
	unsigned port; /* as bound (differs from cfg when cfg says 0) */
	unsigned resp_port;
	unsigned metrics_port;
	unsigned mongo_port;
};

/* Replies are counted by status (the wire's are below 40: DOC_ERROR is
 * 38); any status above shares the last slot, which no status names
 * (/metrics: "OTHER"). */
#define KVD_NSTATUS 40

struct kvd_io_stats {
	kvd_counter replies[KV_OP_MAX][KVD_NSTATUS];
	kvd_counter lat[KV_OP_MAX][KVD_LAT_BUCKETS];
	kvd_counter lat_ns[KV_OP_MAX];
	kvd_counter bytes_in, bytes_out;
	kvd_counter accepted, refused, closed;
	kvd_counter resp_calls, resp_errors;
	/* connections that stopped being read: writes in flight over their
	 * bound (conn.c), and unauthenticated ones closed over their caps */
	kvd_counter write_pauses, preauth_closed;
	/* TLS handshakes in flight now and at most at once on this thread,
	 * and how often its TLS accepts stopped at the bound (loop.c) */
	kvd_counter tls_hs_now, tls_hs_peak, tls_hs_pauses;
	/* requests answered at once in this loop turn, timed at its end */
	uint32_t turn_ops[KV_OP_MAX];
};

static inline void kvd_count_reply(struct kvd_io_stats *s, unsigned op,
				   int status)
{
	unsigned st = status < 0 || status >= KVD_NSTATUS ? KVD_NSTATUS - 1
							  : (unsigned)status;

	kvd_count(&s->replies[op][st], 1);
}

/* A request answered in this turn without waiting for a commit. */
static inline void kvd_count_now(struct kvd_io_stats *s, unsigned op,
				 int status)
{
	kvd_count_reply(s, op, status);
	s->turn_ops[op]++;
}

static inline void kvd_count_latency(struct kvd_io_stats *s, unsigned op,
				     uint64_t ns, uint64_t n)
{
	kvd_count(&s->lat[op][kvd_lat_bucket(ns)], n);
	kvd_count(&s->lat_ns[op], ns * n);
}

struct kvd_pend {
	struct kvd_pend *next;
	struct kvd_conn *conn;
	uint16_t op; /* the request's opcode (native or RESP command) */
	uint8_t done;
	uint8_t raw;	/* val holds the reply's bytes, ready to send */
	uint32_t parts; /* wreqs still out */
	int status;	/* first failure among the parts, else KV_OK */
	uint32_t aux;	/* protocol-specific reply detail */
	int64_t result; /* sum of the parts' results */
	uint8_t *val;	/* GETDEL's old value, or a deferred reply (malloc'd) */
	size_t vlen;	/* a deferred reply may exceed 4 GiB (max-output) */
	uint64_t t0_ns; /* when the request arrived (its loop turn began) */
};

/* kvd_pend.aux of a raw native reply made elsewhere (the replication
 * sender): counted under its op and status when it is sent. */
#define KVD_PEND_COUNT 0x80000000u
/* kvd_pend.aux of a reply counted but not sent (RESP CLIENT REPLY OFF or
 * SKIP): a bit the protocols' own aux values leave free. */
#define KVD_PEND_MUTE 0x40000000u

/* server.c: open the store with the server's hook, and start the
 * committers with theirs (main.c, and the dispatch fuzzer).  0, or -1
 * (with a reason in err). */
int kvd_server_open_store(struct kvd_server *srv, char *err, size_t errlen);
int kvd_server_start_committers(struct kvd_server *srv);

#endif
