/* clock.c - the two clocks kvd reads: wall time for expiry (it must mean the
 * same after a restart) and monotonic time for measuring durations
 * (clock.h). */
#include "clock.h"

#include <time.h>

uint64_t kvd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t kvd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

uint64_t kvd_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

unsigned kvd_lat_bucket(uint64_t ns)
{
	static const uint64_t bounds_us[] = {KVD_LAT_BOUNDS_US};
	unsigned i = 0;

	while (i < KVD_LAT_BUCKETS - 1 && ns > bounds_us[i] * 1000)
		i++;
	return i;
}
