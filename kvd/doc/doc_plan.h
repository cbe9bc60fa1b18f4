/* doc_plan.h - the planner of the MongoDB door over kvd's documents
 * (doc_plan.c): the index a query uses, if any, and its scan in index
 * order across shards. */
#ifndef KVD_DOC_DOC_PLAN_H
#define KVD_DOC_DOC_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "doc.h"
#include "mongo/mdoor.h"

struct doc_plan;

/* Whether q carries a hint (a key pattern, or an index's name). */
bool doc_plan_hinted(const struct mdoor_query *q);

/* The plan of q over collection coll: 1 with *out (an index scan), 0 (a
 * collection scan), or -1 with err (a hint naming no index: 2 BadValue;
 * a filter the bounds cannot take). */
int doc_plan_choose(const struct kvdoc_catalog *c, uint32_t coll,
		    const struct mdoor_query *q, struct doc_plan **out,
		    struct mql_error *err);
/* The next documents (each once, in index order, not yet matched against
 * the filter): fn as kvdoc_scan_batch's, from at most max entries; when
 * fn returns KVD_SCAN_STOP that document and the batch's others are
 * given by the next call, read again by key (it may come on a later
 * turn).  0, or -1
 * (a read failed). */
int doc_plan_batch(struct doc_plan *p, struct kvd_reader *r, unsigned nshards,
		   uint64_t now, unsigned max, kvd_scan_fn fn, void *arg);
int doc_plan_done(const struct doc_plan *p);
/* Its index's name; whether it yields in q->sort's order; entries and
 * documents read so far (explain's totalKeysExamined, totalDocsExamined). */
const char *doc_plan_name(const struct doc_plan *p);
bool doc_plan_sorted(const struct doc_plan *p);
/* Whether its entries may stand for their documents (a covered query:
 * doc_plan.c); the documents read are then only those that could not. */
bool doc_plan_covered(const struct doc_plan *p);
void doc_plan_counts(const struct doc_plan *p, int64_t *keys, int64_t *docs);
void doc_plan_free(struct doc_plan *p);

#endif
