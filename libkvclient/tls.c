/* tls.c - libkvclient over TLS (OpenSSL 3): kvc_set_tls(), the handshake
 * that follows the TCP connect, and the bytes in and out once it is done.
 *
 * Each handle owns its SSL_CTX (the library keeps no global state), made
 * when the options are set so that a missing or bad file is reported by
 * kvc_set_tls() rather than by every connect.  The socket stays
 * non-blocking as for plain TCP: SSL_read/SSL_write's WANT_READ and
 * WANT_WRITE come back to conn.c as "nothing now", and the caller's poll()
 * (or ours, in blocking mode) waits as it would without TLS.  OpenSSL
 * writes to the socket through a BIO of ours that sends with MSG_NOSIGNAL:
 * the socket BIO's write() would raise SIGPIPE on a closed connection,
 * which the library promises never to do.
 */
#include "kvc_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL's reason for the last failure, and its queue emptied. */
static const char *ossl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : "unknown error";
}

/* ===================== Options ===================== */

/* The BIO's write: send() without SIGPIPE.  Reads and controls are the
 * socket BIO's own. */
static int bio_write(BIO *b, const char *p, int n)
{
	int fd = (int)BIO_get_fd(b, NULL);
	ssize_t r;

	BIO_clear_retry_flags(b);
	do
		r = send(fd, p, (size_t)n, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)r;
}

static BIO_METHOD *make_bio_method(void)
{
	const BIO_METHOD *s = BIO_s_socket();
	BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "kvc socket");

	if (!m)
		return NULL;
	if (!BIO_meth_set_write(m, bio_write) ||
	    !BIO_meth_set_read(m, BIO_meth_get_read(s)) ||
	    !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s)) ||
	    !BIO_meth_set_create(m, BIO_meth_get_create(s)) ||
	    !BIO_meth_set_destroy(m, BIO_meth_get_destroy(s))) {
		BIO_meth_free(m);
		return NULL;
	}
	return m;
}

/* Trust anchors and the client certificate into ctx.  0, or -KVC_INVALID
 * with the file and the reason in c's message. */
static int load_files(kvc_conn *c, SSL_CTX *ctx, const struct kvc_tls_opts *o)
{
	const char *key = o->key_file ? o->key_file : o->cert_file;

	if (o->ca_file || o->ca_dir) {
		if (!SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir))
			goto ca;
	} else if (!SSL_CTX_set_default_verify_paths(ctx)) {
		goto ca;
	}
	if (!o->cert_file && o->key_file) {
		kvc_set_err(c, "TLS: a client key needs a client certificate");
		return -KVC_INVALID;
	}
	if (!o->cert_file)
		return 0;
	if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
		kvc_set_err(c, "TLS: client certificate %s: %s", o->cert_file,
			    ossl_reason());
		return -KVC_INVALID;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		kvc_set_err(c, "TLS: client key %s: %s", key, ossl_reason());
		return -KVC_INVALID;
	}
	return 0;
ca:
	kvc_set_err(c, "TLS: CA %s: %s",
		    o->ca_file ? o->ca_file
			       : (o->ca_dir ? o->ca_dir : "(system default)"),
		    ossl_reason());
	return -KVC_INVALID;
}

void kvc_tls_free(kvc_conn *c)
{
	kvc_tls_drop(c);
	SSL_CTX_free(c->tls_ctx);
	BIO_meth_free(c->bio_meth);
	free(c->tls_name);
	c->tls_ctx = c->bio_meth = NULL;
	c->tls_name = NULL;
	c->tls_insecure = 0;
}

int kvc_set_tls(kvc_conn *c, const struct kvc_tls_opts *o)
{
	SSL_CTX *ctx;
	BIO_METHOD *m = NULL;
	char *name = NULL;
	int rc = -KVC_NOMEM;

	if (!o) {
		kvc_tls_free(c);
		return 0;
	}
	if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
		kvc_set_err(c, "TLS: %s", ossl_reason());
		return -KVC_NOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* A server that closes without close_notify has simply closed: kvd
	 * does so after a fatal error reply, as over plain TCP. */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_verify(ctx, o->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
			   NULL);
	if ((rc = load_files(c, ctx, o)))
		goto fail;
	rc = -KVC_NOMEM;
	if (o->server_name && !*o->server_name) {
		kvc_set_err(c, "TLS: empty server name");
		rc = -KVC_INVALID;
		goto fail;
	}
	if (o->server_name && !(name = strdup(o->server_name)))
		goto fail;
	if (!(m = make_bio_method()))
		goto fail;
	kvc_tls_free(c);
	c->tls_ctx = ctx;
	c->bio_meth = m;
	c->tls_name = name;
	c->tls_insecure = o->insecure != 0;
	c->tls_has_cert = o->cert_file != NULL;
	return 0;
fail:
	if (rc == -KVC_NOMEM)
		kvc_set_err(c, "TLS: out of memory");
	free(name);
	BIO_meth_free(m);
	SSL_CTX_free(ctx);
	return rc;
}

/* ===================== Handshake ===================== */

static int is_ip(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, s, buf) == 1 ||
	       inet_pton(AF_INET6, s, buf) == 1;
}

/* A fresh SSL on c->fd, with the name to send and to check. */
static int make_ssl(kvc_conn *c, const char *host)
{
	const char *name = c->tls_name ? c->tls_name : host;
	SSL *ssl = SSL_new(c->tls_ctx);
	BIO *bio = ssl ? BIO_new(c->bio_meth) : NULL;

	if (!bio) {
		SSL_free(ssl);
		return kvc_fail(c, KVC_NOMEM, "%s: TLS: out of memory",
				c->peer);
	}
	BIO_set_fd(bio, c->fd, BIO_NOCLOSE);
	SSL_set_bio(ssl, bio, bio);
	c->ssl = ssl;
	/* RFC 6066: SNI is a host name, never an address. */
	if (!is_ip(name) && !SSL_set_tlsext_host_name(ssl, name))
		goto fail;
	if (c->tls_insecure)
		return 0;
	if (is_ip(name)
		? !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
		: !SSL_set1_host(ssl, name))
		goto fail;
	return 0;
fail:
	return kvc_fail(c, KVC_CONNECT, "%s: TLS: server name %s: %s", c->peer,
			name, ossl_reason());
}

/* Why a handshake failed, in c's message. */
static int handshake_failed(kvc_conn *c, int err)
{
	long v = SSL_get_verify_result(c->ssl);

	if (err == SSL_ERROR_SSL && v != X509_V_OK) {
		ERR_clear_error();
		return kvc_fail(c, KVC_CONNECT,
				"%s: TLS handshake: certificate verify "
				"failed: %s",
				c->peer, X509_verify_cert_error_string(v));
	}
	if (err == SSL_ERROR_SSL)
		return kvc_fail(c, KVC_CONNECT, "%s: TLS handshake: %s",
				c->peer, ossl_reason());
	ERR_clear_error();
	if (err == SSL_ERROR_SYSCALL && errno && errno != ECONNRESET)
		return kvc_fail(c, KVC_CONNECT, "%s: TLS handshake: %m",
				c->peer);
	return kvc_fail(c, KVC_CONNECT,
			"%s: TLS handshake: connection closed by the server "
			"(is it a TLS port?)",
			c->peer);
}

/* The handshake, on the socket conn.c has just connected, within the
 * connect deadline.  0, or a sticky failure with its reason. */
int kvc_tls_handshake(kvc_conn *c, const char *host, uint64_t deadline)
{
	int rc;

	if ((rc = make_ssl(c, host)))
		return rc;
	ERR_clear_error();
	for (;;) {
		int r, err;
		short ev;

		errno = 0;
		if ((r = SSL_connect(c->ssl)) == 1) {
			c->tls_fresh = 1;
			return 0;
		}
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ)
			ev = POLLIN;
		else if (err == SSL_ERROR_WANT_WRITE)
			ev = POLLOUT;
		else
			return handshake_failed(c, err);
		rc = kvc_wait_fd(c->fd, ev, deadline);
		if (rc == -KVC_TIMEOUT)
			return kvc_fail(c, KVC_TIMEOUT,
					"%s: TLS handshake timed out after "
					"%d ms",
					c->peer, c->connect_ms);
		if (rc)
			return kvc_fail(c, KVC_IO, "%s: poll: %m", c->peer);
	}
}

/* ===================== Bytes ===================== */

/* The server closed as soon as the handshake was over, and we had no
 * certificate to give: in TLS 1.3 the server checks ours only then, and
 * its alert can be lost to the reset. */
int kvc_tls_closed_early(const kvc_conn *c)
{
	return c->tls_fresh && !c->tls_has_cert;
}

/* 0 with *done bytes written, 1 when the socket is full, or a failure. */
int kvc_tls_send(kvc_conn *c, const void *p, size_t n, size_t *done)
{
	int r, err;

	ERR_clear_error();
	errno = 0;
	r = SSL_write_ex(c->ssl, p, n, done);
	if (r == 1)
		return 0;
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
		return 1;
	if (err == SSL_ERROR_SSL)
		return kvc_fail(c, KVC_IO, "%s: TLS send: %s", c->peer,
				ossl_reason());
	ERR_clear_error();
	if (err == SSL_ERROR_SYSCALL && errno && errno != ECONNRESET &&
	    errno != EPIPE)
		return kvc_fail(c, KVC_IO, "%s: TLS send: %m", c->peer);
	if (kvc_tls_closed_early(c))
		return kvc_fail(c, KVC_CLOSED,
				"%s: connection closed by the server right "
				"after the TLS handshake (does it require a "
				"client certificate?)",
				c->peer);
	return kvc_fail(c, KVC_CLOSED, "%s: connection closed by the server",
			c->peer);
}

/* 0 with *got bytes read, 1 when none are there yet, 2 at the end of the
 * stream (a reset included, as for plain TCP), or a failure. */
int kvc_tls_recv(kvc_conn *c, void *p, size_t n, size_t *got)
{
	int r, err;

	ERR_clear_error();
	c->tls_rd_wants_w = 0;
	errno = 0;
	r = SSL_read_ex(c->ssl, p, n, got);
	if (r == 1) {
		c->tls_fresh = 0;
		return 0;
	}
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ)
		return 1;
	/* A key update's answer waits for a writable socket: the caller
	 * polls POLLOUT while kvc_want_write() says so. */
	if (err == SSL_ERROR_WANT_WRITE) {
		c->tls_rd_wants_w = 1;
		return 1;
	}
	if (err == SSL_ERROR_SSL)
		return kvc_fail(c, KVC_IO, "%s: TLS recv: %s", c->peer,
				ossl_reason());
	ERR_clear_error();
	if (err == SSL_ERROR_SYSCALL && errno && errno != ECONNRESET)
		return kvc_fail(c, KVC_IO, "%s: TLS recv: %m", c->peer);
	return 2;
}

/* Decrypted bytes OpenSSL holds that the socket will not signal. */
int kvc_tls_pending(const kvc_conn *c)
{
	return c->ssl && SSL_pending(c->ssl) > 0;
}

/* Forget the connection's TLS state; the socket is closed by conn.c. */
void kvc_tls_drop(kvc_conn *c)
{
	SSL_free(c->ssl);
	c->ssl = NULL;
	c->tls_rd_wants_w = c->tls_fresh = 0;
}
