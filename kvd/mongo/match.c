/* match.c - MongoDB's filter language parsed into a tree (mql_match.h):
 * the operators, their argument checks and MongoDB's error messages.  The
 * tree is evaluated by match_eval.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "match_int.h"
#include "mql_int.h"
#include "mql_value.h"

struct parser {
	struct mql_error *err;
	bool regex; /* a regular expression was compiled */
};

static struct node *node_new(enum node_kind k)
{
	struct node *n = bson_malloc0(sizeof(*n));

	n->kind = k;
	return n;
}

static void add_kid(struct node *p, struct node *k)
{
	mql_grow((void **)&p->kids, &p->cap, p->nkids, 1, sizeof(*p->kids));
	p->kids[p->nkids++] = k;
}

void match_node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkids; i++)
		match_node_free(n->kids[i]);
	bson_free(n->kids);
	for (size_t i = 0; i < n->nin_re; i++)
		match_node_free(n->in_re[i]);
	bson_free(n->in_re);
	bson_free(n->in);
	re_prog_free(n->re);
	match_node_free(n->sub);
	mql_path_free(&n->path);
	bson_free(n);
}

/* A path predicate; an empty path means the value being tested. */
static struct node *path_node(struct parser *ps, const char *path, size_t plen,
			      enum pred_kind pk)
{
	struct node *n = node_new(N_PATH);

	n->pk = pk;
	if (plen && mql_path_parse(path, plen, &n->path, ps->err) < 0) {
		match_node_free(n);
		return NULL;
	}
	return n;
}

static bool is_op_doc(const bson_value_t *v)
{
	bson_iter_t it;
	const char *k;

	if (v->value_type != BSON_TYPE_DOCUMENT ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data,
				      v->value.v_doc.data_len) ||
	    !bson_iter_next(&it))
		return false;
	k = bson_iter_key(&it);
	/* a DBRef ({$ref, $id, $db}) is a value, not operators */
	return k[0] == '$' && strcmp(k, "$ref") && strcmp(k, "$id") &&
	       strcmp(k, "$db");
}

/* ---- regular expressions -------------------------------------------- */

static int compile_regex(struct parser *ps, struct node *n, const char *src,
			 size_t srclen, const char *flags)
{
	uint32_t opts = PCRE2_UTF;
	int code;
	PCRE2_SIZE off;
	PCRE2_UCHAR msg[160];
	pcre2_code *re;

	ps->regex = true;
	for (const char *f = flags; *f; f++) {
		switch (*f) {
		case 'i': opts |= PCRE2_CASELESS; break;
		case 'm': opts |= PCRE2_MULTILINE; break;
		case 's': opts |= PCRE2_DOTALL; break;
		case 'x': opts |= PCRE2_EXTENDED; break;
		case 'u': break; /* UTF-8 is always on */
		default:
			return mql_error_set(
			    ps->err, 51108, "invalid flag in regex options: %c",
			    *f);
		}
	}
	if (memchr(src, '\0', srclen))
		return mql_error_set(ps->err, 51095,
				     "Regular expression cannot contain an "
				     "embedded null byte");
	re = pcre2_compile((PCRE2_SPTR)src, srclen, opts, &code, &off, NULL);
	if (!re) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		return mql_error_set(ps->err, 51091,
				     "Regular expression is invalid: %s",
				     (const char *)msg);
	}
	n->re = bson_malloc0(sizeof(*n->re));
	n->re->code = re;
	n->re_src = src;
	n->re_flags = flags;
	return 0;
}

/* {a: /re/} and the elements of $in and $all that are regexes. */
static struct node *regex_node(struct parser *ps, const char *path, size_t plen,
			       const bson_value_t *v)
{
	struct node *n = path_node(ps, path, plen, P_REGEX);

	if (n && compile_regex(ps, n, v->value.v_regex.regex,
			       strlen(v->value.v_regex.regex),
			       v->value.v_regex.options) < 0) {
		match_node_free(n);
		return NULL;
	}
	return n;
}

/* $regex and $options, which may come in either order. */
static int parse_regex_ops(struct parser *ps, struct node *and,
			   const char *path, size_t plen, const bson_iter_t *re,
			   const bson_iter_t *opt)
{
	const char *src, *flags = "";
	uint32_t srclen;
	struct node *n;

	if (!re)
		return mql_error_set(ps->err, MQL_BadValue,
				     "$options needs a $regex");
	if (opt && !BSON_ITER_HOLDS_UTF8(opt))
		return mql_error_set(ps->err, MQL_BadValue,
				     "$options has to be a string");
	if (opt)
		flags = bson_iter_utf8(opt, NULL);
	if (BSON_ITER_HOLDS_REGEX(re)) {
		const char *reflags;

		src = bson_iter_regex(re, &reflags);
		srclen = (uint32_t)strlen(src);
		if (*reflags && opt)
			return mql_error_set(ps->err, 51075,
					     "options set in both $regex and "
					     "$options");
		if (*reflags)
			flags = reflags;
	} else if (BSON_ITER_HOLDS_UTF8(re)) {
		src = bson_iter_utf8(re, &srclen);
	} else {
		return mql_error_set(ps->err, MQL_BadValue,
				     "$regex has to be a string");
	}
	n = path_node(ps, path, plen, P_REGEX);
	if (!n)
		return -1;
	add_kid(and, n);
	return compile_regex(ps, n, src, srclen, flags);
}

/* ---- $type ---------------------------------------------------------- */

static const struct {
	const char *name;
	int num;
} type_aliases[] = {
    {"double", 1},	{"string", 2},	   {"object", 3},
    {"array", 4},	{"binData", 5},	   {"undefined", 6},
    {"objectId", 7},	{"bool", 8},	   {"date", 9},
    {"null", 10},	{"regex", 11},	   {"dbPointer", 12},
    {"javascript", 13}, {"symbol", 14},	   {"javascriptWithScope", 15},
    {"int", 16},	{"timestamp", 17}, {"long", 18},
    {"decimal", 19},	{"minKey", -1},	   {"maxKey", 127},
};

/* BSON type number to a bit of node.types: 1..19, minKey 20, maxKey 21. */
static int type_bit(int num)
{
	if (num >= 1 && num <= 19)
		return num;
	return num == -1 ? 20 : num == 127 ? 21 : -1;
}

static int add_type(struct parser *ps, struct node *n, const bson_value_t *t)
{
	int num, bit;

	if (t->value_type == BSON_TYPE_UTF8) {
		if (strcmp(t->value.v_utf8.str, "number") == 0) {
			n->number = true;
			return 0;
		}
		for (size_t i = 0;
		     i < sizeof(type_aliases) / sizeof(type_aliases[0]); i++) {
			if (strcmp(t->value.v_utf8.str, type_aliases[i].name) ==
			    0) {
				n->types |= 1u << type_bit(type_aliases[i].num);
				return 0;
			}
		}
		return mql_error_set(ps->err, MQL_BadValue,
				     "Unknown type name alias: %s",
				     t->value.v_utf8.str);
	}
	if (!mql_is_number(t))
		return mql_error_set(ps->err, MQL_TypeMismatch,
				     "type must be represented as a number or "
				     "a string");
	{
		double d = mql_number_double(t);
		char buf[64];

		if (d != trunc(d) || d < -1 || d > 127) {
			mql_value_str(t, buf, sizeof(buf));
			return mql_error_set(ps->err, MQL_BadValue,
					     "Invalid numerical type code: %s",
					     buf);
		}
		num = (int)d;
		bit = type_bit(num);
		if (bit < 0)
			return mql_error_set(ps->err, MQL_BadValue,
					     "Invalid numerical type code: %d",
					     num);
	}
	n->types |= 1u << bit;
	return 0;
}

static struct node *parse_type(struct parser *ps, const char *path, size_t plen,
			       const bson_value_t *arg)
{
	struct node *n = path_node(ps, path, plen, P_TYPE);
	bson_iter_t it;

	if (!n)
		return NULL;
	if (arg->value_type != BSON_TYPE_ARRAY) {
		if (add_type(ps, n, arg) < 0)
			goto fail;
		return n;
	}
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		if (add_type(ps, n, bson_iter_value(&it)) < 0)
			goto fail;
	}
	return n;
fail:
	match_node_free(n);
	return NULL;
}

/* ---- $in ------------------------------------------------------------ */

static int cmp_values(const void *a, const void *b)
{
	return mql_value_cmp(a, b);
}

static struct node *parse_in(struct parser *ps, const char *path, size_t plen,
			     const bson_value_t *arg, const char *opname)
{
	struct node *n;
	bson_iter_t it;
	size_t cap = 0, recap = 0;

	if (arg->value_type != BSON_TYPE_ARRAY) {
		mql_error_set(ps->err, MQL_BadValue, "%s needs an array",
			      opname);
		return NULL;
	}
	n = path_node(ps, path, plen, P_IN);
	if (!n)
		return NULL;
	n->v = *arg; /* the array, for mql_match_preds */
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);

		if (is_op_doc(v)) {
			mql_error_set(ps->err, MQL_BadValue,
				      "cannot nest $ under %s", opname);
			goto fail;
		}
		if (v->value_type == BSON_TYPE_REGEX) {
			struct node *r = regex_node(ps, NULL, 0, v);

			if (!r)
				goto fail;
			mql_grow((void **)&n->in_re, &recap, n->nin_re, 1,
				 sizeof(*n->in_re));
			n->in_re[n->nin_re++] = r;
			continue;
		}
		if (v->value_type == BSON_TYPE_NULL)
			n->in_null = true;
		mql_grow((void **)&n->in, &cap, n->nin, 1, sizeof(*n->in));
		n->in[n->nin++] = *v;
	}
	if (n->nin > 1)
		qsort(n->in, n->nin, sizeof(*n->in), cmp_values);
	return n;
fail:
	match_node_free(n);
	return NULL;
}

/* ---- operators ------------------------------------------------------ */

static struct node *parse_filter(struct parser *ps, const uint8_t *data,
				 uint32_t len, int depth);
static int parse_ops(struct parser *ps, struct node *and, const char *path,
		     size_t plen, const bson_value_t *ops, int depth);

static struct node *cmp_node(struct parser *ps, const char *path, size_t plen,
			     enum pred_kind pk, const bson_value_t *arg)
{
	struct node *n;

	if (arg->value_type == BSON_TYPE_UNDEFINED) {
		mql_error_set(ps->err, MQL_BadValue,
			      "cannot compare to undefined");
		return NULL;
	}
	n = path_node(ps, path, plen, pk);
	if (n)
		n->v = *arg;
	return n;
}

static struct node *not_of(struct node *k)
{
	struct node *n;

	if (!k)
		return NULL;
	n = node_new(N_NOT);
	add_kid(n, k);
	return n;
}

static bool true_value(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_BOOL: return v->value.v_bool;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128: return mql_number_double(v) != 0;
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_EOD: return false;
	default: return true;
	}
}

static int whole_int64(const bson_value_t *v, int64_t *out)
{
	double d;

	if (v->value_type == BSON_TYPE_INT32 ||
	    v->value_type == BSON_TYPE_INT64) {
		*out = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32
							: v->value.v_int64;
		return 0;
	}
	d = mql_number_double(v);
	if (isnan(d) || isinf(d) || d != trunc(d) || fabs(d) >= 9.2e18)
		return -1;
	*out = (int64_t)d;
	return 0;
}

static struct node *parse_size(struct parser *ps, const char *path, size_t plen,
			       const bson_value_t *arg)
{
	struct node *n;
	int64_t size;

	if (!mql_is_number(arg)) {
		mql_error_set(ps->err, MQL_BadValue, "$size needs a number");
		return NULL;
	}
	if (whole_int64(arg, &size) < 0) {
		mql_error_set(ps->err, MQL_BadValue,
			      "$size must be a whole number");
		return NULL;
	}
	if (size < 0) {
		mql_error_set(ps->err, MQL_BadValue,
			      "$size may not be negative");
		return NULL;
	}
	n = path_node(ps, path, plen, P_SIZE);
	if (n)
		n->size = size;
	return n;
}

/* $mod: [divisor, remainder], numbers truncated towards zero. */
static struct node *parse_mod(struct parser *ps, const char *path, size_t plen,
			      const bson_value_t *arg)
{
	bson_iter_t it;
	bson_value_t d[2];
	int k = 0;
	struct node *n;

	if (arg->value_type != BSON_TYPE_ARRAY) {
		mql_error_set(ps->err, MQL_BadValue,
			      "malformed mod, needs to be an array");
		return NULL;
	}
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		if (k == 2) {
			mql_error_set(ps->err, MQL_BadValue,
				      "malformed mod, too many elements");
			return NULL;
		}
		d[k++] = *bson_iter_value(&it);
	}
	if (k < 2) {
		mql_error_set(ps->err, MQL_BadValue,
			      "malformed mod, not enough elements");
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		double x = mql_number_double(&d[i]);

		if (!mql_is_number(&d[i]) || isnan(x) || isinf(x)) {
			mql_error_set(ps->err, MQL_BadValue,
				      "malformed mod, %s not a number",
				      i ? "remainder" : "divisor");
			return NULL;
		}
	}
	n = path_node(ps, path, plen, P_MOD);
	if (!n)
		return NULL;
	for (int i = 0; i < 2; i++) {
		double x = trunc(mql_number_double(&d[i]));
		int64_t v =
		    d[i].value_type == BSON_TYPE_INT32	 ? d[i].value.v_int32
		    : d[i].value_type == BSON_TYPE_INT64 ? d[i].value.v_int64
		    : x >= 9.2e18			 ? INT64_MAX
		    : x <= -9.2e18			 ? INT64_MIN
							 : (int64_t)x;

		if (i)
			n->rem = v;
		else
			n->div = v;
	}
	if (n->div == 0) {
		match_node_free(n);
		mql_error_set(ps->err, MQL_BadValue, "divisor cannot be 0");
		return NULL;
	}
	return n;
}

/* Top-level operators an $elemMatch object may start with (so that the
 * object is a filter of documents, not operators on values). */
static bool is_top_op(const char *k)
{
	static const char *tops[] = {
	    "$and",	"$or",	       "$nor",	       "$where", "$expr",
	    "$comment", "$alwaysTrue", "$alwaysFalse", "$text",	 "$jsonSchema"};

	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		if (strcmp(k, tops[i]) == 0)
			return true;
	}
	return false;
}

static struct node *parse_elem_match(struct parser *ps, const char *path,
				     size_t plen, const bson_value_t *arg,
				     int depth)
{
	struct node *n;
	bson_iter_t it;
	bool value_form = false;

	if (arg->value_type != BSON_TYPE_DOCUMENT) {
		mql_error_set(ps->err, MQL_BadValue,
			      "$elemMatch needs an Object");
		return NULL;
	}
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	if (bson_iter_next(&it) && bson_iter_key(&it)[0] == '$' &&
	    !is_top_op(bson_iter_key(&it)))
		value_form = true;
	n = path_node(ps, path, plen, value_form ? P_ELEM_VAL : P_ELEM_OBJ);
	if (!n)
		return NULL;
	if (value_form) {
		n->sub = node_new(N_AND);
		if (parse_ops(ps, n->sub, NULL, 0, arg, depth + 1) < 0)
			goto fail;
	} else {
		n->sub = parse_filter(ps, arg->value.v_doc.data,
				      arg->value.v_doc.data_len, depth + 1);
		if (!n->sub)
			goto fail;
	}
	return n;
fail:
	match_node_free(n);
	return NULL;
}

static struct node *parse_all(struct parser *ps, const char *path, size_t plen,
			      const bson_value_t *arg, int depth)
{
	struct node *and;
	bson_iter_t it;
	int k = 0;
	bool elem = false;

	if (arg->value_type != BSON_TYPE_ARRAY) {
		mql_error_set(ps->err, MQL_BadValue, "$all needs an array");
		return NULL;
	}
	and = node_new(N_AND);
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	for (; bson_iter_next(&it); k++) {
		const bson_value_t *v = bson_iter_value(&it);
		bool em = false;
		struct node *kid;
		/* v may point into f's value below: f lives as long as v */
		bson_iter_t f;

		if (v->value_type == BSON_TYPE_DOCUMENT) {
			bson_iter_init_from_data(&f, v->value.v_doc.data,
						 v->value.v_doc.data_len);
			em = bson_iter_next(&f) &&
			     strcmp(bson_iter_key(&f), "$elemMatch") == 0;
			if (em)
				v = bson_iter_value(&f);
		}
		if (k == 0)
			elem = em;
		if (em != elem) {
			mql_error_set(ps->err, MQL_BadValue,
				      "$all/$elemMatch has to be consistent");
			goto fail;
		}
		if (em)
			kid = parse_elem_match(ps, path, plen, v, depth);
		else if (v->value_type == BSON_TYPE_REGEX)
			kid = regex_node(ps, path, plen, v);
		else if (is_op_doc(v)) {
			mql_error_set(ps->err, MQL_BadValue,
				      "no $ expressions in $all");
			goto fail;
		} else
			kid = cmp_node(ps, path, plen, P_EQ, v);
		if (!kid)
			goto fail;
		add_kid(and, kid);
	}
	if (k == 0) /* $all: [] matches nothing */
		and->kind = N_FALSE;
	return and;
fail:
	match_node_free(and);
	return NULL;
}

static struct node *parse_not(struct parser *ps, const char *path, size_t plen,
			      const bson_value_t *arg, int depth)
{
	struct node *and;
	bson_iter_t it;

	if (arg->value_type == BSON_TYPE_REGEX)
		return not_of(regex_node(ps, path, plen, arg));
	if (arg->value_type != BSON_TYPE_DOCUMENT) {
		mql_error_set(ps->err, MQL_BadValue,
			      "$not needs a regex or a document");
		return NULL;
	}
	bson_iter_init_from_data(&it, arg->value.v_doc.data,
				 arg->value.v_doc.data_len);
	if (!bson_iter_next(&it)) {
		mql_error_set(ps->err, MQL_BadValue, "$not cannot be empty");
		return NULL;
	}
	and = node_new(N_AND);
	if (parse_ops(ps, and, path, plen, arg, depth + 1) < 0) {
		match_node_free(and);
		return NULL;
	}
	return not_of(and);
}

static const char *const unsupported_ops[] = {
    "$geoWithin",
    "$geoIntersects",
    "$near",
    "$nearSphere",
    "$within",
    "$bitsAllSet",
    "$bitsAllClear",
    "$bitsAnySet",
    "$bitsAnyClear",
    "$jsonSchema",
    "$_internalSchemaType",
    "$where",
    "$expr",
    "$text",
    "$sampleRate",
};

/* One operator of {path: {$op: arg, ...}} (not $regex/$options). */
static struct node *parse_op(struct parser *ps, const char *path, size_t plen,
			     const char *op, const bson_value_t *arg, int depth)
{
	static const struct {
		const char *name;
		enum pred_kind pk;
	} cmps[] = {{"$eq", P_EQ},
		    {"$lt", P_LT},
		    {"$lte", P_LTE},
		    {"$gt", P_GT},
		    {"$gte", P_GTE}};

	for (size_t i = 0; i < sizeof(cmps) / sizeof(cmps[0]); i++) {
		if (strcmp(op, cmps[i].name) == 0)
			return cmp_node(ps, path, plen, cmps[i].pk, arg);
	}
	if (strcmp(op, "$ne") == 0) {
		if (arg->value_type == BSON_TYPE_REGEX) {
			mql_error_set(ps->err, MQL_BadValue,
				      "Can't have regex as arg to $ne.");
			return NULL;
		}
		return not_of(cmp_node(ps, path, plen, P_EQ, arg));
	}
	if (strcmp(op, "$in") == 0)
		return parse_in(ps, path, plen, arg, "$in");
	if (strcmp(op, "$nin") == 0)
		return not_of(parse_in(ps, path, plen, arg, "$nin"));
	if (strcmp(op, "$exists") == 0) {
		struct node *n = path_node(ps, path, plen, P_EXISTS);

		return true_value(arg) ? n : not_of(n);
	}
	if (strcmp(op, "$type") == 0)
		return parse_type(ps, path, plen, arg);
	if (strcmp(op, "$size") == 0)
		return parse_size(ps, path, plen, arg);
	if (strcmp(op, "$mod") == 0)
		return parse_mod(ps, path, plen, arg);
	if (strcmp(op, "$all") == 0)
		return parse_all(ps, path, plen, arg, depth);
	if (strcmp(op, "$elemMatch") == 0)
		return parse_elem_match(ps, path, plen, arg, depth);
	if (strcmp(op, "$not") == 0)
		return parse_not(ps, path, plen, arg, depth);
	for (size_t i = 0;
	     i < sizeof(unsupported_ops) / sizeof(unsupported_ops[0]); i++) {
		if (strcmp(op, unsupported_ops[i]) == 0) {
			mql_error_set(ps->err, MQL_NotImplemented,
				      "%s is not supported", op);
			return NULL;
		}
	}
	mql_error_set(ps->err, MQL_BadValue, "unknown operator: %s", op);
	return NULL;
}

/* {path: {$op: arg, ...}}: each operator a kid of and. */
static int parse_ops(struct parser *ps, struct node *and, const char *path,
		     size_t plen, const bson_value_t *ops, int depth)
{
	bson_iter_t it, re, opt;
	bool have_re = false, have_opt = false;

	if (depth > MATCH_MAX_DEPTH)
		return mql_error_set(ps->err, MQL_BadValue,
				     "exceeded maximum query tree depth of %d",
				     MATCH_MAX_DEPTH);
	bson_iter_init_from_data(&it, ops->value.v_doc.data,
				 ops->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		struct node *n;

		if (strcmp(k, "$regex") == 0) {
			re = it;
			have_re = true;
			continue;
		}
		if (strcmp(k, "$options") == 0) {
			opt = it;
			have_opt = true;
			continue;
		}
		if (k[0] != '$')
			return mql_error_set(ps->err, MQL_BadValue,
					     "unknown operator: %s", k);
		n = parse_op(ps, path, plen, k, bson_iter_value(&it), depth);
		if (!n)
			return -1;
		add_kid(and, n);
	}
	if (have_re || have_opt)
		return parse_regex_ops(ps, and, path, plen,
				       have_re ? &re : NULL,
				       have_opt ? &opt : NULL);
	return 0;
}

/* ---- the top level -------------------------------------------------- */

static int parse_logical(struct parser *ps, struct node *and, const char *k,
			 const bson_value_t *v, int depth)
{
	struct node *n = node_new(k[1] == 'a'	? N_AND
				  : k[1] == 'o' ? N_OR
						: N_NOR);
	bson_iter_t it;

	add_kid(and, n);
	if (v->value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data,
				      v->value.v_doc.data_len) ||
	    v->value.v_doc.data_len <= 5)
		return mql_error_set(ps->err, MQL_BadValue,
				     "$and/$or/$nor must be a nonempty array");
	while (bson_iter_next(&it)) {
		struct node *kid;
		uint32_t len;
		const uint8_t *data;

		if (!BSON_ITER_HOLDS_DOCUMENT(&it))
			return mql_error_set(ps->err, MQL_BadValue,
					     "$or/$and/$nor entries need to be "
					     "full objects");
		bson_iter_document(&it, &len, &data);
		kid = parse_filter(ps, data, len, depth + 1);
		if (!kid)
			return -1;
		add_kid(n, kid);
	}
	return 0;
}

static int parse_top_op(struct parser *ps, struct node *and, const char *k,
			const bson_value_t *v, int depth)
{
	if (!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor"))
		return parse_logical(ps, and, k, v, depth);
	if (!strcmp(k, "$comment"))
		return 0;
	if (!strcmp(k, "$alwaysTrue") || !strcmp(k, "$alwaysFalse")) {
		if (!mql_is_number(v) || mql_number_double(v) != 1)
			return mql_error_set(ps->err, MQL_FailedToParse,
					     "%s must be an integer value of 1",
					     k);
		add_kid(and, node_new(k[7] == 'T' ? N_TRUE : N_FALSE));
		return 0;
	}
	for (size_t i = 0;
	     i < sizeof(unsupported_ops) / sizeof(unsupported_ops[0]); i++) {
		if (strcmp(k, unsupported_ops[i]) == 0)
			return mql_error_set(ps->err, MQL_NotImplemented,
					     "%s is not supported", k);
	}
	return mql_error_set(ps->err, MQL_BadValue,
			     "unknown top level operator: %s. If you have a "
			     "field name that starts with a '$' symbol, "
			     "consider using $getField or $setField.",
			     k);
}

static int parse_field(struct parser *ps, struct node *and, const char *k,
		       size_t klen, const bson_value_t *v, int depth)
{
	struct node *n;

	if (is_op_doc(v)) {
		n = node_new(N_AND);
		add_kid(and, n);
		return parse_ops(ps, n, k, klen, v, depth);
	}
	if (v->value_type == BSON_TYPE_REGEX)
		n = regex_node(ps, k, klen, v);
	else
		n = cmp_node(ps, k, klen, P_EQ, v);
	if (!n)
		return -1;
	add_kid(and, n);
	return 0;
}

static struct node *parse_filter(struct parser *ps, const uint8_t *data,
				 uint32_t len, int depth)
{
	struct node *and = node_new(N_AND);
	bson_iter_t it;

	if (depth > MATCH_MAX_DEPTH) {
		mql_error_set(ps->err, MQL_BadValue,
			      "exceeded maximum query tree depth of %d",
			      MATCH_MAX_DEPTH);
		goto fail;
	}
	if (!bson_iter_init_from_data(&it, data, len)) {
		mql_error_set(ps->err, MQL_InvalidBSON, "invalid BSON");
		goto fail;
	}
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const bson_value_t *v = bson_iter_value(&it);
		int rc;

		if (k[0] == '$')
			rc = parse_top_op(ps, and, k, v, depth);
		else
			rc = parse_field(ps, and, k, bson_iter_key_len(&it), v,
					 depth);
		if (rc < 0)
			goto fail;
	}
	return and;
fail:
	match_node_free(and);
	return NULL;
}

/* ---- the public calls ----------------------------------------------- */

int mql_match_compile(const uint8_t *filter, uint32_t len,
		      struct mql_match **out, struct mql_error *err)
{
	struct parser ps = {err};
	struct mql_match *m;

	*out = NULL;
	if (mql_bson_check(filter, len, MQL_MAX_INPUT_SIZE, MQL_MAX_INPUT_DEPTH,
			   err) < 0)
		return -1;
	m = bson_malloc0(sizeof(*m));
	m->filter = bson_malloc(len);
	memcpy(m->filter, filter, len);
	m->len = len;
	m->root = parse_filter(&ps, m->filter, len, 0);
	if (!m->root) {
		mql_match_free(m);
		return -1;
	}
	m->slow = ps.regex;
	*out = m;
	return 0;
}

int mql_match_compile_value(const bson_value_t *cond, struct mql_match **out,
			    struct mql_error *err)
{
	struct parser ps = {err};
	struct mql_match *m;
	bson_t b = BSON_INITIALIZER;
	bson_iter_t it;
	const bson_value_t *v;
	int rc = -1;

	*out = NULL;
	m = bson_malloc0(sizeof(*m));
	if (!bson_append_value(&b, "", 0, cond)) {
		mql_error_set(err, MQL_BSONObjectTooLarge, "too large");
		goto fail;
	}
	m->len = b.len;
	m->filter = bson_destroy_with_steal(&b, true, &m->len);
	if (mql_bson_check(m->filter, m->len, MQL_MAX_INPUT_SIZE,
			   MQL_MAX_INPUT_DEPTH, err) < 0)
		goto fail;
	bson_iter_init_from_data(&it, m->filter, m->len);
	bson_iter_next(&it);
	v = bson_iter_value(&it);
	if (is_op_doc(v)) {
		m->mode = VM_OPS;
		m->root = node_new(N_AND);
		rc = parse_ops(&ps, m->root, NULL, 0, v, 0);
	} else if (v->value_type == BSON_TYPE_DOCUMENT) {
		m->mode = VM_FILTER;
		m->root = parse_filter(&ps, v->value.v_doc.data,
				       v->value.v_doc.data_len, 0);
		rc = m->root ? 0 : -1;
	} else {
		m->mode = VM_EQ;
		m->root = path_node(&ps, NULL, 0, P_EQ);
		m->root->v = *v;
		rc = 0;
	}
	if (rc == 0) {
		m->slow = ps.regex;
		*out = m;
		return 0;
	}
fail:
	mql_match_free(m);
	return -1;
}

bool mql_match_slow(const struct mql_match *m)
{
	return m->slow;
}

void mql_match_free(struct mql_match *m)
{
	if (!m)
		return;
	match_node_free(m->root);
	bson_free(m->filter);
	bson_free(m);
}

static void preds_of(const struct node *n,
		     void (*cb)(void *ctx, const struct mql_pred *p), void *ctx)
{
	static const enum mql_pred_op ops[] = {
	    [P_EQ] = MQL_PRED_EQ,   [P_LT] = MQL_PRED_LT,
	    [P_LTE] = MQL_PRED_LTE, [P_GT] = MQL_PRED_GT,
	    [P_GTE] = MQL_PRED_GTE, [P_IN] = MQL_PRED_IN,
	};

	if (n->kind == N_AND) {
		for (size_t i = 0; i < n->nkids; i++)
			preds_of(n->kids[i], cb, ctx);
		return;
	}
	if (n->kind == N_PATH && n->path.n > 0 && n->pk <= P_IN) {
		struct mql_pred p = {n->path.dotted, ops[n->pk], &n->v};

		cb(ctx, &p);
	}
}

void mql_match_preds(const struct mql_match *m,
		     void (*cb)(void *ctx, const struct mql_pred *p), void *ctx)
{
	if (m->mode == VM_NONE)
		preds_of(m->root, cb, ctx);
}

static bool fields_of(const struct node *n,
		      bool (*ok)(void *ctx, const char *name, size_t len),
		      void *ctx)
{
	if (n->kind == N_PATH) {
		/* an $elemMatch's own paths are below this one's value */
		const char *d = n->path.dotted, *dot;

		if (n->path.n == 0 || !d)
			return false;
		dot = strchr(d, '.');
		return ok(ctx, d, dot ? (size_t)(dot - d) : strlen(d));
	}
	for (size_t i = 0; i < n->nkids; i++)
		if (!fields_of(n->kids[i], ok, ctx))
			return false;
	return true;
}

bool mql_match_fields(const struct mql_match *m,
		      bool (*ok)(void *ctx, const char *name, size_t len),
		      void *ctx)
{
	return m->mode == VM_NONE && fields_of(m->root, ok, ctx);
}

bool mql_match_is_id_eq(const struct mql_match *m, const bson_value_t **v)
{
	const struct node *n = m->root;

	if (m->mode != VM_NONE || n->nkids != 1)
		return false;
	n = n->kids[0];
	if (n->kind == N_AND && n->nkids == 1) /* {_id: {$eq: v}} */
		n = n->kids[0];
	if (n->kind != N_PATH || n->pk != P_EQ ||
	    strcmp(n->path.dotted ? n->path.dotted : "", "_id") != 0)
		return false;
	switch (n->v.value_type) {
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
	case BSON_TYPE_REGEX: return false;
	default: *v = &n->v; return true;
	}
}
