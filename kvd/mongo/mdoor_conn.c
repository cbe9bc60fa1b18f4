/* mdoor_conn.c - the door and its connections: setting up (SCRAM keys,
 * the cursor registry), taking one message at a time from the input
 * within the size limits, running its command through the table of every
 * family (before authentication only the handshake's), and answering: at
 * once, or, for a write, when the store calls the batch's done, in the
 * order the requests came (mdoor.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "mdoor_int.h"

#define PREAUTH_MAX_DEFAULT (16u << 10)

uint64_t mdoor_now(const struct mdoor *d)
{
	return d->host.now_ms(d->host.ctx);
}

void mdoor_log(const struct mdoor *d, int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!d->host.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	d->host.log(d->host.ctx, level, line);
}

/* ===================== the door ===================== */

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static int copy_argv(struct mdoor *d, const char *const *argv)
{
	size_t n = 0;

	if (!argv)
		return 0;
	while (argv[n])
		n++;
	d->argv = calloc(n + 1, sizeof(char *));
	if (!d->argv)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(d->argv[i] = strdup(argv[i])))
			return -1;
	return 0;
}

static int setup_auth(struct mdoor *d, const struct mdoor_config *cfg,
		      char *err, size_t errlen)
{
	if (!cfg->password)
		return 0;
	d->auth = true;
	d->iters = cfg->scram_iterations ? cfg->scram_iterations : 15000;
	if (d->iters < 4096) {
		snprintf(err, errlen, "SCRAM iterations below 4096");
		return -1;
	}
	if (RAND_bytes(d->salt, sizeof(d->salt)) != 1) {
		snprintf(err, errlen, "no random bytes for the SCRAM salt");
		return -1;
	}
	if (mdoor_scram_keys(cfg->password, cfg->password_len, d->salt,
			     sizeof(d->salt), d->iters, d->stored_key,
			     d->server_key)) {
		snprintf(err, errlen,
			 "the password holds a control character, which "
			 "SASLprep (SCRAM-SHA-256) forbids");
		return -1;
	}
	return 0;
}

struct mdoor *mdoor_new(const struct mdoor_config *cfg,
			const struct mdoor_host *host,
			const struct mdoor_store *store, char *err,
			size_t errlen)
{
	struct mdoor *d = calloc(1, sizeof(*d));

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->host = *host;
	d->store = *store;
	pthread_mutex_init(&d->lock, NULL);
	d->max_cursors = cfg->max_cursors ? cfg->max_cursors : 10000;
	d->max_conn_cursors =
	    cfg->max_conn_cursors ? cfg->max_conn_cursors : 1000;
	d->cursor_timeout_ms =
	    cfg->cursor_timeout_ms ? cfg->cursor_timeout_ms : 600000;
	d->cursor_mem = cfg->cursor_mem ? cfg->cursor_mem : (size_t)1 << 30;
	d->preauth_max = cfg->preauth_max_message ? cfg->preauth_max_message
						  : PREAUTH_MAX_DEFAULT;
	d->nbuckets = 1024;
	while (d->nbuckets < d->max_cursors)
		d->nbuckets <<= 1;
	d->buckets = calloc(d->nbuckets, sizeof(*d->buckets));
	d->user = dup_or_null(cfg->user);
	d->kvd_version = strdup(cfg->kvd_version ? cfg->kvd_version : "");
	d->hostname = strdup(cfg->host ? cfg->host : "localhost");
	d->pid = cfg->pid;
	d->start_ms = cfg->start_ms;
	d->next_conv = 1;
	if (!d->buckets || (cfg->user && *cfg->user && !d->user) ||
	    !d->kvd_version || !d->hostname || copy_argv(d, cfg->argv)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (setup_auth(d, cfg, err, errlen))
		goto fail;
	return d;
fail:
	mdoor_free(d);
	return NULL;
}

void mdoor_free(struct mdoor *d)
{
	if (!d)
		return;
	if (d->buckets)
		mdoor_cursor_reap(d, true);
	free(d->buckets);
	free(d->user);
	free(d->kvd_version);
	free(d->hostname);
	for (size_t i = 0; d->argv && d->argv[i]; i++)
		free(d->argv[i]);
	free(d->argv);
	pthread_mutex_destroy(&d->lock);
	OPENSSL_cleanse(d->stored_key, sizeof(d->stored_key));
	OPENSSL_cleanse(d->server_key, sizeof(d->server_key));
	free(d);
}

void mdoor_tick(struct mdoor *d)
{
	mdoor_cursor_reap(d, false);
}

void mdoor_counters(const struct mdoor *d, struct mdoor_counters *o)
{
	o->insert = d->c_insert;
	o->query = d->c_query;
	o->update = d->c_update;
	o->del = d->c_delete;
	o->getmore = d->c_getmore;
	o->command = d->c_command;
	o->bytes_in = d->c_bytes_in;
	o->bytes_out = d->c_bytes_out;
	o->requests = d->c_requests;
	o->cursors_open = d->c_cursors_open;
	o->cursors_timed_out = d->c_cursors_timed_out;
	o->auth_failures = d->c_auth_fail;
}

/* ===================== connections ===================== */

struct mdoor_conn *mdoor_conn_open(struct mdoor *d, void *conn,
				   const struct mdoor_peer *peer)
{
	struct mdoor_conn *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	mc->d = d;
	mc->conn = conn;
	mc->id = peer ? peer->id : 0;
	snprintf(mc->remote, sizeof(mc->remote), "%s",
		 peer && peer->remote ? peer->remote : "");
	mc->authed = !d->auth;
	return mc;
}

bool mdoor_busy(const struct mdoor_conn *mc)
{
	return mc->busy;
}

bool mdoor_yielded(const struct mdoor_conn *mc)
{
	return mc->yielded;
}

bool mdoor_authed(const struct mdoor_conn *mc)
{
	return mc->authed;
}

void mdoor_req_free(struct mdoor_req *r)
{
	mdoor_read_abandon(r); /* a read its connection left unfinished */
	if (r->state_free && r->state)
		r->state_free(r->state);
	bson_destroy(&r->reply);
	bson_free(r); /* BSON_ALIGNED_ALLOC0's */
}

static void conn_free(struct mdoor_conn *mc)
{
	mdoor_scram_free(mc->scram);
	free(mc);
}

void mdoor_conn_close(struct mdoor_conn *mc)
{
	if (!mc)
		return;
	mdoor_cursor_detach(mc);
	mc->closing = true;
	if (mc->yielded) { /* nothing else refers to its read */
		mdoor_req_free(mc->req);
		mc->req = NULL;
		mc->busy = mc->yielded = false;
	}
	if (mc->busy) {
		mc->dead = true; /* the batch's done frees it */
		return;
	}
	conn_free(mc);
}

/* ===================== answering ===================== */

/* Send r's reply: its fields and ok: 1, or the error alone. */
void mdoor_answer(struct mdoor_req *r, int rc, const struct mql_error *err)
{
	if (rc < 0) {
		bson_reinit(&r->reply);
		mdoor_error_doc(&r->reply, err);
	} else {
		BSON_APPEND_DOUBLE(&r->reply, "ok", 1.0);
	}
	if (r->silent || r->mc->dead)
		return;
	if (r->legacy)
		mdoor_wire_reply_legacy(r->mc, r->request_id, &r->reply);
	else
		mdoor_wire_reply_msg(r->mc, r->request_id, &r->reply);
}

void mdoor_again(struct mdoor_conn *mc)
{
	struct mdoor_req *r = mc->req;
	struct mql_error err;
	int rc;

	if (!mc->yielded)
		return;
	mql_error_clear(&err);
	rc = r->cont(r, &err);
	if (rc == MDOOR_YIELD)
		return;
	mc->yielded = false;
	if (rc == MDOOR_SUSPEND) /* a write now: its done answers */
		return;
	mdoor_answer(r, rc, &err);
	mdoor_req_free(r);
	mc->req = NULL;
	mc->busy = false;
}

static void batch_done(struct mdoor_wbatch *b)
{
	struct mdoor_req *r = b->priv;
	struct mdoor_conn *mc = r->mc;
	struct mql_error err;
	int rc;

	if (r->in_submit) {
		r->done_inline = true;
		return;
	}
	mql_error_clear(&err);
	rc = r->finish(r, b, &err);
	mdoor_answer(r, rc, &err);
	mdoor_req_free(r);
	mc->req = NULL;
	mc->busy = false;
	if (mc->dead) {
		conn_free(mc);
		return;
	}
	mc->d->host.resume(mc->conn);
}

int mdoor_submit(struct mdoor_req *r, struct mdoor_wbatch *b,
		 mdoor_finish_fn finish, void *state,
		 void (*state_free)(void *), struct mql_error *err)
{
	struct mdoor *d = r->mc->d;

	r->batch = b;
	r->finish = finish;
	r->state = state;
	r->state_free = state_free;
	b->priv = r;
	b->conn = r->mc->conn;
	b->done = batch_done;
	b->now_ms = (int64_t)mdoor_now(d);
	mql_error_clear(&b->err);
	r->in_submit = true;
	d->store.write(d->store.ctx, b);
	r->in_submit = false;
	if (r->done_inline)
		return finish(r, b, err);
	return MDOOR_SUSPEND;
}
