/* auth.c - password, protected mode, disabled commands, cross-protocol
 * requests (see auth.h). */
#include "auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "conn.h"
#include "kv_proto.h"
#include "log.h"
#include "loop.h"
#include "resp/resp.h"

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

/* The first line of requirepass-file, whole: fgets into the 256-byte field
 * once cut a longer password silently, and kvd then asked for a prefix. */
static int read_password(struct kvd_config *cfg, char *err, size_t errlen)
{
	FILE *f = fopen(cfg->requirepass_file, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t got;
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "requirepass-file %s: %s",
			 cfg->requirepass_file, strerror(errno));
		return -1;
	}
	got = getline(&line, &cap, f);
	fclose(f);
	if (got > 0) {
		const char *nl = memchr(line, '\n', (size_t)got);

		n = nl ? (size_t)(nl - line) : (size_t)got;
		if (n && line[n - 1] == '\r')
			n--;
	}
	if (got > 0 && memchr(line, '\0', n))
		snprintf(err, errlen,
			 "requirepass-file %s: NUL byte in the "
			 "password",
			 cfg->requirepass_file);
	else if (n == 0)
		snprintf(err, errlen, "requirepass-file %s holds no password",
			 cfg->requirepass_file);
	else if (n > KVD_PASS_MAX)
		snprintf(err, errlen,
			 "requirepass-file %s: the password is longer than "
			 "%d bytes",
			 cfg->requirepass_file, KVD_PASS_MAX);
	else {
		memcpy(cfg->requirepass, line, n);
		cfg->requirepass[n] = '\0';
		rc = 0;
	}
	free(line);
	return rc;
}

/* ===================== Disabled commands ===================== */

/* What each native operation performs besides itself, as KVO bits: the
 * other native operations its effect is made of.  With resp.h's ops column
 * (each RESP command's native operations) this is the one table that
 * decides, on both protocols, what a name in disable-commands refuses: an
 * operation is off when it, or anything it performs, is named.  So PUT
 * refuses every operation that stores a whole value it read, computed or
 * moved (RENAME, COPY, INCRBYFLOAT, SETRANGE, SETBIT, BITOP) and the RESP
 * commands that perform those; INCR, APPEND, MPUT, MDEL and GETDEL are
 * committer operations with names of their own, as before.  TXN performs
 * what its sub-requests do: each is checked on its own (cmd_txn.c). */
static const uint64_t op_performs[KV_OP_MAX] = {
    [KV_OP_RENAME] = KVO(GET) | KVO(PUT) | KVO(DEL),
    [KV_OP_COPY] = KVO(GET) | KVO(PUT),
    [KV_OP_GETEX] = KVO(GET) | KVO(EXPIRE) | KVO(DEL),
    [KV_OP_INCRBYFLOAT] = KVO(GET) | KVO(PUT),
    [KV_OP_GETRANGE] = KVO(GET),
    [KV_OP_SETRANGE] = KVO(GET) | KVO(PUT),
    [KV_OP_SETBIT] = KVO(GET) | KVO(PUT),
    [KV_OP_GETBIT] = KVO(GET),
    [KV_OP_BITCOUNT] = KVO(GET),
    [KV_OP_BITPOS] = KVO(GET),
    [KV_OP_BITOP] = KVO(GET) | KVO(PUT) | KVO(DEL),
    /* as RESP's hash commands: a write stores a value, a read reads one */
    [KV_OP_HSET] = KVO(PUT),
    [KV_OP_HDEL] = KVO(PUT),
    [KV_OP_HINCRBY] = KVO(PUT),
    [KV_OP_HGET] = KVO(GET),
    [KV_OP_HGETALL] = KVO(GET),
    [KV_OP_HSCAN] = KVO(GET),
};

/* Bits of the native operations and of the RESP commands refused.  Written
 * once by kvd_auth_setup, before any io thread exists (disable-commands is
 * not reloadable), read-only after. */
static uint64_t op_off;
#define RESP_OFF_WORDS ((RESP_NCMDS + 63) / 64)
static uint64_t resp_off[RESP_OFF_WORDS];

_Static_assert(KV_OP_MAX <= 64, "op_off and the KVO bits are 64 bits");

uint64_t kvd_auth_performs(uint64_t ops)
{
	uint64_t all = ops;

	for (unsigned op = 1; op < KV_OP_MAX; op++)
		if ((ops >> op) & 1)
			all |= op_performs[op];
	return all;
}

static int name_is(const char *name, const char *p, size_t n)
{
	return strlen(name) == n && !strncasecmp(name, p, n);
}

/* Mark the name at p (n bytes) off: a native operation (in *ops_named), a
 * RESP command (in resp_named), or both (GET, DEL, ...).  -1 when kvd
 * knows no command of that name. */
static int disable_name(const char *p, size_t n, uint64_t *ops_named,
			uint64_t *resp_named)
{
	int known = 0;

	for (unsigned op = 1; op < KV_OP_MAX; op++)
		if (kv_op_name(op) && name_is(kv_op_name(op), p, n)) {
			*ops_named |= 1ull << op;
			known = 1;
		}
	for (unsigned i = 0; i < RESP_NCMDS; i++)
		if (name_is(resp_cmds[i].name, p, n)) {
			resp_named[i / 64] |= 1ull << (i % 64);
			known = 1;
		}
	return known ? 0 : -1;
}

/* Turn disable-commands into the bitmaps; every name must be a command kvd
 * knows, so that a typo cannot leave a command on that was meant off. */
static int setup_disabled(const struct kvd_config *cfg, char *err,
			  size_t errlen)
{
	const char *p = cfg->disable_commands;
	uint64_t named[RESP_OFF_WORDS] = {0}, ops_named = 0;

	op_off = 0;
	while (*p) {
		size_t n = strcspn(p, ", ");

		if (n && disable_name(p, n, &ops_named, named)) {
			snprintf(
			    err, errlen,
			    "disable-commands: unknown command '%.*s' "
			    "(give native operation or RESP command names)",
			    (int)n, p);
			return -1;
		}
		p += n;
		p += strspn(p, ", ");
	}
	/* A native operation is off when it, or one it performs, is named;
	 * a RESP command when named, or when a native operation it
	 * performs, directly or through that one, is named. */
	for (unsigned op = 1; op < KV_OP_MAX; op++)
		if (kvd_auth_performs(1ull << op) & ops_named)
			op_off |= 1ull << op;
	memcpy(resp_off, named, sizeof(resp_off));
	for (unsigned i = 0; i < RESP_NCMDS; i++)
		if (kvd_auth_performs(resp_cmds[i].ops) & ops_named)
			resp_off[i / 64] |= 1ull << (i % 64);
	return 0;
}

int kvd_auth_op_disabled(unsigned op)
{
	return op < 64 && (op_off >> op) & 1;
}

int kvd_auth_resp_disabled(unsigned id)
{
	return id < RESP_NCMDS && (resp_off[id / 64] >> (id % 64)) & 1;
}

/* ===================== Setup ===================== */

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
	if (setup_disabled(cfg, err, errlen))
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

/* Failed AUTHs of every connection: rare by design (each connection gets
 * KVD_AUTH_MAX_FAILS), so one shared counter costs nothing on a hot path. */
static _Atomic uint64_t auth_failures;

uint64_t kvd_auth_failures(void)
{
	return atomic_load_explicit(&auth_failures, memory_order_relaxed);
}

/* ===================== Guessing: failures per source ===================== */

/* Closing a connection after KVD_AUTH_MAX_FAILS failures costs a guesser a
 * reconnection every few guesses: 81,000 guesses a second on loopback.  So
 * failures are also limited per source address (IPv4, an IPv6 /64, or
 * "a Unix socket"), with a generic cell rate algorithm: each failure moves
 * the source's tat (theoretical arrival time) one interval on, and an
 * attempt is refused, unchecked, while tat is more than burst - 1
 * intervals ahead of now.  So a source may fail auth-fail-burst times at
 * once, then auth-fail-rate times a second.  Globally, failures from every
 * source together are allowed 100 times that rate (50 times the burst);
 * past it (a flood from many addresses), a source that failed within the
 * last FLOOD_QUIET_MS is refused until the flood is over, while one that
 * did not keeps its allowance: a flood cannot lock out clients that know
 * the password, only slow down those that guess.
 *
 * The table is small and open-addressed; a source that finds no slot in
 * its probe window takes the one that failed longest ago.  One mutex:
 * authentication is once per connection, and a limited guesser is closed
 * after each refusal. */
#define SRC_SLOTS 4096
#define SRC_PROBE 8
#define FLOOD_QUIET_MS 10000

struct src {
	uint8_t key[17]; /* family tag, then up to 16 bytes */
	uint64_t tat_us;
	uint64_t last_fail_ms;
};

static struct {
	pthread_mutex_t mu;
	struct src slot[SRC_SLOTS];
	uint64_t tat_us; /* all sources together */
} lim = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t auth_limited;

/* The peer's source key and its text for the log; a peer with no
 * address (a Unix socket) has the key of zeros, shared by all such. */
static void src_key(const struct kvd_conn *c, uint8_t key[17], char *text,
		    size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	memset(key, 0, 17);
	snprintf(text, cap, "a Unix socket");
	if (c->fd < 0 || getpeername(c->fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			key[0] = 4;
			memcpy(key + 1, a->s6_addr + 12, 4);
			inet_ntop(AF_INET, a->s6_addr + 12, text,
				  (socklen_t)cap);
		} else {
			struct in6_addr net = *a;

			key[0] = 6;
			memcpy(key + 1, a->s6_addr, 8); /* its /64 */
			memset(net.s6_addr + 8, 0, 8);
			inet_ntop(AF_INET6, &net, text, (socklen_t)cap);
			snprintf(text + strlen(text), cap - strlen(text),
				 "/64");
		}
	} else if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		key[0] = 4;
		memcpy(key + 1, &a->sin_addr, 4);
		inet_ntop(AF_INET, &a->sin_addr, text, (socklen_t)cap);
	}
}

/* key's slot (under lim.mu): its own, a free one, or the one that failed
 * longest ago in its probe window. */
static struct src *src_slot(const uint8_t key[17])
{
	uint64_t h = 1469598103934665603ull;
	struct src *oldest = NULL;

	for (unsigned i = 0; i < 17; i++)
		h = (h ^ key[i]) * 1099511628211ull;
	for (unsigned k = 0; k < SRC_PROBE; k++) {
		struct src *s = &lim.slot[(h + k) % SRC_SLOTS];

		if (!memcmp(s->key, key, 17))
			return s;
		if (!oldest || s->last_fail_ms < oldest->last_fail_ms)
			oldest = s;
	}
	memcpy(oldest->key, key, 17);
	oldest->tat_us = 0;
	oldest->last_fail_ms = 0;
	return oldest;
}

/* The limits, from the configuration: interval (us) and burst, for one
 * source and for all; 0 when the limiter is off. */
static int limits(const struct kvd_conn *c, uint64_t *iv, uint64_t *burst,
		  uint64_t *giv, uint64_t *gburst)
{
	const struct kvd_config *cfg = c->io->srv->cfg;

	if (!cfg->auth_fail_rate)
		return 0;
	*iv = 1000000ull / cfg->auth_fail_rate;
	*burst = cfg->auth_fail_burst;
	*giv = *iv / 100 ? *iv / 100 : 1;
	*gburst = 50ull * cfg->auth_fail_burst;
	return 1;
}

int kvd_auth_gate(struct kvd_conn *c)
{
	static struct kvd_log_limit limit = KVD_LOG_LIMIT_INIT(1000);
	uint64_t iv, burst, giv, gburst, now_us = kvd_mono_ns() / 1000;
	uint8_t key[17];
	char text[64];
	struct src *s;
	int refuse, flood;

	if (!limits(c, &iv, &burst, &giv, &gburst))
		return 0;
	src_key(c, key, text, sizeof(text));
	pthread_mutex_lock(&lim.mu);
	s = src_slot(key);
	flood = lim.tat_us > now_us + (gburst - 1) * giv;
	refuse = s->tat_us > now_us + (burst - 1) * iv ||
		 (flood && s->last_fail_ms &&
		  now_us / 1000 - s->last_fail_ms < FLOOD_QUIET_MS);
	pthread_mutex_unlock(&lim.mu);
	if (!refuse)
		return 0;
	atomic_fetch_add_explicit(&auth_limited, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&auth_failures, 1, memory_order_relaxed);
	c->flags |= CONN_CLOSING;
	kvd_log_ratelimited(&limit, KVD_LOG_WARN,
			    "AUTH from %s refused unchecked: %s; connection "
			    "%llu closed",
			    text,
			    flood ? "failures from every address together "
				    "exceed the global limit"
				  : "too many failures from it "
				    "(auth-fail-burst, auth-fail-rate)",
			    (unsigned long long)c->id);
	return -1;
}

void kvd_auth_note_failure(struct kvd_conn *c)
{
	uint64_t iv, burst, giv, gburst, now_us = kvd_mono_ns() / 1000;
	uint8_t key[17];
	char text[64];
	struct src *s;

	if (!limits(c, &iv, &burst, &giv, &gburst))
		return;
	src_key(c, key, text, sizeof(text));
	pthread_mutex_lock(&lim.mu);
	s = src_slot(key);
	s->tat_us = (s->tat_us > now_us ? s->tat_us : now_us) + iv;
	s->last_fail_ms = now_us / 1000;
	lim.tat_us = (lim.tat_us > now_us ? lim.tat_us : now_us) + giv;
	pthread_mutex_unlock(&lim.mu);
}

uint64_t kvd_auth_limited(void)
{
	return atomic_load_explicit(&auth_limited, memory_order_relaxed);
}

/* Count, log at most once a second per io thread, and close the
 * connection (after this reply) once it has used up its attempts.  No
 * sleep: an io thread never blocks, so a guesser is slowed by having to
 * reconnect, not by a delay. */
static void auth_failed(struct kvd_conn *c)
{
	static __thread struct kvd_log_limit limit = KVD_LOG_LIMIT_INIT(1000);

	atomic_fetch_add_explicit(&auth_failures, 1, memory_order_relaxed);
	if (c->auth_fails < UINT8_MAX)
		c->auth_fails++;
	if (c->auth_fails < KVD_AUTH_MAX_FAILS) {
		kvd_log_ratelimited(&limit, KVD_LOG_WARN,
				    "connection %llu: AUTH failed",
				    (unsigned long long)c->id);
		return;
	}
	c->flags |= CONN_CLOSING;
	kvd_log_ratelimited(&limit, KVD_LOG_WARN,
			    "connection %llu: AUTH failed %u times; closing it",
			    (unsigned long long)c->id, c->auth_fails);
}

void kvd_auth_wrong(struct kvd_conn *c)
{
	kvd_auth_note_failure(c);
	auth_failed(c);
}

int kvd_auth_try(struct kvd_conn *c, const void *pw, size_t n)
{
	const char *want = c->io->srv->cfg->requirepass;
	const unsigned char *got = pw;
	size_t len = strlen(want);
	unsigned diff = n != len;

	if (kvd_auth_gate(c))
		return -1;

	/* Walk the configured password whatever was sent: the time taken
	 * tells nothing about how much of a guess was right. */
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)want[i] ^ (i < n ? got[i] : 0);
	if (diff) {
		kvd_auth_note_failure(c);
		auth_failed(c);
		return 0;
	}
	c->flags |= CONN_AUTHED;
	return 1;
}

/* ===================== Cross-protocol requests ===================== */

static __thread struct kvd_log_limit http_limit = KVD_LOG_LIMIT_INIT(1000);

void kvd_auth_http_refuse(struct kvd_conn *c, const char *what)
{
	c->flags |= CONN_CLOSING;
	kvd_log_ratelimited(
	    &http_limit, KVD_LOG_WARN,
	    "connection %llu: %s: possible SECURITY ATTACK (a web page making "
	    "a browser send HTTP to kvd, cross-protocol scripting); "
	    "connection closed unanswered",
	    (unsigned long long)c->id, what);
}

int kvd_auth_http_native(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	/* The method and its space: no native frame has a space (msgpack
	 * fixint 32) where its request array should begin. */
	static const char *const methods[] = {
	    "GET ",   "POST ",	  "PUT ",     "HEAD ",	"DELETE ",
	    "PATCH ", "OPTIONS ", "CONNECT ", "TRACE ", "PRI "};

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		size_t len = strlen(methods[i]), k = n < len ? n : len;

		if (memcmp(p, methods[i], k))
			continue;
		if (k < len)
			return -1;
		kvd_auth_http_refuse(c, "an HTTP request on the native port");
		return 1;
	}
	return 0;
}

static __thread struct kvd_log_limit tls_limit = KVD_LOG_LIMIT_INIT(1000);

int kvd_auth_tls_plain(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	/* A handshake record (content type 22), protocol version 3.x.  No
	 * native frame starts so (a length over 350 MiB) and no RESP
	 * request starts with a control character. */
	if (n == 0 || p[0] != 0x16 || (n > 1 && p[1] != 0x03))
		return 0;
	c->flags |= CONN_CLOSING;
	kvd_log_ratelimited(&tls_limit, KVD_LOG_WARN,
			    "connection %llu: a TLS handshake on a plain port "
			    "(use tls-port or tls-resp-port, or connect "
			    "without TLS); connection closed unanswered",
			    (unsigned long long)c->id);
	return 1;
}
