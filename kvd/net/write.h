/* write.h - turning a validated write request into committer work.
 *
 * Both protocols use these: they check a request whole, then hand it here.
 * Each call queues one kvd_pend on the connection (its place in the reply
 * order) and one kvd_wreq per shard the request touches; when every part has
 * been committed, the protocol's wreply hook encodes the answer.  A request
 * touching several shards is atomic per shard, not across shards.
 */
#ifndef KVD_WRITE_H
#define KVD_WRITE_H

#include "conn.h"
#include "store.h"

/* Queue a one-key write (PUT, DEL, INCR, APPEND, EXPIRE, GETDEL).
 * KV_OK once queued; KV_INTERNAL (out of memory) when nothing was. */
int kvd_write_one(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		  struct kv_slice key, struct kv_slice val, uint64_t expire_at,
		  uint8_t flags, int64_t delta);
/* The same, tagged with what it does to its key beyond what its kind says
 * (keyspace.h's KVD_TAG: the keyspace event it is, the encoding of what it
 * stores); kvd_write_one's tag is 0, what its kind says. */
int kvd_write_tagged(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		     struct kv_slice key, struct kv_slice val,
		     uint64_t expire_at, uint8_t flags, int64_t delta,
		     uint16_t tag);

/* Queue merge operation id (store.h, KVD_W_MERGE) of key k in keyspace ks
 * with operand v, on shard (-1: the key's, router.h): its pend gets the merge's status,
 * result and reply bytes, and aux (the caller's tag for it).  KV_OK once
 * queued; KV_INTERNAL (out of memory) when nothing was. */
int kvd_write_merge(struct kvd_conn *c, unsigned op, unsigned ks, unsigned id,
		    int shard, struct kv_slice k, struct kv_slice v,
		    uint32_t aux);
/* Queue a bulk merge (store.h, KVD_W_BULK) of merge id over keyspace ks
 * on shard, from key from on, v its [u16 n][end key][operand], at most max
 * keys: its pend gets the status, the keys read (result) and the key to go
 * on from, or the merge's refusal.  As kvd_write_merge. */
int kvd_write_bulk(struct kvd_conn *c, unsigned op, unsigned ks, unsigned id,
		   unsigned shard, struct kv_slice from, struct kv_slice v,
		   int64_t max, uint32_t aux);
struct kvd_excl;
/* Inside exclusive section x (shard.h): queue a one-key write and
 * commit it at once, so that what follows sees it journaled (in sync mode
 * flushed).  A PUT stores a value of type vtype (RENAME and COPY move any
 * value).  Its request, for its status, or NULL when it could not be
 * queued. */
struct kvd_wreq *kvd_write_now(struct kvd_conn *c, struct kvd_excl *x,
			       unsigned op, enum kvd_wkind kind,
			       struct kv_slice key, struct kv_slice val,
			       uint64_t expire_at, uint16_t tag,
			       unsigned vtype);

/* Item i of a multi-key write: its key, and its value for puts.  Called
 * for i = 0 .. n-1 in order, twice (sizes first, then copies). */
typedef void (*kvd_item_fn)(void *arg, uint32_t i, struct kv_slice *key,
			    struct kv_slice *val);

/* Queue a write of n items (KVD_W_PUT or KVD_W_DEL), split by shard.  The
 * items must already be valid.  KV_OK: queued, or answered in order with
 * KV_INTERNAL if memory ran out before anything was queued. */
int kvd_write_multi(struct kvd_conn *c, unsigned op, enum kvd_wkind kind,
		    uint32_t n, kvd_item_fn item, void *arg, uint64_t expire_at,
		    uint16_t tag);

/* Queue kind (KVD_W_FLUSH) on every shard. */
int kvd_write_all(struct kvd_conn *c, unsigned op, enum kvd_wkind kind);

/* Writes in flight are bounded per connection (max-inflight-write-bytes,
 * max-inflight-writes) and per shard (max-inflight-shard-bytes, shared out
 * equally among the io threads, so each thread counts its own share without
 * atomics).  A request is always queued whole; one that leaves its
 * connection or its shard over a bound stalls the connection
 * (STALL_INFLIGHT), which stops it being parsed, then read, until
 * kvd_write_may_resume says so.  The overshoot is one request. */

/* A write charged to its connection came back: uncount it. */
void kvd_write_uncharge(struct kvd_conn *c, const struct kvd_wreq *w);
/* Over a bound: must the connection stop taking requests? */
int kvd_write_over(const struct kvd_conn *c);
/* May a connection stalled by kvd_write_over take requests again?  Once
 * its own writes are below half its bounds and the shard it waited for is
 * within its share, or once it has none in flight at all (so a shard kept
 * busy by others still lets it through one request at a time). */
int kvd_write_may_resume(const struct kvd_conn *c);

#endif
