/* mdoor_update.c - the update and delete commands: each statement's
 * fields checked as mongod's IDL does (an unknown or mistyped field fails
 * the command), its filter and update compiled (an invalid one is a write
 * error at its index), and the batch handed to the store, whose results
 * become {n, nModified, upserted, writeErrors}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdoor_write.h"

/* One statement's fields, by name. */
struct stmt_field {
	const char *name;
	unsigned types;
};

/* Check a statement document: known fields of their types.  out[i] is
 * positioned on fields[i] or EOD. */
static int stmt_fields(const char *cmd, const char *arr, const uint8_t *doc,
		       uint32_t len, const struct stmt_field *f, size_t n,
		       mdoor_av *out, struct mql_error *err)
{
	bson_iter_t it;

	for (size_t i = 0; i < n; i++)
		mdoor_absent(&out[i].it);
	bson_iter_init_from_data(&it, doc, len);
	while (bson_iter_next(&it)) {
		size_t i;

		for (i = 0; i < n && strcmp(f[i].name, bson_iter_key(&it)); i++)
			;
		if (i == n)
			return mdoor_err(err, MDOOR_IDLUnknownField,
					 "BSON field '%s.%s.%s' is an unknown "
					 "field.",
					 cmd, arr, bson_iter_key(&it));
		if (f[i].types != MDOOR_T_ANY &&
		    !((f[i].types & MDOOR_T_OBJECT &&
		       BSON_ITER_HOLDS_DOCUMENT(&it)) ||
		      (f[i].types & MDOOR_T_ARRAY &&
		       BSON_ITER_HOLDS_ARRAY(&it)) ||
		      (f[i].types & MDOOR_T_NUM &&
		       BSON_ITER_HOLDS_NUMBER(&it)) ||
		      (f[i].types & MDOOR_T_BOOL &&
		       BSON_ITER_HOLDS_BOOL(&it)) ||
		      (f[i].types & MDOOR_T_STRING &&
		       BSON_ITER_HOLDS_UTF8(&it))))
			return mdoor_err(err, MQL_TypeMismatch,
					 "BSON field '%s.%s.%s' is the wrong "
					 "type '%s'",
					 cmd, arr, bson_iter_key(&it),
					 mql_type_name(bson_iter_type(&it)));
		out[i].it = it;
	}
	return 0;
}

static int need(const char *cmd, const char *arr, const bson_iter_t *it,
		const char *name, struct mql_error *err)
{
	if (mdoor_has(it))
		return 0;
	return mdoor_err(err, MDOOR_IDLFailedToParse,
			 "BSON field '%s.%s.%s' is missing but a required "
			 "field",
			 cmd, arr, name);
}

static bool simple_collation(const bson_iter_t *it)
{
	bson_iter_t c;

	return !mdoor_has(it) ||
	       (bson_iter_recurse(it, &c) && bson_iter_find(&c, "locale") &&
		BSON_ITER_HOLDS_UTF8(&c) &&
		!strcmp(bson_iter_utf8(&c, NULL), "simple"));
}

/* ===================== update ===================== */

enum { U_Q, U_U, U_UPSERT, U_MULTI, U_AF, U_COLL, U_HINT, U_C, U_SUPP, U_N };

static const struct stmt_field upd_fields[U_N] = {
    [U_Q] = {"q", MDOOR_T_OBJECT},
    [U_U] = {"u", MDOOR_T_OBJECT | MDOOR_T_ARRAY},
    [U_UPSERT] = {"upsert", MDOOR_T_BOOL | MDOOR_T_NUM},
    [U_MULTI] = {"multi", MDOOR_T_BOOL | MDOOR_T_NUM},
    [U_AF] = {"arrayFilters", MDOOR_T_ARRAY},
    [U_COLL] = {"collation", MDOOR_T_OBJECT},
    [U_HINT] = {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING},
    [U_C] = {"c", MDOOR_T_OBJECT},
    [U_SUPP] = {"upsertSupplied", MDOOR_T_BOOL | MDOOR_T_NUM},
};

/* Compile one update statement into op: 0, or -1 with e (a write error). */
static int upd_compile(struct mdoor_wstate *w, struct mdoor_wop *op, uint32_t i,
		       const mdoor_av *f, struct mql_error *e)
{
	const uint8_t *q, *u;
	uint32_t ql, ul;

	if (mdoor_has(&f[U_AF].it))
		return mdoor_err(e, MQL_NotImplemented,
				 "arrayFilters are not supported by kvd");
	if (!simple_collation(&f[U_COLL].it))
		return mdoor_err(e, MQL_NotImplemented,
				 "collations are not supported by kvd");
	if (BSON_ITER_HOLDS_ARRAY(&f[U_U].it))
		return mdoor_err(e, MQL_NotImplemented,
				 "pipeline-style updates are not supported by "
				 "kvd");
	mdoor_arg_doc(&f[U_Q].it, &q, &ql);
	mdoor_arg_doc(&f[U_U].it, &u, &ul);
	if (mql_match_compile(q, ql, (struct mql_match **)&op->q, e) ||
	    mql_update_compile(u, ul, (struct mql_update **)&op->u, e))
		return -1;
	if (mdoor_wop_keep(op, q, ql, u, ul) ||
	    mdoor_wop_hint(op, &f[U_HINT].it))
		return mdoor_err(e, MDOOR_ExceededMemoryLimit, "out of memory");
	op->multi = mdoor_arg_bool(&f[U_MULTI].it);
	op->upsert = mdoor_arg_bool(&f[U_UPSERT].it);
	if (op->multi && mql_update_is_replacement(op->u))
		return mdoor_err(e, MQL_FailedToParse,
				 "multi update is not supported for "
				 "replacement-style update");
	if (op->upsert) {
		w->ids[i].value_type = BSON_TYPE_OID;
		bson_oid_init(&w->ids[i].value.v_oid, NULL);
		op->new_id = &w->ids[i];
	}
	return 0;
}

static int upd_stmts(struct mdoor_req *r, struct mdoor_wstate *w,
		     struct mdoor_docs *d, struct mql_error *err)
{
	const uint8_t *doc;
	uint32_t len, i = 0;
	mdoor_av f[U_N];

	while (mdoor_docs_next(d, &doc, &len, err) == 1) {
		struct mql_error e;
		struct mdoor_wop *op;

		if (stmt_fields(r->cmd, "updates", doc, len, upd_fields, U_N, f,
				err) ||
		    need(r->cmd, "updates", &f[U_Q].it, "q", err) ||
		    need(r->cmd, "updates", &f[U_U].it, "u", err))
			return -1;
		mql_error_clear(&e);
		op = mdoor_wstate_op(w, i);
		if (upd_compile(w, op, i, f, &e)) {
			/* undo the op: the statement is refused */
			mql_match_free((struct mql_match *)op->q);
			mql_update_free((struct mql_update *)op->u);
			op->q = NULL;
			op->u = NULL;
			free((void *)op->q_bson);
			free((void *)op->u_bson);
			free((void *)op->hint);
			op->q_bson = op->u_bson = op->hint = NULL;
			op->hint_name = false;
			bson_destroy(&op->upserted);
			bson_destroy(&op->value);
			bson_destroy(&op->errinfo);
			w->b.nops--;
			if (mdoor_wstate_refuse(w, i, &e))
				return mdoor_err(err, MDOOR_ExceededMemoryLimit,
						 "out of memory");
			if (w->ordered)
				break;
		}
		i++;
	}
	return 0;
}

static int update_done(struct mdoor_req *r, struct mdoor_wbatch *b,
		       struct mql_error *err)
{
	struct mdoor_wstate *w = (struct mdoor_wstate *)b;
	int64_t n = 0, nmod = 0;
	uint32_t nu = 0;
	bson_t arr = BSON_INITIALIZER;

	if (b->err.code) {
		*err = b->err;
		return -1;
	}
	for (size_t i = 0; i < b->nops; i++) {
		struct mdoor_wop *op = &b->ops[i];

		if (!op->ran || op->err.code)
			continue;
		n += op->n;
		nmod += op->nmodified;
		if (!bson_empty(&op->upserted)) {
			char key[16];
			const char *k;
			bson_t one;
			bson_iter_t it;

			bson_uint32_to_string(nu++, &k, key, sizeof(key));
			bson_append_document_begin(&arr, k, -1, &one);
			BSON_APPEND_INT32(&one, "index", (int32_t)w->stmt[i]);
			if (bson_iter_init_find(&it, &op->upserted, "_id"))
				bson_append_iter(&one, "_id", 3, &it);
			bson_append_document_end(&arr, &one);
			n++;
		}
	}
	/* mongod's order: n, (upserted), nModified, (writeErrors) */
	BSON_APPEND_INT32(&r->reply, "n", (int32_t)n);
	if (nu)
		BSON_APPEND_ARRAY(&r->reply, "upserted", &arr);
	bson_destroy(&arr);
	BSON_APPEND_INT32(&r->reply, "nModified", (int32_t)nmod);
	mdoor_write_errors(w, &r->reply);
	return 0;
}

int mdoor_cmd_update(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"updates", MDOOR_T_ARRAY, true},
	    {"ordered", MDOOR_T_BOOLISH, false},
	    {"bypassDocumentValidation", MDOOR_T_BOOLISH, false},
	    {"let", MDOOR_T_OBJECT, false},
	};
	mdoor_av a[4];
	struct mdoor_docs d;
	struct mdoor_wstate *w;
	const char *coll;
	size_t n;

	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 4, a, err) ||
	    mdoor_write_open(r, "updates", &a[0].it, &d, &n, err))
		return -1;
	if (mdoor_has(&a[3].it))
		return mdoor_err(err, MQL_NotImplemented,
				 "update's 'let' option is not supported by "
				 "kvd");
	w = mdoor_wstate_new(r, MDOOR_W_UPDATE, coll, n,
			     !mdoor_has(&a[1].it) || mdoor_arg_bool(&a[1].it));
	if (!w)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	if (upd_stmts(r, w, &d, err)) {
		mdoor_wstate_free(w);
		return -1;
	}
	return mdoor_wstate_submit(r, w, update_done, err);
}

/* ===================== delete ===================== */

enum { D_Q, D_LIMIT, D_COLL, D_HINT, D_N };

static const struct stmt_field del_fields[D_N] = {
    [D_Q] = {"q", MDOOR_T_OBJECT},
    [D_LIMIT] = {"limit", MDOOR_T_NUM},
    [D_COLL] = {"collation", MDOOR_T_OBJECT},
    [D_HINT] = {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING},
};

static int del_stmts(struct mdoor_req *r, struct mdoor_wstate *w,
		     struct mdoor_docs *d, struct mql_error *err)
{
	const uint8_t *doc, *q;
	uint32_t len, ql, i = 0;
	mdoor_av f[D_N];

	while (mdoor_docs_next(d, &doc, &len, err) == 1) {
		struct mql_error e;
		struct mql_match *m = NULL;
		int64_t limit;

		if (stmt_fields(r->cmd, "deletes", doc, len, del_fields, D_N, f,
				err) ||
		    need(r->cmd, "deletes", &f[D_Q].it, "q", err) ||
		    need(r->cmd, "deletes", &f[D_LIMIT].it, "limit", err) ||
		    mdoor_arg_int64(r, &f[D_LIMIT].it, &limit, err))
			return -1;
		if (limit != 0 && limit != 1)
			return mdoor_err(err, MQL_FailedToParse,
					 "The limit field in delete objects "
					 "must be 0 or 1. Got %lld",
					 (long long)limit);
		mql_error_clear(&e);
		mdoor_arg_doc(&f[D_Q].it, &q, &ql);
		if (!simple_collation(&f[D_COLL].it))
			mdoor_err(&e, MQL_NotImplemented,
				  "collations are not supported by kvd");
		else if (mql_match_compile(q, ql, &m, &e) == 0) {
			struct mdoor_wop *op = mdoor_wstate_op(w, i);

			op->q = m;
			op->multi = limit == 0;
			if (mdoor_wop_keep(op, q, ql, NULL, 0) ||
			    mdoor_wop_hint(op, &f[D_HINT].it))
				mdoor_err(&e, MDOOR_ExceededMemoryLimit,
					  "out of memory");
		}
		if (e.code) {
			if (mdoor_wstate_refuse(w, i, &e))
				return mdoor_err(err, MDOOR_ExceededMemoryLimit,
						 "out of memory");
			if (w->ordered)
				break;
		}
		i++;
	}
	return 0;
}

static int delete_done(struct mdoor_req *r, struct mdoor_wbatch *b,
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
			n += b->ops[i].n;
	BSON_APPEND_INT32(&r->reply, "n", (int32_t)n);
	mdoor_write_errors(w, &r->reply);
	return 0;
}

int mdoor_cmd_delete(struct mdoor_req *r, struct mql_error *err)
{
	static const struct mdoor_arg spec[] = {
	    {"deletes", MDOOR_T_ARRAY, true},
	    {"ordered", MDOOR_T_BOOLISH, false},
	    {"let", MDOOR_T_OBJECT, false},
	};
	mdoor_av a[3];
	struct mdoor_docs d;
	struct mdoor_wstate *w;
	const char *coll;
	size_t n;

	if (mdoor_coll_arg(r, &coll, err) || mdoor_args(r, spec, 3, a, err) ||
	    mdoor_write_open(r, "deletes", &a[0].it, &d, &n, err))
		return -1;
	if (mdoor_has(&a[2].it))
		return mdoor_err(err, MQL_NotImplemented,
				 "delete's 'let' option is not supported by "
				 "kvd");
	w = mdoor_wstate_new(r, MDOOR_W_DELETE, coll, n,
			     !mdoor_has(&a[1].it) || mdoor_arg_bool(&a[1].it));
	if (!w)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	if (del_stmts(r, w, &d, err)) {
		mdoor_wstate_free(w);
		return -1;
	}
	return mdoor_wstate_submit(r, w, delete_done, err);
}
