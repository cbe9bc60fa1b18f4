/* datadir.h - the data directory: its lock file and its manifest.
 *
 * The manifest records the shard count S fixed when the directory was made;
 * keys are routed by XXH3_64bits(key) % S, so S can never change without
 * moving every key.  Starting kvd with another --threads keeps S.  A manifest
 * that disagrees with the shard directories present is refused, because
 * serving it would make keys silently vanish.
 */
#ifndef KVD_DATADIR_H
#define KVD_DATADIR_H

#include <stddef.h>

#define KVD_MAX_SHARDS 256

struct kvd_datadir {
	int lock_fd;
	unsigned nshards;
	int created; /* the manifest says its shards are still being made */
};

/* Create the directory if missing, take its lock (refusing one held by
 * another kvd), then read the manifest or write one for want_shards.
 * 0, or -1 with a one-line reason in err. */
int kvd_datadir_open(struct kvd_datadir *d, const char *dir,
		     unsigned want_shards, char *err, size_t errlen);

/* Every shard of a directory being created now exists: rewrite the
 * manifest without its "creating" mark.  No-op otherwise.  0, or -1 with a
 * reason in err. */
int kvd_datadir_created(struct kvd_datadir *d, const char *dir, char *err,
			size_t errlen);

/* The directory of shard i: "DIR/shard-003". */
void kvd_datadir_shard_path(char *buf, size_t len, const char *dir, unsigned i);

void kvd_datadir_close(struct kvd_datadir *d);

/* fsync a directory, so that the renames and creations in it last.  0, or
 * -1 with errno set. */
int kvd_fsync_dir(const char *dir);

/* Check that dir is a complete data directory (a valid manifest, every
 * shard's data file present, no extra shard); *nshards from the manifest.
 * Takes no lock.  0, or -1 with a reason in err. */
int kvd_datadir_inspect(const char *dir, unsigned *nshards, char *err,
			size_t errlen);

/* Write DIR/MANIFEST for n shards atomically (temp file, fsync, rename,
 * fsync of the directory).  0, or -1 with a reason in err. */
int kvd_datadir_write_manifest(const char *dir, unsigned n, char *err,
			       size_t errlen);

/* ---- paths given by others (a BACKUP's target, --restore) ---- */

/* 1 if path holds a control character (a byte below 0x20, or 0x7f): such
 * a path could forge log lines, and no sane directory is named so. */
int kvd_path_has_ctl(const char *path, size_t n);

/* The absolute path with every symbolic link, "." and ".." resolved:
 * realpath(3) when path exists, else realpath of its parent plus its last
 * name (which must not be "." or "..").  0, or -1 with errno set. */
int kvd_path_resolve(const char *path, char *out, size_t len);

/* 1 if the resolved path is dir itself or lies under it. */
int kvd_path_within(const char *path, const char *dir);

/* path in double quotes for a log line, with '"', '\\' and control
 * characters escaped (\n, \xNN), cut to fit buf.  Returns buf. */
const char *kvd_path_quote(char *buf, size_t len, const char *path);

#endif
