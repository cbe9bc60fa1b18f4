/* proto.h - the protocol table: what the network layer knows of a protocol.
 *
 * The loop and the connection code (loop.c, conn.c) own sockets, buffers,
 * reply order and backpressure, and reach a protocol only through its entry
 * in kvd_protos[], as Redis reaches a connection's kind through its
 * ConnectionType and ae its file events through their procs.  A protocol
 * defines one const struct kvd_proto in its own folder; protos.c lists them
 * by id, and listen.c says which configured ports and sockets speak each.
 * Adding a protocol is one id below, one table entry and its listeners.
 */
#ifndef KVD_PROTO_H
#define KVD_PROTO_H

#include <stddef.h>
#include <stdint.h>

struct kvd_conn;
struct kvd_io;
struct kvd_pend;

/* Protocol ids: c->proto, the index of kvd_protos[]. */
enum kvd_proto_id {
	KVD_PROTO_NATIVE, /* msgpack frames (native/) */
	KVD_PROTO_RESP,	  /* Redis RESP2 (resp/) */
	KVD_PROTO_HTTP,	  /* /metrics (ops/) */
	KVD_PROTO_MONGO,  /* MongoDB's wire protocol (doc/doc_proto.c) */
	KVD_NPROTO
};

struct kvd_proto {
	const char *name; /* for the log */
	/* Run one request from p[0..n): the bytes consumed, 0 when more
	 * input is needed or the connection stalled. */
	size_t (*input)(struct kvd_conn *c, const uint8_t *p, size_t n);
	/* Encode the reply of a finished write pend (its turn has come). */
	void (*wreply)(struct kvd_conn *c, struct kvd_pend *pd);
	/* Optional: a connection was accepted, and is about to be freed. */
	void (*open)(struct kvd_conn *c);
	void (*close)(struct kvd_conn *c);
	/* Optional: the io thread was woken (other threads' work for its
	 * connections: CLIENT KILL, MONITOR, pub/sub messages). */
	void (*wake)(struct kvd_io *io);
	/* Optional: c's turn has come again (kvd_io_again). */
	void (*again)(struct kvd_conn *c);
	/* Optional: bytes of queued requests the protocol holds for c
	 * (MULTI's queue), for CLIENT LIST's multi-mem. */
	size_t (*held)(const struct kvd_conn *c);
	/* What a connection over max-clients is told before it is closed. */
	const void *busy;
	size_t busy_len;
};

extern const struct kvd_proto kvd_native_proto, kvd_resp_proto, kvd_http_proto,
    kvd_mongo_proto;
/* By id (protos.c). */
extern const struct kvd_proto *const kvd_protos[KVD_NPROTO];

#endif
