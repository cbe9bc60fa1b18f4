/* record.h - YCSB's records of fields: the bytes of each field, and the
 * one-value encoding for stores that have no fields.
 *
 * A field's bytes are YCSB's characters (' ' + a 6-bit number), made from
 * (record number, field, generation): every write of a field gets a new
 * generation, and its first characters carry it, so a value read back
 * names the write it came from and --verify can tell a current field from
 * a stale one without keeping the bytes (fstate.c).  The bytes do not
 * depend on --seed: a run phase checks what another process loaded.
 */
#ifndef KB_RECORD_H
#define KB_RECORD_H

#include "kvbench.h"
#include "ycsb.h"

/* Characters of a field that carry its generation: 6 x 6 bits. */
#define REC_GEN_CHARS 6

/* A field's length under fieldlengthdistribution (lenz: the thread's
 * zipfian generator of lengths, for "zipfian"). */
size_t rec_field_length(const struct kb_props *p, const struct kb_zipf *lenz,
			struct kb_rng *r);

/* Generation g of field f of record k into out (fieldlength bytes at
 * most); its length. */
size_t rec_value(const struct kb_props *p, const struct kb_zipf *lenz,
		 uint64_t k, unsigned f, uint32_t g, uint8_t *out);

/* Read the generation a field's bytes carry: 0 with *g and *bits (the
 * generation's low bits known: 32, or 6 per character of a field shorter
 * than REC_GEN_CHARS), -1 if they cannot be any write's. */
int rec_generation(uint64_t k, unsigned f, const uint8_t *v, size_t len,
		   uint32_t *g, unsigned *bits);

/* Whether v is exactly generation g of field f of record k. */
int rec_is(const struct kb_props *p, const struct kb_zipf *lenz, uint64_t k,
	   unsigned f, uint32_t g, const uint8_t *v, size_t len);

/* "field<n>" -> n; -1 if name is not one. */
int rec_field_index(const char *name, size_t len, unsigned *idx);

/* The whole record as one msgpack map {"field0": bin, ...} (the form of
 * --record value, so either mode's records read alike); its length. */
size_t rec_encode(const struct kb_fval *fv, unsigned n, uint8_t *out);
size_t rec_encoded_max(const struct kb_props *p);

/* Such a map into out (max entries; the values point into buf): the
 * number of fields, or -1 if buf is not one. */
int rec_decode(const uint8_t *buf, size_t len, struct kb_fval *out,
	       unsigned max);

#endif
