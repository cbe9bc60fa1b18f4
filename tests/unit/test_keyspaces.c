/* test_keyspaces.c - the store's keyspaces (store.h, "Keyspaces"): a key
 * of one keyspace never meets the same bytes in another, through every
 * layer (a batch, the memtables, the journal's replay, LMDB after a
 * checkpoint); only keyspace 0 is counted and scanned by its scans; on disk
 * keyspace 0 stays "kv" with raw keys and the others go to "kx"; a data
 * directory of the layout before keyspaces (no "kx", a journal of the old
 * records) opens and replays unchanged; FLUSH empties every keyspace; a
 * replica's full copy, its streamed records and a backup carry them all.
 * Real LMDB files under $TMPDIR, the store driven as its committer would.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "journaltest.h"
#include "kv_buf.h"
#include "kv_status.h"
#include "store.h"
#include "store_log.h"

void kvd_log(int level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

int kvd_log_ratelimited(struct kvd_log_limit *l, int level, const char *fmt,
			...)
{
	(void)l;
	(void)level;
	(void)fmt;
	return 0;
}

#define NOW 1700000000000ull

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove a data directory, shard directories and all. */
static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct kvd_store *open_store(const char *dir, unsigned shards)
{
	struct kvd_store_opts o = {.dir = dir,
				   .want_shards = shards,
				   .map_size = 64u << 20,
				   .max_readers = 16};
	struct kvd_store *st = NULL;
	char err[256];

	if (kvd_store_open(&st, &o, err, sizeof(err))) {
		fprintf(stderr, "open %s: %s\n", dir, err);
		exit(1);
	}
	return st;
}

/* One write of kind on shard i, in keyspace ks: key = val (or key alone);
 * its status. */
static int write1(struct kvd_store *st, unsigned i, int kind, unsigned ks,
		  const char *key, const char *val)
{
	uint8_t items[600];
	uint16_t kn = (uint16_t)strlen(key);
	uint32_t vn = val ? (uint32_t)strlen(val) : 0;
	struct kvd_wop op = {.kind = (uint8_t)kind, .ks = (uint8_t)ks};
	struct kvd_wtxn *t;
	int rc;

	memcpy(items, &kn, 2);
	memcpy(items + 2, &vn, 4);
	memcpy(items + 6, key, kn);
	if (vn)
		memcpy(items + 6 + kn, val, vn);
	op.items = items;
	op.items_len = 6u + kn + vn;
	op.nitems = kind == KVD_W_FLUSH ? 0 : 1;
	if ((rc = kvd_shard_begin(st, i, &t)))
		return rc;
	if ((rc = kvd_shard_apply(t, &op, NOW, 1u << 20))) {
		kvd_shard_abort(t);
		return rc;
	}
	free(op.val);
	rc = kvd_shard_commit(t, 1);
	return rc ? rc : op.status;
}

/* The value of key in keyspace ks as a C string in buf ("" when absent). */
static const char *get(struct kvd_store *st, unsigned i, unsigned ks,
		       const char *key, char *buf, size_t cap)
{
	struct kvd_reader *r = kvd_reader_new(st);
	struct kv_slice v;
	unsigned type;

	buf[0] = '\0';
	if (r && kvd_reader_getk(r, i, ks, key, strlen(key), NOW, &v, &type) ==
		     KV_OK)
		snprintf(buf, cap, "%.*s", (int)v.n, (const char *)v.p);
	kvd_reader_free(r);
	return buf;
}

static int scan_cat(void *arg, struct kv_slice k, struct kv_slice v,
		    unsigned type, uint64_t exp)
{
	char *out = arg;
	size_t n = strlen(out);

	(void)type;
	(void)exp;
	snprintf(out + n, 256 - n, "%.*s=%.*s,", (int)k.n, (const char *)k.p,
		 (int)v.n, (const char *)v.p);
	return 0;
}

/* Every key=value of keyspace ks, in order, as "k=v,k=v,". */
static const char *scan(struct kvd_store *st, unsigned ks, char out[256])
{
	struct kvd_reader *r = kvd_reader_new(st);
	struct kvd_scan sc = {.limit = 100, .max_bytes = 1 << 20, .ks = ks};
	struct kv_slice next;

	out[0] = '\0';
	if (!r || kvd_reader_scan(r, &sc, NOW, scan_cat, out, &next))
		snprintf(out, 256, "scan failed");
	kvd_reader_free(r);
	return out;
}

static uint64_t count(struct kvd_store *st)
{
	struct kvd_reader *r = kvd_reader_new(st);
	uint64_t n = 999;

	if (!r || kvd_reader_count(r, (struct kv_slice){NULL, 0}, NOW, &n))
		n = 999;
	kvd_reader_free(r);
	return n;
}

/* The same contents, whatever layer holds them. */
static void check_contents(struct kvd_store *st, const char *when)
{
	char b[256];

	CHECK(!strcmp(get(st, 0, 0, "k1", b, sizeof(b)), "plain"), "%s: %s",
	      when, b);
	CHECK(!strcmp(get(st, 0, 'D', "k1", b, sizeof(b)), "doc1"), "%s: %s",
	      when, b);
	CHECK(!strcmp(get(st, 0, 'C', "k1", b, sizeof(b)), ""), "%s: %s", when,
	      b);
	CHECK(!strcmp(get(st, 0, 'D', "k3", b, sizeof(b)), ""), "%s: %s", when,
	      b);
	CHECK(!strcmp(scan(st, 0, b), "k1=plain,"), "%s: %s", when, b);
	CHECK(!strcmp(scan(st, 'D', b), "k1=doc1,k2=doc2,"), "%s: %s", when, b);
	CHECK(!strcmp(scan(st, 'C', b), "a=cat,"), "%s: %s", when, b);
	CHECK(count(st) == 1, "%s: count %llu", when,
	      (unsigned long long)count(st));
}

static void write_contents(struct kvd_store *st)
{
	CHECK(write1(st, 0, KVD_W_PUT, 0, "k1", "plain") == KV_OK, "put");
	CHECK(write1(st, 0, KVD_W_PUT, 'D', "k1", "doc1") == KV_OK, "put D");
	CHECK(write1(st, 0, KVD_W_PUT, 'D', "k2", "doc2") == KV_OK, "put D");
	CHECK(write1(st, 0, KVD_W_PUT, 'D', "k3", "doc3") == KV_OK, "put D");
	CHECK(write1(st, 0, KVD_W_PUT, 'C', "a", "cat") == KV_OK, "put C");
	CHECK(write1(st, 0, KVD_W_PUT, 0, "k0", "gone") == KV_OK, "put");
	/* deletes in one keyspace leave the other's key */
	CHECK(write1(st, 0, KVD_W_DEL, 0, "k0", NULL) == KV_OK, "del");
	CHECK(write1(st, 0, KVD_W_DEL, 'D', "k3", NULL) == KV_OK, "del D");
	CHECK(write1(st, 0, KVD_W_DEL, 'D', "k0", NULL) == KV_OK, "del D");
}

/* The LMDB databases of a closed shard, as "db:key,..." per database. */
static void lmdb_keys(const char *shard_dir, const char *db, char out[256])
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v;

	out[0] = '\0';
	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
	    mdb_env_open(env, shard_dir, MDB_RDONLY, 0640)) {
		snprintf(out, 256, "no env");
		return;
	}
	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
		if (mdb_dbi_open(txn, db, 0, &dbi)) {
			snprintf(out, 256, "no %s", db);
		} else if (mdb_cursor_open(txn, dbi, &c) == 0) {
			for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
			     rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
				snprintf(out + strlen(out), 256 - strlen(out),
					 "%.*s,", (int)k.mv_size,
					 (const char *)k.mv_data);
			mdb_cursor_close(c);
		}
		mdb_txn_abort(txn);
	}
	mdb_env_close(env);
}

/* Keys of every layer stay apart; on disk "kv" holds keyspace 0's raw
 * keys, "kx" the others' after their byte. */
static void t_layers(void)
{
	char dir[300], sd[400], b[256];
	struct kvd_store *st;

	newdir(dir, sizeof(dir), "layers");
	st = open_store(dir, 2);
	write_contents(st);
	check_contents(st, "memtable");
	kvd_store_close(st); /* no checkpoint: the journal replays */
	st = open_store(dir, 2);
	check_contents(st, "replayed");
	CHECK(kvd_shard_checkpoint(st, 0) == 0, "checkpoint");
	check_contents(st, "checkpointed");
	kvd_store_close(st);
	kvd_datadir_shard_path(sd, sizeof(sd), dir, 0);
	lmdb_keys(sd, "kv", b);
	CHECK(!strcmp(b, "k1,"), "kv: %s", b);
	lmdb_keys(sd, "kx", b);
	CHECK(!strcmp(b, "Ca,Dk1,Dk2,"), "kx: %s", b);
	st = open_store(dir, 2);
	check_contents(st, "from LMDB");
	/* over LMDB: a delete in the memtable hides one keyspace only */
	CHECK(write1(st, 0, KVD_W_DEL, 'D', "k2", NULL) == KV_OK, "del");
	CHECK(!strcmp(scan(st, 'D', b), "k1=doc1,"), "%s", b);
	CHECK(!strcmp(get(st, 0, 0, "k1", b, sizeof(b)), "plain"), "%s", b);
	/* FLUSH empties every keyspace, in the memtable and in LMDB */
	CHECK(write1(st, 0, KVD_W_FLUSH, 0, "", NULL) == KV_OK, "flush");
	CHECK(!strcmp(scan(st, 'D', b), ""), "after flush: %s", b);
	CHECK(!strcmp(scan(st, 'C', b), ""), "after flush: %s", b);
	CHECK(!strcmp(scan(st, 0, b), ""), "after flush: %s", b);
	CHECK(kvd_shard_checkpoint(st, 0) == 0, "checkpoint");
	kvd_store_close(st);
	lmdb_keys(sd, "kx", b);
	CHECK(!strcmp(b, ""), "kx after flush: %s", b);
	rm_tree(dir);
}

/* A record as kvd wrote it before keyspaces: u32 klen, u32 vlen, u64
 * expiry, key, value (docs/journal-format.md), type 1 PUT or 2 DEL. */
static uint32_t old_rec(uint8_t *p, const char *key, const char *val)
{
	uint32_t kn = (uint32_t)strlen(key),
		 vn = val ? (uint32_t)strlen(val) : 0;

	memset(p, 0, 16);
	memcpy(p, &kn, 4); /* little-endian, as the format says (x86) */
	memcpy(p + 4, &vn, 4);
	memcpy(p + 16, key, kn);
	if (vn)
		memcpy(p + 16 + kn, val, vn);
	return 16 + kn + vn;
}

/* A directory of the layout before keyspaces: LMDB without "kx", a value
 * in "kv", a journal of old records above the checkpoint. */
static void make_old_layout(const char *dir)
{
	char sd[400];
	struct kvd_store *st = open_store(dir, 1);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi kv, kx;
	MDB_val k = {3, "old"}, v = {4, "\0lmd"};
	struct kvj_opts jo = {.shard_id = 0};
	struct kvj *j;
	uint8_t r1[64], r2[64], r3[64];
	struct kvj_entry e[3] = {
	    {KVJ_PUT, r1, 0}, {KVJ_PUT, r2, 0}, {KVJ_DEL, r3, 0}};

	kvd_store_close(st);
	kvd_datadir_shard_path(sd, sizeof(sd), dir, 0);
	CHECK(mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 8) == 0 &&
		  mdb_env_open(env, sd, 0, 0640) == 0,
	      "env");
	CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0, "txn");
	CHECK(mdb_dbi_open(txn, "kx", 0, &kx) == 0 && mdb_drop(txn, kx, 1) == 0,
	      "drop kx");
	CHECK(mdb_dbi_open(txn, "kv", 0, &kv) == 0 &&
		  mdb_put(txn, kv, &k, &v, 0) == 0,
	      "put");
	CHECK(mdb_txn_commit(txn) == 0, "commit");
	mdb_env_close(env);
	CHECK(kvj_open(sd, &jo, 0, NULL, NULL, NULL, &j) == 0, "journal");
	e[0].len = old_rec(r1, "j1", "one");
	e[1].len = old_rec(r2, "Dj2", "two"); /* a raw key starting 'D' */
	e[2].len = old_rec(r3, "old", NULL);
	CHECK(kvj_append(j, e, 3, NULL) == 0 && kvj_sync(j) == 0, "append");
	kvj_close(j);
}

static void t_old_layout(void)
{
	char dir[300], sd[400], b[256];
	struct kvd_store *st;

	newdir(dir, sizeof(dir), "old");
	make_old_layout(dir);
	kvd_datadir_shard_path(sd, sizeof(sd), dir, 0);
	lmdb_keys(sd, "kx", b);
	CHECK(!strcmp(b, "no kx"), "the old layout has no kx: %s", b);
	st = open_store(dir, 1);
	CHECK(!strcmp(get(st, 0, 0, "j1", b, sizeof(b)), "one"), "%s", b);
	CHECK(!strcmp(get(st, 0, 0, "Dj2", b, sizeof(b)), "two"), "%s", b);
	CHECK(!strcmp(get(st, 0, 'D', "j2", b, sizeof(b)), ""), "%s", b);
	CHECK(!strcmp(get(st, 0, 0, "old", b, sizeof(b)), ""), "%s", b);
	CHECK(!strcmp(scan(st, 0, b), "Dj2=two,j1=one,"), "%s", b);
	CHECK(count(st) == 2, "count");
	CHECK(kvd_shard_checkpoint(st, 0) == 0, "checkpoint");
	kvd_store_close(st);
	lmdb_keys(sd, "kv", b);
	CHECK(!strcmp(b, "Dj2,j1,"), "kv: %s", b);
	lmdb_keys(sd, "kx", b);
	CHECK(!strcmp(b, ""), "kx made empty: %s", b);
	rm_tree(dir);
}

/* A primary's records, as a replica's pull hands them to KVD_W_REPL. */
static void stream(struct kvd_store *from, struct kvd_store *to)
{
	struct kvj_reader *jr;
	struct kv_buf items = {0};
	struct kvd_wop op = {.kind = KVD_W_REPL, .lsn = 1};
	struct kvd_wtxn *t;
	uint64_t lsn;
	uint8_t type;
	const void *pl;
	uint32_t len;

	CHECK(kvd_journal_open(from, 0, 1, &jr) == 0, "journal open");
	while (kvd_journal_next(jr, kvd_shard_pub_lsn(from, 0), &lsn, &type,
				&pl, &len) == 1) {
		kv_buf_append(&items, &type, 1);
		kv_buf_append(&items, &len, 4);
		kv_buf_append(&items, pl, len);
		op.nitems++;
	}
	kvd_journal_close(jr);
	op.items = items.data;
	op.items_len = items.len;
	CHECK(kvd_shard_begin(to, 0, &t) == 0, "begin");
	CHECK(kvd_shard_apply(t, &op, NOW, 1u << 20) == 0 && op.status == 0,
	      "repl apply");
	CHECK(kvd_shard_commit(t, 1) == 0, "commit");
	kv_buf_free(&items);
}

/* A full copy, in chunks small enough to cross from "kv" to "kx". */
static void full_copy(struct kvd_store *from, struct kvd_store *to)
{
	struct kvd_snapshot *sn;
	struct kv_buf chunk = {0}, next = {0}, start = {0};
	unsigned chunks = 0;

	CHECK(kvd_shard_checkpoint(from, 0) == 0, "checkpoint");
	CHECK(kvd_snapshot_begin(from, &sn) == 0, "snapshot");
	CHECK(kvd_shard_repl_reset(to, 0, kvd_snapshot_lsn(sn, 0)) == 0,
	      "reset");
	do {
		chunk.len = 0;
		CHECK(kvd_snapshot_chunk(
			  sn, 0, (struct kv_slice){start.data, start.len}, 1,
			  &chunk, &next) == 0,
		      "chunk");
		CHECK(kvd_shard_repl_load(to, 0, chunk.data, chunk.len) == 0,
		      "load");
		start.len = 0;
		kv_buf_append(&start, next.data, next.len);
		chunks++;
	} while (next.len && chunks < 100);
	CHECK(chunks == 4, "chunks %u", chunks); /* k1, Ca, Dk1, Dk2 */
	kvd_snapshot_end(sn);
	kv_buf_free(&chunk);
	kv_buf_free(&next);
	kv_buf_free(&start);
}

static void t_replication(void)
{
	char a[300], b1[300], b2[300], bk[300], b[256];
	struct kvd_store *p, *r;
	struct kvd_snapshot *sn;
	uint64_t keys = 0, bytes = 0;

	newdir(a, sizeof(a), "primary");
	newdir(b1, sizeof(b1), "streamed");
	newdir(b2, sizeof(b2), "copied");
	newdir(bk, sizeof(bk), "backup");
	p = open_store(a, 1);
	write_contents(p);
	r = open_store(b1, 1);
	stream(p, r);
	check_contents(r, "streamed");
	kvd_store_close(r);
	r = open_store(b1, 1);
	check_contents(r, "streamed, replayed");
	kvd_store_close(r);
	r = open_store(b2, 1);
	full_copy(p, r);
	check_contents(r, "full copy");
	kvd_store_close(r);
	CHECK(kvd_snapshot_begin(p, &sn) == 0, "snapshot");
	CHECK(kvd_snapshot_copy(sn, 0, bk, &keys, &bytes, b, sizeof(b)) == 0,
	      "backup: %s", b);
	kvd_snapshot_end(sn);
	CHECK(keys == 1, "backup keys %llu", (unsigned long long)keys);
	lmdb_keys(bk, "kx", b);
	CHECK(!strcmp(b, "Ca,Dk1,Dk2,"), "backup kx: %s", b);
	kvd_store_close(p);
	rm_tree(a);
	rm_tree(b1);
	rm_tree(b2);
	rm_tree(bk);
}

int main(void)
{
	if (jt_root("kvd-keyspaces"))
		return 1;
	t_layers();
	t_old_layout();
	t_replication();
	return jt_finish();
}
