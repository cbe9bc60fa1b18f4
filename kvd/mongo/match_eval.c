/* match_eval.c - a compiled filter tested on a document or a value
 * (mql_match.h): MongoDB's matchesSingleElement for each predicate, and
 * "any candidate of the path matches" for each path. */
#include <math.h>
#include <string.h>

#include "match_int.h"
#include "mql_int.h"
#include "mql_value.h"

/* ComparisonMatchExpressionBase::matchesSingleElement: values of another
 * type rank never compare, except null against undefined or missing
 * (equal), and MinKey/MaxKey operands, below and above everything. */
static bool match_cmp(enum pred_kind pk, const bson_value_t *v,
		      const bson_value_t *rhs, bool missing)
{
	int rv = mql_type_rank(v->value_type);
	int rr = mql_type_rank(rhs->value_type);
	int c;

	if (rv != rr) {
		if (rv + rr == 5) /* null and undefined (or missing) */
			return pk == P_EQ || pk == P_LTE || pk == P_GTE;
		if (missing)
			return false;
		if (rhs->value_type == BSON_TYPE_MINKEY)
			return pk == P_GT || pk == P_GTE;
		if (rhs->value_type == BSON_TYPE_MAXKEY)
			return pk == P_LT || pk == P_LTE;
		return false;
	}
	if (rv == 10 && (mql_number_isnan(v) || mql_number_isnan(rhs))) {
		/* NaN equals NaN and is not ordered against numbers */
		bool both = mql_number_isnan(v) && mql_number_isnan(rhs);

		return both && (pk == P_EQ || pk == P_LTE || pk == P_GTE);
	}
	c = mql_value_cmp(v, rhs);
	switch (pk) {
	case P_EQ: return c == 0;
	case P_LT: return c < 0;
	case P_LTE: return c <= 0;
	case P_GT: return c > 0;
	case P_GTE: return c >= 0;
	default: return false;
	}
}

static bool match_regex(const struct node *n, const bson_value_t *v)
{
	const char *s;
	size_t len;

	if (v->value_type == BSON_TYPE_REGEX)
		return strcmp(v->value.v_regex.regex, n->re_src) == 0 &&
		       strcmp(v->value.v_regex.options, n->re_flags) == 0;
	if (v->value_type == BSON_TYPE_UTF8) {
		s = v->value.v_utf8.str;
		len = v->value.v_utf8.len;
	} else if (v->value_type == BSON_TYPE_SYMBOL) {
		s = v->value.v_symbol.symbol;
		len = v->value.v_symbol.len;
	} else {
		return false;
	}
	return re_prog_match(n->re, s, len);
}

static int type_bit_of(bson_type_t t)
{
	if (t == BSON_TYPE_MINKEY)
		return 20;
	if (t == BSON_TYPE_MAXKEY)
		return 21;
	return (int)t >= 1 && (int)t <= 19 ? (int)t : -1;
}

static bool match_in(const struct node *n, const bson_value_t *v, bool missing)
{
	size_t lo = 0, hi = n->nin;

	if (missing || v->value_type == BSON_TYPE_UNDEFINED ||
	    v->value_type == BSON_TYPE_NULL) {
		if (n->in_null)
			return true;
		if (missing)
			return false;
	}
	for (size_t i = 0; i < n->nin_re; i++) {
		if (match_regex(n->in_re[i], v))
			return true;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = mql_value_cmp(&n->in[mid], v);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static bool match_mod(const struct node *n, const bson_value_t *v)
{
	int64_t x;
	double d;

	if (!mql_is_number(v))
		return false;
	if (v->value_type == BSON_TYPE_INT32)
		x = v->value.v_int32;
	else if (v->value_type == BSON_TYPE_INT64)
		x = v->value.v_int64;
	else {
		d = trunc(mql_number_double(v));
		if (isnan(d) || isinf(d))
			return false;
		x = d >= 9.2e18	   ? INT64_MAX
		    : d <= -9.2e18 ? INT64_MIN
				   : (int64_t)d;
	}
	if (n->div == -1) /* INT64_MIN % -1 traps */
		return n->rem == 0;
	return x % n->div == n->rem;
}

/* $elemMatch: some element of the array v satisfies n->sub. */
static bool match_elem(const struct node *n, const bson_value_t *v, long *idx)
{
	bson_iter_t it;
	long k = 0;

	if (v->value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data,
				      v->value.v_doc.data_len))
		return false;
	for (; bson_iter_next(&it); k++) {
		const bson_value_t *e = bson_iter_value(&it);
		struct ectx c = {NULL, 0, e, false, -1};

		if (n->pk == P_ELEM_OBJ) {
			if (e->value_type != BSON_TYPE_DOCUMENT &&
			    e->value_type != BSON_TYPE_ARRAY)
				continue;
			c.doc = e->value.v_doc.data;
			c.len = e->value.v_doc.data_len;
			c.cur = NULL;
		}
		if (match_node(n->sub, &c)) {
			*idx = k;
			return true;
		}
	}
	return false;
}

/* One candidate value against a path predicate. */
static bool match_one(const struct node *n, const bson_value_t *v,
		      unsigned flags, long *idx)
{
	bool missing = flags & MQL_PATH_MISSING;

	switch (n->pk) {
	case P_EQ:
	case P_LT:
	case P_LTE:
	case P_GT:
	case P_GTE: return match_cmp(n->pk, v, &n->v, missing);
	case P_IN: return match_in(n, v, missing);
	case P_EXISTS: return !missing;
	case P_TYPE: {
		int bit = type_bit_of(v->value_type);

		if (missing)
			return false;
		if (n->number && mql_is_number(v))
			return true;
		return bit >= 0 && (n->types & (1u << bit));
	}
	case P_REGEX: return !missing && match_regex(n, v);
	case P_SIZE: {
		bson_iter_t it;
		int64_t count = 0;

		if (v->value_type != BSON_TYPE_ARRAY ||
		    !bson_iter_init_from_data(&it, v->value.v_doc.data,
					      v->value.v_doc.data_len))
			return false;
		while (bson_iter_next(&it))
			count++;
		return count == n->size;
	}
	case P_MOD: return !missing && match_mod(n, v);
	case P_ELEM_OBJ:
	case P_ELEM_VAL: return match_elem(n, v, idx);
	}
	return false;
}

struct path_ctx {
	const struct node *n;
	long pos;
};

static int path_cb(void *ctx, const bson_value_t *v, unsigned flags, long pos)
{
	struct path_ctx *p = ctx;
	long idx = -1;

	if (!match_one(p->n, v, flags, &idx))
		return 0;
	p->pos = pos >= 0 ? pos : idx;
	return 1;
}

static bool expands(enum pred_kind pk)
{
	return pk != P_SIZE && pk != P_ELEM_OBJ && pk != P_ELEM_VAL;
}

static bool match_path(const struct node *n, struct ectx *c)
{
	struct path_ctx p = {n, -1};
	long idx = -1;

	if (n->path.n == 0) {
		const bson_value_t *v = c->cur;
		bson_iter_t it;

		if (!v)
			return false;
		if (c->expand && expands(n->pk) &&
		    v->value_type == BSON_TYPE_ARRAY &&
		    bson_iter_init_from_data(&it, v->value.v_doc.data,
					     v->value.v_doc.data_len)) {
			while (bson_iter_next(&it)) {
				if (match_one(n, bson_iter_value(&it),
					      MQL_PATH_ELEMENT, &idx))
					return true;
			}
		}
		return match_one(n, v, 0, &idx);
	}
	if (!c->doc)
		return false;
	if (mql_path_walk(&n->path, 0, c->doc, c->len,
			  expands(n->pk) ? MQL_PATH_EXPAND : 0, path_cb, &p)) {
		if (c->pos < 0)
			c->pos = p.pos;
		return true;
	}
	return false;
}

bool match_node(const struct node *n, struct ectx *c)
{
	switch (n->kind) {
	case N_AND:
		for (size_t i = 0; i < n->nkids; i++) {
			if (!match_node(n->kids[i], c))
				return false;
		}
		return true;
	case N_OR:
		for (size_t i = 0; i < n->nkids; i++) {
			if (match_node(n->kids[i], c))
				return true;
		}
		return false;
	case N_NOR:
	case N_NOT: {
		/* a NOT's positions do not count */
		long saved = c->pos;

		for (size_t i = 0; i < n->nkids; i++) {
			if (match_node(n->kids[i], c)) {
				c->pos = saved;
				return false;
			}
		}
		c->pos = saved;
		return true;
	}
	case N_TRUE: return true;
	case N_FALSE: return false;
	case N_PATH: return match_path(n, c);
	}
	return false;
}

bool mql_match_doc(const struct mql_match *m, const uint8_t *doc, uint32_t len,
		   long *pos)
{
	struct ectx c = {doc, len, NULL, false, -1};
	bool r;

	if (m->mode != VM_NONE)
		return false;
	r = match_node(m->root, &c);
	if (pos)
		*pos = r ? c.pos : -1;
	return r;
}

bool mql_match_value(const struct mql_match *m, const bson_value_t *v)
{
	struct ectx c = {NULL, 0, v, true, -1};

	switch (m->mode) {
	case VM_OPS: return match_node(m->root, &c);
	case VM_FILTER:
		if (v->value_type != BSON_TYPE_DOCUMENT)
			return false;
		c.doc = v->value.v_doc.data;
		c.len = v->value.v_doc.data_len;
		c.cur = NULL;
		return match_node(m->root, &c);
	case VM_EQ: return mql_value_eq(v, &m->root->v);
	default: return false;
	}
}
