/* mdoor_host.c - a tiny test host for the MongoDB door: one thread, poll(),
 * loopback only, linking the door (kvd/mongo/mdoor.h) and the in-memory
 * store, so that real drivers (pymongo, the Node.js driver, mongosh) can
 * be pointed at the door before the server is wired to it.  Not a server:
 * no limits of its own beyond the door's, no TLS.
 *
 *   mdoor_host [--port N] [--password P] [--user U] [--defer]
 *
 * Prints "PORT <n>" once listening (port 0: the kernel's choice).  With
 * --defer the store completes writes on the next turn of the loop, as
 * kvd's committers do, so that every write suspends its connection.
 * Stops on SIGTERM or SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mdoor.h"
#include "memstore.h"

#define MAX_CONNS 256

struct hconn {
	int fd;
	struct mdoor_conn *mc;
	uint8_t *in, *out;
	size_t inlen, incap, outlen, outcap;
	bool closing, rerun;
};

static struct hconn *conns[MAX_CONNS];
static volatile sig_atomic_t stop;
static uint64_t next_id = 1;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	*cap = need * 2;
	*p = realloc(*p, *cap);
	if (!*p)
		abort();
}

static void h_reply(void *conn, const void *p, size_t n)
{
	struct hconn *c = conn;

	grow(&c->out, &c->outcap, c->outlen + n);
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
}

static void h_resume(void *conn)
{
	((struct hconn *)conn)->rerun = true;
}

static void h_close(void *conn)
{
	((struct hconn *)conn)->closing = true;
}

static uint64_t h_now(void *ctx)
{
	struct timeval tv;

	(void)ctx;
	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void h_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "mdoor_host: [%d] %s\n", level, msg);
}

/* Run what the input holds. */
static void run_input(struct hconn *c)
{
	size_t used = 0, k;

	c->rerun = false;
	while (used < c->inlen &&
	       (k = mdoor_input(c->mc, c->in + used, c->inlen - used, NULL)))
		used += k;
	memmove(c->in, c->in + used, c->inlen - used);
	c->inlen -= used;
}

static void drop(int i)
{
	struct hconn *c = conns[i];

	mdoor_conn_close(c->mc);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	conns[i] = NULL;
}

static void accept_one(struct mdoor *d, int lfd)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = accept(lfd, (struct sockaddr *)&sa, &sl), one = 1;
	char remote[64];
	struct mdoor_peer peer;
	struct hconn *c;
	int i;

	if (fd < 0)
		return;
	for (i = 0; i < MAX_CONNS && conns[i]; i++)
		;
	if (i == MAX_CONNS) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(remote, sizeof(remote), "%s:%u", inet_ntoa(sa.sin_addr),
		 ntohs(sa.sin_port));
	peer.remote = remote;
	peer.id = next_id++;
	c = calloc(1, sizeof(*c));
	c->fd = fd;
	c->mc = mdoor_conn_open(d, c, &peer);
	conns[i] = c;
}

static void io(struct hconn *c, short rev, int i)
{
	if (rev & POLLIN) {
		ssize_t n;

		grow(&c->in, &c->incap, c->inlen + 65536);
		n = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
		if (n <= 0) {
			drop(i);
			return;
		}
		c->inlen += (size_t)n;
		run_input(c);
	}
	if ((rev & POLLOUT) && c->outlen) {
		ssize_t n = write(c->fd, c->out, c->outlen);

		if (n < 0 && errno != EAGAIN) {
			drop(i);
			return;
		}
		if (n > 0) {
			memmove(c->out, c->out + n, c->outlen - (size_t)n);
			c->outlen -= (size_t)n;
		}
	}
	if (c->closing && !c->outlen)
		drop(i);
}

static int listen_on(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 64) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		perror("mdoor_host: listen");
		exit(1);
	}
	printf("PORT %u\n", ntohs(sa.sin_port));
	fflush(stdout);
	return fd;
}

static void loop(struct mdoor *d, struct memstore *ms, int lfd, bool defer)
{
	struct pollfd p[MAX_CONNS + 1];
	int idx[MAX_CONNS + 1];
	uint64_t last_tick = h_now(NULL);

	while (!stop) {
		int n = 1;

		p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < MAX_CONNS; i++) {
			if (!conns[i])
				continue;
			p[n] = (struct pollfd){.fd = conns[i]->fd};
			p[n].events = (conns[i]->closing ? 0 : POLLIN) |
				      (conns[i]->outlen ? POLLOUT : 0);
			idx[n++] = i;
		}
		if (poll(p, (nfds_t)n,
			 defer && memstore_pending(ms) ? 0 : 200) < 0)
			continue;
		if (p[0].revents & POLLIN)
			accept_one(d, lfd);
		for (int k = 1; k < n; k++)
			if (p[k].revents && conns[idx[k]])
				io(conns[idx[k]], p[k].revents, idx[k]);
		if (defer)
			memstore_complete(ms);
		for (int i = 0; i < MAX_CONNS; i++)
			if (conns[i] && conns[i]->rerun)
				run_input(conns[i]);
		if (h_now(NULL) - last_tick >= 1000) {
			mdoor_tick(d);
			last_tick = h_now(NULL);
		}
	}
}

int main(int argc, char **argv)
{
	struct mdoor_config cfg = {.kvd_version = "test", .pid = getpid()};
	struct mdoor_host host = {.reply = h_reply,
				  .resume = h_resume,
				  .close = h_close,
				  .now_ms = h_now,
				  .log = h_log};
	struct mdoor_store st;
	struct memstore *ms = memstore_new();
	struct mdoor *d;
	char err[256], hostname[64];
	int port = 0, lfd;
	bool defer = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--password") && i + 1 < argc) {
			cfg.password = argv[++i];
			cfg.password_len = strlen(cfg.password);
		} else if (!strcmp(argv[i], "--user") && i + 1 < argc)
			cfg.user = argv[++i];
		else if (!strcmp(argv[i], "--defer"))
			defer = true;
		else {
			fprintf(stderr,
				"usage: mdoor_host [--port N] "
				"[--password P] [--user U] [--defer]\n");
			return 2;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(port);
	snprintf(hostname, sizeof(hostname), "127.0.0.1:%d", port);
	cfg.host = hostname;
	cfg.start_ms = h_now(NULL);
	cfg.argv = (const char *const *)argv;
	memstore_ops(ms, &st);
	memstore_defer(ms, defer);
	d = mdoor_new(&cfg, &host, &st, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "mdoor_host: %s\n", err);
		return 1;
	}
	loop(d, ms, lfd, defer);
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i])
			drop(i);
	memstore_complete(ms);
	mdoor_free(d);
	memstore_free(ms);
	close(lfd);
	return 0;
}
