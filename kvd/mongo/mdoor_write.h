/* mdoor_write.h - what the write commands of the door share (insert in
 * mdoor_write.c, update and delete in mdoor_update.c, findAndModify in
 * mdoor_fam.c): the state of a batch in flight, which owns everything
 * the store may read until its done (statements, compiled filters and
 * updates, copied documents, upsert _ids). */
#ifndef KVD_MONGO_MDOOR_WRITE_H
#define KVD_MONGO_MDOOR_WRITE_H

#include "mdoor_int.h"

/* A statement the door refused before the store saw the batch. */
struct mdoor_prerr {
	uint32_t index;
	int code;
	char *msg;
};

struct mdoor_wstate {
	struct mdoor_wbatch b; /* first: done's batch is the state */
	struct mdoor_wop *ops;
	uint32_t *stmt;	   /* ops[i] is statement stmt[i] */
	bson_value_t *ids; /* upserts' new _ids (ObjectIds) */
	struct mdoor_prerr *pre;
	size_t npre, cpre;
	uint8_t *arena; /* inserted documents */
	size_t alen, acap;
	bool ordered;
	struct mql_project *proj; /* findAndModify's fields */
	char db[MDOOR_DB_MAX];
	char coll[MDOOR_NAME_MAX];
};

struct mdoor_wstate *mdoor_wstate_new(struct mdoor_req *r,
				      enum mdoor_wkind kind, const char *coll,
				      size_t nstmt, bool ordered);
void mdoor_wstate_free(void *w);
/* Keep a copy of a statement's hint in op (hint, hint_len, hint_name): a
 * key pattern or an index's name, as a find's: 0, or -1 (out of memory).
 * Freed with the statement. */
int mdoor_wop_hint(struct mdoor_wop *op, const bson_iter_t *it);
/* Keep copies of a statement's filter and update documents in op (q_bson,
 * u_bson; either may be NULL): 0, or -1 out of memory. */
int mdoor_wop_keep(struct mdoor_wop *op, const uint8_t *q, uint32_t ql,
		   const uint8_t *u, uint32_t ul);
struct mdoor_wop *mdoor_wstate_op(struct mdoor_wstate *w, uint32_t i);
int mdoor_wstate_refuse(struct mdoor_wstate *w, uint32_t i,
			const struct mql_error *e);
int mdoor_wstate_submit(struct mdoor_req *r, struct mdoor_wstate *w,
			mdoor_finish_fn finish, struct mql_error *err);
void mdoor_write_errors(struct mdoor_wstate *w, bson_t *reply);
/* The statements of field (1..100,000 of them): 0 with *n, or -1. */
int mdoor_write_open(struct mdoor_req *r, const char *field,
		     const bson_iter_t *arg, struct mdoor_docs *d, size_t *n,
		     struct mql_error *err);

int mdoor_cmd_update(struct mdoor_req *r, struct mql_error *err);
int mdoor_cmd_delete(struct mdoor_req *r, struct mql_error *err);
int mdoor_cmd_fam(struct mdoor_req *r, struct mql_error *err);
/* mdoor_index.c */
int mdoor_cmd_createindexes(struct mdoor_req *r, struct mql_error *err);
int mdoor_cmd_dropindexes(struct mdoor_req *r, struct mql_error *err);
/* mdoor_explain.c */
int mdoor_cmd_explain(struct mdoor_req *r, struct mql_error *err);

#endif
