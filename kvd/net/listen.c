/* listen.c - the listeners: which configured port or socket speaks which
 * protocol (a slot of kvd_io.lfd per protocol and kind: TCP, Unix, TLS;
 * loop.h), bound before the data directory is touched so that a port in
 * use is the first and only complaint; and the open-file limit that
 * max-clients must fit.  A new protocol's listeners are added here.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"

/* Descriptors kvd keeps for itself besides connections, as Redis keeps 32:
 * the log, backups, libraries; and per io thread its ring, eventfd and
 * listeners, and about one shard's LMDB files and committer eventfd. */
#define FD_RESERVED 32
#define FD_RESERVED_PER_THREAD 8

/* Connections the open-file limit leaves room for (fit_fd_limit). */
static unsigned fd_max_clients = UINT32_MAX;

unsigned kvd_listen_fd_max(void)
{
	return fd_max_clients;
}

/* SO_REUSEPORT lets every io thread have its own listener, but it would
 * also let a second kvd of the same user join the group and take half of
 * the connections.  A plain bind first proves nobody holds the port. */
static int port_free(const struct addrinfo *ai)
{
	int one = 1, fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
	close(fd);
	return rc;
}

static int listen_on(const char *host, unsigned *port, int first, char *err,
		     size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai;
	char ps[16];
	int fd = -1, one = 1, rc;

	snprintf(ps, sizeof(ps), "%u", *port);
	if ((rc = getaddrinfo(host, ps, &hints, &ai))) {
		snprintf(err, errlen, "cannot resolve bind address %s: %s",
			 host, gai_strerror(rc));
		return -1;
	}
	if (first && *port && port_free(ai)) {
		snprintf(err, errlen, "cannot listen on %s port %u: %s", host,
			 *port, strerror(errno));
		freeaddrinfo(ai);
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
		snprintf(err, errlen, "cannot listen on %s port %u: %s", host,
			 *port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	if (*port == 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*port = ntohs(ss.ss_family == AF_INET
				  ? ((struct sockaddr_in *)&ss)->sin_port
				  : ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

/* ===================== Unix sockets =====================
 *
 * A Unix socket cannot be split between the io threads as SO_REUSEPORT
 * splits a TCP port, so there is one listening socket per path and every
 * io thread arms an accept on it (through a dup, so that each thread
 * closes its own descriptor as it does a TCP listener's).  io_uring's
 * accept waits exclusively: the kernel wakes one waiter per connection,
 * the first in the socket's queue.  A multishot accept would stay first
 * and take every connection; a one-shot one, re-armed when it completes
 * (accept_ended), goes to the back of the queue, so connections go round
 * the idle threads, as TCP's are spread by SO_REUSEPORT.  No thread is
 * special: one paused for want of descriptors leaves the others
 * accepting.  (Accepting on one thread and handing descriptors to the
 * others would need a queue between threads for little gain: Unix
 * connections are local and few.)
 */

#define UNIX_INUSE_TRIES 20

/* Our socket files, removed at exit if they are still ours (same inode). */
static struct {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ino_t ino;
	int fd;
} unix_socks[2] = {{"", 0, -1}, {"", 0, -1}};
/* The protocol each speaks (unix-socket, resp-unix-socket). */
static const int unix_protos[2] = {KVD_PROTO_NATIVE, KVD_PROTO_RESP};

/* 1 when a process accepts on path, 0 when the file is stale (a kvd
 * killed without cleaning up), -1 (errno) when it cannot be told. */
static int unix_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc, e;

	if (fd < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	e = errno;
	close(fd);
	if (rc == 0 || e == EAGAIN) /* EAGAIN: its backlog is full */
		return 1;
	if (e == ECONNREFUSED)
		return 0;
	errno = e;
	return -1;
}

static int unix_bind(const char *path, unsigned perm, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, rc;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen,
				 "unix socket %s: a file that is not a socket "
				 "is in the way",
				 path);
			return -1;
		}
		/* A kvd just killed may still listen for a moment: its
		 * rings' accepts hold the socket until the kernel has torn
		 * them down, after the process is gone.  Ask again for up
		 * to UNIX_INUSE_TRIES tenths of a second. */
		for (int i = 0;
		     (rc = unix_in_use(&sa)) > 0 && i < UNIX_INUSE_TRIES; i++)
			usleep(100000);
		if (rc) {
			snprintf(err, errlen, "unix socket %s: %s", path,
				 rc > 0 ? "another process listens on it"
					: strerror(errno));
			return -1;
		}
		if (unlink(path) && errno != ENOENT) {
			snprintf(err, errlen,
				 "unix socket %s: cannot remove the stale "
				 "file: %s",
				 path, strerror(errno));
			return -1;
		}
		log_info("unix socket %s: removed a stale socket file", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* bind creates the file with 0777 & ~umask: with this umask it has
	 * its final mode from the start, never a wider one.  No other
	 * thread exists yet to create a file meanwhile. */
	old = umask(~(mode_t)perm & 0777);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc || listen(fd, 1024))
		goto fail;
	return fd;
fail:
	snprintf(err, errlen, "cannot listen on unix socket %s: %s", path,
		 strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Bind the configured Unix sockets (before the io threads exist). */
static int unix_open(const struct kvd_config *cfg, char *err, size_t errlen)
{
	const char *paths[2] = {cfg->unix_socket,
				cfg->resp_port ? cfg->resp_unix_socket : ""};

	for (int i = 0; i < 2; i++) {
		struct stat st;
		int fd;

		if (!paths[i][0])
			continue;
		fd = unix_bind(paths[i], cfg->unix_perm, err, errlen);
		if (fd < 0)
			return -1;
		unix_socks[i].fd = fd;
		snprintf(unix_socks[i].path, sizeof(unix_socks[i].path), "%s",
			 paths[i]);
		unix_socks[i].ino = lstat(paths[i], &st) ? 0 : st.st_ino;
	}
	return 0;
}

/* Give io its own descriptor of each Unix listener. */
static int unix_share(struct kvd_io *io, char *err, size_t errlen)
{
	for (int i = 0; i < 2; i++) {
		if (unix_socks[i].fd < 0)
			continue;
		int slot = KVD_LISTEN_SLOT(KVD_LISTEN_UNIX, unix_protos[i]);

		io->lfd[slot] = fcntl(unix_socks[i].fd, F_DUPFD_CLOEXEC, 0);
		if (io->lfd[slot] < 0) {
			snprintf(err, errlen, "unix socket %s: dup: %s",
				 unix_socks[i].path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* At exit: close the listeners, remove the files if nobody replaced them. */
void kvd_listen_close(void)
{
	for (int i = 0; i < 2; i++) {
		struct stat st;

		if (unix_socks[i].fd >= 0)
			close(unix_socks[i].fd);
		unix_socks[i].fd = -1;
		if (unix_socks[i].path[0] && !lstat(unix_socks[i].path, &st) &&
		    st.st_ino == unix_socks[i].ino)
			unlink(unix_socks[i].path);
		unix_socks[i].path[0] = '\0';
	}
}

/* The TLS listeners (as bound: a TLS port is never 0 here). */
static unsigned tls_ports[3];
/* The protocol each speaks (tls-port, tls-resp-port, tls-mongo-port). */
static const int tls_protos[3] = {KVD_PROTO_NATIVE, KVD_PROTO_RESP,
				  KVD_PROTO_MONGO};

static int tls_listen(struct kvd_server *srv, struct kvd_io *io, unsigned idx,
		      char *err, size_t errlen)
{
	tls_ports[0] = srv->cfg->tls_port;
	tls_ports[1] = srv->cfg->tls_resp_port;
	tls_ports[2] = srv->cfg->tls_mongo_port;
	for (int i = 0; i < 3; i++) {
		if (!tls_ports[i])
			continue;
		int slot = KVD_LISTEN_SLOT(KVD_LISTEN_TLS, tls_protos[i]);

		io->lfd[slot] = listen_on(srv->cfg->bind, &tls_ports[i],
					  idx == 0, err, errlen);
		if (io->lfd[slot] < 0)
			return -1;
		io->tls_slots |= 1u << slot;
	}
	return 0;
}

static int io_listen(struct kvd_server *srv, struct kvd_io *io, unsigned idx,
		     char *err, size_t errlen)
{
	io->idx = idx;
	io->srv = srv;
	io->efd = -1;
	for (int i = 0; i < KVD_NLISTEN; i++)
		io->lfd[i] = -1;
	if (unix_share(io, err, errlen))
		return -1;
	/* With a TLS port, port 0 turns the plain one off (as in Redis). */
	if (srv->cfg->port || !srv->cfg->tls_port) {
		io->lfd[KVD_PROTO_NATIVE] = listen_on(
		    srv->cfg->bind, &srv->port, idx == 0, err, errlen);
		if (io->lfd[KVD_PROTO_NATIVE] < 0)
			return -1;
	}
	if (tls_listen(srv, io, idx, err, errlen))
		return -1;
	if (srv->cfg->resp_port) {
		io->lfd[KVD_PROTO_RESP] = listen_on(
		    srv->cfg->bind, &srv->resp_port, idx == 0, err, errlen);
		if (io->lfd[KVD_PROTO_RESP] < 0)
			return -1;
	}
	if (srv->cfg->mongo_port) {
		io->lfd[KVD_PROTO_MONGO] = listen_on(
		    srv->cfg->bind, &srv->mongo_port, idx == 0, err, errlen);
		if (io->lfd[KVD_PROTO_MONGO] < 0)
			return -1;
	}
	/* Metrics are scraped rarely: one listener, on the first thread. */
	if (srv->cfg->metrics_port && idx == 0) {
		io->lfd[KVD_PROTO_HTTP] = listen_on(
		    srv->cfg->metrics_bind, &srv->metrics_port, 1, err, errlen);
		if (io->lfd[KVD_PROTO_HTTP] < 0)
			return -1;
		if (srv->cfg->tls_metrics)
			io->tls_slots |= 1u << KVD_PROTO_HTTP;
	}
	return 0;
}

/* Raise the open-file limit to its hard limit, then lower max-clients to
 * what it leaves room for: a connection over the limit is then refused
 * with a clear reply, rather than left in the listen queue while accept
 * fails for want of a descriptor.  -1 when no connection would fit. */
static int fit_fd_limit(struct kvd_server *srv, char *err, size_t errlen)
{
	uint64_t reserved = FD_RESERVED + FD_RESERVED_PER_THREAD * srv->nio;
	unsigned max = KVD_LIVE(srv->cfg->max_clients);
	struct rlimit rl;

	fd_max_clients = UINT32_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = {rl.rlim_max, rl.rlim_max};

		if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
			log_info("open-file limit raised from %llu to %llu",
				 (unsigned long long)rl.rlim_cur,
				 (unsigned long long)rl.rlim_max);
			rl.rlim_cur = rl.rlim_max;
		}
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= max + reserved)
		return 0;
	if (rl.rlim_cur <= reserved) {
		snprintf(err, errlen,
			 "the open-file limit %llu leaves no room for "
			 "connections (kvd keeps %llu for itself); raise it "
			 "(ulimit -n, or LimitNOFILE= in the unit)",
			 (unsigned long long)rl.rlim_cur,
			 (unsigned long long)reserved);
		return -1;
	}
	fd_max_clients = (unsigned)(rl.rlim_cur - reserved);
	log_warn("max-clients %u (%u configured): the open-file limit %llu "
		 "allows no more (kvd keeps %llu for itself); raise it "
		 "(ulimit -n, or LimitNOFILE= in the unit) for more",
		 fd_max_clients, max, (unsigned long long)rl.rlim_cur,
		 (unsigned long long)reserved);
	return 0;
}

int kvd_io_listen(struct kvd_server *srv, char *err, size_t errlen)
{
	if (fit_fd_limit(srv, err, errlen) || unix_open(srv->cfg, err, errlen))
		return -1;
	srv->port = srv->cfg->port;
	srv->resp_port = srv->cfg->resp_port;
	srv->mongo_port = srv->cfg->mongo_port;
	srv->metrics_port = srv->cfg->metrics_port;
	srv->io = calloc(srv->nio, sizeof(*srv->io));
	if (!srv->io) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (unsigned i = 0; i < srv->nio; i++) {
		srv->io[i] = calloc(1, sizeof(struct kvd_io));
		if (!srv->io[i]) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (io_listen(srv, srv->io[i], i, err, errlen))
			return -1;
	}
	/* The io threads' descriptors keep the Unix sockets open now: the
	 * socket closes with the last of them, when the last thread stops. */
	for (int i = 0; i < 2; i++) {
		if (unix_socks[i].fd >= 0)
			close(unix_socks[i].fd);
		unix_socks[i].fd = -1;
	}
	return 0;
}
