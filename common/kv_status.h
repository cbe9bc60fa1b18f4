/* kv_status.h - the status codes kvd and libkvclient share.
 *
 * One table, expanded with X-macros, is the only definition of a status: its
 * wire number, its C name and its text.  The server puts the number in every
 * reply; libkvclient returns it negated (0 or a negative code, as libuv does),
 * so a client and a server can never disagree about what a code means.
 *
 * Codes below 64 travel on the wire.  Codes from 64 up are produced by the
 * client library alone (connection, timeout, bad reply) and never appear in
 * a reply frame.  Numbers are part of protocol version 1: never renumber,
 * only append.
 */
#ifndef KV_STATUS_H
#define KV_STATUS_H

/* X(NAME, number, text) */
#define KV_STATUS_LIST(X)                                                      \
	X(OK, 0, "ok")                                                         \
	X(NOT_FOUND, 1, "key not found")                                       \
	X(EXISTS, 2, "key already exists")                                     \
	X(MALFORMED, 10, "malformed request")                                  \
	X(UNKNOWN_OP, 11, "unknown operation")                                 \
	X(BAD_ARGS, 12, "wrong number or type of arguments")                   \
	X(KEY_TOO_LARGE, 13, "key too large")                                  \
	X(VALUE_TOO_LARGE, 14, "value too large")                              \
	X(FRAME_TOO_LARGE, 15, "frame too large")                              \
	X(NOT_INTEGER, 16, "value is not an integer or out of range")          \
	X(REPLY_TOO_LARGE, 17, "reply would exceed the frame size limit")      \
	X(BAD_VERSION, 18, "unsupported protocol version")                     \
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
	X(CONNECT, 64, "cannot connect")                                       \
	X(TIMEOUT, 65, "timed out")                                            \
	X(CLOSED, 66, "connection closed")                                     \
	X(PROTOCOL, 67, "malformed reply from server")                         \
	X(NOMEM, 68, "out of memory")                                          \
	X(INVALID, 69, "invalid argument")                                     \
	X(IO, 70, "i/o error")                                                 \
	X(AGAIN, 71, "operation would block")                                  \
	X(END, 72, "no more items")

enum kv_status {
#define KV_STATUS_ENUM(name, num, text) KV_##name = num,
	KV_STATUS_LIST(KV_STATUS_ENUM)
#undef KV_STATUS_ENUM
};

/* First code that never travels on the wire. */
#define KV_CLIENT_STATUS_MIN 64

/* "NOT_FOUND" for KV_NOT_FOUND; NULL for a number not in the table.
 * Accepts the negated form too. */
const char *kv_status_name(int status);

/* Human text for a status; accepts the negated form too. */
const char *kv_status_text(int status);

#endif
