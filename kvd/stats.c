/* stats.c - STATS: sums of the per-thread counters and per-shard sizes. */
#include "stats.h"

#include <string.h>

#include "committer.h"
#include "kv_mp.h"
#include "loop.h"

struct totals {
	uint64_t calls[KV_OP_MAX], errors[KV_OP_MAX];
	uint64_t bytes_in, bytes_out, accepted, refused, conns;
	uint64_t commits, writes, max_batch, commit_ns, failures, reaped;
};

static void sum(struct kvd_server *srv, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < srv->nio; i++) {
		struct kvd_io_stats *s = &srv->io[i]->stats;

		for (unsigned op = 0; op < KV_OP_MAX; op++) {
			t->calls[op] += kvd_read(&s->calls[op]);
			t->errors[op] += kvd_read(&s->errors[op]);
		}
		t->bytes_in += kvd_read(&s->bytes_in);
		t->bytes_out += kvd_read(&s->bytes_out);
		t->accepted += kvd_read(&s->accepted);
		t->refused += kvd_read(&s->refused);
	}
	t->conns = atomic_load(&srv->nconns);
	for (unsigned i = 0; i < srv->nshards; i++) {
		struct kvd_committer *c = &srv->com[i];
		uint64_t mb = kvd_read(&c->max_batch);

		t->commits += kvd_read(&c->commits);
		t->writes += kvd_read(&c->writes);
		t->commit_ns += kvd_read(&c->commit_ns);
		t->failures += kvd_read(&c->failures);
		t->reaped += kvd_read(&c->reaped);
		if (mb > t->max_batch)
			t->max_batch = mb;
	}
}

static void kv_u(struct kv_buf *b, const char *k, uint64_t v)
{
	kv_mp_cstr(b, k);
	kv_mp_uint(b, v);
}

static void encode_ops(struct kv_buf *b, const struct totals *t)
{
	uint32_t n = 0;

	for (unsigned op = 1; op < KV_OP_MAX; op++)
		n += t->calls[op] != 0;
	kv_mp_cstr(b, "ops");
	kv_mp_map(b, n);
	for (unsigned op = 1; op < KV_OP_MAX; op++) {
		if (!t->calls[op])
			continue;
		kv_mp_cstr(b, kv_op_name(op));
		kv_mp_map(b, 2);
		kv_u(b, "calls", t->calls[op]);
		kv_u(b, "errors", t->errors[op]);
	}
}

static void encode_shards(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;

	kv_mp_cstr(b, "shards");
	kv_mp_array(b, srv->nshards);
	for (unsigned i = 0; i < srv->nshards; i++) {
		struct kvd_shard_stat s;

		kvd_reader_stat(io->reader, i, &s);
		kv_mp_map(b, 6);
		kv_u(b, "entries", s.entries);
		kv_u(b, "expiring", s.expiring);
		kv_u(b, "used_bytes", s.used_bytes);
		kv_u(b, "file_bytes", s.file_bytes);
		kv_u(b, "map_size", s.map_size);
		kv_mp_cstr(b, "failed");
		kv_mp_bool(b, srv->com[i].failed);
	}
}

void kvd_stats_encode(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	struct totals t;

	sum(srv, &t);
	kv_mp_map(b, 18);
	kv_mp_cstr(b, "server");
	kv_mp_cstr(b, "kvd " KVD_VERSION);
	kv_u(b, "uptime_ms", io->now_ms - srv->start_ms);
	kv_u(b, "threads", srv->nio);
	kv_mp_cstr(b, "durability");
	kv_mp_cstr(b, srv->cfg->durability == KVD_DUR_SYNC ? "sync" : "async");
	kv_u(b, "connections", t.conns);
	kv_u(b, "connections_total", t.accepted);
	kv_u(b, "connections_refused", t.refused);
	kv_u(b, "bytes_in", t.bytes_in);
	kv_u(b, "bytes_out", t.bytes_out);
	kv_u(b, "commits", t.commits);
	kv_u(b, "writes", t.writes);
	kv_mp_cstr(b, "avg_batch");
	kv_mp_double(b, t.commits ? (double)t.writes / (double)t.commits : 0.0);
	kv_u(b, "max_batch", t.max_batch);
	kv_mp_cstr(b, "commit_seconds");
	kv_mp_double(b, (double)t.commit_ns / 1e9);
	kv_u(b, "commit_failures", t.failures);
	kv_u(b, "expired_reaped", t.reaped);
	encode_ops(b, &t);
	encode_shards(io, b);
}
