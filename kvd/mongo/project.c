/* project.c - projections (mql_project.h): a tree of the spec's paths,
 * then one pass over the document in inclusion or exclusion mode. */
#include <math.h>
#include <string.h>

#include "mql_expr.h"
#include "mql_int.h"
#include "mql_match.h"
#include "mql_path.h"
#include "mql_project.h"
#include "mql_value.h"

enum pkind { PJ_INCLUDE, PJ_EXCLUDE, PJ_COMPUTED, PJ_SLICE, PJ_ELEM, PJ_TREE };

struct pnode {
	char *name;
	size_t len;
	enum pkind kind;
	struct pnode **kids; /* in spec order */
	size_t n, cap;
	struct mql_expr *expr;
	int64_t skip, limit;
	bool has_skip;
	struct mql_match *em; /* {x: {$elemMatch: ...}} */
	bool computed;	      /* computed fields at or below */
};

struct mql_project {
	uint8_t *spec;
	uint32_t len;
	enum mql_project_kind kind;
	int mode;    /* 0 none yet, 1 inclusion, 2 exclusion */
	int id_mode; /* -1 default, 0 excluded, 1 included */
	struct pnode root;
};

static void pnode_free_kids(struct pnode *n)
{
	for (size_t i = 0; i < n->n; i++) {
		struct pnode *k = n->kids[i];

		pnode_free_kids(k);
		mql_expr_free(k->expr);
		mql_match_free(k->em);
		bson_free(k->name);
		bson_free(k);
	}
	bson_free(n->kids);
}

void mql_project_free(struct mql_project *p)
{
	if (!p)
		return;
	pnode_free_kids(&p->root);
	bson_free(p->spec);
	bson_free(p);
}

static struct pnode *find_kid(const struct pnode *n, const char *s, size_t len)
{
	for (size_t i = 0; i < n->n; i++) {
		if (n->kids[i]->len == len && !memcmp(n->kids[i]->name, s, len))
			return n->kids[i];
	}
	return NULL;
}

/* The leaf for path, made through TREE nodes; NULL on a collision. */
static struct pnode *add_path(struct mql_project *p, const char *path,
			      struct mql_error *err)
{
	struct mql_path mp;
	struct pnode *node = &p->root, *kid = NULL;

	if (mql_path_parse(path, strlen(path), &mp, err) < 0) {
		mql_path_free(&mp);
		return NULL;
	}
	for (size_t i = 0; i < mp.n; i++) {
		kid = find_kid(node, mp.parts[i].s, mp.parts[i].len);
		if (kid && (kid->kind != PJ_TREE || i + 1 == mp.n)) {
			mql_error_set(err, 31250, "Path collision at %s", path);
			kid = NULL;
			break;
		}
		if (!kid) {
			kid = bson_malloc0(sizeof(*kid));
			kid->len = mp.parts[i].len;
			kid->name = bson_strndup(mp.parts[i].s, kid->len);
			kid->kind = PJ_TREE;
			mql_grow((void **)&node->kids, &node->cap, node->n, 1,
				 sizeof(*node->kids));
			node->kids[node->n++] = kid;
		}
		node = kid;
	}
	mql_path_free(&mp);
	return kid;
}

static int set_mode(struct mql_project *p, int mode, const char *path,
		    struct mql_error *err)
{
	if (p->mode == 0 || p->mode == mode) {
		p->mode = mode;
		return 0;
	}
	if (mode == 1)
		return mql_error_set(err, 31253,
				     "Cannot do inclusion on field %s in "
				     "exclusion projection",
				     path);
	return mql_error_set(err, 31254,
			     "Cannot do exclusion on field %s in inclusion "
			     "projection",
			     path);
}

static int parse_special(struct mql_project *p, struct pnode *leaf,
			 const char *path, const bson_value_t *v,
			 struct mql_error *err)
{
	bson_iter_t it;
	const char *op;
	const bson_value_t *arg;

	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	bson_iter_next(&it);
	op = bson_iter_key(&it);
	arg = bson_iter_value(&it);
	if (strcmp(op, "$meta") == 0)
		return mql_error_set(err, MQL_NotImplemented,
				     "$meta projections are not supported");
	if (strcmp(op, "$slice") == 0 && p->kind == MQL_PROJECT_FIND) {
		leaf->kind = PJ_SLICE;
		if (mql_is_number(arg)) {
			double d = mql_number_double(arg);

			leaf->limit = d >= 9e18	   ? INT64_MAX
				      : d <= -9e18 ? INT64_MIN
						   : (int64_t)d;
			return 0;
		}
		if (arg->value_type == BSON_TYPE_ARRAY) {
			bson_value_t x[2];
			int k = 0;

			bson_iter_init_from_data(&it, arg->value.v_doc.data,
						 arg->value.v_doc.data_len);
			while (bson_iter_next(&it) && k < 3) {
				if (k < 2)
					x[k] = *bson_iter_value(&it);
				k++;
			}
			if (k != 2 || !mql_is_number(&x[0]) ||
			    !mql_is_number(&x[1]))
				return mql_error_set(
				    err, MQL_BadValue,
				    "$slice array argument must be of the form "
				    "[skip, limit]");
			if (mql_number_double(&x[1]) <= 0)
				return mql_error_set(
				    err, MQL_BadValue,
				    "$slice limit must be positive");
			leaf->has_skip = true;
			leaf->skip = (int64_t)fmax(
			    fmin(mql_number_double(&x[0]), 9e18), -9e18);
			leaf->limit =
			    (int64_t)fmin(mql_number_double(&x[1]), 9e18);
			return 0;
		}
		return mql_error_set(err, MQL_BadValue,
				     "$slice only supports numbers and [skip, "
				     "limit] arrays");
	}
	if (strcmp(op, "$elemMatch") == 0 && p->kind == MQL_PROJECT_FIND) {
		bson_t f = BSON_INITIALIZER, sub;
		int rc;

		if (strchr(path, '.'))
			return mql_error_set(err, MQL_BadValue,
					     "Cannot use $elemMatch projection "
					     "on a nested field.");
		if (arg->value_type != BSON_TYPE_DOCUMENT)
			return mql_error_set(err, MQL_BadValue,
					     "elemMatch: Invalid argument, "
					     "object required.");
		leaf->kind = PJ_ELEM;
		bson_append_document_begin(&f, "x", 1, &sub);
		bson_append_value(&sub, "$elemMatch", 10, arg);
		bson_append_document_end(&f, &sub);
		rc =
		    mql_match_compile(bson_get_data(&f), f.len, &leaf->em, err);
		bson_destroy(&f);
		return rc;
	}
	/* an expression: a computed field */
	leaf->kind = PJ_COMPUTED;
	if (set_mode(p, 1, path, err) < 0)
		return -1;
	return mql_expr_compile(v, &leaf->expr, err);
}

static int parse_spec(struct mql_project *p, const uint8_t *data, uint32_t len,
		      const char *prefix, struct mql_error *err)
{
	bson_iter_t it;

	bson_iter_init_from_data(&it, data, len);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const bson_value_t *v = bson_iter_value(&it);
		char *path = bson_strdup_printf("%s%s", prefix, k);
		bool is_id = strcmp(path, "_id") == 0;
		struct pnode *leaf;
		int rc = 0;

		if (strstr(path, ".$") || (k[0] == '$' && !prefix[0])) {
			rc = k[0] == '$'
				 ? mql_error_set(err, MQL_BadValue,
						 "FieldPath field names "
						 "may not start with "
						 "'$'")
				 : mql_error_set(err, MQL_NotImplemented,
						 "positional projection "
						 "is not supported: %s",
						 path);
			bson_free(path);
			return rc;
		}
		if (v->value_type == BSON_TYPE_DOCUMENT &&
		    p->kind != MQL_PROJECT_UNSET) {
			bson_iter_t f;

			bson_iter_init_from_data(&f, v->value.v_doc.data,
						 v->value.v_doc.data_len);
			if (!bson_iter_next(&f)) {
				rc = mql_error_set(err, 51270,
						   "An empty sub-projection is "
						   "not a valid value. Found "
						   "empty object at path");
			} else if (bson_iter_key(&f)[0] != '$') {
				char *sub = bson_strdup_printf("%s.", path);

				rc = parse_spec(p, v->value.v_doc.data,
						v->value.v_doc.data_len, sub,
						err);
				bson_free(sub);
				bson_free(path);
				if (rc < 0)
					return -1;
				continue;
			}
			if (rc < 0) {
				bson_free(path);
				return -1;
			}
		}
		leaf = add_path(p, path, err);
		if (!leaf) {
			bson_free(path);
			return -1;
		}
		if (p->kind == MQL_PROJECT_ADD) {
			leaf->kind = PJ_COMPUTED;
			rc = mql_expr_compile(v, &leaf->expr, err);
		} else if (p->kind == MQL_PROJECT_UNSET) {
			leaf->kind = PJ_EXCLUDE;
			rc = set_mode(p, 2, path, err);
		} else if (v->value_type == BSON_TYPE_DOCUMENT) {
			rc = parse_special(p, leaf, path, v, err);
		} else if (v->value_type == BSON_TYPE_BOOL ||
			   mql_is_number(v)) {
			bool on = v->value_type == BSON_TYPE_BOOL
				      ? v->value.v_bool
				      : mql_number_double(v) != 0;

			leaf->kind = on ? PJ_INCLUDE : PJ_EXCLUDE;
			if (is_id)
				p->id_mode = on;
			else
				rc = set_mode(p, on ? 1 : 2, path, err);
		} else {
			leaf->kind = PJ_COMPUTED;
			rc = set_mode(p, 1, path, err);
			if (rc == 0)
				rc = mql_expr_compile(v, &leaf->expr, err);
		}
		bson_free(path);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static bool mark(struct pnode *n)
{
	n->computed = n->kind == PJ_COMPUTED;
	for (size_t i = 0; i < n->n; i++)
		n->computed |= mark(n->kids[i]);
	return n->computed;
}

int mql_project_compile(const uint8_t *spec, uint32_t len,
			enum mql_project_kind kind, struct mql_project **out,
			struct mql_error *err)
{
	struct mql_project *p;

	*out = NULL;
	if (mql_bson_check(spec, len, MQL_MAX_INPUT_SIZE, MQL_MAX_INPUT_DEPTH,
			   err) < 0)
		return -1;
	p = bson_malloc0(sizeof(*p));
	p->spec = bson_malloc(len);
	memcpy(p->spec, spec, len);
	p->len = len;
	p->kind = kind;
	p->id_mode = -1;
	if (parse_spec(p, p->spec, len, "", err) < 0) {
		mql_project_free(p);
		return -1;
	}
	if (kind == MQL_PROJECT_AGG && p->root.n == 0) {
		mql_project_free(p);
		return mql_error_set(err, 51272,
				     "Invalid $project :: caused by :: "
				     "projection specification must have at "
				     "least one field");
	}
	if (p->mode == 0) /* only _id, $slice, $elemMatch: exclusion */
		p->mode = p->id_mode == 1 && kind != MQL_PROJECT_ADD ? 1 : 2;
	mark(&p->root);
	*out = p;
	return 0;
}

/* ---- applying ------------------------------------------------------- */

struct pctx {
	const struct mql_project *p;
	const uint8_t *doc; /* the root, for expressions */
	uint32_t len;
	struct mql_error *err;
};

static int big(struct pctx *c)
{
	return mql_error_set(c->err, MQL_BSONObjectTooLarge,
			     "BSONObj size is too large: the projection passes "
			     "16777216 bytes");
}

static int put(struct pctx *c, bson_t *out, const char *k, int kl,
	       const bson_value_t *v)
{
	if (out->len > MQL_MAX_DOC_SIZE || !bson_append_value(out, k, kl, v))
		return big(c);
	return 0;
}

static int put_slice(struct pctx *c, const struct pnode *n, bson_t *out,
		     const char *k, const bson_value_t *v)
{
	bson_iter_t it;
	int64_t len = 0, from, to, i = 0;
	bson_t arr;
	uint32_t j = 0;

	if (v->value_type != BSON_TYPE_ARRAY)
		return put(c, out, k, -1, v);
	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	while (bson_iter_next(&it))
		len++;
	if (n->has_skip) {
		from = n->skip < 0 ? (len + n->skip < 0 ? 0 : len + n->skip)
				   : n->skip;
		to = n->limit > len - from ? len : from + n->limit;
	} else if (n->limit >= 0) {
		from = 0;
		to = n->limit < len ? n->limit : len;
	} else {
		from = -n->limit > len ? 0 : len + n->limit;
		to = len;
	}
	if (!bson_append_array_begin(out, k, -1, &arr))
		return big(c);
	bson_iter_init_from_data(&it, v->value.v_doc.data,
				 v->value.v_doc.data_len);
	for (; bson_iter_next(&it); i++) {
		char buf[16];
		const char *key;
		int kl;

		if (i < from || i >= to)
			continue;
		kl = (int)bson_uint32_to_string(j++, &key, buf, sizeof(buf));
		if (put(c, &arr, key, kl, bson_iter_value(&it)) < 0)
			return -1;
	}
	return bson_append_array_end(out, &arr) ? 0 : big(c);
}

static int put_elem(struct pctx *c, const struct pnode *n, bson_t *out,
		    const char *k, const bson_value_t *v)
{
	bson_t tmp = BSON_INITIALIZER, arr;
	long pos = -1;
	bson_iter_t it;
	int rc = 0;

	if (v->value_type != BSON_TYPE_ARRAY)
		return 0;
	bson_append_value(&tmp, "x", 1, v);
	if (mql_match_doc(n->em, bson_get_data(&tmp), tmp.len, &pos) &&
	    pos >= 0) {
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		for (long i = 0; bson_iter_next(&it); i++) {
			if (i != pos)
				continue;
			if (!bson_append_array_begin(out, k, -1, &arr))
				rc = big(c);
			else if (put(c, &arr, "0", 1, bson_iter_value(&it)) <
				     0 ||
				 !bson_append_array_end(out, &arr))
				rc = big(c);
			break;
		}
	}
	bson_destroy(&tmp);
	return rc;
}

static int apply_fields(struct pctx *c, const struct pnode *n,
			const bson_value_t *container, bool top, bson_t *out);

/* A value met under a TREE node: documents and arrays are walked into;
 * other values stay (exclusion) or go (inclusion). */
static int apply_sub(struct pctx *c, const struct pnode *n, const char *k,
		     int kl, const bson_value_t *v, bson_t *out)
{
	bson_t child;
	bool incl = c->p->mode == 1 && c->p->kind != MQL_PROJECT_ADD;
	int rc = 0;

	if (v->value_type == BSON_TYPE_DOCUMENT) {
		if (!bson_append_document_begin(out, k, kl, &child))
			return big(c);
		rc = apply_fields(c, n, v, false, &child);
		return !bson_append_document_end(out, &child) ? big(c) : rc;
	}
	if (v->value_type == BSON_TYPE_ARRAY) {
		bson_iter_t it;
		uint32_t j = 0;

		if (!bson_append_array_begin(out, k, kl, &child))
			return big(c);
		bson_iter_init_from_data(&it, v->value.v_doc.data,
					 v->value.v_doc.data_len);
		while (rc == 0 && bson_iter_next(&it)) {
			const bson_value_t *e = bson_iter_value(&it);
			char buf[16];
			const char *key;
			int el;

			if (incl && e->value_type != BSON_TYPE_DOCUMENT &&
			    e->value_type != BSON_TYPE_ARRAY)
				continue;
			el = (int)bson_uint32_to_string(j++, &key, buf,
							sizeof(buf));
			rc = apply_sub(c, n, key, el, e, &child);
		}
		return !bson_append_array_end(out, &child) ? big(c) : rc;
	}
	if (!incl && !n->computed)
		return put(c, out, k, kl, v);
	if (n->computed) { /* the computed fields replace the value */
		if (!bson_append_document_begin(out, k, kl, &child))
			return big(c);
		rc = apply_fields(c, n, NULL, false, &child);
		return !bson_append_document_end(out, &child) ? big(c) : rc;
	}
	return 0;
}

static int apply_kid(struct pctx *c, const struct pnode *kid, const char *k,
		     int kl, const bson_value_t *v, bson_t *out)
{
	switch (kid->kind) {
	case PJ_INCLUDE: return put(c, out, k, kl, v);
	case PJ_EXCLUDE: return 0;
	case PJ_SLICE: return put_slice(c, kid, out, k, v);
	case PJ_ELEM: return put_elem(c, kid, out, k, v);
	case PJ_COMPUTED:
		return mql_expr_eval(kid->expr, c->doc, c->len, out, k, kl) < 0
			   ? big(c)
			   : 0;
	case PJ_TREE: return apply_sub(c, kid, k, kl, v, out);
	}
	return 0;
}

static int apply_fields(struct pctx *c, const struct pnode *n,
			const bson_value_t *container, bool top, bson_t *out)
{
	const struct mql_project *p = c->p;
	bool incl = p->mode == 1 && p->kind != MQL_PROJECT_ADD;
	bool *seen = bson_malloc0(n->n + 1);
	bson_iter_t it;
	int rc = 0;

	if (container &&
	    bson_iter_init_from_data(&it, container->value.v_doc.data,
				     container->value.v_doc.data_len)) {
		while (rc == 0 && bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);
			int kl = (int)bson_iter_key_len(&it);
			const struct pnode *kid = find_kid(n, k, (size_t)kl);
			const bson_value_t *v = bson_iter_value(&it);

			if (!kid) {
				bool keep = top && strcmp(k, "_id") == 0
						? p->id_mode != 0
						: !incl;

				if (keep)
					rc = put(c, out, k, kl, v);
				continue;
			}
			for (size_t i = 0; i < n->n; i++)
				seen[i] |= n->kids[i] == kid;
			/* inclusion: computed fields come after the rest */
			if (incl && kid->kind == PJ_COMPUTED) {
				for (size_t i = 0; i < n->n; i++)
					seen[i] &= n->kids[i] != kid;
				continue;
			}
			rc = apply_kid(c, kid, k, kl, v, out);
		}
	}
	for (size_t i = 0; rc == 0 && i < n->n; i++) {
		const struct pnode *kid = n->kids[i];
		bson_t child;

		if (seen[i] || !kid->computed)
			continue;
		if (kid->kind == PJ_COMPUTED) {
			rc = apply_kid(c, kid, kid->name, (int)kid->len, NULL,
				       out);
			continue;
		}
		if (!bson_append_document_begin(out, kid->name, (int)kid->len,
						&child))
			rc = big(c);
		else {
			rc = apply_fields(c, kid, NULL, false, &child);
			if (!bson_append_document_end(out, &child) && rc == 0)
				rc = big(c);
		}
	}
	bson_free(seen);
	return rc;
}

int mql_project_apply(const struct mql_project *p, const uint8_t *doc,
		      uint32_t len, bson_t *out, struct mql_error *err)
{
	struct pctx c = {p, doc, len, err};
	bson_value_t whole;
	int rc;

	memset(&whole, 0, sizeof(whole));
	whole.value_type = BSON_TYPE_DOCUMENT;
	whole.value.v_doc.data = (uint8_t *)doc;
	whole.value.v_doc.data_len = len;
	rc = apply_fields(&c, &p->root, &whole, true, out);
	if (rc == 0 && out->len > MQL_MAX_DOC_SIZE)
		rc = big(&c);
	if (rc < 0)
		bson_reinit(out);
	return rc;
}

/* Only plain inclusions at and below n. */
static bool plain(const struct pnode *n)
{
	if (n->kind != PJ_INCLUDE && n->kind != PJ_TREE)
		return false;
	for (size_t i = 0; i < n->n; i++)
		if (!plain(n->kids[i]))
			return false;
	return true;
}

bool mql_project_fields(const struct mql_project *p,
			bool (*ok)(void *ctx, const char *name, size_t len),
			void *ctx)
{
	if (p->kind != MQL_PROJECT_FIND || p->mode != 1 || p->id_mode != 0 ||
	    p->root.n == 0)
		return false;
	for (size_t i = 0; i < p->root.n; i++) {
		const struct pnode *k = p->root.kids[i];

		if (k->len == 3 && !memcmp(k->name, "_id", 3))
			continue; /* {_id: 0} */
		if (!plain(k) || !ok(ctx, k->name, k->len))
			return false;
	}
	return true;
}
