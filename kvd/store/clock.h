/* clock.h - the two clocks kvd reads, and the buckets durations are
 * counted in.
 *
 * Wall time (kvd_now_ms) is what expiry is measured against: an absolute
 * expiry must mean the same after a restart.  Monotonic time
 * (kvd_mono_ns) measures durations.  Both are clock_gettime(2): any
 * thread, no lock, no failure.
 */
#ifndef KVD_CLOCK_H
#define KVD_CLOCK_H

#include <stdint.h>

/* Unix time in milliseconds (wall clock: expiry must survive restarts). */
uint64_t kvd_now_ms(void);
/* A monotonic clock in nanoseconds, for durations. */
uint64_t kvd_mono_ns(void);
/* The same clock in milliseconds at its tick's resolution (a few ms):
 * 3-6 ns a read where the precise one takes about 26 on a two-core
 * guest, cheap enough to read before every document a scan matches
 * (maxTimeMS, the slices reads give their thread back after). */
uint64_t kvd_coarse_ms(void);

/* Latency buckets, upper bounds in microseconds (Prometheus-style, with a
 * last +Inf bucket); kept per bucket and made cumulative on export. */
#define KVD_LAT_BOUNDS_US                                                      \
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,  \
	    500000, 1000000, 2500000
#define KVD_LAT_BUCKETS 15

/* Index of the bucket for a duration. */
unsigned kvd_lat_bucket(uint64_t ns);

#endif
