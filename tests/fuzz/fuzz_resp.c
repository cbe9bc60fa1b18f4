/* fuzz_resp.c - kvd's RESP2 request parser (kvd/resp/resp.c) on any bytes.
 *
 * kvd_resp_input is driven as conn.c drives it: input arrives in chunks
 * (sizes picked by the first byte), unparsed bytes stay at the start of an
 * input buffer, and every call gets the buffer from the start of the
 * request it is in the middle of (resp.c keeps how far it has validated a
 * multibulk in c->resp_mb).  The rest of kvd is faked: a connection with
 * a configuration, and every command handler replaced by one stub (linked
 * in place of each, see CMakeLists.txt) that walks the request's
 * arguments and checks each lies inside the input and matches r->a[].  The
 * fourth bit of the first byte makes the connection unauthenticated, so
 * the pre-auth caps are fuzzed too, and its fifth bit expands the rest's
 * repeats (expand.h), up to max-frame-size and a little over: a command
 * with 100,000 arguments, or one as long as the limit.
 *
 * Replies go through conn.c's own functions (linked; the linker drops what
 * of conn.c is not reached).  This harness knows what else resp.c calls:
 * when resp.c calls something new, fake it here or link its source
 * (default builds link it too, to replay the corpus).
 */
#include <string.h>

#include "net/auth.h"
#include "net/conn.h"
#include "expand.h"
#include "fuzz.h"
#include "kv_buf.h"
#include "net/loop.h"
#include "resp/resp.h"
#include "store.h"

#define MAX_FRAME (1u << 20)

static struct kvd_config cfg;
static struct kvd_server srv;
static struct kvd_io io;
static int auth_pending;
static const uint8_t *in_lo, *in_hi; /* the bytes of the current call */

/* ---- the rest of kvd, faked ---- */

int kvd_auth_pending(const struct kvd_conn *c)
{
	(void)c;
	return auth_pending;
}

int kvd_auth_resp_disabled(unsigned id)
{
	return id == RESP_CMD_KEYS;
}

void kvd_auth_http_refuse(struct kvd_conn *c, const char *what)
{
	(void)what;
	c->flags |= CONN_CLOSING;
}

/* resp_intro.c's accounting around each command: the command id must be
 * a real one. */
uint64_t kvd_resp_pre(struct kvd_conn *c, struct resp_req *r)
{
	(void)c;
	FUZZ_CHECK(r->cmd < RESP_NCMDS);
	return 1;
}

void kvd_resp_post(struct kvd_conn *c, struct resp_req *r, uint64_t t0,
		   int outcome)
{
	(void)c;
	(void)t0;
	(void)outcome;
	FUZZ_CHECK(r->cmd < RESP_NCMDS);
}

/* resp_multi.c's queue: never inside MULTI here (MULTI is a stub). */
int kvd_resp_in_multi(const struct kvd_conn *c)
{
	(void)c;
	return 0;
}

const char *kvd_resp_multi_queue(struct kvd_conn *c, struct resp_req *r)
{
	(void)c;
	(void)r;
	return "ERR not in this harness";
}

void kvd_resp_multi_refuse(struct kvd_conn *c)
{
	(void)c;
}

void kvd_resp_multi_free(struct kvd_conn *c)
{
	(void)c;
}

/* resp_pubsub.c's gate: no connection here ever subscribes (SUBSCRIBE is
 * a stub). */
const char *kvd_resp_pubsub_gate(struct kvd_conn *c, struct resp_req *r)
{
	(void)c;
	(void)r;
	return NULL;
}

void kvd_resp_pubsub_drain(struct kvd_conn *c)
{
	(void)c;
}

/* committer.c's exclusive sections: none here. */
/* resp.c asks replication whether writes are taken (repl.c). */
int kvd_repl_write_ok(void);
int kvd_repl_write_ok(void)
{
	return 0;
}

unsigned kvd_excl_seq(void)
{
	return 0;
}

int kvd_excl_moved(unsigned seq)
{
	(void)seq;
	return 0;
}

/* shard.c's per-request views: nothing is read here. */
void kvd_reader_pin(struct kvd_reader *r)
{
	(void)r;
}

void kvd_reader_unpin(struct kvd_reader *r)
{
	(void)r;
}

const char *fuzz_resp_stub(struct kvd_conn *c, struct resp_req *r);

const char *fuzz_resp_stub(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice a;
	unsigned sum = 0;

	resp_it_init(r, 0, &it);
	for (uint32_t i = 0; i < r->argc; i++) {
		resp_it_next(&it, &a);
		if (!r->packed)
			FUZZ_CHECK(a.p >= in_lo && a.p + a.n <= in_hi);
		if (i < RESP_FIXED_ARGS)
			FUZZ_CHECK(a.p == r->a[i].p && a.n == r->a[i].n);
		for (size_t j = 0; j < a.n; j++)
			sum += a.p[j]; /* every byte readable (ASan) */
	}
	c->out.len = 0;
	return sum == 0xffffffffu ? "ERR never" : NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	cfg.max_frame = MAX_FRAME;
	cfg.max_key = 511;
	cfg.max_value = 512 << 10;
	cfg.max_output = 1 << 20;
	srv.cfg = &cfg;
	io.srv = &srv;
	return 0;
}

/* ---- conn.c's input loop, in miniature ---- */

static int feed(struct kvd_conn *c, struct kv_buf *in)
{
	size_t used = 0;

	while (used < in->len && !(c->flags & CONN_CLOSING)) {
		size_t k;

		in_lo = in->data + used;
		in_hi = in->data + in->len;
		k = kvd_resp_input(c, in->data + used, in->len - used);
		FUZZ_CHECK(k <= in->len - used);
		if (k == 0)
			break;
		used += k;
		FUZZ_CHECK(c->stall ==
			   STALL_NONE); /* nothing is ever pending */
	}
	kv_buf_consume(in, used);
	c->out.len = 0;
	return !(c->flags & CONN_CLOSING);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[8] = {1, 2, 3, 7, 64, 4096, 65536, 1 << 30};
	struct kvd_conn c;
	struct kv_buf in = {0};
	uint8_t *big = NULL;
	size_t chunk, pos = 1;

	if (size == 0)
		return 0;
	if (data[0] & 16) { /* repeats: the rest expanded */
		FUZZ_CHECK(fuzz_expand(data, size, 1, MAX_FRAME + (64u << 10),
				       &big, &size) == 0);
		data = big;
	}
	memset(&c, 0, sizeof(c));
	c.io = &io;
	c.proto = KVD_PROTO_RESP;
	auth_pending = (data[0] >> 3) & 1;
	chunk = chunks[data[0] & 7];
	while (pos < size) {
		size_t n = size - pos < chunk ? size - pos : chunk;

		FUZZ_CHECK(kv_buf_append(&in, data + pos, n) == 0);
		pos += n;
		if (!feed(&c, &in))
			break;
	}
	kv_buf_free(&in);
	kv_buf_free(&c.out);
	free(big);
	return 0;
}
