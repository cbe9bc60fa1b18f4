/* repl_trust.c - which primaries a server may be pointed at at run time,
 * and which ones it gives primary-password to (repl.h).
 *
 * REPLICAOF HOST PORT replaces the whole store with another server's (a
 * full copy starts by emptying every shard), so it is as dangerous as
 * FLUSHALL, and a replica hands its password to the primary it follows.
 * The rules (docs/security.md, "REPLICAOF"):
 *
 *  - the trusted primaries are the one replicaof named at start and those
 *    in allowed-primaries ("HOST" or "HOST:PORT", "[v6]:PORT"; the port as
 *    REPLICAOF names it: the RESP port for REPLICAOF on the RESP port);
 *  - primary-password goes to trusted primaries only;
 *  - REPLICAOF HOST PORT is refused in read-only mode, and must name a
 *    trusted primary when allowed-primaries is set or FLUSHALL is
 *    disabled (the store must not be emptied by another door);
 *  - without either, any host may be named, as in Redis: Sentinel points
 *    replicas at each other with REPLICAOF.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/auth.h"
#include "kv_proto.h"
#include "kv_status.h"
#include "repl.h"

int kvd_repl_trusted(const struct kvd_config *cfg, const char *host,
		     unsigned port, int resp)
{
	char h[256];
	unsigned p;
	int r;

	if (cfg->replicaof[0] &&
	    !kvd_config_replicaof(cfg->replicaof, h, sizeof(h), &p, &r) &&
	    !strcasecmp(h, host) && p == port && r == resp)
		return 1;
	return kvd_config_primary_allowed(cfg->allowed_primaries, host, port);
}

int kvd_repl_may_follow(const struct kvd_config *cfg, const char *host,
			unsigned port, int resp, char *err, size_t errlen)
{
	if (!kvd_config_host_ok(host)) {
		snprintf(err, errlen, "Invalid master host");
		return KV_BAD_ARGS;
	}
	if (cfg->read_only) {
		snprintf(err, errlen,
			 "REPLICAOF would replace the data of a read-only "
			 "server (read-only yes)");
		return KV_READ_ONLY;
	}
	if (kvd_repl_trusted(cfg, host, port, resp))
		return KV_OK;
	if (cfg->allowed_primaries[0]) {
		snprintf(err, errlen,
			 "REPLICAOF: %s port %u is not in allowed-primaries",
			 host, port);
		return KV_DISABLED;
	}
	if (kvd_auth_op_disabled(KV_OP_FLUSHALL)) {
		snprintf(err, errlen,
			 "REPLICAOF HOST PORT empties the store, and FLUSHALL "
			 "is disabled: name the primaries it may follow in "
			 "allowed-primaries");
		return KV_DISABLED;
	}
	return KV_OK;
}
