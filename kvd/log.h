/* log.h - leveled, timestamped log lines to stderr or a file.
 * One line per significant event; never one per request.  On stderr that
 * is the journal, lines carry sd-daemon priorities instead (log.c). */
#ifndef KVD_LOG_H
#define KVD_LOG_H

enum { KVD_LOG_ERROR, KVD_LOG_WARN, KVD_LOG_INFO, KVD_LOG_DEBUG };

/* path NULL or "" logs to stderr.  0, or -1 when the file cannot be opened. */
int kvd_log_open(const char *path, int level);
void kvd_log_set_level(int level);
/* Whether lines go to a file (not stderr). */
int kvd_log_is_file(void);
/* Reopen the same file (after logrotate moved it: SIGUSR1); 0 or -1. */
int kvd_log_reopen(void);
void kvd_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line a peer can make kvd repeat at will (a failed AUTH, a request in
 * the wrong protocol) must not let it fill the disk: such lines go through
 * a limiter, which lets one line out per interval and counts the ones it
 * holds back; the next line out ends with "(N similar lines suppressed)".
 * A limiter may be shared by threads (its fields are atomic), or be
 * static __thread for one per io thread.  Never blocks. */
struct kvd_log_limit {
	_Atomic unsigned long long next_ms; /* monotonic; 0: never logged */
	_Atomic unsigned long long dropped;
	unsigned interval_ms;
};
#define KVD_LOG_LIMIT_INIT(ms)                                                 \
	{                                                                      \
		0, 0, (ms)                                                     \
	}

/* Log through the limiter l; 1 when the line went out, 0 when held back. */
int kvd_log_ratelimited(struct kvd_log_limit *l, int level, const char *fmt,
			...) __attribute__((format(printf, 3, 4)));

#define log_error(...) kvd_log(KVD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) kvd_log(KVD_LOG_WARN, __VA_ARGS__)
#define log_info(...) kvd_log(KVD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) kvd_log(KVD_LOG_DEBUG, __VA_ARGS__)

#endif
