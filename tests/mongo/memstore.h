/* memstore.h - an in-memory document store behind the MongoDB door's
 * store interface (kvd/mongo/mdoor.h), for the door's tests: a test double
 * of the STORE interface (not of the server), built on the language
 * library as the real store will be (mql_match, mql_update, mql_sort,
 * mql_key for _ids).  Collections are arrays of documents in insertion
 * order; scans copy their matches when they open (a snapshot).
 *
 * Writes complete at once (done called inside write) or, in deferred mode,
 * when the test calls memstore_complete: that is how the tests make a
 * connection wait for its write and check that its replies stay in
 * order. */
#ifndef KVD_TESTS_MEMSTORE_H
#define KVD_TESTS_MEMSTORE_H

#include <stdbool.h>
#include <stddef.h>

#include "mdoor.h"

struct memstore;

struct memstore *memstore_new(void);
void memstore_free(struct memstore *ms);
/* The interface to give mdoor_new. */
void memstore_ops(struct memstore *ms, struct mdoor_store *out);
/* Deferred mode: writes wait for memstore_complete. */
void memstore_defer(struct memstore *ms, bool on);
/* Honour sorts in scans (sorted = true), as an index would. */
void memstore_sorting(struct memstore *ms, bool on);
/* Complete the writes waiting (in order); returns how many. */
size_t memstore_complete(struct memstore *ms);
size_t memstore_pending(const struct memstore *ms);
/* Make scan_next wait (another thread's getMore stays inside it) until
 * blocking ends; memstore_wait_blocked returns once one waits. */
void memstore_block_scans(struct memstore *ms, bool on);
void memstore_wait_blocked(struct memstore *ms);
/* Pausing: a scan given a slice finds nothing on every other scan_next
 * (MDOOR_PAUSE), so that reads yield and go on (mdoor_again); on from
 * the start when MDOOR_TEST_PAUSE is set. */
void memstore_pausing(struct memstore *ms, bool on);
/* Scans open now (a cursor's scan stays open until the cursor ends). */
size_t memstore_open_scans(const struct memstore *ms);

#endif
