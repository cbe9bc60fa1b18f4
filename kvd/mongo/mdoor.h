/* mdoor.h - kvd's MongoDB door: MongoDB's wire protocol (OP_MSG, and
 * OP_QUERY for the first handshake of older drivers), its handshake,
 * SCRAM-SHA-256 authentication, cursors and the document commands, as a
 * module that knows nothing of the server.  It turns the bytes a client
 * sends into reply bytes, and it talks to the rest of kvd only through the
 * three tables of this header:
 *
 *   struct mdoor_host   what the server gives the door: reply bytes out,
 *                       resume a connection, close it, the auth guessing
 *                       limits, the clock, facts and statistics;
 *   struct mdoor_store  the document store: databases, collections,
 *                       reads (a scan over a filter) that answer at once,
 *                       and writes that complete later;
 *   struct mdoor_config the door's settings (password, user, limits).
 *
 * Threading.  One struct mdoor per server, shared by every io thread: its
 * cursor registry is locked, its counters atomic.  One struct mdoor_conn
 * per client connection, used by the connection's own io thread only:
 * mdoor_input, the completion of a write (mdoor_wbatch.done) and
 * mdoor_conn_close are called there.
 *
 * Order.  A connection runs one request at a time.  A read, or a command
 * that needs no write, is answered inside mdoor_input.  A write (insert,
 * update, delete, findAndModify, create, drop, dropDatabase) hands a
 * struct mdoor_wbatch to store->write and suspends: mdoor_input consumes
 * the message and returns, mdoor_busy() is true, and further input waits
 * (mdoor_input returns 0) until the store calls the batch's done, which
 * writes the reply and calls host->resume so that the server runs the
 * connection's buffered input again.  A read that runs longer than a
 * slice (MDOOR_SLICE_MS: a filter that matches little of a large
 * collection, a $regex that backtracks) gives the thread back the same
 * way: mdoor_yielded() is true, and the server calls mdoor_again on a
 * later turn of its loop, after serving its other connections, until
 * the read has answered.  So replies leave in request order
 * and a connection reads its own writes, whether or not the client
 * pipelines (MongoDB's drivers do not, except fire-and-forget writes sent
 * with moreToCome, which take the same path and answer nothing).
 *
 * Memory.  Every length is checked before anything is allocated by it: a
 * message header over the limit (48,000,000 bytes, or preauth_max_message
 * before authentication) closes the connection at once, when only its
 * first 4 bytes have arrived.  The door holds no pointer into the input
 * after mdoor_input returns: what a suspended write needs is copied (the
 * documents of an insert are rebuilt anyway, with their _id first).
 * Cursors are bounded in number (per connection and server-wide), in the
 * bytes their pipelines hold (server-wide), in idle time, and each batch
 * in bytes (16 MiB of documents).
 */
#ifndef KVD_MONGO_MDOOR_H
#define KVD_MONGO_MDOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"
#include "mql_match.h"
#include "mql_project.h"
#include "mql_sort.h"
#include "mql_update.h"

/* What the door announces in hello (and enforces). */
#define MDOOR_MAX_MESSAGE 48000000	       /* maxMessageSizeBytes */
#define MDOOR_MAX_BSON (16 * 1024 * 1024)      /* maxBsonObjectSize */
#define MDOOR_MAX_CMD (MDOOR_MAX_BSON + 16384) /* a command's body */
#define MDOOR_MAX_WRITE_BATCH 100000	       /* maxWriteBatchSize */
#define MDOOR_WIRE_MIN 0
#define MDOOR_WIRE_MAX 17 /* MongoDB 6.0 */
#define MDOOR_MONGO_VERSION "6.0.0"
#define MDOOR_SESSION_TIMEOUT_MIN 30 /* logicalSessionTimeoutMinutes */
/* How long a read works before it gives its io thread back (mdoor_again;
 * with a clock of 4 ms ticks, 0 to 4 ms), and what a scan says then. */
#define MDOOR_SLICE_MS 2
#define MDOOR_PAUSE 2

struct mdoor;
struct mdoor_conn;
struct mdoor_wbatch;

/* ===================== the server's side ===================== */

/* Figures for serverStatus, filled by host->stats. */
struct mdoor_stats {
	uint64_t conn_current, conn_available, conn_total;
	uint64_t mem_resident_mb, mem_virtual_mb;
};

struct mdoor_host {
	void *ctx; /* the server: first argument of the calls below that
		    * concern no connection */

	/* reply - append n bytes (whole reply messages) to the output of the
	 * connection whose handle is conn (mdoor_conn_open's). */
	void (*reply)(void *conn, const void *p, size_t n);
	/* resume - a suspended request finished and its reply was given: the
	 * server runs the connection's buffered input again (mdoor_input).
	 * Called from the batch's done on the connection's io thread, never
	 * from inside mdoor_input. */
	void (*resume)(void *conn);
	/* close - close the connection once its output is sent (a message
	 * the door cannot frame, or a protocol violation).  The door takes
	 * no more input from it. */
	void (*close)(void *conn);
	/* auth_gate - may this connection's peer check a password now?  0
	 * yes; -1 no (it failed too often: kvd_auth_gate), the door answers
	 * AuthenticationFailed without checking.  May be NULL (always yes).
	 * auth_failed - a proof was wrong (kvd_auth_note_failure); may be
	 * NULL.  authed - the connection authenticated (the server lifts its
	 * pre-authentication caps); may be NULL. */
	int (*auth_gate)(void *conn);
	void (*auth_failed)(void *conn);
	void (*authed)(void *conn);
	/* now_ms - the wall clock in ms since the epoch (localTime, cursor
	 * idle time, uptime). */
	uint64_t (*now_ms)(void *ctx);
	/* stats - serverStatus's figures (may be NULL: zeros);
	 * status_extra - append the server's own section(s) to serverStatus
	 * (may be NULL). */
	void (*stats)(void *ctx, struct mdoor_stats *st);
	void (*status_extra)(void *ctx, bson_t *out);
	/* log - a line for the server's log (level 0 error, 1 warning, 2
	 * info); may be NULL. */
	void (*log)(void *ctx, int level, const char *msg);
};

/* ===================== the document store ===================== */

/* A database as listDatabases shows it. */
struct mdoor_db_info {
	const char *name;
	uint64_t size_on_disk;
	bool empty;
};

/* A collection as listCollections shows it. */
struct mdoor_coll_info {
	const char *name;
	const uint8_t *options; /* create's options as given, or NULL: {} */
	uint32_t options_len;
	const uint8_t *uuid; /* 16 bytes, or NULL */
};

/* collStats / dbStats figures (a store may leave any of them 0). */
struct mdoor_coll_stats {
	uint64_t count, size, storage_size, nindexes, index_size;
};

/* Callbacks of the listings: a nonzero return stops the listing. */
typedef int (*mdoor_db_cb)(void *ctx, const struct mdoor_db_info *db);
typedef int (*mdoor_coll_cb)(void *ctx, const struct mdoor_coll_info *c);

/* What a scan reads: the documents of db.coll that match filter. */
struct mdoor_query {
	const char *db, *coll;
	const struct mql_match *filter; /* never NULL ({} matches all) */
	const uint8_t *filter_bson;	/* its document (a planner's input) */
	uint32_t filter_len;
	/* The order the door wants, or NULL.  A store that yields the
	 * documents in this order (an index, the _id order) sets sorted in
	 * the scan's reply; otherwise the door sorts them (memory bounded,
	 * 292 past the limit). */
	const struct mql_sort *sort;
	const uint8_t *sort_bson;
	uint32_t sort_len;
	/* When the scan yields in sort's order (or there is no sort), the
	 * door reads at most this many of its documents (a find's skip +
	 * limit, an aggregate's $sort + $limit); -1: all.  A hint for the
	 * store's read-ahead: the door stops reading there anyway. */
	int64_t want;
	/* find's hint: a key pattern (BSON), or with hint_name an index's
	 * name (hint_len bytes, NUL after them); NULL: none */
	const uint8_t *hint;
	uint32_t hint_len;
	bool hint_name;
	/* What the door reads of each document besides the filter and the
	 * sort: a find's projection (proj), or nothing (count_only: the
	 * documents are only counted); NULL and false: the whole document.
	 * A store may then give documents holding only the fields these
	 * read (an index's entries alone: a covered query). */
	const struct mql_project *proj;
	bool count_only;
};

/* What a scan answers about itself. */
struct mdoor_scan_info {
	bool sorted; /* yields in query->sort's order */
};

/* Write statements and their results.  The door fills the inputs, the
 * store the outputs. */
enum mdoor_wkind {
	MDOOR_W_INSERT, /* ops[i].doc */
	MDOOR_W_UPDATE, /* ops[i].q, .u, .upsert, .multi */
	MDOOR_W_DELETE, /* ops[i].q, .multi (limit 0) */
	MDOOR_W_FAM,	/* one op: findAndModify */
	MDOOR_W_CREATE, /* no op: create db.coll (options) */
	MDOOR_W_DROP,	/* no op: drop db.coll */
	MDOOR_W_DROPDB, /* no op: drop db */
	/* no op: createIndexes (options: {indexes: [spec...]}, each spec
	 * checked and normalized by the door), dropIndexes (options:
	 * {index: name or "*"}); results in ix_before / ix_after */
	MDOOR_W_IXCREATE,
	MDOOR_W_IXDROP,
};

struct mdoor_wop {
	/* in */
	const uint8_t *doc; /* INSERT: checked BSON, _id first, <= 16 MiB */
	uint32_t len;
	const struct mql_match *q;   /* UPDATE, DELETE, FAM: the filter (its
				    * predicates: mql_match_preds) */
	const struct mql_update *u;  /* UPDATE, FAM (NULL with remove) */
	const struct mql_sort *sort; /* FAM: which match it takes; NULL */
	const bson_value_t *new_id;  /* upsert: _id of a new document whose
				      * query and update give none */
	/* The filter's and the update's BSON as the client sent them (the
	 * door's copies, valid until done), for a store that hands them on
	 * to another thread (kvd's committers recompile them there). */
	const uint8_t *q_bson, *u_bson;
	uint32_t q_len, u_len;
	/* UPDATE, DELETE, FAM: the hint, a key pattern or with hint_name an
	 * index's name (the door's copy, NUL-terminated), which the scan for
	 * the filter's matches takes as a find's; NULL: none */
	const uint8_t *hint;
	uint32_t hint_len;
	bool hint_name;
	bool upsert, multi;	 /* multi: every match (UPDATE, DELETE) */
	bool remove, return_new; /* FAM */
	/* out */
	bool ran;	      /* the statement was executed */
	struct mql_error err; /* code != 0: it failed (err.code 11000 for
				 * a duplicate _id, with MongoDB's message) */
	int64_t n;	      /* matched (UPDATE), deleted, or inserted */
	int64_t nmodified;    /* UPDATE: changed */
	bson_t upserted;      /* upsert that inserted: {_id: v} (an empty
				 * document, initialized by the door) */
	bson_t value;	      /* FAM: the document before the change, or
				 * after it with return_new; empty: none */
	bson_t errinfo;	      /* err's fields for the write error: 11000 of a
			 * unique index gives {keyPattern, keyValue} */
};

struct mdoor_wbatch {
	enum mdoor_wkind kind;
	const char *db, *coll;	/* coll NULL for DROPDB */
	bool ordered;		/* stop at the first failed statement */
	const uint8_t *options; /* CREATE: its options document, or NULL */
	uint32_t options_len;
	struct mdoor_wop *ops;
	size_t nops;
	int64_t now_ms; /* $currentDate's clock, for every statement */
	/* A failure of the whole batch (code != 0): 26 NamespaceNotFound for
	 * a drop of nothing, 48 NamespaceExists for a create of an existing
	 * collection, an I/O error.  Statements then count as not run. */
	struct mql_error err;
	/* IXCREATE, IXDROP: the indexes before and after (with _id_), and
	 * whether the collection was made by it */
	int64_t ix_before, ix_after;
	bool ix_created_coll;
	void *conn; /* the server's connection handle (for routing done) */
	/* done - the store calls it once every statement it runs is
	 * executed and its results are filled, on conn's io thread (the
	 * server hands completions back as it does for its own writes).  It
	 * may be called before store->write returns.  After it the store
	 * keeps no pointer into the batch. */
	void (*done)(struct mdoor_wbatch *b);
	void *priv; /* the door's */
};

struct mdoor_store {
	void *ctx;

	/* ---- reads: run on the calling io thread, answer at once ---- */

	/* list_databases, list_collections - call cb for each; 0, or -1
	 * with err set. */
	int (*list_databases)(void *ctx, mdoor_db_cb cb, void *cbctx,
			      struct mql_error *err);
	int (*list_collections)(void *ctx, const char *db, mdoor_coll_cb cb,
				void *cbctx, struct mql_error *err);
	/* coll_stats - figures of db.coll, or of the whole db with coll
	 * NULL: 1 when it exists, 0 when not, -1 with err set. */
	int (*coll_stats)(void *ctx, const char *db, const char *coll,
			  struct mdoor_coll_stats *out, struct mql_error *err);

	/* scan - open a scan of q's documents (a missing collection scans
	 * nothing).  q and the BSON it points to are valid during the call
	 * only; q->filter and q->sort stay valid until scan_close.  The scan may outlive the request: a cursor keeps it
	 * between getMores, which may come from another connection and so
	 * another io thread, never two at once.  It sees documents committed
	 * before it opened, may see later ones, and yields no document
	 * twice.  0 with *scan set, or -1 with err set. */
	int (*scan)(void *ctx, const struct mdoor_query *q, void **scan,
		    struct mdoor_scan_info *info, struct mql_error *err);
	/* scan_next - 1 with the next document (checked BSON, valid until
	 * the next call on this scan or its close), 0 at the end, -1 with
	 * err set; MDOOR_PAUSE, after scan_slice, when the slice ran out
	 * before a document was found (the scan keeps its place). */
	int (*scan_next)(void *scan, const uint8_t **doc, uint32_t *len,
			 struct mql_error *err);
	void (*scan_close)(void *scan);
	/* scan_deadline - optional: the time (now_ms's clock) past which
	 * scan_next stops reading and fails with 50 MaxTimeMSExpired; 0:
	 * none.  The door sets it before each batch a cursor reads, so that
	 * a filter matching nothing still ends within a command's maxTimeMS
	 * (its cursor's working time, not its idle time). */
	void (*scan_deadline)(void *scan, uint64_t deadline_ms);
	/* scan_slice - optional: from now, read for about ms and then give
	 * the thread back: scan_next returns MDOOR_PAUSE instead of reading
	 * on (at least one document is read each slice, so a slice always
	 * moves the scan on).  The door sets it each time a request starts
	 * or goes on reading (mdoor_again), so that one read cannot hold an
	 * io thread, and every other connection of it, for long. */
	void (*scan_slice)(void *scan, unsigned ms);
	/* scan_slice_as - optional: as scan_slice, the slice ending when
	 * like's (a scan given scan_slice) does: a $lookup's foreign reads
	 * share their cursor's slice, so that reads made one after another
	 * for each input document give the thread back together (without
	 * it, scan_slice of the whole slice each). */
	void (*scan_slice_as)(void *scan, void *like);
	/* scan_slice_over - optional: whether the slice scan_slice gave scan
	 * has run out (false for a scan never given one): an aggregate's
	 * stages ask it between documents, so
	 * that work done in memory (a slow $match after a $project, a
	 * $lookup's pipeline over its matches) gives the thread back too. */
	bool (*scan_slice_over)(void *scan);
	/* scan_explain - optional: after scan_next said 0 (read to its
	 * end), the plan it read by (as explain's) and its executionStats
	 * (n returned, ms the run took): explain runs a scan of its own a
	 * slice at a time then, as any read, where explain runs its scan
	 * to the end in one call. */
	void (*scan_explain)(void *scan, bool count_only, int64_t n, int64_t ms,
			     bson_t *plan, bson_t *stats);
	/* list_indexes - cb(cbctx, spec, len) for each index of db.coll
	 * but _id_ (specs as listIndexes shows them); NULL: none.  1 when
	 * the collection exists, 0 when not, -1 with err. */
	int (*list_indexes)(void *ctx, const char *db, const char *coll,
			    int (*cb)(void *cbctx, const uint8_t *spec,
				      uint32_t len),
			    void *cbctx, struct mql_error *err);
	/* explain - append the plan of q (queryPlanner's winningPlan and
	 * executionStats' figures of a run) to out; NULL: COLLSCAN. */
	int (*explain)(void *ctx, const struct mdoor_query *q, bson_t *plan,
		       bson_t *stats, struct mql_error *err);
	/* count - the number of q's documents without reading them (the
	 * store keeps counts); NULL, or a return of 1 ("cannot"), makes the
	 * door count a scan.  0 with *n, or -1 with err. */
	int (*count)(void *ctx, const struct mdoor_query *q, int64_t *n,
		     struct mql_error *err);

	/* ---- writes: asynchronous ---- */

	/* write - execute b's statements (or its collection change) and
	 * call b->done.  Statements apply in order; an ordered batch stops
	 * at the first that fails (the rest stay ran = false).  UPDATE
	 * computes each new image with mql_update_apply (upserts with
	 * mql_update_ctx.query = q and .new_id); a multi statement updates
	 * or deletes every match, a single one the first (by sort for FAM).
	 * Inserting or upserting into a missing collection creates it, as
	 * MongoDB does. */
	void (*write)(void *ctx, struct mdoor_wbatch *b);
};

/* mdoor_doc_prepare - a document to insert as the door stores it (the
 * insert command, and kvd's native document operations): doc[0..len)
 * checked (at most 16 MiB and 100 levels), one _id (a new ObjectId when
 * it has none) first.  0 with *out (initialized here: bson_destroy it),
 * or -1 with err (22 InvalidBSON, 10334 BSONObjectTooLarge, 15 Overflow,
 * 2 BadValue for two _ids, mql_key_id's for an _id no key encodes). */
int mdoor_doc_prepare(const uint8_t *doc, uint32_t len, bson_t *out,
		      struct mql_error *err);

/* The checks of create, createIndexes, listIndexes and dropIndexes, for
 * the door's commands and kvd's native operations alike (so both refuse
 * and name things the same way).
 *
 * mdoor_create_opts - create's options from it (an iterator not yet
 * started, over the command or an options document) into opts: what kvd
 * does not do refused (115), the generic command fields left out.  0, or
 * -1 with err.
 * mdoor_index_specs - the specifications of the array at indexes checked
 * and normalized as mongod does into opts ({indexes: [spec...]}, the _id
 * index left out: always there), the store's IXCREATE options.  0, or -1
 * with err (67, 197, 9, ...; 2 for an empty array).
 * mdoor_index_drop_opts - dropIndexes' index value (a name, "*", a key
 * pattern, or an array of one name) into opts ({index: name}), the
 * store's IXDROP options.  0, or -1 with err (26 no collection, 27 no
 * such index, 72 the _id index).
 * mdoor_index_list - db.coll's indexes as listIndexes shows them (_id_
 * first) appended to the array arr as "0", "1", ... (*n of them).  0, or
 * -1 with err (26 no collection). */
int mdoor_create_opts(bson_iter_t *it, bson_t *opts, struct mql_error *err);
int mdoor_index_specs(const bson_iter_t *indexes, bson_t *opts,
		      struct mql_error *err);
int mdoor_index_drop_opts(const struct mdoor_store *st, const char *db,
			  const char *coll, const bson_iter_t *index,
			  bson_t *opts, struct mql_error *err);
int mdoor_index_list(const struct mdoor_store *st, const char *db,
		     const char *coll, bson_t *arr, uint32_t *n,
		     struct mql_error *err);

/* ===================== the door ===================== */

struct mdoor_config {
	/* The password (SCRAM-SHA-256): NULL for none, and then every
	 * command is allowed without authentication (saslStart fails). */
	const char *password;
	size_t password_len;
	/* The user name clients must give, or NULL / "": any name. */
	const char *user;
	unsigned scram_iterations; /* 0: 15,000 (MongoDB's default) */
	/* Cursors: at most this many open (0: 10,000), per connection that
	 * opened them (0: 1,000), idle at most this long (0: 600,000 ms,
	 * MongoDB's cursorTimeoutMillis), holding at most this many bytes
	 * together in their pipelines' sorts and groups (0: 1 GiB). */
	size_t max_cursors, max_conn_cursors;
	uint64_t cursor_timeout_ms;
	size_t cursor_mem;
	/* Largest message before authentication (0: 16 KiB). */
	size_t preauth_max_message;
	/* Facts: kvd's version ("0.1.0"), the host as "name:port", the
	 * process id, the process's start (ms since the epoch), the command
	 * line for getCmdLineOpts (argv, NULL-terminated; may be NULL). */
	const char *kvd_version;
	const char *host;
	int64_t pid;
	uint64_t start_ms;
	const char *const *argv;
};

/* The peer of a connection (whatsmyuri, connectionStatus, logs). */
struct mdoor_peer {
	const char *remote; /* "ip:port" */
	uint64_t id;	    /* connectionId in hello */
};

/* mdoor_new - the door of a server.  host and store are copied (their
 * ctx pointers must outlive the door).  The password is turned into
 * SCRAM keys here (PBKDF2, a few ms) and not kept.  NULL on a bad
 * configuration (err says why) or out of memory. */
struct mdoor *mdoor_new(const struct mdoor_config *cfg,
			const struct mdoor_host *host,
			const struct mdoor_store *store, char *err,
			size_t errlen);
/* mdoor_free - after every connection was closed and its batches done. */
void mdoor_free(struct mdoor *d);

/* mdoor_tick - kill cursors idle past their timeout; call it now and then
 * (once a second) from any thread. */
void mdoor_tick(struct mdoor *d);

/* mdoor_conn_open - a new client connection whose server handle is conn
 * (given back to every host call).  NULL when out of memory. */
struct mdoor_conn *mdoor_conn_open(struct mdoor *d, void *conn,
				   const struct mdoor_peer *peer);

/* mdoor_input - run at most one message of p[0..n): returns the bytes
 * consumed, 0 when more are needed (then *need, when not NULL, gets the
 * length of the whole message once its header is in, else 0) or while the
 * connection is busy or closing.  Call it again while it consumes. */
size_t mdoor_input(struct mdoor_conn *mc, const uint8_t *p, size_t n,
		   size_t *need);

/* mdoor_busy - a write of this connection is in flight: its input waits
 * (host->resume says when it may run). */
bool mdoor_busy(const struct mdoor_conn *mc);

/* mdoor_yielded - the connection's read gave its thread back (it is
 * busy too): the server calls mdoor_again on a later turn of its loop,
 * and runs the connection's buffered input once mdoor_yielded is false
 * again. */
bool mdoor_yielded(const struct mdoor_conn *mc);

/* mdoor_again - the yielded read works one more slice: it answers, or
 * yields again. */
void mdoor_again(struct mdoor_conn *mc);

/* mdoor_authed - the connection may run every command (authenticated, or
 * no password configured). */
bool mdoor_authed(const struct mdoor_conn *mc);

/* mdoor_conn_close - the connection is gone: no host call will name it
 * again.  A batch in flight still completes (its done frees what is
 * left); a yielded read ends here. */
void mdoor_conn_close(struct mdoor_conn *mc);

/* Counters since start (serverStatus's opcounters and network). */
struct mdoor_counters {
	uint64_t insert, query, update, del, getmore, command;
	uint64_t bytes_in, bytes_out, requests;
	uint64_t cursors_open, cursors_timed_out, auth_failures;
};
void mdoor_counters(const struct mdoor *d, struct mdoor_counters *out);

#endif
