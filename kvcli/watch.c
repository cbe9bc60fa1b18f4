/* watch.c - kvcli --stat and --latency: a server watched over time, as
 * redis-cli's options of the same names do, until -r COUNT is reached or
 * Ctrl-C.
 *
 *   --stat     a line per interval (-i, 1 s): keys, operations per second,
 *              memory (the shards' used bytes), connections; from STATS.
 *   --latency  PING round trips, one every 10 ms (or -i): min, avg and max
 *              in milliseconds, redrawn in place on a terminal, printed
 *              once more at the end on a line of its own.
 *
 * Ctrl-C is caught only while watching: it ends the loop and the summary
 * is still printed.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kv_mp.h"
#include "kvcli.h"

#define LATENCY_SAMPLE_S 0.01

volatile int cli_interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	cli_interrupted = 1;
}

/* SIGINT ends the watch instead of the process; no SA_RESTART, so a
 * sleep is cut short. */
static void catch_sigint(void)
{
	struct sigaction sa = {.sa_handler = on_sigint};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cli_sleep(double seconds)
{
	struct timespec ts;

	if (seconds <= 0)
		return cli_interrupted;
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (!cli_interrupted && nanosleep(&ts, &ts) && errno == EINTR)
		;
	return cli_interrupted;
}

/* ===================== --stat ===================== */

/* Sum the unsigned entries called inner of the maps held by the top-level
 * entry outer of map (STATS: "ops" is a map of maps, "shards" an array of
 * maps).  0, or -1 when map is not shaped so. */
static int sum_inner(kvc_val map, const char *outer, const char *inner,
		     uint64_t *sum)
{
	const uint8_t *p = map.p, *end = p + map.len;
	struct kv_mp_obj o, k;

	*sum = 0;
	if (kv_mp_next(&p, end, &o) || o.type != KV_MP_MAP)
		return -1;
	for (uint32_t i = 0; i < o.len; i++) {
		struct kv_mp_obj box;

		if (kv_mp_next(&p, end, &k))
			return -1;
		if (k.type != KV_MP_STR || k.len != strlen(outer) ||
		    memcmp(k.p, outer, k.len)) {
			if (kv_mp_skip(&p, end, 16))
				return -1;
			continue;
		}
		if (kv_mp_next(&p, end, &box) ||
		    (box.type != KV_MP_MAP && box.type != KV_MP_ARRAY))
			return -1;
		for (uint32_t j = 0; j < box.len; j++) {
			const uint8_t *q;
			uint64_t v;

			if (box.type == KV_MP_MAP && kv_mp_skip(&p, end, 16))
				return -1;
			q = p;
			if (kv_mp_skip(&p, end, 16))
				return -1;
			if (!kvc_map_uint((kvc_val){q, (size_t)(p - q)}, inner,
					  &v))
				*sum += v;
		}
		return 0;
	}
	return 0; /* no such entry: nothing yet (no op counted) */
}

static void human_bytes(char *out, size_t n, uint64_t b)
{
	static const char units[] = "BKMGTP";
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, n, u ? "%.2f%c" : "%.0f%c", v, units[u]);
}

int cli_stat(struct cli *cli)
{
	uint64_t prev_calls = 0;
	double prev_t = 0, interval = cli->interval > 0 ? cli->interval : 1;
	int rc;

	if (cli_connect(cli))
		return EXIT_ERROR;
	catch_sigint();
	for (long long n = 0; cli->repeat < 0 || n < cli->repeat; n++) {
		uint64_t keys, mem, calls, conns = 0;
		kvc_val map;
		char mtext[32], ops[32];
		double t;

		if (n && cli_sleep(interval))
			break;
		if ((rc = kvc_stats(cli->c, &map)))
			return cli_fail(cli, "stat", rc);
		t = now_s();
		if (sum_inner(map, "shards", "entries", &keys) ||
		    sum_inner(map, "shards", "used_bytes", &mem) ||
		    sum_inner(map, "ops", "calls", &calls) ||
		    kvc_map_uint(map, "connections", &conns)) {
			fprintf(stderr,
				"kvcli: stat: unexpected STATS reply\n");
			return EXIT_ERROR;
		}
		human_bytes(mtext, sizeof(mtext), mem);
		if (n)
			snprintf(ops, sizeof(ops), "%.0f",
				 (double)(calls - prev_calls) / (t - prev_t));
		else
			snprintf(ops, sizeof(ops), "-");
		if (n % 20 == 0)
			printf("------- data ------ --- load --- - clients -\n"
			       "%-12s %-8s %-14s %s\n",
			       "keys", "mem", "ops/s", "connections");
		printf("%-12llu %-8s %-14s %llu\n", (unsigned long long)keys,
		       mtext, ops, (unsigned long long)conns);
		fflush(stdout);
		prev_calls = calls + 1; /* this STATS counts itself next time */
		prev_t = t;
	}
	return EXIT_OK;
}

/* ===================== --latency ===================== */

static void latency_line(int tty, double min, double max, double sum,
			 long long n, int last)
{
	if (!n)
		return;
	printf("%smin: %.3f, max: %.3f, avg: %.3f (%lld samples)%s",
	       tty ? "\r\033[K" : "", min * 1e3, max * 1e3, sum / n * 1e3, n,
	       last || !tty ? "\n" : "");
	fflush(stdout);
}

int cli_latency(struct cli *cli)
{
	double min = 0, max = 0, sum = 0, pause, last_draw = 0;
	int tty = isatty(1), rc;
	long long n;

	if (cli_connect(cli))
		return EXIT_ERROR;
	pause = cli->interval > 0 ? cli->interval : LATENCY_SAMPLE_S;
	catch_sigint();
	for (n = 0; (cli->repeat < 0 || n < cli->repeat) && !cli_interrupted;
	     n++) {
		double t0 = now_s(), d;

		if ((rc = kvc_ping(cli->c, NULL, 0, NULL))) {
			latency_line(tty, min, max, sum, n, 1);
			return cli_fail(cli, "latency", rc);
		}
		d = now_s() - t0;
		min = n == 0 || d < min ? d : min;
		max = d > max ? d : max;
		sum += d;
		/* On a terminal, redraw a few times a second. */
		if (tty && t0 - last_draw >= 0.1) {
			latency_line(tty, min, max, sum, n + 1, 0);
			last_draw = t0;
		}
		if (cli_sleep(pause)) {
			n++;
			break;
		}
	}
	latency_line(tty, min, max, sum, n, 1);
	return EXIT_OK;
}
