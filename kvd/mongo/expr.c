/* expr.c - aggregation expressions: field paths, variables, literals,
 * documents and arrays of expressions (mql_expr.h). */
#include <string.h>

#include "mql_expr.h"
#include "mql_int.h"
#include "mql_path.h"
#include "mql_value.h"

enum expr_kind { E_CONST, E_PATH, E_ROOT, E_REMOVE, E_DOC, E_ARRAY };

struct mql_expr {
	enum expr_kind kind;
	bson_value_t v;	      /* E_CONST */
	struct mql_path path; /* E_PATH (n == 0 for $$ROOT alone) */
	char **names;	      /* E_DOC */
	struct mql_expr **kids;
	size_t n;
};

void mql_expr_free(struct mql_expr *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		mql_expr_free(e->kids[i]);
		if (e->names)
			bson_free(e->names[i]);
	}
	bson_free(e->kids);
	bson_free(e->names);
	mql_path_free(&e->path);
	bson_free(e);
}

bool mql_expr_is_field_path(const struct mql_expr *e)
{
	return e->kind == E_PATH;
}

static const char *const known_ops[] = {
    "$add",
    "$subtract",
    "$multiply",
    "$divide",
    "$concat",
    "$cond",
    "$ifNull",
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$and",
    "$or",
    "$not",
    "$size",
    "$toLower",
    "$toUpper",
    "$substr",
    "$arrayElemAt",
    "$filter",
    "$map",
    "$reduce",
    "$mergeObjects",
    "$slice",
    "$let",
    "$switch",
    "$dateToString",
    "$toString",
    "$abs",
    "$mod",
    "$in",
    "$type",
    "$sum",
    "$avg",
    "$min",
    "$max",
    "$objectToArray",
    "$arrayToObject",
    "$getField",
    "$setField",
    "$first",
    "$last",
    "$concatArrays",
};

static int compile_string(struct mql_expr *e, const bson_value_t *v,
			  struct mql_error *err)
{
	const char *s = v->value.v_utf8.str;
	size_t len = v->value.v_utf8.len;

	if (len == 0 || s[0] != '$') {
		e->kind = E_CONST;
		e->v = *v;
		return 0;
	}
	if (len >= 2 && s[1] == '$') {
		const char *name = s + 2, *dot = memchr(name, '.', len - 2);
		size_t nl = dot ? (size_t)(dot - name) : len - 2;

		if ((nl == 4 && memcmp(name, "ROOT", 4) == 0) ||
		    (nl == 7 && memcmp(name, "CURRENT", 7) == 0)) {
			e->kind = E_PATH;
			if (!dot)
				return 0;
			return mql_path_parse(dot + 1, len - 2 - nl - 1,
					      &e->path, err);
		}
		if (nl == 6 && memcmp(name, "REMOVE", 6) == 0 && !dot) {
			e->kind = E_REMOVE;
			return 0;
		}
		return mql_error_set(err, 17276,
				     "Use of undefined variable: %.*s", (int)nl,
				     name);
	}
	if (len == 1)
		return mql_error_set(err, 16872,
				     "'$' by itself is not a valid FieldPath");
	e->kind = E_PATH;
	return mql_path_parse(s + 1, len - 1, &e->path, err);
}

static int compile_doc(struct mql_expr *e, const bson_value_t *v,
		       struct mql_error *err)
{
	bson_iter_t it;
	size_t cap = 0, ncap = 0;

	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	if (bson_iter_next(&it) && bson_iter_key(&it)[0] == '$') {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "$literal") == 0) {
			e->kind = E_CONST;
			e->v = *bson_iter_value(&it);
			return 0;
		}
		for (size_t i = 0; i < sizeof(known_ops) / sizeof(*known_ops);
		     i++) {
			if (strcmp(k, known_ops[i]) == 0)
				return mql_error_set(
				    err, MQL_NotImplemented,
				    "the expression operator %s is not "
				    "supported",
				    k);
		}
		return mql_error_set(err, MQL_InvalidPipelineOperator,
				     "Unrecognized expression '%s'", k);
	}
	e->kind = E_DOC;
	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		struct mql_expr *kid;

		if (k[0] == '$')
			return mql_error_set(err, 16410,
					     "FieldPath field names may not "
					     "start with '$'");
		if (strchr(k, '.'))
			return mql_error_set(err, 16412,
					     "FieldPath field names may not "
					     "contain '.'");
		if (mql_expr_compile(bson_iter_value(&it), &kid, err) < 0)
			return -1;
		mql_grow((void **)&e->kids, &cap, e->n, 1, sizeof(*e->kids));
		mql_grow((void **)&e->names, &ncap, e->n, 1, sizeof(*e->names));
		e->names[e->n] = bson_strdup(k);
		e->kids[e->n++] = kid;
	}
	return 0;
}

int mql_expr_compile(const bson_value_t *v, struct mql_expr **out,
		     struct mql_error *err)
{
	struct mql_expr *e = bson_malloc0(sizeof(*e));
	int rc = 0;

	*out = NULL;
	if (v->value_type == BSON_TYPE_UTF8) {
		rc = compile_string(e, v, err);
	} else if (v->value_type == BSON_TYPE_DOCUMENT) {
		rc = compile_doc(e, v, err);
	} else if (v->value_type == BSON_TYPE_ARRAY) {
		bson_iter_t it;
		size_t cap = 0;

		e->kind = E_ARRAY;
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		while (rc == 0 && bson_iter_next(&it)) {
			struct mql_expr *kid;

			rc = mql_expr_compile(bson_iter_value(&it), &kid, err);
			if (rc == 0) {
				mql_grow((void **)&e->kids, &cap, e->n, 1,
					 sizeof(*e->kids));
				e->kids[e->n++] = kid;
			}
		}
	} else {
		e->kind = E_CONST;
		e->v = *v;
	}
	if (rc < 0) {
		mql_expr_free(e);
		return -1;
	}
	*out = e;
	return 0;
}

/* ---- evaluation ----------------------------------------------------- */

/* The value of path components i.. in v (aggregation's rule: arrays map
 * over their elements, missing values drop out).  Appends under key. */
static int eval_path(const struct mql_path *p, size_t i, const bson_value_t *v,
		     bson_t *out, const char *key, int keylen)
{
	bson_iter_t it;

	if (i == p->n)
		return bson_append_value(out, key, keylen, v) ? 1 : -1;
	if (v->value_type == BSON_TYPE_DOCUMENT) {
		if (!mql_path_find_field(v->value.v_doc.data,
					 v->value.v_doc.data_len, p->parts[i].s,
					 p->parts[i].len, &it))
			return 0;
		return eval_path(p, i + 1, bson_iter_value(&it), out, key,
				 keylen);
	}
	if (v->value_type == BSON_TYPE_ARRAY) {
		bson_t arr;
		uint32_t n = 0;
		int rc = 0;

		if (!bson_append_array_begin(out, key, keylen, &arr))
			return -1;
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		while (rc >= 0 && bson_iter_next(&it)) {
			const bson_value_t *e = bson_iter_value(&it);
			char buf[16];
			const char *k;
			int kl;

			if (e->value_type != BSON_TYPE_DOCUMENT &&
			    e->value_type != BSON_TYPE_ARRAY)
				continue;
			kl =
			    (int)bson_uint32_to_string(n, &k, buf, sizeof(buf));
			rc = eval_path(p, i, e, &arr, k, kl);
			n += rc > 0;
		}
		if (!bson_append_array_end(out, &arr))
			return -1;
		return rc < 0 ? -1 : 1;
	}
	return 0;
}

int mql_expr_eval(const struct mql_expr *e, const uint8_t *doc, uint32_t len,
		  bson_t *out, const char *key, int keylen)
{
	bson_value_t root;
	bson_t sub;
	int rc = 1;

	switch (e->kind) {
	case E_CONST:
		return bson_append_value(out, key, keylen, &e->v) ? 1 : -1;
	case E_REMOVE: return 0;
	case E_ROOT:
	case E_PATH:
		memset(&root, 0, sizeof(root));
		root.value_type = BSON_TYPE_DOCUMENT;
		root.value.v_doc.data = (uint8_t *)doc;
		root.value.v_doc.data_len = len;
		return eval_path(&e->path, 0, &root, out, key, keylen);
	case E_DOC:
		if (!bson_append_document_begin(out, key, keylen, &sub))
			return -1;
		for (size_t i = 0; i < e->n && rc >= 0; i++)
			rc = mql_expr_eval(e->kids[i], doc, len, &sub,
					   e->names[i], -1);
		if (!bson_append_document_end(out, &sub))
			return -1;
		return rc < 0 ? -1 : 1;
	case E_ARRAY:
		if (!bson_append_array_begin(out, key, keylen, &sub))
			return -1;
		for (size_t i = 0; i < e->n && rc >= 0; i++) {
			char buf[16];
			const char *k;
			int kl = (int)bson_uint32_to_string((uint32_t)i, &k,
							    buf, sizeof(buf));

			/* a missing element is null in an array */
			rc = mql_expr_eval(e->kids[i], doc, len, &sub, k, kl);
			if (rc == 0)
				rc = bson_append_null(&sub, k, kl) ? 1 : -1;
		}
		if (!bson_append_array_end(out, &sub))
			return -1;
		return rc < 0 ? -1 : 1;
	}
	return 0;
}

bool mql_expr_fields(const struct mql_expr *e,
		     bool (*ok)(void *ctx, const char *name, size_t len),
		     void *ctx)
{
	if (e->kind == E_ROOT || (e->kind == E_PATH && e->path.n == 0))
		return false;
	if (e->kind == E_PATH &&
	    !ok(ctx, e->path.parts[0].s, e->path.parts[0].len))
		return false;
	for (size_t i = 0; i < e->n; i++)
		if (!mql_expr_fields(e->kids[i], ok, ctx))
			return false;
	return true;
}
