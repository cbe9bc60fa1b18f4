/* kvctest.h - what the libkvclient tests share: a real kvd started on a free
 * loopback port with its own data directory, a scripted fake server for
 * the replies kvd would never send, and CHECK macros.
 *
 * Each test is one executable (exit 0 pass, 1 fail, 77 skip), as liburing's
 * are; $KVD_BIN names the server under test (set by tests/client's
 * CMakeLists.txt).
 */
#ifndef KVCTEST_H
#define KVCTEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "kvclient.h"

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* A call that must return want (0 or a negative status). */
#define CHECK_RC(call, want)                                                   \
	do {                                                                   \
		int rc_ = (call);                                              \
		if (rc_ != (want)) {                                           \
			fprintf(                                               \
			    stderr,                                            \
			    "%s:%d: %s returned %d (%s), wanted %d (%s)\n",    \
			    __FILE__, __LINE__, #call, rc_,                    \
			    kvc_status_name(rc_), (want),                      \
			    kvc_status_name(want));                            \
			exit(1);                                               \
		}                                                              \
	} while (0)

#define CHECK_VAL(v, str)                                                      \
	CHECK((v).len == strlen(str) && (v).p && !memcmp((v).p, str, (v).len))

struct kvd_proc {
	pid_t pid;
	unsigned port;
	char dir[128];
};

/* Start kvd with --threads 2 and the extra arguments (NULL-terminated, may
 * be NULL); exits 77 when $KVD_BIN is not set, 1 when kvd does not start. */
void kvd_start(struct kvd_proc *k, const char *const *extra);
/* SIGTERM, and kvd must exit 0; then remove its data directory. */
void kvd_stop(struct kvd_proc *k);
/* SIGTERM (kvd must exit 0), then start it again on the same port and
 * data directory with these extra arguments. */
void kvd_restart(struct kvd_proc *k, const char *const *extra);
/* SIGKILL, no checks. */
void kvd_kill(struct kvd_proc *k);

/* A connected handle to port, with the given I/O timeout. */
kvc_conn *kvt_connect(unsigned port, int io_ms);

uint64_t kvt_now_ms(void);

/* ---- the fake server ----
 * It accepts one connection, then for each step: reads one whole request
 * frame (when read_request), writes `reply` (len bytes), then sleeps
 * hold_ms; after the last step it closes (or keeps the socket open until
 * fake_stop() when keep_open). */
struct fake_step {
	int read_request;
	const void *reply;
	size_t len;
	int hold_ms;
};

struct fake {
	int lfd;
	unsigned port;
	pthread_t th;
	const struct fake_step *steps;
	size_t nsteps;
	int keep_open;
	atomic_int stop; /* set by fake_stop, read by the fake's thread */
};

void fake_start(struct fake *f, const struct fake_step *steps, size_t n,
		int keep_open);
void fake_stop(struct fake *f);

/* A listener that accepts nothing (backlog 0, filled), on *port: a connect
 * to it hangs.  Returns the fds to close (up to 8) in fds, count in *n. */
int hung_listener(unsigned *port, int *fds, int *n);

#endif
