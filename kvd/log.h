/* log.h - leveled, timestamped log lines to stderr or a file.
 * One line per significant event; never one per request. */
#ifndef KVD_LOG_H
#define KVD_LOG_H

enum { KVD_LOG_ERROR, KVD_LOG_WARN, KVD_LOG_INFO, KVD_LOG_DEBUG };

/* path NULL or "" logs to stderr.  0, or -1 when the file cannot be opened. */
int kvd_log_open(const char *path, int level);
void kvd_log_set_level(int level);
/* Whether lines go to a file (not stderr). */
int kvd_log_is_file(void);
/* Reopen the same file (after logrotate moved it); 0 or -1. */
int kvd_log_reopen(void);
void kvd_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) kvd_log(KVD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) kvd_log(KVD_LOG_WARN, __VA_ARGS__)
#define log_info(...) kvd_log(KVD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) kvd_log(KVD_LOG_DEBUG, __VA_ARGS__)

#endif
