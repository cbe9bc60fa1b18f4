/* kvbench.c - kvbench's entry point: options, the phases in order (load,
 * run, verify), the server it may start, and the reports.
 *
 * kvbench is how a user compares kvd with the store they use now, so the
 * same workload runs unchanged against every driver, and everything that
 * shaped a figure (command line, properties, machine) goes into its
 * reports.  docs/kvbench.md documents every option and output field.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "kvbench.h"
#include "report.h"
#include "server.h"
#include "target.h"
#include "workloads.h"

const char *const kb_op_names[OP_NTYPES] = {"read", "update", "insert", "scan",
					    "rmw"};
const char *const kb_err_names[ERR_NTYPES] = {"not_found", "server",
					      "connection", "protocol"};
const char *const kb_phase_names[PHASE_N] = {"load", "run", "verify"};

const struct kb_driver *const kb_drivers[] = {
#ifdef KB_HAVE_KVD
    &driver_kvd,   &driver_kvd_split,
#endif
#ifdef KB_HAVE_REDIS
    &driver_redis,
#endif
#ifdef KB_HAVE_PG
    &driver_pg,
#endif
#ifdef KB_HAVE_MONGO
    &driver_mongo, &driver_mongowire,
#endif
    NULL,
};

#define EXIT_USAGE 2
#define EXIT_VERIFY 3
#define EXIT_OPS_FAILED 4

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvbench [options] WORKLOAD\n"
	    "\n"
	    "WORKLOAD: a b c d e f (YCSB core workloads), ingest, uuid, geo,\n"
	    "          ixpoint ixeq ixget ixrange ixscan ixinsert (documents "
	    "with\n"
	    "          3 secondary indexes; mongodb, mongowire and "
	    "postgres)\n"
	    "\n"
	    "target\n"
	    "  -D, --driver NAME       kvd (default), redis, postgres, "
	    "mongodb,\n"
	    "                          mongowire (every workload, OP_MSG "
	    "without\n"
	    "                          libmongoc: no TLS, no password)\n"
	    "  -H, --host HOST         server address, or a Unix socket's "
	    "/path\n"
	    "                          (default 127.0.0.1)\n"
	    "      --port PORT         server port (default: the driver's)\n"
	    "  -u, --url URL           kvd://[:PASSWORD@]HOST[:PORT], "
	    "kvds://... "
	    "(TLS)\n"
	    "                          or unix:///PATH[?password=PASSWORD];\n"
	    "                          mongodb: a mongodb:// URI\n"
	    "  -a, --password PASSWORD the server's password (AUTH); seen by "
	    "ps:\n"
	    "                          prefer --askpass or KVCLI_AUTH\n"
	    "      --askpass           read the password from the terminal "
	    "(no echo)\n"
	    "                          or, without one, from stdin's first "
	    "line\n"
	    "      --no-auth-warning   no warning for a password on the "
	    "command "
	    "line\n"
	    "      --tls               kvd: connect with TLS (default port "
	    "7389)\n"
	    "      --cacert FILE       CA certificates (PEM) to verify the "
	    "server\n"
	    "      --cacertdir DIR     CA directory (OpenSSL hash names)\n"
	    "      --cert FILE         client certificate (PEM)\n"
	    "      --key FILE          its private key\n"
	    "      --sni NAME          server name to send and verify "
	    "(default: -H)\n"
	    "      --insecure          do not verify the server's certificate\n"
	    "      --conninfo STR      postgres: libpq connection string "
	    "(dbname=...)\n"
	    "      --user NAME         mongodb: the user of the password "
	    "(default kvd)\n"
	    "      --table NAME        postgres table / mongodb collection / "
	    "redis scan index "
	    "(default\n"
	    "                          usertable, --record value: kvbench,\n"
	    "                          the ix workloads: ixdocs)\n"
	    "      --no-index          ix workloads: create no index (a load "
	    "to\n"
	    "                          time an index build on)\n"
	    "      --index-only        ix workloads: finds ask for the indexed "
	    "field\n"
	    "                          alone (MongoDB: a covered query)\n"
	    "      --server CMD        start the server with CMD, stop it at "
	    "the end\n"
	    "      --server-pid PID    report the peak RSS of the server PID\n"
	    "load\n"
	    "  -t, --threads N         client threads (default: one per core)\n"
	    "  -c, --conns N           connections per thread\n"
	    "  -P, --pipeline N        requests in flight per connection "
	    "(default 1)\n"
	    "  -n, --ops N             operations in the run phase\n"
	    "  -d, --duration SECS     length of the run phase (default 10 "
	    "without -n)\n"
	    "  -w, --warmup SECS       unmeasured run before the measured one\n"
	    "  -r, --records N         records loaded (YCSB recordcount)\n"
	    "      --value-size N|A-B  ingest, uuid: value bytes, or a uniform "
	    "range\n"
	    "  -R, --rate OPS          target operations/s over all threads\n"
	    "  -s, --seed N            random seed (default 1)\n"
	    "      --phase P           load, run or both (default both)\n"
	    "      --record fields|value|doc  YCSB records: fields (default; a "
	    "hash, columns,\n"
	    "                          a document), one value, or postgres: "
	    "a jsonb\n"
	    "                          document per record\n"
	    "                          or one value per record (the whole "
	    "record\n"
	    "                          written by every update)\n"
	    "  -p NAME=VALUE           a YCSB property: recordcount "
	    "operationcount\n"
	    "                          fieldcount fieldlength readallfields\n"
	    "                          writeallfields readproportion\n"
	    "                          updateproportion insertproportion "
	    "scanproportion\n"
	    "                          readmodifywriteproportion "
	    "requestdistribution\n"
	    "                          maxscanlength ... (see kvbench(1))\n"
	    "checks and output\n"
	    "      --verify            read back every acknowledged write at "
	    "the end\n"
	    "      --before-verify CMD run CMD (sh) before reading back\n"
	    "      --key-stats         count accesses per key, report the "
	    "skew\n"
	    "      --json FILE         results as JSON ('-': stdout)\n"
	    "      --csv[=FILE]        results as CSV (default: stdout, no "
	    "table)\n"
	    "      --hdr PREFIX        a latency distribution per operation "
	    "type,\n"
	    "                          HdrHistogram's .hgrm: PREFIX.read.hgrm, "
	    "...\n"
	    "                          (load phase: PREFIX.load.insert.hgrm)\n"
	    "      --plot FILE.png     throughput and latency per type over "
	    "time\n"
	    "                          (gnuplot; FILE.gnuplot, FILE.dat "
	    "kept)\n"
	    "  -q, --quiet             no progress line on stderr\n"
	    "  -h, --help, -V, --version\n"
	    "\n"
	    "kvcli's -h HOST and -p PORT are -H HOST and --port PORT here: -h "
	    "is\n"
	    "--help, and -p sets a YCSB property as in YCSB's own -p.\n"
	    "KVCLI_AUTH in the environment holds the password, as for kvcli.\n"
	    "Exit status: 0 ok, 1 could not run (or the load failed), 2 "
	    "usage,\n"
	    "3 --verify found losses, 4 operations failed in the run.\n");
}

/* ---- options --------------------------------------------------------- */

enum {
	O_PORT = 256,
	O_CONNINFO,
	O_TABLE,
	O_SERVER,
	O_SERVER_PID,
	O_VALUE_SIZE,
	O_PHASE,
	O_VERIFY,
	O_BEFORE_VERIFY,
	O_KEY_STATS,
	O_JSON,
	O_CSV,
	O_HDR,
	O_PLOT,
	O_ASKPASS,
	O_NO_AUTH_WARNING,
	O_TLS,
	O_CACERT,
	O_CACERTDIR,
	O_CERT,
	O_KEY,
	O_SNI,
	O_INSECURE,
	O_RECORD,
	O_USER,
	O_NO_INDEX,
	O_INDEX_ONLY,
};

static const struct option long_opts[] = {
    {"driver", required_argument, NULL, 'D'},
    {"host", required_argument, NULL, 'H'},
    {"port", required_argument, NULL, O_PORT},
    {"url", required_argument, NULL, 'u'},
    {"password", required_argument, NULL, 'a'},
    {"askpass", no_argument, NULL, O_ASKPASS},
    {"no-auth-warning", no_argument, NULL, O_NO_AUTH_WARNING},
    {"tls", no_argument, NULL, O_TLS},
    {"cacert", required_argument, NULL, O_CACERT},
    {"cacertdir", required_argument, NULL, O_CACERTDIR},
    {"cert", required_argument, NULL, O_CERT},
    {"key", required_argument, NULL, O_KEY},
    {"sni", required_argument, NULL, O_SNI},
    {"insecure", no_argument, NULL, O_INSECURE},
    {"conninfo", required_argument, NULL, O_CONNINFO},
    {"table", required_argument, NULL, O_TABLE},
    {"no-index", no_argument, NULL, O_NO_INDEX},
    {"index-only", no_argument, NULL, O_INDEX_ONLY},
    {"user", required_argument, NULL, O_USER},
    {"server", required_argument, NULL, O_SERVER},
    {"server-pid", required_argument, NULL, O_SERVER_PID},
    {"threads", required_argument, NULL, 't'},
    {"conns", required_argument, NULL, 'c'},
    {"pipeline", required_argument, NULL, 'P'},
    {"ops", required_argument, NULL, 'n'},
    {"duration", required_argument, NULL, 'd'},
    {"warmup", required_argument, NULL, 'w'},
    {"records", required_argument, NULL, 'r'},
    {"value-size", required_argument, NULL, O_VALUE_SIZE},
    {"rate", required_argument, NULL, 'R'},
    {"seed", required_argument, NULL, 's'},
    {"phase", required_argument, NULL, O_PHASE},
    {"record", required_argument, NULL, O_RECORD},
    {"verify", no_argument, NULL, O_VERIFY},
    {"before-verify", required_argument, NULL, O_BEFORE_VERIFY},
    {"key-stats", no_argument, NULL, O_KEY_STATS},
    {"json", required_argument, NULL, O_JSON},
    {"csv", optional_argument, NULL, O_CSV},
    {"hdr", required_argument, NULL, O_HDR},
    {"plot", required_argument, NULL, O_PLOT},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const char short_opts[] = "D:H:u:a:t:c:P:n:d:w:r:R:s:p:qhV";

struct optval {
	int opt;
	char *arg; /* in argv: target.c overwrites a password there */
};

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || *out < 0 ? -1 : 0;
}

/* "N" or "A-B". */
static int parse_range(const char *s, unsigned *lo, unsigned *hi)
{
	uint64_t a, b;
	const char *dash = strchr(s, '-');
	char first[32];

	if (!dash)
		return parse_u64(s, 0, 64u << 20, &a)
			   ? -1
			   : (*lo = *hi = (unsigned)a, 0);
	if ((size_t)(dash - s) >= sizeof(first))
		return -1;
	memcpy(first, s, (size_t)(dash - s));
	first[dash - s] = 0;
	if (parse_u64(first, 0, 64u << 20, &a) ||
	    parse_u64(dash + 1, 0, 64u << 20, &b) || a > b)
		return -1;
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

static const struct kb_driver *find_driver(const char *name)
{
	if (strcmp(name, "pg") == 0 || strcmp(name, "postgresql") == 0)
		name = "postgres";
	for (int i = 0; kb_drivers[i]; i++)
		if (strcmp(kb_drivers[i]->name, name) == 0)
			return kb_drivers[i];
	return NULL;
}

/* Options that take a number. */
static int apply_number(struct kb_config *c, int opt, const char *a)
{
	uint64_t v = 0;

	switch (opt) {
	case 't':
	case 'c':
		if (parse_u64(a, 1, 100000, &v))
			return -1;
		*(opt == 't' ? &c->threads : &c->conns) = (unsigned)v;
		return 0;
	case 'P':
		if (parse_u64(a, 1, 65536, &v))
			return -1;
		c->pipeline = (unsigned)v;
		return 0;
	case 'n': return parse_u64(a, 1, UINT64_MAX, &c->ops);
	case 'r': return parse_u64(a, 1, UINT64_MAX, &c->p.recordcount);
	case 's': return parse_u64(a, 0, UINT64_MAX, &c->seed);
	case O_PORT:
		if (parse_u64(a, 1, 65535, &v))
			return -1;
		c->target.port = (unsigned)v;
		return 0;
	case O_SERVER_PID:
		if (parse_u64(a, 1, INT32_MAX, &v))
			return -1;
		c->server_pid = (pid_t)v;
		return 0;
	case 'd': return parse_double(a, &c->duration);
	case 'w': return parse_double(a, &c->warmup);
	case 'R': return parse_double(a, &c->rate);
	case O_VALUE_SIZE: return parse_range(a, &c->vmin, &c->vmax);
	}
	return -1;
}

static int apply_phase(struct kb_config *c, const char *a)
{
	c->do_load = strcmp(a, "load") == 0 || strcmp(a, "both") == 0;
	c->do_run = strcmp(a, "run") == 0 || strcmp(a, "both") == 0;
	return c->do_load || c->do_run ? 0 : -1;
}

/* --tls and its options; 1 when opt is none of them. */
static int apply_tls(struct kb_target *t, int opt, const char *a)
{
	switch (opt) {
	case O_TLS: t->tls = 1; return 0;
	case O_CACERT: t->cacert = a; return 0;
	case O_CACERTDIR: t->cacertdir = a; return 0;
	case O_CERT: t->cert = a; return 0;
	case O_KEY: t->key = a; return 0;
	case O_SNI: t->sni = a; return 0;
	case O_INSECURE: t->insecure = 1; return 0;
	}
	return 1;
}

/* Every option but the workload's defaults.  0, or -1 (message given). */
static int apply_option(struct kb_config *c, int opt, char *a)
{
	char err[256];

	if (!apply_tls(&c->target, opt, a))
		return 0;
	switch (opt) {
	case 'D':
		if ((c->driver = find_driver(a)))
			return 0;
		fprintf(stderr, "kvbench: driver '%s' is not built in\n", a);
		return -1;
	case 'H': c->target.host = a; return 0;
	case 'u': c->url_arg = a; return 0;
	case 'a': c->password_arg = a; return 0;
	case O_ASKPASS: c->askpass = 1; return 0;
	case O_NO_AUTH_WARNING: c->no_auth_warning = 1; return 0;
	case O_CONNINFO: c->target.conninfo = a; return 0;
	case O_TABLE: c->target.table = a; return 0;
	case O_NO_INDEX: c->target.no_index = 1; return 0;
	case O_INDEX_ONLY: c->target.index_only = 1; return 0;
	case O_USER: c->target.user = a; return 0;
	case O_SERVER: c->server_cmd = a; return 0;
	case O_VERIFY: c->verify = 1; return 0;
	case O_BEFORE_VERIFY: c->before_verify = a; return 0;
	case O_KEY_STATS: c->key_stats = 1; return 0;
	case O_JSON: c->json_path = a; return 0;
	case O_CSV: c->csv_path = a ? a : "-"; return 0;
	case O_HDR: c->hdr_path = a; return 0;
	case O_PLOT: c->plot_path = a; return 0;
	case 'q': c->quiet = 1; return 0;
	case O_PHASE:
		if (!apply_phase(c, a))
			return 0;
		break;
	case O_RECORD:
		if (strcmp(a, "fields") == 0 || strcmp(a, "value") == 0 ||
		    strcmp(a, "doc") == 0) {
			c->record = strcmp(a, "value") == 0 ? RECORD_VALUE
							    : RECORD_FIELDS;
			c->target.doc = strcmp(a, "doc") == 0;
			return 0;
		}
		break;
	case 'p':
		if (!wl_set_prop(&c->p, a, err, sizeof(err)))
			return 0;
		fprintf(stderr, "kvbench: %s\n", err);
		return -1;
	default:
		if (!apply_number(c, opt, a))
			return 0;
	}
	fprintf(stderr, "kvbench: bad value '%s'\n", a ? a : "");
	return -1;
}

/* The command line, quoted for a shell, for the reports. */
static void build_cmdline(struct kb_config *c, int argc, char **argv)
{
	size_t n = 0, cap = sizeof(c->cmdline);

	c->cmdline[0] = 0;
	for (int i = 0; i < argc && n < cap; i++) {
		const char *a = i ? argv[i] : "kvbench";
		int plain =
		    *a && strspn(a, "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789-_=.,:/+@%") == strlen(a);

		n += (size_t)snprintf(c->cmdline + n, cap - n,
				      plain ? "%s%s" : "%s'%s'", i ? " " : "",
				      a);
	}
}

static unsigned ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

/* Options are gathered first and applied after the workload's defaults,
 * which depend on the workload named after them. */
static int parse_args(struct kb_config *c, int argc, char **argv)
{
	struct optval *ov = calloc((size_t)argc + 1, sizeof(*ov));
	int n = 0, opt, rc = -1;
	char err[256];

	if (!ov)
		return -1;
	while ((opt = getopt_long(argc, argv, short_opts, long_opts, NULL)) !=
	       -1) {
		if (opt == 'h' || opt == 'V' || opt == '?') {
			if (opt == 'h')
				usage(stdout);
			if (opt == 'V')
				printf("kvbench %s\n", KVBENCH_VERSION);
			rc = opt == '?' ? -1 : 1;
			goto out;
		}
		ov[n++] = (struct optval){opt, optarg};
	}
	if (optind != argc - 1 || !(c->wl = wl_find(argv[optind]))) {
		fprintf(stderr,
			optind == argc - 1 ? "kvbench: unknown workload '%s'\n"
					   : "kvbench: name one workload%s\n",
			optind < argc ? argv[optind] : " (see --help)");
		goto out;
	}
	c->driver = kb_drivers[0];
	c->target.host = "127.0.0.1";
	c->seed = 1;
	wl_defaults(c, ncpu());
	for (int i = 0; i < n; i++)
		if (apply_option(c, ov[i].opt, ov[i].arg))
			goto out;
	if (!c->driver) {
		fprintf(stderr, "kvbench: no driver built in\n");
		goto out;
	}
	if (target_apply(c, err, sizeof(err))) {
		fprintf(stderr, "kvbench: %s\n", err);
		goto out;
	}
	if (!c->target.port)
		c->target.port = c->driver->default_port;
	if (c->target.doc && strcmp(c->driver->name, "postgres")) {
		fprintf(stderr, "kvbench: --record doc: postgres only (mongodb "
				"records are documents already)\n");
		goto out;
	}
	if (c->do_run && !c->ops && !c->duration && !c->p.operationcount)
		c->duration = 10;
	if (wl_finish(c, err, sizeof(err))) {
		fprintf(stderr, "kvbench: %s\n", err);
		goto out;
	}
	if (c->target.doc &&
	    (c->wl->kind == WL_INGEST || c->wl->kind == WL_UUID)) {
		fprintf(stderr, "kvbench: --record doc: YCSB's records and "
				"geo's documents only\n");
		goto out;
	}
	if (c->target.doc && c->verify && c->wl->kind == WL_GEO) {
		fprintf(stderr, "kvbench: --verify: geo's documents come back "
				"from jsonb as JSON, not as written\n");
		goto out;
	}
	c->target.index = c->wl->kind == WL_INDEX;
	if (c->target.index && strcmp(c->driver->name, "mongodb") &&
	    strcmp(c->driver->name, "mongowire") &&
	    strcmp(c->driver->name, "postgres")) {
		fprintf(stderr,
			"kvbench: %s: mongodb, mongowire and postgres only\n",
			c->wl->name);
		goto out;
	}
	if (c->target.index && !c->target.table)
		c->target.table = "ixdocs";
	c->target.scans = c->p.scanproportion > 0;
	c->target.fields = c->wl->kind == WL_YCSB && c->record == RECORD_FIELDS;
	c->target.fieldcount = c->p.fieldcount;
	if (!c->target.table) /* YCSB's table, and kvbench's own shape's */
		c->target.table = c->target.doc && c->target.fields
				      ? "usertable_doc"
				  : c->target.doc    ? "kvbench_doc"
				  : c->target.fields ? "usertable"
						     : "kvbench";
	build_cmdline(c, argc, argv);
	rc = 0;
out:
	free(ov);
	return rc;
}

/* ---- running --------------------------------------------------------- */

/* Enough descriptors for 4,000 connections, if the hard limit allows. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int run_hook(const char *cmd)
{
	int st = system(cmd);

	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "kvbench: --before-verify command failed: %s\n",
			cmd);
		return -1;
	}
	return 0;
}

static int run_phase(struct kb_run *run, enum kb_phase ph,
		     struct kb_result *res, size_t *nres)
{
	char err[512];

	if (engine_run(run, ph, &res[*nres], err, sizeof(err))) {
		fprintf(stderr, "kvbench: %s phase: %s\n", kb_phase_names[ph],
			err);
		return -1;
	}
	(*nres)++;
	return 0;
}

static uint64_t phase_errors(const struct kb_result *r)
{
	uint64_t n = 0;

	for (int i = 0; i < ERR_NTYPES; i++)
		n += r->errors[i];
	return n;
}

/* What to say about a phase's errors: the count, the kinds, the first
 * error, and what to do when it is the server asking for a password. */
static void explain_errors(const struct kb_config *c, const struct kb_result *r)
{
	const char *e = r->first_error;

	fprintf(stderr,
		"kvbench: %s phase: %" PRIu64 " of %" PRIu64
		" operations failed (",
		kb_phase_names[r->phase], phase_errors(r),
		r->planned > r->ops ? r->planned : r->ops);
	for (int i = 0, n = 0; i < ERR_NTYPES; i++)
		if (r->errors[i])
			fprintf(stderr, "%s%s %" PRIu64, n++ ? ", " : "",
				kb_err_names[i], r->errors[i]);
	fprintf(stderr, ")%s%s\n", *e ? "; first error: " : "", e);
	if (strstr(e, "authentication required") || strstr(e, "NOAUTH"))
		fprintf(stderr,
			"kvbench: the server wants a password%s: give it with "
			"--askpass, KVCLI_AUTH, -a or -u\n",
			c->target.password ? ", and not the one given" : "");
}

/* A load that lost inserts leaves the run phase reading records that are
 * not there: its figures would measure errors, so the run stops here. */
static int load_failed(const struct kb_config *c, const struct kb_result *r)
{
	if (!phase_errors(r) && (!r->planned || r->ops >= r->planned))
		return 0;
	explain_errors(c, r);
	fprintf(stderr, "kvbench: the load phase failed%s\n",
		c->do_run ? "; the run phase was not started" : "");
	return 1;
}

/* load, run, verify; 0 or -1. */
static int run_phases(struct kb_run *run, struct kb_result *res, size_t *nres)
{
	const struct kb_config *c = run->cfg;

	if (c->do_load && run_phase(run, PHASE_LOAD, res, nres))
		return -1;
	if (c->do_load && load_failed(c, &res[*nres - 1]))
		return -1;
	if (c->do_run && run_phase(run, PHASE_RUN, res, nres))
		return -1;
	if (!c->verify)
		return 0;
	if (c->before_verify && run_hook(c->before_verify))
		return -1;
	if (run->fst ? fst_vtable(run->fst, &run->vt)
		     : vtable_build(&run->vt, run->vlogs, c->threads)) {
		fprintf(stderr, "kvbench: --verify: out of memory\n");
		return -1;
	}
	for (unsigned i = 0; i < c->threads; i++)
		if (run->vlogs[i].oom) {
			fprintf(stderr, "kvbench: --verify: out of memory\n");
			return -1;
		}
	return run_phase(run, PHASE_VERIFY, res, nres);
}

static int write_reports(const struct kb_report *r)
{
	const struct kb_config *c = r->cfg;
	int rc = 0;

	/* The table goes to stdout unless a machine format asked for it. */
	if ((!c->csv_path || strcmp(c->csv_path, "-")) &&
	    (!c->json_path || strcmp(c->json_path, "-")))
		report_table(stdout, r);
	if (c->csv_path) {
		FILE *f =
		    strcmp(c->csv_path, "-") ? fopen(c->csv_path, "w") : stdout;

		if (f) {
			report_csv(f, r);
			if (f != stdout)
				fclose(f);
		} else {
			rc = -1;
		}
	}
	if (c->json_path && report_json(c->json_path, r))
		rc = -1;
	if (rc)
		fprintf(stderr, "kvbench: could not write a report: %s\n",
			strerror(errno));
	/* These two say what went wrong themselves. */
	if (c->hdr_path && report_hdr(c->hdr_path, r))
		rc = -1;
	if (c->plot_path && report_plot(c->plot_path, r))
		rc = -1;
	return rc;
}

static int fcheck_failed(const struct kb_fcheck *f)
{
	return f->stale || f->corrupt || f->missing;
}

static int verify_failed(const struct kb_run *run)
{
	const struct kb_verify_result *v = &run->vres;

	return v->done &&
	       (v->lost || v->mismatched || v->errors ||
		fcheck_failed(&v->audit) || fcheck_failed(&v->reads));
}

/* Any failed operation of the run phase (the load's stop the run before
 * it starts): said on stderr, the reports have the detail. */
static int run_failed(const struct kb_config *c, const struct kb_result *res,
		      size_t nres)
{
	int failed = 0;

	for (size_t i = 0; i < nres; i++)
		if (res[i].phase == PHASE_RUN && phase_errors(&res[i])) {
			explain_errors(c, &res[i]);
			failed = 1;
		}
	return failed;
}

int main(int argc, char **argv)
{
	struct kb_config cfg = {0};
	struct kb_run run = {.cfg = &cfg};
	struct kb_server_mem mem = {0};
	struct kb_result res[PHASE_N];
	struct kb_report rep = {.cfg = &cfg, .res = res};
	char target[300], err[512];
	size_t nres = 0;
	int rc = 1, prc = parse_args(&cfg, argc, argv);

	if (prc) {
		target_free(&cfg);
		return prc > 0 ? 0 : EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if (cfg.target.conninfo && !strcmp(cfg.driver->name, "mongodb"))
		snprintf(target, sizeof(target), "mongodb (its URI)");
	else if (cfg.target.host[0] == '/')
		snprintf(target, sizeof(target), "%s unix:%s", cfg.driver->name,
			 cfg.target.host);
	else
		snprintf(target, sizeof(target), "%s %s:%u", cfg.driver->name,
			 cfg.target.host, cfg.target.port);
	rep.target = target;
	if (cfg.server_cmd && (mem.pid = server_start(&cfg, cfg.server_cmd, 30,
						      err, sizeof(err))) < 0) {
		fprintf(stderr, "kvbench: --server: %s\n", err);
		return 1;
	}
	if (cfg.server_pid)
		mem.pid = cfg.server_pid;
	if (mem.pid > 0) {
		run.mem = &mem;
		server_sample(&mem);
	}
	if (wl_shared_init(&run.ws, &cfg) ||
	    (cfg.verify &&
	     !(run.vlogs = calloc(cfg.threads, sizeof(*run.vlogs)))) ||
	    (cfg.verify && run.ws.fields && cfg.driver->fields &&
	     (!(run.fst = calloc(1, sizeof(*run.fst))) ||
	      fst_init(run.fst, cfg.p.fieldcount, cfg.p.insertstart)))) {
		fprintf(stderr, "kvbench: out of memory\n");
		goto out;
	}
	run.vres.fields = run.ws.fields;
	if (run_phases(&run, res, &nres) == 0)
		rc = 0;
	if (run.mem)
		server_sample(&mem);
	rep.nres = nres;
	rep.verify = run.vres.done ? &run.vres : NULL;
	rep.mem = run.mem;
	if (nres && write_reports(&rep))
		rc = 1;
	if (rc == 0 && verify_failed(&run))
		rc = EXIT_VERIFY;
	if (run_failed(&cfg, res, nres) && rc == 0)
		rc = EXIT_OPS_FAILED;
out:
	if (cfg.server_cmd && mem.pid > 0)
		server_stop(mem.pid, 30);
	for (size_t i = 0; i < nres; i++)
		result_free(&res[i]);
	for (unsigned i = 0; run.vlogs && i < cfg.threads; i++)
		vlog_free(&run.vlogs[i]);
	free(run.vlogs);
	vtable_free(&run.vt);
	if (run.fst)
		fst_free(run.fst);
	free(run.fst);
	verify_result_free(&run.vres);
	wl_shared_free(&run.ws);
	target_free(&cfg);
	return rc;
}
