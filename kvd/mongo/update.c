/* update.c - MongoDB's update documents parsed and checked into a tree of
 * the paths they change (mql_update.h); update_apply.c applies it. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <string.h>

#include "mql_int.h"
#include "mql_value.h"
#include "update_int.h"

static const struct {
	const char *name;
	int kind; /* enum uop_kind, or -1: not implemented */
} modifiers[] = {
    {"$set", U_SET},
    {"$unset", U_UNSET},
    {"$inc", U_INC},
    {"$mul", U_MUL},
    {"$min", U_MIN},
    {"$max", U_MAX},
    {"$setOnInsert", U_SET_ON_INSERT},
    {"$currentDate", U_CURRENT_DATE},
    {"$rename", U_RENAME_FROM},
    {"$push", U_PUSH},
    {"$addToSet", U_ADD_TO_SET},
    {"$pop", U_POP},
    {"$pull", U_PULL},
    {"$pullAll", U_PULL_ALL},
    {"$bit", -1},
};

static void uop_free(struct uop *op)
{
	mql_path_free(&op->path);
	mql_sort_free(op->sort);
	mql_match_free(op->pull);
	bson_free(op);
}

static void unode_free_kids(struct unode *n)
{
	for (size_t i = 0; i < n->nkids; i++) {
		unode_free_kids(n->kids[i]);
		bson_free(n->kids[i]);
	}
	bson_free(n->kids);
}

void mql_update_free(struct mql_update *u)
{
	if (!u)
		return;
	unode_free_kids(&u->root);
	for (size_t i = 0; i < u->nops; i++)
		uop_free(u->ops[i]);
	bson_free(u->ops);
	bson_free(u->data);
	bson_free(u);
}

bool mql_update_is_replacement(const struct mql_update *u)
{
	return u->replacement;
}

/* ---- paths and the tree --------------------------------------------- */

static int parse_upath(const char *k, size_t klen, struct mql_path *p,
		       struct mql_error *err)
{
	if (klen == 0)
		return mql_error_set(err, MQL_EmptyFieldName,
				     "An empty update path is not valid.");
	if (k[0] == '.' || k[klen - 1] == '.' || memmem(k, klen, "..", 2))
		return mql_error_set(err, MQL_EmptyFieldName,
				     "The update path '%.*s' contains an empty "
				     "field name, which is not allowed.",
				     (int)klen, k);
	if (mql_path_parse(k, klen, p, err) < 0)
		return -1;
	if (p->n > 100)
		return mql_error_set(
		    err, MQL_Overflow,
		    "The update path '%.200s...' has more than "
		    "100 components",
		    p->dotted);
	for (size_t i = 0; i < p->n; i++) {
		const struct mql_path_part *c = &p->parts[i];

		if (c->s[0] != '$' || (c->len == 1 && i > 0))
			continue;
		if (c->len >= 2 && c->s[1] == '[')
			return mql_error_set(err, MQL_NotImplemented,
					     "the positional operators $[] and "
					     "$[<identifier>] are not "
					     "supported: '%s'",
					     p->dotted);
		return mql_error_set(err, MQL_DollarPrefixedFieldName,
				     "The dollar ($) prefixed field '%.*s' in "
				     "'%s' is not valid for storage.",
				     (int)c->len, c->s, p->dotted);
	}
	return 0;
}

/* MongoDB's update order: numeric names numerically, others by bytes. */
static int name_cmp(const struct unode *a, const char *s, size_t len,
		    long index)
{
	int m;

	if (a->index >= 0 && index >= 0)
		return (a->index > index) - (a->index < index);
	m = memcmp(a->name, s, a->len < len ? a->len : len);
	if (m)
		return m;
	return (a->len > len) - (a->len < len);
}

static int conflict(const struct uop *op, size_t upto, struct mql_error *err)
{
	const struct mql_path_part *c = &op->path.parts[upto];

	return mql_error_set(err, MQL_ConflictingUpdateOperators,
			     "Updating the path '%s' would create a conflict "
			     "at '%.*s'",
			     op->path.dotted,
			     (int)(c->s + c->len - op->path.dotted),
			     op->path.dotted);
}

static int tree_add(struct mql_update *u, struct uop *op, struct mql_error *err)
{
	struct unode *node = &u->root;

	for (size_t i = 0; i < op->path.n; i++) {
		const struct mql_path_part *c = &op->path.parts[i];
		size_t lo = 0, hi = node->nkids;
		struct unode *kid;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			int m =
			    name_cmp(node->kids[mid], c->s, c->len, c->index);

			if (m == 0) {
				lo = mid;
				hi = mid + 1;
				break;
			}
			if (m < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < node->nkids && lo + 1 == hi &&
		    name_cmp(node->kids[lo], c->s, c->len, c->index) == 0) {
			kid = node->kids[lo];
			if (kid->op || i + 1 == op->path.n)
				return conflict(op, i, err);
			node = kid;
			continue;
		}
		kid = bson_malloc0(sizeof(*kid));
		kid->name = c->s;
		kid->len = c->len;
		kid->index = c->index;
		kid->positional = c->len == 1 && c->s[0] == '$';
		mql_grow((void **)&node->kids, &node->cap, node->nkids, 1,
			 sizeof(*node->kids));
		memmove(node->kids + lo + 1, node->kids + lo,
			(node->nkids - lo) * sizeof(*node->kids));
		node->kids[lo] = kid;
		node->nkids++;
		node = kid;
	}
	node->op = op;
	return 0;
}

static struct uop *op_new(struct mql_update *u, enum uop_kind kind,
			  const char *opname, const bson_value_t *arg)
{
	struct uop *op = bson_malloc0(sizeof(*op));

	op->kind = kind;
	op->opname = opname;
	op->arg = *arg;
	mql_grow((void **)&u->ops, &u->cap, u->nops, 1, sizeof(*u->ops));
	u->ops[u->nops++] = op;
	return op;
}

/* "{a: 1}" for messages: the field and its value. */
static void field_str(const char *k, const bson_value_t *v, char *buf, size_t n)
{
	char val[200];

	mql_value_str(v, val, sizeof(val));
	snprintf(buf, n, "{%s: %s}", k, val);
}

/* ---- each modifier's argument --------------------------------------- */

static bool whole_number(const bson_value_t *v, int64_t *out)
{
	double d;

	if (v->value_type == BSON_TYPE_INT32 ||
	    v->value_type == BSON_TYPE_INT64) {
		*out = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32
							: v->value.v_int64;
		return true;
	}
	if (!mql_is_number(v))
		return false;
	d = mql_number_double(v);
	if (isnan(d) || d != trunc(d) || fabs(d) > 9.2e18)
		return false;
	*out = (int64_t)d;
	return true;
}

static int parse_push_sort(struct uop *op, const bson_value_t *v,
			   struct mql_error *err)
{
	bson_iter_t it;

	if (mql_is_number(v)) {
		double d = mql_number_double(v);

		if (d != 1 && d != -1)
			return mql_error_set(err, MQL_BadValue,
					     "The $sort element value must be "
					     "either 1 or -1");
		op->sort = mql_sort_whole(d > 0 ? 1 : -1);
		return 0;
	}
	if (v->value_type != BSON_TYPE_DOCUMENT)
		return mql_error_set(err, MQL_BadValue,
				     "The $sort is invalid: use 1/-1 to sort "
				     "the whole element, or {field:1/-1} to "
				     "sort embedded fields");
	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	if (!bson_iter_next(&it))
		return mql_error_set(
		    err, MQL_BadValue,
		    "The $sort pattern is empty when it should "
		    "be a set of fields.");
	do {
		const bson_value_t *d = bson_iter_value(&it);

		if (!mql_is_number(d) ||
		    (mql_number_double(d) != 1 && mql_number_double(d) != -1))
			return mql_error_set(err, MQL_BadValue,
					     "The $sort element value must be "
					     "either 1 or -1");
	} while (bson_iter_next(&it));
	if (mql_sort_compile(v->value.v_doc.data, v->value.v_doc.data_len,
			     &op->sort, err) < 0) {
		err->code = MQL_BadValue;
		return -1;
	}
	return 0;
}

/* $push: {a: v} or {a: {$each: [...], $slice, $position, $sort}}. */
static int parse_push(struct uop *op, struct mql_error *err)
{
	const bson_value_t *arg = &op->arg;
	bson_iter_t it;
	bool is_add = op->kind == U_ADD_TO_SET;
	const char *name = is_add ? "$addToSet" : "$push";

	if (arg->value_type != BSON_TYPE_DOCUMENT ||
	    !mql_path_find_field(arg->value.v_doc.data,
				 arg->value.v_doc.data_len, "$each", 5, &it))
		return 0;
	if (is_add) { /* only {$each: [...]}, $each first */
		bson_iter_init_from_data(&it, arg->value.v_doc.data,
					 arg->value.v_doc.data_len);
		bson_iter_next(&it);
		if (strcmp(bson_iter_key(&it), "$each"))
			return 0;
	}
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const bson_value_t *v = bson_iter_value(&it);

		if (!strcmp(k, "$each")) {
			if (v->value_type != BSON_TYPE_ARRAY)
				return mql_error_set(
				    err, MQL_BadValue,
				    "The argument to $each in %s must be an "
				    "array but it was of type: %s",
				    name, mql_type_name(v->value_type));
			op->each = *v;
			op->has_each = true;
		} else if (is_add) {
			return mql_error_set(err, MQL_BadValue,
					     "Found unexpected fields after "
					     "$each in $addToSet: %s",
					     k);
		} else if (!strcmp(k, "$slice")) {
			if (!whole_number(v, &op->slice))
				return mql_error_set(
				    err, MQL_BadValue,
				    "The value for $slice must be an integer "
				    "value but was given type: %s",
				    mql_type_name(v->value_type));
			op->has_slice = true;
		} else if (!strcmp(k, "$position")) {
			if (!whole_number(v, &op->position))
				return mql_error_set(
				    err, MQL_BadValue,
				    "The value for $position must be an "
				    "integer value, not of type: %s",
				    mql_type_name(v->value_type));
			op->has_position = true;
		} else if (!strcmp(k, "$sort")) {
			if (parse_push_sort(op, v, err) < 0)
				return -1;
		} else {
			return mql_error_set(err, MQL_BadValue,
					     "Unrecognized clause in $push: %s",
					     k);
		}
	}
	return 0;
}

static int parse_rename(struct mql_update *u, struct uop *from, const char *k,
			struct mql_error *err)
{
	char buf[300];
	struct uop *to;
	const char *dst;
	size_t dl, sl = from->path.len;

	field_str(k, &from->arg, buf, sizeof(buf));
	if (from->arg.value_type != BSON_TYPE_UTF8)
		return mql_error_set(err, MQL_BadValue,
				     "The 'to' field for $rename must be a "
				     "string: %s",
				     buf);
	dst = from->arg.value.v_utf8.str;
	dl = from->arg.value.v_utf8.len;
	if (dl == sl && memcmp(dst, from->path.dotted, sl) == 0)
		return mql_error_set(err, MQL_BadValue,
				     "The source and target field for $rename "
				     "must differ: %s",
				     buf);
	if ((dl > sl && memcmp(dst, from->path.dotted, sl) == 0 &&
	     dst[sl] == '.') ||
	    (sl > dl && memcmp(dst, from->path.dotted, dl) == 0 &&
	     from->path.dotted[dl] == '.'))
		return mql_error_set(err, MQL_BadValue,
				     "The source and target field for $rename "
				     "must not be on the same path: %s",
				     buf);
	for (size_t i = 0; i < from->path.n; i++) {
		if (from->path.parts[i].s[0] == '$')
			return mql_error_set(err, MQL_BadValue,
					     "The source field for $rename may "
					     "not be dynamic: %s",
					     from->path.dotted);
	}
	to = op_new(u, U_RENAME_TO, "$rename", &from->arg);
	to->from = &from->path;
	if (parse_upath(dst, dl, &to->path, err) < 0)
		return -1;
	for (size_t i = 0; i < to->path.n; i++) {
		if (to->path.parts[i].s[0] == '$')
			return mql_error_set(
			    err, MQL_BadValue,
			    "The destination field for $rename "
			    "may not be dynamic: %s",
			    to->path.dotted);
	}
	return tree_add(u, to, err);
}

static int check_arg(struct uop *op, const char *k, struct mql_error *err)
{
	char buf[300];
	const bson_value_t *v = &op->arg;

	switch (op->kind) {
	case U_INC:
	case U_MUL:
		if (mql_is_number(v))
			return 0;
		field_str(k, v, buf, sizeof(buf));
		return mql_error_set(
		    err, MQL_TypeMismatch,
		    "Cannot %s with non-numeric argument: %s",
		    op->kind == U_INC ? "increment" : "multiply", buf);
	case U_CURRENT_DATE:
		if (v->value_type == BSON_TYPE_BOOL)
			return 0;
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			bson_iter_t it;
			const char *t;

			if (!mql_path_find_field(v->value.v_doc.data,
						 v->value.v_doc.data_len,
						 "$type", 5, &it) ||
			    !BSON_ITER_HOLDS_UTF8(&it))
				goto bad_date;
			t = bson_iter_utf8(&it, NULL);
			if (strcmp(t, "timestamp") == 0)
				op->timestamp = true;
			else if (strcmp(t, "date") != 0)
				return mql_error_set(
				    err, MQL_BadValue,
				    "The '$type' string field is required to "
				    "be 'date' or 'timestamp': {$currentDate: "
				    "{field : {$type: 'date'}}}");
			return 0;
		}
	bad_date:
		field_str(k, v, buf, sizeof(buf));
		return mql_error_set(err, MQL_BadValue,
				     "%s is not valid type for $currentDate. "
				     "Please use a boolean ('true') or a $type "
				     "expression ({$type: 'timestamp/date'}).",
				     buf);
	case U_POP: {
		double d = mql_number_double(v);

		field_str(k, v, buf, sizeof(buf));
		if (!mql_is_number(v))
			return mql_error_set(err, MQL_FailedToParse,
					     "Expected a number in: %s", buf);
		if (d != 1 && d != -1) {
			mql_value_str(v, buf, sizeof(buf));
			return mql_error_set(err, MQL_FailedToParse,
					     "$pop expects 1 or -1, found: %s",
					     buf);
		}
		return 0;
	}
	case U_PUSH:
	case U_ADD_TO_SET: return parse_push(op, err);
	case U_PULL: return mql_match_compile_value(v, &op->pull, err);
	case U_PULL_ALL:
		if (v->value_type == BSON_TYPE_ARRAY)
			return 0;
		return mql_error_set(err, MQL_BadValue,
				     "$pullAll requires an array argument but "
				     "was given a %s",
				     mql_type_name(v->value_type));
	default: return 0;
	}
}

/* ---- the document --------------------------------------------------- */

static int parse_modifier(struct mql_update *u, const char *name, int kind,
			  const bson_value_t *fields, struct mql_error *err)
{
	bson_iter_t it;

	if (fields->value_type != BSON_TYPE_DOCUMENT) {
		char buf[200];

		mql_value_str(fields, buf, sizeof(buf));
		return mql_error_set(err, MQL_FailedToParse,
				     "Modifiers operate on fields but we found "
				     "type %s instead. For example: {$mod: "
				     "{<field>: ...}} not {%s: %s}",
				     mql_type_name(fields->value_type), name,
				     buf);
	}
	bson_iter_init_from_data(&it, fields->value.v_doc.data,
				 fields->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		struct uop *op =
		    op_new(u, (enum uop_kind)kind, name, bson_iter_value(&it));
		const char *k = bson_iter_key(&it);

		if (parse_upath(k, bson_iter_key_len(&it), &op->path, err) < 0)
			return -1;
		if (op->kind == U_RENAME_FROM) {
			if (parse_rename(u, op, k, err) < 0)
				return -1;
		} else if (check_arg(op, k, err) < 0) {
			return -1;
		}
		if (tree_add(u, op, err) < 0)
			return -1;
	}
	return 0;
}

static int parse_operators(struct mql_update *u, struct mql_error *err)
{
	bson_iter_t it;

	bson_iter_init_from_data(&it, u->data, u->len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		int kind = -2;
		size_t i;

		for (i = 0; i < sizeof(modifiers) / sizeof(modifiers[0]); i++) {
			if (strcmp(k, modifiers[i].name) == 0) {
				kind = modifiers[i].kind;
				break;
			}
		}
		if (kind == -1)
			return mql_error_set(err, MQL_NotImplemented,
					     "%s is not supported", k);
		if (kind == -2)
			return mql_error_set(err, MQL_FailedToParse,
					     "Unknown modifier: %s. Expected a "
					     "valid update modifier or "
					     "pipeline-style update specified "
					     "as an array",
					     k);
		if (parse_modifier(u, modifiers[i].name, kind,
				   bson_iter_value(&it), err) < 0)
			return -1;
	}
	return 0;
}

static int check_replacement(struct mql_update *u, struct mql_error *err)
{
	bson_iter_t it;

	bson_iter_init_from_data(&it, u->data, u->len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$')
			return mql_error_set(
			    err, MQL_DollarPrefixedFieldName,
			    "The dollar ($) prefixed field '%s' in '%s' is not "
			    "allowed in the context of an update's replacement "
			    "document. Consider using an aggregation pipeline "
			    "with $replaceWith.",
			    k, k);
	}
	return 0;
}

/* Which subtrees may create fields: a node's flags are its kids'. */
static void mark_creates(struct unode *n)
{
	if (n->op) {
		switch (n->op->kind) {
		case U_SET:
		case U_INC:
		case U_MUL:
		case U_MIN:
		case U_MAX:
		case U_CURRENT_DATE:
		case U_PUSH:
		case U_ADD_TO_SET:
		case U_RENAME_TO: n->creates = true; break;
		case U_SET_ON_INSERT: n->inserts = true; break;
		default: break;
		}
		return;
	}
	for (size_t i = 0; i < n->nkids; i++) {
		mark_creates(n->kids[i]);
		n->creates |= n->kids[i]->creates;
		n->inserts |= n->kids[i]->inserts;
	}
}

int mql_update_compile(const uint8_t *update, uint32_t len,
		       struct mql_update **out, struct mql_error *err)
{
	struct mql_update *u;
	bson_iter_t it;
	int rc;

	*out = NULL;
	if (mql_bson_check(update, len, MQL_MAX_INPUT_SIZE, MQL_MAX_INPUT_DEPTH,
			   err) < 0)
		return -1;
	u = bson_malloc0(sizeof(*u));
	u->data = bson_malloc(len);
	memcpy(u->data, update, len);
	u->len = len;
	u->root.index = -1;
	bson_iter_init_from_data(&it, u->data, u->len);
	u->replacement = !bson_iter_next(&it) || bson_iter_key(&it)[0] != '$';
	rc = u->replacement ? check_replacement(u, err)
			    : parse_operators(u, err);
	if (rc < 0) {
		mql_update_free(u);
		return -1;
	}
	mark_creates(&u->root);
	*out = u;
	return 0;
}
