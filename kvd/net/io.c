/* io.c - an io thread's state that needs no ring: the free lists of write
 * requests and pending slots, the hand-off of writes to the committers and
 * of their completions back (the done stack and its eventfd wake).  The
 * loop (loop.c) drives them; the dispatch fuzzer drives them too, with no
 * ring, so it runs this code rather than a copy of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"

#define WREQ_SMALL 992
#define FREE_MAX 4096

/* A wake that fails is repeated at will by the load: once a second. */
static struct kvd_log_limit wake_limit = KVD_LOG_LIMIT_INIT(1000);

/* ===================== Free lists ===================== */

struct kvd_wreq *kvd_wreq_new(struct kvd_io *io, size_t payload)
{
	struct kvd_wreq *w;

	if (payload <= WREQ_SMALL && io->free_wreq) {
		w = io->free_wreq;
		io->free_wreq = w->next;
		io->nfree_wreq--;
		return w;
	}
	if (payload < WREQ_SMALL)
		payload = WREQ_SMALL;
	w = malloc(sizeof(*w) + payload);
	if (w)
		w->cap = (uint32_t)payload;
	return w;
}

void kvd_wreq_free(struct kvd_io *io, struct kvd_wreq *w)
{
	if (w->cap == WREQ_SMALL && io->nfree_wreq < FREE_MAX) {
		w->next = io->free_wreq;
		io->free_wreq = w;
		io->nfree_wreq++;
		return;
	}
	free(w);
}

struct kvd_pend *kvd_pend_new(struct kvd_io *io)
{
	struct kvd_pend *p = io->free_pend;

	if (p) {
		io->free_pend = p->next;
		io->nfree_pend--;
		return p;
	}
	return malloc(sizeof(*p));
}

void kvd_pend_free(struct kvd_io *io, struct kvd_pend *p)
{
	if (io->nfree_pend < FREE_MAX) {
		p->next = io->free_pend;
		io->free_pend = p;
		io->nfree_pend++;
		return;
	}
	free(p);
}

void kvd_io_dispatch(struct kvd_io *io, struct kvd_wreq *w)
{
	w->io = io;
	io->inflight++;
	kvd_committer_submit(io->srv->com, w);
}

/* The io thread running on this thread, if any. */
static __thread struct kvd_io *self_io;

void kvd_io_enter(struct kvd_io *io)
{
	self_io = io;
}

struct kvd_io *kvd_io_self(void)
{
	return self_io;
}

void kvd_io_complete(struct kvd_io *io, struct kvd_wreq *w)
{
	struct kvd_wreq *old;

	if (io == self_io) { /* committed on this thread: no hop back */
		w->next = io->local_done;
		io->local_done = w;
		return;
	}
	old = atomic_load_explicit(&io->done, memory_order_relaxed);

	do
		w->next = old;
	while (!atomic_compare_exchange_weak_explicit(
	    &io->done, &old, w, memory_order_release, memory_order_relaxed));
	if (!old) {
		uint64_t one = 1;

		if (write(io->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			kvd_log_ratelimited(&wake_limit, KVD_LOG_ERROR,
					    "io %u: cannot wake: %s", io->idx,
					    strerror(errno));
	}
}

void kvd_io_completed(struct kvd_io *io, struct kvd_wreq *w)
{
	/* Commits just became visible: later reads need fresh snapshots. */
	if (w)
		kvd_reader_reset(io->reader);
	while (w) {
		struct kvd_wreq *next = w->next;

		io->inflight--;
		kvd_conn_wdone(w);
		w = next;
	}
}
