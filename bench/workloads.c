/* workloads.c - YCSB's core workloads A-F and kvd's own scenarios: their
 * defaults, their properties, and the operations, keys and values they
 * generate.
 *
 * YCSB records of fields (--record fields) are written by fieldops.c from
 * the operations drawn here.  With --record value every driver stores a
 * record as one value, one msgpack map {"field0": bin, ...}.  YCSB's update
 * writes one field (writeallfields=false); a store of whole values has to
 * write the whole record to do that, so an update sends the full map with
 * one field given fresh random bytes and the others as they were loaded.
 * The other fields are a pure function of (key, field, seed), which lets
 * the client rebuild them without reading or remembering the record.
 */
#include "workloads.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ixdocs.h"
#include "mpw.h"
#include "record.h"

/* ---- the workloads --------------------------------------------------- */

/* Proportions and distributions from YCSB's workloads/workloada..f. */
const struct kb_workload kb_workloads[] = {
    {"a", "YCSB A: update heavy, 50% read / 50% update, zipfian", WL_YCSB, 0.5,
     0.5, 0, 0, 0, DIST_ZIPFIAN, 1000},
    {"b", "YCSB B: read mostly, 95% read / 5% update, zipfian", WL_YCSB, 0.95,
     0.05, 0, 0, 0, DIST_ZIPFIAN, 1000},
    {"c", "YCSB C: read only, zipfian", WL_YCSB, 1, 0, 0, 0, 0, DIST_ZIPFIAN,
     1000},
    {"d", "YCSB D: read latest, 95% read / 5% insert, latest", WL_YCSB, 0.95, 0,
     0.05, 0, 0, DIST_LATEST, 1000},
    {"e", "YCSB E: short ranges, 95% scan (1..100) / 5% insert, zipfian",
     WL_YCSB, 0, 0, 0.05, 0.95, 0, DIST_ZIPFIAN, 100},
    {"f", "YCSB F: 50% read / 50% read-modify-write, zipfian", WL_YCSB, 0.5, 0,
     0, 0, 0.5, DIST_ZIPFIAN, 1000},
    {"ingest", "ingest: clients inserting one row per round trip", WL_INGEST, 0,
     0, 1, 0, 0, DIST_UNIFORM, 1000},
    {"uuid", "uuid: random uuid-v4 keys, 20-200 byte values", WL_UUID, 0, 0, 1,
     0, 0, DIST_UNIFORM, 1000},
    {"geo", "geo: documents written in random order, then random reads", WL_GEO,
     1, 0, 0, 0, 0, DIST_UNIFORM, 1000},
    /* Documents with secondary indexes (ixdocs.h). */
    {"ixpoint", "ixpoint: find {k: v} through an index, 10 documents", WL_INDEX,
     1, 0, 0, 0, 0, DIST_UNIFORM, 100, IX_K},
    {"ixeq", "ixeq: find {r: v} through an index, 1 document", WL_INDEX, 1, 0,
     0, 0, 0, DIST_UNIFORM, 100, IX_R},
    {"ixget", "ixget: find {_id: key}, 1 document", WL_INDEX, 1, 0, 0, 0, 0,
     DIST_UNIFORM, 100, IX_ID},
    {"ixrange",
     "ixrange: find {r: {$gte: v}} sort {r: 1} limit 100 through an index",
     WL_INDEX, 0, 0, 0, 1, 0, DIST_UNIFORM, 100, IX_R},
    {"ixscan",
     "ixscan: YCSB E through an index, 95% ranges on r (1..100) / 5% "
     "insert, zipfian",
     WL_INDEX, 0, 0, 0.05, 0.95, 0, DIST_ZIPFIAN, 100, IX_R},
    {"ixinsert", "ixinsert: inserts into a collection with 3 indexes", WL_INDEX,
     0, 0, 1, 0, 0, DIST_UNIFORM, 100, IX_R},
};
const size_t kb_nworkloads = sizeof(kb_workloads) / sizeof(kb_workloads[0]);

const struct kb_workload *wl_find(const char *name)
{
	char n[32];
	size_t i;

	for (i = 0; name[i] && i < sizeof(n) - 1; i++)
		n[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32
							       : name[i]);
	n[i] = 0;
	if (strncmp(n, "workload", 8) == 0 && n[8] && !n[9])
		memmove(n, n + 8, 2);
	else if (strncmp(n, "ycsb-", 5) == 0 && n[5] && !n[6])
		memmove(n, n + 5, 2);
	for (i = 0; i < kb_nworkloads; i++)
		if (strcmp(n, kb_workloads[i].name) == 0)
			return &kb_workloads[i];
	return NULL;
}

/* The largest of 1, 2, 4, 8 not above ncpu: the ingest story's 8 clients
 * spread over as many threads as divide them evenly. */
static unsigned ingest_threads(unsigned ncpu)
{
	unsigned t = 8;

	while (t > 1 && t > ncpu)
		t /= 2;
	return t;
}

void wl_defaults(struct kb_config *cfg, unsigned ncpu)
{
	const struct kb_workload *w = cfg->wl;
	struct kb_props *p = &cfg->p;

	/* CoreWorkload's defaults, then the workload file's. */
	*p = (struct kb_props){
	    .recordcount = 100000,
	    .fieldcount = 10,
	    .fieldlength = 100,
	    .minfieldlength = 1,
	    .fieldlengthdistribution = DIST_CONSTANT,
	    .minscanlength = 1,
	    .maxscanlength = w->maxscanlength,
	    .scanlengthdistribution = DIST_UNIFORM,
	    .zeropadding = 1,
	    .readallfields = 1,
	    .zipfianconstant = ZIPFIAN_CONSTANT,
	    .hotspotdatafraction = 0.2,
	    .hotspotopnfraction = 0.8,
	    .exp_percentile = 95,
	    .exp_frac = 0.8571428571,
	    .readproportion = w->read,
	    .updateproportion = w->update,
	    .insertproportion = w->insert,
	    .scanproportion = w->scan,
	    .readmodifywriteproportion = w->rmw,
	    .requestdistribution = w->dist,
	};
	cfg->threads = ncpu;
	cfg->conns = 8;
	cfg->pipeline = 1;
	cfg->do_load = cfg->do_run = 1;
	switch (w->kind) {
	case WL_INGEST:
		cfg->threads = ingest_threads(ncpu);
		cfg->conns = 8 / cfg->threads;
		p->recordcount = 800000; /* 8 clients x 100,000 rows */
		cfg->vmin = cfg->vmax = 50;
		break;
	case WL_UUID:
		cfg->conns = 32;
		p->recordcount = 10000000;
		cfg->vmin = 20;
		cfg->vmax = 200;
		break;
	case WL_INDEX:
		if (strcmp(w->name, "ixrange") == 0)
			p->minscanlength = 100; /* always 100 documents */
		break;
	case WL_GEO:
	case WL_YCSB: break;
	}
}

/* ---- properties ------------------------------------------------------ */

enum prop_type { P_U64, P_UINT, P_DOUBLE, P_BOOL, P_DIST, P_ORDER };

struct prop {
	const char *name;
	enum prop_type type;
	size_t off;
};

#define PROP(name, type)                                                       \
	{                                                                      \
#name, type, offsetof(struct kb_props, name)                   \
	}

static const struct prop props[] = {
    PROP(recordcount, P_U64),
    PROP(operationcount, P_U64),
    PROP(insertstart, P_U64),
    PROP(insertcount, P_U64),
    PROP(fieldcount, P_UINT),
    PROP(fieldlength, P_UINT),
    PROP(minfieldlength, P_UINT),
    PROP(fieldlengthdistribution, P_DIST),
    PROP(readproportion, P_DOUBLE),
    PROP(updateproportion, P_DOUBLE),
    PROP(insertproportion, P_DOUBLE),
    PROP(scanproportion, P_DOUBLE),
    PROP(readmodifywriteproportion, P_DOUBLE),
    PROP(requestdistribution, P_DIST),
    PROP(minscanlength, P_UINT),
    PROP(maxscanlength, P_UINT),
    PROP(scanlengthdistribution, P_DIST),
    {"insertorder", P_ORDER, offsetof(struct kb_props, orderedinserts)},
    PROP(zeropadding, P_UINT),
    PROP(readallfields, P_BOOL),
    PROP(writeallfields, P_BOOL),
    PROP(zipfianconstant, P_DOUBLE),
    PROP(hotspotdatafraction, P_DOUBLE),
    PROP(hotspotopnfraction, P_DOUBLE),
    {"exponential.percentile", P_DOUBLE,
     offsetof(struct kb_props, exp_percentile)},
    {"exponential.frac", P_DOUBLE, offsetof(struct kb_props, exp_frac)},
};
#define NPROPS (sizeof(props) / sizeof(props[0]))

static int parse_value(const struct prop *pr, const char *v, void *dst)
{
	char *end;
	int d;

	errno = 0;
	switch (pr->type) {
	case P_U64:
	case P_UINT: {
		unsigned long long x = strtoull(v, &end, 10);

		if (errno || end == v || *end || *v == '-' ||
		    (pr->type == P_UINT && x > UINT32_MAX))
			return -1;
		if (pr->type == P_U64)
			*(uint64_t *)dst = x;
		else
			*(unsigned *)dst = (unsigned)x;
		return 0;
	}
	case P_DOUBLE:
		*(double *)dst = strtod(v, &end);
		return errno || end == v || *end ? -1 : 0;
	case P_BOOL:
		if (strcmp(v, "true") && strcmp(v, "false"))
			return -1;
		*(int *)dst = strcmp(v, "true") == 0;
		return 0;
	case P_DIST:
		if (dist_parse(v, (enum kb_dist *)&d))
			return -1;
		*(int *)dst = d;
		return 0;
	case P_ORDER:
		if (strcmp(v, "hashed") && strcmp(v, "ordered"))
			return -1;
		*(int *)dst = strcmp(v, "ordered") == 0;
		return 0;
	}
	return -1;
}

int wl_set_prop(struct kb_props *p, const char *nv, char *err, size_t errlen)
{
	const char *eq = strchr(nv, '=');
	size_t n = eq ? (size_t)(eq - nv) : 0;

	for (size_t i = 0; eq && i < NPROPS; i++) {
		if (strlen(props[i].name) != n ||
		    strncmp(props[i].name, nv, n) != 0)
			continue;
		if (parse_value(&props[i], eq + 1, (char *)p + props[i].off)) {
			snprintf(err, errlen, "bad value for %s: '%s'",
				 props[i].name, eq + 1);
			return -1;
		}
		return 0;
	}
	if (eq)
		snprintf(err, errlen, "unknown property '%.*s'", (int)n, nv);
	else
		snprintf(err, errlen, "expected -p name=value, got '%s'", nv);
	return -1;
}

void wl_print_props(const struct kb_config *cfg,
		    void (*emit)(void *, const char *, const char *), void *arg)
{
	for (size_t i = 0; i < NPROPS; i++) {
		const void *f = (const char *)&cfg->p + props[i].off;
		char buf[64];

		switch (props[i].type) {
		case P_U64:
			snprintf(buf, sizeof(buf), "%" PRIu64,
				 *(const uint64_t *)f);
			break;
		case P_UINT:
			snprintf(buf, sizeof(buf), "%u", *(const unsigned *)f);
			break;
		case P_DOUBLE:
			snprintf(buf, sizeof(buf), "%.10g", *(const double *)f);
			break;
		case P_BOOL:
			snprintf(buf, sizeof(buf), "%s",
				 *(const int *)f ? "true" : "false");
			break;
		case P_DIST:
			snprintf(buf, sizeof(buf), "%s",
				 dist_name((enum kb_dist) * (const int *)f));
			break;
		case P_ORDER:
			snprintf(buf, sizeof(buf), "%s",
				 *(const int *)f ? "ordered" : "hashed");
			break;
		}
		emit(arg, props[i].name, buf);
	}
}

static int check_props(const struct kb_props *p, char *err, size_t errlen)
{
	double sum = p->readproportion + p->updateproportion +
		     p->insertproportion + p->scanproportion +
		     p->readmodifywriteproportion;
	const char *why = NULL;

	if (p->recordcount == 0)
		why = "recordcount must be at least 1";
	else if (p->fieldcount == 0 || p->fieldcount > 1000)
		why = "fieldcount must be 1..1000";
	else if (p->fieldlength == 0 || p->minfieldlength > p->fieldlength)
		why = "need 1 <= minfieldlength <= fieldlength";
	else if (p->minscanlength == 0 || p->minscanlength > p->maxscanlength ||
		 p->maxscanlength > 10000)
		why = "need 1 <= minscanlength <= maxscanlength <= 10000";
	else if (!(sum > 0) || p->readproportion < 0 ||
		 p->updateproportion < 0 || p->insertproportion < 0 ||
		 p->scanproportion < 0 || p->readmodifywriteproportion < 0)
		why = "operation proportions must be >= 0 and not all 0";
	else if (!(p->zipfianconstant > 0) || p->zipfianconstant == 1.0)
		why = "zipfianconstant must be > 0 and not 1";
	else if (p->zeropadding > 40)
		why = "zeropadding must be at most 40";
	else if (p->insertstart + p->insertcount > p->recordcount)
		why = "insertstart + insertcount exceeds recordcount";
	else if (p->fieldlengthdistribution == DIST_LATEST ||
		 p->fieldlengthdistribution == DIST_HOTSPOT ||
		 p->fieldlengthdistribution == DIST_SEQUENTIAL ||
		 p->fieldlengthdistribution == DIST_EXPONENTIAL)
		why = "fieldlengthdistribution: constant, uniform or zipfian";
	else if (p->scanlengthdistribution != DIST_UNIFORM &&
		 p->scanlengthdistribution != DIST_ZIPFIAN)
		why = "scanlengthdistribution: uniform or zipfian";
	else if (p->requestdistribution == DIST_CONSTANT)
		why = "requestdistribution cannot be constant";
	if (!why)
		return 0;
	snprintf(err, errlen, "%s", why);
	return -1;
}

int wl_finish(struct kb_config *cfg, char *err, size_t errlen)
{
	struct kb_props *p = &cfg->p;

	if (p->insertcount == 0)
		p->insertcount = p->recordcount - p->insertstart;
	if (cfg->ops)
		p->operationcount = cfg->ops;
	else if (p->operationcount && !cfg->duration)
		cfg->ops = p->operationcount;
	if (cfg->wl->kind == WL_INGEST || cfg->wl->kind == WL_UUID)
		cfg->do_run = 0; /* they are one load */
	if (cfg->wl->kind == WL_INDEX && cfg->verify) {
		snprintf(err, errlen, "--verify: not for the index workloads");
		return -1;
	}
	if (cfg->wl->kind == WL_INDEX && cfg->vmax) {
		snprintf(err, errlen,
			 "index documents: -p fieldlength sets "
			 "their size");
		return -1;
	}
	if (cfg->wl->kind != WL_YCSB && cfg->wl->kind != WL_INDEX) {
		/* Only the proportions and the distribution apply. */
		p->scanproportion = p->insertproportion = 0;
		p->readmodifywriteproportion = 0;
		if (cfg->wl->kind != WL_GEO)
			p->insertproportion = 1;
	}
	if (cfg->vmin > cfg->vmax || cfg->vmax > (64u << 20)) {
		snprintf(err, errlen, "bad --value-size range");
		return -1;
	}
	if (cfg->wl->kind == WL_GEO && cfg->vmax) {
		snprintf(err, errlen, "geo documents have their own size");
		return -1;
	}
	if (cfg->wl->kind == WL_YCSB && cfg->vmax) {
		/* A record of one field of that size, the knob people know
		 * from redis-benchmark -d. */
		p->fieldcount = 1;
		p->fieldlength = cfg->vmax;
		p->minfieldlength = cfg->vmin ? cfg->vmin : 1;
		p->fieldlengthdistribution =
		    cfg->vmin == cfg->vmax ? DIST_CONSTANT : DIST_UNIFORM;
	}
	return check_props(p, err, errlen);
}

/* ---- shared and per-thread state ----------------------------------- */

static size_t ycsb_max_value(const struct kb_props *p)
{
	/* map32 header, then per field a str8 name and a bin32 value. */
	return 5 + (size_t)p->fieldcount * (2 + 16 + 5 + p->fieldlength);
}

int wl_shared_init(struct kb_wshared *ws, const struct kb_config *cfg)
{
	const struct kb_props *p = &cfg->p;
	double w[OP_NTYPES] = {p->readproportion, p->updateproportion,
			       p->insertproportion, p->scanproportion,
			       p->readmodifywriteproportion};
	double sum = 0, acc = 0;

	memset(ws, 0, sizeof(*ws));
	ws->cfg = cfg;
	ws->p = p;
	for (int i = 0; i < OP_NTYPES; i++)
		sum += w[i];
	for (int i = 0; i < OP_NTYPES; i++) {
		acc += w[i] / sum;
		ws->cum[i] = acc;
	}
	/* CoreWorkload: the zipfian key space holds the records plus twice
	 * the inserts expected in operationcount operations. */
	ws->keyspace = p->insertcount;
	if (p->requestdistribution == DIST_ZIPFIAN)
		ws->keyspace += (uint64_t)((double)p->operationcount *
					   p->insertproportion * 2.0);
	ws->load_count = cfg->wl->kind == WL_YCSB || cfg->wl->kind == WL_INDEX
			     ? p->insertcount
			     : p->recordcount;
	switch (cfg->wl->kind) {
	case WL_YCSB: ws->max_value = ycsb_max_value(p); break;
	case WL_GEO: ws->max_value = 512; break;
	case WL_INDEX: ws->max_value = ix_max_value(p); break;
	default: ws->max_value = cfg->vmax;
	}
	ws->rmw_field_seed = cfg->seed * 0x9e3779b97f4a7c15ull + 1;
	ws->fields = cfg->wl->kind == WL_YCSB && cfg->record == RECORD_FIELDS;
	return acked_init(&ws->acked, p->insertstart + p->insertcount);
}

void wl_shared_free(struct kb_wshared *ws)
{
	acked_free(&ws->acked);
}

void wl_thread_init(struct kb_wshared *ws, struct kb_wthread *wt, unsigned idx,
		    unsigned nthreads)
{
	const struct kb_props *p = ws->p;
	uint64_t lo = p->insertstart, n = p->insertcount;
	struct kb_chooser_params cp = {
	    .dist = (enum kb_dist)p->requestdistribution,
	    .lo = lo,
	    .hi = lo + n - 1,
	    .zipf_theta = p->zipfianconstant,
	    .hot_data = p->hotspotdatafraction,
	    .hot_opn = p->hotspotopnfraction,
	    .exp_percentile = p->exp_percentile,
	    .exp_range = (double)p->recordcount * p->exp_frac,
	    .latest_items = acked_last(&ws->acked),
	    .seq = &ws->seq,
	};

	memset(wt, 0, sizeof(*wt));
	if (cp.dist == DIST_ZIPFIAN)
		cp.hi = lo + ws->keyspace - 1;
	chooser_init(&wt->keys, &cp);
	if (p->scanlengthdistribution == DIST_ZIPFIAN)
		zipf_init(&wt->scanlen, p->minscanlength, p->maxscanlength,
			  ZIPFIAN_CONSTANT, -1);
	if (p->fieldlengthdistribution == DIST_ZIPFIAN)
		zipf_init(&wt->fieldlen, p->minfieldlength, p->fieldlength,
			  ZIPFIAN_CONSTANT, -1);
	/* The load phase: an even slice of the records per thread. */
	wt->load_next = ws->load_count * idx / nthreads;
	wt->load_end = ws->load_count * (idx + 1) / nthreads;
}

void wl_conn_init(struct kb_wshared *ws, struct kb_wconn *wc, unsigned gid,
		  unsigned nconns)
{
	wc->client = gid;
	wc->next = 0;
	wc->end = 0;
	if (ws->cfg->wl->kind == WL_INGEST) {
		uint64_t n = ws->p->recordcount;

		/* Rows 0..M-1 of client gid; the first n % C get one more. */
		wc->end = n / nconns + (gid < n % nconns);
	}
}

/* ---- operations ------------------------------------------------------ */

/* YCSB's DiscreteGenerator: the first type whose cumulative share exceeds
 * a uniform draw; rounding can leave the draw above the last share, which
 * then falls to the last type with a share. */
static enum kb_optype choose_type(const struct kb_wshared *ws, struct kb_rng *r)
{
	double u = rng_double(r), prev = 0;
	int last = OP_READ;

	for (int i = 0; i < OP_NTYPES; i++) {
		if (ws->cum[i] <= prev)
			continue;
		if (u < ws->cum[i])
			return (enum kb_optype)i;
		prev = ws->cum[i];
		last = i;
	}
	return (enum kb_optype)last;
}

/* CoreWorkload.nextKeynum: draw until the key is one that exists, i.e. at
 * most the highest acknowledged insert. */
static uint64_t next_keynum(struct kb_wshared *ws, struct kb_wthread *wt,
			    struct kb_rng *r)
{
	uint64_t last = acked_last(&ws->acked), k;

	if (wt->keys.dist == DIST_EXPONENTIAL) {
		do
			k = chooser_next(&wt->keys, r, last);
		while (k > last);
		return last - k;
	}
	do
		k = chooser_next(&wt->keys, r, last);
	while (k > last);
	return k;
}

static unsigned scan_length(const struct kb_wshared *ws, struct kb_wthread *wt,
			    struct kb_rng *r)
{
	const struct kb_props *p = ws->p;

	if (p->scanlengthdistribution == DIST_ZIPFIAN)
		return (unsigned)zipf_next(&wt->scanlen, r, wt->scanlen.items);
	return p->minscanlength +
	       (unsigned)rng_below(r, p->maxscanlength - p->minscanlength + 1);
}

/* The geo load writes every document once, in an order that looks random:
 * i -> (i * P + 7) mod n, a bijection when the prime P does not divide n. */
static uint64_t geo_permute(uint64_t i, uint64_t n)
{
	const uint64_t prime = 1000000007ull;
	uint64_t step = n % prime ? prime % n : 1;

	if (n < 2)
		return 0;
	if (step == 0)
		step = 1;
	return (uint64_t)(((unsigned __int128)i * step + 7) % n);
}

static int load_next(struct kb_wshared *ws, struct kb_wthread *wt,
		     struct kb_wconn *wc, struct kb_rng *r, struct kb_op *op)
{
	op->type = OP_INSERT;
	switch (ws->cfg->wl->kind) {
	case WL_INGEST:
		if (wc->next >= wc->end)
			return 0;
		op->id.hi = wc->client;
		op->id.lo = wc->next++;
		return 1;
	case WL_UUID:
		if (wt->load_next >= wt->load_end)
			return 0;
		wt->load_next++;
		/* Version 4 in bits 48-51 of hi, variant 10 on top of lo. */
		op->id.hi = (rng_next(r) & ~0xf000ull) | 0x4000ull;
		op->id.lo = (rng_next(r) >> 2) | (2ull << 62);
		return 1;
	case WL_GEO:
		if (wt->load_next >= wt->load_end)
			return 0;
		op->id.lo = geo_permute(wt->load_next++, ws->load_count);
		return 1;
	case WL_YCSB:
	case WL_INDEX:
		if (wt->load_next >= wt->load_end)
			return 0;
		op->id.lo = ws->p->insertstart + wt->load_next++;
		return 1;
	}
	return 0;
}

int wl_next(struct kb_wshared *ws, struct kb_wthread *wt, struct kb_wconn *wc,
	    struct kb_rng *r, enum kb_phase phase, struct kb_op *op)
{
	memset(op, 0, sizeof(*op));
	op->rfield = -1;
	if (phase == PHASE_LOAD)
		return load_next(ws, wt, wc, r, op);
	op->type = choose_type(ws, r);
	if (op->type == OP_INSERT) {
		op->id.lo = acked_next(&ws->acked);
		op->insert_num = op->id.lo;
		op->acked_insert = 1;
		return 1;
	}
	op->id.lo = next_keynum(ws, wt, r);
	if (op->type == OP_SCAN)
		op->scan_len = scan_length(ws, wt, r);
	if (op->type == OP_UPDATE || op->type == OP_RMW)
		op->field = (unsigned)rng_below(r, ws->p->fieldcount);
	/* CoreWorkload: with readallfields=false a read (and the read of a
	 * read-modify-write, and a scan) fetches one field chosen uniformly.
	 * Drawn only for records of fields, so --record value draws what it
	 * always drew. */
	if (ws->fields && !ws->p->readallfields &&
	    (op->type == OP_READ || op->type == OP_RMW || op->type == OP_SCAN))
		op->rfield = (int)rng_below(r, ws->p->fieldcount);
	return 1;
}

void wl_done(struct kb_wshared *ws, const struct kb_op *op)
{
	/* YCSB acknowledges an insert whatever its outcome, or "latest"
	 * would stall behind one failure. */
	if (op->acked_insert)
		(void)acked_ack(&ws->acked, op->insert_num);
}

uint64_t wl_keynum(const struct kb_wshared *ws, const struct kb_op *op)
{
	enum kb_wl_kind k = ws->cfg->wl->kind;

	if ((k == WL_YCSB || k == WL_GEO || k == WL_INDEX) &&
	    op->id.lo - ws->p->insertstart < ws->keyspace)
		return op->id.lo - ws->p->insertstart;
	return UINT64_MAX;
}

/* ---- keys ------------------------------------------------------------ */

static size_t uuid_text(const struct kb_key *id, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[16];
	size_t n = 0;

	for (int i = 0; i < 8; i++) {
		b[i] = (uint8_t)(id->hi >> (56 - 8 * i));
		b[8 + i] = (uint8_t)(id->lo >> (56 - 8 * i));
	}
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[n++] = '-';
		buf[n++] = hex[b[i] >> 4];
		buf[n++] = hex[b[i] & 15];
	}
	return n;
}

size_t wl_key(const struct kb_wshared *ws, const struct kb_key *id, char *buf)
{
	const struct kb_props *p = ws->p;
	uint64_t k;
	int n = 0;

	switch (ws->cfg->wl->kind) {
	case WL_YCSB:
		/* CoreWorkload.buildKeyName: "user" + the (hashed) number,
		 * zero-padded to zeropadding digits. */
		k = p->orderedinserts ? id->lo : fnvhash64(id->lo);
		n = snprintf(buf, KB_KEY_MAX, "user%0*" PRIu64,
			     (int)p->zeropadding, k);
		break;
	case WL_INGEST:
		n = snprintf(buf, KB_KEY_MAX, "client%03" PRIu64 "-%010" PRIu64,
			     id->hi, id->lo);
		break;
	case WL_UUID: return uuid_text(id, buf);
	case WL_GEO:
		n = snprintf(buf, KB_KEY_MAX, "geo:%010" PRIu64, id->lo);
		break;
	case WL_INDEX: return ix_key(id->lo, buf);
	}
	return (size_t)n;
}

/* ---- values ---------------------------------------------------------- */

/* msgpack: mpw.h's forms, and the geo document's others. */
static uint8_t *mp_cstr(uint8_t *p, const char *s)
{
	return mpw_str(p, s, strlen(s));
}

static uint8_t *mp_uint(uint8_t *p, uint64_t v)
{
	if (v < 128) {
		*p++ = (uint8_t)v;
		return p;
	}
	*p++ = 0xcf;
	return mpw_be(p, v, 8);
}

static uint8_t *mp_f64(uint8_t *p, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, 8);
	*p++ = 0xcb;
	return mpw_be(p, bits, 8);
}

/* YCSB's RandomByteIterator: characters ' ' + (random & 63). */
static void fill_text(struct kb_rng *r, uint8_t *p, size_t n)
{
	while (n) {
		uint64_t x = rng_next(r);

		for (int i = 0; i < 8 && n; i++, n--, x >>= 8)
			*p++ = (uint8_t)(' ' + (x & 63));
	}
}

/* A YCSB record: every field is a function of (seed, key, field), except
 * the one an update rewrites (or all, with writeallfields), which comes
 * from the thread's random stream. */
static size_t ycsb_value(struct kb_wshared *ws, struct kb_wthread *wt,
			 struct kb_rng *r, const struct kb_op *op, uint8_t *buf)
{
	const struct kb_props *p = ws->p;
	int write = op->type == OP_UPDATE || op->type == OP_RMW;
	uint8_t *q = mpw_map(buf, p->fieldcount);

	for (unsigned f = 0; f < p->fieldcount; f++) {
		struct kb_rng fr, *src = &fr;
		char name[16];
		size_t len;

		if (write && (p->writeallfields || f == op->field))
			src = r;
		else
			rng_seed(&fr, ws->rmw_field_seed ^
					  fnvhash64(op->id.lo * 1024 + f));
		len = rec_field_length(p, &wt->fieldlen, src);
		q = mpw_str(q, name,
			    (size_t)snprintf(name, sizeof(name), "field%u", f));
		q = mpw_bin_hdr(q, len);
		fill_text(src, q, len);
		q += len;
	}
	return (size_t)(q - buf);
}

static const char *const geo_places[][2] = {
    {"FR", "Paris"},   {"DE", "Berlin"},    {"US", "Chicago"},
    {"BR", "Recife"},  {"JP", "Osaka"},	    {"IN", "Pune"},
    {"NG", "Lagos"},   {"AU", "Perth"},	    {"CA", "Montreal"},
    {"ZA", "Durban"},  {"AR", "Cordoba"},   {"SE", "Uppsala"},
    {"KR", "Busan"},   {"MX", "Monterrey"}, {"EG", "Alexandria"},
    {"NZ", "Dunedin"},
};

/* {position:{lat,lon}, radius, cidr, country_code, nearest_city,
 *  timestamp, software_source_version}: the geo story's document. */
static size_t geo_value(struct kb_rng *r, uint8_t *buf)
{
	const char *const *place =
	    geo_places[rng_below(r, sizeof(geo_places) / sizeof(*geo_places))];
	uint64_t x = rng_next(r);
	char text[48];
	uint8_t *q = mpw_map(buf, 7);

	q = mp_cstr(q, "position");
	q = mpw_map(q, 2);
	q = mp_cstr(q, "lat");
	q = mp_f64(q, rng_double(r) * 180.0 - 90.0);
	q = mp_cstr(q, "lon");
	q = mp_f64(q, rng_double(r) * 360.0 - 180.0);
	q = mp_cstr(q, "radius");
	q = mp_uint(q, 10 + rng_below(r, 50000));
	q = mp_cstr(q, "cidr");
	q = mpw_str(q, text,
		    (size_t)snprintf(text, sizeof(text), "%u.%u.%u.0/24",
				     (unsigned)(x & 0xff) | 1,
				     (unsigned)(x >> 8 & 0xff),
				     (unsigned)(x >> 16 & 0xff)));
	q = mp_cstr(q, "country_code");
	q = mp_cstr(q, place[0]);
	q = mp_cstr(q, "nearest_city");
	q = mp_cstr(q, place[1]);
	q = mp_cstr(q, "timestamp");
	q = mp_uint(q, 1600000000 + rng_below(r, 200000000));
	q = mp_cstr(q, "software_source_version");
	q = mpw_str(q, text,
		    (size_t)snprintf(text, sizeof(text), "%u.%u.%u",
				     (unsigned)(x >> 24 & 3) + 1,
				     (unsigned)(x >> 32 & 31),
				     (unsigned)(x >> 40 & 63)));
	return (size_t)(q - buf);
}

size_t wl_value(struct kb_wshared *ws, struct kb_wthread *wt, struct kb_rng *r,
		const struct kb_op *op, uint8_t *buf)
{
	const struct kb_config *cfg = ws->cfg;
	size_t n;

	switch (cfg->wl->kind) {
	case WL_YCSB: return ycsb_value(ws, wt, r, op, buf);
	case WL_GEO: return geo_value(r, buf);
	case WL_INDEX: return ix_value(ws->p, r, op->id.lo, buf);
	case WL_INGEST:
	case WL_UUID: break;
	}
	n = cfg->vmin + rng_below(r, cfg->vmax - cfg->vmin + 1);
	fill_text(r, buf, n);
	return n;
}
