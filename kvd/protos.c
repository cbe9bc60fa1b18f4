/* protos.c - the protocol table by id (proto.h): the one place that names
 * every protocol the network layer serves. */
#include "net/proto.h"

const struct kvd_proto *const kvd_protos[KVD_NPROTO] = {
    [KVD_PROTO_NATIVE] = &kvd_native_proto,
    [KVD_PROTO_RESP] = &kvd_resp_proto,
    [KVD_PROTO_HTTP] = &kvd_http_proto,
    [KVD_PROTO_MONGO] = &kvd_mongo_proto,
};
