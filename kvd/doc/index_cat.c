/* index_cat.c - index definitions in the catalog (index.h): the tail of
 * the catalog's image that lists them, its rewrite by the catalog's merge
 * on shard 0's committer (an index added, dropped, built; the indexes of
 * dropped collections gone), MongoDB's conflict rules between an index
 * asked for and those that exist, and the section of a document
 * operand. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "index.h"
#include "kv_status.h"
#include "mongo/mql_error.h"

#define IX_HDR 13 /* u32 id, u32 coll, u8 state, u32 slen */

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int kvdoc_ix_next(const uint8_t **p, const uint8_t *end, struct kvdoc_ix *ix)
{
	const uint8_t *q = *p;
	uint32_t sl;

	if (end - q < IX_HDR || (size_t)(end - q - IX_HDR) < (sl = rd32(q + 9)))
		return -1;
	ix->id = rd32(q);
	ix->coll = rd32(q + 4);
	ix->state = q[8];
	ix->spec = (struct kv_slice){q + IX_HDR, sl};
	*p = q + IX_HDR + sl;
	return 0;
}

static void ix_put(struct kv_buf *b, const struct kvdoc_ix *ix)
{
	uint8_t h[IX_HDR];

	wr32(h, ix->id);
	wr32(h + 4, ix->coll);
	h[8] = (uint8_t)ix->state;
	wr32(h + 9, (uint32_t)ix->spec.n);
	kv_buf_append(b, h, IX_HDR);
	kv_buf_append(b, ix->spec.p, ix->spec.n);
}

/* ---- a spec's parts ---- */

struct spec {
	const char *name;
	struct kv_slice key, pfe;
	bool unique, sparse, ttl;
	int64_t expire;
};

static int spec_read(struct kv_slice s, struct spec *o)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t n;

	memset(o, 0, sizeof(*o));
	o->name = "";
	if (!bson_iter_init_from_data(&it, s.p, s.n))
		return -1;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "name") && BSON_ITER_HOLDS_UTF8(&it)) {
			o->name = bson_iter_utf8(&it, NULL);
		} else if (!strcmp(k, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &n, &d);
			o->key = (struct kv_slice){d, n};
		} else if (!strcmp(k, "partialFilterExpression") &&
			   BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &n, &d);
			o->pfe = (struct kv_slice){d, n};
		} else if (!strcmp(k, "unique")) {
			o->unique = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "sparse")) {
			o->sparse = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "expireAfterSeconds")) {
			o->ttl = true;
			o->expire = bson_iter_as_int64(&it);
		}
	}
	return 0;
}

static bool slice_same(struct kv_slice a, struct kv_slice b)
{
	return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n));
}

static bool opts_same(const struct spec *a, const struct spec *b)
{
	return a->unique == b->unique && a->sparse == b->sparse &&
	       a->ttl == b->ttl && (!a->ttl || a->expire == b->expire) &&
	       slice_same(a->pfe, b->pfe);
}

/* A refusal: MongoDB's code, negated, as result; the message as reply. */
static void refuse(struct kvd_merge *m, int code, const char *msg,
		   const char *name)
{
	char buf[400];
	int n = snprintf(buf, sizeof(buf), "%s%s", msg, name);

	m->result = -code;
	kv_buf_append(m->reply, buf, n > 0 ? (size_t)n : 0);
}

/* The new index asked for against an existing one of its collection:
 * 0 (no conflict), 1 (the same index: nothing to do), -1 (refused). */
static int conflict(struct kvd_merge *m, const struct spec *nw,
		    const struct kvdoc_ix *ix)
{
	struct spec ex;

	if (spec_read(ix->spec, &ex))
		return 0;
	if (!strcmp(nw->name, ex.name)) {
		if (!slice_same(nw->key, ex.key)) {
			refuse(m, 86,
			       "An existing index has the same name as the "
			       "requested index but a different key: ",
			       ex.name);
			return -1;
		}
		if (!opts_same(nw, &ex)) {
			refuse(m, 85,
			       "An equivalent index already exists with the "
			       "same name but different options: ",
			       ex.name);
			return -1;
		}
		return 1;
	}
	if (slice_same(nw->key, ex.key) && slice_same(nw->pfe, ex.pfe)) {
		refuse(m, 85,
		       opts_same(nw, &ex)
			   ? "Index already exists with a different name: "
			   : "An existing index has the same key pattern "
			     "but different options: ",
		       ex.name);
		return -1;
	}
	return 0;
}

/* ---- the catalog merge's part ---- */

bool kvdoc_ids_have(struct kv_slice ids, uint32_t id)
{
	for (size_t i = 0; i + 4 <= ids.n; i += 4)
		if (rd32(ids.p + i) == id)
			return true;
	return false;
}

static bool is_live(const struct kv_buf *live, uint32_t coll)
{
	return kvdoc_ids_have((struct kv_slice){live->data, live->len}, coll);
}

/* Does the operation take (drop) ix?  IXDROP by name, or "*". */
static bool drops(unsigned op, struct kv_slice name, const struct kvdoc_ix *ix,
		  uint32_t cid)
{
	struct spec s;

	if (op != KVDOC_CAT_IXDROP || ix->coll != cid ||
	    spec_read(ix->spec, &s))
		return false;
	if (name.n == 1 && name.p[0] == '*')
		return true;
	return strlen(s.name) == name.n && !memcmp(s.name, name.p, name.n);
}

int kvdoc_ix_rewrite(struct kvd_merge *m, unsigned op, struct kv_slice opts,
		     struct kv_slice ixs, const struct kv_buf *live,
		     uint32_t cid, uint32_t *next, struct kv_buf *gone)
{
	const uint8_t *p = ixs.p + 4, *end = ixs.p + ixs.n;
	uint32_t n = ixs.n >= 4 ? rd32(ixs.p) : 0, kept = 0, hit = 0;
	size_t at = m->image->len;
	struct spec nw;
	struct kvdoc_ix ix;
	uint8_t cnt[4] = {0}, idb[4];
	int c;

	if (op == KVDOC_CAT_IXADD && spec_read(opts, &nw))
		return -1;
	kv_buf_append(m->image, cnt, 4);
	for (uint32_t i = 0; i < n; i++) {
		if (kvdoc_ix_next(&p, end, &ix))
			return -1;
		if (!is_live(live, ix.coll) || drops(op, opts, &ix, cid)) {
			/* dropped, or its collection was: its keys to purge */
			hit += is_live(live, ix.coll);
			wr32(idb, ix.id);
			kv_buf_append(gone, idb, 4);
			continue;
		}
		if (op == KVDOC_CAT_IXREADY && kvdoc_ids_have(opts, ix.id)) {
			ix.state = KVDOC_IX_READY;
			hit++;
		}
		if (op == KVDOC_CAT_IXADD && ix.coll == cid && !hit &&
		    (c = conflict(m, &nw, &ix)) != 0) {
			if (c > 0) { /* there: its id, and nothing changes */
				m->result = ix.id;
				m->status = KV_EXISTS;
			}
			return 0;
		}
		ix_put(m->image, &ix);
		kept++;
	}
	if (op == KVDOC_CAT_IXADD) {
		ix = (struct kvdoc_ix){.id = (*next)++,
				       .coll = cid,
				       .state = KVDOC_IX_BUILDING,
				       .spec = opts};
		ix_put(m->image, &ix);
		m->result = ix.id;
		kept++;
	} else if ((op == KVDOC_CAT_IXDROP && !hit) ||
		   (op == KVDOC_CAT_IXREADY &&
		    (!hit || hit != opts.n / 4 || opts.n % 4))) {
		/* IXREADY readies all its indexes or none: one gone since
		 * (dropped meanwhile) fails the build of every one */
		m->status = KV_NOT_FOUND;
		return 0;
	} else if (op == KVDOC_CAT_IXDROP) {
		m->result = hit;
	}
	if (m->image->err)
		return -1;
	wr32(m->image->data + at, kept);
	return 0;
}

/* ---- operands ---- */

struct sec_arg {
	struct kv_buf *out;
	struct kv_slice ids; /* [u32 id]...; empty: every index */
	uint32_t n;
};

static void put_blob(struct kv_buf *b, struct kv_slice s)
{
	uint8_t l[4];

	wr32(l, (uint32_t)s.n);
	kv_buf_append(b, l, 4);
	kv_buf_append(b, s.p, s.n);
}

static int sec_one(void *arg, const struct kvdoc_ix *ix)
{
	struct sec_arg *a = arg;
	struct spec s;
	uint8_t h[5];

	if ((a->ids.n && !kvdoc_ids_have(a->ids, ix->id)) ||
	    spec_read(ix->spec, &s))
		return 0;
	wr32(h, ix->id);
	h[4] = (uint8_t)((s.sparse ? KVDOC_IXF_SPARSE : 0) |
			 (s.unique ? KVDOC_IXF_UNIQUE : 0));
	kv_buf_append(a->out, h, 5);
	put_blob(a->out, s.key);
	put_blob(a->out, s.pfe);
	a->n++;
	return 0;
}

int kvdoc_ix_section(const struct kvdoc_catalog *c, uint32_t coll,
		     uint32_t only, struct kv_buf *out)
{
	uint8_t id[4];

	wr32(id, only);
	return kvdoc_ix_section_of(c, coll,
				   (struct kv_slice){id, only ? 4u : 0u}, out);
}

int kvdoc_ix_section_of(const struct kvdoc_catalog *c, uint32_t coll,
			struct kv_slice ids, struct kv_buf *out)
{
	struct sec_arg a = {.out = out, .ids = ids};
	size_t at = out->len;
	uint8_t cnt[4] = {0}, ver[8];
	uint64_t v = c ? c->version : 0;

	kv_buf_append(out, cnt, 4);
	if (c && coll)
		kvdoc_catalog_indexes(c, coll, sec_one, &a);
	wr32(ver, (uint32_t)v);
	wr32(ver + 4, (uint32_t)(v >> 32));
	kv_buf_append(out, ver, 8);
	if (out->err)
		return -1;
	wr32(out->data + at, a.n);
	return 0;
}

/* ---- the committers' copy ----
 *
 * The catalog as its merge last wrote it in this process, so that a
 * document merge whose operand was made from an older copy (an io thread
 * that had not re-read the catalog yet, the later merges of a statement
 * sharing one operand) still keeps an index added since: without it, a
 * write landing after a build passed its document would leave the index
 * without that document's entry.  Set before the catalog's batch commits
 * (a merge seeing an index a little early only writes entries sooner). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kvdoc_catalog reg;

void kvdoc_ix_registry_set(const uint8_t *img, size_t n)
{
	uint64_t v;

	if (n < 16)
		return;
	v = (uint64_t)rd32(img) | (uint64_t)rd32(img + 4) << 32;
	pthread_mutex_lock(&reg_mu);
	if (v > reg.version) {
		reg.img.len = 0;
		if (kv_buf_append(&reg.img, img, n))
			reg.version = 0; /* none: operands decide */
		else
			reg.version = v;
	}
	pthread_mutex_unlock(&reg_mu);
}

uint64_t kvdoc_ix_registry_version(void)
{
	uint64_t v;

	pthread_mutex_lock(&reg_mu);
	v = reg.version;
	pthread_mutex_unlock(&reg_mu);
	return v;
}

int kvdoc_ix_fresh(struct kv_slice *sec, uint32_t coll, struct kv_buf *tmp)
{
	uint64_t v;
	int rc = 0;

	if (sec->n < 12)
		return 0;
	v = ((uint64_t)rd32(sec->p + sec->n - 8) |
	     (uint64_t)rd32(sec->p + sec->n - 4) << 32) &
	    ~KVDOC_SEC_RES;
	if (v == 0) /* a section of no catalog: as given */
		return 0;
	pthread_mutex_lock(&reg_mu);
	if (reg.version > v) {
		tmp->len = 0;
		rc = kvdoc_ix_section(&reg, coll, 0, tmp) ? -1 : 1;
	}
	pthread_mutex_unlock(&reg_mu);
	if (rc == 1)
		*sec = (struct kv_slice){tmp->data, tmp->len};
	return rc < 0 ? -1 : 0;
}

/* Skip one [u32 len][bytes]. */
static int skip_blob(const uint8_t **p, const uint8_t *end)
{
	uint32_t n;

	if (end - *p < 4 || (size_t)(end - *p - 4) < (n = rd32(*p)))
		return -1;
	*p += 4 + n;
	return 0;
}

int kvdoc_ix_take(struct kv_slice *op, struct kv_slice *sec,
		  struct kv_slice *res)
{
	const uint8_t *p = op->p, *end = op->p + op->n;
	struct kv_slice r = {0};
	uint32_t n;

	if (op->n < 4)
		return -1;
	n = rd32(p);
	p += 4;
	for (uint32_t i = 0; i < n; i++) {
		if (end - p < 5)
			return -1;
		p += 5;
		if (skip_blob(&p, end) || skip_blob(&p, end))
			return -1;
	}
	if (end - p < 8) /* the catalog's version */
		return -1;
	p += 8;
	*sec = (struct kv_slice){op->p, (size_t)(p - op->p)};
	if (rd32(p - 4) & 0x80000000u) { /* KVDOC_SEC_RES */
		if (end - p < 4 || (size_t)(end - p - 4) < (n = rd32(p)))
			return -1;
		r = (struct kv_slice){p + 4, n};
		p += 4 + n;
	}
	if (res)
		*res = r;
	op->p = p;
	op->n = (size_t)(end - p);
	return 0;
}
