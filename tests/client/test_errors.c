/* test_errors.c - every failure libkvclient can be made to see: a refused
 * connection, a connect that hangs, a server that never answers, one that
 * closes, garbled and truncated replies from a scripted fake server, a
 * reply frame over the limit, a kvd killed in the middle of a pipeline,
 * and a request over the server's frame limit.  None may crash or hang:
 * each ends in its status, within its timeout, and the sticky ones stay.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvctest.h"

static kvc_conn *conn_to(unsigned port, int io_ms)
{
	return kvt_connect(port, io_ms);
}

static void test_refused(void)
{
	kvc_conn *c;
	unsigned port;
	char want[64];
	int fds[8], n;

	/* A port nobody listens on: bind one, then close it. */
	hung_listener(&port, fds, &n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	CHECK_RC(kvc_create(&c), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", port), -KVC_CONNECT);
	snprintf(want, sizeof(want), "127.0.0.1:%u", port);
	CHECK(strstr(kvc_errmsg(c), want));
	CHECK(strstr(kvc_errmsg(c), "refused"));
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CLOSED);
	kvc_close(c);
}

static void test_connect_timeout(void)
{
	uint64_t t0;
	kvc_conn *c;
	unsigned port;
	int fds[8], n;

	hung_listener(&port, fds, &n);
	CHECK_RC(kvc_create(&c), 0);
	CHECK_RC(kvc_set_timeouts(c, 300, 0), 0);
	t0 = kvt_now_ms();
	CHECK_RC(kvc_connect(c, "127.0.0.1", port), -KVC_TIMEOUT);
	CHECK(kvt_now_ms() - t0 >= 290 && kvt_now_ms() - t0 < 3000);
	CHECK(strstr(kvc_errmsg(c), "timed out"));
	kvc_close(c);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* A server that takes the request and never answers. */
static void test_io_timeout(void)
{
	static const struct fake_step steps[] = {{1, NULL, 0, 0}};
	struct fake f;
	uint64_t t0;
	kvc_conn *c;

	fake_start(&f, steps, 1, 1);
	c = conn_to(f.port, 300);
	t0 = kvt_now_ms();
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_TIMEOUT);
	CHECK(kvt_now_ms() - t0 >= 290 && kvt_now_ms() - t0 < 3000);
	CHECK(strstr(kvc_errmsg(c), "300 ms"));
	CHECK(kvc_fd(c) == -1);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_TIMEOUT); /* sticky */
	CHECK_RC(kvc_send_get(c, "k", 1), -KVC_TIMEOUT);
	kvc_close(c);
	fake_stop(&f);
}

static void test_closed(void)
{
	static const struct fake_step at_once[] = {{0, NULL, 0, 0}};
	static const struct fake_step after_request[] = {{1, NULL, 0, 0}};
	struct fake f;
	kvc_conn *c;

	fake_start(&f, at_once, 1, 0);
	c = conn_to(f.port, 5000);
	usleep(50000);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CLOSED);
	CHECK(strstr(kvc_errmsg(c), "closed"));
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CLOSED);
	kvc_close(c);
	fake_stop(&f);

	fake_start(&f, after_request, 1, 0);
	c = conn_to(f.port, 5000);
	CHECK_RC(kvc_get(c, "k", 1, NULL), -KVC_CLOSED);
	kvc_close(c);
	fake_stop(&f);
}

enum call { PING, GET, PUT, MGET2, SCAN, STATS };

static int do_call(kvc_conn *c, enum call what)
{
	kvc_val keys[2] = {{"a", 1}, {"b", 1}}, vals[2], v;
	kvc_scan *s;
	int rc;

	switch (what) {
	case PING: return kvc_ping(c, NULL, 0, NULL);
	case GET: return kvc_get(c, "k", 1, &v);
	case PUT: return kvc_put(c, "k", 1, "v", 1, 0, 0);
	case MGET2: return kvc_mget(c, keys, 2, vals);
	case SCAN:
		CHECK_RC(kvc_scan_open(c, &s, NULL, NULL, NULL, 10, 0), 0);
		rc = kvc_scan_next(s, &v, &v);
		kvc_scan_close(s);
		return rc;
	default: return kvc_stats(c, &v);
	}
}

/* The fake answers the first request with these bytes (kept open, so the
 * failure comes from the bytes, not from a close). */
static void expect(const void *reply, size_t len, enum call what, int want)
{
	struct fake_step steps[] = {{1, reply, len, 0}};
	struct fake f;
	kvc_conn *c;

	fake_start(&f, steps, 1, 1);
	c = conn_to(f.port, 400);
	CHECK_RC(do_call(c, what), want);
	if (want == -KVC_PROTOCOL) {
		CHECK(kvc_fd(c) == -1);
		CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_PROTOCOL);
	}
	kvc_close(c);
	fake_stop(&f);
}

#define EXPECT(bytes, what, want) expect(bytes, sizeof(bytes) - 1, what, want)

static void test_garbage(void)
{
	static uint8_t bomb[4 + 3 + 40 + 1];

	/* well formed, for contrast */
	EXPECT("\0\0\0\2\x91\x00", PING, 0);
	EXPECT("\0\0\0\2\x91\x01", GET, -KVC_NOT_FOUND);
	EXPECT("\0\0\0\4\x92\x0c\xa1x", PUT, -KVC_BAD_ARGS);
	EXPECT("\0\0\0\2\x91\x1e", PING, -30); /* a status from the future */
	EXPECT("\0\0\0\x17\x92\x17\xb4too many connections", PING,
	       -KVC_TOO_MANY_CONNS);
	/* garbled */
	EXPECT("\0\0\0\0", PING, -KVC_PROTOCOL);	  /* empty body */
	EXPECT("\0\0\0\1\x05", PING, -KVC_PROTOCOL);	  /* not an array */
	EXPECT("\0\0\0\1\xc1", PING, -KVC_PROTOCOL);	  /* never-used byte */
	EXPECT("\0\0\0\1\x90", PING, -KVC_PROTOCOL);	  /* empty array */
	EXPECT("\0\0\0\3\x91\xa1x", PING, -KVC_PROTOCOL); /* status a string */
	EXPECT("\0\0\0\2\x91\x40", PING, -KVC_PROTOCOL);  /* status 64 */
	EXPECT("\0\0\0\2\x91\x00", GET, -KVC_PROTOCOL);	  /* no value */
	EXPECT("\0\0\0\3\x92\x00\x05", GET, -KVC_PROTOCOL);  /* int value */
	EXPECT("\0\0\0\4\x92\x00\xa1x", PUT, -KVC_PROTOCOL); /* extra item */
	EXPECT("\0\0\0\3\x91\x00\x00", PUT, -KVC_PROTOCOL);  /* trailing byte */
	EXPECT("\0\0\0\4\x92\x00\xc4\x01", GET,
	       -KVC_PROTOCOL); /* bin past end */
	EXPECT("\0\0\0\6\x92\x00\xc6\xff\xff\xff", GET, -KVC_PROTOCOL);
	EXPECT("\0\0\0\4\x92\x00\xc4\x00", MGET2, -KVC_PROTOCOL); /* 1 of 2 */
	EXPECT("\0\0\0\6\x93\x00\x91\xa1k\xc0", SCAN, -KVC_PROTOCOL); /* odd */
	EXPECT("\0\0\0\5\x93\x00\x90\xc0\x00", SCAN, -KVC_PROTOCOL);
	EXPECT("\0\0\0\4\x93\x0c\xa1x\x00", PING, -KVC_PROTOCOL); /* 3 items */
	EXPECT("\0\0\0\3\x92\x00\x05", STATS, -KVC_PROTOCOL); /* not a map */
	/* a nesting bomb inside a STATS map */
	memcpy(bomb, "\0\0\0\x2c\x92\x00\x81", 7);
	bomb[7] = 0xa1;
	bomb[8] = 'a';
	memset(bomb + 9, 0x91, 38);
	bomb[47] = 0xc0;
	expect(bomb, sizeof(bomb), STATS, -KVC_PROTOCOL);
}

static void test_truncated_and_oversize(void)
{
	static const struct fake_step cut[] = {{1, "\0\0\0\x64\x92\x00", 6, 0}};
	static const struct fake_step huge[] = {
	    {1, "\xff\xff\xff\xff\x91", 5, 0}};
	static const struct fake_step two_mib[] = {{1, "\0\x20\0\0\x91", 5, 0}};
	struct fake f;
	uint64_t t0;
	kvc_conn *c;

	/* 100 bytes announced, 2 sent, then closed */
	fake_start(&f, cut, 1, 0);
	c = conn_to(f.port, 2000);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_PROTOCOL);
	CHECK(strstr(kvc_errmsg(c), "middle"));
	kvc_close(c);
	fake_stop(&f);
	/* the same, but the connection stays open: the timeout ends it */
	fake_start(&f, cut, 1, 1);
	c = conn_to(f.port, 300);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_TIMEOUT);
	kvc_close(c);
	fake_stop(&f);
	/* 4 GiB announced: refused at once, before any allocation */
	fake_start(&f, huge, 1, 1);
	c = conn_to(f.port, 5000);
	t0 = kvt_now_ms();
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_PROTOCOL);
	CHECK(kvt_now_ms() - t0 < 2000);
	CHECK(strstr(kvc_errmsg(c), "limit"));
	kvc_close(c);
	fake_stop(&f);
	/* 2 MiB against a 1 MiB limit */
	fake_start(&f, two_mib, 1, 1);
	c = conn_to(f.port, 5000);
	CHECK_RC(kvc_set_max_reply(c, 1 << 20), 0);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_PROTOCOL);
	kvc_close(c);
	fake_stop(&f);
}

/* kvd dies with replies still owed. */
static void test_killed(void)
{
	struct kvd_proc k;
	kvc_reply *r;
	kvc_conn *c;
	int rc = 0, got = 0;

	static char val[65536];

	/* 650 MB of replies: far more than the socket buffers hold. */
	kvd_start(&k, NULL);
	c = conn_to(k.port, 5000);
	CHECK_RC(kvc_put(c, "k", 1, val, sizeof(val), 0, 0), 0);
	for (int j = 0; j < 10000; j++)
		CHECK_RC(kvc_send_get(c, "k", 1), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	kvd_kill(&k);
	while ((rc = kvc_read_reply(c, &r)) == 0)
		got++;
	CHECK(rc == -KVC_CLOSED || rc == -KVC_PROTOCOL);
	CHECK(got < 9999);
	CHECK_RC(kvc_read_reply(c, &r), rc);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), rc);
	kvc_close(c);
}

/* A request over kvd's frame limit: FRAME_TOO_LARGE, then kvd closes. */
static void test_frame_too_large(void)
{
	static const char *const args[] = {"--max-frame-size", "1024",
					   "--max-value-size", "256", NULL};
	static char big[4096];
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, args);
	c = conn_to(k.port, 5000);
	CHECK_RC(kvc_put(c, "k", 1, big, sizeof(big), 0, 0),
		 -KVC_FRAME_TOO_LARGE);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CLOSED);
	kvc_close(c);
	kvd_stop(&k);
}

/* A Unix socket path: a child process answers one PING. */
static void test_unix_socket(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	uint8_t req[64];
	kvc_conn *c;
	int lfd, status;
	pid_t pid;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "/tmp/kvctest-%d.sock",
		 (int)getpid());
	unlink(sun.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(lfd >= 0);
	CHECK(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	CHECK(listen(lfd, 1) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = accept(lfd, NULL, NULL);

		/* [2] is 6 bytes on the wire: read them, answer [0] */
		if (fd < 0 || read(fd, req, 6) != 6 ||
		    write(fd, "\0\0\0\2\x91\x00", 6) != 6)
			_exit(1);
		close(fd);
		_exit(0);
	}
	CHECK_RC(kvc_create(&c), 0);
	CHECK_RC(kvc_connect(c, sun.sun_path, 0), 0);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), 0);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CLOSED);
	CHECK(strstr(kvc_errmsg(c), sun.sun_path));
	kvc_close(c);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
	close(lfd);
	unlink(sun.sun_path);
}

int main(void)
{
	if (!getenv("KVD_BIN"))
		return 77;
	test_refused();
	test_unix_socket();
	test_connect_timeout();
	test_io_timeout();
	test_closed();
	test_garbage();
	test_truncated_and_oversize();
	test_killed();
	test_frame_too_large();
	return 0;
}
