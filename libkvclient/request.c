/* request.c - encoding requests (kvc_send_*) and the queue of their replies.
 *
 * A request is encoded straight into the connection's output buffer, in
 * the one framing docs/protocol.md defines: a 4-byte big-endian body length
 * (patched in once the body is written), then [op, arg...] in msgpack.  No
 * I/O happens here, so queueing a pipeline of any depth costs memcpy only.
 *
 * Each queued request also leaves a small record in a ring (struct
 * kvc_pend): its opcode and what its reply must look like.  Replies carry
 * no request id (the protocol answers in order), so this ring is how
 * reply.c knows what the next frame answers, and how it catches a server
 * that says too much or too little.
 */
#include "kvc_int.h"

#include <stdlib.h>
#include <string.h>

#include "kv_mp.h"
#include "kv_proto.h"

/* The public constants are the protocol's: keep them equal. */
_Static_assert(KVC_PUT_NX == KV_PUT_NX && KVC_PUT_XX == KV_PUT_XX &&
		   KVC_PUT_KEEPTTL == KV_PUT_KEEPTTL,
	       "PUT flags differ from kv_proto.h");
_Static_assert(KVC_SCAN_KEYS_ONLY == KV_SCAN_KEYS_ONLY,
	       "SCAN flags differ from kv_proto.h");
_Static_assert(KVC_DOC_UPSERT == KV_DOC_UPSERT && KVC_DOC_MULTI == KV_DOC_MULTI,
	       "document flags differ from kv_proto.h");
_Static_assert(KVC_DEFAULT_PORT == KV_DEFAULT_PORT,
	       "default port differs from kv_proto.h");

/* ===================== The queue of pending replies ===================== */

static int queue_grow(kvc_conn *c)
{
	size_t cap = c->q_cap ? c->q_cap * 2 : 64;
	struct kvc_pend *q = malloc(cap * sizeof(*q));

	if (!q)
		return -1;
	/* Unwrap the ring into the new array, oldest first. */
	for (size_t i = 0; i < c->q_len; i++)
		q[i] = c->q[(c->q_head + i) % c->q_cap];
	free(c->q);
	c->q = q;
	c->q_cap = cap;
	c->q_head = 0;
	return 0;
}

int kvc_queue_push(kvc_conn *c, const struct kvc_pend *p)
{
	if (c->q_len == c->q_cap && queue_grow(c))
		return -1;
	c->q[(c->q_head + c->q_len) % c->q_cap] = *p;
	c->q_len++;
	return 0;
}

void kvc_queue_reset(kvc_conn *c)
{
	c->q_head = c->q_len = 0;
}

size_t kvc_pending(const kvc_conn *c)
{
	return c->q_len;
}

/* ===================== Framing ===================== */

static int bytes_ok(const void *p, size_t n)
{
	return (p || !n) && n <= UINT32_MAX;
}

static int keys_ok(const kvc_val *keys, size_t n)
{
	if (!keys || n == 0 || n >= UINT32_MAX / 2)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!bytes_ok(keys[i].p, keys[i].len))
			return 0;
	return 1;
}

static int invalid(kvc_conn *c, const char *what)
{
	kvc_set_err(c, "invalid argument: %s", what);
	return -KVC_INVALID;
}

/* Start a frame for op with nargs arguments after it; *start remembers
 * where, so that a failure can take the whole frame back. */
static int begin(kvc_conn *c, unsigned op, uint32_t nargs, size_t *start)
{
	static const uint8_t hdr[KV_FRAME_HDR];

	if (c->broken)
		return c->broken;
	*start = c->out.len;
	kv_buf_append(&c->out, hdr, sizeof(hdr));
	kv_mp_array(&c->out, nargs + 1);
	kv_mp_uint(&c->out, op);
	return 0;
}

/* Close the frame begun at start and queue its reply record. */
static int finish(kvc_conn *c, size_t start, unsigned op, unsigned flags,
		  uint32_t n)
{
	struct kvc_pend p = {(uint8_t)op, (uint8_t)flags, n};
	size_t body;

	if (c->out.err)
		goto nomem;
	body = c->out.len - start - KV_FRAME_HDR;
	if (body > UINT32_MAX) {
		c->out.len = start;
		return invalid(c, "request larger than 4 GiB");
	}
	kv_store_be32(c->out.data + start, (uint32_t)body);
	if (kvc_queue_push(c, &p))
		goto nomem;
	return 0;
nomem:
	c->out.len = start;
	c->out.err = 0;
	kvc_set_err(c, "out of memory for a request");
	return -KVC_NOMEM;
}

/* A request whose arguments are one key and, optionally, one more value. */
static int key_req(kvc_conn *c, unsigned op, const void *key, size_t klen)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if ((rc = begin(c, op, 1, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	return finish(c, start, op, 0, 0);
}

/* A request whose arguments are n keys. */
static int keys_req(kvc_conn *c, unsigned op, const kvc_val *keys, size_t n)
{
	size_t start;
	int rc;

	if (!keys_ok(keys, n))
		return invalid(c, "keys");
	if ((rc = begin(c, op, (uint32_t)n, &start)))
		return rc;
	for (size_t i = 0; i < n; i++)
		kv_mp_bin(&c->out, keys[i].p, keys[i].len);
	return finish(c, start, op, 0, (uint32_t)n);
}

/* A request with no argument, or one optional bytes argument. */
static int opt_req(kvc_conn *c, unsigned op, const void *arg, size_t len)
{
	size_t start;
	int rc;

	if (!bytes_ok(arg, len))
		return invalid(c, "argument");
	if ((rc = begin(c, op, arg ? 1 : 0, &start)))
		return rc;
	if (arg)
		kv_mp_bin(&c->out, arg, len);
	return finish(c, start, op, 0, 0);
}

/* ===================== One function per operation ===================== */

int kvc_send_hello(kvc_conn *c)
{
	size_t start;
	int rc;

	if ((rc = begin(c, KV_OP_HELLO, 1, &start)))
		return rc;
	/* version 1, which every kvd answers; the reply's proto says
	 * which the server speaks (2: the version 2 operations are there) */
	kv_mp_uint(&c->out, KV_PROTO_MIN_VERSION);
	return finish(c, start, KV_OP_HELLO, 0, 0);
}

int kvc_send_ping(kvc_conn *c, const void *msg, size_t len)
{
	return opt_req(c, KV_OP_PING, msg, len);
}

int kvc_send_get(kvc_conn *c, const void *key, size_t klen)
{
	return key_req(c, KV_OP_GET, key, klen);
}

int kvc_send_put(kvc_conn *c, const void *key, size_t klen, const void *val,
		 size_t vlen, uint64_t ttl_ms, unsigned flags)
{
	uint32_t nargs = flags ? 4 : ttl_ms ? 3 : 2;
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || !bytes_ok(val, vlen))
		return invalid(c, "key or value");
	if ((flags & ~(KVC_PUT_NX | KVC_PUT_XX | KVC_PUT_KEEPTTL)) ||
	    (flags & (KVC_PUT_NX | KVC_PUT_XX)) == (KVC_PUT_NX | KVC_PUT_XX))
		return invalid(c, "PUT flags");
	if ((rc = begin(c, KV_OP_PUT, nargs, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_bin(&c->out, val, vlen);
	if (nargs >= 3)
		kv_mp_uint(&c->out, ttl_ms);
	if (nargs == 4)
		kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_PUT, 0, 0);
}

int kvc_send_del(kvc_conn *c, const void *key, size_t klen)
{
	return key_req(c, KV_OP_DEL, key, klen);
}

int kvc_send_mget(kvc_conn *c, const kvc_val *keys, size_t n)
{
	return keys_req(c, KV_OP_MGET, keys, n);
}

int kvc_send_mput(kvc_conn *c, const kvc_val *keys, const kvc_val *vals,
		  size_t n, uint64_t ttl_ms)
{
	size_t start, total = 0;
	int rc;

	if (!keys_ok(keys, n) || !vals || !keys_ok(vals, n))
		return invalid(c, "keys or values");
	if ((rc = begin(c, KV_OP_MPUT, (uint32_t)(2 * n + 1), &start)))
		return rc;
	/* One reservation for the whole batch instead of one per item. */
	for (size_t i = 0; i < n; i++)
		total += keys[i].len + vals[i].len + 2 * KV_MP_HDR_MAX;
	kv_buf_reserve(&c->out, total + KV_MP_HDR_MAX);
	kv_mp_uint(&c->out, ttl_ms);
	for (size_t i = 0; i < n; i++) {
		kv_mp_bin(&c->out, keys[i].p, keys[i].len);
		kv_mp_bin(&c->out, vals[i].p, vals[i].len);
	}
	return finish(c, start, KV_OP_MPUT, 0, 0);
}

int kvc_send_mdel(kvc_conn *c, const kvc_val *keys, size_t n)
{
	return keys_req(c, KV_OP_MDEL, keys, n);
}

int kvc_send_exists(kvc_conn *c, const kvc_val *keys, size_t n)
{
	return keys_req(c, KV_OP_EXISTS, keys, n);
}

static int opt_val_ok(const kvc_val *v)
{
	return !v || bytes_ok(v->p, v->len);
}

static void put_opt_val(kvc_conn *c, const kvc_val *v)
{
	if (v && v->len)
		kv_mp_bin(&c->out, v->p, v->len);
	else
		kv_mp_nil(&c->out);
}

int kvc_send_scan(kvc_conn *c, const kvc_val *prefix, const kvc_val *start,
		  const kvc_val *end, unsigned limit, unsigned flags)
{
	size_t at;
	int rc;

	if (!opt_val_ok(prefix) || !opt_val_ok(start) || !opt_val_ok(end) ||
	    limit == 0 || (flags & ~(KVC_SCAN_KEYS_ONLY | KVC_SCAN_TYPED)) ||
	    flags == (KVC_SCAN_KEYS_ONLY | KVC_SCAN_TYPED))
		return invalid(c, "SCAN arguments");
	if ((rc = begin(c, KV_OP_SCAN, 5, &at)))
		return rc;
	put_opt_val(c, prefix);
	put_opt_val(c, start);
	put_opt_val(c, end);
	kv_mp_uint(&c->out, limit);
	kv_mp_uint(&c->out, flags);
	return finish(c, at, KV_OP_SCAN, flags, 0);
}

int kvc_send_count(kvc_conn *c, const void *prefix, size_t plen)
{
	return opt_req(c, KV_OP_COUNT, plen ? prefix : NULL, plen);
}

int kvc_send_stats(kvc_conn *c)
{
	return opt_req(c, KV_OP_STATS, NULL, 0);
}

int kvc_send_incr(kvc_conn *c, const void *key, size_t klen, int64_t delta)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if ((rc = begin(c, KV_OP_INCR, 2, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_int(&c->out, delta);
	return finish(c, start, KV_OP_INCR, 0, 0);
}

int kvc_send_append(kvc_conn *c, const void *key, size_t klen, const void *val,
		    size_t vlen)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || !bytes_ok(val, vlen))
		return invalid(c, "key or value");
	if ((rc = begin(c, KV_OP_APPEND, 2, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_bin(&c->out, val, vlen);
	return finish(c, start, KV_OP_APPEND, 0, 0);
}

int kvc_send_expire(kvc_conn *c, const void *key, size_t klen, uint64_t ttl_ms)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if ((rc = begin(c, KV_OP_EXPIRE, 2, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_uint(&c->out, ttl_ms);
	return finish(c, start, KV_OP_EXPIRE, 0, 0);
}

int kvc_send_ttl(kvc_conn *c, const void *key, size_t klen)
{
	return key_req(c, KV_OP_TTL, key, klen);
}

int kvc_send_getdel(kvc_conn *c, const void *key, size_t klen)
{
	return key_req(c, KV_OP_GETDEL, key, klen);
}

int kvc_send_flushall(kvc_conn *c)
{
	return opt_req(c, KV_OP_FLUSHALL, NULL, 0);
}

int kvc_send_backup(kvc_conn *c, const char *dir)
{
	if (!dir)
		return invalid(c, "directory");
	return key_req(c, KV_OP_BACKUP, dir, strlen(dir));
}

int kvc_send_auth(kvc_conn *c, const void *password, size_t len)
{
	if (!password && !len)
		password = "";
	return key_req(c, KV_OP_AUTH, password, len);
}

/* ===================== For kvd itself ===================== */

int kvc_send_raw(kvc_conn *c, unsigned op, const void *args, size_t len,
		 uint32_t nargs)
{
	size_t start;
	int rc;

	if ((rc = begin(c, op, nargs, &start)))
		return rc;
	kv_buf_append(&c->out, args, len);
	return finish(c, start, op, 0, 0);
}

/* ===================== Version 2 operations ===================== */

/* Two keys and optional flags: RENAME, COPY. */
static int move_req(kvc_conn *c, unsigned op, const void *src, size_t slen,
		    const void *dst, size_t dlen, unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(src, slen) || !bytes_ok(dst, dlen))
		return invalid(c, "key");
	if (flags & ~1u)
		return invalid(c, op == KV_OP_RENAME ? "RENAME flags"
						     : "COPY flags");
	if ((rc = begin(c, op, flags ? 3 : 2, &start)))
		return rc;
	kv_mp_bin(&c->out, src, slen);
	kv_mp_bin(&c->out, dst, dlen);
	if (flags)
		kv_mp_uint(&c->out, flags);
	return finish(c, start, op, 0, 0);
}

int kvc_send_rename(kvc_conn *c, const void *src, size_t slen, const void *dst,
		    size_t dlen, unsigned flags)
{
	return move_req(c, KV_OP_RENAME, src, slen, dst, dlen, flags);
}

int kvc_send_copy(kvc_conn *c, const void *src, size_t slen, const void *dst,
		  size_t dlen, unsigned flags)
{
	return move_req(c, KV_OP_COPY, src, slen, dst, dlen, flags);
}

int kvc_send_getex(kvc_conn *c, const void *key, size_t klen, uint64_t ttl_ms,
		   unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if ((flags & ~(KVC_GETEX_PERSIST | KVC_GETEX_AT)) ||
	    ((flags & KVC_GETEX_PERSIST) && (ttl_ms || flags != 1)))
		return invalid(c, "GETEX flags");
	if ((rc = begin(c, KV_OP_GETEX, 3, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	if (ttl_ms || (flags & KVC_GETEX_AT))
		kv_mp_uint(&c->out, ttl_ms);
	else
		kv_mp_nil(&c->out);
	kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_GETEX, 0, 0);
}

int kvc_send_incrbyfloat(kvc_conn *c, const void *key, size_t klen,
			 const char *incr)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || !incr)
		return invalid(c, "key or increment");
	if ((rc = begin(c, KV_OP_INCRBYFLOAT, 2, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_str(&c->out, incr, strlen(incr));
	return finish(c, start, KV_OP_INCRBYFLOAT, 0, 0);
}

int kvc_send_getrange(kvc_conn *c, const void *key, size_t klen, int64_t start_,
		      int64_t end)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if ((rc = begin(c, KV_OP_GETRANGE, 3, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_int(&c->out, start_);
	kv_mp_int(&c->out, end);
	return finish(c, start, KV_OP_GETRANGE, 0, 0);
}

int kvc_send_setrange(kvc_conn *c, const void *key, size_t klen,
		      uint64_t offset, const void *val, size_t vlen)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || !bytes_ok(val, vlen))
		return invalid(c, "key or value");
	if ((rc = begin(c, KV_OP_SETRANGE, 3, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_uint(&c->out, offset);
	kv_mp_bin(&c->out, val, vlen);
	return finish(c, start, KV_OP_SETRANGE, 0, 0);
}

/* A key, a bit offset and maybe a bit: SETBIT, GETBIT. */
static int bit_req(kvc_conn *c, unsigned op, const void *key, size_t klen,
		   uint64_t offset, int bit)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) ||
	    (op == KV_OP_SETBIT && bit != 0 && bit != 1))
		return invalid(c, "key or bit");
	if ((rc = begin(c, op, op == KV_OP_SETBIT ? 3 : 2, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_uint(&c->out, offset);
	if (op == KV_OP_SETBIT)
		kv_mp_uint(&c->out, (uint64_t)bit);
	return finish(c, start, op, 0, 0);
}

int kvc_send_setbit(kvc_conn *c, const void *key, size_t klen, uint64_t offset,
		    int bit)
{
	return bit_req(c, KV_OP_SETBIT, key, klen, offset, bit);
}

int kvc_send_getbit(kvc_conn *c, const void *key, size_t klen, uint64_t offset)
{
	return bit_req(c, KV_OP_GETBIT, key, klen, offset, 0);
}

int kvc_send_bitcount(kvc_conn *c, const void *key, size_t klen, int64_t start_,
		      int64_t end, unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen))
		return invalid(c, "key");
	if (flags & ~KVC_BIT_RANGE_BITS)
		return invalid(c, "BITCOUNT flags");
	if ((rc = begin(c, KV_OP_BITCOUNT, 4, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_int(&c->out, start_);
	kv_mp_int(&c->out, end);
	kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_BITCOUNT, 0, 0);
}

int kvc_send_bitpos(kvc_conn *c, const void *key, size_t klen, int bit,
		    int64_t start_, const int64_t *end, unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || (bit != 0 && bit != 1))
		return invalid(c, "key or bit");
	if (flags & ~KVC_BIT_RANGE_BITS)
		return invalid(c, "BITPOS flags");
	if ((rc = begin(c, KV_OP_BITPOS, 5, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_uint(&c->out, (uint64_t)bit);
	kv_mp_int(&c->out, start_);
	if (end)
		kv_mp_int(&c->out, *end);
	else
		kv_mp_nil(&c->out);
	kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_BITPOS, 0, 0);
}

int kvc_send_bitop(kvc_conn *c, unsigned op, const void *dst, size_t dlen,
		   const kvc_val *srcs, size_t n)
{
	size_t start;
	int rc;

	if (!bytes_ok(dst, dlen) || !keys_ok(srcs, n) || op > KVC_BITOP_NOT ||
	    (op == KVC_BITOP_NOT && n != 1))
		return invalid(c, "BITOP arguments");
	if ((rc = begin(c, KV_OP_BITOP, (uint32_t)n + 2, &start)))
		return rc;
	kv_mp_uint(&c->out, op);
	kv_mp_bin(&c->out, dst, dlen);
	for (size_t i = 0; i < n; i++)
		kv_mp_bin(&c->out, srcs[i].p, srcs[i].len);
	return finish(c, start, KV_OP_BITOP, 0, 0);
}

/* One argument of a TXN sub-request. */
static int txn_arg(kvc_conn *c, const kvc_arg *a)
{
	switch (a->type) {
	case KVC_ARG_NIL: return kv_mp_nil(&c->out);
	case KVC_ARG_UINT: return kv_mp_uint(&c->out, a->u);
	case KVC_ARG_INT: return kv_mp_int(&c->out, a->i);
	case KVC_ARG_BYTES:
		if (!bytes_ok(a->p, a->len))
			return -1;
		return kv_mp_bin(&c->out, a->p, a->len);
	default: return -1;
	}
}

int kvc_send_txn(kvc_conn *c, const kvc_val *checks, size_t nchecks,
		 const kvc_txn_op *ops, size_t n)
{
	size_t start;
	int rc;

	if ((nchecks && !checks) || (n && !ops) || n >= UINT32_MAX ||
	    nchecks > UINT32_MAX / 2)
		return invalid(c, "TXN arguments");
	if ((rc = begin(c, KV_OP_TXN, (uint32_t)n + 1, &start)))
		return rc;
	if (!nchecks)
		kv_mp_nil(&c->out);
	else
		kv_mp_array(&c->out, (uint32_t)(2 * nchecks));
	for (size_t i = 0; i < 2 * nchecks; i++) {
		if (i % 2 && !checks[i].p)
			kv_mp_nil(&c->out); /* the key must be absent */
		else
			kv_mp_bin(&c->out, checks[i].p, checks[i].len);
	}
	for (size_t i = 0; i < n; i++) {
		if (ops[i].nargs >= UINT32_MAX ||
		    (ops[i].nargs && !ops[i].args))
			goto bad;
		kv_mp_array(&c->out, (uint32_t)ops[i].nargs + 1);
		kv_mp_uint(&c->out, ops[i].op);
		for (size_t j = 0; j < ops[i].nargs; j++)
			if (txn_arg(c, &ops[i].args[j]) && !c->out.err)
				goto bad;
	}
	return finish(c, start, KV_OP_TXN, 0, (uint32_t)n);
bad:
	c->out.len = start;
	return invalid(c, "TXN sub-request");
}

/* ===================== Hashes ===================== */

/* [op, key, fields[0], vals[0], ...] (vals NULL: fields only); the reply
 * is checked for n values when want_n. */
static int fields_req(kvc_conn *c, unsigned op, const void *key, size_t klen,
		      const kvc_val *fields, const kvc_val *vals, size_t n,
		      int want_n)
{
	size_t start, total = 0;
	uint32_t per = vals ? 2 : 1;
	int rc;

	if (!bytes_ok(key, klen) || !keys_ok(fields, n) ||
	    (vals && !keys_ok(vals, n)))
		return invalid(c, "key, fields or values");
	if ((rc = begin(c, op, (uint32_t)(per * n + 1), &start)))
		return rc;
	for (size_t i = 0; i < n; i++)
		total += fields[i].len + (vals ? vals[i].len : 0) +
			 2 * KV_MP_HDR_MAX;
	kv_buf_reserve(&c->out, total + klen + KV_MP_HDR_MAX);
	kv_mp_bin(&c->out, key, klen);
	for (size_t i = 0; i < n; i++) {
		kv_mp_bin(&c->out, fields[i].p, fields[i].len);
		if (vals)
			kv_mp_bin(&c->out, vals[i].p, vals[i].len);
	}
	return finish(c, start, op, 0, want_n ? (uint32_t)n : 0);
}

int kvc_send_hset(kvc_conn *c, const void *key, size_t klen,
		  const kvc_val *fields, const kvc_val *vals, size_t n)
{
	if (!vals)
		return invalid(c, "values");
	return fields_req(c, KV_OP_HSET, key, klen, fields, vals, n, 0);
}

int kvc_send_hget(kvc_conn *c, const void *key, size_t klen,
		  const kvc_val *fields, size_t n)
{
	return fields_req(c, KV_OP_HGET, key, klen, fields, NULL, n, 1);
}

int kvc_send_hgetall(kvc_conn *c, const void *key, size_t klen)
{
	return key_req(c, KV_OP_HGETALL, key, klen);
}

int kvc_send_hdel(kvc_conn *c, const void *key, size_t klen,
		  const kvc_val *fields, size_t n)
{
	return fields_req(c, KV_OP_HDEL, key, klen, fields, NULL, n, 0);
}

int kvc_send_hincrby(kvc_conn *c, const void *key, size_t klen,
		     const void *field, size_t flen, int64_t delta)
{
	size_t start;
	int rc;

	if (!bytes_ok(key, klen) || !bytes_ok(field, flen))
		return invalid(c, "key or field");
	if ((rc = begin(c, KV_OP_HINCRBY, 3, &start)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	kv_mp_bin(&c->out, field, flen);
	kv_mp_int(&c->out, delta);
	return finish(c, start, KV_OP_HINCRBY, 0, 0);
}

int kvc_send_hscan(kvc_conn *c, const void *key, size_t klen,
		   const kvc_val *start_field, unsigned limit)
{
	size_t at;
	int rc;

	if (!bytes_ok(key, klen) || !opt_val_ok(start_field) || limit == 0)
		return invalid(c, "HSCAN arguments");
	if ((rc = begin(c, KV_OP_HSCAN, 3, &at)))
		return rc;
	kv_mp_bin(&c->out, key, klen);
	/* an empty start is the first field: nil */
	put_opt_val(c, start_field);
	kv_mp_uint(&c->out, limit);
	return finish(c, at, KV_OP_HSCAN, 0, 0);
}

/* ===================== Documents ===================== */

static int name_ok(const char *s)
{
	return s && *s && strlen(s) <= 255;
}

/* Start op's frame with db and coll, nargs arguments in all. */
static int doc_begin(kvc_conn *c, unsigned op, const char *db, const char *coll,
		     uint32_t nargs, size_t *start)
{
	int rc;

	if (!name_ok(db) || !name_ok(coll))
		return invalid(c, "database or collection name");
	if ((rc = begin(c, op, nargs, start)))
		return rc;
	kv_mp_bin(&c->out, db, strlen(db));
	kv_mp_bin(&c->out, coll, strlen(coll));
	return 0;
}

/* A BSON argument: bytes, or nil for { NULL, 0 }. */
static void put_doc(kvc_conn *c, const void *p, size_t n)
{
	if (n)
		kv_mp_bin(&c->out, p, n);
	else
		kv_mp_nil(&c->out);
}

int kvc_send_doc_insert(kvc_conn *c, const char *db, const char *coll,
			const kvc_val *docs, size_t n)
{
	size_t start, total = 0;
	int rc;

	if (!keys_ok(docs, n) || n > 100000)
		return invalid(c, "documents");
	for (size_t i = 0; i < n; i++) {
		if (docs[i].len < 5)
			return invalid(c, "a document shorter than 5 bytes");
		total += docs[i].len + KV_MP_HDR_MAX;
	}
	if ((rc = doc_begin(c, KV_OP_DOCINSERT, db, coll, (uint32_t)n + 2,
			    &start)))
		return rc;
	kv_buf_reserve(&c->out, total);
	for (size_t i = 0; i < n; i++)
		kv_mp_bin(&c->out, docs[i].p, docs[i].len);
	return finish(c, start, KV_OP_DOCINSERT, 0, (uint32_t)n);
}

int kvc_send_doc_get(kvc_conn *c, const char *db, const char *coll,
		     const void *id, size_t idlen)
{
	size_t start;
	int rc;

	if (!bytes_ok(id, idlen) || idlen < 5)
		return invalid(c, "_id document");
	if ((rc = doc_begin(c, KV_OP_DOCGET, db, coll, 3, &start)))
		return rc;
	kv_mp_bin(&c->out, id, idlen);
	return finish(c, start, KV_OP_DOCGET, 0, 0);
}

int kvc_send_doc_update(kvc_conn *c, const char *db, const char *coll,
			const void *filter, size_t flen, const void *update,
			size_t ulen, unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(filter, flen) || flen < 5 || !bytes_ok(update, ulen) ||
	    ulen < 5 || (flags & ~(KVC_DOC_UPSERT | KVC_DOC_MULTI)))
		return invalid(c, "filter, update or flags");
	if ((rc = doc_begin(c, KV_OP_DOCUPDATE, db, coll, 5, &start)))
		return rc;
	kv_mp_bin(&c->out, filter, flen);
	kv_mp_bin(&c->out, update, ulen);
	kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_DOCUPDATE, 0, 0);
}

int kvc_send_doc_delete(kvc_conn *c, const char *db, const char *coll,
			const void *filter, size_t flen, unsigned flags)
{
	size_t start;
	int rc;

	if (!bytes_ok(filter, flen) || flen < 5 || (flags & ~KVC_DOC_MULTI))
		return invalid(c, "filter or flags");
	if ((rc = doc_begin(c, KV_OP_DOCDELETE, db, coll, 4, &start)))
		return rc;
	kv_mp_bin(&c->out, filter, flen);
	kv_mp_uint(&c->out, flags);
	return finish(c, start, KV_OP_DOCDELETE, 0, 0);
}

int kvc_send_doc_find(kvc_conn *c, const char *db, const char *coll,
		      const kvc_doc_query *q, const kvc_val *cursor)
{
	static const kvc_doc_query all;
	size_t start;
	int rc;

	if (!q)
		q = &all;
	if (!bytes_ok(q->filter.p, q->filter.len) ||
	    !bytes_ok(q->projection.p, q->projection.len) ||
	    !bytes_ok(q->sort.p, q->sort.len) || !opt_val_ok(cursor) ||
	    q->batch > 10000)
		return invalid(c, "DOCFIND arguments");
	if ((rc = doc_begin(c, KV_OP_DOCFIND, db, coll, 9, &start)))
		return rc;
	put_doc(c, q->filter.p, q->filter.len);
	put_doc(c, q->projection.p, q->projection.len);
	put_doc(c, q->sort.p, q->sort.len);
	kv_mp_uint(&c->out, q->skip);
	kv_mp_uint(&c->out, q->limit);
	kv_mp_uint(&c->out, q->batch ? q->batch : 100);
	put_opt_val(c, cursor);
	return finish(c, start, KV_OP_DOCFIND, 0, 0);
}

/* ---- databases, collections, indexes (1.6) ---- */

int kvc_send_doc_dbs(kvc_conn *c)
{
	size_t start;
	int rc = begin(c, KV_OP_DOCDBS, 0, &start);

	return rc ? rc : finish(c, start, KV_OP_DOCDBS, 0, 0);
}

int kvc_send_doc_colls(kvc_conn *c, const char *db)
{
	size_t start;
	int rc;

	if (!name_ok(db))
		return invalid(c, "database name");
	if ((rc = begin(c, KV_OP_DOCCOLLS, 1, &start)))
		return rc;
	kv_mp_bin(&c->out, db, strlen(db));
	return finish(c, start, KV_OP_DOCCOLLS, 0, 0);
}

int kvc_send_doc_create(kvc_conn *c, const char *db, const char *coll,
			const void *opts, size_t olen)
{
	size_t start;
	int rc;

	if (!bytes_ok(opts, olen) || (olen && olen < 5))
		return invalid(c, "options");
	if ((rc = doc_begin(c, KV_OP_DOCCREATE, db, coll, 3, &start)))
		return rc;
	put_doc(c, opts, olen);
	return finish(c, start, KV_OP_DOCCREATE, 0, 0);
}

/* A request of a namespace alone: [op, db, coll]. */
static int ns_only(kvc_conn *c, unsigned op, const char *db, const char *coll)
{
	size_t start;
	int rc = doc_begin(c, op, db, coll, 2, &start);

	return rc ? rc : finish(c, start, op, 0, 0);
}

int kvc_send_doc_drop(kvc_conn *c, const char *db, const char *coll)
{
	return ns_only(c, KV_OP_DOCDROP, db, coll);
}

int kvc_send_doc_create_indexes(kvc_conn *c, const char *db, const char *coll,
				const kvc_val *specs, size_t n)
{
	size_t start;
	int rc;

	if (!keys_ok(specs, n) || n > 64)
		return invalid(c, "index specifications");
	for (size_t i = 0; i < n; i++)
		if (specs[i].len < 5)
			return invalid(c, "a specification shorter than 5 "
					  "bytes");
	if ((rc = doc_begin(c, KV_OP_DOCIXCREATE, db, coll, (uint32_t)n + 2,
			    &start)))
		return rc;
	for (size_t i = 0; i < n; i++)
		kv_mp_bin(&c->out, specs[i].p, specs[i].len);
	return finish(c, start, KV_OP_DOCIXCREATE, 0, 0);
}

int kvc_send_doc_indexes(kvc_conn *c, const char *db, const char *coll)
{
	return ns_only(c, KV_OP_DOCIXLIST, db, coll);
}

int kvc_send_doc_drop_index(kvc_conn *c, const char *db, const char *coll,
			    const char *name, const void *key, size_t klen)
{
	size_t start;
	int rc;

	if (!name == !klen || (name && (!*name || strlen(name) > 1024)) ||
	    !bytes_ok(key, klen) || (klen && klen < 5))
		return invalid(c, "an index name or a key pattern");
	if ((rc = doc_begin(c, KV_OP_DOCIXDROP, db, coll, 4, &start)))
		return rc;
	if (name)
		kv_mp_bin(&c->out, name, strlen(name));
	else
		kv_mp_nil(&c->out);
	put_doc(c, key, klen);
	return finish(c, start, KV_OP_DOCIXDROP, 0, 0);
}
