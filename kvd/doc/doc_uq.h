/* doc_uq.h - the io thread's part of unique indexes (doc_mdoor_uq.c;
 * unique.h; docs/architecture.md, "Unique indexes"): a document write
 * whose document gains keys of a unique index takes their reservations
 * first, one at a time in the order its merge listed them, then sends
 * its merge with the list of what it holds; and the keys a write let go
 * are released once nothing can still need them.
 *
 * The driver serves one statement's writes (doc_mdoor.c) or an index
 * build's (doc_mdoor_ix.c), which call it: doc_uq_back for each of their
 * own document merges (aux 0), doc_uq_result for the driver's (aux a
 * DOC_UQ_TAG_* and a slot), and doc_uq_step to go on.  It runs up to
 * DOC_UQ_SLOTS documents at once (their merges counted in *host.out): an
 * insert's, whose keys are known, or those whose merge asked.  Each
 * document takes its own keys in its merge's order, and sends its merge
 * as soon as it holds them, so no document waits for another of the
 * window: the slots add no wait that could close a cycle between two
 * writers. */
#ifndef KVD_DOC_DOC_UQ_H
#define KVD_DOC_DOC_UQ_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc.h"

struct kvd_conn;
struct kvd_pend;

/* A driver's merge has aux tag | slot << 2 (never 0). */
enum { DOC_UQ_TAG_RES = 1, DOC_UQ_TAG_DOC = 2, DOC_UQ_TAG_REL = 3 };
#define DOC_UQ_SLOTS 256

struct doc_uq_host {
	struct kvd_conn *c;
	/* the caller's merges in flight, the driver's counted in too; NULL:
	 * the host's send counts them (doc_bg_merge's) */
	unsigned *out;
	void *ctx;
	/* the merge of the document pushed with tag came back (doc_back
	 * and fail may be NULL where no document is pushed: a host that
	 * only releases the keys its deletes let go) */
	void (*doc_back)(void *ctx, size_t tag, const struct kvd_pend *pd);
	/* it was not written: e (11000 with info {keyPattern, keyValue}, or
	 * another failure with info empty) */
	void (*fail)(void *ctx, size_t tag, const struct mql_error *e,
		     const bson_t *info);
	/* true: a document's failure stops nothing else (an insert batch's
	 * documents, each its own statement); false: the documents not yet
	 * started are dropped (one statement's, a build's) */
	bool each;
	const char *db, *coll;
	/* A thread that is no io thread (doc_build.c) gives its own way to
	 * send a merge (0, or -1), its reader and catalog; NULL: the
	 * connection's merges, the io thread's (doc_ix.h). */
	int (*send)(void *ctx, unsigned ks, unsigned id, struct kv_slice k,
		    struct kv_slice v, uint32_t tag);
	struct kvd_reader *rd;
	const struct kvdoc_catalog *cat;
	unsigned nshards;
};

/* A document under way. */
struct doc_uq_slot {
	int phase;
	bool waiting; /* its merge is out */
	uint8_t dkey[KVDOC_KEY_MAX];
	size_t dkn;
	struct kv_buf want, held;
	size_t wpos;
	uint64_t token, expect;
	unsigned tries, rounds;
	size_t tag;	      /* the caller's, given back */
	struct kv_slice body; /* its operand past the section, or none */
};

struct doc_uq {
	struct doc_uq_host h;
	/* the statement's: its collection, its merge and operand */
	uint32_t cid;
	unsigned mid;
	const struct kv_buf *opnd;
	/* documents to write: [u8 len][key][u32 n][key list to reserve]
	 * [tag][body pointer][body length] */
	struct kv_buf q;
	size_t qpos;
	/* keys to let go: [u8 len][document key][u32 n][key list] */
	struct kv_buf rel;
	struct doc_uq_slot *s; /* ns of them, grown as needed */
	unsigned ns, busy;     /* slots, and those under way */
	struct kv_buf tmp, sec;
};

void doc_uq_init(struct doc_uq *u, const struct doc_uq_host *h);
/* Free it (a write under way is given up: its token ends). */
void doc_uq_free(struct doc_uq *u);
/* The statement's collection, merge id (KVDOC_OP_*) and operand. */
void doc_uq_stmt(struct doc_uq *u, uint32_t cid, unsigned mid,
		 const struct kv_buf *opnd);
/* Queue the document of key dkey, with the keys to reserve first (a key
 * list; may be empty: its merge says), the caller's tag for it, and its
 * operand past the section (body, which must last until its merge came
 * back; {0}: the statement's).  0, or -1 out of memory. */
int doc_uq_push(struct doc_uq *u, const uint8_t *dkey, size_t dn,
		struct kv_slice want, size_t tag, struct kv_slice body);
/* A document a build read (key dk, image doc), for a REINDEX under the
 * statement's section: when the section has a unique index and the image
 * gives its keys, queued with them, so that its REINDEX goes out once
 * they are reserved, holding them (1), where a REINDEX sent at once would
 * come back asking for them: one round through a committer less.  0: the
 * caller sends its REINDEX itself (no unique index, or an image an index
 * refuses, which the REINDEX reports); -1 out of memory. */
int doc_uq_push_image(struct doc_uq *u, struct kv_slice dk,
		      struct kv_slice doc);
/* The reader and the catalog the driver reads with: its host's, or the
 * io thread's. */
struct kvd_reader *doc_uq_reader(const struct doc_uq *u);
const struct kvdoc_catalog *doc_uq_catalog(const struct doc_uq *u);
/* Drop the documents queued and not started. */
void doc_uq_cancel(struct doc_uq *u);
/* One of the caller's document merges came back: 1 when it asked for
 * reservations (the driver writes that document again: the caller
 * ignores pd), else 0 (its keys let go are kept for later). */
int doc_uq_back(struct doc_uq *u, const struct kvd_pend *pd);
/* The driver's merge came back. */
void doc_uq_result(struct doc_uq *u, const struct kvd_pend *pd);
/* Go on: start queued documents in free slots, and once nothing is
 * queued or under way, release what was let go.  1 with driver merges
 * out, 0 when nothing is left to do, -1 out of memory. */
int doc_uq_step(struct doc_uq *u);
/* A document key and a key list as one block, [u8 len][key][u32 n][key
 * list], the driver's queue's and release list's (and an insert pipe's
 * record of each document in flight): put onto b (0, or -1 out of
 * memory); the one at *pos read (1 and *pos past it, or 0 at the end). */
int doc_uq_block_put(struct kv_buf *b, const uint8_t *dkey, size_t dn,
		     struct kv_slice l);
int doc_uq_block_next(const struct kv_buf *b, size_t *pos, struct kv_slice *dk,
		      struct kv_slice *l);
/* The bytes of pd's reply before the trailer of keys let go. */
size_t doc_uq_len(const struct kvd_pend *pd);
/* The unique keys of an insert's document (n bytes) for the indexes of
 * operand op's section, as a key list into out: 0, or -1 with e. */
int doc_uq_keys(struct kv_slice op, const uint8_t *doc, size_t n,
		struct kv_buf *out, struct mql_error *e);

#endif
