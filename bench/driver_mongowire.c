/* driver_mongowire.c - kvbench's second MongoDB driver: OP_MSG written and
 * read by kvbench itself (libbson for the documents), on a non-blocking
 * socket in the engine's own loop, as the postgres driver does with libpq.
 *
 * Why: libmongoc has no asynchronous API, so driver_mongo.c runs one
 * thread per connection and hands each request and reply between two
 * threads; on a small machine that client costs more CPU per request than
 * the server it measures (bench/RESULTS.md, "Secondary indexes").  This
 * one costs what encoding a command and counting a reply's documents cost.
 *
 * It speaks what driver_mongo.c sends, with the same commands and
 * documents, so that the two measure the same server work:
 *
 * - YCSB's records of fields: insert of {_id, field0, ...}; find by _id
 *   (limit 1, the projection {fieldN: 1} when one field is read), the
 *   fields of the document found handed back for --verify; update of
 *   {_id} with $set of the fields written, "n" 0 being "not found"; the
 *   scan, find {_id: {$gte: key}} sorted by _id with a limit, its
 *   documents counted.
 * - --record value and the geo workload: a put is an update of {_id} by
 *   the whole document with upsert (replaceOne's command), a get a find
 *   by _id turned back into the msgpack value (mongo_conv.h), a scan as
 *   above.
 * - The index workloads (ixdocs.h): find with a filter, sort and limit,
 *   insert of one document.
 *
 * Every find asks for singleBatch (a record's find with its limit as
 * batchSize too), so the reply's firstBatch holds every document and no
 * cursor stays open.  No
 * TLS, no authentication (a password is refused), no hello: commands are
 * sent straight away, which kvd's door and mongod both accept.  The
 * database is "kvbench", as the other driver's default; setup creates the
 * indexes with the same createIndexes.  Requests may be pipelined (-P):
 * replies come back in order on a connection.
 */
#include <arpa/inet.h>
#include <bson/bson.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kvbench.h"
#include "mongo_conv.h"
#include "record.h"

#define MW_DB "kvbench"
#define MW_OP_MSG 2013
#define MW_MAX_MSG (48u << 20) /* a reply larger than MongoDB's is wrong */

struct mwbuf {
	uint8_t *p;
	size_t len, cap, off; /* off: consumed (in) or written (out) */
};

struct mwconn {
	int fd;
	const char *coll;
	int32_t next_id;
	struct mwbuf out, in;
	size_t done;	    /* the bytes of the last reply handed out */
	struct kb_fval *fv; /* a read's fields, nf of them */
	unsigned nf;
	int index_only; /* kb_target's */
	uint8_t *vbuf;	/* a get's value */
	size_t vcap;
	char err[256];
};

static int buf_reserve(struct mwbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	uint8_t *p;

	if (b->len + more <= b->cap)
		return 0;
	if (b->off) { /* slide what is left to the front first */
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + more <= b->cap)
			return 0;
	}
	while (cap < b->len + more)
		cap *= 2;
	if (!(p = realloc(b->p, cap)))
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* One OP_MSG of cmd (flags 0, one section of kind 0) onto out. */
static int queue_msg(struct mwconn *mc, const bson_t *cmd)
{
	uint32_t n = 16 + 4 + 1 + cmd->len;
	uint8_t *p;

	if (buf_reserve(&mc->out, n))
		return -1;
	p = mc->out.p + mc->out.len;
	put_le32(p, n);
	put_le32(p + 4, (uint32_t)mc->next_id++);
	put_le32(p + 8, 0);
	put_le32(p + 12, MW_OP_MSG);
	put_le32(p + 16, 0);
	p[20] = 0;
	memcpy(p + 21, bson_get_data(cmd), cmd->len);
	mc->out.len += n;
	return 0;
}

/* ---- commands ---------------------------------------------------------- */

static const char *const ix_names[] = {"k", "r", "_id"};

/* find: {f: v} or {_id: key}, or {r: {$gte: v}} sorted by r with limit
 * count; singleBatch so that no cursor stays open on the server. */
static void ix_find_cmd(struct mwconn *mc, const struct kb_req *r, bson_t *cmd)
{
	bson_t filter, sub;

	BSON_APPEND_UTF8(cmd, "find", mc->coll);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &filter);
	if (r->kind == REQ_IXRANGE) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "r", &sub);
		BSON_APPEND_INT64(&sub, "$gte", r->ival);
		bson_append_document_end(&filter, &sub);
	} else if (r->field == IX_ID) {
		bson_append_utf8(&filter, "_id", 3, r->key, (int)r->klen);
	} else {
		BSON_APPEND_INT64(&filter, ix_names[r->field], r->ival);
	}
	bson_append_document_end(cmd, &filter);
	if (r->kind == REQ_IXRANGE) {
		BSON_APPEND_DOCUMENT_BEGIN(cmd, "sort", &sub);
		BSON_APPEND_INT32(&sub, "r", 1);
		bson_append_document_end(cmd, &sub);
		BSON_APPEND_INT64(cmd, "limit", r->count);
	}
	if (mc->index_only && r->field != IX_ID) {
		BSON_APPEND_DOCUMENT_BEGIN(cmd, "projection", &sub);
		BSON_APPEND_INT32(&sub, ix_names[r->field], 1);
		BSON_APPEND_INT32(&sub, "_id", 0);
		bson_append_document_end(cmd, &sub);
	}
	BSON_APPEND_BOOL(cmd, "singleBatch", true);
}

/* A record's find, as driver_mongo.c's run_find: {_id: key} with limit
 * 1, or the scan {_id: {$gte: key}} sorted by _id with limit count; the
 * projection {fieldN: 1} when one field is asked for.  batchSize is the
 * limit so that singleBatch's one batch holds every document (mongod's
 * first batch is otherwise 101 documents). */
static void rec_find_cmd(struct mwconn *mc, const struct kb_req *r, bson_t *cmd)
{
	int scan = r->kind == REQ_FSCAN || r->kind == REQ_SCAN;
	int64_t limit = scan ? (r->count ? r->count : 1) : 1;
	bson_t filter, sub;

	BSON_APPEND_UTF8(cmd, "find", mc->coll);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &filter);
	if (scan) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &sub);
		bson_append_utf8(&sub, "$gte", 4, r->key, (int)r->klen);
		bson_append_document_end(&filter, &sub);
	} else {
		bson_append_utf8(&filter, "_id", 3, r->key, (int)r->klen);
	}
	bson_append_document_end(cmd, &filter);
	if (scan) {
		BSON_APPEND_DOCUMENT_BEGIN(cmd, "sort", &sub);
		BSON_APPEND_INT32(&sub, "_id", 1);
		bson_append_document_end(cmd, &sub);
	}
	if (r->field >= 0 && r->kind != REQ_GET) {
		char name[KB_FIELD_NAME_MAX];
		size_t n = kb_field_name((unsigned)r->field, name);

		BSON_APPEND_DOCUMENT_BEGIN(cmd, "projection", &sub);
		bson_append_int32(&sub, name, (int)n, 1);
		bson_append_document_end(cmd, &sub);
	}
	BSON_APPEND_INT64(cmd, "limit", limit);
	BSON_APPEND_INT64(cmd, "batchSize", limit);
	BSON_APPEND_BOOL(cmd, "singleBatch", true);
}

/* {insert: coll, documents: [doc]}. */
static void insert_cmd(struct mwconn *mc, const bson_t *doc, bson_t *cmd)
{
	bson_t arr;

	BSON_APPEND_UTF8(cmd, "insert", mc->coll);
	BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", doc);
	bson_append_array_end(cmd, &arr);
}

/* The fields of an insert or of an update's $set into d. */
static void append_fields(const struct kb_req *r, bson_t *d)
{
	char name[KB_FIELD_NAME_MAX];

	for (unsigned i = 0; i < r->nfv; i++) {
		size_t n = kb_field_name(r->fv[i].idx, name);

		bson_append_utf8(d, name, (int)n, (const char *)r->fv[i].val,
				 (int)r->fv[i].len);
	}
}

/* A record's insert: {_id: key, field0: ..., ...}, as insertOne's. */
static void rec_insert_cmd(struct mwconn *mc, const struct kb_req *r,
			   bson_t *cmd)
{
	bson_t doc = BSON_INITIALIZER;

	bson_append_utf8(&doc, "_id", 3, r->key, (int)r->klen);
	append_fields(r, &doc);
	insert_cmd(mc, &doc, cmd);
	bson_destroy(&doc);
}

/* {update: coll, updates: [{q: {_id: key}, u: u, upsert}]}: updateOne
 * (u a $set) and replaceOne with upsert (u the document), as libmongoc
 * sends them. */
static void update_cmd(struct mwconn *mc, const struct kb_req *r,
		       const bson_t *u, int upsert, bson_t *cmd)
{
	bson_t arr, one, q;

	BSON_APPEND_UTF8(cmd, "update", mc->coll);
	BSON_APPEND_ARRAY_BEGIN(cmd, "updates", &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
	BSON_APPEND_DOCUMENT_BEGIN(&one, "q", &q);
	bson_append_utf8(&q, "_id", 3, r->key, (int)r->klen);
	bson_append_document_end(&one, &q);
	BSON_APPEND_DOCUMENT(&one, "u", u);
	if (upsert)
		BSON_APPEND_BOOL(&one, "upsert", true);
	bson_append_document_end(&arr, &one);
	bson_append_array_end(cmd, &arr);
}

/* A record's update: $set of the fields written. */
static void rec_update_cmd(struct mwconn *mc, const struct kb_req *r,
			   bson_t *cmd)
{
	bson_t u = BSON_INITIALIZER, set;

	BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
	append_fields(r, &set);
	bson_append_document_end(&u, &set);
	update_cmd(mc, r, &u, 0, cmd);
	bson_destroy(&u);
}

/* A value's document (mongo_conv.h): inserted (IXINSERT) or replacing
 * the record with upsert (PUT).  -1 when out of memory. */
static int value_cmd(struct mwconn *mc, const struct kb_req *r, bson_t *cmd)
{
	bson_t *doc = mconv_value_doc(r->key, r->klen, r->val, r->vlen);

	if (!doc)
		return -1;
	if (r->kind == REQ_IXINSERT)
		insert_cmd(mc, doc, cmd);
	else
		update_cmd(mc, r, doc, 1, cmd);
	bson_destroy(doc);
	return 0;
}

/* r's command into cmd: 0, -1 out of memory, -2 a request it cannot
 * make. */
static int build_cmd(struct mwconn *mc, const struct kb_req *r, bson_t *cmd)
{
	switch (r->kind) {
	case REQ_GET:
	case REQ_READ:
	case REQ_SCAN:
	case REQ_FSCAN: rec_find_cmd(mc, r, cmd); return 0;
	case REQ_INSERT: rec_insert_cmd(mc, r, cmd); return 0;
	case REQ_UPDATE: rec_update_cmd(mc, r, cmd); return 0;
	case REQ_PUT:
	case REQ_IXINSERT: return value_cmd(mc, r, cmd);
	case REQ_IXFIND:
	case REQ_IXRANGE:
		if (r->field < IX_K || r->field > IX_ID)
			return -2;
		ix_find_cmd(mc, r, cmd);
		return 0;
	}
	return -2;
}

static int mw_send(void *c, const struct kb_req *r)
{
	struct mwconn *mc = c;
	bson_t cmd = BSON_INITIALIZER;
	int rc = build_cmd(mc, r, &cmd);

	if (rc == -2)
		snprintf(mc->err, sizeof(mc->err),
			 "mongowire: a request it cannot send");
	if (rc == 0) {
		BSON_APPEND_UTF8(&cmd, "$db", MW_DB);
		rc = queue_msg(mc, &cmd);
	}
	if (rc == -1)
		snprintf(mc->err, sizeof(mc->err), "out of memory");
	bson_destroy(&cmd);
	return rc < 0 ? -1 : 0;
}

/* ---- connections ------------------------------------------------------- */

static int dial(const struct kb_target *t, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM},
			*ai, *a;
	char port[16];
	int fd = -1, one = 1, rc;

	snprintf(port, sizeof(port), "%u", t->port);
	if ((rc = getaddrinfo(t->host, port, &hints, &ai))) {
		snprintf(err, errlen, "%s: %s", t->host, gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, errlen, "%s:%u: %s", t->host, t->port,
			 strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int check_target(const struct kb_target *t, char *err, size_t errlen)
{
	if (t->password || t->tls || t->conninfo || t->host[0] == '/') {
		snprintf(err, errlen,
			 "mongowire: TCP without TLS or a password only "
			 "(-D mongodb has them)");
		return -1;
	}
	return 0;
}

static void mw_close(void *c)
{
	struct mwconn *mc = c;

	if (mc->fd >= 0)
		close(mc->fd);
	free(mc->out.p);
	free(mc->in.p);
	free(mc->fv);
	free(mc->vbuf);
	free(mc);
}

/* One command, blocking, on a fresh connection: setup's.  0, or -1 with
 * the server's errmsg. */
static int run_blocking(struct mwconn *mc, const bson_t *cmd, char *err,
			size_t errlen);

static void *mw_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct mwconn *mc;

	if (check_target(t, err, errlen))
		return NULL;
	if (!(mc = calloc(1, sizeof(*mc)))) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	mc->fd = -1;
	mc->coll = t->table;
	mc->index_only = t->index_only;
	mc->next_id = 1;
	mc->nf = t->fieldcount ? t->fieldcount : 1;
	if (!(mc->fv = calloc(mc->nf, sizeof(*mc->fv)))) {
		snprintf(err, errlen, "out of memory");
		mw_close(mc);
		return NULL;
	}
	if ((mc->fd = dial(t, err, errlen)) < 0) {
		mw_close(mc);
		return NULL;
	}
	return mc;
}

static int mw_fd(void *c)
{
	return ((struct mwconn *)c)->fd;
}

static int mw_flush(void *c)
{
	struct mwconn *mc = c;
	struct mwbuf *b = &mc->out;

	while (b->off < b->len) {
		ssize_t n = send(mc->fd, b->p + b->off, b->len - b->off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(mc->err, sizeof(mc->err), "send: %s",
				 strerror(errno));
			return -1;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	return 0;
}

static int mw_input(void *c)
{
	struct mwconn *mc = c;

	for (;;) {
		ssize_t n;

		if (buf_reserve(&mc->in, 16384))
			return -1;
		n = recv(mc->fd, mc->in.p + mc->in.len, mc->in.cap - mc->in.len,
			 MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(mc->err, sizeof(mc->err), "%s",
				 n ? strerror(errno) : "connection closed");
			return -1;
		}
		mc->in.len += (size_t)n;
	}
}

/* ---- replies ----------------------------------------------------------- */

/* The documents of reply's cursor.firstBatch, the first one into *first
 * (when there is one); -1 when the reply has no firstBatch. */
static int first_batch(const bson_t *reply, bson_t *first)
{
	bson_iter_t it, sub;
	int n = 0;

	if (!bson_iter_init_find(&it, reply, "cursor") ||
	    !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &sub) ||
	    !bson_iter_find(&sub, "firstBatch") ||
	    !BSON_ITER_HOLDS_ARRAY(&sub) || !bson_iter_recurse(&sub, &it))
		return -1;
	while (bson_iter_next(&it)) {
		if (n++ == 0) {
			const uint8_t *data;
			uint32_t len;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				return -1;
			bson_iter_document(&it, &len, &data);
			if (!bson_init_static(first, data, len))
				return -1;
		}
	}
	return n;
}

/* A found document's fieldN strings as the record's fields, as
 * driver_mongo.c's read_fields: a field not one of ours is handed back
 * with an index no record has, so that --verify counts it wrong. */
static void read_fields(struct mwconn *mc, const bson_t *d,
			struct kb_reply *out)
{
	bson_iter_t it;

	out->fields = mc->fv;
	if (!bson_iter_init(&it, d))
		return;
	while (bson_iter_next(&it) && out->nfields < mc->nf) {
		const char *k = bson_iter_key(&it);
		struct kb_fval *fv;
		uint32_t len = 0;

		if (strcmp(k, "_id") == 0)
			continue;
		fv = &mc->fv[out->nfields++];
		if (rec_field_index(k, strlen(k), &fv->idx) ||
		    !BSON_ITER_HOLDS_UTF8(&it)) {
			fv->idx = UINT32_MAX;
			fv->val = NULL;
			fv->len = 0;
			continue;
		}
		fv->val = (const uint8_t *)bson_iter_utf8(&it, &len);
		fv->len = len;
	}
}

/* A find's reply: the documents counted; for a read or a get the first
 * one handed back (its fields, or its msgpack value); none found is "not
 * found" but for scans. */
static void find_reply(struct mwconn *mc, enum kb_req_kind kind,
		       const bson_t *reply, struct kb_reply *out)
{
	bson_t doc;
	int items = first_batch(reply, &doc);

	if (items < 0) {
		out->status = REPLY_ERROR;
		out->msg = "a find reply without cursor.firstBatch";
		return;
	}
	out->items = (unsigned)items;
	if (kind == REQ_SCAN || kind == REQ_FSCAN || kind == REQ_IXRANGE)
		return;
	if (items == 0) {
		out->status = REPLY_NOT_FOUND;
		return;
	}
	if (kind == REQ_READ) {
		read_fields(mc, &doc, out);
	} else if (kind == REQ_GET) {
		if (mconv_doc_value(&doc, &mc->vbuf, &mc->vcap, &out->vlen)) {
			out->status = REPLY_ERROR;
			out->msg = "a document kvbench cannot read back";
			return;
		}
		out->val = mc->vbuf;
	}
}

/* An update's reply: "n" 0 (nothing matched) is "not found", as
 * driver_mongo.c's matchedCount. */
static void update_reply(const bson_t *reply, struct kb_reply *out)
{
	bson_iter_t it;

	if (!bson_iter_init_find(&it, reply, "n")) {
		out->status = REPLY_ERROR;
		out->msg = "an update reply without n";
	} else if (bson_iter_as_int64(&it) == 0) {
		out->status = REPLY_NOT_FOUND;
	}
}

/* The first message of "errmsg" in reply or in its writeErrors, or NULL
 * when the command succeeded. */
static const char *reply_error(const bson_t *reply)
{
	bson_iter_t it, sub, e;

	if (bson_iter_init_find(&it, reply, "ok") && !bson_iter_as_bool(&it))
		return bson_iter_init_find(&it, reply, "errmsg") &&
			       BSON_ITER_HOLDS_UTF8(&it)
			   ? bson_iter_utf8(&it, NULL)
			   : "command failed";
	if (bson_iter_init_find(&it, reply, "writeErrors") &&
	    BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub) &&
	    bson_iter_next(&sub)) {
		if (BSON_ITER_HOLDS_DOCUMENT(&sub) &&
		    bson_iter_recurse(&sub, &e) &&
		    bson_iter_find(&e, "errmsg") && BSON_ITER_HOLDS_UTF8(&e))
			return bson_iter_utf8(&e, NULL);
		return "write error";
	}
	return NULL;
}

/* The body of the next complete message in in: 1 (reply set up), 0 not
 * all there yet, -1 not an OP_MSG of one body section. */
static int next_msg(struct mwconn *mc, bson_t *reply)
{
	struct mwbuf *b = &mc->in;
	const uint8_t *p;
	uint32_t n, blen;

	b->off += mc->done;
	mc->done = 0;
	if (b->off == b->len)
		b->off = b->len = 0;
	if (b->len - b->off < 4)
		return 0;
	p = b->p + b->off;
	n = get_le32(p);
	if (n < 26 || n > MW_MAX_MSG)
		return -1;
	if (b->len - b->off < n)
		return 0;
	blen = get_le32(p + 21);
	if (get_le32(p + 12) != MW_OP_MSG || p[20] != 0 || blen > n - 21 ||
	    !bson_init_static(reply, p + 21, blen))
		return -1;
	mc->done = n;
	return 1;
}

static int mw_reply(void *c, enum kb_req_kind kind, int field,
		    struct kb_reply *out)
{
	struct mwconn *mc = c;
	bson_t reply;
	const char *e;
	int rc = next_msg(mc, &reply);

	(void)field;
	if (rc <= 0) {
		if (rc < 0)
			snprintf(mc->err, sizeof(mc->err),
				 "mongowire: a reply that is not OP_MSG");
		return rc;
	}
	memset(out, 0, sizeof(*out));
	out->status = REPLY_OK;
	if ((e = reply_error(&reply))) {
		snprintf(mc->err, sizeof(mc->err), "%s", e);
		out->status = REPLY_ERROR;
		out->msg = mc->err;
	} else if (kind == REQ_GET || kind == REQ_READ || kind == REQ_SCAN ||
		   kind == REQ_FSCAN || kind == REQ_IXFIND ||
		   kind == REQ_IXRANGE) {
		find_reply(mc, kind, &reply, out);
	} else if (kind == REQ_UPDATE) {
		update_reply(&reply, out);
	}
	return 1;
}

static const char *mw_errmsg(void *c)
{
	return ((struct mwconn *)c)->err;
}

static int run_blocking(struct mwconn *mc, const bson_t *cmd, char *err,
			size_t errlen)
{
	struct kb_reply r;
	int rc;

	if (queue_msg(mc, cmd)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while ((rc = mw_flush(mc)) == 1)
		usleep(1000);
	while (rc == 0 && (rc = mw_reply(mc, REQ_IXINSERT, -1, &r)) == 0) {
		usleep(1000);
		rc = mw_input(mc);
	}
	if (rc < 0 || r.status != REPLY_OK) {
		snprintf(err, errlen, "%s", mc->err);
		return -1;
	}
	return 0;
}

/* createIndexes of k_1, r_1 and s_1, as driver_mongo.c's. */
static int mw_setup(const struct kb_target *t, char *err, size_t errlen)
{
	struct mwconn *mc;
	bson_t cmd = BSON_INITIALIZER;
	int rc;

	if (!(mc = mw_connect(t, err, errlen)))
		return -1;
	if (!t->index || t->no_index) {
		mw_close(mc);
		return 0;
	}
	mconv_ix_create(&cmd, t->table);
	BSON_APPEND_UTF8(&cmd, "$db", MW_DB);
	rc = run_blocking(mc, &cmd, err, errlen);
	bson_destroy(&cmd);
	mw_close(mc);
	return rc;
}

const struct kb_driver driver_mongowire = {
    .name = "mongowire",
    .default_port = 27017,
    .fields = 1,
    .fields_ops = "insert, find by _id, update $set (OP_MSG)",
    .setup = mw_setup,
    .connect = mw_connect,
    .fd = mw_fd,
    .send = mw_send,
    .flush = mw_flush,
    .input = mw_input,
    .reply = mw_reply,
    .errmsg = mw_errmsg,
    .close = mw_close,
};
