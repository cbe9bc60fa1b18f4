/* repl.c - replication, the primary's side: the sender thread that answers
 * replicas (partial and full resyncs, journal records, snapshot chunks),
 * WAIT, min-replicas-to-ack, the replication ids, INFO replication and
 * ROLE (repl.h says how the pieces fit).
 *
 * Threads: io threads queue jobs (a kvd_wreq whose reply comes back ready
 * to send, pend->raw) and committers hand over committed batches; both only
 * touch the queue under qmu.  The sender alone owns the replicas' table,
 * the snapshots of full copies, and the held requests; readers of the
 * table (INFO, ROLE) take tmu, which the sender holds only to change it.
 * Ids and the replica link's status are under the state lock (smu).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "repl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "native/cmd.h"
#include "kv_mp.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "resp/resp.h"
#include "store.h"

/* A pull with nothing to send waits this long for records, then answers
 * empty: the replica hears from its primary at least this often. */
#define PULL_WAIT_MS 1000
/* Bytes of records or of a snapshot chunk in one reply. */
#define REPLY_BYTES (4u << 20)
/* The journal a replica needed when it went away is kept this long (as
 * Redis's repl-backlog-ttl), within the backlog, so that it can come back
 * and continue. */
#define GONE_KEEP_MS 3600000
/* A full copy's snapshot is dropped when its replica is silent this long. */
#define SESSION_IDLE_MS 60000

enum job_type { JOB_SYNC = 1, JOB_PULL, JOB_SNAP, JOB_WAIT, JOB_CLOSED };

struct job {
	int type;
	int resp; /* answer in RESP (WAIT) */
	uint64_t conn_id;
	uint64_t deadline_ms; /* WAIT: 0 for none */
	uint64_t pos[KVD_MAX_SHARDS];
	char replid[KVD_REPLID_LEN + 1];
	char ip[56];
	unsigned port, native_port, nwant, shard;
	uint64_t sid;
	uint32_t klen;
	uint8_t key[KV_MAX_KEY_LIMIT + 1];
};

/* A connected replica, as the sender sees it. */
struct rep {
	uint64_t conn_id;
	char ip[56];
	unsigned port;
	uint64_t next[KVD_MAX_SHARDS]; /* acknowledged: its next LSNs */
	/* what it can have: its position at REPLSYNC (at most ours), or
	 * the cut of its full copy, then past the records sent to it; an
	 * acknowledgement claiming more is cut to this */
	uint64_t sent[KVD_MAX_SHARDS];
	uint64_t last_ms; /* its last request */
	int online;	  /* past its full copy */
	struct kvj_reader *rd[KVD_MAX_SHARDS];
	struct kvd_snapshot *sn; /* a full copy under way */
	uint64_t sid;
};

/* Committed requests held for min-replicas-to-ack. */
struct hold {
	struct hold *next;
	unsigned shard;
	uint64_t lsn;
	uint64_t since_ms;
	struct kvd_wreq *list;
};

static struct {
	struct kvd_server *srv;
	pthread_t thread;
	int started;
	/* the queue (qmu) */
	pthread_mutex_t qmu;
	pthread_cond_t qcv;
	struct kvd_wreq *jobs, **jobs_tail;
	struct hold *holds, **holds_tail;
	int kick, stop;
	atomic_int parked; /* pulls waiting for records: committers kick */
	/* the table (tmu: the sender writes, INFO reads) */
	pthread_mutex_t tmu;
	struct rep *reps;
	unsigned nreps;
	uint64_t gone[KVD_MAX_SHARDS]; /* least positions of replicas gone */
	uint64_t gone_ms;	       /* when the last one went */
	uint64_t next_sid;
	atomic_uint good; /* replicas heard from within max-lag */
	/* resyncs answered (Redis's sync_full, sync_partial_ok and
	 * sync_partial_err); only the sender writes them */
	atomic_uint_least64_t syncs_full, syncs_partial_ok, syncs_partial_err;
	/* the sender's own */
	struct kvd_wreq *waiting; /* parked pulls and WAITs */
	struct hold *held;
	/* ids and the link (smu) */
	pthread_mutex_t smu;
	struct kvd_repl_ids ids;
	struct kvd_repl_link link;
	atomic_int is_replica;
	char dir[520]; /* data-dir is at most 511 bytes */
} R = {
    .qmu = PTHREAD_MUTEX_INITIALIZER,
    .qcv = PTHREAD_COND_INITIALIZER,
    .jobs_tail = &R.jobs,
    .holds_tail = &R.holds,
    .tmu = PTHREAD_MUTEX_INITIALIZER,
    .smu = PTHREAD_MUTEX_INITIALIZER,
};

/* ===================== Ids and state files ===================== */

void kvd_repl_lock(void)
{
	pthread_mutex_lock(&R.smu);
}

void kvd_repl_unlock(void)
{
	pthread_mutex_unlock(&R.smu);
}

struct kvd_repl_ids *kvd_repl_ids(void)
{
	return &R.ids;
}

struct kvd_repl_link *kvd_repl_link(void)
{
	return &R.link;
}

void kvd_repl_new_id(char *out)
{
	uint8_t b[KVD_REPLID_LEN / 2];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)(rand() ^ (int)kvd_mono_ns());
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* "replication": replid, replid2 and the LSNs where replid2 ended, one
 * line each; written whole to a temporary file, flushed, renamed. */
int kvd_repl_save_ids(void)
{
	char path[600], tmp[640];
	unsigned n = R.srv ? R.srv->nshards : 0;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/replication", R.dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return -1;
	fprintf(f, "replid %s\nreplid2 %s\nswitch", R.ids.replid,
		R.ids.replid2);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, " %" PRIu64, R.ids.sw[i]);
	fprintf(f, "\n");
	rc = fflush(f) || fsync(fileno(f));
	rc |= fclose(f);
	if (rc || rename(tmp, path) || kvd_fsync_dir(R.dir)) {
		log_error("replication: cannot write %s: %s", path,
			  strerror(errno));
		return -1;
	}
	return 0;
}

static void load_ids(void)
{
	char path[600], line[8192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/replication", R.dir);
	memset(&R.ids, 0, sizeof(R.ids));
	strcpy(R.ids.replid2, "0000000000000000000000000000000000000000");
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f)) {
			char *p = line + 7;

			if (!strncmp(line, "replid ", 7))
				sscanf(p, "%40s", R.ids.replid);
			else if (!strncmp(line, "replid2 ", 8))
				sscanf(line + 8, "%40s", R.ids.replid2);
			else if (!strncmp(line, "switch", 6))
				for (unsigned i = 0; i < KVD_MAX_SHARDS; i++) {
					char *end;

					R.ids.sw[i] = strtoull(p, &end, 10);
					if (end == p)
						break;
					p = end;
				}
		}
		fclose(f);
	}
	if (strlen(R.ids.replid) != KVD_REPLID_LEN) {
		kvd_repl_new_id(R.ids.replid);
		kvd_repl_save_ids();
	}
}

int kvd_repl_mark_full(int on)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "%s/replication-full-copy", R.dir);
	if (!on) {
		if (unlink(path) && errno != ENOENT)
			return -1;
		return kvd_fsync_dir(R.dir);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return -1;
	close(fd);
	return kvd_fsync_dir(R.dir);
}

/* Empty one shard directory: LMDB's files, journal segments and spares
 * (what kvd_store_open then makes anew). */
static int wipe_shard(const char *sd)
{
	struct dirent **list = NULL;
	char name[1000];
	int n = scandir(sd, &list, NULL, NULL), rc = 0;

	if (n < 0)
		return -1;
	for (int k = 0; k < n; k++) {
		const char *d = list[k]->d_name;

		snprintf(name, sizeof(name), "%s/%s", sd, d);
		/* data.mdb stays, empty (LMDB makes a new environment in an
		 * empty file): the manifest's check wants it there. */
		if (!rc && !strcmp(d, "data.mdb"))
			rc = truncate(name, 0);
		else if (!rc &&
			 (!strncmp(d, "journal-", 8) || !strcmp(d, "lock.mdb")))
			rc = unlink(name);
		free(list[k]);
	}
	free(list);
	return rc ? rc : kvd_fsync_dir(sd);
}

static int wipe_shards(const char *dir, char *err, size_t errlen)
{
	for (unsigned i = 0; i < KVD_MAX_SHARDS; i++) {
		char sd[600];
		struct stat st;

		kvd_datadir_shard_path(sd, sizeof(sd), dir, i);
		if (stat(sd, &st))
			break;
		if (wipe_shard(sd)) {
			snprintf(err, errlen,
				 "replication: cannot empty %s: %s", sd,
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

int kvd_repl_prepare(const struct kvd_config *cfg, char *err, size_t errlen)
{
	char path[600];
	struct stat st;

	snprintf(R.dir, sizeof(R.dir), "%s", cfg->data_dir);
	snprintf(path, sizeof(path), "%s/replication-full-copy", R.dir);
	if (stat(path, &st))
		return 0;
	log_warn("replication: a full copy from the primary was cut short; "
		 "emptying the shards to take a new one");
	if (wipe_shards(R.dir, err, errlen))
		return -1;
	/* Forget the primary's id too: only a full copy can follow. */
	snprintf(path, sizeof(path), "%s/replication", R.dir);
	unlink(path);
	return kvd_repl_mark_full(0) ? -1 : 0;
}

/* ===================== Replies ===================== */

static uint64_t mono_ms(void)
{
	return kvd_mono_ns() / 1000000;
}

static void frame_begin(struct kv_buf *b, uint32_t items, int status)
{
	b->len = 0;
	kv_buf_append(b, "\0\0\0\0", 4);
	kv_mp_array(b, items);
	kv_mp_uint(b, (uint64_t)status);
}

/* Hand the reply in b (a frame begun by frame_begin, or RESP bytes) to
 * the request's io thread; b is left empty. */
static void job_reply(struct kvd_wreq *w, struct kv_buf *b, int native)
{
	static const uint8_t oom[] = {0, 0, 0, 2, 0x91, KV_INTERNAL};

	if (native && !b->err)
		kv_store_be32(b->data, (uint32_t)(b->len - 4));
	if (b->err || !b->data) {
		kv_buf_free(b);
		if ((b->data = malloc(sizeof(oom))))
			memcpy(b->data, oom, sizeof(oom));
		b->len = b->data ? sizeof(oom) : 0;
	}
	w->op.val = b->data;
	w->op.vlen = (uint32_t)b->len;
	w->op.status = native && b->len > 5 ? b->data[5] : KV_OK;
	memset(b, 0, sizeof(*b));
	kvd_io_complete(w->io, w);
}

static void job_status(struct kvd_wreq *w, int status, const char *text)
{
	struct kv_buf b = {0};

	frame_begin(&b, text ? 2 : 1, status);
	if (text)
		kv_mp_cstr(&b, text);
	job_reply(w, &b, 1);
}

static struct job *job_of(struct kvd_wreq *w)
{
	return (struct job *)w->data;
}

/* ===================== The replicas' table ===================== */

static struct rep *rep_find(uint64_t conn_id)
{
	for (unsigned i = 0; i < R.nreps; i++)
		if (R.reps[i].conn_id == conn_id)
			return &R.reps[i];
	return NULL;
}

static void rep_clear(struct rep *rp)
{
	for (unsigned i = 0; i < KVD_MAX_SHARDS; i++) {
		kvd_journal_close(rp->rd[i]);
		rp->rd[i] = NULL;
	}
	kvd_snapshot_end(rp->sn);
	rp->sn = NULL;
}

static struct rep *rep_add(const struct job *j)
{
	struct rep *rp = rep_find(j->conn_id), *n;

	pthread_mutex_lock(&R.tmu);
	if (!rp) {
		n = realloc(R.reps, (R.nreps + 1) * sizeof(*n));
		if (n) {
			R.reps = n;
			rp = &R.reps[R.nreps++];
			memset(rp, 0, sizeof(*rp));
		}
	}
	if (rp) {
		rep_clear(rp);
		rp->conn_id = j->conn_id;
		snprintf(rp->ip, sizeof(rp->ip), "%s", j->ip);
		rp->port = j->port;
		rp->online = 0;
		rp->last_ms = mono_ms();
		memcpy(rp->next, j->pos, sizeof(rp->next));
		memcpy(rp->sent, j->pos, sizeof(rp->sent));
	}
	pthread_mutex_unlock(&R.tmu);
	return rp;
}

static void rep_del(uint64_t conn_id)
{
	struct rep *rp = rep_find(conn_id);

	if (!rp)
		return;
	if (rp->online) {
		for (unsigned i = 0; i < R.srv->nshards; i++)
			if (!R.gone[i] || rp->next[i] < R.gone[i])
				R.gone[i] = rp->next[i];
		R.gone_ms = mono_ms();
	}
	pthread_mutex_lock(&R.tmu);
	rep_clear(rp);
	*rp = R.reps[--R.nreps];
	pthread_mutex_unlock(&R.tmu);
}

/* The journal every replica still needs stays (within the backlog), and
 * what one that went away needed, for a while. */
static void update_holds(void)
{
	struct kvd_server *srv = R.srv;

	if (R.gone_ms && mono_ms() - R.gone_ms > GONE_KEEP_MS) {
		memset(R.gone, 0, sizeof(R.gone));
		R.gone_ms = 0;
	}
	for (unsigned i = 0; i < srv->nshards; i++) {
		uint64_t min = R.gone[i];

		for (unsigned k = 0; k < R.nreps; k++)
			if (!min || R.reps[k].next[i] < min)
				min = R.reps[k].next[i];
		kvd_shard_hold(srv->store, i, min);
	}
}

/* Replicas that have flushed everything up to target (last LSNs). */
static unsigned acked(const uint64_t *target)
{
	unsigned n = 0;

	for (unsigned k = 0; k < R.nreps; k++) {
		unsigned i;

		for (i = 0; i < R.srv->nshards; i++)
			if (R.reps[k].next[i] <= target[i])
				break;
		n += R.reps[k].online && i == R.srv->nshards;
	}
	return n;
}

static void update_good(void)
{
	unsigned lag = KVD_LIVE(R.srv->cfg->min_replicas_max_lag), n = 0;
	uint64_t now = mono_ms();

	for (unsigned k = 0; k < R.nreps; k++)
		n += R.reps[k].online &&
		     (!lag || now - R.reps[k].last_ms <= lag * 1000ull);
	atomic_store(&R.good, n);
}

/* ===================== Resyncs ===================== */

/* May the replica continue from its positions?  Its id must be ours, or
 * our previous one with positions not past where we switched; every
 * position must be within what our journals hold.  Counts the answer
 * (sync_partial_ok or, for a replica with a history, sync_partial_err). */
static int can_continue(struct rep *rp, const struct job *j)
{
	struct kvd_server *srv = R.srv;
	int same, old, history;

	pthread_mutex_lock(&R.smu);
	same = !strcmp(j->replid, R.ids.replid);
	old = !same && !strcmp(j->replid, R.ids.replid2);
	history = same || old;
	for (unsigned i = 0; old && i < srv->nshards; i++)
		if (j->pos[i] > R.ids.sw[i])
			old = 0;
	pthread_mutex_unlock(&R.smu);
	if (strlen(j->replid) != KVD_REPLID_LEN || (!same && !old))
		goto refuse;
	for (unsigned i = 0; i < srv->nshards; i++) {
		uint64_t pub = kvd_shard_pub_lsn(srv->store, i);

		if (j->pos[i] == 0 || j->pos[i] > pub + 1 ||
		    kvd_journal_open(srv->store, i, j->pos[i], &rp->rd[i]))
			goto refuse;
	}
	atomic_fetch_add(&R.syncs_partial_ok, 1);
	return 1;
refuse:
	/* A replica with a history (our ids, or records of its own) asked
	 * to continue it and cannot: Redis's sync_partial_err.  An empty one
	 * with a foreign id is a first sync (Redis's "PSYNC ? -1"). */
	for (unsigned i = 0; !history && i < srv->nshards; i++)
		history = j->pos[i] > 1;
	if (history)
		atomic_fetch_add(&R.syncs_partial_err, 1);
	return 0;
}

/* A consistent cut of every shard, as BACKUP takes it. */
static int full_copy(struct rep *rp, uint64_t *cut)
{
	struct kvd_server *srv = R.srv;
	int rc = kvd_committers_pause(srv->com);

	if (rc == 0)
		rc = kvd_snapshot_begin(srv->store, &rp->sn);
	kvd_committers_resume(srv->com);
	if (rc)
		return rc;
	for (unsigned i = 0; i < srv->nshards; i++) {
		cut[i] = kvd_snapshot_lsn(rp->sn, i);
		rp->next[i] = rp->sent[i] = cut[i] + 1;
	}
	rp->sid = ++R.next_sid;
	return 0;
}

static void do_sync(struct kvd_wreq *w, struct job *j)
{
	struct kvd_server *srv = R.srv;
	struct rep *rp = rep_add(j);
	uint64_t cut[KVD_MAX_SHARDS];
	struct kv_buf b = {0};
	char id[KVD_REPLID_LEN + 1];
	int rc;

	if (!rp) {
		job_status(w, KV_INTERNAL, NULL);
		return;
	}
	update_holds(); /* before the journal is looked at */
	pthread_mutex_lock(&R.smu);
	memcpy(id, R.ids.replid, sizeof(id));
	pthread_mutex_unlock(&R.smu);
	if (can_continue(rp, j)) {
		/* under tmu, as every change of the table INFO reads */
		pthread_mutex_lock(&R.tmu);
		rp->online = 1;
		pthread_mutex_unlock(&R.tmu);
		log_info("replication: replica %s (port %u) continues from "
			 "offset %" PRIu64,
			 j->ip, j->port, kvd_repl_offset(srv));
		frame_begin(&b, 3, KV_OK);
		kv_mp_cstr(&b, "partial");
		kv_mp_cstr(&b, id);
		job_reply(w, &b, 1);
		return;
	}
	rep_clear(rp);
	if ((rc = full_copy(rp, cut))) {
		rep_del(j->conn_id);
		update_holds();
		job_status(w, rc, "cannot take a snapshot for a full copy");
		return;
	}
	update_holds();
	atomic_fetch_add(&R.syncs_full, 1);
	log_info("replication: replica %s (port %u) takes a full copy", j->ip,
		 j->port);
	frame_begin(&b, 5, KV_OK);
	kv_mp_cstr(&b, "full");
	kv_mp_cstr(&b, id);
	kv_mp_bin(&b, cut, srv->nshards * sizeof(uint64_t));
	kv_mp_uint(&b, rp->sid);
	job_reply(w, &b, 1);
}

static void do_snap(struct kvd_wreq *w, struct job *j)
{
	struct rep *rp = rep_find(j->conn_id);
	struct kv_buf chunk = {0}, next = {0}, b = {0};
	struct kv_slice start = {j->key, j->klen};
	int rc;

	if (!rp || !rp->sn || rp->sid != j->sid || j->shard >= R.srv->nshards) {
		job_status(w, KV_BAD_ARGS, "no such full copy");
		return;
	}
	rp->last_ms = mono_ms();
	rc = kvd_snapshot_chunk(rp->sn, j->shard, start, REPLY_BYTES, &chunk,
				&next);
	if (rc) {
		job_status(w, rc, NULL);
	} else {
		frame_begin(&b, 3, KV_OK);
		kv_mp_bin(&b, chunk.data, chunk.len);
		if (next.len)
			kv_mp_bin(&b, next.data, next.len);
		else
			kv_mp_nil(&b);
		job_reply(w, &b, 1);
	}
	kv_buf_free(&chunk);
	kv_buf_free(&next);
}

/* ===================== Pulls ===================== */

/* Records from the replica's positions into recs: [u16 shard][u64 lsn]
 * [u8 type][u32 length][journal payload], little-endian.  0, or a status
 * when a position is no longer in the journal. */
static int pull_build(struct rep *rp, struct kv_buf *recs, unsigned *n)
{
	struct kvd_server *srv = R.srv;

	*n = 0;
	for (unsigned i = 0; i < srv->nshards; i++) {
		uint64_t upto = kvd_shard_pub_lsn(srv->store, i), lsn;
		const void *pl;
		uint32_t len;
		uint8_t type;
		int rc;

		if (rp->next[i] > upto)
			continue;
		if (rp->rd[i] && kvd_journal_lsn(rp->rd[i]) != rp->next[i]) {
			kvd_journal_close(rp->rd[i]);
			rp->rd[i] = NULL;
		}
		if (!rp->rd[i] &&
		    kvd_journal_open(srv->store, i, rp->next[i], &rp->rd[i]))
			return KV_NOT_FOUND;
		while (recs->len < REPLY_BYTES &&
		       (rc = kvd_journal_next(rp->rd[i], upto, &lsn, &type, &pl,
					      &len)) > 0) {
			uint16_t s = (uint16_t)i;

			kv_buf_append(recs, &s, 2);
			kv_buf_append(recs, &lsn, 8);
			kv_buf_append(recs, &type, 1);
			kv_buf_append(recs, &len, 4);
			kv_buf_append(recs, pl, len);
			rp->sent[i] = lsn + 1;
			(*n)++;
		}
		if (rc < 0)
			return KV_NOT_FOUND;
		/* the next pull starts where this one stopped */
		if (recs->len >= REPLY_BYTES)
			break;
	}
	return recs->err ? KV_INTERNAL : 0;
}

/* Answer a pull if there is something to send or its wait is over: 1 when
 * answered. */
static int pull_try(struct kvd_wreq *w, int last)
{
	struct job *j = job_of(w);
	struct rep *rp = rep_find(j->conn_id);
	struct kv_buf recs = {0}, b = {0};
	uint64_t pos[KVD_MAX_SHARDS];
	unsigned n;
	int rc;

	if (!rp) {
		job_status(w, KV_BAD_ARGS, "send REPLSYNC first");
		return 1;
	}
	if ((rc = pull_build(rp, &recs, &n))) {
		kv_buf_free(&recs);
		job_status(w, rc,
			   "the journal no longer holds the replica's "
			   "position: resync");
		return 1;
	}
	if (!n && !last) {
		kv_buf_free(&recs);
		return 0;
	}
	for (unsigned i = 0; i < R.srv->nshards; i++)
		pos[i] = kvd_shard_pub_lsn(R.srv->store, i) + 1;
	frame_begin(&b, 3, KV_OK);
	kv_mp_bin(&b, recs.data, recs.len);
	kv_mp_bin(&b, pos, R.srv->nshards * sizeof(uint64_t));
	kv_buf_free(&recs);
	job_reply(w, &b, 1);
	return 1;
}

static void park(struct kvd_wreq *w)
{
	w->next = R.waiting;
	R.waiting = w;
}

static void do_pull(struct kvd_wreq *w, struct job *j)
{
	struct rep *rp = rep_find(j->conn_id);
	int same;

	pthread_mutex_lock(&R.smu);
	same = !strcmp(j->replid, R.ids.replid);
	pthread_mutex_unlock(&R.smu);
	if (!rp || !same) {
		job_status(w, KV_BAD_ARGS,
			   rp ? "the replication id changed: resync"
			      : "send REPLSYNC first");
		return;
	}
	/* Its request is its acknowledgement: everything below its
	 * positions is on its disk, as far as it can have had it: a
	 * position past what was sent to it is a lie (a fake replica would
	 * make WAIT and min-replicas-to-ack count writes nobody has, and
	 * look the best replica to promote).  A full copy is over once it
	 * pulls. */
	pthread_mutex_lock(&R.tmu);
	for (unsigned i = 0; i < R.srv->nshards; i++)
		rp->next[i] = j->pos[i] < rp->sent[i] ? j->pos[i] : rp->sent[i];
	rp->last_ms = mono_ms();
	rp->online = 1;
	pthread_mutex_unlock(&R.tmu);
	if (rp->sn) {
		kvd_snapshot_end(rp->sn);
		rp->sn = NULL;
	}
	update_holds();
	j->deadline_ms = mono_ms() + PULL_WAIT_MS;
	if (!pull_try(w, 0)) {
		atomic_fetch_add(&R.parked, 1);
		park(w);
	}
}

/* ===================== WAIT and held writes ===================== */

static void wait_reply(struct kvd_wreq *w, unsigned n)
{
	struct job *j = job_of(w);
	struct kv_buf b = {0};

	if (j->resp) {
		char line[32];

		snprintf(line, sizeof(line), ":%u\r\n", n);
		kv_buf_append(&b, line, strlen(line));
		job_reply(w, &b, 0);
		return;
	}
	frame_begin(&b, 2, KV_OK);
	kv_mp_uint(&b, n);
	job_reply(w, &b, 1);
}

static int wait_try(struct kvd_wreq *w, int last)
{
	struct job *j = job_of(w);
	unsigned n = acked(j->pos);

	if (n >= j->nwant || last ||
	    (j->deadline_ms && mono_ms() >= j->deadline_ms)) {
		wait_reply(w, n);
		return 1;
	}
	return 0;
}

/* Look again at everything waiting; last: answer it all (stopping). */
static void retry_waiting(int last)
{
	struct kvd_wreq *w = R.waiting, *keep = NULL;
	uint64_t now = mono_ms();

	R.waiting = NULL;
	while (w) {
		struct kvd_wreq *next = w->next;
		struct job *j = job_of(w);
		int done;

		if (j->type == JOB_PULL) {
			done = pull_try(w, last || now >= j->deadline_ms);
			if (done)
				atomic_fetch_sub(&R.parked, 1);
		} else {
			done = wait_try(w, last);
		}
		if (!done) {
			w->next = keep;
			keep = w;
		}
		w = next;
	}
	R.waiting = keep;
}

static void complete_list(struct kvd_wreq *w, int status)
{
	while (w) {
		struct kvd_wreq *next = w->next;

		if (status && w->op.status == KV_OK)
			w->op.status = status;
		kvd_io_complete(w->io, w);
		w = next;
	}
}

/* Release the writes enough replicas have; past min-replicas-max-lag
 * without them, answer NO_REPLICAS (the write is on the primary's disk,
 * but not on enough replicas'). */
static void release_holds(int last)
{
	struct hold **hp = &R.held;
	unsigned need = KVD_LIVE(R.srv->cfg->min_replicas_to_ack);
	unsigned lag = KVD_LIVE(R.srv->cfg->min_replicas_max_lag);
	uint64_t now = mono_ms(), target[KVD_MAX_SHARDS] = {0};

	while (*hp) {
		struct hold *h = *hp;
		int status = -1;

		target[h->shard] = h->lsn;
		if (last || acked(target) >= need)
			status = 0;
		else if (lag && now - h->since_ms > lag * 1000ull)
			status = KV_NO_REPLICAS;
		target[h->shard] = 0;
		if (status < 0) {
			hp = &h->next;
			continue;
		}
		*hp = h->next;
		complete_list(h->list, status);
		free(h);
	}
}

/* ===================== The sender thread ===================== */

static uint64_t *closed_ids;
static unsigned nclosed, capclosed;

static void run_job(struct kvd_wreq *w)
{
	struct job *j = job_of(w);

	switch (j->type) {
	case JOB_SYNC: do_sync(w, j); break;
	case JOB_PULL: do_pull(w, j); break;
	case JOB_SNAP: do_snap(w, j); break;
	default: /* JOB_WAIT */
		if (!wait_try(w, 0))
			park(w);
		break;
	}
}

/* Drop the snapshots of full copies whose replica went silent. */
static void expire_sessions(void)
{
	uint64_t now = mono_ms();

	for (unsigned k = 0; k < R.nreps; k++)
		if (R.reps[k].sn && now - R.reps[k].last_ms > SESSION_IDLE_MS) {
			kvd_snapshot_end(R.reps[k].sn);
			R.reps[k].sn = NULL;
		}
}

/* Take what was queued; wait (at most 100 ms: timeouts) when nothing was. */
static void take(struct kvd_wreq **jobs, struct hold **holds, int *stop,
		 uint64_t **closed, unsigned *nc)
{
	pthread_mutex_lock(&R.qmu);
	if (!R.jobs && !R.holds && !R.kick && !R.stop && !nclosed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += R.waiting || R.held ? 10000000 : 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&R.qcv, &R.qmu, &ts);
	}
	*jobs = R.jobs;
	*holds = R.holds;
	R.jobs = NULL;
	R.jobs_tail = &R.jobs;
	R.holds = NULL;
	R.holds_tail = &R.holds;
	R.kick = 0;
	*stop = R.stop;
	*closed = closed_ids;
	*nc = nclosed;
	closed_ids = NULL;
	nclosed = capclosed = 0;
	pthread_mutex_unlock(&R.qmu);
}

static void *sender_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct kvd_wreq *w;
		struct hold *h;
		uint64_t *closed;
		unsigned nc;
		int stop, last = atomic_load(&R.srv->stopping);

		take(&w, &h, &stop, &closed, &nc);
		for (unsigned i = 0; i < nc; i++)
			rep_del(closed[i]);
		if (nc)
			update_holds();
		free(closed);
		while (w) {
			struct kvd_wreq *next = w->next;

			run_job(w);
			w = next;
		}
		while (h) {
			struct hold *next = h->next;

			h->next = R.held;
			R.held = h;
			h = next;
		}
		update_good();
		retry_waiting(last);
		release_holds(last);
		expire_sessions();
		update_holds();
		if (stop && !R.waiting && !R.held)
			break;
	}
	return NULL;
}

int kvd_repl_start(struct kvd_server *srv, char *err, size_t errlen)
{
	const struct kvd_config *cfg = srv->cfg;
	int rc;

	R.srv = srv;
	R.jobs_tail = &R.jobs;
	R.holds_tail = &R.holds;
	snprintf(R.dir, sizeof(R.dir), "%s", cfg->data_dir);
	kvd_store_set_backlog(srv->store, cfg->repl_backlog_size);
	pthread_mutex_lock(&R.smu);
	load_ids();
	if (cfg->replicaof[0]) {
		char host[256];
		unsigned port;
		int resp;

		/* checked by kvd_config_load already */
		if (kvd_config_replicaof(cfg->replicaof, host, sizeof(host),
					 &port, &resp)) {
			pthread_mutex_unlock(&R.smu);
			snprintf(err, errlen,
				 "replicaof: not \"HOST PORT\" or \"HOST PORT "
				 "resp\"");
			return -1;
		}
		snprintf(R.link.host, sizeof(R.link.host), "%s", host);
		R.link.port = port;
		R.link.resp = resp;
		R.link.native_port = R.link.resp ? 0 : port;
		R.link.replica = 1;
		atomic_store(&R.is_replica, 1);
	}
	/* before anything is published (repl_async.c) */
	if (kvd_repl_async_begin(srv, !R.link.replica, err, errlen)) {
		pthread_mutex_unlock(&R.smu);
		return -1;
	}
	pthread_mutex_unlock(&R.smu);
	if ((rc = pthread_create(&R.thread, NULL, sender_main, NULL))) {
		snprintf(err, errlen, "cannot start the replication sender: %s",
			 strerror(rc));
		return -1;
	}
	pthread_setname_np(R.thread, "kvd-repl-send"); /* for top -H */
	R.started = 1;
	if (kvd_replica_start(srv)) {
		snprintf(err, errlen, "cannot start the replica thread");
		return -1;
	}
	return 0;
}

void kvd_repl_stop(struct kvd_server *srv)
{
	kvd_replica_stop();
	if (!R.started)
		return;
	pthread_mutex_lock(&R.qmu);
	R.stop = 1;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
	pthread_join(R.thread, NULL);
	R.started = 0;
	for (unsigned k = 0; k < R.nreps; k++)
		rep_clear(&R.reps[k]);
	free(R.reps);
	R.reps = NULL;
	R.nreps = 0;
	kvd_repl_async_end(srv); /* a clean stop: every journal flushed */
}

/* ===================== Committers' side ===================== */

static void kick(void)
{
	pthread_mutex_lock(&R.qmu);
	R.kick = 1;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

void kvd_repl_committed(struct kvd_server *srv, unsigned shard,
			struct kvd_wreq *list)
{
	struct hold *h = NULL;

	/* A replica's own applying, and everything when nobody asked for
	 * acknowledgements, goes back at once. */
	if (list && KVD_LIVE(srv->cfg->min_replicas_to_ack) &&
	    !atomic_load(&R.is_replica) && list->op.kind < KVD_W_REPL &&
	    !atomic_load(&srv->stopping) && R.started)
		h = malloc(sizeof(*h));
	if (h) {
		h->next = NULL;
		h->shard = shard;
		h->lsn = kvd_shard_pub_lsn(srv->store, shard);
		h->since_ms = mono_ms();
		h->list = list;
		pthread_mutex_lock(&R.qmu);
		*R.holds_tail = h;
		R.holds_tail = &h->next;
		pthread_cond_signal(&R.qcv);
		pthread_mutex_unlock(&R.qmu);
	} else {
		complete_list(list, 0);
	}
	if (atomic_load(&R.parked))
		kick();
}

/* ===================== Io threads' side ===================== */

int kvd_repl_is_replica(void)
{
	return atomic_load(&R.is_replica);
}

int kvd_repl_write_ok(void)
{
	const struct kvd_config *cfg;

	if (atomic_load(&R.is_replica))
		return KV_REPLICA_READ_ONLY;
	if (!R.srv)
		return KV_OK;
	cfg = R.srv->cfg;
	if (KVD_LIVE(cfg->min_replicas_to_ack) &&
	    KVD_LIVE(cfg->min_replicas_max_lag) &&
	    atomic_load(&R.good) < KVD_LIVE(cfg->min_replicas_to_ack))
		return KV_NO_REPLICAS;
	return KV_OK;
}

/* A replica's link is freed (its c->closed hook, set with CONN_REPLICA):
 * it leaves the RESP registry it joined (a RESP connection's protocol
 * close did that already), and the sender forgets it. */
static void link_closed(struct kvd_conn *c)
{
	if (c->proto != KVD_PROTO_RESP)
		kvd_resp_conn_close(c);
	kvd_repl_conn_closed(c);
}

void kvd_repl_conn_closed(struct kvd_conn *c)
{
	pthread_mutex_lock(&R.qmu);
	if (nclosed == capclosed) {
		unsigned cap = capclosed ? 2 * capclosed : 8;
		uint64_t *p = realloc(closed_ids, cap * sizeof(*p));

		if (p) {
			closed_ids = p;
			capclosed = cap;
		}
	}
	if (nclosed < capclosed)
		closed_ids[nclosed++] = c->id;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

/* A job for the sender, its reply queued in order on c. */
static struct kvd_wreq *job_new(struct kvd_conn *c, unsigned op, int type)
{
	struct kvd_pend *pd = kvd_conn_pend(c, op);
	struct kvd_wreq *w;
	struct job *j;

	if (!pd)
		return NULL;
	if (!(w = kvd_wreq_new(c->io, sizeof(struct job)))) {
		pd->done = 1;
		pd->status = KV_INTERNAL;
		kvd_conn_flush(c);
		return NULL;
	}
	memset(&w->op, 0, sizeof(w->op));
	w->pend = pd;
	w->io = c->io;
	w->shard = 0;
	w->tracked = 0;
	pd->raw = 1;
	pd->parts = 1;
	if (c->proto == KVD_PROTO_NATIVE)
		pd->aux = KVD_PEND_COUNT;
	j = job_of(w);
	memset(j, 0, sizeof(*j));
	j->type = type;
	j->conn_id = c->id;
	return w;
}

static void job_submit(struct kvd_conn *c, struct kvd_wreq *w)
{
	c->io->inflight++;
	pthread_mutex_lock(&R.qmu);
	w->next = NULL;
	*R.jobs_tail = w;
	R.jobs_tail = &w->next;
	pthread_cond_signal(&R.qcv);
	pthread_mutex_unlock(&R.qmu);
}

static int is_bytes(const struct kv_mp_obj *o)
{
	return o->type == KV_MP_BIN || o->type == KV_MP_STR;
}

/* Positions: nshards little-endian u64s. */
static int arg_pos(const struct kv_mp_obj *o, unsigned n, uint64_t *pos)
{
	if (!is_bytes(o) || o->len != n * sizeof(uint64_t))
		return KV_BAD_ARGS;
	memcpy(pos, o->p, o->len);
	return KV_OK;
}

static int arg_replid(const struct kv_mp_obj *o, char *out)
{
	if (!is_bytes(o) || (o->len && o->len != KVD_REPLID_LEN))
		return KV_BAD_ARGS;
	memcpy(out, o->p, o->len);
	out[o->len] = '\0';
	return KV_OK;
}

/* The replica's address, as INFO's slaveN lines give it to Sentinel. */
static void peer_ip(struct kvd_conn *c, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	snprintf(out, len, "?");
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out,
			  (socklen_t)len);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  out, (socklen_t)len);
	else
		snprintf(out, len, "127.0.0.1"); /* a Unix socket: this host */
}

/* Shard counts must agree: records and cuts are per shard. */
static int sync_args(struct kvd_conn *c, struct kvd_req *r, struct job *j)
{
	unsigned n = c->io->srv->nshards;
	char msg[200];
	int rc;

	if (r->a[1].type != KV_MP_UINT || r->a[3].type != KV_MP_UINT ||
	    r->a[4].type != KV_MP_UINT || r->a[3].v.u > 65535)
		return KV_BAD_ARGS;
	if (r->a[1].v.u != n) {
		snprintf(msg, sizeof(msg),
			 "the replica has %llu shards and the primary %u: a "
			 "replica needs the same shard count",
			 (unsigned long long)r->a[1].v.u, n);
		kvd_count_now(&c->io->stats, r->op, KV_BAD_ARGS);
		kvd_reply_status(c, KV_BAD_ARGS, msg);
		return -1;
	}
	if ((rc = arg_replid(&r->a[0], j->replid)) ||
	    (rc = arg_pos(&r->a[2], n, j->pos)))
		return rc;
	j->port = (unsigned)r->a[3].v.u;
	j->native_port = (unsigned)r->a[4].v.u;
	peer_ip(c, j->ip, sizeof(j->ip));
	return KV_OK;
}

static int native_replicaof(struct kvd_conn *c, struct kvd_req *r)
{
	char host[256], err[300];

	int st;

	if (r->a[0].type == KV_MP_NIL || (is_bytes(&r->a[0]) && !r->a[0].len)) {
		st = kvd_repl_replicaof(NULL, 0, 0, err, sizeof(err));
	} else {
		if (!is_bytes(&r->a[0]) || r->a[0].len >= sizeof(host) ||
		    memchr(r->a[0].p, '\0', r->a[0].len) ||
		    r->a[1].type != KV_MP_UINT || !r->a[1].v.u ||
		    r->a[1].v.u > 65535)
			return KV_BAD_ARGS;
		memcpy(host, r->a[0].p, r->a[0].len);
		host[r->a[0].len] = '\0';
		st = kvd_repl_replicaof(host, (unsigned)r->a[1].v.u, 0, err,
					sizeof(err));
	}
	if (st == KV_OK) {
		kvd_reply_status(c, KV_OK, NULL);
		return KV_OK;
	}
	kvd_count_now(&c->io->stats, r->op, st);
	kvd_reply_status(c, st, err);
	return KVD_ANSWERED;
}

static void wait_targets(struct kvd_server *srv, uint64_t *pos)
{
	for (unsigned i = 0; i < srv->nshards; i++)
		pos[i] = kvd_shard_pub_lsn(srv->store, i);
}

/* Check a request's arguments into j; KV_OK, a status, or -1 when
 * answered already. */
static int job_args(struct kvd_conn *c, struct kvd_req *r, struct job *j)
{
	struct kvd_server *srv = c->io->srv;
	int rc;

	switch (j->type) {
	case JOB_SYNC: return sync_args(c, r, j);
	case JOB_PULL:
		if ((rc = arg_replid(&r->a[0], j->replid)))
			return rc;
		return arg_pos(&r->a[1], srv->nshards, j->pos);
	case JOB_SNAP:
		if (r->a[0].type != KV_MP_UINT || r->a[1].type != KV_MP_UINT ||
		    !is_bytes(&r->a[2]) || r->a[2].len > KV_MAX_KEY_LIMIT)
			return KV_BAD_ARGS;
		j->sid = r->a[0].v.u;
		j->shard = r->a[1].v.u > KVD_MAX_SHARDS ? KVD_MAX_SHARDS
							: (unsigned)r->a[1].v.u;
		j->klen = r->a[2].len;
		memcpy(j->key, r->a[2].p, j->klen);
		return KV_OK;
	default: /* JOB_WAIT */
		if (r->a[0].type != KV_MP_UINT || r->a[1].type != KV_MP_UINT)
			return KV_BAD_ARGS;
		if (kvd_repl_is_replica())
			return KV_REPLICA_READ_ONLY;
		j->nwant = r->a[0].v.u > 1000 ? 1000 : (unsigned)r->a[0].v.u;
		if (r->a[1].v.u)
			j->deadline_ms = mono_ms() + r->a[1].v.u;
		wait_targets(srv, j->pos);
		return KV_OK;
	}
}

int kvd_repl_native(struct kvd_conn *c, struct kvd_req *r)
{
	static __thread struct job j;
	struct kvd_wreq *w;
	int rc;

	memset(&j, 0, sizeof(j));
	switch (r->op) {
	case KV_OP_REPLICAOF: return native_replicaof(c, r);
	case KV_OP_REPLSYNC: j.type = JOB_SYNC; break;
	case KV_OP_REPLPULL: j.type = JOB_PULL; break;
	case KV_OP_REPLSNAP: j.type = JOB_SNAP; break;
	default: j.type = JOB_WAIT; break;
	}
	if ((rc = job_args(c, r, &j)))
		return rc < 0 ? KV_OK : rc;
	if (!(w = job_new(c, r->op, j.type)))
		return KV_OK; /* answered INTERNAL in order */
	j.conn_id = c->id;
	memcpy(job_of(w), &j, sizeof(j));
	if (j.type == JOB_SYNC && !(c->flags & CONN_REPLICA)) {
		/* in the RESP registry from now on: CLIENT LIST shows it
		 * (flags=S) and CLIENT KILL TYPE replica closes it */
		c->flags |= CONN_REPLICA;
		c->closed = link_closed;
		kvd_resp_conn_open(c);
	}
	if (c->flags & CONN_REPLICA)
		atomic_store_explicit(&c->act_ms, c->io->now_ms,
				      memory_order_relaxed);
	job_submit(c, w);
	return KV_OK;
}

const char *kvd_repl_resp_wait(struct kvd_conn *c, uint64_t n, uint64_t ms)
{
	struct kvd_wreq *w;
	struct job *j;

	if (kvd_repl_is_replica())
		return "ERR WAIT cannot be used with replica instances. Please "
		       "also note that since Redis 4.0 if a replica is "
		       "configured to be writable (which is not the default) "
		       "writes to replicas are just local and are not "
		       "propagated.";
	if (!(w = job_new(c, RESP_CMD_WAIT, JOB_WAIT)))
		return NULL;
	j = job_of(w);
	j->resp = 1;
	j->nwant = n > 1000 ? 1000 : (unsigned)n;
	if (ms)
		j->deadline_ms = mono_ms() + ms;
	wait_targets(c->io->srv, j->pos);
	job_submit(c, w);
	return NULL;
}

/* ===================== Roles ===================== */

/* REPLICAOF refused: a client may send it at will. */
static struct kvd_log_limit refuse_limit = KVD_LOG_LIMIT_INIT(1000);

int kvd_repl_replicaof(const char *host, unsigned port, int resp, char *err,
		       size_t errlen)
{
	struct kvd_server *srv = R.srv;
	int rc = 0, same;

	pthread_mutex_lock(&R.smu);
	same = host && R.link.replica && R.link.port == port &&
	       R.link.resp == resp && !strcmp(R.link.host, host);
	pthread_mutex_unlock(&R.smu);
	/* Following the primary it follows already changes nothing. */
	if (host && !same &&
	    (rc = kvd_repl_may_follow(srv->cfg, host, port, resp, err,
				      errlen))) {
		kvd_log_ratelimited(&refuse_limit, KVD_LOG_WARN,
				    "replication: REPLICAOF %s %u refused: %s",
				    host, port, err);
		return rc;
	}
	pthread_mutex_lock(&R.smu);
	if (!host && R.link.replica) {
		/* Promotion: a new history starts here; the old one stays
		 * good up to these positions (PSYNC2). */
		memcpy(R.ids.replid2, R.ids.replid, sizeof(R.ids.replid2));
		for (unsigned i = 0; i < srv->nshards; i++)
			R.ids.sw[i] = kvd_shard_pub_lsn(srv->store, i) + 1;
		kvd_repl_new_id(R.ids.replid);
		rc = kvd_repl_save_ids();
		R.link.replica = 0;
		R.link.up = 0;
		R.link.syncing = 0;
		R.link.gen++;
		atomic_store(&R.is_replica, 0);
		log_info("replication: REPLICAOF NO ONE: now a primary, "
			 "replication id %s",
			 R.ids.replid);
	} else if (host && R.link.replica && R.link.port == port &&
		   R.link.resp == resp && !strcmp(R.link.host, host)) {
		/* already following it: the link stays (Redis: "Already
		 * connected to specified master") */
	} else if (host) {
		snprintf(R.link.host, sizeof(R.link.host), "%s", host);
		R.link.port = port;
		R.link.resp = resp;
		R.link.native_port = resp ? 0 : port;
		R.link.replica = 1;
		R.link.up = 0;
		R.link.syncing = 0;
		R.link.down_since_ms = 0;
		R.link.gen++;
		atomic_store(&R.is_replica, 1);
		log_info("replication: REPLICAOF %s %u (its %s port)", host,
			 port, resp ? "RESP" : "native");
	}
	pthread_mutex_unlock(&R.smu);
	kvd_replica_kick();
	if (!rc)
		return KV_OK;
	snprintf(err, errlen, "cannot write the replication ids");
	return KV_INTERNAL;
}

void kvd_repl_config_role(char *buf, size_t cap)
{
	pthread_mutex_lock(&R.smu);
	if (R.link.replica)
		snprintf(buf, cap, "%s %u%s", R.link.host, R.link.port,
			 R.link.resp ? " resp" : "");
	else if (cap)
		buf[0] = '\0';
	pthread_mutex_unlock(&R.smu);
}

int kvd_repl_kill_link(void)
{
	int n = 0;

	pthread_mutex_lock(&R.smu);
	if (R.link.replica && (R.link.up || R.link.syncing)) {
		R.link.gen++; /* the replica's thread drops it and reconnects */
		n = 1;
	}
	pthread_mutex_unlock(&R.smu);
	if (n)
		kvd_replica_kick();
	return n;
}

int kvd_repl_link_line(struct kv_buf *b)
{
	struct kvd_repl_link l;
	char line[600];
	uint64_t now = mono_ms();
	int n;

	pthread_mutex_lock(&R.smu);
	l = R.link;
	pthread_mutex_unlock(&R.smu);
	if (!l.replica || !(l.up || l.syncing))
		return 0;
	n = snprintf(line, sizeof(line),
		     "id=0 addr=%s:%u laddr=%s fd=-1 name= age=%llu "
		     "idle=%llu flags=M db=0 sub=0 psub=0 ssub=0 multi=-1 "
		     "qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 "
		     "obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=NULL "
		     "user=default redir=-1 resp=2\n",
		     l.host, l.native_port, l.laddr,
		     (unsigned long long)(now - l.up_since_ms) / 1000,
		     (unsigned long long)(now - l.last_io_ms) / 1000);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return 0;
	kv_buf_append(b, line, (size_t)n);
	return 1;
}

/* ===================== INFO, ROLE, STATS ===================== */

uint64_t kvd_repl_offset(struct kvd_server *srv)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < srv->nshards; i++)
		off += kvd_shard_pub_lsn(srv->store, i);
	return off;
}

static uint64_t rep_offset(const struct rep *rp, unsigned n)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < n; i++)
		off += rp->next[i] ? rp->next[i] - 1 : 0;
	return off;
}

static void info_line(struct kv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void info_line(struct kv_buf *b, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		kv_buf_append(b, line,
			      (size_t)n < sizeof(line) ? (size_t)n
						       : sizeof(line) - 1);
	kv_buf_append(b, "\r\n", 2);
}

/* Every connection that asked for the journal, as Redis lists its
 * replicas: online once it streams, send_bulk while it takes a full copy
 * (a client that pulls a copy of the whole store shows here too). */
static void info_replicas(struct kvd_server *srv, struct kv_buf *b)
{
	uint64_t now = mono_ms();

	pthread_mutex_lock(&R.tmu);
	info_line(b, "connected_slaves:%u", R.nreps);
	for (unsigned k = 0; k < R.nreps; k++) {
		const struct rep *rp = &R.reps[k];

		info_line(
		    b,
		    "slave%u:ip=%s,port=%u,state=%s,offset=%" PRIu64
		    ",lag=%" PRIu64,
		    k, rp->ip, rp->port, rp->online ? "online" : "send_bulk",
		    rep_offset(rp, srv->nshards), (now - rp->last_ms) / 1000);
	}
	pthread_mutex_unlock(&R.tmu);
}

void kvd_repl_info(struct kvd_server *srv, struct kv_buf *b)
{
	struct kvd_repl_link l;
	struct kvd_repl_ids ids;
	uint64_t off = kvd_repl_offset(srv), sw = 0;

	pthread_mutex_lock(&R.smu);
	l = R.link;
	ids = R.ids;
	pthread_mutex_unlock(&R.smu);
	for (unsigned i = 0; i < srv->nshards; i++)
		sw += ids.sw[i] ? ids.sw[i] - 1 : 0;
	info_line(b, "# Replication");
	info_line(b, "role:%s", l.replica ? "slave" : "master");
	if (l.replica) {
		info_line(b, "master_host:%s", l.host);
		info_line(b, "master_port:%u", l.port);
		info_line(b, "master_link_status:%s", l.up ? "up" : "down");
		info_line(b, "master_last_io_seconds_ago:%lld",
			  l.last_io_ms
			      ? (long long)(mono_ms() - l.last_io_ms) / 1000
			      : -1LL);
		info_line(b, "master_sync_in_progress:%d", l.syncing);
		info_line(b, "slave_read_repl_offset:%" PRIu64, off);
		info_line(b, "slave_repl_offset:%" PRIu64, off);
		/* Sentinel skips a replica whose link has been down too long
		 * when it picks one to promote */
		if (!l.up)
			info_line(
			    b, "master_link_down_since_seconds:%lld",
			    l.down_since_ms
				? (long long)(mono_ms() - l.down_since_ms) /
				      1000
				: -1LL);
		info_line(b, "slave_priority:%u",
			  KVD_LIVE(srv->cfg->replica_priority));
		info_line(b, "slave_read_only:1");
		info_line(b, "replica_announced:1");
	}
	info_replicas(srv, b);
	info_line(b, "master_failover_state:no-failover");
	info_line(b, "master_replid:%s", ids.replid);
	info_line(b, "master_replid2:%s", ids.replid2);
	info_line(b, "master_repl_offset:%" PRIu64, off);
	if (sw)
		info_line(b, "second_repl_offset:%" PRIu64, sw + 1);
	else
		info_line(b, "second_repl_offset:-1");
	info_line(b, "repl_backlog_active:%d", R.nreps > 0);
	info_line(b, "repl_backlog_size:%" PRIu64,
		  srv->cfg->repl_backlog_size * srv->nshards);
	info_line(b, "repl_backlog_first_byte_offset:1");
	info_line(b, "repl_backlog_histlen:%" PRIu64, off);
}

void kvd_repl_role(struct kvd_conn *c)
{
	struct kvd_server *srv = c->io->srv;
	struct kvd_repl_link l;
	uint64_t off = kvd_repl_offset(srv);

	pthread_mutex_lock(&R.smu);
	l = R.link;
	pthread_mutex_unlock(&R.smu);
	if (l.replica) {
		resp_add_array(c, 5);
		resp_add_cstr(c, "slave");
		resp_add_cstr(c, l.host);
		resp_add_int(c, l.port);
		resp_add_cstr(c, l.syncing ? "sync"
				 : l.up	   ? "connected"
					   : "connecting");
		resp_add_int(c, (int64_t)off);
		return;
	}
	pthread_mutex_lock(&R.tmu);
	{
		unsigned n = 0;

		for (unsigned k = 0; k < R.nreps; k++)
			n += R.reps[k].online;
		resp_add_array(c, 3);
		resp_add_cstr(c, "master");
		resp_add_int(c, (int64_t)off);
		resp_add_array(c, n);
		for (unsigned k = 0; k < R.nreps; k++) {
			char port[16], o[24];

			if (!R.reps[k].online)
				continue;
			snprintf(port, sizeof(port), "%u", R.reps[k].port);
			snprintf(o, sizeof(o), "%" PRIu64,
				 rep_offset(&R.reps[k], srv->nshards));
			resp_add_array(c, 3);
			resp_add_cstr(c, R.reps[k].ip);
			resp_add_cstr(c, port);
			resp_add_cstr(c, o);
		}
	}
	pthread_mutex_unlock(&R.tmu);
}

void kvd_repl_stat(struct kvd_server *srv, struct kvd_repl_stat *s)
{
	uint64_t off = kvd_repl_offset(srv);

	memset(s, 0, sizeof(*s));
	s->offset = off;
	s->replicas = atomic_load(&R.good);
	s->syncs_full = atomic_load(&R.syncs_full);
	s->syncs_partial_ok = atomic_load(&R.syncs_partial_ok);
	s->syncs_partial_err = atomic_load(&R.syncs_partial_err);
	pthread_mutex_lock(&R.smu);
	s->replica = R.link.replica;
	s->link_up = R.link.up;
	if (s->replica) {
		s->lag_records = R.link.primary_offset > off
				     ? R.link.primary_offset - off
				     : 0;
		s->lag_ms =
		    R.link.last_io_ms ? mono_ms() - R.link.last_io_ms : 0;
	}
	pthread_mutex_unlock(&R.smu);
	if (s->replica)
		return;
	pthread_mutex_lock(&R.tmu);
	for (unsigned k = 0; k < R.nreps; k++) {
		uint64_t ro = rep_offset(&R.reps[k], srv->nshards);
		uint64_t ms = mono_ms() - R.reps[k].last_ms;

		if (off > ro && off - ro > s->lag_records)
			s->lag_records = off - ro;
		if (ms > s->lag_ms)
			s->lag_ms = ms;
	}
	pthread_mutex_unlock(&R.tmu);
}
