/* resp_repl.c - replication in Redis's words: INFO's Replication section
 * (Redis 7.0's fields, as Sentinel reads them), ROLE, CLIENT LIST's line
 * for the link to the primary (flags=M), and WAIT's answer.  The figures
 * come from repl.h (the ids and the link under kvd_repl_lock, the
 * replicas' table through kvd_repl_peers); repl/ builds no RESP.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp.h"

static uint64_t mono_ms(void)
{
	return kvd_mono_ns() / 1000000;
}

/* A copy of the link and the ids, taken under the replication lock. */
static void state_copy(struct kvd_repl_link *l, struct kvd_repl_ids *ids)
{
	kvd_repl_lock();
	*l = *kvd_repl_link();
	if (ids)
		*ids = *kvd_repl_ids();
	kvd_repl_unlock();
}

int kvd_resp_repl_link_line(struct kv_buf *b)
{
	struct kvd_repl_link l;
	char line[600];
	uint64_t now = mono_ms();
	int n;

	state_copy(&l, NULL);
	if (!l.replica || !(l.up || l.syncing))
		return 0;
	n = snprintf(line, sizeof(line),
		     "id=0 addr=%s:%u laddr=%s fd=-1 name= age=%llu "
		     "idle=%llu flags=M db=0 sub=0 psub=0 ssub=0 multi=-1 "
		     "qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 "
		     "obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=NULL "
		     "user=default redir=-1 resp=2\n",
		     l.host, l.native_port, l.laddr,
		     (unsigned long long)(now - l.up_since_ms) / 1000,
		     (unsigned long long)(now - l.last_io_ms) / 1000);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return 0;
	kv_buf_append(b, line, (size_t)n);
	return 1;
}

void kvd_resp_repl_wait_answer(struct kv_buf *b, unsigned n)
{
	char line[32];

	snprintf(line, sizeof(line), ":%u\r\n", n);
	kv_buf_append(b, line, strlen(line));
}

static void info_line(struct kv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void info_line(struct kv_buf *b, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		kv_buf_append(b, line,
			      (size_t)n < sizeof(line) ? (size_t)n
						       : sizeof(line) - 1);
	kv_buf_append(b, "\r\n", 2);
}

/* Every connection that asked for the journal, as Redis lists its
 * replicas: online once it streams, send_bulk while it takes a full copy
 * (a client that pulls a copy of the whole store shows here too).  The
 * count, for repl_backlog_active. */
static unsigned info_replicas(struct kvd_server *srv, struct kv_buf *b)
{
	struct kvd_repl_peer *p;
	int n = kvd_repl_peers(srv, &p);

	info_line(b, "connected_slaves:%u", n > 0 ? (unsigned)n : 0);
	for (int k = 0; k < n; k++)
		info_line(b,
			  "slave%d:ip=%s,port=%u,state=%s,offset=%" PRIu64
			  ",lag=%" PRIu64,
			  k, p[k].ip, p[k].port,
			  p[k].online ? "online" : "send_bulk", p[k].offset,
			  p[k].idle_ms / 1000);
	if (n >= 0)
		free(p);
	return n > 0 ? (unsigned)n : 0;
}

/* The fields of a replica's link to its primary. */
static void info_link(struct kvd_server *srv, const struct kvd_repl_link *l,
		      uint64_t off, struct kv_buf *b)
{
	info_line(b, "master_host:%s", l->host);
	info_line(b, "master_port:%u", l->port);
	info_line(b, "master_link_status:%s", l->up ? "up" : "down");
	info_line(b, "master_last_io_seconds_ago:%lld",
		  l->last_io_ms ? (long long)(mono_ms() - l->last_io_ms) / 1000
				: -1LL);
	info_line(b, "master_sync_in_progress:%d", l->syncing);
	info_line(b, "slave_read_repl_offset:%" PRIu64, off);
	info_line(b, "slave_repl_offset:%" PRIu64, off);
	/* Sentinel skips a replica whose link has been down too long when it
	 * picks one to promote */
	if (!l->up)
		info_line(b, "master_link_down_since_seconds:%lld",
			  l->down_since_ms
			      ? (long long)(mono_ms() - l->down_since_ms) / 1000
			      : -1LL);
	info_line(b, "slave_priority:%u", KVD_LIVE(srv->cfg->replica_priority));
	info_line(b, "slave_read_only:1");
	info_line(b, "replica_announced:1");
}

void kvd_resp_repl_info(struct kvd_server *srv, struct kv_buf *b)
{
	struct kvd_repl_link l;
	struct kvd_repl_ids ids;
	uint64_t off = kvd_repl_offset(srv), sw = 0;
	unsigned nreps;

	state_copy(&l, &ids);
	for (unsigned i = 0; i < srv->nshards; i++)
		sw += ids.sw[i] ? ids.sw[i] - 1 : 0;
	info_line(b, "# Replication");
	info_line(b, "role:%s", l.replica ? "slave" : "master");
	if (l.replica)
		info_link(srv, &l, off, b);
	nreps = info_replicas(srv, b);
	info_line(b, "master_failover_state:no-failover");
	info_line(b, "master_replid:%s", ids.replid);
	info_line(b, "master_replid2:%s", ids.replid2);
	info_line(b, "master_repl_offset:%" PRIu64, off);
	if (sw)
		info_line(b, "second_repl_offset:%" PRIu64, sw + 1);
	else
		info_line(b, "second_repl_offset:-1");
	info_line(b, "repl_backlog_active:%d", nreps > 0);
	info_line(b, "repl_backlog_size:%" PRIu64,
		  srv->cfg->repl_backlog_size * srv->nshards);
	info_line(b, "repl_backlog_first_byte_offset:1");
	info_line(b, "repl_backlog_histlen:%" PRIu64, off);
}

/* A primary's ROLE: its offset and its replicas past their full copy. */
static void role_primary(struct kvd_conn *c, uint64_t off)
{
	struct kvd_repl_peer *p;
	int n = kvd_repl_peers(c->io->srv, &p);
	unsigned online = 0;

	for (int k = 0; k < n; k++)
		online += p[k].online != 0;
	resp_add_array(c, 3);
	resp_add_cstr(c, "master");
	resp_add_int(c, (int64_t)off);
	resp_add_array(c, online);
	for (int k = 0; k < n; k++) {
		char port[16], o[24];

		if (!p[k].online)
			continue;
		snprintf(port, sizeof(port), "%u", p[k].port);
		snprintf(o, sizeof(o), "%" PRIu64, p[k].offset);
		resp_add_array(c, 3);
		resp_add_cstr(c, p[k].ip);
		resp_add_cstr(c, port);
		resp_add_cstr(c, o);
	}
	if (n >= 0)
		free(p);
}

void kvd_resp_repl_role(struct kvd_conn *c)
{
	struct kvd_repl_link l;
	uint64_t off = kvd_repl_offset(c->io->srv);

	state_copy(&l, NULL);
	if (!l.replica) {
		role_primary(c, off);
		return;
	}
	resp_add_array(c, 5);
	resp_add_cstr(c, "slave");
	resp_add_cstr(c, l.host);
	resp_add_int(c, l.port);
	resp_add_cstr(c, l.syncing ? "sync"
			 : l.up	   ? "connected"
				   : "connecting");
	resp_add_int(c, (int64_t)off);
}
