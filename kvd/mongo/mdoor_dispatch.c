/* mdoor_dispatch.c - from input bytes to a command: one message at a time
 * within the size limits (the header's length is judged on its first 4
 * bytes), its framing taken apart, the command found in the families'
 * tables, the arguments every command shares checked ($db, transactions,
 * apiVersion), authentication required where MongoDB requires it, and the
 * answer framed as the request was (OP_MSG, or OP_REPLY to OP_QUERY). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_int.h"
#include "mql_value.h"

static const struct mdoor_cmd *const tables[] = {
    mdoor_cmds_hello, mdoor_cmds_admin, mdoor_cmds_auth, mdoor_cmds_cursor,
    mdoor_cmds_ddl,   mdoor_cmds_read,	mdoor_cmds_agg,	 mdoor_cmds_write,
};

static const struct mdoor_cmd *find_cmd(const char *name)
{
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct mdoor_cmd *c = tables[t]; c->name; c++)
			if (!strcmp(c->name, name))
				return c;
	return NULL;
}

static void count(struct mdoor *d, enum mdoor_counter k)
{
	_Atomic uint64_t *c;

	switch (k) {
	case MDOOR_CNT_QUERY: c = &d->c_query; break;
	case MDOOR_CNT_INSERT: c = &d->c_insert; break;
	case MDOOR_CNT_UPDATE: c = &d->c_update; break;
	case MDOOR_CNT_DELETE: c = &d->c_delete; break;
	case MDOOR_CNT_GETMORE: c = &d->c_getmore; break;
	default: c = &d->c_command; break;
	}
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* maxTimeMS as mongod parses it: a number, whole, 0 to 2^31-1 (0: no
 * limit). */
static int max_time(struct mdoor_req *r, const bson_iter_t *it,
		    struct mql_error *err)
{
	double v;

	if (!BSON_ITER_HOLDS_NUMBER(it) &&
	    bson_iter_type(it) != BSON_TYPE_DECIMAL128)
		return mdoor_err(err, MQL_BadValue,
				 "maxTimeMS must be a number");
	v = BSON_ITER_HOLDS_NUMBER(it)
		? bson_iter_as_double(it)
		: mql_number_double(bson_iter_value((bson_iter_t *)it));
	if (!(v >= 0 && v < 2147483648.0))
		return mdoor_err(err, MQL_BadValue,
				 "maxTimeMS is out of range");
	if (v != floor(v))
		return mdoor_err(err, MQL_BadValue,
				 "maxTimeMS has non-integral value");
	r->max_time_ms = (int64_t)v;
	return 0;
}

/* The arguments every command may carry, checked once here: $db (OP_MSG
 * requires it), the transaction fields (a standalone server refuses them,
 * as mongod does), apiVersion "1" only, maxTimeMS. */
static int generic(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;
	bool have_db = r->legacy;

	bson_iter_init_from_data(&it, r->body, r->body_len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "$db") && !r->legacy) {
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return mdoor_err(
				    err, MQL_TypeMismatch,
				    "BSON field '$db' is the wrong "
				    "type '%s', expected type "
				    "'string'",
				    mql_type_name(bson_iter_type(&it)));
			snprintf(r->db, sizeof(r->db), "%s",
				 bson_iter_utf8(&it, NULL));
			if (mdoor_check_db(bson_iter_utf8(&it, NULL), err))
				return -1;
			have_db = true;
		} else if (!strcmp(k, "txnNumber") ||
			   !strcmp(k, "startTransaction") ||
			   !strcmp(k, "autocommit")) {
			return mdoor_err(err, MDOOR_IllegalOperation,
					 "Transaction numbers are only allowed "
					 "on a replica set member or mongos");
		} else if (!strcmp(k, "maxTimeMS")) {
			if (max_time(r, &it, err))
				return -1;
		} else if (!strcmp(k, "apiVersion")) {
			if (!BSON_ITER_HOLDS_UTF8(&it) ||
			    strcmp(bson_iter_utf8(&it, NULL), "1"))
				return mdoor_err(err, MDOOR_APIVersionError,
						 "API version must be \"1\"");
		}
	}
	if (!have_db)
		return mdoor_err(err, 40571,
				 "OP_MSG requests require a $db argument");
	return 0;
}

/* OP_QUERY: "db.$cmd" names the database. */
static int legacy_db(struct mdoor_req *r, const char *ns, struct mql_error *err)
{
	const char *dot = strchr(ns, '.');

	if (!dot || strcmp(dot, ".$cmd") || (size_t)(dot - ns) >= sizeof(r->db))
		return mdoor_err(err, MDOOR_UnsupportedOpQueryCommand,
				 "Unsupported OP_QUERY command: %s. The client "
				 "driver may require an upgrade. For more "
				 "details see https://dochub.mongodb.org/core/"
				 "legacy-opcode-removal",
				 ns);
	memcpy(r->db, ns, (size_t)(dot - ns));
	r->db[dot - ns] = '\0';
	return mdoor_check_db(r->db, err);
}

static int run(struct mdoor_req *r, const char *ns, struct mql_error *err)
{
	struct mdoor_conn *mc = r->mc;
	const struct mdoor_cmd *cmd;
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, r->body, r->body_len) ||
	    !bson_iter_next(&it))
		return mdoor_err(err, MDOOR_CommandNotFound,
				 "no such command: ''");
	snprintf(r->cmd, sizeof(r->cmd), "%s", bson_iter_key(&it));
	cmd = find_cmd(bson_iter_key(&it));
	if (r->legacy && legacy_db(r, ns, err))
		return -1;
	if (r->legacy && (!cmd || !(cmd->flags & MDOOR_CMD_LEGACY)))
		return mdoor_err(err, MDOOR_UnsupportedOpQueryCommand,
				 "Unsupported OP_QUERY command: %s. The client "
				 "driver may require an upgrade. For more "
				 "details see https://dochub.mongodb.org/core/"
				 "legacy-opcode-removal",
				 r->cmd);
	if (!cmd)
		return mdoor_err(err, MDOOR_CommandNotFound,
				 "no such command: '%s'", r->cmd);
	if (generic(r, err))
		return -1;
	if (!mc->authed && !(cmd->flags & MDOOR_CMD_NOAUTH))
		return mdoor_err(err, MDOOR_Unauthorized,
				 "command %s requires authentication", r->cmd);
	count(mc->d, cmd->counter);
	return cmd->fn(r, err);
}

/* Answer a message that could not be taken apart, in the form its sender
 * waits for. */
static void parse_failed(struct mdoor_conn *mc, const struct mdoor_msg *m,
			 const struct mql_error *err)
{
	int32_t op =
	    m->opcode == MDOOR_OP_COMPRESSED ? m->orig_opcode : m->opcode;
	bson_t doc = BSON_INITIALIZER;

	mdoor_error_doc(&doc, err);
	if (op == MDOOR_OP_MSG &&
	    !(m->opcode == MDOOR_OP_MSG && (m->flags & MDOOR_MSG_MORE)))
		mdoor_wire_reply_msg(mc, m->request_id, &doc);
	else if (op == MDOOR_OP_QUERY)
		mdoor_wire_reply_legacy(mc, m->request_id, &doc);
	bson_destroy(&doc);
	mdoor_log(mc->d, 2, "mongo connection %llu (%s): %s",
		  (unsigned long long)mc->id, mc->remote, err->msg);
}

static void message(struct mdoor_conn *mc, const uint8_t *p, uint32_t len)
{
	struct mdoor_msg m;
	struct mdoor_req *r;
	struct mql_error err;
	bool fatal;
	int rc;

	mql_error_clear(&err);
	if (mdoor_wire_parse(p, len, &m, &fatal, &err)) {
		parse_failed(mc, &m, &err);
		if (fatal) {
			mc->closing = true;
			mc->d->host.close(mc->conn);
		}
		return;
	}
	r = BSON_ALIGNED_ALLOC0(struct mdoor_req); /* bson_t: 128-aligned */
	if (!r) {
		mc->closing = true;
		mc->d->host.close(mc->conn);
		return;
	}
	r->mc = mc;
	r->request_id = m.request_id;
	r->legacy = m.opcode == MDOOR_OP_QUERY;
	r->silent = !r->legacy && (m.flags & MDOOR_MSG_MORE);
	r->body = m.body;
	r->body_len = m.body_len;
	r->seqs = m.seqs;
	r->nseqs = m.nseqs;
	bson_init(&r->reply);
	rc = run(r, m.ns, &err);
	/* Nothing may point into the input from here on. */
	r->body = NULL;
	r->seqs = NULL;
	r->nseqs = 0;
	if (rc == MDOOR_SUSPEND || rc == MDOOR_YIELD) {
		mc->busy = true;
		mc->yielded = rc == MDOOR_YIELD;
		mc->req = r;
		return;
	}
	mdoor_answer(r, rc, &err);
	mdoor_req_free(r);
}

size_t mdoor_input(struct mdoor_conn *mc, const uint8_t *p, size_t n,
		   size_t *need)
{
	struct mdoor *d = mc->d;
	size_t limit = mc->authed ? MDOOR_MAX_MESSAGE : d->preauth_max;
	int32_t len;

	if (need)
		*need = 0;
	if (mc->busy || mc->closing || n < 4)
		return 0;
	len = mdoor_le32(p);
	if (len < MDOOR_HEADER || (size_t)len > limit) {
		mdoor_log(d, 2,
			  "mongo connection %llu (%s): message length %d out "
			  "of 16..%zu%s; closing",
			  (unsigned long long)mc->id, mc->remote, (int)len,
			  limit, mc->authed ? "" : " (before authentication)");
		mc->closing = true;
		d->host.close(mc->conn);
		return n;
	}
	if (n < (size_t)len) {
		if (need)
			*need = (size_t)len;
		return 0;
	}
	atomic_fetch_add_explicit(&d->c_bytes_in, (uint64_t)len,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&d->c_requests, 1, memory_order_relaxed);
	message(mc, p, (uint32_t)len);
	return (size_t)len;
}
