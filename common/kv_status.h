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
 * only append.  The table itself is in kv_status_list.h, which libkvclient's
 * public header expands as KVC_* names.
 */
#ifndef KV_STATUS_H
#define KV_STATUS_H

#include "kv_status_list.h"

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
