/* config.c - option table, flag and config-file parsing for kvd.
 *
 * Every option exists once, in KVD_OPTIONS, with its type, range, default and
 * help text; flags (--name value, --name=value) and file lines ("name value")
 * go through the same parser, so the two can never drift apart and every bad
 * value gets the same one-line reason, with file and line when it came from a
 * file.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kv_proto.h"
#include "log.h"

/* OPT_OFF: a non-negative integer, or -1 (stored as UINT_MAX) for off.
 * OPT_EVENTS: Redis's notify-keyspace-events letters, stored as bits. */
enum opt_type { OPT_UINT, OPT_SIZE, OPT_STR, OPT_ENUM, OPT_OFF, OPT_EVENTS };

struct opt {
	const char *name;
	enum opt_type type;
	size_t off;
	size_t len; /* OPT_STR: buffer size; numbers: field size */
	uint64_t min, max;
	const char *def;
	const char *const *names; /* OPT_ENUM */
	const char *help;
};

static const char *const durability_names[] = {"sync", "async", NULL};
static const char *const yes_no[] = {"no", "yes", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug",
					  NULL};
static const char *const bool_names[] = {"no", "yes", NULL};
static const char *const tls_auth_names[] = {"no", "yes", "optional", NULL};
static const char *const io_flush_names[] = {"no", "ring", "inline", "auto",
					     NULL};

#define F(field)                                                               \
	offsetof(struct kvd_config, field),                                    \
	    sizeof(((struct kvd_config *)0)->field)
#define GiB (1ull << 30)

static const struct opt options[] = {
    {"bind", OPT_STR, F(bind), 0, 0, "127.0.0.1", NULL, "address to listen on"},
    {"port", OPT_UINT, F(port), 0, 65535, "7379", NULL,
     "msgpack protocol port (0: any free port; with tls-port, 0 disables "
     "the plain port)"},
    {"resp-port", OPT_UINT, F(resp_port), 0, 65535, "0", NULL,
     "Redis protocol (RESP2) port; 0 disables it (suggested: 7380)"},
    {"mongo-port", OPT_UINT, F(mongo_port), 0, 65535, "0", NULL,
     "MongoDB wire protocol port (docs/mongodb.md); 0 disables it "
     "(suggested: 27017)"},
    {"mongo-ttl-interval", OPT_UINT, F(mongo_ttl_interval), 1, 86400, "60",
     NULL,
     "seconds between passes of the TTL monitor, which deletes documents "
     "expired under a TTL index (expireAfterSeconds)"},
    {"resp-flushall", OPT_ENUM, F(resp_flushall), 0, 0, "yes", bool_names,
     "whether RESP FLUSHALL and FLUSHDB may empty the store"},
    {"metrics-port", OPT_UINT, F(metrics_port), 0, 65535, "0", NULL,
     "Prometheus metrics over HTTP (GET /metrics); 0 disables it (suggested: "
     "9379)"},
    {"metrics-bind", OPT_STR, F(metrics_bind), 0, 0, "127.0.0.1", NULL,
     "address of the metrics listener"},
    {"unix-socket", OPT_STR, F(unix_socket), 0, 0, "", NULL,
     "also accept the msgpack protocol on this Unix socket path"},
    {"resp-unix-socket", OPT_STR, F(resp_unix_socket), 0, 0, "", NULL,
     "also accept RESP on this Unix socket path (needs resp-port)"},
    {"unix-socket-perm", OPT_STR, F(unix_perm_str), 0, 0, "0770", NULL,
     "mode of the Unix socket files, octal: who may connect"},
    {"data-dir", OPT_STR, F(data_dir), 0, 0, "./data", NULL,
     "data directory: MANIFEST, LOCK and shard-NNN/"},
    {"threads", OPT_UINT, F(threads), 0, 256, "0", NULL,
     "io threads; 0 means one per core.  Also the shard count of a new data "
     "directory unless shards says otherwise"},
    {"shards", OPT_UINT, F(shards), 0, 256, "0", NULL,
     "shards of a new data directory (each its own journal, memtable and "
     "LMDB file); 0 means one per io thread.  An existing directory keeps "
     "its own count: another nonzero value here is refused"},
    {"durability", OPT_ENUM, F(durability), 0, 0, "sync", durability_names,
     "sync: reply after fsync; async: reply after write(2), flush on a timer"},
    {"io-thread-flush", OPT_ENUM, F(io_thread_flush), 0, 0, "auto",
     io_flush_names,
     "sync mode: an io thread commits its own writes when the shard's "
     "committer is idle and flushes the journal itself: ring: through its "
     "io_uring ring, serving other connections meanwhile and answering "
     "from the completion; inline: with fdatasync, blocking; auto: inline "
     "for a batch of at most 16 writes that holds a write of each of the "
     "thread's connections (the last of its loop turn), else through the "
     "ring; no: every write goes through the shard's "
     "committer (bench/RESULTS.md, Write CPU)"},
    {"flush-interval-ms", OPT_UINT, F(flush_interval_ms), 1, 3600000, "1000",
     NULL, "async mode: how often each shard's journal is flushed to disk"},
    {"memtable-size", OPT_SIZE, F(memtable_size), 64ull << 10, 1ull << 36,
     "auto", NULL,
     "per shard: writes since the last checkpoint held in memory; a full "
     "memtable is checkpointed into LMDB (memory: up to twice this per "
     "shard).  auto: 256m shared by the shards, at least 64m and at most "
     "128m each"},
    {"checkpoint-interval-ms", OPT_UINT, F(checkpoint_interval_ms), 10, 3600000,
     "60000", NULL,
     "checkpoint a shard's memtable at least this often when it holds "
     "writes"},
    {"journal-segment-size", OPT_SIZE, F(journal_segment_size), 1ull << 20,
     1ull << 34, "64m", NULL,
     "size of each pre-allocated journal segment file (a record larger "
     "than a segment is refused)"},
    {"journal-truncate-corrupt", OPT_ENUM, F(journal_truncate_corrupt), 0, 0,
     "no", yes_no,
     "at startup, cut a corrupt journal at the bad record (losing what "
     "follows) instead of refusing to start"},
    {"max-key-size", OPT_SIZE, F(max_key), 1, KV_MAX_KEY_LIMIT, "511", NULL,
     "largest key in bytes (LMDB's limit is 511)"},
    {"max-value-size", OPT_SIZE, F(max_value), 1, 1ull << 30, "16m", NULL,
     "largest value in bytes"},
    {"max-frame-size", OPT_SIZE, F(max_frame), 1024, 2ull << 30, "32m", NULL,
     "largest request frame in bytes"},
    {"max-hash-fields", OPT_SIZE, F(max_hash_fields), 1, 1ull << 32, "100000",
     NULL,
     "fields one hash may hold; a write that would take it past this is "
     "refused"},
    {"max-hash-bytes", OPT_SIZE, F(max_hash_bytes), 1024, 1ull << 30, "16m",
     NULL,
     "bytes one hash may take (its fields and values, 2-10 bytes of "
     "overhead each); a write that would take it past this is refused"},
    {"max-clients", OPT_UINT, F(max_clients), 1, 1000000, "10000", NULL,
     "connections accepted at once; more are refused with TOO_MANY_CONNS"},
    {"map-size", OPT_SIZE, F(map_size), 1ull << 20, 1ull << 44, "64g", NULL,
     "largest size of each shard's file (LMDB map size)"},
    {"log-level", OPT_ENUM, F(log_level), 0, 0, "info", level_names,
     "error, warn, info or debug"},
    {"log-file", OPT_STR, F(log_file), 0, 0, "", NULL,
     "log to this file instead of stderr"},
    {"idle-timeout", OPT_UINT, F(idle_timeout), 0, 86400 * 365, "0", NULL,
     "close connections idle this many seconds; 0 never"},
    {"max-output", OPT_SIZE, F(max_output), 1ull << 16, 1ull << 40, "64m", NULL,
     "pending reply bytes per connection before it stops being read"},
    {"max-inflight-write-bytes", OPT_SIZE, F(max_inflight_bytes), 1ull << 16,
     1ull << 40, "64m", NULL,
     "write bytes a connection may have waiting for commit before it stops "
     "being read"},
    {"max-inflight-writes", OPT_SIZE, F(max_inflight_writes), 16, 1ull << 24,
     "65536", NULL,
     "keys a connection may have waiting for commit before it stops being "
     "read"},
    {"max-inflight-shard-bytes", OPT_SIZE, F(max_inflight_shard), 1ull << 20,
     1ull << 40, "256m", NULL,
     "write bytes waiting for one shard's commit before writers to it stop "
     "being read"},
    {"request-timeout", OPT_UINT, F(request_timeout), 0, 86400, "30", NULL,
     "close a connection whose request stays incomplete this many seconds "
     "(slow senders); 0 never"},
    {"output-timeout", OPT_UINT, F(output_timeout), 0, 86400, "60", NULL,
     "close a connection over max-output whose replies go unread this many "
     "seconds; 0 never"},
    {"reaper-interval-ms", OPT_UINT, F(reaper_interval_ms), 10, 3600000, "100",
     NULL, "how often expired keys are reclaimed"},
    {"requirepass", OPT_STR, F(requirepass), 0, 0, "", NULL,
     "password clients must give (AUTH) before anything else"},
    {"requirepass-file", OPT_STR, F(requirepass_file), 0, 0, "", NULL,
     "read the password from the first line of this file instead"},
    {"auth-fail-burst", OPT_UINT, F(auth_fail_burst), 1, 1000000, "20", NULL,
     "failed AUTH attempts a source address may make at once before its "
     "attempts are refused unchecked"},
    {"auth-fail-rate", OPT_UINT, F(auth_fail_rate), 0, 1000000, "2", NULL,
     "then failed AUTH attempts a second per source address (100 times "
     "this from all addresses together); 0 turns the limit off"},
    {"protected-mode", OPT_ENUM, F(protected_mode), 0, 0, "yes", yes_no,
     "refuse to listen beyond loopback without a password"},
    {"read-only", OPT_ENUM, F(read_only), 0, 0, "no", yes_no,
     "refuse every write with READ_ONLY"},
    {"disable-commands", OPT_STR, F(disable_commands), 0, 0, "", NULL,
     "comma-separated commands to refuse with DISABLED (e.g. "
     "FLUSHALL,KEYS,BACKUP)"},
    {"backup-dir", OPT_STR, F(backup_dir), 0, 0, "", NULL,
     "BACKUP NAME writes the backup to this directory's NAME (absolute "
     "path); empty: BACKUP is refused unless backup-anywhere"},
    {"backup-anywhere", OPT_ENUM, F(backup_anywhere), 0, 0, "no", yes_no,
     "without backup-dir, let BACKUP write to any absolute path kvd can "
     "write (outside data-dir)"},
    {"read-only-backup", OPT_ENUM, F(read_only_backup), 0, 0, "no", yes_no,
     "allow BACKUP when read-only is yes"},
    {"restore", OPT_STR, F(restore), 0, 0, "", NULL,
     "before starting, copy the backup in this directory into data-dir"},
    {"restore-force", OPT_ENUM, F(restore_force), 0, 0, "no", yes_no,
     "let --restore replace a data-dir that is not empty"},
    {"slowlog-log-slower-than", OPT_OFF, F(slowlog_slower), 0, 2147483647,
     "10000", NULL,
     "RESP SLOWLOG: log commands taking at least this many microseconds; "
     "-1 logs none"},
    {"slowlog-max-len", OPT_UINT, F(slowlog_max_len), 0, 10000, "128", NULL,
     "RESP SLOWLOG: entries kept (the oldest go first)"},
    {"pubsub-max-output", OPT_SIZE, F(pubsub_max_output), 1ull << 16,
     1ull << 40, "32m", NULL,
     "RESP pub/sub: a subscriber with more messages than this pending is "
     "closed (Redis's client-output-buffer-limit pubsub, hard limit)"},
    {"pubsub-max-subscriptions", OPT_SIZE, F(pubsub_max_subs), 16, 1ull << 32,
     "1000000", NULL,
     "RESP pub/sub: channels and patterns subscribed on the whole server "
     "(every connection's subscriptions), at most; past it SUBSCRIBE is "
     "refused"},
    {"pubsub-max-subscription-bytes", OPT_SIZE, F(pubsub_max_sub_bytes),
     1ull << 16, 1ull << 40, "256m", NULL,
     "RESP pub/sub: memory of the whole server's subscriptions (each name "
     "plus 160 bytes), at most; past it SUBSCRIBE is refused"},
    {"multi-max-commands", OPT_SIZE, F(multi_max_cmds), 1, 1ull << 24, "65536",
     NULL,
     "RESP MULTI: commands one transaction may queue; past it the command is "
     "refused and EXEC answers EXECABORT"},
    {"multi-max-bytes", OPT_SIZE, F(multi_max_bytes), 1ull << 16, 1ull << 40,
     "64m", NULL,
     "RESP MULTI: bytes one transaction may queue (its commands' arguments, "
     "plus 4 bytes an argument and 6 a command); past it the command is "
     "refused and EXEC answers EXECABORT"},
    {"tls-port", OPT_UINT, F(tls_port), 0, 65535, "0", NULL,
     "msgpack protocol over TLS on this port; 0 disables it"},
    {"tls-resp-port", OPT_UINT, F(tls_resp_port), 0, 65535, "0", NULL,
     "RESP over TLS on this port; 0 disables it"},
    {"tls-mongo-port", OPT_UINT, F(tls_mongo_port), 0, 65535, "0", NULL,
     "MongoDB wire protocol over TLS on this port; 0 disables it"},
    {"tls-metrics", OPT_ENUM, F(tls_metrics), 0, 0, "no", yes_no,
     "the metrics port speaks HTTPS (TLS) instead of HTTP"},
    {"tls-cert-file", OPT_STR, F(tls_cert_file), 0, 0, "", NULL,
     "TLS: the server's certificate chain (PEM)"},
    {"tls-key-file", OPT_STR, F(tls_key_file), 0, 0, "", NULL,
     "TLS: the server certificate's private key (PEM)"},
    {"tls-ca-cert-file", OPT_STR, F(tls_ca_cert_file), 0, 0, "", NULL,
     "TLS: CA certificates (PEM) that client certificates must chain to"},
    {"tls-ca-cert-dir", OPT_STR, F(tls_ca_cert_dir), 0, 0, "", NULL,
     "TLS: a directory of CA certificates (hashed names, c_rehash)"},
    {"tls-auth-clients", OPT_ENUM, F(tls_auth_clients), 0, 0, "yes",
     tls_auth_names,
     "TLS client certificates: yes (required), optional (checked when "
     "given) or no"},
    {"tls-protocols", OPT_STR, F(tls_protocols), 0, 0, "", NULL,
     "TLS versions accepted, e.g. \"TLSv1.2 TLSv1.3\" (empty: both)"},
    {"tls-ciphers", OPT_STR, F(tls_ciphers), 0, 0, "", NULL,
     "TLSv1.2 cipher list (OpenSSL syntax; empty: OpenSSL's default)"},
    {"tls-ciphersuites", OPT_STR, F(tls_ciphersuites), 0, 0, "", NULL,
     "TLSv1.3 cipher suites (OpenSSL syntax; empty: OpenSSL's default)"},
    {"tls-prefer-server-ciphers", OPT_ENUM, F(tls_prefer_server_ciphers), 0, 0,
     "no", yes_no, "TLS: choose the cipher by the server's order"},
    {"tls-max-handshakes", OPT_UINT, F(tls_max_handshakes), 1, 100000, "8",
     NULL,
     "TLS handshakes in flight per io thread; past it new TLS connections "
     "wait in the accept backlog"},
    {"replicaof", OPT_STR, F(replicaof), 0, 0, "", NULL,
     "run as a read-only replica of the kvd at \"HOST PORT\" (its native "
     "port), or \"HOST PORT resp\" (its RESP port); empty: a primary"},
    {"allowed-primaries", OPT_STR, F(allowed_primaries), 0, 0, "", NULL,
     "primaries REPLICAOF may name at run time, and that are given "
     "primary-password: \"HOST[:PORT] ...\" (empty: the replicaof of the "
     "start only gets the password)"},
    {"primary-password", OPT_STR, F(primary_password), 0, 0, "", NULL,
     "password a replica gives its primary (AUTH)"},
    {"primary-password-file", OPT_STR, F(primary_password_file), 0, 0, "", NULL,
     "read primary-password from the first line of this file"},
    {"tls-replication", OPT_ENUM, F(tls_replication), 0, 0, "no", yes_no,
     "a replica connects to its primary over TLS (tls-ca-cert-file checks "
     "it; tls-cert-file and tls-key-file are shown if it asks)"},
    {"repl-backlog-size", OPT_SIZE, F(repl_backlog_size), 0, 1ull << 44, "256m",
     NULL,
     "journal a shard keeps for replicas that fell behind; past it a "
     "replica takes a full copy"},
    {"min-replicas-to-ack", OPT_UINT, F(min_replicas_to_ack), 0, 64, "0", NULL,
     "hold each write's reply until this many replicas have its record "
     "on disk; 0: replication is asynchronous"},
    {"min-replicas-max-lag", OPT_UINT, F(min_replicas_max_lag), 0, 86400, "10",
     NULL,
     "with min-replicas-to-ack: refuse writes (NOREPLICAS) while fewer "
     "replicas than that were heard from within this many seconds; 0 "
     "never refuses"},
    {"replica-priority", OPT_UINT, F(replica_priority), 0, 1000000, "100", NULL,
     "shown to Sentinel (INFO slave_priority): lower is promoted "
     "first, 0 never"},
    {"notify-keyspace-events", OPT_EVENTS, F(notify_events), 0, 0, "", NULL,
     "RESP keyspace notifications, Redis's classes (K and E where, g $ x n "
     "or A what: KEA for all); empty: none"},
};

#define NOPTS (sizeof(options) / sizeof(options[0]))

/* Where each option was last set ("kvd.conf:12" or "--port"), so that a
 * value found bad only later (a path) is reported where it came from.
 * Configuration is read by the main thread only. */
static char origin[NOPTS][96];

static void set_origin(const struct opt *o, const char *fmt, const char *a,
		       unsigned line)
{
	snprintf(origin[o - options], sizeof(origin[0]), fmt, a, line);
}

/* "FILE:LINE: " or "--name: " (or nothing for a default), for messages. */
static const char *where(const char *name)
{
	static char buf[128];

	for (size_t i = 0; i < NOPTS; i++)
		if (!strcmp(options[i].name, name) && origin[i][0]) {
			snprintf(buf, sizeof(buf),
				 "%.*s: ", (int)sizeof(origin[0]), origin[i]);
			return buf;
		}
	return "";
}

static const struct opt *find_opt(const char *name, size_t n)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strlen(options[i].name) == n &&
		    !strncmp(options[i].name, name, n))
			return &options[i];
	return NULL;
}

/* "64m", "1g", "4096": a size with an optional k/m/g/t suffix (powers of 2). */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (*s == '-' || *s == '\0')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* A number whose default is "auto" takes "auto" too, stored as 0: what it
 * becomes is decided where the value is used. */
static int is_auto(const struct opt *o)
{
	return o->def && !strcmp(o->def, "auto");
}

/* notify-keyspace-events: each letter of Redis's, in its order for
 * CONFIG GET (keyspaceEventsFlagsToString); A is handled apart. */
static const struct {
	char ch;
	unsigned bit;
} event_letters[] = {
    {'g', KVD_NOTIFY_GENERIC},	{'$', KVD_NOTIFY_STRING},
    {'l', KVD_NOTIFY_LIST},	{'s', KVD_NOTIFY_SET},
    {'h', KVD_NOTIFY_HASH},	{'z', KVD_NOTIFY_ZSET},
    {'x', KVD_NOTIFY_EXPIRED},	{'e', KVD_NOTIFY_EVICTED},
    {'t', KVD_NOTIFY_STREAM},	{'d', KVD_NOTIFY_MODULE},
    {'n', KVD_NOTIFY_NEW},	{'K', KVD_NOTIFY_KEYSPACE},
    {'E', KVD_NOTIFY_KEYEVENT}, {'m', KVD_NOTIFY_KEY_MISS},
};
#define NEVENT_LETTERS (sizeof(event_letters) / sizeof(event_letters[0]))

static int parse_events(const char *s, uint64_t *bits)
{
	*bits = 0;
	for (; *s; s++) {
		size_t i = 0;

		while (i < NEVENT_LETTERS && event_letters[i].ch != *s)
			i++;
		if (*s == 'A')
			*bits |= KVD_NOTIFY_ALL;
		else if (i < NEVENT_LETTERS)
			*bits |= event_letters[i].bit;
		else
			return -1;
	}
	return 0;
}

/* As Redis 7.0 writes them back: A for all of its classes (and then, as
 * there, no n), else the letters in order; then K, E and m. */
static void format_events(uint64_t bits, char *buf, size_t cap)
{
	size_t n = 0;
	int all = (bits & KVD_NOTIFY_ALL) == KVD_NOTIFY_ALL;

	if (all && n + 1 < cap)
		buf[n++] = 'A';
	for (size_t i = 0; i < NEVENT_LETTERS && n + 1 < cap; i++) {
		unsigned b = event_letters[i].bit;
		int where = b & (KVD_NOTIFY_KEYSPACE | KVD_NOTIFY_KEYEVENT |
				 KVD_NOTIFY_KEY_MISS);

		if ((bits & b) && (where || !all))
			buf[n++] = event_letters[i].ch;
	}
	if (cap)
		buf[n < cap ? n : cap - 1] = '\0';
}

static int set_opt(struct kvd_config *c, const struct opt *o, const char *val,
		   char *err, size_t errlen)
{
	char *field = (char *)c + o->off;
	uint64_t v = 0;

	switch (o->type) {
	case OPT_STR:
		if (strlen(val) >= o->len) {
			snprintf(err, errlen, "%s: value too long", o->name);
			return -1;
		}
		strcpy(field, val);
		return 0;
	case OPT_ENUM:
		for (v = 0; o->names[v]; v++)
			if (!strcasecmp(o->names[v], val))
				break;
		if (!o->names[v]) {
			snprintf(err, errlen, "%s: '%s' is not one of", o->name,
				 val);
			for (unsigned i = 0; o->names[i]; i++) {
				size_t l = strlen(err);
				snprintf(err + l, errlen - l, "%s %s",
					 i ? "," : "", o->names[i]);
			}
			return -1;
		}
		break;
	case OPT_EVENTS:
		if (parse_events(val, &v)) {
			snprintf(err, errlen,
				 "Invalid event class character. Use "
				 "'Ag$lshzxeKEtmdn'.");
			return -1;
		}
		break;
	case OPT_OFF:
		if (!strcmp(val, "-1")) {
			v = UINT_MAX;
			break;
		}
		/* fall through */
	case OPT_UINT:
	case OPT_SIZE:
		if (is_auto(o) && !strcmp(val, "auto")) {
			v = 0; /* the store picks (kvd_store_open) */
			break;
		}
		if (parse_size(val, &v) ||
		    (o->type != OPT_SIZE && strpbrk(val, "kKmMgGtTbB"))) {
			snprintf(
			    err, errlen, "%s: '%s' is not a %s%s", o->name, val,
			    o->type == OPT_SIZE	 ? "size (like 4096, 64k, "
						   "16m, 1g)"
			    : o->type == OPT_OFF ? "non-negative integer or -1"
						 : "non-negative integer",
			    is_auto(o) ? " or auto" : "");
			return -1;
		}
		if (v < o->min || v > o->max) {
			snprintf(err, errlen,
				 "%s: %s is out of range [%llu, %llu]", o->name,
				 val, (unsigned long long)o->min,
				 (unsigned long long)o->max);
			return -1;
		}
		break;
	}
	if (o->len == sizeof(uint64_t))
		memcpy(field, &v, sizeof(uint64_t));
	else {
		unsigned u = (unsigned)v;
		memcpy(field, &u, sizeof(unsigned));
	}
	return 0;
}

static void set_defaults(struct kvd_config *c)
{
	char err[256];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NOPTS; i++)
		if (set_opt(c, &options[i], options[i].def, err, sizeof(err)))
			abort(); /* a default outside its own range */
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
			 e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int kvd_config_read(struct kvd_config *c, FILE *f, const char *path)
{
	char *line = NULL, err[300];
	size_t cap = 0;
	ssize_t n;
	unsigned lineno = 0;
	int rc = 0;

	/* Whole lines, however long: read into a fixed buffer, a long line
	 * came back in pieces and the tail of a long comment was taken for
	 * an option (found by tests/fuzz/fuzz_config.c). */
	while ((n = getline(&line, &cap, f)) > 0) {
		char *s, *key, *val;
		const struct opt *o;

		lineno++;
		if (memchr(line, '\0', (size_t)n)) {
			fprintf(stderr, "kvd: %s:%u: NUL byte in line\n", path,
				lineno);
			rc = -1;
			break;
		}
		s = trim(line);
		if (*s == '#' || *s == '\0')
			continue;
		key = s;
		val = s + strcspn(s, " \t");
		if (*val)
			*val++ = '\0';
		val = trim(val);
		if (val[0] == '"' && strlen(val) >= 2 &&
		    val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		o = find_opt(key, strlen(key));
		if (!o || !strcmp(key, "config")) {
			fprintf(stderr, "kvd: %s:%u: unknown option '%s'\n",
				path, lineno, key);
			rc = -1;
			break;
		}
		if (*val == '\0' && o->type != OPT_EVENTS) { /* "": none */
			fprintf(stderr, "kvd: %s:%u: %s: missing value\n", path,
				lineno, key);
			rc = -1;
			break;
		}
		if (set_opt(c, o, val, err, sizeof(err))) {
			fprintf(stderr, "kvd: %s:%u: %s\n", path, lineno, err);
			rc = -1;
			break;
		}
		set_origin(o, "%s:%u", path, lineno);
	}
	free(line);
	return rc;
}

static int load_file(struct kvd_config *c, const char *path)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (!f) {
		fprintf(stderr, "kvd: %s: %s\n", path, strerror(errno));
		return -1;
	}
	rc = kvd_config_read(c, f, path);
	fclose(f);
	return rc;
}

void kvd_config_usage(void)
{
	printf(
	    "usage: kvd [--config FILE] [--test-config] [--OPTION VALUE]...\n\n"
	    "kvd is a sharded LMDB key-value server.  Every option may also "
	    "be\n"
	    "given in the config file as a line \"OPTION VALUE\".\n\n"
	    "  --config FILE             read options from FILE (flags "
	    "override it)\n"
	    "  --test-config             check the configuration and exit\n"
	    "  --help, --version\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &options[i];
		char def[64];

		snprintf(def, sizeof(def), "%s", *o->def ? o->def : "\"\"");
		printf("  --%-22s %s (default %s)\n", o->name, o->help, def);
	}
}

/* A directory kvd must be able to create, or write in if it exists. */
static int dir_usable(const char *dir)
{
	char parent[sizeof(((struct kvd_config *)0)->data_dir)];
	char *slash;
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			return -1;
		}
		return access(dir, W_OK | X_OK);
	}
	if (errno != ENOENT)
		return -1;
	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (!slash)
		return access(".", W_OK | X_OK);
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	return access(parent, W_OK | X_OK);
}

/* The paths, checked now so that --test-config catches them too. */
static int check_paths(const struct kvd_config *c)
{
	int fd;

	if (dir_usable(c->data_dir)) {
		fprintf(stderr, "kvd: %sdata-dir %s cannot be used: %s\n",
			where("data-dir"), c->data_dir, strerror(errno));
		return -1;
	}
	if (c->log_file[0]) {
		fd = open(c->log_file,
			  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
		if (fd < 0) {
			fprintf(stderr, "kvd: %slog-file %s: %s\n",
				where("log-file"), c->log_file,
				strerror(errno));
			return -1;
		}
		close(fd);
	}
	if (c->requirepass_file[0] && access(c->requirepass_file, R_OK)) {
		fprintf(stderr, "kvd: %srequirepass-file %s: %s\n",
			where("requirepass-file"), c->requirepass_file,
			strerror(errno));
		return -1;
	}
	if (c->restore[0] && access(c->restore, R_OK | X_OK)) {
		fprintf(stderr, "kvd: %srestore %s: %s\n", where("restore"),
			c->restore, strerror(errno));
		return -1;
	}
	return 0;
}

/* The Unix socket options: an octal mode, two different paths, RESP's
 * only with RESP on. */
static int check_unix(struct kvd_config *c)
{
	char *end;
	unsigned long m;

	errno = 0;
	m = strtoul(c->unix_perm_str, &end, 8);
	if (errno || end == c->unix_perm_str || *end || m > 0777 ||
	    c->unix_perm_str[0] == '-') {
		fprintf(stderr,
			"kvd: %sunix-socket-perm '%s' is not an octal mode "
			"(like 0770)\n",
			where("unix-socket-perm"), c->unix_perm_str);
		return -1;
	}
	c->unix_perm = (unsigned)m;
	if (c->resp_unix_socket[0] && !c->resp_port) {
		fprintf(stderr,
			"kvd: %sresp-unix-socket needs the RESP listener "
			"(resp-port)\n",
			where("resp-unix-socket"));
		return -1;
	}
	if (c->unix_socket[0] && !strcmp(c->unix_socket, c->resp_unix_socket)) {
		fprintf(stderr,
			"kvd: unix-socket and resp-unix-socket are both %s\n",
			c->unix_socket);
		return -1;
	}
	return 0;
}

/* No two listeners on one port (0: a listener that is off, or for port,
 * any free port). */
static int check_ports(const struct kvd_config *c)
{
	static const char *const names[] = {
	    "port",	     "resp-port",  "metrics-port",  "tls-port",
	    "tls-resp-port", "mongo-port", "tls-mongo-port"};
	const unsigned ports[] = {
	    c->port,	      c->resp_port,  c->metrics_port,  c->tls_port,
	    c->tls_resp_port, c->mongo_port, c->tls_mongo_port};

	for (unsigned i = 0; i < 7; i++)
		for (unsigned j = i + 1; j < 7; j++)
			if (ports[i] && ports[i] == ports[j]) {
				fprintf(stderr, "kvd: %s and %s are both %u\n",
					names[i], names[j], ports[i]);
				return -1;
			}
	return 0;
}

/* A TLS listener needs a certificate and its key, and client
 * certificates need a CA to be checked against. */
static int check_tls(const struct kvd_config *c)
{
	int tls = c->tls_port || c->tls_resp_port || c->tls_mongo_port ||
		  (c->tls_metrics && c->metrics_port);

	if (!tls)
		return 0;
	if (!c->tls_cert_file[0] || !c->tls_key_file[0]) {
		fprintf(stderr, "kvd: TLS needs tls-cert-file and "
				"tls-key-file\n");
		return -1;
	}
	if (c->tls_auth_clients != KVD_TLS_AUTH_NO && !c->tls_ca_cert_file[0] &&
	    !c->tls_ca_cert_dir[0]) {
		fprintf(stderr,
			"kvd: %stls-auth-clients %s needs tls-ca-cert-file or "
			"tls-ca-cert-dir (or tls-auth-clients no)\n",
			where("tls-auth-clients"),
			tls_auth_names[c->tls_auth_clients]);
		return -1;
	}
	return 0;
}

/* Cross-option rules a single range cannot express. */
static int check(struct kvd_config *c)
{
	char bad[256];

	if (c->max_frame < c->max_value + c->max_key + 64) {
		fprintf(stderr,
			"kvd: max-frame-size (%llu) must exceed "
			"max-value-size + max-key-size + 64 (%llu)\n",
			(unsigned long long)c->max_frame,
			(unsigned long long)(c->max_value + c->max_key + 64));
		return -1;
	}
	if (check_ports(c) || check_tls(c) || check_unix(c))
		return -1;
	if (c->replicaof[0]) {
		char host[256];
		unsigned port;
		int resp;

		if (kvd_config_replicaof(c->replicaof, host, sizeof(host),
					 &port, &resp)) {
			fprintf(stderr,
				"kvd: %sreplicaof: not \"HOST PORT\" or \"HOST "
				"PORT resp\" (HOST an address or a host "
				"name)\n",
				where("replicaof"));
			return -1;
		}
	}
	if (kvd_config_primaries_check(c->allowed_primaries, bad,
				       sizeof(bad))) {
		fprintf(stderr,
			"kvd: %sallowed-primaries: '%s' is not HOST or "
			"HOST:PORT\n",
			where("allowed-primaries"), bad);
		return -1;
	}
	if (c->data_dir[0] == '\0') {
		fprintf(stderr, "kvd: data-dir is empty\n");
		return -1;
	}
	if (c->threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
	}
	return check_paths(c);
}

static int parse_flag(struct kvd_config *c, int argc, char **argv, int *i)
{
	const char *a = argv[*i] + 2, *eq = strchr(a, '='), *val;
	size_t n = eq ? (size_t)(eq - a) : strlen(a);
	const struct opt *o = find_opt(a, n);
	char err[300];

	if (!o) {
		fprintf(stderr, "kvd: unknown option '%s' (see kvd --help)\n",
			argv[*i]);
		return -1;
	}
	if (eq)
		val = eq + 1;
	else if (*i + 1 < argc)
		val = argv[++*i];
	else {
		fprintf(stderr, "kvd: --%s needs a value\n", o->name);
		return -1;
	}
	/* --replicaof HOST PORT [resp], as Redis writes it: two arguments
	 * (and the word resp when PORT is the primary's RESP port). */
	if (!eq && !strcmp(o->name, "replicaof") && !strchr(val, ' ') &&
	    *i + 1 < argc && argv[*i + 1][0] != '-') {
		static char joined[300];

		snprintf(joined, sizeof(joined), "%s %s", val, argv[++*i]);
		if (*i + 1 < argc && !strcmp(argv[*i + 1], "resp"))
			snprintf(joined + strlen(joined),
				 sizeof(joined) - strlen(joined), " %s",
				 argv[++*i]);
		val = joined;
	}
	if (0) {
		fprintf(stderr, "kvd: --%s needs a value\n", o->name);
		return -1;
	}
	if (set_opt(c, o, val, err, sizeof(err))) {
		fprintf(stderr, "kvd: --%s\n", err);
		return -1;
	}
	set_origin(o, "--%s", o->name, 0);
	return 0;
}

int kvd_config_load(struct kvd_config *c, int argc, char **argv)
{
	set_defaults(c);
	memset(origin, 0, sizeof(origin));
	/* The file first, wherever --config appears, so flags override it. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			kvd_config_usage();
			return 1;
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-v")) {
			printf("kvd %s (protocol %d)\n", KVD_VERSION,
			       KV_PROTO_VERSION);
			return 1;
		}
		if (!strncmp(a, "--config", 8) &&
		    (a[8] == '\0' || a[8] == '=')) {
			const char *path =
			    a[8] == '=' ? a + 9
					: (i + 1 < argc ? argv[++i] : NULL);

			if (!path || strlen(path) >= sizeof(c->config_file)) {
				fprintf(stderr,
					"kvd: --config needs a file name\n");
				return -1;
			}
			strcpy(c->config_file, path);
		}
	}
	if (c->config_file[0] && load_file(c, c->config_file))
		return -1;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--config", 8)) {
			if (argv[i][8] == '\0')
				i++;
			continue;
		}
		if (!strcmp(argv[i], "--test-config")) {
			c->test_config = 1;
			continue;
		}
		if (strncmp(argv[i], "--", 2) || argv[i][2] == '\0') {
			fprintf(
			    stderr,
			    "kvd: unexpected argument '%s' (see kvd --help)\n",
			    argv[i]);
			return -1;
		}
		if (parse_flag(c, argc, argv, &i))
			return -1;
	}
	return check(c);
}

/* ===================== Reload ===================== */

static const char *const reloadable[] = {"log-level",
					 "log-file",
					 "idle-timeout",
					 "request-timeout",
					 "output-timeout",
					 "max-clients",
					 "max-output",
					 "reaper-interval-ms",
					 "flush-interval-ms",
					 "slowlog-log-slower-than",
					 "slowlog-max-len",
					 "pubsub-max-output",
					 "pubsub-max-subscriptions",
					 "pubsub-max-subscription-bytes",
					 "multi-max-commands",
					 "multi-max-bytes",
					 "notify-keyspace-events",
					 "tls-cert-file",
					 "tls-key-file",
					 "tls-ca-cert-file",
					 "tls-ca-cert-dir",
					 "tls-auth-clients",
					 "tls-protocols",
					 "tls-ciphers",
					 "tls-ciphersuites",
					 "tls-prefer-server-ciphers",
					 NULL};

static int is_reloadable(const char *name)
{
	for (unsigned i = 0; reloadable[i]; i++)
		if (!strcmp(reloadable[i], name))
			return 1;
	return 0;
}

int kvd_config_reload(struct kvd_config *live, int argc, char **argv)
{
	struct kvd_config *next = malloc(sizeof(*next));

	if (!next || kvd_config_load(next, argc, argv)) {
		log_error("SIGHUP: the configuration does not load; nothing "
			  "changed");
		free(next);
		return -1;
	}
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *o = &options[i];
		char *now = (char *)live + o->off,
		     *want = (char *)next + o->off;

		if (!memcmp(now, want, o->len))
			continue;
		if (!is_reloadable(o->name)) {
			log_warn("SIGHUP: %s changed; it takes effect after a "
				 "restart",
				 o->name);
			continue;
		}
		if (o->type == OPT_STR)
			memcpy(now, want,
			       o->len); /* read by this thread only */
		else if (o->len == sizeof(uint64_t))
			__atomic_store_n((uint64_t *)now, *(uint64_t *)want,
					 __ATOMIC_RELAXED);
		else
			__atomic_store_n((unsigned *)now, *(unsigned *)want,
					 __ATOMIC_RELAXED);
		log_info("SIGHUP: %s changed", o->name);
	}
	free(next);
	return 0;
}

/* ===================== CONFIG SET, CONFIG REWRITE ===================== */

/* What CONFIG SET may change: the options SIGHUP reloads that are plain
 * numbers, a level or event classes (stored as bits; strings and TLS
 * files are read by other threads without a lock, or need a new TLS
 * context: SIGHUP only), under kvd's names and Redis's. */
static const struct {
	const char *name, *alias;
} settable[] = {
    {"idle-timeout", "timeout"},
    {"request-timeout", NULL},
    {"output-timeout", NULL},
    {"max-clients", "maxclients"},
    {"max-output", NULL},
    {"reaper-interval-ms", NULL},
    {"flush-interval-ms", NULL},
    {"slowlog-log-slower-than", NULL},
    {"slowlog-max-len", NULL},
    {"pubsub-max-output", NULL},
    {"pubsub-max-subscriptions", NULL},
    {"pubsub-max-subscription-bytes", NULL},
    {"multi-max-commands", NULL},
    {"multi-max-bytes", NULL},
    {"log-level", "loglevel"},
    {"notify-keyspace-events", NULL},
};
#define NSETTABLE (sizeof(settable) / sizeof(settable[0]))

/* Options changed by CONFIG SET since start: CONFIG REWRITE writes them. */
const char *kvd_durability_name(unsigned d)
{
	return d < 2 ? durability_names[d] : "?";
}

static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char set_at_run[NOPTS];

const char *kvd_config_settable(unsigned i)
{
	return i < NSETTABLE ? settable[i].name : NULL;
}

/* The option a CONFIG SET name stands for; *ok 0 when it cannot be set. */
static const struct opt *settable_opt(const char *name, int *ok)
{
	*ok = 1;
	for (size_t i = 0; i < NSETTABLE; i++)
		if (!strcasecmp(name, settable[i].name) ||
		    (settable[i].alias && !strcasecmp(name, settable[i].alias)))
			return find_opt(settable[i].name,
					strlen(settable[i].name));
	*ok = 0;
	for (size_t i = 0; i < NOPTS; i++)
		if (!strcasecmp(name, options[i].name))
			return &options[i];
	return NULL;
}

/* o's live value as the config file writes it. */
static void format_opt(const struct kvd_config *c, const struct opt *o,
		       char *buf, size_t cap)
{
	const char *field = (const char *)c + o->off;
	uint64_t v;

	if (o->type == OPT_STR) {
		snprintf(buf, cap, "%s", field);
		return;
	}
	if (o->len == sizeof(uint64_t))
		v = __atomic_load_n((const uint64_t *)field, __ATOMIC_RELAXED);
	else
		v = __atomic_load_n((const unsigned *)field, __ATOMIC_RELAXED);
	if (o->type == OPT_ENUM)
		snprintf(buf, cap, "%s", o->names[v]);
	else if (o->type == OPT_EVENTS)
		format_events(v, buf, cap);
	else if (o->type == OPT_OFF && v == UINT_MAX)
		snprintf(buf, cap, "-1");
	else if (is_auto(o) && v == 0)
		snprintf(buf, cap, "auto");
	else
		snprintf(buf, cap, "%llu", (unsigned long long)v);
}

int kvd_config_format(const struct kvd_config *live, const char *name,
		      char *buf, size_t cap)
{
	int ok;
	const struct opt *o = settable_opt(name, &ok);

	if (!o || !ok)
		return -1;
	format_opt(live, o, buf, cap);
	return 0;
}

int kvd_config_set(struct kvd_config *live, const char *name, const char *val,
		   int apply, char *err, size_t errlen)
{
	struct kvd_config *tmp;
	const struct opt *o;
	char why[300];
	int ok, rc = -1;

	if (!(o = settable_opt(name, &ok))) {
		snprintf(err, errlen,
			 "ERR Unknown option or number of arguments for CONFIG "
			 "SET - '%.64s'",
			 name);
		return -1;
	}
	if (!ok) {
		snprintf(err, errlen,
			 "ERR CONFIG SET failed (possibly related to argument "
			 "'%.64s') - %s is read-only at run time (set it in "
			 "the config file and restart)",
			 name, o->name);
		return -1;
	}
	if (!(tmp = malloc(sizeof(*tmp)))) {
		snprintf(err, errlen, "ERR out of memory");
		return -1;
	}
	if (set_opt(tmp, o, val, why, sizeof(why))) {
		snprintf(err, errlen,
			 "ERR CONFIG SET failed (possibly related to argument "
			 "'%.64s') - %s",
			 name, why);
		goto out;
	}
	rc = 0;
	if (!apply)
		goto out;
	/* Numbers only (settable[]): one relaxed store, as SIGHUP's. */
	if (o->len == sizeof(uint64_t))
		__atomic_store_n((uint64_t *)((char *)live + o->off),
				 *(uint64_t *)((char *)tmp + o->off),
				 __ATOMIC_RELAXED);
	else
		__atomic_store_n((unsigned *)((char *)live + o->off),
				 *(unsigned *)((char *)tmp + o->off),
				 __ATOMIC_RELAXED);
	if (!strcmp(o->name, "log-level"))
		kvd_log_set_level((int)KVD_LIVE(live->log_level));
	pthread_mutex_lock(&set_lock);
	set_at_run[o - options] = 1;
	pthread_mutex_unlock(&set_lock);
	log_info("CONFIG SET %s %s", o->name, val);
out:
	free(tmp);
	return rc;
}

/* The option a config file line sets, or NULL (comment, blank, other). */
static const struct opt *line_opt(const char *line)
{
	size_t n;

	while (*line == ' ' || *line == '\t')
		line++;
	n = strcspn(line, " \t\r\n");
	return n ? find_opt(line, n) : NULL;
}

/* Write text to path atomically: a temporary file beside it, fsync,
 * rename over it, fsync the directory.  0 or -1 (errno set). */
static int write_atomic(const char *path, const char *text, size_t len,
			mode_t mode)
{
	char tmp[sizeof(((struct kvd_config *)0)->config_file) + 32];
	char dir[sizeof(tmp)];
	const char *slash = strrchr(path, '/');
	size_t done = 0;
	int fd, dfd, e;

	snprintf(tmp, sizeof(tmp), "%s.rewrite.%ld", path, (long)getpid());
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail;
		done += (size_t)w;
	}
	if (fchmod(fd, mode) || fsync(fd) || close(fd)) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path))
		goto fail;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	e = fsync(dfd);
	close(dfd);
	return e;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = e;
	return -1;
}

struct text {
	char *p;
	size_t len, cap;
	int err;
};

static void text_add(struct text *t, const char *s, size_t n)
{
	if (t->err)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = 2 * (t->len + n + 64);
		char *p = realloc(t->p, cap);

		if (!p) {
			t->err = 1;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

/* Add val as kvd_config_read will read it back: quoted when the reader
 * would otherwise trim its blanks or take its own quotes off.  A control
 * character cannot be written at all: a newline would end the line and
 * begin another, an option of the writer's choosing.  0, or -1. */
static int text_value(struct text *t, const char *val)
{
	size_t n = strlen(val);
	int quote;

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)val[i] < 0x20 || val[i] == 0x7f)
			return -1;
	/* an empty value is written "" (notify-keyspace-events ""): a bare
	 * name would read back as a missing value */
	quote = !n || val[0] == ' ' || val[0] == '\t' || val[n - 1] == ' ' ||
		val[n - 1] == '\t' ||
		(n >= 2 && val[0] == '"' && val[n - 1] == '"');
	if (quote)
		text_add(t, "\"", 1);
	text_add(t, val, n);
	if (quote)
		text_add(t, "\"", 1);
	return 0;
}

/* o's line; role, when not NULL, is replicaof's value (the live role:
 * an empty one writes no line).  0, or -1 (with o's name in *bad) when
 * the value cannot be written safely. */
static int text_opt(struct text *t, const struct kvd_config *live,
		    const struct opt *o, const char *role, const char **bad)
{
	char val[600];

	if (role && !strcmp(o->name, "replicaof")) {
		if (!*role)
			return 0;
		snprintf(val, sizeof(val), "%s", role);
	} else {
		format_opt(live, o, val, sizeof(val));
	}
	text_add(t, o->name, strlen(o->name));
	text_add(t, " ", 1);
	if (text_value(t, val)) {
		*bad = o->name;
		return -1;
	}
	text_add(t, "\n", 1);
	return 0;
}

/* The file's lines, each option CONFIG SET changed written in place of its
 * first line (later ones dropped, as Redis does), the others appended;
 * comments and every other line kept as they are. */
static int rewrite_text(FILE *f, const struct kvd_config *live,
			const unsigned char *want, const char *role,
			struct text *t, const char **bad)
{
	unsigned char seen[NOPTS] = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		const struct opt *o = line_opt(line);

		if (!o || !want[o - options]) {
			text_add(t, line, (size_t)n);
		} else if (!seen[o - options]) {
			seen[o - options] = 1;
			rc = text_opt(t, live, o, role, bad);
		}
	}
	free(line);
	if (rc || ferror(f))
		return -1;
	for (size_t i = 0; !rc && i < NOPTS; i++) {
		if (!want[i] || seen[i])
			continue;
		if (role && !*role && !strcmp(options[i].name, "replicaof"))
			continue;
		if (t->len && t->p[t->len - 1] != '\n')
			text_add(t, "\n", 1);
		rc = text_opt(t, live, &options[i], role, bad);
	}
	return rc || t->err ? -1 : 0;
}

int kvd_config_rewrite(const struct kvd_config *live, const char *role,
		       char *err, size_t errlen)
{
	const struct opt *ro = find_opt("replicaof", strlen("replicaof"));
	unsigned char want[NOPTS];
	struct text t = {NULL, 0, 0, 0};
	const char *bad = NULL;
	struct stat st;
	FILE *f;
	int rc = -1;

	if (!live->config_file[0]) {
		snprintf(err, errlen,
			 "ERR The server is running without a config file");
		return -1;
	}
	pthread_mutex_lock(&set_lock);
	memcpy(want, set_at_run, sizeof(want));
	pthread_mutex_unlock(&set_lock);
	/* The role is always written from the live one (REPLICAOF changes it
	 * at run time), as Redis's CONFIG REWRITE writes replicaof. */
	if (role)
		want[ro - options] = 1;
	f = fopen(live->config_file, "r");
	if (!f || fstat(fileno(f), &st) ||
	    rewrite_text(f, live, want, role, &t, &bad) ||
	    write_atomic(live->config_file, t.p ? t.p : "", t.len,
			 st.st_mode & 07777)) {
		if (bad)
			snprintf(err, errlen,
				 "ERR Rewriting config file: the value of %s "
				 "holds a control character and cannot be "
				 "written; the file is unchanged",
				 bad);
		else
			snprintf(err, errlen, "ERR Rewriting config file: %s",
				 t.err ? "out of memory" : strerror(errno));
		goto out;
	}
	log_info("CONFIG REWRITE: %s rewritten", live->config_file);
	rc = 0;
out:
	if (f)
		fclose(f);
	free(t.p);
	return rc;
}
