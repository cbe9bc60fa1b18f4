/* stats.h - the server's counters, gathered from every thread on demand.
 * Each thread counts into its own structure (see kvd_count); nothing is
 * shared on the hot path, and a STATS request sums them. */
#ifndef KVD_STATS_H
#define KVD_STATS_H

#include "kv_buf.h"

struct kvd_io;

/* Append the STATS map (documented in docs/protocol.md) to b. */
void kvd_stats_encode(struct kvd_io *io, struct kv_buf *b);

#endif
