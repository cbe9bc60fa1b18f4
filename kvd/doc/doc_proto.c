/* doc_proto.c - the MongoDB door as one of the server's protocols
 * (net/proto.h): the door (kvd/mongo/mdoor.h) is made once at start over
 * kvd's documents (doc_mdoor.c), with the server as its host: replies go
 * to the connection's output, the password is kvd's (SCRAM-SHA-256), the
 * guessing limit and the pre-authentication caps are the other doors'
 * (net/auth.h, conn.c), and serverStatus tells kvd's own figures. */
#include "doc_mdoor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "kvd.h"
#include "log.h"
#include "net/auth.h"
#include "net/conn.h"
#include "net/loop.h"
#include "net/proto.h"

static struct mdoor *door;
static struct kvd_server *dsrv;
static _Atomic uint64_t last_tick;
static char host_name[300];

/* ===================== the host ===================== */

static void h_reply(void *conn, const void *p, size_t n)
{
	struct kvd_conn *c = conn;

	if (!(c->flags & CONN_DEAD))
		kvd_reply_append(c, p, n);
}

/* The connection's writes done, conn.c's flush resumes its input (the
 * door's input stalled it with STALL_WRITES while a write was out). */
static void h_resume(void *conn)
{
	(void)conn;
}

static void h_close(void *conn)
{
	struct kvd_conn *c = conn;

	c->flags |= CONN_CLOSING;
}

static int h_auth_gate(void *conn)
{
	return kvd_auth_gate(conn);
}

static void h_auth_failed(void *conn)
{
	kvd_auth_wrong(conn);
}

static void h_authed(void *conn)
{
	struct kvd_conn *c = conn;

	c->flags |= CONN_AUTHED;
}

static uint64_t h_now(void *ctx)
{
	(void)ctx;
	return kvd_now_ms();
}

static uint64_t rss_mb(uint64_t *virt)
{
	unsigned long long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &res) != 2)
			size = res = 0;
		fclose(f);
	}
	*virt = size * (uint64_t)sysconf(_SC_PAGESIZE) >> 20;
	return res * (uint64_t)sysconf(_SC_PAGESIZE) >> 20;
}

static void h_stats(void *ctx, struct mdoor_stats *st)
{
	struct kvd_server *srv = ctx;
	uint64_t max = KVD_LIVE(srv->cfg->max_clients);

	st->conn_current = atomic_load(&srv->nconns);
	st->conn_available =
	    max > st->conn_current ? max - st->conn_current : 0;
	for (unsigned i = 0; i < srv->nio; i++)
		st->conn_total += kvd_read(&srv->io[i]->stats.accepted);
	st->mem_resident_mb = rss_mb(&st->mem_virtual_mb);
}

static void h_status_extra(void *ctx, bson_t *out)
{
	struct kvd_server *srv = ctx;
	bson_t k;

	BSON_APPEND_DOCUMENT_BEGIN(out, "kvd", &k);
	BSON_APPEND_INT32(&k, "shards", (int32_t)srv->nshards);
	BSON_APPEND_INT32(&k, "ioThreads", (int32_t)srv->nio);
	BSON_APPEND_INT64(&k, "maxClients",
			  (int64_t)KVD_LIVE(srv->cfg->max_clients));
	bson_append_document_end(out, &k);
}

static void h_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	if (level == 0)
		log_error("mongo: %s", msg);
	else if (level == 1)
		log_warn("mongo: %s", msg);
	else
		log_info("mongo: %s", msg);
}

/* ===================== the protocol ===================== */

static void tick(uint64_t now)
{
	uint64_t last = atomic_load(&last_tick);

	if (now - last >= 1000 &&
	    atomic_compare_exchange_strong(&last_tick, &last, now))
		mdoor_tick(door);
}

static size_t mongo_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	size_t k;

	if (!c->mdoor)
		return 0;
	doc_mdoor_enter(c->io);
	tick(c->io->now_ms);
	k = mdoor_input(c->mdoor, p, n, NULL);
	if (mdoor_yielded(c->mdoor)) {
		c->stall = STALL_YIELD;
		kvd_io_again(c);
	} else if (mdoor_busy(c->mdoor)) {
		c->stall = STALL_WRITES;
	}
	return k;
}

/* A read, or a write looking for its documents, that gave the thread
 * back works its next slice; once it has answered, the connection's
 * buffered input runs. */
static void mongo_again(struct kvd_conn *c)
{
	if (!c->mdoor)
		return;
	doc_mdoor_enter(c->io);
	if (doc_mdoor_write_paused(c)) {
		doc_mdoor_write_again(c);
		/* a write that ended here has no pend left to resume it */
		if (!mdoor_busy(c->mdoor) && !c->npend)
			kvd_conn_resume(c);
		kvd_io_mark(c);
		return;
	}
	mdoor_again(c->mdoor);
	if (mdoor_yielded(c->mdoor)) {
		kvd_io_again(c);
	} else if (mdoor_busy(c->mdoor)) {
		c->stall = STALL_WRITES;
	} else {
		kvd_conn_resume(c);
	}
	kvd_io_mark(c);
}

static void mongo_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	doc_mdoor_enter(c->io);
	doc_mdoor_result(c, pd);
}

/* The peer's "ip:port" into c->addr (RESP's open fills it for its own
 * connections; the door's whatsmyuri and logs need it too). */
static void peer_addr(struct kvd_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	memset(&ss, 0, sizeof(ss));
	if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	}
	snprintf(c->addr, sizeof(c->addr), "%s:%u", host, port);
}

static void mongo_open(struct kvd_conn *c)
{
	struct mdoor_peer peer = {.remote = c->addr, .id = c->id};

	if (!c->addr[0])
		peer_addr(c);

	c->mdoor = door ? mdoor_conn_open(door, c, &peer) : NULL;
	if (!c->mdoor)
		c->flags |= CONN_CLOSING;
}

static void mongo_close(struct kvd_conn *c)
{
	if (c->mdoor)
		mdoor_conn_close(c->mdoor);
	c->mdoor = NULL;
	doc_mdoor_abandon(c);
}

const struct kvd_proto kvd_mongo_proto = {
    .name = "mongo",
    .input = mongo_input,
    .wreply = mongo_wreply,
    .open = mongo_open,
    .close = mongo_close,
    .again = mongo_again,
    .busy = "",
    .busy_len = 0,
};

/* getCmdLineOpts shows kvd's argv, but never a password given on it (as
 * mongod redacts its own): the value of each option below is shown as
 * "<password>". */
static const char *const secret_opts[] = {"--requirepass",
					  "--primary-password"};
static const char **shown_argv;

static const char *shown_arg(const char *a, bool *next_secret)
{
	for (size_t k = 0; k < sizeof(secret_opts) / sizeof(*secret_opts);
	     k++) {
		size_t n = strlen(secret_opts[k]);

		if (strncmp(a, secret_opts[k], n))
			continue;
		if (a[n] == '\0')
			*next_secret = true;
		else if (a[n] == '=')
			return k ? "--primary-password=<password>"
				 : "--requirepass=<password>";
	}
	return a;
}

static const char *const *redacted_argv(int argc, char **argv)
{
	bool secret = false;

	free(shown_argv);
	if (!(shown_argv = calloc((size_t)argc + 1, sizeof(*shown_argv))))
		return NULL;
	for (int i = 0; i < argc; i++) {
		bool was = secret;

		secret = false;
		shown_argv[i] =
		    was ? "<password>" : shown_arg(argv[i], &secret);
	}
	return shown_argv;
}

int doc_mdoor_start(struct kvd_server *srv, int argc, char **argv, char *err,
		    size_t errlen)
{
	const struct kvd_config *cfg = srv->cfg;
	struct mdoor_config mc = {
	    .password = cfg->requirepass[0] ? cfg->requirepass : NULL,
	    .password_len = strlen(cfg->requirepass),
	    .kvd_version = KVD_VERSION,
	    .host = host_name,
	    .pid = getpid(),
	    .start_ms = srv->start_ms,
	    .preauth_max_message = 16384,
	};
	struct mdoor_host h = {
	    .ctx = srv,
	    .reply = h_reply,
	    .resume = h_resume,
	    .close = h_close,
	    .auth_gate = h_auth_gate,
	    .auth_failed = h_auth_failed,
	    .authed = h_authed,
	    .now_ms = h_now,
	    .stats = h_stats,
	    .status_extra = h_status_extra,
	    .log = h_log,
	};
	char hn[256] = "localhost";

	if (!cfg->mongo_port && !cfg->tls_mongo_port)
		return 0;
	mc.argv = redacted_argv(argc, argv);
	gethostname(hn, sizeof(hn) - 1);
	snprintf(host_name, sizeof(host_name), "%s:%u", hn,
		 srv->mongo_port ? srv->mongo_port : cfg->tls_mongo_port);
	dsrv = srv;
	door = mdoor_new(&mc, &h, &doc_mdoor_store, err, errlen);
	free(shown_argv); /* the door keeps its own copy */
	shown_argv = NULL;
	return door ? 0 : -1;
}

void doc_mdoor_stop(void)
{
	if (door)
		mdoor_free(door);
	door = NULL;
}
