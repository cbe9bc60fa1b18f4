/* cmd_doc.h - what the native protocol's document operations share
 * (cmd_doc.c: the writes and DOCGET; cmd_docfind.c: DOCFIND) and what
 * cmd.c calls of them. */
#ifndef KVD_NATIVE_CMD_DOC_H
#define KVD_NATIVE_CMD_DOC_H

#include <stdint.h>

#include "cmdparse.h"
#include "mongo/mql_error.h"
#include "mongo/mql_value.h"

struct kvd_conn;
struct kvd_pend;

int kvd_op_docinsert(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docget(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docupdate(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docdelete(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docfind(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docdbs(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_doccolls(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_doccreate(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docdrop(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docixcreate(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docixlist(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_docixdrop(struct kvd_conn *c, struct kvd_req *r);

/* A sorted DOCFIND page that gave its thread back (c->nread set) reads
 * its next slice: 1 when it answered, 0 when it gave the thread back
 * again. */
int kvd_docfind_again(struct kvd_conn *c);
/* The connection is freed: its page's read ends unanswered. */
void kvd_docfind_abandon(struct kvd_conn *c);

/* A merge of the connection's document write came back (c->mwrite set). */
void kvd_doc_wreply(struct kvd_conn *c, struct kvd_pend *pd);
/* The connection is freed: a document write still out completes
 * unanswered. */
void kvd_doc_conn_close(struct kvd_conn *c);

/* [DOC_ERROR, e's message, e's code] as the reply. */
void kvd_doc_reply_error(struct kvd_conn *c, const struct mql_error *e);
/* That reply now (behind earlier writes' replies), counted: the
 * handler's KVD_ANSWERED. */
int kvd_doc_answer_error(struct kvd_conn *c, unsigned op,
			 const struct mql_error *e);
/* Arguments 0 and 1 as a database and a collection name (NUL-ended into
 * db and coll, KVDOC_NAME_MAX + 1 bytes each): KV_OK, KV_BAD_ARGS, or
 * KV_DOC_ERROR with e (73 InvalidNamespace). */
int kvd_doc_ns(struct kvd_req *r, char *db, char *coll, struct mql_error *e);
/* o as a database (is_db) or a collection name, as kvd_doc_ns checks
 * them, into out. */
int kvd_doc_name(const struct kv_mp_obj *o, int is_db, char *out,
		 struct mql_error *e);
/* o as a BSON document nesting at most depth levels: KV_OK, KV_BAD_ARGS
 * (not bytes) or KV_DOC_ERROR with e (22 InvalidBSON, 10334, 15). */
int kvd_doc_bson(const struct kv_mp_obj *o, int depth, struct mql_error *e);
/* The id of collection db.coll from the io thread's copy of the catalog:
 * 1, 0 when it does not exist, -1 when the catalog cannot be read. */
int kvd_doc_coll(struct kvd_conn *c, const char *db, const char *coll,
		 uint32_t *id);

struct mdoor_wbatch;
/* A collection or index change of db.coll (kind: MDOOR_W_CREATE, DROP,
 * IXCREATE, IXDROP) with the store's options opts (copied; NULL: none),
 * run by the MongoDB door's store as its commands' are; reply answers
 * it on the connection once it is done (b->err set when it failed) and
 * returns the status it answered.  KVD_ANSWERED, or KV_INTERNAL. */
int kvd_doc_change(struct kvd_conn *c, unsigned op, int kind, const char *db,
		   const char *coll, const bson_t *opts,
		   int (*reply)(struct kvd_conn *c,
				const struct mdoor_wbatch *b));

#endif
