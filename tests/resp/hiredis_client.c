/* hiredis_client.c - a hiredis (Debian libhiredis) client run against kvd's
 * RESP port by test_hiredis.py: binary-safe SET/GET with %b arguments, a
 * pipeline of 10,000 appended commands read back in order, counters, an
 * error reply in the middle of a pipeline, MGET with a missing key.
 *
 * usage: hiredis_client PORT; exit 0 when every reply is as expected.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIPELINE 10000

static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s\n", what);
		failures++;
	}
}

static redisReply *get_reply(redisContext *c)
{
	void *r = NULL;

	if (redisGetReply(c, &r) != REDIS_OK) {
		fprintf(stderr, "FAIL: connection: %s\n", c->errstr);
		exit(1);
	}
	return r;
}

static void binary_safe(redisContext *c)
{
	char key[64], val[1000];
	redisReply *r;

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (char)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)(i % 256);
	r = redisCommand(c, "SET %b %b", key, sizeof(key), val, sizeof(val));
	check(r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK"),
	      "SET binary");
	freeReplyObject(r);
	r = redisCommand(c, "GET %b", key, sizeof(key));
	check(r && r->type == REDIS_REPLY_STRING && r->len == sizeof(val) &&
		  !memcmp(r->str, val, sizeof(val)),
	      "GET binary");
	freeReplyObject(r);
}

/* All writes first, then all reads: a read waits for the connection's
 * earlier writes to commit, so interleaving them would cost a commit per
 * pair (the server's ordering rule, see kvd/net/conn.h). */
static void pipeline(redisContext *c)
{
	redisReply *r;
	int bad = 0;

	for (int i = 0; i < PIPELINE; i++)
		redisAppendCommand(c, "SET hk:%d v%d", i, i);
	redisAppendCommand(c, "NOSUCHCOMMAND x");
	for (int i = 0; i < PIPELINE; i++)
		redisAppendCommand(c, "GET hk:%d", i);
	for (int i = 0; i < PIPELINE; i++) {
		r = get_reply(c);
		bad += r->type != REDIS_REPLY_STATUS;
		freeReplyObject(r);
	}
	r = get_reply(c);
	bad +=
	    r->type != REDIS_REPLY_ERROR || !strstr(r->str, "unknown command");
	freeReplyObject(r);
	for (int i = 0; i < PIPELINE; i++) {
		char want[32];

		snprintf(want, sizeof(want), "v%d", i);
		r = get_reply(c);
		bad += r->type != REDIS_REPLY_STRING || strcmp(r->str, want);
		freeReplyObject(r);
	}
	check(bad == 0, "pipeline replies in order");
}

static void counters(redisContext *c)
{
	redisReply *r;

	freeReplyObject(redisCommand(c, "DEL hcounter"));
	for (int i = 1; i <= 100; i++)
		redisAppendCommand(c, "INCRBY hcounter %d", i);
	for (int i = 1; i <= 100; i++) {
		r = get_reply(c);
		check(r->type == REDIS_REPLY_INTEGER &&
			  r->integer == (long long)i * (i + 1) / 2,
		      "INCRBY running sum");
		freeReplyObject(r);
	}
	r = redisCommand(c, "MGET hk:1 nope hk:2");
	check(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		  r->element[0]->type == REDIS_REPLY_STRING &&
		  r->element[1]->type == REDIS_REPLY_NIL &&
		  !strcmp(r->element[2]->str, "v2"),
	      "MGET");
	freeReplyObject(r);
}

int main(int argc, char **argv)
{
	redisContext *c;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PORT\n", argv[0]);
		return 2;
	}
	c = redisConnect("127.0.0.1", atoi(argv[1]));
	if (!c || c->err) {
		fprintf(stderr, "FAIL: connect: %s\n", c ? c->errstr : "?");
		return 1;
	}
	binary_safe(c);
	pipeline(c);
	counters(c);
	redisFree(c);
	return failures ? 1 : 0;
}
