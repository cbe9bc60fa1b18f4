/* write.c - building write requests and sending them to committers. */
#include "write.h"

#include <string.h>

#include "keyspace.h"
#include "kv_status.h"
#include "loop.h"
#include "router.h"
#include "store.h"

/* ===================== In-flight bounds ===================== */

static uint64_t shard_share(const struct kvd_io *io)
{
	return KVD_LIVE(io->srv->cfg->max_inflight_shard) / io->srv->nio;
}

static uint64_t wreq_items(const struct kvd_wreq *w)
{
	return w->op.kind == KVD_W_FLUSH ? 1 : w->op.nitems;
}

/* Count w against its connection and its shard, then send it. */
static void dispatch(struct kvd_conn *c, struct kvd_wreq *w)
{
	struct kvd_io *io = c->io;

	c->wbytes += w->op.items_len;
	c->witems += wreq_items(w);
	io->shard_wbytes[w->shard] += w->op.items_len;
	if (io->shard_wbytes[w->shard] > shard_share(io))
		c->wshard = (uint16_t)(w->shard + 1);
	kvd_io_dispatch(io, w);
}

void kvd_write_uncharge(struct kvd_conn *c, const struct kvd_wreq *w)
{
	c->wbytes -= w->op.items_len;
	c->witems -= wreq_items(w);
	c->io->shard_wbytes[w->shard] -= w->op.items_len;
}

int kvd_write_over(const struct kvd_conn *c)
{
	const struct kvd_config *cfg = c->io->srv->cfg;

	return c->wshard || c->wbytes > KVD_LIVE(cfg->max_inflight_bytes) ||
	       c->witems > KVD_LIVE(cfg->max_inflight_writes);
}

int kvd_write_may_resume(const struct kvd_conn *c)
{
	const struct kvd_config *cfg = c->io->srv->cfg;

	if (!c->witems)
		return 1;
	if (c->wshard &&
	    c->io->shard_wbytes[c->wshard - 1] > shard_share(c->io))
		return 0;
	return c->wbytes <= KVD_LIVE(cfg->max_inflight_bytes) / 2 &&
	       c->witems <= KVD_LIVE(cfg->max_inflight_writes) / 2;
}

/* ===================== Building requests ===================== */

/* Append one item to a request's payload (layout in shard.h). */
static void put_item(struct kvd_wreq *w, struct kv_slice k, struct kv_slice v)
{
	uint8_t *p = w->data + w->op.items_len;
	uint16_t kn = (uint16_t)k.n;
	uint32_t vn = (uint32_t)v.n;

	memcpy(p, &kn, 2);
	memcpy(p + 2, &vn, 4);
	memcpy(p + KVD_ITEM_HDR, k.p, k.n);
	if (v.n)
		memcpy(p + KVD_ITEM_HDR + k.n, v.p, v.n);
	w->op.items_len += KVD_ITEM_HDR + k.n + v.n;
	w->op.nitems++;
}

/* A request for payload bytes of items; with nseen, room after them for
 * what kvd_shard_apply finds of each of nseen items (keyspace.h asks). */
static struct kvd_wreq *new_wreq(struct kvd_io *io, size_t payload,
				 uint32_t nseen, unsigned shard,
				 enum kvd_wkind kind, struct kvd_pend *pd)
{
	struct kvd_wreq *w = kvd_wreq_new(io, payload + nseen);

	if (!w)
		return NULL;
	memset(&w->op, 0, sizeof(w->op));
	w->op.kind = (uint8_t)kind;
	w->op.items = w->data;
	if (nseen) {
		w->op.seen = w->data + payload;
		memset(w->op.seen, 0, nseen);
	}
	w->shard = (uint16_t)shard;
	w->pend = pd;
	w->tracked = 1;
	return w;
}

int kvd_write_one(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		  struct kv_slice k, struct kv_slice v, uint64_t expire_at,
		  uint8_t flags, int64_t delta)
{
	return kvd_write_tagged(c, op, kind, k, v, expire_at, flags, delta, 0);
}

int kvd_write_tagged(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		     struct kv_slice k, struct kv_slice v, uint64_t expire_at,
		     uint8_t flags, int64_t delta, uint16_t tag)
{
	struct kvd_io *io = c->io;
	struct kvd_pend *pd = kvd_conn_pend(c, op);
	uint64_t h = kvd_key_hash(k.p, k.n);
	struct kvd_wreq *w;

	if (!pd)
		return KV_INTERNAL;
	w = new_wreq(io, KVD_ITEM_HDR + k.n + v.n,
		     kvd_keyspace_seen(io->srv->cfg, kind),
		     kvd_hash_shard(h, io->srv->nshards), kind, pd);
	if (!w) {
		/* The pend is queued: answer through it, in order. */
		pd->status = KV_INTERNAL;
		pd->done = 1;
		kvd_conn_flush(c);
		return KV_OK;
	}
	put_item(w, k, v);
	kvd_conn_track(c, kvd_hash_slot(h), 1);
	w->op.expire_at = expire_at;
	w->op.flags = flags;
	w->op.delta = delta;
	w->op.tag = tag;
	pd->parts = 1;
	dispatch(c, w);
	return KV_OK;
}

/* A merge (KVD_W_MERGE) or a bulk merge (KVD_W_BULK, up to max keys). */
static int write_merge(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		       unsigned ks, unsigned id, int shard, struct kv_slice k,
		       struct kv_slice v, int64_t max, uint32_t aux)
{
	uint64_t h = kvd_key_hash(k.p, k.n);
	struct kvd_wreq *w =
	    new_wreq(c->io, KVD_ITEM_HDR + k.n + v.n, 0,
		     shard >= 0 ? (unsigned)shard
				: kvd_hash_shard(h, c->io->srv->nshards),
		     kind, NULL);
	struct kvd_pend *pd;

	if (!w)
		return KV_INTERNAL;
	if (!(pd = kvd_conn_pend(c, op))) {
		kvd_wreq_free(c->io, w);
		return KV_INTERNAL;
	}
	w->pend = pd;
	put_item(w, k, v);
	kvd_conn_track(c, kvd_hash_slot(h), 1);
	w->op.ks = (uint8_t)ks;
	w->op.flags = (uint8_t)id;
	w->op.delta = max;
	pd->aux = aux;
	pd->parts = 1;
	dispatch(c, w);
	return KV_OK;
}

int kvd_write_merge(struct kvd_conn *c, unsigned op, unsigned ks, unsigned id,
		    int shard, struct kv_slice k, struct kv_slice v,
		    uint32_t aux)
{
	return write_merge(c, op, KVD_W_MERGE, ks, id, shard, k, v, 0, aux);
}

int kvd_write_bulk(struct kvd_conn *c, unsigned op, unsigned ks, unsigned id,
		   unsigned shard, struct kv_slice from, struct kv_slice v,
		   int64_t max, uint32_t aux)
{
	return write_merge(c, op, KVD_W_BULK, ks, id, (int)shard, from, v, max,
			   aux);
}

struct kvd_wreq *kvd_write_now(struct kvd_conn *c, struct kvd_excl *x,
			       unsigned op, enum kvd_wkind kind,
			       struct kv_slice k, struct kv_slice v,
			       uint64_t expire_at, uint16_t tag, unsigned vtype)
{
	struct kvd_wreq *w;

	kvd_excl_capture(x);
	if (kvd_write_tagged(c, op, kind, k, v, expire_at, 0, 0, tag) !=
	    KV_OK) {
		kvd_excl_apply(x);
		return NULL;
	}
	w = x->cap; /* captured, not applied yet */
	if (w)
		w->op.vtype = (uint8_t)vtype;
	kvd_excl_apply(x);
	kvd_excl_commit(x);
	return w;
}

/* One request per shard touched; sizes first, so each is allocated once. */
struct split {
	struct kvd_wreq *w[KVD_MAX_SHARDS];
	size_t size[KVD_MAX_SHARDS];
	uint32_t n[KVD_MAX_SHARDS]; /* items, when keyspace.h asks */
};

static int split_alloc(struct kvd_conn *c, struct split *sp,
		       enum kvd_wkind kind, struct kvd_pend *pd)
{
	for (unsigned s = 0; s < c->io->srv->nshards; s++) {
		if (!sp->size[s])
			continue;
		sp->w[s] = new_wreq(c->io, sp->size[s], sp->n[s], s, kind, pd);
		if (!sp->w[s])
			return -1;
		pd->parts++;
	}
	return 0;
}

/* Send every part, or (ok == 0) free them and answer KV_INTERNAL. */
static void split_finish(struct kvd_conn *c, struct split *sp,
			 struct kvd_pend *pd, int ok)
{
	for (unsigned s = 0; s < c->io->srv->nshards; s++) {
		if (!sp->w[s])
			continue;
		if (ok)
			dispatch(c, sp->w[s]);
		else
			kvd_wreq_free(c->io, sp->w[s]);
	}
	if (!ok) {
		pd->parts = 0;
		pd->status = KV_INTERNAL;
		pd->done = 1;
		kvd_conn_flush(c);
	}
}

int kvd_write_multi(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		    uint32_t n, kvd_item_fn item, void *arg, uint64_t expire_at,
		    uint16_t tag)
{
	unsigned S = c->io->srv->nshards;
	struct kvd_pend *pd = kvd_conn_pend(c, op);
	uint32_t seen = kvd_keyspace_seen(c->io->srv->cfg, kind);
	struct kv_slice k, v;
	struct split sp;

	if (!pd)
		return KV_INTERNAL;
	memset(sp.w, 0, S * sizeof(sp.w[0]));
	memset(sp.size, 0, S * sizeof(sp.size[0]));
	memset(sp.n, 0, S * sizeof(sp.n[0]));
	for (uint32_t i = 0; i < n; i++) {
		unsigned s;

		item(arg, i, &k, &v);
		s = kvd_shard_of(k.p, k.n, S);
		sp.size[s] += KVD_ITEM_HDR + k.n + v.n;
		sp.n[s] += seen;
	}
	if (split_alloc(c, &sp, kind, pd)) {
		split_finish(c, &sp, pd, 0);
		return KV_OK;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvd_wreq *w;
		uint64_t h;

		item(arg, i, &k, &v);
		h = kvd_key_hash(k.p, k.n);
		w = sp.w[kvd_hash_shard(h, S)];
		put_item(w, k, v);
		kvd_conn_track(c, kvd_hash_slot(h), 1);
		w->op.expire_at = expire_at;
		w->op.tag = tag;
	}
	split_finish(c, &sp, pd, 1);
	return KV_OK;
}

int kvd_write_all(struct kvd_conn *c, unsigned op, enum kvd_wkind kind)
{
	struct kvd_pend *pd = kvd_conn_pend(c, op);
	struct split sp;

	if (!pd)
		return KV_INTERNAL;
	for (unsigned s = 0; s < c->io->srv->nshards; s++) {
		sp.w[s] = NULL;
		sp.size[s] = 1;
		sp.n[s] = 0;
	}
	if (split_alloc(c, &sp, kind, pd) == 0) {
		c->wall +=
		    pd->parts; /* one per part, uncounted as each returns */
		split_finish(c, &sp, pd, 1);
	} else {
		split_finish(c, &sp, pd, 0);
	}
	return KV_OK;
}
