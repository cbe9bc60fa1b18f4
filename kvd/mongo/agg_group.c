/* agg_group.c - $group (mql_agg.h): documents grouped by their _id
 * expression under MongoDB's equality (1, 1.0 and NumberLong(1) are one
 * group, the first seen value names it), the accumulators computed as the
 * documents come, every byte held counted against the stage's limit.
 * Groups come out in the order they were first seen (MongoDB gives them in
 * no order). */
#include <math.h>
#include <string.h>

#include "agg_int.h"
#include "mql_int.h"
#include "mql_sort.h"
#include "mql_value.h"

/* ---- compiling ------------------------------------------------------ */

static const struct {
	const char *name;
	enum agg_acc_op op;
} accs[] = {
    {"$sum", ACC_SUM},	 {"$avg", ACC_AVG},	      {"$min", ACC_MIN},
    {"$max", ACC_MAX},	 {"$first", ACC_FIRST},	      {"$last", ACC_LAST},
    {"$push", ACC_PUSH}, {"$addToSet", ACC_ADDTOSET}, {"$count", ACC_COUNT},
};

/* MongoDB's accumulators that this executor does not compute. */
static const char *const unsupported[] = {
    "$stdDevPop",  "$stdDevSamp",  "$mergeObjects", "$top",
    "$topN",	   "$bottom",	   "$bottomN",	    "$firstN",
    "$lastN",	   "$maxN",	   "$minN",	    "$median",
    "$percentile", "$accumulator", "$concatArrays", "$setUnion",
};

void agg_group_spec_free(struct agg_group *g)
{
	mql_expr_free(g->id);
	for (size_t i = 0; i < g->nacc; i++) {
		bson_free(g->acc[i].name);
		mql_expr_free(g->acc[i].arg);
	}
	bson_free(g->acc);
	mql_sort_free(g->order);
	bson_free(g->order_bson);
	mql_project_free(g->reads);
	memset(g, 0, sizeof(*g));
}

/* A field an expression reads, into the projection's spec: false for _id
 * (the projection leaves it out). */
static bool read_field(void *ctx, const char *name, size_t len)
{
	bson_t *spec = ctx;
	bson_iter_t it;

	if (len == 3 && !memcmp(name, "_id", 3))
		return false;
	if (bson_iter_init(&it, spec))
		while (bson_iter_next(&it))
			if (bson_iter_key_len(&it) == len &&
			    !memcmp(bson_iter_key(&it), name, len))
				return true;
	return bson_append_int32(spec, name, (int)len, 1);
}

/* g->reads: the fields the group's expressions read, when they read
 * fields only (and not _id); g->reads_none when they read none. */
static void group_reads(struct agg_group *g)
{
	bson_t spec = BSON_INITIALIZER;
	struct mql_error e;
	bool ok = mql_expr_fields(g->id, read_field, &spec);

	for (size_t i = 0; ok && i < g->nacc; i++)
		ok = !g->acc[i].arg ||
		     mql_expr_fields(g->acc[i].arg, read_field, &spec);
	g->reads_none = ok && bson_empty(&spec);
	if (ok && !bson_empty(&spec) && BSON_APPEND_INT32(&spec, "_id", 0) &&
	    mql_project_compile(bson_get_data(&spec), spec.len,
				MQL_PROJECT_FIND, &g->reads, &e))
		g->reads = NULL;
	bson_destroy(&spec);
}

/* _id: "$f" (a field, not a variable): the order {f: 1} in which the
 * group may stream.  None when the path does not make a sort. */
static void group_order(struct agg_group *g, const bson_value_t *id)
{
	bson_t spec = BSON_INITIALIZER;
	struct mql_error e;
	const char *s = id->value.v_utf8.str;

	if (id->value_type != BSON_TYPE_UTF8 || id->value.v_utf8.len < 2 ||
	    s[0] != '$' || s[1] == '$' || !mql_expr_is_field_path(g->id))
		return;
	bson_append_int32(&spec, s + 1, (int)id->value.v_utf8.len - 1, 1);
	if (mql_sort_compile(bson_get_data(&spec), spec.len, &g->order, &e) ==
	    0) {
		g->order_len = spec.len;
		g->order_bson = bson_malloc(spec.len);
		memcpy(g->order_bson, bson_get_data(&spec), spec.len);
	}
	bson_destroy(&spec);
}

static int find_op(const char *name, enum agg_acc_op *op, struct mql_error *err)
{
	for (size_t i = 0; i < sizeof(accs) / sizeof(*accs); i++) {
		if (strcmp(name, accs[i].name) == 0) {
			*op = accs[i].op;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(unsupported) / sizeof(*unsupported);
	     i++) {
		if (strcmp(name, unsupported[i]) == 0)
			return mql_error_set(err, MQL_NotImplemented,
					     "the %s accumulator is not "
					     "supported",
					     name);
	}
	return mql_error_set(err, 15952, "unknown group operator '%s'", name);
}

/* One field of the spec other than _id: {name: {$op: expr}}. */
static int parse_acc(struct agg_acc *a, const char *name, const bson_value_t *v,
		     struct mql_error *err)
{
	bson_iter_t it;
	const bson_value_t *arg;
	const char *op;

	a->name = bson_strdup(name);
	if (v->value_type != BSON_TYPE_DOCUMENT ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data,
				      v->value.v_doc.data_len) ||
	    !bson_iter_next(&it) || bson_iter_key(&it)[0] != '$')
		return mql_error_set(err, 40234,
				     "The field '%s' must be an accumulator "
				     "object",
				     name);
	if (strchr(name, '.'))
		return mql_error_set(
		    err, 40235, "The field name '%s' cannot contain '.'", name);
	if (name[0] == '$')
		return mql_error_set(err, 40236,
				     "The field name '%s' cannot be an "
				     "operator name",
				     name);
	op = bson_iter_key(&it);
	arg = bson_iter_value(&it);
	if (bson_iter_next(&it))
		return mql_error_set(err, 40238,
				     "The field '%s' must specify one "
				     "accumulator",
				     name);
	if (arg->value_type == BSON_TYPE_ARRAY)
		return mql_error_set(
		    err, 40237, "The %s accumulator is a unary operator", op);
	if (find_op(op, &a->op, err) < 0)
		return -1;
	if (a->op == ACC_COUNT && (arg->value_type != BSON_TYPE_DOCUMENT ||
				   arg->value.v_doc.data_len != 5))
		return mql_error_set(err, MQL_TypeMismatch,
				     "$count takes no arguments, i.e. "
				     "$count:{}");
	return mql_expr_compile(arg, &a->arg, err);
}

int agg_group_compile(struct agg_group *g, const bson_value_t *spec,
		      struct mql_error *err)
{
	bson_iter_t it;
	size_t cap = 0;

	bson_iter_init_from_data(&it, spec->value.v_doc.data,
				 spec->value.v_doc.data_len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "_id") == 0) {
			mql_expr_free(g->id);
			g->id = NULL;
			mql_sort_free(g->order);
			bson_free(g->order_bson);
			g->order = NULL;
			g->order_bson = NULL;
			if (mql_expr_compile(bson_iter_value(&it), &g->id,
					     err) < 0)
				return -1;
			group_order(g, bson_iter_value(&it));
			continue;
		}
		mql_grow((void **)&g->acc, &cap, g->nacc, 1, sizeof(*g->acc));
		memset(&g->acc[g->nacc], 0, sizeof(*g->acc));
		if (parse_acc(&g->acc[g->nacc++], k, bson_iter_value(&it),
			      err) < 0)
			return -1;
	}
	if (!g->id)
		return mql_error_set(err, 15955,
				     "a group specification must include an "
				     "_id");
	group_reads(g);
	return 0;
}

/* ---- a set of distinct values (the groups, $addToSet) -------------- */

struct vent {
	uint64_t h;
	uint32_t off, klen; /* the element in arr */
};

struct vset {
	bson_t arr; /* the values, in the order first seen */
	uint32_t n;
	struct vent *ent;
	size_t entcap;
	uint32_t *slot; /* open addressing: element + 1, 0 empty */
	size_t nslot;
};

static void vset_init(struct vset *s)
{
	memset(s, 0, sizeof(*s));
	bson_init(&s->arr);
}

static void vset_destroy(struct vset *s)
{
	bson_destroy(&s->arr);
	bson_free(s->ent);
	bson_free(s->slot);
}

static size_t vset_mem(const struct vset *s)
{
	return s->arr.len + s->entcap * sizeof(*s->ent) +
	       s->nslot * sizeof(*s->slot);
}

static void vset_get(const struct vset *s, uint32_t i, bson_value_t *v)
{
	bson_iter_t it;

	bson_iter_init_from_data_at_offset(&it, bson_get_data(&s->arr),
					   s->arr.len, s->ent[i].off,
					   s->ent[i].klen);
	*v = *bson_iter_value(&it);
}

static void vset_rehash(struct vset *s)
{
	size_t n = s->nslot ? s->nslot * 2 : 16;

	bson_free(s->slot);
	s->slot = bson_malloc0(n * sizeof(*s->slot));
	s->nslot = n;
	for (uint32_t e = 0; e < s->n; e++) {
		size_t i = s->ent[e].h & (n - 1);

		while (s->slot[i])
			i = (i + 1) & (n - 1);
		s->slot[i] = e + 1;
	}
}

/* The index of v in s, added when absent (*added).  -1 when the array
 * would pass libbson's size limit. */
static long vset_add(struct vset *s, const bson_value_t *v, bool *added)
{
	uint64_t h = mql_value_hash(v);
	char buf[16];
	const char *key;
	size_t i;
	uint32_t off, klen;

	*added = false;
	if ((size_t)s->n * 2 >= s->nslot)
		vset_rehash(s);
	for (i = h & (s->nslot - 1); s->slot[i]; i = (i + 1) & (s->nslot - 1)) {
		uint32_t e = s->slot[i] - 1;
		bson_value_t cur;

		if (s->ent[e].h != h)
			continue;
		vset_get(s, e, &cur);
		if (mql_value_eq(&cur, v))
			return e;
	}
	off = s->arr.len - 1;
	klen = (uint32_t)bson_uint32_to_string(s->n, &key, buf, sizeof(buf));
	if (!bson_append_value(&s->arr, key, (int)klen, v))
		return -1;
	mql_grow((void **)&s->ent, &s->entcap, s->n, 1, sizeof(*s->ent));
	s->ent[s->n] = (struct vent){h, off, klen};
	s->slot[i] = s->n + 1;
	*added = true;
	return s->n++;
}

/* ---- accumulating --------------------------------------------------- */

enum { T_INT32 = 1, T_INT64 = 2, T_DOUBLE = 4, T_DEC = 8 };

struct acc {
	/* $sum $avg $count */
	int64_t isum;
	double dsum, dcomp; /* Neumaier's compensated sum */
	struct mql_dec dec;
	int64_t n;
	unsigned types;
	bool ovf;
	/* $min $max $first $last */
	bson_t *val;
	/* $push */
	bson_t *arr;
	uint32_t nel;
	/* $addToSet */
	struct vset *set;
};

struct group_run {
	struct vset keys;
	struct acc *acc; /* keys.n * nacc */
	size_t acccap, nacc;
	uint32_t pos;
	bson_t scratch;
};

static void acc_destroy(struct acc *a)
{
	if (a->val)
		bson_destroy(a->val);
	if (a->arr)
		bson_destroy(a->arr);
	if (a->set) {
		vset_destroy(a->set);
		bson_free(a->set);
	}
}

void agg_group_free(struct group_run *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < (size_t)g->keys.n * g->nacc; i++)
		acc_destroy(&g->acc[i]);
	bson_free(g->acc);
	vset_destroy(&g->keys);
	bson_destroy(&g->scratch);
	bson_free(g);
}

static size_t acc_mem(const struct acc *a)
{
	return (a->val ? a->val->len : 0) + (a->arr ? a->arr->len : 0) +
	       (a->set ? vset_mem(a->set) : 0);
}

static void neumaier(struct acc *a, double x)
{
	double t = a->dsum + x;

	if (fabs(a->dsum) >= fabs(x))
		a->dcomp += (a->dsum - t) + x;
	else
		a->dcomp += (x - t) + a->dsum;
	a->dsum = t;
}

static void add_number(struct acc *a, const bson_value_t *v)
{
	struct mql_dec d, s;
	int64_t x, r;

	a->n++;
	switch (v->value_type) {
	case BSON_TYPE_DECIMAL128:
		a->types |= T_DEC;
		mql_num_to_dec(v, &d);
		s = a->dec;
		mql_dec_add(&s, &d, &a->dec);
		return;
	case BSON_TYPE_DOUBLE:
		a->types |= T_DOUBLE;
		neumaier(a, v->value.v_double);
		return;
	default:
		a->types |=
		    v->value_type == BSON_TYPE_INT32 ? T_INT32 : T_INT64;
		x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32
						     : v->value.v_int64;
		if (__builtin_add_overflow(a->isum, x, &r)) {
			/* MongoDB's $sum goes on in doubles */
			a->ovf = true;
			neumaier(a, (double)a->isum);
			r = x;
		}
		a->isum = r;
	}
}

static void set_val(struct acc *a, const bson_value_t *v)
{
	static const bson_value_t null = {.value_type = BSON_TYPE_NULL};

	if (!a->val)
		a->val = bson_new();
	else
		bson_reinit(a->val);
	bson_append_value(a->val, "v", 1, v ? v : &null);
}

static bool get_val(const struct acc *a, bson_value_t *v)
{
	bson_iter_t it;

	if (!a->val || !bson_iter_init(&it, a->val) || !bson_iter_next(&it))
		return false;
	*v = *bson_iter_value(&it);
	return true;
}

static bool nullish(const bson_value_t *v)
{
	return !v || v->value_type == BSON_TYPE_NULL ||
	       v->value_type == BSON_TYPE_UNDEFINED;
}

/* Fold v (NULL: missing) into a; first says this is the group's first
 * document.  -1 when a value would pass libbson's size limit. */
static int acc_add(struct acc *a, enum agg_acc_op op, const bson_value_t *v,
		   bool first)
{
	bson_value_t cur;
	char buf[16];
	const char *key;
	bool added;
	int c;

	switch (op) {
	case ACC_SUM:
	case ACC_AVG:
		if (v && mql_is_number(v))
			add_number(a, v);
		return 0;
	case ACC_COUNT: a->n++; return 0;
	case ACC_MIN:
	case ACC_MAX:
		if (nullish(v))
			return 0;
		if (get_val(a, &cur)) {
			c = mql_value_cmp(v, &cur);
			if (op == ACC_MIN ? c >= 0 : c <= 0)
				return 0;
		}
		set_val(a, v);
		return 0;
	case ACC_FIRST:
		if (first)
			set_val(a, v);
		return 0;
	case ACC_LAST: set_val(a, v); return 0;
	case ACC_PUSH:
		if (!v)
			return 0;
		if (!a->arr)
			a->arr = bson_new();
		bson_uint32_to_string(a->nel++, &key, buf, sizeof(buf));
		return bson_append_value(a->arr, key, -1, v) ? 0 : -1;
	case ACC_ADDTOSET:
		if (!v)
			return 0;
		if (!a->set) {
			a->set = BSON_ALIGNED_ALLOC0(struct vset);
			vset_init(a->set);
		}
		return vset_add(a->set, v, &added) < 0 ? -1 : 0;
	}
	return 0;
}

/* Evaluate e on doc into g->scratch: true and *v, or false (missing). */
static int eval(struct group_run *g, const struct mql_expr *e,
		const uint8_t *doc, uint32_t len, bson_value_t *v)
{
	bson_iter_t it;
	int rc;

	bson_reinit(&g->scratch);
	rc = mql_expr_eval(e, doc, len, &g->scratch, "v", 1);
	if (rc <= 0)
		return rc;
	bson_iter_init(&it, &g->scratch);
	bson_iter_next(&it);
	*v = *bson_iter_value(&it);
	return 1;
}

int agg_group_mem_fail(struct mql_error *err)
{
	return mql_error_set(err, MQL_QueryExceededMemoryLimitNoDiskUseAllowed,
			     "Exceeded memory limit for $group, but didn't "
			     "allow external sort. Pass allowDiskUse:true to "
			     "opt in.");
}

int agg_group_add(struct group_run *g, const struct agg_group *spec,
		  const uint8_t *doc, uint32_t len, size_t *mem,
		  struct mql_error *err)
{
	static const bson_value_t null = {.value_type = BSON_TYPE_NULL};
	bson_value_t v;
	size_t before = vset_mem(&g->keys) + g->acccap * sizeof(*g->acc);
	bool added;
	long k;
	int rc;

	rc = eval(g, spec->id, doc, len, &v);
	if (rc < 0)
		return agg_too_large(err);
	k = vset_add(&g->keys, rc ? &v : &null, &added);
	if (k < 0)
		return agg_too_large(err);
	if (added && g->nacc) {
		mql_grow((void **)&g->acc, &g->acccap, (size_t)k * g->nacc,
			 g->nacc, sizeof(*g->acc));
		memset(&g->acc[(size_t)k * g->nacc], 0,
		       g->nacc * sizeof(*g->acc));
	}
	*mem += vset_mem(&g->keys) + g->acccap * sizeof(*g->acc) - before;
	for (size_t j = 0; j < g->nacc; j++) {
		struct acc *a = &g->acc[(size_t)k * g->nacc + j];
		size_t was = acc_mem(a);

		rc = eval(g, spec->acc[j].arg, doc, len, &v);
		if (rc < 0 ||
		    acc_add(a, spec->acc[j].op, rc ? &v : NULL, added) < 0)
			return agg_too_large(err);
		*mem += acc_mem(a) - was;
	}
	return 0;
}

struct group_run *agg_group_new(const struct agg_group *spec)
{
	/* a bson_t inside: libbson aligns it to 128 bytes */
	struct group_run *g = BSON_ALIGNED_ALLOC0(struct group_run);

	vset_init(&g->keys);
	bson_init(&g->scratch);
	g->nacc = spec->nacc;
	return g;
}

bool agg_group_first_key(const struct group_run *g, bson_value_t *v)
{
	if (g->keys.n == 0)
		return false;
	vset_get(&g->keys, 0, v);
	return true;
}

int agg_group_run(struct mql_agg_cursor *c, size_t i,
		  const struct agg_group *spec, struct group_run **out,
		  size_t limit, size_t *mem, struct mql_error *err)
{
	struct group_run *g = *out ? *out : agg_group_new(spec);
	const uint8_t *doc;
	uint32_t len;
	int rc;

	*out = g; /* a pause keeps it, and the next call goes on */
	while ((rc = agg_pull(c, i, &doc, &len, err)) == 1) {
		if (agg_group_add(g, spec, doc, len, mem, err) < 0)
			return -1;
		if (*mem > limit)
			return agg_group_mem_fail(err);
	}
	return rc;
}

/* ---- results -------------------------------------------------------- */

static void sum_result(const struct acc *a, bool avg, bson_value_t *out)
{
	struct mql_dec d, t, s;
	double total = a->dsum + a->dcomp;

	memset(out, 0, sizeof(*out));
	if (a->types & T_DEC) {
		s = a->dec;
		mql_dec_from_int64(a->isum, &d);
		mql_dec_add(&s, &d, &t);
		if (a->types & T_DOUBLE || a->ovf) {
			mql_dec_from_double(total, &d);
			mql_dec_add(&t, &d, &s);
			t = s;
		}
		if (avg)
			mql_dec_div_u64(&t, (uint64_t)a->n, &s), t = s;
		out->value_type = BSON_TYPE_DECIMAL128;
		mql_dec_pack(&t, &out->value.v_decimal128);
	} else if (avg || a->types & T_DOUBLE || a->ovf) {
		out->value_type = BSON_TYPE_DOUBLE;
		out->value.v_double = total + (double)a->isum;
		if (avg)
			out->value.v_double /= (double)a->n;
	} else if (!(a->types & T_INT64) && a->isum >= INT32_MIN &&
		   a->isum <= INT32_MAX) {
		out->value_type = BSON_TYPE_INT32;
		out->value.v_int32 = (int32_t)a->isum;
	} else {
		out->value_type = BSON_TYPE_INT64;
		out->value.v_int64 = a->isum;
	}
}

static bool put_acc(bson_t *out, const char *name, enum agg_acc_op op,
		    const struct acc *a)
{
	bson_value_t v;

	switch (op) {
	case ACC_SUM:
	case ACC_AVG:
		if (op == ACC_AVG && a->n == 0)
			return bson_append_null(out, name, -1);
		sum_result(a, op == ACC_AVG, &v);
		return bson_append_value(out, name, -1, &v);
	case ACC_COUNT:
		if (a->n <= INT32_MAX)
			return bson_append_int32(out, name, -1, (int32_t)a->n);
		return bson_append_int64(out, name, -1, a->n);
	case ACC_MIN:
	case ACC_MAX:
	case ACC_FIRST:
	case ACC_LAST:
		if (!get_val(a, &v))
			return bson_append_null(out, name, -1);
		return bson_append_value(out, name, -1, &v);
	case ACC_PUSH:
		if (!a->arr) {
			bson_t e = BSON_INITIALIZER;

			return bson_append_array(out, name, -1, &e);
		}
		return bson_append_array(out, name, -1, a->arr);
	case ACC_ADDTOSET:
		if (!a->set) {
			bson_t e = BSON_INITIALIZER;

			return bson_append_array(out, name, -1, &e);
		}
		return bson_append_array(out, name, -1, &a->set->arr);
	}
	return false;
}

int agg_group_emit(struct group_run *g, const struct agg_group *spec,
		   bson_t *out, struct mql_error *err)
{
	bson_value_t id;
	bool ok;

	if (g->pos == g->keys.n)
		return 0;
	vset_get(&g->keys, g->pos, &id);
	ok = bson_append_value(out, "_id", 3, &id);
	for (size_t j = 0; ok && j < spec->nacc; j++)
		ok = put_acc(out, spec->acc[j].name, spec->acc[j].op,
			     &g->acc[(size_t)g->pos * g->nacc + j]);
	g->pos++;
	if (!ok || out->len > MQL_MAX_DOC_SIZE)
		return agg_too_large(err);
	return 1;
}
