/* shard_int.h - what the files of the storage layer share, and nothing
 * else includes: shard.c (environments, readers), shard_scan.c (ordered
 * scans and counts across shards), shard_write.c (write transactions) and
 * shard_copy.c (backups).  Together they are the only code that calls LMDB;
 * shard.h is their interface to the rest of kvd.
 */
#ifndef KVD_SHARD_INT_H
#define KVD_SHARD_INT_H

#include <lmdb.h>
#include <string.h>

#include "datadir.h"
#include "kv_buf.h"
#include "shard.h"

#define VF_EXPIRE 1u

struct kvd_wtxn {
	struct kvd_store *st;
	unsigned idx;
	MDB_txn *txn;
	struct kv_buf tmp; /* old values copied out before they are rewritten */
	int room; /* -1: not yet known in this txn; 0: only deletes may use the
		     map's reserve, which is all that is left; 1: room */
};

struct shard {
	MDB_env *env;
	MDB_dbi kv, exp;
	char path[600];
	struct kvd_wtxn wt; /* its committer's transaction, reused per batch */
};

struct kvd_store {
	struct kvd_datadir dd;
	unsigned n;
	struct shard *sh;
};

struct kvd_reader {
	struct kvd_store *st;
	MDB_txn **txn;
	MDB_cursor **cur;
	uint8_t *active;
	unsigned nactive;
	struct scan_head *heads;
};

/* One shard's cursor position during a scan (shard_scan.c). */
struct scan_head {
	MDB_val k, v;
	int valid;
};

/* ===================== Stored values ===================== */

static inline size_t val_hdr_len(uint64_t exp)
{
	return exp ? 9 : 1;
}

static inline void val_hdr_put(uint8_t *p, uint64_t exp)
{
	p[0] = exp ? VF_EXPIRE : 0;
	for (unsigned i = 0; exp && i < 8; i++)
		p[1 + i] = (uint8_t)(exp >> (8 * i));
}

/* Split a stored value; -1 if it is too short to be one of ours. */
static inline int val_parse(const MDB_val *v, uint64_t *exp,
			    struct kv_slice *data)
{
	const uint8_t *p = v->mv_data;
	size_t h;

	if (v->mv_size < 1)
		return -1;
	*exp = 0;
	if (p[0] & VF_EXPIRE) {
		if (v->mv_size < 9)
			return -1;
		for (unsigned i = 0; i < 8; i++)
			*exp |= (uint64_t)p[1 + i] << (8 * i);
	}
	h = (p[0] & VF_EXPIRE) ? 9 : 1;
	data->p = p + h;
	data->n = v->mv_size - h;
	return 0;
}

/* 1 when v holds a value that has not expired at now. */
static inline int val_live(const MDB_val *v, uint64_t now, uint64_t *exp,
			   struct kv_slice *data)
{
	if (val_parse(v, exp, data))
		return 0;
	return *exp == 0 || *exp > now;
}

static inline void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* LMDB's default order: memcmp over the common length, then shorter first. */
static inline int key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? memcmp(a, b, n) : 0; /* an empty slice may be NULL */

	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

/* This loop turn's snapshot of shard i, opened on first use; NULL (logged)
 * when LMDB refuses. */
MDB_txn *kvd_shard_rtxn(struct kvd_reader *r, unsigned i);
/* The reader's cursor on shard i's kv database, renewed on that snapshot. */
MDB_cursor *kvd_shard_rcursor(struct kvd_reader *r, unsigned i);
/* Bytes free on the filesystem holding path (root may use the reserve). */
uint64_t kvd_shard_fs_room(const char *path);

#endif
