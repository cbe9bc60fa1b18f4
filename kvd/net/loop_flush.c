/* loop_flush.c - sync mode's journal flushes through an io thread's own
 * ring.  An io thread that commits its own writes (committer.c,
 * ring_batch) appends them to the journal and starts the data sync here
 * (IORING_OP_FSYNC with IORING_FSYNC_DATASYNC), then goes back to its
 * sockets; the completion wakes its loop through its eventfd, registered
 * with this ring, and the batch is answered from it.
 *
 * A ring apart from the thread's main one, because a thread other than the
 * owner must be able to wait for a flush and report it: a committer or an
 * exclusive section about to write the shard settles the batch in flight
 * itself, since the io thread that started it may be the one waiting for
 * them (an EXEC).  The main ring is single-issuer with its completions run
 * by its task; this one has neither (flags 0: the kernel's worker posts
 * the completion itself).  Every call on it is under its lock, and nothing
 * blocks under the lock: a waiter polls the ring's descriptor outside it.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop.h"

/* At most one flush in flight per shard and io thread; a full queue is
 * submitted at once anyway. */
#define JRING_ENTRIES 64

struct kvd_jring {
	struct io_uring ring;
	pthread_mutex_t mu;
};

static struct kvd_log_limit submit_limit = KVD_LOG_LIMIT_INIT(1000);

int kvd_io_jring_init(struct kvd_io *io, char *err, size_t errlen)
{
	struct kvd_jring *jr = calloc(1, sizeof(*jr));
	int rc;

	if (!jr) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((rc = io_uring_queue_init(JRING_ENTRIES, &jr->ring, 0))) {
		snprintf(err, errlen, "io_uring_queue_init: %s", strerror(-rc));
		free(jr);
		return -1;
	}
	if ((rc = io_uring_register_eventfd(&jr->ring, io->efd))) {
		snprintf(err, errlen, "io_uring_register_eventfd: %s",
			 strerror(-rc));
		io_uring_queue_exit(&jr->ring);
		free(jr);
		return -1;
	}
	pthread_mutex_init(&jr->mu, NULL);
	io->jring = jr;
	return 0;
}

void kvd_io_jring_free(struct kvd_io *io)
{
	struct kvd_jring *jr = io->jring;

	if (!jr)
		return;
	io_uring_queue_exit(&jr->ring);
	pthread_mutex_destroy(&jr->mu);
	free(jr);
	io->jring = NULL;
}

int kvd_io_jring_here(void)
{
	struct kvd_io *io = kvd_io_self();

	return io && io->jring;
}

/* Submit what is queued.  A submission the kernel refused for the moment
 * stays queued, and counts as in flight: the next flush or wait submits it
 * (never twice: the queue's head moves only when the kernel takes it). */
static void submit(struct kvd_jring *jr)
{
	int rc = io_uring_submit(&jr->ring);

	if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
		kvd_log_ratelimited(&submit_limit, KVD_LOG_ERROR,
				    "journal flush ring: io_uring_submit: %s",
				    strerror(-rc));
}

void *kvd_io_jring_flush(int fd, int fault, void *cookie)
{
	struct kvd_io *io = kvd_io_self();
	struct kvd_jring *jr = io ? io->jring : NULL;
	struct io_uring_sqe *sqe;

	if (!jr)
		return NULL;
	pthread_mutex_lock(&jr->mu);
	sqe = io_uring_get_sqe(&jr->ring);
	if (!sqe) { /* JRING_ENTRIES shards in flight on this thread */
		submit(jr);
		sqe = io_uring_get_sqe(&jr->ring);
	}
	if (!sqe) {
		pthread_mutex_unlock(&jr->mu);
		return NULL;
	}
	if (fault)
		io_uring_prep_nop(sqe);
	else
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, cookie);
	submit(jr);
	pthread_mutex_unlock(&jr->mu);
	return jr;
}

/* Report every completed flush (under the lock). */
static unsigned reap(struct kvd_jring *jr)
{
	struct io_uring_cqe *cqe;
	unsigned n = 0;

	while (io_uring_peek_cqe(&jr->ring, &cqe) == 0) {
		void *cookie = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&jr->ring, cqe);
		kvd_committer_flushed(cookie, res);
		n++;
	}
	return n;
}

void kvd_io_jring_wait(void *arg)
{
	struct kvd_jring *jr = arg;
	struct pollfd p = {.fd = jr->ring.ring_fd, .events = POLLIN};
	unsigned n;

	pthread_mutex_lock(&jr->mu);
	submit(jr); /* what a refused submission left queued */
	n = reap(jr);
	pthread_mutex_unlock(&jr->mu);
	/* None yet: wait for one outside the lock.  Its owner may reap it
	 * first, unseen here: the caller looks again within a millisecond. */
	if (!n && poll(&p, 1, 1) < 0 && errno != EINTR)
		log_error("journal flush ring: poll: %s", strerror(errno));
}

void kvd_io_jring_reap(struct kvd_io *io)
{
	struct kvd_jring *jr = io->jring;

	if (!jr)
		return;
	pthread_mutex_lock(&jr->mu);
	reap(jr);
	pthread_mutex_unlock(&jr->mu);
}
