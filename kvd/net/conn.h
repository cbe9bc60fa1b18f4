/* conn.h - a client connection: its buffers, its reply order, its state.
 *
 * Replies leave in request order, and a connection reads its own writes.
 * Writes in flight form a FIFO of kvd_pend; a reply is encoded when its pend
 * reaches the head and is complete.  Further writes always start at once
 * (one connection's writes reach each committer in order).  A read while
 * writes are in flight runs at once only if none of them touches its keys:
 * each connection counts its in-flight writes per key slot (256 slots by
 * key hash; a collision only costs a wait).  It then reads a snapshot
 * that its own pending writes could not have changed, and its reply bytes
 * wait in a done pend for the replies before it.  Otherwise the connection
 * stalls until those writes are committed and answered, and re-reads the
 * request then.  So a pipelined PUT k, GET k always reads the PUT, while
 * PUT k, GET j does not wait for a commit.
 *
 * The io loop owns the socket and the io_uring operations; this module only
 * turns bytes in into replies out and tells the loop what it wants through
 * flags (pause reading, close after flushing).
 */
#ifndef KVD_CONN_H
#define KVD_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"
#include "kvd.h"
#include "proto.h"
#include "router.h"

enum {
	CONN_RECV_ARMED = 1u << 0, /* loop: a multishot recv is active */
	CONN_SEND_BUSY = 1u << 1,  /* loop: a send is in flight */
	CONN_DIRTY = 1u << 2,	   /* loop: on the flush list */
	CONN_PAUSED = 1u << 3,	   /* input over its cap: stop reading */
	CONN_EOF = 1u << 4,	   /* the peer will send nothing more */
	CONN_CLOSING = 1u << 5,	   /* flush what is queued, then close */
	CONN_DEAD = 1u << 6,	   /* socket shut down; free when idle */
	CONN_CANCELING = 1u << 7,  /* loop: recv cancel submitted */
	CONN_AUTHED = 1u << 8,
	CONN_ABORT = 1u << 9,	   /* close now, unsent replies or not */
	CONN_TALKED = 1u << 10,	   /* its first bytes were looked at */
	CONN_HANDSHAKE = 1u << 11, /* loop: holds a TLS handshake slot */
	CONN_HS_WAIT = 1u << 12,   /* loop: waits, unread, for a slot */
	CONN_REPLICA = 1u << 15,   /* asked for the journal (repl.c) */
	CONN_AGAIN = 1u << 16,	   /* loop: on io->again (kvd_io_again) */
};

enum kvd_stall {
	STALL_NONE,
	STALL_WRITES,	/* a non-write waits for earlier writes */
	STALL_OUTPUT,	/* too many reply bytes not yet sent */
	STALL_INFLIGHT, /* too many write bytes or keys not yet committed */
	STALL_YIELD,	/* a read gave the thread back: goes on next turn */
	STALL_TURN,	/* ran its share of the turn: goes on next turn */
};

/* How long one connection runs its requests (pipelined ones, one after
 * another) before its thread's other connections are served, at least
 * one request each time (a coarse clock: 0 to 4 ms). */
#define KVD_CONN_SLICE_MS 2

struct kvd_conn {
	struct kvd_io *io;
	struct kvd_tls *tls; /* TLS state (tls.c), NULL on a plain port */
	int fd;
	uint8_t proto; /* enum kvd_proto_id: its kvd_protos[] entry */
	uint8_t stall;
	uint8_t auth_fails; /* failed AUTH attempts (auth.c) */
	uint32_t flags;
	uint64_t id;
	uint64_t last_ms;  /* last input, for idle-timeout */
	uint64_t req_ms;   /* since when a request is incomplete, or 0 */
	uint64_t out_ms;   /* output stalled, or last moved (output-timeout) */
	struct kv_buf in;  /* unparsed input */
	struct kv_buf out; /* replies not yet handed to the kernel */
	struct kv_buf tx;  /* replies being sent */
	size_t tx_off;
	struct kvd_pend *pend_head, *pend_tail;
	unsigned npend;
	unsigned wall;	     /* in-flight writes touching every key */
	uint32_t wkeys[256]; /* in-flight key writes, by kvd_key_slot */
	size_t deferred;     /* reply bytes held in done pends */
	uint64_t wbytes;     /* write payload bytes in flight */
	uint64_t witems;     /* keys (and FLUSHALL parts) in flight */
	uint16_t wshard;     /* 1 + a shard over its bound we wrote to, or 0 */
	struct kvd_conn *dirty_next;
	struct kvd_conn *again_next;  /* loop: io->again's next */
	struct kvd_conn *hs_next;     /* loop: the next waiting for a slot */
	struct kvd_conn *prev, *next; /* the io thread's list of connections */
	/* Called as c is freed, after its protocol's close, when a command
	 * gave c a second role (repl.c: a replica's link); else NULL. */
	void (*closed)(struct kvd_conn *c);
	uint32_t resp_state; /* RESP: protocol-specific flags */
	void *mdoor;	     /* MongoDB: the door's connection (mdoor.h) */
	void *mwrite; /* MongoDB: its write in flight (doc_mdoor_write.c) */
	void *nread;  /* native: a sorted DOCFIND page that gave its thread
		       * back, until it answers (cmd_docfind.c) */
	struct {      /* RESP: a multibulk validated so far */
		uint32_t off, argc, seen, body;
	} resp_mb;
	char name[64]; /* RESP CLIENT SETNAME (written under resp_intro.c's
			* registry lock: CLIENT LIST reads it) */
	/* RESP introspection (resp_intro.c): in its registry while open;
	 * other io threads read these under the registry's lock. */
	struct kvd_conn *reg_prev, *reg_next;
	struct resp_monitor *mon; /* MONITOR's feed, or NULL */
	struct resp_txq *txq;	  /* MULTI's queue and WATCHed keys */
	struct resp_sub *psub;	  /* its subscriptions (resp_pubsub.c) */
	_Atomic uint32_t nsubs;	  /* how many: others read it (CLIENT) */
	_Atomic uint32_t npsubs;  /* of which patterns */
	uint64_t born_ms;	  /* fixed at open, as the addresses */
	_Atomic uint64_t act_ms;  /* when the last command ran */
	_Atomic uint16_t act_cmd; /* and its command id + 1 */
	atomic_int kill;	  /* CLIENT KILL: its own thread closes it */
	/* Its buffer figures (struct kvd_conn_bufs), as its own thread last
	 * published them (kvd_conn_publish), for CLIENT LIST elsewhere. */
	_Atomic uint64_t pub_bufs[7];
	/* "ip:port", or "path:0" on a Unix socket (sun_path: 108 bytes) */
	char addr[112], laddr[112];
};

/* A connection's buffers as CLIENT LIST shows them, in Redis's names:
 * qbuf the input not yet run (a partial request, or requests waiting for
 * earlier writes), qbuf_free the room left in its buffer, multi_mem what
 * MULTI's queue holds, obl the replies built and not yet sent, oll the
 * replies still waiting for their turn (writes in flight, and replies held
 * behind them), omem the memory the output holds (buffers and held
 * replies), tot_mem all of these buffers. */
struct kvd_conn_bufs {
	uint64_t qbuf, qbuf_free, multi_mem, obl, oll, omem, tot_mem;
};

/* Its own thread, after c changed (loop.c): publish c's figures for
 * other threads (relaxed stores, no lock). */
void kvd_conn_publish(struct kvd_conn *c);
/* c's figures: computed now when c is the caller's own connection self,
 * else as c's thread last published them. */
void kvd_conn_bufs(const struct kvd_conn *self, struct kvd_conn *c,
		   struct kvd_conn_bufs *b);

/* The loop calls these. */
void kvd_conn_input(struct kvd_conn *c, const uint8_t *data, size_t len);
void kvd_conn_sent(struct kvd_conn *c);	   /* a send finished; maybe resume */
void kvd_conn_wdone(struct kvd_wreq *w);   /* a write came back */
void kvd_conn_release(struct kvd_conn *c); /* free buffers and pends */
/* Its turn has come again (kvd_io_again): its protocol's read goes on
 * (STALL_YIELD), or its buffered requests (STALL_TURN). */
void kvd_conn_again(struct kvd_conn *c);
/* Its stall is over (STALL_YIELD's read answered): run its buffered
 * input (the protocol's again calls it). */
void kvd_conn_resume(struct kvd_conn *c);

/* Handlers call these. */

/* Reserve room for n more reply bytes; NULL when out of memory (the
 * connection is then closed). */
uint8_t *kvd_reply_room(struct kvd_conn *c, size_t n);
void kvd_reply_append(struct kvd_conn *c, const void *p, size_t n);

/* Queue a pending reply slot for a write about to be dispatched. */
struct kvd_pend *kvd_conn_pend(struct kvd_conn *c, unsigned op);
/* Encode the replies of finished pends at the head of the queue. */
void kvd_conn_flush(struct kvd_conn *c);

/* In-flight write bookkeeping (write.c counts, kvd_conn_wdone uncounts),
 * by the slot of the key's hash (router.h).
 *
 * A slot counter cannot wrap: it is at most witems, and a connection stops
 * being parsed once witems exceeds max-inflight-writes (at most 2^24), so
 * witems stays below 2^24 plus the keys of one request.  A request holds at
 * most max-frame-size (2 GiB) / 2 bytes per key = 2^30 keys: the sum is
 * below 2^32. */
static inline void kvd_conn_track(struct kvd_conn *c, unsigned slot, int d)
{
	/* d converted to the counter's own width: -1 becomes 2^32 - 1, whose
	 * addition is a decrement.  (A narrower cast once added 65,535 per
	 * finished write, so a count reached zero with writes in flight.) */
	c->wkeys[slot] += (uint32_t)d;
}
/* Could an in-flight write of this connection touch key k? */
static inline int kvd_conn_key_busy(const struct kvd_conn *c, const void *k,
				    size_t n)
{
	return c->wall || c->wkeys[kvd_key_slot(k, n)];
}
/* A reply written at c->out from mark on must wait for earlier replies:
 * move it into a done pend at the tail.  No-op when nothing is pending. */
void kvd_conn_defer(struct kvd_conn *c, size_t mark, unsigned op);

/* The shortest input worth keeping without a complete request in sight;
 * more than this with no progress pauses reading. */
#define KVD_INPUT_SOFT_CAP (1u << 20)

/* Before AUTH a connection may hold at most this many unsent reply bytes
 * and this much unparsed input (auth.h caps each request at 16 KiB); a
 * peer over either is closed at once, unsent replies dropped. */
#define KVD_PREAUTH_MAX_OUTPUT (16u << 10)
#define KVD_PREAUTH_MAX_INPUT (32u << 10)

#endif
