/* mdoor_int.h - what the files of the MongoDB door (mdoor_*.c) share and
 * nobody else sees: the door and connection structures, the request being
 * run, the command table, cursors, and the helpers every command uses
 * (arguments, replies, errors). */
#ifndef KVD_MONGO_MDOOR_INT_H
#define KVD_MONGO_MDOOR_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <bson/bson.h>

#include "mdoor.h"
#include "mql_agg.h"
#include "mql_error.h"
#include "mql_project.h"
#include "mql_value.h"

/* ---- wire (mdoor_wire.c) --------------------------------------------- */

enum {
	MDOOR_OP_REPLY = 1,
	MDOOR_OP_UPDATE = 2001,
	MDOOR_OP_INSERT = 2002,
	MDOOR_OP_QUERY = 2004,
	MDOOR_OP_GET_MORE = 2005,
	MDOOR_OP_DELETE = 2006,
	MDOOR_OP_KILL_CURSORS = 2007,
	MDOOR_OP_COMPRESSED = 2012,
	MDOOR_OP_MSG = 2013,
};

/* OP_MSG flagBits: bits 0-15 must be understood, 16-31 may be ignored. */
#define MDOOR_MSG_CHECKSUM 0x1u
#define MDOOR_MSG_MORE 0x2u
#define MDOOR_MSG_EXHAUST 0x10000u
#define MDOOR_MSG_REQUIRED 0xffffu

#define MDOOR_HEADER 16
#define MDOOR_MAX_SEQS 4 /* kind-1 sections in one message */

/* A kind-1 section: identifier and the documents that follow it. */
struct mdoor_seq {
	const char *id; /* NUL-terminated inside the message */
	const uint8_t *docs;
	uint32_t len;
};

/* A message taken apart (pointers into the input). */
struct mdoor_msg {
	int32_t len, request_id, response_to, opcode;
	uint32_t flags; /* OP_MSG flagBits; OP_QUERY flags */
	const uint8_t *body;
	uint32_t body_len;
	struct mdoor_seq seqs[MDOOR_MAX_SEQS];
	size_t nseqs;
	const char *ns;	     /* OP_QUERY's fullCollectionName */
	int32_t orig_opcode; /* OP_COMPRESSED's originalOpcode */
};

static inline int32_t mdoor_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return (int32_t)BSON_UINT32_FROM_LE(v);
}

uint32_t mdoor_crc32c(uint32_t crc, const uint8_t *p, size_t n);
/* mdoor_wire_parse - take the message m[0..len) apart (len is its header's
 * length, checked by the caller).  0, or -1 with err set; *fatal tells
 * whether the connection must close after the error reply (MongoDB's
 * ConnectionFatalMessageParseError: flags, checksum). */
int mdoor_wire_parse(const uint8_t *m, uint32_t len, struct mdoor_msg *out,
		     bool *fatal, struct mql_error *err);
/* Frame a reply document as OP_MSG or OP_REPLY, for responseTo. */
void mdoor_wire_reply_msg(struct mdoor_conn *mc, int32_t response_to,
			  const bson_t *doc);
void mdoor_wire_reply_legacy(struct mdoor_conn *mc, int32_t response_to,
			     const bson_t *doc);

/* ---- the door and its connections ------------------------------------ */

#define MDOOR_NAME_MAX 256 /* a namespace "db.coll" (MongoDB: 255) */
#define MDOOR_DB_MAX 64	   /* a database name (MongoDB: < 64) */
#define MDOOR_USER_MAX 256

struct mdoor_cursor;

struct mdoor {
	struct mdoor_host host;
	struct mdoor_store store;
	/* configuration, copied */
	char *user; /* NULL: any name */
	bool auth;  /* a password is configured */
	unsigned iters;
	uint8_t salt[28]; /* mongod's: SHA-256's 32 bytes less 4 (libmongoc
			   * refuses another length) */
	uint8_t stored_key[32], server_key[32];
	size_t max_cursors, max_conn_cursors, cursor_mem, preauth_max;
	uint64_t cursor_timeout_ms;
	char *kvd_version, *hostname;
	int64_t pid;
	uint64_t start_ms;
	char **argv;
	/* cursors (mdoor_cursor.c), under lock */
	pthread_mutex_t lock;
	struct mdoor_cursor **buckets;
	size_t nbuckets, ncursors, mem;
	/* counters */
	_Atomic uint64_t c_insert, c_query, c_update, c_delete, c_getmore,
	    c_command, c_bytes_in, c_bytes_out, c_requests, c_cursors_open,
	    c_cursors_timed_out, c_auth_fail;
	_Atomic uint64_t next_conv; /* SASL conversation ids */
};

struct mdoor_scram; /* a conversation in progress (mdoor_auth.c) */
struct mdoor_req;

struct mdoor_conn {
	struct mdoor *d;
	void *conn;
	char remote[64];
	uint64_t id;
	bool authed;
	bool busy;    /* a write in flight */
	bool closing; /* no more input */
	bool dead;    /* closed by the server while busy: done frees */
	bool yielded; /* a read gave its thread back (busy too) */
	char user[MDOOR_USER_MAX];
	char auth_db[MDOOR_DB_MAX];
	struct mdoor_scram *scram;
	struct mdoor_req *req;	      /* the request in flight, when busy */
	struct mdoor_cursor *cursors; /* opened here and alive (d->lock) */
	size_t ncursors;	      /* (d->lock) */
};

/* ---- the request being run ------------------------------------------- */

struct mdoor_req;
/* finish - build the reply of a write once the store is done (0), or
 * fail it (-1, err set). */
typedef int (*mdoor_finish_fn)(struct mdoor_req *r, struct mdoor_wbatch *b,
			       struct mql_error *err);

/* A cursor batch being filled: in the request, which outlives a yield
 * (cur and arr are open in its reply). */
struct mdoor_rbatch {
	struct mdoor_cursor *c;
	int64_t want;  /* documents at most; -1: no count */
	uint32_t n;    /* in arr */
	size_t bytes;  /* theirs */
	int64_t count; /* count's documents */
	bool single, full;
	bool open; /* cur and arr are open in the reply */
	bson_t cur, arr;
};

typedef int (*mdoor_cmd_fn)(struct mdoor_req *r, struct mql_error *err);

struct mdoor_req {
	struct mdoor_conn *mc;
	int32_t request_id;
	bool legacy;  /* OP_QUERY: answer OP_REPLY */
	bool silent;  /* moreToCome: answer nothing */
	char cmd[64]; /* the command's name as given */
	char db[MDOOR_DB_MAX];
	const uint8_t *body; /* valid only until the handler returns */
	uint32_t body_len;
	const struct mdoor_seq *seqs;
	size_t nseqs;
	bson_t reply;	     /* fields before ok: 1 */
	int64_t max_time_ms; /* the command's maxTimeMS; 0: none */
	/* a write in flight: the batch and what finishes the reply */
	struct mdoor_wbatch *batch;
	mdoor_finish_fn finish;
	bool in_submit, done_inline;
	void *state;
	void (*state_free)(void *state);
	/* a read that yielded (MDOOR_YIELD): what goes on with it on a
	 * later turn (state and state_free hold what it needs), and the
	 * cursor batch it was filling */
	mdoor_cmd_fn cont;
	struct mdoor_rbatch rb;
};

/* What a handler returns besides 0 (answered) and -1 (err set): a write
 * waits for the store (mdoor_submit); a read gave its thread back, and
 * r->cont goes on with it (mdoor_again). */
#define MDOOR_SUSPEND 1
#define MDOOR_YIELD 2

enum {
	MDOOR_CMD_NOAUTH = 1u, /* allowed before authentication */
	MDOOR_CMD_LEGACY = 2u, /* allowed in OP_QUERY */
};
enum mdoor_counter {
	MDOOR_CNT_COMMAND,
	MDOOR_CNT_QUERY,
	MDOOR_CNT_INSERT,
	MDOOR_CNT_UPDATE,
	MDOOR_CNT_DELETE,
	MDOOR_CNT_GETMORE,
};

struct mdoor_cmd {
	const char *name;
	mdoor_cmd_fn fn;
	unsigned flags;
	enum mdoor_counter counter;
};

/* Each family's table (mdoor_hello.c, mdoor_auth.c, ...), NULL-ended. */
extern const struct mdoor_cmd mdoor_cmds_hello[];
extern const struct mdoor_cmd mdoor_cmds_admin[];
extern const struct mdoor_cmd mdoor_cmds_auth[];
extern const struct mdoor_cmd mdoor_cmds_cursor[];
extern const struct mdoor_cmd mdoor_cmds_ddl[];
extern const struct mdoor_cmd mdoor_cmds_read[];
extern const struct mdoor_cmd mdoor_cmds_agg[];
extern const struct mdoor_cmd mdoor_cmds_write[];

/* mdoor_submit - hand b to the store and suspend the request; finish
 * builds the reply when the store is done.  The handler returns what
 * this returns (MDOOR_SUSPEND). */
int mdoor_submit(struct mdoor_req *r, struct mdoor_wbatch *b,
		 mdoor_finish_fn finish, void *state,
		 void (*state_free)(void *), struct mql_error *err);

/* mdoor_submit_ddl - a catalog change (create, drop, index builds and
 * drops) of collection coll with opts (copied; may be NULL) handed to the
 * store as mdoor_submit does. */
int mdoor_submit_ddl(struct mdoor_req *r, enum mdoor_wkind kind,
		     const char *coll, const bson_t *opts,
		     mdoor_finish_fn finish, struct mql_error *err);

/* mdoor_answer - send r's reply: its fields and ok: 1 (rc >= 0), or the
 * error alone; nothing for moreToCome.  mdoor_req_free - and free r. */
void mdoor_answer(struct mdoor_req *r, int rc, const struct mql_error *err);
void mdoor_req_free(struct mdoor_req *r);

/* mdoor_now - host's clock. */
uint64_t mdoor_now(const struct mdoor *d);
void mdoor_log(const struct mdoor *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- errors and replies (mdoor_err.c) -------------------------------- */

/* MongoDB's codes the door raises besides mql_error.h's. */
enum {
	MDOOR_NoSuchKey = 4,
	MDOOR_Unauthorized = 13,
	MDOOR_ProtocolError = 17,
	MDOOR_AuthenticationFailed = 18,
	MDOOR_IllegalOperation = 20,
	MDOOR_NamespaceNotFound = 26,
	MDOOR_CursorNotFound = 43,
	MDOOR_NamespaceExists = 48,
	MDOOR_CommandNotFound = 59,
	MDOOR_InvalidOptions = 72,
	MDOOR_InvalidNamespace = 73,
	MDOOR_CursorInUse = 143,
	MDOOR_ExceededMemoryLimit = 146,
	MDOOR_IllegalOpMsgFlag = 223,
	MDOOR_CursorKilled = 237,
	MDOOR_ChecksumMismatch = 288,
	MDOOR_APIVersionError = 322,
	MDOOR_MechanismUnavailable = 334,
	MDOOR_UnsupportedOpQueryCommand = 352,
	MDOOR_DuplicateKey = 11000,
	MDOOR_IDLDuplicateField = 40413,
	MDOOR_IDLFailedToParse = 40414,
	MDOOR_IDLUnknownField = 40415,
};

/* mdoor_err - mql_error_set with the door's code names. */
int mdoor_err(struct mql_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* mdoor_error_doc - {ok: 0.0, errmsg, code, codeName} into an empty doc. */
void mdoor_error_doc(bson_t *out, const struct mql_error *err);

/* ---- arguments (mdoor_args.c) ---------------------------------------- */

/* Type sets of an argument, as MongoDB's IDL names them in errors. */
enum {
	MDOOR_T_DOUBLE = 1u << 0,
	MDOOR_T_STRING = 1u << 1,
	MDOOR_T_OBJECT = 1u << 2,
	MDOOR_T_ARRAY = 1u << 3,
	MDOOR_T_BINDATA = 1u << 4,
	MDOOR_T_BOOL = 1u << 5,
	MDOOR_T_INT = 1u << 6,
	MDOOR_T_LONG = 1u << 7,
	MDOOR_T_DECIMAL = 1u << 8,
	MDOOR_T_NULL = 1u << 9,
	MDOOR_T_ANY = 1u << 10,
	MDOOR_T_NUM =
	    MDOOR_T_LONG | MDOOR_T_INT | MDOOR_T_DECIMAL | MDOOR_T_DOUBLE,
	/* a bool as MongoDB's "safeBool": bool or a number */
	MDOOR_T_BOOLISH = MDOOR_T_BOOL | MDOOR_T_NUM,
};

/* An argument's place (bson_iter_t is 128-byte aligned and 80 bytes
 * long, so it cannot be an array element itself). */
typedef struct {
	bson_iter_t it;
} mdoor_av;

struct mdoor_arg {
	const char *name;
	unsigned types;
	bool required;
};

/* mdoor_args - check r's body against spec[0..n): every field other than
 * the command is one of spec's (or a generic argument every command
 * takes: $db, lsid, $readPreference ...), of one of its types, at most
 * once; required ones present.  out[i] is positioned on spec[i]'s value,
 * or has type EOD when absent (test with mdoor_has).  A kind-1 sequence
 * named like an argument stands for it (out[i] then has type EOD and
 * mdoor_docs_open finds it).  Errors: 40415 "BSON field 'find.foo' is an
 * unknown field.", 14 "BSON field 'find.limit' is the wrong type 'string',
 * expected types '[long, int, decimal, double]'", 40413 duplicate, 40414
 * "BSON field 'insert.documents' is missing but a required field". */
int mdoor_args(const struct mdoor_req *r, const struct mdoor_arg *spec,
	       size_t n, mdoor_av *out, struct mql_error *err);
bool mdoor_has(const bson_iter_t *it);
/* mdoor_generic_arg - whether k is one of the generic arguments every
 * command takes ($db, lsid, writeConcern, comment, maxTimeMS ...). */
bool mdoor_generic_arg(const char *k);
/* mdoor_in_list - whether k is one of list's names (NULL-terminated). */
bool mdoor_in_list(const char *const *list, const char *k);
void mdoor_absent(bson_iter_t *it);

/* mdoor_arg_int64 - a number argument as an integer (doubles and
 * decimals must be whole): 0, or -1 with err (2 BadValue). */
int mdoor_arg_int64(const struct mdoor_req *r, const bson_iter_t *it,
		    int64_t *out, struct mql_error *err);
/* mdoor_arg_bool - MongoDB's truthiness of a bool or number. */
bool mdoor_arg_bool(const bson_iter_t *it);
/* mdoor_arg_doc - a document argument's bytes. */
void mdoor_arg_doc(const bson_iter_t *it, const uint8_t **p, uint32_t *len);
/* mdoor_arg_hint - a hint argument: a key pattern's bytes, or an index's
 * name (its characters, *name set); *p untouched when it is neither. */
void mdoor_arg_hint(const bson_iter_t *it, const uint8_t **p, uint32_t *len,
		    bool *name);

/* The command's own value (the first field), e.g. the collection name. */
bool mdoor_cmd_value(const struct mdoor_req *r, bson_iter_t *it);
/* mdoor_coll_arg - the first field as a collection name (a string,
 * checked): 0, or -1 with err (2 BadValue for the wrong type, 73
 * InvalidNamespace). */
int mdoor_coll_arg(const struct mdoor_req *r, const char **coll,
		   struct mql_error *err);
int mdoor_check_db(const char *db, struct mql_error *err);
int mdoor_check_coll(const char *db, const char *coll, struct mql_error *err);

/* Documents of an array argument or of a kind-1 sequence of that name. */
struct mdoor_docs {
	bool seq;
	bson_iter_t it;
	const uint8_t *p, *end;
	const char *field; /* for messages: "documents" */
};
/* mdoor_docs_open - 1 found, 0 absent; -1 err when both the body and a
 * sequence carry it. */
int mdoor_docs_open(const struct mdoor_req *r, const char *field,
		    const bson_iter_t *arg, struct mdoor_docs *d,
		    struct mql_error *err);
/* mdoor_docs_next - 1 with the next document, 0 at the end, -1 err (an
 * element that is not a document: 14 TypeMismatch; a malformed one: 22). */
int mdoor_docs_next(struct mdoor_docs *d, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err);

/* ---- cursors (mdoor_cursor.c) ---------------------------------------- */

/* What a cursor reads: a store scan (or a listing), optionally through a pipeline (a
 * find's sort, skip and limit, or an aggregate's stages), then skip,
 * limit and a projection. */
struct mdoor_cursor_src {
	void *scan;		  /* owned: store->scan_close */
	struct mql_match *filter; /* owned: what the scan matches */
	struct mql_sort *sort;	  /* owned: the order it was asked */
	bson_t *list; /* owned: documents of a listing (an array), read
		       * instead of a scan */
	struct mql_pipeline *pipe; /* owned, or NULL */
	size_t pipe_from;	   /* first stage to run */
	bool stream_group; /* the scan yields in its first $group's order */
	struct mql_project *proj; /* owned, or NULL */
	int64_t skip, limit;	  /* done by the door (limit -1: none) */
	int64_t max_time_ms; /* the time it may work, in all; 0: no limit */
};

/* ---- $lookup's foreign reads (mdoor_lookup.c) ------------------------ */

/* The reader a cursor gives its pipeline's $lookup stages: scans of the
 * store in db (kept by the cursor, so it lives as long as the reads). */
struct mdoor_foreign {
	struct mdoor *d;
	char db[MDOOR_DB_MAX];
	void *like; /* the cursor's scan, whose slices its reads share */
	struct mdoor_fread *reads; /* its reads open (mdoor_lookup.c) */
};

/* mdoor_foreign_init - f reads db's collections, each read ending its
 * slices with like's (the cursor's scan: when like's slice runs out, a
 * read gives the thread back, MQL_AGG_PAUSE through $lookup, mql_agg.h;
 * NULL, or like never sliced: no slices). */
void mdoor_foreign_init(struct mdoor_foreign *f, struct mdoor *d,
			const char *db, void *like,
			struct mql_agg_foreign *out);
/* mdoor_foreign_slice - f's cursor starts a slice (mdoor_cursor_slice):
 * so do the reads open. */
void mdoor_foreign_slice(struct mdoor_foreign *f);
/* mdoor_lookup_explain - append what a $lookup of from by field (NULL: a
 * pipeline over the whole collection) reads with to out: indexesUsed (the
 * index the store's planner takes, or none), collectionScans, strategy.
 * 0, or -1 with err. */
int mdoor_lookup_explain(struct mdoor *d, const char *db, const char *from,
			 const char *field, bson_t *out, struct mql_error *err);

/* mdoor_plan_of - the plan q's scan reads by (explain's winningPlan),
 * chosen without reading (the store's scan_explain on a scan just
 * opened; a store without it runs its explain): 0, or -1 with err. */
int mdoor_plan_of(struct mdoor *d, const struct mdoor_query *q, bson_t *plan,
		  struct mql_error *err);

/* mdoor_cursor_new - a cursor over src (taken over, freed on failure
 * too) for the namespace db.coll.  NULL with err set on failure (out of
 * memory; a pipeline that does not open). */
struct mdoor_cursor *mdoor_cursor_new(struct mdoor_conn *mc, const char *db,
				      const char *coll,
				      struct mdoor_cursor_src *src,
				      struct mql_error *err);
/* mdoor_cursor_reply - append {cursor: {firstBatch|nextBatch: [...], id,
 * ns}} to r->reply, reading at most batch documents (-1: as many as 16
 * MiB hold).  first picks the field name.  When the cursor is exhausted
 * or single, it is freed; otherwise it is registered (first time) and
 * released for the next getMore.  0, or -1 with err (the cursor freed),
 * or MDOOR_YIELD (mdoor_yield: r->rb holds the batch so far). */
int mdoor_cursor_reply(struct mdoor_req *r, struct mdoor_cursor *c,
		       int64_t batch, bool first, bool single,
		       struct mql_error *err);
void mdoor_cursor_free(struct mdoor *d, struct mdoor_cursor *c);
/* mdoor_cursor_hold - c's read pauses holding what its pipeline and stash
 * hold and extra bytes more (its batch so far, distinct's values):
 * counted with the open cursors' (cursor_mem) until its next pause, its
 * checkin or its end; -1 with 146 past the bound (end the read). */
int mdoor_cursor_hold(struct mdoor_cursor *c, size_t extra,
		      struct mql_error *err);
/* A connection closes: its cursors stay, no longer counted to it. */
void mdoor_cursor_detach(struct mdoor_conn *mc);
void mdoor_cursor_reap(struct mdoor *d, bool all);

/* A read's own documents, pulled through the same path as a cursor's
 * (count, distinct): 1 doc, 0 end, -1 err, MDOOR_PAUSE when its slice
 * ran out first (the cursor keeps its place). */
int mdoor_cursor_next(struct mdoor_cursor *c, const uint8_t **doc,
		      uint32_t *len, struct mql_error *err);
/* mdoor_cursor_slice - c reads for one slice (MDOOR_SLICE_MS) from now:
 * called when a request starts or goes on reading. */
void mdoor_cursor_slice(struct mdoor_cursor *c);
/* mdoor_yield - a read whose slice ran out gives its thread back:
 * cont goes on with it on a later turn (mdoor_again); r->rb.c is the
 * cursor it reads, r->state what else it holds.  Returns MDOOR_YIELD,
 * for the handler to return. */
int mdoor_yield(struct mdoor_req *r, mdoor_cmd_fn cont);
/* mdoor_read_abandon - a request ends with its read unfinished (its
 * connection closed): r->rb's cursor is dropped. */
void mdoor_read_abandon(struct mdoor_req *r);

/* ---- SCRAM (mdoor_scram.c) ------------------------------------------- */

#define MDOOR_SCRAM_KEY 32

/* The keys of a password: SaltedPassword = PBKDF2-HMAC-SHA-256(password,
 * salt, iters), StoredKey = H(HMAC(SP, "Client Key")), ServerKey =
 * HMAC(SP, "Server Key").  0, or -1 (the password is not SASLprep'd
 * printable ASCII when it is ASCII: a control character). */
int mdoor_scram_keys(const char *pw, size_t pwlen, const uint8_t *salt,
		     size_t saltlen, unsigned iters, uint8_t *stored_key,
		     uint8_t *server_key);
/* mdoor_scram_verify - check the ClientProof for AuthMessage against
 * StoredKey (constant time), and when right write ServerSignature. */
bool mdoor_scram_verify(const uint8_t *stored_key, const uint8_t *server_key,
			const char *auth_msg, size_t auth_len,
			const uint8_t *proof, uint8_t *server_sig);
/* Base64 (RFC 4648, padded).  encode writes a NUL; decode returns the
 * bytes written or -1. */
size_t mdoor_b64_encode(const uint8_t *p, size_t n, char *out);
long mdoor_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap);

void mdoor_scram_free(struct mdoor_scram *s);
/* speculativeAuthenticate inside hello: append the reply to out when the
 * conversation starts (nothing otherwise). */
void mdoor_auth_speculative(struct mdoor_req *r, const bson_iter_t *spec,
			    bson_t *out);

#endif
