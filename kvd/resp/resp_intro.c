/* resp_intro.c - RESP introspection across io threads: CLIENT LIST, INFO and
 * KILL, MONITOR, SLOWLOG, and the per-command counters of INFO
 * commandstats.
 *
 * Connections live on the io thread that accepted them, and only that
 * thread may touch their buffers or close them.  So every RESP connection
 * is also linked in one registry, under one mutex, taken when a connection
 * opens or closes (loop.c calls in), and by the rare commands that look at
 * other connections.  Under it a connection cannot be freed, and the fields
 * others read are either fixed at open (id, addresses), written under the
 * same mutex (the name, the monitor's feed) or relaxed atomics (last
 * command and its time, the kill request).
 *
 * CLIENT KILL of another thread's connection sets its kill flag, marks its
 * thread as having work here, and wakes it (its eventfd); that thread
 * closes it in kvd_resp_io_wake.  MONITOR works the same way: a command on
 * any thread formats its line once and appends it to each monitor's feed
 * buffer under the mutex (only while a monitor exists: one relaxed load
 * otherwise), waking the monitor's thread when its feed was empty; that
 * thread moves the feed into the connection's output.  A feed is held to
 * MON_FEED_MAX bytes and is moved only while the connection has less than
 * MON_OUT_MAX unsent: a monitor too slow to keep up is closed, so a monitor
 * never grows memory.
 *
 * Commandstats are single-writer counters per io thread, summed by INFO.
 * The slow log is a ring under its own mutex, taken only by commands at
 * least slowlog-log-slower-than microseconds long.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "kv_buf.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp.h"
#include "ops/stats.h"
#include "store.h"

#define MAX_IO 256		/* the threads option's range */
#define MON_FEED_MAX (1u << 20) /* unsent feed per monitor */
#define MON_OUT_MAX (4u << 20)	/* its unsent output */
#define SLOWLOG_ARGS 32		/* SLOWLOG_ENTRY_MAX_ARGC */
#define SLOWLOG_ARGLEN 128	/* SLOWLOG_ENTRY_MAX_STRING */

struct resp_monitor {
	struct kv_buf feed; /* lines not yet moved to the output */
	int over;	    /* the feed outgrew MON_FEED_MAX */
	int held;	    /* not moved for unsent output: wake on each line */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvd_conn *reg_head;
static atomic_uint nmonitors;
/* Per io thread: a connection of it was killed or has a feed to move. */
static atomic_uint io_work[MAX_IO];

struct cmdstat {
	kvd_counter calls, usec, failed, rejected;
};
static struct cmdstat cstats[MAX_IO][RESP_NCMDS];
/* The CLIENT subcommand being answered, for its own CLIENT LIST line. */
static _Thread_local const char *cur_sub;
/* The caller's own request's argument bytes, for its CLIENT LIST line
 * (Redis's argv-mem). */
static _Thread_local size_t cur_argv;

/* ===================== Registry ===================== */

static void fmt_addr(const struct kvd_conn *c,
		     const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_UNIX) {
		/* as Redis: the listening socket's path and port 0, for both
		 * ends (a client's end has no name) */
		snprintf(buf, cap, "%s:0", c->io->srv->cfg->resp_unix_socket);
		return;
	}
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	}
	snprintf(buf, cap, "%s:%u", host, port);
}

/* Came c through the RESP Unix socket?  (Its addr is "path:0".) */
static int is_unix(const struct kvd_conn *c)
{
	const char *path = c->io->srv->cfg->resp_unix_socket;
	size_t n = strlen(path);

	return n && !strncmp(c->addr, path, n) && !strcmp(c->addr + n, ":0");
}

void kvd_resp_conn_open(struct kvd_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	if (getpeername(c->fd, (struct sockaddr *)&ss, &len) == 0)
		fmt_addr(c, &ss, c->addr, sizeof(c->addr));
	len = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (getsockname(c->fd, (struct sockaddr *)&ss, &len) == 0)
		fmt_addr(c, &ss, c->laddr, sizeof(c->laddr));
	c->born_ms = c->io->now_ms;
	atomic_store_explicit(&c->act_ms, c->io->now_ms, memory_order_relaxed);
	pthread_mutex_lock(&reg_lock);
	c->reg_prev = NULL;
	c->reg_next = reg_head;
	if (reg_head)
		reg_head->reg_prev = c;
	reg_head = c;
	pthread_mutex_unlock(&reg_lock);
}

void kvd_resp_conn_close(struct kvd_conn *c)
{
	kvd_resp_multi_free(c);
	kvd_resp_pubsub_close(c);
	pthread_mutex_lock(&reg_lock);
	if (c->reg_prev)
		c->reg_prev->reg_next = c->reg_next;
	else if (reg_head == c)
		reg_head = c->reg_next;
	if (c->reg_next)
		c->reg_next->reg_prev = c->reg_prev;
	c->reg_prev = c->reg_next = NULL;
	if (c->mon) {
		kv_buf_free(&c->mon->feed);
		free(c->mon);
		c->mon = NULL;
		atomic_fetch_sub(&nmonitors, 1);
	}
	pthread_mutex_unlock(&reg_lock);
}

void kvd_resp_set_name(struct kvd_conn *c, const void *p, size_t n)
{
	pthread_mutex_lock(&reg_lock);
	memcpy(c->name, p, n);
	c->name[n] = '\0';
	pthread_mutex_unlock(&reg_lock);
}

/* Tell c's io thread it has work here (reg_lock held or not). */
static void wake(struct kvd_io *io)
{
	uint64_t one = 1;

	if (io->idx < MAX_IO)
		atomic_store(&io_work[io->idx], 1);
	if (write(io->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("io %u: cannot wake it: %s", io->idx, strerror(errno));
}

/* Move c's feed into its output if it has room; reg_lock held. */
static void drain(struct kvd_conn *c)
{
	struct resp_monitor *m = c->mon;
	size_t unsent = c->out.len + (c->tx.len - c->tx_off);

	if (m->over) {
		atomic_store(&c->kill, 1);
		return;
	}
	m->held = m->feed.len && unsent >= MON_OUT_MAX;
	if (!m->feed.len || m->held)
		return;
	resp_add_raw(c, m->feed.data, m->feed.len);
	m->feed.len = 0;
	kv_buf_trim(&m->feed, 64u << 10);
	kvd_io_mark(c);
}

/* The io thread io was woken: close its killed connections, move its
 * monitors' feeds.  One relaxed load when there is nothing to do. */
void kvd_resp_io_wake(struct kvd_io *io)
{
	kvd_resp_pubsub_wake(io); /* subscribers' messages (resp_pubsub.c) */
	if (io->idx >= MAX_IO ||
	    !atomic_load_explicit(&io_work[io->idx], memory_order_relaxed) ||
	    !atomic_exchange(&io_work[io->idx], 0))
		return;
	pthread_mutex_lock(&reg_lock);
	for (struct kvd_conn *c = reg_head; c; c = c->reg_next) {
		if (c->io != io)
			continue;
		if (c->mon)
			drain(c);
		if (atomic_load_explicit(&c->kill, memory_order_relaxed)) {
			c->flags |= CONN_ABORT;
			kvd_io_mark(c);
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

/* ===================== MONITOR ===================== */

/* sdscatrepr: a quoted string with C escapes. */
static void repr(struct kv_buf *b, struct kv_slice s)
{
	static const char hex[] = "0123456789abcdef";

	kv_buf_append(b, "\"", 1);
	for (size_t i = 0; i < s.n; i++) {
		uint8_t ch = s.p[i];
		char e[4] = {'\\', 0, 0, 0};
		size_t n = 2;

		switch (ch) {
		case '\\': e[1] = '\\'; break;
		case '"': e[1] = '"'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		case '\a': e[1] = 'a'; break;
		case '\b': e[1] = 'b'; break;
		default:
			if (ch >= 0x20 && ch < 0x7f) {
				e[0] = (char)ch;
				n = 1;
			} else {
				e[1] = 'x';
				e[2] = hex[ch >> 4];
				e[3] = hex[ch & 15];
				n = 4;
			}
		}
		kv_buf_append(b, e, n);
	}
	kv_buf_append(b, "\"", 1);
}

/* One monitor line for r, as Redis writes it. */
static void monitor_line(struct kvd_conn *c, struct resp_req *r,
			 struct kv_buf *b)
{
	struct timespec ts;
	struct resp_it it;
	struct kv_slice a;
	char head[64 + sizeof(c->addr)];
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	/* as Redis: "[0 unix:path]" for a Unix socket's client */
	n = snprintf(head, sizeof(head), "+%lld.%06ld [0 %s%s] ",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000,
		     is_unix(c) ? "unix:" : "",
		     is_unix(c) ? c->io->srv->cfg->resp_unix_socket : c->addr);
	kv_buf_append(b, head,
		      n > 0 && (size_t)n < sizeof(head) ? (size_t)n
							: strlen(head));
	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		resp_it_next(&it, &a);
		if (i)
			kv_buf_append(b, " ", 1);
		repr(b, a);
	}
	kv_buf_append(b, "\r\n", 2);
}

static void monitor_feed(struct kvd_conn *c, struct resp_req *r)
{
	const struct resp_cmd *d = &resp_cmds[r->cmd];
	struct kv_buf line = {0};

	/* Redis shows neither admin commands nor passwords. */
	if ((d->flags & RC_ADMIN) || r->cmd == RESP_CMD_AUTH ||
	    r->cmd == RESP_CMD_HELLO)
		return;
	monitor_line(c, r, &line);
	pthread_mutex_lock(&reg_lock);
	for (struct kvd_conn *m = reg_head; m && line.len; m = m->reg_next) {
		struct resp_monitor *mon = m->mon;
		int was_empty;

		if (!mon || mon->over)
			continue;
		was_empty = mon->feed.len == 0;
		if (mon->feed.len + line.len > MON_FEED_MAX ||
		    kv_buf_append(&mon->feed, line.data, line.len)) {
			mon->over = 1; /* closed by its thread */
			atomic_store(&m->kill, 1);
			wake(m->io);
		} else if (was_empty || mon->held) {
			wake(m->io);
		}
	}
	pthread_mutex_unlock(&reg_lock);
	kv_buf_free(&line);
}

const char *resp_monitor(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_monitor *m;

	(void)r;
	/* Inside EXEC (its exclusive section) the client expects one reply
	 * per command: Redis 7.0 refuses it there. */
	if (kvd_excl_current())
		return "ERR MONITOR isn't allowed for DENY BLOCKING client";
	if (c->mon) {
		resp_add_ok(c);
		return NULL;
	}
	if (!(m = calloc(1, sizeof(*m))))
		return resp_err_nomem;
	resp_add_ok(c);
	pthread_mutex_lock(&reg_lock);
	c->mon = m;
	atomic_fetch_add(&nmonitors, 1);
	pthread_mutex_unlock(&reg_lock);
	return NULL;
}

/* ===================== SLOWLOG ===================== */

struct slow_entry {
	uint64_t id, time, usec;
	uint32_t argc; /* stored arguments */
	struct kv_slice *argv;
	char addr[112], name[64]; /* addr: as kvd_conn's */
};

static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slow_entry *slow_ring; /* newest at slow_head - 1 */
static size_t slow_cap, slow_len, slow_head;
static uint64_t slow_next_id;

static void slow_free(struct slow_entry *e)
{
	for (uint32_t i = 0; i < e->argc; i++)
		free((void *)e->argv[i].p);
	free(e->argv);
	e->argv = NULL;
	e->argc = 0;
}

/* An argument as the slow log keeps it (slowlogCreateEntry). */
static struct kv_slice slow_arg(struct resp_req *r, struct kv_slice a,
				uint32_t i, uint32_t kept)
{
	struct kv_slice s = {NULL, 0};
	char buf[64];
	size_t n = a.n;
	uint8_t *p;

	if (kept == SLOWLOG_ARGS && i == kept - 1) {
		n = (size_t)snprintf(buf, sizeof(buf),
				     "... (%u more arguments)",
				     r->argc - kept + 1);
		a.p = (const uint8_t *)buf;
		a.n = n;
	} else if (n > SLOWLOG_ARGLEN) {
		n = (size_t)snprintf(buf, sizeof(buf), "... (%zu more bytes)",
				     a.n - SLOWLOG_ARGLEN);
	}
	p = malloc(a.n > SLOWLOG_ARGLEN ? SLOWLOG_ARGLEN + n : a.n + 1);
	if (!p)
		return s;
	if (a.n > SLOWLOG_ARGLEN) {
		memcpy(p, a.p, SLOWLOG_ARGLEN);
		memcpy(p + SLOWLOG_ARGLEN, buf, n);
		s.n = SLOWLOG_ARGLEN + n;
	} else {
		memcpy(p, a.p, a.n);
		s.n = a.n;
	}
	s.p = p;
	return s;
}

static void slow_add(struct kvd_conn *c, struct resp_req *r, uint64_t usec)
{
	size_t cap = KVD_LIVE(c->io->srv->cfg->slowlog_max_len);
	uint32_t kept = r->argc > SLOWLOG_ARGS ? SLOWLOG_ARGS : r->argc;
	struct slow_entry e = {0};
	struct resp_it it;
	struct kv_slice a;

	e.argv = calloc(kept, sizeof(*e.argv));
	if (!e.argv || !cap) {
		free(e.argv);
		return;
	}
	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < kept; i++) {
		resp_it_next(&it, &a);
		e.argv[i] = slow_arg(r, a, i, kept);
		e.argc += e.argv[i].p != NULL;
		if (!e.argv[i].p)
			break;
	}
	e.time = c->io->now_ms / 1000;
	e.usec = usec;
	snprintf(e.addr, sizeof(e.addr), "%s", c->addr);
	pthread_mutex_lock(&reg_lock);
	snprintf(e.name, sizeof(e.name), "%s", c->name);
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_lock(&slow_lock);
	if (cap != slow_cap) { /* first entry, or slowlog-max-len changed */
		struct slow_entry *n = calloc(cap, sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&slow_lock);
			slow_free(&e);
			return;
		}
		for (size_t i = 0; i < slow_len; i++) {
			struct slow_entry *o =
			    &slow_ring[(slow_head + slow_cap - 1 - i) %
				       slow_cap];

			if (i < cap - 1)
				n[cap - 2 - i] = *o; /* keep the newest */
			else
				slow_free(o);
		}
		free(slow_ring);
		slow_ring = n;
		slow_len = slow_len < cap - 1 ? slow_len : cap - 1;
		slow_head = cap - 1;
		slow_cap = cap;
	}
	e.id = slow_next_id++;
	slow_head %= slow_cap;
	if (slow_len == slow_cap)
		slow_free(&slow_ring[slow_head]);
	else
		slow_len++;
	slow_ring[slow_head++] = e;
	pthread_mutex_unlock(&slow_lock);
}

static void slow_get(struct kvd_conn *c, long long count)
{
	size_t n;

	pthread_mutex_lock(&slow_lock);
	n = count < 0 || (size_t)count > slow_len ? slow_len : (size_t)count;
	resp_add_array(c, n);
	for (size_t i = 0; i < n; i++) {
		const struct slow_entry *e =
		    &slow_ring[(slow_head + slow_cap - 1 - i) % slow_cap];

		resp_add_array(c, 6);
		resp_add_int(c, (int64_t)e->id);
		resp_add_int(c, (int64_t)e->time);
		resp_add_int(c, (int64_t)e->usec);
		resp_add_array(c, e->argc);
		for (uint32_t j = 0; j < e->argc; j++)
			resp_add_bulk(c, e->argv[j].p, e->argv[j].n);
		resp_add_cstr(c, e->addr);
		resp_add_cstr(c, e->name);
	}
	pthread_mutex_unlock(&slow_lock);
}

static void slow_reset(void)
{
	pthread_mutex_lock(&slow_lock);
	for (size_t i = 0; i < slow_len; i++)
		slow_free(
		    &slow_ring[(slow_head + slow_cap - 1 - i) % slow_cap]);
	slow_len = 0;
	pthread_mutex_unlock(&slow_lock);
}

const char *resp_slowlog(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GET [<count>]",
	    "    Return top <count> entries from the slowlog (default: 10, -1 "
	    "mean all).",
	    "    Entries are made of:",
	    "    id, timestamp, time in microseconds, arguments array, client "
	    "IP and port,",
	    "    client name",
	    "LEN",
	    "    Return the length of the slowlog.",
	    "RESET",
	    "    Reset the slowlog.",
	    "HELP",
	    "    Prints this help.",
	    NULL};
	struct kv_slice sub = r->a[1];
	long long count = 10;
	size_t n = 0;

	if (resp_eq(sub, "get") && r->argc <= 3) {
		if (r->argc == 3 && (resp_ll(r->a[2], &count) || count < -1))
			return "ERR count should be greater than or equal to "
			       "-1";
		slow_get(c, count);
	} else if (resp_eq(sub, "len") && r->argc == 2) {
		pthread_mutex_lock(&slow_lock);
		resp_add_int(c, (int64_t)slow_len);
		pthread_mutex_unlock(&slow_lock);
	} else if (resp_eq(sub, "reset") && r->argc == 2) {
		slow_reset();
		resp_add_ok(c);
	} else if (resp_eq(sub, "help") && r->argc == 2) {
		while (help[n])
			n++;
		resp_add_array(c, n);
		for (size_t i = 0; i < n; i++)
			resp_add_status(c, help[i]);
	} else if (resp_eq(sub, "get")) { /* more than a count: 7.0's words */
		snprintf(r->err, sizeof(r->err),
			 "ERR unknown subcommand or wrong number of arguments "
			 "for '%.*s'. Try SLOWLOG HELP.",
			 (int)(sub.n > 128 ? 128 : sub.n), (const char *)sub.p);
		return r->err;
	} else if (resp_eq(sub, "len") || resp_eq(sub, "reset") ||
		   resp_eq(sub, "help")) {
		char name[24];

		snprintf(name, sizeof(name), "slowlog|%.*s", (int)sub.n,
			 (const char *)sub.p);
		for (char *p = name; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		return resp_arity_error(r, name);
	} else {
		return resp_subcmd_error(r, "SLOWLOG");
	}
	return NULL;
}

/* ===================== Hooks from the dispatcher ===================== */

uint64_t kvd_resp_pre(struct kvd_conn *c, struct resp_req *r)
{
	atomic_store_explicit(&c->act_ms, c->io->now_ms, memory_order_relaxed);
	atomic_store_explicit(&c->act_cmd, (uint16_t)(r->cmd + 1),
			      memory_order_relaxed);
	if (atomic_load_explicit(&nmonitors, memory_order_relaxed))
		monitor_feed(c, r);
	return kvd_mono_ns();
}

void kvd_resp_post(struct kvd_conn *c, struct resp_req *r, uint64_t t0,
		   int outcome)
{
	struct cmdstat *s;
	uint64_t usec;
	unsigned slower;

	if (c->io->idx >= MAX_IO)
		return;
	s = &cstats[c->io->idx][r->cmd];
	if (outcome == KVD_RESP_REJECTED) {
		kvd_count(&s->rejected, 1);
		return;
	}
	usec = (kvd_mono_ns() - t0) / 1000;
	kvd_count(&s->calls, 1);
	kvd_count(&s->usec, usec);
	if (outcome == KVD_RESP_FAILED)
		kvd_count(&s->failed, 1);
	slower = KVD_LIVE(c->io->srv->cfg->slowlog_slower);
	if (slower != KVD_SLOWLOG_OFF && usec >= slower &&
	    r->cmd != RESP_CMD_AUTH && r->cmd != RESP_CMD_HELLO)
		slow_add(c, r, usec);
}

/* ===================== CLIENT LIST, INFO, KILL ===================== */

/* One CLIENT LIST line for c (reg_lock held, or c is the caller's own). */
static void client_line(struct kvd_conn *self, struct kvd_conn *c,
			struct kv_buf *b)
{
	uint64_t now = self->io->now_ms;
	uint64_t act = atomic_load_explicit(&c->act_ms, memory_order_relaxed);
	unsigned cmd = atomic_load_explicit(&c->act_cmd, memory_order_relaxed);
	char line[512 + 2 * sizeof(c->addr)], cmdname[40], flags[4];
	unsigned subs = atomic_load_explicit(&c->nsubs, memory_order_relaxed);
	unsigned psubs = atomic_load_explicit(&c->npsubs, memory_order_relaxed);
	struct kvd_conn_bufs bf;
	int n, f = 0;

	if (c == self && cur_sub)
		snprintf(cmdname, sizeof(cmdname), "client|%s", cur_sub);
	else
		snprintf(cmdname, sizeof(cmdname), "%s",
			 cmd ? resp_cmds[cmd - 1].name : "NULL");
	if (c->mon) /* Redis's letters, in its order */
		flags[f++] = 'O';
	if (c->proto != KVD_PROTO_RESP) /* a replica's link (repl.c) */
		flags[f++] = 'S';
	if (subs)
		flags[f++] = 'P';
	if (is_unix(c))
		flags[f++] = 'U';
	if (!f)
		flags[f++] = 'N';
	flags[f] = '\0';
	kvd_conn_bufs(self, c, &bf);
	n = snprintf(
	    line, sizeof(line),
	    "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu "
	    "flags=%s db=0 sub=%u psub=%u ssub=0 multi=-1 qbuf=%llu "
	    "qbuf-free=%llu argv-mem=%zu multi-mem=%llu rbs=0 rbp=0 obl=%llu "
	    "oll=%llu omem=%llu tot-mem=%llu events=r cmd=%s user=default "
	    "redir=-1 resp=2\n",
	    (unsigned long long)c->id, c->addr, c->laddr, c->fd, c->name,
	    (unsigned long long)(now > c->born_ms ? now - c->born_ms : 0) /
		1000,
	    (unsigned long long)(now > act ? now - act : 0) / 1000, flags,
	    subs - psubs, psubs, (unsigned long long)bf.qbuf,
	    (unsigned long long)bf.qbuf_free, c == self ? cur_argv : (size_t)0,
	    (unsigned long long)bf.multi_mem, (unsigned long long)bf.obl,
	    (unsigned long long)bf.oll, (unsigned long long)bf.omem,
	    (unsigned long long)(bf.tot_mem + (c == self ? cur_argv : 0)),
	    cmdname);
	kv_buf_append(b, line,
		      n > 0 && (size_t)n < sizeof(line) ? (size_t)n
							: strlen(line));
}

/* What CLIENT LIST and KILL TYPE tell apart.  The registry holds RESP
 * connections and, on a primary, its replicas' links (native connections
 * that asked for the journal: repl.c registers them); a replica's own link
 * to its primary is no connection of the io threads (repl.h). */
enum { KIND_NORMAL = 1, KIND_PUBSUB, KIND_REPLICA, KIND_MASTER };

static int conn_kind(struct kvd_conn *o)
{
	if (o->proto != KVD_PROTO_RESP)
		return KIND_REPLICA;
	return atomic_load_explicit(&o->nsubs, memory_order_relaxed) > 0
		   ? KIND_PUBSUB
		   : KIND_NORMAL;
}

/* Killed by CLIENT KILL on another thread, and not closed by its own yet:
 * gone for CLIENT LIST and KILL, as in Redis, whose CLIENT KILL frees the
 * client at once. */
static int killed(struct kvd_conn *o)
{
	return atomic_load_explicit(&o->kill, memory_order_relaxed);
}

/* The kind a TYPE argument names, or 0. */
static int kind_named(struct kv_slice a)
{
	if (resp_eq(a, "normal"))
		return KIND_NORMAL;
	if (resp_eq(a, "pubsub"))
		return KIND_PUBSUB;
	if (resp_eq(a, "replica") || resp_eq(a, "slave"))
		return KIND_REPLICA;
	return resp_eq(a, "master") ? KIND_MASTER : 0;
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...] */
static const char *client_list(struct kvd_conn *c, struct resp_req *r)
{
	uint64_t ids[64];
	size_t nids = 0, cap = resp_reply_cap(c);
	int over = 0, type = 0; /* type: 0 any, or a KIND_ */
	struct kv_buf b = {0};
	struct resp_it it;
	struct kv_slice a;

	if (r->argc == 4 && resp_eq(r->a[2], "type")) {
		a = r->a[3];
		if (!(type = kind_named(a))) {
			snprintf(r->err, sizeof(r->err),
				 "ERR Unknown client type '%.*s'",
				 (int)(a.n > 64 ? 64 : a.n), (const char *)a.p);
			return r->err;
		}
	} else if (r->argc > 3 && resp_eq(r->a[2], "id")) {
		resp_it_init(r, 3, &it);
		for (uint32_t i = 3; i < r->argc; i++) {
			long long id;

			resp_it_next(&it, &a);
			if (resp_ll(a, &id))
				return "ERR Invalid client ID";
			if (nids < sizeof(ids) / sizeof(ids[0]))
				ids[nids++] = (uint64_t)id;
		}
	} else if (r->argc != 2) {
		return resp_err_syntax;
	}
	if (!nids && (!type || type == KIND_MASTER))
		kvd_resp_repl_link_line(&b); /* flags=M, on a replica */
	pthread_mutex_lock(&reg_lock);
	for (struct kvd_conn *o = reg_head; o && type != KIND_MASTER && !over;
	     o = o->reg_next) {
		int want = !nids;

		for (size_t i = 0; i < nids; i++)
			want |= ids[i] == o->id;
		if (type && type != conn_kind(o))
			want = 0;
		if (killed(o))
			want = 0;
		if (want)
			client_line(c, o, &b);
		over = b.len > cap;
	}
	pthread_mutex_unlock(&reg_lock);
	if (!over)
		resp_add_bulk(c, b.data, b.len);
	kv_buf_free(&b);
	return over ? "ERR reply would exceed max-output: use CLIENT LIST ID"
		    : NULL;
}

struct kill_filter {
	uint64_t id;
	struct kv_slice addr, laddr;
	int skipme;
	int type; /* 0: any, or a KIND_ */
};

/* CLIENT KILL TYPE: a replica's link is replica (slave), the link to the
 * primary master, a connection with subscriptions pubsub, any other normal
 * (a MONITOR too, as in Redis). */

static int slice_is(struct kv_slice s, const char *z)
{
	return s.p && s.n == strlen(z) && !memcmp(s.p, z, s.n);
}

static const char *kill_filters(struct resp_req *r, struct kill_filter *f)
{
	struct resp_it it;
	struct kv_slice o, v;

	resp_it_init(r, 2, &it);
	for (uint32_t i = 2; i < r->argc; i += 2) {
		long long id;

		resp_it_next(&it, &o);
		if (i + 1 >= r->argc)
			return resp_err_syntax;
		resp_it_next(&it, &v);
		if (resp_eq(o, "id")) {
			if (resp_ll(v, &id) || id <= 0)
				return "ERR client-id should be greater than "
				       "0";
			f->id = (uint64_t)id;
		} else if (resp_eq(o, "type")) {
			if (!(f->type = kind_named(v)))
				return "ERR Unknown client type";
		} else if (resp_eq(o, "addr")) {
			f->addr = v;
		} else if (resp_eq(o, "laddr")) {
			f->laddr = v;
		} else if (resp_eq(o, "user")) {
			if (!slice_is(v, "default")) {
				snprintf(r->err, sizeof(r->err),
					 "ERR No such user '%.*s'",
					 (int)(v.n > 64 ? 64 : v.n),
					 (const char *)v.p);
				return r->err;
			}
		} else if (resp_eq(o, "skipme")) {
			if (resp_eq(v, "yes"))
				f->skipme = 1;
			else if (resp_eq(v, "no"))
				f->skipme = 0;
			else
				return resp_err_syntax;
		} else {
			return resp_err_syntax;
		}
	}
	return NULL;
}

/* Kill the connections f matches; how many.  The caller's own closes
 * after this reply; others are closed by their own io thread. */
static int64_t kill_matching(struct kvd_conn *c, const struct kill_filter *f)
{
	int64_t n = 0;

	if (f->type == KIND_MASTER) /* the link to the primary: no conn */
		return f->id || f->addr.p || f->laddr.p ? 0
							: kvd_repl_kill_link();
	pthread_mutex_lock(&reg_lock);
	for (struct kvd_conn *o = reg_head; o; o = o->reg_next) {
		if ((f->id && o->id != f->id) ||
		    (f->addr.p && !slice_is(f->addr, o->addr)) ||
		    (f->laddr.p && !slice_is(f->laddr, o->laddr)) ||
		    (f->type && f->type != conn_kind(o)) ||
		    (o == c && f->skipme) || killed(o))
			continue;
		n++;
		if (o == c) {
			c->flags |= CONN_CLOSING;
			continue;
		}
		atomic_store(&o->kill, 1);
		wake(o->io);
	}
	pthread_mutex_unlock(&reg_lock);
	return n;
}

static const char *client_kill(struct kvd_conn *c, struct resp_req *r)
{
	struct kill_filter f = {0, {NULL, 0}, {NULL, 0}, 1, 0};
	const char *err;
	int64_t n;

	if (r->argc == 3) { /* the old form: CLIENT KILL addr:port */
		f.addr = r->a[2];
		f.skipme = 0;
		if (!kill_matching(c, &f))
			return "ERR No such client";
		resp_add_ok(c);
		return NULL;
	}
	if ((err = kill_filters(r, &f)))
		return err;
	n = kill_matching(c, &f);
	resp_add_int(c, n);
	return NULL;
}

/* CLIENT LIST, INFO, KILL, NO-EVICT, NO-TOUCH; NULL for another
 * subcommand (resp_admin.c answers those). */
static size_t argv_bytes(struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice a;
	size_t n = 0;

	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		resp_it_next(&it, &a);
		n += a.n;
	}
	return n;
}

int kvd_resp_client_intro(struct kvd_conn *c, struct resp_req *r,
			  const char **err)
{
	struct kv_slice sub = r->a[1];
	struct kv_buf b = {0};

	*err = NULL;
	cur_argv = argv_bytes(r);
	if (resp_eq(sub, "list")) {
		cur_sub = "list";
		*err = client_list(c, r);
	} else if (resp_eq(sub, "info") && r->argc == 2) {
		cur_sub = "info";
		pthread_mutex_lock(&reg_lock);
		client_line(c, c, &b);
		pthread_mutex_unlock(&reg_lock);
		resp_add_bulk(c, b.data, b.len);
		kv_buf_free(&b);
	} else if (resp_eq(sub, "kill") && r->argc >= 3) {
		*err = client_kill(c, r);
	} else if ((resp_eq(sub, "no-evict") || resp_eq(sub, "no-touch")) &&
		   r->argc == 3) {
		if (!resp_eq(r->a[2], "on") && !resp_eq(r->a[2], "off"))
			*err = resp_err_syntax;
		else
			resp_add_ok(c);
	} else if (resp_eq(sub, "info") || resp_eq(sub, "kill") ||
		   resp_eq(sub, "no-evict") || resp_eq(sub, "no-touch")) {
		char name[24];

		snprintf(name, sizeof(name), "client|%.*s", (int)sub.n,
			 (const char *)sub.p);
		for (char *p = name; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		*err = resp_arity_error(r, name);
	} else {
		return 0;
	}
	cur_sub = NULL;
	return 1;
}

/* ===================== INFO memory, cpu, commandstats ===================== */

static void human(char *buf, size_t cap, uint64_t n)
{
	static const char unit[] = "BKMGTP";
	double d = (double)n;
	int u = 0;

	while (d >= 1024 && u < 5)
		d /= 1024, u++;
	if (u == 0)
		snprintf(buf, cap, "%lluB", (unsigned long long)n);
	else
		snprintf(buf, cap, "%.2f%c", d, unit[u]);
}

/* VmRSS and RssAnon of /proc/self/status, in bytes: the memory kvd itself
 * holds is the anonymous part (LMDB's maps are file pages). */
static void rss_bytes(uint64_t *rss, uint64_t *anon)
{
	char line[128];
	unsigned long long kb;
	FILE *f = fopen("/proc/self/status", "r");

	*rss = *anon = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			*rss = kb << 10;
		else if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			*anon = kb << 10;
	}
	fclose(f);
}

static void info_memory(struct kv_buf *b)
{
	static _Atomic uint64_t peak;
	uint64_t used, rss, p = atomic_load(&peak);
	char h1[32], h2[32], h3[32];

	rss_bytes(&rss, &used);
	while (used > p && !atomic_compare_exchange_weak(&peak, &p, used))
		;
	if (used > p)
		p = used;
	human(h1, sizeof(h1), used);
	human(h2, sizeof(h2), rss);
	human(h3, sizeof(h3), p);
	kvd_info_line(b, "# Memory");
	kvd_info_line(b, "used_memory:%llu", (unsigned long long)used);
	kvd_info_line(b, "used_memory_human:%s", h1);
	kvd_info_line(b, "used_memory_rss:%llu", (unsigned long long)rss);
	kvd_info_line(b, "used_memory_rss_human:%s", h2);
	kvd_info_line(b, "used_memory_peak:%llu", (unsigned long long)p);
	kvd_info_line(b, "used_memory_peak_human:%s", h3);
	kvd_info_line(b, "maxmemory:0");
	kvd_info_line(b, "maxmemory_human:0B");
	kvd_info_line(b, "maxmemory_policy:noeviction");
	kvd_info_line(b, "mem_fragmentation_ratio:%.2f",
		      used ? (double)rss / (double)used : 0.0);
	kvd_info_line(b, "mem_allocator:libc");
}

static double secs(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void info_cpu(struct kv_buf *b)
{
	struct rusage self, kids, th;

	memset(&self, 0, sizeof(self));
	memset(&kids, 0, sizeof(kids));
	memset(&th, 0, sizeof(th));
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	getrusage(RUSAGE_THREAD, &th);
	kvd_info_line(b, "# CPU");
	kvd_info_line(b, "used_cpu_sys:%.6f", secs(self.ru_stime));
	kvd_info_line(b, "used_cpu_user:%.6f", secs(self.ru_utime));
	kvd_info_line(b, "used_cpu_sys_children:%.6f", secs(kids.ru_stime));
	kvd_info_line(b, "used_cpu_user_children:%.6f", secs(kids.ru_utime));
	kvd_info_line(b, "used_cpu_sys_main_thread:%.6f", secs(th.ru_stime));
	kvd_info_line(b, "used_cpu_user_main_thread:%.6f", secs(th.ru_utime));
}

/* The sums at the last CONFIG RESETSTAT (the counters are single-writer:
 * only their owners may store to them). */
static pthread_mutex_t cbase_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cbase[RESP_NCMDS][4];

static void cmd_sums(struct kvd_io *io, int id, uint64_t v[4])
{
	unsigned nio = io->srv->nio < MAX_IO ? io->srv->nio : MAX_IO;

	v[0] = v[1] = v[2] = v[3] = 0;
	for (unsigned t = 0; t < nio; t++) {
		v[0] += kvd_read(&cstats[t][id].calls);
		v[1] += kvd_read(&cstats[t][id].usec);
		v[2] += kvd_read(&cstats[t][id].failed);
		v[3] += kvd_read(&cstats[t][id].rejected);
	}
}

void kvd_resp_cmdstats_reset(struct kvd_io *io)
{
	pthread_mutex_lock(&cbase_lock);
	for (int id = 0; id < RESP_NCMDS; id++)
		cmd_sums(io, id, cbase[id]);
	pthread_mutex_unlock(&cbase_lock);
}

static void info_cmdstats(struct kvd_io *io, struct kv_buf *b)
{
	kvd_info_line(b, "# Commandstats");
	for (int id = 0; id < RESP_NCMDS; id++) {
		uint64_t v[4], calls, usec, failed, rejected;

		cmd_sums(io, id, v);
		pthread_mutex_lock(&cbase_lock);
		calls = v[0] - cbase[id][0];
		usec = v[1] - cbase[id][1];
		failed = v[2] - cbase[id][2];
		rejected = v[3] - cbase[id][3];
		pthread_mutex_unlock(&cbase_lock);
		if (!calls && !rejected)
			continue;
		kvd_info_line(
		    b,
		    "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,"
		    "rejected_calls=%llu,failed_calls=%llu",
		    resp_cmds[id].name, (unsigned long long)calls,
		    (unsigned long long)usec,
		    calls ? (double)usec / (double)calls : 0.0,
		    (unsigned long long)rejected, (unsigned long long)failed);
	}
}

void kvd_resp_info_section(struct kvd_io *io, unsigned which, struct kv_buf *b)
{
	switch (which) {
	case KVD_RESP_INFO_MEMORY: info_memory(b); break;
	case KVD_RESP_INFO_CPU: info_cpu(b); break;
	default: info_cmdstats(io, b); break;
	}
}
