/* fuzz_mql.c - kvd/mongo's language on any BSON: filters, updates,
 * projections, sort specifications and documents, each compiled (or
 * refused) and applied to every document, under ASan and UBSan.
 *
 * The input is a sequence of BSON documents, each taken by its own length
 * header (a truncated last one is cut off): the first is a filter, the
 * second an update, the third a projection and a sort specification, the
 * rest documents.  Malformed ones are fed to every compile call as they
 * are (each must refuse them), then replaced by {}.
 * Checks that hold for any input:
 *   - a compile call either succeeds or sets an error code and a message;
 *   - an update's result is well-formed BSON of at most 16 MiB and 100
 *     levels, and applying it again to its result does not crash;
 *   - a document matches a filter the same way twice (no hidden state),
 *     and {$nor: [filter]} never agrees with filter;
 *   - sort keys order every document the same both ways round;
 *   - index keys: two documents' encodings order as mql_doc_cmp orders
 *     them, and each decodes to an equal document with the same bytes
 *     (equal and ordered as documents when their arrays have the keys
 *     "0", "1" ..., which the encoding assumes);
 *   - the first document, read as a pipeline (an array's bytes are a
 *     document's), compiles or is refused with a code, and runs over the
 *     documents (with memory limits of a few KiB) to well-formed results,
 *     its $lookup stages reading the same documents (through an index or
 *     held, as the input's length says), a leading $group streamed or not
 *     (an input out of order is an error, never a crash).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mql_agg.h"
#include "mql_key.h"
#include "mql_match.h"
#include "mql_project.h"
#include "mql_sort.h"
#include "mql_update.h"
#include "mql_value.h"

#define MAX_DOCS 8

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

struct piece {
	const uint8_t *p;
	uint32_t len;
	bool ok;
};

static size_t split(const uint8_t *data, size_t size, struct piece *out)
{
	size_t n = 0, off = 0;

	while (off + 4 <= size && n < MAX_DOCS + 3) {
		uint32_t len;

		memcpy(&len, data + off, 4);
		len = BSON_UINT32_FROM_LE(len);
		if (len < 5 || len > size - off)
			len = (uint32_t)(size - off);
		out[n].p = data + off;
		out[n].len = len;
		out[n].ok = mql_bson_check(out[n].p, len, MQL_MAX_INPUT_SIZE,
					   MQL_MAX_INPUT_DEPTH, NULL) == 0;
		n++;
		off += len;
	}
	return n;
}

static void checked_err(int rc, const struct mql_error *err)
{
	if (rc < 0)
		FUZZ_CHECK(err->code != 0 && err->msg[0] && err->codename[0]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void run_update(const struct mql_update *u, const struct mql_match *m,
		       const struct piece *d)
{
	bson_t out = BSON_INITIALIZER, again = BSON_INITIALIZER;
	struct mql_error err = {0};
	bson_value_t id = {.value_type = BSON_TYPE_INT32};
	long pos = -1;
	struct mql_update_ctx ctx = {.now_ms = 1, .pos = -1, .new_id = &id};
	bool mod;
	int rc;

	if (m && d)
		mql_match_doc(m, d->p, d->len, &pos);
	ctx.pos = pos;
	ctx.query = m;
	rc = mql_update_apply(u, d ? d->p : NULL, d ? d->len : 0, &ctx, &out,
			      &mod, &err);
	checked_err(rc, &err);
	if (rc == 0) {
		FUZZ_CHECK(mql_bson_check(bson_get_data(&out), out.len,
					  MQL_MAX_DOC_SIZE, MQL_MAX_DOC_DEPTH,
					  NULL) == 0);
		rc = mql_update_apply(u, bson_get_data(&out), out.len, &ctx,
				      &again, &mod, &err);
		checked_err(rc, &err);
	}
	bson_destroy(&out);
	bson_destroy(&again);
}

static void run_doc(const struct mql_match *m, const struct mql_match *nor,
		    const struct mql_update *u, const struct mql_project *p,
		    const struct piece *d)
{
	bson_t out = BSON_INITIALIZER;
	struct mql_error err = {0};

	if (m) {
		bool a = mql_match_doc(m, d->p, d->len, NULL);

		FUZZ_CHECK(a == mql_match_doc(m, d->p, d->len, NULL));
		if (nor)
			FUZZ_CHECK(a != mql_match_doc(nor, d->p, d->len, NULL));
	}
	if (u)
		run_update(u, m, d);
	if (p) {
		int rc = mql_project_apply(p, d->p, d->len, &out, &err);

		checked_err(rc, &err);
	}
	bson_destroy(&out);
}

#define KEYBUF (1u << 20)

/* Encode a document as a value: 0 and *n, or -1 when it does not fit. */
static int key_of(const struct piece *d, uint8_t *buf, size_t *n)
{
	bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};

	v.value.v_doc.data = (uint8_t *)d->p;
	v.value.v_doc.data_len = d->len;
	*n = 0;
	return mql_key_encode(&v, false, buf, KEYBUF, n, NULL);
}

/* Arrays whose keys are "0", "1" ... all the way down. */
static bool canon(const uint8_t *p, uint32_t len, bool array)
{
	bson_iter_t it;
	uint32_t i = 0;

	if (!bson_iter_init_from_data(&it, p, len))
		return false;
	while (bson_iter_next(&it)) {
		char buf[16];
		const char *k;
		const bson_value_t *v = bson_iter_value(&it);

		bson_uint32_to_string(i++, &k, buf, sizeof(buf));
		if (array && strcmp(k, bson_iter_key(&it)) != 0)
			return false;
		if ((v->value_type == BSON_TYPE_DOCUMENT ||
		     v->value_type == BSON_TYPE_ARRAY) &&
		    !canon(v->value.v_doc.data, v->value.v_doc.data_len,
			   v->value_type == BSON_TYPE_ARRAY))
			return false;
	}
	return true;
}

static void run_keys(const struct piece *a, const struct piece *b)
{
	bool exact = canon(a->p, a->len, false) && canon(b->p, b->len, false);
	uint8_t *ka = malloc(2 * KEYBUF), *kb = ka + KEYBUF;
	size_t na, nb, used;
	bson_t out = BSON_INITIALIZER;
	bson_iter_t it;

	if (key_of(a, ka, &na) == 0 && key_of(b, kb, &nb) == 0) {
		int c = mql_doc_cmp(a->p, a->len, b->p, b->len);
		int m = memcmp(ka, kb, na < nb ? na : nb);

		if (m == 0)
			m = (na > nb) - (na < nb);
		FUZZ_CHECK(!exact || (c > 0) - (c < 0) == (m > 0) - (m < 0));
		FUZZ_CHECK(mql_key_decode(kb, nb, false, &out, "v", &used,
					  NULL) == 0 &&
			   used == nb);
		FUZZ_CHECK(bson_iter_init(&it, &out) && bson_iter_next(&it));
		FUZZ_CHECK(
		    !exact ||
		    mql_doc_cmp(
			b->p, b->len, bson_iter_value(&it)->value.v_doc.data,
			bson_iter_value(&it)->value.v_doc.data_len) == 0);
		FUZZ_CHECK(
		    key_of(
			&(struct piece){
			    bson_iter_value(&it)->value.v_doc.data,
			    bson_iter_value(&it)->value.v_doc.data_len, true},
			ka, &na) == 0 &&
		    na == nb && memcmp(ka, kb, nb) == 0);
	}
	bson_destroy(&out);
	free(ka);
}

struct docs {
	const struct piece *pc;
	size_t i, n;
};

static int docs_next(void *ctx, const uint8_t **doc, uint32_t *len,
		     struct mql_error *err)
{
	struct docs *d = ctx;

	(void)err;
	while (d->i < d->n && !d->pc[d->i].ok)
		d->i++;
	if (d->i >= d->n) /* also when there were no documents at all */
		return 0;
	*doc = d->pc[d->i].p;
	*len = d->pc[d->i++].len;
	return 1;
}

/* $lookup's reader: every `from` names the input's documents; indexed
 * or not as the caller says (both ways must run). */
struct fdocs {
	const struct piece *pc;
	size_t n;
	int indexed;
};

struct fread {
	struct docs d;
	struct mql_match *m;
};

static int f_indexed(void *ctx, const char *coll, const char *field,
		     struct mql_error *err)
{
	(void)coll;
	(void)field;
	(void)err;
	return ((struct fdocs *)ctx)->indexed;
}

static int f_open(void *ctx, const char *coll, const uint8_t *filter,
		  uint32_t len, void **rd, struct mql_error *err)
{
	struct fdocs *f = ctx;
	struct fread *r = calloc(1, sizeof(*r));
	int rc;

	(void)coll;
	FUZZ_CHECK(r != NULL);
	r->d = (struct docs){f->pc, 3, f->n};
	rc = mql_match_compile(filter, len, &r->m, err);
	checked_err(rc, err);
	if (rc < 0) {
		free(r);
		return -1;
	}
	*rd = r;
	return 0;
}

static int f_next(void *rd, const uint8_t **doc, uint32_t *len,
		  struct mql_error *err)
{
	struct fread *r = rd;
	int rc;

	while ((rc = docs_next(&r->d, doc, len, err)) > 0)
		if (mql_match_doc(r->m, *doc, *len, NULL))
			return 1;
	return rc;
}

static void f_close(void *rd)
{
	struct fread *r = rd;

	mql_match_free(r->m);
	free(r);
}

static void run_pipeline(const struct piece *pc, size_t n)
{
	struct mql_agg_opts o = {
	    .sort_mem = 4096, .group_mem = 4096, .lookup_mem = 8192};
	struct fdocs fd = {pc, n, (int)(n & 1)};
	struct mql_agg_foreign fa = {&fd, f_indexed, f_open, f_next, f_close};
	struct mql_pipeline *p;
	struct mql_agg_cursor *c;
	struct mql_error err = {0};
	struct docs d = {pc, 3, n};
	const uint8_t *doc;
	uint32_t len;
	int rc;

	rc = mql_pipeline_compile(pc[0].p, pc[0].len, &o, &p, &err);
	checked_err(rc, &err);
	if (rc < 0)
		return;
	rc = mql_agg_open(p, 0, docs_next, &d, &c, &err);
	FUZZ_CHECK(rc == 0);
	mql_agg_set_foreign(c, &fa);
	if (n & 2) /* whether or not its input is in order */
		mql_agg_stream_group(c);
	while ((rc = mql_agg_next(c, &doc, &len, &err)) > 0)
		FUZZ_CHECK(mql_bson_check(doc, len, MQL_MAX_DOC_SIZE,
					  MQL_MAX_INPUT_DEPTH, NULL) == 0);
	checked_err(rc, &err);
	mql_agg_close(c);
	mql_pipeline_free(p);
}

/* What the covered-query checks give each field they name (the planner
 * asks whether it is an index's): a top-level name, never empty, no dot;
 * true or false by its first byte, so that both ways are walked. */
static bool top_field(void *ctx, const char *name, size_t len)
{
	(void)ctx;
	FUZZ_CHECK(name && len > 0 && !memchr(name, '.', len));
	return (name[0] & 1) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct piece pc[MAX_DOCS + 3];
	size_t n = split(data, size, pc);
	struct mql_match *m = NULL, *nor = NULL;
	struct mql_update *u = NULL;
	struct mql_project *p = NULL;
	struct mql_sort *s = NULL;
	struct mql_error err = {0};
	int rc;

	if (n == 0)
		return 0;
	rc = mql_match_compile(pc[0].p, pc[0].len, &m, &err);
	checked_err(rc, &err);
	if (m)
		(void)mql_match_fields(m, top_field, NULL);
	if (m) { /* the negation, as a client would write it */
		bson_t f = BSON_INITIALIZER, arr;

		bson_append_array_begin(&f, "$nor", 4, &arr);
		{
			bson_t sub;

			bson_init_static(&sub, pc[0].p, pc[0].len);
			bson_append_document(&arr, "0", 1, &sub);
		}
		bson_append_array_end(&f, &arr);
		if (mql_match_compile(bson_get_data(&f), f.len, &nor, &err) < 0)
			nor = NULL; /* deeper than the filter alone */
		bson_destroy(&f);
	}
	if (n > 1) {
		rc = mql_update_compile(pc[1].p, pc[1].len, &u, &err);
		checked_err(rc, &err);
	}
	if (n > 2) {
		rc = mql_project_compile(pc[2].p, pc[2].len,
					 (enum mql_project_kind)(pc[2].len % 4),
					 &p, &err);
		checked_err(rc, &err);
		if (p)
			(void)mql_project_fields(p, top_field, NULL);
		rc = mql_sort_compile(pc[2].p, pc[2].len, &s, &err);
		checked_err(rc, &err);
	}
	if (u)
		run_update(u, m, NULL);
	for (size_t i = 3; i < n; i++) {
		struct piece d = pc[i];

		if (!d.ok) {
			d.p = empty_doc;
			d.len = 5;
		}
		run_doc(m, nor, u, p, &d);
		if (i > 3 && d.ok && pc[i - 1].ok)
			run_keys(&pc[i - 1], &d);
		if (s && i > 3) {
			bson_value_t ka[64], kb[64];
			const struct piece *e = &pc[i - 1];

			if (mql_sort_nkeys(s) <= 64 && e->ok && d.ok) {
				int ab, ba;

				mql_sort_key(s, e->p, e->len, ka);
				mql_sort_key(s, d.p, d.len, kb);
				ab = mql_sort_cmp_keys(s, ka, kb);
				ba = mql_sort_cmp_keys(s, kb, ka);
				FUZZ_CHECK((ab > 0) - (ab < 0) ==
					   -((ba > 0) - (ba < 0)));
			}
		}
	}
	run_pipeline(pc, n);
	mql_match_free(m);
	mql_match_free(nor);
	mql_update_free(u);
	mql_project_free(p);
	mql_sort_free(s);
	return 0;
}
