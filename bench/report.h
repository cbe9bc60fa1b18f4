/* report.h - kvbench's output: the table for people, JSON and CSV for
 * machines, the full latency distribution (--hdr), a picture (--plot), and
 * the progress line each second on stderr. */
#ifndef KB_REPORT_H
#define KB_REPORT_H

#include <stdio.h>

#include "kvbench.h"

struct kb_report {
	const struct kb_config *cfg;
	const struct kb_result *res; /* the phases that ran, in order */
	size_t nres;
	const struct kb_verify_result *verify; /* NULL without --verify */
	const struct kb_server_mem *mem;       /* NULL when unknown */
	const char *target;		       /* "kvd 127.0.0.1:7379" */
};

/* Where a phase stands, for the progress line. */
struct kb_progress {
	enum kb_phase phase;
	uint64_t done, planned, errors; /* planned 0: by time */
	double total;	 /* seconds, warmup included; 0: by count */
	double measured; /* seconds measured so far */
};

void report_progress(FILE *f, const struct kb_progress *p,
		     const struct kb_tick *k);

void report_table(FILE *f, const struct kb_report *r);
void report_csv(FILE *f, const struct kb_report *r);
int report_json(const char *path, const struct kb_report *r);
/* One HdrHistogram percentile file per phase and operation type, named
 * from prefix (docs/kvbench.md); 0, or -1 with a message on stderr. */
int report_hdr(const char *prefix, const struct kb_report *r);
/* Writes the data and the gnuplot script beside path, runs gnuplot; 0, or
 * -1 with a message on stderr. */
int report_plot(const char *path, const struct kb_report *r);

#endif
