/* driver_kvd.c - kvbench's kvd driver: the native msgpack protocol through
 * libkvclient, in its non-blocking mode, so that the engine's epoll loop
 * drives many pipelined connections per thread; over TLS with --tls (the
 * library's kvc_set_tls, so the same SSL_read/SSL_write path as any
 * program's).
 *
 * Records of fields (--record fields) are kvd's hashes, as YCSB's redis
 * binding makes them: HSET to insert and update (the server computes the
 * change: one round trip, no lost update), HGETALL or HGET to read, and a
 * typed SCAN (each key's fields) for YCSB's scan.
 *
 * The driver kvd-split stores the same records one key per field instead
 * (key, a 0 byte, the field's name: "user1\0field3"), the other layout
 * docs/architecture.md's section on hashes weighs, emulated over today's
 * store: an insert is an MPUT of the fields, a one-field update a PUT of
 * one key, a read of every field a SCAN of the record's prefix, a read of
 * one a GET.  YCSB's scan (E) is not offered there. */
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
	int split;	    /* kvd-split: one key per field */
	char *kb;	    /* kvd-split: the keys of a request's fields */
};

#define SPLIT_KEY_MAX (KB_REQ_KEY_MAX + 1 + KB_FIELD_NAME_MAX)

static void kvd_close(void *c);

static int fields_init(struct kconn *k, unsigned nf)
{
	k->nf = nf;
	k->names = calloc(nf ? nf : 1, sizeof(*k->names));
	k->fk = calloc(nf ? nf : 1, sizeof(*k->fk));
	k->fvv = calloc(nf ? nf : 1, sizeof(*k->fvv));
	k->fv = calloc(nf ? nf : 1, sizeof(*k->fv));
	k->kb = calloc(nf ? nf : 1, SPLIT_KEY_MAX);
	if (!k->names || !k->fk || !k->fvv || !k->fv || !k->kb)
		return -1;
	for (unsigned i = 0; i < nf; i++)
		kb_field_name(i, k->names[i]);
	return 0;
}

static void *connect_as(const struct kb_target *t, int split, char *err,
			size_t errlen)
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
	k->split = split;
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

static void *kvd_connect(const struct kb_target *t, char *err, size_t errlen)
{
	return connect_as(t, 0, err, errlen);
}

static void *split_connect(const struct kb_target *t, char *err, size_t errlen)
{
	return connect_as(t, 1, err, errlen);
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

/* kvd-split: the key of field idx of the request's record (idx -1: the
 * record's prefix, key and the 0 byte), built in slot i. */
static kvc_val split_key(struct kconn *k, const struct kb_req *r, int idx,
			 unsigned i)
{
	char *p = k->kb + (size_t)i * SPLIT_KEY_MAX;
	size_t n = r->klen;

	memcpy(p, r->key, n);
	p[n++] = '\0';
	if (idx >= 0) {
		size_t fl = strlen(k->names[idx]);

		memcpy(p + n, k->names[idx], fl);
		n += fl;
	}
	return (kvc_val){p, n};
}

static int split_send(struct kconn *k, const struct kb_req *r)
{
	kvc_val key;

	if (r->klen > KB_REQ_KEY_MAX || (r->kind == REQ_READ && r->field >= 0 &&
					 (unsigned)r->field >= k->nf))
		return -1;
	switch (r->kind) {
	case REQ_READ:
		key = split_key(k, r, r->field, 0);
		return r->field >= 0
			   ? kvc_send_get(k->c, key.p, key.len)
			   : kvc_send_scan(k->c, &key, NULL, NULL, k->nf, 0);
	case REQ_INSERT:
	case REQ_UPDATE:
		if (!r->nfv || r->nfv > k->nf)
			return -1;
		for (unsigned i = 0; i < r->nfv; i++) {
			if (r->fv[i].idx >= k->nf)
				return -1;
			k->fk[i] = split_key(k, r, (int)r->fv[i].idx, i);
			k->fvv[i] = (kvc_val){r->fv[i].val, r->fv[i].len};
		}
		if (r->nfv == 1)
			return kvc_send_put(k->c, k->fk[0].p, k->fk[0].len,
					    k->fvv[0].p, k->fvv[0].len, 0, 0);
		return kvc_send_mput(k->c, k->fk, k->fvv, r->nfv, 0);
	default: return -1; /* GET, PUT, SCAN: not with fields; FSCAN */
	}
}

static int kvd_send(void *conn, const struct kb_req *r)
{
	struct kconn *k = conn;
	kvc_conn *c = k->c;
	kvc_val start = {r->key, r->klen}, f;

	if (k->split && r->kind >= REQ_READ)
		return split_send(k, r);
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
	case REQ_IXFIND:
	case REQ_IXRANGE:
	case REQ_IXINSERT: break; /* mongodb and postgres only (kvbench.c) */
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
	if (field >= 0 && k->split) { /* a GET */
		if (kvc_reply_value(r, &v) || !v.p) {
			out->status = REPLY_NOT_FOUND;
			return;
		}
		k->fv[0] = (struct kb_fval){(unsigned)field, v.p, v.len};
		out->nfields = 1;
		return;
	}
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
		const char *z = k->split ? memchr(f.p, 0, f.len) : NULL;

		if (z) { /* kvd-split: the field's name follows the 0 byte */
			f.len -= (size_t)(z + 1 - (const char *)f.p);
			f.p = z + 1;
		}
		if (rec_field_index(f.p, f.len, &fv->idx))
			fv->idx = UINT_MAX; /* not one of ours: wrong */
		fv->val = v.p;
		fv->len = v.len;
	}
	if (k->split && !out->nfields) /* no key of the record */
		out->status = REPLY_NOT_FOUND;
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
	free(k->kb);
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

/* YCSB's scan of records one key per field is not offered. */
static int split_setup(const struct kb_target *t, char *err, size_t errlen)
{
	if (t->fields && t->scans) {
		snprintf(err, errlen,
			 "kvd-split stores records one key per field and has "
			 "no YCSB scan: run E with -D kvd");
		return -1;
	}
	return 0;
}

/* The per-field layout, emulated (the comment at the top). */
const struct kb_driver driver_kvd_split = {
    .name = "kvd-split",
    .default_port = KVC_DEFAULT_PORT,
    .tls_port = KVC_DEFAULT_TLS_PORT,
    .fields = 1,
    .fields_ops = "one key per field: MPUT, PUT, SCAN of the record's "
		  "prefix, GET",
    .setup = split_setup,
    .connect = split_connect,
    .fd = kvd_fd,
    .send = kvd_send,
    .flush = kvd_flush,
    .input = kvd_input,
    .reply = kvd_reply,
    .errmsg = kvd_errmsg,
    .close = kvd_close,
};
