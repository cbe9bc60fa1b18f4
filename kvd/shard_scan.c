/* shard_scan.c - SCAN and COUNT: every shard's keys merged in key order,
 * read through the calling io thread's snapshots. */
#include "shard_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "kv_proto.h"
#include "kv_status.h"
#include "log.h"

/* ===================== Scan and count ===================== */

static int head_valid(struct scan_head *h, const struct kvd_scan *sc)
{
	if (!h->valid)
		return 0;
	if (sc->prefix.n && (h->k.mv_size < sc->prefix.n ||
			     memcmp(h->k.mv_data, sc->prefix.p, sc->prefix.n)))
		return h->valid = 0;
	if (sc->end.n &&
	    key_cmp(h->k.mv_data, h->k.mv_size, sc->end.p, sc->end.n) >= 0)
		return h->valid = 0;
	return 1;
}

static int head_step(struct kvd_reader *r, unsigned i, MDB_cursor_op op,
		     const struct kvd_scan *sc)
{
	struct scan_head *h = &r->heads[i];
	int rc = mdb_cursor_get(r->cur[i], &h->k, &h->v, op);

	if (rc == MDB_NOTFOUND) {
		h->valid = 0;
		return 0;
	}
	if (rc) {
		log_error("%s: cursor failed: %s", r->st->sh[i].path,
			  mdb_strerror(rc));
		return -1;
	}
	h->valid = 1;
	head_valid(h, sc);
	return 0;
}

/* Position every shard's cursor at the first key >= max(prefix, start). */
static int scan_seek(struct kvd_reader *r, const struct kvd_scan *sc)
{
	struct kv_slice from = sc->prefix;

	if (sc->start.n &&
	    key_cmp(sc->start.p, sc->start.n, from.p, from.n) > 0)
		from = sc->start;
	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		if (!kvd_shard_rcursor(r, i))
			return -1;
		h->k.mv_data = (void *)from.p;
		h->k.mv_size = from.n;
		if (head_step(r, i, from.n ? MDB_SET_RANGE : MDB_FIRST, sc))
			return -1;
	}
	return 0;
}

static int scan_min(struct kvd_reader *r)
{
	int best = -1;

	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		if (h->valid &&
		    (best < 0 || key_cmp(h->k.mv_data, h->k.mv_size,
					 r->heads[best].k.mv_data,
					 r->heads[best].k.mv_size) < 0))
			best = (int)i;
	}
	return best;
}

int kvd_reader_scan(struct kvd_reader *r, const struct kvd_scan *sc,
		    uint64_t now, kvd_scan_fn fn, void *arg,
		    struct kv_slice *next)
{
	unsigned emitted = 0;
	size_t bytes = 0;
	int i;

	next->p = NULL;
	next->n = 0;
	if (scan_seek(r, sc))
		return KV_INTERNAL;
	while ((i = scan_min(r)) >= 0) {
		struct scan_head *h = &r->heads[i];
		struct kv_slice key = {h->k.mv_data, h->k.mv_size}, val;
		uint64_t exp;

		if (emitted >= sc->limit || bytes >= sc->max_bytes) {
			*next = key;
			break;
		}
		if (val_live(&h->v, now, &exp, &val)) {
			if (sc->keys_only)
				val.n = 0;
			if (fn(arg, key, val))
				return KV_INTERNAL;
			emitted++;
			bytes += key.n + val.n + 10;
		}
		if (head_step(r, (unsigned)i, MDB_NEXT, sc))
			return KV_INTERNAL;
	}
	return KV_OK;
}

/* Keys in shard i that have expired but are not yet reaped. */
static int count_expired(struct kvd_reader *r, unsigned i, uint64_t now,
			 uint64_t *n)
{
	struct shard *sh = &r->st->sh[i];
	MDB_txn *txn = kvd_shard_rtxn(r, i);
	MDB_cursor *c;
	MDB_val k, v, kv;
	int rc;

	*n = 0;
	if (!txn || mdb_cursor_open(txn, sh->exp, &c))
		return -1;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		uint64_t at = k.mv_size == 8 ? be64_get(k.mv_data) : 0, exp;
		struct kv_slice data;

		if (at > now)
			break;
		if (mdb_get(txn, sh->kv, &v, &kv) == 0 &&
		    val_parse(&kv, &exp, &data) == 0 && exp == at)
			(*n)++;
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : -1;
}

static int count_prefix(struct kvd_reader *r, struct kv_slice prefix,
			uint64_t now, uint64_t *count)
{
	struct kvd_scan sc = {.prefix = prefix};

	if (scan_seek(r, &sc))
		return KV_INTERNAL;
	for (unsigned i = 0; i < r->st->n; i++) {
		struct scan_head *h = &r->heads[i];

		while (h->valid) {
			struct kv_slice val;
			uint64_t exp;

			*count += val_live(&h->v, now, &exp, &val);
			if (head_step(r, i, MDB_NEXT, &sc))
				return KV_INTERNAL;
		}
	}
	return KV_OK;
}

int kvd_reader_count(struct kvd_reader *r, struct kv_slice prefix, uint64_t now,
		     uint64_t *count)
{
	*count = 0;
	if (prefix.n)
		return count_prefix(r, prefix, now, count);
	for (unsigned i = 0; i < r->st->n; i++) {
		MDB_txn *txn = kvd_shard_rtxn(r, i);
		MDB_stat ms;
		uint64_t expired;

		if (!txn || mdb_stat(txn, r->st->sh[i].kv, &ms) ||
		    count_expired(r, i, now, &expired))
			return KV_INTERNAL;
		*count += ms.ms_entries - expired;
	}
	return KV_OK;
}
