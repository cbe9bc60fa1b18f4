/* kvc_int.h - libkvclient's private structures, shared by its modules.
 *
 *   conn.c     connecting, the socket, waiting, flushing, reading bytes
 *   request.c  encoding requests (kvc_send_*) and the queue of their opcodes
 *   reply.c    splitting input into frames, checking each reply against its
 *              request, and the kvc_reply_* / kvc_map_* accessors
 *   sync.c     the synchronous calls and the scan iterator
 *   url.c      kvd://, kvds:// and unix:// URLs, and kvc_connect_url
 *   tls.c      TLS over the socket (OpenSSL): options, handshake, bytes
 *
 * Nothing here is exported: the shared library is built with hidden
 * visibility and a version script, so only kvclient.h's KVC_API names leave.
 */
#ifndef KVC_INT_H
#define KVC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"
#include "kvclient.h"

/* Reads ask the kernel for at least this much at a time. */
#define KVC_READ_CHUNK (64u << 10)
/* Buffers shrink back once a burst larger than this is over. */
#define KVC_BUF_KEEP (1u << 20)

/* One request whose reply is still to come: what to check the reply
 * against. */
struct kvc_pend {
	uint8_t op;
	uint8_t flags; /* SCAN: KVC_SCAN_KEYS_ONLY */
	uint32_t n; /* MGET: keys asked for, so the reply must have as many */
};

struct kvc_reply {
	kvc_conn *c;
	struct kvc_pend req;
	int status;	       /* 0 or a negative KVC_* */
	const uint8_t *res;    /* first result after the status, or NULL */
	const uint8_t *end;    /* end of the frame body */
	const uint8_t *it;     /* MGET, SCAN: the next item */
	uint32_t left;	       /* MGET, SCAN: items left to hand out */
	const uint8_t *cursor; /* SCAN: the cursor object */
	const char *error;     /* the server's text, or "" */
};

struct kvc_conn {
	int fd;
	int broken;   /* 0, or the sticky negative status of a dead link */
	int eof;      /* the server closed its side */
	int nonblock; /* kvc_flush / kvc_read_reply must not wait */
	int connect_ms, io_ms;
	size_t max_reply;
	uint64_t gen; /* bumped when handed-out bytes die: scans check it */

	struct kv_buf out; /* encoded requests not yet written */
	size_t out_off;	   /* bytes of out already written */
	struct kv_buf in;  /* bytes received */
	size_t in_off;	   /* bytes of in already handed out as replies */

	struct kvc_pend *q; /* ring of pending requests */
	size_t q_cap, q_head, q_len;

	char *password; /* sent as AUTH by every kvc_connect, or NULL */
	size_t password_len;

	/* TLS (tls.c): OpenSSL's types stay out of this header. */
	void *tls_ctx;	    /* SSL_CTX from kvc_set_tls, or NULL: plain */
	void *ssl;	    /* SSL of the open connection, or NULL */
	void *bio_meth;	    /* BIO_METHOD sending with MSG_NOSIGNAL */
	char *tls_name;	    /* kvc_tls_opts.server_name, or NULL */
	int tls_insecure;   /* no verification */
	int tls_has_cert;   /* a client certificate is configured */
	int tls_fresh;	    /* handshake done, nothing read since */
	int tls_rd_wants_w; /* SSL_read wants the socket writable */

	struct kvc_reply reply; /* the one reply handed out */
	int64_t doc_code;	/* the last reply's MongoDB code (DOC_ERROR) */
	char peer[300];		/* "host:port", for messages */
	char err[512];
};

/* conn.c */
void kvc_set_err(kvc_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int kvc_fail(kvc_conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t kvc_now_ms(void);
int kvc_closed(kvc_conn *c);
int kvc_io_write(kvc_conn *c);
int kvc_io_read(kvc_conn *c, size_t want);
int kvc_io_wait(kvc_conn *c, int out, uint64_t deadline);
int kvc_wait_fd(int fd, short events, uint64_t deadline);
uint64_t kvc_deadline(const kvc_conn *c);
int kvc_connect_any(kvc_conn *c, const char *host, unsigned port, int is_unix,
		    int tls);

/* request.c */
int kvc_queue_push(kvc_conn *c, const struct kvc_pend *p);
void kvc_queue_reset(kvc_conn *c);

/* tls.c */
int kvc_tls_handshake(kvc_conn *c, const char *host, uint64_t deadline);
int kvc_tls_send(kvc_conn *c, const void *p, size_t n, size_t *done);
int kvc_tls_recv(kvc_conn *c, void *p, size_t n, size_t *got);
int kvc_tls_pending(const kvc_conn *c);
int kvc_tls_closed_early(const kvc_conn *c);
void kvc_tls_drop(kvc_conn *c);
void kvc_tls_free(kvc_conn *c);

/* reply.c */
int kvc_next_reply(kvc_conn *c, int wait, kvc_reply **rp);

/* Queue op with nargs arguments already encoded in args (msgpack): the
 * replication requests of a kvd replica, which links this library's
 * objects.  Not exported from libkvclient.so. */
int kvc_send_raw(kvc_conn *c, unsigned op, const void *args, size_t len,
		 uint32_t nargs);

#endif
