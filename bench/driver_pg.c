/* driver_pg.c - kvbench's PostgreSQL driver, through libpq.
 *
 * The table has two columns, key text primary key and value bytea: the
 * shape of the stories kvd comes from, so they can be rerun here.  Reads,
 * upserts (INSERT ... ON CONFLICT DO UPDATE) and scans (key >= $1 ORDER BY
 * key LIMIT $2) are prepared statements with binary parameters and results.
 *
 * Pipelining uses libpq's pipeline mode (PostgreSQL 14 and later), with a
 * Sync after every statement: each one is then its own transaction,
 * committed before its reply, exactly as in autocommit mode.  Without the
 * Syncs, a pipeline would be one transaction and one commit, a batch that
 * the other drivers do not get.  Each request therefore produces three
 * results: the statement's, a NULL that ends it, and the Sync's.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbench.h"

struct pconn {
	PGconn *c;
	PGresult *res, *prev; /* being read; last handed out */
	int state;	      /* 0 result, 1 its NULL, 2 the Sync */
};

/* CREATE TABLE IF NOT EXISTS says NOTICE on every run: not news. */
static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* key='value' (libpq's quoting: \\ and \\' escaped) and a blank; returns
 * the length it would have, as snprintf. */
static int conninfo_quote(char *out, size_t n, const char *key, const char *val)
{
	size_t len = (size_t)snprintf(out, n, "%s='", key);

	for (; *val; val++) {
		if (*val == '\\' || *val == '\'') {
			if (len + 1 < n)
				out[len] = '\\';
			len++;
		}
		if (len + 1 < n)
			out[len] = *val;
		len++;
	}
	if (len + 2 < n)
		memcpy(out + len, "' ", 3);
	else if (n)
		out[n - 1] = 0;
	return (int)len + 2;
}

static PGconn *open_pg(const struct kb_target *t, char *err, size_t errlen)
{
	char info[2048];
	PGconn *c;
	int n;

	/* libpq takes the last value of a repeated keyword: --conninfo
	 * overrides host, port and password. */
	n = snprintf(info, sizeof(info), "host=%s port=%u connect_timeout=5 ",
		     t->host, t->port);
	if (t->password)
		n += conninfo_quote(info + n, sizeof(info) - (size_t)n,
				    "password", t->password);
	if ((size_t)n >= sizeof(info) ||
	    (size_t)snprintf(info + n, sizeof(info) - (size_t)n, "%s",
			     t->conninfo ? t->conninfo : "") >=
		sizeof(info) - (size_t)n) {
		snprintf(err, errlen, "postgres: connection string too long");
		return NULL;
	}
	c = PQconnectdb(info);
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, errlen, "postgres %s:%u: %s", t->host, t->port,
			 c ? PQerrorMessage(c) : "out of memory");
		PQfinish(c);
		return NULL;
	}
	PQsetNoticeProcessor(c, quiet_notice, NULL);
	return c;
}

static int exec_ok(PGconn *c, PGresult *r, char *err, size_t errlen)
{
	ExecStatusType st = PQresultStatus(r);
	int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok)
		snprintf(err, errlen, "postgres: %s", PQerrorMessage(c));
	PQclear(r);
	return ok ? 0 : -1;
}

/* The quoted table name, or NULL: the name is the user's, and SQL. */
static char *table_ident(PGconn *c, const struct kb_target *t)
{
	const char *name = t->table ? t->table : "kvbench";

	return PQescapeIdentifier(c, name, strlen(name));
}

static int pg_setup(const struct kb_target *t, char *err, size_t errlen)
{
	PGconn *c = open_pg(t, err, errlen);
	char sql[512], *tab;
	int rc = -1;

	if (!c)
		return -1;
	if ((tab = table_ident(c, t))) {
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s "
			 "(key text PRIMARY KEY, value bytea)",
			 tab);
		rc = exec_ok(c, PQexec(c, sql), err, errlen);
		PQfreemem(tab);
	}
	PQfinish(c);
	return rc;
}

static int prepare(PGconn *c, const char *tab, char *err, size_t errlen)
{
	static const char *const stmt[][2] = {
	    {"get", "SELECT value FROM %s WHERE key = $1"},
	    {"put", "INSERT INTO %s (key, value) VALUES ($1, $2) "
		    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"},
	    {"scan", "SELECT key, value FROM %s WHERE key >= $1 "
		     "ORDER BY key LIMIT $2"},
	};
	char sql[512];

	for (size_t i = 0; i < sizeof(stmt) / sizeof(stmt[0]); i++) {
		snprintf(sql, sizeof(sql), stmt[i][1], tab);
		if (exec_ok(c, PQprepare(c, stmt[i][0], sql, 0, NULL), err,
			    errlen))
			return -1;
	}
	return 0;
}

static void *pg_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct pconn *pc = calloc(1, sizeof(*pc));
	char *tab = NULL;

	if (!pc || !(pc->c = open_pg(t, err, errlen)))
		goto fail;
	if (!(tab = table_ident(pc->c, t)) || prepare(pc->c, tab, err, errlen))
		goto fail;
	if (PQsetnonblocking(pc->c, 1) || !PQenterPipelineMode(pc->c)) {
		snprintf(err, errlen, "postgres: %s", PQerrorMessage(pc->c));
		goto fail;
	}
	PQfreemem(tab);
	return pc;
fail:
	if (tab)
		PQfreemem(tab);
	if (pc)
		PQfinish(pc->c);
	free(pc);
	return NULL;
}

static int pg_fd(void *c)
{
	return PQsocket(((struct pconn *)c)->c);
}

static int pg_send(void *c, const struct kb_req *r)
{
	struct pconn *pc = c;
	const char *vals[2] = {r->key, (const char *)r->val};
	int lens[2] = {(int)r->klen, (int)r->vlen}, fmts[2] = {1, 1}, n = 1;
	const char *name = "get";
	unsigned char limit[8];

	if (r->kind == REQ_PUT) {
		name = "put";
		n = 2;
	} else if (r->kind == REQ_SCAN) {
		/* int8, binary: eight bytes, big-endian. */
		for (int i = 0; i < 8; i++)
			limit[i] =
			    (unsigned char)((uint64_t)r->count >> (56 - 8 * i));
		name = "scan";
		vals[1] = (const char *)limit;
		lens[1] = 8;
		n = 2;
	}
	if (!PQsendQueryPrepared(pc->c, name, n, vals, lens, fmts, 1) ||
	    !PQpipelineSync(pc->c))
		return -1;
	return 0;
}

static int pg_flush(void *c)
{
	int rc = PQflush(((struct pconn *)c)->c);

	return rc < 0 ? -1 : rc;
}

static int pg_input(void *c)
{
	return PQconsumeInput(((struct pconn *)c)->c) ? 0 : -1;
}

static void judge(PGresult *res, enum kb_req_kind kind, struct kb_reply *out)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		out->status = REPLY_ERROR;
		out->msg = PQresultErrorMessage(res);
	} else if (kind == REQ_GET && PQntuples(res) == 0) {
		out->status = REPLY_NOT_FOUND;
	} else if (kind == REQ_GET) {
		out->val = (const uint8_t *)PQgetvalue(res, 0, 0);
		out->vlen = (size_t)PQgetlength(res, 0, 0);
	} else if (kind == REQ_SCAN) {
		out->items = (unsigned)PQntuples(res);
	}
}

static int pg_reply(void *c, enum kb_req_kind kind, struct kb_reply *out)
{
	struct pconn *pc = c;

	PQclear(pc->prev);
	pc->prev = NULL;
	while (!PQisBusy(pc->c)) {
		PGresult *r = PQgetResult(pc->c);

		if (pc->state == 0 && r) {
			pc->res = r;
			pc->state = 1;
		} else if (pc->state == 1 && !r) {
			pc->state = 2;
		} else if (pc->state == 2 && r &&
			   PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			pc->state = 0;
			out->status = REPLY_OK;
			judge(pc->res, kind, out);
			pc->prev = pc->res;
			pc->res = NULL;
			return 1;
		} else if (pc->state == 2 && !r) {
			return 0; /* the Sync has not arrived */
		} else {
			PQclear(r);
			return -1; /* out of step with the pipeline */
		}
	}
	return 0;
}

static const char *pg_errmsg(void *c)
{
	return PQerrorMessage(((struct pconn *)c)->c);
}

static void pg_close(void *c)
{
	struct pconn *pc = c;

	PQclear(pc->prev);
	PQclear(pc->res);
	PQfinish(pc->c);
	free(pc);
}

const struct kb_driver driver_pg = {
    .name = "postgres",
    .default_port = 5432,
    .setup = pg_setup,
    .connect = pg_connect,
    .fd = pg_fd,
    .send = pg_send,
    .flush = pg_flush,
    .input = pg_input,
    .reply = pg_reply,
    .errmsg = pg_errmsg,
    .close = pg_close,
};
