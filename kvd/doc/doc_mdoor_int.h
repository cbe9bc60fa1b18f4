/* doc_mdoor_int.h - what the files of the MongoDB door's document store
 * share: its writes' state (struct dmw), used by doc_mdoor_write.c
 * (statements, catalog changes, the batch's steps), doc_mdoor_pipe.c
 * (insert batches sent ahead of their results) and doc_mdoor_wop.c (a
 * statement's merges sent, and their results); and what the writes and
 * the store's table (doc_mdoor_store.c) take from doc_mdoor.c (reads). */
#ifndef KVD_DOC_DOC_MDOOR_INT_H
#define KVD_DOC_DOC_MDOOR_INT_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc.h"
#include "doc_uq.h"
#include "mongo/mdoor.h"

struct kvd_conn;
struct kvd_pend;

/* At most this many merges of one statement in flight at once, and the
 * keys a multi-document statement holds at once (read ahead of them). */
#define WINDOW 256
#define BATCH 1024

struct dmw {
	struct mdoor_wbatch *b;
	struct kvd_conn *c;
	size_t i;	    /* the statement running */
	unsigned out;	    /* its merges in flight */
	int creating, sent; /* the catalog's CREATE / change is out */
	int have;	    /* cid is known */
	uint32_t cid;
	struct kv_buf keys;	  /* its documents' keys: [u8 len][key] ... */
	size_t kpos;		  /* the next key to send */
	void *scan;		  /* a multi-document statement's, open */
	struct kv_buf opnd;	  /* the operand every key of it gets */
	unsigned mid;		  /* and its merge id */
	const bson_value_t *upid; /* an upsert's _id */
	const bson_value_t *ideq; /* its filter's _id equality, or NULL */
	bool multi;		  /* its scan: every match, in batches */
	bool paused;		  /* its scan's slice ran out (again goes on) */
	bool sent_stmt;		  /* its operand was built, merges sent */
	struct kv_buf best;	  /* the best match so far of a sorted one */
	bool unique;	  /* an insert under a unique index (send_unique) */
	struct doc_uq uq; /* doc_uq.h: their reservations */
	/* an insert batch sent ahead of its results (dmw_pipe_fill) */
	bool pipe;
	size_t next;	    /* the next statement to send */
	size_t stop;	    /* ordered: the first that failed (nops: none) */
	size_t bytes;	    /* documents' bytes in flight */
	unsigned undo;	    /* deletes in flight undoing inserts past stop */
	size_t kfront;	    /* keys: the first of those in flight */
	struct kv_buf sect; /* the collection's index section */
};

/* doc_mdoor.c's: a collection's id (1 found, 0 none, -1 failure); the
 * scans (mdoor_store's scan, scan_next, scan_close, scan_deadline), with
 * which a multi-document statement reads its documents' keys too;
 * mdoor_store's explain and coll_stats. */
int doc_mdoor_coll_id(const char *db, const char *coll, uint32_t *id);
int doc_mdoor_scan_open(void *ctx, const struct mdoor_query *q, void **out,
			struct mdoor_scan_info *info, struct mql_error *e);
int doc_mdoor_scan_next(void *scan, const uint8_t **doc, uint32_t *len,
			struct mql_error *e);
void doc_mdoor_scan_close(void *scan);
void doc_mdoor_scan_deadline(void *scan, uint64_t deadline_ms);
void doc_mdoor_scan_slice(void *scan, unsigned ms);
void doc_mdoor_scan_slice_as(void *scan, void *like);
bool doc_mdoor_scan_slice_over(void *scan);
void doc_mdoor_scan_explain(void *scan, bool count_only, int64_t n, int64_t ms,
			    bson_t *plan, bson_t *stats);
int doc_mdoor_explain(void *ctx, const struct mdoor_query *q, bson_t *plan,
		      bson_t *stats, struct mql_error *err);
int doc_mdoor_coll_stats(void *ctx, const char *db, const char *coll,
			 struct mdoor_coll_stats *out, struct mql_error *err);

/* doc_mdoor_wop.c's: e set to out of memory (-1); the batch done (w
 * freed); a merge of the statement sent (0, or -1); the _id of a
 * document (0, or -1: none); statement op's result from one of its
 * merges. */
int dmw_oom(struct mql_error *e);
void dmw_finish(struct dmw *w);
int dmw_send_merge(struct dmw *w, unsigned ks, unsigned id, const uint8_t *k,
		   size_t kn, const uint8_t *v, size_t vn);
int dmw_doc_id(const uint8_t *p, uint32_t n, bson_iter_t *it);
void dmw_stmt_result(struct dmw *w, struct mdoor_wop *op,
		     const struct kvd_pend *pd);
/* doc_mdoor_write.c's: the write the door hands over (mdoor_store.write). */
void doc_mdoor_write(void *ctx, struct mdoor_wbatch *b);

/* doc_mdoor_pipe.c's: may the batch go ahead of its results (a batch of
 * inserts into a collection that exists)?  Send its next documents, up
 * to the window (0, or -1 with b->err); end it once every merge came
 * back; one of its merges came back; the reservations' driver reports
 * statement t done (pd its merge's result, or e its failure). */
bool dmw_pipe_ok(struct dmw *w);
int dmw_pipe_fill(struct dmw *w);
void dmw_pipe_end(struct dmw *w);
void dmw_pipe_result(struct dmw *w, const struct kvd_pend *pd);
void dmw_upipe_done(struct dmw *w, size_t t, const struct kvd_pend *pd,
		    const struct mql_error *e, const bson_t *info);

#endif
