/* auth.h - who may do what: the password, protected mode, read-only mode
 * and disabled commands, shared by both protocols, and the refusal of
 * requests in the wrong protocol.
 *
 * With a password configured, a connection may only say HELLO and AUTH (and
 * RESP's QUIT) until it has authenticated, and its requests are held to
 * small caps meanwhile, so an unauthenticated peer cannot make kvd buffer
 * large frames (as Redis does since CVE-2021-32675).  A connection that
 * fails AUTH KVD_AUTH_MAX_FAILS times is closed after the last answer, and
 * the failures are counted and logged at most once a second per io thread:
 * a guesser pays a connection every few guesses and cannot fill the disk.
 * Failures are also limited per source address and globally
 * (kvd_auth_gate), so reconnecting does not buy more guesses.
 *
 * disable-commands takes native operation names and RESP command names
 * (kvd_auth_setup turns them into bitmaps, so a request costs one bit
 * test).  A native name refuses that operation and every operation, native
 * or RESP, that performs it: a RESP command performs the native operations
 * of its ops column in resp.h's table, and a native operation what auth.c's
 * op_performs says (RENAME performs GET, PUT and DEL).  So FLUSHALL also
 * refuses RESP FLUSHDB, and PUT refuses SET, SETNX, SETEX, PSETEX, GETSET
 * and every operation that stores a whole value (native and RESP RENAME,
 * COPY, INCRBYFLOAT, SETRANGE, SETBIT, BITOP, and a TXN holding one).  A
 * RESP name refuses that RESP command.
 *
 * Cross-protocol scripting: a web page can make a browser POST to a kvd
 * port, with a body of commands.  On the RESP port a request named POST or
 * "Host:" closes the connection (Redis's answer since 3.2.7); on the native
 * port a frame that begins with an HTTP method does.  Both are logged,
 * rate-limited, and never answered.
 */
#ifndef KVD_AUTH_H
#define KVD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "kv_proto.h"

struct kvd_conn;

/* A native operation as a bit: sets of them say what an operation or a
 * RESP command performs (resp.h's ops column, auth.c's op_performs). */
#define KVO(op) (1ull << KV_OP_##op)

/* Largest request before authentication: native frame bytes, RESP
 * multibulk items and bulk bytes (Redis's own pre-auth limits). */
#define KVD_PREAUTH_MAX_FRAME 16384u
#define KVD_PREAUTH_MAX_ARGS 10u
#define KVD_PREAUTH_MAX_BULK 16384u

/* Failed AUTH attempts a connection may make before it is closed. */
#define KVD_AUTH_MAX_FAILS 10u

/* Start-up checks and loading: reads requirepass-file, refuses a
 * non-loopback bind without a password in protected mode, checks the
 * disable list.  0, or -1 with a reason in err. */
int kvd_auth_setup(struct kvd_config *cfg, char *err, size_t errlen);

/* Does this connection still have to authenticate? */
int kvd_auth_pending(const struct kvd_conn *c);

/* Check a password in time that depends only on the configured one's
 * length; on success the connection is authenticated.  A failure is
 * counted and logged (rate-limited), and the connection marked to close
 * after its reply once it has failed KVD_AUTH_MAX_FAILS times.  1, 0, or
 * -1 when kvd_auth_gate refused the attempt unchecked (closing). */
int kvd_auth_try(struct kvd_conn *c, const void *pw, size_t n);

/* The limit on guessing, for every door that authenticates (native, RESP,
 * metrics; whatever checks credentials its own way calls these two):
 * before checking credentials, ask kvd_auth_gate whether the peer's
 * source address may try now: 0, or -1 when it failed too often
 * (auth-fail-burst at once, then auth-fail-rate a second; or, while
 * failures from every address together pass 100 times that rate, when it
 * failed in the last 10 s): answer a refusal without checking anything;
 * the connection is marked to close, the refusal counted and logged
 * (rate-limited).  After credentials that were wrong, call
 * kvd_auth_note_failure. */
int kvd_auth_gate(struct kvd_conn *c);
void kvd_auth_note_failure(struct kvd_conn *c);
/* A door that checks credentials its own way (the MongoDB door's SCRAM)
 * found them wrong: kvd_auth_note_failure, then what kvd_auth_try does
 * for a wrong password (counted in auth_failures, logged rate-limited,
 * the connection closed after its KVD_AUTH_MAX_FAILS-th failure). */
void kvd_auth_wrong(struct kvd_conn *c);
/* What a refused attempt is told (RESP prefixes "ERR "). */
#define KVD_AUTH_LIMITED_MSG                                                   \
	"too many failed AUTH attempts from this address; try again later"

/* Failed AUTH attempts since start, both protocols (STATS, INFO, metrics);
 * of which refused unchecked by kvd_auth_gate. */
uint64_t kvd_auth_failures(void);
uint64_t kvd_auth_limited(void);

/* Is the native operation op, or the RESP command id (enum resp_cmd_id),
 * disabled by disable-commands?  Set up by kvd_auth_setup. */
int kvd_auth_op_disabled(unsigned op);
int kvd_auth_resp_disabled(unsigned id);
/* ops (KVO bits) and every native operation they perform (auth.c's
 * table): what naming any of them in disable-commands refuses. */
uint64_t kvd_auth_performs(uint64_t ops);

/* Native frame header: 1 (and the connection closing, logged) when the
 * bytes at p begin with an HTTP method, 0 when they cannot, -1 when more
 * bytes are needed to tell.  Only worth asking when the frame length they
 * encode is at least KVD_HTTP_MIN_LEN: every method's first four bytes
 * read as a larger length. */
#define KVD_HTTP_MIN_LEN 0x41000000u /* "A\0\0\0" */
int kvd_auth_http_native(struct kvd_conn *c, const uint8_t *p, size_t n);

/* A RESP request named POST or Host: (the first lines of an HTTP
 * request): log it and close the connection, unanswered. */
void kvd_auth_http_refuse(struct kvd_conn *c, const char *what);

/* The first bytes of a connection on a plain (non-TLS) port: 1 (and the
 * connection closing unanswered, logged) when they begin a TLS record
 * (0x16 0x03: a ClientHello), else 0. */
int kvd_auth_tls_plain(struct kvd_conn *c, const uint8_t *p, size_t n);

#endif
