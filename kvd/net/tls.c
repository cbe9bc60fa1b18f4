/* tls.c - TLS over memory BIOs for the io loop's connections (see tls.h).
 *
 * OpenSSL never touches a socket here: the read BIO is filled from the
 * recv path and the write BIO drained into the send path, so the io_uring
 * loop, its buffers, limits and timers apply to TLS connections unchanged.
 * The only OpenSSL calls in kvd are in this file.
 */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "log.h"
#include "loop.h"

/* Plaintext is handed to the parser in pieces of this size; replies are
 * encrypted in pieces of this size (a few records each). */
#define PLAIN_CHUNK (16u << 10)
#define SEAL_CHUNK (64u << 10)

struct kvd_tls {
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	uint8_t ready;	  /* handshake done */
	uint8_t failed;	  /* a fatal error: send nothing more */
	uint8_t farewell; /* close_notify queued */
};

/* The context new connections get.  The main thread replaces it on
 * SIGHUP while io threads take references from it: the lock covers only
 * the pointer and its reference count. */
static SSL_CTX *cur_ctx;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

/* Handshake failures are a peer's doing: one line a second per thread. */
static __thread struct kvd_log_limit fail_limit = KVD_LOG_LIMIT_INIT(1000);

/* The first error on OpenSSL's queue as text (or what), and the queue
 * cleared. */
static const char *ssl_reason(char *buf, size_t len, const char *what)
{
	unsigned long e = ERR_peek_last_error();

	if (e)
		ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "%s", what);
	ERR_clear_error();
	return buf;
}

int kvd_tls_wanted(const struct kvd_config *cfg)
{
	return cfg->tls_port || cfg->tls_resp_port || cfg->tls_mongo_port ||
	       (cfg->tls_metrics && cfg->metrics_port);
}

/* tls-protocols: "TLSv1.2 TLSv1.3" (either or both) -> a version range. */
static int set_protocols(SSL_CTX *ctx, const char *s, char *err, size_t errlen)
{
	int lo = 0, hi = 0;
	char buf[64], *tok, *save = NULL;

	if (!*s)
		s = "TLSv1.2 TLSv1.3";
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, " ,", &save); tok;
	     tok = strtok_r(NULL, " ,", &save)) {
		int v;

		if (!strcasecmp(tok, "TLSv1.2"))
			v = TLS1_2_VERSION;
		else if (!strcasecmp(tok, "TLSv1.3"))
			v = TLS1_3_VERSION;
		else {
			snprintf(
			    err, errlen,
			    "tls-protocols: '%s' is not TLSv1.2 or TLSv1.3",
			    tok);
			return -1;
		}
		lo = !lo || v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (!lo) {
		snprintf(err, errlen, "tls-protocols: no protocol named");
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, lo);
	SSL_CTX_set_max_proto_version(ctx, hi);
	return 0;
}

/* A certificate outside its validity would fail every handshake. */
static int check_validity(SSL_CTX *ctx, char *err, size_t errlen)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);

	if (!x) {
		snprintf(err, errlen, "tls-cert-file holds no certificate");
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
		snprintf(err, errlen,
			 "the certificate in tls-cert-file has "
			 "expired");
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
		snprintf(err, errlen,
			 "the certificate in tls-cert-file is "
			 "not valid yet");
		return -1;
	}
	return 0;
}

/* The certificate, key and CA named by cfg. */
static int load_files(SSL_CTX *ctx, const struct kvd_config *cfg, char *err,
		      size_t errlen)
{
	char why[256];
	const char *ca_file =
	    cfg->tls_ca_cert_file[0] ? cfg->tls_ca_cert_file : NULL;
	const char *ca_dir =
	    cfg->tls_ca_cert_dir[0] ? cfg->tls_ca_cert_dir : NULL;

	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1) {
		snprintf(err, errlen, "tls-cert-file %s: %s",
			 cfg->tls_cert_file,
			 ssl_reason(why, sizeof(why), "cannot load"));
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file,
					SSL_FILETYPE_PEM) != 1) {
		snprintf(err, errlen, "tls-key-file %s: %s", cfg->tls_key_file,
			 ssl_reason(why, sizeof(why), "cannot load"));
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen,
			 "tls-key-file %s does not match tls-cert-file %s",
			 cfg->tls_key_file, cfg->tls_cert_file);
		ERR_clear_error();
		return -1;
	}
	if (check_validity(ctx, err, errlen))
		return -1;
	if ((ca_file || ca_dir) &&
	    SSL_CTX_load_verify_locations(ctx, ca_file, ca_dir) != 1) {
		snprintf(err, errlen, "tls-ca-cert-%s %s: %s",
			 ca_file ? "file" : "dir", ca_file ? ca_file : ca_dir,
			 ssl_reason(why, sizeof(why), "cannot load"));
		return -1;
	}
	if (ca_file) { /* the CAs named in the CertificateRequest */
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);

		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
		ERR_clear_error();
	}
	return 0;
}

static SSL_CTX *ctx_build(const struct kvd_config *cfg, char *err,
			  size_t errlen)
{
	char why[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	int verify = SSL_VERIFY_NONE;

	if (!ctx) {
		snprintf(err, errlen, "SSL_CTX_new: %s",
			 ssl_reason(why, sizeof(why), "out of memory"));
		return NULL;
	}
	/* No renegotiation (a peer could make us do handshakes at will), no
	 * compression (CRIME); release idle connections' buffers. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
				     SSL_OP_NO_COMPRESSION |
				     (cfg->tls_prefer_server_ciphers
					  ? SSL_OP_CIPHER_SERVER_PREFERENCE
					  : 0));
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (set_protocols(ctx, cfg->tls_protocols, err, errlen))
		goto fail;
	if (cfg->tls_ciphers[0] &&
	    SSL_CTX_set_cipher_list(ctx, cfg->tls_ciphers) != 1) {
		snprintf(err, errlen, "tls-ciphers '%s': %s", cfg->tls_ciphers,
			 ssl_reason(why, sizeof(why), "no usable cipher"));
		goto fail;
	}
	if (cfg->tls_ciphersuites[0] &&
	    SSL_CTX_set_ciphersuites(ctx, cfg->tls_ciphersuites) != 1) {
		snprintf(err, errlen, "tls-ciphersuites '%s': %s",
			 cfg->tls_ciphersuites,
			 ssl_reason(why, sizeof(why), "no usable suite"));
		goto fail;
	}
	if (load_files(ctx, cfg, err, errlen))
		goto fail;
	if (cfg->tls_auth_clients == KVD_TLS_AUTH_YES)
		verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	else if (cfg->tls_auth_clients == KVD_TLS_AUTH_OPTIONAL)
		verify = SSL_VERIFY_PEER;
	SSL_CTX_set_verify(ctx, verify, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* "CN=..., expires ..." of the context's certificate, for the log. */
static void describe(SSL_CTX *ctx, char *buf, size_t len)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);
	BIO *b = BIO_new(BIO_s_mem());
	int n = 0;

	buf[0] = '\0';
	if (!x || !b)
		goto out;
	X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_ONELINE);
	BIO_puts(b, ", valid until ");
	ASN1_TIME_print(b, X509_get0_notAfter(x));
	n = BIO_read(b, buf, (int)len - 1);
	buf[n > 0 ? n : 0] = '\0';
out:
	BIO_free(b);
}

int kvd_tls_setup(const struct kvd_config *cfg, char *err, size_t errlen)
{
	if (!kvd_tls_wanted(cfg))
		return 0;
	return (cur_ctx = ctx_build(cfg, err, errlen)) ? 0 : -1;
}

void kvd_tls_log(const struct kvd_config *cfg)
{
	char what[256];

	if (!cur_ctx)
		return;
	describe(cur_ctx, what, sizeof(what));
	log_info("TLS on port %u, resp port %u, metrics %s (0: none): %s; %s "
		 "over memory BIOs (kernel TLS offload not used)",
		 cfg->tls_port, cfg->tls_resp_port,
		 cfg->tls_metrics && cfg->metrics_port ? "yes" : "no", what,
		 OpenSSL_version(OPENSSL_VERSION));
}

void kvd_tls_reload(const struct kvd_config *cfg)
{
	char err[768], what[256];
	SSL_CTX *ctx, *old;

	if (!cur_ctx)
		return; /* no TLS listener: tls-port needs a restart */
	if (!(ctx = ctx_build(cfg, err, sizeof(err)))) {
		log_error("SIGHUP: TLS certificates not reloaded, the old ones "
			  "stay in use: %s",
			  err);
		return;
	}
	pthread_mutex_lock(&ctx_lock);
	old = cur_ctx;
	cur_ctx = ctx;
	pthread_mutex_unlock(&ctx_lock);
	SSL_CTX_free(old); /* connections still using it hold references */
	describe(ctx, what, sizeof(what));
	log_info("SIGHUP: TLS certificates reloaded: %s", what);
}

void kvd_tls_cleanup(void)
{
	SSL_CTX_free(cur_ctx);
	cur_ctx = NULL;
}

int kvd_tls_open(struct kvd_conn *c)
{
	struct kvd_tls *t = calloc(1, sizeof(*t));
	SSL_CTX *ctx;

	if (!t)
		return -1;
	pthread_mutex_lock(&ctx_lock);
	ctx = cur_ctx;
	SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&ctx_lock);
	t->ssl = SSL_new(ctx);
	SSL_CTX_free(ctx); /* the SSL holds its own reference */
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return -1;
	}
	/* An empty read BIO means "more later", not end of file. */
	BIO_set_mem_eof_return(t->rbio, -1);
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	SSL_set_accept_state(t->ssl);
	c->tls = t;
	c->req_ms = c->io->now_ms; /* the handshake's request-timeout */
	return 0;
}

void kvd_tls_free(struct kvd_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t);
}

/* A fatal error: log why (rate-limited), send the alert OpenSSL queued,
 * then close. */
static void tls_fail(struct kvd_conn *c, const char *stage)
{
	char why[256];

	c->tls->failed = 1;
	if (!c->tls->ready) /* its handshake slot goes to the next one */
		kvd_io_handshake_done(c);
	ssl_reason(why, sizeof(why), "protocol error");
	kvd_log_ratelimited(&fail_limit, KVD_LOG_WARN,
			    "connection %llu: TLS %s failed: %s; closing",
			    (unsigned long long)c->id, stage, why);
	c->flags |= CONN_CLOSING;
	c->in.len = 0;
}

/* Advance the handshake; 1 when it is done, 0 for more bytes, -1 failed. */
static int handshake(struct kvd_conn *c)
{
	struct kvd_tls *t = c->tls;
	int rc = SSL_do_handshake(t->ssl);

	if (rc == 1) {
		t->ready = 1;
		c->req_ms = 0; /* the handshake's timer stops */
		kvd_io_handshake_done(c);
		return 1;
	}
	rc = SSL_get_error(t->ssl, rc);
	if (rc == SSL_ERROR_WANT_READ || rc == SSL_ERROR_WANT_WRITE)
		return 0;
	tls_fail(c, "handshake");
	return -1;
}

void kvd_tls_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	static __thread uint8_t plain[PLAIN_CHUNK];
	struct kvd_tls *t = c->tls;

	kvd_io_mark(c); /* the handshake or a reply may have bytes to send */
	if (t->failed || (c->flags & (CONN_CLOSING | CONN_DEAD)))
		return;
	ERR_clear_error();
	if (BIO_write(t->rbio, p, (int)n) != (int)n) {
		tls_fail(c, "input");
		return;
	}
	if (!t->ready && handshake(c) <= 0)
		return;
	while (!(c->flags & (CONN_CLOSING | CONN_DEAD))) {
		size_t got = 0;
		int rc = SSL_read_ex(t->ssl, plain, sizeof(plain), &got);

		if (rc == 1) {
			kvd_conn_input(c, plain, got);
			continue;
		}
		rc = SSL_get_error(t->ssl, rc);
		if (rc == SSL_ERROR_ZERO_RETURN) /* the peer's close_notify */
			c->flags |= CONN_EOF;
		else if (rc != SSL_ERROR_WANT_READ &&
			 rc != SSL_ERROR_WANT_WRITE)
			tls_fail(c, "read");
		break;
	}
	/* A record begun but not finished is a request left incomplete. */
	if (BIO_ctrl_pending(t->rbio) && !c->req_ms)
		c->req_ms = c->io->now_ms;
}

/* Move the write BIO's bytes onto c->tx. */
static int drain(struct kvd_conn *c)
{
	size_t n;

	while ((n = BIO_ctrl_pending(c->tls->wbio)) > 0) {
		int got;

		if (kv_buf_reserve(&c->tx, n))
			return -1;
		got = BIO_read(c->tls->wbio, c->tx.data + c->tx.len, (int)n);
		if (got <= 0)
			return -1;
		c->tx.len += (size_t)got;
	}
	return 0;
}

int kvd_tls_seal(struct kvd_conn *c)
{
	struct kvd_tls *t = c->tls;
	size_t off = 0;

	c->tx.len = c->tx_off = 0;
	ERR_clear_error();
	/* Before the handshake is done there are no replies; after a
	 * failure only the alert goes out. */
	while (t->ready && !t->failed && off < c->out.len) {
		size_t w = 0, k = c->out.len - off;

		if (k > SEAL_CHUNK)
			k = SEAL_CHUNK;
		if (SSL_write_ex(t->ssl, c->out.data + off, k, &w) != 1) {
			tls_fail(c, "write");
			return -1;
		}
		off += w;
		if (drain(c))
			return -1;
	}
	if (t->ready || t->failed) {
		c->out.len = 0;
		kv_buf_trim(&c->out, 64 << 10);
	}
	return drain(c);
}

int kvd_tls_pending(const struct kvd_conn *c)
{
	return c->tls && BIO_ctrl_pending(c->tls->wbio) > 0;
}

size_t kvd_tls_buffered(const struct kvd_conn *c)
{
	return c->tls ? BIO_ctrl_pending(c->tls->rbio) : 0;
}

int kvd_tls_ready(const struct kvd_conn *c)
{
	return c->tls && c->tls->ready;
}

int kvd_tls_farewell(struct kvd_conn *c)
{
	struct kvd_tls *t = c->tls;

	if (!t || t->farewell || t->failed || !t->ready ||
	    (c->flags & CONN_ABORT))
		return 0;
	t->farewell = 1;
	ERR_clear_error();
	SSL_shutdown(t->ssl);
	ERR_clear_error();
	return kvd_tls_pending(c);
}
