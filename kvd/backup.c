/* backup.c - hot backups and kvd --restore (see backup.h). */
#include "backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "committer.h"
#include "datadir.h"
#include "kv_status.h"
#include "log.h"
#include "loop.h"

struct job {
	struct kvd_server *srv;
	struct kvd_wreq *w; /* carries the result back to the io thread */
	char dir[512];
};

static atomic_int running;
/* The last backup's thread, joined by the next backup or at stop: it wakes
 * its io thread through the io thread's eventfd, which must still be open.
 * Only the holder of `running` (then main, at stop) touches these. */
static pthread_t last_thread;
static int have_thread;

/* 1 if path is absent, or a directory holding nothing but (maybe) the
 * name `except`. */
static int usable_target(const char *path, const char *except)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int empty = 1;

	if (stat(path, &st))
		return errno == ENOENT;
	if (!S_ISDIR(st.st_mode) || !(d = opendir(path)))
		return 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, except))
			empty = 0;
	closedir(d);
	return empty;
}

/* 1 if the directory that would hold path exists and kvd may write in it. */
static int parent_writable(const char *path)
{
	char parent[512];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	while ((slash = strrchr(parent, '/')) && slash[1] == '\0' &&
	       slash != parent)
		*slash = '\0'; /* "/a/b/" names /a/b */
	slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	return access(parent, W_OK | X_OK) == 0;
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int copy_all(struct job *j, uint64_t *keys, uint64_t *bytes)
{
	struct kvd_server *srv = j->srv;
	struct kvd_snapshot *sn = NULL;
	char path[600], err[700];
	int rc;

	if (mkdir(j->dir, 0750) && errno != EEXIST) {
		log_error("backup: cannot create %s: %s", j->dir,
			  strerror(errno));
		return KV_INTERNAL;
	}
	/* The cut: no committer is inside a batch while the snapshots open. */
	kvd_committers_pause(srv);
	rc = kvd_snapshot_begin(srv->store, &sn);
	kvd_committers_resume(srv);
	if (rc)
		return rc;
	for (unsigned i = 0; i < srv->nshards; i++) {
		kvd_datadir_shard_path(path, sizeof(path), j->dir, i);
		if (kvd_snapshot_copy(sn, i, path, keys, bytes, err,
				      sizeof(err))) {
			log_error("backup failed: %s", err);
			kvd_snapshot_end(sn);
			return KV_INTERNAL;
		}
	}
	kvd_snapshot_end(sn);
	/* The manifest last: a backup without one is visibly incomplete. */
	if (kvd_datadir_write_manifest(j->dir, srv->nshards, err,
				       sizeof(err)) ||
	    fsync_dir(j->dir)) {
		log_error("backup failed: %s", err);
		return KV_INTERNAL;
	}
	return KV_OK;
}

static void *backup_main(void *arg)
{
	struct job *j = arg;
	uint64_t keys = 0, bytes = 0, t0 = kvd_mono_ns();
	int rc;

	log_info("backup to %s started", j->dir);
	rc = copy_all(j, &keys, &bytes);
	if (rc == KV_OK)
		log_info("backup to %s done: %llu keys, %.1f MiB in %.2f s",
			 j->dir, (unsigned long long)keys,
			 (double)bytes / (1 << 20),
			 (double)(kvd_mono_ns() - t0) / 1e9);
	j->w->op.status = rc;
	j->w->op.result = (int64_t)keys;
	atomic_store(&running, 0);
	kvd_io_complete(j->w->io, j->w);
	free(j);
	return NULL;
}

int kvd_backup_start(struct kvd_conn *c, struct kv_slice dir)
{
	struct kvd_io *io = c->io;
	struct kvd_pend *pd;
	struct job *j;

	if (dir.n == 0 || dir.n >= sizeof(j->dir) || dir.p[0] != '/' ||
	    memchr(dir.p, '\0', dir.n)) {
		kvd_reply_status(c, KV_BAD_ARGS,
				 "backup directory must be an absolute path");
		return KV_OK;
	}
	if (!(j = calloc(1, sizeof(*j))))
		return KV_INTERNAL;
	memcpy(j->dir, dir.p, dir.n);
	if (!usable_target(j->dir, ".")) {
		free(j);
		kvd_reply_status(c, KV_BAD_ARGS,
				 "backup directory must be absent or empty");
		return KV_OK;
	}
	if (!parent_writable(j->dir)) {
		free(j);
		kvd_reply_status(c, KV_BAD_ARGS,
				 "the backup directory's parent does not exist "
				 "or is not writable by kvd");
		return KV_OK;
	}
	if (atomic_exchange(&running, 1)) {
		free(j);
		kvd_reply_status(c, KV_BUSY, "a backup is already running");
		return KV_OK;
	}
	kvd_backup_wait(); /* the previous one has answered: it is exiting */
	j->srv = io->srv;
	if (!(j->w = kvd_wreq_new(io, 0)) ||
	    !(pd = kvd_conn_pend(c, KV_OP_BACKUP)))
		goto fail;
	memset(&j->w->op, 0, sizeof(j->w->op));
	j->w->pend = pd;
	j->w->io = io;
	j->w->tracked = 0;
	pd->parts = 1;
	io->inflight++; /* the io thread waits for it before it stops */
	if (pthread_create(&last_thread, NULL, backup_main, j)) {
		io->inflight--;
		pd->parts = 0;
		pd->status = KV_INTERNAL;
		pd->done = 1;
		kvd_wreq_free(io, j->w);
		free(j);
		atomic_store(&running, 0);
		kvd_conn_flush(c);
		return KV_OK;
	}
	have_thread = 1;
	return KV_OK;
fail:
	if (j->w)
		kvd_wreq_free(io, j->w);
	free(j);
	atomic_store(&running, 0);
	return KV_INTERNAL;
}

void kvd_backup_wait(void)
{
	if (have_thread)
		pthread_join(last_thread, NULL);
	have_thread = 0;
}

/* ===================== Restore ===================== */

static int copy_file(const char *src, const char *dst)
{
	char buf[1 << 16];
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (out < 0)
		goto done;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto done;
	if (n == 0 && fsync(out) == 0)
		rc = 0;
done:
	if (out >= 0 && close(out))
		rc = -1;
	close(in);
	return rc;
}

/* --restore with force: remove what a data directory holds, nothing else. */
static void clear_datadir(const char *dir)
{
	char path[700];
	struct dirent *de;
	DIR *d = opendir(dir);

	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "shard-", 6))
			continue;
		snprintf(path, sizeof(path), "%s/%s/data.mdb", dir, de->d_name);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s/lock.mdb", dir, de->d_name);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	unlink(path);
}

static int restore_locked(const char *src, const char *dst, unsigned n,
			  int force, char *err, size_t errlen)
{
	char a[700], b[700];

	if (!force && !usable_target(dst, "LOCK")) {
		snprintf(err, errlen,
			 "data directory %s is not empty; refusing to restore "
			 "over it without --restore-force yes",
			 dst);
		return -1;
	}
	clear_datadir(dst);
	for (unsigned i = 0; i < n; i++) {
		kvd_datadir_shard_path(a, sizeof(a), src, i);
		kvd_datadir_shard_path(b, sizeof(b), dst, i);
		if (mkdir(b, 0750) && errno != EEXIST)
			goto fail;
		strcat(a, "/data.mdb");
		strcat(b, "/data.mdb");
		if (copy_file(a, b))
			goto fail;
	}
	if (kvd_datadir_write_manifest(dst, n, err, errlen))
		return -1;
	return 0;
fail:
	snprintf(err, errlen, "cannot restore %s into %s: %s", a, b,
		 strerror(errno));
	return -1;
}

int kvd_restore(const char *src, const char *dst, int force, char *err,
		size_t errlen)
{
	char path[700];
	unsigned n;
	int lock, rc;

	if (kvd_datadir_inspect(src, &n, err, errlen))
		return -1;
	if (mkdir(dst, 0750) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create data directory %s: %s",
			 dst, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/LOCK", dst);
	lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB)) {
		snprintf(err, errlen,
			 "data directory %s is in use by another kvd", dst);
		if (lock >= 0)
			close(lock);
		return -1;
	}
	rc = restore_locked(src, dst, n, force, err, errlen);
	close(lock);
	if (rc == 0)
		log_info("restored %u shards from %s into %s", n, src, dst);
	return rc;
}
