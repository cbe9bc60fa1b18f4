/* resp.c - the Redis protocol (RESP2): framing, replies and dispatch.
 *
 * Requests come in two forms, as in Redis: a multibulk array of bulk
 * strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), and an inline line for telnet
 * ("GET k\r\n", split like Redis's sdssplitargs).  Limits are checked on
 * the declared lengths before a byte of the body is waited for, so a client
 * can never make the server buffer more than max-frame-size for a request.
 *
 * A multibulk request may arrive over many receives.  Rescanning it from the
 * start each time would be quadratic in its argument count, so how far it
 * has been validated is kept in c->resp_mb.  That is sound because the
 * connection hands the same request start back on every call until this
 * module consumes it (returns non-zero), and that is when the state resets.
 *
 * Errors carry Redis's own words where Redis has them.  A protocol error
 * cannot be resynchronised: it is answered and the connection closed, as
 * Redis does.
 */
#include "resp.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "net/auth.h"
#include "kv_status.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "store.h"

#define NUM_LINE_MAX 24 /* "$" + sign + 20 digits, generously */
/* Longest inline line before AUTH: room for HELLO 2 AUTH default and a
 * 255-byte password, far below RESP_INLINE_MAX. */
#define RESP_PREAUTH_INLINE_MAX (4u << 10)

const char resp_err_syntax[] = "ERR syntax error";
const char resp_err_int[] = "ERR value is not an integer or out of range";
const char resp_err_internal[] =
    "ERR internal error while reading (see the server log)";
const char resp_err_key[] =
    "ERR invalid key: kvd keys are 1 to max-key-size bytes long";
const char resp_err_nomem[] = "ERR out of memory";
const char resp_err_wrongtype[] =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

const char *resp_read_err(int rc)
{
	return rc == KV_WRONG_TYPE ? resp_err_wrongtype : resp_err_internal;
}

const struct resp_cmd resp_cmds[RESP_NCMDS] = {
#define RESP_CMD_ROW(id, name, fn, ops, arity, flags, first, last, step,       \
		     group, summary)                                           \
	[RESP_CMD_##id] = {name,  fn,	ops,  arity, flags,                    \
			   first, last, step, group, summary},
    RESP_COMMANDS(RESP_CMD_ROW)
#undef RESP_CMD_ROW
};

/* ===================== Replies ===================== */

size_t resp_u64(char *buf, uint64_t v)
{
	char tmp[21];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

void resp_add_raw(struct kvd_conn *c, const void *p, size_t n)
{
	kvd_reply_append(c, p, n);
}

void resp_add_ok(struct kvd_conn *c)
{
	kvd_reply_append(c, "+OK\r\n", 5);
}

void resp_add_status(struct kvd_conn *c, const char *s)
{
	size_t n = strlen(s);
	uint8_t *p = kvd_reply_room(c, n + 3);

	if (!p)
		return;
	p[0] = '+';
	memcpy(p + 1, s, n);
	memcpy(p + 1 + n, "\r\n", 2);
	c->out.len += n + 3;
}

/* One type byte, a signed decimal, CRLF. */
static void add_num(struct kvd_conn *c, char type, int64_t v)
{
	uint8_t *p = kvd_reply_room(c, 24);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	size_t n = 1;

	if (!p)
		return;
	p[0] = (uint8_t)type;
	if (v < 0)
		p[n++] = '-';
	n += resp_u64((char *)p + n, u);
	p[n++] = '\r';
	p[n++] = '\n';
	c->out.len += n;
}

void resp_add_int(struct kvd_conn *c, int64_t v)
{
	add_num(c, ':', v);
}

void resp_add_array(struct kvd_conn *c, uint64_t n)
{
	add_num(c, '*', (int64_t)n);
}

void resp_add_nil(struct kvd_conn *c)
{
	kvd_reply_append(c, "$-1\r\n", 5);
}

void resp_add_bulk(struct kvd_conn *c, const void *data, size_t n)
{
	uint8_t *p = kvd_reply_room(c, n + 32);
	size_t h = 1;

	if (!p)
		return;
	p[0] = '$';
	h += resp_u64((char *)p + 1, n);
	p[h++] = '\r';
	p[h++] = '\n';
	if (n)
		memcpy(p + h, data, n);
	p[h + n] = '\r';
	p[h + n + 1] = '\n';
	c->out.len += h + n + 2;
}

void resp_add_cstr(struct kvd_conn *c, const char *s)
{
	resp_add_bulk(c, s, strlen(s));
}

void resp_add_error(struct kvd_conn *c, const char *msg)
{
	size_t n = strlen(msg);
	uint8_t *p;

	/* as Redis's addReplyErrorFormat: CR and LF at the end (an argument
	 * quoted last) are trimmed, those inside become spaces */
	while (n && (msg[n - 1] == '\r' || msg[n - 1] == '\n'))
		n--;
	p = kvd_reply_room(c, n + 3);
	kvd_count(&c->io->stats.resp_errors, 1);
	if (!p)
		return;
	p[0] = '-';
	for (size_t i = 0; i < n; i++)
		p[1 + i] = msg[i] == '\r' || msg[i] == '\n' ? ' ' : msg[i];
	memcpy(p + 1 + n, "\r\n", 2);
	c->out.len += n + 3;
}

void resp_insert(struct kvd_conn *c, size_t off, const void *hdr, size_t n)
{
	if (kv_buf_reserve(&c->out, n))
		return;
	memmove(c->out.data + off + n, c->out.data + off, c->out.len - off);
	memcpy(c->out.data + off, hdr, n);
	c->out.len += n;
}

size_t resp_reply_cap(const struct kvd_conn *c)
{
	return KVD_LIVE(c->io->srv->cfg->max_output);
}

/* ===================== Arguments ===================== */

int resp_ll(struct kv_slice s, long long *v)
{
	const uint8_t *p = s.p, *end = s.p + s.n;
	uint64_t u = 0, lim = (uint64_t)INT64_MAX;
	int neg = 0;

	if (s.n == 1 && p[0] == '0') {
		*v = 0;
		return 0;
	}
	if (p < end && *p == '-') {
		neg = 1;
		lim++; /* |INT64_MIN| */
		p++;
	}
	if (p == end || *p < '1' || *p > '9' || end - p > 19)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || u > (lim - (*p - '0')) / 10)
			return -1;
		u = u * 10 + (uint64_t)(*p - '0');
	}
	*v = neg ? (long long)(0 - u) : (long long)u;
	return 0;
}

int resp_eq(struct kv_slice s, const char *lower)
{
	size_t i;

	for (i = 0; i < s.n && lower[i]; i++) {
		uint8_t ch = s.p[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (uint8_t)(ch + 32);
		if (ch != (uint8_t)lower[i])
			return 0;
	}
	return i == s.n && lower[i] == '\0';
}

int resp_key_ok(const struct kvd_conn *c, struct kv_slice k)
{
	return k.n >= 1 && k.n <= c->io->srv->cfg->max_key;
}

/* Append at most max bytes of s to buf (NUL-terminated, size cap). */
static void err_cat(char *buf, size_t cap, const void *s, size_t n, size_t max)
{
	size_t len = strlen(buf);

	if (n > max)
		n = max;
	if (n > cap - 1 - len)
		n = cap - 1 - len;
	memcpy(buf + len, s, n);
	buf[len + n] = '\0';
}

const char *resp_arity_error(struct resp_req *r, const char *name)
{
	snprintf(r->err, sizeof(r->err),
		 "ERR wrong number of arguments for '%s' command", name);
	return r->err;
}

const char *resp_subcmd_error(struct resp_req *r, const char *cmd)
{
	r->err[0] = '\0';
	err_cat(r->err, sizeof(r->err), "ERR unknown subcommand '", 24, 24);
	err_cat(r->err, sizeof(r->err), r->a[1].p, r->a[1].n, 128);
	err_cat(r->err, sizeof(r->err), "'. Try ", 7, 7);
	err_cat(r->err, sizeof(r->err), cmd, strlen(cmd), 32);
	err_cat(r->err, sizeof(r->err), " HELP.", 6, 6);
	return r->err;
}

/* The subcommands kvd has of its commands that have them, with Redis's
 * arity (command and subcommand counted; negative: at least that many).
 * SETINFO and NO-TOUCH are Redis 7.2's; the rest are Redis 7.0's. */
static const struct {
	uint16_t cmd;
	int8_t arity;
	const char *name;
} subcmds[] = {
    {RESP_CMD_CLIENT, 2, "id"},	       {RESP_CMD_CLIENT, 2, "getname"},
    {RESP_CMD_CLIENT, 3, "setname"},   {RESP_CMD_CLIENT, 4, "setinfo"},
    {RESP_CMD_CLIENT, -2, "list"},     {RESP_CMD_CLIENT, 2, "info"},
    {RESP_CMD_CLIENT, -3, "kill"},     {RESP_CMD_CLIENT, 3, "no-evict"},
    {RESP_CMD_CLIENT, 3, "no-touch"},  {RESP_CMD_CLIENT, 2, "help"},
    {RESP_CMD_CLIENT, 3, "reply"},     {RESP_CMD_COMMAND, 2, "count"},
    {RESP_CMD_COMMAND, -2, "list"},    {RESP_CMD_COMMAND, -2, "info"},
    {RESP_CMD_COMMAND, -2, "docs"},    {RESP_CMD_COMMAND, 2, "help"},
    {RESP_CMD_CONFIG, -3, "get"},      {RESP_CMD_CONFIG, -4, "set"},
    {RESP_CMD_CONFIG, 2, "resetstat"}, {RESP_CMD_CONFIG, 2, "rewrite"},
    {RESP_CMD_CONFIG, 2, "help"},      {RESP_CMD_LATENCY, 2, "doctor"},
    {RESP_CMD_LATENCY, 2, "latest"},   {RESP_CMD_LATENCY, 3, "history"},
    {RESP_CMD_LATENCY, -2, "reset"},   {RESP_CMD_LATENCY, 2, "help"},
    {RESP_CMD_OBJECT, 3, "encoding"},  {RESP_CMD_OBJECT, 3, "freq"},
    {RESP_CMD_OBJECT, 3, "idletime"},  {RESP_CMD_OBJECT, 3, "refcount"},
    {RESP_CMD_OBJECT, 2, "help"},      {RESP_CMD_PUBSUB, -2, "channels"},
    {RESP_CMD_PUBSUB, -2, "numsub"},   {RESP_CMD_PUBSUB, 2, "numpat"},
    {RESP_CMD_PUBSUB, 2, "help"},      {RESP_CMD_SLOWLOG, -2, "get"},
    {RESP_CMD_SLOWLOG, 2, "len"},      {RESP_CMD_SLOWLOG, 2, "reset"},
    {RESP_CMD_SLOWLOG, 2, "help"},
};

/* Redis 7.0 looks a subcommand up as it looks a command up: an unknown one,
 * or one with the wrong argument count, is refused before the command runs
 * or MULTI queues it (and EXEC then aborts).  What the subcommand's
 * arguments mean is its handler's to check, when it runs. */
static const char *subcmd_check(struct resp_req *r)
{
	char name[48], upper[24];
	int container = 0;

	if (r->argc < 2) /* the command's own arity was checked */
		return NULL;
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++) {
		int n = subcmds[i].arity;

		if (subcmds[i].cmd != r->cmd)
			continue;
		container = 1;
		if (!resp_eq(r->a[1], subcmds[i].name))
			continue;
		if ((n > 0 && r->argc == (uint32_t)n) ||
		    (n < 0 && r->argc >= (uint32_t)-n))
			return NULL;
		snprintf(name, sizeof(name), "%s|%s", resp_cmds[r->cmd].name,
			 subcmds[i].name);
		return resp_arity_error(r, name);
	}
	if (!container)
		return NULL;
	snprintf(upper, sizeof(upper), "%s", resp_cmds[r->cmd].name);
	for (char *p = upper; *p; p++)
		*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	return resp_subcmd_error(r, upper);
}

/* Redis's words: the name and up to 128 bytes of quoted arguments. */
static const char *unknown_error(struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice a;
	size_t cap = sizeof(r->err), start;

	r->err[0] = '\0';
	err_cat(r->err, cap, "ERR unknown command '", 21, 21);
	err_cat(r->err, cap, r->a[0].p, r->a[0].n, 128);
	err_cat(r->err, cap, "', with args beginning with: ", 29, 29);
	start = strlen(r->err);
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		size_t used = strlen(r->err) - start;

		if (used >= 128)
			break;
		resp_it_next(&it, &a);
		err_cat(r->err, cap, "'", 1, 1);
		err_cat(r->err, cap, a.p, a.n, 128 - used);
		err_cat(r->err, cap, "' ", 2, 2);
	}
	return r->err;
}

/* ===================== Argument walks ===================== */

/* A validated "$<len>\r\n<data>\r\n"; returns what follows it. */
static const uint8_t *bulk_at(const uint8_t *p, struct kv_slice *arg)
{
	size_t n = 0;

	for (p++; *p != '\r'; p++)
		n = n * 10 + (size_t)(*p - '0');
	arg->p = p + 2;
	arg->n = n;
	return p + 2 + n + 2;
}

/* Inline arguments are packed as [u32 len][bytes]. */
static const uint8_t *packed_at(const uint8_t *p, struct kv_slice *arg)
{
	uint32_t n;

	memcpy(&n, p, 4);
	arg->p = p + 4;
	arg->n = n;
	return p + 4 + n;
}

void resp_it_next(struct resp_it *it, struct kv_slice *arg)
{
	it->p = it->packed ? packed_at(it->p, arg) : bulk_at(it->p, arg);
}

void resp_it_init(const struct resp_req *r, uint32_t from, struct resp_it *it)
{
	struct kv_slice skip;

	it->p = r->body;
	it->packed = r->packed;
	if (from > r->argc) /* skip no further than the request goes */
		from = r->argc;
	while (from--)
		resp_it_next(it, &skip);
}

void resp_req_fill(struct resp_req *r)
{
	struct resp_it it;

	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc && i < RESP_FIXED_ARGS; i++)
		resp_it_next(&it, &r->a[i]);
	for (uint32_t i = r->argc; i < RESP_FIXED_ARGS; i++)
		r->a[i].n = 0, r->a[i].p = NULL;
}

/* ===================== Multibulk ===================== */

enum { PARSE_MORE = 0, PARSE_ERR = -1 };

/* "<number>\r\n" at p: 1 with *v and *len (CRLF included), PARSE_MORE, or
 * PARSE_ERR: -2 when the line is too long, -1 when it is not a number. */
static int num_line(const uint8_t *p, size_t n, long long *v, size_t *len)
{
	size_t lim = n < NUM_LINE_MAX ? n : NUM_LINE_MAX;
	const uint8_t *cr = memchr(p, '\r', lim);
	struct kv_slice s;

	if (!cr)
		return n >= NUM_LINE_MAX ? -2 : PARSE_MORE;
	if ((size_t)(cr - p) + 1 >= n)
		return PARSE_MORE;
	s.p = p;
	s.n = (size_t)(cr - p);
	if (cr[1] != '\n' || resp_ll(s, v))
		return -1;
	*len = s.n + 2;
	return 1;
}

/* Validate bulks from c->resp_mb.off on: PARSE_MORE, PARSE_ERR (message
 * in r->err), or 1 once every declared bulk is in. */
static int mb_bulks(struct kvd_conn *c, const uint8_t *p, size_t n,
		    struct resp_req *r)
{
	/* Before AUTH, Redis's own small caps (CVE-2021-32675). */
	uint64_t max = kvd_auth_pending(c) ? KVD_PREAUTH_MAX_BULK
					   : c->io->srv->cfg->max_frame;
	long long len;
	size_t hl;
	int rc;

	while (c->resp_mb.seen < c->resp_mb.argc) {
		const uint8_t *q = p + c->resp_mb.off;
		size_t left = n - c->resp_mb.off;
		uint64_t end;

		if (left == 0)
			return PARSE_MORE;
		if (*q != '$') {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: expected '$', got '%c'",
				 *q);
			return PARSE_ERR;
		}
		rc = num_line(q + 1, left - 1, &len, &hl);
		if (rc == PARSE_MORE)
			return PARSE_MORE;
		if (rc < 0 || len < 0 || (uint64_t)len > max) {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: %s",
				 rc == -2 ? "too big bulk count string"
					  : "invalid bulk length");
			return PARSE_ERR;
		}
		end = c->resp_mb.off + 1 + hl + (uint64_t)len + 2;
		if (end > max) {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: request larger than "
				 "max-frame-size (%llu bytes)",
				 (unsigned long long)max);
			return PARSE_ERR;
		}
		if (end > n)
			return PARSE_MORE;
		if (p[end - 2] != '\r' || p[end - 1] != '\n') {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: bulk longer than its "
				 "declared length %lld",
				 len);
			return PARSE_ERR;
		}
		c->resp_mb.off = (uint32_t)end;
		c->resp_mb.seen++;
	}
	return 1;
}

/* A whole multibulk request at p: its length, PARSE_MORE or PARSE_ERR.
 * An empty or negative count is a request of no arguments (argc 0). */
static long mb_parse(struct kvd_conn *c, const uint8_t *p, size_t n,
		     struct resp_req *r)
{
	long long count;
	size_t hl;
	int rc;

	if (c->resp_mb.off == 0) {
		rc = num_line(p + 1, n - 1, &count, &hl);
		if (rc == PARSE_MORE)
			return PARSE_MORE;
		if (rc == 1 && count > (long long)KVD_PREAUTH_MAX_ARGS &&
		    kvd_auth_pending(c)) {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: unauthenticated "
				 "multibulk length");
			return PARSE_ERR;
		}
		if (rc < 0 || count > (long long)RESP_MAX_ARGS) {
			snprintf(r->err, sizeof(r->err),
				 "ERR Protocol error: %s",
				 rc == -2 ? "too big mbulk count string"
					  : "invalid multibulk length");
			return PARSE_ERR;
		}
		if (count <= 0) {
			r->argc = 0;
			return (long)(1 + hl);
		}
		c->resp_mb.off = (uint32_t)(1 + hl);
		c->resp_mb.argc = (uint32_t)count;
		c->resp_mb.seen = 0;
		c->resp_mb.body = c->resp_mb.off;
	}
	rc = mb_bulks(c, p, n, r);
	if (rc <= 0)
		return rc;
	r->argc = c->resp_mb.argc;
	r->body = p + c->resp_mb.body;
	r->packed = 0;
	resp_req_fill(r);
	return (long)c->resp_mb.off;
}

/* ===================== Inline ===================== */

static int hexval(uint8_t ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

static int is_space(uint8_t ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
	       ch == '\v' || ch == '\f';
}

/* One character of a double-quoted token at *pp; the escapes Redis knows. */
static uint8_t dq_char(const uint8_t **pp, const uint8_t *end)
{
	const uint8_t *p = *pp;

	if (p[0] == '\\' && end - p >= 4 && p[1] == 'x' && hexval(p[2]) >= 0 &&
	    hexval(p[3]) >= 0) {
		*pp = p + 4;
		return (uint8_t)(hexval(p[2]) * 16 + hexval(p[3]));
	}
	if (p[0] == '\\' && end - p >= 2) {
		*pp = p + 2;
		switch (p[1]) {
		case 'n': return '\n';
		case 'r': return '\r';
		case 't': return '\t';
		case 'b': return '\b';
		case 'a': return '\a';
		default: return p[1];
		}
	}
	*pp = p + 1;
	return p[0];
}

/* One token of sdssplitargs at *pp, unescaped to out; its length, or -1
 * for unbalanced quotes.  Quotes may open mid-token, as in Redis; a closing
 * quote must be followed by a space or the end. */
static long split_token(const uint8_t **pp, const uint8_t *end, uint8_t *out)
{
	const uint8_t *p = *pp;
	long n = 0;
	int inq = 0, insq = 0;

	while (p < end) {
		if (inq) {
			if (*p == '"') {
				if (p + 1 < end && !is_space(p[1]))
					return -1;
				inq = 0;
				p++;
				break;
			}
			out[n++] = dq_char(&p, end);
		} else if (insq) {
			if (p[0] == '\\' && p + 1 < end && p[1] == '\'') {
				out[n++] = '\'';
				p += 2;
			} else if (*p == '\'') {
				if (p + 1 < end && !is_space(p[1]))
					return -1;
				insq = 0;
				p++;
				break;
			} else {
				out[n++] = *p++;
			}
		} else if (is_space(*p)) {
			break;
		} else if (*p == '"' || *p == '\'') {
			inq = *p == '"';
			insq = *p == '\'';
			p++;
		} else {
			out[n++] = *p++;
		}
	}
	if (inq || insq)
		return -1;
	*pp = p;
	return n;
}

/* Split a line into packed arguments in buf; -1 on unbalanced quotes. */
static int split_line(const uint8_t *p, const uint8_t *end, uint8_t *buf,
		      struct resp_req *r)
{
	uint8_t *o = buf;

	r->argc = 0;
	for (;;) {
		uint32_t len;
		long tn;

		while (p < end && is_space(*p))
			p++;
		if (p == end)
			break;
		tn = split_token(&p, end, o + 4);
		if (tn < 0)
			return -1;
		len = (uint32_t)tn;
		memcpy(o, &len, 4);
		o += 4 + len;
		r->argc++;
	}
	r->body = buf;
	r->packed = 1;
	resp_req_fill(r);
	return 0;
}

/* ===================== Dispatch ===================== */

/* Command names, hashed: every request looks its name up, and a walk over
 * the whole table with strcmp was a few percent of an io thread's time
 * under redis-benchmark.  Built once (open addressing, at most a quarter
 * full), read-only after. */
#define CMD_SLOTS 1024
static int16_t cmd_slot[CMD_SLOTS]; /* index + 1, 0 empty */
static pthread_once_t cmd_once = PTHREAD_ONCE_INIT;

static uint32_t cmd_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static void cmd_index(void)
{
	_Static_assert(4 * RESP_NCMDS <= CMD_SLOTS, "command hash too full");
	for (int i = 0; i < RESP_NCMDS; i++) {
		const char *n = resp_cmds[i].name;
		uint32_t j = cmd_hash(n, strlen(n)) & (CMD_SLOTS - 1);

		while (cmd_slot[j])
			j = (j + 1) & (CMD_SLOTS - 1);
		cmd_slot[j] = (int16_t)(i + 1);
	}
}

static int find_cmd(struct kv_slice name)
{
	char low[20];
	uint32_t j;

	if (name.n == 0 || name.n >= sizeof(low))
		return -1;
	for (size_t i = 0; i < name.n; i++) {
		uint8_t ch = name.p[i];

		low[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	low[name.n] = '\0';
	pthread_once(&cmd_once, cmd_index);
	for (j = cmd_hash(low, name.n) & (CMD_SLOTS - 1); cmd_slot[j];
	     j = (j + 1) & (CMD_SLOTS - 1))
		if (!strcmp(resp_cmds[cmd_slot[j] - 1].name, low))
			return cmd_slot[j] - 1;
	return -1;
}

/* May a non-write command run while writes are in flight?  Keyless
 * commands may (but QUIT, which would close before their replies); key
 * readers may when no in-flight write can touch their keys (first..last
 * by step, from the command table); whole-keyspace readers never. */
static int reads_free(const struct kvd_conn *c, const struct resp_cmd *d,
		      const struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice k;
	uint32_t last;

	if (r->cmd == RESP_CMD_QUIT || r->cmd == RESP_CMD_MONITOR ||
	    r->cmd == RESP_CMD_SHUTDOWN)
		return 0; /* MONITOR's feed must follow earlier replies */
	if (r->cmd == RESP_CMD_WAIT)
		return 0; /* counts what earlier writes reached replicas */
	if (!(d->flags & RC_READ))
		return 1;
	if (d->first <= 0)
		return 0;
	last = d->last < 0 ? r->argc - 1 : (uint32_t)d->last;
	resp_it_init(r, (uint32_t)d->first, &it);
	for (uint32_t i = (uint32_t)d->first; i <= last && i < r->argc; i++) {
		resp_it_next(&it, &k);
		if ((i - (uint32_t)d->first) % (uint32_t)d->step == 0 &&
		    kvd_conn_key_busy(c, k.p, k.n))
			return 0;
	}
	return 1;
}

/* The request's reply must wait for earlier writes. */
static size_t stall(struct kvd_conn *c)
{
	c->stall = STALL_WRITES;
	return 0;
}

static size_t consumed(struct kvd_conn *c, size_t len)
{
	memset(&c->resp_mb, 0, sizeof(c->resp_mb));
	return len;
}

int resp_excl_req(const struct resp_cmd *d, const struct resp_req *r)
{
	if (d->flags & RC_EXCL)
		return 1;
	/* EXPIRE's NX, XX, GT and LT compare with the key's expiry */
	return r->argc > 3 &&
	       (r->cmd == RESP_CMD_EXPIRE || r->cmd == RESP_CMD_PEXPIRE ||
		r->cmd == RESP_CMD_EXPIREAT || r->cmd == RESP_CMD_PEXPIREAT);
}

/* Answer a request in order: while earlier writes are in flight, a reply
 * that is not a write's waits behind theirs (conn.h). */
static void answer(struct kvd_conn *c, const struct resp_cmd *d,
		   struct resp_req *r, const char *err, unsigned was,
		   size_t mark)
{
	if (err)
		resp_add_error(c, err);
	if (was && (err || !d || !(d->flags & RC_WRITE) ||
		    (resp_excl_req(d, r) && c->out.len > mark)))
		kvd_conn_defer(c, mark, r->cmd);
}

size_t kvd_resp_run(struct kvd_conn *c, struct resp_req *r, size_t room)
{
	const struct resp_cmd *d = &resp_cmds[r->cmd];
	unsigned was = c->npend;
	size_t mark = c->out.len, n;
	uint64_t t0 = kvd_resp_pre(c, r);
	const char *err = d->fn(c, r);

	if (!err && c->out.len > mark && c->out.len - mark > room) {
		c->out.len = mark;
		err = "ERR EXEC reply would exceed max-output: this command's "
		      "reply is dropped (it ran)";
	}
	kvd_resp_post(c, r, t0, err ? KVD_RESP_FAILED : KVD_RESP_RAN);
	n = err ? strlen(err) + 3 : c->out.len > mark ? c->out.len - mark : 0;
	answer(c, d, r, err, was, mark);
	return n;
}

/* A command that reads keys never sees an EXEC half applied across
 * shards: if one ran meanwhile, its reply is dropped and it runs again
 * (a relaxed look before and after: EXECs are rare).  Its own EXEC and
 * WATCH are exclusive sections themselves. */
static const char *run_read(struct kvd_conn *c, const struct resp_cmd *d,
			    struct resp_req *r)
{
	size_t mark = c->out.len;
	const char *err;
	unsigned seq;

	if (!(d->flags & RC_READ) || r->cmd == RESP_CMD_EXEC ||
	    r->cmd == RESP_CMD_WATCH)
		return d->fn(c, r);
	for (;;) {
		seq = kvd_excl_seq();
		/* one view of each shard: a batch's records all or none */
		kvd_reader_pin(c->io->reader);
		err = d->fn(c, r);
		kvd_reader_unpin(c->io->reader);
		if (!kvd_excl_moved(seq) || c->out.len < mark)
			return err;
		c->out.len = mark;
	}
}

/* Inside MULTI every command but these is queued. */
static int multi_runs(int id)
{
	return id == RESP_CMD_EXEC || id == RESP_CMD_DISCARD ||
	       id == RESP_CMD_MULTI || id == RESP_CMD_WATCH ||
	       id == RESP_CMD_QUIT;
}

/* After MULTI: queue the request, or refuse it (EXEC then aborts). */
static size_t multi_queue(struct kvd_conn *c, struct resp_req *r,
			  const char *err, size_t len)
{
	unsigned was = c->npend;
	size_t mark = c->out.len;

	if (!err)
		err = kvd_resp_multi_queue(c, r);
	if (err)
		kvd_resp_multi_refuse(c);
	else
		resp_add_status(c, "QUEUED");
	answer(c, NULL, r, err, was, mark);
	kvd_count(&c->io->stats.resp_calls, 1);
	return consumed(c, len);
}

/* As Redis: an EXEC refused (arity, access) ends any transaction, and
 * says so. */
static const char *exec_refused(struct kvd_conn *c, struct resp_req *r,
				const char *err)
{
	char why[sizeof(r->err)];

	snprintf(why, sizeof(why), "%s",
		 strncmp(err, "ERR ", 4) ? err : err + 4);
	snprintf(r->err, sizeof(r->err),
		 "EXECABORT Transaction discarded because of: %.400s", why);
	kvd_resp_multi_free(c);
	return r->err;
}

/* A replica takes no write, and min-replicas-to-ack with too few good
 * replicas refuses them: Redis's words for both. */
static const char *write_refusal(void)
{
	switch (kvd_repl_write_ok()) {
	case KV_REPLICA_READ_ONLY:
		return "READONLY You can't write against a read only replica.";
	case KV_NO_REPLICAS:
		return "NOREPLICAS Not enough good replicas to write.";
	default: return NULL;
	}
}

/* Run one parsed request of len bytes: len once answered or queued, 0 when
 * it has to wait. */
static size_t run_request(struct kvd_conn *c, struct resp_req *r, size_t len)
{
	const struct resp_cmd *d = NULL;
	const char *err = NULL;
	unsigned was = c->npend;
	size_t mark = c->out.len;
	uint64_t t0;
	int id;

	if (r->argc == 0)
		return consumed(c, len); /* Redis ignores empty requests */
	id = find_cmd(r->a[0]);
	/* The first lines of an HTTP request (a browser made to POST to this
	 * port): close before its body's lines run as commands. */
	if (id < 0 && (resp_eq(r->a[0], "post") || resp_eq(r->a[0], "host:"))) {
		kvd_auth_http_refuse(c, "an HTTP request on the RESP port");
		return consumed(c, len);
	}
	if (kvd_auth_pending(c) && id != RESP_CMD_AUTH &&
	    id != RESP_CMD_HELLO && id != RESP_CMD_QUIT) {
		err = "NOAUTH Authentication required.";
	} else if (id < 0) {
		err = unknown_error(r);
	} else {
		d = &resp_cmds[id];
		r->cmd = (uint16_t)id;
		if ((d->arity > 0 && r->argc != (uint32_t)d->arity) ||
		    (d->arity < 0 && r->argc < (uint32_t)-d->arity))
			err = resp_arity_error(r, d->name);
		else if ((err = subcmd_check(r)))
			; /* a subcommand's refusal, before MULTI queues it */
		else if (kvd_auth_resp_disabled((unsigned)id))
			err = "ERR this command is disabled by the server's "
			      "configuration (disable-commands)";
		else if ((d->flags & RC_NOMULTI) && kvd_resp_in_multi(c))
			err = "ERR Command not allowed inside a transaction";
		else if ((d->flags & RC_WRITE) && c->io->srv->cfg->read_only)
			err = "READONLY You can't write against a read only "
			      "server.";
		else if ((d->flags & RC_WRITE) && write_refusal())
			err = write_refusal();
		else if (c->psub) /* has subscribed (resp_pubsub.c) */
			err = kvd_resp_pubsub_gate(c, r);
	}
	if (err && id == RESP_CMD_EXEC && !kvd_auth_pending(c))
		err = exec_refused(c, r, err);
	else if (kvd_resp_in_multi(c) && (err || !multi_runs(id)))
		return multi_queue(c, r, err, len);
	/* Everything but a write answers at once: while earlier writes are
	 * in flight, its reply waits behind theirs (conn.h), and a read that
	 * one of them may touch waits for them to commit. */
	if (was && !err && !(d->flags & RC_WRITE) && !reads_free(c, d, r))
		return stall(c);
	if (was && !err && resp_excl_req(d, r))
		return stall(c);
	if (!err) {
		t0 = kvd_resp_pre(c, r);
		err = run_read(c, d, r);
		kvd_resp_post(c, r, t0, err ? KVD_RESP_FAILED : KVD_RESP_RAN);
	} else if (d) {
		kvd_resp_post(c, r, 0, KVD_RESP_REJECTED);
	}
	answer(c, d, r, err, was, mark);
	kvd_count(&c->io->stats.resp_calls, 1);
	return consumed(c, len);
}

/* Pub/sub confirmations are pushes, which Redis 7.0 sends whatever
 * CLIENT REPLY says. */
static int is_push(const struct resp_req *r)
{
	return r->argc && (resp_eq(r->a[0], "subscribe") ||
			   resp_eq(r->a[0], "psubscribe") ||
			   resp_eq(r->a[0], "unsubscribe") ||
			   resp_eq(r->a[0], "punsubscribe"));
}

/* Take back the reply of the request just run: its bytes still in the
 * output, and its pends (a write's, or bytes held behind earlier
 * writes), which are then counted but not sent. */
static void mute(struct kvd_conn *c, size_t mark, struct kvd_pend *last)
{
	c->out.len = mark;
	for (struct kvd_pend *pd = last ? last->next : c->pend_head; pd;
	     pd = pd->next)
		pd->aux |= KVD_PEND_MUTE;
}

/* run_request, with CLIENT REPLY's rules, as Redis's: no reply while OFF,
 * none to a request made after SKIP; the state moves on once a request
 * is done, whatever its outcome (resetClient). */
static void reply_next(struct kvd_conn *c)
{
	uint32_t st = c->resp_state & ~(uint32_t)RESP_REPLY_SKIP;

	if (st & RESP_REPLY_SKIP_NEXT)
		st = (st & ~(uint32_t)RESP_REPLY_SKIP_NEXT) | RESP_REPLY_SKIP;
	c->resp_state = st;
}

static size_t exec(struct kvd_conn *c, struct resp_req *r, size_t len)
{
	struct kvd_pend *last;
	size_t mark, n;

	if (!c->resp_state) {
		n = run_request(c, r, len);
		if (n && c->resp_state) /* CLIENT REPLY OFF or SKIP ran */
			reply_next(c);
		return n;
	}
	if (c->psub) /* messages published before it are not its reply */
		kvd_resp_pubsub_drain(c);
	mark = c->out.len;
	last = c->pend_tail;
	n = run_request(c, r, len);
	if (!n)
		return 0; /* it runs again once earlier writes are in */
	if ((c->resp_state & (RESP_REPLY_OFF | RESP_REPLY_SKIP)) && !is_push(r))
		mute(c, mark, last);
	reply_next(c);
	return n;
}

static size_t protocol_error(struct kvd_conn *c, const char *msg, size_t n)
{
	if (c->npend)
		return stall(c);
	resp_add_error(c, msg);
	c->flags |= CONN_CLOSING;
	return consumed(c, n);
}

/* Inline requests: rare (telnet), so the unescaping buffer lives on the
 * stack of this function only.  A token of k source bytes packs into at
 * most k + 4, and every token but the last is followed by a separator, so
 * the packed form of a line of m bytes fits in 3m + 4.  Before AUTH a line
 * may be only RESP_PREAUTH_INLINE_MAX long (AUTH and HELLO fit easily), so
 * an unauthenticated peer cannot hold 64 KiB per connection. */
static size_t inline_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	uint8_t buf[3 * RESP_INLINE_MAX + 4];
	size_t max =
	    kvd_auth_pending(c) ? RESP_PREAUTH_INLINE_MAX : RESP_INLINE_MAX;
	const uint8_t *nl = memchr(p, '\n', n < max ? n : max);
	const uint8_t *end;
	struct resp_req r;

	if (!nl) {
		if (n < max)
			return 0;
		return protocol_error(
		    c, "ERR Protocol error: too big inline request", n);
	}
	end = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
	if (split_line(p, end, buf, &r))
		return protocol_error(
		    c, "ERR Protocol error: unbalanced quotes in request", n);
	return exec(c, &r, (size_t)(nl - p) + 1);
}

size_t kvd_resp_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	struct resp_req r;
	long len;

	if (p[0] != '*')
		return inline_input(c, p, n);
	len = mb_parse(c, p, n, &r);
	if (len == PARSE_MORE)
		return 0;
	if (len == PARSE_ERR)
		return protocol_error(c, r.err, n);
	return exec(c, &r, (size_t)len);
}
