/* test_url.c - kvc_url_parse(): every form kvclient.h documents (kvds://
 * too, with its TLS flag and default port), and the
 * malformed URLs it must refuse.  No server: the parser does no I/O. */
#include <string.h>

#include "kvctest.h"

struct good {
	const char *url;
	const char *host;
	unsigned port;
	const char *password; /* NULL: none */
	int tls;	      /* kvds:// */
};

static const struct good goods[] = {
    {"kvd://localhost", "localhost", KVC_DEFAULT_PORT, NULL},
    {"kvd://localhost/", "localhost", KVC_DEFAULT_PORT, NULL},
    {"kvd://10.0.0.5:7400", "10.0.0.5", 7400, NULL},
    {"kvd://:pw@db1", "db1", KVC_DEFAULT_PORT, "pw"},
    {"kvd://:s3cr%40t%3A%2F@db1:1/", "db1", 1, "s3cr@t:/"},
    {"kvd://:a+b@h:65535", "h", 65535, "a+b"},
    {"kvd://:@h", "h", KVC_DEFAULT_PORT, ""},
    {"kvd://[::1]", "::1", KVC_DEFAULT_PORT, NULL},
    {"kvd://:pw@[fe80::1]:7381", "fe80::1", 7381, "pw"},
    {"unix:///run/kvd/kvd.sock", "/run/kvd/kvd.sock", 0, NULL},
    {"unix:///tmp/a%20b.sock?password=p%26w%3D", "/tmp/a b.sock", 0, "p&w="},
    {"unix:///s?password=", "/s", 0, ""},
    {"kvds://localhost", "localhost", KVC_DEFAULT_TLS_PORT, NULL, 1},
    {"kvds://:pw@db1:7400/", "db1", 7400, "pw", 1},
    {"kvds://[::1]", "::1", KVC_DEFAULT_TLS_PORT, NULL, 1},
};

static const char *const bads[] = {
    "",
    "localhost",
    "redis://localhost",
    "kvd://",
    "kvd:///",
    "kvd://:pw@",
    "kvd://user:pw@host", /* no user names */
    "kvd://pw@host",	  /* the password needs its ':' */
    "kvd://host:0",
    "kvd://host:65536",
    "kvd://host:",
    "kvd://host:12x",
    "kvd://host/db",	      /* no path */
    "kvd://host?password=pw", /* the query is unix:// only */
    "kvd://[::1",
    "kvd://[]:7379",
    "kvd://[::1]x",
    "kvd://:p%4@host",	 /* broken escape */
    "kvd://:p%00w@host", /* NUL */
    "unix://",
    "unix:///",
    "unix://relative.sock",
    "unix:///s?pass=x",
    "unix:///s?password=a&b=c",
    "unix:///s?password=%0",
    "unix:///s%00x",
    "kvds://",
    "kvds://user:pw@host",
    "kvds://host:0",
    "kvds://host/db",
    "kvds:///s", /* TLS is for TCP: no Unix path */
    "kvdss://host",
};

static void check_good(const struct good *g)
{
	kvc_url *u = NULL;
	int rc = kvc_url_parse(g->url, &u);

	if (rc) {
		fprintf(stderr, "%s: refused (%d)\n", g->url, rc);
		exit(1);
	}
	if (strcmp(u->host, g->host) || u->port != g->port ||
	    u->tls != g->tls ||
	    (g->password ? !u->password || strcmp(u->password, g->password)
			 : u->password != NULL)) {
		fprintf(stderr, "%s: host '%s' port %u password '%s'\n", g->url,
			u->host, u->port, u->password ? u->password : "(none)");
		exit(1);
	}
	kvc_url_free(u);
}

int main(void)
{
	kvc_url *u = (kvc_url *)1;
	kvc_conn *c;

	for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++)
		check_good(&goods[i]);
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		int rc = kvc_url_parse(bads[i], &u);

		if (rc != -KVC_INVALID || u) {
			fprintf(stderr, "'%s': accepted (%d)\n", bads[i], rc);
			exit(1);
		}
	}
	CHECK_RC(kvc_url_parse(NULL, &u), -KVC_INVALID);
	kvc_url_free(NULL);

	/* kvc_connect_url refuses a malformed URL without touching the
	 * network, and says which forms it takes. */
	CHECK(kvc_create(&c) == 0);
	CHECK_RC(kvc_connect_url(c, "kvd://user:pw@host"), -KVC_INVALID);
	CHECK(strstr(kvc_errmsg(c), "kvd://"));
	CHECK(strstr(kvc_errmsg(c), "kvds://"));
	kvc_close(c);
	printf("ok\n");
	return 0;
}
