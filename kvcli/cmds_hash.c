/* cmds_hash.c - kvcli hset, hget and hgetall: a hash's fields (the native
 * protocol's HSET, HGET, HGETALL and HSCAN; docs/protocol.md, "Hashes").
 *
 * Fields print as keys do (out.c): raw one per line (hgetall FIELD TAB
 * VALUE, escaped as dump --tsv), JSON lines {"field":...,"value":...}, CSV
 * rows under a field,value header.  hgetall pages a hash too large for one
 * reply with HSCAN, in byte order of its fields then (the server's HGETALL
 * keeps insertion order), so any hash prints in bounded memory.
 */
#include <stdlib.h>
#include <string.h>

#include "kvcli.h"

#define HSCAN_PAGE 1000

static kvc_val arg_val(const char *s)
{
	kvc_val v = {s, cli_len(s)};

	return v;
}

/* The positional arguments from i on as kvc_vals (every other one with
 * step 2); NULL when out of memory. */
static kvc_val *vals_from(char **pos, int from, int n, int step)
{
	size_t k = (size_t)((n - from + step - 1) / step);
	kvc_val *v = malloc((k ? k : 1) * sizeof(*v));

	for (size_t j = 0; v && j < k; j++)
		v[j] = arg_val(pos[from + (int)j * step]);
	return v;
}

/* Parse the arguments and connect: -1 to go on, else the exit code. */
static int start(struct cli *cli, const char *name, int argc, char **argv,
		 struct cli_args *a, int min)
{
	const struct cmd *cmd = cli_find(name);
	int rc = cli_args(cmd, argc, argv, NULL, a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a->npos < min) {
		fprintf(stderr, "kvcli %s: wrong number of arguments\n", name);
		cli_usage(cmd);
		return EXIT_ERROR;
	}
	return cli_connect(cli) ? EXIT_ERROR : -1;
}

int cmd_hset(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val *fields, *vals;
	uint64_t added = 0;
	int rc = start(cli, "hset", argc, argv, &a, 3);

	if (rc >= 0)
		return rc;
	if (a.npos % 2 == 0) {
		fprintf(stderr, "kvcli hset: a FIELD without its VALUE\n");
		return cli_usage(cli_find("hset")), EXIT_ERROR;
	}
	fields = vals_from(a.pos, 1, a.npos, 2);
	vals = vals_from(a.pos, 2, a.npos, 2);
	rc = fields && vals
		 ? kvc_hset(cli->c, a.pos[0], cli_len(a.pos[0]), fields, vals,
			    (size_t)(a.npos - 1) / 2, &added)
		 : -KVC_NOMEM;
	free(fields);
	free(vals);
	if (rc)
		return cli_fail(cli, "hset", rc);
	out_int(cli, "added", (long long)added);
	return EXIT_OK;
}

int cmd_hget(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_val *fields, *vals;
	int rc = start(cli, "hget", argc, argv, &a, 2), found = 0;

	if (rc >= 0)
		return rc;
	fields = vals_from(a.pos, 1, a.npos, 1);
	vals = vals_from(a.pos, 1, a.npos, 1);
	rc = fields && vals ? kvc_hget(cli->c, a.pos[0], cli_len(a.pos[0]),
				       fields, (size_t)a.npos - 1, vals)
			    : -KVC_NOMEM;
	if (rc) {
		free(fields);
		free(vals);
		return cli_fail(cli, "hget", rc);
	}
	if (a.npos == 2 && cli->fmt == FMT_RAW && !cli->batch) {
		/* one field: exactly its bytes, as get prints a value */
		if (vals[0].p)
			kv_buf_append(&cli->ob, vals[0].p, vals[0].len);
		found = vals[0].p != NULL;
	} else {
		out_pair_header(cli, "field", 1);
		for (int i = 0; i < a.npos - 1; i++) {
			out_pair(cli, "field", fields[i], &vals[i], 0);
			found |= vals[i].p != NULL;
		}
	}
	free(fields);
	free(vals);
	return found ? EXIT_OK : EXIT_NOT_FOUND;
}

/* Every field by HSCAN pages (a hash over one reply frame). */
static int hgetall_paged(struct cli *cli, kvc_val key)
{
	struct kv_buf next = {0};
	kvc_val start = {NULL, 0}, f, v;
	kvc_reply *r;
	int rc;

	for (;;) {
		if ((rc = kvc_hscan(cli->c, key.p, key.len, &start, HSCAN_PAGE,
				    &r)))
			break;
		while ((rc = kvc_reply_next(r, &f, &v)) == 0)
			out_pair(cli, "field", f, &v, 1);
		if ((rc = kvc_reply_cursor(r, &v)))
			break;
		next.len = 0;
		if (kv_buf_append(&next, v.p, v.len)) {
			rc = -KVC_NOMEM;
			break;
		}
		start = (kvc_val){next.data, next.len};
	}
	kv_buf_free(&next);
	if (rc == -KVC_END)
		return EXIT_OK;
	return cli_fail(cli, "hgetall", rc);
}

int cmd_hgetall(struct cli *cli, int argc, char **argv)
{
	struct cli_args a;
	kvc_reply *r;
	kvc_val key, f, v;
	int rc = start(cli, "hgetall", argc, argv, &a, 1);

	if (rc >= 0)
		return rc;
	if (a.npos != 1)
		return cli_usage(cli_find("hgetall")), EXIT_ERROR;
	key = arg_val(a.pos[0]);
	rc = kvc_hgetall(cli->c, key.p, key.len, &r);
	if (rc && rc != -KVC_REPLY_TOO_LARGE)
		return cli_fail(cli, "hgetall", rc);
	out_pair_header(cli, "field", 1);
	if (rc)
		return hgetall_paged(cli, key);
	while (kvc_reply_next(r, &f, &v) == 0)
		out_pair(cli, "field", f, &v, 1);
	return EXIT_OK;
}
