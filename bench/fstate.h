/* fstate.h - --verify for records of fields: what each field of each
 * record may hold, kept as a few generation numbers instead of its bytes.
 *
 * Every write of a field gets the field's next generation when it is sent,
 * and its bytes carry it (record.h).  A read may return a write w unless
 * some other write w2 provably replaced it before the read was sent: w2
 * sent after w was acknowledged, and itself acknowledged before the read
 * was sent (verify.h's rule, per field).  Since generations are handed out
 * in the order writes are sent, "every write acknowledged before w2 was
 * sent" is a prefix of generations when no write of the field was in
 * flight, and otherwise at least the prefix known complete the last time
 * none was (quiet); w2's acknowledgement then makes everything up to that
 * prefix stale (floor).  A read sees floor as it was when the read was
 * sent and accepts any generation above it.
 *
 * The test never condemns a value that may be current; writes in flight
 * only make it more lenient, and a write whose connection failed (it may
 * or may not have been applied, its acknowledgement never comes) stops
 * the field's floor from advancing further.  16 bytes per field.
 */
#ifndef KB_FSTATE_H
#define KB_FSTATE_H

#include <pthread.h>
#include <stdint.h>

#include "verify.h"
#include "workloads.h"

struct fst_ent {
	uint32_t next;	   /* the next generation; 0: not written here */
	uint32_t floor;	   /* generations <= floor are stale */
	uint32_t quiet;	   /* every generation <= quiet was answered */
	uint16_t inflight; /* writes sent, not answered */
	uint8_t acked;	   /* a write of it was acknowledged */
	uint8_t pad;
};

#define FST_CHUNK 4096 /* records per allocation */
#define FST_LOCKS 1024

struct fst_table {
	unsigned fieldcount;
	uint64_t first;	   /* the lowest record number */
	uint32_t gen_base; /* a field this process did not load starts here */
	struct fst_ent **chunks; /* FST_CHUNK records each, made on demand */
	size_t nchunks;
	pthread_mutex_t locks[FST_LOCKS];
};

int fst_init(struct fst_table *t, unsigned fieldcount, uint64_t first);
void fst_free(struct fst_table *t);

/* A write of field f of record k is being sent (insert: the record is new,
 * so a field new to this process is generation 1, as every load writes
 * it): its generation, and in *pfx the prefix its acknowledgement makes
 * stale.  0, or -1 (out of memory: the write is then not followed). */
int fst_send(struct fst_table *t, uint64_t k, unsigned f, int insert,
	     uint32_t *gen, uint32_t *pfx);

/* Its answer: acknowledged, or an error reply (not applied). */
void fst_done(struct fst_table *t, uint64_t k, unsigned f, uint32_t pfx,
	      int acked);

/* A read of record k is being sent: for field f (or every field, f < 0),
 * floor in the low 32 bits and bit 32 set when the field has had an
 * acknowledged write (then a reply without it lost it). */
#define FST_ACKED (1ull << 32)
void fst_snapshot(struct fst_table *t, uint64_t k, int f, uint64_t *out);

enum fst_verdict { FST_OK, FST_STALE, FST_CORRUPT };

/* Judge the bytes v of field f of record k read with snapshot snap. */
enum fst_verdict fst_check(struct fst_table *t, const struct kb_props *p,
			   const struct kb_zipf *lenz, uint64_t k, unsigned f,
			   uint64_t snap, const uint8_t *v, size_t len);

/* The read-back's table: the records with an acknowledged write (their
 * fields are judged by fst_check, not by the table's hashes).  0 or -1. */
int fst_vtable(struct fst_table *t, struct kb_vtable *vt);

#endif
