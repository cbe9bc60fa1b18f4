/* replay_main.c - run a fuzz target over files without libFuzzer.
 *
 * usage: fuzz_X_replay PATH...  (files, or directories of files)
 *
 * Builds without -DKVD_FUZZ=ON (gcc, and the ASan and TSan builds) link
 * each target with this main instead of libFuzzer's, so `make test` runs
 * every seed corpus, and every input a fuzzer ever found, through the
 * target on every change: the corpus becomes a regression test.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "%s: cannot read\n", path);
		if (f)
			fclose(f);
		return -1;
	}
	/* An exact-size heap copy, so ASan sees every read past the end. */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "%s: no such file or directory\n", path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d))) {
		char sub[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		rc |= run_path(sub, count);
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		rc |= run_path(argv[i], &count);
	printf("%s: %u inputs, no finding\n", argv[0], count);
	return rc ? 1 : count ? 0 : 77;
}
