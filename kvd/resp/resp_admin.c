/* resp_admin.c - RESP connection and server commands: PING, ECHO, QUIT,
 * HELLO, AUTH, SELECT, CLIENT, COMMAND, CONFIG, INFO, TIME.
 *
 * These exist so that Redis tools find what they look for when they
 * connect (redis-benchmark asks CONFIG GET save and appendonly, redis-cli
 * asks COMMAND DOCS for its hints, clients send SELECT 0 or HELLO 2), and
 * answer in Redis's words.  kvd has one database, no password and no
 * RESP3, and says so the way Redis would.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "net/auth.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp.h"
#include "ops/stats.h"

/* The Redis version that introduced each command (COMMAND DOCS "since"). */
static const char *const since[RESP_NCMDS] = {
    [RESP_CMD_APPEND] = "2.0.0",      [RESP_CMD_AUTH] = "1.0.0",
    [RESP_CMD_CLIENT] = "2.4.0",      [RESP_CMD_COMMAND] = "2.8.13",
    [RESP_CMD_CONFIG] = "2.0.0",      [RESP_CMD_DBSIZE] = "1.0.0",
    [RESP_CMD_DECR] = "1.0.0",	      [RESP_CMD_DECRBY] = "1.0.0",
    [RESP_CMD_DEL] = "1.0.0",	      [RESP_CMD_ECHO] = "1.0.0",
    [RESP_CMD_EXISTS] = "1.0.0",      [RESP_CMD_EXPIRE] = "1.0.0",
    [RESP_CMD_EXPIREAT] = "1.2.0",    [RESP_CMD_FLUSHALL] = "1.0.0",
    [RESP_CMD_FLUSHDB] = "1.0.0",     [RESP_CMD_GET] = "1.0.0",
    [RESP_CMD_GETDEL] = "6.2.0",      [RESP_CMD_GETSET] = "1.0.0",
    [RESP_CMD_HELLO] = "6.0.0",	      [RESP_CMD_INCR] = "1.0.0",
    [RESP_CMD_INCRBY] = "1.0.0",      [RESP_CMD_INFO] = "1.0.0",
    [RESP_CMD_KEYS] = "1.0.0",	      [RESP_CMD_MGET] = "1.0.0",
    [RESP_CMD_MSET] = "1.0.1",	      [RESP_CMD_PERSIST] = "2.2.0",
    [RESP_CMD_PEXPIRE] = "2.6.0",     [RESP_CMD_PEXPIREAT] = "2.6.0",
    [RESP_CMD_PING] = "1.0.0",	      [RESP_CMD_PSETEX] = "2.6.0",
    [RESP_CMD_PTTL] = "2.6.0",	      [RESP_CMD_QUIT] = "1.0.0",
    [RESP_CMD_SCAN] = "2.8.0",	      [RESP_CMD_SELECT] = "1.0.0",
    [RESP_CMD_SET] = "1.0.0",	      [RESP_CMD_SETEX] = "2.0.0",
    [RESP_CMD_SETNX] = "1.0.0",	      [RESP_CMD_STRLEN] = "2.2.0",
    [RESP_CMD_TIME] = "2.6.0",	      [RESP_CMD_TTL] = "1.0.0",
    [RESP_CMD_TYPE] = "1.0.0",	      [RESP_CMD_UNLINK] = "4.0.0",
    [RESP_CMD_BITCOUNT] = "2.6.0",    [RESP_CMD_BITFIELD_RO] = "6.0.0",
    [RESP_CMD_BITPOS] = "2.8.7",      [RESP_CMD_EXPIRETIME] = "7.0.0",
    [RESP_CMD_GETBIT] = "2.2.0",      [RESP_CMD_GETRANGE] = "2.4.0",
    [RESP_CMD_LATENCY] = "2.8.13",    [RESP_CMD_LCS] = "7.0.0",
    [RESP_CMD_MONITOR] = "1.0.0",     [RESP_CMD_OBJECT] = "2.2.3",
    [RESP_CMD_PEXPIRETIME] = "7.0.0", [RESP_CMD_RANDOMKEY] = "1.0.0",
    [RESP_CMD_SLOWLOG] = "2.2.12",    [RESP_CMD_SUBSTR] = "1.0.0",
    [RESP_CMD_TOUCH] = "3.2.1",	      [RESP_CMD_WAIT] = "3.0.0",
    [RESP_CMD_MULTI] = "1.2.0",	      [RESP_CMD_EXEC] = "1.2.0",
    [RESP_CMD_DISCARD] = "2.0.0",     [RESP_CMD_WATCH] = "2.2.0",
    [RESP_CMD_UNWATCH] = "2.2.0",     [RESP_CMD_RENAME] = "1.0.0",
    [RESP_CMD_RENAMENX] = "1.0.0",    [RESP_CMD_COPY] = "6.2.0",
    [RESP_CMD_GETEX] = "6.2.0",	      [RESP_CMD_INCRBYFLOAT] = "2.6.0",
    [RESP_CMD_MSETNX] = "1.0.1",      [RESP_CMD_SETBIT] = "2.2.0",
    [RESP_CMD_SETRANGE] = "2.2.0",    [RESP_CMD_BITOP] = "2.6.0",
    [RESP_CMD_REPLICAOF] = "5.0.0",   [RESP_CMD_SLAVEOF] = "1.0.0",
    [RESP_CMD_ROLE] = "2.8.12",	      [RESP_CMD_BITFIELD] = "3.2.0",
    [RESP_CMD_SAVE] = "1.0.0",	      [RESP_CMD_BGSAVE] = "1.0.0",
    [RESP_CMD_LASTSAVE] = "1.0.0",    [RESP_CMD_SHUTDOWN] = "1.0.0",
    [RESP_CMD_HDEL] = "2.0.0",	      [RESP_CMD_HEXISTS] = "2.0.0",
    [RESP_CMD_HGET] = "2.0.0",	      [RESP_CMD_HGETALL] = "2.0.0",
    [RESP_CMD_HINCRBY] = "2.0.0",     [RESP_CMD_HINCRBYFLOAT] = "2.6.0",
    [RESP_CMD_HKEYS] = "2.0.0",	      [RESP_CMD_HLEN] = "2.0.0",
    [RESP_CMD_HMGET] = "2.0.0",	      [RESP_CMD_HMSET] = "2.0.0",
    [RESP_CMD_HRANDFIELD] = "6.2.0",  [RESP_CMD_HSCAN] = "2.8.0",
    [RESP_CMD_HSET] = "2.0.0",	      [RESP_CMD_HSETNX] = "2.0.0",
    [RESP_CMD_HSTRLEN] = "3.2.0",     [RESP_CMD_HVALS] = "2.0.0",
};

/* ===================== Connection ===================== */

const char *resp_ping(struct kvd_conn *c, struct resp_req *r)
{
	if (r->argc > 2)
		return resp_arity_error(r, "ping");
	if (kvd_resp_subscribed(c)) { /* RESP2's subscribed context */
		resp_add_array(c, 2);
		resp_add_cstr(c, "pong");
		resp_add_bulk(c, r->a[1].p, r->argc == 2 ? r->a[1].n : 0);
	} else if (r->argc == 2)
		resp_add_bulk(c, r->a[1].p, r->a[1].n);
	else
		resp_add_status(c, "PONG");
	return NULL;
}

const char *resp_echo(struct kvd_conn *c, struct resp_req *r)
{
	resp_add_bulk(c, r->a[1].p, r->a[1].n);
	return NULL;
}

const char *resp_quit(struct kvd_conn *c, struct resp_req *r)
{
	(void)r;
	/* Its subscriptions end before the +OK, not when the close is reaped:
	 * a PUBSUB NUMPAT on another thread that follows the +OK must not
	 * count them (Redis frees the client in the same turn). */
	kvd_resp_pubsub_close(c);
	resp_add_ok(c);
	c->flags |= CONN_CLOSING;
	return NULL;
}

const char *resp_select(struct kvd_conn *c, struct resp_req *r)
{
	long long db;

	if (resp_ll(r->a[1], &db))
		return resp_err_int;
	if (db != 0)
		return "ERR DB index is out of range";
	resp_add_ok(c);
	return NULL;
}

static const char wrongpass[] = "WRONGPASS invalid username-password pair "
				"or user is disabled.";

/* AUTH password, or AUTH default password: the one user is "default". */
static const char *check_pass(struct kvd_conn *c, struct kv_slice user,
			      struct kv_slice pass)
{
	if (user.p && !resp_eq(user, "default"))
		return wrongpass;
	if (!c->io->srv->cfg->requirepass[0]) {
		if (!user.p)
			return "ERR AUTH <password> called without any "
			       "password configured for the default user. Are "
			       "you sure your configuration is correct?";
		return NULL; /* default user, no password: any is accepted */
	}
	switch (kvd_auth_try(c, pass.p, pass.n)) {
	case 1: return NULL;
	case 0: return wrongpass; /* counted and logged (rate-limited) there */
	default: return "ERR " KVD_AUTH_LIMITED_MSG;
	}
}

const char *resp_auth(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice none = {NULL, 0};
	const char *err;

	if (r->argc > 3)
		return resp_err_syntax;
	err = r->argc == 2 ? check_pass(c, none, r->a[1])
			   : check_pass(c, r->a[1], r->a[2]);
	if (err)
		return err;
	resp_add_ok(c);
	return NULL;
}

/* Redis accepts names of printable characters without spaces. */
static const char *set_name(struct kvd_conn *c, struct kv_slice name)
{
	for (size_t i = 0; i < name.n; i++)
		if (name.p[i] < '!' || name.p[i] > '~')
			return "ERR Client names cannot contain spaces, "
			       "newlines or special characters.";
	if (name.n >= sizeof(c->name))
		return "ERR client name too long (kvd keeps 63 bytes)";
	kvd_resp_set_name(c, name.p, name.n);
	return NULL;
}

const char *resp_hello(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice o, user, pass, name = {NULL, 0};
	struct resp_it it;
	int has_name = 0;
	long long ver = 2;
	const char *err;

	if (r->argc >= 2 && resp_ll(r->a[1], &ver))
		return "ERR Protocol version is not an integer or out of range";
	if (ver != 2)
		return "NOPROTO sorry, this protocol version is not supported "
		       "(kvd speaks RESP2 only)";
	/* Options follow the version: none unless there are 3+ arguments
	 * (starting the walk at 2 on a shorter request read past it). */
	if (r->argc > 2)
		resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i++) {
		uint32_t more = r->argc - 1 - i;

		resp_it_next(&it, &o);
		if (resp_eq(o, "auth") && more >= 2) {
			resp_it_next(&it, &user);
			resp_it_next(&it, &pass);
			if ((err = check_pass(c, user, pass)))
				return err;
			i += 2;
		} else if (resp_eq(o, "setname") && more >= 1) {
			resp_it_next(&it, &name);
			has_name = 1;
			i++;
		} else {
			snprintf(r->err, sizeof(r->err),
				 "ERR Syntax error in HELLO option '%.*s'",
				 (int)(o.n > 64 ? 64 : o.n), (const char *)o.p);
			return r->err;
		}
	}
	if (kvd_auth_pending(c))
		return "NOAUTH HELLO must be called with the client already "
		       "authenticated, otherwise the HELLO <proto> AUTH <user> "
		       "<pass> option can be used to authenticate the client "
		       "and select the RESP protocol version at the same time";
	if (has_name && (err = set_name(c, name)))
		return err;
	resp_add_array(c, 14);
	resp_add_cstr(c, "server");
	resp_add_cstr(c, "kvd");
	resp_add_cstr(c, "version");
	resp_add_cstr(c, "7.0.0");
	resp_add_cstr(c, "proto");
	resp_add_int(c, 2);
	resp_add_cstr(c, "id");
	resp_add_int(c, (int64_t)c->id);
	resp_add_cstr(c, "mode");
	resp_add_cstr(c, "standalone");
	resp_add_cstr(c, "role");
	resp_add_cstr(c, "master");
	resp_add_cstr(c, "modules");
	resp_add_array(c, 0);
	return NULL;
}

static void add_help(struct kvd_conn *c, const char *const *lines)
{
	size_t n = 0;

	while (lines[n])
		n++;
	resp_add_array(c, n);
	for (size_t i = 0; i < n; i++)
		resp_add_status(c, lines[i]);
}

/* CLIENT REPLY ON|OFF|SKIP, as Redis: OFF and SKIP answer nothing, and
 * SKIP does nothing while OFF; resp.c mutes the replies. */
static const char *client_reply(struct kvd_conn *c, struct kv_slice mode)
{
	if (resp_eq(mode, "on")) {
		c->resp_state &= ~(uint32_t)(RESP_REPLY_OFF | RESP_REPLY_SKIP);
		resp_add_ok(c);
	} else if (resp_eq(mode, "off")) {
		c->resp_state |= RESP_REPLY_OFF;
	} else if (resp_eq(mode, "skip")) {
		if (!(c->resp_state & RESP_REPLY_OFF))
			c->resp_state |= RESP_REPLY_SKIP_NEXT;
	} else {
		return resp_err_syntax;
	}
	return NULL;
}

const char *resp_client(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
	    "ID",
	    "    Return the ID of the current connection.",
	    "GETNAME",
	    "    Return the name of the current connection.",
	    "SETNAME <connection-name>",
	    "    Assign the name <connection-name> to the current connection.",
	    "SETINFO <option> <value>",
	    "    Accepted and ignored.",
	    "LIST [TYPE normal|master|replica|pubsub] [ID <id> [<id> ...]]",
	    "    Return information about client connections.",
	    "INFO",
	    "    Return information about the current client connection.",
	    "KILL <ip:port>",
	    "    Kill connection made from <ip:port>.",
	    "KILL <option> <value> [<option> <value> [...]]",
	    "    Kill connections. Options are: ID <client-id>, ADDR "
	    "<ip:port>, LADDR <ip:port>, USER default, TYPE normal, SKIPME "
	    "yes|no.",
	    "NO-EVICT (ON|OFF), NO-TOUCH (ON|OFF)",
	    "    Accepted (kvd evicts nothing and tracks no access).",
	    "REPLY (ON|OFF|SKIP)",
	    "    Control the replies sent to the current connection.",
	    "HELP",
	    "    Print this help.",
	    NULL};
	struct kv_slice sub = r->a[1];
	const char *err;

	if (kvd_resp_client_intro(c, r, &err))
		return err;
	if (resp_eq(sub, "id") && r->argc == 2) {
		resp_add_int(c, (int64_t)c->id);
	} else if (resp_eq(sub, "getname") && r->argc == 2) {
		if (c->name[0])
			resp_add_cstr(c, c->name);
		else
			resp_add_nil(c);
	} else if (resp_eq(sub, "setname") && r->argc == 3) {
		if ((err = set_name(c, r->a[2])))
			return err;
		resp_add_ok(c);
	} else if (resp_eq(sub, "setinfo") && r->argc == 4) {
		resp_add_ok(c);
	} else if (resp_eq(sub, "reply") && r->argc == 3) {
		return client_reply(c, r->a[2]);
	} else if (resp_eq(sub, "help") && r->argc == 2) {
		add_help(c, help);
	} else if (resp_eq(sub, "id") || resp_eq(sub, "getname") ||
		   resp_eq(sub, "setname") || resp_eq(sub, "setinfo") ||
		   resp_eq(sub, "reply") || resp_eq(sub, "help")) {
		char name[24];

		snprintf(name, sizeof(name), "client|%.*s", (int)sub.n,
			 (const char *)sub.p);
		for (char *p = name; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		return resp_arity_error(r, name);
	} else {
		return resp_subcmd_error(r, "CLIENT");
	}
	return NULL;
}

/* ===================== COMMAND ===================== */

static void add_flags(struct kvd_conn *c, const struct resp_cmd *d)
{
	const char *f[7];
	size_t n = 0;

	if (d->flags & RC_WRITE)
		f[n++] = "write";
	if (d->flags & RC_READ)
		f[n++] = "readonly";
	if (d->flags & RC_ADMIN)
		f[n++] = "admin";
	if (d->flags & RC_CONN)
		f[n++] = "loading", f[n++] = "stale";
	if (d->flags & RC_FAST)
		f[n++] = "fast";
	if (d->flags & RC_NOMULTI)
		f[n++] = "no_multi";
	resp_add_array(c, n);
	for (size_t i = 0; i < n; i++)
		resp_add_status(c, f[i]);
}

static void add_categories(struct kvd_conn *c, const struct resp_cmd *d)
{
	char group[24];

	snprintf(group, sizeof(group), "@%s",
		 !strcmp(d->group, "generic") ? "keyspace" : d->group);
	resp_add_array(c, 3);
	resp_add_status(c, d->flags & RC_WRITE	? "@write"
			   : d->flags & RC_READ ? "@read"
						: group);
	resp_add_status(c, d->flags & RC_FAST ? "@fast" : "@slow");
	resp_add_status(c, (d->flags & (RC_WRITE | RC_READ)) ? group : "@kvd");
}

/* Redis 7's ten fields: name, arity, flags, first, last and step keys, ACL
 * categories, tips, key specs, subcommands. */
static void add_info(struct kvd_conn *c, const struct resp_cmd *d)
{
	resp_add_array(c, 10);
	resp_add_cstr(c, d->name);
	resp_add_int(c, d->arity);
	add_flags(c, d);
	resp_add_int(c, d->first);
	resp_add_int(c, d->last);
	resp_add_int(c, d->step);
	add_categories(c, d);
	resp_add_array(c, 0);
	resp_add_array(c, 0);
	resp_add_array(c, 0);
}

/* since[id], or pub/sub's: Redis 2.0 (PUBSUB: 2.8). */
static const char *since_of(int id)
{
	switch (id) {
	case RESP_CMD_PUBLISH:
	case RESP_CMD_SUBSCRIBE:
	case RESP_CMD_PSUBSCRIBE:
	case RESP_CMD_UNSUBSCRIBE:
	case RESP_CMD_PUNSUBSCRIBE: return "2.0.0";
	case RESP_CMD_PUBSUB: return "2.8.0";
	default: return since[id];
	}
}

static void add_docs(struct kvd_conn *c, int id)
{
	const struct resp_cmd *d = &resp_cmds[id];

	resp_add_cstr(c, d->name);
	resp_add_array(c, 6);
	resp_add_cstr(c, "summary");
	resp_add_cstr(c, d->summary);
	resp_add_cstr(c, "since");
	resp_add_cstr(c, since_of(id));
	resp_add_cstr(c, "group");
	resp_add_cstr(c, d->group);
}

static int lookup(struct kv_slice name)
{
	for (int i = 0; i < RESP_NCMDS; i++)
		if (resp_eq(name, resp_cmds[i].name))
			return i;
	return -1;
}

/* COMMAND INFO and COMMAND DOCS: every command, or the ones named.  Names
 * may repeat (about 150 bytes out per 9 in), so the reply is held to
 * max-output as it grows, as MGET's is. */
static const char *command_list(struct kvd_conn *c, struct resp_req *r,
				int docs)
{
	struct resp_it it;
	struct kv_slice a;
	uint64_t n = 0;
	size_t off = c->out.len, cap = resp_reply_cap(c);
	char hdr[24];

	if (r->argc <= 2) {
		for (int i = 0; i < RESP_NCMDS; i++)
			docs ? add_docs(c, i) : add_info(c, &resp_cmds[i]);
		n = RESP_NCMDS;
	}
	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i++) {
		int id;

		resp_it_next(&it, &a);
		id = lookup(a);
		if (id >= 0 && docs)
			add_docs(c, id);
		else if (id >= 0)
			add_info(c, &resp_cmds[id]);
		else if (!docs)
			resp_add_nil(c); /* INFO answers nil, DOCS omits */
		n += id >= 0 || !docs;
		if (c->out.len - off > cap) {
			c->out.len = off;
			return "ERR reply would exceed max-output: ask for "
			       "fewer commands";
		}
	}
	hdr[0] = '*';
	n = 1 + resp_u64(hdr + 1, docs ? 2 * n : n);
	memcpy(hdr + n, "\r\n", 2);
	resp_insert(c, off, hdr, (size_t)n + 2);
	return NULL;
}

const char *resp_command(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "COMMAND <subcommand> [<arg> ...]. Subcommands are:",
	    "(no subcommand)",
	    "    Return details about all commands.",
	    "COUNT",
	    "    Return the total number of commands.",
	    "DOCS [<command-name> ...]",
	    "    Return documentation details.",
	    "INFO [<command-name> ...]",
	    "    Return details about commands.",
	    "LIST",
	    "    Return a list of all commands.",
	    "HELP",
	    "    Print this help.",
	    NULL};
	struct kv_slice sub = r->a[1];

	if (r->argc == 1) {
		resp_add_array(c, RESP_NCMDS);
		for (int i = 0; i < RESP_NCMDS; i++)
			add_info(c, &resp_cmds[i]);
	} else if (resp_eq(sub, "count") && r->argc == 2) {
		resp_add_int(c, RESP_NCMDS);
	} else if (resp_eq(sub, "list") && r->argc == 2) {
		resp_add_array(c, RESP_NCMDS);
		for (int i = 0; i < RESP_NCMDS; i++)
			resp_add_cstr(c, resp_cmds[i].name);
	} else if (resp_eq(sub, "list")) {
		/* Redis 7.0 takes FILTERBY MODULE|ACLCAT|PATTERN <arg>, and
		 * calls anything else a syntax error */
		if (r->argc == 5 && resp_eq(r->a[2], "filterby") &&
		    (resp_eq(r->a[3], "module") || resp_eq(r->a[3], "aclcat") ||
		     resp_eq(r->a[3], "pattern")))
			return "ERR COMMAND LIST FILTERBY is not supported";
		return resp_err_syntax;
	} else if (resp_eq(sub, "info") || resp_eq(sub, "docs")) {
		return command_list(c, r, resp_eq(sub, "docs"));
	} else if (resp_eq(sub, "help") && r->argc == 2) {
		add_help(c, help);
	} else {
		return resp_subcmd_error(r, "COMMAND");
	}
	return NULL;
}

/* ===================== CONFIG GET ===================== */

/* What Redis tools ask for, answered with kvd's equivalent, then kvd's own
 * RESP-relevant options under their own names. */
static void config_value(struct kvd_conn *c, int i, char *v, size_t cap)
{
	const struct kvd_config *cfg = c->io->srv->cfg;
	int sync = cfg->durability == KVD_DUR_SYNC;

	switch (i) {
	case 0: snprintf(v, cap, "%s", ""); break;   /* save */
	case 1: snprintf(v, cap, "%s", "no"); break; /* appendonly */
	case 2: snprintf(v, cap, "%s", sync ? "always" : "everysec"); break;
	case 3: snprintf(v, cap, "%s", "1"); break; /* databases */
	case 4: snprintf(v, cap, "%u", KVD_LIVE(cfg->max_clients)); break;
	case 5: snprintf(v, cap, "%u", c->io->srv->resp_port); break;
	case 6: snprintf(v, cap, "%s", cfg->bind); break;
	case 7: snprintf(v, cap, "%u", KVD_LIVE(cfg->idle_timeout)); break;
	case 8: snprintf(v, cap, "%s", "0"); break; /* maxmemory */
	case 9:
	case 10:
		snprintf(v, cap, "%llu", (unsigned long long)cfg->max_frame);
		break;
	case 11:
		snprintf(v, cap, "%s", kvd_durability_name(cfg->durability));
		break;
	case 12:
		snprintf(v, cap, "%llu", (unsigned long long)cfg->max_key);
		break;
	case 13:
		snprintf(v, cap, "%llu", (unsigned long long)cfg->max_value);
		break;
	default: snprintf(v, cap, "%s", cfg->resp_flushall ? "yes" : "no");
	}
}

static const char *const config_names[] = {
    "save",
    "appendonly",
    "appendfsync",
    "databases",
    "maxclients",
    "port",
    "bind",
    "timeout",
    "maxmemory",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "durability",
    "max-key-size",
    "max-value-size",
    "resp-flushall",
};
#define NCONFIG (sizeof(config_names) / sizeof(config_names[0]))
#define NCONFIG_ALL (NCONFIG + 16) /* and kvd_config_settable's */

/* Parameter k of CONFIG GET: the names above, then those CONFIG SET may
 * change under kvd's own names; NULL past the last. */
static const char *config_name(size_t k)
{
	return k < NCONFIG ? config_names[k]
			   : kvd_config_settable((unsigned)(k - NCONFIG));
}

/* Which names CONFIG GET's patterns (compiled once each) match; -1 when
 * out of memory. */
static int config_want(struct resp_req *r, uint8_t *want, uint64_t *n)
{
	struct resp_glob *g = resp_glob_new();
	struct resp_it it;
	struct kv_slice pat;

	if (!g)
		return -1;
	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i++) {
		char low[128];

		resp_it_next(&it, &pat);
		if (pat.n > sizeof(low))
			continue;
		for (size_t j = 0; j < pat.n; j++)
			low[j] = (char)(pat.p[j] >= 'A' && pat.p[j] <= 'Z'
					    ? pat.p[j] + 32
					    : pat.p[j]);
		pat.p = (const uint8_t *)low;
		if (resp_glob_set(g, pat)) {
			resp_glob_free(g);
			return -1;
		}
		for (size_t k = 0; k < NCONFIG_ALL && config_name(k); k++) {
			struct kv_slice name = {(const uint8_t *)config_name(k),
						strlen(config_name(k))};

			if (!want[k] && resp_glob_match(g, name))
				want[k] = 1, (*n)++;
		}
	}
	resp_glob_free(g);
	return 0;
}

static const char *config_get(struct kvd_conn *c, struct resp_req *r)
{
	uint8_t want[NCONFIG_ALL] = {0};
	uint64_t n = 0;

	if (config_want(r, want, &n))
		return resp_err_nomem;
	resp_add_array(c, 2 * n);
	for (size_t k = 0; k < NCONFIG_ALL && config_name(k); k++) {
		char v[64];

		if (!want[k])
			continue;
		if (k < NCONFIG)
			config_value(c, (int)k, v, sizeof(v));
		else if (kvd_config_format(c->io->srv->cfg, config_name(k), v,
					   sizeof(v)))
			v[0] = '\0';
		resp_add_cstr(c, config_name(k));
		resp_add_cstr(c, v);
	}
	return NULL;
}

/* CONFIG SET name value [name value ...]: all or nothing, as Redis 7. */
static const char *config_set(struct kvd_conn *c, struct resp_req *r)
{
	struct kvd_config *cfg = c->io->srv->cfg;
	char name[128], val[128];

	if (r->argc < 4)
		return resp_arity_error(r, "config|set");
	if (r->argc % 2) /* a name without its value: Redis 7.0's words */
		return resp_err_syntax;
	for (int apply = 0; apply < 2; apply++) {
		struct resp_it it;
		struct kv_slice a, b;

		resp_it_init(r, 2, &it);
		for (uint32_t i = 2; i < r->argc; i += 2) {
			resp_it_next(&it, &a);
			resp_it_next(&it, &b);
			snprintf(name, sizeof(name), "%.*s",
				 (int)(a.n < 127 ? a.n : 127),
				 (const char *)a.p);
			snprintf(val, sizeof(val), "%.*s",
				 (int)(b.n < 127 ? b.n : 127),
				 (const char *)b.p);
			if (memchr(a.p, '\0', a.n) || memchr(b.p, '\0', b.n) ||
			    b.n > 127)
				val[0] = '\0'; /* refused as not a number */
			if (!kvd_config_set(cfg, name, val, apply, r->err,
					    sizeof(r->err)))
				continue;
			/* a Redis setting kvd only reports (CONFIG GET) */
			for (size_t k = 0; k < NCONFIG; k++)
				if (!strncmp(r->err, "ERR Unknown", 11) &&
				    resp_eq(a, config_names[k]))
					snprintf(r->err, sizeof(r->err),
						 "ERR CONFIG SET failed "
						 "(possibly related to "
						 "argument '%s') - %s is "
						 "read-only at run time (a "
						 "Redis setting kvd reports)",
						 config_names[k],
						 config_names[k]);
			return r->err;
		}
	}
	resp_add_ok(c);
	return NULL;
}

const char *resp_config(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "CONFIG <subcommand> [<arg> ...]. Subcommands are:",
	    "GET <pattern>",
	    "    Return parameters matching the glob-like <pattern> and "
	    "their values.",
	    "SET <directive> <value> [<directive> <value> ...]",
	    "    Set the configuration <directive> to <value> (the options "
	    "SIGHUP reloads that are numbers, and log-level).",
	    "RESETSTAT",
	    "    Reset statistics reported by the INFO command.",
	    "REWRITE",
	    "    Write the options CONFIG SET changed, and the replication "
	    "role, "
	    "into the config file.",
	    "HELP",
	    "    Print this help.",
	    NULL};
	char err[sizeof(r->err)];

	if (resp_eq(r->a[1], "get")) {
		if (r->argc < 3)
			return resp_arity_error(r, "config|get");
		return config_get(c, r);
	} else if (resp_eq(r->a[1], "help") && r->argc == 2) {
		add_help(c, help);
	} else if (resp_eq(r->a[1], "set")) {
		return config_set(c, r);
	} else if (resp_eq(r->a[1], "rewrite") && r->argc == 2) {
		/* Blocks this io thread for a small file's write and two
		 * fsyncs: an operator's command (Sentinel sends it once per
		 * failover), answered in order inside MULTI as Redis does. */
		char role[300];

		kvd_repl_config_role(role, sizeof(role));
		if (kvd_config_rewrite(c->io->srv->cfg, role, err,
				       sizeof(err))) {
			snprintf(r->err, sizeof(r->err), "%s", err);
			log_warn("CONFIG REWRITE failed: %s", err + 4);
			return r->err;
		}
		resp_add_ok(c);
	} else if (resp_eq(r->a[1], "resetstat") && r->argc == 2) {
		kvd_stats_reset(c->io->srv);
		kvd_resp_cmdstats_reset(c->io);
		resp_add_ok(c);
	} else if (resp_eq(r->a[1], "rewrite") ||
		   resp_eq(r->a[1], "resetstat")) {
		return resp_arity_error(r, resp_eq(r->a[1], "rewrite")
					       ? "config|rewrite"
					       : "config|resetstat");
	} else {
		return resp_subcmd_error(r, "CONFIG");
	}
	return NULL;
}

/* ===================== INFO, TIME ===================== */

#define INFO_DEFAULT                                                           \
	(KVD_INFO_ALL | KVD_RESP_INFO_MEMORY | KVD_RESP_INFO_CPU |             \
	 KVD_RESP_INFO_REPLICATION)

static unsigned info_section(struct kv_slice s)
{
	static const struct {
		const char *name;
		unsigned bits;
	} tab[] = {
	    {"server", KVD_INFO_SERVER},
	    {"clients", KVD_INFO_CLIENTS},
	    {"persistence", KVD_INFO_PERSISTENCE},
	    {"stats", KVD_INFO_STATS},
	    {"keyspace", KVD_INFO_KEYSPACE},
	    {"memory", KVD_RESP_INFO_MEMORY},
	    {"cpu", KVD_RESP_INFO_CPU},
	    {"commandstats", KVD_RESP_INFO_CMDSTATS},
	    {"replication", KVD_RESP_INFO_REPLICATION},
	    {"default", INFO_DEFAULT},
	    {"all", INFO_DEFAULT | KVD_RESP_INFO_CMDSTATS},
	    {"everything", INFO_DEFAULT | KVD_RESP_INFO_CMDSTATS},
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (resp_eq(s, tab[i].name))
			return tab[i].bits;
	return 0; /* unknown sections are empty, as in Redis */
}

/* Redis's order: server, clients, memory, persistence, stats,
 * replication, cpu, commandstats, keyspace; a blank line between
 * sections. */
static void info_sections(struct kvd_conn *c, unsigned sections)
{
	static const unsigned order[] = {
	    KVD_INFO_SERVER | KVD_INFO_CLIENTS,
	    KVD_RESP_INFO_MEMORY,
	    KVD_INFO_PERSISTENCE | KVD_INFO_STATS,
	    KVD_RESP_INFO_REPLICATION,
	    KVD_RESP_INFO_CPU,
	    KVD_RESP_INFO_CMDSTATS,
	    KVD_INFO_KEYSPACE,
	};
	size_t start = c->out.len;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		unsigned s = sections & order[i];

		if (!s)
			continue;
		if (c->out.len > start)
			kv_buf_append(&c->out, "\r\n", 2);
		if (s & KVD_INFO_ALL)
			kvd_stats_info(c->io, s, &c->out);
		else if (s & KVD_RESP_INFO_REPLICATION)
			kvd_resp_repl_info(c->io->srv, &c->out);
		else
			kvd_resp_info_section(c->io, s, &c->out);
	}
}

const char *resp_info(struct kvd_conn *c, struct resp_req *r)
{
	unsigned sections = r->argc == 1 ? INFO_DEFAULT : 0;
	size_t off = c->out.len;
	struct resp_it it;
	struct kv_slice s;
	char hdr[24];
	size_t h;

	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		resp_it_next(&it, &s);
		sections |= info_section(s);
	}
	info_sections(c, sections);
	hdr[0] = '$';
	h = 1 + resp_u64(hdr + 1, c->out.len - off);
	memcpy(hdr + h, "\r\n", 2);
	resp_insert(c, off, hdr, h + 2);
	resp_add_raw(c, "\r\n", 2);
	return NULL;
}

const char *resp_time(struct kvd_conn *c, struct resp_req *r)
{
	struct timespec ts;
	char num[24];

	(void)r;
	clock_gettime(CLOCK_REALTIME, &ts);
	resp_add_array(c, 2);
	resp_add_bulk(c, num, resp_u64(num, (uint64_t)ts.tv_sec));
	resp_add_bulk(c, num, resp_u64(num, (uint64_t)ts.tv_nsec / 1000));
	return NULL;
}
