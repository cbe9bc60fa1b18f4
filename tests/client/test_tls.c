/* test_tls.c - libkvclient over TLS: kvc_set_tls() against a TLS port in
 * front of a real kvd.  Run by test_tls.py, which makes the certificates
 * (tlscerts.py), starts kvd and the TLS ports, and passes them here:
 *
 *   KVT_TLS_PORT    TLS, server certificate for 127.0.0.1 and localhost
 *                   signed by ca.crt, asks for a client certificate
 *   KVT_REQ_PORT    the same, but refuses a client without a certificate
 *   KVT_PLAIN_PORT  kvd itself, no TLS
 *   KVT_GONE_PORT   TLS, then a clean close as soon as the handshake is done
 *   KVT_CERTS       the directory of tlscerts.py's files
 *
 * Each case asserts the status and, for a refusal, the words of
 * kvc_errmsg() a user would act on.
 */
#include <poll.h>
#include <string.h>
#include <time.h>

#include "kvctest.h"

static unsigned tls_port, req_port, plain_port, gone_port;
static const char *dir;

static const char *cpath(const char *name)
{
	static char bufs[8][512];
	static int n;
	char *b = bufs[n++ % 8];

	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

static unsigned env_port(const char *name)
{
	const char *v = getenv(name);

	if (!v) {
		fprintf(stderr, "%s is not set (run by test_tls.py): skipped\n",
			name);
		exit(77);
	}
	return (unsigned)atoi(v);
}

/* A handle with these TLS options (a fresh one each time). */
static kvc_conn *handle(const struct kvc_tls_opts *o)
{
	kvc_conn *c;

	CHECK(kvc_create(&c) == 0);
	CHECK_RC(kvc_set_timeouts(c, 5000, 10000), 0);
	if (o && kvc_set_tls(c, o)) {
		fprintf(stderr, "kvc_set_tls: %s\n", kvc_errmsg(c));
		exit(1);
	}
	return c;
}

static void roundtrip(kvc_conn *c, const char *key)
{
	kvc_val v;

	CHECK_RC(kvc_put(c, key, strlen(key), "over tls", 8, 0, 0), 0);
	CHECK_RC(kvc_get(c, key, strlen(key), &v), 0);
	CHECK_VAL(v, "over tls");
}

/* A refusal: rc, and the message must hold want. */
static void refused(kvc_conn *c, int rc, int want_rc, const char *want)
{
	if (rc != want_rc || !strstr(kvc_errmsg(c), want)) {
		fprintf(stderr, "got %d (%s) '%s', wanted %d and '%s'\n", rc,
			kvc_status_name(rc), kvc_errmsg(c), want_rc, want);
		exit(1);
	}
}

static void verified(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt")};
	kvc_conn *c = handle(&o);

	/* By IP address (the certificate's IP SAN)... */
	CHECK_RC(kvc_connect(c, "127.0.0.1", tls_port), 0);
	roundtrip(c, "tls:ip");
	/* ...and by name (its DNS SAN; sent as SNI). */
	CHECK_RC(kvc_connect(c, "localhost", tls_port), 0);
	roundtrip(c, "tls:name");
	kvc_close(c);

	/* A CA directory in c_rehash layout. */
	o = (struct kvc_tls_opts){.ca_dir = cpath("cadir")};
	c = handle(&o);
	CHECK_RC(kvc_connect(c, "127.0.0.1", tls_port), 0);
	roundtrip(c, "tls:cadir");
	kvc_close(c);
}

static void refusals(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca2.crt")};
	kvc_conn *c = handle(&o);

	/* A CA that did not sign the server's certificate. */
	refused(c, kvc_connect(c, "127.0.0.1", tls_port), -KVC_CONNECT,
		"certificate verify failed");
	CHECK(strstr(kvc_errmsg(c), "127.0.0.1:"));
	CHECK(kvc_fd(c) == -1);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_CONNECT); /* sticky */
	kvc_close(c);

	/* The right CA, but another name than the certificate's. */
	o = (struct kvc_tls_opts){.ca_file = cpath("ca.crt"),
				  .server_name = "db.example.org"};
	c = handle(&o);
	refused(c, kvc_connect(c, "127.0.0.1", tls_port), -KVC_CONNECT,
		"certificate verify failed: hostname mismatch");
	kvc_close(c);

	/* No CA given: the system's store, which does not know ours. */
	c = handle(&(struct kvc_tls_opts){0});
	refused(c, kvc_connect(c, "127.0.0.1", tls_port), -KVC_CONNECT,
		"certificate verify failed");
	kvc_close(c);

	/* TLS to a plain port: the handshake fails, it does not hang. */
	o = (struct kvc_tls_opts){.ca_file = cpath("ca.crt")};
	c = handle(&o);
	refused(c, kvc_connect(c, "127.0.0.1", plain_port), -KVC_CONNECT,
		"TLS handshake");
	/* TLS is for TCP only. */
	refused(c, kvc_connect_unix(c, "/tmp/none.sock"), -KVC_INVALID,
		"not used over a Unix socket");
	kvc_close(c);
}

static void bad_files(void)
{
	kvc_conn *c = handle(NULL);
	struct kvc_tls_opts o = {.ca_file = "/nonexistent/ca.crt"};

	refused(c, kvc_set_tls(c, &o), -KVC_INVALID, "/nonexistent/ca.crt");
	o = (struct kvc_tls_opts){.ca_file = cpath("ca.crt"),
				  .cert_file = cpath("client.crt"),
				  .key_file = cpath("ca.key")};
	refused(c, kvc_set_tls(c, &o), -KVC_INVALID, "client key");
	o = (struct kvc_tls_opts){.ca_file = cpath("ca.key")};
	refused(c, kvc_set_tls(c, &o), -KVC_INVALID, "TLS: CA");
	/* A failed kvc_set_tls leaves the handle as it was: plain. */
	CHECK_RC(kvc_connect(c, "127.0.0.1", plain_port), 0);
	roundtrip(c, "tls:plain");
	/* NULL turns TLS off again. */
	o = (struct kvc_tls_opts){.ca_file = cpath("ca.crt")};
	CHECK_RC(kvc_set_tls(c, &o), 0);
	refused(c, kvc_connect(c, "127.0.0.1", plain_port), -KVC_CONNECT,
		"TLS handshake");
	CHECK_RC(kvc_set_tls(c, NULL), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", plain_port), 0);
	roundtrip(c, "tls:plain-again");
	kvc_close(c);
}

static void insecure(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca2.crt"), .insecure = 1};
	kvc_conn *c = handle(&o);

	CHECK_RC(kvc_connect(c, "127.0.0.1", tls_port), 0);
	roundtrip(c, "tls:insecure");
	kvc_close(c);
}

static void client_cert(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt"),
				 .cert_file = cpath("client.crt"),
				 .key_file = cpath("client.key")};
	kvc_conn *c = handle(&o);
	int rc;

	/* test_tls.py checks the TLS port saw "kvd test client". */
	CHECK_RC(kvc_connect(c, "127.0.0.1", req_port), 0);
	roundtrip(c, "tls:cert");
	kvc_close(c);

	/* Without one, the port that requires it refuses: at the handshake
	 * or (TLS 1.3) at the first reply, with the server's alert. */
	o.cert_file = o.key_file = NULL;
	c = handle(&o);
	rc = kvc_connect(c, "127.0.0.1", req_port);
	if (rc == 0)
		rc = kvc_ping(c, NULL, 0, NULL);
	CHECK(rc == -KVC_CONNECT || rc == -KVC_IO || rc == -KVC_CLOSED);
	/* The server's alert, or the hint when a reset overtook it. */
	if (!strstr(kvc_errmsg(c), "certificate required"))
		refused(c, rc, rc, "require a client certificate");
	kvc_close(c);
}

/* Writing over TLS to a server that has gone raises no SIGPIPE (which
 * would kill this process): KVT_GONE_PORT closes each connection cleanly
 * right after the handshake, the first write draws a reset, the second
 * one EPIPE. */
static void no_sigpipe(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt")};
	kvc_conn *c = handle(&o);
	struct timespec ts = {0, 300 * 1000000L};
	int rc = 0;

	CHECK_RC(kvc_connect(c, "127.0.0.1", gone_port), 0);
	nanosleep(&ts, NULL); /* the server has closed */
	for (int i = 0; i < 3 && rc == 0; i++) {
		CHECK_RC(kvc_send_ping(c, NULL, 0), 0);
		rc = kvc_flush(c);
		nanosleep(&ts, NULL);
	}
	CHECK(rc == -KVC_CLOSED || rc == -KVC_IO);
	kvc_close(c);
}

/* A server that accepts but never answers the handshake: the connect
 * timeout bounds it. */
static void handshake_timeout(void)
{
	static const struct fake_step silent[] = {{0, NULL, 0, 0}};
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt")};
	kvc_conn *c = handle(&o);
	struct fake f;

	fake_start(&f, silent, 1, 1);
	CHECK_RC(kvc_set_timeouts(c, 300, 0), 0);
	refused(c, kvc_connect(c, "127.0.0.1", f.port), -KVC_TIMEOUT,
		"TLS handshake timed out after 300 ms");
	fake_stop(&f);
	kvc_close(c);
}

/* The poll()-driven interface, 2,000 requests in a window of 200. */
static void nonblocking(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt")};
	kvc_conn *c = handle(&o);
	int sent = 0, got = 0, rc;
	uint64_t deadline = kvt_now_ms() + 60000;
	kvc_reply *r;
	kvc_val v;

	CHECK_RC(kvc_connect(c, "127.0.0.1", tls_port), 0);
	CHECK_RC(kvc_set_nonblock(c, 1), 0);
	while (got < 2000) {
		struct pollfd p = {kvc_fd(c), POLLIN, 0};

		CHECK(kvt_now_ms() < deadline);
		for (; sent < 2000 && sent - got < 200; sent++) {
			char k[32];
			int n = snprintf(k, sizeof(k), "nbtls%d", sent / 2);

			if (sent % 2 == 0)
				CHECK_RC(kvc_send_put(c, k, (size_t)n, k,
						      (size_t)n, 0, 0),
					 0);
			else
				CHECK_RC(kvc_send_get(c, k, (size_t)n), 0);
		}
		if (kvc_want_write(c))
			p.events |= POLLOUT;
		CHECK(poll(&p, 1, 5000) == 1);
		if (p.revents & POLLOUT) {
			rc = kvc_flush(c);
			CHECK(rc == 0 || rc == -KVC_AGAIN);
		}
		if (p.revents & POLLIN)
			CHECK_RC(kvc_consume_input(c), 0);
		while ((rc = kvc_read_reply(c, &r)) == 0) {
			char want[32];
			int n =
			    snprintf(want, sizeof(want), "nbtls%d", got / 2);

			if (got++ % 2 == 0)
				continue;
			CHECK_RC(kvc_reply_value(r, &v), 0);
			CHECK(v.len == (size_t)n && !memcmp(v.p, want, v.len));
		}
		CHECK(rc == -KVC_AGAIN || (rc == -KVC_INVALID && got == sent));
	}
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), 0); /* sync still waits */
	kvc_close(c);
}

static void urls(void)
{
	struct kvc_tls_opts o = {.ca_file = cpath("ca.crt")};
	char url[128];
	kvc_conn *c = handle(&o);

	snprintf(url, sizeof(url), "kvds://127.0.0.1:%u", tls_port);
	CHECK_RC(kvc_connect_url(c, url), 0);
	roundtrip(c, "tls:url");
	/* kvd:// is plain even on a handle with TLS options. */
	snprintf(url, sizeof(url), "kvd://127.0.0.1:%u", plain_port);
	CHECK_RC(kvc_connect_url(c, url), 0);
	roundtrip(c, "tls:url-plain");
	kvc_close(c);

	/* kvds:// on a handle without options: TLS, verified against the
	 * system's CAs (which do not know ours), never in clear. */
	c = handle(NULL);
	snprintf(url, sizeof(url), "kvds://127.0.0.1:%u", tls_port);
	refused(c, kvc_connect_url(c, url), -KVC_CONNECT,
		"certificate verify failed");
	snprintf(url, sizeof(url), "kvds://127.0.0.1:%u", plain_port);
	refused(c, kvc_connect_url(c, url), -KVC_CONNECT, "TLS handshake");
	kvc_close(c);
}

int main(void)
{
	tls_port = env_port("KVT_TLS_PORT");
	req_port = env_port("KVT_REQ_PORT");
	plain_port = env_port("KVT_PLAIN_PORT");
	gone_port = env_port("KVT_GONE_PORT");
	dir = getenv("KVT_CERTS");
	CHECK(dir);
	verified();
	refusals();
	bad_files();
	insecure();
	client_cert();
	no_sigpipe();
	handshake_timeout();
	nonblocking();
	urls();
	printf("ok\n");
	return 0;
}
