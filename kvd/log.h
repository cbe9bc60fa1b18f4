/* log.h - leveled, timestamped log lines to stderr or a file.
 * One line per significant event; never one per request.  On stderr that
 * is the journal, lines carry sd-daemon priorities instead (log.c).
 *
 * The calls that write a line (kvd_log, kvd_log_ratelimited, log_error ...)
 * are the storage engine's store_log.h, which log.c implements; this
 * header adds the sink's own: where lines go, and from which level. */
#ifndef KVD_LOG_H
#define KVD_LOG_H

#include "store_log.h"

/* path NULL or "" logs to stderr.  0, or -1 when the file cannot be opened. */
int kvd_log_open(const char *path, int level);
void kvd_log_set_level(int level);
/* Whether lines go to a file (not stderr). */
int kvd_log_is_file(void);
/* Reopen the same file (after logrotate moved it: SIGUSR1); 0 or -1. */
int kvd_log_reopen(void);

#endif
