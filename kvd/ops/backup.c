/* backup.c - hot backups and kvd --restore (see backup.h). */
#define _GNU_SOURCE /* memmem */
#include "backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native/cmd.h"
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "store.h"

struct job {
	struct kvd_server *srv;
	struct kvd_wreq *w; /* carries the result back to the io thread */
	char dir[512];
};

/* One backup at a time.  `running` and the last backup's thread are kept
 * under backup_lock: the thread clears `running` under it too, so it cannot do
 * so before its starter has recorded it in last_thread (a fast failure once
 * let a second BACKUP, on another io thread, overwrite a thread never
 * joined).  That thread is joined by the next backup or at stop: it wakes
 * its io thread through the io thread's eventfd, which must still be open. */
static pthread_mutex_t backup_lock = PTHREAD_MUTEX_INITIALIZER;
static int running;
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

static int copy_all(struct job *j, uint64_t *keys, uint64_t *bytes)
{
	struct kvd_server *srv = j->srv;
	struct kvd_snapshot *sn = NULL;
	char path[600], err[700];
	int rc;

	if (mkdir(j->dir, 0750) && errno != EEXIST) {
		log_error("backup: cannot create %s: %s",
			  kvd_path_quote(err, sizeof(err), j->dir),
			  strerror(errno));
		return KV_INTERNAL;
	}
	/* The cut: every shard checkpointed what it acknowledged, and no
	 * committer is inside a batch while the snapshots open. */
	rc = kvd_committers_pause(srv->com);
	if (rc == 0)
		rc = kvd_snapshot_begin(srv->store, &sn);
	else
		log_error("backup: a checkpoint failed: %s",
			  kv_status_name(rc));
	kvd_committers_resume(srv->com);
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
	    kvd_fsync_dir(j->dir)) {
		log_error("backup failed: %s", err);
		return KV_INTERNAL;
	}
	return KV_OK;
}

static void *backup_main(void *arg)
{
	struct job *j = arg;
	uint64_t keys = 0, bytes = 0, t0 = kvd_mono_ns();
	char q[1100];
	int rc;

	kvd_path_quote(q, sizeof(q), j->dir);
	log_info("backup to %s started", q);
	rc = copy_all(j, &keys, &bytes);
	if (rc == KV_OK)
		log_info("backup to %s done: %llu keys, %.1f MiB in %.2f s", q,
			 (unsigned long long)keys, (double)bytes / (1 << 20),
			 (double)(kvd_mono_ns() - t0) / 1e9);
	j->w->op.status = rc;
	j->w->op.result = (int64_t)keys;
	pthread_mutex_lock(&backup_lock);
	running = 0;
	pthread_mutex_unlock(&backup_lock);
	kvd_io_complete(j->w->io, j->w);
	free(j);
	return NULL;
}

/* A client can repeat a refused BACKUP at will: its log line goes through
 * a limiter (log.h), one per io thread. */
static __thread struct kvd_log_limit refuse_limit = KVD_LOG_LIMIT_INIT(1000);

/* Answer a BACKUP at once with an error, counted here (run() leaves
 * BACKUP's replies to backup.c and to the completion), and logged with the
 * path quoted: the path comes from a client. */
static int refuse(struct kvd_conn *c, int status, struct kv_slice dir,
		  const char *why)
{
	char raw[600], q[2500];

	snprintf(raw, sizeof(raw), "%.*s", (int)(dir.n < 512 ? dir.n : 512),
		 (const char *)dir.p);
	kvd_log_ratelimited(&refuse_limit, KVD_LOG_WARN,
			    "connection %llu: BACKUP %s refused: %s",
			    (unsigned long long)c->id,
			    kvd_path_quote(q, sizeof(q), raw), why);
	kvd_count_now(&c->io->stats, KV_OP_BACKUP, status);
	kvd_reply_status(c, status, why);
	return KV_OK;
}

/* Where BACKUP's argument puts the backup: backup-dir/NAME, or (with
 * backup-anywhere) the absolute path itself; resolved (no symbolic link,
 * no "..") into out.  NULL, or why the argument is refused (*status). */
static const char *target(const struct kvd_config *cfg, struct kv_slice dir,
			  char *out, size_t len, int *status)
{
	char path[1100], data[PATH_MAX], base[PATH_MAX];

	*status = KV_BAD_ARGS;
	if (cfg->read_only && !cfg->read_only_backup) {
		*status = KV_READ_ONLY;
		return "BACKUP is refused in read-only mode (read-only-backup "
		       "no)";
	}
	if (!cfg->backup_dir[0] && !cfg->backup_anywhere) {
		*status = KV_DISABLED;
		return "BACKUP needs backup-dir (or backup-anywhere yes) in "
		       "the server's configuration";
	}
	if (dir.n == 0 || dir.n >= 512 || memchr(dir.p, '\0', dir.n) ||
	    kvd_path_has_ctl((const char *)dir.p, dir.n))
		return "the backup path is empty, too long or holds control "
		       "characters";
	if (cfg->backup_dir[0]) {
		if (memchr(dir.p, '/', dir.n) ||
		    memmem(dir.p, dir.n, "..", 2) ||
		    (dir.n == 1 && dir.p[0] == '.'))
			return "BACKUP takes a name under backup-dir: no '/', "
			       "no '..'";
		snprintf(path, sizeof(path), "%s/%.*s", cfg->backup_dir,
			 (int)dir.n, (const char *)dir.p);
	} else {
		if (dir.p[0] != '/')
			return "backup directory must be an absolute path";
		snprintf(path, sizeof(path), "%.*s", (int)dir.n,
			 (const char *)dir.p);
	}
	if (kvd_path_resolve(path, out, len))
		return "the backup directory's parent does not exist or is "
		       "not writable by kvd";
	if (cfg->backup_dir[0] &&
	    (kvd_path_resolve(cfg->backup_dir, base, sizeof(base)) ||
	     !kvd_path_within(out, base) || !strcmp(out, base)))
		return "the backup name leads out of backup-dir";
	if (kvd_path_resolve(cfg->data_dir, data, sizeof(data)) ||
	    kvd_path_within(out, data))
		return "the backup directory is inside the data directory";
	if (!usable_target(out, "."))
		return "backup directory must be absent or empty";
	if (!parent_writable(out))
		return "the backup directory's parent does not exist or is not "
		       "writable by kvd";
	return NULL;
}

/* Join the last backup's thread; the caller holds backup_lock. */
static void wait_locked(void)
{
	if (have_thread)
		pthread_join(last_thread, NULL);
	have_thread = 0;
}

int kvd_backup_start(struct kvd_conn *c, struct kv_slice dir)
{
	struct kvd_io *io = c->io;
	struct kvd_pend *pd = NULL;
	const char *why;
	struct job *j;
	int status;

	if (!(j = calloc(1, sizeof(*j))))
		return KV_INTERNAL;
	why = target(io->srv->cfg, dir, j->dir, sizeof(j->dir), &status);
	if (why) {
		free(j);
		return refuse(c, status, dir, why);
	}
	pthread_mutex_lock(&backup_lock);
	if (running) {
		pthread_mutex_unlock(&backup_lock);
		free(j);
		return refuse(c, KV_BUSY, dir, "a backup is already running");
	}
	wait_locked(); /* the previous one has answered: exiting */
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
	running = 1;
	if (pthread_create(&last_thread, NULL, backup_main, j)) {
		running = 0;
		pthread_mutex_unlock(&backup_lock);
		io->inflight--;
		pd->parts = 0;
		pd->status = KV_INTERNAL;
		pd->done = 1;
		kvd_wreq_free(io, j->w);
		free(j);
		kvd_conn_flush(c);
		return KV_OK;
	}
	have_thread = 1;
	pthread_mutex_unlock(&backup_lock);
	return KV_OK;
fail:
	pthread_mutex_unlock(&backup_lock);
	if (j->w)
		kvd_wreq_free(io, j->w);
	free(j);
	return KV_INTERNAL;
}

void kvd_backup_wait(void)
{
	pthread_mutex_lock(&backup_lock);
	wait_locked();
	pthread_mutex_unlock(&backup_lock);
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

/* A shard directory's journal segments: a restored LMDB must not have a
 * journal above it (its records would replay over the backup). */
static void clear_journal(const char *shard_dir)
{
	char path[1000];
	struct dirent *de;
	DIR *d = opendir(shard_dir);

	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "journal-", 8))
			continue;
		snprintf(path, sizeof(path), "%s/%s", shard_dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
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
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		clear_journal(path);
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

/* --restore D --data-dir D once deleted D's data before failing: the
 * backup and the data directory must be apart, neither inside the other. */
static int restore_overlap(const char *src, const char *dst, char *err,
			   size_t errlen)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (kvd_path_resolve(src, a, sizeof(a)) ||
	    kvd_path_resolve(dst, b, sizeof(b)))
		return 0; /* reported by what follows, which needs them */
	if (!kvd_path_within(a, b) && !kvd_path_within(b, a))
		return 0;
	snprintf(err, errlen,
		 "restore %s and data-dir %s overlap: restore from a backup "
		 "outside the data directory",
		 src, dst);
	return -1;
}

int kvd_restore(const char *src, const char *dst, int force, char *err,
		size_t errlen)
{
	char path[700];
	unsigned n;
	int lock, rc;

	if (restore_overlap(src, dst, err, errlen) ||
	    kvd_datadir_inspect(src, &n, err, errlen))
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
	if (rc == 0) {
		char qs[1100], qd[1100];

		log_info("restored %u shards from %s into %s", n,
			 kvd_path_quote(qs, sizeof(qs), src),
			 kvd_path_quote(qd, sizeof(qd), dst));
	}
	return rc;
}

int kvd_backup_check(const struct kvd_config *cfg, char *err, size_t errlen)
{
	const char *bd = cfg->backup_dir;
	char a[PATH_MAX], b[PATH_MAX];

	if (cfg->restore[0] &&
	    restore_overlap(cfg->restore, cfg->data_dir, err, errlen))
		return -1;
	if (!bd[0])
		return 0;
	if (cfg->backup_anywhere) {
		snprintf(err, errlen,
			 "set backup-dir or backup-anywhere, not both");
		return -1;
	}
	if (bd[0] != '/' || kvd_path_has_ctl(bd, strlen(bd))) {
		snprintf(err, errlen,
			 "backup-dir must be an absolute path without control "
			 "characters");
		return -1;
	}
	if (!kvd_path_resolve(bd, a, sizeof(a)) &&
	    !kvd_path_resolve(cfg->data_dir, b, sizeof(b)) &&
	    kvd_path_within(a, b)) {
		/* (data-dir inside backup-dir is fine: each target is checked
		 * against data-dir anyway) */
		snprintf(err, errlen,
			 "backup-dir %s is inside data-dir %s: keep backups "
			 "outside the data directory",
			 bd, cfg->data_dir);
		return -1;
	}
	return 0;
}
