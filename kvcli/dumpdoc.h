/* dumpdoc.h - documents in kvcli dump and load (dumpdoc.c): the dump's
 * version line, its collection, document and index rows, and the loader's
 * side of them, batched into the native protocol's document operations.
 */
#ifndef KVCLI_DUMPDOC_H
#define KVCLI_DUMPDOC_H

#include "json.h"
#include "kvcli.h"

/* The dump format's version: 1 had keys only (and no version line), 2
 * adds the version line and the documents' rows after the keys
 * (docs/kvcli.1, dump); without documents, a dump is version 1's. */
#define KVCLI_DUMP_VERSION 2

/* ---- dump ---- */

/* Every collection of every database, after the version line
 * {"kvcli_dump":2} (none when there is no database), in the server's
 * listing order: its row, its documents' rows (in _id order), its
 * indexes' rows.  EXIT_OK, or an exit code with the error printed. */
int dumpdoc_all(struct cli *cli, int b64);

/* ---- load (load.c's, for dumpdoc.c) ---- */

struct loader;
/* Wait until a request of bytes fits in the window: 0, or -1 (the
 * connection is gone). */
int load_room(struct loader *L, size_t bytes);
/* A request was queued (rc its kvc_send_* result) for rows rows from line
 * first to the current one; ok_st a status counted as done too (0: none).
 * 0, or the failure (counted). */
int load_sent(struct loader *L, int rc, uint64_t first, uint32_t rows,
	      size_t bytes, int ok_st);

/* The documents being batched, one namespace at a time. */
struct ldoc {
	struct loader *L;
	kvc_conn *c;
	size_t max_bytes; /* a batch's, as the loader's MPUTs */
	int b64;	  /* --base64: names in base64 too */
	const uint64_t *line;
	char db[256], coll[256]; /* the batch's */
	struct kv_buf data;	 /* its documents */
	struct kv_buf offs;	 /* size_t offset and length per document */
	struct kv_buf vals;	 /* kvc_val per document, as sent */
	uint32_t n;
	uint64_t first;
	struct kv_buf tmp;
};

/* A parsed row (doc, of text s): 0 when it is no document row (a key's),
 * else 1 with *why NULL (taken: queued or batched) or why it is refused. */
int ldoc_row(struct ldoc *D, const char *s, const struct json_doc *doc,
	     const char **why);
/* Send the documents batched so far. */
void ldoc_flush(struct ldoc *D);
void ldoc_free(struct ldoc *D);

#endif
