/* engine.c - kvbench's load generator.
 *
 * Each thread owns its connections and one epoll instance, as wrk does: no
 * lock and no shared cache line on the hot path (the only shared writes are
 * YCSB's insert counter and acknowledgement window).  A connection keeps up
 * to --pipeline requests in flight in a ring of slots; a reply completes
 * the oldest slot, since every protocol here answers in order.  Nothing on
 * the path from send to reply allocates, except the driver's buffers when
 * they first grow and --verify's log.
 *
 * With --rate, operation k of a thread is due at start + k / (rate /
 * threads), and its latency is measured from when it was due, not from when
 * it was sent: a stalled server then shows as latency instead of silently
 * lowering the offered load (the "coordinated omission" that wrk2 corrects
 * in the same way).
 */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "fieldops.h"
#include "ixdocs.h"
#include "report.h"
#include "server.h"

struct slot {
	struct kb_op op;
	uint64_t start;	   /* latency is measured from here */
	uint64_t sent;	   /* when the (last) request was queued */
	uint64_t vhash;	   /* PUT: hash of the value, for --verify */
	size_t vidx;	   /* verify phase: index in the table */
	struct fo_slot fs; /* records of fields */
	int field;	   /* READ, FSCAN in flight: the field asked, or -1 */
	uint8_t kind;	   /* enum kb_req_kind in flight */
	uint8_t step;	   /* two round trips: 0 the read, 1 the write */
	uint8_t measured;
};

struct conn {
	void *dc;
	int fd;
	unsigned gid;
	struct slot *slots;
	unsigned head, n;
	unsigned ready_at; /* index in the thread's ready list */
	struct kb_wconn wc;
	uint8_t dead, exhausted, in_ready, dirty, want_out;
};

struct engine;

struct thread {
	struct engine *e;
	unsigned idx;
	pthread_t tid;
	struct kb_rng rng;
	struct kb_wthread wt;
	struct conn *conns;
	unsigned nconns;
	struct conn **ready, **dirty; /* conns with a free slot; to flush */
	unsigned nready, ndirty;
	int epfd;
	uint64_t quota, issued, issued_measured, inflight;
	uint64_t sched0;
	double ns_per_op;
	uint64_t done, done_all; /* atomic: measured, and all */
	uint64_t errors[ERR_NTYPES], op_errors[OP_NTYPES], scan_items;
	uint64_t last_ns;
	struct kb_hist hist[OP_NTYPES];
	uint32_t *keycount;
	size_t vnext, vend;
	struct kb_vcount vc;
	struct fo_thread fo; /* records of fields (fo_on) */
	int fo_on;
	char kbuf[KB_KEY_MAX];
	uint8_t *vbuf;
	char err[256];
	int finished; /* atomic */
};

struct engine {
	struct kb_run *run;
	const struct kb_config *cfg;
	const struct kb_driver *drv;
	enum kb_phase phase;
	struct thread *th;
	unsigned n;
	int stop, measuring, failed; /* atomic */
	int connected;		     /* atomic: threads past connecting */
	int go;			     /* atomic: 0 wait, 1 run, -1 give up */
};

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define INC(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)

uint64_t kb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_err(char *dst, size_t n, const char *what, const char *msg)
{
	if (!dst[0])
		snprintf(dst, n, "%s%s%s", what, msg && *msg ? ": " : "",
			 msg ? msg : "");
}

/* ---- connections ----------------------------------------------------- */

static void ready_push(struct thread *t, struct conn *c)
{
	if (c->in_ready || c->dead || c->exhausted ||
	    c->n >= t->e->cfg->pipeline)
		return;
	c->in_ready = 1;
	c->ready_at = t->nready;
	t->ready[t->nready++] = c;
}

/* O(1): the last entry takes the removed one's place. */
static void ready_remove(struct thread *t, struct conn *c)
{
	struct conn *last;

	if (!c->in_ready)
		return;
	last = t->ready[--t->nready];
	t->ready[c->ready_at] = last;
	last->ready_at = c->ready_at;
	c->in_ready = 0;
}

static void mark_dirty(struct thread *t, struct conn *c)
{
	if (!c->dirty) {
		c->dirty = 1;
		t->dirty[t->ndirty++] = c;
	}
}

static void count_error(struct thread *t, const struct slot *s,
			enum kb_err kind)
{
	if (s->op.type == OP_VERIFY) {
		t->vc.errors++;
		return;
	}
	if (s->measured) {
		INC(t->errors[kind]);
		t->op_errors[s->op.type]++;
		INC(t->done);
	}
	INC(t->done_all);
	wl_done(&t->e->run->ws, &s->op);
}

/* The connection broke: every request in flight on it failed. */
static void conn_fail(struct thread *t, struct conn *c, const char *why)
{
	unsigned pipe = t->e->cfg->pipeline;

	set_err(t->err, sizeof(t->err), "connection failed",
		why ? why : t->e->drv->errmsg(c->dc));
	/* A connection lost while idle failed no request, but it is an
	 * error all the same: its share of the work will not be done. */
	if (!c->n && !c->exhausted)
		INC(t->errors[ERR_CONNECTION]);
	for (; c->n; c->n--, c->head = (c->head + 1) % pipe, t->inflight--)
		count_error(t, &c->slots[c->head], ERR_CONNECTION);
	ready_remove(t, c);
	t->e->drv->close(c->dc);
	c->dc = NULL;
	c->dead = 1;
}

static void flush_conn(struct thread *t, struct conn *c)
{
	int rc = t->e->drv->flush(c->dc);
	struct epoll_event ev = {.data.ptr = c};

	if (rc < 0) {
		conn_fail(t, c, NULL);
		return;
	}
	if ((rc == 1) == c->want_out)
		return;
	c->want_out = rc == 1;
	ev.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0);
	epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static int connect_all(struct thread *t)
{
	const struct kb_config *cfg = t->e->cfg;
	char why[256] = "";

	for (unsigned i = 0; i < t->nconns; i++) {
		struct conn *c = &t->conns[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		c->dc = t->e->drv->connect(&cfg->target, why, sizeof(why));
		if (!c->dc) {
			set_err(t->err, sizeof(t->err), "cannot connect", why);
			return -1;
		}
		c->fd = t->e->drv->fd(c->dc);
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
			set_err(t->err, sizeof(t->err), "epoll_ctl",
				strerror(errno));
			return -1;
		}
		ready_push(t, c);
	}
	return 0;
}

static void close_all(struct thread *t)
{
	for (unsigned i = 0; i < t->nconns; i++)
		if (t->conns[i].dc)
			t->e->drv->close(t->conns[i].dc);
}

/* ---- issuing --------------------------------------------------------- */

/* The request of slot s for --record value and the other workloads: a
 * record is one value. */
static void value_req(struct thread *t, struct slot *s, struct kb_req *req)
{
	struct kb_run *run = t->e->run;

	if (run->ws.cfg->wl->kind == WL_INDEX) {
		ix_req(&run->ws, &t->rng, &s->op, t->kbuf, t->vbuf, req);
		return;
	}
	memset(req, 0, sizeof(*req));
	req->kind = REQ_GET;
	req->field = -1;
	req->key = t->kbuf;
	req->klen = wl_key(&run->ws, &s->op.id, t->kbuf);
	if (s->op.type == OP_SCAN) {
		req->kind = REQ_SCAN;
		req->count = s->op.scan_len;
	} else if (s->op.type == OP_UPDATE || s->op.type == OP_INSERT ||
		   (s->op.type == OP_RMW && s->step == 1)) {
		req->kind = REQ_PUT;
		req->val = t->vbuf;
		req->vlen =
		    wl_value(&run->ws, &t->wt, &t->rng, &s->op, t->vbuf);
		if (run->vlogs)
			s->vhash = verify_hash(req->val, req->vlen);
	}
}

/* Queue the request of slot s on c (prev: the reply to its step 0, for
 * step 1).  0 queued, -1 c failed, 1 prev was not a record (fields
 * emulated over one value). */
static int send_slot(struct thread *t, struct conn *c, struct slot *s,
		     const struct kb_reply *prev)
{
	struct kb_req req;

	if (!t->fo_on)
		value_req(t, s, &req);
	else if (fo_build(&t->fo, &s->op, s->step, prev, &s->fs, t->kbuf, &req))
		return 1;
	s->kind = (uint8_t)req.kind;
	s->field = req.field;
	s->sent = kb_now_ns();
	if (t->e->drv->send(c->dc, &req) < 0)
		return -1;
	c->n++;
	t->inflight++;
	mark_dirty(t, c);
	return 0;
}

/* Generate and queue the next operation on c: 1 sent, 0 c has no more
 * work, -1 c failed. */
static int issue_one(struct thread *t, struct conn *c, uint64_t start,
		     int measured)
{
	struct engine *e = t->e;
	unsigned pipe = e->cfg->pipeline;
	struct slot *s = &c->slots[(c->head + c->n) % pipe];

	if (e->phase == PHASE_VERIFY) {
		if (t->vnext >= t->vend)
			return 0;
		memset(&s->op, 0, sizeof(s->op));
		s->vidx = t->vnext++;
		s->op.type = OP_VERIFY;
		s->op.rfield = -1;
		s->op.id = e->run->vt.keys[s->vidx].id;
	} else if (!wl_next(&e->run->ws, &t->wt, &c->wc, &t->rng, e->phase,
			    &s->op)) {
		return 0;
	}
	s->start = start;
	s->step = 0;
	s->measured = (uint8_t)measured;
	if (t->keycount && measured) {
		uint64_t k = wl_keynum(&e->run->ws, &s->op);

		if (k != UINT64_MAX)
			t->keycount[k]++;
	}
	if (send_slot(t, c, s, NULL) == 0)
		return 1;
	c->n++; /* the slot is lost with the connection */
	t->inflight++;
	conn_fail(t, c, NULL);
	return -1;
}

static int quota_left(struct thread *t, int measured)
{
	return !measured || t->issued_measured < t->quota;
}

static void issue(struct thread *t)
{
	struct engine *e = t->e;
	uint64_t now = kb_now_ns();

	while (t->nready && !LOAD(e->stop)) {
		int measured = LOAD(e->measuring);
		uint64_t start = now;
		struct conn *c = t->ready[t->nready - 1];
		int rc;

		if (!quota_left(t, measured))
			break;
		if (t->ns_per_op > 0) {
			start = t->sched0 +
				(uint64_t)((double)t->issued * t->ns_per_op);
			if (start > now)
				break;
		}
		rc = issue_one(t, c, start, measured);
		if (rc == 0) {
			c->exhausted = 1;
			ready_remove(t, c);
			continue;
		}
		t->issued++;
		t->issued_measured += measured != 0;
		if (rc > 0 && c->n >= e->cfg->pipeline)
			ready_remove(t, c);
	}
	for (unsigned i = 0; i < t->ndirty; i++) {
		struct conn *c = t->dirty[i];

		c->dirty = 0;
		if (!c->dead)
			flush_conn(t, c);
	}
	t->ndirty = 0;
}

/* ---- completions ----------------------------------------------------- */

static void complete_ok(struct thread *t, struct slot *s,
			const struct kb_reply *r, uint64_t now)
{
	struct kb_run *run = t->e->run;

	if (s->measured)
		hist_record(&t->hist[s->op.type], now - s->start);
	if (s->kind == REQ_SCAN || s->kind == REQ_FSCAN ||
	    s->kind == REQ_IXRANGE || s->kind == REQ_IXFIND)
		t->scan_items += r->items;
	if (s->kind == REQ_PUT && run->vlogs && !t->fo_on)
		vlog_push(&run->vlogs[t->idx], &s->op.id, s->vhash, s->sent,
			  now);
}

static unsigned steps_of(const struct thread *t, const struct kb_op *op)
{
	if (t->fo_on)
		return fo_steps(&t->fo, op);
	return op->type == OP_RMW ? 2 : 1;
}

/* Step 0 of a two-step operation succeeded: its write goes out on the
 * same connection, timed from the read's start, in the slot just freed
 * (which keeps its own fields' arrays). */
static void next_step(struct thread *t, struct conn *c, struct slot *s,
		      const struct kb_reply *r)
{
	unsigned pipe = t->e->cfg->pipeline;
	struct slot *w = &c->slots[(c->head + c->n) % pipe];
	int rc;

	if (w != s) {
		struct fo_slot keep = w->fs;

		*w = *s;
		s->fs = keep;
	}
	w->step++;
	rc = send_slot(t, c, w, r);
	if (rc < 0) {
		c->n++;
		t->inflight++;
		conn_fail(t, c, NULL);
	} else if (rc > 0) {
		set_err(t->err, sizeof(t->err), "protocol error",
			"the value read is not a record of fields");
		count_error(t, w, ERR_PROTOCOL);
		ready_push(t, c);
	}
}

static void complete(struct thread *t, struct conn *c, const struct kb_reply *r)
{
	unsigned pipe = t->e->cfg->pipeline;
	struct slot *s = &c->slots[c->head];
	uint64_t now = kb_now_ns();

	c->head = (c->head + 1) % pipe;
	c->n--;
	t->inflight--;
	t->last_ns = now;
	if (s->op.type == OP_VERIFY) {
		if (t->fo_on)
			fo_audit(&t->fo, &s->op, r, &t->e->run->vt, s->vidx,
				 &t->vc);
		else
			verify_check(&t->e->run->vt, s->vidx, r->status, r->val,
				     r->vlen, &t->vc);
		INC(t->done_all);
		ready_push(t, c);
		return;
	}
	if (t->fo_on)
		fo_reply(&t->fo, &s->op, s->step, &s->fs, r, s->sent, now);
	if (s->step + 1u < steps_of(t, &s->op) && r->status == REPLY_OK) {
		next_step(t, c, s, r);
		return;
	}
	if (r->status == REPLY_OK) {
		complete_ok(t, s, r, now);
		if (s->measured)
			INC(t->done);
		INC(t->done_all);
		wl_done(&t->e->run->ws, &s->op);
	} else {
		if (r->status == REPLY_ERROR)
			set_err(t->err, sizeof(t->err), "server error", r->msg);
		count_error(t, s,
			    r->status == REPLY_NOT_FOUND ? ERR_NOT_FOUND
							 : ERR_SERVER);
	}
	ready_push(t, c);
}

/* Read what arrived on c and complete every reply that is whole. */
static void drain(struct thread *t, struct conn *c)
{
	const struct kb_driver *drv = t->e->drv;
	int in = drv->input(c->dc), rc = 0;

	while (c->n && !c->dead) {
		struct kb_reply r = {0};
		const struct slot *s = &c->slots[c->head];

		rc = drv->reply(c->dc, (enum kb_req_kind)s->kind, s->field, &r);
		if (rc <= 0)
			break;
		complete(t, c, &r);
	}
	if (c->dead)
		return;
	if (rc < 0 || in < 0)
		conn_fail(t, c,
			  in < 0 && c->n == 0 ? "closed by the server" : NULL);
}

static void wait_events(struct thread *t)
{
	struct epoll_event ev[64];
	uint64_t wait = 100000000; /* to notice --duration's stop */
	struct timespec ts;
	int n;

	if (t->ns_per_op > 0 && t->nready) {
		uint64_t due = t->sched0 +
			       (uint64_t)((double)t->issued * t->ns_per_op),
			 now = kb_now_ns();

		wait = due > now ? due - now : 0;
		if (wait > 100000000)
			wait = 100000000;
	}
	ts.tv_sec = (time_t)(wait / 1000000000);
	ts.tv_nsec = (long)(wait % 1000000000);
	n = epoll_pwait2(t->epfd, ev, 64, &ts, NULL);
	for (int i = 0; i < n; i++) {
		struct conn *c = ev[i].data.ptr;

		if (!c->dead && (ev[i].events & EPOLLOUT))
			flush_conn(t, c);
		if (!c->dead &&
		    (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
			drain(t, c);
	}
}

static int more_to_issue(struct thread *t)
{
	return t->nready && !LOAD(t->e->stop) &&
	       quota_left(t, LOAD(t->e->measuring));
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Every thread connects before any sends, so that connecting 4,000
 * sockets is not part of the measurement. */
static int wait_go(struct engine *e)
{
	int go;

	while ((go = LOAD(e->go)) == 0)
		nap_ms(1);
	return go;
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	struct engine *e = t->e;

	if (connect_all(t))
		STORE(e->failed, 1);
	__atomic_add_fetch(&e->connected, 1, __ATOMIC_ACQ_REL);
	if (wait_go(e) < 0)
		goto out;
	t->sched0 = kb_now_ns();
	for (;;) {
		issue(t);
		if (t->inflight == 0 && !more_to_issue(t))
			break;
		wait_events(t);
	}
out:
	close_all(t);
	STORE(t->finished, 1);
	return NULL;
}

/* ---- a phase --------------------------------------------------------- */

static int thread_init(struct engine *e, struct thread *t, unsigned idx)
{
	const struct kb_config *cfg = e->cfg;
	struct kb_run *run = e->run;
	uint64_t total = run->vt.nkeys;

	t->e = e;
	t->idx = idx;
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	rng_seed(&t->rng, cfg->seed * 1000003ull + idx * 7919ull + e->phase);
	wl_thread_init(&run->ws, &t->wt, idx, e->n);
	for (int i = 0; i < OP_NTYPES; i++)
		hist_reset(&t->hist[i]);
	t->quota = UINT64_MAX;
	if (e->phase == PHASE_RUN && cfg->ops)
		t->quota = cfg->ops * (idx + 1) / e->n - cfg->ops * idx / e->n;
	if (e->phase != PHASE_VERIFY && cfg->rate > 0)
		t->ns_per_op = 1e9 * e->n / cfg->rate;
	t->vnext = total * idx / e->n;
	t->vend = total * (idx + 1) / e->n;
	t->nconns = cfg->conns;
	t->conns = calloc(t->nconns, sizeof(*t->conns));
	t->ready = calloc(t->nconns, sizeof(*t->ready));
	t->dirty = calloc(t->nconns, sizeof(*t->dirty));
	t->vbuf = malloc(run->ws.max_value + 16);
	if (t->epfd < 0 || !t->conns || !t->ready || !t->dirty || !t->vbuf)
		return -1;
	t->fo_on = run->ws.fields;
	if (t->fo_on &&
	    fo_init(&t->fo, &run->ws, &t->wt, &t->rng, e->drv->fields, run->fst,
		    run->vlogs ? &run->vlogs[idx] : NULL, cfg->verify))
		return -1;
	if (cfg->key_stats && e->phase == PHASE_RUN &&
	    run->ws.keyspace <= 100000000 &&
	    !(t->keycount = calloc(run->ws.keyspace, sizeof(uint32_t))))
		return -1;
	for (unsigned i = 0; i < t->nconns; i++) {
		struct conn *c = &t->conns[i];

		c->gid = idx * cfg->conns + i;
		c->fd = -1;
		wl_conn_init(&run->ws, &c->wc, c->gid, e->n * cfg->conns);
		if (!(c->slots = calloc(cfg->pipeline, sizeof(*c->slots))))
			return -1;
		for (unsigned j = 0; t->fo_on && j < cfg->pipeline; j++)
			if (fo_slot_init(&t->fo, &c->slots[j].fs))
				return -1;
	}
	return 0;
}

static void thread_free(struct thread *t)
{
	for (unsigned i = 0; t->conns && i < t->nconns; i++) {
		for (unsigned j = 0;
		     t->conns[i].slots && j < t->e->cfg->pipeline; j++)
			fo_slot_free(&t->conns[i].slots[j].fs);
		free(t->conns[i].slots);
	}
	if (t->fo_on)
		fo_free(&t->fo);
	if (t->epfd >= 0)
		close(t->epfd);
	free(t->conns);
	free(t->ready);
	free(t->dirty);
	free(t->vbuf);
	free(t->keycount);
}

/* The second that just ended: operations and latency percentiles, from
 * the difference between this snapshot and the last one, for each
 * operation type and for all of them. */
struct ticker {
	struct kb_hist *prev[OP_NTYPES], *cur, *iv, *all;
	uint64_t prev_done, prev_all;
};

static int ticker_init(struct ticker *tk)
{
	memset(tk, 0, sizeof(*tk));
	for (int j = 0; j < OP_NTYPES; j++)
		if (!(tk->prev[j] = calloc(1, sizeof(struct kb_hist))))
			return -1;
	tk->cur = calloc(1, sizeof(*tk->cur));
	tk->iv = calloc(1, sizeof(*tk->iv));
	tk->all = calloc(1, sizeof(*tk->all));
	return tk->cur && tk->iv && tk->all ? 0 : -1;
}

static void ticker_free(struct ticker *tk)
{
	for (int j = 0; j < OP_NTYPES; j++)
		free(tk->prev[j]);
	free(tk->cur);
	free(tk->iv);
	free(tk->all);
}

/* iv = cur - prev; the maximum is the top bucket's, capped by cur's. */
static void hist_interval(struct kb_hist *iv, const struct kb_hist *cur,
			  const struct kb_hist *prev)
{
	unsigned top = 0;

	hist_reset(iv);
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		iv->counts[i] = cur->counts[i] - prev->counts[i];
		iv->count += iv->counts[i];
		if (iv->counts[i])
			top = i;
	}
	iv->max = iv->count ? hist_bucket_high(top) : 0;
	if (iv->max > cur->max)
		iv->max = cur->max;
}

static struct kb_tick_op tick_op(const struct kb_hist *h)
{
	return (struct kb_tick_op){h->count, hist_percentile(h, 50),
				   hist_percentile(h, 99),
				   hist_percentile(h, 99.9), h->max};
}

/* The latencies of the second, per type into k->op, and over all types
 * into k's own fields. */
static void tick_latency(struct engine *e, struct ticker *tk, struct kb_tick *k)
{
	struct kb_tick_op all;

	hist_reset(tk->all);
	for (int j = 0; j < OP_NTYPES; j++) {
		hist_reset(tk->cur);
		for (unsigned i = 0; i < e->n; i++)
			hist_add(tk->cur, &e->th[i].hist[j]);
		hist_interval(tk->iv, tk->cur, tk->prev[j]);
		k->op[j] = tick_op(tk->iv);
		hist_add(tk->all, tk->iv);
		memcpy(tk->prev[j], tk->cur, sizeof(*tk->cur));
	}
	all = tick_op(tk->all);
	k->p50 = all.p50;
	k->p99 = all.p99;
	k->p999 = all.p999;
	k->max = all.max;
}

static void tick(struct engine *e, struct ticker *tk, double t, double mt,
		 int warmup, struct kb_result *res)
{
	uint64_t done = 0, all = 0, errs = 0;
	struct kb_tick *grown, *k;

	for (unsigned i = 0; i < e->n; i++) {
		done += LOAD(e->th[i].done);
		all += LOAD(e->th[i].done_all);
		for (int j = 0; j < ERR_NTYPES; j++)
			errs += LOAD(e->th[i].errors[j]);
	}
	grown = realloc(res->ticks, (res->nticks + 1) * sizeof(*grown));
	if (grown) {
		res->ticks = grown;
		k = &grown[res->nticks++];
		memset(k, 0, sizeof(*k));
		k->t = t;
		/* During the warmup nothing is measured: count all. */
		k->ops = warmup ? all - tk->prev_all : done - tk->prev_done;
		k->warmup = warmup;
		tick_latency(e, tk, k);
		if (!e->cfg->quiet) {
			struct kb_progress p = {e->phase, done, res->planned,
						errs,	  0,	mt};

			if (e->phase == PHASE_VERIFY)
				p.planned = e->run->vt.nkeys;
			if (e->phase == PHASE_RUN && e->cfg->duration > 0)
				p.total = e->cfg->warmup + e->cfg->duration;
			report_progress(stderr, &p, k);
		}
	}
	tk->prev_done = done;
	tk->prev_all = all;
}

static int all_finished(struct engine *e)
{
	for (unsigned i = 0; i < e->n; i++)
		if (!LOAD(e->th[i].finished))
			return 0;
	return 1;
}

/* The main thread's part: warmup, duration, a tick a second.  Returns
 * when the measured part started. */
static uint64_t supervise(struct engine *e, struct kb_result *res)
{
	const struct kb_config *cfg = e->cfg;
	struct ticker tk;
	uint64_t t0 = kb_now_ns(), mstart = t0, next = t0 + 1000000000ull;
	int warm = e->phase == PHASE_RUN && cfg->warmup > 0;
	int ticking = ticker_init(&tk) == 0;

	STORE(e->measuring, !warm);
	STORE(e->go, 1);
	while (!all_finished(e)) {
		uint64_t now;

		nap_ms(20);
		now = kb_now_ns();
		/* The second that ended is labelled with the state it ran in,
		 * so the tick comes before the warmup may end. */
		if (now >= next && ticking) {
			if (e->run->mem)
				server_sample(e->run->mem);
			tick(e, &tk, (double)(now - t0) / 1e9,
			     warm ? 0 : (double)(now - mstart) / 1e9, warm,
			     res);
			next += 1000000000ull;
		}
		if (warm && now - t0 >= (uint64_t)(cfg->warmup * 1e9)) {
			warm = 0;
			mstart = now;
			STORE(e->measuring, 1);
		}
		if (e->phase == PHASE_RUN && cfg->duration > 0 && !warm &&
		    now - mstart >= (uint64_t)(cfg->duration * 1e9))
			STORE(e->stop, 1);
	}
	ticker_free(&tk);
	res->measured_at = (double)(mstart - t0) / 1e9;
	return mstart;
}

/* Sum the threads' figures into res. */
static void collect(struct engine *e, struct kb_result *res, uint64_t mstart)
{
	uint64_t end = mstart;

	for (unsigned i = 0; i < e->n; i++) {
		struct thread *t = &e->th[i];

		for (int j = 0; j < OP_NTYPES; j++) {
			hist_add(&res->hist[j], &t->hist[j]);
			res->op_errors[j] += t->op_errors[j];
		}
		for (int j = 0; j < ERR_NTYPES; j++)
			res->errors[j] += t->errors[j];
		res->ops += e->phase == PHASE_VERIFY ? t->done_all : t->done;
		res->scan_items += t->scan_items;
		if (t->last_ns > end)
			end = t->last_ns;
		if (t->err[0] && !res->first_error[0])
			snprintf(res->first_error, sizeof(res->first_error),
				 "%s", t->err);
	}
	res->seconds = (double)(end - mstart) / 1e9;
}

static int cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* --key-stats: how concentrated the accesses were. */
static void key_stats(struct engine *e, struct kb_result *res)
{
	uint64_t n = e->run->ws.keyspace, total = 0, top1 = 0, top10 = 0;
	uint32_t *sum = e->th[0].keycount;

	if (!sum)
		return;
	for (unsigned i = 1; i < e->n; i++)
		for (uint64_t k = 0; k < n; k++)
			sum[k] += e->th[i].keycount[k];
	for (uint64_t k = 0; k < n; k++) {
		total += sum[k];
		res->keys_distinct += sum[k] != 0;
	}
	qsort(sum, n, sizeof(*sum), cmp_desc);
	for (uint64_t k = 0; k < (n + 9) / 10; k++) {
		top10 += sum[k];
		if (k < (n + 99) / 100)
			top1 += sum[k];
	}
	res->has_keys = 1;
	res->keys_space = n;
	res->keys_top1 = total ? (double)top1 / (double)total : 0;
	res->keys_top10 = total ? (double)top10 / (double)total : 0;
}

static void engine_free(struct engine *e)
{
	for (unsigned i = 0; e->th && i < e->n; i++)
		thread_free(&e->th[i]);
	free(e->th);
}

/* Start the threads and wait until each has connected.  0, or -1 when a
 * connection failed (the threads are then stopped and joined). */
static int start_threads(struct engine *e, unsigned *started, char *err,
			 size_t errlen)
{
	for (*started = 0; *started < e->n; (*started)++)
		if (pthread_create(&e->th[*started].tid, NULL, thread_main,
				   &e->th[*started])) {
			snprintf(err, errlen, "cannot start a thread");
			STORE(e->failed, 1);
			break;
		}
	while (LOAD(e->connected) < (int)*started)
		nap_ms(1);
	if (!LOAD(e->failed))
		return 0;
	for (unsigned i = 0; i < e->n; i++)
		if (e->th[i].err[0] && !err[0])
			snprintf(err, errlen, "%s", e->th[i].err);
	STORE(e->go, -1);
	for (unsigned i = 0; i < *started; i++)
		pthread_join(e->th[i].tid, NULL);
	return -1;
}

/* --verify's counts: the read-back's, or the fields the run's reads
 * checked.  0, or -1 out of memory. */
static int gather_checks(struct engine *e, enum kb_phase phase, char *err,
			 size_t errlen)
{
	struct kb_run *run = e->run;
	struct kb_vcount *vc;
	int rc;

	if (phase == PHASE_RUN && !(e->cfg->verify && run->ws.fields))
		return 0;
	if (!(vc = calloc(e->n, sizeof(*vc))))
		goto oom;
	for (unsigned i = 0; i < e->n; i++)
		vc[i] = phase == PHASE_RUN ? e->th[i].fo.reads : e->th[i].vc;
	rc = phase == PHASE_RUN
		 ? verify_reads(&run->vres, vc, e->n, &run->ws)
		 : verify_result(&run->vres, vc, e->n, &run->ws, run->vt.nkeys);
	free(vc);
	if (rc)
		goto oom;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

int engine_run(struct kb_run *run, enum kb_phase phase, struct kb_result *res,
	       char *err, size_t errlen)
{
	struct engine e = {.run = run, .cfg = run->cfg, .phase = phase};
	unsigned started = 0;
	uint64_t mstart;
	int rc = -1;

	e.drv = e.cfg->driver;
	e.n = e.cfg->threads;
	memset(res, 0, sizeof(*res));
	res->phase = phase;
	for (int i = 0; i < OP_NTYPES; i++)
		hist_reset(&res->hist[i]);
	res->planned = phase == PHASE_RUN      ? e.cfg->ops
		       : phase == PHASE_VERIFY ? run->vt.nkeys
					       : run->ws.load_count;
	err[0] = 0;
	if (!(e.th = calloc(e.n, sizeof(*e.th))))
		goto out;
	for (unsigned i = 0; i < e.n; i++)
		e.th[i].epfd = -1;
	for (unsigned i = 0; i < e.n; i++)
		if (thread_init(&e, &e.th[i], i)) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	if (e.drv->setup && e.drv->setup(&e.cfg->target, err, errlen))
		goto out;
	if (start_threads(&e, &started, err, errlen))
		goto out;
	mstart = supervise(&e, res);
	for (unsigned i = 0; i < e.n; i++)
		pthread_join(e.th[i].tid, NULL);
	collect(&e, res, mstart);
	key_stats(&e, res);
	if (phase != PHASE_LOAD && gather_checks(&e, phase, err, errlen))
		goto out;
	if (phase == PHASE_VERIFY)
		run->vres.seconds = res->seconds;
	rc = 0;
out:
	engine_free(&e);
	return rc;
}

void result_free(struct kb_result *res)
{
	free(res->ticks);
	res->ticks = NULL;
	res->nticks = 0;
}
