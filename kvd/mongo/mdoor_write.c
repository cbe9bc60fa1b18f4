/* mdoor_write.c - the write commands insert, update and delete: their
 * statements (an array of the body, or the OP_MSG document sequence of
 * that name) checked and compiled as mongod does, handed to the store as
 * one batch (so that a batch of many statements is few commits), and
 * answered when the store is done: {n, nModified, upserted: [{index,
 * _id}], writeErrors: [{index, code, errmsg}], ok: 1}.
 *
 * A statement the door finds wrong (a malformed document, an unknown
 * update operator) is a write error at its index, as in mongod: an
 * ordered batch stops there (the statements before it still run), an
 * unordered one goes on without it.  Inserted documents get an ObjectId
 * _id when they have none, and their _id first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_int.h"
#include "mdoor_write.h"
#include "mql_key.h"
#include "mql_value.h"

/* ===================== the batch state ===================== */

void mdoor_wstate_free(void *p)
{
	struct mdoor_wstate *w = p;

	if (!w)
		return;
	for (size_t i = 0; i < w->b.nops; i++) {
		mql_match_free((struct mql_match *)w->ops[i].q);
		mql_update_free((struct mql_update *)w->ops[i].u);
		mql_sort_free((struct mql_sort *)w->ops[i].sort);
		bson_destroy(&w->ops[i].upserted);
		bson_destroy(&w->ops[i].value);
		bson_destroy(&w->ops[i].errinfo);
		free((void *)w->ops[i].q_bson);
		free((void *)w->ops[i].u_bson);
		free((void *)w->ops[i].hint);
	}
	for (size_t i = 0; i < w->npre; i++)
		free(w->pre[i].msg);
	mql_project_free(w->proj);
	free(w->pre);
	bson_free(w->ops);
	free(w->stmt);
	free(w->ids);
	free(w->arena);
	free(w);
}

struct mdoor_wstate *mdoor_wstate_new(struct mdoor_req *r,
				      enum mdoor_wkind kind, const char *coll,
				      size_t nstmt, bool ordered)
{
	struct mdoor_wstate *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	/* libbson's types in a mdoor_wop ask for 128-byte alignment */
	w->ops = bson_aligned_alloc0(BSON_ALIGNOF(struct mdoor_wop),
				     (nstmt ? nstmt : 1) * sizeof(*w->ops));
	w->stmt = calloc(nstmt ? nstmt : 1, sizeof(*w->stmt));
	w->ids = calloc(nstmt ? nstmt : 1, sizeof(*w->ids));
	if (!w->ops || !w->stmt || !w->ids) {
		mdoor_wstate_free(w);
		return NULL;
	}
	snprintf(w->db, sizeof(w->db), "%s", r->db);
	snprintf(w->coll, sizeof(w->coll), "%s", coll ? coll : "");
	w->b.kind = kind;
	w->b.db = w->db;
	w->b.coll = coll ? w->coll : NULL;
	w->b.ordered = ordered;
	w->b.ops = w->ops;
	w->ordered = ordered;
	return w;
}

int mdoor_wop_hint(struct mdoor_wop *op, const bson_iter_t *it)
{
	const uint8_t *h = NULL;
	uint32_t hl = 0;
	uint8_t *c;

	mdoor_arg_hint(it, &h, &hl, &op->hint_name);
	if (!h)
		return 0; /* none */
	if (!(c = malloc((size_t)hl + 1)))
		return -1;
	memcpy(c, h, hl);
	c[hl] = 0;
	op->hint = c;
	op->hint_len = hl;
	return 0;
}

int mdoor_wop_keep(struct mdoor_wop *op, const uint8_t *q, uint32_t ql,
		   const uint8_t *u, uint32_t ul)
{
	uint8_t *qc = q ? malloc(ql) : NULL, *uc = u ? malloc(ul) : NULL;

	if ((q && !qc) || (u && !uc)) {
		free(qc);
		free(uc);
		return -1;
	}
	if (q)
		memcpy(qc, q, ql);
	if (u)
		memcpy(uc, u, ul);
	op->q_bson = qc;
	op->q_len = q ? ql : 0;
	op->u_bson = uc;
	op->u_len = u ? ul : 0;
	return 0;
}

/* The next op of the batch, for statement index i. */
struct mdoor_wop *mdoor_wstate_op(struct mdoor_wstate *w, uint32_t i)
{
	struct mdoor_wop *op = &w->ops[w->b.nops];

	bson_init(&op->upserted);
	bson_init(&op->value);
	bson_init(&op->errinfo);
	w->stmt[w->b.nops++] = i;
	return op;
}

/* A statement the door refused; 0, or -1 out of memory. */
int mdoor_wstate_refuse(struct mdoor_wstate *w, uint32_t i,
			const struct mql_error *e)
{
	if (w->npre == w->cpre) {
		size_t n = w->cpre ? w->cpre * 2 : 8;
		struct mdoor_prerr *p = realloc(w->pre, n * sizeof(*p));

		if (!p)
			return -1;
		w->pre = p;
		w->cpre = n;
	}
	w->pre[w->npre].index = i;
	w->pre[w->npre].code = e->code;
	w->pre[w->npre].msg = strdup(e->msg);
	if (!w->pre[w->npre].msg)
		return -1;
	w->npre++;
	return 0;
}

static void write_error(bson_t *arr, uint32_t *n, uint32_t index, int code,
			const char *msg, const bson_t *info)
{
	char key[16];
	const char *k;
	bson_t e;

	bson_uint32_to_string((*n)++, &k, key, sizeof(key));
	bson_append_document_begin(arr, k, -1, &e);
	BSON_APPEND_INT32(&e, "index", (int32_t)index);
	BSON_APPEND_INT32(&e, "code", code);
	if (info && !bson_empty(info)) /* mongod's order: keys, errmsg */
		bson_concat(&e, info);
	BSON_APPEND_UTF8(&e, "errmsg", msg);
	bson_append_document_end(arr, &e);
}

/* writeErrors in statement order: the store's and the door's merged; an
 * ordered batch reports only its first. */
void mdoor_write_errors(struct mdoor_wstate *w, bson_t *reply)
{
	bson_t arr;
	uint32_t n = 0;
	size_t i = 0, j = 0;

	while (i < w->b.nops || j < w->npre) {
		bool store_next =
		    i < w->b.nops &&
		    (j == w->npre || w->stmt[i] < w->pre[j].index);

		if (store_next) {
			struct mdoor_wop *op = &w->ops[i];

			if (op->err.code) {
				if (!n)
					BSON_APPEND_ARRAY_BEGIN(
					    reply, "writeErrors", &arr);
				write_error(&arr, &n, w->stmt[i], op->err.code,
					    op->err.msg, &op->errinfo);
			}
			i++;
		} else {
			if (!n)
				BSON_APPEND_ARRAY_BEGIN(reply, "writeErrors",
							&arr);
			write_error(&arr, &n, w->pre[j].index, w->pre[j].code,
				    w->pre[j].msg, NULL);
			j++;
		}
		if (n && w->ordered)
			break;
	}
	if (n)
		bson_append_array_end(reply, &arr);
}

/* Submit the batch, or answer at once when the door refused all. */
int mdoor_wstate_submit(struct mdoor_req *r, struct mdoor_wstate *w,
			mdoor_finish_fn finish, struct mql_error *err)
{
	int rc;

	if (w->b.nops == 0) {
		rc = finish(r, &w->b, err);
		mdoor_wstate_free(w);
		return rc;
	}
	return mdoor_submit(r, &w->b, finish, w, mdoor_wstate_free, err);
}

/* Statement count of a write command: 1..100,000 (MongoDB: 16
 * InvalidLength). */
static int count_stmts(struct mdoor_docs *d, size_t *n, struct mql_error *err)
{
	struct mdoor_docs c = *d;
	const uint8_t *doc;
	uint32_t len;
	int rc;

	*n = 0;
	while ((rc = mdoor_docs_next(&c, &doc, &len, err)) == 1)
		(*n)++;
	if (rc < 0)
		return -1;
	if (*n == 0 || *n > MDOOR_MAX_WRITE_BATCH)
		return mdoor_err(err, 16,
				 "Write batch sizes must be between 1 and "
				 "%d. Got %zu operations.",
				 MDOOR_MAX_WRITE_BATCH, *n);
	return 0;
}

/* serverStatus's opcounters count documents inserted and statements of
 * updates and deletes, as mongod's do (mongostat's inserts/s): the
 * dispatcher counted the command as one, the other n - 1 here. */
static void count_more(struct mdoor *d, const char *field, size_t n)
{
	_Atomic uint64_t *c = !strcmp(field, "documents") ? &d->c_insert
			      : !strcmp(field, "updates") ? &d->c_update
							  : &d->c_delete;

	if (n > 1)
		atomic_fetch_add_explicit(c, n - 1, memory_order_relaxed);
}

int mdoor_write_open(struct mdoor_req *r, const char *field,
		     const bson_iter_t *arg, struct mdoor_docs *d, size_t *n,
		     struct mql_error *err)
{
	int rc = mdoor_docs_open(r, field, arg, d, err);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return mdoor_err(err, MDOOR_IDLFailedToParse,
				 "BSON field '%s.%s' is missing but a required "
				 "field",
				 r->cmd, field);
	if (count_stmts(d, n, err))
		return -1;
	count_more(r->mc->d, field, *n);
	return 0;
}

/* ===================== insert ===================== */

int mdoor_doc_prepare(const uint8_t *doc, uint32_t len, bson_t *out,
		      struct mql_error *err)
{
	bson_t in;
	bson_iter_t it;
	bool first_id = false, has_id = false;
	uint8_t key[MQL_KEY_ID_MAX];
	size_t klen;

	bson_init(out);
	if (mql_bson_check(doc, len, MQL_MAX_DOC_SIZE, MQL_MAX_DOC_DEPTH, err))
		return -1;
	bson_init_static(&in, doc, len);
	bson_iter_init(&it, &in);
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "_id"))
			continue;
		if (has_id)
			return mdoor_err(err, MQL_BadValue,
					 "can't have multiple _id fields in "
					 "one document");
		has_id = true;
		first_id = bson_iter_offset(&it) == 4;
		if (mql_key_id(bson_iter_value(&it), key, &klen, err))
			return -1;
	}
	if (!has_id) {
		bson_oid_t oid;

		bson_oid_init(&oid, NULL);
		BSON_APPEND_OID(out, "_id", &oid);
	} else if (!first_id) {
		bson_iter_init_find(&it, &in, "_id");
		bson_append_iter(out, "_id", 3, &it);
	}
	if (has_id && first_id) {
		bson_destroy(out);
		bson_init_static(out, doc, len);
	} else {
		bson_iter_init(&it, &in);
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "_id"))
				bson_append_iter(out, NULL, 0, &it);
	}
	if (out->len > MQL_MAX_DOC_SIZE) {
		bson_destroy(out);
		bson_init(out);
		return mdoor_err(err, MQL_BSONObjectTooLarge,
				 "object to insert too large. size in bytes: "
				 "%u, max size: %d",
				 (unsigned)len, MQL_MAX_DOC_SIZE);
	}
	return 0;
}

/* Copy doc into the arena as mdoor_doc_prepare makes it; its offset in
 * *off.  0, 1 refused (err), -1 out of memory. */
static int take_doc(struct mdoor_wstate *w, const uint8_t *doc, uint32_t len,
		    size_t *off, struct mql_error *err)
{
	bson_t out;

	if (mdoor_doc_prepare(doc, len, &out, err))
		return 1;
	if (w->alen + out.len > w->acap) {
		size_t cap = (w->alen + out.len) * 2;
		uint8_t *a = realloc(w->arena, cap);

		if (!a) {
			bson_destroy(&out);
			return -1;
		}
		w->arena = a;
		w->acap = cap;
	}
	memcpy(w->arena + w->alen, bson_get_data(&out), out.len);
	*off = w->alen;
	w->alen += out.len;
	bson_destroy(&out);
	return 0;
}

static int insert_done(struct mdoor_req *r, struct mdoor_wbatch *b,
		       struct mql_error *err)
{
	struct mdoor_wstate *w = (struct mdoor_wstate *)b;
	int64_t n = 0;

	if (b->err.code) {
		*err = b->err;
		return -1;
	}
	for (size_t i = 0; i < b->nops; i++)
		if (b->ops[i].ran && !b->ops[i].err.code)
			n += b->ops[i].n ? b->ops[i].n : 1;
	BSON_APPEND_INT32(&r->reply, "n", (int32_t)n);
	mdoor_write_errors(w, &r->reply);
	return 0;
}

static int insert_stmts(struct mdoor_wstate *w, struct mdoor_docs *d,
			struct mql_error *err)
{
	const uint8_t *doc;
	uint32_t len, i = 0;
	size_t off;
	int rc;

	while (mdoor_docs_next(d, &doc, &len, err) == 1) {
		struct mql_error e;

		mql_error_clear(&e);
		rc = take_doc(w, doc, len, &off, &e);
		if (rc < 0)
			return mdoor_err(err, MDOOR_ExceededMemoryLimit,
					 "out of memory");
		if (rc == 1) {
			if (mdoor_wstate_refuse(w, i, &e))
				return mdoor_err(err, MDOOR_ExceededMemoryLimit,
						 "out of memory");
			if (w->ordered)
				break;
		} else {
			/* the arena moves as it grows: offsets for now */
			mdoor_wstate_op(w, i)->len = (uint32_t)off;
		}
		i++;
	}
	for (size_t k = 0; k < w->b.nops; k++) {
		off = w->ops[k].len;
		w->ops[k].doc = w->arena + off;
		w->ops[k].len = (uint32_t)mdoor_le32(w->arena + off);
	}
	return 0;
}

static int cmd_insert(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"documents", MDOOR_T_ARRAY, true},
	    {"ordered", MDOOR_T_BOOLISH, false},
	    {"bypassDocumentValidation", MDOOR_T_BOOLISH, false},
	};
	mdoor_av a[3];
	struct mdoor_docs d;
	struct mdoor_wstate *w;
	const char *coll;
	size_t n;

	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 3, a, err) ||
	    mdoor_write_open(r, "documents", &a[0].it, &d, &n, err))
		return -1;
	w = mdoor_wstate_new(r, MDOOR_W_INSERT, coll, n,
			     !mdoor_has(&a[1].it) || mdoor_arg_bool(&a[1].it));
	if (!w)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	if (insert_stmts(w, &d, err)) {
		mdoor_wstate_free(w);
		return -1;
	}
	return mdoor_wstate_submit(r, w, insert_done, err);
}

const struct mdoor_cmd mdoor_cmds_write[] = {
    {"insert", cmd_insert, 0, MDOOR_CNT_INSERT},
    {"update", mdoor_cmd_update, 0, MDOOR_CNT_UPDATE},
    {"delete", mdoor_cmd_delete, 0, MDOOR_CNT_DELETE},
    {"findAndModify", mdoor_cmd_fam, 0, MDOOR_CNT_COMMAND},
    {"findandmodify", mdoor_cmd_fam, 0, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
