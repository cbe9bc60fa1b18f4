/* prompt.c - kvcli without a command: the interactive prompt and batch
 * mode.
 *
 * On a terminal, lines come from libedit's readline(): line editing,
 * history in ~/.kvcli_history (written after every line, so that Ctrl-C
 * or a lost terminal loses nothing; AUTH lines never enter it) and Tab
 * completion of command names and of each command's options.  From a pipe
 * (batch mode), each line is one command and each reply ends its own line,
 * so a script can match output lines to input lines; the exit status is
 * the worst of the commands' (or the first error's, with -e).
 *
 * A line is split into words with quotes: 'single' is literal, "double"
 * knows \n \r \t \\ \" and \xHH, so a word may hold any byte, NUL
 * included: the length of each word is recorded (cli_len) rather than
 * left to strlen.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline.h> /* libedit's, through pkg-config's include path */

#include "kvcli.h"

#define MAX_LINE_ARGS 1024
#define HISTORY_LINES 1000

/* ===================== Words ===================== */

/* The words of the line being run: where each starts and how long it is. */
static const char *words[MAX_LINE_ARGS];
static size_t word_lens[MAX_LINE_ARGS];
static int nwords;

/* The words of kvcli txn's command lines (cli_split), kept until
 * cli_split_forget: any number of lines, so grown as needed. */
static const char **xwords;
static size_t *xword_lens;
static int nxwords, xcap;

size_t cli_len(const char *s)
{
	/* A pointer into a word (an option's "--name=value" value) has the
	 * rest of that word. */
	for (int i = 0; i < nwords; i++)
		if (s >= words[i] && s <= words[i] + word_lens[i])
			return (size_t)(words[i] + word_lens[i] - s);
	for (int i = 0; i < nxwords; i++)
		if (s >= xwords[i] && s <= xwords[i] + xword_lens[i])
			return (size_t)(xwords[i] + xword_lens[i] - s);
	return strlen(s);
}

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* One word, unquoted in place; *len receives its length (it may hold NUL
 * bytes).  *pp moves past it. */
static char *word(char **pp, size_t *len, int *err)
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
	*len = (size_t)(out - start);
	*out = '\0';
	*pp = p;
	return start;
}

/* Split line into argv (and words[]); the count, or -1 (a message
 * printed unless quiet). */
static int split_line(char *line, char **argv, int max, int quiet)
{
	int n = 0, err = 0;

	nwords = 0;
	while (*line) {
		while (*line == ' ' || *line == '\t' || *line == '\r')
			line++;
		if (!*line)
			break;
		if (n == max) {
			if (!quiet)
				fprintf(stderr, "kvcli: too many arguments\n");
			return -1;
		}
		argv[n] = word(&line, &word_lens[n], &err);
		words[n] = argv[n];
		n++;
	}
	if (err) {
		if (!quiet)
			fprintf(stderr, "kvcli: unbalanced quotes\n");
		return -1;
	}
	nwords = n;
	return n;
}

int cli_split(char *line, char **argv, int max)
{
	int n = 0, err = 0;

	while (*line) {
		while (*line == ' ' || *line == '\t' || *line == '\r')
			line++;
		if (!*line)
			break;
		if (n == max) {
			fprintf(stderr, "kvcli: too many arguments\n");
			return -1;
		}
		if (nxwords == xcap) {
			int cap = xcap ? 2 * xcap : 256;
			const char **w = realloc(xwords, cap * sizeof(*w));
			size_t *l =
			    w ? realloc(xword_lens, cap * sizeof(*l)) : NULL;

			if (w)
				xwords = w;
			if (!l) {
				fprintf(stderr, "kvcli: out of memory\n");
				return -1;
			}
			xword_lens = l;
			xcap = cap;
		}
		argv[n] = word(&line, &xword_lens[nxwords], &err);
		xwords[nxwords++] = argv[n++];
	}
	if (err) {
		fprintf(stderr, "kvcli: unbalanced quotes\n");
		return -1;
	}
	return n;
}

void cli_split_forget(void)
{
	nxwords = 0;
}

/* ===================== History ===================== */

static char *history_path(void)
{
	static char path[PATH_MAX];
	const char *home = getenv("HOME");

	if (!home || !*home ||
	    snprintf(path, sizeof(path), "%s/.kvcli_history", home) >=
		(int)sizeof(path))
		return NULL;
	return path;
}

/* A line that must not be kept: AUTH carries the password.  Judged on
 * the split words, so that "AUTH", 'auth' and "  auth" are all caught. */
static int secret_line(const char *line)
{
	static char *argv[MAX_LINE_ARGS];
	char *copy = strdup(line);
	int n, secret;

	if (!copy)
		return 1;
	n = split_line(copy, argv, MAX_LINE_ARGS, 1);
	secret = n != 0 && (n < 0 || !strcasecmp(argv[0], "auth"));
	nwords = 0;
	free(copy);
	return secret;
}

/* Remember line, and write the history file at once: it is small, and a
 * Ctrl-C at the next prompt then loses nothing. */
static void remember(const char *hist, const char *line)
{
	if (!*line || secret_line(line))
		return;
	add_history(line);
	if (write_history(hist) == 0)
		chmod(hist, 0600); /* commands may carry private data */
}

/* ===================== Completion ===================== */

/* What Tab offers: the names of commands, or the options of the command
 * the line starts with (taken from its usage text, plus --help). */
static const char *cands[64];
static char cand_buf[1024];
static int ncands;

static const char *const builtins[] = {"quit", "exit", "clear"};

static void collect_commands(void)
{
	ncands = 0;
	for (const struct cmd *c = kvcli_cmds; c->name && ncands < 60; c++)
		cands[ncands++] = c->name;
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		cands[ncands++] = builtins[i];
}

/* Every -x and --name in the usage text of cmd. */
static void collect_options(const struct cmd *cmd)
{
	const char *u = cmd->usage;
	size_t used = 0;

	ncands = 0;
	cands[ncands++] = "--help";
	while ((u = strchr(u, '-'))) {
		size_t n = strspn(u, "-") + strspn(u + strspn(u, "-"),
						   "abcdefghijklmnopqrstuvwxyz"
						   "0123456789-");

		if (n > 1 && used + n + 1 <= sizeof(cand_buf) && ncands < 64) {
			memcpy(cand_buf + used, u, n);
			cand_buf[used + n] = '\0';
			cands[ncands++] = cand_buf + used;
			used += n + 1;
		}
		u += n ? n : 1;
	}
}

static char *next_match(const char *text, int state)
{
	static int i;
	size_t len = strlen(text);

	if (!state)
		i = 0;
	while (i < ncands) {
		const char *c = cands[i++];

		if (!strncasecmp(c, text, len))
			return strdup(c);
	}
	return NULL;
}

static char **complete(const char *text, int start, int end)
{
	static char *argv[MAX_LINE_ARGS];
	const struct cmd *cmd;
	char *copy;
	int n;

	(void)end;
	rl_attempted_completion_over = 1; /* never file names */
	copy = strndup(rl_line_buffer, (size_t)start);
	if (!copy)
		return NULL;
	n = split_line(copy, argv, MAX_LINE_ARGS, 1);
	cmd = n > 0 ? cli_find(argv[0]) : NULL;
	nwords = 0;
	if (n == 0 || (cmd && !strcmp(cmd->name, "help")))
		collect_commands();
	else if (cmd && text[0] == '-')
		collect_options(cmd);
	else
		ncands = 0;
	free(copy);
	return ncands ? rl_completion_matches(text, next_match) : NULL;
}

/* ===================== The loop ===================== */

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

/* Prompt built-ins: 1 for quit, 0 when handled, -1 for a command. */
static int builtin(int argc, char **argv)
{
	if (!strcasecmp(argv[0], "quit") || !strcasecmp(argv[0], "exit"))
		return 1;
	if (strcasecmp(argv[0], "clear") || argc != 1)
		return -1;
	if (isatty(1)) {
		fputs("\033[H\033[2J", stdout);
		fflush(stdout);
	}
	return 0;
}

/* Batch mode: every command's reply is one line (or, for MGET, SCAN and
 * the like, lines), ended; a command that printed nothing says why. */
static void end_reply(struct cli *cli, unsigned long long before, int rc)
{
	if (cli->out_bytes == before && rc == EXIT_NOT_FOUND)
		printf("(nil)\n");
	else if (cli->out_bytes == before && rc == EXIT_ERROR)
		printf("(error) %s\n", cli->errname ? cli->errname : "ERR");
	else if (cli->out_bytes != before && cli->out_last != '\n')
		putchar('\n');
	else
		return;
	cli->out_bytes++;
	cli->out_last = '\n';
	fflush(stdout);
}

int cli_prompt(struct cli *cli)
{
	int tty = isatty(0), worst = EXIT_OK;
	char *hist = tty ? history_path() : NULL, *line;
	char prompt[320], *argv[MAX_LINE_ARGS];

	cli->interactive = 1;
	cli->batch = !tty;
	if (tty) {
		rl_attempted_completion_function = complete;
		using_history();
		stifle_history(HISTORY_LINES);
		if (hist)
			read_history(hist);
		if (cli_connect(cli))
			fprintf(stderr,
				"kvcli: not connected; commands will retry\n");
	}
	if (cli->host[0] == '/')
		snprintf(prompt, sizeof(prompt), "%s> ", cli->host);
	else
		snprintf(prompt, sizeof(prompt), "%s:%u> ", cli->host,
			 cli->port);
	while ((line = next_line(tty, prompt))) {
		unsigned long long before = cli->out_bytes;
		int argc, rc = EXIT_OK, quit = 0;

		if (hist)
			remember(hist, line);
		argc = split_line(line, argv, MAX_LINE_ARGS, 0);
		if (argc < 0)
			rc = EXIT_ERROR;
		else if (argc > 0 && (rc = builtin(argc, argv)) > 0)
			quit = 1;
		else if (argc > 0 && rc < 0)
			rc = cli_run(cli, argc, argv);
		nwords = 0;
		free(line);
		if (quit)
			break;
		if (cli->batch && argc != 0)
			end_reply(cli, before, rc);
		if (rc > worst)
			worst = rc;
		if (cli->batch && cli->stop_on_error && rc == EXIT_ERROR)
			break;
	}
	return tty ? EXIT_OK : worst;
}
