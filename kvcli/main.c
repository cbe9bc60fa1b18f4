/* main.c - kvcli: global options, the password, connecting, dispatch.
 *
 *   kvcli [-h HOST] [-p PORT] [-u URL] [-a PASSWORD | --askpass] [-t MS]
 *         [--tls [--cacert FILE] [--cacertdir DIR] [--cert FILE --key FILE]
 *          [--sni NAME] [--insecure]]
 *         [--json|--csv|--raw|--readable] [-x] [-e] [-r COUNT] [-i SECONDS]
 *         [--stat | --latency | CMD ARGS...]
 *
 * With a command, run it once (or -r COUNT times) and exit 0 (done), 1 (key
 * not found) or 2 (an error: usage, connection, server).  Without one,
 * read commands from the prompt, or from stdin when it is not a terminal
 * (prompt.c).
 *
 * The password comes from -a, --askpass, the URL or $KVCLI_AUTH, in that
 * order; it is set on the connection handle, so libkvclient sends AUTH
 * before anything else on every connect and reconnect.  TLS options are
 * set on the handle the same way, once, so reconnects use them too.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "kvcli.h"

#define DEFAULT_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 5000
#define MAX_PASSWORD 4096

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
	if (!cli->c) {
		if (kvc_create(&cli->c)) {
			fprintf(stderr, "kvcli: out of memory\n");
			return EXIT_ERROR;
		}
		if (cli->tls && kvc_set_tls(cli->c, &cli->tls_opts)) {
			fprintf(stderr, "kvcli: %s\n", kvc_errmsg(cli->c));
			kvc_close(cli->c);
			cli->c = NULL;
			return EXIT_ERROR;
		}
	}
	kvc_set_timeouts(cli->c,
			 cli->timeout_ms && cli->timeout_ms < CONNECT_TIMEOUT_MS
			     ? cli->timeout_ms
			     : CONNECT_TIMEOUT_MS,
			 cli->timeout_ms);
	if (cli->password &&
	    kvc_set_password(cli->c, cli->password, cli->password_len)) {
		fprintf(stderr, "kvcli: out of memory\n");
		return EXIT_ERROR;
	}
	if ((rc = kvc_connect(cli->c, cli->host, cli->port))) {
		cli->errname = kvc_status_name(rc);
		fprintf(stderr, "kvcli: cannot connect: %s\n",
			kvc_errmsg(cli->c));
		return EXIT_ERROR;
	}
	return 0;
}

int cli_fail(struct cli *cli, const char *what, int rc)
{
	if (rc == -KVC_NOT_FOUND || rc == -KVC_EXISTS) {
		if (cli->fmt == FMT_READABLE ||
		    (cli->batch && cli->fmt == FMT_RAW))
			kv_buf_append(&cli->ob,
				      rc == -KVC_NOT_FOUND ? "(nil)\n"
							   : "(exists)\n",
				      rc == -KVC_NOT_FOUND ? 6 : 9);
		return EXIT_NOT_FOUND;
	}
	out_flush(cli);
	cli->errname = kvc_status_name(rc);
	if (rc == -KVC_AUTH_REQUIRED)
		fprintf(stderr,
			"kvcli: %s: authentication required (the server has a "
			"password: give it with -a, --askpass, KVCLI_AUTH or "
			"-u)\n",
			what);
	else if (-rc < KVC_CLIENT_STATUS_MIN)
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

int cli_run(struct cli *cli, int argc, char **argv)
{
	const struct cmd *cmd = cli_find(argv[0]);
	int rc;

	cli->errname = NULL;
	if (!cmd) {
		fprintf(stderr,
			"kvcli: unknown command '%s' (kvcli help lists them)\n",
			argv[0]);
		cli->errname = "UNKNOWN_COMMAND";
		return EXIT_ERROR;
	}
	rc = cmd->fn(cli, argc, argv);
	out_flush(cli);
	return rc;
}

/* The command of the command line, -r COUNT times (-1: until Ctrl-C) with
 * -i SECONDS between runs; the worst exit status. */
static int run_repeated(struct cli *cli, int argc, char **argv)
{
	int worst = EXIT_OK;

	for (long long n = 0; cli->repeat < 0 || n < cli->repeat; n++) {
		int rc;

		if (n && cli_sleep(cli->interval))
			break;
		rc = cli_run(cli, argc, argv);
		if (rc > worst)
			worst = rc;
		if (rc == EXIT_ERROR && cli->stop_on_error)
			break;
	}
	return worst;
}

/* ===================== Passwords ===================== */

int cli_set_password(struct cli *cli, const char *p, size_t n)
{
	char *copy = malloc(n + 1);

	if (!copy || (cli->c && kvc_set_password(cli->c, p, n))) {
		free(copy);
		fprintf(stderr, "kvcli: out of memory\n");
		return EXIT_ERROR;
	}
	memcpy(copy, p, n);
	copy[n] = '\0';
	if (cli->password) {
		explicit_bzero(cli->password, cli->password_len);
		free(cli->password);
	}
	cli->password = copy;
	cli->password_len = n;
	return 0;
}

/* --askpass: one line from the terminal, not echoed (as redis-cli's). */
static int ask_password(struct cli *cli)
{
	struct termios old, quiet;
	char buf[MAX_PASSWORD];
	size_t n = 0;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC), rc = EXIT_ERROR;
	ssize_t r;
	char ch;

	if (fd < 0 || tcgetattr(fd, &old)) {
		fprintf(stderr, "kvcli: --askpass needs a terminal\n");
		goto done;
	}
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	quiet.c_lflag |= ICANON;
	/* Echo off before the prompt: TCSAFLUSH drops what was typed before
	 * it takes effect, so a password typed as soon as the prompt shows
	 * must not arrive before it. */
	if (tcsetattr(fd, TCSAFLUSH, &quiet) ||
	    write(fd, "Please input password: ", 23) < 0)
		goto done;
	while ((r = read(fd, &ch, 1)) == 1 && ch != '\n' && n < sizeof(buf))
		buf[n++] = ch;
	tcsetattr(fd, TCSAFLUSH, &old);
	if (write(fd, "\n", 1) < 0 || r < 0) {
		fprintf(stderr, "kvcli: --askpass: %s\n", strerror(errno));
		goto done;
	}
	rc = cli_set_password(cli, buf, n);
	explicit_bzero(buf, sizeof(buf));
done:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* -u URL: host, port and perhaps a password. */
static int use_url(struct cli *cli, const char *url, int *pw_in_url)
{
	static kvc_url *u; /* its host is used until exit */
	int rc;

	kvc_url_free(u);
	if ((rc = kvc_url_parse(url, &u))) {
		fprintf(stderr,
			rc == -KVC_NOMEM
			    ? "kvcli: out of memory\n"
			    : "kvcli: -u: invalid URL (kvd://[:PASSWORD@]HOST"
			      "[:PORT], kvds://... or "
			      "unix:///PATH[?password=PASSWORD])\n");
		return EXIT_ERROR;
	}
	cli->host = u->host;
	cli->port = u->port ? u->port : KVC_DEFAULT_PORT;
	cli->tls |= u->tls; /* a kvd:// URL with --tls is TLS too */
	*pw_in_url = u->password != NULL;
	if (u->password)
		return cli_set_password(cli, u->password, strlen(u->password));
	return 0;
}

/* ===================== main ===================== */

#define PW_WARNING                                                             \
	"Warning: Using a password with '-a' or '-u' option on the command "   \
	"line interface may not be safe.\n"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvcli [OPTIONS] [COMMAND [ARGS...]]\n"
		"\n"
		"Options:\n"
		"  -h, --host HOST     server host, IP address or Unix socket "
		"path (127.0.0.1)\n"
		"  -p, --port PORT     server port (%u)\n"
		"  -u, --url URL       kvd://[:PASSWORD@]HOST[:PORT], "
		"kvds://... (TLS) or\n"
		"                      unix:///PATH[?password=P]\n"
		"  -a, --pass PASSWORD the server's password (visible to other "
		"users: prefer\n"
		"                      --askpass or KVCLI_AUTH)\n"
		"      --askpass       ask for the password, without echo\n"
		"      --no-auth-warning  no warning for a password on the "
		"command line\n"
		"      --tls           connect with TLS (default port %u)\n"
		"      --cacert FILE   CA certificates (PEM) to verify the "
		"server with\n"
		"                      (default: the system's)\n"
		"      --cacertdir DIR directory of CA certificates (OpenSSL "
		"hash names)\n"
		"      --cert FILE     client certificate (PEM), for a server "
		"that asks\n"
		"      --key FILE      the client certificate's private key\n"
		"      --sni NAME      server name to send and to verify "
		"(default: the host)\n"
		"      --insecure      do not verify the server's certificate "
		"(tests only)\n"
		"  -t, --timeout MS    give up on a reply after MS ms (%d; 0: "
		"never)\n"
		"  -x                  read the value (last argument) from "
		"stdin\n"
		"  -r, --repeat COUNT  run the command COUNT times (-1: until "
		"Ctrl-C)\n"
		"  -i, --interval S    seconds between two runs (may be "
		"fractional)\n"
		"  -e                  stop at the first failed command (batch "
		"mode, -r)\n"
		"      --stat          a line per second: keys, ops/s, memory, "
		"connections\n"
		"      --latency       PING round trips: min, max, avg in ms\n"
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
		"Environment: KVCLI_AUTH, the password when no other is "
		"given.\n"
		"Exit status: 0 success, 1 key not found, 2 error.  In batch "
		"mode and with -r,\n"
		"the worst command's (-e: the first error's).\n"
		"Without a command kvcli reads commands from a prompt, or one "
		"per line\nfrom stdin when it is not a terminal.\n"
		"\n"
		"Commands:\n",
		KVC_DEFAULT_PORT, KVC_DEFAULT_TLS_PORT, DEFAULT_TIMEOUT_MS);
	for (const struct cmd *c = kvcli_cmds; c->name; c++)
		fprintf(f, "  %-11s %s\n", c->name, c->usage);
}

enum mode { MODE_CMD, MODE_STAT, MODE_LATENCY };

/* The long options without a short form. */
enum {
	O_JSON = 256,
	O_CSV,
	O_RAW,
	O_READABLE,
	O_HELP,
	O_VERSION,
	O_ASKPASS,
	O_NOWARN,
	O_STAT,
	O_LATENCY,
	O_TLS,
	O_CACERT,
	O_CACERTDIR,
	O_CERT,
	O_KEY,
	O_SNI,
	O_INSECURE
};

/* One of the TLS options but --tls. */
static void tls_opt(struct cli *cli, int o)
{
	struct kvc_tls_opts *t = &cli->tls_opts;

	switch (o) {
	case O_CACERT: t->ca_file = optarg; break;
	case O_CACERTDIR: t->ca_dir = optarg; break;
	case O_CERT: t->cert_file = optarg; break;
	case O_KEY: t->key_file = optarg; break;
	case O_SNI: t->server_name = optarg; break;
	default: t->insecure = 1; break;
	}
}

struct globals {
	enum mode mode;
	const char *pass;    /* -a */
	int askpass, pw_url; /* --askpass; -u held a password */
	int no_warning;
	int port_set;	/* -p or -u gave the port */
	int tls_option; /* --cacert and the others need TLS */
};

static int parse_number_opts(struct cli *cli, int o)
{
	unsigned long long v;
	long long r;
	char *end;

	switch (o) {
	case 'p':
		if (cli_uint("port", optarg, 65535, &v) || v == 0)
			return EXIT_ERROR;
		cli->port = (unsigned)v;
		return 0;
	case 't':
		if (cli_uint("timeout", optarg, INT_MAX, &v))
			return EXIT_ERROR;
		cli->timeout_ms = (int)v;
		return 0;
	case 'r':
		if (cli_int("repeat", optarg, &r) || r < -1 || r == 0) {
			fprintf(stderr, "kvcli: -r: a count from 1, or -1\n");
			return EXIT_ERROR;
		}
		cli->repeat = r;
		return 0;
	default: /* 'i' */
		errno = 0;
		cli->interval = strtod(optarg, &end);
		if (!*optarg || *end || errno || !(cli->interval >= 0) ||
		    cli->interval > 1e6) {
			fprintf(stderr,
				"kvcli: -i: not a number of seconds: "
				"%s\n",
				optarg);
			return EXIT_ERROR;
		}
		return 0;
	}
}

static int parse_globals(struct cli *cli, struct globals *g, int argc,
			 char **argv)
{
	static const struct option longs[] = {
	    {"host", required_argument, 0, 'h'},
	    {"port", required_argument, 0, 'p'},
	    {"url", required_argument, 0, 'u'},
	    {"pass", required_argument, 0, 'a'},
	    {"askpass", no_argument, 0, O_ASKPASS},
	    {"no-auth-warning", no_argument, 0, O_NOWARN},
	    {"timeout", required_argument, 0, 't'},
	    {"repeat", required_argument, 0, 'r'},
	    {"interval", required_argument, 0, 'i'},
	    {"stat", no_argument, 0, O_STAT},
	    {"latency", no_argument, 0, O_LATENCY},
	    {"json", no_argument, 0, O_JSON},
	    {"csv", no_argument, 0, O_CSV},
	    {"raw", no_argument, 0, O_RAW},
	    {"readable", no_argument, 0, O_READABLE},
	    {"help", no_argument, 0, O_HELP},
	    {"version", no_argument, 0, O_VERSION},
	    {"tls", no_argument, 0, O_TLS},
	    {"cacert", required_argument, 0, O_CACERT},
	    {"cacertdir", required_argument, 0, O_CACERTDIR},
	    {"cert", required_argument, 0, O_CERT},
	    {"key", required_argument, 0, O_KEY},
	    {"sni", required_argument, 0, O_SNI},
	    {"insecure", no_argument, 0, O_INSECURE},
	    {0, 0, 0, 0}};
	int o;

	while ((o = getopt_long(argc, argv, "+h:p:u:a:t:r:i:xe", longs,
				NULL)) != -1) {
		switch (o) {
		case 'h': cli->host = optarg; break;
		case 'p':
		case 't':
		case 'r':
		case 'i':
			if (parse_number_opts(cli, o))
				return EXIT_ERROR;
			g->port_set |= o == 'p';
			break;
		case 'u':
			if (use_url(cli, optarg, &g->pw_url))
				return EXIT_ERROR;
			g->port_set = 1;
			break;
		case 'a': g->pass = optarg; break;
		case O_ASKPASS: g->askpass = 1; break;
		case O_NOWARN: g->no_warning = 1; break;
		case O_STAT: g->mode = MODE_STAT; break;
		case O_LATENCY: g->mode = MODE_LATENCY; break;
		case 'x': cli->value_stdin = 1; break;
		case 'e': cli->stop_on_error = 1; break;
		case O_JSON: cli->fmt = FMT_JSON; break;
		case O_CSV: cli->fmt = FMT_CSV; break;
		case O_RAW: cli->fmt = FMT_RAW; break;
		case O_READABLE: cli->fmt = FMT_READABLE; break;
		case O_TLS: cli->tls = 1; break;
		case O_CACERT:
		case O_CACERTDIR:
		case O_CERT:
		case O_KEY:
		case O_SNI:
		case O_INSECURE:
			tls_opt(cli, o);
			g->tls_option = 1;
			break;
		case O_HELP: usage(stdout); return -1;
		case O_VERSION: printf("kvcli %s\n", kvc_version()); return -1;
		default: usage(stderr); return EXIT_ERROR;
		}
	}
	return 0;
}

/* TLS: --tls (or kvds://) turns it on; the others set its options, and
 * mean nothing without it. */
static int check_tls(struct cli *cli, const struct globals *g)
{
	if (!cli->tls) {
		if (!g->tls_option)
			return 0;
		fprintf(stderr, "kvcli: --cacert, --cacertdir, --cert, --key, "
				"--sni and --insecure need --tls (or a "
				"kvds:// URL)\n");
		return EXIT_ERROR;
	}
	if (cli->host[0] == '/') {
		fprintf(stderr, "kvcli: TLS is not used over a Unix socket\n");
		return EXIT_ERROR;
	}
	if (!g->port_set)
		cli->port = KVC_DEFAULT_TLS_PORT;
	if (cli->tls_opts.insecure)
		fputs("Warning: --insecure: the server's certificate is not "
		      "verified; anyone on the path can read and change what "
		      "is sent.\n",
		      stderr);
	return 0;
}

/* The password, by precedence: -a, --askpass, the URL's, $KVCLI_AUTH. */
static int choose_password(struct cli *cli, const struct globals *g)
{
	const char *env = getenv("KVCLI_AUTH");

	if ((g->pass || g->pw_url) && !g->no_warning)
		fputs(PW_WARNING, stderr);
	if (g->pass)
		return cli_set_password(cli, g->pass, strlen(g->pass));
	if (g->askpass)
		return ask_password(cli);
	if (!cli->password && env && *env)
		return cli_set_password(cli, env, strlen(env));
	return 0;
}

int main(int argc, char **argv)
{
	struct cli cli = {.host = "127.0.0.1",
			  .port = KVC_DEFAULT_PORT,
			  .timeout_ms = DEFAULT_TIMEOUT_MS,
			  .out_last = -1,
			  .fmt = isatty(1) ? FMT_READABLE : FMT_RAW};
	struct globals g = {MODE_CMD, NULL, 0, 0, 0};
	int rc = parse_globals(&cli, &g, argc, argv);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = check_tls(&cli, &g)) || (rc = choose_password(&cli, &g)))
		return rc;
	/* Without -r a command runs once, and a watch until Ctrl-C. */
	if (!cli.repeat)
		cli.repeat = g.mode == MODE_CMD ? 1 : -1;
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error */
	if (g.mode != MODE_CMD && optind < argc) {
		fprintf(stderr,
			"kvcli: --stat and --latency take no command\n");
		return EXIT_ERROR;
	}
	if (g.mode == MODE_STAT)
		rc = cli_stat(&cli);
	else if (g.mode == MODE_LATENCY)
		rc = cli_latency(&cli);
	else if (optind < argc)
		rc = run_repeated(&cli, argc - optind, argv + optind);
	else
		rc = cli_prompt(&cli);
	kvc_close(cli.c);
	kv_buf_free(&cli.ob);
	if (cli.password) {
		explicit_bzero(cli.password, cli.password_len);
		free(cli.password);
	}
	if (fflush(stdout) || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "kvcli: write error on stdout\n");
		return EXIT_ERROR;
	}
	return rc;
}
