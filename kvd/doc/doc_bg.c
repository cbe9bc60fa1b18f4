/* doc_bg.c - the documents' background thread as a store client
 * (doc_bg.h): merges submitted to the committers from a thread that is no
 * io thread, and their results as the pends an io thread would get. */
#include "doc_bg.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kvd.h"
#include "net/loop.h"
#include "net/router.h"

int doc_bg_init(struct doc_bg *g, struct kvd_server *srv)
{
	memset(g, 0, sizeof(*g));
	g->srv = srv;
	if (!(g->sink = calloc(1, sizeof(*g->sink))))
		return -1;
	g->sink->srv = srv;
	g->sink->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->sink->efd < 0 || !(g->rd = kvd_reader_new(srv->store)))
		return -1;
	return 0;
}

void doc_bg_free(struct doc_bg *g)
{
	kvd_reader_free(g->rd);
	kvdoc_catalog_free(&g->cat);
	if (!g->sink)
		return;
	while (g->sink->free_wreq) {
		struct kvd_wreq *w = g->sink->free_wreq;

		g->sink->free_wreq = w->next;
		free(w);
	}
	if (g->sink->efd >= 0)
		close(g->sink->efd);
	free(g->sink);
	g->sink = NULL;
}

static int send_merge(struct doc_bg *g, enum kvd_wkind kind, unsigned ks,
		      unsigned id, int shard, struct kv_slice k,
		      struct kv_slice v, int64_t max, uint32_t tag)
{
	struct kvd_wreq *w = kvd_wreq_new(g->sink, KVD_ITEM_HDR + k.n + v.n);
	uint16_t kn = (uint16_t)k.n;
	uint32_t vn = (uint32_t)v.n;

	if (!w)
		return -1;
	memset(&w->op, 0, sizeof(w->op));
	w->io = g->sink;
	w->pend = (void *)(uintptr_t)tag; /* ours: no connection's pend */
	w->tracked = 0;
	w->shard =
	    (uint16_t)(shard >= 0 ? (unsigned)shard
				  : kvd_shard_of(k.p, k.n, g->srv->nshards));
	w->op.kind = (uint8_t)kind;
	w->op.ks = (uint8_t)ks;
	w->op.flags = (uint8_t)id;
	w->op.delta = max;
	w->op.items = w->data;
	memcpy(w->data, &kn, 2);
	memcpy(w->data + 2, &vn, 4);
	memcpy(w->data + KVD_ITEM_HDR, k.p, k.n);
	if (v.n)
		memcpy(w->data + KVD_ITEM_HDR + k.n, v.p, v.n);
	w->op.items_len = KVD_ITEM_HDR + k.n + v.n;
	w->op.nitems = 1;
	kvd_committer_submit(g->srv->com, w); /* doc_bg_wait flushes */
	g->out++;
	return 0;
}

int doc_bg_merge(struct doc_bg *g, unsigned ks, unsigned id, int shard,
		 struct kv_slice k, struct kv_slice v, uint32_t tag)
{
	return send_merge(g, KVD_W_MERGE, ks, id, shard, k, v, 0, tag);
}

int doc_bg_bulk(struct doc_bg *g, unsigned ks, unsigned id, unsigned shard,
		struct kv_slice from, struct kv_slice v, int64_t max,
		uint32_t tag)
{
	return send_merge(g, KVD_W_BULK, ks, id, (int)shard, from, v, max, tag);
}

int doc_bg_del(struct doc_bg *g, unsigned ks, unsigned shard,
	       struct kv_slice items, uint32_t nitems, uint32_t tag)
{
	struct kvd_wreq *w = kvd_wreq_new(g->sink, items.n);

	if (!w)
		return -1;
	memset(&w->op, 0, sizeof(w->op));
	w->io = g->sink;
	w->pend = (void *)(uintptr_t)tag;
	w->tracked = 0;
	w->shard = (uint16_t)shard;
	w->op.kind = KVD_W_DEL;
	w->op.ks = (uint8_t)ks;
	w->op.items = w->data;
	memcpy(w->data, items.p, items.n);
	w->op.items_len = items.n;
	w->op.nitems = nitems;
	kvd_committer_submit(g->srv->com, w);
	g->out++;
	return 0;
}

void doc_bg_wait(struct doc_bg *g,
		 void (*fn)(void *arg, const struct kvd_pend *pd), void *arg)
{
	while (g->out > 0) {
		struct pollfd p = {.fd = g->sink->efd, .events = POLLIN};
		struct kvd_wreq *w, *rev = NULL;
		uint64_t v;

		/* submit holds a thread's requests until its flush (an io
		 * thread's at the end of its loop turn): this thread has no
		 * turn.  And it never waits holding its reader: a checkpoint
		 * waits for it. */
		kvd_committer_flush(g->srv->com);
		kvd_reader_reset(g->rd);
		if (poll(&p, 1, 1000) > 0 && read(g->sink->efd, &v, 8) < 0) {
			/* consumed by an earlier read */
		}
		w = atomic_exchange(&g->sink->done, NULL);
		while (w) { /* in the order they came back */
			struct kvd_wreq *next = w->next;

			w->next = rev;
			rev = w;
			w = next;
		}
		for (w = rev; w;) {
			struct kvd_wreq *next = w->next;
			struct kvd_pend pd = {.status = w->op.status,
					      .result = w->op.result,
					      .val = w->op.val,
					      .vlen = w->op.vlen,
					      .aux =
						  (uint32_t)(uintptr_t)w->pend};

			g->out--;
			if (fn)
				fn(arg, &pd);
			free(w->op.val);
			kvd_wreq_free(g->sink, w);
			w = next;
		}
	}
}
