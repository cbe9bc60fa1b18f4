/* main.c - kvd's entry point: configuration, start-up order, signals, and
 * the orderly stop (stop accepting, answer what is in flight, commit,
 * flush, close). */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "net/auth.h"
#include "ops/backup.h"
#include "config.h"
#include "doc/doc_mdoor.h"
#include "doc/doc_ttl.h"
#include "kvd.h"
#include "log.h"
#include "net/loop.h"
#include "repl/repl.h"
#include "store.h"
#include "net/tls.h"

/* One line on stderr; the log file (when there is one) gets it too. */
static int fail(const char *msg)
{
	fprintf(stderr, "kvd: %s\n", msg);
	if (kvd_log_is_file())
		log_error("%s", msg);
	return 1;
}

#ifdef KVD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#else
static int sd_notify(int unset, const char *state)
{
	(void)unset;
	(void)state;
	return 0;
}
#endif

/* SIGHUP: reopen the log file and apply what the configuration now says,
 * where that can change at run time.  (logrotate sends SIGUSR1, which
 * reopens the log file and nothing else.) */
static void reload(struct kvd_config *cfg, int argc, char **argv)
{
	char old_log[sizeof(cfg->log_file)];

	sd_notify(0, "RELOADING=1");
	/* Reopen first, so that what the reload logs lands in the new file. */
	if (kvd_log_reopen())
		log_error("SIGHUP: cannot reopen the log file %s",
			  cfg->log_file);
	memcpy(old_log, cfg->log_file, sizeof(old_log));
	kvd_config_reload(cfg, argc, argv);
	kvd_log_set_level((int)cfg->log_level);
	/* New certificates for new connections (the files may have been
	 * replaced in place: they are read again even if unchanged). */
	kvd_tls_reload(cfg);
	if (strcmp(old_log, cfg->log_file) &&
	    kvd_log_open(cfg->log_file, (int)cfg->log_level))
		log_error("SIGHUP: cannot open the log file %s", cfg->log_file);
	log_info("SIGHUP: configuration reloaded, log file reopened");
	sd_notify(0, "READY=1");
}

/* SIGUSR1: logrotate moved the log file away; reopen it by name.  The
 * configuration is not read: an edit in progress is not applied. */
static void reopen_log(const struct kvd_config *cfg)
{
	if (kvd_log_reopen())
		log_error("SIGUSR1: cannot reopen the log file %s: %s",
			  cfg->log_file, strerror(errno));
	else
		log_info("SIGUSR1: log file reopened");
}

/* Wait for SIGTERM or SIGINT, serving SIGHUP and SIGUSR1 meanwhile. */
static void wait_for_stop(const sigset_t *set, struct kvd_config *cfg, int argc,
			  char **argv)
{
	for (;;) {
		int sig;

		if (sigwait(set, &sig))
			continue;
		if (sig == SIGHUP) {
			reload(cfg, argc, argv);
			continue;
		}
		if (sig == SIGUSR1) {
			reopen_log(cfg);
			continue;
		}
		log_info("received %s: stopping",
			 sig == SIGINT ? "SIGINT" : "SIGTERM");
		sd_notify(0, "STOPPING=1");
		return;
	}
}

int main(int argc, char **argv)
{
	static struct kvd_config cfg;
	struct kvd_server srv = {.cfg = &cfg};
	char err[768];
	sigset_t set;
	int rc;

	/* No fast bins: a request of the MongoDB door allocates blocks of
	 * 1 KiB and more (a document's buffer, a write's state), and each
	 * such malloc made glibc consolidate the fast bins the request's
	 * small frees had filled: 2.1% of kvd's samples under YCSB A
	 * through the door, gone with them, the small blocks still served
	 * by the per-thread cache (docs/architecture.md, section 12). */
	(void)mallopt(M_MXFAST, 0);
	rc = kvd_config_load(&cfg, argc, argv);
	if (rc)
		return rc < 0 ? 2 : 0;
	if (kvd_auth_setup(&cfg, err, sizeof(err)) ||
	    kvd_backup_check(&cfg, err, sizeof(err)) ||
	    kvd_tls_setup(&cfg, err, sizeof(err))) {
		fprintf(stderr, "kvd: %s\n", err);
		return 2;
	}
	if (cfg.test_config) {
		printf("kvd: configuration %s is valid\n",
		       cfg.config_file[0] ? cfg.config_file : "(flags only)");
		return 0;
	}
	if (kvd_log_open(cfg.log_file, (int)cfg.log_level)) {
		fprintf(stderr, "kvd: cannot open log file %s\n", cfg.log_file);
		return 1;
	}
	/* Signals go to the main thread only: block them before any thread
	 * exists, so every thread inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	srv.start_ms = kvd_now_ms();
	srv.nio = cfg.threads;
	if (cfg.restore[0] &&
	    kvd_restore(cfg.restore, cfg.data_dir, (int)cfg.restore_force, err,
			sizeof(err)))
		return fail(err);
	if (kvd_io_listen(&srv, err, sizeof(err))) {
		kvd_io_destroy(&srv);
		return fail(err);
	}
	if (kvd_repl_prepare(&cfg, err, sizeof(err)) ||
	    kvd_server_open_store(&srv, err, sizeof(err))) {
		kvd_io_destroy(&srv);
		return fail(err);
	}
	/* The door before any thread: a configuration it refuses (a
	 * password SASLprep forbids) ends kvd with nothing running yet. */
	if (kvd_io_create(&srv, err, sizeof(err)) ||
	    doc_mdoor_start(&srv, argc, argv, err, sizeof(err))) {
		kvd_io_destroy(&srv);
		kvd_store_close(srv.store);
		return fail(err);
	}
	if (kvd_server_start_committers(&srv))
		return fail("cannot start threads");
	/* Before the io threads: a replica refuses writes from the first. */
	if (kvd_repl_start(&srv, err, sizeof(err)))
		return fail(err);
	if (doc_ttl_start(&srv))
		return fail("cannot start the TTL monitor");
	if (kvd_io_start(&srv))
		return fail("cannot start threads");
	log_info(
	    "kvd %s ready: %s port %u%s%.0u%s%.0u%s%s%s%s, %u io thread%s, "
	    "%u shard%s, durability %s, data %s",
	    KVD_VERSION, cfg.bind, srv.port,
	    srv.resp_port ? ", resp port " : "", srv.resp_port,
	    srv.mongo_port ? ", mongo port " : "", srv.mongo_port,
	    cfg.unix_socket[0] ? ", unix socket " : "", cfg.unix_socket,
	    cfg.resp_port && cfg.resp_unix_socket[0] ? ", resp unix socket "
						     : "",
	    cfg.resp_port ? cfg.resp_unix_socket : "", srv.nio,
	    srv.nio == 1 ? "" : "s", srv.nshards, srv.nshards == 1 ? "" : "s",
	    kvd_durability_name(cfg.durability), cfg.data_dir);
	kvd_tls_log(&cfg);
	sd_notify(0, "READY=1");
	wait_for_stop(&set, &cfg, argc, argv);
	kvd_replica_stop(); /* it waits for committers: before they stop */
	doc_ttl_stop();	    /* so does it */
	kvd_io_stop(&srv);
	kvd_committers_stop(srv.com);
	kvd_repl_stop(&srv);
	kvd_backup_wait();
	kvd_io_destroy(&srv);
	doc_mdoor_stop();
	kvd_store_close(srv.store);
	kvd_tls_cleanup();
	log_info("stopped cleanly");
	return 0;
}
