/* log.c - the log sink (see log.h).
 *
 * Each line is formatted into a local buffer and written with one write(2),
 * so lines from different threads never interleave and no lock is needed.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static int log_level = KVD_LOG_INFO;
static char log_path[512];

static const char level_tag[] = "EWID";

int kvd_log_open(const char *path, int level)
{
	kvd_log_set_level(level);
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

void kvd_log(int level, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t n;
	int saved = errno;

	if (level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %d %c ",
			      ts.tv_nsec / 1000000, (int)getpid(),
			      level_tag[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_fd, line, n) < 0) {
		/* Nowhere left to report it. */
	}
	errno = saved;
}
