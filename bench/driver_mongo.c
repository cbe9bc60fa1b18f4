/* driver_mongo.c - kvbench's MongoDB driver, through libmongoc: for mongod
 * and for any server speaking MongoDB's wire protocol.
 *
 * --record fields, as YCSB's mongodb binding: a record is a document
 * {_id: key, field0: "...", ...}; a read is a find by _id (with the
 * projection {fieldN: 1} when one field is read), an update one updateOne
 * with $set of the fields written, an insert insertOne, a scan a find of
 * {_id: {$gte: key}} sorted by _id with a limit.  An update that matched
 * no document answers "not found", as the other drivers do.  An insert of
 * a key already there is the server's duplicate key error: a load expects
 * an empty collection, as YCSB's does.
 *
 * --record value and the other workloads: a value that is one msgpack map
 * (the geo workload's document, a --record value record) is stored as the
 * document it is, its maps as subdocuments, its strings, binaries,
 * integers and doubles as BSON's; any other value as {_id, value:
 * BinData}.  A put is a replaceOne with upsert, a get converts the
 * document back to the same msgpack bytes (so --verify compares them).
 *
 * The indexed-document workloads (ixdocs.h): setup creates the indexes
 * k_1, r_1 and s_1 (one createIndexes, unless --no-index); an insert is
 * insertOne of the document; a query find {k: v}, {r: v} or {_id: key}, a
 * range find {r: {$gte: v}} sorted by {r: 1} with a limit, every document
 * read whole.  A query that finds nothing answers "not found": every value
 * asked for is one a loaded document has.
 *
 * libmongoc has no asynchronous API: each connection is one mongoc client
 * driven by a thread of its own, which takes the requests queued by send()
 * in order and says each reply is ready through an eventfd that the engine
 * polls.  Requests pipelined on one connection therefore run one after
 * the other, as they would on one socket; the latencies include the hop
 * between the two threads (a few microseconds).
 */
#include <errno.h>
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kvbench.h"
#include "mongo_conv.h"
#include "record.h"

/* One request and, once done, its reply. */
struct mjob {
	struct mjob *next;
	enum kb_req_kind kind;
	int field;
	unsigned count;
	int64_t ival; /* IXFIND, IXRANGE */
	char key[KB_REQ_KEY_MAX + 1];
	bson_t *doc; /* INSERT, PUT: the document; UPDATE: the $set */
	/* the reply */
	int done, failed; /* failed: the connection, not the request */
	enum kb_status status;
	unsigned items;
	bson_t *found; /* READ, GET: the document */
	char msg[sizeof(((bson_error_t *)0)->message)];
};

struct mconn {
	mongoc_client_t *client;
	mongoc_collection_t *coll;
	int efd;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mjob *head, *tail, *next; /* queue; next: the worker's */
	int stop;
	struct mjob *prev; /* the last handed out */
	struct kb_fval *fv;
	unsigned nf;
	uint8_t *vbuf;
	size_t vcap;
	int index_only; /* kb_target's */
	char err[sizeof(((bson_error_t *)0)->message)];
};

static pthread_once_t mongo_once = PTHREAD_ONCE_INIT;

/* libmongoc's log: its warnings and errors; its debug lines (each failed
 * authentication is told twice) repeat what the error says. */
static void mongo_log(mongoc_log_level_t level, const char *domain,
		      const char *msg, void *arg)
{
	(void)arg;
	if (level <= MONGOC_LOG_LEVEL_WARNING)
		fprintf(stderr, "kvbench: libmongoc %s: %s\n", domain, msg);
}

static void mongo_init_once(void)
{
	mongoc_init();
	mongoc_log_set_handler(mongo_log, NULL);
}

/* The database: the URI's, else "kvbench". */
static const char *db_name(const mongoc_uri_t *u)
{
	const char *db = mongoc_uri_get_database(u);

	return db && *db ? db : "kvbench";
}

/* --conninfo (or -u) as a mongodb:// URI, else -h/-p and the password
 * (user --user, SCRAM-SHA-256, authSource admin). */
static mongoc_uri_t *make_uri(const struct kb_target *t, char *err,
			      size_t errlen)
{
	bson_error_t e;
	mongoc_uri_t *u;

	if (t->conninfo) {
		if (!(u = mongoc_uri_new_with_error(t->conninfo, &e)))
			snprintf(err, errlen, "bad mongodb URI: %s", e.message);
		return u;
	}
	if (t->host[0] == '/') {
		snprintf(err, errlen, "mongodb: no Unix sockets (give a URI)");
		return NULL;
	}
	if (!(u = mongoc_uri_new_for_host_port(t->host, (uint16_t)t->port))) {
		snprintf(err, errlen, "bad host %s", t->host);
		return NULL;
	}
	mongoc_uri_set_option_as_bool(u, MONGOC_URI_DIRECTCONNECTION, true);
	if (t->password) {
		mongoc_uri_set_username(u, t->user ? t->user : "kvd");
		mongoc_uri_set_password(u, t->password);
		mongoc_uri_set_auth_mechanism(u, "SCRAM-SHA-256");
		mongoc_uri_set_auth_source(u, "admin");
	}
	return u;
}

/* A client of t's server, checked with a ping (so that a refused
 * connection or a wrong password fails here, not in the first request). */
static mongoc_client_t *open_client(const struct kb_target *t, const char **db,
				    char *err, size_t errlen)
{
	mongoc_uri_t *u;
	mongoc_client_t *c = NULL;
	bson_t ping = BSON_INITIALIZER;
	bson_error_t e;

	pthread_once(&mongo_once, mongo_init_once);
	if (!(u = make_uri(t, err, errlen)))
		return NULL;
	mongoc_uri_set_appname(u, "kvbench");
	*db = strdup(db_name(u));
	c = mongoc_client_new_from_uri_with_error(u, &e);
	if (!c || !*db) {
		snprintf(err, errlen, "%s", c ? "out of memory" : e.message);
		goto fail;
	}
	mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
	BSON_APPEND_INT32(&ping, "ping", 1);
	if (!mongoc_client_command_simple(c, "admin", &ping, NULL, NULL, &e)) {
		snprintf(err, errlen, "%s", e.message);
		goto fail;
	}
	bson_destroy(&ping);
	mongoc_uri_destroy(u);
	return c;
fail:
	bson_destroy(&ping);
	mongoc_client_destroy(c);
	mongoc_uri_destroy(u);
	free((char *)*db);
	*db = NULL;
	return NULL;
}

/* createIndexes of k_1, r_1 and s_1 on the collection: the index
 * workloads'.  Indexes already there are the server's note, not an
 * error. */
static int create_indexes(mongoc_client_t *c, const char *db,
			  const struct kb_target *t, char *err, size_t errlen)
{
	bson_t cmd = BSON_INITIALIZER;
	bson_error_t e;
	int ok;

	mconv_ix_create(&cmd, t->table);
	ok = mongoc_client_command_simple(c, db, &cmd, NULL, NULL, &e);
	if (!ok)
		snprintf(err, errlen, "createIndexes: %s", e.message);
	bson_destroy(&cmd);
	return ok ? 0 : -1;
}

static int mongo_setup(const struct kb_target *t, char *err, size_t errlen)
{
	const char *db;
	mongoc_client_t *c = open_client(t, &db, err, errlen);
	int rc = 0;

	if (!c)
		return -1;
	if (t->index && !t->no_index)
		rc = create_indexes(c, db, t, err, errlen);
	free((char *)db);
	mongoc_client_destroy(c);
	return rc;
}

/* ---- the worker ------------------------------------------------------ */

/* Whether e is the connection's failure rather than the request's. */
static int conn_error(const bson_error_t *e)
{
	return e->domain == MONGOC_ERROR_STREAM ||
	       e->domain == MONGOC_ERROR_SERVER_SELECTION ||
	       e->domain == MONGOC_ERROR_CLIENT;
}

static void job_error(struct mjob *j, const bson_error_t *e)
{
	j->status = REPLY_ERROR;
	j->failed = conn_error(e);
	snprintf(j->msg, sizeof(j->msg), "%s", e->message);
}

static const char *const ix_names[] = {"k", "r", "_id"};

/* The index workloads' filter and options: {f: v} or {_id: key}; {r:
 * {$gte: v}} sorted by r, with a limit; with index_only the projection
 * {f: 1, _id: 0} (a covered query). */
static void ix_query(const struct mjob *j, int index_only, bson_t *filter,
		     bson_t *opts)
{
	bson_t sub;

	if (j->kind == REQ_IXRANGE) {
		BSON_APPEND_DOCUMENT_BEGIN(filter, "r", &sub);
		BSON_APPEND_INT64(&sub, "$gte", j->ival);
		bson_append_document_end(filter, &sub);
		BSON_APPEND_DOCUMENT_BEGIN(opts, "sort", &sub);
		BSON_APPEND_INT32(&sub, "r", 1);
		bson_append_document_end(opts, &sub);
		BSON_APPEND_INT64(opts, "limit", j->count);
	} else if (j->field == IX_ID) {
		BSON_APPEND_UTF8(filter, "_id", j->key);
	} else {
		BSON_APPEND_INT64(filter, ix_names[j->field], j->ival);
	}
	if (index_only && j->field != IX_ID) {
		BSON_APPEND_DOCUMENT_BEGIN(opts, "projection", &sub);
		BSON_APPEND_INT32(&sub, ix_names[j->field], 1);
		BSON_APPEND_INT32(&sub, "_id", 0);
		bson_append_document_end(opts, &sub);
	}
}

static void run_ix_find(struct mconn *mc, struct mjob *j)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER;
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_error_t e;

	ix_query(j, mc->index_only, &filter, &opts);
	cur = mongoc_collection_find_with_opts(mc->coll, &filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &d))
		j->items++;
	if (mongoc_cursor_error(cur, &e))
		job_error(j, &e);
	else if (j->kind == REQ_IXFIND && !j->items)
		j->status = REPLY_NOT_FOUND;
	mongoc_cursor_destroy(cur);
	bson_destroy(&filter);
	bson_destroy(&opts);
}

static void run_find(struct mconn *mc, struct mjob *j)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sub;
	int scan = j->kind == REQ_FSCAN || j->kind == REQ_SCAN;
	mongoc_cursor_t *cur;
	const bson_t *d;
	bson_error_t e;

	if (scan) {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &sub);
		BSON_APPEND_UTF8(&sub, "$gte", j->key);
		bson_append_document_end(&filter, &sub);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sub);
		BSON_APPEND_INT32(&sub, "_id", 1);
		bson_append_document_end(&opts, &sub);
	} else {
		BSON_APPEND_UTF8(&filter, "_id", j->key);
	}
	BSON_APPEND_INT64(&opts, "limit", scan ? j->count : 1);
	if (j->field >= 0 && j->kind != REQ_GET) {
		char name[KB_FIELD_NAME_MAX];

		kb_field_name((unsigned)j->field, name);
		BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &sub);
		BSON_APPEND_INT32(&sub, name, 1);
		bson_append_document_end(&opts, &sub);
	}
	cur = mongoc_collection_find_with_opts(mc->coll, &filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &d)) {
		if (!scan && !j->found)
			j->found = bson_copy(d);
		j->items++;
	}
	if (mongoc_cursor_error(cur, &e))
		job_error(j, &e);
	else if (!scan && !j->found)
		j->status = REPLY_NOT_FOUND;
	mongoc_cursor_destroy(cur);
	bson_destroy(&filter);
	bson_destroy(&opts);
}

static void run_write(struct mconn *mc, struct mjob *j)
{
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, reply;
	bson_error_t e;
	bson_iter_t it;
	bool ok;

	BSON_APPEND_UTF8(&filter, "_id", j->key);
	if (j->kind == REQ_INSERT || j->kind == REQ_IXINSERT) {
		ok = mongoc_collection_insert_one(mc->coll, j->doc, NULL,
						  &reply, &e);
	} else if (j->kind == REQ_PUT) {
		BSON_APPEND_BOOL(&opts, "upsert", true);
		ok = mongoc_collection_replace_one(mc->coll, &filter, j->doc,
						   &opts, &reply, &e);
	} else {
		ok = mongoc_collection_update_one(mc->coll, &filter, j->doc,
						  NULL, &reply, &e);
		if (ok && bson_iter_init_find(&it, &reply, "matchedCount") &&
		    bson_iter_as_int64(&it) == 0)
			j->status = REPLY_NOT_FOUND;
	}
	if (!ok)
		job_error(j, &e);
	bson_destroy(&reply);
	bson_destroy(&filter);
	bson_destroy(&opts);
}

static void *worker(void *arg)
{
	struct mconn *mc = arg;
	uint64_t one = 1;

	for (;;) {
		struct mjob *j;

		pthread_mutex_lock(&mc->mu);
		while (!mc->next && !mc->stop)
			pthread_cond_wait(&mc->cv, &mc->mu);
		j = mc->next;
		if (j)
			mc->next = j->next;
		pthread_mutex_unlock(&mc->mu);
		if (!j)
			return NULL;
		j->status = REPLY_OK;
		if (j->kind == REQ_INSERT || j->kind == REQ_PUT ||
		    j->kind == REQ_UPDATE || j->kind == REQ_IXINSERT)
			run_write(mc, j);
		else if (j->kind == REQ_IXFIND || j->kind == REQ_IXRANGE)
			run_ix_find(mc, j);
		else
			run_find(mc, j);
		pthread_mutex_lock(&mc->mu);
		j->done = 1;
		pthread_mutex_unlock(&mc->mu);
		if (write(mc->efd, &one, 8) < 0)
			(void)0; /* the counter is full: already readable */
	}
}

/* ---- the engine's side ----------------------------------------------- */

static void job_free(struct mjob *j)
{
	if (!j)
		return;
	if (j->doc)
		bson_destroy(j->doc);
	if (j->found)
		bson_destroy(j->found);
	free(j);
}

static void mongo_close(void *c);

static void *mongo_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct mconn *mc = calloc(1, sizeof(*mc));
	const char *db = NULL;

	if (!mc) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	mc->efd = -1;
	mc->index_only = t->index_only;
	pthread_mutex_init(&mc->mu, NULL);
	pthread_cond_init(&mc->cv, NULL);
	if (!(mc->client = open_client(t, &db, err, errlen)))
		goto fail;
	mc->coll = mongoc_client_get_collection(mc->client, db, t->table);
	free((char *)db);
	mc->nf = t->fieldcount ? t->fieldcount : 1;
	mc->fv = calloc(mc->nf, sizeof(*mc->fv));
	mc->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!mc->fv || mc->efd < 0) {
		snprintf(err, errlen, "out of memory or descriptors");
		goto fail;
	}
	if (pthread_create(&mc->th, NULL, worker, mc)) {
		snprintf(err, errlen, "cannot start a thread");
		goto fail;
	}
	return mc;
fail:
	if (mc->efd >= 0)
		close(mc->efd);
	mongoc_collection_destroy(mc->coll);
	mongoc_client_destroy(mc->client);
	pthread_mutex_destroy(&mc->mu);
	pthread_cond_destroy(&mc->cv);
	free(mc->fv);
	free(mc);
	return NULL;
}

static int mongo_fd(void *c)
{
	return ((struct mconn *)c)->efd;
}

/* The document of an insert ({_id, fields}) or an update ({$set}). */
static bson_t *fields_doc(const struct kb_req *r)
{
	bson_t *d = bson_new(), sub, *to = d;
	char name[KB_FIELD_NAME_MAX];

	if (r->kind == REQ_INSERT) {
		bson_append_utf8(d, "_id", 3, r->key, (int)r->klen);
	} else {
		BSON_APPEND_DOCUMENT_BEGIN(d, "$set", &sub);
		to = &sub;
	}
	for (unsigned i = 0; i < r->nfv; i++) {
		size_t n = kb_field_name(r->fv[i].idx, name);

		bson_append_utf8(to, name, (int)n, (const char *)r->fv[i].val,
				 (int)r->fv[i].len);
	}
	if (to != d)
		bson_append_document_end(d, &sub);
	return d;
}

static int mongo_send(void *c, const struct kb_req *r)
{
	struct mconn *mc = c;
	struct mjob *j = calloc(1, sizeof(*j));

	if (!j || r->klen > KB_REQ_KEY_MAX)
		goto fail;
	j->kind = r->kind;
	j->field = r->field;
	j->count = r->count;
	j->ival = r->ival;
	if ((r->kind == REQ_IXFIND || r->kind == REQ_IXRANGE) &&
	    (r->field < IX_K || r->field > IX_ID)) {
		snprintf(mc->err, sizeof(mc->err), "no such index field");
		free(j);
		return -1;
	}
	memcpy(j->key, r->key, r->klen);
	if (r->kind == REQ_INSERT || r->kind == REQ_UPDATE)
		j->doc = fields_doc(r);
	else if (r->kind == REQ_PUT || r->kind == REQ_IXINSERT)
		j->doc = mconv_value_doc(r->key, r->klen, r->val, r->vlen);
	if ((r->kind == REQ_INSERT || r->kind == REQ_UPDATE ||
	     r->kind == REQ_PUT || r->kind == REQ_IXINSERT) &&
	    !j->doc)
		goto fail;
	pthread_mutex_lock(&mc->mu);
	if (mc->tail)
		mc->tail->next = j;
	else
		mc->head = j;
	mc->tail = j;
	if (!mc->next)
		mc->next = j;
	pthread_cond_signal(&mc->cv);
	pthread_mutex_unlock(&mc->mu);
	return 0;
fail:
	snprintf(mc->err, sizeof(mc->err), "out of memory");
	job_free(j);
	return -1;
}

static int mongo_flush(void *c)
{
	(void)c;
	return 0; /* the worker writes */
}

static int mongo_input(void *c)
{
	uint64_t n;

	if (read(((struct mconn *)c)->efd, &n, 8) < 0 && errno != EAGAIN)
		return -1;
	return 0;
}

/* A found document's fieldN strings as the record's fields. */
static void read_fields(struct mconn *mc, const bson_t *d, struct kb_reply *out)
{
	bson_iter_t it;

	out->fields = mc->fv;
	if (!bson_iter_init(&it, d))
		return;
	while (bson_iter_next(&it) && out->nfields < mc->nf) {
		const char *k = bson_iter_key(&it);
		struct kb_fval *fv;
		uint32_t len;

		if (strcmp(k, "_id") == 0)
			continue;
		fv = &mc->fv[out->nfields++];
		if (rec_field_index(k, strlen(k), &fv->idx) ||
		    !BSON_ITER_HOLDS_UTF8(&it))
			fv->idx = UINT32_MAX; /* not one of ours: wrong */
		fv->val = (const uint8_t *)bson_iter_utf8(&it, &len);
		fv->len = BSON_ITER_HOLDS_UTF8(&it) ? len : 0;
	}
}

static int mongo_reply(void *c, enum kb_req_kind kind, int field,
		       struct kb_reply *out)
{
	struct mconn *mc = c;
	struct mjob *j;

	(void)field;
	job_free(mc->prev);
	mc->prev = NULL;
	pthread_mutex_lock(&mc->mu);
	j = mc->head && mc->head->done ? mc->head : NULL;
	if (j && !(mc->head = j->next))
		mc->tail = NULL;
	pthread_mutex_unlock(&mc->mu);
	if (!j)
		return 0;
	mc->prev = j;
	if (j->failed) {
		snprintf(mc->err, sizeof(mc->err), "%s", j->msg);
		return -1;
	}
	out->status = j->status;
	out->msg = j->msg;
	out->items = j->items;
	if (j->status != REPLY_OK || !j->found)
		return 1;
	if (kind == REQ_READ) {
		read_fields(mc, j->found, out);
	} else if (kind == REQ_GET) {
		if (mconv_doc_value(j->found, &mc->vbuf, &mc->vcap,
				    &out->vlen)) {
			out->status = REPLY_ERROR;
			out->msg = "a document kvbench cannot read back";
			return 1;
		}
		out->val = mc->vbuf;
	}
	return 1;
}

static const char *mongo_errmsg(void *c)
{
	return ((struct mconn *)c)->err;
}

static void mongo_close(void *c)
{
	struct mconn *mc = c;

	pthread_mutex_lock(&mc->mu);
	mc->stop = 1;
	mc->next = NULL; /* what was not started is not run */
	pthread_cond_signal(&mc->cv);
	pthread_mutex_unlock(&mc->mu);
	pthread_join(mc->th, NULL);
	while (mc->head) {
		struct mjob *j = mc->head;

		mc->head = j->next;
		job_free(j);
	}
	job_free(mc->prev);
	close(mc->efd);
	mongoc_collection_destroy(mc->coll);
	mongoc_client_destroy(mc->client);
	pthread_mutex_destroy(&mc->mu);
	pthread_cond_destroy(&mc->cv);
	free(mc->fv);
	free(mc->vbuf);
	free(mc);
}

const struct kb_driver driver_mongo = {
    .name = "mongodb",
    .default_port = 27017,
    .fields = 1,
    .fields_ops = "insertOne, find by _id, updateOne $set",
    .setup = mongo_setup,
    .connect = mongo_connect,
    .fd = mongo_fd,
    .send = mongo_send,
    .flush = mongo_flush,
    .input = mongo_input,
    .reply = mongo_reply,
    .errmsg = mongo_errmsg,
    .close = mongo_close,
};
