/* cmdparse.h - decoding a native request (the body of one frame), apart
 * from any connection, so that it can be fuzzed on its own
 * (tests/fuzz/fuzz_cmd.c).
 *
 * A request is one flat msgpack array [op, arg...]: an opcode in
 * 1..KV_OP_MAX-1, then scalars only (nil, bool, integers, str, bin).  A
 * nested container is refused outright, so nothing here recurses, and the
 * array must end exactly where the frame does.  One exception: TXN's
 * arguments may be arrays of scalars (its checks and its sub-requests),
 * one level deep and never more, which a loop checks as well.  Every
 * argument is checked once, by kvd_req_decode; the walks below rely on
 * that.  An array argument, in r->a or from kvd_argit_next, has len its
 * items and p its first byte (its header): the sub-request [p, next
 * argument) is a body kvd_req_decode takes again.
 */
#ifndef KVD_CMDPARSE_H
#define KVD_CMDPARSE_H

#include <stdint.h>

#include "kv_mp.h"

#define KVD_REQ_FIXED_ARGS 6

struct kvd_req {
	unsigned op;
	uint32_t argc;	     /* arguments after the opcode */
	const uint8_t *args; /* first argument, for variadic walks */
	const uint8_t *end;
	struct kv_mp_obj a[KVD_REQ_FIXED_ARGS]; /* the first arguments */
};

/* KV_OK with r filled, KV_MALFORMED (not one well-formed array ending at
 * end, or an opcode that is not an unsigned integer), KV_UNKNOWN_OP (an
 * integer opcode kvd does not know, in a well-formed body), or KV_BAD_ARGS
 * (a nested container, an extension or a float among the arguments of a
 * well-formed body).  MALFORMED wins over the other two: a body that is
 * not one well-formed array is MALFORMED whatever else is wrong with it,
 * as docs/protocol.md section 1 says. */
int kvd_req_decode(const uint8_t *p, const uint8_t *end, struct kvd_req *r);

/* Walk the arguments of a decoded request from argument `from` on. */
struct kvd_argit {
	const uint8_t *p, *end;
};

void kvd_argit_init(const struct kvd_req *r, unsigned from,
		    struct kvd_argit *it);
void kvd_argit_next(struct kvd_argit *it, struct kv_mp_obj *o);

#endif
