/* target.c - where kvbench connects and with which password: -u URL, -a,
 * --askpass and KVCLI_AUTH, the same sources as kvcli's, so that a user
 * who has one of them working for kvcli has it working here; and whether
 * over TLS (--tls or kvds://, checked against the driver here).
 *
 * The password is copied out of argv and the argv text is overwritten with
 * '*', so that neither ps nor the reports (which quote the command line)
 * show it; the warning still says it was visible until then.
 */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#ifdef KB_HAVE_KVD
#include "kvclient.h"
#endif

#define PASSWORD_MAX 4096

/* ---- --askpass ------------------------------------------------------- */

/* One line from fd, without its newline; malloc'd, or NULL. */
static char *read_line(int fd)
{
	char *buf = malloc(PASSWORD_MAX + 1);
	size_t n = 0;

	if (!buf)
		return NULL;
	while (n < PASSWORD_MAX) {
		ssize_t r = read(fd, buf + n, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || buf[n] == '\n')
			break;
		n++;
	}
	if (n && buf[n - 1] == '\r')
		n--;
	buf[n] = 0;
	return buf;
}

/* Prompt on the terminal and read the password with echo off; without a
 * terminal (a script), read the first line of stdin. */
static char *ask_password(void)
{
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	struct termios old, noecho;
	int restore = 0;
	char *pw;

	if (fd < 0)
		return read_line(STDIN_FILENO);
	if (tcgetattr(fd, &old) == 0) {
		noecho = old;
		noecho.c_lflag &= ~(tcflag_t)ECHO;
		noecho.c_lflag |= ECHONL;
		restore = tcsetattr(fd, TCSAFLUSH, &noecho) == 0;
	}
	if (write(fd, "Password: ", 10) < 0)
		(void)0; /* the prompt is a courtesy */
	pw = read_line(fd);
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &old);
	close(fd);
	return pw;
}

/* ---- -u URL ---------------------------------------------------------- */

/* Overwrite the password inside a URL's text: kvd://:PW@host, or
 * unix:///path?password=PW. */
static void mask_url(char *url)
{
	char *s = strstr(url, "://"), *at, *q;

	if (!s)
		return;
	s += 3;
	at = strchr(s, '@');
	if (at && (!strchr(s, '/') || at < strchr(s, '/')))
		memset(s, '*', (size_t)(at - s));
	if ((q = strstr(url, "?password=")))
		memset(q + 10, '*', strlen(q + 10));
}

static int apply_url(struct kb_config *c, char **url_pw, char *err,
		     size_t errlen)
{
#ifdef KB_HAVE_KVD
	kvc_url *u = NULL;
	int rc = kvc_url_parse(c->url_arg, &u);

	if (rc) {
		snprintf(err, errlen,
			 "-u %s: %s (kvd://[:PASSWORD@]HOST[:PORT], "
			 "kvds://... or unix:///PATH[?password=PASSWORD])",
			 c->url_arg, kvc_strerror(rc));
		return -1;
	}
	c->host_buf = strdup(u->host);
	if (u->password)
		*url_pw = strdup(u->password);
	if (!c->host_buf || (u->password && !*url_pw)) {
		kvc_url_free(u);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->target.host = c->host_buf;
	if (u->port)
		c->target.port = u->port;
	c->target.tls |= u->tls;
	kvc_url_free(u);
	mask_url(c->url_arg);
	return 0;
#else
	(void)c;
	(void)url_pw;
	snprintf(err, errlen, "-u %s: built without libkvclient", c->url_arg);
	return -1;
#endif
}

/* ---- the password ---------------------------------------------------- */

static void wipe_free(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

/* TLS: only with a driver that has it, not over a Unix socket, and its
 * options only with it. */
static int check_tls(struct kb_config *c, char *err, size_t errlen)
{
	struct kb_target *t = &c->target;

	if (!t->tls) {
		if (t->cacert || t->cacertdir || t->cert || t->key || t->sni ||
		    t->insecure) {
			snprintf(
			    err, errlen,
			    "--cacert, --cacertdir, --cert, --key, --sni "
			    "and --insecure need --tls (or a kvds:// URL)");
			return -1;
		}
		return 0;
	}
	if (!c->driver->tls_port) {
		snprintf(err, errlen, "--tls: the %s driver has no TLS%s",
			 c->driver->name,
			 strcmp(c->driver->name, "postgres")
			     ? ""
			     : " option (give sslmode= in --conninfo)");
		return -1;
	}
	if (t->host[0] == '/') {
		snprintf(err, errlen, "--tls: not over a Unix socket");
		return -1;
	}
	if (!t->port)
		t->port = c->driver->tls_port;
	if (t->insecure)
		fprintf(stderr, "kvbench: warning: --insecure: the server's "
				"certificate is not verified\n");
	return 0;
}

int target_apply(struct kb_config *c, char *err, size_t errlen)
{
	char *url_pw = NULL, *pw = NULL;
	const char *env = getenv("KVCLI_AUTH");
	int on_cmdline = c->password_arg != NULL;

	if (c->url_arg && strncmp(c->url_arg, "mongodb", 7) == 0) {
		/* mongodb:// or mongodb+srv://: libmongoc reads it whole */
		if (strcmp(c->driver->name, "mongodb")) {
			snprintf(err, errlen, "-u %s: a URI for -D mongodb",
				 c->url_arg);
			return -1;
		}
		if (!(c->host_buf = strdup(c->url_arg))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		c->target.conninfo = c->host_buf;
		on_cmdline |= strchr(c->url_arg, '@') != NULL;
		mask_url(c->url_arg);
	} else if (c->url_arg && apply_url(c, &url_pw, err, errlen)) {
		return -1;
	}
	if (check_tls(c, err, errlen))
		goto fail;
	on_cmdline |= url_pw != NULL;
	/* kvcli's order: -a, --askpass, the URL's, the environment. */
	if (c->password_arg) {
		pw = strdup(c->password_arg);
	} else if (c->askpass) {
		if (!(pw = ask_password())) {
			snprintf(err, errlen, "--askpass: cannot read it");
			goto fail;
		}
	} else if (url_pw) {
		pw = url_pw;
		url_pw = NULL;
	} else if (env && *env) {
		pw = strdup(env);
	}
	if (!pw && (c->password_arg || (env && *env))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (c->password_arg)
		memset(c->password_arg, '*', strlen(c->password_arg));
	if (on_cmdline && !c->no_auth_warning)
		fprintf(stderr,
			"kvbench: warning: a password given on the command "
			"line (-a, -u) can be seen by other users; "
			"--askpass or KVCLI_AUTH keep it out of sight\n");
	c->password = pw;
	c->target.password = pw;
	wipe_free(url_pw);
	return 0;
fail:
	wipe_free(url_pw);
	return -1;
}

void target_free(struct kb_config *c)
{
	wipe_free(c->password);
	c->password = NULL;
	c->target.password = NULL;
	free(c->host_buf);
	c->host_buf = NULL;
}
