/* mdoor_hello.c - the handshake: hello, isMaster / ismaster (also over
 * OP_QUERY), ping and buildInfo, which MongoDB answers before
 * authentication.  kvd presents itself as a standalone MongoDB 6.0
 * (maxWireVersion 17, minWireVersion 0, so that old and current drivers
 * both connect) without topologyVersion, so drivers poll rather than
 * stream their heartbeats, and with logicalSessionTimeoutMinutes, so they
 * use sessions (kvd accepts lsid and ignores it). */
#include <stdio.h>
#include <string.h>

#include <openssl/opensslv.h>
#include <openssl/crypto.h>

#include "mdoor_int.h"

/* saslSupportedMechs: "db.user": the mechanisms of that user, which
 * exists when a password is set and the name is the configured one (or
 * any name is taken).  MongoDB leaves the field out for a user it does
 * not know. */
static void sasl_mechs(struct mdoor_req *r, const bson_iter_t *it, bson_t *out)
{
	struct mdoor *d = r->mc->d;
	const char *s, *dot;
	bson_t arr;

	if (!BSON_ITER_HOLDS_UTF8(it) || !d->auth)
		return;
	s = bson_iter_utf8(it, NULL);
	dot = strchr(s, '.');
	if (!dot || (d->user && strcmp(dot + 1, d->user)))
		return;
	BSON_APPEND_ARRAY_BEGIN(out, "saslSupportedMechs", &arr);
	BSON_APPEND_UTF8(&arr, "0", "SCRAM-SHA-256");
	bson_append_array_end(out, &arr);
}

/* The types of hello's arguments, as mongod's IDL checks them (a driver
 * sends them right; a wrong one is 14, not silently taken). */
static int hello_args(const struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;
	const char *cmd, *want = NULL;

	bson_iter_init_from_data(&it, r->body, r->body_len);
	if (!bson_iter_next(&it))
		return 0;
	cmd = bson_iter_key(&it);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "helloOk") && !BSON_ITER_HOLDS_BOOL(&it) &&
		    !BSON_ITER_HOLDS_NUMBER(&it))
			want = "types '[bool, long, int, decimal, double]'";
		else if (!strcmp(k, "saslSupportedMechs") &&
			 !BSON_ITER_HOLDS_UTF8(&it))
			want = "type 'string'";
		else if (!strcmp(k, "speculativeAuthenticate") &&
			 !BSON_ITER_HOLDS_DOCUMENT(&it))
			want = "type 'object'";
		if (want)
			return mdoor_err(
			    err, MQL_TypeMismatch,
			    "BSON field '%s.%s' is the wrong type "
			    "'%s', expected %s",
			    cmd, k, mql_type_name(bson_iter_type(&it)), want);
	}
	return 0;
}

static int hello_reply(struct mdoor_req *r, bool legacy_name,
		       struct mql_error *err)
{
	struct mdoor_conn *mc = r->mc;
	bson_t *out = &r->reply;
	bson_iter_t it;
	bool hello_ok = false;

	if (hello_args(r, err))
		return -1;
	bson_iter_init_from_data(&it, r->body, r->body_len);
	bson_iter_next(&it);
	if (legacy_name)
		BSON_APPEND_BOOL(out, "ismaster", true);
	else
		BSON_APPEND_BOOL(out, "isWritablePrimary", true);
	BSON_APPEND_INT32(out, "maxBsonObjectSize", MDOOR_MAX_BSON);
	BSON_APPEND_INT32(out, "maxMessageSizeBytes", MDOOR_MAX_MESSAGE);
	BSON_APPEND_INT32(out, "maxWriteBatchSize", MDOOR_MAX_WRITE_BATCH);
	BSON_APPEND_DATE_TIME(out, "localTime", (int64_t)mdoor_now(mc->d));
	BSON_APPEND_INT32(out, "logicalSessionTimeoutMinutes",
			  MDOOR_SESSION_TIMEOUT_MIN);
	BSON_APPEND_INT64(out, "connectionId", (int64_t)mc->id);
	BSON_APPEND_INT32(out, "minWireVersion", MDOOR_WIRE_MIN);
	BSON_APPEND_INT32(out, "maxWireVersion", MDOOR_WIRE_MAX);
	BSON_APPEND_BOOL(out, "readOnly", false);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "helloOk"))
			hello_ok = bson_iter_as_bool(&it);
		else if (!strcmp(k, "saslSupportedMechs"))
			sasl_mechs(r, &it, out);
		else if (!strcmp(k, "speculativeAuthenticate") &&
			 BSON_ITER_HOLDS_DOCUMENT(&it))
			mdoor_auth_speculative(r, &it, out);
	}
	if (hello_ok)
		BSON_APPEND_BOOL(out, "helloOk", true);
	return 0;
}

static int cmd_hello(struct mdoor_req *r, struct mql_error *err)
{
	return hello_reply(r, false, err);
}

static int cmd_ismaster(struct mdoor_req *r, struct mql_error *err)
{
	return hello_reply(r, true, err);
}

static int cmd_ping(struct mdoor_req *r, struct mql_error *err)
{
	(void)r;
	(void)err;
	return 0;
}

static int cmd_buildinfo(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	bson_t *out = &r->reply, arr, sub;
	char git[128];

	(void)err;
	snprintf(git, sizeof(git), "kvd-%s", d->kvd_version);
	BSON_APPEND_UTF8(out, "version", MDOOR_MONGO_VERSION);
	BSON_APPEND_UTF8(out, "gitVersion", git);
	BSON_APPEND_ARRAY_BEGIN(out, "modules", &arr);
	bson_append_array_end(out, &arr);
	BSON_APPEND_UTF8(out, "allocator", "system");
	BSON_APPEND_UTF8(out, "javascriptEngine", "none");
	BSON_APPEND_UTF8(out, "sysInfo", "deprecated");
	BSON_APPEND_ARRAY_BEGIN(out, "versionArray", &arr);
	BSON_APPEND_INT32(&arr, "0", 6);
	BSON_APPEND_INT32(&arr, "1", 0);
	BSON_APPEND_INT32(&arr, "2", 0);
	BSON_APPEND_INT32(&arr, "3", 0);
	bson_append_array_end(out, &arr);
	BSON_APPEND_DOCUMENT_BEGIN(out, "openssl", &sub);
	BSON_APPEND_UTF8(&sub, "running", OpenSSL_version(OPENSSL_VERSION));
	BSON_APPEND_UTF8(&sub, "compiled", OPENSSL_VERSION_TEXT);
	bson_append_document_end(out, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(out, "buildEnvironment", &sub);
	bson_append_document_end(out, &sub);
	BSON_APPEND_INT32(out, "bits", (int)(sizeof(void *) * 8));
	BSON_APPEND_BOOL(out, "debug", false);
	BSON_APPEND_INT32(out, "maxBsonObjectSize", MDOOR_MAX_BSON);
	BSON_APPEND_ARRAY_BEGIN(out, "storageEngines", &arr);
	BSON_APPEND_UTF8(&arr, "0", "kvd");
	bson_append_array_end(out, &arr);
	BSON_APPEND_UTF8(out, "kvdVersion", d->kvd_version);
	return 0;
}

const struct mdoor_cmd mdoor_cmds_hello[] = {
    {"hello", cmd_hello, MDOOR_CMD_NOAUTH | MDOOR_CMD_LEGACY,
     MDOOR_CNT_COMMAND},
    {"isMaster", cmd_ismaster, MDOOR_CMD_NOAUTH | MDOOR_CMD_LEGACY,
     MDOOR_CNT_COMMAND},
    {"ismaster", cmd_ismaster, MDOOR_CMD_NOAUTH | MDOOR_CMD_LEGACY,
     MDOOR_CNT_COMMAND},
    {"ping", cmd_ping, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {"buildInfo", cmd_buildinfo, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {"buildinfo", cmd_buildinfo, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
