/* group_commit.c - how a device takes group commits spread over several
 * journals: W writer threads, each with one durable write in flight (as a
 * client one request at a time), spread over J journal files, each with a
 * flusher of its own that takes every write pending on its journal, appends
 * them with one pwrite and makes them durable with one fdatasync, then
 * answers them (kvd's sync path: a journal per shard, its writes grouped).
 * Run with J = 1 and J = 2 over the same W: on a device whose flushes of
 * two files side by side cost more than one flush of one file, the shard
 * count is a cost of sync writes from few clients (docs/architecture.md,
 * section 2).  DEPTH flushers a journal (default 1) take turns, so that
 * up to DEPTH flushes of one journal are in flight, answered in order:
 * what a second flush in flight per shard would give (section 12).
 * GATHER microseconds (default 0): a flusher that has answered n writes
 * waits, before it takes the next, until n writes are pending or GATHER
 * has passed (the writers it answered are about to send again: section
 * 12, "Gathering").  A measurement tool, not a test: nothing is asserted.
 *
 *   group_commit DIR WRITERS JOURNALS [SECONDS [DEPTH [GATHER]]]
 *   (3 s, depth 1, gather 0)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_JOURNALS 8
#define MAX_WRITERS 1024
#define REC_BYTES 150	       /* a 100-byte SET's record, about */
#define FILE_BYTES (64u << 20) /* pre-written, as a journal segment */

#define MAX_DEPTH 8

struct journal {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	unsigned long long sent, taken,
	    durable; /* writes numbered per journal */
	/* flushes numbered as they are started, and the next to answer:
	 * answered in that order whatever order they end in */
	unsigned long long started, answered;
	int fd;
	off_t off;
	pthread_t t[MAX_DEPTH];
};

static struct journal journals[MAX_JOURNALS];
static volatile int stop;
static unsigned gather_us;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One write at a time on journal j until stop; returns how many. */
static void *writer_main(void *arg)
{
	struct journal *j = arg;
	unsigned long long n = 0;

	while (!stop) {
		unsigned long long mine;

		pthread_mutex_lock(&j->mu);
		mine = ++j->sent;
		pthread_cond_signal(&j->work);
		while (j->durable < mine && !stop)
			pthread_cond_wait(&j->done, &j->mu);
		pthread_mutex_unlock(&j->mu);
		n++;
	}
	return (void *)(uintptr_t)n;
}

/* With gather_us: wait (j->mu held) until last writes are pending, or
 * gather_us has passed. */
static void gather(struct journal *j, unsigned long long last)
{
	struct timespec ts;

	if (!gather_us || j->sent - j->taken >= last)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)gather_us * 1000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	while (j->sent - j->taken < last && !stop &&
	       pthread_cond_timedwait(&j->work, &j->mu, &ts) == 0)
		;
}

/* Take every pending write, append, flush, answer: the group commit.  A
 * flush answers its writes only after every flush started before it has
 * answered, as a journal's order requires. */
static void *flusher_main(void *arg)
{
	static const char recs[REC_BYTES * MAX_WRITERS];
	struct journal *j = arg;
	unsigned long long last = 0; /* the writes of this flusher's last */

	for (;;) {
		unsigned long long end, n, mine;
		size_t len;
		off_t off;

		pthread_mutex_lock(&j->mu);
		while (j->sent == j->taken && !stop)
			pthread_cond_wait(&j->work, &j->mu);
		gather(j, last);
		if (stop) {
			pthread_mutex_unlock(&j->mu);
			return NULL;
		}
		end = j->sent;
		n = end - j->taken;
		last = n;
		j->taken = end;
		mine = j->started++;
		len = (size_t)n * REC_BYTES;
		if (j->off + (off_t)len > (off_t)FILE_BYTES)
			j->off = 0;
		off = j->off;
		j->off += (off_t)len;
		pthread_mutex_unlock(&j->mu);
		if (pwrite(j->fd, recs, len, off) != (ssize_t)len ||
		    fdatasync(j->fd) < 0) {
			perror("journal");
			exit(1);
		}
		pthread_mutex_lock(&j->mu);
		while (j->answered != mine)
			pthread_cond_wait(&j->done, &j->mu);
		j->durable = end;
		j->answered++;
		pthread_cond_broadcast(&j->done);
		pthread_mutex_unlock(&j->mu);
	}
}

/* A file of FILE_BYTES written with zeros and flushed, so that an append
 * changes no extent (kvd's segments are made so). */
static int prewritten(const char *dir, unsigned i)
{
	static char zero[1 << 20];
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/group-commit-%u", dir, i);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	unlink(path);
	for (unsigned m = 0; m < FILE_BYTES >> 20; m++)
		if (write(fd, zero, sizeof(zero)) != sizeof(zero))
			return -1;
	return fsync(fd) < 0 ? -1 : fd;
}

int main(int argc, char **argv)
{
	static pthread_t w[MAX_WRITERS];
	unsigned nw = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
	unsigned nj = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
	double secs = argc > 4 ? atof(argv[4]) : 3.0, t0, el;
	unsigned depth = argc > 5 ? (unsigned)atoi(argv[5]) : 1;
	unsigned long long total = 0, flushes = 0;

	gather_us = argc > 6 ? (unsigned)atoi(argv[6]) : 0;
	if (argc < 4 || !nw || nw > MAX_WRITERS || !nj || nj > MAX_JOURNALS ||
	    secs <= 0 || !depth || depth > MAX_DEPTH || gather_us > 1000000) {
		fprintf(stderr,
			"usage: %s DIR WRITERS JOURNALS [SECONDS [DEPTH "
			"[GATHER]]]\n",
			argv[0]);
		return 2;
	}
	for (unsigned i = 0; i < nj; i++) {
		pthread_mutex_init(&journals[i].mu, NULL);
		pthread_cond_init(&journals[i].work, NULL);
		pthread_cond_init(&journals[i].done, NULL);
		if ((journals[i].fd = prewritten(argv[1], i)) < 0) {
			perror(argv[1]);
			return 1;
		}
		for (unsigned d = 0; d < depth; d++)
			pthread_create(&journals[i].t[d], NULL, flusher_main,
				       &journals[i]);
	}
	t0 = now();
	for (unsigned i = 0; i < nw; i++)
		pthread_create(&w[i], NULL, writer_main, &journals[i % nj]);
	usleep((useconds_t)(secs * 1e6));
	stop = 1;
	for (unsigned i = 0; i < nj; i++) {
		pthread_mutex_lock(&journals[i].mu);
		pthread_cond_broadcast(&journals[i].done);
		pthread_cond_broadcast(&journals[i].work);
		pthread_mutex_unlock(&journals[i].mu);
	}
	for (unsigned i = 0; i < nw; i++) {
		void *r;

		pthread_join(w[i], &r);
		total += (uintptr_t)r;
	}
	el = now() - t0;
	for (unsigned i = 0; i < nj; i++) {
		for (unsigned d = 0; d < depth; d++)
			pthread_join(journals[i].t[d], NULL);
		flushes += journals[i].answered;
	}
	printf("writers %u journals %u depth %u gather %u: %.0f writes/s, "
	       "%.0f flushes/s, %.1f writes a flush, %.0f us a write\n",
	       nw, nj, depth, gather_us, total / el, flushes / el,
	       flushes ? (double)total / flushes : 0.0,
	       total ? el * nw / total * 1e6 : 0.0);
	return 0;
}
