/* auth.c - password, protected mode, disabled commands (see auth.h). */
#include "auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "kv_proto.h"
#include "loop.h"

static int is_loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!strcmp(addr, "localhost"))
		return 1;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, addr, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

static int read_password(struct kvd_config *cfg, char *err, size_t errlen)
{
	FILE *f = fopen(cfg->requirepass_file, "r");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "requirepass-file %s: %s",
			 cfg->requirepass_file, strerror(errno));
		return -1;
	}
	if (!fgets(cfg->requirepass, sizeof(cfg->requirepass), f))
		cfg->requirepass[0] = '\0';
	fclose(f);
	n = strcspn(cfg->requirepass, "\r\n");
	cfg->requirepass[n] = '\0';
	if (n == 0) {
		snprintf(err, errlen, "requirepass-file %s holds no password",
			 cfg->requirepass_file);
		return -1;
	}
	return 0;
}

/* Every name in disable-commands must be a command kvd knows. */
static int check_disable_list(const struct kvd_config *cfg, char *err,
			      size_t errlen)
{
	static const char *const resp_only[] = {"KEYS", "FLUSHDB", "CONFIG",
						"DEBUG", NULL};
	const char *p = cfg->disable_commands;

	while (*p) {
		size_t n = strcspn(p, ", ");
		int known = 0;

		for (unsigned op = 1; op < KV_OP_MAX && n; op++)
			known |= strlen(kv_op_name(op)) == n &&
				 !strncasecmp(kv_op_name(op), p, n);
		for (unsigned i = 0; resp_only[i] && n; i++)
			known |= strlen(resp_only[i]) == n &&
				 !strncasecmp(resp_only[i], p, n);
		if (n && !known) {
			snprintf(err, errlen,
				 "disable-commands: unknown command '%.*s'",
				 (int)n, p);
			return -1;
		}
		p += n;
		p += strspn(p, ", ");
	}
	return 0;
}

int kvd_auth_setup(struct kvd_config *cfg, char *err, size_t errlen)
{
	if (cfg->requirepass_file[0]) {
		if (cfg->requirepass[0]) {
			snprintf(err, errlen,
				 "set requirepass or "
				 "requirepass-file, not both");
			return -1;
		}
		if (read_password(cfg, err, errlen))
			return -1;
	}
	if (check_disable_list(cfg, err, errlen))
		return -1;
	if (!cfg->protected_mode || cfg->requirepass[0])
		return 0;
	if (!is_loopback(cfg->bind)) {
		snprintf(
		    err, errlen,
		    "refusing to listen on %s without a password "
		    "(protected mode): set requirepass or requirepass-file, "
		    "bind to 127.0.0.1, or set protected-mode no",
		    cfg->bind);
		return -1;
	}
	if (cfg->metrics_port && !is_loopback(cfg->metrics_bind)) {
		snprintf(
		    err, errlen,
		    "refusing to serve metrics on %s (protected mode): the "
		    "endpoint has no password; bind it to 127.0.0.1 or set "
		    "protected-mode no",
		    cfg->metrics_bind);
		return -1;
	}
	return 0;
}

int kvd_auth_pending(const struct kvd_conn *c)
{
	return c->io->srv->cfg->requirepass[0] && !(c->flags & CONN_AUTHED);
}

int kvd_auth_try(struct kvd_conn *c, const void *pw, size_t n)
{
	const char *want = c->io->srv->cfg->requirepass;
	const unsigned char *got = pw;
	size_t len = strlen(want);
	unsigned diff = n != len;

	/* Walk the configured password whatever was sent: the time taken
	 * tells nothing about how much of a guess was right. */
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)want[i] ^ (i < n ? got[i] : 0);
	if (diff)
		return 0;
	c->flags |= CONN_AUTHED;
	return 1;
}

int kvd_auth_disabled(const struct kvd_config *cfg, const char *name, size_t n)
{
	const char *p = cfg->disable_commands;

	while (*p) {
		size_t k = strcspn(p, ", ");

		if (k == n && !strncasecmp(p, name, n))
			return 1;
		p += k;
		p += strspn(p, ", ");
	}
	return 0;
}
