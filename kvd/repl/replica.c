/* replica.c - replication, the replica's side: one thread that follows the
 * primary (repl.h).  It connects to the primary's native port with
 * libkvclient (AUTH, TLS), asks to continue from its own positions or takes
 * a full copy, then pulls records and hands them to its own committers,
 * which journal them under the primary's LSNs (KVD_W_REPL) exactly as
 * recovery would replay them.  Its next pull is sent only once every
 * record of the last one is flushed: that request is the acknowledgement.
 * Given the primary's RESP port (REPLICAOF on the RESP port, as Sentinel
 * sends it), it first asks there for the native port (INFO server).
 *
 * Completions come back through a kvd_io of its own (its done stack and
 * eventfd), which no io thread runs: kvd_io_complete works unchanged.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "kv_mp.h"
#include "kv_status.h"
#include "kvc_int.h"
#include "log.h"
#include "net/loop.h"
#include "repl.h"
#include "store.h"

static struct {
	struct kvd_server *srv;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int kicked, stop;
	struct kvd_io *sink; /* where committers hand our requests back */
	char password[KVD_PASS_MAX + 1];
	uint64_t pos[KVD_MAX_SHARDS]; /* next LSN per shard */
} Q = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

/* One line a few seconds about a link that keeps failing. */
static struct kvd_log_limit link_limit = KVD_LOG_LIMIT_INIT(5000);

static uint64_t mono_ms(void)
{
	return kvd_mono_ns() / 1000000;
}

static unsigned link_gen(void)
{
	unsigned g;

	kvd_repl_lock();
	g = kvd_repl_link()->gen;
	kvd_repl_unlock();
	return g;
}

/* Stop, or the primary to follow changed since gen. */
static int moved(unsigned gen)
{
	int stop;

	pthread_mutex_lock(&Q.mu);
	stop = Q.stop;
	pthread_mutex_unlock(&Q.mu);
	return stop || link_gen() != gen;
}

/* ===================== Applying ===================== */

/* Wait until n requests came back; their list into *out. */
static void wait_done(unsigned n, struct kvd_wreq **out)
{
	*out = NULL;
	while (n > 0) {
		struct pollfd p = {.fd = Q.sink->efd, .events = POLLIN};
		struct kvd_wreq *w;
		uint64_t v;

		if (poll(&p, 1, 1000) > 0 && read(Q.sink->efd, &v, 8) < 0) {
			/* consumed by an earlier read */
		}
		w = atomic_exchange(&Q.sink->done, NULL);
		while (w) {
			struct kvd_wreq *next = w->next;

			w->next = *out;
			*out = w;
			n--;
			w = next;
		}
	}
}

/* Run one request per shard given (w[i] NULL: none) on the committers and
 * wait for them all.  0, or the first failure's status. */
static int run_all(struct kvd_wreq **w, unsigned n)
{
	struct kvd_wreq *done;
	unsigned k = 0;
	int rc = 0;

	for (unsigned i = 0; i < n; i++)
		if (w[i]) {
			kvd_committer_submit(Q.srv->com, w[i]);
			k++;
		}
	/* submit holds a thread's requests until its flush (an io thread's
	 * at the end of its loop turn): this thread has no turn */
	kvd_committer_flush(Q.srv->com);
	wait_done(k, &done);
	while (done) {
		struct kvd_wreq *next = done->next;

		if (done->op.status && !rc)
			rc = done->op.status;
		kvd_wreq_free(Q.sink, done);
		done = next;
	}
	return rc;
}

static struct kvd_wreq *req_new(unsigned shard, int kind, size_t len)
{
	struct kvd_wreq *w = kvd_wreq_new(Q.sink, len);

	if (!w)
		return NULL;
	memset(&w->op, 0, sizeof(w->op));
	w->io = Q.sink;
	w->pend = NULL;
	w->tracked = 0;
	w->shard = (uint16_t)shard;
	w->op.kind = (uint8_t)kind;
	w->op.items = w->data;
	return w;
}

/* Shard s's requests so far, applied: their positions advance. */
static int run_group(struct kvd_wreq **w, uint32_t *cnt)
{
	unsigned ns = Q.srv->nshards;
	int rc = run_all(w, ns);

	if (rc) {
		log_error("replication: applying the primary's records failed: "
			  "%s",
			  kv_status_name(rc));
		return -1;
	}
	for (unsigned i = 0; i < ns; i++) {
		Q.pos[i] += cnt[i];
		cnt[i] = 0;
		w[i] = NULL;
	}
	return 0;
}

/* At a bulk build's marker on shard s (store.h, KVD_BULK_MARK): the same
 * range of its own, at the same point of the records, before the marker
 * and any record after it (an IXREADY among them).  Its value: [u8 merge
 * id][u8 ks][KVD_W_BULK's item].  0 or -1. */
static int run_bulk(unsigned s, struct kv_slice mark)
{
	struct kvd_wreq *w[KVD_MAX_SHARDS] = {0}, *r;
	int rc;

	if (mark.n < 2 + KVD_ITEM_HDR ||
	    !(r = w[s] = req_new(s, KVD_W_BULK, mark.n - 2)))
		return -1;
	r->op.flags = mark.p[0];
	r->op.ks = mark.p[1];
	r->op.nitems = 1;
	r->op.items_len = mark.n - 2;
	memcpy(r->data, mark.p + 2, mark.n - 2);
	if ((rc = run_all(w, Q.srv->nshards))) {
		log_error("replication: a bulk index build's range failed: %s",
			  kv_status_name(rc));
		return -1;
	}
	return 0;
}

/* One pull's records: [u16 shard][u64 lsn][u8 type][u32 len][payload],
 * each shard's consecutive from its position.  0 or -1. */
static int apply(const uint8_t *p, size_t n)
{
	unsigned ns = Q.srv->nshards;
	struct kvd_wreq *w[KVD_MAX_SHARDS] = {0};
	size_t bytes[KVD_MAX_SHARDS] = {0};
	uint32_t cnt[KVD_MAX_SHARDS] = {0};
	const uint8_t *q, *end = p + n;

	/* sizes first, then one request per shard (more after a marker) */
	for (q = p; q < end;) {
		uint16_t s;
		uint32_t len;

		if (end - q < 15)
			return -1;
		memcpy(&s, q, 2);
		memcpy(&len, q + 11, 4);
		if (s >= ns || (size_t)(end - q - 15) < len)
			return -1;
		bytes[s] += 5 + (size_t)len;
		q += 15 + len;
	}
	for (q = p; q < end;) {
		uint16_t s;
		uint32_t len;
		uint64_t lsn;
		struct kvd_wreq *r;
		struct kv_slice mark;

		memcpy(&s, q, 2);
		memcpy(&lsn, q + 2, 8);
		memcpy(&len, q + 11, 4);
		/* a marker after its range: one that is applied had its range
		 * done (a crash in between has the primary send it again) */
		if (kvd_bulk_mark(q + 10, 5 + (size_t)len, &mark) &&
		    (run_group(w, cnt) || run_bulk(s, mark)))
			return -1;
		if (!(r = w[s]) &&
		    !(r = w[s] = req_new(s, KVD_W_REPL, bytes[s])))
			goto fail;
		if (!cnt[s])
			r->op.lsn = lsn;
		if (lsn != Q.pos[s] + cnt[s])
			goto fail;
		memcpy(r->data + r->op.items_len, q + 10, 5 + (size_t)len);
		r->op.items_len += 5 + (size_t)len;
		r->op.nitems = ++cnt[s];
		bytes[s] -= 5 + (size_t)len;
		q += 15 + len;
	}
	return run_group(w, cnt);
fail:
	log_error("replication: the primary sent records out of order");
	for (unsigned i = 0; i < ns; i++)
		if (w[i])
			kvd_wreq_free(Q.sink, w[i]);
	return -1;
}

/* ===================== Talking to the primary ===================== */

/* Send op with its encoded arguments and read the reply; its results
 * (after the status) are [*res, *end).  0, or -1 (logged). */
static int call(kvc_conn *c, unsigned op, const struct kv_buf *args,
		uint32_t nargs, const uint8_t **res, const uint8_t **end)
{
	kvc_reply *r;
	int rc = kvc_send_raw(c, op, args->data, args->len, nargs);

	if (!rc)
		rc = kvc_read_reply(c, &r);
	if (rc) {
		kvd_log_ratelimited(&link_limit, KVD_LOG_WARN,
				    "replication: %s: %s", kv_op_name(op),
				    kvc_errmsg(c));
		return -1;
	}
	if (kvc_reply_status(r)) {
		kvd_log_ratelimited(
		    &link_limit, KVD_LOG_WARN,
		    "replication: the primary answered %s "
		    "with %s%s%s",
		    kv_op_name(op), kvc_status_name(kvc_reply_status(r)),
		    *kvc_reply_error(r) ? ": " : "", kvc_reply_error(r));
		return -1;
	}
	*res = r->res;
	*end = r->end;
	return 0;
}

static int take(const uint8_t **p, const uint8_t *end, struct kv_mp_obj *o,
		int type)
{
	if (kv_mp_next(p, end, o) != KV_MP_OK)
		return -1;
	if (type == KV_MP_BIN)
		return o->type == KV_MP_BIN || o->type == KV_MP_STR ? 0 : -1;
	return (int)o->type == type ? 0 : -1;
}

static void set_link(int up, int syncing)
{
	struct kvd_repl_link *l;
	uint64_t now = mono_ms();

	kvd_repl_lock();
	l = kvd_repl_link();
	if ((l->up || l->syncing) && !up && !syncing)
		l->down_since_ms =
		    now; /* INFO master_link_down_since_seconds */
	if (!l->up && !l->syncing && (up || syncing))
		l->up_since_ms = now;
	l->up = up;
	l->syncing = syncing;
	l->last_io_ms = now;
	kvd_repl_unlock();
}

/* Load shard s of the primary's snapshot sid.  0 or -1. */
static int load_shard(kvc_conn *c, uint64_t sid, unsigned s, unsigned gen)
{
	struct kv_buf key = {0}, args = {0};
	int rc = 0;

	do {
		const uint8_t *p, *end;
		struct kv_mp_obj chunk, next;
		struct kvd_wreq *w[KVD_MAX_SHARDS] = {0};

		args.len = 0;
		kv_mp_uint(&args, sid);
		kv_mp_uint(&args, s);
		kv_mp_bin(&args, key.data, key.len);
		if (moved(gen) || call(c, KV_OP_REPLSNAP, &args, 3, &p, &end) ||
		    take(&p, end, &chunk, KV_MP_BIN) ||
		    kv_mp_next(&p, end, &next) != KV_MP_OK) {
			rc = -1;
			break;
		}
		set_link(0, 1);
		if (chunk.len) {
			if (!(w[s] = req_new(s, KVD_W_LOAD, chunk.len))) {
				rc = -1;
				break;
			}
			memcpy(w[s]->data, chunk.p, chunk.len);
			w[s]->op.items_len = chunk.len;
			if (run_all(w, Q.srv->nshards)) {
				rc = -1;
				break;
			}
		}
		key.len = 0;
		if (next.type == KV_MP_BIN || next.type == KV_MP_STR)
			kv_buf_append(&key, next.p, next.len);
		else if (next.type != KV_MP_NIL)
			rc = -1;
	} while (!rc && key.len);
	kv_buf_free(&key);
	kv_buf_free(&args);
	return rc;
}

/* A full copy: mark, empty every shard at the cut, load, take the id,
 * unmark.  A crash in between leaves the mark: kvd_repl_prepare empties
 * the shards at the next start, and the copy is taken again. */
static int full_copy(kvc_conn *c, const char *replid, const uint64_t *cut,
		     uint64_t sid, unsigned gen)
{
	unsigned ns = Q.srv->nshards;
	struct kvd_wreq *w[KVD_MAX_SHARDS] = {0};
	uint64_t t0 = mono_ms();
	int rc;

	log_info("replication: taking a full copy from the primary");
	set_link(0, 1);
	if (kvd_repl_mark_full(1)) {
		log_error("replication: cannot mark the data directory");
		return -1;
	}
	for (unsigned i = 0; i < ns; i++)
		if (!(w[i] = req_new(i, KVD_W_RESET, 0)))
			return -1; /* the mark stays: emptied at restart */
		else
			w[i]->op.lsn = cut[i];
	if ((rc = run_all(w, ns))) {
		log_error("replication: cannot empty the shards: %s",
			  kv_status_name(rc));
		return -1;
	}
	for (unsigned i = 0; i < ns; i++) {
		Q.pos[i] = cut[i] + 1;
		if (load_shard(c, sid, i, gen))
			return -1;
	}
	kvd_repl_lock();
	memcpy(kvd_repl_ids()->replid, replid, KVD_REPLID_LEN + 1);
	memset(kvd_repl_ids()->replid2, '0', KVD_REPLID_LEN);
	memset(kvd_repl_ids()->sw, 0, sizeof(kvd_repl_ids()->sw));
	rc = kvd_repl_save_ids();
	kvd_repl_unlock();
	if (rc || kvd_repl_mark_full(0))
		return -1;
	log_info("replication: full copy done in %.1f s",
		 (double)(mono_ms() - t0) / 1000);
	return 0;
}

/* Continue under the primary's id; ours stays good up to here. */
static void adopt(const char *replid)
{
	struct kvd_repl_ids *ids;

	kvd_repl_lock();
	ids = kvd_repl_ids();
	if (strcmp(ids->replid, replid)) {
		memcpy(ids->replid2, ids->replid, sizeof(ids->replid2));
		memcpy(ids->sw, Q.pos, sizeof(ids->sw));
		memcpy(ids->replid, replid, KVD_REPLID_LEN + 1);
		kvd_repl_save_ids();
	}
	kvd_repl_unlock();
}

/* REPLSYNC: continue, or take a full copy.  0 or -1. */
static int resync(kvc_conn *c, unsigned gen)
{
	struct kvd_server *srv = Q.srv;
	unsigned ns = srv->nshards;
	struct kv_buf args = {0};
	struct kv_mp_obj mode, id, cut, sid;
	const uint8_t *p, *end;
	char replid[KVD_REPLID_LEN + 1];
	int rc = -1;

	for (unsigned i = 0; i < ns; i++)
		Q.pos[i] = kvd_shard_pub_lsn(srv->store, i) + 1;
	kvd_repl_lock();
	memcpy(replid, kvd_repl_ids()->replid, sizeof(replid));
	kvd_repl_unlock();
	kv_mp_cstr(&args, replid);
	kv_mp_uint(&args, ns);
	kv_mp_bin(&args, Q.pos, ns * sizeof(uint64_t));
	kv_mp_uint(&args, srv->resp_port ? srv->resp_port : srv->port);
	kv_mp_uint(&args, srv->port);
	if (call(c, KV_OP_REPLSYNC, &args, 5, &p, &end) ||
	    take(&p, end, &mode, KV_MP_BIN) || take(&p, end, &id, KV_MP_BIN) ||
	    id.len != KVD_REPLID_LEN)
		goto out;
	memcpy(replid, id.p, KVD_REPLID_LEN);
	replid[KVD_REPLID_LEN] = '\0';
	if (mode.len == 7 && !memcmp(mode.p, "partial", 7)) {
		log_info("replication: continuing from offset %" PRIu64,
			 kvd_repl_offset(srv));
		adopt(replid);
		rc = 0;
	} else if (!take(&p, end, &cut, KV_MP_BIN) &&
		   cut.len == ns * sizeof(uint64_t) &&
		   !take(&p, end, &sid, KV_MP_UINT)) {
		uint64_t cuts[KVD_MAX_SHARDS];

		memcpy(cuts, cut.p, cut.len);
		rc = full_copy(c, replid, cuts, sid.v.u, gen);
	}
out:
	kv_buf_free(&args);
	return rc;
}

/* Pull until the link breaks or the primary to follow changes. */
static int stream(kvc_conn *c, unsigned gen)
{
	unsigned ns = Q.srv->nshards;
	struct kv_buf args = {0};
	char replid[KVD_REPLID_LEN + 1];
	int rc = 0;

	kvd_repl_lock();
	memcpy(replid, kvd_repl_ids()->replid, sizeof(replid));
	kvd_repl_unlock();
	set_link(1, 0);
	log_info("replication: streaming from the primary");
	while (!rc && !moved(gen)) {
		struct kv_mp_obj recs, pos;
		const uint8_t *p, *end;
		uint64_t off = 0;

		args.len = 0;
		kv_mp_cstr(&args, replid);
		kv_mp_bin(&args, Q.pos, ns * sizeof(uint64_t));
		rc = -1;
		if (call(c, KV_OP_REPLPULL, &args, 2, &p, &end) ||
		    take(&p, end, &recs, KV_MP_BIN) ||
		    take(&p, end, &pos, KV_MP_BIN) ||
		    pos.len != ns * sizeof(uint64_t))
			break;
		for (unsigned i = 0; i < ns; i++) {
			uint64_t v;

			memcpy(&v, pos.p + 8 * i, 8);
			off += v ? v - 1 : 0;
		}
		kvd_repl_lock();
		kvd_repl_link()->primary_offset = off;
		kvd_repl_link()->last_io_ms = mono_ms();
		kvd_repl_unlock();
		rc = apply(recs.p, recs.len);
	}
	kv_buf_free(&args);
	return rc;
}

/* A connection to host:port, with TLS when tls-replication is set; native
 * ones send AUTH with pw when given (a RESP one sends its own). */
static kvc_conn *connect_primary(const char *host, unsigned port, int native,
				 const char *pw)
{
	const struct kvd_config *cfg = Q.srv->cfg;
	kvc_conn *c = NULL;

	if (kvc_create(&c))
		return NULL;
	kvc_set_timeouts(c, 5000, 10000);
	kvc_set_max_reply(c, (64u << 20) + cfg->max_frame);
	if (pw && native)
		kvc_set_password(c, pw, strlen(pw));
	if (cfg->tls_replication) {
		struct kvc_tls_opts o = {0};

		o.ca_file =
		    cfg->tls_ca_cert_file[0] ? cfg->tls_ca_cert_file : NULL;
		o.ca_dir =
		    cfg->tls_ca_cert_dir[0] ? cfg->tls_ca_cert_dir : NULL;
		o.cert_file = cfg->tls_cert_file[0] ? cfg->tls_cert_file : NULL;
		o.key_file = cfg->tls_key_file[0] ? cfg->tls_key_file : NULL;
		if (kvc_set_tls(c, &o)) {
			kvd_log_ratelimited(&link_limit, KVD_LOG_ERROR,
					    "replication: TLS: %s",
					    kvc_errmsg(c));
			kvc_close(c);
			return NULL;
		}
	}
	if (kvc_connect(c, host, port)) {
		kvd_log_ratelimited(&link_limit, KVD_LOG_WARN,
				    "replication: cannot reach the primary: "
				    "%s",
				    kvc_errmsg(c));
		kvc_close(c);
		return NULL;
	}
	return c;
}

/* ===================== Finding the native port ===================== */

static void resp_arg(struct kv_buf *b, const char *s)
{
	char hdr[32];

	snprintf(hdr, sizeof(hdr), "$%zu\r\n", strlen(s));
	kv_buf_append(b, hdr, strlen(hdr));
	kv_buf_append(b, s, strlen(s));
	kv_buf_append(b, "\r\n", 2);
}

/* Length of the complete RESP reply (a line or a bulk string) at p, 0 if
 * incomplete; *err set when it is an error or malformed. */
static size_t resp_reply_len(const char *p, size_t n, int *err)
{
	const char *nl = memchr(p, '\n', n);
	long long len;

	*err = 0;
	if (!nl)
		return 0;
	if (p[0] != '$') {
		*err = p[0] != '+';
		return (size_t)(nl - p) + 1;
	}
	len = strtoll(p + 1, NULL, 10);
	if (len < 0 || len > (1 << 20)) {
		*err = 1;
		return (size_t)(nl - p) + 1;
	}
	if ((size_t)(nl - p) + 1 + (size_t)len + 2 > n)
		return 0;
	return (size_t)(nl - p) + 1 + (size_t)len + 2;
}

/* Read the replies to an AUTH (when auth) and an INFO server, and take
 * field's value.  0 when not found (logged). */
static unsigned read_port(kvc_conn *c, int auth, const char *field)
{
	uint64_t deadline = kvc_now_ms() + 5000;
	size_t off = 0, len;
	int err, left = auth ? 2 : 1;

	while (left) {
		int rc;

		len = c->in.len > off
			  ? resp_reply_len((const char *)c->in.data + off,
					   c->in.len - off, &err)
			  : 0;
		if (len && err) {
			kvd_log_ratelimited(
			    &link_limit, KVD_LOG_WARN,
			    "replication: the primary's RESP port answered "
			    "%.*s",
			    (int)(len > 200 ? 200 : len - 2),
			    (const char *)c->in.data + off);
			return 0;
		}
		if (len) {
			if (--left)
				off += len; /* the AUTH's +OK */
			continue;
		}
		rc = kvc_io_read(c, 4096);
		if (rc < 0 || (!rc && kvc_io_wait(c, 0, deadline)))
			return 0;
	}
	kv_buf_append(&c->in, "", 1); /* a terminator for strstr */
	{
		const char *v = strstr((const char *)c->in.data + off, field);

		return v ? (unsigned)strtoul(v + strlen(field), NULL, 10) : 0;
	}
}

/* The primary's native port (its TLS one with tls-replication), asked over
 * its RESP port, where REPLICAOF and Sentinel name it: INFO server's
 * kvd_native_port (kvd_native_tls_port).  0 when it cannot be found. */
static unsigned find_native_port(const char *host, unsigned resp_port,
				 const char *pw)
{
	const char *field = Q.srv->cfg->tls_replication
				? "\r\nkvd_native_tls_port:"
				: "\r\nkvd_native_port:";
	kvc_conn *c = connect_primary(host, resp_port, 0, pw);
	struct kv_buf *out;
	unsigned port = 0;

	if (!c)
		return 0;
	out = &c->out;
	if (pw) {
		kv_buf_append(out, "*2\r\n", 4);
		resp_arg(out, "AUTH");
		resp_arg(out, pw);
	}
	kv_buf_append(out, "*2\r\n", 4);
	resp_arg(out, "INFO");
	resp_arg(out, "server");
	if (!kvc_flush(c))
		port = read_port(c, pw != NULL, field);
	kvc_close(c);
	if (!port)
		kvd_log_ratelimited(&link_limit, KVD_LOG_WARN,
				    "replication: cannot learn the native "
				    "port of the primary at %s:%u (RESP)",
				    host, resp_port);
	return port;
}

/* The link's local address, for CLIENT LIST. */
static void note_laddr(kvc_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (!getsockname(c->fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
			port = ntohs(a->sin6_port);
		}
	}
	kvd_repl_lock();
	snprintf(kvd_repl_link()->laddr, sizeof(kvd_repl_link()->laddr),
		 "%s:%u", ip, port);
	kvd_repl_unlock();
}

/* primary-password, for a trusted primary only (repl_trust.c): a client
 * that may send REPLICAOF must not be able to send it to a host of its
 * own.  NULL: none to give, or not to this one (logged). */
static const char *password_for(const struct kvd_repl_link *l)
{
	static struct kvd_log_limit limit = KVD_LOG_LIMIT_INIT(60000);

	if (!Q.password[0])
		return NULL;
	if (kvd_repl_trusted(Q.srv->cfg, l->host, l->port, l->resp))
		return Q.password;
	kvd_log_ratelimited(&limit, KVD_LOG_WARN,
			    "replication: primary-password is not given to "
			    "%s port %u: it is neither the replicaof of the "
			    "start nor in allowed-primaries",
			    l->host, l->port);
	return NULL;
}

/* Follow host:port until the link breaks or the primary changes. */
static void follow(const struct kvd_repl_link *l)
{
	const char *pw = password_for(l);
	unsigned port =
	    l->resp ? find_native_port(l->host, l->port, pw) : l->port;
	kvc_conn *c;

	if (!port || link_gen() != l->gen)
		return;
	kvd_repl_lock();
	if (kvd_repl_link()->gen == l->gen)
		kvd_repl_link()->native_port = port;
	kvd_repl_unlock();
	if (!(c = connect_primary(l->host, port, 1, pw)))
		return;
	note_laddr(c);
	if (!resync(c, l->gen))
		stream(c, l->gen);
	kvc_close(c);
	set_link(0, 0);
}

/* Sleep up to ms, or until kicked or stopped. */
static void nap(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&Q.mu);
	if (!Q.kicked && !Q.stop)
		pthread_cond_timedwait(&Q.cv, &Q.mu, &ts);
	Q.kicked = 0;
	pthread_mutex_unlock(&Q.mu);
}

static void *replica_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct kvd_repl_link l;

		pthread_mutex_lock(&Q.mu);
		if (Q.stop) {
			pthread_mutex_unlock(&Q.mu);
			break;
		}
		Q.kicked = 0;
		pthread_mutex_unlock(&Q.mu);
		kvd_repl_lock();
		l = *kvd_repl_link();
		kvd_repl_unlock();
		if (!l.replica) {
			nap(1000);
			continue;
		}
		follow(&l);
		if (link_gen() == l.gen)
			nap(1000); /* a broken link: retry in a second */
	}
	return NULL;
}

void kvd_replica_kick(void)
{
	pthread_mutex_lock(&Q.mu);
	Q.kicked = 1;
	pthread_cond_signal(&Q.cv);
	pthread_mutex_unlock(&Q.mu);
}

static int read_password(const struct kvd_config *cfg)
{
	FILE *f;

	snprintf(Q.password, sizeof(Q.password), "%s", cfg->primary_password);
	if (!cfg->primary_password_file[0])
		return 0;
	if (!(f = fopen(cfg->primary_password_file, "r"))) {
		log_error("primary-password-file %s: %s",
			  cfg->primary_password_file, strerror(errno));
		return -1;
	}
	if (!fgets(Q.password, sizeof(Q.password), f))
		Q.password[0] = '\0';
	fclose(f);
	Q.password[strcspn(Q.password, "\r\n")] = '\0';
	return 0;
}

int kvd_replica_start(struct kvd_server *srv)
{
	Q.srv = srv;
	if (read_password(srv->cfg))
		return -1;
	if (!(Q.sink = calloc(1, sizeof(*Q.sink))))
		return -1;
	Q.sink->srv = srv;
	Q.sink->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (Q.sink->efd < 0 ||
	    pthread_create(&Q.thread, NULL, replica_main, NULL))
		return -1;
	pthread_setname_np(Q.thread, "kvd-replica"); /* for top -H */
	Q.started = 1;
	return 0;
}

void kvd_replica_stop(void)
{
	if (!Q.started)
		return;
	pthread_mutex_lock(&Q.mu);
	Q.stop = 1;
	pthread_cond_signal(&Q.cv);
	pthread_mutex_unlock(&Q.mu);
	pthread_join(Q.thread, NULL);
	Q.started = 0;
	close(Q.sink->efd);
	while (Q.sink->free_wreq) {
		struct kvd_wreq *w = Q.sink->free_wreq;

		Q.sink->free_wreq = w->next;
		free(w);
	}
	free(Q.sink);
	Q.sink = NULL;
}
