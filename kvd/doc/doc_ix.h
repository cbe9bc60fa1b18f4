/* doc_ix.h - the MongoDB door's index commands and queries over kvd's
 * documents (doc_mdoor_ix.c: createIndexes with its build, dropIndexes,
 * listIndexes; doc_plan.c: the planner), and what they take from
 * doc_mdoor.c. */
#ifndef KVD_DOC_DOC_IX_H
#define KVD_DOC_DOC_IX_H

#include "doc.h"
#include "mongo/mdoor.h"

struct kvd_conn;
struct kvd_io;
struct kvd_pend;

/* doc_mdoor.c's: the calling io thread, and its catalog brought up to
 * date (NULL on a read failure). */
struct kvd_io *doc_mdoor_io(void);
const struct kvdoc_catalog *doc_mdoor_catalog(void);

/* doc_mdoor_list.c's listings (mdoor_store's list_databases and
 * list_collections). */
int doc_mdoor_list_dbs(void *ctx, mdoor_db_cb cb, void *cbctx,
		       struct mql_error *err);
int doc_mdoor_list_colls(void *ctx, const char *db, mdoor_coll_cb cb,
			 void *cbctx, struct mql_error *err);

/* Is b an index command's batch (IXCREATE, IXDROP)? */
bool doc_ix_kind(const struct mdoor_wbatch *b);
/* Run it (doc_mdoor_write.c's write hands it over): b->done when finished. */
void doc_ix_write(struct mdoor_wbatch *b);
/* A merge of it came back (c->mwrite is its), or c is gone. */
void doc_ix_result(struct kvd_conn *c, const struct kvd_pend *pd);
void doc_ix_abandon(struct kvd_conn *c);

/* listIndexes (mdoor_store.list_indexes). */
int doc_ix_list(void *ctx, const char *db, const char *coll,
		int (*cb)(void *cbctx, const uint8_t *spec, uint32_t len),
		void *cbctx, struct mql_error *err);

#endif
