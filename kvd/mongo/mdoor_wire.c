/* mdoor_wire.c - MongoDB's message framing: the standard header, OP_MSG
 * (flagBits, a kind-0 body, kind-1 document sequences, the optional
 * CRC-32C checksum), OP_QUERY (only for the handshake of older drivers),
 * OP_COMPRESSED (recognised to be refused), and the replies: OP_MSG, and
 * OP_REPLY to an OP_QUERY.
 *
 * Every length read from the message is checked against what is left of
 * the message (whose own length the caller checked against the limits)
 * before anything reads past it; every document is checked whole by
 * mql_bson_check (bounded size and depth, iteratively) before a handler
 * iterates it.  Nothing here allocates.
 */
#include <pthread.h>
#include <string.h>

#include "mdoor_int.h"
#include "mql_value.h"

/* ===================== CRC-32C ===================== */

/* Castagnoli polynomial, reflected: the checksum OP_MSG carries.  A
 * slicing-by-8 table in software, or the SSE 4.2 instruction when the
 * processor has it. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^
					crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__)
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w = BSON_UINT64_FROM_LE(w) ^ c;
		c = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		    crc_tab[5][(w >> 16) & 0xff] ^
		    crc_tab[4][(w >> 24) & 0xff] ^
		    crc_tab[3][(w >> 32) & 0xff] ^
		    crc_tab[2][(w >> 40) & 0xff] ^
		    crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc_sse(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64 = c;

	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t mdoor_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	uint32_t c = ~crc;

	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_sse(c, p, n);
#endif
	return ~crc_soft(c, p, n);
}

/* ===================== parsing ===================== */

static int bad(struct mql_error *err, int code, const char *msg)
{
	return mdoor_err(err, code, "%s", msg);
}

static int check_doc(const uint8_t *p, size_t avail, uint32_t *len,
		     struct mql_error *err)
{
	int32_t n;

	if (avail < 5)
		return bad(err, MQL_InvalidBSON, "invalid bson: truncated");
	n = mdoor_le32(p);
	if (n < 5 || (size_t)n > avail)
		return bad(err, MQL_InvalidBSON,
			   "invalid bson: length out of its message");
	if (mql_bson_check(p, (size_t)n, MDOOR_MAX_CMD, MQL_MAX_INPUT_DEPTH,
			   err))
		return -1;
	*len = (uint32_t)n;
	return 0;
}

/* A kind-1 section at p[0..avail): its size, identifier and documents. */
static int parse_seq(const uint8_t *p, size_t avail, struct mdoor_msg *m,
		     size_t *used, struct mql_error *err)
{
	int32_t size;
	const uint8_t *nul, *q, *end;
	struct mdoor_seq *s;

	if (avail < 4)
		return bad(err, MDOOR_ProtocolError,
			   "truncated document sequence");
	size = mdoor_le32(p);
	if (size < 5 || (size_t)size > avail)
		return bad(err, MDOOR_ProtocolError,
			   "document sequence size out of its message");
	end = p + size;
	nul = memchr(p + 4, '\0', (size_t)(end - (p + 4)));
	if (!nul)
		return bad(err, MDOOR_ProtocolError,
			   "document sequence identifier is not terminated");
	for (size_t i = 0; i < m->nseqs; i++)
		if (!strcmp(m->seqs[i].id, (const char *)p + 4))
			return mdoor_err(err, 40431,
					 "Duplicate document sequence: %s",
					 (const char *)p + 4);
	if (m->nseqs == MDOOR_MAX_SEQS)
		return bad(err, MDOOR_ProtocolError,
			   "too many document sequences");
	for (q = nul + 1; q < end;) {
		uint32_t dl;

		if (check_doc(q, (size_t)(end - q), &dl, err))
			return -1;
		q += dl;
	}
	s = &m->seqs[m->nseqs++];
	s->id = (const char *)p + 4;
	s->docs = nul + 1;
	s->len = (uint32_t)(end - (nul + 1));
	*used = (size_t)size;
	return 0;
}

/* A sequence's identifier that is also a field of the body. */
static int seq_clash(const struct mdoor_msg *m, struct mql_error *err)
{
	bson_iter_t it;

	if (!m->nseqs || !bson_iter_init_from_data(&it, m->body, m->body_len))
		return 0;
	while (bson_iter_next(&it))
		for (size_t i = 0; i < m->nseqs; i++)
			if (!strcmp(bson_iter_key(&it), m->seqs[i].id))
				return mdoor_err(err, 40433,
						 "Duplicate field %s in "
						 "document sequence and body",
						 m->seqs[i].id);
	return 0;
}

static int parse_msg(const uint8_t *m, uint32_t len, struct mdoor_msg *out,
		     bool *fatal, struct mql_error *err)
{
	uint32_t end = len, off = 20;

	if (len < 21)
		return bad(err, MDOOR_ProtocolError, "OP_MSG too short");
	out->flags = (uint32_t)mdoor_le32(m + 16);
	if (out->flags & MDOOR_MSG_REQUIRED &
	    ~(MDOOR_MSG_CHECKSUM | MDOOR_MSG_MORE)) {
		*fatal = true;
		return mdoor_err(err, MDOOR_IllegalOpMsgFlag,
				 "Message contains illegal flags value: "
				 "Flag 0x%x",
				 out->flags);
	}
	if (out->flags & MDOOR_MSG_CHECKSUM) {
		if (len < 25)
			return bad(err, MDOOR_ProtocolError,
				   "OP_MSG too short for its checksum");
		end = len - 4;
		if (mdoor_crc32c(0, m, end) != (uint32_t)mdoor_le32(m + end)) {
			*fatal = true;
			return bad(err, MDOOR_ChecksumMismatch,
				   "checksum mismatch");
		}
	}
	while (off < end) {
		uint8_t kind = m[off++];
		size_t used = 0;

		if (kind == 0) {
			if (out->body)
				return bad(err, 40430,
					   "Multiple body sections in message");
			if (check_doc(m + off, end - off, &out->body_len, err))
				return -1;
			out->body = m + off;
			off += out->body_len;
		} else if (kind == 1) {
			if (parse_seq(m + off, end - off, out, &used, err))
				return -1;
			off += (uint32_t)used;
		} else {
			return mdoor_err(err, 40432, "Unknown section kind %u",
					 kind);
		}
	}
	if (!out->body)
		return bad(err, 40587, "OP_MSG messages must have a body");
	return seq_clash(out, err);
}

/* OP_QUERY: flags, fullCollectionName, numberToSkip, numberToReturn,
 * query[, returnFieldsSelector].  A command may come wrapped as {$query:
 * {...}, $readPreference: ...}. */
static int parse_query(const uint8_t *m, uint32_t len, struct mdoor_msg *out,
		       struct mql_error *err)
{
	const uint8_t *nul;
	uint32_t off;
	bson_iter_t it;

	if (len < 21)
		return bad(err, MDOOR_ProtocolError, "OP_QUERY too short");
	out->flags = (uint32_t)mdoor_le32(m + 16);
	nul = memchr(m + 20, '\0', len - 20);
	if (!nul)
		return bad(err, MDOOR_ProtocolError,
			   "OP_QUERY namespace is not terminated");
	out->ns = (const char *)m + 20;
	off = (uint32_t)(nul + 1 - m) + 8;
	if (off > len)
		return bad(err, MDOOR_ProtocolError, "OP_QUERY too short");
	if (check_doc(m + off, len - off, &out->body_len, err))
		return -1;
	out->body = m + off;
	if (bson_iter_init_from_data(&it, out->body, out->body_len) &&
	    bson_iter_next(&it) &&
	    (!strcmp(bson_iter_key(&it), "$query") ||
	     !strcmp(bson_iter_key(&it), "query")) &&
	    BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *d;
		uint32_t dl;

		bson_iter_document(&it, &dl, &d);
		out->body = d;
		out->body_len = dl;
	}
	return 0;
}

int mdoor_wire_parse(const uint8_t *m, uint32_t len, struct mdoor_msg *out,
		     bool *fatal, struct mql_error *err)
{
	memset(out, 0, sizeof(*out));
	*fatal = false;
	out->len = (int32_t)len;
	out->request_id = mdoor_le32(m + 4);
	out->response_to = mdoor_le32(m + 8);
	out->opcode = mdoor_le32(m + 12);
	switch (out->opcode) {
	case MDOOR_OP_MSG: return parse_msg(m, len, out, fatal, err);
	case MDOOR_OP_QUERY: return parse_query(m, len, out, err);
	case MDOOR_OP_COMPRESSED:
		out->orig_opcode = len >= 20 ? mdoor_le32(m + 16) : 0;
		*fatal = true;
		return bad(err, MDOOR_ProtocolError,
			   "OP_COMPRESSED is not supported: kvd announces no "
			   "compressor");
	default:
		*fatal = true;
		return mdoor_err(err, MDOOR_ProtocolError,
				 "Unsupported opcode %d", (int)out->opcode);
	}
}

/* ===================== replies ===================== */

static _Atomic int32_t next_reply_id = 1;

static void put32(uint8_t *p, int32_t v)
{
	uint32_t u = BSON_UINT32_TO_LE((uint32_t)v);

	memcpy(p, &u, 4);
}

static void send_parts(struct mdoor_conn *mc, const uint8_t *hdr, size_t n,
		       const bson_t *doc)
{
	struct mdoor *d = mc->d;

	d->host.reply(mc->conn, hdr, n);
	d->host.reply(mc->conn, bson_get_data(doc), doc->len);
	atomic_fetch_add_explicit(&d->c_bytes_out, n + doc->len,
				  memory_order_relaxed);
}

void mdoor_wire_reply_msg(struct mdoor_conn *mc, int32_t response_to,
			  const bson_t *doc)
{
	uint8_t h[21];

	put32(h, (int32_t)(21 + doc->len));
	put32(h + 4, atomic_fetch_add(&next_reply_id, 1));
	put32(h + 8, response_to);
	put32(h + 12, MDOOR_OP_MSG);
	put32(h + 16, 0); /* flagBits: no checksum, no moreToCome */
	h[20] = 0;	  /* one kind-0 section */
	send_parts(mc, h, sizeof(h), doc);
}

void mdoor_wire_reply_legacy(struct mdoor_conn *mc, int32_t response_to,
			     const bson_t *doc)
{
	uint8_t h[36];

	put32(h, (int32_t)(36 + doc->len));
	put32(h + 4, atomic_fetch_add(&next_reply_id, 1));
	put32(h + 8, response_to);
	put32(h + 12, MDOOR_OP_REPLY);
	put32(h + 16, 8);     /* responseFlags: AwaitCapable, as mongod */
	memset(h + 20, 0, 8); /* cursorID */
	put32(h + 28, 0);     /* startingFrom */
	put32(h + 32, 1);     /* numberReturned */
	send_parts(mc, h, sizeof(h), doc);
}
