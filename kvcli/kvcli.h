/* kvcli.h - what kvcli's modules share: the session, the command table,
 * argument parsing and output helpers.
 *
 *   main.c   global options, the password, connecting, dispatch
 *   prompt.c the prompt (history, completion) and batch mode: commands
 *            read one per line, split into words
 *   watch.c  --stat and --latency: a server watched until -r or Ctrl-C
 *   cmds.c   one function per server operation
 *   cmds_v2.c the version 2 operations (rename ... bitop) and txn
 *   cmds_hash.c hset, hget, hgetall
 *   cmds_doc.c doc insert|find|update|delete: documents as JSON
 *   cmds_docadmin.c doc databases|collections|create|drop|indexes|
 *            create-index|drop-index
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
	const char *host; /* a name, an address, or a Unix socket path */
	unsigned port;
	char *password; /* -a, --askpass, -u or KVCLI_AUTH; NULL: none */
	size_t password_len;
	int tls;		      /* --tls or a kvds:// URL */
	struct kvc_tls_opts tls_opts; /* --cacert, --cert, --sni, ... */
	int timeout_ms;
	enum out_fmt fmt;
	int value_stdin; /* -x: the last argument comes from stdin */
	int interactive;
	int batch;	     /* commands from a pipe: one reply per line */
	int stop_on_error;   /* -e: batch mode stops at the first error */
	long long repeat;    /* -r: times to run the command; -1 for ever */
	double interval;     /* -i: seconds between two runs */
	const char *errname; /* the last failure's status name, for (error) */
	unsigned long long out_bytes; /* written to stdout so far */
	int out_last;		      /* the last byte written, or -1 */
	struct kv_buf ob;	      /* output being composed */
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

/* The length of an argument.  The words of a prompt or batch line may
 * hold NUL bytes ("\x00" in double quotes), so their lengths are recorded
 * as the line is split; any other string is measured by strlen. */
size_t cli_len(const char *s);
/* Split a line (unquoted in place) into words as the prompt does, for
 * kvcli txn's command lines: the count, or -1 (message printed).  Their
 * lengths serve cli_len until cli_split_forget(). */
int cli_split(char *line, char **argv, int max);
void cli_split_forget(void);
/* Run one command (argv[0] is its name, any case); its exit code. */
int cli_run(struct cli *cli, int argc, char **argv);
/* Commands from the prompt or, stdin not a terminal, one per line. */
int cli_prompt(struct cli *cli);
/* --stat and --latency (watch.c). */
int cli_stat(struct cli *cli);
int cli_latency(struct cli *cli);
/* Sleep for seconds; nonzero when Ctrl-C asked to stop. */
int cli_sleep(double seconds);
extern volatile int cli_interrupted;

/* The password for every later connection (and the handle's, if made);
 * 0 or EXIT_ERROR (message printed). */
int cli_set_password(struct cli *cli, const char *p, size_t n);
/* Connect if not yet connected; 0 or EXIT_ERROR (message printed). */
int cli_connect(struct cli *cli);
/* Report a failed call; returns the exit code it deserves. */
int cli_fail(struct cli *cli, const char *what, int rc);
/* Read a whole file ("-": stdin) into b; 0 or -1 (message printed). */
int cli_read_file(const char *path, struct kv_buf *b);

/* ---- output (out.c) ---- */

void out_flush(struct cli *cli);
/* Write what is composed once there is a lot of it (large outputs). */
void out_maybe_flush(struct cli *cli);
/* v escaped as dump --tsv and load --tsv do (\t \n \r \\ \0 \xHH), so
 * that a record holds one line whatever its bytes; base64 when b64. */
void out_tsv_field(struct kv_buf *b, kvc_val v, int b64);
void out_ok(struct cli *cli);
void out_int(struct cli *cli, const char *name, long long v);
/* One key/value row: val NULL for a key alone (SCAN --keys-only), val->p
 * NULL for a missing key (MGET).  show_key: raw and readable styles print
 * the key too.  CSV's header row comes from out_kv_header(). */
void out_kv_header(struct cli *cli, int with_value);
void out_kv(struct cli *cli, kvc_val key, const kvc_val *val, int show_key);
/* The same for another name than "key" (a hash's "field": JSON records
 * {"field":...,"value":...}, a CSV header field,value). */
void out_pair_header(struct cli *cli, const char *name, int with_value);
void out_pair(struct cli *cli, const char *name, kvc_val key,
	      const kvc_val *val, int show_key);
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
/* {"field":...,"value":...} (no newline), as dump writes a hash's fields;
 * and one "name":bytes member (text, or name_b64 in base64). */
void out_json_field(struct kv_buf *b, kvc_val field, kvc_val val, int b64);
void out_json_member(struct kv_buf *b, const char *name, kvc_val v, int b64);

/* ---- bulk (load.c, dump.c) ---- */

int cmd_load(struct cli *cli, int argc, char **argv);

/* ---- version 2 (cmds_v2.c) ---- */

/* rename, copy, getex, incrbyfloat, getrange, setrange, setbit, getbit,
 * bitcount, bitpos, bitop: one function, argv[0] says which. */
int cmd_v2(struct cli *cli, int argc, char **argv);
int cmd_txn(struct cli *cli, int argc, char **argv);
/* A number the server sent as text (INCRBYFLOAT's): a JSON number. */
void out_number(struct cli *cli, const char *name, kvc_val text);
int cmd_dump(struct cli *cli, int argc, char **argv);

/* ---- hashes (cmds_hash.c) ---- */

int cmd_hset(struct cli *cli, int argc, char **argv);
int cmd_hget(struct cli *cli, int argc, char **argv);
int cmd_hgetall(struct cli *cli, int argc, char **argv);

/* ---- documents (cmds_doc.c; cmds_docadmin.c the subcommands of
 * databases, collections and indexes) ---- */

int cmd_doc(struct cli *cli, int argc, char **argv);

/* A subcommand's parsed arguments and its DB.COLL. */
struct dargs {
	struct cli_args a;
	char db[256], coll[256];
};
/* Parse a subcommand's arguments (argv[0] is its name), min to max
 * positionals (max -1: any), split its DB.COLL (the first) and connect:
 * -1 to go on, else the exit code. */
int doc_start(struct cli *cli, int argc, char **argv,
	      const struct cli_opt *opts, int min, int max, struct dargs *d);
/* DB.COLL split at its first dot: 0, or -1 (message printed). */
int doc_split_ns(const char *ns, char *db, char *coll);
/* JSON text (MongoDB's extended JSON) as BSON, or NULL (message
 * printed). */
struct _bson_t *doc_from_json(const char *what, const char *s);
/* One BSON document as a line of relaxed extended JSON. */
void doc_out(struct cli *cli, kvc_val v);
/* A failed call's message (MongoDB's text and code for DOC_ERROR): the
 * exit code. */
int doc_fail(struct cli *cli, const char *what, int rc);

/* Two counts as one record: "A x B y", {"A":x,"B":y}, or CSV. */
void doc_out_counts(struct cli *cli, const char *a, unsigned long long x,
		    const char *b, unsigned long long y);
/* A subcommand of doc: argv[0] is its name.  cmds_docadmin.c's, up to
 * {NULL, NULL}. */
struct doc_sub {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv);
};
extern const struct doc_sub doc_admin_subs[];

#endif
