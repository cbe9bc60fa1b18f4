/* shard_spare.c - a shard's next journal segment, made ahead of need on a
 * short-lived helper thread.
 *
 * Why: an append that crosses into a new segment takes a spare file, and
 * with none left (the first segments after a start, before a checkpoint
 * has recycled any) the committer had to make one itself: 64 MiB of zeros
 * and a flush, a 29-43 ms stall of every write on the shard.  Now the
 * committer, between batches, starts a helper whenever the journal holds no
 * spare but the one it keeps for deletes (kvj_opts.reserve: a full disk
 * takes deletes still); the helper writes the file under a temporary name
 * (kvj_prepare_spare) and says it is done; the committer takes it into the
 * journal (kvj_adopt_spare) at its next look.  The committer's own path
 * stays as the fallback (a segment filled before the helper finished, or a
 * helper that failed), so nothing waits on the helper.
 *
 * A thread per spare rather than a resident one: a spare is wanted once
 * per segment filled before any is recycled, at most every few seconds;
 * the thread is joined when it is done, or when the store closes.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "shard_int.h"

#include <stdio.h>

#include "store_log.h"

/* After a helper failed (a full disk), no new one for this long; the
 * committer's own path reports the error to writers meanwhile. */
#define SPARE_RETRY_MS 1000

static struct kvd_log_limit spare_limit = KVD_LOG_LIMIT_INIT(60000);

enum { SPARE_IDLE, SPARE_BUSY, SPARE_DONE };

static void *spare_main(void *arg)
{
	struct shard *sh = arg;

	sh->spare_rc = kvj_prepare_spare(sh->path, sh->spare_size);
	atomic_store_explicit(&sh->spare_state, SPARE_DONE,
			      memory_order_release);
	return NULL;
}

/* Join a finished helper and take its file; 0, or the error it met. */
static int spare_collect(struct shard *sh)
{
	int rc;

	pthread_join(sh->spare_thread, NULL);
	atomic_store(&sh->spare_state, SPARE_IDLE);
	rc = sh->spare_rc;
	if (rc == 0 && (rc = kvj_adopt_spare(sh->j)) > 0) {
		atomic_fetch_add(&sh->spares_ahead, 1);
		rc = 0;
	}
	return rc;
}

/* spare_collect, and the helper's failure told: whoever collects it (the
 * committer's next look, or a stop that comes first) says so. */
static int spare_collect_told(struct shard *sh)
{
	int rc = spare_collect(sh);

	if (rc < 0)
		kvd_log_ratelimited(
		    &spare_limit, KVD_LOG_WARN,
		    "%s: journal: cannot make a spare segment ahead: %s",
		    sh->path, kvj_strerror(rc));
	return rc;
}

void kvd_shard_spare_tend(struct shard *sh, uint64_t now)
{
	int state =
	    atomic_load_explicit(&sh->spare_state, memory_order_acquire);
	char name[16];

	if (!sh->j)
		return;
	if (state == SPARE_DONE && spare_collect_told(sh) < 0)
		sh->spare_retry_ms = now + SPARE_RETRY_MS;
	shard_publish_spares(sh);
	/* One ahead beyond the reserve (kept for deletes: shard_write.c) */
	if (state == SPARE_BUSY || kvj_spares(sh->j) > kvj_reserve(sh->j) ||
	    now < sh->spare_retry_ms || atomic_load(&sh->failed) ||
	    kvj_error(sh->j))
		return;
	sh->spare_size = kvj_segment_size(sh->j);
	atomic_store(&sh->spare_state, SPARE_BUSY);
	if (pthread_create(&sh->spare_thread, NULL, spare_main, sh)) {
		atomic_store(&sh->spare_state, SPARE_IDLE);
		sh->spare_retry_ms = now + SPARE_RETRY_MS;
		return;
	}
	snprintf(name, sizeof(name), "kvd-spare/%u", sh->idx);
	pthread_setname_np(sh->spare_thread, name); /* for top -H; may fail */
}

int kvd_shard_spare_wanted(struct kvd_store *st, unsigned i)
{
	struct shard *sh = &st->sh[i];

	return sh->j && !atomic_load(&sh->failed) && !kvj_error(sh->j) &&
	       atomic_load(&sh->spare_state) == SPARE_IDLE &&
	       kvj_spares(sh->j) <= kvj_reserve(sh->j);
}

void kvd_shard_spare_stop(struct shard *sh)
{
	/* A helper done since the committer's last look has its file under
	 * a temporary name: take it as a spare now, so a clean stop leaves
	 * nothing temporary (a file a failed adoption leaves is deleted by
	 * the next kvj_open). */
	if (atomic_load(&sh->spare_state) == SPARE_IDLE)
		return;
	if (sh->j) {
		(void)spare_collect_told(sh);
		return;
	}
	pthread_join(sh->spare_thread, NULL);
	atomic_store(&sh->spare_state, SPARE_IDLE);
}
