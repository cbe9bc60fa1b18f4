/* loop.c - the io threads: io_uring rings, sockets, connection lifetimes.
 *
 * Each submission carries a tagged pointer as user_data: the low 3 bits say
 * what completed (allocations are 16-byte aligned, so they are free).
 *
 * One loop turn: wait for at least one completion, handle every completion
 * that is ready, then visit the connections that changed ("dirty") once:
 * start one send per connection with everything it has to say, re-arm or
 * pause its receive, close it if it is finished.  Then drop this turn's
 * read snapshots.  Replies to a pipeline therefore leave in one send.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "kv_status.h"
#include "log.h"
#include "store.h"
#include "tls.h"

#define RING_ENTRIES 1024
#define CQ_ENTRIES 16384
#define BUF_GROUP 1
#define BUF_COUNT 512
#define BUF_SIZE (16u << 10)
#define STOP_GRACE_MS 5000
/* Out of descriptors, accepting again at once would fail at once, in a
 * busy loop: wait this long, or until a connection closes. */
#define ACCEPT_PAUSE_MS 100

enum tag {
	TAG_NONE,
	TAG_ACCEPT, /* on a word of the ring's acc[], one per listener slot */
	TAG_RECV,
	TAG_SEND,
	TAG_WAKE,
	TAG_TICK,
};

struct kvd_ring {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	uint8_t *bufs;
	uint64_t wake_val;
	struct __kernel_timespec tick;
	struct __kernel_timespec pause; /* the accept pause's timer */
	uint64_t stop_deadline;
	uint64_t acc[KVD_NLISTEN]; /* the listeners' accept tags (accept_ud) */
};

/* Lines a peer or a flood can repeat at will: one a second, with a count. */
static struct kvd_log_limit accept_limit = KVD_LOG_LIMIT_INIT(1000);
static struct kvd_log_limit timeout_limit = KVD_LOG_LIMIT_INIT(1000);

static uint64_t tagged(void *p, enum tag t)
{
	return (uint64_t)(uintptr_t)p | t;
}

static void *untag(uint64_t ud)
{
	return (void *)(uintptr_t)(ud & ~(uint64_t)7);
}

/* ===================== Submissions ===================== */

static struct io_uring_sqe *sqe_get(struct kvd_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring->ring);

	while (!sqe) {
		/* SQ full: hand what we have to the kernel and try again. */
		io_uring_submit(&io->ring->ring);
		sqe = io_uring_get_sqe(&io->ring->ring);
	}
	return sqe;
}

/* The protocol a listener slot speaks (loop.h: kind * KVD_NPROTO + id). */
static int slot_proto(int slot)
{
	return slot % KVD_NPROTO;
}

static int slot_kind(int slot)
{
	return slot / KVD_NPROTO;
}

/* Does the listener speak TLS?  (listen.c sets the bits.) */
static int slot_tls(const struct kvd_io *io, int slot)
{
	return (io->tls_slots >> slot) & 1;
}

/* An accept is tagged with its listener's word of the ring: the address
 * tells the slot, whatever the protocol. */
static uint64_t accept_ud(struct kvd_io *io, int slot)
{
	return tagged(&io->ring->acc[slot], TAG_ACCEPT);
}

/* The listener slot of an accept (the inverse). */
static int accept_slot(struct kvd_io *io, uint64_t ud)
{
	return (int)((uint64_t *)untag(ud) - io->ring->acc);
}

static void arm_accept(struct kvd_io *io, int which)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	/* A Unix socket's accept is one-shot: see "Unix sockets" below. */
	if (slot_kind(which) == KVD_LISTEN_UNIX)
		io_uring_prep_accept(sqe, io->lfd[which], NULL, NULL,
				     SOCK_CLOEXEC);
	else
		io_uring_prep_multishot_accept(sqe, io->lfd[which], NULL, NULL,
					       SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, accept_ud(io, which));
	io->accept_armed |= 1u << which;
}

/* The accept pause's timer: tagged with the ring, not io, which tells it
 * from the one-second tick. */
static void arm_accept_timer(struct kvd_io *io)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io->ring->pause.tv_sec = 0;
	io->ring->pause.tv_nsec = ACCEPT_PAUSE_MS * 1000000ll;
	io_uring_prep_timeout(sqe, &io->ring->pause, 0, 0);
	io_uring_sqe_set_data64(sqe, tagged(io->ring, TAG_TICK));
	io->accept_timer = 1;
}

static void resume_accepts(struct kvd_io *io)
{
	for (int i = 0; i < KVD_NLISTEN; i++)
		if ((io->accept_paused & (1u << i)) && !io->stopping &&
		    !(io->hs_paused && slot_tls(io, i))) /* hs_resume's */
			arm_accept(io, i);
	io->accept_paused = 0;
}

/* Close a listener the ring no longer refers to: the socket goes now, not
 * when the ring is torn down, so a kvd started right after this one exits
 * can bind the port, and nobody connects to a socket nobody will accept. */
static void close_listener(struct kvd_io *io, int which)
{
	if (io->lfd[which] >= 0)
		close(io->lfd[which]);
	io->lfd[which] = -1;
	io->accept_paused &= ~(1u << which);
}

static void arm_recv(struct kvd_io *io, struct kvd_conn *c)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BUF_GROUP;
	io_uring_sqe_set_data64(sqe, tagged(c, TAG_RECV));
	c->flags |= CONN_RECV_ARMED;
}

static void cancel_recv(struct kvd_io *io, struct kvd_conn *c)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io_uring_prep_cancel64(sqe, tagged(c, TAG_RECV), 0);
	io_uring_sqe_set_data64(sqe, TAG_NONE);
	c->flags |= CONN_CANCELING;
}

static void arm_send(struct kvd_io *io, struct kvd_conn *c)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io_uring_prep_send(sqe, c->fd, c->tx.data + c->tx_off,
			   c->tx.len - c->tx_off, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, tagged(c, TAG_SEND));
	c->flags |= CONN_SEND_BUSY;
}

static void arm_wake(struct kvd_io *io)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io_uring_prep_read(sqe, io->efd, &io->ring->wake_val,
			   sizeof(io->ring->wake_val), 0);
	io_uring_sqe_set_data64(sqe, tagged(io, TAG_WAKE));
}

static void arm_tick(struct kvd_io *io)
{
	struct io_uring_sqe *sqe = sqe_get(io);

	io->ring->tick.tv_sec = 1;
	io->ring->tick.tv_nsec = 0;
	io_uring_prep_timeout(sqe, &io->ring->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, tagged(io, TAG_TICK));
}

static void recycle_buf(struct kvd_io *io, unsigned bid)
{
	struct kvd_ring *r = io->ring;

	io_uring_buf_ring_add(r->br, r->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE,
			      (unsigned short)bid,
			      io_uring_buf_ring_mask(BUF_COUNT), 0);
	io_uring_buf_ring_advance(r->br, 1);
}

/* ===================== Connections ===================== */

void kvd_io_mark(struct kvd_conn *c)
{
	struct kvd_io *io = c->io;

	if (c->flags & CONN_DIRTY)
		return;
	c->flags |= CONN_DIRTY;
	c->dirty_next = io->dirty;
	io->dirty = c;
}

void kvd_io_again(struct kvd_conn *c)
{
	struct kvd_io *io = c->io;

	if (c->flags & CONN_AGAIN)
		return;
	c->flags |= CONN_AGAIN;
	c->again_next = io->again;
	io->again = c;
}

static void again_unlink(struct kvd_io *io, struct kvd_conn *c)
{
	struct kvd_conn **pp = &io->again;

	while (*pp && *pp != c)
		pp = &(*pp)->again_next;
	if (*pp)
		*pp = c->again_next;
	c->flags &= ~CONN_AGAIN;
}

/* Each connection that asked for another turn gets it, once: what it
 * asks for again waits for the next turn, after the ring is looked at. */
static void run_again(struct kvd_io *io)
{
	struct kvd_conn *list = io->again, *c;

	io->again = NULL;
	while ((c = list)) {
		list = c->again_next;
		c->flags &= ~CONN_AGAIN;
		if (!(c->flags & CONN_DEAD))
			kvd_conn_again(c);
	}
}

static void hs_end(struct kvd_io *io, struct kvd_conn *c);
static void hs_unwait(struct kvd_io *io, struct kvd_conn *c);

static void conn_free(struct kvd_io *io, struct kvd_conn *c)
{
	if (c->flags & CONN_HS_WAIT)
		hs_unwait(io, c);
	if (c->flags & CONN_AGAIN)
		again_unlink(io, c);
	hs_end(io, c); /* a handshake left unfinished gives its slot back */
	if (c->prev)
		c->prev->next = c->next;
	else
		io->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (kvd_protos[c->proto]->close)
		kvd_protos[c->proto]->close(c);
	if (c->closed) /* a second role a command gave it (conn.h) */
		c->closed(c);
	close(c->fd);
	kvd_conn_release(c);
	free(c);
	atomic_fetch_sub(&io->nconns, 1);
	atomic_fetch_sub(&io->srv->nconns, 1);
	kvd_count(&io->stats.closed, 1);
	if (io->accept_paused) /* a descriptor is free again */
		resume_accepts(io);
}

/* Shut the socket; the memory goes once nothing refers to it. */
static void conn_kill(struct kvd_io *io, struct kvd_conn *c)
{
	if (!(c->flags & CONN_DEAD)) {
		c->flags |= CONN_DEAD;
		shutdown(c->fd, SHUT_RDWR);
		if ((c->flags & CONN_RECV_ARMED) &&
		    !(c->flags & CONN_CANCELING))
			cancel_recv(io, c);
		c->out.len = 0;
	}
}

static int conn_idle(const struct kvd_conn *c)
{
	return !(c->flags & CONN_SEND_BUSY) && c->tx.len == c->tx_off &&
	       c->out.len == 0 && !kvd_tls_pending(c);
}

static void conn_update(struct kvd_io *io, struct kvd_conn *c)
{
	if (c->flags & CONN_ABORT) /* over a cap that forbids waiting */
		conn_kill(io, c);
	if (!(c->flags & CONN_DEAD) && !(c->flags & CONN_SEND_BUSY)) {
		/* TLS: replies are encrypted onto tx instead of swapped in. */
		if (c->tls) {
			if (c->tx.len == c->tx_off &&
			    (c->out.len || kvd_tls_pending(c)) &&
			    kvd_tls_seal(c))
				conn_kill(io, c);
		} else if (c->tx.len == c->tx_off && c->out.len) {
			struct kv_buf t = c->tx;

			c->tx = c->out;
			c->out = t;
			c->out.len = 0;
			c->tx_off = 0;
		}
		if (c->tx.len > c->tx_off && !(c->flags & CONN_DEAD))
			arm_send(io, c);
	}
	/* Close once every reply is out, those of writes in flight too (and
	 * TLS's close_notify after them). */
	if (!(c->flags & CONN_DEAD) && conn_idle(c) && !c->npend &&
	    (c->flags & (CONN_CLOSING | CONN_EOF))) {
		if (kvd_tls_farewell(c))
			kvd_io_mark(c);
		else
			conn_kill(io, c);
	}
	if (c->flags & CONN_DEAD) {
		if (!(c->flags & (CONN_RECV_ARMED | CONN_SEND_BUSY)) &&
		    !c->npend)
			conn_free(io, c);
		return;
	}
	if (c->flags & CONN_RECV_ARMED) {
		if ((c->flags & CONN_PAUSED) && !(c->flags & CONN_CANCELING))
			cancel_recv(io, c);
	} else if (!(c->flags & (CONN_PAUSED | CONN_EOF | CONN_HS_WAIT)) &&
		   !io->stopping) {
		arm_recv(io, c);
	}
	kvd_conn_publish(c); /* CLIENT LIST's figures */
}

static void flush_dirty(struct kvd_io *io)
{
	while (io->dirty) {
		struct kvd_conn *c = io->dirty;

		io->dirty = c->dirty_next;
		c->flags &= ~CONN_DIRTY;
		conn_update(io, c);
	}
}

/* ===================== Completions ===================== */

/* Over max-clients: the protocol's own words, then close. */
static void refuse(int fd, int proto)
{
	/* A fresh socket's send buffer is empty: this cannot block. */
	(void)!send(fd, kvd_protos[proto]->busy, kvd_protos[proto]->busy_len,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
}

/* The listener's multishot accept ended: re-arm it, or, out of
 * descriptors, pause it (the failure would repeat at once, in a busy loop
 * logging a line each time), or close the listener when stopping. */
static void accept_ended(struct kvd_io *io, int proto, int res)
{
	io->accept_armed &= ~(1u << proto);
	if (io->stopping) {
		close_listener(io, proto);
	} else if (res == -EMFILE || res == -ENFILE) {
		io->accept_paused |= 1u << proto;
		if (!io->accept_timer)
			arm_accept_timer(io);
	} else if (!(io->hs_paused && slot_tls(io, proto))) {
		arm_accept(io, proto); /* (a TLS one stopped: hs_resume) */
	}
}

/* ===================== TLS handshakes in flight ===================== */

/* A TLS handshake's key exchange and signature are the dearest work an
 * io thread does (a flood of them stretched every loop turn, and so every
 * other client's latency on the thread).  So an io thread runs at most
 * tls-max-handshakes at once, from accept to the handshake's end: at the
 * bound its TLS listeners' accepts are cancelled, and new connections wait
 * in the kernel's accept backlog (SO_REUSEPORT: this thread's); a
 * connection accepted meanwhile (its completion was already queued) waits
 * here, unread, for a slot.  Each slot freed goes to the first waiting
 * connection; with none waiting, the accepts are armed again. */

static int hs_full(const struct kvd_io *io)
{
	return io->hs_now >= io->srv->cfg->tls_max_handshakes;
}

static void hs_count(struct kvd_io *io)
{
	atomic_store_explicit(&io->stats.tls_hs_now, io->hs_now,
			      memory_order_relaxed);
	if (io->hs_now > kvd_read(&io->stats.tls_hs_peak))
		atomic_store_explicit(&io->stats.tls_hs_peak, io->hs_now,
				      memory_order_relaxed);
}

static void hs_pause(struct kvd_io *io)
{
	if (io->hs_paused)
		return;
	io->hs_paused = 1;
	kvd_count(&io->stats.tls_hs_pauses, 1);
	for (int i = 0; i < KVD_NLISTEN; i++) {
		struct io_uring_sqe *sqe;

		if (!slot_tls(io, i) || !(io->accept_armed & (1u << i)))
			continue;
		/* its end comes through on_accept: accept_ended */
		sqe = sqe_get(io);
		io_uring_prep_cancel64(sqe, accept_ud(io, i), 0);
		io_uring_sqe_set_data64(sqe, TAG_NONE);
	}
}

static void hs_resume(struct kvd_io *io)
{
	io->hs_paused = 0;
	for (int i = 0; i < KVD_NLISTEN; i++)
		if (slot_tls(io, i) && io->lfd[i] >= 0 && !io->stopping &&
		    !(io->accept_armed & (1u << i)) &&
		    !(io->accept_paused & (1u << i)))
			arm_accept(io, i);
}

/* c's handshake begins: it takes a slot, and its bytes are read. */
static void hs_start(struct kvd_io *io, struct kvd_conn *c)
{
	if (kvd_tls_open(c)) {
		log_error("connection %llu: out of memory for TLS; closing",
			  (unsigned long long)c->id);
		c->flags |= CONN_CLOSING;
		kvd_io_mark(c);
		return;
	}
	c->flags |= CONN_HANDSHAKE;
	io->hs_now++;
	hs_count(io);
	if (hs_full(io))
		hs_pause(io);
	arm_recv(io, c);
}

static void hs_unwait(struct kvd_io *io, struct kvd_conn *c)
{
	struct kvd_conn **p = &io->hs_wait, *prev = NULL;

	while (*p && *p != c) {
		prev = *p;
		p = &(*p)->hs_next;
	}
	if (!*p)
		return;
	*p = c->hs_next;
	if (io->hs_wait_tail == c)
		io->hs_wait_tail = prev;
	c->hs_next = NULL;
	c->flags &= ~CONN_HS_WAIT;
}

/* A slot frees (the handshake ended, or its connection closed). */
static void hs_end(struct kvd_io *io, struct kvd_conn *c)
{
	if (!(c->flags & CONN_HANDSHAKE))
		return;
	c->flags &= ~CONN_HANDSHAKE;
	io->hs_now--;
	while (io->hs_wait && !hs_full(io) && !io->stopping) {
		struct kvd_conn *w = io->hs_wait;

		hs_unwait(io, w);
		hs_start(io, w);
	}
	if (io->hs_paused && !io->hs_wait && !hs_full(io))
		hs_resume(io);
	hs_count(io);
}

void kvd_io_handshake_done(struct kvd_conn *c)
{
	hs_end(c->io, c);
}

/* A TLS connection accepted: its handshake starts, or it waits. */
static void hs_accepted(struct kvd_io *io, struct kvd_conn *c)
{
	if (!hs_full(io) && !io->hs_wait) {
		hs_start(io, c);
		return;
	}
	c->flags |= CONN_HS_WAIT;
	if (io->hs_wait_tail)
		io->hs_wait_tail->hs_next = c;
	else
		io->hs_wait = c;
	io->hs_wait_tail = c;
	hs_pause(io);
}

static void on_accept(struct kvd_io *io, struct io_uring_cqe *cqe, int slot)
{
	struct kvd_server *srv = io->srv;
	struct kvd_conn *c;
	int one = 1, fd = cqe->res, proto = slot_proto(slot);
	unsigned max = KVD_LIVE(srv->cfg->max_clients);

	if (!(cqe->flags & IORING_CQE_F_MORE))
		accept_ended(io, slot, fd);
	if (fd < 0) {
		if (fd != -ECANCELED)
			kvd_log_ratelimited(
			    &accept_limit, KVD_LOG_WARN, "accept failed: %s%s",
			    strerror(-fd),
			    io->accept_paused ? "; accepting again in a "
						"moment"
					      : "");
		return;
	}
	if (io->stopping) {
		close(fd);
		return;
	}
	if (max > kvd_listen_fd_max())
		max = kvd_listen_fd_max();
	if (atomic_fetch_add(&srv->nconns, 1) >= max ||
	    !(c = calloc(1, sizeof(*c)))) {
		atomic_fetch_sub(&srv->nconns, 1);
		kvd_count(&io->stats.refused, 1);
		if (slot_tls(io, slot)) /* no handshake yet to say it in */
			close(fd);
		else
			refuse(fd, proto);
		return;
	}
	if (slot_kind(slot) != KVD_LISTEN_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->io = io;
	c->fd = fd;
	c->proto = (uint8_t)proto;
	c->id = ((uint64_t)io->idx << 48) | ++io->next_id;
	c->last_ms = io->now_ms;
	c->next = io->conns;
	if (io->conns)
		io->conns->prev = c;
	io->conns = c;
	atomic_fetch_add(&io->nconns, 1);
	kvd_count(&io->stats.accepted, 1);
	if (kvd_protos[proto]->open)
		kvd_protos[proto]->open(c);
	if (slot_tls(io, slot))
		hs_accepted(io, c);
	else
		arm_recv(io, c);
}

static void on_recv(struct kvd_io *io, struct io_uring_cqe *cqe)
{
	struct kvd_conn *c = untag(cqe->user_data);
	int res = cqe->res;

	if (!(cqe->flags & IORING_CQE_F_MORE))
		c->flags &= ~(CONN_RECV_ARMED | CONN_CANCELING);
	if (res > 0) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;

		if (c->tls)
			kvd_tls_input(c,
				      io->ring->bufs + (size_t)bid * BUF_SIZE,
				      (size_t)res);
		else
			kvd_conn_input(c,
				       io->ring->bufs + (size_t)bid * BUF_SIZE,
				       (size_t)res);
		recycle_buf(io, bid);
	} else if (res == 0) {
		c->flags |= CONN_EOF;
	} else if (res != -ENOBUFS && res != -ECANCELED) {
		c->flags |= CONN_EOF;
		conn_kill(io, c); /* reset by peer, or worse */
	}
	kvd_io_mark(c);
}

static void on_send(struct kvd_io *io, struct io_uring_cqe *cqe)
{
	struct kvd_conn *c = untag(cqe->user_data);

	c->flags &= ~CONN_SEND_BUSY;
	if (cqe->res < 0) {
		conn_kill(io, c);
	} else {
		c->tx_off += (size_t)cqe->res;
		c->out_ms = io->now_ms;
		kvd_count(&io->stats.bytes_out, (uint64_t)cqe->res);
		if (c->tx_off == c->tx.len) {
			c->tx.len = c->tx_off = 0;
			kv_buf_trim(&c->tx, 64 << 10);
			kvd_conn_sent(c);
		}
	}
	kvd_io_mark(c);
}

static void begin_stop(struct kvd_io *io)
{
	io->stopping = 1;
	io->ring->stop_deadline = io->now_ms + STOP_GRACE_MS;
	/* Listeners first: an accept in the ring holds its socket open, so
	 * cancel it, and close the socket when the cancel has completed
	 * (accept_ended); one not in the ring closes now. */
	for (int i = 0; i < KVD_NLISTEN; i++) {
		if (io->lfd[i] < 0)
			continue;
		if (!(io->accept_armed & (1u << i))) {
			close_listener(io, i);
			continue;
		}
		struct io_uring_sqe *sqe = sqe_get(io);

		io_uring_prep_cancel64(sqe, accept_ud(io, i), 0);
		io_uring_sqe_set_data64(sqe, TAG_NONE);
	}
	/* Stop taking requests; answer what was taken, then close. */
	for (struct kvd_conn *c = io->conns; c; c = c->next) {
		shutdown(c->fd, SHUT_RD);
		c->flags |= CONN_EOF;
		kvd_io_mark(c);
	}
}

static void on_wake(struct kvd_io *io)
{
	arm_wake(io);
	kvd_io_jring_reap(io); /* its flushes' completions wake it too */
	kvd_io_completed(io, atomic_exchange_explicit(&io->done, NULL,
						      memory_order_acquire));
	for (int i = 0; i < KVD_NPROTO; i++) /* other threads' work here */
		if (kvd_protos[i]->wake)
			kvd_protos[i]->wake(io);
	if (atomic_load(&io->srv->stopping) && !io->stopping)
		begin_stop(io);
}

/* More than secs seconds since t (0 for secs or t: never). */
static int expired(uint64_t now, uint64_t t, unsigned secs)
{
	return secs && t && now > t && now - t > secs * 1000ull;
}

/* Why c must go now, or NULL: the timeouts that keep idle, slow-sending
 * (slowloris) and never-reading clients from holding a slot and memory. */
static const char *conn_timeout(struct kvd_io *io, const struct kvd_conn *c)
{
	const struct kvd_config *cfg = io->srv->cfg;

	/* a subscriber waits for messages: idle is its normal state (Redis
	 * exempts it from timeout too) */
	/* (a read that yielded, or requests waiting for their turn, are
	 * work under way: not idle) */
	if (!c->npend && c->stall != STALL_YIELD && c->stall != STALL_TURN &&
	    !atomic_load_explicit(&c->nsubs, memory_order_relaxed) &&
	    expired(io->now_ms, c->last_ms, KVD_LIVE(cfg->idle_timeout)))
		return "idle-timeout";
	if (expired(io->now_ms, c->req_ms, KVD_LIVE(cfg->request_timeout)))
		return c->tls && !kvd_tls_ready(c)
			   ? "request-timeout (TLS handshake left unfinished)"
			   : "request-timeout (request left incomplete)";
	if (c->stall == STALL_OUTPUT &&
	    expired(io->now_ms, c->out_ms, KVD_LIVE(cfg->output_timeout)))
		return "output-timeout (replies left unread)";
	return NULL;
}

static void on_tick(struct kvd_io *io)
{
	arm_tick(io);
	for (struct kvd_conn *c = io->conns; c; c = c->next) {
		const char *why;

		if (c->flags & CONN_DEAD)
			continue;
		why = conn_timeout(io, c);
		if (why && strcmp(why, "idle-timeout"))
			kvd_log_ratelimited(&timeout_limit, KVD_LOG_INFO,
					    "connection %llu: %s; closing",
					    (unsigned long long)c->id, why);
		if (why ||
		    (io->stopping && io->now_ms > io->ring->stop_deadline)) {
			conn_kill(io, c);
			kvd_io_mark(c);
		}
	}
}

static void handle(struct kvd_io *io, struct io_uring_cqe *cqe)
{
	switch (cqe->user_data & 7) {
	case TAG_ACCEPT:
		on_accept(io, cqe, accept_slot(io, cqe->user_data));
		break;
	case TAG_RECV: on_recv(io, cqe); break;
	case TAG_SEND: on_send(io, cqe); break;
	case TAG_WAKE: on_wake(io); break;
	case TAG_TICK:
		if (untag(cqe->user_data) == io) {
			on_tick(io);
		} else { /* the accept pause is over */
			io->accept_timer = 0;
			resume_accepts(io);
		}
		break;
	default: break;
	}
}

/* Requests answered at once this turn all took the turn's time: one clock
 * read per turn instead of two per request. */
static void time_turn(struct kvd_io *io)
{
	uint64_t ns = 0;

	for (unsigned op = 0; op < KV_OP_MAX; op++) {
		if (!io->stats.turn_ops[op])
			continue;
		if (!ns)
			ns = kvd_mono_ns() - io->turn_ns;
		kvd_count_latency(&io->stats, op, ns, io->stats.turn_ops[op]);
		io->stats.turn_ops[op] = 0;
	}
}

/* The turn's replies to the ring, its writes to the committers; writes
 * this thread committed itself answered now (what that unblocks may
 * write again). */
static void finish_turn(struct kvd_io *io)
{
	flush_dirty(io);
	kvd_committer_flush(io->srv->com);
	while (io->local_done) {
		struct kvd_wreq *w = io->local_done;

		io->local_done = NULL;
		kvd_io_completed(io, w);
		flush_dirty(io);
		kvd_committer_flush(io->srv->com);
	}
}

static void *io_main(void *arg)
{
	struct kvd_io *io = arg;
	struct io_uring *ring = &io->ring->ring;
	char name[16]; /* the kernel keeps 15 bytes */

	/* Named by itself before it serves anything, so that no request is
	 * answered by a thread top -H cannot name yet. */
	snprintf(name, sizeof(name), "kvd-io/%u", io->idx);
	pthread_setname_np(pthread_self(), name);

	/* liburing 2.3 declares io_uring_enable_rings but does not export
	 * it: make the register call directly. */
	int rc = (int)syscall(__NR_io_uring_register, ring->ring_fd,
			      IORING_REGISTER_ENABLE_RINGS, NULL, 0);

	if (rc) {
		log_error("io %u: cannot enable ring: %s", io->idx,
			  strerror(errno));
		return NULL;
	}
	kvd_io_enter(io);
	io->now_ms = kvd_now_ms();
	io->turn_ns = kvd_mono_ns();
	for (int i = 0; i < KVD_NLISTEN; i++)
		if (io->lfd[i] >= 0)
			arm_accept(io, i);
	arm_wake(io);
	arm_tick(io);
	while (!io->stopping || io->conns || io->inflight || io->accept_armed) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		/* a connection waiting for its next turn: look, not sleep */
		rc = io->again ? io_uring_submit_and_get_events(ring)
			       : io_uring_submit_and_wait(ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EBUSY) {
			log_error("io %u: io_uring_submit_and_wait: %s",
				  io->idx, strerror(-rc));
			break;
		}
		io->now_ms = kvd_now_ms();
		io->turn_ns = kvd_mono_ns();
		io_uring_for_each_cqe(ring, head, cqe)
		{
			handle(io, cqe);
			n++;
		}
		io_uring_cq_advance(ring, n);
		time_turn(io);
		finish_turn(io);
		if (io->again) {
			/* what the turn answered leaves before the slices of
			 * the reads that yielded run, not after them */
			io_uring_submit(ring);
			run_again(io);
			finish_turn(io);
		}
		kvd_reader_reset(io->reader);
	}
	io_uring_submit(ring);
	return NULL;
}

/* ===================== Setup ===================== */

static int ring_init(struct kvd_io *io, char *err, size_t errlen)
{
	static const unsigned tries[] = {IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_DEFER_TASKRUN,
					 IORING_SETUP_COOP_TASKRUN, 0};
	struct kvd_ring *r = io->ring;
	struct io_uring_buf_reg reg = {0};
	int rc = -EINVAL;

	for (unsigned i = 0; i < 3; i++) {
		struct io_uring_params p = {0};

		/* A single-issuer ring belongs to the task that enables it:
		 * create it disabled here, enable it in its io thread. */
		p.flags =
		    tries[i] | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED;
		p.cq_entries = CQ_ENTRIES;
		if ((rc = io_uring_queue_init_params(RING_ENTRIES, &r->ring,
						     &p)) == 0)
			break;
	}
	if (rc) {
		snprintf(err, errlen, "io_uring_queue_init: %s", strerror(-rc));
		return -1;
	}
	if (posix_memalign((void **)&r->br, 4096,
			   BUF_COUNT * sizeof(struct io_uring_buf)) ||
	    !(r->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE))) {
		snprintf(err, errlen, "out of memory for receive buffers");
		return -1;
	}
	reg.ring_addr = (uint64_t)(uintptr_t)r->br;
	reg.ring_entries = BUF_COUNT;
	reg.bgid = BUF_GROUP;
	if ((rc = io_uring_register_buf_ring(&r->ring, &reg, 0))) {
		snprintf(err, errlen, "io_uring_register_buf_ring: %s",
			 strerror(-rc));
		return -1;
	}
	io_uring_buf_ring_init(r->br);
	for (unsigned i = 0; i < BUF_COUNT; i++)
		io_uring_buf_ring_add(r->br, r->bufs + (size_t)i * BUF_SIZE,
				      BUF_SIZE, (unsigned short)i,
				      io_uring_buf_ring_mask(BUF_COUNT),
				      (int)i);
	io_uring_buf_ring_advance(r->br, BUF_COUNT);
	return 0;
}

int kvd_io_create(struct kvd_server *srv, char *err, size_t errlen)
{
	for (unsigned i = 0; i < srv->nio; i++) {
		struct kvd_io *io = srv->io[i];

		io->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (io->efd < 0) {
			snprintf(err, errlen, "io thread %u: eventfd: %s", i,
				 strerror(errno));
			return -1;
		}
		io->ring = calloc(1, sizeof(*io->ring));
		io->reader = kvd_reader_new(srv->store);
		if (!io->ring || !io->reader) {
			snprintf(err, errlen, "io thread %u: out of memory", i);
			return -1;
		}
		if (ring_init(io, err, errlen))
			return -1;
		if (srv->cfg->durability == KVD_DUR_SYNC &&
		    srv->cfg->io_thread_flush) {
			char why[128];

			if (kvd_io_jring_init(io, why, sizeof(why)))
				log_warn("io thread %u: no ring for journal "
					 "flushes (%s): its writes go to the "
					 "committers",
					 i, why);
		}
	}
	return 0;
}

int kvd_io_start(struct kvd_server *srv)
{
	for (unsigned i = 0; i < srv->nio; i++) {
		/* pthread_create returns its error; it does not set errno. */
		int rc = pthread_create(&srv->io[i]->thread, NULL, io_main,
					srv->io[i]);

		if (rc) {
			log_error("cannot start io thread %u: %s", i,
				  strerror(rc));
			return -1;
		}
	}
	return 0;
}

void kvd_io_stop(struct kvd_server *srv)
{
	atomic_store(&srv->stopping, 1);
	for (unsigned i = 0; i < srv->nio; i++) {
		uint64_t one = 1;

		if (write(srv->io[i]->efd, &one, sizeof(one)) < 0)
			log_error("io %u: cannot wake: %s", i, strerror(errno));
	}
	for (unsigned i = 0; i < srv->nio; i++)
		pthread_join(srv->io[i]->thread, NULL);
}

void kvd_io_request_stop(struct kvd_server *srv)
{
	(void)srv;
	/* Every thread blocks SIGTERM; main's sigwait takes it. */
	if (kill(getpid(), SIGTERM))
		log_error("SHUTDOWN: cannot raise SIGTERM: %s",
			  strerror(errno));
}

void kvd_io_destroy(struct kvd_server *srv)
{
	for (unsigned i = 0; srv->io && i < srv->nio; i++) {
		struct kvd_io *io = srv->io[i];

		if (!io)
			continue;
		if (io->ring) {
			if (io->ring->ring.ring_fd > 0)
				io_uring_queue_exit(&io->ring->ring);
			free(io->ring->br);
			free(io->ring->bufs);
			free(io->ring);
		}
		for (int j = 0; j < KVD_NLISTEN; j++)
			if (io->lfd[j] >= 0)
				close(io->lfd[j]);
		kvd_io_jring_free(io);
		if (io->efd >= 0)
			close(io->efd);
		while (io->free_wreq) {
			struct kvd_wreq *w = io->free_wreq;

			io->free_wreq = w->next;
			free(w);
		}
		while (io->free_pend) {
			struct kvd_pend *p = io->free_pend;

			io->free_pend = p->next;
			free(p);
		}
		kvd_reader_free(io->reader);
		free(io);
	}
	free(srv->io);
	srv->io = NULL;
	kvd_listen_close();
}
