/* test_config.c - what reaches the config file and the log stays one line
 * per value (kvd/config.c, kvd/hosts.c, kvd/log.c).
 *
 * CONFIG REWRITE writes the live replication role as replicaof.  A role
 * with a newline in it would have added lines of its own to the file
 * (backup-anywhere yes, protected-mode no) that a restart then obeys: the
 * rewrite must refuse it and leave the file as it was.  A value the reader
 * would trim or unquote is written quoted and reads back the same.  Log
 * lines escape control characters.  Hosts are addresses or host names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

static unsigned fails;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__,          \
				__LINE__, #cond);                              \
			fails++;                                               \
		}                                                              \
	} while (0)

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static int load(struct kvd_config *c, const char *conf, const char *dir)
{
	char *argv[] = {"kvd",	      "--config",  (char *)conf,
			"--data-dir", (char *)dir, NULL};

	return kvd_config_load(c, 5, argv);
}

/* The file as kvd reads it, without the checks of a start. */
static int read_back(struct kvd_config *c, const char *conf)
{
	FILE *f = fopen(conf, "r");
	int rc;

	memset(c, 0, sizeof(*c));
	if (!f)
		return -1;
	rc = kvd_config_read(c, f, conf);
	fclose(f);
	return rc;
}

static void test_rewrite(const char *dir)
{
	static struct kvd_config c, back;
	static const char *const evil[] = {
	    "127.0.0.1 32249\nbackup-anywhere yes\nprotected-mode no\n#",
	    "127.0.0.1 7379\rbackup-anywhere yes", "h\x7f 1"};
	char conf[600], err[512];
	const char *orig = "# kvd\nthreads 2\nreplicaof 127.0.0.1 1\n";

	snprintf(conf, sizeof(conf), "%s/kvd.conf", dir);
	spit(conf, orig);
	CHECK(load(&c, conf, dir) == 0);
	for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
		CHECK(kvd_config_rewrite(&c, evil[i], err, sizeof(err)) == -1);
		CHECK(strstr(err, "replicaof") != NULL);
		CHECK(!strcmp(slurp(conf), orig));
	}
	/* blanks at an end, and quotes, survive as the reader reads them */
	CHECK(kvd_config_rewrite(&c, " 10.0.0.1 6379 ", err, sizeof(err)) == 0);
	CHECK(!strcmp(slurp(conf),
		      "# kvd\nthreads 2\nreplicaof \" 10.0.0.1 6379 \"\n"));
	CHECK(read_back(&back, conf) == 0);
	CHECK(!strcmp(back.replicaof, " 10.0.0.1 6379 "));
	CHECK(kvd_config_rewrite(&c, "\"q\"", err, sizeof(err)) == 0);
	CHECK(read_back(&back, conf) == 0);
	CHECK(!strcmp(back.replicaof, "\"q\""));
	CHECK(kvd_config_rewrite(&c, "10.0.0.1 6379 resp", err, sizeof(err)) ==
	      0);
	CHECK(!strcmp(slurp(conf),
		      "# kvd\nthreads 2\nreplicaof 10.0.0.1 6379 resp\n"));
}

static void test_log(const char *dir)
{
	char path[600];
	const char *text;

	snprintf(path, sizeof(path), "%s/kvd.log", dir);
	CHECK(kvd_log_open(path, KVD_LOG_INFO) == 0);
	log_info("host %s said %s", "a\nb", "x\r\x1b[31m\x7fy");
	text = slurp(path);
	CHECK(strstr(text, "host a\\x0ab said x\\x0d\\x1b[31m\\x7fy\n") !=
	      NULL);
	CHECK(strchr(text, '\n') == text + strlen(text) - 1);
	kvd_log_open(NULL, KVD_LOG_INFO);
}

static void test_hosts(void)
{
	static const char *const good[] = {
	    "localhost",	 "127.0.0.1", "::1",	"fe80::1",
	    "kvd-1.example.org", "kvd_2",     "a.b.c.", "2001:db8::7"};
	static const char *const bad[] = {"",	 "a b",		"a\nb", "-a",
					  "a-",	 "a..b",	".a",	"a/b",
					  "a:b", "127.0.0.1 1", "x\x7f"};
	char host[256], longname[300];
	unsigned port;
	int resp;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(kvd_config_host_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!kvd_config_host_ok(bad[i]));
	memset(longname, 'a', 64);
	longname[64] = '\0';
	CHECK(!kvd_config_host_ok(longname)); /* a label of 64 */
	CHECK(kvd_config_replicaof("h 1 resp", host, sizeof(host), &port,
				   &resp) == 0 &&
	      !strcmp(host, "h") && port == 1 && resp);
	CHECK(kvd_config_replicaof("h 1 resp x", host, sizeof(host), &port,
				   &resp) == -1);
	CHECK(kvd_config_primary_allowed("a:1, [::1]:7 b", "::1", 7));
	CHECK(kvd_config_primary_allowed("a:1, [::1]:7 b", "B", 9));
	CHECK(!kvd_config_primary_allowed("a:1, [::1]:7 b", "a", 2));
	CHECK(kvd_config_primary_allowed("::1", "::1", 2));
	CHECK(kvd_config_primaries_check("a:1,[::1]:7 ::1", host,
					 sizeof(host)) == 0);
	CHECK(kvd_config_primaries_check("a:1 b:x", host, sizeof(host)) == -1 &&
	      !strcmp(host, "b:x"));
}

int main(void)
{
	char dir[] = "/tmp/kvd-unit-config-XXXXXX";
	char cmd[64];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_rewrite(dir);
	test_log(dir);
	test_hosts();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {
		/* a temporary directory left behind */
	}
	if (fails) {
		fprintf(stderr, "%u failure(s)\n", fails);
		return 1;
	}
	printf("ok\n");
	return 0;
}
