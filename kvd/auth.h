/* auth.h - who may do what: the password, protected mode, read-only mode
 * and disabled commands, shared by both protocols.
 *
 * With a password configured, a connection may only say HELLO and AUTH (and
 * RESP's QUIT) until it has authenticated, and its requests are held to
 * small caps meanwhile, so an unauthenticated peer cannot make kvd buffer
 * large frames (as Redis does since CVE-2021-32675).
 */
#ifndef KVD_AUTH_H
#define KVD_AUTH_H

#include <stddef.h>

#include "config.h"

struct kvd_conn;

/* Largest request before authentication: native frame bytes, RESP
 * multibulk items and bulk bytes (Redis's own pre-auth limits). */
#define KVD_PREAUTH_MAX_FRAME 16384u
#define KVD_PREAUTH_MAX_ARGS 10u
#define KVD_PREAUTH_MAX_BULK 16384u

/* Start-up checks and loading: reads requirepass-file, refuses a
 * non-loopback bind without a password in protected mode, checks the
 * disable list.  0, or -1 with a reason in err. */
int kvd_auth_setup(struct kvd_config *cfg, char *err, size_t errlen);

/* Does this connection still have to authenticate? */
int kvd_auth_pending(const struct kvd_conn *c);

/* Check a password in time that depends only on the configured one's
 * length; on success the connection is authenticated.  1 or 0. */
int kvd_auth_try(struct kvd_conn *c, const void *pw, size_t n);

/* Is the command (native op or RESP command name, any case) disabled? */
int kvd_auth_disabled(const struct kvd_config *cfg, const char *name, size_t n);

#endif
