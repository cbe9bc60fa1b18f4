/* kvctest.c - real kvd processes and a fake server for the client tests
 * (see kvctest.h). */
#include "kvctest.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t kvt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* A port that was free a moment ago (kvd may still lose it: retried). */
static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static int can_connect(unsigned port)
{
	kvc_conn *c;
	int ok;

	CHECK(kvc_create(&c) == 0);
	kvc_set_timeouts(c, 500, 500);
	ok = kvc_connect(c, "127.0.0.1", port) == 0;
	kvc_close(c);
	return ok;
}

static pid_t spawn(const char *bin, struct kvd_proc *k,
		   const char *const *extra)
{
	const char *argv[32];
	char port[16];
	int n = 0;
	pid_t pid;

	snprintf(port, sizeof(port), "%u", k->port);
	argv[n++] = bin;
	argv[n++] = "--bind";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--port";
	argv[n++] = port;
	argv[n++] = "--data-dir";
	argv[n++] = k->dir;
	argv[n++] = "--threads";
	argv[n++] = "2";
	argv[n++] = "--log-level";
	argv[n++] = "warn";
	for (; extra && *extra && n < 30; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void remove_dir(const char *dir);

/* The servers still running, so that a failed CHECK (which exits) leaves
 * no process and no data directory behind. */
static struct kvd_proc *running[4];

static void reap_all(void)
{
	for (int i = 0; i < 4; i++) {
		if (!running[i])
			continue;
		kill(running[i]->pid, SIGKILL);
		waitpid(running[i]->pid, NULL, 0);
		remove_dir(running[i]->dir);
		running[i] = NULL;
	}
}

static void track(struct kvd_proc *k, int on)
{
	static int registered;

	if (!registered++)
		atexit(reap_all);
	for (int i = 0; i < 4; i++)
		if (on ? !running[i] : running[i] == k) {
			running[i] = on ? k : NULL;
			return;
		}
}

void kvd_start(struct kvd_proc *k, const char *const *extra)
{
	const char *bin = getenv("KVD_BIN");

	if (!bin) {
		fprintf(stderr, "KVD_BIN is not set: skipped\n");
		exit(77);
	}
	snprintf(k->dir, sizeof(k->dir), "/tmp/kvctest-XXXXXX");
	CHECK(mkdtemp(k->dir));
	for (int attempt = 0; attempt < 5; attempt++) {
		uint64_t deadline = kvt_now_ms() + 15000;
		int status;

		k->port = free_port();
		k->pid = spawn(bin, k, extra);
		while (kvt_now_ms() < deadline) {
			if (waitpid(k->pid, &status, WNOHANG) == k->pid)
				break; /* exited: the port was taken */
			if (can_connect(k->port)) {
				track(k, 1);
				return;
			}
			sleep_ms(20);
		}
		kill(k->pid, SIGKILL);
		waitpid(k->pid, &status, 0);
	}
	fprintf(stderr, "kvd did not start\n");
	remove_dir(k->dir);
	exit(1);
}

static void remove_dir(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
}

void kvd_stop(struct kvd_proc *k)
{
	int status;

	track(k, 0);
	CHECK(kill(k->pid, SIGTERM) == 0);
	CHECK(waitpid(k->pid, &status, 0) == k->pid);
	remove_dir(k->dir);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void kvd_restart(struct kvd_proc *k, const char *const *extra)
{
	const char *bin = getenv("KVD_BIN");
	uint64_t deadline;
	int status;

	CHECK(kill(k->pid, SIGTERM) == 0);
	CHECK(waitpid(k->pid, &status, 0) == k->pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	k->pid = spawn(bin, k, extra);
	deadline = kvt_now_ms() + 15000;
	while (!can_connect(k->port)) {
		/* Exited (the port was taken meanwhile), or too slow. */
		CHECK(waitpid(k->pid, &status, WNOHANG) == 0);
		CHECK(kvt_now_ms() < deadline);
		sleep_ms(20);
	}
}

void kvd_kill(struct kvd_proc *k)
{
	int status;

	track(k, 0);
	kill(k->pid, SIGKILL);
	waitpid(k->pid, &status, 0);
	remove_dir(k->dir);
}

kvc_conn *kvt_connect(unsigned port, int io_ms)
{
	kvc_conn *c;

	CHECK(kvc_create(&c) == 0);
	CHECK(kvc_set_timeouts(c, 2000, io_ms) == 0);
	if (kvc_connect(c, "127.0.0.1", port)) {
		fprintf(stderr, "connect: %s\n", kvc_errmsg(c));
		exit(1);
	}
	return c;
}

/* ===================== Fake server ===================== */

static int listener(unsigned *port, int backlog)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(fd, backlog) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int read_full(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r = read(fd, b, n);

		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static int read_frame(int fd)
{
	uint8_t hdr[4], buf[4096];
	uint32_t len;

	if (read_full(fd, hdr, 4))
		return -1;
	len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	      (uint32_t)hdr[2] << 8 | hdr[3];
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		if (read_full(fd, buf, n))
			return -1;
		len -= (uint32_t)n;
	}
	return 0;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	for (size_t i = 0; i < f->nsteps && !f->stop; i++) {
		const struct fake_step *s = &f->steps[i];

		if (s->read_request && read_frame(fd))
			break;
		if (s->len && write(fd, s->reply, s->len) != (ssize_t)s->len)
			break;
		if (s->hold_ms)
			sleep_ms(s->hold_ms);
	}
	while (f->keep_open && !f->stop)
		sleep_ms(10);
	close(fd);
	return NULL;
}

void fake_start(struct fake *f, const struct fake_step *steps, size_t n,
		int keep_open)
{
	memset(f, 0, sizeof(*f));
	f->lfd = listener(&f->port, 4);
	f->steps = steps;
	f->nsteps = n;
	f->keep_open = keep_open;
	CHECK(pthread_create(&f->th, NULL, fake_main, f) == 0);
}

void fake_stop(struct fake *f)
{
	f->stop = 1;
	shutdown(f->lfd, SHUT_RDWR); /* wakes an accept() still waiting */
	pthread_join(f->th, NULL);
	close(f->lfd);
}

int hung_listener(unsigned *port, int *fds, int *n)
{
	int lfd = listener(port, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)*port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	/* Fill the accept queue: once it is full, the kernel drops new SYNs
	 * and a connect() waits for ever. */
	*n = 0;
	fds[(*n)++] = lfd;
	while (*n < 8) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		CHECK(fd >= 0);
		fds[(*n)++] = fd;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			continue;
		CHECK(errno == EINPROGRESS);
		if (poll(&p, 1, 500) == 0)
			return lfd; /* this one hangs: the queue is full */
	}
	return lfd;
}
