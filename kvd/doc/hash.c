/* hash.c - the hash image codec and the hash merge operations (hash.h).
 *
 * The operations run on a shard's committer, inside its batch: each reads
 * the key's image as the layers hold it (the batch so far included), and
 * writes the whole new image, which the store journals as the key's value.
 * So two clients changing fields of one hash never lose an update, and a
 * change is one journal record.  Every limit is checked on sizes computed
 * before the new image is built: nothing past max-hash-bytes is allocated.
 */
#include "hash.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_status.h"
#include "shash.h"
#include "strops.h"

/* ===================== Varints and images ===================== */

size_t kvh_varint_put(uint8_t *p, uint32_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

int kvh_varint_get(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
	const uint8_t *q = *p;
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		if (q == end)
			return -1;
		x |= (uint64_t)(*q & 0x7f) << shift;
		if (!(*q++ & 0x80)) {
			if (x > UINT32_MAX)
				return -1;
			*v = (uint32_t)x;
			*p = q;
			return 0;
		}
	}
	return -1;
}

size_t kvh_str_size(size_t n)
{
	size_t v = 1;

	while (n >= 0x80) {
		n >>= 7;
		v++;
	}
	return v; /* the prefix's bytes; the caller adds the string's */
}

void kvh_put_str(struct kv_buf *b, struct kv_slice s)
{
	uint8_t h[5];

	kv_buf_append(b, h, kvh_varint_put(h, (uint32_t)s.n));
	if (s.n)
		kv_buf_append(b, s.p, s.n);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void kvh_put_hdr(struct kv_buf *b, unsigned flags, uint32_t n)
{
	uint8_t h[KVH_HDR];

	h[0] = (uint8_t)flags;
	put_le32(h + 1, n);
	kv_buf_append(b, h, sizeof(h));
}

void kvh_set_count(struct kv_buf *b, size_t at, uint32_t n)
{
	if (!b->err && b->len >= at + KVH_HDR)
		put_le32(b->data + at + 1, n);
}

int kvh_open(struct kv_slice img, struct kvh_iter *it, uint32_t *n,
	     unsigned *flags)
{
	if (img.n < KVH_HDR || (img.p[0] & ~KVH_F_LARGE))
		return -1;
	*flags = img.p[0];
	*n = get_le32(img.p + 1);
	it->p = img.p + KVH_HDR;
	it->end = img.p + img.n;
	it->left = *n;
	return 0;
}

static int get_str(struct kvh_iter *it, struct kv_slice *s)
{
	uint32_t len;

	if (kvh_varint_get(&it->p, it->end, &len) ||
	    (size_t)(it->end - it->p) < len)
		return -1;
	s->p = it->p;
	s->n = len;
	it->p += len;
	return 0;
}

int kvh_next(struct kvh_iter *it, struct kv_slice *f, struct kv_slice *v)
{
	if (!it->left)
		return it->p == it->end ? 0 : -1;
	if (get_str(it, f) || get_str(it, v))
		return -1;
	it->left--;
	return 1;
}

int kvh_get(struct kv_slice img, struct kv_slice f, struct kv_slice *v)
{
	struct kvh_iter it;
	struct kv_slice k;
	uint32_t n;
	unsigned fl;
	int rc;

	if (kvh_open(img, &it, &n, &fl))
		return -1;
	while ((rc = kvh_next(&it, &k, v)) > 0)
		if (k.n == f.n && (!f.n || !memcmp(k.p, f.p, f.n)))
			return 1;
	return rc;
}

uint32_t kvh_len(struct kv_slice img)
{
	struct kvh_iter it;
	uint32_t n;
	unsigned fl;

	return kvh_open(img, &it, &n, &fl) ? 0 : n;
}

const char *kvh_encoding(struct kv_slice img)
{
	return img.n && !(img.p[0] & KVH_F_LARGE) &&
		       kvh_len(img) <= KVH_LISTPACK_ENTRIES
		   ? "listpack"
		   : "hashtable";
}

int kvh_check(struct kv_slice img)
{
	struct kvh_iter it;
	struct kv_slice f, v;
	uint32_t n;
	unsigned fl;
	int rc;

	if (kvh_open(img, &it, &n, &fl) || !n)
		return -1;
	while ((rc = kvh_next(&it, &f, &v)) > 0)
		;
	return rc;
}

/* ===================== A set of fields ===================== */

/* An operand's fields (and values), each once: a field given twice takes
 * the later value in the earlier place, as Redis's HSET does. */
struct fset {
	struct kv_slice *f, *v;
	uint8_t *used;
	uint32_t n;
	uint32_t *ht; /* open addressing: index + 1 */
	size_t mask;
	int large; /* a field or value over KVH_LISTPACK_VALUE bytes */
};

static void fset_free(struct fset *s)
{
	free(s->f);
	free(s->v);
	free(s->used);
	free(s->ht);
}

static int fset_init(struct fset *s, uint32_t max)
{
	size_t cap = 16;

	memset(s, 0, sizeof(*s));
	while (cap < 2 * (size_t)max)
		cap *= 2;
	s->f = malloc((max ? max : 1) * sizeof(*s->f));
	s->v = malloc((max ? max : 1) * sizeof(*s->v));
	s->used = calloc(max ? max : 1, 1);
	s->ht = calloc(cap, sizeof(*s->ht));
	s->mask = cap - 1;
	if (!s->f || !s->v || !s->used || !s->ht) {
		fset_free(s);
		return ENOMEM;
	}
	return 0;
}

/* The slot of f: empty, or its own. */
static uint32_t *fset_slot(const struct fset *s, struct kv_slice f)
{
	size_t i = kvd_shash(f.p, f.n) & s->mask;

	for (;; i = (i + 1) & s->mask) {
		uint32_t x = s->ht[i];

		if (!x || (s->f[x - 1].n == f.n &&
			   (!f.n || !memcmp(s->f[x - 1].p, f.p, f.n))))
			return &s->ht[i];
	}
}

/* Index of f in s, or -1. */
static long fset_find(const struct fset *s, struct kv_slice f)
{
	uint32_t x = *fset_slot(s, f);

	return x ? (long)x - 1 : -1;
}

static void fset_add(struct fset *s, struct kv_slice f, struct kv_slice v)
{
	uint32_t *slot = fset_slot(s, f);

	if (f.n > KVH_LISTPACK_VALUE || v.n > KVH_LISTPACK_VALUE)
		s->large = 1;
	if (*slot) {
		s->v[*slot - 1] = v;
		return;
	}
	s->f[s->n] = f;
	s->v[s->n] = v;
	*slot = ++s->n;
}

/* Items of an operand: pairs (vals) or fields, counted first. */
static int operand_count(struct kv_slice op, int vals, uint32_t *n)
{
	struct kvh_iter it = {op.p, op.p + op.n, 0};
	struct kv_slice s;

	*n = 0;
	while (it.p < it.end) {
		if (get_str(&it, &s) || (vals && get_str(&it, &s)))
			return -1;
		(*n)++;
	}
	return 0;
}

static int fset_parse(struct fset *s, struct kv_slice op, int vals)
{
	struct kvh_iter it = {op.p, op.p + op.n, 0};
	struct kv_slice f, v = {NULL, 0};
	uint32_t n;
	int rc;

	if (operand_count(op, vals, &n) || !n)
		return EINVAL;
	if ((rc = fset_init(s, n)))
		return rc;
	while (it.p < it.end) {
		get_str(&it, &f);
		if (vals)
			get_str(&it, &v);
		fset_add(s, f, v);
	}
	return 0;
}

/* ===================== The operations ===================== */

/* The old image, or none: 0, or a refusal in m->status (-1). */
static int old_image(struct kvd_merge *m, struct kvh_iter *it, uint32_t *n,
		     unsigned *flags)
{
	*n = 0;
	*flags = 0;
	memset(it, 0, sizeof(*it));
	if (!m->live)
		return 0;
	if (m->type != KVD_VT_HASH) {
		m->status = KV_WRONG_TYPE;
		return -1;
	}
	if (kvh_open(m->old, it, n, flags)) {
		m->status = KV_INTERNAL;
		return -1;
	}
	return 0;
}

static int over(struct kvd_merge *m, const struct kvh_limits *lim, uint64_t n,
		uint64_t bytes)
{
	if (n > lim->max_fields || bytes > lim->max_bytes) {
		m->status = KV_VALUE_TOO_LARGE;
		m->result =
		    n > lim->max_fields ? KVH_OVER_FIELDS : KVH_OVER_BYTES;
		return 1;
	}
	return 0;
}

static size_t pair_size(struct kv_slice f, struct kv_slice v)
{
	return kvh_str_size(f.n) + f.n + kvh_str_size(v.n) + v.n;
}

/* The old image with s's fields set (s->used marks the ones it had): the
 * fields added in m->result.  Sizes first, limits, then the image. */
static int set_fields(struct kvd_merge *m, const struct kvh_limits *lim,
		      struct fset *s)
{
	struct kvh_iter it, it2;
	struct kv_slice f, v;
	uint32_t n, added = 0;
	unsigned flags;
	uint64_t bytes = KVH_HDR;
	long i;
	int rc = 0;

	if (old_image(m, &it, &n, &flags))
		return 0;
	it2 = it;
	while (m->live && (rc = kvh_next(&it, &f, &v)) > 0) {
		if ((i = fset_find(s, f)) >= 0) {
			s->used[i] = 1;
			v = s->v[i];
		}
		bytes += pair_size(f, v);
	}
	if (m->live && rc < 0) {
		m->status = KV_INTERNAL;
		return 0;
	}
	for (uint32_t j = 0; j < s->n; j++)
		if (!s->used[j]) {
			added++;
			bytes += pair_size(s->f[j], s->v[j]);
		}
	if (over(m, lim, (uint64_t)n + added, bytes))
		return 0;
	if (s->large || n + added > KVH_LISTPACK_ENTRIES)
		flags |= KVH_F_LARGE;
	kvh_put_hdr(m->image, flags, n + added);
	while (m->live && kvh_next(&it2, &f, &v) > 0) {
		if ((i = fset_find(s, f)) >= 0)
			v = s->v[i];
		kvh_put_str(m->image, f);
		kvh_put_str(m->image, v);
	}
	for (uint32_t j = 0; j < s->n; j++)
		if (!s->used[j]) {
			kvh_put_str(m->image, s->f[j]);
			kvh_put_str(m->image, s->v[j]);
		}
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_HASH;
	m->result = added;
	return 0;
}

static int op_set(void *ctx, struct kvd_merge *m)
{
	struct fset s;
	int rc = fset_parse(&s, m->operand, 1);

	if (rc) {
		m->status = rc == EINVAL ? KV_BAD_ARGS : KV_OK;
		return rc == EINVAL ? 0 : rc;
	}
	rc = set_fields(m, ctx, &s);
	fset_free(&s);
	return rc;
}

/* One field set to v: s built for it. */
static int set_one(struct kvd_merge *m, const struct kvh_limits *lim,
		   struct kv_slice f, struct kv_slice v)
{
	struct fset s;
	int rc = fset_init(&s, 1);

	if (rc)
		return rc;
	fset_add(&s, f, v);
	rc = set_fields(m, lim, &s);
	fset_free(&s);
	return rc;
}

/* The operand's one field (varint-prefixed) and what follows it. */
static int field_and_rest(struct kv_slice op, struct kv_slice *f,
			  struct kv_slice *rest)
{
	struct kvh_iter it = {op.p, op.p + op.n, 0};

	if (get_str(&it, f))
		return -1;
	rest->p = it.p;
	rest->n = (size_t)(it.end - it.p);
	return 0;
}

/* The current value of field f (absent: *found 0); 0, or -1 refused. */
static int field_value(struct kvd_merge *m, struct kv_slice f,
		       struct kv_slice *v, int *found)
{
	struct kvh_iter it;
	uint32_t n;
	unsigned flags;
	int rc;

	*found = 0;
	if (old_image(m, &it, &n, &flags))
		return -1;
	if (!m->live)
		return 0;
	rc = kvh_get(m->old, f, v);
	if (rc < 0) {
		m->status = KV_INTERNAL;
		return -1;
	}
	*found = rc;
	return 0;
}

static int op_setnx(void *ctx, struct kvd_merge *m)
{
	struct kvh_iter it = {m->operand.p, m->operand.p + m->operand.n, 0};
	struct kv_slice f, v, cur;
	int found;

	if (get_str(&it, &f) || get_str(&it, &v) || it.p != it.end) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (field_value(m, f, &cur, &found))
		return 0;
	if (found) {
		m->result = 0;
		return 0;
	}
	return set_one(m, ctx, f, v);
}

static int op_del(void *ctx, struct kvd_merge *m)
{
	struct kvh_iter it, it2;
	struct kv_slice f, v;
	struct fset s;
	uint32_t n, gone = 0;
	unsigned flags;
	int rc;

	(void)ctx;
	if ((rc = fset_parse(&s, m->operand, 0))) {
		m->status = rc == EINVAL ? KV_BAD_ARGS : KV_OK;
		return rc == EINVAL ? 0 : rc;
	}
	if (old_image(m, &it, &n, &flags) || !m->live)
		goto out;
	it2 = it;
	while ((rc = kvh_next(&it, &f, &v)) > 0)
		gone += fset_find(&s, f) >= 0;
	if (rc < 0)
		m->status = KV_INTERNAL;
	m->result = gone;
	if (rc < 0 || !gone)
		goto out;
	if (gone == n) { /* Redis deletes a hash with no field left */
		m->action = KVD_MERGE_DELETE;
		goto out;
	}
	kvh_put_hdr(m->image, flags, n - gone);
	while (kvh_next(&it2, &f, &v) > 0)
		if (fset_find(&s, f) < 0) {
			kvh_put_str(m->image, f);
			kvh_put_str(m->image, v);
		}
	m->action = KVD_MERGE_STORE;
	m->new_type = KVD_VT_HASH;
out:
	fset_free(&s);
	return 0;
}

/* Redis's string2ll: optional '-', digits, no leading zero, no overflow. */
static int parse_ll(struct kv_slice s, int64_t *out)
{
	uint64_t v = 0, lim;
	size_t i = 0;
	int neg = 0;

	if (s.n == 0 || s.n > 20)
		return -1;
	if (s.n == 1 && s.p[0] == '0') {
		*out = 0;
		return 0;
	}
	if (s.p[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i == s.n || s.p[i] < '1' || s.p[i] > '9')
		return -1;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < s.n; i++) {
		unsigned d = (unsigned)(s.p[i] - '0');

		if (d > 9 || v > (lim - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int op_incrby(void *ctx, struct kvd_merge *m)
{
	struct kv_slice f, cur;
	int64_t delta, v = 0;
	char num[24];
	int found, len;

	if (m->operand.n < 8) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	delta = 0;
	for (int i = 0; i < 8; i++)
		delta = (int64_t)((uint64_t)delta | (uint64_t)m->operand.p[i]
							<< (8 * i));
	f.p = m->operand.p + 8;
	f.n = m->operand.n - 8;
	if (field_value(m, f, &cur, &found))
		return 0;
	if (found && parse_ll(cur, &v)) {
		m->status = KV_NOT_INTEGER;
		return 0;
	}
	if ((delta < 0 && v < 0 && delta < INT64_MIN - v) ||
	    (delta > 0 && v > 0 && delta > INT64_MAX - v)) {
		m->status = KV_NOT_INTEGER;
		m->result = 1; /* overflow */
		return 0;
	}
	v += delta;
	len = snprintf(num, sizeof(num), "%lld", (long long)v);
	if (set_one(m, ctx, f, (struct kv_slice){(uint8_t *)num, (size_t)len}))
		return ENOMEM;
	if (m->status == KV_OK)
		m->result = v;
	return 0;
}

static int op_incrbyfloat(void *ctx, struct kvd_merge *m)
{
	struct kv_slice f, text, cur;
	long double incr, v = 0;
	char out[5 * 1024 + 64];
	size_t n;
	int found;

	if (field_and_rest(m->operand, &f, &text) ||
	    kvd_parse_ld(text, &incr)) {
		m->status = KV_BAD_ARGS;
		return 0;
	}
	if (field_value(m, f, &cur, &found))
		return 0;
	if (found && kvd_parse_ld(cur, &v)) {
		m->status = KV_NOT_FLOAT;
		return 0;
	}
	v += incr;
	if (isnan(v) || isinf(v)) {
		m->status = KV_NOT_FLOAT;
		m->result = 1; /* the result, not the value */
		return 0;
	}
	if (!(n = kvd_format_ld(out, sizeof(out), v))) {
		m->status = KV_INTERNAL;
		return 0;
	}
	if (set_one(m, ctx, f, (struct kv_slice){(uint8_t *)out, n}))
		return ENOMEM;
	if (m->status == KV_OK)
		kv_buf_append(m->reply, out, n);
	return 0;
}

void kvh_register(struct kvd_merge_op *ops, const struct kvh_limits *lim)
{
	static const kvd_merge_fn fns[KVH_NOPS] = {
	    [KVH_OP_SET] = op_set,
	    [KVH_OP_SETNX] = op_setnx,
	    [KVH_OP_DEL] = op_del,
	    [KVH_OP_INCRBY] = op_incrby,
	    [KVH_OP_INCRBYFLOAT] = op_incrbyfloat,
	};

	for (unsigned i = 0; i < KVH_NOPS; i++) {
		ops[i].fn = fns[i];
		ops[i].ctx = (void *)lim;
	}
}
