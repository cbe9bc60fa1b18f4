/* server.c - the server's parts wired together: the store opened with the
 * server's hook (WATCH), and the committers started with theirs (a
 * request goes back to its io thread, through replication's WAIT;
 * keyspace events).  main.c starts the server with these, and so does the
 * dispatch fuzzer (tests/fuzz/fuzz_dispatch.c), which stands in for the
 * io loop only. */
#include "kvd.h"

#include "doc/doc.h"
#include "doc/hash.h"
#include "keyspace.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp/resp.h"

/* The merge operations the store's committers run (store.h): hashes',
 * then documents' from KVDOC_MERGE_BASE on. */
static struct kvh_limits hash_limits;
static struct kvd_merge_op merge_ops[KVD_MERGE_MAX];
_Static_assert(KVH_NOPS <= KVDOC_MERGE_BASE &&
		   KVDOC_MERGE_BASE + KVDOC_NOPS <= KVD_MERGE_MAX,
	       "merge ids overlap");

int kvd_server_open_store(struct kvd_server *srv, char *err, size_t errlen)
{
	struct kvd_config *cfg = srv->cfg;
	struct kvd_store_opts o = {
	    .dir = cfg->data_dir,
	    .want_shards = cfg->shards ? cfg->shards : cfg->threads,
	    .exact_shards = cfg->shards != 0,
	    .map_size = cfg->map_size,
	    .max_readers = cfg->threads + 126,
	    .memtable_size = cfg->memtable_size,
	    .checkpoint_interval_ms = cfg->checkpoint_interval_ms,
	    .segment_size = cfg->journal_segment_size,
	    .truncate_corrupt = cfg->journal_truncate_corrupt,
	    .stored = kvd_watch_touch,
	    .merge = merge_ops,
	    .nmerge = KVD_MERGE_MAX,
	};

	hash_limits.max_fields = cfg->max_hash_fields;
	hash_limits.max_bytes = cfg->max_hash_bytes;
	kvh_register(merge_ops, &hash_limits);
	kvdoc_register(merge_ops);
	if (kvd_store_open(&srv->store, &o, err, errlen))
		return -1;
	srv->nshards = kvd_store_nshards(srv->store);
	return 0;
}

/* ---- the committers' hooks (shard.h) ---- */

static void complete(void *arg, struct kvd_wreq *w)
{
	(void)arg;
	kvd_io_complete(w->io, w);
}

static void committed(void *arg, unsigned shard, struct kvd_wreq *list)
{
	kvd_repl_committed(arg, shard, list);
}

static int follower(void *arg)
{
	(void)arg;
	return kvd_repl_is_replica();
}

static void applied(void *arg, unsigned shard, const struct kvd_wop *op)
{
	struct kvd_server *srv = arg;

	kvd_keyspace_op(srv->cfg, shard, op);
}

static void reaped(void *arg, unsigned shard, const struct kvd_wtxn *t,
		   size_t from)
{
	struct kvd_server *srv = arg;

	kvd_keyspace_reaped(srv->cfg, shard, t, from);
}

static void publish(void *arg, const uint8_t *failed)
{
	struct kvd_server *srv = arg;

	kvd_keyspace_publish(srv->cfg, failed);
}

static void drop(void *arg)
{
	(void)arg;
	kvd_keyspace_drop();
}

static void forget(void *arg, unsigned shard)
{
	(void)arg;
	kvd_keyspace_forget(shard);
}

static void *ring_flush(void *arg, int fd, int fault, void *cookie)
{
	(void)arg;
	return kvd_io_jring_flush(fd, fault, cookie);
}

static unsigned ring_conns(void *arg)
{
	struct kvd_io *io = kvd_io_self();

	(void)arg;
	return io ? atomic_load(&io->nconns) : 0;
}

static void ring_wait(void *arg, void *ring)
{
	(void)arg;
	kvd_io_jring_wait(ring);
}

static int ring_here(void *arg)
{
	(void)arg;
	return kvd_io_jring_here();
}

int kvd_server_start_committers(struct kvd_server *srv)
{
	struct kvd_commit_opts o = {
	    .store = srv->store,
	    .async = srv->cfg->durability == KVD_DUR_ASYNC,
	    .max_value = srv->cfg->max_value,
	    .reap_interval_ms = &srv->cfg->reaper_interval_ms,
	    .flush_interval_ms = &srv->cfg->flush_interval_ms,
	    .start_ms = srv->start_ms,
	    .ring = srv->cfg->durability != KVD_DUR_SYNC	? KVD_RING_OFF
		    : srv->cfg->io_thread_flush == KVD_IOF_RING ? KVD_RING_ON
		    : srv->cfg->io_thread_flush == KVD_IOF_INLINE
			? KVD_RING_INLINE
		    : srv->cfg->io_thread_flush == KVD_IOF_AUTO ? KVD_RING_AUTO
								: KVD_RING_OFF,
	    .hooks = {.arg = srv,
		      .complete = complete,
		      .committed = committed,
		      .follower = follower,
		      .applied = applied,
		      .reaped = reaped,
		      .publish = publish,
		      .drop = drop,
		      .forget = forget,
		      .ring_flush = ring_flush,
		      .ring_wait = ring_wait,
		      .ring_here = ring_here,
		      .ring_conns = ring_conns},
	};

	return kvd_committers_start(&srv->com, &o);
}
