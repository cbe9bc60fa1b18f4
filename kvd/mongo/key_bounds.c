/* key_bounds.c - the byte intervals an index scan reads for a filter
 * (mql_key.h), as MongoDB's index bounds: per index field, the intervals
 * of its values the filter's predicates on that field allow (in the
 * ascending encoding, as half-open byte ranges [start, end)); an equality
 * prefix of the fields multiplies out into exact key prefixes, and the
 * first field that is a range (or unconstrained) ends the bounds.
 *
 * A value v's keys all start with enc(v) and stay below succ(enc(v))
 * (enc(v) with its last byte raised, 0xFF bytes dropped first), whatever
 * follows; a type's values all start with its type byte.  Inverting a
 * descending field turns [s, e) into [succ(~e), succ(~s)). */
#include <string.h>

#include "key_int.h"
#include "mql_int.h"
#include "mql_path.h"
#include "mql_value.h"

#define MAX_INTERVALS 4096
#define ENC_MAX (4 * MQL_KEY_MAX)

struct bstr {
	uint8_t *b;
	size_t n;
};

struct ival {
	struct bstr s, e;
	bool point; /* exactly one value's keys */
};

struct ilist {
	struct ival *v;
	size_t n, cap;
	bool full; /* no constraint */
};

static struct bstr bdup(const uint8_t *p, size_t n)
{
	struct bstr b = {bson_malloc(n ? n : 1), n};

	memcpy(b.b, p, n);
	return b;
}

static int bs_cmp(const struct bstr *a, const struct bstr *b)
{
	int m = memcmp(a->b, b->b, a->n < b->n ? a->n : b->n);

	return m ? m : (a->n > b->n) - (a->n < b->n);
}

/* The least string above every string that starts with b. */
static struct bstr succ(const uint8_t *p, size_t n)
{
	struct bstr s = bdup(p, n);

	while (s.n > 0 && s.b[s.n - 1] == 0xFF)
		s.n--;
	if (s.n > 0)
		s.b[s.n - 1]++;
	return s;
}

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		bson_free(l->v[i].s.b);
		bson_free(l->v[i].e.b);
	}
	bson_free(l->v);
	memset(l, 0, sizeof(*l));
}

static void add(struct ilist *l, struct bstr s, struct bstr e, bool point)
{
	if (bs_cmp(&s, &e) >= 0) {
		bson_free(s.b);
		bson_free(e.b);
		return;
	}
	mql_grow((void **)&l->v, &l->cap, l->n, 1, sizeof(*l->v));
	l->v[l->n++] = (struct ival){s, e, point};
}

static void add_bytes(struct ilist *l, uint8_t s, uint8_t e)
{
	add(l, bdup(&s, 1), bdup(&e, 1), false);
}

/* v's keys: false when v is too long to be in any key (no narrowing). */
static bool add_point(struct ilist *l, const bson_value_t *v)
{
	uint8_t buf[ENC_MAX];
	size_t n = 0;

	if (mql_key_encode(v, false, buf, sizeof(buf), &n, NULL) < 0)
		return false;
	add(l, bdup(buf, n), succ(buf, n), true);
	return true;
}

static int ival_cmp(const void *a, const void *b, void *ctx)
{
	const struct ival *x = a, *y = b;

	(void)ctx;
	return bs_cmp(&x->s, &y->s);
}

/* Sort and merge overlapping intervals. */
static void normalize(struct ilist *l)
{
	size_t o = 0;

	mql_msort(l->v, l->n, sizeof(*l->v), ival_cmp, NULL);
	for (size_t i = 0; i < l->n; i++) {
		struct ival *cur = &l->v[i];

		if (o > 0 && bs_cmp(&cur->s, &l->v[o - 1].e) <= 0) {
			struct ival *last = &l->v[o - 1];

			if (bs_cmp(&cur->e, &last->e) > 0) {
				bson_free(last->e.b);
				last->e = cur->e;
				cur->e.b = NULL;
			}
			/* equal points stay one point */
			last->point = last->point && cur->point &&
				      bs_cmp(&cur->s, &last->s) == 0;
			bson_free(cur->s.b);
			bson_free(cur->e.b);
			continue;
		}
		l->v[o++] = *cur;
	}
	l->n = o;
}

static void intersect(struct ilist *a, struct ilist *b)
{
	struct ilist r = {0};

	if (b->full)
		return;
	if (a->full) {
		*a = *b;
		memset(b, 0, sizeof(*b));
		return;
	}
	for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
		struct ival *x = &a->v[i], *y = &b->v[j];
		struct bstr *s = bs_cmp(&x->s, &y->s) > 0 ? &x->s : &y->s;
		struct bstr *e = bs_cmp(&x->e, &y->e) < 0 ? &x->e : &y->e;

		if (bs_cmp(s, e) < 0)
			add(&r, bdup(s->b, s->n), bdup(e->b, e->n),
			    x->point || y->point);
		if (bs_cmp(&x->e, &y->e) < 0)
			i++;
		else
			j++;
	}
	ilist_free(a);
	*a = r;
}

/* The values the matcher's bracketing lets a range reach: numbers from
 * -infinity to +infinity (NaN apart), else the operand's own type. */
static void bracket(const bson_value_t *v, uint8_t *lo, uint8_t *hi)
{
	if (mql_is_number(v)) {
		*lo = K_NEGINF;
		*hi = K_POSINF + 1;
	} else {
		*lo = key_type_byte(v);
		*hi = (uint8_t)(*lo + 1);
	}
}

static void range(struct ilist *l, enum mql_pred_op op, const bson_value_t *v)
{
	static const bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};
	bool gt = op == MQL_PRED_GT || op == MQL_PRED_GTE;
	bool incl = op == MQL_PRED_GTE || op == MQL_PRED_LTE;
	uint8_t buf[ENC_MAX], lo, hi;
	size_t n = 0;

	switch (v->value_type) {
	case BSON_TYPE_MINKEY: /* everything is above MinKey */
		if (op == MQL_PRED_LTE)
			add_point(l, v);
		else if (gt)
			add_bytes(l, incl ? K_MINKEY : K_MINKEY + 1,
				  K_MAXKEY + 1);
		return;
	case BSON_TYPE_MAXKEY:
		if (op == MQL_PRED_GTE)
			add_point(l, v);
		else if (!gt)
			add_bytes(l, K_MINKEY, incl ? K_MAXKEY + 1 : K_MAXKEY);
		return;
	case BSON_TYPE_NULL:
		if (incl) {
			add_point(l, v);
			add_point(l, &undef);
		}
		return;
	case BSON_TYPE_ARRAY: l->full = true; return;
	default: break;
	}
	if (mql_number_isnan(v)) {
		if (incl)
			add_point(l, v);
		return;
	}
	if (mql_key_encode(v, false, buf, sizeof(buf), &n, NULL) < 0) {
		l->full = true;
		return;
	}
	bracket(v, &lo, &hi);
	if (gt)
		add(l, incl ? bdup(buf, n) : succ(buf, n), bdup(&hi, 1), false);
	else
		add(l, bdup(&lo, 1), incl ? succ(buf, n) : bdup(buf, n), false);
}

/* {path: v} and each element of $in. */
static void equal(struct ilist *l, const bson_value_t *v)
{
	static const bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};
	bson_iter_t it;
	bool ok = true;

	switch (v->value_type) {
	case BSON_TYPE_NULL:
		ok = add_point(l, v) && add_point(l, &undef);
		break;
	case BSON_TYPE_ARRAY: /* the array itself, or its first element */
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		ok = add_point(l, v) &&
		     add_point(l, bson_iter_next(&it) ? bson_iter_value(&it)
						      : &undef);
		break;
	case BSON_TYPE_REGEX: /* in $in: strings, and the regex itself */
		add_bytes(l, K_STRING, K_STRING + 1);
		ok = add_point(l, v);
		break;
	default: ok = add_point(l, v);
	}
	if (!ok)
		l->full = true;
}

static void pred_list(struct ilist *l, const struct mql_pred *p)
{
	bson_iter_t it;

	memset(l, 0, sizeof(*l));
	switch (p->op) {
	case MQL_PRED_EQ: equal(l, p->value); break;
	case MQL_PRED_IN:
		bson_iter_init_from_data(&it, p->value->value.v_doc.data,
					 p->value->value.v_doc.data_len);
		while (bson_iter_next(&it))
			equal(l, bson_iter_value(&it));
		break;
	default: range(l, p->op, p->value);
	}
	if (!l->full)
		normalize(l);
}

/* ---- putting the fields together --------------------------------------- */

struct preds {
	struct mql_pred *p;
	size_t n, cap;
};

static void collect(void *ctx, const struct mql_pred *p)
{
	struct preds *ps = ctx;

	mql_grow((void **)&ps->p, &ps->cap, ps->n, 1, sizeof(*ps->p));
	ps->p[ps->n++] = *p;
}

static struct bstr inv(const struct bstr *b)
{
	struct bstr r = bdup(b->b, b->n);

	for (size_t i = 0; i < r.n; i++)
		r.b[i] = (uint8_t)~r.b[i];
	return r;
}

static struct bstr cat(const struct bstr *a, const struct bstr *b)
{
	struct bstr r = {bson_malloc(a->n + b->n + 1), a->n + b->n};

	memcpy(r.b, a->b, a->n);
	memcpy(r.b + a->n, b->b, b->n);
	return r;
}

/* [s, e) of a field, as the keys see it (inverted when descending). */
static void field_ival(const struct ival *x, bool desc, struct bstr *s,
		       struct bstr *e)
{
	struct bstr is, ie;

	if (!desc) {
		*s = bdup(x->s.b, x->s.n);
		*e = bdup(x->e.b, x->e.n);
		return;
	}
	is = inv(&x->s);
	ie = inv(&x->e);
	*s = succ(ie.b, ie.n);
	*e = succ(is.b, is.n);
	bson_free(is.b);
	bson_free(ie.b);
}

/* The key prefixes of the fields so far times field l's values. */
static void widen(struct ilist *pre, const struct ilist *l, bool desc,
		  bool last)
{
	struct ilist r = {0};

	for (size_t i = 0; i < pre->n; i++) {
		for (size_t j = 0; j < l->n; j++) {
			struct bstr s, e;

			field_ival(&l->v[j], desc, &s, &e);
			if (last) {
				struct bstr ps = cat(&pre->v[i].s, &s),
					    pe = cat(&pre->v[i].s, &e);

				add(&r, ps, pe, false);
				bson_free(e.b);
			} else { /* a point: its own encoding, inverted */
				struct bstr p =
				    desc ? inv(&l->v[j].s)
					 : bdup(l->v[j].s.b, l->v[j].s.n);
				struct bstr ps = cat(&pre->v[i].s, &p);

				add(&r, ps, succ(ps.b, ps.n), true);
				bson_free(p.b);
				bson_free(e.b);
			}
			bson_free(s.b);
		}
	}
	ilist_free(pre);
	*pre = r;
}

static void fields(const struct mql_index *ix, const struct preds *ps,
		   bool multikey, struct ilist *parts)
{
	for (size_t j = 0; j < mql_index_nparts(ix); j++) {
		bool desc, used = false;
		const struct mql_path *path = key_index_path(ix, j, &desc);

		parts[j].full = true;
		for (size_t i = 0; i < ps->n; i++) {
			struct ilist l;

			if (strcmp(ps->p[i].path, path->dotted) != 0 ||
			    (multikey && used))
				continue;
			pred_list(&l, &ps->p[i]);
			intersect(&parts[j], &l);
			ilist_free(&l);
			used = true;
		}
	}
}

static bool all_points(const struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (!l->v[i].point)
			return false;
	}
	return true;
}

/* The intervals of the whole key from the fields' lists. */
static size_t compose(const struct mql_index *ix, struct ilist *parts,
		      struct ilist *pre)
{
	size_t j, np = mql_index_nparts(ix);
	uint8_t all[2] = {0x00, 0xFF};

	/* one empty prefix to start from */
	pre->v = bson_malloc0(sizeof(*pre->v));
	pre->cap = 1;
	pre->n = 1;
	pre->v[0].s = bdup(all, 0);
	pre->v[0].e = bdup(all, 0);
	for (j = 0; j < np; j++) {
		bool desc;

		key_index_path(ix, j, &desc);
		if (parts[j].full || pre->n * parts[j].n > MAX_INTERVALS)
			break;
		if (!all_points(&parts[j])) {
			widen(pre, &parts[j], desc, true);
			return j + 1;
		}
		widen(pre, &parts[j], desc, false);
	}
	if (j == 0) { /* the whole index */
		ilist_free(pre);
		add(pre, bdup(all, 1), bdup(all + 1, 1), false);
	}
	return j;
}

int mql_index_bounds(const struct mql_index *ix, const struct mql_match *m,
		     bool multikey, struct mql_bounds *out,
		     struct mql_error *err)
{
	struct ilist parts[MQL_INDEX_MAX_PARTS], pre = {0};
	struct preds ps = {0};
	size_t np = mql_index_nparts(ix);
	bool none = false;

	(void)err;
	memset(out, 0, sizeof(*out));
	memset(parts, 0, sizeof(parts));
	mql_match_preds(m, collect, &ps);
	fields(ix, &ps, multikey, parts);
	for (size_t j = 0; j < np; j++)
		none |= !parts[j].full && parts[j].n == 0;
	if (!none) {
		out->nparts = compose(ix, parts, &pre);
		normalize(&pre);
		out->iv = bson_malloc0((pre.n ? pre.n : 1) * sizeof(*out->iv));
		for (size_t i = 0; i < pre.n; i++) {
			out->iv[i] =
			    (struct mql_interval){pre.v[i].s.b, pre.v[i].e.b,
						  pre.v[i].s.n, pre.v[i].e.n};
			pre.v[i].s.b = pre.v[i].e.b = NULL;
		}
		out->n = pre.n;
	}
	ilist_free(&pre);
	for (size_t j = 0; j < np; j++)
		ilist_free(&parts[j]);
	bson_free(ps.p);
	return 0;
}

void mql_bounds_free(struct mql_bounds *b)
{
	for (size_t i = 0; i < b->n; i++) {
		bson_free(b->iv[i].start);
		bson_free(b->iv[i].end);
	}
	bson_free(b->iv);
	memset(b, 0, sizeof(*b));
}
