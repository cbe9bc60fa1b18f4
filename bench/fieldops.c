/* fieldops.c - YCSB's operations on records of fields, natively or over
 * one value per record, and their --verify (see fieldops.h). */
#include "fieldops.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

#define UNTRACKED UINT32_MAX  /* a write fstate could not follow */
#define RECORD_FIELD UINT_MAX /* a whole record found wrong */

int fo_init(struct fo_thread *ft, struct kb_wshared *ws,
	    const struct kb_wthread *wt, struct kb_rng *rng, int native,
	    struct fst_table *fst, struct kb_vlog *vlog, int verify)
{
	const struct kb_props *p = ws->p;

	memset(ft, 0, sizeof(*ft));
	ft->p = p;
	ft->ws = ws;
	ft->wt = wt;
	ft->rng = rng;
	ft->native = native;
	ft->fst = native && verify ? fst : NULL;
	ft->vlog = native || !verify ? NULL : vlog;
	ft->verify = verify;
	ft->nf = p->fieldcount;
	ft->fv = calloc(ft->nf, sizeof(*ft->fv));
	ft->dec = calloc(ft->nf, sizeof(*ft->dec));
	ft->fdata = malloc((size_t)ft->nf * p->fieldlength);
	ft->vbuf = malloc(rec_encoded_max(p));
	ft->seen = calloc(ft->nf, 1);
	return ft->fv && ft->dec && ft->fdata && ft->vbuf && ft->seen ? 0 : -1;
}

void fo_free(struct fo_thread *ft)
{
	free(ft->fv);
	free(ft->dec);
	free(ft->fdata);
	free(ft->vbuf);
	free(ft->seen);
}

int fo_slot_init(const struct fo_thread *ft, struct fo_slot *fs)
{
	memset(fs, 0, sizeof(*fs));
	if (!ft->fst)
		return 0;
	fs->gen = calloc(ft->nf, sizeof(*fs->gen));
	fs->pfx = calloc(ft->nf, sizeof(*fs->pfx));
	fs->snap = calloc(ft->nf, sizeof(*fs->snap));
	return fs->gen && fs->pfx && fs->snap ? 0 : -1;
}

void fo_slot_free(struct fo_slot *fs)
{
	free(fs->gen);
	free(fs->pfx);
	free(fs->snap);
}

/* An update that writes every field needs nothing read first. */
static int writes_all(const struct fo_thread *ft, const struct kb_op *op)
{
	return op->type == OP_INSERT || ft->p->writeallfields || ft->nf == 1;
}

unsigned fo_steps(const struct fo_thread *ft, const struct kb_op *op)
{
	if (op->type == OP_RMW)
		return 2;
	if (op->type == OP_UPDATE && !ft->native && !writes_all(ft, op))
		return 2;
	return 1;
}

static int is_write(const struct fo_thread *ft, const struct kb_op *op,
		    unsigned step)
{
	return op->type == OP_INSERT ||
	       ((op->type == OP_UPDATE || op->type == OP_RMW) &&
		step + 1 == fo_steps(ft, op));
}

/* The field of the i-th value a write carries. */
static unsigned written_field(const struct fo_thread *ft,
			      const struct kb_op *op, const struct fo_slot *fs,
			      unsigned i)
{
	return fs->nw == ft->nf ? i : op->field;
}

/* The fields op writes, with fresh generations, into ft->fv. */
static void new_fields(struct fo_thread *ft, const struct kb_op *op,
		       struct fo_slot *fs)
{
	int insert = op->type == OP_INSERT;
	uint64_t k = op->id.lo;

	fs->nw = writes_all(ft, op) ? ft->nf : 1;
	for (unsigned i = 0; i < fs->nw; i++) {
		unsigned f = written_field(ft, op, fs, i);
		uint32_t g = 0, pfx = UNTRACKED;
		uint8_t *buf = ft->fdata + (size_t)i * ft->p->fieldlength;

		if (ft->fst && fst_send(ft->fst, k, f, insert, &g, &pfx))
			pfx = UNTRACKED;
		if (pfx == UNTRACKED)
			/* The load writes generation 1, as every load does;
			 * updates untracked a random one. */
			g = insert ? 1
				   : 2 + (uint32_t)rng_below(ft->rng, 1u << 31);
		if (ft->fst) {
			fs->gen[i] = g;
			fs->pfx[i] = pfx;
		}
		ft->fv[i] = (struct kb_fval){
		    f, buf, rec_value(ft->p, &ft->wt->fieldlen, k, f, g, buf)};
	}
}

/* Emulated: the record read by step 0 (prev) with op's fields replaced,
 * encoded into ft->vbuf; its length, or 0 when prev is not a record. */
static size_t merged_record(struct fo_thread *ft, const struct kb_op *op,
			    const struct kb_reply *prev, struct fo_slot *fs)
{
	int n = prev ? rec_decode(prev->val, prev->vlen, ft->dec, ft->nf) : -1;
	unsigned m;

	if (n < 0)
		return 0;
	new_fields(ft, op, fs);
	m = (unsigned)n;
	for (unsigned i = 0; i < fs->nw; i++) {
		unsigned j = 0;

		while (j < m && ft->dec[j].idx != ft->fv[i].idx)
			j++;
		if (j == m) {
			if (m == ft->nf)
				return 0;
			m++;
		}
		ft->dec[j] = ft->fv[i];
	}
	return rec_encode(ft->dec, m, ft->vbuf);
}

/* A write: native UPDATE or INSERT, emulated PUT. */
static int build_write(struct fo_thread *ft, const struct kb_op *op,
		       unsigned step, const struct kb_reply *prev,
		       struct fo_slot *fs, struct kb_req *req)
{
	if (ft->native) {
		new_fields(ft, op, fs);
		req->kind = op->type == OP_INSERT ? REQ_INSERT : REQ_UPDATE;
		req->fv = ft->fv;
		req->nfv = fs->nw;
		return 0;
	}
	req->kind = REQ_PUT;
	req->val = ft->vbuf;
	if (step == 0) {
		new_fields(ft, op, fs);
		req->vlen = rec_encode(ft->fv, fs->nw, ft->vbuf);
	} else if (!(req->vlen = merged_record(ft, op, prev, fs))) {
		return -1;
	}
	if (ft->vlog)
		fs->vhash = verify_hash(req->val, req->vlen);
	return 0;
}

int fo_build(struct fo_thread *ft, const struct kb_op *op, unsigned step,
	     const struct kb_reply *prev, struct fo_slot *fs, char *kbuf,
	     struct kb_req *req)
{
	memset(req, 0, sizeof(*req));
	req->key = kbuf;
	req->klen = wl_key(ft->ws, &op->id, kbuf);
	req->field = op->rfield;
	if (is_write(ft, op, step))
		return build_write(ft, op, step, prev, fs, req);
	if (op->type == OP_SCAN) {
		req->kind = ft->native ? REQ_FSCAN : REQ_SCAN;
		req->count = op->scan_len;
		return 0;
	}
	/* A read: of the run (or step 0 of an update), or the read-back. */
	if (op->type == OP_VERIFY)
		req->field = -1;
	req->kind = ft->native ? REQ_READ : REQ_GET;
	if (ft->fst && op->type != OP_VERIFY)
		fst_snapshot(ft->fst, op->id.lo, req->field, fs->snap);
	return 0;
}

/* ---- checking -------------------------------------------------------- */

static int why_of(enum fst_verdict v)
{
	return v == FST_OK ? 0 : v == FST_STALE ? FWHY_STALE : FWHY_CORRUPT;
}

/* Native: the fields of a reply against their snapshots (snap == NULL:
 * the state now, for the read-back); 1 if one was wrong. */
static int check_fields(struct fo_thread *ft, const struct kb_op *op, int field,
			const uint64_t *snap, const struct kb_reply *r,
			struct kb_vcount *vc, int in_run)
{
	uint64_t k = op->id.lo, now;
	int bad = 0;

	memset(ft->seen, 0, ft->nf);
	for (unsigned i = 0; i < r->nfields; i++) {
		const struct kb_fval *fv = &r->fields[i];
		int why = FWHY_CORRUPT;

		if (fv->idx < ft->nf &&
		    (field < 0 || fv->idx == (unsigned)field) &&
		    !ft->seen[fv->idx]) {
			ft->seen[fv->idx] = 1;
			if (!snap)
				fst_snapshot(ft->fst, k, (int)fv->idx, &now);
			why = why_of(fst_check(
			    ft->fst, ft->p, &ft->wt->fieldlen, k, fv->idx,
			    snap ? snap[field < 0 ? fv->idx : 0] : now, fv->val,
			    fv->len));
		}
		verify_field(vc, &op->id, fv->idx, why, in_run);
		bad |= why != 0;
	}
	for (unsigned f = 0; field < 0 && f < ft->nf; f++) {
		if (ft->seen[f])
			continue;
		if (!snap)
			fst_snapshot(ft->fst, k, (int)f, &now);
		if ((snap ? snap[f] : now) & FST_ACKED) {
			verify_field(vc, &op->id, f, FWHY_MISSING, in_run);
			bad = 1;
		}
	}
	return bad;
}

/* Emulated: the fields of a record read whole are bytes some write sent
 * (the record itself is judged by verify_check); 1 if not. */
static int check_record(struct fo_thread *ft, const struct kb_op *op,
			const struct kb_reply *r, struct kb_vcount *vc,
			int in_run)
{
	int n = rec_decode(r->val, r->vlen, ft->dec, ft->nf), bad = 0;

	if (n < 0) {
		verify_field(vc, &op->id, RECORD_FIELD, FWHY_CORRUPT, in_run);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		const struct kb_fval *fv = &ft->dec[i];
		uint32_t g;
		unsigned bits;
		int ok =
		    fv->idx < ft->nf &&
		    !rec_generation(op->id.lo, fv->idx, fv->val, fv->len, &g,
				    &bits) &&
		    (bits < 32 || rec_is(ft->p, &ft->wt->fieldlen, op->id.lo,
					 fv->idx, g, fv->val, fv->len));

		verify_field(vc, &op->id, fv->idx, ok ? 0 : FWHY_CORRUPT,
			     in_run);
		bad |= !ok;
	}
	return bad;
}

void fo_reply(struct fo_thread *ft, const struct kb_op *op, unsigned step,
	      struct fo_slot *fs, const struct kb_reply *r, uint64_t sent,
	      uint64_t now)
{
	if (!ft->verify || op->type == OP_SCAN)
		return;
	if (is_write(ft, op, step)) {
		for (unsigned i = 0; ft->fst && i < fs->nw; i++)
			if (fs->pfx[i] != UNTRACKED)
				fst_done(ft->fst, op->id.lo,
					 written_field(ft, op, fs, i),
					 fs->pfx[i], r->status == REPLY_OK);
		if (ft->vlog && r->status == REPLY_OK)
			vlog_push(ft->vlog, &op->id, fs->vhash, sent, now);
		return;
	}
	if (r->status != REPLY_OK)
		return;
	if (ft->native)
		check_fields(ft, op, op->rfield, fs->snap, r, &ft->reads, 1);
	else
		check_record(ft, op, r, &ft->reads, 1);
}

void fo_audit(struct fo_thread *ft, const struct kb_op *op,
	      const struct kb_reply *r, const struct kb_vtable *vt, size_t idx,
	      struct kb_vcount *vc)
{
	if (!ft->native) {
		verify_check(vt, idx, r->status, r->val, r->vlen, vc);
		if (r->status == REPLY_OK)
			check_record(ft, op, r, vc, 0);
		return;
	}
	if (r->status == REPLY_ERROR) {
		vc->errors++;
	} else if (r->status == REPLY_NOT_FOUND) {
		if (vc->nlost_ids < VERIFY_SAMPLES)
			vc->lost_ids[vc->nlost_ids++] = op->id;
		vc->lost++;
	} else if (check_fields(ft, op, -1, NULL, r, vc, 0)) {
		if (vc->nbad_ids < VERIFY_SAMPLES)
			vc->bad_ids[vc->nbad_ids++] = op->id;
		vc->mismatched++;
	} else {
		vc->ok++;
	}
}
