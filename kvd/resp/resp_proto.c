/* resp_proto.c - RESP's entry in the protocol table (proto.h): how the
 * network layer reaches the Redis door. */
#include "resp.h"

static const char resp_busy[] = "-ERR max number of clients reached\r\n";

const struct kvd_proto kvd_resp_proto = {
    .name = "resp",
    .input = kvd_resp_input,
    .wreply = kvd_resp_wreply,
    .open = kvd_resp_conn_open,
    .close = kvd_resp_conn_close,
    .wake = kvd_resp_io_wake,
    .held = kvd_resp_multi_mem,
    .busy = resp_busy,
    .busy_len = sizeof(resp_busy) - 1,
};
