/* reply.c - reading replies: framing, checking, and the reply accessors.
 *
 * A reply is checked whole, against the request it answers, before it is
 * handed out: the array shape, the status, every item's type, that nothing
 * follows.  So a garbled or hostile server yields -KVC_PROTOCOL here, once,
 * and the accessors can then walk the bytes knowing they are well formed.
 * The decoder is kvcommon's zero-copy one (kv_mp.h): a value handed out is
 * a pointer into the input buffer, never a copy.
 *
 * The frame length is checked against c->max_reply before the buffer is
 * grown for it, so a length of 4 GiB costs nothing.
 */
#include "kvc_int.h"

#include <string.h>

#include "kv_mp.h"
#include "kv_proto.h"

/* ===================== Checking a reply ===================== */

static int next(const uint8_t **p, const uint8_t *end, struct kv_mp_obj *o)
{
	return kv_mp_next(p, end, o) == KV_MP_OK ? 0 : -1;
}

static int is_bytes(const struct kv_mp_obj *o)
{
	return o->type == KV_MP_BIN || o->type == KV_MP_STR;
}

static int take_bytes(const uint8_t **p, const uint8_t *end, int nil_ok)
{
	struct kv_mp_obj o;

	if (next(p, end, &o))
		return -1;
	return is_bytes(&o) || (nil_ok && o.type == KV_MP_NIL) ? 0 : -1;
}

/* An integer that fits int64_t; unsigned_only refuses negative ones. */
static int take_int(const uint8_t **p, const uint8_t *end, int unsigned_only)
{
	struct kv_mp_obj o;

	if (next(p, end, &o))
		return -1;
	if (o.type == KV_MP_UINT)
		return o.v.u <= INT64_MAX ? 0 : -1;
	return o.type == KV_MP_INT && !unsigned_only ? 0 : -1;
}

static int take_map(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *q = *p;
	struct kv_mp_obj o;

	if (next(&q, end, &o) || o.type != KV_MP_MAP)
		return -1;
	return kv_mp_skip(p, end, KV_MP_MAX_DEPTH) == KV_MP_OK ? 0 : -1;
}

/* [status] or [status, text] (n is 0 or 1): an error, or NOT_FOUND or
 * EXISTS. */
static int check_error(kvc_reply *r, const uint8_t *p, const uint8_t *end,
		       uint32_t n)
{
	kvc_conn *c = r->c;
	struct kv_mp_obj o;

	if (n > 1 && !(n == 2 && r->status == -KVC_DOC_ERROR))
		return -1;
	if (n >= 1) {
		if (next(&p, end, &o) || !is_bytes(&o))
			return -1;
		kvc_set_err(c, "%.*s", (int)(o.len > 400 ? 400 : o.len),
			    (const char *)o.p);
		if (n == 2) { /* DOC_ERROR: MongoDB's code */
			if (next(&p, end, &o) ||
			    (o.type != KV_MP_INT && o.type != KV_MP_UINT))
				return -1;
			c->doc_code = o.v.i;
		}
	} else {
		kvc_set_err(c, "%s", kvc_strerror(r->status));
	}
	r->error = c->err;
	return p == end ? 0 : -1;
}

/* A TYPED SCAN's value: bytes (a string), or an array of bytes (a hash's
 * fields and values). */
static int take_typed_value(const uint8_t **p, const uint8_t *end)
{
	struct kv_mp_obj o;
	const uint8_t *q = *p;

	if (next(&q, end, &o))
		return -1;
	if (is_bytes(&o)) {
		*p = q;
		return 0;
	}
	if (o.type != KV_MP_ARRAY || o.len % 2)
		return -1;
	for (uint32_t i = 0; i < o.len; i++)
		if (take_bytes(&q, end, 0))
			return -1;
	*p = q;
	return 0;
}

/* [0, [key, value, ...] or [key, ...] or [key, type, ttl, value, ...],
 * cursor or nil]; HSCAN's too, [0, [field, value, ...], cursor or nil] */
static int check_scan(kvc_reply *r, const uint8_t *p, const uint8_t *end,
		      uint32_t n)
{
	int keys_only = r->req.flags & KVC_SCAN_KEYS_ONLY;
	int typed = r->req.flags & KVC_SCAN_TYPED;
	unsigned per = keys_only ? 1 : typed ? 4 : 2;
	struct kv_mp_obj o;

	if (n != 2 || next(&p, end, &o) || o.type != KV_MP_ARRAY || o.len % per)
		return -1;
	r->it = p;
	r->left = o.len / per;
	for (uint32_t i = 0; i < o.len; i += per) {
		if (take_bytes(&p, end, 0))
			return -1;
		if (typed && (take_int(&p, end, 1) || take_int(&p, end, 0) ||
			      take_typed_value(&p, end)))
			return -1;
		if (per == 2 && take_bytes(&p, end, r->req.op == KV_OP_SCAN))
			return -1;
	}
	r->cursor = p;
	if (take_bytes(&p, end, 1))
		return -1;
	return p == end ? 0 : -1;
}

/* HGETALL: [0, [field, value, ...]] */
static int check_fields(kvc_reply *r, const uint8_t *p, const uint8_t *end,
			uint32_t n)
{
	struct kv_mp_obj o;

	if (n != 1 || next(&p, end, &o) || o.type != KV_MP_ARRAY || o.len % 2)
		return -1;
	r->it = p;
	r->left = o.len / 2;
	for (uint32_t i = 0; i < o.len; i++)
		if (take_bytes(&p, end, 0))
			return -1;
	return p == end ? 0 : -1;
}

/* DOCINSERT: [0, [{_id}, ...]] (n ids); DOCFIND: [0, [document, ...],
 * cursor or nil]; DOCDBS and DOCIXLIST: [0, [name or spec, ...]] */
static int check_docs(kvc_reply *r, const uint8_t *p, const uint8_t *end,
		      uint32_t n)
{
	int find = r->req.op == KV_OP_DOCFIND;
	struct kv_mp_obj o;

	int list = r->req.op == KV_OP_DOCDBS || r->req.op == KV_OP_DOCIXLIST;

	if (n != (find ? 2u : 1u) || next(&p, end, &o) ||
	    o.type != KV_MP_ARRAY || (!find && !list && o.len != r->req.n))
		return -1;
	r->it = p;
	r->left = o.len;
	for (uint32_t i = 0; i < o.len; i++)
		if (take_bytes(&p, end, 0))
			return -1;
	if (find) {
		r->cursor = p;
		if (take_bytes(&p, end, 1))
			return -1;
	}
	return p == end ? 0 : -1;
}

/* TXN: [[reply], ...], one reply per sub-request, each an array whose
 * first item is a wire status. */
static int check_txn(kvc_reply *r, const uint8_t *p, const uint8_t *end,
		     uint32_t n)
{
	struct kv_mp_obj o;

	if (n != 1 || next(&p, end, &o) || o.type != KV_MP_ARRAY ||
	    o.len != r->req.n)
		return -1;
	r->it = p;
	r->left = o.len;
	for (uint32_t i = 0; i < r->left; i++) {
		const uint8_t *q = p;

		if (next(&q, end, &o) || o.type != KV_MP_ARRAY || !o.len ||
		    next(&q, end, &o) || o.type != KV_MP_UINT ||
		    o.v.u >= KVC_CLIENT_STATUS_MIN ||
		    kv_mp_skip(&p, end, KV_MP_MAX_DEPTH) != KV_MP_OK)
			return -1;
	}
	return p == end ? 0 : -1;
}

/* The result part of a successful reply, by the request's opcode; n is
 * the number of items after the status. */
static int check_ok(kvc_reply *r, const uint8_t *p, const uint8_t *end,
		    uint32_t n)
{
	int bad = 0;

	switch (r->req.op) {
	case KV_OP_HELLO:
	case KV_OP_STATS: bad = n != 1 || take_map(&p, end); break;
	case KV_OP_PING:
		bad = n > 1 || (n == 1 && take_bytes(&p, end, 0));
		break;
	case KV_OP_GET:
	case KV_OP_GETDEL:
	case KV_OP_GETEX:
	case KV_OP_GETRANGE:
	case KV_OP_INCRBYFLOAT:
	case KV_OP_DOCGET: bad = n != 1 || take_bytes(&p, end, 0); break;
	case KV_OP_DOCUPDATE:
		bad = n != 3 || take_int(&p, end, 1) || take_int(&p, end, 1) ||
		      take_bytes(&p, end, 1);
		break;
	case KV_OP_DOCIXCREATE:
		bad = n != 3 || take_int(&p, end, 1) || take_int(&p, end, 1) ||
		      take_int(&p, end, 1);
		break;
	case KV_OP_DOCINSERT:
	case KV_OP_DOCDBS:
	case KV_OP_DOCIXLIST:
	case KV_OP_DOCFIND: return check_docs(r, p, end, n);
	case KV_OP_DOCCOLLS: return check_fields(r, p, end, n);
	case KV_OP_MGET:
	case KV_OP_HGET:
		bad = n != r->req.n;
		r->it = p;
		r->left = n;
		for (uint32_t i = 0; !bad && i < n; i++)
			bad = take_bytes(&p, end, 1);
		break;
	case KV_OP_MDEL:
	case KV_OP_EXISTS:
	case KV_OP_COUNT:
	case KV_OP_APPEND:
	case KV_OP_BACKUP:
	case KV_OP_SETRANGE:
	case KV_OP_SETBIT:
	case KV_OP_GETBIT:
	case KV_OP_BITCOUNT:
	case KV_OP_BITOP:
	case KV_OP_HSET:
	case KV_OP_HDEL:
	case KV_OP_DOCDELETE:
	case KV_OP_DOCIXDROP: bad = n != 1 || take_int(&p, end, 1); break;
	case KV_OP_INCR:
	case KV_OP_HINCRBY:
	case KV_OP_TTL:
	case KV_OP_BITPOS: bad = n != 1 || take_int(&p, end, 0); break;
	case KV_OP_TXN: return check_txn(r, p, end, n);
	case KV_OP_SCAN:
	case KV_OP_HSCAN: return check_scan(r, p, end, n);
	case KV_OP_HGETALL: return check_fields(r, p, end, n);
	case KV_OP_REPLSYNC:
	case KV_OP_REPLPULL:
	case KV_OP_REPLSNAP:
	case KV_OP_WAIT:
		/* replication (kvd's replicas, through kvc_send_raw): the
		 * caller reads r->res itself */
		return 0;
	default: bad = n != 0; break; /* PUT, DEL, MPUT, EXPIRE, ... */
	}
	return bad || p != end ? -1 : 0;
}

static int check(kvc_reply *r, const uint8_t *p, const uint8_t *end)
{
	struct kv_mp_obj o;
	uint32_t n;

	if (next(&p, end, &o) || o.type != KV_MP_ARRAY || o.len == 0)
		return -1;
	n = o.len - 1;
	if (next(&p, end, &o) || o.type != KV_MP_UINT ||
	    o.v.u >= KVC_CLIENT_STATUS_MIN)
		return -1;
	r->status = -(int)o.v.u;
	r->res = p;
	r->end = end;
	r->it = r->cursor = NULL;
	r->left = 0;
	r->error = "";
	r->c->doc_code = 0;
	if (r->status)
		return check_error(r, p, end, n);
	return check_ok(r, p, end, n);
}

/* ===================== Reading ===================== */

/* 1 when a whole frame is buffered, 0 when *need more bytes are, or a
 * (sticky) -KVC_PROTOCOL for a frame over the limit. */
static int frame_ready(kvc_conn *c, uint32_t *len, size_t *need)
{
	size_t avail = c->in.len - c->in_off;

	*need = 0;
	if (avail < KV_FRAME_HDR) {
		*need = KV_FRAME_HDR - avail;
		return 0;
	}
	*len = kv_load_be32(c->in.data + c->in_off);
	if (*len > c->max_reply)
		return kvc_fail(c, KVC_PROTOCOL,
				"%s: reply frame of %u bytes is over the "
				"%zu-byte limit",
				c->peer, *len, c->max_reply);
	if (avail - KV_FRAME_HDR < *len) {
		*need = KV_FRAME_HDR + *len - avail;
		return 0;
	}
	return 1;
}

/* Hand out the buffered frame as the reply to the oldest request. */
static int take(kvc_conn *c, uint32_t len, kvc_reply **rp)
{
	const uint8_t *body = c->in.data + c->in_off + KV_FRAME_HDR;
	kvc_reply *r = &c->reply;

	r->req = c->q[c->q_head];
	c->q_head = (c->q_head + 1) % c->q_cap;
	c->q_len--;
	c->in_off += KV_FRAME_HDR + (size_t)len;
	c->gen++;
	if (check(r, body, body + len)) {
		const char *name = kv_op_name(r->req.op);

		return kvc_fail(c, KVC_PROTOCOL, "%s: malformed reply to %s",
				c->peer, name ? name : "?");
	}
	*rp = r;
	return 0;
}

/* Nothing more will come: a partial frame is a truncated reply. */
static int at_eof(kvc_conn *c)
{
	if (c->in.len > c->in_off)
		return kvc_fail(c, KVC_PROTOCOL,
				"%s: connection closed in the middle of a "
				"reply",
				c->peer);
	return kvc_closed(c);
}

int kvc_next_reply(kvc_conn *c, int wait, kvc_reply **rp)
{
	uint64_t deadline = 0;
	int started = 0, rc;
	uint32_t len;
	size_t need;

	if (c->broken)
		return c->broken;
	if (!c->q_len) {
		kvc_set_err(c, "no request is waiting for a reply");
		return -KVC_INVALID;
	}
	for (;;) {
		if ((rc = frame_ready(c, &len, &need)) < 0)
			return rc;
		if (rc)
			return take(c, len, rp);
		if (c->eof)
			return at_eof(c);
		if (!wait)
			return -KVC_AGAIN;
		if (!started) {
			deadline = kvc_deadline(c);
			started = 1;
		}
		if (c->out_off < c->out.len && (rc = kvc_io_write(c)) < 0)
			return rc;
		rc = kvc_io_read(c, need);
		if (rc == 1 || rc == -KVC_CLOSED)
			continue;
		if (rc < 0)
			return rc;
		if ((rc = kvc_io_wait(c, kvc_want_write(c), deadline)))
			return rc;
	}
}

int kvc_read_reply(kvc_conn *c, kvc_reply **replyp)
{
	return kvc_next_reply(c, !c->nonblock, replyp);
}

/* ===================== Accessors ===================== */

int kvc_reply_status(const kvc_reply *r)
{
	return r->status;
}

const char *kvc_reply_error(const kvc_reply *r)
{
	return r->error;
}

/* 0 when r answers op1 or op2 with success; else what the accessor says. */
static int kind(const kvc_reply *r, unsigned op1, unsigned op2)
{
	if (r->req.op != op1 && r->req.op != op2)
		return -KVC_INVALID;
	return r->status;
}

static void val_of(const struct kv_mp_obj *o, kvc_val *v)
{
	if (!v)
		return;
	v->p = o->type == KV_MP_NIL ? NULL : o->p;
	v->len = o->type == KV_MP_NIL ? 0 : o->len;
}

int kvc_reply_value(const kvc_reply *r, kvc_val *val)
{
	const uint8_t *p = r->res;
	struct kv_mp_obj o = {.type = KV_MP_NIL};
	static const uint8_t ops[] = {KV_OP_GET,	 KV_OP_GETDEL,
				      KV_OP_GETEX,	 KV_OP_GETRANGE,
				      KV_OP_INCRBYFLOAT, KV_OP_DOCGET};
	int rc = r->req.op == KV_OP_PING || memchr(ops, r->req.op, sizeof(ops))
		     ? r->status
		     : -KVC_INVALID;

	if (rc)
		return rc;
	if (p < r->end)
		next(&p, r->end, &o);
	val_of(&o, val);
	return 0;
}

int kvc_reply_int(const kvc_reply *r, int64_t *v)
{
	static const uint8_t ops[] = {
	    KV_OP_INCR,	     KV_OP_TTL,	     KV_OP_APPEND,   KV_OP_MDEL,
	    KV_OP_EXISTS,    KV_OP_COUNT,    KV_OP_BACKUP,   KV_OP_SETRANGE,
	    KV_OP_SETBIT,    KV_OP_GETBIT,   KV_OP_BITCOUNT, KV_OP_BITPOS,
	    KV_OP_BITOP,     KV_OP_HSET,     KV_OP_HDEL,     KV_OP_HINCRBY,
	    KV_OP_DOCDELETE, KV_OP_DOCIXDROP};
	const uint8_t *p = r->res;
	struct kv_mp_obj o;

	if (!memchr(ops, r->req.op, sizeof(ops)))
		return -KVC_INVALID;
	if (r->status)
		return r->status;
	if (next(&p, r->end, &o))
		return -KVC_PROTOCOL;
	if (v)
		*v = o.v.i; /* checked: fits int64_t */
	return 0;
}

/* The operations kvc_reply_next walks. */
static int walkable(const kvc_reply *r)
{
	static const uint8_t ops[] = {
	    KV_OP_TXN,	   KV_OP_MGET,	   KV_OP_SCAN,	    KV_OP_HGET,
	    KV_OP_HGETALL, KV_OP_HSCAN,	   KV_OP_DOCINSERT, KV_OP_DOCFIND,
	    KV_OP_DOCDBS,  KV_OP_DOCCOLLS, KV_OP_DOCIXLIST};

	if (!memchr(ops, r->req.op, sizeof(ops)))
		return -KVC_INVALID;
	if (r->req.op == KV_OP_SCAN && (r->req.flags & KVC_SCAN_TYPED))
		return -KVC_INVALID; /* kvc_reply_next_typed's */
	return r->status;
}

int kvc_reply_next(kvc_reply *r, kvc_val *key, kvc_val *val)
{
	static const kvc_val none;
	struct kv_mp_obj o;
	int rc = walkable(r);

	if (rc)
		return rc;
	if (!r->left)
		return -KVC_END;
	r->left--;
	if (r->req.op == KV_OP_TXN) { /* one sub-request's whole reply */
		const uint8_t *at = r->it;

		kv_mp_skip(&r->it, r->end, KV_MP_MAX_DEPTH); /* checked */
		if (key)
			*key = none;
		if (val) {
			val->p = at;
			val->len = (size_t)(r->it - at);
		}
		return 0;
	}
	if (r->req.op == KV_OP_MGET || r->req.op == KV_OP_HGET ||
	    r->req.op == KV_OP_DOCINSERT || r->req.op == KV_OP_DOCFIND ||
	    r->req.op == KV_OP_DOCDBS || r->req.op == KV_OP_DOCIXLIST) {
		if (key)
			*key = none;
		next(&r->it, r->end, &o);
		val_of(&o, val);
		return 0;
	}
	next(&r->it, r->end, &o);
	val_of(&o, key);
	if (r->req.flags & KVC_SCAN_KEYS_ONLY) {
		if (val)
			*val = none;
		return 0;
	}
	next(&r->it, r->end, &o);
	val_of(&o, val);
	return 0;
}

int kvc_reply_next_typed(kvc_reply *r, kvc_val *key, unsigned *type,
			 int64_t *ttl_ms, kvc_val *val)
{
	struct kv_mp_obj o;
	const uint8_t *at;

	if (r->req.op != KV_OP_SCAN || !(r->req.flags & KVC_SCAN_TYPED))
		return -KVC_INVALID;
	if (r->status)
		return r->status;
	if (!r->left)
		return -KVC_END;
	r->left--;
	next(&r->it, r->end, &o); /* all checked by check_scan */
	val_of(&o, key);
	next(&r->it, r->end, &o);
	if (type)
		*type = (unsigned)o.v.u;
	next(&r->it, r->end, &o);
	if (ttl_ms)
		*ttl_ms = o.v.i;
	at = r->it;
	next(&r->it, r->end, &o);
	if (o.type == KV_MP_ARRAY) { /* a hash: its pairs, after the header */
		kv_mp_skip(&at, r->end, KV_MP_MAX_DEPTH);
		if (val) {
			val->p = r->it;
			val->len = (size_t)(at - r->it);
		}
		r->it = at;
		return 0;
	}
	val_of(&o, val);
	return 0;
}

int kvc_fields_next(kvc_val *rest, kvc_val *field, kvc_val *value)
{
	const uint8_t *p = rest->p, *end = p + rest->len;
	struct kv_mp_obj f, v;

	if (!rest->len)
		return -KVC_END;
	if (next(&p, end, &f) || !is_bytes(&f) || next(&p, end, &v) ||
	    !is_bytes(&v))
		return -KVC_PROTOCOL;
	val_of(&f, field);
	val_of(&v, value);
	rest->len -= (size_t)(p - (const uint8_t *)rest->p);
	rest->p = p;
	return 0;
}

int kvc_reply_cursor(const kvc_reply *r, kvc_val *cursor)
{
	const uint8_t *p = r->cursor;
	struct kv_mp_obj o;
	int rc = r->req.op == KV_OP_DOCFIND ? r->status
					    : kind(r, KV_OP_SCAN, KV_OP_HSCAN);

	if (rc)
		return rc;
	if (next(&p, r->end, &o))
		return -KVC_PROTOCOL;
	if (o.type == KV_MP_NIL)
		return -KVC_END;
	val_of(&o, cursor);
	return 0;
}

/* The reply's first n results, unsigned integers checked by check_ok,
 * into *out[i] (each may be NULL); where they end. */
static const uint8_t *uints(const kvc_reply *r, uint64_t *const *out,
			    unsigned n)
{
	const uint8_t *p = r->res;
	struct kv_mp_obj o;

	for (unsigned i = 0; i < n; i++) {
		next(&p, r->end, &o);
		if (out[i])
			*out[i] = o.v.u;
	}
	return p;
}

int kvc_reply_doc_update(const kvc_reply *r, uint64_t *matched,
			 uint64_t *modified, kvc_val *upserted)
{
	const uint8_t *p;
	struct kv_mp_obj o;
	int rc = kind(r, KV_OP_DOCUPDATE, KV_OP_DOCUPDATE);

	if (rc)
		return rc;
	p = uints(r, (uint64_t *const[]){matched, modified}, 2);
	next(&p, r->end, &o);
	val_of(&o, upserted);
	return 0;
}

int kvc_reply_map(const kvc_reply *r, kvc_val *map)
{
	int rc = kind(r, KV_OP_HELLO, KV_OP_STATS);

	if (rc)
		return rc;
	if (map) {
		map->p = r->res;
		map->len = (size_t)(r->end - r->res);
	}
	return 0;
}

/* ===================== Maps ===================== */

/* Position *p at the value of the entry called name. */
static int map_find(kvc_val map, const char *name, const uint8_t **p,
		    const uint8_t **end)
{
	size_t nlen = strlen(name);
	struct kv_mp_obj o;

	*p = map.p;
	*end = *p + map.len;
	if (!map.p || next(p, *end, &o) || o.type != KV_MP_MAP)
		return -KVC_INVALID;
	for (uint32_t i = o.len; i > 0; i--) {
		struct kv_mp_obj k;

		if (next(p, *end, &k))
			return -KVC_INVALID;
		if (is_bytes(&k) && k.len == nlen && !memcmp(k.p, name, nlen))
			return 0;
		if (kv_mp_skip(p, *end, KV_MP_MAX_DEPTH))
			return -KVC_INVALID;
	}
	return -KVC_NOT_FOUND;
}

int kvc_map_uint(kvc_val map, const char *name, uint64_t *v)
{
	const uint8_t *p, *end;
	struct kv_mp_obj o;
	int rc = map_find(map, name, &p, &end);

	if (rc)
		return rc;
	if (next(&p, end, &o))
		return -KVC_INVALID;
	if (o.type == KV_MP_UINT)
		*v = o.v.u;
	else if (o.type == KV_MP_FLOAT && o.v.f >= 0 && o.v.f < 1.8e19)
		*v = (uint64_t)o.v.f;
	else
		return -KVC_INVALID;
	return 0;
}

int kvc_map_str(kvc_val map, const char *name, kvc_val *s)
{
	const uint8_t *p, *end;
	struct kv_mp_obj o;
	int rc = map_find(map, name, &p, &end);

	if (rc)
		return rc;
	if (next(&p, end, &o) || !is_bytes(&o))
		return -KVC_INVALID;
	val_of(&o, s);
	return 0;
}

int kvc_txn_result(kvc_val sub, kvc_val *value, int64_t *num)
{
	const uint8_t *p = sub.p, *end = p + sub.len;
	struct kv_mp_obj o;
	uint32_t n;
	int st, got_val = 0, got_num = 0;

	if (value)
		*value = (kvc_val){NULL, 0};
	if (num)
		*num = 0;
	if (!p || next(&p, end, &o) || o.type != KV_MP_ARRAY || !o.len)
		return -KVC_PROTOCOL;
	n = o.len;
	if (next(&p, end, &o) || o.type != KV_MP_UINT ||
	    o.v.u >= KVC_CLIENT_STATUS_MIN)
		return -KVC_PROTOCOL;
	st = -(int)o.v.u;
	/* a sub-request's reply is flat: scalars after its status */
	for (uint32_t i = 1; i < n; i++) {
		if (next(&p, end, &o) || o.type == KV_MP_ARRAY ||
		    o.type == KV_MP_MAP)
			return -KVC_PROTOCOL;
		if (is_bytes(&o) && !got_val && st == 0) {
			val_of(&o, value);
			got_val = 1;
		} else if ((o.type == KV_MP_UINT || o.type == KV_MP_INT) &&
			   !got_num) {
			if (num)
				*num = o.v.i;
			got_num = 1;
		}
	}
	return p == end ? st : -KVC_PROTOCOL;
}

int kvc_reply_doc_ixcreate(const kvc_reply *r, uint64_t *before,
			   uint64_t *after, int *created)
{
	uint64_t made = 0;
	int rc = kind(r, KV_OP_DOCIXCREATE, KV_OP_DOCIXCREATE);

	if (rc)
		return rc;
	uints(r, (uint64_t *const[]){before, after, &made}, 3);
	if (created)
		*created = made != 0;
	return 0;
}
