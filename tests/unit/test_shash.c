/* test_shash.c - kvd_shash, the hash of the tables whose keys clients
 * choose, is keyed per process (shash.h): stable within a process, not
 * XXH3's public unkeyed value, and different in another process.  Were it
 * unkeyed, a client could search offline for keys of one bucket (hash
 * flooding) of the WATCH, pub/sub or hash-field tables.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "shash.h"

static const char *const keys[] = {"", "a", "user:0001", "channel.news",
				   "0123456789abcdef0123456789abcdef"};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The hashes of keys[] as a fresh process computes them. */
static int child_hashes(uint64_t out[NKEYS])
{
	int fd[2], st;
	pid_t pid;

	if (pipe(fd) || (pid = fork()) < 0)
		return -1;
	if (!pid) {
		uint64_t h[NKEYS];

		for (size_t i = 0; i < NKEYS; i++)
			h[i] = kvd_shash(keys[i], strlen(keys[i]));
		_exit(write(fd[1], h, sizeof(h)) == (ssize_t)sizeof(h) ? 0 : 1);
	}
	close(fd[1]);
	if (read(fd[0], out, sizeof(uint64_t) * NKEYS) !=
		(ssize_t)(sizeof(uint64_t) * NKEYS) ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		close(fd[0]);
		return -1;
	}
	close(fd[0]);
	return 0;
}

int main(void)
{
	uint64_t a[NKEYS], b[NKEYS];
	unsigned fails = 0, same = 0;

	/* Both children start unkeyed: the parent has not called it yet. */
	if (child_hashes(a) || child_hashes(b)) {
		fprintf(stderr, "FAIL: could not run the child processes\n");
		return 1;
	}
	for (size_t i = 0; i < NKEYS; i++) {
		size_t n = strlen(keys[i]);
		uint64_t h = kvd_shash(keys[i], n);

		if (kvd_shash(keys[i], n) != h) {
			fprintf(stderr, "FAIL: \"%s\" hashes twice apart\n",
				keys[i]);
			fails++;
		}
		if (h == XXH3_64bits(keys[i], n) ||
		    a[i] == XXH3_64bits(keys[i], n)) {
			fprintf(stderr, "FAIL: \"%s\" hashes as unkeyed XXH3\n",
				keys[i]);
			fails++;
		}
		same += a[i] == b[i] || a[i] == h;
	}
	/* A 64-bit keyed value repeats across processes by chance 2^-64. */
	if (same) {
		fprintf(stderr, "FAIL: %u keys hash alike in two processes\n",
			same);
		fails++;
	}
	if (!fails)
		printf("shash: keyed per process, stable within one\n");
	return fails ? 1 : 0;
}
