/* test_pipeline.c - deep pipelines: 10,000 mixed requests answered in order,
 * and a pipeline whose replies far exceed what the server buffers for a
 * client that does not read (kvd --max-output 64k), which must not
 * deadlock: the client takes in replies while it is still writing.
 */
#include <string.h>

#include "kvctest.h"

#define N 10000

static void mixed(kvc_conn *c)
{
	char k[32], v[32];
	kvc_reply *r;
	int64_t i;
	kvc_val got;

	/* PUT k, GET k, INCR ctr for each j: own writes are read back. */
	for (int j = 0; j < N; j++) {
		int kn = snprintf(k, sizeof(k), "p%05d", j);
		int vn = snprintf(v, sizeof(v), "v%d", j);

		CHECK_RC(kvc_send_put(c, k, (size_t)kn, v, (size_t)vn, 0, 0),
			 0);
		CHECK_RC(kvc_send_get(c, k, (size_t)kn), 0);
		CHECK_RC(kvc_send_incr(c, "ctr", 3, 1), 0);
	}
	CHECK(kvc_pending(c) == 3 * N);
	for (int j = 0; j < N; j++) {
		int vn = snprintf(v, sizeof(v), "v%d", j);

		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_status(r), 0);
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_value(r, &got), 0);
		CHECK(got.len == (size_t)vn && !memcmp(got.p, v, got.len));
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
