/* fieldops.h - the requests of YCSB's operations on records of fields
 * (--record fields), and what their replies mean for --verify.
 *
 * A driver with fields (redis: a hash; postgres: a column per field) gets
 * YCSB's own operations: READ of all fields or one, UPDATE of one field or
 * all, INSERT of a record, FSCAN.  A driver without (kvd's native protocol,
 * until it has hashes) stores each record as one value, the msgpack map of
 * --record value, and the operations are made of GET and PUT: a read
 * fetches the whole record and picks its fields; an update of one field is
 * a read-modify-write of the record (GET, then PUT with the field changed,
 * two round trips and not atomic: two clients updating different fields
 * of one record at once may lose one of the updates, as any client of a
 * store without fields may); an update of every field is one PUT.
 *
 * --verify: with fields, every field write is followed (fstate.h) and each
 * read checks the fields it got; emulated, a PUT writes the whole record
 * and the record is checked as --record value does (verify.h), and each
 * read checks that its fields are bytes some write sent.
 */
#ifndef KB_FIELDOPS_H
#define KB_FIELDOPS_H

#include "fstate.h"
#include "verify.h"
#include "workloads.h"

/* An operation's state between its request and its reply. */
struct fo_slot {
	uint32_t *gen, *pfx; /* the fields written (native, --verify) */
	uint64_t *snap;	     /* the fields read: fst_snapshot's */
	unsigned nw;	     /* fields written */
	uint64_t vhash;	     /* emulated write: hash of the record sent */
};

/* One engine thread's. */
struct fo_thread {
	const struct kb_props *p;
	struct kb_wshared *ws;
	const struct kb_wthread *wt;
	struct kb_rng *rng;
	struct fst_table *fst; /* native, --verify */
	struct kb_vlog *vlog;  /* emulated, --verify */
	int native, verify;
	unsigned nf;
	struct kb_fval *fv, *dec;
	uint8_t *fdata, *vbuf, *seen;
	struct kb_vcount reads; /* the fields the run's reads checked */
};

/* fst: the per-field state when the driver has fields and --verify is
 * on; vlog: the thread's write log when it has none and --verify is on. */
int fo_init(struct fo_thread *ft, struct kb_wshared *ws,
	    const struct kb_wthread *wt, struct kb_rng *rng, int native,
	    struct fst_table *fst, struct kb_vlog *vlog, int verify);
void fo_free(struct fo_thread *ft);
int fo_slot_init(const struct fo_thread *ft, struct fo_slot *fs);
void fo_slot_free(struct fo_slot *fs);

/* Round trips of op: 2 for a read-modify-write, and for an emulated
 * update of some fields; else 1. */
unsigned fo_steps(const struct fo_thread *ft, const struct kb_op *op);

/* The request of step `step` of op into req (key into kbuf; prev: the
 * reply of step 0, for step 1).  0, or -1 when prev is not a record. */
int fo_build(struct fo_thread *ft, const struct kb_op *op, unsigned step,
	     const struct kb_reply *prev, struct fo_slot *fs, char *kbuf,
	     struct kb_req *req);

/* The reply to that step, whatever its status: follows writes, checks
 * reads (sent: when the step was sent; now: its reply). */
void fo_reply(struct fo_thread *ft, const struct kb_op *op, unsigned step,
	      struct fo_slot *fs, const struct kb_reply *r, uint64_t sent,
	      uint64_t now);

/* The read-back of op's record (OP_VERIFY); vt/idx: its entry in the
 * table of --record value's rule (emulated). */
void fo_audit(struct fo_thread *ft, const struct kb_op *op,
	      const struct kb_reply *r, const struct kb_vtable *vt, size_t idx,
	      struct kb_vcount *vc);

#endif
