/* test_pipeline.c - deep pipelines: 10,000 mixed requests answered in order,
 * and a pipeline whose replies far exceed what the server buffers for a
 * client that does not read (kvd --max-output 64k), which must not
 * deadlock: the client takes in replies while it is still writing.
 */
#include <string.h>

#include "kvctest.h"

#define N 10000

/* Blocks of BLOCK PUTs, then GETs of the same keys, then INCRs: 10,000
 * requests in one pipeline, answered in order, own writes read back.  (kvd
 * holds a connection's reads until its earlier writes are committed, so
 * the number of PUT-to-GET turns, not of requests, sets the time in sync
 * mode: blocks keep it small.) */
#define BLOCK 500

static void queue_block(kvc_conn *c, int b)
{
	char k[32], v[32];

	for (int j = b * BLOCK; j < (b + 1) * BLOCK; j++) {
		int kn = snprintf(k, sizeof(k), "p%05d", j);
		int vn = snprintf(v, sizeof(v), "v%d", j);

		CHECK_RC(kvc_send_put(c, k, (size_t)kn, v, (size_t)vn, 0, 0),
			 0);
	}
	for (int j = b * BLOCK; j < (b + 1) * BLOCK; j++) {
		int kn = snprintf(k, sizeof(k), "p%05d", j);

		CHECK_RC(kvc_send_get(c, k, (size_t)kn), 0);
	}
}

static void read_block(kvc_conn *c, int b)
{
	kvc_reply *r;
	kvc_val got;
	char v[32];

	for (int j = 0; j < BLOCK; j++) {
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_status(r), 0);
	}
	for (int j = b * BLOCK; j < (b + 1) * BLOCK; j++) {
		int vn = snprintf(v, sizeof(v), "v%d", j);

		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_value(r, &got), 0);
		CHECK(got.len == (size_t)vn && !memcmp(got.p, v, got.len));
	}
}

static void mixed(kvc_conn *c)
{
	int blocks = (N - N / 5) / (2 * BLOCK);
	kvc_reply *r;
	int64_t i;

	for (int b = 0; b < blocks; b++)
		queue_block(c, b);
	for (int j = 0; j < N / 5; j++)
		CHECK_RC(kvc_send_incr(c, "ctr", 3, 1), 0);
	CHECK(kvc_pending(c) == N);
	for (int b = 0; b < blocks; b++)
		read_block(c, b);
	for (int j = 0; j < N / 5; j++) {
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_int(r, &i), 0);
		CHECK(i == j + 1);
	}
	CHECK(kvc_pending(c) == 0);
}

static void big_replies(kvc_conn *c)
{
	static char val[4096];
	kvc_reply *r;
	kvc_val got;

	memset(val, 'x', sizeof(val));
	CHECK_RC(kvc_put(c, "big", 3, val, sizeof(val), 0, 0), 0);
	/* 40 MB of replies to 10,000 small requests, all queued first. */
	for (int j = 0; j < N; j++)
		CHECK_RC(kvc_send_get(c, "big", 3), 0);
	CHECK_RC(kvc_flush(c), 0);
	for (int j = 0; j < N; j++) {
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_value(r, &got), 0);
		CHECK(got.len == sizeof(val) && !memcmp(got.p, val, got.len));
	}
}

int main(void)
{
	static const char *const args[] = {"--max-output", "64k", NULL};
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, args);
	c = kvt_connect(k.port, 20000);
	mixed(c);
	big_replies(c);
	kvc_close(c);
	kvd_stop(&k);
	return 0;
}
