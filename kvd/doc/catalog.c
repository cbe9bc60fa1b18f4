/* catalog.c - databases and collections (doc.h, "The catalog"): the
 * catalog's image, the merge that changes it on shard 0's committer, and
 * the io threads' copies of it. */
#include "doc.h"
#include "index.h"

#include <string.h>

#include "kv_status.h"

#define CAT_HDR 16 /* u64 version, u32 next id, u32 n */

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

/* One entry of an image. */
struct cat_ent {
	uint32_t id;
	struct kv_slice db, coll, opts;
	struct kv_slice raw; /* the whole entry */
};

/* The entry at *p (of [p, end)): 0 and *p past it, or -1 malformed. */
static int ent_next(const uint8_t **p, const uint8_t *end, struct cat_ent *e)
{
	const uint8_t *q = *p;
	uint32_t olen;

	if (end - q < 6)
		return -1;
	e->id = rd32(q);
	e->db = (struct kv_slice){q + 5, q[4]};
	q += 5 + q[4];
	if (end - q < 1 || (size_t)(end - q - 1) < q[0])
		return -1;
	e->coll = (struct kv_slice){q + 1, q[0]};
	q += 1 + q[0];
	if (end - q < 4 || (size_t)(end - q - 4) < (olen = rd32(q)))
		return -1;
	e->opts = (struct kv_slice){q + 4, olen};
	q += 4 + olen;
	e->raw = (struct kv_slice){*p, (size_t)(q - *p)};
	*p = q;
	return 0;
}

static int same(struct kv_slice a, const char *s)
{
	return s && a.n == strlen(s) && !memcmp(a.p, s, a.n);
}

/* ---- the operand ---- */

int kvdoc_op_catalog(struct kv_buf *out, unsigned op, unsigned flags,
		     const char *db, const char *coll, const uint8_t *opts,
		     uint32_t olen)
{
	size_t dn = strlen(db), cn = coll ? strlen(coll) : 0;
	uint8_t h[3] = {(uint8_t)op, (uint8_t)flags, (uint8_t)dn}, c = 0;
	uint8_t ol[4];

	if ((!dn && op != KVDOC_CAT_PURGED) || dn > KVDOC_NAME_MAX ||
	    cn > KVDOC_NAME_MAX ||
	    (op != KVDOC_CAT_DROPDB && op != KVDOC_CAT_PURGED && !cn))
		return -1;
	c = (uint8_t)cn;
	wr32(ol, opts ? olen : 0);
	kv_buf_append(out, h, 3);
	kv_buf_append(out, db, dn);
	kv_buf_append(out, &c, 1);
	kv_buf_append(out, coll ? coll : "", cn);
	kv_buf_append(out, ol, 4);
	if (opts && olen)
		kv_buf_append(out, opts, olen);
	return out->err ? -1 : 0;
}

/* ---- the merge (shard 0's committer) ---- */

struct cat_op {
	unsigned op, flags;
	struct kv_slice db, coll, opts;
};

static int cat_parse(struct kv_slice s, struct cat_op *o)
{
	const uint8_t *p = s.p, *end = s.p + s.n;
	uint32_t olen;

	if (s.n < 3)
		return -1;
	o->op = p[0];
	o->flags = p[1];
	o->db = (struct kv_slice){p + 3, p[2]};
	p += 3 + p[2];
	if (end - p < 1 || (size_t)(end - p - 1) < p[0])
		return -1;
	o->coll = (struct kv_slice){p + 1, p[0]};
	p += 1 + p[0];
	if (end - p < 4 || (size_t)(end - p - 4) != (olen = rd32(p)))
		return -1;
	o->opts = (struct kv_slice){p + 4, olen};
	if (o->op == KVDOC_CAT_PURGED)
		return o->opts.n == 4 ? 0 : -1;
	return o->op > KVDOC_CAT_IXREADY || !o->db.n ? -1 : 0;
}

static int slice_eq(struct kv_slice a, struct kv_slice b)
{
	return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n));
}

/* The old image, read. */
struct cat_img {
	uint64_t version;
	uint32_t next, n;
	struct kv_slice ents;  /* the collections' entries */
	struct kv_slice ixs;   /* the indexes' tail (index.h) */
	struct kv_slice purge; /* the purge list's ids ([u32]...) */
	uint32_t cid;	       /* the named collection's id (0: absent) */
};

/* The indexes' tail and the purge list after it (none in an image
 * written before either). */
static int tails_parse(const uint8_t *p, const uint8_t *end, struct cat_img *g)
{
	const uint8_t *q = p + 4;
	struct kvdoc_ix ix;
	uint32_t n;

	g->ixs = (struct kv_slice){p, 0};
	if (end - p < 4)
		return 0;
	n = rd32(p);
	for (uint32_t i = 0; i < n; i++)
		if (kvdoc_ix_next(&q, end, &ix))
			return -1;
	g->ixs.n = (size_t)(q - p);
	if (end - q < 4)
		return 0;
	n = rd32(q);
	if ((size_t)(end - q - 4) < (size_t)n * 4)
		return -1;
	g->purge = (struct kv_slice){q + 4, (size_t)n * 4};
	return 0;
}

static int img_parse(const struct kvd_merge *m, const struct cat_op *o,
		     struct cat_img *g)
{
	const uint8_t *p, *end;
	struct cat_ent e;

	memset(g, 0, sizeof(*g));
	g->next = 1;
	/* A catalog made anew (the first collection, or the first after
	 * FLUSHALL emptied the store) counts its versions on from the
	 * committers' copy: were they to start again at 1, that copy of the
	 * catalog before FLUSHALL would stay "newer" (kvdoc_ix_fresh), and
	 * document merges would keep the indexes of collections gone instead
	 * of the new ones'. */
	if (!m->live || m->old.n < CAT_HDR) {
		g->version = kvdoc_ix_registry_version();
		return 0;
	}
	g->version = rd64(m->old.p);
	g->next = rd32(m->old.p + 8);
	g->n = rd32(m->old.p + 12);
	p = m->old.p + CAT_HDR;
	end = m->old.p + m->old.n;
	for (uint32_t i = 0; i < g->n; i++) {
		if (ent_next(&p, end, &e))
			return -1;
		if (o->coll.n && slice_eq(e.db, o->db) &&
		    slice_eq(e.coll, o->coll))
			g->cid = e.id;
	}
	g->ents = (struct kv_slice){m->old.p + CAT_HDR,
				    (size_t)(p - m->old.p - CAT_HDR)};
	return tails_parse(p, end, g);
}

static void put_ent(struct kv_buf *b, uint32_t id, const struct cat_op *o,
		    struct kv_slice opts)
{
	uint8_t x[5];

	wr32(x, id);
	x[4] = (uint8_t)o->db.n;
	kv_buf_append(b, x, 5);
	kv_buf_append(b, o->db.p, o->db.n);
	x[0] = (uint8_t)o->coll.n;
	kv_buf_append(b, x, 1);
	kv_buf_append(b, o->coll.p, o->coll.n);
	wr32(x, (uint32_t)opts.n);
	kv_buf_append(b, x, 4);
	kv_buf_append(b, opts.p, opts.n);
}

/* The purge list: the old one's ids but PURGED's, then gone's.  For
 * PURGED, m->result is 1 when its id was listed, else 0. */
static void purge_put(struct kvd_merge *m, const struct cat_op *o,
		      const struct cat_img *g, const struct kv_buf *gone)
{
	uint32_t n = 0, id = o->op == KVDOC_CAT_PURGED ? rd32(o->opts.p) : 0;
	size_t at = m->image->len;
	uint8_t cnt[4] = {0};

	kv_buf_append(m->image, cnt, 4);
	for (size_t i = 0; i + 4 <= g->purge.n; i += 4) {
		if (id && rd32(g->purge.p + i) == id) {
			m->result = 1;
			continue;
		}
		kv_buf_append(m->image, g->purge.p + i, 4);
		n++;
	}
	kv_buf_append(m->image, gone->data, gone->len);
	n += (uint32_t)(gone->len / 4);
	if (!m->image->err)
		wr32(m->image->data + at, n);
}

/* The new image: the old one's entries but the dropped ones, then the
 * created one, then the indexes' tail, then the purge list (the dropped
 * collections' and indexes' ids added); version + 1.  The number of
 * collections dropped, or -1. */
static int cat_rewrite(struct kvd_merge *m, const struct cat_op *o,
		       struct cat_img *g)
{
	const uint8_t *p = g->ents.p, *end = g->ents.p + g->ents.n;
	struct kv_buf *b = m->image, live = {0}, gone = {0};
	uint8_t hdr[CAT_HDR] = {0}, idb[4];
	uint32_t kept = 0, dropped = 0, next = g->next;
	struct cat_ent e;
	int rc = -1;

	kv_buf_append(b, hdr, CAT_HDR);
	for (uint32_t i = 0; i < g->n; i++) {
		if (ent_next(&p, end, &e))
			goto out;
		if ((o->op == KVDOC_CAT_DROP || o->op == KVDOC_CAT_DROPDB) &&
		    slice_eq(e.db, o->db) &&
		    (o->op == KVDOC_CAT_DROPDB || slice_eq(e.coll, o->coll))) {
			dropped++;
			m->result = o->op == KVDOC_CAT_DROP ? e.id : dropped;
			wr32(idb, e.id);
			kv_buf_append(&gone, idb, 4);
			continue;
		}
		kv_buf_append(b, e.raw.p, e.raw.n);
		wr32(idb, e.id);
		kv_buf_append(&live, idb, 4);
		kept++;
	}
	/* CREATE, and an index's first on a collection that is not there */
	if (o->op == KVDOC_CAT_CREATE ||
	    (o->op == KVDOC_CAT_IXADD && !g->cid)) {
		g->cid = next++;
		put_ent(b, g->cid, o,
			o->op == KVDOC_CAT_CREATE ? o->opts
						  : (struct kv_slice){0});
		if (o->op == KVDOC_CAT_CREATE)
			m->result = g->cid;
		wr32(idb, g->cid);
		kv_buf_append(&live, idb, 4);
		kept++;
	}
	if (live.err || kvdoc_ix_rewrite(m, o->op, o->opts, g->ixs, &live,
					 g->cid, &next, &gone))
		goto out;
	if (m->status != KV_OK || m->result < 0) { /* refused: no change */
		rc = 0;
		goto out;
	}
	if (gone.err)
		goto out;
	purge_put(m, o, g, &gone);
	if (b->err)
		goto out;
	wr64(b->data, g->version + 1);
	wr32(b->data + 8, next);
	wr32(b->data + 12, kept);
	rc = (int)dropped;
out:
	kv_buf_free(&live);
	kv_buf_free(&gone);
	return rc;
}

/* CREATE of an existing collection: nothing changes. */
static int create_exists(struct kvd_merge *m, const struct cat_op *o,
			 const struct cat_img *g)
{
	m->result = g->cid;
	if (o->flags & KVDOC_EXCL)
		m->status = KV_EXISTS;
	return 0;
}

int kvdoc_catalog_merge(void *ctx, struct kvd_merge *m)
{
	struct cat_op o;
	struct cat_img g;
	int dropped;

	(void)ctx;
	m->action = KVD_MERGE_KEEP;
	if (cat_parse(m->operand, &o)) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (img_parse(m, &o, &g)) {
		m->status = KV_INTERNAL;
		return 0;
	}
	if (o.op == KVDOC_CAT_CREATE && g.cid)
		return create_exists(m, &o, &g);
	if ((o.op == KVDOC_CAT_IXDROP || o.op == KVDOC_CAT_IXREADY) && !g.cid) {
		m->status = KV_NOT_FOUND;
		return 0;
	}
	dropped = cat_rewrite(m, &o, &g);
	if (dropped < 0)
		return m->image->err ? ENOMEM : (m->status = KV_INTERNAL, 0);
	/* an index operation that changed nothing (or was refused) */
	if (m->status != KV_OK || m->result < 0)
		return 0;
	if (o.op == KVDOC_CAT_DROP && !dropped) {
		m->status = KV_NOT_FOUND;
		return 0;
	}
	if ((o.op == KVDOC_CAT_DROPDB && !dropped) ||
	    (o.op == KVDOC_CAT_PURGED && m->result != 1))
		return 0;
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_PLAIN;
	kvdoc_ix_registry_set(m->image->data, m->image->len);
	return 0;
}

/* ---- an io thread's copy ---- */

int kvdoc_catalog_refresh(struct kvdoc_catalog *c, struct kvd_reader *r,
			  uint64_t now)
{
	struct kv_slice v;
	unsigned type;
	int rc = kvd_reader_getk(r, 0, KVD_KS_CATALOG, KVDOC_CATALOG_KEY,
				 sizeof(KVDOC_CATALOG_KEY) - 1, now, &v, &type);

	if (rc == KV_NOT_FOUND) {
		c->img.len = 0;
		c->version = 0;
		return KV_OK;
	}
	if (rc)
		return rc;
	if (v.n < CAT_HDR)
		return KV_INTERNAL;
	/* FLUSHALL empties the catalog and its versions start again: a copy
	 * of an older catalog may carry the same version, so the bytes are
	 * compared too (a catalog is small) */
	if (rd64(v.p) == c->version && c->img.len == v.n &&
	    !memcmp(c->img.data, v.p, v.n))
		return KV_OK;
	c->img.len = 0;
	if (kv_buf_append(&c->img, v.p, v.n)) {
		c->version = 0;
		return KV_INTERNAL;
	}
	c->version = rd64(v.p);
	return KV_OK;
}

void kvdoc_catalog_free(struct kvdoc_catalog *c)
{
	kv_buf_free(&c->img);
	c->version = 0;
}

void kvdoc_catalog_each(const struct kvdoc_catalog *c, const char *db,
			kvdoc_coll_fn fn, void *arg)
{
	const uint8_t *p, *end;
	uint32_t n;
	struct cat_ent e;

	if (c->img.len < CAT_HDR)
		return;
	p = c->img.data + CAT_HDR;
	end = c->img.data + c->img.len;
	n = rd32(c->img.data + 12);
	for (uint32_t i = 0; i < n && !ent_next(&p, end, &e); i++)
		if ((!db || same(e.db, db)) &&
		    fn(arg, e.id, e.db, e.coll, e.opts))
			return;
}

void kvdoc_catalog_indexes(const struct kvdoc_catalog *c, uint32_t coll,
			   kvdoc_ix_fn fn, void *arg)
{
	const uint8_t *p, *end;
	uint32_t n;
	struct cat_ent e;
	struct kvdoc_ix ix;

	if (c->img.len < CAT_HDR)
		return;
	p = c->img.data + CAT_HDR;
	end = c->img.data + c->img.len;
	n = rd32(c->img.data + 12);
	for (uint32_t i = 0; i < n; i++)
		if (ent_next(&p, end, &e))
			return;
	if (end - p < 4)
		return;
	n = rd32(p);
	p += 4;
	for (uint32_t i = 0; i < n && !kvdoc_ix_next(&p, end, &ix); i++)
		if ((!coll || ix.coll == coll) && fn(arg, &ix))
			return;
}

int kvdoc_catalog_purge_first(const struct kvdoc_catalog *c, uint32_t *id)
{
	struct cat_img g;
	const uint8_t *p, *end;
	struct cat_ent e;

	if (c->img.len < CAT_HDR)
		return 0;
	p = c->img.data + CAT_HDR;
	end = c->img.data + c->img.len;
	for (uint32_t i = 0, n = rd32(c->img.data + 12); i < n; i++)
		if (ent_next(&p, end, &e))
			return 0;
	memset(&g, 0, sizeof(g));
	if (tails_parse(p, end, &g) || g.purge.n < 4)
		return 0;
	*id = rd32(g.purge.p);
	return 1;
}

struct find_arg {
	const char *coll;
	uint32_t id;
	struct kv_slice opts;
	int found;
};

static int find_fn(void *arg, uint32_t id, struct kv_slice db,
		   struct kv_slice coll, struct kv_slice opts)
{
	struct find_arg *f = arg;

	(void)db;
	if (!same(coll, f->coll))
		return 0;
	f->id = id;
	f->opts = opts;
	f->found = 1;
	return 1;
}

int kvdoc_catalog_find(const struct kvdoc_catalog *c, const char *db,
		       const char *coll, uint32_t *id, struct kv_slice *opts)
{
	struct find_arg f = {.coll = coll};

	kvdoc_catalog_each(c, db, find_fn, &f);
	if (f.found) {
		*id = f.id;
		if (opts)
			*opts = f.opts;
	}
	return f.found;
}
