/* fuzz_reply.c - libkvclient's reply reader (libkvclient/reply.c, and
 * conn.c's reading) on any bytes a server could send.
 *
 * The connection is a socketpair: the library's side is set up as
 * kvc_connect would leave it (its fd, not broken), requests are queued
 * with the public kvc_send_* calls and flushed, then the fuzzer writes the
 * reply stream into the other side and shuts it, and kvc_read_reply reads
 * every reply through the real socket code.
 *
 * The first byte holds the number of requests (low 4 bits, plus one) and
 * a small max_reply (bit 4); one byte per request picks its kind (and for
 * MGET, MDEL and EXISTS how many keys, for SCAN keys-only); the rest is
 * the stream.  Besides "no crash", each read must agree with framing
 * worked out here (a whole frame within max_reply: a reply or
 * -KVC_PROTOCOL; a length over it or a cut frame: -KVC_PROTOCOL; nothing
 * left: -KVC_CLOSED), errors stay sticky, a reply's accessors answer for
 * its kind only and hand out bytes inside the received ones, and MGET
 * yields as many values as it asked keys.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "kv_proto.h"
#include "kvc_int.h"

#define MAX_REQS 16

struct req {
	uint8_t op;
	uint8_t n; /* MGET: keys */
};

static const kvc_val keys[8] = {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1},
				{"e", 1}, {"f", 1}, {"g", 1}, {"h", 1}};

/* Queue the request byte b picks; its record in *q. */
static int send_one(kvc_conn *c, uint8_t b, struct req *q)
{
	static const uint8_t ops[] = {
	    KV_OP_HELLO,  KV_OP_PING,	  KV_OP_GET,	KV_OP_PUT,
	    KV_OP_DEL,	  KV_OP_MGET,	  KV_OP_MPUT,	KV_OP_MDEL,
	    KV_OP_EXISTS, KV_OP_SCAN,	  KV_OP_COUNT,	KV_OP_STATS,
	    KV_OP_INCR,	  KV_OP_APPEND,	  KV_OP_EXPIRE, KV_OP_TTL,
	    KV_OP_GETDEL, KV_OP_FLUSHALL, KV_OP_AUTH,	KV_OP_BACKUP};
	unsigned n = (b >> 5) + 1;

	q->op = ops[b % sizeof(ops)];
	q->n = (uint8_t)n;
	switch (q->op) {
	case KV_OP_HELLO: return kvc_send_hello(c);
	case KV_OP_PING:
		return kvc_send_ping(c, b & 1 ? "hi" : NULL, b & 1 ? 2 : 0);
	case KV_OP_GET: return kvc_send_get(c, "k", 1);
	case KV_OP_PUT: return kvc_send_put(c, "k", 1, "v", 1, 0, 0);
	case KV_OP_DEL: return kvc_send_del(c, "k", 1);
	case KV_OP_MGET: return kvc_send_mget(c, keys, n);
	case KV_OP_MPUT: return kvc_send_mput(c, keys, keys, n, 0);
	case KV_OP_MDEL: return kvc_send_mdel(c, keys, n);
	case KV_OP_EXISTS: return kvc_send_exists(c, keys, n);
	case KV_OP_SCAN:
		return kvc_send_scan(c, NULL, NULL, NULL, 100,
				     b & 0x80 ? KVC_SCAN_KEYS_ONLY : 0);
	case KV_OP_COUNT: return kvc_send_count(c, "k", 1);
	case KV_OP_STATS: return kvc_send_stats(c);
	case KV_OP_INCR: return kvc_send_incr(c, "k", 1, 1);
	case KV_OP_APPEND: return kvc_send_append(c, "k", 1, "v", 1);
	case KV_OP_EXPIRE: return kvc_send_expire(c, "k", 1, 1000);
	case KV_OP_TTL: return kvc_send_ttl(c, "k", 1);
	case KV_OP_GETDEL: return kvc_send_getdel(c, "k", 1);
	case KV_OP_FLUSHALL: return kvc_send_flushall(c);
	case KV_OP_AUTH: return kvc_send_auth(c, "pw", 2);
	default: return kvc_send_backup(c, "/tmp/b");
	}
}

/* Handed-out bytes lie inside what was received (NULL: none). */
static void check_val(const kvc_conn *c, kvc_val v)
{
	const uint8_t *p = v.p;

	if (!p) {
		FUZZ_CHECK(v.len == 0);
		return;
	}
	FUZZ_CHECK(p >= c->in.data && v.len <= c->in.len &&
		   p + v.len <= c->in.data + c->in.len);
}

/* Every accessor on a reply: the right ones work, the others refuse. */
static void check_reply(kvc_conn *c, kvc_reply *r, const struct req *q)
{
	int st = kvc_reply_status(r), is_map, is_int, is_val, is_next;
	kvc_val k, v;
	int64_t i;
	uint64_t u;
	unsigned items = 0;

	FUZZ_CHECK(st <= 0 && st > -KVC_CLIENT_STATUS_MIN);
	FUZZ_CHECK(kvc_reply_error(r) != NULL);
	is_map = q->op == KV_OP_HELLO || q->op == KV_OP_STATS;
	is_int = q->op == KV_OP_INCR || q->op == KV_OP_TTL ||
		 q->op == KV_OP_APPEND || q->op == KV_OP_MDEL ||
		 q->op == KV_OP_EXISTS || q->op == KV_OP_COUNT ||
		 q->op == KV_OP_BACKUP;
	is_val =
	    q->op == KV_OP_GET || q->op == KV_OP_GETDEL || q->op == KV_OP_PING;
	is_next = q->op == KV_OP_MGET || q->op == KV_OP_SCAN;
	FUZZ_CHECK(kvc_reply_map(r, &v) == (is_map ? st : -KVC_INVALID));
	if (is_map && !st) {
		check_val(c, v);
		if (kvc_map_str(v, "version", &k) == 0)
			check_val(c, k);
		kvc_map_uint(v, "max_key", &u);
		kvc_map_uint(v, "nope", &u);
	}
	FUZZ_CHECK(kvc_reply_int(r, &i) == (is_int ? st : -KVC_INVALID));
	FUZZ_CHECK(kvc_reply_value(r, &v) == (is_val ? st : -KVC_INVALID));
	if (is_val && !st)
		check_val(c, v);
	FUZZ_CHECK(kvc_reply_cursor(r, &k) == -KVC_INVALID ||
		   q->op == KV_OP_SCAN);
	if (!is_next) {
		FUZZ_CHECK(kvc_reply_next(r, &k, &v) == -KVC_INVALID);
		return;
	}
	while (kvc_reply_next(r, &k, &v) == 0) {
		check_val(c, k);
		check_val(c, v);
		items++;
	}
	FUZZ_CHECK(kvc_reply_next(r, &k, &v) == (st ? st : -KVC_END));
	if (q->op == KV_OP_MGET && !st)
		FUZZ_CHECK(items == q->n);
	if (q->op == KV_OP_SCAN && !st && kvc_reply_cursor(r, &k) == 0)
		check_val(c, k);
}

/* What the next read must give, from the stream's framing: 1 a whole
 * frame (a reply, or -KVC_PROTOCOL if it is malformed), else the error. */
static int expect(const uint8_t *s, size_t n, size_t *at, size_t max)
{
	uint32_t len;

	if (*at == n)
		return -KVC_CLOSED;
	if (n - *at < KV_FRAME_HDR)
		return -KVC_PROTOCOL;
	len = kv_load_be32(s + *at);
	if (len > max || n - *at - KV_FRAME_HDR < len)
		return -KVC_PROTOCOL;
	*at += KV_FRAME_HDR + len;
	return 1;
}

/* Write what the socket takes at once, then end the stream. */
static size_t serve(int fd, const uint8_t *p, size_t n)
{
	size_t done = 0;

	FUZZ_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	while (done < n) {
		ssize_t w = write(fd, p + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	shutdown(fd, SHUT_WR);
	return done;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct req q[MAX_REQS];
	kvc_conn *c;
	kvc_reply *r;
	unsigned nreq;
	size_t at = 0, n;
	int sv[2], rc, sticky = 0;

	if (size < 1 || (size_t)(data[0] & 15) + 2 > size)
		return 0;
	nreq = (data[0] & 15) + 1;
	FUZZ_CHECK(kvc_create(&c) == 0);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	c->fd = sv[0]; /* as kvc_connect leaves it */
	c->broken = 0;
	strcpy(c->peer, "fuzz");
	kvc_set_timeouts(c, 1000, 10000); /* a hang is a finding, not a wait */
	if (data[0] & 16)
		FUZZ_CHECK(kvc_set_max_reply(c, 1024) == 0);
	for (unsigned i = 0; i < nreq; i++)
		FUZZ_CHECK(send_one(c, data[1 + i], &q[i]) == 0);
	FUZZ_CHECK(kvc_pending(c) == nreq);
	FUZZ_CHECK(kvc_flush(c) == 0);
	data += 1 + nreq;
	n = serve(sv[1], data, size - 1 - nreq);
	for (unsigned i = 0; i < nreq; i++) {
		int want = expect(data, n, &at, c->max_reply);

		rc = kvc_read_reply(c, &r);
		if (sticky) {
			FUZZ_CHECK(rc == sticky);
			continue;
		}
		if (want < 0)
			FUZZ_CHECK(rc == want);
		else
			FUZZ_CHECK(rc == 0 || rc == -KVC_PROTOCOL);
		if (rc == 0)
			check_reply(c, r, &q[i]);
		else
			sticky = rc;
	}
	kvc_close(c);
	close(sv[1]);
	return 0;
}
