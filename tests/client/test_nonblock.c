/* test_nonblock.c - the non-blocking interface driven by a poll() loop, as
 * an event-driven program would: kvc_fd, kvc_want_write, kvc_flush,
 * kvc_consume_input and kvc_read_reply returning -KVC_AGAIN; requests are
 * queued while replies are being consumed, 10,000 of them in all.
 */
#include <poll.h>
#include <string.h>

#include "kvctest.h"

#define N 10000
#define WINDOW 500

/* In each block of 100 requests, 50 PUTs of nb<j>, then 50 GETs of the
 * same keys (few PUT-to-GET turns: see test_pipeline.c). */
#define HALF 50

static int is_put(int j)
{
	return j % (2 * HALF) < HALF;
}

static void queue_one(kvc_conn *c, int j)
{
	char k[32], v[64];
	int kn = snprintf(k, sizeof(k), "nb%05d", is_put(j) ? j : j - HALF);
	int vn = snprintf(v, sizeof(v), "value-%d", j);

	if (is_put(j))
		CHECK_RC(kvc_send_put(c, k, (size_t)kn, v, (size_t)vn, 0, 0),
			 0);
	else
		CHECK_RC(kvc_send_get(c, k, (size_t)kn), 0);
}

static void check_reply(kvc_reply *r, int j)
{
	char want[64];
	int n = snprintf(want, sizeof(want), "value-%d", j - HALF);
	kvc_val v;

	if (is_put(j)) {
		CHECK_RC(kvc_reply_status(r), 0);
		return;
	}
	CHECK_RC(kvc_reply_value(r, &v), 0);
	CHECK(v.len == (size_t)n && !memcmp(v.p, want, v.len));
}

static void loop(kvc_conn *c)
{
	int sent = 0, got = 0, agains = 0;
	uint64_t deadline = kvt_now_ms() + 60000;
	kvc_reply *r;

	CHECK_RC(kvc_set_nonblock(c, 1), 0);
	/* Nothing queued, nothing buffered: nothing to read yet. */
	CHECK_RC(kvc_send_ping(c, NULL, 0), 0);
	CHECK_RC(kvc_read_reply(c, &r), -KVC_AGAIN); /* not even written */
	CHECK(kvc_want_write(c));
	while (kvc_pending(c)) {
		struct pollfd p = {kvc_fd(c), POLLIN, 0};

		if (kvc_want_write(c))
			p.events |= POLLOUT;
		CHECK(poll(&p, 1, 5000) == 1);
		if (p.revents & POLLOUT)
			CHECK(kvc_flush(c) == 0 || kvc_want_write(c));
		if (p.revents & POLLIN)
			CHECK_RC(kvc_consume_input(c), 0);
		if (kvc_read_reply(c, &r) == 0)
			break;
	}
	while (got < N) {
		struct pollfd p = {kvc_fd(c), POLLIN, 0};
		int rc;

		CHECK(kvt_now_ms() < deadline);
		while (sent < N && sent - got < WINDOW)
			queue_one(c, sent++);
		if (kvc_want_write(c))
			p.events |= POLLOUT;
		CHECK(poll(&p, 1, 5000) == 1);
		if (p.revents & POLLOUT) {
			rc = kvc_flush(c);
			CHECK(rc == 0 || rc == -KVC_AGAIN);
		}
		if (p.revents & POLLIN)
			CHECK_RC(kvc_consume_input(c), 0);
		while ((rc = kvc_read_reply(c, &r)) == 0)
			check_reply(r, got++);
		/* Nothing pending once every request sent so far is
		 * answered (not only at the end: the window can drain). */
		CHECK_RC(rc, got == sent ? -KVC_INVALID : -KVC_AGAIN);
		agains++;
	}
	CHECK(agains > 1);
	CHECK(kvc_pending(c) == 0);
	/* Synchronous calls still wait in non-blocking mode. */
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), 0);
}

/* The server closes: consume_input says so, buffered replies still come. */
static void closed(struct kvd_proc *k)
{
	kvc_conn *c = kvt_connect(k->port, 5000);
	kvc_reply *r;
	int rc = 0;

	CHECK_RC(kvc_set_nonblock(c, 1), 0);
	CHECK_RC(kvc_send_ping(c, "last", 4), 0);
	CHECK_RC(kvc_flush(c), 0);
	{
		struct pollfd p = {kvc_fd(c), POLLIN, 0};

		CHECK(poll(&p, 1, 5000) == 1); /* the reply is here */
	}
	CHECK_RC(kvc_consume_input(c), 0);
	kvd_stop(k);
	for (int i = 0; i < 500 && (rc = kvc_consume_input(c)) == 0; i++) {
		struct pollfd p = {kvc_fd(c), POLLIN, 0};

		poll(&p, 1, 10);
	}
	CHECK_RC(rc, -KVC_CLOSED);
	CHECK(kvc_fd(c) == -1);
	CHECK_RC(kvc_read_reply(c, &r), 0); /* answered before the close */
	CHECK_RC(kvc_reply_status(r), 0);
	CHECK_RC(kvc_send_ping(c, NULL, 0), 0);
	CHECK_RC(kvc_read_reply(c, &r), -KVC_CLOSED);
	CHECK_RC(kvc_flush(c), -KVC_CLOSED);
	kvc_close(c);
}

int main(void)
{
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, NULL);
	c = kvt_connect(k.port, 10000);
	loop(c);
	kvc_close(c);
	closed(&k);
	return 0;
}
