/* ixdocs.c - the indexed-document workloads' documents and requests (see
 * ixdocs.h). */
#include "ixdocs.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mpw.h"

uint64_t ix_kcount(const struct kb_props *p)
{
	uint64_t n = p->recordcount / IX_PER_K;

	return n ? n : 1;
}

int64_t ix_k(const struct kb_props *p, uint64_t i)
{
	return (int64_t)(i % ix_kcount(p));
}

/* 40 bits: an int64 in every store, and room for ten million documents
 * with a few dozen collisions at most. */
int64_t ix_r(uint64_t i)
{
	return (int64_t)(fnvhash64(i) >> 24);
}

size_t ix_key(uint64_t i, char *buf)
{
	return (size_t)snprintf(buf, KB_KEY_MAX, "ix%010" PRIu64, i);
}

/* msgpack's uint 64, or a positive fixint: what mongo_conv.c and pgdoc.c
 * read as integers. */
static uint8_t *mp_int(uint8_t *q, int64_t v)
{
	if (v >= 0 && v < 128) {
		*q++ = (uint8_t)v;
		return q;
	}
	*q++ = 0xcf;
	return mpw_be(q, (uint64_t)v, 8);
}

static uint8_t *mp_name(uint8_t *q, const char *s)
{
	return mpw_str(q, s, strlen(s));
}

/* Printable characters that need no escaping in JSON or anywhere else:
 * the pad is ballast, not a test of the encoders. */
static void fill_pad(struct kb_rng *r, uint8_t *q, size_t n)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
				  "QRSTUVWXYZ0123456789-_";

	while (n) {
		uint64_t x = rng_next(r);

		for (int j = 0; j < 8 && n; j++, n--, x >>= 8)
			*q++ = (uint8_t)set[(x & 0xff) % 64];
	}
}

size_t ix_value(const struct kb_props *p, struct kb_rng *r, uint64_t i,
		uint8_t *buf)
{
	char s[24];
	uint8_t *q = mpw_map(buf, 4);

	q = mp_name(q, "k");
	q = mp_int(q, ix_k(p, i));
	q = mp_name(q, "r");
	q = mp_int(q, ix_r(i));
	q = mp_name(q, "s");
	q = mpw_str(q, s,
		    (size_t)snprintf(s, sizeof(s), "%016" PRIx64,
				     fnvhash64(i ^ 0x5bd1e995u)));
	q = mp_name(q, "pad");
	*q++ = 0xdb; /* str32: fieldlength is the user's */
	q = mpw_be(q, p->fieldlength, 4);
	fill_pad(r, q, p->fieldlength);
	return (size_t)(q + p->fieldlength - buf);
}

size_t ix_max_value(const struct kb_props *p)
{
	/* map, k and r (2 + 9 each), s (2 + 17), pad (4 + 5 + length) */
	return 1 + 11 + 11 + 19 + 9 + (size_t)p->fieldlength;
}

void ix_req(struct kb_wshared *ws, struct kb_rng *r, const struct kb_op *op,
	    char *kbuf, uint8_t *vbuf, struct kb_req *req)
{
	const struct kb_props *p = ws->p;
	uint64_t i = op->id.lo;

	memset(req, 0, sizeof(*req));
	req->key = kbuf;
	req->klen = ix_key(i, kbuf);
	req->field = ws->cfg->wl->ixfield;
	switch (op->type) {
	case OP_INSERT:
		req->kind = REQ_IXINSERT;
		req->val = vbuf;
		req->vlen = ix_value(p, r, i, vbuf);
		break;
	case OP_SCAN:
		req->kind = REQ_IXRANGE;
		req->field = IX_R;
		req->ival = ix_r(i);
		req->count = op->scan_len;
		break;
	default:
		req->kind = REQ_IXFIND;
		req->ival = req->field == IX_K ? ix_k(p, i) : ix_r(i);
		break;
	}
}
