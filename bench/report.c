/* report.c - kvbench's output formats.  The JSON fields are documented in
 * docs/kvbench.md; tests/bench reads them, so renaming one is a breaking
 * change. */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workloads.h"

#define MS(ns) ((double)(ns) / 1e6)

static double rate_of(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

static uint64_t total_errors(const struct kb_result *r)
{
	uint64_t n = 0;

	for (int i = 0; i < ERR_NTYPES; i++)
		n += r->errors[i];
	return n;
}

/* All operation types of a phase in one histogram (malloc'd; NULL when
 * out of memory). */
static struct kb_hist *merged(const struct kb_result *r)
{
	struct kb_hist *h = malloc(sizeof(*h));

	if (!h)
		return NULL;
	hist_reset(h);
	for (int i = 0; i < OP_NTYPES; i++)
		hist_add(h, &r->hist[i]);
	return h;
}

static int op_types(const struct kb_result *r)
{
	int n = 0;

	for (int i = 0; i < OP_NTYPES; i++)
		n += r->hist[i].count + r->op_errors[i] > 0;
	return n;
}

/* ---- progress -------------------------------------------------------- */

/* "8s", "2m05s", "1h02m03s". */
static void fmt_secs(char *buf, size_t n, double secs)
{
	unsigned long s = secs > 0 ? (unsigned long)(secs + 0.5) : 0;

	if (s < 60)
		snprintf(buf, n, "%lus", s);
	else if (s < 3600)
		snprintf(buf, n, "%lum%02lus", s / 60, s % 60);
	else
		snprintf(buf, n, "%luh%02lum%02lus", s / 3600, s / 60 % 60,
			 s % 60);
}

/* "  123/200 62%" by count, "  4s/12s" by time, then the ETA: the time
 * left by the clock, or by the rate so far, whichever ends first. */
static void progress_left(char *buf, size_t n, const struct kb_progress *p,
			  double t)
{
	char a[32], b[32], eta[32];
	double left = -1;
	size_t len = 0;

	buf[0] = 0;
	if (p->planned) {
		len = (size_t)snprintf(
		    buf, n, "  %" PRIu64 "/%" PRIu64 " %.0f%%", p->done,
		    p->planned, 100.0 * (double)p->done / (double)p->planned);
		if (p->done && p->measured > 0)
			left = p->done >= p->planned
				   ? 0
				   : (double)(p->planned - p->done) *
					 p->measured / (double)p->done;
	}
	if (p->total > 0 && len < n) {
		fmt_secs(a, sizeof(a), t);
		fmt_secs(b, sizeof(b), p->total);
		len += (size_t)snprintf(buf + len, n - len, "  %s/%s", a, b);
		if (left < 0 || p->total - t < left)
			left = p->total > t ? p->total - t : 0;
	}
	if (left >= 0 && len < n) {
		fmt_secs(eta, sizeof(eta), left);
		snprintf(buf + len, n - len, " ETA %s", eta);
	}
}

void report_progress(FILE *f, const struct kb_progress *p,
		     const struct kb_tick *k)
{
	char left[160];

	progress_left(left, sizeof(left), p, k->t);
	fprintf(f,
		"kvbench: %-6s %4.0fs %9" PRIu64 " ops/s  p50 %.3f  p99 %.3f"
		"  p99.9 %.3f ms  errors %" PRIu64 "%s%s\n",
		kb_phase_names[p->phase], k->t, k->ops, MS(k->p50), MS(k->p99),
		MS(k->p999), p->errors, left, k->warmup ? "  (warmup)" : "");
	fflush(f);
}

/* ---- table ----------------------------------------------------------- */

static void table_row(FILE *f, const char *name, const struct kb_hist *h,
		      uint64_t n, uint64_t errors, double seconds)
{
	fprintf(f,
		"  %-7s %10" PRIu64 " %10.0f %9.3f %9.3f %9.3f %9.3f %9.3f "
		"%9.3f %7" PRIu64 "\n",
		name, n, rate_of(n, seconds), MS(hist_percentile(h, 50)),
		MS(hist_percentile(h, 90)), MS(hist_percentile(h, 99)),
		MS(hist_percentile(h, 99.9)), MS(h->max), hist_mean(h) / 1e6,
		errors);
}

static void table_phase(FILE *f, const struct kb_result *r)
{
	struct kb_hist *all;

	fprintf(f,
		"\nphase %s: %" PRIu64 " ops in %.2f s = %.0f ops/s, "
		"errors %" PRIu64 "\n",
		kb_phase_names[r->phase], r->ops, r->seconds,
		rate_of(r->ops, r->seconds), total_errors(r));
	fprintf(f, "  %-7s %10s %10s %9s %9s %9s %9s %9s %9s %7s\n", "op",
		"count", "ops/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms",
		"max ms", "mean ms", "errors");
	for (int i = 0; i < OP_NTYPES; i++)
		if (r->hist[i].count + r->op_errors[i])
			table_row(f, kb_op_names[i], &r->hist[i],
				  r->hist[i].count + r->op_errors[i],
				  r->op_errors[i], r->seconds);
	if (op_types(r) > 1 && (all = merged(r))) {
		table_row(f, "all", all, r->ops, total_errors(r), r->seconds);
		free(all);
	}
	if (total_errors(r)) {
		fprintf(f, "  errors:");
		for (int i = 0; i < ERR_NTYPES; i++)
			if (r->errors[i])
				fprintf(f, " %s %" PRIu64, kb_err_names[i],
					r->errors[i]);
		fprintf(f, "\n");
	}
	if (r->first_error[0])
		fprintf(f, "  first error: %s\n", r->first_error);
	if (r->planned && r->ops != r->planned)
		fprintf(f,
			"  note: %" PRIu64 " operations planned, %" PRIu64
			" done\n",
			r->planned, r->ops);
	if (r->scan_items && r->hist[OP_SCAN].count)
		fprintf(f, "  scans returned %.1f records on average\n",
			(double)r->scan_items / (double)r->hist[OP_SCAN].count);
	if (r->has_keys)
		fprintf(f,
			"  keys: %" PRIu64 " of %" PRIu64 " touched; the "
			"hottest 1%% took %.1f%% of operations, the hottest "
			"10%% %.1f%%\n",
			r->keys_distinct, r->keys_space, 100 * r->keys_top1,
			100 * r->keys_top10);
}

static const char *record_ops(const struct kb_config *c)
{
	if (c->record == RECORD_VALUE)
		return "one msgpack value per record (a read fetches it "
		       "whole, an update writes it whole)";
	if (c->target.doc)
		return "a jsonb document per record (INSERT, doc or "
		       "doc->'fieldN', jsonb_set)";
	if (c->driver->fields)
		return c->driver->fields_ops;
	return "fields emulated: one msgpack value per record; a read "
	       "fetches it whole, an update of one field is GET then PUT "
	       "(two round trips, not atomic)";
}

static void table_fcheck(FILE *f, const char *what, const struct kb_fcheck *c)
{
	fprintf(f,
		"%s: %" PRIu64 " fields checked, stale %" PRIu64
		", corrupt %" PRIu64 ", missing %" PRIu64 "\n",
		what, c->checked, c->stale, c->corrupt, c->missing);
}

static void table_verify(FILE *f, const struct kb_verify_result *v)
{
	fprintf(f,
		"\nverify: %" PRIu64 " keys read back in %.2f s: ok %" PRIu64
		", mismatched %" PRIu64 ", errors %" PRIu64 "\n",
		v->keys, v->seconds, v->ok, v->mismatched, v->errors);
	fprintf(f, "lost: %" PRIu64 "\n", v->lost);
	for (size_t i = 0; i < v->nlost_keys; i++)
		fprintf(f, "  lost key: %s\n", v->lost_keys[i]);
	if (v->lost > v->nlost_keys)
		fprintf(f, "  ... and %" PRIu64 " more\n",
			v->lost - v->nlost_keys);
	for (size_t i = 0; i < v->nbad_keys; i++)
		fprintf(f, "  unexpected value: %s\n", v->bad_keys[i]);
	if (!v->fields)
		return;
	table_fcheck(f, "fields read back", &v->audit);
	table_fcheck(f, "fields of the run's reads", &v->reads);
	for (size_t i = 0; i < v->nbad_fields; i++)
		fprintf(f, "  bad field: %s\n", v->bad_fields[i]);
}

static const char *mem_method(const struct kb_server_mem *m)
{
	return m->tree ? "sampled process tree PSS" : "VmHWM";
}

/* How a YCSB record is stored and moved, for the header. */
static void record_line(FILE *f, const struct kb_config *c)
{
	const struct kb_props *p = &c->p;
	const struct kb_driver *d = c->driver;

	if (c->wl->kind != WL_YCSB)
		return;
	fprintf(f,
		"record: %s, fieldcount %u, fieldlength %u (%s), "
		"readallfields %s, writeallfields %s\n",
		c->record == RECORD_VALUE ? "value"
		: c->target.doc		  ? "doc"
					  : "fields",
		p->fieldcount, p->fieldlength,
		dist_name((enum kb_dist)p->fieldlengthdistribution),
		p->readallfields ? "true" : "false",
		p->writeallfields ? "true" : "false");
	fprintf(f, "%s: %s\n", d->name, record_ops(c));
}

void report_table(FILE *f, const struct kb_report *r)
{
	const struct kb_config *c = r->cfg;

	fprintf(f, "kvbench %s: %s\n", KVBENCH_VERSION, c->wl->title);
	fprintf(f,
		"target %s; %u threads x %u conns, pipeline %u, "
		"records %" PRIu64 "\n",
		r->target, c->threads, c->conns, c->pipeline, c->p.recordcount);
	record_line(f, c);
	fprintf(f, "command: %s\n", c->cmdline);
	for (size_t i = 0; i < r->nres; i++)
		if (r->res[i].phase != PHASE_VERIFY)
			table_phase(f, &r->res[i]);
	if (r->verify)
		table_verify(f, r->verify);
	if (r->mem && r->mem->known)
		fprintf(f,
			"\nserver: peak RSS %.1f MiB (%s, pid %d); at the "
			"end anon %.1f MiB, file %.1f MiB\n",
			(double)r->mem->peak_rss / 1048576.0,
			mem_method(r->mem), (int)r->mem->pid,
			(double)r->mem->rss_anon / 1048576.0,
			(double)r->mem->rss_file / 1048576.0);
}

/* ---- CSV ------------------------------------------------------------- */

static void csv_row(FILE *f, const struct kb_result *x, const char *name,
		    const struct kb_hist *h, uint64_t n, uint64_t errors)
{
	fprintf(f,
		"%s,%s,%" PRIu64 ",%" PRIu64
		",%.3f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
		kb_phase_names[x->phase], name, n, errors, x->seconds,
		rate_of(n, x->seconds), MS(hist_percentile(h, 50)),
		MS(hist_percentile(h, 90)), MS(hist_percentile(h, 99)),
		MS(hist_percentile(h, 99.9)), MS(h->max), hist_mean(h) / 1e6);
}

void report_csv(FILE *f, const struct kb_report *r)
{
	fprintf(f, "phase,op,count,errors,seconds,ops_per_sec,p50_ms,p90_ms,"
		   "p99_ms,p999_ms,max_ms,mean_ms\n");
	for (size_t i = 0; i < r->nres; i++) {
		const struct kb_result *x = &r->res[i];
		struct kb_hist *all;

		if (x->phase == PHASE_VERIFY)
			continue;
		for (int j = 0; j < OP_NTYPES; j++)
			if (x->hist[j].count + x->op_errors[j])
				csv_row(f, x, kb_op_names[j], &x->hist[j],
					x->hist[j].count + x->op_errors[j],
					x->op_errors[j]);
		if ((all = merged(x))) {
			csv_row(f, x, "all", all, x->ops, total_errors(x));
			free(all);
		}
	}
}

/* ---- JSON ------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_latency(FILE *f, const struct kb_hist *h)
{
	fprintf(f,
		"{\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, "
		"\"p99_9\": %.4f, \"max\": %.4f, \"mean\": %.4f, "
		"\"min\": %.4f}",
		MS(hist_percentile(h, 50)), MS(hist_percentile(h, 90)),
		MS(hist_percentile(h, 99)), MS(hist_percentile(h, 99.9)),
		MS(h->max), hist_mean(h) / 1e6, h->count ? MS(h->min) : 0.0);
}

static void json_ops(FILE *f, const struct kb_result *x)
{
	const char *sep = "";

	fprintf(f, "\"ops_by_type\": {");
	for (int j = 0; j < OP_NTYPES; j++) {
		uint64_t n = x->hist[j].count + x->op_errors[j];

		if (!n)
			continue;
		fprintf(f,
			"%s\n        \"%s\": {\"count\": %" PRIu64
			", \"errors\": %" PRIu64
			", \"ops_per_sec\": %.1f, \"latency_ms\": ",
			sep, kb_op_names[j], n, x->op_errors[j],
			rate_of(n, x->seconds));
		json_latency(f, &x->hist[j]);
		fprintf(f, "}");
		sep = ",";
	}
	fprintf(f, "}");
}

static void json_phase(FILE *f, const struct kb_result *x)
{
	struct kb_hist *all;

	fprintf(f,
		"    {\"phase\": \"%s\", \"seconds\": %.4f, \"ops\": %" PRIu64
		", \"planned\": %" PRIu64 ", \"ops_per_sec\": %.1f,\n"
		"      \"errors\": {\"total\": %" PRIu64,
		kb_phase_names[x->phase], x->seconds, x->ops, x->planned,
		rate_of(x->ops, x->seconds), total_errors(x));
	for (int j = 0; j < ERR_NTYPES; j++)
		fprintf(f, ", \"%s\": %" PRIu64, kb_err_names[j], x->errors[j]);
	fprintf(f, "},\n      \"first_error\": ");
	json_str(f, x->first_error);
	fprintf(f, ", \"scan_items\": %" PRIu64 ",\n      \"latency_ms\": ",
		x->scan_items);
	if ((all = merged(x))) {
		json_latency(f, all);
		free(all);
	} else {
		fprintf(f, "null");
	}
	fprintf(f, ",\n      ");
	json_ops(f, x);
	if (x->has_keys)
		fprintf(f,
			",\n      \"keys\": {\"space\": %" PRIu64
			", \"distinct\": %" PRIu64
			", \"top1_share\": %.4f, \"top10_share\": %.4f}",
			x->keys_space, x->keys_distinct, x->keys_top1,
			x->keys_top10);
	fprintf(f, ",\n      \"timeline\": [");
	for (size_t k = 0; k < x->nticks; k++) {
		const struct kb_tick *t = &x->ticks[k];

		fprintf(f,
			"%s\n        {\"t\": %.2f, \"ops\": %" PRIu64
			", \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
			"\"p99_9_ms\": %.4f, \"max_ms\": %.4f, "
			"\"warmup\": %s}",
			k ? "," : "", t->t, t->ops, MS(t->p50), MS(t->p99),
			MS(t->p999), MS(t->max), t->warmup ? "true" : "false");
	}
	fprintf(f, "]}");
}

static void json_fcheck(FILE *f, const char *name, const struct kb_fcheck *c)
{
	fprintf(f,
		"\"%s\": {\"checked\": %" PRIu64 ", \"stale\": %" PRIu64
		", \"corrupt\": %" PRIu64 ", \"missing\": %" PRIu64 "}",
		name, c->checked, c->stale, c->corrupt, c->missing);
}

static void json_verify(FILE *f, const struct kb_verify_result *v)
{
	fprintf(f,
		",\n  \"verify\": {\"keys\": %" PRIu64 ", \"ok\": %" PRIu64
		", \"lost\": %" PRIu64 ", \"mismatched\": %" PRIu64
		", \"errors\": %" PRIu64 ", \"seconds\": %.4f, "
		"\"lost_keys\": [",
		v->keys, v->ok, v->lost, v->mismatched, v->errors, v->seconds);
	for (size_t i = 0; i < v->nlost_keys; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, v->lost_keys[i]);
	}
	fprintf(f, "], \"mismatched_keys\": [");
	for (size_t i = 0; i < v->nbad_keys; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, v->bad_keys[i]);
	}
	fprintf(f, "],\n    \"fields\": {");
	json_fcheck(f, "read_back", &v->audit);
	fprintf(f, ", ");
	json_fcheck(f, "run_reads", &v->reads);
	fprintf(f, "}, \"bad_fields\": [");
	for (size_t i = 0; i < v->nbad_fields; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, v->bad_fields[i]);
	}
	fprintf(f, "]}");
}

static void json_prop(void *arg, const char *name, const char *value)
{
	FILE *f = arg;

	fprintf(f, ",\n      ");
	json_str(f, name);
	fprintf(f, ": ");
	json_str(f, value);
}

static void json_config(FILE *f, const struct kb_config *c)
{
	fprintf(f,
		"  \"config\": {\"threads\": %u, \"conns\": %u, "
		"\"pipeline\": %u, \"records\": %" PRIu64 ", \"ops\": %" PRIu64
		", \"duration\": %.3f, \"warmup\": %.3f, \"rate\": %.1f, "
		"\"seed\": %" PRIu64 ", \"value_size\": [%u, %u], "
		"\"verify\": %s,\n    \"properties\": {\"workload\": ",
		c->threads, c->conns, c->pipeline, c->p.recordcount, c->ops,
		c->duration, c->warmup, c->rate, c->seed, c->vmin, c->vmax,
		c->verify ? "true" : "false");
	json_str(f, c->wl->name);
	wl_print_props(c, json_prop, f);
	fprintf(f, "},\n    \"record\": \"%s\", \"record_ops\": ",
		c->wl->kind != WL_YCSB	    ? "none"
		: c->record == RECORD_VALUE ? "value"
		: c->target.doc		    ? "doc"
					    : "fields");
	json_str(f, c->wl->kind == WL_YCSB ? record_ops(c) : "");
	fprintf(f, ", \"fields_native\": %s},\n",
		c->wl->kind == WL_YCSB && c->record == RECORD_FIELDS &&
			c->driver->fields
		    ? "true"
		    : "false");
}

int report_json(const char *path, const struct kb_report *r)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		return -1;
	fprintf(f,
		"{\n  \"kvbench\": \"%s\",\n  \"command\": ", KVBENCH_VERSION);
	json_str(f, r->cfg->cmdline);
	fprintf(f, ",\n  \"driver\": \"%s\",\n  \"target\": ",
		r->cfg->driver->name);
	json_str(f, r->target);
	fprintf(f,
		",\n  \"workload\": \"%s\",\n  \"title\": ", r->cfg->wl->name);
	json_str(f, r->cfg->wl->title);
	fprintf(f, ",\n");
	json_config(f, r->cfg);
	fprintf(f, "  \"phases\": [\n");
	for (size_t i = 0, n = 0; i < r->nres; i++)
		if (r->res[i].phase != PHASE_VERIFY) {
			fprintf(f, n++ ? ",\n" : "");
			json_phase(f, &r->res[i]);
		}
	fprintf(f, "]");
	if (r->verify)
		json_verify(f, r->verify);
	if (r->mem && r->mem->known)
		fprintf(f,
			",\n  \"server\": {\"pid\": %d, \"peak_rss_bytes\": "
			"%" PRIu64 ", \"rss_anon_bytes\": %" PRIu64
			", \"rss_file_bytes\": %" PRIu64
			", \"method\": \"%s\"}",
			(int)r->mem->pid, r->mem->peak_rss, r->mem->rss_anon,
			r->mem->rss_file, mem_method(r->mem));
	fprintf(f, "\n}\n");
	if (f == stdout)
		return fflush(f) ? -1 : 0;
	return fclose(f) ? -1 : 0;
}

/* ---- HDR ------------------------------------------------------------- */

/* prefix without a trailing ".hgrm", so that "--hdr lat.hgrm" gives
 * lat.read.hgrm and not lat.hgrm.read.hgrm. */
static size_t stem_len(const char *path, const char *ext)
{
	size_t n = strlen(path), e = strlen(ext);

	return n > e && strcmp(path + n - e, ext) == 0 ? n - e : n;
}

static int hdr_file(const char *prefix, const struct kb_result *x, int op,
		    const struct kb_report *r)
{
	char path[4096];
	FILE *f;
	int n = snprintf(path, sizeof(path), "%.*s%s.%s.hgrm",
			 (int)stem_len(prefix, ".hgrm"), prefix,
			 x->phase == PHASE_RUN ? "" : ".load", kb_op_names[op]);

	if (n < 0 || (size_t)n >= sizeof(path) || !(f = fopen(path, "w"))) {
		fprintf(stderr, "kvbench: --hdr: cannot write %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	hist_print_hdr(f, &x->hist[op], 5);
	if (fclose(f)) {
		fprintf(stderr, "kvbench: --hdr: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (!r->cfg->quiet)
		fprintf(stderr, "kvbench: --hdr: %s\n", path);
	return 0;
}

/* One file per histogram, because HdrHistogram's plotters read one
 * percentile distribution per file: PREFIX.OP.hgrm for the run phase,
 * PREFIX.load.OP.hgrm for the load. */
int report_hdr(const char *prefix, const struct kb_report *r)
{
	int rc = 0;

	for (size_t i = 0; i < r->nres; i++)
		for (int j = 0; j < OP_NTYPES; j++)
			if (r->res[i].phase != PHASE_VERIFY &&
			    r->res[i].hist[j].count &&
			    hdr_file(prefix, &r->res[i], j, r))
				rc = -1;
	return rc;
}

/* ---- plot ------------------------------------------------------------ */

/* The phase worth a picture: the run if there was one, else the load. */
static const struct kb_result *plot_phase(const struct kb_report *r)
{
	const struct kb_result *best = NULL;

	for (size_t i = 0; i < r->nres; i++)
		if (r->res[i].phase != PHASE_VERIFY && r->res[i].nticks)
			best = &r->res[i];
	return best;
}

/* The operation types drawn: those timed in at least one measured second
 * (gnuplot refuses a log-scale panel with no point).  Returns how many. */
static int plot_types(const struct kb_result *x, int types[OP_NTYPES])
{
	int n = 0;

	for (int j = 0; j < OP_NTYPES; j++)
		for (size_t k = 0; k < x->nticks; k++)
			if (!x->ticks[k].warmup && x->ticks[k].op[j].ops) {
				types[n++] = j;
				break;
			}
	return n;
}

/* Columns: seconds since the measured run began, ops/s, then p50 p99
 * p99.9 max (ms) of each type drawn; NaN (a gap) for a second in which a
 * type completed nothing. */
static int write_plot_data(FILE *d, const struct kb_result *x, const int *types,
			   int ntypes)
{
	for (size_t k = 0; k < x->nticks; k++) {
		const struct kb_tick *t = &x->ticks[k];

		if (t->warmup) /* nothing was measured */
			continue;
		fprintf(d, "%.2f %" PRIu64, t->t - x->measured_at, t->ops);
		for (int i = 0; i < ntypes; i++) {
			const struct kb_tick_op *o = &t->op[types[i]];

			if (o->ops)
				fprintf(d, " %.4f %.4f %.4f %.4f", MS(o->p50),
					MS(o->p99), MS(o->p999), MS(o->max));
			else
				fprintf(d, " NaN NaN NaN NaN");
		}
		fprintf(d, "\n");
	}
	return fclose(d) ? -1 : 0;
}

/* A gnuplot double-quoted string, newlines kept as \n. */
static void gp_str(FILE *g, const char *s)
{
	fputc('"', g);
	for (; *s; s++) {
		if (*s == '\n')
			fputs("\\n", g);
		else if (*s == '"' || *s == '\\')
			fprintf(g, "\\%c", *s);
		else
			fputc(*s, g);
	}
	fputc('"', g);
}

/* Where --plot's files go: FILE.png, and beside it FILE.dat and
 * FILE.gnuplot, so that the picture can be redrawn or restyled. */
struct plot_files {
	char png[4096], data[4096], script[4096];
};

static int plot_files(struct plot_files *pf, const char *path)
{
	int n = (int)stem_len(path, ".png");

	snprintf(pf->png, sizeof(pf->png), "%s", path);
	return snprintf(pf->data, sizeof(pf->data), "%.*s.dat", n, path) >=
			   (int)sizeof(pf->data) ||
		       snprintf(pf->script, sizeof(pf->script), "%.*s.gnuplot",
				n, path) >= (int)sizeof(pf->script)
		   ? -1
		   : 0;
}

/* The title names what shaped the picture: workload, phase, target,
 * connections and pipeline. */
static void plot_title(FILE *g, const struct kb_report *r,
		       const struct kb_result *x, int rows)
{
	const struct kb_config *c = r->cfg;
	char t[1024];

	snprintf(t, sizeof(t),
		 "kvbench workload %s (%s), %s phase, %s\n%u connections "
		 "(%u threads x %u), pipeline %u",
		 c->wl->name, c->wl->title, kb_phase_names[x->phase], r->target,
		 c->threads * c->conns, c->threads, c->conns, c->pipeline);
	fprintf(g, "set multiplot layout %d,1 title ", rows);
	gp_str(g, t);
	fprintf(g, "\n");
}

/* One panel for the throughput, its axis from 0; then one per operation
 * type: p50, p99, p99.9 and max on a log scale. */
static void write_plot_script(FILE *g, const struct plot_files *pf,
			      const struct kb_report *r,
			      const struct kb_result *x, const int *types,
			      int ntypes)
{
	fprintf(g, "# kvbench --plot: gnuplot %s redraws %s\n", pf->script,
		pf->png);
	fprintf(g, "set terminal pngcairo noenhanced size 1000,%d\nset output ",
		360 + 300 * ntypes);
	gp_str(g, pf->png);
	fprintf(g, "\n");
	plot_title(g, r, x, 1 + ntypes);
	fprintf(g,
		"set grid\nset key outside right top\nset lmargin 12\nset "
		"rmargin 24\n"
		"set xlabel \"seconds of the %s\"\n"
		"set xrange [0:*]\n",
		kb_phase_names[x->phase]);
	fprintf(g, "set ylabel \"ops/s\"\nset yrange [0:*]\nplot ");
	gp_str(g, pf->data);
	fprintf(g, " using 1:2 with linespoints title \"throughput\"\n"
		   "set logscale y\nset yrange [*:*]\n");
	for (int i = 0; i < ntypes; i++) {
		const char *op = kb_op_names[types[i]];
		int c = 3 + 4 * i;

		fprintf(g, "set ylabel \"%s latency, ms\"\nplot ", op);
		gp_str(g, pf->data);
		fprintf(g,
			" using 1:%d with lines title \"%s p50\", \"\" using "
			"1:%d with lines title \"%s p99\", \"\" using 1:%d "
			"with lines title \"%s p99.9\", \"\" using 1:%d with "
			"lines title \"%s max\"\n",
			c, op, c + 1, op, c + 2, op, c + 3, op);
	}
	fprintf(g, "unset multiplot\n");
}

/* gnuplot SCRIPT; 0, or -1 with a message. */
static int run_gnuplot(const char *script)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		fprintf(stderr, "kvbench: --plot needs gnuplot (Debian: "
				"gnuplot-nox)\n");
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "kvbench: gnuplot failed on %s\n", script);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int report_plot(const char *path, const struct kb_report *r)
{
	const struct kb_result *x = plot_phase(r);
	struct plot_files pf;
	int types[OP_NTYPES], ntypes;
	FILE *d = NULL, *g = NULL;

	if (!x) {
		fprintf(stderr, "kvbench: --plot: the run was shorter than a "
				"second, nothing to draw\n");
		return -1;
	}
	ntypes = plot_types(x, types);
	if (plot_files(&pf, path)) {
		fprintf(stderr, "kvbench: --plot: path too long\n");
		return -1;
	}
	if (!(d = fopen(pf.data, "w")) ||
	    write_plot_data(d, x, types, ntypes)) {
		fprintf(stderr, "kvbench: --plot: cannot write %s: %s\n",
			pf.data, strerror(errno));
		return -1;
	}
	if (!(g = fopen(pf.script, "w"))) {
		fprintf(stderr, "kvbench: --plot: cannot write %s: %s\n",
			pf.script, strerror(errno));
		return -1;
	}
	write_plot_script(g, &pf, r, x, types, ntypes);
	if (fclose(g)) {
		fprintf(stderr, "kvbench: --plot: %s: %s\n", pf.script,
			strerror(errno));
		return -1;
	}
	return run_gnuplot(pf.script);
}
