/* resp_pubsub.c - PUBLISH, SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE
 * and PUBSUB on the RESP port: a plain in-memory pub/sub, as Redis 7.0's
 * over RESP2 (what Redis Sentinel needs from a server it monitors: its
 * instances find each other on the __sentinel__:hello channel).
 *
 * Subscribers live on the io thread that accepted them, and only that
 * thread may touch their output, so a publisher on any thread never writes
 * to a subscriber's connection.  Under one mutex (ps_lock) it appends the
 * message to the subscriber's feed, and when the feed was empty it puts the
 * subscriber on its thread's ready list and wakes that thread (its
 * eventfd), as MONITOR does (resp_intro.c).  Matching the channel against
 * the patterns is done with ps_lock released (the pattern topics taken,
 * pinned, under it first), so that a long match (resp_glob.c bounds it)
 * holds up only the publisher's own thread; PUBSUB CHANNELS likewise.  The woken thread moves each
 * ready feed into the connection's output (kvd_resp_pubsub_wake).  A
 * subscriber's own thread also moves its feed before answering any command
 * of it, so a message published before an UNSUBSCRIBE is delivered before
 * its confirmation, as in Redis.  If the connection still has writes in
 * flight (MULTI ... SUBSCRIBE ... EXEC), moved messages wait behind their
 * replies (kvd_conn_defer).
 *
 * Bounds: pubsub-max-output caps what a subscriber may have pending.  A
 * feed that would outgrow it, or an output holding more than it once the
 * feed is moved in, closes the connection (counted, logged rate-limited),
 * as Redis's client-output-buffer-limit pubsub does: a subscriber that
 * never reads costs at most about twice the limit.  A connection's
 * subscriptions (their names plus PS_SUB_COST bytes each) are held to
 * max-output, and every connection's together to pubsub-max-subscriptions
 * and pubsub-max-subscription-bytes: without a bound over the server, 40
 * connections each within its own limit held gigabytes.
 *
 * The tables: channels and patterns each in a hash table of topics (name,
 * subscriber list) with a list of all of them; a subscription is one
 * member linked both in its topic's list and in its connection's (in
 * subscription order, for UNSUBSCRIBE without arguments).  A topic without
 * subscribers is freed at once, so PUBSUB CHANNELS and NUMPAT count only
 * live ones.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net/loop.h"
#include "resp.h"
#include "shash.h"

#define PS_MAX_IO 256 /* the threads option's range */
/* Bytes a subscription costs beyond its name, at most: its member (48
 * bytes, a 64-byte chunk of malloc's), and when it is the first of its
 * topic the topic (48 bytes and the name, in a chunk up to 71 larger than
 * the name) and up to two bucket pointers (16): 151, rounded up.  A
 * 100,000-channel SUBSCRIBE measured name + 151 for 8-byte names. */
#define PS_SUB_COST 160
#define PS_MIN_BUCKETS 64

struct ps_topic;
struct resp_sub;

/* One subscription: a connection to a channel or pattern. */
struct ps_member {
	struct ps_topic *t;
	struct resp_sub *s;
	struct ps_member *tprev, *tnext; /* the topic's subscribers */
	struct ps_member *sprev, *snext; /* the connection's subscriptions */
};

struct ps_topic {
	struct ps_topic *hnext;	      /* hash chain */
	struct ps_topic *prev, *next; /* every topic of its table */
	struct ps_member *subs;
	uint64_t h;
	uint32_t nsubs;
	uint32_t n;
	uint32_t pins; /* snapshots holding it (topics_take) */
	int dead;      /* dropped while pinned: the last unpin frees it */
	uint8_t name[];
};

struct ps_table {
	struct ps_topic **b;
	size_t nb, n;
	struct ps_topic *all;
};

struct resp_sub {
	struct kvd_conn *c;
	struct ps_member *chans, *chans_tail;
	struct ps_member *pats, *pats_tail;
	uint32_t nchan, npat;
	size_t mem;	    /* the subscriptions' cost, against max-output */
	struct kv_buf feed; /* messages not yet moved to the output */
	int over;	    /* outgrew pubsub-max-output: close it */
	int ready;	    /* on its thread's ready list */
	struct resp_sub *rnext;
};

static pthread_mutex_t ps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ps_table chans, pats;
/* Every connection's subscriptions, and their cost: the server's. */
static uint64_t ps_nsubs, ps_bytes;
static struct resp_sub *ready[PS_MAX_IO];
static atomic_uint ps_work[PS_MAX_IO];
/* Subscribers closed over pubsub-max-output, per io thread (its own
 * thread counts them). */
static kvd_counter over_closed[PS_MAX_IO];
static struct kvd_log_limit over_limit = KVD_LOG_LIMIT_INIT(1000);

/* ===================== Tables ===================== */

static struct ps_topic *topic_find(struct ps_table *tab, struct kv_slice name,
				   uint64_t h)
{
	if (!tab->nb)
		return NULL;
	for (struct ps_topic *t = tab->b[h & (tab->nb - 1)]; t; t = t->hnext)
		if (t->h == h && t->n == name.n &&
		    !memcmp(t->name, name.p, name.n))
			return t;
	return NULL;
}

/* Double the buckets once topics outnumber them; -1 when out of memory
 * (the table keeps working, only slower). */
static int table_grow(struct ps_table *tab)
{
	size_t nb = tab->nb ? tab->nb * 2 : PS_MIN_BUCKETS;
	struct ps_topic **b = calloc(nb, sizeof(*b));

	if (!b)
		return -1;
	for (struct ps_topic *t = tab->all; t; t = t->next) {
		t->hnext = b[t->h & (nb - 1)];
		b[t->h & (nb - 1)] = t;
	}
	free(tab->b);
	tab->b = b;
	tab->nb = nb;
	return 0;
}

static struct ps_topic *topic_get(struct ps_table *tab, struct kv_slice name)
{
	uint64_t h = kvd_shash(name.p, name.n);
	struct ps_topic *t = topic_find(tab, name, h);
	size_t i;

	if (t)
		return t;
	if ((tab->n >= tab->nb && table_grow(tab) && !tab->nb) ||
	    !(t = calloc(1, sizeof(*t) + name.n)))
		return NULL;
	t->h = h;
	t->n = (uint32_t)name.n;
	memcpy(t->name, name.p, name.n);
	i = h & (tab->nb - 1);
	t->hnext = tab->b[i];
	tab->b[i] = t;
	t->next = tab->all;
	if (tab->all)
		tab->all->prev = t;
	tab->all = t;
	tab->n++;
	return t;
}

static void topic_drop(struct ps_table *tab, struct ps_topic *t)
{
	struct ps_topic **pp = &tab->b[t->h & (tab->nb - 1)];

	while (*pp != t)
		pp = &(*pp)->hnext;
	*pp = t->hnext;
	if (t->prev)
		t->prev->next = t->next;
	else
		tab->all = t->next;
	if (t->next)
		t->next->prev = t->prev;
	tab->n--;
	if (t->pins)
		t->dead = 1;
	else
		free(t);
}

/* Every topic of tab, each pinned so that it outlives ps_lock being
 * released: the caller matches patterns against them unlocked (a match
 * may be long: resp_glob.c) and gives them back with topics_give.  0, or
 * -1 when out of memory; ps_lock held. */
static int topics_take(struct ps_table *tab, struct ps_topic ***out, size_t *n)
{
	struct ps_topic **a;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!tab->n)
		return 0;
	if (!(a = malloc(tab->n * sizeof(*a))))
		return -1;
	for (struct ps_topic *t = tab->all; t; t = t->next) {
		t->pins++;
		a[k++] = t;
	}
	*out = a;
	*n = k;
	return 0;
}

/* Unpin what topics_take pinned; ps_lock held (the caller frees a). */
static void topics_give(struct ps_topic **a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!--a[i]->pins && a[i]->dead)
			free(a[i]);
}

static struct ps_member *member_of(struct ps_topic *t, struct resp_sub *s)
{
	for (struct ps_member *m = t ? t->subs : NULL; m; m = m->tnext)
		if (m->s == s)
			return m;
	return NULL;
}

static uint32_t sub_count(const struct resp_sub *s)
{
	return s ? s->nchan + s->npat : 0;
}

/* Add s to name's topic in tab (pat: the pattern table); 0, 1 when it
 * was already there, -1 when out of memory.  ps_lock held. */
static int member_add(struct resp_sub *s, struct kv_slice name, int pat)
{
	struct ps_table *tab = pat ? &pats : &chans;
	struct ps_member **head = pat ? &s->pats : &s->chans;
	struct ps_member **tail = pat ? &s->pats_tail : &s->chans_tail;
	struct ps_topic *t = topic_get(tab, name);
	struct ps_member *m;

	if (!t)
		return -1;
	if (member_of(t, s))
		return 1;
	if (!(m = calloc(1, sizeof(*m)))) {
		if (!t->nsubs)
			topic_drop(tab, t);
		return -1;
	}
	m->t = t;
	m->s = s;
	m->tnext = t->subs;
	if (t->subs)
		t->subs->tprev = m;
	t->subs = m;
	t->nsubs++;
	m->sprev = *tail;
	if (*tail)
		(*tail)->snext = m;
	else
		*head = m;
	*tail = m;
	*(pat ? &s->npat : &s->nchan) += 1;
	s->mem += name.n + PS_SUB_COST;
	ps_nsubs++;
	ps_bytes += name.n + PS_SUB_COST;
	atomic_store_explicit(&s->c->nsubs, sub_count(s), memory_order_relaxed);
	atomic_store_explicit(&s->c->npsubs, s->npat, memory_order_relaxed);
	return 0;
}

static void member_del(struct ps_member *m, int pat)
{
	struct resp_sub *s = m->s;
	struct ps_topic *t = m->t;

	if (m->tprev)
		m->tprev->tnext = m->tnext;
	else
		t->subs = m->tnext;
	if (m->tnext)
		m->tnext->tprev = m->tprev;
	if (m->sprev)
		m->sprev->snext = m->snext;
	else
		*(pat ? &s->pats : &s->chans) = m->snext;
	if (m->snext)
		m->snext->sprev = m->sprev;
	else
		*(pat ? &s->pats_tail : &s->chans_tail) = m->sprev;
	*(pat ? &s->npat : &s->nchan) -= 1;
	s->mem -= t->n + PS_SUB_COST;
	ps_nsubs--;
	ps_bytes -= t->n + PS_SUB_COST;
	atomic_store_explicit(&s->c->nsubs, sub_count(s), memory_order_relaxed);
	atomic_store_explicit(&s->c->npsubs, s->npat, memory_order_relaxed);
	if (!--t->nsubs)
		topic_drop(pat ? &pats : &chans, t);
	free(m);
}

/* ===================== Delivery ===================== */

static uint64_t out_limit(const struct kvd_conn *c)
{
	return KVD_LIVE(c->io->srv->cfg->pubsub_max_output);
}

/* Put s on its thread's ready list and wake that thread; ps_lock held. */
static void make_ready(struct resp_sub *s)
{
	struct kvd_io *io = s->c->io;
	uint64_t one = 1;

	if (s->ready || io->idx >= PS_MAX_IO)
		return;
	s->ready = 1;
	s->rnext = ready[io->idx];
	ready[io->idx] = s;
	atomic_store(&ps_work[io->idx], 1);
	if (write(io->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("io %u: cannot wake it: %s", io->idx, strerror(errno));
}

static void deliver(struct resp_sub *s, const struct kv_buf *msg)
{
	if (s->over)
		return;
	if (s->feed.len + msg->len > out_limit(s->c) ||
	    kv_buf_append(&s->feed, msg->data, msg->len)) {
		s->over = 1; /* closed by its own thread */
		kv_buf_free(&s->feed);
	}
	make_ready(s);
}

/* Close c, which outgrew pubsub-max-output; its own thread, lock held. */
static void close_over(struct kvd_conn *c)
{
	if (c->flags & CONN_ABORT)
		return;
	c->flags |= CONN_ABORT;
	kvd_count(&over_closed[c->io->idx], 1);
	kvd_log_ratelimited(&over_limit, KVD_LOG_INFO,
			    "connection %llu: a subscriber over "
			    "pubsub-max-output (%llu bytes); closing",
			    (unsigned long long)c->id,
			    (unsigned long long)out_limit(c));
	kvd_io_mark(c);
}

/* Move s's feed into its connection's output; its own thread, lock held. */
static void drain(struct resp_sub *s)
{
	struct kvd_conn *c = s->c;
	size_t mark = c->out.len, unsent;

	if (c->flags & (CONN_ABORT | CONN_DEAD))
		return;
	if (s->over) {
		close_over(c);
		return;
	}
	if (!s->feed.len)
		return;
	resp_add_raw(c, s->feed.data, s->feed.len);
	s->feed.len = 0;
	kv_buf_trim(&s->feed, 64u << 10);
	unsent = c->out.len + (c->tx.len - c->tx_off) + c->deferred;
	if (unsent > out_limit(c)) {
		s->over = 1;
		close_over(c);
		return;
	}
	kvd_conn_defer(c, mark, RESP_CMD_PUBLISH);
	kvd_io_mark(c);
}

void kvd_resp_pubsub_wake(struct kvd_io *io)
{
	struct resp_sub *s;

	if (io->idx >= PS_MAX_IO ||
	    !atomic_load_explicit(&ps_work[io->idx], memory_order_relaxed) ||
	    !atomic_exchange(&ps_work[io->idx], 0))
		return;
	pthread_mutex_lock(&ps_lock);
	while ((s = ready[io->idx])) {
		ready[io->idx] = s->rnext;
		s->ready = 0;
		s->rnext = NULL;
		drain(s);
	}
	pthread_mutex_unlock(&ps_lock);
}

/* One message as RESP2 pushes it: message channel payload, or pmessage
 * pattern channel payload. */
static void format_msg(struct kv_buf *b, const struct ps_topic *pat,
		       struct kv_slice ch, struct kv_slice msg)
{
	char hdr[32];
	int n;

	b->len = 0;
	if (pat) {
		kv_buf_append(b, "*4\r\n$8\r\npmessage\r\n", 18);
		n = snprintf(hdr, sizeof(hdr), "$%u\r\n", pat->n);
		kv_buf_append(b, hdr, (size_t)n);
		kv_buf_append(b, pat->name, pat->n);
		kv_buf_append(b, "\r\n", 2);
	} else {
		kv_buf_append(b, "*3\r\n$7\r\nmessage\r\n", 17);
	}
	n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", ch.n);
	kv_buf_append(b, hdr, (size_t)n);
	kv_buf_append(b, ch.p, ch.n);
	n = snprintf(hdr, sizeof(hdr), "\r\n$%zu\r\n", msg.n);
	kv_buf_append(b, hdr, (size_t)n);
	kv_buf_append(b, msg.p, msg.n);
	kv_buf_append(b, "\r\n", 2);
}

/* Which pattern topics of a match ch (hit[i] for a[i]); the topics are
 * pinned, ps_lock is not held.  0, or -1 when out of memory. */
static int match_patterns(struct ps_topic **a, size_t n, struct kv_slice ch,
			  uint8_t *hit)
{
	struct resp_glob *g = resp_glob_new();
	int rc = g ? 0 : -1;

	for (size_t i = 0; i < n && !rc; i++) {
		struct kv_slice p = {a[i]->name, a[i]->n};

		rc = resp_glob_set(g, p);
		hit[i] = !rc && resp_glob_match(g, ch);
	}
	resp_glob_free(g);
	return rc;
}

/* Send b to t's subscribers; ps_lock held.  A topic dropped since it was
 * taken delivers to the topic of its name now, if it was subscribed
 * again meanwhile. */
static int64_t deliver_all(struct ps_table *tab, struct ps_topic *t,
			   const struct kv_buf *b)
{
	int64_t n = 0;

	if (t->dead) {
		struct kv_slice name = {t->name, t->n};

		if (!(t = topic_find(tab, name, t->h)))
			return 0;
	}
	for (struct ps_member *m = t->subs; m; m = m->tnext)
		deliver(m->s, b), n++;
	return n;
}

/* PUBLISH channel message: the number of subscriptions that got it.  The
 * patterns are matched against the channel with ps_lock released, which
 * every subscriber's thread takes: the lock is held only to take the
 * pattern topics and to deliver (kvd_resp_publish, which keyspace
 * notifications call too). */
const char *resp_publish(struct kvd_conn *c, struct resp_req *r)
{
	int64_t n = kvd_resp_publish(r->a[1], r->a[2]);

	if (n < 0)
		return resp_err_nomem;
	resp_add_int(c, n);
	return NULL;
}

int64_t kvd_resp_publish(struct kv_slice ch, struct kv_slice msg)
{
	struct kv_buf b = {0};
	struct ps_topic **pt, *t;
	uint8_t *hit = NULL;
	int64_t n = 0;
	size_t np;
	int rc;

	pthread_mutex_lock(&ps_lock);
	rc = topics_take(&pats, &pt, &np);
	if (!rc && np) { /* without patterns, one hold of the lock */
		pthread_mutex_unlock(&ps_lock);
		if (!(hit = calloc(np, 1)) || match_patterns(pt, np, ch, hit))
			rc = -1;
		pthread_mutex_lock(&ps_lock);
	}
	t = rc ? NULL : topic_find(&chans, ch, kvd_shash(ch.p, ch.n));
	if (t) {
		format_msg(&b, NULL, ch, msg);
		if (!b.err)
			n += deliver_all(&chans, t, &b);
	}
	for (size_t i = 0; !rc && i < np && !b.err; i++) {
		if (!hit[i])
			continue;
		format_msg(&b, pt[i], ch, msg);
		if (!b.err)
			n += deliver_all(&pats, pt[i], &b);
	}
	topics_give(pt, np);
	pthread_mutex_unlock(&ps_lock);
	free(pt);
	free(hit);
	kv_buf_free(&b);
	return rc || b.err ? -1 : n;
}

/* ===================== Subscribing ===================== */

static struct resp_sub *sub_of(struct kvd_conn *c)
{
	if (!c->psub && (c->psub = calloc(1, sizeof(*c->psub))))
		c->psub->c = c;
	return c->psub;
}

/* "*3 kind name count" (name NULL: a nil, as UNSUBSCRIBE of nothing). */
static void add_confirm(struct kvd_conn *c, const char *kind,
			const struct kv_slice *name, uint32_t count)
{
	resp_add_array(c, 3);
	resp_add_cstr(c, kind);
	if (name)
		resp_add_bulk(c, name->p, name->n);
	else
		resp_add_nil(c);
	resp_add_int(c, count);
}

/* Would r's names (add bytes) take the server's subscriptions past
 * their bounds?  Counted as if each were new.  ps_lock held. */
static int server_full(struct kvd_conn *c, struct resp_req *r, size_t add)
{
	const struct kvd_config *cfg = c->io->srv->cfg;
	uint64_t max_n = KVD_LIVE(cfg->pubsub_max_subs),
		 max_b = KVD_LIVE(cfg->pubsub_max_sub_bytes);

	if (ps_nsubs + (r->argc - 1) > max_n)
		snprintf(r->err, sizeof(r->err),
			 "ERR subscriptions would exceed "
			 "pubsub-max-subscriptions (%llu) on this server",
			 (unsigned long long)max_n);
	else if (ps_bytes + add > max_b)
		snprintf(r->err, sizeof(r->err),
			 "ERR subscriptions would exceed "
			 "pubsub-max-subscription-bytes (%llu bytes) on this "
			 "server",
			 (unsigned long long)max_b);
	else
		return 0;
	return 1;
}

static const char *subscribe(struct kvd_conn *c, struct resp_req *r, int pat)
{
	struct resp_sub *s = sub_of(c);
	size_t add = 0, cap = resp_reply_cap(c);
	struct resp_it it;
	struct kv_slice a;
	int rc = 0;

	if (!s)
		return resp_err_nomem;
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		resp_it_next(&it, &a);
		add += a.n + PS_SUB_COST;
	}
	if (s->mem + add > cap) {
		snprintf(r->err, sizeof(r->err),
			 "ERR subscriptions would exceed max-output (%zu "
			 "bytes) on this connection",
			 cap);
		return r->err;
	}
	resp_it_init(r, 1, &it);
	pthread_mutex_lock(&ps_lock);
	if (server_full(c, r, add)) {
		pthread_mutex_unlock(&ps_lock);
		return r->err;
	}
	for (uint32_t i = 1; i < r->argc && rc >= 0; i++) {
		resp_it_next(&it, &a);
		rc = member_add(s, a, pat);
		if (rc >= 0)
			add_confirm(c, pat ? "psubscribe" : "subscribe", &a,
				    sub_count(s));
	}
	pthread_mutex_unlock(&ps_lock);
	return rc < 0 ? resp_err_nomem : NULL;
}

const char *resp_subscribe(struct kvd_conn *c, struct resp_req *r)
{
	return subscribe(c, r, 0);
}

const char *resp_psubscribe(struct kvd_conn *c, struct resp_req *r)
{
	return subscribe(c, r, 1);
}

static const char *unsubscribe(struct kvd_conn *c, struct resp_req *r, int pat)
{
	const char *kind = pat ? "punsubscribe" : "unsubscribe";
	struct resp_sub *s = c->psub;
	struct ps_table *tab = pat ? &pats : &chans;
	struct resp_it it;
	struct kv_slice a;

	pthread_mutex_lock(&ps_lock);
	if (r->argc == 1) { /* all of them, in subscription order */
		struct ps_member *m;

		if (!s || !(pat ? s->npat : s->nchan))
			add_confirm(c, kind, NULL, sub_count(s));
		while (s && (m = pat ? s->pats : s->chans)) {
			struct kv_slice n = {m->t->name, m->t->n};

			/* the name outlives m only in the reply */
			resp_add_array(c, 3);
			resp_add_cstr(c, kind);
			resp_add_bulk(c, n.p, n.n);
			member_del(m, pat);
			resp_add_int(c, sub_count(s));
		}
	}
	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		struct ps_member *m = NULL;

		resp_it_next(&it, &a);
		if (s)
			m = member_of(topic_find(tab, a, kvd_shash(a.p, a.n)),
				      s);
		if (m)
			member_del(m, pat);
		add_confirm(c, kind, &a, sub_count(s));
	}
	pthread_mutex_unlock(&ps_lock);
	return NULL;
}

const char *resp_unsubscribe(struct kvd_conn *c, struct resp_req *r)
{
	return unsubscribe(c, r, 0);
}

const char *resp_punsubscribe(struct kvd_conn *c, struct resp_req *r)
{
	return unsubscribe(c, r, 1);
}

/* ===================== PUBSUB ===================== */

/* The channels are taken under ps_lock and matched with it released. */
static const char *pubsub_channels(struct kvd_conn *c, struct resp_req *r)
{
	size_t off = c->out.len, cap = resp_reply_cap(c), nt = 0, h;
	struct resp_glob *g = NULL;
	struct ps_topic **ts = NULL;
	uint64_t n = 0;
	char hdr[24];
	int rc = 0;

	if (r->argc == 3 &&
	    (!(g = resp_glob_new()) || resp_glob_set(g, r->a[2])))
		rc = -1;
	if (!rc) {
		pthread_mutex_lock(&ps_lock);
		rc = topics_take(&chans, &ts, &nt);
		pthread_mutex_unlock(&ps_lock);
	}
	for (size_t i = 0; i < nt && c->out.len - off <= cap; i++) {
		struct kv_slice name = {ts[i]->name, ts[i]->n};

		if (g && !resp_glob_match(g, name))
			continue;
		resp_add_bulk(c, name.p, name.n);
		n++;
	}
	pthread_mutex_lock(&ps_lock);
	topics_give(ts, nt);
	pthread_mutex_unlock(&ps_lock);
	free(ts);
	resp_glob_free(g);
	if (rc)
		return resp_err_nomem;
	if (c->out.len - off > cap) {
		c->out.len = off;
		return "ERR reply would exceed max-output: give PUBSUB "
		       "CHANNELS a narrower pattern";
	}
	hdr[0] = '*';
	h = 1 + resp_u64(hdr + 1, n);
	memcpy(hdr + h, "\r\n", 2);
	resp_insert(c, off, hdr, h + 2);
	return NULL;
}

static void pubsub_numsub(struct kvd_conn *c, struct resp_req *r)
{
	struct resp_it it;
	struct kv_slice a;

	resp_add_array(c, 2 * (uint64_t)(r->argc - 2));
	resp_it_init(r, 2, &it);
	pthread_mutex_lock(&ps_lock);
	for (uint32_t i = 2; i < r->argc; i++) {
		struct ps_topic *t;

		resp_it_next(&it, &a);
		t = topic_find(&chans, a, kvd_shash(a.p, a.n));
		resp_add_bulk(c, a.p, a.n);
		resp_add_int(c, t ? t->nsubs : 0);
	}
	pthread_mutex_unlock(&ps_lock);
}

const char *resp_pubsub(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const help[] = {
	    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "CHANNELS [<pattern>]",
	    "    Return the currently active channels matching a <pattern> "
	    "(default: '*').",
	    "NUMPAT",
	    "    Return number of subscriptions to patterns.",
	    "NUMSUB [<channel> ...]",
	    "    Return the number of subscribers for the specified channels, "
	    "excluding",
	    "    pattern subscriptions(default: no channels).",
	    "HELP",
	    "    Prints this help.",
	    NULL};
	struct kv_slice sub = r->a[1];

	if (resp_eq(sub, "channels") && r->argc <= 3) {
		return pubsub_channels(c, r);
	} else if (resp_eq(sub, "numsub")) {
		pubsub_numsub(c, r);
	} else if (resp_eq(sub, "numpat") && r->argc == 2) {
		pthread_mutex_lock(&ps_lock);
		resp_add_int(c, (int64_t)pats.n);
		pthread_mutex_unlock(&ps_lock);
	} else if (resp_eq(sub, "help") && r->argc == 2) {
		size_t n = 0;

		while (help[n])
			n++;
		resp_add_array(c, n);
		for (size_t i = 0; i < n; i++)
			resp_add_status(c, help[i]);
	} else if (resp_eq(sub, "numpat") || resp_eq(sub, "help")) {
		snprintf(r->err, sizeof(r->err),
			 "ERR wrong number of arguments for 'pubsub|%s' "
			 "command",
			 resp_eq(sub, "help") ? "help" : "numpat");
		return r->err;
	} else if (resp_eq(sub, "channels")) {
		snprintf(r->err, sizeof(r->err),
			 "ERR unknown subcommand or wrong number of arguments "
			 "for '%.*s'. Try PUBSUB HELP.",
			 (int)(sub.n > 128 ? 128 : sub.n), (const char *)sub.p);
		return r->err;
	} else {
		return resp_subcmd_error(r, "PUBSUB");
	}
	return NULL;
}

/* ===================== Hooks ===================== */

int kvd_resp_subscribed(const struct kvd_conn *c)
{
	return sub_count(c->psub) != 0;
}

/* The commands RESP2 allows a subscriber (Redis 7.0's list; RESET is not
 * a kvd command). */
static int allowed(unsigned id)
{
	return id == RESP_CMD_PING || id == RESP_CMD_QUIT ||
	       id == RESP_CMD_SUBSCRIBE || id == RESP_CMD_PSUBSCRIBE ||
	       id == RESP_CMD_UNSUBSCRIBE || id == RESP_CMD_PUNSUBSCRIBE;
}

/* The commands whose name in errors carries the subcommand. */
static int has_subcommands(unsigned id)
{
	return id == RESP_CMD_CLIENT || id == RESP_CMD_CONFIG ||
	       id == RESP_CMD_COMMAND || id == RESP_CMD_SLOWLOG ||
	       id == RESP_CMD_OBJECT || id == RESP_CMD_LATENCY ||
	       id == RESP_CMD_PUBSUB;
}

void kvd_resp_pubsub_drain(struct kvd_conn *c)
{
	pthread_mutex_lock(&ps_lock);
	drain(c->psub);
	pthread_mutex_unlock(&ps_lock);
}

const char *kvd_resp_pubsub_gate(struct kvd_conn *c, struct resp_req *r)
{
	char name[64];
	struct kv_slice sub = r->a[1];

	pthread_mutex_lock(&ps_lock);
	drain(c->psub); /* what was published before this command first */
	pthread_mutex_unlock(&ps_lock);
	if (!kvd_resp_subscribed(c) || allowed(r->cmd))
		return NULL;
	if (has_subcommands(r->cmd) && r->argc > 1)
		snprintf(name, sizeof(name), "%s|%.*s", resp_cmds[r->cmd].name,
			 (int)(sub.n > 32 ? 32 : sub.n), (const char *)sub.p);
	else
		snprintf(name, sizeof(name), "%s", resp_cmds[r->cmd].name);
	for (char *p = name; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	snprintf(r->err, sizeof(r->err),
		 "ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
		 "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
		 "context",
		 name);
	return r->err;
}

void kvd_resp_pubsub_close(struct kvd_conn *c)
{
	struct resp_sub *s = c->psub;
	struct ps_member *m;

	if (!s)
		return;
	pthread_mutex_lock(&ps_lock);
	while ((m = s->chans))
		member_del(m, 0);
	while ((m = s->pats))
		member_del(m, 1);
	if (s->ready && c->io->idx < PS_MAX_IO) {
		struct resp_sub **pp = &ready[c->io->idx];

		while (*pp && *pp != s)
			pp = &(*pp)->rnext;
		if (*pp)
			*pp = s->rnext;
	}
	pthread_mutex_unlock(&ps_lock);
	kv_buf_free(&s->feed);
	free(s);
	c->psub = NULL;
}

void kvd_resp_pubsub_stats(struct kvd_server *srv, uint64_t *channels,
			   uint64_t *patterns, uint64_t *closed)
{
	unsigned nio = srv->nio < PS_MAX_IO ? srv->nio : PS_MAX_IO;

	pthread_mutex_lock(&ps_lock);
	*channels = chans.n;
	*patterns = pats.n;
	pthread_mutex_unlock(&ps_lock);
	*closed = 0;
	for (unsigned i = 0; i < nio; i++)
		*closed += kvd_read(&over_closed[i]);
}
