/* kv_status_list.h - the status table itself, and nothing else.
 *
 * Kept apart from kv_status.h so that libkvclient's public header can expand
 * the very same list into its own names (KVC_*) and ship it when installed
 * (as kvclient/kv_status_list.h): one table for server, library and tools.
 * This file must define KV_STATUS_LIST and no other name.
 */
#ifndef KV_STATUS_LIST_H
#define KV_STATUS_LIST_H

/* X(NAME, number, text) */
#define KV_STATUS_LIST(X)                                                      \
	X(OK, 0, "ok")                                                         \
	X(NOT_FOUND, 1, "key not found")                                       \
	X(EXISTS, 2, "key already exists")                                     \
	X(CHECK_FAILED, 3,                                                     \
	  "a transaction's check did not hold: nothing was applied")           \
	X(MALFORMED, 10, "malformed request")                                  \
	X(UNKNOWN_OP, 11, "unknown operation")                                 \
	X(BAD_ARGS, 12, "wrong number or type of arguments")                   \
	X(KEY_TOO_LARGE, 13, "key too large")                                  \
	X(VALUE_TOO_LARGE, 14, "value too large")                              \
	X(FRAME_TOO_LARGE, 15, "frame too large")                              \
	X(NOT_INTEGER, 16, "value is not an integer or out of range")          \
	X(REPLY_TOO_LARGE, 17, "reply would exceed the frame size limit")      \
	X(BAD_VERSION, 18, "unsupported protocol version")                     \
	X(NOT_FLOAT, 19,                                                       \
	  "value is not a valid float, or the result would be NaN or "         \
	  "infinite")                                                          \
	X(MAP_FULL, 20, "shard is full: its map-size limit is reached")        \
	X(DISK_FULL, 21, "no space left on device")                            \
	X(SHARD_FAILED, 22,                                                    \
	  "shard write failed: shard is read-only until restart")              \
	X(TOO_MANY_CONNS, 23, "too many connections")                          \
	X(SHUTTING_DOWN, 24, "server is shutting down")                        \
	X(AUTH_REQUIRED, 25, "authentication required")                        \
	X(AUTH_FAILED, 26, "invalid password")                                 \
	X(READ_ONLY, 27, "server is read-only")                                \
	X(DISABLED, 28, "operation disabled by configuration")                 \
	X(INTERNAL, 29, "internal server error")                               \
	X(BUSY, 30, "another operation of this kind is in progress")           \
	X(WRONG_TYPE, 31,                                                      \
	  "operation against a key holding the wrong kind of value")           \
	X(REPLICA_READ_ONLY, 36, "server is a read-only replica")              \
	X(NO_REPLICAS, 37, "not enough good replicas to write")                \
	X(DOC_ERROR, 38, "document operation failed")                          \
	X(CONNECT, 64, "cannot connect")                                       \
	X(TIMEOUT, 65, "timed out")                                            \
	X(CLOSED, 66, "connection closed")                                     \
	X(PROTOCOL, 67, "malformed reply from server")                         \
	X(NOMEM, 68, "out of memory")                                          \
	X(INVALID, 69, "invalid argument")                                     \
	X(IO, 70, "i/o error")                                                 \
	X(AGAIN, 71, "operation would block")                                  \
	X(END, 72, "no more items")

#endif
