/* resp_key.c - RESP read-only keyspace commands: EXPIRETIME, PEXPIRETIME,
 * TOUCH, RANDOMKEY, OBJECT; and WAIT and LATENCY, which kvd answers for
 * the tools that send them.
 *
 * OBJECT answers what Redis 7.0 would with its default configuration:
 * ENCODING by Redis's rules for a value written by SET (tryObjectEncoding:
 * "int" for a decimal that fits a long, "embstr" up to 44 bytes, "raw"
 * beyond), or as the command that made it left it (keyspace.h: APPEND,
 * SETRANGE, SETBIT, BITFIELD and BITOP make "raw", INCRBYFLOAT "embstr",
 * COPY a private object), REFCOUNT as Redis's shared integers 0..9999 have
 * it, IDLETIME 0 (kvd does not track access times), FREQ Redis's error for
 * a server without an LFU policy.
 */
#include <stdio.h>
#include <string.h>

#include "doc/hash.h"
#include "keyspace.h"
#include "kv_status.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp.h"
#include "net/router.h"

#define EMBSTR_MAX 44		   /* OBJ_ENCODING_EMBSTR_SIZE_LIMIT */
#define SHARED_INTEGERS 10000	   /* OBJ_SHARED_INTEGERS */
#define SHARED_REFCOUNT 2147483647 /* OBJ_SHARED_REFCOUNT */

/* ===================== EXPIRETIME, PEXPIRETIME, TOUCH ===================== */

/* The absolute expiry in ms of key k: -2 missing, -1 none; or -3 when the
 * read failed. */
static int64_t expiry_of(struct kvd_conn *c, struct kv_slice k)
{
	struct kvd_io *io = c->io;
	int64_t ttl;
	int rc;

	if (!resp_key_ok(c, k))
		return -2;
	rc =
	    kvd_reader_ttl(io->reader, kvd_shard_of(k.p, k.n, io->srv->nshards),
			   k.p, k.n, io->now_ms, &ttl);
	if (rc == KV_NOT_FOUND)
		return -2;
	if (rc != KV_OK)
		return -3;
	return ttl < 0 ? -1 : (int64_t)io->now_ms + ttl;
}

/* EXPIRETIME key: Unix seconds (truncated, as Redis does); PEXPIRETIME: ms. */
const char *resp_expiretime(struct kvd_conn *c, struct resp_req *r)
{
	int64_t at = expiry_of(c, r->a[1]);

	if (at == -3)
		return resp_err_internal;
	if (at >= 0 && r->cmd == RESP_CMD_EXPIRETIME)
		at /= 1000;
	resp_add_int(c, at);
	return NULL;
}

/* TOUCH key...: the keys that exist, each time it is named (as Redis). */
const char *resp_touch(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice k;
	int64_t n = 0;

	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		int64_t at;

		resp_it_next(&it, &k);
		at = expiry_of(c, k);
		if (at == -3)
			return resp_err_internal;
		n += at != -2;
	}
	resp_add_int(c, n);
	return NULL;
}

/* ===================== RANDOMKEY ===================== */

static int first_key(void *arg, struct kv_slice key, struct kv_slice val,
		     unsigned type, uint64_t exp)
{
	struct kvd_conn *c = arg;

	(void)exp;
	(void)val;
	(void)type;
	resp_add_bulk(c, key.p, key.n);
	return 0; /* the scan's limit of 1 stops it */
}

/* xorshift64 per io thread: a key's choice need not be secret. */
static uint64_t next_random(uint64_t *s)
{
	if (!*s)
		*s = kvd_mono_ns() | 1;
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The first live key at or after a random point of the key space, or the
 * first key when none follows it.  Not uniform (a key after a long gap is
 * picked more often), which RANDOMKEY does not promise either. */
const char *resp_randomkey(struct kvd_conn *c, struct resp_req *r)
{
	static _Thread_local uint64_t seed;
	uint64_t x = next_random(&seed);
	uint8_t start[8];
	struct kvd_scan sc;
	struct kv_slice next;
	size_t mark = c->out.len;

	(void)r;
	memcpy(start, &x, sizeof(start));
	memset(&sc, 0, sizeof(sc));
	sc.start.p = start;
	sc.start.n = 1 + (size_t)(x >> 61); /* 1 to 8 bytes */
	sc.limit = 1;
	sc.max_bytes = 1;
	sc.keys_only = 1;
	for (int pass = 0; pass < 2 && c->out.len == mark; pass++) {
		if (kvd_reader_scan(c->io->reader, &sc, c->io->now_ms,
				    first_key, c, &next)) {
			c->out.len = mark;
			return resp_err_internal;
		}
		sc.start.n = 0;
	}
	if (c->out.len == mark)
		resp_add_nil(c);
	return NULL;
}

/* ===================== OBJECT ===================== */

/* Redis's string2l on a value of at most 20 bytes. */
static int is_long(struct kv_slice v, long long *n)
{
	return v.n <= 20 && resp_ll(v, n) == 0;
}

static const char *object_key(struct kvd_conn *c, struct resp_req *r,
			      const char *sub)
{
	struct kvd_io *io = c->io;
	struct kv_slice k = r->a[2], v;
	const char *enc;
	long long n;
	unsigned cls, type = KVD_VT_PLAIN;
	uint64_t exp;
	int rc = KV_NOT_FOUND;

	if (resp_key_ok(c, k))
		rc = kvd_reader_getv(io->reader,
				     kvd_shard_of(k.p, k.n, io->srv->nshards),
				     k.p, k.n, io->now_ms, &v, &type, &exp);
	if (rc == KV_NOT_FOUND) {
		resp_add_nil(c);
		return NULL;
	}
	if (rc != KV_OK)
		return resp_err_internal;
	cls =
	    kvd_keyspace_encoding(kvd_shard_of(k.p, k.n, io->srv->nshards), k);
	if (type == KVD_VT_HASH) { /* never a shared object */
		enc = kvh_encoding(v);
		cls = KVD_ENC_PRIVATE;
	} else if (cls == KVD_ENC_RAW ||
		   (cls == KVD_ENC_EMBSTR && v.n > EMBSTR_MAX))
		enc = "raw";
	else if (cls == KVD_ENC_EMBSTR)
		enc = "embstr";
	else
		enc = is_long(v, &n)	  ? "int"
		      : v.n <= EMBSTR_MAX ? "embstr"
					  : "raw";
	if (!strcmp(sub, "encoding"))
		resp_add_cstr(c, enc);
	else if (!strcmp(sub, "refcount")) /* Redis's shared integers */
		resp_add_int(c, cls == KVD_ENC_AUTO && is_long(v, &n) &&
					n >= 0 && n < SHARED_INTEGERS
				    ? SHARED_REFCOUNT
				    : 1);
	else if (!strcmp(sub, "idletime"))
		resp_add_int(c, 0);
	else
		return "ERR An LFU maxmemory policy is not selected, access "
		       "frequency not tracked. Please note that when switching "
		       "between policies at runtime LRU and LFU data will take "
		       "some time to adjust.";
	return NULL;
}

static void add_help(struct kvd_conn *c, const char *cmd,
		     const char *const *lines)
{
	char head[96];
	size_t n = 0;

	while (lines[n])
		n++;
	snprintf(
	    head, sizeof(head),
	    "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd);
	resp_add_array(c, n + 3);
	resp_add_status(c, head);
	for (size_t i = 0; i < n; i++)
		resp_add_status(c, lines[i]);
	resp_add_status(c, "HELP");
	resp_add_status(c, "    Prints this help.");
}

/* "ERR wrong number of arguments for 'cmd|sub' command". */
static const char *sub_arity(struct resp_req *r, const char *cmd,
			     const char *sub)
{
	char name[48];

	snprintf(name, sizeof(name), "%s|%s", cmd, sub);
	return resp_arity_error(r, name);
}

static const char *const object_subs[] = {"encoding", "freq", "idletime",
					  "refcount"};

/* The subcommand and its arity: the dispatcher checked them (resp.c), and
 * the handler checks again rather than trust a queued request. */
static const char *object_check(struct resp_req *r)
{
	for (size_t i = 0; i < sizeof(object_subs) / sizeof(object_subs[0]);
	     i++)
		if (resp_eq(r->a[1], object_subs[i]))
			return r->argc == 3
				   ? NULL
				   : sub_arity(r, "object", object_subs[i]);
	if (resp_eq(r->a[1], "help"))
		return r->argc == 2 ? NULL : sub_arity(r, "object", "help");
	return resp_subcmd_error(r, "OBJECT");
}

const char *resp_object(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "ENCODING <key>",
	    "    Return the kind of internal representation used in order to "
	    "store the value",
	    "    associated with a <key>.",
	    "FREQ <key>",
	    "    Return the access frequency index of the <key>. The returned "
	    "integer is",
	    "    proportional to the logarithm of the recent access frequency "
	    "of the key.",
	    "IDLETIME <key>",
	    "    Return the idle time of the <key>, that is the approximated "
	    "number of",
	    "    seconds elapsed since the last access to the key.",
	    "REFCOUNT <key>",
	    "    Return the number of references of the value associated with "
	    "the specified",
	    "    <key>.",
	    NULL};

	const char *err = object_check(r);

	if (err)
		return err;
	for (size_t i = 0; i < sizeof(object_subs) / sizeof(object_subs[0]);
	     i++)
		if (resp_eq(r->a[1], object_subs[i]))
			return object_key(c, r, object_subs[i]);
	add_help(c, "OBJECT", help);
	return NULL;
}

/* ===================== WAIT, LATENCY ===================== */

/* WAIT numreplicas timeout: how many replicas have everything written
 * before it on their disks (repl_wait.c answers, in order, once that many do
 * or the timeout passes; 0 waits for ever, as in Redis). */
const char *resp_wait(struct kvd_conn *c, struct resp_req *r)
{
	long long n, ms;

	if (resp_ll(r->a[1], &n))
		return resp_err_int;
	if (resp_ll(r->a[2], &ms))
		return "ERR timeout is not an integer or out of range";
	if (ms < 0)
		return "ERR timeout is negative";
	if (kvd_repl_is_replica())
		return "ERR WAIT cannot be used with replica instances. Please "
		       "also note that since Redis 4.0 if a replica is "
		       "configured to be writable (which is not the default) "
		       "writes to replicas are just local and are not "
		       "propagated.";
	kvd_repl_wait(c, RESP_CMD_WAIT, n < 0 ? 0 : (uint64_t)n, (uint64_t)ms,
		      kvd_resp_repl_wait_answer);
	return NULL;
}

/* REPLICAOF host port, REPLICAOF NO ONE (and SLAVEOF): port is the
 * primary's RESP port, as Redis and Sentinel give it; the replica asks the
 * primary for its native port, which replication speaks. */
const char *resp_replicaof(struct kvd_conn *c, struct resp_req *r)
{
	char host[256], err[300];
	long long port;
	int st;

	if (resp_eq(r->a[1], "no") && resp_eq(r->a[2], "one")) {
		st = kvd_repl_replicaof(NULL, 0, 0, err, sizeof(err));
	} else {
		if (resp_ll(r->a[2], &port) || port <= 0 || port > 65535)
			return "ERR Invalid master port";
		if (r->a[1].n == 0 || r->a[1].n >= sizeof(host) ||
		    memchr(r->a[1].p, '\0', r->a[1].n))
			return "ERR Invalid master host";
		memcpy(host, r->a[1].p, r->a[1].n);
		host[r->a[1].n] = '\0';
		/* a host or an address, nothing else (repl_trust.c) */
		st = kvd_repl_replicaof(host, (unsigned)port, 1, err,
					sizeof(err));
	}
	if (st == KV_OK) {
		resp_add_ok(c);
		return NULL;
	}
	snprintf(r->err, sizeof(r->err), "%s %s",
		 st == KV_READ_ONLY ? "READONLY" : "ERR", err);
	return r->err;
}

const char *resp_role(struct kvd_conn *c, struct resp_req *r)
{
	(void)r;
	kvd_resp_repl_role(c);
	return NULL;
}

const char *resp_latency(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "DOCTOR",
	    "    Return a human readable latency analysis report.",
	    "HISTORY <event>",
	    "    Return time-latency samples for the <event> class.",
	    "LATEST",
	    "    Return the latest latency samples for all events.",
	    "RESET [<event> ...]",
	    "    Reset latency data of one or more <event> classes.",
	    "    (default: reset all data for all event classes)",
	    "kvd does not sample latency events: see INFO commandstats, "
	    "SLOWLOG and the metrics endpoint.",
	    NULL};
	struct kv_slice sub = r->a[1];

	if (resp_eq(sub, "doctor") && r->argc == 2) {
		resp_add_cstr(c, "kvd does not monitor latency events (there "
				 "is no latency-monitor-threshold): see INFO "
				 "commandstats, SLOWLOG GET and the "
				 "kvd_request_duration_seconds metrics.");
	} else if ((resp_eq(sub, "latest") && r->argc == 2) ||
		   (resp_eq(sub, "history") && r->argc == 3)) {
		resp_add_array(c, 0);
	} else if (resp_eq(sub, "reset")) {
		resp_add_int(c, 0);
	} else if (resp_eq(sub, "help") && r->argc == 2) {
		add_help(c, "LATENCY", help);
	} else if (resp_eq(sub, "doctor") || resp_eq(sub, "latest") ||
		   resp_eq(sub, "history") || resp_eq(sub, "help")) {
		char name[16];

		snprintf(name, sizeof(name), "%.*s", (int)sub.n,
			 (const char *)sub.p);
		for (char *p = name; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		return sub_arity(r, "latency", name);
	} else {
		return resp_subcmd_error(r, "LATENCY");
	}
	return NULL;
}
