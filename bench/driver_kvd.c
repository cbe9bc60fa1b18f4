/* driver_kvd.c - kvbench's kvd driver: the native msgpack protocol through
 * libkvclient, in its non-blocking mode, so that the engine's epoll loop
 * drives many pipelined connections per thread; over TLS with --tls (the
 * library's kvc_set_tls, so the same SSL_read/SSL_write path as any
 * program's).
 *
 * Records of fields (--record fields) are kvd's hashes, as YCSB's redis
 * binding makes them: HSET to insert and update (the server computes the
 * change: one round trip, no lost update), HGETALL or HGET to read, and a
 * typed SCAN (each key's fields) for YCSB's scan. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbench.h"
#include "kvclient.h"
#include "record.h"

/* A connection, and what field operations need: the fields' names and
 * room for a request's fields and a reply's. */
struct kconn {
	kvc_conn *c;
	unsigned nf;
	char (*names)[KB_FIELD_NAME_MAX];
	kvc_val *fk, *fvv;  /* HSET's fields and values */
	struct kb_fval *fv; /* a READ's fields */
};

static void kvd_close(void *c);

static int fields_init(struct kconn *k, unsigned nf)
{
	k->nf = nf;
	k->names = calloc(nf ? nf : 1, sizeof(*k->names));
	k->fk = calloc(nf ? nf : 1, sizeof(*k->fk));
	k->fvv = calloc(nf ? nf : 1, sizeof(*k->fvv));
	k->fv = calloc(nf ? nf : 1, sizeof(*k->fv));
	if (!k->names || !k->fk || !k->fvv || !k->fv)
		return -1;
	for (unsigned i = 0; i < nf; i++)
		kb_field_name(i, k->names[i]);
	return 0;
}

static void *kvd_connect(const struct kb_target *t, char *err, size_t errlen)
{
	struct kconn *k = calloc(1, sizeof(*k));
	kvc_conn *c = NULL;
	struct kvc_tls_opts tls = {.ca_file = t->cacert,
				   .ca_dir = t->cacertdir,
				   .cert_file = t->cert,
				   .key_file = t->key,
				   .server_name = t->sni,
				   .insecure = t->insecure};

	if (!k || kvc_create(&c) ||
	    (t->fields && fields_init(k, t->fieldcount))) {
		snprintf(err, errlen, "out of memory");
		kvc_close(c);
		kvd_close(k);
		return NULL;
	}
	k->c = c;
	/* The AUTH goes out within kvc_connect, before the connection turns
	 * non-blocking: a wrong password fails the connect, and a server
	 * without one is not an error (libkvclient ignores its DISABLED). */
	if ((t->tls && kvc_set_tls(c, &tls)) ||
	    (t->password &&
	     kvc_set_password(c, t->password, strlen(t->password))) ||
	    kvc_connect(c, t->host, t->port) || kvc_set_nonblock(c, 1)) {
		snprintf(err, errlen, "%s", kvc_errmsg(c));
		kvd_close(k);
		return NULL;
	}
	return k;
}

static int kvd_fd(void *c)
{
	return kvc_fd(((struct kconn *)c)->c);
}

/* HSET of the request's fields: YCSB's insert and update. */
static int send_hset(struct kconn *k, const struct kb_req *r)
{
	if (r->nfv > k->nf || !r->nfv)
		return -1;
	for (unsigned i = 0; i < r->nfv; i++) {
		if (r->fv[i].idx >= k->nf)
			return -1;
		k->fk[i] = (kvc_val){k->names[r->fv[i].idx],
				     strlen(k->names[r->fv[i].idx])};
		k->fvv[i] = (kvc_val){r->fv[i].val, r->fv[i].len};
	}
	return kvc_send_hset(k->c, r->key, r->klen, k->fk, k->fvv, r->nfv);
}

static int kvd_send(void *conn, const struct kb_req *r)
{
	struct kconn *k = conn;
	kvc_conn *c = k->c;
	kvc_val start = {r->key, r->klen}, f;

	switch (r->kind) {
	case REQ_GET: return kvc_send_get(c, r->key, r->klen);
	case REQ_PUT:
		return kvc_send_put(c, r->key, r->klen, r->val, r->vlen, 0, 0);
	case REQ_SCAN:
		/* YCSB's scan: count records from the key on, in key order. */
		return kvc_send_scan(c, NULL, &start, NULL, r->count, 0);
	case REQ_READ:
		if (r->field < 0)
			return kvc_send_hgetall(c, r->key, r->klen);
		if ((unsigned)r->field >= k->nf)
			return -1;
		f = (kvc_val){k->names[r->field], strlen(k->names[r->field])};
		return kvc_send_hget(c, r->key, r->klen, &f, 1);
	case REQ_INSERT:
	case REQ_UPDATE: return send_hset(k, r);
	case REQ_FSCAN:
		/* count records from the key on, with their fields */
		return kvc_send_scan(c, NULL, &start, NULL, r->count,
				     KVC_SCAN_TYPED);
	}
	return -1;
}

static int kvd_flush(void *c)
{
	int rc = kvc_flush(((struct kconn *)c)->c);

	return rc == 0 ? 0 : rc == -KVC_AGAIN ? 1 : -1;
}

static int kvd_input(void *c)
{
	return kvc_consume_input(((struct kconn *)c)->c) ? -1 : 0;
}

/* HGETALL's pairs, or HGET's one value, as the record's fields. */
static void judge_read(struct kconn *k, kvc_reply *r, int field,
		       struct kb_reply *out)
{
	kvc_val f, v;

	out->fields = k->fv;
	if (field >= 0) {
		if (kvc_reply_next(r, NULL, &v) || !v.p) {
			out->status = REPLY_NOT_FOUND;
			return;
		}
		k->fv[0] = (struct kb_fval){(unsigned)field, v.p, v.len};
		out->nfields = 1;
		return;
	}
	while (out->nfields < k->nf && kvc_reply_next(r, &f, &v) == 0) {
		struct kb_fval *fv = &k->fv[out->nfields++];

		if (rec_field_index(f.p, f.len, &fv->idx))
			fv->idx = UINT_MAX; /* not one of ours: wrong */
		fv->val = v.p;
		fv->len = v.len;
	}
}

static int kvd_reply(void *conn, enum kb_req_kind kind, int field,
		     struct kb_reply *out)
{
	struct kconn *k = conn;
	kvc_reply *r;
	kvc_val v;
	int rc = kvc_read_reply(k->c, &r), st;

	if (rc == -KVC_AGAIN)
		return 0;
	if (rc)
		return -1;
	st = kvc_reply_status(r);
	out->status = st == 0		     ? REPLY_OK
		      : st == -KVC_NOT_FOUND ? REPLY_NOT_FOUND
					     : REPLY_ERROR;
	if (out->status == REPLY_ERROR) {
		out->msg = kvc_reply_error(r);
		return 1;
	}
	if (kind == REQ_GET && st == 0 && kvc_reply_value(r, &v) == 0) {
		out->val = v.p;
		out->vlen = v.len;
	}
	if (kind == REQ_SCAN)
		while (kvc_reply_next(r, NULL, NULL) == 0)
			out->items++;
	if (kind == REQ_FSCAN) /* the records that are hashes */
		for (unsigned t;
		     kvc_reply_next_typed(r, NULL, &t, NULL, NULL) == 0;)
			out->items += t == KVC_TYPE_HASH;
	if (kind == REQ_READ && st == 0)
		judge_read(k, r, field, out);
	return 1;
}

static const char *kvd_errmsg(void *c)
{
	return kvc_errmsg(((struct kconn *)c)->c);
}

static void kvd_close(void *c)
{
	struct kconn *k = c;

	if (!k)
		return;
	kvc_close(k->c);
	free(k->names);
	free(k->fk);
	free(k->fvv);
	free(k->fv);
	free(k);
}

const struct kb_driver driver_kvd = {
    .name = "kvd",
    .default_port = KVC_DEFAULT_PORT,
    .tls_port = KVC_DEFAULT_TLS_PORT,
    .fields = 1,
    .fields_ops = "HSET, HGETALL, HGET (native)",
    .connect = kvd_connect,
    .fd = kvd_fd,
    .send = kvd_send,
    .flush = kvd_flush,
    .input = kvd_input,
    .reply = kvd_reply,
    .errmsg = kvd_errmsg,
    .close = kvd_close,
};
