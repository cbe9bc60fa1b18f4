/* fuzz_http.c - the metrics endpoint's HTTP request parser
 * (kvd_http_input in kvd/ops/metrics.c) on any bytes.
 *
 * metrics.c is linked with the real auth.c (the password check), stats.c
 * and log.c; the connection, its io thread and the server are zeroed
 * structures with no io thread and no shard, so /metrics renders only the
 * server-wide series.  Replies land in the connection's output buffer,
 * through conn.c's own kvd_reply_append (linked; the linker drops what of
 * conn.c is not reached).
 *
 * The first byte picks the case: bit 0 sets requirepass; bit 1 makes the
 * rest the credentials ("user:password", any bytes) of a well-formed
 * request built here with their base64, else the rest is the request as
 * received.  Besides "no crash", the answer must be: nothing (waiting for
 * more) only for an incomplete header under the 8 KiB cap; otherwise one
 * response whose Content-Length is its body's, the connection closing;
 * 200 only for GET /metrics, and with a password set only once AUTH
 * succeeded; and a built request answered 200 exactly when the password
 * after the first ':' is right.
 */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "ops/stats.h"
#include "fuzz.h"
#include "kvd.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "store.h"

#define PASSWORD "pa:ss w\xc3\xa9rd"
#define HTTP_MAX_REQUEST 8192 /* metrics.c's */

/* No shard: never called. */
int kvd_reader_stat(struct kvd_reader *r, unsigned i, struct kvd_shard_stat *s)
{
	(void)r;
	(void)i;
	(void)s;
	abort();
}

struct kvd_commit_stats *kvd_commit_stats(struct kvd_commit *com,
					  unsigned shard)
{
	(void)com;
	(void)shard;
	abort();
}

int kvd_commit_failed(struct kvd_commit *com, unsigned shard)
{
	(void)com;
	(void)shard;
	abort();
}

/* repl.c's, for /metrics and STATS: a primary with no replica. */
void kvd_repl_stat(struct kvd_server *s, struct kvd_repl_stat *rs)
{
	(void)s;
	memset(rs, 0, sizeof(*rs));
}

static struct kvd_config cfg;
static struct kvd_server srv = {.cfg = &cfg};
static struct kvd_io *io;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* kvd_io is large (its counters): on the heap, zeroed. */
	io = calloc(1, sizeof(*io));
	FUZZ_CHECK(io);
	io->srv = &srv;
	kvd_log_set_level(KVD_LOG_ERROR); /* failed AUTHs would warn */
	return 0;
}

/* The status code of a response, after checking its framing; a response
 * to HEAD has GET's headers and no body. */
static int check_response(const struct kv_buf *r, int head)
{
	const char *s = (const char *)r->data, *hend, *cl;
	unsigned long len;
	int code;

	FUZZ_CHECK(r->len > 12 && !memcmp(s, "HTTP/1.1 ", 9));
	code = atoi(s + 9);
	FUZZ_CHECK(code >= 200 && code <= 599);
	hend = memmem(s, r->len, "\r\n\r\n", 4);
	FUZZ_CHECK(hend);
	cl = memmem(s, (size_t)(hend - s), "\r\nContent-Length: ", 18);
	FUZZ_CHECK(cl);
	len = strtoul(cl + 18, NULL, 10);
	FUZZ_CHECK(head ? r->len == (size_t)(hend + 4 - s)
			: len == r->len - (size_t)(hend + 4 - s));
	FUZZ_CHECK(
	    memmem(s, (size_t)(hend + 2 - s), "\r\nConnection: close\r\n", 21));
	return code;
}

static void b64(struct kv_buf *b, const uint8_t *p, size_t n)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrst"
				"uvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		char q[4];

		v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
		v |= i + 2 < n ? p[i + 2] : 0;
		q[0] = t[v >> 18];
		q[1] = t[v >> 12 & 63];
		q[2] = i + 1 < n ? t[v >> 6 & 63] : '=';
		q[3] = i + 2 < n ? t[v & 63] : '=';
		kv_buf_append(b, q, 4);
	}
}

/* Whether the credentials carry the password after their first ':'. */
static int right_password(const uint8_t *p, size_t n)
{
	const uint8_t *colon = memchr(p, ':', n);
	size_t want = strlen(PASSWORD);

	if (!colon)
		return 0;
	colon++;
	return (size_t)(p + n - colon) == want &&
	       !memcmp(colon, PASSWORD, want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
				   "Authorization: Basic ";
	struct kvd_conn c = {.io = io};
	struct kv_buf req = {0};
	size_t used;
	int code, built, is_head;

	if (size < 1)
		return 0;
	strcpy(cfg.requirepass, data[0] & 1 ? PASSWORD : "");
	built = data[0] & 2;
	if (built) {
		kv_buf_append(&req, head, sizeof(head) - 1);
		b64(&req, data + 1, size - 1);
		kv_buf_append(&req, "\r\n\r\n", 4);
	} else {
		kv_buf_append(&req, data + 1, size - 1);
	}
	FUZZ_CHECK(!req.err);
	if (!req.len)
		goto out; /* kvd calls the parser once bytes came */
	used = kvd_http_input(&c, req.data, req.len);
	if (used == 0) {
		FUZZ_CHECK(c.out.len == 0 && !(c.flags & CONN_CLOSING));
		FUZZ_CHECK(req.len < HTTP_MAX_REQUEST);
		FUZZ_CHECK(!memmem(req.data, req.len, "\r\n\r\n", 4));
		goto out;
	}
	FUZZ_CHECK(used == req.len && (c.flags & CONN_CLOSING));
	is_head = req.len >= 5 && !memcmp(req.data, "HEAD ", 5);
	code = check_response(&c.out, is_head);
	if (code == 200 && is_head) {
		FUZZ_CHECK(req.len >= 13 &&
			   !memcmp(req.data, "HEAD /metrics", 13));
		FUZZ_CHECK(!cfg.requirepass[0] || (c.flags & CONN_AUTHED));
	} else if (code == 200) {
		FUZZ_CHECK(req.len >= 13 &&
			   !memcmp(req.data, "GET /metrics", 12));
		FUZZ_CHECK(!cfg.requirepass[0] || (c.flags & CONN_AUTHED));
		FUZZ_CHECK(
		    memmem(c.out.data, c.out.len, "\nkvd_uptime_seconds ", 20));
	}
	if (built && cfg.requirepass[0])
		FUZZ_CHECK((code == 200) ==
			   (right_password(data + 1, size - 1) &&
			    size - 1 <= HTTP_MAX_REQUEST));
	else if (built)
		FUZZ_CHECK(code == 200);
out:
	kv_buf_free(&req);
	kv_buf_free(&c.out);
	return 0;
}
