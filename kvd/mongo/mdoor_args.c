/* mdoor_args.c - command arguments checked as MongoDB's IDL checks them:
 * known fields only (plus the generic ones every command takes), each of
 * its types, at most once, required ones present, with mongod's messages
 * and codes; numbers as integers; database and collection names; and the
 * documents of an array argument or of the OP_MSG kind-1 sequence that
 * stands for it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mdoor_int.h"
#include "mql_value.h"

/* Fields any command may carry (MongoDB's generic arguments).  The
 * transaction fields are refused earlier (mdoor_dispatch.c). */
static const char *const generic_args[] = {
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "readConcern",
    "writeConcern",
    "maxTimeMS",
    "comment",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$audit",
    "$client",
    "$configServerState",
    "$gleStats",
    "$topologyTime",
    "$configTime",
    "clientOperationKey",
    "mayBypassWriteBlocking",
    "txnRetryCounter",
    "$queryOptions",
    NULL,
};

bool mdoor_in_list(const char *const *list, const char *k)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], k))
			return true;
	return false;
}

bool mdoor_generic_arg(const char *k)
{
	return mdoor_in_list(generic_args, k);
}

static unsigned type_bit(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_DOUBLE: return MDOOR_T_DOUBLE;
	case BSON_TYPE_UTF8: return MDOOR_T_STRING;
	case BSON_TYPE_DOCUMENT: return MDOOR_T_OBJECT;
	case BSON_TYPE_ARRAY: return MDOOR_T_ARRAY;
	case BSON_TYPE_BINARY: return MDOOR_T_BINDATA;
	case BSON_TYPE_BOOL: return MDOOR_T_BOOL;
	case BSON_TYPE_INT32: return MDOOR_T_INT;
	case BSON_TYPE_INT64: return MDOOR_T_LONG;
	case BSON_TYPE_DECIMAL128: return MDOOR_T_DECIMAL;
	case BSON_TYPE_NULL: return MDOOR_T_NULL;
	default: return 0;
	}
}

/* MongoDB's order of type names in its "expected types" lists. */
static void type_list(unsigned types, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} order[] = {
	    {MDOOR_T_BOOL, "bool"},	  {MDOOR_T_LONG, "long"},
	    {MDOOR_T_INT, "int"},	  {MDOOR_T_DECIMAL, "decimal"},
	    {MDOOR_T_DOUBLE, "double"},	  {MDOOR_T_STRING, "string"},
	    {MDOOR_T_OBJECT, "object"},	  {MDOOR_T_ARRAY, "array"},
	    {MDOOR_T_BINDATA, "binData"}, {MDOOR_T_NULL, "null"},
	};
	size_t k = 0, used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (!(types & order[i].bit))
			continue;
		used +=
		    (size_t)snprintf(buf + used, used < n ? n - used : 0,
				     "%s%s", k++ ? ", " : "", order[i].name);
		if (used >= n)
			return;
	}
}

static int wrong_type(const struct mdoor_req *r, const char *field,
		      bson_type_t got, unsigned types, struct mql_error *err)
{
	char list[128];

	type_list(types, list, sizeof(list));
	if (strchr(list, ','))
		return mdoor_err(err, MQL_TypeMismatch,
				 "BSON field '%s.%s' is the wrong type '%s', "
				 "expected types '[%s]'",
				 r->cmd, field, mql_type_name(got), list);
	return mdoor_err(err, MQL_TypeMismatch,
			 "BSON field '%s.%s' is the wrong type '%s', expected "
			 "type '%s'",
			 r->cmd, field, mql_type_name(got), list);
}

static bool in_seqs(const struct mdoor_req *r, const char *name)
{
	for (size_t i = 0; i < r->nseqs; i++)
		if (!strcmp(r->seqs[i].id, name))
			return true;
	return false;
}

/* An absent argument: an iterator whose type byte is the terminating 0
 * of an empty document, so that bson_iter_type (and BSON_ITER_HOLDS_*)
 * answer EOD instead of failing libbson's precondition on a zeroed
 * iterator. */
static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

void mdoor_absent(bson_iter_t *it)
{
	memset(it, 0, sizeof(*it));
	it->raw = empty_doc;
	it->len = 5;
	it->type = 4;
	it->key = 4;
}

bool mdoor_has(const bson_iter_t *it)
{
	return it->raw && bson_iter_type(it) != BSON_TYPE_EOD;
}

static int one_field(const struct mdoor_req *r, const bson_iter_t *it,
		     const struct mdoor_arg *spec, size_t n, mdoor_av *out,
		     struct mql_error *err)
{
	const char *k = bson_iter_key(it);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(spec[i].name, k))
			continue;
		if (mdoor_has(&out[i].it))
			return mdoor_err(err, MDOOR_IDLDuplicateField,
					 "BSON field '%s.%s' is a duplicate "
					 "field",
					 r->cmd, k);
		if (!(spec[i].types & MDOOR_T_ANY) &&
		    !(type_bit(bson_iter_type(it)) & spec[i].types))
			return wrong_type(r, k, bson_iter_type(it),
					  spec[i].types, err);
		out[i].it = *it;
		return 0;
	}
	if (mdoor_generic_arg(k))
		return 0;
	return mdoor_err(err, MDOOR_IDLUnknownField,
			 "BSON field '%s.%s' is an unknown field.", r->cmd, k);
}

int mdoor_args(const struct mdoor_req *r, const struct mdoor_arg *spec,
	       size_t n, mdoor_av *out, struct mql_error *err)
{
	bson_iter_t it;

	for (size_t i = 0; i < n; i++)
		mdoor_absent(&out[i].it);
	bson_iter_init_from_data(&it, r->body, r->body_len);
	bson_iter_next(&it); /* the command itself */
	while (bson_iter_next(&it))
		if (one_field(r, &it, spec, n, out, err))
			return -1;
	for (size_t i = 0; i < n; i++)
		if (spec[i].required && !mdoor_has(&out[i].it) &&
		    !in_seqs(r, spec[i].name))
			return mdoor_err(err, MDOOR_IDLFailedToParse,
					 "BSON field '%s.%s' is missing but a "
					 "required field",
					 r->cmd, spec[i].name);
	return 0;
}

int mdoor_arg_int64(const struct mdoor_req *r, const bson_iter_t *it,
		    int64_t *out, struct mql_error *err)
{
	const bson_value_t v = *bson_iter_value((bson_iter_t *)it);
	double x;

	switch (v.value_type) {
	case BSON_TYPE_INT32: *out = v.value.v_int32; return 0;
	case BSON_TYPE_INT64: *out = v.value.v_int64; return 0;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		x = mql_number_double(&v);
		if (x != x || x != floor(x) || x < -9.2e18 || x > 9.2e18)
			return mdoor_err(err, MQL_BadValue,
					 "BSON field '%s.%s' value must be an "
					 "integer, got %g",
					 r->cmd, bson_iter_key(it), x);
		*out = (int64_t)x;
		return 0;
	default:
		return wrong_type(r, bson_iter_key(it), v.value_type,
				  MDOOR_T_NUM, err);
	}
}

bool mdoor_arg_bool(const bson_iter_t *it)
{
	return mdoor_has(it) && bson_iter_as_bool(it);
}

void mdoor_arg_doc(const bson_iter_t *it, const uint8_t **p, uint32_t *len)
{
	if (BSON_ITER_HOLDS_ARRAY(it))
		bson_iter_array(it, len, p);
	else
		bson_iter_document(it, len, p);
}

void mdoor_arg_hint(const bson_iter_t *it, const uint8_t **p, uint32_t *len,
		    bool *name)
{
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_document(it, len, p);
	} else if (BSON_ITER_HOLDS_UTF8(it)) {
		*p = (const uint8_t *)bson_iter_utf8(it, len);
		*name = true;
	}
}

bool mdoor_cmd_value(const struct mdoor_req *r, bson_iter_t *it)
{
	return bson_iter_init_from_data(it, r->body, r->body_len) &&
	       bson_iter_next(it);
}

/* ===================== names ===================== */

int mdoor_check_db(const char *db, struct mql_error *err)
{
	size_t n = strlen(db);

	if (n == 0 || n >= MDOOR_DB_MAX || strpbrk(db, "/\\. \"$"))
		return mdoor_err(err, MDOOR_InvalidNamespace,
				 "Invalid database name: '%s'", db);
	return 0;
}

int mdoor_check_coll(const char *db, const char *coll, struct mql_error *err)
{
	size_t n = strlen(coll);

	if (n == 0 || coll[0] == '.' || strchr(coll, '$'))
		return mdoor_err(err, MDOOR_InvalidNamespace,
				 "Invalid namespace specified '%s.%s'", db,
				 coll);
	if (strlen(db) + 1 + n > MDOOR_NAME_MAX - 1)
		return mdoor_err(err, MDOOR_InvalidNamespace,
				 "Fully qualified namespace is too long. "
				 "Namespace: %s.%s Max: %d",
				 db, coll, MDOOR_NAME_MAX - 1);
	return 0;
}

int mdoor_coll_arg(const struct mdoor_req *r, const char **coll,
		   struct mql_error *err)
{
	bson_iter_t it;
	uint32_t n;

	mdoor_cmd_value(r, &it);
	if (!BSON_ITER_HOLDS_UTF8(&it))
		return mdoor_err(err, MDOOR_InvalidNamespace,
				 "collection name has invalid type %s",
				 mql_type_name(bson_iter_type(&it)));
	*coll = bson_iter_utf8(&it, &n);
	if (strlen(*coll) != n)
		return mdoor_err(err, MDOOR_InvalidNamespace,
				 "collection name holds a NUL byte");
	return mdoor_check_coll(r->db, *coll, err);
}

/* ===================== document arrays and sequences ===================== */

int mdoor_docs_open(const struct mdoor_req *r, const char *field,
		    const bson_iter_t *arg, struct mdoor_docs *d,
		    struct mql_error *err)
{
	memset(d, 0, sizeof(*d));
	d->field = field;
	for (size_t i = 0; i < r->nseqs; i++) {
		if (strcmp(r->seqs[i].id, field))
			continue;
		d->seq = true;
		d->p = r->seqs[i].docs;
		d->end = d->p + r->seqs[i].len;
		return 1;
	}
	if (!arg || !mdoor_has(arg))
		return 0;
	if (!BSON_ITER_HOLDS_ARRAY(arg))
		return wrong_type(r, field, bson_iter_type(arg), MDOOR_T_ARRAY,
				  err);
	bson_iter_recurse(arg, &d->it);
	return 1;
}

int mdoor_docs_next(struct mdoor_docs *d, const uint8_t **doc, uint32_t *len,
		    struct mql_error *err)
{
	if (d->seq) {
		if (d->p >= d->end)
			return 0;
		*doc = d->p;
		*len = (uint32_t)mdoor_le32(d->p); /* checked by the framing */
		d->p += *len;
		return 1;
	}
	if (!bson_iter_next(&d->it))
		return 0;
	if (!BSON_ITER_HOLDS_DOCUMENT(&d->it))
		return mdoor_err(err, MQL_TypeMismatch,
				 "BSON field '%s.%s' is the wrong type '%s', "
				 "expected type 'object'",
				 d->field, bson_iter_key(&d->it),
				 mql_type_name(bson_iter_type(&d->it)));
	bson_iter_document(&d->it, len, doc);
	return 1;
}
