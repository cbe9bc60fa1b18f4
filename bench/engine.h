/* engine.h - kvbench's load generator: threads, each with an epoll loop
 * over its connections, each connection with up to --pipeline requests in
 * flight.  One call runs one phase (load, run or verify) to completion. */
#ifndef KB_ENGINE_H
#define KB_ENGINE_H

#include "fstate.h"
#include "kvbench.h"
#include "verify.h"
#include "workloads.h"

/* What the phases of one kvbench invocation share. */
struct kb_run {
	const struct kb_config *cfg;
	struct kb_wshared ws;
	struct kb_vlog *vlogs; /* --verify: one per thread, across phases */
	struct fst_table *fst; /* --verify, records of fields natively */
	struct kb_vtable vt;   /* the verify phase's keys */
	struct kb_verify_result vres;
	struct kb_server_mem *mem; /* sampled each second, if known */
};

/* Run one phase; res receives its figures (res->ticks is malloc'd).
 * 0, or -1 with the reason in err (nothing could be measured: the
 * connections failed, the setup failed). */
int engine_run(struct kb_run *run, enum kb_phase phase, struct kb_result *res,
	       char *err, size_t errlen);

void result_free(struct kb_result *res);

#endif
