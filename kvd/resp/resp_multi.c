/* resp_multi.c - MULTI, EXEC, DISCARD, WATCH and UNWATCH on the RESP port.
 *
 * After MULTI the dispatcher (resp.c) queues each command here, packed as
 * an inline request is, and answers +QUEUED, or its error at once (which
 * makes EXEC answer EXECABORT, as Redis does).  EXEC runs the queue inside
 * an exclusive section (shard.h): no committer runs a batch meanwhile,
 * so no other client's write lands in between, and the transaction's
 * writes are applied by this thread to one open batch per shard.  A read
 * in the queue first commits the open batches, so that it sees the
 * transaction's own writes before it; a transaction with no read after a
 * write is therefore one journal batch per shard.
 *
 * Bounds: the queue is held to multi-max-commands and multi-max-bytes; a
 * command past either is refused, which makes EXEC answer EXECABORT, and
 * the queue is released then and there (as Redis, later commands are
 * answered +QUEUED and not kept).  EXEC's replies are held to max-output
 * together (run_queue).
 *
 * WATCH registers the key in a global table; a committer that stores a
 * watched key marks its watchers (kvd_watch_touch).  A key live at WATCH
 * and absent at EXEC (deleted, expired, flushed) counts as changed too,
 * which is Redis 7.0's rule for expiry and FLUSHALL.  EXEC looks inside an
 * exclusive section, so no batch can straddle its look.  WATCH registers
 * its keys inside one, so no batch can have marked a key before it was
 * registered and store it after, and reads whether each is live after it:
 * a store that batch reads miss comes after the registration and marks
 * the key.  Everything else WATCH does (copying, hashing, finding the keys
 * the connection already watches, in a hash set of its own) is done
 * before the section, which holds only one insertion per new key: the
 * work is linear in the keys, and writers wait for the least of it.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "resp.h"
#include "net/router.h"
#include "shash.h"
#include "store.h"
#include "net/write.h"

#define WATCH_MIN_BUCKETS 4096

struct kvd_watch {
	struct kvd_watch *next, **pprev; /* its bucket, under watch_mu */
	struct kvd_watch *cnext;	 /* its connection's list */
	struct kvd_watch *snext;	 /* its connection's set (wset) */
	uint64_t h;
	atomic_int dirty;
	int live; /* the key was live at WATCH */
	uint32_t klen;
	uint8_t key[];
};

struct resp_txq {
	int on;	     /* inside MULTI */
	int aborted; /* a command was refused while queueing */
	uint32_t n;
	struct kv_buf q; /* per command: u16 id, u32 argc, u32 len, args */
	struct kvd_watch *watches;
	struct kvd_watch **wset; /* the same watches by hash, chained */
	size_t nwatches, wsetcap;
};

/* Every connection's watches by key hash, doubled at one per bucket. */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kvd_watch *watch_ht0[WATCH_MIN_BUCKETS];
static struct kvd_watch **watch_ht = watch_ht0;
static size_t watch_nb = WATCH_MIN_BUCKETS, watch_n;
static atomic_uint nwatch;

static int same_key(const struct kvd_watch *w, uint64_t h, const void *k,
		    size_t n)
{
	return w->h == h && w->klen == n && !memcmp(w->key, k, n);
}

void kvd_watch_touch(void *arg, const void *key, size_t klen)
{
	struct kvd_watch *w;
	uint64_t h;

	(void)arg;
	if (!atomic_load_explicit(&nwatch, memory_order_relaxed))
		return;
	h = kvd_shash(key, klen);
	pthread_mutex_lock(&watch_mu);
	for (w = watch_ht[h & (watch_nb - 1)]; w; w = w->next)
		if (same_key(w, h, key, klen))
			atomic_store(&w->dirty, 1);
	pthread_mutex_unlock(&watch_mu);
}

static void ht_link(struct kvd_watch **b, struct kvd_watch *w)
{
	w->next = *b;
	if (w->next)
		w->next->pprev = &w->next;
	w->pprev = b;
	*b = w;
}

/* Room for want watches at one per bucket; watch_mu held.  Out of memory
 * the table keeps its size: longer chains, still correct. */
static void ht_grow(size_t want)
{
	size_t nb = watch_nb;
	struct kvd_watch **b;

	while (nb < want)
		nb *= 2;
	if (nb == watch_nb || !(b = calloc(nb, sizeof(*b))))
		return;
	for (size_t i = 0; i < watch_nb; i++) {
		struct kvd_watch *w, *next;

		for (w = watch_ht[i]; w; w = next) {
			next = w->next;
			ht_link(&b[w->h & (nb - 1)], w);
		}
	}
	if (watch_ht != watch_ht0)
		free(watch_ht);
	watch_ht = b;
	watch_nb = nb;
}

static struct resp_txq *txq(struct kvd_conn *c)
{
	if (!c->txq)
		c->txq = calloc(1, sizeof(*c->txq));
	return c->txq;
}

static void unwatch_all(struct kvd_conn *c)
{
	struct kvd_watch *w, *next;

	if (!c->txq || !c->txq->watches)
		return;
	pthread_mutex_lock(&watch_mu);
	for (w = c->txq->watches; w; w = next) {
		next = w->cnext;
		*w->pprev = w->next;
		if (w->next)
			w->next->pprev = w->pprev;
		atomic_fetch_sub(&nwatch, 1);
		watch_n--;
		free(w);
	}
	pthread_mutex_unlock(&watch_mu);
	c->txq->watches = NULL;
	free(c->txq->wset);
	c->txq->wset = NULL;
	c->txq->nwatches = c->txq->wsetcap = 0;
}

static void reset_queue(struct resp_txq *t)
{
	t->on = t->aborted = 0;
	t->n = 0;
	t->q.len = 0;
	t->q.err = 0;
	kv_buf_trim(&t->q, 4096);
}

void kvd_resp_multi_free(struct kvd_conn *c)
{
	if (!c->txq)
		return;
	unwatch_all(c);
	kv_buf_free(&c->txq->q);
	free(c->txq);
	c->txq = NULL;
}

size_t kvd_resp_multi_mem(const struct kvd_conn *c)
{
	return c->txq ? c->txq->q.cap : 0;
}

int kvd_resp_in_multi(const struct kvd_conn *c)
{
	return c->txq && c->txq->on;
}

/* EXEC will discard the queue: it goes now (a client that pipelines a
 * transaction past its limit may never read the refusal). */
void kvd_resp_multi_refuse(struct kvd_conn *c)
{
	c->txq->aborted = 1;
	c->txq->n = 0;
	kv_buf_free(&c->txq->q);
}

/* The queue's limits, checked before a byte is queued. */
static const char *queue_full(struct kvd_conn *c, struct resp_req *r)
{
	const struct kvd_config *cfg = c->io->srv->cfg;
	struct resp_txq *t = c->txq;
	uint64_t bytes = sizeof(uint16_t) + sizeof(uint32_t);
	struct resp_it it;
	struct kv_slice a;

	if (t->n >= KVD_LIVE(cfg->multi_max_cmds)) {
		snprintf(r->err, sizeof(r->err),
			 "ERR MULTI queue would exceed multi-max-commands "
			 "(%llu commands)",
			 (unsigned long long)KVD_LIVE(cfg->multi_max_cmds));
		return r->err;
	}
	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		resp_it_next(&it, &a);
		bytes += sizeof(uint32_t) + a.n;
	}
	if (t->q.len + bytes > KVD_LIVE(cfg->multi_max_bytes)) {
		snprintf(r->err, sizeof(r->err),
			 "ERR MULTI queue would exceed multi-max-bytes (%llu "
			 "bytes)",
			 (unsigned long long)KVD_LIVE(cfg->multi_max_bytes));
		return r->err;
	}
	return NULL;
}

const char *kvd_resp_multi_queue(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_txq *t = c->txq;
	struct resp_it it;
	struct kv_slice a;
	uint16_t id = r->cmd;
	const char *err;

	/* As Redis: once EXEC is bound to answer EXECABORT, a command is
	 * answered +QUEUED and not kept. */
	if (t->aborted)
		return NULL;
	if ((err = queue_full(c, r)))
		return err;
	kv_buf_append(&t->q, &id, sizeof(id));
	kv_buf_append(&t->q, &r->argc, sizeof(r->argc));
	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		uint32_t n;

		resp_it_next(&it, &a);
		n = (uint32_t)a.n;
		kv_buf_append(&t->q, &n, sizeof(n));
		kv_buf_append(&t->q, a.p, a.n);
	}
	if (t->q.err)
		return resp_err_internal;
	t->n++;
	return NULL;
}

/* ===================== Commands ===================== */

const char *resp_multi(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_txq *t = txq(c);

	(void)r;
	if (!t)
		return resp_err_internal;
	if (t->on)
		return "ERR MULTI calls can not be nested";
	t->on = 1;
	resp_add_ok(c);
	return NULL;
}

const char *resp_discard(struct kvd_conn *c, struct resp_req *r)
{
	(void)r;
	if (!kvd_resp_in_multi(c))
		return "ERR DISCARD without MULTI";
	reset_queue(c->txq);
	unwatch_all(c);
	resp_add_ok(c);
	return NULL;
}

const char *resp_unwatch(struct kvd_conn *c, struct resp_req *r)
{
	(void)r;
	unwatch_all(c);
	resp_add_ok(c);
	return NULL;
}

static int key_live(struct kvd_conn *c, struct kv_slice k)
{
	struct kvd_io *io = c->io;
	struct kv_slice v;
	unsigned type;
	uint64_t exp;

	if (!resp_key_ok(c, k))
		return 0;
	return kvd_reader_getv(io->reader,
			       kvd_shard_of(k.p, k.n, io->srv->nshards), k.p,
			       k.n, kvd_now_ms(), &v, &type, &exp) == KV_OK;
}

/* Double the connection's set of watches (from its list) at one per
 * bucket; -1 when out of memory. */
static int wset_grow(struct resp_txq *t)
{
	size_t cap = t->wsetcap ? 2 * t->wsetcap : 64;
	struct kvd_watch **b = calloc(cap, sizeof(*b));

	if (!b)
		return -1;
	for (struct kvd_watch *w = t->watches; w; w = w->cnext) {
		w->snext = b[w->h & (cap - 1)];
		b[w->h & (cap - 1)] = w;
	}
	free(t->wset);
	t->wset = b;
	t->wsetcap = cap;
	return 0;
}

/* A new watch of k on the connection's list and set, not yet in the
 * global table: 0, 1 when the connection watches k already (as Redis,
 * the first WATCH stands), -1 when out of memory. */
static int watch_new(struct resp_txq *t, struct kv_slice k)
{
	uint64_t h = kvd_shash(k.p, k.n);
	struct kvd_watch *w, **b;

	for (w = t->wsetcap ? t->wset[h & (t->wsetcap - 1)] : NULL; w;
	     w = w->snext)
		if (same_key(w, h, k.p, k.n))
			return 1;
	if (t->nwatches >= t->wsetcap && wset_grow(t))
		return -1;
	if (!(w = calloc(1, sizeof(*w) + k.n)))
		return -1;
	w->h = h;
	w->klen = (uint32_t)k.n;
	memcpy(w->key, k.p, k.n);
	w->cnext = t->watches;
	t->watches = w;
	b = &t->wset[h & (t->wsetcap - 1)];
	w->snext = *b;
	*b = w;
	t->nwatches++;
	return 0;
}

const char *resp_watch(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_txq *t;
	struct kvd_excl x;
	struct kvd_watch *w;
	struct resp_it it;
	struct kv_slice k;
	size_t n = 0, i;
	int rc = 0;

	if (kvd_resp_in_multi(c))
		return "ERR WATCH inside MULTI is not allowed";
	if (!(t = txq(c)))
		return resp_err_internal;
	resp_it_init(r, 1, &it);
	for (uint32_t a = 1; a < r->argc && rc >= 0; a++) {
		resp_it_next(&it, &k);
		rc = watch_new(t, k);
		n += rc == 0;
	}
	/* The n new watches head the list: registered in the section, read
	 * after it (see the top of this file). */
	if (n) {
		kvd_excl_begin(&x, c->io->srv->com);
		pthread_mutex_lock(&watch_mu);
		ht_grow(watch_n + n);
		for (w = t->watches, i = 0; i < n; w = w->cnext, i++)
			ht_link(&watch_ht[w->h & (watch_nb - 1)], w);
		watch_n += n;
		atomic_fetch_add(&nwatch, (unsigned)n);
		pthread_mutex_unlock(&watch_mu);
		kvd_excl_end(&x);
	}
	for (w = t->watches, i = 0; i < n; w = w->cnext, i++)
		w->live = key_live(c, (struct kv_slice){w->key, w->klen});
	if (rc < 0)
		return resp_err_nomem;
	resp_add_ok(c);
	return NULL;
}

/* Has a watched key changed since WATCH?  In an exclusive section. */
static int watch_broken(struct kvd_conn *c)
{
	for (struct kvd_watch *w = c->txq->watches; w; w = w->cnext) {
		struct kv_slice k = {.p = w->key, .n = w->klen};

		if (atomic_load(&w->dirty) || (w->live && !key_live(c, k)))
			return 1;
	}
	return 0;
}

/* Run the queued commands; their replies follow the array's header.
 * The replies are held to max-output together as they are made: one
 * that would take them past it is dropped for an error, and the queue
 * runs on (a transaction runs whole).  Replies waiting behind the
 * transaction's writes (kvd_conn_defer) count the same. */
static void run_queue(struct kvd_conn *c, struct kvd_excl *x, const uint8_t *p,
		      uint32_t n)
{
	size_t cap = resp_reply_cap(c), used = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct resp_req r;
		uint16_t id;
		uint32_t argc;

		memcpy(&id, p, sizeof(id));
		memcpy(&argc, p + sizeof(id), sizeof(argc));
		p += sizeof(id) + sizeof(argc);
		memset(&r, 0, offsetof(struct resp_req, err));
		r.cmd = id;
		r.argc = argc;
		r.body = p;
		r.packed = 1;
		resp_req_fill(&r);
		for (uint32_t j = 0; j < argc; j++) {
			uint32_t len;

			memcpy(&len, p, sizeof(len));
			p += sizeof(len) + len;
		}
		if (resp_cmds[id].flags & RC_WRITE) {
			kvd_excl_capture(x);
			used +=
			    kvd_resp_run(c, &r, used < cap ? cap - used : 0);
			kvd_excl_apply(x);
		} else {
			/* reads see the transaction's writes before them */
			kvd_excl_commit(x);
			used +=
			    kvd_resp_run(c, &r, used < cap ? cap - used : 0);
		}
	}
}

const char *resp_exec(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_txq *t = c->txq;
	struct kvd_excl *x;
	struct kv_buf q;

	(void)r;
	if (!kvd_resp_in_multi(c))
		return "ERR EXEC without MULTI";
	if (t->aborted) {
		reset_queue(t);
		unwatch_all(c);
		return "EXECABORT Transaction discarded because of previous "
		       "errors.";
	}
	x = malloc(sizeof(*x));
	if (!x)
		return resp_err_internal;
	kvd_excl_begin(x, c->io->srv->com);
	if (watch_broken(c)) {
		kvd_excl_end(x);
		free(x);
		reset_queue(t);
		unwatch_all(c);
		resp_add_raw(c, "*-1\r\n", 5);
		return NULL;
	}
	unwatch_all(c);
	/* The queue leaves the connection first: a queued MULTI-free
	 * command such as UNWATCH may touch its state. */
	q = t->q;
	memset(&t->q, 0, sizeof(t->q));
	resp_add_array(c, t->n);
	run_queue(c, x, q.data, t->n);
	kvd_excl_end(x);
	free(x);
	kv_buf_free(&t->q);
	t->q = q;
	reset_queue(t);
	return NULL;
}

/* ===================== RENAME, RENAMENX, COPY ===================== */

/* A key's value of any type (copied), its type and absolute expiry (0:
 * none), read in an exclusive section; KV_OK, KV_NOT_FOUND or a KV_*
 * failure. */
int resp_section_readv(struct kvd_conn *c, struct kv_slice k, struct kv_buf *v,
		       uint64_t *exp, unsigned *type)
{
	struct kvd_io *io = c->io;
	unsigned s = kvd_shard_of(k.p, k.n, io->srv->nshards);
	struct kv_slice val;
	int rc;

	io->now_ms = kvd_now_ms();
	rc = kvd_reader_getv(io->reader, s, k.p, k.n, io->now_ms, &val, type,
			     exp);
	if (rc != KV_OK)
		return rc;
	if (v && kv_buf_append(v, val.p, val.n))
		return KV_INTERNAL;
	return KV_OK;
}

int resp_section_read(struct kvd_conn *c, struct kv_slice k, struct kv_buf *v,
		      uint64_t *exp)
{
	unsigned type;
	size_t len = v ? v->len : 0;
	int rc = resp_section_readv(c, k, v, exp, &type);

	if (rc == KV_OK && type != KVD_VT_PLAIN) {
		if (v) /* a string command meeting a hash gets none of it */
			v->len = len;
		return KV_WRONG_TYPE;
	}
	return rc;
}

/* The tag of the PUT that moves or copies src: RENAME's events are its
 * own (kvd_keyspace_renamed), COPY's "copy_to"; the value keeps its
 * encoding, and COPY makes a private object of a shared one. */
static uint16_t moved_tag(struct kvd_conn *c, struct kv_slice src, int del)
{
	unsigned enc = kvd_keyspace_encoding(
	    kvd_shard_of(src.p, src.n, c->io->srv->nshards), src);

	if (del)
		return KVD_TAG(KVD_EV_QUIET, enc) | KVD_TAG_NEW;
	return KVD_TAG(KVD_EV_COPY_TO, enc ? enc : KVD_ENC_PRIVATE) |
	       KVD_TAG_NEW;
}

/* Copy src to dst (its expiry with it), then delete src when del.  The
 * new key is committed (in sync mode flushed) before the old one is
 * deleted: a crash in between leaves both, never neither. */
static const char *move_key(struct kvd_conn *c, struct kvd_excl *x,
			    struct resp_req *r, int del, int replace)
{
	struct kv_slice src = r->a[1], dst = r->a[2];
	struct kv_buf v = {0};
	uint64_t exp = 0, dexp;
	const char *err = NULL;
	struct kvd_wreq *w;
	unsigned type = KVD_VT_PLAIN, dtype;
	int rc, same = src.n == dst.n && !memcmp(src.p, dst.p, src.n);
	int nx = r->cmd == RESP_CMD_RENAMENX || !replace;

	rc = resp_section_readv(c, src, &v, &exp, &type);
	if (rc == KV_NOT_FOUND) {
		if (r->cmd == RESP_CMD_COPY)
			resp_add_int(c, 0);
		else
			err = "ERR no such key";
		goto out;
	}
	if (rc != KV_OK) {
		err = resp_err_internal;
		goto out;
	}
	if (same) { /* RENAME k k: +OK, RENAMENX k k: :0 */
		if (r->cmd == RESP_CMD_RENAME)
			resp_add_ok(c);
		else
			resp_add_int(c, 0);
		goto out;
	}
	if (nx &&
	    resp_section_readv(c, dst, NULL, &dexp, &dtype) != KV_NOT_FOUND) {
		resp_add_int(c, 0);
		goto out;
	}
	w = kvd_write_now(c, x, del ? RESP_CMD_EXEC : r->cmd, KVD_W_PUT, dst,
			  (struct kv_slice){.p = v.data, .n = v.len}, exp,
			  moved_tag(c, src, del), type);
	if (!w || !del)
		goto out; /* COPY: the PUT's own reply says what happened */
	if (w->op.status != KV_OK) { /* the source stays */
		snprintf(r->err, sizeof(r->err), "ERR %s",
			 kv_status_text(w->op.status));
		err = r->err;
		goto out;
	}
	w = kvd_write_now(c, x, r->cmd, KVD_W_DEL, src, (struct kv_slice){0}, 0,
			  KVD_TAG(KVD_EV_QUIET, 0), KVD_VT_PLAIN);
	if (w && w->op.status == KV_OK)
		kvd_keyspace_renamed(c->io->srv->cfg, src, dst);
out:
	kv_buf_free(&v);
	return err;
}

/* A write queued with the silent op (RESP_CMD_EXEC: its pend says
 * nothing, the command answered itself)? */
static int silent(const struct kvd_wreq *w)
{
	const struct kvd_pend *pd = w->pend;

	return pd && pd->op == RESP_CMD_EXEC;
}

/* The silent writes among list w; a malloc'd array. */
static struct kvd_wreq **silent_parts(struct kvd_wreq *w, size_t *n)
{
	struct kvd_wreq **a, *p;
	size_t k = 0;

	*n = 0;
	for (p = w; p; p = p->next)
		k += silent(p);
	if (!k || !(a = malloc(k * sizeof(*a))))
		return NULL;
	for (p = w; p; p = p->next)
		if (silent(p))
			a[(*n)++] = p;
	return a;
}

/* A silent write that failed takes back the reply its command gave. */
static const char *silent_failed(struct kvd_conn *c, struct resp_req *r,
				 struct kvd_wreq **a, size_t n, size_t mark)
{
	for (size_t i = 0; i < n; i++) {
		int st = a[i]->op.status;

		if (st >= KV_MALFORMED) {
			if (c->out.len >= mark)
				c->out.len = mark;
			snprintf(r->err, sizeof(r->err), "ERR %s",
				 kv_status_text(st));
			return r->err;
		}
	}
	return NULL;
}

const char *resp_in_section(struct kvd_conn *c, struct resp_req *r,
			    resp_excl_fn fn, void *arg)
{
	struct kvd_excl *x = kvd_excl_current(), *own = NULL;
	struct kvd_wreq **silent;
	size_t mark = c->out.len, n;
	const char *err;

	if (x) {
		kvd_excl_commit(x);
	} else {
		own = malloc(sizeof(*own));
		if (!own)
			return resp_err_internal;
		kvd_excl_begin(own, c->io->srv->com);
		x = own;
	}
	kvd_excl_capture(x);
	err = fn(c, r, arg);
	silent = silent_parts(x->cap, &n);
	kvd_excl_apply(x);
	kvd_excl_commit(x);
	if (!err)
		err = silent_failed(c, r, silent, n, mark);
	free(silent);
	if (own) {
		kvd_excl_end(own);
		free(own);
	}
	return err;
}

struct move_args {
	int del, replace;
};

static const char *move_fn(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	const struct move_args *m = arg;

	return move_key(c, kvd_excl_current(), r, m->del, m->replace);
}

static const char *move(struct kvd_conn *c, struct resp_req *r, int del,
			int replace)
{
	struct move_args m = {del, replace};

	if (!resp_key_ok(c, r->a[1]) || !resp_key_ok(c, r->a[2]))
		return resp_err_key;
	return resp_in_section(c, r, move_fn, &m);
}

const char *resp_rename(struct kvd_conn *c, struct resp_req *r)
{
	return move(c, r, 1, r->cmd == RESP_CMD_RENAME);
}

/* COPY src dst [DB n] [REPLACE]: only database 0 exists. */
const char *resp_copy(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice a;
	int replace = 0;

	resp_it_init(r, 3, &it);
	for (uint32_t i = 3; i < r->argc; i++) {
		resp_it_next(&it, &a);
		if (resp_eq(a, "replace")) {
			replace = 1;
		} else if (resp_eq(a, "db") && i + 1 < r->argc) {
			long long db;

			resp_it_next(&it, &a);
			i++;
			if (resp_ll(a, &db))
				return resp_err_int;
			if (db < INT32_MIN || db > INT32_MAX)
				return "ERR value is out of range, value must "
				       "between -2147483648 and 2147483647";
			if (db != 0)
				return "ERR DB index is out of range";
		} else {
			return resp_err_syntax;
		}
	}
	if (r->a[1].n == r->a[2].n && !memcmp(r->a[1].p, r->a[2].p, r->a[1].n))
		return "ERR source and destination objects are the same";
	return move(c, r, 0, replace);
}
