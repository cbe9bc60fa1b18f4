/* cmds_v2.c - kvcli's commands for the native protocol's version 2
 * operations (rename, copy, getex, incrbyfloat, getrange, setrange,
 * setbit, getbit, bitcount, bitpos, bitop) and kvcli txn.
 *
 * A command's arguments are parsed once into a request in wire form (an
 * operation and its kvc_args, as docs/protocol.md lists them): run alone
 * it goes through its libkvclient call, inside kvcli txn it becomes one of
 * the batch's sub-requests.  Either way its reply is printed by show(), so
 * a sub-reply looks exactly as the command alone prints it.  txn also
 * takes the version 1 commands that TXN allows (get, put, incr, ...), with
 * the same arguments as on their own.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_mp.h"
#include "kvcli.h"

#define TXN_MAX_WORDS 4096
#define TXN_MAX_OPS 65536

/* How a reply prints: as put (OK), get (a value), incr (an integer),
 * incrbyfloat (a number sent as text) or mget (values). */
enum kind { K_OK, K_VALUE, K_INT, K_NUM, K_MGET };

struct req {
	const struct sub *d;
	kvc_arg *args; /* in wire order */
	size_t n, cap;
	kvc_val key;	    /* the record's key, for K_VALUE */
	struct kv_buf file; /* a value read from -f or -x */
	int single;	    /* run alone: -f and -x may give the value */
};

struct sub {
	const char *name;
	unsigned op;
	enum kind kind;
	const char *col; /* the column of an integer (CSV) */
	int min, max;	 /* positional arguments */
	const struct cli_opt *opts;
	int (*build)(struct cli *cli, struct cli_args *a, struct req *r);
};

/* ===================== Arguments ===================== */

static kvc_arg *arg_new(struct req *r)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		kvc_arg *a = realloc(r->args, cap * sizeof(*a));

		if (!a) {
			fprintf(stderr, "kvcli: out of memory\n");
			return NULL;
		}
		r->args = a;
		r->cap = cap;
	}
	memset(&r->args[r->n], 0, sizeof(r->args[0]));
	return &r->args[r->n++];
}

static int arg_bytes(struct req *r, const void *p, size_t len)
{
	kvc_arg *a = arg_new(r);

	if (!a)
		return -1;
	a->type = KVC_ARG_BYTES;
	a->p = p ? p : "";
	a->len = len;
	return 0;
}

static int arg_str(struct req *r, const char *s)
{
	return arg_bytes(r, s, cli_len(s));
}

static int arg_uint(struct req *r, uint64_t u)
{
	kvc_arg *a = arg_new(r);

	if (!a)
		return -1;
	a->type = KVC_ARG_UINT;
	a->u = u;
	return 0;
}

static int arg_int(struct req *r, int64_t i)
{
	kvc_arg *a = arg_new(r);

	if (!a)
		return -1;
	a->type = KVC_ARG_INT;
	a->i = i;
	return 0;
}

static int arg_nil(struct req *r)
{
	return arg_new(r) ? 0 : -1;
}

/* An unsigned positional; a signed one. */
static int pos_uint(struct req *r, const char *what, const char *s)
{
	unsigned long long v;

	if (cli_uint(what, s, UINT64_MAX, &v))
		return -1;
	return arg_uint(r, v);
}

static int pos_int(struct req *r, const char *what, const char *s)
{
	long long v;

	if (cli_int(what, s, &v))
		return -1;
	return arg_int(r, v);
}

static int pos_bit(struct req *r, const char *s)
{
	if (strcmp(s, "0") && strcmp(s, "1")) {
		fprintf(stderr, "kvcli: %s: the bit must be 0 or 1: %s\n",
			r->d->name, s);
		return -1;
	}
	return arg_uint(r, (uint64_t)(s[0] - '0'));
}

/* The first positional is the key (and the record's, for a value). */
static int key_first(struct cli_args *a, struct req *r)
{
	r->key = (kvc_val){a->pos[0], cli_len(a->pos[0])};
	return arg_bytes(r, r->key.p, r->key.len);
}

/* ===================== Builders: version 1 ===================== */

/* GET, DEL, TTL, GETDEL: [key]; MGET, MDEL, EXISTS: [key...]. */
static int b_keys(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	if (key_first(a, r))
		return -1;
	for (int i = 1; i < a->npos; i++)
		if (arg_str(r, a->pos[i]))
			return -1;
	return 0;
}

static int b_put(struct cli *cli, struct cli_args *a, struct req *r)
{
	enum { TTL, NX, XX, KEEPTTL };
	unsigned long long ttl = 0;

	(void)cli;
	if (a->set[TTL] && cli_uint("--ttl", a->val[TTL], 1ull << 50, &ttl))
		return -1;
	return key_first(a, r) || arg_str(r, a->pos[1]) || arg_uint(r, ttl) ||
	       arg_uint(r, (a->set[NX] ? KVC_PUT_NX : 0) |
			       (a->set[XX] ? KVC_PUT_XX : 0) |
			       (a->set[KEEPTTL] ? KVC_PUT_KEEPTTL : 0));
}

static int b_mput(struct cli *cli, struct cli_args *a, struct req *r)
{
	unsigned long long ttl = 0;

	(void)cli;
	if (a->npos % 2) {
		fprintf(stderr, "kvcli: mput: keys and values go in pairs\n");
		return -1;
	}
	if (a->set[0] && cli_uint("--ttl", a->val[0], 1ull << 50, &ttl))
		return -1;
	if (arg_uint(r, ttl))
		return -1;
	for (int i = 0; i < a->npos; i++)
		if (arg_str(r, a->pos[i]))
			return -1;
	return 0;
}

/* INCR and DECR: [key, delta]. */
static int b_incr(struct cli *cli, struct cli_args *a, struct req *r)
{
	int decr = !strcasecmp(r->d->name, "decr");
	long long delta = 1;

	(void)cli;
	if (a->npos == 2 && cli_int(r->d->name, a->pos[1], &delta))
		return -1;
	if (decr && delta == INT64_MIN) {
		fprintf(stderr, "kvcli: decr: delta out of range\n");
		return -1;
	}
	return key_first(a, r) || arg_int(r, decr ? -delta : delta);
}

/* APPEND: [key, value]; INCRBYFLOAT: [key, increment]. */
static int b_key_val(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	return key_first(a, r) || arg_str(r, a->pos[1]);
}

static int b_expire(struct cli *cli, struct cli_args *a, struct req *r)
{
	unsigned long long ms;

	(void)cli;
	if (cli_uint("expire", a->pos[1], 1ull << 50, &ms))
		return -1;
	return key_first(a, r) || arg_uint(r, ms);
}

/* ===================== Builders: version 2 ===================== */

/* RENAME [src, dst, flags] (--nx); COPY likewise (--replace). */
static int b_rename(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	return key_first(a, r) || arg_str(r, a->pos[1]) ||
	       arg_uint(r, a->set[0] ? 1u : 0u);
}

/* GETEX [key, ttl_ms?, flags?]: --ttl MS, --at UNIX_MS or --persist. */
static int b_getex(struct cli *cli, struct cli_args *a, struct req *r)
{
	enum { TTL, AT, PERSIST };
	unsigned long long ms = 0;
	int n = a->set[TTL] + a->set[AT] + a->set[PERSIST];

	(void)cli;
	if (n > 1) {
		fprintf(stderr, "kvcli: getex: --ttl, --at and --persist "
				"exclude each other\n");
		return -1;
	}
	if ((a->set[TTL] && cli_uint("--ttl", a->val[TTL], 1ull << 50, &ms)) ||
	    (a->set[AT] && cli_uint("--at", a->val[AT], 1ull << 50, &ms)))
		return -1;
	if (a->set[TTL] && !ms) {
		fprintf(stderr, "kvcli: getex: --ttl must be 1 or more (use "
				"--persist to remove the expiry)\n");
		return -1;
	}
	if (key_first(a, r))
		return -1;
	if (a->set[TTL])
		return arg_uint(r, ms);
	if (a->set[AT])
		return arg_uint(r, ms) || arg_uint(r, KVC_GETEX_AT);
	if (a->set[PERSIST])
		return arg_nil(r) || arg_uint(r, KVC_GETEX_PERSIST);
	return 0;
}

static int b_getrange(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	return key_first(a, r) || pos_int(r, "start", a->pos[1]) ||
	       pos_int(r, "end", a->pos[2]);
}

/* SETRANGE [key, offset, value]: the value as put takes it. */
static int b_setrange(struct cli *cli, struct cli_args *a, struct req *r)
{
	const char *path = a->set[0] ? a->val[0] : NULL;

	if (r->single && !path && cli->value_stdin)
		path = "-";
	if (path && !r->single) {
		fprintf(stderr, "kvcli: setrange: -f is not for txn\n");
		return -1;
	}
	if ((path ? a->npos != 2 : a->npos != 3)) {
		fprintf(stderr, "kvcli: setrange: wrong number of arguments\n");
		return -1;
	}
	if (key_first(a, r) || pos_uint(r, "offset", a->pos[1]))
		return -1;
	if (!path)
		return arg_str(r, a->pos[2]);
	if (cli_read_file(path, &r->file))
		return -1;
	return arg_bytes(r, r->file.data, r->file.len);
}

static int b_setbit(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	return key_first(a, r) || pos_uint(r, "offset", a->pos[1]) ||
	       pos_bit(r, a->pos[2]);
}

static int b_getbit(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	return key_first(a, r) || pos_uint(r, "offset", a->pos[1]);
}

/* BITCOUNT [key, start?, end?, flags?]: a range is both ends or none. */
static int b_bitcount(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	if (a->npos == 2) {
		fprintf(stderr, "kvcli: bitcount: give both START and END\n");
		return -1;
	}
	if (a->set[0] && a->npos < 3) {
		fprintf(stderr, "kvcli: bitcount: --bit needs a range\n");
		return -1;
	}
	if (key_first(a, r))
		return -1;
	if (a->npos < 3)
		return 0;
	return pos_int(r, "start", a->pos[1]) || pos_int(r, "end", a->pos[2]) ||
	       arg_uint(r, a->set[0] ? 1 : 0);
}

/* BITPOS [key, bit, start?, end?, flags?]. */
static int b_bitpos(struct cli *cli, struct cli_args *a, struct req *r)
{
	(void)cli;
	if (a->set[0] && a->npos < 3) {
		fprintf(stderr, "kvcli: bitpos: --bit needs a range\n");
		return -1;
	}
	if (key_first(a, r) || pos_bit(r, a->pos[1]))
		return -1;
	if (a->npos > 2 && pos_int(r, "start", a->pos[2]))
		return -1;
	if (a->npos > 3 && pos_int(r, "end", a->pos[3]))
		return -1;
	if (a->set[0] && a->npos == 3 && arg_nil(r))
		return -1;
	return a->set[0] ? arg_uint(r, 1) : 0;
}

/* BITOP [op, dst, src...]: AND, OR, XOR (sources) or NOT (one). */
static int b_bitop(struct cli *cli, struct cli_args *a, struct req *r)
{
	static const char *const names[] = {"and", "or", "xor", "not"};
	unsigned op;

	(void)cli;
	for (op = 0; op < 4; op++)
		if (!strcasecmp(a->pos[0], names[op]))
			break;
	if (op == 4) {
		fprintf(stderr,
			"kvcli: bitop: the operation is and, or, xor or not: "
			"%s\n",
			a->pos[0]);
		return -1;
	}
	if (op == KVC_BITOP_NOT && a->npos != 3) {
		fprintf(stderr, "kvcli: bitop: not takes one source\n");
		return -1;
	}
	if (arg_uint(r, op))
		return -1;
	for (int i = 1; i < a->npos; i++)
		if (arg_str(r, a->pos[i]))
			return -1;
	return 0;
}

/* ===================== The commands ===================== */

static const struct cli_opt o_put[] = {
    {"ttl", 0, 1}, {"nx", 0, 0}, {"xx", 0, 0}, {"keepttl", 0, 0}, {0, 0, 0}};
static const struct cli_opt o_ttl[] = {{"ttl", 0, 1}, {0, 0, 0}};
static const struct cli_opt o_nx[] = {{"nx", 0, 0}, {0, 0, 0}};
static const struct cli_opt o_replace[] = {{"replace", 0, 0}, {0, 0, 0}};
static const struct cli_opt o_getex[] = {
    {"ttl", 0, 1}, {"at", 0, 1}, {"persist", 0, 0}, {0, 0, 0}};
static const struct cli_opt o_file[] = {{"file", 'f', 1}, {0, 0, 0}};
static const struct cli_opt o_bit[] = {{"bit", 0, 0}, {0, 0, 0}};

static const struct sub subs[] = {
    {"get", KVC_OP_GET, K_VALUE, NULL, 1, 1, NULL, b_keys},
    {"put", KVC_OP_PUT, K_OK, NULL, 2, 2, o_put, b_put},
    {"del", KVC_OP_DEL, K_OK, NULL, 1, 1, NULL, b_keys},
    {"mget", KVC_OP_MGET, K_MGET, NULL, 1, -1, NULL, b_keys},
    {"mput", KVC_OP_MPUT, K_OK, NULL, 2, -1, o_ttl, b_mput},
    {"mdel", KVC_OP_MDEL, K_INT, "deleted", 1, -1, NULL, b_keys},
    {"exists", KVC_OP_EXISTS, K_INT, "count", 1, -1, NULL, b_keys},
    {"incr", KVC_OP_INCR, K_INT, "value", 1, 2, NULL, b_incr},
    {"decr", KVC_OP_INCR, K_INT, "value", 1, 2, NULL, b_incr},
    {"append", KVC_OP_APPEND, K_INT, "length", 2, 2, NULL, b_key_val},
    {"expire", KVC_OP_EXPIRE, K_OK, NULL, 2, 2, NULL, b_expire},
    {"ttl", KVC_OP_TTL, K_INT, "ttl_ms", 1, 1, NULL, b_keys},
    {"getdel", KVC_OP_GETDEL, K_VALUE, NULL, 1, 1, NULL, b_keys},
    {"rename", KVC_OP_RENAME, K_OK, NULL, 2, 2, o_nx, b_rename},
    {"copy", KVC_OP_COPY, K_OK, NULL, 2, 2, o_replace, b_rename},
    {"getex", KVC_OP_GETEX, K_VALUE, NULL, 1, 1, o_getex, b_getex},
    {"incrbyfloat", KVC_OP_INCRBYFLOAT, K_NUM, "value", 2, 2, NULL, b_key_val},
    {"getrange", KVC_OP_GETRANGE, K_VALUE, NULL, 3, 3, NULL, b_getrange},
    {"setrange", KVC_OP_SETRANGE, K_INT, "length", 2, 3, o_file, b_setrange},
    {"setbit", KVC_OP_SETBIT, K_INT, "bit", 3, 3, NULL, b_setbit},
    {"getbit", KVC_OP_GETBIT, K_INT, "bit", 2, 2, NULL, b_getbit},
    {"bitcount", KVC_OP_BITCOUNT, K_INT, "count", 1, 3, o_bit, b_bitcount},
    {"bitpos", KVC_OP_BITPOS, K_INT, "position", 2, 4, o_bit, b_bitpos},
    {"bitop", KVC_OP_BITOP, K_INT, "length", 3, -1, NULL, b_bitop},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};

static const struct sub *sub_find(const char *name)
{
	for (const struct sub *d = subs; d->name; d++)
		if (!strcasecmp(d->name, name))
			return d;
	return NULL;
}

/* Parse argv (argv[0] the command's name) into r.  0; 1 when --help was
 * asked (printed); -1 when the arguments are bad (message printed). */
static int parse(struct cli *cli, const struct sub *d, int argc, char **argv,
		 struct req *r)
{
	const struct cmd *cmd = cli_find(d->name);
	struct cli_args a;
	int rc = cli_args(cmd, argc, argv, d->opts, &a);

	r->d = d;
	if (rc)
		return rc;
	if (a.npos < d->min || (d->max >= 0 && a.npos > d->max)) {
		fprintf(stderr, "kvcli %s: wrong number of arguments\n",
			d->name);
		cli_usage(cmd);
		return -1;
	}
	if (d->build(cli, &a, r)) {
		cli_usage(cmd);
		return -1;
	}
	return 0;
}

static void req_free(struct req *r)
{
	free(r->args);
	kv_buf_free(&r->file);
}

/* ===================== Replies ===================== */

/* MGET's sub-reply [0, value-or-nil, ...], as kvcli mget prints it. */
static int show_mget(struct cli *cli, const struct req *r, kvc_val sub)
{
	const uint8_t *p = sub.p, *end = p + sub.len;
	struct kv_mp_obj o;

	if (kv_mp_next(&p, end, &o) || o.type != KV_MP_ARRAY ||
	    o.len != r->n + 1 || kv_mp_next(&p, end, &o))
		return -1;
	out_kv_header(cli, 1);
	for (size_t i = 0; i < r->n; i++) {
		kvc_val key = {r->args[i].p, r->args[i].len}, val = {NULL, 0};

		if (kv_mp_next(&p, end, &o))
			return -1;
		if (o.type == KV_MP_BIN || o.type == KV_MP_STR)
			val = (kvc_val){o.len ? (const void *)o.p : "", o.len};
		if (cli->fmt == FMT_READABLE) {
			char num[24];
			int n = snprintf(num, sizeof(num), "%zu) ", i + 1);

			kv_buf_append(&cli->ob, num, (size_t)n);
		}
		out_kv(cli, key, &val, 0);
	}
	return 0;
}

/* A failed sub-request of a txn: a line of its own, as batch mode prints
 * a failed command, and its message on stderr. */
static int show_txn_error(struct cli *cli, const struct req *r, size_t i,
			  int st)
{
	const char *name = kvc_status_name(st) ? kvc_status_name(st) : "ERR";
	struct kv_buf *b = &cli->ob;

	switch (cli->fmt) {
	case FMT_JSON: kv_buf_append(b, "{\"error\":\"", 10); break;
	case FMT_CSV: kv_buf_append(b, "error\r\n", 7); break;
	default: kv_buf_append(b, "(error) ", 8); break;
	}
	kv_buf_append(b, name, strlen(name));
	kv_buf_append(b,
		      cli->fmt == FMT_JSON  ? "\"}\n"
		      : cli->fmt == FMT_CSV ? "\r\n"
					    : "\n",
		      cli->fmt == FMT_JSON  ? 3
		      : cli->fmt == FMT_CSV ? 2
					    : 1);
	out_flush(cli);
	fprintf(stderr, "kvcli: txn: command %zu (%s): %s\n", i + 1, r->d->name,
		name);
	return EXIT_ERROR;
}

/* One reply (st, its value and its integer; sub, a txn's sub-reply, for
 * MGET), printed as the command alone prints it.  Its exit code; i is the
 * sub-request's index in a txn, or -1 alone. */
static int show(struct cli *cli, const struct req *r, long i, int st,
		kvc_val val, int64_t num, kvc_val sub)
{
	if (st == -KVC_NOT_FOUND && r->d->kind == K_VALUE &&
	    cli->fmt != FMT_READABLE) {
		if (cli->fmt != FMT_RAW)
			out_value(cli, r->key, (kvc_val){NULL, 0});
		else if (cli->batch && i >= 0)
			kv_buf_append(&cli->ob, "(nil)\n", 6);
		return EXIT_NOT_FOUND;
	}
	if (st && i >= 0 && st != -KVC_NOT_FOUND && st != -KVC_EXISTS)
		return show_txn_error(cli, r, (size_t)i, st);
	if (st && i >= 0 && (cli->fmt == FMT_JSON || cli->fmt == FMT_CSV)) {
		/* a line all the same: the replies stay in step */
		const char *name = kvc_status_name(st);

		if (cli->fmt == FMT_JSON)
			kv_buf_append(&cli->ob, "{\"status\":\"", 11);
		else
			kv_buf_append(&cli->ob, "status\r\n", 8);
		kv_buf_append(&cli->ob, name, strlen(name));
		kv_buf_append(&cli->ob, cli->fmt == FMT_JSON ? "\"}\n" : "\r\n",
			      cli->fmt == FMT_JSON ? 3 : 2);
		return EXIT_NOT_FOUND;
	}
	if (st)
		return cli_fail(cli, r->d->name, st);
	switch (r->d->kind) {
	case K_OK: out_ok(cli); break;
	case K_VALUE:
		out_value(cli, r->key, val.p ? val : (kvc_val){"", 0});
		break;
	case K_INT: out_int(cli, r->d->col, num); break;
	case K_NUM: out_number(cli, r->d->col, val); break;
	default:
		if (show_mget(cli, r, sub)) {
			fprintf(stderr,
				"kvcli: txn: malformed reply to mget\n");
			return EXIT_ERROR;
		}
	}
	return EXIT_OK;
}

/* ===================== Alone ===================== */

static kvc_val bytes_of(const kvc_arg *a)
{
	return (kvc_val){a->p, a->len};
}

static int call_bitop(kvc_conn *c, const struct req *r, int64_t *num)
{
	size_t n = r->n - 2;
	kvc_val *srcs = malloc(n * sizeof(*srcs));
	uint64_t len = 0;
	int rc = -KVC_NOMEM;

	if (srcs) {
		for (size_t i = 0; i < n; i++)
			srcs[i] = bytes_of(&r->args[i + 2]);
		rc = kvc_bitop(c, (unsigned)r->args[0].u, r->args[1].p,
			       r->args[1].len, srcs, n, &len);
	}
	free(srcs);
	*num = (int64_t)len;
	return rc;
}

/* The request's own libkvclient call: its status, value and integer. */
static int call_v2(kvc_conn *c, const struct req *r, kvc_val *val, int64_t *num)
{
	const kvc_arg *a = r->args;
	kvc_val k = bytes_of(&a[0]);
	uint64_t u = 0;
	int bit = 0, rc;

	switch (r->d->op) {
	case KVC_OP_RENAME:
	case KVC_OP_COPY:
		return (r->d->op == KVC_OP_RENAME ? kvc_rename : kvc_copy)(
		    c, k.p, k.len, a[1].p, a[1].len, (unsigned)a[2].u);
	case KVC_OP_GETEX:
		return kvc_getex(c, k.p, k.len, r->n > 1 ? a[1].u : 0,
				 r->n > 2 ? (unsigned)a[2].u : 0, val);
	case KVC_OP_INCRBYFLOAT:
		return kvc_incrbyfloat(c, k.p, k.len, a[1].p, val);
	case KVC_OP_GETRANGE:
		return kvc_getrange(c, k.p, k.len, a[1].i, a[2].i, val);
	case KVC_OP_SETRANGE:
		rc = kvc_setrange(c, k.p, k.len, a[1].u, a[2].p, a[2].len, &u);
		break;
	case KVC_OP_SETBIT:
		rc = kvc_setbit(c, k.p, k.len, a[1].u, (int)a[2].u, &bit);
		u = (uint64_t)bit;
		break;
	case KVC_OP_GETBIT:
		rc = kvc_getbit(c, k.p, k.len, a[1].u, &bit);
		u = (uint64_t)bit;
		break;
	case KVC_OP_BITCOUNT:
		rc = kvc_bitcount(c, k.p, k.len, r->n > 1 ? a[1].i : 0,
				  r->n > 1 ? a[2].i : -1,
				  r->n > 3 ? (unsigned)a[3].u : 0, &u);
		break;
	case KVC_OP_BITPOS:
		return kvc_bitpos(
		    c, k.p, k.len, (int)a[1].u, r->n > 2 ? a[2].i : 0,
		    r->n > 3 && a[3].type == KVC_ARG_INT ? &a[3].i : NULL,
		    r->n > 4 ? (unsigned)a[4].u : 0, num);
	default: /* BITOP */ return call_bitop(c, r, num);
	}
	*num = (int64_t)u;
	return rc;
}

int cmd_v2(struct cli *cli, int argc, char **argv)
{
	const struct sub *d = sub_find(argv[0]);
	struct req r = {.single = 1};
	kvc_val val = {NULL, 0};
	int64_t num = 0;
	int rc = parse(cli, d, argc, argv, &r);

	if (rc) {
		req_free(&r);
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	}
	if (cli_connect(cli)) {
		req_free(&r);
		return EXIT_ERROR;
	}
	rc = call_v2(cli->c, &r, &val, &num);
	rc = show(cli, &r, -1, rc, val, num, (kvc_val){NULL, 0});
	req_free(&r);
	return rc;
}

/* ===================== txn ===================== */

struct txn {
	char **lines; /* each command line, split in place */
	size_t nlines, cap;
	kvc_val *checks; /* key, expected (p NULL: absent) pairs */
	size_t nchecks;
	const char *file; /* -f: the command lines' file */
	struct req *reqs;
	kvc_txn_op *ops;
};

static int txn_line(struct txn *t, const char *s, size_t n)
{
	char *copy;

	if (t->nlines == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **l = realloc(t->lines, cap * sizeof(*l));

		if (!l)
			return -1;
		t->lines = l;
		t->cap = cap;
	}
	if (!(copy = malloc(n + 1)))
		return -1;
	memcpy(copy, s, n);
	copy[n] = '\0';
	t->lines[t->nlines++] = copy;
	return 0;
}

/* The command lines of a file (or stdin), blank ones left out. */
static int txn_read_lines(struct txn *t, const char *path)
{
	struct kv_buf b = {0};
	const char *p, *end;
	int rc = 0;

	if (cli_read_file(path, &b))
		return -1;
	p = (const char *)b.data;
	end = p ? p + b.len : p;
	while (p && p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (strspn(p, " \t\r") < n)
			rc = txn_line(t, p, n);
		p += n + 1;
	}
	kv_buf_free(&b);
	if (rc)
		fprintf(stderr, "kvcli: out of memory\n");
	return rc;
}

static int txn_check(struct txn *t, const char *key, const char *val)
{
	kvc_val *c = realloc(t->checks, (t->nchecks + 1) * 2 * sizeof(*c));

	if (!c) {
		fprintf(stderr, "kvcli: out of memory\n");
		return -1;
	}
	t->checks = c;
	c[2 * t->nchecks] = (kvc_val){key, cli_len(key)};
	c[2 * t->nchecks + 1] =
	    val ? (kvc_val){val, cli_len(val)} : (kvc_val){NULL, 0};
	t->nchecks++;
	return 0;
}

/* kvcli txn's own options; the command lines given as arguments.  0, 1
 * for --help (printed), -1 (message printed). */
static int txn_args(struct txn *t, const struct cmd *cmd, int argc, char **argv)
{
	int only = 0;

	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (only || s[0] != '-' || !s[1]) {
			if (txn_line(t, s, cli_len(s))) {
				fprintf(stderr, "kvcli: out of memory\n");
				return -1;
			}
		} else if (!strcmp(s, "--")) {
			only = 1;
		} else if (!strcmp(s, "--help")) {
			cli_help(cmd, stdout);
			return 1;
		} else if (!strcmp(s, "--if-equal") && i + 2 < argc) {
			if (txn_check(t, argv[i + 1], argv[i + 2]))
				return -1;
			i += 2;
		} else if (!strcmp(s, "--if-absent") && i + 1 < argc) {
			if (txn_check(t, argv[++i], NULL))
				return -1;
		} else if ((!strcmp(s, "-f") || !strcmp(s, "--file")) &&
			   i + 1 < argc) {
			t->file = argv[++i];
		} else {
			fprintf(stderr,
				!strcmp(s, "--if-equal") ||
					!strcmp(s, "--if-absent") ||
					!strcmp(s, "-f") || !strcmp(s, "--file")
				    ? "kvcli txn: %s needs its arguments\n"
				    : "kvcli txn: unknown option %s\n",
				s);
			return cli_usage(cmd);
		}
	}
	return 0;
}

/* Every command line into its sub-request.  0, or -1 (message printed:
 * nothing is sent). */
static int txn_parse(struct cli *cli, struct txn *t)
{
	char **words = malloc(TXN_MAX_WORDS * sizeof(*words));
	int rc = -1;

	t->reqs = calloc(t->nlines, sizeof(*t->reqs));
	t->ops = calloc(t->nlines, sizeof(*t->ops));
	if (!words || !t->reqs || !t->ops) {
		fprintf(stderr, "kvcli: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < t->nlines; i++) {
		int n = cli_split(t->lines[i], words, TXN_MAX_WORDS);
		const struct sub *d = n > 0 ? sub_find(words[0]) : NULL;

		if (n > 0 && !d)
			fprintf(stderr,
				cli_find(words[0])
				    ? "kvcli: txn: command %zu: %s is not "
				      "allowed in a transaction\n"
				    : "kvcli: txn: command %zu: unknown "
				      "command '%s'\n",
				i + 1, words[0]);
		if (!d || parse(cli, d, n, words, &t->reqs[i])) {
			if (d)
				fprintf(stderr, "kvcli: txn: in command %zu\n",
					i + 1);
			goto out;
		}
		t->ops[i] = (kvc_txn_op){d->op, t->reqs[i].args, t->reqs[i].n};
	}
	rc = 0;
out:
	free(words);
	return rc;
}

/* The batch's replies, each as its command alone prints it; the worst
 * exit code. */
static int txn_show(struct cli *cli, struct txn *t, kvc_reply *reply)
{
	int worst = EXIT_OK, batch = cli->batch;

	cli->batch = 1; /* raw: one reply per line, as batch mode */
	for (size_t i = 0; i < t->nlines; i++) {
		kvc_val sub, val;
		int64_t num;
		int st, rc;

		if (kvc_reply_next(reply, NULL, &sub) ||
		    (st = kvc_txn_result(sub, &val, &num)) == -KVC_PROTOCOL) {
			fprintf(stderr, "kvcli: txn: malformed reply\n");
			worst = EXIT_ERROR;
			break;
		}
		rc = show(cli, &t->reqs[i], (long)i, st, val, num, sub);
		if (rc > worst)
			worst = rc;
		out_maybe_flush(cli);
	}
	cli->batch = batch;
	return worst;
}

static int txn_run(struct cli *cli, struct txn *t)
{
	kvc_reply *reply;
	int rc;

	if (cli_connect(cli))
		return EXIT_ERROR;
	rc = kvc_txn(cli->c, t->checks, t->nchecks, t->ops, t->nlines, &reply);
	if (rc == -KVC_CHECK_FAILED) {
		if (cli->fmt == FMT_READABLE ||
		    (cli->batch && cli->fmt == FMT_RAW))
			kv_buf_append(&cli->ob, "(check failed)\n", 15);
		out_flush(cli);
		fprintf(stderr, "kvcli: txn: a check did not hold: nothing "
				"was run\n");
		cli->errname = kvc_status_name(rc);
		return EXIT_NOT_FOUND;
	}
	if (rc)
		return cli_fail(cli, "txn", rc);
	return txn_show(cli, t, reply);
}

int cmd_txn(struct cli *cli, int argc, char **argv)
{
	const struct cmd *cmd = cli_find("txn");
	struct txn t = {0};
	int rc = txn_args(&t, cmd, argc, argv);

	if (rc) {
		rc = rc > 0 ? EXIT_OK : EXIT_ERROR; /* --help, or bad */
		goto out;
	}
	if (!t.nlines && !t.file && cli->interactive) {
		fprintf(stderr, "kvcli: txn: at the prompt or in batch mode, "
				"give the commands as arguments or -f FILE\n");
		rc = -1;
	} else if (t.nlines && t.file) {
		fprintf(stderr, "kvcli: txn: commands as arguments or from "
				"-f FILE, not both\n");
		rc = -1;
	} else if (!t.nlines && txn_read_lines(&t, t.file ? t.file : "-")) {
		rc = -1;
	}
	if (!rc && !t.nlines) {
		fprintf(stderr, "kvcli: txn: no commands\n");
		rc = -1;
	} else if (!rc && t.nlines > TXN_MAX_OPS) {
		fprintf(stderr, "kvcli: txn: more than %d commands\n",
			TXN_MAX_OPS);
		rc = -1;
	}
	if (!rc && !(rc = txn_parse(cli, &t)))
		rc = txn_run(cli, &t);
out:
	for (size_t i = 0; t.reqs && i < t.nlines; i++)
		req_free(&t.reqs[i]);
	for (size_t i = 0; i < t.nlines; i++)
		free(t.lines[i]);
	cli_split_forget();
	free(t.lines);
	free(t.checks);
	free(t.reqs);
	free(t.ops);
	return rc < 0 ? EXIT_ERROR : rc;
}
