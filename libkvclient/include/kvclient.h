/* kvclient.h - libkvclient, the C client library of kvd: its only public
 * header.
 *
 * Overview
 * --------
 * A kvc_conn is one TCP (or Unix socket) connection to a kvd server.  Make
 * it with kvc_create(), set timeouts (and the password, kvc_set_password,
 * if the server has requirepass; TLS options, kvc_set_tls, for a TLS
 * port), kvc_connect() (or kvc_connect_unix(), or kvc_connect_url() with a
 * kvd://, kvds:// or unix:// URL), use it, kvc_close().
 * The library never reconnects by itself: after a sticky error, calling
 * kvc_connect() again is the reconnect, and it sends AUTH again.
 * Every server operation has two forms:
 *
 *   - a synchronous call (kvc_get, kvc_put, ...): sends the request, waits
 *     for its reply and decodes it;
 *   - a queued form (kvc_send_get, kvc_send_put, ...): appends the request
 *     to the connection's output buffer and returns at once.  Many queued
 *     requests leave in one write; kvc_read_reply() then returns their
 *     replies one by one, in request order (pipelining, as hiredis's
 *     redisAppendCommand / redisGetReply).
 *
 * For a program with its own event loop, kvc_fd(), kvc_flush(),
 * kvc_consume_input() and kvc_set_nonblock() drive the same connection
 * without ever blocking (as libpq's PQsocket / PQflush / PQconsumeInput).
 *
 * Return values
 * -------------
 * Every call that can fail returns 0 on success or a negative status code:
 * -KVC_NOT_FOUND, -KVC_TIMEOUT, ...  Codes below KVC_CLIENT_STATUS_MIN (64)
 * are sent by the server; codes from 64 up are the library's own.  The codes
 * are generated from the table kvd itself uses (kvclient/kv_status_list.h),
 * so the two can never disagree.  kvc_strerror() gives the text of a code,
 * kvc_errmsg() the text of the last failure on a connection, with details
 * (host and port, the server's message).
 *
 * Errors that leave a connection unusable (-KVC_CLOSED, -KVC_TIMEOUT,
 * -KVC_PROTOCOL, -KVC_IO) are sticky: every later call on that connection
 * returns the same code, until kvc_connect() is called again.  Server errors
 * (codes below 64) and -KVC_INVALID, -KVC_NOMEM, -KVC_AGAIN are not: the
 * connection stays in step and can go on being used.
 *
 * Memory rules
 * ------------
 *  - Keys, values and other arguments are copied into the output buffer
 *    before a call returns: the caller may reuse them at once.
 *  - Everything the library hands out (a kvc_val's bytes, a kvc_reply, the
 *    text of kvc_errmsg) is owned by the connection and points into its
 *    input buffer, without copying.  It stays valid until the next call on
 *    the same connection, or on a scan of it, other than the kvc_reply_*
 *    accessors and kvc_map_*, kvc_errmsg, kvc_fd, kvc_pending and
 *    kvc_want_write.  Copy what must live longer.  Nothing is freed by the
 *    caller except through kvc_close() and kvc_scan_close().
 *  - In a kvc_val that reports a value, a key that does not exist (MGET) is
 *    { NULL, 0 }; an empty value is { non-NULL, 0 }.
 *  - A reply frame longer than the connection's limit (kvc_set_max_reply,
 *    KVC_DEFAULT_MAX_REPLY by default) is refused with -KVC_PROTOCOL before
 *    any memory is allocated for it.
 *
 * Threads and signals
 * -------------------
 * A connection, its replies and its scans may be used by one thread at a
 * time; different connections are independent, and the library has no
 * global state; kvc_url_parse() and kvc_url_free() need no connection at
 * all.  The library never raises SIGPIPE (it sends with
 * MSG_NOSIGNAL) and installs no signal handler.  Do not use one connection
 * in both processes after fork().
 */
#ifndef KVCLIENT_H
#define KVCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "kvclient/kv_status_list.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KVC_API __attribute__((visibility("default")))
#else
#define KVC_API
#endif

/* ===================== Constants ===================== */

/* Status codes: KVC_OK, KVC_NOT_FOUND, ..., KVC_TIMEOUT, KVC_END. */
enum kvc_status {
#define KVC_STATUS_ENUM(name, num, text) KVC_##name = num,
	KV_STATUS_LIST(KVC_STATUS_ENUM)
#undef KVC_STATUS_ENUM
};

/* The first status that never travels on the wire. */
#define KVC_CLIENT_STATUS_MIN 64

#define KVC_DEFAULT_PORT 7379
/* The port of a kvds:// URL without one (kvd has no TLS port unless
 * --tls-port is given: this is only the URL's default). */
#define KVC_DEFAULT_TLS_PORT 7389
#define KVC_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define KVC_DEFAULT_MAX_REPLY (64u << 20)

/* PUT flags. */
#define KVC_PUT_NX 1u	   /* store only if the key is absent, else EXISTS */
#define KVC_PUT_XX 2u	   /* store only if the key exists, else NOT_FOUND */
#define KVC_PUT_KEEPTTL 4u /* keep the key's current expiry */

/* SCAN flags. */
#define KVC_SCAN_KEYS_ONLY 1u /* values are not sent: { NULL, 0 } */
/* each key's type and time to live too (kvc_scan_next_typed,
 * kvc_reply_next_typed); not with KVC_SCAN_KEYS_ONLY */
#define KVC_SCAN_TYPED 2u
/* The types a typed scan gives. */
#define KVC_TYPE_STRING 0u
#define KVC_TYPE_HASH 1u

/* Version 2 operations' flags (docs/protocol.md). */
#define KVC_RENAME_NX 1u      /* RENAME only if the new name is free */
#define KVC_COPY_REPLACE 1u   /* COPY over an existing destination */
#define KVC_GETEX_PERSIST 1u  /* GETEX: remove the expiry (ttl_ms 0) */
#define KVC_GETEX_AT 2u	      /* GETEX: ttl_ms is a Unix time in ms */
#define KVC_BIT_RANGE_BITS 1u /* BITCOUNT, BITPOS: the range is in bits */
/* Documents: kvc_doc_update and kvc_doc_delete flags. */
#define KVC_DOC_UPSERT 1u /* update: insert when nothing matches */
#define KVC_DOC_MULTI 2u  /* every match, not the first */
#define KVC_BITOP_AND 0u
#define KVC_BITOP_OR 1u
#define KVC_BITOP_XOR 2u
#define KVC_BITOP_NOT 3u
/* Operation numbers for kvc_txn_op (common/kv_proto.h's). */
#define KVC_OP_GET 3u
#define KVC_OP_PUT 4u
#define KVC_OP_DEL 5u
#define KVC_OP_MGET 6u
#define KVC_OP_MPUT 7u
#define KVC_OP_MDEL 8u
#define KVC_OP_EXISTS 9u
#define KVC_OP_INCR 13u
#define KVC_OP_APPEND 14u
#define KVC_OP_EXPIRE 15u
#define KVC_OP_TTL 16u
#define KVC_OP_GETDEL 17u
#define KVC_OP_RENAME 22u
#define KVC_OP_COPY 23u
#define KVC_OP_GETEX 24u
#define KVC_OP_INCRBYFLOAT 25u
#define KVC_OP_GETRANGE 26u
#define KVC_OP_SETRANGE 27u
#define KVC_OP_SETBIT 28u
#define KVC_OP_GETBIT 29u
#define KVC_OP_BITCOUNT 30u
#define KVC_OP_BITPOS 31u
#define KVC_OP_BITOP 32u

/* One argument of a TXN sub-request. */
enum { KVC_ARG_NIL, KVC_ARG_BYTES, KVC_ARG_UINT, KVC_ARG_INT };
typedef struct kvc_arg {
	int type;
	const void *p; /* KVC_ARG_BYTES */
	size_t len;
	uint64_t u; /* KVC_ARG_UINT */
	int64_t i;  /* KVC_ARG_INT */
} kvc_arg;

/* One sub-request of a TXN: an operation (KVC_OP_*) and its arguments,
 * as docs/protocol.md lists them. */
typedef struct kvc_txn_op {
	unsigned op;
	const kvc_arg *args;
	size_t nargs;
} kvc_txn_op;

/* ===================== Types ===================== */

typedef struct kvc_conn kvc_conn;   /* one connection; opaque */
typedef struct kvc_reply kvc_reply; /* one reply, owned by its connection */
typedef struct kvc_scan kvc_scan;   /* a SCAN that follows its cursor */

/* Bytes: a key, a value, an encoded map.  See the memory rules above. */
typedef struct kvc_val {
	const void *p;
	size_t len;
} kvc_val;

/* ===================== Library ===================== */

/* "0.1.0": the library's version. */
KVC_API const char *kvc_version(void);

/* Text of a status code ("key not found"); accepts the negated form too.
 * Never NULL: an unknown code gives "unknown status". */
KVC_API const char *kvc_strerror(int status);

/* Name of a status code ("NOT_FOUND"); accepts the negated form too.
 * NULL for a number that is not in the table. */
KVC_API const char *kvc_status_name(int status);

/* ===================== Connections ===================== */

/* Allocate an unconnected handle: timeouts KVC_DEFAULT_CONNECT_TIMEOUT_MS
 * to connect and none for I/O, reply limit KVC_DEFAULT_MAX_REPLY, blocking.
 * Returns 0, or -KVC_NOMEM (and *connp is NULL). */
KVC_API int kvc_create(kvc_conn **connp);

/* Timeouts in milliseconds; 0 means wait for ever.  connect_ms bounds
 * kvc_connect() over all the addresses it tries (name resolution itself,
 * by getaddrinfo, is not bounded); io_ms bounds each
 * synchronous call, kvc_read_reply() and kvc_flush() in blocking mode, from
 * when the call starts to when it has its answer.  A call that runs out of
 * time returns -KVC_TIMEOUT and the connection is closed (a late reply
 * would put it out of step).  Returns 0, or -KVC_INVALID for a negative
 * value. */
KVC_API int kvc_set_timeouts(kvc_conn *c, int connect_ms, int io_ms);

/* Largest reply frame accepted, in bytes (at least 1024).  A longer frame
 * fails with -KVC_PROTOCOL before anything is allocated for it.  Set it to
 * the server's max_frame (kvc_hello) if the server's limit was raised.
 * Returns 0, or -KVC_INVALID. */
KVC_API int kvc_set_max_reply(kvc_conn *c, size_t bytes);

/* Connect to host (a name, an IPv4 or an IPv6 address) and port, or, when
 * host starts with '/', to that Unix socket path (port is then ignored).
 * Every address the name resolves to is tried in turn within the connect
 * timeout.  If c was connected, that connection is closed first and its
 * unread replies are dropped.
 * Returns 0, or:
 *   -KVC_CONNECT  refused, unreachable, or the name does not resolve;
 *   -KVC_TIMEOUT  no answer within the connect timeout;
 *   -KVC_INVALID  host is NULL or empty, port is 0 or above 65535, or a
 *                 Unix path is too long;
 *   -KVC_NOMEM.
 * On failure kvc_errmsg() names host:port and the reason. */
KVC_API int kvc_connect(kvc_conn *c, const char *host, unsigned port);

/* Connect to the Unix socket at path, which may be relative (kvc_connect
 * takes a path only when it starts with '/').  Then as kvc_connect: the
 * same errors, and AUTH when a password is set.  -KVC_INVALID also for a
 * path longer than a socket address holds (107 bytes). */
KVC_API int kvc_connect_unix(kvc_conn *c, const char *path);

/* The password every later kvc_connect(), kvc_connect_unix() and
 * kvc_connect_url() on c sends, as AUTH, right after the socket connects
 * and before the call returns: so a reconnect (which, in this library, is
 * always the caller calling one of them again) authenticates again by
 * itself.  The AUTH round trip counts against the connect timeout (the I/O
 * timeout when that is 0).  len bytes are copied (NUL bytes allowed);
 * password NULL clears it.  Does no I/O: a connection already open is not
 * authenticated by this call (use kvc_auth).
 * With a password set, kvc_connect and the others also return:
 *   -KVC_AUTH_FAILED  the server refused the password;
 *   -KVC_TIMEOUT, -KVC_CLOSED, -KVC_IO, -KVC_PROTOCOL  while waiting for
 *                     AUTH's reply;
 * and leave c unconnected (sticky, as above).  A server that has no
 * password answers AUTH with DISABLED: that is not an error, the
 * connection is usable (as libpq ignores a password nobody asked for).
 * Returns 0, -KVC_INVALID (NULL with a non-zero length, or over 4 GiB) or
 * -KVC_NOMEM. */
KVC_API int kvc_set_password(kvc_conn *c, const void *password, size_t len);

/* TLS (OpenSSL 3), for every later kvc_connect() and kvds:// URL on c.
 * Zero the struct, then fill what you need: */
struct kvc_tls_opts {
	const char *ca_file;	 /* PEM file of the CAs trusted to sign the
				  * server's certificate */
	const char *ca_dir;	 /* directory of such CAs, OpenSSL hash names
				  * (c_rehash); with neither, the system's
				  * default CA store */
	const char *cert_file;	 /* PEM client certificate (chain), for a
				  * server that asks for one; NULL: none */
	const char *key_file;	 /* its private key; NULL: in cert_file */
	const char *server_name; /* the name sent as SNI and checked against
				  * the certificate; NULL: the host given to
				  * kvc_connect() */
	int insecure;		 /* nonzero: do not verify the server's
				  * certificate at all (tests only) */
};

/* With opts, every later kvc_connect() on c (and kvc_connect_url() with a
 * kvds:// URL) runs a TLS handshake (TLS 1.2 or later) right after the
 * TCP connect, within the connect timeout, and before AUTH.  The server's
 * certificate must chain to a trusted CA, be valid now, and name the
 * server: server_name, else the host (an IP address is checked against
 * the certificate's IP addresses, and is not sent as SNI).  opts NULL
 * turns TLS off.  The strings are used during the call only: the files are
 * loaded now, so a bad one is reported here, not at connect time.  Does no
 * I/O; a connection already open is unchanged.
 * Returns 0, or -KVC_INVALID (kvc_errmsg names the file and OpenSSL's
 * reason: missing, unreadable, not PEM, key not matching the certificate)
 * or -KVC_NOMEM.
 * With TLS on, kvc_connect also returns -KVC_CONNECT when the handshake
 * fails ("TLS handshake: certificate verify failed: ..." for an unknown
 * CA, an expired certificate or a name that does not match), and
 * -KVC_TIMEOUT when it does not finish in time; kvc_connect_unix()
 * returns -KVC_INVALID (TLS is for TCP: a Unix socket is guarded by its
 * file permissions).  A server that refuses our certificate may say so
 * only at the first reply (TLS 1.3): that call fails with -KVC_IO and the
 * server's alert in kvc_errmsg.  The non-blocking interface works
 * unchanged over TLS: poll kvc_fd() for POLLIN, and for POLLOUT while
 * kvc_want_write(). */
KVC_API int kvc_set_tls(kvc_conn *c, const struct kvc_tls_opts *opts);

/* A server's address as a URL, parsed by kvc_url_parse():
 *
 *   kvd://[:PASSWORD@]HOST[:PORT][/]
 *       HOST a name, an IPv4 address or an IPv6 address in brackets
 *       (kvd://[::1]:7379); PORT 1 to 65535, KVC_DEFAULT_PORT if omitted.
 *       The userinfo is ":PASSWORD" (kvd has no user names: anything
 *       before the ':' is refused).
 *   kvds://[:PASSWORD@]HOST[:PORT][/]
 *       the same over TLS; PORT KVC_DEFAULT_TLS_PORT (7389) if omitted.
 *   unix:///PATH[?password=PASSWORD]
 *       PATH absolute; the password, a Unix path having no room for a
 *       userinfo part before it, is the one query parameter allowed.
 *
 * PASSWORD and PATH are percent-decoded (%40 for '@', %2F for '/', %3F
 * for '?', %25 for '%'; '+' is a plus sign, not a space); %00 is refused.
 * Nothing else is accepted: no other scheme, query parameter, path or
 * fragment. */
typedef struct kvc_url {
	char *host;	/* name or address (no brackets), or the Unix path */
	unsigned port;	/* 0 for a unix:// URL */
	char *password; /* decoded, NUL-terminated; NULL if none was given */
	int tls;	/* 1 for kvds:// (since KVCLIENT_1.2) */
} kvc_url;

/* Parse url into *urlp, one allocation freed by kvc_url_free().  Returns 0,
 * -KVC_INVALID (not one of the forms above; *urlp is NULL) or -KVC_NOMEM.
 * No I/O, no name resolution; thread-safe. */
KVC_API int kvc_url_parse(const char *url, kvc_url **urlp);

/* Free a parsed URL, wiping its password.  NULL is accepted. */
KVC_API void kvc_url_free(kvc_url *u);

/* Parse url and connect c to it: kvc_set_password() with the URL's
 * password when it has one (a URL without one keeps c's password), then
 * kvc_connect() or kvc_connect_unix().  A kvds:// URL connects with TLS:
 * with the options of kvc_set_tls() if it was called, else with the
 * system's CAs and the URL's host as the name; a kvd:// URL connects
 * without TLS even if kvc_set_tls() was called (its options are kept for
 * later calls).  Returns what they return, or
 * -KVC_INVALID for a malformed URL (kvc_errmsg says which forms are
 * accepted). */
KVC_API int kvc_connect_url(kvc_conn *c, const char *url);

/* Close the connection and free c, its buffers and its replies.  Scans of c
 * must be closed first.  NULL is accepted. */
KVC_API void kvc_close(kvc_conn *c);

/* The last failure on c, in words: "127.0.0.1:7379: connection refused",
 * or the server's own message for a server error.  "" if there was none.
 * Never NULL; c may be NULL (then "out of memory", the only way to have no
 * handle). */
KVC_API const char *kvc_errmsg(const kvc_conn *c);

/* ===================== Synchronous calls =====================
 *
 * Each sends one request, flushes, and waits (at most the I/O timeout) for
 * its reply.  Besides the statuses listed with each call, all of them can
 * return:
 *   -KVC_INVALID   a NULL pointer with a non-zero length, a count of 0 where
 *                  one item is needed, a length above 4 GiB, unknown flags;
 *                  or replies to queued requests are still unread (read
 *                  them first with kvc_read_reply);
 *   -KVC_NOMEM     the request could not be buffered;
 *   -KVC_TIMEOUT, -KVC_CLOSED, -KVC_IO, -KVC_PROTOCOL   (sticky, see top;
 *                  -KVC_CLOSED also when c was never connected);
 *   a server error: -KVC_BAD_ARGS, -KVC_KEY_TOO_LARGE, -KVC_VALUE_TOO_LARGE,
 *   -KVC_FRAME_TOO_LARGE (then the server closes the connection),
 *   -KVC_REPLY_TOO_LARGE, -KVC_MAP_FULL, -KVC_DISK_FULL, -KVC_SHARD_FAILED,
 *   -KVC_SHUTTING_DOWN, -KVC_READ_ONLY, -KVC_AUTH_REQUIRED, -KVC_INTERNAL,
 *   and any code a newer server adds: kvc_errmsg() has its message.
 * Keys are 1 to max_key bytes (511 by default), values 0 to max_value
 * (16 MiB by default); the server enforces both.
 */

/* HELLO: the server's description.  *info receives a msgpack map (proto,
 * server, shards, threads, durability, max_key, max_value, max_frame), to
 * be read with kvc_map_uint() and kvc_map_str().  info may be NULL.
 * It asks for protocol 1, which every kvd speaks; proto in the map is the
 * server's own version: 2 or more has the version 2 calls below (an older
 * server answers them -KVC_UNKNOWN_OP). */
KVC_API int kvc_hello(kvc_conn *c, kvc_val *info);

/* ---- version 2 (the server's HELLO proto >= 2) ----
 * RENAME src to dst (with its expiry): -KVC_NOT_FOUND if src is absent;
 * with KVC_RENAME_NX -KVC_EXISTS if dst exists.  COPY likewise (dst kept
 * unless KVC_COPY_REPLACE: -KVC_EXISTS).  Across shards the new key is
 * durable before the old one is deleted. */
KVC_API int kvc_rename(kvc_conn *c, const void *src, size_t slen,
		       const void *dst, size_t dlen, unsigned flags);
KVC_API int kvc_copy(kvc_conn *c, const void *src, size_t slen, const void *dst,
		     size_t dlen, unsigned flags);
/* GETEX: GET, then set the expiry: ttl_ms from now, or at ttl_ms (Unix ms)
 * with KVC_GETEX_AT (a time past deletes the key), or none with
 * KVC_GETEX_PERSIST; ttl_ms 0 and no flag: unchanged. */
KVC_API int kvc_getex(kvc_conn *c, const void *key, size_t klen,
		      uint64_t ttl_ms, unsigned flags, kvc_val *val);
/* INCRBYFLOAT by the decimal text incr; *val the new value as text.
 * -KVC_NOT_FLOAT for a value that is not a float, or an infinite result. */
KVC_API int kvc_incrbyfloat(kvc_conn *c, const void *key, size_t klen,
			    const char *incr, kvc_val *val);
/* GETRANGE: bytes start..end (inclusive; negative from the end). */
KVC_API int kvc_getrange(kvc_conn *c, const void *key, size_t klen,
			 int64_t start, int64_t end, kvc_val *val);
/* SETRANGE: val written at offset (zero padded); *newlen the length. */
KVC_API int kvc_setrange(kvc_conn *c, const void *key, size_t klen,
			 uint64_t offset, const void *val, size_t vlen,
			 uint64_t *newlen);
/* SETBIT (bit 0 or 1; *old the bit before) and GETBIT. */
KVC_API int kvc_setbit(kvc_conn *c, const void *key, size_t klen,
		       uint64_t offset, int bit, int *old);
KVC_API int kvc_getbit(kvc_conn *c, const void *key, size_t klen,
		       uint64_t offset, int *bit);
/* BITCOUNT over start..end (bytes, or bits with KVC_BIT_RANGE_BITS);
 * 0, -1 for the whole value. */
KVC_API int kvc_bitcount(kvc_conn *c, const void *key, size_t klen,
			 int64_t start, int64_t end, unsigned flags,
			 uint64_t *count);
/* BITPOS: the first bit equal to bit from start (to *end, or the end of
 * the value when end is NULL); -1 when there is none. */
KVC_API int kvc_bitpos(kvc_conn *c, const void *key, size_t klen, int bit,
		       int64_t start, const int64_t *end, unsigned flags,
		       int64_t *pos);
/* BITOP op (KVC_BITOP_*) of srcs into dst; *len the result's length (0:
 * dst deleted).  NOT takes one source. */
KVC_API int kvc_bitop(kvc_conn *c, unsigned op, const void *dst, size_t dlen,
		      const kvc_val *srcs, size_t n, uint64_t *len);
/* TXN: the n sub-requests run as one batch, with no other client's
 * command in between (docs/protocol.md, TXN).  checks: nchecks pairs
 * (key, expected) in 2 * nchecks values; an expected value whose p is
 * NULL means the key must be absent.  -KVC_CHECK_FAILED when one did not
 * hold (nothing ran); a bad sub-request refuses the whole batch (its
 * status, kvc_errmsg names it).  Otherwise 0, and *replyp (owned by c,
 * as kvc_read_reply's) gives each sub-request's reply with
 * kvc_reply_next and kvc_txn_result. */
KVC_API int kvc_txn(kvc_conn *c, const kvc_val *checks, size_t nchecks,
		    const kvc_txn_op *ops, size_t n, kvc_reply **replyp);

/* PING, with an optional payload the server echoes (msg NULL: none).  echo
 * may be NULL; without a payload it is { NULL, 0 }. */
KVC_API int kvc_ping(kvc_conn *c, const void *msg, size_t len, kvc_val *echo);

/* GET: the value of key into *val.  -KVC_NOT_FOUND if the key is absent
 * or expired. */
KVC_API int kvc_get(kvc_conn *c, const void *key, size_t klen, kvc_val *val);

/* PUT: store val under key.  ttl_ms > 0 makes the key expire that many
 * milliseconds from now; 0 stores it without expiry (removing an old one,
 * unless KVC_PUT_KEEPTTL).  flags: KVC_PUT_NX, KVC_PUT_XX, KVC_PUT_KEEPTTL.
 * -KVC_EXISTS (NX and the key exists), -KVC_NOT_FOUND (XX and it does
 * not). */
KVC_API int kvc_put(kvc_conn *c, const void *key, size_t klen, const void *val,
		    size_t vlen, uint64_t ttl_ms, unsigned flags);

/* DEL: remove key.  -KVC_NOT_FOUND if it did not exist. */
KVC_API int kvc_del(kvc_conn *c, const void *key, size_t klen);

/* MGET: the values of n keys (n >= 1) into vals[0..n-1], in order; a key
 * that does not exist gives { NULL, 0 }. */
KVC_API int kvc_mget(kvc_conn *c, const kvc_val *keys, size_t n, kvc_val *vals);

/* MPUT: store n pairs (n >= 1) in one request, all with the same ttl_ms
 * (0: no expiry).  Atomic per shard, not across shards (docs/protocol.md
 * section 5): the pairs that fall in one shard are stored together or not
 * at all, but shards commit independently, so when the reply is an error
 * (-KVC_MAP_FULL, -KVC_DISK_FULL) the pairs of other shards may have been
 * stored.  Storing the same pairs again is harmless. */
KVC_API int kvc_mput(kvc_conn *c, const kvc_val *keys, const kvc_val *vals,
		     size_t n, uint64_t ttl_ms);

/* MDEL: remove n keys (n >= 1); *deleted (may be NULL) receives how many
 * existed. */
KVC_API int kvc_mdel(kvc_conn *c, const kvc_val *keys, size_t n,
		     uint64_t *deleted);

/* EXISTS: *count receives how many of the n keys (n >= 1) exist; a key
 * named twice counts twice. */
KVC_API int kvc_exists(kvc_conn *c, const kvc_val *keys, size_t n,
		       uint64_t *count);

/* COUNT: *count receives the number of live keys starting with prefix
 * (prefix NULL or plen 0: every key). */
KVC_API int kvc_count(kvc_conn *c, const void *prefix, size_t plen,
		      uint64_t *count);

/* STATS: *stats receives the server's counters as a msgpack map (see
 * docs/protocol.md); read scalars with kvc_map_uint(). */
KVC_API int kvc_stats(kvc_conn *c, kvc_val *stats);

/* INCR: add delta to the decimal integer stored under key (an absent key
 * counts as 0) and return the sum in *value (may be NULL).
 * -KVC_NOT_INTEGER if the value is not a 64-bit integer or the sum
 * overflows. */
KVC_API int kvc_incr(kvc_conn *c, const void *key, size_t klen, int64_t delta,
		     int64_t *value);

/* APPEND: append val to the value under key (creating it); *newlen (may be
 * NULL) receives the new length. */
KVC_API int kvc_append(kvc_conn *c, const void *key, size_t klen,
		       const void *val, size_t vlen, uint64_t *newlen);

/* EXPIRE: make key expire ttl_ms from now; 0 removes its expiry.
 * -KVC_NOT_FOUND if the key does not exist. */
KVC_API int kvc_expire(kvc_conn *c, const void *key, size_t klen,
		       uint64_t ttl_ms);

/* TTL: milliseconds left before key expires into *ttl_ms, -1 if it never
 * does.  -KVC_NOT_FOUND if the key does not exist. */
KVC_API int kvc_ttl(kvc_conn *c, const void *key, size_t klen, int64_t *ttl_ms);

/* GETDEL: the value of key into *val (may be NULL), and remove the key.
 * -KVC_NOT_FOUND if it did not exist. */
KVC_API int kvc_getdel(kvc_conn *c, const void *key, size_t klen, kvc_val *val);

/* FLUSHALL: remove every key on every shard. */
KVC_API int kvc_flushall(kvc_conn *c);

/* AUTH.  -KVC_AUTH_FAILED for a wrong password; -KVC_DISABLED when the
 * server has no password configured. */
KVC_API int kvc_auth(kvc_conn *c, const void *password, size_t len);

/* BACKUP: the server copies one consistent cut of every shard into dir, a
 * directory on the server's machine (absolute; absent or empty), while
 * writes go on; the call returns when the copy is on disk, with the number
 * of keys copied in *keys (may be NULL).  Mind the I/O timeout: a large
 * store takes a while.  -KVC_BUSY if a backup is already running;
 * -KVC_BAD_ARGS or -KVC_INTERNAL (see kvc_errmsg) if dir is unusable. */
KVC_API int kvc_backup(kvc_conn *c, const char *dir, uint64_t *keys);

/* ===================== Scans =====================
 *
 * A scan walks keys in byte order, batch keys per round trip, following
 * the server's resume cursor, so any number of keys can be read in bounded
 * memory.  Each batch is a separate read snapshot: keys written during a
 * scan may or may not be seen, but no key is returned twice.
 */

/* Open a scan of c over the keys that start with prefix and lie in
 * [start, end) (each of the three may be NULL or empty: no bound).  batch
 * is the number of keys per round trip (0: 1000; the server caps it at
 * 10000); flags: KVC_SCAN_KEYS_ONLY.  No request is sent until the first
 * kvc_scan_next().  Returns 0, -KVC_INVALID or -KVC_NOMEM. */
KVC_API int kvc_scan_open(kvc_conn *c, kvc_scan **scanp, const kvc_val *prefix,
			  const kvc_val *start, const kvc_val *end,
			  unsigned batch, unsigned flags);

/* The next key and value (val may be NULL; with KVC_SCAN_KEYS_ONLY it is
 * { NULL, 0 }).  Returns 0, -KVC_END after the last key, or any error of a
 * synchronous call; after an error or -KVC_END it keeps returning the same.
 * The bytes stay valid until the next call on the scan or its connection.
 * The connection may serve other synchronous calls between two
 * kvc_scan_next() calls. */
KVC_API int kvc_scan_next(kvc_scan *s, kvc_val *key, kvc_val *val);

/* The next key of a scan opened with KVC_SCAN_TYPED: its type
 * (KVC_TYPE_STRING or KVC_TYPE_HASH), the milliseconds it has left (-1:
 * no expiry) and its value: a string's bytes, or a hash's fields and
 * values, to walk with kvc_fields_next.  Any pointer may be NULL.  Returns
 * as kvc_scan_next; -KVC_INVALID on a scan opened without the flag (and
 * kvc_scan_next on one opened with it). */
KVC_API int kvc_scan_next_typed(kvc_scan *s, kvc_val *key, unsigned *type,
				int64_t *ttl_ms, kvc_val *val);

/* Free a scan.  NULL is accepted. */
KVC_API void kvc_scan_close(kvc_scan *s);

/* ===================== Hashes =====================
 *
 * A hash is a key holding fields, each with a value (docs/protocol.md,
 * "Hashes"; Redis's hash type, the same hashes as on the RESP port).  A
 * key holding a string answers -KVC_WRONG_TYPE, and a string operation on
 * a hash likewise.  Writes are computed by the server against the stored
 * hash: clients changing different fields at once never lose a change.
 * A write past the server's max-hash-fields or max-hash-bytes answers
 * -KVC_VALUE_TOO_LARGE (kvc_errmsg names the limit) and changes nothing.
 */

/* HSET: set n fields (n >= 1) to vals, creating the hash; *added (may be
 * NULL) receives how many fields were new. */
KVC_API int kvc_hset(kvc_conn *c, const void *key, size_t klen,
		     const kvc_val *fields, const kvc_val *vals, size_t n,
		     uint64_t *added);
/* HGET: the values of n fields (n >= 1) into vals[0..n-1], in order; a
 * field the hash lacks (or every field, for an absent key) gives
 * { NULL, 0 }. */
KVC_API int kvc_hget(kvc_conn *c, const void *key, size_t klen,
		     const kvc_val *fields, size_t n, kvc_val *vals);
/* HGETALL: *replyp (owned by c, as kvc_read_reply's) holds every field;
 * walk it with kvc_reply_next(r, &field, &value), in the order the fields
 * were first set.  -KVC_NOT_FOUND for an absent key; -KVC_REPLY_TOO_LARGE
 * for a hash over the server's max-frame-size (page it with kvc_hscan). */
KVC_API int kvc_hgetall(kvc_conn *c, const void *key, size_t klen,
			kvc_reply **replyp);
/* HDEL: remove n fields (n >= 1); *deleted (may be NULL) receives how many
 * were there.  A hash left empty is deleted. */
KVC_API int kvc_hdel(kvc_conn *c, const void *key, size_t klen,
		     const kvc_val *fields, size_t n, uint64_t *deleted);
/* HINCRBY: add delta to the field's decimal int64 (absent: 0); *value (may
 * be NULL) receives the sum.  -KVC_NOT_INTEGER for a value that is not
 * one, or a sum that overflows. */
KVC_API int kvc_hincrby(kvc_conn *c, const void *key, size_t klen,
			const void *field, size_t flen, int64_t delta,
			int64_t *value);
/* HSCAN: one page of up to limit fields (1..10000) in byte order from
 * start_field (inclusive; NULL or empty: the first) into *replyp; walk it
 * with kvc_reply_next(r, &field, &value); kvc_reply_cursor gives the
 * start_field of the next page, -KVC_END after the last.  -KVC_NOT_FOUND
 * for an absent key. */
KVC_API int kvc_hscan(kvc_conn *c, const void *key, size_t klen,
		      const kvc_val *start_field, unsigned limit,
		      kvc_reply **replyp);
/* A hash's fields as kvc_scan_next_typed or kvc_reply_next_typed give
 * them: the next field and value, consuming *rest from the front; 0,
 * -KVC_END when none is left, -KVC_PROTOCOL for bytes that are not
 * fields. */
KVC_API int kvc_fields_next(kvc_val *rest, kvc_val *field, kvc_val *value);

/* ===================== Documents =====================
 *
 * MongoDB's documents in kvd's collections (docs/protocol.md, "Documents";
 * the same documents the server's MongoDB door serves).  Documents,
 * filters, updates, projections and sorts are BSON bytes (libbson's
 * bson_get_data / bson_new_from_data); db and coll are NUL-terminated
 * names.  A failure MongoDB would report (a duplicate _id, a bad filter
 * or update, invalid BSON, an update that cannot apply to a document)
 * answers -KVC_DOC_ERROR: kvc_errmsg has MongoDB's text and
 * kvc_doc_errcode its code (11000, 9, 22, ...).  Writes are computed by
 * the server on the stored document: no update is lost between clients.
 * Available from libkvclient 1.5 (symbol version KVCLIENT_1.5).
 */

/* The query form of kvc_doc_find: zeroed, it reads every document in
 * _id order, 100 a page. */
typedef struct kvc_doc_query {
	kvc_val filter;	    /* { NULL, 0 }: every document */
	kvc_val projection; /* { NULL, 0 }: whole documents */
	kvc_val sort;	    /* { NULL, 0 }: _id order */
	uint64_t skip;	    /* matches skipped first */
	uint64_t limit;	    /* documents in all; 0: no limit */
	unsigned batch;	    /* documents per page, 1..10000; 0: 100 */
} kvc_doc_query;

/* DOCINSERT: insert n documents (1..100000) in order; the collection is
 * created if needed and a document without _id gets an ObjectId.
 * *replyp (owned by c, as kvc_read_reply's) lists each inserted
 * document's {_id: v} as BSON: walk it with kvc_reply_next(r, NULL, &id).
 * A duplicate _id is -KVC_DOC_ERROR 11000; the documents before it stay
 * inserted.  A document that is not valid BSON fails the call before any
 * is inserted. */
KVC_API int kvc_doc_insert(kvc_conn *c, const char *db, const char *coll,
			   const kvc_val *docs, size_t n, kvc_reply **replyp);
/* DOCGET: the document whose _id is id's first field (id: a BSON
 * document such as {_id: 7}) into *doc.  -KVC_NOT_FOUND when there is
 * none. */
KVC_API int kvc_doc_get(kvc_conn *c, const char *db, const char *coll,
			const void *id, size_t idlen, kvc_val *doc);
/* DOCUPDATE: apply update (operators, or a replacement document) to the
 * first document matching filter in _id order, or every match with
 * KVC_DOC_MULTI; with KVC_DOC_UPSERT and no match, insert one.  *matched,
 * *modified and *upserted (the inserted {_id: v}, or { NULL, 0 }) may each
 * be NULL. */
KVC_API int kvc_doc_update(kvc_conn *c, const char *db, const char *coll,
			   const void *filter, size_t flen, const void *update,
			   size_t ulen, unsigned flags, uint64_t *matched,
			   uint64_t *modified, kvc_val *upserted);
/* DOCDELETE: delete the first document matching filter in _id order, or
 * every match with KVC_DOC_MULTI; *deleted (may be NULL) counts them. */
KVC_API int kvc_doc_delete(kvc_conn *c, const char *db, const char *coll,
			   const void *filter, size_t flen, unsigned flags,
			   uint64_t *deleted);
/* DOCFIND: one page of q's documents (q NULL: all) into *replyp; walk it
 * with kvc_reply_next(r, NULL, &doc).  kvc_reply_cursor gives the cursor
 * of the next page (pass it as cursor with the same q), -KVC_END after
 * the last.  cursor NULL or { NULL, 0 }: the first page.  A page may be
 * empty and still have a cursor (the server examines at most 10,000
 * documents a page). */
KVC_API int kvc_doc_find(kvc_conn *c, const char *db, const char *coll,
			 const kvc_doc_query *q, const kvc_val *cursor,
			 kvc_reply **replyp);
/* The MongoDB error code of the last reply read on c when it was
 * -KVC_DOC_ERROR; 0 otherwise. */
KVC_API int64_t kvc_doc_errcode(const kvc_conn *c);

/* Databases, collections and indexes (libkvclient 1.6, KVCLIENT_1.6;
 * docs/protocol.md operations 50-56).  Index specifications and the
 * refusals are the MongoDB door's createIndexes, listIndexes and
 * dropIndexes' (docs/mongodb.md, "Indexes"). */

/* DOCDBS: the databases into *replyp; walk them with
 * kvc_reply_next(r, NULL, &name). */
KVC_API int kvc_doc_dbs(kvc_conn *c, kvc_reply **replyp);
/* DOCCOLLS: db's collections into *replyp; walk them with
 * kvc_reply_next(r, &name, &options) (options: create's, BSON; {} when
 * none).  A database with none (or none such) lists nothing. */
KVC_API int kvc_doc_colls(kvc_conn *c, const char *db, kvc_reply **replyp);
/* DOCCREATE: create db.coll with create's options (BSON, or NULL, 0).
 * -KVC_EXISTS when it exists; -KVC_DOC_ERROR 238 for an option kvd does
 * not do (capped, validator, ...). */
KVC_API int kvc_doc_create(kvc_conn *c, const char *db, const char *coll,
			   const void *opts, size_t olen);
/* DOCDROP: drop db.coll, its documents and indexes.  -KVC_NOT_FOUND
 * when there is none. */
KVC_API int kvc_doc_drop(kvc_conn *c, const char *db, const char *coll);
/* DOCIXCREATE: create the n (1..64) indexes specs (BSON, as
 * createIndexes' "indexes": {key: {...}, name: ..., options}) and build
 * them over the documents there, answering once built; the collection
 * is created if needed.  *before and *after (may be NULL) count the
 * indexes with _id_; equal when they all existed.  An index that exists
 * with other options or key is -KVC_DOC_ERROR 85 or 86. */
KVC_API int kvc_doc_create_indexes(kvc_conn *c, const char *db,
				   const char *coll, const kvc_val *specs,
				   size_t n, uint64_t *before, uint64_t *after);
/* DOCIXLIST: db.coll's index specifications, _id_ first, into *replyp;
 * walk them with kvc_reply_next(r, NULL, &spec).  -KVC_DOC_ERROR 26
 * when there is no such collection. */
KVC_API int kvc_doc_indexes(kvc_conn *c, const char *db, const char *coll,
			    kvc_reply **replyp);
/* DOCIXDROP: drop the index named name ("*": every one but _id_), or,
 * with name NULL, the one whose key pattern is key (BSON).  *was (may
 * be NULL) counts the indexes there were, with _id_.  -KVC_DOC_ERROR 27
 * for no such index, 26 no such collection, 72 for _id_. */
KVC_API int kvc_doc_drop_index(kvc_conn *c, const char *db, const char *coll,
			       const char *name, const void *key, size_t klen,
			       uint64_t *was);

/* ===================== Maps (HELLO, STATS) ===================== */

/* Find the entry named name (a string key) at the top level of a msgpack
 * map, as returned by kvc_hello() and kvc_stats().  Returns 0,
 * -KVC_NOT_FOUND if there is no such entry, or -KVC_INVALID if map is not a
 * map or the entry has another type (kvc_map_uint accepts non-negative
 * integers only, and a float is truncated; kvc_map_str accepts strings and
 * binaries). */
KVC_API int kvc_map_uint(kvc_val map, const char *name, uint64_t *v);
KVC_API int kvc_map_str(kvc_val map, const char *name, kvc_val *s);

/* ===================== Pipelining =====================
 *
 * kvc_send_* queue one request each and do no I/O.  They return 0,
 * -KVC_INVALID (bad arguments, as for the synchronous calls), -KVC_NOMEM,
 * or the sticky error of a broken connection (-KVC_CLOSED if c was never
 * connected).
 * Queued requests are written by kvc_flush(), or by kvc_read_reply() in
 * blocking mode, and are answered in order.  The queue is unbounded: with
 * very deep pipelines, read replies as you go (as kvcli load does, keeping a
 * window of requests in flight).
 */

KVC_API int kvc_send_hello(kvc_conn *c);
KVC_API int kvc_send_ping(kvc_conn *c, const void *msg, size_t len);
KVC_API int kvc_send_get(kvc_conn *c, const void *key, size_t klen);
KVC_API int kvc_send_put(kvc_conn *c, const void *key, size_t klen,
			 const void *val, size_t vlen, uint64_t ttl_ms,
			 unsigned flags);
KVC_API int kvc_send_del(kvc_conn *c, const void *key, size_t klen);
KVC_API int kvc_send_mget(kvc_conn *c, const kvc_val *keys, size_t n);
KVC_API int kvc_send_mput(kvc_conn *c, const kvc_val *keys, const kvc_val *vals,
			  size_t n, uint64_t ttl_ms);
KVC_API int kvc_send_mdel(kvc_conn *c, const kvc_val *keys, size_t n);
KVC_API int kvc_send_exists(kvc_conn *c, const kvc_val *keys, size_t n);
/* One SCAN request: up to limit keys (1..10000) from start on; the reply's
 * cursor (kvc_reply_cursor) is the start of the next request. */
KVC_API int kvc_send_scan(kvc_conn *c, const kvc_val *prefix,
			  const kvc_val *start, const kvc_val *end,
			  unsigned limit, unsigned flags);
KVC_API int kvc_send_count(kvc_conn *c, const void *prefix, size_t plen);
KVC_API int kvc_send_stats(kvc_conn *c);
KVC_API int kvc_send_incr(kvc_conn *c, const void *key, size_t klen,
			  int64_t delta);
KVC_API int kvc_send_append(kvc_conn *c, const void *key, size_t klen,
			    const void *val, size_t vlen);
KVC_API int kvc_send_expire(kvc_conn *c, const void *key, size_t klen,
			    uint64_t ttl_ms);
KVC_API int kvc_send_ttl(kvc_conn *c, const void *key, size_t klen);
KVC_API int kvc_send_getdel(kvc_conn *c, const void *key, size_t klen);
KVC_API int kvc_send_flushall(kvc_conn *c);
KVC_API int kvc_send_auth(kvc_conn *c, const void *password, size_t len);
KVC_API int kvc_send_backup(kvc_conn *c, const char *dir);

/* Version 2 (docs/protocol.md: each reply as the synchronous call's). */
KVC_API int kvc_send_rename(kvc_conn *c, const void *src, size_t slen,
			    const void *dst, size_t dlen, unsigned flags);
KVC_API int kvc_send_copy(kvc_conn *c, const void *src, size_t slen,
			  const void *dst, size_t dlen, unsigned flags);
KVC_API int kvc_send_getex(kvc_conn *c, const void *key, size_t klen,
			   uint64_t ttl_ms, unsigned flags);
KVC_API int kvc_send_incrbyfloat(kvc_conn *c, const void *key, size_t klen,
				 const char *incr);
KVC_API int kvc_send_getrange(kvc_conn *c, const void *key, size_t klen,
			      int64_t start, int64_t end);
KVC_API int kvc_send_setrange(kvc_conn *c, const void *key, size_t klen,
			      uint64_t offset, const void *val, size_t vlen);
KVC_API int kvc_send_setbit(kvc_conn *c, const void *key, size_t klen,
			    uint64_t offset, int bit);
KVC_API int kvc_send_getbit(kvc_conn *c, const void *key, size_t klen,
			    uint64_t offset);
KVC_API int kvc_send_bitcount(kvc_conn *c, const void *key, size_t klen,
			      int64_t start, int64_t end, unsigned flags);
KVC_API int kvc_send_bitpos(kvc_conn *c, const void *key, size_t klen, int bit,
			    int64_t start, const int64_t *end, unsigned flags);
KVC_API int kvc_send_bitop(kvc_conn *c, unsigned op, const void *dst,
			   size_t dlen, const kvc_val *srcs, size_t n);
KVC_API int kvc_send_txn(kvc_conn *c, const kvc_val *checks, size_t nchecks,
			 const kvc_txn_op *ops, size_t n);
/* Hashes (each reply as the synchronous call's). */
KVC_API int kvc_send_hset(kvc_conn *c, const void *key, size_t klen,
			  const kvc_val *fields, const kvc_val *vals, size_t n);
KVC_API int kvc_send_hget(kvc_conn *c, const void *key, size_t klen,
			  const kvc_val *fields, size_t n);
KVC_API int kvc_send_hgetall(kvc_conn *c, const void *key, size_t klen);
KVC_API int kvc_send_hdel(kvc_conn *c, const void *key, size_t klen,
			  const kvc_val *fields, size_t n);
KVC_API int kvc_send_hincrby(kvc_conn *c, const void *key, size_t klen,
			     const void *field, size_t flen, int64_t delta);
KVC_API int kvc_send_hscan(kvc_conn *c, const void *key, size_t klen,
			   const kvc_val *start_field, unsigned limit);
/* Documents (each reply as the synchronous call's: kvc_reply_next for
 * DOCINSERT's ids and DOCFIND's documents, kvc_reply_value for DOCGET,
 * kvc_reply_doc_update for DOCUPDATE, kvc_reply_int for DOCDELETE). */
KVC_API int kvc_send_doc_insert(kvc_conn *c, const char *db, const char *coll,
				const kvc_val *docs, size_t n);
KVC_API int kvc_send_doc_get(kvc_conn *c, const char *db, const char *coll,
			     const void *id, size_t idlen);
KVC_API int kvc_send_doc_update(kvc_conn *c, const char *db, const char *coll,
				const void *filter, size_t flen,
				const void *update, size_t ulen,
				unsigned flags);
KVC_API int kvc_send_doc_delete(kvc_conn *c, const char *db, const char *coll,
				const void *filter, size_t flen,
				unsigned flags);
KVC_API int kvc_send_doc_find(kvc_conn *c, const char *db, const char *coll,
			      const kvc_doc_query *q, const kvc_val *cursor);
/* (1.6: kvc_reply_next for DOCDBS, DOCCOLLS and DOCIXLIST,
 * kvc_reply_doc_ixcreate for DOCIXCREATE, kvc_reply_int for DOCIXDROP,
 * kvc_reply_status for DOCCREATE and DOCDROP.) */
KVC_API int kvc_send_doc_dbs(kvc_conn *c);
KVC_API int kvc_send_doc_colls(kvc_conn *c, const char *db);
KVC_API int kvc_send_doc_create(kvc_conn *c, const char *db, const char *coll,
				const void *opts, size_t olen);
KVC_API int kvc_send_doc_drop(kvc_conn *c, const char *db, const char *coll);
KVC_API int kvc_send_doc_create_indexes(kvc_conn *c, const char *db,
					const char *coll, const kvc_val *specs,
					size_t n);
KVC_API int kvc_send_doc_indexes(kvc_conn *c, const char *db, const char *coll);
KVC_API int kvc_send_doc_drop_index(kvc_conn *c, const char *db,
				    const char *coll, const char *name,
				    const void *key, size_t klen);

/* Number of queued or sent requests whose replies have not been read. */
KVC_API size_t kvc_pending(const kvc_conn *c);

/* The reply to the oldest request still unanswered, into *replyp (owned by
 * c; see the memory rules).  In blocking mode this writes queued requests
 * and waits for the reply, at most the I/O timeout.  In non-blocking mode
 * it does no I/O at all: it returns a reply only if one is already
 * buffered (see kvc_consume_input), else -KVC_AGAIN.
 * Returns 0 when a reply was read, whatever the server's status in it
 * (see kvc_reply_status), or:
 *   -KVC_INVALID   no request is pending;
 *   -KVC_AGAIN     non-blocking, and the reply is not buffered yet;
 *   -KVC_TIMEOUT, -KVC_CLOSED, -KVC_IO;
 *   -KVC_PROTOCOL  the bytes are not a valid reply to that request (a
 *                  garbled or oversized frame): sticky, the connection is
 *                  closed. */
KVC_API int kvc_read_reply(kvc_conn *c, kvc_reply **replyp);

/* The server's status: 0, or -KVC_NOT_FOUND, -KVC_EXISTS, -KVC_BAD_ARGS...
 * For an error, kvc_reply_error() and kvc_errmsg() have the server's text. */
KVC_API int kvc_reply_status(const kvc_reply *r);
KVC_API const char *kvc_reply_error(const kvc_reply *r);

/* The accessors below return 0; or the reply's status when it is not 0
 * (so a GET of an absent key gives -KVC_NOT_FOUND); or -KVC_INVALID when
 * the reply is to a request of another kind. */

/* GET, GETDEL, GETEX, GETRANGE, INCRBYFLOAT (the new value as text),
 * PING (with a payload; without one: { NULL, 0 }), DOCGET (the BSON). */
KVC_API int kvc_reply_value(const kvc_reply *r, kvc_val *val);

/* INCR, TTL, APPEND, MDEL, EXISTS, COUNT, BACKUP, SETRANGE, SETBIT,
 * GETBIT, BITCOUNT, BITPOS, BITOP, HSET, HDEL, HINCRBY, DOCDELETE,
 * DOCIXDROP. */
KVC_API int kvc_reply_int(const kvc_reply *r, int64_t *v);

/* MGET and SCAN: the next item; -KVC_END after the last.  MGET gives
 * values only (*key is { NULL, 0 }; a missing key's value is { NULL, 0 });
 * SCAN gives keys and values.  key and val may be NULL.
 * HGET as MGET (values); HGETALL and HSCAN as SCAN (fields and values).
 * DOCINSERT (each inserted {_id: v}) and DOCFIND (each document) as MGET:
 * BSON values.
 * A SCAN sent with KVC_SCAN_TYPED answers -KVC_INVALID: use
 * kvc_reply_next_typed.
 * TXN: the next sub-request's reply, as msgpack bytes in *val (decode it
 * with kvc_txn_result). */
KVC_API int kvc_reply_next(kvc_reply *r, kvc_val *key, kvc_val *val);

/* A SCAN sent with KVC_SCAN_TYPED: the next key, as kvc_scan_next_typed
 * gives it. */
KVC_API int kvc_reply_next_typed(kvc_reply *r, kvc_val *key, unsigned *type,
				 int64_t *ttl_ms, kvc_val *val);

/* SCAN (and HSCAN): the start key (field) of the next request; DOCFIND:
 * the cursor of its next page; -KVC_END when the scan is complete. */
KVC_API int kvc_reply_cursor(const kvc_reply *r, kvc_val *cursor);

/* DOCUPDATE: documents matched, changed, and the {_id: v} an upsert
 * inserted ({ NULL, 0 }: none); any pointer may be NULL. */
KVC_API int kvc_reply_doc_update(const kvc_reply *r, uint64_t *matched,
				 uint64_t *modified, kvc_val *upserted);

/* DOCIXCREATE: the indexes before and after (with _id_) and whether
 * the collection was created by it; any pointer may be NULL. */
KVC_API int kvc_reply_doc_ixcreate(const kvc_reply *r, uint64_t *before,
				   uint64_t *after, int *created);

/* HELLO, STATS: the msgpack map (see kvc_map_uint). */
KVC_API int kvc_reply_map(const kvc_reply *r, kvc_val *map);

/* One sub-request's reply of a TXN (from kvc_reply_next or kvc_txn):
 * returns its status (0 or -KVC_*); *value gets its first bytes result
 * ({ NULL, 0 } if none) and *num its first integer result (0 if none).
 * value and num may be NULL.  -KVC_PROTOCOL if sub is not a reply. */
KVC_API int kvc_txn_result(kvc_val sub, kvc_val *value, int64_t *num);

/* ===================== Non-blocking use =====================
 *
 * The socket is always in O_NONBLOCK mode inside the library; the mode set
 * here decides whether kvc_flush() and kvc_read_reply() wait.  A typical
 * event loop:
 *
 *   kvc_set_nonblock(c, 1);
 *   kvc_send_get(c, k, klen); ...
 *   for (;;) {
 *       struct pollfd p = { kvc_fd(c), POLLIN | (kvc_want_write(c) ?
 *                                                POLLOUT : 0) };
 *       poll(&p, 1, -1);
 *       if (p.revents & POLLOUT) kvc_flush(c);        // -KVC_AGAIN: more
 *       if (p.revents & POLLIN) kvc_consume_input(c);
 *       while (kvc_read_reply(c, &r) == 0) use(r);    // -KVC_AGAIN: wait
 *   }
 *
 * Synchronous calls and scans still work in non-blocking mode: they wait,
 * within the I/O timeout, as in blocking mode.
 */

/* The socket, for poll/epoll; -1 when not connected.  Do not read, write
 * or close it. */
KVC_API int kvc_fd(const kvc_conn *c);

/* on != 0: kvc_flush() and kvc_read_reply() never wait.  Returns 0. */
KVC_API int kvc_set_nonblock(kvc_conn *c, int on);

/* Write queued requests.  Returns 0 when everything is written;
 * -KVC_AGAIN (non-blocking mode) when bytes remain: wait for POLLOUT and
 * call again; or -KVC_TIMEOUT, -KVC_CLOSED, -KVC_IO.  While it waits in
 * blocking mode it also reads replies that arrive, so that a deep pipeline
 * cannot deadlock against a server that is waiting for us to read. */
KVC_API int kvc_flush(kvc_conn *c);

/* Nonzero when queued bytes are waiting to be written (poll for POLLOUT). */
KVC_API int kvc_want_write(const kvc_conn *c);

/* Read whatever the socket holds, without waiting; then kvc_read_reply()
 * returns the replies that are complete.  Returns 0 (even if nothing was
 * there); -KVC_CLOSED when the server has closed the connection: stop
 * polling, but the replies it sent before are still returned by
 * kvc_read_reply(), which then returns -KVC_CLOSED (or -KVC_PROTOCOL if
 * the last reply was cut short); or -KVC_IO. */
KVC_API int kvc_consume_input(kvc_conn *c);

#ifdef __cplusplus
}
#endif

#endif
