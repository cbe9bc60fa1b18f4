/* doc.c - the document merge operations (doc.h) that shards' committers
 * run, their operands, documents' keys, and the reads of io threads.  The
 * update language is kvd/mongo/'s (mql_update_apply); this file only puts
 * it on the committer. */
#include "doc.h"

#include "index.h"
#include "unique.h"

#include <string.h>

#include "kv_status.h"
#include "mongo/mql_match.h"
#include "mongo/mql_update.h"
#include "net/router.h"

/* ---- keys ---- */

int kvdoc_key(uint32_t coll, const bson_value_t *id, uint8_t *key, size_t *klen,
	      struct mql_error *err)
{
	size_t n = 0;

	key[0] = (uint8_t)(coll >> 24);
	key[1] = (uint8_t)(coll >> 16);
	key[2] = (uint8_t)(coll >> 8);
	key[3] = (uint8_t)coll;
	if (mql_key_id(id, key + 4, &n, err))
		return -1;
	*klen = 4 + n;
	return 0;
}

/* ---- operands ---- */

static void put_u32(struct kv_buf *b, uint32_t v)
{
	uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			(uint8_t)(v >> 24)};

	kv_buf_append(b, p, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* [u32 len][bytes] */
static void put_blob(struct kv_buf *b, const void *p, uint32_t n)
{
	put_u32(b, n);
	if (n)
		kv_buf_append(b, p, n);
}

/* Take a [u32 len][bytes] from [*p, end): 0, or -1. */
static int get_blob(const uint8_t **p, const uint8_t *end, struct kv_slice *s)
{
	uint32_t n;

	if (end - *p < 4)
		return -1;
	n = get_u32(*p);
	if ((size_t)(end - *p - 4) < n)
		return -1;
	s->p = *p + 4;
	s->n = n;
	*p += 4 + n;
	return 0;
}

int kvdoc_op_update(struct kv_buf *out, unsigned flags, const uint8_t *update,
		    uint32_t ulen, const uint8_t *filter, uint32_t flen,
		    const bson_value_t *id)
{
	uint8_t f = (uint8_t)flags;
	bson_t idd = BSON_INITIALIZER;

	if (id && !bson_append_value(&idd, "_id", 3, id)) {
		bson_destroy(&idd);
		return -1;
	}
	kv_buf_append(out, &f, 1);
	put_blob(out, update, ulen);
	put_blob(out, filter, filter ? flen : 0);
	put_blob(out, id ? bson_get_data(&idd) : NULL, id ? idd.len : 0);
	bson_destroy(&idd);
	return out->err ? -1 : 0;
}

int kvdoc_op_delete(struct kv_buf *out, unsigned flags, const uint8_t *filter,
		    uint32_t flen)
{
	uint8_t f = (uint8_t)flags;

	kv_buf_append(out, &f, 1);
	put_blob(out, filter, filter ? flen : 0);
	return out->err ? -1 : 0;
}

/* ---- the merges ---- */

/* A failure the door reports as MongoDB's error: the code, negated, as
 * the result; the message as the reply. */
static int merge_error(struct kvd_merge *m, const struct mql_error *e)
{
	m->action = KVD_MERGE_KEEP;
	m->image->len = 0;
	m->side->len = 0;
	m->result = -(int64_t)(e->code ? e->code : 1);
	kv_buf_append(m->reply, e->msg, strlen(e->msg));
	return 0;
}

/* A document's old image, when it is one (a key of this keyspace holds
 * only documents). */
static int doc_live(const struct kvd_merge *m)
{
	return m->live && m->type == KVD_VT_DOC;
}

/* The reservations the merge's operand holds (take_section's; a
 * committer runs one merge at a time). */
static __thread struct kv_slice tl_res;

/* The index entries of a change from old to new (index.h): 0, ENOMEM,
 * or the write refused with MongoDB's error, or put off until the keys a
 * unique index needs are reserved (unique.h: the reply lists them). */
static int ix_change(struct kvd_merge *m, struct kv_slice sec,
		     const uint8_t *old, size_t oldn, const uint8_t *new_,
		     size_t newn)
{
	struct mql_error e = {0};
	int rc = kvdoc_ix_apply(m, sec, tl_res, old, oldn, new_, newn, &e);

	if (rc == ENOMEM)
		return ENOMEM;
	if (rc == KVDOC_IX_NEED) {
		m->action = KVD_MERGE_KEEP;
		m->image->len = 0;
		m->side->len = 0;
		m->result = -(int64_t)KVDOC_NEED_RESERVE;
		return 0;
	}
	if (rc) {
		m->reply->len = 0;
		return merge_error(m, &e);
	}
	return 0;
}

/* A committer's section, when the operand's is older than the catalog
 * (index.h, kvdoc_ix_fresh). */
static __thread struct kv_buf tl_sec;

/* Every operand starts with its collection's indexes (index.h), as of
 * the catalog the io thread read, or as of a newer one. */
static int take_section(struct kvd_merge *m, struct kv_slice *sec)
{
	uint32_t coll;

	m->action = KVD_MERGE_KEEP;
	if (kvdoc_ix_take(&m->operand, sec, &tl_res) || m->key.n < 4) {
		m->status = KV_BAD_ARGS;
		return -1;
	}
	coll = (uint32_t)m->key.p[0] << 24 | (uint32_t)m->key.p[1] << 16 |
	       (uint32_t)m->key.p[2] << 8 | m->key.p[3];
	if (!tl_sec.data)
		(void)kv_buf_free_at_exit(&tl_sec);
	if (kvdoc_ix_fresh(sec, coll, &tl_sec)) {
		m->status = KV_INTERNAL;
		return -1;
	}
	return 0;
}

static int op_insert(void *ctx, struct kvd_merge *m)
{
	struct kv_slice sec;

	(void)ctx;
	if (take_section(m, &sec))
		return 0;
	if (doc_live(m)) {
		m->status = KV_EXISTS;
		return 0;
	}
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_DOC;
	m->result = 1;
	kv_buf_append(m->image, m->operand.p, m->operand.n);
	if (m->image->err)
		return ENOMEM;
	return ix_change(m, sec, NULL, 0, m->operand.p, m->operand.n);
}

struct upd_in {
	unsigned flags;
	struct kv_slice update, filter, id;
};

static int upd_parse(struct kv_slice op, struct upd_in *in)
{
	const uint8_t *p = op.p, *end = op.p + op.n;

	if (op.n < 1)
		return -1;
	in->flags = *p++;
	return get_blob(&p, end, &in->update) ||
		       get_blob(&p, end, &in->filter) ||
		       get_blob(&p, end, &in->id) || p != end
		   ? -1
		   : 0;
}

/* The filter still matches the image (none: it does). */
static int upd_matches(const struct mql_match *q, struct kv_slice img,
		       long *pos)
{
	*pos = -1;
	return !q || mql_match_doc(q, img.p, (uint32_t)img.n, pos);
}

/* The new image into m (reply: the old or new one, as asked). */
static int upd_store(struct kvd_merge *m, const struct upd_in *in,
		     const bson_t *out, int had)
{
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_DOC;
	kv_buf_append(m->image, bson_get_data(out), out->len);
	if (in->flags & KVDOC_RET_NEW)
		kv_buf_append(m->reply, bson_get_data(out), out->len);
	else if ((in->flags & KVDOC_RET_OLD) && had)
		kv_buf_append(m->reply, m->old.p, m->old.n);
	return m->image->err || m->reply->err ? ENOMEM : 0;
}

static int update_run(struct kvd_merge *m, const struct upd_in *in,
		      const struct mql_update *u, const struct mql_match *q,
		      struct kv_slice sec)
{
	struct mql_update_ctx uc = {.now_ms = (int64_t)m->now, .pos = -1};
	struct mql_error e = {0};
	bson_t out = BSON_INITIALIZER, idd;
	bson_iter_t it;
	bool modified = false;
	int live = doc_live(m), rc;

	if (live && !upd_matches(q, m->old, &uc.pos)) {
		m->result = KVDOC_R_NOMATCH;
		return 0;
	}
	if (!live && !(in->flags & KVDOC_UPSERT)) {
		m->result = KVDOC_R_NOMATCH;
		return 0;
	}
	if (!live) {
		uc.query = q;
		if (in->id.n && bson_init_static(&idd, in->id.p, in->id.n) &&
		    bson_iter_init_find(&it, &idd, "_id"))
			uc.new_id = bson_iter_value(&it);
	}
	if (mql_update_apply(u, live ? m->old.p : NULL,
			     live ? (uint32_t)m->old.n : 0, &uc, &out,
			     &modified, &e)) {
		bson_destroy(&out);
		return merge_error(m, &e);
	}
	m->result = !live      ? KVDOC_R_UPSERTED
		    : modified ? KVDOC_R_MODIFIED
			       : KVDOC_R_MATCHED;
	if (live && !modified) {
		if (in->flags & (KVDOC_RET_OLD | KVDOC_RET_NEW))
			kv_buf_append(m->reply, m->old.p, m->old.n);
		rc = m->reply->err ? ENOMEM : 0;
	} else {
		rc = upd_store(m, in, &out, live);
		if (!rc)
			rc = ix_change(m, sec, live ? m->old.p : NULL,
				       live ? m->old.n : 0, bson_get_data(&out),
				       out.len);
	}
	bson_destroy(&out);
	return rc;
}

static int op_update(void *ctx, struct kvd_merge *m)
{
	struct upd_in in;
	struct mql_update *u = NULL;
	struct mql_match *q = NULL;
	struct mql_error e = {0};
	struct kv_slice sec;
	int rc;

	(void)ctx;
	if (take_section(m, &sec))
		return 0;
	if (upd_parse(m->operand, &in)) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (mql_update_compile(in.update.p, (uint32_t)in.update.n, &u, &e) ||
	    (in.filter.n &&
	     mql_match_compile(in.filter.p, (uint32_t)in.filter.n, &q, &e))) {
		mql_update_free(u);
		return merge_error(m, &e);
	}
	rc = update_run(m, &in, u, q, sec);
	mql_update_free(u);
	mql_match_free(q);
	return rc;
}

static int op_delete(void *ctx, struct kvd_merge *m)
{
	const uint8_t *p, *end;
	struct kv_slice filter, sec;
	struct mql_match *q = NULL;
	struct mql_error e = {0};
	unsigned flags;
	long pos;
	int match;

	(void)ctx;
	if (take_section(m, &sec))
		return 0;
	p = m->operand.p;
	end = p + m->operand.n;
	if (m->operand.n < 1) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	flags = *p++;
	if (get_blob(&p, end, &filter) || p != end) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (!doc_live(m))
		return 0;
	if (filter.n && mql_match_compile(filter.p, (uint32_t)filter.n, &q, &e))
		return merge_error(m, &e);
	match = upd_matches(q, m->old, &pos);
	mql_match_free(q);
	if (!match)
		return 0;
	m->action = KVD_MERGE_DELETE;
	m->result = 1;
	if (flags & KVDOC_RET_OLD)
		kv_buf_append(m->reply, m->old.p, m->old.n);
	if (m->reply->err)
		return ENOMEM;
	return ix_change(m, sec, m->old.p, m->old.n, NULL, 0);
}

void kvdoc_register(struct kvd_merge_op *ops)
{
	static const kvd_merge_fn fns[KVDOC_NOPS] = {
	    [KVDOC_OP_INSERT] = op_insert,
	    [KVDOC_OP_UPDATE] = op_update,
	    [KVDOC_OP_DELETE] = op_delete,
	    [KVDOC_OP_CATALOG] = kvdoc_catalog_merge,
	    [KVDOC_OP_REINDEX] = kvdoc_reindex_merge,
	    [KVDOC_OP_RESERVE] = kvdoc_uq_merge,
	    [KVDOC_OP_MARK] = kvdoc_mark_merge,
	};

	for (unsigned i = 0; i < KVDOC_NOPS; i++) {
		ops[KVDOC_MERGE_BASE + i].fn = fns[i];
		ops[KVDOC_MERGE_BASE + i].ctx = NULL;
	}
}

/* ---- reads ---- */

int kvdoc_get(struct kvd_reader *r, unsigned nshards, const uint8_t *key,
	      size_t klen, uint64_t now, struct kv_slice *doc)
{
	unsigned type;
	int rc = kvd_reader_getk(r, kvd_shard_of(key, klen, nshards),
				 KVD_KS_DOC, key, klen, now, doc, &type);

	return rc == KV_OK && type != KVD_VT_DOC ? KV_NOT_FOUND : rc;
}

void kvdoc_prefetch(struct kvd_reader *r, unsigned nshards, const uint8_t *key,
		    size_t klen, int step)
{
	kvd_reader_prefetch(r, kvd_shard_of(key, klen, nshards), KVD_KS_DOC,
			    key, klen, step);
}

void kvdoc_scan_init(struct kvdoc_scan *s, uint32_t coll)
{
	memset(s, 0, sizeof(*s));
	s->coll = coll;
}

int kvdoc_scan_range(struct kvdoc_scan *s, const uint8_t *start, size_t slen,
		     const uint8_t *end, size_t elen)
{
	if (slen > KVDOC_KEY_MAX - 4 || elen > KVDOC_KEY_MAX - 4)
		return -1;
	for (int i = 0; i < 4; i++)
		s->next[i] = s->end[i] = (uint8_t)(s->coll >> (24 - 8 * i));
	memcpy(s->next + 4, start, slen);
	s->nlen = 4 + slen;
	memcpy(s->end + 4, end, elen);
	s->elen = elen ? 4 + elen : 0;
	return 0;
}

int kvdoc_scan_batch(struct kvdoc_scan *s, struct kvd_reader *r, unsigned max,
		     uint64_t now, kvd_scan_fn fn, void *arg)
{
	uint8_t prefix[4] = {(uint8_t)(s->coll >> 24), (uint8_t)(s->coll >> 16),
			     (uint8_t)(s->coll >> 8), (uint8_t)s->coll};
	struct kvd_scan sc = {.prefix = {prefix, 4},
			      .start = {s->next, s->nlen},
			      .end = {s->end, s->elen},
			      .limit = max,
			      .max_bytes =
				  s->max_bytes ? s->max_bytes : SIZE_MAX,
			      .ks = KVD_KS_DOC};
	struct kv_slice next;
	int rc;

	if (s->done)
		return KV_OK;
	rc = kvd_reader_scan(r, &sc, now, fn, arg, &next);
	if (rc)
		return rc;
	/* the key to go on from points into the store: kept here */
	if (!next.n || next.n > sizeof(s->next)) {
		s->done = 1;
		s->nlen = 0;
	} else {
		memcpy(s->next, next.p, next.n);
		s->nlen = next.n;
	}
	return KV_OK;
}
