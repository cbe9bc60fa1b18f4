/* backup.h - hot backups: one consistent cut of every shard, while writes
 * go on.
 *
 * The committers are paused between two batches only for as long as it takes
 * to open one read transaction per shard; those snapshots form a single cut
 * (no commit is half-way through any shard), and the copy is then made from
 * them by a thread of its own while writes continue.  The result is a data
 * directory: start kvd on it, or give it to `kvd --restore`.
 */
#ifndef KVD_BACKUP_H
#define KVD_BACKUP_H

#include "config.h"
#include "net/conn.h"
#include "store.h"

/* Start a backup.  dir is a name under backup-dir, or with backup-anywhere
 * an absolute path; either way the target must be absent or empty, outside
 * the data directory, free of control characters.  Refused in read-only
 * mode unless read-only-backup, and without backup-dir or backup-anywhere.
 * Answers (and counts) the request itself: an error at once, or
 * [0, keys copied] when the copy is on disk.  Returns KV_OK, or a KV_*
 * code when out of memory. */
int kvd_backup_start(struct kvd_conn *c, struct kv_slice dir);

/* Wait for the last backup's thread to end (at stop, after the io threads
 * have, which wait for its answer, and before their eventfds close). */
void kvd_backup_wait(void);

/* kvd --restore: copy the backup in src into the data directory dst, which
 * must be absent or empty unless force.  0, or -1 with a reason in err. */
int kvd_restore(const char *src, const char *dst, int force, char *err,
		size_t errlen);

/* Start-up checks of backup-dir and --restore against data-dir (neither
 * may overlap it).  0, or -1 with a reason in err. */
int kvd_backup_check(const struct kvd_config *cfg, char *err, size_t errlen);

#endif
