/* keyspace.c - keyspace notifications and OBJECT ENCODING's memory of how
 * values were made (see keyspace.h). */
#include "keyspace.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "kv_buf.h"
#include "kv_status.h"
#include "resp.h"
#include "store.h"

/* ===================== Events ===================== */

static const struct {
	const char *name;
	unsigned cls;
} events[KVD_NEV] = {
#define KVD_EV_ROW(id, nm, c) [KVD_EV_##id] = {nm, c},
    KVD_EVENTS(KVD_EV_ROW)
#undef KVD_EV_ROW
};

/* The classes kvd publishes events of. */
#define PUBLISHED                                                              \
	(KVD_NOTIFY_GENERIC | KVD_NOTIFY_STRING | KVD_NOTIFY_HASH |            \
	 KVD_NOTIFY_EXPIRED | KVD_NOTIFY_NEW)

/* Events kept until their writes are committed: [u8 event][u8 0]
 * [u16 shard or NO_SHARD][u32 key length][key], in the order made. */
#define NO_SHARD 0xffffu
static __thread struct kv_buf kept;

static unsigned flags_of(const struct kvd_config *cfg)
{
	return cfg ? KVD_LIVE(cfg->notify_events) : 0;
}

/* Is anything to be published at all? */
static int active(unsigned fl)
{
	return (fl & (KVD_NOTIFY_KEYSPACE | KVD_NOTIFY_KEYEVENT)) &&
	       (fl & PUBLISHED);
}

static void keep(unsigned fl, unsigned ev, unsigned shard, struct kv_slice k)
{
	uint8_t hdr[8] = {(uint8_t)ev, 0};
	uint16_t s = (uint16_t)shard;
	uint32_t n = (uint32_t)k.n;

	if (!(fl & events[ev].cls))
		return;
	memcpy(hdr + 2, &s, 2);
	memcpy(hdr + 4, &n, 4);
	kv_buf_append(&kept, hdr, sizeof(hdr));
	kv_buf_append(&kept, k.p, k.n);
}

/* One event on both channels, as Redis publishes it (notifyKeyspaceEvent:
 * the keyspace one first). */
static void publish_one(unsigned fl, unsigned ev, struct kv_slice key)
{
	static const char space[] = "__keyspace@0__:",
			  event[] = "__keyevent@0__:";
	const char *name = events[ev].name;
	struct kv_slice nm = {(const uint8_t *)name, strlen(name)};
	struct kv_buf ch = {0};

	if (fl & KVD_NOTIFY_KEYSPACE) {
		kv_buf_append(&ch, space, sizeof(space) - 1);
		kv_buf_append(&ch, key.p, key.n);
		if (!ch.err)
			kvd_resp_publish((struct kv_slice){ch.data, ch.len},
					 nm);
	}
	if (fl & KVD_NOTIFY_KEYEVENT) {
		ch.len = 0;
		kv_buf_append(&ch, event, sizeof(event) - 1);
		kv_buf_append(&ch, nm.p, nm.n);
		if (!ch.err)
			kvd_resp_publish((struct kv_slice){ch.data, ch.len},
					 key);
	}
	kv_buf_free(&ch);
}

void kvd_keyspace_publish(const struct kvd_config *cfg, const uint8_t *failed)
{
	/* nothing kept: data is NULL, and NULL + 0 is undefined in C */
	const uint8_t *p = kept.data, *end = p ? p + kept.len : NULL;
	unsigned fl = flags_of(cfg);

	/* out of memory while keeping them: none (a partial one may be
	 * cut), rather than wrong ones */
	while (p && !kept.err && end - p >= 8) {
		uint16_t s;
		uint32_t n;

		memcpy(&s, p + 2, 2);
		memcpy(&n, p + 4, 4);
		if ((size_t)(end - p - 8) < n)
			break;
		if (s == NO_SHARD || !failed || !failed[s])
			publish_one(fl, p[0], (struct kv_slice){p + 8, n});
		p += 8 + n;
	}
	kvd_keyspace_drop();
}

void kvd_keyspace_drop(void)
{
	kv_buf_free(&kept); /* (a thread's buffer must not outlive it) */
}

void kvd_keyspace_event(const struct kvd_config *cfg, unsigned ev,
			struct kv_slice key)
{
	unsigned fl = flags_of(cfg);

	if (active(fl))
		keep(fl, ev, NO_SHARD, key);
}

void kvd_keyspace_renamed(const struct kvd_config *cfg, struct kv_slice src,
			  struct kv_slice dst)
{
	kvd_keyspace_event(cfg, KVD_EV_RENAME_FROM, src);
	kvd_keyspace_event(cfg, KVD_EV_RENAME_TO, dst);
}

/* ===================== Encodings ===================== */

/* Per shard: BUCKETS buckets of WAYS slots, each 0 or a key's hash with
 * its class in the low two bits.  One writer (the shard's), readers on any
 * thread: every slot is one atomic word. */
#define BUCKETS 4096u
#define WAYS 4u

struct enc_table {
	_Atomic(_Atomic uint64_t *) slots;
	atomic_uint n; /* slots in use */
};

static struct enc_table enc[KVD_MAX_SHARDS];

static uint64_t tag_of(struct kv_slice k)
{
	return (XXH3_64bits(k.p, k.n) | 4u) & ~(uint64_t)3;
}

static _Atomic uint64_t *bucket(_Atomic uint64_t *slots, uint64_t tag)
{
	return slots + (size_t)((tag >> 40) % BUCKETS) * WAYS;
}

unsigned kvd_keyspace_encoding(unsigned shard, struct kv_slice key)
{
	_Atomic uint64_t *slots, *b;
	uint64_t tag;

	if (shard >= KVD_MAX_SHARDS ||
	    !(slots = atomic_load_explicit(&enc[shard].slots,
					   memory_order_acquire)))
		return KVD_ENC_AUTO;
	tag = tag_of(key);
	b = bucket(slots, tag);
	for (unsigned i = 0; i < WAYS; i++) {
		uint64_t v = atomic_load_explicit(&b[i], memory_order_relaxed);

		if ((v & ~(uint64_t)3) == tag)
			return (unsigned)(v & 3);
	}
	return KVD_ENC_AUTO;
}

/* The shard's writer: key's class is now cls (AUTO: no entry). */
static void enc_set(unsigned shard, struct kv_slice key, unsigned cls)
{
	struct enc_table *e = &enc[shard];
	_Atomic uint64_t *slots = atomic_load(&e->slots), *b, *free = NULL;
	uint64_t tag;

	if (!slots) {
		if (cls == KVD_ENC_AUTO ||
		    !(slots = calloc(BUCKETS * WAYS, sizeof(*slots))))
			return; /* (out of memory: it reads as SET's) */
		atomic_store_explicit(&e->slots, slots, memory_order_release);
	}
	tag = tag_of(key);
	b = bucket(slots, tag);
	for (unsigned i = 0; i < WAYS; i++) {
		uint64_t v = atomic_load_explicit(&b[i], memory_order_relaxed);

		if ((v & ~(uint64_t)3) == tag) {
			atomic_store_explicit(&b[i], cls ? tag | cls : 0,
					      memory_order_relaxed);
			if (!cls)
				atomic_fetch_sub(&e->n, 1);
			return;
		}
		if (!v && !free)
			free = &b[i];
	}
	if (cls == KVD_ENC_AUTO)
		return;
	if (free)
		atomic_fetch_add(&e->n, 1);
	else /* a full bucket forgets one: that key reads as SET's */
		free = &b[(tag >> 20) % WAYS];
	atomic_store_explicit(free, tag | cls, memory_order_relaxed);
}

void kvd_keyspace_forget(unsigned shard)
{
	_Atomic uint64_t *slots;

	if (shard >= KVD_MAX_SHARDS ||
	    !atomic_load_explicit(&enc[shard].n, memory_order_relaxed))
		return;
	slots = atomic_load(&enc[shard].slots);
	for (size_t i = 0; i < BUCKETS * WAYS; i++)
		atomic_store_explicit(&slots[i], 0, memory_order_relaxed);
	atomic_store(&enc[shard].n, 0);
}

/* ===================== Writes ===================== */

/* Item i of op's items ([u16 klen][u32 vlen][key][value], shard.h). */
static const uint8_t *next_key(const uint8_t *p, struct kv_slice *k)
{
	uint16_t kn;
	uint32_t vn;

	memcpy(&kn, p, 2);
	memcpy(&vn, p + 2, 4);
	k->p = p + KVD_ITEM_HDR;
	k->n = kn;
	return p + KVD_ITEM_HDR + kn + vn;
}

uint32_t kvd_keyspace_seen(const struct kvd_config *cfg, enum kvd_wkind kind)
{
	if (kind == KVD_W_APPEND) /* its encoding: was the key there? */
		return 1;
	return active(flags_of(cfg)) &&
	       ((kind <= KVD_W_GETDEL && kind != KVD_W_FLUSH) ||
		kind == KVD_W_MERGE);
}

/* What item i of op found and did; without seen, what op's status says
 * (a single item, or items all stored: MPUT, MSET). */
static unsigned seen_of(const struct kvd_wop *op, uint32_t i)
{
	if (op->seen)
		return op->seen[i];
	return op->status == KV_OK ? KVD_SEEN_DONE : 0;
}

/* The class a stored key takes from op. */
static unsigned enc_class(const struct kvd_wop *op, unsigned seen)
{
	if (op->kind == KVD_W_APPEND)
		return seen & KVD_SEEN_LIVE ? KVD_ENC_RAW : KVD_ENC_AUTO;
	if (op->kind == KVD_W_PUT)
		return KVD_TAG_ENC(op->tag);
	return KVD_ENC_AUTO; /* INCR */
}

static void enc_op(unsigned shard, const struct kvd_wop *op)
{
	const uint8_t *p = op->items;
	int none = !atomic_load_explicit(&enc[shard].n, memory_order_relaxed);
	struct kv_slice k;

	if (op->kind == KVD_W_FLUSH || op->kind == KVD_W_REPL) {
		kvd_keyspace_forget(shard); /* a replica's records: as SET's */
		return;
	}
	if (op->kind == KVD_W_MERGE)
		return; /* a hash's encoding is its own (OBJECT ENCODING) */
	if (op->kind == KVD_W_EXPIRE ||
	    (none && op->kind != KVD_W_APPEND &&
	     (op->kind != KVD_W_PUT || !KVD_TAG_ENC(op->tag))))
		return;
	for (uint32_t i = 0; i < op->nitems; i++) {
		unsigned seen = seen_of(op, i);

		p = next_key(p, &k);
		if (op->kind == KVD_W_DEL || op->kind == KVD_W_GETDEL)
			enc_set(shard, k, KVD_ENC_AUTO);
		else if (seen & KVD_SEEN_DONE)
			enc_set(shard, k, enc_class(op, seen));
	}
}

/* The event op's kind says. */
static unsigned kind_event(const struct kvd_wop *op)
{
	switch (op->kind) {
	case KVD_W_PUT: return KVD_EV_SET;
	case KVD_W_INCR: return KVD_EV_INCRBY;
	case KVD_W_APPEND: return KVD_EV_APPEND;
	case KVD_W_EXPIRE:
		return op->expire_at ? KVD_EV_EXPIRE : KVD_EV_PERSIST;
	default: return KVD_EV_DEL; /* DEL, GETDEL */
	}
}

/* Redis's order: a key found expired goes first ("expired"), then a key
 * created ("new"), then the command's event and the expiry it set. */
static void events_op(unsigned fl, unsigned shard, const struct kvd_wop *op)
{
	unsigned ev = KVD_TAG_EV(op->tag);
	int del = op->kind == KVD_W_DEL || op->kind == KVD_W_GETDEL;
	int stores = op->kind != KVD_W_EXPIRE && !del;
	const uint8_t *p = op->items;
	struct kv_slice k;

	if ((op->kind > KVD_W_GETDEL && op->kind != KVD_W_MERGE) ||
	    op->kind == KVD_W_FLUSH)
		return; /* FLUSHALL has no event; a replica's records none */
	if (ev == KVD_EV_AUTO)
		ev = kind_event(op);
	for (uint32_t i = 0; i < op->nitems; i++) {
		unsigned seen = seen_of(op, i);

		p = next_key(p, &k);
		/* (an expired key left as it was is the reaper's to report) */
		if ((seen & KVD_SEEN_EXPIRED) &&
		    (del || (seen & KVD_SEEN_DONE) || op->kind == KVD_W_MERGE))
			keep(fl, KVD_EV_EXPIRED, shard, k);
		if (!(seen & KVD_SEEN_DONE))
			continue;
		if (stores &&
		    (!(seen & KVD_SEEN_LIVE) || (op->tag & KVD_TAG_NEW)))
			keep(fl, KVD_EV_NEW, shard, k);
		if (stores && (seen & KVD_SEEN_GONE)) { /* HDEL of the last */
			keep(fl, ev, shard, k);
			keep(fl, KVD_EV_DEL, shard, k);
			continue;
		}
		if (ev != KVD_EV_QUIET)
			keep(fl, ev, shard, k);
		if ((op->tag & KVD_TAG_EXPIRE) && op->kind == KVD_W_PUT)
			keep(fl, KVD_EV_EXPIRE, shard, k);
	}
}

void kvd_keyspace_op(const struct kvd_config *cfg, unsigned shard,
		     const struct kvd_wop *op)
{
	unsigned fl = flags_of(cfg);

	if (shard >= KVD_MAX_SHARDS || op->status >= KV_MALFORMED)
		return;
	enc_op(shard, op);
	if (active(fl))
		events_op(fl, shard, op);
}

struct reaped {
	unsigned fl, shard;
};

static void reaped_key(void *arg, struct kv_slice key)
{
	struct reaped *r = arg;

	keep(r->fl, KVD_EV_EXPIRED, r->shard, key);
}

void kvd_keyspace_reaped(const struct kvd_config *cfg, unsigned shard,
			 const struct kvd_wtxn *t, size_t from)
{
	struct reaped r = {flags_of(cfg), shard};

	if (active(r.fl) && (r.fl & KVD_NOTIFY_EXPIRED))
		kvd_shard_batch_keys(t, from, reaped_key, &r);
}
