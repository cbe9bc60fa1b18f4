/* conn.c - input buffering, reply order and backpressure of a connection.
 *
 * Input is parsed straight out of the kernel's provided buffer when nothing
 * is left over from before (the common case: whole requests arrive whole);
 * only a partial request, or input that arrives while the connection is
 * stalled, is copied into c->in.  See conn.h for the ordering rule.
 */
#include "conn.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "kv_status.h"
#include "log.h"
#include "loop.h"
#include "tls.h"
#include "write.h"

/* ===================== Replies ===================== */

uint8_t *kvd_reply_room(struct kvd_conn *c, size_t n)
{
	if (kv_buf_reserve(&c->out, n))
		return NULL;
	return c->out.data + c->out.len;
}

void kvd_reply_append(struct kvd_conn *c, const void *p, size_t n)
{
	kv_buf_append(&c->out, p, n);
}

/* ===================== Input ===================== */

static size_t pending_output(const struct kvd_conn *c)
{
	return c->out.len + (c->tx.len - c->tx_off) + c->deferred;
}

/* An unauthenticated peer over its small caps is closed at once: waiting
 * for it to read its replies is what it would exploit. */
static int preauth_over(struct kvd_conn *c)
{
	if (c->flags & CONN_ABORT)
		return 1;
	/* A TLS record not yet complete is input held too. */
	if ((c->in.len + kvd_tls_buffered(c) <= KVD_PREAUTH_MAX_INPUT &&
	     pending_output(c) <= KVD_PREAUTH_MAX_OUTPUT) ||
	    !kvd_auth_pending(c))
		return 0;
	log_info("connection %llu: over the caps before AUTH; closing",
		 (unsigned long long)c->id);
	kvd_count(&c->io->stats.preauth_closed, 1);
	c->flags |= CONN_ABORT | CONN_CLOSING;
	c->out.len = 0;
	return 1;
}

/* Stop taking requests while writes in flight are over their bounds. */
static void check_inflight(struct kvd_conn *c)
{
	if (c->stall == STALL_NONE && kvd_write_over(c)) {
		c->stall = STALL_INFLIGHT;
		kvd_count(&c->io->stats.write_pauses, 1);
	}
}

/* Has c run its requests for its slice (KVD_CONN_SLICE_MS) with more
 * left?  Then the rest waits for the loop's next turn: a client that
 * pipelines slow requests (a $regex that backtracks on one document, a
 * KEYS of a large keyspace) does not hold its thread for all of them. */
static int slice_spent(struct kvd_conn *c, uint64_t until, int more)
{
	if (!more || c->stall != STALL_NONE || kvd_coarse_ms() < until)
		return 0;
	c->stall = STALL_TURN;
	kvd_io_again(c);
	return 1;
}

/* Run as many requests as the bytes hold and the rules allow. */
static size_t parse(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	size_t used = 0, max_out = KVD_LIVE(c->io->srv->cfg->max_output);
	uint64_t until = kvd_coarse_ms() + KVD_CONN_SLICE_MS;

	while (used < n && c->stall == STALL_NONE &&
	       !(c->flags & (CONN_CLOSING | CONN_DEAD))) {
		size_t k = kvd_protos[c->proto]->input(c, p + used, n - used);

		if (c->out.err) {
			log_error("connection %llu: out of memory for a reply; "
				  "closing",
				  (unsigned long long)c->id);
			c->flags |= CONN_CLOSING;
			c->out.len = 0;
			return n;
		}
		if (k == 0)
			break;
		used += k;
		if (preauth_over(c))
			return n;
		if (pending_output(c) > max_out) {
			c->stall = STALL_OUTPUT;
			c->out_ms = c->io->now_ms;
		}
		check_inflight(c);
		if (slice_spent(c, until, used < n))
			break;
	}
	return used;
}

static void keep_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	if (kv_buf_append(&c->in, p, n)) {
		log_error("connection %llu: out of memory for input; closing",
			  (unsigned long long)c->id);
		c->flags |= CONN_CLOSING;
	}
}

/* Work through buffered input (after a stall ends, or new bytes came);
 * returns the bytes used. */
static size_t run_buffered(struct kvd_conn *c)
{
	size_t used;

	if (!c->in.len)
		return 0;
	used = parse(c, c->in.data, c->in.len);
	kv_buf_consume(&c->in, used);
	kv_buf_trim(&c->in, 64 << 10);
	return used;
}

/* request-timeout: since when has the input held an incomplete request,
 * with no request completed since?  (Input held while stalled is complete
 * requests waiting their turn: not the client's doing.) */
static void track_partial(struct kvd_conn *c, int progress)
{
	if (!c->in.len || c->stall != STALL_NONE)
		c->req_ms = 0;
	else if (progress || !c->req_ms)
		c->req_ms = c->io->now_ms;
}

static void check_pause(struct kvd_conn *c)
{
	/* Unstalled, c->in holds at most one partial request, bounded by the
	 * frame limit, and reading must go on to complete it (however much is
	 * buffered).  Stalled, it may only grow to the soft cap. */
	if (c->stall != STALL_NONE && c->in.len >= KVD_INPUT_SOFT_CAP)
		c->flags |= CONN_PAUSED;
	else if (c->stall == STALL_NONE || c->in.len < KVD_INPUT_SOFT_CAP / 2)
		c->flags &= ~CONN_PAUSED;
}

void kvd_conn_input(struct kvd_conn *c, const uint8_t *data, size_t len)
{
	size_t used;

	c->last_ms = c->io->now_ms;
	kvd_count(&c->io->stats.bytes_in, len);
	if (c->flags & (CONN_CLOSING | CONN_DEAD))
		return;
	if (!(c->flags & CONN_TALKED)) {
		c->flags |= CONN_TALKED;
		/* A TLS client on a plain port: refused unanswered. */
		if (!c->tls && kvd_auth_tls_plain(c, data, len)) {
			kvd_io_mark(c);
			return;
		}
	}
	if (c->in.len == 0) {
		used = parse(c, data, len);
		if (used < len && !(c->flags & (CONN_CLOSING | CONN_DEAD)))
			keep_input(c, data + used, len - used);
	} else {
		keep_input(c, data, len);
		used = run_buffered(c);
	}
	preauth_over(c);
	track_partial(c, used > 0);
	check_pause(c);
	kvd_io_mark(c);
}

static void resume(struct kvd_conn *c)
{
	c->stall = STALL_NONE;
	track_partial(c, run_buffered(c) > 0);
	check_pause(c);
	kvd_io_mark(c);
}

void kvd_conn_resume(struct kvd_conn *c)
{
	resume(c);
}

void kvd_conn_again(struct kvd_conn *c)
{
	if (c->stall == STALL_TURN)
		resume(c);
	else if (kvd_protos[c->proto]->again)
		kvd_protos[c->proto]->again(c);
}

void kvd_conn_sent(struct kvd_conn *c)
{
	if (c->stall == STALL_OUTPUT &&
	    pending_output(c) <= KVD_LIVE(c->io->srv->cfg->max_output) / 2)
		resume(c);
}

/* ===================== Pending writes ===================== */

struct kvd_pend *kvd_conn_pend(struct kvd_conn *c, unsigned op)
{
	struct kvd_pend *pd = kvd_pend_new(c->io);

	if (!pd)
		return NULL;
	memset(pd, 0, sizeof(*pd));
	pd->conn = c;
	pd->op = (uint16_t)op;
	pd->t0_ns = c->io->turn_ns;
	if (c->pend_tail)
		c->pend_tail->next = pd;
	else
		c->pend_head = pd;
	c->pend_tail = pd;
	c->npend++;
	return pd;
}

/* Encode every finished reply at the head of the FIFO, in order. */
void kvd_conn_flush(struct kvd_conn *c)
{
	struct kvd_pend *pd;

	while ((pd = c->pend_head) && pd->done) {
		if (pd->val) /* held reply bytes, or GETDEL's value */
			c->deferred -= pd->vlen;
		if (pd->raw) {
			if (pd->aux == KVD_PEND_COUNT)
				kvd_count_reply(&c->io->stats, pd->op,
						pd->status);
			if (!(c->flags & CONN_DEAD) &&
			    !(pd->aux & KVD_PEND_MUTE))
				kvd_reply_append(c, pd->val, pd->vlen);
		} else if (!(c->flags & CONN_DEAD) &&
			   !(pd->aux & KVD_PEND_MUTE)) {
			kvd_protos[c->proto]->wreply(c, pd);
		}
		c->pend_head = pd->next;
		if (!c->pend_head)
			c->pend_tail = NULL;
		c->npend--;
		free(pd->val);
		kvd_pend_free(c->io, pd);
	}
	if (c->out.err) {
		c->out.len = 0;
		c->flags |= CONN_CLOSING;
	}
	if ((!c->npend && c->stall == STALL_WRITES) ||
	    (c->stall == STALL_INFLIGHT && kvd_write_may_resume(c))) {
		c->wshard = 0;
		resume(c);
	}
	kvd_io_mark(c);
}

/* Uncount the keys of a write that came back (as write.c counted them). */
static void untrack(struct kvd_conn *c, const struct kvd_wreq *w)
{
	const uint8_t *p = w->op.items;

	if (w->op.kind == KVD_W_FLUSH) {
		c->wall--;
		return;
	}
	for (uint32_t i = 0; i < w->op.nitems; i++) {
		uint16_t kn;
		uint32_t vn;

		memcpy(&kn, p, 2);
		memcpy(&vn, p + 2, 4);
		kvd_conn_track(c, kvd_key_slot(p + KVD_ITEM_HDR, kn), -1);
		p += KVD_ITEM_HDR + kn + vn;
	}
}

void kvd_conn_defer(struct kvd_conn *c, size_t mark, unsigned op)
{
	size_t n = c->out.len - mark;
	struct kvd_pend *pd;

	if (!c->npend)
		return;
	if (!(pd = kvd_conn_pend(c, op)) || !(pd->val = malloc(n ? n : 1))) {
		if (pd) {
			pd->done = 1;
			pd->status = KV_INTERNAL;
		}
		c->out.err = 1; /* judged by parse(): the connection closes */
		return;
	}
	if (n) /* (a command that answers nothing: CLIENT REPLY OFF) */
		memcpy(pd->val, c->out.data + mark, n);
	pd->vlen = n;
	pd->raw = 1;
	pd->done = 1;
	c->out.len = mark;
	c->deferred += n;
}

void kvd_conn_wdone(struct kvd_wreq *w)
{
	struct kvd_pend *pd = w->pend;

	struct kvd_conn *c = pd->conn;

	if (w->tracked) {
		untrack(c, w);
		kvd_write_uncharge(c, w);
	}
	if (w->op.status != KV_OK && pd->status == KV_OK)
		pd->status = w->op.status;
	pd->result += w->op.result;
	if (w->op.val) {
		/* A value held until its reply's turn counts as output. */
		if (pd->val)
			c->deferred -= pd->vlen;
		free(pd->val);
		pd->val = w->op.val;
		pd->vlen = w->op.vlen;
		c->deferred += pd->vlen;
		w->op.val = NULL;
	}
	kvd_wreq_free(w->io, w);
	if (--pd->parts == 0)
		pd->done = 1;
	/* Flush also resumes a connection whose writes drained. */
	if (pd->done || c->stall == STALL_INFLIGHT)
		kvd_conn_flush(c);
}

/* ===================== Figures ===================== */

static void bufs_now(const struct kvd_conn *c, struct kvd_conn_bufs *b)
{
	b->qbuf = c->in.len;
	b->qbuf_free = c->in.cap - c->in.len;
	b->multi_mem = kvd_protos[c->proto]->held
			   ? kvd_protos[c->proto]->held(c)
			   : (size_t)0;
	b->obl = c->out.len + (c->tx.len - c->tx_off);
	b->oll = c->npend;
	b->omem = c->out.cap + c->tx.cap + c->deferred;
	b->tot_mem = c->in.cap + b->omem + b->multi_mem;
}

void kvd_conn_publish(struct kvd_conn *c)
{
	struct kvd_conn_bufs b;
	const uint64_t *v = &b.qbuf;

	bufs_now(c, &b);
	for (unsigned i = 0; i < 7; i++)
		atomic_store_explicit(&c->pub_bufs[i], v[i],
				      memory_order_relaxed);
}

void kvd_conn_bufs(const struct kvd_conn *self, struct kvd_conn *c,
		   struct kvd_conn_bufs *b)
{
	uint64_t *v = &b->qbuf;

	if (c == self) {
		bufs_now(c, b);
		return;
	}
	for (unsigned i = 0; i < 7; i++)
		v[i] =
		    atomic_load_explicit(&c->pub_bufs[i], memory_order_relaxed);
}

void kvd_conn_release(struct kvd_conn *c)
{
	kv_buf_free(&c->in);
	kv_buf_free(&c->out);
	kv_buf_free(&c->tx);
	kvd_tls_free(c->tls);
	c->tls = NULL;
}
