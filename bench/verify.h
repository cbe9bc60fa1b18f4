/* verify.h - --verify: remember every acknowledged write, then read every
 * key back and check it is there with a value that may be the last one.
 *
 * With several connections writing one key at once, "the last value" is
 * any write that no other write of that key provably followed: a write w
 * may be the final value iff no write of the same key was sent after w was
 * acknowledged (ack(w) >= max over writes of send time).  Remembering the
 * send and acknowledgement times of each write gives that test exactly,
 * without trusting the server's order.  A write answered with an error is
 * not remembered: if it was applied anyway, the read-back reports the
 * value as unexpected.
 */
#ifndef KB_VERIFY_H
#define KB_VERIFY_H

#include "workloads.h"

struct kb_ventry {
	struct kb_key id;
	uint64_t hash; /* XXH3 of the value sent */
	uint64_t sent, acked;
};

/* One per thread, appended to on every acknowledged write; it grows by
 * doubling, the one allocation --verify adds to a run. */
struct kb_vlog {
	struct kb_ventry *e;
	size_t n, cap;
	int oom;
};

int vlog_grow(struct kb_vlog *l);

static inline void vlog_push(struct kb_vlog *l, const struct kb_key *id,
			     uint64_t hash, uint64_t sent, uint64_t acked)
{
	if (l->n == l->cap && vlog_grow(l))
		return;
	l->e[l->n++] = (struct kb_ventry){*id, hash, sent, acked};
}

/* The keys to read back, each with the hashes it may hold. */
struct kb_vkey {
	struct kb_key id;
	uint32_t ncand;
	uint64_t cand; /* offset in hashes[] */
};

struct kb_vtable {
	struct kb_vkey *keys;
	size_t nkeys;
	uint64_t *hashes;
};

/* A field found wrong, for the report: which, why, and when. */
enum kb_fwhy { FWHY_STALE = 1, FWHY_CORRUPT, FWHY_MISSING };

struct kb_fsample {
	struct kb_key id;
	unsigned field;
	uint8_t why;	/* enum kb_fwhy */
	uint8_t in_run; /* a read of the run, not the read-back */
};

/* Per-thread counts of the read-back, and, for records of fields, of the
 * fields checked (in the run's reads or the read-back). */
#define VERIFY_SAMPLES 20
struct kb_vcount {
	uint64_t ok, lost, mismatched, errors;
	struct kb_key lost_ids[VERIFY_SAMPLES], bad_ids[VERIFY_SAMPLES];
	unsigned nlost_ids, nbad_ids;
	struct kb_fcheck fields;
	struct kb_fsample badf[VERIFY_SAMPLES];
	unsigned nbadf;
};

/* Count one field's verdict (0: fine, or enum kb_fwhy). */
void verify_field(struct kb_vcount *vc, const struct kb_key *id, unsigned field,
		  int why, int in_run);

void vlog_free(struct kb_vlog *l);

/* Merge the logs (emptying them) into a table.  0 or -1 (out of memory). */
int vtable_build(struct kb_vtable *vt, struct kb_vlog *logs, unsigned n);
void vtable_free(struct kb_vtable *vt);

uint64_t verify_hash(const void *p, size_t n);

/* Judge one read-back: st is the reply's status, val its value. */
void verify_check(const struct kb_vtable *vt, size_t idx, enum kb_status st,
		  const uint8_t *val, size_t vlen, struct kb_vcount *vc);

/* Sum the per-thread counts into res, formatting sample keys. */
int verify_result(struct kb_verify_result *res, const struct kb_vcount *vc,
		  unsigned n, const struct kb_wshared *ws, size_t nkeys);
/* The fields the run's reads checked (vc[i].fields), into res->reads. */
int verify_reads(struct kb_verify_result *res, const struct kb_vcount *vc,
		 unsigned n, const struct kb_wshared *ws);
void verify_result_free(struct kb_verify_result *res);

#endif
