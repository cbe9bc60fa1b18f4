/* cmd_txn.c - TXN, the native protocol's transaction: a batch of mixed
 * operations run with no other client's command in between.
 *
 *   [21, checks?, [op, arg...], [op, arg...], ...]
 *
 * Every sub-request is checked first (decoding, arity, arguments,
 * read-only and disabled operations): one that is bad refuses the whole
 * batch before anything runs, as RESP's EXECABORT does.  Then the batch
 * runs in one exclusive section (shard.h), the machinery of RESP's
 * EXEC (resp_multi.c): no committer runs a batch meanwhile, the writes are
 * applied by this thread to one open batch per shard, a read first
 * commits what is open so that it sees the batch's own writes, and the
 * section ends by committing the rest.  So a batch without a read or
 * read-modify-write after a write is one journal batch per shard: all or
 * nothing per shard on a crash.  Readers on other connections retry when
 * a section ran under them (cmd.c run_read), so none sees half a batch.
 *
 * checks, instead of WATCH (a connection state the native protocol does
 * not keep): nil, or a flat array [key, expected, ...] whose expected
 * value is bytes (the key must hold exactly that) or nil (the key must be
 * absent).  They are read inside the section before anything runs; if one
 * does not hold, the batch answers CHECK_FAILED and changes nothing: a
 * compare-and-set over any keys, on any shards.
 *
 * The reply is [0, [reply, ...]], one native reply per sub-request, each
 * as the operation alone would have given it (errors included: a failure
 * at run time, such as INCR on text, does not stop the others).  It is
 * held to max-frame-size while the batch runs, not once built: past it
 * the batch still runs whole and answers REPLY_TOO_LARGE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "cmd.h"
#include "kv_status.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp/resp.h"
#include "store.h"

/* Sub-requests per TXN: each costs a few words until the batch ends. */
#define TXN_MAX_OPS 65536

struct sub {
	const uint8_t *p, *end; /* its body, a request kvd_req_decode takes */
	int status;		/* answered with this status, or KV_OK */
	uint16_t op;
	uint32_t wfirst, wn; /* writes: its requests in txn.w */
	size_t off, len;     /* otherwise: its reply body in txn.out */
};

struct txn {
	struct sub *s;
	uint32_t n;
	int big;	   /* the reply outgrew max-frame-size */
	struct kv_buf w;   /* struct kvd_wreq *, the writes' requests */
	struct kv_buf out; /* replies of reads and sections */
};

/* ===================== Checking ===================== */

/* The checks argument of r: nil, or [key, bytes-or-nil, ...]. */
static int check_checks(struct kvd_conn *c, const struct kvd_req *r)
{
	const struct kv_mp_obj *a = &r->a[0];
	const uint8_t *p = a->p;
	struct kv_mp_obj o;
	struct kv_slice k;
	int rc;

	if (a->type == KV_MP_NIL)
		return KV_OK;
	if (a->type != KV_MP_ARRAY || a->len % 2)
		return KV_BAD_ARGS;
	kv_mp_next(&p, r->end, &o); /* its header; decoded before */
	for (uint32_t i = 0; i < a->len; i += 2) {
		kv_mp_next(&p, r->end, &o);
		if ((rc = kvd_arg_key(c, &o, &k)))
			return rc;
		kv_mp_next(&p, r->end, &o);
		if (o.type != KV_MP_NIL && !kvd_arg_is_bytes(&o))
			return KV_BAD_ARGS;
	}
	return KV_OK;
}

/* Sub-request sr, decoded: may it run in a batch, as it is? */
static int check_sub(struct kvd_conn *c, struct kvd_req *sr)
{
	const struct kvd_op_desc *d = kvd_op_desc(sr->op);
	int rc;

	if (!d->fn)
		return KV_UNKNOWN_OP;
	if (!d->in_txn || sr->argc < d->min || sr->argc > d->max)
		return KV_BAD_ARGS;
	if (d->write && c->io->srv->cfg->read_only)
		return KV_READ_ONLY;
	if (d->write && (rc = kvd_repl_write_ok()))
		return rc; /* a replica's, or too few replicas */
	if (kvd_auth_op_disabled(sr->op))
		return KV_DISABLED;
	return d->check ? d->check(c, sr) : KV_OK;
}

/* Answer a refused batch, naming the sub-request (1-based) at fault. */
static int refuse(struct kvd_conn *c, int st, uint32_t i)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "request %u: %s", i, kv_status_text(st));
	kvd_reply_status(c, st, msg);
	kvd_count_now(&c->io->stats, KV_OP_TXN, st);
	return KVD_ANSWERED;
}

/* Check every sub-request and note where each is; KV_OK, or answered. */
static int txn_check(struct kvd_conn *c, struct kvd_req *r, struct txn *t)
{
	struct kvd_argit it;
	struct kv_mp_obj o;
	int rc;

	if ((rc = check_checks(c, r)))
		return rc;
	if (r->argc - 1 > TXN_MAX_OPS)
		return refuse(c, KV_BAD_ARGS, TXN_MAX_OPS + 1);
	t->n = r->argc - 1;
	if (t->n && !(t->s = calloc(t->n, sizeof(*t->s))))
		return KV_INTERNAL;
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 0; i < t->n; i++) {
		struct kvd_req sr = {0};

		kvd_argit_next(&it, &o);
		if (o.type != KV_MP_ARRAY)
			return refuse(c, KV_BAD_ARGS, i + 1);
		t->s[i].p = o.p;
		t->s[i].end = it.p;
		rc = kvd_req_decode(o.p, it.p, &sr);
		if (rc == KV_OK)
			rc = check_sub(c, &sr);
		if (rc != KV_OK)
			return refuse(c, rc == KV_MALFORMED ? KV_BAD_ARGS : rc,
				      i + 1);
		t->s[i].op = (uint16_t)sr.op;
	}
	return KV_OK;
}

/* ===================== Running ===================== */

/* Do the checks of r hold?  In the section, before anything runs. */
static int checks_hold(struct kvd_conn *c, const struct kvd_req *r)
{
	const struct kv_mp_obj *a = &r->a[0];
	const uint8_t *p = a->p;
	struct kv_mp_obj k, e;
	struct kv_buf v = {0};
	uint64_t exp;
	int rc = KV_OK;

	if (a->type == KV_MP_NIL)
		return KV_OK;
	kv_mp_next(&p, r->end, &k); /* the array's header */
	for (uint32_t i = 0; i < a->len && rc == KV_OK; i += 2) {
		kv_mp_next(&p, r->end, &k);
		kv_mp_next(&p, r->end, &e);
		v.len = 0;
		rc = resp_section_read(c, (struct kv_slice){k.p, k.len}, &v,
				       &exp);
		if (rc == KV_NOT_FOUND)
			rc = e.type == KV_MP_NIL ? KV_OK : KV_CHECK_FAILED;
		else if (rc == KV_WRONG_TYPE) /* a hash equals no bytes */
			rc = KV_CHECK_FAILED;
		else if (rc == KV_OK &&
			 (e.type == KV_MP_NIL || e.len != v.len ||
			  (v.len && memcmp(e.p, v.data, v.len))))
			rc = KV_CHECK_FAILED;
	}
	kv_buf_free(&v);
	return rc;
}

/* A write: queued to the section's open batches, answered at the end
 * from its requests' results (its pend stays silent). */
static void run_write(struct kvd_conn *c, struct kvd_excl *x, struct txn *t,
		      struct sub *s, struct kvd_req *sr)
{
	struct kvd_pend *last = c->pend_tail;
	size_t mark = c->out.len;
	int rc;

	kvd_excl_capture(x);
	rc = kvd_op_desc(sr->op)->fn(c, sr);
	if (c->pend_tail != last)
		c->pend_tail->op = KVD_OP_SILENT;
	/* out of memory, the write answered through its pend at once:
	 * not inside this batch's reply (its status says it) */
	c->out.len = mark;
	s->wfirst = (uint32_t)(t->w.len / sizeof(struct kvd_wreq *));
	for (struct kvd_wreq *w = x->cap; w; w = w->next) {
		kv_buf_append(&t->w, &w, sizeof(w));
		s->wn++;
	}
	kvd_excl_apply(x);
	if (rc == KV_OK && (!s->wn || t->w.err))
		rc = KV_INTERNAL; /* nothing was queued, or is known of it */
	s->status = rc;
}

/* A read or a section: it answers now; its reply's body is kept, until
 * the bodies kept outgrow max-frame-size: the batch's reply is then
 * REPLY_TOO_LARGE whatever follows, so they are dropped at once and no
 * later one is kept (keeping them all first held 64 x 16 MiB for a TXN
 * of 64 GETs).  The sub-request still runs: the batch runs whole. */
static void run_now(struct kvd_conn *c, struct kvd_excl *x, struct txn *t,
		    struct sub *s, struct kvd_req *sr)
{
	const struct kvd_op_desc *d = kvd_op_desc(sr->op);
	size_t mark = c->out.len;
	int rc;

	if (d->how == OPH_READ) {
		kvd_excl_commit(x); /* it sees the writes before it */
		c->io->now_ms = kvd_now_ms();
	}
	rc = d->fn(c, sr);
	if (rc == KV_OK && c->out.len >= mark + KV_FRAME_HDR) {
		s->off = t->out.len;
		s->len = c->out.len - mark - KV_FRAME_HDR;
		if (!t->big)
			kv_buf_append(
			    &t->out, c->out.data + mark + KV_FRAME_HDR, s->len);
	} else if (rc == KV_OK) {
		rc = KV_INTERNAL;
	}
	c->out.len = mark;
	s->status = rc;
	if (!t->big && t->out.len > c->io->srv->cfg->max_frame) {
		t->big = 1;
		kv_buf_free(&t->out);
	}
}

/* The frame just written at mark, without its length: one element of
 * the batch's reply. */
static void unframe(struct kvd_conn *c, size_t mark)
{
	if (c->out.err || c->out.len < mark + KV_FRAME_HDR)
		return;
	memmove(c->out.data + mark, c->out.data + mark + KV_FRAME_HDR,
		c->out.len - mark - KV_FRAME_HDR);
	c->out.len -= KV_FRAME_HDR;
}

static void reply_write(struct kvd_conn *c, struct txn *t, struct sub *s)
{
	struct kvd_wreq **w = (struct kvd_wreq **)t->w.data + s->wfirst;
	int st = KV_OK;
	int64_t result = 0;
	const uint8_t *val = NULL;
	size_t vlen = 0;

	for (uint32_t i = 0; i < s->wn; i++) {
		if (w[i]->op.status != KV_OK && st == KV_OK)
			st = w[i]->op.status;
		result += w[i]->op.result;
		if (w[i]->op.val) {
			val = w[i]->op.val;
			vlen = w[i]->op.vlen;
		}
	}
	kvd_cmd_write_reply(c, s->op, st, result, val, vlen);
}

/* The batch's reply, held to max-frame-size as it grows (a write's
 * reply may carry a value too); KV_OK or KV_REPLY_TOO_LARGE. */
static int txn_reply(struct kvd_conn *c, struct txn *t)
{
	size_t off = kvd_reply_begin(c), max = c->io->srv->cfg->max_frame;

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_array(&c->out, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		struct sub *s = &t->s[i];
		size_t mark = c->out.len;

		if (s->status != KV_OK) {
			kvd_reply_status(c, s->status, NULL);
			unframe(c, mark);
		} else if (s->wn) {
			reply_write(c, t, s);
			unframe(c, mark);
		} else {
			kv_buf_append(&c->out, t->out.data + s->off, s->len);
		}
		if (c->out.len - off - KV_FRAME_HDR > max) {
			c->out.len = off;
			return KV_REPLY_TOO_LARGE;
		}
	}
	kvd_reply_end(c, off);
	return KV_OK;
}

static int txn_run(struct kvd_conn *c, struct kvd_req *r, struct txn *t)
{
	struct kvd_excl *x = malloc(sizeof(*x));
	int rc;

	if (!x)
		return KV_INTERNAL;
	kvd_excl_begin(x, c->io->srv->com);
	rc = checks_hold(c, r);
	for (uint32_t i = 0; i < t->n && rc == KV_OK; i++) {
		struct sub *s = &t->s[i];
		struct kvd_req sr = {0};

		kvd_req_decode(s->p, s->end, &sr); /* checked by txn_check */
		if (kvd_op_desc(sr.op)->how == OPH_WRITE)
			run_write(c, x, t, s, &sr);
		else
			run_now(c, x, t, s, &sr);
	}
	kvd_excl_end(x);
	free(x);
	/* Too large, it is refused as a whole, though it ran. */
	if (rc == KV_OK)
		rc = t->big ? KV_REPLY_TOO_LARGE : txn_reply(c, t);
	return rc;
}

int kvd_op_txn(struct kvd_conn *c, struct kvd_req *r)
{
	struct txn t = {0};
	int rc = txn_check(c, r, &t);

	if (rc == KV_OK)
		rc = txn_run(c, r, &t);
	free(t.s);
	kv_buf_free(&t.w);
	kv_buf_free(&t.out);
	return rc;
}
