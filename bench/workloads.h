/* workloads.h - what kvbench sends: YCSB's core workloads A-F and the
 * scenarios kvd was made for (ingest, uuid, geo).
 *
 * A workload turns a random stream into operations: an operation type, a
 * key (a 128-bit id that the workload formats), and for writes a value.
 * Keys are kept as ids, not strings, so that --verify can remember millions
 * of them in 16 bytes each and rebuild the string to read it back.
 */
#ifndef KB_WORKLOADS_H
#define KB_WORKLOADS_H

#include "kvbench.h"
#include "ycsb.h"

struct kb_key {
	uint64_t hi, lo;
};

enum kb_wl_kind { WL_YCSB, WL_INGEST, WL_UUID, WL_GEO, WL_INDEX };

struct kb_workload {
	const char *name;
	const char *title;
	enum kb_wl_kind kind;
	/* YCSB's workloads/workloadX file: proportions and distribution. */
	double read, update, insert, scan, rmw;
	int dist; /* enum kb_dist */
	unsigned maxscanlength;
	int ixfield; /* WL_INDEX: what a read looks for (enum kb_ixfield) */
};

/* NULL if unknown; accepts "a", "A", "workloada", "ycsb-a". */
const struct kb_workload *wl_find(const char *name);
extern const struct kb_workload kb_workloads[];
extern const size_t kb_nworkloads;

/* Defaults of every option that depends on the workload (threads, conns,
 * records, value sizes, YCSB properties); called before the options that
 * override them are parsed. */
void wl_defaults(struct kb_config *cfg, unsigned ncpu);

/* "-p name=value": a YCSB property.  0, or -1 with a message in err. */
int wl_set_prop(struct kb_props *p, const char *nv, char *err, size_t errlen);

/* Check the properties once every option is known; fills in the derived
 * ones (insertcount).  0, or -1 with a message. */
int wl_finish(struct kb_config *cfg, char *err, size_t errlen);

/* Print every property, "name=value" per line, for --json and the docs. */
void wl_print_props(const struct kb_config *cfg,
		    void (*emit)(void *, const char *, const char *),
		    void *arg);

/* ---- one run's shared state ------------------------------------------ */

struct kb_wshared {
	const struct kb_config *cfg;
	const struct kb_props *p;
	double cum[OP_NTYPES];	 /* cumulative operation proportions */
	struct kb_acked acked;	 /* insert key numbers (run phase) */
	uint64_t seq;		 /* sequential key chooser */
	uint64_t keyspace;	 /* key numbers the chooser can draw */
	uint64_t load_count;	 /* load phase: operations in all */
	size_t max_value;	 /* largest value a write can carry */
	uint64_t rmw_field_seed; /* record contents: per-run salt */
	int fields;		 /* YCSB records of fields (--record) */
};

int wl_shared_init(struct kb_wshared *ws, const struct kb_config *cfg);
void wl_shared_free(struct kb_wshared *ws);

/* Per thread: its key chooser, scan-length and field-length generators,
 * and its slice of the load phase. */
struct kb_wthread {
	struct kb_chooser keys;
	struct kb_zipf scanlen, fieldlen;
	uint64_t load_next, load_end;
};

/* Per connection: the ingest workload's client and its row counter. */
struct kb_wconn {
	uint64_t client, next, end;
};

void wl_thread_init(struct kb_wshared *ws, struct kb_wthread *wt, unsigned idx,
		    unsigned nthreads);
void wl_conn_init(struct kb_wshared *ws, struct kb_wconn *wc, unsigned gid,
		  unsigned nconns);

/* One generated operation. */
struct kb_op {
	enum kb_optype type;
	struct kb_key id;
	unsigned scan_len;
	unsigned field;	     /* update: the field rewritten */
	int rfield;	     /* records of fields: the field a read or scan
			      * fetches, -1 all (readallfields) */
	uint64_t insert_num; /* insert in the run phase: to acknowledge */
	int acked_insert;
};

/* The next operation of a phase (PHASE_LOAD or PHASE_RUN) for a
 * connection: 1, or 0 when this connection's share of the load is done. */
int wl_next(struct kb_wshared *ws, struct kb_wthread *wt, struct kb_wconn *wc,
	    struct kb_rng *r, enum kb_phase phase, struct kb_op *op);

/* Called when an operation completed: acknowledges run-phase inserts so
 * that "latest" and the zipfian resampling may choose them. */
void wl_done(struct kb_wshared *ws, const struct kb_op *op);

/* The key of id into buf (at least KB_KEY_MAX bytes); its length. */
#define KB_KEY_MAX KB_REQ_KEY_MAX
size_t wl_key(const struct kb_wshared *ws, const struct kb_key *id, char *buf);

/* The value a write of op sends, into buf (ws->max_value bytes); its
 * length. */
size_t wl_value(struct kb_wshared *ws, struct kb_wthread *wt, struct kb_rng *r,
		const struct kb_op *op, uint8_t *buf);

/* For --key-stats: the key number of an op, or UINT64_MAX if it has none
 * within the key space. */
uint64_t wl_keynum(const struct kb_wshared *ws, const struct kb_op *op);

#endif
