/* mdoor_fam.c - findAndModify: one document found (the first by sort),
 * updated or removed by the store in one write, and the document before
 * or after it returned, projected by fields: {lastErrorObject: {n,
 * updatedExisting, upserted}, value, ok: 1}.  A failure of the write is
 * the command's error (as mongod answers it), not a write error. */
#include <stdlib.h>
#include <string.h>

#include "mdoor_write.h"

enum {
	F_QUERY,
	F_SORT,
	F_REMOVE,
	F_UPDATE,
	F_NEW,
	F_FIELDS,
	F_UPSERT,
	F_BYPASS,
	F_COLL,
	F_AF,
	F_HINT,
	F_LET,
	F_N
};

static const struct mdoor_arg fam_spec[F_N] = {
    [F_QUERY] = {"query", MDOOR_T_OBJECT | MDOOR_T_NULL, false},
    [F_SORT] = {"sort", MDOOR_T_OBJECT | MDOOR_T_NULL, false},
    [F_REMOVE] = {"remove", MDOOR_T_BOOLISH, false},
    [F_UPDATE] = {"update", MDOOR_T_OBJECT | MDOOR_T_ARRAY, false},
    [F_NEW] = {"new", MDOOR_T_BOOLISH, false},
    [F_FIELDS] = {"fields", MDOOR_T_OBJECT | MDOOR_T_NULL, false},
    [F_UPSERT] = {"upsert", MDOOR_T_BOOLISH, false},
    [F_BYPASS] = {"bypassDocumentValidation", MDOOR_T_BOOLISH, false},
    [F_COLL] = {"collation", MDOOR_T_OBJECT, false},
    [F_AF] = {"arrayFilters", MDOOR_T_ARRAY, false},
    [F_HINT] = {"hint", MDOOR_T_OBJECT | MDOOR_T_STRING, false},
    [F_LET] = {"let", MDOOR_T_OBJECT, false},
};

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

/* mongod's checks of the combination of options. */
static int check_opts(const mdoor_av *a, struct mql_error *err)
{
	bool remove = mdoor_arg_bool(&a[F_REMOVE].it);

	if (remove && mdoor_has(&a[F_UPDATE].it))
		return mdoor_err(err, MQL_FailedToParse,
				 "Cannot specify both an update and "
				 "remove=true");
	if (!remove && !mdoor_has(&a[F_UPDATE].it))
		return mdoor_err(err, MQL_FailedToParse,
				 "Either an update or remove=true must be "
				 "specified");
	if (remove && mdoor_arg_bool(&a[F_UPSERT].it))
		return mdoor_err(err, MQL_FailedToParse,
				 "Cannot specify both upsert=true and "
				 "remove=true ");
	if (remove && mdoor_arg_bool(&a[F_NEW].it))
		return mdoor_err(err, MQL_FailedToParse,
				 "Cannot specify both new=true and "
				 "remove=true; 'remove' always returns the "
				 "deleted document");
	if (mdoor_has(&a[F_AF].it) || mdoor_has(&a[F_LET].it) ||
	    mdoor_has(&a[F_COLL].it) || BSON_ITER_HOLDS_ARRAY(&a[F_UPDATE].it))
		return mdoor_err(err, MQL_NotImplemented,
				 "findAndModify's arrayFilters, let, collation "
				 "and pipeline updates are not supported by "
				 "kvd");
	return 0;
}

static int fam_done(struct mdoor_req *r, struct mdoor_wbatch *b,
		    struct mql_error *err)
{
	struct mdoor_wstate *w = (struct mdoor_wstate *)b;
	struct mdoor_wop *op = &b->ops[0];
	bson_t leo, proj;
	bson_iter_t it;
	bool upserted = !bson_empty(&op->upserted);

	if (b->err.code || op->err.code) {
		*err = b->err.code ? b->err : op->err;
		return -1;
	}
	BSON_APPEND_DOCUMENT_BEGIN(&r->reply, "lastErrorObject", &leo);
	BSON_APPEND_INT32(&leo, "n", (int32_t)(op->n + (upserted ? 1 : 0)));
	if (!op->remove) {
		BSON_APPEND_BOOL(&leo, "updatedExisting", op->n > 0);
		if (upserted && bson_iter_init_find(&it, &op->upserted, "_id"))
			bson_append_iter(&leo, "upserted", -1, &it);
	}
	bson_append_document_end(&r->reply, &leo);
	if (bson_empty(&op->value)) {
		BSON_APPEND_NULL(&r->reply, "value");
		return 0;
	}
	if (!w->proj) {
		BSON_APPEND_DOCUMENT(&r->reply, "value", &op->value);
		return 0;
	}
	bson_init(&proj);
	if (mql_project_apply(w->proj, bson_get_data(&op->value), op->value.len,
			      &proj, err)) {
		bson_destroy(&proj);
		return -1;
	}
	BSON_APPEND_DOCUMENT(&r->reply, "value", &proj);
	bson_destroy(&proj);
	return 0;
}

static int compile(struct mdoor_wstate *w, struct mdoor_wop *op,
		   const mdoor_av *a, struct mql_error *err)
{
	const uint8_t *p = empty_doc;
	uint32_t n = 5;

	if (BSON_ITER_HOLDS_DOCUMENT(&a[F_QUERY].it))
		mdoor_arg_doc(&a[F_QUERY].it, &p, &n);
	if (mql_match_compile(p, n, (struct mql_match **)&op->q, err) ||
	    mdoor_wop_keep(op, p, n, NULL, 0) ||
	    mdoor_wop_hint(op, &a[F_HINT].it))
		return -1;
	if (BSON_ITER_HOLDS_DOCUMENT(&a[F_SORT].it)) {
		mdoor_arg_doc(&a[F_SORT].it, &p, &n);
		if (n > 5 &&
		    mql_sort_compile(p, n, (struct mql_sort **)&op->sort, err))
			return -1;
	}
	if (mdoor_has(&a[F_UPDATE].it)) {
		mdoor_arg_doc(&a[F_UPDATE].it, &p, &n);
		if (mql_update_compile(p, n, (struct mql_update **)&op->u, err))
			return -1;
		op->u_bson = malloc(n);
		if (!op->u_bson)
			return -1;
		memcpy((uint8_t *)op->u_bson, p, n);
		op->u_len = n;
	}
	if (BSON_ITER_HOLDS_DOCUMENT(&a[F_FIELDS].it)) {
		mdoor_arg_doc(&a[F_FIELDS].it, &p, &n);
		if (n > 5 &&
		    mql_project_compile(p, n, MQL_PROJECT_FIND, &w->proj, err))
			return -1;
	}
	return 0;
}

int mdoor_cmd_fam(struct mdoor_req *r, struct mql_error *err)
{
	mdoor_av a[F_N];
	struct mdoor_wstate *w;
	struct mdoor_wop *op;
	const char *coll;

	if (mdoor_coll_arg(r, &coll, err) ||
	    mdoor_args(r, fam_spec, F_N, a, err) || check_opts(a, err))
		return -1;
	w = mdoor_wstate_new(r, MDOOR_W_FAM, coll, 1, true);
	if (!w)
		return mdoor_err(err, MDOOR_ExceededMemoryLimit,
				 "out of memory");
	op = mdoor_wstate_op(w, 0);
	op->remove = mdoor_arg_bool(&a[F_REMOVE].it);
	op->return_new = mdoor_arg_bool(&a[F_NEW].it);
	op->upsert = mdoor_arg_bool(&a[F_UPSERT].it);
	if (compile(w, op, a, err)) {
		mdoor_wstate_free(w);
		return -1;
	}
	if (op->upsert) {
		w->ids[0].value_type = BSON_TYPE_OID;
		bson_oid_init(&w->ids[0].value.v_oid, NULL);
		op->new_id = &w->ids[0];
	}
	return mdoor_wstate_submit(r, w, fam_done, err);
}
