/* doc_mdoor_uq.c - unique indexes on the io thread (doc_uq.h): a
 * document's reservations taken one after another, taken over from a
 * holder whose document no longer has the key (a crash's or a failed
 * write's leftover), the document's merge sent with what it holds, and
 * the keys a write let go released once the document is seen without
 * them.  docs/architecture.md, "Unique indexes", gives the argument. */
#include "doc_uq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "doc_ix.h"
#include "index.h"
#include "kv_status.h"
#include "mongo/mql_value.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/router.h"
#include "net/write.h"
#include "unique.h"

/* A key held by a write under way is asked for again at most this many
 * times (each a round through its committer) before the write fails as
 * a duplicate; a document whose merge keeps asking for new keys (it
 * changes meanwhile) is written again at most UQ_ROUNDS times. */
#define UQ_TRIES 2000
#define UQ_ROUNDS 16

enum { UQ_IDLE, UQ_RESERVE, UQ_DOC };

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

void doc_uq_init(struct doc_uq *u, const struct doc_uq_host *h)
{
	memset(u, 0, sizeof(*u));
	u->h = *h;
}

static void end_token(struct doc_uq_slot *s)
{
	if (s->token)
		kvdoc_uq_end(s->token);
	s->token = 0;
}

void doc_uq_free(struct doc_uq *u)
{
	for (unsigned i = 0; i < u->ns; i++) {
		end_token(&u->s[i]);
		kv_buf_free(&u->s[i].want);
		kv_buf_free(&u->s[i].held);
	}
	free(u->s);
	u->s = NULL;
	u->ns = 0;
	kv_buf_free(&u->q);
	kv_buf_free(&u->rel);
	kv_buf_free(&u->tmp);
	kv_buf_free(&u->sec);
}

void doc_uq_stmt(struct doc_uq *u, uint32_t cid, unsigned mid,
		 const struct kv_buf *opnd)
{
	u->cid = cid;
	u->mid = mid;
	u->opnd = opnd;
}

int doc_uq_block_put(struct kv_buf *b, const uint8_t *dkey, size_t dn,
		     struct kv_slice l)
{
	uint8_t n = (uint8_t)dn,
		h[4] = {(uint8_t)l.n, (uint8_t)(l.n >> 8), (uint8_t)(l.n >> 16),
			(uint8_t)(l.n >> 24)};

	return kv_buf_append(b, &n, 1) || kv_buf_append(b, dkey, dn) ||
		       kv_buf_append(b, h, 4) || kv_buf_append(b, l.p, l.n)
		   ? -1
		   : 0;
}

int doc_uq_block_next(const struct kv_buf *b, size_t *pos, struct kv_slice *dk,
		      struct kv_slice *l)
{
	const uint8_t *p = b->data + *pos;
	size_t left = b->len - *pos;

	if (*pos >= b->len || left < 5u + p[0])
		return 0;
	*dk = (struct kv_slice){p + 1, p[0]};
	*l = (struct kv_slice){p + 5 + p[0], rd32(p + 1 + p[0])};
	if (left - 5 - p[0] < l->n)
		return 0;
	*pos += 5u + p[0] + l->n;
	return 1;
}

/* A queued document: its block, then [tag][body]. */
struct queued {
	size_t tag;
	struct kv_slice body;
};

int doc_uq_push(struct doc_uq *u, const uint8_t *dkey, size_t dn,
		struct kv_slice want, size_t tag, struct kv_slice body)
{
	struct queued x = {tag, body};

	return doc_uq_block_put(&u->q, dkey, dn, want) ||
		       kv_buf_append(&u->q, &x, sizeof(x))
		   ? -1
		   : 0;
}

int doc_uq_push_image(struct doc_uq *u, struct kv_slice dk, struct kv_slice doc)
{
	struct kv_slice op = {u->opnd->data, u->opnd->len}, sec;
	struct mql_error e;

	if (kvdoc_ix_take(&op, &sec, NULL) || !kvdoc_ix_has_unique(sec))
		return 0;
	u->tmp.len = 0;
	switch (kvdoc_ix_unique_keys(sec, 0, doc.p, doc.n, &u->tmp, &e)) {
	case 0: break;
	case ENOMEM: return -1;
	default: return 0;
	}
	return doc_uq_push(u, dk.p, dk.n,
			   (struct kv_slice){u->tmp.data, u->tmp.len}, 0,
			   (struct kv_slice){0})
		   ? -1
		   : 1;
}

void doc_uq_cancel(struct doc_uq *u)
{
	u->q.len = u->qpos = 0;
}

size_t doc_uq_len(const struct kvd_pend *pd)
{
	uint32_t n;

	if (!pd->val || pd->vlen < 8 ||
	    rd32(pd->val + pd->vlen - 4) != KVDOC_REL_MAGIC)
		return pd->vlen;
	n = rd32(pd->val + pd->vlen - 8);
	return n <= pd->vlen - 8 ? pd->vlen - 8 - n : pd->vlen;
}

/* Keep the keys pd's merge let go, for doc_uq_step. */
static void keep_released(struct doc_uq *u, const struct kvd_pend *pd)
{
	size_t at = doc_uq_len(pd);
	const uint8_t *t = pd->val + at;

	if (at == pd->vlen || pd->vlen - at - 8 < 1u + t[0])
		return;
	doc_uq_block_put(
	    &u->rel, t + 1, t[0],
	    (struct kv_slice){t + 1 + t[0], pd->vlen - at - 9 - t[0]});
}

int doc_uq_back(struct doc_uq *u, const struct kvd_pend *pd)
{
	if (pd->status == KV_OK && pd->result == -KVDOC_NEED_RESERVE &&
	    pd->val && pd->vlen >= 1u + pd->val[0]) {
		doc_uq_push(u, pd->val + 1, pd->val[0],
			    (struct kv_slice){pd->val + 1 + pd->val[0],
					      pd->vlen - 1 - pd->val[0]},
			    0, (struct kv_slice){0});
		return 1;
	}
	if (pd->status == KV_OK)
		keep_released(u, pd);
	return 0;
}

struct kvd_reader *doc_uq_reader(const struct doc_uq *u)
{
	return u->h.rd ? u->h.rd : doc_mdoor_io()->reader;
}

const struct kvdoc_catalog *doc_uq_catalog(const struct doc_uq *u)
{
	return u->h.rd ? u->h.cat : doc_mdoor_catalog();
}

static unsigned nshards(const struct doc_uq *u)
{
	return u->h.rd ? u->h.nshards : doc_mdoor_io()->srv->nshards;
}

/* A driver's merge for slot s; tag a DOC_UQ_TAG_*. */
static int send(struct doc_uq *u, const struct doc_uq_slot *s, unsigned ks,
		unsigned op, struct kv_slice k, struct kv_slice v, uint32_t tag)
{
	tag |= (uint32_t)(s - u->s) << 2;
	if (u->h.send
		? u->h.send(u->h.ctx, ks, KVDOC_MERGE_BASE + op, k, v, tag)
		: kvd_write_merge(u->h.c, 0, ks, KVDOC_MERGE_BASE + op, -1, k,
				  v, tag))
		return -1;
	if (u->h.out)
		++*u->h.out;
	return 0;
}

/* ---- one document ---- */

/* The keys of index id in the document under dkey, now: a key list in
 * u->tmp (empty: no document, or none). */
static int doc_keys_now(struct doc_uq *u, struct kv_slice dk, uint32_t id)
{
	const struct kvdoc_catalog *c = doc_uq_catalog(u);
	struct kv_slice doc, sec;
	struct kv_buf fresh = {0};
	struct mql_error e;
	int rc;

	u->tmp.len = u->sec.len = 0;
	rc = kvdoc_get(doc_uq_reader(u), nshards(u), dk.p, dk.n, kvd_now_ms(),
		       &doc);
	if (rc == KV_NOT_FOUND)
		return 0;
	if (rc || kvdoc_ix_section(c, u->cid, 0, &u->sec))
		return -1;
	sec = (struct kv_slice){u->sec.data, u->sec.len};
	rc = kvdoc_ix_fresh(&sec, u->cid, &fresh);
	/* a document its index could not take holds no key of it */
	if (!rc &&
	    kvdoc_ix_unique_keys(sec, id, doc.p, doc.n, &u->tmp, &e) == ENOMEM)
		rc = -1;
	kv_buf_free(&fresh);
	return rc;
}

struct find_ix {
	uint32_t id;
	struct kv_slice spec;
};

static int find_one(void *arg, const struct kvdoc_ix *ix)
{
	struct find_ix *f = arg;

	if (ix->id != f->id)
		return 0;
	f->spec = ix->spec;
	return 1;
}

/* MongoDB's duplicate key error for key k of index id, with info
 * {keyPattern, keyValue}. */
static void dup_error(struct doc_uq *u, uint32_t id, struct kv_slice k,
		      struct mql_error *e, bson_t *info)
{
	const struct kvdoc_catalog *c = doc_uq_catalog(u);
	struct find_ix f = {id, {0}};
	const char *name = "?";
	bson_iter_t it, kt;
	bson_t kv = BSON_INITIALIZER, pat;
	char s[300] = "", v[200];
	size_t off = 0, used, sl = 0;

	if (c)
		kvdoc_catalog_indexes(c, u->cid, find_one, &f);
	if (f.spec.n && bson_iter_init_from_data(&it, f.spec.p, f.spec.n) &&
	    bson_iter_find(&it, "name") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	if (f.spec.n && bson_iter_init_from_data(&it, f.spec.p, f.spec.n) &&
	    bson_iter_find(&it, "key") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    bson_iter_recurse(&it, &kt)) {
		const uint8_t *d;
		uint32_t dn;

		bson_iter_document(&it, &dn, &d);
		if (bson_init_static(&pat, d, dn))
			BSON_APPEND_DOCUMENT(info, "keyPattern", &pat);
		while (bson_iter_next(&kt) && off < k.n) {
			bool desc = bson_iter_as_double(&kt) < 0;
			bson_iter_t vt;

			if (mql_key_decode(k.p + off, k.n - off, desc, &kv,
					   bson_iter_key(&kt), &used, NULL))
				break;
			off += used;
			if (bson_iter_init_find(&vt, &kv, bson_iter_key(&kt)))
				mql_value_str(bson_iter_value(&vt), v,
					      sizeof(v));
			sl += (size_t)snprintf(s + sl, sizeof(s) - sl,
					       "%s%s: %s", sl ? ", " : "",
					       bson_iter_key(&kt), v);
			if (sl >= sizeof(s))
				sl = sizeof(s) - 1;
		}
		BSON_APPEND_DOCUMENT(info, "keyValue", &kv);
	}
	bson_destroy(&kv);
	mql_error_set(e, 11000,
		      "E11000 duplicate key error collection: %s.%s index: "
		      "%s dup key: { %s }",
		      u->h.db, u->h.coll, name, s);
}

/* The slot is free again. */
static void slot_done(struct doc_uq *u, struct doc_uq_slot *s)
{
	end_token(s);
	s->phase = UQ_IDLE;
	s->waiting = false;
	u->busy--;
}

/* The document is not written: every key it took is let go. */
static void give_up(struct doc_uq *u, struct doc_uq_slot *s,
		    const struct mql_error *e, const bson_t *info)
{
	if (u->h.fail)
		u->h.fail(u->h.ctx, s->tag, e, info);
	if (s->held.len)
		doc_uq_block_put(&u->rel, s->dkey, s->dkn,
				 (struct kv_slice){s->held.data, s->held.len});
	slot_done(u, s);
	if (!u->h.each)
		doc_uq_cancel(u); /* the statement stops there */
}

static void give_up_msg(struct doc_uq *u, struct doc_uq_slot *s, int code,
			const char *msg)
{
	struct mql_error e = {0};
	bson_t none = BSON_INITIALIZER;

	mql_error_set(&e, code, "%s", msg);
	give_up(u, s, &e, &none);
	bson_destroy(&none);
}

/* The want entry at wpos. */
static int want_at(const struct doc_uq_slot *s, uint32_t *id,
		   struct kv_slice *k)
{
	struct kv_slice l = {s->want.data + s->wpos, s->want.len - s->wpos};

	return kvdoc_keylist_next(&l, id, k);
}

static int send_reserve(struct doc_uq *u, struct doc_uq_slot *s, uint32_t id,
			struct kv_slice k)
{
	uint8_t rk[KVDOC_UQ_KEY_MAX];
	size_t rn = kvdoc_uq_key(id, k.p, k.n, rk);

	u->tmp.len = 0;
	if (kvdoc_uq_op(&u->tmp, KVDOC_UQ_TAKE, s->token, s->expect, s->dkey,
			s->dkn))
		return -1;
	s->waiting = true;
	return send(u, s, KVD_KS_INDEX, KVDOC_OP_RESERVE,
		    (struct kv_slice){rk, rn},
		    (struct kv_slice){u->tmp.data, u->tmp.len}, DOC_UQ_TAG_RES);
}

/* The document's merge: the statement's section, marked as followed by
 * the reservations held (index.h, KVDOC_SEC_RES), then its operand's
 * rest (the slot's own body, or the statement's). */
static int send_doc(struct doc_uq *u, struct doc_uq_slot *s)
{
	struct kv_slice op = {u->opnd->data, u->opnd->len}, sec;
	uint8_t n[4] = {(uint8_t)s->held.len, (uint8_t)(s->held.len >> 8),
			(uint8_t)(s->held.len >> 16),
			(uint8_t)(s->held.len >> 24)};

	if (kvdoc_ix_take(&op, &sec, NULL))
		return -1;
	if (s->body.p)
		op = s->body;
	u->tmp.len = 0;
	if (kv_buf_append(&u->tmp, sec.p, sec.n) ||
	    kv_buf_append(&u->tmp, n, 4) ||
	    kv_buf_append(&u->tmp, s->held.data, s->held.len) ||
	    kv_buf_append(&u->tmp, op.p, op.n))
		return -1;
	u->tmp.data[sec.n - 1] |= 0x80; /* the version's top bit */
	s->phase = UQ_DOC;
	s->waiting = true;
	return send(u, s, KVD_KS_DOC, u->mid,
		    (struct kv_slice){s->dkey, s->dkn},
		    (struct kv_slice){u->tmp.data, u->tmp.len}, DOC_UQ_TAG_DOC);
}

/* A reservation held by another document (its value v): taken over when
 * that document does not have the key (a leftover), else a duplicate. */
static int held_by(struct doc_uq *u, struct doc_uq_slot *s, struct kv_slice v)
{
	struct kv_slice k, hk = {v.p + 8, v.n - 8};
	struct mql_error e = {0};
	bson_t info = BSON_INITIALIZER;
	uint32_t id;
	int rc;

	if (v.n < 12 || !want_at(s, &id, &k))
		return -1;
	if ((rc = doc_keys_now(u, hk, id)) < 0)
		return -1;
	if (kvdoc_keylist_has((struct kv_slice){u->tmp.data, u->tmp.len}, id,
			      k)) {
		dup_error(u, id, k, &e, &info);
		give_up(u, s, &e, &info);
		bson_destroy(&info);
		return 0;
	}
	bson_destroy(&info);
	s->expect = rd64(v.p);
	return send_reserve(u, s, id, k);
}

/* Drive slot s on, its merge not out: its next reservation, or its
 * document's merge.  0, or -1 out of memory. */
static int slot_go(struct doc_uq *u, struct doc_uq_slot *s)
{
	uint32_t id;
	struct kv_slice k;

	if (!s->token || s->want.err || s->held.err)
		return -1;
	/* a key held already (a key the merge asks for again) is not asked
	 * for twice */
	while (want_at(s, &id, &k) &&
	       kvdoc_keylist_has((struct kv_slice){s->held.data, s->held.len},
				 id, k))
		s->wpos += 6 + k.n;
	if (want_at(s, &id, &k))
		return send_reserve(u, s, id, k);
	return send_doc(u, s);
}

static void reserved(struct doc_uq *u, struct doc_uq_slot *s,
		     const struct kvd_pend *pd)
{
	uint32_t id;
	struct kv_slice k;

	if (pd->status != KV_OK || !want_at(s, &id, &k)) {
		give_up_msg(u, s, MQL_InternalError, "reserving a key failed");
		return;
	}
	if (pd->result == KVDOC_UQ_GRANTED) {
		kv_buf_append(&s->held, s->want.data + s->wpos, 6 + k.n);
		s->wpos += 6 + k.n;
		s->expect = 0;
		s->tries = 0;
		if (slot_go(u, s) < 0)
			give_up_msg(u, s, MQL_InternalError, "out of memory");
		return;
	}
	if (++s->tries > UQ_TRIES) {
		struct mql_error e = {0};
		bson_t info = BSON_INITIALIZER;

		dup_error(u, id, k, &e, &info);
		give_up(u, s, &e, &info);
		bson_destroy(&info);
		return;
	}
	if (pd->result == KVDOC_UQ_BUSY
		? send_reserve(u, s, id, k)
		: held_by(u, s, (struct kv_slice){pd->val, pd->vlen}))
		give_up_msg(u, s, MQL_InternalError, "out of memory");
}

static void doc_back(struct doc_uq *u, struct doc_uq_slot *s,
		     const struct kvd_pend *pd)
{
	if (pd->status == KV_OK && pd->result == -KVDOC_NEED_RESERVE) {
		/* its document changed since: the keys it has now */
		if (++s->rounds > UQ_ROUNDS || !pd->val ||
		    pd->vlen < 1u + pd->val[0]) {
			give_up_msg(u, s, 112,
				    "write conflict: the document "
				    "kept changing");
			return;
		}
		s->want.len = s->wpos = 0;
		kv_buf_append(&s->want, pd->val + 1 + pd->val[0],
			      pd->vlen - 1 - pd->val[0]);
		s->phase = UQ_RESERVE;
		if (slot_go(u, s) < 0)
			give_up_msg(u, s, MQL_InternalError, "out of memory");
		return;
	}
	if (u->h.doc_back)
		u->h.doc_back(u->h.ctx, s->tag, pd);
	if (pd->status == KV_OK && pd->result >= 0)
		keep_released(u, pd);
	else if (s->held.len) /* not written: nothing it took is kept */
		doc_uq_block_put(&u->rel, s->dkey, s->dkn,
				 (struct kv_slice){s->held.data, s->held.len});
	slot_done(u, s);
}

static int next_doc(struct doc_uq *u, struct doc_uq_slot *s);

void doc_uq_result(struct doc_uq *u, const struct kvd_pend *pd)
{
	unsigned tag = pd->aux & 3, i = pd->aux >> 2;
	struct doc_uq_slot *s = i < u->ns ? &u->s[i] : NULL;

	/* DOC_UQ_TAG_REL: a release, whatever it found */
	if (!s || tag == DOC_UQ_TAG_REL || !s->waiting)
		return;
	s->waiting = false;
	if (tag == DOC_UQ_TAG_RES && s->phase == UQ_RESERVE)
		reserved(u, s, pd);
	else if (tag == DOC_UQ_TAG_DOC && s->phase == UQ_DOC)
		doc_back(u, s, pd);
	/* a slot done takes the next document at once */
	if (s->phase == UQ_IDLE && u->qpos < u->q.len)
		next_doc(u, s);
}

/* ---- releases ---- */

/* Release key k of index id that document dk let go, when its
 * reservation still names dk under a token no write holds, and dk's
 * document (read after that) lacks the key: a RELEASE of exactly that
 * token, which a write taking it again meanwhile has changed.  Slot 0
 * names it (a release's result is not waited for by any). */
static int release_one(struct doc_uq *u, struct kv_slice dk, uint32_t id,
		       struct kv_slice k)
{
	uint8_t rk[KVDOC_UQ_KEY_MAX];
	size_t rn = kvdoc_uq_key(id, k.p, k.n, rk);
	struct kv_slice v;
	unsigned type;
	uint64_t tok;

	if (kvd_reader_getk(doc_uq_reader(u), kvd_shard_of(rk, rn, nshards(u)),
			    KVD_KS_INDEX, rk, rn, kvd_now_ms(), &v,
			    &type) != KV_OK ||
	    v.n < 8 || v.n - 8 != dk.n || memcmp(v.p + 8, dk.p, dk.n))
		return 0;
	tok = rd64(v.p);
	if (kvdoc_uq_live(tok) || doc_keys_now(u, dk, id) < 0 ||
	    kvdoc_keylist_has((struct kv_slice){u->tmp.data, u->tmp.len}, id,
			      k))
		return 0;
	u->tmp.len = 0;
	if (kvdoc_uq_op(&u->tmp, KVDOC_UQ_RELEASE, 0, tok, dk.p, dk.n))
		return -1;
	return send(u, u->s, KVD_KS_INDEX, KVDOC_OP_RESERVE,
		    (struct kv_slice){rk, rn},
		    (struct kv_slice){u->tmp.data, u->tmp.len}, DOC_UQ_TAG_REL)
		   ? -1
		   : 1;
}

static int releases(struct doc_uq *u)
{
	struct kv_slice dk, l, k;
	size_t pos = 0;
	uint32_t id, cid;
	int n = 0, rc;

	while (doc_uq_block_next(&u->rel, &pos, &dk, &l)) {
		if (dk.n < 4)
			continue;
		cid = (uint32_t)dk.p[0] << 24 | (uint32_t)dk.p[1] << 16 |
		      (uint32_t)dk.p[2] << 8 | dk.p[3];
		if (cid != u->cid)
			continue;
		while (kvdoc_keylist_next(&l, &id, &k))
			if ((rc = release_one(u, dk, id, k)) < 0)
				return -1;
			else
				n += rc;
	}
	u->rel.len = 0;
	return n;
}

/* Start the next queued document in free slot s: its token, then its
 * first reservation (or its merge). */
static int next_doc(struct doc_uq *u, struct doc_uq_slot *s)
{
	struct kv_slice dk, l;
	struct queued x;

	if (!doc_uq_block_next(&u->q, &u->qpos, &dk, &l) ||
	    u->q.len - u->qpos < sizeof(x)) {
		doc_uq_cancel(u);
		return 0;
	}
	memcpy(&x, u->q.data + u->qpos, sizeof(x));
	u->qpos += sizeof(x);
	memcpy(s->dkey, dk.p, dk.n);
	s->dkn = dk.n;
	s->want.len = s->held.len = s->wpos = 0;
	kv_buf_append(&s->want, l.p, l.n);
	s->expect = 0;
	s->tries = s->rounds = 0;
	s->tag = x.tag;
	s->body = x.body;
	s->token = kvdoc_uq_begin();
	s->phase = UQ_RESERVE;
	u->busy++;
	if (slot_go(u, s) < 0) {
		give_up_msg(u, s, MQL_InternalError, "out of memory");
		return -1;
	}
	return 0;
}

/* More slots (4, 8, ... DOC_UQ_SLOTS), as documents wait for one: a
 * statement of one document holds one small array, a batch up to the
 * window.  A slot is named by its index (its merges' tags), never by its
 * address across a call that may grow the array.  0, or -1 (at the most,
 * or out of memory). */
static int grow(struct doc_uq *u)
{
	unsigned n = u->ns ? 2 * u->ns : 4;
	struct doc_uq_slot *s;

	if (u->ns >= DOC_UQ_SLOTS)
		return -1;
	if (n > DOC_UQ_SLOTS)
		n = DOC_UQ_SLOTS;
	if (!(s = realloc(u->s, n * sizeof(*s))))
		return -1;
	memset(s + u->ns, 0, (n - u->ns) * sizeof(*s));
	u->s = s;
	u->ns = n;
	return 0;
}

int doc_uq_step(struct doc_uq *u)
{
	int n;

	for (unsigned i = 0; u->qpos < u->q.len; i++) {
		if (i == u->ns && grow(u))
			break; /* every slot busy: one that ends takes it */
		if (u->s[i].phase == UQ_IDLE && next_doc(u, &u->s[i]) < 0)
			return -1;
	}
	if (u->busy)
		return 1;
	if (u->qpos >= u->q.len)
		u->q.len = u->qpos = 0;
	if (!u->rel.len)
		return 0;
	if (!u->ns && grow(u)) /* a release's merge names slot 0 */
		return -1;
	n = releases(u);
	return n < 0 ? -1 : n > 0;
}

int doc_uq_keys(struct kv_slice op, const uint8_t *doc, size_t n,
		struct kv_buf *out, struct mql_error *e)
{
	struct kv_slice sec;

	if (kvdoc_ix_take(&op, &sec, NULL))
		return mql_error_set(e, MQL_InternalError, "operand");
	return kvdoc_ix_unique_keys(sec, 0, doc, n, out, e) ? -1 : 0;
}
