/* cmd.c - the native (msgpack) protocol: request handlers (the decoder is
 * in cmdparse.c).
 *
 * A request is a frame holding one flat array [op, arg...] whose arguments
 * are scalars; a nested container is refused outright, so no request can
 * make the decoder recurse.  The frame is validated whole before anything
 * runs, and a write is checked whole before any part of it is queued, so a
 * bad request is never half applied.  docs/protocol.md is the contract.
 */
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "ops/backup.h"
#include "cmd.h"
#include "cmd_doc.h"
#include "net/conn.h"
#include "keyspace.h"
#include "kv_mp.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "net/router.h"
#include "ops/stats.h"
#include "store.h"
#include "net/write.h"

#define SCAN_DEFAULT_LIMIT 100

/* ===================== Arguments ===================== */

int kvd_arg_is_bytes(const struct kv_mp_obj *o)
{
	return o->type == KV_MP_BIN || o->type == KV_MP_STR;
}

int kvd_arg_key(struct kvd_conn *c, const struct kv_mp_obj *o,
		struct kv_slice *k)
{
	if (!kvd_arg_is_bytes(o) || o->len == 0)
		return KV_BAD_ARGS;
	if (o->len > c->io->srv->cfg->max_key)
		return KV_KEY_TOO_LARGE;
	k->p = o->p;
	k->n = o->len;
	return KV_OK;
}

int kvd_arg_val(struct kvd_conn *c, const struct kv_mp_obj *o,
		struct kv_slice *v)
{
	if (!kvd_arg_is_bytes(o))
		return KV_BAD_ARGS;
	if (o->len > c->io->srv->cfg->max_value)
		return KV_VALUE_TOO_LARGE;
	v->p = o->p;
	v->n = o->len;
	return KV_OK;
}

/* Optional bytes: nil or absent gives an empty slice. */
static int arg_opt_bytes(const struct kvd_req *r, unsigned i,
			 struct kv_slice *s)
{
	s->p = NULL;
	s->n = 0;
	if (i >= r->argc || r->a[i].type == KV_MP_NIL)
		return KV_OK;
	if (!kvd_arg_is_bytes(&r->a[i]) || r->a[i].len > KV_MAX_KEY_LIMIT + 1)
		return KV_BAD_ARGS;
	s->p = r->a[i].p;
	s->n = r->a[i].len;
	return KV_OK;
}

int kvd_arg_opt_uint(const struct kvd_req *r, unsigned i, uint64_t def,
		     uint64_t *v)
{
	*v = def;
	if (i >= r->argc || r->a[i].type == KV_MP_NIL)
		return KV_OK;
	if (r->a[i].type != KV_MP_UINT)
		return KV_BAD_ARGS;
	*v = r->a[i].v.u;
	return KV_OK;
}

int kvd_arg_opt_int(const struct kvd_req *r, unsigned i, int64_t def,
		    int64_t *v)
{
	*v = def;
	if (i >= r->argc || r->a[i].type == KV_MP_NIL)
		return KV_OK;
	if (r->a[i].type == KV_MP_INT) {
		*v = r->a[i].v.i;
		return KV_OK;
	}
	if (r->a[i].type != KV_MP_UINT || r->a[i].v.u > INT64_MAX)
		return KV_BAD_ARGS;
	*v = (int64_t)r->a[i].v.u;
	return KV_OK;
}

static uint64_t expire_at(struct kvd_conn *c, uint64_t ttl_ms)
{
	return ttl_ms ? c->io->now_ms + ttl_ms : 0;
}

/* ===================== Reads ===================== */

void kvd_reply_value(struct kvd_conn *c, struct kv_slice v)
{
	size_t off = kvd_reply_begin(c);

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_bin(&c->out, v.p, v.n);
	kvd_reply_end(c, off);
}

void kvd_reply_uint(struct kvd_conn *c, uint64_t n)
{
	size_t off = kvd_reply_begin(c);

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_uint(&c->out, n);
	kvd_reply_end(c, off);
}

void kvd_reply_int(struct kvd_conn *c, int64_t n)
{
	size_t off = kvd_reply_begin(c);

	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_int(&c->out, n);
	kvd_reply_end(c, off);
}

/* GET, TTL, DEL, GETDEL: one key. */
static int check_key(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k;

	return kvd_arg_key(c, &r->a[0], &k);
}

static int op_get(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_io *io = c->io;
	struct kv_slice k, v;
	int rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc)
		return rc;
	rc =
	    kvd_reader_get(io->reader, kvd_shard_of(k.p, k.n, io->srv->nshards),
			   k.p, k.n, io->now_ms, &v);
	if (rc != KV_OK)
		return rc;
	kvd_reply_value(c, v);
	return KV_OK;
}

static int op_ttl(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_io *io = c->io;
	struct kv_slice k;
	int64_t ttl;
	int rc = kvd_arg_key(c, &r->a[0], &k);

	if (rc)
		return rc;
	rc =
	    kvd_reader_ttl(io->reader, kvd_shard_of(k.p, k.n, io->srv->nshards),
			   k.p, k.n, io->now_ms, &ttl);
	if (rc != KV_OK)
		return rc;
	kvd_reply_int(c, ttl);
	return KV_OK;
}

/* MGET and EXISTS: every key is checked before the reply is started. */
static int check_keys(struct kvd_conn *c, struct kvd_req *r, unsigned from)
{
	struct kv_mp_obj o;
	struct kv_slice k;
	struct kvd_argit it;
	int rc;

	kvd_argit_init(r, from, &it);
	for (uint32_t i = from; i < r->argc; i++) {
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_key(c, &o, &k)))
			return rc;
	}
	return KV_OK;
}

/* MGET, EXISTS, MDEL: keys only. */
static int check_all_keys(struct kvd_conn *c, struct kvd_req *r)
{
	return check_keys(c, r, 0);
}

/* The reply is checked against max-frame-size as it grows, not once built:
 * one 16 MiB value named a thousand times must not cost 16 GB first. */
static int op_mget(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_io *io = c->io;
	size_t max = io->srv->cfg->max_frame;
	struct kv_mp_obj o;
	struct kvd_argit it;
	size_t off;
	int rc = check_keys(c, r, 0);

	if (rc)
		return rc;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, r->argc + 1);
	kv_mp_uint(&c->out, KV_OK);
	kvd_argit_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		struct kv_slice v;

		kvd_argit_next(&it, &o);
		rc = kvd_reader_get(io->reader,
				    kvd_shard_of(o.p, o.len, io->srv->nshards),
				    o.p, o.len, io->now_ms, &v);
		if (rc == KV_OK)
			kv_mp_bin(&c->out, v.p, v.n);
		else if (rc == KV_NOT_FOUND || rc == KV_WRONG_TYPE)
			kv_mp_nil(&c->out); /* a hash: nil, as RESP's MGET */
		else {
			c->out.len = off;
			return rc;
		}
		if (c->out.len - off - KV_FRAME_HDR > max) {
			c->out.len = off;
			return KV_REPLY_TOO_LARGE;
		}
	}
	kvd_reply_end(c, off);
	return KV_OK;
}

static int op_exists(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_io *io = c->io;
	struct kv_mp_obj o;
	struct kvd_argit it;
	uint64_t n = 0;
	int rc = check_keys(c, r, 0);

	if (rc)
		return rc;
	kvd_argit_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		struct kv_slice v;

		kvd_argit_next(&it, &o);
		rc = kvd_reader_get(io->reader,
				    kvd_shard_of(o.p, o.len, io->srv->nshards),
				    o.p, o.len, io->now_ms, &v);
		if (rc == KV_OK || rc == KV_WRONG_TYPE) /* a hash exists */
			n++;
		else if (rc != KV_NOT_FOUND)
			return rc;
	}
	kvd_reply_uint(c, n);
	return KV_OK;
}

struct scan_out {
	struct kvd_conn *c;
	uint32_t n;
	int keys_only, typed;
	size_t off, max; /* the reply's start, and max-frame-size */
	uint64_t now;
	int big, bad;
};

/* TYPED's items: key, type, ttl_ms (-1: none), value (a hash's fields and
 * values as an array). */
static void scan_emit_typed(struct scan_out *so, struct kv_slice val,
			    unsigned type, uint64_t exp)
{
	struct kv_buf *b = &so->c->out;

	kv_mp_uint(b, type == KVD_VT_PLAIN ? KV_TYPE_STRING : KV_TYPE_HASH);
	kv_mp_int(b, exp ? (int64_t)(exp > so->now ? exp - so->now : 1) : -1);
	if (type == KVD_VT_PLAIN)
		kv_mp_bin(b, val.p, val.n);
	else if (kvd_hash_encode(b, val))
		so->bad = 1;
	so->n += 2; /* and key and value: scan_emit */
}

static int scan_emit(void *arg, struct kv_slice key, struct kv_slice val,
		     unsigned type, uint64_t exp)
{
	struct scan_out *so = arg;

	kv_mp_bin(&so->c->out, key.p, key.n);
	if (so->typed)
		scan_emit_typed(so, val, type, exp);
	/* without TYPED a value that is not a plain one (a hash) is nil: its
	 * image is not bytes a client could take for the value (protocol.md,
	 * SCAN) */
	else if (!so->keys_only && type != KVD_VT_PLAIN)
		kv_mp_nil(&so->c->out);
	else if (!so->keys_only)
		kv_mp_bin(&so->c->out, val.p, val.n);
	so->n += so->keys_only ? 1 : 2;
	/* A page stops at max_bytes, but its last value may be large. */
	so->big = so->c->out.len - so->off > so->max;
	return so->c->out.err || so->big || so->bad;
}

static int op_scan(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_io *io = c->io;
	struct kvd_scan sc = {0};
	struct scan_out so = {c,	  0, 0, 0, 0, io->srv->cfg->max_frame,
			      io->now_ms, 0, 0};
	struct kv_slice next;
	uint64_t limit, flags;
	size_t off, items;
	uint8_t *h;
	int rc;

	if ((rc = arg_opt_bytes(r, 0, &sc.prefix)) ||
	    (rc = arg_opt_bytes(r, 1, &sc.start)) ||
	    (rc = arg_opt_bytes(r, 2, &sc.end)) ||
	    (rc = kvd_arg_opt_uint(r, 3, SCAN_DEFAULT_LIMIT, &limit)) ||
	    (rc = kvd_arg_opt_uint(r, 4, 0, &flags)))
		return rc;
	if (limit == 0 ||
	    (flags & ~(uint64_t)(KV_SCAN_KEYS_ONLY | KV_SCAN_TYPED)) ||
	    flags == (KV_SCAN_KEYS_ONLY | KV_SCAN_TYPED))
		return KV_BAD_ARGS;
	so.typed = (flags & KV_SCAN_TYPED) != 0;
	sc.limit =
	    limit > KV_SCAN_MAX_LIMIT ? KV_SCAN_MAX_LIMIT : (unsigned)limit;
	sc.keys_only = so.keys_only = (flags & KV_SCAN_KEYS_ONLY) != 0;
	/* Leave room in the frame for the cursor and the encoding overhead. */
	sc.max_bytes = io->srv->cfg->max_frame / 2;
	if (sc.max_bytes > (8u << 20))
		sc.max_bytes = 8u << 20;
	so.off = off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 3);
	kv_mp_uint(&c->out, KV_OK);
	/* The item count is known only at the end: a fixed array32 header. */
	items = c->out.len;
	kv_buf_append(&c->out, "\xdd\0\0\0\0", 5);
	rc =
	    kvd_reader_scan(io->reader, &sc, io->now_ms, scan_emit, &so, &next);
	if (so.big) {
		c->out.len = off;
		return KV_REPLY_TOO_LARGE;
	}
	if (rc || c->out.err || so.bad) {
		c->out.len = off;
		return KV_INTERNAL;
	}
	h = c->out.data + items + 1;
	kv_store_be32(h, so.n);
	if (next.n)
		kv_mp_bin(&c->out, next.p, next.n);
	else
		kv_mp_nil(&c->out);
	kvd_reply_end(c, off);
	return KV_OK;
}

static int op_count(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice prefix;
	uint64_t n;
	int rc = arg_opt_bytes(r, 0, &prefix);

	if (rc)
		return rc;
	rc = kvd_reader_count(c->io->reader, prefix, c->io->now_ms, &n);
	if (rc)
		return rc;
	kvd_reply_uint(c, n);
	return KV_OK;
}

/* ===================== Admin ===================== */

static int op_hello(struct kvd_conn *c, struct kvd_req *r)
{
	struct kvd_config *cfg = c->io->srv->cfg;
	size_t off;

	/* version? is optional: omitted or nil (protocol.md section 4) */
	if (r->argc >= 1 && r->a[0].type != KV_MP_NIL &&
	    (r->a[0].type != KV_MP_UINT || r->a[0].v.u < KV_PROTO_MIN_VERSION ||
	     r->a[0].v.u > KV_PROTO_VERSION))
		return KV_BAD_VERSION;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_map(&c->out, 8);
	kv_mp_cstr(&c->out, "proto");
	kv_mp_uint(&c->out, KV_PROTO_VERSION);
	kv_mp_cstr(&c->out, "server");
	kv_mp_cstr(&c->out, "kvd " KVD_VERSION);
	kv_mp_cstr(&c->out, "shards");
	kv_mp_uint(&c->out, c->io->srv->nshards);
	kv_mp_cstr(&c->out, "threads");
	kv_mp_uint(&c->out, c->io->srv->nio);
	kv_mp_cstr(&c->out, "durability");
	kv_mp_cstr(&c->out, kvd_durability_name(cfg->durability));
	kv_mp_cstr(&c->out, "max_key");
	kv_mp_uint(&c->out, cfg->max_key);
	kv_mp_cstr(&c->out, "max_value");
	kv_mp_uint(&c->out, cfg->max_value);
	kv_mp_cstr(&c->out, "max_frame");
	kv_mp_uint(&c->out, cfg->max_frame);
	kvd_reply_end(c, off);
	return KV_OK;
}

static int op_ping(struct kvd_conn *c, struct kvd_req *r)
{
	size_t off;

	/* payload? is optional: omitted or nil (protocol.md section 4) */
	if (r->argc == 0 || r->a[0].type == KV_MP_NIL) {
		kvd_reply_status(c, KV_OK, NULL);
		return KV_OK;
	}
	if (!kvd_arg_is_bytes(&r->a[0]))
		return KV_BAD_ARGS;
	off = kvd_reply_begin(c);
	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kv_mp_bin(&c->out, r->a[0].p, r->a[0].len);
	kvd_reply_end(c, off);
	return KV_OK;
}

static int op_stats(struct kvd_conn *c, struct kvd_req *r)
{
	size_t off = kvd_reply_begin(c);

	(void)r;
	kv_mp_array(&c->out, 2);
	kv_mp_uint(&c->out, KV_OK);
	kvd_stats_encode(c->io, &c->out);
	kvd_reply_end(c, off);
	return KV_OK;
}

static int op_backup(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice dir = {r->a[0].p, r->a[0].len};

	if (!kvd_arg_is_bytes(&r->a[0]))
		return KV_BAD_ARGS;
	return kvd_backup_start(c, dir);
}

/* Answers and counts its own reply: DISABLED keeps its explanation, and
 * STATS and /metrics must count it as DISABLED, not as OK. */
static int op_auth(struct kvd_conn *c, struct kvd_req *r)
{
	int st = KV_OK;

	if (!kvd_arg_is_bytes(&r->a[0]))
		return KV_BAD_ARGS;
	if (!c->io->srv->cfg->requirepass[0]) {
		st = KV_DISABLED;
		kvd_reply_status(c, st, "no password is configured");
	} else if ((st = kvd_auth_try(c, r->a[0].p, r->a[0].len)) < 0) {
		st = KV_AUTH_FAILED; /* refused unchecked: counted there */
		kvd_reply_status(c, st, KVD_AUTH_LIMITED_MSG);
	} else if (!st) {
		return KV_AUTH_FAILED; /* counted and logged there */
	} else {
		st = KV_OK;
		kvd_reply_status(c, st, NULL);
	}
	kvd_count_now(&c->io->stats, KV_OP_AUTH, st);
	return KV_OK;
}

static int repl_async(unsigned op)
{
	return op == KV_OP_REPLSYNC || op == KV_OP_REPLPULL ||
	       op == KV_OP_REPLSNAP || op == KV_OP_WAIT;
}

/* REPLSYNC, REPLPULL, REPLSNAP, WAIT: answered by the replication
 * sender (repl.c), in order; REPLICAOF at once. */
static int op_repl(struct kvd_conn *c, struct kvd_req *r)
{
	return kvd_repl_native(c, r);
}

/* ===================== Writes ===================== */

struct put_args {
	struct kv_slice k, v;
	uint64_t ttl, flags;
};

static int put_args(struct kvd_conn *c, struct kvd_req *r, struct put_args *a)
{
	int rc;

	if ((rc = kvd_arg_key(c, &r->a[0], &a->k)) ||
	    (rc = kvd_arg_val(c, &r->a[1], &a->v)) ||
	    (rc = kvd_arg_opt_uint(r, 2, 0, &a->ttl)) ||
	    (rc = kvd_arg_opt_uint(r, 3, 0, &a->flags)))
		return rc;
	if ((a->flags & ~(uint64_t)(KV_PUT_NX | KV_PUT_XX | KV_PUT_KEEPTTL)) ||
	    (a->flags & (KV_PUT_NX | KV_PUT_XX)) == (KV_PUT_NX | KV_PUT_XX) ||
	    a->ttl > KVD_TTL_MAX)
		return KV_BAD_ARGS;
	return KV_OK;
}

static int check_put(struct kvd_conn *c, struct kvd_req *r)
{
	struct put_args a;

	return put_args(c, r, &a);
}

static int op_put(struct kvd_conn *c, struct kvd_req *r)
{
	struct put_args a;
	int rc = put_args(c, r, &a);

	if (rc)
		return rc;
	/* a TTL: "set" then "expire", as SET ... EX (keyspace.h) */
	return kvd_write_tagged(
	    c, r->op, KVD_W_PUT, a.k, a.v, expire_at(c, a.ttl),
	    (uint8_t)a.flags, 0,
	    a.ttl && !(a.flags & KV_PUT_KEEPTTL) ? KVD_TAG_EXPIRE : 0);
}

struct key_write {
	struct kv_slice k, v;
	enum kvd_wkind kind;
	uint64_t ttl;
	int64_t delta;
};

/* DEL, GETDEL, INCR, APPEND, EXPIRE */
static int key_write_args(struct kvd_conn *c, struct kvd_req *r,
			  struct key_write *w)
{
	int rc;

	memset(w, 0, sizeof(*w));
	if ((rc = kvd_arg_key(c, &r->a[0], &w->k)))
		return rc;
	switch (r->op) {
	case KV_OP_DEL: w->kind = KVD_W_DEL; break;
	case KV_OP_GETDEL: w->kind = KVD_W_GETDEL; break;
	case KV_OP_INCR:
		w->kind = KVD_W_INCR;
		if (r->a[1].type != KV_MP_UINT && r->a[1].type != KV_MP_INT)
			return KV_BAD_ARGS;
		if (r->a[1].type == KV_MP_UINT && r->a[1].v.u > INT64_MAX)
			return KV_NOT_INTEGER;
		w->delta = r->a[1].v.i;
		break;
	case KV_OP_APPEND:
		w->kind = KVD_W_APPEND;
		return kvd_arg_val(c, &r->a[1], &w->v);
	default: /* EXPIRE */
		w->kind = KVD_W_EXPIRE;
		if (r->a[1].type != KV_MP_UINT || r->a[1].v.u > KVD_TTL_MAX)
			return KV_BAD_ARGS;
		w->ttl = r->a[1].v.u;
		break;
	}
	return KV_OK;
}

static int check_key_write(struct kvd_conn *c, struct kvd_req *r)
{
	struct key_write w;

	return key_write_args(c, r, &w);
}

static int op_key_write(struct kvd_conn *c, struct kvd_req *r)
{
	struct key_write w;
	int rc = key_write_args(c, r, &w);

	if (rc)
		return rc;
	return kvd_write_one(c, r->op, w.kind, w.k, w.v, expire_at(c, w.ttl), 0,
			     w.delta);
}

/* Items of MPUT (key, value pairs after the TTL) and MDEL (keys). */
struct items {
	struct kvd_req *r;
	struct kvd_argit it;
	unsigned first;
	int put;
};

static void next_item(void *arg, uint32_t i, struct kv_slice *k,
		      struct kv_slice *v)
{
	struct items *its = arg;
	struct kv_mp_obj o;

	if (i == 0)
		kvd_argit_init(its->r, its->first, &its->it);
	kvd_argit_next(&its->it, &o);
	k->p = o.p;
	k->n = o.len;
	v->p = NULL;
	v->n = 0;
	if (its->put) {
		kvd_argit_next(&its->it, &o);
		v->p = o.p;
		v->n = o.len;
	}
}

/* MPUT: the TTL, then pairs, every one checked. */
static int check_mput(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_slice k, v;
	struct kv_mp_obj o;
	struct kvd_argit it;
	uint64_t ttl = 0;
	int rc;

	if ((r->argc - 1) % 2 || kvd_arg_opt_uint(r, 0, 0, &ttl) ||
	    ttl > KVD_TTL_MAX)
		return KV_BAD_ARGS;
	kvd_argit_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i += 2) {
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_key(c, &o, &k)))
			return rc;
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_val(c, &o, &v)))
			return rc;
	}
	return KV_OK;
}

static int op_multi_write(struct kvd_conn *c, struct kvd_req *r)
{
	struct items its = {r, {0}, 0, r->op == KV_OP_MPUT};
	struct kv_slice k, v;
	struct kv_mp_obj o;
	struct kvd_argit it;
	uint64_t ttl = 0;
	int rc;

	its.first = its.put ? 1 : 0;
	if (its.put && ((r->argc - 1) % 2 || kvd_arg_opt_uint(r, 0, 0, &ttl) ||
			ttl > KVD_TTL_MAX))
		return KV_BAD_ARGS;
	/* Every item is checked before any is queued: never half applied. */
	kvd_argit_init(r, its.first, &it);
	for (uint32_t i = its.first; i < r->argc; i += its.put ? 2 : 1) {
		kvd_argit_next(&it, &o);
		if ((rc = kvd_arg_key(c, &o, &k)))
			return rc;
		if (its.put) {
			kvd_argit_next(&it, &o);
			if ((rc = kvd_arg_val(c, &o, &v)))
				return rc;
		}
	}
	return kvd_write_multi(c, r->op, its.put ? KVD_W_PUT : KVD_W_DEL,
			       (r->argc - its.first) / (its.put ? 2 : 1),
			       next_item, &its, expire_at(c, ttl),
			       ttl ? KVD_TAG_EXPIRE : 0);
}

static int op_flushall(struct kvd_conn *c, struct kvd_req *r)
{
	return kvd_write_all(c, r->op, KVD_W_FLUSH);
}

void kvd_cmd_write_reply(struct kvd_conn *c, unsigned op, int st,
			 int64_t result, const uint8_t *val, size_t vlen)
{
	if (kvd_cmd_hash_wreply(c, op, st, result))
		return;
	if (st >= KV_MALFORMED) {
		kvd_reply_status(c, st, NULL);
		return;
	}
	switch (op) {
	case KV_OP_DEL:
		kvd_reply_status(c, result ? KV_OK : KV_NOT_FOUND, NULL);
		break;
	case KV_OP_MDEL:
	case KV_OP_APPEND:
	case KV_OP_BACKUP: kvd_reply_uint(c, (uint64_t)result); break;
	case KV_OP_INCR: kvd_reply_int(c, result); break;
	case KV_OP_GETDEL:
		if (st == KV_OK) {
			kvd_reply_value(c, (struct kv_slice){val, vlen});
			break;
		}
		/* fall through */
	default: /* PUT, MPUT, EXPIRE, FLUSHALL */
		kvd_reply_status(c, st, NULL);
		break;
	}
}

void kvd_cmd_native_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	int st = pd->status;

	if (c->mwrite) { /* a merge of a document write (cmd_doc.c) */
		kvd_doc_wreply(c, pd);
		return;
	}
	if (pd->op == KVD_OP_SILENT) /* answered by its request */
		return;
	/* A DEL of an absent key answers NOT_FOUND: count it as answered. */
	if (pd->op == KV_OP_DEL && st == KV_OK && !pd->result)
		st = KV_NOT_FOUND;
	kvd_count_reply(&c->io->stats, pd->op, st);
	kvd_count_latency(&c->io->stats, pd->op, c->io->turn_ns - pd->t0_ns, 1);
	kvd_cmd_write_reply(c, pd->op, st, pd->result, pd->val, pd->vlen);
}

/* ===================== Dispatch ===================== */

#define VAR UINT32_MAX
#define ANSWER(fn, min, max)                                                   \
	{                                                                      \
		fn, NULL, OPH_ANSWER, 0, 0, min, max                           \
	}
#define READ(fn, check, min, max)                                              \
	{                                                                      \
		fn, check, OPH_READ, 0, 1, min, max                            \
	}
#define WRITE(fn, check, min, max)                                             \
	{                                                                      \
		fn, check, OPH_WRITE, 1, 1, min, max                           \
	}
#define SECTION(fn, check, min, max)                                           \
	{                                                                      \
		fn, check, OPH_SECTION, 1, 1, min, max                         \
	}
static const struct kvd_op_desc ops[KV_OP_MAX] = {
    [KV_OP_HELLO] = ANSWER(op_hello, 0, 1),
    [KV_OP_PING] = ANSWER(op_ping, 0, 1),
    [KV_OP_GET] = READ(op_get, check_key, 1, 1),
    [KV_OP_PUT] = WRITE(op_put, check_put, 2, 4),
    [KV_OP_DEL] = WRITE(op_key_write, check_key_write, 1, 1),
    [KV_OP_MGET] = READ(op_mget, check_all_keys, 1, VAR),
    [KV_OP_MPUT] = WRITE(op_multi_write, check_mput, 3, VAR),
    [KV_OP_MDEL] = WRITE(op_multi_write, check_all_keys, 1, VAR),
    [KV_OP_EXISTS] = READ(op_exists, check_all_keys, 1, VAR),
    [KV_OP_SCAN] = {op_scan, NULL, OPH_READ, 0, 0, 0, 5},
    [KV_OP_COUNT] = {op_count, NULL, OPH_READ, 0, 0, 0, 1},
    [KV_OP_STATS] = ANSWER(op_stats, 0, 0),
    [KV_OP_INCR] = WRITE(op_key_write, check_key_write, 2, 2),
    [KV_OP_APPEND] = WRITE(op_key_write, check_key_write, 2, 2),
    [KV_OP_EXPIRE] = WRITE(op_key_write, check_key_write, 2, 2),
    [KV_OP_TTL] = READ(op_ttl, check_key, 1, 1),
    [KV_OP_GETDEL] = WRITE(op_key_write, check_key_write, 1, 1),
    [KV_OP_FLUSHALL] = {op_flushall, NULL, OPH_WRITE, 1, 0, 0, 0},
    [KV_OP_AUTH] = ANSWER(op_auth, 1, 1),
    [KV_OP_BACKUP] = ANSWER(op_backup, 1, 1),
    /* TXN checks its sub-requests itself, read-only mode included */
    [KV_OP_TXN] = {kvd_op_txn, NULL, OPH_SECTION, 0, 0, 1, VAR},
    [KV_OP_RENAME] = SECTION(kvd_op_rename, kvd_check_rename, 2, 3),
    [KV_OP_COPY] = SECTION(kvd_op_rename, kvd_check_rename, 2, 3),
    [KV_OP_GETEX] = SECTION(kvd_op_getex, kvd_check_getex, 1, 3),
    [KV_OP_INCRBYFLOAT] =
	SECTION(kvd_op_incrbyfloat, kvd_check_incrbyfloat, 2, 2),
    [KV_OP_GETRANGE] = READ(kvd_op_getrange, kvd_check_getrange, 3, 3),
    [KV_OP_SETRANGE] = SECTION(kvd_op_setrange, kvd_check_setrange, 3, 3),
    [KV_OP_SETBIT] = SECTION(kvd_op_setbit, kvd_check_setbit, 3, 3),
    [KV_OP_GETBIT] = READ(kvd_op_getbit, kvd_check_getbit, 2, 2),
    [KV_OP_BITCOUNT] = READ(kvd_op_bitcount, kvd_check_bitcount, 1, 4),
    [KV_OP_BITPOS] = READ(kvd_op_bitpos, kvd_check_bitpos, 2, 5),
    [KV_OP_BITOP] = SECTION(kvd_op_bitop, kvd_check_bitop, 3, VAR),
    /* the hash operations are not TXN's sub-requests (in_txn 0) */
    [KV_OP_HSET] = {kvd_op_hset, NULL, OPH_WRITE, 1, 0, 3, VAR},
    [KV_OP_HGET] = {kvd_op_hget, NULL, OPH_READ, 0, 0, 2, VAR},
    [KV_OP_HGETALL] = {kvd_op_hgetall, NULL, OPH_READ, 0, 0, 1, 1},
    [KV_OP_HDEL] = {kvd_op_hdel, NULL, OPH_WRITE, 1, 0, 2, VAR},
    [KV_OP_HINCRBY] = {kvd_op_hincrby, NULL, OPH_WRITE, 1, 0, 3, 3},
    [KV_OP_HSCAN] = {kvd_op_hscan, NULL, OPH_READ, 0, 0, 1, 3},
    /* the document writes wait for the connection's writes in flight,
     * as sections do, and answer when the door's batch is done
     * (cmd_doc.c); none is one of TXN's sub-requests */
    [KV_OP_DOCINSERT] = {kvd_op_docinsert, NULL, OPH_SECTION, 1, 0, 3, VAR},
    [KV_OP_DOCGET] = {kvd_op_docget, NULL, OPH_READ, 0, 0, 3, 3},
    [KV_OP_DOCUPDATE] = {kvd_op_docupdate, NULL, OPH_SECTION, 1, 0, 4, 5},
    [KV_OP_DOCDELETE] = {kvd_op_docdelete, NULL, OPH_SECTION, 1, 0, 3, 4},
    [KV_OP_DOCFIND] = {kvd_op_docfind, NULL, OPH_READ, 0, 0, 2, 9},
    /* databases, collections and indexes (cmd_docadmin.c): the changes
     * are the door's store's writes, as the document writes are */
    [KV_OP_DOCDBS] = {kvd_op_docdbs, NULL, OPH_READ, 0, 0, 0, 0},
    [KV_OP_DOCCOLLS] = {kvd_op_doccolls, NULL, OPH_READ, 0, 0, 1, 1},
    [KV_OP_DOCCREATE] = {kvd_op_doccreate, NULL, OPH_SECTION, 1, 0, 2, 3},
    [KV_OP_DOCDROP] = {kvd_op_docdrop, NULL, OPH_SECTION, 1, 0, 2, 2},
    [KV_OP_DOCIXCREATE] = {kvd_op_docixcreate, NULL, OPH_SECTION, 1, 0, 3, VAR},
    [KV_OP_DOCIXLIST] = {kvd_op_docixlist, NULL, OPH_READ, 0, 0, 2, 2},
    [KV_OP_DOCIXDROP] = {kvd_op_docixdrop, NULL, OPH_SECTION, 1, 0, 3, 4},
    [KV_OP_REPLSYNC] = ANSWER(op_repl, 5, 5),
    [KV_OP_REPLPULL] = ANSWER(op_repl, 2, 2),
    [KV_OP_REPLSNAP] = ANSWER(op_repl, 3, 3),
    [KV_OP_REPLICAOF] = ANSWER(op_repl, 2, 2),
    [KV_OP_WAIT] = ANSWER(op_repl, 2, 2),
};

const struct kvd_op_desc *kvd_op_desc(unsigned op)
{
	return op < KV_OP_MAX ? &ops[op] : &ops[0];
}

/* May read r run now although writes of this connection are in flight?
 * Only if none of them can touch what it reads (conn.h). */
static int reads_free(struct kvd_conn *c, struct kvd_req *r)
{
	struct kv_mp_obj o;
	struct kvd_argit it;

	switch (r->op) {
	case KV_OP_GET:
	case KV_OP_TTL:
	case KV_OP_GETRANGE:
	case KV_OP_GETBIT:
	case KV_OP_BITCOUNT:
	case KV_OP_BITPOS:
	case KV_OP_HGET:
	case KV_OP_HGETALL:
	case KV_OP_HSCAN: return !kvd_conn_key_busy(c, r->a[0].p, r->a[0].len);
	case KV_OP_MGET:
	case KV_OP_EXISTS:
		kvd_argit_init(r, 0, &it);
		for (uint32_t i = 0; i < r->argc; i++) {
			kvd_argit_next(&it, &o);
			if (kvd_conn_key_busy(c, o.p, o.len))
				return 0;
		}
		return 1;
	case KV_OP_SCAN:
	case KV_OP_COUNT:
	case KV_OP_WAIT:
	case KV_OP_BACKUP: /* sees every earlier write, of any key */ return 0;
	default: /* HELLO, PING, STATS, AUTH: no keys */ return 1;
	}
}

/* A read never sees an exclusive section (TXN, RENAME, RESP's EXEC) half
 * applied across shards: if one ran meanwhile, its reply is dropped and
 * it runs again (a relaxed look before and after: sections are rare).
 * It sees one view of each shard (kvd_reader_pin), so a batch's records
 * all or none. */
static int run_read(struct kvd_conn *c, const struct kvd_op_desc *d,
		    struct kvd_req *r)
{
	size_t mark = c->out.len;

	for (;;) {
		unsigned seq = kvd_excl_seq();
		int rc;

		kvd_reader_pin(c->io->reader);
		rc = d->fn(c, r);
		kvd_reader_unpin(c->io->reader);
		/* a sorted DOCFIND page that gave its thread back reads on
		 * over later turns, a view per slice, as the door's reads */
		if (!kvd_excl_moved(seq) || c->nread)
			return rc;
		c->out.len = mark;
	}
}

/* Run one decoded request.  KV_OK once it is answered or queued; a status
 * when it must be answered with an error; -1 to stall. */
static int run(struct kvd_conn *c, struct kvd_req *r)
{
	const struct kvd_op_desc *d = &ops[r->op];
	size_t mark = c->out.len;
	unsigned was_pending = c->npend;
	int rc;

	if (c->mwrite) /* a document write is out: nothing overtakes it */
		return -1;
	if (!d->fn)
		return KV_UNKNOWN_OP;
	if (kvd_auth_pending(c) && r->op != KV_OP_AUTH && r->op != KV_OP_HELLO)
		return KV_AUTH_REQUIRED;
	if (r->argc < d->min || r->argc > d->max)
		return KV_BAD_ARGS;
	/* A section reads what the connection's writes in flight may change,
	 * and answers at once: it waits for all of them. */
	if (c->npend && (d->how == OPH_SECTION ||
			 (d->how != OPH_WRITE && !reads_free(c, r))))
		return -1;
	if (d->write && c->io->srv->cfg->read_only)
		return KV_READ_ONLY;
	if (d->write && (rc = kvd_repl_write_ok()))
		return rc;
	if (kvd_auth_op_disabled(r->op))
		return KV_DISABLED;
	rc = d->how == OPH_READ ? run_read(c, d, r) : d->fn(c, r);
	if (rc == KVD_ANSWERED)
		return KV_OK;
	/* BACKUP counts its own reply (backup.c, or at its completion), AUTH
	 * its own (op_auth: it may answer DISABLED), and the replication
	 * sender's are counted when sent (KVD_PEND_COUNT). */
	if (rc == KV_OK && d->how != OPH_WRITE && r->op != KV_OP_BACKUP &&
	    !repl_async(r->op)) {
		if (r->op != KV_OP_AUTH)
			kvd_count_now(&c->io->stats, r->op, KV_OK);
		/* (a request queued for the replication sender wrote
		 * nothing here: its reply comes in its own place) */
		if (was_pending && c->out.len > mark)
			kvd_conn_defer(c, mark, r->op);
	}
	return rc;
}

size_t kvd_cmd_native(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	struct kvd_req r = {0};
	uint32_t len;
	int rc;

	if (c->nread) { /* a page that yielded answers first */
		c->stall = STALL_YIELD;
		return 0;
	}
	if (n < KV_FRAME_HDR)
		return 0;
	len = kv_load_be32(p);
	/* A browser made to send HTTP here: close, unanswered.  Only so large
	 * a length can be the start of one, so this costs one compare. */
	if (len >= KVD_HTTP_MIN_LEN) {
		int http = kvd_auth_http_native(c, p, n);

		if (http)
			return http > 0 ? n : 0;
	}
	/* Before authentication only small frames are read at all. */
	if (len > (kvd_auth_pending(c) ? KVD_PREAUTH_MAX_FRAME
				       : c->io->srv->cfg->max_frame)) {
		if (c->npend) {
			c->stall = STALL_WRITES;
			return 0;
		}
		/* The stream cannot be resynchronised without reading it all:
		 * answer, then close.  Before AUTH the cap is the pre-auth one,
		 * and what the client is missing is the password, not a
		 * smaller frame: say so. */
		kvd_reply_status(c,
				 kvd_auth_pending(c) ? KV_AUTH_REQUIRED
						     : KV_FRAME_TOO_LARGE,
				 NULL);
		c->flags |= CONN_CLOSING;
		return n;
	}
	if (n - KV_FRAME_HDR < len)
		return 0;
	rc = kvd_req_decode(p + KV_FRAME_HDR, p + KV_FRAME_HDR + len, &r);
	if (rc == KV_OK)
		rc = run(c, &r);
	if (rc < 0) {
		c->stall = STALL_WRITES; /* answer only after earlier writes */
		return 0;
	}
	if (rc != KV_OK) {
		unsigned op = r.op < KV_OP_MAX ? r.op : 0;
		size_t mark = c->out.len;

		kvd_count_now(&c->io->stats, op, rc);
		kvd_reply_status(c, rc, NULL);
		kvd_conn_defer(c, mark,
			       op); /* behind earlier writes' replies */
	}
	return KV_FRAME_HDR + len;
}

/* A sorted DOCFIND page that gave its thread back reads its next slice;
 * once it answered, the connection's buffered requests run. */
static void native_again(struct kvd_conn *c)
{
	if (c->nread && !kvd_docfind_again(c)) {
		kvd_io_again(c);
		return;
	}
	kvd_conn_resume(c);
}

/* A native connection over max-clients is told TOO_MANY_CONNS in a frame. */
static const uint8_t native_busy[] =
    "\0\0\0\x17\x92\x17\xb4too many connections";

const struct kvd_proto kvd_native_proto = {
    .name = "native",
    .input = kvd_cmd_native,
    .wreply = kvd_cmd_native_wreply,
    .close = kvd_doc_conn_close,
    .again = native_again,
    .busy = native_busy,
    .busy_len = 4 + 23,
};
