/* sync.c - the synchronous calls, and the scan iterator.
 *
 * Each synchronous call is its queued form (request.c) followed by one
 * kvc_next_reply() that waits, then one accessor: there is a single
 * encoder and a single decoder per operation, whichever way it is called.
 * A synchronous call refuses to run while replies to queued requests are
 * unread, because the reply it would read would be someone else's.
 */
#include "kvc_int.h"

#include <stdlib.h>
#include <string.h>

/* ===================== Round trips ===================== */

/* The connection must be free for a synchronous call. */
static int idle(kvc_conn *c)
{
	if (c->broken)
		return c->broken;
	if (c->q_len) {
		kvc_set_err(c, "%zu replies to queued requests are unread",
			    c->q_len);
		return -KVC_INVALID;
	}
	return 0;
}

/* sent is what the kvc_send_* call returned.  Wait for the reply, even in
 * non-blocking mode; 0 or the reply's status. */
static int run(kvc_conn *c, int sent, kvc_reply **rp)
{
	int rc;

	if (sent)
		return sent;
	if ((rc = kvc_next_reply(c, 1, rp)))
		return rc;
	return (*rp)->status;
}

static int status_only(kvc_conn *c, int sent)
{
	kvc_reply *r;

	return run(c, sent, &r);
}

static int int_result(kvc_conn *c, int sent, int64_t *v)
{
	kvc_reply *r;
	int rc = run(c, sent, &r);

	return rc ? rc : kvc_reply_int(r, v);
}

static int uint_result(kvc_conn *c, int sent, uint64_t *v)
{
	int64_t n;
	int rc = int_result(c, sent, &n);

	if (!rc && v)
		*v = (uint64_t)n; /* checked non-negative by reply.c */
	return rc;
}

static int value_result(kvc_conn *c, int sent, kvc_val *v)
{
	kvc_reply *r;
	int rc = run(c, sent, &r);

	return rc ? rc : kvc_reply_value(r, v);
}

static int map_result(kvc_conn *c, int sent, kvc_val *v)
{
	kvc_reply *r;
	int rc = run(c, sent, &r);

	return rc ? rc : kvc_reply_map(r, v);
}

/* ===================== Calls ===================== */

int kvc_hello(kvc_conn *c, kvc_val *info)
{
	int rc = idle(c);

	return rc ? rc : map_result(c, kvc_send_hello(c), info);
}

int kvc_ping(kvc_conn *c, const void *msg, size_t len, kvc_val *echo)
{
	int rc = idle(c);

	return rc ? rc : value_result(c, kvc_send_ping(c, msg, len), echo);
}

int kvc_get(kvc_conn *c, const void *key, size_t klen, kvc_val *val)
{
	int rc = idle(c);

	return rc ? rc : value_result(c, kvc_send_get(c, key, klen), val);
}

int kvc_put(kvc_conn *c, const void *key, size_t klen, const void *val,
	    size_t vlen, uint64_t ttl_ms, unsigned flags)
{
	int rc = idle(c);

	return rc ? rc
		  : status_only(c, kvc_send_put(c, key, klen, val, vlen, ttl_ms,
						flags));
}

int kvc_del(kvc_conn *c, const void *key, size_t klen)
{
	int rc = idle(c);

	return rc ? rc : status_only(c, kvc_send_del(c, key, klen));
}

int kvc_mget(kvc_conn *c, const kvc_val *keys, size_t n, kvc_val *vals)
{
	kvc_reply *r;
	int rc = idle(c);

	if (!rc && !vals)
		rc = -KVC_INVALID;
	if (rc || (rc = run(c, kvc_send_mget(c, keys, n), &r)))
		return rc;
	for (size_t i = 0; i < n; i++)
		kvc_reply_next(r, NULL, &vals[i]); /* count checked */
	return 0;
}

int kvc_mput(kvc_conn *c, const kvc_val *keys, const kvc_val *vals, size_t n,
	     uint64_t ttl_ms)
{
	int rc = idle(c);

	return rc ? rc
		  : status_only(c, kvc_send_mput(c, keys, vals, n, ttl_ms));
}

int kvc_mdel(kvc_conn *c, const kvc_val *keys, size_t n, uint64_t *deleted)
{
	int rc = idle(c);

	return rc ? rc : uint_result(c, kvc_send_mdel(c, keys, n), deleted);
}

int kvc_exists(kvc_conn *c, const kvc_val *keys, size_t n, uint64_t *count)
{
	int rc = idle(c);

	return rc ? rc : uint_result(c, kvc_send_exists(c, keys, n), count);
}

int kvc_count(kvc_conn *c, const void *prefix, size_t plen, uint64_t *count)
{
	int rc = idle(c);

	return rc ? rc : uint_result(c, kvc_send_count(c, prefix, plen), count);
}

int kvc_stats(kvc_conn *c, kvc_val *stats)
{
	int rc = idle(c);

	return rc ? rc : map_result(c, kvc_send_stats(c), stats);
}

int kvc_incr(kvc_conn *c, const void *key, size_t klen, int64_t delta,
	     int64_t *value)
{
	int rc = idle(c);

	return rc ? rc
		  : int_result(c, kvc_send_incr(c, key, klen, delta), value);
}

int kvc_append(kvc_conn *c, const void *key, size_t klen, const void *val,
	       size_t vlen, uint64_t *newlen)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(c, kvc_send_append(c, key, klen, val, vlen),
				newlen);
}

int kvc_expire(kvc_conn *c, const void *key, size_t klen, uint64_t ttl_ms)
{
	int rc = idle(c);

	return rc ? rc : status_only(c, kvc_send_expire(c, key, klen, ttl_ms));
}

int kvc_ttl(kvc_conn *c, const void *key, size_t klen, int64_t *ttl_ms)
{
	int rc = idle(c);

	return rc ? rc : int_result(c, kvc_send_ttl(c, key, klen), ttl_ms);
}

int kvc_getdel(kvc_conn *c, const void *key, size_t klen, kvc_val *val)
{
	int rc = idle(c);

	return rc ? rc : value_result(c, kvc_send_getdel(c, key, klen), val);
}

int kvc_flushall(kvc_conn *c)
{
	int rc = idle(c);

	return rc ? rc : status_only(c, kvc_send_flushall(c));
}

int kvc_auth(kvc_conn *c, const void *password, size_t len)
{
	int rc = idle(c);

	return rc ? rc : status_only(c, kvc_send_auth(c, password, len));
}

int kvc_backup(kvc_conn *c, const char *dir, uint64_t *keys)
{
	int rc = idle(c);

	return rc ? rc : uint_result(c, kvc_send_backup(c, dir), keys);
}

/* ===================== Scans ===================== */

#define KVC_SCAN_DEFAULT_BATCH 1000

struct kvc_scan {
	kvc_conn *c;
	struct kv_buf prefix, end;
	struct kv_buf start; /* where the next request starts */
	struct kv_buf last;  /* the last key handed out */
	unsigned batch, flags;
	int has_batch; /* r is a batch being handed out */
	uint64_t gen;  /* r is valid while c->gen is still this */
	kvc_reply *r;
	int done; /* sticky: -KVC_END or an error */
};

static int copy_val(struct kv_buf *b, const kvc_val *v)
{
	b->len = 0;
	if (!v || !v->len)
		return 0;
	if (!v->p)
		return -1;
	return kv_buf_append(b, v->p, v->len);
}

int kvc_scan_open(kvc_conn *c, kvc_scan **scanp, const kvc_val *prefix,
		  const kvc_val *start, const kvc_val *end, unsigned batch,
		  unsigned flags)
{
	kvc_scan *s = calloc(1, sizeof(*s));
	int rc = -KVC_NOMEM;

	*scanp = NULL;
	if (!s)
		goto fail;
	s->c = c;
	s->batch = batch ? batch : KVC_SCAN_DEFAULT_BATCH;
	s->flags = flags;
	rc = -KVC_INVALID;
	if ((flags & ~(KVC_SCAN_KEYS_ONLY | KVC_SCAN_TYPED)) ||
	    flags == (KVC_SCAN_KEYS_ONLY | KVC_SCAN_TYPED))
		goto fail;
	if (copy_val(&s->prefix, prefix) || copy_val(&s->start, start) ||
	    copy_val(&s->end, end))
		goto fail;
	*scanp = s;
	return 0;
fail:
	kvc_scan_close(s);
	return rc;
}

void kvc_scan_close(kvc_scan *s)
{
	if (!s)
		return;
	kv_buf_free(&s->prefix);
	kv_buf_free(&s->start);
	kv_buf_free(&s->end);
	kv_buf_free(&s->last);
	free(s);
}

static kvc_val val_of_buf(const struct kv_buf *b)
{
	kvc_val v = {b->data, b->len};

	return v;
}

/* Ask for the batch that begins at s->start. */
static int scan_request(kvc_scan *s)
{
	kvc_val prefix = val_of_buf(&s->prefix), start = val_of_buf(&s->start);
	kvc_val end = val_of_buf(&s->end);
	int rc = idle(s->c);

	if (rc || (rc = run(s->c,
			    kvc_send_scan(s->c, &prefix, &start, &end, s->batch,
					  s->flags),
			    &s->r)))
		return rc;
	s->gen = s->c->gen;
	s->has_batch = 1;
	return 0;
}

/* The batch is used up: continue from its cursor, or finish. */
static int scan_advance(kvc_scan *s)
{
	kvc_val cur;
	int rc = kvc_reply_cursor(s->r, &cur);

	s->has_batch = 0;
	if (rc)
		return rc;
	return copy_val(&s->start, &cur) ? -KVC_NOMEM : 0;
}

/* The next item of s: its key, and its type, time to live and value
 * (typed or not: a plain scan's items are strings without expiry). */
static int scan_item(kvc_scan *s, kvc_val *key, unsigned *type, int64_t *ttl,
		     kvc_val *val)
{
	kvc_val k, v;
	unsigned t = KVC_TYPE_STRING;
	int64_t x = -1;
	int rc;

	while (!s->done) {
		if (s->has_batch && s->c->gen != s->gen) {
			/* The connection read another reply since: the batch
			 * is gone.  The next key in byte order after the last
			 * one handed out is that key followed by a 0 byte. */
			s->has_batch = 0;
			s->start.len = 0;
			if (kv_buf_append(&s->start, s->last.data,
					  s->last.len) ||
			    kv_buf_append(&s->start, "", 1))
				s->done = -KVC_NOMEM;
			continue;
		}
		if (!s->has_batch) {
			if ((rc = scan_request(s)))
				s->done = rc;
			continue;
		}
		rc = s->flags & KVC_SCAN_TYPED
			 ? kvc_reply_next_typed(s->r, &k, &t, &x, &v)
			 : kvc_reply_next(s->r, &k, &v);
		if (rc == -KVC_END) {
			if ((rc = scan_advance(s)))
				s->done = rc;
			continue;
		}
		if (rc || copy_val(&s->last, &k)) {
			s->done = rc ? rc : -KVC_NOMEM;
			continue;
		}
		if (key)
			*key = k;
		if (type)
			*type = t;
		if (ttl)
			*ttl = x;
		if (val)
			*val = v;
		return 0;
	}
	return s->done;
}

int kvc_scan_next(kvc_scan *s, kvc_val *key, kvc_val *val)
{
	if (s->flags & KVC_SCAN_TYPED)
		return -KVC_INVALID;
	return scan_item(s, key, NULL, NULL, val);
}

int kvc_scan_next_typed(kvc_scan *s, kvc_val *key, unsigned *type,
			int64_t *ttl_ms, kvc_val *val)
{
	if (!(s->flags & KVC_SCAN_TYPED))
		return -KVC_INVALID;
	return scan_item(s, key, type, ttl_ms, val);
}

/* ===================== Hashes ===================== */

int kvc_hset(kvc_conn *c, const void *key, size_t klen, const kvc_val *fields,
	     const kvc_val *vals, size_t n, uint64_t *added)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(c, kvc_send_hset(c, key, klen, fields, vals, n),
				added);
}

int kvc_hget(kvc_conn *c, const void *key, size_t klen, const kvc_val *fields,
	     size_t n, kvc_val *vals)
{
	kvc_reply *r;
	int rc = idle(c);

	if (!rc && !vals)
		rc = -KVC_INVALID;
	if (rc || (rc = run(c, kvc_send_hget(c, key, klen, fields, n), &r)))
		return rc;
	for (size_t i = 0; i < n; i++)
		kvc_reply_next(r, NULL, &vals[i]); /* count checked */
	return 0;
}

int kvc_hgetall(kvc_conn *c, const void *key, size_t klen, kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc : run(c, kvc_send_hgetall(c, key, klen), replyp);
}

int kvc_hdel(kvc_conn *c, const void *key, size_t klen, const kvc_val *fields,
	     size_t n, uint64_t *deleted)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(c, kvc_send_hdel(c, key, klen, fields, n),
				deleted);
}

int kvc_hincrby(kvc_conn *c, const void *key, size_t klen, const void *field,
		size_t flen, int64_t delta, int64_t *value)
{
	int rc = idle(c);

	return rc ? rc
		  : int_result(
			c, kvc_send_hincrby(c, key, klen, field, flen, delta),
			value);
}

int kvc_hscan(kvc_conn *c, const void *key, size_t klen,
	      const kvc_val *start_field, unsigned limit, kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc
		  : run(c, kvc_send_hscan(c, key, klen, start_field, limit),
			replyp);
}

/* ===================== Documents ===================== */

int kvc_doc_insert(kvc_conn *c, const char *db, const char *coll,
		   const kvc_val *docs, size_t n, kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc
		  : run(c, kvc_send_doc_insert(c, db, coll, docs, n), replyp);
}

int kvc_doc_get(kvc_conn *c, const char *db, const char *coll, const void *id,
		size_t idlen, kvc_val *doc)
{
	int rc = idle(c);

	return rc ? rc
		  : value_result(c, kvc_send_doc_get(c, db, coll, id, idlen),
				 doc);
}

int kvc_doc_update(kvc_conn *c, const char *db, const char *coll,
		   const void *filter, size_t flen, const void *update,
		   size_t ulen, unsigned flags, uint64_t *matched,
		   uint64_t *modified, kvc_val *upserted)
{
	kvc_reply *r;
	int rc = idle(c);

	if (rc || (rc = run(c,
			    kvc_send_doc_update(c, db, coll, filter, flen,
						update, ulen, flags),
			    &r)))
		return rc;
	return kvc_reply_doc_update(r, matched, modified, upserted);
}

int kvc_doc_delete(kvc_conn *c, const char *db, const char *coll,
		   const void *filter, size_t flen, unsigned flags,
		   uint64_t *deleted)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(
			c,
			kvc_send_doc_delete(c, db, coll, filter, flen, flags),
			deleted);
}

int kvc_doc_find(kvc_conn *c, const char *db, const char *coll,
		 const kvc_doc_query *q, const kvc_val *cursor,
		 kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc
		  : run(c, kvc_send_doc_find(c, db, coll, q, cursor), replyp);
}

int kvc_doc_dbs(kvc_conn *c, kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc : run(c, kvc_send_doc_dbs(c), replyp);
}

int kvc_doc_colls(kvc_conn *c, const char *db, kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc : run(c, kvc_send_doc_colls(c, db), replyp);
}

int kvc_doc_create(kvc_conn *c, const char *db, const char *coll,
		   const void *opts, size_t olen)
{
	int rc = idle(c);

	return rc ? rc
		  : status_only(c,
				kvc_send_doc_create(c, db, coll, opts, olen));
}

int kvc_doc_drop(kvc_conn *c, const char *db, const char *coll)
{
	int rc = idle(c);

	return rc ? rc : status_only(c, kvc_send_doc_drop(c, db, coll));
}

int kvc_doc_create_indexes(kvc_conn *c, const char *db, const char *coll,
			   const kvc_val *specs, size_t n, uint64_t *before,
			   uint64_t *after)
{
	kvc_reply *r;
	int rc = idle(c);

	if (rc ||
	    (rc = run(c, kvc_send_doc_create_indexes(c, db, coll, specs, n),
		      &r)))
		return rc;
	return kvc_reply_doc_ixcreate(r, before, after, NULL);
}

int kvc_doc_indexes(kvc_conn *c, const char *db, const char *coll,
		    kvc_reply **replyp)
{
	int rc = idle(c);

	return rc ? rc : run(c, kvc_send_doc_indexes(c, db, coll), replyp);
}

int kvc_doc_drop_index(kvc_conn *c, const char *db, const char *coll,
		       const char *name, const void *key, size_t klen,
		       uint64_t *was)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(
			c,
			kvc_send_doc_drop_index(c, db, coll, name, key, klen),
			was);
}

int64_t kvc_doc_errcode(const kvc_conn *c)
{
	return c ? c->doc_code : 0;
}

/* ===================== Version 2 ===================== */

int kvc_rename(kvc_conn *c, const void *src, size_t slen, const void *dst,
	       size_t dlen, unsigned flags)
{
	int rc = idle(c);

	return rc ? rc
		  : status_only(
			c, kvc_send_rename(c, src, slen, dst, dlen, flags));
}

int kvc_copy(kvc_conn *c, const void *src, size_t slen, const void *dst,
	     size_t dlen, unsigned flags)
{
	int rc = idle(c);

	return rc ? rc
		  : status_only(c,
				kvc_send_copy(c, src, slen, dst, dlen, flags));
}

int kvc_getex(kvc_conn *c, const void *key, size_t klen, uint64_t ttl_ms,
	      unsigned flags, kvc_val *val)
{
	int rc = idle(c);

	return rc ? rc
		  : value_result(c, kvc_send_getex(c, key, klen, ttl_ms, flags),
				 val);
}

int kvc_incrbyfloat(kvc_conn *c, const void *key, size_t klen, const char *incr,
		    kvc_val *val)
{
	int rc = idle(c);

	return rc ? rc
		  : value_result(c, kvc_send_incrbyfloat(c, key, klen, incr),
				 val);
}

int kvc_getrange(kvc_conn *c, const void *key, size_t klen, int64_t start,
		 int64_t end, kvc_val *val)
{
	int rc = idle(c);

	return rc ? rc
		  : value_result(c, kvc_send_getrange(c, key, klen, start, end),
				 val);
}

int kvc_setrange(kvc_conn *c, const void *key, size_t klen, uint64_t offset,
		 const void *val, size_t vlen, uint64_t *newlen)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(
			c, kvc_send_setrange(c, key, klen, offset, val, vlen),
			newlen);
}

int kvc_setbit(kvc_conn *c, const void *key, size_t klen, uint64_t offset,
	       int bit, int *old)
{
	int64_t v = 0;
	int rc = idle(c);

	if (!rc)
		rc = int_result(c, kvc_send_setbit(c, key, klen, offset, bit),
				&v);
	if (!rc && old)
		*old = (int)v;
	return rc;
}

int kvc_getbit(kvc_conn *c, const void *key, size_t klen, uint64_t offset,
	       int *bit)
{
	int64_t v = 0;
	int rc = idle(c);

	if (!rc)
		rc = int_result(c, kvc_send_getbit(c, key, klen, offset), &v);
	if (!rc && bit)
		*bit = (int)v;
	return rc;
}

int kvc_bitcount(kvc_conn *c, const void *key, size_t klen, int64_t start,
		 int64_t end, unsigned flags, uint64_t *count)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(
			c, kvc_send_bitcount(c, key, klen, start, end, flags),
			count);
}

int kvc_bitpos(kvc_conn *c, const void *key, size_t klen, int bit,
	       int64_t start, const int64_t *end, unsigned flags, int64_t *pos)
{
	int rc = idle(c);

	return rc ? rc
		  : int_result(
			c,
			kvc_send_bitpos(c, key, klen, bit, start, end, flags),
			pos);
}

int kvc_bitop(kvc_conn *c, unsigned op, const void *dst, size_t dlen,
	      const kvc_val *srcs, size_t n, uint64_t *len)
{
	int rc = idle(c);

	return rc ? rc
		  : uint_result(c, kvc_send_bitop(c, op, dst, dlen, srcs, n),
				len);
}

int kvc_txn(kvc_conn *c, const kvc_val *checks, size_t nchecks,
	    const kvc_txn_op *ops, size_t n, kvc_reply **replyp)
{
	kvc_reply *r;
	int rc = idle(c);

	if (rc)
		return rc;
	rc = run(c, kvc_send_txn(c, checks, nchecks, ops, n), &r);
	if (!rc && replyp)
		*replyp = r;
	return rc;
}
