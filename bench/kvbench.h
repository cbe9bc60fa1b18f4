/* kvbench.h - what kvbench's modules share: the configuration, the
 * operation types, the driver interface and the results of a phase.
 *
 * Modules: kvbench.c (options, main), engine.c (threads, connections,
 * pipelining, rate, warmup), workloads.c (what to send), ycsb.c (YCSB's
 * generators), hist.c (latency histograms), verify.c (read-back of every
 * acknowledged write), report.c (table, JSON, CSV, HDR, plot), server.c
 * (starting a server and measuring its memory), driver_*.c (one per
 * protocol), record.c (YCSB records of fields: their bytes, and the one-value
 * encoding for stores without fields), fieldops.c (the requests of each
 * operation on records of fields, natively or emulated), fstate.c
 * (--verify's per-field state).
 */
#ifndef KVBENCH_H
#define KVBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hist.h"

/* ---- operations ------------------------------------------------------ */

/* What a user asked for; a read-modify-write is one operation of two
 * requests, timed from the read's send to the write's reply. */
enum kb_optype {
	OP_READ,
	OP_UPDATE,
	OP_INSERT,
	OP_SCAN,
	OP_RMW,
	OP_NTYPES,
	OP_VERIFY = OP_NTYPES, /* a read-back, never reported as an op */
};

extern const char *const kb_op_names[OP_NTYPES];

enum kb_err {
	ERR_NOT_FOUND,	/* a read found no value */
	ERR_SERVER,	/* the server answered with an error */
	ERR_CONNECTION, /* the connection failed with requests in flight */
	ERR_PROTOCOL,	/* a reply that cannot be decoded */
	ERR_NTYPES,
};

extern const char *const kb_err_names[ERR_NTYPES];

/* ---- drivers ----------------------------------------------------------- */

/* A request, as the engine hands it to a driver.  The driver copies what it
 * needs before send() returns.
 *
 * GET, PUT and SCAN move a record as one value.  READ, UPDATE, INSERT and
 * FSCAN are YCSB's operations on a record of fields (its DB interface:
 * read(key, fields), update(key, values), insert(key, values), scan(start,
 * count, fields)); only a driver with .fields set gets them, and for the
 * others fieldops.c makes them out of GET and PUT of one encoded value. */
enum kb_req_kind {
	REQ_GET,
	REQ_PUT,
	REQ_SCAN,
	REQ_READ,   /* field: the one field read, or -1: all of them */
	REQ_UPDATE, /* fv: the fields written (one, or all) */
	REQ_INSERT, /* fv: every field of the record */
	REQ_FSCAN,  /* count records from key on; field as READ */
	/* The indexed-document workloads (ixdocs.h), mongodb and postgres:
	 * the documents whose field (enum kb_ixfield) equals ival (IX_ID:
	 * key); count documents from r >= ival on, in r's order; an insert
	 * of document key, val being its other fields as a msgpack map. */
	REQ_IXFIND,
	REQ_IXRANGE,
	REQ_IXINSERT,
};

/* The fields of the indexed documents a query names. */
enum kb_ixfield { IX_K, IX_R, IX_ID };

#define KB_REQ_KEY_MAX 128 /* the longest key a workload makes */
#define KB_FIELD_NAME_MAX 16

/* One field of a record: field<idx> and its bytes. */
struct kb_fval {
	unsigned idx;
	const uint8_t *val;
	size_t len;
};

struct kb_req {
	enum kb_req_kind kind;
	const char *key;
	size_t klen;
	const uint8_t *val; /* PUT */
	size_t vlen;
	unsigned count;		  /* SCAN, FSCAN: records from key on */
	int field;		  /* READ, FSCAN: the field, or -1 for all */
	const struct kb_fval *fv; /* UPDATE, INSERT */
	unsigned nfv;
	int64_t ival; /* IXFIND, IXRANGE */
};

/* "field<idx>" into buf (KB_FIELD_NAME_MAX bytes); its length. */
size_t kb_field_name(unsigned idx, char *buf);

enum kb_status { REPLY_OK, REPLY_NOT_FOUND, REPLY_ERROR };

/* A reply.  val and msg point into the driver's buffers and stay valid
 * until the next call on the connection. */
struct kb_reply {
	enum kb_status status;
	const uint8_t *val; /* GET */
	size_t vlen;
	unsigned items;	 /* SCAN, FSCAN: records returned */
	const char *msg; /* REPLY_ERROR: the server's words */
	/* READ: the fields returned, in any order; a field the server did
	 * not have is left out.  A record that is not there at all is
	 * REPLY_NOT_FOUND. */
	const struct kb_fval *fields;
	unsigned nfields;
};

struct kb_target {
	const char *host; /* a name, an address, or a Unix socket's path */
	unsigned port;
	const char *password; /* NULL: none (AUTH is not sent) */
	const char *conninfo; /* postgres: a libpq connection string;
			       * mongodb: a mongodb:// URI */
	const char *user;     /* mongodb: the user (SCRAM-SHA-256) */
	int doc;	      /* postgres: records as jsonb documents */
	const char *table;    /* postgres: the table; redis: the scan index */
	int scans;	      /* the workload scans: keep an ordered index */
	int fields;	      /* records of fields (--record fields) */
	unsigned fieldcount;  /* their number (postgres: the columns) */
	/* The indexed-document workloads: their documents and the three
	 * secondary indexes on k, r and s, which setup creates unless
	 * no_index (--no-index: a load to time an index build after). */
	int index, no_index;
	/* Their finds ask for the indexed field alone (--index-only):
	 * MongoDB's projection {f: 1, _id: 0}, a covered query; PostgreSQL's
	 * SELECT of the index's expression. */
	int index_only;
	/* TLS: --tls or a kvds:// URL, and its options (see kvclient.h's
	 * struct kvc_tls_opts; drivers with tls_port 0 refuse it). */
	int tls, insecure;
	const char *cacert, *cacertdir, *cert, *key, *sni;
};

/* Every call returns 0 or a negative value on failure, with the reason in
 * err (setup, connect) or errmsg(). */
struct kb_driver {
	const char *name;
	unsigned default_port;
	unsigned tls_port; /* the default port with --tls; 0: no TLS */
	/* Records of fields: the driver takes READ, UPDATE, INSERT and
	 * FSCAN, and fields_ops says with what (the report's header); 0: they
	 * are emulated with one value per record (fieldops.c). */
	int fields;
	const char *fields_ops;
	/* Once per phase, before connecting: create a table, load a script. */
	int (*setup)(const struct kb_target *t, char *err, size_t errlen);
	void *(*connect)(const struct kb_target *t, char *err, size_t errlen);
	int (*fd)(void *c);
	/* Queue one request; no I/O needed. */
	int (*send)(void *c, const struct kb_req *r);
	/* Write what is queued without blocking: 0 all written, 1 more is
	 * left (wait for POLLOUT), < 0 the connection failed. */
	int (*flush)(void *c);
	/* Read what the socket holds, without blocking. */
	int (*input)(void *c);
	/* The reply to the oldest request, of the given kind (and for READ
	 * and FSCAN the field asked, or -1), if complete: 1 got one, 0 not
	 * yet, < 0 the connection failed. */
	int (*reply)(void *c, enum kb_req_kind kind, int field,
		     struct kb_reply *out);
	const char *(*errmsg)(void *c);
	void (*close)(void *c);
};

extern const struct kb_driver driver_kvd, driver_kvd_split, driver_redis,
    driver_pg, driver_mongo, driver_mongowire;

/* The drivers built into this binary, NULL-terminated. */
extern const struct kb_driver *const kb_drivers[];

/* ---- configuration --------------------------------------------------- */

enum kb_phase { PHASE_LOAD, PHASE_RUN, PHASE_VERIFY, PHASE_N };

extern const char *const kb_phase_names[PHASE_N];

/* YCSB's CoreWorkload properties, named as in its workload files. */
struct kb_props {
	uint64_t recordcount, operationcount, insertstart, insertcount;
	unsigned fieldcount, fieldlength, minfieldlength;
	int fieldlengthdistribution; /* enum kb_dist */
	double readproportion, updateproportion, insertproportion;
	double scanproportion, readmodifywriteproportion;
	int requestdistribution; /* enum kb_dist */
	unsigned minscanlength, maxscanlength;
	int scanlengthdistribution; /* enum kb_dist */
	int orderedinserts;	    /* insertorder=ordered */
	unsigned zeropadding;
	int readallfields, writeallfields;
	double zipfianconstant;
	double hotspotdatafraction, hotspotopnfraction;
	double exp_percentile, exp_frac;
};

struct kb_workload;

/* --record: how YCSB's records are stored (docs/kvbench.md). */
enum kb_record {
	RECORD_FIELDS, /* fields, as YCSB: a hash, columns, ... */
	RECORD_VALUE,  /* the whole record as one msgpack value */
};

struct kb_config {
	const struct kb_driver *driver;
	struct kb_target target;
	const struct kb_workload *wl;
	struct kb_props p;
	unsigned threads, conns, pipeline;
	uint64_t ops;	 /* run phase; 0: by duration */
	double duration; /* seconds; 0: by ops */
	double warmup;
	double rate; /* ops/s over all threads; 0: unlimited */
	uint64_t seed;
	unsigned vmin, vmax;   /* ingest, uuid: value sizes */
	enum kb_record record; /* YCSB workloads */
	int do_load, do_run;
	int verify;
	const char *before_verify;
	const char *json_path, *csv_path, *hdr_path, *plot_path;
	int key_stats;
	int quiet;
	pid_t server_pid;
	const char *server_cmd;
	/* -u, -a, --askpass as given (target.c wipes the password's text) */
	char *url_arg, *password_arg;
	int askpass, no_auth_warning;
	char *password, *host_buf; /* owned: the password used, -u's host */
	char cmdline[2048];	   /* for the reports: how this run was made */
};

/* ---- results --------------------------------------------------------- */

/* One operation type's second: timed (successful) operations and their
 * latencies, ns. */
struct kb_tick_op {
	uint64_t ops;
	uint64_t p50, p99, p999, max;
};

struct kb_tick {
	double t; /* seconds since the phase started */
	uint64_t ops;
	uint64_t p50, p99, p999, max;	 /* ns, over the second */
	struct kb_tick_op op[OP_NTYPES]; /* the same, per operation type */
	int warmup;
};

struct kb_result {
	enum kb_phase phase;
	double seconds; /* measured part */
	double
	    measured_at; /* when it began, in seconds since the phase's start */
	uint64_t ops;	 /* measured operations, failed ones included */
	uint64_t planned; /* what the options asked for; 0: by time */
	struct kb_hist hist[OP_NTYPES];
	uint64_t errors[ERR_NTYPES];
	uint64_t op_errors[OP_NTYPES];
	uint64_t scan_items;
	struct kb_tick *ticks;
	size_t nticks;
	/* --key-stats */
	int has_keys;
	uint64_t keys_distinct, keys_space;
	double keys_top1, keys_top10; /* share of ops on the hottest 1%/10% */
	char first_error[256];
};

/* Fields checked by --verify, and what was wrong with them: stale (a
 * value some acknowledged write had provably replaced), corrupt (bytes no
 * write sent), missing (a field written, absent from its record). */
struct kb_fcheck {
	uint64_t checked, stale, corrupt, missing;
};

struct kb_verify_result {
	int done;
	uint64_t keys, ok, lost, mismatched, errors;
	char **lost_keys, **bad_keys; /* the first few, printable */
	size_t nlost_keys, nbad_keys;
	double seconds;
	int fields;		/* records of fields: the two below apply */
	struct kb_fcheck audit; /* the fields of the read-back */
	struct kb_fcheck reads; /* the fields of the run's reads */
	char **bad_fields;	/* "KEY FIELD: stale", the first few */
	size_t nbad_fields;
};

struct kb_server_mem {
	int known;
	pid_t pid;
	uint64_t peak_rss; /* bytes: VmHWM, or the tree's sampled PSS */
	uint64_t rss_anon, rss_file; /* bytes, at the end */
	int tree;		     /* sampled over several processes */
};

/* ---- time -------------------------------------------------------------- */

uint64_t kb_now_ns(void);

#endif
