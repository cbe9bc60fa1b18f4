/* server.h - a server kvbench started itself (--server), and the memory of
 * the server it measures (--server-pid or --server). */
#ifndef KB_SERVER_H
#define KB_SERVER_H

#include "kvbench.h"

/* Start cmd with /bin/sh in its own process group and wait (up to
 * timeout_s) until cfg's driver can connect.  The pid, or -1 with err. */
pid_t server_start(const struct kb_config *cfg, const char *cmd,
		   double timeout_s, char *err, size_t errlen);

/* SIGTERM, then SIGKILL after timeout_s; the exit status, or -1. */
int server_stop(pid_t pid, double timeout_s);

/* Refresh m (m->pid set): the peak resident size is the kernel's high-water
 * mark (VmHWM) for one process; a server made of several processes
 * (PostgreSQL) is sampled, summing the proportional set size (PSS) over the
 * process and its descendants, and the largest sum is kept. */
void server_sample(struct kb_server_mem *m);

#endif
