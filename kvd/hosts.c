/* hosts.c - the hosts a replica may be pointed at, as the configuration
 * and REPLICAOF give them (config.h): a host must be an address or a host
 * name, never text that could carry a newline into the config file or the
 * log; replicaof's value; and the list allowed-primaries.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"

static int host_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

int kvd_config_host_ok(const char *h)
{
	struct in_addr a4;
	struct in6_addr a6;
	size_t n = strlen(h), label = 0;

	if (inet_pton(AF_INET, h, &a4) == 1 || inet_pton(AF_INET6, h, &a6) == 1)
		return 1;
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (h[i] == '.') {
			/* no empty label, none ending in '-' */
			if (!label || h[i - 1] == '-')
				return 0;
			label = 0;
		} else if (!host_char(h[i]) || (h[i] == '-' && !label) ||
			   ++label > 63) {
			return 0;
		}
	}
	return h[n - 1] != '-';
}

int kvd_config_replicaof(const char *val, char *host, size_t hcap,
			 unsigned *port, int *resp)
{
	char h[256], kind[8] = "", more;
	unsigned p;
	int n = sscanf(val, "%255s %u %7s %c", h, &p, kind, &more);

	if (n < 2 || n > 3 || p == 0 || p > 65535 ||
	    (n == 3 && strcmp(kind, "resp")) || !kvd_config_host_ok(h) ||
	    strlen(h) >= hcap)
		return -1;
	snprintf(host, hcap, "%s", h);
	*port = p;
	*resp = n == 3;
	return 0;
}

/* An entry of allowed-primaries (n bytes: "HOST", "HOST:PORT", "[V6]" or
 * "[V6]:PORT"; a bare IPv6 address has colons of its own: it is a HOST)
 * into host and *port (0: any).  0, or -1 when it is none of those. */
static int parse_entry(const char *e, size_t n, char *host, size_t hcap,
		       unsigned *port)
{
	const char *h = e, *colon = NULL;
	size_t hn = n;

	*port = 0;
	if (n && e[0] == '[') {
		const char *end = memchr(e, ']', n);

		if (!end || (end + 1 < e + n && end[1] != ':'))
			return -1;
		h = e + 1;
		hn = (size_t)(end - h);
		colon = end + 1 < e + n ? end + 1 : NULL;
	} else if ((colon = memchr(e, ':', n)) &&
		   memchr(colon + 1, ':', n - (size_t)(colon - e) - 1)) {
		colon = NULL;
	} else if (colon) {
		hn = (size_t)(colon - e);
	}
	if (colon) {
		char num[8], more;
		size_t pn = n - (size_t)(colon + 1 - e);

		if (!pn || pn >= sizeof(num))
			return -1;
		memcpy(num, colon + 1, pn);
		num[pn] = '\0';
		if (sscanf(num, "%u%c", port, &more) != 1 || !*port ||
		    *port > 65535)
			return -1;
	}
	if (hn >= hcap)
		return -1;
	memcpy(host, h, hn);
	host[hn] = '\0';
	return kvd_config_host_ok(host) ? 0 : -1;
}

/* Call fn on each entry of list (separated by commas or spaces) until it
 * answers non-zero; that answer, or 0. */
static int each_entry(const char *list,
		      int (*fn)(const char *e, size_t n, void *arg), void *arg)
{
	const char *p = list;
	int rc = 0;

	while (*p && !rc) {
		size_t n = strcspn(p, ", ");

		if (n)
			rc = fn(p, n, arg);
		p += n;
		p += strspn(p, ", ");
	}
	return rc;
}

struct target {
	const char *host;
	unsigned port;
	char *bad;
	size_t cap;
};

static int entry_bad(const char *e, size_t n, void *arg)
{
	struct target *t = arg;
	char host[256];
	unsigned port;

	if (!parse_entry(e, n, host, sizeof(host), &port))
		return 0;
	snprintf(t->bad, t->cap, "%.*s", (int)(n > 200 ? 200 : n), e);
	return -1;
}

static int entry_names(const char *e, size_t n, void *arg)
{
	const struct target *t = arg;
	char host[256];
	unsigned port;

	return !parse_entry(e, n, host, sizeof(host), &port) &&
	       !strcasecmp(host, t->host) && (!port || port == t->port);
}

int kvd_config_primaries_check(const char *list, char *bad, size_t cap)
{
	struct target t = {NULL, 0, bad, cap};

	return each_entry(list, entry_bad, &t);
}

int kvd_config_primary_allowed(const char *list, const char *host,
			       unsigned port)
{
	struct target t = {host, port, NULL, 0};

	return each_entry(list, entry_names, &t);
}
