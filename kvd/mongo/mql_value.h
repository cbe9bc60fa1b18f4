/* mql_value.h - BSON values as MongoDB compares, hashes and checks them:
 * the cross-type sort order, numeric equality across int32, int64, double
 * and decimal128, and the bounds every other part of kvd/mongo relies on.
 *
 * Values are libbson's bson_value_t, as bson_iter_value() returns them:
 * strings, documents and arrays point into the caller's buffer, which must
 * stay alive while the value is used.  Nothing here allocates or copies;
 * nothing here keeps a pointer after it returns.
 *
 * Order (MongoDB's canonical type order, "Comparison/Sort Order"):
 *   MinKey < undefined < null < numbers < string, symbol < object < array
 *   < binData < ObjectId < bool < date < timestamp < regex < dbPointer
 *   < javascript < javascriptWithScope < MaxKey
 * Within a type: numbers by value (NaN below every other number and equal
 * to itself; -0 equals 0; decimal128 compared exactly against doubles and
 * integers), strings by bytes (no collation), documents and arrays element
 * by element (type rank, then field name, then value; the shorter one
 * first on a common prefix), binData by length then subtype then bytes,
 * ObjectId by bytes, false < true, dates as signed milliseconds,
 * timestamps as unsigned (seconds, increment), regexes by pattern then
 * flags.
 *
 * Every value given to these calls must come from BSON that passed
 * mql_bson_check() (or was built by libbson): the comparisons recurse
 * into documents, and the check is what bounds their depth.
 */
#ifndef KVD_MONGO_MQL_VALUE_H
#define KVD_MONGO_MQL_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "mql_error.h"

/* MongoDB's BSONObjMaxUserSize: the largest document a write may store. */
#define MQL_MAX_DOC_SIZE (16 * 1024 * 1024)
/* MongoDB's BSONObjMaxInternalSize: the largest command it accepts (the
 * document plus room for the command around it). */
#define MQL_MAX_INPUT_SIZE (MQL_MAX_DOC_SIZE + 16 * 1024)
/* Nesting: stored documents at most 100 levels (MongoDB's limit for user
 * documents), any other BSON (filters, updates, pipelines) at most 200
 * (BSONDepth::kDefaultMaxAllowableDepth).  The top document is level 1. */
#define MQL_MAX_DOC_DEPTH 100
#define MQL_MAX_INPUT_DEPTH 200

/* mql_bson_check - check data[0..len) as one BSON document: its length
 * header equals len, len <= max_size, every element and nested document
 * is well formed (lengths inside their parents, terminators in place),
 * every array's keys are "0", "1", ... in order, and it nests at most
 * max_depth levels.  Iterative: a document nested past
 * max_depth is refused without recursing into it.
 * Returns 0, or -1 with err set:
 *   22 InvalidBSON          malformed
 *   10334 BSONObjectTooLarge  len > max_size
 *   15 Overflow             deeper than max_depth */
int mql_bson_check(const uint8_t *data, size_t len, size_t max_size,
		   int max_depth, struct mql_error *err);

/* mql_type_rank - MongoDB's canonical rank of a type (numbers share one,
 * string and symbol share one; undefined ranks just below null). */
int mql_type_rank(bson_type_t t);

/* mql_value_cmp - total order of two values: <0, 0 or >0. */
int mql_value_cmp(const bson_value_t *a, const bson_value_t *b);

/* mql_value_eq - MongoDB's equality: mql_value_cmp() == 0 (so 1, 1.0,
 * NumberLong(1) and NumberDecimal("1.00") are all equal; "a" equals
 * Symbol("a")). */
bool mql_value_eq(const bson_value_t *a, const bson_value_t *b);

/* mql_doc_cmp - mql_value_cmp of two documents given as raw BSON (their
 * element sequences compared the same way as nested documents). */
int mql_doc_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b,
		uint32_t blen);

/* mql_value_hash - a 64-bit hash such that mql_value_eq(a, b) implies
 * equal hashes (numbers hash by the nearest double). */
uint64_t mql_value_hash(const bson_value_t *v);

/* mql_is_number - int32, int64, double or decimal128. */
bool mql_is_number(const bson_value_t *v);

/* mql_number_double - the nearest double of a number (0 for others). */
double mql_number_double(const bson_value_t *v);

/* mql_number_isnan - a double or decimal128 NaN. */
bool mql_number_isnan(const bson_value_t *v);

/* mql_type_name - MongoDB's alias of a type ("double", "string",
 * "object", "array", "binData", "undefined", "objectId", "bool", "date",
 * "null", "regex", "dbPointer", "javascript", "symbol",
 * "javascriptWithScope", "int", "timestamp", "long", "decimal", "minKey",
 * "maxKey"), the names $type accepts and errors print. */
const char *mql_type_name(bson_type_t t);

/* mql_value_str - v as relaxed extended JSON for an error message, cut to
 * fit buf (at most n - 1 bytes and a NUL; "..." ends a cut string).
 * Returns buf. */
char *mql_value_str(const bson_value_t *v, char *buf, size_t n);

/* mql_doc_str - the same for a whole document given as raw BSON. */
char *mql_doc_str(const uint8_t *data, uint32_t len, char *buf, size_t n);

#endif
