/* repl.c - replication, the primary's side: the sender thread, its queue
 * and the replicas' table, the pulls of journal records, and the io
 * threads' side of REPLSYNC, REPLPULL, REPLSNAP and WAIT (repl.h says how
 * the pieces fit; repl_int.h which file does what).
 *
 * Threads: io threads queue jobs (a kvd_wreq whose reply comes back ready
 * to send, pend->raw) and committers hand over committed batches; both only
 * touch the queue under qmu.  The sender alone owns the replicas' table,
 * the snapshots of full copies, and the held requests; readers of the
 * table (INFO, ROLE) take tmu, which the sender holds only to change it.
 * Ids and the replica link's status are under the state lock (smu).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "repl_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "native/cmd.h"
#include "kv_mp.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "resp/resp.h"
#include "store.h"

/* A pull with nothing to send waits this long for records, then answers
 * empty: the replica hears from its primary at least this often. */
#define PULL_WAIT_MS 1000
/* The journal a replica needed when it went away is kept this long (as
 * Redis's repl-backlog-ttl), within the backlog, so that it can come back
 * and continue. */
#define GONE_KEEP_MS 3600000
/* A full copy's snapshot is dropped when its replica is silent this long. */
#define SESSION_IDLE_MS 60000

/* The one state of the primary's side (repl_int.h). */
struct repl_state kvd_repl_state = {
    .qmu = PTHREAD_MUTEX_INITIALIZER,
    .qcv = PTHREAD_COND_INITIALIZER,
    .jobs_tail = &R.jobs,
    .holds_tail = &R.holds,
    .tmu = PTHREAD_MUTEX_INITIALIZER,
    .smu = PTHREAD_MUTEX_INITIALIZER,
};

/* ===================== Replies ===================== */

void repl_frame_begin(struct kv_buf *b, uint32_t items, int status)
{
	b->len = 0;
	kv_buf_append(b, "\0\0\0\0", 4);
	kv_mp_array(b, items);
	kv_mp_uint(b, (uint64_t)status);
}

/* Hand the reply in b (a frame begun by repl_frame_begin, or another
 * protocol's answer, sent as it is) to the request's io thread; b is left
 * empty. */
void repl_job_reply(struct kvd_wreq *w, struct kv_buf *b, int native)
{
	static const uint8_t oom[] = {0, 0, 0, 2, 0x91, KV_INTERNAL};

	if (native && !b->err)
		kv_store_be32(b->data, (uint32_t)(b->len - 4));
	if (b->err || !b->data) {
		kv_buf_free(b);
		if ((b->data = malloc(sizeof(oom))))
			memcpy(b->data, oom, sizeof(oom));
		b->len = b->data ? sizeof(oom) : 0;
	}
	w->op.val = b->data;
	w->op.vlen = (uint32_t)b->len;
	w->op.status = native && b->len > 5 ? b->data[5] : KV_OK;
	memset(b, 0, sizeof(*b));
	kvd_io_complete(w->io, w);
}

void repl_job_status(struct kvd_wreq *w, int status, const char *text)
{
	struct kv_buf b = {0};

	repl_frame_begin(&b, text ? 2 : 1, status);
	if (text)
		kv_mp_cstr(&b, text);
	repl_job_reply(w, &b, 1);
}

/* ===================== The replicas' table ===================== */

struct rep *repl_rep_find(uint64_t conn_id)
{
	for (unsigned i = 0; i < R.nreps; i++)
		if (R.reps[i].conn_id == conn_id)
			return &R.reps[i];
	return NULL;
}

void repl_rep_clear(struct rep *rp)
{
	for (unsigned i = 0; i < KVD_MAX_SHARDS; i++) {
		kvd_journal_close(rp->rd[i]);
		rp->rd[i] = NULL;
	}
	kvd_snapshot_end(rp->sn);
	rp->sn = NULL;
}

struct rep *repl_rep_add(const struct job *j)
{
	struct rep *rp = repl_rep_find(j->conn_id), *n;

	pthread_mutex_lock(&R.tmu);
	if (!rp) {
		n = realloc(R.reps, (R.nreps + 1) * sizeof(*n));
		if (n) {
			R.reps = n;
			rp = &R.reps[R.nreps++];
			memset(rp, 0, sizeof(*rp));
		}
	}
	if (rp) {
		repl_rep_clear(rp);
		rp->conn_id = j->conn_id;
		snprintf(rp->ip, sizeof(rp->ip), "%s", j->ip);
		rp->port = j->port;
		rp->online = 0;
		rp->last_ms = repl_mono_ms();
		memcpy(rp->next, j->pos, sizeof(rp->next));
		memcpy(rp->sent, j->pos, sizeof(rp->sent));
	}
	pthread_mutex_unlock(&R.tmu);
	return rp;
}

void repl_rep_del(uint64_t conn_id)
{
	struct rep *rp = repl_rep_find(conn_id);

	if (!rp)
		return;
	if (rp->online) {
		for (unsigned i = 0; i < R.srv->nshards; i++)
			if (!R.gone[i] || rp->next[i] < R.gone[i])
				R.gone[i] = rp->next[i];
		R.gone_ms = repl_mono_ms();
	}
	pthread_mutex_lock(&R.tmu);
	repl_rep_clear(rp);
	*rp = R.reps[--R.nreps];
	pthread_mutex_unlock(&R.tmu);
}

/* The journal every replica still needs stays (within the backlog), and
 * what one that went away needed, for a while. */
void repl_update_holds(void)
{
	struct kvd_server *srv = R.srv;

	if (R.gone_ms && repl_mono_ms() - R.gone_ms > GONE_KEEP_MS) {
		memset(R.gone, 0, sizeof(R.gone));
		R.gone_ms = 0;
	}
	for (unsigned i = 0; i < srv->nshards; i++) {
		uint64_t min = R.gone[i];

		for (unsigned k = 0; k < R.nreps; k++)
			if (!min || R.reps[k].next[i] < min)
				min = R.reps[k].next[i];
		kvd_shard_hold(srv->store, i, min);
	}
}

uint64_t repl_rep_offset(const struct rep *rp, unsigned n)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < n; i++)
		off += rp->next[i] ? rp->next[i] - 1 : 0;
	return off;
}

/* INFO replication and ROLE's view of the table (resp_repl.c). */
int kvd_repl_peers(struct kvd_server *srv, struct kvd_repl_peer **out)
{
	uint64_t now = repl_mono_ms();
	int n;

	pthread_mutex_lock(&R.tmu);
	n = (int)R.nreps;
	*out = calloc(R.nreps ? R.nreps : 1, sizeof(**out));
	for (unsigned k = 0; *out && k < R.nreps; k++) {
		const struct rep *rp = &R.reps[k];
		struct kvd_repl_peer *p = &(*out)[k];

		snprintf(p->ip, sizeof(p->ip), "%s", rp->ip);
		p->port = rp->port;
		p->online = rp->online;
		p->offset = repl_rep_offset(rp, srv->nshards);
		p->idle_ms = now - rp->last_ms;
	}
	pthread_mutex_unlock(&R.tmu);
	return *out ? n : -1;
}

/* ===================== Pulls ===================== */

/* Records from the replica's positions into recs: [u16 shard][u64 lsn]
 * [u8 type][u32 length][journal payload], little-endian.  0, or a status
 * when a position is no longer in the journal. */
static int pull_build(struct rep *rp, struct kv_buf *recs, unsigned *n)
{
	struct kvd_server *srv = R.srv;

	*n = 0;
	for (unsigned i = 0; i < srv->nshards; i++) {
		uint64_t upto = kvd_shard_pub_lsn(srv->store, i), lsn;
		const void *pl;
		uint32_t len;
		uint8_t type;
		int rc;

		if (rp->next[i] > upto)
			continue;
		if (rp->rd[i] && kvd_journal_lsn(rp->rd[i]) != rp->next[i]) {
			kvd_journal_close(rp->rd[i]);
			rp->rd[i] = NULL;
		}
		if (!rp->rd[i] &&
		    kvd_journal_open(srv->store, i, rp->next[i], &rp->rd[i]))
			return KV_NOT_FOUND;
		while (recs->len < REPL_REPLY_BYTES &&
		       (rc = kvd_journal_next(rp->rd[i], upto, &lsn, &type, &pl,
					      &len)) > 0) {
			uint16_t s = (uint16_t)i;

			kv_buf_append(recs, &s, 2);
			kv_buf_append(recs, &lsn, 8);
			kv_buf_append(recs, &type, 1);
			kv_buf_append(recs, &len, 4);
			kv_buf_append(recs, pl, len);
			rp->sent[i] = lsn + 1;
			(*n)++;
		}
		if (rc < 0)
			return KV_NOT_FOUND;
		/* the next pull starts where this one stopped */
		if (recs->len >= REPL_REPLY_BYTES)
			break;
	}
	return recs->err ? KV_INTERNAL : 0;
}

/* Answer a pull if there is something to send or its wait is over: 1 when
 * answered. */
static int pull_try(struct kvd_wreq *w, int last)
{
	struct job *j = repl_job_of(w);
	struct rep *rp = repl_rep_find(j->conn_id);
	struct kv_buf recs = {0}, b = {0};
	uint64_t pos[KVD_MAX_SHARDS];
	unsigned n;
	int rc;

	if (!rp) {
		repl_job_status(w, KV_BAD_ARGS, "send REPLSYNC first");
		return 1;
	}
	if ((rc = pull_build(rp, &recs, &n))) {
		kv_buf_free(&recs);
		repl_job_status(w, rc,
				"the journal no longer holds the replica's "
				"position: resync");
		return 1;
	}
	if (!n && !last) {
		kv_buf_free(&recs);
		return 0;
	}
	for (unsigned i = 0; i < R.srv->nshards; i++)
		pos[i] = kvd_shard_pub_lsn(R.srv->store, i) + 1;
	repl_frame_begin(&b, 3, KV_OK);
	kv_mp_bin(&b, recs.data, recs.len);
	kv_mp_bin(&b, pos, R.srv->nshards * sizeof(uint64_t));
	kv_buf_free(&recs);
	repl_job_reply(w, &b, 1);
	return 1;
}

void repl_park(struct kvd_wreq *w)
{
	w->next = R.waiting;
	R.waiting = w;
}

static void do_pull(struct kvd_wreq *w, struct job *j)
{
	struct rep *rp = repl_rep_find(j->conn_id);
	int same;

	pthread_mutex_lock(&R.smu);
	same = !strcmp(j->replid, R.ids.replid);
	pthread_mutex_unlock(&R.smu);
	if (!rp || !same) {
		repl_job_status(w, KV_BAD_ARGS,
				rp ? "the replication id changed: resync"
				   : "send REPLSYNC first");
		return;
	}
	/* Its request is its acknowledgement: everything below its
	 * positions is on its disk, as far as it can have had it: a
	 * position past what was sent to it is a lie (a fake replica would
	 * make WAIT and min-replicas-to-ack count writes nobody has, and
	 * look the best replica to promote).  A full copy is over once it
	 * pulls. */
	pthread_mutex_lock(&R.tmu);
	for (unsigned i = 0; i < R.srv->nshards; i++)
		rp->next[i] = j->pos[i] < rp->sent[i] ? j->pos[i] : rp->sent[i];
	rp->last_ms = repl_mono_ms();
	rp->online = 1;
	pthread_mutex_unlock(&R.tmu);
	if (rp->sn) {
		kvd_snapshot_end(rp->sn);
		rp->sn = NULL;
	}
	repl_update_holds();
	j->deadline_ms = repl_mono_ms() + PULL_WAIT_MS;
	if (!pull_try(w, 0)) {
		atomic_fetch_add(&R.parked, 1);
		repl_park(w);
	}
}

/* ===================== The sender thread ===================== */

/* Look again at everything waiting; last: answer it all (stopping). */
static void retry_waiting(int last)
{
	struct kvd_wreq *w = R.waiting, *keep = NULL;
	uint64_t now = repl_mono_ms();

	R.waiting = NULL;
	while (w) {
		struct kvd_wreq *next = w->next;
		struct job *j = repl_job_of(w);
		int done;

		if (j->type == JOB_PULL) {
			done = pull_try(w, last || now >= j->deadline_ms);
			if (done)
				atomic_fetch_sub(&R.parked, 1);
		} else {
			done = repl_wait_try(w, last);
		}
		if (!done) {
			w->next = keep;
			keep = w;
		}
		w = next;
	}
	R.waiting = keep;
}

static uint64_t *closed_ids;
static unsigned nclosed, capclosed;

static void run_job(struct kvd_wreq *w)
{
	struct job *j = repl_job_of(w);

	switch (j->type) {
	case JOB_SYNC: repl_do_sync(w, j); break;
	case JOB_PULL: do_pull(w, j); break;
	case JOB_SNAP: repl_do_snap(w, j); break;
	default: /* JOB_WAIT */
		if (!repl_wait_try(w, 0))
			repl_park(w);
		break;
	}
}

/* Drop the snapshots of full copies whose replica went silent. */
static void expire_sessions(void)
{
	uint64_t now = repl_mono_ms();

	for (unsigned k = 0; k < R.nreps; k++)
		if (R.reps[k].sn && now - R.reps[k].last_ms > SESSION_IDLE_MS) {
			kvd_snapshot_end(R.reps[k].sn);
			R.reps[k].sn = NULL;
		}
}

/* Take what was queued; wait (at most 100 ms: timeouts) when nothing was. */
static void take(struct kvd_wreq **jobs, struct hold **holds, int *stop,
		 uint64_t **closed, unsigned *nc)
{
	pthread_mutex_lock(&R.qmu);
	if (!R.jobs && !R.holds && !R.kick && !R.stop && !nclosed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += R.waiting || R.held ? 10000000 : 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&R.qcv, &R.qmu, &ts);
	}
	*jobs = R.jobs;
	*holds = R.holds;
	R.jobs = NULL;
	R.jobs_tail = &R.jobs;
	R.holds = NULL;
	R.holds_tail = &R.holds;
	R.kick = 0;
	*stop = R.stop;
	*closed = closed_ids;
	*nc = nclosed;
	closed_ids = NULL;
	nclosed = capclosed = 0;
	pthread_mutex_unlock(&R.qmu);
}

static void *sender_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct kvd_wreq *w;
		struct hold *h;
		uint64_t *closed;
		unsigned nc;
		int stop, last = atomic_load(&R.srv->stopping);

		take(&w, &h, &stop, &closed, &nc);
		for (unsigned i = 0; i < nc; i++)
			repl_rep_del(closed[i]);
		if (nc)
			repl_update_holds();
		free(closed);
		while (w) {
			struct kvd_wreq *next = w->next;

			run_job(w);
			w = next;
		}
		while (h) {
			struct hold *next = h->next;

			h->next = R.held;
			R.held = h;
			h = next;
		}
		repl_update_good();
		retry_waiting(last);
		repl_release_holds(last);
		expire_sessions();
		repl_update_holds();
		if (stop && !R.waiting && !R.held)
			break;
	}
	return NULL;
}

int kvd_repl_start(struct kvd_server *srv, char *err, size_t errlen)
{
	const struct kvd_config *cfg = srv->cfg;
	int rc;

	R.srv = srv;
	R.jobs_tail = &R.jobs;
	R.holds_tail = &R.holds;
	snprintf(R.dir, sizeof(R.dir), "%s", cfg->data_dir);
	kvd_store_set_backlog(srv->store, cfg->repl_backlog_size);
	pthread_mutex_lock(&R.smu);
	repl_load_ids();
	if (cfg->replicaof[0]) {
		char host[256];
		unsigned port;
		int resp;

		/* checked by kvd_config_load already */
		if (kvd_config_replicaof(cfg->replicaof, host, sizeof(host),
					 &port, &resp)) {
			pthread_mutex_unlock(&R.smu);
			snprintf(err, errlen,
				 "replicaof: not \"HOST PORT\" or \"HOST PORT "
				 "resp\"");
			return -1;
		}
		snprintf(R.link.host, sizeof(R.link.host), "%s", host);
		R.link.port = port;
		R.link.resp = resp;
		R.link.native_port = R.link.resp ? 0 : port;
		R.link.replica = 1;
		atomic_store(&R.is_replica, 1);
	}
	/* before anything is published (repl_async.c) */
	if (kvd_repl_async_begin(srv, !R.link.replica, err, errlen)) {
		pthread_mutex_unlock(&R.smu);
		return -1;
	}
	pthread_mutex_unlock(&R.smu);
	if ((rc = pthread_create(&R.thread, NULL, sender_main, NULL))) {
		snprintf(err, errlen, "cannot start the replication sender: %s",
			 strerror(rc));
		return -1;
	}
	pthread_setname_np(R.thread, "kvd-repl-send"); /* for top -H */
	R.started = 1;
	if (kvd_replica_start(srv)) {
		snprintf(err, errlen, "cannot start the replica thread");
		return -1;
	}
	return 0;
}

void kvd_repl_stop(struct kvd_server *srv)
{
	kvd_replica_stop();
	if (!R.started)
		return;
	pthread_mutex_lock(&R.qmu);
	R.stop = 1;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
	pthread_join(R.thread, NULL);
	R.started = 0;
	for (unsigned k = 0; k < R.nreps; k++)
		repl_rep_clear(&R.reps[k]);
	free(R.reps);
	R.reps = NULL;
	R.nreps = 0;
	kvd_repl_async_end(srv); /* a clean stop: every journal flushed */
}

/* ===================== Io threads' side ===================== */

/* A replica's link is freed (its c->closed hook, set with CONN_REPLICA):
 * it leaves the RESP registry it joined (a RESP connection's protocol
 * close did that already), and the sender forgets it. */
static void link_closed(struct kvd_conn *c)
{
	if (c->proto != KVD_PROTO_RESP)
		kvd_resp_conn_close(c);
	kvd_repl_conn_closed(c);
}

void kvd_repl_conn_closed(struct kvd_conn *c)
{
	pthread_mutex_lock(&R.qmu);
	if (nclosed == capclosed) {
		unsigned cap = capclosed ? 2 * capclosed : 8;
		uint64_t *p = realloc(closed_ids, cap * sizeof(*p));

		if (p) {
			closed_ids = p;
			capclosed = cap;
		}
	}
	if (nclosed < capclosed)
		closed_ids[nclosed++] = c->id;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

/* A job for the sender, its reply queued in order on c. */
struct kvd_wreq *repl_job_new(struct kvd_conn *c, unsigned op, int type)
{
	struct kvd_pend *pd = kvd_conn_pend(c, op);
	struct kvd_wreq *w;
	struct job *j;

	if (!pd)
		return NULL;
	if (!(w = kvd_wreq_new(c->io, sizeof(struct job)))) {
		pd->done = 1;
		pd->status = KV_INTERNAL;
		kvd_conn_flush(c);
		return NULL;
	}
	memset(&w->op, 0, sizeof(w->op));
	w->pend = pd;
	w->io = c->io;
	w->shard = 0;
	w->tracked = 0;
	pd->raw = 1;
	pd->parts = 1;
	if (c->proto == KVD_PROTO_NATIVE)
		pd->aux = KVD_PEND_COUNT;
	j = repl_job_of(w);
	memset(j, 0, sizeof(*j));
	j->type = type;
	j->conn_id = c->id;
	return w;
}

void repl_job_submit(struct kvd_conn *c, struct kvd_wreq *w)
{
	c->io->inflight++;
	pthread_mutex_lock(&R.qmu);
	w->next = NULL;
	*R.jobs_tail = w;
	R.jobs_tail = &w->next;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

static int is_bytes(const struct kv_mp_obj *o)
{
	return o->type == KV_MP_BIN || o->type == KV_MP_STR;
}

/* Positions: nshards little-endian u64s. */
static int arg_pos(const struct kv_mp_obj *o, unsigned n, uint64_t *pos)
{
	if (!is_bytes(o) || o->len != n * sizeof(uint64_t))
		return KV_BAD_ARGS;
	memcpy(pos, o->p, o->len);
	return KV_OK;
}

static int arg_replid(const struct kv_mp_obj *o, char *out)
{
	if (!is_bytes(o) || (o->len && o->len != KVD_REPLID_LEN))
		return KV_BAD_ARGS;
	memcpy(out, o->p, o->len);
	out[o->len] = '\0';
	return KV_OK;
}

/* The replica's address, as INFO's slaveN lines give it to Sentinel. */
static void peer_ip(struct kvd_conn *c, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	snprintf(out, len, "?");
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out,
			  (socklen_t)len);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  out, (socklen_t)len);
	else
		snprintf(out, len, "127.0.0.1"); /* a Unix socket: this host */
}

/* Shard counts must agree: records and cuts are per shard. */
static int sync_args(struct kvd_conn *c, struct kvd_req *r, struct job *j)
{
	unsigned n = c->io->srv->nshards;
	char msg[200];
	int rc;

	if (r->a[1].type != KV_MP_UINT || r->a[3].type != KV_MP_UINT ||
	    r->a[4].type != KV_MP_UINT || r->a[3].v.u > 65535)
		return KV_BAD_ARGS;
	if (r->a[1].v.u != n) {
		snprintf(msg, sizeof(msg),
			 "the replica has %llu shards and the primary %u: a "
			 "replica needs the same shard count",
			 (unsigned long long)r->a[1].v.u, n);
		kvd_count_now(&c->io->stats, r->op, KV_BAD_ARGS);
		kvd_reply_status(c, KV_BAD_ARGS, msg);
		return -1;
	}
	if ((rc = arg_replid(&r->a[0], j->replid)) ||
	    (rc = arg_pos(&r->a[2], n, j->pos)))
		return rc;
	j->port = (unsigned)r->a[3].v.u;
	j->native_port = (unsigned)r->a[4].v.u;
	peer_ip(c, j->ip, sizeof(j->ip));
	return KV_OK;
}

static int native_replicaof(struct kvd_conn *c, struct kvd_req *r)
{
	char host[256], err[300];

	int st;

	if (r->a[0].type == KV_MP_NIL || (is_bytes(&r->a[0]) && !r->a[0].len)) {
		st = kvd_repl_replicaof(NULL, 0, 0, err, sizeof(err));
	} else {
		if (!is_bytes(&r->a[0]) || r->a[0].len >= sizeof(host) ||
		    memchr(r->a[0].p, '\0', r->a[0].len) ||
		    r->a[1].type != KV_MP_UINT || !r->a[1].v.u ||
		    r->a[1].v.u > 65535)
			return KV_BAD_ARGS;
		memcpy(host, r->a[0].p, r->a[0].len);
		host[r->a[0].len] = '\0';
		st = kvd_repl_replicaof(host, (unsigned)r->a[1].v.u, 0, err,
					sizeof(err));
	}
	if (st == KV_OK) {
		kvd_reply_status(c, KV_OK, NULL);
		return KV_OK;
	}
	kvd_count_now(&c->io->stats, r->op, st);
	kvd_reply_status(c, st, err);
	return KVD_ANSWERED;
}

/* Check a request's arguments into j; KV_OK, a status, or -1 when
 * answered already. */
static int job_args(struct kvd_conn *c, struct kvd_req *r, struct job *j)
{
	struct kvd_server *srv = c->io->srv;
	int rc;

	switch (j->type) {
	case JOB_SYNC: return sync_args(c, r, j);
	case JOB_PULL:
		if ((rc = arg_replid(&r->a[0], j->replid)))
			return rc;
		return arg_pos(&r->a[1], srv->nshards, j->pos);
	case JOB_SNAP:
		if (r->a[0].type != KV_MP_UINT || r->a[1].type != KV_MP_UINT ||
		    !is_bytes(&r->a[2]) || r->a[2].len > KV_MAX_KEY_LIMIT)
			return KV_BAD_ARGS;
		j->sid = r->a[0].v.u;
		j->shard = r->a[1].v.u > KVD_MAX_SHARDS ? KVD_MAX_SHARDS
							: (unsigned)r->a[1].v.u;
		j->klen = r->a[2].len;
		memcpy(j->key, r->a[2].p, j->klen);
		return KV_OK;
	default: /* JOB_WAIT */
		if (r->a[0].type != KV_MP_UINT || r->a[1].type != KV_MP_UINT)
			return KV_BAD_ARGS;
		if (kvd_repl_is_replica())
			return KV_REPLICA_READ_ONLY;
		j->nwant = r->a[0].v.u > 1000 ? 1000 : (unsigned)r->a[0].v.u;
		if (r->a[1].v.u)
			j->deadline_ms = repl_mono_ms() + r->a[1].v.u;
		repl_wait_targets(srv, j->pos);
		return KV_OK;
	}
}

int kvd_repl_native(struct kvd_conn *c, struct kvd_req *r)
{
	static __thread struct job j;
	struct kvd_wreq *w;
	int rc;

	memset(&j, 0, sizeof(j));
	switch (r->op) {
	case KV_OP_REPLICAOF: return native_replicaof(c, r);
	case KV_OP_REPLSYNC: j.type = JOB_SYNC; break;
	case KV_OP_REPLPULL: j.type = JOB_PULL; break;
	case KV_OP_REPLSNAP: j.type = JOB_SNAP; break;
	default: j.type = JOB_WAIT; break;
	}
	if ((rc = job_args(c, r, &j)))
		return rc < 0 ? KV_OK : rc;
	if (!(w = repl_job_new(c, r->op, j.type)))
		return KV_OK; /* answered INTERNAL in order */
	j.conn_id = c->id;
	memcpy(repl_job_of(w), &j, sizeof(j));
	if (j.type == JOB_SYNC && !(c->flags & CONN_REPLICA)) {
		/* in the RESP registry from now on: CLIENT LIST shows it
		 * (flags=S) and CLIENT KILL TYPE replica closes it */
		c->flags |= CONN_REPLICA;
		c->closed = link_closed;
		kvd_resp_conn_open(c);
	}
	if (c->flags & CONN_REPLICA)
		atomic_store_explicit(&c->act_ms, c->io->now_ms,
				      memory_order_relaxed);
	repl_job_submit(c, w);
	return KV_OK;
}
