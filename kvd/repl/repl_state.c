/* repl_state.c - replication's state: the replication ids and their file,
 * the marker of a full copy under way (and the emptying of a copy cut
 * short), the role (REPLICAOF, promotion, the link a replica keeps), who
 * may write, and the figures STATS and /metrics read.  Everything here is
 * under the state lock (smu, kvd_repl_lock) but the replicas' table, read
 * under tmu.
 */
#include "repl_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_status.h"
#include "log.h"
#include "net/loop.h"

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

void repl_load_ids(void)
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

/* ===================== The role ===================== */

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

/* ===================== Figures ===================== */

uint64_t kvd_repl_offset(struct kvd_server *srv)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < srv->nshards; i++)
		off += kvd_shard_pub_lsn(srv->store, i);
	return off;
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
		    R.link.last_io_ms ? repl_mono_ms() - R.link.last_io_ms : 0;
	}
	pthread_mutex_unlock(&R.smu);
	if (s->replica)
		return;
	pthread_mutex_lock(&R.tmu);
	for (unsigned k = 0; k < R.nreps; k++) {
		uint64_t ro = repl_rep_offset(&R.reps[k], srv->nshards);
		uint64_t ms = repl_mono_ms() - R.reps[k].last_ms;

		if (off > ro && off - ro > s->lag_records)
			s->lag_records = off - ro;
		if (ms > s->lag_ms)
			s->lag_ms = ms;
	}
	pthread_mutex_unlock(&R.tmu);
}
