/* ixdocs.h - the indexed-document workloads (ixpoint, ixeq, ixget,
 * ixrange, ixscan, ixinsert): their documents and the requests made of
 * their operations, for the MongoDB and PostgreSQL drivers.
 *
 * Document i is {_id: "ix" + i (10 digits), k, r, s, pad}:
 *   k   = i mod (recordcount / 10): ten documents per value, spread over
 *         the collection rather than next to each other;
 *   r   = a 40-bit hash of i: unique in practice (ranges on it return
 *         documents from all over the collection);
 *   s   = a 16-hex-digit string, another hash of i;
 *   pad = fieldlength characters (100 by default).
 * Every field is a function of i, so a query's value is one a loaded
 * document has.  The drivers keep three secondary indexes, on k, r and s
 * (MongoDB: k_1, r_1, s_1; PostgreSQL: btree expression indexes on
 * ((doc->>'k')::bigint), ((doc->>'r')::bigint), (doc->>'s'))).
 *
 * What each workload's operations become:
 *   ixpoint  read:   find {k: v}, v uniform (10 documents)
 *   ixeq     read:   find {r: r(i)}, i uniform (1 document)
 *   ixget    read:   find {_id: key(i)}, i uniform (1 document)
 *   ixrange  scan:   find {r: {$gte: r(i)}} sort {r: 1} limit 100
 *   ixscan   YCSB E: 95% scans as ixrange's of 1..100 from r(i), i
 *            zipfian; 5% inserts of new documents
 *   ixinsert insert: new documents into the indexed collection
 */
#ifndef KB_IXDOCS_H
#define KB_IXDOCS_H

#include "kvbench.h"
#include "workloads.h"

#define IX_PER_K 10 /* documents per value of k */

/* The number of values k takes (at least 1). */
uint64_t ix_kcount(const struct kb_props *p);

/* Document i's fields. */
int64_t ix_k(const struct kb_props *p, uint64_t i);
int64_t ix_r(uint64_t i);
size_t ix_key(uint64_t i, char *buf); /* its _id, KB_KEY_MAX bytes */

/* Document i without its _id, as a msgpack map {k, r, s, pad} into buf
 * (ix_max_value bytes); its length. */
size_t ix_value(const struct kb_props *p, struct kb_rng *r, uint64_t i,
		uint8_t *buf);
size_t ix_max_value(const struct kb_props *p);

/* The request of op (a workload of kind WL_INDEX): key into kbuf, a
 * document into vbuf. */
void ix_req(struct kb_wshared *ws, struct kb_rng *r, const struct kb_op *op,
	    char *kbuf, uint8_t *vbuf, struct kb_req *req);

#endif
