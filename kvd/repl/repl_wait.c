/* repl_wait.c - WAIT and min-replicas-to-ack, on a primary: a WAIT is
 * held by the sender until enough replicas acknowledged the positions of
 * its time (or its timeout passes), and with min-replicas-to-ack each
 * committed batch is held until enough replicas have it (or
 * min-replicas-max-lag passes: NO_REPLICAS).  A replica acknowledges by
 * its next pull (repl.c).  The sender runs all of it but
 * kvd_repl_committed (committers) and kvd_repl_wait (io threads).
 */
#include "repl_int.h"

#include <stdlib.h>
#include <string.h>

#include "kv_mp.h"
#include "kv_status.h"
#include "net/loop.h"

/* Replicas that have flushed everything up to target (last LSNs). */
static unsigned acked(const uint64_t *target)
{
	unsigned n = 0;

	for (unsigned k = 0; k < R.nreps; k++) {
		unsigned i;

		for (i = 0; i < R.srv->nshards; i++)
			if (R.reps[k].next[i] <= target[i])
				break;
		n += R.reps[k].online && i == R.srv->nshards;
	}
	return n;
}

/* A WAIT's answer: n replicas have its positions, or its time is up. */
static void wait_reply(struct kvd_wreq *w, unsigned n)
{
	struct job *j = repl_job_of(w);
	struct kv_buf b = {0};

	if (j->answer) {
		j->answer(&b, n);
		repl_job_reply(w, &b, 0);
		return;
	}
	repl_frame_begin(&b, 2, KV_OK);
	kv_mp_uint(&b, n);
	repl_job_reply(w, &b, 1);
}

int repl_wait_try(struct kvd_wreq *w, int last)
{
	struct job *j = repl_job_of(w);
	unsigned n = acked(j->pos);

	if (n >= j->nwant || last ||
	    (j->deadline_ms && repl_mono_ms() >= j->deadline_ms)) {
		wait_reply(w, n);
		return 1;
	}
	return 0;
}

static void complete_list(struct kvd_wreq *w, int status)
{
	while (w) {
		struct kvd_wreq *next = w->next;

		if (status && w->op.status == KV_OK)
			w->op.status = status;
		kvd_io_complete(w->io, w);
		w = next;
	}
}

/* Release the writes enough replicas have; past min-replicas-max-lag
 * without them, answer NO_REPLICAS (the write is on the primary's disk,
 * but not on enough replicas'). */
void repl_release_holds(int last)
{
	struct hold **hp = &R.held;
	unsigned need = KVD_LIVE(R.srv->cfg->min_replicas_to_ack);
	unsigned lag = KVD_LIVE(R.srv->cfg->min_replicas_max_lag);
	uint64_t now = repl_mono_ms(), target[KVD_MAX_SHARDS] = {0};

	while (*hp) {
		struct hold *h = *hp;
		int status = -1;

		target[h->shard] = h->lsn;
		if (last || acked(target) >= need)
			status = 0;
		else if (lag && now - h->since_ms > lag * 1000ull)
			status = KV_NO_REPLICAS;
		target[h->shard] = 0;
		if (status < 0) {
			hp = &h->next;
			continue;
		}
		*hp = h->next;
		complete_list(h->list, status);
		free(h);
	}
}

void repl_update_good(void)
{
	unsigned lag = KVD_LIVE(R.srv->cfg->min_replicas_max_lag), n = 0;
	uint64_t now = repl_mono_ms();

	for (unsigned k = 0; k < R.nreps; k++)
		n += R.reps[k].online &&
		     (!lag || now - R.reps[k].last_ms <= lag * 1000ull);
	atomic_store(&R.good, n);
}

/* ===================== Committers' side ===================== */

static void kick(void)
{
	pthread_mutex_lock(&R.qmu);
	R.kick = 1;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

void kvd_repl_committed(struct kvd_server *srv, unsigned shard,
			struct kvd_wreq *list)
{
	struct hold *h = NULL;

	/* A replica's own applying, and everything when nobody asked for
	 * acknowledgements, goes back at once. */
	if (list && KVD_LIVE(srv->cfg->min_replicas_to_ack) &&
	    !atomic_load(&R.is_replica) && list->op.kind < KVD_W_REPL &&
	    !atomic_load(&srv->stopping) && R.started)
		h = malloc(sizeof(*h));
	if (h) {
		h->next = NULL;
		h->shard = shard;
		h->lsn = kvd_shard_pub_lsn(srv->store, shard);
		h->since_ms = repl_mono_ms();
		h->list = list;
		pthread_mutex_lock(&R.qmu);
		*R.holds_tail = h;
		R.holds_tail = &h->next;
		pthread_cond_signal(&R.qcv);
		pthread_mutex_unlock(&R.qmu);
	} else {
		complete_list(list, 0);
	}
	if (atomic_load(&R.parked))
		kick();
}

/* ===================== Io threads' side ===================== */

void repl_wait_targets(struct kvd_server *srv, uint64_t *pos)
{
	for (unsigned i = 0; i < srv->nshards; i++)
		pos[i] = kvd_shard_pub_lsn(srv->store, i);
}

int kvd_repl_wait(struct kvd_conn *c, unsigned op, uint64_t n, uint64_t ms,
		  kvd_repl_wait_fn answer)
{
	struct kvd_wreq *w;
	struct job *j;

	if (!(w = repl_job_new(c, op, JOB_WAIT)))
		return -1;
	j = repl_job_of(w);
	j->answer = answer;
	j->nwant = n > 1000 ? 1000 : (unsigned)n;
	if (ms)
		j->deadline_ms = repl_mono_ms() + ms;
	repl_wait_targets(c->io->srv, j->pos);
	repl_job_submit(c, w);
	return 0;
}
