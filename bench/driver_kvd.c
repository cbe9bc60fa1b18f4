/* driver_kvd.c - kvbench's kvd driver: the native msgpack protocol through
 * libkvclient, in its non-blocking mode, so that the engine's epoll loop
 * drives many pipelined connections per thread; over TLS with --tls (the
 * library's kvc_set_tls, so the same SSL_read/SSL_write path as any
 * program's).
 *
 * The native protocol has no fields yet: for --record fields, fieldops.c
 * stores each record as one value and makes YCSB's operations of GET and
 * PUT.  When libkvclient has hash operations, this driver takes REQ_READ,
 * REQ_UPDATE, REQ_INSERT and REQ_FSCAN in kvd_send, sets .fields and
 * .fields_ops, and the engine sends them instead. */
#include <stdio.h>
#include <string.h>

#include "kvbench.h"
#include "kvclient.h"

static void *kvd_connect(const struct kb_target *t, char *err, size_t errlen)
{
	kvc_conn *c = NULL;
	struct kvc_tls_opts tls = {.ca_file = t->cacert,
				   .ca_dir = t->cacertdir,
				   .cert_file = t->cert,
				   .key_file = t->key,
				   .server_name = t->sni,
				   .insecure = t->insecure};

	if (kvc_create(&c)) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* The AUTH goes out within kvc_connect, before the connection turns
	 * non-blocking: a wrong password fails the connect, and a server
	 * without one is not an error (libkvclient ignores its DISABLED). */
	if ((t->tls && kvc_set_tls(c, &tls)) ||
	    (t->password &&
	     kvc_set_password(c, t->password, strlen(t->password))) ||
	    kvc_connect(c, t->host, t->port) || kvc_set_nonblock(c, 1)) {
		snprintf(err, errlen, "%s", kvc_errmsg(c));
		kvc_close(c);
		return NULL;
	}
	return c;
}

static int kvd_fd(void *c)
{
	return kvc_fd(c);
}

static int kvd_send(void *c, const struct kb_req *r)
{
	kvc_val start = {r->key, r->klen};

	switch (r->kind) {
	case REQ_GET: return kvc_send_get(c, r->key, r->klen);
	case REQ_PUT:
		return kvc_send_put(c, r->key, r->klen, r->val, r->vlen, 0, 0);
	case REQ_SCAN:
		/* YCSB's scan: count records from the key on, in key order. */
		return kvc_send_scan(c, NULL, &start, NULL, r->count, 0);
	default: break; /* field operations: not with .fields 0 */
	}
	return -1;
}

static int kvd_flush(void *c)
{
	int rc = kvc_flush(c);

	return rc == 0 ? 0 : rc == -KVC_AGAIN ? 1 : -1;
}

static int kvd_input(void *c)
{
	return kvc_consume_input(c) ? -1 : 0;
}

static int kvd_reply(void *c, enum kb_req_kind kind, int field,
		     struct kb_reply *out)
{
	kvc_reply *r;
	kvc_val v;
	int rc = kvc_read_reply(c, &r), st;

	(void)field; /* no field operations (yet): never asked */
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
	return 1;
}

static const char *kvd_errmsg(void *c)
{
	return kvc_errmsg(c);
}

static void kvd_close(void *c)
{
	kvc_close(c);
}

const struct kb_driver driver_kvd = {
    .name = "kvd",
    .default_port = KVC_DEFAULT_PORT,
    .tls_port = KVC_DEFAULT_TLS_PORT,
    .fields = 0,
    .connect = kvd_connect,
    .fd = kvd_fd,
    .send = kvd_send,
    .flush = kvd_flush,
    .input = kvd_input,
    .reply = kvd_reply,
    .errmsg = kvd_errmsg,
    .close = kvd_close,
};
