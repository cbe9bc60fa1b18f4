/* main.c - kvcli: global options, the interactive prompt, and dispatch.
 *
 *   kvcli [-h HOST] [-p PORT] [-t MS] [--json|--csv|--raw|--readable] [-x]
 *         [CMD ARGS...]
 *
 * With a command, run it once and exit 0 (done), 1 (key not found) or 2
 * (an error: usage, connection, server).  Without one, read commands from
 * a prompt with line editing and history (libedit) when stdin is a
 * terminal, or one per line from stdin when it is not.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline.h> /* libedit's, through pkg-config's include path */

#include "kvcli.h"

#define DEFAULT_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 5000
#define MAX_LINE_ARGS 1024

/* ===================== Arguments ===================== */

static int is_number(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int find_opt(const struct cli_opt *opts, const char *s, size_t n,
		    char shrt)
{
	for (int k = 0; opts && opts[k].name; k++)
		if (shrt ? opts[k].shrt == shrt
			 : strlen(opts[k].name) == n &&
			       !strncmp(opts[k].name, s, n))
			return k;
	return -1;
}

int cli_args(const struct cmd *cmd, int argc, char **argv,
	     const struct cli_opt *opts, struct cli_args *a)
{
	int only_pos = 0;

	memset(a, 0, sizeof(*a));
	a->pos = argv + 1; /* positionals are packed in place */
	for (int i = 1; i < argc; i++) {
		char *s = argv[i], *eq = NULL;
		int k;

		if (only_pos || s[0] != '-' || !s[1] || is_number(s)) {
			a->pos[a->npos++] = s;
			continue;
		}
		if (!strcmp(s, "--")) {
			only_pos = 1;
			continue;
		}
		if (!strcmp(s, "--help")) {
			cli_help(cmd, stdout);
			return 1;
		}
		if (s[1] == '-') {
			eq = strchr(s, '=');
			k = find_opt(opts, s + 2,
				     eq ? (size_t)(eq - s - 2) : strlen(s + 2),
				     0);
		} else {
			k = s[2] ? -1 : find_opt(opts, NULL, 0, s[1]);
		}
		if (k < 0) {
			fprintf(stderr, "kvcli %s: unknown option %s\n",
				cmd->name, s);
			return cli_usage(cmd);
		}
		a->set[k] = 1;
		a->val[k] = "";
		if (opts[k].has_arg && eq) {
			a->val[k] = eq + 1;
		} else if (opts[k].has_arg) {
			if (++i >= argc) {
				fprintf(stderr, "kvcli %s: %s needs a value\n",
					cmd->name, s);
				return cli_usage(cmd);
			}
			a->val[k] = argv[i];
		} else if (eq) {
			fprintf(stderr, "kvcli %s: %s takes no value\n",
				cmd->name, s);
			return cli_usage(cmd);
		}
	}
	return 0;
}

int cli_uint(const char *what, const char *s, unsigned long long max,
	     unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (!*s || *end || *s == '-' || errno || *v > max) {
		fprintf(stderr, "kvcli: %s: not a number from 0 to %llu: %s\n",
			what, max, s);
		return -1;
	}
	return 0;
}

int cli_int(const char *what, const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	if (!*s || *end || errno) {
		fprintf(stderr, "kvcli: %s: not a 64-bit integer: %s\n", what,
			s);
		return -1;
	}
	return 0;
}

void cli_help(const struct cmd *cmd, FILE *f)
{
	fprintf(f, "usage: kvcli [OPTIONS] %s%s%s\n\n%s", cmd->name,
		*cmd->usage ? " " : "", cmd->usage, cmd->help);
}

int cli_usage(const struct cmd *cmd)
{
	fprintf(stderr, "kvcli: usage: kvcli [OPTIONS] %s%s%s\n", cmd->name,
		*cmd->usage ? " " : "", cmd->usage);
	return -1;
}

/* ===================== Connection and errors ===================== */

int cli_connect(struct cli *cli)
{
	int rc;

	if (cli->c && kvc_fd(cli->c) >= 0)
		return 0;
	if (!cli->c && kvc_create(&cli->c)) {
		fprintf(stderr, "kvcli: out of memory\n");
		return EXIT_ERROR;
	}
	kvc_set_timeouts(cli->c,
			 cli->timeout_ms && cli->timeout_ms < CONNECT_TIMEOUT_MS
			     ? cli->timeout_ms
			     : CONNECT_TIMEOUT_MS,
			 cli->timeout_ms);
	if ((rc = kvc_connect(cli->c, cli->host, cli->port))) {
		fprintf(stderr, "kvcli: cannot connect: %s\n",
			kvc_errmsg(cli->c));
		return EXIT_ERROR;
	}
	return 0;
}

int cli_fail(struct cli *cli, const char *what, int rc)
{
	if (rc == -KVC_NOT_FOUND || rc == -KVC_EXISTS) {
		if (cli->fmt == FMT_READABLE)
			kv_buf_append(&cli->ob,
				      rc == -KVC_NOT_FOUND ? "(nil)\n"
							   : "(exists)\n",
				      rc == -KVC_NOT_FOUND ? 6 : 9);
		return EXIT_NOT_FOUND;
	}
	out_flush(cli);
	if (-rc < KVC_CLIENT_STATUS_MIN)
		fprintf(stderr, "kvcli: %s: %s: %s\n", what,
			kvc_status_name(rc) ? kvc_status_name(rc) : "ERROR",
			kvc_errmsg(cli->c));
	else
		fprintf(stderr, "kvcli: %s: %s\n", what, kvc_errmsg(cli->c));
	return EXIT_ERROR;
}

int cli_read_file(const char *path, struct kv_buf *b)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	int rc = -1;

	b->len = 0;
	if (!f) {
		fprintf(stderr, "kvcli: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		size_t n;

		if (kv_buf_reserve(b, 1 << 16))
			goto done;
		n = fread(b->data + b->len, 1, b->cap - b->len, f);
		b->len += n;
		if (n == 0)
			break;
	}
	rc = ferror(f) ? -1 : 0;
done:
	if (rc)
		fprintf(stderr, "kvcli: %s: read error\n", path);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* ===================== Dispatch ===================== */

static int run(struct cli *cli, int argc, char **argv)
{
	const struct cmd *cmd = cli_find(argv[0]);
	int rc;

	if (!cmd) {
		fprintf(stderr,
			"kvcli: unknown command '%s' (kvcli help lists them)\n",
			argv[0]);
		return EXIT_ERROR;
	}
	rc = cmd->fn(cli, argc, argv);
	out_flush(cli);
	return rc;
}

/* ===================== Interactive ===================== */

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* One word of a command line, unquoted in place: 'single' is literal,
 * "double" knows \n \r \t \\ \" \xHH.  *pp moves past it. */
static char *word(char **pp, int *err)
{
	char *p = *pp, *out = p, *start = p;
	char q = 0;

	while (*p && (q || (*p != ' ' && *p != '\t'))) {
		if (!q && (*p == '"' || *p == '\'')) {
			q = *p++;
		} else if (q && *p == q) {
			q = 0;
			p++;
		} else if (q == '"' && *p == '\\' && p[1]) {
			char e = p[1];

			p += 2;
			if (e == 'x' && unhex(p[0]) >= 0 && unhex(p[1]) >= 0) {
				*out++ = (char)(unhex(p[0]) << 4 | unhex(p[1]));
				p += 2;
			} else {
				*out++ = e == 'n'   ? '\n'
					 : e == 'r' ? '\r'
					 : e == 't' ? '\t'
						    : e;
			}
		} else {
			*out++ = *p++;
		}
	}
	if (q)
		*err = 1;
	if (*p)
		p++;
	*out = '\0';
	*pp = p;
	return start;
}

static int split_line(char *line, char **argv, int max)
{
	int n = 0, err = 0;

	while (*line) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line)
			break;
		if (n == max) {
			fprintf(stderr, "kvcli: too many arguments\n");
			return -1;
		}
		argv[n++] = word(&line, &err);
	}
	if (err) {
		fprintf(stderr, "kvcli: unbalanced quotes\n");
		return -1;
	}
	return n;
}

static char *history_path(void)
{
	static char path[PATH_MAX];
	const char *home = getenv("HOME");

	if (!home || snprintf(path, sizeof(path), "%s/.kvcli_history", home) >=
			 (int)sizeof(path))
		return NULL;
	return path;
}

static char *next_line(int tty, const char *prompt)
{
	static struct kv_buf lb;
	int ch;

	if (tty)
		return readline(prompt);
	lb.len = 0;
	while ((ch = getchar()) != EOF && ch != '\n')
		kv_buf_append(&lb, &(char){(char)ch}, 1);
	if (ch == EOF && lb.len == 0)
		return NULL;
	kv_buf_append(&lb, "", 1);
	return lb.err ? NULL : strdup((char *)lb.data);
}

static int interactive(struct cli *cli)
{
	int tty = isatty(0), rc = 0;
	char *hist = tty ? history_path() : NULL, *line;
	char prompt[320], *argv[MAX_LINE_ARGS];

	cli->interactive = 1;
	if (hist) {
		using_history();
		stifle_history(1000);
		read_history(hist);
	}
	if (tty && cli_connect(cli))
		fprintf(stderr, "kvcli: not connected; commands will retry\n");
	snprintf(prompt, sizeof(prompt), "%s:%u> ", cli->host, cli->port);
	while ((line = next_line(tty, prompt))) {
		int argc;

		if (tty && *line)
			add_history(line);
		argc = split_line(line, argv, MAX_LINE_ARGS);
		if (argc > 0 &&
		    (!strcmp(argv[0], "quit") || !strcmp(argv[0], "exit"))) {
			free(line);
			break;
		}
		if (argc > 0)
			rc = run(cli, argc, argv);
		free(line);
	}
	if (hist)
		write_history(hist);
	return tty ? 0 : rc;
}

/* ===================== main ===================== */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvcli [OPTIONS] [COMMAND [ARGS...]]\n"
		"\n"
		"Options:\n"
		"  -h, --host HOST     server host, IP address or Unix socket "
		"path (127.0.0.1)\n"
		"  -p, --port PORT     server port (%u)\n"
		"  -t, --timeout MS    give up on a reply after MS ms (%d; 0: "
		"never)\n"
		"  -x                  read the value (last argument) from "
		"stdin\n"
		"      --json          JSON output (one document per line)\n"
		"      --csv           CSV output, with a header row\n"
		"      --raw           raw output (default when stdout is not "
		"a terminal)\n"
		"      --readable      readable output (default on a "
		"terminal)\n"
		"      --help          this help; kvcli CMD --help for a "
		"command\n"
		"      --version       print the version\n"
		"\n"
		"Exit status: 0 success, 1 key not found, 2 error.\n"
		"Without a command kvcli reads commands from a prompt.\n"
		"\n"
		"Commands:\n",
		KVC_DEFAULT_PORT, DEFAULT_TIMEOUT_MS);
	for (const struct cmd *c = kvcli_cmds; c->name; c++)
		fprintf(f, "  %-9s %s\n", c->name, c->usage);
}

static int parse_globals(struct cli *cli, int argc, char **argv)
{
	enum { O_JSON = 256, O_CSV, O_RAW, O_READABLE, O_HELP, O_VERSION };
	static const struct option longs[] = {
	    {"host", required_argument, 0, 'h'},
	    {"port", required_argument, 0, 'p'},
	    {"timeout", required_argument, 0, 't'},
	    {"json", no_argument, 0, O_JSON},
	    {"csv", no_argument, 0, O_CSV},
	    {"raw", no_argument, 0, O_RAW},
	    {"readable", no_argument, 0, O_READABLE},
	    {"help", no_argument, 0, O_HELP},
	    {"version", no_argument, 0, O_VERSION},
	    {0, 0, 0, 0}};
	unsigned long long v;
	int o;

	while ((o = getopt_long(argc, argv, "+h:p:t:x", longs, NULL)) != -1) {
		switch (o) {
		case 'h': cli->host = optarg; break;
		case 'p':
			if (cli_uint("port", optarg, 65535, &v) || v == 0)
				return EXIT_ERROR;
			cli->port = (unsigned)v;
			break;
		case 't':
			if (cli_uint("timeout", optarg, INT_MAX, &v))
				return EXIT_ERROR;
			cli->timeout_ms = (int)v;
			break;
		case 'x': cli->value_stdin = 1; break;
		case O_JSON: cli->fmt = FMT_JSON; break;
		case O_CSV: cli->fmt = FMT_CSV; break;
		case O_RAW: cli->fmt = FMT_RAW; break;
		case O_READABLE: cli->fmt = FMT_READABLE; break;
		case O_HELP: usage(stdout); return -1;
		case O_VERSION: printf("kvcli %s\n", kvc_version()); return -1;
		default: usage(stderr); return EXIT_ERROR;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cli cli = {.host = "127.0.0.1",
			  .port = KVC_DEFAULT_PORT,
			  .timeout_ms = DEFAULT_TIMEOUT_MS,
			  .fmt = isatty(1) ? FMT_READABLE : FMT_RAW};
	int rc = parse_globals(&cli, argc, argv);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error */
	if (optind < argc)
		rc = run(&cli, argc - optind, argv + optind);
	else
		rc = interactive(&cli);
	kvc_close(cli.c);
	kv_buf_free(&cli.ob);
	if (fflush(stdout) || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "kvcli: write error on stdout\n");
		return EXIT_ERROR;
	}
	return rc;
}
