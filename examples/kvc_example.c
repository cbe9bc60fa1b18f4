/* kvc_example.c - libkvclient in one page: connect, put, get, a pipeline of
 * writes read back in order, and a scan that follows the server's cursor.
 *
 *   kvc_example [HOST [PORT]]
 *
 * Build against an installed library with
 *   cc kvc_example.c $(pkg-config --cflags --libs kvclient)
 */
#include <stdio.h>
#include <stdlib.h>

#include <kvclient.h>

#define NPIPE 1000

static int fail(kvc_conn *c, const char *what, int rc)
{
	fprintf(stderr, "kvc_example: %s: %s (%s)\n", what, kvc_errmsg(c),
		kvc_status_name(rc));
	kvc_close(c);
	return 1;
}

/* Queue NPIPE PUTs, send them in one write, then read the replies. */
static int pipeline(kvc_conn *c)
{
	char key[32], val[32];
	kvc_reply *r;
	int rc;

	for (int i = 0; i < NPIPE; i++) {
		int kn = snprintf(key, sizeof(key), "example:%04d", i);
		int vn = snprintf(val, sizeof(val), "value %d", i);

		/* The bytes are copied: key and val can be reused at once. */
		if ((rc = kvc_send_put(c, key, (size_t)kn, val, (size_t)vn, 0,
				       0)))
			return rc;
	}
	while (kvc_pending(c)) {
		if ((rc = kvc_read_reply(c, &r)))
			return rc; /* the connection failed */
		if ((rc = kvc_reply_status(r)))
			return rc; /* the server refused this one PUT */
	}
	return 0;
}

/* Walk every key under "example:" in byte order, 100 per round trip. */
static int scan(kvc_conn *c, unsigned *n)
{
	kvc_val prefix = {"example:", 8}, key, val;
	kvc_scan *s;
	int rc;

	if ((rc = kvc_scan_open(c, &s, &prefix, NULL, NULL, 100, 0)))
		return rc;
	*n = 0;
	while ((rc = kvc_scan_next(s, &key, &val)) == 0) {
		if (*n < 3)
			printf("  %.*s = %.*s\n", (int)key.len,
			       (const char *)key.p, (int)val.len,
			       (const char *)val.p);
		(*n)++;
	}
	kvc_scan_close(s);
	return rc == -KVC_END ? 0 : rc;
}

int main(int argc, char **argv)
{
	const char *host = argc > 1 ? argv[1] : "127.0.0.1";
	unsigned port = argc > 2 ? (unsigned)atoi(argv[2]) : KVC_DEFAULT_PORT;
	unsigned n;
	kvc_conn *c;
	kvc_val v;
	int rc;

	if (kvc_create(&c))
		return 1;
	kvc_set_timeouts(c, 2000, 10000);
	if ((rc = kvc_connect(c, host, port)))
		return fail(c, "connect", rc);
	if ((rc = kvc_put(c, "greeting", 8, "hello, kvd", 10, 0, 0)))
		return fail(c, "put", rc);
	/* v points into the connection's buffer until the next call on c. */
	if ((rc = kvc_get(c, "greeting", 8, &v)))
		return fail(c, "get", rc);
	printf("greeting = %.*s\n", (int)v.len, (const char *)v.p);
	if ((rc = kvc_get(c, "no such key", 11, &v)) != -KVC_NOT_FOUND)
		return fail(c, "get of a missing key", rc);
	if ((rc = pipeline(c)))
		return fail(c, "pipeline", rc);
	printf("pipelined %d PUTs\n", NPIPE);
	if ((rc = scan(c, &n)))
		return fail(c, "scan", rc);
	printf("scanned %u keys\n", n);
	kvc_close(c);
	return n == NPIPE ? 0 : 1;
}
