/* driver_pg.c - kvbench's PostgreSQL driver, through libpq.
 *
 * --record fields, as YCSB's JDBC binding: the table (usertable) has the
 * record's key, YCSB_KEY varchar(255) primary key, and one text column per
 * field, FIELD0..FIELDn; an update of one field is UPDATE usertable SET
 * FIELDn = $1 WHERE YCSB_KEY = $2 (of all, one UPDATE of every column), a
 * read SELECT * or SELECT FIELDn, a scan SELECT ... WHERE YCSB_KEY >= $1
 * ORDER BY YCSB_KEY LIMIT $2.  An insert is an upsert (INSERT ... ON
 * CONFLICT DO UPDATE), where YCSB's is a plain INSERT, so that a load can
 * be run again over a loaded table as over the other stores.  An UPDATE
 * that found no row answers "not found", as YCSB's binding reports it.
 *
 * --record value and the other workloads: the table has two columns, key
 * text primary key and value bytea: the shape of the stories kvd comes
 * from, so they can be rerun here.  Reads, upserts and scans (key >= $1
 * ORDER BY key LIMIT $2).
 *
 * --record doc: the table (usertable_doc) has two columns, id text primary
 * key and doc jsonb, a record being the document {"field0": "...", ...}.
 * An insert sends the document (an upsert, as above), a read is SELECT doc
 * (or doc->>'fieldN'), an update of one field UPDATE ... SET doc =
 * jsonb_set(doc, '{fieldN}', to_jsonb($1::text)) (of all, nested
 * jsonb_sets), a scan SELECT id, doc ... WHERE id >= $1 ORDER BY id LIMIT
 * $2: what an application keeping documents in PostgreSQL does.  The
 * geo workload's documents go into (id text primary key, doc jsonb) too
 * (kvbench_doc), each msgpack map sent as its JSON (pgdoc_from_value), a
 * write an upsert of the whole document, a read SELECT doc.
 *
 * The indexed-document workloads (ixdocs.h): the table (ixdocs) is (id
 * text primary key, doc jsonb) with three btree expression indexes,
 * ((doc->>'k')::bigint), ((doc->>'r')::bigint) and ((doc->>'s')), made by
 * setup unless --no-index; an insert is a plain INSERT (a duplicate id is
 * an error, as insertOne's); a query SELECT id, doc ... WHERE
 * (doc->>'k')::bigint = $1 (r likewise, or id = $1); a range WHERE
 * (doc->>'r')::bigint >= $1 ORDER BY (doc->>'r')::bigint LIMIT $2: the
 * expressions the indexes are on, so that the planner can use them
 * (bench/index_compare.sh prints its plans).  A query that finds nothing
 * answers "not found".
 *
 * Every statement is prepared, with binary parameters and results.
 *
 * Pipelining uses libpq's pipeline mode (PostgreSQL 14 and later), with a
 * Sync after every statement: each one is then its own transaction,
 * committed before its reply, exactly as in autocommit mode.  Without the
 * Syncs, a pipeline would be one transaction and one commit, a batch that
 * the other drivers do not get.  Each request therefore produces three
 * results: the statement's, a NULL that ends it, and the Sync's.
 */
#include <libpq-fe.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbench.h"
#include "pgdoc.h"
#include "record.h"

struct pconn {
	PGconn *c;
	PGresult *res, *prev; /* being read; last handed out */
	int state;	      /* 0 result, 1 its NULL, 2 the Sync */
	/* records of fields: a statement's parameters, a read's fields */
	unsigned nf;
	const char **vals;
	int *lens, *fmts;
	struct kb_fval *fv;
	int doc;    /* --record doc */
	int index;  /* the index workloads */
	char *jbuf; /* its documents: sent, or read unescaped */
	size_t jcap;
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

/* CREATE TABLE ... (YCSB_KEY VARCHAR(255) PRIMARY KEY, FIELD0 TEXT, ...):
 * YCSB's JDBC binding's table (its identifiers unquoted, so lower case). */
static char *fields_table_sql(const char *tab, unsigned nf)
{
	size_t cap = 128 + strlen(tab) + (size_t)nf * 24, n;
	char *sql = malloc(cap);

	if (!sql)
		return NULL;
	n = (size_t)snprintf(sql, cap,
			     "CREATE TABLE IF NOT EXISTS %s "
			     "(YCSB_KEY VARCHAR(255) PRIMARY KEY",
			     tab);
	for (unsigned i = 0; i < nf; i++)
		n += (size_t)snprintf(sql + n, cap - n, ", FIELD%u TEXT", i);
	snprintf(sql + n, cap - n, ")");
	return sql;
}

/* The index workloads' expressions, by enum kb_ixfield, and s's. */
static const char *const ix_expr[] = {
    "((doc->>'k')::bigint)", "((doc->>'r')::bigint)", "id", "(doc->>'s')"};

/* CREATE INDEX IF NOT EXISTS <table>_<f> ON <table> (<expr>) for k, r and
 * s. */
static int ix_indexes(PGconn *c, const struct kb_target *t, const char *tab,
		      char *err, size_t errlen)
{
	static const int which[] = {0, 1, 3};
	static const char *const suffix[] = {"_k", "_r", "_s"};
	char name[256], sql[768];

	for (int i = 0; i < 3; i++) {
		char *id;
		int rc;

		snprintf(name, sizeof(name), "%.200s%s", t->table, suffix[i]);
		if (!(id = PQescapeIdentifier(c, name, strlen(name)))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		snprintf(sql, sizeof(sql),
			 "CREATE INDEX IF NOT EXISTS %s ON %s (%s)", id, tab,
			 ix_expr[which[i]]);
		PQfreemem(id);
		rc = exec_ok(c, PQexec(c, sql), err, errlen);
		if (rc)
			return -1;
	}
	return 0;
}

static int pg_setup(const struct kb_target *t, char *err, size_t errlen)
{
	PGconn *c = open_pg(t, err, errlen);
	char *sql = NULL, *tab;
	int rc = -1;

	if (!c)
		return -1;
	if (t->index) {
		if ((tab = table_ident(c, t))) {
			char ct[512];

			snprintf(ct, sizeof(ct),
				 "CREATE TABLE IF NOT EXISTS %.400s "
				 "(id text PRIMARY KEY, doc jsonb)",
				 tab);
			rc = exec_ok(c, PQexec(c, ct), err, errlen);
			if (!rc && !t->no_index)
				rc = ix_indexes(c, t, tab, err, errlen);
			PQfreemem(tab);
		}
		PQfinish(c);
		return rc;
	}
	if ((tab = table_ident(c, t))) {
		if (t->doc && (sql = malloc(strlen(tab) + 128)))
			sprintf(sql,
				"CREATE TABLE IF NOT EXISTS %s "
				"(id text PRIMARY KEY, doc jsonb)",
				tab);
		else if (t->doc)
			sql = NULL;
		else if (t->fields)
			sql = fields_table_sql(tab, t->fieldcount);
		else if ((sql = malloc(strlen(tab) + 128)))
			sprintf(sql,
				"CREATE TABLE IF NOT EXISTS %s "
				"(key text PRIMARY KEY, value bytea)",
				tab);
		if (sql)
			rc = exec_ok(c, PQexec(c, sql), err, errlen);
		else
			snprintf(err, errlen, "out of memory");
		free(sql);
		PQfreemem(tab);
	}
	PQfinish(c);
	return rc;
}

static int prepare_one(PGconn *c, const char *name, const char *sql, char *err,
		       size_t errlen)
{
	return exec_ok(c, PQprepare(c, name, sql, 0, NULL), err, errlen);
}

/* Values: (key, value bytea), or with --record doc (id, doc jsonb). */
static int prepare(PGconn *c, const char *tab, int doc, char *err,
		   size_t errlen)
{
	static const char *const stmt[][3] = {
	    {"get", "SELECT value FROM %s WHERE key = $1",
	     "SELECT doc FROM %s WHERE id = $1"},
	    {"put",
	     "INSERT INTO %s (key, value) VALUES ($1, $2) "
	     "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
	     "INSERT INTO %s (id, doc) VALUES ($1, $2) "
	     "ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc"},
	    {"scan",
	     "SELECT key, value FROM %s WHERE key >= $1 ORDER BY key LIMIT $2",
	     "SELECT id, doc FROM %s WHERE id >= $1 ORDER BY id LIMIT $2"},
	};
	char sql[512];

	for (size_t i = 0; i < sizeof(stmt) / sizeof(stmt[0]); i++) {
		snprintf(sql, sizeof(sql), stmt[i][doc ? 2 : 1], tab);
		if (prepare_one(c, stmt[i][0], sql, err, errlen))
			return -1;
	}
	return 0;
}

/* Appends printf's output to a malloc'd string; *s NULL once out of
 * memory. */
static void cat(char **s, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cat(char **s, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int len;
	char *g;

	if (!*s)
		return;
	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0 || !(g = realloc(*s, *n + (size_t)len + 1))) {
		free(*s);
		*s = NULL;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(g + *n, (size_t)len + 1, fmt, ap);
	va_end(ap);
	*s = g;
	*n += (size_t)len;
}

/* ins: the upsert of every field; upa: the UPDATE of every field. */
static int prepare_whole(PGconn *c, const char *tab, unsigned nf, char *err,
			 size_t errlen)
{
	char *ins = strdup(""), *upa = strdup("");
	size_t ni = 0, nu = 0;
	int rc = -1;

	cat(&ins, &ni, "INSERT INTO %s (YCSB_KEY", tab);
	for (unsigned i = 0; i < nf; i++)
		cat(&ins, &ni, ", FIELD%u", i);
	cat(&ins, &ni, ") VALUES ($1");
	for (unsigned i = 0; i < nf; i++)
		cat(&ins, &ni, ", $%u", i + 2);
	cat(&ins, &ni, ") ON CONFLICT (YCSB_KEY) DO UPDATE SET ");
	cat(&upa, &nu, "UPDATE %s SET ", tab);
	for (unsigned i = 0; i < nf; i++) {
		cat(&ins, &ni, "%sFIELD%u = EXCLUDED.FIELD%u", i ? ", " : "", i,
		    i);
		cat(&upa, &nu, "%sFIELD%u = $%u", i ? ", " : "", i, i + 1);
	}
	cat(&upa, &nu, " WHERE YCSB_KEY = $%u", nf + 1);
	if (!ins || !upa)
		snprintf(err, errlen, "out of memory");
	else if (!prepare_one(c, "ins", ins, err, errlen) &&
		 !prepare_one(c, "upa", upa, err, errlen))
		rc = 0;
	free(ins);
	free(upa);
	return rc;
}

/* YCSB's statements: of the whole record, then three per field. */
static int prepare_fields(PGconn *c, const char *tab, unsigned nf, char *err,
			  size_t errlen)
{
	static const char *const each[][2] = {
	    {"rd%u", "SELECT FIELD%u FROM %s WHERE YCSB_KEY = $1"},
	    {"up%u", "UPDATE %s SET FIELD%u = $1 WHERE YCSB_KEY = $2"},
	    {"sc%u", "SELECT YCSB_KEY, FIELD%u FROM %s WHERE YCSB_KEY >= $1 "
		     "ORDER BY YCSB_KEY LIMIT $2"},
	};
	char sql[512], name[32];

	snprintf(sql, sizeof(sql), "SELECT * FROM %s WHERE YCSB_KEY = $1", tab);
	if (prepare_one(c, "rda", sql, err, errlen))
		return -1;
	snprintf(sql, sizeof(sql),
		 "SELECT * FROM %s WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY "
		 "LIMIT $2",
		 tab);
	if (prepare_one(c, "sca", sql, err, errlen) ||
	    prepare_whole(c, tab, nf, err, errlen))
		return -1;
	for (unsigned i = 0; i < nf; i++)
		for (size_t j = 0; j < sizeof(each) / sizeof(each[0]); j++) {
			snprintf(name, sizeof(name), each[j][0], i);
			if (j == 1)
				snprintf(sql, sizeof(sql), each[j][1], tab, i);
			else
				snprintf(sql, sizeof(sql), each[j][1], i, tab);
			if (prepare_one(c, name, sql, err, errlen))
				return -1;
		}
	return 0;
}

/* --record doc's statements, named as prepare_fields' are. */
static int prepare_doc(PGconn *c, const char *tab, unsigned nf, char *err,
		       size_t errlen)
{
	char *upa = strdup(""), sql[512], name[32];
	size_t nu = 0;
	int rc = -1;

	cat(&upa, &nu, "UPDATE %s SET doc = ", tab);
	for (unsigned i = 0; i < nf; i++)
		cat(&upa, &nu, "jsonb_set(");
	cat(&upa, &nu, "doc");
	for (unsigned i = 0; i < nf; i++)
		cat(&upa, &nu, ", '{field%u}', to_jsonb($%u::text))", i, i + 1);
	cat(&upa, &nu, " WHERE id = $%u", nf + 1);
	if (!upa) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
#define PREP(n, ...)                                                           \
	(snprintf(sql, sizeof(sql), __VA_ARGS__),                              \
	 prepare_one(c, n, sql, err, errlen))
	if (PREP("rda", "SELECT doc FROM %s WHERE id = $1", tab) ||
	    PREP("sca",
		 "SELECT id, doc FROM %s WHERE id >= $1 ORDER BY id LIMIT $2",
		 tab) ||
	    PREP("ins",
		 "INSERT INTO %s (id, doc) VALUES ($1, $2) "
		 "ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc",
		 tab) ||
	    prepare_one(c, "upa", upa, err, errlen))
		goto out;
	for (unsigned i = 0; i < nf; i++) {
		snprintf(name, sizeof(name), "rd%u", i);
		if (PREP(name,
			 "SELECT doc->>'field%u' AS field%u FROM %s "
			 "WHERE id = $1",
			 i, i, tab))
			goto out;
		snprintf(name, sizeof(name), "up%u", i);
		if (PREP(name,
			 "UPDATE %s SET doc = jsonb_set(doc, '{field%u}', "
			 "to_jsonb($1::text)) WHERE id = $2",
			 tab, i))
			goto out;
		snprintf(name, sizeof(name), "sc%u", i);
		if (PREP(name,
			 "SELECT id, doc->>'field%u' AS field%u FROM %s "
			 "WHERE id >= $1 ORDER BY id LIMIT $2",
			 i, i, tab))
			goto out;
	}
#undef PREP
	rc = 0;
out:
	free(upa);
	return rc;
}

/* The index workloads' statements: ixq0..2 (by enum kb_ixfield), ixrange,
 * ixins.  With index_only a find selects the indexed expression alone
 * (the _id's find, the row). */
static int prepare_ix(PGconn *c, const char *tab, int index_only, char *err,
		      size_t errlen)
{
	char sql[512], name[16];

	for (int f = IX_K; f <= IX_ID; f++) {
		snprintf(name, sizeof(name), "ixq%d", f);
		snprintf(sql, sizeof(sql),
			 "SELECT %s FROM %.300s WHERE %s = $1",
			 index_only && f != IX_ID ? ix_expr[f] : "id, doc", tab,
			 ix_expr[f]);
		if (prepare_one(c, name, sql, err, errlen))
			return -1;
	}
	snprintf(sql, sizeof(sql),
		 "SELECT %s FROM %.300s WHERE %s >= $1 ORDER BY %s LIMIT $2",
		 index_only ? ix_expr[IX_R] : "id, doc", tab, ix_expr[IX_R],
		 ix_expr[IX_R]);
	if (prepare_one(c, "ixrange", sql, err, errlen))
		return -1;
	snprintf(sql, sizeof(sql),
		 "INSERT INTO %.300s (id, doc) VALUES ($1, $2)", tab);
	return prepare_one(c, "ixins", sql, err, errlen);
}

static void pg_close(void *c);

static void *pg_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct pconn *pc = calloc(1, sizeof(*pc));
	char *tab = NULL;
	unsigned np;

	if (!pc || !(pc->c = open_pg(t, err, errlen)))
		goto fail;
	if (!(tab = table_ident(pc->c, t)) ||
	    (t->index ? prepare_ix(pc->c, tab, t->index_only, err, errlen)
	     : t->doc && t->fields
		 ? prepare_doc(pc->c, tab, t->fieldcount, err, errlen)
	     : t->fields
		 ? prepare_fields(pc->c, tab, t->fieldcount, err, errlen)
		 : prepare(pc->c, tab, t->doc, err, errlen)))
		goto fail;
	pc->doc = t->doc;
	pc->index = t->index;
	if (PQsetnonblocking(pc->c, 1) || !PQenterPipelineMode(pc->c)) {
		snprintf(err, errlen, "postgres: %s", PQerrorMessage(pc->c));
		goto fail;
	}
	pc->nf = t->fields ? t->fieldcount : 0;
	np = pc->nf + 2;
	pc->vals = calloc(np, sizeof(*pc->vals));
	pc->lens = calloc(np, sizeof(*pc->lens));
	pc->fmts = calloc(np, sizeof(*pc->fmts));
	pc->fv = calloc(pc->nf + 1, sizeof(*pc->fv));
	if (!pc->vals || !pc->lens || !pc->fmts || !pc->fv) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	PQfreemem(tab);
	return pc;
fail:
	if (tab)
		PQfreemem(tab);
	if (pc && pc->c)
		pg_close(pc);
	else
		free(pc);
	return NULL;
}

static int pg_fd(void *c)
{
	return PQsocket(((struct pconn *)c)->c);
}

/* int8, binary: eight bytes, big-endian. */
static void int8_be(unsigned char *out, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(v >> (56 - 8 * i));
}

static int send_prepared(struct pconn *pc, const char *name, int n)
{
	for (int i = 0; i < n; i++)
		pc->fmts[i] = 1;
	if (!PQsendQueryPrepared(pc->c, name, n, pc->vals, pc->lens, pc->fmts,
				 1) ||
	    !PQpipelineSync(pc->c))
		return -1;
	return 0;
}

/* Room for need bytes in pc->jbuf; 0, or -1 out of memory. */
static int jbuf_reserve(struct pconn *pc, size_t need)
{
	char *b;

	if (need <= pc->jcap)
		return 0;
	if (!(b = realloc(pc->jbuf, need)))
		return -1;
	pc->jbuf = b;
	pc->jcap = need;
	return 0;
}

/* --record doc's insert: the key and the document, as jsonb's binary form
 * (a version byte, 1, and the text).  Its reads, scans and updates take
 * the parameters of --record fields' statements of the same names. */
static int send_doc(struct pconn *pc, const struct kb_req *r)
{
	if (jbuf_reserve(pc, pgdoc_max(r->fv, r->nfv) + 1))
		return -1;
	pc->jbuf[0] = 1;
	pc->vals[1] = pc->jbuf;
	pc->lens[1] = (int)(1 + pgdoc_encode(r->fv, r->nfv, pc->jbuf + 1));
	return send_prepared(pc, "ins", 2);
}

/* --record doc's put of a value (the geo workload's document): its
 * msgpack map as the jsonb document, an upsert. */
static int send_value_doc(struct pconn *pc, const struct kb_req *r)
{
	long n;

	if (jbuf_reserve(pc, pgdoc_value_max(r->vlen) + 1))
		return -1;
	if ((n = pgdoc_from_value(r->val, r->vlen, pc->jbuf + 1)) < 0)
		return -1;
	pc->jbuf[0] = 1;
	pc->vals[0] = r->key, pc->lens[0] = (int)r->klen;
	pc->vals[1] = pc->jbuf, pc->lens[1] = (int)(1 + n);
	return send_prepared(pc, "put", 2);
}

/* Records of fields: which statement, and its parameters. */
static int send_fields(struct pconn *pc, const struct kb_req *r)
{
	unsigned char limit[8];
	char name[32] = "rda";
	int n = 1;

	pc->vals[0] = r->key, pc->lens[0] = (int)r->klen;
	if (r->field >= 0 && (unsigned)r->field >= pc->nf)
		return -1;
	if (pc->doc && r->kind == REQ_INSERT)
		return send_doc(pc, r);
	switch (r->kind) {
	case REQ_READ:
		if (r->field >= 0)
			snprintf(name, sizeof(name), "rd%d", r->field);
		break;
	case REQ_FSCAN:
		snprintf(name, sizeof(name), r->field < 0 ? "sca" : "sc%d",
			 r->field);
		int8_be(limit, r->count);
		pc->vals[1] = (const char *)limit, pc->lens[1] = 8;
		n = 2;
		break;
	case REQ_INSERT:
	case REQ_UPDATE:
		if (r->nfv == 1 && r->kind == REQ_UPDATE && pc->nf > 1) {
			/* UPDATE ... SET FIELDn = $1 WHERE YCSB_KEY = $2 */
			snprintf(name, sizeof(name), "up%u", r->fv[0].idx);
			pc->vals[1] = pc->vals[0], pc->lens[1] = pc->lens[0];
			pc->vals[0] = (const char *)r->fv[0].val;
			pc->lens[0] = (int)r->fv[0].len;
			return send_prepared(pc, name, 2);
		}
		if (r->nfv != pc->nf)
			return -1;
		/* ins: the key first; upa: the key last */
		n = r->kind == REQ_INSERT ? 1 : 0;
		for (unsigned i = 0; i < r->nfv; i++) {
			if (r->fv[i].idx >= pc->nf)
				return -1;
			pc->vals[n + (int)r->fv[i].idx] =
			    (const char *)r->fv[i].val;
			pc->lens[n + (int)r->fv[i].idx] = (int)r->fv[i].len;
		}
		if (r->kind == REQ_UPDATE)
			pc->vals[pc->nf] = r->key,
			pc->lens[pc->nf] = (int)r->klen;
		snprintf(name, sizeof(name),
			 r->kind == REQ_INSERT ? "ins" : "upa");
		return send_prepared(pc, name, (int)pc->nf + 1);
	default: return -1;
	}
	return send_prepared(pc, name, n);
}

/* The index workloads' requests: int8 values, binary; an insert's
 * document as jsonb's binary form (a version byte, 1, and the text). */
static int send_ix(struct pconn *pc, const struct kb_req *r)
{
	unsigned char v[8], limit[8];
	char name[16];
	long n;

	switch (r->kind) {
	case REQ_IXINSERT:
		if (jbuf_reserve(pc, pgdoc_value_max(r->vlen) + 1) ||
		    (n = pgdoc_from_value(r->val, r->vlen, pc->jbuf + 1)) < 0)
			return -1;
		pc->jbuf[0] = 1;
		pc->vals[0] = r->key, pc->lens[0] = (int)r->klen;
		pc->vals[1] = pc->jbuf, pc->lens[1] = (int)(1 + n);
		return send_prepared(pc, "ixins", 2);
	case REQ_IXRANGE:
		int8_be(v, (uint64_t)r->ival);
		int8_be(limit, r->count);
		pc->vals[0] = (const char *)v, pc->lens[0] = 8;
		pc->vals[1] = (const char *)limit, pc->lens[1] = 8;
		return send_prepared(pc, "ixrange", 2);
	case REQ_IXFIND:
		if (r->field < IX_K || r->field > IX_ID)
			return -1;
		snprintf(name, sizeof(name), "ixq%d", r->field);
		if (r->field == IX_ID) {
			pc->vals[0] = r->key, pc->lens[0] = (int)r->klen;
		} else {
			int8_be(v, (uint64_t)r->ival);
			pc->vals[0] = (const char *)v, pc->lens[0] = 8;
		}
		return send_prepared(pc, name, 1);
	default: return -1;
	}
}

static int pg_send(void *c, const struct kb_req *r)
{
	struct pconn *pc = c;
	unsigned char limit[8];
	const char *name = "get";
	int n = 1;

	if (pc->index)
		return send_ix(pc, r);
	if (r->kind != REQ_GET && r->kind != REQ_PUT && r->kind != REQ_SCAN)
		return send_fields(pc, r);
	pc->vals[0] = r->key, pc->lens[0] = (int)r->klen;
	if (r->kind == REQ_PUT && pc->doc)
		return send_value_doc(pc, r);
	if (r->kind == REQ_PUT) {
		name = "put";
		pc->vals[1] = (const char *)r->val, pc->lens[1] = (int)r->vlen;
		n = 2;
	} else if (r->kind == REQ_SCAN) {
		int8_be(limit, r->count);
		name = "scan";
		pc->vals[1] = (const char *)limit, pc->lens[1] = 8;
		n = 2;
	}
	return send_prepared(pc, name, n);
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

/* A row's field columns (named fieldN; YCSB_KEY and NULLs left out). */
static void judge_row(struct pconn *pc, PGresult *res, struct kb_reply *out)
{
	int ncol = PQnfields(res);

	for (int i = 0; i < ncol && out->nfields <= pc->nf; i++) {
		const char *name = PQfname(res, i);
		struct kb_fval *fv = &pc->fv[out->nfields];

		if (strcmp(name, "ycsb_key") == 0 || strcmp(name, "id") == 0 ||
		    PQgetisnull(res, 0, i))
			continue;
		if (rec_field_index(name, strlen(name), &fv->idx))
			fv->idx = UINT_MAX;
		fv->val = (const uint8_t *)PQgetvalue(res, 0, i);
		fv->len = (size_t)PQgetlength(res, 0, i);
		out->nfields++;
	}
	out->fields = pc->fv;
}

/* --record doc: a document read whole, its members as the fields. */
static void judge_doc(struct pconn *pc, PGresult *res, struct kb_reply *out)
{
	const char *v = PQgetvalue(res, 0, 0);
	size_t len = (size_t)PQgetlength(res, 0, 0);
	int n;

	if (jbuf_reserve(pc, len)) {
		out->status = REPLY_ERROR;
		out->msg = "out of memory";
		return;
	}
	n = len && v[0] == 1
		? pgdoc_decode(v + 1, len - 1, pc->fv, pc->nf, pc->jbuf)
		: -1;
	if (n < 0) {
		out->status = REPLY_ERROR;
		out->msg = "the document is not a record of fields";
		return;
	}
	out->nfields = (unsigned)n;
	out->fields = pc->fv;
}

static void judge(struct pconn *pc, PGresult *res, enum kb_req_kind kind,
		  struct kb_reply *out)
{
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		out->status = REPLY_ERROR;
		out->msg = PQresultErrorMessage(res);
	} else if ((kind == REQ_GET || kind == REQ_READ) &&
		   PQntuples(res) == 0) {
		out->status = REPLY_NOT_FOUND;
	} else if (kind == REQ_GET) {
		out->val = (const uint8_t *)PQgetvalue(res, 0, 0);
		out->vlen = (size_t)PQgetlength(res, 0, 0);
	} else if (kind == REQ_READ && pc->doc &&
		   strcmp(PQfname(res, 0), "doc") == 0) {
		judge_doc(pc, res, out);
	} else if (kind == REQ_READ) {
		judge_row(pc, res, out);
	} else if (kind == REQ_UPDATE && strcmp(PQcmdTuples(res), "0") == 0) {
		out->status = REPLY_NOT_FOUND; /* no such row */
	} else if (kind == REQ_SCAN || kind == REQ_FSCAN ||
		   kind == REQ_IXRANGE || kind == REQ_IXFIND) {
		out->items = (unsigned)PQntuples(res);
		if (kind == REQ_IXFIND && out->items == 0)
			out->status = REPLY_NOT_FOUND;
	}
}

static int pg_reply(void *c, enum kb_req_kind kind, int field,
		    struct kb_reply *out)
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
			(void)field; /* the columns are named */
			judge(pc, pc->res, kind, out);
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
	free(pc->vals);
	free(pc->lens);
	free(pc->fmts);
	free(pc->fv);
	free(pc->jbuf);
	free(pc);
}

const struct kb_driver driver_pg = {
    .name = "postgres",
    .default_port = 5432,
    .fields = 1,
    .fields_ops = "INSERT, UPDATE of one column or all, SELECT",
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
