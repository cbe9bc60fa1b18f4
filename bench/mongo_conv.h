/* mongo_conv.h - kvbench's values as MongoDB documents and back, for the
 * MongoDB drivers' put and get (driver_mongo.c, driver_mongowire.c), and
 * the index workloads' createIndexes, which both drivers send.  A value
 * that is one msgpack map becomes the document it is; any other, {_id,
 * value: BinData}.
 * The way back writes the msgpack forms kvbench's own writers use (mpw.h),
 * so that the bytes read are the bytes written and --verify can compare
 * them. */
#ifndef KB_MONGO_CONV_H
#define KB_MONGO_CONV_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

/* The document of value v under _id key; NULL when out of memory. */
bson_t *mconv_value_doc(const char *key, size_t klen, const uint8_t *v,
			size_t vlen);

/* Document d's value into *buf (grown as needed, *cap its size), its
 * length in *len: 0, or -1 when d holds what no value becomes. */
int mconv_doc_value(const bson_t *d, uint8_t **buf, size_t *cap, size_t *len);

/* Into cmd: {createIndexes: coll, indexes: [k_1, r_1, s_1]}, the index
 * workloads' three secondary indexes (ixdocs.h). */
void mconv_ix_create(bson_t *cmd, const char *coll);

#endif
