/* fuzz_mdoor.c - the MongoDB door (kvd/mongo/mdoor.h) fed any bytes as a
 * client's stream: framing, every command and its arguments, cursors and
 * writes, over the tests' in-memory store, under ASan and UBSan.
 *
 * The input's first byte chooses the setting: bit 0 a password (so the
 * pre-authentication rules and SCRAM's parsing are reached), bit 1 writes
 * completed later (the connection suspended, its input held), bit 2 a
 * store that follows sorts, bit 3 a second connection that takes the
 * second half of the bytes (getMores of the first one's cursors), bit 4
 * a store whose scans pause (reads yield and go on: mdoor_again), bit 5
 * with bit 4: the first read that yields is left so, and its connection
 * closed (the read abandoned must release its cursor and scan).  The
 * rest is the byte stream, fed in pieces of a size the second byte sets.
 * Checks that hold for any input:
 *   - every reply is a whole message: its length header in 16..48 MB + a
 *     batch, opcode OP_MSG or OP_REPLY, and a well-formed BSON document;
 *   - a connection whose write is in flight takes no input;
 *   - after the connection closes and the door is freed, every scan the
 *     store opened is closed (no cursor leaks its scan).
 */
#include <string.h>

#include "fuzz.h"
#include "mdoor.h"
#include "memstore.h"
#include "mql_value.h"

struct fconn {
	struct mdoor_conn *mc;
	uint8_t *out;
	size_t len, cap;
	int resumed, closed;
};

static void f_reply(void *conn, const void *p, size_t n)
{
	struct fconn *c = conn;

	if (c->len + n > c->cap) {
		c->cap = (c->len + n) * 2;
		c->out = realloc(c->out, c->cap);
		FUZZ_CHECK(c->out);
	}
	memcpy(c->out + c->len, p, n);
	c->len += n;
}

static void f_resume(void *conn)
{
	((struct fconn *)conn)->resumed++;
}

static void f_close(void *conn)
{
	((struct fconn *)conn)->closed++;
}

static uint64_t f_now(void *ctx)
{
	(void)ctx;
	return 1700000000000ull;
}

/* Every reply: whole, framed, its document well-formed. */
static void check_replies(struct fconn *c)
{
	size_t off = 0;

	while (off < c->len) {
		uint32_t len, op, body;

		FUZZ_CHECK(c->len - off >= 16);
		memcpy(&len, c->out + off, 4);
		memcpy(&op, c->out + off + 12, 4);
		FUZZ_CHECK(len >= 21 && len <= c->len - off);
		FUZZ_CHECK(op == 2013 || op == 1);
		body = op == 1 ? 36 : 21;
		FUZZ_CHECK(len > body);
		FUZZ_CHECK(mql_bson_check(c->out + off + body, len - body,
					  MQL_MAX_INPUT_SIZE * 2, 400,
					  NULL) == 0);
		off += len;
	}
	c->len = 0;
}

/* Feed p[0..n) in pieces of step bytes, as a socket would. */
static void feed(struct fconn *c, struct memstore *ms, unsigned mode,
		 const uint8_t *p, size_t n, size_t step)
{
	uint8_t *buf = malloc(n + 1);
	size_t have = 0, given = 0;

	FUZZ_CHECK(buf);
	for (;;) {
		size_t k, add = n - given < step ? n - given : step;

		memcpy(buf + have, p + given, add);
		have += add;
		given += add;
		while (have) {
			if ((k = mdoor_input(c->mc, buf, have, NULL))) {
				memmove(buf, buf + k, have - k);
				have -= k;
				continue;
			}
			if (!mdoor_yielded(c->mc))
				break;
			/* a yielded read takes no input, and goes on */
			FUZZ_CHECK(mdoor_busy(c->mc));
			if (mode & 32)
				goto out;
			while (mdoor_yielded(c->mc))
				mdoor_again(c->mc);
		}
		if (mdoor_yielded(c->mc) && (mode & 32))
			goto out;
		while (mdoor_yielded(c->mc))
			mdoor_again(c->mc);
		if (mdoor_busy(c->mc)) {
			/* a write in flight: input waits for its completion */
			FUZZ_CHECK(mode & 2);
			FUZZ_CHECK(mdoor_input(c->mc, buf, have, NULL) == 0);
			memstore_complete(ms);
			FUZZ_CHECK(!mdoor_busy(c->mc));
			check_replies(c);
			continue;
		}
		check_replies(c);
		if (given == n)
			break;
	}
out:
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mdoor_config cfg = {.kvd_version = "fuzz",
				   .host = "fuzz:27017",
				   .scram_iterations = 4096};
	struct mdoor_host host = {.reply = f_reply,
				  .resume = f_resume,
				  .close = f_close,
				  .now_ms = f_now};
	struct fconn a = {0}, b = {0};
	struct mdoor_peer peer = {.remote = "127.0.0.1:1", .id = 1};
	struct mdoor_store st;
	struct memstore *ms;
	struct mdoor *d;
	char err[128];
	size_t half, step;
	uint8_t mode;

	if (size < 2)
		return 0;
	mode = data[0];
	step = 1 + (size_t)data[1] * 61;
	data += 2;
	size -= 2;
	if (mode & 1) {
		cfg.password = "pencil";
		cfg.password_len = 6;
	}
	ms = memstore_new();
	memstore_defer(ms, mode & 2);
	memstore_sorting(ms, mode & 4);
	memstore_pausing(ms, mode & 16);
	memstore_ops(ms, &st);
	d = mdoor_new(&cfg, &host, &st, err, sizeof(err));
	FUZZ_CHECK(d);
	a.mc = mdoor_conn_open(d, &a, &peer);
	half = mode & 8 ? size / 2 : size;
	feed(&a, ms, mode, data, half, step);
	if (mode & 8) {
		b.mc = mdoor_conn_open(d, &b, &peer);
		feed(&b, ms, mode, data + half, size - half, step);
		mdoor_conn_close(b.mc);
	}
	mdoor_conn_close(a.mc);
	memstore_complete(ms); /* a write in flight at close */
	mdoor_free(d);
	FUZZ_CHECK(memstore_open_scans(ms) == 0);
	memstore_free(ms);
	free(a.out);
	free(b.out);
	return 0;
}
