/* update_doc.c - mql_update_apply: an update made into a whole new
 * document.  Replacements keep _id; operator updates must leave _id as it
 * was; an upsert's document starts from the query's equalities, gets the
 * update with $setOnInsert, and has its _id first; the result is checked
 * against MongoDB's size and depth limits.  A $set of fields the document
 * already holds at its top level, the usual update, is spliced into the
 * document's bytes in one pass (set_splice). */
#include <string.h>

#include "mql_int.h"
#include "mql_value.h"
#include "update_int.h"

static bool find_id(const uint8_t *doc, uint32_t len, bson_value_t *v)
{
	bson_iter_t it;

	if (!doc || !mql_path_find_field(doc, len, "_id", 3, &it))
		return false;
	*v = *bson_iter_value(&it);
	return true;
}

/* Same type and same value: what MongoDB's _id check calls equal. */
static bool same_value(const bson_value_t *a, const bson_value_t *b)
{
	return a->value_type == b->value_type && mql_value_cmp(a, b) == 0;
}

/* out = id (when given) then every field of src but its _id. */
static int with_id_first(const bson_value_t *id, const uint8_t *src,
			 uint32_t len, bson_t *out, struct mql_error *err)
{
	bson_iter_t it;

	if (id && !bson_append_value(out, "_id", 3, id))
		goto big;
	bson_iter_init_from_data(&it, src, len);
	while (bson_iter_next(&it)) {
		if (id && strcmp(bson_iter_key(&it), "_id") == 0)
			continue;
		if (out->len > MQL_MAX_DOC_SIZE ||
		    !bson_append_iter(out, NULL, 0, &it))
			goto big;
	}
	return 0;
big:
	return mql_error_set(err, MQL_BSONObjectTooLarge,
			     "Resulting document after update is larger than "
			     "%d",
			     MQL_MAX_DOC_SIZE);
}

struct seed {
	bson_t set; /* {path: value, ...} */
};

static void seed_cb(void *ctx, const struct mql_pred *p)
{
	struct seed *s = ctx;

	if (p->op != MQL_PRED_EQ || strchr(p->path, '$'))
		return;
	bson_append_value(&s->set, p->path, -1, p->value);
}

/* The document an upsert starts from: the query's equalities set. */
static int upsert_seed(const struct mql_update_ctx *ctx, bson_t *out,
		       struct mql_error *err)
{
	struct seed s = {BSON_INITIALIZER};
	bson_t upd = BSON_INITIALIZER;
	struct mql_update *u = NULL;
	static const uint8_t empty[5] = {5, 0, 0, 0, 0};
	int rc = 0;

	if (ctx && ctx->query)
		mql_match_preds(ctx->query, seed_cb, &s);
	bson_append_document(&upd, "$set", 4, &s.set);
	if (mql_update_compile(bson_get_data(&upd), upd.len, &u, err) < 0) {
		if (err && err->code == MQL_ConflictingUpdateOperators) {
			char *at = strstr(err->msg, "conflict at '");
			char path[256];

			snprintf(path, sizeof(path), "%s", at ? at + 13 : "?");
			path[strcspn(path, "'")] = '\0';
			mql_error_set(err, MQL_NotSingleValueField,
				      "cannot infer query fields to set, path "
				      "'%s' is matched twice",
				      path);
		}
		rc = -1;
	} else {
		rc = update_apply_tree(u, empty, 5, true, ctx, out, err);
	}
	mql_update_free(u);
	bson_destroy(&upd);
	bson_destroy(&s.set);
	return rc;
}

static int replace(const struct mql_update *u, const uint8_t *doc, uint32_t len,
		   const bson_value_t *seed_id,
		   const struct mql_update_ctx *ctx, bson_t *out,
		   struct mql_error *err)
{
	bson_value_t old_id, new_id;
	bool has_old = find_id(doc, len, &old_id);
	bool has_new = find_id(u->data, u->len, &new_id);
	char buf[200];

	if (has_old && has_new && !same_value(&old_id, &new_id)) {
		mql_value_str(&new_id, buf, sizeof(buf));
		return mql_error_set(err, MQL_ImmutableField,
				     "After applying the update, the "
				     "(immutable) field '_id' was found to "
				     "have been altered to _id: %s",
				     buf);
	}
	if (has_old)
		return with_id_first(&old_id, u->data, u->len, out, err);
	if (has_new)
		return with_id_first(&new_id, u->data, u->len, out, err);
	if (!doc && seed_id)
		return with_id_first(seed_id, u->data, u->len, out, err);
	if (!doc && ctx && ctx->new_id)
		return with_id_first(ctx->new_id, u->data, u->len, out, err);
	return with_id_first(NULL, u->data, u->len, out, err);
}

static int operators(const struct mql_update *u, const uint8_t *doc,
		     uint32_t len, const struct mql_update_ctx *ctx,
		     bson_t *out, struct mql_error *err)
{
	bson_t tmp = BSON_INITIALIZER, seed = BSON_INITIALIZER;
	bson_value_t old_id, new_id;
	bool has_old, has_new;
	int rc = -1;

	if (!doc) {
		if (upsert_seed(ctx, &seed, err) < 0)
			goto done;
		if (update_apply_tree(u, bson_get_data(&seed), seed.len, true,
				      ctx, &tmp, err) < 0)
			goto done;
		/* _id first: the one the update or query set, else the
		 * caller's */
		has_new = find_id(bson_get_data(&tmp), tmp.len, &new_id);
		rc = with_id_first(has_new		? &new_id
				   : ctx && ctx->new_id ? ctx->new_id
							: NULL,
				   bson_get_data(&tmp), tmp.len, out, err);
		goto done;
	}
	if (update_apply_tree(u, doc, len, false, ctx, out, err) < 0)
		goto done;
	has_old = find_id(doc, len, &old_id);
	has_new = find_id(bson_get_data(out), out->len, &new_id);
	if (has_old && (!has_new || !same_value(&old_id, &new_id))) {
		mql_error_set(err, MQL_ImmutableField,
			      "Performing an update on the path '_id' would "
			      "modify the immutable field '_id'");
		goto done;
	}
	rc = 0;
done:
	bson_destroy(&tmp);
	bson_destroy(&seed);
	return rc;
}

/* ---- $set of top-level fields the document has: spliced ---------- */

/* At most this many fields are spliced; more take the general path. */
#define SPLICE_MAX 32

/* A field of the update's $set, as raw bytes: [type][key][value]. */
struct span {
	const uint8_t *p;
	uint32_t n;
	const char *key;
	size_t kl;
	int hits; /* fields of the document it replaces */
};

/* The elements of the document data[0..len) (checked BSON) as spans
 * (key, start and end) into sp, at most max: their count, or -1. */
static int spans_of(const uint8_t *data, uint32_t len, struct span *sp, int max)
{
	bson_iter_t it;
	int n = 0;

	if (!bson_iter_init_from_data(&it, data, len))
		return -1;
	while (bson_iter_next(&it)) {
		if (n == max)
			return -1;
		if (n)
			sp[n - 1].n = (uint32_t)(data + bson_iter_offset(&it) -
						 sp[n - 1].p);
		sp[n].p = data + bson_iter_offset(&it);
		sp[n].key = bson_iter_key(&it);
		sp[n].kl = bson_iter_key_len(&it);
		sp[n].hits = 0;
		n++;
	}
	if (n)
		sp[n - 1].n = (uint32_t)(data + len - 1 - sp[n - 1].p);
	return n;
}

/* The update is $set of top-level fields other than _id (no dots, no
 * positional "$") and nothing else: the fields' raw elements into set,
 * their count; 0 when it is not. */
static int plain_set(const struct mql_update *u, struct span *set)
{
	const uint8_t *sub;
	uint32_t sublen;
	bson_iter_t it;
	int n = 0, k;

	if (u->replacement || u->nops == 0 || u->nops > SPLICE_MAX)
		return 0;
	for (size_t i = 0; i < u->nops; i++) {
		const struct uop *op = u->ops[i];

		if (op->kind != U_SET || op->path.n != 1 ||
		    !strcmp(op->path.dotted, "$") ||
		    !strcmp(op->path.dotted, "_id"))
			return 0;
	}
	bson_iter_init_from_data(&it, u->data, u->len);
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "$set") ||
		    !BSON_ITER_HOLDS_DOCUMENT(&it))
			return 0;
		bson_iter_document(&it, &sublen, &sub);
		k = spans_of(sub, sublen, set + n, SPLICE_MAX - n);
		if (k < 0)
			return 0;
		n += k;
	}
	return (size_t)n == u->nops ? n : 0;
}

/* A one-pass update for the common case (YCSB's, an application's
 * "set these fields"): a $set of top-level fields the document holds
 * once each is the document with those elements' bytes replaced by the
 * update's, in place, which is what the general walk writes for it
 * (field order kept, key bytes equal); it is copied in a few memcpys
 * instead of re-appended field by field.  1 done (out holds the new
 * document), 0 not this case (out untouched). */
static int set_splice(const struct mql_update *u, const uint8_t *doc,
		      uint32_t len, bson_t *out)
{
	struct span set[SPLICE_MAX], old[SPLICE_MAX];
	int at[SPLICE_MAX]; /* old[i] is replaced by set[at[i]], or -1 */
	int ns = plain_set(u, set), no, i;
	uint64_t size = len;
	const uint8_t *pos = doc;
	uint8_t *base, *q;

	if (!ns || !doc)
		return 0;
	/* past SPLICE_MAX fields the document takes the general path */
	no = spans_of(doc, len, old, SPLICE_MAX);
	if (no < 0)
		return 0;
	for (i = 0; i < no; i++) {
		at[i] = -1;
		for (int j = 0; j < ns; j++)
			if (old[i].kl == set[j].kl &&
			    !memcmp(old[i].key, set[j].key, set[j].kl)) {
				at[i] = j;
				set[j].hits++;
				size += set[j].n;
				size -= old[i].n;
				break;
			}
	}
	for (i = 0; i < ns; i++)
		if (set[i].hits != 1)
			return 0; /* a field to create, or one held twice */
	if (size > MQL_MAX_DOC_SIZE)
		return 0; /* the general path says so */
	base = q = bson_reserve_buffer(out, (uint32_t)size);
	if (!base)
		return 0;
	for (i = 0; i < no; i++) {
		if (at[i] < 0)
			continue;
		memcpy(q, pos, (size_t)(old[i].p - pos));
		q += old[i].p - pos;
		memcpy(q, set[at[i]].p, set[at[i]].n);
		q += set[at[i]].n;
		pos = old[i].p + old[i].n;
	}
	memcpy(q, pos, (size_t)(doc + len - pos)); /* its trailing 0 too */
	base[0] = (uint8_t)size;
	base[1] = (uint8_t)(size >> 8);
	base[2] = (uint8_t)(size >> 16);
	base[3] = (uint8_t)(size >> 24);
	return 1;
}

int mql_update_apply(const struct mql_update *u, const uint8_t *doc,
		     uint32_t len, const struct mql_update_ctx *ctx,
		     bson_t *out, bool *modified, struct mql_error *err)
{
	static const struct mql_update_ctx none = {.pos = -1};
	int rc;

	if (!ctx)
		ctx = &none;
	if (modified)
		*modified = false;
	if (u->replacement && !doc) {
		bson_t seed = BSON_INITIALIZER;
		bson_value_t sid;

		rc = upsert_seed(ctx, &seed, err);
		if (rc == 0)
			rc = replace(
			    u, NULL, 0,
			    find_id(bson_get_data(&seed), seed.len, &sid)
				? &sid
				: NULL,
			    ctx, out, err);
		bson_destroy(&seed);
	} else if (u->replacement) {
		rc = replace(u, doc, len, NULL, ctx, out, err);
	} else if (!set_splice(u, doc, len, out)) {
		rc = operators(u, doc, len, ctx, out, err);
	} else {
		rc = 0;
	}
	if (rc == 0 && out->len > MQL_MAX_DOC_SIZE)
		rc = mql_error_set(err, MQL_BSONObjectTooLarge,
				   "Resulting document after update is larger "
				   "than %d",
				   MQL_MAX_DOC_SIZE);
	if (rc == 0 &&
	    mql_bson_check(bson_get_data(out), out->len, MQL_MAX_DOC_SIZE,
			   MQL_MAX_DOC_DEPTH, err) < 0)
		rc = -1;
	if (rc < 0) {
		bson_reinit(out);
		return -1;
	}
	if (modified)
		*modified = !doc || out->len != len ||
			    memcmp(bson_get_data(out), doc, len) != 0;
	return 0;
}
