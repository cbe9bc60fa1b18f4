/* json.h - kvcli's small strict JSON reader and writer, base64, and the
 * mapping between JSON documents and msgpack.
 *
 * The reader follows RFC 8259 to the letter (no comments, no trailing
 * commas, UTF-8 only, no lone surrogates) because kvcli load must say
 * "line 17 is malformed" rather than guess.  It does not build a tree: it
 * fills an array of tokens in document order (as jsmn does), each knowing
 * where its subtree ends, so a line costs one pass and no allocation once
 * the array has grown to fit.
 *
 * JSON documents are stored as msgpack, encoded canonically (smallest
 * headers, integers as integers, other numbers as float64), so that
 * kvcli dump can turn stored bytes back into JSON and prove, by encoding
 * that JSON again, that load will restore exactly the same bytes.
 */
#ifndef KVCLI_JSON_H
#define KVCLI_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"

#define JSON_MAX_DEPTH 32 /* as msgpack-c and kv_mp */

enum json_type {
	JSON_NULL,
	JSON_FALSE,
	JSON_TRUE,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_tok {
	uint8_t type;
	uint8_t escaped; /* STRING: holds backslash escapes */
	uint32_t start;	 /* STRING: after the quote; NUMBER: first char */
	uint32_t len;	 /* STRING: raw length between quotes; NUMBER: chars */
	uint32_t n;	 /* ARRAY: items; OBJECT: members */
	uint32_t next;	 /* index of the first token after this subtree */
};

struct json_doc {
	struct json_tok *t;
	uint32_t n, cap;
	const char *err; /* why parsing failed */
	size_t err_at;	 /* byte offset of the failure */
};

/* Parse exactly one JSON value (surrounding white space allowed).  0, or
 * -1 with d->err and d->err_at set (d->err "out of memory" included). */
int json_parse(struct json_doc *d, const char *s, size_t len);
/* The same with up to max_depth containers open at once (at most
 * JSON_MAX_DEPTH + 1): a row of `kvcli load` is an object around a value
 * that may itself be nested JSON_MAX_DEPTH deep. */
int json_parse_depth(struct json_doc *d, const char *s, size_t len,
		     unsigned max_depth);
void json_doc_free(struct json_doc *d);

/* Append the bytes a STRING token stands for (escapes decoded). */
int json_str(const char *s, const struct json_tok *t, struct kv_buf *out);

/* Append token i and its subtree as msgpack; the index after it, or -1
 * (a number out of range, or no memory). */
int64_t json_to_mp(const char *s, const struct json_doc *d, uint32_t i,
		   struct kv_buf *out);

/* Writers: each appends to b (check b->err once at the end). */
void json_put_str(struct kv_buf *b, const void *p, size_t n); /* UTF-8 in */
void json_put_raw(struct kv_buf *b, const char *s);

/* One msgpack object as JSON; -1 if it has no JSON form (bin, ext, a
 * non-string map key, invalid UTF-8, NaN), or is not exactly one object. */
int mp_to_json(struct kv_buf *b, const uint8_t *p, size_t n);

/* The value is a msgpack map or array that load would store from its JSON
 * form byte for byte: 1 (and the JSON appended to b), or 0 (b unchanged). */
int mp_doc_to_json(struct kv_buf *b, const uint8_t *p, size_t n);

int utf8_valid(const void *p, size_t n);

void b64_encode(struct kv_buf *b, const void *p, size_t n);
/* Strict (padding required, no white space); -1 if s is not base64. */
int b64_decode(struct kv_buf *b, const char *s, size_t n);

#endif
