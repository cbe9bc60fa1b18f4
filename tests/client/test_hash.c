/* test_hash.c - libkvclient's hash calls against a real kvd: HSET, HGET,
 * HGETALL, HDEL, HINCRBY and HSCAN, synchronous and pipelined, WRONG_TYPE
 * both ways, the limits' errors, and a typed scan that gives back a
 * hash's fields and expiry and a string's value.
 */
#include <string.h>

#include "kvctest.h"

static void sync_calls(kvc_conn *c)
{
	kvc_val f[3] = {{"a", 1}, {"b", 1}, {"zz", 2}};
	kvc_val v[3] = {{"1", 1}, {"2", 1}, {"", 0}}, got[3], k, x;
	kvc_reply *r;
	uint64_t n;
	int64_t i;

	CHECK_RC(kvc_hset(c, "h", 1, f, v, 2, &n), 0);
	CHECK(n == 2);
	CHECK_RC(kvc_hset(c, "h", 1, f, v + 1, 1, &n), 0); /* a = "2" */
	CHECK(n == 0);
	CHECK_RC(kvc_hget(c, "h", 1, f, 3, got), 0);
	CHECK_VAL(got[0], "2");
	CHECK_VAL(got[1], "2");
	CHECK(got[2].p == NULL && got[2].len == 0);
	CHECK_RC(kvc_hgetall(c, "h", 1, &r), 0);
	CHECK_RC(kvc_reply_next(r, &k, &x), 0);
	CHECK_VAL(k, "a");
	CHECK_VAL(x, "2");
	CHECK_RC(kvc_reply_next(r, &k, &x), 0);
	CHECK_VAL(k, "b");
	CHECK_RC(kvc_reply_next(r, &k, &x), -KVC_END);
	CHECK_RC(kvc_hgetall(c, "none", 4, &r), -KVC_NOT_FOUND);
	CHECK_RC(kvc_hincrby(c, "h", 1, "n", 1, 40, &i), 0);
	CHECK_RC(kvc_hincrby(c, "h", 1, "n", 1, 2, &i), 0);
	CHECK(i == 42);
	CHECK_RC(kvc_hincrby(c, "h", 1, "n", 1, INT64_MAX, &i),
		 -KVC_NOT_INTEGER);
	CHECK(strstr(kvc_errmsg(c), "overflow"));
	CHECK_RC(kvc_hdel(c, "h", 1, f, 3, &n), 0);
	CHECK(n == 2);
	/* strings and hashes refuse each other */
	CHECK_RC(kvc_put(c, "s", 1, "v", 1, 0, 0), 0);
	CHECK_RC(kvc_hset(c, "s", 1, f, v, 1, &n), -KVC_WRONG_TYPE);
	CHECK_RC(kvc_hget(c, "s", 1, f, 1, got), -KVC_WRONG_TYPE);
	CHECK_RC(kvc_get(c, "h", 1, &x), -KVC_WRONG_TYPE);
	/* argument checks before anything is sent */
	CHECK_RC(kvc_hset(c, "h", 1, f, NULL, 1, &n), -KVC_INVALID);
	CHECK_RC(kvc_hget(c, "h", 1, f, 0, got), -KVC_INVALID);
	CHECK_RC(kvc_hscan(c, "h", 1, NULL, 0, &r), -KVC_INVALID);
}

static void scan_pages(kvc_conn *c)
{
	kvc_val f[50], v[50], start = {NULL, 0}, k, x;
	char names[50][8];
	kvc_reply *r;
	uint64_t n;
	unsigned seen = 0, pages = 0;
	char last[8] = "";
	int rc;

	for (int i = 0; i < 50; i++) {
		snprintf(names[i], sizeof(names[i]), "f%02d", 49 - i);
		f[i] = (kvc_val){names[i], strlen(names[i])};
		v[i] = (kvc_val){"v", 1};
	}
	CHECK_RC(kvc_hset(c, "big", 3, f, v, 50, &n), 0);
	CHECK(n == 50);
	do {
		char next[8] = "";

		CHECK_RC(kvc_hscan(c, "big", 3, &start, 7, &r), 0);
		pages++;
		while ((rc = kvc_reply_next(r, &k, &x)) == 0) {
			CHECK(k.len == 3 && memcmp(k.p, last, 3) > 0);
			memcpy(last, k.p, 3);
			seen++;
		}
		CHECK_RC(rc, -KVC_END);
		rc = kvc_reply_cursor(r, &x);
		if (rc == 0) {
			memcpy(next, x.p, x.len < 7 ? x.len : 7);
			memcpy(names[0], next, sizeof(next));
			start = (kvc_val){names[0], strlen(names[0])};
		}
	} while (rc == 0);
	CHECK_RC(rc, -KVC_END);
	CHECK(seen == 50 && pages == 8);
}

static void pipelined(kvc_conn *c)
{
	kvc_val f = {"p", 1}, v = {"x", 1};
	kvc_reply *r;
	int64_t i;

	CHECK_RC(kvc_send_hset(c, "q", 1, &f, &v, 1), 0);
	CHECK_RC(kvc_send_hincrby(c, "q", 1, "n", 1, 7), 0);
	CHECK_RC(kvc_send_hget(c, "q", 1, &f, 1), 0);
	CHECK_RC(kvc_send_hdel(c, "q", 1, &f, 1), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &i), 0);
	CHECK(i == 1);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &i), 0);
	CHECK(i == 7);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &v), 0);
	CHECK_VAL(v, "x");
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &i), 0);
	CHECK(i == 1);
}

static void typed_scan(kvc_conn *c)
{
	kvc_val f[2] = {{"b", 1}, {"a", 1}}, v[2] = {{"2", 1}, {"1", 1}};
	kvc_val k, x, fld, val;
	kvc_scan *s;
	unsigned type;
	int64_t ttl;

	CHECK_RC(kvc_flushall(c), 0);
	CHECK_RC(kvc_hset(c, "h", 1, f, v, 2, NULL), 0);
	CHECK_RC(kvc_expire(c, "h", 1, 60000), 0);
	CHECK_RC(kvc_put(c, "s", 1, "str", 3, 0, 0), 0);
	CHECK_RC(kvc_scan_open(c, &s, NULL, NULL, NULL, 1, KVC_SCAN_TYPED), 0);
	CHECK_RC(kvc_scan_next(s, &k, &x), -KVC_INVALID);
	CHECK_RC(kvc_scan_next_typed(s, &k, &type, &ttl, &x), 0);
	CHECK_VAL(k, "h");
	CHECK(type == KVC_TYPE_HASH && ttl > 0 && ttl <= 60000);
	CHECK_RC(kvc_fields_next(&x, &fld, &val), 0);
	CHECK_VAL(fld, "b");
	CHECK_VAL(val, "2");
	CHECK_RC(kvc_fields_next(&x, &fld, &val), 0);
	CHECK_VAL(fld, "a");
	CHECK_RC(kvc_fields_next(&x, &fld, &val), -KVC_END);
	CHECK_RC(kvc_scan_next_typed(s, &k, &type, &ttl, &x), 0);
	CHECK_VAL(k, "s");
	CHECK(type == KVC_TYPE_STRING && ttl == -1);
	CHECK_VAL(x, "str");
	CHECK_RC(kvc_scan_next_typed(s, &k, &type, &ttl, &x), -KVC_END);
	kvc_scan_close(s);
	CHECK_RC(kvc_scan_open(c, &s, NULL, NULL, NULL, 0,
			       KVC_SCAN_TYPED | KVC_SCAN_KEYS_ONLY),
		 -KVC_INVALID);
}

static void limits(void)
{
	static const char *const extra[] = {"--max-hash-fields", "3", NULL};
	kvc_val f[4] = {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}};
	struct kvd_proc k;
	kvc_conn *c;
	uint64_t n;

	kvd_start(&k, extra);
	c = kvt_connect(k.port, 20000);
	CHECK_RC(kvc_hset(c, "h", 1, f, f, 4, &n), -KVC_VALUE_TOO_LARGE);
	CHECK(strstr(kvc_errmsg(c), "max-hash-fields"));
	CHECK_RC(kvc_hset(c, "h", 1, f, f, 3, &n), 0);
	CHECK(n == 3);
	kvc_close(c);
	kvd_stop(&k);
}

int main(void)
{
	struct kvd_proc k;
	kvc_conn *c;

	kvd_start(&k, NULL);
	c = kvt_connect(k.port, 20000);
	sync_calls(c);
	scan_pages(c);
	pipelined(c);
	typed_scan(c);
	kvc_close(c);
	kvd_stop(&k);
	limits();
	return 0;
}
