/* server.c - starting the server under test (--server) and measuring its
 * memory from /proc (--server-pid, or the server started here).
 *
 * The peak resident size is what the kernel records as VmHWM: exact for a
 * single process, however short the peak.  PostgreSQL is a process per
 * connection, so for a server with children the proportional set sizes
 * (PSS) of the whole tree are summed each second and the largest sum is
 * kept, which can miss a peak shorter than a second.  The report says which
 * was used.
 */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

pid_t server_start(const struct kb_config *cfg, const char *cmd,
		   double timeout_s, char *err, size_t errlen)
{
	uint64_t deadline = kb_now_ns() + (uint64_t)(timeout_s * 1e9);
	char why[256] = "";
	pid_t pid = fork();

	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char *line = malloc(strlen(cmd) + 8);

		setpgid(0, 0);
		if (line) {
			sprintf(line, "exec %s", cmd);
			execl("/bin/sh", "sh", "-c", line, (char *)NULL);
		}
		_exit(127);
	}
	setpgid(pid, pid);
	while (kb_now_ns() < deadline) {
		void *c = cfg->driver->connect(&cfg->target, why, sizeof(why));
		int status;

		if (c) {
			cfg->driver->close(c);
			/* Still ours?  If the port was taken, the server exits
			 * and we were talking to someone else's. */
			nap(100);
			if (waitpid(pid, &status, WNOHANG) == 0)
				return pid;
			snprintf(err, errlen,
				 "server exited at once (port taken?): %s",
				 cmd);
			return -1;
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			snprintf(err, errlen, "server exited (status %d): %s",
				 WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				 cmd);
			return -1;
		}
		nap(50);
	}
	snprintf(err, errlen, "server not reachable after %.0f s: %s",
		 timeout_s, why);
	server_stop(pid, 5);
	return -1;
}

int server_stop(pid_t pid, double timeout_s)
{
	uint64_t deadline = kb_now_ns() + (uint64_t)(timeout_s * 1e9);
	int status;

	kill(-pid, SIGTERM);
	while (kb_now_ns() < deadline) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0)
			return -1;
		nap(20);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* The kB figures of /proc/pid/status we use, and the proportional set size
 * (shared pages divided among the processes sharing them); 0 when the
 * process is gone. */
struct pstat {
	uint64_t hwm, rss, anon, file, pss;
};

/* PSS, not RSS, is what adds up across processes: PostgreSQL's backends
 * all map the same shared buffers, and summing their RSS would count those
 * once per backend. */
static uint64_t read_pss(pid_t pid)
{
	char path[64], line[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %llu", &v) == 1)
			break;
	fclose(f);
	return v * 1024;
}

static int read_status(pid_t pid, struct pstat *ps)
{
	char path[64], line[256];
	FILE *f;

	memset(ps, 0, sizeof(*ps));
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "VmHWM: %llu", &v) == 1)
			ps->hwm = v * 1024;
		else if (sscanf(line, "VmRSS: %llu", &v) == 1)
			ps->rss = v * 1024;
		else if (sscanf(line, "RssAnon: %llu", &v) == 1)
			ps->anon = v * 1024;
		else if (sscanf(line, "RssFile: %llu", &v) == 1)
			ps->file = v * 1024;
	}
	fclose(f);
	ps->pss = read_pss(pid);
	return 0;
}

static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	/* The command name may hold spaces and parentheses: skip to the
	 * last ')'. */
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 1, " %*c %d", &ppid);
	fclose(f);
	return ppid;
}

static int in_tree(pid_t pid, pid_t root)
{
	for (int depth = 0; pid > 1 && depth < 16; depth++) {
		if (pid == root)
			return 1;
		pid = parent_of(pid);
	}
	return 0;
}

void server_sample(struct kb_server_mem *m)
{
	struct pstat root, ps;
	uint64_t pss, anon, file;
	struct dirent *d;
	DIR *dir;

	if (m->pid <= 0 || read_status(m->pid, &root))
		return;
	pss = root.pss;
	anon = root.anon;
	file = root.file;
	if ((dir = opendir("/proc"))) {
		while ((d = readdir(dir))) {
			pid_t p = (pid_t)atoi(d->d_name);

			if (p <= 0 || p == m->pid || !in_tree(p, m->pid) ||
			    read_status(p, &ps))
				continue;
			m->tree = 1;
			pss += ps.pss;
			anon += ps.anon;
			file += ps.file;
		}
		closedir(dir);
	}
	m->known = 1;
	m->rss_anon = anon;
	m->rss_file = file;
	if (!m->tree && root.hwm > m->peak_rss)
		m->peak_rss = root.hwm;
	if (m->tree && pss > m->peak_rss)
		m->peak_rss = pss;
}
