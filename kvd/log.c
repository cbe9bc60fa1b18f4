/* log.c - the log sink (see log.h).
 *
 * Each line is formatted into a local buffer and written with one write(2),
 * so lines from different threads never interleave and no lock is needed.
 *
 * When stderr is the journal (systemd says so in JOURNAL_STREAM, the
 * device and inode of the stream it connected), a line on stderr opens
 * with the sd-daemon priority prefix ("<3>" error ... "<7>" debug) in place
 * of the timestamp and pid the journal records itself, so that
 * `journalctl -p warning` shows warnings and errors only.
 *
 * Control characters in a line are written escaped (\xNN): one line per
 * event, whatever the values in it.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static int log_level = KVD_LOG_INFO;
static char log_path[512];

static const char level_tag[] = "EWID";
/* syslog priorities of the levels: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
static const char level_prio[] = "3467";
/* stderr is the journal's stream (set once, by the first kvd_log_open) */
static int journal = -1;

/* JOURNAL_STREAM is "DEV:INO" of the stream systemd gave the service; it
 * is inherited by children whose stderr may be elsewhere, so it counts
 * only when it matches stderr itself (sd-daemon(3), systemd.exec(5)). */
static int stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &tail) != 2 ||
	    fstat(2, &st))
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

int kvd_log_open(const char *path, int level)
{
	kvd_log_set_level(level);
	if (journal < 0)
		journal = stderr_is_journal();
	if (!path || !*path) {
		/* Back to stderr (a reload may have removed log-file). */
		if (log_fd > 2)
			close(log_fd);
		log_fd = 2;
		log_path[0] = '\0';
		return 0;
	}
	snprintf(log_path, sizeof(log_path), "%s", path);
	return kvd_log_reopen();
}

void kvd_log_set_level(int level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int kvd_log_is_file(void)
{
	return log_path[0] != '\0';
}

int kvd_log_reopen(void)
{
	int fd, old;

	if (!log_path[0])
		return 0;
	fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return -1;
	old = log_fd;
	log_fd = fd;
	if (old > 2)
		close(old);
	return 0;
}

/* Append msg to line (n bytes used of cap) with every control character
 * written as \xNN: a value a peer chose (a host, a name, a primary's error
 * text) can then never end the line and forge one of its own.  The new
 * length. */
static size_t put_escaped(char *line, size_t n, size_t cap, const char *msg)
{
	static const char hex[] = "0123456789abcdef";

	for (; *msg && n + 4 < cap; msg++) {
		unsigned char ch = (unsigned char)*msg;

		if (ch >= 0x20 && ch != 0x7f) {
			line[n++] = (char)ch;
			continue;
		}
		line[n++] = '\\';
		line[n++] = 'x';
		line[n++] = hex[ch >> 4];
		line[n++] = hex[ch & 15];
	}
	line[n] = '\0';
	return n;
}

/* Format and write one line, with an optional suffix. */
static void vlog(int level, const char *suffix, const char *fmt, va_list ap)
{
	char line[1024], msg[1024];
	struct timespec ts;
	struct tm tm;
	size_t n;
	int saved = errno;

	if (journal > 0 && log_fd == 2) {
		n = (size_t)snprintf(line, sizeof(line), "<%c>%c ",
				     level_prio[level], level_tag[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      ".%03ldZ %d %c ", ts.tv_nsec / 1000000,
				      (int)getpid(), level_tag[level]);
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = put_escaped(line, n, sizeof(line), msg);
	if (suffix)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s", suffix);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_fd, line, n) < 0) {
		/* Nowhere left to report it. */
	}
	errno = saved;
}

void kvd_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vlog(level, NULL, fmt, ap);
	va_end(ap);
}

/* The limiter's clock: coarse is enough for a once-a-second gate, and
 * costs no system call. */
static unsigned long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (unsigned long long)ts.tv_sec * 1000 +
	       (unsigned long long)ts.tv_nsec / 1000000;
}

int kvd_log_ratelimited(struct kvd_log_limit *l, int level, const char *fmt,
			...)
{
	unsigned long long now, next, dropped;
	char suffix[64];
	va_list ap;

	if (level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return 0;
	/* +1: a clock reading of 0 must not look like "never logged". */
	now = mono_ms() + 1;
	next = atomic_load_explicit(&l->next_ms, memory_order_relaxed);
	/* One winner per interval, even when threads share the limiter. */
	if ((next && now < next) ||
	    !atomic_compare_exchange_strong_explicit(
		&l->next_ms, &next, now + l->interval_ms, memory_order_relaxed,
		memory_order_relaxed)) {
		atomic_fetch_add_explicit(&l->dropped, 1, memory_order_relaxed);
		return 0;
	}
	dropped =
	    atomic_exchange_explicit(&l->dropped, 0, memory_order_relaxed);
	suffix[0] = '\0';
	if (dropped)
		snprintf(suffix, sizeof(suffix),
			 " (%llu similar lines suppressed)", dropped);
	va_start(ap, fmt);
	vlog(level, suffix, fmt, ap);
	va_end(ap);
	return 1;
}
