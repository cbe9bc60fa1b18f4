/* cmds.c - kvcli's commands: one function per server operation, and the
 * table that names them, with their usage and help text.
 *
 * Each command parses its own arguments (cli_args), connects, makes one
 * synchronous libkvclient call (or a scan), and prints through out.c, so
 * every command gets the four output styles and the same exit codes.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvcli.h"

#define USAGE_ERROR(cmd) (cli_usage(cmd), EXIT_ERROR)

/* Parse, check the positional count, and connect: the prologue of every
 * command.  Returns -1 when the command should go on. */
static int prologue(struct cli *cli, const struct cmd *cmd, int argc,
		    char **argv, const struct cli_opt *opts, struct cli_args *a,
		    int min, int max)
{
	int rc = cli_args(cmd, argc, argv, opts, a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a->npos < min || (max >= 0 && a->npos > max)) {
		fprintf(stderr, "kvcli %s: wrong number of arguments\n",
			cmd->name);
		return USAGE_ERROR(cmd);
	}
	if (cli_connect(cli))
		return EXIT_ERROR;
	return -1;
}

static kvc_val str_val(const char *s)
{
	kvc_val v = {s, cli_len(s)};

	return v;
}

/* The value argument: --file F, or stdin with -x, or positional i. */
static int value_arg(struct cli *cli, const struct cli_args *a, int file_opt,
		     int i, struct kv_buf *b, kvc_val *v)
{
	const char *path = a->set[file_opt]   ? a->val[file_opt]
			   : cli->value_stdin ? "-"
					      : NULL;

	if (path) {
		if (cli_read_file(path, b))
			return -1;
		v->p = b->data ? (const void *)b->data : "";
		v->len = b->len;
		return a->npos > i ? 1 : 0; /* a stray positional */
	}
	if (a->npos <= i)
		return 1;
	*v = str_val(a->pos[i]);
	return a->npos > i + 1 ? 1 : 0;
}

static const struct cmd *self(const char *name)
{
	return cli_find(name);
}

/* ===================== Commands ===================== */

static int c_hello(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val info;
	int rc = prologue(cli, self("hello"), argc, argv, NULL, &a, 0, 0);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_hello(cli->c, &info)))
		return cli_fail(cli, "hello", rc);
	out_map(cli, info);
	return EXIT_OK;
}

static int c_ping(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val echo;
	int rc = prologue(cli, self("ping"), argc, argv, NULL, &a, 0, 1);

	if (rc >= 0)
		return rc;
	rc = a.npos ? kvc_ping(cli->c, a.pos[0], cli_len(a.pos[0]), &echo)
		    : kvc_ping(cli->c, NULL, 0, &echo);
	if (rc)
		return cli_fail(cli, "ping", rc);
	if (!echo.p)
		echo = str_val("PONG");
	out_text(cli, "reply", echo);
	return EXIT_OK;
}

/* GET and GETDEL. */
static int get_like(struct cli *cli, int argc, char **argv, int del)
{
	const char *name = del ? "getdel" : "get";
	struct cli_args a;
	kvc_val key, val = {NULL, 0};
	int rc = prologue(cli, self(name), argc, argv, NULL, &a, 1, 1);

	if (rc >= 0)
		return rc;
	key = str_val(a.pos[0]);
	rc = del ? kvc_getdel(cli->c, key.p, key.len, &val)
		 : kvc_get(cli->c, key.p, key.len, &val);
	if (rc == -KVC_NOT_FOUND && cli->fmt != FMT_READABLE) {
		if (cli->fmt != FMT_RAW)
			out_value(cli, key, (kvc_val){NULL, 0});
		return EXIT_NOT_FOUND;
	}
	if (rc)
		return cli_fail(cli, name, rc);
	out_value(cli, key, val);
	return EXIT_OK;
}

static int c_get(struct cli *cli, int argc, char **argv)
{
	return get_like(cli, argc, argv, 0);
}

static int c_getdel(struct cli *cli, int argc, char **argv)
{
	return get_like(cli, argc, argv, 1);
}

static int c_put(struct cli *cli, int argc, char **argv)
{
	enum { TTL, NX, XX, KEEPTTL, FILE_ };
	static const struct cli_opt opts[] = {
	    {"ttl", 0, 1},     {"nx", 0, 0},	 {"xx", 0, 0},
	    {"keepttl", 0, 0}, {"file", 'f', 1}, {0, 0, 0}};
	const struct cmd *cmd = self("put");
	struct kv_buf b = {0};
	unsigned long long ttl = 0;
	unsigned flags = 0;
	struct cli_args a;
	kvc_val key, val;
	int rc = prologue(cli, cmd, argc, argv, opts, &a, 1, 2);

	if (rc >= 0)
		return rc;
	if (a.set[TTL] && cli_uint("--ttl", a.val[TTL], 1ull << 50, &ttl))
		return EXIT_ERROR;
	flags = (a.set[NX] ? KVC_PUT_NX : 0) | (a.set[XX] ? KVC_PUT_XX : 0) |
		(a.set[KEEPTTL] ? KVC_PUT_KEEPTTL : 0);
	key = str_val(a.pos[0]);
	if ((rc = value_arg(cli, &a, FILE_, 1, &b, &val))) {
		kv_buf_free(&b);
		return rc < 0 ? EXIT_ERROR : USAGE_ERROR(cmd);
	}
	rc = kvc_put(cli->c, key.p, key.len, val.p, val.len, ttl, flags);
	kv_buf_free(&b);
	if (rc)
		return cli_fail(cli, "put", rc);
	out_ok(cli);
	return EXIT_OK;
}

static int c_append(struct cli *cli, int argc, char **argv)
{
	static const struct cli_opt opts[] = {{"file", 'f', 1}, {0, 0, 0}};
	const struct cmd *cmd = self("append");
	struct kv_buf b = {0};
	struct cli_args a;
	kvc_val key, val;
	uint64_t n;
	int rc = prologue(cli, cmd, argc, argv, opts, &a, 1, 2);

	if (rc >= 0)
		return rc;
	key = str_val(a.pos[0]);
	if ((rc = value_arg(cli, &a, 0, 1, &b, &val))) {
		kv_buf_free(&b);
		return rc < 0 ? EXIT_ERROR : USAGE_ERROR(cmd);
	}
	rc = kvc_append(cli->c, key.p, key.len, val.p, val.len, &n);
	kv_buf_free(&b);
	if (rc)
		return cli_fail(cli, "append", rc);
	out_int(cli, "length", (long long)n);
	return EXIT_OK;
}

/* DEL, and EXPIRE (ttl_arg: the milliseconds). */
static int c_del(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	int rc = prologue(cli, self("del"), argc, argv, NULL, &a, 1, 1);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_del(cli->c, a.pos[0], cli_len(a.pos[0]))))
		return cli_fail(cli, "del", rc);
	out_ok(cli);
	return EXIT_OK;
}

static int c_expire(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	unsigned long long ms;
	int rc = prologue(cli, self("expire"), argc, argv, NULL, &a, 2, 2);

	if (rc >= 0)
		return rc;
	if (cli_uint("expire", a.pos[1], 1ull << 50, &ms))
		return EXIT_ERROR;
	if ((rc = kvc_expire(cli->c, a.pos[0], cli_len(a.pos[0]), ms)))
		return cli_fail(cli, "expire", rc);
	out_ok(cli);
	return EXIT_OK;
}

static int c_ttl(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	int64_t ms;
	int rc = prologue(cli, self("ttl"), argc, argv, NULL, &a, 1, 1);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_ttl(cli->c, a.pos[0], cli_len(a.pos[0]), &ms)))
		return cli_fail(cli, "ttl", rc);
	out_int(cli, "ttl_ms", ms);
	return EXIT_OK;
}

static int incr_like(struct cli *cli, int argc, char **argv, int sign)
{
	const char *name = sign > 0 ? "incr" : "decr";
	struct cli_args a;
	long long delta = 1;
	int64_t v;
	int rc = prologue(cli, self(name), argc, argv, NULL, &a, 1, 2);

	if (rc >= 0)
		return rc;
	if (a.npos == 2 && cli_int(name, a.pos[1], &delta))
		return EXIT_ERROR;
	if (sign < 0 && delta == INT64_MIN) {
		fprintf(stderr, "kvcli: decr: delta out of range\n");
		return EXIT_ERROR;
	}
	rc = kvc_incr(cli->c, a.pos[0], cli_len(a.pos[0]), sign * delta, &v);
	if (rc)
		return cli_fail(cli, name, rc);
	out_int(cli, "value", v);
	return EXIT_OK;
}

static int c_incr(struct cli *cli, int argc, char **argv)
{
	return incr_like(cli, argc, argv, 1);
}

static int c_decr(struct cli *cli, int argc, char **argv)
{
	return incr_like(cli, argc, argv, -1);
}

/* Positional arguments as kvc_vals, into a malloc'd array. */
static kvc_val *vals_of(char **s, int n)
{
	kvc_val *v = malloc((size_t)(n ? n : 1) * sizeof(*v));

	for (int i = 0; v && i < n; i++)
		v[i] = str_val(s[i]);
	return v;
}

static int c_mget(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val *keys, *vals;
	int rc = prologue(cli, self("mget"), argc, argv, NULL, &a, 1, -1);

	if (rc >= 0)
		return rc;
	keys = vals_of(a.pos, a.npos);
	vals = vals_of(a.pos, a.npos);
	if (!keys || !vals)
		rc = -KVC_NOMEM;
	else
		rc = kvc_mget(cli->c, keys, (size_t)a.npos, vals);
	if (rc) {
		free(keys);
		free(vals);
		return cli_fail(cli, "mget", rc);
	}
	out_kv_header(cli, 1);
	for (int i = 0; i < a.npos; i++) {
		if (cli->fmt == FMT_READABLE) {
			char num[24];
			int n = snprintf(num, sizeof(num), "%d) ", i + 1);

			kv_buf_append(&cli->ob, num, (size_t)n);
		}
		out_kv(cli, keys[i], &vals[i], 0);
	}
	free(keys);
	free(vals);
	return EXIT_OK;
}

static int c_mput(struct cli *cli, int argc, char **argv)
{
	static const struct cli_opt opts[] = {{"ttl", 0, 1}, {0, 0, 0}};
	const struct cmd *cmd = self("mput");
	unsigned long long ttl = 0;
	struct cli_args a;
	kvc_val *keys, *vals;
	int rc = prologue(cli, cmd, argc, argv, opts, &a, 2, -1), n;

	if (rc >= 0)
		return rc;
	if (a.npos % 2)
		return USAGE_ERROR(cmd);
	if (a.set[0] && cli_uint("--ttl", a.val[0], 1ull << 50, &ttl))
		return EXIT_ERROR;
	n = a.npos / 2;
	keys = malloc((size_t)n * sizeof(*keys));
	vals = malloc((size_t)n * sizeof(*vals));
	rc = -KVC_NOMEM;
	if (keys && vals) {
		for (int i = 0; i < n; i++) {
			keys[i] = str_val(a.pos[2 * i]);
			vals[i] = str_val(a.pos[2 * i + 1]);
		}
		rc = kvc_mput(cli->c, keys, vals, (size_t)n, ttl);
	}
	free(keys);
	free(vals);
	if (rc)
		return cli_fail(cli, "mput", rc);
	out_ok(cli);
	return EXIT_OK;
}

/* MDEL, EXISTS: a count over keys. */
static int count_keys(struct cli *cli, int argc, char **argv, int del)
{
	const char *name = del ? "mdel" : "exists";
	struct cli_args a;
	kvc_val *keys;
	uint64_t n = 0;
	int rc = prologue(cli, self(name), argc, argv, NULL, &a, 1, -1);

	if (rc >= 0)
		return rc;
	if (!(keys = vals_of(a.pos, a.npos)))
		rc = -KVC_NOMEM;
	else if (del)
		rc = kvc_mdel(cli->c, keys, (size_t)a.npos, &n);
	else
		rc = kvc_exists(cli->c, keys, (size_t)a.npos, &n);
	free(keys);
	if (rc)
		return cli_fail(cli, name, rc);
	out_int(cli, del ? "deleted" : "count", (long long)n);
	return EXIT_OK;
}

static int c_mdel(struct cli *cli, int argc, char **argv)
{
	return count_keys(cli, argc, argv, 1);
}

static int c_exists(struct cli *cli, int argc, char **argv)
{
	return count_keys(cli, argc, argv, 0);
}

static int c_count(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	uint64_t n;
	int rc = prologue(cli, self("count"), argc, argv, NULL, &a, 0, 1);

	if (rc >= 0)
		return rc;
	rc = a.npos ? kvc_count(cli->c, a.pos[0], cli_len(a.pos[0]), &n)
		    : kvc_count(cli->c, NULL, 0, &n);
	if (rc)
		return cli_fail(cli, "count", rc);
	out_int(cli, "count", (long long)n);
	return EXIT_OK;
}

static int c_stats(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val map;
	int rc = prologue(cli, self("stats"), argc, argv, NULL, &a, 0, 0);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_stats(cli->c, &map)))
		return cli_fail(cli, "stats", rc);
	out_map(cli, map);
	return EXIT_OK;
}

static int c_scan(struct cli *cli, int argc, char **argv)
{
	enum { START, END, LIMIT, KEYS, BATCH };
	static const struct cli_opt opts[] = {
	    {"start", 0, 1},	   {"end", 0, 1},   {"limit", 'n', 1},
	    {"keys-only", 'k', 0}, {"batch", 0, 1}, {0, 0, 0}};
	unsigned long long limit = 0, batch = 0, n = 0;
	kvc_val prefix = {NULL, 0}, start, end, k, v;
	struct cli_args a;
	kvc_scan *s;
	int rc = prologue(cli, self("scan"), argc, argv, opts, &a, 0, 1);

	if (rc >= 0)
		return rc;
	if ((a.set[LIMIT] &&
	     cli_uint("--limit", a.val[LIMIT], UINT64_MAX, &limit)) ||
	    (a.set[BATCH] && cli_uint("--batch", a.val[BATCH], 10000, &batch)))
		return EXIT_ERROR;
	if (a.npos)
		prefix = str_val(a.pos[0]);
	start = str_val(a.set[START] ? a.val[START] : "");
	end = str_val(a.set[END] ? a.val[END] : "");
	if (limit && (!batch || batch > limit))
		batch = limit < 10000 ? limit : 10000;
	if ((rc = kvc_scan_open(cli->c, &s, &prefix, &start, &end,
				(unsigned)batch,
				a.set[KEYS] ? KVC_SCAN_KEYS_ONLY : 0)))
		return cli_fail(cli, "scan", rc);
	out_kv_header(cli, !a.set[KEYS]);
	while ((!limit || n < limit) && (rc = kvc_scan_next(s, &k, &v)) == 0) {
		out_kv(cli, k, a.set[KEYS] ? NULL : &v, 1);
		n++;
	}
	kvc_scan_close(s);
	if (rc && rc != -KVC_END)
		return cli_fail(cli, "scan", rc);
	return EXIT_OK;
}

static int c_flushall(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	int rc = prologue(cli, self("flushall"), argc, argv, NULL, &a, 0, 0);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_flushall(cli->c)))
		return cli_fail(cli, "flushall", rc);
	out_ok(cli);
	return EXIT_OK;
}

/* AUTH, and the password kept for every later connection, as if given
 * with -a: a reconnect (the server restarted) authenticates by itself.
 * Not connected while another password is set (a wrong -a), connecting
 * with this one is the AUTH. */
static int c_auth(struct cli *cli, int argc, char **argv)
{
	const struct cmd *cmd = self("auth");
	struct cli_args a;
	size_t len;
	int rc = cli_args(cmd, argc, argv, NULL, &a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a.npos != 1)
		return USAGE_ERROR(cmd);
	len = cli_len(a.pos[0]);
	if (cli->password && !(cli->c && kvc_fd(cli->c) >= 0)) {
		if (cli_set_password(cli, a.pos[0], len) || cli_connect(cli))
			return EXIT_ERROR;
	} else {
		if (cli_connect(cli))
			return EXIT_ERROR;
		if ((rc = kvc_auth(cli->c, a.pos[0], len)))
			return cli_fail(cli, "auth", rc);
		if (cli_set_password(cli, a.pos[0], len))
			return EXIT_ERROR;
	}
	out_ok(cli);
	return EXIT_OK;
}

static int c_backup(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	uint64_t keys;
	int rc = prologue(cli, self("backup"), argc, argv, NULL, &a, 1, 1);

	if (rc >= 0)
		return rc;
	if ((rc = kvc_backup(cli->c, a.pos[0], &keys)))
		return cli_fail(cli, "backup", rc);
	out_int(cli, "keys", (long long)keys);
	return EXIT_OK;
}

static int c_help(struct cli *cli, int argc, char **argv)
{
	const struct cmd *cmd;
	struct cli_args a;
	int rc = cli_args(cli_find("help"), argc, argv, NULL, &a);

	(void)cli;
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	argc = a.npos + 1;
	if (argc < 2) {
		printf("Commands (kvcli help CMD, or kvcli CMD --help, for "
		       "details):\n");
		for (cmd = kvcli_cmds; cmd->name; cmd++)
			printf("  %-11s %s\n", cmd->name, cmd->usage);
		return EXIT_OK;
	}
	if (!(cmd = cli_find(a.pos[0]))) {
		fprintf(stderr, "kvcli: unknown command '%s'\n", a.pos[0]);
		return EXIT_ERROR;
	}
	cli_help(cmd, stdout);
	return EXIT_OK;
}

/* ===================== The table ===================== */

#define OUT_OK "Prints OK.\n"

const struct cmd kvcli_cmds[] = {
    {"hello", c_hello, "",
     "The server's description: protocol version, server version, shards,\n"
     "threads, durability mode and size limits.\n"},
    {"ping", c_ping, "[MESSAGE]",
     "Check that the server answers.  Prints PONG, or MESSAGE as the server\n"
     "echoed it.\n"},
    {"get", c_get, "KEY",
     "Print the value of KEY.  Raw output is the value's bytes exactly, with\n"
     "no newline added (kvcli get k > file); JSON output is a record\n"
     "{\"key\":...,\"value\":...}.  Exit status 1 if KEY does not exist.\n"},
    {"put", c_put, "KEY [VALUE] [--ttl MS] [--nx|--xx] [--keepttl] [-f FILE]",
     "Store VALUE under KEY.  The value comes from the argument, from FILE\n"
     "(-f, --file), or from stdin with kvcli -x; files and stdin are read\n"
     "as bytes, so binary values work.\n"
     "  --ttl MS     expire the key MS milliseconds from now\n"
     "  --nx         only if KEY does not exist (else exit status 1)\n"
     "  --xx         only if KEY exists (else exit status 1)\n"
     "  --keepttl    keep the key's current expiry\n" OUT_OK},
    {"del", c_del, "KEY",
     "Delete KEY.  Exit status 1 if it did not exist.\n" OUT_OK},
    {"mget", c_mget, "KEY...",
     "Print the values of several keys, in order: raw output has one value\n"
     "per line, escaped as scan's (an empty line for a missing key, (nil)\n"
     "in batch mode), JSON one record per key\n"
     "(value null when missing), CSV a key,value row per key.\n"},
    {"mput", c_mput, "[--ttl MS] KEY VALUE [KEY VALUE...]",
     "Store several pairs in one request.  Atomic per shard: the pairs of\n"
     "one shard are stored together or not at all, but after an error\n"
     "(disk or map full) other shards' pairs may be stored.\n" OUT_OK},
    {"mdel", c_mdel, "KEY...",
     "Delete several keys; prints how many existed.\n"},
    {"exists", c_exists, "KEY...",
     "Print how many of the keys exist (a key named twice counts twice).\n"},
    {"scan", c_scan,
     "[PREFIX] [--start KEY] [--end KEY] [-n LIMIT] [-k] [--batch N]",
     "Stream the keys that start with PREFIX, in byte order, with their\n"
     "values, following the server's cursor: any number of keys in bounded\n"
     "memory.\n"
     "  --start KEY      from KEY on (inclusive)\n"
     "  --end KEY        up to KEY (exclusive)\n"
     "  -n, --limit N    at most N keys\n"
     "  -k, --keys-only  keys without values\n"
     "  --batch N        keys per round trip (1000; at most 10000)\n"
     "Raw output is KEY TAB VALUE, one record per line, escaped as kvcli\n"
     "dump --tsv writes them (\\t \\n \\r \\\\ \\0 \\xHH): kvcli load --tsv\n"
     "reads it back.  JSON output is the same JSON lines as kvcli dump.\n"},
    {"count", c_count, "[PREFIX]",
     "Print the number of keys (that start with PREFIX).\n"},
    {"stats", c_stats, "",
     "The server's counters.  Raw, readable and CSV output flatten them to\n"
     "one name per line (ops.GET.calls, shards.0.entries); JSON output is\n"
     "one object.\n"},
    {"incr", c_incr, "KEY [DELTA]",
     "Add DELTA (1) to the integer stored under KEY (a missing key counts\n"
     "as 0) and print the result.\n"},
    {"decr", c_decr, "KEY [DELTA]",
     "Subtract DELTA (1) from the integer stored under KEY and print the\n"
     "result.\n"},
    {"append", c_append, "KEY [VALUE] [-f FILE]",
     "Append VALUE (or FILE, or stdin with -x) to the value of KEY, creating\n"
     "it if needed; prints the new length.\n"},
    {"expire", c_expire, "KEY MS",
     "Make KEY expire MS milliseconds from now; 0 removes its expiry.\n"
     "Exit status 1 if KEY does not exist.\n" OUT_OK},
    {"ttl", c_ttl, "KEY",
     "Print the milliseconds before KEY expires, -1 if it never does.\n"
     "Exit status 1 if KEY does not exist.\n"},
    {"getdel", c_getdel, "KEY",
     "Print the value of KEY (as get does) and delete it.\n"},
    {"rename", cmd_v2, "SRC DST [--nx]",
     "Move the value of SRC, with its expiry, to DST (replacing DST).\n"
     "Across shards DST is stored before SRC is deleted: a crash leaves\n"
     "both, never neither.  Exit status 1 if SRC does not exist, or with\n"
     "--nx (only if DST does not exist) if DST exists.\n" OUT_OK},
    {"copy", cmd_v2, "SRC DST [--replace]",
     "Copy the value of SRC, with its expiry, to DST.  Exit status 1 if\n"
     "SRC does not exist, or if DST exists (unless --replace).\n" OUT_OK},
    {"getex", cmd_v2, "KEY [--ttl MS | --at UNIX_MS | --persist]",
     "Print the value of KEY (as get does), then set its expiry:\n"
     "  --ttl MS       MS milliseconds from now\n"
     "  --at UNIX_MS   at that Unix time in milliseconds (a time past\n"
     "                 deletes the key)\n"
     "  --persist      remove it\n"
     "Without one the expiry is unchanged.  Exit status 1 if KEY does not\n"
     "exist.\n"},
    {"incrbyfloat", cmd_v2, "KEY INCREMENT",
     "Add the decimal INCREMENT (1.5, -2, 5.0e3) to the number stored under\n"
     "KEY (a missing key counts as 0), keeping its expiry, and print the\n"
     "result as the server stores it (10.5; a number in JSON output).\n"
     "NOT_FLOAT (exit status 2) for a value that is not a number or an\n"
     "infinite result.\n"},
    {"getrange", cmd_v2, "KEY START END",
     "Print bytes START to END of the value of KEY (inclusive; negative\n"
     "counts from the end: 0 -1 is the whole value), as get prints a\n"
     "value.  Exit status 1 if KEY does not exist.\n"},
    {"setrange", cmd_v2, "KEY OFFSET [VALUE] [-f FILE]",
     "Write VALUE (or FILE, or stdin with -x) into the value of KEY at byte\n"
     "OFFSET, padding with zero bytes, keeping its expiry; prints the new\n"
     "length (an empty VALUE only prints the current one).\n"},
    {"setbit", cmd_v2, "KEY OFFSET BIT",
     "Set bit OFFSET of the value of KEY to BIT (0 or 1), growing the value\n"
     "as needed; bit 0 is the most significant bit of byte 0.  Prints the\n"
     "bit's old value.\n"},
    {"getbit", cmd_v2, "KEY OFFSET",
     "Print bit OFFSET of the value of KEY (0 past its end or for a missing\n"
     "key).\n"},
    {"bitcount", cmd_v2, "KEY [START END] [--bit]",
     "Print the number of bits set in the value of KEY, or in bytes START\n"
     "to END (inclusive, negative from the end; --bit: bits START to END).\n"},
    {"bitpos", cmd_v2, "KEY BIT [START [END]] [--bit]",
     "Print the position of the first bit equal to BIT (0 or 1) in the value\n"
     "of KEY, from byte START to END (--bit: bit positions); -1 if there is\n"
     "none.\n"},
    {"bitop", cmd_v2, "and|or|xor|not DST SRC...",
     "Store the bitwise AND, OR or XOR of the SRC values (NOT: of the one\n"
     "SRC) in DST, without expiry, as long as the longest source; an empty\n"
     "result deletes DST.  Prints the length of DST.\n"},
    {"txn", cmd_txn,
     "[--if-equal KEY VALUE]... [--if-absent KEY]... [-f FILE] [COMMAND...]",
     "Run several commands as one batch: no other client's command runs in\n"
     "between, on any keys.  Each COMMAND argument is one command line, as\n"
     "at the prompt ('put a 1' 'incr n'); without any, they are read one\n"
     "per line from FILE (-f) or stdin (blank lines skipped).  Allowed: get,\n"
     "put, del, mget, mput, mdel, exists, incr, decr, append, expire, ttl,\n"
     "getdel, and rename to bitop, with their own arguments and options.\n"
     "Checks, read before anything runs; if one does not hold nothing runs,\n"
     "and the exit status is 1 (\"(check failed)\" on a terminal):\n"
     "  --if-equal KEY VALUE  KEY must hold exactly VALUE\n"
     "  --if-absent KEY       KEY must not exist\n"
     "Each reply is printed as its command alone prints it, in order; raw\n"
     "output has one per line, escaped as batch mode's ((nil), (error)\n"
     "NAME).  A command that fails while running does not stop the others:\n"
     "it prints (error) NAME (JSON {\"error\":NAME}), and in JSON and CSV\n"
     "output a missing key or an existing one {\"status\":NAME}.  A bad\n"
     "command refuses the whole batch: nothing runs.  The exit status is\n"
     "the worst reply's.\n"},
    {"flushall", c_flushall, "", "Delete every key on every shard.\n" OUT_OK},
    {"auth", c_auth, "PASSWORD",
     "Authenticate the connection, and every later one (a reconnect after\n"
     "the server restarted sends AUTH by itself).  Never written to the\n"
     "history.\n" OUT_OK},
    {"backup", c_backup, "DIR",
     "Make the server copy one consistent cut of every shard into DIR, a\n"
     "directory on the server's machine (absolute; absent or empty), while\n"
     "writes go on.  Prints the number of keys copied.  Start kvd on DIR, or\n"
     "give it to kvd --restore.  Mind -t: a large store takes a while.\n"},
    {"hset", cmd_hset, "KEY FIELD VALUE [FIELD VALUE...]",
     "Set fields of the hash KEY (creating it), in one request computed by\n"
     "the server: clients setting different fields never lose one.  Prints\n"
     "how many fields were new.  A KEY holding a string is an error\n"
     "(WRONG_TYPE), as is a hash past the server's max-hash-fields or\n"
     "max-hash-bytes.\n"},
    {"hget", cmd_hget, "KEY FIELD [FIELD...]",
     "Print the values of fields of the hash KEY.  One field in raw output:\n"
     "exactly its bytes, as get prints a value; several (or batch mode):\n"
     "one per line, escaped as scan's ((nil) in batch mode for a missing\n"
     "one); JSON one record {\"field\":...,\"value\":...} per field (value\n"
     "null when missing); CSV a field,value row per field.  Exit status 1\n"
     "if none of the fields exists.\n"},
    {"hgetall", cmd_hgetall, "KEY",
     "Print every field of the hash KEY with its value, in the order the\n"
     "fields were first set: raw output FIELD TAB VALUE per line (escaped\n"
     "as dump --tsv), JSON one record {\"field\":...,\"value\":...} per\n"
     "field, CSV field,value rows.  A hash too large for one reply is read\n"
     "in pages, its fields then in byte order.  Exit status 1 if KEY does\n"
     "not exist.\n"},
    {"doc", cmd_doc,
     "insert|find|update|delete|databases|collections|create|drop|indexes|"
     "create-index|drop-index ...",
     "MongoDB's documents in the collection COLL of the database DB (the\n"
     "ones kvd's MongoDB door serves), given and printed as JSON (MongoDB's\n"
     "extended JSON: {\"$oid\": ...}, {\"$numberLong\": ...} ...):\n"
     "  doc insert DB.COLL DOC...      insert (an ObjectId _id when DOC has\n"
     "                                 none; the collection made if needed);\n"
     "                                 prints each {\"_id\": ...}\n"
     "  doc find DB.COLL [FILTER] [-p PROJECTION] [-s SORT] [--skip N]\n"
     "           [-n LIMIT] [--batch N] [--id VALUE]\n"
     "                                 print every match, one per line, in\n"
     "                                 _id order or SORT's (--id VALUE: the\n"
     "                                 document whose _id is VALUE)\n"
     "  doc update DB.COLL FILTER UPDATE [--upsert] [--multi]\n"
     "                                 update the first match (--multi:\n"
     "                                 every one); prints matched and\n"
     "                                 modified, then an upsert's {\"_id\"}\n"
     "  doc delete DB.COLL FILTER [--multi]\n"
     "                                 delete the first match (or every\n"
     "                                 one); prints how many\n"
     "  doc databases | doc collections [DB]\n"
     "                                 list databases, or DB.COLL names\n"
     "  doc create DB.COLL [OPTIONS]   an empty collection (exit 1: exists)\n"
     "  doc drop DB.COLL               drop it (exit 1: none)\n"
     "  doc indexes DB.COLL            print its index specifications\n"
     "  doc create-index DB.COLL SPEC|KEY... [--name N] [--sparse]\n"
     "           [--unique] [--partial FILTER] [--expire SECONDS]\n"
     "                                 create and build indexes; prints\n"
     "                                 the indexes before and after\n"
     "  doc drop-index DB.COLL NAME|KEY\n"
     "                                 drop one (\"*\": all but _id_)\n"
     "Documents print as relaxed extended JSON, one per line, whatever the\n"
     "output style.  A failure MongoDB would report (duplicate _id, unknown\n"
     "operator) prints its text and code; exit status 2.  find exits 1\n"
     "when --id finds nothing.\n"},
    {"load", cmd_load,
     "[FILE|-] [--tsv] [--base64] [--strict] [--ttl MS] [--batch N]",
     "Bulk load records, pipelined.  Input is JSON lines by default:\n"
     "  {\"key\": \"k\", \"value\": \"text\"}\n"
     "  {\"key\": \"k\", \"value\": {\"a\": [1, 2]}}   (stored as msgpack)\n"
     "  {\"key_b64\": \"AAE=\", \"value_b64\": \"/w==\"} (bytes in base64)\n"
     "  {\"key\": \"k\", \"value\": \"v\", \"ttl_ms\": 60000}  (dump's)\n"
     "  {\"key\": \"h\", \"type\": \"hash\", \"fields\": [{\"field\": \"f\",\n"
     "   \"value\": \"1\"}]}               (a hash, replacing the key)\n"
     "A value that is a number or true/false is stored as its text.  With\n"
     "--tsv (or a FILE ending in .tsv) each line is KEY TAB VALUE, with the\n"
     "escapes \\t \\n \\r \\\\ \\0 and \\xHH.  --base64: every key and "
     "value\n"
     "is base64.  A malformed line is reported with its number and counted,\n"
     "and loading goes on (--strict stops there).  A progress bar is drawn\n"
     "on stderr when it is a terminal; the summary (rows, errors, seconds,\n"
     "rows/s) is printed at the end.  Exit status 2 if any row failed.\n"
     "  --ttl MS    every key expires MS milliseconds after it is loaded\n"
     "  --batch N   rows per MPUT request (10000)\n"
     "  --window N  requests in flight (32)\n"},
    {"dump", cmd_dump, "[--prefix P] [--base64] [--tsv]",
     "Print every key (that starts with P) and its value, in key order, as\n"
     "JSON lines that kvcli load reads back exactly: text as strings,\n"
     "values that are stored JSON documents as JSON, other bytes as\n"
     "key_b64/value_b64 in base64; a key that expires with \"ttl_ms\", a\n"
     "hash as {\"key\":...,\"type\":\"hash\",\"fields\":[{\"field\":...,\n"
     "\"value\":...},...]}.  --base64 puts every key, value and field in\n"
     "base64 (load it with --base64); --tsv writes TSV instead (load it\n"
     "with --tsv), which holds neither expiries nor hashes (a hash stops\n"
     "it with an error).  Then, unless --prefix or --tsv, kvd's documents:\n"
     "the line {\"kvcli_dump\":2}, and each collection's row, its\n"
     "documents' and its indexes' (BSON in base64), which load restores\n"
     "byte for byte, building the indexes.\n"},
    {"help", c_help, "[COMMAND]", "List the commands, or explain one.\n"},
    {NULL, NULL, NULL, NULL},
};

const struct cmd *cli_find(const char *name)
{
	for (const struct cmd *c = kvcli_cmds; c->name; c++)
		if (!strcasecmp(c->name, name))
			return c;
	return NULL;
}
