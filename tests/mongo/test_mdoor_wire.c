/* test_mdoor_wire.c - the MongoDB door's framing and handshake, bytes in
 * and bytes out: CRC-32C, OP_MSG flags, checksums, sections and limits,
 * OP_QUERY's legacy handshake, OP_COMPRESSED and other opcodes refused,
 * the generic arguments, and the hello / buildInfo replies drivers
 * read. */
#include "mdoortest.h"

static void test_crc(void)
{
	uint8_t z[32], f[32], a[32];

	memset(z, 0, sizeof(z));
	memset(f, 0xff, sizeof(f));
	for (int i = 0; i < 32; i++)
		a[i] = (uint8_t)i;
	/* RFC 3720 (iSCSI) B.4 and the classic check value */
	CHECK(mdoor_crc32c(0, (const uint8_t *)"123456789", 9) == 0xe3069283u,
	      "crc of 123456789");
	CHECK(mdoor_crc32c(0, z, 32) == 0x8a9136aau, "crc of zeros");
	CHECK(mdoor_crc32c(0, f, 32) == 0x62a8ab43u, "crc of ones");
	CHECK(mdoor_crc32c(0, a, 32) == 0x46dd794eu, "crc of 0..31");
	CHECK(mdoor_crc32c(mdoor_crc32c(0, a, 13), a + 13, 19) == 0x46dd794eu,
	      "crc in two parts");
}

static void test_hello(struct mdoor *d)
{
	struct tconn *c = th_open(d, 7);
	bson_t *r = run_on(c, "admin", J("{'hello': 1, 'helloOk': true}"));

	CHECK(ok_of(r) == 1, "hello ok");
	CHECK_JSON(r, "isWritablePrimary", "{ 'v' : true }");
	CHECK(int_at(r, "maxBsonObjectSize") == 16777216, "maxBsonObjectSize");
	CHECK(int_at(r, "maxMessageSizeBytes") == 48000000, "maxMessage");
	CHECK(int_at(r, "maxWriteBatchSize") == 100000, "maxWriteBatchSize");
	CHECK(int_at(r, "logicalSessionTimeoutMinutes") == 30, "sessions");
	CHECK(int_at(r, "connectionId") == 7, "connectionId");
	CHECK(int_at(r, "minWireVersion") == 0, "minWireVersion");
	CHECK(int_at(r, "maxWireVersion") == 17, "maxWireVersion");
	CHECK_JSON(r, "readOnly", "{ 'v' : false }");
	CHECK_JSON(r, "helloOk", "{ 'v' : true }");
	CHECK_JSON(r, "localTime",
		   "{ 'v' : { '$date' : '2023-11-14T22:13:20Z' } }");
	CHECK(count_at(r, "saslSupportedMechs") == -1, "no mechs unasked");
	bson_destroy(r);
	r = run(c, "{'isMaster': 1}");
	CHECK_JSON(r, "ismaster", "{ 'v' : true }");
	CHECK(int_at(r, "helloOk") == -999, "no helloOk unasked");
	bson_destroy(r);
	r = run(c, "{'buildInfo': 1}");
	CHECK(!strcmp(str_at(r, "version"), "6.0.0"), "version %s",
	      str_at(r, "version"));
	CHECK(!strcmp(str_at(r, "gitVersion"), "kvd-0.1.0"), "gitVersion");
	CHECK_JSON(r, "versionArray", "{ 'v' : [ 6, 0, 0, 0 ] }");
	bson_destroy(r);
	r = run(c, "{'ping': 1}");
	CHECK_JSON(r, "ok", "{ 'v' : 1.0 }");
	bson_destroy(r);
	r = run(c, "{'getParameter': 1, 'featureCompatibilityVersion': 1}");
	CHECK_JSON(r, "featureCompatibilityVersion",
		   "{ 'v' : { 'version' : '6.0' } }");
	bson_destroy(r);
	r = run(c, "{'whatsmyuri': 1}");
	CHECK(!strcmp(str_at(r, "you"), "127.0.0.1:50000"), "whatsmyuri");
	bson_destroy(r);
	r = run(c, "{'getParameter': '*'}");
	CHECK(count_at(r, "authenticationMechanisms") == 1 &&
		  int_at(r, "cursorTimeoutMillis") == 600000,
	      "getParameter '*'");
	bson_destroy(r);
	r = run(c, "{'getParameter': 1, 'noSuchThing': 1}");
	CHECK_ERR(r, 72, "no option found to get");
	bson_destroy(r);
	r = run(c, "{'hostInfo': 1}");
	CHECK(int_at(r, "system.numCores") >= 1 &&
		  int_at(r, "system.memSizeMB") > 0 &&
		  !strcmp(str_at(r, "os.type"), "Linux"),
	      "hostInfo");
	bson_destroy(r);
	r = run(c, "{'getLog': 'startupWarnings'}");
	CHECK_JSON(r, "log", "{ 'v' : [  ] }");
	bson_destroy(r);
	r = run(c, "{'getLog': '*'}");
	CHECK_JSON(r, "names", "{ 'v' : [ 'global', 'startupWarnings' ] }");
	bson_destroy(r);
	r = run(c, "{'getCmdLineOpts': 1}");
	CHECK(count_at(r, "argv") == 0 && ok_of(r) == 1, "getCmdLineOpts");
	bson_destroy(r);
	r = run(c, "{'endSessions': [{'id': 1}]}");
	CHECK(ok_of(r) == 1, "endSessions");
	bson_destroy(r);
	r = run(c, "{'serverStatus': 1}");
	CHECK(int_at(r, "uptimeMillis") == 5000, "uptime");
	CHECK(int_at(r, "connections.current") == 3, "connections");
	CHECK(int_at(r, "opcounters.command") >= 6, "opcounters");
	CHECK(!strcmp(str_at(r, "host"), "testhost:27017"), "host");
	bson_destroy(r);
	th_close_conn(c);
}

/* Errors of the framing and of the generic arguments. */
static void test_errors(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *r;

	r = run(c, "{'foo': 1}");
	CHECK_ERR(r, 59, "no such command: 'foo'");
	CHECK(!strcmp(str_at(r, "codeName"), "CommandNotFound"), "codeName");
	bson_destroy(r);
	r = run(c, "{'ping': 1, 'txnNumber': {'$numberLong': '1'}}");
	CHECK_ERR(r, 20, "Transaction numbers are only allowed");
	bson_destroy(r);
	r = run(c, "{'find': 'c', 'startTransaction': true, 'autocommit': "
		   "false}");
	CHECK_ERR(r, 20, NULL);
	bson_destroy(r);
	r = run(c, "{'ping': 1, 'apiVersion': '2'}");
	CHECK_ERR(r, 322, NULL);
	bson_destroy(r);
	r = run(c, "{'ping': 1, 'apiVersion': '1', 'apiStrict': false, 'lsid': "
		   "{'id': 1}, '$readPreference': {'mode': 'primary'}, "
		   "'$clusterTime': {}, 'maxTimeMS': 5, 'comment': 'x', "
		   "'readConcern': {'level': 'local'}}");
	CHECK(ok_of(r) == 1, "generic arguments accepted");
	bson_destroy(r);
	r = run_on(c, "a.b", J("{'ping': 1}"));
	CHECK_ERR(r, 73, "Invalid database name");
	bson_destroy(r);
	{ /* no $db */
		bson_t *b = J("{'ping': 1}");
		size_t n;
		uint8_t *m = msg(b, 0, NULL, 0, &n);

		feed(c, m, n);
		free(m);
		bson_destroy(b);
		r = take(c, NULL, NULL);
		CHECK_ERR(r, 40571, "$db");
		bson_destroy(r);
	}
	CHECK(c->closed == 0, "not closed by command errors");
	th_close_conn(c);
}

/* Flags, checksums, sections. */
static void test_msg(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *b = J("{'ping': 1, '$db': 'admin'}"), *r;
	size_t n;
	uint8_t *m;
	int op, rt;

	m = msg(b, 1, NULL, 0, &n); /* checksum */
	CHECK(feed(c, m, n) == n, "consumed");
	r = take(c, &op, &rt);
	CHECK(ok_of(r) == 1 && op == 2013 && rt == (int)get32(m + 4),
	      "checksummed ping");
	bson_destroy(r);
	m[n - 1] ^= 1;
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 288, "checksum");
	CHECK(c->closed == 1, "closed after a bad checksum");
	bson_destroy(r);
	th_close_conn(c);

	c = th_open(d, 2);
	m = msg(b, 1u << 20, NULL, 0, &n); /* optional bit: ignored */
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK(ok_of(r) == 1, "optional flag ignored");
	bson_destroy(r);
	m = msg(b, 1u << 16, NULL, 0, &n); /* exhaustAllowed: one reply */
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK(ok_of(r) == 1 && c->len == 0, "exhaustAllowed: one reply");
	bson_destroy(r);
	m = msg(b, 2, NULL, 0, &n); /* moreToCome: no reply */
	feed(c, m, n);
	free(m);
	CHECK(c->len == 0, "moreToCome answered nothing");
	m = msg(b, 1u << 3, NULL, 0, &n); /* required bit unknown */
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 223, "illegal flags");
	CHECK(c->closed == 1, "closed after illegal flags");
	bson_destroy(r);
	th_close_conn(c);

	c = th_open(d, 3);
	m = msg(b, 0, NULL, 0, &n);
	m[20] = 9; /* section kind 9 */
	feed(c, m, n);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 40432, "Unknown section kind");
	bson_destroy(r);
	m[20] = 0;
	put32(m + 21, 4); /* a body whose length is below 5 */
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 22, NULL);
	bson_destroy(r);
	CHECK(c->closed == 0, "section errors do not close");
	th_close_conn(c);
	bson_destroy(b);
}

static void test_sections(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *b = J("{'insert': 'c', '$db': 'test', 'documents': []}"), *r;
	bson_t *doc = J("{'a': 1}");
	struct tseq s = {"documents", &doc, 1};
	size_t n;
	uint8_t *m;

	m = msg(b, 0, &s, 1, &n);
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 40433, "Duplicate field documents");
	bson_destroy(r);
	bson_destroy(b);
	b = J("{'insert': 'c', '$db': 'test'}");
	{
		struct tseq two[2] = {{"documents", &doc, 1},
				      {"documents", &doc, 1}};

		m = msg(b, 0, two, 2, &n);
		feed(c, m, n);
		free(m);
		r = take(c, NULL, NULL);
		CHECK_ERR(r, 40431, "Duplicate document sequence");
		bson_destroy(r);
	}
	{
		struct tseq five[5] = {{"a", &doc, 1},
				       {"b", &doc, 1},
				       {"c", &doc, 1},
				       {"d", &doc, 1},
				       {"e", &doc, 1}};

		m = msg(b, 0, five, 5, &n);
		feed(c, m, n);
		free(m);
		r = take(c, NULL, NULL);
		CHECK_ERR(r, 17, "too many document sequences");
		bson_destroy(r);
	}
	{ /* a sequence's size past the message */
		m = msg(b, 0, &s, 1, &n);
		put32(m + 21 + b->len + 1, 1000);
		feed(c, m, n);
		free(m);
		r = take(c, NULL, NULL);
		CHECK_ERR(r, 17, "document sequence size");
		bson_destroy(r);
	}
	bson_destroy(b);
	bson_destroy(doc);
	th_close_conn(c);
}

/* A document nested past 200 levels is refused without recursion. */
static void test_nesting(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *b = bson_new(), *r;
	bson_t lv[300];
	size_t n;
	uint8_t *m;

	BSON_APPEND_INT32(b, "ping", 1);
	BSON_APPEND_UTF8(b, "$db", "admin");
	bson_append_document_begin(b, "x", 1, &lv[0]);
	for (int i = 1; i < 300; i++)
		bson_append_document_begin(&lv[i - 1], "x", 1, &lv[i]);
	for (int i = 299; i > 0; i--)
		bson_append_document_end(&lv[i - 1], &lv[i]);
	bson_append_document_end(b, &lv[0]);
	m = msg(b, 0, NULL, 0, &n);
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 15, NULL);
	bson_destroy(r);
	bson_destroy(b);
	th_close_conn(c);
}

static void test_limits(struct mdoor *d, struct mdoor *dauth)
{
	struct tconn *c = th_open(d, 1);
	uint8_t h[16] = {0};
	size_t need = 0;
	bson_t *b, *r;
	uint8_t *m;
	size_t n;

	put32(h, 48000001); /* judged on its first 4 bytes */
	CHECK(mdoor_input(c->mc, h, 4, &need) == 4 && c->closed == 1,
	      "48,000,001 bytes refused at once");
	CHECK(mdoor_input(c->mc, h, 16, &need) == 0, "no input after close");
	th_close_conn(c);
	c = th_open(d, 1);
	put32(h, 15);
	CHECK(mdoor_input(c->mc, h, 16, NULL) == 16 && c->closed == 1,
	      "length below the header refused");
	th_close_conn(c);

	c = th_open(d, 1);
	b = J("{'ping': 1, '$db': 'admin'}");
	m = msg(b, 0, NULL, 0, &n);
	CHECK(mdoor_input(c->mc, m, n - 1, &need) == 0 && need == n,
	      "partial: need %zu", need);
	CHECK(feed(c, m, n) == n, "whole");
	r = take(c, NULL, NULL);
	CHECK(ok_of(r) == 1, "ping after a partial message");
	bson_destroy(r);
	free(m);
	bson_destroy(b);
	th_close_conn(c);

	/* before authentication: 16 KiB */
	c = th_open(dauth, 1);
	put32(h, 16385);
	CHECK(mdoor_input(c->mc, h, 4, NULL) == 4 && c->closed == 1,
	      "16 KiB + 1 refused before authentication");
	th_close_conn(c);
	c = th_open(dauth, 1);
	r = run(c, "{'find': 'c'}");
	CHECK_ERR(r, 13, "command find requires authentication");
	bson_destroy(r);
	r = run(c, "{'ping': 1}");
	CHECK(ok_of(r) == 1, "ping before authentication");
	bson_destroy(r);
	r = run(c, "{'buildInfo': 1}");
	CHECK(ok_of(r) == 1, "buildInfo before authentication");
	bson_destroy(r);
	th_close_conn(c);
}

static void test_legacy(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *q = J("{'isMaster': 1, 'client': {'driver': {'name': 't'}}}");
	bson_t *w = J("{'$query': {'ismaster': 1}, '$readPreference': "
		      "{'mode': 'primaryPreferred'}}");
	bson_t *f = J("{'find': 'c'}"), *r;
	size_t n;
	uint8_t *m;
	int op, rt;

	m = query_msg("admin.$cmd", q, &n);
	feed(c, m, n);
	r = take(c, &op, &rt);
	CHECK(op == 1 && rt == (int)get32(m + 4), "OP_REPLY to OP_QUERY");
	CHECK_JSON(r, "ismaster", "{ 'v' : true }");
	CHECK(int_at(r, "maxWireVersion") == 17, "legacy maxWireVersion");
	free(m);
	bson_destroy(r);
	m = query_msg("admin.$cmd", w, &n);
	feed(c, m, n);
	free(m);
	r = take(c, &op, NULL);
	CHECK(op == 1 && ok_of(r) == 1, "wrapped $query");
	bson_destroy(r);
	m = query_msg("test.$cmd", f, &n);
	feed(c, m, n);
	free(m);
	r = take(c, &op, NULL);
	CHECK(op == 1, "legacy error as OP_REPLY");
	CHECK_ERR(r, 352, "Unsupported OP_QUERY command: find");
	bson_destroy(r);
	m = query_msg("test.c", q, &n);
	feed(c, m, n);
	free(m);
	r = take(c, NULL, NULL);
	CHECK_ERR(r, 352, NULL);
	bson_destroy(r);
	CHECK(c->closed == 0, "legacy errors do not close");
	/* OP_COMPRESSED: refused in the sender's protocol, then closed */
	{
		uint8_t cm[25] = {0};

		put32(cm, 25);
		put32(cm + 4, 99);
		put32(cm + 12, 2012);
		put32(cm + 16, 2013);
		feed(c, cm, sizeof(cm));
		r = take(c, &op, &rt);
		CHECK(op == 2013 && rt == 99, "OP_COMPRESSED answered");
		CHECK_ERR(r, 17, "OP_COMPRESSED is not supported");
		CHECK(c->closed == 1, "closed after OP_COMPRESSED");
		bson_destroy(r);
	}
	th_close_conn(c);
	c = th_open(d, 1);
	{ /* OP_INSERT (removed in 6.0): closed, unanswered */
		uint8_t im[32] = {0};

		put32(im, 32);
		put32(im + 12, 2002);
		feed(c, im, sizeof(im));
		CHECK(c->len == 0 && c->closed == 1, "OP_INSERT closes");
	}
	th_close_conn(c);
	bson_destroy(q);
	bson_destroy(w);
	bson_destroy(f);
}

int main(void)
{
	struct memstore *ms = memstore_new();
	struct mdoor *d = th_door(ms, NULL);
	struct mdoor_config acfg = {
	    .password = "pencil", .password_len = 6, .kvd_version = "0.1.0"};
	struct mdoor *dauth = th_door(ms, &acfg);

	test_crc();
	test_hello(d);
	test_errors(d);
	test_msg(d);
	test_sections(d);
	test_nesting(d);
	test_limits(d, dauth);
	test_legacy(d);
	mdoor_free(d);
	mdoor_free(dauth);
	memstore_free(ms);
	return mt_done("unit_mdoor_wire");
}
