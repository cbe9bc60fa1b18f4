/* config.h - kvd's settings: one table of options read from flags and from a
 * config file of "key value" lines, each checked against its range
 * (config.c; hosts and lists of primaries: hosts.c). */
#ifndef KVD_CONFIG_H
#define KVD_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* io-thread-flush: no (the committers), ring, inline (fdatasync), auto
 * (inline for a small batch, else ring) */
enum kvd_io_flush { KVD_IOF_NO, KVD_IOF_RING, KVD_IOF_INLINE, KVD_IOF_AUTO };

enum kvd_durability {
	KVD_DUR_SYNC, /* reply after data and meta page are on disk */
	KVD_DUR_ASYNC, /* reply after the commit reaches the OS; flush on a timer */
};

/* Longest password: a native AUTH frame before authentication is at most
 * 16 KiB (auth.h), so a longer one could never be given. */
#define KVD_PASS_MAX 4096

struct kvd_config {
	char bind[64];
	unsigned port;
	unsigned resp_port;
	unsigned mongo_port;
	unsigned mongo_ttl_interval; /* seconds between TTL monitor passes */
	unsigned metrics_port;
	char metrics_bind[64];
	/* Unix sockets of the native protocol and of RESP ("": none), made
	 * with mode unix_perm (parsed from unix_perm_str, octal) */
	char unix_socket[108];
	char resp_unix_socket[108];
	char unix_perm_str[8];
	unsigned unix_perm;
	unsigned resp_flushall; /* RESP FLUSHALL/FLUSHDB allowed (1) or not */
	char data_dir[512];
	unsigned threads;
	unsigned shards; /* of a new data directory; 0: threads */
	unsigned durability;
	unsigned flush_interval_ms;
	uint64_t memtable_size;
	unsigned checkpoint_interval_ms;
	uint64_t journal_segment_size;
	unsigned journal_truncate_corrupt;
	/* sync mode: io threads flush their own writes (enum kvd_io_flush) */
	unsigned io_thread_flush;
	uint64_t max_key;
	uint64_t max_value;
	uint64_t max_frame;
	uint64_t max_hash_fields; /* fields of one hash, at most */
	uint64_t max_hash_bytes;  /* bytes of one hash's image, at most */
	unsigned max_clients;
	uint64_t map_size;
	unsigned log_level;
	char log_file[512];
	unsigned idle_timeout;
	unsigned request_timeout;
	unsigned output_timeout;
	uint64_t max_output;
	uint64_t max_inflight_bytes; /* write bytes in flight, per connection */
	uint64_t
	    max_inflight_writes; /* keys written in flight, per connection */
	uint64_t max_inflight_shard; /* write bytes in flight, per shard */
	unsigned reaper_interval_ms;
	/* up to KVD_PASS_MAX bytes, whether from requirepass or its file */
	char requirepass[KVD_PASS_MAX + 1];
	char requirepass_file[512];
	unsigned protected_mode;
	/* failed AUTH per source address: at once, then a second (0: off) */
	unsigned auth_fail_burst;
	unsigned auth_fail_rate;
	unsigned read_only;
	char disable_commands[512];
	char backup_dir[512];	   /* BACKUP NAME writes backup_dir/NAME */
	unsigned backup_anywhere;  /* without backup-dir: any absolute path */
	unsigned read_only_backup; /* BACKUP allowed in read-only mode */
	char restore[512];
	unsigned restore_force;
	char config_file[512];
	int test_config;
	/* RESP SLOWLOG: commands at least this many microseconds long are
	 * logged (KVD_SLOWLOG_OFF: none), the newest slowlog_max_len kept */
	unsigned slowlog_slower;
	unsigned slowlog_max_len;
	/* RESP pub/sub: a subscriber's pending messages, at most */
	uint64_t pubsub_max_output;
	/* RESP pub/sub: the whole server's subscriptions, and their cost in
	 * bytes (resp_pubsub.c), at most */
	uint64_t pubsub_max_subs;
	uint64_t pubsub_max_sub_bytes;
	/* RESP MULTI: one transaction's queue, in commands and bytes */
	uint64_t multi_max_cmds;
	uint64_t multi_max_bytes;
	/* TLS (tls.c): the native and RESP listeners over TLS (0: none),
	 * and what every TLS listener presents and asks for */
	unsigned tls_port;
	unsigned tls_resp_port;
	unsigned tls_mongo_port;
	unsigned tls_metrics; /* the metrics port speaks TLS */
	char tls_cert_file[512];
	char tls_key_file[512];
	char tls_ca_cert_file[512];
	char tls_ca_cert_dir[512];
	unsigned tls_auth_clients; /* enum kvd_tls_auth */
	char tls_protocols[64];
	char tls_ciphers[512];
	char tls_ciphersuites[512];
	unsigned tls_prefer_server_ciphers;
	unsigned tls_max_handshakes; /* in flight per io thread (loop.c) */
	/* Replication (repl.c, replica.c): the primary to follow ("HOST
	 * PORT", its native port; "": none), and how */
	char replicaof[300];
	/* the primaries REPLICAOF may name at run time, and that get
	 * primary-password (repl_trust.c); "": any, without the password */
	char allowed_primaries[1024];
	char primary_password[KVD_PASS_MAX + 1];
	char primary_password_file[512];
	unsigned tls_replication;   /* connect to the primary over TLS */
	uint64_t repl_backlog_size; /* journal kept per shard for replicas */
	unsigned min_replicas_to_ack;
	unsigned min_replicas_max_lag; /* seconds; 0: never refuse */
	unsigned replica_priority;
	/* notify-keyspace-events: KVD_NOTIFY_* bits (keyspace.c), changed at
	 * run time by CONFIG SET and SIGHUP: read it with KVD_LIVE */
	unsigned notify_events;
};

/* notify-keyspace-events, Redis's classes as bits: K and E say where an
 * event is published (__keyspace@0__:<key>, __keyevent@0__:<event>), the
 * others which events (A: all of g $ l s h z x e t d). */
enum {
	KVD_NOTIFY_KEYSPACE = 1u << 0, /* K */
	KVD_NOTIFY_KEYEVENT = 1u << 1, /* E */
	KVD_NOTIFY_GENERIC = 1u << 2,  /* g: del, expire, rename_*, ... */
	KVD_NOTIFY_STRING = 1u << 3,   /* $: set, incrby, append, ... */
	KVD_NOTIFY_LIST = 1u << 4,     /* l, s, h, z: kinds kvd has not */
	KVD_NOTIFY_SET = 1u << 5,
	KVD_NOTIFY_HASH = 1u << 6,
	KVD_NOTIFY_ZSET = 1u << 7,
	KVD_NOTIFY_EXPIRED = 1u << 8,	/* x */
	KVD_NOTIFY_EVICTED = 1u << 9,	/* e: kvd evicts nothing */
	KVD_NOTIFY_STREAM = 1u << 10,	/* t */
	KVD_NOTIFY_MODULE = 1u << 11,	/* d */
	KVD_NOTIFY_KEY_MISS = 1u << 12, /* m: not published by kvd */
	KVD_NOTIFY_NEW = 1u << 13,	/* n: a key created */
	KVD_NOTIFY_ALL = 0xffcu,	/* A: g $ l s h z x e t d */
};

/* tls-auth-clients: client certificates refused, required, or checked
 * when given. */
enum kvd_tls_auth { KVD_TLS_AUTH_NO, KVD_TLS_AUTH_YES, KVD_TLS_AUTH_OPTIONAL };

/* slowlog-log-slower-than -1 */
#define KVD_SLOWLOG_OFF 0xffffffffu

/* Fill defaults, then apply the config file named by --config (if any) and
 * then the flags, so flags win.  Exits: -1 after printing a one-line reason,
 * 1 when --help or --version was answered, 0 to run. */
int kvd_config_load(struct kvd_config *c, int argc, char **argv);

/* SIGHUP: read the configuration again (file, then the original flags) and
 * apply what can change at run time: log-level, log-file, idle-timeout,
 * request-timeout, output-timeout, max-clients, max-output,
 * reaper-interval-ms, flush-interval-ms, slowlog-log-slower-than,
 * slowlog-max-len, pubsub-max-output, pubsub-max-subscriptions,
 * pubsub-max-subscription-bytes, multi-max-commands, multi-max-bytes,
 * notify-keyspace-events, and the TLS certificate options (tls-cert-file ...
 * tls-prefer-server-ciphers: main.c then builds a new TLS context).  Other changes are logged as
 * needing a restart.  A configuration that no longer parses changes
 * nothing.  0 or -1. */
int kvd_config_reload(struct kvd_config *live, int argc, char **argv);

/* Read a field that SIGHUP may change while other threads run. */
#define KVD_LIVE(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* Apply the "name value" lines of a config file, read from f (path names
 * it in messages), to c.  kvd_config_load calls it for --config; the
 * fuzzer (tests/fuzz/fuzz_config.c) calls it on its own.  0, or -1 after
 * printing a one-line reason. */
int kvd_config_read(struct kvd_config *c, FILE *f, const char *path);

/* CONFIG SET (RESP): set option name (kvd's, or Redis's alias: maxclients,
 * timeout, loglevel) to val at run time; apply 0 only checks.  Only the
 * numeric options SIGHUP reloads, log-level and notify-keyspace-events can
 * be set.  0, or -1 with
 * Redis's kind of error text in err.  Any thread. */
int kvd_config_set(struct kvd_config *live, const char *name, const char *val,
		   int apply, char *err, size_t errlen);
/* The i-th option CONFIG SET may change, or NULL past the last. */
const char *kvd_config_settable(unsigned i);
/* A settable option's live value as text (CONFIG GET); 0 or -1. */
int kvd_config_format(const struct kvd_config *live, const char *name,
		      char *buf, size_t cap);
/* CONFIG REWRITE: write the options CONFIG SET changed into the config file
 * (--config): each in place of its first line there, or appended; every
 * other line kept.  role, when not NULL, is the live replication role as
 * replicaof's value ("HOST PORT [resp]"), written the same way, or "" for
 * a primary: the file's replicaof lines are then removed.  Atomic: a
 * temporary file, fsync, rename, fsync of the directory.  0, or -1 with a
 * reason in err. */
int kvd_config_rewrite(const struct kvd_config *live, const char *role,
		       char *err, size_t errlen);

/* A host a replica may be pointed at (replicaof, REPLICAOF): an IPv4 or
 * IPv6 address, or a host name of letters, digits, '-' and '_' in labels
 * of 1-63 bytes between dots, 253 bytes at most.  Nothing else, so that
 * no host can carry a newline into the config file (CONFIG REWRITE) or
 * the log.  1 or 0. */
int kvd_config_host_ok(const char *host);
/* Parse replicaof's value "HOST PORT" or "HOST PORT resp" (HOST checked
 * by kvd_config_host_ok, PORT 1-65535).  0, or -1 when it is neither. */
int kvd_config_replicaof(const char *val, char *host, size_t hcap,
			 unsigned *port, int *resp);

/* allowed-primaries: entries "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT"
 * (no port: any), separated by commas or spaces.  Check every entry: 0,
 * or -1 with the first bad one in bad. */
int kvd_config_primaries_check(const char *list, char *bad, size_t cap);
/* Does the list name host (compared as text, without case) and port?
 * 1 or 0. */
int kvd_config_primary_allowed(const char *list, const char *host,
			       unsigned port);

/* A durability mode's name, as the option spells it ("sync", "async"). */
const char *kvd_durability_name(unsigned d);

/* Print every option with its default to stdout (kvd --help). */
void kvd_config_usage(void);

#endif
