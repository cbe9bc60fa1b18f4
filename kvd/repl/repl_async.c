/* repl_async.c - a history that a power cut may have cut short (repl.h).
 *
 * In durability async a primary publishes a batch (its position advances,
 * and the sender streams it to replicas) once it is written to the
 * journal, before the flush: that is the mode's point.  A power cut then
 * loses records replicas may already have, and the primary recovers to
 * its durable tail and writes new records at the lost positions.  Under
 * the same replication id a replica that had the lost records and came
 * back once the primary had written past them was taken for a prefix of
 * the new history (its positions were behind) and kept records the
 * primary no longer had: silent divergence.
 *
 * So while a server runs async it keeps a marker in its data directory,
 * written (and its directory flushed) before anything is published, and
 * removed once a clean stop has flushed every journal.  A server that
 * starts as a primary and finds the marker did not stop cleanly, and may
 * have lost what it published: it takes a new replication id, keeping
 * the old one as replid2 good up to the positions it recovered (as a
 * promotion does, PSYNC2).  A replica at or below them continues; one
 * that has records past them takes a full copy.  A kill -9 loses nothing
 * in async mode (the records are in the kernel's cache), so after one
 * the replicas simply continue under the old id.  Streaming only flushed
 * records would have cost every async write up to flush-interval-ms of
 * replication lag instead.
 *
 * A server that starts as a replica needs no new id: its primary's
 * records come again at the same positions, and a replica of its own
 * that is ahead is refused until it has them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "repl.h"
#include "store.h"

#define MARKER "replication-unflushed"

static void marker_path(const struct kvd_config *cfg, char *out, size_t cap)
{
	snprintf(out, cap, "%s/" MARKER, cfg->data_dir);
}

/* A new id; the old one good up to the recovered positions.  Under the
 * state lock. */
static int rotate(struct kvd_server *srv)
{
	struct kvd_repl_ids *ids = kvd_repl_ids();
	uint64_t off = 0;

	memcpy(ids->replid2, ids->replid, sizeof(ids->replid2));
	for (unsigned i = 0; i < srv->nshards; i++) {
		ids->sw[i] = kvd_shard_pub_lsn(srv->store, i) + 1;
		off += ids->sw[i] - 1;
	}
	kvd_repl_new_id(ids->replid);
	log_warn("replication: the last run (durability async) did not stop "
		 "cleanly and may have lost records its replicas have: new "
		 "replication id %s; the old one %s holds up to offset "
		 "%" PRIu64,
		 ids->replid, ids->replid2, off);
	return kvd_repl_save_ids();
}

int kvd_repl_async_begin(struct kvd_server *srv, int primary, char *err,
			 size_t errlen)
{
	const struct kvd_config *cfg = srv->cfg;
	char path[600];
	int fd;

	marker_path(cfg, path, sizeof(path));
	if (!access(path, F_OK) && primary && rotate(srv)) {
		snprintf(err, errlen, "replication: cannot write new ids");
		return -1;
	}
	if (cfg->durability != KVD_DUR_ASYNC) {
		if ((unlink(path) && errno != ENOENT) ||
		    kvd_fsync_dir(cfg->data_dir))
			goto fail;
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		goto fail;
	close(fd);
	if (kvd_fsync_dir(cfg->data_dir))
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "replication: %s: %s", path, strerror(errno));
	return -1;
}

void kvd_repl_async_end(struct kvd_server *srv)
{
	const struct kvd_config *cfg = srv->cfg;
	char path[600];

	if (cfg->durability != KVD_DUR_ASYNC)
		return;
	/* The committers flushed when they stopped; a shard that could not
	 * (a failed flush) leaves the marker. */
	for (unsigned i = 0; i < srv->nshards; i++)
		if (kvd_store_sync(srv->store, i)) {
			log_warn("replication: shard %u's journal is not "
				 "flushed: the next start takes a new "
				 "replication id",
				 i);
			return;
		}
	marker_path(cfg, path, sizeof(path));
	if (unlink(path) || kvd_fsync_dir(cfg->data_dir))
		log_warn("replication: cannot remove %s: %s", path,
			 strerror(errno));
}
