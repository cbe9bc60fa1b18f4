/* pgdoc.h - YCSB records as JSON objects, for the postgres driver's
 * --record doc (a jsonb document per record): {"field0": "...", ...}.
 * A field's characters are YCSB's (' ' to '_'), of which '"' and '\' need
 * escaping; the decoder takes PostgreSQL's jsonb output, whose strings
 * escape those and control characters only. */
#ifndef KB_PGDOC_H
#define KB_PGDOC_H

#include <stddef.h>
#include <stdint.h>

#include "kvbench.h"

/* The JSON object of n fields into out (pgdoc_max bytes); its length. */
size_t pgdoc_encode(const struct kb_fval *fv, unsigned n, char *out);
size_t pgdoc_max(const struct kb_fval *fv, unsigned n);

/* An object of string members into out (max entries, a member not named
 * fieldN gets idx UINT_MAX); the values unescaped into scratch (len bytes
 * at least), which they point into.  The number of members, or -1 when
 * json is not such an object. */
int pgdoc_decode(const char *json, size_t len, struct kb_fval *out,
		 unsigned max, char *scratch);

/* A value of kvbench's (a msgpack map: the geo workload's document, a
 * --record value record) as a JSON object into out (pgdoc_value_max(vlen)
 * bytes at least): strings and binaries as strings (a byte outside ' '..'~'
 * as \u00XX), integers, doubles, maps as objects.  Its length, or -1 when
 * the value is no map or not one of those forms. */
long pgdoc_from_value(const uint8_t *val, size_t vlen, char *out);
size_t pgdoc_value_max(size_t vlen);

#endif
