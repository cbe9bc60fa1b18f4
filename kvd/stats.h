/* stats.h - the server's counters, gathered from every thread on demand.
 * Each thread counts into its own structure (see kvd_count); nothing is
 * shared on the hot path, and a STATS request sums them. */
#ifndef KVD_STATS_H
#define KVD_STATS_H

#include "kv_buf.h"

struct kvd_io;

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

#endif
