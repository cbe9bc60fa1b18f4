/* fuzz_config.c - kvd's configuration parser (kvd/config.c) on any bytes.
 *
 * The first byte picks the form: even, the rest is a config file read by
 * kvd_config_read; odd, the rest is a command line, its arguments split at
 * NUL bytes, read by kvd_config_load (arguments that would read a file or
 * print help are dropped).  Besides "no crash", a file whose every line is
 * blank or a comment must change nothing (a comment must never set an
 * option), and be accepted unless it holds a NUL byte.
 */
#define _GNU_SOURCE
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define MAX_ARGS 64

static struct kvd_config defaults;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *args[] = {"kvd", NULL};

	(void)argc;
	(void)argv;
	FUZZ_CHECK(kvd_config_load(&defaults, 1, args) == 0);
	return 0;
}

/* Is every line blank or a comment, once trimmed as kvd trims it (spaces
 * and tabs before, spaces, tabs, CR and LF after)?  *nul says whether a
 * NUL byte (which a text file never holds, and kvd refuses) appears. */
static int only_comments(const uint8_t *p, size_t n, int *nul)
{
	*nul = memchr(p, '\0', n) != NULL;
	for (size_t i = 0; i < n;) {
		size_t e = i, b = i;

		while (e < n && p[e] != '\n')
			e++;
		while (b < e && (p[b] == ' ' || p[b] == '\t'))
			b++;
		if (b < e && p[b] != '#') {
			size_t t = e;

			while (t > b && (p[t - 1] == ' ' || p[t - 1] == '\t' ||
					 p[t - 1] == '\r'))
				t--;
			if (t > b)
				return 0;
		}
		i = e + 1;
	}
	return 1;
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	struct kvd_config c = defaults;
	FILE *f;
	int rc, nul;

	if (size == 0)
		return;
	f = fmemopen((void *)data, size, "r");
	FUZZ_CHECK(f);
	rc = kvd_config_read(&c, f, "fuzz.conf");
	fclose(f);
	if (only_comments(data, size, &nul)) {
		FUZZ_CHECK(rc == 0 || nul);
		FUZZ_CHECK(!memcmp(&c, &defaults, sizeof(c)));
	}
}

static int dropped(const char *a)
{
	return !strncmp(a, "--config", 8) || !strcmp(a, "--help") ||
	       !strcmp(a, "-h") || !strcmp(a, "--version") || !strcmp(a, "-v");
}

static void fuzz_flags(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), *argv[MAX_ARGS + 1];
	struct kvd_config c;
	int argc = 0;

	FUZZ_CHECK(copy);
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "kvd";
	for (char *a = copy; a <= copy + size && argc < MAX_ARGS;
	     a += strlen(a) + 1)
		if (!dropped(a))
			argv[argc++] = a;
	argv[argc] = NULL;
	kvd_config_load(&c, argc, argv);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_flags(data + 1, size - 1);
	else
		fuzz_file(data + 1, size - 1);
	return 0;
}
