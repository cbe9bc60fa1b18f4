/* driver_redis.c - kvbench's Redis driver: RESP through hiredis, for
 * redis-server and for kvd's RESP port.
 *
 * --record fields, as YCSB's redis binding: a record is a hash; an insert
 * or an update is one HSET of its fields (the binding's HMSET, which Redis
 * deprecates for the same HSET), a read of all fields HGETALL, of one field
 * HMGET.  --record value: a record is one string (SET, GET).
 *
 * YCSB's scans need keys in order, which Redis does not keep; as YCSB's own
 * binding does, a sorted set indexes the keys (ZADD with every insert of a
 * workload that scans, score 0 so that members sort by their bytes), and a
 * scan is one Lua script, ZRANGEBYLEX then HGETALL (or HMGET, or MGET) of
 * each key, so that it costs one round trip like the other drivers' scans.
 * Workloads without scans keep no index and pay nothing for it; a server
 * without sorted sets or scripts (kvd's RESP port) cannot run them: the
 * setup's SCRIPT LOAD fails and says so.
 *
 * The connection is made blocking, then switched to non-blocking and its
 * REDIS_BLOCK flag cleared, which is how hiredis 0.14 lets a caller drive
 * redisBufferWrite / redisBufferRead from its own event loop without
 * pulling in its async API.
 */
#include <fcntl.h>
#include <limits.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbench.h"
#include "record.h"

static const char scan_script[] =
    "local ks = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', "
    "'LIMIT', 0, tonumber(ARGV[2]))\n"
    "if #ks == 0 then return {} end\n"
    "return redis.call('MGET', unpack(ks))\n";

/* Records of fields: each record's fields, all or ARGV[3]. */
static const char fscan_script[] =
    "local ks = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', "
    "'LIMIT', 0, tonumber(ARGV[2]))\n"
    "local out = {}\n"
    "for i, k in ipairs(ks) do\n"
    "  if ARGV[3] then out[i] = redis.call('HMGET', k, ARGV[3])\n"
    "  else out[i] = redis.call('HGETALL', k) end\n"
    "end\n"
    "return out\n";

/* Set by setup() before any thread connects; read-only afterwards. */
static char script_sha[64];

struct rconn {
	redisContext *c;
	int scans;
	char index[128];
	redisReply *pend[2], *prev[2]; /* replies being read; last handed out */
	unsigned npend, nprev;
	/* records of fields: HSET's arguments, a read's fields */
	unsigned nf;
	const char **argv;
	size_t *argl;
	char (*names)[KB_FIELD_NAME_MAX];
	struct kb_fval *fv;
};

/* AUTH, when a password was given.  A server without one (Redis: "no
 * password is set", "without any password configured") is not an error,
 * as for the kvd driver. */
static int redis_auth(redisContext *c, const struct kb_target *t, char *err,
		      size_t errlen)
{
	redisReply *r;
	int rc = -1;

	if (!t->password)
		return 0;
	r = redisCommand(c, "AUTH %s", t->password);
	if (r && r->type != REDIS_REPLY_ERROR)
		rc = 0;
	else if (r && (strstr(r->str, "no password is set") ||
		       strstr(r->str, "without any password configured")))
		rc = 0;
	else
		snprintf(err, errlen, "%s: AUTH: %s", t->host,
			 r ? r->str : c->errstr);
	freeReplyObject(r);
	return rc;
}

/* host:port, or the Unix socket at host when it is a path. */
static redisContext *open_ctx(const struct kb_target *t, char *err,
			      size_t errlen)
{
	struct timeval tv = {5, 0};
	redisContext *c =
	    t->host[0] == '/'
		? redisConnectUnixWithTimeout(t->host, tv)
		: redisConnectWithTimeout(t->host, (int)t->port, tv);

	if (!c || c->err) {
		snprintf(err, errlen, "%s:%u: %s", t->host, t->port,
			 c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	if (redis_auth(c, t, err, errlen)) {
		redisFree(c);
		return NULL;
	}
	return c;
}

static int redis_setup(const struct kb_target *t, char *err, size_t errlen)
{
	redisContext *c;
	redisReply *r;
	int rc = -1;

	if (!t->scans)
		return 0;
	if (!(c = open_ctx(t, err, errlen)))
		return -1;
	r = redisCommand(c, "SCRIPT LOAD %s",
			 t->fields ? fscan_script : scan_script);
	if (r && r->type == REDIS_REPLY_STRING && r->len < 64) {
		memcpy(script_sha, r->str, r->len + 1);
		rc = 0;
	} else {
		snprintf(err, errlen,
			 "redis: SCRIPT LOAD failed (YCSB's scans need a "
			 "sorted set and Lua): %s",
			 r && r->type == REDIS_REPLY_ERROR ? r->str
							   : c->errstr);
	}
	freeReplyObject(r);
	redisFree(c);
	return rc;
}

static void redis_close(void *c);

/* HSET key field value ... of every field at most. */
static int fields_init(struct rconn *rc, unsigned nf)
{
	rc->nf = nf;
	rc->argv = calloc(2 + 2 * (size_t)nf, sizeof(*rc->argv));
	rc->argl = calloc(2 + 2 * (size_t)nf, sizeof(*rc->argl));
	rc->names = calloc(nf, sizeof(*rc->names));
	rc->fv = calloc(nf, sizeof(*rc->fv));
	if (!rc->argv || !rc->argl || !rc->names || !rc->fv)
		return -1;
	for (unsigned i = 0; i < nf; i++)
		kb_field_name(i, rc->names[i]);
	return 0;
}

static void *redis_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct rconn *rc = calloc(1, sizeof(*rc));
	int fl;

	if (!rc || !(rc->c = open_ctx(t, err, errlen))) {
		free(rc);
		return NULL;
	}
	if (t->fields && fields_init(rc, t->fieldcount)) {
		snprintf(err, errlen, "out of memory");
		redis_close(rc);
		return NULL;
	}
	fl = fcntl(rc->c->fd, F_GETFL);
	fcntl(rc->c->fd, F_SETFL, fl | O_NONBLOCK);
	rc->c->flags &= ~REDIS_BLOCK;
	rc->scans = t->scans;
	snprintf(rc->index, sizeof(rc->index), "%s:index",
		 t->table ? t->table : "kvbench");
	return rc;
}

static int redis_fd(void *c)
{
	return ((struct rconn *)c)->c->fd;
}

static int zadd(struct rconn *rc, const char *key, size_t klen)
{
	const char *argv[4] = {"ZADD", rc->index, "0", key};
	size_t len[4] = {4, strlen(rc->index), 1, klen};

	return redisAppendCommandArgv(rc->c, 4, argv, len);
}

static const char *field_name(struct rconn *rc, unsigned idx, size_t *len)
{
	*len = strlen(rc->names[idx]);
	return rc->names[idx];
}

/* HSET key field value ...: YCSB's insert and update. */
static int send_hset(struct rconn *rc, const struct kb_req *r)
{
	int argc = 2;

	if (r->nfv > rc->nf)
		return -1;
	rc->argv[0] = "HSET", rc->argl[0] = 4;
	rc->argv[1] = r->key, rc->argl[1] = r->klen;
	for (unsigned i = 0; i < r->nfv; i++, argc += 2) {
		rc->argv[argc] = field_name(rc, r->fv[i].idx, &rc->argl[argc]);
		rc->argv[argc + 1] = (const char *)r->fv[i].val;
		rc->argl[argc + 1] = r->fv[i].len;
	}
	if (redisAppendCommandArgv(rc->c, argc, rc->argv, rc->argl))
		return -1;
	return r->kind == REQ_INSERT && rc->scans ? zadd(rc, r->key, r->klen)
						  : 0;
}

/* EVALSHA of the scan script: the index, the first key, the count, and
 * with records of fields the one field read, if not all. */
static int send_scan(struct rconn *rc, const struct kb_req *r)
{
	char from[KB_REQ_KEY_MAX + 2], count[16];
	const char *argv[7];
	size_t len[7];
	int argc = 6;

	if (r->klen > KB_REQ_KEY_MAX)
		return -1;
	from[0] = '[';
	memcpy(from + 1, r->key, r->klen);
	argv[0] = "EVALSHA", len[0] = 7;
	argv[1] = script_sha, len[1] = strlen(script_sha);
	argv[2] = "1", len[2] = 1;
	argv[3] = rc->index, len[3] = strlen(rc->index);
	argv[4] = from, len[4] = r->klen + 1;
	argv[5] = count;
	len[5] = (size_t)snprintf(count, sizeof(count), "%u", r->count);
	if (r->kind == REQ_FSCAN && r->field >= 0 &&
	    (unsigned)r->field < rc->nf) {
		argv[argc] = field_name(rc, (unsigned)r->field, &len[argc]);
		argc++;
	}
	return redisAppendCommandArgv(rc->c, argc, argv, len);
}

static int redis_send(void *c, const struct kb_req *r)
{
	struct rconn *rc = c;
	const char *argv[3];
	size_t len[3];

	switch (r->kind) {
	case REQ_GET:
		argv[0] = "GET", len[0] = 3;
		argv[1] = r->key, len[1] = r->klen;
		return redisAppendCommandArgv(rc->c, 2, argv, len);
	case REQ_PUT:
		argv[0] = "SET", len[0] = 3;
		argv[1] = r->key, len[1] = r->klen;
		argv[2] = (const char *)r->val, len[2] = r->vlen;
		if (redisAppendCommandArgv(rc->c, 3, argv, len))
			return -1;
		return rc->scans ? zadd(rc, r->key, r->klen) : 0;
	case REQ_READ:
		argv[0] = r->field < 0 ? "HGETALL" : "HMGET";
		len[0] = strlen(argv[0]);
		argv[1] = r->key, len[1] = r->klen;
		if (r->field >= 0 && (unsigned)r->field >= rc->nf)
			return -1;
		if (r->field >= 0)
			argv[2] = field_name(rc, (unsigned)r->field, &len[2]);
		return redisAppendCommandArgv(rc->c, r->field < 0 ? 2 : 3, argv,
					      len);
	case REQ_INSERT:
	case REQ_UPDATE: return send_hset(rc, r);
	case REQ_SCAN:
	case REQ_FSCAN: return send_scan(rc, r);
	case REQ_IXFIND:
	case REQ_IXRANGE:
	case REQ_IXINSERT: break; /* mongodb and postgres only (kvbench.c) */
	}
	return -1;
}

static int redis_flush(void *c)
{
	struct rconn *rc = c;
	int done = 0;

	if (redisBufferWrite(rc->c, &done) != REDIS_OK)
		return -1;
	return done ? 0 : 1;
}

static int redis_input(void *c)
{
	return redisBufferRead(((struct rconn *)c)->c) == REDIS_OK ? 0 : -1;
}

static void release(redisReply **v, unsigned *n)
{
	while (*n)
		freeReplyObject(v[--*n]);
}

/* HGETALL's pairs, or HMGET's one value, as the record's fields. */
static void judge_read(struct rconn *rc, const redisReply *r, int field,
		       struct kb_reply *out)
{
	if (r->type != REDIS_REPLY_ARRAY) {
		out->status = REPLY_ERROR;
		out->msg = "not an array";
		return;
	}
	if (field >= 0) {
		if (r->elements != 1 ||
		    r->element[0]->type != REDIS_REPLY_STRING) {
			out->status = REPLY_NOT_FOUND;
			return;
		}
		rc->fv[0] = (struct kb_fval){
		    (unsigned)field, (const uint8_t *)r->element[0]->str,
		    r->element[0]->len};
		out->nfields = 1;
	}
	for (size_t i = 0;
	     field < 0 && i + 1 < r->elements && out->nfields < rc->nf;
	     i += 2) {
		const redisReply *n = r->element[i], *v = r->element[i + 1];
		struct kb_fval *fv = &rc->fv[out->nfields++];

		if (rec_field_index(n->str, n->len, &fv->idx))
			fv->idx = UINT_MAX; /* not one of ours: wrong */
		fv->val = (const uint8_t *)v->str;
		fv->len = v->len;
	}
	if (!r->elements)
		out->status = REPLY_NOT_FOUND; /* no such hash */
	out->fields = rc->fv;
}

/* A scan's records: the keys found that had a value (MGET), or fields. */
static unsigned scan_items(const redisReply *r)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type == REDIS_REPLY_ARRAY)
			n += e->elements &&
			     e->element[0]->type != REDIS_REPLY_NIL;
		else
			n += e->type != REDIS_REPLY_NIL;
	}
	return n;
}

static void judge(struct rconn *rc, const redisReply *r, enum kb_req_kind kind,
		  int field, struct kb_reply *out)
{
	if (r->type == REDIS_REPLY_ERROR) {
		out->status = REPLY_ERROR;
		out->msg = r->str;
	} else if (kind == REQ_GET && r->type == REDIS_REPLY_NIL) {
		out->status = REPLY_NOT_FOUND;
	} else if (kind == REQ_GET) {
		out->val = (const uint8_t *)r->str;
		out->vlen = r->len;
	} else if (kind == REQ_READ) {
		judge_read(rc, r, field, out);
	} else if ((kind == REQ_SCAN || kind == REQ_FSCAN) &&
		   r->type == REDIS_REPLY_ARRAY) {
		out->items = scan_items(r);
	}
}

static int redis_reply(void *c, enum kb_req_kind kind, int field,
		       struct kb_reply *out)
{
	struct rconn *rc = c;
	unsigned need =
	    (kind == REQ_PUT || kind == REQ_INSERT) && rc->scans ? 2 : 1;

	release(rc->prev, &rc->nprev);
	while (rc->npend < need) {
		void *r = NULL;

		if (redisGetReplyFromReader(rc->c, &r) != REDIS_OK)
			return -1;
		if (!r)
			return 0;
		rc->pend[rc->npend++] = r;
	}
	out->status = REPLY_OK;
	for (unsigned i = need; i-- > 0;)
		judge(rc, rc->pend[i], kind, field, out);
	memcpy(rc->prev, rc->pend, sizeof(rc->pend));
	rc->nprev = rc->npend;
	rc->npend = 0;
	return 1;
}

static const char *redis_errmsg(void *c)
{
	return ((struct rconn *)c)->c->errstr;
}

static void redis_close(void *c)
{
	struct rconn *rc = c;

	release(rc->prev, &rc->nprev);
	release(rc->pend, &rc->npend);
	redisFree(rc->c);
	free(rc->argv);
	free(rc->argl);
	free(rc->names);
	free(rc->fv);
	free(rc);
}

const struct kb_driver driver_redis = {
    .name = "redis",
    .default_port = 6379,
    .fields = 1,
    .fields_ops = "HSET, HGETALL, HMGET",
    .setup = redis_setup,
    .connect = redis_connect,
    .fd = redis_fd,
    .send = redis_send,
    .flush = redis_flush,
    .input = redis_input,
    .reply = redis_reply,
    .errmsg = redis_errmsg,
    .close = redis_close,
};
