/* tls.h - TLS on kvd's listeners, over memory BIOs.
 *
 * The io loop keeps owning the sockets and their io_uring operations: the
 * ciphertext a recv brings is written into the connection's read BIO, and
 * SSL_read hands the plaintext to kvd_conn_input, exactly as a plain
 * connection's bytes go; replies are SSL_written into the write BIO, whose
 * bytes the loop sends as it sends a plain connection's replies.  Nothing
 * here blocks: a handshake advances as its bytes arrive.  Every OpenSSL
 * call in kvd is in tls.c.
 *
 * The SSL_CTX (certificate, key, CA, protocols, ciphers) is built at start
 * and again on SIGHUP; a new context that cannot be built (an unreadable
 * file, a key that does not match, an expired certificate) leaves the old
 * one in place.  A connection keeps the context it began with.
 */
#ifndef KVD_TLS_H
#define KVD_TLS_H

#include <stddef.h>
#include <stdint.h>

struct kvd_config;
struct kvd_conn;
struct kvd_tls;

/* Whether the configuration asks for TLS on any listener. */
int kvd_tls_wanted(const struct kvd_config *cfg);
/* Build the first context (at start, --test-config too).  0, or -1 with
 * the reason in err. */
int kvd_tls_setup(const struct kvd_config *cfg, char *err, size_t errlen);
/* Once the log is open: one line saying where TLS runs, with what. */
void kvd_tls_log(const struct kvd_config *cfg);
/* SIGHUP: build a new context for new connections; logs the outcome. */
void kvd_tls_reload(const struct kvd_config *cfg);
void kvd_tls_cleanup(void);

/* A TLS connection begins: its handshake is timed by request-timeout.
 * 0, or -1 (out of memory: the caller closes it). */
int kvd_tls_open(struct kvd_conn *c);
void kvd_tls_free(struct kvd_tls *t);

/* Ciphertext from the socket: advance the handshake, feed the plaintext
 * to kvd_conn_input.  A failure is logged and closes the connection. */
void kvd_tls_input(struct kvd_conn *c, const uint8_t *p, size_t n);
/* Encrypt c->out (plaintext replies) onto c->tx, with whatever the
 * handshake has to send; c->tx must hold nothing unsent.  0, or -1: the
 * connection must go now. */
int kvd_tls_seal(struct kvd_conn *c);
/* Whether the TLS layer has bytes to send that c->tx does not hold yet. */
int kvd_tls_pending(const struct kvd_conn *c);
/* Ciphertext held for a record not yet complete (counted in the pre-auth
 * input cap). */
size_t kvd_tls_buffered(const struct kvd_conn *c);
/* Whether the handshake is done. */
int kvd_tls_ready(const struct kvd_conn *c);
/* Closing: queue the close_notify alert.  1 when there is something to
 * send first, 0 when the connection may be shut now. */
int kvd_tls_farewell(struct kvd_conn *c);

#endif
