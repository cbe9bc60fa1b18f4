/* powerloss.c - an LD_PRELOAD shim that records what kvd writes to its LMDB
 * files and when it syncs them, and can make a sync or a write fail.
 *
 * Power loss (KVD_PL_LOG=FILE): every write to a tracked file is logged
 * with its bytes before it is issued (the intent) and again when it
 * returns (with its result); every fsync/fdatasync is logged when it starts
 * and when it returns.  From that log, plimage.py builds the file images a
 * power cut at any point of the run could leave, as SQLite's crash VFS
 * does: writes a sync covered are on disk, the others may be missing,
 * present, or present in part (512-byte sectors).  A write counts as
 * covered only when its return was logged before the sync started, so the
 * model never assumes more durability than the kernel promised.  Each
 * record carries CLOCK_MONOTONIC, the clock the test's clients stamp their
 * acknowledgements with: an acknowledgement received before a record was
 * logged came after every record logged before it.
 *
 * Faults (KVD_FI_SYNC_FAIL / KVD_FI_WRITE_FAIL = "SUBSTR:N[:ERR]"): the Nth
 * sync (or write) of a tracked file whose path contains SUBSTR is not
 * issued and fails with errno ERR (a number or EIO, ENOSPC, SHORT; default
 * EIO; SHORT writes half the bytes, as a filesystem that runs out of room
 * part way does).  KVD_FI_LOG=FILE gets one text line per sync and write of
 * a tracked file, so a test can see that a failed fsync is never retried.
 * An io thread's flushes of its own writes (through io_uring, or the
 * system call) count as syncs too (kvd_fi_io_sync_*, below; "io-sync" and
 * "inject-io-sync" in that log).
 *
 * KVD_FI_ARM=FILE: count calls towards N only while FILE exists, so that
 * a test can let kvd start before the count begins.
 *
 * KVD_FI_WRITE_ON=plain or dsync: count only writes through descriptors
 * opened without (or with) O_DSYNC.  LMDB writes data pages through the
 * first kind and meta pages through the second, and the two fail
 * differently (a failed meta page write leaves the environment refusing
 * every transaction, MDB_PANIC), so a test picks which one it means.
 *
 * Delays (KVD_FI_SYNC_DELAY = "SUBSTR:MS"): every sync of a tracked file
 * whose path contains SUBSTR waits MS milliseconds first, and then syncs.
 * Nothing fails: it widens a window that tmpfs makes too small to hit, as
 * the one between two shards' commits of a cross-shard transaction
 * (tests/integration/test_native_v2.py test_isolation_across_shards).
 *
 * KVD_PL_MATCH selects the tracked files (path substrings separated by
 * commas, default "/data.mdb"; kvd's journal segments are "/journal-").
 * A path opened relative to a directory descriptor (openat) is tracked by
 * its absolute path.  LMDB 0.9.24 writes data pages with pwrite, or lseek and
 * writev for runs of pages, and meta pages with pwrite on a second
 * descriptor opened O_DSYNC; it syncs with fdatasync (see strace).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "powerloss.h"

#define MAX_FD 65536
/* As glibc's __OPEN_NEEDS_MODE: only then is there a mode argument. */
#define NEEDS_MODE(f) (((f)&O_CREAT) || ((f)&O_TMPFILE) == O_TMPFILE)
#define MAX_FILES 256

struct fdinfo {
	int file; /* index into paths + 1; 0: not tracked */
	int dsync;
};

static struct fdinfo fds[MAX_FD];
static char *paths[MAX_FILES];
static int npaths;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static FILE *fi_log;
static const char *match = "/data.mdb";
static uint64_t next_seq;

struct fault {
	char sub[256];
	long nth, count;
	int err; /* errno, or -1 for a short write */
};
static struct fault sync_fault, write_fault;
static const char *arm_path;
static int write_on = -1; /* O_DSYNC descriptors only (1), others (0), any */
static char delay_sub[256];
static long delay_ms;

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);

/* ===================== Setup ===================== */

static void parse_fault(struct fault *f, const char *spec)
{
	const char *colon = spec ? strrchr(spec, ':') : NULL;
	const char *first = spec ? strchr(spec, ':') : NULL;

	if (!first)
		return;
	snprintf(f->sub, sizeof(f->sub), "%.*s", (int)(first - spec), spec);
	f->nth = strtol(first + 1, NULL, 10);
	f->err = EIO;
	if (colon != first) {
		const char *e = colon + 1;

		f->err = !strcmp(e, "ENOSPC")  ? ENOSPC
			 : !strcmp(e, "SHORT") ? -1
			 : !strcmp(e, "EIO")   ? EIO
					       : atoi(e);
	}
}

#define RESOLVE(name)                                                          \
	real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void pl_init(void)
{
	const char *s;

	RESOLVE(open);
	RESOLVE(openat);
	RESOLVE(close);
	RESOLVE(write);
	RESOLVE(pwrite);
	RESOLVE(writev);
	RESOLVE(pwritev);
	RESOLVE(fsync);
	RESOLVE(fdatasync);
	RESOLVE(ftruncate);
	if ((s = getenv("KVD_PL_MATCH")) && *s)
		match = s;
	if ((s = getenv("KVD_PL_LOG")) && *s)
		log_fd = real_open(s, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
				   0644);
	if ((s = getenv("KVD_FI_LOG")) && *s)
		fi_log = fopen(s, "ae");
	if (fi_log)
		setvbuf(fi_log, NULL, _IOLBF, 0);
	if ((s = getenv("KVD_FI_ARM")) && *s)
		arm_path = s;
	parse_fault(&sync_fault, getenv("KVD_FI_SYNC_FAIL"));
	parse_fault(&write_fault, getenv("KVD_FI_WRITE_FAIL"));
	if ((s = getenv("KVD_FI_WRITE_ON")) && *s)
		write_on = !strcmp(s, "dsync");
	if ((s = getenv("KVD_FI_SYNC_DELAY")) && strchr(s, ':')) {
		snprintf(delay_sub, sizeof(delay_sub), "%.*s",
			 (int)(strchr(s, ':') - s), s);
		delay_ms = strtol(strchr(s, ':') + 1, NULL, 10);
	}
}

/* ===================== The log ===================== */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_all(const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = real_write(log_fd, c, n);

		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			abort(); /* a silent gap would make every audit a lie */
		}
		c += k;
		n -= (size_t)k;
	}
}

/* Append one record and its payload (an iovec array); call with mu held. */
static void log_rec(uint32_t type, int file, uint64_t seq, uint64_t off,
		    int64_t res, const struct iovec *iov, int n)
{
	struct pl_rec r = {PL_MAGIC, type, (uint32_t)file, seq, 0, off, 0, res};

	if (log_fd < 0)
		return;
	for (int i = 0; i < n; i++)
		r.len += iov[i].iov_len;
	r.t_ns = now_ns();
	put_all(&r, sizeof(r));
	for (int i = 0; i < n; i++)
		put_all(iov[i].iov_base, iov[i].iov_len);
}

static void fi_line(const char *what, int file, long n, long rc)
{
	if (fi_log)
		fprintf(fi_log, "%s %s n=%ld rc=%ld\n", what, paths[file - 1],
			n, rc);
}

static int tracked(int fd)
{
	return fd >= 0 && fd < MAX_FD ? fds[fd].file : 0;
}

/* ===================== Opening and closing ===================== */

/* 1 when path contains one of match's comma-separated substrings. */
static int matches(const char *path)
{
	const char *m = match;

	while (*m) {
		size_t n = strcspn(m, ",");
		char sub[256];

		if (n && n < sizeof(sub)) {
			memcpy(sub, m, n);
			sub[n] = '\0';
			if (strstr(path, sub))
				return 1;
		}
		m += n;
		if (*m == ',')
			m++;
	}
	return 0;
}

/* path made absolute against dirfd (AT_FDCWD: the working directory). */
static const char *abs_path(int dirfd, const char *path, char *buf, size_t len)
{
	char link[64], dir[PATH_MAX - 256];
	ssize_t n;

	if (path[0] == '/')
		return path;
	if (dirfd == AT_FDCWD)
		snprintf(link, sizeof(link), "/proc/self/cwd");
	else
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n <= 0)
		return path;
	dir[n] = '\0';
	snprintf(buf, len, "%s/%s", dir, path);
	return buf;
}

static void note_open(int fd, const char *path, int flags)
{
	int file = 0;

	if (fd < 0 || fd >= MAX_FD || !matches(path))
		return;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < npaths; i++)
		if (!strcmp(paths[i], path))
			file = i + 1;
	if (!file && npaths < MAX_FILES) {
		struct iovec iov = {(void *)path, strlen(path)};

		paths[npaths++] = strdup(path);
		file = npaths;
		log_rec(PL_OPEN, file, 0, 0, 0, &iov, 1);
	}
	fds[fd].file = file;
	fds[fd].dsync = (flags & O_DSYNC) != 0;
	pthread_mutex_unlock(&mu);
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	if (NEEDS_MODE(flags)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	fd = real_open(path, flags, mode);
	if (fd >= 0) {
		char buf[PATH_MAX];

		note_open(fd, abs_path(AT_FDCWD, path, buf, sizeof(buf)),
			  flags);
	}
	return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	if (NEEDS_MODE(flags)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	fd = real_openat(dirfd, path, flags, mode);
	if (fd >= 0) {
		char buf[PATH_MAX];

		note_open(fd, abs_path(dirfd, path, buf, sizeof(buf)), flags);
	}
	return fd;
}

int close(int fd)
{
	if (tracked(fd)) {
		pthread_mutex_lock(&mu);
		fds[fd].file = 0;
		pthread_mutex_unlock(&mu);
	}
	return real_close(fd);
}

/* ===================== Writes ===================== */

/* The injected fault for this call, if it is the chosen one; 0 if none. */
static int fault_hit(struct fault *f, int file)
{
	int hit = 0;

	if (!f->nth || !strstr(paths[file - 1], f->sub) ||
	    (arm_path && access(arm_path, F_OK)))
		return 0;
	pthread_mutex_lock(&mu);
	hit = ++f->count == f->nth;
	pthread_mutex_unlock(&mu);
	return hit;
}

/* One write of iov[0..n) at off, through do_write (which returns what the
 * real call returned). */
static ssize_t traced_write(int fd, const struct iovec *iov, int n, off_t off,
			    ssize_t (*do_write)(int, const struct iovec *, int,
						off_t))
{
	int file = tracked(fd);
	uint64_t seq;
	ssize_t res;
	int saved;

	if ((write_on < 0 || fds[fd].dsync == write_on) &&
	    fault_hit(&write_fault, file)) {
		fi_line("inject-write", file, write_fault.nth, write_fault.err);
		if (write_fault.err > 0) {
			errno = write_fault.err;
			return -1;
		}
		struct iovec half = {iov[0].iov_base, iov[0].iov_len / 2};

		return do_write(fd, &half, 1, off);
	}
	pthread_mutex_lock(&mu);
	seq = ++next_seq;
	log_rec(PL_WRITE, file, seq, (uint64_t)off, fds[fd].dsync, iov, n);
	pthread_mutex_unlock(&mu);
	res = do_write(fd, iov, n, off);
	saved = errno;
	pthread_mutex_lock(&mu);
	log_rec(PL_WDONE, file, seq, (uint64_t)off,
		res < 0 ? -(int64_t)saved : res, NULL, 0);
	pthread_mutex_unlock(&mu);
	if (fi_log)
		fi_line("write", file, (long)seq, (long)res);
	errno = saved;
	return res;
}

static ssize_t do_pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	if (n == 1)
		return real_pwrite(fd, iov[0].iov_base, iov[0].iov_len, off);
	return real_pwritev(fd, iov, n, off);
}

/* For write and writev: the offset is the file position (LMDB seeks first). */
static ssize_t do_writev(int fd, const struct iovec *iov, int n, off_t off)
{
	(void)off;
	return real_writev(fd, iov, n);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
	struct iovec iov = {(void *)buf, count};

	if (!tracked(fd))
		return real_pwrite(fd, buf, count, off);
	return traced_write(fd, &iov, 1, off, do_pwritev);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off)
    __attribute__((alias("pwrite")));

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	if (!tracked(fd))
		return real_pwritev(fd, iov, n, off);
	return traced_write(fd, iov, n, off, do_pwritev);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	if (!tracked(fd))
		return real_writev(fd, iov, n);
	return traced_write(fd, iov, n, lseek(fd, 0, SEEK_CUR), do_writev);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	struct iovec iov = {(void *)buf, count};

	if (!tracked(fd))
		return real_write(fd, buf, count);
	return traced_write(fd, &iov, 1, lseek(fd, 0, SEEK_CUR), do_writev);
}

int ftruncate(int fd, off_t len)
{
	int file = tracked(fd), rc;

	rc = real_ftruncate(fd, len);
	if (file) {
		pthread_mutex_lock(&mu);
		log_rec(PL_TRUNC, file, 0, (uint64_t)len, rc ? -errno : 0, NULL,
			0);
		pthread_mutex_unlock(&mu);
	}
	return rc;
}

/* ===================== Syncs ===================== */

/* A sync of fd starts (ring: one of kvd's io threads, through io_uring or
 * the system call, named so in KVD_FI_LOG): 0 for an untracked file, -errno when the fault fails it
 * (not issued: begin and end logged now), else its sequence number, with
 * its begin logged. */
static long sync_begin(int fd, int ring)
{
	int file = tracked(fd);
	long seq;

	if (!file)
		return 0;
	if (delay_ms > 0 && strstr(paths[file - 1], delay_sub)) {
		struct timespec ts = {delay_ms / 1000,
				      delay_ms % 1000 * 1000000L};

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	if (fault_hit(&sync_fault, file)) {
		fi_line(ring ? "inject-io-sync" : "inject-sync", file,
			sync_fault.nth, sync_fault.err);
		pthread_mutex_lock(&mu);
		seq = (long)++next_seq;
		log_rec(PL_SYNC_BEGIN, file, (uint64_t)seq, 0, 0, NULL, 0);
		log_rec(PL_SYNC_END, file, (uint64_t)seq, 0, -EIO, NULL, 0);
		pthread_mutex_unlock(&mu);
		return -(sync_fault.err > 0 ? sync_fault.err : EIO);
	}
	pthread_mutex_lock(&mu);
	seq = (long)++next_seq;
	log_rec(PL_SYNC_BEGIN, file, (uint64_t)seq, 0, 0, NULL, 0);
	pthread_mutex_unlock(&mu);
	return seq;
}

/* The sync sync_begin numbered seq returned rc (0 or -errno). */
static void sync_end(int fd, long seq, int rc, int ring)
{
	int file = tracked(fd);

	if (!file || seq <= 0)
		return;
	pthread_mutex_lock(&mu);
	log_rec(PL_SYNC_END, file, (uint64_t)seq, 0, rc, NULL, 0);
	pthread_mutex_unlock(&mu);
	fi_line(ring ? "io-sync" : "sync", file, seq, rc ? -1 : 0);
}

static int traced_sync(int fd, int (*real)(int))
{
	long seq = sync_begin(fd, 0);
	int rc, saved;

	if (seq < 0) {
		errno = (int)-seq;
		return -1;
	}
	rc = real(fd);
	saved = errno;
	sync_end(fd, seq, rc ? -saved : 0, 0);
	errno = saved;
	return rc;
}

/* kvd's io threads flush the journal through io_uring (IORING_OP_FSYNC)
 * or the fdatasync system call itself, neither of which a libc wrapper
 * sees: kvd calls these around each such flush (found with dlsym,
 * kvd/store/shard_write.c), so that the log and the faults cover them as
 * they cover fdatasync.  begin: a tag for end, or a
 * negative errno (the flush is not issued and fails so); end: the result
 * kvd acts on. */
int kvd_fi_io_sync_begin(int fd);
int kvd_fi_io_sync_end(int fd, int tag, int res);

int kvd_fi_io_sync_begin(int fd)
{
	long seq = sync_begin(fd, 1);

	return seq > INT32_MAX ? 0 : (int)seq;
}

int kvd_fi_io_sync_end(int fd, int tag, int res)
{
	sync_end(fd, tag, res, 1);
	return res;
}

int fsync(int fd)
{
	return traced_sync(fd, real_fsync);
}

int fdatasync(int fd)
{
	return traced_sync(fd, real_fdatasync);
}
