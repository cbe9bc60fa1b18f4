/* test_ops.c - every libkvclient call against a real kvd: results, server
 * errors, argument checks, replies read through the pipelined accessors,
 * and scans that follow the cursor (also with other calls in between).
 */
#include <string.h>

#include "kvctest.h"

static void test_library(void)
{
	CHECK(!strcmp(kvc_strerror(-KVC_NOT_FOUND), "key not found"));
	CHECK(!strcmp(kvc_strerror(KVC_TIMEOUT), "timed out"));
	CHECK(!strcmp(kvc_strerror(-999), "unknown status"));
	CHECK(!strcmp(kvc_status_name(-KVC_BAD_ARGS), "BAD_ARGS"));
	CHECK(!strcmp(kvc_status_name(KVC_END), "END"));
	CHECK(kvc_status_name(63) == NULL);
	CHECK(KVC_CONNECT >= KVC_CLIENT_STATUS_MIN);
	CHECK(kvc_version()[0] != '\0');
	CHECK(!strcmp(kvc_errmsg(NULL), "out of memory"));
}

static void test_unconnected(void)
{
	kvc_conn *c;
	kvc_val v;

	CHECK_RC(kvc_create(&c), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_CLOSED);
	CHECK_RC(kvc_send_ping(c, NULL, 0), -KVC_CLOSED);
	CHECK(kvc_fd(c) == -1);
	CHECK_RC(kvc_set_timeouts(c, -1, 0), -KVC_INVALID);
	CHECK_RC(kvc_set_max_reply(c, 10), -KVC_INVALID);
	CHECK_RC(kvc_connect(c, "", 7379), -KVC_INVALID);
	CHECK_RC(kvc_connect(c, NULL, 7379), -KVC_INVALID);
	CHECK_RC(kvc_connect(c, "127.0.0.1", 0), -KVC_INVALID);
	CHECK_RC(kvc_connect(c, "127.0.0.1", 70000), -KVC_INVALID);
	CHECK_RC(kvc_connect(c, "no-such-host.invalid", 7379), -KVC_CONNECT);
	CHECK(strstr(kvc_errmsg(c), "no-such-host.invalid:7379"));
	{
		char path[200];

		memset(path, 'x', sizeof(path) - 1);
		path[0] = '/';
		path[sizeof(path) - 1] = '\0';
		CHECK_RC(kvc_connect(c, path, 0), -KVC_INVALID);
	}
	CHECK_RC(kvc_connect(c, "/nonexistent/kvd.sock", 0), -KVC_CONNECT);
	kvc_close(c);
	kvc_close(NULL);
}

static void test_basic(kvc_conn *c)
{
	kvc_val v, info;
	uint64_t u;
	int64_t i;

	CHECK_RC(kvc_hello(c, &info), 0);
	CHECK_RC(kvc_map_uint(info, "proto", &u), 0);
	CHECK(u == 2); /* HELLO asks for 1; the server speaks 2 */
	CHECK_RC(kvc_map_uint(info, "shards", &u), 0);
	CHECK(u == 2);
	CHECK_RC(kvc_map_str(info, "durability", &v), 0);
	CHECK_VAL(v, "sync");
	CHECK_RC(kvc_map_uint(info, "durability", &u), -KVC_INVALID);
	CHECK_RC(kvc_map_str(info, "nope", &v), -KVC_NOT_FOUND);
	CHECK_RC(kvc_hello(c, NULL), 0);

	CHECK_RC(kvc_ping(c, NULL, 0, &v), 0);
	CHECK(v.p == NULL && v.len == 0);
	CHECK_RC(kvc_ping(c, "echo", 4, &v), 0);
	CHECK_VAL(v, "echo");

	CHECK_RC(kvc_get(c, "k", 1, &v), -KVC_NOT_FOUND);
	CHECK(!strcmp(kvc_errmsg(c), "key not found"));
	CHECK_RC(kvc_put(c, "k", 1, "v1", 2, 0, 0), 0);
	CHECK_RC(kvc_get(c, "k", 1, &v), 0);
	CHECK_VAL(v, "v1");
	CHECK_RC(kvc_put(c, "e", 1, NULL, 0, 0, 0), 0); /* empty value */
	CHECK_RC(kvc_get(c, "e", 1, &v), 0);
	CHECK(v.p != NULL && v.len == 0);
	CHECK_RC(kvc_del(c, "k", 1), 0);
	CHECK_RC(kvc_del(c, "k", 1), -KVC_NOT_FOUND);

	/* binary keys and values */
	{
		uint8_t key[200], val[3000];

		for (size_t j = 0; j < sizeof(key); j++)
			key[j] = (uint8_t)j;
		for (size_t j = 0; j < sizeof(val); j++)
			val[j] = (uint8_t)(j * 7);
		CHECK_RC(kvc_put(c, key, sizeof(key), val, sizeof(val), 0, 0),
			 0);
		CHECK_RC(kvc_get(c, key, sizeof(key), &v), 0);
		CHECK(v.len == sizeof(val) && !memcmp(v.p, val, v.len));
	}

	/* flags */
	CHECK_RC(kvc_put(c, "f", 1, "1", 1, 0, KVC_PUT_XX), -KVC_NOT_FOUND);
	CHECK_RC(kvc_put(c, "f", 1, "1", 1, 0, KVC_PUT_NX), 0);
	CHECK_RC(kvc_put(c, "f", 1, "2", 1, 0, KVC_PUT_NX), -KVC_EXISTS);
	CHECK_RC(kvc_put(c, "f", 1, "3", 1, 0, KVC_PUT_XX), 0);
	CHECK_RC(kvc_get(c, "f", 1, &v), 0);
	CHECK_VAL(v, "3");
	CHECK_RC(kvc_put(c, "f", 1, "4", 1, 0, KVC_PUT_NX | KVC_PUT_XX),
		 -KVC_INVALID);
	CHECK_RC(kvc_put(c, "f", 1, "4", 1, 0, 64), -KVC_INVALID);

	/* TTL, EXPIRE */
	CHECK_RC(kvc_put(c, "t", 1, "v", 1, 100000, 0), 0);
	CHECK_RC(kvc_ttl(c, "t", 1, &i), 0);
	CHECK(i > 90000 && i <= 100000);
	CHECK_RC(kvc_put(c, "t", 1, "w", 1, 0, KVC_PUT_KEEPTTL), 0);
	CHECK_RC(kvc_ttl(c, "t", 1, &i), 0);
	CHECK(i > 90000);
	CHECK_RC(kvc_expire(c, "t", 1, 0), 0);
	CHECK_RC(kvc_ttl(c, "t", 1, &i), 0);
	CHECK(i == -1);
	CHECK_RC(kvc_expire(c, "nope", 4, 10), -KVC_NOT_FOUND);
	CHECK_RC(kvc_ttl(c, "nope", 4, &i), -KVC_NOT_FOUND);
	CHECK_RC(kvc_put(c, "short", 5, "v", 1, 50, 0), 0);
	{
		uint64_t until = kvt_now_ms() + 5000;

		while (kvc_get(c, "short", 5, &v) == 0 && kvt_now_ms() < until)
			;
		CHECK_RC(kvc_get(c, "short", 5, &v), -KVC_NOT_FOUND);
	}
}

static void test_numbers(kvc_conn *c)
{
	kvc_val v;
	uint64_t u;
	int64_t i;

	CHECK_RC(kvc_incr(c, "n", 1, 5, &i), 0);
	CHECK(i == 5);
	CHECK_RC(kvc_incr(c, "n", 1, -7, &i), 0);
	CHECK(i == -2);
	CHECK_RC(kvc_incr(c, "n", 1, 1, NULL), 0);
	CHECK_RC(kvc_get(c, "n", 1, &v), 0);
	CHECK_VAL(v, "-1");
	CHECK_RC(kvc_put(c, "s", 1, "abc", 3, 0, 0), 0);
	CHECK_RC(kvc_incr(c, "s", 1, 1, &i), -KVC_NOT_INTEGER);
	CHECK(strlen(kvc_errmsg(c)) > 0);
	CHECK_RC(kvc_append(c, "s", 1, "def", 3, &u), 0);
	CHECK(u == 6);
	CHECK_RC(kvc_append(c, "new", 3, "xy", 2, NULL), 0);
	CHECK_RC(kvc_getdel(c, "s", 1, &v), 0);
	CHECK_VAL(v, "abcdef");
	CHECK_RC(kvc_getdel(c, "s", 1, &v), -KVC_NOT_FOUND);
	CHECK_RC(kvc_getdel(c, "new", 3, NULL), 0);
}

static void test_multi(kvc_conn *c)
{
	kvc_val keys[101], vals[101], got[101];
	char kb[101][16], vb[101][16];
	uint64_t n;

	for (int j = 0; j < 100; j++) {
		keys[j].p = kb[j];
		keys[j].len = (size_t)snprintf(kb[j], 16, "m%02d", j);
		vals[j].p = vb[j];
		vals[j].len = (size_t)snprintf(vb[j], 16, "val%d", j);
	}
	keys[100].p = "absent";
	keys[100].len = 6;
	CHECK_RC(kvc_mput(c, keys, vals, 100, 0), 0);
	CHECK_RC(kvc_mget(c, keys, 101, got), 0);
	for (int j = 0; j < 100; j++)
		CHECK(got[j].len == vals[j].len &&
		      !memcmp(got[j].p, vals[j].p, got[j].len));
	CHECK(got[100].p == NULL && got[100].len == 0);
	CHECK_RC(kvc_exists(c, keys, 101, &n), 0);
	CHECK(n == 100);
	CHECK_RC(kvc_count(c, "m", 1, &n), 0);
	CHECK(n == 100);
	CHECK_RC(kvc_count(c, NULL, 0, &n), 0);
	CHECK(n >= 100);
	CHECK_RC(kvc_mdel(c, keys + 50, 51, &n), 0);
	CHECK(n == 50);
	CHECK_RC(kvc_count(c, "m", 1, &n), 0);
	CHECK(n == 50);
	/* one bad key refuses the whole MPUT */
	{
		static char big[512];
		kvc_val k2[2] = {{"ok", 2}, {big, sizeof(big)}};

		memset(big, 'k', sizeof(big));
		CHECK_RC(kvc_mput(c, k2, vals, 2, 0), -KVC_KEY_TOO_LARGE);
		CHECK_RC(kvc_exists(c, k2, 1, &n), 0);
		CHECK(n == 0);
	}
	/* argument checks */
	CHECK_RC(kvc_mget(c, keys, 0, got), -KVC_INVALID);
	CHECK_RC(kvc_mget(c, NULL, 1, got), -KVC_INVALID);
	CHECK_RC(kvc_mput(c, keys, NULL, 1, 0), -KVC_INVALID);
	CHECK_RC(kvc_get(c, NULL, 3, got), -KVC_INVALID);
}

static void test_server_errors(kvc_conn *c)
{
	static char big[600];
	kvc_val v;
	uint64_t u;

	memset(big, 'k', sizeof(big));
	CHECK_RC(kvc_put(c, "", 0, "v", 1, 0, 0), -KVC_BAD_ARGS);
	CHECK(strstr(kvc_errmsg(c), "argument"));
	CHECK_RC(kvc_get(c, big, 512, &v), -KVC_KEY_TOO_LARGE);
	CHECK_RC(kvc_auth(c, "pw", 2), -KVC_DISABLED);
	CHECK_RC(kvc_stats(c, &v), 0);
	CHECK_RC(kvc_map_uint(v, "commits", &u), 0);
	CHECK(u > 0);
	CHECK_RC(kvc_map_uint(v, "avg_batch", &u), 0); /* a float */
	CHECK_RC(kvc_map_str(v, "server", &v), 0);
	CHECK(v.len > 4 && !memcmp(v.p, "kvd ", 4));
	/* still in step after every error */
	CHECK_RC(kvc_ping(c, "x", 1, &v), 0);
	CHECK_VAL(v, "x");
}

/* The same operations through kvc_send_* and the reply accessors. */
static void test_accessors(kvc_conn *c)
{
	kvc_val keys[3] = {{"a1", 2}, {"zz", 2}, {"a2", 2}}, k, v;
	kvc_reply *r;
	int64_t i;

	CHECK_RC(kvc_flushall(c), 0);
	CHECK_RC(kvc_send_put(c, "a1", 2, "x", 1, 0, 0), 0);
	CHECK_RC(kvc_send_put(c, "a2", 2, "y", 1, 1000, 0), 0);
	CHECK_RC(kvc_send_get(c, "a1", 2), 0);
	CHECK_RC(kvc_send_mget(c, keys, 3), 0);
	CHECK_RC(kvc_send_incr(c, "cnt", 3, 3), 0);
	CHECK_RC(kvc_send_scan(c, NULL, NULL, NULL, 1, 0), 0);
	CHECK_RC(kvc_send_stats(c), 0);
	CHECK_RC(kvc_send_get(c, "zz", 2), 0);
	CHECK(kvc_pending(c) == 8);
	/* a synchronous call now would read someone else's reply */
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), -KVC_INVALID);

	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), 0);
	CHECK_RC(kvc_reply_value(r, &v), -KVC_INVALID); /* a PUT's reply */
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_value(r, &v), 0);
	CHECK_VAL(v, "x");
	CHECK_RC(kvc_reply_int(r, &i), -KVC_INVALID);
	CHECK_RC(kvc_read_reply(c, &r), 0); /* MGET */
	CHECK_RC(kvc_reply_next(r, &k, &v), 0);
	CHECK(k.p == NULL);
	CHECK_VAL(v, "x");
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK(v.p == NULL);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK_VAL(v, "y");
	CHECK_RC(kvc_reply_next(r, NULL, &v), -KVC_END);
	CHECK_RC(kvc_read_reply(c, &r), 0); /* INCR */
	CHECK_RC(kvc_reply_int(r, &i), 0);
	CHECK(i == 3);
	CHECK_RC(kvc_read_reply(c, &r), 0); /* SCAN, limit 1 */
	CHECK_RC(kvc_reply_next(r, &k, &v), 0);
	CHECK_VAL(k, "a1");
	CHECK_VAL(v, "x");
	CHECK_RC(kvc_reply_next(r, &k, &v), -KVC_END);
	CHECK_RC(kvc_reply_cursor(r, &k), 0);
	CHECK_VAL(k, "a2");
	CHECK_RC(kvc_read_reply(c, &r), 0); /* STATS */
	CHECK_RC(kvc_reply_map(r, &v), 0);
	CHECK(v.len > 10);
	CHECK_RC(kvc_read_reply(c, &r), 0); /* GET zz */
	CHECK_RC(kvc_reply_status(r), -KVC_NOT_FOUND);
	CHECK_RC(kvc_reply_value(r, &v), -KVC_NOT_FOUND);
	CHECK(!strcmp(kvc_reply_error(r), "key not found"));
	CHECK_RC(kvc_read_reply(c, &r), -KVC_INVALID); /* nothing pending */

	/* a server error inside a pipeline leaves the rest in step */
	CHECK_RC(kvc_send_put(c, "", 0, "v", 1, 0, 0), 0);
	CHECK_RC(kvc_send_ping(c, "p", 1), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), -KVC_BAD_ARGS);
	CHECK(strlen(kvc_reply_error(r)) > 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_value(r, &v), 0);
	CHECK_VAL(v, "p");
}

#define NOINT INT64_MIN

/* ---- own writes: each read queued right behind a write that changes
 * its answer, all sent in one go when the first reply is read ---- */

static kvc_reply *next_reply(kvc_conn *c, int status)
{
	kvc_reply *r;

	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), status);
	return r;
}

static void want_int(kvc_conn *c, int64_t lo, int64_t hi)
{
	int64_t i;

	CHECK_RC(kvc_reply_int(next_reply(c, 0), &i), 0);
	if (i < lo || i > hi) {
		fprintf(stderr, "own writes: %lld, wanted %lld..%lld\n",
			(long long)i, (long long)lo, (long long)hi);
		exit(1);
	}
}

/* A SCAN reply with exactly n keys (with or without their values). */
static void want_items(kvc_conn *c, int n)
{
	kvc_reply *r = next_reply(c, 0);
	kvc_val k, v;
	int got = 0, rc;

	while ((rc = kvc_reply_next(r, &k, &v)) == 0)
		got++;
	CHECK_RC(rc, -KVC_END);
	if (got != n) {
		fprintf(stderr, "own writes: SCAN gave %d keys, wanted %d\n",
			got, n);
		exit(1);
	}
}

#define OWN_BULK 500

static void queue_own_writes(kvc_conn *c, const char *p, const char *bdir)
{
	char k[9][16];
	kvc_val pre = {p, strlen(p)}, ks[5];

	for (int j = 0; j < 9; j++) {
		snprintf(k[j], sizeof(k[j]), "%s%c", p, 'a' + j);
		if (j < 5)
			ks[j] = (kvc_val){k[j], strlen(k[j])};
	}
	kvc_send_put(c, k[0], 4, "v", 1, 0, 0);
	kvc_send_count(c, p, 3);
	kvc_send_put(c, k[1], 4, "v", 1, 0, 0);
	kvc_send_scan(c, &pre, NULL, NULL, 100, KVC_SCAN_KEYS_ONLY);
	kvc_send_put(c, k[2], 4, "v", 1, 0, 0);
	kvc_send_count(c, NULL, 0);
	kvc_send_put(c, k[3], 4, "v", 1, 0, 0);
	kvc_send_exists(c, ks, 5);
	kvc_send_mdel(c, ks, 2);
	kvc_send_count(c, p, 3);
	kvc_send_del(c, k[2], 4);
	kvc_send_scan(c, &pre, NULL, NULL, 100, 0);
	kvc_send_del(c, k[3], 4);
	kvc_send_exists(c, ks, 4);
	kvc_send_put(c, k[4], 4, "v", 1, 0, 0);
	kvc_send_expire(c, k[4], 4, 5000);
	kvc_send_ttl(c, k[4], 4);
	kvc_send_put(c, k[4], 4, "w", 1, 0, 0);
	kvc_send_ttl(c, k[4], 4);
	kvc_send_getdel(c, k[4], 4);
	kvc_send_ttl(c, k[4], 4);
	kvc_send_put(c, k[5], 4, "v", 1, 0, 0);
	kvc_send_flushall(c);
	kvc_send_count(c, NULL, 0);
	kvc_send_put(c, k[6], 4, "v", 1, 0, 0);
	kvc_send_flushall(c);
	kvc_send_scan(c, NULL, NULL, NULL, 100, 0);
	/* GET waits for the PUT, so only the FLUSHALL is in flight when
	 * EXISTS comes: it must wait for that alone */
	kvc_send_put(c, k[7], 4, "v", 1, 0, 0);
	kvc_send_get(c, k[7], 4);
	kvc_send_flushall(c);
	kvc_send_exists(c, &(kvc_val){k[7], 4}, 1);
	kvc_send_mput(c, ks, ks, 3, 0);
	/* many writes last keep a commit in flight when BACKUP comes */
	for (int j = 0; j < OWN_BULK; j++) {
		char bk[16];
		int n = snprintf(bk, sizeof(bk), "%sz%03d", p, j);

		kvc_send_put(c, bk, (size_t)n, "b", 1, 0, 0);
	}
	kvc_send_backup(c, bdir);
}

static void test_own_writes(kvc_conn *c, const struct kvd_proc *k)
{
	char p[4], bdir[200], cmd[240];

	snprintf(bdir, sizeof(bdir), "%s-own-backup", k->dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bdir);
	/* rounds: one read that skipped its wait would read a snapshot from
	 * before a commit still in flight */
	for (int round = 0; round < 10; round++) {
		snprintf(p, sizeof(p), "o%d:", round);
		CHECK_RC(kvc_flushall(c), 0);
		queue_own_writes(c, p, bdir);
		next_reply(c, 0);
		want_int(c, 1, 1); /* COUNT prefix after a PUT */
		next_reply(c, 0);
		want_items(c, 2); /* SCAN keys */
		next_reply(c, 0);
		want_int(c, 3, 3); /* COUNT */
		next_reply(c, 0);
		want_int(c, 4, 4); /* EXISTS */
		want_int(c, 2, 2); /* MDEL */
		want_int(c, 2, 2); /* COUNT prefix after it */
		next_reply(c, 0);
		want_items(c, 1); /* SCAN: one key and its value */
		next_reply(c, 0);
		want_int(c, 0, 0); /* EXISTS after the deletes */
		next_reply(c, 0);
		next_reply(c, 0);
		want_int(c, 1, 5000); /* TTL after EXPIRE */
		next_reply(c, 0);
		want_int(c, -1, -1); /* TTL after a plain PUT */
		next_reply(c, 0);
		next_reply(c, -KVC_NOT_FOUND); /* TTL after GETDEL */
		next_reply(c, 0);
		next_reply(c, 0);
		want_int(c, 0, 0); /* COUNT after FLUSHALL */
		next_reply(c, 0);
		next_reply(c, 0);
		want_items(c, 0); /* SCAN after FLUSHALL */
		next_reply(c, 0);
		next_reply(c, 0);
		next_reply(c, 0);
		want_int(c, 0, 0); /* EXISTS after FLUSHALL */
		next_reply(c, 0);
		for (int j = 0; j < OWN_BULK; j++)
			next_reply(c, 0);
		want_int(c, 3 + OWN_BULK, 3 + OWN_BULK); /* BACKUP: keys */
		CHECK(kvc_pending(c) == 0);
		CHECK(system(cmd) == 0);
	}
}

/* Every remaining queued form, read back in order. */
static void test_queued_forms(kvc_conn *c)
{
	kvc_val keys[3] = {{"a1", 2}, {"zz", 2}, {"a2", 2}};
	kvc_reply *r;
	int64_t i;

	CHECK_RC(kvc_send_hello(c), 0);
	CHECK_RC(kvc_send_del(c, "a1", 2), 0);
	CHECK_RC(kvc_send_mput(c, keys, keys, 1, 0), 0);
	CHECK_RC(kvc_send_mdel(c, keys, 3), 0);
	CHECK_RC(kvc_send_exists(c, keys, 3), 0);
	CHECK_RC(kvc_send_count(c, "a", 1), 0);
	CHECK_RC(kvc_send_append(c, "ap", 2, "123", 3), 0);
	CHECK_RC(kvc_send_expire(c, "ap", 2, 5000), 0);
	CHECK_RC(kvc_send_ttl(c, "ap", 2), 0);
	CHECK_RC(kvc_send_getdel(c, "ap", 2), 0);
	CHECK_RC(kvc_send_auth(c, NULL, 0), 0);
	CHECK_RC(kvc_send_flushall(c), 0);
	{
		static const int want[] = {
		    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -KVC_DISABLED, 0};
		/* NOINT: the reply holds no integer.  Zero is a result to
		 * check too: an EXISTS or COUNT that missed the MDEL before
		 * it would not answer 0. */
		static const int64_t ints[] = {NOINT, NOINT, NOINT, 2,
					       0,     0,     3,	    NOINT,
					       5000,  NOINT, NOINT, NOINT};
		kvc_val v;

		for (int j = 0; j < 12; j++) {
			CHECK_RC(kvc_read_reply(c, &r), 0);
			CHECK_RC(kvc_reply_status(r), want[j]);
			if (ints[j] != NOINT) {
				CHECK_RC(kvc_reply_int(r, &i), 0);
				CHECK(i == ints[j] ||
				      (j == 8 && i > 4000 && i <= 5000));
			}
			if (j == 9) { /* GETDEL */
				CHECK_RC(kvc_reply_value(r, &v), 0);
				CHECK_VAL(v, "123");
			}
		}
	}
}

static void fill(kvc_conn *c, int n)
{
	kvc_reply *r;
	char k[32], v[32];

	CHECK_RC(kvc_flushall(c), 0);
	for (int j = 0; j < n; j++) {
		int kn = snprintf(k, sizeof(k), "user:%04d", j);
		int vn = snprintf(v, sizeof(v), "u%d", j);

		CHECK_RC(kvc_send_put(c, k, (size_t)kn, v, (size_t)vn, 0, 0),
			 0);
	}
	CHECK_RC(kvc_send_put(c, "other", 5, "o", 1, 0, 0), 0);
	CHECK_RC(kvc_send_put(c, "user;", 5, "x", 1, 0, 0), 0);
	while (kvc_pending(c)) {
		CHECK_RC(kvc_read_reply(c, &r), 0);
		CHECK_RC(kvc_reply_status(r), 0);
	}
}

/* Walk a scan; with interleave, make another call between items. */
static int walk(kvc_conn *c, const kvc_val *prefix, const kvc_val *start,
		const kvc_val *end, unsigned batch, unsigned flags,
		int interleave, int first)
{
	kvc_val k, v;
	kvc_scan *s;
	char want[32];
	int n = 0, rc;

	CHECK_RC(kvc_scan_open(c, &s, prefix, start, end, batch, flags), 0);
	while ((rc = kvc_scan_next(s, &k, &v)) == 0) {
		int wn = snprintf(want, sizeof(want), "user:%04d", first + n);

		CHECK(k.len == (size_t)wn && !memcmp(k.p, want, k.len));
		if (flags & KVC_SCAN_KEYS_ONLY) {
			CHECK(v.p == NULL && v.len == 0);
		} else {
			wn = snprintf(want, sizeof(want), "u%d", first + n);
			CHECK(v.len == (size_t)wn && !memcmp(v.p, want, v.len));
		}
		if (interleave) {
			kvc_val pv;

			CHECK_RC(kvc_ping(c, "i", 1, &pv), 0);
		}
		n++;
	}
	CHECK_RC(rc, -KVC_END);
	CHECK_RC(kvc_scan_next(s, &k, &v), -KVC_END); /* stays at the end */
	kvc_scan_close(s);
	return n;
}

static void test_scan(kvc_conn *c)
{
	kvc_val prefix = {"user:", 5}, start = {"user:0010", 9};
	kvc_val end = {"user:0020", 9}, p2 = {"user:02", 7};
	kvc_scan *s;

	fill(c, 250);
	for (unsigned batch = 1; batch <= 1000; batch *= 7)
		CHECK(walk(c, &prefix, NULL, NULL, batch, 0, 0, 0) == 250);
	CHECK(walk(c, &prefix, NULL, NULL, 0, 0, 0, 0) == 250);
	CHECK(walk(c, &prefix, NULL, NULL, 16, 0, 1, 0) == 250);
	CHECK(walk(c, NULL, &start, &end, 3, 0, 0, 10) == 10);
	CHECK(walk(c, &p2, NULL, NULL, 7, KVC_SCAN_KEYS_ONLY, 1, 200) == 50);
	CHECK_RC(kvc_scan_open(c, &s, NULL, NULL, NULL, 0, 8), -KVC_INVALID);
	CHECK(s == NULL);
	kvc_scan_close(NULL);
	CHECK_RC(kvc_send_scan(c, NULL, NULL, NULL, 0, 0), -KVC_INVALID);
}

static void test_backup(kvc_conn *c, const struct kvd_proc *k)
{
	char dir[200], cmd[240];
	uint64_t keys, n;

	snprintf(dir, sizeof(dir), "%s-backup", k->dir);
	CHECK_RC(kvc_count(c, NULL, 0, &n), 0);
	CHECK_RC(kvc_backup(c, dir, &keys), 0);
	CHECK(keys == n && n > 0);
	CHECK_RC(kvc_backup(c, dir, NULL), -KVC_BAD_ARGS); /* not empty */
	CHECK(strstr(kvc_errmsg(c), "empty"));
	CHECK_RC(kvc_backup(c, "relative/dir", NULL), -KVC_BAD_ARGS);
	CHECK_RC(kvc_backup(c, NULL, NULL), -KVC_INVALID);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

int main(void)
{
	/* test_backup gives absolute paths */
	static const char *const backup_anywhere[] = {"--backup-anywhere",
						      "yes", NULL};
	struct kvd_proc k;
	kvc_conn *c;

	test_library();
	test_unconnected();
	kvd_start(&k, backup_anywhere);
	c = kvt_connect(k.port, 10000);
	test_basic(c);
	test_numbers(c);
	test_multi(c);
	test_server_errors(c);
	test_accessors(c);
	test_queued_forms(c);
	test_scan(c);
	test_own_writes(c, &k);
	test_backup(c, &k);
	/* reconnecting drops the old connection and its unread replies */
	CHECK_RC(kvc_send_ping(c, NULL, 0), 0);
	CHECK_RC(kvc_connect(c, "127.0.0.1", k.port), 0);
	CHECK(kvc_pending(c) == 0);
	CHECK_RC(kvc_ping(c, NULL, 0, NULL), 0);
	kvc_close(c);
	kvd_stop(&k);
	return 0;
}
