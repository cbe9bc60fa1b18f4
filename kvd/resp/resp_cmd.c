/* resp_cmd.c - RESP key and string commands: reads served on the io thread,
 * writes queued to the shard committers and answered in kvd_resp_wreply.
 *
 * Every write is checked whole (syntax, integers, key and value sizes)
 * before anything is queued, so a refused request never half applies.  A
 * key kvd cannot store (empty, or longer than max-key-size) cannot exist
 * either: reads answer it as missing, writes refuse it.  Read-modify-writes
 * (INCR, APPEND, GETDEL, SET ... GET, PERSIST) run inside the committer's
 * transaction, so they are atomic like Redis's.
 */
#include <limits.h>
#include <stdio.h>

#include "doc/hash.h"
#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "resp.h"
#include "net/router.h"
#include "net/write.h"

/* kvd_pend.aux bits */
#define AUX_GETOLD 1u /* reply with the old value (SET ... GET, GETSET) */

static const char err_value[] =
    "ERR string exceeds maximum allowed size (max-value-size)";

/* ===================== Helpers ===================== */

static int rget(struct kvd_conn *c, struct kv_slice k, struct kv_slice *v)
{
	struct kvd_io *io = c->io;

	if (!resp_key_ok(c, k))
		return KV_NOT_FOUND;
	return kvd_reader_get(io->reader,
			      kvd_shard_of(k.p, k.n, io->srv->nshards), k.p,
			      k.n, io->now_ms, v);
}

static const char *check_kv(struct kvd_conn *c, struct kv_slice k,
			    const struct kv_slice *v)
{
	if (!resp_key_ok(c, k))
		return resp_err_key;
	if (v && v->n > c->io->srv->cfg->max_value)
		return err_value;
	return NULL;
}

static const char *queued(int rc)
{
	return rc == KV_OK ? NULL : resp_err_nomem;
}

/* Remember reply details on the pend just queued.  kvd_write_* may answer
 * it at once (out of memory) and free it; the tail is then NULL, because a
 * pend is only freed from the head of the queue. */
static void set_aux(struct kvd_conn *c, uint32_t aux)
{
	if (c->pend_tail)
		c->pend_tail->aux = aux;
}

static const char *invalid_expire(struct resp_req *r)
{
	snprintf(r->err, sizeof(r->err),
		 "ERR invalid expire time in '%s' command",
		 resp_cmds[r->cmd].name);
	return r->err;
}

/* An expiry argument: unit ms per step, absolute (a Unix time) or relative
 * to now.  *at is the absolute expiry in ms, possibly in the past (0: at or
 * before 1970).  Redis 7.0's bounds, as its own tests check them: an expiry
 * is any time up to INT64_MAX ms; a conversion to ms or an addition of now
 * past that, or below INT64_MIN, is "invalid expire time".  SET and GETEX
 * (positive) also refuse a time of 0 or less (getExpireMillisecondsOrReply);
 * the EXPIRE family takes one, and the key goes (expireGenericCommand). */
const char *resp_parse_expire(struct kvd_conn *c, struct resp_req *r,
			      struct kv_slice arg, uint64_t unit, int absolute,
			      int positive, uint64_t *at)
{
	long long now = (long long)c->io->now_ms, v;

	if (resp_ll(arg, &v))
		return resp_err_int;
	if (positive && v <= 0)
		return invalid_expire(r);
	if (unit == 1000 && (v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000))
		return invalid_expire(r);
	v *= (long long)unit;
	if (!absolute) {
		if (v > LLONG_MAX - now)
			return invalid_expire(r);
		v += now;
	}
	*at = v > 0 ? (uint64_t)v : 0;
	return NULL;
}

/* ===================== Reads ===================== */

const char *resp_get(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice v;
	int rc = rget(c, r->a[1], &v);

	if (rc == KV_OK)
		resp_add_bulk(c, v.p, v.n);
	else if (rc == KV_NOT_FOUND)
		resp_add_nil(c);
	else
		return resp_read_err(rc);
	return NULL;
}

const char *resp_strlen(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice v;
	int rc = rget(c, r->a[1], &v);

	if (rc != KV_OK && rc != KV_NOT_FOUND)
		return resp_read_err(rc);
	resp_add_int(c, rc == KV_OK ? (int64_t)v.n : 0);
	return NULL;
}

const char *resp_type(struct kvd_conn *c, struct resp_req *r)
{
	struct kvd_io *io = c->io;
	struct kv_slice k = r->a[1], v;
	unsigned type = KVD_VT_PLAIN;
	uint64_t exp;
	int rc = KV_NOT_FOUND;

	if (resp_key_ok(c, k))
		rc = kvd_reader_getv(io->reader,
				     kvd_shard_of(k.p, k.n, io->srv->nshards),
				     k.p, k.n, io->now_ms, &v, &type, &exp);
	if (rc != KV_OK && rc != KV_NOT_FOUND)
		return resp_err_internal;
	resp_add_status(c, rc == KV_NOT_FOUND	 ? "none"
			   : type == KVD_VT_HASH ? "hash"
						 : "string");
	return NULL;
}

const char *resp_mget(struct kvd_conn *c, struct resp_req *r)
{
	size_t off = c->out.len, cap = resp_reply_cap(c);
	struct resp_it it;
	struct kv_slice k, v;

	resp_add_array(c, r->argc - 1);
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		int rc;

		resp_it_next(&it, &k);
		rc = rget(c, k, &v);
		if (rc == KV_WRONG_TYPE) /* a hash: nil, as in Redis */
			rc = KV_NOT_FOUND;
		if (rc == KV_OK)
			resp_add_bulk(c, v.p, v.n);
		else if (rc == KV_NOT_FOUND)
			resp_add_nil(c);
		if ((rc != KV_OK && rc != KV_NOT_FOUND) ||
		    c->out.len - off > cap) {
			c->out.len = off;
			return rc == KV_OK ? "ERR reply would exceed "
					     "max-output: ask for fewer keys"
					   : resp_err_internal;
		}
	}
	return NULL;
}

const char *resp_exists(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice k, v;
	int64_t n = 0;

	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		int rc;

		resp_it_next(&it, &k);
		rc = rget(c, k, &v);
		if (rc == KV_OK || rc == KV_WRONG_TYPE) /* a hash exists */
			n++;
		else if (rc != KV_NOT_FOUND)
			return resp_err_internal;
	}
	resp_add_int(c, n);
	return NULL;
}

/* TTL: seconds, rounded as Redis does; PTTL: ms.  -2 missing, -1 none. */
const char *resp_ttl(struct kvd_conn *c, struct resp_req *r)
{
	struct kvd_io *io = c->io;
	struct kv_slice k = r->a[1];
	int64_t ttl = -2;
	int rc = KV_NOT_FOUND;

	if (resp_key_ok(c, k))
		rc = kvd_reader_ttl(io->reader,
				    kvd_shard_of(k.p, k.n, io->srv->nshards),
				    k.p, k.n, io->now_ms, &ttl);
	if (rc == KV_NOT_FOUND)
		ttl = -2;
	else if (rc != KV_OK)
		return resp_err_internal;
	else if (ttl >= 0 && r->cmd == RESP_CMD_TTL)
		ttl = (ttl + 500) / 1000;
	resp_add_int(c, ttl);
	return NULL;
}

const char *resp_dbsize(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice none = {NULL, 0};
	uint64_t n;

	(void)r;
	if (kvd_reader_count(c->io->reader, none, c->io->now_ms, &n))
		return resp_err_internal;
	resp_add_int(c, (int64_t)n);
	return NULL;
}

/* ===================== SET and friends ===================== */

enum {
	SO_NX = 1,
	SO_XX = 2,
	SO_GET = 4,
	SO_KEEPTTL = 8,
	SO_EX = 16,
	SO_PX = 32,
	SO_EXAT = 64,
	SO_PXAT = 128,
};
#define SO_ANY_EXPIRE (SO_KEEPTTL | SO_EX | SO_PX | SO_EXAT | SO_PXAT)

struct set_args {
	unsigned opts;
	struct kv_slice when; /* the expiry argument, if any */
};

/* SET's options, with Redis's rules for which may be combined (a later EX
 * overrides an earlier one; anything else unexpected is a syntax error). */
static const char *set_options(struct resp_req *r, struct set_args *sa)
{
	static const struct {
		const char *name;
		unsigned flag, excl;
	} tab[] = {
	    {"nx", SO_NX, SO_XX},
	    {"xx", SO_XX, SO_NX},
	    {"get", SO_GET, 0},
	    {"keepttl", SO_KEEPTTL, SO_ANY_EXPIRE & ~SO_KEEPTTL},
	    {"ex", SO_EX, SO_ANY_EXPIRE & ~SO_EX},
	    {"px", SO_PX, SO_ANY_EXPIRE & ~SO_PX},
	    {"exat", SO_EXAT, SO_ANY_EXPIRE & ~SO_EXAT},
	    {"pxat", SO_PXAT, SO_ANY_EXPIRE & ~SO_PXAT},
	};
	struct resp_it it;
	struct kv_slice o;

	resp_it_init(r, 3, &it);
	for (uint32_t i = 3; i < r->argc; i++) {
		size_t t;

		resp_it_next(&it, &o);
		for (t = 0; t < sizeof(tab) / sizeof(tab[0]); t++)
			if (resp_eq(o, tab[t].name))
				break;
		if (t == sizeof(tab) / sizeof(tab[0]) ||
		    (sa->opts & tab[t].excl))
			return resp_err_syntax;
		sa->opts |= tab[t].flag;
		if (tab[t].flag & (SO_EX | SO_PX | SO_EXAT | SO_PXAT)) {
			if (i + 1 == r->argc)
				return resp_err_syntax;
			resp_it_next(&it, &sa->when);
			i++;
		}
	}
	return NULL;
}

/* SET, SETNX, SETEX, PSETEX, GETSET: one PUT with flags. */
const char *resp_set(struct kvd_conn *c, struct resp_req *r)
{
	struct set_args sa = {0, {NULL, 0}};
	struct kv_slice k = r->a[1], v = r->a[2];
	uint64_t at = 0, unit = 1;
	uint8_t flags = 0;
	const char *err = NULL;

	switch (r->cmd) {
	case RESP_CMD_SET: err = set_options(r, &sa); break;
	case RESP_CMD_SETNX: sa.opts = SO_NX; break;
	case RESP_CMD_GETSET: sa.opts = SO_GET; break;
	default: /* SETEX, PSETEX key time value */
		sa.opts = r->cmd == RESP_CMD_SETEX ? SO_EX : SO_PX;
		sa.when = r->a[2];
		v = r->a[3];
		break;
	}
	if (err)
		return err;
	if (sa.opts & (SO_EX | SO_EXAT))
		unit = 1000;
	if ((sa.opts & (SO_EX | SO_PX | SO_EXAT | SO_PXAT)) &&
	    (err = resp_parse_expire(c, r, sa.when, unit,
				     (sa.opts & (SO_EXAT | SO_PXAT)) != 0, 1,
				     &at)))
		return err;
	if ((err = check_kv(c, k, &v)))
		return err;
	flags = (uint8_t)((sa.opts & SO_NX ? KV_PUT_NX : 0) |
			  (sa.opts & SO_XX ? KV_PUT_XX : 0) |
			  (sa.opts & SO_KEEPTTL ? KV_PUT_KEEPTTL : 0) |
			  (sa.opts & SO_GET ? KVD_PUT_GETOLD : 0));
	/* with an expiry, "set" then "expire" (keyspace.h) */
	err = queued(kvd_write_tagged(
	    c, r->cmd, KVD_W_PUT, k, v, at, flags, 0,
	    sa.opts & (SO_EX | SO_PX | SO_EXAT | SO_PXAT) ? KVD_TAG_EXPIRE
							  : 0));
	if (!err)
		set_aux(c, sa.opts & SO_GET ? AUX_GETOLD : 0);
	return err;
}

/* ===================== Other writes ===================== */

const char *resp_getdel(struct kvd_conn *c, struct resp_req *r)
{
	static const struct kv_slice none;
	const char *err = check_kv(c, r->a[1], NULL);

	if (err)
		return err;
	return queued(
	    kvd_write_one(c, r->cmd, KVD_W_GETDEL, r->a[1], none, 0, 0, 0));
}

const char *resp_append(struct kvd_conn *c, struct resp_req *r)
{
	const char *err = check_kv(c, r->a[1], &r->a[2]);

	if (err)
		return err;
	return queued(
	    kvd_write_one(c, r->cmd, KVD_W_APPEND, r->a[1], r->a[2], 0, 0, 0));
}

/* INCR, DECR, INCRBY, DECRBY: the committer does the arithmetic. */
const char *resp_incr(struct kvd_conn *c, struct resp_req *r)
{
	static const struct kv_slice none;
	long long delta = 1;
	const char *err;

	if (r->argc == 3 && resp_ll(r->a[2], &delta))
		return resp_err_int;
	if (r->cmd == RESP_CMD_DECR || r->cmd == RESP_CMD_DECRBY) {
		if (delta == INT64_MIN)
			return "ERR decrement would overflow";
		delta = -delta;
	}
	if ((err = check_kv(c, r->a[1], NULL)))
		return err;
	return queued(
	    kvd_write_one(c, r->cmd, KVD_W_INCR, r->a[1], none, 0, 0, delta));
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST.  An expiry already in the
 * past deletes the key (as Redis does); PERSIST is an expiry of 0. */
enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* EXPIRE's options from argument 3 on, with Redis 7.0's errors. */
static const char *expire_flags(struct resp_req *r, unsigned *flags)
{
	struct resp_it it;
	struct kv_slice a;

	resp_it_init(r, 3, &it);
	for (uint32_t i = 3; i < r->argc; i++) {
		resp_it_next(&it, &a);
		if (resp_eq(a, "nx"))
			*flags |= EXP_NX;
		else if (resp_eq(a, "xx"))
			*flags |= EXP_XX;
		else if (resp_eq(a, "gt"))
			*flags |= EXP_GT;
		else if (resp_eq(a, "lt"))
			*flags |= EXP_LT;
		else {
			snprintf(r->err, sizeof(r->err),
				 "ERR Unsupported option %.*s",
				 (int)(a.n > 128 ? 128 : a.n),
				 (const char *)a.p);
			return r->err;
		}
	}
	if ((*flags & EXP_NX) && (*flags & (EXP_XX | EXP_GT | EXP_LT)))
		return "ERR NX and XX, GT or LT options at the same time are "
		       "not compatible";
	if ((*flags & EXP_GT) && (*flags & EXP_LT))
		return "ERR GT and LT options at the same time are not "
		       "compatible";
	return NULL;
}

struct expire_cond {
	unsigned flags;
	uint64_t at; /* 0: in the past */
};

/* In an exclusive section: compare with the key's expiry as Redis 7.0
 * does (no expiry counts as infinite), then write or answer 0. */
static const char *expire_if(struct kvd_conn *c, struct resp_req *r, void *arg)
{
	static const struct kv_slice none;
	const struct expire_cond *ec = arg;
	uint64_t cur, at = ec->at;
	int rc = resp_section_read(c, r->a[1], NULL, &cur);
	int ok;

	if (rc == KV_WRONG_TYPE) /* a hash has an expiry as any key */
		rc = KV_OK;
	if (rc == KV_NOT_FOUND) {
		resp_add_int(c, 0);
		return NULL;
	}
	if (rc != KV_OK)
		return resp_err_internal;
	ok = !((ec->flags & EXP_NX) && cur) &&
	     !((ec->flags & EXP_XX) && !cur) &&
	     !((ec->flags & EXP_GT) && (!cur || at <= cur)) &&
	     !((ec->flags & EXP_LT) && cur && at >= cur);
	if (!ok) {
		resp_add_int(c, 0);
		return NULL;
	}
	if (at <= c->io->now_ms)
		return queued(kvd_write_one(c, r->cmd, KVD_W_DEL, r->a[1], none,
					    0, 0, 0));
	return queued(
	    kvd_write_one(c, r->cmd, KVD_W_EXPIRE, r->a[1], none, at, 0, 0));
}

const char *resp_expire(struct kvd_conn *c, struct resp_req *r)
{
	static const struct kv_slice none;
	enum kvd_wkind kind = KVD_W_EXPIRE;
	uint64_t at = 0;
	const char *err;

	if (r->cmd != RESP_CMD_PERSIST) {
		int abs =
		    r->cmd == RESP_CMD_EXPIREAT || r->cmd == RESP_CMD_PEXPIREAT;
		int sec =
		    r->cmd == RESP_CMD_EXPIRE || r->cmd == RESP_CMD_EXPIREAT;

		unsigned flags = 0;

		if (r->argc > 3 && (err = expire_flags(r, &flags)))
			return err;
		err = resp_parse_expire(c, r, r->a[2], sec ? 1000 : 1, abs, 0,
					&at);
		if (err)
			return err;
		if (flags) {
			struct expire_cond ec = {flags, at};

			if ((err = check_kv(c, r->a[1], NULL)))
				return err;
			return resp_in_section(c, r, expire_if, &ec);
		}
		if (at <= c->io->now_ms)
			kind = KVD_W_DEL;
	}
	if ((err = check_kv(c, r->a[1], NULL)))
		return err;
	return queued(kvd_write_one(c, r->cmd, kind, r->a[1], none,
				    kind == KVD_W_DEL ? 0 : at, 0, 0));
}

/* Items of MSET (pairs from argument 1) and DEL (keys from argument 1). */
struct items {
	struct resp_req *r;
	struct resp_it it;
	int put;
};

static void next_item(void *arg, uint32_t i, struct kv_slice *k,
		      struct kv_slice *v)
{
	struct items *its = arg;

	if (i == 0)
		resp_it_init(its->r, 1, &its->it);
	resp_it_next(&its->it, k);
	v->p = NULL;
	v->n = 0;
	if (its->put)
		resp_it_next(&its->it, v);
}

static const char *multi_write(struct kvd_conn *c, struct resp_req *r, int put)
{
	struct items its = {r, {NULL, 0}, put};
	uint32_t n = (r->argc - 1) / (put ? 2 : 1);
	struct kv_slice k, v;
	const char *err;

	if (put && (r->argc - 1) % 2)
		return resp_arity_error(r, resp_cmds[r->cmd].name);
	for (uint32_t i = 0; i < n; i++) {
		next_item(&its, i, &k, &v);
		if ((err = check_kv(c, k, put ? &v : NULL)))
			return err;
	}
	return queued(kvd_write_multi(c, r->cmd, put ? KVD_W_PUT : KVD_W_DEL, n,
				      next_item, &its, 0, 0));
}

const char *resp_mset(struct kvd_conn *c, struct resp_req *r)
{
	return multi_write(c, r, 1);
}

const char *resp_del(struct kvd_conn *c, struct resp_req *r)
{
	return multi_write(c, r, 0);
}

const char *resp_flushall(struct kvd_conn *c, struct resp_req *r)
{
	if (r->argc > 2 || (r->argc == 2 && !resp_eq(r->a[1], "async") &&
			    !resp_eq(r->a[1], "sync")))
		return resp_err_syntax;
	if (!c->io->srv->cfg->resp_flushall) {
		snprintf(r->err, sizeof(r->err),
			 "ERR %s is disabled on this server (resp-flushall no)",
			 r->cmd == RESP_CMD_FLUSHALL ? "FLUSHALL" : "FLUSHDB");
		return r->err;
	}
	return queued(kvd_write_all(c, r->cmd, KVD_W_FLUSH));
}

/* ===================== Write replies ===================== */

static void write_error(struct kvd_conn *c, int status)
{
	char msg[128];

	if (status == KV_NOT_INTEGER) {
		resp_add_error(c, resp_err_int);
		return;
	}
	if (status == KV_WRONG_TYPE) {
		resp_add_error(c, resp_err_wrongtype);
		return;
	}
	if (status == KV_VALUE_TOO_LARGE) {
		resp_add_error(c, err_value);
		return;
	}
	if (status == KV_NO_REPLICAS) {
		resp_add_error(c, "NOREPLICAS Not enough good replicas to "
				  "write.");
		return;
	}
	snprintf(msg, sizeof(msg), "ERR %s", kv_status_text(status));
	resp_add_error(c, msg);
}

void kvd_resp_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	int st = pd->status;

	if (pd->op == RESP_CMD_EXEC)
		return; /* a silent part: its command answered (resp_multi.c) */
	if (resp_hash_wreply(c, pd))
		return;
	if (st == KV_NOT_INTEGER && pd->result == 1) {
		resp_add_error(c, "ERR increment or decrement would overflow");
		return;
	}
	if (st >= KV_MALFORMED) {
		write_error(c, st);
		return;
	}
	switch (pd->op) {
	case RESP_CMD_SET:
	case RESP_CMD_GETSET:
	case RESP_CMD_GETDEL:
		if (pd->aux & AUX_GETOLD || pd->op != RESP_CMD_SET) {
			if (pd->val)
				resp_add_bulk(c, pd->val, pd->vlen);
			else
				resp_add_nil(c);
		} else if (st == KV_OK) {
			resp_add_ok(c);
		} else {
			resp_add_nil(c); /* NX or XX not met */
		}
		break;
	case RESP_CMD_SETNX: resp_add_int(c, st == KV_OK); break;
	case RESP_CMD_RENAME: resp_add_ok(c); break;
	case RESP_CMD_RENAMENX:
	case RESP_CMD_COPY: resp_add_int(c, 1); break;
	case RESP_CMD_SETEX:
	case RESP_CMD_PSETEX:
	case RESP_CMD_MSET:
	case RESP_CMD_FLUSHALL:
	case RESP_CMD_FLUSHDB:
	case RESP_CMD_SAVE: resp_add_ok(c); break;
	default: /* DEL, UNLINK, INCR..., APPEND, EXPIRE..., PERSIST */
		resp_add_int(c, pd->result);
		break;
	}
}
