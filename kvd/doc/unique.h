/* unique.h - unique indexes over kvd's documents (issue 35;
 * docs/architecture.md, "Indexes", "Unique indexes"): the reservation of
 * a (index, key) by the document that holds it, granted by the one
 * committer of that key's shard, and the tokens that tell a reservation
 * whose document write is still under way from one left behind.
 *
 * A reservation is one key of keyspace KVD_KS_INDEX,
 *
 *     [u32 index id | 0x80000000, big-endian][key (mql_index_keys)]
 *
 * on the shard the router gives that key (so never among the index's
 * ordinary entries, whose prefix is the bare id), with the value
 * [u64 token][the holder's document key].  The token is the one of the
 * write that took it: a number given to each document write that needs
 * reservations, alive in this process (kvdoc_uq_live) from before its
 * first RESERVE is sent until the document's merge came back (or the
 * connection went), so a reservation whose token is alive may still get
 * its document: nobody takes it over.  Tokens start at a random number
 * at each start, so a token of an earlier run is never alive.
 *
 * RESERVE (merge id KVDOC_MERGE_BASE + KVDOC_OP_RESERVE, on the
 * reservation's key), operand [u8 mode][u64 token][u64 expect][document
 * key]:
 *   mode TAKE: absent, held by the same document, or held under token
 *     expect (not alive): the reservation becomes [token][document key],
 *     result 1 (granted); held by another document under a live token:
 *     result 2 (busy: ask again); otherwise result 3 (held), the reply
 *     its value, for the asker to read the holder's document.
 *   mode RELEASE: deleted when it is still held under token expect and
 *     that token is not alive: result 1, else 0.
 */
#ifndef KVD_DOC_UNIQUE_H
#define KVD_DOC_UNIQUE_H

#include <stdbool.h>
#include <stdint.h>

#include "doc.h"

enum { KVDOC_UQ_TAKE = 0, KVDOC_UQ_RELEASE = 1 };
enum { KVDOC_UQ_GRANTED = 1, KVDOC_UQ_BUSY = 2, KVDOC_UQ_HELD = 3 };

#define KVDOC_UQ_KEY_MAX (4 + MQL_KEY_MAX)

/* The reservation key of (index id, key) in out (KVDOC_UQ_KEY_MAX
 * bytes): its length. */
size_t kvdoc_uq_key(uint32_t id, const uint8_t *key, size_t kn, uint8_t *out);

/* A new token, alive until kvdoc_uq_end; 0 when out of memory. */
uint64_t kvdoc_uq_begin(void);
void kvdoc_uq_end(uint64_t token);
bool kvdoc_uq_live(uint64_t token);

/* RESERVE's operand into out: 0, or -1 out of memory. */
int kvdoc_uq_op(struct kv_buf *out, unsigned mode, uint64_t token,
		uint64_t expect, const uint8_t *dkey, size_t dn);

/* RESERVE's merge (kvdoc_register installs it). */
int kvdoc_uq_merge(void *ctx, struct kvd_merge *m);

#endif
