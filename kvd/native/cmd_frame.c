/* cmd_frame.c - the native protocol's reply framing: a 4-byte big-endian
 * body length, then a msgpack body ([status] or [status, text] for a bare
 * status; docs/protocol.md).  A body over max-frame-size is replaced by
 * REPLY_TOO_LARGE. */
#include "cmd.h"

#include "kv_mp.h"
#include "kv_status.h"
#include "net/loop.h"

size_t kvd_reply_begin(struct kvd_conn *c)
{
	size_t off = c->out.len;
	static const uint8_t zero[KV_FRAME_HDR];

	kv_buf_append(&c->out, zero, sizeof(zero));
	return off;
}

void kvd_reply_end(struct kvd_conn *c, size_t off)
{
	size_t body = c->out.len - off - KV_FRAME_HDR;

	if (c->out.err)
		return; /* judged by the caller of the protocol handler */
	if (body > c->io->srv->cfg->max_frame) {
		c->out.len = off;
		kvd_reply_status(c, KV_REPLY_TOO_LARGE, NULL);
		return;
	}
	kv_store_be32(c->out.data + off, (uint32_t)body);
}

void kvd_reply_status(struct kvd_conn *c, int status, const char *detail)
{
	size_t off = kvd_reply_begin(c);

	if (status < KV_MALFORMED) { /* OK, NOT_FOUND, EXISTS: no text */
		kv_mp_array(&c->out, 1);
		kv_mp_uint(&c->out, (uint64_t)status);
	} else {
		kv_mp_array(&c->out, 2);
		kv_mp_uint(&c->out, (uint64_t)status);
		kv_mp_cstr(&c->out, detail ? detail : kv_status_text(status));
	}
	kvd_reply_end(c, off);
}
