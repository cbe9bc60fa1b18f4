/* record.c - the bytes of YCSB's fields and the one-value form of a record
 * (see record.h). */
#include "record.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mpw.h"

size_t kb_field_name(unsigned idx, char *buf)
{
	return (size_t)snprintf(buf, KB_FIELD_NAME_MAX, "field%u", idx);
}

int rec_field_index(const char *name, size_t len, unsigned *idx)
{
	unsigned v = 0;

	if (len < 6 || len > 10 || memcmp(name, "field", 5) ||
	    (name[5] == '0' && len > 6))
		return -1;
	for (size_t i = 5; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(name[i] - '0');
	}
	*idx = v;
	return 0;
}

size_t rec_field_length(const struct kb_props *p, const struct kb_zipf *lenz,
			struct kb_rng *r)
{
	switch (p->fieldlengthdistribution) {
	case DIST_UNIFORM:
		return p->minfieldlength +
		       rng_below(r, p->fieldlength - p->minfieldlength + 1);
	case DIST_ZIPFIAN:
		/* items == countforzeta: the generator is only read */
		return zipf_next((struct kb_zipf *)lenz, r, lenz->items);
	default: return p->fieldlength;
	}
}

/* MurmurHash3's finaliser: every input bit moves every output bit. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* What the generation is XORed with in the first characters: a function
 * of the record and field only, so that it can be undone before the
 * generation is known; the characters then look as random as the rest. */
static uint64_t gen_mask(uint64_t k, unsigned f)
{
	return mix(mix(k) + f + 0x5bd1e9955bd1e995ull);
}

/* Generation g of field f of record k: into out, or compared with want
 * (its length wlen); the length, or SIZE_MAX when want differs. */
static size_t field_bytes(const struct kb_props *p, const struct kb_zipf *lenz,
			  uint64_t k, unsigned f, uint32_t g, uint8_t *out,
			  const uint8_t *want, size_t wlen)
{
	uint64_t mask = gen_mask(k, f), x = 0;
	unsigned left = 0;
	struct kb_rng r;
	size_t len;

	rng_seed(&r, mix(k ^ mix(((uint64_t)f << 32) | g)));
	len = rec_field_length(p, lenz, &r);
	if (want && wlen != len)
		return SIZE_MAX;
	for (size_t i = 0; i < len; i++) {
		uint8_t c;

		if (i < REC_GEN_CHARS) {
			c = (uint8_t)(' ' +
				      (((g >> (6 * i)) ^ (mask >> (6 * i))) &
				       63));
		} else {
			if (!left) {
				x = rng_next(&r);
				left = 8;
			}
			c = (uint8_t)(' ' + (x & 63));
			x >>= 8;
			left--;
		}
		if (out)
			out[i] = c;
		else if (want[i] != c)
			return SIZE_MAX;
	}
	return len;
}

size_t rec_value(const struct kb_props *p, const struct kb_zipf *lenz,
		 uint64_t k, unsigned f, uint32_t g, uint8_t *out)
{
	return field_bytes(p, lenz, k, f, g, out, NULL, 0);
}

int rec_generation(uint64_t k, unsigned f, const uint8_t *v, size_t len,
		   uint32_t *g, unsigned *bits)
{
	uint64_t mask = gen_mask(k, f), acc = 0;
	size_t n = len < REC_GEN_CHARS ? len : REC_GEN_CHARS;

	if (!len)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < ' ' || v[i] >= ' ' + 64)
			return -1;
		acc |= (uint64_t)(((unsigned)(v[i] - ' ') ^ (mask >> (6 * i))) &
				  63)
		       << (6 * i);
	}
	if (acc >> 32)
		return -1; /* 36 bits carry a 32-bit generation */
	*g = (uint32_t)acc;
	*bits = n == REC_GEN_CHARS ? 32 : (unsigned)(6 * n);
	return 0;
}

int rec_is(const struct kb_props *p, const struct kb_zipf *lenz, uint64_t k,
	   unsigned f, uint32_t g, const uint8_t *v, size_t len)
{
	return field_bytes(p, lenz, k, f, g, NULL, v, len) != SIZE_MAX;
}

size_t rec_encoded_max(const struct kb_props *p)
{
	/* map32 header, then per field a str8 name and a bin32 value. */
	return 5 + (size_t)p->fieldcount *
		       (2 + KB_FIELD_NAME_MAX + 5 + p->fieldlength);
}

size_t rec_encode(const struct kb_fval *fv, unsigned n, uint8_t *out)
{
	uint8_t *q = mpw_map(out, n);

	for (unsigned i = 0; i < n; i++) {
		char name[KB_FIELD_NAME_MAX];

		q = mpw_str(q, name, kb_field_name(fv[i].idx, name));
		q = mpw_bin_hdr(q, fv[i].len);
		memcpy(q, fv[i].val, fv[i].len);
		q += fv[i].len;
	}
	return (size_t)(q - out);
}

/* ---- decoding -------------------------------------------------------- */

struct rd {
	const uint8_t *p, *end;
};

static int rd_be(struct rd *r, int bytes, uint64_t *v)
{
	if (r->end - r->p < bytes)
		return -1;
	*v = 0;
	for (int i = 0; i < bytes; i++)
		*v = *v << 8 | *r->p++;
	return 0;
}

/* A str or bin: its bytes. */
static int rd_bytes(struct rd *r, const uint8_t **s, size_t *n)
{
	uint64_t len;
	uint8_t t;

	if (r->p >= r->end)
		return -1;
	t = *r->p++;
	if ((t & 0xe0) == 0xa0)
		len = t & 31;
	else if ((t == 0xd9 || t == 0xc4) && !rd_be(r, 1, &len))
		;
	else if ((t == 0xda || t == 0xc5) && !rd_be(r, 2, &len))
		;
	else if ((t == 0xdb || t == 0xc6) && !rd_be(r, 4, &len))
		;
	else
		return -1;
	if ((uint64_t)(r->end - r->p) < len)
		return -1;
	*s = r->p;
	*n = (size_t)len;
	r->p += len;
	return 0;
}

int rec_decode(const uint8_t *buf, size_t len, struct kb_fval *out,
	       unsigned max)
{
	struct rd r = {buf, buf + len};
	uint64_t n;
	uint8_t t;

	if (!len)
		return -1;
	t = *r.p++;
	if ((t & 0xf0) == 0x80)
		n = t & 15;
	else if (!(t == 0xde   ? rd_be(&r, 2, &n)
		   : t == 0xdf ? rd_be(&r, 4, &n)
			       : -1))
		;
	else
		return -1;
	if (n > max)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *name;
		size_t nlen;

		if (rd_bytes(&r, &name, &nlen) ||
		    rec_field_index((const char *)name, nlen, &out[i].idx) ||
		    rd_bytes(&r, &out[i].val, &out[i].len))
			return -1;
	}
	return r.p == r.end ? (int)n : -1;
}
