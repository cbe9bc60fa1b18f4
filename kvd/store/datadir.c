/* datadir.c - data directory lock and manifest (see datadir.h). */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_MAGIC "kvd-data 1"
#define MANIFEST_HASH "xxh3-64"

void kvd_datadir_shard_path(char *buf, size_t len, const char *dir, unsigned i)
{
	snprintf(buf, len, "%s/shard-%03u", dir, i);
}

static int take_lock(struct kvd_datadir *d, const char *dir, char *err,
		     size_t errlen)
{
	char path[600], pid[32], held[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/LOCK", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		n = pread(fd, held, sizeof(held) - 1, 0);
		held[n > 0 ? n : 0] = '\0';
		held[strcspn(held, "\n")] = '\0';
		snprintf(err, errlen,
			 "data directory %s is in use by another kvd (pid %s)",
			 dir, held[0] ? held : "unknown");
		close(fd);
		return -1;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
		/* The lock is what matters; the pid is a courtesy. */
	}
	d->lock_fd = fd;
	return 0;
}

int kvd_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Write MANIFEST atomically: temp file, fsync, rename, fsync the directory.
 * A manifest written with creating set says that its shards are still being
 * made: nothing has been served from the directory yet, so a start that
 * finds it (the first one was killed half way) makes the missing shards
 * instead of refusing a partial key space. */
static int write_manifest(const char *dir, unsigned n, int creating, char *err,
			  size_t errlen)
{
	char tmp[600], path[600];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/MANIFEST.tmp", dir);
	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	f = fopen(tmp, "w");
	if (!f)
		goto fail;
	fprintf(f, "%s\nshards %u\nhash %s\n%s", MANIFEST_MAGIC, n,
		MANIFEST_HASH, creating ? "creating\n" : "");
	if (fflush(f) || fsync(fileno(f))) {
		fclose(f);
		goto fail;
	}
	if (fclose(f) || rename(tmp, path) || kvd_fsync_dir(dir))
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
	return -1;
}

int kvd_datadir_write_manifest(const char *dir, unsigned n, char *err,
			       size_t errlen)
{
	return write_manifest(dir, n, 0, err, errlen);
}

int kvd_datadir_created(struct kvd_datadir *d, const char *dir, char *err,
			size_t errlen)
{
	if (!d->created)
		return 0;
	if (write_manifest(dir, d->nshards, 0, err, errlen))
		return -1;
	d->created = 0;
	return 0;
}

/* A manifest line as a refusal quotes it: at most cap - 1 bytes, anything
 * unprintable as '?', so that the message stays one readable line. */
static void quote_line(char *out, size_t cap, const char *line)
{
	size_t i = 0;

	for (; line[i] && i + 1 < cap; i++)
		out[i] = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
	out[i] = '\0';
}

static int read_manifest(const char *dir, unsigned *n, int *creating, char *err,
			 size_t errlen)
{
	char path[600], line[128], hash[32] = "";
	char first[40] = "", shards_seen[24] = "", hash_seen[40] = "";
	unsigned shards = 0, lineno = 0;
	int magic = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (lineno++ == 0) {
			quote_line(first, sizeof(first), line);
			magic = !strcmp(line, MANIFEST_MAGIC);
		} else if (!strncmp(line, "shards ", 7)) {
			quote_line(shards_seen, sizeof(shards_seen), line + 7);
			if (sscanf(line + 7, "%u", &shards) != 1)
				shards = 0;
		} else if (!strcmp(line, "creating")) {
			*creating = 1;
		} else if (!strncmp(line, "hash ", 5)) {
			quote_line(hash_seen, sizeof(hash_seen), line + 5);
			sscanf(line, "hash %31s", hash);
		}
	}
	fclose(f);
	if (!magic || shards == 0 || shards > KVD_MAX_SHARDS ||
	    strcmp(hash, MANIFEST_HASH)) {
		/* What was found beside what is read: a newer format or
		 * another key hash says "upgrade kvd", not "corrupt". */
		snprintf(err, errlen,
			 "%s is not a valid kvd manifest: it has '%s', "
			 "'shards %s', 'hash %s' where this kvd reads '%s', "
			 "'shards N' with 1 <= N <= %d, 'hash %s'",
			 path, first, shards_seen, hash_seen, MANIFEST_MAGIC,
			 KVD_MAX_SHARDS, MANIFEST_HASH);
		return -1;
	}
	*n = shards;
	return 0;
}

/* Highest shard-NNN index present, or -1 for none; -2 on a read error. */
static int scan_shard_dirs(const char *dir, unsigned *count)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	int max = -1;
	unsigned idx;
	char tail;

	*count = 0;
	if (!dp)
		return -2;
	while ((de = readdir(dp))) {
		if (sscanf(de->d_name, "shard-%u%c", &idx, &tail) == 1 &&
		    strlen(de->d_name) == 9) {
			(*count)++;
			if ((int)idx > max)
				max = (int)idx;
		}
	}
	closedir(dp);
	return max;
}

static int check_shards(const char *dir, unsigned n, int fresh, char *err,
			size_t errlen)
{
	unsigned count;
	int max = scan_shard_dirs(dir, &count);
	char path[600];
	struct stat st;

	if (max >= (int)n) {
		snprintf(err, errlen,
			 "%s: MANIFEST says %u shards but shard-%03d exists; "
			 "refusing to serve a partial key space",
			 dir, n, max);
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		kvd_datadir_shard_path(path, sizeof(path), dir, i);
		if (!fresh && strlen(path) + 10 < sizeof(path))
			strcat(path, "/data.mdb");
		if (stat(path, &st) == 0)
			continue;
		if (fresh)
			break; /* manifest just written: shards are made next */
		snprintf(err, errlen,
			 "%s: MANIFEST says %u shards but %s is missing; "
			 "refusing to serve a partial key space",
			 dir, n, path);
		return -1;
	}
	return 0;
}

static int make_shard_dirs(const char *dir, unsigned n, char *err,
			   size_t errlen)
{
	char path[600];

	for (unsigned i = 0; i < n; i++) {
		kvd_datadir_shard_path(path, sizeof(path), dir, i);
		if (mkdir(path, 0750) && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", path,
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

int kvd_datadir_inspect(const char *dir, unsigned *nshards, char *err,
			size_t errlen)
{
	int creating = 0;

	if (read_manifest(dir, nshards, &creating, err, errlen))
		return -1;
	if (creating) {
		snprintf(err, errlen,
			 "%s: its creation never finished (MANIFEST says "
			 "creating): not a complete data directory",
			 dir);
		return -1;
	}
	return check_shards(dir, *nshards, 0, err, errlen);
}

int kvd_datadir_open(struct kvd_datadir *d, const char *dir,
		     unsigned want_shards, int exact, char *err, size_t errlen)
{
	char path[600];
	unsigned count;
	struct stat st;

	memset(d, 0, sizeof(*d));
	d->lock_fd = -1;
	if (mkdir(dir, 0750) && errno != EEXIST) {
		snprintf(err, errlen, "cannot create data directory %s: %s",
			 dir, strerror(errno));
		return -1;
	}
	if (access(dir, W_OK | X_OK)) {
		snprintf(err, errlen, "data directory %s is not writable: %s",
			 dir, strerror(errno));
		return -1;
	}
	if (take_lock(d, dir, err, errlen))
		return -1;
	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	if (stat(path, &st) == 0) {
		if (read_manifest(dir, &d->nshards, &d->created, err, errlen))
			goto fail;
		/* A key's shard is its hash modulo the count, which never
		 * changes: a count asked for that differs is a mistake to
		 * report, not a wish to ignore. */
		if (exact && d->nshards != want_shards) {
			snprintf(err, errlen,
				 "%s has %u shard%s (its MANIFEST); shards %u "
				 "applies only to a new data directory",
				 dir, d->nshards, d->nshards == 1 ? "" : "s",
				 want_shards);
			goto fail;
		}
	} else {
		if (scan_shard_dirs(dir, &count) >= 0) {
			snprintf(err, errlen,
				 "%s holds shard directories but no MANIFEST; "
				 "refusing to guess the shard count",
				 dir);
			goto fail;
		}
		if (want_shards == 0 || want_shards > KVD_MAX_SHARDS) {
			snprintf(err, errlen, "shard count %u out of range",
				 want_shards);
			goto fail;
		}
		if (write_manifest(dir, want_shards, 1, err, errlen))
			goto fail;
		d->nshards = want_shards;
		d->created = 1;
	}
	if (check_shards(dir, d->nshards, d->created, err, errlen) ||
	    make_shard_dirs(dir, d->nshards, err, errlen))
		goto fail;
	return 0;
fail:
	kvd_datadir_close(d);
	return -1;
}

void kvd_datadir_close(struct kvd_datadir *d)
{
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	d->lock_fd = -1;
}

/* ===================== Paths ===================== */

int kvd_path_has_ctl(const char *path, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return 1;
	return 0;
}

int kvd_path_resolve(const char *path, char *out, size_t len)
{
	char buf[PATH_MAX], parent[PATH_MAX];
	const char *base;
	char *slash;

	if (realpath(path, buf)) {
		if (snprintf(out, len, "%s", buf) >= (int)len)
			goto toolong;
		return 0;
	}
	if (errno != ENOENT || strlen(path) >= sizeof(parent))
		return -1;
	/* The last name does not exist (yet): resolve what holds it. */
	snprintf(parent, sizeof(parent), "%s", path);
	while ((slash = strrchr(parent, '/')) && slash[1] == '\0' &&
	       slash != parent)
		*slash = '\0'; /* "/a/b/" names /a/b */
	slash = strrchr(parent, '/');
	base = slash ? slash + 1 : parent;
	if (!strcmp(base, ".") || !strcmp(base, "..") || !*base) {
		errno = EINVAL;
		return -1;
	}
	if (!slash)
		snprintf(buf, sizeof(buf), ".");
	else if (slash == parent)
		snprintf(buf, sizeof(buf), "/");
	else {
		*slash = '\0';
		snprintf(buf, sizeof(buf), "%s", parent);
	}
	if (!realpath(buf, parent))
		return -1;
	if (snprintf(out, len, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "",
		     base) >= (int)len)
		goto toolong;
	return 0;
toolong:
	errno = ENAMETOOLONG;
	return -1;
}

int kvd_path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return 1;
	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

const char *kvd_path_quote(char *buf, size_t len, const char *path)
{
	size_t o = 0;

	if (len < 3) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		char e[5];
		int k;

		if (*p == '\n')
			k = snprintf(e, sizeof(e), "\\n");
		else if (*p == '"' || *p == '\\')
			k = snprintf(e, sizeof(e), "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			k = snprintf(e, sizeof(e), "\\x%02x", *p);
		else
			k = snprintf(e, sizeof(e), "%c", *p);
		if (o + (size_t)k + 2 > len)
			break; /* cut: room is kept for the closing quote */
		memcpy(buf + o, e, (size_t)k);
		o += (size_t)k;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
