/* journaltest.h - what the journal's unit tests (test_journal.c,
 * test_journal_reader.c) share: the CHECK macro and its failure count, and
 * a scratch directory under $TMPDIR (one subdirectory a test) removed at
 * the end.  Each test is one executable: exit 0 pass, 1 fail, 77 skip.
 */
#ifndef JOURNALTEST_H
#define JOURNALTEST_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned fails;

/* A failed check is reported and counted; the test goes on, so that one
 * run shows every check that fails. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__,          \
				__LINE__, #cond);                              \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			fails++;                                               \
		}                                                              \
	} while (0)

static char root[256];

/* Make root: $TMPDIR/<prefix>-XXXXXX.  0, or -1 (said on stderr). */
static inline int jt_root(const char *prefix)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/%s-XXXXXX", tmp ? tmp : "/tmp",
		 prefix);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

/* Remove root (each test has emptied its own directory) and say how many
 * checks failed: the exit status, 0 or 1. */
static inline int jt_finish(void)
{
	rmdir(root);
	if (fails) {
		fprintf(stderr, "%u checks failed\n", fails);
		return 1;
	}
	return 0;
}

/* A new directory root/name, its path in out. */
static inline void newdir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", root, name);
	if (mkdir(out, 0700) < 0)
		CHECK(0, "mkdir %s: %s", out, strerror(errno));
}

/* Remove dir and the files in it. */
static inline void rmdir_all(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

#endif
