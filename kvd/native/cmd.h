/* cmd.h - the native protocol's handlers, shared by their source files.
 *
 *   cmd.c       arguments, the version 1 operations, dispatch
 *   cmd_str.c   RENAME, COPY, GETEX, INCRBYFLOAT, GETRANGE, SETRANGE and
 *               the bit operations
 *   cmd_txn.c   TXN: a batch of operations in one exclusive section
 *   cmd_hash.c  the hash operations (HSET, HGET, HGETALL, HDEL, HINCRBY,
 *               HSCAN)
 *
 * A handler gets a decoded request whose argument count is checked; it
 * answers (a whole frame in c->out) or queues its write and returns
 * KV_OK, or returns the status to answer.  Operations that read and then
 * write (kind "section" below) run in an exclusive section (shard.h):
 * they answer at once, and their writes are silent (KVD_OP_SILENT) unless
 * one fails, when the failure becomes the answer.
 */
#ifndef KVD_CMD_H
#define KVD_CMD_H

#include <stdint.h>

#include "cmdparse.h"
#include "net/conn.h"

/* The native protocol's framing (cmd_frame.c): a reply is a 4-byte
 * big-endian length and a msgpack body. */
/* Start a native reply frame; returns its offset for kvd_reply_end. */
size_t kvd_reply_begin(struct kvd_conn *c);
/* Finish it: write the length, or replace an oversize body with
 * REPLY_TOO_LARGE. */
void kvd_reply_end(struct kvd_conn *c, size_t off);
/* A complete native reply [status, text] or [status]. */
void kvd_reply_status(struct kvd_conn *c, int status, const char *detail);

/* The native protocol's entry points (its kvd_proto, cmd.c): one request
 * per call, the bytes consumed (0: need more input, or stalled). */
size_t kvd_cmd_native(struct kvd_conn *c, const uint8_t *p, size_t n);
void kvd_cmd_native_wreply(struct kvd_conn *c, struct kvd_pend *pd);

/* A pend whose reply its request already gave: nothing to encode. */
#define KVD_OP_SILENT 0xffffu
/* A handler's return: answered, and its reply counted, already. */
#define KVD_ANSWERED 0x10000

/* 2^50 ms is 35,000 years: far enough, and now + ttl cannot overflow. */
#define KVD_TTL_MAX (1ull << 50)

typedef int (*kvd_op_fn)(struct kvd_conn *c, struct kvd_req *r);

/* One operation: its handler, the check of its arguments alone (no
 * effect; NULL when the handler is the check), how it runs. */
enum kvd_op_how {
	OPH_ANSWER,  /* answered on the spot, no keys (HELLO, PING, ...) */
	OPH_READ,    /* reads keys from the io thread's snapshot */
	OPH_WRITE,   /* queued to committers, answered through its pend */
	OPH_SECTION, /* reads and writes in an exclusive section */
};

struct kvd_op_desc {
	kvd_op_fn fn;
	kvd_op_fn check;
	uint8_t how;
	uint8_t write;	   /* refused on a read-only server */
	uint8_t in_txn;	   /* may be one of TXN's sub-requests */
	uint32_t min, max; /* argument count */
};

/* The table, by opcode; fn NULL for a number kvd does not know. */
const struct kvd_op_desc *kvd_op_desc(unsigned op);

/* ---- arguments (cmd.c) ---- */

int kvd_arg_is_bytes(const struct kv_mp_obj *o);
/* A key: bytes, 1 .. max-key-size long. */
int kvd_arg_key(struct kvd_conn *c, const struct kv_mp_obj *o,
		struct kv_slice *k);
/* A value: bytes, at most max-value-size long. */
int kvd_arg_val(struct kvd_conn *c, const struct kv_mp_obj *o,
		struct kv_slice *v);
/* Optional unsigned argument i (absent or nil: def). */
int kvd_arg_opt_uint(const struct kvd_req *r, unsigned i, uint64_t def,
		     uint64_t *v);
/* Optional signed argument i (absent or nil: def). */
int kvd_arg_opt_int(const struct kvd_req *r, unsigned i, int64_t def,
		    int64_t *v);

/* ---- replies (cmd.c) ---- */

void kvd_reply_value(struct kvd_conn *c, struct kv_slice v);
void kvd_reply_uint(struct kvd_conn *c, uint64_t n);
void kvd_reply_int(struct kvd_conn *c, int64_t n);
/* The reply of a committed write, as its pend would give it. */
void kvd_cmd_write_reply(struct kvd_conn *c, unsigned op, int st,
			 int64_t result, const uint8_t *val, size_t vlen);

/* ---- exclusive sections (cmd_str.c) ---- */

/* fn reads (resp_section_read, resp.h), answers, and queues its writes with
 * op KVD_OP_SILENT; it runs inside TXN's section, or one of its own, and
 * its writes are committed before this returns.  fn's status; or, when
 * one of its writes failed, that failure, fn's answer taken back. */
typedef int (*kvd_section_fn)(struct kvd_conn *c, struct kvd_req *r, void *arg);
int kvd_cmd_in_section(struct kvd_conn *c, struct kvd_req *r, kvd_section_fn fn,
		       void *arg);

/* ---- the operations of cmd_str.c and cmd_txn.c ---- */

int kvd_op_rename(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_rename(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_getex(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_getex(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_incrbyfloat(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_incrbyfloat(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_getrange(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_getrange(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_setrange(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_setrange(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_setbit(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_setbit(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_getbit(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_getbit(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_bitcount(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_bitcount(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_bitpos(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_bitpos(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_bitop(struct kvd_conn *c, struct kvd_req *r);
int kvd_check_bitop(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_txn(struct kvd_conn *c, struct kvd_req *r);

/* ---- hashes (cmd_hash.c) ---- */

int kvd_op_hset(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_hget(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_hgetall(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_hdel(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_hincrby(struct kvd_conn *c, struct kvd_req *r);
int kvd_op_hscan(struct kvd_conn *c, struct kvd_req *r);
/* The reply of a hash write that came back: 1 when op is one. */
int kvd_cmd_hash_wreply(struct kvd_conn *c, unsigned op, int st,
			int64_t result);
/* A hash's fields and values as one flat msgpack array into b: 0, or
 * KV_INTERNAL for an image that is not one (SCAN's TYPED items too). */
struct kv_buf;
int kvd_hash_encode(struct kv_buf *b, struct kv_slice img);

#endif
