/* test_auth.c - libkvclient against a kvd with requirepass: the password
 * set on a handle is sent as AUTH by every connect (so a reconnect after a
 * server restart authenticates again), a wrong one fails the connect, a
 * URL carries it, and a large first request without it is refused as
 * AUTH_REQUIRED rather than as a frame-size error.  Also a password sent to
 * a server that has none, an AUTH never answered, and kvd's Unix socket
 * (--unix-socket) reached with a password by path and by URL. */
#include <string.h>
#include <unistd.h>

#include "kvctest.h"

static const char *const with_pw[] = {"--requirepass", "pw", NULL};

static kvc_conn *handle(void)
{
	kvc_conn *c;

	CHECK(kvc_create(&c) == 0);
	/* 10 s to connect: a sanitizer build may take seconds to start
	 * answering after a restart (its port is bound first). */
	CHECK(kvc_set_timeouts(c, 10000, 10000) == 0);
	return c;
}

/* 100 pairs of 300 bytes: one MPUT frame of about 31 KiB, over the 16 KiB
 * kvd reads before AUTH. */
static int big_mput(kvc_conn *c)
{
	static char kbuf[100][8], vbuf[300];
	kvc_val keys[100], vals[100];

	memset(vbuf, 'v', sizeof(vbuf));
	for (int i = 0; i < 100; i++) {
		snprintf(kbuf[i], sizeof(kbuf[i]), "b%03d", i);
		keys[i] = (kvc_val){kbuf[i], strlen(kbuf[i])};
		vals[i] = (kvc_val){vbuf, sizeof(vbuf)};
	}
	return kvc_mput(c, keys, vals, 100, 0);
}

static void password_and_reconnect(struct kvd_proc *k)
{
	kvc_conn *c = handle();
	kvc_val v;
	char url[128];

	/* No password: refused as such, for a small and a large request. */
	CHECK_RC(kvc_connect(c, "127.0.0.1", k->port), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_AUTH_REQUIRED);
	CHECK_RC(big_mput(c), -KVC_AUTH_REQUIRED);

	/* The password, set before connecting: the first request (large) is
	 * already authenticated. */
	CHECK_RC(kvc_set_password(c, "pw", 2), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", k->port), 0);
	CHECK_RC(big_mput(c), 0);
	CHECK_RC(kvc_put(c, "k", 1, "v1", 2, 0, 0), 0);

	/* Restart kvd between two calls: the old socket is dead, and
	 * connecting again authenticates again by itself. */
	kvd_restart(k, with_pw);
	CHECK(kvc_get(c, "k", 1, &v) < 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", k->port), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), 0);
	CHECK_VAL(v, "v1");

	/* A wrong password fails the connect, and stays failed. */
	CHECK_RC(kvc_set_password(c, "nope", 4), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", k->port), -KVC_AUTH_FAILED);
	CHECK(strstr(kvc_errmsg(c), "invalid password"));
	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_AUTH_FAILED);
	CHECK(kvc_fd(c) < 0);

	/* The URL's password replaces the handle's. */
	snprintf(url, sizeof(url), "kvd://:pw@127.0.0.1:%u", k->port);
	CHECK_RC(kvc_connect_url(c, url), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), 0);
	CHECK_VAL(v, "v1");
	snprintf(url, sizeof(url), "kvd://:pW@127.0.0.1:%u/", k->port);
	CHECK_RC(kvc_connect_url(c, url), -KVC_AUTH_FAILED);
	/* A URL without one keeps the handle's (now "pW"): still refused. */
	snprintf(url, sizeof(url), "kvd://127.0.0.1:%u", k->port);
	CHECK_RC(kvc_connect_url(c, url), -KVC_AUTH_FAILED);
	/* Clearing it: connected, not authenticated. */
	CHECK_RC(kvc_set_password(c, NULL, 0), 0);
	CHECK_RC(kvc_connect_url(c, url), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_AUTH_REQUIRED);
	CHECK_RC(kvc_set_password(c, NULL, 1), -KVC_INVALID);
	kvc_close(c);
}

/* A password for a server that has none: DISABLED is not an error. */
static void password_not_needed(void)
{
	struct kvd_proc k;
	kvc_conn *c = handle();

	kvd_start(&k, NULL);
	CHECK_RC(kvc_set_password(c, "pw", 2), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", k.port), 0);
	CHECK_RC(kvc_put(c, "k", 1, "v", 1, 0, 0), 0);
	kvc_close(c);
	kvd_stop(&k);
}

/* A server that takes AUTH and never answers: the connect timeout bounds
 * the wait, even with no I/O timeout (else the connect would hang until
 * the fake is stopped, and then fail as CLOSED). */
static void auth_within_connect_timeout(void)
{
	static const struct fake_step steps[] = {{1, NULL, 0, 0}};
	struct fake f;
	kvc_conn *c;

	fake_start(&f, steps, 1, 1);
	CHECK(kvc_create(&c) == 0);
	CHECK(kvc_set_timeouts(c, 300, 0) == 0);
	CHECK_RC(kvc_set_password(c, "pw", 2), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", f.port), -KVC_TIMEOUT);
	CHECK(kvc_fd(c) < 0);
	kvc_close(c);
	fake_stop(&f);
}

/* Over kvd's Unix socket, with the password: kvc_connect_unix with a
 * relative path, kvc_connect with an absolute one, a unix:// URL. */
static void over_unix_socket(void)
{
	char dir[] = "/tmp/kvcsock-XXXXXX", path[64], url[128], cwd[512];
	const char *args[] = {"--requirepass", "pw", "--unix-socket", path,
			      NULL};
	struct kvd_proc k;
	kvc_conn *c = handle();
	kvc_val v;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kvd.sock", dir);
	kvd_start(&k, args);
	CHECK_RC(kvc_connect_unix(c, path), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_AUTH_REQUIRED);
	CHECK_RC(kvc_set_password(c, "pw", 2), 0);
	CHECK_RC(kvc_connect(c, path, 0), 0);
	CHECK_RC(kvc_put(c, "u", 1, "over unix", 9, 0, 0), 0);
	CHECK(getcwd(cwd, sizeof(cwd)) && chdir(dir) == 0);
	CHECK_RC(kvc_connect_unix(c, "kvd.sock"), 0);
	CHECK(chdir(cwd) == 0);
	CHECK_RC(kvc_get(c, "u", 1, &v), 0);
	CHECK_VAL(v, "over unix");
	CHECK_RC(kvc_set_password(c, NULL, 0), 0);
	snprintf(url, sizeof(url), "unix://%s?password=pw", path);
	CHECK_RC(kvc_connect_url(c, url), 0);
	CHECK_RC(kvc_get(c, "u", 1, &v), 0);
	snprintf(url, sizeof(url), "unix://%s?password=bad", path);
	CHECK_RC(kvc_connect_url(c, url), -KVC_AUTH_FAILED);
	kvc_close(c);
	kvd_stop(&k);
	unlink(path); /* if kvd left it */
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	struct kvd_proc k;

	kvd_start(&k, with_pw);
	password_and_reconnect(&k);
	kvd_stop(&k);
	password_not_needed();
	auth_within_connect_timeout();
	over_unix_socket();
	printf("ok\n");
	return 0;
}
