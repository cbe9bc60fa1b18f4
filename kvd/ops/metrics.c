/* metrics.c - the Prometheus endpoint: a minimal HTTP/1.1 responder for
 * GET /metrics (and HEAD) and the text exposition format (version 0.0.4).
 *
 * One request per connection (Connection: close), answered from the same
 * per-thread counters as STATS and INFO.  Names follow Prometheus
 * conventions: a kvd_ prefix, base units (seconds, bytes), _total for
 * counters, histograms with cumulative le buckets.
 */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/auth.h"
#include "net/conn.h"
#include "kv_status.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "stats.h"
#include "store.h"

#define HTTP_MAX_REQUEST 8192

static const uint64_t lat_bounds_us[] = {KVD_LAT_BOUNDS_US};

static void out(struct kv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void out(struct kv_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || kv_buf_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void head(struct kv_buf *b, const char *name, const char *type,
		 const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ===================== Requests ===================== */

static void requests(struct kvd_server *srv, struct kv_buf *b)
{
	head(b, "kvd_requests_total", "counter",
	     "Native protocol requests answered, by operation and status.");
	for (unsigned op = 1; op < KV_OP_MAX; op++) {
		for (unsigned st = 0; st < KVD_NSTATUS; st++) {
			uint64_t n = 0;

			for (unsigned i = 0; i < srv->nio; i++)
				n += kvd_read(
				    &srv->io[i]->stats.replies[op][st]);
			if (n)
				out(b,
				    "kvd_requests_total{op=\"%s\",status=\"%"
				    "s\"} %llu\n",
				    kv_op_name(op),
				    kv_status_name((int)st)
					? kv_status_name((int)st)
					: "OTHER",
				    (unsigned long long)n);
		}
	}
}

/* One histogram series from per-bucket counts (made cumulative here). */
static void histogram(struct kv_buf *b, const char *name, const char *labels,
		      const uint64_t *counts, unsigned nb, const double *bounds,
		      double sum)
{
	uint64_t cum = 0;

	for (unsigned i = 0; i < nb; i++) {
		cum += counts[i];
		if (i + 1 < nb)
			out(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
			    *labels ? "," : "", bounds[i],
			    (unsigned long long)cum);
		else
			out(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name,
			    labels, *labels ? "," : "",
			    (unsigned long long)cum);
	}
	out(b, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, labels, sum, name,
	    labels, (unsigned long long)cum);
}

static void latencies(struct kvd_server *srv, struct kv_buf *b)
{
	double bounds[KVD_LAT_BUCKETS];

	for (unsigned i = 0; i + 1 < KVD_LAT_BUCKETS; i++)
		bounds[i] = (double)lat_bounds_us[i] / 1e6;
	head(b, "kvd_request_duration_seconds", "histogram",
	     "Time from a request's arrival to its reply, by operation.");
	for (unsigned op = 1; op < KV_OP_MAX; op++) {
		uint64_t counts[KVD_LAT_BUCKETS] = {0}, ns = 0, any = 0;
		char labels[64];

		for (unsigned i = 0; i < srv->nio; i++) {
			struct kvd_io_stats *s = &srv->io[i]->stats;

			for (unsigned j = 0; j < KVD_LAT_BUCKETS; j++) {
				counts[j] += kvd_read(&s->lat[op][j]);
				any += counts[j];
			}
			ns += kvd_read(&s->lat_ns[op]);
		}
		if (!any)
			continue;
		snprintf(labels, sizeof(labels), "op=\"%s\"", kv_op_name(op));
		histogram(b, "kvd_request_duration_seconds", labels, counts,
			  KVD_LAT_BUCKETS, bounds, (double)ns / 1e9);
	}
}

/* ===================== Commits and shards ===================== */

/* A per-shard histogram kept in each committer: its bucket counters start
 * at hist_off, its sum (divided by scale) is the counter at sum_off. */
static void shard_histogram(struct kvd_server *srv, struct kv_buf *b,
			    const char *name, const char *help, size_t hist_off,
			    unsigned nb, const double *bounds, size_t sum_off,
			    double scale)
{
	head(b, name, "histogram", help);
	for (unsigned s = 0; s < srv->nshards; s++) {
		char *base = (char *)kvd_commit_stats(srv->com, s);
		kvd_counter *hist = (kvd_counter *)(base + hist_off);
		uint64_t counts[KVD_LAT_BUCKETS > KVD_BATCH_BUCKETS
				    ? KVD_LAT_BUCKETS
				    : KVD_BATCH_BUCKETS];
		char labels[32];

		for (unsigned j = 0; j < nb; j++)
			counts[j] = kvd_read(&hist[j]);
		snprintf(labels, sizeof(labels), "shard=\"%u\"", s);
		histogram(b, name, labels, counts, nb, bounds,
			  (double)kvd_read((kvd_counter *)(base + sum_off)) /
			      scale);
	}
}

static void commits(struct kvd_server *srv, struct kv_buf *b)
{
	double lat[KVD_LAT_BUCKETS], batch[KVD_BATCH_BUCKETS];
	struct {
		const char *name, *help;
		size_t off;
	} ctr[] = {
	    {"kvd_commits_total",
	     "Batches appended to the journal (group commits).",
	     offsetof(struct kvd_commit_stats, commits)},
	    {"kvd_committed_writes_total",
	     "Write requests (per shard part) committed.",
	     offsetof(struct kvd_commit_stats, writes)},
	    {"kvd_inline_commits_total",
	     "Batches an io thread committed itself, without the committer.",
	     offsetof(struct kvd_commit_stats, inline_batches)},
	    {"kvd_ring_flushes_total",
	     "Of those (sync mode), the batches whose journal flush went "
	     "through the io thread's ring rather than its own fdatasync.",
	     offsetof(struct kvd_commit_stats, ring_flushes)},
	    {"kvd_commit_failures_total", "Batches whose commit failed.",
	     offsetof(struct kvd_commit_stats, failures)},
	    {"kvd_expired_keys_total", "Expired keys reclaimed.",
	     offsetof(struct kvd_commit_stats, reaped)},
	};

	for (unsigned i = 0; i + 1 < KVD_LAT_BUCKETS; i++)
		lat[i] = (double)lat_bounds_us[i] / 1e6;
	for (unsigned i = 0; i + 1 < KVD_BATCH_BUCKETS; i++)
		batch[i] = (double)(1u << i);
	for (size_t k = 0; k < sizeof(ctr) / sizeof(ctr[0]); k++) {
		head(b, ctr[k].name, "counter", ctr[k].help);
		for (unsigned s = 0; s < srv->nshards; s++)
			out(b, "%s{shard=\"%u\"} %llu\n", ctr[k].name, s,
			    (unsigned long long)kvd_read(
				(kvd_counter *)((char *)kvd_commit_stats(
						    srv->com, s) +
						ctr[k].off)));
	}
	shard_histogram(srv, b, "kvd_commit_duration_seconds",
			"Time to append a batch to the journal (its fdatasync "
			"included in sync mode), by shard.",
			offsetof(struct kvd_commit_stats, commit_hist),
			KVD_LAT_BUCKETS, lat,
			offsetof(struct kvd_commit_stats, commit_ns), 1e9);
	shard_histogram(srv, b, "kvd_commit_batch_size",
			"Write requests carried by one commit (group commit), "
			"by shard.",
			offsetof(struct kvd_commit_stats, batch_hist),
			KVD_BATCH_BUCKETS, batch,
			offsetof(struct kvd_commit_stats, writes), 1);
}

static void shards(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	struct kvd_shard_stat st[KVD_MAX_SHARDS];
	unsigned n = srv->nshards;
	struct {
		const char *name, *help;
		size_t off;
		const char *type;
	} g[] = {
	    {"kvd_shard_keys",
	     "Keys stored (expired ones not yet reclaimed included).",
	     offsetof(struct kvd_shard_stat, entries)},
	    {"kvd_shard_expiring_keys", "Entries in the expiry index.",
	     offsetof(struct kvd_shard_stat, expiring)},
	    {"kvd_shard_used_bytes", "Bytes of LMDB pages in use.",
	     offsetof(struct kvd_shard_stat, used_bytes)},
	    {"kvd_shard_file_bytes", "Size of the shard's data file.",
	     offsetof(struct kvd_shard_stat, file_bytes)},
	    {"kvd_shard_map_bytes", "The shard's map size (its size limit).",
	     offsetof(struct kvd_shard_stat, map_size)},
	    {"kvd_shard_memtable_bytes",
	     "Bytes of writes held in memory until their checkpoint (active "
	     "and frozen memtables).",
	     offsetof(struct kvd_shard_stat, memtable_bytes)},
	    {"kvd_shard_memtable_spare_bytes",
	     "Bytes of arena chunks a checkpointed memtable left for the next "
	     "one (given back after a second without writes).",
	     offsetof(struct kvd_shard_stat, memtable_spare)},
	    {"kvd_shard_memtable_size_bytes",
	     "Where the active memtable is frozen for its checkpoint "
	     "(memtable-size, or what auto made of it).",
	     offsetof(struct kvd_shard_stat, memtable_size)},
	    {"kvd_shard_journal_bytes_total", "Bytes appended to the journal.",
	     offsetof(struct kvd_shard_stat, journal_bytes), "counter"},
	    {"kvd_shard_journal_fsyncs_total", "Flushes of the journal.",
	     offsetof(struct kvd_shard_stat, journal_fsyncs), "counter"},
	    {"kvd_shard_journal_spares_ahead_total",
	     "Journal segments made ahead of need by a helper thread.",
	     offsetof(struct kvd_shard_stat, spares_ahead), "counter"},
	    {"kvd_shard_journal_spares",
	     "Spare journal segments ready for the next one (0 while a "
	     "helper makes one).",
	     offsetof(struct kvd_shard_stat, spares_held)},
	    {"kvd_shard_journal_spares_inline_total",
	     "Journal segments the committer had to make itself, stalling "
	     "the shard's writes while it did.",
	     offsetof(struct kvd_shard_stat, spares_inline), "counter"},
	    {"kvd_shard_checkpoints_total",
	     "Checkpoints of a memtable into LMDB.",
	     offsetof(struct kvd_shard_stat, checkpoints), "counter"},
	    {"kvd_shard_checkpoint_lsn", "The last checkpoint's journal LSN.",
	     offsetof(struct kvd_shard_stat, checkpoint_lsn)},
	    {"kvd_shard_checkpoint_waits_total",
	     "Batches that waited for a checkpoint to end (backpressure).",
	     offsetof(struct kvd_shard_stat, backpressure), "counter"},
	};

	for (unsigned s = 0; s < n; s++)
		kvd_reader_stat(io->reader, s, &st[s]);
	for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		head(b, g[k].name, g[k].type ? g[k].type : "gauge", g[k].help);
		for (unsigned s = 0; s < n; s++)
			out(b, "%s{shard=\"%u\"} %llu\n", g[k].name, s,
			    (unsigned long long)*(uint64_t *)((char *)&st[s] +
							      g[k].off));
	}
	head(b, "kvd_shard_checkpoint_seconds", "gauge",
	     "How long the last checkpoint took.");
	for (unsigned s = 0; s < n; s++)
		out(b, "kvd_shard_checkpoint_seconds{shard=\"%u\"} %.6f\n", s,
		    (double)st[s].checkpoint_ns / 1e9);
	head(b, "kvd_shard_failed", "gauge",
	     "1 when a write or fsync of the journal, or a checkpoint, failed "
	     "and the shard refuses writes.");
	for (unsigned s = 0; s < n; s++)
		out(b, "kvd_shard_failed{shard=\"%u\"} %d\n", s,
		    kvd_commit_failed(srv->com, s) || st[s].checkpoint_failed);
}

static void repl_metrics(struct kvd_server *srv, struct kv_buf *b)
{
	struct kvd_repl_stat rs;

	kvd_repl_stat(srv, &rs);
	head(b, "kvd_replication_role", "gauge",
	     "1 for this server's replication role.");
	out(b, "kvd_replication_role{role=\"%s\"} 1\n",
	    rs.replica ? "replica" : "primary");
	head(b, "kvd_replication_offset", "gauge",
	     "Sum of the shards' last LSNs (INFO master_repl_offset).");
	out(b, "kvd_replication_offset %llu\n", (unsigned long long)rs.offset);
	head(b, "kvd_replication_replicas", "gauge",
	     "Replicas heard from within min-replicas-max-lag.");
	out(b, "kvd_replication_replicas %u\n", rs.replicas);
	head(b, "kvd_replication_lag_records", "gauge",
	     "Records behind: a replica's behind its primary, a primary's "
	     "largest among its replicas.");
	out(b, "kvd_replication_lag_records %llu\n",
	    (unsigned long long)rs.lag_records);
	head(b, "kvd_replication_lag_seconds", "gauge",
	     "Seconds since a replica heard from its primary (on a primary: "
	     "the longest since a replica asked).");
	out(b, "kvd_replication_lag_seconds %.3f\n", (double)rs.lag_ms / 1e3);
	head(b, "kvd_replication_syncs_total", "counter",
	     "Resyncs answered as a primary: full copies, continuations, and "
	     "continuations refused (INFO sync_full, sync_partial_ok, "
	     "sync_partial_err).");
	out(b, "kvd_replication_syncs_total{kind=\"full\"} %llu\n",
	    (unsigned long long)rs.syncs_full);
	out(b, "kvd_replication_syncs_total{kind=\"partial_ok\"} %llu\n",
	    (unsigned long long)rs.syncs_partial_ok);
	out(b, "kvd_replication_syncs_total{kind=\"partial_err\"} %llu\n",
	    (unsigned long long)rs.syncs_partial_err);
}

void kvd_metrics_render(struct kvd_io *io, struct kv_buf *b)
{
	struct kvd_server *srv = io->srv;
	struct kvd_totals t;

	kvd_stats_sum(srv, &t);
	head(b, "kvd_info", "gauge", "Version and durability mode.");
	out(b, "kvd_info{version=\"%s\",durability=\"%s\"} 1\n", KVD_VERSION,
	    kvd_durability_name(srv->cfg->durability));
	repl_metrics(srv, b);
	head(b, "kvd_uptime_seconds", "gauge", "Seconds since start.");
	out(b, "kvd_uptime_seconds %.3f\n",
	    (double)(io->now_ms - srv->start_ms) / 1e3);
	head(b, "kvd_connections", "gauge", "Open client connections.");
	out(b, "kvd_connections %llu\n", (unsigned long long)t.conns);
	head(b, "kvd_connections_accepted_total", "counter",
	     "Connections accepted.");
	out(b, "kvd_connections_accepted_total %llu\n",
	    (unsigned long long)t.accepted);
	head(b, "kvd_connections_refused_total", "counter",
	     "Connections refused over max-clients.");
	out(b, "kvd_connections_refused_total %llu\n",
	    (unsigned long long)t.refused);
	head(b, "kvd_tls_handshakes", "gauge",
	     "TLS handshakes in flight (all io threads).");
	out(b, "kvd_tls_handshakes %llu\n", (unsigned long long)t.tls_hs);
	head(b, "kvd_tls_handshakes_peak", "gauge",
	     "The most TLS handshakes one io thread had in flight at once.");
	out(b, "kvd_tls_handshakes_peak %llu\n",
	    (unsigned long long)t.tls_hs_peak);
	head(b, "kvd_tls_handshake_pauses_total", "counter",
	     "Times an io thread stopped accepting TLS connections at "
	     "tls-max-handshakes.");
	out(b, "kvd_tls_handshake_pauses_total %llu\n",
	    (unsigned long long)t.tls_hs_pauses);
	head(b, "kvd_auth_failures_total", "counter",
	     "Failed AUTH attempts (both protocols).");
	out(b, "kvd_auth_failures_total %llu\n",
	    (unsigned long long)kvd_auth_failures());
	head(b, "kvd_auth_limited_total", "counter",
	     "Failed AUTH attempts refused unchecked: their source address "
	     "failed too often (auth-fail-burst, auth-fail-rate).");
	out(b, "kvd_auth_limited_total %llu\n",
	    (unsigned long long)kvd_auth_limited());
	head(b, "kvd_write_backpressure_total", "counter",
	     "Times a connection stopped being read because its writes in "
	     "flight, or its shard's, were over their bound.");
	out(b, "kvd_write_backpressure_total %llu\n",
	    (unsigned long long)t.write_pauses);
	head(b, "kvd_preauth_closed_total", "counter",
	     "Unauthenticated connections closed over their input or output "
	     "caps.");
	out(b, "kvd_preauth_closed_total %llu\n",
	    (unsigned long long)t.preauth_closed);
	head(b, "kvd_received_bytes_total", "counter", "Bytes received.");
	out(b, "kvd_received_bytes_total %llu\n",
	    (unsigned long long)t.bytes_in);
	head(b, "kvd_sent_bytes_total", "counter", "Bytes sent.");
	out(b, "kvd_sent_bytes_total %llu\n", (unsigned long long)t.bytes_out);
	head(b, "kvd_resp_commands_total", "counter",
	     "Redis-protocol commands.");
	out(b, "kvd_resp_commands_total %llu\n",
	    (unsigned long long)t.resp_calls);
	head(b, "kvd_resp_errors_total", "counter",
	     "Redis-protocol commands answered with an error.");
	out(b, "kvd_resp_errors_total %llu\n",
	    (unsigned long long)t.resp_errors);
	requests(srv, b);
	latencies(srv, b);
	commits(srv, b);
	shards(io, b);
}

/* ===================== HTTP ===================== */

/* extra: more header lines, each ending in \r\n, or "".  A HEAD request
 * (head) gets the headers GET would get, Content-Length included, and no
 * body (RFC 9110 9.3.2): a probe that checks the endpoint answers. */
static void respond(struct kvd_conn *c, const char *status, const char *extra,
		    struct kv_buf *body, int head)
{
	char hdr[320];
	int n =
	    snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %s\r\n%sContent-Type: text/plain; "
		     "version=0.0.4; charset=utf-8\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n",
		     status, extra, body->len);

	kvd_reply_append(c, hdr, (size_t)n);
	if (!head)
		kvd_reply_append(c, body->data, body->len);
}

static int b64val(uint8_t ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Decode base64 (padding optional) into out; its length, or -1. */
static long b64decode(const uint8_t *p, size_t n, uint8_t *out, size_t cap)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t o = 0;

	while (n && p[n - 1] == '=')
		n--;
	for (size_t i = 0; i < n; i++) {
		int v = b64val(p[i]);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == cap)
				return -1;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)o;
}

/* With requirepass set, /metrics needs HTTP Basic authentication with that
 * password (any user name): the counters tell a stranger how the store is
 * used, and metrics-bind may reach beyond loopback.  1 if the header block
 * [p, end) carries the password. */
static int authorized(struct kvd_conn *c, const uint8_t *p, const uint8_t *end)
{
	static const char name[] = "\r\nauthorization:";
	uint8_t cred[HTTP_MAX_REQUEST];
	const uint8_t *colon;
	long n;

	if (!c->io->srv->cfg->requirepass[0])
		return 1;
	for (; p + sizeof(name) - 1 <= end; p++) {
		const uint8_t *v = p + sizeof(name) - 1, *e = v;

		if (strncasecmp((const char *)p, name, sizeof(name) - 1))
			continue;
		while (v < end && *v == ' ')
			v++;
		if (end - v < 6 || strncasecmp((const char *)v, "Basic ", 6))
			return 0;
		for (v += 6; v < end && *v == ' '; v++)
			;
		for (e = v; e < end && *e != '\r' && *e != ' '; e++)
			;
		n = b64decode(v, (size_t)(e - v), cred, sizeof(cred));
		if (n < 0 || !(colon = memchr(cred, ':', (size_t)n)))
			return 0;
		colon++;
		return kvd_auth_try(c, colon, (size_t)(cred + n - colon)) > 0;
	}
	return 0;
}

size_t kvd_http_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	struct kv_buf body = {0};
	const uint8_t *end = memmem(p, n, "\r\n\r\n", 4);
	int head = n >= 5 && !memcmp(p, "HEAD ", 5);
	/* the path, after "GET " or "HEAD " */
	const uint8_t *path = p + (head ? 5 : 4);
	size_t plen = n - (size_t)(path - p);

	if (!end) {
		if (n < HTTP_MAX_REQUEST)
			return 0; /* wait for the rest of the header */
		out(&body, "request header too large\n");
		respond(c, "431 Request Header Fields Too Large", "", &body,
			head); /* a response to HEAD never has a body */
	} else if (!head && memcmp(p, "GET ", 4)) {
		out(&body, "only GET and HEAD are supported\n");
		respond(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			&body, 0);
	} else if (!authorized(c, p, end + 2)) {
		out(&body, "authentication required: HTTP Basic, with the "
			   "password of requirepass\n");
		respond(c, "401 Unauthorized",
			"WWW-Authenticate: Basic realm=\"kvd\"\r\n", &body,
			head);
	} else if (plen >= 9 && (!memcmp(path, "/metrics ", 9) ||
				 !memcmp(path, "/metrics?", 9))) {
		kvd_metrics_render(c->io, &body);
		respond(c, "200 OK", "", &body, head);
	} else {
		out(&body, "not found: the metrics are at /metrics\n");
		respond(c, "404 Not Found", "", &body, head);
	}
	kv_buf_free(&body);
	c->flags |= CONN_CLOSING;
	return n;
}

static const char http_busy[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
    "Connection: close\r\n\r\n";

/* The metrics listener's requests answer at once: no write ever pends. */
const struct kvd_proto kvd_http_proto = {
    .name = "http",
    .input = kvd_http_input,
    .busy = http_busy,
    .busy_len = sizeof(http_busy) - 1,
};
