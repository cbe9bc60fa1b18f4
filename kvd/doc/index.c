/* index.c - index entries kept by the documents' merges (index.h,
 * "Maintenance"): a document's keys for each index of its operand's
 * section, before and after the change, and the difference written as
 * side writes in the document's batch; and REINDEX, a build's step. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "kv_status.h"
#include "mongo/mql_match.h"

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

size_t kvdoc_ix_entry(uint32_t id, const uint8_t *key, size_t kn,
		      const uint8_t *dkey, size_t dn, uint8_t *out)
{
	size_t n = KVDOC_IX_PREFIX + kn + (dn - 4);

	if (dn < 4 || n > 511)
		return 0;
	out[0] = (uint8_t)(id >> 24);
	out[1] = (uint8_t)(id >> 16);
	out[2] = (uint8_t)(id >> 8);
	out[3] = (uint8_t)id;
	memcpy(out + 4, key, kn);
	memcpy(out + 4 + kn, dkey + 4, dn - 4);
	return n;
}

/* One index of a section. */
struct sec_ix {
	uint32_t id;
	unsigned flags;
	struct kv_slice key, pfe;
};

static int blob(const uint8_t **p, const uint8_t *end, struct kv_slice *s)
{
	uint32_t n;

	if (end - *p < 4 || (size_t)(end - *p - 4) < (n = rd32(*p)))
		return -1;
	*s = (struct kv_slice){*p + 4, n};
	*p += 4 + n;
	return 0;
}

static int sec_next(const uint8_t **p, const uint8_t *end, struct sec_ix *x)
{
	if (end - *p < 5)
		return -1;
	x->id = rd32(*p);
	x->flags = (*p)[4];
	*p += 5;
	return blob(p, end, &x->key) || blob(p, end, &x->pfe) ? -1 : 0;
}

/* Keys collected: [u16 len][key]..., ascending (mql_index_keys's
 * order). */
static int collect(void *ctx, const uint8_t *key, size_t len)
{
	struct kv_buf *b = ctx;
	uint16_t n = (uint16_t)len;

	return kv_buf_append(b, &n, 2) || kv_buf_append(b, key, len) ? ENOMEM
								     : 0;
}

/* The keys of doc for the index (none when the partial filter does not
 * take it): 0, ENOMEM, or -1 with e. */
static int doc_keys(const struct mql_index *ix, const struct mql_match *pf,
		    const uint8_t *doc, size_t n, struct kv_buf *out,
		    unsigned *flags, struct mql_error *e)
{
	if (flags)
		*flags = 0;
	if (!doc || (pf && !mql_match_doc(pf, doc, (uint32_t)n, NULL)))
		return 0;
	return mql_index_keys(ix, doc, (uint32_t)n, flags, collect, out, e);
}

static int key_at(const struct kv_buf *b, size_t pos, struct kv_slice *k)
{
	uint16_t n;

	if (pos + 2 > b->len)
		return 0;
	memcpy(&n, b->data + pos, 2);
	*k = (struct kv_slice){b->data + pos + 2, n};
	return 1;
}

static int side(struct kvd_merge *m, uint32_t id, struct kv_slice k, int del,
		struct kv_slice v)
{
	uint8_t ent[512];
	size_t n = kvdoc_ix_entry(id, k.p, k.n, m->key.p, m->key.n, ent);

	if (!n)
		return 0; /* mql_index_keys keeps keys within bounds */
	return kvd_merge_side(m, KVD_KS_INDEX, del, ent, n, v.p, v.n);
}

/* Delete the keys only in ob, put those only in nb (both ascending), and
 * put again a key in both whose value changes (ov to nv: a document's one
 * entry's, index.h "Covered entries"; other entries' are empty). */
static int diff(struct kvd_merge *m, uint32_t id, const struct kv_buf *ob,
		const struct kv_buf *nb, struct kv_slice ov, struct kv_slice nv)
{
	size_t i = 0, j = 0;
	struct kv_slice a, b;
	int ha, hb, rc = 0;

	while (!rc) {
		ha = key_at(ob, i, &a);
		hb = key_at(nb, j, &b);
		if (!ha && !hb)
			break;
		int c = !ha ? 1 : !hb ? -1 : 0;

		if (ha && hb) {
			c = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
			if (!c)
				c = (a.n > b.n) - (a.n < b.n);
		}
		if (c < 0) {
			rc = side(m, id, a, 1, (struct kv_slice){0});
			i += 2 + a.n;
		} else if (c > 0) {
			rc = side(m, id, b, 0, nv);
			j += 2 + b.n;
		} else {
			if (ov.n != nv.n || (nv.n && memcmp(ov.p, nv.p, nv.n)))
				rc = side(m, id, b, 0, nv);
			i += 2 + a.n;
			j += 2 + b.n;
		}
	}
	return rc;
}

/* ---- unique indexes (unique.h) ----
 *
 * A key list is [u32 index id][u16 len][key]...: the keys an operand says
 * its document holds the reservation of, the keys a merge asks for, the
 * keys it lets go. */

/* The committer's lists, filled by kvdoc_ix_apply (one merge at a time
 * per committer thread). */
static __thread struct kv_buf tl_need, tl_rel;

static int list_add(struct kv_buf *b, uint32_t id, struct kv_slice k)
{
	uint8_t h[6] = {(uint8_t)id,	     (uint8_t)(id >> 8),
			(uint8_t)(id >> 16), (uint8_t)(id >> 24),
			(uint8_t)k.n,	     (uint8_t)(k.n >> 8)};
	return kv_buf_append(b, h, 6) || kv_buf_append(b, k.p, k.n) ? ENOMEM
								    : 0;
}

/* list_add to the committer's lists (freed when its thread ends). */
static int tls_list_add(struct kv_buf *b, uint32_t id, struct kv_slice k)
{
	if (!b->data)
		(void)kv_buf_free_at_exit(b);
	return list_add(b, id, k);
}

int kvdoc_keylist_next(struct kv_slice *l, uint32_t *id, struct kv_slice *k)
{
	size_t n;

	if (l->n < 6)
		return 0;
	n = (size_t)l->p[4] | (size_t)l->p[5] << 8;
	if (l->n - 6 < n)
		return 0;
	*id = rd32(l->p);
	*k = (struct kv_slice){l->p + 6, n};
	l->p += 6 + n;
	l->n -= 6 + n;
	return 1;
}

bool kvdoc_keylist_has(struct kv_slice l, uint32_t id, struct kv_slice k)
{
	uint32_t i;
	struct kv_slice x;

	while (kvdoc_keylist_next(&l, &i, &x))
		if (i == id && x.n == k.n && !memcmp(x.p, k.p, k.n))
			return true;
	return false;
}

/* Is k among the keys of b (collect's)? */
static bool keys_have(const struct kv_buf *b, struct kv_slice k)
{
	struct kv_slice x;

	for (size_t pos = 0; key_at(b, pos, &x); pos += 2 + x.n)
		if (x.n == k.n && !memcmp(x.p, k.p, k.n))
			return true;
	return false;
}

/* A unique index's part: every key the new image gains (not in the old
 * one, whose keys the document holds already) must be reserved for it
 * (in res), else it is asked for (tl_need); the keys it loses, and
 * those reserved but not kept, are let go (tl_rel). */
static int unique_part(const struct sec_ix *x, struct kv_slice res,
		       const struct kv_buf *ob, const struct kv_buf *nb)
{
	struct kv_slice k, l = res;
	uint32_t id;
	int rc = 0;

	for (size_t pos = 0; !rc && key_at(nb, pos, &k); pos += 2 + k.n)
		if (!keys_have(ob, k) && !kvdoc_keylist_has(res, x->id, k))
			rc = tls_list_add(&tl_need, x->id, k);
	for (size_t pos = 0; !rc && key_at(ob, pos, &k); pos += 2 + k.n)
		if (!keys_have(nb, k))
			rc = tls_list_add(&tl_rel, x->id, k);
	while (!rc && kvdoc_keylist_next(&l, &id, &k))
		if (id == x->id && !keys_have(nb, k) && !keys_have(ob, k))
			rc = tls_list_add(&tl_rel, x->id, k);
	return rc;
}

/* ---- compiled indexes, kept per thread ----
 *
 * Every merge of an indexed collection used to compile each index of its
 * section (its key pattern, its partial filter) and free it after: a
 * third of a build's time in malloc and free (perf, a bulk build of
 * three indexes).  A thread keeps the last few it compiled, found by id
 * and by the spec's bytes (an id is never reused by one catalog, but a
 * replica's full copy brings another's), and frees them when it ends. */
#define IXC_N 8

struct ixc_ent {
	uint32_t id;
	unsigned flags;
	struct kv_buf spec; /* key then partial filter */
	size_t kn;
	struct mql_index *ix;
	struct mql_match *pf;
	struct kvdoc_ix_fields f; /* names into spec */
};

struct ixc {
	struct ixc_ent e[IXC_N];
	unsigned next;
	/* a merge's keys of the old image and the new, reused (a malloc and
	 * a free each per index and write, else) */
	struct kv_buf ob, nb;
};

static pthread_key_t ixc_key;
static pthread_once_t ixc_once = PTHREAD_ONCE_INIT;

static void ixc_ent_free(struct ixc_ent *c)
{
	mql_index_free(c->ix);
	mql_match_free(c->pf);
	kv_buf_free(&c->spec);
	memset(c, 0, sizeof(*c));
}

static void ixc_free(void *p)
{
	struct ixc *c = p;

	for (unsigned i = 0; i < IXC_N; i++)
		ixc_ent_free(&c->e[i]);
	kv_buf_free(&c->ob);
	kv_buf_free(&c->nb);
	free(c);
}

static void ixc_init(void)
{
	pthread_key_create(&ixc_key, ixc_free);
}

static bool ixc_same(const struct ixc_ent *c, const struct sec_ix *x)
{
	return c->ix && c->id == x->id && c->flags == x->flags &&
	       c->kn == x->key.n && c->spec.len == x->key.n + x->pfe.n &&
	       !memcmp(c->spec.data, x->key.p, x->key.n) &&
	       (!x->pfe.n ||
		!memcmp(c->spec.data + x->key.n, x->pfe.p, x->pfe.n));
}

/* The thread's cache, made on its first call: NULL out of memory. */
static struct ixc *ixc_get(void)
{
	struct ixc *c;

	pthread_once(&ixc_once, ixc_init);
	if ((c = pthread_getspecific(ixc_key)))
		return c;
	if (!(c = calloc(1, sizeof(*c))) || pthread_setspecific(ixc_key, c)) {
		free(c);
		return NULL;
	}
	return c;
}

/* Index x compiled, from cache c (the thread's to keep: not freed by the
 * caller), or NULL with e. */
static const struct ixc_ent *compiled(struct ixc *c, const struct sec_ix *x,
				      struct mql_error *e)
{
	struct ixc_ent *n;

	for (unsigned i = 0; i < IXC_N; i++)
		if (ixc_same(&c->e[i], x))
			return &c->e[i];
	n = &c->e[c->next++ % IXC_N];
	ixc_ent_free(n);
	if (mql_index_compile(x->key.p, (uint32_t)x->key.n,
			      x->flags & KVDOC_IXF_SPARSE ? MQL_INDEX_SPARSE
							  : 0,
			      &n->ix, e) ||
	    (x->pfe.n &&
	     mql_match_compile(x->pfe.p, (uint32_t)x->pfe.n, &n->pf, e)) ||
	    kv_buf_append(&n->spec, x->key.p, x->key.n) ||
	    kv_buf_append(&n->spec, x->pfe.p, x->pfe.n)) {
		ixc_ent_free(n);
		if (!e->code)
			mql_error_set(e, MQL_InternalError, "out of memory");
		return NULL;
	}
	n->id = x->id;
	n->flags = x->flags;
	n->kn = x->key.n;
	kvdoc_ix_fields(n->spec.data, n->kn, &n->f);
	return n;
}

/* The value of the entry of a document whose keys for the index are ks
 * (flags: mql_index_keys's), in buf: a covered entry's when it has one
 * key that gives its fields back (index.h), else empty. */
static struct kv_slice cover_of(const struct ixc_ent *c, const uint8_t *doc,
				size_t n, const struct kv_buf *ks,
				unsigned flags, uint8_t *buf)
{
	struct kv_slice k;

	if (!doc || (flags & MQL_KEYS_MULTIKEY) || !key_at(ks, 0, &k) ||
	    2 + k.n != ks->len)
		return (struct kv_slice){0};
	return (struct kv_slice){buf, kvdoc_ix_cover(&c->f, doc, n, k, buf)};
}

/* One index's side writes. */
static int apply_one(struct kvd_merge *m, const struct sec_ix *x,
		     struct kv_slice res, const uint8_t *old, size_t oldn,
		     const uint8_t *new_, size_t newn, struct mql_error *e)
{
	const struct ixc_ent *ce;
	struct ixc *c = ixc_get();
	struct kv_buf *ob, *nb;
	struct mql_error ignored = {0};
	uint8_t ovb[KVDOC_IX_COVER_MAX], nvb[KVDOC_IX_COVER_MAX];
	unsigned of, nf;
	int rc = -1;

	if (!c)
		return ENOMEM;
	ob = &c->ob;
	nb = &c->nb;
	ob->len = nb->len = 0;
	ob->err = nb->err = 0;
	if (!(ce = compiled(c, x, e)))
		goto out;
	/* the old image was taken: its keys are made as they were */
	if ((rc = doc_keys(ce->ix, ce->pf, old, oldn, ob, &of, &ignored)) > 0 ||
	    (rc = doc_keys(ce->ix, ce->pf, new_, newn, nb, &nf, e)) != 0)
		goto out;
	rc = ob->err || nb->err
		 ? ENOMEM
		 : diff(m, x->id, ob, nb, cover_of(ce, old, oldn, ob, of, ovb),
			cover_of(ce, new_, newn, nb, nf, nvb));
	if (!rc && (x->flags & KVDOC_IXF_UNIQUE))
		rc = unique_part(x, res, ob, nb);
out:
	/* a multikey document's keys are not kept past the merge */
	ob->len = nb->len = 0;
	kv_buf_trim(ob, 64u << 10);
	kv_buf_trim(nb, 64u << 10);
	return rc;
}

/* [u8 len][the document's key] in front of a list for the door. */
static int put_dkey(struct kv_buf *b, struct kv_slice dk)
{
	uint8_t n = (uint8_t)dk.n;

	return kv_buf_append(b, &n, 1) || kv_buf_append(b, dk.p, dk.n) ? ENOMEM
								       : 0;
}

/* The lists, once every index is done: the keys to reserve first as the
 * whole reply (KVDOC_IX_NEED), or the keys let go as the reply's trailer
 * (unique.h). */
static int lists_out(struct kvd_merge *m)
{
	uint8_t t[8];
	size_t at;

	if (tl_need.len) {
		m->reply->len = 0;
		if (put_dkey(m->reply, m->key) ||
		    kv_buf_append(m->reply, tl_need.data, tl_need.len))
			return ENOMEM;
		return KVDOC_IX_NEED;
	}
	if (!tl_rel.len)
		return 0;
	at = m->reply->len;
	if (put_dkey(m->reply, m->key) ||
	    kv_buf_append(m->reply, tl_rel.data, tl_rel.len))
		return ENOMEM;
	for (int i = 0; i < 4; i++) {
		t[i] = (uint8_t)((m->reply->len - at) >> (8 * i));
		t[4 + i] = (uint8_t)(KVDOC_REL_MAGIC >> (8 * i));
	}
	return kv_buf_append(m->reply, t, 8) ? ENOMEM : 0;
}

int kvdoc_ix_apply(struct kvd_merge *m, struct kv_slice sec,
		   struct kv_slice res, const uint8_t *old, size_t oldn,
		   const uint8_t *new_, size_t newn, struct mql_error *e)
{
	const uint8_t *p = sec.p + 4, *end = sec.p + sec.n;
	uint32_t n = sec.n >= 4 ? rd32(sec.p) : 0;
	struct sec_ix x;
	int rc;

	tl_need.len = tl_rel.len = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (sec_next(&p, end, &x))
			return mql_error_set(e, MQL_InternalError,
					     "malformed index section");
		if ((rc = apply_one(m, &x, res, old, oldn, new_, newn, e)))
			return rc;
	}
	rc = tl_need.err || tl_rel.err ? ENOMEM : lists_out(m);
	/* given back at once: they hold anything only under a unique index,
	 * and a committer thread's buffer would outlive it */
	kv_buf_free(&tl_need);
	kv_buf_free(&tl_rel);
	return rc;
}

/* The keys of doc (n bytes) for the unique indexes of section sec (only
 * the one of id only, when not 0), as a key list appended to out: 0,
 * ENOMEM, or -1 with e (a document the index cannot take). */
int kvdoc_ix_unique_keys(struct kv_slice sec, uint32_t only, const uint8_t *doc,
			 size_t n, struct kv_buf *out, struct mql_error *e)
{
	const uint8_t *p = sec.p + 4, *end = sec.p + sec.n;
	uint32_t cnt = sec.n >= 4 ? rd32(sec.p) : 0;
	struct ixc *c = ixc_get();
	struct kv_buf *keys;
	struct sec_ix x;
	int rc = 0;

	if (!c)
		return ENOMEM;
	keys = &c->ob;
	for (uint32_t i = 0; !rc && i < cnt; i++) {
		const struct ixc_ent *ce;
		struct kv_slice k;

		if (sec_next(&p, end, &x))
			return mql_error_set(e, MQL_InternalError,
					     "malformed index section");
		if (!(x.flags & KVDOC_IXF_UNIQUE) || (only && x.id != only))
			continue;
		keys->len = 0;
		keys->err = 0;
		ce = compiled(c, &x, e);
		rc = ce ? doc_keys(ce->ix, ce->pf, doc, n, keys, NULL, e) : -1;
		for (size_t pos = 0; !rc && key_at(keys, pos, &k);
		     pos += 2 + k.n)
			rc = list_add(out, x.id, k);
	}
	keys->len = 0;
	kv_buf_trim(keys, 64u << 10);
	return rc ? rc : out->err ? ENOMEM : 0;
}

bool kvdoc_ix_has_unique(struct kv_slice sec)
{
	const uint8_t *p = sec.p + 4, *end = sec.p + sec.n;
	uint32_t cnt = sec.n >= 4 ? rd32(sec.p) : 0;
	struct sec_ix x;

	for (uint32_t i = 0; i < cnt && !sec_next(&p, end, &x); i++)
		if (x.flags & KVDOC_IXF_UNIQUE)
			return true;
	return false;
}

int kvdoc_ix_without_unique(struct kv_slice sec, struct kv_buf *out)
{
	const uint8_t *p = sec.p + 4, *end = sec.p + sec.n;
	uint32_t cnt = sec.n >= 4 ? rd32(sec.p) : 0;
	size_t at = out->len;
	struct sec_ix x;

	if (kv_buf_append(out, sec.p, sec.n))
		return -1;
	for (uint32_t i = 0; i < cnt; i++) {
		/* its flags byte, after its id */
		size_t f = at + (size_t)(p - sec.p) + 4;

		if (sec_next(&p, end, &x))
			return -1;
		out->data[f] &= (uint8_t)~KVDOC_IXF_UNIQUE;
	}
	return 0;
}

int kvdoc_mark_merge(void *ctx, struct kvd_merge *m)
{
	(void)ctx;
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_PLAIN;
	m->result = 1;
	return kv_buf_append(m->image, m->operand.p, m->operand.n) ? ENOMEM : 0;
}

int kvdoc_reindex_merge(void *ctx, struct kvd_merge *m)
{
	struct kv_slice op = m->operand, sec, res;
	struct mql_error e = {0};
	int rc;

	(void)ctx;
	m->action = KVD_MERGE_KEEP;
	if (kvdoc_ix_take(&op, &sec, &res) || op.n) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (!m->live || m->type != KVD_VT_DOC)
		return 0; /* gone since the build's scan saw it */
	/* from nothing to the document: its entries (a put of an entry
	 * that is there already is the same entry) */
	rc = kvdoc_ix_apply(m, sec, res, NULL, 0, m->old.p, m->old.n, &e);
	if (rc == ENOMEM)
		return ENOMEM;
	if (rc == KVDOC_IX_NEED) { /* reservations first (unique.h) */
		m->side->len = 0;
		m->result = -(int64_t)KVDOC_NEED_RESERVE;
		return 0;
	}
	if (rc) { /* a document the index cannot take: the build fails */
		m->side->len = 0;
		m->result = -(int64_t)(e.code ? e.code : 1);
		kv_buf_append(m->reply, e.msg, strlen(e.msg));
		return 0;
	}
	m->result = 1;
	return 0;
}
