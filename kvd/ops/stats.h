/* stats.h - the server's counters, gathered from every thread on demand.
 * Each thread counts into its own structure (see kvd_count); nothing is
 * shared on the hot path, and a STATS request sums them. */
#ifndef KVD_STATS_H
#define KVD_STATS_H

#include <stdint.h>

#include "kv_buf.h"
#include "kv_proto.h"

struct kvd_conn;
/* The /metrics listener's HTTP requests (its kvd_proto, metrics.c). */
size_t kvd_http_input(struct kvd_conn *c, const uint8_t *p, size_t n);

struct kvd_io;
struct kvd_server;

/* Every counter summed over the threads that keep it. */
struct kvd_totals {
	uint64_t calls[KV_OP_MAX], errors[KV_OP_MAX];
	uint64_t bytes_in, bytes_out, accepted, refused, conns;
	uint64_t commits, writes, max_batch, commit_ns, failures, reaped;
	uint64_t inline_commits, ring_flushes;
	uint64_t resp_calls, resp_errors;
	uint64_t write_pauses, preauth_closed;
	/* TLS handshakes in flight (all io threads), the most one io thread
	 * had at once, and how often one's TLS accepts stopped at the bound */
	uint64_t tls_hs, tls_hs_peak, tls_hs_pauses;
};

void kvd_stats_sum(struct kvd_server *srv, struct kvd_totals *t);

/* Append the Prometheus text exposition (GET /metrics) to b. */
void kvd_metrics_render(struct kvd_io *io, struct kv_buf *b);

/* Append the STATS map (documented in docs/protocol.md) to b. */
void kvd_stats_encode(struct kvd_io *io, struct kv_buf *b);

/* INFO sections, for RESP (docs/resp.md lists their fields). */
enum {
	KVD_INFO_SERVER = 1u << 0,
	KVD_INFO_CLIENTS = 1u << 1,
	KVD_INFO_PERSISTENCE = 1u << 2,
	KVD_INFO_STATS = 1u << 3,
	KVD_INFO_KEYSPACE = 1u << 4,
	KVD_INFO_ALL = (1u << 5) - 1,
};

/* Append the Redis INFO text of the sections asked for to b (CRLF lines,
 * sections separated by an empty line). */
void kvd_stats_info(struct kvd_io *io, unsigned sections, struct kv_buf *b);

/* INFO server's run_id: 40 hex digits, random per process start. */
const char *kvd_run_id(void);
/* CONFIG RESETSTAT: INFO stats counts from now on (STATS and /metrics,
 * whose counters must only grow, do not change). */
void kvd_stats_reset(struct kvd_server *srv);

/* One INFO line, "text\r\n", cut to 509 bytes (stats.c, resp_intro.c). */
struct kv_buf;
void kvd_info_line(struct kv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
