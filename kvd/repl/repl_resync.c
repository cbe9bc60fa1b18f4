/* repl_resync.c - a replica's resync, on the primary's sender: REPLSYNC
 * continues a replica from its positions when its replication id and the
 * journals allow (Redis's partial resync, PSYNC2's second id included), or
 * starts a full copy from a consistent snapshot of every shard, which
 * REPLSNAP then reads out chunk by chunk.
 */
#include "repl_int.h"

#include <inttypes.h>
#include <string.h>

#include "kv_mp.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"

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

void repl_do_sync(struct kvd_wreq *w, struct job *j)
{
	struct kvd_server *srv = R.srv;
	struct rep *rp = repl_rep_add(j);
	uint64_t cut[KVD_MAX_SHARDS];
	struct kv_buf b = {0};
	char id[KVD_REPLID_LEN + 1];
	int rc;

	if (!rp) {
		repl_job_status(w, KV_INTERNAL, NULL);
		return;
	}
	repl_update_holds(); /* before the journal is looked at */
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
		repl_frame_begin(&b, 3, KV_OK);
		kv_mp_cstr(&b, "partial");
		kv_mp_cstr(&b, id);
		repl_job_reply(w, &b, 1);
		return;
	}
	repl_rep_clear(rp);
	if ((rc = full_copy(rp, cut))) {
		repl_rep_del(j->conn_id);
		repl_update_holds();
		repl_job_status(w, rc,
				"cannot take a snapshot for a full copy");
		return;
	}
	repl_update_holds();
	atomic_fetch_add(&R.syncs_full, 1);
	log_info("replication: replica %s (port %u) takes a full copy", j->ip,
		 j->port);
	repl_frame_begin(&b, 5, KV_OK);
	kv_mp_cstr(&b, "full");
	kv_mp_cstr(&b, id);
	kv_mp_bin(&b, cut, srv->nshards * sizeof(uint64_t));
	kv_mp_uint(&b, rp->sid);
	repl_job_reply(w, &b, 1);
}

void repl_do_snap(struct kvd_wreq *w, struct job *j)
{
	struct rep *rp = repl_rep_find(j->conn_id);
	struct kv_buf chunk = {0}, next = {0}, b = {0};
	struct kv_slice start = {j->key, j->klen};
	int rc;

	if (!rp || !rp->sn || rp->sid != j->sid || j->shard >= R.srv->nshards) {
		repl_job_status(w, KV_BAD_ARGS, "no such full copy");
		return;
	}
	rp->last_ms = repl_mono_ms();
	rc = kvd_snapshot_chunk(rp->sn, j->shard, start, REPL_REPLY_BYTES,
				&chunk, &next);
	if (rc) {
		repl_job_status(w, rc, NULL);
	} else {
		repl_frame_begin(&b, 3, KV_OK);
		kv_mp_bin(&b, chunk.data, chunk.len);
		if (next.len)
			kv_mp_bin(&b, next.data, next.len);
		else
			kv_mp_nil(&b);
		repl_job_reply(w, &b, 1);
	}
	kv_buf_free(&chunk);
	kv_buf_free(&next);
}
