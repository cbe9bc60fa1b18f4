/* url.c - libkvclient's server URLs: kvd://[:PASSWORD@]HOST[:PORT][/],
 * kvds:// (the same over TLS) and unix:///PATH[?password=PASSWORD], parsed
 * by kvc_url_parse() and used by kvc_connect_url().
 *
 * One address and one password in one string is what a tool's -u option,
 * an environment variable or a configuration file wants to hold.  The
 * forms follow RFC 3986 where it has a rule: percent-escapes in the
 * password and the path, an IPv6 address in brackets.  A Unix path has no
 * room for a userinfo part before it (unix://:pw@/path reads badly and
 * other tools disagree on it), so its password is a query parameter, as
 * libpq's "host=" and "password=" are.
 */
#include "kvc_int.h"

#include <stdlib.h>
#include <string.h>

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Copy s[0..n) to out, decoding %HH, and NUL-terminate.  -1 for a broken
 * escape or a %00 (a password or a path is a C string). */
static int pct_decode(const char *s, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] != '%') {
			*out++ = s[i];
			continue;
		}
		if (i + 2 >= n)
			return -1;
		hi = hexval(s[i + 1]);
		lo = hi < 0 ? -1 : hexval(s[i + 2]);
		if (lo < 0 || (hi == 0 && lo == 0))
			return -1;
		*out++ = (char)(hi << 4 | lo);
		i += 2;
	}
	*out = '\0';
	return 0;
}

/* A decimal port, 1 to 65535, filling s[0..n) exactly. */
static int parse_port(const char *s, size_t n, unsigned *port)
{
	unsigned v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -1;
	*port = v;
	return 0;
}

/* kvd:// or kvds://[:PASSWORD@]HOST[:PORT][/], after the scheme.  Strings are
 * decoded into buf, which is as long as the URL. */
static int parse_kvd(const char *s, kvc_url *u, char *buf)
{
	const char *at = strchr(s, '@'), *host, *hend, *pstart = NULL;
	size_t n = strlen(s);

	if (n && s[n - 1] == '/')
		n--; /* one trailing slash, and no path */
	if (memchr(s, '/', n) || memchr(s, '?', n) || memchr(s, '#', n))
		return -1;
	if (at && (size_t)(at - s) < n) {
		/* No user names in kvd: the userinfo is ":PASSWORD". */
		if (s[0] != ':')
			return -1;
		if (pct_decode(s + 1, (size_t)(at - s - 1), buf))
			return -1;
		u->password = buf;
		buf += strlen(buf) + 1;
		n -= (size_t)(at + 1 - s);
		s = at + 1;
	}
	host = s;
	if (*s == '[') { /* [IPv6] */
		const char *close = memchr(s, ']', n);

		if (!close || close == s + 1)
			return -1;
		host = s + 1;
		hend = close;
		if ((size_t)(close + 1 - s) < n) {
			if (close[1] != ':')
				return -1;
			pstart = close + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);

		hend = colon ? colon : s + n;
		pstart = colon ? colon + 1 : NULL;
	}
	if (hend == host || memchr(host, '%', (size_t)(hend - host)))
		return -1;
	if (pstart && parse_port(pstart, (size_t)(s + n - pstart), &u->port))
		return -1;
	memcpy(buf, host, (size_t)(hend - host));
	buf[hend - host] = '\0';
	u->host = buf;
	return 0;
}

/* unix:///PATH[?password=PASSWORD], after the scheme. */
static int parse_unix(const char *s, kvc_url *u, char *buf)
{
	const char *q = strchr(s, '?');
	size_t plen = q ? (size_t)(q - s) : strlen(s);
	static const char key[] = "password=";

	/* An empty authority ("unix://" then "/path"): the path is absolute. */
	if (s[0] != '/' || plen < 2 || memchr(s, '#', strlen(s)))
		return -1;
	if (pct_decode(s, plen, buf))
		return -1;
	u->host = buf;
	u->port = 0;
	buf += strlen(buf) + 1;
	if (!q)
		return 0;
	if (strncmp(q + 1, key, sizeof(key) - 1) || strchr(q + 1, '&'))
		return -1;
	if (pct_decode(q + sizeof(key), strlen(q + sizeof(key)), buf))
		return -1;
	u->password = buf;
	return 0;
}

int kvc_url_parse(const char *url, kvc_url **urlp)
{
	size_t n;
	kvc_url *u;
	char *buf;
	int rc;

	if (!urlp)
		return -KVC_INVALID;
	*urlp = NULL;
	if (!url)
		return -KVC_INVALID;
	n = strlen(url);
	/* One block: the struct, then room for host (or path) and password,
	 * neither longer than the URL. */
	u = calloc(1, sizeof(*u) + 2 * (n + 1));
	if (!u)
		return -KVC_NOMEM;
	buf = (char *)(u + 1);
	u->port = KVC_DEFAULT_PORT;
	if (!strncmp(url, "kvd://", 6)) {
		rc = parse_kvd(url + 6, u, buf);
	} else if (!strncmp(url, "kvds://", 7)) {
		u->port = KVC_DEFAULT_TLS_PORT;
		u->tls = 1;
		rc = parse_kvd(url + 7, u, buf);
	} else if (!strncmp(url, "unix://", 7))
		rc = parse_unix(url + 7, u, buf);
	else
		rc = -1;
	if (rc) {
		kvc_url_free(u);
		return -KVC_INVALID;
	}
	*urlp = u;
	return 0;
}

void kvc_url_free(kvc_url *u)
{
	if (!u)
		return;
	if (u->password)
		explicit_bzero(u->password, strlen(u->password));
	free(u);
}

int kvc_connect_url(kvc_conn *c, const char *url)
{
	kvc_url *u;
	int rc = kvc_url_parse(url, &u);

	if (rc == -KVC_INVALID)
		kvc_set_err(c, "invalid URL (kvd://[:PASSWORD@]HOST[:PORT], "
			       "kvds://... or "
			       "unix:///PATH[?password=PASSWORD])");
	if (rc)
		return rc;
	if (u->password &&
	    (rc = kvc_set_password(c, u->password, strlen(u->password))))
		goto done;
	/* kvds:// without kvc_set_tls: the system's CAs, the URL's host. */
	if (u->tls && !c->tls_ctx &&
	    (rc = kvc_set_tls(c, &(struct kvc_tls_opts){0})))
		goto done;
	rc = kvc_connect_any(c, u->host, u->port, !u->port, u->tls);
done:
	kvc_url_free(u);
	return rc;
}
