/* mdoor_admin.c - the server commands drivers and shells run besides the
 * handshake: whatsmyuri, getParameter, hostInfo, serverStatus (from the
 * host's figures and the door's counters), connectionStatus, endSessions
 * (sessions are accepted and hold nothing), logout, and the two answers
 * mongosh asks for at start, getCmdLineOpts and getLog (kvd keeps no log
 * in memory: an empty one). */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "mdoor_int.h"

static int cmd_whatsmyuri(struct mdoor_req *r, struct mql_error *err)
{
	(void)err;
	BSON_APPEND_UTF8(&r->reply, "you", r->mc->remote);
	return 0;
}

/* getParameter: the parameters drivers and shells ask for. */
static bool param(struct mdoor_req *r, const char *name, bool all)
{
	struct mdoor *d = r->mc->d;
	bson_t *out = &r->reply, sub;

	if (all || !strcmp(name, "featureCompatibilityVersion")) {
		BSON_APPEND_DOCUMENT_BEGIN(out, "featureCompatibilityVersion",
					   &sub);
		BSON_APPEND_UTF8(&sub, "version", "6.0");
		bson_append_document_end(out, &sub);
		if (!all)
			return true;
	}
	if (all || !strcmp(name, "authenticationMechanisms")) {
		BSON_APPEND_ARRAY_BEGIN(out, "authenticationMechanisms", &sub);
		BSON_APPEND_UTF8(&sub, "0", "SCRAM-SHA-256");
		bson_append_array_end(out, &sub);
		if (!all)
			return true;
	}
	if (all || !strcmp(name, "cursorTimeoutMillis")) {
		BSON_APPEND_INT64(out, "cursorTimeoutMillis",
				  (int64_t)d->cursor_timeout_ms);
		if (!all)
			return true;
	}
	return all;
}

static int cmd_getparameter(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;
	bool any = false;

	mdoor_cmd_value(r, &it);
	if (BSON_ITER_HOLDS_UTF8(&it) &&
	    !strcmp(bson_iter_utf8(&it, NULL), "*"))
		return param(r, "", true) ? 0 : -1;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$' || !strcmp(k, "lsid") || !strcmp(k, "comment"))
			continue;
		any |= param(r, k, false);
	}
	if (!any)
		return mdoor_err(err, MDOOR_InvalidOptions,
				 "no option found to get");
	return 0;
}

static void sys_info(struct mdoor *d, bson_t *out)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	char host[256];
	bson_t sub;
	struct utsname u;

	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "%s", d->hostname);
	host[sizeof(host) - 1] = '\0';
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	BSON_APPEND_DOCUMENT_BEGIN(out, "system", &sub);
	BSON_APPEND_DATE_TIME(&sub, "currentTime", (int64_t)mdoor_now(d));
	BSON_APPEND_UTF8(&sub, "hostname", host);
	BSON_APPEND_INT32(&sub, "cpuAddrSize", (int)(sizeof(void *) * 8));
	BSON_APPEND_INT64(&sub, "memSizeMB",
			  pages > 0 && psize > 0
			      ? (int64_t)pages * psize / (1024 * 1024)
			      : 0);
	BSON_APPEND_INT32(&sub, "numCores", (int)sysconf(_SC_NPROCESSORS_ONLN));
	BSON_APPEND_UTF8(&sub, "cpuArch", u.machine);
	BSON_APPEND_BOOL(&sub, "numaEnabled", false);
	bson_append_document_end(out, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(out, "os", &sub);
	BSON_APPEND_UTF8(&sub, "type", u.sysname);
	BSON_APPEND_UTF8(&sub, "name", u.sysname);
	BSON_APPEND_UTF8(&sub, "version", u.release);
	bson_append_document_end(out, &sub);
}

static int cmd_hostinfo(struct mdoor_req *r, struct mql_error *err)
{
	bson_t sub;

	(void)err;
	sys_info(r->mc->d, &r->reply);
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "extra", &sub);
	bson_append_document_end(&r->reply, &sub);
	return 0;
}

static void status_counters(struct mdoor *d, bson_t *out)
{
	struct mdoor_counters c;
	bson_t sub, sub2, sub3;

	mdoor_counters(d, &c);
	BSON_APPEND_DOCUMENT_BEGIN(out, "opcounters", &sub);
	BSON_APPEND_INT64(&sub, "insert", (int64_t)c.insert);
	BSON_APPEND_INT64(&sub, "query", (int64_t)c.query);
	BSON_APPEND_INT64(&sub, "update", (int64_t)c.update);
	BSON_APPEND_INT64(&sub, "delete", (int64_t)c.del);
	BSON_APPEND_INT64(&sub, "getmore", (int64_t)c.getmore);
	BSON_APPEND_INT64(&sub, "command", (int64_t)c.command);
	bson_append_document_end(out, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(out, "network", &sub);
	BSON_APPEND_INT64(&sub, "bytesIn", (int64_t)c.bytes_in);
	BSON_APPEND_INT64(&sub, "bytesOut", (int64_t)c.bytes_out);
	BSON_APPEND_INT64(&sub, "numRequests", (int64_t)c.requests);
	bson_append_document_end(out, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(out, "metrics", &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "cursor", &sub2);
	BSON_APPEND_INT64(&sub2, "timedOut", (int64_t)c.cursors_timed_out);
	BSON_APPEND_DOCUMENT_BEGIN(&sub2, "open", &sub3);
	BSON_APPEND_INT64(&sub3, "total", (int64_t)c.cursors_open);
	bson_append_document_end(&sub2, &sub3);
	bson_append_document_end(&sub, &sub2);
	bson_append_document_end(out, &sub);
}

static int cmd_serverstatus(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	struct mdoor_stats st;
	uint64_t now = mdoor_now(d),
		 up = now > d->start_ms ? now - d->start_ms : 0;
	bson_t *out = &r->reply, sub;

	(void)err;
	memset(&st, 0, sizeof(st));
	if (d->host.stats)
		d->host.stats(d->host.ctx, &st);
	BSON_APPEND_UTF8(out, "host", d->hostname);
	BSON_APPEND_UTF8(out, "version", MDOOR_MONGO_VERSION);
	BSON_APPEND_UTF8(out, "process", "kvd");
	BSON_APPEND_INT64(out, "pid", d->pid);
	BSON_APPEND_DOUBLE(out, "uptime", (double)(up / 1000));
	BSON_APPEND_INT64(out, "uptimeMillis", (int64_t)up);
	BSON_APPEND_INT64(out, "uptimeEstimate", (int64_t)(up / 1000));
	BSON_APPEND_DATE_TIME(out, "localTime", (int64_t)now);
	BSON_APPEND_DOCUMENT_BEGIN(out, "connections", &sub);
	BSON_APPEND_INT64(&sub, "current", (int64_t)st.conn_current);
	BSON_APPEND_INT64(&sub, "available", (int64_t)st.conn_available);
	BSON_APPEND_INT64(&sub, "totalCreated", (int64_t)st.conn_total);
	bson_append_document_end(out, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(out, "mem", &sub);
	BSON_APPEND_INT32(&sub, "bits", (int)(sizeof(void *) * 8));
	BSON_APPEND_INT64(&sub, "resident", (int64_t)st.mem_resident_mb);
	BSON_APPEND_INT64(&sub, "virtual", (int64_t)st.mem_virtual_mb);
	BSON_APPEND_BOOL(&sub, "supported", true);
	bson_append_document_end(out, &sub);
	status_counters(d, out);
	if (d->host.status_extra)
		d->host.status_extra(d->host.ctx, out);
	return 0;
}

/* connectionStatus: the user this connection authenticated as (kvd's
 * one user, root), and with showPrivileges what root may do: any action
 * on any resource. */
static int cmd_connectionstatus(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"showPrivileges", MDOOR_T_BOOLISH, false},
	};
	struct mdoor_conn *mc = r->mc;
	bool authed = mc->d->auth && mc->authed;
	bson_t info, arr, one, res, acts;
	mdoor_av a[1];

	if (mdoor_args(r, spec, 1, a, err))
		return -1;
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "authInfo", &info);
	BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUsers", &arr);
	if (authed) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
		BSON_APPEND_UTF8(&one, "user", mc->user);
		BSON_APPEND_UTF8(&one, "db", mc->auth_db);
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(&info, &arr);
	BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserRoles", &arr);
	if (authed) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
		BSON_APPEND_UTF8(&one, "role", "root");
		BSON_APPEND_UTF8(&one, "db", "admin");
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(&info, &arr);
	if (mdoor_arg_bool(&a[0].it)) {
		BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserPrivileges",
					&arr);
		if (authed) {
			BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
			BSON_APPEND_DOCUMENT_BEGIN(&one, "resource", &res);
			BSON_APPEND_BOOL(&res, "anyResource", true);
			bson_append_document_end(&one, &res);
			BSON_APPEND_ARRAY_BEGIN(&one, "actions", &acts);
			BSON_APPEND_UTF8(&acts, "0", "anyAction");
			bson_append_array_end(&one, &acts);
			bson_append_document_end(&arr, &one);
		}
		bson_append_array_end(&info, &arr);
	}
	bson_append_document_end(&r->reply, &info);
	return 0;
}

static int cmd_endsessions(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;

	mdoor_cmd_value(r, &it);
	if (!BSON_ITER_HOLDS_ARRAY(&it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "BSON field 'endSessions.endSessions' is the "
				 "wrong type '%s', expected type 'array'",
				 mql_type_name(bson_iter_type(&it)));
	return 0;
}

static int cmd_logout(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor_conn *mc = r->mc;

	(void)err;
	if (mc->d->auth) {
		mc->authed = false;
		mc->user[0] = '\0';
		mc->auth_db[0] = '\0';
	}
	return 0;
}

static int cmd_getcmdlineopts(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor *d = r->mc->d;
	bson_t arr, sub;
	char key[16];

	(void)err;
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "argv", &arr);
	for (size_t i = 0; d->argv && d->argv[i]; i++) {
		snprintf(key, sizeof(key), "%zu", i);
		BSON_APPEND_UTF8(&arr, key, d->argv[i]);
	}
	bson_append_array_end(&r->reply, &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "parsed", &sub);
	bson_append_document_end(&r->reply, &sub);
	return 0;
}

static int cmd_getlog(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;
	bson_t arr;

	mdoor_cmd_value(r, &it);
	if (!BSON_ITER_HOLDS_UTF8(&it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "Argument to getLog must be of type String");
	if (!strcmp(bson_iter_utf8(&it, NULL), "*")) {
		BSON_APPEND_ARRAY_BEGIN(&r->reply, "names", &arr);
		BSON_APPEND_UTF8(&arr, "0", "global");
		BSON_APPEND_UTF8(&arr, "1", "startupWarnings");
		bson_append_array_end(&r->reply, &arr);
		return 0;
	}
	if (strcmp(bson_iter_utf8(&it, NULL), "global") &&
	    strcmp(bson_iter_utf8(&it, NULL), "startupWarnings"))
		return mdoor_err(err, MQL_BadValue, "No log named '%s'",
				 bson_iter_utf8(&it, NULL));
	BSON_APPEND_INT32(&r->reply, "totalLinesWritten", 0);
	BSON_APPEND_ARRAY_BEGIN(&r->reply, "log", &arr);
	bson_append_array_end(&r->reply, &arr);
	return 0;
}

const struct mdoor_cmd mdoor_cmds_admin[] = {
    {"whatsmyuri", cmd_whatsmyuri, 0, MDOOR_CNT_COMMAND},
    {"getParameter", cmd_getparameter, 0, MDOOR_CNT_COMMAND},
    {"hostInfo", cmd_hostinfo, 0, MDOOR_CNT_COMMAND},
    {"serverStatus", cmd_serverstatus, 0, MDOOR_CNT_COMMAND},
    {"connectionStatus", cmd_connectionstatus, MDOOR_CMD_NOAUTH,
     MDOOR_CNT_COMMAND},
    {"endSessions", cmd_endsessions, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {"logout", cmd_logout, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {"getCmdLineOpts", cmd_getcmdlineopts, 0, MDOOR_CNT_COMMAND},
    {"getLog", cmd_getlog, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
