/* driver_redis.c - kvbench's Redis driver: RESP through hiredis, for
 * redis-server and for kvd's RESP port.
 *
 * A record is one string value (SET/GET), as in the other drivers.  YCSB's
 * scans need keys in order, which Redis does not keep; as YCSB's own Redis
 * binding does, a sorted set indexes the keys (ZADD on every write of a
 * workload that scans, score 0 so that members sort by their bytes), and a
 * scan is one Lua script, ZRANGEBYLEX then MGET, so that it costs one round
 * trip like the other drivers' scans.  Workloads without scans keep no
 * index and pay nothing for it.
 *
 * The connection is made blocking, then switched to non-blocking and its
 * REDIS_BLOCK flag cleared, which is how hiredis 0.14 lets a caller drive
 * redisBufferWrite / redisBufferRead from its own event loop without
 * pulling in its async API.
 */
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbench.h"

static const char scan_script[] =
    "local ks = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', "
    "'LIMIT', 0, tonumber(ARGV[2]))\n"
    "if #ks == 0 then return {} end\n"
    "return redis.call('MGET', unpack(ks))\n";

/* Set by setup() before any thread connects; read-only afterwards. */
static char script_sha[64];

struct rconn {
	redisContext *c;
	int scans;
	char index[128];
	redisReply *pend[2], *prev[2]; /* replies being read; last handed out */
	unsigned npend, nprev;
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
	r = redisCommand(c, "SCRIPT LOAD %s", scan_script);
	if (r && r->type == REDIS_REPLY_STRING && r->len < 64) {
		memcpy(script_sha, r->str, r->len + 1);
		rc = 0;
	} else {
		snprintf(err, errlen, "redis: SCRIPT LOAD failed: %s",
			 r && r->type == REDIS_REPLY_ERROR ? r->str
							   : c->errstr);
	}
	freeReplyObject(r);
	redisFree(c);
	return rc;
}

static void *redis_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct rconn *rc = calloc(1, sizeof(*rc));
	int fl;

	if (!rc || !(rc->c = open_ctx(t, err, errlen))) {
		free(rc);
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

static int redis_send(void *c, const struct kb_req *r)
{
	struct rconn *rc = c;
	char from[KB_REQ_KEY_MAX + 2], count[16];
	const char *argv[6];
	size_t len[6];

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
		if (!rc->scans)
			return 0;
		argv[0] = "ZADD", len[0] = 4;
		argv[1] = rc->index, len[1] = strlen(rc->index);
		argv[2] = "0", len[2] = 1;
		argv[3] = r->key, len[3] = r->klen;
		return redisAppendCommandArgv(rc->c, 4, argv, len);
	case REQ_SCAN:
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
		return redisAppendCommandArgv(rc->c, 6, argv, len);
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

static void judge(const redisReply *r, enum kb_req_kind kind,
		  struct kb_reply *out)
{
	if (r->type == REDIS_REPLY_ERROR) {
		out->status = REPLY_ERROR;
		out->msg = r->str;
	} else if (kind == REQ_GET && r->type == REDIS_REPLY_NIL) {
		out->status = REPLY_NOT_FOUND;
	} else if (kind == REQ_GET) {
		out->val = (const uint8_t *)r->str;
		out->vlen = r->len;
	} else if (kind == REQ_SCAN && r->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i < r->elements; i++)
			out->items += r->element[i]->type != REDIS_REPLY_NIL;
	}
}

static int redis_reply(void *c, enum kb_req_kind kind, struct kb_reply *out)
{
	struct rconn *rc = c;
	unsigned need = kind == REQ_PUT && rc->scans ? 2 : 1;

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
		judge(rc->pend[i], kind, out);
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
	free(rc);
}

const struct kb_driver driver_redis = {
    .name = "redis",
    .default_port = 6379,
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
