/* store_log.h - the log calls the storage engine makes: declared here, so
 * that the store includes nothing of the server, and implemented by the
 * program that links it.  kvd's log.c implements them (kvd/log.h adds the
 * sink's own calls: where lines go, the level); a test or a benchmark of
 * the store links log.c too (the kvlog library), or defines these two
 * functions itself.
 *
 * One line per significant event, never one per request.  Both calls may
 * be made from any thread, never block on a lock, and keep errno.
 */
#ifndef KVD_STORE_LOG_H
#define KVD_STORE_LOG_H

enum { KVD_LOG_ERROR, KVD_LOG_WARN, KVD_LOG_INFO, KVD_LOG_DEBUG };

/* One line at level (KVD_LOG_*), printf-style, without its newline: lines
 * above the sink's level are dropped. */
void kvd_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line a peer can make kvd repeat at will (a failed AUTH, a request in
 * the wrong protocol), or a failure that repeats while it lasts (a full
 * disk), must not fill the disk: such lines go through a limiter, which
 * lets one line out per interval and counts the ones it holds back; the
 * next line out ends with "(N similar lines suppressed)".  A limiter may
 * be shared by threads (its fields are atomic), or be static __thread for
 * one per thread.  Never blocks. */
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
