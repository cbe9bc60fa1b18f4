/* conn.c - libkvclient connections: connect, timeouts, the socket's I/O.
 *
 * The socket is non-blocking from the moment it is created, whatever mode
 * the caller chose: every wait goes through poll() with a deadline, which
 * is what lets one I/O timeout bound a whole call (connect included)
 * rather than each system call.  "Blocking mode" is only a promise that
 * kvc_flush() and kvc_read_reply() wait.
 *
 * A failure that leaves the byte stream in an unknown state (timeout, a
 * reset, a garbled frame) closes the socket at once and is remembered in
 * c->broken, so every later call gets the same answer instead of reading a
 * reply meant for another request.
 */
#include "kvc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ===================== Library ===================== */

const char *kvc_version(void)
{
	return KVC_VERSION_STRING;
}

const char *kvc_strerror(int status)
{
	if (status < 0)
		status = -status;
	switch (status) {
#define KVC_TEXT(name, num, text)                                              \
	case num: return text;
		KV_STATUS_LIST(KVC_TEXT)
#undef KVC_TEXT
	}
	return "unknown status";
}

const char *kvc_status_name(int status)
{
	if (status < 0)
		status = -status;
	switch (status) {
#define KVC_NAME(name, num, text)                                              \
	case num: return #name;
		KV_STATUS_LIST(KVC_NAME)
#undef KVC_NAME
	}
	return NULL;
}

/* ===================== Errors ===================== */

void kvc_set_err(kvc_conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
}

static void close_socket(kvc_conn *c)
{
	kvc_tls_drop(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* The connection is unusable from now on: say why, once. */
int kvc_fail(kvc_conn *c, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	close_socket(c);
	c->broken = -status;
	return -status;
}

/* The server closed the connection and nothing more can be read: make it
 * sticky, keeping the message kvc_io_read() left. */
int kvc_closed(kvc_conn *c)
{
	close_socket(c);
	c->broken = -KVC_CLOSED;
	return -KVC_CLOSED;
}

const char *kvc_errmsg(const kvc_conn *c)
{
	return c ? c->err : "out of memory";
}

/* ===================== Time ===================== */

uint64_t kvc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 0 means no deadline. */
uint64_t kvc_deadline(const kvc_conn *c)
{
	return c->io_ms ? kvc_now_ms() + (uint64_t)c->io_ms : 0;
}

/* poll()'s timeout for a deadline; 0 once it has passed. */
static int remaining(uint64_t deadline)
{
	uint64_t now;

	if (!deadline)
		return -1;
	now = kvc_now_ms();
	if (now >= deadline)
		return 0;
	return deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

/* Wait until fd is readable (or writable, when out).  0, or -KVC_TIMEOUT
 * (not yet recorded as a failure: the caller knows what timed out). */
int kvc_wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		int ms = remaining(deadline);
		int n;

		if (ms == 0)
			return -KVC_TIMEOUT;
		n = poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -KVC_IO;
	}
}

int kvc_io_wait(kvc_conn *c, int out, uint64_t deadline)
{
	int rc;

	/* Decrypted bytes already read: poll would not see them. */
	if (kvc_tls_pending(c))
		return 0;
	rc =
	    kvc_wait_fd(c->fd, (short)(POLLIN | (out ? POLLOUT : 0)), deadline);
	if (rc == -KVC_TIMEOUT)
		return kvc_fail(c, KVC_TIMEOUT, "%s: no reply within %d ms",
				c->peer, c->io_ms);
	if (rc)
		return kvc_fail(c, KVC_IO, "%s: poll: %m", c->peer);
	return 0;
}

/* ===================== Handles ===================== */

int kvc_create(kvc_conn **connp)
{
	kvc_conn *c = calloc(1, sizeof(*c));

	*connp = c;
	if (!c)
		return -KVC_NOMEM;
	c->fd = -1;
	c->broken = -KVC_CLOSED;
	c->connect_ms = KVC_DEFAULT_CONNECT_TIMEOUT_MS;
	c->max_reply = KVC_DEFAULT_MAX_REPLY;
	c->reply.c = c;
	snprintf(c->err, sizeof(c->err), "not connected");
	return 0;
}

int kvc_set_timeouts(kvc_conn *c, int connect_ms, int io_ms)
{
	if (connect_ms < 0 || io_ms < 0)
		return -KVC_INVALID;
	c->connect_ms = connect_ms;
	c->io_ms = io_ms;
	return 0;
}

int kvc_set_max_reply(kvc_conn *c, size_t bytes)
{
	if (bytes < 1024 || bytes > UINT32_MAX)
		return -KVC_INVALID;
	c->max_reply = bytes;
	return 0;
}

int kvc_set_nonblock(kvc_conn *c, int on)
{
	c->nonblock = on != 0;
	return 0;
}

int kvc_fd(const kvc_conn *c)
{
	return c->fd;
}

/* Forget everything about a previous connection. */
static void reset(kvc_conn *c)
{
	close_socket(c);
	c->broken = -KVC_CLOSED;
	c->eof = 0;
	c->out.len = c->out_off = 0;
	c->in.len = c->in_off = 0;
	kv_buf_trim(&c->out, KVC_BUF_KEEP);
	kv_buf_trim(&c->in, KVC_BUF_KEEP);
	kvc_queue_reset(c);
}

/* Forget the password, wiping its bytes first. */
static void drop_password(kvc_conn *c)
{
	if (c->password) {
		explicit_bzero(c->password, c->password_len);
		free(c->password);
	}
	c->password = NULL;
	c->password_len = 0;
}

int kvc_set_password(kvc_conn *c, const void *password, size_t len)
{
	char *copy = NULL;

	if ((!password && len) || len > UINT32_MAX)
		return -KVC_INVALID;
	if (password && !(copy = malloc(len + 1)))
		return -KVC_NOMEM;
	if (copy) {
		memcpy(copy, password, len);
		copy[len] = '\0';
	}
	drop_password(c);
	c->password = copy;
	c->password_len = copy ? len : 0;
	return 0;
}

void kvc_close(kvc_conn *c)
{
	if (!c)
		return;
	drop_password(c);
	close_socket(c);
	kvc_tls_free(c);
	kv_buf_free(&c->out);
	kv_buf_free(&c->in);
	free(c->q);
	free(c);
}

/* ===================== Connecting ===================== */

/* One attempt on one address, within the deadline.  0 or -errno-ish
 * status; errno is left describing the failure. */
static int try_connect(kvc_conn *c, const struct sockaddr *sa, socklen_t len,
		       int family, uint64_t deadline)
{
	int fd, err = 0, one = 1;
	socklen_t elen = sizeof(err);

	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -KVC_CONNECT;
	if (connect(fd, sa, len) < 0) {
		/* EAGAIN (a Unix socket's full backlog) is a refusal. */
		if (errno != EINPROGRESS)
			goto fail;
		if (kvc_wait_fd(fd, POLLOUT, deadline)) {
			close(fd);
			errno = ETIMEDOUT;
			return -KVC_TIMEOUT;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			goto fail;
		if (err) {
			errno = err;
			goto fail;
		}
	}
	/* Requests are small and pipelined by the caller when it wants: never
	 * let Nagle hold one back waiting for an ACK. */
	if (family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	return 0;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -KVC_CONNECT;
}

static int connect_unix(kvc_conn *c, const char *path, uint64_t deadline)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int rc;

	snprintf(c->peer, sizeof(c->peer), "%s", path);
	if (strlen(path) >= sizeof(sun.sun_path)) {
		kvc_set_err(c, "%s: Unix socket path too long", path);
		return -KVC_INVALID;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	rc = try_connect(c, (struct sockaddr *)&sun, sizeof(sun), AF_UNIX,
			 deadline);
	if (rc)
		kvc_set_err(c, "%s: %m", path);
	return rc;
}

static int connect_inet(kvc_conn *c, const char *host, unsigned port,
			uint64_t deadline)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	char sport[16];
	int rc = -KVC_CONNECT, g;

	snprintf(c->peer, sizeof(c->peer),
		 strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	snprintf(sport, sizeof(sport), "%u", port);
	g = getaddrinfo(host, sport, &hints, &res);
	if (g == EAI_SYSTEM) {
		kvc_set_err(c, "%s: %m", c->peer);
		return -KVC_CONNECT;
	}
	if (g) {
		kvc_set_err(c, "%s: %s", c->peer, gai_strerror(g));
		return g == EAI_MEMORY ? -KVC_NOMEM : -KVC_CONNECT;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		rc = try_connect(c, ai->ai_addr, ai->ai_addrlen, ai->ai_family,
				 deadline);
		if (rc == 0 || rc == -KVC_TIMEOUT)
			break;
	}
	if (rc == -KVC_TIMEOUT)
		kvc_set_err(c, "%s: connect timed out after %d ms", c->peer,
			    c->connect_ms);
	else if (rc)
		kvc_set_err(c, "%s: %m", c->peer);
	freeaddrinfo(res);
	return rc;
}

/* AUTH on a fresh connection, before the caller can send anything: so a
 * server with requirepass never sees a large request from us before it
 * knows who we are (it caps frames at 16 KiB until then).  The round trip
 * counts against the connect timeout, or the I/O timeout when connecting
 * may take for ever. */
static int auth_now(kvc_conn *c, uint64_t deadline)
{
	int io_ms = c->io_ms, rc;
	kvc_reply *r;

	if (deadline) {
		uint64_t now = kvc_now_ms();

		c->io_ms = now < deadline ? (int)(deadline - now) : 1;
	}
	rc = kvc_send_auth(c, c->password, c->password_len);
	if (!rc)
		rc = kvc_next_reply(c, 1, &r);
	c->io_ms = io_ms;
	if (rc) /* the connection failed: already closed and sticky */
		return rc;
	/* A server without a password answers DISABLED: nothing to prove. */
	rc = r->status == -KVC_DISABLED ? 0 : r->status;
	if (rc)
		return kvc_fail(c, -rc, "%s: AUTH: %s", c->peer,
				kvc_strerror(rc));
	return 0;
}

/* Connect to the Unix socket at path (is_unix) or to host:port, then the
 * TLS handshake (tls), then AUTH when a password is set. */
int kvc_connect_any(kvc_conn *c, const char *host, unsigned port, int is_unix,
		    int tls)
{
	uint64_t deadline;
	int rc;

	reset(c);
	if (!host || !*host || (!is_unix && (port == 0 || port > 65535))) {
		kvc_set_err(c, "invalid address %s:%u", host ? host : "(null)",
			    port);
		return -KVC_INVALID;
	}
	if (is_unix && tls) {
		kvc_set_err(c, "%s: TLS is not used over a Unix socket", host);
		return -KVC_INVALID;
	}
	deadline = c->connect_ms ? kvc_now_ms() + (uint64_t)c->connect_ms : 0;
	if (is_unix)
		rc = connect_unix(c, host, deadline);
	else
		rc = connect_inet(c, host, port, deadline);
	if (rc)
		return rc;
	c->broken = 0;
	c->err[0] = '\0';
	if (tls && (rc = kvc_tls_handshake(c, host, deadline)))
		return rc;
	return c->password ? auth_now(c, deadline) : 0;
}

int kvc_connect(kvc_conn *c, const char *host, unsigned port)
{
	return kvc_connect_any(c, host, port, host && host[0] == '/',
			       c->tls_ctx != NULL);
}

int kvc_connect_unix(kvc_conn *c, const char *path)
{
	return kvc_connect_any(c, path, 0, 1, c->tls_ctx != NULL);
}

/* ===================== Bytes in and out ===================== */

/* Write what is queued.  0 when all is written, 1 when the socket is full,
 * or a (sticky) failure. */
int kvc_io_write(kvc_conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n;

		if (c->ssl) {
			size_t done = 0;
			int rc = kvc_tls_send(c, c->out.data + c->out_off,
					      c->out.len - c->out_off, &done);

			if (rc)
				return rc;
			c->out_off += done;
			continue;
		}
		n = send(c->fd, c->out.data + c->out_off,
			 c->out.len - c->out_off, MSG_NOSIGNAL);

		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return kvc_fail(c, KVC_CLOSED,
					"%s: connection closed by the server",
					c->peer);
		return kvc_fail(c, KVC_IO, "%s: send: %m", c->peer);
	}
	c->out.len = c->out_off = 0;
	kv_buf_trim(&c->out, KVC_BUF_KEEP);
	return 0;
}

/* Make room for at least want more bytes after the unread ones, moving
 * them to the front: the replies before in_off are dead by now. */
static int make_room(kvc_conn *c, size_t want)
{
	size_t keep = c->in.len - c->in_off;

	if (c->in_off) {
		c->gen++; /* what was handed out moves or dies */
		if (keep)
			memmove(c->in.data, c->in.data + c->in_off, keep);
		c->in.len = keep;
		c->in_off = 0;
	}
	if (!keep)
		kv_buf_trim(&c->in, KVC_BUF_KEEP);
	if (want < KVC_READ_CHUNK)
		want = KVC_READ_CHUNK;
	if (kv_buf_reserve(&c->in, want)) {
		c->in.err = 0;
		return kvc_fail(c, KVC_NOMEM, "%s: out of memory for a reply",
				c->peer);
	}
	return 0;
}

/* The server's side is closed: replies already buffered can still be
 * read. */
static int peer_closed(kvc_conn *c)
{
	c->eof = 1;
	close_socket(c);
	snprintf(c->err, sizeof(c->err), "%s: connection closed by the server",
		 c->peer);
	return -KVC_CLOSED;
}

static int tls_read(kvc_conn *c)
{
	size_t got = 0;
	int rc = kvc_tls_recv(c, c->in.data + c->in.len, c->in.cap - c->in.len,
			      &got);

	if (rc == 0) {
		c->in.len += got;
		return 1;
	}
	if (rc == 1)
		return 0;
	if (rc == 2) {
		int early = kvc_tls_closed_early(c);

		peer_closed(c);
		if (early)
			snprintf(c->err, sizeof(c->err),
				 "%s: connection closed by the server right "
				 "after the TLS handshake (does it require a "
				 "client certificate?)",
				 c->peer);
		return -KVC_CLOSED;
	}
	return rc;
}

/* Read once.  1 when bytes came, 0 when none were there, -KVC_CLOSED when
 * the server closed its side (c->eof; replies already buffered can still
 * be read), or a failure. */
int kvc_io_read(kvc_conn *c, size_t want)
{
	ssize_t n;

	if (c->fd < 0)
		return c->eof ? -KVC_CLOSED : c->broken;
	if (make_room(c, want))
		return c->broken;
	if (c->ssl)
		return tls_read(c);
	do
		n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len,
			 0);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		c->in.len += (size_t)n;
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n < 0 && errno != ECONNRESET)
		return kvc_fail(c, KVC_IO, "%s: recv: %m", c->peer);
	return peer_closed(c);
}

/* ===================== Non-blocking interface ===================== */

int kvc_want_write(const kvc_conn *c)
{
	return c->fd >= 0 && (c->out_off < c->out.len || c->tls_rd_wants_w);
}

int kvc_flush(kvc_conn *c)
{
	uint64_t deadline = kvc_deadline(c);
	int rc;

	if (c->broken)
		return c->broken;
	if (c->fd < 0)
		return kvc_closed(c);
	for (;;) {
		/* TLS: a read that needed the socket writable goes again. */
		if (c->tls_rd_wants_w && (rc = kvc_io_read(c, 0)) < 0)
			return rc == -KVC_CLOSED ? kvc_closed(c) : rc;
		rc = kvc_io_write(c);
		if (rc <= 0)
			return rc;
		if (c->nonblock)
			return -KVC_AGAIN;
		if ((rc = kvc_io_wait(c, 1, deadline)))
			return rc;
		/* Take in replies while waiting: a server whose output to us
		 * is full stops reading our requests. */
		rc = kvc_io_read(c, 0);
		if (rc < 0)
			return rc == -KVC_CLOSED ? kvc_closed(c) : rc;
	}
}

int kvc_consume_input(kvc_conn *c)
{
	int rc;

	if (c->broken)
		return c->broken;
	/* Bounded: a fast server must not keep us here for ever. */
	for (int i = 0; i < 64; i++) {
		rc = kvc_io_read(c, 0);
		if (rc <= 0)
			return rc;
	}
	return 0;
}
