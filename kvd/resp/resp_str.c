/* resp_str.c - RESP read-only string commands on parts of a value: GETRANGE
 * (and SUBSTR), GETBIT, BITCOUNT, BITPOS, BITFIELD_RO and LCS; and the
 * parser and field arithmetic BITFIELD (resp_rmw.c) shares with BITFIELD_RO.
 *
 * They follow Redis 7.0's t_string.c and bitops.c step by step, including
 * the order in which arguments are checked against the key's existence
 * (BITCOUNT on a missing key answers 0 before looking at its range, as
 * 7.0 does), so that replies and error texts are Redis's own.  A value is
 * read from the io thread's snapshot and never copied, but for LCS's table.
 *
 * LCS is quadratic in time and memory; Redis only refuses it when the table
 * cannot be allocated.  kvd refuses a table over LCS_MAX_CELLS (one io
 * thread would be busy too long and hold too much memory), and holds the
 * IDX reply to max-output as it grows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_status.h"
#include "net/loop.h"
#include "resp.h"
#include "net/router.h"
#include "strops.h"

/* Redis's proto-max-bulk-len default: bit offsets are held below it. */
#define BIT_OFFSET_BYTES (512ull << 20)
/* 2^24 cells of 4 bytes: 64 MiB and some tens of milliseconds at most. */
#define LCS_MAX_CELLS (1ull << 24)

static const char err_bitoff[] =
    "ERR bit offset is not an integer or out of range";
static const char err_bftype[] =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is "
    "not supported but i64 is.";

/* The value at k: 1 with *v, 0 when missing, -1 on a read failure, -2
 * when k holds a hash. */
static int value_of(struct kvd_conn *c, struct kv_slice k, struct kv_slice *v)
{
	struct kvd_io *io = c->io;
	int rc;

	if (!resp_key_ok(c, k))
		return 0;
	rc =
	    kvd_reader_get(io->reader, kvd_shard_of(k.p, k.n, io->srv->nshards),
			   k.p, k.n, io->now_ms, v);
	if (rc == KV_OK)
		return 1;
	return rc == KV_NOT_FOUND ? 0 : rc == KV_WRONG_TYPE ? -2 : -1;
}

/* value_of's failure as an error reply. */
static const char *value_err(int rc)
{
	return rc == -2 ? resp_err_wrongtype : resp_err_internal;
}

/* GETRANGE key start end, and its old name SUBSTR. */
const char *resp_getrange(struct kvd_conn *c, struct resp_req *r)
{
	long long start, end;
	struct kv_slice v;
	int rc;

	if (resp_ll(r->a[2], &start) || resp_ll(r->a[3], &end))
		return resp_err_int;
	rc = value_of(c, r->a[1], &v);
	if (rc < 0)
		return value_err(rc);
	if (rc == 0 || (start < 0 && end < 0 && start > end) ||
	    !kvd_clamp_range(&start, &end, (long long)v.n))
		resp_add_bulk(c, "", 0);
	else
		resp_add_bulk(c, v.p + start, (size_t)(end - start + 1));
	return NULL;
}

/* Redis's getBitOffsetFromArgument: "#n" counts in units of bits. */
static int bit_offset(struct kv_slice s, int hash, long long bits,
		      uint64_t *off)
{
	long long v;

	if (hash && s.n > 1 && s.p[0] == '#') {
		s.p++;
		s.n--;
	} else {
		bits = 1;
	}
	if (resp_ll(s, &v) || v < 0 || v > INT64_MAX / bits)
		return -1;
	v *= bits;
	if ((uint64_t)v >> 3 >= BIT_OFFSET_BYTES)
		return -1;
	*off = (uint64_t)v;
	return 0;
}

const char *resp_getbit(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice v;
	uint64_t off;
	int rc, bit = 0;

	if (bit_offset(r->a[2], 0, 1, &off))
		return err_bitoff;
	rc = value_of(c, r->a[1], &v);
	if (rc < 0)
		return value_err(rc);
	if (rc && (off >> 3) < v.n)
		bit = (v.p[off >> 3] >> (7 - (off & 7))) & 1;
	resp_add_int(c, bit);
	return NULL;
}

/* A BYTE|BIT unit argument: 1 for BIT, 0 for BYTE, -1 otherwise. */
static int unit_arg(struct kv_slice s)
{
	if (resp_eq(s, "bit"))
		return 1;
	return resp_eq(s, "byte") ? 0 : -1;
}

/* BITCOUNT key [start end [BYTE|BIT]] */
const char *resp_bitcount(struct kvd_conn *c, struct resp_req *r)
{
	struct bitrange br = {0, 0, 0, 0};
	struct kv_slice v;
	long long n;
	int isbit = 0, rc = value_of(c, r->a[1], &v);

	if (rc < 0)
		return value_err(rc);
	if (rc == 0) { /* 7.0 answers before looking at the arguments */
		resp_add_int(c, 0);
		return NULL;
	}
	if (r->argc == 4 || r->argc == 5) {
		if (resp_ll(r->a[2], &br.start) || resp_ll(r->a[3], &br.end))
			return resp_err_int;
		if (br.start < 0 && br.end < 0 && br.start > br.end) {
			resp_add_int(c, 0);
			return NULL;
		}
		if (r->argc == 5 && (isbit = unit_arg(r->a[4])) < 0)
			return resp_err_syntax;
	} else if (r->argc == 2) {
		br.start = 0;
		br.end = -1;
	} else {
		return resp_err_syntax;
	}
	if (!kvd_bitrange_bytes(&br, (long long)v.n, isbit)) {
		resp_add_int(c, 0);
		return NULL;
	}
	n = kvd_popcount(v.p + br.start, (size_t)(br.end - br.start + 1));
	n -= __builtin_popcount(v.p[br.start] & br.first_mask);
	n -= __builtin_popcount(v.p[br.end] & br.last_mask);
	resp_add_int(c, n);
	return NULL;
}

/* BITPOS key bit [start [end [BYTE|BIT]]] */
const char *resp_bitpos(struct kvd_conn *c, struct resp_req *r)
{
	struct bitrange br = {0, -1, 0, 0};
	struct kv_slice v;
	long long bit, pos, bytes;
	int isbit = 0, end_given = 0, rc;

	if (resp_ll(r->a[2], &bit))
		return resp_err_int;
	if (bit != 0 && bit != 1)
		return "ERR The bit argument must be 1 or 0.";
	rc = value_of(c, r->a[1], &v);
	if (rc < 0)
		return value_err(rc);
	if (rc == 0) { /* an endless run of zeros */
		resp_add_int(c, bit ? -1 : 0);
		return NULL;
	}
	if (r->argc >= 4 && r->argc <= 6) {
		if (resp_ll(r->a[3], &br.start))
			return resp_err_int;
		if (r->argc == 6 && (isbit = unit_arg(r->a[5])) < 0)
			return resp_err_syntax;
		if (r->argc >= 5) {
			if (resp_ll(r->a[4], &br.end))
				return resp_err_int;
			end_given = 1;
		}
	} else if (r->argc != 3) {
		return resp_err_syntax;
	}
	if (!kvd_bitrange_bytes(&br, (long long)v.n, isbit)) {
		resp_add_int(c, -1);
		return NULL;
	}
	pos = kvd_bitpos_range(v.p, &br, (int)bit, &bytes);
	if (end_given && bit == 0 && pos == bytes * 8)
		pos = -1; /* no zero inside an explicit range */
	else if (pos != -1)
		pos += br.start * 8;
	resp_add_int(c, pos);
	return NULL;
}

/* ===================== BITFIELD_RO ===================== */

/* "i1".."i64" or "u1".."u63". */
static int bf_type(struct kv_slice s, int *sign, long long *bits)
{
	struct kv_slice n = {s.p + 1, s.n ? s.n - 1 : 0};

	if (s.n == 0 || (s.p[0] != 'i' && s.p[0] != 'u')) /* lower case only */
		return -1;
	*sign = s.p[0] == 'i';
	if (memchr(n.p, '\0', n.n))
		n.n = (size_t)((const uint8_t *)memchr(n.p, '\0', n.n) - n.p);
	if (resp_ll(n, bits) || *bits < 1 || *bits > (*sign ? 64 : 63))
		return -1;
	return 0;
}

static int64_t bf_get(struct kv_slice v, uint64_t off, long long bits, int sign)
{
	uint64_t u = 0;

	for (long long j = 0; j < bits; j++, off++) {
		uint64_t byte = off >> 3;
		int b = byte < v.n ? (v.p[byte] >> (7 - (off & 7))) & 1 : 0;

		u = (u << 1) | (uint64_t)b;
	}
	if (sign && bits < 64 && (u & (1ull << (bits - 1))))
		u |= ~0ull << bits;
	return (int64_t)u;
}

/* Redis's setUnsignedBitfield: the low bits of u at bit off of p, which
 * holds them. */
static void bf_put(uint8_t *p, uint64_t off, long long bits, uint64_t u)
{
	for (long long j = bits - 1; j >= 0; j--, off++) {
		uint8_t mask = (uint8_t)(0x80u >> (off & 7));

		if ((u >> j) & 1)
			p[off >> 3] |= mask;
		else
			p[off >> 3] &= (uint8_t)~mask;
	}
}

int64_t resp_bf_get(struct kv_slice v, const struct resp_bf_op *o)
{
	return bf_get(v, o->off, o->bits, o->sign);
}

/* Redis's checkUnsignedBitfieldOverflow: 0, or 1 with *to the value to
 * store (WRAP, SAT; FAIL stores nothing). */
static int bf_over_u(uint64_t v, int64_t incr, int bits, int ow, uint64_t *to)
{
	uint64_t max = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
	int64_t maxincr = (int64_t)(max - v), minincr = (int64_t)(0 - v);
	int up = v > max || (incr > 0 && incr > maxincr);

	if (!up && !(incr < 0 && incr < minincr))
		return 0;
	if (ow == RESP_BF_WRAP)
		*to = (v + (uint64_t)incr) & max;
	else if (ow == RESP_BF_SAT)
		*to = up ? max : 0;
	return 1;
}

/* Redis's checkSignedBitfieldOverflow, with its conditions as they are
 * (for 64 bits, only an increment of the value's own sign overflows). */
static int bf_over_i(int64_t v, int64_t incr, int bits, int ow, int64_t *to)
{
	int64_t max =
	    bits == 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
	int64_t min = -max - 1;
	int64_t maxincr = (int64_t)((uint64_t)max - (uint64_t)v);
	int64_t minincr = (int64_t)((uint64_t)min - (uint64_t)v);
	int up = v > max || (bits != 64 && incr > maxincr) ||
		 (v >= 0 && incr > 0 && incr > maxincr);
	int down = !up && (v < min || (bits != 64 && incr < minincr) ||
			   (v < 0 && incr < 0 && incr < minincr));
	uint64_t sum = (uint64_t)v + (uint64_t)incr;

	if (!up && !down)
		return 0;
	if (ow == RESP_BF_SAT) {
		*to = up ? max : min;
	} else if (ow == RESP_BF_WRAP) {
		if (bits < 64 && (sum & (1ull << (bits - 1))))
			sum |= ~0ull << bits;
		else if (bits < 64)
			sum &= ~(~0ull << bits);
		*to = (int64_t)sum;
	}
	return 1;
}

int resp_bf_write(uint8_t *p, const struct resp_bf_op *o, int64_t *reply)
{
	struct kv_slice v = {p, (o->off + o->bits + 7) >> 3};
	int64_t old = bf_get(v, o->off, o->bits, o->sign);
	int incr = o->op == RESP_BF_INCRBY, over;
	/* SET checks its value as an increment of 0 from it */
	int64_t from = incr ? old : o->val, by = incr ? o->val : 0;
	uint64_t nv = (uint64_t)from + (uint64_t)by;

	if (o->sign) {
		int64_t to = 0;

		if ((over = bf_over_i(from, by, o->bits, o->ow, &to)))
			nv = (uint64_t)to;
	} else {
		over = bf_over_u((uint64_t)from, by, o->bits, o->ow, &nv);
	}
	if (over && o->ow == RESP_BF_FAIL)
		return -1;
	*reply = incr ? (int64_t)nv : old;
	bf_put(p, o->off, o->bits, nv);
	return 0;
}

/* One operation at *j (advanced past it) into *o; or an error. */
static const char *bf_one(struct resp_req *r, struct resp_it *it, uint32_t *j,
			  int ow, struct resp_bf_op *o)
{
	uint32_t more = r->argc - *j - 1;
	struct kv_slice op, t, off, val;
	long long bits, x = 0;
	int sign;

	resp_it_next(it, &op);
	if (resp_eq(op, "get") && more >= 2)
		o->op = RESP_BF_GET;
	else if (resp_eq(op, "set") && more >= 3)
		o->op = RESP_BF_SET;
	else if (resp_eq(op, "incrby") && more >= 3)
		o->op = RESP_BF_INCRBY;
	else
		return resp_err_syntax;
	resp_it_next(it, &t);
	resp_it_next(it, &off);
	*j += 2;
	if (bf_type(t, &sign, &bits))
		return err_bftype;
	if (bit_offset(off, 1, bits, &o->off))
		return err_bitoff;
	if (o->op != RESP_BF_GET) {
		resp_it_next(it, &val);
		++*j;
		if (resp_ll(val, &x))
			return resp_err_int;
	}
	o->val = x;
	o->bits = (uint8_t)bits;
	o->sign = (uint8_t)sign;
	o->ow = (uint8_t)ow;
	return NULL;
}

const char *resp_bf_parse(struct resp_req *r, struct resp_bf_op **ops,
			  uint32_t *n, uint64_t *maxbit)
{
	struct resp_bf_op *o = malloc(sizeof(*o) * (r->argc / 3 + 1));
	struct resp_it it;
	struct kv_slice t;
	int ow = RESP_BF_WRAP;
	const char *err = NULL;

	*n = 0;
	*maxbit = 0;
	if (!o)
		return resp_err_nomem;
	resp_it_init(r, 2, &it);
	for (uint32_t j = 2; j < r->argc && !err; j++) {
		struct resp_it at = it;
		struct kv_slice op;

		resp_it_next(&at, &op);
		if (resp_eq(op, "overflow") && r->argc - j - 1 >= 1) {
			it = at;
			resp_it_next(&it, &t);
			j++;
			if (resp_eq(t, "wrap"))
				ow = RESP_BF_WRAP;
			else if (resp_eq(t, "sat"))
				ow = RESP_BF_SAT;
			else if (resp_eq(t, "fail"))
				ow = RESP_BF_FAIL;
			else
				err = "ERR Invalid OVERFLOW type specified";
			continue;
		}
		if ((err = bf_one(r, &it, &j, ow, &o[*n])))
			break;
		if (o[*n].op != RESP_BF_GET && o[*n].off + o[*n].bits > *maxbit)
			*maxbit = o[*n].off + o[*n].bits;
		++*n;
	}
	if (err) {
		free(o);
		o = NULL;
	}
	*ops = o;
	return err;
}

/* BITFIELD_RO key [GET type offset ...]: Redis checks every operation
 * before answering any. */
const char *resp_bitfield_ro(struct kvd_conn *c, struct resp_req *r)
{
	struct kv_slice v = {NULL, 0};
	struct resp_bf_op *ops;
	uint64_t maxbit;
	uint32_t n;
	const char *err = resp_bf_parse(r, &ops, &n, &maxbit);
	int rc;

	if (err)
		return err;
	if (maxbit) {
		free(ops);
		return "ERR BITFIELD_RO only supports the GET subcommand";
	}
	rc = value_of(c, r->a[1], &v);
	if (rc < 0) {
		free(ops);
		return value_err(rc);
	}
	if (rc == 0)
		v.n = 0;
	resp_add_array(c, n);
	for (uint32_t i = 0; i < n; i++)
		resp_add_int(c, resp_bf_get(v, &ops[i]));
	free(ops);
	return NULL;
}

/* ===================== LCS ===================== */

struct lcs_opts {
	int idx, len, withlen;
	long long minlen;
};

static const char *lcs_options(struct resp_req *r, struct lcs_opts *o)
{
	struct resp_it it;
	struct kv_slice a;

	resp_it_init(r, 3, &it);
	for (uint32_t j = 3; j < r->argc; j++) {
		resp_it_next(&it, &a);
		if (resp_eq(a, "idx")) {
			o->idx = 1;
		} else if (resp_eq(a, "len")) {
			o->len = 1;
		} else if (resp_eq(a, "withmatchlen")) {
			o->withlen = 1;
		} else if (resp_eq(a, "minmatchlen") && j + 1 < r->argc) {
			resp_it_next(&it, &a);
			j++;
			if (resp_ll(a, &o->minlen))
				return resp_err_int;
			if (o->minlen < 0)
				o->minlen = 0;
		} else {
			return resp_err_syntax;
		}
	}
	if (o->idx && o->len)
		return "ERR If you want both the length and indexes, please "
		       "just use IDX.";
	return NULL;
}

/* The table of LCS lengths of every prefix pair, (alen+1) x (blen+1). */
static uint32_t *lcs_table(struct kv_slice a, struct kv_slice b)
{
	size_t w = b.n + 1;
	uint32_t *dp = malloc(sizeof(*dp) * (a.n + 1) * w);

	if (!dp)
		return NULL;
	for (size_t i = 0; i <= a.n; i++) {
		for (size_t j = 0; j <= b.n; j++) {
			uint32_t *cell = &dp[i * w + j];

			if (i == 0 || j == 0)
				*cell = 0;
			else if (a.p[i - 1] == b.p[j - 1])
				*cell = dp[(i - 1) * w + j - 1] + 1;
			else
				*cell = dp[(i - 1) * w + j] > dp[i * w + j - 1]
					    ? dp[(i - 1) * w + j]
					    : dp[i * w + j - 1];
		}
	}
	return dp;
}

struct lcs_walk {
	struct kvd_conn *c;
	const struct lcs_opts *o;
	uint64_t nranges;
	size_t off, cap;
	int over; /* the IDX reply outgrew max-output */
};

static void lcs_emit(struct lcs_walk *w, size_t as, size_t ae, size_t bs,
		     size_t be)
{
	struct kvd_conn *c = w->c;
	uint64_t len = ae - as + 1;

	if (!w->o->idx || w->over ||
	    (w->o->minlen && len < (uint64_t)w->o->minlen))
		return;
	resp_add_array(c, 2 + (w->o->withlen ? 1 : 0));
	resp_add_array(c, 2);
	resp_add_int(c, (int64_t)as);
	resp_add_int(c, (int64_t)ae);
	resp_add_array(c, 2);
	resp_add_int(c, (int64_t)bs);
	resp_add_int(c, (int64_t)be);
	if (w->o->withlen)
		resp_add_int(c, (int64_t)len);
	w->nranges++;
	if (c->out.len - w->off > w->cap)
		w->over = 1;
}

/* Redis's walk back through the table: the LCS itself into out (when not
 * NULL), and the matching ranges, from the end of the strings on. */
static void lcs_back(struct lcs_walk *w, const uint32_t *dp, struct kv_slice a,
		     struct kv_slice b, uint8_t *out)
{
	size_t wd = b.n + 1, i = a.n, j = b.n, idx = dp[a.n * wd + b.n];
	size_t as = a.n, ae = 0, bs = 0, be = 0; /* as == a.n: no range */

	while (i > 0 && j > 0) {
		int emit = 0;

		if (a.p[i - 1] == b.p[j - 1]) {
			if (out)
				out[idx - 1] = a.p[i - 1];
			if (as == a.n) {
				as = ae = i - 1;
				bs = be = j - 1;
			} else if (as == i && bs == j) {
				as--;
				bs--;
			} else {
				emit = 1;
			}
			if (as == 0 || bs == 0)
				emit = 1;
			idx--, i--, j--;
		} else {
			if (dp[(i - 1) * wd + j] > dp[i * wd + j - 1])
				i--;
			else
				j--;
			if (as != a.n)
				emit = 1;
		}
		if (emit) {
			lcs_emit(w, as, ae, bs, be);
			as = a.n;
		}
	}
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN] */
const char *resp_lcs(struct kvd_conn *c, struct resp_req *r)
{
	struct lcs_opts o = {0, 0, 0, 0};
	struct kv_slice a = {(const uint8_t *)"", 0}, b = a;
	struct lcs_walk w = {c, &o, 0, 0, resp_reply_cap(c), 0};
	uint32_t *dp;
	uint8_t *out = NULL;
	const char *err;
	uint32_t total;
	size_t start, h;
	char hdr[32];
	int ra = value_of(c, r->a[1], &a), rb = value_of(c, r->a[2], &b);

	if (ra == -2 || rb == -2) /* Redis 7.0's words for LCS */
		return "ERR The specified keys must contain string values";
	if (ra < 0 || rb < 0)
		return resp_err_internal;
	if ((err = lcs_options(r, &o)))
		return err;
	if ((uint64_t)(a.n + 1) * (b.n + 1) > LCS_MAX_CELLS) {
		snprintf(r->err, sizeof(r->err),
			 "ERR LCS of strings this long would need a table of "
			 "more than %llu cells (kvd's limit: (len1+1) * "
			 "(len2+1))",
			 (unsigned long long)LCS_MAX_CELLS);
		return r->err;
	}
	if (!(dp = lcs_table(a, b)))
		return resp_err_nomem;
	total = dp[a.n * (b.n + 1) + b.n];
	if ((o.idx || !o.len) && !(out = malloc(total + 1u))) {
		free(dp);
		return resp_err_nomem;
	}
	start = c->out.len;
	if (o.idx) {
		resp_add_array(c, 4);
		resp_add_cstr(c, "matches");
		w.off = c->out.len;
	}
	if (out)
		lcs_back(&w, dp, a, b, out);
	free(dp);
	if (o.idx && w.over) {
		c->out.len = start;
		err = "ERR reply would exceed max-output: use MINMATCHLEN or "
		      "LEN";
	} else if (o.idx) {
		hdr[0] = '*';
		h = 1 + resp_u64(hdr + 1, w.nranges);
		memcpy(hdr + h, "\r\n", 2);
		resp_insert(c, w.off, hdr, h + 2);
		resp_add_cstr(c, "len");
		resp_add_int(c, total);
	} else if (o.len) {
		resp_add_int(c, total);
	} else {
		resp_add_bulk(c, out, total);
	}
	free(out);
	return err;
}
