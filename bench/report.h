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

void report_progress(FILE *f, enum kb_phase phase, const struct kb_tick *k,
		     uint64_t done, uint64_t planned, uint64_t errors);

void report_table(FILE *f, const struct kb_report *r);
void report_csv(FILE *f, const struct kb_report *r);
int report_json(const char *path, const struct kb_report *r);
int report_hdr(const char *path, const struct kb_report *r);
/* Runs gnuplot; 0, or -1 with a message on stderr. */
int report_plot(const char *path, const struct kb_report *r);

#endif
