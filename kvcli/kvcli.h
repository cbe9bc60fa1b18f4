/* kvcli.h - what kvcli's modules share: the session, the command table,
 * argument parsing and output helpers.
 *
 *   main.c   global options, the interactive prompt, dispatch
 *   cmds.c   one function per server operation
 *   out.c    the four output styles (raw, readable, JSON, CSV)
 *   load.c   kvcli load: bulk loading, pipelined
 *   dump.c   kvcli dump: JSON lines or TSV that load reads back
 *   json.c   JSON, base64, JSON <-> msgpack
 */
#ifndef KVCLI_H
#define KVCLI_H

#include <stdio.h>

#include "kv_buf.h"
#include "kvclient.h"

/* Exit codes (documented in kvcli(1)). */
#define EXIT_OK 0
#define EXIT_NOT_FOUND 1 /* also: a PUT --nx / --xx condition not met */
#define EXIT_ERROR 2

enum out_fmt { FMT_RAW, FMT_READABLE, FMT_JSON, FMT_CSV };

struct cli {
	kvc_conn *c;
	const char *host;
	unsigned port;
	int timeout_ms;
	enum out_fmt fmt;
	int value_stdin; /* -x: the last argument comes from stdin */
	int interactive;
	int connected;
	struct kv_buf ob; /* output being composed */
};

struct cmd {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv);
	const char *usage; /* arguments after the name */
	const char *help;  /* what it does, options, output */
};

extern const struct cmd kvcli_cmds[];
const struct cmd *cli_find(const char *name);

/* ---- arguments ---- */

#define CLI_MAX_OPTS 12

struct cli_opt {
	const char *name; /* long name, without "--" */
	char shrt;	  /* short letter or 0 */
	int has_arg;
};

struct cli_args {
	const char *val[CLI_MAX_OPTS]; /* argument, or "" for a flag */
	int set[CLI_MAX_OPTS];
	char **pos; /* positional arguments, in order */
	int npos;
};

/* Split a command's arguments (argv[0] is its name) into options and
 * positionals; "--" ends options, and "-5" is a positional number.
 * 0, 1 when --help was asked (help printed), or -1 (message printed). */
int cli_args(const struct cmd *cmd, int argc, char **argv,
	     const struct cli_opt *opts, struct cli_args *a);
int cli_uint(const char *what, const char *s, unsigned long long max,
	     unsigned long long *v);
int cli_int(const char *what, const char *s, long long *v);
int cli_usage(const struct cmd *cmd);
void cli_help(const struct cmd *cmd, FILE *f);

/* Connect if not yet connected; 0 or EXIT_ERROR (message printed). */
int cli_connect(struct cli *cli);
/* Report a failed call; returns the exit code it deserves. */
int cli_fail(struct cli *cli, const char *what, int rc);
/* Read a whole file ("-": stdin) into b; 0 or -1 (message printed). */
int cli_read_file(const char *path, struct kv_buf *b);

/* ---- output (out.c) ---- */

void out_flush(struct cli *cli);
void out_ok(struct cli *cli);
void out_int(struct cli *cli, const char *name, long long v);
/* One key/value row: val NULL for a key alone (SCAN --keys-only), val->p
 * NULL for a missing key (MGET).  show_key: raw and readable styles print
 * the key too.  CSV's header row comes from out_kv_header(). */
void out_kv_header(struct cli *cli, int with_value);
void out_kv(struct cli *cli, kvc_val key, const kvc_val *val, int show_key);
/* The value of one key (GET): raw prints exactly the bytes. */
void out_value(struct cli *cli, kvc_val key, kvc_val val);
void out_map(struct cli *cli, kvc_val map); /* HELLO, STATS */
/* A lone string (PING's reply): a JSON string, a CSV column called name. */
void out_text(struct cli *cli, const char *name, kvc_val v);
/* A JSON line {"key":...,"value":...} as dump writes it: text as strings,
 * stored JSON documents as JSON, other bytes as "key_b64"/"value_b64";
 * b64 puts every key and value in base64 under "key" and "value". */
void out_json_record(struct kv_buf *b, kvc_val key, const kvc_val *val,
		     int b64);

/* ---- bulk (load.c, dump.c) ---- */

int cmd_load(struct cli *cli, int argc, char **argv);
int cmd_dump(struct cli *cli, int argc, char **argv);

#endif
