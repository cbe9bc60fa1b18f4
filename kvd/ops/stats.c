/* stats.c - STATS and INFO: sums of the per-thread counters and per-shard
 * sizes, as a msgpack map (native STATS) or Redis's INFO text (RESP). */
#include "stats.h"

#include "kv_status.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "net/auth.h"
#include "kv_mp.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "resp/resp.h"
#include "store.h"

void kvd_stats_sum(struct kvd_server *srv, struct kvd_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < srv->nio; i++) {
		struct kvd_io_stats *s = &srv->io[i]->stats;

		for (unsigned op = 0; op < KV_OP_MAX; op++) {
			for (unsigned st = 0; st < KVD_NSTATUS; st++) {
				uint64_t n = kvd_read(&s->replies[op][st]);

				t->calls[op] += n;
				if (st >= KV_MALFORMED)
					t->errors[op] += n;
			}
		}
		t->bytes_in += kvd_read(&s->bytes_in);
		t->bytes_out += kvd_read(&s->bytes_out);
		t->accepted += kvd_read(&s->accepted);
		t->refused += kvd_read(&s->refused);
		t->resp_calls += kvd_read(&s->resp_calls);
		t->resp_errors += kvd_read(&s->resp_errors);
		t->write_pauses += kvd_read(&s->write_pauses);
		t->preauth_closed += kvd_read(&s->preauth_closed);
		t->tls_hs += kvd_read(&s->tls_hs_now);
		t->tls_hs_pauses += kvd_read(&s->tls_hs_pauses);
		if (kvd_read(&s->tls_hs_peak) > t->tls_hs_peak)
			t->tls_hs_peak = kvd_read(&s->tls_hs_peak);
	}
	t->conns = atomic_load(&srv->nconns);
	for (unsigned i = 0; i < srv->nshards; i++) {
		struct kvd_commit_stats *c = kvd_commit_stats(srv->com, i);
		uint64_t mb = kvd_read(&c->max_batch);

		t->commits += kvd_read(&c->commits);
		t->writes += kvd_read(&c->writes);
		t->commit_ns += kvd_read(&c->commit_ns);
		t->failures += kvd_read(&c->failures);
		t->reaped += kvd_read(&c->reaped);
		t->inline_commits += kvd_read(&c->inline_batches);
		t->ring_flushes += kvd_read(&c->ring_flushes);
		if (mb > t->max_batch)
			t->max_batch = mb;
	}
}

static void kv_u(struct kv_buf *b, const char *k, uint64_t v)
{
	kv_mp_cstr(b, k);
	kv_mp_uint(b, v);
}

static void encode_ops(struct kv_buf *b, const struct kvd_totals *t)
{
	uint32_t n = 0;

	/* (a number no op has is counted as op 0, unknown: cmdparse.c) */
	for (unsigned op = 1; op < KV_OP_MAX; op++)
		n += t->calls[op] != 0 && kv_op_name(op);
	kv_mp_cstr(b, "ops");
	kv_mp_map(b, n);
	for (unsigned op = 1; op < KV_OP_MAX; op++) {
		if (!t->calls[op] || !kv_op_name(op))
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
		kv_mp_map(b, 18);
		kv_u(b, "entries", s.entries);
		kv_u(b, "expiring", s.expiring);
		kv_u(b, "used_bytes", s.used_bytes);
		kv_u(b, "file_bytes", s.file_bytes);
		kv_u(b, "map_size", s.map_size);
		kv_u(b, "memtable_bytes", s.memtable_bytes);
		kv_u(b, "memtable_spare_bytes", s.memtable_spare);
		kv_u(b, "memtable_size", s.memtable_size);
		kv_u(b, "journal_bytes", s.journal_bytes);
		kv_u(b, "journal_fsyncs", s.journal_fsyncs);
		kv_u(b, "journal_spares_ahead", s.spares_ahead);
		kv_u(b, "journal_spares_inline", s.spares_inline);
		kv_u(b, "journal_spares", s.spares_held);
		kv_u(b, "checkpoints", s.checkpoints);
		kv_u(b, "checkpoint_us", s.checkpoint_ns / 1000);
		kv_u(b, "checkpoint_lsn", s.checkpoint_lsn);
		kv_u(b, "checkpoint_waits", s.backpressure);
		kv_mp_cstr(b, "failed");
		kv_mp_bool(b, kvd_commit_failed(srv->com, i) ||
				  s.checkpoint_failed);
	}
}

/* "replication": the role, the offset, and how far behind: a replica's
 * lag behind its primary, a primary's largest among its replicas. */
static void stats_repl(struct kvd_server *srv, struct kv_buf *b)
{
	struct kvd_repl_stat rs;

	kvd_repl_stat(srv, &rs);
	kv_mp_cstr(b, "replication");
	kv_mp_map(b, 8);
	kv_mp_cstr(b, "role");
	kv_mp_cstr(b, rs.replica ? "replica" : "primary");
	kv_u(b, "replicas", rs.replicas);
	kv_u(b, "offset", rs.offset);
	kv_u(b, "lag_records", rs.lag_records);
	kv_u(b, "lag_ms", rs.lag_ms);
	kv_u(b, "sync_full", rs.syncs_full);
	kv_u(b, "sync_partial_ok", rs.syncs_partial_ok);
	kv_u(b, "sync_partial_err", rs.syncs_partial_err);
}

void kvd_stats_encode(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	struct kvd_totals t;

	kvd_stats_sum(srv, &t);
	kv_mp_map(b, 28);
	kv_mp_cstr(b, "server"); /* first: kvcli stats prints it first */
	kv_mp_cstr(b, "kvd " KVD_VERSION);
	kv_u(b, "uptime_ms", io->now_ms - srv->start_ms);
	kv_u(b, "threads", srv->nio);
	kv_mp_cstr(b, "durability");
	kv_mp_cstr(b, kvd_durability_name(srv->cfg->durability));
	kv_u(b, "connections", t.conns);
	kv_u(b, "connections_total", t.accepted);
	kv_u(b, "connections_refused", t.refused);
	kv_u(b, "auth_failures", kvd_auth_failures());
	kv_u(b, "auth_limited", kvd_auth_limited());
	kv_u(b, "bytes_in", t.bytes_in);
	kv_u(b, "bytes_out", t.bytes_out);
	kv_u(b, "commits", t.commits);
	kv_u(b, "writes", t.writes);
	kv_mp_cstr(b, "avg_batch");
	kv_mp_double(b, t.commits ? (double)t.writes / (double)t.commits : 0.0);
	kv_u(b, "max_batch", t.max_batch);
	kv_mp_cstr(b, "commit_seconds");
	kv_mp_double(b, (double)t.commit_ns / 1e9);
	kv_u(b, "inline_commits", t.inline_commits);
	kv_u(b, "ring_flushes", t.ring_flushes);
	kv_u(b, "commit_failures", t.failures);
	kv_u(b, "expired_reaped", t.reaped);
	kv_u(b, "write_backpressure", t.write_pauses);
	kv_u(b, "preauth_closed", t.preauth_closed);
	kv_u(b, "tls_handshakes", t.tls_hs);
	kv_u(b, "tls_handshakes_peak", t.tls_hs_peak);
	kv_u(b, "tls_handshake_pauses", t.tls_hs_pauses);
	encode_ops(b, &t);
	encode_shards(io, b);
	stats_repl(srv, b);
}

/* ===================== INFO (Redis's text format) ===================== */

void kvd_info_line(struct kv_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp) - 2, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(tmp) - 3)
		n = (int)sizeof(tmp) - 3;
	memcpy(tmp + n, "\r\n", 2);
	kv_buf_append(b, tmp, (size_t)n + 2);
}

/* ===================== run_id, CONFIG RESETSTAT ===================== */

static pthread_once_t run_id_once = PTHREAD_ONCE_INIT;
static char run_id[41];

/* 40 hex digits, random per process start, as Redis's (Sentinel tells
 * a restarted server from a running one by it). */
static void make_run_id(void)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[20];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		uint64_t seed[3];

		clock_gettime(CLOCK_REALTIME, &ts);
		seed[0] = (uint64_t)ts.tv_sec;
		seed[1] = (uint64_t)ts.tv_nsec;
		seed[2] = (uint64_t)getpid();
		for (unsigned i = 0; i < sizeof(r); i += 8) {
			uint64_t h =
			    XXH3_64bits_withSeed(seed, sizeof(seed), i);

			memcpy(r + i, &h,
			       sizeof(r) - i < 8 ? sizeof(r) - i : 8);
		}
	}
	for (unsigned i = 0; i < sizeof(r); i++) {
		run_id[2 * i] = hex[r[i] >> 4];
		run_id[2 * i + 1] = hex[r[i] & 15];
	}
}

const char *kvd_run_id(void)
{
	pthread_once(&run_id_once, make_run_id);
	return run_id;
}

/* CONFIG RESETSTAT keeps the counters at reset, and INFO stats shows
 * what came since: the counters themselves are single-writer (kvd_count)
 * and stay monotonic for STATS and /metrics. */
static pthread_mutex_t base_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvd_totals base;
static uint64_t base_auth, base_psclosed;
static uint64_t base_syncs[3]; /* full, partial ok, partial err */

void kvd_stats_reset(struct kvd_server *srv)
{
	struct kvd_totals t;
	struct kvd_repl_stat rs;
	uint64_t ch, pat, closed;

	kvd_stats_sum(srv, &t);
	kvd_resp_pubsub_stats(srv, &ch, &pat, &closed);
	kvd_repl_stat(srv, &rs);
	pthread_mutex_lock(&base_lock);
	base = t;
	base_syncs[0] = rs.syncs_full;
	base_syncs[1] = rs.syncs_partial_ok;
	base_syncs[2] = rs.syncs_partial_err;
	base_auth = kvd_auth_failures();
	base_psclosed = closed;
	pthread_mutex_unlock(&base_lock);
}

/* t less the counters at the last CONFIG RESETSTAT. */
static void since_reset(struct kvd_totals *t, uint64_t *auth,
			uint64_t *psclosed, uint64_t *syncs)
{
	pthread_mutex_lock(&base_lock);
	for (unsigned op = 0; op < KV_OP_MAX; op++) {
		t->calls[op] -= base.calls[op];
		t->errors[op] -= base.errors[op];
	}
	t->accepted -= base.accepted;
	t->refused -= base.refused;
	t->bytes_in -= base.bytes_in;
	t->bytes_out -= base.bytes_out;
	t->reaped -= base.reaped;
	t->resp_calls -= base.resp_calls;
	t->resp_errors -= base.resp_errors;
	t->write_pauses -= base.write_pauses;
	t->preauth_closed -= base.preauth_closed;
	*auth -= base_auth;
	*psclosed -= base_psclosed;
	for (unsigned k = 0; k < 3; k++)
		syncs[k] -= base_syncs[k];
	pthread_mutex_unlock(&base_lock);
}

static void info_server(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	uint64_t up = (io->now_ms - srv->start_ms) / 1000;
	struct utsname u;

	if (uname(&u))
		memset(&u, 0, sizeof(u));
	kvd_info_line(b, "# Server");
	kvd_info_line(b,
		      "redis_version:7.0.0"); /* the command set kvd follows */
	kvd_info_line(b, "kvd_version:%s", KVD_VERSION);
	kvd_info_line(b, "redis_mode:standalone");
	kvd_info_line(b, "os:%s %s %s", u.sysname, u.release, u.machine);
	kvd_info_line(b, "arch_bits:%u", (unsigned)(sizeof(void *) * 8));
	kvd_info_line(b, "process_id:%ld", (long)getpid());
	kvd_info_line(b, "run_id:%s", kvd_run_id());
	kvd_info_line(b, "tcp_port:%u", srv->resp_port);
	kvd_info_line(b, "uptime_in_seconds:%llu", (unsigned long long)up);
	kvd_info_line(b, "uptime_in_days:%llu", (unsigned long long)up / 86400);
	kvd_info_line(b, "io_threads_active:%u", srv->nio);
	kvd_info_line(b, "kvd_shards:%u", srv->nshards);
	/* a replica given this server's RESP port (REPLICAOF, Sentinel)
	 * reads these to reach the native port replication speaks */
	kvd_info_line(b, "kvd_native_port:%u", srv->port);
	kvd_info_line(b, "kvd_native_tls_port:%u", srv->cfg->tls_port);
	kvd_info_line(b, "config_file:%s", srv->cfg->config_file);
}

/* Redis's save fields, for tools that wait on a BGSAVE: kvd's "save" is
 * a checkpoint of every shard (resp_save.c). */
static void info_saves(struct kvd_server *srv, struct kv_buf *b)
{
	int failed = 0;
	uint64_t last = srv->com ? kvd_committers_lastsave(srv->com, &failed)
				 : srv->start_ms;

	kvd_info_line(b, "rdb_bgsave_in_progress:%d",
		      srv->com ? kvd_committers_saving(srv->com) : 0);
	kvd_info_line(b, "rdb_last_save_time:%llu",
		      (unsigned long long)(last / 1000));
	kvd_info_line(b, "rdb_last_bgsave_status:%s", failed ? "err" : "ok");
}

static void info_persistence(struct kvd_io *io, const struct kvd_totals *t,
			     struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	uint64_t used = 0, file = 0, jbytes = 0, fsyncs = 0, ckpts = 0;
	uint64_t mem = 0, waits = 0;

	for (unsigned i = 0; i < srv->nshards; i++) {
		struct kvd_shard_stat s;

		if (kvd_reader_stat(io->reader, i, &s) == 0) {
			used += s.used_bytes;
			file += s.file_bytes;
			jbytes += s.journal_bytes;
			fsyncs += s.journal_fsyncs;
			ckpts += s.checkpoints;
			mem += s.memtable_bytes;
			waits += s.backpressure;
		}
	}
	kvd_info_line(b, "# Persistence");
	kvd_info_line(b, "loading:0");
	info_saves(srv, b);
	kvd_info_line(b, "aof_enabled:0");
	kvd_info_line(b, "aof_rewrite_in_progress:0");
	kvd_info_line(b, "kvd_durability:%s",
		      kvd_durability_name(srv->cfg->durability));
	kvd_info_line(b, "kvd_commits:%llu", (unsigned long long)t->commits);
	kvd_info_line(b, "kvd_writes:%llu", (unsigned long long)t->writes);
	kvd_info_line(b, "kvd_avg_batch:%.2f",
		      t->commits ? (double)t->writes / (double)t->commits
				 : 0.0);
	kvd_info_line(b, "kvd_max_batch:%llu",
		      (unsigned long long)t->max_batch);
	kvd_info_line(b, "kvd_commit_seconds:%.3f", (double)t->commit_ns / 1e9);
	kvd_info_line(b, "kvd_commit_failures:%llu",
		      (unsigned long long)t->failures);
	kvd_info_line(b, "kvd_used_bytes:%llu", (unsigned long long)used);
	kvd_info_line(b, "kvd_file_bytes:%llu", (unsigned long long)file);
	kvd_info_line(b, "kvd_journal_bytes:%llu", (unsigned long long)jbytes);
	kvd_info_line(b, "kvd_journal_fsyncs:%llu", (unsigned long long)fsyncs);
	kvd_info_line(b, "kvd_memtable_bytes:%llu", (unsigned long long)mem);
	kvd_info_line(b, "kvd_checkpoints:%llu", (unsigned long long)ckpts);
	kvd_info_line(b, "kvd_checkpoint_waits:%llu",
		      (unsigned long long)waits);
}

static void info_stats(struct kvd_io *io, struct kvd_totals t0,
		       struct kv_buf *b)
{
	struct kvd_totals *t = &t0;
	uint64_t calls = 0, errors = 0, auth = kvd_auth_failures();
	uint64_t ch, pat, psclosed, syncs[3];
	struct kvd_repl_stat rs;

	kvd_resp_pubsub_stats(io->srv, &ch, &pat, &psclosed);
	kvd_repl_stat(io->srv, &rs);
	syncs[0] = rs.syncs_full;
	syncs[1] = rs.syncs_partial_ok;
	syncs[2] = rs.syncs_partial_err;
	since_reset(t, &auth, &psclosed, syncs);
	for (unsigned op = 1; op < KV_OP_MAX; op++) {
		calls += t->calls[op];
		errors += t->errors[op];
	}
	kvd_info_line(b, "# Stats");
	kvd_info_line(b, "total_connections_received:%llu",
		      (unsigned long long)t->accepted);
	kvd_info_line(b, "total_commands_processed:%llu",
		      (unsigned long long)(calls + t->resp_calls));
	kvd_info_line(b, "total_net_input_bytes:%llu",
		      (unsigned long long)t->bytes_in);
	kvd_info_line(b, "total_net_output_bytes:%llu",
		      (unsigned long long)t->bytes_out);
	kvd_info_line(b, "rejected_connections:%llu",
		      (unsigned long long)t->refused);
	kvd_info_line(b, "acl_access_denied_auth:%llu",
		      (unsigned long long)auth);
	kvd_info_line(b, "sync_full:%llu", (unsigned long long)syncs[0]);
	kvd_info_line(b, "sync_partial_ok:%llu", (unsigned long long)syncs[1]);
	kvd_info_line(b, "sync_partial_err:%llu", (unsigned long long)syncs[2]);
	kvd_info_line(b, "expired_keys:%llu", (unsigned long long)t->reaped);
	kvd_info_line(b, "pubsub_channels:%llu", (unsigned long long)ch);
	kvd_info_line(b, "pubsub_patterns:%llu", (unsigned long long)pat);
	kvd_info_line(b, "client_output_buffer_limit_disconnections:%llu",
		      (unsigned long long)psclosed);
	kvd_info_line(b, "total_error_replies:%llu",
		      (unsigned long long)(errors + t->resp_errors));
	kvd_info_line(b, "kvd_native_commands:%llu", (unsigned long long)calls);
	kvd_info_line(b, "kvd_resp_commands:%llu",
		      (unsigned long long)t->resp_calls);
	kvd_info_line(b, "kvd_write_backpressure:%llu",
		      (unsigned long long)t->write_pauses);
	kvd_info_line(b, "kvd_preauth_closed:%llu",
		      (unsigned long long)t->preauth_closed);
}

static void info_keyspace(struct kvd_io *io, struct kv_buf *b)
{
	struct kv_slice none = {NULL, 0};
	uint64_t keys = 0, expires = 0;

	kvd_reader_count(io->reader, none, io->now_ms, &keys);
	for (unsigned i = 0; i < io->srv->nshards; i++) {
		struct kvd_shard_stat s;

		if (kvd_reader_stat(io->reader, i, &s) == 0)
			expires += s.expiring; /* index entries: an estimate */
	}
	if (expires > keys)
		expires = keys;
	kvd_info_line(b, "# Keyspace");
	if (keys)
		kvd_info_line(b, "db0:keys=%llu,expires=%llu,avg_ttl=0",
			      (unsigned long long)keys,
			      (unsigned long long)expires);
}

void kvd_stats_info(struct kvd_io *io, unsigned sections, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	struct kvd_totals t;
	int first = 1;

	kvd_stats_sum(srv, &t);
	for (unsigned s = KVD_INFO_SERVER; s <= KVD_INFO_KEYSPACE; s <<= 1) {
		if (!(sections & s))
			continue;
		if (!first)
			kv_buf_append(b, "\r\n", 2);
		first = 0;
		switch (s) {
		case KVD_INFO_SERVER: info_server(io, b); break;
		case KVD_INFO_CLIENTS:
			kvd_info_line(b, "# Clients");
			kvd_info_line(b, "connected_clients:%llu",
				      (unsigned long long)t.conns);
			kvd_info_line(b, "maxclients:%u",
				      KVD_LIVE(srv->cfg->max_clients));
			kvd_info_line(b, "blocked_clients:0");
			kvd_info_line(b, "kvd_tls_handshakes:%llu",
				      (unsigned long long)t.tls_hs);
			kvd_info_line(b, "kvd_tls_handshakes_peak:%llu",
				      (unsigned long long)t.tls_hs_peak);
			kvd_info_line(b, "kvd_tls_handshake_pauses:%llu",
				      (unsigned long long)t.tls_hs_pauses);
			break;
		case KVD_INFO_PERSISTENCE: info_persistence(io, &t, b); break;
		case KVD_INFO_STATS: info_stats(io, t, b); break;
		default: info_keyspace(io, b); break;
		}
	}
}
