/* update_apply.c - a compiled update applied to a document
 * (mql_update_apply): one pass over the document and the update's tree
 * together, copying what the update does not touch, then the checks on
 * the result (_id unchanged, size, depth). */
#include <string.h>

#include "mql_int.h"
#include "mql_value.h"
#include "update_int.h"

struct actx {
	const struct mql_update *u;
	const struct mql_update_ctx *ctx;
	bool inserting;
	const uint8_t *doc; /* the document before the update */
	uint32_t len;
	struct mql_error *err;
};

static int too_large(struct actx *a)
{
	return mql_error_set(a->err, MQL_BSONObjectTooLarge,
			     "Resulting document after update is larger than "
			     "%d",
			     MQL_MAX_DOC_SIZE);
}

static int put(struct actx *a, bson_t *out, const char *k, size_t kl,
	       const bson_value_t *v)
{
	if (out->len > MQL_MAX_DOC_SIZE ||
	    !bson_append_value(out, k, (int)kl, v))
		return too_large(a);
	return 0;
}

/* "{_id: 1}" of the document being updated, for messages. */
static void id_str(struct actx *a, char *buf, size_t n)
{
	bson_iter_t it;
	char v[200];

	if (a->doc && mql_path_find_field(a->doc, a->len, "_id", 3, &it)) {
		mql_value_str(bson_iter_value(&it), v, sizeof(v));
		snprintf(buf, n, "{_id: %s}", v);
	} else {
		snprintf(buf, n, "{}");
	}
}

/* The value a $rename takes from its source: documents only on the way
 * (MongoDB refuses array elements as sources). */
static int rename_source(struct actx *a, const struct mql_path *p,
			 bson_value_t *out)
{
	const uint8_t *d = a->doc;
	uint32_t dl = a->len;
	bson_iter_t it;

	if (!d)
		return 0;
	for (size_t i = 0; i < p->n; i++) {
		const bson_value_t *v;

		if (!mql_path_find_field(d, dl, p->parts[i].s, p->parts[i].len,
					 &it))
			return 0;
		v = bson_iter_value(&it);
		if (i + 1 == p->n) {
			*out = *v;
			return 1;
		}
		if (v->value_type == BSON_TYPE_ARRAY)
			return mql_error_set(a->err, MQL_BadValue,
					     "The source field cannot be an "
					     "array element, '%s' in doc with "
					     "%.*s set to an array",
					     p->dotted, (int)p->parts[i].len,
					     p->parts[i].s);
		if (v->value_type != BSON_TYPE_DOCUMENT)
			return 0;
		d = v->value.v_doc.data;
		dl = v->value.v_doc.data_len;
	}
	return 0;
}

/* ---- arrays built by $push, $addToSet, $pop, $pull, $pullAll ------- */

struct vec {
	bson_value_t *v;
	size_t n, cap;
};

static void vec_push(struct vec *x, const bson_value_t *v)
{
	mql_grow((void **)&x->v, &x->cap, x->n, 1, sizeof(*x->v));
	x->v[x->n++] = *v;
}

static void vec_of(struct vec *x, const bson_value_t *arr)
{
	bson_iter_t it;

	if (!arr || arr->value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, arr->value.v_doc.data,
				      arr->value.v_doc.data_len))
		return;
	while (bson_iter_next(&it))
		vec_push(x, bson_iter_value(&it));
}

static int put_array(struct actx *a, bson_t *out, const char *k, size_t kl,
		     const struct vec *x)
{
	bson_t child;
	char buf[16];
	const char *key;
	int rc = 0;

	if (!bson_append_array_begin(out, k, (int)kl, &child))
		return too_large(a);
	for (size_t i = 0; i < x->n && rc == 0; i++) {
		size_t n =
		    bson_uint32_to_string((uint32_t)i, &key, buf, sizeof(buf));

		rc = put(a, &child, key, n, &x->v[i]);
	}
	if (!bson_append_array_end(out, &child) && rc == 0)
		rc = too_large(a);
	return rc;
}

/* |v| without overflow at INT64_MIN. */
static uint64_t magnitude(int64_t v)
{
	return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
}

static int cmp_push(const void *x, const void *y, void *ctx)
{
	return mql_sort_cmp_values(ctx, x, y);
}

static int do_push(struct actx *a, const struct uop *op,
		   const bson_value_t *cur, struct vec *x)
{
	struct vec add = {0};
	size_t pos;

	vec_of(x, cur);
	if (op->has_each)
		vec_of(&add, &op->each);
	else
		vec_push(&add, &op->arg);
	pos = x->n;
	if (op->has_position && op->position < 0) {
		pos = magnitude(op->position) >= x->n
			  ? 0
			  : x->n - (size_t)magnitude(op->position);
	} else if (op->has_position && (uint64_t)op->position < x->n) {
		pos = (size_t)op->position;
	}
	if (add.n) {
		mql_grow((void **)&x->v, &x->cap, x->n, add.n, sizeof(*x->v));
		memmove(x->v + pos + add.n, x->v + pos,
			(x->n - pos) * sizeof(*x->v));
		memcpy(x->v + pos, add.v, add.n * sizeof(*x->v));
		x->n += add.n;
	}
	bson_free(add.v);
	if (op->sort)
		mql_msort(x->v, x->n, sizeof(*x->v), cmp_push, op->sort);
	if (op->has_slice) {
		if (op->slice >= 0 && (uint64_t)op->slice < x->n) {
			x->n = (size_t)op->slice;
		} else if (op->slice < 0 && magnitude(op->slice) < x->n) {
			size_t keep = (size_t)magnitude(op->slice);

			memmove(x->v, x->v + x->n - keep, keep * sizeof(*x->v));
			x->n = keep;
		}
	}
	(void)a;
	return 0;
}

static bool vec_has(const struct vec *x, const bson_value_t *v)
{
	for (size_t i = 0; i < x->n; i++) {
		if (mql_value_eq(&x->v[i], v))
			return true;
	}
	return false;
}

/* The array op on the current value cur (NULL: missing): 1 and *x set
 * when there is a new array to write, 0 to write cur unchanged (or
 * nothing), -1 on error. */
static int array_op(struct actx *a, const struct uop *op,
		    const bson_value_t *cur, const char *k, struct vec *x)
{
	char ids[240];
	bool is_arr = cur && cur->value_type == BSON_TYPE_ARRAY;
	const char *tn = cur ? mql_type_name(cur->value_type) : "";

	switch (op->kind) {
	case U_PUSH:
		if (cur && !is_arr) {
			id_str(a, ids, sizeof(ids));
			return mql_error_set(a->err, MQL_BadValue,
					     "The field '%s' must be an array "
					     "but is of type %s in document %s",
					     k, tn, ids);
		}
		return do_push(a, op, cur, x) < 0 ? -1 : 1;
	case U_ADD_TO_SET: {
		struct vec add = {0};

		if (cur && !is_arr)
			return mql_error_set(
			    a->err, MQL_BadValue,
			    "Cannot apply $addToSet to non-array "
			    "field. Field named '%s' has "
			    "non-array type %s",
			    k, tn);
		vec_of(x, cur);
		if (op->has_each)
			vec_of(&add, &op->each);
		else
			vec_push(&add, &op->arg);
		for (size_t i = 0; i < add.n; i++) {
			if (!vec_has(x, &add.v[i]))
				vec_push(x, &add.v[i]);
		}
		bson_free(add.v);
		return 1;
	}
	default: break;
	}
	if (!cur)
		return 0; /* $pop, $pull, $pullAll of nothing */
	if (!is_arr) {
		if (op->kind == U_POP)
			return mql_error_set(a->err, MQL_TypeMismatch,
					     "Path '%s' contains an element of "
					     "non-array type '%s'",
					     op->path.dotted, tn);
		return mql_error_set(a->err, MQL_BadValue,
				     "Cannot apply %s to a non-array value",
				     op->opname);
	}
	vec_of(x, cur);
	if (op->kind == U_POP) {
		if (x->n == 0)
			return 0;
		if (mql_number_double(&op->arg) < 0)
			memmove(x->v, x->v + 1, (x->n - 1) * sizeof(*x->v));
		x->n--;
		return 1;
	}
	{
		size_t j = 0;
		struct vec all = {0};

		if (op->kind == U_PULL_ALL)
			vec_of(&all, &op->arg);
		for (size_t i = 0; i < x->n; i++) {
			bool drop = op->kind == U_PULL
					? mql_match_value(op->pull, &x->v[i])
					: vec_has(&all, &x->v[i]);

			if (!drop)
				x->v[j++] = x->v[i];
		}
		bson_free(all.v);
		if (j == x->n)
			return 0;
		x->n = j;
		return 1;
	}
}

/* ---- leaves --------------------------------------------------------- */

static int arith(struct actx *a, const struct uop *op, const bson_value_t *cur,
		 const char *k, bson_value_t *res)
{
	char ids[240], buf[200];

	if (!cur) {
		if (op->kind == U_INC) {
			*res = op->arg;
			return 0;
		}
		/* $mul of nothing: a zero of the multiplier's type */
		{
			bson_value_t zero = {.value_type = BSON_TYPE_INT32};

			return mql_num_mul(&op->arg, &zero, res) < 0 ? -1 : 0;
		}
	}
	if (!mql_is_number(cur)) {
		id_str(a, ids, sizeof(ids));
		return mql_error_set(
		    a->err, MQL_TypeMismatch,
		    "Cannot apply %s to a value of non-numeric "
		    "type. %s has the field '%s' of "
		    "non-numeric type %s",
		    op->opname, ids, k, mql_type_name(cur->value_type));
	}
	if ((op->kind == U_INC ? mql_num_add(cur, &op->arg, res)
			       : mql_num_mul(cur, &op->arg, res)) < 0) {
		id_str(a, ids, sizeof(ids));
		mql_value_str(cur, buf, sizeof(buf));
		return mql_error_set(a->err, MQL_BadValue,
				     "Failed to apply %s operations to current "
				     "value (%s) for document %s",
				     op->opname, buf, ids);
	}
	return 0;
}

/* Write what op makes of cur (NULL: the field is missing) under key k. */
static int leaf(struct actx *a, const struct uop *op, const bson_value_t *cur,
		const char *k, size_t kl, bool in_array, bson_t *out)
{
	bson_value_t res;
	const bson_value_t *w = cur; /* what to write; NULL: nothing */
	struct vec x = {0};
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%.*s", (int)kl, k);
	switch (op->kind) {
	case U_SET: w = &op->arg; break;
	case U_UNSET:
	case U_RENAME_FROM:
		if (op->kind == U_RENAME_FROM && in_array && cur)
			return mql_error_set(a->err, MQL_BadValue,
					     "The source field cannot be an "
					     "array element");
		memset(&res, 0, sizeof(res));
		res.value_type = BSON_TYPE_NULL; /* an array keeps its slot */
		w = in_array && cur ? &res : NULL;
		break;
	case U_INC:
	case U_MUL:
		if (arith(a, op, cur, key, &res) < 0)
			return -1;
		w = &res;
		break;
	case U_MIN:
	case U_MAX:
		if (!cur || mql_value_cmp(&op->arg, cur) *
				    (op->kind == U_MIN ? 1 : -1) <
				0)
			w = &op->arg;
		break;
	case U_SET_ON_INSERT:
		if (a->inserting)
			w = &op->arg;
		break;
	case U_CURRENT_DATE:
		memset(&res, 0, sizeof(res));
		if (op->timestamp) {
			res.value_type = BSON_TYPE_TIMESTAMP;
			res.value.v_timestamp.timestamp = a->ctx->ts_t;
			res.value.v_timestamp.increment = a->ctx->ts_i;
		} else {
			res.value_type = BSON_TYPE_DATE_TIME;
			res.value.v_datetime = a->ctx->now_ms;
		}
		w = &res;
		break;
	case U_RENAME_TO:
		rc = rename_source(a, op->from, &res);
		if (rc < 0)
			return -1;
		if (rc > 0 && in_array)
			return mql_error_set(a->err, MQL_BadValue,
					     "The destination field cannot be "
					     "an array element");
		if (rc > 0)
			w = &res;
		break;
	default:
		rc = array_op(a, op, cur, key, &x);
		if (rc > 0)
			rc = put_array(a, out, k, kl, &x);
		else if (rc == 0 && cur)
			rc = put(a, out, k, kl, cur);
		bson_free(x.v);
		return rc;
	}
	return w ? put(a, out, k, kl, w) : 0;
}

/* ---- the walk ------------------------------------------------------- */

/* Whether applying n may write anything where nothing is. */
static bool creates(struct actx *a, const struct unode *n)
{
	return n->creates || (a->inserting && n->inserts);
}

static int apply_node(struct actx *a, const struct unode *n,
		      const bson_value_t *cur, const char *k, size_t kl,
		      bool in_array, bson_t *out);

static int not_viable(struct actx *a, const struct unode *kid, const char *k,
		      size_t kl, const bson_value_t *v)
{
	char val[200];

	mql_value_str(v, val, sizeof(val));
	return mql_error_set(a->err, MQL_PathNotViable,
			     "Cannot create field '%.*s' in element {%.*s: %s}",
			     (int)kid->len, kid->name, (int)kl, k, val);
}

static const struct unode *kid_for(struct actx *a, const struct unode *n,
				   const char *key, size_t kl, long index,
				   int *err)
{
	for (size_t i = 0; i < n->nkids; i++) {
		const struct unode *kid = n->kids[i];

		if (kid->positional) {
			if (a->ctx->pos < 0) {
				*err = mql_error_set(
				    a->err, MQL_BadValue,
				    "The positional operator did not find the "
				    "match needed from the query.");
				return NULL;
			}
			if (index >= 0 && index == a->ctx->pos)
				return kid;
			continue;
		}
		if (kid->len == kl && memcmp(kid->name, key, kl) == 0)
			return kid;
	}
	return NULL;
}

/* The fields (or elements) of container, with n's kids applied; the
 * kids that name nothing in it are created after them. */
static int apply_fields(struct actx *a, const struct unode *n,
			const bson_value_t *container, const char *ck,
			size_t ckl, bson_t *out)
{
	bool is_array = container && container->value_type == BSON_TYPE_ARRAY;
	bool *seen = bson_malloc0(n->nkids ? n->nkids : 1);
	bson_iter_t it;
	long count = 0;
	int rc = 0;

	if (container &&
	    bson_iter_init_from_data(&it, container->value.v_doc.data,
				     container->value.v_doc.data_len)) {
		for (; rc == 0 && bson_iter_next(&it); count++) {
			const char *key = bson_iter_key(&it);
			size_t kl = bson_iter_key_len(&it);
			const struct unode *kid =
			    kid_for(a, n, key, kl, is_array ? count : -1, &rc);

			if (rc < 0)
				break;
			if (!kid) {
				rc = put(a, out, key, kl, bson_iter_value(&it));
				continue;
			}
			for (size_t i = 0; i < n->nkids; i++) {
				if (n->kids[i] == kid)
					seen[i] = true;
			}
			rc = apply_node(a, kid, bson_iter_value(&it), key, kl,
					is_array, out);
		}
	}
	for (size_t i = 0; rc == 0 && i < n->nkids; i++) {
		const struct unode *kid = n->kids[i];
		char buf[16];
		const char *key;

		if (seen[i] || !creates(a, kid))
			continue;
		if (kid->positional) {
			/* "$" named an element past the end: nothing */
			continue;
		}
		if (!is_array) {
			rc = apply_node(a, kid, NULL, kid->name, kid->len,
					false, out);
			continue;
		}
		if (kid->index < 0) {
			rc = not_viable(a, kid, ck, ckl, container);
			break;
		}
		/* past the end of an array: nulls up to the index */
		while (rc == 0 && count < kid->index) {
			bson_value_t null = {.value_type = BSON_TYPE_NULL};
			size_t kl = bson_uint32_to_string((uint32_t)count, &key,
							  buf, sizeof(buf));

			rc = put(a, out, key, kl, &null);
			count++;
		}
		if (rc == 0) {
			rc = apply_node(a, kid, NULL, kid->name, kid->len, true,
					out);
			count++;
		}
	}
	bson_free(seen);
	return rc;
}

static int apply_node(struct actx *a, const struct unode *n,
		      const bson_value_t *cur, const char *k, size_t kl,
		      bool in_array, bson_t *out)
{
	bson_t child;
	bool arr;
	int rc;

	if (n->op)
		return leaf(a, n->op, cur, k, kl, in_array, out);
	if (cur && cur->value_type != BSON_TYPE_DOCUMENT &&
	    cur->value_type != BSON_TYPE_ARRAY) {
		if (!creates(a, n))
			return put(a, out, k, kl, cur);
		return not_viable(a, n->kids[0], k, kl, cur);
	}
	arr = cur && cur->value_type == BSON_TYPE_ARRAY;
	if (!(arr ? bson_append_array_begin(out, k, (int)kl, &child)
		  : bson_append_document_begin(out, k, (int)kl, &child)))
		return too_large(a);
	rc = apply_fields(a, n, cur, k, kl, &child);
	if (!(arr ? bson_append_array_end(out, &child)
		  : bson_append_document_end(out, &child)) &&
	    rc == 0)
		rc = too_large(a);
	return rc;
}

int update_apply_tree(const struct mql_update *u, const uint8_t *doc,
		      uint32_t len, bool inserting,
		      const struct mql_update_ctx *ctx, bson_t *out,
		      struct mql_error *err)
{
	struct actx a = {u, ctx, inserting, doc, len, err};
	bson_value_t whole;

	memset(&whole, 0, sizeof(whole));
	whole.value_type = BSON_TYPE_DOCUMENT;
	whole.value.v_doc.data = (uint8_t *)doc;
	whole.value.v_doc.data_len = len;
	return apply_fields(&a, &u->root, &whole, "", 0, out);
}
