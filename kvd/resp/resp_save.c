/* resp_save.c - SAVE, BGSAVE, LASTSAVE and SHUTDOWN: Redis's persistence
 * and shutdown commands, in kvd's terms.
 *
 * kvd has no snapshot file to write: every acknowledged write is in a
 * shard's journal already, and a checkpoint moves the journal's records
 * into LMDB.  So SAVE checkpoints every shard and answers +OK once each
 * has (its committer does it between two batches, KVD_W_CHECKPOINT: the
 * io thread never waits, and the reply keeps its place in the
 * connection's order); BGSAVE asks every committer for a checkpoint and
 * answers at once; LASTSAVE is the time by which every shard had finished
 * the last one asked for (shard.h).  SHUTDOWN stops kvd as SIGTERM
 * does (kvd_io_request_stop raises it), after the connection's earlier writes: NOSAVE
 * and SAVE change nothing, since a clean stop always checkpoints and
 * nothing acknowledged is lost either way.
 */
#include "kv_status.h"
#include "log.h"
#include "net/loop.h"
#include "resp.h"
#include "store.h"
#include "net/write.h"

static const char err_busy[] = "ERR Background save already in progress";

const char *resp_save(struct kvd_conn *c, struct resp_req *r)
{
	if (kvd_committers_saving(c->io->srv->com))
		return err_busy;
	return kvd_write_all(c, r->cmd, KVD_W_CHECKPOINT) == KV_OK
		   ? NULL
		   : resp_err_nomem;
}

/* BGSAVE [SCHEDULE]: inside EXEC, Redis only schedules it, and says so. */
const char *resp_bgsave(struct kvd_conn *c, struct resp_req *r)
{
	int again = 0;

	if (r->argc > 2 || (r->argc == 2 && !resp_eq(r->a[1], "schedule")))
		return resp_err_syntax;
	again = r->argc == 2;
	if (kvd_committers_bgsave(c->io->srv->com, again)) {
		if (!again)
			return err_busy;
		resp_add_status(c, "Background saving scheduled");
	} else if (kvd_excl_current()) {
		resp_add_status(c, "Background saving scheduled");
	} else {
		resp_add_status(c, "Background saving started");
	}
	return NULL;
}

const char *resp_lastsave(struct kvd_conn *c, struct resp_req *r)
{
	int failed;

	(void)r;
	resp_add_int(
	    c, (int64_t)(kvd_committers_lastsave(c->io->srv->com, &failed) /
			 1000));
	return NULL;
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], checked as Redis 7.0
 * does.  No reply: the connection closes, and the server stops. */
const char *resp_shutdown(struct kvd_conn *c, struct resp_req *r)
{
	static const char *const opts[] = {"nosave", "save", "now", "force",
					   "abort"};
	unsigned seen = 0;
	struct resp_it it;
	struct kv_slice a;

	resp_it_init(r, 1, &it);
	for (uint32_t i = 1; i < r->argc; i++) {
		unsigned k = 0;

		resp_it_next(&it, &a);
		while (k < 5 && !resp_eq(a, opts[k]))
			k++;
		if (k == 5)
			return resp_err_syntax;
		seen |= 1u << k;
	}
	if (((seen & 16) && seen != 16) || (seen & 3) == 3)
		return resp_err_syntax;
	if (seen & 16)
		return "ERR No shutdown in progress.";
	log_info("SHUTDOWN from RESP connection %llu: stopping as on SIGTERM",
		 (unsigned long long)c->id);
	c->flags |= CONN_CLOSING;
	kvd_io_request_stop(c->io->srv);
	return NULL;
}
